"""loopcore mcp-proxy in front of a real MCP server: run it with ``python examples/mcp_proxy_demo.py``.

Needs ``pip install 'loopcore[mcp]'`` (the MCP Python SDK, for this demo's server and client;
the proxy itself needs nothing). The script is both sides: started with ``--server`` it is a
small MCP server with one tool; started plainly it is a client that launches that server
behind ``loopcore mcp-proxy --policy cline`` and calls the same tool again and again, the way a
stuck model does. The proxy warns at the 3rd identical call (appended to the result) and
answers from the 5th on with ``isError: true`` itself: the server never sees those calls.
"""

from __future__ import annotations

import asyncio
import os
import sys


def serve() -> None:
    from mcp.server.mcpserver import MCPServer

    app = MCPServer("demo")

    @app.tool()
    def read_file(path: str) -> str:
        """Read a file (this demo returns a fixed text)."""
        sys.stderr.write(f"server: read_file({path!r}) ran\n")
        return f"contents of {path}"

    app.run()


async def client() -> None:
    from mcp import Client, StdioServerParameters

    server = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "loopcore",
            "mcp-proxy",
            "--policy",
            "cline",
            "--",
            sys.executable,
            __file__,
            "--server",
        ],
        # The SDK starts servers with a minimal environment; keep a checkout's PYTHONPATH.
        env={"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else None,
    )
    async with Client(server, mode="legacy") as c:
        print("tools:", [t.name for t in (await c.list_tools()).tools])
        for i in range(1, 7):
            r = await c.call_tool("read_file", {"path": "setup.py"})
            print(f"call {i}: isError={r.is_error}")
            for block in r.content:
                print("   ", block.text)


if __name__ == "__main__":
    if "--server" in sys.argv:
        serve()
    else:
        asyncio.run(client())
