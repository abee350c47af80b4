"""OpenHands' controller StuckDetector tests, translated case by case, on ``Policy.openhands()``.

Source: repository OpenHands/OpenHands, ``tests/unit/controller/test_is_stuck.py`` (class
TestStuckDetector; the detector is ``openhands/controller/stuck.py``). An action is a ``check``,
its observation the ``record`` after it (an ErrorObservation is ``record(error=...)``); an agent
MessageAction is ``guard.note_message(session, text)``, a user one ``note_message(..., role="user")``;
a condensation event is ``guard.note_event(session, "condensation")``.

``is_stuck()`` is a query the peer asks between events; loopcore answers at the next call, so
"stuck after N pairs" reads "the next call is refused" and "not stuck" reads "the next call is
allowed" (that call is then one more pair of the history). The peer runs every case in headless
mode unless it says otherwise, where user messages are ignored: here that is a harness which does
not report them. In interactive mode (``headless_mode=False``, and always in the SDK) a user
message starts the count again, which is what a reported user message does in loopcore.
"""

from __future__ import annotations

import pytest
from peerlib import ALLOW, Policy, attempt, call, fail, note_event, say

POLICY = Policy.openhands


@pytest.fixture
def g(make):
    return make(POLICY())


LS = ("run", {"command": "ls"})
PWD = ("run", {"command": "pwd"})
READ1 = ("read", {"path": "file1.txt"})
READ2 = ("read", {"path": "file2.txt"})
LS_OBS = {"command": "ls", "content": "file1.txt"}
LS_OTHER_OBS = {"command": "ls_DIFFERENT", "content": "file1.txt"}
READ1_OBS = {"path": "file1.txt", "content": "File content"}
READ2_OBS = {"path": "file2.txt", "content": "File content"}

CELL = (
    "run_ipython",
    {"code": "edit_file_by_replace('book_store.py', to_replace=\"def total(basket):\")"},
)
JUPYTER = "\n[Jupyter current working directory: /workspace]\n[Jupyter Python interpreter: /usr/bin/python]"


def syntax_error_obs(i: int, message: str, random_line: bool) -> str:
    line = (i + 1) * 10 if random_line else 42
    tail = "\n" * (i + 1) if random_line else ""
    return f'  Cell In[1], line {line}\n    to_replace="""def largest(a, b):\n            ^\n{message}{tail}{JUPYTER}'


def unterminated_obs(i: int, random_line: bool) -> str:
    line = (i + 1) * 10 if random_line else 1
    return f"  Cell In[1], line {line}\nhello\n       ^\nSyntaxError: unterminated string literal (detected at line {line}){JUPYTER}"


def pairs(g, seq):
    """Each (tool, args, observation) as one action/observation pair; the decisions."""
    return [call(g, "s", tool, args, obs) for tool, args, obs in seq]


def test_history_too_short(g):
    """test_is_stuck.py: TestStuckDetector.test_history_too_short."""
    call(g, "s", *LS, {"command": "ls", "content": "file1.txt\nfile2.txt"})
    assert g.check("s", *LS) is ALLOW


def test_interactive_mode_resets_after_user_message(g):
    """test_is_stuck.py: TestStuckDetector.test_interactive_mode_resets_after_user_message (the
    interactive half; the headless half, user messages ignored, is test_is_stuck_repeating_action_observation)."""
    empty = {"command": "ls", "content": ""}
    assert pairs(g, [(*LS, empty)] * 4) == [ALLOW] * 4
    assert call(g, "s", *LS, empty).blocked  # stuck after 4 identical pairs
    say(g, "s", "Hello", role="user")
    ds = pairs(g, [(*LS, empty)] * 4)
    assert ds == [ALLOW] * 4  # not stuck right after the message, nor after 2 or 3 more pairs
    assert g.check("s", *LS).blocked  # 4 identical pairs after the user message: stuck again


def test_is_stuck_repeating_action_observation(g):
    """test_is_stuck.py: TestStuckDetector.test_is_stuck_repeating_action_observation (headless: the user
    message between the pairs is not reported)."""
    empty = {"command": "ls", "content": ""}
    assert pairs(g, [(*LS, empty)] * 4) == [ALLOW] * 4  # not stuck after 2, nor after 3
    d = g.check("s", *LS)
    assert (d.action, d.detector, d.count) == (
        "block",
        "consecutive_repeat",
        5,
    )  # 4 repeats before it


def test_is_stuck_repeating_action_error(g):
    """test_is_stuck.py: TestStuckDetector.test_is_stuck_repeating_action_error (the same action failing
    four times, not necessarily with the same error; headless: the user message between is not reported).
    The peer asks only after the fourth failure; the controller's rule is stuck after three."""
    bad = ("run", {"command": "invalid_command"})
    ds = [
        fail(g, "s", *bad, err)
        for err in (
            "Command not found",
            "Command still not found or another error",
            "Different error",
            "Command not found",
        )
    ]
    assert ds[:3] == [ALLOW] * 3
    d = g.check("s", *bad)
    assert (d.action, d.detector) == ("block", "error_streak")
    assert "failed" in d.message


