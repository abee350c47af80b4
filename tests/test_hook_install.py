"""``loopcore hook install | uninstall``: merged into real-looking settings files, idempotent (H4),
a dry run writes nothing, and uninstall takes back exactly what install added."""

from __future__ import annotations

import io
import json
import subprocess

import pytest
from hook_events import Claude, Codex, Gemini, hook_env

from loopcore import hooks

# Settings files as the harnesses and their users write them (Claude Code and Gemini CLI write
# JSON.stringify(settings, null, 2); the hand-written one below is compact on purpose).
CLAUDE_SETTINGS = {
    "$schema": "https://json.schemastore.org/claude-code-settings.json",
    "permissions": {
        "allow": ["Bash(npm run test:*)", "Bash(git diff:*)"],
        "deny": ["Read(./.env)", "Read(./secrets/**)"],
        "defaultMode": "acceptEdits",
    },
    "env": {"CLAUDE_CODE_ENABLE_TELEMETRY": "0"},
    "hooks": {
        "PostToolUse": [
            {
                "matcher": "Edit|MultiEdit|Write",
                "hooks": [
                    {
                        "type": "command",
                        "command": '"$CLAUDE_PROJECT_DIR"/.claude/hooks/format.sh',
                        "timeout": 30,
                    }
                ],
            }
        ],
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send 'Claude is done'"}]}],
    },
    "model": "claude-sonnet-4-5",
    "includeCoAuthoredBy": False,
    "statusLine": {"type": "command", "command": "~/.claude/statusline.sh — ünïcode"},
}
CODEX_HOOKS = {
    "description": "Team hooks: lint after edits, secret scan before shell",
    "hooks": {
        "SessionStart": [
            {
                "matcher": "startup|resume",
                "hooks": [
                    {
                        "type": "command",
                        "command": "python3 .codex/hooks/session_start.py",
                        "statusMessage": "Loading notes",
                    }
                ],
            }
        ],
        "PreToolUse": [
            {
                "matcher": "^Bash$",
                "hooks": [
                    {
                        "type": "command",
                        "command": "python3 .codex/hooks/secret_scan.py",
                        "timeout": 5,
                    }
                ],
            }
        ],
    },
}
GEMINI_SETTINGS = {
    "general": {"vimMode": True, "checkpointing": {"enabled": True}},
    "ui": {"theme": "GitHub"},
    "mcpServers": {
        "github": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-github"],
            "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "$GITHUB_TOKEN"},
        }
    },
    "hooksConfig": {"enabled": True},
    "hooks": {
        "BeforeTool": [
            {
                "matcher": "write_file|replace",
                "hooks": [
                    {
                        "name": "secret-scan",
                        "type": "command",
                        "command": "$GEMINI_PROJECT_DIR/.gemini/hooks/scan.sh",
                        "timeout": 5000,
                    }
                ],
            }
        ]
    },
}


