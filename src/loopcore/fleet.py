"""Analysis over many processes: the local cores (``--jobs N``) or a Dask cluster (``--scheduler``).

The unit of input is what ``loopcore.load`` reads in one go: a trace file, or an OpenHands
``events`` folder (one stream over many files). A large loopcore JSONL file (one step a line,
many sessions) is cut further into *byte ranges* at line starts: a range owns the traces whose
first line starts in it, reads on past its end to finish the last of them, and skips the lines
at its start that finish the trace of the range before (docs/fleet.md). Small units are packed
into *tasks* of a few megabytes, so the scheduler handles hundreds of tasks, not one per file.

A worker loads its pieces, encodes them and runs the burn kernels (``burn.analyse_many``), and
sends back compact per-trace results (counts, and the findings as tuples of their fields). The
caller puts them back in input order and combines them once, so the report is the one a single
process writes (same traces in the same order, same findings, same totals: a test compares the
JSON byte for byte).

Why this cannot count anything twice: a piece's result is a value returned by one task, and the
reduction happens once, on the caller's side, over exactly one result per piece. When Dask loses
a worker mid-run it runs the lost tasks again elsewhere; the repeated run replaces the lost one
rather than adding to it. A range that finds its file irregular (a line that is not a step, a
session that comes back after another range began) gives up, and the file is analysed again as
one unit. Memory per worker is bounded by the largest piece, not by the corpus.

Dask is an optional extra (``pip install 'loopcore[fleet]'``), imported only on that path.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - typing only
    from .report import AnalysisReport, TraceResult

__all__ = [
    "PARALLEL_MIN_BYTES",
    "RANGE_BYTES",
    "TASK_BYTES",
    "TASK_SHARE",
    "TAIL_TASKS",
    "Range",
    "Unit",
    "UnitResult",
    "analyse",
    "cpu_count",
    "plan",
    "units",
]

#: Below this many input bytes a local run stays in one process: starting workers costs more
#: than the work (about 0.1 s each to import the package).
PARALLEL_MIN_BYTES = 4 << 20
#: A loopcore JSONL file larger than 1.5x this is cut into ranges of about this many bytes.
RANGE_BYTES = 16 << 20
#: Tasks are packed up to this many input bytes; smaller as the run nears its end (``_tasks``):
#: each takes 1/TASK_SHARE of a worker's share of what is left, and none is smaller than
#: 1/TAIL_TASKS of a worker's share of the whole (or of TASK_BYTES, when that is less).
TASK_BYTES = 64 << 20
TASK_SHARE = 2
TAIL_TASKS = 16
_MIN_TASK_BYTES = 256 << 10
#: How many leading records tell a JSONL file's format (the format sniffers read at most 200).
_SNIFF_RECORDS = 256

_FLEET_HINT = "the fleet path needs Dask: pip install 'loopcore[fleet]'"


def cpu_count() -> int:
    """The cores this process may run on (its CPU affinity where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - platforms without affinity
        return max(1, os.cpu_count() or 1)


@dataclass(slots=True)
class Unit:
    """One input: a file (``item`` a path) or an events folder (``item`` a list of paths)."""

    item: str | list[str]
    in_folder: bool
    size: int = 0

    @property
    def label(self) -> str:
        return os.path.dirname(self.item[0]) if isinstance(self.item, list) else self.item


@dataclass(slots=True)
class Range:
    """Bytes ``[start, end)`` of a loopcore JSONL file: the traces whose first line starts there.
    ``line`` is the number of newlines before ``start`` (known after the counting pass)."""

    path: str
    index: int
    start: int
    end: int
    in_folder: bool
    line: int = 0

    @property
    def size(self) -> int:
        return self.end - self.start


@dataclass(slots=True)
class UnitResult:
    """What the caller keeps of one unit (a unit cut into ranges: of all its ranges)."""

    results: list[TraceResult] = field(default_factory=list)
    errors: list[Any] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    files: int = 0
    steps: int = 0
    html: Any = None
    #: (source, steps, no_steps) per trace, for the caller's progress and empty-input notes
    seen: list[tuple[str, int, dict]] = field(default_factory=list)


@dataclass(slots=True)
class _Piece:
    """What a worker sends back for one unit or range: compact, cheap to unpickle."""

    packed: list[tuple] = field(default_factory=list)
    errors: list[Any] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    files: int = 0
    steps: int = 0
    html: Any = None
    seen: list[tuple[str, int, dict]] = field(default_factory=list)
    #: a range: the session of each trace it owns; None for a unit
    keys: list[str] | None = None
    #: a range that found its file irregular: the file is analysed again as one unit
    irregular: bool = False
    #: the error that stops the run (no keep_going), returned rather than raised so that Dask
    #: does not retry a bad file and the caller raises the first one in input order
    fatal: Any = None


def _size(item: str | list[str]) -> int:
    try:
        if isinstance(item, str) and os.path.isdir(item):  # a store read as a whole (opencode)
            return sum(
                os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(item) for f in fs
            )
        if isinstance(item, list):
            return sum(os.stat(p).st_size for p in item)
        from .adapters import Chunked, chunk_files

        if isinstance(item, Chunked):  # a transcript in pieces: one unit, all of them
            return sum(os.stat(p).st_size for p in chunk_files(item))
        return os.stat(item).st_size
    except OSError:
        return 0


def units(paths: Sequence[str], copies: list[str] | None = None) -> list[Unit | tuple[str, str]]:
    """The units of work under *paths*, in the order ``load`` reads them. A path that does not
    exist comes back as ``(path, "missing")`` so the caller reports it where ``load`` would;
    the copies of a session or run a walk passes over are added to *copies*."""
    from .adapters import _inputs

    out: list[Unit | tuple[str, str]] = []
    for item, in_folder in _inputs(paths, copies):
        if in_folder is None:
            out.append((item, "missing"))
        else:
            out.append(Unit(item, in_folder, _size(item)))
    return out


# ---------------------------------------------------------------------------------------------
# cutting large JSONL files into ranges


def _rangeable(unit: Unit, fmt: str, range_bytes: int) -> bool:
    """True when *unit* is a plain loopcore JSONL file worth cutting into ranges."""
    from .adapters import Chunked, _detect_doc, loopcore_steps

    item = unit.item
    if (
        not isinstance(item, str)
        or isinstance(item, Chunked)  # pieces of one transcript: read together
        or unit.size < range_bytes * 3 // 2
        or item.endswith((".gz", ".zst"))
        or fmt not in ("auto", loopcore_steps.NAME)
        or not os.path.isfile(item)
    ):
        return False
    from ._json import loads

    records: list[Any] = []
    try:
        with open(item, "rb") as fh:
            for raw in fh:
                if len(records) >= _SNIFF_RECORDS or fh.tell() > (8 << 20):
                    break
                if raw.strip():
                    records.append(loads(raw))
    except (OSError, ValueError):
        return False
    if len(records) < 2 or not all(isinstance(r, dict) for r in records):
        return False  # one line is one JSON document, not JSON Lines
    return fmt == loopcore_steps.NAME or _detect_doc(records) == loopcore_steps.NAME


def plan(
    work: Sequence[Unit], fmt: str = "auto", range_bytes: int = RANGE_BYTES
) -> list[list[Unit | Range]]:
    """Per unit, the pieces it is analysed as: ``[unit]``, or the byte ranges of a large
    loopcore JSONL file (line numbers not yet counted)."""
    out: list[list[Unit | Range]] = []
    for u in work:
        if range_bytes > 0 and _rangeable(u, fmt, range_bytes):
            n = max(2, round(u.size / range_bytes))
            cuts = [u.size * k // n for k in range(n + 1)]
            out.append(
                [
                    Range(u.item, k, cuts[k], cuts[k + 1], u.in_folder)  # type: ignore[arg-type]
                    for k in range(n)
                ]
            )
        else:
            out.append([u])
    return out


def _count_newlines(path: str, start: int, end: int) -> int:
    """Newlines in bytes ``[start, end)`` of *path* (runs in a worker)."""
    n = 0
    with open(path, "rb") as fh:
        fh.seek(start)
        left = end - start
        while left > 0:
            block = fh.read(min(left, 8 << 20))
            if not block:
                break
            n += block.count(b"\n")
            left -= len(block)
    return n


class _Irregular(Exception):
    """A range cannot be analysed on its own; the file is analysed as one unit instead."""


def _parse_line(raw: bytes, stem: str) -> tuple[str | None, Any]:
    """(session, record) of a JSONL line, (None, None) for a blank one; _Irregular when the
    line is not a step record."""
    import orjson

    from ._json import loads

    if not raw.strip():
        return None, None
    try:
        rec = loads(raw)
    except orjson.JSONDecodeError:
        raise _Irregular from None
    if not isinstance(rec, dict):
        raise _Irregular
    s = rec.get("session")
    return (stem if s is None else str(s)), rec


def _key_before(fh: Any, pos: int, stem: str) -> str | None:
    """The session of the last non-blank line that starts before *pos* (a line start)."""
    end = pos
    tail = b""
    while end > 0:
        start = max(0, end - (64 << 10))
        fh.seek(start)
        tail = fh.read(end - start) + tail
        end = start
        lines = tail.split(b"\n")
        # lines[0] may be cut (unless the block reached the file start): keep it for the next read
        complete = lines if end == 0 else lines[1:]
        for raw in reversed(complete):
            key = _parse_line(raw, stem)[0]
            if key is not None:
                return key
        tail = lines[0] if end > 0 else b""
    return None


def _range_records(r: Range, stem: str) -> tuple[list[Any], list[int], int]:
    """(records, their 1-based line numbers, bytes read) of the traces range *r* owns."""
    with open(r.path, "rb") as fh:
        # the first line that starts at or after r.start
        pos, line = r.start, r.line + 1
        if pos > 0:
            fh.seek(pos - 1)
            if fh.read(1) != b"\n":
                fh.readline()  # the rest of the line that began before the range
                pos = fh.tell()
                line += 1
        if pos >= r.end:
            return [], [], 0
        prev = _key_before(fh, pos, stem) if pos > 0 else None
        fh.seek(pos)
        records: list[Any] = []
        lines: list[int] = []
        read = 0
        owning = prev is None
        last: str | None = None
        while True:
            at = pos
            raw = fh.readline()
            if not raw:
                break
            pos += len(raw)
            read += len(raw)
            n = line
            line += 1
            if at < r.end or (owning and last is not None):
                key, rec = _parse_line(raw, stem)
            else:
                break  # past the range, owning nothing
            if key is None:
                continue  # a blank line
            if at >= r.end:
                if key != last:
                    break  # past the range: only the rest of its last trace is read
            elif not owning:
                if key == prev:
                    continue  # the end of the trace the range before owns
                owning = True
            records.append(rec)
            lines.append(n)
            last = key
    return records, lines, read


def _analyse_range(r: Range, fmt: str, keep_going: bool) -> _Piece:
    """Load and analyse the traces range *r* owns (runs in a worker)."""
    from .adapters import Ctx, LoadStats, TraceFormatError, _drop_unhashable_steps, loopcore_steps
    from .adapters._io import stem_of

    out = _Piece(files=1 if r.index == 0 else 0, keys=[])
    stem = stem_of(r.path)
    try:
        records, lines, _ = _range_records(r, stem)
        if not records:
            return out
        stats = LoadStats()
        ctx = Ctx(r.path, lines, keep_going, stats, None)
        traces = loopcore_steps.parse(records, ctx)
        for t in traces:
            _drop_unhashable_steps(t, ctx)
        if ctx.skipped or stats.errors or not all(t.steps for t in traces):
            raise _Irregular
    except (_Irregular, TraceFormatError):
        return _Piece(irregular=True)
    for t in traces:
        t.meta["skipped"] = 0
        if fmt == "auto":
            t.meta["format_detected"] = True
    _fill(out, traces, r.path)
    out.keys = [t.session for t in traces]
    return out


# ---------------------------------------------------------------------------------------------
# compact results: a TraceResult as a tuple, its findings as tuples of their fields


def _field_names(cls: type) -> list[str]:
    return [f.name for f in fields(cls)]


def _pack(tr: TraceResult) -> tuple:
    values = list(_burn_values(tr.report))
    values[_FINDINGS_AT] = tuple(map(_finding_values, values[_FINDINGS_AT]))
    return (tr.source, tr.session, tr.format, tr.steps, tuple(values))


def _init_fields() -> None:
    global _BURN_FIELDS, _FINDING_FIELDS, _FINDINGS_AT, _burn_values, _finding_values
    from operator import attrgetter

    from .burn import BurnReport, Finding

    _BURN_FIELDS = _field_names(BurnReport)
    _FINDING_FIELDS = _field_names(Finding)
    _FINDINGS_AT = _BURN_FIELDS.index("findings")
    # the fields as one tuple, in field order (one C call, not one getattr a field)
    _burn_values = attrgetter(*_BURN_FIELDS)
    _finding_values = attrgetter(*_FINDING_FIELDS)


_BURN_FIELDS: list[str] = []
_FINDING_FIELDS: list[str] = []
_FINDINGS_AT = 0
_burn_values: Callable[[Any], tuple] = tuple
_finding_values: Callable[[Any], tuple] = tuple


def _fill(out: _Piece, traces: list[Any], label: str) -> None:
    """Analyse *traces* (one encoding, one kernel run) and pack their results into *out*."""
    from .burn import analyse_many
    from .report import _result

    if not _BURN_FIELDS:
        _init_fields()
    reports = analyse_many(traces)
    for t, rep in zip(traces, reports):
        src = t.source or label
        out.packed.append(_pack(_result(t, src, rep)))
        out.steps += len(t.steps)
        out.seen.append((src, len(t.steps), _notes(t.meta)))


def _analyse_unit(unit: Unit, fmt: str, keep_going: bool, html_policy: str | None) -> _Piece:
    """Load one unit and analyse its traces (runs in a worker)."""
    from .adapters import LoadStats, TraceFormatError, _load_file

    stats = LoadStats()
    out = _Piece()
    try:
        traces = _load_file(unit.item, fmt, keep_going, stats, None, unit.in_folder)
    except TraceFormatError as err:
        if not keep_going:
            return _Piece(fatal=err)
        stats.errors.append(err)
        traces = []
    _fill(out, traces, unit.label)
    if html_policy is not None:
        from .htmlreport import HtmlCollector

        collector = HtmlCollector(policy=html_policy or None)
        for t in traces:
            collector(t)
        out.html = (collector.timelines, collector.replays)
    out.errors = list(stats.errors)
    out.ignored = [str(p) for p in stats.ignored]
    out.files = stats.files
    return out


def _run_one(p: Any, fmt: str, keep_going: bool, html_policy: str | None) -> Any:
    """One piece: a unit, a range, or ``(path, start, end)`` to count newlines in. The cyclic
    collector is paused for the piece (``report.bulk_gc``) and runs again between pieces, so
    whatever a piece leaves in cycles does not pile up over a task."""
    from .report import bulk_gc

    with bulk_gc():
        if isinstance(p, tuple):
            return _count_newlines(*p)
        if isinstance(p, Range):
            return _analyse_range(p, fmt, keep_going)
        return _analyse_unit(p, fmt, keep_going, html_policy)


def _run_task(task: list[Any], fmt: str, keep_going: bool, html_policy: str | None) -> list[Any]:
    """One task: its pieces run one after another; a result per piece (runs in a worker)."""
    return [_run_one(p, fmt, keep_going, html_policy) for p in task]


def _run_task_packed(task: list[Any], fmt: str, keep_going: bool, html_policy: str | None) -> bytes:
    """:func:`_run_task` as a task of a worker process (local or Dask): each piece's result is pickled as soon as it is
    made (a worker holds its task's results as compact bytes, not as objects), and the lot
    goes back as one bytes object, which Dask sends as it is, where a list of results would
    be serialised, framed and sized element by element on the worker and put back together
    on the caller's event loop. :func:`_unpack_task` reads it."""
    import pickle

    out = [pickle.dumps(_run_one(p, fmt, keep_going, html_policy), 5) for p in task]
    return pickle.dumps(out, 5)


def _unpack_task(blob: bytes) -> list[Any]:
    import pickle

    return [pickle.loads(b) for b in pickle.loads(blob)]


# ---------------------------------------------------------------------------------------------
# running tasks: local processes or Dask


def _tasks(pieces: list[Any], sizes: list[int], workers: int, task_bytes: int) -> list[list[int]]:
    """Indices of *pieces* packed into tasks that shrink as the run goes on.

    The sizes are known up front, so the packing is planned, not left to the scheduler: the
    pieces go largest first, and each task takes about ``1 / (TASK_SHARE x workers)`` of the
    input still to pack, at most *task_bytes* and at least 1/TAIL_TASKS of a worker's share of
    the whole (of *task_bytes*, when that is less). The first tasks are large (few tasks in all: each costs the client, the
    scheduler and the worker a few milliseconds), the last ones small, so the workers finish
    together; tasks are handed out in this order, so the workers take the large ones first.
    A task is never split below one piece, and a killed worker loses at most one task."""
    total = sum(sizes)
    w = max(1, workers)
    floor = max(_MIN_TASK_BYTES, min(task_bytes, total // w) // TAIL_TASKS)
    order = sorted(range(len(sizes)), key=lambda i: -sizes[i])
    tasks: list[list[int]] = []
    cur: list[int] = []
    acc = 0
    left = total
    target = max(floor, min(task_bytes, left // (w * TASK_SHARE)))
    for i in order:
        s = sizes[i]
        if cur and acc + s > target:
            tasks.append(cur)
            left -= acc
            cur, acc = [], 0
            target = max(floor, min(task_bytes, left // (w * TASK_SHARE)))
        cur.append(i)
        acc += s
    if cur:
        tasks.append(cur)
    return tasks


class _Runner:
    """Runs tasks on local processes or on a Dask client; yields results as they complete."""

    def __init__(self, jobs: int | None, client: Any, scheduler: str | None) -> None:
        self._pool: Any = None
        self._own: Any = None
        self.client = client
        if client is None and scheduler is None:
            import concurrent.futures as cf
            import multiprocessing as mp

            self.workers = cpu_count() if jobs is None or jobs <= 0 else jobs
            # forkserver/spawn never inherit the caller's threads or locks (fork would).
            ctx = mp.get_context(
                "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
            )
            self._pool = cf.ProcessPoolExecutor(max_workers=self.workers, mp_context=ctx)
        else:
            try:
                from distributed import Client
            except ImportError as exc:  # pragma: no cover - depends on the environment
                raise ImportError(_FLEET_HINT) from exc
            if client is None:
                self._own = self.client = Client(scheduler)
            self.workers = max(1, sum(self.client.nthreads().values()))

    def run(
        self, tasks: list[list[Any]], weights: list[int], *args: Any
    ) -> Iterator[tuple[int, list[Any]]]:
        """(task index, result) as each task completes; the heaviest *weights* go first."""
        if not tasks:
            return
        order = sorted(range(len(tasks)), key=lambda i: -weights[i])
        if self._pool is not None:
            import concurrent.futures as cf

            futs = {self._pool.submit(_run_task_packed, tasks[i], *args): i for i in order}
            try:
                for fut in cf.as_completed(futs):
                    yield futs[fut], _unpack_task(fut.result())
            except BaseException:
                for f in futs:
                    f.cancel()
                raise
            return
        from distributed import as_completed

        # pure=False: two tasks with equal arguments are still two pieces of work; retries
        # cover a task whose worker died under it (Dask reschedules those on its own as well).
        fmt, keep_going, html_policy = args
        futs = self.client.map(
            _run_task_packed,
            [tasks[i] for i in order],
            fmt=fmt,
            keep_going=keep_going,
            html_policy=html_policy,
            pure=False,
            retries=3,
        )
        index = {f.key: i for f, i in zip(futs, order)}
        try:
            for fut in as_completed(futs):
                got = _fetch(fut)
                fut.release()
                yield index[fut.key], _unpack_task(got)
        except BaseException:
            self.client.cancel(futs)
            raise

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
        if self._own is not None:
            self._own.close()


#: How long one fetch of a finished task's result may take before it is asked for again, and
#: how many times. A fetch asks the scheduler, which asks the worker holding the result; on a
#: loaded machine a reply was seen never to arrive (the request's read waiting forever, the
#: scheduler and the worker idle), which hung the whole run. A new request goes on a new
#: connection; the abandoned one is cancelled. A result is a task's packed columns and findings,
#: a few MB, so a minute is far beyond what a fetch takes when it works.
FETCH_TIMEOUT = 60.0
FETCH_ATTEMPTS = 5


def _fetch(fut: Any) -> Any:
    """The result of the finished Dask future *fut* (its task's error raised as it is)."""
    for _ in range(FETCH_ATTEMPTS - 1):
        try:
            return fut.result(timeout=FETCH_TIMEOUT)
        except TimeoutError:
            continue
    try:
        return fut.result(timeout=FETCH_TIMEOUT)
    except TimeoutError:
        raise TimeoutError(
            f"loopcore.fleet: the result of {fut.key} could not be fetched from the cluster in "
            f"{FETCH_ATTEMPTS} tries of {FETCH_TIMEOUT:g} s"
        ) from None


def _run_pieces(
    runner: _Runner,
    pieces: list[Any],
    sizes: list[int],
    task_bytes: int,
    args: tuple,
    on_piece: Callable[[int, Any], None] | None = None,
) -> list[Any]:
    """The result of every piece, in order (packed into tasks, run on *runner*); with
    *on_piece*, each is handed to it as it arrives instead (the list holds None)."""
    tasks = _tasks(pieces, sizes, runner.workers, task_bytes)
    out: list[Any] = [None] * len(pieces)
    weights = [sum(sizes[i] for i in idx) for idx in tasks]
    for t, got in runner.run([[pieces[i] for i in idx] for idx in tasks], weights, *args):
        for i, res in zip(tasks[t], got):
            if on_piece is not None:
                on_piece(i, res)
            else:
                out[i] = res
    return out


# ---------------------------------------------------------------------------------------------
# the reduction


def _unit_result(pieces: list[_Piece], path: str | None) -> UnitResult:
    """One unit's result from its pieces (one, or its ranges in file order)."""
    out = UnitResult()
    packed = [t for p in pieces for t in p.packed]
    if path is not None and len(pieces) > 1:
        # a ranged file: its traces are numbered over the whole file, as load() numbers them
        n = len(packed)
        packed = [((path if n == 1 else f"{path}#{k}"),) + t[1:] for k, t in enumerate(packed)]
    from .encoded import results_of

    # rebuilt in one call: the compiled twin fills the objects' slots (loopcore.encoded)
    out.results = results_of(packed)
    html = [p.html for p in pieces if p.html is not None]
    if html:
        out.html = ([x for h in html for x in h[0]], [x for h in html for x in h[1]])
    for p in pieces:
        out.errors.extend(p.errors)
        out.ignored.extend(p.ignored)
        out.files += p.files
        out.steps += p.steps
    notes = [s[2] for p in pieces for s in p.seen]
    out.seen = [(r.source, r.steps, e) for r, e in zip(out.results, notes)]
    return out


def _ranges_hold(pieces: list[_Piece]) -> bool:
    """True when every range of a file stood on its own: none irregular, no session in two."""
    if any(p.irregular for p in pieces):
        return False
    keys = [k for p in pieces for k in (p.keys or ())]
    return len(keys) == len(set(keys))


def _reduce(
    paths: Sequence[str], parts: list[UnitResult], copies: list[str]
) -> tuple[AnalysisReport, Any]:
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
        copies=copies,
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


#: The trace meta a worker passes back for the summary's warnings.
_NOTED = ("no_steps", "sub_agents_unread", "incomplete_line")


def _notes(meta: dict) -> dict:
    return {k: meta[k] for k in _NOTED if meta.get(k)}


class _Done:
    """What the caller's callback is given per trace a worker analysed: the ``source``,
    ``steps`` and ``meta`` fields a Trace would offer (a progress bar reads them; the meta holds
    only what the summary warns about)."""

    __slots__ = ("meta", "source", "steps")

    def __init__(self, source: str, steps: int, notes: dict) -> None:
        self.source = source
        self.steps = range(steps)
        self.meta = notes


def _tell(on_unit: Callable[[Any], None] | None, seen: list[tuple[str, int, dict]]) -> None:
    if on_unit is not None:
        for source, steps, notes in seen:
            on_unit(_Done(source, steps, notes))


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
    range_bytes: int = RANGE_BYTES,
    task_bytes: int = TASK_BYTES,
) -> tuple[AnalysisReport, Any]:
    """Analyse every trace under *paths* in parallel: on a Dask *client* (or the cluster at
    *scheduler*), else on *jobs* local processes (default: :func:`cpu_count`).

    Returns ``(report, html)``: the AnalysisReport a single-process run gives, and, when
    *html_policy* is not None, the (timelines, replays) the HTML report draws. Raises
    TraceFormatError on bad input unless *keep_going* (the first bad input in input order);
    ImportError naming the extra when Dask is needed and missing. An empty *paths* analyses
    the bundled example. Loopcore JSONL files over 1.5 x *range_bytes* are cut into byte
    ranges (0: never); small inputs are packed into tasks of up to *task_bytes*.
    """
    from .adapters import _resolve_format
    from .report import EXAMPLE_TRACE

    fmt = _resolve_format(format)
    plist = [os.fspath(p) for p in paths] if paths else [str(EXAMPLE_TRACE)]
    copies: list[str] = []
    found = units(plist, copies)
    work = [u for u in found if isinstance(u, Unit)]
    if client is None and scheduler is None and not _worth_processes(work, jobs):
        return _collect_here(paths, fmt, keep_going, html_policy, on_unit)
    _missing(found, keep_going)  # raises on the first missing path unless keep_going
    from .report import bulk_gc

    # The caller unpickles and rebuilds every finding: hundreds of thousands of small
    # containers, which the cyclic collector would rescan again and again (two thirds of the
    # caller's time, measured); reference counting still frees them.
    with bulk_gc():
        runner = _Runner(jobs, client, scheduler)
        try:
            done = _run_all(
                runner, work, fmt, keep_going, html_policy, on_unit, range_bytes, task_bytes
            )
        finally:
            runner.close()
        # Back in input order, a missing path's error where load() would have raised it.
        it = iter(done)
        parts = [
            next(it) if isinstance(u, Unit) else UnitResult(errors=_missing([u], True))
            for u in found
        ]
        return _reduce(paths, parts, copies)


def _run_all(
    runner: _Runner,
    work: list[Unit],
    fmt: str,
    keep_going: bool,
    html_policy: str | None,
    on_unit: Callable[[Any], None] | None,
    range_bytes: int,
    task_bytes: int,
) -> list[UnitResult]:
    layout = plan(work, fmt, 0 if html_policy is not None else range_bytes)
    # first pass: the newlines of every range but the last of its file, so each range knows
    # the line it starts on
    counted = [p for ps in layout if len(ps) > 1 for p in ps[:-1]]
    if counted:
        counts = _run_pieces(
            runner,
            [(r.path, r.start, r.end) for r in counted],
            [r.size // 64 for r in counted],
            task_bytes,
            (fmt, keep_going, html_policy),
        )
        it = iter(counts)
        for ps in layout:
            if len(ps) > 1:
                before = 0
                for r in ps:
                    r.line = before  # type: ignore[union-attr]
                    if r is not ps[-1]:
                        before += next(it)
    pieces = [p for ps in layout for p in ps]
    owner = [u for u, ps in enumerate(layout) for _ in ps]
    at = [k for ps in layout for k in range(len(ps))]
    done: list[UnitResult | None] = [None] * len(layout)
    fatal: list[Any] = [None] * len(layout)
    # a ranged file: its ranges' results until the last arrives
    waiting: dict[int, list[Any]] = {
        u: [None] * len(ps) for u, ps in enumerate(layout) if len(ps) > 1
    }
    left = [len(ps) for ps in layout]

    def whole(u: int, res: _Piece) -> None:
        # rebuilt as it arrives, while the workers go on (not all at the end)
        done[u] = _unit_result([res], None)
        fatal[u] = res.fatal
        res.packed = []  # rebuilt: the tuples can go
        _tell(on_unit, res.seen)

    def arrived(i: int, res: _Piece) -> None:
        u = owner[i]
        if u not in waiting:
            whole(u, res)
            return
        waiting[u][at[i]] = res
        left[u] -= 1
        if not left[u] and _ranges_hold(waiting[u]):
            ps = waiting.pop(u)
            done[u] = _unit_result(ps, work[u].item)  # type: ignore[arg-type]
            _tell(on_unit, done[u].seen)  # type: ignore[union-attr]

    args = (fmt, keep_going, html_policy)
    sizes = [p.size for p in pieces]
    _run_pieces(runner, pieces, sizes, task_bytes, args, arrived)
    # a ranged file whose ranges could not stand alone is analysed again, whole
    redo = sorted(waiting)
    if redo:
        again = [work[u] for u in redo]
        _run_pieces(
            runner,
            again,
            [u.size for u in again],
            task_bytes,
            args,
            lambda i, res: whole(redo[i], res),
        )
    first = next((f for f in fatal if f is not None), None)
    if first is not None:
        raise first  # the first bad input in input order, as one process names it
    return done  # type: ignore[return-value]


def _worth_processes(work: list[Unit], jobs: int | None) -> bool:
    n = cpu_count() if jobs is None or jobs <= 0 else jobs
    if n <= 1 or not work:
        return False
    if len(work) == 1 and work[0].size < RANGE_BYTES * 3 // 2:
        return False  # one unit, too small to cut into ranges
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


def iter_results(parts: list[UnitResult]) -> Iterator[TraceResult]:
    """Every TraceResult of *parts*, in order."""
    for p in parts:
        yield from p.results
