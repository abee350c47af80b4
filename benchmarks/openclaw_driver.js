// Replays a loopcore benchmark call stream through OpenClaw's own loop detector, with Node.
//
//     node benchmarks/openclaw_driver.js BUNDLE STREAM.json
//
// BUNDLE is a CommonJS module the user builds from OpenClaw's src/agents/tool-loop-detection.ts
// (this repository holds none of OpenClaw's code); it must export detectToolCallLoop,
// recordToolCall and recordToolCallOutcome with OpenClaw's signatures. STREAM.json is what
// `python benchmarks/bench_guard.py --dump-stream FILE` writes: a list of
// {session, tool, args, result, call_id}.
//
// Protocol (so the Python benchmark can interleave rounds with its own): after loading, the
// driver prints one JSON line {"ready": true, "calls": N}; then, for every line "run" on stdin,
// it replays the whole stream once with fresh per-session state, as a harness does (a check
// before each call, the call recorded, then its outcome; a call the detector vetoes is recorded
// with OpenClaw's own veto result), and prints one JSON line:
// {"ns": wall ns per call, "cpu_ns": process CPU ns per call, "warn": n, "block": n}.
// "quit" or the end of stdin ends it.
//
// Results are handed over in the shape OpenClaw's tools return (AgentToolResult): a text
// result as one text content block; an object result as its JSON text plus the object as
// `details` (where the detector reads exit codes, statuses and message ids). The conversion
// is done once, before any timing.
"use strict";

const fs = require("fs");
const path = require("path");
const readline = require("readline");

function fail(message) {
  process.stderr.write(`openclaw_driver: ${message}\n`);
  process.exit(2);
}

if (process.argv.length < 4) {
  fail("usage: node openclaw_driver.js BUNDLE STREAM.json");
}
const bundlePath = path.resolve(process.argv[2]);
let oc;
try {
  oc = require(bundlePath);
} catch (err) {
  fail(`cannot load the bundle ${bundlePath}: ${err && err.message}`);
}
for (const name of ["detectToolCallLoop", "recordToolCall", "recordToolCallOutcome"]) {
  if (typeof oc[name] !== "function") {
    fail(`the bundle ${bundlePath} does not export ${name}()`);
  }
}

const raw = JSON.parse(fs.readFileSync(process.argv[3], "utf8"));
const config = { enabled: true }; // OpenClaw's detector is off unless the config enables it
const VETO = { content: [], details: { status: "blocked", deniedReason: "tool-loop" } };

function toolResult(result) {
  if (typeof result === "string") {
    return { content: [{ type: "text", text: result }] };
  }
  return { content: [{ type: "text", text: JSON.stringify(result) }], details: result };
}

const stream = raw.map((c) => ({
  session: c.session,
  tool: c.tool,
  args: c.args,
  callId: c.call_id == null ? undefined : String(c.call_id),
  result: toolResult(c.result),
}));

function runOnce() {
  const states = new Map();
  let warn = 0;
  let block = 0;
  const cpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  for (const c of stream) {
    let state = states.get(c.session);
    if (state === undefined) {
      state = {};
      states.set(c.session, state);
    }
    const verdict = oc.detectToolCallLoop(state, c.tool, c.args, config);
    const vetoed = verdict.stuck === true && verdict.level === "critical";
    if (verdict.stuck === true) {
      if (vetoed) block += 1;
      else warn += 1;
    }
    oc.recordToolCall(state, c.tool, c.args, c.callId, config);
    oc.recordToolCallOutcome(state, {
      toolName: c.tool,
      toolParams: c.args,
      toolCallId: c.callId,
      result: vetoed ? VETO : c.result,
      config,
    });
  }
  const wall = Number(process.hrtime.bigint() - t0);
  const cpu = process.cpuUsage(cpu0);
  const n = stream.length || 1;
  return { ns: wall / n, cpu_ns: ((cpu.user + cpu.system) * 1000) / n, warn, block };
}

process.stdout.write(`${JSON.stringify({ ready: true, calls: stream.length })}\n`);
const lines = readline.createInterface({ input: process.stdin });
lines.on("line", (line) => {
  const cmd = line.trim();
  if (cmd === "run") {
    process.stdout.write(`${JSON.stringify(runOnce())}\n`);
  } else if (cmd === "quit") {
    lines.close();
  } else if (cmd) {
    fail(`unknown command ${JSON.stringify(cmd)}`);
  }
});
lines.on("close", () => process.exit(0));
