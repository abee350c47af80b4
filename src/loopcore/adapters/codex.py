"""Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl``).

Each line is ``{"timestamp", "type", "payload"}``: ``session_meta`` (the session id, cwd,
``cli_version``), ``turn_context``, ``response_item`` (a Responses API item: ``message``,
``reasoning``, ``function_call`` / ``function_call_output``, ``custom_tool_call`` /
``custom_tool_call_output``, ``local_shell_call``, ``web_search_call``...), ``event_msg`` (UI
events; ``token_count`` carries each API call's ``last_token_usage``) and ``compacted``.
Consecutive model-side items form one API call. Tool outputs go through the ``codex`` output
normaliser (taxonomy/profiles.py): the per-call header (``Chunk ID``, ``Wall time``, ``Process
exited with code N``, ``Original token count``) is removed, the exit code kept in
``meta["returncode"]``. A ``web_search_call`` is an observe step answered inside the API call.
Arguments that are not JSON, and calls the harness answered "unsupported call", are rejected
turns (nothing ran). ``yield_time_ms``, ``max_output_tokens`` and ``justification`` are dropped
from the arguments (they shape the answer, not what runs). Every step's ``ref`` is ``{"line": N}``.
"""

from __future__ import annotations

from typing import Any

import orjson

from ..taxonomy.profiles import normalise_output
from ._base import Ledger, Trace, parse_args, text_len, text_of
from ._io import Ctx

NAME = "codex"
PROFILE = "codex"

RECORD_TYPES = frozenset(
    {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}
)
_CALLS = frozenset({"function_call", "custom_tool_call", "local_shell_call", "web_search_call"})
_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output", "local_shell_call_output"})
#: response_item payload types that are read (calls, outputs, text) or knowingly passed over.
ITEM_TYPES = (
    _CALLS
    | _OUTPUTS
    | frozenset(
        {
            "message",
            "reasoning",
            "ghost_snapshot",
            "compaction",
            "compaction_summary",
            "image_generation_call",
            "tool_search_call",
            "tool_search_output",
            "other",
        }
    )
)
# Arguments that shape how output comes back, not what runs: dropped so repeats compare equal.
_NOISE_ARGS = frozenset({"yield_time_ms", "max_output_tokens", "justification"})
_REJECT_PREFIXES = (
    "unsupported call",
    "failed to parse function arguments",
    "unsupported custom tool call",
)


def _output(raw: Any) -> tuple[Any, dict]:
    """An output's text and facts: Codex wraps shell outputs in a JSON string
    ``{"output", "metadata": {"exit_code"}}`` (older CLIs) or a text header (newer ones)."""
    facts: dict = {}
    if isinstance(raw, str) and raw.startswith("{") and '"metadata"' in raw:
        try:
            d = orjson.loads(raw)
        except orjson.JSONDecodeError:
            d = None
        if isinstance(d, dict) and "output" in d:
            md = d.get("metadata")
            if isinstance(md, dict) and "exit_code" in md:
                facts["returncode"] = md["exit_code"]
            raw = d["output"]
    if isinstance(raw, dict) and "content" in raw:
        raw = raw["content"]
    text = text_of(raw)
    if isinstance(raw, list) and isinstance(text, list):
        # content items ({"type": "input_text", "text"} / images): keep the text of the text items
        texts = [
            p.get("text") for p in raw if isinstance(p, dict) and isinstance(p.get("text"), str)
        ]
        if texts and len(texts) == len(raw):
            text = "\n".join(texts)
    body, more = normalise_output(PROFILE, text)
    facts.update(more)
    return body, facts


def _reasoning_text(item: dict) -> str:
    parts = []
    for key in ("summary", "content"):
        v = item.get(key)
        if isinstance(v, list):
            for p in v:
                if isinstance(p, dict) and isinstance(p.get("text"), str):
                    parts.append(p["text"])
    return "\n".join(parts)


