"""The adapters on fixtures in the exact shape of the files harnesses write today (field names,
nesting, ordering, batching as the harnesses write them; the text is the project's own).

Each test pins a way a real file used to be misread: a folder of OpenHands V1 event files read as
one trace per file, a 2024 resolver output giving no step, a failed edit counted as a change,
gemini-cli's JSONL recording not read, a batch of function responses given to the wrong call,
Codex output headers making identical reads differ, sub-agents of a session sharing one id.
"""

from __future__ import annotations

import json
import pathlib
import shutil

import pytest

import loopcore
import loopcore.adapters
import loopcore.trace
from loopcore.adapters import LoadStats, TraceFormatError, detect_format, load
from loopcore.taxonomy.profiles import normalise_output

FIX = pathlib.Path(__file__).parent / "fixtures"
OH_CONV = "5b1e0c2ad9f84e6b9a7c3d2e1f0a9b8c"


def calls(t):
    return [s for s in t if s.name and s.rejected is None]


def only(path, **kw):
    traces = list(load(path, **kw))
    assert len(traces) == 1, traces
    return traces[0]


# ---- OpenHands V1 ----------------------------------------------------------------------------


def test_openhands_v1_event_folder_is_one_conversation():
    stats = LoadStats()
    traces = list(load(FIX / "openhands_v1", stats=stats))
    assert len(traces) == 1  # 23 event files, one conversation (base_state.json is not a trace)
    t = traces[0]
    assert t.format == "openhands" and t.session == OH_CONV and t.meta["generation"] == "v1"
    assert [s.name for s in t] == [
        "terminal",
        "file_editor",
        "file_editor",
        "grep_tool",
        "terminal",
        "terminal",
        "finish",
    ]
    assert stats.files == 24 and [p.endswith("base_state.json") for p in stats.ignored] == [True]
    # every step points back at its event
    names = sorted(p.name for p in (FIX / "openhands_v1" / OH_CONV / "events").iterdir())
    for s in t:
        assert any(n.endswith(f"-{s.ref['event']}.json") for n in names)


def test_openhands_v1_folder_under_any_name(tmp_path):
    src = FIX / "openhands_v1" / OH_CONV / "events"
    for name in ("events", "conversation-copy"):
        dst = tmp_path / name / "x" if name == "events" else tmp_path / name
        shutil.copytree(src, dst if name != "events" else tmp_path / "c1" / "events")
    a, b = load(tmp_path)
    assert [s.to_dict()["name"] for s in a] == [s.to_dict()["name"] for s in b]
    assert a.session == "c1" and b.session == "conversation-copy"


def test_openhands_v1_agent_server_folder_names_the_conversation(tmp_path):
    """The agent server keeps a conversation's events in ``conversations/<id>/event_service/
    events/`` (OpenHands/benchmarks, a workspace of 2025-09-26): every conversation was named
    ``event_service``."""
    src = FIX / "openhands_v1" / OH_CONV / "events"
    for conv in ("0a1b2c3d", "4e5f6a7b"):
        shutil.copytree(src, tmp_path / "conversations" / conv / "event_service" / "events")
    assert sorted(t.session for t in load(tmp_path / "conversations")) == ["0a1b2c3d", "4e5f6a7b"]


def test_openhands_v1_export_matches_the_folder():
    folder = only(FIX / "openhands_v1")
    export = only(FIX / "openhands_v1_export.json")
    strip = lambda t: [{k: v for k, v in s.to_dict().items() if k != "session"} for s in t]
    assert strip(export) == strip(folder)


def test_openhands_v1_failed_edit_rejected_call_and_usage():
    t = only(FIX / "openhands_v1")
    grep, bad_edit, edit, refused, run, grep2, finish = t.steps
    assert (grep.kind, grep.target, grep.meta["returncode"]) == ("observe", "app.py", 0)
    assert grep.text == "Find the definition first."
    # "No replacement was performed": a failed call that changed nothing
    assert bad_edit.kind == "mutate" and bad_edit.error.startswith("No replacement was performed")
    assert bad_edit.no_op and bad_edit.write_set == ()
    assert edit.error is None and not edit.no_op and edit.write_set == ("/workspace/proj/app.py",)
    # an unknown tool: the SDK refused the call, nothing ran
    assert refused.kind == "other" and refused.rejected.startswith("Tool 'grep_tool' not found")
    # two calls of one response share its turn; usage comes from the stats updates (deltas)
    assert run.turn == grep2.turn and run.turn != edit.turn
    assert grep.tokens_out + grep.tokens_turn == 80 and not grep.tokens_estimated
    assert grep.tokens_in == (6200 - 3000) - 3000 - 80  # the next prompt grew by the result
    assert t.meta["tokens_source"] in ("usage", "mixed") and finish.kind == "other"


def test_openhands_v1_unknown_event_kind_is_reported(tmp_path):
    events = json.loads((FIX / "openhands_v1_export.json").read_text())
    events.insert(3, {"id": "e-new", "timestamp": "t", "source": "agent", "kind": "HologramEvent"})
    p = tmp_path / "conv.json"
    p.write_text(json.dumps(events))
    with pytest.raises(TraceFormatError) as ei:
        list(load(p))
    assert (
        "HologramEvent" in str(ei.value)
        and str(p) in str(ei.value)
        and "ActionEvent" in str(ei.value)
    )
    stats = LoadStats()
    (t,) = load(p, keep_going=True, stats=stats)
    assert t.meta["skipped"] == 1 and stats.skipped_lines == 1 and len(t) == 7


def _acp(cid, status, **extra):
    # an ACPToolCallEvent as OpenHands persists it (model_dump of the SDK's event): one per
    # update of the call, in the shapes public users of ACP agents in OpenHands record
    return {"kind": "ACPToolCallEvent", "id": f"{cid}-{status}", "timestamp": "2026-10-09T01:00:00",
            "source": "agent", "tool_call_id": cid, "status": status, "is_error": False, **extra}  # fmt: skip


def _text_block(text):
    return [{"type": "content", "content": {"annotations": None, "field_meta": None, "type": "text",
                                            "text": text}}]  # fmt: skip


def test_openhands_acp_agent_calls_are_steps(tmp_path):
    """An agent OpenHands drives over ACP (Claude Code here) writes ACPToolCallEvents, one per
    update of a call: each call is one step at its first update, named by its ACP tool kind,
    with the latest input and the final answer; a sub-agent's calls are a trace of their own."""
    program = "var builder = WebApplication.CreateBuilder(args);\n" * 4
    events = [
        {"kind": "MessageEvent", "id": "m0", "timestamp": "t", "source": "user",
         "llm_message": {"role": "user", "content": [{"type": "text", "text": "add a health check"}]}},
        _acp("toolu_1", "pending", title="Read", tool_kind="read"),
        _acp("toolu_1", "completed", title="Read src/Api/Program.cs",
             raw_input={"file_path": "/w/src/Api/Program.cs"}, content=_text_block(program)),
        _acp("toolu_2", "in_progress", title="dotnet build", tool_kind="execute",
             raw_input={"command": "dotnet build", "description": "Build"}),
        _acp("toolu_2", "in_progress", title="dotnet build", tool_kind="execute"),
        _acp("toolu_2", "failed", title="dotnet build", tool_kind="execute", is_error=True,
             raw_output={"error": "exit 1: CS1002 ; expected"}),
        _acp("toolu_3", "completed", title="Task: check the tests", tool_kind="other",
             raw_input={"description": "check the tests"}),
        _acp("toolu_4", "completed", title="Read tests/ApiTests.cs", tool_kind="read",
             raw_input={"file_path": "/w/tests/ApiTests.cs"}, content=_text_block("[Fact]"),
             parent_tool_call_id="toolu_3"),
        _acp("toolu_5", "completed", title="Read src/Api/Program.cs", tool_kind="read",
             raw_input={"file_path": "/w/src/Api/Program.cs"}, content=_text_block(program)),
        _acp("toolu_6", "in_progress", title="Edit Program.cs", tool_kind="edit",
             raw_input={"file_path": "/w/src/Api/Program.cs", "old_string": "a", "new_string": "b"}),
    ]  # fmt: skip
    p = tmp_path / "conv.json"
    p.write_text(json.dumps(events))
    main, sub = load(p)
    assert main.session == "conv" and sub.session == "conv/toolu_3"
    read, build, task, read2, edit = main.steps
    assert (read.name, read.kind, read.target) == ("acp:read", "observe", "/w/src/Api/Program.cs")
    assert read.result == program and read.meta["title"] == "Read src/Api/Program.cs"
    assert (build.kind, build.args["command"]) == ("exec", "dotnet build")
    assert build.error is True and build.result == {"error": "exit 1: CS1002 ; expected"}
    assert task.kind == "exec" and task.name == "acp:other"
    assert (edit.kind, edit.target, edit.result) == ("mutate", "/w/src/Api/Program.cs", None)
    (sub_read,) = sub.steps
    assert sub_read.target == "/w/tests/ApiTests.cs" and sub.meta["parent_call"] == "toolu_3"
    # the second read of Program.cs came after the build and the sub-agent's task (exec):
    # nothing says the file was the same, so it is no finding
    assert [f for f in loopcore.analyse_burn(main).findings] == []
    # the output may come with an update before the one that ends the call (each update
    # replaces what it names); a call that ends without any output has no outcome: a second
    # such read is only the same call made again (the duplicate-call rule), never "the same
    # result"
    split = [events[0],
             _acp("toolu_7", "in_progress", tool_kind="read", raw_input={"file_path": "/w/a.cs"},
                  content=_text_block("class A {}")),
             _acp("toolu_7", "completed", tool_kind="read"),
             _acp("toolu_8", "completed", tool_kind="read", raw_input={"file_path": "/w/b.cs"}),
             _acp("toolu_9", "completed", tool_kind="read", raw_input={"file_path": "/w/b.cs"})]  # fmt: skip
    p.write_text(json.dumps(split))
    (t,) = load(p)
    a, b1, b2 = t.steps
    assert a.result == "class A {}" and b1.result is None and b2.result is None
    assert [(f.kind, f.steps) for f in loopcore.analyse_burn(t).findings] == [
        ("duplicate_call", (2,))
    ]
    # the same file read twice with nothing in between: the second read is charged
    again = [events[0], events[1], events[2],
             _acp("toolu_9", "completed", title="Read src/Api/Program.cs", tool_kind="read",
                  raw_input={"file_path": "/w/src/Api/Program.cs"}, content=_text_block(program))]  # fmt: skip
    p.write_text(json.dumps(again))
    (t,) = load(p)
    (f,) = loopcore.analyse_burn(t).findings
    assert f.steps == (1,) and f.of_step == 0
    assert f.kind in ("redundant_observation", "duplicate_call")


def test_openhands_2024_resolver_output_is_read():
    assert detect_format(FIX / "openhands_resolver_2024.jsonl") == "openhands"
    t = only(FIX / "openhands_resolver_2024.jsonl")
    assert t.session == "acme/tool#7" and t.meta["generation"] == "resolver-2024"
    run, edit, run2, finish = t.steps
    assert (run.name, run.kind, run.target, run.meta["returncode"]) == (
        "run",
        "observe",
        "cli.py",
        0,
    )
    assert run.text == "Let me look at the CLI." and "thought" not in run.args
    assert edit.kind == "mutate" and edit.target == "/workspace/cli.py"
    assert edit.error.startswith("ERROR:") and edit.no_op
    assert run2.result == run.result and finish.kind == "other"


# ---- gemini-cli ------------------------------------------------------------------------------


def test_gemini_cli_jsonl_recording():
    path = FIX / "gemini_cli_session.jsonl"
    assert detect_format(path) == "gemini-cli"
    t = only(path)
    assert t.session == "7c2f9e0a-1b3d-4c5e-8f6a-9b0c1d2e3f4a" and t.meta["recording"] == "jsonl"
    read, glob, topic, refused, replace, rewound, reply = t.steps
    # the batch of two responses is recorded on both calls: each takes its own by id
    assert read.result == "line one\nline two\n"
    assert glob.result.startswith("Found 2 file(s)")
    assert (read.kind, read.target, glob.kind, glob.target) == (
        "observe",
        "src/a.ts",
        "observe",
        "src",
    )
    # the message was written three times (calls, results, tokens): read once, with its tokens
    assert read.ref == glob.ref == {"line": 6} and read.turn == glob.turn == 0
    assert sum(s.tokens_out + s.tokens_turn for s in (read, glob)) == 40 + 30
    assert "Look at a.ts" in read.text
    # update_topic changes no file
    assert (topic.kind, topic.target, topic.write_set) == ("other", None, ())
    assert refused.rejected.startswith('Tool "edit_file" not found') and refused.kind == "other"
    assert (replace.kind, replace.target) == ("mutate", "/p/src/a.ts")
    # the rewound reply was made and billed: read, marked; the last reply ran nothing
    assert rewound.text == "A reply the user rewound." and rewound.ref == {"line": 10}
    assert rewound.meta["rewound"] and t.meta["rewound_messages"] == 1
    assert reply.name == "" and reply.text.startswith("a.ts now says") and reply.ref == {"line": 13}
    assert [s for s in t if s.meta.get("rewound")] == [rewound]


def test_gemini_cli_old_json_recording_still_read():
    t = only(FIX / "gemini_cli_session.json")
    assert t.meta["recording"] == "json" and [s.name for s in calls(t)] == [
        "read_file",
        "run_shell_command",
    ]


def test_gemini_cli_unknown_line_is_reported(tmp_path):
    lines = (FIX / "gemini_cli_session.jsonl").read_text().splitlines()
    lines.insert(2, json.dumps({"$teleport": "m-u1"}))
    p = tmp_path / "session-x.jsonl"
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(TraceFormatError) as ei:
        list(load(p))
    assert ei.value.line == 3 and "$rewindTo" in str(ei.value)


# ---- Codex -----------------------------------------------------------------------------------


def test_codex_output_headers_are_normalised():
    t = only(FIX / "codex_rollout_unified_exec.jsonl")
    assert t.format == "codex" and t.meta["cli_version"] == "0.63.0"
    r1, r2, test, poll, search, bad, reply = t.steps
    # the same read twice: equal results once the per-call header (chunk id, wall time) is gone
    assert r1.result == r2.result == "def parse(text):\n    return text.split()\n"
    assert r1.meta["returncode"] == 0 and (r1.kind, r1.target) == ("observe", "src/parser.py")
    assert test.kind == "exec" and test.meta["exec_session"] == "41"
    # polling a running command waits while it runs, and a running command may change anything
    assert (poll.name, poll.kind, poll.target, poll.meta["returncode"]) == (
        "write_stdin",
        "exec",
        None,
        1,
    )
    assert search.name == "web_search" and search.kind == "observe"
    assert search.target == "search:python str.split empty string result" and search.error is None
    assert bad.rejected.startswith("failed to parse function arguments") and bad.kind == "other"
    assert reply.name == "" and reply.text.startswith("The test expects")
    assert r1.text == "**Looking at the parser module**"
    assert [s.ref["line"] for s in t] == [7, 11, 14, 17, 20, 21, 24]


def test_codex_normaliser_leaves_other_text_alone():
    assert normalise_output("codex", "Chunk ID: x\nno output marker") == (
        "Chunk ID: x\nno output marker",
        {},
    )
    assert normalise_output("codex", "Wall time: 0.1 seconds\nOutput:\nok") == ("ok", {})
    assert normalise_output("codex", "Exit code: 2\nWall time: 1 seconds\nOutput:\n") == (
        "",
        {"returncode": 2},
    )
    assert (
        normalise_output("claude-code", "Chunk ID: x\nOutput:\nok")[0] == "Chunk ID: x\nOutput:\nok"
    )
    assert normalise_output("codex", {"a": 1}) == ({"a": 1}, {})


def test_codex_unknown_record_type_is_reported(tmp_path):
    lines = (FIX / "codex_rollout_unified_exec.jsonl").read_text().splitlines()
    lines.insert(4, json.dumps({"timestamp": "t", "type": "hologram", "payload": {}}))
    p = tmp_path / "rollout.jsonl"
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(TraceFormatError) as ei:
        list(load(p))
    assert ei.value.line == 5 and "hologram" in str(ei.value) and "response_item" in str(ei.value)
    stats = LoadStats()
    (t,) = load(p, keep_going=True, stats=stats)
    assert len(t) == 7 and stats.skipped_lines == 1


# ---- Claude Code -----------------------------------------------------------------------------


def test_claude_code_each_sub_agent_file_is_its_own_trace():
    traces = list(load(FIX / "claude_code_subagents"))
    sid = "3e4f5a6b-7c8d-4e9f-a0b1-c2d3e4f5a6b7"
    assert [t.session for t in traces] == [sid, f"{sid}/a1b2c3d4", f"{sid}/e5f6a7b8"]
    a, b = traces[1:]
    assert (a.steps[0].target, b.steps[0].target) == (
        "/home/dev/lib/src/a.py",
        "/home/dev/lib/src/b.py",
    )


def test_claude_code_refused_tool_and_reply_turns():
    t = list(load(FIX / "claude_code_subagents"))[0]
    task, refused, reply = t.steps
    assert task.text == "Starting two helpers." and task.ref == {"line": 4}
    assert refused.rejected.startswith("<tool_use_error>") and refused.kind == "other"
    assert reply.name == "" and reply.text == "Both parts look fine."
    # only the last turn's result has no next prompt to measure it: the estimate is per step
    assert not any(s.tokens_estimated for s in t)


# ---- opencode --------------------------------------------------------------------------------


def test_opencode_storage_folder_and_export_agree():
    store = only(FIX / "opencode_storage")
    export = only(FIX / "opencode_export.json")
    assert store.format == export.format == "opencode"
    assert (
        store.session == "ses_7a1b2c3d4e5fABCDEFGHIJ"
        and store.meta["opencode_version"] == "1.0.107"
    )
    strip = lambda t: [s.to_dict() for s in t]
    assert strip(store) == strip(export)


# The tables of opencode 1.1+ (packages/opencode/src/session/session.sql.ts): a row's data is
# the object's JSON less the ids its columns hold.
_OPENCODE_SCHEMA = """
CREATE TABLE project (id text PRIMARY KEY, worktree text NOT NULL);
CREATE TABLE session (id text PRIMARY KEY, project_id text NOT NULL, workspace_id text,
  parent_id text, slug text NOT NULL, directory text NOT NULL, path text, title text NOT NULL,
  version text NOT NULL, share_url text, cost real NOT NULL DEFAULT 0,
  time_created integer NOT NULL, time_updated integer NOT NULL, time_archived integer);
CREATE TABLE message (id text PRIMARY KEY, session_id text NOT NULL,
  time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);
CREATE TABLE part (id text PRIMARY KEY, message_id text NOT NULL, session_id text NOT NULL,
  time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);
CREATE TABLE todo (session_id text NOT NULL, content text NOT NULL, status text NOT NULL,
  priority text NOT NULL, position integer NOT NULL);
"""


def _opencode_db(path, store):
    """The sessions of a storage folder written as opencode 1.1+ writes them to SQLite (rows
    inserted in an order of their own: the reader orders them)."""
    import sqlite3

    def objects(sub):
        return [json.loads(p.read_text()) for p in sorted((store / sub).rglob("*.json"))]

    db = sqlite3.connect(path)
    db.executescript(_OPENCODE_SCHEMA)
    for s in objects("session"):
        db.execute(
            "INSERT INTO session (id, project_id, parent_id, slug, directory, title, version,"
            " time_created, time_updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (s["id"], s["projectID"], s.get("parentID"), "fix-footer", s["directory"],
             s["title"], s["version"], s["time"]["created"], s["time"]["updated"]),
        )  # fmt: skip
    for m in reversed(objects("message")):
        data = {k: v for k, v in m.items() if k not in ("id", "sessionID")}
        db.execute(
            "INSERT INTO message VALUES (?, ?, ?, ?, ?)",
            (m["id"], m["sessionID"], 0, 0, json.dumps(data)),
        )
    for p in reversed(objects("part")):
        data = {k: v for k, v in p.items() if k not in ("id", "sessionID", "messageID")}
        db.execute(
            "INSERT INTO part VALUES (?, ?, ?, ?, ?, ?)",
            (p["id"], p["messageID"], p["sessionID"], 0, 0, json.dumps(data)),
        )
    db.commit()
    return db


