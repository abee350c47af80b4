"""Guard scenarios G1-G9 (what the peers' own tests and newer detectors expect), both twins.

Texts, paths and results here are this project's own. "N calls" means N calls checked and
recorded with their results; the decision under test is the one for the next call.
"""

from __future__ import annotations

import pytest

from loopcore import ALLOW, Guard, Policy
from loopcore.guard import _make_guard
from loopcore.policy import DETECTORS

LINE = "I should look at the configuration file once more.\n"


@pytest.fixture
def make(impl):
    def make(policy: Policy | None = None, **kw) -> Guard:
        return _make_guard(policy, impl=impl.name, **kw)

    return make


def calls(g, session, tool, args, result=None, n=1, *, results=None, **kw):
    out = []
    for i in range(n):
        d = g.check(session, tool, args, **kw)
        out.append(d)
        r = results(i) if results is not None else result
        g.record(session, tool, args, d if d.blocked else r, **kw)
    return out


def test_new_detectors_are_listed():
    assert {"compaction_loop", "context_loop", "content_loop"} <= set(DETECTORS)


# ---------------------------------------------------------------- G1 argument churn


@pytest.mark.parametrize("policy", [Policy.openclaw, Policy.default], ids=["openclaw", "default"])
def test_g1_argument_churn_reaches_the_global_breaker(make, policy):
    g = make(policy())
    variants = ["/w/a.txt", "/w/b.txt", "/w/a.txt", "/w/c.txt", "/w/b.txt"]
    for i in range(30):
        p = variants[i % len(variants)]
        calls(g, "s", "save", {"path": p, "body": "x"}, f"saved {p}")
    d = g.check("s", "save", {"path": "/w/d.txt", "body": "x"})
    assert (d.action, d.detector, d.count) == ("block", "global_breaker", 30)
    assert "3 repeated argument patterns" in d.message and "global circuit breaker" in d.message


def test_g1_churn_needs_stable_outcomes_and_few_variants(make):
    g = make(Policy.openclaw())
    for i in range(30):  # progress: every outcome differs
        p = "/w/a.txt" if i % 2 else "/w/b.txt"
        calls(g, "s", "save", {"path": p}, f"revision {i}")
    assert g.check("s", "save", {"path": "/w/c.txt"}) is ALLOW
    g = make(Policy.openclaw())
    for i in range(30):  # a two-pass batch: 15 variants of 2 calls, none stable
        calls(g, "t", "save", {"path": f"/w/{i % 15}.txt"}, "saved")
    assert g.check("t", "save", {"path": "/w/next.txt"}) is ALLOW
    g = make(Policy.openclaw().replace(argument_churn=False))
    for i in range(30):
        calls(g, "u", "save", {"path": f"/w/{i % 2}.txt"}, "saved")
    assert g.check("u", "save", {"path": "/w/next.txt"}) is ALLOW


# ---------------------------------------------------------------- G2 error streak, any text


def test_g2_same_call_failing_with_different_errors(make):
    g = make(Policy.openhands())
    errors = ["no such file", "permission denied", "disk quota exceeded"]
    for e in errors:
        assert g.check("s", "run", {"cmd": "make"}) is ALLOW
        g.record("s", "run", {"cmd": "make"}, error=e)
    d = g.check("s", "run", {"cmd": "make"})
    assert (d.action, d.detector, d.count) == ("block", "error_streak", 3)
    assert "the same call failed 3 times" in d.message
    # the default still wants the same failure
    g = make()
    for e in errors + ["out of memory"]:
        g.check("s", "run", {"cmd": "make"})
        g.record("s", "run", {"cmd": "make"}, error=e)
    assert g.check("s", "run", {"cmd": "make"}).detector != "error_streak"


def test_g2_four_failures_then_blocked(make):
    g = make(Policy.openhands().replace(error_block=4))
    for e in ["a failed", "b failed", "c failed", "d failed"]:
        assert g.check("s", "run", {"cmd": "x"}) is ALLOW
        g.record("s", "run", {"cmd": "x"}, error=e)
    assert g.check("s", "run", {"cmd": "x"}).detector == "error_streak"


# ---------------------------------------------------------------- G3 roo / cline


def test_g3_roo_refuses_the_fourth_and_starts_again(make):
    g = make(Policy.roo())
    ds = calls(g, "s", "read_file", {"path": "a"}, "text", n=8)
    assert [d.action for d in ds] == ["allow"] * 3 + ["block"] + ["allow"] * 3 + ["block"]
    assert ds[3].detector == "consecutive_repeat" and "read_file" in ds[3].message


def test_g3_cline_warns_at_the_third_blocks_at_the_fifth(make):
    g = make(Policy.cline())
    ds = calls(g, "s", "write", {"f": 1}, "ok", n=6)
    assert [d.action for d in ds] == ["allow", "allow", "warn", "allow", "block", "block"]


# ---------------------------------------------------------------- G4 altimate


