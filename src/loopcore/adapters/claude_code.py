"""Claude Code session JSONL (``~/.claude/projects/<project>/<sessionId>.jsonl``) and the
``--output-format stream-json`` stream, which has the same record shape.

Each line is a record: ``type`` (user / assistant / summary / system...), ``uuid``,
``parentUuid``, ``sessionId`` (``session_id`` in stream-json), ``message`` (an Anthropic
message). One API message is split over several lines, one content block each, all with the
same ``message.id`` and a copy of ``message.usage``: its usage is counted once (the last copy
wins, it is the complete one). Sidechain records (``isSidechain``, sub-agents) form one trace per
sub-agent: ``<sessionId>/<agentId>`` (each sub-agent's own file, ``<sessionId>/subagents/
agent-<agentId>.jsonl``, or its records inline, grouped by their ``parentUuid`` chain since only
some of them carry ``agentId``), ``<sessionId>/sidechain`` when the records name no agent; Claude Code 2.1.7x also copies a
sub-agent's records into ``progress`` records (``data.type: "agent_progress"``) of the main
file, read as that sub-agent's trace unless its own file is read too (``load`` brings the
sub-agent files of a session file named on its own; a folder's walk reads them). Text and thinking blocks are the turn's reply text; a call the harness refused (``No
such tool available``, ``InputValidationError``) is a rejected turn. ``PostToolUse`` command hooks
that ran after a file write are an exec step of their own after it (``_hook_runs``). Refs are
``{"line": N}``.
"""

from __future__ import annotations

import os
from typing import Any

import orjson

from ..taxonomy.profiles import OUTPUT_NORMALISERS
from ..trace import Step
from ._base import Ledger, Trace, text_len
from ._io import COMPRESSED_SUFFIXES, Ctx, plain_name
from ._walk import anthropic_assistant_blocks, anthropic_user_blocks, tool_result_content

NAME = "claude-code"
PROFILE = "claude-code"
_RECORD_TYPES = frozenset({"user", "assistant"})
#: Record types that carry no model turn or tool call; any other type is reported.
KNOWN_TYPES = _RECORD_TYPES | frozenset(
    {
        "summary",
        "system",
        "file-history-snapshot",
        "queue-operation",
        "result",
        "progress",
        "attachment",
        "custom-title",
        "tag",
        "agent-name",
        "last-prompt",
        "pr-link",
        "worktree-state",
        "mode",
        "permission-mode",
        "ai-title",
        "stream_event",
        "control_request",
        "control_response",
        "keep_alive",
        "rate_limit_event",
        "tool_progress",
        "auth_status",
    }
)
_DESCRIBED = frozenset({"Bash"})
#: A tool output too big for the transcript is in a file of its own, named anew on every call.
_PERSISTED = OUTPUT_NORMALISERS[PROFILE]
_REFUSALS = (
    "No such tool available",
    "InputValidationError",
    "<tool_use_error>Error: No such tool",
)
#: When one call of a batch fails, Claude Code answers each call of the batch that had not
#: started with this synthetic error (unless every call of the batch is a Write or an Edit):
#: the call never ran, and running it again is no repeat.
_CANCELLED = ("<tool_use_error>Sibling tool call errored</tool_use_error>",)
#: Claude Code refuses to write a file it holds no read of. Said of a file the session had read
#: (2.1.4x sessions say it of files read minutes before, in the same turn's batch too), it means
#: the harness's record of what was read is gone: a file is read again because the harness
#: requires it before the write, as after a compaction.
_NOT_READ = "File has not been read yet. Read it first before writing to it."
#: The records that say Claude Code compacted the context: a summary replaced the
#: conversation (``/compact``, auto-compaction), or old tool outputs were cleared (micro).
_COMPACTIONS = frozenset({"compact_boundary", "microcompact_boundary"})


