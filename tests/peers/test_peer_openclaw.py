"""OpenClaw's own loop-detection tests, translated case by case, on ``Policy.openclaw()``.

Sources (repository openclaw/openclaw):

* ``src/agents/tool-loop-detection.test.ts`` (describe "tool-loop-detection"): the rolling-history
  detectors. The peer's ``recordToolCall`` without an outcome is a ``check`` here (the attempt
  counts); ``recordToolCall`` + ``recordToolCallOutcome`` is a ``check`` then a ``record``. Its
  ``detectToolCallLoop`` is the next ``check``; "warning" is ``warn``, "critical" is ``block``.
* ``src/agents/pi-embedded-runner/post-compaction-loop-guard.test.ts`` (describe
  "createPostCompactionLoopGuard"): ``armPostCompaction`` is ``guard.note_compaction(session)``.

Each docstring names the peer test. Differences loopcore keeps on purpose are in docs/peers.md.
"""

from __future__ import annotations

import pytest
from peerlib import ALLOW, Policy, attempt, compaction, fail, ran

from loopcore import hashing

# The peer records every outcome without acting on a detection in between: calls here run
# whatever the guard said (``ran``), and the decision under test is the final ``check``.
calls = ran


def call(g, session, tool, args=None, result=None, **kw):
    return ran(g, session, tool, args, result, **kw)[0]


WINDOW, WARN, CRITICAL, BREAKER, UNKNOWN = 30, 10, 20, 30, 10

POLICY = Policy.openclaw


@pytest.fixture
def g(make):
    return make(POLICY())


READ_SAME = (
    "read",
    {"path": "/same.txt"},
    {"content": [{"type": "text", "text": "same output"}], "details": {"ok": True}},
)


def poll_fixture(session_id="sess-1"):
    return (
        {"action": "poll", "sessionId": session_id},
        {
            "content": [{"type": "text", "text": "(no new output)\n\nProcess still running."}],
            "details": {"status": "running", "aggregated": "steady"},
        },
    )


def wrote(path):
    return {
        "content": [{"type": "text", "text": f"wrote {path}"}],
        "details": {"ok": True, "path": path},
    }


# ---------------------------------------------------------------- recordToolCall argument hashing


def test_consistent_hash_for_same_tool_and_params(g):
    """tool-loop-detection.test.ts: 'creates consistent hash for same tool and params'."""
    assert g.args_hash("read", {"path": "/file.txt"}) == g.args_hash("read", {"path": "/file.txt"})


def test_different_hashes_for_different_params(g):
    """tool-loop-detection.test.ts: 'creates different hashes for different params'."""
    assert g.args_hash("read", {"path": "/file1.txt"}) != g.args_hash(
        "read", {"path": "/file2.txt"}
    )


def test_different_hashes_for_different_tools(g):
    """tool-loop-detection.test.ts: 'creates different hashes for different tools'."""
    assert g.args_hash("read", {"path": "/file.txt"}) != g.args_hash("write", {"path": "/file.txt"})


def test_non_object_params_hash_with_the_same_shape(g):
    """tool-loop-detection.test.ts: 'hashes non-object params with the same digest shape'.

    Deliberate difference (docs/peers.md): OpenClaw's hash is ``tool:`` + 64 hex digits of SHA-256;
    loopcore's is a 64-bit integer with the tool mixed in. The shape is the same for every param type.
    """
    hashes = [g.args_hash("tool", p) for p in ("string-param", 123, None)]
    assert all(isinstance(h, int) and 0 <= h < 2**64 for h in hashes)
    assert len(set(hashes)) == 3


def test_hash_ignores_key_order(g):
    """tool-loop-detection.test.ts: 'produces deterministic hashes regardless of key order'."""
    assert g.args_hash("tool", {"a": 1, "b": 2}) == g.args_hash("tool", {"b": 2, "a": 1})


def test_hash_fixed_size_for_large_params(g):
    """tool-loop-detection.test.ts: 'keeps hashes fixed-size even for large params'."""
    h = g.args_hash("read", {"data": "x" * 20_000})
    assert isinstance(h, int) and 0 <= h < 2**64


