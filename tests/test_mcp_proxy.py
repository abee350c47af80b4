"""loopcore mcp-proxy: a real MCP server and the SDK's stdio client through it, and raw wire checks.

The proxy runs as a subprocess (``python -m loopcore mcp-proxy ...``), as a harness starts it.
The raw tests put a small line-logging JSON-RPC server behind it (no MCP library) so the bytes
both ways can be compared exactly; the SDK tests need the ``mcp`` extra.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import textwrap
import warnings

import orjson
import pytest
from conftest import package_env

import loopcore
import loopcore.hashing
from loopcore.integrations.mcp_proxy import MCPProxy, block_result

PROXY = [sys.executable, "-m", "loopcore", "mcp-proxy"]
# Hang guard for the subprocess tests (a proxy that never exits fails instead of hanging CI).
LIMIT = 60

RAW_SERVER = textwrap.dedent(r"""
    import os, sys, time, signal
    log = open(sys.argv[1], "ab", buffering=0)
    sys.stderr.write("raw server up\n"); sys.stderr.flush()
    ignore_eof = "--ignore-eof" in sys.argv
    if "--ignore-term" in sys.argv:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    out = sys.stdout.buffer
    while True:
        line = sys.stdin.buffer.readline()
        if not line:
            if ignore_eof:
                while True:
                    time.sleep(1)
            break
        log.write(line)
        text = line.decode("utf-8", "replace")
        if '"method": "exit"' in text or '"method":"exit"' in text:
            sys.exit(int(text.split('"code":')[1].split("}")[0]))
        if '"tools/call"' in text and '"die"' in text:
            os._exit(9)
        if '"tools/call"' in text and '"slow"' in text:
            time.sleep(1.0)  # then answers, too late for a short --call-timeout
        if text.startswith("["):  # a batch: one reply per request, as an array, odd spacing kept
            import json
            replies = [{"jsonrpc": "2.0", "id": m["id"], "result": {"content": [{"type": "text", "text": "b" + str(m["id"])}]}}
                       for m in json.loads(text) if "id" in m and "method" in m]
            if replies:
                out.write((json.dumps(replies) + "\n").encode()); out.flush()
            continue
        if '"id"' in text and '"method"' in text:
            import json
            try:
                msg = json.loads(text)
            except ValueError:
                continue
            if "method" not in msg or "id" not in msg:
                continue
            if msg["method"] == "tools/call":
                arg = json.dumps(msg["params"].get("arguments"), sort_keys=True)
                body = '{"content": [ {"type": "text", "text": "ran ' + arg.replace('"', "'") + '"} ], "isError": false}'
            else:
                body = '{ "echo" : "' + msg["method"] + '" }'
            # odd spacing and key order on purpose: the proxy must not normalise it
            out.write(('{"result": ' + body + ',  "id": ' + json.dumps(msg["id"]) + ', "jsonrpc": "2.0"}\n').encode())
            out.flush()
