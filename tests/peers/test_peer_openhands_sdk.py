"""The OpenHands SDK's StuckDetector tests, translated case by case, on ``Policy.openhands()``.

Sources (repository OpenHands/software-agent-sdk; the detector is
``openhands-sdk/openhands/sdk/conversation/stuck_detector.py``):

* ``tests/cross/test_stuck_detector.py``: the detector's rules;
* ``tests/cross/test_stuck_detector_config.py``: custom thresholds;
* ``tests/sdk/conversation/local/test_stuck_detector_nudge.py``: the corrective nudge of a
  conversation run (the nudge is loopcore's warning, STUCK its block).

An ActionEvent is a ``check``, its ObservationEvent the ``record`` after it, an AgentErrorEvent
``record(error=...)``; a MessageEvent is ``guard.note_message(session, text, role=...)``. The SDK
asks ``is_stuck()`` between events; here "stuck" is "the next call is refused" (see
tests/peers/peerlib.py). The SDK's slice-window plumbing (which events it reads) is not translated.
"""

from __future__ import annotations

import pytest
from peerlib import ALLOW, Policy, call, fail, say

POLICY = Policy.openhands


@pytest.fixture
def g(make):
    return make(POLICY())


LS = ("terminal", {"command": "ls"})
LS_OBS = {"text": "file1.txt\nfile2.txt", "command": "ls", "exit_code": 0}
BAD = ("terminal", {"command": "invalid_command"})
BAD_ERR = "Command 'invalid_command' not found"


def test_history_too_short(g):
    """test_stuck_detector.py: test_history_too_short."""
    call(g, "s", *LS, LS_OBS)
    assert g.check("s", *LS) is ALLOW


def test_is_stuck_uses_only_recent_event_window(g):
    """test_stuck_detector.py: test_is_stuck_uses_only_recent_event_window (50 old messages, a user message,
    3 agent messages, then 4 identical pairs)."""
    for i in range(50):
        say(g, "s", f"old message {i}", role="user")
    say(g, "s", "Please run ls", role="user")
    for i in range(3):
        say(g, "s", f"filler {i}")
    for _ in range(4):
        call(g, "s", *LS, LS_OBS)
    assert g.check("s", *LS).blocked


def test_is_stuck_without_recent_user_message_still_detects_loop(g):
    """test_stuck_detector.py: test_is_stuck_without_recent_user_message_still_detects_loop."""
    for i in range(12):
        say(g, "s", f"filler {i}")
        call(
            g, "s", "terminal", {"command": f"echo {i}"}, f"{i}"
        )  # a tool call between keeps it from being a monologue
    for _ in range(4):
        call(g, "s", *LS, LS_OBS)
    assert g.check("s", *LS).blocked


def test_is_stuck_with_fewer_than_20_events_still_detects_loop(g):
    """test_stuck_detector.py: test_is_stuck_with_fewer_than_20_events_still_detects_loop."""
    for _ in range(4):
        call(g, "s", *LS, LS_OBS)
    assert g.check("s", *LS).blocked


def test_repeating_action_observation_not_stuck_less_than_4_repeats(g):
    """test_stuck_detector.py: test_repeating_action_observation_not_stuck_less_than_4_repeats."""
    for _ in range(3):
        call(g, "s", *LS, LS_OBS)
    assert g.check("s", *LS) is ALLOW


def test_repeating_action_observation_stuck(g):
    """test_stuck_detector.py: test_repeating_action_observation_stuck."""
    for _ in range(4):
        call(g, "s", *LS, LS_OBS)
    d = g.check("s", *LS)
    assert (d.action, d.detector) == ("block", "consecutive_repeat")


def test_repeating_action_error_nudges_before_stuck(g):
    """test_stuck_detector.py: test_repeating_action_error_nudges_before_stuck (2 failures: nothing; the 3rd:
    a nudge naming the tool and the error, not stuck; the 4th: stuck).

    Deliberate difference (docs/peers.md): the SDK nudges after the 3rd failure of the same action and is
    stuck after the 4th; ``Policy.openhands()`` follows the controller (``openhands/controller/stuck.py``:
    the last three actions identical and their observations errors, whatever they say) and refuses the
    call after the 3rd failure, with no warning first.
    """
    assert [fail(g, "s", *BAD, BAD_ERR) for _ in range(2)] == [ALLOW, ALLOW]
    assert fail(g, "s", *BAD, BAD_ERR) is ALLOW
    d = g.check("s", *BAD)
    assert (d.action, d.detector, d.count) == ("block", "error_streak", 3)
    assert "terminal" in d.message and "failed 3 times" in d.message


def test_agent_monologue_stuck(g):
    """test_stuck_detector.py: test_agent_monologue_stuck (3 agent messages whose texts differ)."""
    say(g, "s", "Hello", role="user")
    ds = [say(g, "s", f"I'm thinking... {i}") for i in range(3)]
    assert ds[:2] == [ALLOW, ALLOW]
    assert (ds[2].action, ds[2].detector) == ("block", "monologue")


