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
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

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
    "kernel_columns",
    "StoreTotals",
    "analyse_columns",
    "read_part",
    "reanalyse_totals",
    "step_side",
    "trace_meta",
    "write_encoded",
]

#: Bumped when the layout or a table's columns change meaning; a store of another schema is
#: refused with a clear error (re-run the analysis on the traces to rebuild it).
STORE_SCHEMA = 2
#: The marker file that makes a folder a store.
MARKER = "loopcore-store.json"
_FORMAT = "loopcore-store"
#: Steps per part file: a run of more steps is written as several parts (bounded memory).
PART_STEPS = 1_000_000

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
        raise StoreError(
            f"{root} is not a loopcore store: cannot read {MARKER} ({exc.strerror or exc})"
        ) from None
    except ValueError:
        raise StoreError(f"{root} is not a loopcore store: {MARKER} is not JSON") from None
    if not isinstance(meta, dict) or meta.get("format") != _FORMAT:
        raise StoreError(
            f"{root} is not a loopcore store: {MARKER} does not say format {_FORMAT!r}"
        )
    schema = meta.get("schema")
    if schema != STORE_SCHEMA:
        raise StoreError(
            f"{root} is a loopcore store of schema {schema!r}; this loopcore reads schema "
            f"{STORE_SCHEMA} (re-run `loopcore analyse TRACES --parquet DIR` into a new folder)"
        )
    return meta


def _open_for_writing(root: str) -> None:
    if os.path.isdir(root) and os.listdir(root):
        if not is_store(root):
            raise StoreError(
                f"{root} is neither empty nor a loopcore store; refusing to write into it"
            )
        _check_marker(root)
        return
    os.makedirs(root, exist_ok=True)
    from . import __version__

    _atomic_write(
        os.path.join(root, MARKER),
        {"format": _FORMAT, "schema": STORE_SCHEMA, "created_by": f"loopcore {__version__}"},
    )


def _atomic_write(path: str, data: Any) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp-{secrets.token_hex(4)}"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1, sort_keys=True)
    os.replace(tmp, path)


def _runs(root: str) -> list[dict[str, Any]]:
    folder = os.path.join(root, "runs")
    names = (
        sorted(n for n in os.listdir(folder) if n.endswith(".json"))
        if os.path.isdir(folder)
        else []
    )
    runs = []
    for n in names:
        try:
            with open(os.path.join(folder, n), "rb") as fh:
                run = json.loads(fh.read())
        except (OSError, ValueError) as exc:
            raise StoreError(
                f"{root} is damaged: cannot read the run record runs/{n} ({exc})"
            ) from None
        if (
            not isinstance(run, dict)
            or run.get("schema") != STORE_SCHEMA
            or not isinstance(run.get("parts"), list)
        ):
            raise StoreError(
                f"{root} is damaged or of another schema: runs/{n} is not a schema-{STORE_SCHEMA} "
                "run record"
            )
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


def step_side(
    enc: EncodedTrace, traces: Sequence[Trace]
) -> tuple[list[str | None], list[str | None]]:
    """(ref, target_raw) of every step of *enc*, read off the *traces* it was encoded from:
    the step's ref as JSON (None when it has none), and its target as JSON where it is not what
    the interned target set gives back (a tuple in another order, a repeated member)."""
    refs: list[str | None] = []
    raw: list[str | None] = []
    members = _set_members(enc)
    tset = enc.target.tolist()
    g = 0
    for t in traces:
        for s in t.steps:
            ref = getattr(s, "ref", None)
            refs.append(None if ref is None else _json_or_none(ref))
            k = tset[g]
            target = s.target
            if k >= 0 and target == _canonical_target(members(k)):
                raw.append(None)
            else:
                raw.append(
                    None
                    if target is None
                    else _json_or_none(list(target) if isinstance(target, tuple) else target)
                )
            g += 1
    return refs, raw