def test_opencode_database_reads_as_its_storage_folder(tmp_path):
    # opencode 1.1+ keeps the storage folder's objects in ~/.local/share/opencode/opencode.db
    home = tmp_path / "share" / "opencode"
    home.mkdir(parents=True)
    db = _opencode_db(home / "opencode.db", FIX / "opencode_storage")
    db.close()
    store = only(FIX / "opencode_storage")
    for source in (home / "opencode.db", tmp_path):  # named, or found by a folder walk
        (t,) = load(source)
        assert t.format == "opencode" and t.session == store.session
        assert t.meta["opencode_version"] == "1.0.107"
        assert t.source == f"{home / 'opencode.db'}#{store.session}"
        assert [s.to_dict() for s in t] == [s.to_dict() for s in store]


def test_opencode_storage_left_beside_its_database_is_read_once(tmp_path):
    # opencode 1.2 migrated the storage folder into opencode.db and left the files: a walk
    # of the data folder reads each session once, from the database; a session only in the
    # storage is still read, and the storage named on its own is read whole
    home = tmp_path / "opencode"
    shutil.copytree(FIX / "opencode_storage", home / "storage")
    only_files = home / "storage" / "message" / "ses_only_in_files"
    only_files.mkdir()
    (only_files / "msg_x.json").write_text(json.dumps(
        {"id": "msg_x", "sessionID": "ses_only_in_files", "role": "user",
         "time": {"created": 1}}))  # fmt: skip
    _opencode_db(home / "opencode.db", FIX / "opencode_storage").close()
    traces = list(load(home, keep_going=True))
    by_session = {}
    for t in traces:
        by_session.setdefault(t.session, []).append(t.source)
    assert by_session["ses_7a1b2c3d4e5fABCDEFGHIJ"] == [
        f"{home / 'opencode.db'}#ses_7a1b2c3d4e5fABCDEFGHIJ"
    ]
    assert "ses_only_in_files" in by_session
    # all of the storage migrated: the folder adds no trace, not even an empty one
    shutil.rmtree(only_files)
    (t,) = load(home, keep_going=True)
    assert t.source == f"{home / 'opencode.db'}#ses_7a1b2c3d4e5fABCDEFGHIJ"
    only_files.mkdir()
    (only_files / "msg_x.json").write_text(json.dumps(
        {"id": "msg_x", "sessionID": "ses_only_in_files", "role": "user",
         "time": {"created": 1}}))  # fmt: skip
    alone = list(load(home / "storage", keep_going=True))
    assert sorted(t.session for t in alone) == ["ses_7a1b2c3d4e5fABCDEFGHIJ", "ses_only_in_files"]


def test_opencode_channel_databases_are_read_once_each_session(tmp_path):
    # opencode names its database opencode-<channel>.db off the release channels (Kilo, its
    # fork, kilo.db / kilo-<channel>.db) and copies the storage folder into each: a walk of
    # the data folder reads them, each session once (from the copy with the most messages;
    # of equal copies, the release channel's), and a database named on its own is read whole
    import sqlite3

    store = only(FIX / "opencode_storage")
    sid = store.session
    home = tmp_path / "opencode"
    home.mkdir()
    _opencode_db(home / "opencode-dev.db", FIX / "opencode_storage").close()
    (t,) = load(home)
    assert t.source == f"{home / 'opencode-dev.db'}#{sid}"
    assert [s.to_dict() for s in t] == [s.to_dict() for s in store]
    _opencode_db(home / "opencode.db", FIX / "opencode_storage").close()
    (t,) = load(home)
    assert t.source == f"{home / 'opencode.db'}#{sid}"
    # the session went on in the dev channel: its copy there is the whole of it
    db = sqlite3.connect(home / "opencode-dev.db")
    db.execute(
        "INSERT INTO message VALUES ('msg_zzzz', ?, 0, 0, ?)",
        (sid, json.dumps({"role": "user", "time": {"created": 9}})),
    )
    db.commit()
    db.close()
    stats = LoadStats()
    (t,) = load(home, stats=stats)
    assert t.source == f"{home / 'opencode-dev.db'}#{sid}" and stats.files == 2
    for named in ("opencode.db", "opencode-dev.db"):
        (t,) = load(home / named)
        assert t.source == f"{home / named}#{sid}"
    # Kilo's data folder: its database beside the storage folder it migrated
    kilo = tmp_path / "kilo"
    shutil.copytree(FIX / "opencode_storage", kilo / "storage")
    _opencode_db(kilo / "kilo.db", FIX / "opencode_storage").close()
    (t,) = load(kilo)
    assert t.source == f"{kilo / 'kilo.db'}#{sid}"


def test_opencode_database_rows_that_are_not_objects_are_reported(tmp_path, monkeypatch):
    path = tmp_path / "opencode.db"
    db = _opencode_db(path, FIX / "opencode_storage")
    db.execute("INSERT INTO part VALUES ('prt_zz', 'msg_a1b2c3d40002ZYXWVUTSRQPONM',"
               " 'ses_7a1b2c3d4e5fABCDEFGHIJ', 0, 0, '{not json')")  # fmt: skip
    db.commit()
    db.close()
    with pytest.raises(TraceFormatError, match="part prt_zz: invalid JSON") as err:
        list(load(path))
    assert err.value.path == str(path)
    stats = LoadStats()
    (t,) = load(path, keep_going=True, stats=stats)
    assert len(t.steps) == len(only(FIX / "opencode_storage").steps)
    assert [str(e) for e in stats.errors] and "prt_zz" in str(stats.errors[0])
    # the per-file limit holds for the database as for any trace file
    monkeypatch.setenv("LOOPCORE_MAX_FILE_BYTES", "4096")
    with pytest.raises(TraceFormatError, match="larger than 4,096 bytes, the per-file limit"):
        list(load(path))
    monkeypatch.delenv("LOOPCORE_MAX_FILE_BYTES")
    # a SQLite file that is no opencode database is no trace: said so, named
    other = tmp_path / "other.db"
    import sqlite3

    sqlite3.connect(other).executescript("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
    with pytest.raises(TraceFormatError, match="without opencode's session, message") as err:
        list(load(other))
    assert err.value.path == str(other)
    # found by a folder walk under opencode's name, it is ignored like any other file that
    # holds no trace
    walked = tmp_path / "walk"
    walked.mkdir()
    shutil.copy(other, walked / "opencode.db")
    stats = LoadStats()
    assert list(load(walked, stats=stats)) == []
    assert stats.ignored == [str(walked / "opencode.db")]


def test_opencode_parts():
    t = only(FIX / "opencode_export.json")
    grep, read, invalid, edit, reply = t.steps
    assert (grep.kind, grep.target) == ("observe", "src")
    assert (read.kind, read.target) == ("observe", "/home/dev/site/src/Footer.tsx")
    assert read.turn == invalid.turn != grep.turn  # one step-start ... step-finish run
    assert (
        invalid.rejected.startswith("Model tried to call unavailable tool")
        and invalid.name == "open_file"
    )
    assert edit.kind == "mutate" and edit.error == "Error: oldString not found in content"
    assert reply.name == "" and reply.text.startswith("The link already")
    # step-finish tokens: output + reasoning of the call, prompt growth for the result
    assert grep.tokens_out + grep.tokens_turn == 60
    assert grep.tokens_in == (400 + 3200) - (20 + 3000 + 200) - 60
    assert grep.ref == {
        "message": "msg_a1b2c3d40002ZYXWVUTSRQPONM",
        "part": "prt_a1b2c3d40004ZYXWVUTSRQPONM",
    }
    assert t.meta["tokens_source"] == "usage"


# ---- Cline / Roo Code ------------------------------------------------------------------------


def test_cline_xml_tool_use_with_ui_messages_usage():
    t = only(FIX / "cline_task")
    assert t.format == "cline" and t.session == "1760001234567"
    read, refused, replace, cmd, done = t.steps
    assert (read.name, read.kind, read.target) == ("read_file", "observe", "src/util.js")
    assert read.result.startswith("export const slugify")
    assert read.text == "<thinking>I need to see the helper first.</thinking>"
    # a reply with no tool: the harness answered with a format error
    assert refused.rejected.startswith("[ERROR] You did not use a tool") and refused.name == ""
    assert (replace.kind, replace.target) == ("mutate", "src/util.js") and "SEARCH" in replace.args[
        "diff"
    ]
    assert cmd.kind == "exec" and cmd.args["command"] == "npm test -- util"
    assert done.name == "attempt_completion" and done.kind == "other"
    # tokens from ui_messages.json: prompt = tokensIn + cacheWrites + cacheReads
    assert t.meta["tokens_source"] == "usage"
    assert read.tokens_out + read.tokens_turn == 60
    assert read.tokens_in + refused.tokens_in == 0 or read.tokens_in > 0


def test_roo_native_tool_calls():
    t = only(FIX / "roo_task")
    ls, missing, done = t.steps
    assert (ls.kind, ls.target, ls.result) == ("observe", "config", "app.yaml\ndb.yaml")
    assert (
        missing.rejected.startswith("Missing value for required parameter")
        and missing.kind == "other"
    )
    assert done.kind == "other"


# ---- silence ---------------------------------------------------------------------------------


def test_a_file_that_gives_no_step_is_reported(tmp_path):
    p = tmp_path / "session-1.jsonl"
    p.write_text(
        json.dumps({"sessionId": "s", "projectHash": "h", "startTime": "t", "lastUpdated": "t"})
        + "\n"
        + json.dumps({"id": "u", "timestamp": "t", "type": "user", "content": [{"text": "hi"}]})
        + "\n"
    )
    stats = LoadStats()
    (t,) = load(p, stats=stats)
    assert t.format == "gemini-cli" and not t.steps and t.meta["no_steps"] is True
    assert stats.no_steps == [str(p)]
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    stats = LoadStats()
    list(load(empty, stats=stats))
    assert stats.no_steps == []  # an empty file is no surprise


def test_formats_lists_every_format_with_what_it_was_checked_against():
    from loopcore.adapters import FORMATS, format_table

    rows = format_table()
    assert [r["name"] for r in rows] == list(FORMATS)
    for r in rows:
        assert r["reads"] and isinstance(r["checked"], list)
    checked = {r["name"] for r in rows if r["checked"]}
    assert {"openhands", "gemini-cli", "codex", "claude-code", "cline", "opencode"} <= checked
    for r in rows:
        for c in r["checked"]:
            assert c["repo"].count("/") == 1 and len(c["commit"]) == 40


def test_cli_formats_command(capsys):
    from loopcore.cli import main

    assert main(["formats"]) == 0
    out = capsys.readouterr().out
    for name in loopcore.adapters.FORMATS:
        assert name in out


def test_cli_warns_when_a_file_gives_no_step(tmp_path, capsys):
    from loopcore.cli import main

    p = tmp_path / "session-1.jsonl"
    p.write_text(
        json.dumps({"sessionId": "s", "projectHash": "h", "startTime": "t", "lastUpdated": "t"})
        + "\n"
        + json.dumps({"id": "u", "timestamp": "t", "type": "user", "content": [{"text": "hi"}]})
        + "\n"
    )
    assert main(["analyse", str(p), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "Warning: 1 input of a known format gave no tool call or reply" in out and str(p) in out
    assert main(["replay", str(p), "--no-progress"]) == 0
    assert "gave no tool call or reply" in capsys.readouterr().out


def test_openhands_ipython_agent_skills_are_classified():
    from loopcore.taxonomy import classify

    assert classify("run_ipython", {"code": "open_file('/w/app.css')"}, "openhands") == (
        "observe",
        "/w/app.css",
    )
    cell = "print(edit_file_by_replace(\n    '/w/a.tsx',\n    to_replace='x',\n    new_content='''y\nz''',\n))"
    assert classify("run_ipython", {"code": cell}, "openhands") == ("mutate", "/w/a.tsx")
    assert classify("run_ipython", {"code": "search_dir('needle', '/w')"}, "openhands") == (
        "observe",
        "/w",
    )
    assert classify("run_ipython", {"code": "x = 1\nopen_file('a')"}, "openhands") == ("exec", None)
    assert classify("execute_ipython_cell", {"code": "import os; os.remove('b')"}, "openhands") == (
        "exec",
        None,
    )


def test_openhands_edits_the_skills_did_not_make_are_failed_no_ops():
    events = [
        {
            "id": 1,
            "source": "agent",
            "action": "run_ipython",
            "args": {
                "code": "print(edit_file_by_replace('/w/a.py', to_replace='a', new_content='b'))",
                "thought": "",
            },
        },
        {
            "id": 2,
            "cause": 1,
            "observation": "run_ipython",
            "source": "agent",
            "content": "[No exact match found in /w/a.py for\n```\na\n```\n]",
            "extras": {},
        },
        {"id": 3, "source": "agent", "action": "run", "args": {"command": "ls\nls", "thought": ""}},
        {
            "id": 4,
            "cause": 3,
            "observation": "error",
            "source": "user",
            "content": "Cannot execute multiple commands at once.\nPlease run each command separately",
            "extras": {},
        },
    ]
    (t,) = load(events, format="openhands")
    edit, refused = t.steps
    assert (edit.kind, edit.target, edit.no_op) == (
        "mutate",
        "/w/a.py",
        True,
    ) and edit.error.startswith("[No exact")
    assert (
        refused.rejected.startswith("Cannot execute multiple commands") and refused.kind == "other"
    )


def test_gemini_cli_shell_footer_is_normalised(tmp_path):
    def call(cid, out):
        return {
            "id": cid,
            "name": "run_shell_command",
            "args": {"command": "make check"},
            "status": "success",
            "result": [
                {
                    "functionResponse": {
                        "id": cid,
                        "name": "run_shell_command",
                        "response": {"output": out},
                    }
                }
            ],
        }

    first = "<untrusted_context>\nOutput: 2 checks failed\nExit Code: 2\nProcess Group PGID: 4101\n</untrusted_context>"
    again = "<untrusted_context>\nOutput: 2 checks failed\nExit Code: 2\nProcess Group PGID: 4188\n</untrusted_context>"
    lines = [
        {
            "sessionId": "s-f",
            "projectHash": "h",
            "startTime": "t",
            "lastUpdated": "t",
            "kind": "main",
        },
        {
            "id": "g1",
            "timestamp": "t",
            "type": "gemini",
            "content": "",
            "toolCalls": [call("run_shell_command__1", first)],
        },
        # the results come again on the next user record: context the model saw once, not twice
        {
            "id": "u1",
            "timestamp": "t",
            "type": "user",
            "content": [
                {
                    "functionResponse": {
                        "id": "run_shell_command__1",
                        "name": "run_shell_command",
                        "response": {"output": first},
                    }
                }
            ],
        },
        {
            "id": "g2",
            "timestamp": "t",
            "type": "gemini",
            "content": "",
            "toolCalls": [call("run_shell_command__1", again)],
        },
    ]
    p = tmp_path / "session-f.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in lines))
    a, b = only(p).steps
    assert a.result == b.result == "Output: 2 checks failed\nExit Code: 2"
    assert a.meta["returncode"] == b.meta["returncode"] == 2
    assert normalise_output("gemini-cli", "Output: (empty)\nProcess Group PGID: 1") == (
        "Output: (empty)",
        {},
    )


def test_roo_multi_file_read_names_every_file():
    msgs = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "<task>\nCompare the two notes.\n</task>"}],
        },
        {
            "role": "assistant",
            "content": [
                {
                    "type": "text",
                    "text": "<read_file><args><file><path>notes/q&amp;a.md</path></file><file><path>notes/faq.md</path></file></args></read_file>",
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "[read_file for 'notes/q&a.md', 'notes/faq.md'] Result:"},
                {"type": "text", "text": "<files>...</files>"},
            ],
        },
    ]
    (t,) = load(msgs)
    (read,) = t.steps
    assert t.format == "cline" and (read.kind, read.target) == (
        "observe",
        ("notes/q&a.md", "notes/faq.md"),
    )
    assert read.result == "<files>...</files>"


def test_opencode_run_json_event_stream():
    sid, mid = "ses_stream0001", "msg_stream0001"
    part = lambda pid, **kw: {"id": pid, "sessionID": sid, "messageID": mid, **kw}
    events = [
        {
            "type": "step_start",
            "timestamp": 1,
            "sessionID": sid,
            "part": part("prt_1", type="step-start"),
        },
        {
            "type": "text",
            "timestamp": 2,
            "sessionID": sid,
            "part": part("prt_2", type="text", text="Checking."),
        },
        {
            "type": "tool_use",
            "timestamp": 3,
            "sessionID": sid,
            "part": part(
                "prt_3",
                type="tool",
                tool="list",
                callID="c1",
                state={
                    "status": "completed",
                    "input": {"path": "docs"},
                    "output": "a.md",
                    "title": "docs",
                    "metadata": {},
                },
            ),
        },
        {
            "type": "step_finish",
            "timestamp": 4,
            "sessionID": sid,
            "part": part(
                "prt_4",
                type="step-finish",
                reason="tool-calls",
                cost=0,
                tokens={
                    "input": 900,
                    "output": 12,
                    "reasoning": 3,
                    "cache": {"read": 0, "write": 0},
                },
            ),
        },
    ]
    assert detect_format(events) == "opencode"
    (t,) = load(events)
    (ls,) = t.steps
    assert (t.session, ls.kind, ls.target, ls.result, ls.text) == (
        sid,
        "observe",
        "docs",
        "a.md",
        "Checking.",
    )
    assert ls.tokens_out + ls.tokens_turn == 15


def test_cline_native_calls_answered_by_result_text():
    """Cline 3.x: several tool_use blocks in a reply, answered by "[tool for 'x'] Result:" text
    blocks; a label with brackets in it, a task_progress argument, an older call left open."""
    todo = "- [ ] look\n- [ ] fix"
    msgs = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "<task>\nTidy the config.\n</task>"}],
            "ts": 1,
        },
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "t0",
                    "name": "ask_followup_question",
                    "input": {"question": "Which file?"},
                }
            ],
            "ts": 2,
            "modelInfo": {"modelId": "m", "providerId": "p", "mode": "act"},
            "metrics": {"tokens": {"prompt": 1000, "completion": 20, "cached": 0}},
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": "[TASK RESUMPTION] This task was interrupted 2 minutes ago.",
                }
            ],
            "ts": 3,
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Looking at both.", "call_id": ""},
                {
                    "type": "tool_use",
                    "id": "t1",
                    "name": "search_files",
                    "input": {"path": "cfg", "regex": "key[s]?]", "task_progress": todo},
                    "call_id": "t1",
                },
                {
                    "type": "tool_use",
                    "id": "t2",
                    "name": "read_file",
                    "input": {"path": "cfg/app.ini", "task_progress": todo},
                    "call_id": "t2",
                },
            ],
            "ts": 4,
            "modelInfo": {"modelId": "m", "providerId": "p", "mode": "act"},
            "metrics": {"tokens": {"prompt": 1100, "completion": 60, "cached": 900}},
        },
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "[search_files for 'key[s]?]'] Result:\nFound 1 result."},
                {"type": "text", "text": "[read_file for 'cfg/app.ini'] Result:\n1 | key=1"},
                {"type": "text", "text": "\n\n# TODO LIST UPDATE REQUIRED"},
                {
                    "type": "text",
                    "text": "<environment_details>\n# Current Mode\nACT MODE\n</environment_details>",
                },
            ],
            "ts": 5,
        },
    ]
    (t,) = load(msgs)
    ask, search, read = t.steps
    assert ask.result is None  # interrupted: the later results are not its answer
    assert search.result == "Found 1 result." and read.result == "1 | key=1"
    assert "task_progress" not in search.args and read.args == {"path": "cfg/app.ini"}
    assert t.meta["unanswered"] == 1 and t.meta["tokens_source"] in ("usage", "mixed")
    assert search.text == "Looking at both."