def _sidechain_agents(records: list, stem: str) -> dict[int, str]:
    """The sub-agent of each sidechain record (by index). Claude Code writes ``agentId`` on some
    of a sub-agent's records only, so a sidechain's records are grouped by their ``parentUuid``
    chain and the group takes the ``agentId`` any of them carries."""
    parent: dict[str, str] = {}
    index_of: dict[str, int] = {}
    side = []
    for i, r in enumerate(records):
        if (
            isinstance(r, dict)
            and r.get("isSidechain")
            and isinstance(r.get("type"), str)
            and r["type"] in _RECORD_TYPES
        ):
            side.append(i)
            u = r.get("uuid")
            if isinstance(u, str):
                index_of[u] = i
                p = r.get("parentUuid")
                if isinstance(p, str):
                    parent[u] = p
    if not side:
        return {}

    def root(i: int) -> int:
        u = records[i].get("uuid")
        seen = 0
        while isinstance(u, str) and u in parent and parent[u] in index_of and seen < 100000:
            u = parent[u]
            seen += 1
        return index_of.get(u, i) if isinstance(u, str) else i

    groups: dict[int, list[int]] = {}
    for i in side:
        groups.setdefault(root(i), []).append(i)
    named = {
        records[i].get("agentId")
        for i in side
        if isinstance(records[i].get("agentId"), str) and records[i].get("agentId")
    }
    # a group that names no agent: the file's agent (agent-<id>.jsonl), else the one agent the
    # file's sidechain records name (a chain whose parent is missing), else "sidechain"
    fallback = (
        stem[len("agent-") :]
        if stem.startswith("agent-")
        else next(iter(named))
        if len(named) == 1
        else "sidechain"
    )
    out: dict[int, str] = {}
    for members in groups.values():
        agent = next(
            (
                records[i].get("agentId")
                for i in members
                if isinstance(records[i].get("agentId"), str) and records[i].get("agentId")
            ),
            fallback,
        )
        for i in members:
            out[i] = agent
    return out


def _replays(records: list) -> dict[int, str]:
    """The records that repeat an earlier record of the file (by index: the session they are
    of). Claude Code appends records it already wrote, each with its original ``uuid`` and
    timestamp: the post-compaction part of a session when it is resumed, a session's records
    again when the VS Code extension reopens it, a hook's attachment record a second time.
    They are the same work written twice: the first copy is read, the later ones are passed
    over (read, every call of the replay would look like a repeat of its original). So are a
    forked session's copies of its parent's records (``forkedFrom``)."""
    seen: set[str] = set()
    out: dict[int, str] = {}
    for i, r in enumerate(records):
        if isinstance(r, dict):
            if isinstance(r.get("forkedFrom"), dict):
                # a session forked from another (``--fork-session``, the desktop app's branch)
                # starts with copies of the parent's records, each naming its original
                # (``forkedFrom: {sessionId, messageUuid}``): the parent's work, spent once
                # in the parent's session, not the fork's
                out[i] = str(r.get("sessionId") or r.get("session_id") or "")
                continue
            u = r.get("uuid")
            if isinstance(u, str) and u:
                if u in seen:
                    out[i] = str(r.get("sessionId") or r.get("session_id") or "")
                else:
                    seen.add(u)
    return out


def _ids(content: Any, kind: str, key: str) -> list:
    """The *key* of each *kind* block of a message's content."""
    if not isinstance(content, list):
        return []
    return [b.get(key) for b in content if isinstance(b, dict) and b.get("type") == kind]


def _reading_order(records: list) -> list[int]:
    """The record indexes in file order, except that a user record whose tool results all
    answer calls written after it (Claude Code flushes a result a line before its call at
    times; its parentUuid names the call's record) is read right after the last of them."""
    call_at: dict[Any, int] = {}
    for i, r in enumerate(records):
        if (
            isinstance(r, dict)
            and r.get("type") == "assistant"
            and isinstance(r.get("message"), dict)
        ):
            for tid in _ids(r["message"].get("content"), "tool_use", "id"):
                if isinstance(tid, str):
                    call_at.setdefault(tid, i)
    later: dict[int, list[int]] = {}
    for i, r in enumerate(records):
        if isinstance(r, dict) and r.get("type") == "user" and isinstance(r.get("message"), dict):
            ids = _ids(r["message"].get("content"), "tool_result", "tool_use_id")
            at = [call_at.get(tid, -1) if isinstance(tid, str) else -1 for tid in ids]
            if at and min(at) > i:
                later.setdefault(max(at), []).append(i)
    if not later:
        return list(range(len(records)))
    moved = {i for group in later.values() for i in group}
    order = []
    for i in range(len(records)):
        if i not in moved:
            order.append(i)
        order.extend(later.get(i, ()))
    return order


