"""Stored columns benchmark: re-analysing a 10 M-step Parquet store, reading included.

    python benchmarks/bench_store.py [--steps 10000000] [--template 100000] [--runs 3]
                                     [--dir DIR] [--full]

1. Writes a corpus of ``--template`` steps in real harness formats with the project's own
   generator (tools/make_corpus.py), loads it with ``loopcore.load`` and encodes it with
   ``encode()``, so the columns are exactly what the analysis stores.
2. Tiles that encoding to ``--steps`` with ``EncodedTrace.concat`` (every copy an independent
   set of sessions with its own ids; refs and session names tiled alongside) in parts of about
   ``PART_STEPS`` steps, and writes them as one run of a store with
   ``loopcore.store.write_encoded``, as ``analyse --parquet`` writes a run.
3. Times the re-analysis of the store from its files: reading every part's step columns and
   side tables with pyarrow and running the burn kernel on them, a part per core in threads,
   to the per-trace totals and by-kind sums of the report (``store.reanalyse_totals``); median
   of ``--runs`` runs with the files in the page cache (the first run reads them cold after the
   write), wall and CPU time.
4. With ``--full``, also times ``store.analyse_store``: the whole report, every Finding object
   built (about one step in nine is charged in this corpus, so this is dominated by building
   a million Python objects, not by reading or the kernel).

Correctness, checked next to the times: the totals read back equal those of the kernel run on
the same columns in memory; the report of the stored template equals the report of the
in-memory columns (``store.analyse_columns``) and that of ``loopcore.report.collect`` on the
corpus files; with ``--full``, the whole 10 M-step report equals the in-memory one.

Bar (docs/store.md): >= 10 M steps/s end to end on a 10 M-step store, reading included.
Exit status 0 when the bar and every check pass, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _env import environment  # noqa: E402  (benchmarks/_env.py)

from loopcore import (  # noqa: E402
    implementation,
    load,
    store,  # noqa: E402
)
from loopcore.encoded import EncodedTrace, analyse_encoded, encode  # noqa: E402
from loopcore.report import collect  # noqa: E402

BAR = 10e6
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _template(work: str, steps: int):
    corpus = os.path.join(work, "corpus")
    subprocess.run(
        [
            sys.executable,
            os.path.join(ROOT, "tools", "make_corpus.py"),
            corpus,
            "--steps",
            str(steps),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    traces = list(load([corpus]))
    sources = [t.source or corpus for t in traces]
    enc = encode(traces)
    refs, raw = store.step_side(enc, traces)
    return corpus, traces, sources, enc, refs, raw


def _tile(enc, meta, refs, raw, copies: int, tag: str):
    """*copies* of the template as one EncodedTrace (fresh ids per copy, sessions renamed)."""
    import pyarrow as pa

    big = EncodedTrace.concat([enc] * copies)
    meta_big = {
        "session": [
            None if s is None else f"{s}~{tag}{c}" for c in range(copies) for s in meta["session"]
        ],
        "source": [s for _ in range(copies) for s in meta["source"]],
        "format": [f for _ in range(copies) for f in meta["format"]],
    }
    big.sessions = list(meta_big["session"])
    r = pa.array(refs, pa.string())
    w = pa.array(raw, pa.string())
    return big, meta_big, pa.concat_arrays([r] * copies), pa.concat_arrays([w] * copies)


def _write(root: str, parts_data) -> None:
    """One run of the store, a part per (enc, meta, refs, raw) of *parts_data*."""
    import datetime as dt

    store._open_for_writing(root)
    now = dt.datetime.now(dt.timezone.utc)
    run = store._new_run_id(now)
    date = now.strftime("%Y-%m-%d")
    parts = []
    for enc, meta, refs, raw in parts_data:
        res = analyse_encoded(enc)
        reports = [t.report for t in store.analyse_columns(enc, meta, store._Side(refs, raw))]
        parts.append(
            store.write_encoded(
                root,
                enc,
                meta,
                reports,
                refs=refs,
                target_raw=raw,
                run=run,
                date=date,
                part=len(parts),
                analysis=res,
            )
        )
    fake = type(
        "R",
        (),
        {
            "inputs": ["<tiled template>"],
            "example": False,
            "files": 0,
            "skipped": [],
            "ignored": [],
        },
    )()
    store._write_run(root, run, date, now, parts, fake, None)


def _dir_size(root: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(root) for f in fs)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=10_000_000)
    ap.add_argument("--template", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument(
        "--dir", default=None, help="where to build the store (default: a temporary folder)"
    )
    ap.add_argument(
        "--full", action="store_true", help="also time the whole report (every Finding built)"
    )
    args = ap.parse_args(argv)
    print(
        environment(
            "python benchmarks/bench_store.py "
            + " ".join(argv if argv is not None else sys.argv[1:])
        )
    )
    print(f"implementation: {implementation()}")
    work = args.dir or tempfile.mkdtemp(prefix="loopcore-bench-store-")
    ok = True
    try:
        t0 = time.perf_counter()
        corpus, traces, sources, enc, refs, raw = _template(work, args.template)
        meta = store.trace_meta(traces, sources)
        print(
            f"template: {len(enc):,} steps in {enc.n_traces:,} traces from tools/make_corpus.py, "
            f"loaded and encoded in {time.perf_counter() - t0:.1f}s"
        )

        # the template through a store equals the template analysed in memory and `collect`
        small = os.path.join(work, "template-store")
        shutil.rmtree(small, ignore_errors=True)
        _write(small, [(enc, meta, refs, raw)])
        mem = store.analyse_columns(enc, meta, store._Side(refs, raw))
        stored = store.analyse_store(small)
        ref_report = collect([corpus])
        same_small = (
            [t.to_dict() for t in stored.traces]
            == [t.to_dict() for t in mem]
            == [t.to_dict() for t in ref_report.traces]
        )
        print(f"check: template store report == in-memory columns == collect(): {same_small}")
        ok &= same_small

        per_part = max(1, store.PART_STEPS // len(enc))
        n_parts = max(1, round(args.steps / len(enc) / per_part))
        parts_data = [_tile(enc, meta, refs, raw, per_part, f"p{p}.") for p in range(n_parts)]
        root = os.path.join(work, "store")
        shutil.rmtree(root, ignore_errors=True)
        t0 = time.perf_counter()
        _write(root, parts_data)
        t_write = time.perf_counter() - t0
        n = sum(len(p[0]) for p in parts_data)
        print(
            f"store: {n:,} steps in {sum(p[0].n_traces for p in parts_data):,} traces, {n_parts} parts, "
            f"{_dir_size(root) / 1e6:.0f} MB on disk, written in {t_write:.1f}s "
            f"({n / t_write / 1e6:.2f} M steps/s, findings and summaries included)"
        )

        mem = [analyse_encoded(p[0]) for p in parts_data]
        mem_total = sum(int(r.total_tokens.sum()) for r in mem)
        mem_wasted = np.concatenate([r.wasted_tokens for r in mem])
        mem_by_kind = sum(r.by_kind_steps.sum(axis=0) for r in mem)
        mem_charged = sum(int(np.count_nonzero(r.finding)) for r in mem)
        times, cpu = [], []
        load_before = os.getloadavg()[0]
        for _ in range(args.runs):
            t0, c0 = time.perf_counter(), time.process_time()
            tot = store.reanalyse_totals(root)
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        same = (
            tot.steps == n
            and tot.total_tokens == mem_total
            and tot.wasted_tokens == int(mem_wasted.sum())
            and np.array_equal(tot.trace_wasted_tokens, mem_wasted)
            and np.array_equal(tot.by_kind_steps, mem_by_kind)
            and tot.charged_steps == mem_charged
        )
        ok &= same
        med = statistics.median(times)
        rate = n / med
        print(
            f"re-analysis (read + kernels, per-trace totals): median {med:.3f}s of {args.runs} "
            f"(runs: {', '.join(f'{t:.3f}' for t in times)}) = {rate / 1e6:.1f} M steps/s; "
            f"bar >= {BAR / 1e6:.0f} M steps/s: {'PASS' if rate >= BAR else 'FAIL'} ({rate / BAR:.2f}x)"
        )
        print(
            f"check: totals read back == kernel on the same columns in memory: {same} "
            f"({tot.charged_steps:,} charged steps, {tot.wasted_tokens:,} of {tot.total_tokens:,} tokens wasted)"
        )
        cmed = statistics.median(cpu)
        print(
            f"  CPU time of this process (all its threads): median {cmed:.3f}s = {n / cmed / 1e6:.1f} M steps/s "
            f"per CPU-second; load average {load_before:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores "
            "(wall time above includes waiting for a core)"
        )
        cores = min(os.cpu_count() or 1, len(store._runs(root)[0]["parts"]))
        print(
            f"  the same CPU time spread over {cores} idle cores (parts run a core each): "
            f"{n / (cmed / cores) / 1e6:.1f} M steps/s, an estimate for a quiet machine "
            f"({n / (cmed / cores) / BAR:.2f}x the bar)"
        )
        ok &= rate >= BAR
        t_read = t_kernel = 0.0
        for r, p in store._iter_parts(root):
            t0 = time.perf_counter()
            e = store.read_part(root, r, p, kernel_only=True)
            t1 = time.perf_counter()
            analyse_encoded(e)
            t_read, t_kernel = t_read + t1 - t0, t_kernel + time.perf_counter() - t1
            del e
        print(
            f"  one part after another, no overlap: reading {t_read:.3f}s ({n / t_read / 1e6:.1f} M steps/s), "
            f"kernels {t_kernel:.3f}s ({n / t_kernel / 1e6:.1f} M steps/s)"
        )
        if args.full:
            t0 = time.perf_counter()
            full = store.analyse_store(root)
            t_full = time.perf_counter() - t0
            print(
                f"whole report (every Finding built): {t_full:.2f}s = {n / t_full / 1e6:.2f} M steps/s, "
                f"{sum(len(t.report.findings) for t in full.traces):,} findings"
            )
            mem_full = [
                t
                for e, m, r, w in parts_data
                for t in store.analyse_columns(e, m, store._Side(r, w))
            ]
            same_full = [t.to_dict() for t in full.traces] == [t.to_dict() for t in mem_full]
            print(f"check: whole stored report == in-memory columns: {same_full}")
            ok &= same_full
    finally:
        if args.dir is None:
            shutil.rmtree(work, ignore_errors=True)
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
