"""gemini-cli trajectories: the chat recording, both generations, and ``/chat save`` checkpoints.

* JSONL recording (``~/.gemini/tmp/<project>/chats/session-<time>-<id>.jsonl``, gemini-cli
  0.2x on): a metadata line ``{"sessionId", "projectHash", "startTime", ...}``, then one line per
  message write: a message record (``{"id", "timestamp", "type", "content", ...}``; a later line
  with the same ``id`` replaces the message in place, as gemini-cli's own loader does), ``{"$set":
  {...}}`` metadata updates and ``{"$rewindTo": <id>}``. gemini-cli's loader lets a ``$set`` of
  ``messages`` (compression, output masking, a cancelled turn) replace them all and a rewind
  drop that message and every later one; those calls were still made and billed, so every
  message recorded is read once (:func:`_jsonl_messages`), a rewound one's steps marked
  ``meta["rewound"]``.
* JSON recording (older): ``{"sessionId", "projectHash", "messages": [...]}``.
* Messages: ``type`` user / gemini / info / error / warning; a gemini message is one API call:
  ``content`` (its reply text), ``thoughts``, ``tokens`` (``input``, ``output``, ``cached``,
  ``thoughts``, ``tool``, ``total``) and ``toolCalls`` (``{"id", "name", "args", "result",
  "status"}``). A call's ``result`` can hold the function responses of its whole batch: each
  call takes the response with its own id. ``status: "error"`` / ``"cancelled"`` marks a failed
  call; a call to a tool the registry does not have is a rejected turn. A gemini message of
  tool calls alone (no text, thoughts or token counts) right after a gemini message that issued
  none, with only notices between, holds that response's calls (gemini-cli writes a response's
  calls on a new message when a hook's warning was shown after its text): they are read as
  that turn's. All-zero token counts are no usage (docs/formats.md). Results go through the
``gemini-cli`` output normaliser (taxonomy/profiles.py): the shell tool's per-call footer
(``Process Group PGID``, ``Background PIDs``) and ``<untrusted_context>`` wrapper are removed and
its ``Exit Code`` kept in ``meta["returncode"]``.
* Checkpoint: ``[{"role": "user"|"model", "parts": [{"text"} | {"functionCall": {"id",
  "name", "args"}} | {"functionResponse": {"id", "name", "response": {"output"|"error"}}}]}]``.
* Headless stream (``gemini -p ... --output-format stream-json``, packages/core/src/output/
  types.ts): one event a line, ``{"type": "init", "session_id", "model"}``, ``message``
  (``role`` user / assistant, ``content``, ``delta``), ``tool_use`` (``tool_name``,
  ``tool_id``, ``parameters``), ``tool_result`` (``tool_id``, ``status`` success / error,
  ``output`` or ``error.message``), ``error`` (a notice) and ``result`` (the run's totals in
  ``stats``, no count per API call: the turns are estimated). The assistant text after the
  results of a batch is the next API call.

Refs: ``{"line": N}`` (JSONL, the line of the message's last write) or ``{"message": i}``.
"""

from __future__ import annotations

import re
from typing import Any

from ..taxonomy.profiles import normalise_output
from ._base import Ledger, Trace, text_len, usage_of
from ._io import Ctx

NAME = "gemini-cli"
PROFILE = "gemini-cli"

MESSAGE_TYPES = frozenset({"user", "gemini", "info", "error", "warning"})
_NOT_FOUND = re.compile(r'Tool "[^"]*" not found')


def _response_value(resp: Any) -> tuple[Any, Any]:
    """(result, error) of a functionResponse.response."""
    if isinstance(resp, dict):
        if "error" in resp and resp.get("error"):
            return resp.get("error"), resp.get("error")
        if "output" in resp:
            return resp.get("output"), None
    return resp, None


def _result_parts(result: Any, call_id: Any = None, name: Any = None) -> tuple[Any, Any]:
    """A recorded tool result (a PartListUnion) as (result, error): the functionResponse with the
    call's id (a batch of responses can be recorded on each call of the batch), else the one
    with its name, else the first; text parts otherwise."""
    parts = result if isinstance(result, list) else [result]
    responses = [
        p["functionResponse"]
        for p in parts
        if isinstance(p, dict) and isinstance(p.get("functionResponse"), dict)
    ]
    if responses:
        chosen = None
        if call_id is not None:
            chosen = next((r for r in responses if r.get("id") == call_id), None)
        if chosen is None and name is not None:
            named = [r for r in responses if r.get("name") == name]
            chosen = named[0] if len(named) == 1 else None
        if chosen is None:
            chosen = responses[0]
        return _response_value(chosen.get("response"))
    texts = []
    for p in parts:
        if isinstance(p, dict) and isinstance(p.get("text"), str):
            texts.append(p["text"])
        elif isinstance(p, str):
            texts.append(p)
    if texts:
        return "\n".join(texts), None
    return result, None


