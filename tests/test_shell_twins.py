"""The shell classifier's twins give identical answers: random commands (hypothesis), every
shell command of the real traces, and pathological inputs (deep nesting, huge commands).

The pure twin (loopcore._shell_py) is the reference; the compiled one (loopcore._native_shell)
must match it on the result of ``classify_shell`` and ``classify_shell_access`` (what a command
reads and writes) and on the lexer's split (``lex``), and raise
exactly when it raises (neither ever does).
"""

from __future__ import annotations

import shlex

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from loopcore import _native_flag


@pytest.fixture(scope="module")
def twins():
    """(compiled, pure); tests that compare them skip when the compiled core is deselected."""
    if _native_flag.NO_EXTENSIONS:
        pytest.skip("LOOPCORE_NO_EXTENSIONS=1: no compiled twin to compare")
    return _native_flag.load_twin("shell", "c"), _native_flag.load_twin("shell", "py")


def outcome(fn, arg):
    """What fn(arg) does: ("ok", result) or ("raises", exception type)."""
    try:
        return ("ok", fn(arg))
    except Exception as exc:  # noqa: BLE001 - the point is to compare
        return ("raises", type(exc))


def assert_same(twins, command):
    c, py = twins
    assert outcome(c.classify_shell, command) == outcome(py.classify_shell, command), repr(command)
    assert outcome(c.classify_shell_access, command) == outcome(
        py.classify_shell_access, command
    ), repr(command)
    if isinstance(command, str):
        assert outcome(c.lex, command) == outcome(py.lex, command), repr(command)


# ------------------------------------------------------------------------------------------
# Random commands built from shell fragments

