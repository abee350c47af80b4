"""Guard scenarios (docs/guard.md: detectors, result hashing, presets) and their edges, run against both engine twins.

"N calls" means N calls checked and recorded with their results; the decision under test is
the one ``check`` returns for the next call.
"""

from __future__ import annotations

import logging

import pytest

from loopcore import ALLOW, Decision, Guard, Policy
from loopcore.guard import _make_guard

TODO = "todo_write"


@pytest.fixture
def make(impl):
    def make(policy: Policy | None = None, **kw) -> Guard:
        return _make_guard(policy, impl=impl.name, **kw)

    return make


def calls(g: Guard, session, tool, args, result=None, n=1, *, results=None, **kw):
    """n calls of tool(args): check then record; returns the decisions."""
    out = []
    for i in range(n):
        d = g.check(session, tool, args, **kw)
        out.append(d)
        r = results(i) if results is not None else result
        g.record(session, tool, args, d if d.blocked else r, **kw)
    return out


def test_engine_is_the_requested_twin(make, impl):
    g = make()
    assert g.implementation == impl.name
    expected = "loopcore._native_guard" if impl.name == "c" else "loopcore._guard_py"
    assert type(g._engine).__module__ == expected


# ---------------------------------------------------------------- A. tool budget


def test_a1_budget_across_turns_warns_at_25_blocks_at_50(make):
    g = make()
    seen = []
    for turn in range(10):
        for j in range(10):
            args = {"todos": [{"content": f"step {turn}.{j}", "status": "in_progress"}]}
            d = g.check("s", TODO, args)
            seen.append(d)
            g.record("s", TODO, args, d if d.blocked else "ok")
    assert all(d is ALLOW for d in seen[:24])
    assert all(d.action == "warn" and d.detector == "tool_budget" for d in seen[24:49])
    assert [d.count for d in seen[24:49]] == list(range(25, 50))
    assert all(d.action == "block" and d.detector == "tool_budget" for d in seen[49:])
    assert seen[99].count == 100  # blocked attempts still count
    assert "todo list" in seen[49].message and "continue" in seen[49].message
    assert "25 times" in seen[24].message and seen[24].message.startswith("WARNING")


def test_a2_same_calls_over_ten_sessions_never_warn(make):
    g = make()
    for s in range(10):
        for j in range(10):
            d = g.check(f"s{s}", TODO, {"i": j})
            assert d is ALLOW
            g.record(f"s{s}", TODO, {"i": j}, "ok")


def test_a3_each_crossing_emits_one_event(make):
    events = []
    g = make(on_event=events.append)
    for i in range(60):
        d = g.check("s", TODO, {"i": i})
        g.record("s", TODO, {"i": i}, d if d.blocked else "ok")
        if i + 1 == 25:
            assert len(events) == 1
        if i + 1 == 29:
            assert len(events) == 1  # 26..29 are in the same bucket as 25
    warn = [e for e in events if e["level"] == "warn"]
    block = [e for e in events if e["level"] == "block"]
    assert warn[0] == {
        **warn[0],
        "event": "doom_loop_detected",
        "session": "s",
        "tool": TODO,
        "detector": "tool_budget",
        "count": 25,
        "level": "warn",
    }
    assert [e["count"] for e in warn] == [25, 30, 40]
    assert [e["count"] for e in block] == [50, 60]
    assert all(e["key"] == f"tool_budget:{TODO}" for e in events)


def test_a4_other_tools_do_not_count_and_reset_clears(make):
    g = make()
    for i in range(24):
        calls(g, "s", TODO, {"i": i}, "ok")
        calls(g, "s", "read", {"path": f"f{i}"}, "text")
    d = g.check("s", TODO, {"i": 99})
    assert d.action == "warn" and d.count == 25
    g.reset("s")
    assert "s" not in g
    d = g.check("s", TODO, {"i": 100})
    assert d is ALLOW
    for i in range(23):
        calls(g, "s", TODO, {"j": i}, "ok")
    assert g.check("s", TODO, {"j": -1}).count == 25


@pytest.mark.parametrize("tool", ["update_plan", "TodoWrite", "todowrite", "todo_write"])
def test_a5_default_budget_tools(make, tool):
    g = make()
    for i in range(24):
        assert calls(g, "s", tool, {"i": i}, "ok") == [ALLOW]
    assert g.check("s", tool, {"i": 24}).detector == "tool_budget"


def test_a5_budgets_are_per_tool_and_configurable(make):
    g = make(Policy(budgets={"deploy": (2, 3), TODO: (4, 6)}))
    assert [d.action for d in calls(g, "s", "deploy", None, "ok", n=4, results=lambda i: i)] == [
        "allow",
        "warn",
        "block",
        "block",
    ]
    assert g.check("s", TODO, {"x": 1}) is ALLOW  # deploy's count is not todo's
    assert g.check("s", "update_plan", {"x": 1}) is ALLOW  # not budgeted in this policy
    d = calls(g, "s", "deploy", None, "ok")[0]
    assert d.blocked and "calling deploy" in d.message


def test_budget_switch_off(make):
    g = make(Policy(tool_budget=False))
    ds = [calls(g, "s", TODO, {"i": i}, "ok")[0] for i in range(60)]
    assert all(d is ALLOW for d in ds)


# ---------------------------------------------------------------- B. repeats, OpenClaw preset

OC = Policy.openclaw()


def test_b1_args_hash(make):
    g = make()
    h = g.args_hash
    assert h("read", {"path": "a", "n": 1}) == h("read", {"n": 1, "path": "a"})
    assert h("read", {"path": "a"}) != h("read", {"path": "b"})
    assert h("read", {"path": "a"}) != h("write", {"path": "a"})
    big = h("write", {"content": "x" * 20_000})
    assert 0 <= big < 2**64 and big != h("write", {"content": "x" * 19_999 + "y"})
    a: list = [1]
    a.append(a)
    b: list = [1]
    b.append(b)
    assert h("t", {"v": a}) == h("t", {"v": b})


