"""Resident memory under long loops: guard calls over churning sessions, and encoded steps.

    python benchmarks/bench_rss.py                      # the full figures: 10 M guard calls, 1 M steps
    python benchmarks/bench_rss.py --calls 200000 --steps 100000 --impl py --json

Guard: ``--calls`` check+record pairs (each pair counts 2 calls), a new session every 50 calls
and a guard capped at ``--max-sessions`` (LRU), so sessions churn through the cap the whole
time. Encoded: a 1,000-step trace encoded and analysed again and again until ``--steps``.
RSS (from /proc/self/statm) is sampled after a warm-up tenth and at the end; "growth" is the
difference. Flat memory means growth near zero whatever the counts; tests/test_hostile_rss.py
runs this with small counts and a generous bound.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
from pathlib import Path

_SRC = Path(__file__).resolve().parent.parent / "src"
if list((_SRC / "loopcore").glob("_native_hashing*")):  # an in-place build: measure the tree
    sys.path.insert(0, str(_SRC))

from loopcore import Guard, Policy, Step, Trace  # noqa: E402
from loopcore.encoded import _kernel_of, _run_kernel, encode  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE / 2**20


def guard_loop(calls: int, impl: str, max_sessions: int) -> dict:
    g = Guard(Policy.default(), implementation=impl, max_sessions=max_sessions)
    tools = ["read_file", "exec", "message", "todo_write", "grep"]
    pairs = calls // 2
    warm = max(pairs // 10, 1)
    base = 0.0
    for i in range(pairs):
        s = f"session-{i // 25}"
        tool = tools[i % 5]
        args = {"path": f"src/f{i % 37}.py", "n": i % 11}
        g.check(s, tool, args)
        g.record(
            s, tool, args, {"ok": True, "messageId": f"m{i}", "out": "x" * (i % 50)}, tokens=100
        )
        if i + 1 == warm:
            gc.collect()
            base = rss_mb()
    gc.collect()
    end = rss_mb()
    return {
        "what": "guard",
        "impl": impl,
        "calls": pairs * 2,
        "sessions_created": pairs // 25 + 1,
        "live_sessions": len(g._table),
        "rss_warm_mb": round(base, 1),
        "rss_end_mb": round(end, 1),
        "growth_mb": round(end - base, 1),
    }


def trace_of(n: int, k: int) -> Trace:
    steps = []
    for i in range(n):
        kind = ("observe", "mutate", "exec")[i % 3]
        steps.append(
            Step(
                f"t{k}",
                i // 10,
                kind,
                "read_file" if kind == "observe" else "edit",
                f"f{i % 29}.py",
                {"path": f"f{i % 29}.py", "k": k},
                f"body {i % 7}",
                tokens_in=100,
            )
        )
    return Trace(steps, session=f"t{k}")


def encoded_loop(steps: int, impl: str) -> dict:
    per = 1000
    rounds = max(steps // per, 1)
    warm = max(rounds // 10, 1)
    base = 0.0
    for r in range(rounds):
        enc = encode(trace_of(per, r))
        _run_kernel(_kernel_of(impl), enc)
        del enc
        if r + 1 == warm:
            gc.collect()
            base = rss_mb()
    gc.collect()
    end = rss_mb()
    return {
        "what": "encoded",
        "impl": impl,
        "steps": rounds * per,
        "rss_warm_mb": round(base, 1),
        "rss_end_mb": round(end, 1),
        "growth_mb": round(end - base, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=10_000_000)
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--impl", choices=["c", "py"], default="c")
    ap.add_argument("--max-sessions", type=int, default=1000)
    ap.add_argument("--json", action="store_true", help="one JSON object per loop on stdout")
    args = ap.parse_args()
    for res in (
        guard_loop(args.calls, args.impl, args.max_sessions),
        encoded_loop(args.steps, args.impl),
    ):
        if args.json:
            print(json.dumps(res), flush=True)
        else:
            print(", ".join(f"{k}={v}" for k, v in res.items()), flush=True)


if __name__ == "__main__":
    main()
