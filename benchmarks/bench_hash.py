"""Canonical hashing: compiled core vs pure twin vs what the peers do, in one process.

    python benchmarks/bench_hash.py [--quick] [--callgrind]

Baselines, each on the same values:
  orjson+xxh3   xxh3_64(orjson.dumps(x, option=OPT_SORT_KEYS))   (the fast outside baseline)
  json+sha256   sha256(json.dumps(x, sort_keys=True))              (what most harnesses do)
  raw xxh3      xxh3_64 of the string's UTF-8 bytes (large strings only: the speed of light)
Bars (README.md, Benchmarks): >= 1.5x orjson+xxh3 on typical args, >= 15x the pure twin, and
>= 50% of raw xxh3 throughput on a 4 MB string. Every row first checks that the compiled
core and the pure twin give identical hashes on its values.

Times are medians of interleaved rounds, wall clock and (beside it) CPU time of this thread:
on a shared machine the CPU figures are the steadier ones. ``--callgrind`` adds instruction
counts per value under valgrind's callgrind (load never changes them): the compiled core
against orjson+xxh3 on each corpus. They are a check on the code, not the speed: under
valgrind xxHash's dispatcher sees no AVX-512, and instructions of different kinds (orjson's
SIMD string scans, a dict walk's dependent loads) do not cost the same time.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import orjson  # noqa: E402
import xxhash  # noqa: E402
from _env import environment, interleaved_ns_per_op, print_table  # noqa: E402

from loopcore import _native_flag  # noqa: E402

C = _native_flag.load_twin("hashing", "c")
PY = _native_flag.load_twin("hashing", "py")
rnd = random.Random(7)


def words(n):
    vocab = "the agent reads src/app.ts then runs npm test and edits the failing import".split()
    return " ".join(rnd.choice(vocab) for _ in range(n))


def code(nbytes):
    lines = []
    size = 0
    i = 0
    while size < nbytes:
        ln = f"    const value{i} = compute(input[{i}], {{ retries: {i % 5}, label: 'item-{i}' }});"
        lines.append(ln)
        size += len(ln) + 1
        i += 1
    return "\n".join(lines)[:nbytes]


TYPICAL_ARGS = [
    {"file_path": "/repo/src/components/Button.tsx", "offset": 0, "limit": 200},
    {
        "command": 'grep -rn "useEffect" src/ --include=*.tsx | head -50',
        "timeout": 120000,
        "description": "Find effect hooks",
    },
    {
        "pattern": "def analyse_burn",
        "path": "src/loopcore",
        "glob": "*.py",
        "output_mode": "content",
        "-n": True,
        "-C": 2,
    },
    {
        "file_path": "/repo/src/loopcore/guard.py",
        "old_string": code(240),
        "new_string": code(260),
        "replace_all": False,
    },
    {
        "todos": [
            {"content": words(8), "status": s, "activeForm": words(6)}
            for s in ("completed", "completed", "in_progress", "pending", "pending")
        ]
    },
    {
        "action": "send",
        "channel": "slack",
        "to": "C0123ABCD",
        "text": words(25),
        "threadId": "1712345678.000100",
    },
    {"command": "view", "path": "/workspace/django/db/models/query.py", "view_range": [1200, 1260]},
    {"query": "python xxhash streaming api release GIL", "allowed_domains": ["docs.python.org"]},
    {
        "cmd": ["bash", "-lc", "pytest -x tests/test_guard.py -q"],
        "workdir": "/repo",
        "timeout_ms": 600000,
        "env": {"CI": "1", "PYTHONHASHSEED": "0"},
    },
    {
        "path": "src",
        "recursive": True,
        "opts": {
            "depth": 3,
            "include": ["*.py", "*.pyx"],
            "exclude": [".venv", "build"],
            "follow_symlinks": False,
            "max_results": 500,
        },
    },
    {"file_path": "/repo/README.md", "content": code(2048)},
    {"input": "*** Begin Patch\n*** Update File: src/app.ts\n@@\n" + code(900) + "\n*** End Patch"},
]
SMALL_ARGS = TYPICAL_ARGS[:3] + TYPICAL_ARGS[6:8]

RESULTS = [
    {"exit_code": 0, "stdout": code(5000), "stderr": "", "duration_ms": 812, "pid": 4242},
    {
        "ok": True,
        "messageId": "1712345678.000200",
        "channel": "C0123ABCD",
        "ts": "1712345678.000200",
    },
    code(2048),
]


def fmt(x):
    return f"{x:,.0f}"


def cpu_ns_per_op(fns: dict, ops_per_call: int, repeats: int, min_time: float = 0.01) -> dict:
    """interleaved_ns_per_op on this thread's CPU clock (time spent descheduled on a busy
    machine is not counted)."""
    return interleaved_ns_per_op(fns, ops_per_call, repeats, min_time, clock=time.thread_time_ns)


CORPORA: dict = {}  # label -> values, filled below
LOOP_FLOOR: dict = {}  # label -> CPU ns per value of the same loop calling a no-op builtin


def _cg_child(side: str, corpus: str, rounds: int) -> None:
    """Run under callgrind by callgrind_ir(): hash the corpus once, then *rounds* more times."""
    values = CORPORA[corpus]
    if side == "c":
        h = C.canonical_hash

        def once():
            for v in values:
                h(v)
    else:
        dumps, opt, x3 = orjson.dumps, orjson.OPT_SORT_KEYS, xxhash.xxh3_64_intdigest

        def once():
            for v in values:
                x3(dumps(v, option=opt))

    once()
    for _ in range(rounds):
        once()


def callgrind_ir(side: str, corpus: str, rounds: int = 200) -> float | None:
    """Instructions per value of *side* ("c" or "orjson") on *corpus*, or None without valgrind.

    The difference of two runs (``rounds`` and zero extra rounds), so start-up and imports
    cancel out."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return None
    counts = []
    for n in (0, rounds):
        out = subprocess.run(
            [
                valgrind,
                "--tool=callgrind",
                "--callgrind-out-file=/dev/null",
                sys.executable,
                __file__,
                "--cg-child",
                side,
                corpus,
                str(n),
            ],
            capture_output=True,
            text=True,
            timeout=900,
            env={**os.environ, "PYTHONHASHSEED": "0"},  # the same start-up in both runs
        )
        m = re.search(r"Collected\s*:\s*(\d+)", out.stderr)
        if out.returncode != 0 or m is None:
            raise RuntimeError(f"callgrind run failed: {out.stderr[-500:]}")
        counts.append(int(m.group(1)))
    return (counts[1] - counts[0]) / (rounds * len(CORPORA[corpus]))


