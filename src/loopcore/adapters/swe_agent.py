"""SWE-agent ``.traj`` files: the ``history`` messages (``trajectory`` is a curated copy that can
disagree with it, so it is not read).

An assistant message with a non-null ``action`` is one API call. Function-calling runs give
``tool_calls`` (results: ``role: "tool"`` with a *list* ``tool_call_ids``); text runs give the
action text (``"edit 6:6\\n...\\nend_of_edit"``, ``"python x.py"``), whose observation is the next
``user`` message. Text actions keep ``args={"command": action}``; the step's name is the
SWE-agent command (open, edit, search_dir...) or ``bash`` for anything else. Commands that act
on the open file (edit, goto, scroll_down...) get it as their target, tracked from ``open`` and
from the ``(Open file: ...)`` line SWE-agent appends to observations. Only aggregate token
counts exist (``info.model_stats``), so per-step tokens are estimated. Every step's ``ref`` is
``{"message": i}``, the index of its assistant message in ``history``; the first step of a turn
carries the message's text (an assistant message without an action is a step of its own, and
a rejected one when SWE-agent answers it with a format error: "Your output was not formatted
correctly..."). An edit SWE-agent did not make (its linter reverted it: "Your changes have NOT
been applied"; str_replace_editor's "No replacement was performed") is a failed no-op.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from ._base import Ledger, Trace, parse_args, text_len, text_of
from ._io import Ctx

NAME = "swe-agent"
PROFILE = "swe-agent"

COMMANDS = frozenset(
    {
        "open",
        "goto",
        "scroll_up",
        "scroll_down",
        "search_file",
        "search_dir",
        "find_file",
        "create",
        "edit",
        "insert",
        "append",
        "submit",
        "filemap",
        "exit_forfeit",
        "str_replace_editor",
    }
)
_OPEN_FILE_MARK = "(Open file: "


# What can make shlex.split(line) differ from line.split(): its quotes and escape, and the
# characters str.split takes for blanks but shlex (whose blanks are space, tab, CR and LF) does
# not. A line with none of them is split on runs of blanks by both: str.split is the same
# answer without shlex's per-character Python loop.
_SHLEX_SPECIAL = re.compile(
    "['\"\\\\\x0b\x0c\x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
)


def _words(line: str) -> list[str]:
    # shlex.split(line) (posix, no comments), or line.split() where shlex cannot parse it
    if _SHLEX_SPECIAL.search(line) is None:
        return line.split()
    try:
        return shlex.split(line)
    except ValueError:
        return line.split()


def _classify_args(name: str, args: Any, open_file: str | None) -> dict:
    """The arguments the profile classifies with: parsed operands plus the open file."""
    d: dict[str, Any] = dict(args) if isinstance(args, dict) else {}
    d["open_file"] = open_file
    cmd = d.get("command") if name in COMMANDS and isinstance(d.get("command"), str) else None
    if cmd is not None:
        words = _words(cmd.split("\n", 1)[0])[1:]
        if name == "open" and words:
            d.setdefault("path", words[0])
        elif name == "create" and words:
            d.setdefault("filename", words[0])
        elif name == "search_file":
            d.setdefault("file", words[1] if len(words) > 1 else open_file)
        elif name in ("search_dir", "find_file"):
            d.setdefault("dir", words[1] if len(words) > 1 else ".")
    elif name == "search_file":
        d.setdefault("file", d.get("file") or open_file)
    elif name in ("search_dir", "find_file"):
        d.setdefault("dir", d.get("dir") or ".")
    if name == "open" and "path" not in d:
        d["path"] = d.get("path_or_file") or d.get("file")
    return d


def _open_file(text: Any, current: str | None) -> str | None:
    if not isinstance(text, str):
        return current
    k = text.rfind(_OPEN_FILE_MARK)
    if k < 0:
        return current
    end = text.find(")", k)
    value = text[k + len(_OPEN_FILE_MARK) : end if end >= 0 else None].strip()
    return None if value in ("n/a", "") else value


# How SWE-agent answers an output it cannot run (its format_error_template and the function-
# calling parser's messages).
_FORMAT_ERRORS = (
    "Your output was not formatted correctly",
    "Your last output did not use any tool calls",
    "Your output contained",
    "Unexpected argument(s)",
    "Your action could not be parsed",
)


# Edits SWE-agent did not make: the edit linter reverts an edit that breaks the file's syntax
# (0.x / 1.x ``edit``), str_replace_editor finds nothing to replace.
_NOT_APPLIED = (
    "Your changes have NOT been applied",
    "Your proposed edit has introduced new syntax error",
    "No replacement was performed",
)


def _not_applied(step: Any, content: Any) -> bool:
    return (
        step.kind == "mutate"
        and isinstance(content, str)
        and any(x in content[:4000] for x in _NOT_APPLIED)
    )


def _is_format_error(content: Any) -> bool:
    text = text_of(content)
    return isinstance(text, str) and text.lstrip().startswith(_FORMAT_ERRORS)


def parse(doc: Any, ctx: Ctx) -> list[Trace]:
    """One trace from a SWE-agent trajectory's history."""
    history = doc.get("history") or []
    ledger = Ledger(ctx.stem, ctx.profile(PROFILE))
    open_file: str | None = None
    pending = []  # calls of the latest action message, waiting for observations
    no_action = None  # index of the latest assistant message that ran nothing
    for i, m in enumerate(history):
        if not isinstance(m, dict):
            ctx.bad(f"a history message must be an object, got {type(m).__name__}", i)
            continue
        role = m.get("role")
        if m.get("is_demo"):
            ledger.context(text_len(m.get("content")))
            continue
        if role == "assistant":
            text = text_of(m.get("content"))
            thought = m.get("thought")
            if not isinstance(text, str) or not text:
                text = thought if isinstance(thought, str) else ""
            ledger.turn(None, text=text, ref={"message": i})
            action = m.get("action")
            calls = m.get("tool_calls")
            pending = []
            if isinstance(calls, list) and calls:
                for tc in calls:
                    fn = tc.get("function") if isinstance(tc, dict) else None
                    name = fn.get("name") if isinstance(fn, dict) else None
                    if not isinstance(name, str):
                        ctx.bad("a tool call without function.name", i)
                        continue
                    args, _ = parse_args(fn.get("arguments"))
                    step = ledger.call(
                        name,
                        args,
                        tc.get("id"),
                        classify_args=_classify_args(name, args, open_file),
                    )
                    pending.append(step)
            elif isinstance(action, str) and action.strip():
                text = action.strip()
                head = text.split(None, 1)[0]
                name = head if head in COMMANDS else "bash"
                args = {"command": text}
                step = ledger.call(name, args, classify_args=_classify_args(name, args, open_file))
                pending.append(step)
            else:
                no_action = (
                    i  # a turn that ran nothing: a reply, or rejected (see the next message)
                )
                continue
            no_action = None
            for step in pending:
                if step.name == "open" and isinstance(step.target, str):
                    open_file = step.target
        elif (
            role == "user"
            and not pending
            and no_action is not None
            and _is_format_error(m.get("content"))
        ):
            # SWE-agent's answer to an output it could not parse: that turn was rejected
            ledger.reject(text_of(m.get("content")), args_len=0, ref={"message": no_action})
            no_action = None
        elif role == "tool" or (role == "user" and pending):
            content = text_of(m.get("content"))
            ids = m.get("tool_call_ids")
            call_id = ids[0] if isinstance(ids, list) and ids else m.get("tool_call_id")
            step = ledger.pair(call_id if isinstance(call_id, str) else None)
            if step is None:
                ledger.orphans += 1
                ledger.context(text_len(content))
                continue
            pending = [s for s in pending if s is not step]
            if _not_applied(step, content):
                step.no_op = True  # the edit was not made: nothing changed
                ledger.result(step, content, content)
            else:
                ledger.result(step, content)
            open_file = _open_file(content, open_file)
            if step.name in ("open", "create") and open_file:
                # The observation names the file as SWE-agent resolved it: use that path, so a
                # later edit of the open file has the same target as this read.
                step.target = open_file
        else:
            ledger.context(text_len(m.get("content")))
    meta: dict[str, Any] = {}
    info = doc.get("info")
    if isinstance(info, dict):
        stats = info.get("model_stats")
        if isinstance(stats, dict) and (stats.get("tokens_sent") or stats.get("tokens_received")):
            meta["tokens_sent"] = stats.get("tokens_sent")
            meta["tokens_received"] = stats.get("tokens_received")
        if info.get("exit_status") is not None:
            meta["exit_status"] = info.get("exit_status")
    return [ledger.trace(source=ctx.path, fmt=NAME, meta=meta)]


def sniff(doc: Any) -> bool:
    """A dict with a history list of role messages (and SWE-agent's trajectory/info or actions)."""
    if not isinstance(doc, dict):
        return False
    history = doc.get("history")
    if not isinstance(history, list):
        return False
    if "trajectory" in doc or "environment" in doc:
        return True
    # Role messages, not OpenHands events (which also carry "action" but have no role).
    return any(
        isinstance(m, dict) and "role" in m and ("action" in m or "message_type" in m)
        for m in history[:50]
    )