def _content_text(content: Any) -> str:
    """The text of a message's content (a string or a list of parts); function parts left out."""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    out = []
    if isinstance(content, list):
        for p in content:
            if isinstance(p, str):
                out.append(p)
            elif isinstance(p, dict) and isinstance(p.get("text"), str):
                out.append(p["text"])
    return "\n".join(out)


def _thoughts_text(thoughts: Any) -> str:
    out = []
    if isinstance(thoughts, list):
        for t in thoughts:
            if isinstance(t, dict):
                s = " ".join(
                    x for x in (t.get("subject"), t.get("description")) if isinstance(x, str) and x
                )
                if s:
                    out.append(s)
    return "\n".join(out)


def _continues(m: dict, open_turn: bool) -> bool:
    """True when gemini message *m* holds the calls of the response before it: gemini-cli
    records a response's text as a message and its calls, once they ran, on the last message
    if that is the response's, else on a new message of no text, thoughts or token counts
    (zeros), which a notice shown in between (a hook's warning) makes it write. *open_turn*:
    the last message sent to or from the model is a gemini message that issued no call (a
    response with no call ends the model's turn, so only its own calls can follow it)."""
    return (
        open_turn
        and not _content_text(m.get("content"))
        and not _thoughts_text(m.get("thoughts"))
        and usage_of(m.get("tokens")) is None
        and isinstance(m.get("toolCalls"), list)
        and bool(m["toolCalls"])
    )


def _tool_responses(content: Any) -> bool:
    """True for the content of a ``user`` message that sends tool results back to the model
    (``functionResponse`` parts): gemini-cli 0.44+ records each batch of results so, besides
    the calls' own ``result`` that the walk reads them from. It is no message from the person,
    and its text is already counted with the calls."""
    if isinstance(content, dict):  # a PartListUnion may be one Part
        return "functionResponse" in content
    return isinstance(content, list) and any(
        isinstance(p, dict) and "functionResponse" in p for p in content
    )


def _synthetic_ack(m: dict) -> bool:
    """A gemini message gemini-cli wrote itself, not the model: after a read of binary content
    it records a thought part, "Binary content received. Proceeding with analysis.", signed
    ``skip_thought_signature_validator`` (geminiChat.ts), with no calls and no token counts.
    No API call made it, so it is no turn."""
    content = m.get("content")
    if isinstance(content, dict):
        content = [content]
    return (
        isinstance(content, list)
        and bool(content)
        and not m.get("toolCalls")
        and usage_of(m.get("tokens")) is None
        and all(
            isinstance(p, dict)
            and p.get("thought") is True
            and (
                p.get("thoughtSignature") == "skip_thought_signature_validator"
                or str(p.get("text", "")).startswith("Binary content received")
            )
            for p in content
        )
    )