PROGRAMS = [
    "cat",
    "nl",
    "head",
    "tail",
    "ls",
    "ll",
    "tree",
    "du",
    "wc",
    "grep",
    "egrep",
    "fgrep",
    "rg",
    "ag",
    "ack",
    "git-grep",
    "jq",
    "yq",
    "sed",
    "gsed",
    "awk",
    "gawk",
    "sort",
    "tr",
    "tee",
    "touch",
    "mkdir",
    "rm",
    "chmod",
    "chown",
    "mv",
    "cp",
    "ln",
    "rsync",
    "dd",
    "patch",
    "apply_patch",
    "perl",
    "find",
    "git",
    "python",
    "pytest",
    "make",
    "bash",
    "sh",
    "zsh",
    "sudo",
    "env",
    "timeout",
    "xargs",
    "nohup",
    "nice",
    "time",
    "cd",
    "pushd",
    "echo",
    "printf",
    "export",
    "true",
    "ps",
    "df",
    "/usr/bin/cat",
    "./run.sh",
    "x/git",
    "if",
    "then",
    "fi",
    "do",
    "done",
    "for",
    "in",
    "!",
    "{",
    "}",
    "[[",
    "]]",
]
ARGS = [
    "a.py",
    "src/",
    "src/../a.py",
    "./x",
    "../y",
    "/abs/p",
    "//net/p",
    "~/h",
    "$HOME",
    "$f",
    "${x}",
    "`pwd`",
    "$(pwd)",
    # command substitutions: their commands are parts of the command
    "$(rm a.py)",
    "x=$(rm a.py)",
    '"$(rm a.py)"',
    "'$(rm a.py)'",
    "`rm a.py`",
    '"`cat a`"',
    '"\\$(rm a)"',
    "$(cat a.py)",
    "$(python x)",
    "$(sed -i s/a/b/ f.py)",
    "$(cd /r && rm a)",
    "$(echo $(rm b))",
    "$((i+1))",
    "$(( $(rm a) + 1 ))",
    '"$(cat "$f")"',
    "a b",
    "-",
    "--",
    "-n",
    "-n5",
    "-i",
    "-i.bak",
    "-ni",
    "--in-place",
    "-e",
    "-f",
    "-c",
    "-lc",
    "-t",
    "-o",
    "-r",
    "-R",
    "-rn",
    "--recursive",
    "--output=o",
    "--regexp=x",
    "--files",
    "-delete",
    "-exec",
    "-execdir",
    "-ok",
    "{}",
    "\\;",
    "+",
    "-name",
    "'*.py'",
    "inplace",
    "--dry-run",
    "-C",
    "-u",
    "-s",
    "5",
    "10s",
    "1,20p",
    "s/a/b/",
    "of=out",
    "if=in",
    "A=1",
    "a[1]=x",
    "B+=2",
    "1A=",
    "_=",
    "git:repo",
    "http://x/y",
    ".",
    "..",
    "./",
    "/",
    "dir/.",
    "a//b",
    # paths in and beside a repository's .git folder (a write there also writes git:dir)
    ".git",
    ".git/",
    ".git/index.lock",
    "./.git/index.lock",
    "sub/.git",
    "/r/.git/refs/x",
    ".gitignore",
    "x.git",
    "https://h/.git/x",
    # git subcommands and their arguments
    "apply",
    "checkout",
    "switch",
    "restore",
    "stash",
    "list",
    "show",
    "branch",
    "tag",
    "remote",
    "config",
    "-d",
    "-D",
    "--delete",
    "--list",
    "--get",
    "get-url",
    "diff",
    "log",
    "status",
    "blame",
    "add",
    "commit",
    "clean",
    "rev-parse",
    "ls-files",
    "worktree",
    "fetch",
    "unknown-sub",
    "reset",
    "--hard",
    "HEAD~1",
    "main",
    "src/x.cfg",
    "v1.2",
    ":/",
    "*",
    # sed scripts: literal no-op substitutions and ones that are not
    "'s/x/x/'",
    "'s/return a/return a/g'",
    "'s|a|a|'",
    "'s/a.b/a.b/'",
    "'s/x/y/'",
    "'s///'",
    "'264a y'",
    # apply_patch bodies
    "'*** Begin Patch\n*** Update File: p.py\n*** Move to: q.py\n*** End Patch'",
]
SEPARATORS = [
    " ",
    "  ",
    "\t",
    "\n",
    " | ",
    " && ",
    " || ",
    "; ",
    ";",
    ";;",
    " & ",
    "|&",
    " (",
    ") ",
    "{ ",
    " }",
    "\\\n",
    "\r\n",
]
REDIRECTIONS = [
    " > ",
    ">",
    " >> ",
    " < ",
    "2>",
    " 2>&1",
    " &>",
    "&>>",
    ">|",
    "<>",
    "<&",
    " <<< ",
    "3<",
    "0<",
    "1>",
    "12>",
    " /dev/null",
    " out.txt",
    " -",
]
HEREDOCS = [
    " <<EOF\n",
    " <<-EOF\n",
    " <<'EOF'\n",
    ' <<"E"OF\n',
    " <<\\EOF\n",
    "<<-",
    "<<",
    "\nEOF\n",
    "\n\tEOF\n",
    "EOF",
    "EOF\r\n",
    "\nEOFX\n",
    " body line\n",
]
ODD = [
    "'",
    '"',
    "\\",
    '\\"',
    "\\\\",
    "`",
    "$(",
    "<(",
    ">(",
    "$((",
    "$( (",
    "))",
    ")",
    "(",
    "$",
    "#",
    " #c",
    "a#b",
    "\r",
    "\x0b",
    "\x0c",
    "\x1c",
    "\x85",
    "\xa0",
    "\u2003",
    "\u3000",
    "é",
    "日本",
    "\U0001f600",
    "\ud800",
    "0",
    "12",
    "''",
    '""',
    '"a\\"b"',
    "'it'\\''s'",
    '"$x"',
    '"\\$x"',
    '"\\\n"',
    '"a\\',
]
FRAGMENTS = PROGRAMS + ARGS + SEPARATORS + REDIRECTIONS + HEREDOCS + ODD

