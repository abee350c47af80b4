"""Anthropic Messages: ``tool_use`` blocks in assistant messages, ``tool_result`` blocks in the
user message that follows.

Accepts a list of messages, ``{"messages": [...]}`` (a request body, optionally with the final
response under ``"response"``), or JSONL. An assistant message may carry the API ``usage``
(``input_tokens`` + ``cache_*_input_tokens`` is the prompt, ``output_tokens`` the completion)
when a logger stored whole responses. ``is_error: true`` on a result makes it an error. Every
step's ``ref`` is ``{"message": i}`` (its assistant message); the first step of a turn carries the
message's ``text`` and ``thinking`` blocks, and a message without ``tool_use`` is a step of its own.
"""

from __future__ import annotations

from typing import Any

from ._base import Ledger, Trace
from ._io import Ctx
from ._walk import ANTHROPIC_CALLS, anthropic_assistant_blocks, anthropic_user_blocks

NAME = "anthropic"
PROFILE = "generic"


def parse(doc: Any, ctx: Ctx) -> list[Trace]:
    """One trace from a list of Anthropic messages."""
    session = ctx.stem
    messages = doc
    if isinstance(doc, dict):
        messages = list(doc.get("messages") or [])
        if isinstance(doc.get("response"), dict):
            messages.append(doc["response"])
        session = str(doc.get("id") or session)
    ledger = Ledger(session, ctx.profile(PROFILE))
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            ctx.bad(f"a message must be an object, got {type(m).__name__}", i)
            continue
        role = m.get("role")
        if role == "assistant":
            ledger.turn(m.get("usage"), text="", ref={"message": i})
            anthropic_assistant_blocks(m.get("content"), ledger, ctx, i)
        elif role == "user":
            anthropic_user_blocks(m.get("content"), ledger)
    return [ledger.trace(source=ctx.path, fmt=NAME)]


#: Content block types only Anthropic messages have.
_BLOCKS = ANTHROPIC_CALLS | {"tool_result", "thinking", "redacted_thinking"}


def _has_blocks(m: Any) -> bool:
    c = m.get("content") if isinstance(m, dict) else None
    return isinstance(c, list) and any(
        isinstance(b, dict)
        and isinstance(b.get("type"), str)
        and (b["type"] in _BLOCKS or b["type"].endswith("_tool_result"))
        for b in c
    )


def sniff(records: list) -> bool:
    """Messages whose content lists hold Anthropic blocks (tool_use / tool_result, server
    tool calls and their results, thinking)."""
    return any(_has_blocks(m) for m in records[:200])


def sniff_request(doc: dict) -> bool:
    """A request body with the Messages API response beside it (``"response": {"type":
    "message"}``)."""
    r = doc.get("response")
    return (
        isinstance(r, dict) and r.get("type") == "message" and isinstance(doc.get("messages"), list)
    )
