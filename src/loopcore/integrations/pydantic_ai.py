"""The guard as a pydantic-ai capability: tool-execute hooks around every tool call.

``Agent(model, capabilities=[LoopGuard(guard)])`` checks each call in ``before_tool_execute``:
a block raises pydantic-ai's ``ToolFailed`` with the block message (the tool does not run, the
model sees a failed tool result and the tool's retry budget is not spent), or, with
``on_block="skip"``, ``SkipToolExecution`` (the message stands in as the tool's result), or, with
``on_block="retry"``, ``ModelRetry`` (a retry prompt, which does spend the budget). The outcome
is recorded in ``after_tool_execute`` (a warning is appended to a text result there) and
failures in ``on_tool_execute_error``. Needs a pydantic-ai with capabilities and their
tool-execute hooks (tested with 2.68). Install with ``pip install 'loopcore[pydantic-ai]'``.
See docs/integrations/pydantic-ai.md.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any

from . import require
from ._common import Telemetry, with_warning

_caps = require("pydantic_ai.capabilities", "pydantic-ai", "pydantic-ai-slim")
_exc = require("pydantic_ai.exceptions", "pydantic-ai", "pydantic-ai-slim")

__all__ = ["LoopGuard"]

_ON_BLOCK = ("fail", "skip", "retry")


class LoopGuard(_caps.AbstractCapability):
    """A pydantic-ai capability that runs every tool call under a :class:`loopcore.Guard`.

    *guard* defaults to ``Guard(policy)``. *session* is the guard session: a value, or a
    callable given the ``RunContext`` (e.g. ``lambda ctx: ctx.deps.conversation_id``); by
    default each agent run is its own session (``ctx.run_id``), since pydantic-ai has no
    conversation id of its own. *on_block* is ``"fail"``, ``"skip"`` or ``"retry"`` (see the
    module doc); ValueError otherwise. *telemetry*: emit each warn/block as an OpenTelemetry
    span event (None: when opentelemetry-api is installed).
    """

    def __init__(
        self,
        guard: Any = None,
        *,
        policy: Any = None,
        session: Hashable | Callable[[Any], Hashable] | None = None,
        on_block: str = "fail",
        telemetry: bool | None = None,
    ) -> None:
        if on_block not in _ON_BLOCK:
            raise ValueError(f"on_block must be one of {', '.join(_ON_BLOCK)}; got {on_block!r}")
        if guard is None:
            from ..guard import Guard

            guard = Guard(policy)
        self.guard = guard
        self.session = session
        self.on_block = on_block
        self._telemetry = Telemetry(telemetry)
        self._warned: dict[tuple[Hashable, Any], Any] = {}
        self._lock = threading.Lock()

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # built from Python objects (a Guard), not from an agent spec file

    def _session(self, ctx: Any) -> Hashable:
        s = self.session
        if s is None:
            return getattr(ctx, "run_id", None) or "default"
        return s(ctx) if callable(s) else s

    async def before_tool_execute(self, ctx: Any, *, call: Any, tool_def: Any, args: Any) -> Any:
        tool, call_id = call.tool_name, call.tool_call_id
        session = self._session(ctx)
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
            if self.on_block == "skip":
                raise _exc.SkipToolExecution(d.message)
            if self.on_block == "retry":
                raise _exc.ModelRetry(d.message)
            raise _exc.ToolFailed(d.message)
        if d.action == "warn":
            with self._lock:
                self._warned[(session, call_id)] = d
        return args

    async def after_tool_execute(
        self, ctx: Any, *, call: Any, tool_def: Any, args: Any, result: Any
    ) -> Any:
        tool, call_id = call.tool_name, call.tool_call_id
        session = self._session(ctx)
        self.guard.record(session, tool, args, result, call_id=call_id)
        with self._lock:
            d = self._warned.pop((session, call_id), None)
        if d is None:
            return result
        self._telemetry(
            d,
            tool=tool,
            source="tool_output",
            call_id=call_id,
            session=session,
            policy=self.guard.policy.name,
        )
        return with_warning(result, d.message) if isinstance(result, str) else result

    async def on_tool_execute_error(
        self, ctx: Any, *, call: Any, tool_def: Any, args: Any, error: Exception
    ) -> Any:
        session = self._session(ctx)
        self.guard.record(session, call.tool_name, args, error=error, call_id=call.tool_call_id)
        with self._lock:
            self._warned.pop((session, call.tool_call_id), None)
        raise error