fragment_commands = st.lists(st.sampled_from(FRAGMENTS), max_size=24).map("".join)
# Single characters that steer the lexer, for the corners the fragments do not reach.
char_commands = st.text(
    alphabet=st.sampled_from(list("ab01 \t\r\n\\'\"$()`|&;<>#-=~/.{}EOF\x0c\xa0")), max_size=40
)
# Programs with arguments, which reach the per-program rules more often than free fragments.
simple_commands = st.builds(
    lambda prog, args, tail: " ".join([prog, *args]) + tail,
    st.sampled_from(PROGRAMS),
    st.lists(st.sampled_from(ARGS), max_size=6),
    st.sampled_from(["", *SEPARATORS, *REDIRECTIONS]),
)
script_commands = st.lists(simple_commands, min_size=1, max_size=5).flatmap(
    lambda parts: st.lists(
        st.sampled_from(SEPARATORS + REDIRECTIONS), min_size=len(parts), max_size=len(parts)
    ).map(lambda seps: "".join(p + s for p, s in zip(parts, seps)))
)
# A script nested in bash -c / find -exec / a heredoc fed to a shell.
nested_commands = st.one_of(
    script_commands.map(lambda s: "bash -lc " + repr(s)),
    script_commands.map(lambda s: f'cd /repo && sh -c "{s}"'),
    simple_commands.map(lambda s: f"find . -name '*.py' -exec {s} {{}} \\;"),
    script_commands.map(lambda s: f"bash <<'EOF'\n{s}\nEOF\ncat a"),
    simple_commands.map(lambda s: f"sudo -u root timeout 5 env A=1 {s}"),
)
any_command = st.one_of(
    fragment_commands, char_commands, simple_commands, script_commands, nested_commands
)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_command)
def test_twins_agree_on_random_commands(twins, command):
    assert_same(twins, command)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
@example("\u00b9<")  # a non-ASCII digit is a word, never a file descriptor
@example("echo \u0663>f")
def test_twins_agree_on_any_unicode_text(twins, command):
    assert_same(twins, command)


@pytest.mark.parametrize(
    "command",
    [
        "",
        " ",
        "\n",
        "cat a.py",
        "cd /repo && cat a",
        "cd src/ && cat ../lib/x.c ./y",
        "cd ~ && cat a",
        "cd - ; cat a",
        "cd '' && cat a",
        "cat ''",
        "echo x > ''",
        "cd /r && cat '' b/",
        "ls ./",
        "cat a//b ./c/./d /x/../y",
        "cat //x ///y",
        "rg --files",
        "rg -e x",
        "grep -- -x a",
        "sed -n -- 1p a",
        "sed -i",
        "awk -i inplace '{}' f",
        "sort -o",
        "sort --output=",
        "mv -t dir a b",
        "cp -t '' a",
        "cp a",
        "chmod 644",
        "dd",
        "patch --dry-run < x",
        "git",
        "git -C",
        "git -c x",
        "git branch -D x",
        "git config --get x",
        "git stash show",
        "git rm -- a b",
        "diff <(cat a.py) <(sort b.py)",
        "tee >(rm x) < a",
        "echo x > >(cat)",
        "cat < <(ls",
        "a<(b)c>(d)",
        "cat 2<(x) 1>(y)",
        "cat <<(x)",
        "echo '<(rm a)' \"<(rm b)\" \\<(rm c)",
        "diff <(cat <(cat $(cat a))) b",
        "rm -f .git/index.lock",
        "rm -f .git/index.lock && git add a.py && git commit -m m",
        "cd sub && rm .git/index.lock",
        "rm -rf .git",
        "mv .git .git.bak",
        "echo x >> /r/.git/info/exclude",
        "rm -f $d/.git/index.lock",
        "cat .git/HEAD",
        "rm .gitignore x.git",
        "git fetch origin main:main",
        "find",
        "find -exec",
        "find . -exec ;",
        "find . -exec {} ;",
        "find . -exec cat {} + -exec rm {} \\;",
        "env",
        "env A=1",
        "env A=1 B=2 cat x",
        "timeout",
        "timeout 5",
        "sudo",
        "sudo -u",
        "xargs",
        "xargs -I {} cat {}",
        "time cat x",
        "if cat a; then rm b; fi",
        "a=1 b[2]=3 c+=4 cat x",
        "x=1",
        "bash",
        "bash -c",
        "bash -c ''",
        "bash <<EOF\ncat a\nEOF",
        "apply_patch <<'EOF'\n*** Add File: n.py\nEOF",
        "applypatch",
        "perl -i",
        "perl -e 1",
        "cat <<A <<B\na\nA\nb\nB\ncat c",
        "cat <<-\tEOF\n\tx\n\tEOF",
        "cat <<''\n\nx",
        "<<EOF\nbody\nEOF\ncat x",
        "cat <<EOF; python x\nbody\nEOF",
        "cat <<EOF | tee out\nEOFEOF\nEOF\r\n",
        "cat > a <<E\nE E\n E\nE",
        "echo $(cat a) > $(b)",
        "echo `x` > `y`",
        "x=$(rm a.py)",
        'echo "$(rm a.py)"',
        "echo `rm a.py`",
        "echo '$(rm a.py)'",
        'echo "\\$(rm a)" \\$(rm b)',
        "id=$(linctl issue create --title t)",
        "x=$(sed -i s/a/b/ f.py); echo $x",
        "x=$(cat a.py)",
        "ls $(pwd)",
        'git commit -m "$(cat msg)"',
        "x=$((i+1))",
        "x=$(( $(rm a) + 1 ))",
        "cd /r && x=$(rm a)",
        "cd $(mktemp -d) && rm a",
        "echo $(echo $(echo $(echo $(echo $(rm a)))))",
        "echo $()",
        'echo "$("',
        "echo `",
        'sed -i s/a/a/ f <<< "$(rm x)"',
        'cat "a\\"$(rm b)',
        "cat x\\ y",
        "cat 'a'\"b\"c\\d",
        'cat "a\\',
        "cat 'a",
        "cat \\",
        "echo 1\\\n>x",
        "echo 1\x0c>x",
        "cat a\xa0b",
        "cat a\u3000b",
        "cat \ud800",
        "cat 日本.txt",
        "cat \U0001f600",
    ],
)
def test_twins_agree_on_corner_cases(twins, command):
    assert_same(twins, command)


