"""OpenHands event streams, all three generations.

* **V1** (the Software Agent SDK, the OpenHands CLI and app from 1.0): one JSON file per event,
  ``<conversation>/events/event-NNNNN-<event id>.json`` (a folder of them is read as one
  stream, whatever its name), a JSONL of events, a list, or ``{"events": [...]}``. Events have a
  ``kind``: ``ActionEvent`` (``tool_name``, ``tool_call_id``, ``action`` with the arguments,
  ``thought`` / ``reasoning_content``, ``llm_response_id``), ``ObservationEvent`` (``action_id``,
  ``observation`` with ``content`` and ``is_error``), ``AgentErrorEvent`` (a call the SDK
  refused: unknown tool, bad arguments; V0 says so with an ``error`` observation naming a
  ``FunctionCall...Error``), ``MessageEvent``, and ``ConversationStateUpdateEvent``
  whose ``stats`` carry the accumulated token usage (each call's usage is the growth since the
  update before). An agent OpenHands drives over ACP (Claude Code, Codex, Gemini CLI...) writes
  ``ACPToolCallEvent`` instead: one per update of a call (``tool_call_id``, ``title``,
  ``tool_kind`` of the ACP spec, ``status`` pending / in_progress / completed / failed,
  ``raw_input``, the output in ``content`` blocks or ``raw_output``, ``is_error``). A call is one
  step, named ``acp:<tool_kind>`` and placed at its first update, with the latest input and its
  final answer; the calls of a sub-agent (``parent_tool_call_id``) are a trace of their own,
  ``<conversation>/<parent call id>``, as the sub-agent has a context of its own.
* **V0** (the ``/events`` API, trajectory exports, evaluation ``output.jsonl``): actions
  (``{"id", "source", "action", "args", "tool_call_metadata": {"function_name",
  "tool_call_id", "model_response": {"id", "usage"}}}``) and observations (``{"observation",
  "cause": <action id>, "content", "extras"}``); calls of one model response share its usage.
* **2024 resolver output** (``output.jsonl`` of openhands-resolver): ``history`` holds the events
  as flat dataclass dicts (``{"action": "run", "command": ...}`` then ``{"observation": "run",
  "content": ..., "exit_code"}``) without ids: each observation answers the call before it.

``args`` keep what the tool was asked (``thought``, ``security_risk`` and other bookkeeping are
dropped so repeats hash equal). An edit answered "No replacement was performed" (or any
``ERROR:`` observation) is a failed call that changed nothing (``error`` set, ``no_op``).
"""

from __future__ import annotations

import os
from typing import Any

from ._base import Ledger, Trace, text_len, text_of
from ._io import Ctx

NAME = "openhands"
PROFILE = "openhands"

_TOOL_ACTIONS = frozenset(
    {
        "run",
        "read",
        "write",
        "edit",
        "run_ipython",
        "browse",
        "browse_interactive",
        "delegate",
        "think",
        "finish",
        "mcp",
        "call_tool_mcp",
        "condensation_request",
        "task_tracking",
    }
)
_NOISE_ARGS = frozenset(
    {
        "thought",
        "security_risk",
        "confirmation_state",
        "is_confirmed",
        "impl_source",
        "blocking",
        "hidden",
        "is_input",
        "kind",
        "reasoning_content",
        "summary",
        "keep_prompt",
        "wait_for_response",
        "images_urls",
        "include_extra",
        "action",
        "image_urls",
    }
)
_SKIP_OBS = frozenset(
    {
        "agent_state_changed",
        "null",
        "recall",
        "agent_condensation",
        "user_rejected_observation",
        "agent_think",
    }
)
#: V1 event kinds; anything else is reported (a newer SDK than this reader).
V1_KINDS = frozenset(
    {
        "ActionEvent",
        "ObservationEvent",
        "MessageEvent",
        "SystemPromptEvent",
        "AgentErrorEvent",
        "UserRejectObservation",
        "ConversationStateUpdateEvent",
        "PauseEvent",
        "Condensation",
        "CondensationRequest",
        "CondensationSummaryEvent",
        "ConversationErrorEvent",
        "HookExecutionEvent",
        "InterruptEvent",
        "LLMCompletionLogEvent",
        "StreamingDeltaEvent",
        "TokenEvent",
        "ACPToolCallEvent",
    }
)
# V1 browser tools that move from where the browser is (one page back, one screen down) and
# answer with an acknowledgement only ("Navigated back"): the same call again is the next move.
_RELATIVE_MOVES = frozenset({"browser_go_back", "browser_go_forward", "browser_scroll"})
_FAILED_EDIT = "No replacement was performed"
# Observations in which the harness refused to run the call at all (a rejected action).
_REFUSALS = ("Cannot execute multiple commands at once",)