def test_hash_circular_params_without_collapsing_shared_references(g):
    """tool-loop-detection.test.ts: 'hashes circular params without collapsing repeated references'."""
    shared = {"id": "shared"}
    payload = {"first": shared, "second": shared}
    payload["self"] = payload
    other_shared = {"id": "shared"}
    equivalent = {"second": other_shared, "first": other_shared}
    equivalent["self"] = equivalent
    copies = {"first": {"id": "shared"}, "second": {"id": "shared"}}
    copies["self"] = copies
    h = g.args_hash("tool", payload)
    assert h == g.args_hash("tool", equivalent)
    assert h == g.args_hash("tool", copies)  # a shared object hashes as its content, twice
    assert 0 <= h < 2**64


# ---------------------------------------------------------------- recordToolCall


def test_adds_tool_call_to_empty_history(g):
    """tool-loop-detection.test.ts: 'adds tool call to empty history'."""
    attempt(g, "s", "read", {"path": "/file.txt"}, call_id="call-1")
    hist = g.history("s")
    assert len(hist) == 1 and hist[0][0] == "read"


def test_sliding_window_of_last_n_calls(g):
    """tool-loop-detection.test.ts: 'maintains sliding window of last N calls'."""
    for i in range(WINDOW + 10):
        attempt(g, "s", "tool", {"iteration": i}, call_id=f"call-{i}")
    hist = g.history("s")
    assert len(hist) == WINDOW
    assert hist[0][1] == hashing.canonical_hash({"iteration": 10})


def test_records_run_id_when_provided(g):
    """tool-loop-detection.test.ts: 'records run id when provided'."""
    attempt(g, "s", "tool", {"arg": 1}, call_id="call-run", run_id="run-1")
    assert len(g.history("s", run_id="run-1")) == 1
    assert g.history("s") == []


# ---------------------------------------------------------------- detectToolCallLoop


def test_disabled_policy_flags_nothing(make):
    """tool-loop-detection.test.ts: 'is disabled by default'.

    Deliberate difference (docs/peers.md): OpenClaw's detection is off unless configured; loopcore's
    presets are on and ``Policy(enabled=False)`` is the off switch.
    """
    g = make(POLICY().replace(enabled=False))
    for i in range(20):
        attempt(g, "s", "read", {"path": "/same.txt"}, call_id=f"default-{i}")
    assert g.check("s", "read", {"path": "/same.txt"}) is ALLOW


def test_does_not_flag_unique_tool_calls(g):
    """tool-loop-detection.test.ts: 'does not flag unique tool calls'."""
    for i in range(15):
        attempt(g, "s", "read", {"path": f"/file{i}.txt"})
    assert g.check("s", "read", {"path": "/new-file.txt"}) is ALLOW


def test_ignores_repeated_history_from_other_runs(g):
    """tool-loop-detection.test.ts: 'ignores repeated history from other runs'."""
    for _i in range(WARN):
        attempt(g, "s", "read", {"path": "/same.txt"}, run_id="heartbeat-1")
    assert g.check("s", "read", {"path": "/same.txt"}, run_id="heartbeat-2") is ALLOW


def test_detects_repeated_history_within_the_same_run(g):
    """tool-loop-detection.test.ts: 'detects repeated history within the same run'."""
    for _i in range(WARN):
        attempt(g, "s", "read", {"path": "/same.txt"}, run_id="run-1")
    d = g.check("s", "read", {"path": "/same.txt"}, run_id="run-1")
    assert (d.detector, d.count) == ("generic_repeat", WARN)


def test_keeps_scoped_and_unscoped_history_isolated(g):
    """tool-loop-detection.test.ts: 'keeps scoped and unscoped history isolated'."""
    for _i in range(WARN):
        attempt(g, "s", "read", {"path": "/same.txt"}, run_id="run-1")
    assert g.check("s", "read", {"path": "/same.txt"}) is ALLOW


def test_warns_on_generic_repeated_tool_and_args(g):
    """tool-loop-detection.test.ts: 'warns on generic repeated tool+args calls'."""
    for _i in range(WARN):
        attempt(g, "s", "read", {"path": "/same.txt"})
    d = g.check("s", "read", {"path": "/same.txt"})
    assert (d.action, d.detector, d.count) == ("warn", "generic_repeat", WARN)
    assert "WARNING" in d.message and f"{WARN} times" in d.message


def test_blocks_generic_no_progress_loops_at_critical(g):
    """tool-loop-detection.test.ts: 'blocks generic no-progress loops at critical threshold'."""
    calls(g, "s", *READ_SAME, n=CRITICAL)
    d = g.check("s", *READ_SAME[:2])
    assert (d.action, d.detector) == ("block", "generic_repeat")
    assert "identical outcomes" in d.message