def _agent_progress(r: dict) -> tuple[str, str, dict] | None:
    """``(agentId, "user" | "assistant", message)`` of a ``progress`` record that carries a
    sub-agent's record (``data.type == "agent_progress"``), else None. Claude Code 2.1.7x copies
    every record of a sub-agent into the main file so."""
    data = r.get("data")
    if not isinstance(data, dict) or data.get("type") != "agent_progress":
        return None
    agent, inner = data.get("agentId"), data.get("message")
    if not isinstance(agent, str) or not agent or not isinstance(inner, dict):
        return None
    kind, msg = inner.get("type"), inner.get("message")
    if kind not in _RECORD_TYPES or not isinstance(msg, dict):
        return None
    return agent, kind, msg


def _sub_agent_run(r: dict) -> tuple[str, int, int] | None:
    """(agentId, tool uses, tokens) of the sub-agent run a user record answers (the
    ``toolUseResult`` of an ``Agent`` / ``Task`` call: ``agentId``, ``totalToolUseCount``,
    ``totalTokens``), else None."""
    run = r.get("toolUseResult")
    if not isinstance(run, dict):
        return None
    agent, uses, tokens = run.get("agentId"), run.get("totalToolUseCount"), run.get("totalTokens")
    if not isinstance(agent, str) or not agent or type(uses) is not int or uses <= 0:
        return None
    return agent, uses, tokens if type(tokens) is int else 0


def _own_file(ctx: Ctx, sid: str, agent: str) -> bool:
    """True when the sub-agent's own file (``<sessionId>/subagents/agent-<agentId>.jsonl``, beside
    the session's file) exists and this load reads it: the walk of a folder that holds the
    session's file reads everything beside it, and a session file named on its own brings the
    sub-agent files of its own name (``load``); its copies in the session's progress records
    would then count it twice. A file renamed from its session id, named on its own, has its
    sub-agents read from the copies. Claude Code 2.0 wrote a sub-agent's file beside the
    session's (``agent-<agentId>.jsonl`` in the project's folder): the walk of that folder
    reads it too."""
    path = ctx.path
    if not path or "/" in sid + agent or "\\" in sid + agent or ".." in sid + agent:
        return False
    folder = os.path.dirname(path)
    if ctx.in_folder and _exists(os.path.join(folder, f"agent-{agent}.jsonl")):
        return True
    if not _exists(os.path.join(folder, sid, "subagents", f"agent-{agent}.jsonl")):
        return False
    name = plain_name(path)
    return ctx.in_folder or os.path.basename(name) == f"{sid}.jsonl"


def _exists(base: str) -> bool:
    return any(os.path.isfile(base + suffix) for suffix in ("", *COMPRESSED_SUFFIXES))