@pytest.mark.parametrize(
    "message",
    ["SyntaxError: invalid syntax. Perhaps you forgot a comma?", "SyntaxError: incomplete input"],
    ids=["invalid-syntax", "incomplete-input"],
)
def test_is_stuck_repeated_syntax_error(g, message):
    """test_is_stuck.py: TestStuckDetector.test_is_stuck_invalid_syntax_error and
    test_is_stuck_incomplete_input_error (two cases: the same cell, the same error output, 4 times)."""
    pairs(g, [(*CELL, syntax_error_obs(i, message, False)) for i in range(4)])
    assert g.check("s", *CELL).blocked


@pytest.mark.parametrize(
    "message, incidents",
    [
        ("SyntaxError: invalid syntax. Perhaps you forgot a comma?", 4),
        ("SyntaxError: invalid syntax. Perhaps you forgot a comma?", 3),
        ("SyntaxError: incomplete input", 4),
    ],
    ids=[
        "invalid-syntax-random-lines",
        "invalid-syntax-three-incidents",
        "incomplete-input-random-lines",
    ],
)
def test_is_not_stuck_syntax_error_on_changing_lines(g, message, incidents):
    """test_is_stuck.py: TestStuckDetector.test_is_not_stuck_invalid_syntax_error_random_lines,
    test_is_not_stuck_invalid_syntax_error_only_three_incidents and test_is_not_stuck_incomplete_input_error
    (three cases: the error moves to another line each time, so the output changes)."""
    pairs(g, [(*CELL, syntax_error_obs(i, message, True)) for i in range(incidents)])
    assert g.check("s", *CELL) is ALLOW


def test_is_not_stuck_unterminated_string_random_lines(g):
    """test_is_stuck.py: TestStuckDetector.test_is_not_stuck_ipython_unterminated_string_error_random_lines."""
    pairs(g, [(*CELL, unterminated_obs(i, True)) for i in range(4)])
    assert g.check("s", *CELL) is ALLOW


def test_is_not_stuck_unterminated_string_two_incidents(g):
    """test_is_stuck.py: TestStuckDetector.test_is_not_stuck_ipython_unterminated_string_error_only_two_incidents."""
    pairs(g, [(*CELL, unterminated_obs(i, False)) for i in range(2)])
    assert g.check("s", *CELL) is ALLOW


def test_is_stuck_unterminated_string(g):
    """test_is_stuck.py: TestStuckDetector.test_is_stuck_ipython_unterminated_string_error."""
    pairs(g, [(*CELL, unterminated_obs(i, False)) for i in range(4)])
    assert g.check("s", *CELL).blocked


def test_is_not_stuck_syntax_error_not_at_end(g):
    """test_is_stuck.py: TestStuckDetector.test_is_not_stuck_ipython_syntax_error_not_at_end."""
    cell = ("run_ipython", {"code": 'print("hello'})
    err = (
        'print("hello\n       ^\nSyntaxError: unterminated string literal (detected at line {})\n{}'
    )
    tails = [
        (1, "This is some additional output"),
        (1, "Too much output here on and on"),
        (3, "Enough"),
        (2, "Last line of output"),
    ]
    pairs(g, [(*cell, err.format(line, tail)) for line, tail in tails])
    assert g.check("s", *cell) is ALLOW


def test_is_stuck_repeating_action_observation_pattern(g):
    """test_is_stuck.py: TestStuckDetector.test_is_stuck_repeating_action_observation_pattern (headless: the
    user messages are not reported)."""
    ls_obs = {"command": "ls", "content": "file1.txt\nfile2.txt"}
    pairs(g, [(*LS, ls_obs), (*READ1, READ1_OBS)] * 3)
    d = g.check("s", *LS)
    assert (d.action, d.detector) == ("block", "cycle")


def test_is_stuck_not_stuck(g):
    """test_is_stuck.py: TestStuckDetector.test_is_stuck_not_stuck."""
    ls_obs = {"command": "ls", "content": "file1.txt\nfile2.txt"}
    pwd_obs = {"command": "pwd", "content": "/home/user"}
    read2_obs = {"path": "file2.txt", "content": "Another file content"}
    pairs(
        g,
        [
            (*LS, ls_obs),
            (*READ1, READ1_OBS),
            (*PWD, pwd_obs),
            (*READ2, read2_obs),
            (*PWD, pwd_obs),
            (*READ2, read2_obs),
        ],
    )
    assert g.check("s", *PWD) is ALLOW


