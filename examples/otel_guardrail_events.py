"""The guard's warnings and blocks as OpenTelemetry span events: ``python examples/otel_guardrail_events.py``.

Needs ``pip install 'loopcore[otel]' opentelemetry-sdk``. Any integration (here the LangChain
middleware would do the same) adds a ``gen_ai.guardrail.result`` event to the current span for
each warn and block; this script calls the guard directly and prints the events it emitted.
"""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import loopcore
from loopcore.integrations.otel import emit_guardrail_result

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
tracer = trace.get_tracer("demo")

guard = loopcore.Guard(loopcore.Policy.cline())
for i in range(6):
    with tracer.start_as_current_span("execute_tool read_file"):
        d = guard.check("conversation-1", "read_file", {"path": "a.py"})
        emit_guardrail_result(
            d,
            tool="read_file",
            source="tool_input" if d.blocked else "tool_output",
            call_id=f"call-{i}",
            session="conversation-1",
            policy=guard.policy.name,
        )
        guard.record(
            "conversation-1", "read_file", {"path": "a.py"}, d if d.blocked else "contents of a.py"
        )

for span in exporter.get_finished_spans():
    for event in span.events:
        a = event.attributes
        print(
            event.name,
            a["gen_ai.security.verdict.type"],
            a["gen_ai.security.policy.rule.id"],
            a["gen_ai.security.target.type"],
            a["gen_ai.tool.call.id"],
        )
