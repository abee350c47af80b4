"""A tiny agent harness guarded by loopcore: run it with ``python examples/guard_harness.py``.

A scripted "model" stands in for an LLM. It does some honest work, then falls into the three
loops that motivated the guard: rewriting its todo list every few calls across many turns
(the todo-list incident), re-sending the same message to the user while each send returns a
fresh message id (the duplicate-message incident), and polling a stuck process. The tools are
plain Python functions; ``guard.wrap`` checks each call before it runs and records its outcome
after, so the model sees warnings appended to tool output and blocks instead of results.
"""

from __future__ import annotations

import itertools
import logging

import loopcore

_ids = itertools.count(1000)


# -- the tools: ordinary functions --------------------------------------------------------------


def read_file(path: str) -> str:
    return f"<contents of {path}>"


def run_tests() -> dict:
    return {
        "status": "completed",
        "exitCode": 1,
        "aggregated": "1 failed: test_tz_offset",
        "durationMs": 812 + next(_ids) % 50,
        "pid": next(_ids),
    }


def todo_write(todos: list) -> str:
    return f"{len(todos)} todos saved"


def message(action: str, to: str, text: str) -> dict:
    # every send returns a fresh id and timestamp: exactly what defeated naive result hashing
    mid = next(_ids)
    return {
        "ok": True,
        "messageId": f"msg-{mid}",
        "ts": 1_700_000_000 + mid,
        "route": {"id": "dm-7"},
    }


def process(action: str, id: int) -> dict:
    return {"status": "running", "aggregated": "waiting for lock..."}


# -- the scripted model -------------------------------------------------------------------------


def scripted_model():
    """Yields (tool, kwargs) the way a looping model would issue them."""
    yield "read_file", {"path": "src/date.ts"}
    yield "run_tests", {}
    for turn in range(8):  # 8 turns, each rewriting the plan 7 times around one real action
        for k in range(7):
            yield "todo_write", {"todos": [f"fix tz offset (turn {turn}, rev {k})", "run tests"]}
        yield "read_file", {"path": f"src/util{turn}.ts"}
    for _ in range(22):
        yield (
            "message",
            {"action": "send", "to": "user", "text": "Still working on the time-zone fix!"},
        )
    for _ in range(21):
        yield "process", {"action": "poll", "id": 4}


def main() -> None:
    logging.basicConfig(level=logging.ERROR, format="  [log] %(levelname)s %(message)s")
    events = []
    guard = loopcore.Guard(loopcore.Policy.default(), on_event=events.append)
    tools = {
        fn.__name__: guard.wrap(fn, session="demo-session")
        for fn in (read_file, run_tests, todo_write, message, process)
    }

    blocked = 0
    for step, (name, kwargs) in enumerate(scripted_model()):
        seen = len(events)
        out = tools[name](**kwargs)
        text = out if isinstance(out, str) else repr(out)
        blocked += text.startswith("BLOCKED")
        if len(events) > seen:  # whenever the guard speaks up, print what it tells the model
            print(f"step {step:3d} {name:10s} -> {events[-1]['message']}")
    print()
    print(
        f"{len(events)} doom_loop_detected events, {blocked} of {step + 1} calls blocked, "
        f"engine: {guard.implementation}"
    )


if __name__ == "__main__":
    main()