def _recording(messages: list, ctx: Ctx, ledger: Ledger, refs: list[dict]) -> None:
    open_turn = False  # the last model-facing message is a gemini message with no call
    for i, m in enumerate(messages):
        ref = refs[i]
        if not isinstance(m, dict):
            ctx.bad(f"a message must be an object, got {type(m).__name__}", None, ref.get("line"))
            continue
        mtype = m.get("type")
        if mtype not in MESSAGE_TYPES:
            ctx.bad(
                f"a message of type {mtype!r} this reader does not know; expected one of "
                f"{', '.join(sorted(MESSAGE_TYPES))}",
                None if "line" in ref else i,
                ref.get("line"),
            )
            continue
        if mtype != "gemini":
            # info / error / warning messages are shown, never sent to the model
            if mtype == "user" and not _tool_responses(m.get("content")):
                ledger.user()  # tool results are on the gemini message: this is the person
                ledger.context(len(_content_text(m.get("content"))))
                open_turn = False
            continue
        if _synthetic_ack(m):
            continue
        if not _continues(m, open_turn):
            reply = "\n".join(
                x for x in (_thoughts_text(m.get("thoughts")), _content_text(m.get("content"))) if x
            )
            ledger.turn(m.get("tokens"), text=reply, ref=ref)
        calls = m.get("toolCalls") or []
        open_turn = not calls
        if not isinstance(calls, list):
            ctx.bad("toolCalls must be a list", None if "line" in ref else i, ref.get("line"))
            calls = []
        for tc in calls:
            if not isinstance(tc, dict) or not isinstance(tc.get("name"), str):
                ctx.bad("a tool call without a name", None if "line" in ref else i, ref.get("line"))
                continue
            status = tc.get("status")
            result, error = _result_parts(tc.get("result"), tc.get("id"), tc["name"])
            if status in ("error", "cancelled") and error is None:
                error = (
                    tc.get("resultDisplay") if isinstance(tc.get("resultDisplay"), str) else status
                )
            err_text = (
                error if isinstance(error, str) else result if isinstance(result, str) else ""
            )
            if status == "error" and _NOT_FOUND.search(err_text or ""):
                ledger.reject(err_text, tc["name"], tc.get("args"), ref=ref)
                continue
            args = tc.get("args")
            if (
                tc["name"] == "run_shell_command"
                and isinstance(args, dict)
                and "description" in args
            ):
                args = {k: v for k, v in args.items() if k != "description"}  # the model's note
            step = ledger.call(tc["name"], args, tc.get("id"), ref=ref)
            result, facts = normalise_output(PROFILE, result)
            if isinstance(error, str):
                error, more = normalise_output(PROFILE, error)
                facts = facts or more
            if facts.get("returncode") is not None:
                step.meta["returncode"] = facts["returncode"]
            if "output_file" in facts:
                step.meta["output_file"] = facts["output_file"]
            ledger.result(step, result, error)


def _jsonl_messages(records: list, ctx: Ctx) -> tuple[dict, list, list[dict], set[str]]:
    """(metadata, messages, refs, rewound ids) of a JSONL recording: every message it recorded,
    once, where it was first written, in its last version.

    gemini-cli's loader rebuilds the conversation the model sees now: a ``$set`` of
    ``messages`` (written when compression, output masking or a cancelled turn rewrites the
    history) replaces them all, and ``$rewindTo`` drops a message and every later one. Those
    calls were still made and billed, so here nothing is dropped: a message the ``$set`` lacks
    stays, one it holds keeps the version recorded before (the ``$set``'s copy may have its
    results masked), and one only the ``$set`` holds (a compression's summary) counts from
    there on. The messages a rewind drops stay too, their ids returned as rewound: the person's
    next message starts the evidence again, so nothing is charged across the rewind."""
    meta: dict = {}
    msgs: dict[str, Any] = {}
    lines: dict[str, int] = {}
    rewound: set[str] = set()
    for i, r in enumerate(records):
        line = ctx.lines[i] if ctx.lines is not None and i < len(ctx.lines) else i + 1
        if not isinstance(r, dict):
            ctx.bad(f"a record must be an object, got {type(r).__name__}", i)
            continue
        if isinstance(r.get("$rewindTo"), str):
            rid = r["$rewindTo"]
            keys = list(msgs)
            # an id the recording does not hold: gemini-cli's loader drops every message
            rewound.update(keys[keys.index(rid) :] if rid in msgs else keys)
        elif isinstance(r.get("id"), str):
            mid = r["id"]
            if mid in rewound:
                # written again after a rewind dropped it: the loader puts it last
                rewound.discard(mid)
                del msgs[mid]
            msgs[mid] = r
            lines[mid] = line
        elif isinstance(r.get("$set"), dict):
            upd = r["$set"]
            if isinstance(upd.get("messages"), list):
                for m in upd["messages"]:
                    if isinstance(m, dict) and isinstance(m.get("id"), str):
                        mid = m["id"]
                        rewound.discard(mid)  # the history holds it again
                        if mid not in msgs:
                            msgs[mid] = m
                            lines[mid] = line
            meta.update({k: v for k, v in upd.items() if k != "messages"})
        elif isinstance(r.get("sessionId"), str) and isinstance(r.get("projectHash"), str):
            meta.update({k: v for k, v in r.items() if k != "messages"})
            for m in r.get("messages") or []:
                if isinstance(m, dict) and isinstance(m.get("id"), str):
                    msgs[m["id"]] = m
                    lines[m["id"]] = line
        else:
            ctx.bad(
                "a recording line that is none of: metadata (sessionId, projectHash), a message (id), "
                "$set, $rewindTo",
                i,
            )
    return meta, list(msgs.values()), [{"line": lines[k]} for k in msgs], rewound & msgs.keys()


