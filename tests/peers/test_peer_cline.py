"""cline's loop-detection tests, translated case by case, on ``Policy.cline()``.

Sources (repository cline/cline):

* ``src/core/task/__tests__/loop-detection.test.ts`` (describes "toolCallSignature" and
  "Loop Detection"; the detector is ``src/core/task/loop-detection.ts``);
* ``src/core/task/__tests__/doom-loop-detection.test.ts`` (describe "Doom Loop Detection").

cline checks each tool call before it runs (``checkRepeatedToolCall`` in the ToolExecutor): a
``check`` here, then the harness records the outcome. Its soft warning (a ``[WARNING]`` text the
model sees) is a ``warn``, its hard escalation (the mistake limit that stops the task) a ``block``.
The "Doom Loop Detection" case 'should not interfere with existing consecutiveMistakeCount from
errors' tests cline's task-state bookkeeping, which loopcore does not have (docs/peers.md).
``src/core/task/__tests__/InGenerationLoopDetector.test.ts`` times a generation by the clock and
its length; loopcore has no clock-driven detector (docs/peers.md: not expressible).
"""

from __future__ import annotations

import pytest
from peerlib import ALLOW, Policy, call

POLICY = Policy.cline

WARN_ONCE = "Policy.cline() warns at every consecutive repeat from the 3rd on; cline warns at exactly the 3rd"


@pytest.fixture
def g(make):
    return make(POLICY())


def use(g, tool, params, session="s"):
    return call(g, session, tool, params, "ok")


def warned(d, tool=None):
    return (
        d.action == "warn"
        and d.detector == "consecutive_repeat"
        and (tool is None or tool in d.message)
    )


def escalated(d):
    return d.action == "block" and d.detector == "consecutive_repeat"


def count_is_one(g, tool, params):
    """After a reset the count is 1: two more identical calls bring the first warning, at 3."""
    ds = [use(g, tool, params) for _ in range(2)]
    return ds[0] is ALLOW and warned(ds[1]) and ds[1].count == 3


# ---------------------------------------------------------------- loop-detection.test.ts


def test_signature_ignores_key_order(g):
    """loop-detection.test.ts: toolCallSignature 'produces identical output regardless of key order'."""
    assert g.args_hash("read_file", {"b": "2", "a": "1"}) == g.args_hash(
        "read_file", {"a": "1", "b": "2"}
    )


def test_warns_at_3_and_escalates_at_5(g):
    """loop-detection.test.ts: Loop Detection 'should warn at 3 identical calls and escalate at 5' (exactly one
    warning: the 4th call is neither warned nor escalated)."""
    ds = [use(g, "read_file", {"path": "src/main.ts"}) for _ in range(5)]
    assert ds[0] is ALLOW and ds[1] is ALLOW
    assert warned(ds[2]) and ds[3] is ALLOW and escalated(ds[4])


def test_resets_when_tool_or_params_change(g):
    """loop-detection.test.ts: Loop Detection 'should reset when tool or params change'."""
    use(g, "read_file", {"path": "a.ts"})
    use(g, "read_file", {"path": "a.ts"})
    assert use(g, "read_file", {"path": "b.ts"}) is ALLOW  # different params: count 1
    use(g, "read_file", {"path": "b.ts"})
    assert use(g, "list_files", {"path": "b.ts"}) is ALLOW  # different tool: count 1
    assert count_is_one(g, "list_files", {"path": "b.ts"})


def test_different_tools_with_the_same_params_are_not_identical(g):
    """loop-detection.test.ts: Loop Detection 'should NOT count different tools with same params as identical'."""
    for tool in ("read_file", "search_files", "list_files"):
        assert use(g, tool, {"path": "src/main.ts"}) is ALLOW
    assert count_is_one(g, "list_files", {"path": "src/main.ts"})


def test_task_progress_is_not_part_of_the_signature(g):
    """loop-detection.test.ts: Loop Detection 'should strip task_progress from comparison'
    (``Policy.cline().ignored_args``: the checklist changes every turn, the call does not)."""
    ds = [
        use(g, "read_file", {"path": "src/index.ts", "task_progress": f"step {i} of 5"})
        for i in range(5)
    ]
    assert warned(ds[2]) and escalated(ds[4])


# ---------------------------------------------------------------- doom-loop-detection.test.ts


def test_no_warning_before_the_threshold(g):
    """doom-loop-detection.test.ts: 'should not trigger warning before threshold'."""
    assert [use(g, "read_file", {"path": "src/main.ts"}) for _ in range(2)] == [ALLOW, ALLOW]


def test_warning_at_the_soft_threshold(g):
    """doom-loop-detection.test.ts: 'should inject warning at soft threshold (3 identical calls)'."""
    ds = [use(g, "read_file", {"path": "src/main.ts"}) for _ in range(3)]
    assert ds[:2] == [ALLOW, ALLOW]
    assert warned(ds[2], "read_file") and ds[2].message.startswith("WARNING") and not ds[2].blocked


def test_escalation_at_the_hard_threshold(make):
    """doom-loop-detection.test.ts: 'should escalate to consecutiveMistakeCount at hard threshold (5 identical
    calls)' (with exactly one warning, from the 3rd)."""
    events = []
    g = make(POLICY(), on_event=events.append)
    ds = [use(g, "search_files", {"regex": "TODO", "path": "."}) for _ in range(5)]
    assert escalated(ds[4])
    assert [d.action for d in ds].count("warn") == 1


def test_a_different_tool_resets_the_count(g):
    """doom-loop-detection.test.ts: 'should reset counter when different tool is used'."""
    use(g, "read_file", {"path": "src/main.ts"})
    use(g, "read_file", {"path": "src/main.ts"})
    assert use(g, "list_files", {"path": "src/"}) is ALLOW
    assert count_is_one(g, "list_files", {"path": "src/"})


def test_different_params_reset_the_count(g):
    """doom-loop-detection.test.ts: 'should reset counter when same tool is used with different params'."""
    use(g, "read_file", {"path": "src/main.ts"})
    use(g, "read_file", {"path": "src/main.ts"})
    assert use(g, "read_file", {"path": "src/utils.ts"}) is ALLOW
    assert count_is_one(g, "read_file", {"path": "src/utils.ts"})


def test_params_are_compared_by_value(g):
    """doom-loop-detection.test.ts: 'should track params correctly via JSON.stringify'."""
    use(g, "search_files", {"regex": "TODO", "path": "src/"})
    assert use(g, "search_files", {"regex": "FIXME", "path": "src/"}) is ALLOW
    assert count_is_one(g, "search_files", {"regex": "FIXME", "path": "src/"})


def test_empty_params(g):
    """doom-loop-detection.test.ts: 'should handle empty params'."""
    ds = [use(g, "attempt_completion", {}) for _ in range(3)]
    assert warned(ds[2])


def test_counting_resumes_after_a_break(g):
    """doom-loop-detection.test.ts: 'should resume counting after a break'."""
    ds = [use(g, "read_file", {"path": "a.ts"}) for _ in range(2)]
    ds.append(use(g, "list_files", {"path": "."}))
    ds += [use(g, "read_file", {"path": "a.ts"}) for _ in range(3)]
    assert all(d is ALLOW for d in ds[:-1]) and warned(ds[-1]) and ds[-1].count == 3
