"""Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl``).

Each line is ``{"timestamp", "type", "payload"}``: ``session_meta`` (the session id, cwd,
``cli_version``), ``turn_context``, ``response_item`` (a Responses API item: ``message``,
``reasoning``, ``function_call`` / ``function_call_output``, ``custom_tool_call`` /
``custom_tool_call_output``, ``local_shell_call``, ``web_search_call``...), ``event_msg`` (UI
events; ``token_count`` carries each API call's ``last_token_usage``) and ``compacted``.
Paginated rollouts (``history_mode: "paginated"`` in ``session_meta``, an ``ordinal`` on every
line; Codex 0.151 and later, and older rollouts ``codex migrate-rollouts`` converted) keep the
same response items and ``token_count`` events, but write completed turn items
(``event_msg`` ``item_completed``: ``UserMessage``, ``McpToolCall``, ``CommandExecution``...)
where legacy rollouts wrote ``user_message`` and ``mcp_tool_call_end`` events; both are read.
Consecutive model-side items form one API call. Tool outputs go through the ``codex`` output
normaliser (taxonomy/profiles.py): the per-call header (``Chunk ID``, ``Wall time``, ``Process
exited with code N``, ``Original token count``) is removed, the exit code kept in
``meta["returncode"]``; a ``write_stdin`` poll (no input) keeps its ``Chunk ID`` line, as each
poll reads a new chunk of the running process's output, and a command still running when its
call returned keeps its ``Process running with session ID N`` line (each run is a new session). A ``web_search_call`` is an observe step answered inside the API call.
In code mode (0.15x) the model's calls are a JavaScript program run by the custom tool ``exec``:
a program that is one ``tools.exec_command`` or ``tools.apply_patch`` call and the text of its
result is read as that call (``_jslit.single_call``), any other program as one ``exec`` step;
the program's output header (status, wall time) is removed, a failed program is an error, and
the output of a program still running keeps its cell and call id, as a poll keeps its chunk.
Arguments that are not JSON, and calls the harness answered "unsupported call", are rejected
turns (nothing ran). ``yield_time_ms``, ``max_output_tokens`` and ``justification`` are dropped
from the arguments (they shape the answer, not what runs). Every step's ``ref`` is ``{"line": N}``.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from .._json import loads
from ..taxonomy.profiles import normalise_output
from ._base import Ledger, Trace, text_of
from ._io import Ctx
from ._jslit import single_call
from ._walk import (
    RESPONSES_BUILTIN_CALLS,
    RESPONSES_CALLS,
    RESPONSES_OUTPUTS,
    RESPONSES_PASSED,
    ResponsesWalker,
    rollout_session,
    token_count_usage,
    unwrap_output,
)

NAME = "codex"
PROFILE = "codex"

RECORD_TYPES = frozenset(
    {
        "session_meta",
        "response_item",
        "event_msg",
        "turn_context",
        "compacted",
        "token_usage_record",
        "inter_agent_communication",
    }
)
#: Record types of newer CLIs that carry no model turn, tool call or usage: the environment
#: state the CLI tells the model and metadata of messages between agents (0.14x), a security
#: review's risk score, facts the host keeps outside the model's context (a person's verified
#: answers) and realtime presentation facts (0.16x; codex-rs/history ``RolloutItem``).
PASSED_RECORD_TYPES = frozenset(
    {
        "world_state",
        "inter_agent_communication_metadata",
        "security_risk_score",
        "retained_context",
        "realtime_item",
    }
)
_CALLS = RESPONSES_CALLS | RESPONSES_BUILTIN_CALLS
_OUTPUTS = RESPONSES_OUTPUTS
#: response_item payload types that are read (calls, outputs, text) or knowingly passed over.
ITEM_TYPES = (
    _CALLS
    | _OUTPUTS
    | RESPONSES_PASSED
    | frozenset({"message", "reasoning", "ghost_snapshot", "other", "agent_message"})
)
# Arguments that shape how output comes back, not what runs: dropped so repeats compare equal.
_NOISE_ARGS = frozenset({"yield_time_ms", "max_output_tokens", "justification"})
# Codex's answer to a patch whose lines it could not find (codex-rs apply-patch: the patch is
# verified whole before any file is written)
_PATCH_FAILED = "apply_patch verification failed"
_REJECT_PREFIXES = (
    "unsupported call",
    "failed to parse function arguments",
    "unsupported custom tool call",
)
# Codex's multi-agent tools that wait (``wait`` of the first collab tools, ``wait_agent`` of
# multi_agent_v1 / v2, under a namespace such as ``collaboration``): the answer says whether a
# sub-agent's mailbox changed before the timeout, which depends on time, not on the arguments
_WAIT_TOOLS = frozenset({"wait", "wait_agent"})


def _agent_wait(step: Any) -> bool:
    """*step* waits for sub-agents (code mode's ``wait`` on a program's cell, ``cell_id``, is
    read as that program's output)."""
    return step.name.rsplit("__", 1)[-1] in _WAIT_TOOLS and not (
        isinstance(step.args, dict) and "cell_id" in step.args
    )


# The header of a code-mode program's output (``exec``, and ``wait`` on a program still running):
# its status, then a wall time that differs on every run.
_CODE_HEAD = re.compile(
    r"Script (?:completed|(?P<failed>failed)|running with cell ID (?P<cell>\S+))\n"
    r"Wall time:? [0-9.]+ ?\w*\nOutput:\n"
)


def _output(raw: Any) -> tuple[Any, dict]:
    """An output's text and facts: Codex wraps shell outputs in a JSON string
    ``{"output", "metadata": {"exit_code"}}`` (older CLIs) or a text header (newer ones)."""
    raw, facts = unwrap_output(raw)
    text = text_of(raw)
    if isinstance(raw, list) and isinstance(text, list):
        # content items ({"type": "input_text", "text"} / images): keep the text of the text items
        texts = [
            p.get("text") for p in raw if isinstance(p, dict) and isinstance(p.get("text"), str)
        ]
        if texts and len(texts) == len(raw):
            text = "\n".join(texts)
    if isinstance(text, str) and text.startswith("Script "):
        code = _code_output(raw, text)
        if code is not None:
            return code
    body, more = normalise_output(PROFILE, text)
    facts.update(more)
    if body is not text:
        # the chunk's id, wherever the header has it (0.118 writes `Command: …` first)
        head = text[: len(text) - len(body)]
        at = head.find("\nChunk ID: ") + 1 if not head.startswith("Chunk ID: ") else 0
        if head.startswith("Chunk ID: ", at):
            facts["chunk"] = head[at + 10 : head.find("\n", at)].strip()
    return body, facts


def _code_output(raw: Any, text: str) -> tuple[str, dict] | None:
    """The output of a code-mode program without its header, and its facts: ``script_failed``
    (the program threw), ``code_cell`` (it is still running: what it printed so far, the rest
    comes from a later ``wait``); None when *text* has no such header. The header is the first
    content item (the printed text the items after it, one per ``text()``) or the start of the
    only one."""
    m = _CODE_HEAD.match(text)
    if m is None:
        return None
    first = raw[0] if isinstance(raw, list) and raw else None
    end = m.end()
    if isinstance(first, dict) and first.get("text") == m.group() and len(text) > end:
        end += 1  # the line break that joined the header's item to the next
    facts: dict = {}
    if m.group("failed") is not None:
        facts["script_failed"] = True
    elif m.group("cell") is not None:
        facts["code_cell"] = m.group("cell")
    return text[end:], facts


def _exec_result(text: str) -> tuple[str, dict] | None:
    """The output and facts of an ``exec_command`` result a code-mode program printed whole
    (``{"chunk_id", "wall_time_seconds", "exit_code" | "session_id", "original_token_count",
    "output"}``), else None."""
    body = text.strip()
    if not body.startswith("{"):
        return None
    try:
        d = loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(d, dict) or not isinstance(d.get("output"), str):
        return None
    facts: dict = {}
    code = d.get("exit_code")
    if isinstance(code, int) and not isinstance(code, bool):
        facts["returncode"] = code
    sid = d.get("session_id")
    if isinstance(sid, (str, int)) and not isinstance(sid, bool):
        facts["exec_session"] = str(sid)
    return d["output"], facts


class _Walker(ResponsesWalker):
    reasoning_keys = ("summary", "content")

    def __init__(self, ledger: Ledger, ctx: Ctx) -> None:
        super().__init__(ledger, ctx)
        self.mcp_errors: dict[str, Any] = {}  # call id -> the error its MCP server answered

    def ref(self, i: int) -> dict:
        lines = self.ctx.lines
        return {"line": lines[i] if lines is not None and i < len(lines) else i + 1}

    call_ref = ref

    def unknown(self, t: Any, i: int) -> None:
        if t not in ITEM_TYPES:
            self.ctx.bad(
                f"a response_item of type {t!r} this reader does not know; expected one of "
                f"{', '.join(sorted(ITEM_TYPES))}",
                i,
            )

    def function_call(self, name: str, args: Any, ok: bool, call_id: Any, i: int) -> None:
        if isinstance(args, dict) and not _NOISE_ARGS.isdisjoint(args):
            args = {k: v for k, v in args.items() if k not in _NOISE_ARGS}
        super().function_call(name, args, ok, call_id, i)

    def custom_call(self, name: str, text: Any, call_id: Any, i: int) -> None:
        """Code mode: an ``exec`` program that is one ``tools.exec_command`` or
        ``tools.apply_patch`` call and the text of its result is that call, made directly
        (classified, compared and charged as one); any other program is one ``exec`` step, as
        it runs (it may write anything)."""
        if name == "exec" and isinstance(text, str):
            got = single_call(text)
            if got is not None:
                tool, args, whole = got
                if (
                    tool == "exec_command"
                    and isinstance(args, dict)
                    and isinstance(args.get("cmd"), str)
                ):
                    args = {k: v for k, v in args.items() if k not in _NOISE_ARGS}
                elif tool == "apply_patch" and isinstance(args, str):
                    args, whole = {"input": args}, False  # its result is the patch tool's text
                else:
                    args = None
                if args is not None:
                    self.ledger.call(
                        tool,
                        args,
                        call_id,
                        args_len=len(text) + len(name),
                        meta={"code_mode": "result" if whole else "output"},
                        ref=self.call_ref(i),
                    )
                    return
        super().custom_call(name, text, call_id, i)

    def read_output(self, raw: Any) -> tuple[Any, dict]:
        return _output(raw)

    def answered(self, step: Any, result: Any, facts: dict) -> None:
        if facts.get("code_cell") is not None:
            # A program still running: what it printed so far, the rest comes from a later
            # `wait` (whose wall time is the same fixed wait each time), so this output is
            # never the same as another call's.
            result = f"Script running with cell ID {facts['code_cell']} ({step.call_id})\n{result}"
        elif step.meta.get("code_mode") == "result" and isinstance(result, str):
            got = _exec_result(result)
            if got is not None:
                result, more = got
                facts = {**facts, **more}
        args = step.args
        chars = None
        if (
            facts.get("code_cell") is None
            and _agent_wait(step)
            and isinstance(result, str)
            and not result.startswith(_REJECT_PREFIXES)
        ):
            # A wait for sub-agents ends when one of them writes (or at the timeout): two waits
            # with the same answer waited for two different things, as two polls read two
            # chunks, so the call id stays in what the wait returned and a wait is never a
            # repeat of the one before (its tokens are still the answer's own)
            chars = len(result)
            result = f"Wait ({step.call_id or step.ref})\n{result}"
        elif (
            step.name == "write_stdin"
            and facts.get("chunk")
            and isinstance(args, dict)
            and not args.get("chars")
            and isinstance(result, str)
        ):
            # A poll (no input) waits for the next chunk of a running process's output: two
            # polls never read the same chunk, even when both came back empty, so the chunk's
            # id stays in what the poll returned and a wait is never a repeat of the one before.
            result = f"Chunk ID: {facts['chunk']}\n{result}"
        elif (
            facts.get("exec_session") is not None
            and facts.get("returncode") is None
            and step.name != "write_stdin"
            and isinstance(result, str)
        ):
            # A command still running when its call returned: what it printed so far, the rest
            # comes from polls of its session. Each run is a new session, so its id stays in
            # the result: the same command started again is never the same outcome.
            result = f"Process running with session ID {facts['exec_session']}\n{result}"
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
        error = self.mcp_errors.pop(step.call_id, None)
        if facts.get("script_failed") and error is None:
            error = result if isinstance(result, str) and result else "script failed"
        if (
            step.name == "apply_patch"
            and isinstance(result, str)
            and result.startswith(_PATCH_FAILED)
            and error is None
        ):
            # the patch's context did not match: Codex checks it before writing anything
            error = result
            step.no_op = True
        self.ledger.result(step, result, error, chars=chars)

    def mcp_end(self, payload: dict) -> None:
        """An ``mcp_tool_call_end`` event: the MCP server's own answer says whether the call
        failed (``isError``, or an ``Err``), which the output item's text does not."""
        self.mcp_failed(payload.get("call_id"), _mcp_error(payload.get("result")))

    def mcp_item(self, item: dict) -> None:
        """A completed ``McpToolCall`` turn item (paginated rollouts keep it instead of the
        ``mcp_tool_call_end`` event): its ``id`` is the call's id; a ``failed`` status comes
        with the server's result (``isError``) or a transport ``error: {message}``."""
        if item.get("status") != "failed":
            return
        error = _mcp_item_error(item)
        self.mcp_failed(item.get("id"), error if error is not None else "error")

    def mcp_failed(self, cid: Any, error: Any) -> None:
        """The MCP call *cid* failed with *error*: on its step when its output was read,
        else kept for the output."""
        if error is None or not isinstance(cid, str):
            return
        for step in reversed(self.ledger.steps):  # the output item came first: set it there
            if step.call_id == cid:
                if step.result is not None and step.error is None:
                    step.error = error
                    return
                break
        self.mcp_errors[cid] = error


def _mcp_error(result: Any) -> Any:
    """The error of an MCP call's result (``{"Ok": {"content", "isError": true}}`` or
    ``{"Err": ...}``), else None."""
    if not isinstance(result, dict):
        return None
    if result.get("Err") is not None:
        return result["Err"]
    ok = result.get("Ok")
    if isinstance(ok, dict) and ok.get("isError") is True:
        content = ok.get("content")
        text = text_of(content) if isinstance(content, list) else content
        return text if isinstance(text, str) and text else "error"
    return None


def _mcp_item_error(item: dict) -> Any:
    """The error of a failed ``McpToolCall`` turn item, else None: the transport error's
    message, or the text of a result the server marked ``isError``."""
    err = item.get("error")
    if isinstance(err, dict) and isinstance(err.get("message"), str) and err["message"]:
        return err["message"]
    if isinstance(err, str) and err:
        return err
    result = item.get("result")
    if isinstance(result, dict) and (
        result.get("isError") is True or result.get("is_error") is True
    ):
        content = result.get("content")
        text = text_of(content) if isinstance(content, list) else content
        return text if isinstance(text, str) and text else "error"
    return None


def parse(doc: Any, ctx: Ctx) -> list[Trace]:
    """One trace from a Codex rollout."""
    records = doc if isinstance(doc, list) else [doc]
    session = ctx.stem
    version = None
    p = rollout_session(records)
    paginated = False
    if p is not None:
        session = str(p.get("id") or session)
        version = p.get("cli_version")
        paginated = p.get("history_mode") == "paginated"
    elif records and _is_old_header(records[0]):
        session = str(records[0].get("id") or session)
    ledger = Ledger(session, ctx.profile(PROFILE), unknown_redacted=True)
    w = _Walker(ledger, ctx)
    replay = _parent_replay(records, p)
    meta: dict[str, Any] = {}
    if replay is not None:
        meta["inherited_records"] = replay[1] - replay[0]
        meta["forked_from"] = records[replay[0]]["payload"].get("id")
    for i, r in enumerate(records):
        if replay is not None and replay[0] <= i < replay[1]:
            continue  # the parent's history, copied in: the parent's own rollout has it
        if not isinstance(r, dict):
            ctx.bad(f"a record must be an object, got {type(r).__name__}", i)
            continue
        rtype = r.get("type")
        payload = r.get("payload")
        if rtype is not None and not isinstance(rtype, str):
            ctx.bad(f"a rollout record whose type is {type(rtype).__name__}, not a string", i)
            continue
        if rtype not in RECORD_TYPES:
            if rtype in PASSED_RECORD_TYPES:
                continue
            if rtype is None and ("record_type" in r or _is_old_header(r)):
                continue  # older rollouts: a header line and state lines
            if rtype in ITEM_TYPES:
                if rtype == "message" and r.get("role") == "user" and _typed(r):
                    ledger.user()
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
        if (
            paginated
            and rtype == "response_item"
            and payload.get("type") == "message"
            and payload.get("role") == "user"
            and _typed(payload)
        ):
            # A paginated rollout mirrors only some of the person's messages as UserMessage
            # items (on real 0.15x rollouts 33 of 116 answers to the agent's questions, 24 of
            # 40 prompts with an image): the message item itself is the person's unless Codex
            # wrote it.
            ledger.user()
        if rtype == "event_msg":
            et = payload.get("type")
            if et == "mcp_tool_call_end":
                w.mcp_end(payload)
            elif et == "user_message":
                # what the person typed (the response item beside it may carry text Codex adds)
                ledger.user()
            elif et == "item_completed":
                # Paginated rollouts (session_meta.history_mode "paginated", Codex 0.151+)
                # keep completed turn items instead of the legacy user_message and
                # mcp_tool_call_end events; calls and outputs are still response items.
                item = payload.get("item")
                if isinstance(item, dict):
                    it = item.get("type")
                    if it == "UserMessage":
                        ledger.user()
                    elif it == "McpToolCall":
                        w.mcp_item(item)
                    elif it == "token_count":
                        # an API call's usage written as a completed item (public readers
                        # of paginated rollouts take it there too); the first usage after a
                        # call is its own, so a token_count event beside it counts once
                        usage = token_count_usage(item)
                        if usage is not None:
                            w.usage(*usage)
        w.rollout_record(rtype, payload, i)
    if version:
        meta["cli_version"] = version
    for step in ledger.steps:
        if (
            step.result is None
            and step.error is None
            and (
                step.name == "write_stdin"
                and isinstance(step.args, dict)
                and not step.args.get("chars")
                or _agent_wait(step)
            )
        ):
            # a poll (or a wait for sub-agents) the rollout never answered (it was written while
            # the command still ran): which chunk it would have read is unknown, and polling
            # again is how a wait is done, so it is no repeat of the poll before it and nothing
            # it shows was read
            step.meta["not_run"] = True
    return [ledger.trace(source=ctx.path, fmt=NAME, meta=meta or None)]


def _uuid7_ms(value: Any) -> int | None:
    """The creation time (ms since the epoch) a UUIDv7 string holds, else None."""
    if not isinstance(value, str) or len(value) != 36 or value[14] != "7":
        return None
    try:
        return int(value[:8] + value[9:13], 16)
    except ValueError:
        return None


def _forked(meta: dict) -> bool:
    """The thread's ``session_meta`` says it came from another one: ``forked_from_id``, a
    ``parent_thread_id``, a sub-agent ``source`` or ``thread_source``."""
    source = meta.get("source")
    return bool(
        meta.get("forked_from_id")
        or meta.get("parent_thread_id")
        or (isinstance(source, dict) and "subagent" in source)
        or meta.get("thread_source") in ("subagent", "guardian_review")
    )


def _parent_replay(records: list, meta: Any) -> tuple[int, int] | None:
    """``(start, end)`` of the records a forked rollout copied from its parent, else None.

    A legacy rollout of a forked thread (a sub-agent spawned with its parent's context) writes
    its own ``session_meta``, then the parent's whole rollout (its ``session_meta`` first) and
    then its own turns. The copy is told by time: thread and turn ids are UUIDv7, so a turn
    the parent ran began before the fork created this thread, and the thread's own first turn
    (``task_started`` / ``turn_context``) after it. Nothing is cut unless the thread's meta says
    it forked, both ids are UUIDv7 and the copy starts with a ``session_meta`` of another
    thread; paginated rollouts refer to the parent's history (``history_base``) instead of
    copying it."""
    if not isinstance(meta, dict) or meta.get("history_mode") == "paginated" or not _forked(meta):
        return None  # (no scan of the records for a thread that says it forked from none)
    own = meta.get("id")
    born = _uuid7_ms(own)
    if born is None:
        return None
    start = None
    for i, r in enumerate(records):
        if isinstance(r, dict) and r.get("type") == "session_meta":
            payload = r.get("payload")
            if (
                isinstance(payload, dict)
                and isinstance(payload.get("id"), str)
                and payload["id"] != own
            ):
                start = i  # another thread's meta (its own, rewritten, carries its own id)
                break
    if start is None:
        return None
    seen_turn = False
    for j in range(start + 1, len(records)):
        r = records[j]
        if not isinstance(r, dict):
            continue
        payload = r.get("payload")
        if not isinstance(payload, dict):
            continue
        if r.get("type") == "event_msg" and payload.get("type") == "task_started":
            turn = payload.get("turn_id")
        elif r.get("type") == "turn_context":
            turn = payload.get("turn_id")
        else:
            continue
        at = _uuid7_ms(turn)
        if at is None:
            return None  # turns without time-ordered ids: the copy's end cannot be told
        if at >= born:
            return start, j
        seen_turn = True
    # the parent's turns and none of this thread's own (it ended before its first turn): all
    # copied; no turn at all says nothing, and nothing is cut
    return (start, len(records)) if seen_turn else None


#: How the user-role messages Codex writes itself begin (the environment, AGENTS.md, the
#: user's instructions file, skill and plugin blocks, the note on an aborted turn, its own
#: recovery notices, a hook's prompt): context, not a message from the person.
_INJECTED = (
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md",
    "<INSTRUCTIONS>",
    "<skill>",
    "<recommended_plugins>",
    "<turn_aborted>",
    "<codex_internal_context",
    "<hook_prompt",
)


def _typed(item: dict) -> bool:
    """A user-role message item (of an older rollout with no ``event_msg`` records, or of a
    paginated one) that the person wrote, not one of the context messages Codex adds. Its
    text blocks are read, so a prompt with a pasted image counts."""
    content = item.get("content")
    if isinstance(content, list):
        text = "\n".join(
            p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    else:
        text = text_of(content)
    return isinstance(text, str) and bool(text.strip()) and not text.lstrip().startswith(_INJECTED)


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