def _contents(doc: list, ctx: Ctx, ledger: Ledger) -> None:
    for i, c in enumerate(doc):
        if not isinstance(c, dict):
            ctx.bad(f"a Content must be an object, got {type(c).__name__}", i)
            continue
        parts = c.get("parts") or []
        ref = {"message": i}
        if c.get("role") == "model":
            text = "\n".join(
                p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)
            )
            ledger.turn(c.get("usageMetadata"), text=text, ref=ref)
            for p in parts:
                fc = p.get("functionCall") if isinstance(p, dict) else None
                if isinstance(fc, dict) and isinstance(fc.get("name"), str):
                    ledger.call(fc["name"], fc.get("args"), fc.get("id"), ref=ref)
            continue
        if c.get("role") == "user" and not any(
            isinstance(p, dict) and "functionResponse" in p for p in parts
        ):
            ledger.user()  # a user Content of text alone: the person's message
        for p in parts:
            if not isinstance(p, dict):
                continue
            fr = p.get("functionResponse")
            if isinstance(fr, dict):
                step = ledger.pair(fr.get("id"), fr.get("name"))
                result, error = _response_value(fr.get("response"))
                if step is None:
                    ledger.orphans += 1
                    ledger.context(text_len(result))
                    continue
                ledger.result(step, result, error)
            else:
                ledger.context(text_len(p.get("text")))


STREAM_EVENTS = frozenset({"init", "message", "tool_use", "tool_result", "error", "result"})


def _is_stream(doc: list) -> bool:
    """gemini-cli's ``stream-json`` output: its ``init`` event, or a ``tool_use`` event of its
    shape (``tool_name``, ``tool_id``, ``parameters``; opencode's stream has a ``part``)."""
    for r in doc[:50]:
        if not isinstance(r, dict):
            continue
        t = r.get("type")
        if t == "init" and isinstance(r.get("session_id"), str) and "model" in r:
            return True
        if (
            t == "tool_use"
            and isinstance(r.get("tool_name"), str)
            and "tool_id" in r
            and isinstance(r.get("parameters"), dict)
        ):
            return True
    return False


def _stream(doc: list, ctx: Ctx, ledger: Ledger) -> dict:
    """The steps of a ``stream-json`` run; its metadata (model, totals) returned."""
    meta: dict[str, Any] = {"recording": "stream"}
    pending: dict[Any, Any] = {}  # tool_id -> the step waiting for its result
    # the reply being streamed: its text chunks and first line, until its turn is recorded
    chunks: list[str] = []
    first: dict | None = None
    opened = False  # its turn is recorded (it issued a call)

    def close() -> None:
        nonlocal first, opened
        if first is not None and not opened:
            ledger.turn(None, text="".join(chunks), ref=first)
        chunks.clear()
        first, opened = None, False

    for i, r in enumerate(doc):
        line = ctx.lines[i] if ctx.lines is not None and i < len(ctx.lines) else i + 1
        if not isinstance(r, dict):
            ctx.bad(f"an event must be an object, got {type(r).__name__}", i)
            continue
        t = r.get("type")
        ref = {"line": line}
        if t == "init":
            if isinstance(r.get("model"), str):
                meta["model"] = r["model"]
        elif t == "message":
            content: str = r["content"] if isinstance(r.get("content"), str) else ""
            if r.get("role") == "user":
                close()
                ledger.user()  # the prompt the run was given
                ledger.context(len(content))
            elif opened:
                ledger.add_text(content)  # text after the reply's calls
            else:
                if first is None:
                    first = ref
                chunks.append(content)
        elif t == "tool_use":
            name = r.get("tool_name")
            if not isinstance(name, str):
                ctx.bad("a tool_use event without a tool_name", i)
                continue
            if not opened:
                ledger.turn(None, text="".join(chunks), ref=first or ref)
                opened = True
                if first is None:
                    first = ref
            args = r.get("parameters")
            if name == "run_shell_command" and isinstance(args, dict) and "description" in args:
                args = {k: v for k, v in args.items() if k != "description"}  # the model's note
            pending[r.get("tool_id")] = ledger.call(name, args, r.get("tool_id"), ref=ref)
        elif t == "tool_result":
            close()  # the results go back: the next reply is the next API call
            step = pending.pop(r.get("tool_id"), None)
            if step is None:
                ledger.orphans += 1
                continue
            err = r.get("error")
            if r.get("status") == "error":
                msg = err.get("message") if isinstance(err, dict) else None
                error, _ = normalise_output(PROFILE, msg if isinstance(msg, str) else "error")
                ledger.result(step, r.get("output"), error)
                continue
            result, facts = normalise_output(PROFILE, r.get("output"))
            if facts.get("returncode") is not None:
                step.meta["returncode"] = facts["returncode"]
            if "output_file" in facts:
                step.meta["output_file"] = facts["output_file"]
            ledger.result(step, result)
        elif t == "result":
            close()
            stats = r.get("stats")
            if isinstance(stats, dict):
                for k in ("input_tokens", "output_tokens", "total_tokens"):
                    if isinstance(stats.get(k), int):
                        meta["reported_" + k] = stats[k]
        elif t != "error":  # an error event is a notice shown to the person
            ctx.bad(
                f"an event of type {t!r} this reader does not know; expected one of "
                f"{', '.join(sorted(STREAM_EVENTS))}",
                i,
            )
    close()
    return meta


