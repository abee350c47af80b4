"""The guard as OpenAI Agents SDK tool guardrails: one input and one output guardrail per tool.

``LoopGuardrails(guard)`` holds a ``tool_input_guardrail`` that checks each call before it runs
(allow, or ``reject_content(message)`` on a block: the tool does not run and the model gets the
block message as the tool's output) and a ``tool_output_guardrail`` that records the outcome
and, on a warning, hands the model the output with the warning appended. Attach them with
``@function_tool(tool_input_guardrails=[g.input], tool_output_guardrails=[g.output])`` or
``g.attach(tool, ...)``. The SDK runs tool guardrails for function tools only: hosted tools,
handoffs and agents-as-tools are never seen (put ``loopcore mcp-proxy`` in front of an MCP
server instead). Install with ``pip install 'loopcore[openai-agents]'``. See
docs/integrations/openai-agents.md.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Hashable
from typing import Any

from . import require
from ._common import Telemetry, with_warning

_agents = require("agents", "openai-agents", "openai-agents")

ToolGuardrailFunctionOutput = _agents.ToolGuardrailFunctionOutput
FunctionTool = _agents.FunctionTool

__all__ = ["LoopGuardrails"]


def _args(ctx: Any) -> Any:
    raw = getattr(ctx, "tool_arguments", None)
    if not raw:
        return {}
    try:
        return json.loads(raw)
    except (TypeError, ValueError):
        return raw  # arguments that do not parse are hashed as the text the model wrote


class LoopGuardrails:
    """A tool input guardrail (``.input``) and output guardrail (``.output``) sharing one guard.

    *guard* defaults to ``Guard(policy)``. *session* is the guard session: a value, or a
    callable given the ``ToolContext``; by default the run's ``RunConfig.group_id`` (the SDK's
    conversation / thread grouping id) when set, else ``"default"``. *telemetry*: emit each
    warn/block as an OpenTelemetry span event (None: when opentelemetry-api is installed).
    """

    def __init__(
        self,
        guard: Any = None,
        *,
        policy: Any = None,
        session: Hashable | Callable[[Any], Hashable] = "default",
        telemetry: bool | None = None,
    ) -> None:
        if guard is None:
            from ..guard import Guard

            guard = Guard(policy)
        self.guard = guard
        self.session = session
        self._telemetry = Telemetry(telemetry)
        self._open: dict[tuple[Hashable, str], Any] = {}  # warned calls waiting for their output
        self._lock = threading.Lock()
        self.input = _agents.ToolInputGuardrail(
            guardrail_function=self._check, name="loopcore_check"
        )
        self.output = _agents.ToolOutputGuardrail(
            guardrail_function=self._record, name="loopcore_record"
        )

    def attach(self, *tools: Any) -> tuple[Any, ...]:
        """Add both guardrails to each function tool (once); TypeError for any other tool."""
        for t in tools:
            if not isinstance(t, FunctionTool):
                raise TypeError(
                    f"the Agents SDK runs tool guardrails for function tools only; "
                    f"{type(t).__name__} {getattr(t, 'name', t)!r} cannot be guarded"
                )
            t.tool_input_guardrails = [
                g for g in (t.tool_input_guardrails or []) if g is not self.input
            ] + [self.input]
            t.tool_output_guardrails = [
                g for g in (t.tool_output_guardrails or []) if g is not self.output
            ] + [self.output]
        return tools

    def _session(self, ctx: Any) -> Hashable:
        s = self.session
        if callable(s):
            return s(ctx)
        group = getattr(getattr(ctx, "run_config", None), "group_id", None)
        return group if group is not None else s

    def _check(self, data: Any) -> Any:
        ctx = data.context
        tool, args, call_id = ctx.tool_name, _args(ctx), ctx.tool_call_id
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
            return ToolGuardrailFunctionOutput.reject_content(d.message, output_info=d.to_dict())
        if d.action == "warn":
            with self._lock:
                self._open[(session, call_id)] = d
            return ToolGuardrailFunctionOutput.allow(output_info=d.to_dict())
        return ToolGuardrailFunctionOutput.allow()

    def _record(self, data: Any) -> Any:
        ctx = data.context
        tool, args, call_id = ctx.tool_name, _args(ctx), ctx.tool_call_id
        session = self._session(ctx)
        output = data.output
        self.guard.record(session, tool, args, output, call_id=call_id)
        with self._lock:
            d = self._open.pop((session, call_id), None)
        if d is None:
            return ToolGuardrailFunctionOutput.allow()
        self._telemetry(
            d,
            tool=tool,
            source="tool_output",
            call_id=call_id,
            session=session,
            policy=self.guard.policy.name,
        )
        text = output if isinstance(output, str) else _as_text(output)
        # reject_content is the SDK's only way to change what the model reads: the output and
        # the warning, together.
        return ToolGuardrailFunctionOutput.reject_content(
            with_warning(text, d.message), output_info=d.to_dict()
        )


def _as_text(output: Any) -> str:
    try:
        return json.dumps(output, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(output)
