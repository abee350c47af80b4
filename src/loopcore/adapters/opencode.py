"""opencode sessions: the JSON storage folder and ``opencode export`` files.

Storage (``~/.local/share/opencode/storage``, opencode 0.x-1.x before its SQLite store): one JSON
file per object, ``session/<projectID>/<sessionID>.json`` (the session: ``id``, ``title``,
``parentID`` for a sub-agent's session), ``message/<sessionID>/<messageID>.json`` (``id``,
``sessionID``, ``role``; an assistant message has ``modelID``, ``tokens``, ``cost``) and
``part/<messageID>/<partID>.json`` (``type``: ``text``, ``reasoning``, ``tool``, ``step-start``,
``step-finish``, ``file``, ``patch``, ``snapshot``, ``agent``, ``subtask``, ``retry``,
``compaction``). A folder holding ``message/`` and ``part/`` is read as a store: one trace per
session, messages and parts in id order (opencode's ids sort by creation). The export is the
same data as one document: ``{"info": <session>, "messages": [{"info": <message>, "parts":
[...]}]}``; ``opencode run --format json`` prints the parts as events (``{"type": "step_start" |
"text" | "tool_use" | "step_finish", "sessionID", "part": {...}}``), read the same way. opencode
1.2 and later keep the same objects in SQLite (``~/.local/share/opencode/opencode.db``, the
``session``, ``message`` and ``part`` tables of ``packages/opencode/src/session/session.sql.ts``:
a row's ``data`` is the object's JSON less the ids its columns hold), read read-only the same
way: one trace per session, ``source`` ``<db>#<sessionID>``. opencode 1.2 migrated the storage
folder's sessions into the database and left the files: a walk that reads both reads each
session once, from the database. The database is ``opencode.db`` on the latest, beta and prod
channels and ``opencode-<channel>.db`` on the others (``packages/core/src/database/database.ts``,
``path()``; Kilo, opencode's fork, names them ``kilo.db`` / ``kilo-<channel>.db``), and the
one-time migration of the storage folder runs again for each channel's database: a walk reads
a session that several databases of one folder hold once, from the copy with the most messages.

A ``step-start`` ... ``step-finish`` run of an assistant message is one API call; the
``step-finish`` part carries its ``tokens`` (``input`` + ``cache.read`` + ``cache.write`` is the
prompt, ``output`` + ``reasoning`` the completion; a record whose ``total`` is the prompt plus
``output`` alone, as opencode 1.2 and older wrote them, holds the reasoning in ``output``). A ``tool`` part is a call and its result:
``callID``, ``tool``, ``state`` (``status`` completed with ``output`` / error with ``error``).
The ``invalid`` tool is opencode's answer to a call it could not run (an unknown tool, bad
arguments): a rejected turn. Refs are ``{"message": <id>, "part": <id>}``.
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import urllib.parse
from typing import Any

import orjson

from .._json import loads
from ..taxonomy.profiles import normalise_output
from ._base import Ledger, Trace, TraceFormatError
from ._io import Ctx, max_file_bytes, read_bytes

NAME = "opencode"
PROFILE = "opencode"

PART_TYPES = frozenset(
    {
        "text",
        "reasoning",
        "tool",
        "step-start",
        "step-finish",
        "file",
        "patch",
        "snapshot",
        "agent",
        "subtask",
        "retry",
        "compaction",
    }
)


def _usage(tokens: Any) -> dict | None:
    if not isinstance(tokens, dict):
        return None
    inp, out = tokens.get("input"), tokens.get("output")
    if not isinstance(inp, int) or not isinstance(out, int):
        return None
    cache = tokens.get("cache") if isinstance(tokens.get("cache"), dict) else {}
    reasoning = tokens.get("reasoning") if isinstance(tokens.get("reasoning"), int) else 0
    read, write = cache.get("read"), cache.get("write")
    prompt = inp + (read if isinstance(read, int) else 0) + (write if isinstance(write, int) else 0)
    completion = out + reasoning
    total = tokens.get("total")
    if reasoning > 0 and type(total) is int and total == prompt + out and out >= reasoning:
        # opencode before anomalyco/opencode#21047 (1.2.x and older) left the reasoning in
        # `output` for providers that count it there (OpenAI's convention) and summed `total`
        # without it; since then `output` is the visible part and `total` adds the reasoning.
        # The record's own total tells which one wrote it.
        completion = out
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "completion_tokens_details": {"reasoning_tokens": reasoning},
    }


def _assistant(info: dict, parts: list, ctx: Ctx, ledger: Ledger, index: int) -> None:
    mid = info.get("id")
    in_step = False
    steps_seen = any(isinstance(p, dict) and p.get("type") == "step-start" for p in parts)
    if not steps_seen:
        ledger.turn(_usage(info.get("tokens")), text="", ref={"message": mid})
        in_step = True
    for p in parts:
        if not isinstance(p, dict):
            ctx.bad(f"a part must be an object, got {type(p).__name__}", index)
            continue
        t = p.get("type")
        if not isinstance(t, str):
            ctx.bad(f"a part whose type is {type(t).__name__}, not a string", index)
            continue
        ref = {"message": mid, "part": p.get("id")}
        if t == "step-start":
            ledger.turn(None, text="", ref=ref)
            in_step = True
        elif t == "step-finish":
            if in_step:
                u = _usage(p.get("tokens"))
                if u is not None:
                    ledger.set_usage(u)
            in_step = False
        elif t in ("text", "reasoning"):
            if not in_step:
                ledger.turn(None, text="", ref=ref)
                in_step = True
            if isinstance(p.get("text"), str) and not p.get("synthetic"):
                ledger.add_text(p["text"])
        elif t == "tool":
            if not in_step:
                ledger.turn(None, text="", ref=ref)
                in_step = True
            _tool(p, ctx, ledger, ref, index)
        elif t not in PART_TYPES:
            ctx.bad(
                f"a part of type {t!r} this reader does not know; expected one of {', '.join(sorted(PART_TYPES))}",
                index,
            )


def _tool(p: dict, ctx: Ctx, ledger: Ledger, ref: dict, index: int) -> None:
    name = p.get("tool")
    if not isinstance(name, str):
        ctx.bad("a tool part without a tool name", index)
        return
    state = p.get("state") if isinstance(p.get("state"), dict) else {}
    args = state.get("input") if isinstance(state.get("input"), dict) else {}
    status = state.get("status")
    if name == "invalid":
        # opencode could not run the model's call: the input names the tool and the reason
        msg = args.get("error") if isinstance(args.get("error"), str) else state.get("output")
        ledger.reject(
            msg if isinstance(msg, str) and msg else "invalid tool call",
            args.get("tool") if isinstance(args.get("tool"), str) else "",
            None,
            ref=ref,
        )
        return
    if name == "bash" and "description" in args:
        args = {
            k: v for k, v in args.items() if k != "description"
        }  # the model's note on the command
    step = ledger.call(name, args, p.get("callID"), ref=ref)
    if status == "completed":
        md = state.get("metadata")
        code = md.get("exit") if isinstance(md, dict) else None
        if isinstance(code, int) and not isinstance(code, bool):
            step.meta["returncode"] = code  # the bash tool's exit code
        output, facts = normalise_output(PROFILE, state.get("output"))
        if facts:
            step.meta.update(facts)
        ledger.result(step, output)
    elif status == "error":
        err = state.get("error")
        ledger.result(step, err, err or True)
    # pending / running: the call never finished (left unanswered)


def _session_trace(info: dict, messages: list, ctx: Ctx, source: str | None) -> Trace:
    sid = str(info.get("id") or ctx.stem)
    ledger = Ledger(sid, ctx.profile(PROFILE), unknown_redacted=True)
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("info"), dict):
            ctx.bad('a message must be {"info": {...}, "parts": [...]}', i)
            continue
        minfo = m["info"]
        parts = m.get("parts") if isinstance(m.get("parts"), list) else []
        role = minfo.get("role")
        if role == "assistant":
            _assistant(minfo, parts, ctx, ledger, i)
        elif role == "user":
            if any(
                isinstance(p, dict) and p.get("type") in ("text", "file") and not p.get("synthetic")
                for p in parts
            ):
                # the person's own text or file (opencode marks the text it adds itself, after
                # a compaction or for a sub-task, synthetic)
                ledger.user()
            if any(isinstance(p, dict) and p.get("type") == "compaction" for p in parts):
                # the request to compact: the summary that answers it replaces the conversation
                ledger.compacted()
            for p in parts:
                if (
                    isinstance(p, dict)
                    and p.get("type") == "text"
                    and isinstance(p.get("text"), str)
                ):
                    ledger.context(len(p["text"]))
        else:
            ctx.bad(f"a message with role {role!r}; expected user or assistant", i)
    meta: dict = {}
    if info.get("parentID"):
        meta["parent_session"] = info["parentID"]
    if info.get("version"):
        meta["opencode_version"] = info["version"]
    return ledger.trace(source=source, fmt=NAME, meta=meta or None)


STREAM_TYPES = frozenset({"step_start", "step_finish", "text", "reasoning", "tool_use", "error"})


def _is_stream(doc: Any) -> bool:
    return isinstance(doc, list) and any(
        isinstance(r, dict)
        and isinstance(r.get("type"), str)
        and r["type"] in STREAM_TYPES
        and isinstance(r.get("part"), dict)
        for r in doc[:20]
    )


def _from_stream(records: list, ctx: Ctx) -> list[dict]:
    """``opencode run --format json`` events (``{"type", "sessionID", "part"}``) as export
    documents: the parts grouped by session and message, a re-sent part replacing its copy."""
    sessions: dict[str, dict[str, dict]] = {}
    for i, r in enumerate(records):
        if not isinstance(r, dict):
            ctx.bad(f"an event must be an object, got {type(r).__name__}", i)
            continue
        t = r.get("type")
        part = r.get("part")
        if not isinstance(t, str):
            ctx.bad(f"an event whose type is {type(t).__name__}, not a string", i)
            continue
        if t == "error" or not isinstance(part, dict):
            if t not in STREAM_TYPES:
                ctx.bad(
                    f"an opencode event of type {t!r} this reader does not know; expected one of "
                    f"{', '.join(sorted(STREAM_TYPES))}",
                    i,
                )
            continue
        sid = str(r.get("sessionID") or part.get("sessionID") or ctx.stem)
        mid = str(part.get("messageID") or "message")
        msgs = sessions.setdefault(sid, {})
        parts = msgs.setdefault(mid, {})
        parts[str(part.get("id") or f"#{i}")] = part
    return [
        {
            "info": {"id": sid},
            "messages": [
                {"info": {"id": mid, "role": "assistant"}, "parts": list(p.values())}
                for mid, p in msgs.items()
            ],
        }
        for sid, msgs in sessions.items()
    ]


def _is_message_lines(doc: Any) -> bool:
    """A JSONL of the export's messages, one ``{"info": {"role", "sessionID"...}, "parts"}`` per
    line (how Entire 0.4 checkpoints an opencode session: ``full.jsonl``)."""
    return (
        isinstance(doc, list)
        and bool(doc)
        and all(
            isinstance(m, dict)
            and isinstance(m.get("info"), dict)
            and isinstance(m["info"].get("role"), str)
            and isinstance(m.get("parts"), list)
            for m in doc[:20]
        )
    )


def _from_message_lines(records: list, ctx: Ctx) -> list[dict]:
    """The message lines as export documents, one per session (``info.sessionID``), in order."""
    sessions: dict[str, list] = {}
    for m in records:
        info = m.get("info") if isinstance(m, dict) else None
        sid = info.get("sessionID") if isinstance(info, dict) else None
        sessions.setdefault(str(sid) if sid else ctx.stem, []).append(m)
    return [{"info": {"id": sid}, "messages": msgs} for sid, msgs in sessions.items()]


def parse(doc: Any, ctx: Ctx) -> list[Trace]:
    """One trace per session: an export document, a list of them (what a store folder reads as),
    a ``--format json`` event stream, or the export's messages one per line."""
    if _is_stream(doc):
        doc = _from_stream(doc, ctx)
    elif _is_message_lines(doc):
        doc = _from_message_lines(doc, ctx)
    docs = doc if isinstance(doc, list) else [doc]
    traces = []
    for n, d in enumerate(docs):
        if not isinstance(d, dict) or not isinstance(d.get("messages"), list):
            ctx.bad('an opencode session needs {"info": {...}, "messages": [...]}', n)
            continue
        info = d.get("info") if isinstance(d.get("info"), dict) else {}
        src = d.get("_source") if isinstance(d.get("_source"), str) else ctx.path
        traces.append(_session_trace(info, d["messages"], ctx, src))
    return traces


