"""opencode's doom-loop check, on ``Policy.opencode()``.

opencode ships no unit test of its doom loop, so these cases translate the check itself: repository
anomalyco/opencode (formerly sst/opencode), ``packages/opencode/src/session/processor.ts``, the
``tool-call`` branch of ``SessionProcessor.create().process`` with ``DOOM_LOOP_THRESHOLD = 3``: when
the last three parts of the assistant message are calls of the same tool whose ``JSON.stringify``'d
inputs equal the new call's, opencode asks the ``doom_loop`` permission (here: the call is refused).
Each docstring names the branch of that condition it exercises. Two deliberate differences
(docs/peers.md): loopcore compares arguments canonically, so key order does not matter, and it
counts consecutive calls across the session, not only within one assistant message.
"""

from __future__ import annotations

import pytest
from peerlib import ALLOW, Policy, call, text

POLICY = Policy.opencode


@pytest.fixture
def g(make):
    return make(POLICY())


EDIT = ("edit", {"filePath": "src/app.ts", "oldString": "a", "newString": "b"})


def test_third_identical_call_asks(g):
    """processor.ts doom loop: ``lastThree.length === DOOM_LOOP_THRESHOLD`` and every part matches: the 3rd
    identical consecutive call triggers the ``doom_loop`` ask."""
    assert [call(g, "s", *EDIT, "ok") for _ in range(2)] == [ALLOW, ALLOW]
    d = call(g, "s", *EDIT, "ok")
    assert (d.action, d.detector, d.count) == ("block", "consecutive_repeat", 3)


def test_two_identical_calls_do_not(g):
    """processor.ts doom loop: fewer than ``DOOM_LOOP_THRESHOLD`` parts: no ask."""
    assert [call(g, "s", *EDIT, "ok") for _ in range(2)] == [ALLOW, ALLOW]
    assert call(g, "s", "read", {"filePath": "src/app.ts"}, "x") is ALLOW


def test_another_call_between_breaks_the_run(g):
    """processor.ts doom loop: ``lastThree.every(p => p.type === "tool" && p.tool === value.toolName ...)`` fails
    when another call is among the last three."""
    call(g, "s", *EDIT, "ok")
    call(g, "s", *EDIT, "ok")
    call(g, "s", "read", {"filePath": "src/app.ts"}, "x")
    assert call(g, "s", *EDIT, "ok") is ALLOW


def test_same_input_to_another_tool_is_not_a_repeat(g):
    """processor.ts doom loop: ``p.tool === value.toolName``: the same input to different tools does not count."""
    args = {"filePath": "src/app.ts"}
    assert [call(g, "s", t, args, "x") for t in ("read", "lsp_diagnostics", "read")] == [ALLOW] * 3


def test_different_input_is_not_a_repeat(g):
    """processor.ts doom loop: ``JSON.stringify(p.state.input) === JSON.stringify(value.input)`` fails for a
    changed input."""
    ds = [
        call(
            g, "s", "edit", {"filePath": "src/app.ts", "oldString": "a", "newString": f"b{i}"}, "ok"
        )
        for i in range(3)
    ]
    assert ds == [ALLOW] * 3


def test_outcomes_do_not_matter(g):
    """processor.ts doom loop: the condition looks at the tool and its input only (``p.state.status !==
    "pending"``, any outcome): three identical calls ask even when every result differs."""
    ds = [call(g, "s", *EDIT, f"result {i}") for i in range(3)]
    assert ds[2].blocked


def test_key_order_does_not_matter_in_loopcore(g):
    """processor.ts doom loop: ``JSON.stringify`` keeps key order, so {a, b} and {b, a} differ in opencode.

    Deliberate difference (docs/peers.md): loopcore hashes arguments canonically, so the same
    arguments in another key order are the same call and the third one is refused.
    """
    call(g, "s", "edit", {"filePath": "src/app.ts", "oldString": "a", "newString": "b"}, "ok")
    call(g, "s", "edit", {"newString": "b", "oldString": "a", "filePath": "src/app.ts"}, "ok")
    assert call(
        g, "s", "edit", {"oldString": "a", "filePath": "src/app.ts", "newString": "b"}, "ok"
    ).blocked


def test_reply_text_between_calls_does_not_break_the_run_in_loopcore(g):
    """processor.ts doom loop: ``MessageV2.parts(input.assistantMessage.id)`` and ``p.type === "tool"``:
    opencode looks at the parts of the current assistant message only, and a text part among the last
    three breaks the run.

    Deliberate difference (docs/peers.md): loopcore counts consecutive calls across the session, and
    reply text between them (checked for content loops) is not a call, so the slow loop of one
    identical call per reply, with a sentence before each, is refused at the third call.
    """
    for i in range(2):
        call(g, "s", *EDIT, "ok")
        text(g, "s", f"The edit did not apply; let me try again ({i}).")
    assert call(g, "s", *EDIT, "ok").blocked