def test_notes_on_a_command_do_not_make_repeats_differ(tmp_path):
    """The model's description of a command, and how long to wait for its output, change between
    two runs of the same command; the arguments compared are what runs."""
    cc = tmp_path / "cc.jsonl"
    rec = lambda n, desc: {
        "type": "assistant",
        "sessionId": "s",
        "uuid": f"u{n}",
        "message": {
            "id": f"m{n}",
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": f"t{n}",
                    "name": "Bash",
                    "input": {"command": "make lint", "description": desc},
                }
            ],
        },
    }
    cc.write_text(
        json.dumps(rec(1, "Run the linter")) + "\n" + json.dumps(rec(2, "Lint again")) + "\n"
    )
    a, b = only(cc).steps
    assert a.args == b.args == {"command": "make lint"}
    lines = (FIX / "codex_rollout_unified_exec.jsonl").read_text().splitlines()
    t = load([json.loads(x) for x in lines], format="codex")
    r1, r2, test = next(iter(t)).steps[:3]
    assert r1.args == r2.args and "yield_time_ms" not in test.args


def test_codex_rollout_before_typed_records():
    recs = [
        {
            "id": "0198-old",
            "timestamp": "2025-07-01T10:00:00.000Z",
            "instructions": None,
            "git": {"branch": "main"},
        },
        {"record_type": "state"},
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "show the readme"}],
        },
        {
            "type": "function_call",
            "name": "shell",
            "arguments": json.dumps({"command": ["bash", "-lc", "cat README.md"]}),
            "call_id": "c1",
        },
        {
            "type": "function_call_output",
            "call_id": "c1",
            "output": json.dumps(
                {"output": "hi\n", "metadata": {"exit_code": 0, "duration_seconds": 0.01}}
            ),
        },
        {"record_type": "state"},
    ]
    assert detect_format(recs) == "codex"
    (t,) = load(recs)
    (cat,) = t.steps
    assert (t.session, cat.kind, cat.target, cat.result, cat.meta["returncode"]) == (
        "0198-old",
        "observe",
        "README.md",
        "hi\n",
        0,
    )


def test_folders_that_are_one_unit_analyse_the_same_in_parallel(tmp_path):
    """An opencode store and a V1 event folder are one unit of work each, for --jobs too."""
    from loopcore.cli import main

    out1, out2 = tmp_path / "1.json", tmp_path / "2.json"
    paths = [str(FIX / "openhands_v1"), str(FIX / "opencode_storage")]
    assert main(["analyse", *paths, "--no-progress", "--json", str(out1)]) == 0
    assert main(["analyse", *paths, "--no-progress", "--jobs", "2", "--json", str(out2)]) == 0
    a, b = json.loads(out1.read_text()), json.loads(out2.read_text())
    assert [t["session"] for t in a["traces"]] == [OH_CONV, "ses_7a1b2c3d4e5fABCDEFGHIJ"]
    assert a["traces"] == b["traces"]


def test_claude_code_inline_sidechain_takes_the_agent_id_its_chain_carries(tmp_path):
    """Claude Code 2.0 writes a sub-agent's records into the session file, agentId on some of them
    only (here the last); its chain of parentUuid links makes them one sub-agent."""
    sid = "9a8b7c6d-0000-4000-8000-00000000c0de"
    base = {"sessionId": sid, "version": "2.0.46", "userType": "external", "cwd": "/w"}
    usage = {
        "input_tokens": 3,
        "cache_creation_input_tokens": 500,
        "cache_read_input_tokens": 0,
        "output_tokens": 20,
    }
    recs = [
        {
            **base,
            "parentUuid": None,
            "isSidechain": False,
            "uuid": "m1",
            "type": "assistant",
            "message": {
                "id": "msg_m1",
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "toolu_task",
                        "name": "Task",
                        "input": {"prompt": "look"},
                    }
                ],
                "usage": usage,
            },
        },
        {
            **base,
            "parentUuid": None,
            "isSidechain": True,
            "uuid": "s1",
            "type": "user",
            "message": {"role": "user", "content": "look"},
        },
        {
            **base,
            "parentUuid": "s1",
            "isSidechain": True,
            "uuid": "s2",
            "type": "assistant",
            "message": {
                "id": "msg_s2",
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "toolu_g",
                        "name": "Grep",
                        "input": {"pattern": "x", "path": "src"},
                    }
                ],
                "usage": usage,
            },
        },
        {
            **base,
            "parentUuid": "s2",
            "isSidechain": True,
            "uuid": "s3",
            "type": "user",
            "agentId": "ab12cd34",
            "message": {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_g", "content": "src/a.py"}
                ],
            },
        },
        {
            **base,
            "parentUuid": "m1",
            "isSidechain": False,
            "uuid": "m2",
            "type": "user",
            "agentId": "ab12cd34",
            "message": {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_task",
                        "content": [{"type": "text", "text": "found it"}],
                    }
                ],
            },
        },
    ]
    p = tmp_path / f"{sid}.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in recs))
    main, sub = load(p)
    assert (main.session, sub.session) == (sid, f"{sid}/ab12cd34")
    (grep,) = sub.steps
    assert (grep.kind, grep.target, grep.result) == ("observe", "src", "src/a.py")
    assert main.steps[0].result == "found it"


# ---- damaged files ---------------------------------------------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_SHAPED = [
    "codex_rollout_unified_exec.jsonl",
    "codex_rollout_code_mode.jsonl",
    "gemini_cli_session.jsonl",
    "openhands_v1_export.json",
    "openhands_resolver_2024.jsonl",
    "opencode_export.json",
    "cline_task/1760001234567/api_conversation_history.json",
    "roo_task/019a2b3c-4d5e-7f60-8a9b-0c1d2e3f4a5b/api_conversation_history.json",
    "claude_code_subagents/3e4f5a6b-7c8d-4e9f-a0b1-c2d3e4f5a6b7.jsonl",
    "otel_genai_protojson.json",
    "anthropic_server_tools.json",
    "openai_responses_builtin_tools.json",
    "codex_rollout_0146.jsonl",
    "mini_swe_agent_v2_textbased.json",
]


def _records(name):
    data = (FIX / name).read_text()
    if name.endswith(".jsonl"):
        return [json.loads(x) for x in data.splitlines() if x.strip()]
    return json.loads(data)


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, prefix + (i,))


_junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.text(max_size=4),
    st.just([]),
    st.just({}),
    st.just([None]),
    st.just({"type": "x"}),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(_SHAPED), st.data())
def test_a_damaged_harness_file_loads_or_says_why(name, data):
    """Any one value of a real-shaped file replaced by junk: the file loads, or load raises
    TraceFormatError (naming it); never another exception."""
    doc = _records(name)
    paths = [p for p in _paths(doc) if p]
    path = data.draw(st.sampled_from(paths))
    junk = data.draw(_junk)
    node = doc
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = junk
    for fmt in ("auto", detect_format(FIX / name)):
        try:
            traces = list(load(doc, fmt, keep_going=data.draw(st.booleans())))
        except TraceFormatError:
            continue
        for t in traces:
            for s in t:
                assert s.kind in loopcore.trace.KINDS and s.tokens_in >= 0 and s.tokens_out >= 0


def test_openhands_v0_function_call_error_is_a_rejected_turn():
    events = [
        {
            "id": 0,
            "source": "user",
            "action": "message",
            "args": {"content": "fix it"},
            "message": "fix it",
        },
        {
            "id": 1,
            "source": "agent",
            "observation": "error",
            "content": "FunctionCallNotExistsError: Tool 'open' is not registered.",
            "extras": {},
        },
        {
            "id": 2,
            "source": "agent",
            "action": "run",
            "args": {"command": "ls", "thought": ""},
            "tool_call_metadata": {
                "function_name": "execute_bash",
                "tool_call_id": "t1",
                "model_response": {
                    "id": "r2",
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5},
                },
            },
        },
        {
            "id": 3,
            "source": "agent",
            "cause": 2,
            "observation": "run",
            "content": "a.py",
            "extras": {"metadata": {"exit_code": 0}},
        },
        {
            "id": 4,
            "source": "agent",
            "observation": "error",
            "content": "Parameter 'command' is expected to be one of ['view', 'create'].",
            "message": "Parameter 'command' is expected to be one of ['view', 'create'].",
        },
    ]
    (t,) = load(events, format="openhands")
    refused, ls, bad_param = t.steps
    assert bad_param.rejected.startswith("Parameter 'command'") and bad_param.kind == "other"
    assert refused.rejected.startswith("FunctionCallNotExistsError") and refused.ref == {"event": 1}
    assert (ls.kind, ls.result, ls.meta["returncode"]) == ("observe", "a.py", 0)
    assert "orphan_results" not in t.meta


def test_gemini_cli_a_json_recording_migrated_on_resume_is_read_once(tmp_path):
    """Resuming a session recorded as ``session-X.json`` (gemini-cli 0.38 and before), gemini-cli
    copies its messages into ``session-X.jsonl`` and appends there, leaving the JSON file: a
    folder walk reads the session once, from the JSONL file."""

    def gem(mid, path):
        return {"id": mid, "timestamp": "t", "type": "gemini", "content": "",
                "toolCalls": [{"id": f"{mid}-c", "name": "read_file", "args": {"file_path": path},
                               "status": "success", "result": [{"functionResponse": {
                                   "id": f"{mid}-c", "name": "read_file",
                                   "response": {"output": path * 50}}}]}]}  # fmt: skip

    head = {"sessionId": "s-mig", "projectHash": "h", "startTime": "t", "lastUpdated": "t"}
    old = [{"id": "u1", "timestamp": "t", "type": "user", "content": "read a"}, gem("g1", "a.py")]
    chats = tmp_path / "tmp" / "proj" / "chats"
    chats.mkdir(parents=True)
    (chats / "session-2026-03-01T10-00-s-mig.json").write_text(json.dumps(head | {"messages": old}))
    new = [head, *old, {"$set": {"sessionId": "s-mig"}}, gem("g2", "b.py")]
    (chats / "session-2026-03-01T10-00-s-mig.jsonl").write_text(
        "".join(json.dumps(x) + "\n" for x in new)
    )
    (t,) = load(tmp_path)
    assert t.meta["recording"] == "jsonl" and [s.args["file_path"] for s in t] == ["a.py", "b.py"]
    # a lone JSON recording is read as before, and a file named is always read
    (chats / "session-2026-03-02T10-00-other.json").write_text(json.dumps(head | {"messages": old}))
    assert [t.meta["recording"] for t in load(tmp_path)] == ["jsonl", "json"]
    assert len(list(load(sorted(chats.iterdir())[:2]))) == 2


def test_gemini_cli_a_session_named_alone_brings_its_sub_agents(tmp_path):
    """gemini-cli records each sub-agent to ``chats/<sessionId>/<agentId>.jsonl`` (kind
    ``subagent``); the session file named on its own is read with them, right after it, and a
    load that also names them, or a folder walk, reads each once."""

    def rec(sid, kind, path):
        return [{"sessionId": sid, "projectHash": "h", "startTime": "t", "kind": kind},
                {"id": f"{kind}-g", "timestamp": "t", "type": "gemini", "content": "",
                 "toolCalls": [{"id": f"{kind}-c", "name": "read_file", "args": {"file_path": path},
                                "status": "success", "result": "x" * 80}]}]  # fmt: skip

    chats = tmp_path / "chats"
    sid = "9b1e7c2a-5d4f-4e3a-8b2c-1d0e9f8a7b6c"
    main = chats / "session-2026-11-30T09-15-9b1e7c2a.jsonl"
    sub = chats / sid / "codebase-investigator-k3.jsonl"
    sub.parent.mkdir(parents=True)
    main.write_text("".join(json.dumps(x) + "\n" for x in rec(sid, "main", "a.py")))
    sub.write_text("".join(json.dumps(x) + "\n" for x in rec("k3", "subagent", "b.py")))
    traces = list(load(main))
    assert [(t.meta["kind"], t.steps[0].args["file_path"]) for t in traces] == [
        ("main", "a.py"),
        ("subagent", "b.py"),
    ]
    assert len(list(load([main, sub]))) == 2 and len(list(load(chats))) == 2
    # no header naming the session, or another session's id: nothing more is read
    other = chats / "session-2026-11-30T10-00-0000aaaa.jsonl"
    other.write_text("".join(json.dumps(x) + "\n" for x in rec("0000aaaa-x", "main", "c.py")))
    assert len(list(load(other))) == 1


def test_gemini_cli_set_messages_keeps_what_was_recorded(tmp_path):
    """A ``$set`` of ``messages`` (compression, output masking, a cancelled turn) is the history
    the model sees from then on; gemini-cli's loader takes it for the whole recording, but the
    calls it leaves out were made and billed. Each message is read once, where it was first
    written and as it was recorded then (not with the ``$set``'s masked results); a message only
    the ``$set`` holds (the compression's summary) is context from there on."""

    def g(mid, cmd, output="Output: ok"):
        return {
            "id": mid,
            "timestamp": "t",
            "type": "gemini",
            "content": "",
            "tokens": {
                "input": 100,
                "output": 5,
                "cached": 0,
                "thoughts": 0,
                "tool": 0,
                "total": 105,
            },
            "toolCalls": [
                {
                    "id": f"{mid}-c",
                    "name": "run_shell_command",
                    "args": {"command": cmd},
                    "status": "success",
                    "result": [
                        {
                            "functionResponse": {
                                "id": f"{mid}-c",
                                "name": "run_shell_command",
                                "response": {"output": output},
                            }
                        }
                    ],
                }
            ],
        }

    summary = {"id": "u-sum", "timestamp": "t", "type": "user", "content": "the work so far"}
    lines = [
        {
            "sessionId": "s-set",
            "projectHash": "h",
            "startTime": "t",
            "lastUpdated": "t",
            "kind": "main",
        },
        g("g-old", "ls old"),
        g("g-kept", "ls kept"),
        {"$set": {"messages": [summary, g("g-kept", "ls kept", "<masked: saved to f.txt>")]}},
        g("g-new", "ls new"),
    ]
    p = tmp_path / "session-set.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in lines))
    t = only(p)
    assert [s.args["command"] for s in t] == ["ls old", "ls kept", "ls new"]
    assert [s.ref for s in t] == [{"line": 2}, {"line": 3}, {"line": 5}]
    assert [s.result for s in t] == ["Output: ok"] * 3 and "rewound_messages" not in t.meta
    # what gemini-cli's loader shows is a subset: nothing the file recorded is lost
    full = [json.dumps(x) for x in lines]
    q = tmp_path / "session-noset.jsonl"
    q.write_text("\n".join(full[:3] + full[4:]) + "\n")
    assert [s.args["command"] for s in only(q)] == ["ls old", "ls kept", "ls new"]


# ---- API transcripts: OTel GenAI spans (protobuf JSON), Anthropic server tools, Responses ------


def test_otel_protobuf_json_export_takes_the_agent_spans_conversation():
    """An OTLP export as protobuf's JSON printer writes it (base64 ids, enum names for kind and
    status, int64 as strings, arguments as a kvlist) with the conversation id on the
    invoke_agent span only."""
    t = only(FIX / "otel_genai_protojson.json")
    assert t.format == "otel" and t.session == "thread-42"
    read, save = t.steps
    assert (read.kind, read.target, read.args) == (
        "observe",
        "notes/todo.txt",
        {"path": "notes/todo.txt", "max_lines": 50},
    )
    assert (
        read.result == "buy milk\n" and read.error is None and read.ref == {"event": "EQ4b8k2xQ0I="}
    )
    assert save.error == "TimeoutError" and save.call_id == "call_p2"
    # the chat span's 60 output tokens, shared by the two calls it issued (the rounding is the
    # turn's own)
    assert read.tokens_out + save.tokens_out + read.tokens_turn == 60
    assert not save.tokens_estimated


def test_anthropic_server_and_mcp_tools_are_calls_answered_in_the_message():
    """server_tool_use / mcp_tool_use blocks are answered by *_tool_result blocks of the same
    assistant message; a request body with its response beside it is an Anthropic trace."""
    assert detect_format(FIX / "anthropic_server_tools.json") == "anthropic"
    t = only(FIX / "anthropic_server_tools.json")
    search, count, view, ask = calls(t)
    assert (search.name, search.kind, search.target) == (
        "web_search",
        "observe",
        "search:river Wendle length",
    )
    assert isinstance(search.result, list) and search.error is None
    assert (count.kind, count.target, count.result) == ("observe", "notes.md", "812 notes.md\n")
    assert count.meta["returncode"] == 0
    assert (view.kind, view.target, view.error) == ("observe", "notes.md", "the sandbox was busy")
    assert ask.name == "mcp__atlas__ask_question" and ask.result == "In the northern hills."
    assert t.meta["unanswered"] == 0 and "orphan_results" not in t.meta
    # the response's usage: 190 output tokens over the last turn's three calls and its reply
    last = [s for s in t if s.turn == count.turn]
    assert sum(s.tokens_out + s.tokens_turn for s in last) == 190


def test_openai_responses_builtin_and_client_tool_items():
    """shell_call / apply_patch_call / computer_call are answered by their *_output items;
    web_search_call, code_interpreter_call and mcp_call hold their own answer."""
    t = only(FIX / "openai_responses_builtin_tools.json")
    by_name = {s.name: s for s in calls(t)}
    assert set(by_name) == {
        "shell",
        "apply_patch",
        "web_search",
        "mcp__weather__forecast",
        "code_interpreter",
    }
    sh = by_name["shell"]
    assert (sh.kind, sh.target, sh.result, sh.meta["returncode"]) == (
        "observe",
        "notes",
        "a.md\nb.md\n",
        0,
    )
    patch = by_name["apply_patch"]
    assert (patch.kind, patch.target, patch.error, patch.no_op) == (
        "mutate",
        "notes/a.md",
        "context did not match",
        True,
    )
    assert by_name["web_search"].target == "search:weather Wendle valley"
    assert by_name["mcp__weather__forecast"].args == {"place": "Wendle"}
    assert by_name["code_interpreter"].result == "7\n"
    assert t.meta["unanswered"] == 0


def test_openai_responses_unknown_item_type_is_reported(tmp_path):
    doc = json.loads((FIX / "openai_responses_builtin_tools.json").read_text())
    doc["input"].insert(3, {"type": "hologram_call", "id": "h1"})
    p = tmp_path / "resp.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(TraceFormatError) as ei:
        list(load(p))
    assert "hologram_call" in str(ei.value) and "mcp_list_tools" in str(ei.value)
    stats = LoadStats()
    (t,) = load(p, keep_going=True, stats=stats)
    assert len(calls(t)) == 5 and len(stats.errors) == 1


def test_codex_0146_records_and_single_item_outputs():
    """Codex CLI 0.14x: world_state and inter_agent_communication_metadata records, agent_message
    items between agents, and a function_call_output whose output is one content item."""
    stats = LoadStats()
    t = only(FIX / "codex_rollout_0146.jsonl", stats=stats)
    assert stats.errors == [] and t.meta["cli_version"] == "0.146.0"
    first, again = calls(t)
    assert first.result == again.result == "main.py\nutil.py\n"
    assert (first.kind, first.target) == ("observe", "src")
    assert t.meta["unanswered"] == 0