def _hook(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = hooks.main(list(argv), stdout=out, stderr=err)
    return rc, out.getvalue(), err.getvalue()


def _ours(doc: dict, harness: str) -> list[tuple[str, dict]]:
    return [
        (event, h)
        for event, groups in doc.get("hooks", {}).items()
        if isinstance(groups, list)
        for g in groups
        if isinstance(g, dict)
        for h in g.get("hooks", [])
        if "loopcore" in h.get("command", "") and harness in h["command"]
    ]


CASES = [
    (
        "claude",
        ".claude/settings.json",
        CLAUDE_SETTINGS,
        ["PreToolUse", "PostToolUse", "PostToolUseFailure"],
    ),
    ("codex", ".codex/hooks.json", CODEX_HOOKS, ["PreToolUse", "PostToolUse"]),
    ("gemini", ".gemini/settings.json", GEMINI_SETTINGS, ["BeforeTool", "AfterTool"]),
]


@pytest.mark.parametrize("harness, rel, original, events", CASES)
def test_install_twice_one_entry_uninstall_round_trips(tmp_path, harness, rel, original, events):
    path = tmp_path / rel
    path.parent.mkdir()
    text = json.dumps(original, indent=2, ensure_ascii=False) + "\n"
    path.write_text(text, encoding="utf-8")
    assert _hook("install", harness, "--dir", str(tmp_path))[0] == 0
    first = path.read_text(encoding="utf-8")
    rc, out, _ = _hook("install", harness, "--dir", str(tmp_path))
    assert rc == 0 and "already installed" in out and path.read_text(encoding="utf-8") == first
    doc = json.loads(first)
    ours = _ours(doc, harness)
    assert sorted(e for e, _ in ours) == sorted(events)  # one entry per event
    for key, value in original.items():  # every existing setting kept
        if key != "hooks":
            assert doc[key] == value
    for event, groups in original["hooks"].items():
        assert doc["hooks"][event][: len(groups)] == groups
    for _event, h in ours:
        assert h["type"] == "command"
        assert h["timeout"] == (10000 if harness == "gemini" else 10)
    if harness == "codex":
        assert set(doc) == {"description", "hooks"}  # Codex refuses any other root field
    assert _hook("uninstall", harness, "--dir", str(tmp_path))[0] == 0
    assert path.read_text(encoding="utf-8") == text
    rc, out, _ = _hook("uninstall", harness, "--dir", str(tmp_path))
    assert rc == 0 and "nothing to change" in out and path.read_text(encoding="utf-8") == text


@pytest.mark.parametrize("harness, rel, original, events", CASES)
def test_dry_run_prints_the_change_and_writes_nothing(tmp_path, harness, rel, original, events):
    path = tmp_path / rel
    path.parent.mkdir()
    path.write_text(json.dumps(original, indent=2) + "\n")
    before = path.read_bytes(), path.stat().st_mtime_ns
    rc, out, _ = _hook("install", harness, "--dir", str(tmp_path), "--dry-run")
    assert rc == 0 and "dry run" in out
    assert any(line.startswith("+") and "loopcore" in line for line in out.splitlines())
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before
    rc, out, _ = _hook("install", harness, "--dir", str(tmp_path / "elsewhere"), "--dry-run")
    assert rc == 0 and not (tmp_path / "elsewhere").exists()


def test_reinstall_with_other_options_replaces_in_place(tmp_path):
    assert _hook("install", "claude", "--dir", str(tmp_path))[0] == 0
    assert (
        _hook("install", "claude", "--dir", str(tmp_path), "--fail-closed", "--policy", "cline")[0]
        == 0
    )
    doc = json.loads((tmp_path / ".claude" / "settings.json").read_text())
    ours = _ours(doc, "claude")
    assert len(ours) == 3
    assert all(h["command"].endswith("claude --policy cline --fail-closed") for _, h in ours)


def test_compact_hand_written_file_keeps_its_settings_and_order(tmp_path):
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text(
        '{"model": "opus", "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "say done"}]}]},'
        ' "env": {"A": "1"}}'
    )
    original = json.loads(path.read_text())
    _hook("install", "claude", "--dir", str(tmp_path))
    _hook("uninstall", "claude", "--dir", str(tmp_path))
    after = json.loads(path.read_text())
    assert after == original and list(after) == list(original)


def test_user_scope_paths(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))
    for harness, rel in (
        ("claude", ".claude/settings.json"),
        ("codex", "codex-home/hooks.json"),
        ("gemini", ".gemini/settings.json"),
    ):
        assert _hook("install", harness, "--user")[0] == 0
        assert len(_ours(json.loads((tmp_path / rel).read_text()), harness)) >= 2


def test_settings_with_comments_are_refused_untouched(tmp_path):
    path = tmp_path / ".gemini" / "settings.json"
    path.parent.mkdir()
    text = '{\n  // my theme\n  "ui": {"theme": "GitHub"}\n}\n'
    path.write_text(text)
    rc, _out, err = _hook("install", "gemini", "--dir", str(tmp_path))
    assert (
        rc == 2 and str(path) in err and "nothing was changed" in err and path.read_text() == text
    )


def test_bad_policy_is_refused_at_install(tmp_path):
    bad = tmp_path / "p.toml"
    bad.write_text("window = 0\n")
    rc, _out, err = _hook("install", "claude", "--dir", str(tmp_path), "--policy", str(bad))
    assert rc == 2 and "Policy.window must be a positive int" in err
    assert not (tmp_path / ".claude").exists()


