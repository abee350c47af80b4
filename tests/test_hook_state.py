"""The hooks' state between processes: parallel hook processes lose no count (H2), broken state
is never in the way (H3), the file stays bounded, and what the hook decided can be read back."""

from __future__ import annotations

import io
import json
import os
import pathlib
import sqlite3
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from hook_events import Claude, Gemini, hook_env, run_inproc, run_proc

from loopcore import Guard, Policy, hooks

# Only the cumulative budget counts: its decisions depend on how many calls came before, not on
# how the parallel processes interleave, so one in-process guard fed the same calls must agree
# exactly.
BUDGET_ONLY = {
    "generic_repeat": False,
    "poll_no_progress": False,
    "cycle": False,
    "global_breaker": False,
    "consecutive_repeat": False,
    "unknown_tool": False,
    "error_streak": False,
    "redundant_observation": False,
    "budgets": {"TodoWrite": [25, 50]},
}
TODO = {
    "todos": [
        {
            "content": "Ship the checkout fix",
            "status": "in_progress",
            "activeForm": "Shipping the fix",
        }
    ]
}

_WORKER = r"""
import io, json, sys
from loopcore import hooks
from hook_events import Claude
state, policy, n, me = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
todo = json.loads(sys.argv[5])
c = Claude("shared-session")
tally = {"allow": 0, "warn": 0, "block": 0, "post": 0, "err": 0}
for i in range(n // 2):
    c.n = 0
    ev = c.pre("TodoWrite", todo)
    ev["tool_use_id"] = f"toolu_{me}_{i}"
    for event in (ev, {**c.post("TodoWrite", todo, {"oldTodos": [], "newTodos": todo["todos"]}),
                       "tool_use_id": ev["tool_use_id"]}):
        out, err = io.StringIO(), io.StringIO()
        # a generous budget: the property here is that no count is lost; on a starved 2-core
        # machine a hook past its budget answers allow by design (tested apart)
        hooks.main(["claude", "--state", state, "--policy", policy, "--budget", "60"],
                   stdin=io.BytesIO(json.dumps(event).encode()), stdout=out, stderr=err)
        if err.getvalue():
            tally["err"] += 1
            sys.stderr.write(err.getvalue())
        if event["hook_event_name"] == "PostToolUse":
            tally["post"] += 1
        elif not out.getvalue():
            tally["allow"] += 1
        else:
            hso = json.loads(out.getvalue())["hookSpecificOutput"]
            tally["block" if "permissionDecision" in hso else "warn"] += 1
print(json.dumps(tally))
"""


def _rows(state):
    con = sqlite3.connect(state / "hooks.sqlite3")
    try:
        return con.execute(
            "SELECT session, calls, warned, blocked, records, snapshot FROM sessions"
        ).fetchall()
    finally:
        con.close()


def test_h2_parallel_hook_processes_lose_no_count(tmp_path, impl):
    """8 hook processes in parallel on one session, 100 calls each (50 before + 50 after)."""
    state = tmp_path / "state"
    policy = tmp_path / "budget.json"
    policy.write_text(json.dumps(BUDGET_ONLY))
    env = hook_env(impl.name)
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(pathlib.Path(__file__).parent), env.get("PYTHONPATH")])
    )
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                _WORKER,
                str(state),
                str(policy),
                "100",
                str(k),
                json.dumps(TODO),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        for k in range(8)
    ]
    tallies, said = [], []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode()
        tallies.append(json.loads(out))
        said.append(err.decode())
    total = {k: sum(t[k] for t in tallies) for k in tallies[0]}

    ref = Guard(hooks.load_policy(str(policy)), implementation=impl.name)
    ref_answers = {"allow": 0, "warn": 0, "block": 0}
    for i in range(400):
        ref_answers[
            ref.check("shared-session", "TodoWrite", TODO, kind="other", call_id=f"c{i}").action
        ] += 1
        ref.record(
            "shared-session",
            "TodoWrite",
            TODO,
            {"oldTodos": [], "newTodos": TODO["todos"]},
            kind="other",
            call_id=f"c{i}",
        )
    stats = ref.stats()
    assert total["err"] == 0, "".join(said)
    assert {k: total[k] for k in ref_answers} == ref_answers
    assert ref_answers["warn"] == 25 and ref_answers["block"] == 351
    ((session, calls, warned, blocked, records, snap),) = _rows(state)
    assert (session, calls, warned, blocked, records) == (
        "shared-session",
        stats["checks"],
        stats["warns"],
        stats["blocks"],
        stats["records"],
    )
    assert (calls, records) == (400, 400)
    # The row holds the guard's own snapshot of a guard with just that session.
    g = Guard.restore(snap, implementation=impl.name)
    assert list(g.sessions()) == ["shared-session"] and g.stats()["checks"] == 400