def parse(doc: Any, ctx: Ctx) -> list[Trace]:
    """One trace per session (and per sidechain) in the file, in order of first appearance."""
    records = doc if isinstance(doc, list) else [doc]
    replays = _replays(records)
    if replays:
        records = [None if i in replays else r for i, r in enumerate(records)]
    profile = ctx.profile(PROFILE)
    ledgers: dict[str, Ledger] = {}
    last_msg_id: dict[str, Any] = {}
    msg_chars: dict[str, int] = {}  # per trace, the characters of its last message so far
    agents = _sidechain_agents(records, ctx.stem)
    own_files: dict[tuple[str, str], bool] = {}
    ran_by: dict[str, list[tuple[str, str, int, int]]] = {}  # trace -> its sub-agents' runs
    inline = set(agents.values())
    msg: Any
    last_side: str | None = None  # the ledger of the latest sub-agent record read
    hooks: dict[str, list] = {}  # tool_use_id -> its PostToolUse hook runs (see _hook_runs)
    for i in _reading_order(records):
        r = records[i]
        if r is None and i in replays:
            continue
        if not isinstance(r, dict):
            ctx.bad(f"a record must be an object, got {type(r).__name__}", i)
            continue
        rtype = r.get("type")
        if rtype is not None and not isinstance(rtype, str):
            ctx.bad(f"a record whose type is {type(rtype).__name__}, not a string", i)
            continue
        if rtype == "progress":
            inner = _agent_progress(r)
            if inner is None:
                _note_hook(hooks, r, r.get("data"), i, ctx)
                continue
            agent, rtype, msg = inner
            sid = str(r.get("sessionId") or r.get("session_id") or ctx.stem)
            own = own_files.get((sid, agent))
            if own is None:
                # the same records inline (sidechain records of that agent) or in the sub-agent's
                # own file are read there: the copies would count the sub-agent twice
                own = own_files[sid, agent] = agent in inline or _own_file(ctx, sid, agent)
            if own:
                continue
            key = f"{sid}/{agent}"
            sub = True
        elif rtype == "attachment":
            # Text Claude Code adds to the next prompt (system reminders, listings of tools and
            # agents, a message the person typed while the agent worked): context the prompt's
            # growth is split over, never the tool result's before it; a typed message is the
            # person's, as a prompt is
            person, chars = _attachment(r)
            _note_hook(hooks, r, r.get("attachment"), i, ctx)
            if r.get("isSidechain"):
                # a sub-agent's (its records come before it): context of that sub-agent's
                # prompt; no person types into a sub-agent
                ledger = ledgers.get(last_side) if last_side is not None else None
                person = False
            else:
                sid = str(r.get("sessionId") or r.get("session_id") or ctx.stem)
                ledger = ledgers.get(sid)
                if ledger is None and person:
                    ledger = ledgers[sid] = Ledger(sid, profile, unknown_redacted=True)
            if ledger is not None:
                if person:
                    ledger.user()
                if chars:
                    ledger.context(chars)
            continue
        elif rtype == "queue-operation":
            # A message typed while the agent works: Claude Code 2.1.3x-2.1.5x writes it only
            # here when the model reads it beside a tool result (a bare ``remove`` follows, no
            # user record), so the calls after it answer the person, as after a prompt
            if _queued_by_person(r):
                sid = str(r.get("sessionId") or r.get("session_id") or ctx.stem)
                ledger = ledgers.get(sid)
                if ledger is None:
                    ledger = ledgers[sid] = Ledger(sid, profile, unknown_redacted=True)
                ledger.user()
            continue
        elif rtype == "system" and r.get("subtype") in _COMPACTIONS:
            if not r.get("isSidechain"):
                sid = str(r.get("sessionId") or r.get("session_id") or ctx.stem)
                ledger = ledgers.get(sid)
                if ledger is not None:
                    ledger.compacted()
            continue
        elif rtype not in _RECORD_TYPES:
            if (
                rtype not in KNOWN_TYPES
                and isinstance(rtype, str)
                and isinstance(r.get("message"), dict)
            ):
                ctx.bad(
                    f"a record of type {rtype!r} with a message, which this reader does not know; expected "
                    f"user or assistant",
                    i,
                )
            continue
        else:
            msg = r.get("message")
            if not isinstance(msg, dict):
                ctx.bad(f"a {rtype} record without a message object", i)
                continue
            sid = str(r.get("sessionId") or r.get("session_id") or ctx.stem)
            sub = i in agents
            key = f"{sid}/{agents[i]}" if sub else sid
            if sub:
                last_side = key
        ref = {"line": ctx.lines[i] if ctx.lines is not None and i < len(ctx.lines) else i + 1}
        ledger = ledgers.get(key)
        if ledger is None:
            ledger = ledgers[key] = Ledger(key, profile, unknown_redacted=True)
        if rtype == "assistant":
            mid = msg.get("id")
            same = mid is not None and mid == last_msg_id.get(key) and ledger.turns
            chars = _content_chars(msg.get("content"))
            msg_chars[key] = msg_chars.get(key, 0) + chars if same else chars
            usage = _final_usage(msg, msg_chars[key])
            if same:
                ledger.set_usage(usage)
            else:
                ledger.turn(usage, text="", ref=ref)
                last_msg_id[key] = mid
            anthropic_assistant_blocks(
                msg.get("content"),
                ledger,
                ctx,
                i,
                ref=ref,
                described=_DESCRIBED,
            )
        else:
            if not sub and _from_person(r, msg):
                ledger.user()
            forgot = _reads_forgotten(msg.get("content"), ledger)
            anthropic_user_blocks(
                msg.get("content"),
                ledger,
                refusals=_REFUSALS,
                normalise=_PERSISTED,
                cancelled=_CANCELLED,
            )
            if forgot:
                ledger.compacted()
            ran = _sub_agent_run(r)
            if ran is not None:
                ran_by.setdefault(key, []).append((sid, *ran))
    replayed: dict[str, int] = {}
    for of in replays.values():
        of = of or ctx.stem
        replayed[of] = replayed.get(of, 0) + 1
    traces = []
    for key, lg in ledgers.items():
        # sub-agents whose own records this load does not read (Claude Code 2.1.1xx writes
        # them to <sessionId>/subagents/ only): their calls are not analysed, say so
        unread = [
            {"agent": agent, "tool_uses": uses, "tokens": tokens}
            for sid, agent, uses, tokens in ran_by.get(key, ())
            if f"{sid}/{agent}" not in ledgers and not _own_file(ctx, sid, agent)
        ]
        meta: dict[str, Any] = {}
        if unread:
            meta["sub_agents_unread"] = unread
        if key in replayed:
            meta["replayed_records"] = replayed[key]
        trace = lg.trace(source=ctx.path, fmt=NAME, meta=meta or None)
        _unchanged_reads(trace.steps)
        if hooks:
            _hook_runs(trace, hooks)
        traces.append(trace)
    if len(traces) > 1 and ctx.path:
        for n, t in enumerate(traces):
            t.source = f"{ctx.path}#{n}"
    return traces


