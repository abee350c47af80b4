"""The shell classifier, pure-Python twin (the reference): what a bash command observes or mutates.

``classify_shell("sed -n '1,20p' a.py | grep foo")`` -> ``("observe", "a.py")``. The command is
lexed the way a POSIX shell splits it (quotes, escapes, ``|``/``&&``/``||``/``;``/newlines,
subshells, redirections, heredocs, ``$(...)``), each simple command is classified from a table
of well-known programs, and the parts are combined:

* any part that runs code the classifier cannot read (``python``, ``pytest``, ``make``, any
  unknown program) makes the whole command ``exec``: its side effects are unknown;
* otherwise any part that writes (``sed -i``, ``tee``, ``>``/``>>``, ``mv``, ``cp``, ``rm``,
  ``touch``, ``patch``, ``git apply|checkout|stash``...) makes it ``mutate``, with the written
  paths as targets, or None when a writer's targets cannot be read (``git stash``);
* otherwise any reader (``cat``, ``head``, ``tail``, ``nl``, ``sed -n``, ``grep``, ``rg``,
  ``ls``, ``find``, ``git diff|log|status``...) makes it ``observe`` with the paths it reads;
* a command of only neutral parts (``cd``, ``echo``, ``export``) is ``other``.

``cd DIR`` earlier in the same command prefixes later relative targets, so ``cd /repo && cat a``
observes ``/repo/a``.

This module is the reference for the compiled twin ``loopcore._native_shell`` (src/_native/
shell.pyx), which must give the same answer for every input. Neither twin caches: the
dispatcher ``loopcore.taxonomy.shell`` puts one lru_cache in front of whichever is live.
"""

from __future__ import annotations

import posixpath
import re

__all__ = ["classify_shell", "classify_shell_access", "lex", "parse_patch_targets"]

# Reserved words and prefixes that do not change what the command after them does.
_PREFIX_WORDS = frozenset(
    {"if", "then", "else", "elif", "do", "while", "until", "!", "{", "}", "time"}
)
_NEUTRAL_SEGMENTS = frozenset({"fi", "done", "esac", "for", "select", "in", "function"})
# Programs with no effect on files and nothing worth observing.
_NEUTRAL = frozenset(
    {
        "cd",
        "pushd",
        "popd",
        "echo",
        "printf",
        "true",
        "false",
        "pwd",
        "export",
        "set",
        "unset",
        "alias",
        "unalias",
        "which",
        "type",
        "whoami",
        "id",
        "uname",
        "hostname",
        "date",
        "sleep",
        "clear",
        "exit",
        "return",
        "read",
        "test",
        "[",
        "[[",
        "]]",
        "shift",
        "local",
        "declare",
        "typeset",
        ":",
        "wait",
        "trap",
        "ulimit",
        "umask",
        "hash",
        "history",
        "jobs",
        "shopt",
        "seq",
        "yes",
        "basename",
        "dirname",
        "nproc",
        "expr",
        "let",
        "break",
        "continue",
    }
)
# Readers of the files named on their command line.
_READERS = frozenset(
    {
        "cat",
        "nl",
        "less",
        "more",
        "wc",
        "stat",
        "file",
        "tac",
        "xxd",
        "od",
        "hexdump",
        "strings",
        "md5sum",
        "sha1sum",
        "sha256sum",
        "sha512sum",
        "cksum",
        "readlink",
        "realpath",
        "ls",
        "ll",
        "tree",
        "du",
        "diff",
        "cmp",
        "bat",
        "head",
        "tail",
        "uniq",
        "cut",
        "paste",
        "comm",
        "join",
        "column",
        "fold",
        "fmt",
        "rev",
        "expand",
        "unexpand",
        "iconv",
        "base64",
        "zcat",
        "zless",
        "bzcat",
        "xzcat",
        "lsattr",
        "getfacl",
        "colordiff",
        "vimdiff",
        "pr",
        "look",
        "numfmt",
    }
)
# Readers whose first positional argument is a program or pattern, not a file.
_PATTERN_READERS = frozenset(
    {"grep", "egrep", "fgrep", "rg", "ag", "ack", "zgrep", "jq", "yq", "git-grep"}
)
# Searchers that read a whole tree when no path is named: rg, ag, ack and git grep search the
# working folder, grep -r searches "." (see _searches_tree). jq, yq and a plain grep read their
# stdin then, which is no file.
_TREE_SEARCHERS = frozenset({"rg", "ag", "ack", "git-grep"})
_RECURSIVE_GREPS = frozenset({"grep", "egrep", "fgrep"})
# Observers of the system rather than of files.
_SYSTEM_OBSERVERS = frozenset(
    {
        "ps",
        "top",
        "df",
        "free",
        "uptime",
        "lsof",
        "env",
        "printenv",
        "whereis",
        "locate",
        "netstat",
        "ss",
        "pgrep",
        "pip-list",
    }
)
# Writers of the paths named on their command line (all operands are targets).
_WRITERS = frozenset({"touch", "mkdir", "rm", "rmdir", "unlink", "truncate", "shred", "mkfifo"})
# Commands that run another command given as their arguments.
_WRAPPERS = frozenset(
    {
        "sudo",
        "nohup",
        "nice",
        "command",
        "builtin",
        "exec",
        "stdbuf",
        "ionice",
        "chronic",
        "unbuffer",
    }
)
_SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh"})