def _load_json(path: str) -> Any:
    try:
        return loads(read_bytes(path))
    except orjson.JSONDecodeError as exc:
        raise TraceFormatError(f"invalid JSON: {exc.msg}", path, exc.lineno) from None


def _json_files(folder: str) -> list[str]:
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted(
        os.path.join(folder, n) for n in names if n.endswith(".json") and not n.startswith(".")
    )


def is_store(folder: str) -> bool:
    """A folder laid out as opencode's storage: ``message/`` and ``part/`` subfolders."""
    return os.path.isdir(os.path.join(folder, "message")) and os.path.isdir(
        os.path.join(folder, "part")
    )


def read_store(root: str) -> list[dict]:
    """The sessions of an opencode store as export documents (``_source`` = the session's
    message folder), sessions in the order of their first message."""
    infos: dict[str, dict] = {}
    sdir = os.path.join(root, "session")
    if os.path.isdir(sdir):
        for dirpath, _dirs, files in os.walk(sdir):
            for f in sorted(files):
                if f.endswith(".json"):
                    d = _load_json(os.path.join(dirpath, f))
                    if isinstance(d, dict) and isinstance(d.get("id"), str):
                        infos[d["id"]] = d
    docs = []
    mroot = os.path.join(root, "message")
    proot = os.path.join(root, "part")
    for sid in sorted(os.listdir(mroot)):
        mfolder = os.path.join(mroot, sid)
        if not os.path.isdir(mfolder) or sid.startswith("."):
            continue
        messages = []
        for mpath in _json_files(mfolder):
            minfo = _load_json(mpath)
            if not isinstance(minfo, dict):
                raise TraceFormatError("a message file must hold an object", mpath)
            parts = []
            for ppath in _json_files(os.path.join(proot, str(minfo.get("id") or ""))):
                parts.append(_load_json(ppath))
            parts.sort(key=lambda p: str(p.get("id", "")) if isinstance(p, dict) else "")
            messages.append({"info": minfo, "parts": parts})
        messages.sort(key=lambda m: str(m["info"].get("id", "")))
        docs.append({"info": infos.get(sid, {"id": sid}), "messages": messages, "_source": mfolder})
    return docs


