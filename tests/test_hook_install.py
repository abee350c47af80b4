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
        for g in groups
        for h in g["hooks"]
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
