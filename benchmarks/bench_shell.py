"""The shell classifier, compiled twin vs the pure twin, on every distinct shell command of real traces.

    python benchmarks/bench_shell.py [--traces DIR] [--repeats N] [--callgrind]

The commands are the ones ``loopcore analyse`` classifies: the traces under ``--traces``
(default ../shared/traces) are loaded with ``loopcore.adapters.load`` while the taxonomy's
``classify_shell`` is wrapped to record each command it is given; duplicates are dropped. Each
twin's own, uncached ``classify_shell`` then classifies every command once per run; the twins
alternate run by run so both see the same load on a shared machine, and the ratio is the median
of the per-run ratios. Times are the CPU time of the benchmarking thread (``time.thread_time``):
the work is single-threaded, and wall time on a shared machine counts waits for a core. Both twins' answers are compared on every command first (a fast wrong
answer does not count). Both entry points are timed: ``classify_shell`` (kind, target) and
``classify_shell_access`` (kind, target, reads, writes, no-op), the one ``loopcore analyse``
calls for each distinct command. ``--callgrind`` adds the compiled twin's instructions per
command under valgrind's callgrind (load never changes them): the difference of a run that
classifies every command twice and one that only loads them, so start-up and imports cancel
out. The design sets no bar of its own for the classifier: it serves the ingest bar
(benchmarks/bench_ingest.py). Exit code 0 = identical answers, 1 = answers differ, 2 = no traces
or no compiled core.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import pathlib
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
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
    originals = {
        name: getattr(profiles, name) for name in ("classify_shell", "classify_shell_access")
    }

    def recorder(original):
        def recording(command):
            seen[command] = None
            return original(command)

        return recording

    for name, original in originals.items():  # the shell rules look the names up at each call
        setattr(profiles, name, recorder(original))
    try:
        for _ in load(traces):
            pass
    finally:
        for name, original in originals.items():
            setattr(profiles, name, original)
    return list(seen)


def run_once(classify, commands: list[str]) -> float:
    """CPU seconds of this thread to classify every command once."""
    t0 = time.thread_time()
    for command in commands:
        classify(command)
    return time.thread_time() - t0


def _cg_child(commands_file: str, entry: str, rounds: int) -> None:
    """Run under callgrind by callgrind_ir(): load the commands, classify each *rounds* times."""
    twin = _native_flag.load_twin("shell", "c")
    classify = getattr(twin, entry)
    with open(commands_file, encoding="utf-8") as f:
        commands = json.load(f)
    for _ in range(rounds):
        for command in commands:
            classify(command)


def callgrind_ir(commands: list[str], entry: str, rounds: int = 2) -> float | None:
    """Instructions per command of the compiled twin's *entry* on *commands*, or None without
    valgrind: the difference of a run of *rounds* rounds and one of none, per command."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return None
    with tempfile.NamedTemporaryFile("w", suffix=".json", encoding="utf-8", delete=False) as f:
        json.dump(commands, f)
    counts = []
    try:
        for n in (0, rounds):
            out = subprocess.run(
                [
                    valgrind,
                    "--tool=callgrind",
                    "--callgrind-out-file=/dev/null",
                    sys.executable,
                    __file__,
                    "--cg-child",
                    f.name,
                    entry,
                    str(n),
                ],
                capture_output=True,
                text=True,
                timeout=1800,
                env={**os.environ, "PYTHONHASHSEED": "0"},  # the same start-up in both runs
            )
            m = re.search(r"Collected\s*:\s*(\d+)", out.stderr)
            if out.returncode != 0 or m is None:
                raise RuntimeError(f"callgrind run failed: {out.stderr[-500:]}")
            counts.append(int(m.group(1)))
    finally:
        os.unlink(f.name)
    return (counts[1] - counts[0]) / (rounds * len(commands))


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--cg-child"]:
        _cg_child(argv[1], argv[2], int(argv[3]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", type=pathlib.Path, default=DEFAULT_TRACES)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument(
        "--callgrind",
        action="store_true",
        help="also print the compiled twin's instructions per command under callgrind",
    )
    opts = ap.parse_args(argv)
    if not opts.traces.is_dir():
        print(f"no traces at {opts.traces}")
        return 2
    if _native_flag.NO_EXTENSIONS:
        print("LOOPCORE_NO_EXTENSIONS is set: there is no compiled twin to compare")
        return 2
    modules = {impl: _native_flag.load_twin("shell", impl) for impl in ("c", "py")}
    commands = shell_commands(opts.traces)
    chars = sum(map(len, commands))

    differ = 0
    kinds: dict[str, int] = {}
    for entry in ("classify_shell", "classify_shell_access"):
        answers = {impl: [getattr(m, entry)(c) for c in commands] for impl, m in modules.items()}
        differ += sum(a != b for a, b in zip(answers["c"], answers["py"]))
    for answer in answers["py"]:
        kinds[answer[0]] = kinds.get(answer[0], 0) + 1

    timed = {}  # entry -> (us per command per twin, median ratio)
    for entry in ("classify_shell", "classify_shell_access"):
        twins = {impl: getattr(m, entry) for impl, m in modules.items()}
        runs: dict[str, list[float]] = {impl: [] for impl in twins}
        gc.collect()
        for _ in range(opts.repeats):
            for impl, f in twins.items():
                runs[impl].append(run_once(f, commands))
        us = {impl: statistics.median(r) / len(commands) * 1e6 for impl, r in runs.items()}
        timed[entry] = (us, statistics.median(p / c for p, c in zip(runs["py"], runs["c"])))

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
    for entry, (us, ratio) in timed.items():
        print(f"  {entry}:")
        print(f"    pure twin      {us['py']:8.2f} us/command")
        print(f"    compiled twin  {us['c']:8.2f} us/command")
        print(
            f"    ratio          {ratio:8.1f}x   (no bar of its own: it serves bench_ingest.py's)"
        )
    print(
        f"  answers        {'identical' if not differ else f'{differ} DIFFER'} on all {len(commands)} commands"
    )
    if opts.callgrind:
        print("compiled twin under callgrind (instructions per command, load-independent):")
        for entry in ("classify_shell", "classify_shell_access"):
            ir = callgrind_ir(commands, entry)
            if ir is None:
                print("  valgrind is not installed")
                break
            print(f"  {entry:22s} {ir:10,.0f}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
