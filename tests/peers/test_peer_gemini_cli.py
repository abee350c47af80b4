"""gemini-cli's own loop-detection tests, translated case by case, on ``Policy.gemini_cli()``.

Source: repository google-gemini/gemini-cli, ``packages/core/src/services/loopDetectionService.test.ts``
(describe "LoopDetectionService"). A ``ToolCallRequest`` event is a ``check`` (gemini-cli sees the
request before the tool runs, with no outcome); a ``Content`` event is ``guard.check_text``. The
peer's ``count`` 1 means "loop detected": here the decision names the detector. The thirteen
cases of "LoopDetectionService LLM Checks" ask a second model whether the session is stuck;
loopcore has no model in the loop, so they are not expressible (docs/peers.md).
"""

from __future__ import annotations

import random

import pytest
from peerlib import ALLOW, Policy, attempt, call, disable, text

TOOL_CALL_LOOP_THRESHOLD = 5
CONTENT_LOOP_THRESHOLD = 10
CONTENT_CHUNK_SIZE = 50

POLICY = Policy.gemini_cli


@pytest.fixture
def g(make):
    return make(POLICY())


def repetitive(ident: int, length: int) -> str:
    base = f"This is a unique sentence, id={ident}. "
    return (base * (length // len(base) + 1))[:length]


def random_string(rng: random.Random, length: int) -> str:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    return "".join(rng.choice(alphabet) for _ in range(length))


def is_loop(d) -> bool:
    return d.detector == "content_loop"


def stream(g, chunk: str, n: int, session="s"):
    """Feed *chunk* up to *n* times; the decisions until (and including) the first loop."""
    out = []
    for _ in range(n):
        d = text(g, session, chunk)
        out.append(d)
        if is_loop(d):
            break
    return out


# ---------------------------------------------------------------- Tool Call Loop Detection

EVENT = ("testTool", {"param": "value"})


def test_fewer_than_threshold_identical_calls_are_not_a_loop(g):
    """loopDetectionService.test.ts: 'should not detect a loop for fewer than TOOL_CALL_LOOP_THRESHOLD identical calls'."""
    assert [attempt(g, "s", *EVENT) for _ in range(TOOL_CALL_LOOP_THRESHOLD - 1)] == [ALLOW] * 4


def test_threshold_th_identical_call_is_a_loop(g):
    """loopDetectionService.test.ts: 'should detect a loop on the TOOL_CALL_LOOP_THRESHOLD-th identical call'."""
    for _ in range(TOOL_CALL_LOOP_THRESHOLD - 1):
        attempt(g, "s", *EVENT)
    d = attempt(g, "s", *EVENT)
    assert (d.action, d.detector, d.count) == (
        "block",
        "consecutive_repeat",
        TOOL_CALL_LOOP_THRESHOLD,
    )


def test_subsequent_identical_calls_are_a_loop(g):
    """loopDetectionService.test.ts: 'should detect a loop on subsequent identical calls'."""
    for _ in range(TOOL_CALL_LOOP_THRESHOLD):
        attempt(g, "s", *EVENT)
    d = attempt(g, "s", *EVENT)
    assert (d.action, d.detector) == ("block", "consecutive_repeat")


def test_different_tool_calls_are_not_a_loop(g):
    """loopDetectionService.test.ts: 'should not detect a loop for different tool calls'."""
    events = [
        ("testTool", {"param": "value1"}),
        ("testTool", {"param": "value2"}),
        ("anotherTool", {"param": "value1"}),
    ]
    for _ in range(TOOL_CALL_LOOP_THRESHOLD - 2):
        for ev in events:
            assert attempt(g, "s", *ev) is ALLOW


def test_other_events_do_not_reset_the_tool_call_counter(g):
    """loopDetectionService.test.ts: 'should not reset tool call counter for other event types'.

    The peer's "other event" is a thought; the nearest loopcore event is streamed text.
    """
    for _ in range(TOOL_CALL_LOOP_THRESHOLD - 1):
        assert attempt(g, "s", *EVENT) is ALLOW
    assert not is_loop(text(g, "s", "Let me think about this."))
    d = attempt(g, "s", *EVENT)
    assert (d.action, d.detector) == ("block", "consecutive_repeat")


def test_disabled_for_session_detects_nothing(g):
    """loopDetectionService.test.ts: 'should not detect a loop when disabled for session'."""
    events = []
    g.on_event = events.append
    disable(g, "s")
    assert [attempt(g, "s", *EVENT) for _ in range(TOOL_CALL_LOOP_THRESHOLD)] == [ALLOW] * 5
    assert events == []
    assert attempt(g, "other", *EVENT) is ALLOW  # other sessions keep their detection


def test_disabling_after_detection_stops_reporting(g):
    """loopDetectionService.test.ts: 'should stop reporting a loop if disabled after detection'."""
    for _ in range(TOOL_CALL_LOOP_THRESHOLD):
        attempt(g, "s", *EVENT)
    assert attempt(g, "s", *EVENT).blocked
    disable(g, "s")
    assert attempt(g, "s", *EVENT) is ALLOW


def test_disabled_in_config_detects_nothing(make):
    """loopDetectionService.test.ts: 'should skip loop detection if disabled in config'."""
    events = []
    g = make(POLICY().replace(enabled=False), on_event=events.append)
    assert [attempt(g, "s", *EVENT) for _ in range(TOOL_CALL_LOOP_THRESHOLD + 2)] == [ALLOW] * 7
    assert events == []


# ---------------------------------------------------------------- Content Loop Detection


def test_random_content_is_not_a_loop(g):
    """loopDetectionService.test.ts: 'should not detect a loop for random content'."""
    rng = random.Random(1)
    assert not any(is_loop(text(g, "s", random_string(rng, 10))) for _ in range(1000))


def test_consecutively_repeated_chunk_is_a_loop(g):
    """loopDetectionService.test.ts: 'should detect a loop when a chunk of content repeats consecutively'."""
    ds = [text(g, "s", repetitive(1, CONTENT_CHUNK_SIZE)) for _ in range(CONTENT_LOOP_THRESHOLD)]
    assert not any(is_loop(d) for d in ds[:-1])
    assert is_loop(ds[-1])


def test_list_with_a_long_shared_prefix_is_not_a_loop(g):
    """loopDetectionService.test.ts: 'should not detect a loop for a list with a long shared prefix'."""
    prefix = "projects/my-google-cloud-project-12345/locations/us-central1/services/"
    listing = "".join(f"- {prefix}{i}\n" for i in range(15))
    assert not is_loop(text(g, "s", listing))


def test_repetitions_far_apart_are_not_a_loop(g):
    """loopDetectionService.test.ts: 'should not detect a loop if repetitions are very far apart'."""
    rng = random.Random(2)
    seen = []
    for _ in range(CONTENT_LOOP_THRESHOLD):
        seen.append(text(g, "s", repetitive(1, CONTENT_CHUNK_SIZE)))
        seen.append(text(g, "s", random_string(rng, 2000)))
    assert not any(is_loop(d) for d in seen)


def test_longer_repeating_pattern_is_a_loop(g):
    """loopDetectionService.test.ts: 'should detect a loop with longer repeating patterns (e.g. ~150 chars)'."""
    assert is_loop(stream(g, repetitive(1, 150), CONTENT_LOOP_THRESHOLD + 20)[-1])


def test_user_provided_loop_example(g):
    """loopDetectionService.test.ts: 'should detect the specific user-provided loop example'."""
    pattern = (
        "I will not output any text.\n  I will just end the turn.\n  I am done.\n"
        "  I will not do anything else.\n  I will wait for the user's next command.\n"
    )
    assert is_loop(stream(g, pattern, CONTENT_LOOP_THRESHOLD + 20)[-1])


def test_second_user_provided_loop_example(g):
    """loopDetectionService.test.ts: 'should detect the second specific user-provided loop example'."""
    pattern = "I have added all the requested logs and verified the test file. I will now mark the task as complete.\n  "
    assert is_loop(stream(g, pattern, CONTENT_LOOP_THRESHOLD + 20)[-1])


def test_alternating_short_phrases_are_a_loop(g):
    """loopDetectionService.test.ts: 'should detect a loop of alternating short phrases'."""
    assert is_loop(stream(g, "Thinking... Done. ", CONTENT_LOOP_THRESHOLD * 10)[-1])


def test_repeated_complex_thought_is_a_loop(g):
    """loopDetectionService.test.ts: 'should detect a loop of repeated complex thought processes'."""
    pattern = "I need to check the file. The file does not exist. I will create the file. "
    assert is_loop(stream(g, pattern, CONTENT_LOOP_THRESHOLD + 20)[-1])


# ---------------------------------------------------------------- Content Loop Detection with Code Blocks

CHUNK = repetitive(1, CONTENT_CHUNK_SIZE)


def none_loop(g, chunks):
    return not any(is_loop(text(g, "s", c)) for c in chunks)


def test_repetition_inside_a_code_block_is_not_a_loop(g):
    """loopDetectionService.test.ts: 'should not detect a loop when repetitive content is inside a code block'."""
    assert none_loop(g, ["```\n", *[CHUNK] * CONTENT_LOOP_THRESHOLD, "\n```"])


def test_content_moving_into_a_code_block_is_not_a_loop(g):
    """loopDetectionService.test.ts: 'should not detect loops when content transitions into a code block'."""
    assert none_loop(
        g,
        [
            *[CHUNK] * (CONTENT_LOOP_THRESHOLD - 2),
            "```javascript\n",
            *[CHUNK] * CONTENT_LOOP_THRESHOLD,
        ],
    )


def test_already_inside_a_code_block_skips_detection(g):
    """loopDetectionService.test.ts: 'should skip loop detection when already inside a code block'."""
    assert none_loop(g, ["Here is some code:\n```\n", *[CHUNK] * (CONTENT_LOOP_THRESHOLD + 5)])


def test_multiple_fence_transitions_are_tracked(g):
    """loopDetectionService.test.ts: 'should correctly track inCodeBlock state with multiple fence transitions'."""
    assert none_loop(g, ["Normal text ", "```\n", *[CHUNK] * 5, "```\n", "```python\n"])


def test_repetition_after_a_closed_code_block_is_a_loop(g):
    """loopDetectionService.test.ts: 'should detect a loop when repetitive content is outside a code block'."""
    assert none_loop(g, ["```", "\nsome code\n", "```"])
    ds = [text(g, "s", CHUNK) for _ in range(CONTENT_LOOP_THRESHOLD)]
    assert is_loop(ds[-1])


def test_several_code_blocks_without_loops(g):
    """loopDetectionService.test.ts: 'should handle content with multiple code blocks and no loops'."""
    assert none_loop(g, ["```\ncode1\n```", "\nsome text\n", "```\ncode2\n```"])


def test_code_blocks_then_looping_text_is_a_loop(g):
    """loopDetectionService.test.ts: 'should handle content with mixed code blocks and looping text'."""
    assert none_loop(g, ["```", "\ncode1\n", "```"])
    ds = [text(g, "s", CHUNK) for _ in range(CONTENT_LOOP_THRESHOLD)]
    assert is_loop(ds[-1])


def test_long_code_block_with_repeating_tokens_is_not_a_loop(g):
    """loopDetectionService.test.ts: 'should not detect a loop for a long code block with some repeating tokens'."""
    assert none_loop(
        g, ["```\n", *["for (let i = 0; i < 10; i++) { console.log(i); }"] * 20, "\n```"]
    )


def test_code_fence_resets_tracking(g):
    """loopDetectionService.test.ts: 'should reset tracking when a code fence is found'."""
    assert none_loop(
        g, [*[CHUNK] * (CONTENT_LOOP_THRESHOLD - 1), "```", *[CHUNK] * CONTENT_LOOP_THRESHOLD]
    )


@pytest.mark.parametrize(
    "marker",
    ["| Column 1 | Column 2 |", "* List item", "## Heading", "> Quote text"],
    ids=["table", "list-item", "heading", "blockquote"],
)
def test_markdown_element_resets_tracking(g, marker):
    """loopDetectionService.test.ts: 'should reset tracking when a table is detected', '... when a list item is
    detected', '... when a heading is detected', '... when a blockquote is detected' (four cases; the marker
    is a streamed chunk of its own, and a chunk's start counts as the start of a line)."""
    assert none_loop(
        g,
        [*[CHUNK] * (CONTENT_LOOP_THRESHOLD - 1), marker, *[CHUNK] * (CONTENT_LOOP_THRESHOLD - 1)],
    )


@pytest.mark.parametrize("fmt", ["* item", "- item", "+ item", "1. item", "42. item"])
def test_list_item_formats_reset_tracking(make, fmt):
    """loopDetectionService.test.ts: 'should reset tracking for various list item formats' (one case, five formats)."""
    g = make(POLICY())
    fresh = repetitive(100 + len(fmt), CONTENT_CHUNK_SIZE)
    assert none_loop(
        g,
        [
            *[CHUNK] * (CONTENT_LOOP_THRESHOLD - 1),
            "\n" + fmt,
            *[fresh] * (CONTENT_LOOP_THRESHOLD - 1),
        ],
    )


# ---------------------------------------------------------------- Reset Functionality


def test_a_tool_call_resets_the_content_count(g):
    """loopDetectionService.test.ts: 'tool call should reset content count'.

    The peer streams 9 short chunks, too few to loop with or without the reset; here the 9 chunks
    are the 50-character repeat, so the chunk after the tool call would be the 10th occurrence
    without the reset.
    """
    for _ in range(CONTENT_LOOP_THRESHOLD - 1):
        text(g, "s", CHUNK)
    attempt(g, "s", "testTool", {})
    assert not is_loop(text(g, "s", CHUNK))


# ---------------------------------------------------------------- Divider Content Detection


def test_repeating_divider_is_not_a_loop(g):
    """loopDetectionService.test.ts: 'should not detect a loop for repeating divider-like content'."""
    assert none_loop(g, ["-" * CONTENT_CHUNK_SIZE] * (CONTENT_LOOP_THRESHOLD + 5))


# ---------------------------------------------------------------- Iterative Loop State


def test_second_strike_on_the_very_next_identical_call(g):
    """loopDetectionService.test.ts: 'should correctly transition from Strike 1 to Strike 2'.

    Deliberate difference (docs/peers.md): gemini-cli's count is the strike number (1, then 2); after
    the first detection is handled (the refusal recorded), the very next identical call is detected
    again: loopcore refuses it again, its count the identical consecutive calls.
    """
    for _ in range(TOOL_CALL_LOOP_THRESHOLD - 1):
        attempt(g, "s", *EVENT)
    assert call(g, "s", *EVENT).blocked
    d = attempt(g, "s", *EVENT)
    assert (d.action, d.detector) == ("block", "consecutive_repeat")