def _refused_call(content: Any) -> bool:
    """A V0 error observation that answers no action: the agent could not make one of the
    model's reply (``FunctionCallValidationError``, ``FunctionCallNotExistsError``, a parameter
    that does not validate: ``Parameter 'command' is expected to be one of [...]``)."""
    if not isinstance(content, str):
        return False
    head = content.lstrip()[:300]
    return (
        "FunctionCall" in head
        or head.startswith(("Parameter '", "Missing required"))
        or "is not registered" in head
    )


def _refuse(step: Any, content: Any) -> None:
    """Mark *step* rejected when its observation is a refusal: nothing ran."""
    if isinstance(content, str) and content.lstrip().startswith(_REFUSALS):
        step.rejected = content
        step.kind = "other"
        step.target = None


def _clean(args: Any) -> Any:
    if isinstance(args, dict):
        return {k: v for k, v in args.items() if k not in _NOISE_ARGS}
    return args


# Edits that the tool reports it did not make (str_replace_editor; the V0 agent skills, which
# also revert an edit that breaks the file's syntax).
_NOT_APPLIED = (
    _FAILED_EDIT,
    "[No exact match found in",
    "[Your proposed edit has introduced new syntax error",
)


def _failed(content: Any) -> bool:
    """An observation that says the call failed: ``ERROR:`` text (V0 wraps tool errors so) or an
    edit that was not made."""
    if not isinstance(content, str):
        return False
    head = content.lstrip()[:200]
    return head.startswith("ERROR:") or any(x in head for x in _NOT_APPLIED)


def _mark_failure(step: Any, content: Any) -> Any:
    """The error of a step whose observation reports a failure (None otherwise); an edit that was
    not made changed nothing."""
    if not _failed(content):
        return None
    if step.kind == "mutate" and any(x in content[:400] for x in _NOT_APPLIED):
        step.no_op = True
    return content


# What an OpenHands run sends as the user when no person is there (the evaluation harnesses'
# fake user responses, the headless auto-continue of openhands.core.main, the SDK critic's
# retry of a task it predicts failed, sdk/critic/base.py and the CLI's iterative refinement,
# and the goal loop's follow-up after an audit, sdk/conversation/goal/prompts.py): the
# harness's own text, sent the moment the agent stopped, so the evidence before it still
# counts; any other user message is the person's (a goal resumed after a pause is theirs).
_AUTO_CONTINUE = (
    "Please continue working on the task",
    "Please continue on whatever approach you think is suitable",
    "The task appears incomplete (iteration ",
    "The goal is NOT yet complete (audit iteration ",
)


def _from_person(text: Any) -> bool:
    """A user message's text is the person's, not the harness's auto-continue."""
    return not (isinstance(text, str) and text.lstrip().startswith(_AUTO_CONTINUE))


def _ref(e: dict, i: int) -> dict:
    eid = e.get("id")
    return (
        {"event": eid}
        if isinstance(eid, (str, int)) and not isinstance(eid, bool)
        else {"event": i}
    )


def _key(v: Any) -> Any:
    """An event id usable as a dict key (a list or object id is no id)."""
    return v if isinstance(v, (str, int, float, type(None))) else None