# Options that take a value (so the next word is not an operand), per program.
_VALUE_OPTS: dict[str, frozenset[str]] = {
    "head": frozenset({"-n", "-c", "--lines", "--bytes"}),
    "tail": frozenset({"-n", "-c", "--lines", "--bytes", "-s", "--pid", "--sleep-interval"}),
    "grep": frozenset(
        {
            "-e",
            "-f",
            "-m",
            "-A",
            "-B",
            "-C",
            "-d",
            "-D",
            "--max-count",
            "--context",
            "--after-context",
            "--before-context",
            "--label",
            "--exclude",
            "--include",
            "--exclude-dir",
            "--color",
            "--colour",
        }
    ),
    "rg": frozenset(
        {
            "-e",
            "-f",
            "-g",
            "-t",
            "-T",
            "-m",
            "-A",
            "-B",
            "-C",
            "-M",
            "-j",
            "--glob",
            "--type",
            "--type-not",
            "--max-count",
            "--context",
            "--after-context",
            "--before-context",
            "--max-columns",
            "--threads",
            "--iglob",
            "--sort",
            "--regexp",
            "--file",
            "--max-depth",
            "--color",
            "--colors",
            "-r",
            "--replace",
        }
    ),
    "ag": frozenset({"-G", "-A", "-B", "-C", "-m", "--ignore", "--file-search-regex"}),
    "sed": frozenset({"-e", "-f", "-l", "--expression", "--file", "--line-length"}),
    "awk": frozenset({"-F", "-v", "-f", "-i"}),
    "cut": frozenset({"-d", "-f", "-b", "-c", "--delimiter", "--fields"}),
    "sort": frozenset({"-k", "-t", "-o", "-S", "-T", "--key", "--field-separator", "--output"}),
    "ls": frozenset(
        {"-I", "-w", "--ignore", "--hide", "--width", "--sort", "--format", "--color", "-T"}
    ),
    "tree": frozenset({"-L", "-I", "-P", "--filelimit"}),
    "du": frozenset({"-d", "--max-depth", "-B", "--exclude"}),
    "diff": frozenset({"-U", "-C", "-x", "-X", "--label", "-I"}),
    "wc": frozenset(),
    "nl": frozenset({"-b", "-n", "-w", "-s", "-v", "-i", "-l", "-d"}),
    "jq": frozenset({"--arg", "--argjson", "--slurpfile", "--rawfile", "--indent", "-L", "--args"}),
    "xxd": frozenset({"-c", "-l", "-s", "-g", "-o"}),
    "od": frozenset({"-A", "-t", "-N", "-j", "-w"}),
    "cp": frozenset({"-t", "--target-directory", "-S", "--suffix"}),
    "mv": frozenset({"-t", "--target-directory", "-S", "--suffix"}),
    "chmod": frozenset({"--reference"}),
    "tee": frozenset(),
    "touch": frozenset({"-d", "-t", "-r", "--date", "--reference"}),
    "mkdir": frozenset({"-m", "--mode"}),
    "truncate": frozenset({"-s", "--size", "-r", "--reference"}),
    "find": frozenset(),
    "git": frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path"}),
    "xargs": frozenset(
        {
            "-I",
            "-i",
            "-n",
            "-P",
            "-L",
            "-d",
            "-E",
            "-s",
            "-a",
            "--max-args",
            "--max-procs",
            "--delimiter",
            "--arg-file",
            "--replace",
        }
    ),
    "timeout": frozenset({"-s", "-k", "--signal", "--kill-after"}),
    "sudo": frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-U", "-r", "-t"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "env": frozenset({"-u", "-C", "-S", "--unset", "--chdir", "--split-string"}),
    "patch": frozenset(
        {
            "-p",
            "-d",
            "-D",
            "-F",
            "-o",
            "-r",
            "-z",
            "-B",
            "-V",
            "-Y",
            "--directory",
            "--output",
            "--reject-file",
            "--fuzz",
            "--strip",
            "--input",
        }
    ),
}
_VALUE_OPTS["egrep"] = _VALUE_OPTS["fgrep"] = _VALUE_OPTS["zgrep"] = _VALUE_OPTS["grep"]
_VALUE_OPTS["gawk"] = _VALUE_OPTS["mawk"] = _VALUE_OPTS["nawk"] = _VALUE_OPTS["awk"]

_GIT_OBSERVE = frozenset(
    {
        "diff",
        "log",
        "status",
        "show",
        "blame",
        "grep",
        "ls-files",
        "ls-tree",
        "rev-parse",
        "describe",
        "shortlog",
        "cat-file",
        "reflog",
        "rev-list",
        "whatchanged",
        "annotate",
        "diff-tree",
        "diff-index",
        "diff-files",
        "show-ref",
        "name-rev",
        "for-each-ref",
        "help",
        "version",
        "count-objects",
        "check-ignore",
        "merge-base",
        "ls-remote",
        "var",
    }
)
_GIT_MUTATE = frozenset(
    {
        "apply",
        "checkout",
        "switch",
        "restore",
        "reset",
        "stash",
        "commit",
        "add",
        "rm",
        "mv",
        "merge",
        "rebase",
        "cherry-pick",
        "revert",
        "clean",
        "am",
        "pull",
        "clone",
        "init",
        "tag",
        "branch",
        "fetch",
        "worktree",
        "submodule",
        "config",
        "remote",
        "notes",
        "update-index",
        "read-tree",
        "checkout-index",
        "mergetool",
        "gc",
        "prune",
        "push",
        "bisect",
    }
)
# git subcommands whose bare operands are paths (so they can name targets without "--").
_GIT_PATH_OPERANDS = frozenset(
    {"add", "rm", "mv", "restore", "blame", "annotate", "ls-files", "check-ignore"}
)
# How deep nested commands are read: scripts run by "bash -c" (or fed to a shell as a heredoc)
# and commands run by "find -exec". Deeper ones are unknown code (exec). The bound keeps the
# recursion (and the compiled twin's C stack) shallow whatever the input, and the work too: each
# "-exec" of a find re-reads the rest of its line, so "find -exec find -exec ..." costs 2**depth.
_MAX_DEPTH = 4
_DEV_NULL = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "-"})
# What a command reads when it reads no path it names but may see any file or any state: `git
# diff`, `git status`, `grep -r foo`, `ps`. It holds "$", as a path built from a variable does,
# so it makes the whole script's reads None (anything), whatever else the script does (a
# `git diff > p.patch` reads the repository as `git diff` does), and it is never a target.
# A command that reads only its stdin (`cat`, `grep x`, `jq .` with no file) reads no path.
_ANYTHING = "$*"
_ASSIGN_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
# The path runs to the line's last non-blank character: a greedy `.*\S` finds it in linear time
# (a lazy `.+?\s*$` re-scanned the trailing blanks at every step, quadratic on a long line).
_PATCH_FILE_RE = re.compile(
    r"^\*\*\* (?:Update|Add|Delete) File: (.*\S)\s*$|^\*\*\* Move to: (.*\S)\s*$", re.M
)


class _Seg:
    """One simple command: its words, redirections and heredoc bodies, and the text of the
    tokens of its words that may hold a command substitution (see :func:`_substitutions`)."""

    __slots__ = ("words", "redirs", "heredocs", "subs")

    def __init__(self) -> None:
        self.words: list[str] = []
        self.redirs: list[tuple[str, str]] = []
        self.heredocs: list[str] = []
        # unquoted "$(...)" and "`...`" tokens as written, and the raw text (escapes kept) of
        # the double-quoted ones holding "$(" or "`"; None while there are none
        self.subs: list[str] | None = None

    def add_sub(self, text: str) -> None:
        if self.subs is None:
            self.subs = [text]
        else:
            self.subs.append(text)


