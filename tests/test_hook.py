"""``loopcore hook claude|codex|gemini``: each harness's contract, driven by events shaped as it sends them."""

from __future__ import annotations

import json

import jsonschema
import pytest
from hook_events import Claude, Codex, Gemini, run_inproc, run_proc
from hypothesis import given, settings
from hypothesis import strategies as st

from loopcore import Guard, Policy, hooks
from loopcore.taxonomy import PROFILES

# -- Codex's published hook schemas ------------------------------------------------------------
# Written from the JSON Schemas Codex generates for its command hooks (openai/codex,
# codex-rs/hooks/schema/generated/{pre,post}-tool-use.command.{input,output}.schema.json, made by
# codex-rs/hooks/src/schema.rs). Every object has additionalProperties: false: Codex rejects a hook
# output with a field it does not know, and then runs the tool. The inputs are the current
# generation (tool_input any JSON, turn_id required, a subagent's agent_id / agent_type optional);
# the outputs below are the generation whose hookEventName is an enum of every event, and
# CODEX_*_OUTPUT_V2 further down the later, stricter one (docs/hooks/codex.md names the commits).

_NULLABLE = {"type": ["string", "null"]}
_MODES = {
    "enum": ["default", "acceptEdits", "plan", "dontAsk", "bypassPermissions"],
    "type": "string",
}

CODEX_PRE_INPUT = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "additionalProperties": False,
    "properties": {
        "agent_id": {"type": "string"},
        "agent_type": {"type": "string"},
        "cwd": {"type": "string"},
        "hook_event_name": {"const": "PreToolUse", "type": "string"},
        "model": {"type": "string"},
        "permission_mode": _MODES,
        "session_id": {"type": "string"},
        "tool_input": True,
        "tool_name": {"type": "string"},
        "tool_use_id": {"type": "string"},
        "transcript_path": _NULLABLE,
        "turn_id": {"type": "string"},
    },
    "required": [
        "cwd",
        "hook_event_name",
        "model",
        "permission_mode",
        "session_id",
        "tool_input",
        "tool_name",
        "tool_use_id",
        "transcript_path",
        "turn_id",
    ],
    "title": "pre-tool-use.command.input",
    "type": "object",
}
CODEX_POST_INPUT = {
    **CODEX_PRE_INPUT,
    "properties": {
        **CODEX_PRE_INPUT["properties"],
        "hook_event_name": {"const": "PostToolUse", "type": "string"},
        "tool_response": True,
    },
    "required": [*CODEX_PRE_INPUT["required"], "tool_response"],
    "title": "post-tool-use.command.input",
}
_UNIVERSAL = {
    "continue": {"default": True, "type": "boolean"},
    "stopReason": {"default": None, "type": "string"},
    "suppressOutput": {"default": False, "type": "boolean"},
    "systemMessage": {"default": None, "type": "string"},
}
CODEX_PRE_OUTPUT = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "additionalProperties": False,
    "definitions": {
        "PreToolUseDecisionWire": {"enum": ["approve", "block"], "type": "string"},
        "PreToolUsePermissionDecisionWire": {"enum": ["allow", "deny", "ask"], "type": "string"},
        "PreToolUseHookSpecificOutputWire": {
            "additionalProperties": False,
            "properties": {
                "additionalContext": {"default": None, "type": "string"},
                "hookEventName": {"const": "PreToolUse", "type": "string"},
                "permissionDecision": {
                    "allOf": [{"$ref": "#/definitions/PreToolUsePermissionDecisionWire"}],
                    "default": None,
                },
                "permissionDecisionReason": {"default": None, "type": "string"},
                "updatedInput": {"default": None},
            },
            "required": ["hookEventName"],
            "type": "object",
        },
    },
    "properties": {
        **_UNIVERSAL,
        "decision": {"allOf": [{"$ref": "#/definitions/PreToolUseDecisionWire"}], "default": None},
        "hookSpecificOutput": {
            "allOf": [{"$ref": "#/definitions/PreToolUseHookSpecificOutputWire"}],
            "default": None,
        },
        "reason": {"default": None, "type": "string"},
    },
    "title": "pre-tool-use.command.output",
    "type": "object",
}
CODEX_POST_OUTPUT = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "additionalProperties": False,
    "definitions": {
        "BlockDecisionWire": {"enum": ["block"], "type": "string"},
        "HookEventNameWire": {
            "enum": [
                "PreToolUse",
                "PermissionRequest",
                "PostToolUse",
                "PreCompact",
                "PostCompact",
                "SessionStart",
                "UserPromptSubmit",
                "Stop",
            ],
            "type": "string",
        },
        "PostToolUseHookSpecificOutputWire": {
            "additionalProperties": False,
            "properties": {
                "additionalContext": {"default": None, "type": "string"},
                "hookEventName": {"$ref": "#/definitions/HookEventNameWire"},
                "updatedMCPToolOutput": {"default": None},
                "updatedToolOutput": {"default": None},
            },
            "required": ["hookEventName"],
            "type": "object",
        },
    },
    "properties": {
        **_UNIVERSAL,
        "decision": {"allOf": [{"$ref": "#/definitions/BlockDecisionWire"}], "default": None},
        "hookSpecificOutput": {
            "allOf": [{"$ref": "#/definitions/PostToolUseHookSpecificOutputWire"}],
            "default": None,
        },
        "reason": {"default": None, "type": "string"},
    },
    "title": "post-tool-use.command.output",
    "type": "object",
}


