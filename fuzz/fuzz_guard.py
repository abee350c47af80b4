"""The guard: a random stream of check/record/reset calls; both twins decide the same, emit the
same events and end in the same state."""

from __future__ import annotations

import sys

import _common
import atheris

from loopcore import Policy
from loopcore.guard import _make_guard

SMALL = Policy(
    window=8,
    budgets={"todo_write": (3, 6)},
    generic_warn=3,
    generic_block=5,
    poll_warn=2,
    poll_block=4,
    cycle_warn=4,
    cycle_block=6,
    consecutive_repeat=True,
    repeat_warn=2,
    repeat_block=4,
    global_block=7,
    unknown_block=3,
    error_warn=2,
    error_block=3,
    redundant_warn=1,
    monologue=True,
    monologue_block=2,
    known_tools={"read", "process", "todo_write", "message", "exec", "write"},
)
POLICIES = [
    SMALL,
    Policy.default(),
    Policy.openclaw().replace(window=10),
    Policy.openhands(),
    Policy.cline(),
]
TOOLS = ["read", "process", "todo_write", "message", "exec", "write", "ghost"]
KINDS = [None, "observe", "mutate", "exec", "ask"]
TARGETS = [None, "a.ts", "b.ts"]


def _args(fdp, tool):
    if fdp.ConsumeIntInRange(0, 7) == 0:
        return _common.value(fdp)
    v = fdp.ConsumeIntInRange(0, 2)
    if tool == "process":
        return {"action": ["poll", "log", "kill"][v], "id": 1}
    if tool == "message":
        return {"action": ["send", "read", "send"][v], "text": "hi" if v < 2 else "other"}
    return {"v": v}


def _result(fdp, tool, i):
    if fdp.ConsumeIntInRange(0, 7) == 0:
        return _common.value(fdp)
    v = fdp.ConsumeIntInRange(0, 2)
    if tool == "message":
        return {"ok": v != 2, "messageId": f"m{i}"}
    if tool == "exec":
        return {"exitCode": v, "stdout": "x", "pid": i}
    return ["same", "other", {"n": i}][v]


def _call(fn, *a, **k):
    try:
        d = fn(*a, **k)
    except (TypeError, ValueError) as exc:
        return ("raises", type(exc).__name__, str(exc))
    return ("ok", d.to_dict() if hasattr(d, "to_dict") else d)


def TestOneInput(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    pol = POLICIES[fdp.ConsumeIntInRange(0, len(POLICIES) - 1)]
    ec, ep = [], []
    gc = _make_guard(pol, impl="c", on_event=ec.append)
    gp = _make_guard(pol, impl="py", on_event=ep.append)
    last = {}
    for i in range(fdp.ConsumeIntInRange(0, 80)):
        if fdp.remaining_bytes() == 0:
            break
        what = fdp.ConsumeIntInRange(0, 5)
        s = ["s1", "s2", "s3"][fdp.ConsumeIntInRange(0, 2)]
        run = [None, "r1"][fdp.ConsumeIntInRange(0, 1)]
        tool = TOOLS[fdp.ConsumeIntInRange(0, len(TOOLS) - 1)]
        kind = KINDS[fdp.ConsumeIntInRange(0, len(KINDS) - 1)]
        target = TARGETS[fdp.ConsumeIntInRange(0, len(TARGETS) - 1)]
        args = _args(fdp, tool)
        if what <= 1:
            rc = _call(gc.check, s, tool, args, run_id=run, kind=kind, target=target)
            rp = _call(gp.check, s, tool, args, run_id=run, kind=kind, target=target)
            last[s, tool] = rp
        elif what <= 3:
            res = _result(fdp, tool, i)
            tokens = fdp.ConsumeIntInRange(0, 1 << 40)
            rc = _call(
                gc.record, s, tool, args, res, run_id=run, kind=kind, target=target, tokens=tokens
            )
            rp = _call(
                gp.record, s, tool, args, res, run_id=run, kind=kind, target=target, tokens=tokens
            )
        elif what == 4:
            err = ["boom", "Unknown tool: ghost"][fdp.ConsumeIntInRange(0, 1)]
            rc = _call(gc.record, s, tool, args, error=err, run_id=run)
            rp = _call(gp.record, s, tool, args, error=err, run_id=run)
        else:
            rc = _call(gc.reset, s)
            rp = _call(gp.reset, s)
        if rc != rp:
            raise AssertionError(
                f"twins disagree at call {i} ({what}, {tool}): c={rc!r:.300} py={rp!r:.300}"
            )
    if ec != ep:
        raise AssertionError("twins emitted different events")
    if gc.stats() != gp.stats():
        raise AssertionError("twins ended with different stats")
    del last


if __name__ == "__main__":
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()
