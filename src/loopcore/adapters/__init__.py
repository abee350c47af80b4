"""Trace adapters: ``load(source)`` turns recorded agent runs into :class:`~loopcore.Trace` objects.

Each format lives in its own module (``FORMATS`` lists their names); ``detect_format`` picks
one from the parsed content, never from the file name alone. A source is read once: bytes,
inflated when the content is gzip or Zstandard, one orjson parse (JSON Lines line by line), then the adapter
walks the parsed objects. See docs/formats.md for every format, the token rule and errors.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import orjson

from .._json import loads
from .._native_flag import NO_EXTENSIONS
from ..hashing import canonical_hash
from ..taxonomy.profiles import get_profile
from ..trace import Trace
from . import (
    anthropic,
    claude_code,
    cline,
    codex,
    gemini_cli,
    loopcore_steps,
    mini_swe_agent,
    openai_chat,
    openai_responses,
    opencode,
    openhands,
    otel,
    swe_agent,
    tau_bench,
)
from ._base import LoadStats, TraceFormatError, estimate_tokens
from ._io import (
    COMPRESSED_SUFFIXES,
    Ctx,
    Parsed,
    inflate_bytes,
    max_file_bytes,
    parse_bytes,
    plain_name,
    read_bytes,
)

__all__ = [
    "FORMATS",
    "LoadStats",
    "TraceFormatError",
    "detect_format",
    "estimate_tokens",
    "format_table",
    "load",
]

_MODULES = {
    m.NAME: m
    for m in (
        loopcore_steps,
        openai_chat,
        openai_responses,
        codex,
        anthropic,
        claude_code,
        otel,
        mini_swe_agent,
        swe_agent,
        tau_bench,
        openhands,
        gemini_cli,
        opencode,
        cline,
    )
}
#: The format names ``load(..., format=...)`` accepts (besides ``"auto"``).
FORMATS: tuple[str, ...] = tuple(_MODULES)
_ALIASES = {
    "jsonl": "loopcore",
    "steps": "loopcore",
    "openai": "openai-chat",
    "chat": "openai-chat",
    "responses": "openai-responses",
    "codex-cli": "codex",
    "rollout": "codex",
    "claude": "claude-code",
    "otlp": "otel",
    "opentelemetry": "otel",
    "mini-swe": "mini-swe-agent",
    "sweagent": "swe-agent",
    "tau": "tau-bench",
    "gemini": "gemini-cli",
    "roo": "cline",
    "roo-code": "cline",
    "kilo": "cline",
    "openhands-v1": "openhands",
}
#: What each format reads, and the public samples (harness version, repository, path, commit) it was
#: checked against; docs/formats.md has the same table. ``loopcore formats`` prints it.
_READS = {
    "loopcore": "loopcore's own step JSONL",
    "openai-chat": "OpenAI chat messages (tool_calls / role tool)",
    "openai-responses": "OpenAI Responses items and Response objects (built-in tool items too)",
    "codex": "Codex CLI rollouts (~/.codex/sessions/**/rollout-*.jsonl, .jsonl.zst; legacy and paginated)",
    "anthropic": "Anthropic Messages (tool_use / tool_result, server and MCP tools)",
    "claude-code": "Claude Code session JSONL and sub-agent files, stream-json",
    "otel": "OpenTelemetry GenAI spans (OTLP JSON)",
    "mini-swe-agent": "mini-swe-agent .traj.json (1.x text actions, 2.x tool calls)",
    "swe-agent": "SWE-agent .traj",
    "tau-bench": "tau-bench result files and tau2-bench results (simulations)",
    "openhands": "OpenHands V1 event folders / exports (ACP agents' calls too), V0 event streams, resolver and eval output.jsonl",
    "gemini-cli": "gemini-cli chat recordings (session-*.jsonl and the older .json), /chat save checkpoints",
    "opencode": "opencode's SQLite store (opencode.db), storage folders (session / message / part JSON) and `opencode export` files",
    "cline": "Cline / Roo Code task history (api_conversation_history.json, ui_messages.json)",
}


def _c(harness: str, version: str, repo: str, path: str, commit: str) -> dict[str, str]:
    return {"harness": harness, "version": version, "repo": repo, "path": path, "commit": commit}


_PYDANTIC_AI = "4fda38988f2939fa6ea9cdefcf120693e10ef491"
_AGENT_SESSIONS = "651e854f4dbfaaa1161ffc9015045921ed30cf12"

_CHECKED: dict[str, list[dict[str, str]]] = {
    "openai-chat": [
        _c(
            "Chat Completions API (pydantic-ai 2.33, openai SDK >= 3)",
            "recorded requests: the last request's messages, the response's message with usage",
            "pydantic/pydantic-ai",
            "tests/models/cassettes/test_openai/*.yaml (56 cassettes)",
            _PYDANTIC_AI,
        ),
    ],
    "openai-responses": [
        _c(
            "Responses API (pydantic-ai 2.33, openai SDK >= 3)",
            "recorded requests: the last request's input with its Response",
            "pydantic/pydantic-ai",
            "tests/models/cassettes/test_openai_responses/*.yaml (39 cassettes)",
            _PYDANTIC_AI,
        ),
    ],
    "anthropic": [
        _c(
            "Messages API (pydantic-ai 2.33, anthropic SDK >= 1)",
            "recorded requests: the last request's messages with the response beside them",
            "pydantic/pydantic-ai",
            "tests/models/cassettes/test_anthropic/*.yaml (84 cassettes)",
            _PYDANTIC_AI,
        ),
    ],
    "otel": [
        _c(
            "opentelemetry-proto 1.41.1 MessageToJson, GenAI semconv 0.62b1",
            "OTLP JSON export request",
            "benchflow-ai/benchflow",
            "tests/trajectories/test_ir_from_otel.py (PRODUCER_PAYLOAD_JSON)",
            "796e436dd4710331a04d47bd1fc22487408d9322",
        ),
    ],
    "codex": [
        _c(
            "Codex Desktop",
            "0.128.0-alpha.1 (an Entire checkpoints v2 raw_transcript)",
            "entireio/skills",
            "e5/6c94a68b1e/0/raw_transcript (ref entire/checkpoints/v2/full/current)",
            "8470f7e25c1ce236c7af1213c577eb155aa1f3f0",
        ),
        _c(
            "Codex CLI",
            "0.151-0.159 paginated rollouts (completed turn items; no user_message or "
            "mcp_tool_call_end event)",
            "openai/codex",
            "codex-rs/protocol/src/items.rs, codex-rs/rollout/src/policy.rs",
            "01baf68dc7a70edaae9f24bbb01accaf18e9bf52",
        ),
        _c(
            "Codex CLI",
            "0.155-0.156 code mode (exec programs of one tools.exec_command call, quoted lines "
            "of a real 0.156.1 rollout)",
            "scottcrosby-securebine/doctrine-skills",
            "hooks/dctr-seat.codex.selftest.mjs",
            "6463978ca035d16260888973882b2564543eaa7b",
        ),
        _c(
            "Codex CLI",
            "compressed rollouts (rollout-*.jsonl.zst, the plain file read first)",
            "openai/codex",
            "codex-rs/rollout/src/compression.rs",
            "005c818463ca9b15c779df6f4fb6ef96c1441cbc",
        ),
        _c(
            "Codex CLI",
            "rollout format of 0.5x-0.6x (session_meta / response_item / event_msg)",
            "daaain/claude-code-log",
            "test/test_data/codex/sessions/2026/01/02/rollout-2026-01-02T03-04-05-11111111-1111-4111-8111-111111111111.jsonl",
            "774584014df7879465279911f363b5fab9eb37ad",
        ),
        _c(
            "Codex CLI",
            "0.146.0 (world_state records, agent_message items)",
            "jazzyalex/agent-sessions",
            "Resources/Fixtures/stage0/agents/codex/small.jsonl",
            _AGENT_SESSIONS,
        ),
        _c(
            "Codex CLI",
            "0.58.0, gpt-5.1-codex (reasoning sent back with the transcript)",
            "AcidicSoil/codex-session-view",
            ".sample_session/rollout-2025-11-17T15-30-28-019a93b9-f380-7600-98ff-940e6b99603c.jsonl",
            "23314e081365810b6c593aebd60a4ccb2149befb",
        ),
        _c(
            "Codex Desktop",
            "0.142.0-alpha.6 (write_stdin polls of running commands, commit and push twice)",
            "blackgirlbytes/entire-token-costs-benchmark-tests",
            "a7/1156299398/0/full.jsonl (branch entire/checkpoints/v1)",
            "8b54d1f6fa9864882a3eb58dce378b7010923501",
        ),
        _c(
            "Codex Desktop",
            "0.140.0-alpha.2 (MCP tools named by namespace)",
            "blackgirlbytes/planetfall-seed-signalkit",
            "18/e55e8a9e52/8/full.jsonl (branch entire/checkpoints/v1)",
            "ce27f2853445102365565b05bcf34383fc61fe10",
        ),
        _c(
            "Codex Desktop",
            "0.140.0-alpha.19 (web_search_call without a call id, tool_search)",
            "blackgirlbytes/planetfall-seed-signalkit",
            "a7/b0dc5dfa2b/6/full.jsonl (branch entire/checkpoints/v1)",
            "9f27ce06c092ccae0255b09df84dbdaada9e0622",
        ),
        _c(
            "Codex Desktop",
            "0.145.0-alpha.18 (multi-agent tools: wait_agent, send_message redacted by Entire)",
            "entireio/entire-graph",
            "03/0f3d39319d/0/full.jsonl (branch entire/checkpoints/v1)",
            "7789048c1f7b7d311939f8021a5572699d598676",
        ),
        _c(
            "Codex CLI",
            "0.118.0 (Command: before Chunk ID, open_page with no url, records glued on a line)",
            "entireio/git-sync",
            "00/0e2d11c70b/1/full.jsonl, 07/ebffc93812/0/full.jsonl (branch entire/checkpoints/v1)",
            "8e24a4e9214edf84e753675e5c3ebe0f60e15264",
        ),
    ],
    "claude-code": [
        _c(
            "Claude Code",
            "1.0.x session JSONL",
            "daaain/claude-code-log",
            "test/test_data/representative_messages.jsonl",
            "a641071a154f041b96e9b83ccd42d2f92eaa321a",
        ),
        _c(
            "Claude Code",
            "2.0.46 inline sidechain",
            "daaain/claude-code-log",
            "test/test_data/sidechain_integrated.jsonl",
            "579edc0fc04a09fc3df17aed7fb5cdb4d4766565",
        ),
        _c(
            "Claude Code",
            "2.1.x sub-agent file",
            "daaain/claude-code-log",
            "test/test_data/minimal_showcase/55550000-0000-4000-8000-000000000001/subagents/agent-showcol1.jsonl",
            "b079f75baabfc07b3ba401643a79e162b18482b0",
        ),
        _c(
            "Claude Code",
            "2.1.x session and sub-agent files",
            "jazzyalex/agent-sessions",
            "Resources/Fixtures/stage0/agents/claude/small.jsonl, schema_drift.jsonl, subagent/**",
            _AGENT_SESSIONS,
        ),
        _c(
            "Claude Code",
            "2.1.72 sub-agent records in progress records",
            "acabrera04/Harmony",
            "7f/4c09e7f4d8/0/full.jsonl (branch entire/checkpoints/v1)",
            "67f0e8b064eb9ddb8f421c4eb6f7468606af6763",
        ),
        _c(
            "Claude Code",
            "2.1.101 advisor passes in usage.iterations, a result before its call",
            "acabrera04/Harmony",
            "llm-logs/backend/04-14-pr341-review.jsonl (branch avanish-logs-final)",
            "544aa1fad99ef8c2937ded93d68dd04c4342a455",
        ),
        _c(
            "Claude Code",
            "2.1.181 (claude-desktop chapter marks)",
            "blackgirlbytes/entire-token-costs-benchmark-tests",
            "cb/190e483db3/0/full.jsonl (branch entire/checkpoints/v1)",
            "8b54d1f6fa9864882a3eb58dce378b7010923501",
        ),
        _c(
            "Claude Code",
            "2.1.170 (Agent runs whose records are only in their own files, Skill)",
            "blackgirlbytes/planetfall-seed-signalkit",
            "07/d253ca52d8/4/full.jsonl (branch entire/checkpoints/v1)",
            "4d252bba14b242f26abae0bd6f6cbf081f818378",
        ),
        _c(
            "Claude Code",
            "2.1.177 (ToolSearch, the task list tools)",
            "blackgirlbytes/planetfall-seed-signalkit",
            "47/c7e9ab56d1/1/full.jsonl (branch entire/checkpoints/v1)",
            "e71980b22342e2e505ef6c50db128fd31b277c32",
        ),
        _c(
            "Claude Code",
            "2.1.239 (thinking_tokens in output_tokens_details)",
            "0-uddeshya-0/Recognition",
            "0/full.jsonl",
            "038f989dd4cca89fb26f9d40cb94d6df9079f44d",
        ),
        _c(
            "Claude Code",
            "2.1.216 sdk-py (StructuredOutput, a prompt in a queue-operation record)",
            "1curafu/Fitcheck",
            "0/full.jsonl",
            "005bcbd9cbc9824b8c7419c3a41192255134d167",
        ),
        _c(
            "Claude Code",
            "2.1.280 claude-desktop sub-agent file (attachment records, their rendered text)",
            "DiscourseGraphs/discourse-graph",
            "tasks/toolu_011FYnCL3C2Dd69KQkMu6rSC/agent-a2a7a6dcefc68a528.jsonl",
            "ed280507fde13bd23ca9a069cf2d1c5e14b7e1dc",
        ),
    ],
    "mini-swe-agent": [
        _c(
            "mini-swe-agent",
            "2.x (trajectory_format mini-swe-agent-1.1)",
            "SWE-agent/mini-swe-agent",
            "output/deepseek_chat_test_1-100/**, output/deepseek_reasoner_dev/** (refs/pull/816/head)",
            "e5e0fbca1c60561bde25fa473b78717aa4b3f9ec",
        ),
        _c(
            "mini-swe-agent",
            "1.x text actions",
            "gruckion/mini-swe-agent",
            "swebench_results/20251118_gemini-3-pro-74pct/trajs/**",
            "d12a71affd95403b036b2bdbd827349b77bfffb9",
        ),
        _c(
            "mini-swe-agent",
            "2.4.6 text-based models (extra.actions, FormatError answers)",
            "SWE-agent/mini-swe-agent",
            "src/minisweagent/models/litellm_textbased_model.py, models/utils/actions_text.py, agents/default.py",
            "a83fcae82d2a08f0ee0c688f9d137b3566c097f8",
        ),
    ],
    "swe-agent": [
        _c(
            "SWE-agent",
            "1.x demonstrations",
            "SWE-agent/SWE-agent",
            "trajectories/demonstrations/**/*.traj",
            "3ea751c087f32b16e039a2233dd6eefecef325d5",
        ),
        _c(
            "SWE-agent",
            "0.x test trajectories (text actions, function calling)",
            "SWE-agent/SWE-agent",
            "tests/test_data/trajectories/**/*.traj",
            "3ea751c087f32b16e039a2233dd6eefecef325d5",
        ),
    ],
    "tau-bench": [
        _c(
            "tau-bench",
            "historical trajectories",
            "sierra-research/tau-bench",
            "historical_trajectories/gpt-4o-airline.json",
            "59a200c6d575d595120f1cb70fea53cef0632f6b",
        ),
        _c(
            "tau2-bench",
            "c7b9f7c7 (gemini-2.5-flash, airline; four agents of a fork)",
            "jitrc/tau2-enhanced",
            "samples/logs/airline_gemini2_5_flash_10tasks_2t*.json",
            "4b23a7edc99ca836665784f6d6c0d4d0c79b49ba",
        ),
        _c(
            "tau2-bench",
            "9275b50c and later (gpt-4.1-mini; mock, airline, retail, telecom)",
            "yoheinakajima/activegraph-tau2-bench",
            "runs/*/tau2_output/results.json, runs/*/tau2_artifacts/results.json",
            "2d8e2c2518523e13f981c5fa6f1a1547cae33400",
        ),
    ],
    "openhands": [
        _c(
            "OpenHands SDK (ACP agents)",
            "ACPToolCallEvent, one per update of a call",
            "OpenHands/software-agent-sdk",
            "openhands-sdk/openhands/sdk/event/acp_tool_call.py",
            "dc38cf4893973b8665e952d29c9e7ecfb1f16811",
        ),
        _c(
            "OpenHands SDK",
            "1.43 (V1 events)",
            "OpenHands/software-agent-sdk",
            "tests/sdk/conversation/goal/fixtures/events.jsonl",
            "611629e6999ad398dc49c761721eefe18d5e6bd9",
        ),
        _c(
            "OpenHands",
            "0.2x V0 trajectory",
            "All-Hands-AI/OpenHands",
            "tests/runtime/trajs/basic.json",
            "156d0686c46aafb0fa9d291da6421fb6f64dddc0",
        ),
        _c(
            "OpenHands",
            "V0 evaluation output.jsonl",
            "All-Hands-AI/OpenHands",
            "evaluation/benchmarks/multi_swe_bench/examples/output.jsonl",
            "156d0686c46aafb0fa9d291da6421fb6f64dddc0",
        ),
        _c(
            "openhands-resolver",
            "2024 resolver output",
            "All-Hands-AI/OpenHands",
            "tests/unit/resolver/mock_output/output.jsonl",
            "156d0686c46aafb0fa9d291da6421fb6f64dddc0",
        ),
    ],
    "gemini-cli": [
        _c(
            "gemini-cli",
            "0.56.0-nightly (JSONL recording: writer and loader)",
            "google-gemini/gemini-cli",
            "packages/core/src/services/chatRecordingService.ts, chatRecordingTypes.ts",
            "5411f113cafae26161b4969b0237b8e1e024e2c2",
        ),
        _c(
            "gemini-cli",
            "JSONL recording (0.40-era) and JSON sessions",
            "jazzyalex/agent-sessions",
            "Resources/Fixtures/stage0/agents/gemini/jsonl_v040.jsonl, small.json, large.json",
            _AGENT_SESSIONS,
        ),
        _c(
            "gemini-cli",
            "0.34-era JSON recordings (calls on a message of their own after a hook's warning)",
            "BrianV1981/aim",
            "[AUTO_REPAIR]/archive/raw/session-2026-03-*.json (36 sessions, sub-agents among them)",
            "100c7a70ca2412506d06f36a66328047baf07f2f",
        ),
        _c(
            "gemini-cli",
            "JSON recordings of benchmark runs, gemini-3.1-pro and gemini-3-flash",
            "BrianV1981/aim",
            "docs/benchmarks/raw_logs/*.json, docs/benchmarks/render_benchmark/aim_session.json",
            "30136f01dc2b5b6ce7207b063f799fa2c6b60705",
        ),
        _c(
            "gemini-cli",
            "JSON recording, gemini-2.5-pro (calls right after the prompt, zero token counts)",
            "yoavf/ai-sessions",
            "examples/gemini-cli-pomodoro-timer.json",
            "398dc8802808703db64c58029ef1924f5d31c31f",
        ),
    ],
    "opencode": [
        _c(
            "opencode",
            "1.2+ SQLite store (opencode.db: session, message, part tables)",
            "anomalyco/opencode",
            "packages/opencode/src/session/session.sql.ts",
            "063e8306d9895af9bdd175306cfa4fa3291fd83a",
        ),
        _c(
            "opencode",
            "1.x part schema",
            "anomalyco/opencode",
            "packages/opencode/src/session/message-v2.ts",
            "007a9409bafea06d6b9084ff1f6d1fe9f5e3a803",
        ),
        _c(
            "opencode",
            "1.3.17 storage folder",
            "jazzyalex/agent-sessions",
            "Resources/Fixtures/stage0/agents/opencode/storage_v2/**, storage_legacy/**",
            _AGENT_SESSIONS,
        ),
    ],
    "cline": [
        _c(
            "Cline",
            "3.x task history (native tool calls, metrics)",
            "mike4567/MRA04242026",
            "api_conversation_history.json",
            "764491384379e43f9b25ab332f4d000b7727788b",
        ),
        _c(
            "Cline",
            "4.1.13 storage message and tool names",
            "cline/cline",
            "apps/vscode/src/shared/messages/content.ts, apps/vscode/src/shared/tools.ts",
            "21cb8d2525bcedf1f4b6890b27a74a14fe7451e4",
        ),
        _c(
            "Cline",
            "4.x SDK session messages file (<id>.messages.json), its tools",
            "cline/cline",
            "sdk/packages/llms/src/providers/types/messages.ts, sdk/packages/core/src/tools/schemas.ts",
            "341a5d60516a22f0859c1e3054259cff6d5f3e5a",
        ),
        _c(
            "Roo Code",
            "3.52 native edit tools (file_path)",
            "RooCodeInc/Roo-Code",
            "src/core/prompts/tools/native-tools/search_replace.ts",
            "342cc696b562f0ff322b3cf828ce9176e90d3aeb",
        ),
    ],
}


def format_table() -> list[dict[str, Any]]:
    """One row per format (in FORMATS order): ``name``, ``reads`` and ``checked`` (the public
    samples it was checked against: ``harness``, ``version``, ``repo``, ``path``, ``commit``)."""
    return [
        {"name": n, "reads": _READS.get(n, ""), "checked": list(_CHECKED.get(n, ()))}
        for n in FORMATS
    ]


# Files a folder walk reads; anything else (README.md, .yaml, .tsv) is not looked at.
_TRACE_EXTS = (".json", ".jsonl", ".ndjson", ".traj")
#: The session's own copy in an Entire checkpoints v2 folder (``refs/entire/checkpoints/v2/
#: full/current``: ``<xx>/<id>/<n>/raw_transcript``, beside ``raw_transcript_hash.txt``).
_ENTIRE_RAW = "raw_transcript"
_EVENT_FILE = re.compile(r"^\d+\.json$")
# OpenHands V1 (SDK) event files: event-<index, 5+ digits>-<event id>.json, in any folder.
_V1_EVENT_FILE = re.compile(r"^event-(\d{5,})-[0-9a-fA-F-]{8,}\.json$")


def _resolve_format(fmt: str) -> str:
    if not isinstance(fmt, str):
        raise TypeError(f"format must be a string; got {type(fmt).__name__}")
    key = fmt.strip().lower().replace("_", "-")
    if key == "auto" or key in _MODULES:
        return key
    if key in _ALIASES:
        return _ALIASES[key]
    raise ValueError(f"unknown trace format {fmt!r}; known formats: auto, {', '.join(FORMATS)}")


def _detect_doc(doc: Any) -> str | None:
    """The format of a parsed document, or None."""
    try:
        return _sniff(doc)
    except (AttributeError, KeyError, TypeError, ValueError, IndexError):
        # A field of an unexpected type (an unhashable "type", a "messages" that is a
        # number...): no format claims such content.
        return None


def _sniff(doc: Any) -> str | None:
    if isinstance(doc, dict):
        if otel.sniff(doc):
            return otel.NAME
        if mini_swe_agent.sniff(doc):
            return mini_swe_agent.NAME
        if swe_agent.sniff(doc):
            return swe_agent.NAME
        if tau_bench.sniff(doc):
            return tau_bench.NAME
        if gemini_cli.sniff(doc):
            return gemini_cli.NAME
        if openhands.sniff(doc):
            return openhands.NAME
        if opencode.sniff(doc):
            return opencode.NAME
        if codex.sniff([doc]):
            return codex.NAME
        if openai_responses.sniff([doc]):
            return openai_responses.NAME
        if claude_code.sniff([doc]):
            return claude_code.NAME
        if cline.sniff_sdk(doc):
            return cline.NAME
        msgs = doc.get("messages")
        if isinstance(msgs, list):
            if anthropic.sniff(msgs) or anthropic.sniff_request(doc):
                return anthropic.NAME
            if openai_chat.sniff(msgs) or not msgs:
                return openai_chat.NAME
        if isinstance(doc.get("steps"), list) or loopcore_steps.sniff([doc]):
            return loopcore_steps.NAME
        return None
    if isinstance(doc, list):
        if not doc:
            return None
        if otel.sniff(doc):
            return otel.NAME
        if tau_bench.sniff(doc):
            return tau_bench.NAME
        if claude_code.sniff(doc):
            return claude_code.NAME
        if codex.sniff(doc):
            return codex.NAME
        if gemini_cli.sniff(doc):
            return gemini_cli.NAME
        if openai_responses.sniff(doc):
            return openai_responses.NAME
        if openhands.sniff(doc):
            return openhands.NAME
        if opencode.sniff(doc):
            return opencode.NAME
        if cline.sniff(doc):
            return cline.NAME
        if anthropic.sniff(doc):
            return anthropic.NAME
        if loopcore_steps.sniff(doc):
            return loopcore_steps.NAME
        if openai_chat.sniff(doc):
            return openai_chat.NAME
    return None


def _unknown(path: str | None) -> TraceFormatError:
    return TraceFormatError(
        f"cannot tell the trace format; known formats: {', '.join(FORMATS)} (pass format=... to choose one)",
        path,
    )


def detect_format(source: Any) -> str:
    """The format name ``load`` would choose for a file path or a parsed object; raises
    TraceFormatError (listing FORMATS) when none fits, ValueError for a folder."""
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if os.path.isdir(path):
            raise ValueError(
                f"{path} is a folder: formats are detected per file (load() does that)"
            )
        parsed = parse_bytes(read_bytes(path), path)
        if parsed.empty:
            return loopcore_steps.NAME
        fmt = _detect_doc(parsed.doc)
        if fmt is None:
            raise _unknown(path)
        return fmt
    fmt = _detect_doc(source)
    if fmt is None:
        if isinstance(source, list) and not source:
            return loopcore_steps.NAME
        raise _unknown(None)
    return fmt


class StoreFolder(str):
    """A folder that is one unit of work of its own (an opencode store), as :func:`_walk` yields
    it: a path (a ``str``), read by the format's own store reader."""

    __slots__ = ()