_SQLITE_MAGIC = b"SQLite format 3\x00"
#: The file name opencode gives its database (in ``~/.local/share/opencode/``) on its release
#: channels; a database named on its own is told by its content.
DB_NAME = "opencode.db"
#: The names a folder walk reads as databases: opencode's on every channel
#: (``opencode-<channel>.db``, the channel with every character but ``[a-zA-Z0-9._-]`` made
#: ``-``) and those of Kilo, its fork (``kilo.db``, ``kilo-<channel>.db``).
_DB_FILE = re.compile(r"(?:opencode|kilo)(?:-[A-Za-z0-9._-]+)?\.db")


def is_db_name(name: str) -> bool:
    """A file name opencode (or Kilo) gives its database, on any channel."""
    return _DB_FILE.fullmatch(name) is not None


def is_sqlite(path: str) -> bool:
    """A file that starts as every SQLite database does."""
    try:
        with open(path, "rb") as fh:
            return fh.read(16) == _SQLITE_MAGIC
    except OSError:
        return False


def is_db(path: str) -> bool:
    """A SQLite file holding opencode's ``session``, ``message`` and ``part`` tables."""
    if not is_sqlite(path):
        return False
    try:
        with contextlib.closing(_connect(path)) as db:
            names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.Error:
        return False
    return {"session", "message", "part"} <= names