def test_is_stuck_monologue(g):
    """test_is_stuck.py: TestStuckDetector.test_is_stuck_monologue (the observation of a call made
    before the messages arrives after them: it ends the monologue, as in OpenHands' event order)."""
    say(g, "s", "Hi there!", role="user")
    assert say(g, "s", "Hi there!") is ALLOW
    say(g, "s", "How are you?", role="user")
    echo = ("run", {"command": "echo 42"})
    attempt(g, "s", *echo)
    line = "I'm doing well, thanks for asking."
    assert [say(g, "s", line) for _ in range(2)] == [ALLOW, ALLOW]
    d = say(g, "s", line)
    assert (d.action, d.detector) == ("block", "monologue")
    g.record(
        "s",
        *echo,
        {"command": "storybook", "content": "OK, I was stuck, but no more.", "exit_code": 0},
    )
    assert [say(g, "s", line) for _ in range(2)] == [ALLOW, ALLOW]


def condensations(g, n, between=None):
    out = []
    for i in range(n):
        out.append(note_event(g, "s", "condensation"))
        if between is not None and i < n - 1:
            between(i)
    return out


def test_is_stuck_context_window_error_loop(g):
    """test_is_stuck.py: TestStuckDetector.test_is_stuck_context_window_error_loop."""
    ds = condensations(g, 10)
    assert all(d is ALLOW for d in ds[:-1])
    assert ds[-1].blocked


def test_is_not_stuck_context_window_error_with_other_events(g):
    """test_is_stuck.py: TestStuckDetector.test_is_not_stuck_context_window_error_with_other_events."""

    def work(i):
        call(
            g,
            "s",
            "run",
            {"command": f"ls {i}"},
            {"command": f"ls {i}", "content": "file1.txt\nfile2.txt"},
        )
        if i % 2 == 0:
            call(
                g,
                "s",
                "read",
                {"path": f"file{i}.txt"},
                {"path": f"file{i}.txt", "content": f"File content {i}"},
            )

    assert all(d is ALLOW for d in condensations(g, 10, between=work))


def test_is_not_stuck_context_window_error_less_than_ten(g):
    """test_is_stuck.py: TestStuckDetector.test_is_not_stuck_context_window_error_less_than_ten."""
    assert all(d is ALLOW for d in condensations(g, 9))


def test_context_window_errors_with_user_messages_between(g):
    """test_is_stuck.py: TestStuckDetector.test_is_stuck_context_window_error_with_user_messages.

    Deliberate difference (docs/peers.md): the peer's headless mode ignores the user messages and
    reports stuck; a reported user message starts loopcore's count again (the SDK's and the
    interactive rule), so the condensations between them are not a loop. A headless harness that
    does not report user messages gets test_is_stuck_context_window_error_loop.
    """
    ds = condensations(g, 10, between=lambda i: say(g, "s", f"Please continue {i}", role="user"))
    assert all(d is ALLOW for d in ds)


def test_is_not_stuck_context_window_error_in_non_headless(g):
    """test_is_stuck.py: TestStuckDetector.test_is_not_stuck_context_window_error_in_non_headless
    (the interactive half; the headless half is test_is_stuck_context_window_error_loop)."""
    condensations(g, 9)
    say(g, "s", "Please continue", role="user")
    assert note_event(g, "s", "condensation") is ALLOW


# ---------------------------------------------------------------- _is_stuck_action_observation_pattern


def test_fail_guard_five_actions(g):
    """test_is_stuck.py: TestStuckDetector.test_fail_guard_five_actions (5 pairs of the alternation are not enough)."""
    pairs(g, [(*READ1, READ1_OBS), (*LS, LS_OBS)] * 2 + [(*READ1, READ1_OBS)])
    assert g.check("s", *LS) is ALLOW


def test_fail_guard_five_obs(g):
    """test_is_stuck.py: TestStuckDetector.test_fail_guard_five_obs (the 6th action has no observation yet: not stuck;
    once it has one, the 6 pairs are)."""
    pairs(g, [(*READ1, READ1_OBS), (*LS, LS_OBS)] * 2 + [(*READ1, READ1_OBS)])
    assert attempt(g, "s", *LS) is ALLOW
    g.record("s", *LS, LS_OBS)
    assert g.check("s", *READ1).blocked