def test_g4_altimate_budget(make):
    events = []
    g = make(Policy.altimate(), on_event=events.append)
    ds = [calls(g, "s", "todowrite", {"todos": [i]}, "ok")[0] for i in range(60)]
    assert all(d is ALLOW for d in ds[:24])
    assert (ds[24].action, ds[24].count) == ("warn", 25)
    assert all(d is ALLOW for d in ds[25:49])
    assert all(d.blocked and d.detector == "tool_budget" for d in ds[49:])
    assert ds[-1].count == 60
    assert [(e["level"], e["count"]) for e in events][:2] == [("warn", 25), ("block", 50)]


# ---------------------------------------------------------------- G5 switches


def test_g5_policy_disabled_allows_everything_and_emits_nothing(make):
    events = []
    g = make(Policy.default().replace(enabled=False), on_event=events.append)
    for _ in range(60):
        assert g.check("s", "todo_write", {"x": 1}) is ALLOW
        g.record("s", "todo_write", {"x": 1}, "ok")
    assert g.check_text("s", LINE * 100) is ALLOW
    assert g.note_message("s", "same") is ALLOW and g.note_event("s", "condensation") is ALLOW
    assert events == [] and len(g) == 0


def test_g5_disable_one_session(make):
    events = []
    g = make(Policy.default(), on_event=events.append)
    g.disable("quiet")
    for _ in range(60):
        assert g.check("quiet", "todo_write", {"x": 1}) is ALLOW
        g.record("quiet", "todo_write", {"x": 1}, "ok")
    assert g.check_text("quiet", LINE * 100) is ALLOW
    assert events == []
    ds = calls(g, "loud", "todo_write", {"x": 1}, "ok", n=60)
    assert ds[-1].blocked and events
    g.reset("quiet")  # a reset keeps the switch off
    assert calls(g, "quiet", "todo_write", {"x": 1}, "ok", n=60)[-1] is ALLOW


# ---------------------------------------------------------------- G6 content loops


def test_g6_check_text_streamed(make):
    g = make(Policy.gemini_cli())
    unit = "The build failed again, so I will run it again now. "[:50]
    ds = [g.check_text("s", unit) for _ in range(10)]
    assert ds[:9] == [ALLOW] * 9
    assert (ds[9].action, ds[9].detector) == ("block", "content_loop")
    assert g.check_text("s", "more") == ds[9]  # stays stopped for this reply
    g.check("s", "read", {"p": 1})  # a tool call starts a new reply
    assert g.check_text("s", unit) is ALLOW


def test_g6_code_and_markdown_do_not_count(make):
    g = make()
    assert g.check_text("s", "```\n" + LINE * 50 + "```\n") is ALLOW
    assert g.check_text("t", "".join(f"- {LINE}" for _ in range(50))) is ALLOW
    assert g.check_text("u", LINE * 50).detector == "content_loop"  # a whole reply at once


def test_g6_emits_one_event(make):
    events = []
    g = make(on_event=events.append)
    g.check_text("s", LINE * 50)
    g.check_text("s", LINE * 50)
    assert [e["detector"] for e in events] == ["content_loop"]


# ---------------------------------------------------------------- G7 compaction


def test_g7_compaction_loop(make):
    g = make(Policy.openclaw())
    calls(g, "s", "gateway", {"q": 1}, "same", n=2)  # before the compaction
    g.note_compaction("s")
    calls(g, "s", "gateway", {"q": 1}, "same", n=3)
    d = g.check("s", "gateway", {"q": 1})
    assert (d.action, d.detector, d.count) == ("block", "compaction_loop", 3)
    assert "compacted" in d.message


def test_g7_compaction_window_closes(make):
    g = make(Policy.openclaw())
    g.note_compaction("s")
    calls(g, "s", "read", {"p": "a"}, "A")
    calls(g, "s", "read", {"p": "b"}, "B")
    calls(g, "s", "read", {"p": "c"}, "C")
    calls(g, "s", "gateway", {"q": 1}, "same", n=3)
    assert g.check("s", "gateway", {"q": 1}) is ALLOW


# ---------------------------------------------------------------- G8 default


def test_g8_default_warns_the_third_blocks_the_fifth(make):
    g = make()
    ds = calls(g, "s", "bash", {"command": "sed -i 's/a/a/' f.py"}, "", n=5)
    assert [d.action for d in ds] == ["allow", "allow", "warn", "warn", "block"]
    assert ds[4].detector == "consecutive_repeat" and ds[4].count == 5


def test_g8_rerun_after_an_edit_never_counts(make):
    g = make()
    for i in range(6):
        calls(g, "s", "edit", {"path": "f.py", "n": i}, "ok")
        d = calls(g, "s", "bash", {"command": "pytest"}, "1 failed")[0]
        assert d is ALLOW


def test_g8_changing_outcomes_do_not_count(make):
    g = make()
    ds = calls(g, "s", "bash", {"command": "date"}, n=6, results=lambda i: f"t{i}")
    assert all(d is ALLOW for d in ds)


def test_g8_polls_are_judged_as_polls(make):
    g = make()
    ds = calls(
        g, "s", "process", {"action": "poll", "id": 7}, {"status": "running", "tail": ""}, n=10
    )
    assert all(d is ALLOW for d in ds)  # poll_no_progress warns after 10 unchanged polls
    assert g.check("s", "process", {"action": "poll", "id": 7}).detector == "poll_no_progress"


