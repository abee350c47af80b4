"""A command hook's cost: process start to answer, against a bare ``python -c pass``.

    python benchmarks/bench_hook.py [--runs N] [--python PATH] [--scripts DIR] [--breakdown]

A harness starts one hook process per tool call and waits for it, so the hook's whole cost is
its wall time from spawn to exit: interpreter start-up, imports, one SQLite transaction on the
session's row, the guard's check, the answer. Each run sends a realistic Claude Code
``PreToolUse`` event (a ``Read`` of a new file, in a session that already holds a full window
of calls) to a fresh process; the variants and the bare interpreter run interleaved, one of
each per round, so drifting load on a shared machine hits them alike. Reported: the median and
the quartiles over ``--runs`` rounds (>= 50), and the ratio of medians to the bare start.

Variants (the first is what ``loopcore hook install`` writes):

* ``fast entry``: ``python -I -S -c "..."`` with loopcore's and its dependencies' directories
  put on ``sys.path`` by hand: no ``site`` (no .pth files), no ``runpy``.
* ``loopcore-hook`` and ``loopcore hook``: the console scripts pip installs (when present beside
  ``--python``, or in ``--scripts DIR``).
* ``-m loopcore.hooks`` and ``-m loopcore hook``: the module entries.
* the same fast entry on the pure-Python twin (``LOOPCORE_NO_EXTENSIONS=1``).
* for scale: the bare start with ``-I -S``, ``import loopcore`` as it is now (lazy) and with
  every module the top level used to import eagerly (numpy through the burn analysis).

Correctness is checked on every run: exit code 0, no stderr, and the allow answer (empty
stdout). The CPU columns (user + system time of the child) show the work itself; on a loaded
machine the wall time also counts the wait for a core. Bars (README.md, Benchmarks): median <= 50 ms and <= 5x the bare start.
``--breakdown`` adds ``-X importtime`` of one hook call: the cumulative import cost of the
modules on the hook's path. Exit code 0 = bars met, 1 = a bar missed, 2 = a run failed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _env import environment  # noqa: E402  (benchmarks/_env.py)

BAR_MS = 50.0
BAR_RATIO = 5.0
SESSION = "bench-session-7c1e"


def _event(i: int) -> bytes:
    return json.dumps(
        {
            "session_id": SESSION,
            "transcript_path": f"/home/dev/.claude/projects/-home-dev-shop/{SESSION}.jsonl",
            "cwd": "/home/dev/shop",
            "permission_mode": "default",
            "hook_event_name": "PreToolUse",
            "tool_name": "Read",
            "tool_input": {"file_path": f"/home/dev/shop/src/module_{i}.py"},
            "tool_use_id": f"toolu_01bench{i:06d}",
        }
    ).encode()


def _variants(
    python: str, state: str, scripts: str | None = None
) -> dict[str, tuple[list[str], dict[str, str]]]:
    code = (
        "import sys,json;print(json.dumps(__import__('loopcore.hooks._install',fromlist=['x'])"
        ".hook_command('claude', state=sys.argv[1])))"
    )
    env = dict(os.environ)
    env.pop("LOOPCORE_NO_EXTENSIONS", None)
    fast = json.loads(
        subprocess.run([python, "-c", code, state], capture_output=True, check=True, env=env).stdout
    )
    out: dict[str, tuple[list[str], dict[str, str]]] = {
        "bare python -c pass": ([python, "-c", "pass"], env)
    }
    out["fast entry (installed)"] = (shlex.split(fast), env)
    bindir = scripts or os.path.dirname(python)
    script = os.path.join(bindir, "loopcore-hook")
    if os.path.isfile(script):  # the console scripts pip writes (#!python, site, a wrapper)
        out["loopcore-hook script"] = ([script, "claude", "--state", state], env)
    script = os.path.join(bindir, "loopcore")
    if os.path.isfile(script):
        out["loopcore hook script"] = ([script, "hook", "claude", "--state", state], env)
    out["-m loopcore.hooks"] = ([python, "-m", "loopcore.hooks", "claude", "--state", state], env)
    out["-m loopcore hook"] = ([python, "-m", "loopcore", "hook", "claude", "--state", state], env)
    out["fast entry, pure twin"] = (shlex.split(fast), {**env, "LOOPCORE_NO_EXTENSIONS": "1"})
    # What each start-up saving is worth, on its own:
    out["bare python -I -S -c pass"] = ([python, "-I", "-S", "-c", "pass"], env)
    out["import loopcore (lazy)"] = ([python, "-c", "import loopcore"], env)
    out["import loopcore, eager modules"] = (
        [
            python,
            "-c",
            "import loopcore, loopcore.guard, loopcore.burn, "
            "loopcore.encoded, loopcore.adapters, loopcore.taxonomy",
        ],
        env,
    )
    return out


def _run(cmd: list[str], env: dict[str, str], stdin: bytes) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child) of one process; raises RuntimeError unless it allowed."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, input=stdin, capture_output=True, env=env)
    dt = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0 or p.stderr or p.stdout:
        raise RuntimeError(
            f"{cmd!r}: exit {p.returncode}, stdout {p.stdout[:200]!r}, stderr {p.stderr[:300]!r}"
        )
    return dt, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=60, help="interleaved rounds (>= 50)")
    ap.add_argument(
        "--python", default=sys.executable, help="the interpreter loopcore is installed in"
    )
    ap.add_argument("--breakdown", action="store_true", help="add -X importtime of one hook call")
    ap.add_argument(
        "--scripts",
        metavar="DIR",
        help="where pip put the loopcore / loopcore-hook console scripts (default: beside --python)",
    )
    args = ap.parse_args()
    runs = max(50, args.runs)
    with tempfile.TemporaryDirectory(prefix="loopcore-bench-hook-") as state:
        variants = _variants(args.python, state, args.scripts)
        cmd, env = variants["fast entry (installed)"]
        for i in range(40):  # a session with a full window of calls behind it
            _run(cmd, env, _event(-1 - i))
        samples: dict[str, list[float]] = {name: [] for name in variants}
        cpu: dict[str, list[float]] = {name: [] for name in variants}
        try:
            for r in range(runs):
                for k, (name, (cmd, env)) in enumerate(variants.items()):
                    wall, used = _run(cmd, env, _event(r * 100 + k))
                    samples[name].append(wall)
                    cpu[name].append(used)
        except RuntimeError as exc:
            print(f"run failed: {exc}", file=sys.stderr)
            return 2
        if args.breakdown:
            fast = variants["fast entry (installed)"][0]
            p = subprocess.run(
                [fast[0], "-X", "importtime", *fast[1:]],
                input=_event(10**6),
                capture_output=True,
                env=variants["fast entry (installed)"][1],
            )
            top, own = [], []
            for line in p.stderr.decode().splitlines():
                parts = (
                    line[len("import time:") :].split("|")
                    if line.startswith("import time:")
                    else []
                )
                if len(parts) == 3 and parts[1].strip().isdigit():
                    own.append((int(parts[0]), parts[2].strip()))
                    if not parts[2].startswith("  "):
                        top.append(
                            (int(parts[1]), parts[2].strip())
                        )  # a module the hook path imports itself
            top.sort(reverse=True)
            own.sort(reverse=True)
    print(environment(f"python benchmarks/bench_hook.py --runs {runs} --python {args.python}"))
    print(f"{runs} interleaved rounds; wall time from spawn to exit, ms\n")
    bare = statistics.median(samples["bare python -c pass"])
    bare_cpu = statistics.median(cpu["bare python -c pass"])
    print(f"| {'variant':32} | median | p25 | p75 | x bare | CPU ms | CPU x bare |")
    print(f"|{'-' * 34}|--------|-----|-----|--------|--------|------------|")
    for name, v in samples.items():
        q = statistics.quantiles(v, n=4)
        med = statistics.median(v)
        c = statistics.median(cpu[name])
        print(
            f"| {name:32} | {med * 1e3:6.1f} | {q[0] * 1e3:3.0f} | {q[2] * 1e3:3.0f} | {med / bare:6.2f} "
            f"| {c * 1e3:6.1f} | {c / bare_cpu:10.2f} |"
        )
    print(
        f"\nload average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
        f"({os.cpu_count()} cores): wall time includes waiting for a core"
    )
    hook = statistics.median(samples["fast entry (installed)"])
    ok = hook * 1e3 <= BAR_MS and hook / bare <= BAR_RATIO
    print(
        f"\ninstalled hook: {hook * 1e3:.1f} ms, {hook / bare:.2f}x the bare start "
        f"(bars: <= {BAR_MS:g} ms, <= {BAR_RATIO:g}x): {'met' if ok else 'MISSED'}"
    )
    if args.breakdown:
        print(
            f"\nimports of one hook call (-X importtime): {sum(c for c, _ in top) / 1e3:.1f} ms in all"
        )
        print("  cumulative, top level (a module is charged with what it imports first):")
        for c, m in top[:8]:
            print(f"    {c / 1e3:6.1f}  {m}")
        print("  self time, the largest:")
        for c, m in own[:10]:
            print(f"    {c / 1e3:6.1f}  {m}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
