"""Cline and Roo Code task history: ``tasks/<taskId>/api_conversation_history.json``.

The file is the list of Anthropic-style messages the extension sent (``{"role", "content", "ts",
"metrics": {"tokens": {"prompt", "completion", "cached"}}, "modelInfo"}``; the extra fields
only in newer versions). Tools come in two shapes:

* native tool calling (Cline 3.3x on, Roo Code 3.3x on): ``tool_use`` blocks (several per reply)
  answered by ``tool_result`` blocks paired by id, or (Cline) by text blocks ``[read_file for
  'a.py'] Result:\n...`` paired with the open call of that name; ``task_progress`` (the todo list
  Cline sends with every call) is dropped from the arguments;
* XML tool use in the reply text (earlier versions): ``<read_file><path>a.py</path></read_file>``;
  the harness runs the first tool of a reply and answers in the next user message with a text
  block ``[read_file for 'a.py'] Result:`` followed by the result. A reply without a tool
  (answered ``[ERROR] You did not use a tool ...``) is a rejected turn, and so is a call the
  harness refused for a missing parameter.

Tokens: ``metrics.tokens`` of an assistant message, else the ``api_req_started`` entries of
``ui_messages.json`` beside the file (``tokensIn``, ``cacheWrites`` + ``cacheReads``, ``tokensOut``;
the k-th entry belongs to the k-th reply), else estimated; the input is read as the provider
counts it (:func:`_prompts`). Refs are ``{"message": i}``.

Cline 4.x (its extension and CLI on the Cline SDK) keeps a session as
``~/.cline/data/sessions/<sessionId>/<sessionId>.messages.json`` (a sub-agent's as
``<agentId>.messages.json`` beside it): ``{"version": 1, "updated_at", "agent": "lead" |
"subagent" | "teammate", "sessionId", "messages": [...]}``, each message ``{"role", "content":
[text | tool_use | tool_result | thinking | redacted_thinking | file | image], "metrics":
{"inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens"}, "modelInfo", "ts"}``
(the SDK's ``MessageWithMetadata``, sdk/packages/llms/src/providers/types/messages.ts). Its tools:
``read_files``, ``search_codebase``, ``run_commands``, ``fetch_web_content``, ``editor``,
``apply_patch``, ``skills``, ``ask_question``.
"""

from __future__ import annotations

import html
import os
import re
from typing import Any

import orjson

from .._json import loads
from ._base import Ledger, Trace, text_len, text_of
from ._io import Ctx, read_bytes
from ._walk import anthropic_assistant_blocks, anthropic_user_blocks

NAME = "cline"
PROFILE = "cline"

#: Tool names of Cline and Roo Code's XML tool use (and their native tool calls).
TOOLS = frozenset(
    {
        "read_file",
        "write_to_file",
        "replace_in_file",
        "apply_diff",
        "insert_content",
        "search_and_replace",
        "search_files",
        "list_files",
        "list_code_definition_names",
        "codebase_search",
        "execute_command",
        "browser_action",
        "use_mcp_tool",
        "access_mcp_resource",
        "load_mcp_documentation",
        "web_fetch",
        "web_search",
        "ask_followup_question",
        "attempt_completion",
        "plan_mode_respond",
        "act_mode_respond",
        "new_task",
        "switch_mode",
        "update_todo_list",
        "condense",
        "summarize_task",
        "report_bug",
        "new_rule",
        "focus_chain",
        "fetch_instructions",
        "run_slash_command",
        "generate_image",
        "apply_patch",
        "use_skill",
        "use_subagents",
        "edit_file",
    }
)
_TOOL_RE = re.compile(
    r"<(" + "|".join(sorted(TOOLS, key=len, reverse=True)) + r")>(.*?)(?:</\1>|$)", re.S
)
_PARAM_RE = re.compile(r"<([a-z_]+)>(.*?)</\1>", re.S)
_LONG_PARAMS = ("content", "diff")
_PATH_RE = re.compile(r"<path>(.*?)</path>", re.S)
_NOISE_ARGS = frozenset({"task_progress", "requires_approval"})
_RESULT_HEAD = re.compile(r"^\[([a-z_]+)(?: for .*?)?\] Result:[ \t]*\n?")
_NO_TOOL = "You did not use a tool in your previous response"
_REFUSED = (
    "Missing value for required parameter",
    "was not executed because a tool has already been used",
)


