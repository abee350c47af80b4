"""OpenAI Agents SDK tool guardrails, with the real SDK and its scripted model (no network)."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip(
    "agents.testing",
    reason="the openai-agents extra is not installed: pip install 'loopcore[openai-agents]'",
)

from agents import Agent, RunConfig, Runner, WebSearchTool, function_tool  # noqa: E402
from agents.items import ToolCallOutputItem  # noqa: E402
from agents.testing import ScriptedModel, assistant_message, function_call  # noqa: E402

import loopcore  # noqa: E402
from loopcore.integrations.openai_agents import LoopGuardrails  # noqa: E402


def script(n, name="read_file", args=None):
    args = {"path": "a.py"} if args is None else args
    return ScriptedModel(
        [[function_call(name, args, call_id=f"c{i}")] for i in range(n)]
        + [[assistant_message("done")]]
    )


@pytest.fixture()
def reader():
    ran = []

    @function_tool
    def read_file(path: str) -> str:
        """Read a file."""
        ran.append(path)
        return f"contents of {path}"

    return read_file, ran


def outputs(result):
    return [it.output for it in result.new_items if isinstance(it, ToolCallOutputItem)]


def run(agent, **kw):
    return asyncio.run(Runner.run(agent, "go", run_config=RunConfig(tracing_disabled=True, **kw)))


def test_input_guardrail_rejects_a_loop_and_output_guardrail_adds_the_warning(reader):
    read_file, ran = reader
    g = LoopGuardrails(loopcore.Guard(loopcore.Policy.cline()))
    g.attach(read_file)
    result = run(Agent(name="looper", model=script(7), tools=[read_file]), group_id="conv-1")
    out = outputs(result)
    assert result.final_output == "done"
    assert ran == ["a.py"] * 4  # warned at the 3rd and 4th, the 5th to 7th never ran
    assert out[:2] == ["contents of a.py"] * 2
    assert out[2].startswith("contents of a.py\n\nWARNING") and "3rd" in out[2]
    assert all(o.startswith("BLOCKED") for o in out[4:])
    assert list(g.guard.sessions()) == ["conv-1"]  # RunConfig.group_id is the session
    rejected = [
        r
        for r in result.tool_input_guardrail_results
        if r.output.behavior["type"] == "reject_content"
    ]
    assert len(rejected) == 3 and rejected[0].output.output_info["detector"] == "consecutive_repeat"


def test_decorator_form_and_a_session_callable():
    ran = []
    g = LoopGuardrails(
        policy=loopcore.Policy.opencode(), session=lambda ctx: f"user-{ctx.tool_name}"
    )

    @function_tool(tool_input_guardrails=[g.input], tool_output_guardrails=[g.output])
    def search(q: str) -> str:
        """Search."""
        ran.append(q)
        return "nothing found"

    out = outputs(run(Agent(name="s", model=script(4, "search", {"q": "x"}), tools=[search])))
    assert len(ran) == 2 and [o.startswith("BLOCKED") for o in out] == [False, False, True, True]
    assert list(g.guard.sessions()) == ["user-search"]


def test_attach_is_idempotent_and_refuses_tools_guardrails_never_see(reader):
    read_file, _ = reader
    g = LoopGuardrails()
    g.attach(read_file)
    g.attach(read_file)
    assert read_file.tool_input_guardrails == [g.input]
    assert read_file.tool_output_guardrails == [g.output]
    with pytest.raises(TypeError, match="function tools only"):
        g.attach(WebSearchTool())


def test_changing_arguments_are_never_blocked(reader):
    read_file, ran = reader
    g = LoopGuardrails(policy=loopcore.Policy.cline())
    g.attach(read_file)
    model = ScriptedModel(
        [[function_call("read_file", {"path": f"f{i}.py"}, call_id=f"c{i}")] for i in range(8)]
        + [[assistant_message("done")]]
    )
    out = outputs(run(Agent(name="r", model=model, tools=[read_file])))
    assert len(ran) == 8 and not any("BLOCKED" in o or "WARNING" in o for o in out)
