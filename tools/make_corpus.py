"""Write a synthetic corpus of agent traces in real harness formats, for tests and benchmarks.

    python tools/make_corpus.py OUT_DIR --steps 1000000 [--seed 7] [--jsonl-steps N]

The traces are invented here (no third-party text): coding sessions of 20-200 tool calls as
mini-swe-agent 2.x trajectories (``*.traj.json``, chat messages with ``tool_calls`` and per-call
usage in ``extra.response.usage``) and as loopcore JSONL steps, in equal parts. Each session
mixes honest work with the waste the analysis exists to find (a file re-read unchanged, a
search re-run, a test re-run with nothing changed), so a benchmark exercises every path.
The output is deterministic for a given seed and size.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import random

FILES = [f"src/pkg/mod{i}.py" for i in range(40)]
BODY = "def f{i}(x):\n    return x + {i}\n"


def _session_calls(rng: random.Random, n: int) -> list[tuple[str, str]]:
    """(command, output) pairs of one session: reads, greps, edits, test runs, some repeated."""
    calls: list[tuple[str, str]] = []
    edited: set[str] = set()
    while len(calls) < n:
        r = rng.random()
        f = rng.choice(FILES)
        if r < 0.35:
            body = "".join(BODY.format(i=k) for k in range(rng.randint(5, 40)))
            calls.append((f"cat {f}", body))
            if rng.random() < 0.2:  # re-read, unchanged
                calls.append((f"cat {f}", body))
        elif r < 0.55:
            q = f"def f{rng.randint(0, 60)}"
            out = f"{f}:{rng.randint(1, 90)}:{q}(x):" if rng.random() < 0.7 else ""
            calls.append((f"grep -n '{q}' {f}", out))
            if rng.random() < 0.1:
                calls.append((f"grep -n '{q}' {f}", out))
        elif r < 0.75:
            calls.append((f"sed -i 's/return x + 1/return x + 2/' {f}", ""))
            edited.add(f)
        else:
            out = f"{rng.randint(1, 50)} passed, {rng.randint(0, 3)} failed"
            calls.append(("python -m pytest -q tests", out))
            if rng.random() < 0.15:
                calls.append(("python -m pytest -q tests", out))
    return calls[:n]


def _mini_swe_agent(sid: str, calls: list[tuple[str, str]], rng: random.Random) -> dict:
    msgs: list[dict] = [
        {
            "role": "system",
            "content": "You are a helpful assistant that can interact with a computer.",
        },
        {"role": "user", "content": f"Fix the failing test in the repository ({sid})."},
    ]
    prompt = 900
    for k, (cmd, out) in enumerate(calls):
        cid = f"call_{k:04d}_{sid}"
        completion = 30 + rng.randint(0, 60)
        msgs.append(
            {
                "role": "assistant",
                "content": "Let me look at this.",
                "tool_calls": [
                    {
                        "index": 0,
                        "id": cid,
                        "type": "function",
                        "function": {"name": "bash", "arguments": json.dumps({"command": cmd})},
                    }
                ],
                "extra": {
                    "actions": [{"command": cmd, "tool_call_id": cid}],
                    "response": {
                        "usage": {
                            "prompt_tokens": prompt,
                            "completion_tokens": completion,
                            "total_tokens": prompt + completion,
                        }
                    },
                },
            }
        )
        msgs.append(
            {"role": "tool", "tool_call_id": cid, "content": out, "extra": {"returncode": 0}}
        )
        prompt += completion + len(out) // 4 + 8
    msgs.append(
        {"role": "exit", "content": "", "extra": {"exit_status": "Submitted", "submission": ""}}
    )
    return {
        "info": {
            "mini_version": "2.2.7",
            "exit_status": "Submitted",
            "submission": "",
            "model_stats": {"instance_cost": 0.0, "api_calls": len(calls)},
        },
        "messages": msgs,
        "trajectory_format": "mini-swe-agent-1.1",
        "instance_id": sid,
    }


def _loopcore_steps(sid: str, calls: list[tuple[str, str]], rng: random.Random) -> list[dict]:
    return [
        {
            "session": sid,
            "turn": k,
            "name": "bash",
            "args": {"command": cmd},
            "result": out,
            "tokens_in": len(out) // 4 + 1,
            "tokens_out": 20 + rng.randint(0, 40),
        }
        for k, (cmd, out) in enumerate(calls)
    ]


def write_corpus(
    out: str | os.PathLike[str],
    steps: int,
    seed: int = 7,
    per_file_jsonl: int = 50,
    jsonl_steps: int | None = None,
) -> dict:
    """Write about *steps* steps under *out*; returns {"files", "steps", "sessions"}.

    A loopcore JSONL file holds about ``per_file_jsonl * 100`` steps, or *jsonl_steps* when
    given (large files are what the fleet path cuts into byte ranges)."""
    per_jsonl = jsonl_steps if jsonl_steps is not None else per_file_jsonl * 100
    rng = random.Random(seed)
    root = pathlib.Path(out)
    (root / "mini").mkdir(parents=True, exist_ok=True)
    (root / "steps").mkdir(parents=True, exist_ok=True)
    done = files = sessions = 0
    batch: list[dict] = []
    while done < steps:
        n = min(rng.randint(20, 200), steps - done)
        sid = f"sess-{sessions:07d}"
        calls = _session_calls(rng, n)
        if sessions % 2 == 0:
            (root / "mini" / f"{sid}.traj.json").write_text(
                json.dumps(_mini_swe_agent(sid, calls, rng))
            )
            files += 1
        else:
            batch.extend(_loopcore_steps(sid, calls, rng))
            if len(batch) >= per_jsonl:
                (root / "steps" / f"part-{files:06d}.jsonl").write_text(
                    "".join(json.dumps(s) + "\n" for s in batch)
                )
                files += 1
                batch = []
        done += n
        sessions += 1
    if batch:
        (root / "steps" / f"part-{files:06d}.jsonl").write_text(
            "".join(json.dumps(s) + "\n" for s in batch)
        )
        files += 1
    return {"files": files, "steps": done, "sessions": sessions}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--jsonl-steps", type=int, default=None, help="steps per loopcore JSONL file")
    a = ap.parse_args()
    print(json.dumps(write_corpus(a.out, a.steps, a.seed, jsonl_steps=a.jsonl_steps)))


if __name__ == "__main__":
    main()
