"""Memory stays flat under long loops: guard calls over churning sessions, encoded steps.

Runs benchmarks/bench_rss.py in a fresh process per twin with small counts (the full figures,
10 M guard calls and 1 M steps, come from running it by hand) and bounds the RSS growth after
the warm-up generously: a leak of even a few bytes per call would exceed it.
"""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import ROOT, package_env


def test_rss_stays_flat_over_churning_guard_sessions_and_encoded_steps(impl):
    calls, steps = (400_000, 200_000) if impl.name == "c" else (100_000, 50_000)
    env = package_env()
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_rss.py"),
            "--calls",
            str(calls),
            "--steps",
            str(steps),
            "--impl",
            impl.name,
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    guard, enc = (json.loads(line) for line in proc.stdout.splitlines())
    assert guard["calls"] == calls and guard["live_sessions"] <= 1000
    assert guard["sessions_created"] >= 2 * guard["live_sessions"]  # sessions churn through the cap
    # 360k calls after the warm-up: 16 MB is ~45 bytes a call, far below any real leak's rate
    assert guard["growth_mb"] < 16, guard
    assert enc["steps"] == steps and enc["growth_mb"] < 16, enc