def test_not_stuck_with_different_actions(g):
    """test_stuck_detector.py: test_not_stuck_with_different_actions."""
    for cmd in ("ls", "pwd", "whoami", "date"):
        call(
            g,
            "s",
            "terminal",
            {"command": cmd},
            {"text": f"output from {cmd}", "command": cmd, "exit_code": 0},
        )
    assert g.check("s", "terminal", {"command": "ls"}) is ALLOW


def test_reset_after_user_message(g):
    """test_stuck_detector.py: test_reset_after_user_message."""
    for _ in range(4):
        call(g, "s", *LS, LS_OBS)
    assert call(g, "s", *LS, LS_OBS).blocked
    say(g, "s", "Try something else", role="user")
    assert (
        call(
            g,
            "s",
            "terminal",
            {"command": "pwd"},
            {"text": "/home/user", "command": "pwd", "exit_code": 0},
        )
        is ALLOW
    )
    assert g.check("s", *LS) is ALLOW


def test_custom_action_observation_threshold(make):
    """test_stuck_detector_config.py: test_custom_action_observation_threshold (action_observation=6: 4 pairs
    are not stuck, 6 are).

    Deliberate difference (docs/peers.md): the SDK's threshold counts the pairs; ``repeat_block``
    counts the refused call too, so ``action_observation=6`` is ``repeat_block=7``.
    """
    g = make(POLICY().replace(repeat_block=7))
    for _ in range(4):
        call(g, "s", "execute_bash", {"command": "ls"}, "file1.txt")
    assert call(g, "s", "execute_bash", {"command": "ls"}, "file1.txt") is ALLOW
    call(g, "s", "execute_bash", {"command": "ls"}, "file1.txt")
    assert g.check("s", "execute_bash", {"command": "ls"}).blocked


# ---------------------------------------------------------------- the nudge in a conversation run

TOOL_ERR = "`file_text` is required for command: create."
ALWAYS_ERR = ("always_error_tool", {"command": "create"})


def test_run_nudges_before_going_stuck_on_repeating_action_error(make):
    """test_stuck_detector_nudge.py: test_run_nudges_before_going_stuck_on_repeating_action_error (4 identical
    failing calls: one nudge after the 3rd, naming the tool and the error; stuck after the 4th).

    Deliberate difference (docs/peers.md): the SDK nudges after the 3rd failure of the same action and is
    stuck after the 4th; ``Policy.openhands()`` follows the controller (``openhands/controller/stuck.py``:
    the last three actions identical and their observations errors, whatever they say) and refuses the
    call after the 3rd failure, with no warning first. The 4th call is refused and never runs; one event reports the refusal.
    """
    events = []
    g = make(POLICY(), on_event=events.append)
    ds = [fail(g, "s", *ALWAYS_ERR, ValueError(TOOL_ERR)) for _ in range(4)]
    assert [d.action for d in ds] == ["allow", "allow", "allow", "block"]
    assert "always_error_tool" in ds[3].message
    assert g.check("s", *ALWAYS_ERR).blocked
    assert [e["level"] for e in events if e["detector"] == "error_streak"] == ["block"]


def test_run_recovers_after_nudge_when_model_self_corrects(make):
    """test_stuck_detector_nudge.py: test_run_recovers_after_nudge_when_model_self_corrects (3 identical
    failing calls, then something else: never stuck).

    Deliberate difference (docs/peers.md): the SDK nudges after the 3rd failure of the same action and is
    stuck after the 4th; ``Policy.openhands()`` follows the controller (``openhands/controller/stuck.py``:
    the last three actions identical and their observations errors, whatever they say) and refuses the
    call after the 3rd failure, with no warning first. Nothing is emitted here: the model changed course before trying the call a 4th time.
    """
    events = []
    g = make(POLICY(), on_event=events.append)
    assert [fail(g, "s", *ALWAYS_ERR, ValueError(TOOL_ERR)) for _ in range(3)] == [ALLOW] * 3
    assert call(g, "s", "read", {"path": "/tmp/foo.py"}, "") is ALLOW
    assert events == []


def test_run_does_not_renudge_while_the_streak_is_frozen(make):
    """test_stuck_detector_nudge.py: test_run_does_not_renudge_action_error_while_streak_is_frozen (after 3
    identical failures the model answers with an empty message and then text, adding no action: the
    nudge is not emitted again).

    Deliberate difference (docs/peers.md): the SDK nudges after the 3rd failure of the same action and is
    stuck after the 4th; ``Policy.openhands()`` follows the controller (``openhands/controller/stuck.py``:
    the last three actions identical and their observations errors, whatever they say) and refuses the
    call after the 3rd failure, with no warning first. The messages emit nothing and leave the streak as it was: a retry is refused.
    """
    events = []
    g = make(POLICY(), on_event=events.append)
    for _ in range(3):
        fail(g, "s", *ALWAYS_ERR, ValueError(TOOL_ERR))
    assert say(g, "s", "") is ALLOW
    assert say(g, "s", "I see the issue, stopping here.") is ALLOW
    assert events == []
    assert g.check("s", *ALWAYS_ERR).blocked
    assert [e["level"] for e in events if e["detector"] == "error_streak"] == ["block"]