def _v0(events: list, ctx: Ctx, ledger: Ledger) -> None:
    by_id: dict[Any, Any] = {}
    last_response = None
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            ctx.bad(f"an event must be an object, got {type(e).__name__}", i)
            continue
        if "action" in e:
            action = e.get("action")
            if not isinstance(action, str):
                ctx.bad(f"an action that is {type(action).__name__}, not a name", i)
                continue
            tcm = (
                e.get("tool_call_metadata")
                if isinstance(e.get("tool_call_metadata"), dict)
                else None
            )
            if action == "condensation":
                # the condenser dropped events from what the model sees: reading them again is
                # no repeat
                ledger.compacted()
                continue
            args_in = e.get("args") if isinstance(e.get("args"), dict) else {}
            resp = tcm.get("model_response") if tcm else None
            rid = resp.get("id") if isinstance(resp, dict) else None
            if e.get("source") == "agent" and action == "message" and tcm is None:
                # the agent's own message: a turn that ran nothing
                content = args_in.get("content")
                ledger.turn(None, text=content if isinstance(content, str) else "", ref=_ref(e, i))
                last_response = None
                continue
            if e.get("source") != "agent" or (action not in _TOOL_ACTIONS and tcm is None):
                if (
                    action == "message"
                    and e.get("source") == "user"
                    and _from_person(args_in.get("content"))
                ):
                    ledger.user()
                ledger.context(
                    text_len(e.get("message") if action != "message" else args_in.get("content"))
                )
                continue
            if rid is None or rid != last_response:
                # (a think action's thought is its argument, counted with the call)
                thought = args_in.get("thought") if action != "think" else None
                ledger.turn(
                    resp.get("usage") if isinstance(resp, dict) else None,
                    text=thought if isinstance(thought, str) else "",
                    ref=_ref(e, i),
                )
                last_response = rid
            args = _clean(args_in)
            if action == "think" and "thought" in args_in:
                args = {**args, "thought": args_in["thought"]}  # the think tool's one argument
            name = (tcm.get("function_name") if tcm else None) or action
            # The action type says what happened (read / edit / run) more reliably than the
            # function name (str_replace_editor does both); MCP calls keep their own tool name.
            by_action = action in _TOOL_ACTIONS and action not in ("mcp", "call_tool_mcp")
            kind, target = ledger.profile.classify(action if by_action else name, args)
            step = ledger.call(
                name,
                args,
                tcm.get("tool_call_id") if tcm else None,
                kind=kind,
                target=target,
                ref=_ref(e, i),
            )
            by_id[_key(e.get("id"))] = step
        elif "observation" in e:
            obs = e.get("observation")
            if not isinstance(obs, str) or obs in _SKIP_OBS:
                continue
            step = by_id.pop(_key(e.get("cause")), None) if e.get("cause") is not None else None
            if step is None:
                tcm = e.get("tool_call_metadata")
                step = ledger.pair(tcm.get("tool_call_id") if isinstance(tcm, dict) else None)
            content = e.get("content")
            if step is None and obs == "error" and _refused_call(content):
                # the agent could not turn the model's reply into an action (an unknown tool,
                # arguments that do not validate): a turn whose action was rejected
                ledger.turn(None, text="", ref=_ref(e, i))
                ledger.reject(content, ref=_ref(e, i))
                last_response = None
                continue
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
            err = content if obs == "error" else _mark_failure(step, content)
            _refuse(step, content)
            ledger.result(step, content, err)


def _is_flat_event(e: Any) -> bool:
    """A 2024 resolver history entry: a dataclass dict, ``action`` or ``observation`` beside the
    event's own fields, no ``args`` / ``source`` / ``id``."""
    return (
        isinstance(e, dict)
        and ("action" in e or "observation" in e)
        and "args" not in e
        and "extras" not in e
        and "source" not in e
        and "kind" not in e
    )


def _flat(events: list, ctx: Ctx, ledger: Ledger) -> None:
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            ctx.bad(f"an event must be an object, got {type(e).__name__}", i)
            continue
        ref = {"event": i}
        if "action" in e:
            action = e.get("action")
            if not isinstance(action, str):
                ctx.bad(f"an action that is {type(action).__name__}, not a name", i)
                continue
            if action == "message":
                # agent and user messages look alike here: context, except a reply the agent made
                ledger.context(text_len(e.get("content")))
                continue
            if action not in _TOOL_ACTIONS:
                ledger.context(text_len(e.get("content") or e.get("message")))
                continue
            thought = e.get("thought") if action != "think" else None
            ledger.turn(None, text=thought if isinstance(thought, str) else "", ref=ref)
            args = _clean(e)
            if action == "think" and "thought" in e:
                args = {**args, "thought": e["thought"]}  # the think action's one argument
            kind, target = ledger.profile.classify(action, args)
            ledger.call(action, args, None, kind=kind, target=target, ref=ref)
        elif "observation" in e:
            obs = e.get("observation")
            if not isinstance(obs, str) or obs in _SKIP_OBS:
                continue
            content = e.get("content")
            step = ledger.pair(None)
            if step is None:
                ledger.context(text_len(content))
                continue
            if e.get("exit_code") is not None:
                step.meta["returncode"] = e["exit_code"]
            err = content if obs == "error" else _mark_failure(step, content)
            ledger.result(step, content, err)