class _Walker:
    def __init__(self, ledger: Ledger, ctx: Ctx) -> None:
        self.ledger = ledger
        self.ctx = ctx
        self.model_side = False
        self.turn_has_usage = False

    def ref(self, i: int) -> dict:
        lines = self.ctx.lines
        return {"line": lines[i] if lines is not None and i < len(lines) else i + 1}

    def start_turn(self, i: int) -> None:
        self.ledger.turn(None, text="", ref=self.ref(i))
        self.model_side = True
        self.turn_has_usage = False

    def usage(self, usage: Any) -> None:
        if self.ledger.turns and not self.turn_has_usage:
            self.ledger.set_usage(usage)
            self.turn_has_usage = True

    def item(self, it: dict, i: int) -> None:
        t = it.get("type")
        if t is not None and not isinstance(t, str):
            self.ctx.bad(f"a response item whose type is {type(t).__name__}, not a string", i)
            return
        role = it.get("role")
        if t in _CALLS or t == "reasoning" or (t == "message" and role == "assistant"):
            if not self.model_side:
                self.start_turn(i)
            self.model_item(it, t, i)
            return
        self.model_side = False
        if t in _OUTPUTS:
            self.output(it, i)
        elif t == "message" or role is not None:
            self.ledger.context(text_len(text_of(it.get("content"))))
        elif t not in ITEM_TYPES:
            self.ctx.bad(
                f"a response_item of type {t!r} this reader does not know; expected one of "
                f"{', '.join(sorted(ITEM_TYPES))}",
                i,
            )

    def model_item(self, it: dict, t: str, i: int) -> None:
        ledger = self.ledger
        ref = self.ref(i)
        if t == "reasoning":
            text = _reasoning_text(it)
            if text:
                ledger.add_text(text)
            return
        if t == "message":
            text = text_of(it.get("content"))
            if isinstance(text, str) and text:
                ledger.add_text(text)
            return
        cid = it.get("call_id") or it.get("id")
        if t == "function_call":
            name = it.get("name")
            if not isinstance(name, str):
                self.ctx.bad("a function_call without a name", i)
                return
            args, ok = parse_args(it.get("arguments"))
            if isinstance(args, dict) and not _NOISE_ARGS.isdisjoint(args):
                args = {k: v for k, v in args.items() if k not in _NOISE_ARGS}
            ledger.call(name, args, cid, meta=None if ok else {"unparsed_args": True}, ref=ref)
        elif t == "custom_tool_call":
            name = it.get("name")
            if not isinstance(name, str):
                self.ctx.bad("a custom_tool_call without a name", i)
                return
            ledger.call(name, {"input": it.get("input")}, cid, ref=ref)
        elif t == "local_shell_call":
            action = it.get("action") if isinstance(it.get("action"), dict) else {}
            args = {k: v for k, v in action.items() if k != "type"}
            ledger.call("local_shell", args, cid, ref=ref)
        elif t == "web_search_call":
            action = it.get("action") if isinstance(it.get("action"), dict) else {}
            args = {k: v for k, v in action.items() if v is not None}
            step = ledger.call("web_search", args, cid, ref=ref)
            # The search ran inside the API call: its results reached the model there, unseen.
            ledger.result(
                step,
                None,
                None if it.get("status") in (None, "completed") else it.get("status"),
                chars=0,
            )

    def output(self, it: dict, i: int) -> None:
        ledger = self.ledger
        step = ledger.pair(it.get("call_id"))
        result, facts = _output(it.get("output"))
        if step is None:
            ledger.orphans += 1
            ledger.context(text_len(result))
            return
        if facts.get("returncode") is not None:
            step.meta["returncode"] = facts["returncode"]
        if facts.get("exec_session") is not None:
            step.meta["exec_session"] = facts["exec_session"]
        if isinstance(result, str) and (
            step.meta.get("unparsed_args") or result.startswith(_REJECT_PREFIXES)
        ):
            # The harness refused the call before running it.
            step.rejected = result
            step.kind = "other"
            step.target = None
        ledger.result(step, result)


def parse(doc: Any, ctx: Ctx) -> list[Trace]:
    """One trace from a Codex rollout."""
    records = doc if isinstance(doc, list) else [doc]
    session = ctx.stem
    version = None
    for r in records[:5]:
        if (
            isinstance(r, dict)
            and r.get("type") == "session_meta"
            and isinstance(r.get("payload"), dict)
        ):
            p = r["payload"]
            session = str(p.get("id") or session)
            version = p.get("cli_version")
            break
        if _is_old_header(r):
            session = str(r.get("id") or session)
            break
    ledger = Ledger(session, ctx.profile(PROFILE))
    w = _Walker(ledger, ctx)
    for i, r in enumerate(records):
        if not isinstance(r, dict):
            ctx.bad(f"a record must be an object, got {type(r).__name__}", i)
            continue
        rtype = r.get("type")
        payload = r.get("payload")
        if rtype is not None and not isinstance(rtype, str):
            ctx.bad(f"a rollout record whose type is {type(rtype).__name__}, not a string", i)
            continue
        if rtype not in RECORD_TYPES:
            if rtype is None and ("record_type" in r or _is_old_header(r)):
                continue  # older rollouts: a header line and state lines
            if rtype in ITEM_TYPES:
                w.item(r, i)  # pre-2025-09 rollouts: bare response items
                continue
            ctx.bad(
                f"a rollout record of type {rtype!r} this reader does not know; expected one of "
                f"{', '.join(sorted(RECORD_TYPES))}",
                i,
            )
            continue
        if not isinstance(payload, dict):
            continue
        if rtype == "response_item":
            w.item(payload, i)
        elif rtype == "event_msg" and payload.get("type") == "token_count":
            info = payload.get("info")
            if isinstance(info, dict) and isinstance(info.get("last_token_usage"), dict):
                w.usage(info["last_token_usage"])
        elif rtype == "compacted":
            w.model_side = False
    meta = {"cli_version": version} if version else None
    return [ledger.trace(source=ctx.path, fmt=NAME, meta=meta)]


def _is_old_header(r: Any) -> bool:
    """The first line of a rollout written before the typed records (2025): ``{"id",
    "timestamp", "instructions", "git"?}``."""
    return (
        isinstance(r, dict)
        and "id" in r
        and "timestamp" in r
        and "instructions" in r
        and "type" not in r
    )


def sniff(records: list) -> bool:
    """Rollout records: ``{"type": <rollout record type>, "payload": {...}}``, or an older
    rollout's header line followed by bare items."""
    if (
        records
        and _is_old_header(records[0])
        and any(
            isinstance(r, dict) and isinstance(r.get("type"), str) and r["type"] in ITEM_TYPES
            for r in records[1:50]
        )
    ):
        return True
    for r in records[:50]:
        if (
            isinstance(r, dict)
            and isinstance(r.get("type"), str)
            and r["type"] in RECORD_TYPES
            and isinstance(r.get("payload"), dict)
        ):
            return True
    return False
