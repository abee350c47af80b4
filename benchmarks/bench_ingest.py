"""End-to-end ingest benchmark: ``loopcore analyse`` against merely parsing the same files.

    python benchmarks/bench_ingest.py [--traces DIR] [--runs N] [--profile] [--callgrind [--cache-sim]]

(a) parse-only: read + gunzip + ``orjson.loads`` of every trace file ``analyse`` reads (JSONL
    line by line), the floor any tool that looks at these files pays, with the cyclic garbage
    collector paused as ``analyse`` pauses it;
(b) end-to-end: ``loopcore.report.collect`` over the folder, i.e. what ``loopcore analyse``
    does without rendering: format detection, adapters, taxonomy, hashing, burn analysis.

Then, per run, the stages of (b) one by one (load, encode, kernel, findings), so the output says
where the time beyond the parse goes.

Both run in this process, interleaved, and the medians of ``--runs`` runs are compared. The bar
(the performance table of the design): end-to-end <= 1.25x parse-only, i.e. the analysis adds at
most a quarter of what the parse costs. Wall and CPU time are both printed; the bar is judged on CPU time because the work is
single-threaded and a shared machine makes wall time count waits for a core. Each end-to-end run is checked against the first (same traces, steps and totals) and for
0 <= wasted <= total, so a fast wrong answer cannot pass. When the ratio misses the bar a cProfile
of one end-to-end run is printed (or always with ``--profile``). Exit code 0 = bar met, 1 = missed,
2 = traces absent.

``--callgrind`` also counts, under valgrind's callgrind, the instructions of one parse-only run and
of one end-to-end run (each the difference of a child process doing two runs and one doing one,
after the same warm-up): a ratio that does not move with the machine's load, for comparing
changes on a shared machine. The bar itself stays judged on CPU time. ``--cache-sim`` adds
callgrind's cache simulation: instruction-cache (I1) and data-cache (D1) misses of both sides,
where much of the analysis's time beyond its instructions goes (its code is large and runs a
little of everything for every step, while the parse is a few tight loops).
"""

from __future__ import annotations

import argparse
import cProfile
import gzip
import io
import os
import pathlib
import platform
import pstats
import re
import shutil
import statistics
import subprocess
import sys
import time

import orjson

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _env import cpu_model  # noqa: E402  (benchmarks/_env.py)

import loopcore  # noqa: E402
from loopcore.report import collect
from loopcore.taxonomy.shell import classify_shell, classify_shell_access

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_TRACES = ROOT.parent / "shared" / "traces"
BAR = 1.25


def parse_only(files: list[str]) -> int:
    """Read, gunzip and orjson-parse every file; returns the number of JSON documents parsed.

    The cyclic garbage collector is paused as ``analyse`` pauses it (``report.bulk_gc``): a
    floor that paid for collections the analysis skips would flatter the ratio (by about a
    tenth of the parse on ../shared/traces)."""
    from loopcore.report import bulk_gc

    with bulk_gc():
        return _parse_files(files)


def _parse_files(files: list[str]) -> int:
    docs = 0
    for path in files:
        with open(path, "rb") as fh:
            data = fh.read()
        if path.endswith(".gz"):
            data = gzip.decompress(data)
        name = path[:-3] if path.endswith(".gz") else path
        if name.endswith(".jsonl"):
            for line in data.splitlines():
                if line.strip():
                    orjson.loads(line)
                    docs += 1
        else:
            orjson.loads(data)
            docs += 1
    return docs


def end_to_end(traces: str) -> tuple[int, int, int, int]:
    """``collect`` over the folder; returns (traces, steps, total tokens, wasted tokens).

    The shell classifier's per-command caches are emptied first: a real ``loopcore analyse`` runs
    in a fresh process, so every timed run must classify every command again."""
    classify_shell.cache_clear()
    classify_shell_access.cache_clear()
    rep = collect([traces], keep_going=True)
    return len(rep.traces), rep.steps, rep.overall.total_tokens, rep.overall.wasted_tokens