def test_warns_for_known_polling_no_progress(g):
    """tool-loop-detection.test.ts: 'warns for known polling no-progress loops'."""
    params, result = poll_fixture()
    calls(g, "s", "process", params, result, n=WARN)
    d = g.check("s", "process", params)
    assert (d.action, d.detector) == ("warn", "poll_no_progress")
    assert "no progress" in d.message


def test_blocks_known_polling_no_progress_at_critical(g):
    """tool-loop-detection.test.ts: 'blocks known polling no-progress loops at critical threshold'.

    Deliberate difference (docs/peers.md): OpenClaw's critical messages start with "CRITICAL";
    loopcore's blocks start with "BLOCKED".
    """
    params, result = poll_fixture()
    calls(g, "s", "process", params, result, n=CRITICAL)
    d = g.check("s", "process", params)
    assert (d.action, d.detector) == ("block", "poll_no_progress")
    assert d.message.startswith("BLOCKED")


def test_does_not_block_known_polling_when_output_progresses(g):
    """tool-loop-detection.test.ts: 'does not block known polling when output progresses'."""
    params = {"action": "poll", "sessionId": "sess-1"}

    def progressing(i):
        return {
            "content": [{"type": "text", "text": f"line {i}"}],
            "details": {"status": "running", "aggregated": f"line {i}"},
        }

    calls(g, "s", "process", params, n=CRITICAL + 5, results=progressing)
    assert g.check("s", "process", params) is ALLOW


def test_blocks_any_tool_with_global_breaker_at_30(g):
    """tool-loop-detection.test.ts: 'blocks any tool with global no-progress breaker at 30'."""
    calls(g, "s", *READ_SAME, n=BREAKER)
    d = g.check("s", *READ_SAME[:2])
    assert (d.action, d.detector) == ("block", "global_breaker")
    assert "global circuit breaker" in d.message


def test_blocks_stable_argument_churn_with_global_breaker(g):
    """tool-loop-detection.test.ts: 'blocks repeated stable argument churn with the global circuit breaker'."""
    paths = ["/tmp/a.md", "/tmp/b.md", "/tmp/a.md", "/tmp/a.md", "/tmp/b.md"]
    for i in range(BREAKER):
        p = paths[i % len(paths)]
        call(g, "s", "write", {"path": p, "content": "same content"}, wrote(p))
    d = g.check("s", "write", {"path": "/tmp/c.md", "content": "same content"})
    assert (d.action, d.detector, d.count) == ("block", "global_breaker", BREAKER)
    assert "2 repeated argument patterns" in d.message


def test_blocks_stable_argument_churn_despite_singleton_probes(g):
    """tool-loop-detection.test.ts: 'blocks stable argument churn despite bounded singleton probes'."""
    for i in range(BREAKER):
        p = f"/tmp/probe-{i}.md" if i in (8, 19) else f"/tmp/{i % 2}.md"
        call(g, "s", "write", {"path": p, "content": "same content"}, wrote(p))
    d = g.check("s", "write", {"path": "/tmp/next-probe.md", "content": "same content"})
    assert (d.action, d.detector, d.count) == ("block", "global_breaker", BREAKER)
    assert "2 repeated argument patterns" in d.message


def test_does_not_block_a_one_shot_batch_of_distinct_arguments(g):
    """tool-loop-detection.test.ts: 'does not block a one-shot batch of distinct arguments'."""
    done = {"content": [{"type": "text", "text": "write complete"}], "details": {"ok": True}}
    for i in range(BREAKER):
        call(g, "s", "write", {"path": f"/tmp/file-{i}.md", "content": "same content"}, done)
    assert g.check("s", "write", {"path": "/tmp/next.md", "content": "same content"}) is ALLOW


def test_does_not_block_a_legitimate_two_pass_batch(g):
    """tool-loop-detection.test.ts: 'does not block a legitimate two-pass batch'."""
    paths = [f"/tmp/batch-{i}.md" for i in range(15)]
    for i in range(BREAKER):
        p = paths[i % len(paths)]
        call(g, "s", "write", {"path": p, "content": "same content"}, wrote(p))
    assert g.check("s", "write", {"path": "/tmp/next.md", "content": "same content"}) is ALLOW


def test_does_not_block_argument_churn_that_makes_progress(g):
    """tool-loop-detection.test.ts: 'does not block argument churn when a repeated variant makes progress'."""
    for i in range(BREAKER):
        p = "/tmp/a.md" if i % 2 == 0 else "/tmp/b.md"
        result = {
            "content": [{"type": "text", "text": f"write {p} revision {i}"}],
            "details": {"ok": True, "revision": i},
        }
        call(g, "s", "write", {"path": p, "content": "same content"}, result)
    assert g.check("s", "write", {"path": "/tmp/c.md", "content": "same content"}) is ALLOW


