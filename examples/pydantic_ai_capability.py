"""A pydantic-ai agent guarded by loopcore: run it with ``python examples/pydantic_ai_capability.py``.

Needs ``pip install 'loopcore[pydantic-ai]'``. A FunctionModel stands in for an LLM (no
network, no key) and asks for the same tool call seven times; with a real model, pass its name
(``Agent("openai:gpt-5-mini", ...)``) and nothing else changes.
"""

from __future__ import annotations

from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import FunctionModel

import loopcore
from loopcore.integrations.pydantic_ai import LoopGuard


def stuck_model(messages, info):
    calls = sum(isinstance(p, ToolReturnPart) for m in messages for p in m.parts)
    if calls < 7:
        return ModelResponse(
            parts=[ToolCallPart("read_file", {"path": "a.py"}, tool_call_id=f"call-{calls}")]
        )
    return ModelResponse(parts=[TextPart("I will try something else.")])


guard = loopcore.Guard(loopcore.Policy.cline())
agent = Agent(FunctionModel(stuck_model), capabilities=[LoopGuard(guard, session="conversation-1")])


@agent.tool_plain
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


result = agent.run_sync("What is in a.py?")
for m in result.all_messages():
    for p in m.parts:
        if isinstance(p, ToolReturnPart):
            print(f"{p.tool_call_id} [{p.outcome}] {p.content}")
print("final:", result.output)