class Chunked(str):
    """A transcript Entire (a tool that keeps agent sessions on a git branch) split in pieces
    because it was over its 50 MB blob size: ``full.jsonl`` then ``full.jsonl.001``,
    ``full.jsonl.002``... beside it. The path (a ``str``) is the first piece's; the pieces are
    one source, read together (see :func:`chunk_files`)."""

    __slots__ = ()


def chunk_files(path: str) -> list[str]:
    """The pieces of the transcript at *path* in order, *path* first: ``path.001``,
    ``path.002``... as long as they follow on (Entire numbers them from 1, ``%03d``, without
    gaps). Just ``[path]`` when it has none."""
    out = [path]
    while os.path.isfile(f"{path}.{len(out):03d}"):
        out.append(f"{path}.{len(out):03d}")
    return out


class StoreBesideDb(StoreFolder):
    """An opencode storage folder whose opencode data folder also holds a database
    (``opencode.db``, a channel's ``opencode-<channel>.db``), both read by the same walk:
    opencode 1.2 migrated the storage's sessions into the database and left the files, so the
    sessions a database holds are read from it alone."""

    __slots__ = ()


def _gemini_recordings(chats: str) -> bool:
    """Whether gemini-cli's ``chats/`` folder holds chat recordings (``session-*.json[l]``)."""
    try:
        return any(plain_name(f).startswith("session-") for f in os.listdir(chats))
    except OSError:
        return False