def test_blocks_completed_exec_despite_volatile_runtime_details(g):
    """tool-loop-detection.test.ts: 'blocks repeated completed exec calls despite volatile runtime details'."""
    params = {"command": "grafana-api.sh datasources"}

    def result(i):
        return {
            "content": [{"type": "text", "text": "Loki\nPrometheus"}],
            "details": {
                "status": "completed",
                "exitCode": 0,
                "durationMs": 100 + i,
                "cwd": f"/tmp/run-{i}",
                "aggregated": "Loki\nPrometheus",
            },
        }

    calls(g, "s", "exec", params, n=CRITICAL, results=result)
    d = g.check("s", "exec", params)
    assert (d.action, d.detector) == ("block", "generic_repeat")


def test_blocks_running_exec_despite_volatile_session_details_and_text(g):
    """tool-loop-detection.test.ts: 'blocks repeated running exec calls despite volatile session details and text'."""
    params = {"command": "tail -f /var/log/app.log", "yieldMs": 1000}

    def result(i):
        return {
            "content": [
                {
                    "type": "text",
                    "text": f"Command still running (session sess-{i}, pid {1000 + i})",
                }
            ],
            "details": {
                "status": "running",
                "sessionId": f"sess-{i}",
                "pid": 1000 + i,
                "startedAt": 1_700_000_000 + i,
                "cwd": f"/tmp/run-{i}",
                "tail": "(no new output)",
            },
        }

    calls(g, "s", "exec", params, n=CRITICAL, results=result)
    d = g.check("s", "exec", params)
    assert (d.action, d.detector) == ("block", "generic_repeat")


def test_changing_exec_output_stays_below_the_breaker(g):
    """tool-loop-detection.test.ts: 'keeps changing exec output below the global no-progress breaker'."""
    params = {"command": "date"}

    def result(i):
        return {
            "content": [{"type": "text", "text": f"tick {i}"}],
            "details": {
                "status": "completed",
                "exitCode": 0,
                "durationMs": 100 + i,
                "aggregated": f"tick {i}",
            },
        }

    calls(g, "s", "exec", params, n=BREAKER, results=result)
    d = g.check("s", "exec", params)
    assert (d.action, d.detector) == ("warn", "generic_repeat")


def test_changing_empty_output_exec_failures_stay_below_the_breaker(g):
    """tool-loop-detection.test.ts: 'keeps changing empty-output exec failures below the global no-progress breaker'."""
    params = {"command": "openclaw flaky-helper"}

    def result(i):
        return {
            "content": [{"type": "text", "text": f"Runtime failed before spawn: attempt {i}"}],
            "details": {
                "status": "failed",
                "exitCode": None,
                "durationMs": 100 + i,
                "aggregated": "",
            },
        }

    calls(g, "s", "exec", params, n=BREAKER, results=result)
    d = g.check("s", "exec", params)
    assert (d.action, d.detector) == ("warn", "generic_repeat")


def test_unknown_tool_failures_below_threshold_are_allowed(g):
    """tool-loop-detection.test.ts: 'does not block repeated unknown-tool failures before the unknown-tool threshold'."""
    for i in range(UNKNOWN - 1):
        fail(
            g,
            "s",
            "exec",
            {"command": f"echo {i}"},
            RuntimeError("Tool exec not found"),
            call_id=f"exec-error-{i}",
        )
    assert g.check("s", "exec", {"command": "echo still allowed"}) is ALLOW


def test_blocks_unknown_tool_failures_with_changing_args(g):
    """tool-loop-detection.test.ts: 'blocks repeated unknown-tool failures even when the args keep changing'."""
    attempts = [
        {"command": "ls"},
        {"command": "pwd"},
        {"input": "whoami"},
        {"cmd": "env"},
        {"shell": "bash -lc ls"},
        {"command": "printf ok"},
        {"cwd": "/tmp", "command": "ls"},
        {"args": ["ls", "/tmp"]},
        {"command": "find . -maxdepth 1"},
        {"text": "run ls"},
        {"command": "uname -a"},
        {"command": "id"},
        {"command": "date"},
        {"command": "ps"},
        {"command": "df -h"},
        {"command": "free -m"},
        {"command": "ls /tmp"},
        {"command": "ls -la"},
        {"command": "cat /etc/hostname"},
        {"command": "echo done"},
    ]
    for i, params in enumerate(attempts):
        fail(g, "s", "exec", params, RuntimeError("Tool exec not found"), call_id=f"exec-error-{i}")
    d = g.check("s", "exec", {"command": "echo still looping"})
    assert (d.action, d.detector) == ("block", "unknown_tool")


