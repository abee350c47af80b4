"""What the guard adds to a tool call through each integration, against the same call without it.

    python benchmarks/bench_integrations.py [--calls 2000] [--rounds 5] [--only mcp,langchain,...]

* ``mcp``: one ``tools/call`` round trip (write the request line, read the response line) to a
  minimal line-echo JSON-RPC server, directly, through the proxy with no guard (the pump
  alone) and through ``loopcore mcp-proxy`` (default policy). The bar: the guard adds <= 0.2 ms
  to a proxied round trip (guarded minus unguarded proxy).
* ``langchain``: one tool call through a LangGraph graph whose only node is a ``ToolNode``
  (the framework's own per-call work), without middleware and with ``LoopGuardMiddleware``'s
  ``wrap_tool_call``. The bar: <= 5% on top of the framework's overhead.
* ``openai-agents``: ``Runner.run`` of one function call and a final answer from the SDK's
  ScriptedModel, without and with the two tool guardrails.
* ``pydantic-ai``: ``agent.run_sync`` of one tool call and a final answer from a FunctionModel,
  without and with the ``LoopGuard`` capability.

Every call has fresh arguments (the guard allows all of them: the common case), rounds
alternate between the variants so drift hits both, and the figure is the median over rounds of
the mean time per call. Each row checks that the guarded and unguarded outputs are identical.
Frameworks that are not installed are skipped with a note.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import statistics
import subprocess
import sys
import textwrap
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _env import environment  # noqa: E402  (benchmarks/_env.py)

import loopcore  # noqa: E402

ECHO_SERVER = textwrap.dedent(r"""
    import sys
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        i = line.index(b'"id":') + 5
        j = line.index(b",", i)
        out.write(b'{"jsonrpc":"2.0","id":' + line[i:j] + b',"result":{"content":[{"type":"text","text":"ok"}],"isError":false}}\n')
        out.flush()
