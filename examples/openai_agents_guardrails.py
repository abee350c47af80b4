"""OpenAI Agents SDK tools guarded by loopcore: run it with ``python examples/openai_agents_guardrails.py``.

Needs ``pip install 'loopcore[openai-agents]'``. The SDK's own ScriptedModel stands in for an
LLM (no network, no key): it asks for the same function call seven times. With a real model,
drop ``model=`` (and set OPENAI_API_KEY); the guardrails stay as they are.
"""

from __future__ import annotations

import asyncio

from agents import Agent, RunConfig, Runner, function_tool
from agents.items import ToolCallOutputItem
from agents.testing import ScriptedModel, assistant_message, function_call

import loopcore
from loopcore.integrations.openai_agents import LoopGuardrails

guardrails = LoopGuardrails(loopcore.Guard(loopcore.Policy.cline()))


@function_tool(tool_input_guardrails=[guardrails.input], tool_output_guardrails=[guardrails.output])
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


model = ScriptedModel(
    [[function_call("read_file", {"path": "a.py"}, call_id=f"call-{i}")] for i in range(7)]
    + [[assistant_message("I will try something else.")]]
)
agent = Agent(name="reader", model=model, tools=[read_file])
result = asyncio.run(
    Runner.run(
        agent,
        "What is in a.py?",
        run_config=RunConfig(group_id="conversation-1", tracing_disabled=True),
    )
)
for item in result.new_items:
    if isinstance(item, ToolCallOutputItem):
        print(item.output)
print("final:", result.final_output)
