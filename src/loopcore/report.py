"""What ``loopcore analyse`` computes and how it is shown: a table, JSON, or one HTML file.

:func:`collect` turns paths into an :class:`AnalysisReport` (load + burn analysis, no
rendering; the ingest benchmark times exactly this). ``render_text`` / ``to_json`` /
``render_html`` only format that report, so every output says the same thing.

Token counts that an adapter estimated from text length (the trace had no usage fields) are
marked with ``~`` in the table and HTML and carry ``tokens_estimated: true`` in JSON.
"""

from __future__ import annotations

import contextlib
import gc
import os
import pathlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - typing only
    from rich.console import Console

    from .burn import BurnReport, Finding
    from .trace import Trace

__all__ = [
    "AnalysisReport",
    "EXAMPLE_TRACE",
    "REPORT_SCHEMA",
    "Skipped",
    "TraceResult",
    "bulk_gc",
    "collect",
    "render_html",
    "render_text",
    "to_json",
    "fmt_tokens",
    "iter_traces",
]

#: Bumped when the JSON report changes shape (fields are only ever added within a version).
REPORT_SCHEMA = 1

#: Traces are analysed in batches of about this many steps: one encode and one run of the
#: compiled kernel per batch (see docs/cli.md, "How the CLI runs"), memory bounded by the batch.
BATCH_STEPS = 65536

#: The bundled example session (written by tools/make_example.py), analysed by a bare
#: ``loopcore analyse``.
EXAMPLE_TRACE = pathlib.Path(__file__).resolve().parent / "examples" / "session.jsonl"


@dataclass(slots=True)
class Skipped:
    """One input that could not be read, kept so ``--keep-going`` can say what it left out."""

    path: str
    line: int | None
    message: str

    def where(self) -> str:
        """``path:line`` (or just the path when no line applies)."""
        return f"{self.path}:{self.line}" if self.line else self.path

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"path": self.path, "line": self.line, "message": self.message}