def test_mini_swe_agent_2x_text_based_trajectory():
    """mini-swe-agent 2.x with a text-based model: no tool_calls; the harness's parsed
    extra.actions, observations with extra.returncode, a FormatError answer standing for a turn
    the trajectory does not keep, and the submission in the exit message."""
    t = only(FIX / "mini_swe_agent_v2_textbased.json")
    assert t.format == "mini-swe-agent" and t.meta["format_errors"] == 1
    run = calls(t)
    assert [s.args["command"] for s in run] == [
        "cat hello.py",
        "sed -i 's/helo/hello/' hello.py",
        "cat hello.py",
        "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT",
    ]
    assert [s.kind for s in run[:3]] == ["observe", "mutate", "observe"]
    assert run[0].meta["returncode"] == 0 and run[-1].meta["final"]
    (bad,) = [s for s in t if s.rejected is not None]
    assert bad.rejected.startswith("Please always provide EXACTLY ONE action")
    assert bad.text.startswith("Two ideas.") and bad.ref == {"message": 4}
    assert t.meta["tokens_source"] == "usage" and t.meta["unanswered"] == 0
    # every API call's completion tokens are counted once
    assert sum(s.tokens_out + s.tokens_turn for s in t) == 30 + 25 + 35 + 20 + 15


def test_opencode_bash_exit_code(tmp_path):
    """opencode's bash tool keeps the exit code in state.metadata.exit."""
    root = tmp_path / "storage"
    shutil.copytree(FIX / "opencode_storage", root)
    msg = "msg_a1b2c3d40002ZYXWVUTSRQPONM"
    part = {
        "id": "prt_a1b2c3d40016ZYXWVUTSRQPONM",
        "sessionID": "ses_7a1b2c3d4e5fABCDEFGHIJ",
        "messageID": msg,
        "type": "tool",
        "callID": "toolu_b9",
        "tool": "bash",
        "state": {
            "status": "completed",
            "input": {"command": "ls missing", "description": "Lists a folder"},
            "output": "ls: missing: No such file or directory\n",
            "title": "Lists a folder",
            "metadata": {
                "output": "ls: missing: No such file or directory\n",
                "exit": 2,
                "description": "Lists a folder",
            },
            "time": {"start": 1760000009000, "end": 1760000009100},
        },
    }
    (root / "part" / msg / (part["id"] + ".json")).write_text(json.dumps(part, indent=2))
    (t,) = load(root)
    (ls,) = [s for s in calls(t) if s.name == "bash"]
    assert ls.meta["returncode"] == 2 and ls.args == {"command": "ls missing"}
    assert ls.error is None  # a non-zero exit is a result, not a failed call


def test_swe_agent_edit_the_linter_reverted_is_a_failed_no_op():
    """SWE-agent 0.x / 1.x: an edit its linter rejected ("Your changes have NOT been applied")
    changed nothing: a failed no-op, not a mutation."""
    t = only(FIX / "swe_agent_0x_linted_edit.json")
    opened, bad, good, _submit = calls(t)
    assert (bad.kind, bad.target, bad.no_op) == ("mutate", "/repo/calc.py", True)
    assert bad.error is not None and "NOT been applied" in bad.error
    assert (good.no_op, good.error) == (False, None)
    assert opened.target == good.target == "/repo/calc.py"


def test_opencode_storage_and_database_read_a_lone_surrogate_as_u_fffd(tmp_path):
    """opencode (TypeScript) writes a half of an emoji cut from its pair as a lone surrogate
    escape, in its storage files and in its database rows alike: both are read as the same
    objects with U+FFFD in its place, nothing skipped."""
    from test_adapters import _with_a_cut_emoji

    src = FIX / "opencode_storage"
    traces = {}
    for tail, name in (("\ud83d", "cut"), ("\ufffd", "mended")):
        store = tmp_path / name / "storage"
        for f in sorted(src.rglob("*.json")):
            dest = store / f.relative_to(src)
            dest.parent.mkdir(parents=True, exist_ok=True)
            doc = json.loads(f.read_text())
            if f.relative_to(src).parts[0] != "session":  # its title is a plain column
                doc = _with_a_cut_emoji(doc, tail)
            dest.write_text(json.dumps(doc))
        home = tmp_path / name / "db"
        home.mkdir()
        _opencode_db(home / "opencode.db", store).close()
        for source in (store, home / "opencode.db"):
            stats = LoadStats()
            (t,) = load(source, stats=stats)
            assert not stats.errors
            traces[name, source.name] = [s.to_dict() for s in t]
    parts = (tmp_path / "cut" / "storage" / "part").rglob("*.json")
    assert any("\\ud83d" in p.read_text() for p in parts)
    for where in ("storage", "opencode.db"):
        assert traces["cut", where] == traces["mended", where] and traces["cut", where]


# ---- Claude Code 2.1.2+: outputs persisted to tool-results/ --------------------------------


def _persisted(file: str, size: str = "61.3KB", preview: str = "FAIL tests/a.test.ts\n") -> str:
    # the tool_result text Claude Code 2.1.2+ gives the model for an output over its limit
    return (
        f"<persisted-output>\nOutput too large ({size}). Full output saved to: {file}\n\n"
        f"Preview (first 2KB):\n{preview}...\n</persisted-output>"
    )


def _bash_session(path, results, command="npm test"):
    """A Claude Code 2.1 session running *command* once per result, nothing in between."""
    sid = "5e55e55e-0000-4000-8000-00000000b16b"
    base = {"sessionId": sid, "version": "2.1.170", "userType": "external", "cwd": "/w"}
    usage = {"input_tokens": 3, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 900,
             "output_tokens": 20}  # fmt: skip
    recs, parent = [], None
    for i, res in enumerate(results):
        tid = f"toolu_{i:02d}"
        recs.append({**base, "parentUuid": parent, "isSidechain": False, "uuid": f"a{i}",
                     "type": "assistant", "message": {"id": f"msg_{i}", "role": "assistant",
                     "content": [{"type": "tool_use", "id": tid, "name": "Bash",
                                  "input": {"command": command}}], "usage": usage}})  # fmt: skip
        recs.append({**base, "parentUuid": f"a{i}", "isSidechain": False, "uuid": f"u{i}",
                     "type": "user", "message": {"role": "user", "content": [
                         {"type": "tool_result", "tool_use_id": tid, "content": res}]}})  # fmt: skip
        parent = f"u{i}"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def test_claude_code_persisted_output_is_named_without_its_per_call_file():
    from loopcore.taxonomy.profiles import normalise_output

    folder = "/home/u/.claude/projects/-w/5e55e55e-0000-4000-8000-00000000b16b/tool-results/"
    a, fa = normalise_output("claude-code", _persisted(folder + "bj7wqc2ln.txt"))
    b, fb = normalise_output("claude-code", _persisted(folder + "toolu_01AbCdEf.txt"))
    assert a == b == _persisted(folder + "<id>.txt")
    assert fa == {"output_file": folder + "bj7wqc2ln.txt"}
    win = "C:\\Users\\u\\.claude\\projects\\H--p\\db273e77\\tool-results\\x9.txt"
    c, fc = normalise_output("claude-code", _persisted(win).replace("\n", "\r\n"))
    assert c == _persisted(win[: -len("x9.txt")] + "<id>.txt").replace("\n", "\r\n")
    assert fc == {"output_file": win}
    # the size and the preview stay: different outputs stay different
    assert normalise_output("claude-code", _persisted(folder + "1.txt", size="2.0MB"))[0] != a
    # no size, no preview; the path on a line of its own
    bare = "<persisted-output>\nOutput too large. Full output saved to: /c/tool-results/b1.txt\n"
    assert normalise_output("claude-code", bare + "</persisted-output>")[0] == (
        "<persisted-output>\nOutput too large. Full output saved to: /c/tool-results/<id>.txt\n"
        "</persisted-output>"
    )
    own_line = (
        "<persisted-output>\nOutput too large. Full output saved to:\n/t/tool-results/c_1.txt\n"
    )
    assert normalise_output("claude-code", own_line) == (
        "<persisted-output>\nOutput too large. Full output saved to:\n/t/tool-results/<id>.txt\n",
        {"output_file": "/t/tool-results/c_1.txt"},
    )
    plain = "Output too large. Full output saved to: /tmp/x.txt"  # not the harness's wrapper
    assert normalise_output("claude-code", plain) == (plain, {})


def test_claude_code_a_big_output_run_again_unchanged_is_a_repeat(tmp_path):
    """The same big test run twice with nothing in between: the second is charged, though each
    output was saved to a file of its own; a run whose output changed is not."""
    folder = "/home/u/.claude/projects/-w/5e55e55e-0000-4000-8000-00000000b16b/tool-results/"
    same = _bash_session(
        tmp_path / "same.jsonl", [_persisted(folder + "b1x.txt"), _persisted(folder + "q7z.txt")]
    )
    (t,) = load(same)
    assert [s.meta.get("output_file") for s in t] == [folder + "b1x.txt", folder + "q7z.txt"]
    assert t[0].result == t[1].result
    rep = loopcore.analyse_burn(t)
    assert [(f.steps, f.of_step) for f in rep.findings] == [((1,), 0)] and rep.wasted_tokens > 0
    changed = _bash_session(
        tmp_path / "changed.jsonl",
        [_persisted(folder + "b1x.txt"), _persisted(folder + "q7z.txt", preview="PASS\n")],
    )
    assert loopcore.analyse_burn(only(changed)).findings == ()


# ---- gemini-cli: outputs truncated and saved to tool-outputs/ -----------------------------

_GEMINI_TMP = "/home/u/.gemini/tmp/9f8e7d6c/tool-outputs"


def _gemini_truncated(path: str, tail: str = "FAIL src/a.test.ts") -> str:
    # gemini-cli 0.3x+'s formatTruncatedToolOutput notice
    return (
        "Output too large. Showing first 8,000 and last 32,000 characters. For full output see: "
        f"{path}\nnpm test\n\n... [51,234 characters omitted] ...\n\n{tail}\n"
    )


@pytest.mark.parametrize(
    "text, path",
    [
        (_gemini_truncated(f"{_GEMINI_TMP}/session-p1/run_shell_command_c1.txt"),
         f"{_GEMINI_TMP}/session-p1/run_shell_command_c1.txt"),
        ("Tool output was too large and has been truncated.\nThe full output has been saved to: "
         "/tmp/g/c7.output\nTo read the complete output, use the read_file tool.\nTruncated part "
         "of the output:\nabc", "/tmp/g/c7.output"),
        ("[Message Normalized: Tool output exceeded size limit]abc\n\nFull output saved to: "
         f"{_GEMINI_TMP}/mcp_c9.txt", f"{_GEMINI_TMP}/mcp_c9.txt"),
    ],
)  # fmt: skip
def test_gemini_cli_saved_output_is_named_without_its_per_call_file(text, path):
    from loopcore.taxonomy.profiles import normalise_output

    got, facts = normalise_output("gemini-cli", text)
    assert facts == {"output_file": path}
    assert got == text.replace(path, "<file>")
    other = text.replace(path, f"{_GEMINI_TMP}/session-p2/run_shell_command_c8.txt")
    assert normalise_output("gemini-cli", other)[0] == got
    # a command's own output that names a file is not the harness's notice
    own = "Build done. For full output see: /tmp/build.log"
    assert normalise_output("gemini-cli", own) == (own, {})


def _gemini_shell_session(path, outputs, command="npm test"):
    """A gemini-cli recording running *command* once per output, one turn each."""
    lines = [{"sessionId": "5e55e55e-1b3d-4c5e-8f6a-9b0c1d2e3f4a", "projectHash": "9f8e7d6c",
              "startTime": "2026-11-20T08:00:00.000Z", "lastUpdated": "2026-11-20T08:00:00.000Z",
              "kind": "main"},
             {"id": "m-u1", "timestamp": "2026-11-20T08:00:00.000Z", "type": "user",
              "content": [{"text": "Run the tests."}]}]  # fmt: skip
    for i, out in enumerate(outputs):
        cid = f"run_shell_command_{i}"
        lines.append({"id": f"m-g{i}", "timestamp": "2026-11-20T08:00:00.000Z", "type": "gemini",
                      "content": "", "toolCalls": [{"id": cid, "name": "run_shell_command",
                      "args": {"command": command}, "status": "success",
                      "timestamp": "2026-11-20T08:00:00.000Z", "result": [{"functionResponse": {
                          "id": cid, "name": "run_shell_command",
                          "response": {"output": out}}}]}],
                      "tokens": {"input": 900, "output": 20, "cached": 0, "thoughts": 0,
                                 "tool": 0, "total": 920}})  # fmt: skip
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_gemini_cli_a_big_output_run_again_unchanged_is_a_repeat(tmp_path):
    a = f"{_GEMINI_TMP}/session-p1/run_shell_command_0.txt"
    b = f"{_GEMINI_TMP}/session-p2/run_shell_command_1.txt"
    t = only(_gemini_shell_session(tmp_path / "session-s.jsonl", [_gemini_truncated(a),
                                                                   _gemini_truncated(b)]))  # fmt: skip
    assert [s.meta.get("output_file") for s in t] == [a, b]
    rep = loopcore.analyse_burn(t)
    assert [(f.steps, f.of_step) for f in rep.findings] == [((1,), 0)]
    changed = _gemini_shell_session(
        tmp_path / "session-c.jsonl", [_gemini_truncated(a), _gemini_truncated(b, tail="PASS")]
    )
    assert loopcore.analyse_burn(only(changed)).findings == ()


# ---- opencode: outputs truncated and saved to its truncation folder ------------------------

_OC_DIR = "/home/u/.local/share/opencode/tool-output"


def _opencode_truncated(file: str, head: str = "FAIL src/a.test.ts", how: str = "head") -> str:
    # opencode's Truncate.output: the kept lines, the count cut, and the hint naming the file
    hint = (
        f"Full output saved to: {file}\nUse Grep to search the full content or Read with "
        "offset/limit to view specific sections."
    )
    if how == "tail":
        return f"...4512 lines truncated...\n\n{hint}\n\n{head}"
    if how == "streamed":  # a bash command's output spilled to the file as it ran
        return (
            "The command output was 91234 bytes and was truncated (inline limit: 51200 bytes).\n"
            f"{hint}\nNote: This file will be deleted after a few more commands."
        )
    if how == "task":
        hint = (
            f"Full output saved to: {file}\nUse the Task tool to have explore agent process "
            "this file with Grep and Read (with offset/limit). Do NOT read the full file "
            "yourself - delegate to save context."
        )
    return f"{head}\n\n...4512 lines truncated...\n\n{hint}"


@pytest.mark.parametrize("how", ["head", "tail", "task", "streamed"])
def test_opencode_saved_output_is_named_without_its_per_call_file(how):
    from loopcore.taxonomy.profiles import normalise_output

    a = f"{_OC_DIR}/tool_9a1b2c3d4e5f001"
    got, facts = normalise_output("opencode", _opencode_truncated(a, how=how))
    assert facts == {"output_file": a}
    assert got == _opencode_truncated("<file>", how=how)
    assert (
        normalise_output("opencode", _opencode_truncated(f"{_OC_DIR}/tool_x2", how=how))[0] == got
    )
    own = "make: see the log. Full output saved to: /tmp/build.log\nDone."
    assert normalise_output("opencode", own) == (own, {})


def test_opencode_a_big_output_run_again_unchanged_is_a_repeat(tmp_path):
    doc = json.loads((FIX / "opencode_export.json").read_text())
    user, asst = doc["messages"][0], doc["messages"][1]

    def session(outputs):
        msgs = [user]
        for i, out in enumerate(outputs):
            m = json.loads(json.dumps(asst))
            m["info"]["id"] = f"msg_b{i}"
            m["parts"] = [{"id": f"prt_b{i}", "sessionID": doc["info"]["id"], "messageID": f"msg_b{i}",
                           "type": "tool", "callID": f"toolu_b{i}", "tool": "bash",
                           "state": {"status": "completed", "input": {"command": "npm test"},
                                     "output": out, "metadata": {"exit": 1, "truncated": True},
                                     "title": "npm test", "time": {"start": 1, "end": 2}}}]  # fmt: skip
            msgs.append(m)
        path = tmp_path / f"s{len(list(tmp_path.iterdir()))}.json"
        path.write_text(json.dumps({"info": doc["info"], "messages": msgs}))
        return only(path)

    a, b = f"{_OC_DIR}/tool_9a1b001", f"{_OC_DIR}/tool_9a1b002"
    t = session([_opencode_truncated(a), _opencode_truncated(b)])
    assert [s.meta.get("output_file") for s in t] == [a, b]
    rep = loopcore.analyse_burn(t)
    assert [(f.steps, f.of_step) for f in rep.findings] == [((1,), 0)]
    changed = session([_opencode_truncated(a), _opencode_truncated(b, head="PASS")])
    assert loopcore.analyse_burn(changed).findings == ()


def test_claude_code_saved_tool_results_are_not_traces_of_their_own(tmp_path):
    """``~/.claude/projects/<project>/<sessionId>/tool-results/`` holds the outputs Claude Code
    saved whole (a structured one as JSON, here one shaped like a chat export and one ``[]``):
    a walk of the projects folder reads the session, not them; a folder of that name anywhere
    else, or named on its own, is read as usual."""
    sid = "0f1e2d3c-0000-4000-8000-000000000001"
    project = tmp_path / "projects" / "-w"
    saved = project / sid / "tool-results"
    saved.mkdir(parents=True)
    shutil.copy(FIX / "claude_code_session.jsonl", project / f"{sid}.jsonl")
    shutil.copy(FIX / "openai_chat.json", saved / "toolu_01.json")
    (saved / "toolu_02.json").write_text("[]")
    (saved / "b1x.txt").write_text("plain output")
    stats = LoadStats()
    got = list(load(tmp_path / "projects", stats=stats))
    assert {t.format for t in got} == {"claude-code"}
    assert [s.to_dict() for t in got for s in t] == [
        s.to_dict() for t in load(FIX / "claude_code_session.jsonl") for s in t
    ]
    assert stats.ignored == [] and stats.no_steps == []
    assert [t.format for t in load(saved)] == ["openai-chat"]  # the [] is no trace in a folder
    elsewhere = tmp_path / "runs" / "tool-results"
    elsewhere.mkdir(parents=True)
    shutil.copy(FIX / "openai_chat.json", elsewhere / "run.json")
    assert [t.format for t in load(tmp_path / "runs")] == ["openai-chat"]


def test_gemini_cli_checkpoint_beside_recordings_is_read_once(tmp_path):
    """``/chat save`` writes the conversation's history to ``checkpoint-<tag>.json`` in the
    project's temp folder, beside ``chats/`` where the same conversation is recorded: a walk
    reads the recordings, not the copy (its calls would count twice); a checkpoint with no
    recordings beside it (gemini-cli before chat recording) or named on its own is read."""
    project = tmp_path / "tmp" / "9f8e7d6c"
    (project / "chats").mkdir(parents=True)
    shutil.copy(
        FIX / "gemini_cli_session.jsonl",
        project / "chats" / "session-2026-05-20T08-00-7c2f9e0a.jsonl",
    )
    shutil.copy(FIX / "gemini_cli_checkpoint.json", project / "checkpoint-fix.json")
    got = list(load(tmp_path / "tmp"))
    assert [t.meta["recording"] for t in got] == ["jsonl"]
    (alone,) = load(project / "checkpoint-fix.json")
    assert alone.meta["recording"] == "checkpoint" and len(alone) > 0
    old = tmp_path / "old" / "9f8e7d6c"
    old.mkdir(parents=True)
    shutil.copy(FIX / "gemini_cli_checkpoint.json", old / "checkpoint-fix.json")
    assert [t.meta["recording"] for t in load(tmp_path / "old")] == ["checkpoint"]


# ---- Claude Code: records written again with their own uuid -------------------------------


def _read_files_session(reads):
    """Claude Code 2.1 records: a prompt, then one Read per path of *reads*, each answered."""
    sid = "5e55e55e-0000-4000-8000-00000000c0de"
    base = {"sessionId": sid, "version": "2.1.240", "userType": "external", "cwd": "/w",
            "isSidechain": False}  # fmt: skip
    usage = {"input_tokens": 3, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 900,
             "output_tokens": 20}  # fmt: skip
    recs = [{**base, "parentUuid": None, "uuid": "p0", "type": "user",
             "message": {"role": "user", "content": "Look at the config."}}]  # fmt: skip
    parent = "p0"
    for i, path in enumerate(reads):
        tid = f"toolu_r{i:02d}"
        recs.append({**base, "parentUuid": parent, "uuid": f"a{i}", "type": "assistant",
                     "message": {"id": f"msg_{i}", "role": "assistant", "usage": usage,
                                 "content": [{"type": "tool_use", "id": tid, "name": "Read",
                                              "input": {"file_path": path}}]}})  # fmt: skip
        recs.append({**base, "parentUuid": f"a{i}", "uuid": f"u{i}", "type": "user",
                     "message": {"role": "user", "content": [
                         {"type": "tool_result", "tool_use_id": tid,
                          "content": f"     1\tcontents of {path}\n"}]}})  # fmt: skip
        parent = f"u{i}"
    return recs