def _ping_pong(g, n, text_at):
    for i in range(n):
        if i % 2 == 0:
            call(
                g,
                "s",
                "read",
                {"path": "/a.txt"},
                {
                    "content": [{"type": "text", "text": text_at("read", i)}],
                    "details": {"ok": True},
                },
            )
        else:
            call(
                g,
                "s",
                "list",
                {"dir": "/workspace"},
                {
                    "content": [{"type": "text", "text": text_at("list", i)}],
                    "details": {"ok": True},
                },
            )


def test_warns_on_ping_pong(g):
    """tool-loop-detection.test.ts: 'warns on ping-pong alternating patterns'."""
    for i in range(WARN - 1):
        if i % 2 == 0:
            attempt(g, "s", "read", {"path": "/a.txt"})
        else:
            attempt(g, "s", "list", {"dir": "/workspace"})
    d = g.check("s", "list", {"dir": "/workspace"})
    assert (d.action, d.detector, d.count) == ("warn", "cycle", WARN)
    assert "ping-pong loop" in d.message


def test_blocks_ping_pong_at_critical(g):
    """tool-loop-detection.test.ts: 'blocks ping-pong alternating patterns at critical threshold'."""
    _ping_pong(g, CRITICAL - 1, lambda tool, i: f"{tool} stable")
    d = g.check("s", "list", {"dir": "/workspace"})
    assert (d.action, d.detector, d.count) == ("block", "cycle", CRITICAL)
    assert "ping-pong loop" in d.message


def test_progressing_ping_pong_only_warns(g):
    """tool-loop-detection.test.ts: 'does not block ping-pong at critical threshold when outcomes are progressing'."""
    _ping_pong(g, CRITICAL - 1, lambda tool, i: f"{tool} {i}")
    d = g.check("s", "list", {"dir": "/workspace"})
    assert (d.action, d.detector, d.count) == ("warn", "cycle", CRITICAL)


def test_broken_alternation_is_not_ping_pong(g):
    """tool-loop-detection.test.ts: 'does not flag ping-pong when alternation is broken'."""
    attempt(g, "s", "read", {"path": "/a.txt"})
    attempt(g, "s", "list", {"dir": "/workspace"})
    attempt(g, "s", "read", {"path": "/a.txt"})
    attempt(g, "s", "write", {"path": "/tmp/out.txt"})
    assert g.check("s", "list", {"dir": "/workspace"}) is ALLOW


def test_fixed_size_result_hash_for_large_outputs(g):
    """tool-loop-detection.test.ts: 'records fixed-size result hashes for large tool outputs'."""
    params = {"action": "log", "sessionId": "sess-big"}
    result = {
        "content": [{"type": "text", "text": "y" * 40_000}],
        "details": {"status": "running", "totalLines": 1, "totalChars": 40_000},
    }
    call(g, "s", "process", params, result, call_id="log-big")
    rh = g.history("s")[0][2]
    assert isinstance(rh, int) and 0 <= rh < 2**64


def test_pre_recorded_call_receives_its_result(g):
    """tool-loop-detection.test.ts: 'returns the recorded call when a pre-recorded tool call receives its result'."""
    params = {"action": "lookup", "path": "cron.enabled"}
    attempt(g, "s", "gateway", params, call_id="call-1")
    g.record(
        "s",
        "gateway",
        params,
        {"content": [{"type": "text", "text": "same schema"}]},
        call_id="call-1",
    )
    hist = g.history("s")
    assert len(hist) == 1 and hist[0][2] is not None


def test_outcomes_attach_while_the_window_trims(g):
    """tool-loop-detection.test.ts: 'returns the recorded call while trimming production call/outcome records'."""
    for i in range(WINDOW + 3):
        params = {"action": "lookup", "path": f"config.{i}"}
        call(
            g,
            "s",
            "gateway",
            params,
            {"content": [{"type": "text", "text": f"schema-{i}"}]},
            call_id=f"call-{i}",
        )
    hist = g.history("s")
    assert len(hist) == WINDOW
    assert hist[0][1] == hashing.canonical_hash({"action": "lookup", "path": "config.3"})
    assert all(rh is not None for _t, _a, rh in hist)