@dataclass(slots=True)
class TraceResult:
    """One analysed trace: where it came from and its BurnReport."""

    source: str
    session: str
    format: str | None
    steps: int
    report: BurnReport

    @property
    def label(self) -> str:
        """A short human name: the session, or the file name when the trace has none."""
        return self.session or pathlib.Path(self.source).name

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: the full BurnReport plus where the trace came from."""
        d: dict[str, Any] = {
            "source": self.source,
            "session": self.session,
            "format": self.format,
            "steps": self.steps,
        }
        # The origin fields win: an empty trace's BurnReport has no session of its own.
        return {**d, **{k: v for k, v in self.report.to_dict().items() if k not in d}}


@dataclass(slots=True)
class AnalysisReport:
    """The result of ``loopcore analyse``: per-trace reports, the combined one, what was skipped."""

    traces: list[TraceResult]
    overall: BurnReport
    skipped: list[Skipped] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)
    example: bool = False
    files: int = 0
    ignored: list[str] = field(default_factory=list)
    #: copies of a session or run a walk passed over (Entire's checkpoint copies, an OpenHands
    #: evaluation's run written to several files): another file read holds each whole
    copies: list[str] = field(default_factory=list)

    @property
    def steps(self) -> int:
        """Steps over every trace."""
        return sum(t.steps for t in self.traces)

    def top_findings(self, n: int) -> list[tuple[TraceResult, Finding]]:
        """The *n* costliest findings over every trace, with the trace each came from."""
        pairs = [(t, f) for t in self.traces for f in t.report.findings]
        # Ties broken by input order so the output is deterministic across runs.
        pairs.sort(key=lambda p: -p[1].tokens)
        return pairs[: max(n, 0)]

    def to_dict(self) -> dict[str, Any]:
        """The full report as JSON-ready data (schema ``REPORT_SCHEMA``)."""
        from . import __version__, implementation

        return {
            "schema": REPORT_SCHEMA,
            "loopcore": __version__,
            "implementation": implementation(),
            "inputs": list(self.inputs),
            "example": self.example,
            "files": self.files,
            "overall": dict(self.overall.to_dict(), traces=len(self.traces), steps=self.steps),
            "traces": [t.to_dict() for t in self.traces],
            "skipped": [s.to_dict() for s in self.skipped],
            "ignored": list(self.ignored),
            "copies": list(self.copies),
        }


def collect(
    paths: Sequence[str | os.PathLike[str]],
    *,
    format: str = "auto",
    keep_going: bool = False,
    on_trace: Callable[[Trace], None] | None = None,
    charge_turn_output: bool = False,
) -> AnalysisReport:
    """Load every trace under *paths* and analyse it, in batches of about ``BATCH_STEPS`` steps
    encoded together and run through one call of the burn kernel; raises TraceFormatError on bad input
    (ValueError for an unknown *format*) unless *keep_going*, in which case the bad files and
    lines are listed in ``report.skipped``.

    An empty *paths* analyses the bundled example trace (``report.example`` is then True).
    ``on_trace`` is called after each trace is analysed, in input order (the CLI drives its
    progress bar with it).
    ``charge_turn_output`` charges a wasted call's whole turn (``BurnSettings``).
    """
    from .burn import BurnReport, BurnSettings, analyse_many

    settings = BurnSettings(charge_turn_output=charge_turn_output)

    results: list[TraceResult] = []
    stats = _stats()
    batch: list[tuple[str, Trace]] = []
    pending = 0

    def flush() -> None:
        # one encode and one kernel run over the batch; Findings are built per trace after
        reports = analyse_many([t for _, t in batch], settings)
        for (src, trace), rep in zip(batch, reports):
            results.append(_result(trace, src, rep))
            if on_trace is not None:
                on_trace(trace)
        batch.clear()

    with bulk_gc():
        for src, trace in iter_traces(paths, format=format, keep_going=keep_going, stats=stats):
            batch.append((src, trace))
            pending += len(trace.steps)
            if pending >= BATCH_STEPS:
                flush()
                pending = 0
        if batch:
            flush()
    overall = BurnReport.combine([r.report for r in results])
    return AnalysisReport(
        results,
        overall,
        _skipped(stats),
        inputs=_sources(paths),
        example=not paths,
        files=stats.files,
        ignored=[str(p) for p in stats.ignored],
        copies=list(stats.copies),
    )


@contextlib.contextmanager
def bulk_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector for a bulk load, restoring its state afterwards.

    Loading allocates millions of small acyclic objects (parsed JSON, Steps) that the cyclic
    collector would rescan again and again for nothing: about 10% of ``analyse`` time on
    ../shared/traces. Reference counting still frees every trace once it is analysed, so
    memory stays bounded by the largest trace. Process-wide, like every ``gc`` switch.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _sources(paths: Sequence[str | os.PathLike[str]] | str | os.PathLike[str]) -> list[str]:
    if isinstance(paths, (str, os.PathLike)):  # one path, not a sequence of characters
        return [os.fspath(paths)]
    return [os.fspath(p) for p in paths] if paths else [str(EXAMPLE_TRACE)]


def _stats() -> Any:
    from .adapters import LoadStats

    return LoadStats()


def iter_traces(
    paths: Sequence[str | os.PathLike[str]],
    *,
    format: str = "auto",
    keep_going: bool = False,
    stats: Any = None,
) -> Iterable[tuple[str, Trace]]:
    """``(source, trace)`` for every trace under *paths* (the bundled example when empty), via
    ``loopcore.load``; errors as for :func:`collect`, counted in *stats* (a LoadStats)."""
    from .adapters import load

    sources = _sources(paths)
    for trace in load(sources, format, keep_going=keep_going, stats=stats):
        yield (trace.source or sources[0]), trace


def _skipped(stats: Any) -> list[Skipped]:
    return [
        Skipped(
            str(getattr(e, "path", None) or "<input>"),
            getattr(e, "line", None),
            str(getattr(e, "reason", e)),
        )
        for e in stats.errors
    ]


def _result(trace: Trace, src: str, report: BurnReport) -> TraceResult:
    return TraceResult(
        source=src,
        session=trace.session or "",
        format=trace.format,
        steps=len(trace.steps),
        report=report,
    )


# ---------------------------------------------------------------------------------------------
# formatting helpers shared by the text and HTML renderers


def fmt_tokens(n: int, estimated: bool = False) -> str:
    """``12,345``, or ``~12,345`` when the count is an estimate (0 is 0 either way)."""
    return f"{'~' if estimated and n else ''}{n:,}"


def estimate_note(report: BurnReport) -> str:
    """The footnote for ``~``: how much of the total rests on estimates from text length."""
    share = report.estimated_tokens / report.total_tokens if report.total_tokens else 0.0
    pct = f"{share * 100:.1f}%" if share >= 0.001 else "under 0.1%"
    return (
        f"~ = estimated from text length where the trace has no usage fields: "
        f"{report.estimated_tokens:,} of {report.total_tokens:,} tokens ({pct}); the rest come from usage fields."
    )


def no_findings_note(report: AnalysisReport) -> str:
    """What the text and HTML reports say when traces were read and nothing was charged: that
    every repeated call had a reason, or, when no trace held a step, that there was nothing to
    charge (the first would vouch for calls that were never read)."""
    if report.steps:
        return "No waste found: every repeated call had a reason (a change in between, or a new result)."
    n = len(report.traces)
    return (
        f"No step to analyse: the {n} trace{'s' if n != 1 else ''} read "
        f"hold{'s' if n == 1 else ''} no tool call or reply, so nothing was charged."
    )


def fmt_ratio(r: float) -> str:
    """A waste ratio as a percentage with one decimal."""
    return f"{r * 100:.1f}%"


def fmt_target(target: Any) -> str:
    """A finding's target as text: a path, ``a, b`` for several, ``-`` when unknown."""
    if target is None or target == () or target == "":
        return "-"
    if isinstance(target, (tuple, list)):
        return ", ".join(str(t) for t in target)
    return str(target)


