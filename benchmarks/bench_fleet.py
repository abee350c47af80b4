"""Fleet benchmark: the same corpus on a Dask LocalCluster of 1 and of 2 workers.

    python benchmarks/bench_fleet.py [--steps 10000000] [--corpus DIR] [--repeats 1]

Writes (or reuses, with --corpus) a generated corpus in real formats (tools/make_corpus.py:
mini-swe-agent 2.x trajectories and loopcore JSONL), then analyses it on a LocalCluster of one
worker and of two (one thread each), alternating, and prints steps/s, the scaling and each
worker's peak RSS. Every run's report must equal the first one byte for byte (the correctness
check printed beside the time). Bar (README.md, Benchmarks): 2 workers >= 1.8x one worker, identical report.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import pathlib
import shutil
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tools"))
sys.path.insert(0, str(HERE.parent / "src"))

from _env import environment, print_table  # noqa: E402
from make_corpus import write_corpus  # noqa: E402

BAR = 1.8


def _peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def run(paths: list[str], workers: int) -> tuple[float, int, str, list[float]]:
    import distributed

    from loopcore import fleet
    from loopcore.report import to_json

    with (
        distributed.LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",
            silence_logs=logging.ERROR,
        ) as lc,
        distributed.Client(lc) as client,
    ):
        client.run(lambda: None)  # workers up and importable before the clock starts
        t0 = time.perf_counter()
        report, _ = fleet.analyse(paths, client=client)
        seconds = time.perf_counter() - t0
        rss = sorted(client.run(_peak_rss_mb).values())
    digest = hashlib.sha256(to_json(report)).hexdigest()[:16]
    return seconds, report.steps, digest, rss


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=10_000_000)
    ap.add_argument("--corpus", help="reuse (or create) the corpus in this folder")
    ap.add_argument("--repeats", type=int, default=1)
    a = ap.parse_args()
    tmp = None
    if a.corpus:
        root = pathlib.Path(a.corpus)
        if not root.exists() or not any(root.rglob("*.json*")):
            print(f"writing a {a.steps:,}-step corpus to {root} ...", flush=True)
            print(write_corpus(root, a.steps))
    else:
        tmp = tempfile.mkdtemp(prefix="loopcore-fleet-")
        root = pathlib.Path(tmp)
        t0 = time.perf_counter()
        print(f"writing a {a.steps:,}-step corpus to {root} ...", flush=True)
        print(write_corpus(root, a.steps), f"in {time.perf_counter() - t0:.0f}s", flush=True)
    size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    try:
        print(environment(f"python benchmarks/bench_fleet.py --steps {a.steps}"))
        print(f"corpus: {root} ({size / 1e9:.2f} GB)")
        rows, first, rates = [], None, {1: [], 2: []}
        for _rep in range(a.repeats):
            for workers in (1, 2):
                seconds, steps, digest, rss = run([str(root)], workers)
                first = first or digest
                rates[workers].append(steps / seconds)
                rows.append(
                    (
                        f"{workers} worker{'s' if workers > 1 else ''}",
                        f"{steps:,}",
                        f"{seconds:.1f}",
                        f"{steps / seconds:,.0f}",
                        ", ".join(f"{r:.0f}" for r in rss),
                        "same" if digest == first else f"DIFFERENT ({digest})",
                    )
                )
        print_table(
            ("cluster", "steps", "seconds", "steps/s", "peak RSS per worker (MB)", "report"), rows
        )
        best1, best2 = max(rates[1]), max(rates[2])
        scale = best2 / best1
        print(
            f"scaling, 2 workers / 1 worker: {scale:.2f}x (bar >= {BAR}x: {'met' if scale >= BAR else 'NOT met'})"
        )
        per_worker = best1
        print(
            f"estimate for 10^9 steps: {1e9 / per_worker / 3600:.1f} worker-hours at {per_worker:,.0f} steps/s a "
            f"worker; on 100 workers about {1e9 / per_worker / 100 / 60:.0f} minutes"
        )
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
