"""The walks that several readers share: the content blocks of Anthropic messages (``anthropic``
and ``claude-code``) and OpenAI Responses items (``openai-responses`` and ``codex``).

Each reader keeps what is its own (Claude Code's refusals and command notes, Codex's output
header and noise arguments) as parameters or overridden methods; the walk itself stands once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from .._json import loads
from ._base import Ledger, parse_args, record_ref, text_len, text_of
from ._io import Ctx


def _as_dict(v: Any) -> dict[str, Any]:
    """*v* when it is an object, else an empty one (a missing or malformed field)."""
    return v if isinstance(v, dict) else {}


def call_unparsed(
    ledger: Ledger, name: str, args: Any, call_id: Any, *, args_len: int | None = None
) -> Any:
    """Record a call whose arguments are not JSON: nothing can run it, the harness rejects it
    (a rejected turn; a later answer of the harness replaces the description)."""
    bad = ledger.call(
        name,
        args,
        call_id,
        args_len=args_len,
        kind="other",
        target=None,
        meta={"unparsed_args": True},
        reads=(),
        writes=(),
    )
    bad.rejected = "arguments are not valid JSON"
    return bad


# -- Anthropic Messages content blocks ------------------------------------------------------


def tool_result_content(block: dict) -> Any:
    """A tool_result block's content as text when it is text."""
    return text_of(block.get("content"))


#: Anthropic content blocks that are calls: client tools (``tool_use``), tools the API runs
#: itself (``server_tool_use``: web search, web fetch, code execution...) and MCP connector tools.
ANTHROPIC_CALLS = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})


def server_tool_result(content: Any) -> tuple[Any, Any, Any]:
    """(result, error, returncode) of an assistant-side ``*_tool_result`` block's content: the
    answer of a tool the API ran inside the call (``web_search_tool_result``,
    ``bash_code_execution_tool_result``, ``mcp_tool_result``...). An error is a content object
    whose type ends in ``_error`` (its ``error_message`` or ``error_code``)."""
    if isinstance(content, dict):
        t = content.get("type")
        if isinstance(t, str) and t.endswith("_error"):
            return content, content.get("error_message") or content.get("error_code") or True, None
        if isinstance(content.get("stdout"), str):
            text = content["stdout"]
            err = content.get("stderr")
            if isinstance(err, str) and err:
                text = f"{text}\n{err}" if text else err
            rc = content.get("return_code")
            return text, None, rc if isinstance(rc, int) and not isinstance(rc, bool) else None
        for key in ("content", "text"):
            if isinstance(content.get(key), str):
                return content[key], None, None
        return content, None, None
    return text_of(content), None, None


def anthropic_assistant_blocks(
    content: Any,
    ledger: Ledger,
    ctx: Ctx,
    index: int,
    *,
    ref: dict | None = None,
    described: frozenset = frozenset(),
) -> None:
    """Record an assistant message's content: its call blocks (:data:`ANTHROPIC_CALLS`) as calls
    (with *ref*, else the turn's), the results of the tools the API ran (``*_tool_result`` blocks
    in the same message) paired with them, its text and thinking blocks (or a string content)
    as the turn's reply text. The ``description`` argument of the tools in *described* is
    dropped: it is the model's note on the call, different on every repeat of it."""
    if isinstance(content, str):
        if content:
            ledger.add_text(content)
        return
    if not isinstance(content, list):
        return
    for b in content:
        if not isinstance(b, dict):
            continue
        t = b.get("type")
        if t in ANTHROPIC_CALLS:
            name = b.get("name")
            if not isinstance(name, str):
                ctx.bad(f"a {t} block without a name", index)
                continue
            args = b.get("input")
            if name in described and isinstance(args, dict) and "description" in args:
                args = {k: v for k, v in args.items() if k != "description"}
            server = b.get("server_name")
            if t == "mcp_tool_use" and isinstance(server, str) and server:
                name = f"mcp__{server}__{name}"  # the MCP connector's tool, named as MCP names go
            ledger.call(name, args, b.get("id"), ref=ref)
        elif t == "text" or t == "thinking":
            text = b.get(t)
            if isinstance(text, str) and text and (t == "text" or text.strip()):
                ledger.add_text(text)
            elif t == "thinking":
                # the API withheld the thinking's text (its signature stands for it): the
                # turn's output holds reasoning no text says
                ledger.hidden_reasoning()
        elif t == "redacted_thinking":
            ledger.hidden_reasoning()
        elif isinstance(t, str) and t.endswith("_tool_result") and "tool_use_id" in b:
            step = ledger.pair(b.get("tool_use_id"))
            res, err, rc = server_tool_result(b.get("content"))
            if step is None:
                ledger.orphans += 1
                ledger.context(text_len(res))
                continue
            if err is None and b.get("is_error"):
                err = res if isinstance(res, str) and res else True
            if rc is not None:
                step.meta["returncode"] = rc
            ledger.result(step, res, err)