def _thought_text(e: dict) -> str:
    parts = []
    rc = e.get("reasoning_content")
    if isinstance(rc, str) and rc:
        parts.append(rc)
    th = e.get("thought")
    t = text_of(th) if th is not None else None
    if isinstance(t, str) and t:
        parts.append(t)
    return "\n".join(parts)


def _stats_usage(value: Any) -> tuple[int, int, int] | None:
    """(prompt, completion, reasoning) accumulated by the agent's LLM in a ``stats`` update."""
    if not isinstance(value, dict):
        return None
    per = value.get("usage_to_metrics")
    if not isinstance(per, dict):
        return None
    m = per.get("default") or per.get("agent")
    if not isinstance(m, dict):
        m = next((v for v in per.values() if isinstance(v, dict)), None)
    acc = m.get("accumulated_token_usage") if isinstance(m, dict) else None
    if not isinstance(acc, dict):
        return None
    p, c, r = (
        acc.get("prompt_tokens"),
        acc.get("completion_tokens"),
        acc.get("reasoning_tokens") or 0,
    )
    if not isinstance(p, int) or not isinstance(c, int):
        return None
    return p, c, r if isinstance(r, int) else 0


_ACP_DONE = frozenset({"completed", "failed"})


def _acp_calls(events: list) -> dict[str, dict]:
    """Each ACP call's updates merged: ``{tool_call_id: {"first": index of its first update,
    "title", "tool_kind", "raw_input", "content", "raw_output", "parent", "done": its first
    completed / failed update}}``. An update carries what changed (ACP replaces a field an
    update names), so each field is the latest one given up to the call's end; what comes after
    the end is not the call's."""
    calls: dict[str, dict] = {}
    for i, e in enumerate(events):
        if not isinstance(e, dict) or e.get("kind") != "ACPToolCallEvent":
            continue
        cid = e.get("tool_call_id")
        if not isinstance(cid, str):
            continue
        c = calls.get(cid)
        if c is None:
            c = calls[cid] = {"first": i, "title": None, "tool_kind": None, "raw_input": None,
                              "content": None, "raw_output": None, "parent": None,
                              "done": None}  # fmt: skip
        if c["done"] is not None:
            continue
        for key in ("title", "tool_kind", "raw_input", "content", "raw_output"):
            if e.get(key) not in (None, "", {}, []):
                c[key] = e[key]
        if isinstance(e.get("parent_tool_call_id"), str):
            c["parent"] = e["parent_tool_call_id"]
        if e.get("status") in _ACP_DONE or e.get("is_error") is True:
            c["done"] = e
    return calls


def _acp_output(c: dict) -> Any:
    """What an ACP call answered: the text of its ``content`` blocks (ACP ``ToolCallContent``:
    ``{"type": "content", "content": {"type": "text", "text"}}``, a diff's new text), else its
    ``raw_output`` as it is; None when it said nothing (no outcome to compare)."""
    texts = []
    for b in c["content"] or ():
        if not isinstance(b, dict):
            continue
        inner = b.get("content") if b.get("type") == "content" else b
        if isinstance(inner, dict) and isinstance(inner.get("text"), str):
            texts.append(inner["text"])
        elif b.get("type") == "diff":
            new = b.get("new_text", b.get("newText"))
            if isinstance(new, str):
                texts.append(new)
    if texts:
        return "\n".join(texts)
    return c["raw_output"]


