"""The guard benchmark's OpenClaw side: the Node driver's protocol and its skip reasons.

OpenClaw's code is not in this repository, so the driver is exercised with a stand-in bundle
written here (same three exports, a trivial detector); what is checked is the driver and the
benchmark's plumbing, not OpenClaw.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import sys

import pytest

BENCH = pathlib.Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))

import bench_guard  # noqa: E402

STAND_IN = r"""
"use strict";
// A stand-in detector: warns from the 3rd identical call in a session, blocks from the 5th.
function sig(tool, args) { return tool + ":" + JSON.stringify(args); }
exports.detectToolCallLoop = (state, tool, args, config) => {
  if (!config || config.enabled !== true) return { stuck: false };
  const n = (state.toolCallHistory || []).filter((h) => h.sig === sig(tool, args)).length + 1;
  if (n >= 5) return { stuck: true, level: "critical", detector: "generic_repeat", count: n };
  if (n >= 3) return { stuck: true, level: "warning", detector: "generic_repeat", count: n };
  return { stuck: false };
};
exports.recordToolCall = (state, tool, args, callId) => {
  (state.toolCallHistory = state.toolCallHistory || []).push({ sig: sig(tool, args), callId });
};
exports.recordToolCallOutcome = (state, params) => {
  if (typeof params.result !== "object" || !Array.isArray(params.result.content)) {
    throw new Error("the result is not in AgentToolResult shape");
  }
};
"""


def _stream():
    same = ("s1", "read", {"path": "a.py"}, "body", None)
    other = ("s2", "exec", {"command": "ls"}, {"status": "completed", "exitCode": 0}, None)
    return [(*same[:4], f"c{i}") for i in range(6)] + [(*other[:4], "c9")]


def test_skip_reasons_name_what_is_missing(tmp_path):
    runner, why = bench_guard.OpenClaw.start(None, _stream())
    assert runner is None and "no --openclaw bundle" in why
    runner, why = bench_guard.OpenClaw.start(str(tmp_path / "absent.cjs"), _stream())
    assert runner is None and ("does not exist" in why or "Node is not installed" in why)


@pytest.mark.skipif(shutil.which("node") is None, reason="Node is not installed")
def test_driver_replays_the_stream_round_after_round(tmp_path):
    bundle = tmp_path / "stand_in.cjs"
    bundle.write_text(STAND_IN)
    runner, why = bench_guard.OpenClaw.start(str(bundle), _stream())
    assert runner is not None, why
    try:
        assert runner.calls == 7
        first, second = runner.run(), runner.run()
    finally:
        runner.close()
    for r in (first, second):  # fresh state every round: the same decisions each time
        assert (r["warn"], r["block"]) == (2, 2)
        assert r["ns"] > 0 and r["cpu_ns"] >= 0


@pytest.mark.skipif(shutil.which("node") is None, reason="Node is not installed")
def test_a_bundle_without_the_exports_is_refused(tmp_path):
    bundle = tmp_path / "empty.cjs"
    bundle.write_text("exports.other = 1;\n")
    runner, why = bench_guard.OpenClaw.start(str(bundle), _stream())
    assert runner is None and "does not export detectToolCallLoop" in why


def test_dump_stream_writes_the_replayed_calls(tmp_path):
    out = tmp_path / "stream.json"
    stream = bench_guard.make_stream(50, 4)
    bench_guard.dump_stream(stream, str(out))
    data = json.loads(out.read_text())
    assert len(data) == 50
    assert set(data[0]) == {"session", "tool", "args", "result", "call_id"}
    assert [d["call_id"] for d in data] == [c[4] for c in stream]
