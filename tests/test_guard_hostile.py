"""Hostile input against the guard: nothing crashes, hangs or lies (both twins).

Cases that crashed the compiled core run in a subprocess, so a regression fails the test
instead of killing the test run.
"""

from __future__ import annotations

import enum
import os
import struct
import subprocess
import sys
import textwrap

import orjson
import pytest
from xxhash import xxh3_64_intdigest

from loopcore import ALLOW, Guard, Policy, _native_flag
from loopcore.guard import _SNAP_HEADER, _SNAP_MAGIC

needs_c = pytest.mark.skipif(_native_flag.NO_EXTENSIONS, reason="LOOPCORE_NO_EXTENSIONS=1")


def run_isolated(code: str, impl: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if impl == "py":
        env["LOOPCORE_NO_EXTENSIONS"] = "1"
    else:
        env.pop("LOOPCORE_NO_EXTENSIONS", None)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _snapshot_with(payload: dict, version: int = 2) -> bytes:
    body = orjson.dumps(payload)
    return _SNAP_MAGIC + _SNAP_HEADER.pack(version, len(body), xxh3_64_intdigest(body)) + body


def _valid_doc(impl) -> dict:
    g = Guard(Policy.default(), implementation=impl.name)
    for i in range(3):
        g.check("s", "read", {"p": i})
        g.record("s", "read", {"p": i}, "x")
    data = g.snapshot()
    head = len(_SNAP_MAGIC) + _SNAP_HEADER.size
    return orjson.loads(data[head:])


# ---------------------------------------------------------------- engine / state sizes


def test_engine_rejects_a_state_of_another_size(impl):
    code = f"""
    from loopcore import _native_flag
    mod = _native_flag.load_twin("guard", {impl.name!r})
    from loopcore.guard import _engine_params
    from loopcore import Policy
    small = mod.Engine(_engine_params(Policy.default().replace(window=2)), [], [])
    big = mod.Engine(_engine_params(Policy.default().replace(window=300)), [1], [2])
    st = small.new_state()
    for call in (lambda: big.check(st, 1, 2, 0, 0, 0, False, False, 0),
                 lambda: big.record(st, 1, 2, 3, 0, 0, 0, 0, 0, 0)):
        try:
            for i in range(400):
                call()
        except ValueError as exc:
            print("ValueError", exc)
        else:
            print("no error")
    """
    out = run_isolated(code, impl.name)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.count("ValueError") == 2, out.stdout


# ---------------------------------------------------------------- restore


@pytest.mark.parametrize(
    "dump",
    [
        [],
        [1],
        [1, 0],
        [1, 0, 0, 0],
        [1, 0, 0, 0, 0],
        [1, 0, 0, 0, 0, 5],
        [1, 0, 0, 0, 0, 1, 1, 2, 3],
        [1, 0, 0, 0, 0, -1],
        [1, 0, 0, 0, -3, 0],
        [1, 0, 0, 0, 0, 1, 1, 2, 3, 2**64 - 1, 0, 0, 0, 0],
        "text",
        None,
        {"a": 1},
        [1, "x", 0, 0, 0, 0],
        [1, 0, 0, 0, 0, 1, 1, 2, 3, 1, 300, 0, 0, 0],
    ],
)
def test_restore_of_short_or_crafted_dumps_raises_value_error(impl, dump):
    doc = _valid_doc(impl)
    doc["sessions"][0][4] = dump
    data = _snapshot_with(doc)
    code = f"""
    from loopcore import Guard
    data = {data!r}
    try:
        Guard.restore(data, implementation={impl.name!r})
    except ValueError as exc:
        print("ValueError")
    else:
        print("restored")
    """
    out = run_isolated(code, impl.name)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "ValueError"


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.update(sessions=[["s", None, 0.0, [], None]]),
        lambda d: d.update(sessions=[["s", None, "old", [], []]]),
        lambda d: d.update(sessions=[["s"]]),
        lambda d: d.update(sessions="x"),
        lambda d: d.update(names=[[1]]),
        lambda d: d.update(names={"a": 1}),
        lambda d: d.update(counts=[1, 2]),
        lambda d: d.update(policy={"window": "big"}),
        lambda d: d.update(policy=[]),
        lambda d: d["sessions"][0].__setitem__(3, [[1, 2]]),
        lambda d: d["sessions"][0].__setitem__(3, "buckets"),
        lambda d: d["sessions"][0].__setitem__(0, [1, 2]),
        lambda d: d.clear(),
    ],
)
def test_restore_of_crafted_payloads_raises_only_value_error(impl, mutate):
    doc = _valid_doc(impl)
    mutate(doc)
    with pytest.raises(ValueError):
        Guard.restore(_snapshot_with(doc), implementation=impl.name)