def test_b2_window_keeps_the_newest_30(make):
    g = make(OC)
    calls(g, "s", "read", {"p": "x"}, "same", n=10)
    for i in range(19):
        calls(g, "s", "read", {"p": i}, "r")
    assert len(g.history("s")) == 29
    assert g.check("s", "read", {"p": "x"}).detector == "generic_repeat"
    g2 = make(OC)
    calls(g2, "s", "read", {"p": "x"}, "same", n=10)
    for i in range(30):
        calls(g2, "s", "read", {"p": i}, "r")
    assert len(g2.history("s")) == 30
    assert g2.check("s", "read", {"p": "x"}) is ALLOW


def test_b3_distinct_calls_and_empty_history(make):
    g = make(OC)
    assert g.check("s", "read", {"p": 0}) is ALLOW
    g.reset("s")
    assert all(d is ALLOW for i in range(15) for d in calls(g, "s", "read", {"p": i}, "r"))


def test_b4_ten_identical_calls_warn(make):
    g = make(OC)
    assert all(d is ALLOW for d in calls(g, "s", "read", {"p": 1}, "same", n=10))
    d = g.check("s", "read", {"p": 1})
    assert (d.action, d.detector, d.count) == ("warn", "generic_repeat", 10)
    assert "10 times" in d.message
    assert d.of_step == 9 and d.key.startswith("generic_repeat:read:")


def test_b4_boundary_nine_is_allowed(make):
    g = make(OC)
    calls(g, "s", "read", {"p": 1}, "same", n=9)
    assert g.check("s", "read", {"p": 1}) is ALLOW


def test_b5_twenty_identical_outcomes_block(make):
    g = make(OC)
    ds = calls(g, "s", "read", {"p": 1}, "same", n=20)
    assert ds[-1].action == "warn"  # 19 before it: still a warning
    d = g.check("s", "read", {"p": 1})
    assert (d.action, d.detector, d.count) == ("block", "generic_repeat", 20)
    assert "identical outcomes" in d.message


def test_b6_changing_output_only_warns(make):
    g = make(OC)
    ds = calls(g, "s", "read", {"p": 1}, n=30, results=lambda i: f"line {i}")
    ds.append(g.check("s", "read", {"p": 1}))
    assert not any(d.blocked for d in ds)
    assert ds[-1].action == "warn"


@pytest.mark.parametrize(
    "tool, args", [("read", {"p": 1}), ("process", {"action": "poll", "id": 7})]
)
def test_b7_global_breaker(make, tool, args):
    g = make(OC.replace(generic_repeat=False, poll_no_progress=False))
    calls(g, "s", tool, args, "same", n=29)
    assert g.check("s", tool, args).action != "block"
    g2 = make(OC)
    ds = calls(g2, "s2", tool, args, "same", n=30)
    assert ds[-1].blocked  # the 20-count blocks came first, so only 20 are recorded
    g3 = make(OC.replace(generic_repeat=False, poll_no_progress=False))
    calls(g3, "s", tool, args, "same", n=30)
    d = g3.check("s", tool, args)
    assert (d.action, d.detector, d.count) == ("block", "global_breaker", 30)


def test_b8_polls(make):
    g = make(OC)
    poll = {"action": "poll", "sessionId": "p1"}
    calls(g, "s", "process", poll, {"status": "running", "aggregated": "..."}, n=10)
    d = g.check("s", "process", poll)
    assert (d.action, d.detector, d.count) == ("warn", "poll_no_progress", 10)
    g.record("s", "process", poll, {"status": "running", "aggregated": "..."})
    calls(g, "s", "process", poll, {"status": "running", "aggregated": "..."}, n=9)
    d = g.check("s", "process", poll)
    assert (d.action, d.detector, d.count) == ("block", "poll_no_progress", 20)
    g2 = make(OC)
    ds = calls(
        g2,
        "s",
        "command_status",
        {"id": 3},
        n=25,
        results=lambda i: {"status": "running", "output": "." * i},
    )
    assert all(d is ALLOW for d in ds)
    assert g2.check("s", "command_status", {"id": 3}) is ALLOW


def test_b9_run_scopes(make):
    g = make(OC)
    calls(g, "s", "read", {"p": 1}, "same", n=10, run_id="heartbeat-1")
    assert g.check("s", "read", {"p": 1}, run_id="heartbeat-2") is ALLOW
    assert g.check("s", "read", {"p": 1}) is ALLOW  # unscoped history is its own
    assert g.check("s", "read", {"p": 1}, run_id="heartbeat-1").action == "warn"
    g2 = make(OC)
    calls(g2, "s", "read", {"p": 1}, "same", n=10)
    assert g2.check("s", "read", {"p": 1}, run_id="r") is ALLOW
    g2.reset("s")  # a reset clears every run of the session
    assert len(g2) == 0


def _exec_result(i, exit_code=0, out="ok\n"):
    return {
        "content": [{"type": "text", "text": out}],
        "details": {
            "status": "completed",
            "exitCode": exit_code,
            "aggregated": out,
            "durationMs": 100 + i,
            "cwd": f"/tmp/run{i}",
            "pid": 4000 + i,
            "startedAt": 1700000000 + i,
            "timestamp": i,
        },
    }