def shorten(text: str, width: int) -> str:
    """*text* cut to *width* characters keeping its end (``…/fields/related.py``): the end of a
    path or id is the part that tells targets apart."""
    return text if len(text) <= width else "…" + text[len(text) - width + 1 :]


#: Short names for the top-finding column of the table; the findings list spells kinds out.
_KIND_SHORT = {
    "redundant_observation": "re-read",
    "duplicate_call": "repeat",
    "oscillation": "undo/redo",
    "question_loop": "questions",
    "rejected_action": "rejected",
    "degenerate_output": "looping reply",
}


# Every C0 and C1 control character and DEL, shown as a visible escape: a session id, path or
# target from a trace must never reach the terminal as an escape sequence (a window-title OSC,
# a clear-screen, a cursor move).
_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))}


def terminal_safe(text: Any) -> str:
    """*text* as a str with every control character escaped (``\\x1b``): safe to print."""
    return str(text).translate(_CONTROLS)


def _top_finding_text(report: BurnReport, width: int = 1000) -> str:
    if not report.findings:
        return "-"
    f = max(report.findings, key=lambda f: f.tokens)
    kind = _KIND_SHORT.get(f.kind, f.kind)
    if f.kind in ("question_loop", "rejected_action", "degenerate_output"):
        return kind
    what = terminal_safe(
        f.name if f.kind == "duplicate_call" and f.target is None else fmt_target(f.target)
    )
    return f"{kind} {shorten(what, max(width - len(kind) - 1, 8))}"


def _visible(report: AnalysisReport, min_ratio: float) -> list[TraceResult]:
    return [t for t in report.traces if t.report.waste_ratio >= min_ratio]


def _title(report: AnalysisReport) -> str:
    n = len(report.traces)
    what = "the bundled example trace" if report.example else f"{n} trace{'s' if n != 1 else ''}"
    return f"loopcore burn analysis of {what}"


# ---------------------------------------------------------------------------------------------
# text (rich)


