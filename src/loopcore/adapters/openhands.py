"""OpenHands event streams: a list of events (the ``/events`` API, a trajectory export, a JSONL
of events, ``{"events": [...]}``, or a folder of numbered event files read as one stream).

V0 events: actions (``{"id", "source": "agent", "action": "run"|"read"|"edit"|..., "args":
{...}, "tool_call_metadata": {"function_name", "tool_call_id", "model_response": {"id",
"usage"}}}``) and observations (``{"observation": ..., "cause": <action id>, "content",
"extras": {"metadata": {"exit_code"}}}``). Calls from one model response (same
``model_response.id``) share a turn and its usage. ``args`` keep what the tool was asked
(``thought``, ``security_risk`` and other bookkeeping are dropped so repeats hash equal).
V1 SDK events (``kind: ActionEvent / ObservationEvent``) are read the same way from
``tool_name``, ``action``, ``llm_response_id``, ``action_id`` and ``observation``.
"""
from __future__ import annotations

from typing import Any

from ._base import Ledger, Trace, text_len, text_of
from ._io import Ctx

NAME = "openhands"
PROFILE = "openhands"

_TOOL_ACTIONS = frozenset({"run", "read", "write", "edit", "run_ipython", "browse", "browse_interactive",
                           "delegate", "think", "finish", "mcp", "call_tool_mcp"})
_NOISE_ARGS = frozenset({"thought", "security_risk", "confirmation_state", "is_confirmed", "impl_source",
                         "blocking", "hidden", "is_input", "kind", "reasoning_content", "summary"})
_SKIP_OBS = frozenset({"agent_state_changed", "null", "recall", "agent_condensation", "user_rejected_observation"})


def _clean(args: Any) -> Any:
    if isinstance(args, dict):
        return {k: v for k, v in args.items() if k not in _NOISE_ARGS}
    return args


def _v0(events: list, ctx: Ctx, ledger: Ledger) -> None:
    by_id: dict[Any, Any] = {}
    last_response = None
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            ctx.bad(f"an event must be an object, got {type(e).__name__}", i)
            continue
        if "action" in e:
            action = e.get("action")
            tcm = e.get("tool_call_metadata") if isinstance(e.get("tool_call_metadata"), dict) else None
            if e.get("source") != "agent" or (action not in _TOOL_ACTIONS and tcm is None):
                ledger.context(text_len(e.get("message") if action != "message" else (e.get("args") or {}).get("content")))
                continue
            resp = tcm.get("model_response") if tcm else None
            rid = resp.get("id") if isinstance(resp, dict) else None
            if rid is None or rid != last_response:
                ledger.turn(resp.get("usage") if isinstance(resp, dict) else None)
                last_response = rid
            args = _clean(e.get("args") or {})
            name = (tcm.get("function_name") if tcm else None) or action
            # The action type says what happened (read / edit / run) more reliably than the
            # function name (str_replace_editor does both); MCP calls keep their own tool name.
            by_action = action in _TOOL_ACTIONS and action not in ("mcp", "call_tool_mcp")
            kind, target = ledger.profile.classify(action if by_action else name, args)
            step = ledger.call(name, args, tcm.get("tool_call_id") if tcm else None, kind=kind, target=target)
            by_id[e.get("id")] = step
        elif "observation" in e:
            obs = e.get("observation")
            if obs in _SKIP_OBS:
                continue
            step = by_id.pop(e.get("cause"), None) if e.get("cause") is not None else None
            if step is None:
                tcm = e.get("tool_call_metadata")
                step = ledger.pair(tcm.get("tool_call_id") if isinstance(tcm, dict) else None)
            content = e.get("content")
            if step is None:
                if e.get("source") == "agent" or obs == "error":
                    ledger.orphans += 1
                ledger.context(text_len(content))
                continue
            extras = e.get("extras") if isinstance(e.get("extras"), dict) else {}
            md = extras.get("metadata") if isinstance(extras.get("metadata"), dict) else {}
            rc = md.get("exit_code", extras.get("exit_code"))
            if rc is not None:
                step.meta["returncode"] = rc
            ledger.result(step, content, content if obs == "error" else None)


