"""Roo Code's ToolRepetitionDetector tests, translated case by case, on ``Policy.roo()``.

Source: repository RooCodeInc/Roo-Code, ``src/core/tools/__tests__/ToolRepetitionDetector.spec.ts``
(describe "ToolRepetitionDetector"). ``detector.check(toolUse)`` runs before the tool does: it is a
``check`` here, and the harness records the outcome (or the refusal) after it. Roo's limit L
refuses the (L+1)th identical consecutive call and then starts counting again; its default is 3.
``ToolRepetitionDetector(L)`` is ``Policy.roo().replace(repeat_block=L + 1)``, limit 0 (unlimited)
is ``repeat_block=None``.
"""

from __future__ import annotations

import pytest
from peerlib import ALLOW, Policy, call

# Roo exempted browser scrolls from the count (#7471, Aug 2025) and dropped the exemption with the
# browser tool itself (#11392 / #11475, Feb 2026): its detector today counts every identical call.
# Policy.roo() follows Roo as it is now, a deliberate difference from the older spec cases below
# (docs/guard.md); loopcore's own default judges a repeat by its outcome, so a scroll that shows
# new content each time is never refused there.
SCROLL_NOTE = "Roo's current detector (and Policy.roo()) counts browser scrolls like any call"


def guard(make, limit: int | None = 3):
    policy = Policy.roo()
    if limit != 3:
        policy = policy.replace(repeat_block=None if not limit else limit + 1)
    return make(policy)


def use(g, name: str, params: dict | None = None, session="s"):
    """One tool use: checked, then run (or refused)."""
    return call(g, session, name, params or {}, "ok")


def allowed(d) -> bool:
    return not d.blocked


def refused(d, tool: str | None = None) -> bool:
    return d.blocked and d.detector == "consecutive_repeat" and (tool is None or tool in d.message)


# ---------------------------------------------------------------- initialization


def test_default_limit_is_3(make):
    """ToolRepetitionDetector.spec.ts: initialization 'should default to a limit of 3 if no argument provided'."""
    g = guard(make)
    ds = [use(g, "test-tool") for _ in range(4)]
    assert all(allowed(d) for d in ds[:3]) and refused(ds[3])


def test_custom_limit(make):
    """ToolRepetitionDetector.spec.ts: initialization 'should use the custom limit when provided'."""
    g = guard(make, 2)
    ds = [use(g, "test-tool") for _ in range(3)]
    assert all(allowed(d) for d in ds[:2]) and refused(ds[2])


# ---------------------------------------------------------------- no repetition


def test_different_tool_calls_are_allowed(make):
    """ToolRepetitionDetector.spec.ts: no repetition 'should allow execution for different tool calls'."""
    g = guard(make)
    assert [use(g, t) for t in ("first-tool", "second-tool", "third-tool")] == [ALLOW] * 3


def test_a_different_call_resets_the_counter(make):
    """ToolRepetitionDetector.spec.ts: no repetition 'should reset the counter when different tool calls are made'."""
    g = guard(make, 2)
    use(g, "same-tool")
    use(g, "different-tool")
    assert allowed(use(g, "same-tool"))


# ---------------------------------------------------------------- repetition below / reaching the limit


def test_below_limit_allowed_then_refused_at_limit(make):
    """ToolRepetitionDetector.spec.ts: repetition below limit 'should allow execution when repetition is below
    limit and block when limit reached'."""
    g = guard(make, 3)
    ds = [use(g, "repeat-tool") for _ in range(4)]
    assert [allowed(d) for d in ds] == [True, True, True, False]


def test_refusal_names_the_tool(make):
    """ToolRepetitionDetector.spec.ts: repetition reaches limit 'should block execution when repetition reaches the limit'."""
    g = guard(make, 3)
    for _ in range(3):
        use(g, "repeat-tool")
    assert refused(use(g, "repeat-tool"), "repeat-tool")


def test_a_new_tool_is_allowed_after_the_limit(make):
    """ToolRepetitionDetector.spec.ts: repetition reaches limit 'should reset internal state after limit is reached'."""
    g = guard(make, 2)
    assert refused([use(g, "repeat-tool") for _ in range(3)][-1])
    assert allowed(use(g, "new-tool"))


# ---------------------------------------------------------------- repetition after limit


def test_the_refused_tool_is_allowed_again_after_the_refusal(make):
    """ToolRepetitionDetector.spec.ts: repetition after limit 'should allow execution of previously problematic tool after reset'."""
    g = guard(make, 2)
    assert refused([use(g, "problem-tool") for _ in range(3)][-1])
    assert allowed(use(g, "problem-tool"))