def trace_meta(traces: Sequence[Trace], sources: Sequence[str]) -> dict[str, list]:
    """The per-trace fields a report shows besides its analysis: session, source, format."""
    return {
        "session": [t.session for t in traces],
        "source": list(sources),
        "format": [t.format for t in traces],
    }


def write_encoded(
    root: str,
    enc: EncodedTrace,
    meta: dict[str, list],
    reports: Sequence[Any],
    *,
    refs: Any,
    target_raw: Any,
    run: str,
    date: str,
    part: int,
    analysis: Any = None,
) -> dict[str, Any]:
    """Write one part: the step columns of *enc* with each step's *refs* and *target_raw* (see
    :func:`step_side`; lists or pyarrow string arrays), the original run's charges
    (*analysis*, an EncodedAnalysis), the side tables, and the per-trace summaries and findings
    of *reports* (one BurnReport per trace; *meta* from :func:`trace_meta`). Returns the part's
    entry of the run record.
    """
    pa = _pa()
    pq = pa.parquet
    n = len(enc)
    cols: dict[str, Any] = {
        "run": pa.DictionaryArray.from_arrays(np.zeros(n, np.int32), pa.array([run])),
        "part": pa.array(np.full(n, part, np.int32)),
    }
    # The kernels' columns are stored in the encoding's own dtypes, so reading one back is a
    # copy with no widening (narrowing int64 counts to int32 saved 16% of the bytes and cost
    # 13% more CPU to read); the others are narrowed where they fit.
    kernel_read = set(kernel_columns())
    for name, dtype in _step_columns():
        a = np.ascontiguousarray(getattr(enc, name), dtype=dtype)
        cols[name] = pa.array(a if name in kernel_read else _narrow(a))
    lens = np.diff(enc.trace_offsets)
    cols["step"] = pa.array(
        (np.arange(n, dtype=np.int64) - np.repeat(enc.trace_offsets[:-1], lens)).astype(np.int32)
    )
    cols["ref"] = (
        refs if isinstance(refs, (pa.Array, pa.ChunkedArray)) else pa.array(refs, pa.string())
    )
    cols["target_raw"] = (
        target_raw
        if isinstance(target_raw, (pa.Array, pa.ChunkedArray))
        else pa.array(target_raw, pa.string())
    )
    if (
        analysis is not None
    ):  # the original run's charges, for queries (re-analysis recomputes them)
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
    files["arrays"] = pa.table(
        {
            k: (pa.array(v, pa.list_(pa.int64())) if k == "values" else pa.array(v))
            for k, v in side.items()
        }
    )
    for name in lists:
        values = list(getattr(enc, name))
        table = "sessions" if name == "sessions" else name
        files[table] = pa.table(
            {
                "run": pa.array([run] * len(values), pa.string()),
                "part": pa.array(np.full(len(values), part, np.int32)),
                "id": pa.array(np.arange(len(values), dtype=np.int32)),
                "name": pa.array([None if v is None else str(v) for v in values], pa.string()),
            }
        )
    files["traces"], files["findings"] = _summary_tables(pa, run, part, meta, reports, enc)
    for table, data in files.items():
        path = _part_path(root, table, date, run, part)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if table == "steps":
            # The columns the kernels read are stored plain and uncompressed: reading them back
            # is then a copy, which is what re-analysis at the kernels' speed needs (hashes and
            # ids do not compress anyway); the rest (refs, the run's charges) is compressed.
            # Small codes (kind, flags) take few values: dictionary-encoded, uncompressed.
            kernel = {name for name, _ in _step_columns()}
            small = {name for name, d in _step_columns() if d.itemsize <= 2}
            pq.write_table(
                data,
                path,
                compression={c: "none" if c in kernel else "zstd" for c in data.column_names},
                use_dictionary=[c for c in data.column_names if c not in kernel or c in small],
                row_group_size=1 << 22,
            )
        else:
            pq.write_table(data, path, compression="zstd")
    return {
        "part": part,
        "steps": n,
        "traces": enc.n_traces,
        "tables": sorted(files),
        "sizes": {name: int(getattr(enc, name)) for name in ints},
    }