def row(label, values, quick):
    for v in values:
        assert C.canonical_hash(v) == PY.canonical_hash(v), f"twins disagree on {label}"
    c_hash = C.canonical_hash
    py_hash = PY.canonical_hash
    dumps = orjson.dumps
    opt = orjson.OPT_SORT_KEYS
    x3 = xxhash.xxh3_64_intdigest
    sha = hashlib.sha256
    jd = json.dumps
    fns = {
        "c": lambda: [c_hash(v) for v in values],
        "py": lambda: [py_hash(v) for v in values],
        "orjson": lambda: [x3(dumps(v, option=opt)) for v in values],
        "json": lambda: [sha(jd(v, sort_keys=True).encode()).digest() for v in values],
    }
    t = interleaved_ns_per_op(fns, len(values), repeats=5 if quick else 15)
    cpu = cpu_ns_per_op(
        {"c": fns["c"], "orjson": fns["orjson"], "loop": lambda: [id(v) for v in values]},
        len(values),
        repeats=5 if quick else 15,
    )
    LOOP_FLOOR[label] = cpu["loop"]
    t_c, t_py, t_or, t_js = t["c"], t["py"], t["orjson"], t["json"]
    return [
        label,
        fmt(t_c),
        fmt(t_py),
        fmt(t_or),
        fmt(t_js),
        f"{t_py / t_c:.1f}x",
        f"{t_or / t_c:.2f}x",
        f"{t_js / t_c:.1f}x",
        f"{cpu['orjson'] / cpu['c']:.2f}x ({fmt(cpu['c'])} vs {fmt(cpu['orjson'])})",
    ]


