"""The guard as LangChain v1 agent middleware, and as a LangGraph ``ToolNode`` tool-call wrapper.

``create_agent(model, tools, middleware=[LoopGuardMiddleware(guard)])`` checks every tool call
before its handler runs: a block short-circuits with an error ``ToolMessage`` carrying the
block message (the tool never runs), a warning is appended to the ``ToolMessage`` that comes
back, and every outcome is recorded. The same object serves a hand-built graph:
``ToolNode(tools, wrap_tool_call=mw.wrap_tool_call, awrap_tool_call=mw.awrap_tool_call)``.
The guard session is the LangGraph thread id (``config["configurable"]["thread_id"]``) where
there is one. Install with ``pip install 'loopcore[langchain]'``. See docs/integrations/langchain.md.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable
from typing import Any

from . import require
from ._common import Telemetry, with_warning

_middleware = require("langchain.agents.middleware", "langchain", "langchain")
_messages = require("langchain_core.messages", "langchain", "langchain-core")

AgentMiddleware = _middleware.AgentMiddleware
ToolMessage = _messages.ToolMessage

__all__ = ["LoopGuardMiddleware"]


def _thread_id(request: Any) -> Hashable | None:
    runtime = getattr(request, "runtime", None)
    config = getattr(runtime, "config", None)
    if isinstance(config, dict):
        conf = config.get("configurable")
        if isinstance(conf, dict):
            return conf.get("thread_id")
    return None


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content or ():
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and isinstance(block.get("text"), str):
            parts.append(block["text"])
    return "\n".join(parts)


class LoopGuardMiddleware(AgentMiddleware):
    """LangChain v1 agent middleware that runs every tool call under a :class:`loopcore.Guard`.

    *guard* defaults to ``Guard(policy)``. *session* is the guard session when the run has no
    thread id (a callable gets the ``ToolCallRequest``; default ``"default"``). *telemetry*:
    emit each warn/block as an OpenTelemetry span event (None: when opentelemetry-api is
    installed). Exceptions of the tool are recorded as errors and re-raised.
    """

    def __init__(
        self,
        guard: Any = None,
        *,
        policy: Any = None,
        session: Hashable | Callable[[Any], Hashable] = "default",
        telemetry: bool | None = None,
    ) -> None:
        super().__init__()
        if guard is None:
            from ..guard import Guard

            guard = Guard(policy)
        self.guard = guard
        self.session = session
        self._telemetry = Telemetry(telemetry)

    def _session(self, request: Any) -> Hashable:
        tid = _thread_id(request)
        if tid is not None:
            return tid
        s = self.session
        return s(request) if callable(s) else s

    def _before(self, request: Any) -> tuple[Any, Any, Any, Any, Any]:
        call = request.tool_call
        tool, args, call_id = call["name"], call.get("args") or {}, call.get("id")
        session = self._session(request)
        d = self.guard.check(session, tool, args, call_id=call_id)
        if d.action == "block":
            self.guard.record(session, tool, args, d, call_id=call_id)
            self._telemetry(
                d,
                tool=tool,
                source="tool_input",
                call_id=call_id,
                session=session,
                policy=self.guard.policy.name,
            )
            blocked = ToolMessage(
                content=d.message, tool_call_id=call_id or "", name=tool, status="error"
            )
            return blocked, session, tool, args, call_id
        return d, session, tool, args, call_id

    def _after(self, d: Any, session: Any, tool: str, args: Any, call_id: Any, result: Any) -> Any:
        if isinstance(result, ToolMessage):
            if result.status == "error":
                self.guard.record(
                    session,
                    tool,
                    args,
                    error=_content_text(result.content) or "tool error",
                    call_id=call_id,
                )
            else:
                self.guard.record(session, tool, args, result.content, call_id=call_id)
        else:  # a Command: its state update is the outcome
            self.guard.record(
                session, tool, args, repr(getattr(result, "update", result)), call_id=call_id
            )
        if d.action != "warn":
            return result
        self._telemetry(
            d,
            tool=tool,
            source="tool_output",
            call_id=call_id,
            session=session,
            policy=self.guard.policy.name,
        )
        if not isinstance(result, ToolMessage):
            return result
        content = result.content
        if isinstance(content, str):
            content = with_warning(content, d.message)
        else:
            content = [*content, {"type": "text", "text": d.message}]
        return result.model_copy(update={"content": content})

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Check the call, run *handler* unless blocked, record what it returned."""
        d, session, tool, args, call_id = self._before(request)
        if isinstance(d, ToolMessage):
            return d
        try:
            result = handler(request)
        except Exception as exc:
            self.guard.record(session, tool, args, error=exc, call_id=call_id)
            raise
        return self._after(d, session, tool, args, call_id, result)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        """The async twin of :meth:`wrap_tool_call`."""
        d, session, tool, args, call_id = self._before(request)
        if isinstance(d, ToolMessage):
            return d
        try:
            result = await handler(request)
        except Exception as exc:
            self.guard.record(session, tool, args, error=exc, call_id=call_id)
            raise
        return self._after(d, session, tool, args, call_id, result)
