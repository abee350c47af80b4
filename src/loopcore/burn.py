"""Burn analysis: how many tokens of a recorded trace went into work that produced nothing.

Step indices are 0-based positions in ``trace.steps``: ``of_step=4`` is ``trace.steps[4]``.

The rules (DESIGN.md "Burn analysis"; the full story with examples is docs/burn.md):

* **Epochs.** Each target has an epoch that advances on every ``mutate`` of it (also a failed
  one: it may have half-applied). An ``exec``, or a ``mutate`` with unknown target, advances
  every epoch. A repeat is waste only if nothing relevant changed strictly between the earlier
  step and the repeat: for a step with targets, none of them (and no exec); for an ``exec``
  or a step without targets, nothing at all.
* **First occurrences are never waste**. Each charged step repeats the most recent matching
  earlier step; a Finding groups such a chain under its first occurrence (``of_step``). A step
  is charged to at most one finding (priority: oscillation, redundant_observation,
  duplicate_call, question_loop), so ``wasted <= total``.
* ``redundant_observation``: an ``observe`` of the same target set with the same outcome
  (result and error) as an earlier observe, in the same epoch.
* ``duplicate_call``: the same tool name and canonical args as an earlier step in the same
  epoch, with the same outcome where both recorded one (a call that failed the same way again
  is a duplicate; one whose output changed is not).
* ``oscillation``: (a) an error-free edit whose (old, new) is the swap of an earlier error-free
  edit of the same target, or (b) a target's content returning to a state it had before, after
  the agent mutated it and a different state was seen in between (A -> B -> A; compared only
  between identical reads, or between whole-content writes). Neither is charged across an
  exec or a target-less mutation: the change may not have been the agent's undoing.
  All oscillation charges on one target form one finding.
* ``question_loop``: ``QUESTION_LOOP_MIN_TURNS`` (3) or more consecutive turns whose steps only
  asked the user (``ask``, plus ``other`` steps) and observed, mutated or executed nothing; the
  ask steps of every turn after the first are charged. Two turns are a clarifying dialogue.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, Iterable, Sequence

from ._burn_py import QUESTION_LOOP_MIN_TURNS
from .encoded import FINDING_KINDS, StepFacts, analyse_encoded, encode, step_facts
from .trace import Step, Trace

__all__ = [
    "FINDING_KINDS",
    "QUESTION_LOOP_MIN_TURNS",
    "BurnReport",
    "Finding",
    "RepeatCheck",
    "Step",
    "Trace",
    "analyse_burn",
    "analyse_many",
    "would_repeat",
]

_OBSERVE, _MUTATE, _EXEC, _ASK, _OTHER = range(5)
_REDUNDANT, _DUPLICATE, _OSCILLATION, _QUESTION = 1, 2, 3, 4


# ----------------------------------------------------------------------------- the model


def _target_text(target: Any) -> str:
    if target is None:
        return "(no target)"
    if isinstance(target, tuple):
        return ", ".join(target)
    return str(target)


def _steps_text(steps: Sequence[int]) -> str:
    shown = ", ".join(str(s) for s in steps[:6])
    more = f" and {len(steps) - 6} more" if len(steps) > 6 else ""
    return ("step " if len(steps) == 1 else "steps ") + shown + more


@dataclass(frozen=True, slots=True)
class Finding:
    """One kind of waste in one trace: the steps charged, the earlier step they repeat, tokens.

    ``steps`` and ``of_step`` are 0-based indices into the trace's steps; ``of_step`` is the
    first occurrence (never charged by this finding). ``target`` is the target of ``of_step``
    (a str, a tuple of str, or None) and ``name`` its tool name.
    """

    kind: str
    steps: tuple[int, ...]
    of_step: int
    target: str | tuple[str, ...] | None
    name: str
    tokens: int
    message: str
    session: str | None = None

    def __repr__(self) -> str:
        return (
            f"<Finding {self.kind} {_target_text(self.target)!r}: {self.tokens} tokens, "
            f"{_steps_text(self.steps)} repeat step {self.of_step}>"
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field."""
        return {
            "kind": self.kind,
            "steps": list(self.steps),
            "of_step": self.of_step,
            "target": list(self.target) if isinstance(self.target, tuple) else self.target,
            "name": self.name,
            "tokens": self.tokens,
            "message": self.message,
            "session": self.session,
        }