def test_h2_real_hook_launches_in_parallel(tmp_path, impl):
    """The same with a fresh ``python -m loopcore.hooks`` per call, 8 at a time (fewer calls: each is a process)."""
    state = tmp_path / "state"
    c = Claude("launch-session")
    events = [json.dumps(c.pre("TodoWrite", TODO)).encode() for _ in range(32)]
    # a generous budget: on a loaded machine 8 cold starts at once can take seconds, and a hook
    # past its budget answers allow by design (tested apart), which would not be a lost count
    cmd = [
        sys.executable,
        "-m",
        "loopcore.hooks",
        "claude",
        "--state",
        str(state),
        "--budget",
        "60",
    ]
    env = hook_env(impl.name)

    def launch(raw: bytes) -> bytes:
        p = subprocess.run(cmd, input=raw, capture_output=True, env=env, timeout=120)
        assert p.returncode == 0 and p.stderr == b""
        return p.stdout

    with ThreadPoolExecutor(8) as pool:
        outs = list(pool.map(launch, events))
    ref = Guard(Policy.default(), implementation=impl.name)
    decisions = [ref.check(c.session, "TodoWrite", TODO, kind="other").action for _ in range(32)]
    got = ["allow" if not o else ("block" if b"permissionDecision" in o else "warn") for o in outs]
    assert sorted(got) == sorted(decisions)
    ((_s, calls, warned, blocked, _r, _snap),) = _rows(state)
    assert (calls, warned, blocked) == (32, ref.stats()["warns"], ref.stats()["blocks"])


# -- H3: broken state is never in the way ----------------------------------------------------


@pytest.fixture
def state(tmp_path, impl, monkeypatch):
    monkeypatch.setattr(hooks, "_IMPLEMENTATION", impl.name)
    return tmp_path / "state"


def _read(n: int = 0):
    c = Claude(f"s{n}")
    return c, c.pre("Read", {"file_path": "/home/dev/shop/cart.py"})


def test_corrupt_database_allows_then_starts_fresh(state):
    state.mkdir()
    (state / "hooks.sqlite3").write_bytes(b"this is no database, it is a shopping list\n" * 200)
    _c, ev = _read()
    rc, out, err = run_inproc("claude", ev, state)
    assert (rc, out) == (0, "")
    assert (
        err.count("\n") == 1
        and "corrupt" in err
        and "hooks.sqlite3.corrupt" in err
        and "allowing" in err
    )
    assert (state / "hooks.sqlite3.corrupt").is_file()
    assert run_inproc("claude", ev, state) == (0, "", "")
    assert [r[:2] for r in _rows(state)] == [("s0", 1)]


def test_corrupt_database_denies_when_fail_closed(state):
    state.mkdir()
    (state / "hooks.sqlite3").write_bytes(b"\x00garbage" * 1000)
    rc, out, err = run_inproc(
        "gemini", Gemini().pre("glob", {"pattern": "**/*.py"}), state, "--fail-closed"
    )
    assert json.loads(out)["decision"] == "deny" and "denying" in err