def test_snapshot_version_is_inside_the_checksum(impl):
    g = Guard(Policy.default(), implementation=impl.name)
    g.check("s", "read", {"p": 1})
    data = bytearray(g.snapshot())
    at = len(_SNAP_MAGIC)
    struct.pack_into("<I", data, at, 1)  # claim an older version
    with pytest.raises(ValueError, match="corrupted|checksum"):
        Guard.restore(bytes(data), implementation=impl.name)
    assert Guard.restore(g.snapshot(), implementation=impl.name).stats()["checks"] == 1


# ---------------------------------------------------------------- snapshot of accepted ids


@pytest.mark.parametrize("session", [2**64, -(2**70), 2**64 + 5])
def test_snapshot_of_big_int_session_ids(impl, session):
    g = Guard(Policy.default(), implementation=impl.name)
    g.check(session, "read", {"p": 1})
    g2 = Guard.restore(g.snapshot(), implementation=impl.name)
    assert session in g2


def test_snapshot_of_a_lone_surrogate_tool_name(impl):
    g = Guard(Policy.default(), implementation=impl.name)
    for _ in range(3):
        g.check("s", "re\ud800ad", {"p": 1})
        g.record("s", "re\ud800ad", {"p": 1}, "x")
    g2 = Guard.restore(g.snapshot(), implementation=impl.name)
    assert [h[0] for h in g2.history("s")] == ["re\ud800ad"] * 3
    assert g2.check("s", "re\ud800ad", {"p": 1}) == g.check("s", "re\ud800ad", {"p": 1})


# ---------------------------------------------------------------- send results that refer to themselves


def test_send_result_with_two_references_to_itself_does_not_hang(impl):
    code = f"""
    from loopcore import Guard, Policy
    g = Guard(Policy.openclaw(), implementation={impl.name!r})
    x = {{"ok": True}}
    x["a"] = x
    x["b"] = x
    y = []
    y.append(y)
    y.append(y)
    for r in (x, {{"details": x}}, y, {{"messageId": "m1", "results": [y, y]}}):
        g.check("s", "message", {{"action": "send", "text": "hi"}})
        try:
            g.record("s", "message", {{"action": "send", "text": "hi"}}, r)
            print("ok")
        except ValueError:
            print("ValueError")
    """
    out = run_isolated(code, impl.name)
    assert out.returncode == 0, out.stderr[-2000:]
    assert len(out.stdout.split()) == 4


# ---------------------------------------------------------------- str-subclass tool names


class Tool(str, enum.Enum):
    READ = "read"


class Loud(str):
    def __hash__(self):
        return 1

    def __eq__(self, other):
        return True


def test_str_enum_tool_name_keeps_the_guard_on(impl):
    g = Guard(Policy.openclaw(), implementation=impl.name)
    g.check("s", Tool.READ, {"p": 1})
    g.record("s", Tool.READ, {"p": 1}, "x")
    ds = []
    for _ in range(25):
        ds.append(g.check("s", "read", {"p": 1}))
        g.record("s", "read", {"p": 1}, "x")
    assert any(d.blocked for d in ds)
    h = Guard(Policy.openclaw(), implementation=impl.name)
    ds = []
    for _ in range(25):
        ds.append(h.check("s", Tool.READ, {"p": 1}))
        h.record("s", Tool.READ, {"p": 1}, "x")
    assert any(d.blocked for d in ds)