def _write_records(path, recs):
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def test_claude_code_records_written_again_are_read_once(tmp_path):
    """Claude Code appends records it already wrote, each with its original uuid and timestamp:
    the VS Code extension re-appends a session's records when it reopens it (only ``cwd``
    differs), a resumed session after a compaction gets its post-compaction part again, a hook
    attachment is written twice (the copy with one more field). Read as new, every replayed call
    was a repeat of its original: false waste, and the session's tokens counted twice."""
    recs = _read_files_session(["/w/a.py", "/w/b.py", "/w/c.py"])
    once = _write_records(tmp_path / "once.jsonl", recs)
    expect = [s.to_dict() for s in only(once)]
    base_rep = loopcore.analyse_burn(only(once))
    assert base_rep.findings == () and len(expect) == 3
    reopened = [{**r, "cwd": "/w/sub"} for r in recs]  # the VS Code reopen: cwd may differ
    hook = {"type": "attachment", "uuid": "h1", "parentUuid": "u0", "isSidechain": False,
            "sessionId": recs[0]["sessionId"],
            "attachment": {"type": "hook_success", "hookName": "PreToolUse:Read"}}  # fmt: skip
    shapes = {
        "reopened": recs + reopened,
        "compaction_resume": recs[:3]
        + [{"type": "system", "subtype": "compact_boundary", "uuid": "cb", "parentUuid": None,
            "sessionId": recs[0]["sessionId"], "isSidechain": False},
           {**recs[0], "uuid": "cs", "parentUuid": "cb", "isCompactSummary": True,
            "message": {"role": "user", "content": "This session is being continued..."}}]
        + recs[3:]
        + [{"type": "system", "subtype": "compact_boundary", "uuid": "cb", "parentUuid": None,
            "sessionId": recs[0]["sessionId"], "isSidechain": False},
           {**recs[0], "uuid": "cs", "parentUuid": "cb", "isCompactSummary": True,
            "message": {"role": "user", "content": "This session is being continued..."}}]
        + recs[3:],
        "hook_twice": recs[:3] + [hook, {**hook, "slug": "x"}] + recs[3:],
    }  # fmt: skip
    replayed = {"reopened": 7, "compaction_resume": 6, "hook_twice": 1}
    for name, shape in shapes.items():
        (t,) = load(_write_records(tmp_path / f"{name}.jsonl", shape))

        # the same steps (their lines aside: the compaction's records come between, and the
        # step after the compaction starts the evidence again)
        def plain(d):
            return {k: v for k, v in d.items() if k not in ("ref", "after_user", "meta")}

        assert [plain(s.to_dict()) for s in t] == [plain(d) for d in expect]
        if name == "compaction_resume":
            assert [s.meta.get("after_compaction", False) for s in t] == [False, True, False]
        assert t.meta["replayed_records"] == replayed[name], name
        rep = loopcore.analyse_burn(t)
        assert rep.findings == () and rep.total_tokens == base_rep.total_tokens, name
    assert "replayed_records" not in only(once).meta


def test_claude_code_a_real_repeat_after_a_replay_is_still_charged(tmp_path):
    """Only a record written again (its uuid seen before) is passed over: a new call after a
    replay that reads a file again unchanged is a repeat like any other, and records that carry
    no uuid are all read."""
    recs = _read_files_session(["/w/a.py", "/w/b.py"])
    again = _read_files_session(["/w/a.py"])[1:]
    for r in again:  # the same call made anew: new record ids, a new call id
        r["uuid"] = "n" + r["uuid"]
        r["parentUuid"] = "n" + r["parentUuid"] if r["parentUuid"] != "p0" else "u1"
    again[0]["message"] = {**again[0]["message"], "id": "msg_new"}
    again[0]["message"]["content"] = [{**again[0]["message"]["content"][0], "id": "toolu_new"}]
    again[1]["message"]["content"] = [{**again[1]["message"]["content"][0],
                                       "tool_use_id": "toolu_new"}]  # fmt: skip
    (t,) = load(_write_records(tmp_path / "s.jsonl", recs + recs[1:] + again))
    assert [s.target for s in t] == ["/w/a.py", "/w/b.py", "/w/a.py"]
    assert t.meta["replayed_records"] == len(recs) - 1
    rep = loopcore.analyse_burn(t)
    assert [(f.steps, f.of_step) for f in rep.findings] == [((2,), 0)]
    bare = [{k: v for k, v in r.items() if k != "uuid"} for r in recs]
    (u,) = load(_write_records(tmp_path / "bare.jsonl", bare))
    assert len(u) == 2 and "replayed_records" not in u.meta


def test_claude_code_calls_cancelled_by_a_failed_sibling_never_ran(tmp_path):
    """When one call of a batch fails, Claude Code answers the batch's calls that had not
    started with ``<tool_use_error>Sibling tool call errored</tool_use_error>``: they never
    ran. The agent sends the batch again with the failing call changed; the cancelled calls sent
    again are no repeat (and, cancelled again, repeat nothing), and the run of them that
    succeeds is a first reading. Only a repeat of what really ran is charged."""
    sid = "5e55e55e-0000-4000-8000-00000000ca11"
    base = {"sessionId": sid, "version": "2.1.42", "userType": "external", "cwd": "/r",
            "isSidechain": False}  # fmt: skip
    usage = {"input_tokens": 3, "cache_read_input_tokens": 900, "output_tokens": 40}
    cancelled = "<tool_use_error>Sibling tool call errored</tool_use_error>"
    recs = [{**base, "uuid": "p", "parentUuid": None, "type": "user",
             "message": {"role": "user", "content": "Read big.txt and a.go."}}]  # fmt: skip
    batches = [
        ({}, "File content (399.5KB) exceeds maximum allowed size (256KB).", cancelled),
        (
            {"limit": 2000},
            "File content (120KB) exceeds maximum allowed tokens (25000).",
            cancelled,
        ),
        ({"limit": 200}, "     1\tline one of big.txt\n", "     1\tpackage main\n"),
        ({"offset": 201, "limit": 200}, "   201\tline 201 of big.txt\n", "     1\tpackage main\n"),
    ]
    parent = "p"
    for n, (extra, big, small) in enumerate(batches):
        t1, t2 = f"toolu_b{n}", f"toolu_a{n}"
        recs.append({**base, "uuid": f"a{n}", "parentUuid": parent, "type": "assistant",
                     "message": {"id": f"msg_{n}", "role": "assistant", "usage": usage,
                                 "content": [
                                     {"type": "tool_use", "id": t1, "name": "Read",
                                      "input": {"file_path": "/r/big.txt", **extra}},
                                     {"type": "tool_use", "id": t2, "name": "Read",
                                      "input": {"file_path": "/r/a.go"}}]}})  # fmt: skip
        recs.append({**base, "uuid": f"u{n}", "parentUuid": f"a{n}", "type": "user",
                     "message": {"role": "user", "content": [
                         {"type": "tool_result", "tool_use_id": t1, "content": big,
                          "is_error": small == cancelled},
                         {"type": "tool_result", "tool_use_id": t2, "content": small,
                          "is_error": small == cancelled}]}})  # fmt: skip
        parent = f"u{n}"
    (t,) = load(_write_records(tmp_path / "s.jsonl", recs))
    assert [s.meta.get("not_run", False) for s in t] == [False, True] * 2 + [False] * 4
    assert t[1].error == cancelled and t[1].result == cancelled
    rep = loopcore.analyse_burn(t)
    # a.go read at step 5, read again unchanged at step 7: the one repeat
    assert [(f.kind, f.steps, f.of_step) for f in rep.findings] == [
        ("redundant_observation", (7,), 5)
    ]
    # an error that is not the cancellation is a call that ran and failed
    recs[2]["message"]["content"][1]["content"] = (
        "<tool_use_error>File does not exist.</tool_use_error>"
    )
    (u,) = load(_write_records(tmp_path / "ran.jsonl", recs))
    assert not u[1].meta.get("not_run")


def _claude_calls_session(calls, version="2.1.45"):
    """Claude Code records: a prompt, then one API message per ``(name, input, result,
    is_error)`` of *calls*, each call answered in the next record."""
    sid = "5e55e55e-0000-4000-8000-0000000000d1"
    base = {"sessionId": sid, "version": version, "userType": "external", "cwd": "/w",
            "isSidechain": False}  # fmt: skip
    usage = {"input_tokens": 3, "cache_read_input_tokens": 900, "output_tokens": 40}
    recs = [{**base, "uuid": "p", "parentUuid": None, "type": "user",
             "message": {"role": "user", "content": "Rename the flag in a.ts."}}]  # fmt: skip
    parent = "p"
    for n, (name, args, result, is_error) in enumerate(calls):
        tid = f"toolu_c{n:02d}"
        recs.append({**base, "uuid": f"a{n}", "parentUuid": parent, "type": "assistant",
                     "message": {"id": f"msg_{n}", "role": "assistant", "usage": usage,
                                 "content": [{"type": "tool_use", "id": tid, "name": name,
                                              "input": args}]}})  # fmt: skip
        recs.append({**base, "uuid": f"u{n}", "parentUuid": f"a{n}", "type": "user",
                     "message": {"role": "user", "content": [
                         {"type": "tool_result", "tool_use_id": tid, "content": result,
                          "is_error": is_error}]}})  # fmt: skip
        parent = f"u{n}"
    return recs


def test_claude_code_a_write_refused_as_not_read_starts_the_reads_again(tmp_path):
    """Claude Code refuses to write a file it holds no read of (``File has not been read yet.
    Read it first before writing to it.``). Said of a file the session read minutes before (as
    2.1.4x sessions do, of files read in one batch with others), the harness has lost its record
    of the reads: the file read again before the write, and the others read again before theirs,
    are what it requires, not repeats. The same refusal of a file never read is the agent's own
    slip, and the repeats around it are charged as before."""
    refusal = "<tool_use_error>File has not been read yet. Read it first before writing to it.</tool_use_error>"
    edit = {"file_path": "/w/a.ts", "old_string": "typegen", "new_string": "codegen"}
    a, b = "     1\texport const name = 'typegen'\n", "     1\texport const other = 1\n"
    calls = [
        ("Read", {"file_path": "/w/a.ts"}, a, False),
        ("Read", {"file_path": "/w/b.ts"}, b, False),
        ("Edit", edit, refusal, True),
        ("Read", {"file_path": "/w/a.ts"}, a, False),
        ("Edit", edit, "The file /w/a.ts has been updated successfully.", False),
        ("Read", {"file_path": "/w/b.ts"}, b, False),
    ]
    (t,) = load(_write_records(tmp_path / "s.jsonl", _claude_calls_session(calls)))
    assert [s.target for s in t] == ["/w/a.ts", "/w/b.ts", "/w/a.ts", "/w/a.ts", "/w/a.ts",
                                     "/w/b.ts"]  # fmt: skip
    assert t[3].after_user and not t[2].after_user
    assert loopcore.analyse_burn(t).findings == ()
    # a refusal of a file the session never read says nothing of the reads before it
    calls[2] = ("Edit", {**edit, "file_path": "/w/c.ts"}, refusal, True)
    (u,) = load(_write_records(tmp_path / "never.jsonl", _claude_calls_session(calls)))
    assert [s.after_user for s in u] == [True] + [False] * 5
    rep = loopcore.analyse_burn(u)
    assert [(f.kind, f.steps, f.of_step) for f in rep.findings] == [
        ("redundant_observation", (3,), 0),
        ("redundant_observation", (5,), 1),
    ]


def test_entire_values_redacted_in_part_are_unknown(tmp_path):
    """Entire replaces a high-entropy run of path characters inside a value too: a path up to
    its extension (two different changelogs edited as ``REDACTED.md``, two background task
    outputs read as ``REDACTED.output``). Each was one call on one file, the same as the other
    only in what Entire left of it: no duplicate, no re-read. A value without the marker word
    (``UNREDACTED``) is kept as it is."""
    edit = {"file_path": "REDACTED.md", "old_string": "the chx CLI", "new_string": "the chkit CLI"}
    calls = [
        ("Edit", edit, "The file REDACTED.md has been updated successfully.", False),
        ("Edit", edit, "The file REDACTED.md has been updated successfully.", False),
        ("Read", {"file_path": "/private/tmp/tasks/REDACTED.output"}, "", False),
        ("Read", {"file_path": "/private/tmp/tasks/REDACTED.output"}, "", False),
        ("Read", {"file_path": "/w/UNREDACTED.md"}, "     1\tplain\n", False),
        ("Read", {"file_path": "/w/UNREDACTED.md"}, "     1\tplain\n", False),
    ]
    (t,) = load(_write_records(tmp_path / "s.jsonl", _claude_calls_session(calls)))
    assert t[0].target != t[1].target and t[2].target != t[3].target
    assert t[0].args["old_string"] == "the chx CLI"
    assert t[0].target.endswith(".md") and t[2].target.startswith("/private/tmp/tasks/")
    rep = loopcore.analyse_burn(t)
    assert [(f.kind, f.steps, f.of_step) for f in rep.findings] == [
        ("redundant_observation", (5,), 4)
    ]


def _hooked_edits(hook_records):
    """A Claude Code session adding an import to app.ex, then using it (an edit of another
    line), then removing the import again, each edit's ``PostToolUse`` hooks written after its
    call by *hook_records(tool_use_id, n)*: the records between a call and its result."""
    sid = "5e55e55e-0000-4000-8000-0000000000ee"
    base = {"sessionId": sid, "version": "2.1.39", "userType": "external", "cwd": "/w",
            "isSidechain": False}  # fmt: skip
    usage = {"input_tokens": 3, "cache_read_input_tokens": 900, "output_tokens": 40}
    edits = [
        ("  require Logger", "  alias App.Pane\n\n  require Logger"),
        ("    App.Pane.exists?(id)", "    Pane.exists?(id)"),
        ("  alias App.Pane\n\n  require Logger", "  require Logger"),
    ]
    recs = [{**base, "uuid": "p", "parentUuid": None, "type": "user",
             "message": {"role": "user", "content": "Alias App.Pane in app.ex."}}]  # fmt: skip
    parent = "p"
    for n, (old, new) in enumerate(edits):
        tid = f"toolu_e{n}"
        recs.append({**base, "uuid": f"a{n}", "parentUuid": parent, "type": "assistant",
                     "message": {"id": f"msg_{n}", "role": "assistant", "usage": usage,
                                 "content": [{"type": "tool_use", "id": tid, "name": "Edit",
                                              "input": {"file_path": "/w/lib/app.ex",
                                                        "old_string": old,
                                                        "new_string": new}}]}})  # fmt: skip
        recs.extend({**base, "uuid": f"h{n}.{k}", "parentUuid": f"a{n}", **h}
                    for k, h in enumerate(hook_records(tid, n)))  # fmt: skip
        recs.append({**base, "uuid": f"u{n}", "parentUuid": f"a{n}", "type": "user",
                     "message": {"role": "user", "content": [
                         {"type": "tool_result", "tool_use_id": tid,
                          "content": "The file /w/lib/app.ex has been updated successfully."}]}})  # fmt: skip
        parent = f"u{n}"
    return recs


def _hook_progress(command):
    def records(tid, n):
        return [{"type": "progress", "toolUseID": tid, "parentToolUseID": tid,
                 "data": {"type": "hook_progress", "hookEvent": event,
                          "hookName": f"{event}:Edit", "command": cmd}}
                for event, cmd in (("PreToolUse", "guard.sh"), ("PostToolUse", command))]  # fmt: skip

    return records


def test_claude_code_an_undo_after_a_post_edit_hook_ran_is_no_oscillation(tmp_path):
    """Claude Code runs a ``PostToolUse`` command hook after each edit (a compiler, a linter,
    a formatter) and gives the model its output; 2.1.x writes only a ``hook_progress`` record
    that it started. An import removed again after the compiler hook said it was unused is a
    reaction, not an undo: the hook is an exec between the edits (it may have rewritten the
    files and told the agent something), written as a step of its own that costs nothing and
    that the guard replay skips. In-process hooks (``command: "callback"``) and hooks before a
    call change nothing of this."""
    (plain,) = load(_write_records(tmp_path / "plain.jsonl", _hooked_edits(lambda t, n: [])))
    assert [f.kind for f in loopcore.analyse_burn(plain).findings] == ["oscillation"]
    (cb,) = load(_write_records(tmp_path / "cb.jsonl", _hooked_edits(_hook_progress("callback"))))
    assert [s.name for s in cb] == ["Edit"] * 3
    assert [f.kind for f in loopcore.analyse_burn(cb).findings] == ["oscillation"]
    path = _write_records(tmp_path / "hooked.jsonl", _hooked_edits(_hook_progress("mix-check.sh")))
    (t,) = load(path)
    assert [s.name for s in t] == ["Edit", "PostToolUse hook"] * 3
    hook = t[1]
    assert (hook.kind, hook.meta, hook.tokens, hook.call_id, hook.turn) == (
        "exec",
        {"hook": "PostToolUse"},
        0,
        None,
        0,
    )
    assert hook.args == {"tool_use_id": "toolu_e0", "commands": ["mix-check.sh"]}
    assert hook.ref == {"line": 4}
    assert t.total_tokens == plain.total_tokens
    assert loopcore.analyse_burn(t).findings == ()

    class Spy(loopcore.Guard):
        checked: list = []

        def check(self, session, tool, args, **kw):
            self.checked.append(tool)
            return super().check(session, tool, args, **kw)

    from loopcore.replay import replay_trace

    replay_trace(t, Spy())
    assert Spy.checked == ["Edit"] * 3
    # 2.1.2xx writes each run as a ``hook_success`` attachment with its command and output
    attached = _hooked_edits(
        lambda tid, n: [{"type": "attachment",
                         "attachment": {"type": "hook_success", "hookName": "PostToolUse:Edit",
                                        "toolUseID": tid, "hookEvent": "PostToolUse",
                                        "content": "", "stdout": "", "stderr": "",
                                        "exitCode": 0, "command": "mix format", "durationMs": 9}}]
    )  # fmt: skip
    (u,) = load(_write_records(tmp_path / "attached.jsonl", attached))
    assert [s.name for s in u] == ["Edit", "PostToolUse hook"] * 3
    assert loopcore.analyse_burn(u).findings == ()
    # a hook's blocking error names no command of its own: what it said is the feedback
    blocked = _hooked_edits(
        lambda tid, n: [{"type": "attachment",
                         "attachment": {"type": "hook_blocking_error",
                                        "hookName": "PostToolUse:Edit", "toolUseID": tid,
                                        "hookEvent": "PostToolUse",
                                        "blockingError": {"blockingError": "unused alias",
                                                          "command": "mix-check.sh"}}}]
    )  # fmt: skip
    (b,) = load(_write_records(tmp_path / "blocked.jsonl", blocked))
    assert [s.name for s in b] == ["Edit", "PostToolUse hook"] * 3
    assert b[1].args["commands"] == []


# ---- Cline: a request's input tokens, with or without the cached ones ---------------------


