"""Guard.check + Guard.record per call on a realistic mix, compiled core vs the pure twin.

    python benchmarks/bench_guard.py [--calls 20000] [--repeats 5] [--sessions 64] [--no-call-id]
                                     [--dump-stream FILE] [--openclaw BUNDLE.js] [--callgrind]

The mix (deterministic, seeded): 64 sessions interleaved in bursts, each call a check then a
record of its result:
  45% file reads with repeats (skewed over 40 paths, ~2 KB text results),
  25% shell commands with results (status, exit code, output, fresh duration and pid),
  15% message sends with fresh message ids and timestamps (volatile keys stripped),
  15% todo-list writes (the budgeted tool).
Both twins run the same stream in one process (``implementation="c"`` / ``"py"``); the
correctness column says whether they gave identical decisions on every call. "of which
hashing" times the twin's canonical_hash alone on the same calls (args plus the projected
outcome, from a Python loop); "guard logic" is the rest of the time per call. Memory per
session is measured with tracemalloc over 2,000 sessions each filled past the default window.
The last line times the same loop with do-nothing check/record callables of the same
signatures (``CallFloor``): the part of a call that is the harness's own loop and call, not
the guard's work.

Every call carries a ``call_id`` (the path harnesses take; ``--no-call-id`` drops them).
``--dump-stream FILE`` writes the replayed stream as JSON (a list of {session, tool, args,
result, call_id}). ``--openclaw BUNDLE.js`` runs OpenClaw's own detector on the same stream in
the same run, its rounds interleaved with loopcore's, with Node (``node`` on PATH, e.g. Debian's
``nodejs`` package) through benchmarks/openclaw_driver.js: the bundle is one you build yourself
from OpenClaw's ``src/agents/tool-loop-detection.ts`` (this repository holds none of OpenClaw's
code) as a CommonJS module exporting ``detectToolCallLoop``, ``recordToolCall`` and
``recordToolCallOutcome`` (docs/guard.md, "Measured against OpenClaw"); the benchmark skips it,
saying why, when Node or the bundle is missing. Wall-clock and CPU time are printed for each
side: on a shared machine the CPU figures are the steadier ones.

``--callgrind`` prints instead the compiled guard's instructions per call (check + record, the
same loop) under valgrind's callgrind, which load never changes: the difference of two replays
of the stream's first 2,000 and 12,000 calls on a fresh guard, so start-up, imports and the
stream's construction cancel out. ``--callgrind-out FILE`` keeps the longer run's profile for
callgrind_annotate.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import platform
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _env import cpu_model  # noqa: E402  (benchmarks/_env.py)

from loopcore import ALLOW, Policy, _native_flag  # noqa: E402
from loopcore.guard import _make_guard  # noqa: E402


def make_stream(n_calls: int, n_sessions: int, seed: int = 7) -> list[tuple]:
    rnd = random.Random(seed)
    paths = [f"src/pkg/module_{i}.py" for i in range(40)]
    weights = [1.0 / (i + 1) for i in range(40)]  # a few hot files, a long tail
    bodies = {p: "".join(f"line {j} of {p}: x = {j * 7}\n" for j in range(60)) for p in paths}
    cmds = [
        "pytest -q tests/test_api.py",
        "ruff check src",
        "git status --short",
        "make build",
        "ls -la src",
    ]
    outputs = {c: f"$ {c}\n" + "ok\n" * 40 for c in cmds}
    stream = []
    i = 0
    while len(stream) < n_calls:
        session = f"session-{rnd.randrange(n_sessions)}"
        for _ in range(rnd.randint(3, 12)):  # a burst of one agent's calls
            r = rnd.random()
            if r < 0.45:
                p = rnd.choices(paths, weights)[0]
                call = ("read", {"path": p, "offset": 0, "limit": 2000}, bodies[p])
            elif r < 0.70:
                c = rnd.choice(cmds)
                code = 0 if rnd.random() < 0.8 else 1
                call = (
                    "exec",
                    {"command": c, "timeout": 120},
                    {
                        "status": "completed",
                        "exitCode": code,
                        "aggregated": outputs[c],
                        "durationMs": rnd.randint(50, 5000),
                        "pid": rnd.randint(1000, 60000),
                        "cwd": "/work/repo",
                    },
                )
            elif r < 0.85:
                text = rnd.choice(
                    ["Build is green.", "Tests pass, opening the PR.", "Working on it."]
                )
                call = (
                    "message",
                    {"action": "send", "to": "user-42", "text": text},
                    {
                        "ok": True,
                        "messageId": f"msg-{i}",
                        "ts": 1_700_000_000 + i,
                        "route": {"id": "conv-9"},
                    },
                )
            else:
                call = (
                    "todo_write",
                    {
                        "todos": [
                            {"content": f"step {k}", "status": "pending"}
                            for k in range(rnd.randint(2, 6))
                        ]
                    },
                    "Todos updated",
                )
            stream.append((session, *call, f"call-{i}"))
            i += 1
    return stream[:n_calls]


def call_floor():
    """The do-nothing check/record pair (benchmarks/callfloor.py, else the compiled guard's)."""
    try:
        from callfloor import CallFloor  # benchmarks/callfloor.py
    except ImportError:
        CallFloor = _native_flag.load_twin("guard", "c").CallFloor  # noqa: N806
    return CallFloor(ALLOW)


def run_once(impl: str, stream: list[tuple], keep: bool = False, call_ids: bool = True):
    """(wall ns per call, decisions or None, the guard, CPU ns per call) of one replay."""
    if impl == "floor":
        g = call_floor()
    else:
        g = _make_guard(Policy.default(), impl=impl, max_sessions=100_000)
    check, record = g.check, g.record
    decisions = [] if keep else None
    gc.disable()
    c0 = time.thread_time_ns()
    t0 = time.perf_counter_ns()
    if call_ids:
        for session, tool, args, result, cid in stream:
            d = check(session, tool, args, call_id=cid)
            if d.action == "block":
                record(session, tool, args, d, call_id=cid)
            else:
                record(session, tool, args, result, call_id=cid)
            if keep:
                decisions.append(d.to_dict())
    else:
        for session, tool, args, result, _cid in stream:
            d = check(session, tool, args)
            if d.action == "block":
                record(session, tool, args, d)
            else:
                record(session, tool, args, result)
            if keep:
                decisions.append(d.to_dict())
    dt = time.perf_counter_ns() - t0
    cpu = time.thread_time_ns() - c0
    gc.enable()
    return dt / len(stream), decisions, g, cpu / len(stream)


def _cg_child(n: int, call_ids: bool) -> None:
    """Run under callgrind by callgrind_ir(): replay the first *n* calls on a fresh guard."""
    logging.getLogger("loopcore").addHandler(logging.NullHandler())
    logging.getLogger("loopcore").propagate = False
    stream = make_stream(CG_CALLS[1], 64)[:n]
    run_once("c", stream, call_ids=call_ids)


CG_CALLS = (2_000, 12_000)


def callgrind_ir(call_ids: bool, out_file: str | None = None) -> float | None:
    """Instructions per call of the compiled guard on the mix, or None without valgrind."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return None
    counts = []
    for n in CG_CALLS:
        keep = out_file if out_file and n == CG_CALLS[1] else "/dev/null"
        out = subprocess.run(
            [
                valgrind,
                "--tool=callgrind",
                f"--callgrind-out-file={keep}",
                sys.executable,
                os.path.abspath(__file__),
                "--cg-child",
                str(n),
                "1" if call_ids else "0",
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
    return (counts[1] - counts[0]) / (CG_CALLS[1] - CG_CALLS[0])


def hashing_once(impl: str, stream: list[tuple]) -> float:
    """ns per call of the canonical hashing alone: args and the outcome the guard hashes.

    The outcomes are projected beforehand (exec results to status/exit/output, send results
    without their volatile ids), so this is the hashing the guard cannot avoid; the rest of a
    call's time is the guard's own logic (projection, session lookup, detectors, decisions).
    """
    h = _native_flag.load_twin("hashing", impl).canonical_hash
    eng = _native_flag.load_twin("guard", impl)
    vk = Policy.default().volatile_keys
    items = [
        (
            args,
            eng.project_exec(result)
            if tool == "exec"
            else eng.strip_send_result(result, vk)
            if tool == "message"
            else result,
        )
        for _session, tool, args, result, _cid in stream
    ]
    gc.disable()
    t0 = time.perf_counter_ns()
    for args, outcome in items:
        h(args)
        h(outcome)
    dt = time.perf_counter_ns() - t0
    gc.enable()
    return dt / len(items)


def bytes_per_session(impl: str, n: int = 2000) -> float:
    g = _make_guard(Policy.default(), impl=impl, max_sessions=n)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for s in range(n):
            for i in range(40):  # past the default window of 30
                args = {"path": f"f{i}"}
                g.check(f"session-{s}", "read", args)
                g.record(f"session-{s}", "read", args, "x")
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return (after - before) / n


def node_version() -> str:
    node = shutil.which("node") or shutil.which("nodejs")
    if node is None:
        return "?"
    out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30)
    return out.stdout.strip() or "?"


def dump_stream(stream: list[tuple], path: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(
            [
                {"session": s, "tool": t, "args": a, "result": r, "call_id": c}
                for s, t, a, r, c in stream
            ],
            f,
        )


DRIVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "openclaw_driver.js")


class OpenClaw:
    """OpenClaw's detector replaying the same stream in a Node child, one round per ``run()``.

    The child (benchmarks/openclaw_driver.js) loads the bundle and the stream once and then
    replays the stream whenever it is asked, so its rounds interleave with loopcore's in one
    run, under the same load. ``OpenClaw.start`` returns (None, why) when it cannot run.
    """

    def __init__(self, proc: subprocess.Popen, tmp: tempfile.TemporaryDirectory, calls: int):
        self.proc = proc
        self.tmp = tmp
        self.calls = calls

    @classmethod
    def start(cls, bundle: str | None, stream: list[tuple]):
        if not bundle:
            return None, "no --openclaw bundle given"
        node = shutil.which("node") or shutil.which("nodejs")
        if node is None:
            return None, "Node is not installed (Debian: apt-get install nodejs)"
        if not os.path.isfile(bundle):
            return None, f"the OpenClaw bundle {bundle!r} does not exist"
        tmp = tempfile.TemporaryDirectory()
        data = os.path.join(tmp.name, "stream.json")
        dump_stream(stream, data)
        proc = subprocess.Popen(
            [node, DRIVER, os.path.abspath(bundle), data],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        hello = proc.stdout.readline()
        if not hello:
            err = proc.stderr.read().strip()
            proc.wait()
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                pipe.close()
            tmp.cleanup()
            return None, f"the OpenClaw driver failed: {err[-300:]}"
        return cls(proc, tmp, json.loads(hello)["calls"]), "ok"

    def run(self) -> dict:
        """One replay of the stream: {"ns", "cpu_ns", "warn", "block"} per OpenClaw's driver."""
        self.proc.stdin.write("run\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the OpenClaw driver died: " + self.proc.stderr.read()[-300:])
        return json.loads(line)

    def close(self) -> None:
        try:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
        except OSError:
            pass
        self.proc.wait(timeout=30)
        self.proc.stdout.close()
        self.proc.stderr.close()
        self.tmp.cleanup()


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--cg-child"]:
        _cg_child(int(argv[1]), argv[2] == "1")
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=20_000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--sessions", type=int, default=64)
    ap.add_argument(
        "--no-call-id",
        dest="call_ids",
        action="store_false",
        help="check/record without call ids (harnesses pass them; the default does too)",
    )
    ap.add_argument("--dump-stream", metavar="FILE", help="write the replayed call stream as JSON")
    ap.add_argument(
        "--openclaw",
        metavar="BUNDLE",
        help="a local CommonJS bundle of OpenClaw's tool-loop-detection",
    )
    ap.add_argument(
        "--callgrind",
        action="store_true",
        help="print the compiled guard's instructions per call under callgrind, and stop",
    )
    ap.add_argument("--callgrind-out", metavar="FILE", help="keep the callgrind profile in FILE")
    opts = ap.parse_args(argv)
    if opts.callgrind:
        ir = callgrind_ir(opts.call_ids, opts.callgrind_out)
        if ir is None:
            print("valgrind is not installed: no instruction counts")
            return 1
        print(
            f"compiled guard, check + record per call under callgrind "
            f"(call ids: {'yes' if opts.call_ids else 'no'}): {ir:,.0f} instructions/call"
        )
        return 0
    # The "loopcore" logger gets a NullHandler and does not propagate, as in an application that
    # shows no library logs: an event then builds no LogRecord (loopcore.guard._log_reaches),
    # and printing events to stderr is not measured. The event buckets are still kept.
    logging.getLogger("loopcore").addHandler(logging.NullHandler())
    logging.getLogger("loopcore").propagate = False
    impls = ["py"] if _native_flag.NO_EXTENSIONS else ["c", "py"]
    stream = make_stream(opts.calls, opts.sessions)
    if opts.dump_stream:
        dump_stream(stream, opts.dump_stream)

    # correctness first: both twins, every decision
    decided = {impl: run_once(impl, stream, keep=True, call_ids=opts.call_ids)[1] for impl in impls}
    same = all(decided[i] == decided[impls[0]] for i in impls)
    actions = {}
    for d in decided[impls[0]]:
        actions[d["action"]] = actions.get(d["action"], 0) + 1

    # The twins (and OpenClaw's detector, when given) alternate run by run, so all see the same
    # load on a shared machine; each ratio is the median of the per-round ratios. A round of
    # OpenClaw's comes first and the pure twin's next: Node keeps working after its round has
    # returned (concurrent GC, JIT compiler threads), and a compiled round timed right after it
    # read about 1.5x slower (median 1,063 ns a call against 660-727 ns with the pure twin's
    # round in between, and 693 ns with no Node child at all) on the 2-core machine.
    openclaw, why = OpenClaw.start(opts.openclaw, stream)
    runs: dict[str, list[float]] = {impl: [] for impl in impls}
    cpu: dict[str, list[float]] = {impl: [] for impl in impls}
    hashing: dict[str, list[float]] = {impl: [] for impl in impls}
    floor: list[float] = []
    oc_runs: list[dict] = []
    try:
        for _ in range(opts.repeats):
            if openclaw is not None:
                oc_runs.append(openclaw.run())
            for impl in reversed(impls):
                ns, _d, _g, cpu_ns = run_once(impl, stream, call_ids=opts.call_ids)
                runs[impl].append(ns)
                cpu[impl].append(cpu_ns)
                hashing[impl].append(hashing_once(impl, stream))
            if "c" in impls:
                floor.append(run_once("floor", stream, call_ids=opts.call_ids)[0])
    finally:
        if openclaw is not None:
            openclaw.close()
    times = {impl: statistics.median(r) for impl, r in runs.items()}
    cpu_times = {impl: statistics.median(r) for impl, r in cpu.items()}
    hash_ns = {impl: statistics.median(r) for impl, r in hashing.items()}
    ratios = {
        impl: statistics.median(p / c for p, c in zip(runs["py"], runs[impl])) for impl in impls
    }
    mem = {impl: bytes_per_session(impl) for impl in impls}

    print(
        f"loopcore guard benchmark: check + record per call, {opts.calls} calls, "
        f"{opts.sessions} sessions, median of {opts.repeats} alternating runs per twin"
    )
    print(
        f"Python {platform.python_version()} ({platform.python_implementation()}), CPU: {cpu_model()}"
    )
    print(f"command: {sys.executable} {' '.join(sys.argv)}")
    if hasattr(os, "getloadavg"):
        print(
            f"load average at the end (1/5/15 min): {' / '.join(f'{x:.2f}' for x in os.getloadavg())} "
            f"on {os.cpu_count()} cores"
        )
    print(
        f"decisions on the mix: {actions}; twins identical: {'yes' if same else 'NO'}; "
        f"call ids: {'yes' if opts.call_ids else 'no'}"
    )
    print()
    print(
        "| implementation | median ns/call | calls/s | vs pure twin | of which hashing | guard logic | "
        "bytes/session | identical decisions |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for impl in impls:
        ns = times[impl]
        ratio = ratios[impl]
        hn = hash_ns[impl]
        name = "compiled core (Cython)" if impl == "c" else "pure-Python twin"
        print(
            f"| {name} | {ns:,.0f} | {1e9 / ns:,.0f} | {ratio:.1f}x | {hn:,.0f} ({100 * hn / ns:.0f}%) | "
            f"{ns - hn:,.0f} | {mem[impl]:,.0f} | {'yes' if same else 'NO'} |"
        )
    print()
    # On a shared machine the fastest run shows what the code costs when it gets the core.
    print(
        "fastest run: "
        + "; ".join(
            f"{impl}: {min(runs[impl]):,.0f} ns/call, hashing {min(hashing[impl]):,.0f} ns"
            for impl in impls
        )
    )
    # Every run of the compiled core, fastest first: on a shared VM they fall into speed phases
    # (the pure twin and the no-op loop move with them), which a median alone hides.
    if "c" in impls:
        print(
            "compiled core, every run (ns/call, sorted): "
            + " ".join(f"{r:,.0f}" for r in sorted(runs["c"]))
        )
    if floor:
        # The same loop calling do-nothing check/record callables of the same signatures: what
        # the harness pays to call anything; the rest is the guard's own work.
        own = [r - f for r, f in zip(runs["c"], floor)]
        print(
            f"harness loop with no-op check/record (CallFloor): median {statistics.median(floor):,.0f} ns/call, "
            f"fastest {min(floor):,.0f}; the compiled guard's own work: median {statistics.median(own):,.0f} "
            f"ns/call, fastest {min(own):,.0f} (bar: about 1,000)"
        )
    print(
        "CPU time (thread), median ns/call: "
        + "; ".join(f"{impl}: {cpu_times[impl]:,.0f}" for impl in impls)
    )
    if oc_runs:
        best = "c" if "c" in impls else "py"
        oc_wall = statistics.median(r["ns"] for r in oc_runs)
        oc_cpu = statistics.median(r["cpu_ns"] for r in oc_runs)
        wall_ratio = statistics.median(r["ns"] / ns for r, ns in zip(oc_runs, runs[best]))
        cpu_ratio = statistics.median(r["cpu_ns"] / ns for r, ns in zip(oc_runs, cpu[best]))
        print(
            f"OpenClaw's detector (Node {node_version()}, same stream, rounds interleaved with "
            f"loopcore's): median {oc_wall:,.0f} ns/call wall, {oc_cpu:,.0f} ns/call CPU "
            f"(process); its decisions: {oc_runs[0]['warn']} warn, {oc_runs[0]['block']} block"
        )
        verdict = "met" if wall_ratio >= 25 else "NOT met"
        print(
            f"loopcore {'compiled' if best == 'c' else 'pure'} vs OpenClaw per call: "
            f"{wall_ratio:.1f}x wall, {cpu_ratio:.1f}x CPU (bar: >= 25x, {verdict})"
        )
    else:
        print(f"OpenClaw comparison skipped: {why}")
    bars = []
    if "c" in ratios:
        bars.append(f"vs pure twin {ratios['c']:.1f}x (bar >= 10x)")
        bars.append(f"{mem['c']:,.0f} bytes/session (bar <= 4,096)")
    if bars:
        print("bars: " + "; ".join(bars))
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