# "$(" and what follows, up to two levels of parentheses deep, and its ")" when there is one.
# Written unrolled (no "(?:[^()]+|...)*"): each character can be matched one way only, so an
# unclosed "$((..." costs linear time instead of exponential backtracking.
_TOKEN = re.compile(
    r"""(?P<ws>[ \t\r]+)
    |(?P<nl>\n)
    |(?P<comment>\#[^\n]*)
    |(?P<sq>'[^']*'?)
    |(?P<dq>"[^"\\]*(?:\\.[^"\\]*)*"?)
    |(?P<sub>\$\([^()]*(?:\([^()]*(?:\([^()]*\)[^()]*)*\)[^()]*)*\)?)
    |(?P<bt>`[^`]*`?)
    |(?P<psub>[<>]\([^()]*(?:\([^()]*(?:\([^()]*\)[^()]*)*\)[^()]*)*\)?)
    |(?P<esc>\\.?)
    |(?P<op>&&|\|\||;;|\|&|&>>|&>|[0-9]*(?:<<<|<<-|<<|>>|>&|<&|>\||<>|>|<)|[|&;()])
    |(?P<word>[^\s\\'"$`<>|&;()\#]+|[$\#])""",
    re.S | re.X,
)
_DQ_ESC = re.compile(r'\\(["\\$`\n])')
_REDIR_OPS = {
    "<<<": "<<<",
    "<<-": "<<-",
    "<<": "<<",
    ">>": ">>",
    ">&": "dup",
    "<&": "dup",
    ">|": ">",
    "<>": ">",
    ">": ">",
    "<": "<",
    "&>": ">",
    "&>>": ">>",
}


# The fast lexer: one findall gives (token, trailing blanks) pairs; heredocs need the slow one.
_FAST = re.compile(
    r"""([^\s\\'"$`<>|&;()\#][^\s\\'"$`<>|&;()]*|'[^']*'?|"[^"\\]*(?:\\.[^"\\]*)*"?"""
    r"""|&&|\|\||;;|\|&|&>>|&>|>>|>&|<&|>\||<>|<<<|[|&;()\n<>]"""
    r"""|\$\([^()]*(?:\([^()]*(?:\([^()]*\)[^()]*)*\)[^()]*)*\)?|`[^`]*`?|\\.?|(?<![^\s;&|()<>])\#[^\n]*|\$|\#)([ \t\r]*)""",
    re.S,
)
_OP_START = frozenset("|&;()\n<>")
_FD_OPS = frozenset(
    {">", ">>", "<", ">&", "<&", ">|", "<>", "<<<"}
)  # may follow a descriptor number
# What only the general lexer handles: a heredoc, a process substitution ("<(", ">("), or a
# blank other than space/tab/CR/newline (form feed, NBSP...), which splits nothing but which
# the fast regex would skip together with the blanks after it.
# The blanks are Python's str.isspace() ones minus " \t\r\n", listed: a negated class
# ([^\S \t\r\n]) scans a long script about 20% slower.
_NEEDS_SLOW = re.compile(
    "<<(?!<)|[<>][(]|[\x0b\x0c\x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
)
# First characters of the tokens _lex_fast cannot take as plain text.
_FAST_SPECIAL = frozenset("'\"\\#") | _OP_START


def _lex(s: str) -> list[_Seg]:
    """Split a shell script into simple commands (best effort, never raises)."""
    if _NEEDS_SLOW.search(s):
        return _lex_slow(s)
    return _lex_fast(s)


def _lex_fast(s: str) -> list[_Seg]:
    """The common case in one regex pass; the same segments as :func:`_lex_slow` (no heredocs)."""
    segs: list[_Seg] = []
    seg = _Seg()
    words = seg.words
    word: str | None = None  # the word being built (a str: words of several parts are rare)
    redir_op: str | None = None
    fd_ok = False
    for tok, ws in _FAST.findall(s):
        c = tok[0]
        if c not in _FAST_SPECIAL:
            # Plain text, $(...), `...` or a lone $: most tokens, so the shortest path.
            if c == "`" or (c == "$" and len(tok) > 1):
                seg.add_sub(tok)  # `...` or $(...): a lone "$" is one character ("$x": two tokens)
            if ws:
                if word is not None:
                    tok = word + tok
                    word = None
                if redir_op is None:
                    words.append(tok)
                else:
                    if redir_op != "<<<":
                        seg.redirs.append((redir_op, tok))
                    redir_op = None
            elif word is None:
                word = tok
                # only bare digits right before a redirection name a file descriptor
                fd_ok = tok.isascii() and tok.isdigit()  # a descriptor is ASCII digits, as in sh
            else:
                word += tok
                fd_ok = False
            continue
        if c == "'":
            part = tok[1:-1] if len(tok) > 1 and tok[-1] == "'" else tok[1:]
        elif c == '"':
            part = tok[1:-1] if len(tok) > 1 and tok[-1] == '"' else tok[1:]
            if "$(" in part or "`" in part:
                seg.add_sub(part)
            if "\\" in part:
                part = _DQ_ESC.sub(r"\1", part)
        elif c == "\\":
            if len(tok) == 1 or tok[1] == "\n":
                part = None  # line continuation
                fd_ok = False  # as in _lex_slow: "1\\<newline>>x" keeps 1 as a word
            else:
                part = tok[1]
        elif c == "#":
            if word is None:
                part = None  # a comment
                ws = " "
            elif len(tok) == 1:  # '#' glued to a word is a plain character
                part = "#"
            else:
                # The regex took '#' after an escaped operator ("\\;#2") for a comment, but a
                # word is still open there, so the rest of the line belongs to it: only the
                # general lexer can tell.
                return _lex_slow(s)
        else:  # an operator
            if word is not None:
                if redir_op is not None:
                    if redir_op != "<<<":
                        seg.redirs.append((redir_op, word))
                    redir_op = None
                elif not (fd_ok and tok in _FD_OPS):  # "2>": a descriptor, not an argument
                    words.append(word)
                word = None
            if tok in _REDIR_OPS:
                redir_op = _REDIR_OPS[tok]
            elif words or seg.redirs:
                segs.append(seg)
                seg = _Seg()
                words = seg.words
            continue
        if part is not None:
            if word is None:
                word = part
                fd_ok = False  # quoted or escaped digits are an argument
            else:
                word += part
                fd_ok = False
        if ws and word is not None:
            if redir_op is not None:
                if redir_op != "<<<":
                    seg.redirs.append((redir_op, word))
                redir_op = None
            else:
                words.append(word)
            word = None
    if word is not None:
        if redir_op is not None:
            if redir_op != "<<<":
                seg.redirs.append((redir_op, word))
        else:
            words.append(word)
    if words or seg.redirs:
        segs.append(seg)
    return segs