def _cline_reads(folder, usage, ui=None):
    """A Cline 3.x task reading a.py, b.py, c.py: one assistant message per read with
    ``metrics.tokens`` *usage* (prompt, completion, cached) each, or no metrics and *ui*
    ``api_req_started`` entries (tokensIn, cacheWrites, cacheReads, tokensOut)."""
    msgs = [{"role": "user", "content": [{"type": "text", "text": "<task>\nread them\n</task>"}]}]
    for n, path in enumerate(["a.py", "b.py", "c.py"]):
        m = {"role": "assistant", "ts": n,
             "content": [{"type": "tool_use", "id": f"t{n}", "name": "read_file",
                          "input": {"path": path}}],
             "modelInfo": {"modelId": "m", "providerId": "p", "mode": "act"}}  # fmt: skip
        if usage is not None:
            prompt, completion, cached = usage[n]
            m["metrics"] = {
                "tokens": {"prompt": prompt, "completion": completion, "cached": cached}
            }
        msgs.append(m)
        msgs.append({"role": "user", "content": [
            {"type": "text", "text": f"[read_file for '{path}'] Result:\n" + "x = 1\n" * 40}]})  # fmt: skip
    folder.mkdir(parents=True)
    (folder / "api_conversation_history.json").write_text(json.dumps(msgs))
    if ui is not None:
        (folder / "ui_messages.json").write_text(json.dumps([
            {"ts": n, "type": "say", "say": "api_req_started",
             "text": json.dumps({"request": "...", "tokensIn": a, "cacheWrites": b,
                                 "cacheReads": c, "tokensOut": d})}
            for n, (a, b, c, d) in enumerate(ui)]))  # fmt: skip
    (t,) = load(folder / "api_conversation_history.json")
    return t


def test_cline_input_tokens_are_read_as_the_provider_counts_them(tmp_path):
    """Cline's Anthropic provider records a request's input without the cached tokens (the
    prompt is input + cached; gmfstu/Online-Card-Architecture, Cline 3.51: ``prompt`` 10 on
    every message, the growth all in ``cached``), its OpenAI compatible one the whole prompt
    with the cached tokens in it. Read as input alone, the first kind's prompt never grew: every
    step estimated, and a cache miss put the whole prompt on one result."""
    # Anthropic: input 10, the cache holds the rest; the second request a cache miss
    anth = _cline_reads(tmp_path / "1", [(10, 50, 2000), (2110, 50, 0), (10, 50, 2210)])
    # each read its prompt's growth less the reply; the last, which no prompt follows, estimated
    assert [s.tokens_estimated for s in anth] == [False, False, True]
    assert [s.tokens_in for s in anth][:2] == [50, 60]
    # OpenAI compatible: the same prompts, cached tokens inside them
    oai = _cline_reads(tmp_path / "2", [(2010, 50, 1800), (2110, 50, 2000), (2220, 50, 2100)])
    assert [s.tokens_in for s in oai][:2] == [50, 60]
    # ui_messages.json beside the task, both kinds (DeepSeek's writes are its cache misses)
    ui_anth = _cline_reads(
        tmp_path / "3", None, [(10, 0, 2000, 50), (10, 100, 2000, 50), (10, 0, 2210, 50)]
    )
    assert [s.tokens_in for s in ui_anth][:2] == [50, 60]
    ui_deepseek = _cline_reads(
        tmp_path / "4", None, [(2010, 10, 2000, 50), (2110, 110, 2000, 50), (2220, 10, 2210, 50)]
    )
    assert [s.tokens_in for s in ui_deepseek][:2] == [50, 60]


def test_cline_task_named_from_inside_its_folder(tmp_path, monkeypatch):
    """``loopcore analyse api_conversation_history.json`` run in the task folder names the
    session for the task, as the full path does."""
    t = _cline_reads(tmp_path / "1769053680585", [(10, 50, 2000), (10, 50, 2110), (10, 50, 2220)])
    monkeypatch.chdir(tmp_path / "1769053680585")
    (u,) = load("api_conversation_history.json")
    assert t.session == u.session == "1769053680585"


@pytest.mark.parametrize("tool", ["edit", "search_replace", "edit_file", "search_and_replace"])
def test_roo_native_edit_tools_name_the_file_they_edit(tmp_path, tool):
    """Roo Code 3.3x+'s native edit tools (``edit``, ``search_replace``, ``edit_file``, and
    ``search_and_replace`` kept under its own name) take ``file_path``. Read as an observation
    (``search_replace``: "search") or as a write of everything (no target), an edit undone and
    redone went unseen."""
    msgs = [{"role": "user", "content": [{"type": "text", "text": "<task>\nfix it\n</task>"}]}]
    swaps = [("return 1", "return 2"), ("return 2", "return 1"), ("return 1", "return 2")]
    for n, (old, new) in enumerate(swaps):
        msgs.append({"role": "assistant", "content": [
            {"type": "tool_use", "id": f"e{n}", "name": tool,
             "input": {"file_path": "src/a.ts", "old_string": old, "new_string": new}}]})  # fmt: skip
        msgs.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"e{n}",
             "content": "Changes applied to src/a.ts."}]})  # fmt: skip
    task = tmp_path / "tasks" / "019a2b3c-0000-7000-8000-00000000ed17"
    task.mkdir(parents=True)
    (task / "api_conversation_history.json").write_text(json.dumps(msgs))
    (t,) = load(task / "api_conversation_history.json")
    assert t.format == "cline"
    assert [(s.kind, s.target) for s in t] == [("mutate", "src/a.ts")] * 3
    assert [f.kind for f in loopcore.analyse_burn(t).findings] == ["oscillation"]


def test_gemini_cli_tool_results_sent_back_are_no_message_from_the_person(tmp_path):
    """gemini-cli 0.44+ records each batch of tool results it sends back to the model as a
    ``user`` message of ``functionResponse`` parts (``recordSyntheticMessage('user', ...)`` in
    ``geminiChat.ts``), besides the calls' own ``result``. Read as the person's message, it
    started the evidence again after every call: no repeat across a tool round trip was ever
    charged. The same session with and without those messages reads the same."""
    out = "\n".join(f"line {n} of the config" for n in range(60))
    no_echo = _gemini_shell_session(tmp_path / "no-echo.jsonl", [out, out, out])
    lines = [json.loads(x) for x in no_echo.read_text().splitlines()]
    echoed = []
    for rec in lines:
        echoed.append(rec)
        if rec.get("type") == "gemini":
            call = rec["toolCalls"][0]
            echoed.append({"id": rec["id"] + "_response", "timestamp": rec["timestamp"],
                           "type": "user", "content": call["result"]})  # fmt: skip
    path = tmp_path / "session-2026-11-20T08-00-5e55e55e.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in echoed))
    (t,) = load(path)
    (u,) = load(no_echo)
    assert [s.after_user for s in t] == [True, False, False]
    assert [{**s.to_dict(), "ref": None} for s in t] == [{**s.to_dict(), "ref": None} for s in u]
    rep = loopcore.analyse_burn(t)
    assert [(f.kind, f.steps) for f in rep.findings] == [("duplicate_call", (1, 2))]
    assert (rep.total_tokens, rep.wasted_tokens) == (
        loopcore.analyse_burn(u).total_tokens,
        loopcore.analyse_burn(u).wasted_tokens,
    )


def test_claude_code_hidden_thinking_is_the_turns_not_its_calls(tmp_path):
    """Claude Code 2.1.15x-2.1.17x (claude-opus-4-8) writes a turn's thinking as a block with
    empty ``thinking`` text and only its ``signature``, and its usage says no thinking count:
    the output was split by characters over the reply and the calls, so the calls took the
    thinking (a 2,195-character question given 6,834 of a turn's 9,162 output tokens). The
    output beyond what the text and calls can hold is now the turn's reasoning, and a re-read
    in such a turn is charged its own tokens, not the thinking."""
    sid = "5e55e55e-0000-4000-8000-0000000071a7"
    base = {"sessionId": sid, "version": "2.1.179", "userType": "external", "cwd": "/r",
            "isSidechain": False}  # fmt: skip
    usage = {"input_tokens": 2, "cache_read_input_tokens": 10000, "output_tokens": 2000}
    recs = [{**base, "uuid": "p", "parentUuid": None, "type": "user",
             "message": {"role": "user", "content": "Check a.go."}}]  # fmt: skip
    parent = "p"
    for n in range(2):
        recs.append({**base, "uuid": f"t{n}", "parentUuid": parent, "type": "assistant",
                     "message": {"id": f"msg_{n}", "role": "assistant", "usage": usage,
                                 "content": [{"type": "thinking", "thinking": "",
                                              "signature": "EpQBCkYIBxgCKkB"}]}})  # fmt: skip
        recs.append({**base, "uuid": f"a{n}", "parentUuid": f"t{n}", "type": "assistant",
                     "message": {"id": f"msg_{n}", "role": "assistant", "usage": usage,
                                 "content": [{"type": "tool_use", "id": f"toolu_{n}",
                                              "name": "Read",
                                              "input": {"file_path": "/r/a.go"}}]}})  # fmt: skip
        recs.append({**base, "uuid": f"u{n}", "parentUuid": f"a{n}", "type": "user",
                     "message": {"role": "user", "content": [
                         {"type": "tool_result", "tool_use_id": f"toolu_{n}",
                          "content": "     1\tpackage main\n"}]}})  # fmt: skip
        parent = f"u{n}"
    (t,) = load(_write_records(tmp_path / "s.jsonl", recs))
    own = (len("Read") + len('{"file_path": "/r/a.go"}') + 3) // 4
    for s in t.steps[:2]:
        assert 0 < s.tokens_out <= own + 1 and s.tokens_out + s.tokens_turn == 2000
    rep = loopcore.analyse_burn(t)
    ((f,),) = [rep.findings]
    assert f.steps == (1,) and f.tokens < 100  # the re-read's own tokens, not 2,000
    # with the thinking's text written, the text holds the turn's output as before
    for r in recs:
        for b in r["message"]["content"] if isinstance(r["message"]["content"], list) else []:
            if b.get("type") == "thinking":
                b["thinking"] = "I should look at a.go again. " * 200
    (u,) = load(_write_records(tmp_path / "shown.jsonl", recs))
    assert u[0].tokens_out < 20 and u[0].tokens_turn > 1900
    # a usage with a thinking count is read as it says
    for r in recs:
        if r["type"] == "assistant":
            r["message"]["usage"] = {**usage, "output_tokens_details": {"thinking_tokens": 1500}}
    (v,) = load(_write_records(tmp_path / "counted.jsonl", recs))
    assert v[0].tokens_turn >= 1500


# ---- a compaction of the context starts the evidence again --------------------------------


def _codex_reads(path, compact_between):
    """A Codex rollout reading the same file twice (sed -n of 60 lines), a compaction between
    them when *compact_between*."""
    body = "".join(f"line {n}: const value{n} = {n};\n" for n in range(60))
    recs = [
        {"type": "session_meta", "payload": {"id": "0199a1b2-0000-7000-8000-00000000c0a1",
                                             "cli_version": "0.140.0", "cwd": "/w"}},
        {"type": "event_msg", "payload": {"type": "user_message", "message": "Fix the theme."}},
    ]  # fmt: skip
    for n in range(2):
        if n and compact_between:
            recs.append({"type": "compacted", "payload": {"message": "", "replacement_history": [
                {"type": "message", "role": "user",
                 "content": [{"type": "input_text", "text": "Fix the theme."}]}]}})  # fmt: skip
        recs.append({"type": "response_item", "payload": {
            "type": "function_call", "name": "exec_command", "call_id": f"c{n}",
            "arguments": json.dumps({"cmd": "sed -n '1,220p' src/theme.js"})}})  # fmt: skip
        recs.append({"type": "response_item", "payload": {
            "type": "function_call_output", "call_id": f"c{n}",
            "output": f"Chunk ID: {n}a\nWall time: 0.1 seconds\nProcess exited with code 0\n"
                      f"Output:\n{body}"}})  # fmt: skip
        recs.append({"type": "event_msg", "payload": {"type": "token_count", "info": {
            "last_token_usage": {"input_tokens": 9000 + 900 * n, "cached_input_tokens": 0,
                                 "output_tokens": 30, "reasoning_output_tokens": 0,
                                 "total_tokens": 9030 + 900 * n}}}})  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    (t,) = load(path)
    return t


def test_a_re_read_after_the_context_was_compacted_is_no_repeat(tmp_path):
    """After a compaction the model holds a summary, not what it read: the same read again is
    necessary work (Codex 0.140 re-reading ``src/theme.js`` after a ``compacted`` record was
    charged 1,187 tokens). The step after a compaction starts the evidence again, as after a
    person's message; the guard replay is told of the compaction."""
    plain = _codex_reads(tmp_path / "plain.jsonl", False)
    assert [f.kind for f in loopcore.analyse_burn(plain).findings] == ["redundant_observation"]
    compacted = _codex_reads(tmp_path / "compacted.jsonl", True)
    assert [s.meta.get("after_compaction", False) for s in compacted] == [False, True]
    assert compacted[1].after_user and loopcore.analyse_burn(compacted).findings == ()

    class Spy(loopcore.Guard):
        def __init__(self):
            super().__init__()
            self.noted = []

        def note_compaction(self, session, *, run_id=None):
            self.noted.append(("compaction", session))
            return super().note_compaction(session, run_id=run_id)

        def note_message(self, session, text, *, role="assistant", run_id=None):
            self.noted.append((role, session))
            return super().note_message(session, text, role=role, run_id=run_id)

    from loopcore.replay import replay_trace

    spy = Spy()
    replay_trace(compacted, spy)
    assert ("compaction", compacted.session) in spy.noted


@pytest.mark.parametrize("subtype", ["compact_boundary", "microcompact_boundary"])
def test_claude_code_a_re_read_after_a_compaction_is_no_repeat(tmp_path, subtype):
    recs = _read_files_session(["/w/a.py", "/w/a.py"])
    boundary = {"type": "system", "subtype": subtype, "uuid": "cb", "parentUuid": "u0",
                "sessionId": recs[0]["sessionId"], "isSidechain": False,
                "content": "Conversation compacted"}  # fmt: skip
    (t,) = load(_write_records(tmp_path / "s.jsonl", recs[:3] + [boundary] + recs[3:]))
    assert [s.meta.get("after_compaction", False) for s in t] == [False, True]
    assert loopcore.analyse_burn(t).findings == ()
    (u,) = load(_write_records(tmp_path / "plain.jsonl", recs))
    assert [f.kind for f in loopcore.analyse_burn(u).findings] == ["redundant_observation"]


def test_openhands_a_re_read_after_a_condensation_is_no_repeat(tmp_path):
    """An OpenHands ``Condensation`` event drops events from what the model sees: the same
    grep after it is necessary work, not a repeat."""

    def grep(n):
        return [
            {"id": f"a{n}", "timestamp": "2026-04-10T09:00:04", "source": "agent", "thought": [],
             "action": {"command": "grep -n greet app.py", "kind": "TerminalAction"},
             "tool_name": "terminal", "tool_call_id": f"t{n}",
             "tool_call": {"id": f"t{n}", "name": "terminal",
                           "arguments": json.dumps({"command": "grep -n greet app.py"})},
             "llm_response_id": f"r{n}", "kind": "ActionEvent"},
            {"id": f"o{n}", "timestamp": "2026-04-10T09:00:05", "source": "environment",
             "tool_name": "terminal", "tool_call_id": f"t{n}", "action_id": f"a{n}",
             "observation": {"content": [{"type": "text", "text": "3:def greet(name):"}],
                             "is_error": False, "command": "grep -n greet app.py",
                             "exit_code": 0, "kind": "TerminalObservation"},
             "kind": "ObservationEvent"},
        ]  # fmt: skip

    condensation = {"id": "c1", "timestamp": "2026-04-10T09:00:06", "source": "environment",
                    "forgotten_event_ids": ["a0", "o0"], "summary": "grepped app.py",
                    "kind": "Condensation"}  # fmt: skip
    user = {"id": "u", "timestamp": "2026-04-10T09:00:01", "source": "user",
            "llm_message": {"role": "user", "content": [{"type": "text", "text": "Rename it."}]},
            "kind": "MessageEvent"}  # fmt: skip
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps([user, *grep(0), *grep(1)]))
    assert [f.kind for f in loopcore.analyse_burn(only(plain)).findings] == [
        "redundant_observation"
    ]
    cond = tmp_path / "condensed.json"
    cond.write_text(json.dumps([user, *grep(0), condensation, *grep(1)]))
    t = only(cond)
    assert [s.meta.get("after_compaction", False) for s in t] == [False, True]
    assert loopcore.analyse_burn(t).findings == ()


def test_opencode_a_re_read_after_a_compaction_is_no_repeat(tmp_path):
    """opencode compacts a session with a user message holding a ``compaction`` part (the
    summary that answers it replaces the conversation): a read after it is no repeat."""

    def read(n):
        return {"info": {"id": f"msg_a{n}", "sessionID": "ses_c", "role": "assistant",
                         "tokens": {"input": 10, "output": 20, "reasoning": 0,
                                    "cache": {"read": 900, "write": 0}}},
                "parts": [{"id": f"prt_{n}", "type": "tool", "callID": f"c{n}", "tool": "read",
                           "state": {"status": "completed", "input": {"filePath": "/w/a.ts"},
                                     "output": "".join(f"{k}| line {k}\n" for k in range(40))}}]}  # fmt: skip

    def user(n, parts):
        return {"info": {"id": f"msg_u{n}", "sessionID": "ses_c", "role": "user"}, "parts": parts}

    compact = user(1, [{"id": "prt_c", "type": "compaction", "auto": True}])
    for name, msgs, findings in (
        ("plain", [user(0, [{"type": "text", "text": "look"}]), read(0), read(1)], 1),
        ("compacted", [user(0, [{"type": "text", "text": "look"}]), read(0), compact, read(1)], 0),
    ):
        path = tmp_path / f"{name}.json"
        path.write_text(
            json.dumps({"info": {"id": "ses_c", "version": "1.3.17"}, "messages": msgs})
        )
        t = only(path)
        assert len(loopcore.analyse_burn(t).findings) == findings, name
        if findings == 0:
            assert t[1].meta.get("after_compaction") is True


def _codex_usage(prompt, out, reasoning, total):
    return {"type": "event_msg", "payload": {"type": "token_count", "info": {
        "total_token_usage": {"input_tokens": total, "output_tokens": out,
                              "reasoning_output_tokens": reasoning, "total_tokens": total + out},
        "last_token_usage": {"input_tokens": prompt, "output_tokens": out,
                             "reasoning_output_tokens": reasoning,
                             "total_tokens": prompt + out}}}}  # fmt: skip


def test_codex_a_response_that_searched_the_web_tells_nothing_of_the_results_before_it(tmp_path):
    """A response with ``web_search_call`` items sampled in several passes: the prompt its
    usage reports holds the pages the search read (Codex 0.140: 29,684 -> 44,841 around six
    searches, a 1,765-character output charged 8,718 tokens). Its prompt is no measure of what
    the results before it added, so they are estimated from their text; nor does it tell
    whether reasoning stays in the context."""
    head = [{"type": "session_meta", "payload": {"id": "0199a1b2-0000-7000-8000-0000000000ws",
                                                "cli_version": "0.140.0", "cwd": "/r"}},
            {"type": "event_msg", "payload": {"type": "user_message", "message": "why?"}}]  # fmt: skip

    def call(n, cmd, out):
        return [
            {"type": "response_item", "payload": {"type": "function_call", "name": "exec_command",
             "arguments": json.dumps({"cmd": cmd}), "call_id": f"c{n}"}},
            {"type": "response_item", "payload": {"type": "function_call_output",
             "call_id": f"c{n}", "output": f"Chunk ID: {n}\nWall time: 0.1 seconds\n"
             f"Process exited with code 0\nOutput:\n{out}"}},
        ]  # fmt: skip

    search = {"type": "response_item", "payload": {"type": "web_search_call",
              "status": "completed", "action": {"type": "open_page",
                                                "url": "https://docs.example.com/a"}}}  # fmt: skip
    recs = [*head, *call(1, "tool show 1", "x" * 60), _codex_usage(20000, 100, 50, 20000),
            search, search, *call(2, "git status", "clean"),
            _codex_usage(35000, 100, 50, 55000)]  # fmt: skip
    path = tmp_path / "ws.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    (t,) = load(path)
    first = t[0]
    assert first.name == "exec_command" and first.tokens_in < 100  # was 14,900
    assert first.tokens_estimated


