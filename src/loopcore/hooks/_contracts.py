"""The three harnesses' hook contracts: what their events look like, what an answer must be.

Each harness runs a command hook per tool call with one JSON event on stdin and reads the
answer from stdout (docs/hooks/claude.md, codex.md, gemini.md):

* Claude Code: ``PreToolUse`` (answer), ``PostToolUse`` / ``PostToolUseFailure`` (outcome).
  Allow is no output; a warning is ``hookSpecificOutput.additionalContext``; a block is
  ``hookSpecificOutput.permissionDecision: "deny"`` with ``permissionDecisionReason``.
* Codex: the same event and field names, with a strict output schema: any field it does not
  know makes the hook fail and the tool run, and ``permissionDecision`` may only be ``deny``
  (``allow`` and ``ask`` are rejected), so only the fields below are ever written.
* Gemini CLI: ``BeforeTool`` / ``AfterTool``; stdout is JSON and nothing else (an empty stdout
  makes it read stderr instead); a block is ``decision: "deny"`` with ``reason``. BeforeTool
  has no context field, so a warning is delivered on the call's AfterTool as
  ``hookSpecificOutput.additionalContext``.

This module is plain data and string work: it imports the stdlib json and collections only
(orjson's import costs a hook process more than it saves on one small event).
"""

from __future__ import annotations

import json
from collections import namedtuple

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from typing import Any

__all__ = ["HARNESSES", "Event", "Harness", "MalformedEvent", "answer", "fallback", "parse_event"]


#: name; profile: the loopcore.taxonomy profile that knows its tool names; pre / post / failure:
#: the event names (failure None when the harness sends none); json_only: stdout must always
#: hold a JSON object (Gemini CLI).
Harness = namedtuple("Harness", "name profile pre post failure json_only")


HARNESSES: dict[str, Harness] = {
    "claude": Harness(
        "claude", "claude-code", "PreToolUse", "PostToolUse", "PostToolUseFailure", False
    ),
    "codex": Harness("codex", "codex", "PreToolUse", "PostToolUse", None, False),
    "gemini": Harness("gemini", "gemini-cli", "BeforeTool", "AfterTool", None, True),
}


class MalformedEvent(ValueError):
    """The stdin event is not what the harness sends (the message says what is wrong)."""


#: One hook event: ``phase`` is "pre", "post", "failure" or None (an event the guard ignores);
#: ``args`` the tool input, ``result`` / ``error`` the outcome of a post / failure event.
Event = namedtuple("Event", "name phase session tool args call_id run_id result error")


def _text(doc: dict, key: str, required: bool = True) -> str | None:
    v = doc.get(key)
    if isinstance(v, str) and v:
        return v
    if v is None and not required:
        return None
    raise MalformedEvent(f"{key} must be a non-empty string, got {type(v).__name__}")


def parse_event(h: Harness, raw: bytes) -> Event:
    """Read one event of harness *h*; raises MalformedEvent naming the bad field."""
    try:
        doc = json.loads(raw)
    except ValueError as exc:  # json.JSONDecodeError, UnicodeDecodeError
        raise MalformedEvent(f"stdin is not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise MalformedEvent(f"the event must be a JSON object, got {type(doc).__name__}")
    name = _text(doc, "hook_event_name")
    if name == h.pre:
        phase = "pre"
    elif name == h.post:
        phase = "post"
    elif name == h.failure:
        phase = "failure"
    else:
        return Event(name, None, "", "", None, None, None, None, None)
    session = _text(doc, "session_id")
    tool = _text(doc, "tool_name")
    if "tool_input" not in doc:
        raise MalformedEvent("tool_input is missing")
    args = doc["tool_input"]
    call_id = _text(doc, "tool_use_id", required=False)
    # A subagent's calls (Claude Code, Codex) are counted on their own, inside the session.
    run_id = _text(doc, "agent_id", required=False)
    result: Any = None
    error: str | None = None
    if phase == "post":
        if "tool_response" not in doc:
            raise MalformedEvent("tool_response is missing")
        result = doc["tool_response"]
        if h.name == "gemini" and isinstance(result, dict):
            # {llmContent, returnDisplay, error?}: the model reads llmContent; returnDisplay is
            # the terminal's rendering of the same outcome.
            err = result.get("error")
            if err:
                error = (err.get("message") if isinstance(err, dict) else None) or _dump(err)
                result = None
            else:
                result = result.get("llmContent")
    elif phase == "failure":
        err = doc.get("error")
        error = err if isinstance(err, str) and err else "the tool failed"
    return Event(name, phase, session, tool, args, call_id, run_id, result, error)


def _dump(doc: Any) -> str:
    return json.dumps(doc, separators=(",", ":"))


def answer(h: Harness, ev: Event, action: str, message: str, context: str | None = None) -> str:
    """The stdout text for *ev* given the guard's *action* ("allow" / "warn" / "block").

    *context* is a warning to deliver on a post event (Gemini CLI's AfterTool).
    """
    if ev.phase == "pre":
        if action == "block":
            if h.json_only:
                return _dump({"decision": "deny", "reason": message})
            return _dump(
                {
                    "hookSpecificOutput": {
                        "hookEventName": h.pre,
                        "permissionDecision": "deny",
                        "permissionDecisionReason": message,
                    }
                }
            )
        if action == "warn" and not h.json_only:
            return _dump(
                {"hookSpecificOutput": {"hookEventName": h.pre, "additionalContext": message}}
            )
    elif ev.phase == "post" and context and h.json_only:
        return _dump(
            {"hookSpecificOutput": {"hookEventName": h.post, "additionalContext": context}}
        )
    return "{}" if h.json_only else ""


def fallback(h: Harness, phase: str | None, fail_closed: bool, why: str) -> str:
    """The stdout text when the guard could not decide: allow, or deny a pre call when fail-closed."""
    if fail_closed and phase in ("pre", None):
        reason = (
            f"BLOCKED: loopcore's loop guard could not check this call ({why}) and is configured "
            "fail-closed. Tell the user the guard needs attention."
        )
        if h.json_only:
            return _dump({"decision": "deny", "reason": reason})
        return _dump(
            {
                "hookSpecificOutput": {
                    "hookEventName": h.pre,
                    "permissionDecision": "deny",
                    "permissionDecisionReason": reason,
                }
            }
        )
    return "{}" if h.json_only else ""