# The output schemas of a later generation of the same files (openai/codex commit 6fff509b,
# where the PreCompact / PostCompact / SubagentStart hooks appear): hookEventName is a constant
# per event, optional fields are nullable, PreToolUse's permissionDecision is "allow" or "deny"
# only, and if/then rules carry the parser's checks (deny needs a non-blank reason, a reason
# needs a decision, PreToolUse may not set continue, stopReason or suppressOutput). An answer
# must pass both generations: Codex installs of either age read it.
_NULLABLE_STR = {"default": None, "type": ["string", "null"]}
_BLANK_REASON_RULE = {
    "if": {"properties": {"decision": {"const": "block"}}, "required": ["decision"]},
    "then": {
        "properties": {"reason": {"pattern": ".*\\S.*", "type": "string"}},
        "required": ["reason"],
    },
}


def _maybe(ref: str) -> dict:
    return {"anyOf": [{"$ref": f"#/definitions/{ref}"}, {"type": "null"}], "default": None}


def _when(field: str, cond: dict, then: dict) -> dict:
    return {"if": {"properties": {field: cond}, "required": [field]}, "then": then}


CODEX_PRE_OUTPUT_V2 = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "additionalProperties": False,
    "allOf": [_BLANK_REASON_RULE],
    "definitions": {
        "PreToolUseDecisionWire": {"enum": ["block"], "type": "string"},
        "PreToolUseHookSpecificOutputWire": {
            "additionalProperties": False,
            "allOf": [
                _when(
                    "permissionDecision",
                    {"const": "allow"},
                    {
                        "properties": {"updatedInput": {"not": {"type": "null"}}},
                        "required": ["updatedInput"],
                    },
                ),
                _when(
                    "permissionDecision",
                    {"const": "deny"},
                    {
                        "properties": {
                            "permissionDecisionReason": {"pattern": ".*\\S.*", "type": "string"}
                        },
                        "required": ["permissionDecisionReason"],
                    },
                ),
                _when(
                    "updatedInput",
                    {"not": {"type": "null"}},
                    {
                        "properties": {"permissionDecision": {"const": "allow"}},
                        "required": ["permissionDecision"],
                    },
                ),
                _when(
                    "permissionDecisionReason",
                    {"not": {"type": "null"}},
                    {"required": ["permissionDecision"]},
                ),
            ],
            "properties": {
                "additionalContext": _NULLABLE_STR,
                "hookEventName": {"const": "PreToolUse", "type": "string"},
                "permissionDecision": _maybe("PreToolUsePermissionDecisionWire"),
                "permissionDecisionReason": _NULLABLE_STR,
                "updatedInput": {"default": None},
            },
            "required": ["hookEventName"],
            "type": "object",
        },
        "PreToolUsePermissionDecisionWire": {"enum": ["allow", "deny"], "type": "string"},
    },
    "properties": {
        "continue": {"const": True, "default": True, "type": "boolean"},
        "decision": _maybe("PreToolUseDecisionWire"),
        "hookSpecificOutput": _maybe("PreToolUseHookSpecificOutputWire"),
        "reason": _NULLABLE_STR,
        "stopReason": {"default": None, "type": "null"},
        "suppressOutput": {"const": False, "default": False, "type": "boolean"},
        "systemMessage": _NULLABLE_STR,
    },
    "title": "pre-tool-use.command.output",
    "type": "object",
}
CODEX_POST_OUTPUT_V2 = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "additionalProperties": False,
    "allOf": [_BLANK_REASON_RULE],
    "definitions": {
        "BlockDecisionWire": {"enum": ["block"], "type": "string"},
        "PostToolUseHookSpecificOutputWire": {
            "additionalProperties": False,
            "properties": {
                "additionalContext": _NULLABLE_STR,
                "hookEventName": {"const": "PostToolUse", "type": "string"},
                "updatedMCPToolOutput": {"default": None, "type": "null"},
            },
            "required": ["hookEventName"],
            "type": "object",
        },
    },
    "properties": {
        "continue": {"default": True, "type": "boolean"},
        "decision": _maybe("BlockDecisionWire"),
        "hookSpecificOutput": _maybe("PostToolUseHookSpecificOutputWire"),
        "reason": _NULLABLE_STR,
        "stopReason": _NULLABLE_STR,
        "suppressOutput": {"const": False, "default": False, "type": "boolean"},
        "systemMessage": _NULLABLE_STR,
    },
    "title": "post-tool-use.command.output",
    "type": "object",
}