def test_the_limit_must_be_reached_again_after_a_refusal(make):
    """ToolRepetitionDetector.spec.ts: repetition after limit 'should require reaching the limit again after reset'."""
    g = guard(make, 2)
    assert refused([use(g, "repeat-tool") for _ in range(3)][-1])
    ds = [use(g, "repeat-tool") for _ in range(3)]
    assert [allowed(d) for d in ds] == [True, True, False]


# ---------------------------------------------------------------- tool name interpolation


def test_message_names_the_tool(make):
    """ToolRepetitionDetector.spec.ts: tool name interpolation 'should include tool name in the error message'."""
    g = guard(make, 2)
    assert refused([use(g, "special-tool-name") for _ in range(3)][-1], "special-tool-name")


# ---------------------------------------------------------------- edge cases


def test_empty_tool_call(make):
    """ToolRepetitionDetector.spec.ts: edge cases 'should handle empty tool call'."""
    g = guard(make, 2)
    assert refused([use(g, "empty-tool") for _ in range(3)][-1])


def test_same_params_in_another_order_are_identical(make):
    """ToolRepetitionDetector.spec.ts: edge cases 'should treat tools with same parameters in different order as identical'."""
    g = guard(make, 2)
    use(g, "same-tool", {"a": "1", "b": "2", "c": "3"})
    use(g, "same-tool", {"c": "3", "a": "1", "b": "2"})
    assert refused(use(g, "same-tool", {"b": "2", "c": "3", "a": "1"}))


# ---------------------------------------------------------------- explicit Nth call blocking


@pytest.mark.parametrize("limit", [1, 2, 3, 5], ids=["limit-1", "limit-2", "limit-3", "limit-5"])
def test_the_call_after_the_limit_is_refused(make, limit):
    """ToolRepetitionDetector.spec.ts: explicit Nth call blocking 'should allow the 1st call but block on the
    2nd call for limit 1', 'should allow first 2 calls but block on the 3rd call for limit 2', 'should allow
    first 3 calls but block on the 4th call for limit 3 (default)', 'should handle different limits correctly'
    (four cases)."""
    g = guard(make, limit)
    ds = [use(g, "tool-name") for _ in range(limit + 1)]
    assert all(d is ALLOW for d in ds[:-1]) and refused(ds[-1])


def test_limit_0_never_refuses(make):
    """ToolRepetitionDetector.spec.ts: explicit Nth call blocking 'should never block when limit is 0 (unlimited)'."""
    g = guard(make, 0)
    assert [use(g, "tool-name") for _ in range(10)] == [ALLOW] * 10


def test_counter_resets_after_a_refusal(make):
    """ToolRepetitionDetector.spec.ts: explicit Nth call blocking 'should reset counter after blocking and allow new attempts'."""
    g = guard(make, 2)
    ds = [use(g, "tool-name") for _ in range(4)]
    assert [allowed(d) for d in ds] == [True, True, False, True]


def test_negative_limit_is_rejected():
    """ToolRepetitionDetector.spec.ts: explicit Nth call blocking 'should handle negative limits as 0 (unlimited)'.

    Deliberate difference (docs/peers.md): Roo reads a negative limit as unlimited; a loopcore
    threshold that is not a positive int is a PolicyError naming the field, and None is unlimited.
    """
    from loopcore.policy import PolicyError

    with pytest.raises(PolicyError, match="repeat_block"):
        Policy.roo().replace(repeat_block=-1)


# ---------------------------------------------------------------- browser scroll action exclusion

SCROLL_DOWN = ("browser_action", {"action": "scroll_down"})
SCROLL_UP = ("browser_action", {"action": "scroll_up"})


@pytest.mark.parametrize("scroll", [SCROLL_DOWN, SCROLL_UP], ids=["scroll_down", "scroll_up"])
def test_scroll_actions_are_not_repetitions(make, scroll):
    """ToolRepetitionDetector.spec.ts (at d4a16f469c): browser scroll action exclusion 'should not count
    browser scroll_down actions as repetitions' and 'should not count browser scroll_up actions as
    repetitions' (two cases).

    Deliberate difference (SCROLL_NOTE): on Policy.roo() the 3rd identical scroll is refused at
    limit 2, as Roo refuses it today; on Policy.default() scrolls that bring new content are never
    refused, and only identical scrolls with identical pages are."""
    g = guard(make, 2)
    ds = [use(g, *scroll) for _ in range(3)]
    assert ds[:2] == [ALLOW, ALLOW] and refused(ds[2], "browser_action")
    d = make(Policy.default())
    pages = [call(d, "s", *scroll, f"page part {i}") for i in range(10)]
    assert not any(x.blocked for x in pages)