def _acp_step(ledger: Ledger, c: dict, ref: dict, cid: str) -> None:
    kind = c["tool_kind"] if isinstance(c["tool_kind"], str) and c["tool_kind"] else "other"
    args = c["raw_input"] if c["raw_input"] is not None else {}
    step = ledger.call(f"acp:{kind}", args, cid, ref=ref)
    if isinstance(c["title"], str):
        step.meta["title"] = c["title"]
    done = c["done"]
    if done is None:
        return  # interrupted: never answered
    out = _acp_output(c)
    failed = done.get("status") == "failed" or done.get("is_error") is True
    if out is None and not failed:
        return  # done, and nothing of what it answered was written: no outcome to compare
    ledger.result(step, out, (out if isinstance(out, str) and out else True) if failed else None)


def _v1(events: list, ctx: Ctx, ledger: Ledger, subs: dict[str, Ledger] | None = None) -> None:
    acp = _acp_calls(events)
    by_id: dict[Any, Any] = {}
    last_response = None
    acc = (0, 0, 0)
    pending = None  # the usage of the LLM call whose events come next
    # The last event an LLM call wrote: a finish answered after it ended the run, and its
    # observation (the agent's own message echoed back) never entered a prompt.
    last_call = max(
        (
            i
            for i, e in enumerate(events)
            if isinstance(e, dict)
            and (
                e.get("kind") in ("ActionEvent", "AgentErrorEvent")
                or (e.get("kind") == "MessageEvent" and e.get("source") == "agent")
            )
        ),
        default=-1,
    )
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            ctx.bad(f"an event must be an object, got {type(e).__name__}", i)
            continue
        kind = e.get("kind")
        if not isinstance(kind, str):
            ctx.bad(f"an event whose kind is {type(kind).__name__}, not a string", i)
            continue
        ref = _ref(e, i)
        if kind == "ActionEvent":
            rid = e.get("llm_response_id")
            if rid is None or rid != last_response:
                ledger.turn(pending, text=_thought_text(e), ref=ref)
                pending = None
                last_response = rid
            name = (
                e.get("tool_name")
                if isinstance(e.get("tool_name"), str) and e.get("tool_name")
                else "unknown"
            )
            action = e.get("action") or {}
            args = _clean(action)
            if name == "think" and isinstance(action, dict) and "thought" in action:
                # the think tool's one argument is its thought (elsewhere "thought" is the
                # model's reasoning beside the call, dropped so repeats hash equal)
                args = {**args, "thought": action["thought"]} if isinstance(args, dict) else args
            step = ledger.call(name, args, e.get("tool_call_id"), ref=ref)
            by_id[_key(e.get("id"))] = step
        elif kind in ("ObservationEvent", "UserRejectObservation"):
            step = by_id.pop(_key(e.get("action_id")), None) or ledger.pair(
                _key(e.get("tool_call_id")),
                e.get("tool_name") if isinstance(e.get("tool_name"), str) else None,
            )
            obs = e.get("observation") if isinstance(e.get("observation"), dict) else {}
            content = (
                text_of(obs.get("content", obs.get("output"))) if obs else e.get("rejection_reason")
            )
            if step is None:
                ledger.orphans += 1
                ledger.context(text_len(content))
                continue
            rc = obs.get("exit_code")
            if rc is None and isinstance(obs.get("metadata"), dict):
                # SDK builds of late 2025 leave exit_code null and keep the code in metadata
                rc = obs["metadata"].get("exit_code")
            if rc is not None:
                step.meta["returncode"] = rc
            old_error = obs.get("error") if "content" not in obs else None
            if isinstance(old_error, str) and old_error and not content:
                # SDK builds before 1.0.0a6 answer a failed call with an empty output and the
                # message the model saw in "error"
                content = old_error
            if kind == "UserRejectObservation":
                err = e.get("rejection_reason") or "rejected by the user"
            elif isinstance(old_error, str) and old_error and content == old_error:
                err = content
                if step.kind == "mutate":
                    step.no_op = True  # the edit was refused: nothing was written
            elif obs.get("is_error") or old_error is True:
                err = content if isinstance(content, str) and content else True
                if (
                    step.kind == "mutate"
                    and isinstance(content, str)
                    and _FAILED_EDIT in content[:400]
                ):
                    step.no_op = True
            else:
                err = _mark_failure(step, content)
            _refuse(step, content)
            if step.name == "finish" and i > last_call and err is None:
                # the run's final answer: no later call ever read it back
                ledger.result(step, content, in_context=False)
                step.meta["final"] = True
            else:
                ledger.result(step, content, err)
        elif kind == "AgentErrorEvent":
            step = ledger.pair(e.get("tool_call_id"), e.get("tool_name"))
            error = e.get("error")
            if step is not None and step.call_id and step.call_id == e.get("tool_call_id"):
                ledger.result(step, error, error or True)
                continue
            # No action was made of the call: the SDK refused it (unknown tool, bad arguments).
            if e.get("llm_response_id") is None or e.get("llm_response_id") != last_response:
                ledger.turn(pending, text="", ref=ref)
                pending = None
                last_response = e.get("llm_response_id")
            ledger.reject(
                error if isinstance(error, str) and error else "the call was refused",
                e.get("tool_name") if isinstance(e.get("tool_name"), str) else "",
                ref=ref,
            )
        elif kind == "MessageEvent":
            msg = e.get("llm_message") if isinstance(e.get("llm_message"), dict) else {}
            text = text_of(msg.get("content"))
            if e.get("source") == "agent":
                ledger.turn(pending, text=text if isinstance(text, str) else "", ref=ref)
                pending = None
                last_response = e.get("llm_response_id")
            else:
                if e.get("source") == "user" and _from_person(text):
                    ledger.user()
                ledger.context(text_len(text))
        elif kind == "ConversationStateUpdateEvent":
            if e.get("key") == "stats":
                now = _stats_usage(e.get("value"))
                if now is not None:
                    d = (now[0] - acc[0], now[1] - acc[1], now[2] - acc[2])
                    if d[0] > 0 or d[1] > 0:
                        pending = {
                            "prompt_tokens": d[0],
                            "completion_tokens": d[1],
                            "completion_tokens_details": {"reasoning_tokens": max(d[2], 0)},
                        }
                    acc = now
        elif kind == "Condensation":
            ledger.compacted()  # the condenser dropped events from what the model sees
        elif kind == "ACPToolCallEvent":
            cid = e.get("tool_call_id")
            c = acp.get(cid) if isinstance(cid, str) else None
            if c is None or c["first"] != i:
                continue  # a later update of a call already placed (or no call id)
            if c["parent"] is not None and subs is not None:
                sub = subs.get(c["parent"])
                if sub is None:
                    sub = subs[c["parent"]] = Ledger(
                        f"{ledger.session}/{c['parent']}", ledger.profile
                    )
                _acp_step(sub, c, ref, cid)
            else:
                _acp_step(ledger, c, ref, cid)
        elif kind not in V1_KINDS:
            ctx.bad(
                f"an OpenHands event of kind {kind!r} this reader does not know; expected one of "
                f"{', '.join(sorted(V1_KINDS))}",
                i,
            )
    _next_moves(ledger.steps)