def phases(traces: str) -> dict[str, float]:
    """CPU seconds of each stage of one ``collect``, run stage by stage on the same traces:
    loading (read, gunzip, parse and the adapters), encoding the steps into columns, the burn
    kernel, and building the Findings of the report."""
    from loopcore.burn import _report
    from loopcore.encoded import analyse_encoded, encode
    from loopcore.report import bulk_gc, iter_traces

    classify_shell.cache_clear()
    classify_shell_access.cache_clear()
    with bulk_gc():
        c0 = time.process_time()
        traces_ = [t for _, t in iter_traces([traces], keep_going=True, stats=_load_stats())]
        c1 = time.process_time()
        enc = encode(traces_)
        c2 = time.process_time()
        res = analyse_encoded(enc)
        c3 = time.process_time()
        codes, of, charge = res.finding.tolist(), res.of_step.tolist(), res.charge.tolist()
        totals = res.total_tokens.tolist()
        for k, t in enumerate(traces_):
            a, b = int(enc.trace_offsets[k]), int(enc.trace_offsets[k + 1])
            _report(t, codes[a:b], of[a:b], charge[a:b], totals[k])
        c4 = time.process_time()
    return {"load": c1 - c0, "encode": c2 - c1, "kernel": c3 - c2, "findings": c4 - c3}


def _cg_child(traces: str, mode: str, rounds: int) -> None:
    """Run under callgrind by callgrind_ir(): warm up both sides, then *rounds* runs of *mode*."""
    warm = collect([traces], keep_going=True)
    files = sorted({t.source.split("#", 1)[0] for t in warm.traces if t.source})
    parse_only(files)
    for _ in range(rounds):
        if mode == "parse":
            parse_only(files)
        else:
            end_to_end(traces)


_CG_EVENTS = ("Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw")