@pytest.mark.parametrize(
    "harness, event",
    [
        ("claude", Claude().pre("Read", {"file_path": "/home/dev/shop/a.py"})),
        ("codex", Codex().pre("Bash", {"command": "ls"})),
        ("gemini", Gemini().pre("read_file", {"absolute_path": "/home/dev/shop/a.py"})),
    ],
)
def test_the_installed_command_runs(tmp_path, impl, harness, event):
    """The command written into the settings is what the harness runs: run it through a shell."""
    _hook("install", harness, "--dir", str(tmp_path), "--state", str(tmp_path / "state"))
    rel = {
        "claude": ".claude/settings.json",
        "codex": ".codex/hooks.json",
        "gemini": ".gemini/settings.json",
    }[harness]
    ((_e, h), *_rest) = _ours(json.loads((tmp_path / rel).read_text()), harness)
    p = subprocess.run(
        h["command"],
        shell=True,
        input=json.dumps(event).encode(),
        capture_output=True,
        env=hook_env(impl.name),
        timeout=60,
    )
    assert p.returncode == 0 and p.stderr == b""
    assert p.stdout == (b"{}\n" if harness == "gemini" else b"")
    assert (tmp_path / "state" / "hooks.sqlite3").is_file()


def test_codex_install_notes_hooks_switched_off(tmp_path):
    (tmp_path / ".codex").mkdir()
    (tmp_path / ".codex" / "config.toml").write_text(
        'model = "gpt-5.1-codex"\n\n[features]\nhooks = false\n'
    )
    rc, _out, err = _hook("install", "codex", "--dir", str(tmp_path))
    assert rc == 0 and "[features] hooks = false" in err
    assert len(_ours(json.loads((tmp_path / ".codex" / "hooks.json").read_text()), "codex")) == 2


# -- settings files in the layouts found in public repositories ----------------------------------
# Each is written here in the exact shape of a kind of file seen in the wild (own text): Claude
# Code settings with no final newline and an agent hook; a dotfiles settings with a Bash
# PreToolUse matcher; a README-style hand-written file with inline arrays; a Windows file (CRLF,
# tabs); a Gemini CLI settings whose "hooks" also holds enabled / disabled / notifications and a
# flat handler; a Codex hooks.json with statusMessage handlers. Install then uninstall must give
# back the very bytes, and install must keep every setting.
REAL_SHAPES = [
    (
        "claude",
        ".claude/settings.json",
        '{\n  "permissions": {\n    "defaultMode": "bypassPermissions",\n    "allow": [\n'
        '      "Bash",\n      "Edit",\n      "mcp__tracker"\n    ]\n  },\n'
        '  "enabledPlugins": {\n    "notes@example-market": true\n  },\n  "hooks": {\n'
        '    "PreCompact": [\n      {\n        "matcher": "auto",\n        "hooks": [\n'
        '          {\n            "type": "agent",\n            "prompt": "Save a short checkpoint'
        ' of the work in progress."\n          }\n        ]\n      }\n    ],\n'
        '    "SessionStart": [\n      {\n        "matcher": "",\n        "hooks": [\n          {\n'
        '            "type": "command",\n            "command": "bash -c \'cat \\"$(ls -t notes/*.md'
        ' | head -1)\\"\'",\n            "timeout": 10000\n          }\n        ]\n      }\n    ]\n'
        "  }\n}",
    ),
    (
        "claude",
        ".claude/settings.json",
        '{\n  "includeCoAuthoredBy": false,\n  "permissions": {\n    "allow": [\n'
        '      "Bash(git diff:*)",\n      "WebFetch(domain:docs.python.org)"\n    ],\n'
        '    "deny": []\n  },\n  "hooks": {\n    "PreToolUse": [\n      {\n'
        '        "matcher": "Bash",\n        "hooks": [\n          {\n'
        '            "type": "command",\n            "command": "~/bin/check-git-add"\n'
        "          }\n        ]\n      }\n    ]\n  }\n}\n",
    ),
    (
        "claude",
        ".claude/settings.json",
        '{\n  "hooks": {\n    "Stop": [{"hooks": [{"type": "command", "command": "say done"}]}],\n'
        '    "Notification": [{"matcher": "permission_prompt", "hooks": [{"type": "command",'
        ' "command": "notify"}]}]\n  },\n  "env": {"DISABLE_TELEMETRY": "1"}\n}\n',
    ),
    (
        "claude",
        ".claude/settings.json",
        '{\r\n\t"model": "opus",\r\n\t"permissions": {\r\n\t\t"allow": [\r\n\t\t\t"Read"\r\n'
        "\t\t]\r\n\t}\r\n}\r\n",
    ),
    (
        "gemini",
        ".gemini/settings.json",
        '{\n  "tools": {\n    "enableHooks": true\n  },\n  "model": {\n'
        '    "skipNextSpeakerCheck": false\n  },\n  "hooks": {\n    "enabled": true,\n'
        '    "disabled": [\n      "keep-me"\n    ],\n    "notifications": [],\n'
        '    "BeforeTool": [\n      {\n        "name": "guard-writes",\n'
        '        "matcher": "write_file|replace|run_shell_command",\n'
        '        "type": "command",\n        "command": "./.gemini/hooks/guard.sh",\n'
        '        "timeout": 15000\n      }\n    ],\n    "SessionStart": [\n      {\n'
        '        "matcher": "startup",\n        "hooks": [\n          {\n'
        '            "name": "greet",\n            "type": "command",\n'
        '            "command": "echo hi",\n            "timeout": 5000\n          }\n'
        "        ]\n      }\n    ]\n  }\n}",
    ),
    (
        "codex",
        ".codex/hooks.json",
        '{\n  "hooks": {\n    "PostToolUse": [\n      {\n        "matcher": "apply_patch|Edit|Write",\n'
        '        "hooks": [\n          {\n            "type": "command",\n'
        '            "command": "\\"$(git rev-parse --show-toplevel)/scripts/fast-gate.sh\\"",\n'
        '            "timeout": 120,\n            "statusMessage": "Running the fast gate"\n'
        '          }\n        ]\n      }\n    ],\n    "Stop": [\n      {\n        "hooks": [\n'
        '          {\n            "type": "command",\n            "command": "make -s stop-gate",\n'
        '            "timeout": 300\n          }\n        ]\n      }\n    ]\n  }\n}\n',
    ),
]


