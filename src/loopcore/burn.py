"""Burn analysis: how many tokens of a recorded trace went into work that produced nothing.

Step indices are 0-based positions in ``trace.steps``: ``of_step=4`` is ``trace.steps[4]``;
each finding also carries the trace's own coordinates of its steps (``refs``, ``of_ref``).

The rules exist once, in the pure-Python reference ``loopcore._burn_py`` (its module doc lists
them; docs/burn.md explains them with examples), with the compiled kernel
``loopcore._native_burn`` as its twin. :func:`analyse_burn` encodes the trace and runs that
kernel, so it, :func:`analyse_many` and ``loopcore analyse`` give the same findings on either
twin. In short:

* **Reads and writes.** A repeat is waste only if nothing it reads was written since the
  earlier step (an exec or an untargeted mutation writes everything; a provable no-op writes
  nothing). The first occurrence is never waste.
* ``redundant_observation``: the same observation again (same call, or a different command
  with the same *substantial* outcome on the same target), nothing it reads written since.
* ``duplicate_call``: the same tool and canonical args, nothing it reads written since, the
  same outcome where both recorded one.
* ``oscillation``: an edit undone by its inverse, a target returning to an earlier state, or
  a mutation redone after an undo with the same results (even across exec steps).
* ``question_loop``: three or more consecutive turns that only asked the user.
* ``rejected_action``: a turn whose action the harness rejected (nothing ran).
* ``degenerate_output``: the repeated part of a reply that loops on itself.

A wasted call is charged its result and call tokens; the rest of its turn's output is reported
beside (``turn_output_tokens``) unless ``BurnSettings(charge_turn_output=True)``. A step is
charged to at most one finding, and ``total_tokens`` counts every turn, so
``0 <= wasted_tokens <= total_tokens``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import compress
from typing import Any

from .encoded import (
    FINDING_KINDS,
    QUESTION_LOOP_MIN_TURNS,
    BurnSettings,
    _run_kernel,
    analyse_columns,
    encode,
    step_facts,
)
from .trace import Step, Trace

__all__ = [
    "FINDING_KINDS",
    "QUESTION_LOOP_MIN_TURNS",
    "BurnReport",
    "BurnSettings",
    "Finding",
    "RepeatCheck",
    "Step",
    "Trace",
    "analyse_burn",
    "analyse_many",
    "would_repeat",
]

_REDUNDANT, _DUPLICATE, _OSCILLATION, _QUESTION, _REJECTED, _DEGENERATE = 1, 2, 3, 4, 5, 6


# ----------------------------------------------------------------------------- the model


def _target_text(target: Any) -> str:
    if target is None:
        return "(no target)"
    if isinstance(target, tuple):
        return ", ".join(target)
    return str(target)


def ref_text(ref: Any) -> str:
    """A step's ref as a person looks it up: ``messages[116]``, ``line 42``, ``event e7``."""
    if not isinstance(ref, dict) or not ref:
        return ""
    parts = []
    for key, value in ref.items():
        if key == "message":
            parts.append(f"messages[{value}]")
        elif key == "file":
            continue
        else:
            parts.append(f"{key} {value}")
    text = ", ".join(parts)
    f = ref.get("file")
    return f"{f}: {text}" if f else text


def _step_text(i: int, ref: Any) -> str:
    r = ref_text(ref)
    return f"{i} ({r})" if r else str(i)


def _steps_text(steps: Sequence[int], refs: Sequence[Any] = ()) -> str:
    refs = list(refs) + [None] * (len(steps) - len(refs))
    shown = ", ".join(_step_text(s, r) for s, r in zip(steps[:6], refs[:6]))
    more = f" and {len(steps) - 6} more" if len(steps) > 6 else ""
    return ("step " if len(steps) == 1 else "steps ") + shown + more