def test_b10_exec_results_judged_on_status_exit_output(make):
    g = make(OC)
    assert g.result_hash("exec", {"cmd": "make"}, _exec_result(1)) == g.result_hash(
        "exec", {"cmd": "make"}, _exec_result(2)
    )
    assert g.result_hash("exec", {"cmd": "make"}, _exec_result(1)) != g.result_hash(
        "exec", {"cmd": "make"}, _exec_result(1, 2)
    )
    assert g.result_hash("exec", {"cmd": "make"}, _exec_result(1)) != g.result_hash(
        "exec", {"cmd": "make"}, _exec_result(1, 0, "err")
    )
    flat1 = {"returncode": 1, "stdout": "fail", "duration": 1.5, "pid": 10}
    flat2 = {"returncode": 1, "stdout": "fail", "duration": 2.5, "pid": 11}
    assert g.result_hash("bash", {"c": 1}, flat1) == g.result_hash("bash", {"c": 1}, flat2)
    # other tools keep full hashing: the pid is part of their outcome
    assert g.result_hash("read", {"c": 1}, flat1) != g.result_hash("read", {"c": 1}, flat2)
    calls(g, "s", "exec", {"cmd": "make"}, n=20, results=_exec_result)
    d = g.check("s", "exec", {"cmd": "make"})
    assert (d.action, d.detector) == ("block", "generic_repeat")


def test_b11_unknown_tool(make):
    g = make(OC)
    for i in range(9):
        g.check("s", "frobnicate", {"i": i})
        g.record("s", "frobnicate", {"i": i}, error="Unknown tool: frobnicate")
    assert g.check("s", "frobnicate", {"i": 9}) is ALLOW
    g.record("s", "frobnicate", {"i": 9}, error=KeyError("tool 'frobnicate' not found"))
    d = g.check("s", "frobnicate", {"i": 10})
    assert (d.action, d.detector, d.count) == ("block", "unknown_tool", 10)
    assert "frobnicate" in d.message


def test_b11_known_tools_marks_unknown_at_check(make):
    g = make(OC.replace(known_tools={"read"}))
    for i in range(10):
        assert g.check("s", "nope", {"i": i}) is ALLOW
    assert g.check("s", "nope", {"i": 10}).detector == "unknown_tool"
    assert g.check("s", "read", {"i": 0}) is ALLOW


def test_b12_ping_pong(make):
    g = make(OC)
    ds = []
    for _i in range(5):
        ds.append(g.check("s", "read", {"p": "a"}))
        ds.append(g.check("s", "list", {"dir": "."}))
    # OpenClaw counts the checked call: 9 alternating calls before it make the 10th a warning
    assert all(d is ALLOW for d in ds[:9])
    d = ds[9]
    assert (d.action, d.detector, d.count) == ("warn", "cycle", 10)
    assert "(with read)" in d.message and d.of_step == 7
    d = g.check("s", "read", {"p": "a"})
    assert (d.action, d.detector, d.count) == ("warn", "cycle", 11)
    assert "(with list)" in d.message


def test_b12_ping_pong_boundary(make):
    g = make(OC.replace(cycle_warn=4, cycle_block=None))
    seq = [("read", {"p": "a"}), ("list", {"dir": "."})] * 3
    ds = [g.check("s", t, a) for t, a in seq[:4]]
    assert ds[:3] == [ALLOW] * 3
    assert (ds[3].action, ds[3].count) == ("warn", 4)


@pytest.mark.parametrize("stable", [True, False])
def test_b12_ping_pong_with_outcomes(make, stable):
    g = make(OC)
    ds = []
    for i in range(10):
        ds += calls(g, "s", "read", {"p": "a"}, "A" if stable else f"A{i}")
        ds += calls(g, "s", "list", {"dir": "."}, "B" if stable else f"B{i}")
    assert [d.action for d in ds[9:19]] == ["warn"] * 10
    if stable:
        assert (ds[19].action, ds[19].detector, ds[19].count) == ("block", "cycle", 20)
        assert "no progress" in ds[19].message
    else:
        assert ds[19].action == "warn"
        d = g.check("s", "read", {"p": "a"})
        assert (d.action, d.detector, d.count) == ("warn", "cycle", 21)


def test_b12_read_list_read_write_is_not_stuck(make):
    g = make(OC)
    for t, a in [("read", {"p": "a"}), ("list", {}), ("read", {"p": "a"}), ("write", {"p": "a"})]:
        assert calls(g, "s", t, a, "r") == [ALLOW]


def test_b13_distinct_paths(make):
    g = make(OC)
    for i in range(30):
        assert calls(g, "s", "read", {"path": f"f{i}"}, "t") == [ALLOW]
    g2 = make(OC)
    for i in list(range(15)) * 2:
        assert calls(g2, "s", "read", {"path": f"f{i}"}, "t") == [ALLOW]
    g3 = make(OC)
    for i in range(15):
        assert calls(g3, "s", "read", {"path": f"f{i}"}, "t", n=2) == [ALLOW, ALLOW]


def test_b14_large_result_fixed_size_hash(make):
    g = make(OC)
    h1 = g.result_hash("read", {}, "y" * 40_000)
    h2 = g.result_hash("read", {}, "y" * 39_999 + "z")
    assert 0 <= h1 < 2**64 and h1 != h2


def test_b15_outcome_attaches_to_newest_matching_call(make):
    g = make(OC)
    g.check("s", "read", {"p": 1}, call_id="c1")
    g.check("s", "read", {"p": 1}, call_id="c2")
    g.record("s", "read", {"p": 1}, "first", call_id="c1")
    h = g.history("s")
    assert [r for _, _, r in h] == [g.result_hash("read", {"p": 1}, "first"), None]
    g.record("s", "read", {"p": 1}, "second")
    assert all(r is not None for _, _, r in g.history("s"))
    # no call id: the newest pending call receives it
    g.check("s", "read", {"p": 2})
    g.check("s", "read", {"p": 2})
    g.record("s", "read", {"p": 2}, "x")
    assert [r is None for _, _, r in g.history("s")[-2:]] == [True, False]
    # another run never receives it: the outcome is a new call of that run
    g.check("s", "read", {"p": 3}, run_id="r1")
    g.record("s", "read", {"p": 3}, "y", run_id="r2")
    assert [r for _, _, r in g.history("s", run_id="r1")] == [None]
    assert len(g.history("s", run_id="r2")) == 1


