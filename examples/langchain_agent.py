"""A LangChain v1 agent guarded by loopcore: run it with ``python examples/langchain_agent.py``.

Needs ``pip install 'loopcore[langchain]'``. A scripted chat model stands in for an LLM (no
network, no key) and asks for the same tool call seven times; with a real model, pass its
name instead (``create_agent("openai:gpt-5-mini", ...)``) and nothing else changes.
"""

from __future__ import annotations

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

import loopcore
from loopcore.integrations.langchain import LoopGuardMiddleware


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


class ScriptedModel(GenericFakeChatModel):
    def bind_tools(self, tools, **kwargs):
        return self


calls = [
    AIMessage(
        content="", tool_calls=[{"name": "read_file", "args": {"path": "a.py"}, "id": f"call-{i}"}]
    )
    for i in range(7)
]
model = ScriptedModel(messages=iter([*calls, AIMessage(content="I will try something else.")]))

guard = loopcore.Guard(loopcore.Policy.cline())  # warn at the 3rd identical call, block at the 5th
agent = create_agent(
    model, [read_file], middleware=[LoopGuardMiddleware(guard)], checkpointer=InMemorySaver()
)
out = agent.invoke(
    {"messages": [{"role": "user", "content": "What is in a.py?"}]},
    {"configurable": {"thread_id": "conversation-1"}},
)  # the thread id is the guard session
for m in out["messages"]:
    if isinstance(m, ToolMessage):
        print(f"{m.tool_call_id} [{m.status}] {m.content}")
print("final:", out["messages"][-1].content)