""")


def _rounds(variants: dict, rounds: int) -> dict:
    """name -> median over rounds of the mean seconds per call; variants alternate per round."""
    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(rounds):
        for name, fn in variants.items():
            times[name].append(fn())
    return {k: statistics.median(v) for k, v in times.items()}


# -- MCP proxy ------------------------------------------------------------------------------


def bench_mcp(calls: int, rounds: int) -> list[tuple]:
    env = dict(os.environ)
    env["PYTHONPATH"] = (
        os.path.dirname(os.path.dirname(loopcore.__file__)) + os.pathsep + env.get("PYTHONPATH", "")
    )
    server = [sys.executable, "-c", ECHO_SERVER]
    commands = {
        "direct": server,
        "proxy, no guard": [
            sys.executable,
            "-c",
            "import sys; from loopcore.integrations.mcp_proxy import run; sys.exit(run(sys.argv[1:]))",
            *server,
        ],
        "proxy + guard": [sys.executable, "-m", "loopcore", "mcp-proxy", "--quiet", "--", *server],
    }
    procs = {
        k: subprocess.Popen(c, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        for k, c in commands.items()
    }
    outputs: dict[str, list[bytes]] = {k: [] for k in commands}
    counter = {k: 0 for k in commands}

    def runner(name):
        p = procs[name]

        def go():
            t0 = time.perf_counter()
            for _ in range(calls):
                counter[name] += 1
                n = counter[name]
                p.stdin.write(
                    b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"read_file",'
                    b'"arguments":{"path":"f%d.py"}}}\n' % (n, n)
                )
                p.stdin.flush()
                line = p.stdout.readline()
                if len(outputs[name]) < 50:
                    outputs[name].append(line)
            return (time.perf_counter() - t0) / calls

        return go

    for name in commands:  # warm-up: start-up, imports, first sight of the tool
        runner(name)()
        outputs[name].clear()
        counter[name] = 0
    try:
        med = _rounds({k: runner(k) for k in commands}, rounds)
    finally:
        for p in procs.values():
            p.stdin.close()
            p.wait(10)
    same = outputs["direct"] == outputs["proxy, no guard"] == outputs["proxy + guard"]
    added = med["proxy + guard"] - med["proxy, no guard"]

    # Pipe round trips on a shared machine vary by more than the guard costs, so the proxy's
    # guard work is also timed in process: one request line in and one response line out
    # through the proxy's own line handlers, with the guard minus without it.
    from loopcore.integrations.mcp_proxy import MCPProxy

    class Sink:
        def write(self, data):
            pass

        def flush(self):
            pass

    lines = [
        (
            b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"read_file",'
            b'"arguments":{"path":"g%d.py"}}}\n' % (n, n),
            b'{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"ok"}],"isError":false}}\n'
            % n,
        )
        for n in range(calls * 5)
    ]
    sink = Sink()

    def pump(proxy):
        t0 = time.perf_counter()
        for req, resp in lines:
            proxy._client_line(req, sink)
            proxy._server_line(resp)
        return (time.perf_counter() - t0) / len(lines)

    unchanged = []

    def isolated():
        plain = MCPProxy(["unused"], None, client_out=sink)
        guarded = MCPProxy(["unused"], loopcore.Guard(), client_out=sink)
        out = pump(guarded) - pump(plain)
        unchanged.append(
            guarded.blocked == guarded.warned == 0 and not guarded._open and not plain._open
        )
        return out

    own = statistics.median(isolated() for _ in range(rounds))
    return [
        ("mcp round trip, direct", med["direct"], None, same),
        ("mcp round trip, proxy without guard", med["proxy, no guard"], None, same),
        (
            "mcp round trip, proxy + guard",
            med["proxy + guard"],
            f"end to end {added * 1e3:+.3f} ms (noise-bound)",
            same,
        ),
        (
            "mcp: the guard's own time per round trip",
            own,
            f"{own * 1e3:.4f} ms (bar <= 0.2 ms)",
            all(unchanged),
        ),
    ]


# -- LangChain / LangGraph ------------------------------------------------------------------


def bench_langchain(calls: int, rounds: int) -> list[tuple]:
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.tools import tool
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    from loopcore.integrations.langchain import LoopGuardMiddleware

    @tool
    def read_file(path: str) -> str:
        """Read a file."""
        return f"contents of {path}"

    def graph(**wrap):
        g = StateGraph(MessagesState)
        g.add_node("tools", ToolNode([read_file], **wrap))
        g.add_edge(START, "tools")
        g.add_edge("tools", END)
        return g.compile()

    mw = LoopGuardMiddleware(policy=loopcore.Policy.default(), session="bench", telemetry=False)
    graphs = {
        "plain": graph(),
        "noop": graph(wrap_tool_call=lambda request, handler: handler(request)),
        "guarded": graph(wrap_tool_call=mw.wrap_tool_call),
    }
    outs: dict[str, list] = {k: [] for k in graphs}
    counter = {k: 0 for k in graphs}

    def runner(name):
        g = graphs[name]

        def go():
            t0 = time.perf_counter()
            for _ in range(calls):
                counter[name] += 1
                n = counter[name]
                ai = AIMessage(
                    content="",
                    tool_calls=[{"name": "read_file", "args": {"path": f"f{n}.py"}, "id": f"c{n}"}],
                )
                out = g.invoke({"messages": [ai]})
                if len(outs[name]) < 20:
                    outs[name].append(out["messages"][-1].content)
            return (time.perf_counter() - t0) / calls

        return go

    for name in graphs:
        runner(name)()
    med = _rounds({k: runner(k) for k in graphs}, rounds)
    same = outs["plain"] == outs["guarded"] == outs["noop"]

    # The end-to-end difference is below the run-to-run noise of a graph invocation on a shared
    # machine, so the guard's own share is also timed in isolation: the middleware around a
    # handler that returns at once, minus that handler called directly, per call.
    reply = ToolMessage(content="contents", tool_call_id="c")

    class Request:
        runtime = None

        def __init__(self, n):
            self.tool_call = {"name": "read_file", "args": {"path": f"g{n}.py"}, "id": f"g{n}"}

    requests = [Request(n) for n in range(calls * 20)]

    def handler(request):
        return reply

    allowed = []

    def isolated():
        t0 = time.perf_counter()
        [handler(r) for r in requests]
        direct = time.perf_counter() - t0
        t0 = time.perf_counter()
        got = [mw.wrap_tool_call(r, handler) for r in requests]
        spent = time.perf_counter() - t0
        allowed.append(all(x is reply for x in got))
        return (spent - direct) / len(requests)

    added = statistics.median(isolated() for _ in range(rounds))
    pct = added / med["plain"] * 100
    return [
        ("langchain ToolNode call, no middleware", med["plain"], None, same),
        ("langchain ToolNode call, pass-through wrapper", med["noop"], None, same),
        (
            "langchain ToolNode call + LoopGuardMiddleware",
            med["guarded"],
            f"end to end {(med['guarded'] - med['plain']) / med['plain'] * 100:+.1f}% (noise-bound)",
            same,
        ),
        (
            "langchain: the middleware's own time per call",
            added,
            f"{pct:.2f}% of the framework's call (bar <= 5%)",
            all(allowed),
        ),
    ]


# -- OpenAI Agents SDK ----------------------------------------------------------------------


def bench_openai_agents(calls: int, rounds: int) -> list[tuple]:
    from agents import Agent, RunConfig, Runner, function_tool
    from agents.testing import ScriptedModel, assistant_message, function_call

    from loopcore.integrations.openai_agents import LoopGuardrails

    g = LoopGuardrails(policy=loopcore.Policy.default(), session="bench", telemetry=False)

    def make(guarded):
        kw = (
            {"tool_input_guardrails": [g.input], "tool_output_guardrails": [g.output]}
            if guarded
            else {}
        )

        @function_tool(**kw)
        def read_file(path: str) -> str:
            """Read a file."""
            return f"contents of {path}"

        return read_file

    tools = {"plain": make(False), "guarded": make(True)}
    conf = RunConfig(tracing_disabled=True)
    counter = {k: 0 for k in tools}
    outs: dict[str, list] = {k: [] for k in tools}

    def runner(name):
        async def many():
            for _ in range(calls):
                counter[name] += 1
                n = counter[name]
                model = ScriptedModel(
                    [
                        [function_call("read_file", {"path": f"f{n}.py"}, call_id=f"c{n}")],
                        [assistant_message("done")],
                    ]
                )
                res = await Runner.run(
                    Agent(name="b", model=model, tools=[tools[name]]), "go", run_config=conf
                )
                if len(outs[name]) < 20:
                    outs[name].append(res.final_output)

        def go():
            t0 = time.perf_counter()
            asyncio.run(many())
            return (time.perf_counter() - t0) / calls

        return go

    for name in tools:
        runner(name)()
    med = _rounds({k: runner(k) for k in tools}, rounds)
    pct = (med["guarded"] - med["plain"]) / med["plain"] * 100
    same = outs["plain"] == outs["guarded"]

    from types import SimpleNamespace

    data = [
        SimpleNamespace(
            context=SimpleNamespace(
                tool_name="read_file",
                tool_arguments='{"path": "g%d.py"}' % n,
                tool_call_id=f"g{n}",
                run_config=None,
            ),
            output="contents",
        )
        for n in range(calls * 50)
    ]
    allowed = []

    def isolated():
        iso = LoopGuardrails(policy=loopcore.Policy.default(), session="iso", telemetry=False)
        t0 = time.perf_counter()
        got = [(iso._check(d), iso._record(d)) for d in data]
        spent = (time.perf_counter() - t0) / len(data)
        allowed.append(all(a.behavior["type"] == b.behavior["type"] == "allow" for a, b in got))
        return spent

    own = statistics.median(isolated() for _ in range(rounds))
    return [
        ("openai-agents run (1 tool call), no guardrails", med["plain"], None, same),
        (
            "openai-agents run (1 tool call) + LoopGuardrails",
            med["guarded"],
            f"end to end {pct:+.1f}% (noise-bound)",
            same,
        ),
        (
            "openai-agents: the guardrails' own time per call",
            own,
            f"{own / med['plain'] * 100:.2f}% of the run",
            all(allowed),
        ),
    ]


# -- pydantic-ai ----------------------------------------------------------------------------


def bench_pydantic_ai(calls: int, rounds: int) -> list[tuple]:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel

    from loopcore.integrations.pydantic_ai import LoopGuard

    counter = {"plain": 0, "guarded": 0}

    def model_for(name):
        def respond(messages, info):
            if any(isinstance(p, ToolReturnPart) for m in messages for p in m.parts):
                return ModelResponse(parts=[TextPart("done")])
            counter[name] += 1
            return ModelResponse(
                parts=[ToolCallPart("read_file", {"path": f"f{counter[name]}.py"})]
            )

        return FunctionModel(respond)

    def make(name, caps):
        agent = Agent(model_for(name), capabilities=caps)

        @agent.tool_plain
        def read_file(path: str) -> str:
            """Read a file."""
            return f"contents of {path}"

        return agent

    from pydantic_ai.capabilities import AbstractCapability

    class PassThrough(AbstractCapability):
        """The same hooks doing nothing: what any tool-hook capability costs the framework."""

        async def before_tool_execute(self, ctx, *, call, tool_def, args):
            return args

        async def after_tool_execute(self, ctx, *, call, tool_def, args, result):
            return result

    counter["noop"] = 0
    agents = {
        "plain": make("plain", []),
        "noop": make("noop", [PassThrough()]),
        "guarded": make(
            "guarded",
            [LoopGuard(policy=loopcore.Policy.default(), session="bench", telemetry=False)],
        ),
    }
    outs: dict[str, list] = {k: [] for k in agents}

    def runner(name):
        def go():
            t0 = time.perf_counter()
            for _ in range(calls):
                res = agents[name].run_sync("go")
                if len(outs[name]) < 20:
                    outs[name].append(res.output)
            return (time.perf_counter() - t0) / calls

        return go

    for name in agents:
        runner(name)()
    med = _rounds({k: runner(k) for k in agents}, rounds)
    pct = (med["guarded"] - med["plain"]) / med["plain"] * 100
    same = outs["plain"] == outs["guarded"] == outs["noop"]

    from types import SimpleNamespace

    ctx = SimpleNamespace(run_id="iso")
    parts = [
        (
            ToolCallPart("read_file", {"path": f"g{n}.py"}, tool_call_id=f"g{n}"),
            {"path": f"g{n}.py"},
        )
        for n in range(calls * 50)
    ]
    allowed = []

    def isolated():
        cap = LoopGuard(policy=loopcore.Policy.default(), telemetry=False)

        async def many():
            out = []
            for call, a in parts:
                a = await cap.before_tool_execute(ctx, call=call, tool_def=None, args=a)
                out.append(
                    await cap.after_tool_execute(
                        ctx, call=call, tool_def=None, args=a, result="contents"
                    )
                )
            return out

        async def floor():  # the same awaits of do-nothing coroutines
            async def noop(x):
                return x

            return [await noop(await noop(a)) for _call, a in parts]

        t0 = time.perf_counter()
        asyncio.run(floor())
        base = time.perf_counter() - t0
        t0 = time.perf_counter()
        got = asyncio.run(many())
        spent = time.perf_counter() - t0 - base
        allowed.append(all(x == "contents" for x in got))
        return spent / len(parts)

    own = statistics.median(isolated() for _ in range(rounds))
    return [
        ("pydantic-ai run (1 tool call), no capability", med["plain"], None, same),
        ("pydantic-ai run (1 tool call), pass-through hooks", med["noop"], None, same),
        (
            "pydantic-ai run (1 tool call) + LoopGuard",
            med["guarded"],
            f"end to end {pct:+.1f}% (noise-bound)",
            same,
        ),
        (
            "pydantic-ai: the capability's own time per call",
            own,
            f"{own / med['plain'] * 100:.2f}% of the run",
            all(allowed),
        ),
    ]


BENCHES = {
    "mcp": (bench_mcp, 1.0),
    "langchain": (bench_langchain, 0.25),
    "openai-agents": (bench_openai_agents, 0.1),
    "pydantic-ai": (bench_pydantic_ai, 0.1),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--calls",
        type=int,
        default=2000,
        help="calls per round for the MCP proxy (the frameworks scale it down)",
    )
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument(
        "--only", default=",".join(BENCHES), help="comma-separated: " + ", ".join(BENCHES)
    )
    args = ap.parse_args()
    logging.getLogger("loopcore").addHandler(logging.NullHandler())
    print(environment("python benchmarks/bench_integrations.py " + " ".join(sys.argv[1:])))
    print(
        f"loopcore {loopcore.__version__}, core: {loopcore.implementation()}, rounds: {args.rounds}\n"
    )
    print(f"{'path':<50} {'per call':>11}  {'correct':>7}  note")
    for name in args.only.split(","):
        fn, scale = BENCHES[name.strip()]
        try:
            rows = fn(
                max(20, int(args.calls * scale)), args.rounds if name == "mcp" else args.rounds * 3
            )
        except ImportError as exc:
            print(f"{name:<50} {'skipped':>11}  {'':>7}  not installed ({exc.name})")
            continue
        for label, sec, note, ok in rows:
            print(f"{label:<50} {sec * 1e6:>8.1f} us  {'yes' if ok else 'NO':>7}  {note or ''}")


if __name__ == "__main__":
    main()
