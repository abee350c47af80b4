"""What parsing only the fields the analysis reads would save: a lever for the ingest bar.

    python benchmarks/bench_projection.py [--traces DIR] [--runs N]

The ingest bar (docs/cli.md) compares ``loopcore analyse`` with a full ``orjson.loads`` of
every file. mini-swe-agent's trajectories (most of ../shared/traces' bytes) hold much that no
rule reads: the raw API response of every turn beside its usage, a second copy of every
command's output (``extra.raw_output``), the run's configuration in ``info``. This script
measures, on the same decompressed bytes and interleaved in one process:

(a) ``orjson.loads`` of each whole file (the bar's parse);
(b) msgspec decoding each file into a schema of only the fields the mini-swe-agent adapter
    reads (``PROJECTION`` below), every skipped value still scanned and checked as JSON;
(c) (b) turned back into plain dicts and lists (``msgspec.to_builtins``), what the adapters
    take today: the cost of that copy is what a walk reading the projection directly saves.

Check, beside the times: the traces the adapter builds from (c) equal, Step for Step, those
from (a), and so do the burn reports, so the projection leaves out nothing the analysis reads.

Also printed: the inputs msgspec accepts in a skipped field that orjson refuses (a parse that
skips must keep refusing what the full parse refuses, or the two would analyse different
files), found by decoding a few hostile documents with both.

Exit status 0 when the check passes, 1 when it fails, 2 when the traces or msgspec are absent.
"""

from __future__ import annotations

import argparse
import gzip
import os
import pathlib
import platform
import statistics
import sys
import time
from typing import Any

import orjson

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _env import cpu_model  # noqa: E402  (benchmarks/_env.py)

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_TRACES = ROOT.parent / "shared" / "traces" / "mini-swe-agent-pr816"

# The fields of a trajectory that loopcore.adapters.mini_swe_agent and the chat walk read
# (and the format's sniff): the document's, each message's, a message's ``extra`` and its
# ``response``, and the run's ``info``.
PROJECTION = {
    "doc": ("messages", "info", "trajectory_format", "instance_id"),
    "message": (
        "role",
        "content",
        "tool_calls",
        "function_call",
        "reasoning_content",
        "tool_call_id",
        "name",
        "usage",
        "extra",
    ),
    "extra": (
        "actions",
        "returncode",
        "exception_info",
        "interrupt_type",
        "response",
        "model_response",
        "n_actions",
    ),
    "response": ("usage",),
    "info": ("exit_status",),
}

# Hostile documents: a well-formed part the schema reads, and a skipped field "s" holding a
# value a strict parser refuses.
HOSTILE = {
    "invalid UTF-8": b'{"instance_id":"x","s":"\xff\xfe"}',
    "lone surrogate escape": b'{"instance_id":"x","s":"\\ud800"}',
    "float overflow (1e999)": b'{"instance_id":"x","s":1e999}',
    "NaN": b'{"instance_id":"x","s":NaN}',
    "control character": b'{"instance_id":"x","s":"a\x01b"}',
    "trailing comma": b'{"instance_id":"x","s":[1,2,]}',
    "nesting 5,000 deep": b'{"instance_id":"x","s":' + b"[" * 5000 + b"]" * 5000 + b"}",
}


def schema(msgspec: Any) -> Any:
    """The msgspec Struct types of PROJECTION: every field optional, None when absent (the
    adapter reads an absent field and a null alike: ``.get`` either way, which the check below
    proves on the data), any value kept as it is."""

    def struct(name: str, fields: tuple[str, ...], typed: dict[str, Any]) -> Any:
        return msgspec.defstruct(name, [(f, typed.get(f, Any), None) for f in fields])

    response = struct("Response", PROJECTION["response"], {})
    extra = struct("Extra", PROJECTION["extra"], {"response": response | None})
    message = struct("Message", PROJECTION["message"], {"extra": extra | None})
    info = struct("Info", PROJECTION["info"], {})
    return struct("Doc", PROJECTION["doc"], {"messages": list[message] | None, "info": info | None})


def _files(folder: str) -> list[str]:
    out = []
    for root, dirs, names in os.walk(folder):
        dirs.sort()
        out += [os.path.join(root, n) for n in sorted(names) if n.endswith(".traj.json.gz")]
    return out