def lex(s: str) -> list[tuple[list[str], list[tuple[str, str]], list[str]]]:
    """The simple commands of script *s* as (words, redirections, heredoc bodies); never raises.

    Redirections are (op, target) with op one of ``>``, ``>>``, ``<``, ``dup``. Both twins give
    the same list for every input, which is what the twin tests check.
    """
    return [(seg.words, seg.redirs, seg.heredocs) for seg in _lex(s)]


def _heredoc_end(s: str, pos: int, delim: str, strip_tabs: bool) -> int:
    """Index of the line that ends a heredoc body starting at *pos* (-1 when there is none)."""
    if not delim:
        return -1
    k = pos
    while True:
        j = s.find(delim, k)
        if j < 0:
            return -1
        line_start = s.rfind("\n", 0, j) + 1
        k = j + len(delim)
        if line_start < pos:
            continue
        head = s[line_start:j]
        if head and not (strip_tabs and not head.strip("\t")):
            continue
        tail_end = s.find("\n", k)
        tail = s[k:] if tail_end < 0 else s[k:tail_end]
        if tail.rstrip("\r") == "":
            return line_start


def _lex_slow(s: str) -> list[_Seg]:
    """The general lexer (token by token, so heredoc bodies can be skipped whole)."""
    segs: list[_Seg] = []
    seg = _Seg()
    word: list[str] | None = None
    redir_op: str | None = None
    pending: list[tuple[str, bool, _Seg]] = []  # heredocs whose body starts at the next newline
    pos, n = 0, len(s)
    match = _TOKEN.match

    def end_word() -> None:
        nonlocal word, redir_op
        if word is None:
            return
        w = "".join(word)
        word = None
        if redir_op is not None:
            op, redir_op = redir_op, None
            if op in ("<<", "<<-"):
                pending.append((w, op == "<<-", seg))
            elif op != "<<<":
                seg.redirs.append((op, w))
        else:
            seg.words.append(w)

    while pos < n:
        m = match(s, pos)
        if m is None:  # cannot happen with the catch-all groups; never loop forever
            pos += 1
            continue
        kind = m.lastgroup
        tok = m.group()
        pos = m.end()
        if kind == "word":
            if word is None:
                word = [tok]
            else:
                word.append(tok)
        elif kind == "ws":
            end_word()
        elif kind == "sq":
            part = tok[1:-1] if len(tok) > 1 and tok.endswith("'") else tok[1:]
            if word is None:
                word = [part]
            else:
                word.append(part)
        elif kind == "dq":
            part = tok[1:-1] if len(tok) > 1 and tok.endswith('"') else tok[1:]
            if "$(" in part or "`" in part:
                seg.add_sub(part)
            if "\\" in part:
                part = _DQ_ESC.sub(r"\1", part)
            if word is None:
                word = [part]
            else:
                word.append(part)
        elif kind in ("sub", "bt"):
            seg.add_sub(tok)
            if word is None:
                word = [tok]
            else:
                word.append(tok)
        elif kind == "psub":
            # <(cmd) / >(cmd), a process substitution: its command runs as a command
            # substitution's does, and the word stands for a file the shell makes (what it
            # names is known only at run time, as for "$(...)")
            tok = "$" + tok[1:]
            seg.add_sub(tok)
            if word is None:
                word = [tok]
            else:
                word.append(tok)
        elif kind == "esc":
            if tok == "\\\n" or tok == "\\":
                continue  # line continuation
            if word is None:
                word = [tok[1]]
            else:
                word.append(tok[1])
        elif kind == "comment":
            if word is not None:  # '#' inside a word is a plain character
                word.append("#")
                pos = m.start() + 1
        elif kind == "op":
            if tok[0].isdigit():
                op = tok.lstrip("0123456789")
                if word is not None:  # digits glued to a word are part of it ("a\\22>x")
                    word.append(tok[: len(tok) - len(op)])
                elif redir_op is not None:  # "< 2<": the digits are the pending redirection's file
                    word = [tok[: len(tok) - len(op)]]
                tok = op  # else a file descriptor number, not an argument
            if tok in _REDIR_OPS:
                end_word()
                redir_op = _REDIR_OPS[tok]
            else:
                end_word()
                if seg.words or seg.redirs or seg.heredocs:
                    segs.append(seg)
                    seg = _Seg()
        else:  # newline
            end_word()
            if seg.words or seg.redirs or seg.heredocs:
                segs.append(seg)
                seg = _Seg()
            # Heredoc bodies begin on the line after the operator: consume them whole.
            for delim, strip_tabs, owner in pending:
                start, end = pos, _heredoc_end(s, pos, delim, strip_tabs)
                if end < 0:
                    owner.heredocs.append(s[start:])
                    pos = n
                else:
                    owner.heredocs.append(s[start : max(end - 1, start)])
                    j = s.find("\n", end)
                    pos = n if j < 0 else j + 1
            pending.clear()
    end_word()
    if seg.words or seg.redirs or seg.heredocs:
        segs.append(seg)
    return segs


def _operands(words: list[str], value_opts: frozenset[str], start: int = 1) -> list[str]:
    """The non-option arguments of a command line (``--`` ends the options)."""
    out: list[str] = []
    i, n = start, len(words)
    while i < n:
        w = words[i]
        if w == "--":
            out.extend(words[i + 1 :])
            break
        if w.startswith("-") and len(w) > 1:
            if w in value_opts:
                i += 1
            elif w[:2] in value_opts and len(w) > 2 and not w.startswith("--"):
                pass  # -n5 style: the value is glued on
        else:
            out.append(w)
        i += 1
    return out


def parse_patch_targets(text: str) -> tuple[str, ...]:
    """The files an apply_patch (Codex) patch touches: Update/Add/Delete File and Move to lines."""
    seen: dict[str, None] = {}
    for m in _PATCH_FILE_RE.finditer(text):
        seen[m.group(1) or m.group(2)] = None
    return tuple(seen)