def anthropic_user_blocks(
    content: Any,
    ledger: Ledger,
    *,
    refusals: tuple[str, ...] = (),
    normalise: Callable[[str], tuple[str, dict]] | None = None,
    cancelled: tuple[str, ...] = (),
) -> None:
    """Pair the tool_result blocks of a user message with their calls; other blocks (and a
    string content) are context. An ``is_error`` result is an error; one whose text starts
    (within 300 characters) with one of *refusals* is a call the harness refused: a rejected
    turn; one that starts (within 100) with one of *cancelled* is a call the harness never ran
    (``step.meta["not_run"]``). *normalise* (the harness's output normaliser) takes a text
    result's per-call noise out; the facts it returns go into the step's meta."""
    if not isinstance(content, list):
        ledger.context(text_len(content))
        return
    for b in content:
        if not isinstance(b, dict):
            continue
        if b.get("type") == "tool_result":
            step = ledger.pair(b.get("tool_use_id"))
            res = tool_result_content(b)
            if step is None:
                ledger.orphans += 1
                ledger.context(text_len(res))
                continue
            if normalise is not None and isinstance(res, str):
                res, facts = normalise(res)
                if facts:
                    step.meta.update(facts)
            err = None
            if b.get("is_error"):
                err = res if isinstance(res, str) and res else True
                if refusals and isinstance(res, str) and any(x in res[:300] for x in refusals):
                    step.rejected = res
                    step.kind = "other"
                    step.target = None
                elif cancelled and isinstance(res, str) and any(x in res[:100] for x in cancelled):
                    step.meta["not_run"] = True
            ledger.result(step, res, err)
        else:
            ledger.context(text_len(b.get("text")))


# -- OpenAI Responses items -------------------------------------------------------------------

#: Calls the client runs, answered by a ``*_output`` item with the same ``call_id``.
RESPONSES_CALLS = frozenset(
    {
        "function_call",
        "custom_tool_call",
        "local_shell_call",
        "shell_call",
        "apply_patch_call",
        "computer_call",
        "tool_search_call",
    }
)
#: Calls to the tools the Responses API runs itself: each item holds its own answer.
RESPONSES_BUILTIN_CALLS = frozenset(
    {"web_search_call", "code_interpreter_call", "file_search_call", "mcp_call"}
)
RESPONSES_OUTPUTS = frozenset(
    {
        "function_call_output",
        "custom_tool_call_output",
        "local_shell_call_output",
        "shell_call_output",
        "apply_patch_call_output",
        "computer_call_output",
        "tool_search_output",
    }
)
#: Items that are neither calls, outputs nor messages, knowingly passed over (tool listings,
#: approvals, references to earlier items, compaction, generated images).
RESPONSES_PASSED = frozenset(
    {
        "image_generation_call",
        "mcp_list_tools",
        "mcp_approval_request",
        "mcp_approval_response",
        "item_reference",
        "compaction",
        "compaction_summary",
    }
)


def shell_call_output(output: Any) -> tuple[Any, Any, Any]:
    """(text, error, returncode) of a ``shell_call_output``'s chunks (``stdout``, ``stderr``,
    ``outcome``: ``{"type": "exit", "exit_code"}`` or ``{"type": "timeout"}``)."""
    if not isinstance(output, list):
        return text_of(output), None, None
    texts, error, rc = [], None, None
    for chunk in output:
        if not isinstance(chunk, dict):
            continue
        for key in ("stdout", "stderr"):
            v = chunk.get(key)
            if isinstance(v, str) and v:
                texts.append(v)
        outcome = chunk.get("outcome")
        if isinstance(outcome, dict):
            if outcome.get("type") == "timeout":
                error = "timeout"
            code = outcome.get("exit_code")
            if isinstance(code, int) and not isinstance(code, bool):
                rc = code
    return "\n".join(texts), error, rc