def _cpu(fn: Any, data: list[bytes]) -> float:
    c0 = time.process_time()
    for d in data:
        fn(d)
    return time.process_time() - c0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", default=str(DEFAULT_TRACES), help="a folder of .traj.json.gz")
    ap.add_argument("--runs", type=int, default=9, help="timed runs of each side (medians)")
    args = ap.parse_args(argv)
    try:
        import msgspec
    except ImportError:
        print("bench_projection: skipped: msgspec is not installed (pip install '.[bench]')")
        return 2
    files = _files(args.traces)
    if not files:
        print(f"bench_projection: skipped: no .traj.json.gz under {args.traces}")
        return 2

    from loopcore.adapters import mini_swe_agent
    from loopcore.adapters._io import Ctx
    from loopcore.burn import analyse_many

    data = [gzip.decompress(pathlib.Path(f).read_bytes()) for f in files]
    dec = msgspec.json.Decoder(schema(msgspec))
    to_builtins = msgspec.to_builtins

    def projected(raw: bytes) -> Any:
        return to_builtins(dec.decode(raw))

    sides = {
        "orjson.loads, whole file": orjson.loads,
        "msgspec, fields read only": dec.decode,
        "msgspec, fields read, as dicts": projected,
    }
    for fn in sides.values():  # warm-up
        _cpu(fn, data)
    times: dict[str, list[float]] = {k: [] for k in sides}
    for _ in range(args.runs):
        for label, fn in sides.items():
            times[label].append(_cpu(fn, data))
    med = {k: statistics.median(v) for k, v in times.items()}

    def traces(docs: list[Any]) -> list[Any]:
        out = []
        for f, d in zip(files, docs):
            if not mini_swe_agent.sniff(d):
                raise SystemExit(f"bench_projection: {f} is not read as mini-swe-agent")
            out += mini_swe_agent.parse(d, Ctx(f, None, False, None, None))
        return out

    full = traces([orjson.loads(d) for d in data])
    proj = traces([projected(d) for d in data])
    same_steps = [t.steps for t in full] == [t.steps for t in proj]
    same_reports = [r.to_dict() for r in analyse_many(full)] == [
        r.to_dict() for r in analyse_many(proj)
    ]
    ok = same_steps and same_reports

    mb = sum(map(len, data)) / 1e6
    base = med["orjson.loads, whole file"]
    print("loopcore projection benchmark: a parse of only the fields the analysis reads")
    print(f"command:     {' '.join([os.path.basename(sys.executable), *sys.argv])}")
    print(
        f"environment: Python {platform.python_version()}, CPU {cpu_model()}, "
        f"{os.cpu_count()} cores visible, load average {os.getloadavg()[0]:.2f}; "
        f"orjson {orjson.__version__}, msgspec {msgspec.__version__}, runs={args.runs} "
        "interleaved (medians)"
    )
    print(
        f"input:       {len(files)} mini-swe-agent trajectories, {mb:.1f} MB uncompressed, "
        f"{sum(len(t.steps) for t in full):,} steps"
    )
    print(
        f"check:       {'ok' if ok else 'FAILED'}: the traces built from the projection "
        f"{'equal' if same_steps else 'DIFFER from'} those of the full parse, Step for Step; "
        f"the burn reports {'are identical' if same_reports else 'DIFFER'}"
    )
    print()
    print(f"| {'parse (CPU s)':<32} | {'CPU s':>7} | {'MB/s':>7} | {'vs orjson':>9} |")
    print(f"|{'-' * 34}|{'-' * 9}|{'-' * 9}|{'-' * 11}|")
    for label, secs in med.items():
        print(f"| {label:<32} | {secs:>7.3f} | {mb / secs:>7.1f} | {secs / base:>8.2f}x |")
    print()
    print(
        "skipped values msgspec accepts and orjson refuses (a skipping parse must refuse them too):"
    )
    for label, doc in HOSTILE.items():
        verdicts = []
        for name, fn in (("orjson", orjson.loads), ("msgspec", dec.decode)):
            try:
                fn(doc)
                verdicts.append(f"{name} accepts")
            except (msgspec.DecodeError, orjson.JSONDecodeError, RecursionError):
                verdicts.append(f"{name} refuses")
        flag = "  <- differs" if verdicts[0] != verdicts[1].replace("msgspec", "orjson") else ""
        print(f"  {label:<24} {verdicts[0]:<16} {verdicts[1]}{flag}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