# A classified part: (kind, observed targets, mutated targets, mutated-unknown flag)
_Part = tuple[str, list[str], list[str], bool]


def _wrapped_command(words: list[str], b: int, cmd: str) -> int:
    """Where the command run by the wrapper *cmd* at ``words[b]`` starts; -1 when it runs none.

    That command is the wrapper's first operand (see :func:`_operands`), past timeout's duration
    and env's assignments, and it starts at the first word after the wrapper equal to it.
    """
    value_opts = _VALUE_OPTS.get(cmd, frozenset())
    skip_duration = cmd == "timeout"
    env = cmd == "env"
    options = True
    i, n = b + 1, len(words)
    while i < n:
        w = words[i]
        i += 1
        if options:
            if w == "--":
                options = False
                continue
            if w.startswith("-") and len(w) > 1:
                if cmd == "command" and w[1] != "-" and ("v" in w or "V" in w):
                    return -1  # command -v / -V only says how a name resolves, as which does
                if w in value_opts:
                    i += 1
                continue
        if skip_duration:
            skip_duration = False
        elif not (env and _ASSIGN_RE.match(w)):
            return words.index(w, b + 1)
    return -1


def _classify_words(words: list[str], heredocs: list[str], depth: int) -> _Part:
    """Classify one simple command given as words (after redirections were taken out)."""
    b = 0  # words[b:] is the command: prefixes, assignments and wrappers (sudo, env...) move b on
    n = len(words)
    while True:
        while b < n:
            w = words[b]
            if w in _PREFIX_WORDS or ("=" in w and _ASSIGN_RE.match(w)):
                b += 1
                continue
            break
        if b >= n:
            return ("other", [], [], False)
        cmd = words[b]
        if "/" in cmd:
            cmd = cmd.rsplit("/", 1)[-1]
        if cmd in _NEUTRAL_SEGMENTS or words[b] in _NEUTRAL_SEGMENTS:
            return ("other", [], [], False)
        if not (cmd in _WRAPPERS or cmd in ("timeout", "env", "xargs", "time")):
            break
        # A loop, not a recursion: "sudo sudo ... sudo cat" has no depth to bound.
        b = _wrapped_command(words, b, cmd)
        if b < 0:
            # env alone prints the environment; xargs with no command runs echo; sudo alone
            # does nothing useful.
            return ("observe", [_ANYTHING], [], False) if cmd == "env" else ("other", [], [], False)
    if b:
        words = words[b:]
    if cmd in _NEUTRAL:
        return ("other", [], [], False)
    if cmd in _SHELLS:
        # bash -c 'script' / bash -lc 'script': classify the script itself.
        for j in range(1, len(words) - 1):
            if words[j].startswith("-") and not words[j].startswith("--") and "c" in words[j]:
                if depth < _MAX_DEPTH:
                    return _classify_script(words[j + 1], depth + 1)
                return ("exec", [], [], True)
        if len(words) == 1 and heredocs and depth < _MAX_DEPTH:
            return _classify_script(heredocs[0], depth + 1)
        return ("exec", [], [], True)
    if cmd in _READERS:
        ops = _operands(words, _VALUE_OPTS.get(cmd, frozenset()))
        if cmd in ("ls", "ll", "tree", "du") and not ops:
            ops = ["."]
        return ("observe", ops, [], False)
    if cmd in _PATTERN_READERS:
        opts = _VALUE_OPTS.get(cmd, frozenset())
        ops = _operands(words, opts)
        explicit_pattern = any(
            w[:1] == "-"
            and (w in ("-e", "-f", "--regexp", "--file") or w.startswith(("--regexp=", "--file=")))
            for w in words[1:]
        )
        if cmd == "rg" and "--files" in words:
            explicit_pattern = True
        if not explicit_pattern and ops:
            ops = ops[1:]
        if not ops and _searches_tree(cmd, words):
            ops = [_ANYTHING]
        return ("observe", ops, [], False)
    if cmd in _SYSTEM_OBSERVERS:
        return ("observe", [_ANYTHING], [], False)
    if cmd in ("sed", "gsed"):
        opts = _VALUE_OPTS["sed"]
        inplace = any(
            w == "-i"
            or w.startswith("-i")
            or w.startswith("--in-place")
            or (w.startswith("-") and not w.startswith("--") and "i" in w[1:] and w not in opts)
            for w in words[1:]
            if w.startswith("-") and w != "--"
        )
        ops = _operands(words, opts)
        if ops and not any(
            w[:1] == "-"
            and (
                w in ("-e", "-f", "--expression", "--file")
                or w.startswith(("--expression=", "--file="))
            )
            for w in words[1:]
        ):
            ops = ops[1:]  # the script
        if inplace:
            return ("mutate", ops, ops, not ops)  # an in-place edit reads what it rewrites
        return ("observe", ops, [], False)
    if cmd in ("awk", "gawk", "mawk", "nawk"):
        inplace = "inplace" in words and "-i" in words
        ops = _operands(words, _VALUE_OPTS["awk"])
        if "-f" not in words and ops:
            ops = ops[1:]
        if inplace:
            ops = [o for o in ops if o != "inplace"]
            return ("mutate", ops, ops, not ops)  # an in-place edit reads what it rewrites
        return ("observe", ops, [], False)
    if cmd == "sort":
        out = None
        for j, w in enumerate(words):
            if w in ("-o", "--output") and j + 1 < len(words):
                out = words[j + 1]
            elif w.startswith("--output="):
                out = w.split("=", 1)[1]
        ops = _operands(words, _VALUE_OPTS["sort"])
        if out:
            return ("mutate", ops, [out], False)  # sort -o out in: reads in
        return ("observe", ops, [], False)
    if cmd == "tr":
        return ("other", [], [], False)
    if cmd == "tee":
        ops = _operands(words, frozenset())
        ops = [o for o in ops if o not in _DEV_NULL]
        return ("mutate", [], ops, False) if ops else ("other", [], [], False)
    if cmd in _WRITERS:
        ops = _operands(words, _VALUE_OPTS.get(cmd, frozenset()))
        return ("mutate", [], ops, not ops)
    if cmd in ("chmod", "chown", "chgrp"):
        ops = _operands(words, _VALUE_OPTS.get(cmd, frozenset()))[1:]
        return ("mutate", [], ops, not ops)
    if cmd in ("mv", "cp", "ln", "install", "rsync", "scp"):
        ops = _operands(
            words, _VALUE_OPTS.get(cmd, frozenset({"-t", "-S", "-m", "-o", "-g", "-e"}))
        )
        tdir = next(
            (words[j + 1] for j, w in enumerate(words[:-1]) if w in ("-t", "--target-directory")),
            None,
        )
        if cmd == "mv":
            targets = ops + ([tdir] if tdir else [])
        elif tdir:
            targets = [tdir]
        else:
            targets = ops[-1:] if len(ops) >= 2 else []
        reads = [] if cmd == "mv" else (ops if tdir else ops[:-1])
        return ("mutate", reads, targets, not targets)
    if cmd == "dd":
        outs = [w[3:] for w in words[1:] if w.startswith("of=")]
        ins = [w[3:] for w in words[1:] if w.startswith("if=")]
        return ("mutate", ins, outs, False) if outs else ("observe", ins, [], False)
    if cmd == "patch":
        ops = _operands(words, _VALUE_OPTS["patch"])
        if any(w == "--dry-run" for w in words):
            return ("observe", ops, [], False)
        return ("mutate", [], ops[:1], not ops)
    if cmd in ("apply_patch", "applypatch"):
        text = "\n".join(heredocs) + "\n" + "\n".join(words[1:])
        targets = list(parse_patch_targets(text))
        return ("mutate", [], targets, not targets)
    if cmd == "perl":
        inplace, ops = _perl_operands(words)
        if inplace:
            return ("mutate", ops, ops, not ops)  # an in-place edit reads what it rewrites
    if cmd == "find":
        return _classify_find(words, depth)
    if cmd == "git":
        return _classify_git(words)
    return ("exec", [], [], True)