def _empty_by_kind() -> dict[str, dict[str, int]]:
    return {k: {"tokens": 0, "steps": 0} for k in FINDING_KINDS}


@dataclass(frozen=True, slots=True)
class BurnReport:
    """The burn of one trace (or, via :meth:`combine`, of many).

    ``by_kind`` maps every finding kind to ``{"tokens": ..., "steps": ...}``;
    ``tokens_estimated`` is True when any step's tokens were estimated from text length.
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

    @property
    def waste_ratio(self) -> float:
        """wasted_tokens / total_tokens, 0.0 for a trace without tokens; always in [0, 1]."""
        return self.wasted_tokens / self.total_tokens if self.total_tokens else 0.0

    def __repr__(self) -> str:
        est = " (estimated)" if self.tokens_estimated else ""
        who = f" {self.session!r}" if self.session is not None and self.traces == 1 else f" {self.traces} traces"
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
            "by_kind": {k: dict(v) for k, v in self.by_kind.items()},
            "top_recommendation": self.top_recommendation,
            "findings": [f.to_dict() for f in self.findings],
        }

    @classmethod
    def combine(cls, reports: Iterable["BurnReport"]) -> "BurnReport":
        """One report over many: sums, all findings, the top recommendation across them all."""
        reports = list(reports)
        by_kind = _empty_by_kind()
        for r in reports:
            for k, v in r.by_kind.items():
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


def _message(kind: str, steps: Sequence[int], of: int, root: Step, tokens: int, turns: int) -> str:
    what = _target_text(root.target)
    n = len(steps)
    if kind == "redundant_observation":
        return (
            f"{what} was observed again ({_steps_text(steps)}) with the same result as step {of} "
            f"and nothing changing it in between: {tokens} tokens"
        )
    if kind == "duplicate_call":
        on = f" on {what}" if root.target is not None else ""
        return (
            f"{root.name}{on} was called again with identical arguments ({_steps_text(steps)}), "
            f"repeating step {of} with nothing changed in between: {tokens} tokens"
        )
    if kind == "oscillation":
        return (
            f"{what} was changed back and forth: {_steps_text(steps)} undid or returned to the "
            f"state of step {of}: {tokens} tokens"
        )
    return (
        f"{turns + 1} consecutive turns only asked the user and did nothing else (first question "
        f"at step {of}; {n} repeated {'ask' if n == 1 else 'asks'}): {tokens} tokens"
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
    return f"act on the user's answers instead of asking again: repeated question turns cost {tokens} tokens"


def _recommend(findings: Sequence[Finding]) -> str | None:
    """The recommendation for the (finding kind, target) that wasted the most tokens."""
    totals: dict[tuple, int] = {}
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


def _report(trace: Trace, codes: Sequence[int], of: Sequence[int]) -> BurnReport:
    """Group per-step charges into Findings (each repeat chain under its first occurrence)."""
    steps = trace.steps
    by_kind = _empty_by_kind()
    groups: dict[tuple, list[int]] = {}
    first: dict[tuple, int] = {}  # group -> its earliest first occurrence
    root = [-1] * len(steps)
    wasted = 0
    for i, code in enumerate(codes):
        if not code:
            continue
        j = of[i]
        root[i] = root[j] if codes[j] == code else j
        # one oscillation finding per target: A->B->A->B returns to two different states
        key = (code, tuple(sorted(steps[i].targets))) if code == _OSCILLATION else (code, root[i])
        groups.setdefault(key, []).append(i)
        first[key] = min(first.get(key, root[i]), root[i])
        tok = steps[i].tokens
        wasted += tok
        entry = by_kind[FINDING_KINDS[code - 1]]
        entry["tokens"] += tok
        entry["steps"] += 1
    findings = []
    for key, charged in sorted(groups.items(), key=lambda kv: kv[1][0]):
        code, r = key[0], first[key]
        kind = FINDING_KINDS[code - 1]
        tokens = sum(steps[i].tokens for i in charged)
        turns = len({steps[i].turn for i in charged})
        findings.append(
            Finding(
                kind=kind,
                steps=tuple(charged),
                of_step=r,
                target=steps[r].target if code != _QUESTION else None,
                name=steps[r].name,
                tokens=tokens,
                message=_message(kind, charged, r, steps[r], tokens, turns),
                session=trace.session,
            )
        )
    total = trace.total_tokens
    return BurnReport(
        total_tokens=total,
        wasted_tokens=wasted,
        findings=tuple(findings),
        by_kind=by_kind,
        top_recommendation=_recommend(findings),
        tokens_estimated=trace.tokens_estimated,
        steps=len(steps),
        traces=1,
        session=trace.session,
    )


# ----------------------------------------------------------------------------- the reference


class _World:
    """Who mutated what, and when: the epoch bookkeeping of one trace."""

    def __init__(self) -> None:
        self.last_mut: dict[str, int] = {}  # target -> latest step that mutated it
        self.last_global = -1  # latest exec or target-less mutate: it may have changed anything
        self.last_any = -1  # latest mutation of anything

    def changed_since(self, j: int, f: StepFacts) -> bool:
        """Did anything step *f* depends on change strictly after step *j*?"""
        if f.kind == _EXEC or not f.targets:
            return self.last_any > j  # an exec, or a step without targets, depends on anything
        return self.last_global > j or any(self.last_mut.get(t, -1) > j for t in f.targets)

    def apply(self, i: int, f: StepFacts) -> None:
        """Advance the epochs that step *i* advances (a failed mutation too: it may have half-run)."""
        if f.kind == _MUTATE:
            if f.targets:
                for t in f.targets:
                    self.last_mut[t] = i
            else:
                self.last_global = i
            self.last_any = i
        elif f.kind == _EXEC:
            self.last_global = i
            self.last_any = i


def _charge_steps(steps: Sequence[Step]) -> tuple[list[int], list[int]]:
    """The readable reference: per step, the finding code (0 = none) and the step it repeats."""
    facts = [step_facts(s) for s in steps]
    codes = [0] * len(steps)
    of = [-1] * len(steps)
    world = _World()
    last_call: dict[tuple, int] = {}  # (name, args) -> latest step
    last_obs: dict[tuple, int] = {}  # (targets, outcome) -> latest observe
    last_edit: dict[tuple, int] = {}  # (target, old, new) -> latest error-free edit
    state_now: dict[tuple, int] = {}  # (target, domain) -> latest state value seen
    state_seen: dict[tuple, int] = {}  # (target, domain, value) -> latest step that saw it

    for i, f in enumerate(facts):
        kind, targets, call, has_outcome, outcome, _error, edit, state = f
        observed = kind == _OBSERVE and targets and has_outcome  # an observe with targets and outcome
        found = None
        if edit is not None:
            old, new = edit
            j = last_edit.get((targets, new, old))
            if j is not None and world.last_global < j:
                found = (_OSCILLATION, j)
        if found is None and state is not None:
            domain, value = state
            j = state_seen.get((targets, domain, value))
            if (
                j is not None
                and world.last_global < j
                and world.last_mut.get(targets[0], -1) > j  # the agent changed it since
                and state_now[(targets, domain)] != value  # ... to something else (A->B->A)
            ):
                found = (_OSCILLATION, j)
        if found is None and observed:
            j = last_obs.get((targets, outcome))
            if j is not None and not world.changed_since(j, f):
                found = (_REDUNDANT, j)
        if found is None:
            j = last_call.get(call)
            if j is not None and not world.changed_since(j, f):
                e = facts[j]
                if not (has_outcome and e.has_outcome and outcome != e.outcome):
                    found = (_DUPLICATE, j)
        if found is not None:
            codes[i], of[i] = found

        last_call[call] = i
        if observed:
            last_obs[(targets, outcome)] = i
        if edit is not None:
            last_edit[(targets,) + edit] = i
        if state is not None:
            domain, value = state
            state_now[(targets, domain)] = value
            state_seen[(targets, domain, value)] = i
        if kind == _MUTATE or kind == _EXEC:  # only these advance epochs (see _World.apply)
            world.apply(i, f)

    _charge_question_loops(steps, codes, of)
    return codes, of


_kind_of = attrgetter("kind")


def _charge_question_loops(steps: Sequence[Step], codes: list[int], of: list[int]) -> None:
    """Charge the asks of runs of >= QUESTION_LOOP_MIN_TURNS consecutive ask-only turns."""
    if "ask" not in map(_kind_of, steps):  # no ask at all: no ask-only turn (a C-level scan)
        return
    groups: list[list[int]] = []  # maximal runs of steps with equal turn
    for i, s in enumerate(steps):
        if groups and steps[groups[-1][0]].turn == s.turn:
            groups[-1].append(i)
        else:
            groups.append([i])

    def ask_only(group: list[int]) -> bool:
        kinds = {steps[i].kind for i in group}
        return "ask" in kinds and kinds <= {"ask", "other"}

    run: list[list[int]] = []
    for group in groups + [[]]:
        if group and ask_only(group):
            run.append(group)
            continue
        if len(run) >= QUESTION_LOOP_MIN_TURNS:
            for prev, cur in zip(run, run[1:]):
                asked_before = [i for i in prev if steps[i].kind == "ask"][-1]
                for i in cur:
                    if steps[i].kind == "ask" and codes[i] == 0:
                        codes[i], of[i] = _QUESTION, asked_before
        run = []


def analyse_burn(trace: Trace | Sequence[Step]) -> BurnReport:
    """Account for the wasted tokens of one trace (see the module doc for the rules).

    Accepts a Trace or a sequence of Steps; raises ValueError for a step of unknown kind and
    TypeError/ValueError from canonical_hash when args or results cannot be hashed.
    """
    if not isinstance(trace, Trace):
        trace = Trace(list(trace))
    codes, of = _charge_steps(trace.steps)
    return _report(trace, codes, of)


def analyse_many(traces: Iterable[Trace], *, impl: str | None = None) -> list[BurnReport]:
    """analyse_burn for many traces at once, through encode() and the bulk kernel.

    Gives the same reports as ``[analyse_burn(t) for t in traces]``; ``impl`` ("c"/"py")
    forces a kernel twin. Raises what encode() raises.
    """
    traces = list(traces)
    if not traces:
        return []
    enc = encode(traces)
    res = analyse_encoded(enc, impl=impl)
    codes = res.finding.tolist()
    of = res.of_step.tolist()
    reports = []
    for k, trace in enumerate(traces):
        s0, s1 = int(enc.trace_offsets[k]), int(enc.trace_offsets[k + 1])
        reports.append(_report(trace, codes[s0:s1], of[s0:s1]))
    return reports


def would_repeat(step: Step, trace: Trace | Sequence[Step]) -> RepeatCheck:
    """Would running *step* next repeat an earlier step of *trace* within the same epoch?

    True when an earlier step has the same tool name and canonical args and nothing *step*
    depends on changed since (the step has not run, so outcomes are not compared); ``of_step``
    is the most recent such step (0-based). Raises what step_facts/canonical_hash raise.
    """
    steps = trace.steps if isinstance(trace, Trace) else list(trace)
    f = step_facts(step)
    world = _World()
    last = None
    for i, s in enumerate(steps):
        g = step_facts(s)
        if g.call == f.call:
            last = i
        world.apply(i, g)
    if last is None:
        return RepeatCheck(False, None, f"no earlier call of {step.name} with these arguments")
    what = _target_text(step.target) if step.target is not None else "anything it depends on"
    if world.changed_since(last, f):
        return RepeatCheck(
            False, None, f"same call as step {last}, but {what} may have changed since (a later mutation or exec)"
        )
    failed = " (which failed)" if steps[last].error is not None else ""
    return RepeatCheck(True, last, f"identical to step {last}{failed}, and nothing has changed {what} since")