def test_outcomes_do_not_attach_to_calls_of_other_runs(g):
    """tool-loop-detection.test.ts: 'does not attach outcomes to matching calls from other runs'."""
    params = {"path": "/same.txt"}
    attempt(g, "s", "read", params, call_id="call-1", run_id="run-1")
    g.record(
        "s",
        "read",
        params,
        {"content": [{"type": "text", "text": "same output"}]},
        call_id="call-1",
        run_id="run-2",
    )
    assert [rh for _t, _a, rh in g.history("s", run_id="run-1")] == [None]
    run2 = g.history("s", run_id="run-2")
    assert len(run2) == 1 and run2[0][2] is not None


def test_handles_empty_history(g):
    """tool-loop-detection.test.ts: 'handles empty history'."""
    assert g.check("s", "tool", {"arg": 1}) is ALLOW


# ---------------------------------------------------------------- message send loop detection (#89090)


def send_result(payload):
    import json

    return {
        "content": [{"type": "text", "text": json.dumps(payload, indent=2)}],
        "details": payload,
    }


def send_payload(i):
    return {
        "ok": True,
        "channel": "feishu",
        "chatId": "oc_chat",
        "runId": f"run_{i}",
        "messageId": f"om_{i}",
        "receipt": {"platformMessageId": f"p_{i}"},
    }


SEND = {"action": "send", "target": "feishu:oc_chat", "text": "ping"}


def sends(g, tool, params, payload, n):
    for i in range(n):
        call(g, "s", tool, params, send_result(payload(i)), call_id=f"{tool}-{i}")


def test_duplicate_sends_share_a_result_hash(g):
    """tool-loop-detection.test.ts: 'gives duplicate sends a stable result hash despite per-call ids in details and text'."""
    sends(g, "message", SEND, send_payload, 2)
    hashes = [rh for _t, _a, rh in g.history("s")]
    assert hashes[0] is not None and hashes[0] == hashes[1]


def test_nested_broadcast_ids_are_stripped(g):
    """tool-loop-detection.test.ts: 'strips nested ids so broadcast results with per-call ids share a result hash'."""

    def broadcast(i):
        return {
            "results": [
                {"channel": "feishu", "ok": True, "result": {"messageId": f"om_{i}", "receipt": i}}
            ]
        }

    sends(g, "message", {"action": "broadcast", "text": "ping"}, broadcast, 2)
    hashes = [rh for _t, _a, rh in g.history("s")]
    assert hashes[0] == hashes[1]


def test_identical_arg_send_loops_escalate_to_block(g):
    """tool-loop-detection.test.ts: 'escalates identical-arg send loops to critical even though every id differs'."""
    sends(g, "message", SEND, send_payload, CRITICAL)
    assert g.check("s", "message", SEND).blocked


def test_sessions_send_loops_with_fresh_run_ids_block(g):
    """tool-loop-detection.test.ts: 'also blocks sessions_send loops whose result carries a fresh runId'."""
    params = {"sessionKey": "agent:main:peer", "text": "ping"}
    sends(g, "sessions_send", params, lambda i: {"ok": True, "runId": f"run_{i}"}, CRITICAL)
    assert g.check("s", "sessions_send", params).blocked


def test_provider_docked_send_tool_loops_block(make):
    """tool-loop-detection.test.ts: 'escalates provider-docked send-tool loops (e.g. telegram) whose result carries fresh ids'.

    Deliberate difference (docs/peers.md): OpenClaw recognises channel send tools from its plugin
    registry; in loopcore the harness declares them in ``Policy.send_tools``.
    """
    g = make(POLICY().replace(send_tools=POLICY().send_tools | {"telegram"}))
    params = {"to": "telegram:123", "text": "ping"}
    sends(g, "telegram", params, send_payload, CRITICAL)
    assert g.check("s", "telegram", params).blocked


def test_reply_action_escalates_like_send(g):
    """tool-loop-detection.test.ts: 'escalates sibling delivery actions (reply) the same as send'."""
    params = {"action": "reply", "target": "feishu:oc_chat", "text": "ping"}
    sends(g, "message", params, send_payload, CRITICAL)
    assert g.check("s", "message", params).blocked