def _perl_operands(words: list[str]) -> tuple[bool, list[str]]:
    """(in place, file operands) of a perl command line. Options bundle (``-pi``, ``-lne``):
    ``e`` / ``E`` ending a bundle take the next word as the program (``-i -pe 's/a/b/' f``), the
    rest of a bundle after ``i`` is the backup suffix (``-pie`` edits in place, suffix "e"),
    after ``M``, ``m``, ``I``, ``l``, ``0``, ``C``, ``d``, ``D``, ``x``, ``F`` a glued value;
    ``-M`` and ``-I`` alone take the next word. Without ``-e`` / ``-E`` the first operand is
    the program file, not a file it edits."""
    out: list[str] = []
    inplace = code = False
    i, n = 1, len(words)
    while i < n:
        w = words[i]
        if w == "--":
            out.extend(words[i + 1 :])
            break
        if w[:1] == "-" and len(w) > 1 and w[:2] != "--":
            if w == "-M" or w == "-I":
                i += 1
            else:
                last = len(w) - 1
                for j in range(1, len(w)):
                    c = w[j]
                    if c == "e" or c == "E":
                        code = True
                        if j == last:
                            i += 1
                        break
                    if c == "i":
                        inplace = True
                        break
                    if c in "MmIl0CdDxF":
                        break
        elif w[:2] != "--":
            out.append(w)
        i += 1
    return inplace, (out if code else out[1:])


def _searches_tree(cmd: str, words: list[str]) -> bool:
    """The searcher *cmd* (of _PATTERN_READERS), given no path, reads a whole tree rather than
    its stdin: rg, ag, ack and git grep search the working folder; grep -r (-R, -rn...) "."."""
    if cmd in _TREE_SEARCHERS:
        return True
    return cmd in _RECURSIVE_GREPS and any(
        w in ("--recursive", "--dereference-recursive")
        or (w[:1] == "-" and w[1:2] != "-" and ("r" in w or "R" in w))
        for w in words[1:]
    )


def _classify_find(words: list[str], depth: int) -> _Part:
    paths: list[str] = []
    j = 1
    while j < len(words) and not words[j].startswith(("-", "(", "!", "\\(")):
        paths.append(words[j])
        j += 1
    if not paths:
        paths = ["."]
    if "-delete" in words:
        # Which files go is only known at run time.
        return ("mutate", [], [], True)
    for k, w in enumerate(words):
        if w in ("-exec", "-execdir", "-ok", "-okdir"):
            inner: list[str] = []
            for x in words[k + 1 :]:
                if x in (";", "+", "\\;"):
                    break
                inner.append(x)
            if not inner:
                part: tuple[str, list[str], list[str], bool] = ("other", [], [], False)
            elif depth >= _MAX_DEPTH:
                part = ("exec", [], [], True)  # "find -exec find -exec ...": too deep to read
            else:
                part = _classify_words([x for x in inner if x != "{}"], [], depth + 1)
            if part[0] in ("observe", "other"):
                continue
            # The files an -exec writes are only known at run time.
            return (part[0], [], [], True)
    return ("observe", paths, [], False)


# the options of `git fetch` that write the repository's own refs or history
_FETCH_LOCAL = ("--unshallow", "--deepen", "--shallow-", "--update-head-ok", "-u")