# ---------------------------------------------------------------- C. volatile ids in sends


def _send_result(i, conv="conv-1"):
    mid = f"m-{1000 + i}"
    return {
        "content": [
            {"type": "text", "text": f"Sent message {mid} (run r-{i}) at {1700000000 + i}"}
        ],
        "details": {
            "ok": True,
            "messageId": mid,
            "receipt": {"token": f"rc{i}"},
            "runId": f"r-{i}",
            "ts": 1700000000 + i,
            "route": {"id": conv},
        },
    }


SEND = {"action": "send", "to": "user-1", "text": "The build is green."}


def test_c1_ids_stripped_in_details_and_text(make):
    g = make(OC)
    assert g.result_hash("message", SEND, _send_result(1)) == g.result_hash(
        "message", SEND, _send_result(2)
    )
    flat = lambda i: {
        "ok": True,
        "messageId": f"id-{i}9999",
        "summary": f"delivered id-{i}9999 to user-1",
    }
    assert g.result_hash("message", SEND, flat(1)) == g.result_hash("message", SEND, flat(2))
    assert g.result_hash("message", SEND, flat(1)) != g.result_hash(
        "message", SEND, {**flat(1), "ok": False}
    )


def test_c2_nested_broadcast_ids(make):
    g = make(OC)
    args = {"action": "broadcast", "text": "hi"}
    res = lambda i: {
        "results": [
            {"channel": "a", "result": {"messageId": f"x{i}"}},
            {"channel": "b", "result": {"messageId": f"y{i}", "platformMessageIds": [i]}},
        ]
    }
    assert g.result_hash("message", args, res(1)) == g.result_hash("message", args, res(2))


@pytest.mark.parametrize(
    "action",
    [
        "send",
        "broadcast",
        "reply",
        "thread-reply",
        "sendWithEffect",
        "sendAttachment",
        "upload-file",
        "sticker",
        "poll",
    ],
)
def test_c3_identical_sends_escalate_to_block(make, action):
    g = make(OC)
    args = {**SEND, "action": action}
    res = lambda i: {
        "ok": True,
        "messageId": f"m{i}",
        "fileId": f"f{i}",
        "pollId": f"p{i}",
        "createdAt": i,
    }
    calls(g, "s", "message", args, n=20, results=res)
    d = g.check("s", "message", args)
    assert d.blocked and d.detector == "generic_repeat"


def test_c3_sessions_send_and_declared_channel_tools(make):
    g = make(OC)
    calls(
        g,
        "s",
        "sessions_send",
        {"to": "s2", "text": "hi"},
        n=20,
        results=lambda i: {"runId": f"r{i}", "ok": 1},
    )
    assert g.check("s", "sessions_send", {"to": "s2", "text": "hi"}).blocked
    res = lambda i: {"ok": True, "message_id": i + 100000}
    g2 = make(OC)
    calls(g2, "s", "telegram", {"text": "hi"}, n=20, results=res)
    assert not g2.check("s", "telegram", {"text": "hi"}).blocked  # not declared: ids are progress
    g3 = make(OC.replace(send_tools={"telegram"}))
    calls(g3, "s", "telegram", {"text": "hi"}, n=20, results=res)
    assert g3.check("s", "telegram", {"text": "hi"}).blocked


def test_c4_different_text_is_never_no_progress(make):
    g = make(OC)
    for i in range(30):
        args = {**SEND, "text": f"update {i}"}
        assert calls(g, "s", "message", args, _send_result(i)) == [ALLOW]


@pytest.mark.parametrize("action", ["read", "search", "edit", "channel-create"])
def test_c5_non_send_actions_keep_full_hashing(make, action):
    g = make(OC)
    args = {"action": action, "channel": "c"}
    r = lambda i: {"messages": [{"messageId": f"m{i}", "timestamp": i}]}
    assert g.result_hash("message", args, r(1)) != g.result_hash("message", args, r(2))


def test_c6_stable_route_id_survives_changing_one_keeps_below_block(make):
    g = make(OC)
    assert g.result_hash("message", SEND, _send_result(1, "conv-1")) != g.result_hash(
        "message", SEND, _send_result(1, "conv-2")
    )
    calls(g, "s", "message", SEND, n=25, results=lambda i: _send_result(i, f"conv-{i}"))
    d = g.check("s", "message", SEND)
    assert d.action == "warn"


def test_c7_delivery_object_bare_id(make):
    g = make(OC)
    obj = lambda i, **kw: {"message": {"id": f"msg-{i}", "text": "hi", **kw}}
    for extra in (
        {"direction": "outbound"},
        {"senderId": "bot"},
        {"accountId": "acc"},
        {"conversation": {"id": "c"}},
    ):
        assert g.result_hash("message", SEND, obj(1, **extra)) == g.result_hash(
            "message", SEND, obj(2, **extra)
        )
    # not a delivery object (no text): its id is a fact and stays
    assert g.result_hash("message", SEND, {"channel": {"id": "c1"}}) != g.result_hash(
        "message", SEND, {"channel": {"id": "c2"}}
    )


def test_c8_own_veto_keeps_the_block_sticky(make):
    g = make(OC)
    calls(g, "s", "message", SEND, n=20, results=_send_result)
    d = g.check("s", "message", SEND)
    assert d.blocked
    g.record("s", "message", SEND, d)  # the harness records the veto as the tool's result
    assert g.check("s", "message", SEND).blocked
    g.record("s", "message", SEND, {"details": {"status": "blocked", "deniedReason": "tool-loop"}})
    assert g.check("s", "message", SEND).blocked
    g.record("s", "message", SEND, d.message)  # the block message as the tool's output
    assert g.check("s", "message", SEND).blocked
    assert len(g.history("s")) == 20


