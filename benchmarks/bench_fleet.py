"""Fleet benchmark: the same corpus on a Dask LocalCluster of 1 and of 2 workers.

    python benchmarks/bench_fleet.py [--steps 10000000] [--corpus DIR] [--repeats 1] [--quick]

Writes (or reuses, with --corpus) a generated corpus in real formats (tools/make_corpus.py:
mini-swe-agent 2.x trajectories, one session a file, and loopcore JSONL files of
``--jsonl-steps`` steps each, which the fleet path cuts into byte ranges; a million steps
written once and hard-linked ``--copies`` times, as the generator writes 30 k steps/s), then
analyses it on a
LocalCluster of one worker and of two (one thread each, worker processes), alternating, and
prints for each run: steps/s (wall), the CPU seconds of every process (each worker; this
process's main thread, which plans, rebuilds the results and reduces them; and its event
loop, which runs the scheduler and the nannies: what competes with the workers for the
cores), each worker's peak RSS, the tasks and the largest, the load average before and after,
and whether the report equals the first run's byte for byte. Only ``fleet.analyse`` is timed:
the cluster's start-up and a warm-up run (workers and client) come before the clock.
``--quick`` is a 300k-step run with small ranges (a minute). ``--check-serial`` also compares
the report with one process's (``report.collect``; slow on large corpora).

On a shared machine (load average above the cores) the wall times include waiting for a
core: judge by the CPU seconds per step of each process and by the client's and scheduler's
share, which the script prints beside the wall-time ratio.

Bar (docs/fleet.md): 2 workers >= 1.8x one worker (wall), identical report. Exit status 0 when
the reports are identical and the bar is met, 1 otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
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


def _worker_usage() -> tuple[float, float]:
    """(CPU seconds, peak RSS in MB) of the calling process (run on each worker). The peak is
    the process's own high-water mark (VmHWM): ``ru_maxrss`` would also count the parent the
    worker was forked from before it exec'd (Linux keeps it across execve)."""
    import resource

    ru = resource.getrusage(resource.RUSAGE_SELF)
    peak = ru.ru_maxrss / 1024.0
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    peak = int(line.split()[1]) / 1024.0
    except OSError:  # pragma: no cover - not Linux
        pass
    return ru.ru_utime + ru.ru_stime, peak


def _warm() -> int:
    """Import and run once what a task runs (the bundled example through a task), so the
    clock times neither imports nor first-use set-up (nor, under PYTHONDONTWRITEBYTECODE,
    compiling the sources in every new worker)."""
    from loopcore import fleet
    from loopcore.report import EXAMPLE_TRACE

    unit = fleet.units([str(EXAMPLE_TRACE)])[0]
    fleet._run_task_packed([unit], "auto", False, None)
    return os.getpid()


#: Dask's own sampling and ticking, slowed down for a throughput run: the worker's statistical
#: profiler walks the task thread's stack every 10 ms, the system monitors poll psutil twice a
#: second, each worker's memory monitor reads /proc ten times a second, the event loops tick
#: every 20 ms and the scheduler looks for work to steal every 100 ms (the tasks are planned
#: to balance: ``fleet._tasks``, so stealing has nothing to do). Idle, two workers and the
#: client with its scheduler cost 1.1% of a core per worker and 2.2% for the client on this
#: machine with Dask's defaults except the first four below, 0.33% and 0.78% with all of them
#: (docs/fleet.md recommends the same).
DASK_CONFIG = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.system-monitor.interval": "10s",
    "distributed.admin.tick.interval": "1s",
    "distributed.scheduler.work-stealing-interval": "1s",
    "distributed.worker.memory.monitor-interval": "1s",
    "distributed.scheduler.work-stealing": False,
}


