"""OpenTelemetry GenAI spans in OTLP JSON (``{"resourceSpans": [...]}``, or JSONL of such
requests as the collector's file exporter writes them).

Tool calls are the spans with ``gen_ai.operation.name = "execute_tool"``: ``gen_ai.tool.name``,
``gen_ai.tool.call.id``, ``gen_ai.tool.call.arguments`` and ``gen_ai.tool.call.result`` (opt-in
content attributes; absent ones stay None). A span status of ERROR, or an ``error.type``
attribute, marks the call failed. Model-call spans (``chat``, ``text_completion``,
``generate_content``) are the turns, with ``gen_ai.usage.input_tokens``/``output_tokens`` and
the text parts of ``gen_ai.output.messages`` as the reply (a call that issued no tool call, the
last answer, is a step of its own); each tool span belongs to the latest model call that
started before it. Spans are grouped into one
trace per ``gen_ai.conversation.id`` (a span without one takes its nearest ancestor's: the
conversation id is often set on the ``invoke_agent`` span only), else per traceId, and ordered
by start time. What the frameworks write beside the conventions is read too: pydantic-ai 1.x's
``tool_arguments`` / ``tool_response``, Google ADK's legacy ``gcp.vertex.agent.*`` keys,
Strands' span events, OpenLLMetry's LangChain envelope and OpenInference's span kinds.
"""

from __future__ import annotations

from typing import Any

import orjson

from ._base import Ledger, Trace, parse_args
from ._io import Ctx

NAME = "otel"
PROFILE = "generic"
_MODEL_OPS = frozenset({"chat", "text_completion", "generate_content"})
_STATUS_ERROR = (2, "STATUS_CODE_ERROR")
# Where a tool span keeps its call's arguments and result: the GenAI semantic conventions
# (1.37+), pydantic-ai's instrumentation versions 1-2 (its 1.x default), Google ADK's legacy
# schema.
_ARGS_KEYS = ("gen_ai.tool.call.arguments", "tool_arguments", "gcp.vertex.agent.tool_call_args")
_RESULT_KEYS = ("gen_ai.tool.call.result", "tool_response", "gcp.vertex.agent.tool_response")
# Google ADK opens one more execute_tool span over each parallel batch (telemetry/tracing.py)
_ADK_MERGED = "(merged tools)"


def _value(v: Any) -> Any:
    if not isinstance(v, dict):
        return v
    for k in ("stringValue", "boolValue", "doubleValue"):
        if k in v:
            return v[k]
    if "intValue" in v:
        try:
            return int(v["intValue"])  # OTLP JSON carries int64 as a string
        except (TypeError, ValueError):
            return v["intValue"]
    if "arrayValue" in v:
        return [_value(x) for x in (v["arrayValue"] or {}).get("values", [])]
    if "kvlistValue" in v:
        return {
            kv.get("key"): _value(kv.get("value"))
            for kv in (v["kvlistValue"] or {}).get("values", [])
        }
    if "bytesValue" in v:
        return v["bytesValue"]
    return None


def attributes(span: dict) -> dict:
    """A span's OTLP attribute list as a plain dict."""
    out = {}
    for kv in span.get("attributes") or []:
        if isinstance(kv, dict) and "key" in kv:
            out[kv["key"]] = _value(kv.get("value"))
    return out


def _spans(doc: Any):
    requests = doc if isinstance(doc, list) else [doc]
    for req in requests:
        if not isinstance(req, dict):
            continue
        for rs in req.get("resourceSpans") or []:
            if not isinstance(rs, dict):
                continue
            for ss in rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or []:
                if isinstance(ss, dict):
                    for span in ss.get("spans") or []:
                        if isinstance(span, dict):
                            yield span


def _start(span: dict) -> int:
    try:
        return int(span.get("startTimeUnixNano") or 0)
    except (TypeError, ValueError, OverflowError):
        return 0


