"""gemini-cli trajectories: the chat recording (``~/.gemini/tmp/<project>/chats/session-*.json``)
and ``/chat save`` checkpoints (a list of Gemini ``Content``).

Recording: ``{"sessionId", "projectHash", "messages": [{"type": "user"|"gemini", "content",
"toolCalls": [{"id", "name", "args", "result", "status"}], "tokens": {"input", "output",
"cached", "thoughts", "tool", "total"}}]}``; each gemini message is one API call whose tool
calls carry their own results; ``status: "error"`` (or "cancelled") marks a failed call.
Checkpoint: ``[{"role": "user"|"model", "parts": [{"text"} | {"functionCall": {"id", "name",
"args"}} | {"functionResponse": {"id", "name", "response": {"output"|"error"}}}]}]``.
"""
from __future__ import annotations

from typing import Any

from ._base import Ledger, Trace, text_len
from ._io import Ctx

NAME = "gemini-cli"
PROFILE = "gemini-cli"


def _response_value(resp: Any) -> tuple[Any, Any]:
    """(result, error) of a functionResponse.response."""
    if isinstance(resp, dict):
        if "error" in resp and resp.get("error"):
            return resp.get("error"), resp.get("error")
        if "output" in resp:
            return resp.get("output"), None
    return resp, None


def _result_parts(result: Any) -> tuple[Any, Any]:
    """A recorded tool result (a PartListUnion) as (result, error)."""
    parts = result if isinstance(result, list) else [result]
    texts = []
    for p in parts:
        if isinstance(p, dict) and isinstance(p.get("functionResponse"), dict):
            return _response_value(p["functionResponse"].get("response"))
        if isinstance(p, dict) and isinstance(p.get("text"), str):
            texts.append(p["text"])
        elif isinstance(p, str):
            texts.append(p)
    if texts:
        return "\n".join(texts), None
    return result, None


def _recording(doc: dict, ctx: Ctx, ledger: Ledger) -> None:
    for i, m in enumerate(doc.get("messages") or []):
        if not isinstance(m, dict):
            ctx.bad(f"a message must be an object, got {type(m).__name__}", i)
            continue
        if m.get("type") != "gemini":
            ledger.context(text_len(m.get("content")))
            continue
        ledger.turn(m.get("tokens"))
        for tc in m.get("toolCalls") or []:
            if not isinstance(tc, dict) or not isinstance(tc.get("name"), str):
                ctx.bad("a tool call without a name", i)
                continue
            step = ledger.call(tc["name"], tc.get("args"), tc.get("id"))
            result, error = _result_parts(tc.get("result"))
            status = tc.get("status")
            if status in ("error", "cancelled") and error is None:
                error = tc.get("resultDisplay") or status
            ledger.result(step, result, error)


def _contents(doc: list, ctx: Ctx, ledger: Ledger) -> None:
    for i, c in enumerate(doc):
        if not isinstance(c, dict):
            ctx.bad(f"a Content must be an object, got {type(c).__name__}", i)
            continue
        parts = c.get("parts") or []
        if c.get("role") == "model":
            ledger.turn(c.get("usageMetadata"))
            for p in parts:
                fc = p.get("functionCall") if isinstance(p, dict) else None
                if isinstance(fc, dict) and isinstance(fc.get("name"), str):
                    ledger.call(fc["name"], fc.get("args"), fc.get("id"))
            continue
        for p in parts:
            if not isinstance(p, dict):
                continue
            fr = p.get("functionResponse")
            if isinstance(fr, dict):
                step = ledger.pair(fr.get("id"), fr.get("name"))
                result, error = _response_value(fr.get("response"))
                if step is None:
                    ledger.orphans += 1
                    ledger.context(text_len(result))
                    continue
                ledger.result(step, result, error)
            else:
                ledger.context(text_len(p.get("text")))


def parse(doc: Any, ctx: Ctx) -> list[Trace]:
    """One trace from a gemini-cli recording or checkpoint."""
    if isinstance(doc, dict):
        ledger = Ledger(str(doc.get("sessionId") or ctx.stem), ctx.profile(PROFILE))
        _recording(doc, ctx, ledger)
    else:
        ledger = Ledger(ctx.stem, ctx.profile(PROFILE))
        _contents(doc, ctx, ledger)
    return [ledger.trace(source=ctx.path, fmt=NAME)]


def sniff(doc: Any) -> bool:
    """A recording (messages of type user/gemini) or a list of role user/model Contents with parts."""
    if isinstance(doc, dict):
        msgs = doc.get("messages")
        return isinstance(msgs, list) and any(isinstance(m, dict) and m.get("type") == "gemini" for m in msgs) or (
            "projectHash" in doc and isinstance(msgs, list))
    return isinstance(doc, list) and any(isinstance(c, dict) and c.get("role") in ("user", "model") and isinstance(c.get("parts"), list) for c in doc[:20])
