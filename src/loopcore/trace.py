"""The data model shared by the burn analysis, the trace adapters and replay.

A :class:`Step` is one tool call with its outcome (or a model turn that ran nothing: a plain
reply, or an action the harness rejected); a :class:`Trace` is the steps of one session, in the
order they ran. Adapters produce them, ``analyse_burn`` and ``encode`` read
them, ``loopcore replay`` feeds them to a Guard.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import compress
from operator import add, attrgetter
from typing import Any

from ._codes import KIND_NAMES

__all__ = ["KINDS", "Step", "Trace"]

#: What a call does to the world. ``observe`` reads (read, search, list); ``mutate`` writes
#: (write, edit, delete, move); ``exec`` has unknown side effects (runs code, a shell command
#: the classifier cannot read); ``ask`` puts a question to the user; ``other`` is none of these.
KINDS = KIND_NAMES  # ("observe", "mutate", "exec", "ask", "other"), in code order
_KIND_SET = frozenset(KINDS)
_tokens_in = attrgetter("tokens_in")
_tokens_out = attrgetter("tokens_out")
_tokens_turn = attrgetter("tokens_turn")
_tokens_estimated = attrgetter("tokens_estimated")


def _shell_reads_anything(args: Any, kind: str) -> bool:
    """*args* run a shell command that the shell classifier reads as *kind*, reading anything:
    ``git diff > p.patch`` reads the repository (any file of it) and writes p.patch, ``cat $f >
    out`` reads a file known only at run time. The step's targets are then what it writes, or
    only part of what it reads: its reads are anything, not its targets. The adapters give a
    shell step the classifier's reads, None for these; a Step made without reads gets the same.
    The compiled encoder calls this too (one rule)."""
    from .encoded import _shell_command
    from .taxonomy.shell import classify_shell_access

    cmd = _shell_command(args)
    if cmd is None:
        return False
    access = classify_shell_access(cmd)
    return access[0] == kind and access[2] is None


@dataclass(slots=True)
class Step:
    """One tool call and its outcome.

    ``target`` is what the call observes or mutates: a path, URL, record id..., a tuple of them
    when the call touches several (``cat a b``, ``mv a b``), or None when unknown. A ``mutate``
    or ``exec`` step with target None changes everything as far as the analysis knows.
    ``tokens_in`` is what the call's result put into the context, ``tokens_out`` what the
    model generated to issue it (the call's name and arguments); ``tokens_estimated`` says they
    were estimated from text length rather than read from the trace's usage fields.

    The keyword fields after ``meta``:

    * ``reads`` / ``writes``: the targets the step reads and writes. None derives them from
      ``kind`` and ``target`` (see :attr:`read_set` / :attr:`write_set`); a shell pipeline can
      do both (``git diff -- a.py > p.txt`` reads ``("a.py",)`` and writes ``("p.txt",)``).
    * ``ref``: the trace's own coordinate of the step, JSON-ready: ``{"message": 116}`` (index
      into a messages list), ``{"line": 42}`` (1-based JSONL line), ``{"event": "<id>"}``,
      optionally with ``"file"``.
    * ``text``: the model's reply text (visible output and reasoning as the trace holds it) of
      the turn that issued the step; set on the first step of a turn, None on the others.
    * ``rejected``: the harness's message when it rejected the turn's action (format error,
      arguments that are not JSON, unknown tool): nothing ran.
    * ``no_op``: the call provably changed nothing (``sed -i 's/x/x/'``, an edit with
      old == new), so it does not count as a change of what it writes.
    * ``tokens_turn``: the rest of the turn's output (reasoning, reply text) attributed to this
      step, beside ``tokens_out``; counted in :attr:`Trace.total_tokens`.
    * ``after_user``: a message from the person at the keyboard came between the step before
      and this one (in a harness where that person shares the agent's workspace: Claude Code,
      Codex, Gemini CLI...). They may have changed anything since, so nothing before it is
      evidence that a later step repeats work: the burn rules start again here.
      The same mark follows a compaction of the context (the model holds a summary, not what
      it read), with ``meta["after_compaction"]`` set.

    ``meta`` holds what an adapter read beside the fields (an exit code, the file an output was
    saved to...); one key of it is a rule of the analysis: ``meta["not_run"] is True`` says the
    call did nothing the trace shows: the harness never ran it (Claude Code cancels the calls of
    a batch that had not started when one of them failed), or it is a poll of a running command
    the trace never answered (a Codex rollout written while the command ran); the step is
    charged nothing and repeats or precedes nothing.

    A model turn that ran nothing is a step too, ``kind="other"``: with ``name=""`` for a plain
    reply, or with ``rejected`` set (and the attempted tool's name, if any).
    """

    session: str
    turn: int
    kind: str
    name: str
    target: str | tuple[str, ...] | None = None
    args: Any = None
    result: Any = None
    error: Any = None
    tokens_in: int = 0
    tokens_out: int = 0
    tokens_estimated: bool = False
    call_id: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    reads: tuple[str, ...] | None = None
    writes: tuple[str, ...] | None = None
    ref: dict[str, Any] | None = None
    text: str | None = None
    rejected: str | None = None
    tokens_turn: int = 0
    no_op: bool = False
    after_user: bool = False

    def __post_init__(self) -> None:
        if self.kind not in _KIND_SET:
            raise ValueError(f"Step.kind must be one of {', '.join(KINDS)}; got {self.kind!r}")
        if isinstance(self.target, list):
            self.target = tuple(self.target)
        if self.reads is not None and not isinstance(self.reads, tuple):
            self.reads = (self.reads,) if isinstance(self.reads, str) else tuple(self.reads)
        if self.writes is not None and not isinstance(self.writes, tuple):
            self.writes = (self.writes,) if isinstance(self.writes, str) else tuple(self.writes)

    @property
    def tokens(self) -> int:
        """tokens_in + tokens_out: what the call cost, and what it is charged when it was
        wasted (the rest of its turn's output is ``tokens_turn``)."""
        return self.tokens_in + self.tokens_out

    @property
    def targets(self) -> tuple[str, ...]:
        """The targets as a tuple (empty when unknown)."""
        t = self.target
        if t is None:
            return ()
        if isinstance(t, tuple):
            return t
        return (t,)

    @property
    def read_set(self) -> tuple[str, ...] | None:
        """What the step reads: a tuple of targets, or None for "anything" (an ``exec``, a
        search without a target). Derived when ``reads`` is None: an ``observe`` or ``mutate``
        reads its targets (an edit depends on the text it replaces), unless it runs a shell
        command the shell classifier reads as that kind reading anything (see
        :func:`_shell_reads_anything`); an ``exec``, an ``ask`` and an ``other`` step read
        anything (what they depend on is unknown)."""
        r = self.reads
        if r is not None:
            return r
        kind = self.kind
        if kind == "observe" or kind == "mutate":
            t = self.targets
            if t and _shell_reads_anything(self.args, kind):
                return None
            return t if t else None
        return None

    @property
    def write_set(self) -> tuple[str, ...] | None:
        """What the step writes: a tuple of targets, or None for "everything" (an ``exec``, a
        ``mutate`` without known targets). Derived when ``writes`` is None: a ``mutate``
        writes its targets; ``observe``, ``ask`` and ``other`` write nothing. A provable no-op
        (``no_op``) writes nothing."""
        if self.no_op:
            return ()
        w = self.writes
        if w is not None:
            return w
        kind = self.kind
        if kind == "mutate":
            return self.targets or None
        if kind == "exec":
            return None
        return ()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; the loopcore JSONL step schema (see loopcore.adapters)."""
        d: dict[str, Any] = {
            "session": self.session,
            "turn": self.turn,
            "kind": self.kind,
            "name": self.name,
            "target": list(self.target) if isinstance(self.target, tuple) else self.target,
            "args": self.args,
            "result": self.result,
            "error": self.error,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
        }
        if self.tokens_estimated:
            d["tokens_estimated"] = True
        if self.call_id is not None:
            d["call_id"] = self.call_id
        if self.meta:
            d["meta"] = self.meta
        if self.reads is not None:
            d["reads"] = list(self.reads)
        if self.writes is not None:
            d["writes"] = list(self.writes)
        if self.ref is not None:
            d["ref"] = self.ref
        if self.text is not None:
            d["text"] = self.text
        if self.rejected is not None:
            d["rejected"] = self.rejected
        if self.tokens_turn:
            d["tokens_turn"] = self.tokens_turn
        if self.no_op:
            d["no_op"] = True
        if self.after_user:
            d["after_user"] = True
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any], **defaults: Any) -> Step:
        """The inverse of :meth:`to_dict` (fields missing from *d* come from *defaults*, then
        from the field defaults). Raises ValueError on a field of the wrong type."""
        kw: dict[str, Any] = {}
        for name in _FIELDS:
            if name in d:
                kw[name] = d[name]
            elif name in defaults:
                kw[name] = defaults[name]
        for name in ("reads", "writes"):
            v = kw.get(name)
            if v is not None and not (isinstance(v, list) and all(isinstance(x, str) for x in v)):
                raise ValueError(f"{name} must be a list of strings or null")
        for name in ("text", "rejected"):
            v = kw.get(name)
            if v is not None and not isinstance(v, str):
                raise ValueError(f"{name} must be a string or null")
        ref = kw.get("ref")
        if ref is not None and not isinstance(ref, dict):
            raise ValueError("ref must be an object or null")
        tt = kw.get("tokens_turn", 0)
        if not (isinstance(tt, int) and not isinstance(tt, bool) and tt >= 0):
            raise ValueError("tokens_turn must be an integer >= 0")
        if "meta" in kw:
            kw["meta"] = dict(kw["meta"]) if isinstance(kw["meta"], dict) else {}
        if "tokens_estimated" in kw:
            kw["tokens_estimated"] = bool(kw["tokens_estimated"])
        if "no_op" in kw:
            kw["no_op"] = bool(kw["no_op"])
        if "after_user" in kw:
            kw["after_user"] = bool(kw["after_user"])
        return cls(**kw)


_FIELDS = tuple(Step.__dataclass_fields__)


@dataclass(slots=True)
class Trace:
    """The steps of one session, in order, with where they came from."""

    steps: list[Step] = field(default_factory=list)
    session: str | None = None
    source: str | None = None
    format: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.steps, list):
            self.steps = list(self.steps)
        if self.session is None and self.steps:
            self.session = self.steps[0].session

    def __len__(self) -> int:
        return len(self.steps)

    def __iter__(self) -> Iterator[Step]:
        return iter(self.steps)

    def __getitem__(self, i: int) -> Step:
        return self.steps[i]

    @property
    def total_tokens(self) -> int:
        """Sum of every step's tokens: ``tokens_in + tokens_out + tokens_turn``, so every model
        turn counts, the ones that ran nothing included."""
        # the loops in C (once per trace analysed)
        steps = self.steps
        total: int = sum(map(add, map(_tokens_in, steps), map(_tokens_out, steps))) + sum(
            map(_tokens_turn, steps)
        )
        return total

    @property
    def estimated_tokens(self) -> int:
        """The part of :attr:`total_tokens` that rests on estimates from text length."""
        est = list(compress(self.steps, map(_tokens_estimated, self.steps)))
        total: int = sum(map(add, map(_tokens_in, est), map(_tokens_out, est))) + sum(
            map(_tokens_turn, est)
        )
        return total

    @property
    def tokens_estimated(self) -> bool:
        """True when any step's tokens were estimated rather than read from usage fields."""
        return any(map(_tokens_estimated, self.steps))

    def __repr__(self) -> str:
        where = f" from {self.source}" if self.source else ""
        fmt = f" ({self.format})" if self.format else ""
        return f"<Trace {self.session!r}: {len(self.steps)} steps{where}{fmt}>"

    @classmethod
    def of(cls, steps: Sequence[Step], **kw: Any) -> Trace:
        """Build a Trace from any sequence of steps."""
        return cls(list(steps), **kw)