# What a command reads when its output goes to a file or a pipe: a command that reads no path
# it names but may see any file (reads None) still does; named reads stay; a command that reads
# only its stdin (a pipe, a heredoc) reads no file. (command, classify_shell_access)
READS_THROUGH_REDIRECTS = [
    ("git diff", ("observe", None, None, (), False)),
    ("git diff > /tmp/x.patch", ("mutate", "/tmp/x.patch", None, ("/tmp/x.patch",), False)),
    ("git status > s.txt", ("mutate", "s.txt", None, ("s.txt",), False)),
    ("git log > l.txt", ("mutate", "l.txt", None, ("l.txt",), False)),
    ("grep -r foo > out.txt", ("mutate", "out.txt", None, ("out.txt",), False)),
    ("grep -r foo | tee out.txt", ("mutate", "out.txt", None, ("out.txt",), False)),
    ("git diff src/a.py", ("observe", None, None, (), False)),
    ("git diff src/a.py > p", ("mutate", "p", None, ("p",), False)),
    ("git diff -- a.py > p", ("mutate", "p", ("a.py",), ("p",), False)),
    ("git status; cat a.py", ("observe", "a.py", None, (), False)),
    ("cd sub && git diff > p", ("mutate", "sub/p", None, ("sub/p",), False)),
    ("rg foo > o", ("mutate", "o", None, ("o",), False)),
    ("echo x | rg foo > o", ("mutate", "o", None, ("o",), False)),
    ("ls > l.txt", ("mutate", "l.txt", (".",), ("l.txt",), False)),
    ("cat a.py > b.py", ("mutate", "b.py", ("a.py",), ("b.py",), False)),
    ("cat <<EOF > f\nhi\nEOF", ("mutate", "f", (), ("f",), False)),
    ("echo hi | grep x > f", ("mutate", "f", (), ("f",), False)),
    ("printf 'a\\n' | tee f", ("mutate", "f", (), ("f",), False)),
    ("echo hi | grep x | tee f", ("mutate", "f", (), ("f",), False)),
    ("echo hi | jq . > f", ("mutate", "f", (), ("f",), False)),
    ("echo hi | grep x", ("observe", None, None, (), False)),
]


