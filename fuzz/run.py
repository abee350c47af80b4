"""Run every atheris harness for a time budget and report executions, crashes, disagreements.

    python fuzz/run.py --seconds 5              # the CI smoke: a few seconds per target
    nice python fuzz/run.py --seconds 600       # a long run (see docs/fuzzing.md)
    python fuzz/run.py --seconds 60 --targets hash,shell

Each target runs in its own process (``fuzz/fuzz_<target>.py``) on a scratch copy of its seed
corpus (``fuzz/corpus/<target>/`` is never written to); a crash, an uncaught exception or a
twin disagreement (an AssertionError in the harness) leaves the reproducer in --artifacts and
makes this script exit 1.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TARGETS = ("hash", "guard", "restore", "load", "shell")


def run_one(target: str, seconds: int, artifacts: str, extra: list[str]) -> dict:
    work = tempfile.mkdtemp(prefix=f"loopcore-fuzz-{target}-")
    seeds = os.path.join(HERE, "corpus", target)
    os.makedirs(artifacts, exist_ok=True)
    env = dict(os.environ)  # the harnesses pick src/ (an in-place build) or the installed package
    env.pop("LOOPCORE_NO_EXTENSIONS", None)
    cmd = [
        sys.executable,
        os.path.join(HERE, f"fuzz_{target}.py"),
        work,
        seeds,
        f"-max_total_time={seconds}",
        "-print_final_stats=1",
        "-rss_limit_mb=3072",
        "-timeout=30",
        f"-artifact_prefix={os.path.join(artifacts, target)}-",
        *extra,
    ]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=seconds * 2 + 300)
    elapsed = time.monotonic() - t0
    out = proc.stdout + proc.stderr
    m = re.search(r"stat::number_of_executed_units:\s*(\d+)", out)
    execs = int(m.group(1)) if m else 0
    disagree = len(
        re.findall(r"twins disagree|twins emitted|twins ended|same bytes, different", out)
    )
    crashed = proc.returncode != 0
    shutil.rmtree(work, ignore_errors=True)
    return {
        "target": target,
        "execs": execs,
        "seconds": elapsed,
        "rc": proc.returncode,
        "crashes": int(crashed),
        "disagreements": disagree,
        "tail": out[-3000:] if crashed else "",
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=int, default=5, help="time budget per target (default 5)")
    ap.add_argument(
        "--targets",
        default=",".join(TARGETS),
        help="comma-separated subset of " + ",".join(TARGETS),
    )
    ap.add_argument(
        "--artifacts",
        default=os.path.join(tempfile.gettempdir(), "loopcore-fuzz-artifacts"),
        help="where crash reproducers are written",
    )
    args, extra = ap.parse_known_args(argv)
    targets = [t for t in args.targets.split(",") if t]
    unknown = set(targets) - set(TARGETS)
    if unknown:
        ap.error(f"unknown targets {sorted(unknown)}; known: {', '.join(TARGETS)}")
    failed = False
    print(f"{'target':8} {'executions':>11} {'seconds':>8} {'crashes':>8} {'disagreements':>14}")
    for t in targets:
        r = run_one(t, args.seconds, args.artifacts, extra)
        print(
            f"{t:8} {r['execs']:>11,} {r['seconds']:>8.1f} {r['crashes']:>8} {r['disagreements']:>14}",
            flush=True,
        )
        if r["crashes"] or r["disagreements"]:
            failed = True
            print(r["tail"], file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