def _side_outputs(root: str, d: str) -> bool:
    """Whether *d* (a folder in *root*) is Claude Code's ``<sessionId>/tool-results/`` beside
    ``<sessionId>.jsonl``: the outputs too big for the transcript, saved whole (a structured
    one as JSON, which could pass for a trace). The transcript holds what the model saw of
    them; read as traces they would count tokens twice."""
    if d != "tool-results":
        return False
    base = os.path.normpath(root)
    return any(os.path.isfile(base + ".jsonl" + s) for s in ("", *COMPRESSED_SUFFIXES))


def _dbs_in(folder: str) -> list[str]:
    """The opencode databases a folder holds, by name (each channel's: ``opencode.db``,
    ``opencode-<channel>.db``, Kilo's ``kilo.db`` ...)."""
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    return [
        os.path.join(folder, f)
        for f in names
        if opencode.is_db_name(f) and os.path.isfile(os.path.join(folder, f))
    ]


def _walk(folder: str, passed: list[str] | None = None) -> Iterator[str | list[str]]:
    """Trace files under *folder*, sorted; a folder of OpenHands event files (V0 ``events/N.json``,
    V1 ``event-NNNNN-<id>.json``) comes back as one list (one stream), an opencode store as a
    :class:`StoreFolder`. Entire's checkpoint copies of one session that another copy holds
    whole (:func:`_session_copies`), and the files of an OpenHands evaluation output whose
    every run another file of the folder holds (:func:`_run_copies`), are passed over and
    added to *passed*."""
    items = list(_walk_tree(folder))
    copies = _session_copies(items)
    copies |= _run_copies(items, copies)
    for item in items:
        if isinstance(item, str) and item in copies:
            if passed is not None:
                passed.append(str(item))
        else:
            yield item


