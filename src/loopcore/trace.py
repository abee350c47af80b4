"""The data model shared by the burn analysis, the trace adapters and replay.

A :class:`Step` is one tool call with its outcome; a :class:`Trace` is the steps of one
session, in the order they ran. Adapters produce them, ``analyse_burn`` and ``encode`` read
them, ``loopcore replay`` feeds them to a Guard.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from operator import add, attrgetter
from typing import Any, Iterator, Sequence

__all__ = ["KINDS", "Step", "Trace"]

#: What a call does to the world. ``observe`` reads (read, search, list); ``mutate`` writes
#: (write, edit, delete, move); ``exec`` has unknown side effects (runs code, a shell command
#: the classifier cannot read); ``ask`` puts a question to the user; ``other`` is none of these.
KINDS = ("observe", "mutate", "exec", "ask", "other")
_KIND_SET = frozenset(KINDS)
_tokens_in = attrgetter("tokens_in")
_tokens_out = attrgetter("tokens_out")
_tokens_estimated = attrgetter("tokens_estimated")


@dataclass(slots=True)
class Step:
    """One tool call and its outcome.

    ``target`` is what the call observes or mutates: a path, URL, record id..., a tuple of them
    when the call touches several (``cat a b``, ``mv a b``), or None when unknown. A ``mutate``
    or ``exec`` step with target None changes everything as far as the analysis knows.
    ``tokens_in`` is what the call's result put into the context, ``tokens_out`` what the
    model generated to issue it; ``tokens_estimated`` says they were estimated from text
    length rather than read from the trace's usage fields.
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

    def __post_init__(self) -> None:
        if self.kind not in _KIND_SET:
            raise ValueError(f"Step.kind must be one of {', '.join(KINDS)}; got {self.kind!r}")
        if isinstance(self.target, list):
            self.target = tuple(self.target)

    @property
    def tokens(self) -> int:
        """tokens_in + tokens_out: what this step cost."""
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
        return d


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
        """Sum of every step's tokens."""
        # sum(s.tokens_in + s.tokens_out for s in steps), with the loop in C (once per trace analysed)
        steps = self.steps
        return sum(map(add, map(_tokens_in, steps), map(_tokens_out, steps)))

    @property
    def tokens_estimated(self) -> bool:
        """True when any step's tokens were estimated rather than read from usage fields."""
        return any(map(_tokens_estimated, self.steps))

    def __repr__(self) -> str:
        where = f" from {self.source}" if self.source else ""
        fmt = f" ({self.format})" if self.format else ""
        return f"<Trace {self.session!r}: {len(self.steps)} steps{where}{fmt}>"

    @classmethod
    def of(cls, steps: Sequence[Step], **kw: Any) -> "Trace":
        """Build a Trace from any sequence of steps."""
        return cls(list(steps), **kw)