def _v1(events: list, ctx: Ctx, ledger: Ledger) -> None:
    by_id: dict[Any, Any] = {}
    last_response = None
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            ctx.bad(f"an event must be an object, got {type(e).__name__}", i)
            continue
        kind = e.get("kind")
        if kind == "ActionEvent":
            rid = e.get("llm_response_id")
            if rid is None or rid != last_response:
                ledger.turn(None)
                last_response = rid
            name = e.get("tool_name") or "unknown"
            args = _clean(e.get("action") or {})
            step = ledger.call(name, args, e.get("tool_call_id"))
            by_id[e.get("id")] = step
        elif kind in ("ObservationEvent", "AgentErrorEvent", "UserRejectObservation"):
            step = by_id.pop(e.get("action_id"), None) or ledger.pair(e.get("tool_call_id"), e.get("tool_name"))
            obs = e.get("observation") if isinstance(e.get("observation"), dict) else {}
            content = obs.get("content", obs.get("output", e.get("error")))
            content = text_of(content)
            if step is None:
                ledger.orphans += 1
                ledger.context(text_len(content))
                continue
            if obs.get("exit_code") is not None:
                step.meta["returncode"] = obs.get("exit_code")
            err = e.get("error") if kind == "AgentErrorEvent" else (content if obs.get("is_error") else None)
            ledger.result(step, content, err)
        elif kind == "MessageEvent":
            msg = e.get("llm_message") if isinstance(e.get("llm_message"), dict) else {}
            ledger.context(text_len(text_of(msg.get("content"))))


def _is_run_record(r: Any) -> bool:
    """An evaluation output record (output.jsonl): ``{"instance_id", "history": [events]}``."""
    return isinstance(r, dict) and isinstance(r.get("history"), list) and any(_is_event(e) for e in r["history"][:20])


def parse(doc: Any, ctx: Ctx) -> list[Trace]:
    """One trace from an event stream; one per record of an evaluation output.jsonl."""
    if isinstance(doc, list) and doc and _is_run_record(doc[0]):
        traces = []
        for n, r in enumerate(doc):
            if not _is_run_record(r):
                ctx.bad("an evaluation record needs a history list of events", n)
                continue
            t = _parse_stream(r, ctx)
            t.source = f"{ctx.path}#{n}" if ctx.path else f"#{n}"
            traces.append(t)
        return traces
    return [_parse_stream(doc, ctx)]


def _parse_stream(doc: Any, ctx: Ctx) -> Trace:
    session = ctx.stem
    events = doc
    if isinstance(doc, dict):
        if isinstance(doc.get("events"), list):
            events = doc["events"]
            session = str(doc.get("id") or doc.get("conversation_id") or session)
        elif isinstance(doc.get("history"), list):
            events = doc["history"]
            session = str(doc.get("instance_id") or session)
        else:
            events = [doc]
    ledger = Ledger(session, ctx.profile(PROFILE))
    if any(isinstance(e, dict) and "kind" in e and "action" not in e and "observation" not in e or
           isinstance(e, dict) and e.get("kind") in ("ActionEvent", "ObservationEvent") for e in events[:20]):
        _v1(events, ctx, ledger)
    else:
        _v0(events, ctx, ledger)
    return ledger.trace(source=ctx.path, fmt=NAME)


def _is_event(e: Any) -> bool:
    if not isinstance(e, dict):
        return False
    if e.get("kind") in ("ActionEvent", "ObservationEvent", "MessageEvent", "SystemPromptEvent"):
        return True
    return ("action" in e and "args" in e and "source" in e) or ("observation" in e and ("cause" in e or "content" in e))


def sniff(doc: Any) -> bool:
    """Event objects (V0 action/observation or V1 kinds), bare or under events/history."""
    if isinstance(doc, dict):
        if isinstance(doc.get("events"), list):
            return any(_is_event(e) for e in doc["events"][:20])
        if isinstance(doc.get("history"), list) and any(_is_event(e) for e in doc["history"][:20]):
            return True
        return _is_event(doc)
    return isinstance(doc, list) and (any(_is_event(e) for e in doc[:20]) or bool(doc) and _is_run_record(doc[0]))
