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

import orjson

from ._base import Ledger, Trace, parse_args, record_ref, text_len, text_of
from ._io import Ctx

NAME = "openai-responses"
PROFILE = "codex"

_CALLS = frozenset({"function_call", "custom_tool_call", "local_shell_call"})
_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output", "local_shell_call_output"})
_MODEL_SIDE = _CALLS | {"reasoning"}
ITEM_TYPES = _CALLS | _OUTPUTS | {"reasoning", "message"}
_ROLLOUT_TYPES = frozenset(
    {"response_item", "session_meta", "event_msg", "turn_context", "compacted"}
)


def _output(raw: Any) -> tuple[Any, dict | None]:
    """The output text and metadata of a call output (Codex wraps it in a JSON string)."""
    if isinstance(raw, str) and raw.startswith("{") and '"metadata"' in raw:
        try:
            d = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return raw, None
        if isinstance(d, dict) and "output" in d:
            md = d.get("metadata")
            meta = (
                {"returncode": md["exit_code"]}
                if isinstance(md, dict) and "exit_code" in md
                else None
            )
            return d["output"], meta
    if isinstance(raw, dict) and "content" in raw:
        return text_of(raw["content"]), None
    return text_of(raw), None


class _Walker:
    def __init__(self, ledger: Ledger, ctx: Ctx) -> None:
        self.ledger = ledger
        self.ctx = ctx
        self.model_side = False  # the previous item came from the model
        self.turn_has_usage = False
        self.rollout = False  # a Codex CLI rollout

    def start_turn(self, usage: Any = None, index: int | None = None) -> None:
        if self.rollout:  # Codex rollouts keep their own accounting (no reply text, no refs)
            self.ledger.turn(usage)
        else:
            ref = record_ref(self.ctx.lines, index) if index is not None else None
            self.ledger.turn(usage, text="", ref=ref)
        self.model_side = True
        self.turn_has_usage = usage is not None

    def usage(self, usage: Any) -> None:
        """Usage reported after the items of an API call (Codex token_count events)."""
        if self.ledger.turns and not self.turn_has_usage:
            self.ledger.set_usage(usage)
            self.turn_has_usage = True

    def item(self, it: dict, index: int) -> None:
        t = it.get("type")
        role = it.get("role")
        if t in _MODEL_SIDE or (t == "message" and role == "assistant"):
            if not self.model_side:
                self.start_turn(index=index)
            if t == "message" and not self.rollout:
                text = text_of(it.get("content"))
                if isinstance(text, str) and text:
                    self.ledger.add_text(text)
                return
            if t == "reasoning" and not self.rollout:
                for part in it.get("summary") or ():
                    if (
                        isinstance(part, dict)
                        and isinstance(part.get("text"), str)
                        and part["text"]
                    ):
                        self.ledger.add_text(part["text"])
                return
            if t == "function_call":
                name = it.get("name")
                if not isinstance(name, str):
                    self.ctx.bad("a function_call without a name", index)
                    return
                raw = it.get("arguments")
                args, ok = parse_args(raw)
                if ok:
                    self.ledger.call(name, args, it.get("call_id") or it.get("id"))
                else:
                    # nothing can run a call whose arguments do not parse: the harness rejects it
                    bad = self.ledger.call(
                        name,
                        args,
                        it.get("call_id") or it.get("id"),
                        kind="other",
                        target=None,
                        meta={"unparsed_args": True},
                        reads=(),
                        writes=(),
                    )
                    bad.rejected = "arguments are not valid JSON"
            elif t == "custom_tool_call":
                name = it.get("name")
                if not isinstance(name, str):
                    self.ctx.bad("a custom_tool_call without a name", index)
                    return
                self.ledger.call(
                    name, {"input": it.get("input")}, it.get("call_id") or it.get("id")
                )
            elif t == "local_shell_call":
                action = it.get("action") if isinstance(it.get("action"), dict) else {}
                args = {k: v for k, v in action.items() if k != "type"}
                self.ledger.call("local_shell", args, it.get("call_id") or it.get("id"))
            return
        self.model_side = False
        if t in _OUTPUTS:
            step = self.ledger.pair(it.get("call_id"))
            result, meta = _output(it.get("output"))
            if step is None:
                self.ledger.orphans += 1
                self.ledger.context(text_len(result))
                return
            if meta:
                step.meta.update(meta)
            self.ledger.result(step, result)
            if step.rejected is not None and isinstance(result, str) and result:
                step.rejected = result  # the harness's own answer
        elif t == "message" or role is not None:
            self.ledger.context(text_len(text_of(it.get("content"))))


def parse(doc: Any, ctx: Ctx) -> list[Trace]:
    """One trace from Responses items, Response objects or a Codex rollout."""
    session = ctx.stem
    records = doc if isinstance(doc, list) else [doc]
    for r in records[:5]:
        if (
            isinstance(r, dict)
            and r.get("type") == "session_meta"
            and isinstance(r.get("payload"), dict)
        ):
            session = str(r["payload"].get("id") or session)
    ledger = Ledger(session, ctx.profile(PROFILE))
    w = _Walker(ledger, ctx)
    for i, r in enumerate(records):
        if not isinstance(r, dict):
            ctx.bad(f"an item must be an object, got {type(r).__name__}", i)
            continue
        rtype = r.get("type")
        if rtype in _ROLLOUT_TYPES:
            w.rollout = True
            payload = r.get("payload")
            if not isinstance(payload, dict):
                continue
            if rtype == "response_item":
                w.item(payload, i)
            elif rtype == "event_msg" and payload.get("type") == "token_count":
                info = payload.get("info")
                if isinstance(info, dict) and isinstance(info.get("last_token_usage"), dict):
                    w.usage(info["last_token_usage"])
            continue
        if r.get("object") == "response" or (isinstance(r.get("output"), list) and "type" not in r):
            # A request/response pair: its input items first, then one API call's output.
            for _j, it in enumerate(r.get("input") or []):
                if isinstance(it, dict):
                    w.item(it, i)
            w.model_side = False
            w.start_turn(r.get("usage"), i)
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