def parse(doc: Any, ctx: Ctx) -> list[Trace]:
    """One trace per conversation (or OTel trace id)."""
    groups: dict[str, list[tuple[int, int, dict, dict]]] = {}
    spans_read = []
    # (traceId, spanId) -> (parentSpanId, gen_ai.conversation.id): instrumentations often set
    # the conversation id on the agent span only (invoke_agent), not on its chat / tool children
    tree: dict[tuple, tuple] = {}
    for n, span in enumerate(_spans(doc)):
        a = attributes(span)
        tid, sid = span.get("traceId"), span.get("spanId")
        if isinstance(tid, str) and isinstance(sid, str):
            tree[(tid, sid)] = (span.get("parentSpanId"), a.get("gen_ai.conversation.id"))
        if "openinference.span.kind" in a and "gen_ai.operation.name" not in a:
            _from_openinference(a)
        op = a.get("gen_ai.operation.name")
        if op is None and a.get("gen_ai.tool.name") is not None:
            # pydantic-ai 1.0's "running tool" spans name the tool but no operation
            a["gen_ai.operation.name"] = op = "execute_tool"
        if op == "execute_tool" or op in _MODEL_OPS:
            spans_read.append((n, span, a))
    for n, span, a in spans_read:
        conv = a.get("gen_ai.conversation.id")
        tid, parent = span.get("traceId"), span.get("parentSpanId")
        hops = 0
        while not conv and isinstance(parent, str) and parent and hops < 1000:
            up = tree.get((tid, parent))
            if up is None:
                break
            parent, conv = up
            hops += 1
        key = str(conv or tid or ctx.stem)
        groups.setdefault(key, []).append((_start(span), n, span, a))
    profile = ctx.profile(PROFILE)
    traces = []
    for key, spans in groups.items():
        spans.sort(key=lambda x: (x[0], x[1]))
        ledger = Ledger(key, profile)
        for _, n, span, a in spans:
            op = a.get("gen_ai.operation.name")
            if op in _MODEL_OPS:
                # every model call counts, the last answer (no tool call) too
                ledger.turn(
                    {
                        "input_tokens": a.get("gen_ai.usage.input_tokens"),
                        "output_tokens": a.get("gen_ai.usage.output_tokens"),
                    },
                    text=a[_REPLY] if _REPLY in a else _reply_text(a.get("gen_ai.output.messages")),
                )
                continue
            name = a.get("gen_ai.tool.name") or span.get("name")
            if not isinstance(name, str):
                ctx.bad("an execute_tool span without gen_ai.tool.name")
                continue
            if name == _ADK_MERGED:
                continue  # bookkeeping of a parallel batch: each call has its own span
            raw_args = next((a[k] for k in _ARGS_KEYS if a.get(k) is not None), None)
            events = _events(span)
            if raw_args is None:
                # Strands without the latest conventions: the arguments are the content of
                # the span's gen_ai.tool.message event
                raw_args = events.get("gen_ai.tool.message", {}).get("content")
            span_id = span.get("spanId")
            if raw_args is None:
                # the arguments were not recorded (content capture off, or a key this reader
                # does not know): two such calls are not proven the same, so each is known by
                # its span alone and never repeats another
                args: Any = {"span": span_id if isinstance(span_id, str) else n}
            else:
                args, _ = parse_args(raw_args)
                args = _langchain_inputs(args)
            ref = {"event": span_id} if isinstance(span_id, str) and span_id else None
            step = ledger.call(name, args, a.get("gen_ai.tool.call.id"), ref=ref)
            status = span.get("status") if isinstance(span.get("status"), dict) else {}
            error = a.get("error.type")
            if error is None and status.get("code") in _STATUS_ERROR:
                error = status.get("message") or True
            result = next((a[k] for k in _RESULT_KEYS if a.get(k) is not None), None)
            if result is None:
                result = _blocks_text(events.get("gen_ai.choice", {}).get("message"))
            else:
                result = _langchain_output(result)
            if error is None and a.get("gen_ai.tool.status") == "error":
                error = result if isinstance(result, str) and result else True
            ledger.result(step, result, error)
        traces.append(ledger.trace(source=ctx.path, fmt=NAME))
    if len(traces) > 1 and ctx.path:
        for n, t in enumerate(traces):
            t.source = f"{ctx.path}#{n}"
    if not traces:
        traces.append(Ledger(ctx.stem, profile).trace(source=ctx.path, fmt=NAME))
    return traces


# the reply text a span's attributes give outside the GenAI conventions (OpenInference)
_REPLY = "\x00reply"