def test_str_subclass_with_odd_eq_is_read_as_its_text(impl):
    g = Guard(Policy.openclaw(), implementation=impl.name)
    for _ in range(25):
        g.check("s", Loud("read"), {"p": 1})
        g.record("s", Loud("read"), {"p": 1}, "x")
    assert g.check("s", "read", {"p": 1}).blocked
    assert g.check("s", "write", {"p": 1}) is ALLOW


# ---------------------------------------------------------------- tokens


@pytest.mark.parametrize("tokens", [2**63, 2**63 - 1, 2**64 + 1, -1])
def test_record_tokens_out_of_range_is_the_same_on_both_twins(impl, tokens):
    g = Guard(Policy.default(), implementation=impl.name)
    g.check("s", "read", {"p": 1})
    with pytest.raises(ValueError, match="tokens"):
        if tokens == 2**63 - 1:
            g.record("s", "read", {"p": 1}, "x", tokens=tokens)
            raise ValueError("tokens fine")
        g.record("s", "read", {"p": 1}, "x", tokens=tokens)


def test_tokens_total_saturates(impl):
    g = Guard(Policy.default(), implementation=impl.name)
    for _ in range(3):
        g.record("s", "read", {"p": 1}, "x", tokens=2**62)
    assert g.stats()["tokens"] == 2**63 - 1
    g = Guard(Policy.default(), implementation=impl.name, classify=lambda t, a: (None, None))
    for _ in range(3):  # the slow path too
        g.record("s", "read", {"p": 1}, "x", tokens=2**62)
    assert g.stats()["tokens"] == 2**63 - 1


# ---------------------------------------------------------------- on_event raising


def test_on_event_keyboard_interrupt_propagates_after_the_decision_is_counted(impl):
    def cb(event):
        raise KeyboardInterrupt

    g = Guard(Policy.default(), implementation=impl.name, on_event=cb)
    for i in range(24):
        assert g.check("s", "todo_write", {"x": i}) is ALLOW
    with pytest.raises(KeyboardInterrupt):
        g.check("s", "todo_write", {"x": 24})
    assert g.stats()["warns"] == 1
    # the guard is still consistent: the bucket was marked, so the next warning emits nothing
    assert g.check("s", "todo_write", {"x": 25}).action == "warn"


def test_on_event_exception_is_logged_not_raised(impl, caplog):
    def cb(event):
        raise RuntimeError("broken callback")

    g = Guard(Policy.default(), implementation=impl.name, on_event=cb)
    for i in range(25):
        d = g.check("s", "todo_write", {"x": i})
    assert d.action == "warn"
    assert "on_event callback raised" in caplog.text


# ---------------------------------------------------------------- recognising the guard's own block


def test_block_recognition_is_one_function_per_twin(impl):
    from loopcore import Decision

    block = Decision("block", "generic_repeat", 20, "BLOCKED: stop")
    cases = [
        (block, 1),
        (Decision("warn", "generic_repeat", 10, "WARNING"), 0),
        (ALLOW, 0),
        ({"status": "blocked", "deniedReason": "tool-loop"}, 1),
        ({"details": {"status": "blocked", "deniedReason": "tool-loop"}}, 1),
        ({"status": "blocked", "deniedReason": "approval"}, 0),  # someone else's denial: an outcome
        ("BLOCKED: you called read 20 times", 2),
        ("BLOCK", 0),
        ("all good", 0),
        (None, 0),
        (3, 0),
    ]
    for result, want in cases:
        assert impl.guard.block_veto(result, Decision) == want, result