@pytest.mark.parametrize("harness, rel, text", REAL_SHAPES)
def test_real_settings_layouts_round_trip_byte_for_byte(tmp_path, harness, rel, text):
    path = tmp_path / rel
    path.parent.mkdir()
    path.write_bytes(text.encode())
    original = json.loads(text)
    assert _hook("install", harness, "--dir", str(tmp_path))[0] == 0
    installed = path.read_bytes()
    doc = json.loads(installed)
    for key, value in original.items():
        if key != "hooks":
            assert doc[key] == value
    for key, value in original.get("hooks", {}).items():
        if isinstance(value, list):
            assert doc["hooks"][key][: len(value)] == value
        else:
            assert doc["hooks"][key] == value
    ours = _ours(doc, harness)
    assert len(ours) == len(hooks._install._events(harness))
    assert (b"\r\n" in installed) == ("\r\n" in text)  # line endings kept
    assert installed.endswith(b"\n") == text.endswith("\n")
    assert _hook("install", harness, "--dir", str(tmp_path))[0] == 0
    assert path.read_bytes() == installed  # idempotent
    assert _hook("uninstall", harness, "--dir", str(tmp_path))[0] == 0
    assert path.read_bytes() == text.encode()


def test_codex_config_toml_hooks_are_left_alone(tmp_path):
    """Codex also reads [hooks] tables from config.toml: install writes hooks.json only."""
    (tmp_path / ".codex").mkdir()
    toml = (
        'model = "gpt-5.1-codex"\n\n[features]\ncodex_hooks = true\n\n[[hooks.PreToolUse]]\n'
        'matcher = "^Bash$"\n\n[[hooks.PreToolUse.hooks]]\ntype = "command"\n'
        'command = "python3 .codex/hooks/scan.py"\ntimeout = 5\n'
    )
    (tmp_path / ".codex" / "config.toml").write_text(toml)
    rc, _, err = _hook("install", "codex", "--dir", str(tmp_path))
    assert rc == 0 and "note" not in err
    assert (tmp_path / ".codex" / "config.toml").read_text() == toml
    assert len(_ours(json.loads((tmp_path / ".codex" / "hooks.json").read_text()), "codex")) == 2


@pytest.mark.parametrize(
    "settings, says",
    [
        ({"hooksConfig": {"enabled": False}}, "hooksConfig.enabled to false"),
        ({"tools": {"enableHooks": False}}, "tools.enableHooks to false"),
        ({"hooks": {"disabled": ["loopcore"]}}, '"loopcore" in hooks.disabled'),
        ({"hooksConfig": {"enabled": True}}, None),
    ],
)
def test_gemini_install_notes_hooks_switched_off(tmp_path, settings, says):
    (tmp_path / ".gemini").mkdir()
    (tmp_path / ".gemini" / "settings.json").write_text(json.dumps(settings, indent=2) + "\n")
    rc, _, err = _hook("install", "gemini", "--dir", str(tmp_path))
    assert rc == 0
    if says is None:
        assert err == ""
    else:
        assert "note:" in err and says in err