@dataclass(frozen=True, slots=True)
class Finding:
    """One kind of waste in one trace: the steps charged, the earlier step they repeat, tokens.

    ``steps`` and ``of_step`` are 0-based indices into the trace's steps; ``of_step`` is the
    first occurrence (never charged by this finding), None for a ``rejected_action`` (it
    repeats nothing). ``refs`` / ``of_ref`` are the same steps in the trace's own coordinates
    (``Step.ref``: ``{"message": 116}``, ``{"line": 42}``...; None where the adapter had none).
    ``target`` is the target of ``of_step`` (a str, a tuple of str, or None) and ``name`` its
    tool name. ``tokens`` is the charge; ``turn_output_tokens`` the rest of the charged turns'
    output, reported beside it and not in it; ``tokens_estimated`` says the charge rests on
    estimated token counts.
    """

    kind: str
    steps: tuple[int, ...]
    of_step: int | None
    target: str | tuple[str, ...] | None
    name: str
    tokens: int
    message: str
    session: str | None = None
    refs: tuple[Any, ...] = ()
    of_ref: Any = None
    turn_output_tokens: int = 0
    tokens_estimated: bool = False

    def __repr__(self) -> str:
        of = f" repeat step {self.of_step}" if self.of_step is not None else ""
        return (
            f"<Finding {self.kind} {_target_text(self.target)!r}: {self.tokens} tokens, "
            f"{_steps_text(self.steps)}{of}>"
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field (the report schema of docs/burn.md)."""
        return {
            "kind": self.kind,
            "steps": list(self.steps),
            "refs": list(self.refs),
            "of_step": self.of_step,
            "of_ref": self.of_ref,
            "target": list(self.target) if isinstance(self.target, tuple) else self.target,
            "name": self.name,
            "tokens": self.tokens,
            "tokens_estimated": self.tokens_estimated,
            "turn_output_tokens": self.turn_output_tokens,
            "message": self.message,
            "session": self.session,
        }


def _empty_by_kind() -> dict[str, dict[str, int]]:
    return {k: {"tokens": 0, "steps": 0} for k in FINDING_KINDS}


@dataclass(frozen=True, slots=True)
class BurnReport:
    """The burn of one trace (or, via :meth:`combine`, of many).

    ``by_kind`` maps every finding kind to ``{"tokens": ..., "steps": ...}``;
    ``tokens_estimated`` is True when any step's tokens were estimated from text length (a
    finding says on its own whether its charge rests on estimates).
    """

    total_tokens: int
    wasted_tokens: int
    findings: tuple[Finding, ...] = ()
    by_kind: dict[str, dict[str, int]] = field(default_factory=_empty_by_kind)
    top_recommendation: str | None = None
    tokens_estimated: bool = False
    steps: int = 0
    traces: int = 1
    session: str | None = None
    #: the part of total_tokens that rests on estimates from text length (0 when all came
    #: from the trace's usage fields)
    estimated_tokens: int = 0

    @property
    def waste_ratio(self) -> float:
        """wasted_tokens / total_tokens, 0.0 for a trace without tokens; always in [0, 1]."""
        return self.wasted_tokens / self.total_tokens if self.total_tokens else 0.0

    @property
    def wasted_estimated(self) -> bool:
        """True when some charge rests on estimated tokens."""
        return any(f.tokens_estimated for f in self.findings)

    def __repr__(self) -> str:
        est = " (estimated)" if self.tokens_estimated else ""
        who = (
            f" {self.session!r}"
            if self.session is not None and self.traces == 1
            else f" {self.traces} traces"
        )
        return (
            f"<BurnReport{who}: {self.wasted_tokens}/{self.total_tokens} tokens wasted{est} "
            f"({self.waste_ratio:.1%}), {len(self.findings)} findings>"
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: totals, waste_ratio, by_kind, top_recommendation and findings."""
        return {
            "session": self.session,
            "traces": self.traces,
            "steps": self.steps,
            "total_tokens": self.total_tokens,
            "wasted_tokens": self.wasted_tokens,
            "waste_ratio": self.waste_ratio,
            "tokens_estimated": self.tokens_estimated,
            "estimated_tokens": self.estimated_tokens,
            "wasted_estimated": self.wasted_estimated,
            "by_kind": {k: dict(v) for k, v in self.by_kind.items()},
            "top_recommendation": self.top_recommendation,
            "findings": [f.to_dict() for f in self.findings],
        }

    @classmethod
    def combine(cls, reports: Iterable[BurnReport]) -> BurnReport:
        """One report over many: sums, all findings, the top recommendation across them all."""
        reports = list(reports)
        by_kind = _empty_by_kind()
        for r in reports:
            for k, v in r.by_kind.items():
                if not (v["steps"] or v["tokens"]):
                    continue  # most kinds of most traces: nothing to add
                by_kind[k]["tokens"] += v["tokens"]
                by_kind[k]["steps"] += v["steps"]
        findings = tuple(f for r in reports for f in r.findings)
        sessions = {r.session for r in reports}
        return cls(
            total_tokens=sum(r.total_tokens for r in reports),
            wasted_tokens=sum(r.wasted_tokens for r in reports),
            findings=findings,
            by_kind=by_kind,
            top_recommendation=_recommend(findings),
            tokens_estimated=any(r.tokens_estimated for r in reports),
            steps=sum(r.steps for r in reports),
            traces=sum(r.traces for r in reports),
            session=sessions.pop() if len(sessions) == 1 else None,
            estimated_tokens=sum(r.estimated_tokens for r in reports),
        )