#: The hook commands Claude Code runs in its own process (``command: "callback"``: its file
#: history and the SDK's callbacks): nothing the transcript says they change or report.
_IN_PROCESS_HOOKS = frozenset({"callback"})


def _note_hook(hooks: dict, r: dict, data: Any, i: int, ctx: Ctx) -> None:
    """Keep a ``PostToolUse`` hook run of a call (by its ``tool_use_id``): a ``hook_progress``
    record (2.1.x: the hook started, its output not written) or a ``hook_*`` attachment
    (2.1.2xx: its command, exit code and output). Only a command hook or one whose output the
    model was given counts (see :func:`_hook_runs`)."""
    if not isinstance(data, dict) or data.get("hookEvent") != "PostToolUse":
        return
    kind = data.get("type")
    if not isinstance(kind, str) or not (kind == "hook_progress" or kind.startswith("hook_")):
        return
    tid = data.get("toolUseID") or r.get("toolUseID") or r.get("parentToolUseID")
    if not isinstance(tid, str) or not tid:
        return
    command = data.get("command")
    # what it said: its output, the context it added, the error that blocked the call
    output = any(data.get(k) for k in ("stdout", "stderr", "content", "blockingError"))
    if not output and (not isinstance(command, str) or command in _IN_PROCESS_HOOKS):
        return
    line = ctx.lines[i] if ctx.lines is not None and i < len(ctx.lines) else i + 1
    hooks.setdefault(tid, []).append((line, command if isinstance(command, str) else None))


