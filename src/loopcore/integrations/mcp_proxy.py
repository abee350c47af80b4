"""A transparent stdio proxy in front of any MCP server, with the guard on ``tools/call``.

``loopcore mcp-proxy -- SERVER_CMD ARGS...`` starts the server as a child and pumps
newline-delimited JSON-RPC both ways (no MCP library is needed at run time):

* a ``tools/call`` request is checked before it is forwarded; a block is answered by the proxy
  itself as a tool result (``content: [{type: text, text: reason}], isError: true``) and never
  reaches the server; a warning is appended to the server's result as one more text block;
* the server's response is recorded against the request id (``isError`` results and JSON-RPC
  errors as errors), so the guard sees outcomes, not only calls;
* every other line (initialize, discovery, lists, notifications, pings, cancellations,
  progress, batches, unknown methods, lines that are not JSON at all) passes through byte for
  byte, and so does every line the guard has nothing to add to;
* the server's stderr is the proxy's stderr; SIGTERM, SIGINT and SIGHUP sent to the proxy are
  forwarded to the server's process group; the proxy exits with the server's exit code (128+N
  for a server killed by signal N);
* a server that exits or crashes has its unanswered requests answered with a JSON-RPC error
  before the proxy closes its stdout, so no client waits forever; with a call timeout, a
  ``tools/call`` the server sits on is answered and cancelled; when the client closes its
  stdin the server gets its stdin closed, then SIGTERM and SIGKILL after a grace period (the
  MCP stdio shutdown sequence), so a server that hangs cannot keep the proxy alive.

The guard session is the stdio connection: one per proxy process (``--session`` names it, so a
``--state`` file can carry counts over restarts). See docs/integrations/mcp.md.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Hashable, Sequence
from typing import IO, Any

import orjson

from .._json import loads

__all__ = ["MCPProxy", "SERVER_GONE", "block_result", "load_policy", "run", "run_cli"]

#: The JSON-RPC error code of the answers the proxy gives for requests a dead server left open.
SERVER_GONE = -32000

_SAME, _CHANGED, _DROP = 0, 1, 2  # what the server-side handler does with one message
_FORWARDED_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP")
_MODERN_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"


def block_result(message: str, *, modern: bool = False) -> dict[str, Any]:
    """The tool result the proxy answers a blocked call with (``resultType`` on 2026+ envelopes)."""
    result: dict[str, Any] = {"content": [{"type": "text", "text": message}], "isError": True}
    if modern:
        result["resultType"] = "complete"
    return result


def _is_modern(params: Any) -> bool:
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and _MODERN_VERSION_KEY in meta


def _error_text(result: dict) -> str:
    parts = []
    for block in result.get("content") or ():
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            parts.append(block["text"])
    return "\n".join(parts) or "tool error"


def _id_key(msg_id: Any) -> Hashable | None:
    # JSON-RPC ids are strings or numbers; 1 and "1" are different requests.
    if isinstance(msg_id, bool) or not isinstance(msg_id, (str, int, float)):
        return None
    return (type(msg_id) is str, msg_id)


def _warn(text: str) -> None:
    try:
        sys.stderr.write(f"loopcore mcp-proxy: {text}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _lines(stream: IO[bytes]):
    """The lines of *stream* read with os.read on its descriptor, the last one possibly unended.

    Not the stream's own readline: a daemon thread parked in a buffered read holds its lock,
    and the interpreter aborts at exit when the server has gone and the client has not.
    """
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        fd = None
    if fd is None:  # an in-memory stream (tests, embedding): its readline does not block
        yield from iter(stream.readline, b"")
        return
    buf = b""
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        buf += chunk
        start = 0
        while True:
            end = buf.find(b"\n", start)
            if end < 0:
                break
            yield buf[start : end + 1]
            start = end + 1
        buf = buf[start:]
    if buf:
        yield buf


class _Call:
    __slots__ = ("tool", "args", "decision", "started", "raw_id", "modern")

    def __init__(self, tool: str, args: Any, decision: Any, raw_id: Any, modern: bool) -> None:
        self.tool = tool
        self.args = args
        self.decision = decision
        self.raw_id = raw_id
        self.modern = modern
        self.started = time.monotonic()


class MCPProxy:
    """Pumps one MCP stdio connection between a client and a server child, guarding tools/call.

    *command* is the server's argv. *guard* is a :class:`loopcore.Guard` (None: pass everything
    through unguarded, which is what the benchmarks compare against). *session* is the guard
    session (default: one fresh id per proxy). *client_in* / *client_out* are the client side's
    binary streams (default: this process's stdin / stdout). *grace* is how long a server gets
    to exit after its stdin closes before SIGTERM (and as long again before SIGKILL).
    *call_timeout* (seconds, None for never) bounds how long a checked ``tools/call`` may wait
    for the server: past it the proxy answers the call itself (an ``isError`` result saying so,
    recorded as an error), sends the server ``notifications/cancelled`` for it, and drops the
    server's late answer. *on_decision(decision, tool, call_id)* is called for each warn/block;
    *on_record* after each recorded outcome (the CLI saves ``--state`` there).
    """

    def __init__(
        self,
        command: Sequence[str],
        guard: Any = None,
        *,
        session: Hashable | None = None,
        client_in: IO[bytes] | None = None,
        client_out: IO[bytes] | None = None,
        grace: float = 5.0,
        on_decision: Callable[[Any, str, Any], Any] | None = None,
        on_record: Callable[[], Any] | None = None,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        call_timeout: float | None = None,
    ) -> None:
        if not command:
            raise ValueError(
                "no MCP server command given (loopcore mcp-proxy -- SERVER_CMD ARGS...)"
            )
        self.command = list(command)
        self.guard = guard
        self.session = session if session is not None else f"mcp-proxy-{uuid.uuid4().hex[:12]}"
        self.grace = grace
        self.on_decision = on_decision
        self.on_record = on_record
        self._in = client_in if client_in is not None else sys.stdin.buffer
        self._out = client_out if client_out is not None else sys.stdout.buffer
        self._env = env
        self._cwd = cwd
        self._out_lock = threading.Lock()
        self._calls: dict[Hashable, _Call] = {}  # open tools/call requests the guard checked
        self._open: dict[Hashable, Any] = {}  # every open client request: key -> raw id
        self._proc: subprocess.Popen | None = None
        self._client_done = threading.Event()
        self._stdin_lock = threading.Lock()  # the client pump and the watchdog both write
        self._timed_out: set[Hashable] = set()
        self._answer_lock = threading.Lock()  # a call is answered by the server or timed out, once
        self.call_timeout = call_timeout
        self.blocked = 0
        self.warned = 0

    # -- writing ------------------------------------------------------------------------------

    def _to_client(self, data: bytes) -> None:
        with self._out_lock:
            try:
                self._out.write(data)
                self._out.flush()
            except (BrokenPipeError, ValueError, OSError):
                pass  # the client left; the server side winds down on its own

    # -- client -> server -----------------------------------------------------------------------

    def _note_request(self, msg: dict) -> None:
        key = _id_key(msg.get("id"))
        if key is not None and "method" in msg:
            self._open[key] = msg["id"]

    def _check_call(self, msg: dict) -> dict | None:
        """Check one tools/call request; returns the block response, or None to forward it."""
        params = msg.get("params")
        key = _id_key(msg.get("id"))
        if key is None or not isinstance(params, dict) or not isinstance(params.get("name"), str):
            return None  # malformed for MCP: let the server answer it as it would
        tool = params["name"]
        args = params.get("arguments")
        if args is None:
            args = {}
        try:
            d = self.guard.check(self.session, tool, args, call_id=msg["id"])
        except Exception as exc:  # noqa: BLE001 - the guard failing must never break the connection
            _warn(
                f"the guard could not check {tool!r} ({type(exc).__name__}: {exc}); forwarded unchecked"
            )
            return None
        if d.action == "block":
            self.blocked += 1
            self.guard.record(self.session, tool, args, d, call_id=msg["id"])
            if self.on_decision is not None:
                self.on_decision(d, tool, msg["id"])
            return {
                "jsonrpc": "2.0",
                "id": msg["id"],
                "result": block_result(d.message, modern=_is_modern(params)),
            }
        self._calls[key] = _Call(tool, args, d, msg["id"], _is_modern(params))
        return None

    def _client_message(self, msg: Any) -> tuple[bool, list]:
        """(forward unchanged?, block responses) for one parsed client message."""
        if not isinstance(msg, dict):
            return True, []
        method = msg.get("method")
        if method == "tools/call" and "id" in msg and self.guard is not None:
            self._note_request(msg)
            blocked = self._check_call(msg)
            if blocked is not None:
                self._open.pop(_id_key(msg["id"]), None)
                return False, [blocked]
            return True, []
        if "id" in msg and method is not None:
            self._note_request(msg)
        elif method == "notifications/cancelled":
            params = msg.get("params")
            if isinstance(params, dict):
                key = _id_key(params.get("requestId"))
                if key is not None:
                    # No outcome will come for a cancelled call: nothing to record.
                    self._calls.pop(key, None)
                    self._open.pop(key, None)
        return True, []

    def _client_line(self, line: bytes, stdin: IO[bytes]) -> None:
        forward = line
        # Only a batch or a line naming a method can be a request or a cancellation; anything
        # else (responses to the server's own requests, blank lines) is not even parsed.
        if b'"method"' in line or line.lstrip()[:1] == b"[":
            try:
                msg = loads(line)  # a lone surrogate in the arguments is still a call to check
            except orjson.JSONDecodeError:
                msg = None  # not JSON: the server decides what to make of it
            if isinstance(msg, list) and msg:  # a JSON-RPC batch (protocol revision 2025-03-26)
                keep, answers = [], []
                for item in msg:
                    fwd, blocks = self._client_message(item)
                    answers.extend(blocks)
                    if fwd:
                        keep.append(item)
                if answers:
                    self._to_client(orjson.dumps(answers) + b"\n")
                    forward = orjson.dumps(keep) + b"\n" if keep else b""
            elif msg is not None:
                fwd, blocks = self._client_message(msg)
                if blocks:
                    self._to_client(orjson.dumps(blocks[0]) + b"\n")
                if not fwd:
                    forward = b""
        if forward:
            with self._stdin_lock:
                stdin.write(forward)
                stdin.flush()

    def _pump_client(self) -> None:
        proc = self._proc
        assert proc is not None and proc.stdin is not None
        stdin = proc.stdin
        try:
            for line in _lines(self._in):
                self._client_line(line, stdin)
        except (BrokenPipeError, OSError, ValueError):
            pass  # the server stopped reading (it exited); the server pump reports that
        finally:
            self._client_done.set()
            try:
                stdin.close()
            except (BrokenPipeError, OSError):
                pass
        self._stop_after_grace()

    def _stop_after_grace(self) -> None:
        # MCP stdio shutdown: stdin closed, then SIGTERM, then SIGKILL if it still runs.
        proc = self._proc
        assert proc is not None
        for sig in (signal.SIGTERM, getattr(signal, "SIGKILL", signal.SIGTERM)):
            try:
                proc.wait(self.grace)
                return
            except subprocess.TimeoutExpired:
                self._signal_server(sig)
        try:
            proc.wait(self.grace)
        except subprocess.TimeoutExpired:
            pass

    def _signal_server(self, sig: int) -> None:
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        try:
            if hasattr(os, "killpg"):
                os.killpg(proc.pid, sig)
            else:  # pragma: no cover - Windows
                proc.send_signal(sig)
        except (ProcessLookupError, PermissionError):
            pass

    # -- server -> client ---------------------------------------------------------------------

    def _server_response(self, msg: Any) -> int:
        """Record one server message if it answers a guarded call: _SAME, _CHANGED or _DROP."""
        if not isinstance(msg, dict) or "method" in msg:
            return _SAME
        key = _id_key(msg.get("id"))
        if key is None:
            return _SAME
        with self._answer_lock:
            if key in self._timed_out:
                # The proxy answered it when it timed out: the client must not get two answers.
                self._timed_out.discard(key)
                return _DROP
            self._open.pop(key, None)
            call = self._calls.pop(key, None)
        if call is None:
            return _SAME
        guard, d = self.guard, call.decision
        result = msg.get("result")
        try:
            if isinstance(result, dict):
                if result.get("isError") is True:
                    guard.record(
                        self.session,
                        call.tool,
                        call.args,
                        error=_error_text(result),
                        call_id=msg["id"],
                    )
                else:
                    outcome = {k: v for k, v in result.items() if k != "_meta"}
                    guard.record(self.session, call.tool, call.args, outcome, call_id=msg["id"])
            else:
                err = msg.get("error")
                text = err.get("message") if isinstance(err, dict) else None
                guard.record(
                    self.session,
                    call.tool,
                    call.args,
                    error=str(text or err or "error"),
                    call_id=msg["id"],
                )
        except Exception as exc:  # noqa: BLE001 - the guard failing must never break the connection
            _warn(f"the guard could not record {call.tool!r} ({type(exc).__name__}: {exc})")
        if self.on_record is not None:
            self.on_record()
        if d.action == "warn":
            self.warned += 1
            if self.on_decision is not None:
                self.on_decision(d, call.tool, msg["id"])
            if isinstance(result, dict) and isinstance(result.get("content"), list):
                result["content"].append({"type": "text", "text": d.message})
                return _CHANGED
        return _SAME

    def _server_line(self, line: bytes) -> bytes:
        if not (self._open or self._calls or self._timed_out):
            return line  # nothing is waiting for an answer: nothing to look at
        try:
            # a lone surrogate in a result (a tool output cut mid-emoji) still answers its call
            msg = loads(line)
        except orjson.JSONDecodeError:
            return line
        if isinstance(msg, list):
            changed, keep = False, []
            for item in msg:
                what = self._server_response(item)
                changed = changed or what != _SAME
                if what != _DROP:
                    keep.append(item)
            if not changed:
                return line
            return orjson.dumps(keep) + b"\n" if keep else b""
        what = self._server_response(msg)
        if what == _SAME:
            return line
        return orjson.dumps(msg) + b"\n" if what == _CHANGED else b""

    def _watchdog(self) -> None:
        timeout = float(self.call_timeout or 0)
        tick = min(max(timeout / 4, 0.01), 1.0)
        proc = self._proc
        while proc is not None and proc.poll() is None:
            time.sleep(tick)
            now = time.monotonic()
            for key, call in list(self._calls.items()):
                if now - call.started < timeout:
                    continue
                with self._answer_lock:
                    if self._calls.pop(key, None) is None:
                        continue  # answered meanwhile
                    self._open.pop(key, None)
                    self._timed_out.add(key)
                text = (
                    f"loopcore mcp-proxy: the MCP server did not answer this {call.tool} call within "
                    f"{timeout:g} s; it was cancelled."
                )
                try:
                    self.guard.record(
                        self.session, call.tool, call.args, error="timed out", call_id=call.raw_id
                    )
                except Exception as exc:  # noqa: BLE001 - never break the connection
                    _warn(f"the guard could not record {call.tool!r} ({type(exc).__name__}: {exc})")
                self._to_client(
                    orjson.dumps(
                        {
                            "jsonrpc": "2.0",
                            "id": call.raw_id,
                            "result": block_result(text, modern=call.modern),
                        }
                    )
                    + b"\n"
                )
                cancel = {
                    "jsonrpc": "2.0",
                    "method": "notifications/cancelled",
                    "params": {
                        "requestId": call.raw_id,
                        "reason": "timed out in loopcore mcp-proxy",
                    },
                }
                try:
                    with self._stdin_lock:
                        assert proc.stdin is not None
                        proc.stdin.write(orjson.dumps(cancel) + b"\n")
                        proc.stdin.flush()
                except (BrokenPipeError, OSError, ValueError):
                    pass
                _warn(f"{call.tool} (request {call.raw_id!r}) timed out after {timeout:g} s")

    def _answer_open(self, returncode: int | None) -> None:
        """Answer every request the server left open, so the client does not wait forever."""
        how = "exited" if returncode is None or returncode >= 0 else "was killed"
        code = (
            ""
            if returncode is None
            else f" ({'code' if returncode >= 0 else 'signal'} {abs(returncode)})"
        )
        for key, raw_id in list(self._open.items()):
            self._open.pop(key, None)
            self._calls.pop(key, None)
            err = {
                "code": SERVER_GONE,
                "message": f"the MCP server {how}{code} before answering this request",
            }
            self._to_client(orjson.dumps({"jsonrpc": "2.0", "id": raw_id, "error": err}) + b"\n")

    # -- the whole connection -------------------------------------------------------------------

    def run(self) -> int:
        """Start the server, pump until it exits, and return its exit code (128+N on signal N).

        Raises OSError when the server cannot be started.
        """
        self._proc = proc = subprocess.Popen(
            self.command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,
            start_new_session=True,
            env=self._env,
            cwd=self._cwd,
        )
        restore = self._forward_signals()
        client = threading.Thread(target=self._pump_client, name="loopcore-mcp-client", daemon=True)
        client.start()
        if self.call_timeout is not None and self.guard is not None:
            threading.Thread(
                target=self._watchdog, name="loopcore-mcp-watchdog", daemon=True
            ).start()
        try:
            assert proc.stdout is not None
            with proc.stdout as out:
                while True:
                    line = out.readline()
                    if not line:
                        break
                    out_line = self._server_line(line)
                    if out_line:
                        self._to_client(out_line)
            # stdout closed: the server is exiting (or handed its stdout away; give it the grace).
            try:
                rc = proc.wait(self.grace)
            except subprocess.TimeoutExpired:
                self._signal_server(signal.SIGTERM)
                try:
                    rc = proc.wait(self.grace)
                except subprocess.TimeoutExpired:
                    self._signal_server(getattr(signal, "SIGKILL", signal.SIGTERM))
                    rc = proc.wait()
            self._answer_open(rc)
        finally:
            restore()
        with self._out_lock:
            try:
                self._out.flush()
            except (BrokenPipeError, OSError, ValueError):
                pass
        return rc if rc >= 0 else 128 - rc

    def _forward_signals(self) -> Callable[[], None]:
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        previous = {}
        for name in _FORWARDED_SIGNALS:
            sig = getattr(signal, name, None)
            if sig is None:
                continue
            try:
                previous[sig] = signal.signal(sig, lambda s, _f: self._signal_server(s))
            except (ValueError, OSError):  # pragma: no cover - not settable here
                continue

        def restore() -> None:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

        return restore


def run(command: Sequence[str], guard: Any = None, **kwargs: Any) -> int:
    """Proxy this process's stdio to the MCP server *command* under *guard*; returns its exit code."""
    return MCPProxy(command, guard, **kwargs).run()


def load_policy(spec: str | None) -> Any:
    """A Policy from a preset name or a JSON file of Policy.to_dict() fields (None: the default).

    Raises ValueError for an unknown preset, OSError or PolicyError for a bad file.
    """
    from ..policy import Policy

    if spec is None:
        return Policy.default()
    if os.path.isfile(spec):
        with open(spec, "rb") as fh:
            return Policy.from_dict(orjson.loads(fh.read()))
    return Policy.preset(spec)


def _load_guard(policy: Any, state: str | None) -> Any:
    from ..guard import Guard

    if state and os.path.exists(state):
        try:
            with open(state, "rb") as fh:
                data = fh.read()
            if data:
                return (
                    Guard.restore(data, policy=policy)
                    if policy is not None
                    else Guard.restore(data)
                )
        except (OSError, ValueError) as exc:
            # A state that cannot be read must not keep the server from starting (fail open).
            _warn(f"cannot restore the guard from {state!r} ({exc}); starting with fresh counts")
    return Guard(policy)


def _save_guard(guard: Any, state: str) -> None:
    tmp = f"{state}.{os.getpid()}.tmp"
    with open(tmp, "wb") as fh:
        fh.write(guard.snapshot())
    os.replace(tmp, state)


def run_cli(
    server: Sequence[str],
    *,
    policy: str | None = None,
    state: str | None = None,
    session: str | None = None,
    grace: float = 5.0,
    quiet: bool = False,
    save_every: float = 2.0,
    call_timeout: float | None = None,
) -> int:
    """``loopcore mcp-proxy``: proxy stdio to *server* under a guard; returns the exit code.

    *state* is a file the guard's snapshot is restored from at start and saved to at exit (and
    at most every *save_every* seconds after an outcome). Each warn/block is one line on
    stderr unless *quiet*. Raises ValueError for a bad policy or an empty *server*.
    """
    import logging

    pol = load_policy(policy) if policy is not None or not state else None
    guard = _load_guard(pol, state)
    # The guard logs each crossing through "loopcore"; the proxy says it once, below, instead.
    logging.getLogger("loopcore").addHandler(logging.NullHandler())
    last_save = [time.monotonic()]

    def on_decision(d: Any, tool: str, call_id: Any) -> None:
        if not quiet:
            sys.stderr.write(
                f"loopcore mcp-proxy: {d.action} {d.detector} on {tool} "
                f"(count {d.count}, request {call_id!r})\n"
            )
            sys.stderr.flush()

    def on_record() -> None:
        now = time.monotonic()
        if state and now - last_save[0] >= save_every:
            last_save[0] = now
            _save_guard(guard, state)

    proxy = MCPProxy(
        server,
        guard,
        session=session,
        grace=grace,
        on_decision=on_decision,
        on_record=on_record,
        call_timeout=call_timeout,
    )
    try:
        return proxy.run()
    finally:
        if state:
            _save_guard(guard, state)