def test_codex_a_web_search_response_does_not_decide_whether_reasoning_stays(tmp_path):
    """Four patches whose prompts each grow by the whole completion (the reasoning stays in
    the context), then a response that searched the web and whose next prompt grew less: that
    one gap had made the whole session read as "reasoning dropped", so each patch's 40-token
    result was charged its call's 800 reasoning tokens."""

    def session(with_search):
        recs = [{"type": "session_meta", "payload": {"id": "0199a1b2-0000-7000-8000-0000000000fl",
                                                    "cli_version": "0.140.0", "cwd": "/r"}},
                {"type": "event_msg", "payload": {"type": "user_message", "message": "edit"}}]  # fmt: skip
        total, prompt = 0, 20000

        def usage(p, c, r):
            nonlocal total
            total += p + c
            recs.append(_codex_usage(p, c, r, total))

        for n in range(4):
            recs += [
                {"type": "response_item", "payload": {"type": "reasoning", "summary": []}},
                {"type": "response_item", "payload": {"type": "custom_tool_call", "call_id": f"p{n}",
                 "name": "apply_patch", "status": "completed",
                 "input": f"*** Begin Patch\n*** Update File: f{n}.md\n@@\n-a\n+b\n*** End Patch\n"}},
                {"type": "response_item", "payload": {"type": "custom_tool_call_output",
                 "call_id": f"p{n}", "output": "Exit code: 0\nWall time: 0 seconds\nOutput:\n"
                 "Success. Updated the following files:\nM f.md\n"}},
            ]  # fmt: skip
            usage(prompt, 1000, 800)
            prompt += 1040
        if with_search:
            recs += [
                {"type": "response_item", "payload": {"type": "web_search_call",
                 "status": "completed", "action": {"type": "open_page", "url": "https://e.com"}}},
                {"type": "response_item", "payload": {"type": "function_call", "call_id": "w1",
                 "name": "exec_command", "arguments": json.dumps({"cmd": "git diff"})}},
                {"type": "response_item", "payload": {"type": "function_call_output",
                 "call_id": "w1", "output": "Chunk ID: x\nWall time: 0 seconds\n"
                 "Process exited with code 0\nOutput:\n+b\n"}},
            ]  # fmt: skip
            usage(prompt, 1100, 950)
            prompt += 800
        recs.append({"type": "response_item", "payload": {"type": "message", "role": "assistant",
                     "content": [{"type": "output_text", "text": "done"}]}})  # fmt: skip
        usage(prompt, 20, 0)
        path = tmp_path / f"s{int(with_search)}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in recs))
        (t,) = load(path)
        return [s.tokens_in for s in t if s.name == "apply_patch"]

    assert session(False)[:3] == [40, 40, 40]
    assert session(True)[:3] == [40, 40, 40]


def test_claude_code_bash_exit_code_is_read(tmp_path):
    """A Bash command that exited non-zero is answered ``Exit code N`` then its output
    (``is_error``): the step's ``meta["returncode"]`` is N, as Codex's, gemini-cli's and
    opencode's are; the text is kept, and a text that only looks like it gives none."""
    path = _bash_session(
        tmp_path / "s.jsonl", ["Exit code 2\nFAIL src/a.test.ts", "ok", "Exit code x"]
    )
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    rows[1]["message"]["content"][0]["is_error"] = True
    _write_records(path, rows)
    (t,) = load(path)
    assert [s.meta.get("returncode") for s in t] == [2, None, None]
    assert t[0].result == "Exit code 2\nFAIL src/a.test.ts" and t[0].error


def _cline_sdk_session(folder, sid, agent="lead", stem=None):
    """A Cline 4.x SDK session file (the SDK's messages file: version, agent, sessionId,
    messages with ``metrics``): a prompt, then read_files of a.ts twice, then run_commands."""
    body = "".join(f"{n}\tconst v{n} = {n};\n" for n in range(1, 41))

    def asst(n, name, inp, metrics):
        return {"role": "assistant", "id": f"m{n}", "ts": n,
                "modelInfo": {"id": "claude-sonnet-4-5", "provider": "anthropic"},
                "metrics": metrics,
                "content": [{"type": "tool_use", "id": f"t{n}", "name": name, "input": inp}]}  # fmt: skip

    def result(n, text):
        return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}",
                                             "content": text}]}  # fmt: skip

    read = {"files": [{"path": "/w/a.ts", "start_line": None, "end_line": None}]}
    msgs = [
        {"role": "user", "content": [{"type": "text", "text": "Tidy a.ts"}]},
        asst(1, "read_files", read, {"inputTokens": 10, "outputTokens": 40,
                                     "cacheReadTokens": 9000, "cacheWriteTokens": 0}),
        result(1, body),
        asst(2, "read_files", read, {"inputTokens": 10, "outputTokens": 40,
                                     "cacheReadTokens": 9400, "cacheWriteTokens": 0}),
        result(2, body),
        asst(3, "run_commands", {"commands": ["npm test", "git status"]},
             {"inputTokens": 10, "outputTokens": 30, "cacheReadTokens": 9800,
              "cacheWriteTokens": 0}),
        result(3, "ok"),
    ]  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{stem or sid}.messages.json"
    path.write_text(json.dumps({"version": 1, "updated_at": "2026-11-30T10:00:00.000Z",
                                "agent": agent, "sessionId": sid, "messages": msgs}))  # fmt: skip
    return path


def test_cline_sdk_session_files_are_read_as_cline(tmp_path):
    """Cline 4.x keeps a session as ``~/.cline/data/sessions/<id>/<id>.messages.json`` (the
    SDK's messages file). It was read as Anthropic messages: the session named
    ``<id>.messages``, every step estimated, ``read_files`` an observation of nothing and
    ``run_commands`` unclassified. It is Cline's now: named for the session, tokens from
    ``metrics``, the files read and the commands classified."""
    sid = "1790000000000_abc12"
    folder = tmp_path / "sessions" / sid
    lead = _cline_sdk_session(folder, sid)
    assert detect_format(lead) == "cline"
    (t,) = load(lead)
    assert t.session == sid and t.format == "cline"
    assert [(s.name, s.kind, s.target) for s in t] == [
        ("read_files", "observe", "/w/a.ts"),
        ("read_files", "observe", "/w/a.ts"),
        ("run_commands", "exec", None),
    ]
    assert t[0].after_user and not t[1].after_user
    assert [s.tokens_estimated for s in t][:2] == [False, False]
    assert t[0].tokens_in == 400 - 40  # the prompt's growth less the reply: cached tokens in
    rep = loopcore.analyse_burn(t)
    assert [(f.kind, f.steps, f.of_step) for f in rep.findings] == [
        ("redundant_observation", (1,), 0)
    ]
    sub = _cline_sdk_session(folder, sid, agent="subagent", stem="agent_7")
    (u,) = load(sub)
    assert u.session == f"{sid}/agent_7" and not u[0].after_user
    # a folder walk reads both, once each
    assert sorted(x.session for x in load(tmp_path / "sessions")) == [sid, f"{sid}/agent_7"]


def test_openhands_v1_observations_of_late_2025_sdk_builds(tmp_path):
    """SDK builds of late 2025 (OpenHands/benchmarks openagentsafety outputs, 2025-10-30) write
    an observation as ``{"output", "error"}`` with no ``content``: a failed call is an empty
    output and the message the model saw in ``error`` (it was read as a successful empty read),
    and a command's exit code is ``metadata.exit_code`` with ``exit_code`` null (not read)."""

    def pair(n, tool, action, obs):
        return [
            {"kind": "ActionEvent", "id": f"a{n}", "source": "agent", "llm_response_id": f"r{n}",
             "tool_name": tool, "tool_call_id": f"c{n}", "action": action},
            {"kind": "ObservationEvent", "id": f"o{n}", "source": "environment",
             "tool_name": tool, "tool_call_id": f"c{n}", "action_id": f"a{n}",
             "observation": obs},
        ]  # fmt: skip

    missing = "Invalid `path` parameter: /w/x.py. The path /w/x.py does not exist."
    events = [
        *pair(1, "str_replace_editor", {"kind": "FileEditorAction", "command": "view", "path": "/w/x.py"},
              {"kind": "FileEditorObservation", "command": "view", "output": "", "path": None,
               "error": missing}),
        *pair(2, "execute_bash", {"kind": "ExecuteBashAction", "command": "mail -s hi x@y"},
              {"kind": "ExecuteBashObservation", "output": "bash: mail: command not found",
               "command": "mail -s hi x@y", "exit_code": None, "error": False,
               "metadata": {"exit_code": 127}}),
        *pair(3, "str_replace_editor",
              {"kind": "FileEditorAction", "command": "str_replace", "path": "/w/y.py",
               "old_str": "a", "new_str": "b"},
              {"kind": "FileEditorObservation", "command": "str_replace", "output": "",
               "error": "No replacement was performed, old_str `a` did not appear verbatim."}),
    ]  # fmt: skip
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    view, bash, edit = only(path).steps
    assert (view.result, view.error) == (missing, missing) and view.tokens_in > 0
    assert bash.meta["returncode"] == 127
    assert edit.error and edit.no_op


def _oh_v1_pair(n, tool, action, output):
    return [
        {"kind": "ActionEvent", "id": f"a{n}", "source": "agent", "llm_response_id": f"r{n}",
         "tool_name": tool, "tool_call_id": f"c{n}", "action": action},
        {"kind": "ObservationEvent", "id": f"o{n}", "source": "environment",
         "tool_name": tool, "tool_call_id": f"c{n}", "action_id": f"a{n}",
         "observation": {"kind": "BrowserObservation", "output": output, "error": None,
                         "screenshot_data": None}},
    ]  # fmt: skip


def test_openhands_v1_browser_moves_in_a_row_are_no_repeats(tmp_path):
    """``browser_go_back`` three times in a row (OpenHands/benchmarks openagentsafety, SDK of
    late 2025), each answered "Navigated back", goes three pages back: the same call again is
    the next move, not a duplicate. A move that failed the same way again still is one, and the
    guard replay still checks every move (a hook saw each)."""
    from loopcore.replay import replay_trace

    state = json.dumps({"url": "http://wiki.test/doc#edit", "title": "doc", "elements": []})
    events = [
        *_oh_v1_pair(1, "browser_get_state", {"kind": "BrowserGetStateAction"}, state),
        *_oh_v1_pair(2, "browser_go_back", {"kind": "BrowserGoBackAction"}, "Navigated back"),
        *_oh_v1_pair(3, "browser_go_back", {"kind": "BrowserGoBackAction"}, "Navigated back"),
        *_oh_v1_pair(4, "browser_go_back", {"kind": "BrowserGoBackAction"}, "Navigated back"),
    ]
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    t = only(path)
    assert [s.name for s in t] == ["browser_get_state"] + ["browser_go_back"] * 3
    assert not loopcore.analyse_burn(t).findings
    # the live guard saw the third move in a row (it warns there): the replay checks it too
    assert [e.step for e in replay_trace(t, loopcore.Guard()).events] == [3]
    # a failed move repeated with the same error is still a repeat
    failed = [dict(e) for e in events]
    for e in failed[3::2]:
        e["observation"] = {**e["observation"], "output": "", "error": "No page to go back to"}
    path.write_text("".join(json.dumps(e) + "\n" for e in failed))
    (f,) = loopcore.analyse_burn(only(path)).findings
    assert (f.kind, f.steps) == ("duplicate_call", (2, 3))


def test_openhands_v1_navigating_is_no_look_at_the_page(tmp_path):
    """``browser_navigate`` loads a page: the same page's state read again after navigating
    away and back is read from a page loaded anew, not a redundant observation."""
    state = json.dumps({"url": "http://wiki.test/", "title": "home",
                        "elements": [{"index": n, "tag": "a", "text": f"link {n}"}
                                     for n in range(30)]})  # fmt: skip
    events = [
        *_oh_v1_pair(1, "browser_get_state", {"kind": "BrowserGetStateAction"}, state),
        *_oh_v1_pair(2, "browser_navigate", {"kind": "BrowserNavigateAction",
                     "url": "http://wiki.test/a"}, "Navigated to: http://wiki.test/a"),
        *_oh_v1_pair(3, "browser_navigate", {"kind": "BrowserNavigateAction",
                     "url": "http://wiki.test/"}, "Navigated to: http://wiki.test/"),
        *_oh_v1_pair(4, "browser_get_state", {"kind": "BrowserGetStateAction"}, state),
    ]  # fmt: skip
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    assert not loopcore.analyse_burn(only(path)).findings


def test_openhands_v1_think_calls_keep_their_thought(tmp_path):
    """The V1 ``think`` tool's one argument is ``thought`` (OpenHands/benchmarks
    openagentsafety, SDK of late 2025): three different thoughts were read as three calls with
    no arguments, charged as duplicates, and the thought's tokens were not counted."""
    events = []
    for n, text in enumerate(["The upload form did not open; try the menu.",
                              "The search found nothing under /data either.",
                              "Neither place holds the report, so ask for it."]):  # fmt: skip
        events += [
            {"kind": "ActionEvent", "id": f"a{n}", "source": "agent", "thought": [],
             "llm_response_id": f"r{n}", "tool_name": "think", "tool_call_id": f"c{n}",
             "action": {"kind": "ThinkAction", "thought": text}},
            {"kind": "ObservationEvent", "id": f"o{n}", "source": "environment",
             "tool_name": "think", "tool_call_id": f"c{n}", "action_id": f"a{n}",
             "observation": {"kind": "ThinkObservation", "output": "Your thought has been logged.",
                             "error": None}},
        ]  # fmt: skip
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    t = only(path)
    assert [s.args for s in t][1] == {"thought": "The search found nothing under /data either."}
    assert all(s.tokens_out > 5 for s in t)
    assert not loopcore.analyse_burn(t).findings


def test_openhands_v0_think_actions_keep_their_thought(tmp_path):
    """A V0 ``think`` action's ``thought`` is its argument, not reasoning beside a call: two
    different thoughts were two calls with no arguments, a duplicate."""
    events = []
    for n, text in enumerate(["The parser drops the last token.", "Check the lexer instead."]):
        events += [
            {"id": 2 * n + 1, "source": "agent", "action": "think", "args": {"thought": text},
             "tool_call_metadata": {"function_name": "think", "tool_call_id": f"c{n}",
                                    "model_response": {"id": f"r{n}", "usage": {
                                        "prompt_tokens": 100, "completion_tokens": 20}}}},
            {"id": 2 * n + 2, "source": "agent", "observation": "think", "cause": 2 * n + 1,
             "content": "Your thought has been logged.", "extras": {},
             "tool_call_metadata": {"function_name": "think", "tool_call_id": f"c{n}"}},
        ]  # fmt: skip
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(events))
    t = only(path)
    assert [s.args for s in t] == [{"thought": "The parser drops the last token."},
                                   {"thought": "Check the lexer instead."}]  # fmt: skip
    assert sum(s.tokens_out for s in t) == 40
    assert not loopcore.analyse_burn(t).findings


def test_the_guard_replay_passes_over_a_call_that_never_ran():
    """A call Claude Code cancelled before it started reached no hook: the replay does not
    check it, so it feeds no loop or error streak."""
    from loopcore.replay import replay_trace
    from loopcore.trace import Step, Trace

    steps = [
        Step("s", 0, "observe", "Read", "/a", {"file_path": "/a"}, None, "too big"),
        Step("s", 0, "observe", "Read", "/b", {"file_path": "/b"}, None,
             "<tool_use_error>Sibling tool call errored</tool_use_error>",
             meta={"not_run": True}),
        Step("s", 1, "observe", "Read", "/b", {"file_path": "/b"}, "text of b"),
    ]  # fmt: skip

    class Spy(loopcore.Guard):
        def __init__(self):
            super().__init__()
            self.checked = []

        def check(self, session, tool, args=None, **kw):
            self.checked.append(args)
            return super().check(session, tool, args, **kw)

    spy = Spy()
    replay_trace(Trace(steps, session="s"), spy)
    assert spy.checked == [{"file_path": "/a"}, {"file_path": "/b"}]


def test_gemini_cli_tool_results_sent_back_as_one_part(tmp_path):
    """The results message's content is a PartListUnion: one Part (an object) is the same echo
    as a list of them."""
    out = "\n".join(f"line {n} of the config" for n in range(60))
    no_echo = _gemini_shell_session(tmp_path / "no-echo.jsonl", [out, out])
    echoed = []
    for rec in (json.loads(x) for x in no_echo.read_text().splitlines()):
        echoed.append(rec)
        if rec.get("type") == "gemini":
            part = rec["toolCalls"][0]["result"][0]
            echoed.append({"id": rec["id"] + "_r", "timestamp": rec["timestamp"], "type": "user",
                           "content": part})  # fmt: skip
    path = tmp_path / "session-2026-11-20T08-00-5e55e55f.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in echoed))
    (t,) = load(path)
    assert [s.after_user for s in t] == [True, False]


def test_openhands_v1_the_run_s_last_finish_is_its_final_submission(tmp_path):
    """OpenHands-CLI trajectories (2026-02, iterative refinement): the FinishObservation that
    answers the run's last call echoes the agent's message and no later call read it, so it
    adds no input tokens; a finish the critic answered with a retry was read back."""
    said = "I listed the folder: it holds a.py and b.py, both as the task asked. " * 4

    def finish(n):
        return [
            {"kind": "ActionEvent", "id": f"a{n}", "source": "agent", "llm_response_id": f"r{n}",
             "tool_name": "finish", "tool_call_id": f"c{n}",
             "action": {"kind": "FinishAction", "message": said}},
            {"kind": "ObservationEvent", "id": f"o{n}", "source": "environment",
             "tool_name": "finish", "tool_call_id": f"c{n}", "action_id": f"a{n}",
             "observation": {"kind": "FinishObservation",
                             "content": [{"type": "text", "text": said}]}},
        ]  # fmt: skip

    retry = {
        "kind": "MessageEvent", "id": "m1", "source": "user",
        "llm_message": {"role": "user", "content": [{"type": "text", "text":
            "The task appears incomplete (iteration 1/3, predicted success likelihood: 37.8%)."}]},
    }  # fmt: skip
    state = {"kind": "ConversationStateUpdateEvent", "id": "s1", "key": "execution_status",
             "value": "finished"}  # fmt: skip
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in [*finish(1), retry, *finish(2), state]))
    first, last = only(path).steps
    assert first.tokens_in > 0 and "final" not in first.meta
    assert last.result == said and last.tokens_in == 0 and last.meta["final"] is True
    assert not last.after_user  # the critic's retry is the run's own text


def _opencode_session(path, tokens, tool="read", args=None):
    """An opencode export: the person's message, then one assistant message of two API calls
    (a `tool` call each), the first with *tokens* on its step-finish."""
    sid = "ses_oc"

    def part(mid, n, **kw):
        return {"id": f"prt_{mid}_{n}", "sessionID": sid, "messageID": mid, **kw}

    def call(mid, n, name, inp, out):
        return part(mid, n, type="tool", callID=f"call_{n}", tool=name,
                    state={"status": "completed", "input": inp, "output": out,
                           "time": {"start": 1, "end": 2}})  # fmt: skip

    # the next call's prompt: the first one's, its output and the result read (60 tokens)
    grown = tokens["input"] + tokens["cache"]["read"] + 8467 + 60
    later = {"input": grown, "output": 40, "reasoning": 0, "cache": {"read": 0, "write": 0},
             "total": grown + 40}  # fmt: skip
    parts = [
        part("m1", 0, type="step-start"),
        call("m1", 1, tool, args or {"filePath": "/w/a.py"}, "x = 1\n" * 40),
        part("m1", 2, type="step-finish", tokens=tokens),
        part("m1", 3, type="step-start"),
        call("m1", 4, "read", {"filePath": "/w/b.py"}, "y = 2\n" * 40),
        part("m1", 5, type="step-finish", tokens=later),
    ]
    doc = {
        "info": {"id": sid, "version": "1.2.16", "title": "t"},
        "messages": [
            {"info": {"id": "m0", "sessionID": sid, "role": "user"},
             "parts": [part("m0", 0, type="text", text="fix it")]},
            {"info": {"id": "m1", "sessionID": sid, "role": "assistant"}, "parts": parts},
        ],
    }  # fmt: skip
    path.write_text(json.dumps(doc))
    return only(path)