def _narrow(a: np.ndarray) -> np.ndarray:
    """A signed 64-bit column whose values fit 32 bits, as int32 (read back as the encoding's
    dtype): fewer bytes to read. Hashes (unsigned) are left as they are."""
    if a.dtype == np.int64 and len(a) and -(1 << 31) <= int(a.min()) and int(a.max()) < (1 << 31):
        return a.astype(np.int32)
    return a


def _set_members(enc: EncodedTrace) -> Callable[[int], list[str]]:
    offs, mem, names = enc.target_offsets, enc.target_members, enc.targets

    def members(k: int) -> list[str]:
        return [names[int(m)] for m in mem[int(offs[k]) : int(offs[k + 1])]]

    return members


def _summary_tables(
    pa: Any, run: str, part: int, meta: dict[str, list], reports: Sequence[Any], enc: EncodedTrace
) -> tuple[Any, Any]:
    from .encoded import FINDING_KINDS

    tr: dict[str, list] = {
        k: []
        for k in (
            "run",
            "part",
            "trace",
            "session",
            "source",
            "format",
            "steps",
            "step_offset",
            "total_tokens",
            "wasted_tokens",
            "waste_ratio",
            "tokens_estimated",
            "estimated_tokens",
            "findings",
        )
    }
    for kind in FINDING_KINDS:
        tr[f"{kind}_tokens"] = []
        tr[f"{kind}_steps"] = []
    fd: dict[str, list] = {
        k: []
        for k in (
            "run",
            "part",
            "trace",
            "session",
            "source",
            "kind",
            "name",
            "target",
            "tokens",
            "turn_output_tokens",
            "tokens_estimated",
            "of_step",
            "steps",
            "message",
        )
    }
    offs = enc.trace_offsets.tolist()
    for k, (session, src, fmt, r) in enumerate(
        zip(meta["session"], meta["source"], meta["format"], reports)
    ):
        tr["run"].append(run)
        tr["part"].append(part)
        tr["trace"].append(k)
        tr["session"].append(session)
        tr["source"].append(src)
        tr["format"].append(fmt)
        tr["steps"].append(offs[k + 1] - offs[k])
        tr["step_offset"].append(offs[k])
        tr["total_tokens"].append(r.total_tokens)
        tr["wasted_tokens"].append(r.wasted_tokens)
        tr["waste_ratio"].append(r.waste_ratio)
        tr["tokens_estimated"].append(bool(r.tokens_estimated))
        tr["estimated_tokens"].append(int(getattr(r, "estimated_tokens", 0)))
        tr["findings"].append(len(r.findings))
        for kind in FINDING_KINDS:
            v = r.by_kind.get(kind, {"tokens": 0, "steps": 0})
            tr[f"{kind}_tokens"].append(v["tokens"])
            tr[f"{kind}_steps"].append(v["steps"])
        for f in r.findings:
            fd["run"].append(run)
            fd["part"].append(part)
            fd["trace"].append(k)
            fd["session"].append(session)
            fd["source"].append(src)
            fd["kind"].append(f.kind)
            fd["name"].append(f.name)
            fd["target"].append(
                None
                if f.target is None
                else (", ".join(f.target) if isinstance(f.target, tuple) else str(f.target))
            )
            fd["tokens"].append(f.tokens)
            fd["turn_output_tokens"].append(getattr(f, "turn_output_tokens", 0))
            fd["tokens_estimated"].append(bool(getattr(f, "tokens_estimated", False)))
            fd["of_step"].append(f.of_step)
            fd["steps"].append(list(f.steps))
            fd["message"].append(f.message)
    types = {
        "trace": pa.int32(),
        "steps": pa.int64(),
        "step_offset": pa.int64(),
        "of_step": pa.int32(),
        "session": pa.string(),
        "source": pa.string(),
        "format": pa.string(),
        "name": pa.string(),
        "target": pa.string(),
        "message": pa.string(),
        "kind": pa.string(),
        "run": pa.string(),
        "part": pa.int32(),
    }
    ftypes = dict(types, steps=pa.list_(pa.int32()))
    traces_t = pa.table({k: pa.array(v, types.get(k)) for k, v in tr.items()})
    findings_t = pa.table(
        {
            k: pa.array(v, ftypes.get(k, pa.int64() if k.endswith("tokens") else None))
            for k, v in fd.items()
        }
    )
    return traces_t, findings_t