CORPORA.update(
    {
        "typical tool args (12 shapes)": TYPICAL_ARGS,
        "small args only (5 shapes)": SMALL_ARGS,
        "tool results (shell, send, 2 KB text)": RESULTS,
    }
)


def main(argv):
    if argv[:1] == ["--cg-child"]:
        _cg_child(argv[1], argv[2], int(argv[3]))
        return
    quick = "--quick" in argv
    print(environment(" ".join(["python benchmarks/bench_hash.py", *argv])))
    print(
        f"implementation under test: {C.__name__} vs {PY.__name__}; hash format v{C.HASH_FORMAT_VERSION}\n"
    )
    print(
        "median ns per value (lower is better); ratios are the baseline's time / compiled core's time"
    )
    rows = [row(label, values, quick) for label, values in CORPORA.items()]
    print_table(
        [
            "corpus",
            "loopcore c",
            "pure twin",
            "orjson+xxh3",
            "json+sha256",
            "vs pure",
            "vs orjson",
            "vs json+sha",
            "vs orjson, CPU time (ns)",
        ],
        rows,
    )
    print(
        "the timing loop itself (a no-op builtin per value, CPU ns): "
        + ", ".join(f"{label.split(' (')[0]} {fmt(ns)}" for label, ns in LOOP_FLOOR.items())
        + "; both sides pay it, so it caps the ratios (docs/hashing.md)"
    )
    cg_rows = []
    if "--callgrind" in argv:
        print("\ninstructions per value under callgrind (load-independent; see the module doc)")
        for label in CORPORA:
            ir_c = callgrind_ir("c", label)
            ir_or = callgrind_ir("orjson", label)
            if ir_c is None:
                print("valgrind is not installed: no instruction counts")
                break
            cg_rows.append([label, fmt(ir_c), fmt(ir_or), f"{ir_or / ir_c:.2f}x"])
        if cg_rows:
            print_table(["corpus", "loopcore c", "orjson+xxh3", "ratio"], cg_rows)

    print("\nlarge strings: throughput against raw xxh3_64 on the same UTF-8 bytes")
    srows = []
    sizes = [5, 100, 2048, 100 * 1024, 4 * 1024 * 1024]
    for size in sizes:
        s = ("output line %06d: ok\n" * (size // 20 + 1))[:size]
        b = s.encode()
        assert C.canonical_hash(s) == PY.canonical_hash(s)
        t = interleaved_ns_per_op(
            {
                "c": lambda s=s: C.canonical_hash(s),
                "raw": lambda b=b: xxhash.xxh3_64_intdigest(b),
                "orjson": lambda s=s: xxhash.xxh3_64_intdigest(orjson.dumps(s)),
            },
            1,
            repeats=5 if quick else 15,
        )
        t_c, t_raw, t_or = t["c"], t["raw"], t["orjson"]
        srows.append(
            [
                f"{size:,} B",
                fmt(t_c),
                fmt(t_raw),
                fmt(t_or),
                f"{size / t_c:.2f} GB/s",
                f"{100 * t_raw / t_c:.0f}%",
                f"{t_or / t_c:.2f}x",
            ]
        )
    print_table(
        [
            "string",
            "loopcore c ns",
            "raw xxh3 ns",
            "orjson+xxh3 ns",
            "c throughput",
            "% of raw xxh3",
            "vs orjson",
        ],
        srows,
    )
    four_mb = srows[-1]
    print(
        "\nbars: typical args vs orjson+xxh3 >= 1.5x: "
        f"{rows[0][6]} wall, {rows[0][8].split()[0]} CPU"
        + (f", {cg_rows[0][3]} instructions" if cg_rows else "")
        + f"; vs pure >= 15x: {rows[0][5]}; 4 MB string >= 50% of raw xxh3: {four_mb[5]}"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