@pytest.mark.parametrize(
    "seq",
    [
        [
            (*READ1, READ1_OBS),
            (*LS, LS_OBS),
            (*READ1, READ1_OBS),
            (*PWD, LS_OBS),
            (*READ1, READ1_OBS),
            (*LS, LS_OBS),
        ],
        [
            (*READ1, READ1_OBS),
            (*LS, LS_OBS),
            (*READ2, READ1_OBS),
            (*LS, LS_OBS),
            (*READ1, READ1_OBS),
            (*LS, LS_OBS),
        ],
        [
            (*READ1, READ1_OBS),
            (*LS, LS_OBS),
            (*READ1, READ1_OBS),
            (*LS, LS_OTHER_OBS),
            (*READ1, READ1_OBS),
            (*LS, LS_OBS),
        ],
        [
            (*READ1, READ1_OBS),
            (*LS, LS_OBS),
            (*READ1, READ2_OBS),
            (*LS, LS_OBS),
            (*READ1, READ1_OBS),
            (*LS, LS_OBS),
        ],
    ],
    ids=["actions-break-A6-A4", "actions-break-A5-A3", "obs-break-O6-O4", "obs-break-O5-O3"],
)
def test_broken_alternation_is_not_stuck(g, seq):
    """test_is_stuck.py: TestStuckDetector.test_fail_actions_break_A6_A4, test_fail_actions_break_A5_A3,
    test_fail_obs_break_O6_O4, test_fail_obs_break_O5_O3 (four cases: one action or observation differs)."""
    pairs(g, seq)
    assert g.check("s", *READ1) is ALLOW


def test_loop_ignores_other_events(g):
    """test_is_stuck.py: TestStuckDetector.test_loop_ignores_other_events (events that are neither actions nor
    observations are not reported to the guard at all)."""
    pairs(g, [(*READ1, READ1_OBS), (*LS, LS_OBS)] * 3)
    assert g.check("s", *READ1).blocked


def test_loop_ignores_extra_actions(g):
    """test_is_stuck.py: TestStuckDetector.test_loop_ignores_extra_actions (an action with no observation
    first; ``Policy.openhands().cycle_evidence_recent``: the evidence is the newest calls only, as
    OpenHands looks at its last six actions and observations)."""
    attempt(g, "s", *LS)
    pairs(g, [(*READ1, READ1_OBS), (*LS, LS_OBS)] * 3)
    assert g.check("s", *READ1).blocked


def test_loop_ignores_extra_observations(g):
    """test_is_stuck.py: TestStuckDetector.test_loop_ignores_extra_observations (an observation with no action first)."""
    g.record("s", *READ1, READ1_OBS)
    pairs(g, [(*READ1, READ1_OBS), (*LS, LS_OBS)] * 3)
    assert g.check("s", *READ1).blocked


# ---------------------------------------------------------------- empty responses

NUDGE = "Your last response did not include a function call or a message. Please use a tool to proceed with the task."


@pytest.mark.parametrize("headless", [True, False], ids=["headless", "non-headless"])
def test_is_stuck_empty_response_loop_with_nudges(g, headless):
    """test_is_stuck.py: TestStuckDetector.test_is_stuck_empty_response_loop_with_nudges and
    test_is_stuck_empty_response_loop_non_headless (two cases). The corrective nudges are the harness's own
    text, not a user turn, so the harness does not report them as user messages."""
    say(g, "s", "Build me an app", role="user")
    ds = [say(g, "s", "") for _ in range(3)]
    assert ds[:2] == [ALLOW, ALLOW]
    assert (ds[2].action, ds[2].detector) == ("block", "monologue")


def test_is_not_stuck_only_two_empty_responses(g):
    """test_is_stuck.py: TestStuckDetector.test_is_not_stuck_only_two_empty_responses."""
    say(g, "s", "Hello", role="user")
    assert [say(g, "s", "") for _ in range(2)] == [ALLOW, ALLOW]
    assert g.check("s", *LS) is ALLOW


def test_non_empty_response_between_empty_ones(g):
    """test_is_stuck.py: TestStuckDetector.test_is_not_stuck_non_empty_response_breaks_loop.

    Deliberate difference (docs/peers.md): the controller needs identical or empty agent messages, so a
    real reply between empty ones breaks its loop; ``Policy.openhands()`` follows the SDK's monologue rule,
    three agent messages with no tool call between whatever they say, so the third message is refused.
    """
    say(g, "s", "Hello", role="user")
    ds = [say(g, "s", t) for t in ("", "", "Let me help you with that.")]
    assert ds[:2] == [ALLOW, ALLOW]
    assert ds[2].detector == "monologue"


@pytest.mark.parametrize(
    "contents",
    [["", "  ", "\n", "\t  \n"], [" ", "  ", "   "]],
    ids=["whitespace-only", "varying-whitespace"],
)
def test_is_stuck_whitespace_only_responses(g, contents):
    """test_is_stuck.py: TestStuckDetector.test_is_stuck_whitespace_only_responses and
    test_is_stuck_empty_response_with_varying_content (two cases)."""
    say(g, "s", "Hello", role="user")
    ds = [say(g, "s", t) for t in contents[:3]]
    assert ds[:2] == [ALLOW, ALLOW]
    assert (ds[2].action, ds[2].detector) == ("block", "monologue")
