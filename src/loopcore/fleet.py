"""Analysis over many processes: the local cores (``--jobs N``) or a Dask cluster (``--scheduler``).

The unit of work is what ``loopcore.load`` reads in one go: a trace file, or an OpenHands
``events`` folder (one stream over many files). A worker loads its unit, runs the burn analysis
and sends back the per-trace results; the caller puts them back in input order and combines
them, so the report is the one a single process writes (same traces in the same order, same
findings, same totals: a test compares the JSON byte for byte).

Why this cannot count anything twice: a unit's result is a value returned by one task, and the
reduction happens once, on the caller's side, over exactly one result per unit. When Dask loses
a worker mid-run it runs the lost tasks again elsewhere; the repeated run replaces the lost one
rather than adding to it. Memory per worker is bounded by the largest unit, not by the corpus.

Dask is an optional extra (``pip install 'loopcore[fleet]'``), imported only on that path.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - typing only
    from .report import AnalysisReport, TraceResult

__all__ = ["PARALLEL_MIN_BYTES", "UnitResult", "analyse", "cpu_count", "units"]

#: Below this many input bytes a local run stays in one process: starting workers costs more
#: than the work (about 0.1 s each to import the package).
PARALLEL_MIN_BYTES = 4 << 20

_FLEET_HINT = "the fleet path needs Dask: pip install 'loopcore[fleet]'"


def cpu_count() -> int:
    """The cores this process may run on (its CPU affinity where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - platforms without affinity
        return max(1, os.cpu_count() or 1)


@dataclass(slots=True)
class Unit:
    """One piece of work: a file (``item`` a path) or an events folder (``item`` a list of paths)."""

    item: str | list[str]
    in_folder: bool
    size: int = 0

    @property
    def label(self) -> str:
        return os.path.dirname(self.item[0]) if isinstance(self.item, list) else self.item


@dataclass(slots=True)
class UnitResult:
    """What a worker sends back for one unit."""

    results: list[TraceResult] = field(default_factory=list)
    errors: list[Any] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    files: int = 0
    steps: int = 0
    html: Any = None
    #: (source, steps, no_steps) per trace, for the caller's progress and empty-input notes
    seen: list[tuple[str, int, bool]] = field(default_factory=list)


def _size(item: str | list[str]) -> int:
    try:
        if isinstance(item, str) and os.path.isdir(item):  # a store read as a whole (opencode)
            return sum(
                os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(item) for f in fs
            )
        if isinstance(item, list):
            return sum(os.stat(p).st_size for p in item)
        return os.stat(item).st_size
    except OSError:
        return 0


def units(paths: Sequence[str]) -> list[Unit | tuple[str, str]]:
    """The units of work under *paths*, in the order ``load`` reads them. A path that does not
    exist comes back as ``(path, "missing")`` so the caller reports it where ``load`` would."""
    from .adapters import _walk

    out: list[Unit | tuple[str, str]] = []
    for p in paths:
        p = os.fspath(p)
        if os.path.isdir(p):
            out.extend(Unit(item, True, _size(item)) for item in _walk(p))
        elif os.path.exists(p):
            out.append(Unit(p, False, _size(p)))
        else:
            out.append((p, "missing"))
    return out


def _analyse_unit(unit: Unit, fmt: str, keep_going: bool, html_policy: str | None) -> UnitResult:
    """Load one unit and analyse its traces (runs in a worker)."""
    from .adapters import LoadStats, TraceFormatError, _load_file
    from .burn import analyse_burn
    from .report import _result, bulk_gc

    stats = LoadStats()
    out = UnitResult()
    collector = None
    if html_policy is not None:
        from .htmlreport import HtmlCollector

        collector = HtmlCollector(policy=html_policy or None)
    with bulk_gc():
        try:
            traces = _load_file(unit.item, fmt, keep_going, stats, None, unit.in_folder)
        except TraceFormatError as err:
            if not keep_going:
                raise
            stats.errors.append(err)
            traces = []
        for t in traces:
            out.results.append(_result(t, t.source or unit.label, analyse_burn(t)))
            out.steps += len(t.steps)
            out.seen.append((t.source or unit.label, len(t.steps), bool(t.meta.get("no_steps"))))
            if collector is not None:
                collector(t)
    out.errors = list(stats.errors)
    out.ignored = [str(p) for p in stats.ignored]
    out.files = stats.files
    if collector is not None:
        out.html = (collector.timelines, collector.replays)
    return out


def _reduce(paths: Sequence[str], parts: list[UnitResult]) -> tuple[AnalysisReport, Any]:
    from .burn import BurnReport
    from .report import AnalysisReport, _skipped, _sources

    results: list[TraceResult] = []
    errors: list[Any] = []
    ignored: list[str] = []
    files = 0
    timelines: list[Any] = []
    replays: list[Any] = []
    have_html = False
    for part in parts:
        results.extend(part.results)
        errors.extend(part.errors)
        ignored.extend(part.ignored)
        files += part.files
        if part.html is not None:
            have_html = True
            timelines.extend(part.html[0])
            replays.extend(part.html[1])

    class _Stats:  # the shape report._skipped reads
        pass

    st = _Stats()
    st.errors = errors  # type: ignore[attr-defined]
    overall = BurnReport.combine([r.report for r in results])
    report = AnalysisReport(
        results,
        overall,
        _skipped(st),
        inputs=_sources(paths),
        example=not paths,
        files=files,
        ignored=ignored,
    )
    return report, ((timelines, replays) if have_html else None)


def _missing(paths_units: list[Any], keep_going: bool) -> list[Any]:
    from .adapters import TraceFormatError

    out = []
    for u in paths_units:
        if isinstance(u, tuple):
            err = TraceFormatError("no such file or folder", u[0])
            if not keep_going:
                raise err
            out.append(err)
    return out


class _Done:
    """What the caller's callback is given per trace a worker analysed: the ``source``,
    ``steps`` and ``meta`` fields a Trace would offer (a progress bar reads them)."""

    __slots__ = ("meta", "source", "steps")

    def __init__(self, source: str, steps: int, no_steps: bool) -> None:
        self.source = source
        self.steps = range(steps)
        self.meta = {"no_steps": True} if no_steps else {}


def _tell(on_unit: Callable[[Any], None] | None, part: UnitResult) -> None:
    if on_unit is not None:
        for source, steps, no_steps in part.seen:
            on_unit(_Done(source, steps, no_steps))


def analyse(
    paths: Sequence[str | os.PathLike[str]],
    *,
    format: str = "auto",
    keep_going: bool = False,
    jobs: int | None = None,
    client: Any = None,
    scheduler: str | None = None,
    html_policy: str | None = None,
    on_unit: Callable[[Any], None] | None = None,
) -> tuple[AnalysisReport, Any]:
    """Analyse every trace under *paths* in parallel: on a Dask *client* (or the cluster at
    *scheduler*), else on *jobs* local processes (default: :func:`cpu_count`).

    Returns ``(report, html)``: the AnalysisReport a single-process run gives, and, when
    *html_policy* is not None, the (timelines, replays) the HTML report draws. Raises
    TraceFormatError on bad input unless *keep_going*; ImportError naming the extra when Dask
    is needed and missing. An empty *paths* analyses the bundled example.
    """
    from .adapters import _resolve_format
    from .report import EXAMPLE_TRACE

    fmt = _resolve_format(format)
    plist = [os.fspath(p) for p in paths] if paths else [str(EXAMPLE_TRACE)]
    found = units(plist)
    work = [u for u in found if isinstance(u, Unit)]
    if client is None and scheduler is None and not _worth_processes(work, jobs):
        return _collect_here(paths, fmt, keep_going, html_policy, on_unit)
    _missing(found, keep_going)  # raises on the first missing path unless keep_going
    if client is not None or scheduler is not None:
        done = _on_dask(work, fmt, keep_going, html_policy, client, scheduler, on_unit)
    else:
        done = _on_processes(work, fmt, keep_going, html_policy, jobs, on_unit)
    # Back in input order, a missing path's error where load() would have raised it.
    it = iter(done)
    parts = [
        next(it) if isinstance(u, Unit) else UnitResult(errors=_missing([u], True)) for u in found
    ]
    return _reduce(paths, parts)


def _worth_processes(work: list[Unit], jobs: int | None) -> bool:
    n = cpu_count() if jobs is None or jobs <= 0 else jobs
    if min(n, len(work)) <= 1:
        return False
    return jobs is not None or sum(u.size for u in work) >= PARALLEL_MIN_BYTES


def _collect_here(
    paths: Sequence[Any],
    fmt: str,
    keep_going: bool,
    html_policy: str | None,
    on_unit: Callable[[Any], None] | None,
) -> tuple[AnalysisReport, Any]:
    """One process: exactly ``report.collect``."""
    from .report import collect

    collector = None
    callbacks = [c for c in (on_unit,) if c is not None]
    if html_policy is not None:
        from .htmlreport import HtmlCollector

        collector = HtmlCollector(policy=html_policy or None)
        callbacks.append(collector)

    def on_trace(trace: Any) -> None:
        for c in callbacks:
            c(trace)

    report = collect(
        paths, format=fmt, keep_going=keep_going, on_trace=on_trace if callbacks else None
    )
    return report, ((collector.timelines, collector.replays) if collector is not None else None)


def _on_processes(
    work: list[Unit],
    fmt: str,
    keep_going: bool,
    html_policy: str | None,
    jobs: int | None,
    on_unit: Callable[[Any], None] | None,
) -> list[UnitResult]:
    n = min(cpu_count() if jobs is None or jobs <= 0 else jobs, len(work))
    import concurrent.futures as cf
    import multiprocessing as mp

    # Largest units first keeps the workers busy to the end; results go back in input order.
    order = sorted(range(len(work)), key=lambda i: -work[i].size)
    parts: list[UnitResult | None] = [None] * len(work)
    # forkserver/spawn never inherit the caller's threads or locks (fork would, from a threaded host).
    ctx = mp.get_context("forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn")
    with cf.ProcessPoolExecutor(max_workers=n, mp_context=ctx) as pool:
        futs = {pool.submit(_analyse_unit, work[i], fmt, keep_going, html_policy): i for i in order}
        try:
            for fut in cf.as_completed(futs):
                i = futs[fut]
                parts[i] = fut.result()
                _tell(on_unit, parts[i])  # type: ignore[arg-type]
        except BaseException:
            for f in futs:
                f.cancel()
            raise
    return [p for p in parts if p is not None]


def _on_dask(
    work: list[Unit],
    fmt: str,
    keep_going: bool,
    html_policy: str | None,
    client: Any,
    scheduler: str | None,
    on_unit: Callable[[Any], None] | None,
) -> list[UnitResult]:
    try:
        from distributed import Client, as_completed
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(_FLEET_HINT) from exc
    own = None
    if client is None:
        own = client = Client(scheduler)
    try:
        # pure=False: two units with equal arguments are still two pieces of work; retries
        # cover a task whose worker died under it (Dask reschedules those on its own as well).
        futs = client.map(
            _analyse_unit,
            work,
            fmt=fmt,
            keep_going=keep_going,
            html_policy=html_policy,
            pure=False,
            retries=3,
        )
        index = {f.key: i for i, f in enumerate(futs)}
        parts: list[UnitResult | None] = [None] * len(work)
        for fut in as_completed(futs):
            i = index[fut.key]
            parts[i] = fut.result()
            fut.release()
            _tell(on_unit, parts[i])  # type: ignore[arg-type]
        return [p for p in parts if p is not None]
    finally:
        if own is not None:
            own.close()


def iter_results(parts: list[UnitResult]) -> Iterator[TraceResult]:
    """Every TraceResult of *parts*, in order."""
    for p in parts:
        yield from p.results