def _classify_git(words: list[str]) -> _Part:
    j = 1
    opts = _VALUE_OPTS["git"]
    while j < len(words) and words[j].startswith("-"):
        j += 2 if words[j] in opts else 1
    if j >= len(words):
        return ("other", [], [], False)
    sub = words[j]
    args = words[j + 1 :]
    paths = args[args.index("--") + 1 :] if "--" in args else []
    if sub in _GIT_PATH_OPERANDS and not paths:
        paths = [a for a in args if not a.startswith("-")]
    if sub == "stash" and args[:1] in (["list"], ["show"]):
        return ("observe", [_ANYTHING], [], False)
    if sub in ("branch", "tag", "remote", "config", "worktree") and (
        not args
        or all(a.startswith("-") for a in args)
        and not any(a in ("-d", "-D", "-m", "-M", "--delete", "--unset") for a in args)
        or args[:1] in (["list"], ["-l"], ["--list"], ["-v"], ["--get"], ["show"], ["get-url"])
    ):
        return ("observe", [_ANYTHING], [], False)
    if sub in _GIT_OBSERVE:
        # with no path after "--" it reads the repository: any file of it, or its history
        return ("observe", paths or [_ANYTHING], [], False)
    if sub in _GIT_MUTATE:
        if sub == "push":
            # the remote's history changes, not the repository's: a commit is never the undo of
            # a push, so pushing the next commit redoes nothing
            return ("mutate", [], ["git:remote"], False)
        if sub == "fetch" or (sub == "remote" and args[:1] == ["update"]):
            # what a fetch brings is the remote's (read through the repository's remote
            # settings); it writes the remote-tracking refs and FETCH_HEAD, nothing a commit,
            # a branch or `remote set-url` writes, and no content it could return to: a fetch
            # is never undone, so fetching again redoes nothing. A refspec with a local
            # destination (`main:main`) or a deepened history writes the repository too.
            writes = ["git:FETCH_HEAD", "git:refs/remotes"]
            if any(a.startswith(_FETCH_LOCAL) if a.startswith("-") else ":" in a for a in args):
                writes.append("git:repo")
            return ("mutate", ["git:repo", "git:remote", "git:dir"], writes, False)
        if sub in (
            "add",
            "commit",
            "tag",
            "branch",
            "config",
            "remote",
            "notes",
            "gc",
            "prune",
            "worktree",
            "submodule",
        ):
            # Only git's own state changes; the working tree is as it was. What it does depends
            # on the files of the .git folder (a stale index.lock makes it fail), which a
            # command of the agent's can write (see _git_dir).
            return ("mutate", ["git:dir"], ["git:repo"], False)
        if sub == "checkout" and not paths and "--" not in args:
            # "git checkout a.py" restores a file, "git checkout main" switches branches: an
            # operand names a file only when its last part has an extension.
            ops = [a for a in args if not a.startswith("-")]
            if (
                ops
                and all(_looks_like_file(a) for a in ops)
                and not any(a.startswith("-") for a in args)
            ):
                paths = ops
        if (
            sub in ("checkout", "restore", "rm", "mv")
            and paths
            and not any(_is_tree(p) for p in paths)
        ):
            return ("mutate", [], paths, False)
        return ("mutate", [], [], True)
    return ("exec", [], [], True)


def _looks_like_file(a: str) -> bool:
    """A git operand that names a file rather than a branch or commit: its last path part has
    an extension (``a.py``, ``src/x.cfg``); ``main``, ``HEAD~1`` and ``v1`` do not."""
    last = a.rsplit("/", 1)[-1]
    dot = last.rfind(".")
    return dot > 0 and dot < len(last) - 1 and "~" not in a and "^" not in a and ":" not in a


def _is_tree(p: str) -> bool:
    """A path that names a folder (the whole tree, "src/"): what it writes is unknown."""
    return p in (".", "./", "*", ":/") or p.endswith("/")


# A sed script that replaces a literal text by itself: "s/return a/return a/" or with g.
# The text holds no regex metacharacter (so it matches only itself) and is not empty (an empty
# regex reuses the previous one).
_NO_OP_SUB = re.compile(r"s([/|#,:@!])([^\\.*\[\]^$+?(){}|&/#,:@!\n;]+)\1\2\1g?")


def _sed_no_op(words: list[str]) -> bool:
    """True when a ``sed -i`` command line provably changes nothing: every script it runs is a
    substitution of a literal text by itself."""
    scripts: list[str] = []
    explicit = False
    i, n = 1, len(words)
    while i < n:
        w = words[i]
        if w in ("-e", "--expression"):
            if i + 1 >= n:
                return False
            scripts.append(words[i + 1])
            explicit = True
            i += 2
            continue
        if w.startswith("--expression="):
            scripts.append(w.split("=", 1)[1])
            explicit = True
        elif w in ("-f", "--file") or w.startswith("--file=") or w in ("-n", "--quiet", "--silent"):
            return False
        i += 1
    if not explicit:
        ops = _operands(words, _VALUE_OPTS["sed"])
        if not ops:
            return False
        scripts = [ops[0]]
    return bool(scripts) and all(_NO_OP_SUB.fullmatch(s) is not None for s in scripts)


def _no_op_command(command: str) -> bool:
    """A command of one simple ``sed -i`` part whose scripts provably change nothing."""
    segs = _lex(command)
    if len(segs) != 1 or segs[0].redirs or segs[0].subs is not None:
        return False
    words = segs[0].words
    return bool(words) and words[0] in ("sed", "gsed") and _sed_no_op(words)


def _classify_script(script: str, depth: int = 0) -> _Part:
    observed: list[str] = []
    mutated: list[str] = []
    unknown_mutation = False
    kinds: set[str] = set()
    cwd = ""
    for seg in _lex(script):
        words = seg.words
        if seg.subs is not None:
            # The commands of its substitutions run first, as parts of the script of their own.
            for text in seg.subs:
                for sub in _substitutions(text):
                    if depth >= _MAX_DEPTH:
                        return ("exec", [], [], True)  # too deep to read
                    kind, obs, mut, unk = _classify_script(sub, depth + 1)
                    if kind == "exec":
                        return ("exec", [], [], True)
                    if cwd:
                        obs = [_join(cwd, t) for t in obs]
                        mut = [_join(cwd, t) for t in mut]
                    kinds.add(kind)
                    observed.extend(obs)
                    mutated.extend(mut)
                    unknown_mutation = unknown_mutation or (unk and kind == "mutate")
        if words and words[0] == "cd":
            dest = words[1] if len(words) > 1 else "~"
            if dest == "-" or dest.startswith(("~", "$")):
                cwd = ""
            else:
                cwd = posixpath.normpath(posixpath.join(cwd, dest)) if cwd else dest
            continue
        kind, obs, mut, unk = (
            _classify_words(words, seg.heredocs, depth) if words else ("other", [], [], False)
        )
        if kind == "exec":
            # One part that runs unknown code makes the whole script exec, whatever the other
            # parts do, and an exec result carries no targets: the rest need not be read.
            return ("exec", [], [], True)
        for op, target in seg.redirs:
            if op == "dup" or target in _DEV_NULL:
                continue
            if op in (">", ">>"):
                mut = mut + [target]
                if op == ">>":
                    obs = obs + [target]  # an append's result depends on what was there
                if kind in ("other", "observe"):
                    kind = "mutate"
            elif op == "<":
                obs = obs + [target]
                if kind == "other":
                    kind = "observe"
        if cwd:
            obs = [_join(cwd, t) for t in obs]
            mut = [_join(cwd, t) for t in mut]
        kinds.add(kind)
        observed.extend(obs)
        mutated.extend(mut)
        unknown_mutation = unknown_mutation or (unk and kind in ("mutate", "exec"))
    if "mutate" in kinds:
        return ("mutate", observed, mutated, unknown_mutation)
    if "observe" in kinds:
        return ("observe", observed, [], False)
    return ("other", [], [], False)


