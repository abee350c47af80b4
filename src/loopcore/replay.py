"""Guard replay: what would a Guard have said about calls an agent already made?

``loopcore replay`` feeds each recorded step to a fresh :class:`~loopcore.Guard` exactly as a
harness would have: ``check`` before the call, ``record`` with the recorded outcome after it.

Accounting rule (documented in docs/cli.md): **tokens saved = the tokens of the steps the guard
would have blocked**, nothing more. A blocked call never runs, so its cost is certainly saved;
what the agent would have done instead is unknown, so later steps are not counted as saved even
when the block came early. The guard keeps being fed the recorded outcome of a blocked step, so
every later decision is the one the guard would make over the history as it really happened;
that makes the figure a conservative lower bound rather than a guess at a counterfactual run.

Each trace gets its own Guard: a trace is one session, and a replay of one file must not depend
on which other files were replayed before it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - typing only
    from rich.console import Console

    from .trace import Trace

from .burn import ref_text
from .report import (
    REPORT_SCHEMA,
    Skipped,
    _json_default,
    _skipped,
    _sources,
    _stats,
    bulk_gc,
    fmt_target,
    fmt_tokens,
    iter_traces,
)

__all__ = [
    "ReplayEvent",
    "ReplayReport",
    "TraceReplay",
    "collect_replay",
    "replay_trace",
    "render_replay_text",
    "replay_to_json",
]


@dataclass(slots=True)
class ReplayEvent:
    """One warn or block the guard would have returned, at step index ``step`` of its trace
    (``ref``: the same step in the trace's own coordinates, ``Step.ref``)."""

    step: int
    tool: str
    target: Any
    action: str
    detector: str | None
    count: int
    message: str
    tokens: int
    ref: Any = None
    estimated: bool = False

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        t = self.target
        return {
            "step": self.step,
            "tool": self.tool,
            "target": list(t) if isinstance(t, tuple) else t,
            "action": self.action,
            "detector": self.detector,
            "count": self.count,
            "message": self.message,
            "tokens": self.tokens,
            "ref": self.ref,
        }


@dataclass(slots=True)
class TraceReplay:
    """The guard's verdicts over one trace."""

    source: str
    session: str
    format: str | None
    steps: int
    total_tokens: int
    tokens_estimated: bool
    events: list[ReplayEvent] = field(default_factory=list)

    @property
    def warned(self) -> int:
        """Steps the guard would have let through with a warning."""
        return sum(1 for e in self.events if e.action == "warn")

    @property
    def blocked(self) -> int:
        """Steps the guard would have blocked."""
        return sum(1 for e in self.events if e.action == "block")

    @property
    def saved_tokens(self) -> int:
        """Tokens of the blocked steps: what blocking would certainly have saved."""
        return sum(e.tokens for e in self.events if e.action == "block")

    @property
    def first_block(self) -> int | None:
        """Index of the first blocked step, or None."""
        return next((e.step for e in self.events if e.action == "block"), None)

    @property
    def label(self) -> str:
        """The session, or the file name when the trace has none."""
        return self.session or os.path.basename(self.source)

    def by_detector(self) -> dict[str, dict[str, int]]:
        """``{detector: {"warn": n, "block": n}}`` over this trace."""
        out: dict[str, dict[str, int]] = {}
        for e in self.events:
            d = out.setdefault(e.detector or "-", {"warn": 0, "block": 0})
            d[e.action] += 1
        return out

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict with every event."""
        return {
            "source": self.source,
            "session": self.session,
            "format": self.format,
            "steps": self.steps,
            "total_tokens": self.total_tokens,
            "tokens_estimated": self.tokens_estimated,
            "warned": self.warned,
            "blocked": self.blocked,
            "saved_tokens": self.saved_tokens,
            "first_block": self.first_block,
            "by_detector": self.by_detector(),
            "events": [e.to_dict() for e in self.events],
        }


@dataclass(slots=True)
class ReplayReport:
    """``loopcore replay`` over many traces: per-trace verdicts and what was skipped."""

    policy: str
    traces: list[TraceReplay]
    skipped: list[Skipped] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)
    example: bool = False

    @property
    def steps(self) -> int:
        """Steps over every trace."""
        return sum(t.steps for t in self.traces)

    @property
    def total_tokens(self) -> int:
        """Tokens over every trace."""
        return sum(t.total_tokens for t in self.traces)

    @property
    def warned(self) -> int:
        """Warned steps over every trace."""
        return sum(t.warned for t in self.traces)

    @property
    def blocked(self) -> int:
        """Blocked steps over every trace."""
        return sum(t.blocked for t in self.traces)

    @property
    def saved_tokens(self) -> int:
        """Tokens of every blocked step."""
        return sum(t.saved_tokens for t in self.traces)

    @property
    def tokens_estimated(self) -> bool:
        """True when any trace's token counts were estimated."""
        return any(t.tokens_estimated for t in self.traces)

    def by_detector(self) -> dict[str, dict[str, int]]:
        """``{detector: {"warn": n, "block": n}}`` over every trace."""
        out: dict[str, dict[str, int]] = {}
        for t in self.traces:
            for det, counts in t.by_detector().items():
                d = out.setdefault(det, {"warn": 0, "block": 0})
                d["warn"] += counts["warn"]
                d["block"] += counts["block"]
        return dict(sorted(out.items()))

    def to_dict(self) -> dict[str, Any]:
        """The full replay as JSON-ready data."""
        from . import __version__, implementation

        return {
            "schema": REPORT_SCHEMA,
            "loopcore": __version__,
            "implementation": implementation(),
            "policy": self.policy,
            "inputs": list(self.inputs),
            "example": self.example,
            "overall": {
                "traces": len(self.traces),
                "steps": self.steps,
                "total_tokens": self.total_tokens,
                "tokens_estimated": self.tokens_estimated,
                "warned": self.warned,
                "blocked": self.blocked,
                "saved_tokens": self.saved_tokens,
                "by_detector": self.by_detector(),
            },
            "traces": [t.to_dict() for t in self.traces],
            "skipped": [s.to_dict() for s in self.skipped],
        }


def replay_trace(trace: Trace, guard: Any, *, source: str = "") -> TraceReplay:
    """Run *guard* over *trace* (check, then record the recorded outcome) and collect its verdicts.

    Raises whatever the guard raises (e.g. TypeError for args it cannot hash).
    """
    events: list[ReplayEvent] = []
    for i, step in enumerate(trace.steps):
        if step.after_user and step.meta.get("after_compaction") is True:
            # the compaction the live guard would have been told of
            guard.note_compaction(step.session)
        elif step.after_user:
            # the person's message the live guard would have been told of (every loop's
            # evidence starts again), as the burn rules start theirs
            guard.note_message(step.session, "", role="user")
        if (
            not step.name
            or step.rejected is not None
            or (step.meta.get("not_run") is True and step.meta.get("next_move") is not True)
            or "hook" in step.meta
        ):
            # a turn that ran nothing, a call the harness cancelled before it started (a
            # browser's next move did run: a hook saw it), or the harness's own hooks run after
            # a call (Claude Code's PostToolUse commands): there was no call for a guard to check
            continue
        kind, target = _guard_kind(step)
        d = guard.check(
            step.session,
            step.name,
            step.args,
            kind=kind,
            target=target,
            call_id=step.call_id,
        )
        if d.action != "allow":
            events.append(
                ReplayEvent(
                    i,
                    step.name,
                    step.target,
                    d.action,
                    d.detector,
                    d.count,
                    d.message,
                    step.tokens,
                    step.ref,
                    step.tokens_estimated,
                )
            )
        # The recorded outcome, even after a block: later decisions then describe the history
        # as it really happened (see the module docstring for why saved tokens stay a lower bound).
        guard.record(
            step.session,
            step.name,
            step.args,
            step.result,
            error=step.error,
            tokens=step.tokens,
            kind=kind,
            target=target,
            call_id=step.call_id,
        )
    return TraceReplay(
        source=source or trace.source or "",
        session=trace.session or "",
        format=trace.format,
        steps=len(trace.steps),
        total_tokens=trace.total_tokens,
        tokens_estimated=trace.tokens_estimated,
        events=events,
    )


def _guard_kind(step: Any) -> tuple[str | None, Any]:
    """The kind and target a harness would give the guard for *step*, by the burn analysis's
    reads/writes rules: a step that writes known targets (``git diff > p.txt``) changes them, so
    a later read of one is not a re-observation; a provable no-op changes nothing."""
    kind, target = step.kind, step.target
    if step.no_op and kind == "mutate":
        return "other", None
    writes = step.writes
    if writes and kind not in ("mutate", "exec"):
        return "mutate", writes[0] if len(writes) == 1 else writes
    return kind, target


def collect_replay(
    paths: Sequence[str | os.PathLike[str]],
    *,
    policy: str = "default",
    format: str = "auto",
    keep_going: bool = False,
    implementation: str | None = None,
    on_trace: Callable[[Trace], None] | None = None,
) -> ReplayReport:
    """Replay every trace under *paths* through a fresh Guard with preset *policy*.

    Raises ValueError for an unknown preset or format, TraceFormatError on bad input unless
    *keep_going* (then the bad files and lines are listed in ``report.skipped``). An empty
    *paths* replays the bundled example trace. *implementation* forces the guard's twin.
    """
    from .guard import _make_guard
    from .policy import Policy

    pol = _preset(Policy, policy)
    results: list[TraceReplay] = []
    stats = _stats()
    with bulk_gc():
        for src, trace in iter_traces(paths, format=format, keep_going=keep_going, stats=stats):
            results.append(replay_trace(trace, _make_guard(pol, impl=implementation), source=src))
            if on_trace is not None:
                on_trace(trace)
    return ReplayReport(policy, results, _skipped(stats), inputs=_sources(paths), example=not paths)


def _preset(Policy: Any, name: str) -> Any:
    try:
        return Policy.preset(name)
    except ValueError:
        raise ValueError(
            f"unknown policy {name!r}; known policies: {', '.join(Policy.presets())}"
        ) from None


def render_replay_text(
    report: ReplayReport, console: Console, *, top: int = 10, max_rows: int = 30
) -> None:
    """Print per-trace warn/block counts and tokens saved, the detectors that fired, and the
    first *top* blocks (else warnings) with the message the model would have seen."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    if report.example:
        console.print(
            f"No path given: replaying the bundled example trace {report.inputs[0]}", markup=False
        )
    n = len(report.traces)
    table = Table(
        title=f"loopcore replay of {n} trace{'s' if n != 1 else ''} with policy {report.policy!r}",
        box=box.SIMPLE_HEAD,
        title_justify="left",
    )
    table.add_column("trace", overflow="fold", max_width=48)
    table.add_column("steps", justify="right")
    table.add_column("warned", justify="right")
    table.add_column("blocked", justify="right")
    table.add_column("first block", justify="right")
    table.add_column("tokens saved", justify="right")
    rows = report.traces
    if len(rows) > max_rows:
        rows = sorted(rows, key=lambda t: (-t.saved_tokens, -t.blocked, -t.warned))[:max_rows]
    for t in rows:
        table.add_row(
            Text(t.label),
            f"{t.steps:,}",
            f"{t.warned:,}",
            f"{t.blocked:,}",
            "-" if t.first_block is None else f"step {t.first_block}",
            fmt_tokens(t.saved_tokens, t.tokens_estimated),
        )
    table.add_section()
    ratio = report.saved_tokens / report.total_tokens if report.total_tokens else 0.0
    table.add_row(
        "[bold]overall[/bold]",
        f"{report.steps:,}",
        f"{report.warned:,}",
        f"{report.blocked:,}",
        "",
        f"{fmt_tokens(report.saved_tokens, report.tokens_estimated)} ({ratio * 100:.1f}%)",
    )
    console.print(table)
    if len(rows) < len(report.traces):
        console.print(
            f"({len(report.traces) - len(rows)} traces with fewer verdicts not listed; use --json for all)"
        )
    dets = report.by_detector()
    if dets:
        console.print(
            "Detectors: "
            + ", ".join(f"{k} (warn {v['warn']}, block {v['block']})" for k, v in dets.items()),
            highlight=False,
            markup=False,
        )
    events = [(t, e) for t in report.traces for e in t.events if e.action == "block"]
    kind = "blocks"
    if not events:
        events = [(t, e) for t in report.traces for e in t.events]
        kind = "warnings"
    if events:
        # A grid, not a table: the message the model would have seen is the useful part.
        console.print(
            Text(f"First {min(top, len(events))} {kind} (of {len(events):,})", style="bold")
        )
        et = Table.grid(padding=(0, 2))
        et.add_column(justify="right", no_wrap=True)
        et.add_column()
        for t, e in events[:top]:
            where = ref_text(e.ref)
            head = Text.assemble(
                (f"{e.action} {e.detector or '-'}", "bold"),
                "  ",
                (t.label, "cyan"),
                f"  step {e.step}{f' ({where})' if where else ''}  {e.tool}",
            )
            if e.target is not None:
                head.append(f" {fmt_target(e.target)}")
            et.add_row(fmt_tokens(e.tokens, e.estimated), Text.assemble(head, "\n", e.message))
        console.print(et)
    else:
        console.print("The guard would have allowed every call.")
    if report.tokens_estimated:
        console.print("~ = estimated from text length: the trace has no per-call usage fields.")
    console.print(
        "Tokens saved counts only the blocked calls themselves (a lower bound).", style="dim"
    )
    if report.skipped:
        console.print(f"[yellow]Skipped {len(report.skipped)} unreadable input(s):[/yellow]")
        for s in report.skipped[:10]:
            console.print(f"  {s.where()}: {s.message}", highlight=False, markup=False)


def replay_to_json(report: ReplayReport) -> bytes:
    """The full replay as indented UTF-8 JSON."""
    import orjson

    return (
        orjson.dumps(
            report.to_dict(),
            option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS,
            default=_json_default,
        )
        + b"\n"
    )