# ---------------------------------------------------------------- G9 messages


def test_g9_messages_name_the_pattern(make):
    g = make(Policy.openclaw())
    for _ in range(30):  # calls that ran whatever the guard said (a replay)
        g.check("s", "read", {"p": 1})
        g.record("s", "read", {"p": 1}, "same")
    assert "global circuit breaker" in g.check("s", "read", {"p": 1}).message
    g = make(Policy.openclaw())
    for i in range(19):
        calls(g, "t", "read" if i % 2 == 0 else "list", {"x": i % 2}, "same")
    d = g.check("t", "list", {"x": 1})
    assert d.blocked and "ping-pong loop" in d.message and "try a different approach" in d.message


# ---------------------------------------------------------------- messages and events


def test_monologue_any_text(make):
    g = make(Policy.openhands())
    g.note_message("s", "please fix the bug", role="user")
    ds = [g.note_message("s", f"Thinking about it, step {i}") for i in range(3)]
    assert ds[:2] == [ALLOW, ALLOW] and (ds[2].action, ds[2].detector) == ("block", "monologue")
    calls(g, "s", "run", {"cmd": "ls"}, "a b")  # a tool call ends the monologue
    assert g.note_message("s", "now") is ALLOW


def test_user_message_starts_the_evidence_again(make):
    g = make(Policy.openhands())
    ds = calls(g, "s", "run", {"cmd": "ls"}, "a b", n=5)
    assert ds[4].blocked
    g.note_message("s", "try again", role="user")
    assert calls(g, "s", "run", {"cmd": "ls"}, "a b", n=4) == [ALLOW] * 4


@pytest.mark.parametrize("preset", Policy.presets())
def test_a_person_asking_for_the_same_check_each_turn_is_not_a_cycle(make, preset):
    # call, user message, call, user message, ...: the markers alternate with the call, but the
    # person chose every call; a cycle's unit never holds a user message
    g = make(Policy.preset(preset))
    for _ in range(30):
        assert calls(g, "s", "bash", {"command": "git status"}, "nothing to commit") == [ALLOW]
        g.note_message("s", "check the status again", role="user")


def test_a_cycle_counts_from_the_last_user_message(make):
    g = make(Policy.default().replace(cycle_warn=6, cycle_block=None))
    ab = [("read", {"p": "a"}), ("list", {"dir": "."})]
    for tool, args in ab * 2:
        calls(g, "s", tool, args, "same")
    g.note_message("s", "go on", role="user")
    ds = [calls(g, "s", tool, args, "same")[0] for tool, args in ab * 3]
    # 4 alternating calls before the message and 5 after it: the sixth after it is the warning
    assert ds[:5] == [ALLOW] * 5
    assert (ds[5].action, ds[5].detector, ds[5].count) == ("warn", "cycle", 6)


def test_condensation_loop(make):
    g = make(Policy.openhands())
    ds = [g.note_event("s", "condensation") for _ in range(10)]
    assert ds[:9] == [ALLOW] * 9 and (ds[9].action, ds[9].detector) == ("block", "context_loop")
    g = make(Policy.openhands())
    for i in range(10):
        assert g.note_event("t", "condensation") is ALLOW
        calls(g, "t", "run", {"cmd": f"ls {i}"}, "x")


def test_note_arguments_are_checked(make):
    g = make()
    with pytest.raises(ValueError, match="role"):
        g.note_message("s", "x", role="system")
    with pytest.raises(ValueError, match="event"):
        g.note_event("s", "reboot")
    with pytest.raises(TypeError):
        g.note_message("s", b"x")
    with pytest.raises(TypeError):
        g.check_text("s", 3)


# ---------------------------------------------------------------- call ids on the fast path


def test_call_ids_take_the_fast_path_with_the_same_decisions(impl):
    def stream(g):
        out = []
        for i in range(60):
            cid = f"call-{i}"
            tool, args = (
                ("read", {"p": i % 3}) if i % 4 else ("message", {"action": "send", "text": "hi"})
            )
            d = g.check("s", tool, args, call_id=cid)
            out.append(d.to_dict())
            g.record(
                "s", tool, args, d if d.blocked else {"ok": True, "messageId": cid}, call_id=cid
            )
        return out, g._engine.dump(g._table.get("s", None)), g.stats()

    fast = _make_guard(Policy.openclaw(), impl=impl.name)
    slow = _make_guard(Policy.openclaw(), impl=impl.name, classify=lambda tool, args: (None, None))
    assert stream(fast) == stream(slow)
    # the call id is kept with the call
    g = _make_guard(Policy.default(), impl=impl.name)
    g.check("s", "read", {"p": 1}, call_id="a")
    g.check("s", "read", {"p": 1}, call_id="b")
    g.record("s", "read", {"p": 1}, "first", call_id="a")
    dump = g._engine.dump(g._table.get("s", None))
    assert dump[-8 - 8 + 3] & 1 and not dump[-8 + 3] & 1  # "a" got its outcome, "b" still waits
