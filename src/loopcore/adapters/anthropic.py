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

from ._base import Ledger, Trace, text_len, text_of
from ._io import Ctx

NAME = "anthropic"
PROFILE = "generic"


def result_content(block: dict) -> Any:
    """A tool_result block's content as text when it is text."""
    return text_of(block.get("content"))


def add_assistant_blocks(
    content: Any, ledger: Ledger, ctx: Ctx, index: int, *, with_text: bool = False
) -> None:
    """Record the tool_use blocks of an assistant message's content (and, with *with_text*,
    its text and thinking blocks as the turn's text)."""
    if not isinstance(content, list):
        if with_text and isinstance(content, str) and content:
            ledger.add_text(content)
        return
    for b in content:
        if with_text and isinstance(b, dict) and b.get("type") in ("text", "thinking"):
            t = b.get("text") if b.get("type") == "text" else b.get("thinking")
            if isinstance(t, str) and t:
                ledger.add_text(t)
            continue
        if isinstance(b, dict) and b.get("type") == "tool_use":
            name = b.get("name")
            if not isinstance(name, str):
                ctx.bad("a tool_use block without a name", index)
                continue
            ledger.call(name, b.get("input"), b.get("id"))


def add_user_blocks(content: Any, ledger: Ledger, ctx: Ctx, index: int) -> list:
    """Pair the tool_result blocks of a user message; other blocks are context. Returns the
    steps that received a result."""
    answered = []
    if not isinstance(content, list):
        ledger.context(text_len(content))
        return answered
    for b in content:
        if not isinstance(b, dict):
            continue
        if b.get("type") == "tool_result":
            step = ledger.pair(b.get("tool_use_id"))
            res = result_content(b)
            if step is None:
                ledger.orphans += 1
                ledger.context(text_len(res))
                continue
            err = None
            if b.get("is_error"):
                err = res if isinstance(res, str) and res else True
            ledger.result(step, res, err)
            answered.append(step)
        else:
            ledger.context(text_len(b.get("text")))
    return answered


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
            add_assistant_blocks(m.get("content"), ledger, ctx, i, with_text=True)
        elif role == "user":
            add_user_blocks(m.get("content"), ledger, ctx, i)
    return [ledger.trace(source=ctx.path, fmt=NAME)]


def _has_blocks(m: Any) -> bool:
    c = m.get("content") if isinstance(m, dict) else None
    return isinstance(c, list) and any(
        isinstance(b, dict) and b.get("type") in ("tool_use", "tool_result") for b in c
    )


def sniff(records: list) -> bool:
    """Messages whose content lists hold tool_use / tool_result blocks."""
    return any(_has_blocks(m) for m in records[:200])