""")


@pytest.fixture()
def raw_server(tmp_path):
    script = tmp_path / "raw_server.py"
    script.write_text(RAW_SERVER)
    log = tmp_path / "received.bin"
    return [sys.executable, str(script), str(log)], log


def _env():
    env = package_env()
    return env


def _run_proxy(server, lines, *options, timeout=LIMIT):
    proc = subprocess.run(
        [*PROXY, *options, "--", *server],
        input=b"".join(lines),
        capture_output=True,
        env=_env(),
        timeout=timeout,
    )
    return proc


def call(i, args, name="read_file"):
    return (
        orjson.dumps(
            {
                "jsonrpc": "2.0",
                "id": i,
                "method": "tools/call",
                "params": {"name": name, "arguments": args},
            }
        )
        + b"\n"
    )


def responses(stdout: bytes) -> list:
    return [orjson.loads(x) for x in stdout.splitlines() if x.strip()]


# -- raw wire: byte for byte ------------------------------------------------------------------

PASS_THROUGH = [
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}\n',
    b'{ "jsonrpc": "2.0", "method": "notifications/initialized" }\n',
    b'{"id":"p-1","jsonrpc":"2.0","method":"ping"}\n',
    b'{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"cursor":"x"}}\n',
    b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}\n',
    b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"user"}}\n',
    b'{"jsonrpc":"2.0","id":3,"method":"vendor/unknownThing","params":{"\\u00e9":[1,2.50,true,null]}}\n',
    b'[{"jsonrpc":"2.0","id":4,"method":"resources/list"},{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}]\n',
    b'{"jsonrpc":"2.0","id":5,"result":{"roots":[]}}\n',  # the client answering a server request
    b"this is not json at all\n",
    b'{"jsonrpc":"2.0","id":6,"method":"tools/call","params":\n',  # truncated JSON
    b"\xff\xfe binary \x00 garbage\n",
    b"\n",
    b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"a.py"}}}\n',
    b'{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"b.py"}}}\n',
]


def test_every_line_reaches_the_server_byte_for_byte(raw_server):
    server, log = raw_server
    proc = _run_proxy(server, PASS_THROUGH, "--policy", "cline")
    assert proc.returncode == 0, proc.stderr
    assert log.read_bytes() == b"".join(PASS_THROUGH)
    assert b"raw server up" in proc.stderr  # the server's stderr is the proxy's


def test_server_lines_reach_the_client_byte_for_byte(raw_server, tmp_path):
    server, _log = raw_server
    direct = subprocess.run(
        server, input=b"".join(PASS_THROUGH), capture_output=True, timeout=LIMIT
    )
    proxied = _run_proxy(server, PASS_THROUGH)
    assert direct.stdout.count(b"\n") >= 6  # initialize, ping, list, unknown, batch, two calls
    assert proxied.stdout == direct.stdout
    assert b'{"result": { "echo" : "ping" },  "id": "p-1", "jsonrpc": "2.0"}\n' in proxied.stdout


def test_a_blocked_call_is_answered_by_the_proxy_and_never_reaches_the_server(raw_server):
    server, log = raw_server
    lines = [call(i, {"path": "a.py"}) for i in range(1, 8)]
    proc = _run_proxy(server, lines, "--policy", "cline")
    assert proc.returncode == 0
    got = {r["id"]: r for r in responses(proc.stdout)}
    assert sorted(got) == list(range(1, 8))
    for i in (5, 6, 7):  # cline: warn at the 3rd identical call, block at the 5th
        res = got[i]["result"]
        assert res["isError"] is True
        assert res["content"] == [{"type": "text", "text": res["content"][0]["text"]}]
        assert res["content"][0]["text"].startswith("BLOCKED")
        assert "resultType" not in res
    received = log.read_bytes().splitlines(keepends=True)
    assert received == lines[:4]  # the blocked calls never reached the server
    assert b"block consecutive_repeat on read_file" in proc.stderr


def test_a_warning_is_appended_to_the_servers_result_as_a_text_block(raw_server):
    server, _ = raw_server
    proc = _run_proxy(server, [call(i, {"path": "a.py"}) for i in range(1, 5)], "--policy", "cline")
    got = {r["id"]: r["result"] for r in responses(proc.stdout)}
    assert got[1]["content"] == [{"type": "text", "text": "ran {'path': 'a.py'}"}]
    assert len(got[3]["content"]) == 2
    assert got[3]["content"][0] == got[1]["content"][0]
    assert got[3]["content"][1]["type"] == "text"
    assert (
        got[3]["content"][1]["text"].startswith("WARNING") and "3rd" in got[3]["content"][1]["text"]
    )
    assert got[3]["isError"] is False
    assert b"warn consecutive_repeat" in proc.stderr


def test_a_call_with_a_lone_surrogate_is_still_checked_and_its_answer_still_counted(raw_server):
    """A model's half character (a lone surrogate escape in the arguments, which orjson
    refuses) does not hide a loop from the guard: the calls are checked and blocked as any
    other, those let through reach the server byte for byte, and the server's answers (which
    echo the half character) are read as outcomes."""
    server, log = raw_server
    lines = [
        b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"read_file",'
        b'"arguments":{"path":"notes \\ud83d.md"}}}\n' % i
        for i in range(1, 8)
    ]
    proc = _run_proxy(server, lines, "--policy", "cline")
    assert proc.returncode == 0, proc.stderr
    assert log.read_bytes() == b"".join(lines[:4])  # the blocked calls never reached the server
    first = next(x for x in proc.stdout.splitlines() if b'"id": 1,' in x)
    assert b"\\ud83d" in first  # an answer the proxy leaves alone is passed on as it came
    got = {r["id"]: r["result"] for r in responses(proc.stdout.replace(b"\\ud83d", b"?"))}
    assert sorted(got) == list(range(1, 8))
    assert got[3]["content"][-1]["text"].startswith("WARNING")
    assert all(got[i]["content"][0]["text"].startswith("BLOCKED") for i in (5, 6, 7))


def test_quiet_says_nothing_of_its_own(raw_server):
    server, _ = raw_server
    proc = _run_proxy(
        server, [call(i, {"path": "a.py"}) for i in range(1, 7)], "--policy", "cline", "--quiet"
    )
    assert b"loopcore" not in proc.stderr


def test_outcomes_count_changing_results_are_progress(raw_server):
    server, log = raw_server
    # Different args every time: never a loop, every call reaches the server.
    lines = [call(i, {"path": f"f{i}.py"}) for i in range(1, 12)]
    proc = _run_proxy(server, lines, "--policy", "cline")
    assert all(not r["result"].get("isError") for r in responses(proc.stdout))
    assert log.read_bytes() == b"".join(lines)


def test_modern_envelope_blocks_carry_result_type(raw_server):
    server, _ = raw_server
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
    lines = [
        orjson.dumps(
            {
                "jsonrpc": "2.0",
                "id": i,
                "method": "tools/call",
                "params": {"name": "read_file", "arguments": {"path": "a.py"}, "_meta": meta},
            }
        )
        + b"\n"
        for i in range(1, 6)
    ]
    got = {
        r["id"]: r["result"]
        for r in responses(_run_proxy(server, lines, "--policy", "cline").stdout)
    }
    assert got[5] == {**block_result(got[5]["content"][0]["text"]), "resultType": "complete"}


def test_a_batch_with_a_blocked_call_forwards_the_rest(raw_server):
    server, log = raw_server
    first = [call(i, {"path": "a.py"}) for i in range(1, 5)]
    batch = (
        orjson.dumps(
            [
                {
                    "jsonrpc": "2.0",
                    "id": 10,
                    "method": "tools/call",
                    "params": {"name": "read_file", "arguments": {"path": "a.py"}},
                },
                {"jsonrpc": "2.0", "id": 11, "method": "tools/list"},
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/progress",
                    "params": {"progressToken": 1, "progress": 2},
                },
            ]
        )
        + b"\n"
    )
    proc = _run_proxy(server, [*first, batch], "--policy", "cline")
    arrays = [orjson.loads(x) for x in proc.stdout.splitlines() if x.startswith(b"[")]
    blocked = [r for a in arrays for r in a if r["id"] == 10]
    assert len(blocked) == 1 and blocked[0]["result"]["isError"] is True
    forwarded = orjson.loads(log.read_bytes().splitlines()[-1])
    assert [m.get("id") for m in forwarded] == [11, None]
    assert any(r["id"] == 11 for a in arrays for r in a)


# -- process lifecycle ------------------------------------------------------------------------


def test_the_servers_exit_code_and_stderr_propagate(raw_server):
    server, _ = raw_server
    exit_line = b'{"jsonrpc":"2.0","method":"exit","params":{"code":7}}\n'
    proc = _run_proxy(server, [exit_line])
    assert proc.returncode == 7
    assert b"raw server up" in proc.stderr


def test_a_crash_mid_call_answers_the_open_requests_and_exits_with_the_servers_code(raw_server):
    server, _ = raw_server
    lines = [
        call(1, {"path": "a.py"}),
        b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}\n',
        call(3, {}, name="die"),
    ]
    proc = subprocess.Popen(
        [*PROXY, "--", *server],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
    )
    proc.stdin.write(b"".join(lines))
    proc.stdin.flush()  # stdin stays open: the client is still there when the server dies
    out, _err = proc.communicate(timeout=LIMIT)
    assert proc.returncode == 9
    got = {r["id"]: r for r in responses(out)}
    assert "result" in got[1] and "result" in got[2]
    assert got[3]["error"]["code"] == -32000
    assert "exited (code 9)" in got[3]["error"]["message"]


def test_signals_sent_to_the_proxy_reach_the_server(raw_server):
    server, _ = raw_server
    proc = subprocess.Popen(
        [*PROXY, "--", *server, "--ignore-eof"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
    )
    proc.stdin.write(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
    proc.stdin.flush()
    assert b'"echo" : "ping"' in proc.stdout.readline()  # the server is up and answering
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=LIMIT)
    assert proc.returncode == 128 + signal.SIGTERM


def test_a_hung_server_cannot_keep_the_proxy_alive_after_the_client_leaves(raw_server):
    server, _ = raw_server
    # It ignores both stdin EOF and SIGTERM: only the SIGKILL after the grace ends it.
    proc = _run_proxy(
        [*server, "--ignore-eof", "--ignore-term"],
        [b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'],
        "--grace",
        "0.2",
    )
    assert proc.returncode == 128 + signal.SIGKILL
    assert b'"echo" : "ping"' in proc.stdout


def test_a_missing_server_command_is_a_usage_error():
    proc = subprocess.run([*PROXY], capture_output=True, env=_env(), timeout=LIMIT)
    assert proc.returncode == 2 and b"no MCP server command" in proc.stderr
    proc = subprocess.run(
        [*PROXY, "--", "/nonexistent/server-binary"], capture_output=True, env=_env(), timeout=LIMIT
    )
    assert proc.returncode == 2 and b"cannot start the MCP server" in proc.stderr
    proc = subprocess.run(
        [*PROXY, "--policy", "nope", "--", "true"], capture_output=True, env=_env(), timeout=LIMIT
    )
    assert proc.returncode == 2 and b"bad --policy" in proc.stderr


def test_state_carries_counts_over_a_restart_of_the_proxy(raw_server, tmp_path):
    server, _ = raw_server
    state = tmp_path / "guard.state"
    opts = ("--policy", "cline", "--state", str(state), "--session", "conv-1")
    first = _run_proxy(server, [call(i, {"path": "a.py"}) for i in range(1, 4)], *opts)
    assert first.returncode == 0 and state.stat().st_size > 0
    second = _run_proxy(server, [call(i, {"path": "a.py"}) for i in range(4, 6)], *opts)
    got = {r["id"]: r["result"] for r in responses(second.stdout)}
    assert got[5]["isError"] is True  # the 5th identical call overall, across two proxies
    fresh = _run_proxy(
        server, [call(i, {"path": "a.py"}) for i in range(4, 6)], "--policy", "cline"
    )
    assert not any(r["result"].get("isError") for r in responses(fresh.stdout))


def test_a_policy_file_is_read(raw_server, tmp_path):
    server, _ = raw_server
    pol = tmp_path / "policy.json"
    pol.write_bytes(orjson.dumps(loopcore.Policy.opencode().to_dict()))
    got = {
        r["id"]: r["result"]
        for r in responses(
            _run_proxy(
                server, [call(i, {"p": 1}) for i in range(1, 4)], "--policy", str(pol)
            ).stdout
        )
    }
    assert got[3]["isError"] is True  # opencode blocks the 3rd identical call


def test_mcpproxy_needs_a_command():
    with pytest.raises(ValueError, match="no MCP server command"):
        MCPProxy([])


# -- the real SDK ---------------------------------------------------------------------------

SDK_SERVER = textwrap.dedent('''
    import os, sys
    from mcp.server.mcpserver import Context, MCPServer

    app = MCPServer("loopcore-test")
    runs = {"read_file": 0}

    @app.tool()
    def read_file(path: str) -> str:
        """Read a file (a fixed text)."""
        runs["read_file"] += 1
        return f"contents of {path}"

    @app.tool()
    def ran() -> int:
        """How many times read_file really ran in this server."""
        return runs["read_file"]

    @app.tool()
    async def slow(steps: int, ctx: Context) -> str:
        """Report progress, then finish."""
        for i in range(steps):
            await ctx.report_progress(i + 1, steps)
        return "done"

    @app.tool()
    def crash() -> str:
        """Exit the server in the middle of the call."""
        sys.stderr.write("sdk server crashing\\n")
        sys.stderr.flush()
        os._exit(3)

    app.run()
''')


@pytest.fixture()
def sdk(tmp_path):
    pytest.importorskip(
        "mcp.server.mcpserver", reason="the mcp extra is not installed: pip install 'loopcore[mcp]'"
    )
    from mcp import StdioServerParameters

    script = tmp_path / "sdk_server.py"
    script.write_text(SDK_SERVER)

    def params(*options, direct=False):
        args = (
            [str(script)]
            if direct
            else ["-m", "loopcore", "mcp-proxy", *options, "--", sys.executable, str(script)]
        )
        return StdioServerParameters(command=sys.executable, args=args, env=_env())

    return params


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_sdk_client_lists_and_calls_tools_as_if_directly(sdk, mode):
    from mcp import Client

    params = sdk

    async def session(p):
        async with Client(p, mode=mode, read_timeout_seconds=30) as c:
            tools = sorted((t.name, t.description) for t in (await c.list_tools()).tools)
            r = await c.call_tool("read_file", {"path": "x.py"})
            progress = []

            async def on_progress(p, total, message):
                progress.append((p, total))

            slow = await c.call_tool("slow", {"steps": 3}, progress_callback=on_progress)
            return tools, r.model_dump(exclude={"meta"}), slow.content[0].text, progress

    direct = asyncio.run(session(params(direct=True)))
    proxied = asyncio.run(session(params("--policy", "cline")))
    assert proxied == direct
    assert proxied[3] == [(1, 3), (2, 3), (3, 3)]  # progress notifications passed through


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_sdk_loop_is_blocked_by_the_proxy_and_never_reaches_the_server(sdk, mode):
    from mcp import Client, MCPDeprecationWarning

    params = sdk

    async def session():
        async with Client(params("--policy", "cline"), mode=mode, read_timeout_seconds=30) as c:
            results = [await c.call_tool("read_file", {"path": "a.py"}) for _ in range(7)]
            ran = await c.call_tool("ran", {})
            if mode == "legacy":  # pings pass through (the 2026 envelope dropped ping)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", MCPDeprecationWarning)
                    await c.send_ping()
            return results, ran

    results, ran = asyncio.run(session())
    assert [r.is_error for r in results] == [False] * 4 + [True] * 3
    assert [len(r.content) for r in results[:4]] == [
        1,
        1,
        2,
        1,
    ]  # warned once, at the 3rd (cline's soft limit)
    assert results[2].content[1].text.startswith("WARNING")
    assert results[4].content[0].text.startswith("BLOCKED")
    assert ran.structured_content == {"result": 4}  # the server ran read_file 4 times, not 7


def test_sdk_server_crash_fails_the_call_instead_of_hanging(sdk):
    from mcp import Client, MCPError

    params = sdk

    async def session():
        async with Client(params(), mode="legacy", read_timeout_seconds=30) as c:
            assert (await c.call_tool("read_file", {"path": "a.py"})).is_error is False
            await c.call_tool("crash", {})

    with pytest.raises(BaseException) as info:  # anyio wraps it in an ExceptionGroup
        asyncio.run(session())
    group = BaseExceptionGroup  # noqa: F821 (a builtin since 3.11, which the mcp SDK needs)
    errors = list(info.value.exceptions) if isinstance(info.value, group) else [info.value]
    flat = []
    while errors:
        e = errors.pop()
        if isinstance(e, group):
            errors.extend(e.exceptions)
        else:
            flat.append(e)
    assert any(isinstance(e, MCPError) and "exited (code 3)" in str(e) for e in flat), flat


def test_a_guard_that_fails_never_breaks_the_connection(raw_server):
    server, log = raw_server
    depth = loopcore.hashing.MAX_DEPTH + 5  # deeper than the guard hashes: check() raises
    deep = b'{"x":' * depth + b"{}" + b"}" * depth
    lines = [
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":'
        + deep
        + b"}}\n",
        call(2, {"path": "a.py"}),
    ]
    proc = _run_proxy(server, lines)
    assert proc.returncode == 0
    assert sorted(r["id"] for r in responses(proc.stdout)) == [1, 2]
    assert log.read_bytes() == b"".join(lines)  # forwarded unchecked, byte for byte
    assert b"could not check 'read_file'" in proc.stderr


def test_a_call_the_server_sits_on_is_answered_at_the_timeout_and_its_late_answer_dropped(
    raw_server,
):
    server, log = raw_server
    proc = subprocess.Popen(
        [*PROXY, "--call-timeout", "0.2", "--grace", "0.5", "--", *server],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
    )
    proc.stdin.write(
        call(1, {"path": "a.py"}, name="slow") + b'{"jsonrpc":"2.0","id":2,"method":"ping"}\n'
    )
    proc.stdin.flush()
    first = orjson.loads(proc.stdout.readline())  # the proxy's answer, before the server's
    second = orjson.loads(proc.stdout.readline())  # the ping, once the server is free again
    rest, err = proc.communicate(timeout=LIMIT)  # closes the proxy's stdin: the client leaves
    assert first["id"] == 1 and first["result"]["isError"] is True
    assert "did not answer" in first["result"]["content"][0]["text"]
    assert second["id"] == 2 and "result" in second
    assert rest == b""  # the server's late answer to request 1 never reached the client
    received = log.read_bytes()
    assert b'"method":"notifications/cancelled","params":{"requestId":1' in received
    assert b"timed out after 0.2 s" in err


def test_a_state_file_that_cannot_be_read_starts_fresh(raw_server, tmp_path):
    server, _ = raw_server
    state = tmp_path / "guard.state"
    state.write_bytes(b"this is not a guard snapshot")
    proc = _run_proxy(server, [call(1, {"path": "a.py"})], "--state", str(state))
    assert proc.returncode == 0
    assert [r["id"] for r in responses(proc.stdout)] == [1]
    assert b"starting with fresh counts" in proc.stderr
    assert state.read_bytes().startswith(b"LOOPCORE-GUARD")  # saved over at exit