def _from_openinference(a: dict) -> None:
    """OpenInference attributes (Arize's conventions: LangChain, LlamaIndex, smolagents, CrewAI,
    the OpenAI Agents SDK instrumented through ``openinference-instrumentation-*``) as the GenAI
    ones this reader reads: an ``LLM`` span is a model call (``llm.token_count.prompt`` /
    ``completion``, the first output message's content its reply), a ``TOOL`` span a call
    (``tool.name``, ``input.value`` its arguments, ``output.value`` its result); ``session.id``
    is the conversation."""
    kind = a.get("openinference.span.kind")
    if kind == "LLM":
        a["gen_ai.operation.name"] = "chat"
        a["gen_ai.usage.input_tokens"] = a.get("llm.token_count.prompt")
        a["gen_ai.usage.output_tokens"] = a.get("llm.token_count.completion")
        reply = a.get("llm.output_messages.0.message.content")
        a[_REPLY] = reply if isinstance(reply, str) else ""
    elif kind == "TOOL" and isinstance(a.get("tool.name"), str):
        a["gen_ai.operation.name"] = "execute_tool"
        a["gen_ai.tool.name"] = a["tool.name"]
        if a.get("input.value") is not None:
            a["gen_ai.tool.call.arguments"] = a["input.value"]
        out = a.get("output.value")
        if isinstance(out, str) and out.startswith('{"type": "tool"'):
            # LangChain's ToolMessage as OpenInference dumps it: {"type": "tool", "data": {...}}
            try:
                doc = orjson.loads(out)
            except orjson.JSONDecodeError:
                doc = None
            data = doc.get("data") if isinstance(doc, dict) else None
            if isinstance(data, dict) and "content" in data:
                out = data["content"]
        if out is not None:
            a["gen_ai.tool.call.result"] = out
        if a.get("tool_call.id") is not None:
            a["gen_ai.tool.call.id"] = a["tool_call.id"]
    if a.get("session.id") is not None and "gen_ai.conversation.id" not in a:
        a["gen_ai.conversation.id"] = a["session.id"]


def _events(span: dict) -> dict[str, dict]:
    """A span's events by name (the first of each), their attributes as plain dicts."""
    out: dict[str, dict] = {}
    for e in span.get("events") or []:
        if isinstance(e, dict) and isinstance(e.get("name"), str) and e["name"] not in out:
            out[e["name"]] = attributes(e)
    return out


def _blocks_text(message: Any) -> Any:
    """A Strands ``gen_ai.choice`` event's message (a JSON list of content blocks,
    ``[{"text": ...}]``) as its text; None when absent, as it is when not blocks."""
    if not isinstance(message, str):
        return message
    try:
        blocks = orjson.loads(message)
    except orjson.JSONDecodeError:
        return message
    if (
        isinstance(blocks, list)
        and blocks
        and all(isinstance(b, dict) and isinstance(b.get("text"), str) for b in blocks)
    ):
        return "\n".join(b["text"] for b in blocks)
    return message


# OpenLLMetry's LangChain instrumentation records a tool's input as LangChain's callback
# envelope (the input string, tags, metadata with the graph step and checkpoint, the inputs,
# kwargs with the call id): the call is its `inputs`, or the step counter and ids would make
# every call unique
_LC_ENVELOPE = frozenset({"input_str", "inputs"})


def _langchain_inputs(args: Any) -> Any:
    if isinstance(args, dict) and _LC_ENVELOPE <= args.keys() and isinstance(args["inputs"], dict):
        return args["inputs"]
    return args


def _langchain_output(result: Any) -> Any:
    """OpenLLMetry's LangChain tool output, ``{"output": <a serialized ToolMessage>}``, as the
    message's content (the message also holds the call id); anything else as it is."""
    if not isinstance(result, str) or not result.startswith('{"output"'):
        return result
    try:
        doc = orjson.loads(result)
    except orjson.JSONDecodeError:
        return result
    out = doc.get("output") if isinstance(doc, dict) else None
    kw = out.get("kwargs") if isinstance(out, dict) and out.get("lc") is not None else None
    if isinstance(kw, dict) and "content" in kw:
        return kw["content"]
    return result


def _reply_text(messages: Any) -> str:
    """The text parts of a model call's ``gen_ai.output.messages`` (semconv 1.37+: a JSON list
    of ``{"role", "parts": [{"type": "text", "content"}...]}``); "" when not recorded."""
    if isinstance(messages, str):
        try:
            messages = orjson.loads(messages)
        except orjson.JSONDecodeError:
            return ""
    if not isinstance(messages, list):
        return ""
    texts = [
        p["content"]
        for m in messages
        if isinstance(m, dict) and isinstance(m.get("parts"), list)
        for p in m["parts"]
        if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("content"), str)
    ]
    return "\n".join(texts)


def sniff(doc: Any) -> bool:
    """OTLP JSON: a resourceSpans list."""
    first = doc[0] if isinstance(doc, list) and doc else doc
    return isinstance(first, dict) and isinstance(first.get("resourceSpans"), list)