def test_real_outcome_of_a_blocked_call_is_recorded(make):
    """A replay feeds the outcome that really happened: it is history, not a veto."""
    g = make(OC)
    calls(g, "s", "read", {"p": 1}, "same", n=20)
    assert g.check("s", "read", {"p": 1}).blocked
    g.record("s", "read", {"p": 1}, "changed")
    assert len(g.history("s")) == 21
    d = g.check("s", "read", {"p": 1})
    assert (d.action, d.detector) == ("warn", "generic_repeat")  # progress: the streak was broken


def test_c8_foreign_denials_escalate(make):
    g = make(OC)
    denial = {"details": {"status": "blocked", "deniedReason": "approval-denied"}}
    calls(g, "s", "exec", {"cmd": "rm -rf /"}, denial, n=20)
    assert g.check("s", "exec", {"cmd": "rm -rf /"}).blocked


def test_default_volatile_key_matching_is_exact():
    from loopcore.guard import strip_send_result
    from loopcore.policy import DEFAULT_VOLATILE_KEYS

    out = strip_send_result(
        {"messageId": 1, "MessageId": 2, "ts": 3, "tss": 4}, DEFAULT_VOLATILE_KEYS
    )
    assert out == {"MessageId": 2, "tss": 4}


# ---------------------------------------------------------------- D. presets


def test_d1_opencode_third_identical_call(make):
    g = make(Policy.opencode())
    assert calls(g, "s", "edit", {"f": 1}, n=2, results=lambda i: i) == [ALLOW, ALLOW]
    d = g.check("s", "edit", {"f": 1})
    assert (d.action, d.detector, d.count) == ("block", "consecutive_repeat", 3)
    g2 = make(Policy.opencode())
    calls(g2, "s", "edit", {"f": 1}, "r", n=2)
    calls(g2, "s", "read", {"f": 1}, "r")
    assert g2.check("s", "edit", {"f": 1}) is ALLOW


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5])
def test_d2_gemini_cycle_repeated_five_times(make, k):
    g = make(Policy.gemini_cli())
    unit = [("tool", {"i": i}) for i in range(k)]
    seq = unit * 5
    ds = [g.check("s", t, a) for t, a in seq[:-1]]
    assert all(d is ALLOW for d in ds)
    d = g.check("s", *seq[-1])
    assert d.blocked and d.detector == ("consecutive_repeat" if k == 1 else "cycle")
    assert d.count == (5 if k == 1 else 5)


def test_d3_openhands_identical_pairs(make):
    g = make(Policy.openhands())
    calls(g, "s", "run", {"c": "ls"}, "same", n=4)
    d = g.check("s", "run", {"c": "ls"})
    assert d.blocked and d.detector == "consecutive_repeat"
    g2 = make(Policy.openhands())
    calls(g2, "s", "run", {"c": "ls"}, n=4, results=lambda i: i)
    assert g2.check("s", "run", {"c": "ls"}) is ALLOW
    g3 = make(Policy.openhands())
    calls(g3, "s", "run", {"c": "ls"}, "same", n=3)
    assert g3.check("s", "run", {"c": "ls"}) is ALLOW


def test_d3_openhands_failing_actions(make):
    g = make(Policy.openhands())
    for _ in range(3):
        g.check("s", "run", {"c": "make"})
        g.record("s", "run", {"c": "make"}, error="exit 2: missing target")
    d = g.check("s", "run", {"c": "make"})
    assert (d.action, d.detector, d.count) == ("block", "error_streak", 3)


def test_d3_openhands_monologue(make):
    g = make(Policy.openhands())
    msg = {"text": "I will now fix the bug."}
    calls(g, "s", "agent_message", msg, None, n=3, kind="ask")
    d = g.check("s", "agent_message", msg, kind="ask")
    assert (d.action, d.detector) == ("block", "monologue")
    g2 = make(Policy.openhands())
    calls(g2, "s", "agent_message", msg, None, n=2, kind="ask")
    calls(g2, "s", "read", {"p": 1}, "x")
    calls(g2, "s", "agent_message", msg, None, n=1, kind="ask")
    assert g2.check("s", "agent_message", msg, kind="ask") is ALLOW


def test_d3_openhands_alternation(make):
    g = make(Policy.openhands())
    for _ in range(3):
        calls(g, "s", "read", {"p": "a"}, "A")
        calls(g, "s", "edit", {"p": "a"}, "B")
    d = g.check("s", "read", {"p": "a"})
    assert (d.action, d.detector, d.count) == ("block", "cycle", 7)
    g2 = make(Policy.openhands())
    calls(g2, "s", "edit", {"p": "a"}, "B")
    for _ in range(2):
        calls(g2, "s", "read", {"p": "a"}, "A")
        calls(g2, "s", "edit", {"p": "a"}, "B")
    assert g2.check("s", "read", {"p": "a"}) is ALLOW


def test_d4_cline_soft_and_hard_limits(make):
    g = make(Policy.cline())
    ds = calls(g, "s", "write", {"f": 1}, n=5, results=lambda i: i)
    # warned exactly at the 3rd (cline's soft limit), refused at the 5th
    assert [d.action for d in ds] == ["allow", "allow", "warn", "allow", "block"]
    assert (ds[2].count, ds[4].count) == (3, 5)


# ---------------------------------------------------------------- other detectors


def test_error_streak_default(make):
    g = make()
    for _i in range(3):
        assert g.check("s", "test", {"t": 1}) is ALLOW
        g.record("s", "test", {"t": 1}, error=RuntimeError("AssertionError in test_x"))
    d = g.check("s", "test", {"t": 1})
    assert (d.action, d.detector, d.count) == ("warn", "error_streak", 3)
    g.record("s", "test", {"t": 1}, error=RuntimeError("AssertionError in test_x"))
    g.check("s", "test", {"t": 1})
    g.record("s", "test", {"t": 1}, error=RuntimeError("AssertionError in test_x"))
    d = g.check("s", "test", {"t": 1})
    assert (d.action, d.detector, d.count) == ("block", "error_streak", 5)