def codex_output_ok(event: dict, stdout: str) -> None:
    """What Codex does with a hook's stdout: empty is fine; else one JSON object of its schema.

    Beyond the schema, Codex's parser (codex-rs/hooks/src/engine/output_parser.rs) rejects
    permissionDecision "allow" without updatedInput, "ask", and "deny" without a reason.
    """
    jsonschema.validate(
        event, CODEX_PRE_INPUT if event["hook_event_name"] == "PreToolUse" else CODEX_POST_INPUT
    )
    if not stdout.strip():
        return
    doc = json.loads(stdout)
    pre = event["hook_event_name"] == "PreToolUse"
    jsonschema.validate(doc, CODEX_PRE_OUTPUT if pre else CODEX_POST_OUTPUT)
    jsonschema.validate(doc, CODEX_PRE_OUTPUT_V2 if pre else CODEX_POST_OUTPUT_V2)
    hso = doc.get("hookSpecificOutput") or {}
    assert hso.get("permissionDecision") in (None, "deny")
    if hso.get("permissionDecision") == "deny":
        assert hso["permissionDecisionReason"].strip()
    assert "reason" not in doc and "decision" not in doc


@pytest.fixture
def state(tmp_path, impl, monkeypatch):
    monkeypatch.setattr(hooks, "_IMPLEMENTATION", impl.name)
    return tmp_path / "state"


def _todo(i: int = 0) -> dict:
    return {
        "todos": [
            {
                "content": f"Fix the failing checkout test, attempt {i}",
                "status": "in_progress",
                "activeForm": "Fixing the failing checkout test",
            }
        ]
    }


# -- Claude Code -------------------------------------------------------------------------------


def test_claude_allow_prints_nothing(state):
    c = Claude()
    rc, out, err = run_inproc(
        "claude", c.pre("Read", {"file_path": "/home/dev/shop/app.py"}), state
    )
    assert (rc, out, err) == (0, "", "")


def test_claude_warn_and_block_answer_in_its_contract_and_match_a_guard(state, impl):
    """50 TodoWrite calls (the todo-list loop): the hook answers what one in-process guard decides."""
    c = Claude()
    ref = Guard(Policy.default(), implementation=impl.name)
    seen = {"allow": 0, "warn": 0, "block": 0}
    for i in range(55):
        args = _todo(i)
        ev = c.pre("TodoWrite", args)
        d = ref.check(c.session, "TodoWrite", args, kind="other", call_id=ev["tool_use_id"])
        rc, out, err = run_inproc("claude", ev, state)
        assert rc == 0 and err == ""
        seen[d.action] += 1
        if d.action == "allow":
            assert out == ""
        elif d.action == "warn":
            assert json.loads(out) == {
                "hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "additionalContext": d.message,
                }
            }
        else:
            assert json.loads(out) == {
                "hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": "deny",
                    "permissionDecisionReason": d.message,
                }
            }
            assert d.message.startswith("BLOCKED: TodoWrite has been called")
            continue  # a denied call never runs: no PostToolUse
        resp = {"oldTodos": [], "newTodos": args["todos"]}
        ref.record(c.session, "TodoWrite", args, resp, kind="other", call_id=ev["tool_use_id"])
        assert run_inproc("claude", c.post("TodoWrite", args, resp), state) == (0, "", "")
    assert seen["warn"] and seen["block"]