@pytest.mark.parametrize("command,access", READS_THROUGH_REDIRECTS)
def test_reads_survive_redirects_and_pipelines(impl, command, access):
    assert impl.shell.classify_shell_access(command) == access


@pytest.mark.parametrize("command", [c for c, _ in READS_THROUGH_REDIRECTS])
def test_twins_agree_on_reads_through_redirects(twins, command):
    assert_same(twins, command)


# In-place editors rewrite their file operands and read them; a program given with -e (in a
# bundle too: -pe, -lne) or as the first operand, and values of options, are not files.
IN_PLACE_EDITORS = [
    ("perl -pi -e 's/a/b/' f.py", ("mutate", "f.py", ("f.py",), ("f.py",), False)),
    ("perl -i -pe 's/a/b/' f.py", ("mutate", "f.py", ("f.py",), ("f.py",), False)),
    (
        "perl -i.bak -lne 'print' f.py g.py",
        ("mutate", ("f.py", "g.py"), ("f.py", "g.py"), ("f.py", "g.py"), False),
    ),
    ("perl -pie 's/a/b/' f.py", ("mutate", "f.py", ("f.py",), ("f.py",), False)),
    ("perl -pi fix.pl f.py", ("mutate", "f.py", ("f.py",), ("f.py",), False)),
    ("perl -I lib -pi -e 'x' f.py", ("mutate", "f.py", ("f.py",), ("f.py",), False)),
    ("perl -Mstrict -e 'print 1' f.py", ("exec", None, None, None, False)),
    ("awk -i inplace '{print}' f.py", ("mutate", "f.py", ("f.py",), ("f.py",), False)),
    ("gawk -i inplace -v x=1 '{print}' f.py", ("mutate", "f.py", ("f.py",), ("f.py",), False)),
    ("sort -o out.txt in.txt", ("mutate", "out.txt", ("in.txt",), ("out.txt",), False)),
    ("sort -u -o out.txt in.txt", ("mutate", "out.txt", ("in.txt",), ("out.txt",), False)),
]


@pytest.mark.parametrize("command,access", IN_PLACE_EDITORS)
def test_in_place_editors_read_and_write_their_files(impl, command, access):
    assert impl.shell.classify_shell_access(command) == access


@pytest.mark.parametrize("command", [c for c, _ in IN_PLACE_EDITORS])
def test_twins_agree_on_in_place_editors(twins, command):
    assert_same(twins, command)


@pytest.mark.parametrize("value", [None, 1, 2.5, b"cat a", ["cat", "a"], ("ls",)])
def test_twins_agree_on_non_strings(twins, value):
    c, py = twins
    assert c.classify_shell(value) == py.classify_shell(value) == ("exec", None)


def test_twins_agree_on_str_subclasses(twins):
    class Cmd(str):
        pass

    assert_same(twins, Cmd("cd /repo && sed -i 's/a/b/' x.py | tee log"))


# ------------------------------------------------------------------------------------------
# Pathological inputs: no crash, no C stack overflow, same answers, finite time


