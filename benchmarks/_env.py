"""Shared benchmark helpers: environment line, timing, table printing."""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment(command: str) -> str:
    return (
        f"Python {platform.python_version()} ({platform.python_implementation()}), "
        f"{cpu_model()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}\n"
        f"command: {command}"
    )


def median_ns_per_op(fn, ops_per_call: int, repeats: int = 9, min_time: float = 0.02) -> float:
    """Median over *repeats* batches of the time per op; each batch runs >= min_time seconds."""
    calls = 1
    while True:  # calibrate the batch size
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        dt = time.perf_counter_ns() - t0
        if dt >= min_time * 1e9 or calls >= 1 << 20:
            break
        calls *= 2
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter_ns() - t0) / (calls * ops_per_call))
    return statistics.median(samples)


def print_table(headers, rows) -> None:
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(headers)]
    line = "| " + " | ".join(str(h).ljust(w) for h, w in zip(headers, widths)) + " |"
    print(line)
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print("| " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths)) + " |")
    sys.stdout.flush()


def interleaved_ns_per_op(
    fns: dict,
    ops_per_call: int,
    repeats: int = 11,
    min_time: float = 0.01,
    clock=time.perf_counter_ns,
) -> dict:
    """Median time per op of each callable, measured in interleaved rounds.

    On a shared, noisy machine, load drifts over seconds; running one batch of every
    candidate per round exposes each to the same drift, so their ratios stay honest. *clock*
    is the wall clock by default; ``time.thread_time_ns`` counts CPU time only.
    """
    calls = {}
    for name, fn in fns.items():
        n = 1
        while True:
            t0 = clock()
            for _ in range(n):
                fn()
            if clock() - t0 >= min_time * 1e9 or n >= 1 << 20:
                break
            n *= 2
        calls[name] = n
    samples: dict = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            n = calls[name]
            t0 = clock()
            for _ in range(n):
                fn()
            samples[name].append((clock() - t0) / (n * ops_per_call))
    return {name: statistics.median(v) for name, v in samples.items()}