def test_opencode_reasoning_inside_output_is_counted_once(tmp_path):
    """opencode 1.2.x (iyaki/reglint Entire checkpoints, github-copilot/gpt-5.2-codex) left the
    reasoning inside `output` and summed `total` without it (2483 + 8467 + 29312 = 40262 with
    6336 reasoning): that call's output is 8467 tokens, not 14803. Since anomalyco/opencode
    #21047 (1.16.2 files) `output` is the visible part and `total` adds the reasoning."""
    old = {"input": 2483, "output": 8467, "reasoning": 6336,
           "cache": {"read": 29312, "write": 0}, "total": 40262}  # fmt: skip
    new = {"input": 2483, "output": 2131, "reasoning": 6336,
           "cache": {"read": 29312, "write": 0}, "total": 40262}  # fmt: skip
    for name, tokens, completion in (("old", old, 8467), ("new", new, 2131 + 6336)):
        first = _opencode_session(tmp_path / f"{name}.json", tokens).steps[0]
        assert not first.tokens_estimated, name
        assert first.tokens_out + first.tokens_turn == completion, name
    # without a total, or with one that adds the reasoning, the two are apart as before
    bare = {k: v for k, v in old.items() if k != "total"}
    first = _opencode_session(tmp_path / "bare.json", bare).steps[0]
    assert first.tokens_out + first.tokens_turn == 8467 + 6336


def test_opencode_apply_patch_names_the_files_of_its_patch_text(tmp_path):
    """opencode's apply_patch takes `patchText` (packages/opencode/src/tool/apply_patch.ts;
    the GPT models' edit tool): it writes the files the patch names, not everything."""
    patch = "*** Begin Patch\n*** Update File: /w/a.py\n@@\n-x = 1\n+x = 2\n*** End Patch"
    tokens = {"input": 100, "output": 50, "reasoning": 0, "cache": {"read": 0, "write": 0},
              "total": 150}  # fmt: skip
    t = _opencode_session(tmp_path / "p.json", tokens, "apply_patch", {"patchText": patch})
    step = t.steps[0]
    assert (step.kind, step.target) == ("mutate", "/w/a.py")
    assert step.write_set == ("/w/a.py",)


def test_opencode_messages_one_per_line_read_as_the_export(tmp_path):
    """Entire 0.4 checkpoints an opencode session as the export's messages, one
    ``{"info", "parts"}`` per line (adrianmg/test-repo ``full.jsonl``, opencode with
    github-copilot/claude-opus-4.6): the same session as the export, named by its sessionID."""
    doc = json.loads((FIX / "opencode_export.json").read_text())
    path = tmp_path / "full.jsonl"
    path.write_text("".join(json.dumps(m) + "\n" for m in doc["messages"]))
    got = only(path)
    want = only(FIX / "opencode_export.json")
    assert got.format == "opencode" and got.session == doc["info"]["id"]
    assert [(s.name, s.args, s.result, s.tokens_in, s.tokens_out) for s in got.steps] == [
        (s.name, s.args, s.result, s.tokens_in, s.tokens_out) for s in want.steps
    ]


def test_entire_condensed_transcript_beside_the_session_copy_is_not_read(tmp_path):
    """Entire 0.8+ writes, beside a checkpoint's ``full.jsonl`` (the session as the agent
    recorded it), ``transcript.jsonl``: its own condensed copy of the same session, one
    ``{"v": 1, "agent", "cli_version", "type", ...}`` line per message (real checkpoints of
    opencode 1.18 sessions). A walk read it too, as an Anthropic conversation of no call:
    two traces for one session and a warning that a trace held nothing."""
    doc = json.loads((FIX / "opencode_export.json").read_text())
    ckpt = tmp_path / "checkpoints" / "5e" / "0a1b2c3d4e" / "0"
    ckpt.mkdir(parents=True)
    (ckpt / "full.jsonl").write_text(json.dumps(doc))
    head = {"v": 1, "agent": "opencode", "cli_version": "0.9.0"}
    lines = [
        {**head, "type": "user", "ts": "2026-07-01T10:00:00.000Z",
         "content": [{"id": "prt_1", "text": "read a.py"}]},
        {**head, "type": "assistant", "ts": "2026-07-01T10:00:02.000Z", "id": "msg_2",
         "input_tokens": 900, "output_tokens": 20,
         "content": [{"type": "text", "text": "Reading it."},
                     {"type": "tool_use", "id": "call_1", "name": "read",
                      "input": {"filePath": "/w/a.py"},
                      "result": {"output": "x = 1\n"}}]},
    ]  # fmt: skip
    (ckpt / "transcript.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    (ckpt / "metadata.json").write_text(json.dumps({"agent": "OpenCode", "session_id": "s"}))
    stats = LoadStats()
    got = list(load(tmp_path / "checkpoints", stats=stats))
    assert [(t.format, t.session) for t in got] == [("opencode", doc["info"]["id"])]
    assert stats.no_steps == []
    want = only(FIX / "opencode_export.json")
    assert [s.to_dict() for s in got[0]] == [s.to_dict() for s in want]


def test_entire_v2_raw_transcript_is_read_and_its_condensed_copy_is_not(tmp_path):
    """Entire's checkpoints v2 (refs ``entire/checkpoints/v2/main`` and ``.../full/current``,
    entireio/skills) keep the session as the agent recorded it in ``<n>/raw_transcript``, a
    file with no extension, and Entire's condensed copy as ``transcript.jsonl``. A walk passed
    the raw copy over (not a trace name): a Codex session there was lost whole, and only the
    condensed copy was read, as an Anthropic conversation of no call."""
    rollout = [
        {"timestamp": "2026-04-21T00:37:03.906Z", "type": "session_meta",
         "payload": {"id": "019dad77-8919-7173-a0d5-61b781415e5a", "cli_version": "0.121.0",
                     "originator": "codex-tui"}},
        {"timestamp": "2026-04-21T00:37:04.041Z", "type": "event_msg",
         "payload": {"type": "user_message", "message": "read a.py"}},
        {"timestamp": "2026-04-21T00:37:12.360Z", "type": "response_item",
         "payload": {"type": "function_call", "name": "exec_command", "call_id": "call_1",
                     "arguments": json.dumps({"cmd": "sed -n '1,80p' a.py"})}},
        {"timestamp": "2026-04-21T00:37:12.445Z", "type": "response_item",
         "payload": {"type": "function_call_output", "call_id": "call_1",
                     "output": "Chunk ID: b855d1\nWall time: 0.0000 seconds\n"
                               "Process exited with code 0\nOriginal token count: 4\n"
                               "Output:\nx = 1\n"}},
    ]  # fmt: skip
    ckpt = tmp_path / "checkpoints" / "01" / "da544acf74" / "0"
    ckpt.mkdir(parents=True)
    (ckpt / "raw_transcript").write_text("".join(json.dumps(r) + "\n" for r in rollout))
    (ckpt / "raw_transcript_hash.txt").write_text("sha256:0\n")
    head = {"v": 1, "agent": "codex", "cli_version": "0.9.0"}
    condensed = [
        {**head, "type": "user", "ts": "2026-04-21T00:37:04.041Z",
         "content": [{"text": "read a.py"}]},
    ]  # fmt: skip
    (ckpt / "transcript.jsonl").write_text("".join(json.dumps(r) + "\n" for r in condensed))
    (ckpt / "metadata.json").write_text(json.dumps({"agent": "Codex", "session_id": "s"}))
    stats = LoadStats()
    got = list(load(tmp_path / "checkpoints", stats=stats))
    assert [(t.format, t.session) for t in got] == [
        ("codex", "019dad77-8919-7173-a0d5-61b781415e5a")
    ]
    assert stats.no_steps == []
    assert [(s.name, s.target, s.result, s.meta.get("returncode")) for s in got[0]] == [
        ("exec_command", "a.py", "x = 1\n", 0)
    ]


def _otlp(path, spans):
    """An OTLP JSON export of *spans*: (span id, start, attributes[, events]) each, events as
    (name, attributes)."""

    def value(v):
        return {"intValue": str(v)} if isinstance(v, int) else {"stringValue": v}

    def attrs_of(attrs):
        return [{"key": k, "value": value(v)} for k, v in attrs.items()]

    out = [
        {"traceId": "t1", "spanId": sid, "name": attrs.get("gen_ai.tool.name", "chat"),
         "startTimeUnixNano": str(start), "attributes": attrs_of(attrs),
         "events": [{"name": n, "attributes": attrs_of(a)} for n, a in (more[0] if more else ())]}
        for sid, start, attrs, *more in spans
    ]  # fmt: skip
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": out}]}]}))
    return only(path)


def test_otel_tool_arguments_where_the_frameworks_keep_them(tmp_path):
    """Spans as the frameworks' own instrumentation writes them (run with scripted models):
    pydantic-ai 1.x (instrumentation version 2) keeps a call's arguments and result in
    ``tool_arguments`` / ``tool_response``, Google ADK's legacy schema in
    ``gcp.vertex.agent.tool_call_args``; ADK opens a ``(merged tools)`` span over each parallel
    batch. A call whose arguments no span recorded is never the same call as another: reading
    b.py was charged as a repeat of reading a.py."""
    body = "line of a.py\n" * 30
    chat = {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 100,
            "gen_ai.usage.output_tokens": 20}  # fmt: skip

    def tool(name, **attrs):
        return {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, **attrs}

    pyd = _otlp(tmp_path / "pyd.json", [
        ("c1", 1, chat),
        ("s1", 2, tool("read_file", tool_arguments='{"path": "a.py"}', tool_response=body)),
        ("c2", 3, chat),
        ("s2", 4, tool("read_file", tool_arguments='{"path": "b.py"}', tool_response="b")),
        ("c3", 5, chat),
        ("s3", 6, tool("read_file", tool_arguments='{"path": "a.py"}', tool_response=body)),
    ])  # fmt: skip
    assert [s.args for s in pyd.steps] == [{"path": "a.py"}, {"path": "b.py"}, {"path": "a.py"}]
    assert pyd.steps[0].result == body
    found = loopcore.analyse_burn(pyd).findings
    assert [(f.kind, f.steps) for f in found] == [("redundant_observation", (2,))]

    adk = _otlp(tmp_path / "adk.json", [
        ("c1", 1, chat),
        ("m1", 2, tool("(merged tools)")),
        ("s1", 3, tool("read_file", **{"gcp.vertex.agent.tool_call_args": '{"path": "a.py"}'})),
        ("s2", 4, tool("read_file", **{"gcp.vertex.agent.tool_call_args": '{"path": "b.py"}'})),
    ])  # fmt: skip
    assert [s.args for s in adk.steps] == [{"path": "a.py"}, {"path": "b.py"}]

    unknown = _otlp(tmp_path / "none.json", [
        ("c1", 1, chat), ("s1", 2, tool("read_file")),
        ("c2", 3, chat), ("s2", 4, tool("read_file")),
    ])  # fmt: skip
    assert loopcore.analyse_burn(unknown).findings == ()


def test_otel_the_last_answer_counts(tmp_path):
    """A model call that issues no tool call (pydantic-ai 2.x, Strands, LangGraph: the final
    answer) is a turn too: its output tokens count, and its text, where
    ``gen_ai.output.messages`` holds it, is the reply."""
    reply = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "done"}],
                         "finish_reason": "stop"}])  # fmt: skip
    t = _otlp(tmp_path / "last.json", [
        ("c1", 1, {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 100,
                   "gen_ai.usage.output_tokens": 20}),
        ("s1", 2, {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "read_file",
                   "gen_ai.tool.call.arguments": '{"path": "a.py"}',
                   "gen_ai.tool.call.result": "x = 1\n"}),
        ("c2", 3, {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 130,
                   "gen_ai.usage.output_tokens": 25, "gen_ai.output.messages": reply}),
    ])  # fmt: skip
    read, answer = t.steps
    assert (answer.kind, answer.text, answer.tokens_out) == ("other", "done", 25)
    assert t.total_tokens == read.tokens_in + 20 + 25


def test_otel_calls_as_strands_openllmetry_pydantic_ai_1_0_and_openinference_write_them(tmp_path):
    """The same run (read a.py, b.py, a.py again) as four instrumentations write it, each read
    to the same three calls and the one repeat: Strands without the latest conventions (the
    arguments and result in the span's gen_ai.tool.message / gen_ai.choice events),
    OpenLLMetry's LangChain instrumentation (LangChain's callback envelope around the
    arguments, a serialized ToolMessage as the result), pydantic-ai 1.0 ("running tool" spans
    with no operation name) and OpenInference (LLM and TOOL span kinds)."""
    body = "x = 1\n" * 30
    files = {"a.py": body, "b.py": "y = 2\n"}
    order = ("a.py", "b.py", "a.py")

    def chat(n):
        return (f"c{n}", 2 * n, {"gen_ai.operation.name": "chat",
                "gen_ai.usage.input_tokens": 100 + 150 * n, "gen_ai.usage.output_tokens": 10})  # fmt: skip

    def strands(n, path):
        events = [("gen_ai.tool.message", {"role": "tool", "content": json.dumps({"path": path})}),
                  ("gen_ai.choice", {"message": json.dumps([{"text": files[path]}])})]  # fmt: skip
        return (f"s{n}", 2 * n + 1, {"gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "read_file", "gen_ai.tool.call.id": f"t{n}"}, events)  # fmt: skip

    def openllmetry(n, path):
        envelope = {
            "input_str": str({"path": path}),
            "tags": ["seq:step:1"],
            "metadata": {"langgraph_step": 2 + 3 * n, "checkpoint_ns": f"tools:{n}"},
            "inputs": {"path": path},
            "kwargs": {"tool_call_id": f"c{n}"},
        }
        message = {
            "lc": 1,
            "type": "constructor",
            "id": ["langchain", "schema", "messages", "ToolMessage"],
            "kwargs": {"content": files[path], "tool_call_id": f"c{n}", "type": "tool"},
        }
        return (f"s{n}", 2 * n + 1, {"gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "read_file", "gen_ai.tool.call.arguments": json.dumps(envelope),
                "gen_ai.tool.call.result": json.dumps({"output": message})})  # fmt: skip

    def pydantic_1_0(n, path):
        return (f"s{n}", 2 * n + 1, {"gen_ai.tool.name": "read_file", "gen_ai.tool.call.id": f"c{n}",
                "tool_arguments": json.dumps({"path": path}), "tool_response": files[path],
                "logfire.msg": "running tool: read_file"})  # fmt: skip

    def oi_chat(n):
        return (f"c{n}", 2 * n, {"openinference.span.kind": "LLM",
                "llm.token_count.prompt": 100 + 150 * n, "llm.token_count.completion": 10})  # fmt: skip

    def openinference(n, path):
        out = json.dumps({"type": "tool", "data": {"content": files[path], "type": "tool"}})
        return (f"s{n}", 2 * n + 1, {"openinference.span.kind": "TOOL", "tool.name": "read_file",
                "input.value": json.dumps({"path": path}), "output.value": out})  # fmt: skip

    for name, tool, model in (
        ("strands", strands, chat),
        ("openllmetry", openllmetry, chat),
        ("pydantic-1.0", pydantic_1_0, chat),
        ("openinference", openinference, oi_chat),
    ):
        spans = [x for n, path in enumerate(order) for x in (model(n), tool(n, path))]
        t = _otlp(tmp_path / f"{name}.json", spans)
        assert [s.args for s in t.steps] == [{"path": p} for p in order], name
        assert [s.result for s in t.steps] == [files[p] for p in order], name
        assert t.steps[0].tokens_out > 0, name
        found = loopcore.analyse_burn(t).findings
        assert [(f.kind, f.steps) for f in found] == [("redundant_observation", (2,))], name


def test_gemini_cli_its_own_acknowledgement_of_binary_content_is_no_turn(tmp_path):
    """After a read of binary content gemini-cli records a gemini message of its own, a thought
    part "Binary content received. Proceeding with analysis." signed
    `skip_thought_signature_validator` (geminiChat.ts), no tokens, no calls: no API call made
    it, so it adds no step and no tokens."""
    path = _gemini_shell_session(tmp_path / "session-b.jsonl", ["ok\n"])
    plain = only(path)
    lines = path.read_text().splitlines()
    ack = {"id": "m-ack", "timestamp": "2026-11-20T08:00:01.000Z", "type": "gemini",
           "content": [{"text": "Binary content received. Proceeding with analysis.",
                        "thought": True, "thoughtSignature": "skip_thought_signature_validator"}]}  # fmt: skip
    path.write_text("\n".join([*lines, json.dumps(ack)]) + "\n")
    t = only(path)
    assert len(t.steps) == len(plain.steps) and t.total_tokens == plain.total_tokens


def test_claude_code_a_forked_session_s_copies_of_its_parent_are_the_parent_s(tmp_path):
    """A session forked from another (``claude --resume ID --fork-session``) starts with copies
    of the parent's records, each with ``forkedFrom: {sessionId, messageUuid}`` and the fork's
    own session id. They are the parent's work: a walk of a folder holding both counts each
    API call once, and the fork's copy of the parent's re-read is no waste of the fork's."""

    def records(sid, tag, fork=None):
        out = [{"type": "user", "uuid": f"{tag}u0", "sessionId": sid,
                "message": {"role": "user", "content": "look at a.py"}}]  # fmt: skip
        for k in range(2):
            out.append({"type": "assistant", "uuid": f"{tag}a{k}", "sessionId": sid,
                        "message": {"id": f"msg_{tag}{k}", "role": "assistant",
                                    "content": [{"type": "tool_use", "id": f"toolu_{tag}{k}",
                                                 "name": "Read",
                                                 "input": {"file_path": "/r/a.py"}}],
                                    "usage": {"input_tokens": 3000 + 900 * k,
                                              "output_tokens": 40}}})  # fmt: skip
            out.append({"type": "user", "uuid": f"{tag}r{k}", "sessionId": sid,
                        "message": {"role": "user", "content": [
                            {"type": "tool_result", "tool_use_id": f"toolu_{tag}{k}",
                             "content": "\n".join(f"line {n}" for n in range(40))}]}})  # fmt: skip
        if fork is not None:
            for r in out:
                r["forkedFrom"] = {"sessionId": fork, "messageUuid": r["uuid"]}
        return out

    parent = records("parent-1", "p")
    copies = [dict(r, sessionId="fork-2") for r in records("fork-2", "p", fork="parent-1")]
    own = [{"type": "user", "uuid": "fu0", "sessionId": "fork-2",
            "message": {"role": "user", "content": "now try another way"}},
           {"type": "assistant", "uuid": "fa0", "sessionId": "fork-2",
            "message": {"id": "msg_f0", "role": "assistant",
                        "content": [{"type": "text", "text": "Trying it."}],
                        "usage": {"input_tokens": 5000, "output_tokens": 30}}}]  # fmt: skip
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "parent-1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in parent))
    (folder / "fork-2.jsonl").write_text("".join(json.dumps(r) + "\n" for r in copies + own))
    (p,) = load(folder / "parent-1.jsonl")
    (f,) = load(folder / "fork-2.jsonl")
    assert [s.name for s in p] == ["Read", "Read"] and loopcore.analyse_burn(p).wasted_tokens > 0
    assert [s.name for s in f] == [""] and f.meta["replayed_records"] == len(copies)
    assert loopcore.analyse_burn(f).wasted_tokens == 0
    assert sum(t.total_tokens for t in load(folder)) == p.total_tokens + f.total_tokens