# How the person's words reach the model in a user message (Cline's and Roo Code's
# formatResponse): the task, a message on resuming it, an answer to a question, feedback on a
# completion or on a call they approved or denied, their own edit of a write they accepted.
# A task resumed later is theirs too (they may have changed anything meanwhile). Everything
# else in a user message is the harness's: tool results, environment details, reminders.
_PERSON_STARTS = (
    "<task>",
    "<feedback>",
    "<answer>",
    "<user_message>",
    "[TASK RESUMPTION]",
    "The user provided the following feedback",
    "The user has provided feedback on the results",
    "The user denied this operation and provided the following feedback",
    "The user approved this operation and provided the following context",
    "The user made the following updates to your content",
)


def _from_person(text: Any) -> bool:
    """*text* (a text block, or a tool's result) carries the person's words."""
    if not isinstance(text, str):
        return False
    head = text[:300].lstrip()
    if head.startswith(_PERSON_STARTS):
        return True
    # Roo Code's native protocol: {"status":"denied"|"approved",...,"feedback":"..."}
    return head.startswith('{"status":"') and '"feedback":"' in head


def _body(text: str, head: Any) -> str:
    """What follows a block's ``[tool for '...'] Result:`` (its head *head*; for a head the
    pattern does not take, such as a question of several lines, the first ``] Result:``),
    else the whole block."""
    if head is not None:
        return text[head.end() :]
    if text.startswith("["):
        i = text.find("] Result:")
        if i >= 0:
            return text[i + 9 :]
    return text


def _params(body: str) -> dict:
    args = _raw_params(body)
    nested = args.get("args")
    if isinstance(nested, str) and "<path>" in nested:
        # Roo Code's multi-file read: <args><file><path>a</path></file>...</args>
        paths = [html.unescape(m.group(1).strip()) for m in _PATH_RE.finditer(nested)]
        if paths:
            args["path"] = paths[0] if len(paths) == 1 else paths
    for k, v in list(args.items()):
        if isinstance(v, str) and k not in _LONG_PARAMS and "&" in v:
            args[k] = html.unescape(v)
    return args


def _raw_params(body: str) -> dict:
    args: dict = {}
    for k in _LONG_PARAMS:  # file content may itself hold tags: take up to the last closing tag
        start = body.find(f"<{k}>")
        end = body.rfind(f"</{k}>")
        if start >= 0 and end > start:
            args[k] = body[start + len(k) + 2 : end].strip("\n")
            body = body[:start] + body[end + len(k) + 3 :]
    for m in _PARAM_RE.finditer(body):
        args.setdefault(m.group(1), m.group(2).strip())
    return args


def _clean(args: Any) -> Any:
    """The call's arguments without the harness's bookkeeping (``task_progress``, the todo list
    Cline asks for on every call, changes between identical calls)."""
    if isinstance(args, dict) and any(k in args for k in _NOISE_ARGS):
        return {k: v for k, v in args.items() if k not in _NOISE_ARGS}
    return args


def _ui_usage(path: str | None) -> list[dict]:
    """Per API request usage from ui_messages.json beside the history, oldest first."""
    if not path:
        return []
    ui = os.path.join(os.path.dirname(path), "ui_messages.json")
    if not os.path.isfile(ui):
        return []
    try:
        msgs = loads(read_bytes(ui))
    except (OSError, ValueError):  # unreadable (TraceFormatError) or not JSON: no usage to read
        return []
    out = []
    for m in msgs if isinstance(msgs, list) else []:
        if (
            isinstance(m, dict)
            and m.get("say") == "api_req_started"
            and isinstance(m.get("text"), str)
        ):
            try:
                d = loads(m["text"])
            except orjson.JSONDecodeError:
                continue
            if (
                isinstance(d, dict)
                and isinstance(d.get("tokensIn"), int)
                and isinstance(d.get("tokensOut"), int)
            ):
                cache = _int(d.get("cacheWrites")) + _int(d.get("cacheReads"))
                out.append((d["tokensIn"], cache, d["tokensOut"]))
    return _prompts(out)


def _int(v: Any) -> int:
    return v if type(v) is int and v > 0 else 0


def _prompts(usage: list[tuple[int, int, int]]) -> list[dict]:
    """The usage of each request from Cline's (input, cached, output) counts. What Cline
    records as a request's input depends on its provider: the Anthropic, Bedrock and Vertex
    ones give the tokens the cache did not hold (the prompt is input + cached), the OpenAI
    compatible one the whole prompt with the cached tokens in it (input alone). A task is of
    the first kind when some request's cached tokens exceed its input, which the second kind
    never records."""
    exclusive = any(cache > tin for tin, cache, _ in usage)
    return [
        {"prompt_tokens": tin + cache if exclusive else tin, "completion_tokens": out}
        for tin, cache, out in usage
    ]