def _connect(path: str) -> sqlite3.Connection:
    # read-only: opencode may be running and writing it (WAL); nothing here ever writes;
    # callers close it (a Connection's own context manager only ends a transaction)
    uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"
    return sqlite3.connect(uri, uri=True)


def db_session_ids(path: str) -> frozenset[str]:
    """The ids of the sessions an opencode database holds (none when it cannot be read: its
    own reading then says why)."""
    if not is_db(path):
        return frozenset()
    try:
        with contextlib.closing(_connect(path)) as db:
            return frozenset(r[0] for r in db.execute("SELECT id FROM session"))
    except sqlite3.Error:
        return frozenset()


def _session_sizes(path: str) -> dict[str, int]:
    """Messages per session of an opencode database (none when it cannot be read)."""
    if not is_db(path):
        return {}
    try:
        with contextlib.closing(_connect(path)) as db:
            return {
                str(r[0]): int(r[1])
                for r in db.execute("SELECT session_id, count(*) FROM message GROUP BY session_id")
            }
    except sqlite3.Error:
        return {}


def _release_first(name: str) -> tuple[bool, str]:
    # of equal copies, the release channel's database (the one opencode and Kilo name without
    # a channel), then name order
    return (name not in ("opencode.db", "kilo.db"), name)


def shadowed_sessions(path: str) -> frozenset[str]:
    """The sessions of the database *path* that another database of its folder (another
    channel's) holds as well, in a copy with more messages or, equal, ahead of it: each
    channel's database gets its own copy of the storage folder's sessions when opencode
    migrates them, so a walk reads each session from one database."""
    folder, name = os.path.split(path)
    try:
        others = [f for f in os.listdir(folder or ".") if f != name and is_db_name(f)]
    except OSError:
        return frozenset()
    if not others:
        return frozenset()
    mine = _session_sizes(path)
    out = set()
    for other in others:
        theirs = _session_sizes(os.path.join(folder, other))
        for sid, n in mine.items():
            m = theirs.get(sid)
            if m is not None and (m, _release_first(name)) > (n, _release_first(other)):
                out.add(sid)
    return frozenset(out)