def unwrap_output(raw: Any) -> tuple[Any, dict]:
    """A call output's content and facts: Codex shell outputs are a JSON string ``{"output",
    "metadata": {"exit_code"}}`` (the exit code becomes ``returncode``), some outputs an object
    with ``content``; the content comes back through :func:`text_of`."""
    facts: dict = {}
    if isinstance(raw, str) and raw.startswith("{") and '"metadata"' in raw:
        try:
            d = loads(raw)
        except orjson.JSONDecodeError:
            d = None
        if isinstance(d, dict) and "output" in d:
            md = d.get("metadata")
            if isinstance(md, dict) and "exit_code" in md:
                facts["returncode"] = md["exit_code"]
            raw = d["output"]
    if isinstance(raw, dict):
        if "content" in raw:
            raw = raw["content"]
        elif raw.get("type") in ("input_text", "output_text") and isinstance(raw.get("text"), str):
            raw = raw["text"]  # one content item instead of a list of them (Codex 0.14x)
    return raw, facts


def rollout_session(records: list) -> dict | None:
    """The ``session_meta`` payload among the first records of a Codex rollout, if any."""
    for r in records[:5]:
        if (
            isinstance(r, dict)
            and r.get("type") == "session_meta"
            and isinstance(r.get("payload"), dict)
        ):
            return r["payload"]
    return None


def token_count_usage(payload: dict) -> tuple[dict | None, Any] | None:
    """The ``last_token_usage`` of a Codex ``event_msg`` ``token_count`` payload (None when
    only the running total is written) and the running total beside it (``total_token_usage``,
    None when absent), if the payload has either."""
    if payload.get("type") != "token_count":
        return None
    info = payload.get("info")
    if not isinstance(info, dict):
        return None
    last = info.get("last_token_usage")
    total = info.get("total_token_usage")
    if isinstance(last, dict):
        return last, total
    if isinstance(total, dict):
        return None, total
    return None


def _usage_delta(total: dict, before: Any) -> dict | None:
    """What a running total grew by since *before* (the previous one): the usage of the API
    call between them, or None when *before* is unknown or any counter went down."""
    if not isinstance(before, dict):
        return None
    out: dict[str, int] = {}
    for k, v in total.items():
        b = before.get(k, 0)
        if type(v) is not int or type(b) is not int:
            continue
        if v < b:
            return None
        out[k] = v - b
    return out or None


# what a web search action names (a query, a page, a pattern in it)
_WEB_NAMED = frozenset({"query", "queries", "url", "pattern"})