def _message_usages(messages: list, counts: Any) -> dict[int, dict]:
    """The usage of each assistant message (by index) whose ``metrics`` *counts* reads as
    (input, cached, output), read as :func:`_prompts` says."""
    at, usage = [], []
    for i, m in enumerate(messages):
        met = m.get("metrics") if isinstance(m, dict) and m.get("role") == "assistant" else None
        got = counts(met) if isinstance(met, dict) else None
        if got is not None:
            at.append(i)
            usage.append(got)
    return dict(zip(at, _prompts(usage)))


def _v3_counts(met: dict) -> tuple[int, int, int] | None:
    # Cline 3.x: metrics.tokens {prompt, completion, cached}
    tok = met.get("tokens")
    if isinstance(tok, dict) and type(tok.get("prompt")) is int:
        if type(tok.get("completion")) is int:
            return tok["prompt"], _int(tok.get("cached")), tok["completion"]
    return None


def _sdk_counts(met: dict) -> tuple[int, int, int] | None:
    # the Cline SDK: metrics {inputTokens, outputTokens, cacheReadTokens, cacheWriteTokens}
    if type(met.get("inputTokens")) is int and type(met.get("outputTokens")) is int:
        cache = _int(met.get("cacheReadTokens")) + _int(met.get("cacheWriteTokens"))
        return met["inputTokens"], cache, met["outputTokens"]
    return None


def _blocks(content: Any) -> list:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


#: The agents a Cline SDK messages file is written for.
_SDK_AGENTS = frozenset({"lead", "subagent", "teammate"})


def sniff_sdk(doc: Any) -> bool:
    """A Cline SDK session messages file: ``version``, ``agent``, ``sessionId``, ``messages``."""
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("messages"), list)
        and isinstance(doc.get("sessionId"), str)
        and doc.get("agent") in _SDK_AGENTS
        and "version" in doc
    )


def _parse_sdk(doc: dict, ctx: Ctx) -> list[Trace]:
    """One trace from a Cline SDK session messages file (see the module doc)."""
    sid = doc["sessionId"]
    stem = ctx.stem.removesuffix(".messages")
    session = sid if doc.get("agent") == "lead" or stem in ("", sid) else f"{sid}/{stem}"
    ledger = Ledger(session, ctx.profile(PROFILE))
    messages = doc["messages"]
    usages = _message_usages(messages, _sdk_counts)
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            ctx.bad(f"a message must be an object, got {type(m).__name__}", i)
            continue
        role, content, ref = m.get("role"), m.get("content"), {"message": i}
        if role == "assistant":
            ledger.turn(usages.get(i), text="", ref=ref)
            anthropic_assistant_blocks(content, ledger, ctx, i, ref=ref)
        elif role == "user":
            if doc.get("agent") == "lead" and not (
                isinstance(content, list)
                and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
            ):
                ledger.user()  # the person's words (a sub-agent's prompt is its lead's)
            anthropic_user_blocks(content, ledger)
        else:
            ctx.bad(f"a message with role {role!r}; expected user or assistant", i)
    meta = {"agent": doc.get("agent")} if doc.get("agent") != "lead" else None
    return [ledger.trace(source=ctx.path, fmt=NAME, meta=meta)]


def parse(doc: Any, ctx: Ctx) -> list[Trace]:
    """One trace from a task's api_conversation_history.json, or from a Cline SDK session."""
    if sniff_sdk(doc):
        return _parse_sdk(doc, ctx)
    messages = doc if isinstance(doc, list) else []
    # tasks/<taskId>/api_conversation_history.json: the task folder names the session
    task = (
        os.path.basename(os.path.dirname(os.path.abspath(ctx.path)))
        if ctx.path and ctx.stem == "api_conversation_history"
        else ""
    )
    ledger = Ledger(task or ctx.stem, ctx.profile(PROFILE))
    ui_usage = _ui_usage(ctx.path)
    metrics = _message_usages(messages, _v3_counts)
    replies = 0
    xml_open = None  # the XML call of the last reply, waiting for its "[tool] Result:" block
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            ctx.bad(f"a message must be an object, got {type(m).__name__}", i)
            continue
        role = m.get("role")
        ref = {"message": i}
        blocks = _blocks(m.get("content"))
        if role == "assistant":
            usage = metrics.get(i)
            if usage is None and replies < len(ui_usage):
                usage = ui_usage[replies]
            replies += 1
            ledger.turn(usage, text="", ref=ref)
            xml_open = None
            native = False
            for b in blocks:
                t = b.get("type")
                if t == "tool_use" and isinstance(b.get("name"), str):
                    native = True
                    ledger.call(b["name"], _clean(b.get("input")), b.get("id"), ref=ref)
                elif t == "text" and isinstance(b.get("text"), str):
                    text = b["text"]
                    if not native and xml_open is None:
                        tm = _TOOL_RE.search(text)
                        if tm is not None:
                            xml_open = ledger.call(
                                tm.group(1),
                                _clean(_params(tm.group(2))),
                                None,
                                ref=ref,
                                args_len=len(tm.group(0)),
                            )
                            # the tool's XML is the call's own output, the rest is the reply
                            text = (text[: tm.start()] + text[tm.end() :]).strip()
                    if text:
                        ledger.add_text(text)
                elif t in ("thinking", "reasoning") and isinstance(
                    b.get("thinking", b.get("text")), str
                ):
                    ledger.add_text(b.get("thinking", b.get("text")))
        elif role == "user":
            xml_open = _user(blocks, ledger, xml_open)
        else:
            ctx.bad(f"a message with role {role!r}; expected user or assistant", i)
    return [ledger.trace(source=ctx.path, fmt=NAME)]