def _hook_runs(trace: Trace, hooks: dict) -> None:
    """A file write answered after ``PostToolUse`` hooks ran on it (a formatter, a compiler, a
    linter: ``PostToolUse:Edit`` commands) is followed by a step for them: an ``exec`` of what
    Claude Code ran, which may have rewritten the files (a formatter's rewrite undone by the
    agent is no undo of its own) and whose output the model may have read (2.1.x writes none of
    it: an edit undone because the compiler said the import it added is unused is feedback, not
    an oscillation). It costs nothing (its output is in the next prompt's growth, as before),
    its arguments name the call it ran after (it repeats nothing) and ``meta["hook"]`` says what
    it is (the guard replay skips it: no guard saw it). Hooks after reads and searches (a
    logger of every call) change nothing the analysis reads, so only writes get one."""
    steps = trace.steps
    out: list[Step] = []
    for s in steps:
        out.append(s)
        runs = hooks.get(s.call_id) if s.call_id is not None else None
        if (
            runs
            and s.kind == "mutate"
            and s.error is None
            and s.rejected is None
            and not s.no_op
            and s.meta.get("not_run") is not True
        ):
            commands = [c for _, c in runs if c is not None]
            out.append(
                Step(
                    s.session,
                    s.turn,
                    "exec",
                    "PostToolUse hook",
                    args={"tool_use_id": s.call_id, "commands": commands},
                    meta={"hook": "PostToolUse"},
                    ref={"line": runs[0][0]},
                )
            )
    if len(out) != len(steps):
        trace.steps = out


# Claude Code's answer to a Read of a file unchanged since the model last read it the same way
# (FileReadTool, FILE_UNCHANGED_STUB: the same path, offset and limit, the file's mtime the same)
_UNCHANGED = "File unchanged since last read."


def _unchanged_reads(steps: list) -> None:
    """A Read Claude Code answered with its unchanged-file stub observed what the earlier Read
    of the same call returned ("refer to that instead of re-reading"): it gets that outcome, so
    it is the same observation, and stays marked ``meta["unchanged_stub"]``; its tokens are the
    stub's (the ledger counted the stub's characters). After a person's message or a compaction
    the model may no longer hold that content (Claude Code stubs a re-read after a compaction
    too): a stub there is only a stub."""
    last: dict[bytes, str] = {}  # the canonical call of a Read -> its latest full result
    for s in steps:
        if s.after_user:
            last.clear()
        if s.name != "Read" or s.error is not None or not isinstance(s.result, str):
            continue
        key = (
            orjson.dumps(s.args, option=orjson.OPT_SORT_KEYS) if isinstance(s.args, dict) else None
        )
        if key is None:
            continue
        if s.result.startswith(_UNCHANGED):
            earlier = last.get(key)
            if earlier is not None:
                s.result = earlier
                s.meta["unchanged_stub"] = True
        else:
            last[key] = s.result


def _content_chars(content: Any) -> int:
    """The characters a copy's content blocks hold: text, thinking, a call's input."""
    if not isinstance(content, list):
        return len(content) if isinstance(content, str) else 0
    n = 0
    for b in content:
        if isinstance(b, dict):
            for k in ("text", "thinking"):
                if isinstance(b.get(k), str):
                    n += len(b[k])
            if b.get("type") == "tool_use":
                n += text_len(b.get("input"))
    return n


def _final_usage(msg: dict, chars: int) -> Any:
    """The message's usage, less an ``output_tokens`` that is a snapshot taken while the
    response streamed: Claude Code 2.1.37-2.1.49 wrote every copy with ``stop_reason`` null and
    the count of the stream's start (8 tokens for a message of 28 K characters of thinking), so
    the rest of the output was put on the calls' results by the next prompt's growth. A count
    under an eighth of what the message's own characters hold (4 to a token) on such a copy is
    no count: the output is unknown and the results are estimated."""
    usage = msg.get("usage")
    if (
        isinstance(usage, dict)
        and msg.get("stop_reason") is None
        and type(usage.get("output_tokens")) is int
        and usage["output_tokens"] * 32 < chars
    ):
        return {k: v for k, v in usage.items() if k != "output_tokens"}
    return usage