# Entire (a tool that keeps agent sessions on a git branch, ``entire/checkpoints/v1``) writes
# each checkpoint's sessions to ``<xx>/<checkpoint>/<n>/full.jsonl``, and a session checkpointed
# again is written whole again: the copy of the later checkpoint starts with every byte of the
# earlier one (354 of the 355 copies whose blobs a snapshot of entireio/git-sync holds; 97
# sessions in 673 copies). Read as traces, a session's calls and waste counted once per
# checkpoint. The copies are found by their bytes, not by the session id of the metadata
# beside them, which names one session in more than one way (``<uuid>`` and
# ``<date>-<uuid>`` in entireio/cli's checkpoints). Entire's early checkpoints hold only the
# part of the session since the one before: no byte in common, each read as a trace.
_ENTIRE_TRANSCRIPT = "full.jsonl"
_COMPARE_BLOCK = 1 << 20
_FIRST_LINE = 1 << 16
# a copy is compared with at most this many longer copies kept (the longest first): a session
# branches seldom, and a walk of many copies alike at their start stays linear
_MAX_KEPT = 16


def _first_line(path: str) -> bytes | None:
    """The first line of the Entire transcript at *path* (at most ``_FIRST_LINE`` bytes), the
    key its copies share; None for another file or one that cannot be read."""
    if os.path.basename(path) not in (_ENTIRE_TRANSCRIPT, _ENTIRE_RAW):
        return None
    return _peek(path, _FIRST_LINE, line=True) or None