@dataclass(frozen=True, slots=True)
class RepeatCheck:
    """Answer of :func:`would_repeat`; truthy when the step would repeat ``of_step``."""

    repeat: bool
    of_step: int | None = None
    detail: str = ""

    def __bool__(self) -> bool:
        return self.repeat


# ----------------------------------------------------------------------------- messages


def _message(
    kind: str,
    steps: Sequence[int],
    refs: Sequence[Any],
    of: int | None,
    of_ref: Any,
    root: Step,
    tokens: int,
    turns: int,
) -> str:
    what = _target_text(root.target)
    n = len(steps)
    listed = _steps_text(steps, refs)
    of_text = _step_text(of, of_ref) if of is not None else ""
    if kind == "redundant_observation":
        return (
            f"{what} was observed again ({listed}) with the same result as step {of_text} "
            f"and nothing changing it in between: {tokens} tokens"
        )
    if kind == "duplicate_call":
        on = f" on {what}" if root.target is not None else ""
        return (
            f"{root.name}{on} was called again with identical arguments ({listed}), "
            f"repeating step {of_text} with nothing changed in between: {tokens} tokens"
        )
    if kind == "oscillation":
        return (
            f"{what} was changed back and forth: {listed} undid, returned to or redid the "
            f"state of step {of_text}: {tokens} tokens"
        )
    if kind == "rejected_action":
        return (
            f"the harness rejected {n} {'action' if n == 1 else 'actions'} and nothing ran "
            f"({listed}): {tokens} tokens"
        )
    if kind == "degenerate_output":
        return f"the reply of {listed} repeats the same text over and over: {tokens} tokens in the repeats"
    return (
        f"{turns + 1} consecutive turns only asked the user and did nothing else (first question "
        f"at step {of_text}; {n} repeated {'ask' if n == 1 else 'asks'}): {tokens} tokens"
    )


def _recommendation(kind: str, target: Any, name: str, tokens: int) -> str:
    what = _target_text(target)
    if kind == "redundant_observation":
        return f"cache observations within a session: {what} cost {tokens} tokens to re-learn"
    if kind == "duplicate_call":
        on = f" on {what}" if target is not None else ""
        return f"reuse results instead of repeating identical calls: {name}{on} cost {tokens} tokens in repeats"
    if kind == "oscillation":
        return f"settle on a change before editing: {what} was changed back and forth, costing {tokens} tokens"
    if kind == "rejected_action":
        return (
            f"fix the action format the model writes (one well-formed action per turn): rejected actions "
            f"cost {tokens} tokens"
        )
    if kind == "degenerate_output":
        return f"stop replies that repeat themselves (a repetition penalty, a content-loop guard): they cost {tokens} tokens"
    return f"act on the user's answers instead of asking again: repeated question turns cost {tokens} tokens"