def _next_moves(steps: list) -> None:
    """A browser move made again right after the same move (``browser_go_back`` four times:
    four pages back), both answered with the same acknowledgement and no error, went on from
    where the first left the browser: it is no repeat of it. It is marked ``not_run`` (no
    repeat, no first occurrence); the first move of the run still changes everything after
    it, and nothing lies between the moves, so no other comparison changes."""
    prev = None
    for step in steps:
        if (
            prev is not None
            and step.name in _RELATIVE_MOVES
            and step.name == prev.name
            and step.args == prev.args
            and step.error is None
            and prev.error is None
            and step.rejected is None
            and prev.rejected is None
            and isinstance(step.result, str)
            and step.result == prev.result
            and len(step.result) < 200
        ):
            step.meta["not_run"] = True
            step.meta["next_move"] = True
        prev = step


def _is_run_record(r: Any) -> bool:
    """An evaluation / resolver output record: ``{"instance_id" | "issue", "history": [events]}``."""
    if not isinstance(r, dict) or not isinstance(r.get("history"), list):
        return False
    h = r["history"]
    return any(_is_event(e) or _is_flat_event(e) for e in h[:20]) or (
        not h and ("git_patch" in r or "instance_id" in r)
    )


def parse(doc: Any, ctx: Ctx) -> list[Trace]:
    """One trace from an event stream; one per record of an evaluation / resolver output.jsonl."""
    if isinstance(doc, list) and doc and _is_run_record(doc[0]):
        traces = []
        for n, r in enumerate(doc):
            if not _is_run_record(r):
                ctx.bad("an evaluation record needs a history list of events", n)
                continue
            for t in _parse_stream(r, ctx):
                t.source = f"{ctx.path}#{n}" if ctx.path else f"#{n}"
                traces.append(t)
        return traces
    return _parse_stream(doc, ctx)