def test_upload_file_loops_with_fresh_file_ids_block(g):
    """tool-loop-detection.test.ts: 'blocks upload-file loops whose result carries a fresh file id'."""
    params = {"action": "upload-file", "target": "feishu:oc_chat", "media": "img.png"}
    sends(
        g,
        "message",
        params,
        lambda i: {"ok": True, "channel": "feishu", "fileId": f"f_{i}", "messageId": f"om_{i}"},
        CRITICAL,
    )
    assert g.check("s", "message", params).blocked


def test_poll_loops_with_fresh_poll_ids_block(g):
    """tool-loop-detection.test.ts: 'blocks poll loops whose result carries a fresh poll id'."""
    params = {"action": "poll", "target": "tg:chat-1", "question": "?"}
    sends(
        g,
        "message",
        params,
        lambda i: {
            "ok": True,
            "channel": "telegram",
            "messageId": f"om_{i}",
            "chatId": "c1",
            "pollId": f"pl_{i}",
        },
        CRITICAL,
    )
    assert g.check("s", "message", params).blocked


def test_distinct_messages_are_not_a_loop(g):
    """tool-loop-detection.test.ts: 'does not flag distinct messages (different args) as a no-progress loop'."""
    for i in range(CRITICAL):
        call(
            g,
            "s",
            "message",
            {"action": "send", "target": "feishu:oc_chat", "text": f"line {i}"},
            send_result(send_payload(i)),
        )
    assert (
        g.check(
            "s", "message", {"action": "send", "target": "feishu:oc_chat", "text": "line final"}
        )
        is ALLOW
    )


@pytest.mark.parametrize(
    "params, ts_key",
    [
        ({"action": "read", "target": "feishu:oc_chat"}, "ts"),
        ({"action": "channel-create", "name": "support"}, "timestamp"),
    ],
    ids=["read", "channel-create"],
)
def test_non_send_actions_keep_full_hashing(g, params, ts_key):
    """tool-loop-detection.test.ts: 'keeps full result hashing for non-send message actions so id/timestamp
    progress is not masked' (read) and 'keeps full result hashing for administrative message mutations'
    (channel-create): two cases."""
    sends(
        g,
        "message",
        params,
        lambda i: {"ok": True, "messageId": f"m_{i}", ts_key: 1000 * (i + 1)},
        2,
    )
    hashes = [rh for _t, _a, rh in g.history("s")]
    assert hashes[0] is not None and hashes[0] != hashes[1]


def test_stable_nested_route_ids_survive(g):
    """tool-loop-detection.test.ts: 'preserves stable nested route ids so distinct routes stay distinguishable'."""
    routes = ["conv-A", "conv-B"]
    sends(
        g,
        "message",
        SEND,
        lambda i: {"ok": True, "messageId": f"om_{i}", "route": {"id": routes[i]}},
        2,
    )
    hashes = [rh for _t, _a, rh in g.history("s")]
    assert hashes[0] != hashes[1]


def test_send_block_stays_sticky_after_the_veto_is_recorded(g):
    """tool-loop-detection.test.ts: 'keeps a critical send block sticky after the veto result is recorded'."""
    sends(g, "message", SEND, send_payload, CRITICAL)
    assert g.check("s", "message", SEND, call_id="message-veto").blocked
    g.record(
        "s",
        "message",
        SEND,
        {
            "content": [{"type": "text", "text": "blocked"}],
            "details": {"status": "blocked", "deniedReason": "tool-loop"},
        },
        call_id="message-veto",
    )
    assert g.check("s", "message", SEND).blocked


def test_repeated_plugin_vetoes_escalate(g):
    """tool-loop-detection.test.ts: 'still escalates repeated plugin/approval vetoes to a critical loop'."""
    params = {"action": "read", "target": "feishu:oc_chat"}
    denial = {
        "content": [{"type": "text", "text": "blocked"}],
        "details": {"status": "blocked", "deniedReason": "plugin-before-tool-call"},
    }
    for i in range(CRITICAL):
        call(g, "s", "message", params, denial, call_id=f"veto-{i}")
    assert g.check("s", "message", params).blocked


def test_message_object_bare_id_is_stripped(g):
    """tool-loop-detection.test.ts: 'blocks plugin-shaped send results whose message object carries a bare per-send id'."""
    params = {"action": "send", "to": "feishu:chat-1", "content": "hello"}

    def payload(i):
        return {
            "message": {
                "id": f"qa_{i}",
                "accountId": "default",
                "direction": "outbound",
                "conversation": {"id": "loop-room", "chatType": "channel"},
                "senderId": "openclaw",
                "text": "hello",
                "timestamp": 1_800_000_000_000 + i,
            }
        }

    sends(g, "message", params, payload, CRITICAL)
    assert g.check("s", "message", params).blocked