def run(paths: list[str], workers: int, range_bytes: int, task_bytes: int) -> dict:
    import dask
    import distributed

    from loopcore import fleet
    from loopcore.report import EXAMPLE_TRACE, to_json

    tasks: list[int] = []
    real_tasks = fleet._tasks

    def spy(pieces, sizes, w, tb):  # records the task sizes the run used
        out = real_tasks(pieces, sizes, w, tb)
        tasks.extend(sum(sizes[i] for i in t) for t in out)
        return out

    try:
        with (
            dask.config.set(DASK_CONFIG),
            distributed.LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=":0",
                # a worker's heartbeat racing the shutdown logs a harmless traceback at ERROR
                silence_logs=logging.CRITICAL,
            ) as lc,
            distributed.Client(lc) as client,
        ):
            client.wait_for_workers(workers)
            client.run(_warm)  # workers up and importable before the clock starts
            # and this process too: a run of the bundled example through the cluster, so
            # the first timed run does not pay the client's imports and first-use set-up
            fleet.analyse([str(EXAMPLE_TRACE)], client=client)
            fleet._tasks = spy
            before = client.run(_worker_usage)
            load0 = os.getloadavg()[0]
            # Timed: fleet.analyse alone. The cluster's start-up, the workers' warm-up and
            # writing the report's JSON are outside the clock (and said so in the output).
            c0, m0, t0 = time.process_time(), time.thread_time(), time.perf_counter()
            report, _ = fleet.analyse(
                paths, client=client, range_bytes=range_bytes, task_bytes=task_bytes
            )
            seconds = time.perf_counter() - t0
            client_cpu = time.process_time() - c0
            main_cpu = time.thread_time() - m0
            load1 = os.getloadavg()[0]
            after = client.run(_worker_usage)
    finally:
        fleet._tasks = real_tasks
    worker_cpu = sum(after[w][0] - before[w][0] for w in after)
    return {
        "seconds": seconds,
        "steps": report.steps,
        "digest": hashlib.sha256(to_json(report)).hexdigest()[:16],
        "rss": sorted(v[1] for v in after.values()),
        "rss0": sorted(v[1] for v in before.values()),
        "worker_cpu": worker_cpu,
        "worker_cpus": [after[w][0] - before[w][0] for w in sorted(after)],
        "client_cpu": client_cpu,
        # this process's main thread: planning, unpickling and rebuilding the results, the
        # reduction; the rest of client_cpu is the event loop (the scheduler, the client's
        # and the nannies' comms)
        "main_cpu": main_cpu,
        "load": (load0, load1),
        "tasks": len(tasks),
        "largest_task": max(tasks) if tasks else 0,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=10_000_000)
    ap.add_argument(
        "--jsonl-steps", type=int, default=500_000, help="steps per loopcore JSONL file"
    )
    ap.add_argument("--corpus", help="reuse (or create) the corpus in this folder")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--range-mb", type=float, default=16.0, help="byte range size (MB)")
    ap.add_argument(
        "--task-mb", type=float, default=None, help="largest task (MB; default fleet.TASK_BYTES)"
    )
    ap.add_argument(
        "--copies",
        type=int,
        default=0,
        help="write steps/COPIES steps and hard-link them COPIES times (default: one copy per "
        "million steps; the generator is slow, the analysis is the same on every copy)",
    )
    ap.add_argument("--quick", action="store_true", help="300k steps, small ranges")
    ap.add_argument("--check-serial", action="store_true", help="compare with one process too")
    a = ap.parse_args(argv)
    if a.quick:
        a.steps, a.jsonl_steps, a.range_mb, a.check_serial = 300_000, 50_000, 4.0, True
    tmp = None
    if a.corpus:
        root = pathlib.Path(a.corpus)
    else:
        tmp = tempfile.mkdtemp(prefix="loopcore-fleet-")
        root = pathlib.Path(tmp)
    if not root.exists() or not any(root.rglob("*.json*")):
        t0 = time.perf_counter()
        copies = max(1, a.copies if a.copies else a.steps // 1_000_000)
        print(
            f"writing a {a.steps // copies:,}-step corpus to {root / 'base'}"
            + (f", hard-linked {copies} times" if copies > 1 else "")
            + " ...",
            flush=True,
        )
        made = write_corpus(root / "base", a.steps // copies, jsonl_steps=a.jsonl_steps)
        for k in range(1, copies):  # the same files again: another k-th of the traces
            for p in sorted((root / "base").rglob("*")):
                q = root / f"copy-{k}" / p.relative_to(root / "base")
                if p.is_dir():
                    q.mkdir(parents=True, exist_ok=True)
                else:
                    q.parent.mkdir(parents=True, exist_ok=True)
                    os.link(p, q)
        print(made, f"x {copies} in {time.perf_counter() - t0:.0f}s", flush=True)
    size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    big = max(p.stat().st_size for p in root.rglob("*") if p.is_file())
    from loopcore import fleet

    if a.task_mb is None:
        a.task_mb = fleet.TASK_BYTES / (1 << 20)
    range_bytes, task_bytes = int(a.range_mb * (1 << 20)), int(a.task_mb * (1 << 20))
    ok = True
    try:
        cmd = "python benchmarks/bench_fleet.py " + " ".join(
            argv if argv is not None else sys.argv[1:]
        )
        print(environment(cmd.strip()))
        print(
            f"corpus: {root} ({size / 1e9:.2f} GB, largest file {big / 1e6:.0f} MB; "
            f"ranges of {a.range_mb:g} MB, tasks up to {a.task_mb:g} MB)"
        )
        print(
            "timed: fleet.analyse alone, 1 and 2 workers alternating on the same corpus "
            "(cluster start-up, worker warm-up and the report's JSON excluded); CPU seconds "
            "of every process: the workers, and this one (the client's main thread, and its "
            "event loop, which runs the scheduler and the nannies)"
        )
        rows, first, runs = [], None, {1: [], 2: []}
        for _rep in range(a.repeats):
            for workers in (1, 2):
                r = run([str(root)], workers, range_bytes, task_bytes)
                first = first or r["digest"]
                same = r["digest"] == first
                ok &= same
                runs[workers].append(r)
                loop = r["client_cpu"] - r["main_cpu"]
                rows.append(
                    (
                        f"{workers} worker{'s' if workers > 1 else ''}",
                        f"{r['steps']:,}",
                        f"{r['seconds']:.2f}",
                        f"{r['steps'] / r['seconds']:,.0f}",
                        " + ".join(f"{x:.2f}" for x in r["worker_cpus"]),
                        f"{r['steps'] / r['worker_cpu']:,.0f}",
                        f"{r['main_cpu']:.2f} + {loop:.2f} "
                        f"({r['client_cpu'] / r['worker_cpu']:.1%})",
                        ", ".join(f"{x:.0f}" for x in r["rss"])
                        + f" ({', '.join(f'{x:.0f}' for x in r['rss0'])})",
                        f"{r['tasks']} / {r['largest_task'] / 1e6:.1f} MB",
                        f"{r['load'][0]:.1f} -> {r['load'][1]:.1f}",
                        "same" if same else f"DIFFERENT ({r['digest']})",
                    )
                )
        print_table(
            (
                "cluster",
                "steps",
                "wall s",
                "steps/s",
                "worker CPU s",
                "steps/worker-CPU-s",
                "client main + loop CPU s (of workers')",
                "peak RSS/worker MB (at start)",
                "tasks / largest",
                "load (1 min)",
                "report",
            ),
            rows,
        )
        # Each 2-worker run against the 1-worker run just before it (same machine state as
        # far as alternating can make it), and the best of each.
        pairs = [r1["seconds"] / r2["seconds"] for r1, r2 in zip(runs[1], runs[2])]
        best1 = max(r["steps"] / r["seconds"] for r in runs[1])
        best2 = max(r["steps"] / r["seconds"] for r in runs[2])
        scale = best2 / best1
        loads = [x for rs in runs.values() for r in rs for x in r["load"]]
        print(
            f"scaling, 2 workers / 1 worker (best wall of {a.repeats}): {scale:.2f}x "
            f"(bar >= {BAR}x: {'met' if scale >= BAR else 'NOT met'}); per alternating pair: "
            + ", ".join(f"{x:.2f}x" for x in pairs)
            + f"; load average {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} cores"
            + (" (above 2: the wall times include waiting for a core)" if max(loads) > 2 else "")
        )
        # What the wall ratio would be on two idle cores: one worker with a core to itself
        # (the client on the other), against the work of the two workers plus this
        # process's (client and scheduler) shared by two cores.
        cpu_pairs = [
            r1["worker_cpu"] / max((r2["worker_cpu"] + r2["client_cpu"]) / 2, 1e-9)
            for r1, r2 in zip(runs[1], runs[2])
        ]
        over = [r["client_cpu"] / r["worker_cpu"] for rs in runs.values() for r in rs]
        grow = [r2["worker_cpu"] / r1["worker_cpu"] - 1 for r1, r2 in zip(runs[1], runs[2])]
        print(
            "  from CPU time (two idle cores): "
            + ", ".join(f"{x:.2f}x" for x in cpu_pairs)
            + f"; client + scheduler {min(over):.1%}-{max(over):.1%} of the workers' CPU; "
            "the workers' CPU, 2 against 1: " + ", ".join(f"{x:+.1%}" for x in grow)
        )
        print(
            f"  peak RSS per worker {max(r['rss'][-1] for rs in runs.values() for r in rs):.0f} MB "
            f"(after start-up {max(r['rss0'][-1] for rs in runs.values() for r in rs):.0f} MB) "
            f"for a {size / 1e9:.2f} GB corpus: bounded by the largest task, not the corpus"
        )
        per_worker = max(r["steps"] / r["worker_cpu"] for rs in runs.values() for r in rs)
        print(
            f"estimate for 10^9 steps: {1e9 / per_worker / 3600:.1f} worker-hours at "
            f"{per_worker:,.0f} steps per worker-CPU-second; on 100 workers about "
            f"{1e9 / per_worker / 100 / 60:.0f} minutes"
        )
        if a.check_serial:
            from loopcore.report import collect, to_json

            t0 = time.perf_counter()
            serial = hashlib.sha256(to_json(collect([str(root)]))).hexdigest()[:16]
            same = serial == first
            ok &= same
            print(
                f"check: the report equals one process's (report.collect, "
                f"{time.perf_counter() - t0:.0f}s): {same}"
            )
        ok &= scale >= BAR
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
