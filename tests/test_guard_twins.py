"""The two engine twins give identical decisions, step by step (hypothesis), and the default
import really is the compiled core."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopcore import ALLOW, Guard, Policy, _native_flag
from loopcore.guard import _engine_params, _make_guard

needs_c = pytest.mark.skipif(_native_flag.NO_EXTENSIONS, reason="LOOPCORE_NO_EXTENSIONS=1")

# Small thresholds and a short window so random streams reach every detector.
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
    SMALL.replace(cycle_unit="repeats", cycle_warn=2, cycle_block=3),
    SMALL.replace(cycle_block_needs_no_progress=False, repeat_block_needs_no_progress=True),
    Policy.openclaw().replace(window=10),
    Policy.openhands(),
    Policy.gemini_cli(),
    Policy.cline(),
    Policy.default(),
    Policy.roo(),
    Policy.altimate(),
    SMALL.replace(
        global_block=4,
        compaction_window=2,
        context_loop=True,
        context_block=3,
        monologue_any_text=True,
        error_any_text=True,
        repeat_reset_after_block=True,
        repeat_warn_once=True,
        budget_warn_once=True,
        repeat_warn_needs_no_progress=True,
    ),
]

TOOLS = ["read", "process", "todo_write", "message", "exec", "write", "ghost"]
op = st.tuples(
    st.sampled_from(
        [
            "check",
            "check",
            "record",
            "record_err",
            "record_decision",
            "reset",
            "note_user",
            "note_message",
            "note_compaction",
            "note_condensation",
        ]
    ),
    st.sampled_from(["s1", "s2"]),
    st.sampled_from([None, "r1"]),
    st.sampled_from(TOOLS),
    st.integers(0, 2),  # args variant
    st.integers(0, 2),  # result variant
    st.sampled_from([None, "observe", "mutate", "exec", "ask"]),
    st.sampled_from([None, "a.ts", "b.ts"]),
)


def _args(tool, v):
    if tool == "process":
        return {"action": ["poll", "log", "kill"][v], "id": 1}
    if tool == "message":
        return {"action": ["send", "read", "send"][v], "text": "hi" if v < 2 else "other"}
    return {"v": v}


def _result(tool, v, i):
    if tool == "message":
        return {"ok": v != 2, "messageId": f"m{i}"}
    if tool == "exec":
        return {"exitCode": v, "stdout": "x", "pid": i}
    return ["same", "other", {"n": i}][v]


def _run(g: Guard, ops):
    out = []
    last = {}
    for i, (what, s, run, tool, av, rv, kind, target) in enumerate(ops):
        args = _args(tool, av)
        if what == "check":
            d = last[s, tool] = g.check(s, tool, args, run_id=run, kind=kind, target=target)
            out.append(d.to_dict())
        elif what == "record":
            g.record(s, tool, args, _result(tool, rv, i), run_id=run, kind=kind, target=target)
        elif what == "record_err":
            g.record(s, tool, args, error=["boom", "Unknown tool: ghost"][rv % 2], run_id=run)
        elif what == "record_decision":  # a harness handing the guard's answer back as the result
            g.record(
                s, tool, args, last.get((s, tool), ALLOW), run_id=run, kind=kind, target=target
            )
        elif what == "note_user":
            out.append(g.note_message(s, "go on", role="user", run_id=run).to_dict())
        elif what == "note_message":
            out.append(g.note_message(s, ["hmm", "let me think"][rv % 2], run_id=run).to_dict())
        elif what == "note_compaction":
            g.note_compaction(s, run_id=run)
        elif what == "note_condensation":
            out.append(g.note_event(s, "condensation", run_id=run).to_dict())
        else:
            g.reset(s)
    return out


@needs_c
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op, max_size=120), pi=st.integers(0, len(POLICIES) - 1))
def test_twins_decide_identically(ops, pi):
    pol = POLICIES[pi]
    # Calls without kind/target take the compiled twin's all-C path (decisions and event buckets
    # included); the others go through Guard's Python methods: run the stream both ways.
    plain = [(what, s, run, tool, av, rv, None, None) for what, s, run, tool, av, rv, _k, _t in ops]
    for stream in (ops, plain):
        ec, ep = [], []
        gc = _make_guard(pol, impl="c", on_event=ec.append)
        gp = _make_guard(pol, impl="py", on_event=ep.append)
        assert _run(gc, stream) == _run(gp, stream)
        assert ec == ep  # the same events, in the same order
        assert gc.stats() == gp.stats()
        for key, stc in gc._table.items():
            assert gc._engine.dump(stc) == gp._engine.dump(gp._table.get(*key))
            assert stc.extra == gp._table.get(*key).extra  # event buckets


@needs_c
@settings(max_examples=60, deadline=None)
@given(
    stream=st.lists(
        st.tuples(
            st.booleans(),
            st.integers(1, 3),
            st.integers(1, 3),
            st.integers(0, 7),
            st.integers(0, 2),
            st.integers(0, 2),
            st.integers(0, 7),
        ),
        max_size=150,
    ),
    pi=st.integers(0, len(POLICIES) - 1),
)
def test_engines_agree_on_integer_streams(stream, pi):
    """The engines alone, fed identical integers: same codes, same outputs, same dumps."""
    from loopcore import _guard_py, _native_guard

    pol = POLICIES[pi]
    params = _engine_params(pol)
    bw = [pol.budgets[t][0] or 0 for t in pol.budgets] if pol.tool_budget else []
    bb = [pol.budgets[t][1] or 0 for t in pol.budgets] if pol.tool_budget else []
    ec, ep = _native_guard.Engine(params, bw, bb), _guard_py.Engine(params, bw, bb)
    sc, sp = ec.new_state(), ep.new_state()
    for is_check, tool, args, kind, target, res, flags in stream:
        bslot = 0 if (bw and tool == 1) else -1
        if is_check:
            rc = ec.check(sc, tool, args, kind, target, 0, flags & 1, flags & 4, bslot)
            rp = ep.check(sp, tool, args, kind, target, 0, bool(flags & 1), bool(flags & 4), bslot)
            assert rc == rp
            if rc:
                assert (sc.out_count, sc.out_of_step, sc.out_aux, sc.out_aux2) == (
                    sp.out_count,
                    sp.out_of_step,
                    sp.out_aux,
                    sp.out_aux2,
                )
        else:
            fl = flags & 6
            assert ec.record(sc, tool, args, res, fl, kind, target, 0, bslot, 0) == ep.record(
                sp, tool, args, res, fl, kind, target, 0, bslot, 0
            )
        assert ec.dump(sc) == ep.dump(sp)
    assert ec.load(ep.dump(sp)) is not None and ec.dump(ec.load(ep.dump(sp))) == ep.dump(sp)


def _engine_module(env_extra):
    env = {**os.environ, **env_extra}
    code = "import loopcore; print(type(loopcore.Guard()._engine).__module__)"
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()


@needs_c
def test_default_import_is_the_compiled_engine():
    assert _engine_module({"LOOPCORE_NO_EXTENSIONS": "0"}) == "loopcore._native_guard"


def test_no_extensions_selects_the_pure_engine():
    assert _engine_module({"LOOPCORE_NO_EXTENSIONS": "1"}) == "loopcore._guard_py"


json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.text(max_size=8),
    st.sampled_from(["msg-1234", "1700000000", "id-9999", "hello msg-1234"]),
)


def _json_values(keys, tuples=False):
    """JSON-like results (dicts over *keys*, lists, optionally tuples) for the projections."""

    def containers(inner):
        options = [
            st.lists(inner, max_size=4),
            st.dictionaries(st.sampled_from(keys), inner, max_size=5),
        ]
        if tuples:
            options.append(st.lists(inner, max_size=3).map(tuple))
        return st.one_of(*options)

    return st.recursive(json_leaf, containers, max_leaves=14)


json_value = _json_values(
    [
        "id",
        "text",
        "messageId",
        "ts",
        "details",
        "status",
        "exitCode",
        "stdout",
        "content",
        "direction",
        "route",
        "runId",
        "x",
    ]
)
send_value = _json_values(
    [
        "id",
        "text",
        "messageId",
        "ts",
        "details",
        "senderId",
        "direction",
        "conversation",
        "route",
        "runId",
        "x",
        "deliveryId",
    ],
    tuples=True,
)


@needs_c
@settings(max_examples=80, deadline=None)
@given(value=json_value)
def test_result_projections_are_identical_in_both_twins(value):
    from loopcore import _guard_py, _native_guard
    from loopcore.policy import DEFAULT_VOLATILE_KEYS

    assert _native_guard.strip_send_result(
        value, DEFAULT_VOLATILE_KEYS
    ) == _guard_py.strip_send_result(value, DEFAULT_VOLATILE_KEYS)
    assert _native_guard.project_exec(value) == _guard_py.project_exec(value)


@needs_c
@settings(max_examples=150, deadline=None)
@given(value=send_value)
def test_fused_send_hash_equals_hashing_the_stripped_copy(value):
    # The compiled record path hashes a send result with the volatile keys stripped inside the
    # hash when no copy is needed; it must equal hashing the pure twin's stripped copy.
    from loopcore import _guard_py, _hashing_py
    from loopcore.policy import DEFAULT_VOLATILE_KEYS

    want = _hashing_py.canonical_hash(
        _guard_py.strip_send_result(value, DEFAULT_VOLATILE_KEYS), default=repr
    )
    for impl in ("c", "py"):
        g = _make_guard(Policy.openclaw(), impl=impl)
        assert g._table.send_hash(value) == want
        assert g.result_hash("message", {"action": "send"}, value) == want


@needs_c
@pytest.mark.parametrize(
    "result, copied",
    [
        (
            {"ok": True, "messageId": "m-4711", "ts": 1_700_000_123, "route": {"id": "conv-9"}},
            False,
        ),
        (
            {"details": {"ok": True, "messageId": "m-4711"}, "text": "sent m-4711"},
            False,
        ),  # only details count
        ([{"deliveryId": "d-1234"}, "done"], False),
        (
            {"ok": True, "messageId": "m-4711", "text": "sent m-4711"},
            True,
        ),  # kept text restates the id
        ({"message": {"id": "m-1", "text": "hi", "direction": "out"}}, True),  # a delivery object
        (None, False),
        ({"ok": True, "ts": 1_700_000_123, "text": "at 1700000123"}, True),  # an int id restated
        ({"ok": True, "ts": -4711, "note": "n-4711"}, True),
        ({"ok": True, "ts": 1_700_000_123, "note": "170000012"}, False),  # shorter than the id
        ({"ok": True, "messageId": "m-47110000", "note": "m-4711"}, False),
        ({"ok": True, "ts": 10**30, "note": "x" * 40}, False),  # past 64 bits
        ({"ok": True, "ts": 10**30, "note": f"n{10**30}"}, True),
        ({"ok": True, "messageIds": [["id-1234"]], "note": ["new id-1234"]}, True),  # in lists
        ({"ok": True, "messageIds": [["id-1234"]], "note": ["id-12"]}, False),
    ],
)
def test_send_results_take_the_in_place_hash_unless_a_copy_is_needed(result, copied):
    # The equality test above would pass even if the in-place path never ran: check both run.
    from loopcore import _guard_py, _hashing_py
    from loopcore.policy import DEFAULT_VOLATILE_KEYS

    g = _make_guard(Policy.openclaw(), impl="c")
    assert g._table.send_needs_copy(result) is copied
    assert g._table.send_hash(result) == _hashing_py.canonical_hash(
        _guard_py.strip_send_result(result, DEFAULT_VOLATILE_KEYS), default=repr
    )


@needs_c
@settings(max_examples=100, deadline=None)
@given(value=send_value)
def test_the_guards_c_level_hash_entry_equals_canonical_hash(value):
    # The compiled guard calls the hash through its C capsule, not the Python function.
    from loopcore import _hashing_py

    g = _make_guard(Policy.openclaw(), impl="c")
    assert g._table.hash_checked(value) == _hashing_py.canonical_hash(value, default=repr)
    assert g._table.hash_checked({"obj": object}) == _hashing_py.canonical_hash(
        {"obj": object}, default=repr
    )


def _nested(depth, leaf):
    v = leaf
    for _ in range(depth):
        v = {"messageId": "m-1234", "data": [v]}
    return v


@pytest.mark.parametrize("depth", [10, 200, 5_000, 200_000])
def test_deep_send_results_hash_or_raise_value_error(impl, depth):
    # A send result is walked to strip its ids: a deep one must not exhaust the C stack.
    g = _make_guard(Policy.openclaw(), impl=impl.name)
    g.check("s", "message", {"action": "send", "text": "hi"})
    value = _nested(depth, "done")
    if depth * 2 < 256:
        g.record("s", "message", {"action": "send", "text": "hi"}, value)
    else:
        with pytest.raises(ValueError, match="deeper than"):
            g.record("s", "message", {"action": "send", "text": "hi"}, value)
    g.check("s", "read", {"p": 1})  # the guard still works


def test_cyclic_send_results_never_crash(impl):
    g = _make_guard(Policy.openclaw(), impl=impl.name)
    kept = {"ok": True}
    kept["self"] = kept
    with pytest.raises(ValueError):
        g.record("s", "message", {"action": "send", "text": "hi"}, kept)
    # a cycle under a stripped key is never walked past MAX_DEPTH, and it is stripped
    removed = {"ok": True}
    removed["messageId"] = removed
    g.record("s", "message", {"action": "send", "text": "hi"}, removed)
    assert g.result_hash("message", {"action": "send"}, removed) == g.result_hash(
        "message", {"action": "send"}, {"ok": True}
    )


def _shared(depth):
    v: list = []
    for _ in range(depth):
        v = [v, v]  # 2**depth paths through depth + 1 lists
    return v


@pytest.mark.parametrize("key", ["x", "messageId"])
def test_send_results_that_would_take_exponential_walks_raise(impl, key):
    # kept or stripped, a result whose walk would follow 2**40 references is refused at once
    g = _make_guard(Policy.openclaw(), impl=impl.name)
    with pytest.raises(ValueError, match="nested containers"):
        g.record("s", "message", {"action": "send", "text": "hi"}, {"ok": True, key: _shared(40)})
    g.record("s", "message", {"action": "send", "text": "hi"}, {"ok": True, key: _shared(12)})


def test_send_results_with_ints_too_long_for_text_raise_in_both_twins(impl):
    g = _make_guard(Policy.openclaw(), impl=impl.name)
    with pytest.raises(ValueError):
        g.record("s", "message", {"action": "send"}, {"ok": True, "ts": 10**5000, "x": "ab"})


def test_the_table_decides_and_announces_without_a_guard(impl):
    """The twin boundary: a Table answers with Decisions and announces bucket crossings through
    the callback it was given, on both twins alike; nothing reaches into a Guard."""
    from loopcore import ALLOW, Decision
    from loopcore.decision import _DET_NAMES

    pol = Policy.default()
    eng = impl.guard.Engine(_engine_params(pol), [], [])
    seen = []
    table = impl.guard.Table(
        eng,
        pol,
        10,
        0.0,
        None,
        impl.hashing.canonical_hash,
        Decision,
        ALLOW,
        tuple(_DET_NAMES.get(i) for i in range(16)),
        lambda session, run_id, tool, d: seen.append((session, tool, d.action, d.count)),
    )
    table.register("read", impl.guard.ToolInfo(7, -1, False, None, False, False, False, None))
    assert table.names == {7: "read"}
    out = []
    for _ in range(7):
        d = table.fast_check("s", "read", {"path": "a"}, None, "id-1")
        out.append("allow" if d is ALLOW else (d.action, d.detector, d.count))
        table.fast_record("s", "read", {"path": "a"}, d if d.blocked else "same", None, 0, "id-1")
    assert out == [
        "allow",
        "allow",
        ("warn", "consecutive_repeat", 3),
        ("warn", "consecutive_repeat", 4),
        ("block", "consecutive_repeat", 5),
        ("block", "consecutive_repeat", 5),
        ("block", "consecutive_repeat", 5),
    ]
    # one event per bucket of ten counts and pattern: the first warning and the first block
    assert seen == [("s", "read", "warn", 3), ("s", "read", "block", 5)]


def test_a_state_of_another_engine_does_not_fit(impl):
    small = impl.guard.Engine(_engine_params(Policy.default().replace(window=2)), [], [])
    big = impl.guard.Engine(_engine_params(Policy.default()), [1], [2])
    st = small.new_state()
    small.fits(st)
    with pytest.raises(ValueError, match="state of another size"):
        big.fits(st)
    with pytest.raises(ValueError, match="state of another size"):
        big.check(st, 1, 2, 0, 0, 0, False, False, 0)
    with pytest.raises(ValueError, match="state of another size"):
        big.record(st, 1, 2, 3, 0, 0, 0, 0, 0, 0)


def test_call_floor_does_nothing():
    bench = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")
    sys.path.insert(0, bench)
    try:
        from callfloor import CallFloor
    finally:
        sys.path.remove(bench)

    floor = CallFloor(ALLOW)
    assert floor.check("s", "read", {"p": 1}, run_id="r", call_id="c") is ALLOW
    assert floor.record("s", "read", {"p": 1}, "text", tokens=3, call_id="c") is None


def test_a_subclass_override_is_respected():
    class Counting(Guard):
        calls = 0

        def check(self, *a, **kw):
            Counting.calls += 1
            return super().check(*a, **kw)

    g = Counting(Policy.openclaw())
    g.check("s", "read", {"p": 1})
    assert Counting.calls == 1


def _marker_script(g, steps):
    out = []
    for what, arg in steps:
        if what == "user":
            g.note_message("s", "go on", role="user")
        elif what == "compaction":
            g.note_compaction("s")
        else:
            d = g.check("s", "read", {"p": arg})
            g.record("s", "read", {"p": arg}, "same")
            out.append((d.action, d.detector, d.count))
    return out


_MARKER_STEPS = (
    [("call", 1)] * 8
    + [("user", 0)]
    + [("call", 1)] * 4  # counted from the user message on: no generic_repeat warning yet
    + [("compaction", 0)]
    + [("call", 2)] * 4  # the loop a compaction restarts
    + [("call", i) for i in range(10, 18)]
    + [("call", 3)] * 3
    + [("user", 0), ("compaction", 0)]
    + [("call", 3)] * 5
)


@needs_c
@pytest.mark.parametrize(
    "pol",
    [Policy.openclaw(), Policy.default().replace(window=4), Policy.default().replace(window=6)],
)
def test_marker_counts_survive_the_ring_wrapping_and_a_snapshot(pol):
    # The compiled ring counts its user and compaction markers to skip scanning for them: the
    # count must follow markers leaving the window and come back from a snapshot.
    from loopcore.guard import _restore_guard

    want = _marker_script(_make_guard(pol, impl="py"), _MARKER_STEPS)
    for cut in range(len(_MARKER_STEPS) + 1):
        for impl in ("c", "py"):
            g = _make_guard(pol, impl=impl)
            head = _marker_script(g, _MARKER_STEPS[:cut])
            g = _restore_guard(g.snapshot(), impl=impl)
            assert head + _marker_script(g, _MARKER_STEPS[cut:]) == want, (impl, cut)
    if pol.name == "openclaw":
        assert [d[0] for d in want[8:12]] == ["allow"] * 4
        assert ("block", "compaction_loop", 3) in want


class _Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


session_op = st.tuples(
    st.sampled_from(["call", "call", "call", "reset", "forget", "wait", "snapshot"]),
    st.sampled_from(["a", "b", "c", "d", 7]),
    st.sampled_from([None, None, "r1", "r2"]),
    st.integers(0, 1),
)


@needs_c
@settings(max_examples=60, deadline=None)
@given(ops=st.lists(session_op, max_size=80))
def test_twins_keep_the_same_sessions_through_eviction_expiry_and_restore(ops):
    # The session table (LRU cap, idle expiry, run ids, reset/forget, snapshots) holds the same
    # sessions in the same order in both twins, with the same decisions and counters.
    from loopcore.guard import _restore_guard

    seen = {}
    for impl in ("c", "py"):
        clock = _Clock()
        kw = {"max_sessions": 3, "ttl": 5.0, "clock": clock}
        g = _make_guard(Policy.openclaw().replace(generic_warn=3), impl=impl, **kw)
        out = []
        for what, s, run, v in ops:
            if what == "call":
                d = g.check(s, "read", {"p": v}, run_id=run)
                g.record(s, "read", {"p": v}, "same", run_id=run)
                out.append((d.action, d.count))
            elif what == "reset":
                g.reset(s)
            elif what == "forget":
                g.forget(s)
            elif what == "wait":
                clock.t += 2.0 + 4 * v
            else:
                g = _restore_guard(g.snapshot(), impl=impl, **kw)
            out.append((list(g.sessions()), len(g), s in g))
        out.append(g.stats())
        seen[impl] = out
    assert seen["c"] == seen["py"]


class _SubDecision(__import__("loopcore").Decision):
    __slots__ = ("extra",)


@pytest.mark.parametrize("cls_name", ["Decision", "_SubDecision"])
def test_table_decisions_fill_every_slot_of_their_class(impl, cls_name):
    # The compiled table fills a Decision's slots by their offsets when the class is Decision's
    # plain shape, and by attribute otherwise: both give the same complete objects.
    import gc

    from loopcore import ALLOW, Decision
    from loopcore.decision import _DET_NAMES

    cls = Decision if cls_name == "Decision" else _SubDecision
    pol = Policy.default()
    eng = impl.guard.Engine(_engine_params(pol), [], [])
    table = impl.guard.Table(
        eng, pol, 10, 0.0, None, impl.hashing.canonical_hash, cls, ALLOW,
        tuple(_DET_NAMES.get(i) for i in range(16)), None,
    )  # fmt: skip
    table.register("read", impl.guard.ToolInfo(7, -1, False, None, False, False, False, None))
    out = []
    for _ in range(6):
        d = table.fast_check("s", "read", {"path": "a"}, None, None)
        table.fast_record("s", "read", {"path": "a"}, d if d.blocked else "same", None, 0, None)
        out.append(d)
    gc.collect()
    warn, block = out[2], out[4]
    assert type(warn) is cls and type(block) is cls
    assert warn.to_dict()["message"].startswith("WARNING:") and warn.of_step == 1
    assert (block.action, block.detector, block.count) == ("block", "consecutive_repeat", 5)
    assert block.key.startswith("consecutive_repeat:read:")


@needs_c
def test_event_buckets_past_their_cap_announce_again_in_both_twins():
    # A session keeps 256 event keys; the oldest goes first and, seen again, is announced again
    # (the compiled table also remembers the key it looked up last: it must not outlive this).
    names = [f"t{i}" for i in range(300)]
    pol = Policy.default().replace(budgets={n: (1, None) for n in names})
    seen = {}
    for impl in ("c", "py"):
        events = []
        g = _make_guard(pol, impl=impl, on_event=events.append)
        for n in names + names[:3] + names[-3:] + names[:1]:
            g.check("s", n, {"i": 1})
        seen[impl] = [(e["tool"], e["count"]) for e in events]
    assert seen["c"] == seen["py"]
    assert seen["c"][300:] == [("t0", 2), ("t1", 2), ("t2", 2)]  # the rest inside their bucket