def test_claude_read_edit_read_knows_the_tools_through_the_profile(state):
    """Read twice with nothing between is a redundant observation; Read, Edit, Read is not."""
    c = Claude()
    path = "/home/dev/shop/cart.py"
    read = {"file_path": path}
    body = {
        "type": "text",
        "file": {
            "filePath": path,
            "content": "def total(items):\n    return 0\n",
            "numLines": 2,
            "startLine": 1,
            "totalLines": 2,
        },
    }
    assert run_inproc("claude", c.pre("Read", read), state)[1] == ""
    run_inproc("claude", c.post("Read", read, body), state)
    _rc, out, _err = run_inproc("claude", c.pre("Read", read), state)
    assert json.loads(out)["hookSpecificOutput"]["additionalContext"].startswith(
        "NOTE: this repeats an earlier"
    )
    run_inproc("claude", c.post("Read", read, body), state)
    edit = {
        "file_path": path,
        "old_string": "return 0",
        "new_string": "return sum(items)",
        "replace_all": False,
    }
    assert run_inproc("claude", c.pre("Edit", edit), state)[1] == ""
    run_inproc(
        "claude",
        c.post(
            "Edit",
            edit,
            {"filePath": path, "oldString": "return 0", "newString": "return sum(items)"},
        ),
        state,
    )
    assert run_inproc("claude", c.pre("Read", read), state)[1] == ""


def test_claude_post_tool_use_failure_records_the_error(state):
    """The same Bash call failing the same way: error_streak warns at 3 and blocks at 5."""
    c = Claude()
    cmd = {"command": "npm test -- checkout", "description": "Run the checkout tests"}
    answers = []
    for _ in range(6):
        _rc, out, _err = run_inproc("claude", c.pre("Bash", cmd), state)
        answers.append(json.loads(out)["hookSpecificOutput"] if out else None)
        if answers[-1] and answers[-1].get("permissionDecision") == "deny":
            break
        assert run_inproc(
            "claude", c.failure("Bash", cmd, "Command exited with non-zero status code 1"), state
        ) == (0, "", "")
    kinds = [
        "allow" if a is None else ("block" if "permissionDecision" in a else "warn")
        for a in answers
    ]
    assert kinds[:3] == ["allow", "allow", "allow"] and "warn" in kinds and kinds[-1] == "block"
    assert "failed the same way" in answers[-1]["permissionDecisionReason"]


# -- Codex -------------------------------------------------------------------------------------


def test_codex_answers_validate_against_its_published_schemas(state):
    x = Codex()
    cmd = {"command": "git status --short"}
    kinds = set()
    for _ in range(25):
        ev = x.pre("Bash", cmd)
        rc, out, err = run_inproc("codex", ev, state)
        assert rc == 0 and err == ""
        codex_output_ok(ev, out)
        kinds.add(
            "allow"
            if not out
            else json.loads(out)["hookSpecificOutput"].get("permissionDecision", "warn")
        )
        if "deny" in kinds:
            break
        post = x.post("Bash", cmd, " M src/cart.py\n")
        rc, out, err = run_inproc("codex", post, state)
        codex_output_ok(post, out)
        assert out == ""
    assert kinds == {"allow", "warn", "deny"}


def test_codex_schema_check_catches_an_extra_field():
    ev = Codex().pre("Bash", {"command": "ls"})
    with pytest.raises(jsonschema.ValidationError):
        codex_output_ok(
            ev,
            json.dumps(
                {
                    "hookSpecificOutput": {
                        "hookEventName": "PreToolUse",
                        "additionalContext": "x",
                        "detector": "cycle",
                    }
                }
            ),
        )
    with pytest.raises(jsonschema.ValidationError):
        codex_output_ok({**ev, "tool_call_id": "x"}, "")
    # The later schemas' own rules: no "ask", no blank deny reason, no continue:false on PreToolUse.
    for bad in (
        {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "ask"}},
        {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": "  ",
            }
        },
        {"continue": False, "stopReason": "loop"},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, CODEX_PRE_OUTPUT_V2)
    post = Codex().post("Bash", {"command": "ls"}, "a.py\n")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(
            {"hookSpecificOutput": {"hookEventName": "PreToolUse"}}, CODEX_POST_OUTPUT_V2
        )
    codex_output_ok(post, json.dumps({"hookSpecificOutput": {"hookEventName": "PostToolUse"}}))