def _encode(traces: Sequence[Trace], settings: Any) -> EncodedTrace:
    from .encoded import encode

    if settings is not None and "settings" in inspect.signature(encode).parameters:
        return encode(traces, settings)
    return encode(traces)


def _kernel(enc: EncodedTrace, impl: str | None, charge_turn_output: bool) -> Any:
    from .encoded import _kernel_of, _run_kernel

    return _run_kernel(_kernel_of(impl), enc, charge_turn_output)


def _materialise(
    trace: Any, codes: Any, of: Any, charge: Any, total: int, charge_turn: bool
) -> Any:
    """The BurnReport of one trace from the kernel's per-step output (burn's own grouping)."""
    from . import burn

    params = inspect.signature(burn._report).parameters
    if "charge" in params:
        return burn._report(trace, codes, of, charge, total, charge_turn)
    return burn._report(trace, codes, of)


def _reports(traces: Sequence[Any], enc: EncodedTrace, res: Any, charge_turn: bool) -> list[Any]:
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
        idx = charged[cut[k] : cut[k + 1]]
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
    on_trace: Callable[[Trace], None] | None = None,
    settings: Any = None,
    date: str | None = None,
    part_steps: int = PART_STEPS,
    _impl: str | None = None,
) -> AnalysisReport:
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
        res = _kernel(enc, _impl, charge_turn)
        reports = _reports(traces, enc, res, charge_turn)
        refs, raw = step_side(enc, traces)
        parts.append(
            write_encoded(
                root,
                enc,
                trace_meta(traces, [s for s, _ in batch]),
                reports,
                refs=refs,
                target_raw=raw,
                run=run,
                date=date,
                part=len(parts),
                analysis=res,
            )
        )
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
    report = AnalysisReport(
        results,
        BurnReport.combine([r.report for r in results]),
        _skipped(stats),
        inputs=_sources(paths),
        example=not paths,
        files=stats.files,
        ignored=[str(p) for p in stats.ignored],
        copies=list(stats.copies),
    )
    _write_run(root, run, date, now, parts, report, settings)
    return report


def _write_run(
    root: str,
    run: str,
    date: str,
    now: _dt.datetime,
    parts: list[dict[str, Any]],
    report: Any,
    settings: Any,
) -> None:
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
        "copies": list(report.copies),
        "parts": parts,
    }
    _atomic_write(os.path.join(root, "runs", f"{run}.json"), record)


# ---------------------------------------------------------------------------------------------
# reading