def _row_object(raw: Any, what: str, bad: list) -> dict | None:
    # a row's data column: the object's JSON (text or, from some writers, a blob)
    try:
        value = loads(raw) if isinstance(raw, (str, bytes)) else None
    except orjson.JSONDecodeError as exc:
        bad.append((None, f"{what}: invalid JSON: {exc.msg}"))
        return None
    if not isinstance(value, dict):
        bad.append((None, f"{what}: its data must be a JSON object"))
        return None
    return value


def read_db(
    path: str, skip: frozenset[str] = frozenset()
) -> tuple[list[dict], list[tuple[None, str]]]:
    """The sessions of an opencode database as export documents (``_source`` =
    ``<path>#<sessionID>``), sessions in the order they were created, messages and parts in id
    order as in the storage folder, less the sessions *skip* names; and the rows whose data is
    not a JSON object, as ``(None, message)`` (each a malformed record of the file, the rest
    still read)."""
    bad: list[tuple[None, str]] = []
    # the per-file limit of every other trace file, on the database and its write-ahead log
    # (what a read can bring into memory), never more than the user allowed
    limit = max_file_bytes()
    size = sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.isfile(p))
    if size > limit:
        raise TraceFormatError(
            f"is larger than {limit:,} bytes, the per-file limit (set LOOPCORE_MAX_FILE_BYTES "
            "to raise it)",
            path,
        )
    try:
        with contextlib.closing(_connect(path)) as db:
            db.row_factory = sqlite3.Row
            cols = {r[1] for r in db.execute("PRAGMA table_info(session)")}
            order = "time_created, id" if "time_created" in cols else "id"  # the schema's own
            sessions = db.execute(f"SELECT * FROM session ORDER BY {order}").fetchall()
            messages = db.execute(
                "SELECT id, session_id, data FROM message ORDER BY session_id, id"
            ).fetchall()
            parts = db.execute(
                "SELECT id, message_id, session_id, data FROM part ORDER BY message_id, id"
            ).fetchall()
    except sqlite3.Error as exc:
        raise TraceFormatError(f"not a readable opencode database ({exc})", path) from None
    by_message: dict[str, list[dict]] = {}
    for r in parts:
        d = _row_object(r["data"], f"part {r['id']}", bad)
        if d is not None:
            d = {"id": r["id"], "messageID": r["message_id"], "sessionID": r["session_id"]} | d
            by_message.setdefault(r["message_id"], []).append(d)
    by_session: dict[str, list[dict]] = {}
    for r in messages:
        d = _row_object(r["data"], f"message {r['id']}", bad)
        if d is not None:
            d = {"id": r["id"], "sessionID": r["session_id"]} | d
            by_session.setdefault(r["session_id"], []).append(
                {"info": d, "parts": by_message.get(r["id"], [])}
            )
    docs = []
    seen = set()
    for r in sessions:
        keys = r.keys()
        info = {"id": r["id"], "title": r["title"] if "title" in keys else None}
        if "parent_id" in keys and r["parent_id"]:
            info["parentID"] = r["parent_id"]
        for col, key in (("directory", "directory"), ("version", "version")):
            if col in keys and r[col] is not None:
                info[key] = r[col]
        seen.add(r["id"])
        if r["id"] in skip:
            continue
        docs.append(
            {"info": info, "messages": by_session.get(r["id"], []), "_source": f"{path}#{r['id']}"}
        )
    for sid in sorted(set(by_session) - seen - skip):  # messages of a session row that is gone
        docs.append({"info": {"id": sid}, "messages": by_session[sid], "_source": f"{path}#{sid}"})
    return docs, bad


def sniff(doc: Any) -> bool:
    """An export: ``{"info": {...}, "messages": [{"info": {"role"...}, "parts": [...]}]}``, a
    ``--format json`` event stream, or the export's messages one per line."""
    if _is_stream(doc) or _is_message_lines(doc):
        return True
    if (
        not isinstance(doc, dict)
        or not isinstance(doc.get("info"), dict)
        or not isinstance(doc.get("messages"), list)
    ):
        return False
    msgs = doc["messages"]
    return not msgs or any(
        isinstance(m, dict) and isinstance(m.get("info"), dict) and isinstance(m.get("parts"), list)
        for m in msgs[:20]
    )
