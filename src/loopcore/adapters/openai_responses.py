"""OpenAI Responses items: ``function_call`` answered by ``function_call_output`` (same
``call_id``), plus ``custom_tool_call`` and ``local_shell_call`` and their outputs.

Accepts a list of items (a conversation / ``input`` array), a Response object
(``{"object": "response", "output": [...], "usage": {...}}``) or a list of them, a dict with
``input`` and/or ``output`` lists, and Codex CLI rollout JSONL (records ``{"type":
"response_item", "payload": item}``, ``session_meta`` giving the session id and ``event_msg``
``token_count`` events giving each API call's usage). Consecutive model-side items (reasoning,
assistant messages, calls) form one API call. Codex shell outputs (``{"output": ...,
"metadata": {"exit_code": N}}`` as a JSON string) keep the output text as the result and the
exit code in ``meta["returncode"]``. Outside Codex rollouts, every step's ``ref`` is the record that started its API call
(``{"line": n}`` in a JSONL file, else ``{"message": i}``); the first step of a turn carries the
assistant message text and reasoning summaries, a turn without calls is a step of its own, and
a ``function_call`` whose arguments are not JSON is rejected.
"""

from __future__ import annotations

from typing import Any

from ._base import Ledger, Trace, record_ref
from ._io import Ctx
from ._walk import (
    RESPONSES_BUILTIN_CALLS,
    RESPONSES_CALLS,
    RESPONSES_OUTPUTS,
    ResponsesWalker,
    call_unparsed,
    rollout_session,
)

NAME = "openai-responses"
PROFILE = "codex"

_CALLS = RESPONSES_CALLS | RESPONSES_BUILTIN_CALLS
_OUTPUTS = RESPONSES_OUTPUTS
ITEM_TYPES = _CALLS | _OUTPUTS | {"reasoning", "message"}
_ROLLOUT_TYPES = frozenset(
    {"response_item", "session_meta", "event_msg", "turn_context", "compacted"}
)


class _Walker(ResponsesWalker):
    rollout = False  # a Codex CLI rollout: its own accounting (no reply text, no refs)

    def ref(self, i: int) -> dict | None:
        return None if self.rollout else record_ref(self.ctx.lines, i)

    def function_call(self, name: str, args: Any, ok: bool, call_id: Any, i: int) -> None:
        if ok:
            self.ledger.call(name, args, call_id)
            return
        call_unparsed(self.ledger, name, args, call_id)

    def answered(self, step: Any, result: Any, facts: dict) -> None:
        super().answered(step, result, facts)
        if step.rejected is not None and isinstance(result, str) and result:
            step.rejected = result  # the harness's own answer


def parse(doc: Any, ctx: Ctx) -> list[Trace]:
    """One trace from Responses items, Response objects or a Codex rollout."""
    session = ctx.stem
    records = doc if isinstance(doc, list) else [doc]
    meta = rollout_session(records)
    if meta is not None:
        session = str(meta.get("id") or session)
    ledger = Ledger(session, ctx.profile(PROFILE))
    w = _Walker(ledger, ctx)
    for i, r in enumerate(records):
        if not isinstance(r, dict):
            ctx.bad(f"an item must be an object, got {type(r).__name__}", i)
            continue
        rtype = r.get("type")
        if rtype in _ROLLOUT_TYPES:
            w.rollout = True
            w.with_text = False
            payload = r.get("payload")
            if not isinstance(payload, dict):
                continue
            w.rollout_record(rtype, payload, i)
            continue
        if r.get("object") == "response" or (isinstance(r.get("output"), list) and "type" not in r):
            # A request/response pair: its input items first, then one API call's output.
            for _j, it in enumerate(r.get("input") or []):
                if isinstance(it, dict):
                    w.item(it, i)
            w.model_side = False
            w.start_turn(i, r.get("usage"))
            for it in r.get("output") or []:
                if isinstance(it, dict):
                    w.item(it, i)
            w.model_side = False
            continue
        if isinstance(r.get("input"), list) and "type" not in r:
            for it in r["input"]:
                if isinstance(it, dict):
                    w.item(it, i)
            continue
        w.item(r, i)
    return [ledger.trace(source=ctx.path, fmt=NAME)]


def sniff(records: list) -> bool:
    """Responses items, Response objects or Codex rollout records."""
    for r in records[:50]:
        if not isinstance(r, dict):
            continue
        t = r.get("type")
        if t in _ROLLOUT_TYPES and "payload" in r:
            return True
        if r.get("object") == "response" or t in _CALLS or t in _OUTPUTS:
            return True
        if isinstance(r.get("output"), list) and any(
            isinstance(x, dict) and x.get("type") in ITEM_TYPES for x in r["output"]
        ):
            return True
        if isinstance(r.get("input"), list) and any(
            isinstance(x, dict) and x.get("type") in _CALLS | _OUTPUTS for x in r["input"]
        ):
            return True
    return False