def _peek(path: str, limit: int, *, line: bool = False) -> bytes | None:
    """The first *limit* bytes of the regular file at *path* (its first line, at most that,
    with *line*), or None when it is not a regular file or cannot be read. The walk's looks for
    copies never open a FIFO or a device: a FIFO would wait for a writer (the load refuses
    such a file, with its own message)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        with open(path, "rb") as fh:
            return fh.readline(limit) if line else fh.read(limit)
    except OSError:
        return None


def _pieces(path: str) -> list[str]:
    return chunk_files(path) if isinstance(path, Chunked) else [path]


def _stream_size(path: str) -> int:
    try:
        return sum(os.path.getsize(p) for p in _pieces(path))
    except OSError:
        return -1


def _blocks(path: str) -> Iterator[bytes]:
    for piece in _pieces(path):
        with open(piece, "rb") as fh:
            while block := fh.read(_COMPARE_BLOCK):
                yield block


def _starts_with(whole: str, part: str, size: int) -> bool:
    """Whether the *size* bytes of the transcript *part* are the first bytes of *whole*."""
    try:
        a, b = _blocks(part), _blocks(whole)
        abuf = bbuf = b""
        done = 0
        while done < size:
            if not abuf:
                abuf = next(a, b"")
                if not abuf:
                    return False
            if not bbuf:
                bbuf = next(b, b"")
                if not bbuf:
                    return False
            n = min(len(abuf), len(bbuf))
            if abuf[:n] != bbuf[:n]:
                return False
            abuf, bbuf, done = abuf[n:], bbuf[n:], done + n
        return True
    except OSError:
        return False


def _session_copies(items: list[Any]) -> set[str]:
    """The transcripts among *items* that are Entire copies of a session another of them holds
    whole: every byte of the copy the start of a longer (or, the same size, an earlier) one.
    A copy that differs anywhere is read as its own trace: nothing it holds is lost."""
    groups: dict[bytes, list[tuple[int, int, str]]] = {}
    for order, item in enumerate(items):
        if isinstance(item, str) and not isinstance(item, StoreFolder):
            key = _first_line(item)
            if key is not None:
                groups.setdefault(key, []).append((-_stream_size(item), order, item))
    copies: set[str] = set()
    for members in groups.values():
        if len(members) < 2:
            continue
        members.sort()  # the largest first; of equal sizes, the first walked
        kept: list[tuple[int, str]] = []
        for neg, _, path in members:
            size = -neg
            if size > 0 and any(
                big >= size and _starts_with(whole, path, size) for big, whole in kept[:_MAX_KEPT]
            ):
                copies.add(path)
            else:
                kept.append((size, path))
    return copies


# An OpenHands evaluation writes each run more than once into its output folder: a line of
# ``output.jsonl`` (``output.critic_attempt_N.jsonl`` for each attempt of a critic's retries),
# and the openagentsafety harness also ``traj_<instance id>.json`` (the history) and
# ``state_<instance id>.json`` (``{"instance_id", "history", "num_events"}``): the same events
# three or four times (OpenHands/benchmarks, 45 runs of 2025-10-30 in 137 files). Read as
# traces, every run's calls, tokens and waste counted once per file. The copies are found by
# the events, not by the names: a file is passed over when each run it holds is, event for
# event, the start of (or the same as) a run of a file of the folder read; a run that differs
# in one event is read as its own trace.
_RUN_EXTS = (".json", ".jsonl")
_RUN_PEEK = 1 << 16
_RUN_MARKS = (b'"history"', b'"instance_id"')
_EVENT_MARKS = (b'"kind"', b'"action"', b'"observation"')


def _may_hold_runs(path: str) -> bool:
    """Whether the start of the file at *path* looks like OpenHands runs (an evaluation record,
    a history, a bare list of events): a cheap look before a file is parsed to compare it."""
    head = _peek(path, _RUN_PEEK)
    if head is None:
        return False
    if any(m in head for m in _RUN_MARKS):
        return True
    return head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] == b"[" and any(m in head for m in _EVENT_MARKS)


def _event_key(event: Any) -> bytes:
    """A digest of an event's JSON (keys sorted): what two copies of one event share, kept
    small so a folder of long runs is compared without holding them twice."""
    return hashlib.blake2b(
        orjson.dumps(event, option=orjson.OPT_SORT_KEYS), digest_size=16
    ).digest()


def _runs_in(path: str) -> list[tuple[str | None, list[bytes]]] | None:
    """The OpenHands runs of the file at *path*, ``(id, [each event's digest])``;
    None when it is no OpenHands file, or one read with a warning (a bad line, a last line cut
    short), which is read as it is so the warning is not lost."""
    try:
        parsed = parse_bytes(read_bytes(path), path)
    except TraceFormatError:
        return None
    if parsed.empty or parsed.bad or parsed.incomplete is not None:
        return None
    if _detect_doc(parsed.doc) != openhands.NAME:
        return None
    runs = openhands.runs_of(parsed.doc)
    if not runs:
        return None
    try:
        return [(rid, [_event_key(e) for e in events]) for rid, events in runs]
    except (orjson.JSONEncodeError, TypeError):
        return None


def _holds(kept: tuple[str | None, list[bytes]], run: tuple[str | None, list[bytes]]) -> bool:
    """Whether the run *kept* holds *run*: the same run (ids, when both have one, alike), and
    every event of *run* the same, in the same place."""
    (kid, kev), (rid, rev) = kept, run
    return (
        (kid is None or rid is None or kid == rid)
        and len(kev) >= len(rev)
        and kev[: len(rev)] == rev
    )


def _run_copies(items: list[Any], passed: set[str]) -> set[str]:
    """The files among *items* (those in *passed* aside) each run of which another file of the
    same folder holds: the files that hold the most events are kept first (of equal ones, the
    one whose runs have ids, then the first walked); a file is passed over when every run in
    it is held by a run of a file kept. A run with no event is held only by a run of the same
    id (the instance's record written again before anything ran)."""
    folders: dict[str, list[tuple[int, str]]] = {}
    for order, item in enumerate(items):
        if (
            isinstance(item, str)
            and not isinstance(item, (StoreFolder, Chunked))
            and item not in passed
            and os.path.basename(item).endswith(_RUN_EXTS)
        ):
            folders.setdefault(os.path.dirname(item), []).append((order, item))
    copies: set[str] = set()
    for members in folders.values():
        if len(members) < 2:
            continue
        looked = [(order, path) for order, path in members if _may_hold_runs(path)]
        if len(looked) < 2:
            continue
        files = []
        for order, path in looked:
            runs = _runs_in(path)
            if runs is not None:
                total = sum(len(ev) for _, ev in runs)
                named = sum(rid is not None for rid, _ in runs)
                files.append((-total, -named, order, path, runs))
        if len(files) < 2:
            continue
        files.sort(key=lambda f: f[:3])
        by_start: dict[bytes, list[tuple[str | None, list[bytes]]]] = {}
        ids: set[str] = set()
        for _, _, _, path, runs in files:
            if all(
                any(_holds(k, (rid, ev)) for k in by_start.get(ev[0], [])[:_MAX_KEPT])
                if ev
                else rid is not None and rid in ids
                for rid, ev in runs
            ):
                copies.add(path)
                continue
            for rid, ev in runs:
                if rid is not None:
                    ids.add(rid)
                if ev:
                    by_start.setdefault(ev[0], []).append((rid, ev))
    return copies


def _walk_tree(folder: str) -> Iterator[str | list[str]]:
    top = os.path.normpath(folder)
    for root, dirs, files in os.walk(folder):
        if opencode.is_store(root):
            # opencode's storage: session / message / part files that only make sense together
            dirs[:] = []
            parent = os.path.dirname(os.path.normpath(root))
            if (
                os.path.normpath(root) != top
                and os.path.commonpath([top, parent]) == top
                and _dbs_in(parent)
            ):
                yield StoreBesideDb(root)  # the walk reads the database beside it too
            else:
                yield StoreFolder(root)
            continue
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not _side_outputs(root, d))
        present = set(files)
        recorded = "chats" in dirs and _gemini_recordings(os.path.join(root, "chats"))
        names = sorted(
            f
            for f in files
            if (
                not f.startswith(".")
                and plain_name(f).endswith(_TRACE_EXTS)
                # Codex keeps a rollout as .jsonl or, once compressed, as .jsonl.zst, and
                # reads the plain file when both exist (mid-compression): one trace, read once
                and not (f.endswith(".zst") and f[:-4] in present)
                # gemini-cli, resuming a session recorded as session-*.json (0.38 and
                # before), copies it into session-*.jsonl and appends there, leaving the
                # .json: the .jsonl holds it all, read once
                and not (f.startswith("session-") and f.endswith(".json") and f + "l" in present)
                # a gemini-cli /chat save checkpoint beside the project's recordings is a copy
                # of a recorded conversation: read, its calls would count twice
                and not (f.startswith("checkpoint-") and f.endswith(".json") and recorded)
                # Entire (0.8+) writes its condensed transcript of a checkpointed session
                # beside the session's own copy: full.jsonl (v2: raw_transcript) holds it all
                and not (
                    f == "transcript.jsonl" and ("full.jsonl" in present or _ENTIRE_RAW in present)
                )
            )
            or opencode.is_db_name(f)  # opencode 1.2+ keeps its sessions in SQLite
            # Entire's checkpoints v2 keep the session as the agent recorded it in a file
            # with no extension: passed over, every session of such a checkpoint was lost
            or f == _ENTIRE_RAW
        )
        if (
            os.path.basename(root) == "events"
            and names
            and all(_EVENT_FILE.match(f) for f in names)
        ):
            yield [
                os.path.join(root, f) for f in sorted(names, key=lambda f: int(f.split(".", 1)[0]))
            ]
            continue
        if names and all(_V1_EVENT_FILE.match(f) for f in names):
            yield [
                os.path.join(root, f)
                for f in sorted(names, key=lambda f: int(_V1_EVENT_FILE.match(f).group(1)))  # type: ignore[union-attr]
            ]
            continue
        for f in names:
            # a transcript Entire split in pieces: the first with the others, one source
            path = os.path.join(root, f)
            yield Chunked(path) if f + ".001" in present else path


def _parse_one(
    path: str | None,
    parsed: Parsed,
    fmt: str,
    keep_going: bool,
    stats: LoadStats | None,
    profile: Any,
    in_folder: bool,
) -> list[Trace]:
    ctx = Ctx(path, parsed.lines, keep_going, stats, profile, in_folder)
    for lineno, msg in parsed.bad:
        ctx.bad(msg, line=lineno)
    detected = fmt == "auto"
    if parsed.empty or (isinstance(parsed.doc, list) and not parsed.doc):
        name: str | None = loopcore_steps.NAME if detected else fmt
        traces = [
            Trace(
                [],
                session=ctx.stem,
                source=path,
                format=name,
                meta={"tokens_source": "none", "empty": True},
            )
        ]
    else:
        name = _detect_doc(parsed.doc) if detected else fmt
        if name is None:
            if in_folder:
                if stats is not None:
                    stats.ignored.append(path)
                return []
            raise _unknown(path)
        try:
            traces = _MODULES[name].parse(parsed.doc, ctx)
        except TraceFormatError:
            raise
        except (AttributeError, KeyError, TypeError, ValueError, IndexError) as exc:
            raise TraceFormatError(
                f"not a valid {name} trace ({type(exc).__name__}: {exc})", path
            ) from exc
        for t in traces:
            _drop_unhashable_steps(t, ctx)
    for k, t in enumerate(traces):
        t.meta["skipped"] = ctx.skipped if k == 0 else 0
        if k == 0 and parsed.incomplete is not None:
            # the file's last line, cut short: the summary says it was not read
            t.meta["incomplete_line"] = parsed.incomplete
        if detected:
            t.meta["format_detected"] = True
    if not parsed.empty and not any(t.steps for t in traces):
        # Data of a known format and not one step: say so (an unread variant must not look
        # like a clean run).
        for t in traces:
            t.meta["no_steps"] = True
        if stats is not None:
            stats.no_steps.append(path if path is not None else "<object>")
    if stats is not None:
        stats.formats[name] = stats.formats.get(name, 0) + len(traces)
    return traces


# Values canonical_hash takes without walking far: a scalar, or a container of scalars (a
# container nested 2 deep with a few members cannot reach MAX_DEPTH or MAX_MEMBERS).
_SCALARS = frozenset({str, int, float, bool, type(None)})
_PLAIN_MEMBERS = 4096


def _plain(value: Any) -> bool:
    """True when canonical_hash(value) surely raises nothing: a scalar, or a dict (scalar keys)
    or list of scalars. False means "not known": the caller hashes to find out."""
    cls = value.__class__
    if cls in _SCALARS:
        return True
    if cls is dict:
        return (
            len(value) <= _PLAIN_MEMBERS
            and _SCALARS.issuperset(map(type, value.values()))
            and _SCALARS.issuperset(map(type, value))
        )
    if cls is list:
        return len(value) <= _PLAIN_MEMBERS and _SCALARS.issuperset(map(type, value))
    return False


def _refused_steps_py(steps: list[Any]) -> list[tuple[int, str]]:
    """``[(index, message)]`` of the steps whose args or ``[result, error]`` canonical_hash
    refuses with ValueError, in order; only the values :func:`_plain` cannot vouch for are
    hashed (the encoder hashes every step anyway). The pure twin of
    ``loopcore._native_ingest.refused_steps``."""
    out = []
    plain = _plain
    for i, step in enumerate(steps):
        args, result, error = step.args, step.result, step.error
        if plain(args) and plain(result) and plain(error):
            continue
        try:
            canonical_hash(args, default=repr)
            if result is not None or error is not None:
                canonical_hash([result, error], default=repr)
        except ValueError as exc:
            out.append((i, str(exc)))
    return out


if TYPE_CHECKING or NO_EXTENSIONS:
    _refused_steps = _refused_steps_py
else:
    from .._native_ingest import refused_steps as _refused_steps


def _drop_unhashable_steps(trace: Trace, ctx: Ctx) -> None:
    """A step whose args or outcome the canonical hash refuses (nested deeper than MAX_DEPTH,
    more than MAX_MEMBERS members: JSON parsers accept 1024 levels) is malformed: an error, or
    with keep_going a counted skip, and the rest of the trace is analysed as usual."""
    refused = _refused_steps(trace.steps)
    if not refused:
        return
    bad: list[int] = []
    for i, message in refused:
        reason = message.replace("canonical_hash: ", "", 1)
        if len(reason) > 160:
            reason = reason[:157] + "..."
        ctx.bad(f"step {i} ({trace.steps[i].name}) cannot be analysed: {reason}")
        bad.append(i)
    drop = set(bad)
    trace.steps = [s for i, s in enumerate(trace.steps) if i not in drop]


def _load_file(
    item: str | list[str],
    fmt: str,
    keep_going: bool,
    stats: LoadStats | None,
    profile: Any,
    in_folder: bool,
) -> list[Trace]:
    if isinstance(item, str) and item.endswith(".db") and opencode.is_sqlite(item):
        # opencode's SQLite store: one export document per session, the rows that are not
        # JSON objects reported as malformed records of the file
        if not opencode.is_db(item):
            if in_folder:
                if stats is not None:
                    stats.ignored.append(item)
                return []
            raise TraceFormatError(
                "a SQLite database without opencode's session, message and part tables: no "
                "trace format this reader knows",
                item,
            )
        if stats is not None:
            stats.files += 1
        # in a walk, a session another channel's database beside it holds as well is read
        # from one of them (opencode copies the storage folder into each)
        skip = opencode.shadowed_sessions(item) if in_folder else frozenset()
        docs, bad = opencode.read_db(item, skip)
        if skip and not docs and not bad:
            return []  # every session is read from another database
        return _parse_one(
            item,
            Parsed(docs, bad=bad),
            opencode.NAME if fmt == "auto" else fmt,
            keep_going,
            stats,
            profile,
            in_folder,
        )
    if isinstance(item, StoreFolder):
        # An opencode store: one export document per session.
        root = str(item)
        docs = opencode.read_store(root)
        if isinstance(item, StoreBesideDb):
            migrated = frozenset().union(
                *(
                    opencode.db_session_ids(db)
                    for db in _dbs_in(os.path.dirname(os.path.normpath(root)))
                )
            )
            kept = [d for d in docs if d["info"].get("id") not in migrated]
            if docs and not kept:
                if stats is not None:
                    stats.files += 1
                return []  # every session is read from the database
            docs = kept
        if stats is not None:
            stats.files += 1
        return _parse_one(
            root,
            Parsed(docs),
            opencode.NAME if fmt == "auto" else fmt,
            keep_going,
            stats,
            profile,
            in_folder,
        )
    if isinstance(item, list):
        # An OpenHands events folder: the numbered files are one stream. An entry that cannot
        # be read (a dangling link, a FIFO...) fails the folder, or with keep_going is a
        # counted skip and the rest of the stream is still read.
        path = os.path.dirname(item[0])
        docs = []
        skipped = 0
        if stats is not None:
            stats.files += len(item)
        for p in item:
            try:
                parsed = parse_bytes(read_bytes(p), p)
            except TraceFormatError as err:
                if not keep_going:
                    raise
                skipped += 1
                if stats is not None:
                    stats.errors.append(err)
                    stats.skipped_files += 1
                continue
            if not parsed.empty:
                docs.append(parsed.doc)
        traces = _parse_one(
            path,
            Parsed(docs),
            openhands.NAME if fmt == "auto" else fmt,
            keep_going,
            stats,
            profile,
            in_folder,
        )
        if traces and skipped:
            traces[0].meta["skipped"] += skipped
        return traces
    if stats is not None:
        stats.files += 1
    if isinstance(item, Chunked):
        return _load_chunks(item, fmt, keep_going, stats, profile, in_folder)
    parsed = parse_bytes(read_bytes(item), item)
    if in_folder and fmt == "auto" and not parsed.empty and parsed.doc == []:
        # a JSON file that is [] names no format: in a folder it is some tool's empty list
        # (Claude Code keeps each session's todo list as ~/.claude/todos/<id>.json), no trace
        if stats is not None:
            stats.ignored.append(item)
        return []
    return _parse_one(item, parsed, fmt, keep_going, stats, profile, in_folder)


def _load_chunks(
    item: Chunked,
    fmt: str,
    keep_going: bool,
    stats: LoadStats | None,
    profile: Any,
    in_folder: bool,
) -> list[Trace]:
    """A transcript in Entire's pieces, read as Entire puts it back together: JSON Lines pieces
    (cut at line ends, each without its last newline) as one file of their lines, a gemini-cli
    recording's pieces (``{"messages": [...]}`` each) as one recording of all their messages.
    Each piece is parsed on its own and a malformed line is named in its own piece; a step's
    ``ref`` is its line in its own piece (``ref["file"]`` names a piece after the first), and
    ``trace.meta["chunks"]`` lists the pieces. The per-file limit holds for them together."""
    path = str(item)
    files = chunk_files(path)
    limit = max_file_bytes()
    parts: list[Parsed] = []
    sizes: list[int] = []  # lines of each piece
    used = 0
    for p in files:
        data = read_bytes(p, limit - used)
        used += len(data)
        sizes.append(data.count(b"\n") + 1)
        parts.append(parse_bytes(data, p))
    names = [os.path.basename(p) for p in files]
    starts: list[tuple[int, str]] = []  # (first line, piece) of the pieces after the first
    if all(isinstance(x.doc, dict) and isinstance(x.doc.get("messages"), list) for x in parts):
        doc = dict(parts[0].doc)
        doc["messages"] = [m for x in parts for m in x.doc["messages"]]
        parsed = Parsed(doc)
    else:
        records: list[Any] = []
        lines: list[int] = []
        bad: list[tuple[int | None, str]] = []
        offset = 0
        for k, x in enumerate(parts):
            if k:
                starts.append((offset + 1, names[k]))
            if x.lines is None:  # one JSON document, not lines
                records.append(x.doc)
                lines.append(offset + 1)
            else:
                records.extend(x.doc)
                lines.extend(n + offset for n in x.lines)
            where = f" ({names[k]}, line {{}})" if k else ""
            bad.extend((n, msg + where.format(n)) for n, msg in x.bad)
            if x.incomplete is not None and k < len(parts) - 1:
                # Entire cuts at line ends: a piece's last line cut short is malformed
                bad.append((x.incomplete + offset, "a line cut short" + where.format(x.incomplete)))
            offset += sizes[k]
        parsed = Parsed(records, lines, bad, incomplete=parts[-1].incomplete)
        if parts[-1].incomplete is not None:
            parsed.incomplete = parts[-1].incomplete + offset - sizes[-1]
    traces = _parse_one(path, parsed, fmt, keep_going, stats, profile, in_folder)
    for t in traces:
        t.meta["chunks"] = names
        if starts:
            _piece_refs(t, starts)
    return traces


def _piece_refs(trace: Trace, starts: list[tuple[int, str]]) -> None:
    """Each step's ``ref`` line, counted through the joined pieces, as the line of its own piece
    with that piece's name (``{"file": "full.jsonl.001", "line": 12}``); refs shared by several
    steps are mapped once."""
    done: dict[int, dict[str, Any]] = {}
    for s in trace.steps:
        ref = s.ref
        if not isinstance(ref, dict) or not isinstance(ref.get("line"), int):
            continue
        got = done.get(id(ref))
        if got is None:
            got = ref
            line = ref["line"]
            for first, name in reversed(starts):
                if line >= first:
                    got = {"file": name, **ref, "line": line - first + 1}
                    break
            done[id(ref)] = got
        s.ref = got


def _sub_agent_files(path: str) -> list[str]:
    """The sub-agent files of a session file named on its own, which is only whole with them:
    Claude Code 2.x writes each sub-agent's records to ``<sessionId>/subagents/agent-<agentId>.jsonl``
    beside ``<sessionId>.jsonl``; gemini-cli writes each sub-agent's recording to
    ``<sessionId>/<agentId>.jsonl`` beside ``session-<time>-<id8>.jsonl`` (the full id, made
    safe for a file name, is in the recording's first line)."""
    name = plain_name(path)
    if not name.endswith(".jsonl"):
        return []
    base = os.path.basename(name)
    if base.startswith("session-") and name == path:
        return _gemini_sub_agent_files(path)
    return _files_in(
        os.path.join(name[: -len(".jsonl")], "subagents"),
        lambda f: f.startswith("agent-") and plain_name(f).endswith(".jsonl"),
    )


def _files_in(folder: str, keep: Callable[[str], bool]) -> list[str]:
    """The paths of the entries of *folder* whose names *keep* takes, sorted by name; none when
    the folder cannot be listed."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return [os.path.join(folder, f) for f in sorted(names) if keep(f)]


_GEMINI_HEAD_BYTES = 1 << 16
_UNSAFE_NAME_CHARS = re.compile(r"[^a-zA-Z0-9_-]")


def _gemini_sub_agent_files(path: str) -> list[str]:
    """``<sessionId>/*.jsonl`` beside a gemini-cli recording whose first line names that session
    (gemini-cli's own rule for the folder name: every character but letters, digits, ``_`` and
    ``-`` replaced by ``_``)."""
    if not os.path.isfile(path):
        return []  # a FIFO or a device is never opened here: reading it could wait forever
    try:
        with open(path, "rb") as fh:
            head = fh.readline(_GEMINI_HEAD_BYTES)
        meta = loads(head)
    except (OSError, orjson.JSONDecodeError):
        return []
    if not (
        isinstance(meta, dict)
        and isinstance(meta.get("sessionId"), str)
        and isinstance(meta.get("projectHash"), str)
        and meta["sessionId"]
    ):
        return []
    folder = os.path.join(os.path.dirname(path), _UNSAFE_NAME_CHARS.sub("_", meta["sessionId"]))
    return _files_in(
        folder,
        lambda f: (
            not f.startswith(".")
            and f.endswith(".jsonl")
            and os.path.isfile(os.path.join(folder, f))
        ),
    )


def _inputs(
    paths: Iterable[str], copies: list[str] | None = None
) -> Iterator[tuple[Any, bool | None]]:
    """What a load of *paths* reads, in order: ``(item, in_folder)`` per file, events folder or
    store (``in_folder``: found by a walk, so a file of no known format is ignored, not an
    error), ``(path, None)`` for a path that does not exist. A Claude Code session file named
    on its own brings its sub-agent files right after it, unless another of *paths* names
    them or a folder among *paths* holds them (each file is read once). The copies a walk
    passes over (:func:`_session_copies`, :func:`_run_copies`) are added to *copies*."""
    paths = [os.fspath(p) for p in paths]
    named = {os.path.realpath(p) for p in paths if os.path.isfile(p)}
    folders = [os.path.join(os.path.realpath(p), "") for p in paths if os.path.isdir(p)]
    added: set[str] = set()
    for path in paths:
        if os.path.isdir(path):
            for item in _walk(path, copies):
                yield item, True
        elif os.path.exists(path):
            yield (Chunked(path) if os.path.isfile(path + ".001") else path), False
            for sub in _sub_agent_files(path):
                real = os.path.realpath(sub)
                if real in named or real in added or any(real.startswith(f) for f in folders):
                    continue
                added.add(real)
                yield sub, True
        else:
            yield path, None


def _iter_paths(
    paths: Iterable[str], fmt: str, keep_going: bool, stats: LoadStats | None, profile: Any
) -> Iterator[Trace]:
    for item, in_folder in _inputs(paths, None if stats is None else stats.copies):
        if in_folder is None:
            err = TraceFormatError("no such file or folder", item)
            if not keep_going:
                raise err
            if stats is not None:
                stats.errors.append(err)
                stats.skipped_files += 1
            continue
        try:
            traces = _load_file(item, fmt, keep_going, stats, profile, in_folder)
        except TraceFormatError as err:
            if not keep_going:
                raise
            if stats is not None:
                stats.errors.append(err)
                stats.skipped_files += 1
            continue
        for t in traces:
            if stats is not None:
                stats.traces += 1
                stats.steps += len(t.steps)
            yield t


def _iter_object(
    obj: Any, fmt: str, keep_going: bool, stats: LoadStats | None, profile: Any
) -> Iterator[Trace]:
    for t in _parse_one(None, Parsed(obj), fmt, keep_going, stats, profile, False):
        if stats is not None:
            stats.traces += 1
            stats.steps += len(t.steps)
        yield t


def load(
    source: Any,
    format: str = "auto",
    *,
    keep_going: bool = False,
    profile: Any = None,
    stats: LoadStats | None = None,
) -> Iterator[Trace]:
    """Yield the Traces in *source*: a file (plain or .gz), a folder (recursive), a list of paths,
    or already-parsed objects (a list of messages, a dict...).

    *format* is ``"auto"`` or one of FORMATS; an unknown name raises ValueError listing them
    (at call time). A malformed file or line raises TraceFormatError naming the file and line;
    with ``keep_going=True`` it is skipped instead and counted in ``trace.meta["skipped"]`` and
    in *stats* (a LoadStats you pass in). *profile* (a Profile, a profile name or a mapping of
    extra rules) overrides the format's default tool taxonomy.
    """
    fmt = _resolve_format(format)
    if profile is not None:
        get_profile(profile)  # fail now on an unknown profile name, not at the first trace
    if isinstance(source, Trace):
        return iter([source])
    if isinstance(source, (str, os.PathLike)):
        return _iter_paths([os.fspath(source)], fmt, keep_going, stats, profile)
    if (
        isinstance(source, (list, tuple))
        and source
        and all(isinstance(x, (str, os.PathLike)) for x in source)
    ):
        return _iter_paths([os.fspath(x) for x in source], fmt, keep_going, stats, profile)
    if isinstance(source, (bytes, bytearray)):
        return _iter_object_bytes(bytes(source), fmt, keep_going, stats, profile)
    return _iter_object(source, fmt, keep_going, stats, profile)


def _iter_object_bytes(
    data: bytes, fmt: str, keep_going: bool, stats: LoadStats | None, profile: Any
) -> Iterator[Trace]:
    data = inflate_bytes(data, None, max_file_bytes())
    for t in _parse_one(None, parse_bytes(data, None), fmt, keep_going, stats, profile, False):
        if stats is not None:
            stats.traces += 1
            stats.steps += len(t.steps)
        yield t