class ResponsesWalker:
    """Walks Responses items in order: consecutive model-side items (reasoning, assistant
    messages, calls) are one API call (a turn), outputs are paired with their calls by
    ``call_id``, other messages are context. Subclasses say what is theirs: the turn's ref, the
    arguments of a ``function_call``, further call types, how an output is read and what an
    answered call learns from it, what an unknown item type means."""

    calls = RESPONSES_CALLS | RESPONSES_BUILTIN_CALLS
    outputs = RESPONSES_OUTPUTS
    reasoning_keys: tuple[str, ...] = ("summary",)

    def __init__(self, ledger: Ledger, ctx: Ctx) -> None:
        self.ledger = ledger
        self.ctx = ctx
        self.model_side = False  # the previous item came from the model
        self.turn_has_usage = False
        self.last_total: Any = None  # the running total of the last usage read (Codex)
        self.with_text = True  # read reply text and reasoning into the turn

    # -- what subclasses adapt ----------------------------------------------------------------
    def ref(self, i: int) -> dict | None:
        """The ref of a turn started by record *i*."""
        return record_ref(self.ctx.lines, i)

    def call_ref(self, i: int) -> dict | None:
        """The ref of a call at record *i* (None: its turn's)."""
        return None

    def function_call(self, name: str, args: Any, ok: bool, call_id: Any, i: int) -> None:
        self.ledger.call(
            name, args, call_id, meta=None if ok else {"unparsed_args": True}, ref=self.call_ref(i)
        )

    def custom_call(self, name: str, text: Any, call_id: Any, i: int) -> None:
        """A ``custom_tool_call``: a tool whose input is free text (``input``)."""
        self.ledger.call(name, {"input": text}, call_id, ref=self.call_ref(i))

    def other_call(self, it: dict, t: str, call_id: Any, i: int) -> None:
        """A call to a tool the API ran inside the call (:data:`RESPONSES_BUILTIN_CALLS`): the
        item holds the call and its answer. A web search's results reached the model unseen (no
        characters to count); code interpreter logs, file search results and MCP output are
        in the item."""
        ledger = self.ledger
        status = it.get("status")
        error = None if status in (None, "completed") else status
        chars = None
        if t == "web_search_call":
            action = _as_dict(it.get("action"))
            name, args, result, chars = (
                "web_search",
                {k: v for k, v in action.items() if v is not None},
                None,
                0,
            )
            if not _WEB_NAMED.intersection(args):
                # an action that names no query, page or pattern (Codex 0.118 writes
                # `open_page` with no url: a result of the search before, which it does not
                # say): what it looked at is unknown, so it is known by its place alone and
                # repeats no other
                args["at"] = self.call_ref(i)
        elif t == "code_interpreter_call":
            name, args = "code_interpreter", {"code": it.get("code")}
            logs: list[str] = [
                o["logs"]
                for o in it.get("outputs") or ()
                if isinstance(o, dict) and isinstance(o.get("logs"), str)
            ]
            result = "\n".join(logs) if logs else it.get("outputs")
        elif t == "file_search_call":
            name, args, result = "file_search", {"queries": it.get("queries")}, it.get("results")
        elif t == "mcp_call":
            raw = it.get("name")
            if not isinstance(raw, str):
                self.ctx.bad("an mcp_call without a name", i)
                return
            label = it.get("server_label")
            name = f"mcp__{label}__{raw}" if isinstance(label, str) and label else raw
            args, _ = parse_args(it.get("arguments"))
            result = it.get("output")
            if it.get("error"):
                error = it["error"]
        else:
            return
        step = ledger.call(name, args, call_id, ref=self.call_ref(i))
        ledger.result(step, result, error, chars=chars)
        ledger.server_tools()

    def read_output(self, raw: Any) -> tuple[Any, dict]:
        raw, facts = unwrap_output(raw)
        return text_of(raw), facts

    def answered(self, step: Any, result: Any, facts: dict) -> None:
        if facts:
            step.meta.update(facts)
        self.ledger.result(step, result)

    def unknown(self, t: Any, i: int) -> None:
        """An item of a type that is neither model-side, an output nor a message: reported
        unless it is one the Responses API has and nothing here needs
        (:data:`RESPONSES_PASSED`)."""
        if isinstance(t, str) and t not in RESPONSES_PASSED:
            self.ctx.bad(
                f"a Responses item of type {t!r} this reader does not know; expected a call, "
                f"an output, a message or one of {', '.join(sorted(RESPONSES_PASSED))}",
                i,
            )

    # -- the walk -----------------------------------------------------------------------------
    def start_turn(self, i: int, usage: Any = None) -> None:
        self.ledger.turn(usage, text="" if self.with_text else None, ref=self.ref(i))
        self.model_side = True
        self.turn_has_usage = usage is not None

    def usage(self, usage: Any, total: Any = None) -> None:
        """Usage reported after the items of an API call (Codex ``token_count`` events and
        ``token_usage_record`` lines); *total* is the thread's running total beside it. Codex
        writes the same usage again (a ``token_count`` beside the ``token_usage_record`` of
        the same response, or repeated with its totals unchanged once the next response has
        begun): a usage whose running total is the last one's spent nothing since, so it is
        no API call's and is not read. A usage ends its API call: Codex writes it once the
        response is complete, so a model item after it starts the next call's turn. Without
        *usage* (a ``token_count`` with the running total alone) the call's usage is what the
        total grew by since the last one; with no total before it in the file it is unknown
        (a resumed or forked thread's first total holds more than one call)."""
        if isinstance(total, dict) and total:
            if total == self.last_total:
                return
            if usage is None:
                usage = _usage_delta(total, self.last_total)
            self.last_total = total
        if usage is None:
            return
        if self.ledger.turns and not self.turn_has_usage:
            self.ledger.set_usage(usage)
            self.turn_has_usage = True
            self.model_side = False

    def rollout_record(self, rtype: str, payload: dict, i: int) -> None:
        """A Codex rollout record (its ``type`` and ``payload``) at record *i*: a response item,
        the usage of a ``token_count`` event or of a ``token_usage_record`` (a response's usage,
        0.16x), a message between agents (``inter_agent_communication``: context the model
        reads), or a compaction (the next item starts a turn)."""
        if rtype == "response_item":
            self.item(payload, i)
        elif rtype == "event_msg":
            usage = token_count_usage(payload)
            if usage is not None:
                self.usage(*usage)
        elif rtype == "token_usage_record":
            if isinstance(payload.get("usage"), dict):
                self.usage(payload["usage"], payload.get("thread_token_usage"))
        elif rtype == "inter_agent_communication":
            self.model_side = False
            content = payload.get("content")
            self.ledger.context(text_len(content) if isinstance(content, str) else 0)
        elif rtype == "compacted":
            self.model_side = False
            self.ledger.compacted()  # the summary (replacement_history) replaced what it saw

    def item(self, it: dict, i: int) -> None:
        t = it.get("type")
        if t is not None and not isinstance(t, str):
            self.ctx.bad(f"a response item whose type is {type(t).__name__}, not a string", i)
            return
        role = it.get("role")
        if t in self.calls or t == "reasoning" or (t == "message" and role == "assistant"):
            if not self.model_side:
                self.start_turn(i)
            self.model_item(it, t, i)
            return
        self.model_side = False
        if t in self.outputs:
            self.output(it, i)
        elif t == "message" or t == "agent_message" or role is not None:
            # agent_message: a message between a Codex agent and its sub-agents (author,
            # recipient): context like any other message
            self.ledger.context(text_len(text_of(it.get("content"))))
        else:
            self.unknown(t, i)

    def model_item(self, it: dict, t: str, i: int) -> None:
        ledger = self.ledger
        if t == "reasoning":
            if self.with_text:
                parts = []
                for key in self.reasoning_keys:
                    v = it.get(key)
                    if isinstance(v, list):
                        for p in v:
                            if isinstance(p, dict) and isinstance(p.get("text"), str) and p["text"]:
                                parts.append(p["text"])
                if parts:
                    ledger.add_text("\n".join(parts))
            return
        if t == "message":
            if self.with_text:
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
            ns = it.get("namespace")
            if isinstance(ns, str) and ns and not name.startswith(ns):
                # Codex 0.137+ names an MCP tool by its server's namespace and its own name
                # (``"namespace": "mcp__node_repl", "name": "js"``): the tool is both, as
                # Claude Code spells it, so two servers' tools of one name stay apart
                name = f"{ns}__{name}"
            args, ok = parse_args(it.get("arguments"))
            self.function_call(name, args, ok, cid, i)
        elif t == "custom_tool_call":
            name = it.get("name")
            if not isinstance(name, str):
                self.ctx.bad("a custom_tool_call without a name", i)
                return
            self.custom_call(name, it.get("input"), cid, i)
        elif t == "local_shell_call":
            action = _as_dict(it.get("action"))
            args = {k: v for k, v in action.items() if k != "type"}
            ledger.call("local_shell", args, cid, ref=self.call_ref(i))
        elif t == "shell_call":
            action = _as_dict(it.get("action"))
            cmds = action.get("commands")
            args = {"commands": cmds}
            script = (
                "\n".join(cmds)
                if isinstance(cmds, list) and all(isinstance(c, str) for c in cmds)
                else None
            )
            ledger.call("shell", args, cid, classify_args={"command": script}, ref=self.call_ref(i))
        elif t == "apply_patch_call":
            op = _as_dict(it.get("operation"))
            path = op.get("path") if isinstance(op.get("path"), str) and op.get("path") else None
            ledger.call(
                "apply_patch",
                op,
                cid,
                kind="mutate",
                target=path,
                writes=(path,) if path else None,
                ref=self.call_ref(i),
            )
        elif t == "computer_call":
            action = _as_dict(it.get("action"))
            ledger.call("computer", action, cid, kind="exec", ref=self.call_ref(i))
        elif t == "tool_search_call":
            # the model looks up tool definitions loaded on demand (Codex 0.140+); the tools
            # found enter the context as its output
            args, _ok = parse_args(it.get("arguments"))
            ledger.call("tool_search", args, cid, ref=self.call_ref(i))
        else:
            self.other_call(it, t, cid, i)

    def output(self, it: dict, i: int) -> None:
        ledger = self.ledger
        step = ledger.pair(it.get("call_id"))
        t = it.get("type")
        error = None
        if t == "shell_call_output":
            result, error, rc = shell_call_output(it.get("output"))
            facts = {"returncode": rc} if rc is not None else {}
        elif t == "tool_search_output":
            result, facts = it.get("tools"), {}
        elif t == "apply_patch_call_output" or t == "computer_call_output":
            result, facts = text_of(it.get("output")), {}
            if it.get("status") == "failed":
                error = result if isinstance(result, str) and result else True
                if t == "apply_patch_call_output" and step is not None:
                    step.no_op = True  # the patch did not apply: nothing was written
        else:
            result, facts = self.read_output(it.get("output"))
        if step is None:
            ledger.orphans += 1
            ledger.context(text_len(result))
            return
        if error is not None:
            step.error = error
        self.answered(step, result, facts)