def test_locked_database_answers_within_budget(tmp_path, impl):
    state = tmp_path / "state"
    _c, ev = _read()
    assert run_proc("claude", ev, state, impl_name=impl.name).returncode == 0
    holder = sqlite3.connect(state / "hooks.sqlite3", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        p = run_proc("claude", ev, state, "--budget", "2", impl_name=impl.name, timeout=30)
        assert p.returncode == 0 and p.stdout == b""
        assert p.stderr.count(b"\n") == 1 and b"database is locked" in p.stderr
        p = run_proc(
            "codex", ev, state, "--budget", "2", "--fail-closed", impl_name=impl.name, timeout=30
        )
        assert json.loads(p.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    p = run_proc("claude", ev, state, impl_name=impl.name)
    assert p.stderr == b"" and [r[1] for r in _rows(state)] == [2]


def test_a_harness_that_never_closes_stdin_gets_an_answer(tmp_path, impl):
    with subprocess.Popen(
        [
            sys.executable,
            "-m",
            "loopcore.hooks",
            "gemini",
            "--state",
            str(tmp_path),
            "--budget",
            "0.5",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=hook_env(impl.name),
    ) as p:
        try:
            out = p.stdout.read()  # returns when the watchdog ends the process
            assert p.wait(timeout=30) == 0
            err = p.stderr.read()
        finally:
            p.kill()
    assert out == b"{}\n" and b"budget" in err


def test_unwritable_state_directory_allows(state, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    _c, ev = _read()
    rc, out, err = run_inproc("claude", ev, blocker / "state")
    assert (rc, out) == (0, "") and err.count("\n") == 1 and "state directory" in err


def test_unusable_session_row_restarts_that_session(state):
    c, ev = _read()
    run_inproc("claude", ev, state)
    con = sqlite3.connect(state / "hooks.sqlite3")
    con.execute("UPDATE sessions SET snapshot = ?", (b"LOOPCORE-GUARD\x00\x01truncated",))
    con.commit()
    con.close()
    rc, out, err = run_inproc("claude", c.pre("Glob", {"pattern": "**/*.py"}), state)
    assert (rc, out) == (0, "") and "starting the session afresh" in err
    assert [r[1] for r in _rows(state)] == [1]


# -- bounded, and readable ---------------------------------------------------------------------


def test_sessions_are_bounded_by_count_and_ttl(state):
    for n in range(5):
        run_inproc("claude", _read(n)[1], state, "--max-sessions", "3")
    assert sorted(r[0] for r in _rows(state)) == ["s2", "s3", "s4"]
    run_inproc("claude", _read(9)[1], state, "--ttl", "0.000001")
    assert [r[0] for r in _rows(state)] == ["s9"]


def test_doom_loop_events_and_status(state):
    c = Claude("status-session")
    args = {"file_path": "/home/dev/shop/cart.py"}
    body = {"type": "text", "file": {"filePath": args["file_path"], "content": "x = 1\n"}}
    for _ in range(2):
        run_inproc("claude", c.pre("Read", args), state)
        run_inproc("claude", c.post("Read", args, body), state)
    lines = [json.loads(x) for x in (state / "events.jsonl").read_text().splitlines()]
    assert len(lines) == 1
    e = lines[0]
    assert (e["event"], e["harness"], e["session"], e["detector"], e["level"], e["tool"]) == (
        "doom_loop_detected",
        "claude",
        "status-session",
        "redundant_observation",
        "warn",
        "Read",
    )
    assert e["call_id"] == "toolu_01000002" and e["message"].startswith("NOTE:")
    out = io.StringIO()
    assert hooks.main(["status", "--json", "--state", str(state)], stdout=out) == 0
    doc = json.loads(out.getvalue())
    (s,) = doc["sessions"]
    assert {k: s[k] for k in ("session", "harness", "calls", "warned", "blocked", "records")} == {
        "session": "status-session",
        "harness": "claude",
        "calls": 2,
        "warned": 1,
        "blocked": 0,
        "records": 2,
    }
    assert s["last"]["detector"] == "redundant_observation"
    out = io.StringIO()
    hooks.main(["status", "--state", str(state)], stdout=out)
    assert (
        "status-session" in out.getvalue()
        and "warn redundant_observation on Read" in out.getvalue()
    )


def test_status_without_a_database(tmp_path):
    out = io.StringIO()
    assert hooks.main(["status", "--json", "--state", str(tmp_path / "none")], stdout=out) == 0
    assert json.loads(out.getvalue())["sessions"] == []
    assert not (tmp_path / "none").exists()


def test_state_dir_resolution(monkeypatch, tmp_path):
    from loopcore.hooks._state import state_dir

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("LOOPCORE_STATE_DIR", raising=False)
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    assert state_dir() == str(tmp_path / ".local" / "state" / "loopcore")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert state_dir() == str(tmp_path / "xdg" / "loopcore")
    monkeypatch.setenv("LOOPCORE_STATE_DIR", str(tmp_path / "env"))
    assert state_dir() == str(tmp_path / "env")
    assert state_dir(str(tmp_path / "flag")) == str(tmp_path / "flag")


def test_the_hooks_json_codec_and_orjson_read_each_other(impl, monkeypatch):
    """A hook process writes the guard snapshot with the stdlib json, a library user with orjson;
    a state written by either restores under the other with the same decisions."""
    from loopcore import Guard, Policy, _guard_snapshot

    def feed(g):
        for i in range(12):
            g.check("sé-1", "Read", {"file_path": "/src/ünï.py"}, call_id=f"c{i}")
            g.record("sé-1", "Read", {"file_path": "/src/ünï.py"}, "same text", call_id=f"c{i}")

    for write_fast in (True, False):
        monkeypatch.setattr(_guard_snapshot, "FAST_JSON", write_fast)
        g = Guard(Policy.default(), implementation=impl.name)
        feed(g)
        blob = g.snapshot()
        monkeypatch.setattr(_guard_snapshot, "FAST_JSON", not write_fast)
        back = Guard.restore(blob, implementation=impl.name)
        assert back.stats() == g.stats()
        args = {"file_path": "/src/ünï.py"}
        assert back.check("sé-1", "Read", args).action == g.check("sé-1", "Read", args).action
