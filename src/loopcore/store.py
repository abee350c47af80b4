"""Stored columns: ``loopcore analyse PATH... --parquet DIR`` and ``loopcore analyse DIR``.

A store is a folder of Parquet files (written with pyarrow, imported only here) holding the
encoded columns of every analysed step (:class:`loopcore.encoded.EncodedTrace`), each step's
trace coordinate (``ref``), the findings and one summary row per trace. Re-analysing a store
reads the columns back and runs the burn kernels on them, without reading a trace again, and
gives the report of the run that wrote them. The layout and its schema are in docs/store.md.

Every run adds files and never rewrites one: parts under ``<table>/date=YYYY-MM-DD/``, then a
run record ``runs/<run>.json`` written last (a run without its record is not part of the
store), so appending a day of traces costs only that day's work.
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import inspect
import json
import os
import secrets
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import numpy as np

if TYPE_CHECKING:  # pragma: no cover - typing only
    from .encoded import EncodedTrace
    from .report import AnalysisReport
    from .trace import Trace

__all__ = [
    "MARKER",
    "STORE_SCHEMA",
    "StoreError",
    "analyse_store",
    "collect_to_store",
    "is_store",
    "read_part",
    "write_encoded",
]

#: Bumped when the layout or a table's columns change meaning; a store of another schema is
#: refused with a clear error (re-run the analysis on the traces to rebuild it).
STORE_SCHEMA = 1
#: The marker file that makes a folder a store.
MARKER = "loopcore-store.json"
_FORMAT = "loopcore-store"
#: Steps per part file: a run of more steps is written as several parts (bounded memory).
PART_STEPS = 2_000_000

_TABLES = ("steps", "traces", "findings", "tools", "targets", "sessions", "arrays")


class StoreError(ValueError):
    """A folder that is not a store, a store of another schema, or a damaged one."""


def _pa() -> Any:
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401 - the submodule is what reads and writes
    except ImportError:  # pragma: no cover - depends on the install
        raise StoreError("stored columns need pyarrow: pip install 'loopcore[parquet]'") from None
    return pyarrow


# ---------------------------------------------------------------------------------------------
# what an EncodedTrace is made of (read off the dataclass, so new columns are stored as they come)


def _step_columns() -> list[tuple[str, Any]]:
    from . import encoded

    return [(name, np.dtype(dtype)) for name, dtype in encoded._STEP_COLUMNS]


def _layout() -> tuple[list[str], list[str], list[str]]:
    """(other array fields, list fields, int fields) of EncodedTrace besides the step columns."""
    from .encoded import EncodedTrace

    step = {n for n, _ in _step_columns()}
    arrays, lists, ints = [], [], []
    for f in dataclasses.fields(EncodedTrace):
        if f.name in step:
            continue
        t = str(f.type)
        if "ndarray" in t:
            arrays.append(f.name)
        elif t in ("list", "list[str]") or t.startswith("list"):
            lists.append(f.name)
        else:
            ints.append(f.name)
    return arrays, lists, ints


def _encoding() -> list[list[str]]:
    """The step columns and their dtypes: a store written by an encoder with other columns
    cannot be fed to this kernel."""
    return [[n, d.str] for n, d in _step_columns()]


# ---------------------------------------------------------------------------------------------
# the marker and the run records


def is_store(path: str | os.PathLike[str]) -> bool:
    """True when *path* is a folder holding the store marker file."""
    return os.path.isfile(os.path.join(os.fspath(path), MARKER))


def _check_marker(root: str) -> dict[str, Any]:
    path = os.path.join(root, MARKER)
    try:
        with open(path, "rb") as fh:
            meta = json.loads(fh.read())
    except OSError as exc:
        raise StoreError(f"{root} is not a loopcore store: cannot read {MARKER} ({exc.strerror or exc})") from None
    except ValueError:
        raise StoreError(f"{root} is not a loopcore store: {MARKER} is not JSON") from None
    if not isinstance(meta, dict) or meta.get("format") != _FORMAT:
        raise StoreError(f"{root} is not a loopcore store: {MARKER} does not say format {_FORMAT!r}")
    schema = meta.get("schema")
    if schema != STORE_SCHEMA:
        raise StoreError(f"{root} is a loopcore store of schema {schema!r}; this loopcore reads schema "
                         f"{STORE_SCHEMA} (re-run `loopcore analyse TRACES --parquet DIR` into a new folder)")
    return meta


def _open_for_writing(root: str) -> None:
    if os.path.isdir(root) and os.listdir(root):
        if not is_store(root):
            raise StoreError(f"{root} is neither empty nor a loopcore store; refusing to write into it")
        _check_marker(root)
        return
    os.makedirs(root, exist_ok=True)
    from . import __version__

    _atomic_write(os.path.join(root, MARKER),
                  {"format": _FORMAT, "schema": STORE_SCHEMA, "created_by": f"loopcore {__version__}"})


def _atomic_write(path: str, data: Any) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp-{secrets.token_hex(4)}"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1, sort_keys=True)
    os.replace(tmp, path)


def _runs(root: str) -> list[dict[str, Any]]:
    folder = os.path.join(root, "runs")
    names = sorted(n for n in os.listdir(folder) if n.endswith(".json")) if os.path.isdir(folder) else []
    runs = []
    for n in names:
        try:
            with open(os.path.join(folder, n), "rb") as fh:
                run = json.loads(fh.read())
        except (OSError, ValueError) as exc:
            raise StoreError(f"{root} is damaged: cannot read the run record runs/{n} ({exc})") from None
        if not isinstance(run, dict) or run.get("schema") != STORE_SCHEMA or not isinstance(run.get("parts"), list):
            raise StoreError(f"{root} is damaged or of another schema: runs/{n} is not a schema-{STORE_SCHEMA} "
                             "run record")
        runs.append(run)
    runs.sort(key=lambda r: (str(r.get("created", "")), str(r.get("run", ""))))
    return runs


def _part_path(root: str, table: str, date: str, run: str, part: int) -> str:
    return os.path.join(root, table, f"date={date}", f"{run}-{part:04d}.parquet")


# ---------------------------------------------------------------------------------------------
# writing


def _new_run_id(now: _dt.datetime) -> str:
    return f"{now:%Y%m%dT%H%M%S%f}-{secrets.token_hex(3)}"


def _json_or_none(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True, separators=(",", ":"))


def _canonical_target(members: Sequence[str]) -> Any:
    if not members:
        return None
    return members[0] if len(members) == 1 else tuple(members)


def write_encoded(root: str, enc: "EncodedTrace", traces: Sequence["Trace"], reports: Sequence[Any], *,
                  sources: Sequence[str], run: str, date: str, part: int,
                  analysis: Any = None) -> dict[str, Any]:
    """Write one part: the step columns of *enc* (with each step's ref and the original run's
    charges), its side tables, the per-trace summaries and findings of *reports*.

    *traces* are the Trace objects *enc* was encoded from (refs and raw targets are read off
    their steps), *sources* where each came from. Returns the part's entry of the run record.
    """
    pa = _pa()
    pq = pa.parquet
    n = len(enc)
    cols: dict[str, Any] = {"run": pa.array([run] * n, pa.string()).dictionary_encode(),
                            "part": pa.array(np.full(n, part, np.int32))}
    for name, dtype in _step_columns():
        cols[name] = pa.array(np.ascontiguousarray(getattr(enc, name), dtype=dtype))
    cols["step"] = pa.array(np.concatenate([np.arange(len(t.steps), dtype=np.int32) for t in traces])
                            if traces else np.zeros(0, np.int32))
    refs: list[str | None] = []
    raw: list[str | None] = []
    tset_members = _set_members(enc)
    g = 0
    tset = enc.target
    for t in traces:
        for s in t.steps:
            refs.append(_json_or_none(getattr(s, "ref", None)))
            k = int(tset[g])
            canon = _canonical_target(tset_members(k)) if k >= 0 else None
            raw.append(None if s.target == canon else _json_or_none(list(s.target) if isinstance(s.target, tuple)
                                                                     else s.target))
            g += 1
    cols["ref"] = pa.array(refs, pa.string())
    cols["target_raw"] = pa.array(raw, pa.string())
    if analysis is not None:  # the original run's charges, for queries (re-analysis recomputes them)
        cols["finding"] = pa.array(analysis.finding.astype(np.int8))
        cols["of_step"] = pa.array(analysis.of_step.astype(np.int32))
        charge = getattr(analysis, "charge", None)
        if charge is None:
            charge = np.where(analysis.finding != 0, enc.tokens, 0)
        cols["charge"] = pa.array(np.asarray(charge, dtype=np.int64))
    files = {"steps": pa.table(cols)}

    arrays, lists, ints = _layout()
    side = {"run": [], "part": [], "name": [], "dtype": [], "values": []}
    for name in arrays:
        a = np.asarray(getattr(enc, name))
        side["run"].append(run)
        side["part"].append(part)
        side["name"].append(name)
        side["dtype"].append(a.dtype.str)
        side["values"].append(a.astype(np.int64))
    files["arrays"] = pa.table({k: (pa.array(v, pa.list_(pa.int64())) if k == "values" else pa.array(v))
                                for k, v in side.items()})
    for name in lists:
        values = list(getattr(enc, name))
        table = "sessions" if name == "sessions" else name
        files[table] = pa.table({
            "run": pa.array([run] * len(values), pa.string()),
            "part": pa.array(np.full(len(values), part, np.int32)),
            "id": pa.array(np.arange(len(values), dtype=np.int32)),
            "name": pa.array([None if v is None else str(v) for v in values], pa.string()),
        })
    files["traces"], files["findings"] = _summary_tables(pa, run, part, traces, reports, sources, enc)
    for table, data in files.items():
        path = _part_path(root, table, date, run, part)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        # steps: dictionary + zstd keep the id columns small; other tables are tiny
        pq.write_table(data, path, compression="zstd" if table == "steps" else "snappy")
    return {"part": part, "steps": n, "traces": len(traces), "tables": sorted(files),
            "sizes": {name: int(getattr(enc, name)) for name in ints}}


def _set_members(enc: "EncodedTrace") -> Callable[[int], list[str]]:
    offs, mem, names = enc.target_offsets, enc.target_members, enc.targets

    def members(k: int) -> list[str]:
        return [names[int(m)] for m in mem[int(offs[k]):int(offs[k + 1])]]

    return members


def _summary_tables(pa: Any, run: str, part: int, traces: Sequence["Trace"], reports: Sequence[Any],
                    sources: Sequence[str], enc: "EncodedTrace") -> tuple[Any, Any]:
    from .encoded import FINDING_KINDS

    tr: dict[str, list] = {k: [] for k in ("run", "part", "trace", "session", "source", "format", "steps",
                                           "step_offset", "total_tokens", "wasted_tokens", "waste_ratio",
                                           "tokens_estimated", "findings")}
    for kind in FINDING_KINDS:
        tr[f"{kind}_tokens"] = []
        tr[f"{kind}_steps"] = []
    fd: dict[str, list] = {k: [] for k in ("run", "part", "trace", "session", "source", "kind", "name", "target",
                                           "tokens", "turn_output_tokens", "tokens_estimated", "of_step", "steps",
                                           "message")}
    for k, (t, r, src) in enumerate(zip(traces, reports, sources)):
        tr["run"].append(run)
        tr["part"].append(part)
        tr["trace"].append(k)
        tr["session"].append(t.session)
        tr["source"].append(src)
        tr["format"].append(t.format)
        tr["steps"].append(len(t.steps))
        tr["step_offset"].append(int(enc.trace_offsets[k]))
        tr["total_tokens"].append(r.total_tokens)
        tr["wasted_tokens"].append(r.wasted_tokens)
        tr["waste_ratio"].append(r.waste_ratio)
        tr["tokens_estimated"].append(bool(r.tokens_estimated))
        tr["findings"].append(len(r.findings))
        for kind in FINDING_KINDS:
            v = r.by_kind.get(kind, {"tokens": 0, "steps": 0})
            tr[f"{kind}_tokens"].append(v["tokens"])
            tr[f"{kind}_steps"].append(v["steps"])
        for f in r.findings:
            fd["run"].append(run)
            fd["part"].append(part)
            fd["trace"].append(k)
            fd["session"].append(t.session)
            fd["source"].append(src)
            fd["kind"].append(f.kind)
            fd["name"].append(f.name)
            fd["target"].append(None if f.target is None else
                                (", ".join(f.target) if isinstance(f.target, tuple) else str(f.target)))
            fd["tokens"].append(f.tokens)
            fd["turn_output_tokens"].append(getattr(f, "turn_output_tokens", 0))
            fd["tokens_estimated"].append(bool(getattr(f, "tokens_estimated", False)))
            fd["of_step"].append(f.of_step)
            fd["steps"].append(list(f.steps))
            fd["message"].append(f.message)
    types = {"trace": pa.int32(), "steps": pa.int64(), "step_offset": pa.int64(), "of_step": pa.int32(),
             "session": pa.string(), "source": pa.string(), "format": pa.string(), "name": pa.string(),
             "target": pa.string(), "message": pa.string(), "kind": pa.string(), "run": pa.string(),
             "part": pa.int32()}
    ftypes = dict(types, steps=pa.list_(pa.int32()))
    traces_t = pa.table({k: pa.array(v, types.get(k)) for k, v in tr.items()})
    findings_t = pa.table({k: pa.array(v, ftypes.get(k, pa.int64() if k.endswith("tokens") else None))
                           for k, v in fd.items()})
    return traces_t, findings_t


def _settings_kw(settings: Any) -> dict[str, Any]:
    return {} if settings is None else {"settings": settings}


def _encode(traces: Sequence["Trace"], settings: Any) -> "EncodedTrace":
    from .encoded import encode

    if settings is not None and "settings" in inspect.signature(encode).parameters:
        return encode(traces, settings)
    return encode(traces)


def _kernel(enc: "EncodedTrace", impl: str | None, charge_turn_output: bool) -> Any:
    from .encoded import analyse_encoded

    if "charge_turn_output" in inspect.signature(analyse_encoded).parameters:
        return analyse_encoded(enc, impl=impl, charge_turn_output=charge_turn_output)
    return analyse_encoded(enc, impl=impl)


def _materialise(trace: Any, codes: Any, of: Any, charge: Any, total: int, charge_turn: bool) -> Any:
    """The BurnReport of one trace from the kernel's per-step output (burn's own grouping)."""
    from . import burn

    params = inspect.signature(burn._report).parameters
    if "charge" in params:
        return burn._report(trace, codes, of, charge, total, charge_turn)
    return burn._report(trace, codes, of)


def _reports(traces: Sequence[Any], enc: "EncodedTrace", res: Any, charge_turn: bool) -> list[Any]:
    """BurnReports of every trace; a trace with no charged step skips the per-step loop."""
    codes = res.finding
    charged = np.flatnonzero(codes)
    offs = enc.trace_offsets
    # the charged steps of trace k are charged[cut[k]:cut[k+1]]
    cut = np.searchsorted(charged, offs).tolist()
    charge = getattr(res, "charge", None)
    totals = res.total_tokens.tolist()
    out = []
    for k, trace in enumerate(traces):
        s0 = int(offs[k])
        if cut[k] == cut[k + 1]:
            out.append(_materialise(trace, (), {}, {}, totals[k], charge_turn))
            continue
        idx = charged[cut[k]:cut[k + 1]]
        last = int(idx[-1]) + 1
        local = (idx - s0).tolist()
        of = dict(zip(local, res.of_step[idx].tolist()))
        ch = dict(zip(local, (charge[idx] if charge is not None else enc.tokens[idx]).tolist()))
        out.append(_materialise(trace, codes[s0:last].tolist(), of, ch, totals[k], charge_turn))
    return out


def collect_to_store(
    paths: Sequence[str | os.PathLike[str]],
    root: str | os.PathLike[str],
    *,
    format: str = "auto",
    keep_going: bool = False,
    on_trace: Callable[["Trace"], None] | None = None,
    settings: Any = None,
    date: str | None = None,
    part_steps: int = PART_STEPS,
    impl: str | None = None,
) -> "AnalysisReport":
    """Analyse every trace under *paths* like :func:`loopcore.report.collect` and append the
    run to the store at *root* (created when absent or empty); returns the same report.

    *date* (``YYYY-MM-DD``, default today in UTC) is the partition the run's files go under.
    Raises StoreError when *root* is a folder that is not a store (or of another schema), and
    what ``collect`` raises on bad input.
    """
    from .burn import BurnReport
    from .report import AnalysisReport, _result, _skipped, _sources, _stats, bulk_gc, iter_traces

    root = os.fspath(root)
    _pa()
    _open_for_writing(root)
    now = _dt.datetime.now(_dt.timezone.utc)
    date = date or now.strftime("%Y-%m-%d")
    _dt.date.fromisoformat(date)  # ValueError for a malformed date
    run = _new_run_id(now)
    charge_turn = bool(getattr(settings, "charge_turn_output", False))
    results = []
    parts: list[dict[str, Any]] = []
    stats = _stats()
    batch: list[tuple[str, Trace]] = []
    batch_steps = 0

    def flush() -> None:
        nonlocal batch, batch_steps
        if not batch:
            return
        traces = [t for _, t in batch]
        enc = _encode(traces, settings)
        res = _kernel(enc, impl, charge_turn)
        reports = _reports(traces, enc, res, charge_turn)
        parts.append(write_encoded(root, enc, traces, reports, sources=[s for s, _ in batch], run=run, date=date,
                                   part=len(parts), analysis=res))
        results.extend(_result(t, s, r) for (s, t), r in zip(batch, reports))
        batch, batch_steps = [], 0

    with bulk_gc():
        for src, trace in iter_traces(paths, format=format, keep_going=keep_going, stats=stats):
            batch.append((src, trace))
            batch_steps += len(trace.steps)
            if on_trace is not None:
                on_trace(trace)
            if batch_steps >= part_steps:
                flush()
        flush()
    report = AnalysisReport(results, BurnReport.combine([r.report for r in results]), _skipped(stats),
                            inputs=_sources(paths), example=not paths, files=stats.files,
                            ignored=[str(p) for p in stats.ignored])
    _write_run(root, run, date, now, parts, report, settings)
    return report


def _write_run(root: str, run: str, date: str, now: _dt.datetime, parts: list[dict[str, Any]], report: Any,
               settings: Any) -> None:
    from . import __version__

    record = {
        "schema": STORE_SCHEMA,
        "run": run,
        "date": date,
        "created": now.isoformat(),
        "loopcore": __version__,
        "encoding": _encoding(),
        "settings": dataclasses.asdict(settings) if dataclasses.is_dataclass(settings) else {},
        "inputs": list(report.inputs),
        "example": report.example,
        "files": report.files,
        "skipped": [s.to_dict() for s in report.skipped],
        "ignored": list(report.ignored),
        "parts": parts,
    }
    _atomic_write(os.path.join(root, "runs", f"{run}.json"), record)


# ---------------------------------------------------------------------------------------------
# reading


def _read(root: str, table: str, run: dict[str, Any], part: int, columns: list[str] | None = None) -> Any:
    pq = _pa().parquet
    path = _part_path(root, table, run["date"], run["run"], part)
    try:
        return pq.read_table(path, columns=columns, use_threads=True)
    except FileNotFoundError:
        raise StoreError(f"{root} is damaged: {os.path.relpath(path, root)} is missing") from None
    except (OSError, ValueError, KeyError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise StoreError(f"{root} is damaged: cannot read {os.path.relpath(path, root)} ({exc})") from None


def _np(col: Any, dtype: Any) -> np.ndarray:
    if col.num_chunks == 1:
        a = col.chunk(0).to_numpy(zero_copy_only=False)
    else:
        a = col.to_numpy()
    return np.ascontiguousarray(a, dtype=dtype)


def read_part(root: str, run: dict[str, Any], part: dict[str, Any]) -> "EncodedTrace":
    """The EncodedTrace of one stored part (the step columns the kernels read, side tables)."""
    from .encoded import EncodedTrace

    if run.get("encoding") != _encoding():
        raise StoreError(f"{root}: run {run.get('run')} was encoded with other step columns "
                         f"({', '.join(c[0] for c in run.get('encoding') or [])}) than this loopcore's; "
                         "re-run `loopcore analyse TRACES --parquet DIR` to rebuild it")
    p = int(part["part"])
    names = [n for n, _ in _step_columns()]
    steps = _read(root, "steps", run, p, names)
    if steps.num_rows != part.get("steps"):
        raise StoreError(f"{root} is damaged: run {run['run']} part {p} has {steps.num_rows} steps, "
                         f"its record says {part.get('steps')}")
    kw: dict[str, Any] = {name: _np(steps.column(name), dtype) for name, dtype in _step_columns()}
    arrays, lists, ints = _layout()
    side = _read(root, "arrays", run, p).to_pydict()
    got = {n: (d, v) for n, d, v in zip(side["name"], side["dtype"], side["values"])}
    for name in arrays:
        if name not in got:
            raise StoreError(f"{root} is damaged: run {run['run']} part {p} lacks the array {name!r}")
        d, v = got[name]
        kw[name] = np.asarray(v, dtype=np.dtype(d))
    for name in lists:
        kw[name] = _read(root, name, run, p, ["name"]).column("name").to_pylist()
    sizes = part.get("sizes") or {}
    for name in ints:
        if name not in sizes:
            raise StoreError(f"{root} is damaged: run {run['run']} part {p} lacks the size {name!r}")
        kw[name] = int(sizes[name])
    return EncodedTrace(**kw)


class _StoredStep:
    """The fields of one stored step that a finding reports (built only for charged steps)."""

    __slots__ = ("_p", "_g")

    def __init__(self, p: "_StoredPart", g: int) -> None:
        self._p = p
        self._g = g

    @property
    def target(self) -> Any:
        p, g = self._p, self._g
        raw = p.raw_target(g)
        if raw is not _NO_RAW:
            return tuple(raw) if isinstance(raw, list) else raw
        k = int(p.enc.target[g])
        return _canonical_target(p.members(k)) if k >= 0 else None

    @property
    def targets(self) -> tuple[str, ...]:
        t = self.target
        return () if t is None else t if isinstance(t, tuple) else (t,)

    @property
    def name(self) -> str:
        return self._p.enc.tools[int(self._p.enc.tool[self._g])]

    @property
    def turn(self) -> int:
        return int(self._p.enc.turn[self._g])

    @property
    def tokens(self) -> int:
        return int(self._p.enc.tokens[self._g])

    @property
    def tokens_turn(self) -> int:
        col = getattr(self._p.enc, "turn_tokens", None)
        return 0 if col is None else int(col[self._g])

    @property
    def tokens_estimated(self) -> bool:
        from .encoded import ESTIMATED

        return bool(int(self._p.enc.flags[self._g]) & ESTIMATED)

    @property
    def ref(self) -> Any:
        return self._p.ref(self._g)


_NO_RAW = object()


class _StoredSteps:
    """The steps of one stored trace as a sequence of :class:`_StoredStep` (made on access)."""

    __slots__ = ("_p", "_s0", "_n")

    def __init__(self, p: "_StoredPart", s0: int, n: int) -> None:
        self._p, self._s0, self._n = p, s0, n

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: int) -> _StoredStep:
        if not 0 <= i < self._n:
            raise IndexError(i)
        return _StoredStep(self._p, self._s0 + i)


@dataclasses.dataclass
class _StoredTrace:
    steps: _StoredSteps
    session: str | None
    source: str
    format: str | None
    total_tokens: int
    tokens_estimated: bool


class _StoredPart:
    """One part being re-analysed: its columns, and the refs / raw targets read on demand."""

    def __init__(self, root: str, run: dict[str, Any], part: dict[str, Any], enc: "EncodedTrace") -> None:
        self.root, self.run, self.part, self.enc = root, run, part, enc
        self._refs: dict[int, Any] | None = None
        self._raw: dict[int, Any] | None = None
        self._wanted: np.ndarray | None = None
        self.members = _set_members(enc)

    def want(self, rows: np.ndarray) -> None:
        """The rows whose refs will be asked for (read in one pass)."""
        self._wanted = rows

    def _load(self) -> None:
        pa = _pa()
        t = _read(self.root, "steps", self.run, int(self.part["part"]), ["ref", "target_raw"])
        rows = self._wanted if self._wanted is not None else np.arange(t.num_rows)
        idx = pa.array(rows.astype(np.int64))
        self._refs = dict(zip(rows.tolist(), t.column("ref").take(idx).to_pylist()))
        raw = t.column("target_raw")
        self._raw = {}
        if raw.null_count < len(raw):
            for i, v in zip(rows.tolist(), raw.take(idx).to_pylist()):
                if v is not None:
                    self._raw[i] = json.loads(v)

    def ref(self, g: int) -> Any:
        if self._refs is None:
            self._load()
        if g not in self._refs:  # a row outside the wanted set (never in practice): read it all
            self._wanted = None
            self._load()
        v = self._refs[g]
        return None if v is None else json.loads(v)

    def raw_target(self, g: int) -> Any:
        if self._raw is None:
            self._load()
        if g not in self._refs:
            self._wanted = None
            self._load()
        return self._raw.get(g, _NO_RAW)


def _iter_parts(root: str) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    for run in _runs(root):
        for part in run["parts"]:
            yield run, part


def analyse_store(root: str | os.PathLike[str], *, impl: str | None = None,
                  charge_turn_output: bool | None = None) -> "AnalysisReport":
    """Re-analyse the stored columns of the store at *root* (every run, in the order written);
    the report equals that of the runs that wrote them. Raises StoreError for a folder that is
    not a store, a store of another schema or encoding, or a damaged one.

    ``charge_turn_output`` overrides the setting the runs were analysed with (None keeps it).
    """
    from .burn import BurnReport
    from .report import AnalysisReport, Skipped, TraceResult

    root = os.fspath(root)
    _pa()
    _check_marker(root)
    runs = _runs(root)
    if not runs:
        raise StoreError(f"{root} is a loopcore store without any complete run")
    results: list[TraceResult] = []
    for run, part in _iter_parts(root):
        charge_turn = bool((run.get("settings") or {}).get("charge_turn_output", False)
                           if charge_turn_output is None else charge_turn_output)
        enc = read_part(root, run, part)
        res = _kernel(enc, impl, charge_turn)
        sp = _StoredPart(root, run, part, enc)
        meta = _read(root, "traces", run, int(part["part"]), ["session", "source", "format", "steps"]).to_pydict()
        if len(meta["steps"]) != enc.n_traces or meta["steps"] != np.diff(enc.trace_offsets).tolist():
            raise StoreError(f"{root} is damaged: run {run['run']} part {part['part']}: the trace table does not "
                             "match the step columns")
        charged = np.flatnonzero(res.finding)
        # a finding reports its charged steps and the first occurrence each repeats
        roots = res.of_step[charged]
        local_start = enc.trace_offsets[np.searchsorted(enc.trace_offsets, charged, side="right") - 1]
        wanted = np.union1d(charged, (local_start + roots)[roots >= 0])
        sp.want(wanted)
        est = _per_trace_any(enc, _estimated_flags(enc))
        offs = enc.trace_offsets.tolist()
        totals = res.total_tokens.tolist()
        traces = [
            _StoredTrace(_StoredSteps(sp, offs[k], offs[k + 1] - offs[k]), meta["session"][k], meta["source"][k],
                         meta["format"][k], totals[k], est[k])
            for k in range(enc.n_traces)
        ]
        for t, r in zip(traces, _reports(traces, enc, res, charge_turn)):
            results.append(TraceResult(source=t.source, session=t.session or "", format=t.format,
                                       steps=len(t.steps), report=r))
    inputs = [i for r in runs for i in r.get("inputs", [])]
    skipped = [Skipped(s.get("path", ""), s.get("line"), s.get("message", "")) for r in runs
               for s in r.get("skipped", [])]
    return AnalysisReport(results, BurnReport.combine([r.report for r in results]), skipped, inputs=inputs,
                          example=all(bool(r.get("example")) for r in runs),
                          files=sum(int(r.get("files", 0)) for r in runs),
                          ignored=[i for r in runs for i in r.get("ignored", [])])


def _estimated_flags(enc: "EncodedTrace") -> np.ndarray:
    from .encoded import ESTIMATED

    return (enc.flags & ESTIMATED) != 0


def _per_trace_any(enc: "EncodedTrace", mask: np.ndarray) -> list[bool]:
    offs = enc.trace_offsets
    if len(mask) == 0:
        return [False] * enc.n_traces
    c = np.concatenate([[0], np.cumsum(mask, dtype=np.int64)])
    return (c[offs[1:]] - c[offs[:-1]] > 0).tolist()
