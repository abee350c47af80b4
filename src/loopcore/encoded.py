"""Integer-encoded traces for the bulk burn analysis, and the dispatcher of its kernels.

``encode(traces)`` turns Step objects into numpy columns once; ``analyse_encoded`` then runs
the burn kernel (compiled ``loopcore._native_burn`` or the pure twin ``loopcore._burn_py``)
over millions of steps without touching a Python object. The kernel computes exactly the
findings of :func:`loopcore.burn.analyse_burn`; the rules are documented there and in
docs/burn.md.

Columns (one row per step, traces concatenated in order; ``trace_offsets[k]:trace_offsets[k+1]``
are the steps of trace ``k``, and step indices inside a trace are 0-based positions):

==================  =======  ===================================================================
column              dtype    meaning
==================  =======  ===================================================================
session             int32    index of the trace the step belongs to (``sessions[k]`` its name)
turn                int64    Step.turn; a run of equal turns is one turn group
kind                uint8    index into ``KINDS`` (observe, mutate, exec, ask, other)
tool                int32    interned Step.name (``tools[id]``)
target              int32    interned *set* of targets, -1 when unknown; the members of set
                             ``s`` are ``target_members[target_offsets[s]:target_offsets[s+1]]``
                             (target ids, ``targets[id]`` their names; CSR layout)
reads / writes      int32    the target sets a repeat of the step depends on (what it reads and
                             what it writes) / that it writes (same id space as ``target``);
                             -1 nothing, -2 anything / everything
args_hash           uint64   canonical_hash(args) (a shell command with its blanks normalised)
result_hash         uint64   canonical_hash([result, error]); 0 when the step has no outcome
flags               uint16   HAS_OUTCOME | ERROR | ESTIMATED | REJECTED | ABSOLUTE | NO_OP |
                             BACKUP | RESTORE | AFTER_USER | EXIT_NONZERO bits
tokens              int64    tokens_in + tokens_out: what a wasted call is charged
turn_tokens         int64    tokens_turn: the rest of the turn's output, charged only on request
degen               int64    tokens of the repeated part of the step's reply text (0 for none)
call                int32    interned (tool, args_hash): identical calls share an id; -1 for a
                             step that ran nothing (a rejected action, a plain reply)
obs                 int32    interned observation of an observe step with targets and an
                             outcome, else -1: (target set, outcome) when the outcome is
                             substantial, else (target set, outcome, call)
skey / sval         int32    content-state key (target, domain) and state (key, value) ids of a
                             single-target step that reveals content, else -1 (see below)
edit / undo         int32    interned (target, old, new) of an error-free replace edit and of
                             its inverse (target, new, old), else -1
==================  =======  ===================================================================

Content signatures (for oscillation): an observe step with one target and an outcome reveals
the state ``value = result_hash`` in the domain "this exact call" (same tool and args), so only
like-for-like reads are compared. A ``mutate`` with one target whose args carry a whole new
content (``content``/``file_text``/``contents``) reveals ``value = canonical_hash(content)`` in
the domain "written content", and is ABSOLUTE (its result does not depend on what was there),
as is a shell command that writes known text to one file (``echo 'x' > f``, ``printf``,
``cat <<'EOF' > f``). A ``mutate`` whose args carry a replacement pair
(``old_string``/``new_string``, ``old_str``/``new_str``, ``old``/``new``, ``old_text``/
``new_text``, ``oldText``/``newText``, ``search``/``replace``) has the edit signature
``(hash(old), hash(new))``; an edit undoes an earlier one when its signature is the swap. One
whose old and new are equal changes nothing (NO_OP: it writes nothing).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from . import _codes
from ._native_flag import NO_EXTENSIONS
from .hashing import canonical_hash
from .taxonomy.shell import lex
from .textloop import repeated_spans
from .trace import KINDS, Step, Trace

if TYPE_CHECKING or NO_EXTENSIONS:
    from ._burn_py import QUESTION_LOOP_MIN_TURNS, analyse_columns, findings_of, results_of
else:
    from ._native_burn import (  # noqa: F401 (re-export)
        QUESTION_LOOP_MIN_TURNS,
        analyse_columns,
        findings_of,
        results_of,
    )

__all__ = [
    "ABSOLUTE",
    "AFTER_USER",
    "BACKUP",
    "RESTORE",
    "ERROR",
    "ESTIMATED",
    "EXIT_NONZERO",
    "FINDING_KINDS",
    "HAS_OUTCOME",
    "NO_OP",
    "REJECTED",
    "BurnSettings",
    "EncodedAnalysis",
    "EncodedTrace",
    "StepFacts",
    "analyse_encoded",
    "encode",
    "step_facts",
]

_KIND_CODE = {k: i for i, k in enumerate(KINDS)}
OBSERVE, MUTATE = _codes.K_OBSERVE, _codes.K_MUTATE

#: Finding kinds in code order: the kernels write 1..6 (0 = not charged) into ``finding``.
FINDING_KINDS = (
    "redundant_observation",
    "duplicate_call",
    "oscillation",
    "question_loop",
    "rejected_action",
    "degenerate_output",
)

# Step flags (loopcore._codes holds the values):
# HAS_OUTCOME  the step recorded a result or an error
# ERROR        the step failed
# ESTIMATED    its tokens were estimated, not read from usage fields
# REJECTED     the harness rejected the action: nothing ran
# ABSOLUTE     a write of a whole known content: its result does not depend on what was there
# NO_OP        a mutation that provably changes nothing (it writes nothing)
# BACKUP       copies its one read file into a backup (cp F F.orig): the backup now equals F
# RESTORE      sets its one written file to a backup's content or to its committed content
# AFTER_USER   a user's message came just before the step: nothing earlier is evidence of a repeat
# EXIT_NONZERO the step ran and its command exited non-zero (meta["returncode"]): it may have
#              applied nothing, so it is no application of a mutation a later call could redo
HAS_OUTCOME, ERROR, ESTIMATED = _codes.S_HAS_OUTCOME, _codes.S_ERROR, _codes.S_ESTIMATED
REJECTED, ABSOLUTE, NO_OP = _codes.S_REJECTED, _codes.S_ABSOLUTE, _codes.S_NO_OP
BACKUP, RESTORE, AFTER_USER = _codes.S_BACKUP, _codes.S_RESTORE, _codes.S_AFTER_USER
EXIT_NONZERO = _codes.S_EXIT_NONZERO

_NOTHING, _ANYTHING = -1, -2
# A loop needs a 50-character chunk seen 10 times at distinct positions: 59 characters at least.
_LOOP_MIN_CHARS = 59

_REPLACE_KEYS = (
    ("old_string", "new_string"),
    ("old_str", "new_str"),
    ("old_text", "new_text"),
    ("oldText", "newText"),
    ("old", "new"),
    ("search", "replace"),
)
_CONTENT_KEYS = ("content", "file_text", "contents")
_WRITE_DOMAIN = ("write",)
_COMMAND_KEYS = ("command", "cmd", "script")
# the read set of a tool's read without a target (a search API in a trace that writes records,
# not files): a name no step writes, so only a write of everything changes it
_UNTARGETED = ("\x00untargeted",)
_FILE_LIKE = re.compile(r"[./]")  # a written target that names a file (a.py, src/x, Makefile.in)


@dataclass(frozen=True, slots=True)
class BurnSettings:
    """The settings of the burn analysis (the defaults are documented in docs/burn.md).

    * ``substantial_chars`` / ``substantial_lines``: an outcome is *substantial* when its text
      has at least this many characters and this many non-empty lines. Only a substantial
      outcome of a *content read* (a file printed from its start: ``cat``, ``head``, ``nl``,
      ``sed -n '1,Np'``, a Read/view tool; not a search, not a region such as ``tail`` or
      ``sed -n '260,270p'``) makes a *different* command on the same target a
      redundant observation (``cat a.py`` then ``sed -n '1,400p' a.py`` with the same text);
      two different commands whose identical output is short (empty, a line or two), and two
      different searches with the same hits (a narrower pattern proves there are no others),
      are two pieces of work.
    * ``charge_turn_output``: charge a wasted call's ``tokens_turn`` (the rest of its turn's
      output: reasoning, reply text) too; by default it is reported beside the charge.
    """

    substantial_chars: int = 400
    substantial_lines: int = 10
    charge_turn_output: bool = False

    def __post_init__(self) -> None:
        for name in ("substantial_chars", "substantial_lines"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"BurnSettings.{name} must be an integer >= 0; got {v!r}")


DEFAULT_SETTINGS = BurnSettings()


def _h(value: Any) -> int:
    # repr as the fallback keeps exotic payloads hashable; two different objects then never
    # compare equal, which errs on the side of "not waste".
    return canonical_hash(value, default=repr)


def _text_size(value: Any, depth: int = 0) -> tuple[int, int]:
    """(characters, non-empty lines) of the text a result holds: a str, or the strings of a
    dict/list result (two levels deep); other values by their repr."""
    if value is None:
        return 0, 0
    if isinstance(value, str):
        if "\n" not in value:
            return len(value), 1 if value.strip() else 0
        return len(value), sum(1 for line in value.split("\n") if line.strip())
    if depth < 2 and isinstance(value, dict):
        c = n = 0
        for v in value.values():
            a, b = _text_size(v, depth + 1)
            c += a
            n += b
        return c, n
    if depth < 2 and isinstance(value, (list, tuple)):
        c = n = 0
        for v in value:
            a, b = _text_size(v, depth + 1)
            c += a
            n += b
        return c, n
    if isinstance(value, (bool, int, float)):
        return len(repr(value)), 1
    return 0, 0


def _norm_command(args: Any) -> Any:
    """A shell call's args with the command's blanks normalised (runs of blanks to one space,
    none at the ends), so ``cat  a.py`` and ``cat a.py`` are one call."""
    if args.__class__ is dict and ("command" in args or "cmd" in args or "script" in args):
        for key in _COMMAND_KEYS:
            cmd = args.get(key)
            if cmd.__class__ is str:
                if (
                    "  " in cmd
                    or "\n" in cmd
                    or "\t" in cmd
                    or cmd[:1].isspace()
                    or cmd[-1:].isspace()
                ):
                    norm = " ".join(cmd.split())
                    if norm != cmd:
                        args = dict(args)
                        args[key] = norm
                return args
    return args


def _full_write(args: Any) -> bool:
    """A shell call that writes a whole known text to one file (echo/printf/cat heredoc > f)."""
    if args.__class__ is not dict:
        return False
    cmd = args.get("command", args.get("cmd"))
    if cmd.__class__ is not str or ">" not in cmd:
        return False
    return _shell_full_write(cmd)


def _shell_full_write(cmd: str) -> bool:
    segs = lex(cmd)
    if len(segs) != 1:
        return False
    words, redirs, heredocs = segs[0]
    if (
        not words
        or words[0] not in ("echo", "printf", "cat")
        or len(redirs) != 1
        or redirs[0][0] != ">"
    ):
        return False
    if words[0] == "cat" and (len(words) != 1 or len(heredocs) != 1):
        return False
    text = " ".join(words[1:]) + "".join(heredocs)
    return "$" not in text and "`" not in text


def _drop_comment_lines(args: Any) -> Any:
    """A shell call's args without the full-line comments that open its command (``# First add
    the import`` above the command itself): they run nothing, so the call is the same one."""
    if args.__class__ is dict:
        for key in _COMMAND_KEYS:
            cmd = args.get(key)
            if cmd.__class__ is str and "#" in cmd and "\n" in cmd:
                lines = cmd.split("\n")
                k = 0
                while k < len(lines) - 1 and (
                    not lines[k].strip() or lines[k].lstrip().startswith("#")
                ):
                    k += 1
                if k:
                    args = dict(args)
                    args[key] = "\n".join(lines[k:])
                return args
    return args


_EDITOR_COMMANDS = frozenset({"view", "create", "str_replace", "insert", "undo_edit", "write"})


def _shell_command(args: Any) -> str | None:
    """The shell command a call runs, or None for a call that is no shell command (an API tool,
    an editor tool whose ``command`` is one of its sub-commands such as ``str_replace``)."""
    if args.__class__ is not dict:
        return None
    for key in _COMMAND_KEYS:
        cmd = args.get(key)
        if cmd.__class__ is str:
            return None if cmd in _EDITOR_COMMANDS else cmd
    return None


# A backup's name: F.orig, F.bak, F.backup, F_backup.py, F.old, F.save, F~, or a copy kept in /tmp
_BACKUP_NAME = re.compile(r"(orig|bak|backup|\.old|\.save|~)[^/]*$|^/tmp/", re.IGNORECASE)
_CP_OPTIONS = frozenset({"-p", "-f", "-a", "-v", "-pf", "-fp", "--preserve"})


def _copy_flag(cmd: str, reads: tuple | None, writes: tuple | None) -> int:
    """BACKUP for ``cp F B`` (B a backup's name, F not), RESTORE for ``cp B F`` / ``cat B > F``
    and for ``git checkout [HEAD] -- F`` / ``git checkout F`` / ``git restore F`` (F set to its
    committed content); 0 for anything else. The command must be that one copy (after any
    ``cd``) and the classifier must have read it as reading the source and writing only F."""
    if not writes or len(writes) != 1:
        return 0
    # the copy itself, beside any cd and any echo of a message (``cp a b && echo done``)
    segs = [
        seg
        for seg in lex(cmd)
        if seg[0] and not (seg[0][0] == "cd" or (seg[0][0] == "echo" and not seg[1]))
    ]
    if len(segs) != 1:
        return 0
    words, redirs, heredocs = segs[0]
    if heredocs:
        return 0
    # what goes to the terminal (2>&1, 2>/dev/null) writes no file
    redirs = [r for r in redirs if r[0] != "dup" and r[1] != "/dev/null"]
    if words[0] == "git" and len(words) >= 3:
        rest = words[2:]
        if words[1] == "checkout" and rest[:1] == ["HEAD"]:
            rest = rest[1:]
        if rest[:1] == ["--"]:
            rest = rest[1:]
        elif words[1] == "restore" and rest[:1] == ["--worktree"]:
            rest = rest[1:]
        ok = words[1] in ("checkout", "restore") and len(rest) == 1 and not redirs
        return RESTORE if ok and not rest[0].startswith("-") and reads in ((), None, writes) else 0
    if words[0] == "cp" and not redirs:
        ops = [w for w in words[1:] if w not in _CP_OPTIONS]
        if len(ops) != 2 or any(w.startswith("-") for w in ops):
            return 0
        src, dst = ops
    elif words[0] == "cat" and len(words) == 2 and len(redirs) == 1 and redirs[0][0] == ">":
        src, dst = words[1], redirs[0][1]
    else:
        return 0
    if not reads or len(reads) != 1 or reads == writes:
        return 0
    src_backup = _BACKUP_NAME.search(src) is not None
    dst_backup = _BACKUP_NAME.search(dst) is not None
    if dst_backup and not src_backup:
        return BACKUP
    if src_backup and not dst_backup:
        return RESTORE
    return 0


_READER_PROGRAMS = frozenset(
    {"cat", "head", "tail", "sed", "nl", "less", "more", "bat", "batcat", "view"}
)
_READER_WORDS = ("read", "view", "open", "cat", "show")
_FROM_START = re.compile(r"1(,\$?\d*)?p")


def _content_read(name: str, args: Any) -> bool:
    """A call that prints a file's content (not a search or a filter of it): a shell command of
    one reader program (``cat``, ``head``, ``tail``, ``sed``, ``nl``..., after any ``cd``), an
    editor's ``view``, or a tool whose name says it reads (Read, read_file, open, view...)."""
    cmd = args.get("command", args.get("cmd")) if args.__class__ is dict else None
    if cmd.__class__ is str:
        if cmd == "view":
            return True
        parts = [words for words, _r, _h in lex(cmd) if words and words[0] != "cd"]
        if len(parts) != 1:
            return False
        words = parts[0]
        prog = words[0].rsplit("/", 1)[-1]
        if prog == "tail":
            return False  # the end of a file: a region, compared only with the same call
        if prog == "sed":
            # "sed -n '1,400p' f" prints the file from its start; "sed -n '260,270p' f" a region,
            # which may hold the same text as another region without repeating anything
            return any(_FROM_START.fullmatch(w) for w in words[1:])
        return prog in _READER_PROGRAMS
    low = name.lower()
    return any(w in low for w in _READER_WORDS)


class StepFacts(NamedTuple):
    """What the burn rules need to know about one step, hashed (built by :func:`step_facts`)."""

    kind: int
    targets: tuple[str, ...]  # sorted, unique; () when unknown
    call: tuple[str, int] | None  # (name, canonical args hash); None for a step that ran nothing
    has_outcome: bool
    outcome: int  # canonical_hash([result, error]) or 0
    error: bool
    edit: tuple[int, int] | None  # (hash old, hash new) of an error-free replace edit
    state: tuple[tuple, int] | None  # (domain, value) of a single-target content state
    reads: tuple[str, ...] | None  # sorted, unique; None = anything
    writes: tuple[str, ...] | None  # sorted, unique; None = everything; () for a no-op
    flags: int  # REJECTED | ABSOLUTE | NO_OP | BACKUP | RESTORE | EXIT_NONZERO (the outcome
    # bits are in the fields above)
    substantial: bool  # the outcome is substantial (see BurnSettings)


# StepFacts(...) runs a Python-level __new__; building the tuple directly is the same object
# without that extra call (step_facts runs once per step of every trace analysed).
_new_facts = tuple.__new__


def _set(t: tuple[str, ...] | None) -> tuple[str, ...] | None:
    if t is None or len(t) <= 1:
        return t
    return tuple(sorted(set(t)))


def step_facts(step: Step, settings: BurnSettings = DEFAULT_SETTINGS) -> StepFacts:
    """The hashed facts of *step* the burn rules compare; raises ValueError for an unknown kind."""
    kind = _KIND_CODE.get(step.kind)
    if kind is None:
        raise ValueError(f"unknown step kind {step.kind!r}; expected one of {KINDS}")
    target = step.target
    if target is None:
        targets: tuple = ()
    elif target.__class__ is str:  # the common case: one path
        targets = (target,)
    else:
        targets = tuple(sorted(set(step.targets)))
    flags = 0
    result, error = step.result, step.error
    has_outcome = result is not None or error is not None
    outcome = canonical_hash([result, error], default=repr) if has_outcome else 0
    meta = step.meta
    if type(meta) is dict and meta.get("not_run") is True and step.rejected is None:
        # the harness never ran the call (Claude Code cancels the calls of a batch that had not
        # started when one of them failed): it observed, wrote and repeated nothing, and its
        # synthetic error is no outcome a later call could repeat
        return _new_facts(
            StepFacts,
            (kind, targets, None, False, 0, error is not None, None, None, (), (), 0, False),
        )
    if step.rejected is not None:
        flags |= REJECTED
        return _new_facts(
            StepFacts,
            (
                kind,
                targets,
                None,
                has_outcome,
                outcome,
                error is not None,
                None,
                None,
                (),
                (),
                flags,
                False,
            ),
        )
    args = _drop_comment_lines(step.args)
    # blanks are normalised in an observe command only: a write's text (a heredoc) is its content
    call = (
        (step.name, canonical_hash(_norm_command(args) if kind == OBSERVE else args, default=repr))
        if step.name
        else None
    )
    failed = error is not None
    if has_outcome and type(meta) is dict:
        # an exit code the adapter read (a bool is no exit code); a harness often records a
        # failed command as a plain result (its output, the code beside it), so this is apart
        # from ERROR
        rc = meta.get("returncode")
        if isinstance(rc, int) and not isinstance(rc, bool) and rc != 0:
            flags |= EXIT_NONZERO
    edit = None
    state: tuple[tuple[Any, ...], int] | None = None
    no_op = step.no_op
    shell = _shell_command(args)
    if len(targets) == 1:
        if kind == OBSERVE and has_outcome:
            state = (("call",) + (call or ("", 0)), outcome)
        elif kind == MUTATE and not failed and isinstance(args, dict):
            for old_key, new_key in _REPLACE_KEYS:
                if old_key in args and new_key in args:
                    old, new = _h(args[old_key]), _h(args[new_key])
                    if old != new:
                        edit = (old, new)
                    else:  # a no-op replacement changes nothing and undoes nothing
                        no_op = True
                    break
            else:
                for key in _CONTENT_KEYS:
                    if key in args:
                        state = (_WRITE_DOMAIN, _h(args[key]))
                        flags |= ABSOLUTE
                        break
                else:
                    if _full_write(args) and step.write_set == targets:
                        flags |= ABSOLUTE
    if no_op:
        flags |= NO_OP
        writes: tuple[str, ...] | None = ()
    else:
        writes = _set(step.write_set)
    reads = _set(step.read_set)
    if shell is not None and kind == MUTATE and not failed and not no_op:
        flags |= _copy_flag(shell, reads, writes)
    elif reads is None and shell is None and kind == OBSERVE and step.name:
        # a tool's read without a target (a search API): it reads what no named write of a
        # record touches, so only a write of everything changes it (encode() undoes this in a
        # trace that writes files)
        reads = _UNTARGETED
    substantial = False
    if has_outcome and kind == OBSERVE and targets:
        chars, lines = _text_size(result)
        e_chars, e_lines = _text_size(error) if error is not None and error is not True else (0, 0)
        substantial = (
            chars + e_chars >= settings.substantial_chars
            and lines + e_lines >= settings.substantial_lines
            and _content_read(step.name, args)
        )
    return _new_facts(
        StepFacts,
        (
            kind,
            targets,
            call,
            has_outcome,
            outcome,
            failed,
            edit,
            state,
            reads,
            writes,
            flags,
            substantial,
        ),
    )


class _Interner:
    """Dense ids in first-appearance order, so one session's ids stay close in memory."""

    __slots__ = ("ids", "items")

    def __init__(self) -> None:
        self.ids: dict[Any, int] = {}
        self.items: list[Any] = []

    def __call__(self, key: Any) -> int:
        i = self.ids.get(key)
        if i is None:
            i = self.ids[key] = len(self.items)
            self.items.append(key)
        return i

    def __len__(self) -> int:
        return len(self.items)


_STEP_COLUMNS = (
    ("session", np.int32),
    ("turn", np.int64),
    ("kind", np.uint8),
    ("tool", np.int32),
    ("target", np.int32),
    ("reads", np.int32),
    ("writes", np.int32),
    ("args_hash", np.uint64),
    ("result_hash", np.uint64),
    ("flags", np.uint16),
    ("tokens", np.int64),
    ("turn_tokens", np.int64),
    ("degen", np.int64),
    ("call", np.int32),
    ("obs", np.int32),
    ("skey", np.int32),
    ("sval", np.int32),
    ("edit", np.int32),
    ("undo", np.int32),
)
# Id columns and the size attribute that bounds them (for concat).
_ID_SPACES = (
    ("tool", "n_tools"),
    ("target", "n_target_sets"),
    ("reads", "n_target_sets"),
    ("writes", "n_target_sets"),
    ("call", "n_calls"),
    ("obs", "n_obs"),
    ("skey", "n_skeys"),
    ("sval", "n_svals"),
    ("edit", "n_edits"),
    ("undo", "n_edits"),
)


@dataclass(eq=False, repr=False)
class EncodedTrace:
    """Many traces as numpy columns (see the module doc); build it with :func:`encode`."""

    session: np.ndarray
    turn: np.ndarray
    kind: np.ndarray
    tool: np.ndarray
    target: np.ndarray
    reads: np.ndarray
    writes: np.ndarray
    args_hash: np.ndarray
    result_hash: np.ndarray
    flags: np.ndarray
    tokens: np.ndarray
    turn_tokens: np.ndarray
    degen: np.ndarray
    call: np.ndarray
    obs: np.ndarray
    skey: np.ndarray
    sval: np.ndarray
    edit: np.ndarray
    undo: np.ndarray
    trace_offsets: np.ndarray  # int64, n_traces + 1
    target_offsets: np.ndarray  # int64, n_target_sets + 1
    target_members: np.ndarray  # int32 target ids
    sessions: list
    tools: list
    targets: list
    n_calls: int
    n_obs: int
    n_skeys: int
    n_svals: int
    n_edits: int

    def __len__(self) -> int:
        return int(self.kind.shape[0])

    @property
    def n_traces(self) -> int:
        """Number of traces (sessions) encoded."""
        return int(self.trace_offsets.shape[0]) - 1

    @property
    def n_tools(self) -> int:
        """Number of distinct tool names."""
        return len(self.tools)

    @property
    def n_targets(self) -> int:
        """Number of distinct targets."""
        return len(self.targets)

    @property
    def n_target_sets(self) -> int:
        """Number of distinct target sets (a single target is a set of one)."""
        return int(self.target_offsets.shape[0]) - 1

    @property
    def error(self) -> np.ndarray:
        """Boolean column: the step failed."""
        return (self.flags & ERROR) != 0

    @property
    def has_outcome(self) -> np.ndarray:
        """Boolean column: the step recorded a result or an error."""
        return (self.flags & HAS_OUTCOME) != 0

    def __repr__(self) -> str:
        return (
            f"<EncodedTrace: {len(self)} steps in {self.n_traces} traces, "
            f"{self.n_tools} tools, {self.n_targets} targets>"
        )

    @classmethod
    def concat(cls, parts: Sequence[EncodedTrace]) -> EncodedTrace:
        """Concatenate encodings (each part's ids shifted into a fresh range); traces stay apart.

        Equal names in different parts get different ids, which changes nothing: every rule of
        the analysis compares steps within one trace. Raises ValueError for an empty sequence.
        """
        parts = list(parts)
        if not parts:
            raise ValueError("EncodedTrace.concat needs at least one part")
        cols: dict[str, Any] = {}
        space_of = dict(_ID_SPACES)
        sizes = sorted(set(space_of.values())) + ["n_traces", "n_targets"]
        base = dict.fromkeys(sizes, 0)
        pieces: dict[str, list] = {name: [] for name, _ in _STEP_COLUMNS}
        toff, tsoff, tmem = [np.zeros(1, np.int64)], [np.zeros(1, np.int64)], []
        step_base = member_base = 0
        for p in parts:
            for name, _ in _STEP_COLUMNS:
                col = getattr(p, name)
                if name == "session":
                    col = col + base["n_traces"]
                elif name in space_of:
                    col = np.where(col >= 0, col + base[space_of[name]], col)
                pieces[name].append(col)
            toff.append(p.trace_offsets[1:] + step_base)
            tsoff.append(p.target_offsets[1:] + member_base)
            tmem.append(p.target_members + base["n_targets"])
            step_base += len(p)
            member_base += int(p.target_members.shape[0])
            for size in sizes:
                base[size] += getattr(p, size)
        for name, dtype in _STEP_COLUMNS:
            cols[name] = np.ascontiguousarray(np.concatenate(pieces[name]), dtype=dtype)
        return cls(
            **cols,
            trace_offsets=np.concatenate(toff),
            target_offsets=np.concatenate(tsoff),
            target_members=np.ascontiguousarray(np.concatenate(tmem), dtype=np.int32),
            sessions=[s for p in parts for s in p.sessions],
            tools=[t for p in parts for t in p.tools],
            targets=[t for p in parts for t in p.targets],
            n_calls=base["n_calls"],
            n_obs=base["n_obs"],
            n_skeys=base["n_skeys"],
            n_svals=base["n_svals"],
            n_edits=base["n_edits"],
        )


def _as_traces(traces: Trace | Iterable[Trace]) -> list[Trace]:
    if isinstance(traces, Trace):
        return [traces]
    out = []
    for t in traces:
        if not isinstance(t, Trace):
            raise TypeError(f"encode() takes Trace objects; got {type(t).__name__}")
        out.append(t)
    return out


def degenerate_tokens(step: Step) -> int:
    """Tokens of the repeated part of *step*'s reply text (``loopcore.textloop.repeated_spans``:
    the repeats of a looping chunk, its first occurrence excluded): that share of the turn's
    output the step holds (``tokens_turn``, or ``tokens_out`` for a step that ran nothing)."""
    text = step.text
    if not text or len(text) < _LOOP_MIN_CHARS:
        return 0
    out = step.tokens_turn or (step.tokens_out if not step.name or step.rejected is not None else 0)
    if not out:
        return 0
    rep = 0
    for a, b in repeated_spans(text):
        rep += b - a
    return min(out, out * rep // len(text)) if rep else 0


def _target_names(facts: list[StepFacts]) -> set[str]:
    """Every target one trace's steps name, read or write (for :func:`_aliases` and
    :func:`_folders`)."""
    names: set[str] = set()
    for f in facts:
        names.update(f.targets)
        if f.writes:
            names.update(f.writes)
        if f.reads:
            names.update(f.reads)
    return names


def _aliases(names: set[str]) -> dict[str, tuple[str, ...]]:
    """Targets of one trace (*names*) that may name the same file: a relative path and an
    absolute one ending with it (``patch.txt`` and ``/testbed/patch.txt``, the working folder
    unknown). A write of either is taken as a write of both, so a repeat never spans a write it
    cannot see."""
    if len(names) < 2:
        return {}
    out: dict[str, list[str]] = {}
    for name in names:
        if "/" not in name or name.startswith("git:"):
            continue
        k = name.find("/", 1 if name[0] == "/" else 0)
        while k >= 0:
            tail = name[k + 1 :]
            if tail in names:
                out.setdefault(name, []).append(tail)
                out.setdefault(tail, []).append(name)
            k = name.find("/", k + 1)
    return {n: tuple(v) for n, v in out.items()}


def _folder_key(name: str) -> str:
    """*name* as a folder is named: no leading ``./`` (``.//x`` is ``x``), no trailing ``/`` or
    ``/.``; the working folder (``.``, ``./``) is ``.``, the root ``/``."""
    while name.startswith("./"):
        name = name[2:].lstrip("/")
    while len(name) > 1 and name.endswith("/."):
        name = name[:-2] or "/"
    if len(name) > 1:
        name = name.rstrip("/") or "/"
    return name or "."


#: the "/" of a name looked at as folder boundaries, at most (a path deeper than this is no
#: folder anyone searches, and a hostile name of thousands of "/" must not cost their cube)
FOLDER_DEPTH = 32


def _slashes(key: str) -> list[int]:
    """The positions of the first FOLDER_DEPTH "/" of *key*."""
    out: list[int] = []
    i = key.find("/")
    while i >= 0 and len(out) < FOLDER_DEPTH:
        out.append(i)
        i = key.find("/", i + 1)
    return out


def _folders(names: set[str]) -> tuple[dict[str, tuple[str, ...]], frozenset[str]]:
    """(each target of a trace that may be a folder with the targets that may lie in it, the
    names that hold every path). A path lies in the name that is the path up to one of its "/"
    (``src`` holds ``src/a.py``), in one that starts a tail of it after a "/" (``src`` holds
    ``/testbed/src/a.py``, the working folder unknown), and in one whose tail is such a part
    (``/testbed/src`` holds ``src/a.py``); names of one folder written differently (``src``,
    ``src/``, ``./src``) hold each other. The working folder (``.``) and the root (``/``) hold
    any path: a step that reads them reads anything. So a search of ``src`` run again after an
    edit of ``src/a.py`` is no repeat (read, write, read), nor one of ``.`` after any write.
    Names with a ":" (``git:repo``, a search, a URL) are no paths."""
    keys: dict[str, list[str]] = {}
    for name in names:
        if isinstance(name, str) and ":" not in name and "\x00" not in name:
            # (not the mark of an untargeted read)
            keys.setdefault(_folder_key(name), []).append(name)
    here = frozenset(keys.pop(".", []) + keys.pop("/", []))
    # only a name whose last part sits before a "/" in some name can hold anything (most names
    # are files): the parts that do, and those names' tails after a "/" (a folder named from a
    # root the trace does not show holds what lies under its tail)
    # each name's parts before its first FOLDER_DEPTH "/"
    segs = {key: key.split("/", FOLDER_DEPTH)[:-1] for key in keys}
    dirs: set[str] = set()
    for parts in segs.values():
        dirs.update(parts)
    lasts: set[str] = set()
    tails: dict[str, list[str]] = {}
    for key, same in keys.items():
        last = key[key.rfind("/") + 1 :]
        if last in dirs:
            lasts.add(last)
            for i in _slashes(key):
                if i + 1 < len(key):
                    tails.setdefault(key[i + 1 :], []).extend(same)
    out: dict[str, list[str]] = {}
    for key, same in keys.items():
        holders: list[str] = list(same) if len(same) > 1 else []
        if lasts.isdisjoint(segs[key]):
            slashes: list[int] = []  # no name is a folder of this one
        else:
            slashes = _slashes(key)
        prev = 0
        for t, end in enumerate(slashes):
            if key[prev:end] in lasts:  # else no name is the path up to this "/"
                for start in (0, *(i + 1 for i in slashes[:t])):
                    if end > start:
                        part = key[start:end]
                        folder = keys.get(part)
                        if folder is not None:
                            holders.extend(folder)
                        folder = tails.get(part)
                        if folder is not None:
                            holders.extend(folder)
            prev = end + 1
        for name in same:
            for holder in holders:
                if holder != name:
                    out.setdefault(holder, []).append(name)
    return {n: tuple(v) for n, v in out.items()}, here


def _widen(writes: tuple[str, ...], alias: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    extra = [a for w in writes for a in alias.get(w, ())]
    if not extra:
        return writes
    return tuple(sorted(set(writes).union(extra)))


def encode(traces: Trace | Iterable[Trace], settings: BurnSettings | None = None) -> EncodedTrace:
    """Encode one Trace or many into numpy columns for the bulk kernels (see the module doc).

    Hashes args and outcomes with the canonical hash and interns names, targets and keys to
    dense ints; *settings* (default ``BurnSettings()``) decides which outcomes are substantial.
    The encoder is the compiled ``loopcore._native_encode`` or its pure twin
    ``loopcore._encode_py`` (the reference), which give the same columns. Raises TypeError for
    something that is not a Trace, ValueError for a step with an unknown kind, and
    TypeError/ValueError from canonical_hash for unhashable args.
    """
    traces = _as_traces(traces)
    settings = DEFAULT_SETTINGS if settings is None else settings
    return encode_with(traces, settings, _encoder())


def encode_with(traces: list[Trace], settings: BurnSettings, encoder: Any) -> EncodedTrace:
    """:func:`encode` through *encoder* (a twin module with ``encode_columns``)."""
    cols, offsets, set_offsets, members, tools, targets, sizes = encoder.encode_columns(
        traces, settings
    )
    n_calls, n_obs, n_skeys, n_svals, n_edits = sizes
    return EncodedTrace(
        **cols,
        trace_offsets=offsets,
        target_offsets=set_offsets,
        target_members=members,
        sessions=[t.session for t in traces],
        tools=tools,
        targets=targets,
        n_calls=n_calls,
        n_obs=n_obs,
        n_skeys=n_skeys,
        n_svals=n_svals,
        n_edits=n_edits,
    )


_ENCODER: Any = None


def _encoder() -> Any:
    # loaded on first use: both twins import this module's helpers
    global _ENCODER
    if _ENCODER is None:
        if NO_EXTENSIONS:
            from . import _encode_py as encoder
        else:
            from . import _native_encode as encoder  # type: ignore[attr-defined,no-redef]
        _ENCODER = encoder
    return _ENCODER


@dataclass(eq=False)
class EncodedAnalysis:
    """What the burn kernel computed for every step and every trace of an EncodedTrace.

    ``finding[i]`` (int8) is 0 (not charged) or 1..6 (``FINDING_KINDS[code - 1]``);
    ``of_step[i]`` (int32) is the 0-based index, inside its own trace, of the earlier step it
    repeats (-1 when not charged, and for a rejected action, which repeats nothing);
    ``charge[i]`` (int64) the tokens it is charged. Per trace: ``total_tokens``,
    ``wasted_tokens``, and ``by_kind_tokens`` / ``by_kind_steps`` of shape (n_traces, 6) in
    FINDING_KINDS order.
    """

    finding: np.ndarray
    of_step: np.ndarray
    charge: np.ndarray
    total_tokens: np.ndarray
    wasted_tokens: np.ndarray
    by_kind_tokens: np.ndarray
    by_kind_steps: np.ndarray

    def __repr__(self) -> str:
        return (
            f"<EncodedAnalysis: {self.finding.shape[0]} steps, {int((self.finding != 0).sum())} charged, "
            f"{int(self.wasted_tokens.sum())}/{int(self.total_tokens.sum())} tokens wasted>"
        )


def analyse_encoded(enc: EncodedTrace, *, charge_turn_output: bool = False) -> EncodedAnalysis:
    """Run the burn kernel over *enc*.

    ``charge_turn_output`` charges a wasted call's turn tokens too (``BurnSettings``). Both
    twins give the same arrays. Raises ValueError when the columns are inconsistent.
    """
    return _run_kernel(analyse_columns, enc, charge_turn_output)


def _kernel_of(impl: str | None) -> Any:
    """The burn kernel of twin *impl* ("c", "py"; None: the live one): for the tests and the
    store's re-analysis checks."""
    if impl is None:
        return analyse_columns
    from ._native_flag import load_twin

    return load_twin("burn", impl).analyse_columns


def _run_kernel(
    kernel: Any, enc: EncodedTrace, charge_turn_output: bool = False
) -> EncodedAnalysis:
    # analyse_encoded on *kernel* (a twin's analyse_columns)
    out = kernel(
        enc.kind,
        enc.turn,
        enc.tokens,
        enc.turn_tokens,
        enc.degen,
        enc.flags,
        enc.result_hash,
        enc.target,
        enc.target_offsets,
        enc.target_members,
        enc.reads,
        enc.writes,
        enc.call,
        enc.obs,
        enc.skey,
        enc.sval,
        enc.edit,
        enc.undo,
        enc.trace_offsets,
        enc.n_targets,
        enc.n_calls,
        enc.n_obs,
        enc.n_skeys,
        enc.n_svals,
        enc.n_edits,
        charge_turn_output,
    )
    return EncodedAnalysis(*out)