def test_codex_apply_patch_is_a_mutation_of_its_file(state):
    """Codex sends the patch body as tool_input.command: the file it edits is not re-read redundantly."""
    x = Codex()
    cat = {"command": "cat src/cart.py"}
    patch = {
        "command": "*** Begin Patch\n*** Update File: src/cart.py\n@@\n-    return 0\n+    return sum(items)\n"
        "*** End Patch\n"
    }
    for ev in (x.pre("Bash", cat), x.post("Bash", cat, "def total(items):\n    return 0\n")):
        run_inproc("codex", ev, state)
    ev = x.pre("apply_patch", patch)
    rc, out, _ = run_inproc("codex", ev, state)
    codex_output_ok(ev, out)
    assert out == ""
    run_inproc(
        "codex",
        x.post("apply_patch", patch, "Success. Updated the following files:\nM src/cart.py\n"),
        state,
    )
    ev = x.pre("Bash", cat)
    rc, out, _ = run_inproc("codex", ev, state)
    assert out == ""  # the patch changed src/cart.py: reading it again is new information
    run_inproc("codex", x.post("Bash", cat, "def total(items):\n    return sum(items)\n"), state)
    ev = x.pre("Bash", cat)
    rc, out, _ = run_inproc("codex", ev, state)
    codex_output_ok(ev, out)
    assert "NOTE: this repeats" in json.loads(out)["hookSpecificOutput"]["additionalContext"]


# -- Gemini CLI --------------------------------------------------------------------------------


def test_gemini_block_is_decision_deny_with_reason_and_stdout_is_always_json(state):
    g = Gemini()
    cmd = {"command": "npm run build", "description": "Build the app"}
    outs = []
    for _ in range(40):
        rc, out, err = run_inproc("gemini", g.pre("run_shell_command", cmd), state)
        assert rc == 0 and err == ""
        doc = json.loads(out)
        outs.append(doc)
        if doc.get("decision") == "deny":
            break
        rc, out, err = run_inproc(
            "gemini",
            g.post(
                "run_shell_command",
                cmd,
                "Command: npm run build\nError: (none)\nExit Code: 1\nStdout: error TS2304\n",
            ),
            state,
        )
        assert isinstance(json.loads(out), dict)
    assert outs[0] == {}
    assert set(outs[-1]) == {"decision", "reason"} and outs[-1]["reason"].startswith("BLOCKED:")


def test_gemini_warning_arrives_on_the_calls_after_tool(state):
    g = Gemini()
    args = {"absolute_path": "/home/dev/shop/README.md"}
    run_inproc("gemini", g.pre("read_file", args), state)
    run_inproc("gemini", g.post("read_file", args, "# Shop\n"), state)
    rc, out, err = run_inproc("gemini", g.pre("read_file", args), state)
    assert json.loads(out) == {}  # BeforeTool has no context field
    rc, out, err = run_inproc("gemini", g.post("read_file", args, "# Shop\n"), state)
    doc = json.loads(out)
    assert doc["hookSpecificOutput"]["hookEventName"] == "AfterTool"
    assert doc["hookSpecificOutput"]["additionalContext"].startswith("NOTE: this repeats")
    rc, out, err = run_inproc("gemini", g.post("read_file", args, "# Shop\n"), state)
    assert json.loads(out) == {}  # delivered once


def test_gemini_after_tool_error_is_recorded_as_an_error(state):
    g = Gemini()
    args = {"file_path": "/home/dev/shop/missing.py"}
    kinds = []
    for _ in range(6):
        _rc, out, _err = run_inproc("gemini", g.pre("read_file", args), state)
        kinds.append(json.loads(out).get("decision", "allow"))
        if kinds[-1] == "deny":
            break
        run_inproc(
            "gemini",
            g.post(
                "read_file",
                args,
                "File not found",
                error={
                    "message": "File not found: /home/dev/shop/missing.py",
                    "type": "file_not_found",
                },
            ),
            state,
        )
    assert kinds[-1] == "deny"  # error_streak blocks the 5th identical failure


