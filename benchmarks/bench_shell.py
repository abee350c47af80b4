"""The shell classifier, compiled twin vs the pure twin, on every distinct shell command of real traces.

    python benchmarks/bench_shell.py [--traces DIR] [--repeats N]

The commands are the ones ``loopcore analyse`` classifies: the traces under ``--traces``
(default ../shared/traces) are loaded with ``loopcore.adapters.load`` while the taxonomy's
``classify_shell`` is wrapped to record each command it is given; duplicates are dropped. Each
twin's own, uncached ``classify_shell`` then classifies every command once per run; the twins
alternate run by run so both see the same load on a shared machine, and the ratio is the median
of the per-run ratios. Times are the CPU time of the benchmarking thread (``time.thread_time``):
the work is single-threaded, and wall time on a shared machine counts waits for a core. Both twins' answers are compared on every command first (a fast wrong
answer does not count). The design sets no bar of its own for the classifier: it
serves the ingest bar (benchmarks/bench_ingest.py). Exit code 0 = identical answers, 1 = answers
differ, 2 = no traces or no compiled core.
"""

from __future__ import annotations

import argparse
import gc
import os
import pathlib
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _env import cpu_model  # noqa: E402  (benchmarks/_env.py)

from loopcore import _native_flag  # noqa: E402
from loopcore.adapters import load  # noqa: E402
from loopcore.taxonomy import profiles  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_TRACES = ROOT.parent / "shared" / "traces"


def shell_commands(traces: pathlib.Path) -> list[str]:
    """Every distinct command string the taxonomy classifies while the traces load, in order."""
    seen: dict[str, None] = {}
    original = profiles.classify_shell

    def recording(command):
        seen[command] = None
        return original(command)

    profiles.classify_shell = recording  # shell_rule looks the name up at each call
    try:
        for _ in load(traces):
            pass
    finally:
        profiles.classify_shell = original
    return list(seen)


def run_once(classify, commands: list[str]) -> float:
    """CPU seconds of this thread to classify every command once."""
    t0 = time.thread_time()
    for command in commands:
        classify(command)
    return time.thread_time() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", type=pathlib.Path, default=DEFAULT_TRACES)
    ap.add_argument("--repeats", type=int, default=9)
    opts = ap.parse_args(argv)
    if not opts.traces.is_dir():
        print(f"no traces at {opts.traces}")
        return 2
    if _native_flag.NO_EXTENSIONS:
        print("LOOPCORE_NO_EXTENSIONS is set: there is no compiled twin to compare")
        return 2
    twins = {impl: _native_flag.load_twin("shell", impl).classify_shell for impl in ("c", "py")}
    commands = shell_commands(opts.traces)
    chars = sum(map(len, commands))

    answers = {impl: [f(c) for c in commands] for impl, f in twins.items()}
    differ = sum(a != b for a, b in zip(answers["c"], answers["py"]))
    kinds: dict[str, int] = {}
    for kind, _target in answers["py"]:
        kinds[kind] = kinds.get(kind, 0) + 1

    runs: dict[str, list[float]] = {impl: [] for impl in twins}
    gc.collect()
    for _ in range(opts.repeats):
        for impl, f in twins.items():
            runs[impl].append(run_once(f, commands))
    us = {impl: statistics.median(r) / len(commands) * 1e6 for impl, r in runs.items()}
    ratio = statistics.median(p / c for p, c in zip(runs["py"], runs["c"]))

    print(
        f"loopcore shell classifier benchmark: {len(commands)} distinct commands "
        f"({chars / len(commands):.0f} characters on average) from {opts.traces}"
    )
    print("kinds: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
    print(
        f"Python {platform.python_version()} ({platform.python_implementation()}), CPU: {cpu_model()}"
    )
    print(f"command: {sys.executable} {' '.join(sys.argv)}")
    if hasattr(os, "getloadavg"):
        print(
            f"load average at the end (1/5/15 min): {' / '.join(f'{x:.2f}' for x in os.getloadavg())}"
        )
    print(f"median of {opts.repeats} alternating runs per twin, uncached, thread CPU time:")
    print(f"  pure twin      {us['py']:8.2f} us/command")
    print(f"  compiled twin  {us['c']:8.2f} us/command")
    print(f"  ratio          {ratio:8.1f}x   (no bar of its own: it serves bench_ingest.py's)")
    print(
        f"  answers        {'identical' if not differ else f'{differ} DIFFER'} on all {len(commands)} commands"
    )
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
