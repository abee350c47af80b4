"""altimate-code's todowrite cap and doom-loop ladder, on ``Policy.altimate()``.

Sources (repository AltimateAI/altimate-code, a fork of opencode):

* ``packages/opencode/src/session/processor.ts``: the per-tool counter ``TOOL_REPEAT_THRESHOLD = 30``,
  added for "varied-input loops (e.g. todowrite 2,080x)". It lives in one processor, so it starts
  from zero with every assistant message and never fired on the real pattern of 10-15 todo writes a
  turn over many turns; its only test (``packages/opencode/test/session/processor.test.ts``, "doom
  loop detection telemetry") builds the ``doom_loop_detected`` event by hand. The per-session cap
  these cases pin (warn exactly at the 25th todowrite, silent from the 26th to the 49th, refuse from
  the 50th, refused attempts count) is the fix ``Policy.altimate()`` ships; altimate has no test of
  it, so the cases are written from that rule.
* ``packages/opencode/test/session/starvation.test.ts``, describe "doom-loop escalation ladder —
  re-keyed on (toolName + normalized args)": translated case by case on
  ``Policy.altimate()`` with the consecutive-repeat detector switched on at the ladder's rungs.
"""

from __future__ import annotations

from peerlib import ALLOW, Policy, call


def todo_args(turn: int, j: int):
    return {"todos": [{"content": f"step {turn}.{j}", "status": "in_progress", "priority": "high"}]}


def todo_writes(g, session="s", turns=10, per_turn=10):
    return [
        call(g, session, "todowrite", todo_args(t, j), "updated")
        for t in range(turns)
        for j in range(per_turn)
    ]


def test_todowrite_cap_across_turns(make):
    """processor.ts ``TOOL_REPEAT_THRESHOLD`` (the todowrite 2,080x loop), as a per-session cap: 10 todo writes a
    turn for 10 turns, each with new content: the 25th is warned, the 26th-49th pass silently, the 50th and
    every later one is refused, and refused attempts count."""
    ds = todo_writes(make(Policy.altimate()))
    assert all(d is ALLOW for d in ds[:24])
    assert (ds[24].action, ds[24].detector, ds[24].count) == ("warn", "tool_budget", 25)
    assert all(d is ALLOW for d in ds[25:49])
    assert all(d.blocked and d.detector == "tool_budget" for d in ds[49:])
    assert ds[-1].count == 100
    assert "todo" in ds[49].message and "continue" in ds[49].message


def test_todowrite_cap_is_per_session(make):
    """processor.ts ``TOOL_REPEAT_THRESHOLD``: the same 100 writes spread over 10 sessions are never warned."""
    g = make(Policy.altimate())
    assert all(d is ALLOW for s in range(10) for d in todo_writes(g, session=f"s{s}", turns=1))


def test_other_tools_do_not_count_and_a_reset_clears(make):
    """processor.ts ``toolCallCounts`` is keyed by tool name: other tools do not count toward the todowrite cap,
    and a new session (``reset``) starts from zero."""
    g = make(Policy.altimate())
    for i in range(24):
        call(g, "s", "todowrite", todo_args(0, i), "updated")
        call(g, "s", "read", {"filePath": f"models/m{i}.sql"}, "select 1")
    g.reset("s")
    assert all(d is ALLOW for d in todo_writes(g, turns=2, per_turn=12))


def test_each_crossing_emits_one_doom_loop_event(make):
    """processor.test.ts: doom loop detection telemetry 'doom_loop_detected event includes tool_name and
    repeat_count': the warning at 25 and the refusal at 50 each emit one ``doom_loop_detected`` event naming the
    tool and the count."""
    events = []
    todo_writes(make(Policy.altimate(), on_event=events.append), turns=6)
    budget = [
        (e["event"], e["tool"], e["level"], e["count"])
        for e in events
        if e["detector"] == "tool_budget"
    ]
    assert budget[:2] == [
        ("doom_loop_detected", "todowrite", "warn", 25),
        ("doom_loop_detected", "todowrite", "block", 50),
    ]
    assert [b for b in budget if b[2] == "warn"] == [budget[0]]


# ---------------------------------------------------------------- starvation.test.ts: the doom-loop ladder


def ladder(make):
    return make(Policy.altimate().replace(consecutive_repeat=True, repeat_warn=3, repeat_block=9))


def test_varied_args_never_climb_the_ladder(make):
    """starvation.test.ts: doom-loop escalation ladder 'varied-args repetition of the SAME tool never climbs the
    ladder (the old per-NAME false positive)'."""
    g = ladder(make)
    assert all(call(g, "s", "bash", {"command": f"echo {i}"}, f"{i}") is ALLOW for i in range(50))


def test_identical_calls_escalate_to_a_stop(make):
    """starvation.test.ts: doom-loop escalation ladder 'identical (tool+args) calls escalate nudge → status_check
    → stop, never straight to stop'.

    Deliberate difference (docs/peers.md): altimate's rungs are one directive each at the 3rd, 6th
    and 9th call; loopcore warns with every call from the 3rd on and refuses the 9th, never earlier.
    """
    g = ladder(make)
    ds = [call(g, "s", "bash", {"command": "make check"}, "FAILED") for _ in range(9)]
    assert ds[:2] == [ALLOW, ALLOW]
    assert ds[2].action == "warn" and ds[5].action == "warn"
    assert not any(d.blocked for d in ds[:8]) and ds[8].blocked


def test_a_different_call_resets_the_ladder(make):
    """starvation.test.ts: doom-loop escalation ladder 'a different call resets the consecutive counter'."""
    g = ladder(make)
    call(g, "s", "bash", {"command": "make check"}, "FAILED")
    call(g, "s", "bash", {"command": "make check"}, "FAILED")
    call(g, "s", "bash", {"command": "ls"}, "Makefile")
    assert call(g, "s", "bash", {"command": "make check"}, "FAILED") is ALLOW


def test_key_order_does_not_defeat_the_counter(make):
    """starvation.test.ts: doom-loop escalation ladder 'normalized-args keying: key order and whitespace do not
    defeat the counter'.

    Deliberate difference (docs/peers.md): key order never matters to loopcore's canonical hash, but
    it compares string values exactly, so " foo " is another argument than "foo" and starts a new count.
    """
    g = ladder(make)
    call(g, "s", "grep", {"pattern": "foo", "path": "/repo"}, "a.sql")
    call(g, "s", "grep", {"path": "/repo", "pattern": "foo"}, "a.sql")
    assert call(g, "s", "grep", {"pattern": "foo", "path": "/repo"}, "a.sql").action == "warn"
    assert call(g, "s", "grep", {"pattern": " foo ", "path": "/repo"}, "a.sql") is ALLOW
