"""mini-swe-agent ``.traj.json``: 2.x tool calling, 2.x and 1.x text actions (one ```bash block).

2.x (``trajectory_format: "mini-swe-agent-1.1"``): chat messages with ``tool_calls``; per-call
usage in ``extra.response.usage``; tool results carry ``extra.returncode``; the submitting call
is answered by the final ``role: "exit"`` message (its submission never re-enters a prompt).

1.x (``"mini-swe-agent-1"``): an assistant message runs a command only when its text holds
exactly one fenced bash block (mini-swe-agent's own action regex); the next ``user`` message is
its observation (``<returncode>N</returncode>...``), a time-out notice, or the final diff.
Messages with 0 or 2+ blocks are format errors: nothing ran; each is a rejected step (the
harness's answer, "Please always provide EXACTLY ONE action...", is its ``rejected`` text and
its result tokens) and they are counted in ``meta["format_errors"]``. In 2.x a turn whose tool
call the harness could not parse is not kept in the messages; its answer is a ``user`` message
with ``extra.interrupt_type: "FormatError"``, read as a rejected turn of its own.

2.x text-based models (``mini-swe-agent-1.1`` without any ``tool_calls``: ```mswea_bash_command
fences or ``<mswea_bash_command>`` tags) are read like 1.x, with the commands the harness parsed
(``extra.actions``), the exit code of ``extra.returncode``, format errors from the answers
marked ``FormatError`` (``extra.model_response`` is the rejected turn's text) and the submitting
command answered by the ``exit`` message.

Every step's ``ref`` is ``{"message": i}``, the index of the assistant message that issued it in
the trajectory's ``messages`` (of the harness's answer for a 2.x format error), and the first
step of each turn carries the assistant message's text.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from .._native_flag import NO_EXTENSIONS
from ._base import Ledger, Trace, text_len, text_of
from ._io import Ctx
from .openai_chat import message_usage, walk_chat

NAME = "mini-swe-agent"
PROFILE = "mini-swe-agent"

# mini-swe-agent 1.x's action_regex, applied the same way (exactly one match runs).
ACTION_RE = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)
_RETURNCODE_RE = re.compile(r"<returncode>(-?\d+)</returncode>")
_TIMEOUT_MARK = "timed out and has been killed"


def _returncode(text: Any) -> int | None:
    if isinstance(text, str):
        m = _RETURNCODE_RE.search(text, 0, 200)
        if m:
            return int(m.group(1))
    return None


def _v2_result(step: Any, m: dict, content: Any) -> tuple[Any, Any, dict | None]:
    # the result hook of the 2.x walk (the reference; its compiled twin is
    # loopcore._native_ingest.v2_result): the exit code into the step's meta, a crash of the
    # command runner as its error
    extra = m.get("extra")
    error = None
    if extra.__class__ is dict:
        rc = extra.get("returncode")
        exc = extra.get("exception_info")
        if exc:
            error = exc  # a time-out or a crash of the command runner, not a non-zero exit
    else:
        rc = _returncode(content)
    if rc is not None:
        step.meta["returncode"] = rc
    return content, error, None


def parse(doc: Any, ctx: Ctx) -> list[Trace]:
    """One trace from a mini-swe-agent trajectory (either generation)."""
    messages = doc.get("messages") or []
    session = str(doc.get("instance_id") or ctx.stem.removesuffix(".traj"))
    info = doc.get("info") if isinstance(doc.get("info"), dict) else {}
    ledger = Ledger(session, ctx.profile(PROFILE))
    fmt_version = doc.get("trajectory_format") or ""
    # 2.x runs text actions too (its text-based models: ```mswea_bash_command fences or XML
    # tags, parsed by the harness into extra.actions): no message then has tool_calls
    text_mode = fmt_version == "mini-swe-agent-1" or not any(
        isinstance(m, dict) and m.get("tool_calls") for m in messages
    )
    meta: dict[str, Any] = {}
    if text_mode:
        meta["format_errors"] = _walk_text(messages, ctx, ledger)
    else:
        # The exit message passes through as context (nothing follows it, so it moves no
        # token count) and then answers the submitting call.
        walk_chat(messages, ctx, ledger, on_result=_on_result)
        for m in messages[-3:]:
            if isinstance(m, dict) and m.get("role") == "exit":
                # The submission answers the submitting call; no later prompt ever contains it.
                step = ledger.last_open_call()
                if step is not None:
                    ledger.result(step, text_of(m.get("content")), in_context=False)
                    step.meta["final"] = True
    if info.get("exit_status") is not None:
        meta["exit_status"] = info.get("exit_status")
    return [ledger.trace(source=ctx.path, fmt=NAME, meta=meta)]


def _walk_text(messages: list, ctx: Ctx, ledger: Ledger) -> int:
    format_errors = 0
    pending = None  # the call of the last assistant message, waiting for its observation
    rejected_turn = None  # (message index, actions found) of a format error waiting for its answer
    last = len(messages) - 1
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            ctx.bad(f"a message must be an object, got {type(m).__name__}", i)
            continue
        role = m.get("role")
        content = m.get("content")
        extra = m.get("extra") if isinstance(m.get("extra"), dict) else None
        if role == "assistant":
            text = content if isinstance(content, str) else text_of(content)
            if not isinstance(text, str):
                text = ""
            ledger.turn(message_usage(m), text=text, ref={"message": i})
            parsed = extra.get("actions") if extra is not None else None
            if isinstance(parsed, list):
                # 2.x: the commands the harness parsed (whatever its action regex)
                actions = [
                    a["command"]
                    for a in parsed
                    if isinstance(a, dict) and isinstance(a.get("command"), str)
                ]
            else:
                actions = ACTION_RE.findall(text)
            if len(actions) == 1:
                cmd = actions[0].strip()
                # the call's own characters: its fenced block; the rest of the message is the
                # turn's text
                pending = ledger.call("bash", {"command": cmd}, args_len=len(cmd) + 12)
                rejected_turn = None
            else:
                format_errors += 1
                pending = None
                rejected_turn = (i, len(actions))
        elif (
            role == "user"
            and rejected_turn is None
            and extra is not None
            and extra.get("interrupt_type") == "FormatError"
        ):
            # 2.x keeps no message of the rejected turn: its answer holds the model's text
            # (model_response) and the API call's response
            resp = extra.get("response")
            said = extra.get("model_response")
            ledger.turn(
                resp.get("usage") if isinstance(resp, dict) else None,
                text=said if isinstance(said, str) else "",
                ref={"message": i},
            )
            text = text_of(content)
            n_actions = extra.get("n_actions")
            ledger.reject(
                text if isinstance(text, str) and text else "format error",
                "bash" if n_actions else "",
                args_len=0,
                ref={"message": i},
            )
            format_errors += 1
            pending = None
        elif role == "exit" and pending is not None:
            # 2.x: the submitting command is answered by the exit message (the submission)
            ledger.result(pending, text_of(content), in_context=False)
            pending.meta["final"] = True
            pending = None
        elif role == "user" and pending is None and rejected_turn is not None:
            # the harness's answer to a format error: the rejected turn's error message
            text = text_of(content)
            text = text if isinstance(text, str) else ""
            at, n_actions = rejected_turn
            rejected_turn = None
            # no call of its own: the whole turn's output is the rejected action's
            ledger.reject(
                text or f"found {n_actions} actions",
                "bash" if n_actions else "",
                args_len=0,
                ref={"message": at},
            )
        elif role == "user" and pending is not None:
            text = text_of(content)
            step, pending = pending, None
            rc = extra.get("returncode") if extra is not None else None
            if not isinstance(rc, int) or isinstance(rc, bool):
                rc = _returncode(text)
            if rc is not None:
                step.meta["returncode"] = rc
                ledger.result(step, text)
            elif isinstance(text, str) and _TIMEOUT_MARK in text[:2000]:
                ledger.result(step, text, error="timeout")
            elif i == last:
                ledger.result(step, text, in_context=False)
                step.meta["final"] = True
            else:
                ledger.result(step, text)
        else:
            ledger.context(text_len(content))
    return format_errors


if TYPE_CHECKING or NO_EXTENSIONS:
    _on_result = _v2_result
else:
    from .._native_ingest import v2_result as _on_result


def sniff(doc: Any) -> bool:
    """A dict with mini-swe-agent's trajectory_format or info.mini_version and messages."""
    if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
        return False
    tf = doc.get("trajectory_format")
    if isinstance(tf, str) and tf.startswith("mini-swe-agent"):
        return True
    info = doc.get("info")
    return isinstance(info, dict) and "mini_version" in info