@pytest.mark.parametrize(
    "command",
    [
        "echo $((" + "a b" * 5000,  # unclosed arithmetic: once exponential backtracking
        "echo $(" + "(a" * 20000,
        "echo $(" + "(" * 50000 + ")" * 50000,
        "$(" * 50000,
        "(" * 100000 + "cat a" + ")" * 100000,
        "sudo " * 20000 + "cat x",  # wrappers loop, they do not recurse
        "env " + "A=1 " * 20000 + "cat x",
        "timeout 5 " * 5000 + "rm y",
        "find . -exec " * 2000 + "rm x",  # nested -exec is bounded
        "find . -exec " * 3 + "{} ;",
        'bash -c \'bash -c "bash -c \\"bash -c cat\\""\'',
        "bash -c " * 1000 + "cat x",
        "cat a && " * 20000 + "python x",
        "cat " + "a " * 100000,
        "cat <<EOF\n" + "EOF EOF " * 20000 + "\nEOF",  # a long line full of delimiter matches
        "cat <<-EOF\n" + "\t" * 10000 + "x\n\tEOF",
        "cat <<EOF\n" + "x\n" * 100000,
        "echo " + '"' + "\\\\" * 50000 + '"',
        "echo '" + "x" * 1_000_000 + "'",
        "echo " + "$(" * 20000 + "rm a" + ")" * 20000,  # nested substitutions are bounded
        "echo " + "`rm a` " * 20000,
        'echo "' + "$(cat a) " * 20000 + '"',
        "x=$(" * 5000 + "rm a",
        'bash -c "' + "x=$(bash -c 'echo $(rm a)') " * 2000 + '"',
    ],
)
def test_twins_agree_on_pathological_inputs(twins, command):
    assert_same(twins, command)


def nested_bash(depth: int, script: str = "cat a") -> str:
    for _ in range(depth):
        script = "bash -c " + shlex.quote(script)
    return script


def test_nesting_bounds(impl):
    """Nested commands are read 4 levels deep (bash -c scripts, find -exec), then are unknown code."""
    classify_shell = impl.shell.classify_shell
    assert classify_shell(nested_bash(4)) == ("observe", "a")
    assert classify_shell(nested_bash(5)) == ("exec", None)
    assert classify_shell("find . -exec " * 4 + "cat x") == ("observe", ".")
    assert classify_shell("find . -exec " * 5 + "cat x") == ("exec", None)
    assert classify_shell("sudo " * 5000 + "rm -f x") == ("mutate", "x")
    assert classify_shell("env " + "A=1 " * 5000) == ("observe", None)
    # a command substitution is a nested command too, one level deeper than its command
    assert classify_shell("echo `echo $(cat a)`") == ("observe", "a")
    assert classify_shell(nested_bash(3, "x=$(cat a)")) == ("observe", "a")
    assert classify_shell(nested_bash(4, "x=$(cat a)")) == ("exec", None)
    assert classify_shell(nested_bash(2, 'echo "$(echo `cat a`)"')) == ("observe", "a")
    assert classify_shell(nested_bash(3, 'echo "$(echo `cat a`)"')) == ("exec", None)


@pytest.mark.parametrize(
    "command",
    [
        "find . -exec " * 2000 + "cat x",
        ("find . -exec " * 4 + "cat x \\; ")
        * 500,  # each -exec re-reads the rest of the line: 2**depth
        "find . -exec cat {} \\; " * 3000,
    ],
)
def test_find_exec_chains_stay_cheap(twins, command):
    assert_same(twins, command)


# ------------------------------------------------------------------------------------------
# Every shell command of the real traces


@pytest.mark.traces
def test_twins_agree_on_every_shared_trace_command(twins, shared_traces, monkeypatch):
    from loopcore.adapters import load
    from loopcore.taxonomy import profiles

    seen: dict[str, None] = {}
    original = profiles.classify_shell
    original_access = profiles.classify_shell_access

    def recording(command):
        seen[command] = None
        return original(command)

    def recording_access(command):
        seen[command] = None
        return original_access(command)

    # the shell rules look these up per call
    monkeypatch.setattr(profiles, "classify_shell", recording)
    monkeypatch.setattr(profiles, "classify_shell_access", recording_access)
    for _ in load(shared_traces):
        pass
    assert len(seen) > 1000, "the traces should hold thousands of shell commands"
    c, py = twins
    differ = [
        cmd
        for cmd in seen
        if c.classify_shell(cmd) != py.classify_shell(cmd)
        or c.lex(cmd) != py.lex(cmd)
        or c.classify_shell_access(cmd) != py.classify_shell_access(cmd)
    ]
    assert differ == [], f"{len(differ)} commands differ, e.g. {differ[0][:200]!r}"