def runs_of(doc: Any) -> list[tuple[str | None, list]] | None:
    """The runs a parsed file holds, as a walk compares them to find a run written more than
    once: ``(id, events)`` per record of an evaluation output, one for a document with
    ``events`` / ``history`` / ``trajectory``, one (no id) for a bare list of events. None when
    *doc* is none of these, or one of its records is no run (such a file is read as it is:
    passed over, its bad record would go unreported)."""
    if isinstance(doc, list) and doc and _is_run_record(doc[0]):
        if not all(_is_run_record(r) for r in doc):
            return None
        return [(_record_id(r), r["history"]) for r in doc]
    if isinstance(doc, dict):
        for key in ("events", "history", "trajectory"):
            if isinstance(doc.get(key), list):
                return [(_record_id(doc), doc[key])]
        return None
    if isinstance(doc, list):
        return [(None, doc)]
    return None


def _record_id(r: dict) -> str | None:
    for k in ("instance_id", "id", "conversation_id"):
        if r.get(k) is not None:
            return str(r[k])
    issue = r.get("issue")
    if isinstance(issue, dict) and issue.get("number") is not None:
        repo = f"{issue.get('owner')}/{issue.get('repo')}#" if issue.get("repo") else "issue-"
        return f"{repo}{issue['number']}"
    return None


def _parse_stream(doc: Any, ctx: Ctx) -> list[Trace]:
    session = ctx.stem
    if session == "events" and ctx.path:
        # <conversation id>/events/: the conversation folder names the session
        conv = os.path.dirname(os.path.normpath(ctx.path))
        if os.path.basename(conv) == "event_service":
            # the agent server's <conversation id>/event_service/events/
            conv = os.path.dirname(conv)
        session = os.path.basename(conv) or session
    events = doc
    if isinstance(doc, dict):
        for key in ("events", "history", "trajectory"):
            if isinstance(doc.get(key), list):
                events = doc[key]
                session = _record_id(doc) or session
                break
        else:
            events = [doc]
    ledger = Ledger(session, ctx.profile(PROFILE))
    subs: dict[str, Ledger] = {}  # the sub-agents' calls of an ACP agent, by parent call
    head = [e for e in events[:50] if isinstance(e, dict)]
    if any(
        "kind" in e and "action" not in e and "observation" not in e or _is_event(e) and "kind" in e
        for e in head
    ):
        gen = "v1"
        _v1(events, ctx, ledger, subs)
    elif head and all(_is_flat_event(e) for e in head):
        gen = "resolver-2024"
        _flat(events, ctx, ledger)
    else:
        gen = "v0"
        _v0(events, ctx, ledger)
    main = ledger.trace(source=ctx.path, fmt=NAME, meta={"generation": gen})
    return [main] + [
        sub.trace(source=ctx.path, fmt=NAME, meta={"generation": gen, "parent_call": parent})
        for parent, sub in subs.items()
    ]


def _is_event(e: Any) -> bool:
    if not isinstance(e, dict):
        return False
    if isinstance(e.get("kind"), str) and e["kind"] in V1_KINDS:
        return True
    return ("action" in e and "args" in e and "source" in e) or (
        "observation" in e and ("cause" in e or "content" in e)
    )


def sniff(doc: Any) -> bool:
    """Event objects (V0 action/observation or V1 kinds), bare or under events/history/trajectory."""
    if isinstance(doc, dict):
        for key in ("events", "trajectory"):
            if isinstance(doc.get(key), list):
                return any(_is_event(e) for e in doc[key][:20])
        if _is_run_record(doc):
            return True
        return _is_event(doc)
    return isinstance(doc, list) and (
        any(_is_event(e) for e in doc[:20]) or bool(doc) and _is_run_record(doc[0])
    )