def test_error_streak_needs_the_same_failure(make):
    g = make()
    for i in range(6):
        g.check("s", "test", {"t": 1})
        g.record("s", "test", {"t": 1}, error=f"failure #{i}")
    assert g.check("s", "test", {"t": 1}) is ALLOW


def test_redundant_observation(make):
    g = make()
    assert calls(g, "s", "read", {"path": "a.ts"}, "body", kind="observe", target="a.ts") == [ALLOW]
    d = g.check("s", "read", {"path": "a.ts"}, kind="observe", target="a.ts")
    assert (d.action, d.detector, d.count, d.of_step) == ("warn", "redundant_observation", 1, 0)
    g.record("s", "read", {"path": "a.ts"}, "body")
    calls(g, "s", "write", {"path": "a.ts"}, "ok", kind="mutate", target="a.ts")
    assert g.check("s", "read", {"path": "a.ts"}, kind="observe", target="a.ts") is ALLOW
    g.record("s", "read", {"path": "a.ts"}, "body")
    calls(
        g, "s", "bash", {"cmd": "npm test"}, "ok", kind="exec"
    )  # unknown effects: everything may have changed
    assert g.check("s", "read", {"path": "a.ts"}, kind="observe", target="a.ts") is ALLOW
    g.record("s", "read", {"path": "a.ts"}, "body")
    calls(g, "s", "write", {"path": "b.ts"}, "ok", kind="mutate", target="b.ts")
    assert (
        g.check("s", "read", {"path": "a.ts"}, kind="observe", target="a.ts").detector
        == "redundant_observation"
    )


def test_classify_supplies_kind_and_target(make):
    def classify(tool, args):
        return ("observe", args.get("path")) if tool == "read" else ("mutate", args.get("path"))

    g = make(classify=classify)
    calls(g, "s", "read", {"path": "a"}, "x")
    assert g.check("s", "read", {"path": "a"}).detector == "redundant_observation"
    with pytest.raises(ValueError, match="kind must be one of"):
        g.check("s", "read", {"path": "a"}, kind="look")


# ---------------------------------------------------------------- edges


def test_block_then_a_different_call(make):
    g = make(OC)
    calls(g, "s", "read", {"p": 1}, "same", n=20)
    d = g.check("s", "read", {"p": 1})
    assert d.blocked
    g.record("s", "read", {"p": 1}, d)
    assert calls(g, "s", "read", {"p": 2}, "other") == [ALLOW]
    assert g.check("s", "read", {"p": 1}).blocked  # the loop is still a loop


def test_many_interleaved_sessions(make):
    g = make(OC)
    sessions = [f"s{i}" for i in range(50)]
    for _rnd in range(10):
        for s in sessions:
            assert calls(g, s, "read", {"p": 1}, "same") == [ALLOW]
    for s in sessions:
        d = g.check(s, "read", {"p": 1})
        assert (d.action, d.count) == ("warn", 10)
    assert len(g) == 50


def test_sessions_under_different_run_ids(make):
    g = make(OC)
    for run in ("r1", "r2", "r3"):
        calls(g, "s", "read", {"p": 1}, "same", n=10 if run == "r2" else 5, run_id=run)
    assert g.check("s", "read", {"p": 1}, run_id="r1") is ALLOW
    assert g.check("s", "read", {"p": 1}, run_id="r2").action == "warn"
    assert g.check("s", "read", {"p": 1}, run_id="r3") is ALLOW
    assert list(g.sessions()) == ["s"]
    g.forget("s")
    assert "s" not in g and len(g) == 0


def test_decision_shape():
    assert (
        ALLOW.action == "allow" and ALLOW.detector is None and ALLOW.allowed and not ALLOW.blocked
    )
    d = Decision("block", "cycle", 3, "m", "k", 1)
    assert d.to_dict() == {
        "action": "block",
        "detector": "cycle",
        "count": 3,
        "message": "m",
        "key": "k",
        "of_step": 1,
    }
    assert d == Decision("block", "cycle", 3, "m", "k", 1) and "cycle" in repr(d)
    d.message, d.key = "other", "k2"  # plain attributes, as before
    assert (d.message, d.key) == ("other", "k2")


def test_guard_decisions_render_like_plain_ones(make):
    """A guard's warn/block renders message and key on first access; it is an ordinary Decision."""
    import copy
    import pickle

    g = make(OC)
    calls(g, "s", "read", {"p": 1}, "same", n=20)
    d = g.check("s", "read", {"p": 1})
    assert type(d) is Decision and d.action == "block" and d.detector == "generic_repeat"
    plain = Decision(d.action, d.detector, d.count, d.message, d.key, d.of_step)
    assert d == plain and hash(d) == hash(plain) and repr(d) == repr(plain)
    assert (
        d.message.startswith("BLOCKED: you called read with identical arguments")
        and "20 times" in d.message
    )
    assert (
        d.key.startswith("generic_repeat:read:") and len(d.key) == len("generic_repeat:read:") + 16
    )
    for other in (pickle.loads(pickle.dumps(d)), copy.copy(d), copy.deepcopy(d)):
        assert other == d and other.message == d.message
    assert ALLOW.message == "" and ALLOW.key is None


def test_cycle_decisions_name_the_other_tool(make):
    g = make(OC)
    for _ in range(6):
        calls(g, "s", "read", {"p": 1}, "same")
        calls(g, "s", "list", {"d": "."}, "same")
    d = g.check("s", "read", {"p": 1})
    assert d.detector == "cycle" and "(with list)" in d.message and d.key.startswith("cycle:")