def _recommend(findings: Sequence[Finding]) -> str | None:
    """The recommendation for the (finding kind, target) that wasted the most tokens."""
    totals: dict[tuple[Any, ...], int] = {}
    for f in findings:
        key = (f.kind, f.target, f.name if f.kind == "duplicate_call" else "")
        totals[key] = totals.get(key, 0) + f.tokens
    if not totals:
        return None
    # deterministic tie-break: kind order, then the target's text
    kind, target, name = min(
        totals, key=lambda k: (-totals[k], FINDING_KINDS.index(k[0]), _target_text(k[1]), k[2])
    )
    return _recommendation(kind, target, name, totals[(kind, target, name)])


def _report(
    trace: Trace,
    codes: Sequence[int],
    of: Sequence[int],
    charge: Sequence[int],
    total: int | None = None,
    charge_turn: bool = False,
) -> BurnReport:
    """Group the kernel's per-step charges into Findings (each repeat chain under its first
    occurrence; one oscillation finding per target, one rejected_action finding per trace, one
    degenerate_output finding per reply)."""
    steps = trace.steps
    by_kind = _empty_by_kind()
    groups: dict[tuple[Any, ...], list[int]] = {}
    first: dict[tuple[Any, ...], int] = {}  # group -> its earliest first occurrence
    root = [-1] * len(steps)
    wasted = 0
    # the charged steps only (compress walks the codes in C: most steps are not waste)
    for i in compress(range(len(codes)), codes):
        code = codes[i]
        j = of[i]
        if code == _REJECTED:
            key: tuple[Any, ...] = (code,)
            r = -1
        elif code == _DEGENERATE:
            key = (code, i)
            r = i
        else:
            r = root[i] = root[j] if codes[j] == code and root[j] >= 0 else j
            # one oscillation finding per target: A->B->A->B returns to two different states
            key = (code, tuple(sorted(steps[r].targets))) if code == _OSCILLATION else (code, r)
        groups.setdefault(key, []).append(i)
        if r >= 0:
            first[key] = min(first.get(key, r), r)
        tok = charge[i]
        wasted += tok
        entry = by_kind[FINDING_KINDS[code - 1]]
        entry["tokens"] += tok
        entry["steps"] += 1
    findings = []
    for key, charged in sorted(groups.items(), key=lambda kv: kv[1][0]):
        code = key[0]
        r = first.get(key)  # type: ignore[assignment]
        kind = FINDING_KINDS[code - 1]
        tokens = sum(charge[i] for i in charged)
        turns = len({steps[i].turn for i in charged})
        refs = tuple(steps[i].ref for i in charged)
        root_step = steps[r] if r is not None else steps[charged[0]]
        if code == _REJECTED or code == _DEGENERATE or charge_turn:
            beside = 0
        else:
            beside = sum(steps[i].tokens_turn for i in charged)
        findings.append(
            Finding(
                kind=kind,
                steps=tuple(charged),
                of_step=r,
                target=root_step.target
                if code not in (_QUESTION, _REJECTED, _DEGENERATE)
                else None,
                name=root_step.name,
                tokens=tokens,
                message=_message(
                    kind,
                    charged,
                    refs,
                    r,
                    steps[r].ref if r is not None else None,
                    root_step,
                    tokens,
                    turns,
                ),
                session=trace.session,
                refs=refs,
                of_ref=steps[r].ref if r is not None else None,
                turn_output_tokens=beside,
                tokens_estimated=any(steps[i].tokens_estimated for i in charged),
            )
        )
    return BurnReport(
        total_tokens=trace.total_tokens if total is None else total,
        wasted_tokens=wasted,
        findings=tuple(findings),
        by_kind=by_kind,
        top_recommendation=_recommend(findings),
        tokens_estimated=trace.tokens_estimated,
        steps=len(steps),
        traces=1,
        session=trace.session,
        estimated_tokens=trace.estimated_tokens,
    )