def _is_jsonl_recording(doc: list) -> bool:
    head = doc[:5]
    return any(
        isinstance(r, dict)
        and isinstance(r.get("sessionId"), str)
        and isinstance(r.get("projectHash"), str)
        for r in head
    ) or (
        any(
            isinstance(r, dict)
            and (isinstance(r.get("$set"), dict) or isinstance(r.get("$rewindTo"), str))
            for r in doc[:50]
        )
        and any(
            isinstance(r, dict) and r.get("type") in MESSAGE_TYPES and "id" in r for r in doc[:50]
        )
    )


def parse(doc: Any, ctx: Ctx) -> list[Trace]:
    """One trace from a gemini-cli recording (JSON or JSONL) or checkpoint."""
    meta: dict[str, Any]
    rewound: set[int] = set()  # the refs (by identity) of rewound messages
    if isinstance(doc, dict):
        ledger = Ledger(
            str(doc.get("sessionId") or ctx.stem), ctx.profile(PROFILE), unknown_redacted=True
        )
        msgs = doc.get("messages") or []
        _recording(msgs, ctx, ledger, [{"message": i} for i in range(len(msgs))])
        meta = {"recording": "json"}
    elif _is_jsonl_recording(doc):
        md, msgs, refs, rewound_ids = _jsonl_messages(doc, ctx)
        ledger = Ledger(
            str(md.get("sessionId") or ctx.stem), ctx.profile(PROFILE), unknown_redacted=True
        )
        _recording(msgs, ctx, ledger, refs)
        meta = {"recording": "jsonl"}
        if md.get("kind"):
            meta["kind"] = md["kind"]
        if rewound_ids:
            meta["rewound_messages"] = len(rewound_ids)
            rewound = {id(ref) for m, ref in zip(msgs, refs) if m["id"] in rewound_ids}
    elif _is_stream(doc):
        sid = next(
            (
                r["session_id"]
                for r in doc[:50]
                if isinstance(r, dict) and isinstance(r.get("session_id"), str)
            ),
            None,
        )
        ledger = Ledger(str(sid or ctx.stem), ctx.profile(PROFILE), unknown_redacted=True)
        meta = _stream(doc, ctx, ledger)
    else:
        ledger = Ledger(ctx.stem, ctx.profile(PROFILE), unknown_redacted=True)
        _contents(doc, ctx, ledger)
        meta = {"recording": "checkpoint"}
    trace = ledger.trace(source=ctx.path, fmt=NAME, meta=meta)
    if rewound:
        for step in trace.steps:
            if id(step.ref) in rewound:
                step.meta["rewound"] = True
    return [trace]


def sniff(doc: Any) -> bool:
    """A recording (messages of type user/gemini; JSON, or JSONL with a sessionId/projectHash line)
    or a list of role user/model Contents with parts."""
    if isinstance(doc, dict):
        msgs = doc.get("messages")
        return (
            isinstance(msgs, list)
            and any(isinstance(m, dict) and m.get("type") == "gemini" for m in msgs)
            or (
                "projectHash" in doc
                and (isinstance(msgs, list) or isinstance(doc.get("sessionId"), str))
            )
        )
    if not isinstance(doc, list):
        return False
    if _is_jsonl_recording(doc) or _is_stream(doc):
        return True
    return any(
        isinstance(c, dict)
        and c.get("role") in ("user", "model")
        and isinstance(c.get("parts"), list)
        for c in doc[:20]
    )
