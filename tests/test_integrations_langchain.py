"""LangChain v1 agent middleware and the LangGraph ToolNode wrapper, with the real packages.

A fake chat model (langchain_core's GenericFakeChatModel, made tool-capable) issues the same
tool call again and again; the guard must warn, then block without running the tool.
"""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip(
    "langchain.agents.middleware",
    reason="the langchain extra is not installed: pip install 'loopcore[langchain]'",
)
pytest.importorskip(
    "langgraph.prebuilt",
    reason="the langchain extra is not installed: pip install 'loopcore[langchain]'",
)

from langchain.agents import create_agent  # noqa: E402
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import AIMessage, ToolMessage  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.graph import END, START, MessagesState, StateGraph  # noqa: E402
from langgraph.prebuilt import ToolNode  # noqa: E402

import loopcore  # noqa: E402
from loopcore.integrations.langchain import LoopGuardMiddleware  # noqa: E402


class LoopingModel(GenericFakeChatModel):
    """The scripted replies, whatever tools are bound."""

    def bind_tools(self, tools, **kwargs):
        return self


def looping(n, name="read_file", args=None):
    args = {"path": "a.py"} if args is None else args
    replies = [
        AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"call-{i}"}])
        for i in range(n)
    ]
    return LoopingModel(messages=iter([*replies, AIMessage(content="done")]))


@pytest.fixture()
def reader():
    ran = []

    @tool
    def read_file(path: str) -> str:
        """Read a file."""
        ran.append(path)
        return f"contents of {path}"

    return read_file, ran


def graph_of(node):
    """A LangGraph graph that is just the tool node (the runtime ToolNode needs)."""
    g = StateGraph(MessagesState)
    g.add_node("tools", node)
    g.add_edge(START, "tools")
    g.add_edge("tools", END)
    return g.compile()


def tool_messages(out):
    return [m for m in out["messages"] if isinstance(m, ToolMessage)]


def assert_loop_guarded(msgs, ran):
    assert len(msgs) == 7
    assert ran == ["a.py"] * 4  # cline: warned at the 3rd and 4th call, blocked from the 5th on
    assert [m.status for m in msgs] == ["success"] * 4 + ["error"] * 3
    assert msgs[0].content == "contents of a.py"
    assert msgs[2].content.startswith("contents of a.py\n\nWARNING")
    for m in msgs[4:]:
        assert m.content.startswith("BLOCKED")
        assert m.name == "read_file"
    assert [m.tool_call_id for m in msgs] == [f"call-{i}" for i in range(7)]


def test_create_agent_middleware_warns_then_blocks_a_looping_call(reader):
    read_file, ran = reader
    mw = LoopGuardMiddleware(loopcore.Guard(loopcore.Policy.cline()))
    agent = create_agent(looping(7), [read_file], middleware=[mw], checkpointer=InMemorySaver())
    out = agent.invoke(
        {"messages": [{"role": "user", "content": "go"}]}, {"configurable": {"thread_id": "t-1"}}
    )
    assert_loop_guarded(tool_messages(out), ran)
    assert out["messages"][-1].content == "done"
    assert list(mw.guard.sessions()) == ["t-1"]  # the thread id is the session


def test_async_agent_goes_through_awrap_tool_call(reader):
    read_file, ran = reader
    mw = LoopGuardMiddleware(policy=loopcore.Policy.cline())
    agent = create_agent(looping(7), [read_file], middleware=[mw], checkpointer=InMemorySaver())
    out = asyncio.run(
        agent.ainvoke(
            {"messages": [{"role": "user", "content": "go"}]},
            {"configurable": {"thread_id": "t-async"}},
        )
    )
    assert_loop_guarded(tool_messages(out), ran)
    assert list(mw.guard.sessions()) == ["t-async"]


def test_threads_are_separate_sessions(reader):
    read_file, ran = reader
    guard = loopcore.Guard(loopcore.Policy.cline())
    for thread in ("a", "b"):
        agent = create_agent(
            looping(3),
            [read_file],
            middleware=[LoopGuardMiddleware(guard)],
            checkpointer=InMemorySaver(),
        )
        msgs = tool_messages(
            agent.invoke(
                {"messages": [{"role": "user", "content": "go"}]},
                {"configurable": {"thread_id": thread}},
            )
        )
        assert [m.status for m in msgs] == ["success"] * 3
    assert len(ran) == 6 and sorted(guard.sessions()) == ["a", "b"]


def test_without_a_thread_id_the_given_session_is_used(reader):
    read_file, ran = reader
    seen = []

    def session(request):
        seen.append(request.tool_call["id"])
        return "mine"

    mw = LoopGuardMiddleware(policy=loopcore.Policy.cline(), session=session)
    out = create_agent(looping(5), [read_file], middleware=[mw]).invoke(
        {"messages": [{"role": "user", "content": "go"}]}
    )
    assert [m.status for m in tool_messages(out)] == ["success"] * 4 + ["error"]
    assert list(mw.guard.sessions()) == ["mine"] and len(seen) == 5


def test_failures_are_recorded_as_errors():
    events = []
    calls = []

    @tool
    def deploy(target: str) -> str:
        """Deploy."""
        calls.append(target)
        raise RuntimeError("permission denied")

    guard = loopcore.Guard(loopcore.Policy.openhands(), on_event=events.append)
    graph = graph_of(
        ToolNode(
            [deploy],
            wrap_tool_call=LoopGuardMiddleware(guard).wrap_tool_call,
            handle_tool_errors=True,
        )
    )
    msgs = []
    for i in range(5):
        ai = AIMessage(
            content="", tool_calls=[{"name": "deploy", "args": {"target": "prod"}, "id": f"d{i}"}]
        )
        msgs += tool_messages(graph.invoke({"messages": [ai]}))
    assert [m.status for m in msgs] == ["error"] * 5
    assert len(calls) == 3  # openhands: three identical failures, then the streak is refused
    assert msgs[3].content.startswith("BLOCKED")
    assert [e["detector"] for e in events] == ["error_streak"]


def test_langgraph_tool_node_takes_the_wrappers(reader):
    read_file, ran = reader
    mw = LoopGuardMiddleware(policy=loopcore.Policy.opencode())
    graph = graph_of(
        ToolNode([read_file], wrap_tool_call=mw.wrap_tool_call, awrap_tool_call=mw.awrap_tool_call)
    )
    call = {"name": "read_file", "args": {"path": "x.py"}}
    conf = {"configurable": {"thread_id": "g-1"}}
    out = []
    for i in range(2):
        out += tool_messages(
            graph.invoke(
                {"messages": [AIMessage(content="", tool_calls=[{**call, "id": f"s{i}"}])]}, conf
            )
        )
    out += tool_messages(
        asyncio.run(
            graph.ainvoke(
                {"messages": [AIMessage(content="", tool_calls=[{**call, "id": "s2"}])]}, conf
            )
        )
    )
    assert [m.status for m in out] == ["success", "success", "error"]  # opencode blocks the 3rd
    assert ran == ["x.py", "x.py"]
    assert list(mw.guard.sessions()) == ["g-1"]


def test_a_block_is_not_undone_by_recording_it(reader):
    read_file, ran = reader
    mw = LoopGuardMiddleware(policy=loopcore.Policy.opencode())
    out = create_agent(looping(6), [read_file], middleware=[mw]).invoke(
        {"messages": [{"role": "user", "content": "go"}]}
    )
    assert [m.status for m in tool_messages(out)] == ["success"] * 2 + ["error"] * 4
    assert len(ran) == 2