def _read(
    root: str, table: str, run: dict[str, Any], part: int, columns: list[str] | None = None
) -> Any:
    pq = _pa().parquet
    path = _part_path(root, table, run["date"], run["run"], part)
    try:
        # A part is one file: ParquetFile reads each row group as one chunk (read_table goes
        # through the dataset layer, which cuts columns into 128 k-row batches that then have
        # to be concatenated): the kernels' columns come out as single buffers.
        with pq.ParquetFile(path, memory_map=True) as f:
            return f.read(columns=columns, use_threads=True)
    except FileNotFoundError:
        raise StoreError(f"{root} is damaged: {os.path.relpath(path, root)} is missing") from None
    except (OSError, ValueError, KeyError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise StoreError(
            f"{root} is damaged: cannot read {os.path.relpath(path, root)} ({exc})"
        ) from None


def _np(col: Any, dtype: Any) -> np.ndarray:
    """A column as one contiguous array of *dtype*: the Arrow buffer itself when it already is
    one (no copy), else one pass that copies (and widens) chunk by chunk."""
    dtype = np.dtype(dtype)
    if col.num_chunks == 1:
        a = col.chunk(0).to_numpy(zero_copy_only=False)
        return a if a.dtype == dtype and a.flags.c_contiguous else a.astype(dtype)
    out = np.empty(len(col), dtype)
    at = 0
    for chunk in col.chunks:
        n = len(chunk)
        out[at : at + n] = chunk.to_numpy(zero_copy_only=False)
        at += n
    return out


_KERNEL_COLUMNS: list[str] | None = None


def kernel_columns() -> list[str]:
    """The step columns ``analyse_encoded`` hands the kernel, found by running it once on an
    empty encoding that notes what is read (so the store follows the encoder as it changes)."""
    global _KERNEL_COLUMNS
    if _KERNEL_COLUMNS is None:
        from .encoded import analyse_encoded, encode

        empty = encode([])
        seen: list[str] = []

        class Watch:
            def __getattr__(self, name: str) -> Any:
                seen.append(name)
                return getattr(empty, name)

        analyse_encoded(Watch())  # type: ignore[arg-type]
        step = [n for n, _ in _step_columns()]
        _KERNEL_COLUMNS = [n for n in step if n in seen]
    return list(_KERNEL_COLUMNS)


def read_part(
    root: str, run: dict[str, Any], part: dict[str, Any], *, kernel_only: bool = False
) -> EncodedTrace:
    """The EncodedTrace of one stored part (its step columns and side tables).

    With *kernel_only*, only the step columns the kernels read are read; the others are empty
    arrays (enough for ``analyse_encoded``, not for building findings).
    """
    from .encoded import EncodedTrace

    if run.get("encoding") != _encoding():
        raise StoreError(
            f"{root}: run {run.get('run')} was encoded with other step columns "
            f"({', '.join(c[0] for c in run.get('encoding') or [])}) than this loopcore's; "
            "re-run `loopcore analyse TRACES --parquet DIR` to rebuild it"
        )
    p = int(part["part"])
    names = kernel_columns() if kernel_only else [n for n, _ in _step_columns()]
    steps = _read(root, "steps", run, p, names)
    if steps.num_rows != part.get("steps"):
        raise StoreError(
            f"{root} is damaged: run {run['run']} part {p} has {steps.num_rows} steps, "
            f"its record says {part.get('steps')}"
        )
    kw: dict[str, Any] = {
        name: _np(steps.column(name), dtype) if name in names else np.zeros(0, dtype)
        for name, dtype in _step_columns()
    }
    arrays, lists, ints = _layout()
    side = _read(root, "arrays", run, p)
    values = side.column("values").combine_chunks()
    offs = values.offsets.to_numpy()
    flat = values.values.to_numpy(zero_copy_only=False)
    got = {
        n: (d, i)
        for i, (n, d) in enumerate(
            zip(side.column("name").to_pylist(), side.column("dtype").to_pylist())
        )
    }
    for name in arrays:
        if name not in got:
            raise StoreError(
                f"{root} is damaged: run {run['run']} part {p} lacks the array {name!r}"
            )
        d, i = got[name]
        kw[name] = np.ascontiguousarray(flat[offs[i] : offs[i + 1]], dtype=np.dtype(d))
    for name in lists:
        kw[name] = _read(root, name, run, p, ["name"]).column("name").to_pylist()
    sizes = part.get("sizes") or {}
    for name in ints:
        if name not in sizes:
            raise StoreError(
                f"{root} is damaged: run {run['run']} part {p} lacks the size {name!r}"
            )
        kw[name] = int(sizes[name])
    return EncodedTrace(**kw)


class _StoredStep:
    """The fields of one stored step that a finding reports (built only for charged steps)."""

    __slots__ = ("_p", "_g")

    def __init__(self, p: _Part, g: int) -> None:
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

    def __init__(self, p: _Part, s0: int, n: int) -> None:
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
    estimated_tokens: int = 0


class _Side:
    """Refs and raw targets of a part's steps, by row (only the rows a report cites are read)."""

    def __init__(self, refs: Any, raw: Any) -> None:
        self._refs_src, self._raw_src = refs, raw
        self._refs: dict[int, Any] = {}
        self._raw: dict[int, Any] = {}

    def _source(self) -> tuple[Any, Any]:
        return self._refs_src, self._raw_src

    def want(self, rows: np.ndarray) -> None:
        """Fetch the ref and raw target of *rows* in one pass."""
        if len(rows) == 0:
            return
        refs, raw = self._source()
        self._fetch(refs, raw, rows)

    def _fetch(self, refs: Any, raw: Any, rows: np.ndarray) -> None:
        keys = rows.tolist()
        if isinstance(refs, list):
            got_refs = [refs[i] for i in keys]
            got_raw = [raw[i] for i in keys]
        else:
            pa = _pa()
            idx = pa.array(rows.astype(np.int64))
            got_refs = refs.take(idx).to_pylist()
            got_raw = raw.take(idx).to_pylist() if raw.null_count < len(raw) else [None] * len(keys)
        self._refs.update(zip(keys, got_refs))
        self._raw.update(zip(keys, got_raw))

    def ref(self, g: int) -> Any:
        if g not in self._refs:
            self.want(np.array([g]))
        v = self._refs[g]
        return None if v is None else json.loads(v)

    def raw_target(self, g: int) -> Any:
        if g not in self._raw:
            self.want(np.array([g]))
        v = self._raw[g]
        return _NO_RAW if v is None else json.loads(v)


class _StoredSide(_Side):
    """A stored part's refs and raw targets, read from its steps file on first use."""

    def __init__(self, root: str, run: dict[str, Any], part: int) -> None:
        super().__init__(None, None)
        self._where = (root, run, part)

    def _source(self) -> tuple[Any, Any]:
        if self._refs_src is None:
            root, run, part = self._where
            t = _read(root, "steps", run, part, ["ref", "target_raw"])
            self._refs_src, self._raw_src = t.column("ref"), t.column("target_raw")
        return self._refs_src, self._raw_src


class _Part:
    """One part being analysed: its columns and the side rows of its steps."""

    def __init__(self, enc: EncodedTrace, side: _Side) -> None:
        self.enc = enc
        self.side = side
        self.members = _set_members(enc)

    def ref(self, g: int) -> Any:
        return self.side.ref(g)

    def raw_target(self, g: int) -> Any:
        return self.side.raw_target(g)


def analyse_columns(
    enc: EncodedTrace,
    meta: dict[str, list],
    side: _Side,
    *,
    _impl: str | None = None,
    charge_turn_output: bool = False,
) -> list[Any]:
    """TraceResults of every trace of *enc* from the kernels' output, without a Step object:
    what the report shows of a step (its tool, target, turn, ref) is read off the columns and
    *side* for the charged steps and the steps they repeat only."""
    from .report import TraceResult

    res = _kernel(enc, _impl, charge_turn_output)
    offs = enc.trace_offsets
    charged = np.flatnonzero(res.finding)
    if len(charged):
        roots = res.of_step[charged].astype(np.int64)
        start = offs[np.searchsorted(offs, charged, side="right") - 1]
        side.want(np.union1d(charged, (start + roots)[roots >= 0]))
    flags = _estimated_flags(enc)
    est = _per_trace_any(enc, flags)
    # the part of a trace's tokens that rests on estimates: every token of its estimated steps
    own = enc.tokens + enc.turn_tokens if hasattr(enc, "turn_tokens") else enc.tokens
    est_tokens = _per_trace_sum(enc, np.where(flags, own, 0))
    part = _Part(enc, side)
    o = offs.tolist()
    totals = res.total_tokens.tolist()
    traces = [
        _StoredTrace(
            _StoredSteps(part, o[k], o[k + 1] - o[k]),
            meta["session"][k],
            meta["source"][k],
            meta["format"][k],
            totals[k],
            est[k],
            est_tokens[k],
        )
        for k in range(enc.n_traces)
    ]
    return [
        TraceResult(
            source=t.source, session=t.session or "", format=t.format, steps=len(t.steps), report=r
        )
        for t, r in zip(traces, _reports(traces, enc, res, charge_turn_output))
    ]


def _iter_parts(root: str) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    for run in _runs(root):
        for part in run["parts"]:
            yield run, part


def _read_ahead(
    root: str, *, kernel_only: bool
) -> Iterator[tuple[dict[str, Any], dict[str, Any], EncodedTrace]]:
    """(run, part, columns) of every part, the next part read in a thread while the caller
    runs the kernel on this one (pyarrow and the compiled kernel both release the GIL); at
    most two parts are in memory."""
    from concurrent.futures import ThreadPoolExecutor

    parts = list(_iter_parts(root))
    if not parts:
        return
    with ThreadPoolExecutor(1, thread_name_prefix="loopcore-store") as pool:
        nxt = pool.submit(read_part, root, *parts[0], kernel_only=kernel_only)
        for i, (run, part) in enumerate(parts):
            enc = nxt.result()
            if i + 1 < len(parts):
                nxt = pool.submit(read_part, root, *parts[i + 1], kernel_only=kernel_only)
            yield run, part, enc
            del enc


def _read_meta(
    root: str, run: dict[str, Any], part: dict[str, Any], enc: EncodedTrace
) -> dict[str, list]:
    meta = _read(
        root, "traces", run, int(part["part"]), ["session", "source", "format", "steps"]
    ).to_pydict()
    if len(meta["steps"]) != enc.n_traces or meta["steps"] != np.diff(enc.trace_offsets).tolist():
        raise StoreError(
            f"{root} is damaged: run {run['run']} part {part['part']}: the trace table does not "
            "match the step columns"
        )
    return meta


def _charge_turn(run: dict[str, Any], override: bool | None) -> bool:
    if override is not None:
        return bool(override)
    return bool((run.get("settings") or {}).get("charge_turn_output", False))


def _open(root: str | os.PathLike[str]) -> tuple[str, list[dict[str, Any]]]:
    root = os.fspath(root)
    if not os.path.isdir(root):
        raise StoreError(f"{root} is not a folder, so not a loopcore store")
    _pa()
    _check_marker(root)
    runs = _runs(root)
    if not runs:
        raise StoreError(f"{root} is a loopcore store without any complete run")
    return root, runs


def analyse_store(
    root: str | os.PathLike[str],
    *,
    _impl: str | None = None,
    charge_turn_output: bool | None = None,
) -> AnalysisReport:
    """Re-analyse the stored columns of the store at *root* (every run, in the order written);
    the report equals that of the runs that wrote them. Raises StoreError for a folder that is
    not a store, a store of another schema or encoding, or a damaged one.

    ``charge_turn_output`` overrides the setting the runs were analysed with (None keeps it).
    """
    from .burn import BurnReport
    from .report import AnalysisReport, Skipped

    root, runs = _open(root)
    results: list[Any] = []
    for run, part, enc in _read_ahead(root, kernel_only=False):
        meta = _read_meta(root, run, part, enc)
        results.extend(
            analyse_columns(
                enc,
                meta,
                _StoredSide(root, run, int(part["part"])),
                _impl=_impl,
                charge_turn_output=_charge_turn(run, charge_turn_output),
            )
        )
    skipped = [
        Skipped(s.get("path", ""), s.get("line"), s.get("message", ""))
        for r in runs
        for s in r.get("skipped", [])
    ]
    return AnalysisReport(
        results,
        BurnReport.combine([r.report for r in results]),
        skipped,
        inputs=[i for r in runs for i in r.get("inputs", [])],
        example=all(bool(r.get("example")) for r in runs),
        files=sum(int(r.get("files", 0)) for r in runs),
        ignored=[i for r in runs for i in r.get("ignored", [])],
        copies=[i for r in runs for i in r.get("copies", [])],
    )


@dataclasses.dataclass
class StoreTotals:
    """Re-analysis down to per-trace numbers (no Finding objects): what the kernels give."""

    traces: int
    steps: int
    total_tokens: int
    wasted_tokens: int
    charged_steps: int
    by_kind_tokens: np.ndarray
    by_kind_steps: np.ndarray
    #: per trace, in store order
    trace_total_tokens: np.ndarray
    trace_wasted_tokens: np.ndarray


def reanalyse_totals(
    root: str | os.PathLike[str],
    *,
    _impl: str | None = None,
    charge_turn_output: bool | None = None,
) -> StoreTotals:
    """Read every stored part and run the kernels on it: the per-trace totals and by-kind sums
    of the full report (its findings are not built). Raises StoreError as analyse_store."""
    root, runs = _open(root)
    tot, waste, bkt, bks = [], [], [], []
    steps = charged = 0

    def one(run: dict[str, Any], part: dict[str, Any]) -> tuple[int, Any]:
        enc = read_part(root, run, part, kernel_only=True)
        return len(enc), _kernel(enc, _impl, _charge_turn(run, charge_turn_output))

    # Reading (pyarrow) and the compiled kernel both release the GIL: a part per core, in
    # threads, at most one part a thread in memory, results taken in store order.
    for n, res in _in_threads(one, list(_iter_parts(root))):
        steps += n
        charged += int(np.count_nonzero(res.finding))
        tot.append(res.total_tokens)
        waste.append(res.wasted_tokens)
        bkt.append(res.by_kind_tokens)
        bks.append(res.by_kind_steps)
    t = np.concatenate(tot)
    w = np.concatenate(waste)
    kt, ks = np.concatenate(bkt), np.concatenate(bks)
    return StoreTotals(
        len(t), steps, int(t.sum()), int(w.sum()), charged, kt.sum(axis=0), ks.sum(axis=0), t, w
    )


def _in_threads(fn: Callable[..., Any], items: list[tuple]) -> Iterator[Any]:
    """``fn(*item)`` for every item, on a thread per core (at most that many running and one
    waiting to be taken), yielded in order."""
    from concurrent.futures import ThreadPoolExecutor

    from .fleet import cpu_count

    workers = max(1, min(cpu_count(), len(items)))
    with ThreadPoolExecutor(workers, thread_name_prefix="loopcore-store") as pool:
        futs: list[Any] = []
        nxt = 0
        for i in range(len(items)):
            while nxt < len(items) and nxt < i + workers:
                futs.append(pool.submit(fn, *items[nxt]))
                nxt += 1
            yield futs[i].result()
            futs[i] = None


def _estimated_flags(enc: EncodedTrace) -> np.ndarray:
    from .encoded import ESTIMATED

    return (enc.flags & ESTIMATED) != 0


def _per_trace_any(enc: EncodedTrace, mask: np.ndarray) -> list[bool]:
    offs = enc.trace_offsets
    if len(mask) == 0:
        return [False] * enc.n_traces
    c = np.concatenate([[0], np.cumsum(mask, dtype=np.int64)])
    return (c[offs[1:]] - c[offs[:-1]] > 0).tolist()


def _per_trace_sum(enc: EncodedTrace, values: np.ndarray) -> list[int]:
    offs = enc.trace_offsets
    c = np.concatenate([[0], np.cumsum(values, dtype=np.int64)])
    return (c[offs[1:]] - c[offs[:-1]]).tolist()