def _attachment(r: dict) -> tuple[bool, int]:
    """(is it a message the person typed, the characters it adds to the next prompt) of an
    ``attachment`` record. A message typed while the agent works is written as a
    ``queued_command`` attachment, never as a user record (Claude Code 2.1.2xx): it is the
    person's when its ``commandMode`` is ``prompt`` and its ``origin`` (written since about
    2.1.220) is absent or ``human``; a background task's notification or another session's
    hand-back is not. The text is the ``rendered`` content when written, else the prompt."""
    att = r.get("attachment")
    if not isinstance(att, dict):
        return False, 0
    person = False
    if att.get("type") == "queued_command" and att.get("commandMode") == "prompt":
        origin = att.get("origin")
        kind = origin.get("kind") if isinstance(origin, dict) else None
        person = origin is None or kind == "human"
    chars = 0
    rendered = r.get("rendered")
    if isinstance(rendered, list):
        for part in rendered:
            if isinstance(part, dict) and isinstance(part.get("content"), str):
                chars += len(part["content"])
    elif att.get("type") == "queued_command":
        chars = text_len(att.get("prompt"))
    return person, chars


def _reads_forgotten(content: Any, ledger: Ledger) -> bool:
    """Does this user record refuse a write of a file the session read before (:data:`_NOT_READ`
    in answer to a call on a path an earlier call read without error)? Then Claude Code no
    longer holds what was read: what is read next starts the evidence again."""
    if not isinstance(content, list):
        return False
    refused = set()
    for b in content:
        if isinstance(b, dict) and b.get("type") == "tool_result" and b.get("is_error"):
            res = tool_result_content(b)
            if isinstance(res, str) and _NOT_READ in res[:200]:
                refused.add(b.get("tool_use_id"))
    if not refused:
        return False
    paths = {
        s.target
        for s in ledger.open_calls()
        if s.call_id in refused and isinstance(s.target, str) and s.target
    }
    return bool(paths) and any(
        s.kind == "observe" and s.target in paths and s.error is None and s.result is not None
        for s in ledger.steps
    )


def _queued_by_person(r: dict) -> bool:
    """Is this ``queue-operation`` record a message the person typed while the agent worked?
    An ``enqueue`` with text is, unless the text is what Claude Code queues itself: a
    background task's record (a JSON object: ``task_id``, ``task_type``...) or its
    ``<task-notification>``."""
    content = r.get("content")
    if r.get("operation") != "enqueue" or not isinstance(content, str):
        return False
    text = content.strip()
    if not text or text.startswith("<task-notification"):
        return False
    if text.startswith("{"):
        try:
            record = orjson.loads(text)
        except orjson.JSONDecodeError:
            return True
        return not (isinstance(record, dict) and "task_id" in record)
    return True


def _from_person(r: dict, msg: dict) -> bool:
    """Is this user record a message from the person at the keyboard? A prompt, a slash
    command, a ``!`` shell command's output or an interruption are; tool results (and the text
    the harness sends beside them), the records Claude Code marks ``isMeta`` (caveats, skill
    and command bodies), a compaction's summary and a sub-agent's prompt (from the agent that
    started it) are not, nor is a record whose ``origin`` names something other than a person
    (Claude Code 2.1.12x and later, seen in 2.1.123 and 2.1.173: a background task's
    ``task-notification``, another session's message), as with a queued command's."""
    if r.get("isMeta") or r.get("isCompactSummary") or r.get("isSidechain"):
        return False
    origin = r.get("origin")
    if isinstance(origin, dict) and origin.get("kind") not in (None, "human"):
        return False
    content = msg.get("content")
    if isinstance(content, str):
        return bool(content)
    if not isinstance(content, list) or not content:
        return False
    return not any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)


def sniff(records: list) -> bool:
    """Records with type user/assistant, a message object and a session or uuid field."""
    for r in records[:50]:
        if (
            isinstance(r, dict)
            and r.get("type") in _RECORD_TYPES
            and isinstance(r.get("message"), dict)
            and ("sessionId" in r or "uuid" in r or "session_id" in r)
        ):
            return True
    return False