def test_alternating_scrolls_are_not_repetitions(make):
    """ToolRepetitionDetector.spec.ts: browser scroll action exclusion 'should not count alternating scroll_down
    and scroll_up as repetitions'."""
    g = guard(make, 2)
    for _ in range(5):
        assert use(g, *SCROLL_DOWN) is ALLOW
        assert use(g, *SCROLL_UP) is ALLOW


def test_other_browser_actions_are_still_counted(make):
    """ToolRepetitionDetector.spec.ts: browser scroll action exclusion 'should still apply repetition detection
    to other browser_action types'."""
    g = guard(make, 2)
    click = ("browser_action", {"action": "click", "coordinate": "[100, 200]"})
    assert refused([use(g, *click) for _ in range(3)][-1])


def test_non_browser_tools_are_still_counted(make):
    """ToolRepetitionDetector.spec.ts: browser scroll action exclusion 'should still apply repetition detection
    to non-browser tools'."""
    g = guard(make, 2)
    assert refused([use(g, "read_file", {"path": "test.txt"}) for _ in range(3)][-1])


def test_interspersed_scrolls_do_not_break_the_count(make):
    """ToolRepetitionDetector.spec.ts (at d4a16f469c): browser scroll action exclusion 'should not interfere
    with repetition detection of other tools when scroll actions are interspersed'.

    Deliberate difference (SCROLL_NOTE): a scroll is a call like any other, so it ends the run of
    identical ``ls`` calls (as in Roo today) and two identical scrolls in a row count as two."""
    g = guard(make, 2)
    ls = ("execute_command", {"command": "ls"})
    assert use(g, *ls) is ALLOW
    assert [use(g, *SCROLL_DOWN), use(g, *SCROLL_DOWN)] == [ALLOW, ALLOW]
    assert use(g, *ls) is ALLOW
    assert use(g, *SCROLL_DOWN) is ALLOW
    assert use(g, *ls) is ALLOW  # the scroll between broke the run: count 1 again
    assert [use(g, *ls), use(g, *ls)][-1].blocked  # the 3rd ls in a row at limit 2


def test_browser_action_without_an_action_is_counted(make):
    """ToolRepetitionDetector.spec.ts: browser scroll action exclusion 'should handle browser_action with missing
    or invalid action parameter gracefully'."""
    g = guard(make, 2)
    assert refused([use(g, "browser_action", {}) for _ in range(3)][-1])


# ---------------------------------------------------------------- native protocol with nativeArgs


def test_native_args_with_different_files_differ(make):
    """ToolRepetitionDetector.spec.ts: native protocol with nativeArgs 'should differentiate read_file calls with
    different files in nativeArgs'."""
    g = guard(make, 2)
    f1, f2 = {"files": [{"path": "file1.ts"}]}, {"files": [{"path": "file2.ts"}]}
    assert [use(g, "read_file", a) for a in (f1, f2, f1)] == [ALLOW] * 3


def test_native_args_with_the_same_files_repeat(make):
    """ToolRepetitionDetector.spec.ts: native protocol with nativeArgs 'should detect repetition when same files
    are read multiple times with nativeArgs'."""
    g = guard(make, 2)
    args = {"files": [{"path": "same-file.ts"}]}
    assert refused([use(g, "read_file", args) for _ in range(3)][-1])


def test_native_args_file_order_matters(make):
    """ToolRepetitionDetector.spec.ts: native protocol with nativeArgs 'should differentiate read_file calls with
    multiple files in different orders' (list order is part of the arguments)."""
    g = guard(make, 1)
    assert use(g, "read_file", {"files": [{"path": "a.ts"}, {"path": "b.ts"}]}) is ALLOW
    assert use(g, "read_file", {"files": [{"path": "b.ts"}, {"path": "a.ts"}]}) is ALLOW


def test_native_args_and_params_together(make):
    """ToolRepetitionDetector.spec.ts: native protocol with nativeArgs 'should handle tools with both params and
    nativeArgs' (a different cwd makes a different call)."""
    g = guard(make, 1)
    assert (
        use(
            g,
            "execute_command",
            {"command": "ls", "nativeArgs": {"command": "ls", "cwd": "/home/user"}},
        )
        is ALLOW
    )
    assert (
        use(
            g,
            "execute_command",
            {"command": "ls", "nativeArgs": {"command": "ls", "cwd": "/home/admin"}},
        )
        is ALLOW
    )


def test_params_only(make):
    """ToolRepetitionDetector.spec.ts: native protocol with nativeArgs 'should handle tools with only params (no nativeArgs)'."""
    g = guard(make, 2)
    assert refused([use(g, "read_file", {"path": "test.txt"}) for _ in range(3)][-1])
