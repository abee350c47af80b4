"""Hook events shaped exactly as Claude Code, Codex and Gemini CLI write them on a hook's stdin,
and a driver that runs ``loopcore hook`` on them (in-process, or as real subprocesses).

Field names and shapes follow each harness's published contract:
* Claude Code: the hook input types of the Agent SDK (PreToolUseHookInput, PostToolUseHookInput,
  PostToolUseFailureHookInput): session_id, transcript_path, cwd, permission_mode,
  hook_event_name, tool_name, tool_input, tool_use_id, tool_response / error + is_interrupt, and
  on the post events duration_ms (a subagent's calls add agent_id / agent_type).
* Codex: codex-rs/hooks/schema/generated/{pre,post}-tool-use.command.input.schema.json
  (session_id, turn_id, transcript_path, cwd, hook_event_name, model, permission_mode,
  tool_name, tool_input, tool_use_id, tool_response); shell calls arrive as tool_name "Bash"
  with tool_input {"command": ...}, apply_patch with the patch body as tool_input.command.
* Gemini CLI: packages/core/src/hooks/types.ts (HookInput + BeforeToolInput / AfterToolInput):
  session_id, transcript_path, cwd, hook_event_name, timestamp, tool_name, tool_input,
  tool_response {llmContent, returnDisplay, error?}; no tool call id (an MCP tool's events add
  mcp_context, an aliased call original_request_name; the hook reads neither).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from typing import Any

CWD = "/home/dev/shop"


class Claude:
    def __init__(self, session: str = "5f0c6d0e-claude-session") -> None:
        self.session = session
        self.n = 0

    def _base(self, name: str) -> dict[str, Any]:
        return {
            "session_id": self.session,
            "transcript_path": f"/home/dev/.claude/projects/-home-dev-shop/{self.session}.jsonl",
            "cwd": CWD,
            "permission_mode": "default",
            "hook_event_name": name,
        }

    def pre(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        self.n += 1
        return {
            **self._base("PreToolUse"),
            "tool_name": tool,
            "tool_input": args,
            "tool_use_id": f"toolu_01{self.n:06d}",
        }

    def post(self, tool: str, args: dict[str, Any], response: Any) -> dict[str, Any]:
        return {
            **self._base("PostToolUse"),
            "tool_name": tool,
            "tool_input": args,
            "tool_response": response,
            "tool_use_id": f"toolu_01{self.n:06d}",
            "duration_ms": 41,
        }

    def failure(self, tool: str, args: dict[str, Any], error: str) -> dict[str, Any]:
        return {
            **self._base("PostToolUseFailure"),
            "tool_name": tool,
            "tool_input": args,
            "tool_use_id": f"toolu_01{self.n:06d}",
            "error": error,
            "is_interrupt": False,
            "duration_ms": 1250,
        }

    def other(self, name: str, **fields: Any) -> dict[str, Any]:
        return {**self._base(name), **fields}


class Codex:
    def __init__(self, session: str = "019a7c1e-codex-thread") -> None:
        self.session = session
        self.n = 0

    def _base(self, name: str) -> dict[str, Any]:
        return {
            "session_id": self.session,
            "turn_id": "019a7c1e-turn-3",
            "transcript_path": f"/home/dev/.codex/sessions/2026/12/01/rollout-{self.session}.jsonl",
            "cwd": CWD,
            "hook_event_name": name,
            "model": "gpt-5.1-codex",
            "permission_mode": "default",
        }

    def pre(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        self.n += 1
        return {
            **self._base("PreToolUse"),
            "tool_name": tool,
            "tool_input": args,
            "tool_use_id": f"call_{self.n:04d}",
        }

    def post(self, tool: str, args: dict[str, Any], response: Any) -> dict[str, Any]:
        return {
            **self._base("PostToolUse"),
            "tool_name": tool,
            "tool_input": args,
            "tool_response": response,
            "tool_use_id": f"call_{self.n:04d}",
        }


class Gemini:
    def __init__(self, session: str = "8d9e2f41-gemini-session") -> None:
        self.session = session

    def _base(self, name: str) -> dict[str, Any]:
        return {
            "session_id": self.session,
            "transcript_path": f"/home/dev/.gemini/tmp/3f2a/chats/session-{self.session}.json",
            "cwd": CWD,
            "hook_event_name": name,
            "timestamp": "2026-12-01T07:40:00.000Z",
        }

    def pre(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        return {**self._base("BeforeTool"), "tool_name": tool, "tool_input": args}

    def post(
        self, tool: str, args: dict[str, Any], llm: Any, error: dict | None = None
    ) -> dict[str, Any]:
        response: dict[str, Any] = {
            "llmContent": llm,
            "returnDisplay": llm if isinstance(llm, str) else "done",
        }
        if error is not None:
            response["error"] = error
        return {
            **self._base("AfterTool"),
            "tool_name": tool,
            "tool_input": args,
            "tool_response": response,
        }


def run_inproc(harness: str, event: Any, state: os.PathLike, *flags: str) -> tuple[int, str, str]:
    """``loopcore hook HARNESS --state STATE FLAGS`` with *event* on stdin, in this process."""
    from loopcore import hooks

    raw = event if isinstance(event, bytes) else json.dumps(event).encode()
    out, err = io.StringIO(), io.StringIO()
    rc = hooks.main(
        [harness, "--state", os.fspath(state), *flags],
        stdin=io.BytesIO(raw),
        stdout=out,
        stderr=err,
    )
    return rc, out.getvalue(), err.getvalue()


def hook_env(impl_name: str) -> dict[str, str]:
    from conftest import package_env  # the same loopcore this test run imported

    env = package_env()
    env["LOOPCORE_NO_EXTENSIONS"] = "1" if impl_name == "py" else "0"
    return env


def run_proc(
    harness: str,
    event: Any,
    state: os.PathLike,
    *flags: str,
    impl_name: str = "c",
    timeout: float = 60,
) -> subprocess.CompletedProcess:
    """The same as a harness does it: a fresh ``python -m loopcore.hooks`` process per event."""
    raw = event if isinstance(event, bytes) else json.dumps(event).encode()
    return subprocess.run(
        [sys.executable, "-m", "loopcore.hooks", harness, "--state", os.fspath(state), *flags],
        input=raw,
        capture_output=True,
        env=hook_env(impl_name),
        timeout=timeout,
    )