def callgrind_ir(traces: str, cache_sim: bool = False) -> dict[str, dict[str, int]] | None:
    """Instructions (and with *cache_sim* the cache misses) of one parse-only run and of one
    end-to-end run under callgrind, as ``{side: {event: count}}``, or None without valgrind:
    for each side, a child doing two runs minus one doing one."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return None
    # one BLAS thread, as the CLI runs (callgrind runs threads one at a time, so an idle pool's
    # spinning would be counted as work); the same hash seed for the same start-up everywhere
    env = {**os.environ, "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1"}
    jobs = {}
    for mode in ("parse", "e2e"):
        for n in (1, 2):
            jobs[mode, n] = subprocess.Popen(
                [
                    valgrind,
                    "--tool=callgrind",
                    "--callgrind-out-file=/dev/null",
                    *(["--cache-sim=yes"] if cache_sim else []),
                    sys.executable,
                    os.path.abspath(__file__),
                    "--cg-child",
                    traces,
                    mode,
                    str(n),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
    counts = {}
    for key, proc in jobs.items():
        _, err = proc.communicate(timeout=3600)
        m = re.search(r"Collected\s*:\s*([\d ]+)", err)
        if proc.returncode != 0 or m is None:
            raise RuntimeError(f"callgrind run failed: {err[-500:]}")
        counts[key] = dict(zip(_CG_EVENTS, map(int, m.group(1).split())))
    return {
        mode: {ev: counts[mode, 2][ev] - counts[mode, 1][ev] for ev in counts[mode, 1]}
        for mode in ("parse", "e2e")
    }


def _load_stats():
    from loopcore.adapters import LoadStats

    return LoadStats()


def _timed(fn, *args) -> tuple[float, float, object]:
    """(wall seconds, CPU seconds of this process, result) of one call."""
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn(*args)
    return time.perf_counter() - w0, time.process_time() - c0, out


def by_folder(traces: str, files: list[str], runs: int) -> None:
    """Each top-level entry of *traces* timed on its own, parse-only and end to end interleaved
    as in the main table: which folders the bar is won or lost on. The last column is what a
    folder's analysis may take for the whole to meet the bar while every other folder's analysis
    takes what it takes now (0 when the others alone exceed it)."""
    root = os.path.abspath(traces)
    groups: dict[str, list[str]] = {}
    for f in files:
        top = os.path.relpath(os.path.abspath(f), root).split(os.sep, 1)[0]
        groups.setdefault(top, []).append(f)
    timed: dict[str, tuple[float, float, int]] = {}
    for top, group in sorted(groups.items()):
        path = os.path.join(root, top)
        steps = end_to_end(path)[1]  # a warm-up, and the folder's steps
        parse_cpu, e2e_cpu = [], []
        for _ in range(runs):
            parse_cpu.append(_timed(parse_only, group)[1])
            e2e_cpu.append(_timed(end_to_end, path)[1])
        timed[top] = (statistics.median(parse_cpu), statistics.median(e2e_cpu), steps)
    parse_all = sum(p for p, _, _ in timed.values())
    extra_all = sum(e - p for p, e, _ in timed.values())
    print("by folder (CPU s, medians of interleaved runs, each folder on its own):")
    print(
        f"| {'folder':<26} | {'files':>5} | {'steps':>6} | {'parse s':>7} | {'analyse s':>9} "
        f"| {'ratio':>6} | {'of the parse':>12} | {'its analysis may take':>21} |"
    )
    print(f"|{'-' * 28}|{'-' * 7}|{'-' * 8}|{'-' * 9}|{'-' * 11}|{'-' * 8}|{'-' * 14}|{'-' * 23}|")

    def per(a: float, b: float) -> float:
        # a folder too small for the CPU clock to see reads as infinitely slow, not a crash
        return a / b if b > 0 else float("inf")

    for top, (p, e, steps) in timed.items():
        allowed = max((BAR - 1) * parse_all - (extra_all - (e - p)), 0.0)
        print(
            f"| {top:<26} | {len(groups[top]):>5} | {steps:>6,} | {p:>7.3f} | {e:>9.3f} "
            f"| {per(e, p):>5.2f}x | {per(p, parse_all) * 100:>11.0f}% "
            f"| {allowed:>11.3f} s ({per(allowed, p):.2f}x) |"
        )
    print(
        f"all folders: parse {parse_all:.3f} s, analysis beyond it {extra_all:.3f} s "
        f"({per(parse_all + extra_all, parse_all):.2f}x); "
        f"the bar leaves {(BAR - 1) * parse_all:.3f} s"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--traces", default=str(DEFAULT_TRACES), help="folder of traces (default ../shared/traces)"
    )
    ap.add_argument("--runs", type=int, default=7, help="timed runs of each side (median reported)")
    ap.add_argument(
        "--profile", action="store_true", help="always print a cProfile of one end-to-end run"
    )
    ap.add_argument(
        "--by-folder",
        action="store_true",
        help="also time each top-level folder of --traces on its own (its ratio and its share)",
    )
    ap.add_argument(
        "--callgrind",
        action="store_true",
        help="also count both sides' instructions under callgrind (load-independent)",
    )
    ap.add_argument(
        "--cache-sim",
        action="store_true",
        help="with --callgrind: also simulate the caches (instruction and data cache misses)",
    )
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--cg-child"]:
        _cg_child(argv[1], argv[2], int(argv[3]))
        return 0
    args = ap.parse_args(argv)

    traces = args.traces
    if not os.path.isdir(traces):
        print(
            f"bench_ingest: skipped: no traces at {traces} (they live beside the checkout in ../shared/traces)"
        )
        return 2

    # Warm-up run (imports, page cache) that also tells which files analyse actually reads, so
    # both sides touch exactly the same bytes.
    warm = collect([traces], keep_going=True)
    # "path#index" names one of several traces in a file (tau-bench): the file is path.
    files = sorted({t.source.split("#", 1)[0] for t in warm.traces if t.source})
    raw_bytes = 0
    for f in files:
        with open(f, "rb") as fh:
            data = fh.read()
        raw_bytes += len(gzip.decompress(data)) if f.endswith(".gz") else len(data)
    gz_bytes = sum(os.path.getsize(f) for f in files)
    expected = (len(warm.traces), warm.steps, warm.overall.total_tokens, warm.overall.wasted_tokens)
    parse_only(files)

    parse_wall, parse_cpu, e2e_wall, e2e_cpu = [], [], [], []
    stages: dict[str, list[float]] = {}
    ok = warm.overall.wasted_tokens <= warm.overall.total_tokens and all(
        0 <= t.report.wasted_tokens <= t.report.total_tokens for t in warm.traces
    )
    for _ in range(args.runs):
        w, c, _docs = _timed(parse_only, files)
        parse_wall.append(w)
        parse_cpu.append(c)
        w, c, got = _timed(end_to_end, traces)
        e2e_wall.append(w)
        e2e_cpu.append(c)
        ok = ok and got == expected
        for name, secs in phases(traces).items():
            stages.setdefault(name, []).append(secs)
    p, e = statistics.median(parse_wall), statistics.median(e2e_wall)
    pc, ec = statistics.median(parse_cpu), statistics.median(e2e_cpu)
    # The bar is judged on CPU time: both sides are single-threaded, and on a shared machine
    # CPU time is what the work costs, while wall time also counts waiting for a core.
    ratio = ec / pc if pc else float("inf")
    n_traces, n_steps, total, wasted = expected
    mb = raw_bytes / 1e6

    print(
        "loopcore ingest benchmark: analyse (load + burn analysis) vs read + gunzip + orjson.loads"
    )
    print(f"command:     {' '.join([os.path.basename(sys.executable), *sys.argv])}")
    print(
        f"environment: Python {platform.python_version()} ({platform.python_implementation()}), "
        f"{platform.system()} {platform.machine()}, CPU {cpu_model()}, {os.cpu_count()} cores visible, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    print(
        f"             loopcore {loopcore.__version__} core={loopcore.implementation()}, "
        f"orjson {orjson.__version__}, runs={args.runs} interleaved (medians)"
    )
    print(
        f"input:       {len(files)} files with traces ({len(warm.skipped)} skipped, {len(warm.ignored)} ignored), "
        f"{n_traces:,} traces, {n_steps:,} steps, {mb:.1f} MB uncompressed ({gz_bytes / 1e6:.1f} MB gzip)"
    )
    print(
        f"check:       {'ok' if ok else 'FAILED'}: identical traces/steps/totals on every run, "
        f"0 <= wasted <= total ({wasted:,} of {total:,} tokens wasted, {wasted / total * 100 if total else 0:.1f}%)"
    )
    print()
    print(
        f"| {'work':<28} | {'wall s':>7} | {'CPU s':>7} | {'files/s':>8} | {'steps/s':>10} | {'MB/s':>7} | "
        f"{'ratio (CPU)':>11} |"
    )
    print(f"|{'-' * 30}|{'-' * 9}|{'-' * 9}|{'-' * 10}|{'-' * 12}|{'-' * 9}|{'-' * 13}|")
    for label, t, c in (("parse only (orjson)", p, pc), ("loopcore analyse, end to end", e, ec)):
        print(
            f"| {label:<28} | {t:>7.3f} | {c:>7.3f} | {len(files) / c:>8.1f} | {n_steps / c:>10,.0f} | "
            f"{mb / c:>7.1f} | {c / pc:>10.2f}x |"
        )
    st = {name: statistics.median(v) for name, v in stages.items()}
    print()
    print("where the time goes (CPU s, medians of the same runs, each stage timed on its own):")
    rows = (
        ("read + gunzip + orjson.loads (the parse-only work)", pc),
        ("adapters (load minus parse: walking messages, Steps)", st["load"] - pc),
        ("encode (Steps to columns: hashing, interning)", st["encode"]),
        ("burn kernel", st["kernel"]),
        ("findings and report objects", st["findings"]),
    )
    for label, secs in rows:
        print(f"  {label:<56} {secs:>7.3f}  {secs / pc:>5.2f}x parse")
    verdict = "PASS" if ratio <= BAR and ok else "FAIL"
    print()
    print(f"rates are per CPU second; wall-clock ratio {e / p:.2f}")
    print(f"end-to-end / parse-only = {ratio:.2f} (CPU time; bar <= {BAR:.2f}): {verdict}")
    if args.by_folder:
        print()
        by_folder(traces, files, args.runs)
    if args.callgrind:
        cg = callgrind_ir(traces, args.cache_sim)
        print()
        if cg is None:
            print("callgrind: skipped (valgrind is not installed)")
        else:
            for ev, label in (
                ("Ir", "instructions"),
                ("I1mr", "I1 misses"),
                ("D1mr", "D1 read misses"),
            ):
                if ev not in cg["parse"]:
                    continue
                a, b = cg["parse"][ev], cg["e2e"][ev]
                print(
                    f"callgrind {label}: parse only {a:,}, end to end {b:,} "
                    f"({b / a:.2f}x; the analysis adds {b - a:,})"
                )

    if args.profile or ratio > BAR:
        prof = cProfile.Profile()
        prof.enable()
        end_to_end(traces)
        prof.disable()
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(20)
        print()
        print("cProfile of one end-to-end run (top 20 by own time):")
        print(out.getvalue())
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
