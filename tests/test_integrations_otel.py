"""Warn/block decisions as guardrail-result events on the current span (OpenTelemetry SDK, in memory)."""

from __future__ import annotations

import pytest

pytest.importorskip(
    "opentelemetry.sdk.trace",
    reason="the otel extra is not installed: pip install 'loopcore[otel]'",
)

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

import loopcore  # noqa: E402
from loopcore.integrations import otel  # noqa: E402


@pytest.fixture()
def tracer():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider.get_tracer("loopcore-test"), exporter
    provider.shutdown()


def events_of(exporter, name=otel.EVENT_NAME):
    return [e for s in exporter.get_finished_spans() for e in s.events if e.name == name]


def test_a_block_and_a_warning_become_span_events(tracer):
    tr, exporter = tracer
    guard = loopcore.Guard(loopcore.Policy.cline())
    with tr.start_as_current_span("execute_tool read_file"):
        for i in range(5):
            d = guard.check("s", "read_file", {"path": "a.py"})
            otel.emit_guardrail_result(
                d,
                tool="read_file",
                source="tool_input" if d.blocked else "tool_output",
                call_id=f"c{i}",
                session="s",
                policy=guard.policy.name,
            )
            guard.record("s", "read_file", {"path": "a.py"}, d if d.blocked else "same")
    events = events_of(exporter)
    # cline: warned once at the 3rd identical call (a warning per bucket, not per call), refused at the 5th
    assert [e.attributes["gen_ai.security.verdict.type"] for e in events] == ["warn", "block"]
    block = dict(events[-1].attributes)
    assert block["gen_ai.security.guardrail.name"] == "loopcore"
    assert block["gen_ai.security.policy.rule.id"] == "consecutive_repeat"
    assert block["gen_ai.security.policy.name"] == "cline"
    assert block["gen_ai.security.target.type"] == "tool_input"
    assert block["gen_ai.security.verdict.reason"].startswith("BLOCKED")
    assert block["gen_ai.tool.name"] == "read_file" and block["gen_ai.tool.call.id"] == "c4"
    assert block["gen_ai.conversation.id"] == "s" and block["loopcore.count"] == 5
    assert events[0].attributes["gen_ai.security.target.type"] == "tool_output"
    assert set(block) <= set(otel.ATTRIBUTES)


def test_allow_and_a_span_that_is_not_recording_emit_nothing(tracer):
    tr, exporter = tracer
    with tr.start_as_current_span("x"):
        assert otel.emit_guardrail_result(loopcore.ALLOW, tool="t", source="tool_input") is False
    warn = loopcore.Decision("warn", "generic_repeat", 10, "careful")
    assert (
        otel.emit_guardrail_result(warn, tool="t", source="tool_input") is False
    )  # no current span
    assert events_of(exporter) == []
    with pytest.raises(ValueError, match="source"):
        otel.guardrail_attributes(warn, tool="t", source="elsewhere")


def test_the_framework_integrations_emit_on_their_own(tracer):
    lc = pytest.importorskip(
        "loopcore.integrations.langchain", reason="the langchain extra is not installed"
    )
    from langchain_core.messages import ToolMessage

    tr, exporter = tracer
    mw = lc.LoopGuardMiddleware(policy=loopcore.Policy.opencode(), session="o")

    class Request:
        runtime = None

        def __init__(self, i):
            self.tool_call = {"name": "grep", "args": {"q": "x"}, "id": f"g{i}"}

    def handler(req):
        return ToolMessage(content="no match", tool_call_id=req.tool_call["id"])

    with tr.start_as_current_span("agent"):
        out = [mw.wrap_tool_call(Request(i), handler) for i in range(3)]
    assert out[2].status == "error"
    (event,) = events_of(exporter)
    assert event.attributes["gen_ai.tool.call.id"] == "g2"
    assert event.attributes["gen_ai.security.verdict.type"] == "block"
    silent = lc.LoopGuardMiddleware(policy=loopcore.Policy.opencode(), session="o", telemetry=False)
    with tr.start_as_current_span("agent"):
        [silent.wrap_tool_call(Request(i), handler) for i in range(3)]
    assert len(events_of(exporter)) == 1