def test_changing_conversation_id_keeps_sends_below_block(g):
    """tool-loop-detection.test.ts: 'does not escalate when a stable conversation id changes between sends'."""
    params = {"action": "send", "to": "feishu:chat-1", "content": "hello"}

    def payload(i):
        return {
            "message": {
                "id": f"qa_{i}",
                "direction": "outbound",
                "conversation": {"id": f"loop-room-{i}", "chatType": "channel"},
                "text": "hello",
            }
        }

    sends(g, "message", params, payload, CRITICAL)
    assert not g.check("s", "message", params).blocked


# ---------------------------------------------------------------- post-compaction loop guard

GATEWAY = ("gateway", {"action": "lookup", "path": "x"})


def test_post_compaction_guard_dormant_when_never_armed(g):
    """post-compaction-loop-guard.test.ts: 'is dormant when never armed'."""
    calls(g, "s", *GATEWAY, "r1", n=3)
    assert g.check("s", *GATEWAY) is ALLOW


def test_post_compaction_blocks_the_window_size_th_identical_call(g):
    """post-compaction-loop-guard.test.ts: 'aborts on the windowSize-th identical (tool,args,result) call within the window'.

    Deliberate difference (docs/peers.md): OpenClaw aborts the run once the third identical outcome
    after a compaction is observed; here the call after it is refused.
    """
    compaction(g, "s")
    calls(g, "s", *GATEWAY, "r1", n=3)
    d = g.check("s", *GATEWAY)
    assert (d.action, d.detector, d.count) == ("block", "compaction_loop", 3)
    assert "gateway" in d.message


def test_post_compaction_changing_result_is_progress(g):
    """post-compaction-loop-guard.test.ts: 'does NOT abort when the result hash changes (progress was made)'."""
    compaction(g, "s")
    calls(g, "s", "read", {"path": "/x"}, n=3, results=lambda i: f"r{i + 1}")
    assert g.check("s", "read", {"path": "/x"}) is ALLOW


def test_post_compaction_changing_args_is_progress(g):
    """post-compaction-loop-guard.test.ts: 'does NOT abort when the args hash changes'."""
    compaction(g, "s")
    for p in ("/a", "/b", "/c"):
        call(g, "s", "read", {"path": p}, "r1")
    assert g.check("s", "read", {"path": "/d"}) is ALLOW


def test_post_compaction_repeats_outside_the_window_do_not_count(make):
    """post-compaction-loop-guard.test.ts: 'does NOT abort outside the window' (a window of 2: once two calls
    closed it, identical calls after it are not a compaction loop)."""
    g = make(POLICY().replace(compaction_window=2))
    compaction(g, "s")
    call(g, "s", "read", {"path": "/x"}, "r1")
    call(g, "s", "read", {"path": "/y"}, "r2")
    calls(g, "s", "read", {"path": "/x"}, "r1", n=2)
    assert g.check("s", "read", {"path": "/x"}) is ALLOW


def test_post_compaction_rearms_on_the_next_compaction(g):
    """post-compaction-loop-guard.test.ts: 're-arms when armPostCompaction is called again (multiple compactions per run)'."""
    compaction(g, "s")
    for p in ("/a", "/b", "/c"):
        call(g, "s", "read", {"path": p}, "r")
    compaction(g, "s")
    calls(g, "s", "read", {"path": "/x"}, "r1", n=3)
    assert g.check("s", "read", {"path": "/x"}).detector == "compaction_loop"


def test_post_compaction_respects_the_disabled_policy(make):
    """post-compaction-loop-guard.test.ts: 'respects the parent loop detection disabled state'."""
    g = make(POLICY().replace(enabled=False))
    compaction(g, "s")
    calls(g, "s", "gateway", {"x": 1}, "r1", n=3)
    assert g.check("s", "gateway", {"x": 1}) is ALLOW


def test_post_compaction_disarms_after_window_size_calls(g):
    """post-compaction-loop-guard.test.ts: 'disarms after observing windowSize calls regardless of verdict'."""
    compaction(g, "s")
    call(g, "s", "read", {"path": "/a"}, "r1")
    call(g, "s", "write", {"path": "/b"}, "r2")
    call(g, "s", "exec", {"cmd": "ls"}, "r3")
    calls(g, "s", "read", {"path": "/x"}, "r1", n=3)
    assert g.check("s", "read", {"path": "/x"}) is ALLOW
