"""Each warn and block of the guard as an event on the current OpenTelemetry span.

The event follows the vocabulary of the OpenTelemetry GenAI semantic conventions for guardrails
(still in development upstream): the guardrail component, the policy and the rule (the loopcore
detector), the verdict and its reason, and what was evaluated (``tool_input`` for a call blocked
before it ran, ``tool_output`` for a warning delivered with the tool's result). The framework
integrations call :func:`emit_guardrail_result` themselves whenever ``opentelemetry-api`` is
installed; with no SDK configured the current span is not recording and nothing is done.
Install with ``pip install 'loopcore[otel]'``. See docs/integrations/otel.md.
"""

from __future__ import annotations

from typing import Any

from . import require

__all__ = [
    "ATTRIBUTES",
    "EVENT_NAME",
    "GUARDRAIL_NAME",
    "emit_guardrail_result",
    "guardrail_attributes",
]

_trace = require("opentelemetry.trace", "otel", "opentelemetry-api")

#: The span event name of one guardrail verdict.
EVENT_NAME = "gen_ai.guardrail.result"
#: The guardrail component's name in every event.
GUARDRAIL_NAME = "loopcore"

#: The attribute keys an event carries (those without a value are left out).
ATTRIBUTES = (
    "gen_ai.operation.name",  # "apply_guardrail"
    "gen_ai.security.guardrail.name",  # "loopcore"
    "gen_ai.security.target.type",  # "tool_input" | "tool_output"
    "gen_ai.security.verdict.type",  # "warn" | "block"
    "gen_ai.security.verdict.reason",  # the message the model sees
    "gen_ai.security.policy.name",  # the Policy's name
    "gen_ai.security.policy.rule.id",  # the detector that fired
    "gen_ai.tool.name",
    "gen_ai.tool.call.id",
    "gen_ai.conversation.id",  # the guard session
    "loopcore.count",  # the count the detector compared with its threshold
    "loopcore.key",  # a stable id of the pattern
)


def guardrail_attributes(
    decision: Any,
    *,
    tool: str,
    source: str,
    call_id: Any = None,
    session: Any = None,
    policy: str | None = None,
) -> dict[str, Any]:
    """The event attributes for a warn/block *decision* on *tool*; ValueError for a bad *source*."""
    if source not in ("tool_input", "tool_output"):
        raise ValueError(f"source must be 'tool_input' or 'tool_output'; got {source!r}")
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "apply_guardrail",
        "gen_ai.security.guardrail.name": GUARDRAIL_NAME,
        "gen_ai.security.target.type": source,
        "gen_ai.security.verdict.type": decision.action,
        "gen_ai.security.verdict.reason": decision.message,
        "gen_ai.security.policy.rule.id": decision.detector or "",
        "gen_ai.tool.name": tool,
        "loopcore.count": int(decision.count),
    }
    if policy:
        attrs["gen_ai.security.policy.name"] = policy
    if call_id is not None:
        attrs["gen_ai.tool.call.id"] = str(call_id)
    if session is not None:
        attrs["gen_ai.conversation.id"] = str(session)
    if decision.key:
        attrs["loopcore.key"] = decision.key
    return attrs


def emit_guardrail_result(
    decision: Any,
    *,
    tool: str,
    source: str,
    call_id: Any = None,
    session: Any = None,
    policy: str | None = None,
    span: Any = None,
) -> bool:
    """Add a guardrail-result event for a warn/block *decision* to *span* (default: the current one).

    Returns False, doing nothing, for an allow or when the span is not recording.
    """
    if decision.action == "allow":
        return False
    if span is None:
        span = _trace.get_current_span()
    if not span.is_recording():
        return False
    span.add_event(
        EVENT_NAME,
        guardrail_attributes(
            decision, tool=tool, source=source, call_id=call_id, session=session, policy=policy
        ),
    )
    return True