# -- never in the way --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"not json",
        b"[1, 2]",
        b'{"hook_event_name": "PRE"}',
        b'{"hook_event_name": "PRE", "session_id": "s", "tool_name": "Read"}',
        b'{"hook_event_name": "PRE", "session_id": "", "tool_name": "Read", "tool_input": {}}',
        b'{"session_id": "s", "tool_name": "Read", "tool_input": {}}',
    ],
)
@pytest.mark.parametrize("harness", ["claude", "codex", "gemini"])
def test_malformed_event_allows_with_one_line(state, harness, raw):
    raw = raw.replace(b"PRE", b"BeforeTool" if harness == "gemini" else b"PreToolUse")
    rc, out, err = run_inproc(harness, raw, state)
    assert rc == 0
    assert out == ("{}\n" if harness == "gemini" else "")
    assert err.count("\n") == 1 and "malformed event" in err and "allowing" in err


@pytest.mark.parametrize("harness", ["claude", "codex", "gemini"])
def test_malformed_event_denies_when_fail_closed(state, harness):
    rc, out, err = run_inproc(harness, b"{oops", state, "--fail-closed")
    doc = json.loads(out)
    if harness == "gemini":
        assert doc["decision"] == "deny" and "fail-closed" in doc["reason"]
    else:
        assert doc["hookSpecificOutput"]["permissionDecision"] == "deny"
        if harness == "codex":
            codex_output_ok(Codex().pre("Bash", {"command": "ls"}), out)
    assert err.count("\n") == 1 and "denying" in err


def test_unknown_event_name_allows(state):
    rc, out, err = run_inproc("claude", Claude().other("SessionStart", source="startup"), state)
    assert (rc, out) == (0, "") and "'SessionStart' is not an event this hook handles" in err
    rc, out, err = run_inproc("gemini", Gemini()._base("BeforeModel"), state)
    assert out == "{}\n" and err.count("\n") == 1


def test_usage_error_still_answers(state):
    from hook_events import run_inproc as _run

    rc, out, err = _run("gemini", Gemini().pre("glob", {"pattern": "*.py"}), state, "--bogus")
    assert rc == 0 and out == "{}\n" and "usage error" in err


# -- policies ----------------------------------------------------------------------------------


def test_policy_preset_by_name(state):
    c = Claude()
    args = {"command": "pytest -x tests/test_cart.py", "description": "Run the cart tests"}
    outs = []
    for _ in range(3):
        outs.append(run_inproc("claude", c.pre("Bash", args), state, "--policy", "opencode")[1])
        run_inproc(
            "claude",
            c.post(
                "Bash",
                args,
                {"stdout": "1 failed", "stderr": "", "interrupted": False, "isImage": False},
            ),
            state,
            "--policy",
            "opencode",
        )
    assert (
        outs[:2] == ["", ""]
        and json.loads(outs[2])["hookSpecificOutput"]["permissionDecision"] == "deny"
    )


@pytest.mark.parametrize("suffix", [".toml", ".json"])
def test_policy_file(state, tmp_path, suffix):
    p = tmp_path / f"strict{suffix}"
    if suffix == ".toml":
        p.write_text('preset = "cline"\nrepeat_warn = 2\nrepeat_block = 3\n')
    else:
        p.write_text(json.dumps({"preset": "cline", "repeat_warn": 2, "repeat_block": 3}))
    pol = hooks.load_policy(str(p))
    assert (pol.name, pol.repeat_warn, pol.repeat_block, pol.consecutive_repeat) == (
        "strict",
        2,
        3,
        True,
    )
    c = Claude()
    args = {"pattern": "def total", "path": "/home/dev/shop"}
    outs = []
    for _ in range(3):
        outs.append(run_inproc("claude", c.pre("Grep", args), state, "--policy", str(p))[1])
        run_inproc(
            "claude",
            c.post(
                "Grep",
                args,
                {"mode": "files_with_matches", "filenames": ["cart.py"], "numFiles": 1},
            ),
            state,
            "--policy",
            str(p),
        )
    assert outs[0] == "" and "additionalContext" in outs[1] and "deny" in outs[2]


@pytest.mark.parametrize(
    "body, words",
    [
        ("generic_warn = 30\ngeneric_block = 20\n", "warn threshold (30) must be below"),
        ("windw = 3\n", "unknown Policy fields: windw"),
        ('preset = "nope"\n', "unknown policy preset 'nope'"),
        ("window = [\n", "not valid TOML"),
    ],
)
def test_bad_policy_file_is_a_clear_error(state, tmp_path, body, words):
    p = tmp_path / "bad.toml"
    p.write_text(body)
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        hooks.load_policy(str(p))
    rc, out, err = run_inproc(
        "claude", Claude().pre("Read", {"file_path": "/a"}), state, "--policy", str(p)
    )
    assert (rc, out) == (0, "") and words in err and str(p) in err and err.count("\n") == 1
    with pytest.raises(ValueError, match="unknown policy preset"):
        hooks.load_policy("strictest")