# The lexer's "$(...)" token: "$(" and what follows, two levels of parentheses deep.
_SUB = re.compile(r"\$\([^()]*(?:\([^()]*(?:\([^()]*\)[^()]*)*\)[^()]*)*\)?", re.S)


def _substitutions(text: str) -> list[str]:
    """The commands run by the substitutions in *text*, a token recorded in ``_Seg.subs``.

    ``$(...)`` ends as the lexer's token does (its command drops the last ")" when the token
    ends with one); a backquoted command ends at the next backquote; a backslash escapes the
    next character; ``$((...))`` is arithmetic, whose own text is read on for substitutions.
    One pass: a substitution's command is read (and its own substitutions found) when it is
    classified.
    """
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
        elif c == "`":
            j = text.find("`", i + 1)
            if j < 0:
                j = n
            out.append(text[i + 1 : j])
            i = j + 1
        elif c == "$" and text.startswith("(", i + 1):
            if text.startswith("(", i + 2):
                i += 3  # arithmetic
                continue
            m = _SUB.match(text, i)
            tok = m.group() if m is not None else text[i:]  # the regex always matches "$("
            out.append(tok[2:-1] if tok.endswith(")") else tok[2:])
            i += len(tok)
        else:
            i += 1
    return out


def _join(cwd: str, t: str) -> str:
    if t.startswith(("/", "~", "$", "git:")):
        return t
    return posixpath.normpath(posixpath.join(cwd, t))


def _norm(t: str) -> str:
    # "./a.py", "a.py" and "src/../a.py" name one file; "src/" and "src" one folder.
    if not t or t.startswith("git:") or "://" in t:
        return t
    if "/." in t or "//" in t or t[0] == "." or t[-1] == "/":
        return posixpath.normpath(t)
    # No "." or ".." part, no empty part, no trailing slash: normpath would return t itself.
    return t


def _in_git_dir(t: str) -> bool:
    """A path inside a repository's ``.git`` folder, or that folder itself (``.git``,
    ``.git/index.lock``, ``sub/.git/HEAD``, ``/abs/repo/.git/refs/x``)."""
    return (
        t == ".git" or t.startswith(".git/") or t.endswith("/.git") or "/.git/" in t
    ) and "://" not in t


def _git_dir(observed: list[str], mutated: list[str]) -> tuple[list[str], list[str]]:
    """A write inside a ``.git`` folder (``rm -f .git/index.lock``) writes ``git:dir`` too,
    which every git command that changes the repository reads: a ``git add`` retried after
    the removal is no repeat. It reads ``git:repo``: a git command run since may have written
    the same file again (a ``git add`` leaves a new lock), so removing it again is no repeat
    either. It is no write of ``git:repo``: removing a lock undoes no commit or staging.
    """
    if not any(_in_git_dir(t) for t in mutated):
        return observed, mutated
    return observed + ["git:repo"], mutated + ["git:dir"]


def _pack(targets: list[str]) -> str | tuple[str, ...] | None:
    if len(targets) == 1:
        return _norm(targets[0])
    uniq = tuple(dict.fromkeys(_norm(t) for t in targets))
    if not uniq:
        return None
    return uniq[0] if len(uniq) == 1 else uniq


def classify_shell(command: str) -> tuple[str, str | tuple[str, ...] | None]:
    """(kind, target) of a shell command: kind is observe/mutate/exec/other; never raises.

    Uncached (see the module doc); ``loopcore.taxonomy.shell.classify_shell`` is the cached one.

    The target of a ``mutate`` is what it writes (None when a writer's targets cannot be
    read, which the analysis takes as "everything may have changed"); of an ``observe``, what
    it reads; of ``exec`` and ``other``, None.
    """
    if not isinstance(command, str):
        return ("exec", None)
    kind, observed, mutated, unknown = _classify_script(command)
    # A target built from a variable or a substitution ($f, $(...)) names nothing we can track.
    if any("$" in t or "`" in t for t in mutated):
        unknown = True
    observed = [t for t in observed if "$" not in t and "`" not in t]
    if kind == "mutate":
        return ("mutate", None if unknown else _pack(_git_dir(observed, mutated)[1]))
    if kind == "observe":
        return ("observe", _pack(observed))
    return (kind, None)


def _access_tuple(targets: list[str]) -> tuple[str, ...]:
    packed = _pack(targets)
    if packed is None:
        return ()
    return packed if isinstance(packed, tuple) else (packed,)


def classify_shell_access(
    command: str,
) -> tuple[str, str | tuple[str, ...] | None, tuple[str, ...] | None, tuple[str, ...] | None, bool]:
    """(kind, target, reads, writes, no_op) of a shell command; never raises.

    ``kind`` and ``target`` are those of :func:`classify_shell`. ``reads`` is what the command
    reads (None: anything, as for ``exec``, a reader without a path like ``git status``, or a
    path built from a variable); ``writes`` what it writes (None: everything, as for ``exec``,
    ``git stash``, ``git checkout BRANCH``). A pipeline can do both: ``git diff -- a.py > p.txt``
    reads ``("a.py",)`` and writes ``("p.txt",)``; an in-place edit or an append (``sed -i``,
    ``>> f``) also reads what it writes. ``no_op`` is True for a ``sed -i`` whose scripts
    replace a literal text by itself (it changes nothing).
    """
    if not isinstance(command, str):
        return ("exec", None, None, None, False)
    kind, observed, mutated, unknown = _classify_script(command)
    if kind == "exec":
        return ("exec", None, None, None, False)
    if kind == "mutate":
        observed, mutated = _git_dir(observed, mutated)
    if kind == "other":
        return ("other", None, (), (), False)
    reads: tuple[str, ...] | None
    if any("$" in t or "`" in t for t in observed):
        reads = None
    else:
        reads = _access_tuple(observed)
        if kind == "observe" and not reads:
            reads = None
    if kind == "observe":
        target = _pack([t for t in observed if "$" not in t and "`" not in t])
        return ("observe", target, reads, (), False)
    if any("$" in t or "`" in t for t in mutated):
        unknown = True
    if unknown:
        return ("mutate", None, reads, None, False)
    writes = _access_tuple(mutated)
    return ("mutate", _pack(mutated), reads, writes, _no_op_command(command))
