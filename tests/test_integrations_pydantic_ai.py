"""The pydantic-ai capability, with the real package and its FunctionModel / TestModel."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip(
    "pydantic_ai.capabilities",
    reason="the pydantic-ai extra is not installed: pip install 'loopcore[pydantic-ai]'",
)

from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import FunctionModel  # noqa: E402
from pydantic_ai.models.test import TestModel  # noqa: E402

import loopcore  # noqa: E402
from loopcore.integrations.pydantic_ai import LoopGuard  # noqa: E402


@pytest.fixture(autouse=True)
def event_loop_for_run_sync():
    """run_sync keeps the event loop it finds (or makes and sets one): give it one, close it after."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield
    loop.close()
    asyncio.set_event_loop(None)


def looping(n, name="read_file", args=None):
    args = {"path": "a.py"} if args is None else args
    count = [0]

    def respond(messages, info):
        count[0] += 1
        if count[0] <= n:
            return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"c{count[0]}")])
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(respond)


def agent_with(cap, model, ran, fail=False):
    agent = Agent(model, capabilities=[cap])

    @agent.tool_plain
    def read_file(path: str) -> str:
        """Read a file."""
        ran.append(path)
        if fail:
            raise RuntimeError("disk on fire")
        return f"contents of {path}"

    return agent


def returns(result):
    return [
        p
        for m in result.all_messages()
        for p in m.parts
        if isinstance(p, (ToolReturnPart, RetryPromptPart))
    ]


def test_a_loop_is_warned_then_failed_without_running_the_tool():
    ran = []
    cap = LoopGuard(loopcore.Guard(loopcore.Policy.cline()), session="conv-1")
    result = agent_with(cap, looping(7), ran).run_sync("go")
    parts = returns(result)
    assert result.output == "done"
    assert ran == ["a.py"] * 4
    assert [p.outcome for p in parts] == ["success"] * 4 + ["failed"] * 3
    assert parts[2].content.startswith("contents of a.py\n\nWARNING")
    assert all(p.content.startswith("BLOCKED") for p in parts[4:])
    assert list(cap.guard.sessions()) == ["conv-1"]


def test_skip_puts_the_message_in_place_of_the_result():
    ran = []
    cap = LoopGuard(policy=loopcore.Policy.opencode(), on_block="skip")
    result = agent_with(cap, looping(4), ran).run_sync("go")
    parts = returns(result)
    assert len(ran) == 2
    assert [p.outcome for p in parts] == ["success"] * 4
    assert [p.content.startswith("BLOCKED") for p in parts] == [False, False, True, True]


def test_retry_asks_the_model_again_with_the_message():
    ran = []
    cap = LoopGuard(policy=loopcore.Policy.opencode(), on_block="retry")
    agent = Agent(looping(3), capabilities=[cap], retries=5)

    @agent.tool_plain
    def read_file(path: str) -> str:
        """Read a file."""
        ran.append(path)
        return "x"

    parts = returns(agent.run_sync("go"))
    assert len(ran) == 2
    retried = [
        p
        for p in parts
        if getattr(p, "outcome", None) == "retried" or isinstance(p, RetryPromptPart)
    ]
    assert len(retried) == 1 and "BLOCKED" in str(retried[0].content)


def test_each_run_is_its_own_session_by_default():
    ran = []
    cap = LoopGuard(policy=loopcore.Policy.opencode())
    for _ in range(2):
        assert [p.outcome for p in returns(agent_with(cap, looping(2), ran).run_sync("go"))] == [
            "success"
        ] * 2
    assert len(ran) == 4 and len(list(cap.guard.sessions())) == 2


def test_failures_are_recorded_as_errors():
    ran, events = [], []
    cap = LoopGuard(
        loopcore.Guard(loopcore.Policy.openhands(), on_event=events.append), session="s"
    )
    agent = agent_with(cap, looping(5), ran, fail=True)
    with pytest.raises(RuntimeError, match="disk on fire"):
        agent.run_sync("go")  # an unhandled tool exception ends the run, recorded first
    assert cap.guard.history("s")[0][0] == "read_file"
    for _ in range(2):
        with pytest.raises(RuntimeError):
            agent_with(cap, looping(1), ran, fail=True).run_sync("go")
    parts = returns(agent_with(cap, looping(1), ran, fail=True).run_sync("go"))
    assert len(ran) == 3 and parts[0].content.startswith("BLOCKED")
    assert [e["detector"] for e in events] == ["error_streak"]


def test_test_model_calls_every_tool_once_and_nothing_is_flagged():
    ran = []
    cap = LoopGuard(policy=loopcore.Policy.cline(), session="t")
    result = agent_with(cap, TestModel(), ran).run_sync("go")
    assert len(ran) == 1 and "BLOCKED" not in str(result.output)


def test_bad_on_block():
    with pytest.raises(ValueError, match="on_block"):
        LoopGuard(on_block="explode")