def test_invalid_arguments(make):
    with pytest.raises(TypeError, match="policy must be a loopcore.Policy"):
        Guard(policy="default")
    with pytest.raises(ValueError, match="max_sessions"):
        make(max_sessions=0)
    with pytest.raises(ValueError, match="ttl"):
        make(ttl=0)
    g = make()
    with pytest.raises(TypeError, match="tool must be a str"):
        g.check("s", 42, {})
    assert g.check("s", "t", {"obj": object()}) is ALLOW  # unsupported values hash by repr


# ---------------------------------------------------------------- events


def test_event_callback_errors_never_break_the_harness(make, caplog):
    def broken(event):
        raise RuntimeError("callback bug")

    g = make(OC, on_event=broken)
    with caplog.at_level(logging.WARNING, logger="loopcore"):
        calls(g, "s", "read", {"p": 1}, "same", n=10)
        d = g.check("s", "read", {"p": 1})
    assert d.action == "warn"
    assert any("on_event callback raised" in r.getMessage() for r in caplog.records)
    assert any("doom_loop_detected" in r.getMessage() for r in caplog.records)


def test_events_go_to_the_logger_with_levels(make, caplog):
    g = make(OC)
    with caplog.at_level(logging.WARNING, logger="loopcore"):
        calls(g, "s", "read", {"p": 1}, "same", n=21)
    recs = [r for r in caplog.records if "doom_loop_detected" in r.getMessage()]
    assert [r.levelno for r in recs] == [logging.WARNING, logging.ERROR]
    assert recs[1].loopcore_event["detector"] == "generic_repeat"
    assert (
        recs[1].getMessage()
        == "doom_loop_detected: block generic_repeat on read in session 's' (count 20)"
    )
    import loopcore.guard

    assert (
        recs[1].name == "loopcore"
        and recs[1].funcName == "_emit"
        and recs[1].pathname == loopcore.guard.__file__
    )


def test_events_build_no_log_record_when_only_null_handlers_would_get_it(make, monkeypatch):
    # A LogRecord nobody can read is not made; on_event still gets every event, and a real
    # handler (or a filter, or none at all: the last resort) gets the records again.
    made = []
    factory = logging.getLogRecordFactory()
    lg = logging.getLogger("loopcore")
    monkeypatch.setattr(lg, "handlers", [logging.NullHandler()])
    monkeypatch.setattr(lg, "propagate", False)
    monkeypatch.setattr(lg, "level", logging.WARNING)
    events = []
    g = make(OC, on_event=events.append)
    calls(g, "s", "read", {"p": 1}, "same", n=21)
    assert [e["level"] for e in events] == ["warn", "block"]

    def counting(*a, **kw):
        made.append(a[4])
        return factory(*a, **kw)

    monkeypatch.setattr(logging, "_logRecordFactory", counting)  # a custom factory: records made
    calls(g, "t", "read", {"p": 1}, "same", n=11)
    assert made == ["doom_loop_detected: %s %s on %s in session %r (count %d)"]
    monkeypatch.setattr(logging, "_logRecordFactory", factory)
    seen = []
    h = logging.Handler()
    h.emit = seen.append
    for extra in ([h], []):  # a real handler; no handler at all (logging's last resort)
        seen.clear()
        monkeypatch.setattr(lg, "handlers", extra)
        monkeypatch.setattr(logging, "lastResort", h)
        calls(g, f"u{len(extra)}", "read", {"p": 1}, "same", n=11)
        assert [r.levelno for r in seen] == [logging.WARNING]
    monkeypatch.setattr(lg, "handlers", [logging.NullHandler()])
    seen.clear()
    lg.addFilter(f := lambda r: seen.append(r) or True)
    try:
        calls(g, "v", "read", {"p": 1}, "same", n=11)
    finally:
        lg.removeFilter(f)
    assert len(seen) == 1
    real_make = lg.makeRecord
    monkeypatch.setattr(lg, "makeRecord", lambda *a, **kw: made.append(a) or real_make(*a, **kw))
    made.clear()
    n_events = len(events)
    calls(g, "w", "read", {"p": 1}, "same", n=11)  # NullHandler only: no record made
    assert len(events) == n_events + 1 and not made
    monkeypatch.setattr(lg, "handlers", [logging.NullHandler(), h])
    calls(g, "x", "read", {"p": 1}, "same", n=11)
    assert len(events) == n_events + 2 and len(made) == 1


def test_warning_events_deduplicated_by_bucket_per_key(make):
    events = []
    g = make(OC, on_event=events.append)
    calls(g, "s", "read", {"p": 1}, n=35, results=lambda i: i)  # warns 10..34, never blocks
    assert [e["count"] for e in events] == [10, 20, 30]
    calls(g, "s", "read", {"p": 2}, n=11, results=lambda i: i)
    assert [e["count"] for e in events][3:] == [10]  # another key has its own buckets


# ---------------------------------------------------------------- decorator


def test_guarded_tool_function(make):
    from loopcore import LoopBlocked

    g = make(OC)
    ran = []

    @g.wrap(session="s")
    def read_file(path: str) -> str:
        ran.append(path)
        return "same text"

    outs = [read_file(path="a") for _ in range(21)]
    assert len(ran) == 20
    assert outs[10].endswith(g.check("t", "x", {}).message or "") or "WARNING" in outs[10]
    assert outs[20].startswith("BLOCKED") and "identical outcomes" in outs[20]
    assert read_file.__name__ == "read_file"

    strict = g.wrap(lambda path: "same text", session="s", name="read_file", on_block="raise")
    with pytest.raises(LoopBlocked) as info:
        strict(path="a")
    assert info.value.decision.detector == "generic_repeat"