def render_text(
    report: AnalysisReport,
    console: Console,
    *,
    top: int = 10,
    min_ratio: float = 0.0,
    max_rows: int = 30,
) -> None:
    """Print the summary to *console*: one row per trace, the overall row, the top findings and
    the top recommendation. Traces below *min_ratio* are left out of the table (not the totals)."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    if report.example:
        console.print(
            f"No path given: analysing the bundled example trace {terminal_safe(report.inputs[0])}",
            markup=False,
        )
    rows = _visible(report, min_ratio)
    rows_shown = (
        sorted(rows, key=lambda t: -t.report.wasted_tokens)[:max_rows]
        if len(rows) > max_rows
        else rows
    )
    o = report.overall
    cells = [
        (
            terminal_safe(t.label),
            terminal_safe(t.format or "-"),
            f"{t.steps:,}",
            fmt_tokens(t.report.total_tokens, t.report.tokens_estimated),
            fmt_tokens(t.report.wasted_tokens, t.report.wasted_estimated),
            fmt_ratio(t.report.waste_ratio),
            t.report,
        )
        for t in rows_shown
    ]
    total: tuple[Any, ...] = (
        "overall",
        "",
        f"{report.steps:,}",
        fmt_tokens(o.total_tokens, o.tokens_estimated),
        fmt_tokens(o.wasted_tokens, o.wasted_estimated),
        fmt_ratio(o.waste_ratio),
        o,
    )
    heads = ("trace", "format", "steps", "tokens", "wasted", "ratio")
    widths = [max(len(h), *(len(c[i]) for c in [*cells, total])) for i, h in enumerate(heads)]
    widths[0] = min(widths[0], 30)
    # The top-finding cell gets whatever the other columns leave (2 of padding per cell);
    # numbers never wrap, labels fold, and the finding's target is cut from the left.
    finding_w = max(16, console.width - sum(widths) - 2 * (len(heads) + 1) - 2)
    table = Table(title=_title(report), box=box.SIMPLE_HEAD, title_justify="left")
    table.add_column("trace", overflow="fold", max_width=30)
    table.add_column("format", overflow="fold")
    for h in heads[2:]:
        table.add_column(h, justify="right", no_wrap=True)
    table.add_column("top finding", no_wrap=True, overflow="ellipsis")
    for label, fmt, *nums, r in cells:
        table.add_row(Text(label), Text(fmt), *nums, Text(_top_finding_text(r, finding_w)))
    table.add_section()
    table.add_row(
        Text("overall", style="bold"),
        "",
        *total[2:5],
        Text(total[5], style="bold"),
        Text(_top_finding_text(o, finding_w)),
    )
    console.print(table)
    hidden = len(report.traces) - len(rows_shown)
    if hidden:
        why = []
        if len(rows) < len(report.traces):
            why.append(f"{len(report.traces) - len(rows)} below --min-ratio {fmt_ratio(min_ratio)}")
        if len(rows_shown) < len(rows):
            why.append(f"{len(rows) - len(rows_shown)} more with less waste")
        console.print(
            f"({hidden} trace{'s' if hidden != 1 else ''} not listed: {'; '.join(why)}; use --json for all)"
        )

    findings = report.top_findings(top)
    if findings:
        # A grid, not a table: the sentence is the useful part and gets the full width,
        # indented under its tokens instead of squeezed into a narrow column.
        n = sum(len(t.report.findings) for t in report.traces)
        console.print(
            Text(
                f"Top {len(findings)} finding{'s' if len(findings) != 1 else ''} (of {n:,})",
                style="bold",
            )
        )
        ft = Table.grid(padding=(0, 2))
        ft.add_column(justify="right", no_wrap=True)
        ft.add_column()
        for t, f in findings:
            beside = (
                (
                    f"\n(+{fmt_tokens(f.turn_output_tokens, f.tokens_estimated)} tokens of the same turns' "
                    "reasoning and reply text, not charged)"
                )
                if f.turn_output_tokens
                else ""
            )
            ft.add_row(
                fmt_tokens(f.tokens, f.tokens_estimated),
                Text.assemble(
                    (terminal_safe(f.kind), "bold"),
                    "  ",
                    (terminal_safe(t.label), "cyan"),
                    "\n",
                    terminal_safe(f.message),
                    beside,
                ),
            )
        console.print(ft)
    elif report.traces:
        console.print(no_findings_note(report), markup=False, highlight=False)
    if o.top_recommendation:
        console.print()
        console.print(
            Text.assemble(("Top recommendation: ", "bold"), terminal_safe(o.top_recommendation))
        )
    if o.tokens_estimated:
        console.print(estimate_note(o), markup=False, highlight=False)
    if report.copies:
        n = len(report.copies)
        console.print(
            f"({n} cop{'ies' if n != 1 else 'y'} of a session or run passed over: another "
            f"file read holds {'each' if n != 1 else 'it'} whole, e.g. "
            f"{terminal_safe(report.copies[0])})",
            markup=False,
            highlight=False,
        )
    if report.ignored:
        n = len(report.ignored)
        console.print(
            f"({n} file{'s' if n != 1 else ''} without a known trace format ignored, e.g. "
            f"{terminal_safe(os.path.basename(report.ignored[0]))})",
            markup=False,
            highlight=False,
        )
        ui_only = _ui_log_only(report.ignored)
        if ui_only:
            console.print(
                f"({ui_only} Cline / Roo Code task folder{'s hold' if ui_only != 1 else ' holds'} "
                "only ui_messages.json, the extension's UI log: the conversation loopcore reads "
                "is api_conversation_history.json, which is not there, so "
                f"{'those tasks were' if ui_only != 1 else 'that task was'} not analysed)",
                markup=False,
                highlight=False,
            )
        if not report.traces:
            console.print(
                "Nothing was analysed: no file in the inputs holds a trace of a known format "
                "(`loopcore formats` lists them).",
                markup=False,
                highlight=False,
            )
    if report.skipped:
        console.print(
            f"[yellow]Skipped {len(report.skipped)} unreadable input{'s' if len(report.skipped) != 1 else ''}:[/yellow]"
        )
        for s in report.skipped[: top or 10]:
            console.print(
                terminal_safe(f"  {s.where()}: {s.message}"), highlight=False, markup=False
            )
        if len(report.skipped) > (top or 10):
            console.print(f"  ... and {len(report.skipped) - (top or 10)} more (see --json)")


def _ui_log_only(ignored: Sequence[str]) -> int:
    """How many of the *ignored* files are a Cline / Roo Code task's UI log with no
    conversation beside it (``ui_messages.json`` without ``api_conversation_history.json``)."""
    return sum(
        1
        for p in ignored
        if os.path.basename(p) == "ui_messages.json"
        and not os.path.exists(os.path.join(os.path.dirname(p), "api_conversation_history.json"))
    )


# ---------------------------------------------------------------------------------------------
# JSON


def to_json(report: AnalysisReport) -> bytes:
    """The full report as indented UTF-8 JSON (every trace and finding, not just the top ones)."""
    import orjson

    return (
        orjson.dumps(
            report.to_dict(),
            option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS,
            default=_json_default,
        )
        + b"\n"
    )


def _json_default(o: Any) -> Any:
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    if hasattr(o, "to_dict"):
        return o.to_dict()
    return repr(o)


# ---------------------------------------------------------------------------------------------
# HTML: see loopcore.htmlreport (charts, timelines, the guard overlay; everything escaped)


def render_html(
    report: AnalysisReport,
    *,
    top: int = 10,
    min_ratio: float = 0.0,
    timelines: Any = None,
    replays: Any = None,
    policy: str | None = None,
) -> str:
    """The report as one self-contained HTML page (see :mod:`loopcore.htmlreport`): the *top*
    costliest findings listed on the page itself, every trace in its table."""
    from .htmlreport import render_report

    return render_report(
        report, timelines=timelines, replays=replays, policy=policy, min_ratio=min_ratio, top=top
    )