# -- real processes, both twins ------------------------------------------------------------------


def test_real_hook_processes_answer_like_in_process(tmp_path, impl):
    c = Claude()
    args = {"file_path": "/home/dev/shop/cart.py"}
    body = {"type": "text", "file": {"filePath": args["file_path"], "content": "x = 1\n"}}
    state = tmp_path / "state"
    assert run_proc("claude", c.pre("Read", args), state, impl_name=impl.name).stdout == b""
    assert (
        run_proc("claude", c.post("Read", args, body), state, impl_name=impl.name).returncode == 0
    )
    p = run_proc("claude", c.pre("Read", args), state, impl_name=impl.name)
    assert p.returncode == 0 and p.stderr == b""
    assert json.loads(p.stdout)["hookSpecificOutput"]["additionalContext"].startswith("NOTE:")
    g = Gemini()
    p = run_proc("gemini", g.pre("read_file", {"absolute_path": "/x"}), state, impl_name=impl.name)
    assert p.stdout == b"{}\n"


# -- the hook is the guard -----------------------------------------------------------------------

_CALLS = [
    ("Read", {"file_path": "/home/dev/shop/cart.py"}),
    ("Read", {"file_path": "/home/dev/shop/tax.py"}),
    (
        "Edit",
        {
            "file_path": "/home/dev/shop/cart.py",
            "old_string": "0",
            "new_string": "1",
            "replace_all": False,
        },
    ),
    ("Bash", {"command": "pytest -q tests/test_cart.py", "description": "Run the cart tests"}),
    ("Bash", {"command": "cat /home/dev/shop/tax.py", "description": "Show tax.py"}),
    ("Grep", {"pattern": "def total", "path": "/home/dev/shop"}),
]
_OUTCOMES = [
    {"stdout": "1 failed", "stderr": "", "interrupted": False, "isImage": False},
    {"stdout": "2 passed", "stderr": "", "interrupted": False, "isImage": False},
    None,
]


@settings(max_examples=15, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, len(_CALLS) - 1), st.integers(0, len(_OUTCOMES) - 1)),
        min_size=1,
        max_size=40,
    )
)
def test_the_hook_decides_what_a_guard_fed_the_same_calls_decides(tmp_path_factory, impl, steps):
    """Random Claude Code sessions: every answer equals one in-process guard's decision."""
    hooks._IMPLEMENTATION = impl.name
    try:
        state = tmp_path_factory.mktemp("state")
        c = Claude()
        ref = Guard(Policy.default(), implementation=impl.name)
        prof = PROFILES["claude-code"]
        for i, o in steps:
            tool, args = _CALLS[i]
            kind, target = prof.classify(tool, args)
            ev = c.pre(tool, args)
            d = ref.check(
                c.session, tool, args, kind=kind, target=target, call_id=ev["tool_use_id"]
            )
            _rc, out, _err = run_inproc("claude", ev, state)
            hso = json.loads(out)["hookSpecificOutput"] if out else None
            got = "allow" if hso is None else ("block" if "permissionDecision" in hso else "warn")
            assert got == d.action
            if hso is not None:
                assert (
                    hso.get("permissionDecisionReason", hso.get("additionalContext")) == d.message
                )
            if d.action == "block":
                continue
            if _OUTCOMES[o] is None:
                ref.record(
                    c.session,
                    tool,
                    args,
                    error="Command exited with non-zero status code 1",
                    kind=kind,
                    target=target,
                    call_id=ev["tool_use_id"],
                )
                run_inproc(
                    "claude",
                    c.failure(tool, args, "Command exited with non-zero status code 1"),
                    state,
                )
            else:
                ref.record(
                    c.session,
                    tool,
                    args,
                    _OUTCOMES[o],
                    kind=kind,
                    target=target,
                    call_id=ev["tool_use_id"],
                )
                run_inproc("claude", c.post(tool, args, _OUTCOMES[o]), state)
    finally:
        hooks._IMPLEMENTATION = None