def test_guarded_records_exceptions(make):
    g = make()

    def flaky(n):
        raise OSError("disk full")

    wrapped = g.wrap(flaky, session="s")
    for _ in range(5):
        with pytest.raises(OSError):
            wrapped(1)
    assert wrapped(1).startswith("BLOCKED") and "the same call failed 5 times" in wrapped(1)
    with pytest.raises(ValueError, match="on_block"):
        g.wrap(flaky, on_block="explode")


def test_example_harness_runs():
    import pathlib
    import subprocess
    import sys

    script = pathlib.Path(__file__).resolve().parent.parent / "examples" / "guard_harness.py"
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, check=True, timeout=120
    )
    assert "8 doom_loop_detected events, 26 of 109 calls blocked" in out.stdout
    # Policy.default() stops the tight loop of identical sends at the 5th
    assert "BLOCKED: this is the 5th identical consecutive call of message" in out.stdout


def test_record_attaches_to_the_call_as_checked_even_if_args_were_mutated(make):
    g = make(OC)
    args = {"p": 1}
    g.check("s", "read", args)
    args["p"] = 2  # e.g. an approval step rewrote the params in place
    g.record("s", "read", args, "out")
    assert [r is not None for _, _, r in g.history("s")] == [True]
    assert g.history("s")[0][1] == g.history("s")[0][1]
    args2 = {"p": 5}
    g.check("s", "read", args2, call_id="c9")  # the full path remembers the hash too
    args2["p"] = 6
    g.record("s", "read", args2, error="boom", call_id="c9")
    assert len(g.history("s")) == 2 and g.history("s")[1][2] is not None
    g.reset("s")
    other = {"p": 1}
    g.check("s", "read", other)
    g.record("s", "read", {"p": 1}, "out")  # an equal, different object: hashed afresh, same call
    assert len(g.history("s")) == 1 and g.history("s")[0][2] is not None


def test_taxonomy_classify_plugs_in(make):
    import loopcore.taxonomy

    g = make(classify=loopcore.taxonomy.classify)
    calls(g, "s", "Read", {"file_path": "a.ts"}, "body")
    assert g.check("s", "Read", {"file_path": "a.ts"}).detector == "redundant_observation"
    g.record("s", "Read", {"file_path": "a.ts"}, "body")
    calls(g, "s", "bash", {"command": "sed -i s/a/b/ a.ts"}, "")
    assert g.check("s", "Read", {"file_path": "a.ts"}) is ALLOW


def test_check_and_record_bind_every_argument_form_alike(make):
    # The compiled entries bind the common forms themselves and hand every other one to the
    # Guard's own methods: all forms give the same decisions, counters and errors on both twins.
    g = make(Policy.default())
    kw = {"".join(["call", "_id"]): "c-1"}  # a keyword name that is not the interned constant
    out = []
    for _ in range(3):
        out.append(g.check("s", "read", {"p": 1}, call_id="c-0").action)
        g.record("s", "read", {"p": 1}, "same", call_id="c-0", tokens=7)
        out.append(g.check("s", tool="read", args={"p": 1}).action)
        g.record("s", "read", args={"p": 1}, result="same", run_id=None, kind=None, target=None)
        out.append(g.check("s", "read", {"p": 1}, kind=None, target=None, **kw).action)
        g.record("s", "read", {"p": 1}, result="same", error=None, tokens=None, **kw)
        out.append(g.check(session="s", tool="read", args={"p": 1}, run_id="r").action)
        g.record(session="s", tool="read", args={"p": 1}, result="same", run_id="r")
    assert out == ["allow", "allow", "warn", "allow", "warn", "block"] + [
        "block",
        "allow",
        "block",
        "block",
        "block",
        "warn",
    ]
    assert g.stats()["tokens"] == 21 and g.stats()["records"] == 12
    for bad in (
        lambda: g.check("s"),
        lambda: g.check("s", "read", {}, {}),
        lambda: g.check("s", "read", {}, args={}),
        lambda: g.check("s", "read", bogus=1),
        lambda: g.record("s", "read", {}, "r", {}),
        lambda: g.record("s", "read", {}, "r", result="r"),
        lambda: g.record("s", "read", {}, "r", bogus=1),
        lambda: g.record("s", "read", {}, "r", tokens=-1),
        lambda: g.record("s", "read", {}, "r", tokens=True),
        lambda: g.check("s", 5, {}),
    ):
        with pytest.raises((TypeError, ValueError)) as exc:
            bad()
        assert "Guard." in str(exc.value) or "tokens" in str(exc.value) or "tool" in str(exc.value)


def test_check_and_record_have_the_guards_signatures(make):
    import inspect

    g = make(Policy.default())
    for mine, ref in ((g.check, Guard.check), (g.record, Guard.record)):
        got = [(p.name, p.kind, p.default) for p in inspect.signature(mine).parameters.values()]
        want = [(p.name, p.kind, p.default) for p in inspect.signature(ref).parameters.values()]
        assert got == want[1:]  # without self


def test_tool_registry_overflow_keeps_decisions(make):
    # The tool registry is a cache cleared past 4,096 names (the compiled side also remembers
    # the last name objects by identity): a name seen before the clear decides as before.
    g = make(Policy.default())
    name = "todo_write"
    for _ in range(2):
        assert g.check("s", "read", {"p": 1}) is ALLOW
        g.record("s", "read", {"p": 1}, "same")
    for i in range(24):
        g.check("t", name, {"i": i})
        g.record("t", name, {"i": i}, "ok")
    for i in range(4100):
        g.check("u", f"tool-{i}", {})
    d = g.check("s", "read", {"p": 1})
    assert (d.action, d.detector, d.count) == ("warn", "consecutive_repeat", 3)
    d = g.check("t", name, {"i": 99})
    assert (d.action, d.detector, d.count) == ("warn", "tool_budget", 25)
    assert g.check("t", "Todo" + "Write", {"i": 0}) is ALLOW  # another budgeted name, own count