# ----------------------------------------------------------------------------- entry points


def analyse_burn(trace: Trace | Sequence[Step], settings: BurnSettings | None = None) -> BurnReport:
    """Account for the wasted tokens of one trace (see the module doc for the rules).

    Accepts a Trace or a sequence of Steps; *settings* are the analysis' settings
    (``BurnSettings()`` by default). Raises ValueError for a step of unknown kind and
    TypeError/ValueError from canonical_hash when args or results cannot be hashed.
    """
    return _analyse_burn(analyse_columns, trace, settings)


def analyse_many(traces: Iterable[Trace], settings: BurnSettings | None = None) -> list[BurnReport]:
    """analyse_burn for many traces at once, through encode() and one run of the kernel.

    Gives the same reports as ``[analyse_burn(t) for t in traces]``. Raises what encode()
    raises.
    """
    return _analyse_many(analyse_columns, traces, settings)


def _analyse_burn(
    kernel: Any, trace: Trace | Sequence[Step], settings: BurnSettings | None = None
) -> BurnReport:
    # analyse_burn on *kernel* (a twin's analyse_columns): the tests' way to pick a twin
    if not isinstance(trace, Trace):
        trace = Trace(list(trace))
    return _analyse_many(kernel, [trace], settings)[0]


def _analyse_many(
    kernel: Any, traces: Iterable[Trace], settings: BurnSettings | None = None
) -> list[BurnReport]:
    # analyse_many on *kernel* (a twin's analyse_columns)
    traces = list(traces)
    if not traces:
        return []
    settings = BurnSettings() if settings is None else settings
    enc = encode(traces, settings)
    res = _run_kernel(kernel, enc, settings.charge_turn_output)
    codes = res.finding.tolist()
    of = res.of_step.tolist()
    charge = res.charge.tolist()
    totals = res.total_tokens.tolist()
    reports = []
    for k, trace in enumerate(traces):
        s0, s1 = int(enc.trace_offsets[k]), int(enc.trace_offsets[k + 1])
        reports.append(
            _report(
                trace,
                codes[s0:s1],
                of[s0:s1],
                charge[s0:s1],
                totals[k],
                settings.charge_turn_output,
            )
        )
    return reports


def would_repeat(step: Step, trace: Trace | Sequence[Step]) -> RepeatCheck:
    """Would running *step* next repeat an earlier step of *trace* with nothing it reads
    written since?

    True when an earlier step has the same tool name and canonical args and nothing *step*
    reads was written since (the step has not run, so outcomes are not compared); ``of_step``
    is the most recent such step (0-based). Raises what step_facts/canonical_hash raise.
    """
    steps = trace.steps if isinstance(trace, Trace) else list(trace)
    f = step_facts(step)
    last = None
    last_write: dict[str, int] = {}
    last_global = last_any = -1
    for i, s in enumerate(steps):
        g = step_facts(s)
        if g.flags & 8:  # rejected: nothing ran
            continue
        if f.call is not None and g.call == f.call:
            last = i
        w = g.writes
        if w is None:
            last_global = last_any = i
        elif w:
            for t in w:
                last_write[t] = i
            last_any = i
    if last is None:
        return RepeatCheck(False, None, f"no earlier call of {step.name} with these arguments")
    what = _target_text(step.target) if step.target is not None else "anything it depends on"
    r = f.reads
    if r is None:
        changed = last_any > last
    else:
        changed = last_global > last or any(last_write.get(t, -1) > last for t in r)
    if changed:
        return RepeatCheck(
            False,
            None,
            f"same call as step {last}, but {what} may have changed since (a later mutation or exec)",
        )
    failed = " (which failed)" if steps[last].error is not None else ""
    return RepeatCheck(
        True, last, f"identical to step {last}{failed}, and nothing has changed {what} since"
    )
