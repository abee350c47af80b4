"""Claude Code session JSONL (``~/.claude/projects/<project>/<sessionId>.jsonl``) and the
``--output-format stream-json`` stream, which has the same record shape.

Each line is a record: ``type`` (user / assistant / summary / system...), ``uuid``,
``parentUuid``, ``sessionId`` (``session_id`` in stream-json), ``message`` (an Anthropic
message). One API message is split over several lines, one content block each, all with the
same ``message.id`` and a copy of ``message.usage``: its usage is counted once (the last copy
wins, it is the complete one). Sidechain records (``isSidechain``, sub-agents) form their own
trace, ``<sessionId>/sidechain``.
"""
from __future__ import annotations

from typing import Any

from ._base import Ledger, Trace
from ._io import Ctx
from .anthropic import add_assistant_blocks, add_user_blocks

NAME = "claude-code"
PROFILE = "claude-code"
_RECORD_TYPES = frozenset({"user", "assistant"})


def parse(doc: Any, ctx: Ctx) -> list[Trace]:
    """One trace per session (and per sidechain) in the file, in order of first appearance."""
    records = doc if isinstance(doc, list) else [doc]
    profile = ctx.profile(PROFILE)
    ledgers: dict[str, Ledger] = {}
    last_msg_id: dict[str, Any] = {}
    for i, r in enumerate(records):
        if not isinstance(r, dict):
            ctx.bad(f"a record must be an object, got {type(r).__name__}", i)
            continue
        rtype = r.get("type")
        if rtype not in _RECORD_TYPES:
            continue
        msg = r.get("message")
        if not isinstance(msg, dict):
            ctx.bad(f"a {rtype} record without a message object", i)
            continue
        sid = str(r.get("sessionId") or r.get("session_id") or ctx.stem)
        key = sid + "/sidechain" if r.get("isSidechain") else sid
        ledger = ledgers.get(key)
        if ledger is None:
            ledger = ledgers[key] = Ledger(key, profile)
        if rtype == "assistant":
            mid = msg.get("id")
            if mid is not None and mid == last_msg_id.get(key) and ledger.turns:
                ledger.set_usage(msg.get("usage"))
            else:
                ledger.turn(msg.get("usage"))
                last_msg_id[key] = mid
            add_assistant_blocks(msg.get("content"), ledger, ctx, i)
        else:
            add_user_blocks(msg.get("content"), ledger, ctx, i)
    traces = [lg.trace(source=ctx.path, fmt=NAME) for lg in ledgers.values()]
    if len(traces) > 1 and ctx.path:
        for n, t in enumerate(traces):
            t.source = f"{ctx.path}#{n}"
    return traces


def sniff(records: list) -> bool:
    """Records with type user/assistant, a message object and a session or uuid field."""
    for r in records[:50]:
        if isinstance(r, dict) and r.get("type") in _RECORD_TYPES and isinstance(r.get("message"), dict) and (
            "sessionId" in r or "uuid" in r or "session_id" in r
        ):
            return True
    return False