def _user(blocks: list, ledger: Ledger, xml_open: Any) -> Any:
    k = 0
    person = False
    while k < len(blocks):
        b = blocks[k]
        t = b.get("type")
        if t == "tool_result":
            step = ledger.pair(b.get("tool_use_id"))
            res = text_of(b.get("content"))
            person = person or _from_person(res)
            if step is None:
                ledger.orphans += 1
                ledger.context(text_len(res))
            else:
                _answer(ledger, step, res, bool(b.get("is_error")))
            k += 1
            continue
        text = b.get("text") if t == "text" else None
        if not isinstance(text, str):
            k += 1
            continue
        head = _RESULT_HEAD.match(text)
        person = person or _from_person(_body(text, head))
        step = None
        if head is not None:
            label = head.group(1)
            if xml_open is not None and label == xml_open.name:
                step = xml_open
            elif xml_open is None:
                # native tool calls answered with "[tool for 'x'] Result:" text (Cline 3.x):
                # the open call of that name, else the one whose name holds the label
                # ("[subagents]" answers use_subagents), else the oldest open call
                opens = ledger.open_calls()
                if opens:  # the latest reply's calls: an older call left unanswered takes nothing
                    latest = opens[-1].turn
                    opens = [s for s in opens if s.turn == latest]
                step = (
                    next((s for s in opens if s.name == label), None)
                    or next((s for s in opens if label in s.name), None)
                    or (opens[0] if opens else None)
                )
        if step is not None:
            # the result: the rest of this block, or (older Cline) the blocks after it up to the
            # next "[...] Result:" / environment details block
            rest = text[head.end() :]
            body = [rest] if rest.strip() else []
            k += 1
            if not body:
                while k < len(blocks):
                    nb = blocks[k]
                    nt = nb.get("text") if nb.get("type") == "text" else None
                    if (
                        not isinstance(nt, str)
                        or _RESULT_HEAD.match(nt)
                        or nt.lstrip().startswith("<environment_details>")
                    ):
                        break
                    body.append(nt)
                    k += 1
            res = "\n".join(body)
            _answer(
                ledger,
                step,
                res,
                res.lstrip().startswith(("The tool execution failed", "[ERROR]", "Error")),
            )
            if step is xml_open:
                xml_open = None
            continue
        if _NO_TOOL in text[:300]:
            ledger.reject(text, "")
        else:
            ledger.context(len(text))
        k += 1
    if person:
        ledger.user()
    return xml_open


def _answer(ledger: Ledger, step: Any, res: Any, failed: bool) -> None:
    err = None
    if failed:
        err = res if isinstance(res, str) and res else True
    if isinstance(res, str) and any(x in res[:300] for x in _REFUSED):
        step.rejected = res
        step.kind = "other"
        step.target = None
        err = res
    ledger.result(step, res, err)


def _text_of_msg(m: dict) -> str:
    c = m.get("content")
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        return "\n".join(
            b.get("text") for b in c if isinstance(b, dict) and isinstance(b.get("text"), str)
        )
    return ""


def sniff(doc: Any) -> bool:
    """A list of user/assistant messages with Cline's marks: its extra fields (``ts``,
    ``modelInfo``, ``metrics``), ``<environment_details>`` / ``<task>`` in user text, or an XML
    tool use in a reply."""
    if not isinstance(doc, list) or not doc:
        return False
    head = [m for m in doc[:20] if isinstance(m, dict)]
    if not head or not all(m.get("role") in ("user", "assistant") and "content" in m for m in head):
        return False
    for m in head:
        if "modelInfo" in m or ("metrics" in m and "ts" in m):
            return True
        text = _text_of_msg(m)
        if m.get("role") == "user" and (
            "<environment_details>" in text or text.lstrip().startswith("<task>")
        ):
            return True
        if m.get("role") == "assistant" and _TOOL_RE.search(text):
            return True
    return False
