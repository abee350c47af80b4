"""OpenAI chat messages: assistant ``tool_calls`` answered by ``role: "tool"`` messages.

Accepts a list of messages, ``{"messages": [...]}``, or a JSONL file of messages. Usage is read
from ``message["usage"]`` or ``message["extra"]["response"]["usage"]`` (litellm/mini-swe-agent)
when a logger stored it. Each tool message is paired with the calls of the assistant message
right before it first (ids may repeat across a trace), see ``Ledger.pair``.

Every step's ``ref`` is ``{"message": i}`` (the index of its assistant message); the first step of
a turn carries the assistant's text (``content`` and, when the trace keeps it,
``reasoning_content``), and an assistant message without tool calls is a step of its own. A call
whose arguments are not valid JSON is a rejected step (``rejected`` is the harness's answer when
one follows, else a short description); so is a ``user`` message that reports a format error
(``extra.interrupt_type: "FormatError"``, mini-swe-agent 2.x), whose faulty turn the trace did not
keep.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._native_flag import NO_EXTENSIONS
from ._base import Ledger, Trace, parse_args, text_len, text_of
from ._io import Ctx
from ._walk import call_unparsed

NAME = "openai-chat"
PROFILE = "generic"

ResultHook = Callable[[Any, dict, Any], "tuple[Any, Any, dict | None]"]


def message_usage(m: dict) -> Any:
    """The usage dict stored with an assistant message, if any."""
    u = m.get("usage")
    if u is not None:
        return u
    extra = m.get("extra")
    if isinstance(extra, dict):
        resp = extra.get("response")
        if isinstance(resp, dict):
            return resp.get("usage")
    return None


def _walk_chat_py(
    messages: list,
    ctx: Ctx,
    ledger: Ledger,
    *,
    on_result: ResultHook | None = None,
    index_offset: int = 0,
) -> None:
    """Feed OpenAI-style chat messages into *ledger* (calls, results, context text).

    The pure reference of the compiled ``loopcore._native_ingest.walk_chat``; ``walk_chat`` is
    the live one of the two."""
    # This loop runs once per message of every chat-shaped trace: plain class checks, each
    # field read once, and bound methods in locals keep it cheap next to the JSON parse itself.
    turn = ledger.turn
    call = ledger.call
    pair = ledger.pair
    result = ledger.result
    for i, m in enumerate(messages):
        if m.__class__ is not dict:
            ctx.bad(f"a chat message must be an object, got {type(m).__name__}", i + index_offset)
            continue
        role = m.get("role")
        if role == "assistant":
            usage = m.get("usage")
            extra = m.get("extra")
            if extra.__class__ is not dict:
                extra = None
            elif usage is None:
                resp = extra.get("response")
                if resp.__class__ is dict:
                    usage = resp.get("usage")
            content = m.get("content")
            text = content if content.__class__ is str else text_of(content)
            if text.__class__ is not str:
                text = ""
            reasoning = m.get("reasoning_content")
            if reasoning.__class__ is str and reasoning:
                text = reasoning + "\n" + text if text else reasoning
            turn(usage, text=text, ref={"message": i + index_offset})
            calls = m.get("tool_calls")
            if not calls:
                if isinstance(m.get("function_call"), dict):
                    calls = [{"function": m["function_call"], "id": None}]
                else:
                    continue
            if calls.__class__ is not list:
                ctx.bad("tool_calls must be a list", i + index_offset)
                continue
            # mini-swe-agent stores each call's parsed command in extra.actions: use it
            # rather than parsing the arguments string a second time.
            actions = extra.get("actions") if extra is not None else None
            if actions.__class__ is not list or len(actions) != len(calls):
                actions = None
            for k, tc in enumerate(calls):
                fn = tc.get("function") if tc.__class__ is dict else None
                name = fn.get("name") if fn.__class__ is dict else None
                if name.__class__ is not str:
                    ctx.bad("a tool call without function.name", i + index_offset)
                    continue
                raw = fn.get("arguments")
                call_id = tc.get("id")
                args = None
                if actions is not None:
                    act = actions[k]
                    if (
                        act.__class__ is dict
                        and len(act) == 2
                        and act.get("tool_call_id") == call_id
                    ):
                        command = act.get("command")
                        if command.__class__ is str:
                            args = {"command": command}
                ok = True
                if args is None:
                    args, ok = parse_args(raw)
                args_len = (len(raw) if raw.__class__ is str else text_len(args)) + len(name)
                if ok:
                    call(name, args, call_id, args_len=args_len)
                else:
                    call_unparsed(ledger, name, args, call_id, args_len=args_len)
        elif role == "tool" or role == "function":
            step = pair(m.get("tool_call_id"), m.get("name"))
            content = m.get("content")
            if content.__class__ is not str:
                content = text_of(content)
            if step is None:
                ledger.orphans += 1
                ledger.context(text_len(content))
                continue
            error = None
            if on_result is not None:
                content, error, meta = on_result(step, m, content)
                if meta:
                    step.meta.update(meta)
            result(step, content, error)
            if step.rejected is not None and content.__class__ is str and content:
                step.rejected = content  # the harness's own answer
        else:
            content = m.get("content")
            extra = m.get("extra")
            if (
                role == "user"
                and extra.__class__ is dict
                and extra.get("interrupt_type") == "FormatError"
            ):
                # the harness rejected a turn the trace does not keep: that turn, rejected
                text = content if content.__class__ is str else text_of(content)
                turn(None, text="", ref={"message": i + index_offset})
                ledger.reject(text if text.__class__ is str and text else "format error")
                continue
            ledger.context(len(content) if content.__class__ is str else text_len(content))


if TYPE_CHECKING or NO_EXTENSIONS:
    walk_chat = _walk_chat_py
else:
    from .._native_ingest import walk_chat  # noqa: F401 (re-export)


def parse(doc: Any, ctx: Ctx) -> list[Trace]:
    """Traces from chat messages (one trace per list of messages)."""
    session = ctx.stem
    messages = doc
    if isinstance(doc, dict):
        messages = doc.get("messages")
        session = str(doc.get("id") or doc.get("session_id") or session)
    ledger = Ledger(session, ctx.profile(PROFILE))
    walk_chat(messages or [], ctx, ledger)
    return [ledger.trace(source=ctx.path, fmt=NAME)]


def sniff(records: list) -> bool:
    """True when the records look like chat messages with roles."""
    return any(
        isinstance(r, dict)
        and r.get("role") in ("assistant", "tool", "user", "system")
        and "parts" not in r
        for r in records
    )
