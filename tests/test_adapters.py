"""loopcore.load / detect_format over the project's own fixtures (tests/fixtures), one per format.

The adapters are pure Python (they only feed the core), so these tests do not take ``impl``.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import pathlib
import shutil
import sys

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import loopcore
import loopcore.adapters
import loopcore.trace
from loopcore.adapters import FORMATS, LoadStats, TraceFormatError, detect_format, load

FIX = pathlib.Path(__file__).parent / "fixtures"

FIXTURE_FORMATS = {
    "loopcore_steps.jsonl": "loopcore",
    "openai_chat.json": "openai-chat",
    "openai_responses_items.json": "openai-responses",
    "codex_rollout.jsonl": "codex",
    "codex_rollout_unified_exec.jsonl": "codex",
    "codex_rollout_code_mode.jsonl": "codex",
    "anthropic_messages.json": "anthropic",
    "claude_code_session.jsonl": "claude-code",
    "claude_code_progress.jsonl": "claude-code",
    "openai_chat_reasoning.json": "openai-chat",
    "otel_genai_spans.json": "otel",
    "otel_genai_protojson.json": "otel",
    "anthropic_server_tools.json": "anthropic",
    "openai_responses_builtin_tools.json": "openai-responses",
    "mini_swe_agent_v2.json": "mini-swe-agent",
    "mini_swe_agent_v1.json": "mini-swe-agent",
    "mini_swe_agent_v2_textbased.json": "mini-swe-agent",
    "codex_rollout_0146.jsonl": "codex",
    "swe_agent_text.json": "swe-agent",
    "swe_agent_function_calling.json": "swe-agent",
    "swe_agent_0x_linted_edit.json": "swe-agent",
    "tau_bench.json": "tau-bench",
    "tau2_bench.json": "tau-bench",
    "openhands_events.json": "openhands",
    "gemini_cli_session.json": "gemini-cli",
    "gemini_cli_checkpoint.json": "gemini-cli",
    "gemini_cli_session.jsonl": "gemini-cli",
    "openhands_v1_export.json": "openhands",
    "openhands_resolver_2024.jsonl": "openhands",
    "opencode_export.json": "opencode",
    "cline_task/1760001234567/api_conversation_history.json": "cline",
    "roo_task/019a2b3c-4d5e-7f60-8a9b-0c1d2e3f4a5b/api_conversation_history.json": "cline",
}


def calls(t: loopcore.Trace) -> list:
    """The steps that are tool calls (not the replies or rejected turns of the trace)."""
    return [s for s in t if s.name and s.rejected is None]


def one(name: str, **kw) -> loopcore.Trace:
    traces = list(load(FIX / name, **kw))
    assert len(traces) == 1, traces
    return traces[0]


def test_every_format_has_a_fixture():
    assert set(FIXTURE_FORMATS.values()) == set(FORMATS)


@pytest.mark.parametrize("name,fmt", sorted(FIXTURE_FORMATS.items()))
def test_detect_and_load_every_fixture(name, fmt):
    assert detect_format(FIX / name) == fmt
    traces = list(load(FIX / name))
    assert traces and all(t.format == fmt for t in traces)
    for t in traces:
        assert t.meta["format_detected"] is True
        assert t.meta["tokens_source"] in (
            "usage",
            "estimate",
            "mixed",
        )  # "none" only without steps
        assert t.meta["skipped"] == 0
        assert t.steps, name
        for s in t:
            assert s.kind in loopcore.trace.KINDS
            assert s.session == t.session
            assert s.tokens_in >= 0 and s.tokens_out >= 0


# Cline reads ui_messages.json beside its history file: a parsed object has no such neighbour.
_SIDECARS = {"cline_task/1760001234567/api_conversation_history.json"}


@pytest.mark.parametrize(
    "name,fmt", sorted((k, v) for k, v in FIXTURE_FORMATS.items() if k not in _SIDECARS)
)
def test_parsed_objects_load_like_files(name, fmt):
    """load() takes already-parsed objects too; only the session names (file stems) differ, and
    for loopcore steps the default coordinate (a file's line, an object's record index)."""
    path = FIX / name
    data = path.read_bytes()
    if name.endswith(".jsonl"):
        obj = [orjson.loads(line) for line in data.splitlines() if line.strip()]
    else:
        obj = orjson.loads(data)
    assert detect_format(obj) == fmt
    from_file = [s.to_dict() for t in load(path) for s in t]
    from_obj = [s.to_dict() for t in load(obj) for s in t]
    for d in from_file + from_obj:
        d.pop("session")
        if fmt == "loopcore":
            ref = d.pop("ref")
            assert set(ref) <= {"line", "record"}
    assert from_obj == from_file


def test_explicit_format_overrides_detection():
    t = one("openai_chat.json", format="openai-chat")
    assert t.format == "openai-chat" and "format_detected" not in t.meta
    # An alias resolves to its format.
    assert one("openai_chat.json", format="chat").format == "openai-chat"


def test_unknown_format_name_lists_the_known_ones():
    with pytest.raises(ValueError) as ei:
        load(FIX / "openai_chat.json", format="nonsense")
    for name in FORMATS:
        assert name in str(ei.value)
    assert not isinstance(ei.value, TraceFormatError)


# ---- OpenAI chat ----------------------------------------------------------------------------


def test_openai_chat_usage_split_and_context_growth():
    t = one("openai_chat.json")
    assert t.meta["tokens_source"] == "usage"
    read, grep, write, done = t.steps
    assert (read.kind, read.target, read.turn) == ("observe", "a.py", 0)
    assert (grep.kind, grep.target, grep.turn) == ("observe", "b.py", 0)
    assert (write.kind, write.target, write.turn) == ("mutate", "a.py", 1)
    # the completion tokens of a response are split over its text and its calls by characters
    # (the rest, here the rounding, is the turn's own output)
    assert (read.tokens_out, grep.tokens_out, write.tokens_out) == (8, 11, 10)
    assert read.tokens_out + grep.tokens_out + read.tokens_turn == 20
    # prompt growth 200 - 100 - 20 = 80, split 30:10 by result length; then 260 - 200 - 10 = 50
    assert (read.tokens_in, grep.tokens_in, write.tokens_in) == (60, 20, 50)
    assert not t.tokens_estimated
    assert read.call_id == "c1" and read.args == {"path": "a.py"}
    # the final reply ran nothing and is a step too: every turn counts
    assert (done.kind, done.name, done.text, done.tokens_out) == ("other", "", "Done.", 5)
    assert [s.ref for s in t] == [{"message": 2}, {"message": 2}, {"message": 5}, {"message": 7}]
    assert t.total_tokens == 165


def _reasoning_chat(
    p2: int, p3: int, *, results: tuple[str, str] = ("x = 1\n", "y" * 40), note: bool = False
):
    """Three API calls of a chat: the first two each issue one call and reason (500 and 300 of
    their 520 and 330 completion tokens), with prompts 1000, *p2* and *p3*; *note* puts a user
    message in the first gap."""

    def call(cid, path, p, c, r):
        fn = {"name": "read_file", "arguments": json.dumps({"path": path})}
        u = {"prompt_tokens": p, "completion_tokens": c}
        u["completion_tokens_details"] = {"reasoning_tokens": r}
        tc = [{"id": cid, "type": "function", "function": fn}]
        return {"role": "assistant", "content": "", "tool_calls": tc, "usage": u}

    msgs = [{"role": "user", "content": "task"}, call("c1", "a.py", 1000, 520, 500)]
    msgs.append({"role": "tool", "tool_call_id": "c1", "content": results[0]})
    if note:
        msgs.append({"role": "user", "content": "keep going"})
    msgs.append(call("c2", "b.py", p2, 330, 300))
    msgs.append({"role": "tool", "tool_call_id": "c2", "content": results[1]})
    done = {"prompt_tokens": p3, "completion_tokens": 5}
    msgs.append({"role": "assistant", "content": "Done.", "usage": done})
    (t,) = load(msgs)
    return calls(t)


def test_reasoning_the_next_prompt_holds_is_not_charged_to_the_results():
    # every prompt grew by the whole completion before it: 1000 -> 1530 -> 1872, the first
    # gap by 510 more than the 20 visible tokens and 6 result characters can hold
    c1, c2 = _reasoning_chat(1000 + 520 + 10, 1530 + 330 + 12)
    assert (c1.tokens_in, c2.tokens_in) == (10, 12)  # not 510 and 312, the reasoning again
    # the reasoning stays the turn's own output, beside the call's share
    assert c1.tokens_out + c1.tokens_turn == 520 and c2.tokens_out + c2.tokens_turn == 330
    assert not c1.tokens_estimated and not c2.tokens_estimated


def test_reasoning_left_out_of_the_next_prompt_is_read_so():
    # the first gap grew by 30 < 520: that call's reasoning never reached the next prompt,
    # so no prompt holds reasoning and the growth less the visible completion is the results'
    c1, c2 = _reasoning_chat(1000 + 20 + 10, 1030 + 30 + 12)
    assert (c1.tokens_in, c2.tokens_in) == (10, 12)
    # a trace whose gaps disagree (the first shows its reasoning kept, the second left out)
    # is read as it is, as before this rule
    c1, c2 = _reasoning_chat(1000 + 520 + 10, 1530 + 30 + 12)
    assert (c1.tokens_in, c2.tokens_in) == (510, 12)


def test_one_gap_a_few_tokens_short_does_not_outvote_the_reasoning_kept():
    # a public Claude Code 2.1.177 session: 95 gaps held the whole completion, one grew by 29
    # tokens less than its 160 (a prompt's count of a thinking block sent back is not exactly
    # its output's); that gap alone had every turn's reasoning counted twice (29% of the
    # session). A shortfall within the framing slack shows nothing either way.
    c1, _c2 = _reasoning_chat(1000 + 520 + 10, 1530 + 330 - 29)
    assert c1.tokens_in == 10  # not 510: the reasoning the next prompt holds again
    # a gap far short of its completion still shows the reasoning left out
    c1, _c2 = _reasoning_chat(1000 + 520 + 10, 1530 + 330 - 200)
    assert c1.tokens_in == 510


def test_reasoning_with_no_gap_that_shows_where_it_went_is_read_as_left_out():
    # results large enough to hold the reasoning: neither kind of gap, the prompts as they are
    big = ("x" * 4000, "y" * 4000)
    c1, c2 = _reasoning_chat(1000 + 520 + 600, 2120 + 330 + 1000, results=big)
    assert c1.tokens_in == 2120 - 1000 - 20 and c2.tokens_in == 3450 - 2120 - 30
    # a user message in a gap that grew by less than the completion proves nothing (a new
    # request may start without the reasoning before it); the other gap shows it kept
    c1, c2 = _reasoning_chat(1000 + 20 + 10, 1030 + 330 + 12, note=True)
    assert c2.tokens_in == 12  # 1372 - 1030 less the whole completion, 330
    assert c1.tokens_estimated  # 1030 - 500 carried - 1000 - 20 < 0: no growth to split


def test_openai_chat_without_usage_is_estimated():
    msgs = [
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "1", "function": {"name": "read_file", "arguments": '{"path": "x"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "1", "content": "y" * 40},
    ]
    (t,) = load(msgs)
    (s,) = t.steps
    assert t.meta["tokens_source"] == "estimate"
    assert s.tokens_estimated and s.tokens_in == 10  # ceil(40 / 4)
    assert s.tokens_out == (len('{"path": "x"}') + len("read_file") + 3) // 4


def test_unparseable_arguments_are_kept_not_fatal():
    msgs = [
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "1", "function": {"name": "bash", "arguments": '{"command": "ls'}}
            ],
        },
        {"role": "tool", "tool_call_id": "1", "content": "a"},
    ]
    (t,) = load(msgs)
    assert t.steps[0].args == '{"command": "ls' and t.steps[0].meta["unparsed_args"] is True


# ---- tau-bench ------------------------------------------------------------------------------


def test_tau_bench_reused_ids_pair_with_the_message_right_before():
    traces = list(load(FIX / "tau_bench.json"))
    assert [t.session for t in traces] == ["task-0/trial-0", "task-1/trial-0"]
    assert [t.source for t in traces] == [
        f"{FIX / 'tau_bench.json'}#0",
        f"{FIX / 'tau_bench.json'}#1",
    ]
    user, calc, update = traces[0].steps
    assert user.call_id == calc.call_id == "call_X"
    assert (user.name, user.result) == ("get_user_details", '{"name": "Ann"}')
    assert (calc.name, calc.result) == ("calculate", "2")
    assert (user.kind, user.target) == ("observe", "u1")
    assert calc.kind == "other"
    assert (update.kind, update.target) == ("mutate", "R1")
    assert update.error == "Error: cabin not available"
    assert traces[0].meta["tokens_source"] == "estimate" and traces[0].meta["reward"] == 1.0
    assert traces[1].meta["unanswered"] == 0 and traces[1].steps[0].result == "Transfer successful"


def test_tau2_bench_simulations_are_read():
    """tau2-bench results (``simulations`` of their own message shape) were not read at all."""
    first, second = load(FIX / "tau2_bench.json")
    assert (first.session, second.session) == ("task-t1/trial-0", "task-t1/trial-1")
    assert first.source == f"{FIX / 'tau2_bench.json'}#0"
    assert first.meta["reward"] == 1.0 and first.meta["termination_reason"] == "user_stop"
    assert first.meta["unanswered"] == 0 and second.meta["reward"] is None
    names = [(s.name, s.ref) for s in first]
    # the orchestrator's greeting is no turn, the user's own device calls are no steps
    assert names == [
        ("get_details_by_id", {"message": 2}),
        ("get_details_by_id", {"message": 4}),
        ("", {"message": 6}),
        ("get_details_by_id", {"message": 10}),
        ("", {"message": 12}),
    ]
    line, plan, _reply, again, _done = first.steps
    assert (line.kind, line.target, line.args) == ("observe", "L1", {"id": "L1"})
    assert line.result.startswith('{"line_id"') and line.error is None
    assert plan.error == "Error: P9 not found"
    # the user toggled roaming on their phone: the agent's next look is after a change
    assert again.after_user and not line.after_user


def test_tau2_bench_thinking_is_not_charged_to_results():
    """gemini's thoughts are in the completion and do not return in the next prompt: read as
    the turn's reasoning, not as the prompt's growth left to its results."""
    first, _ = load(FIX / "tau2_bench.json")
    line, plan = first.steps[:2]
    assert first.meta["tokens_source"] == "usage"
    assert not line.tokens_estimated and not plan.tokens_estimated
    # the prompt grew by 40 over a completion of 300: the result is what is left after the
    # call's visible output, not an estimate, and the simulated user's usage is not read
    assert 0 < line.tokens_in < 40 and line.tokens_out + line.tokens_turn == 300
    burn = loopcore.analyse_burn(first)
    assert burn.wasted_tokens == 0


def test_reused_id_across_turns_with_missing_result():
    """A call left unanswered must not steal the result of a later call with the same id."""
    tc = lambda name: {"id": "dup", "function": {"name": name, "arguments": "{}"}}  # noqa: E731
    msgs = [
        {"role": "assistant", "tool_calls": [tc("get_a")]},
        {"role": "user", "content": "interrupted"},
        {"role": "assistant", "tool_calls": [tc("get_b")]},
        {"role": "tool", "tool_call_id": "dup", "content": "b"},
    ]
    (t,) = load(msgs, format="openai-chat")
    a, b = t.steps
    assert a.result is None and b.result == "b"
    assert t.meta["unanswered"] == 1


# ---- mini-swe-agent -------------------------------------------------------------------------


def test_mini_swe_agent_tool_calling():
    t = one("mini_swe_agent_v2.json")
    assert t.session == "demo__demo-1" and t.meta["exit_status"] == "Submitted"
    cat, rejected, sed, pytest_, submit = t.steps
    # the harness's format-error message stands for the turn it rejected (the trace did not keep it)
    assert rejected.rejected.startswith("Tool call error") and rejected.ref == {"message": 4}
    assert (cat.kind, cat.target, cat.args) == ("observe", "a.py", {"command": "cat a.py"})
    assert (sed.kind, sed.target) == ("mutate", "a.py")
    assert pytest_.kind == "exec" and pytest_.meta["returncode"] == 1
    assert pytest_.error is None  # a non-zero exit is a result, not an error of the call
    # the submitting call is answered by the exit message, which no later prompt contains
    assert submit.meta["final"] is True and submit.result.startswith("diff --git")
    assert submit.tokens_in == 0
    assert [s.tokens_out for s in t if not s.rejected] == [50, 30, 20, 10]
    # the rejected turn has no usage of its own: the result before it is estimated
    assert 0 < cat.tokens_in < 50
    assert sed.tokens_in == 1200 - 1100 - 30
    assert pytest_.tokens_in == 1300 - 1200 - 20
    assert t.meta["tokens_source"] == "mixed" and t.meta["unanswered"] == 0


def test_mini_swe_agent_text_actions_and_format_errors():
    t = one("mini_swe_agent_v1.json")
    assert t.meta["format_errors"] == 1
    cat, rejected, sleep, submit = t.steps
    assert cat.args == {"command": "cat a.py"} and cat.meta["returncode"] == 0
    assert (cat.turn, rejected.turn, sleep.turn, submit.turn) == (0, 1, 2, 3)
    # the format error: nothing ran; the harness's answer is its message and its result tokens
    assert rejected.kind == "other" and rejected.rejected.startswith(
        "Please always provide EXACTLY ONE action"
    )
    assert (
        rejected.text.startswith("THOUGHT: two things.")
        and rejected.tokens_in > 0
        and rejected.tokens_turn == 0
    )
    assert [s.ref for s in t] == [{"message": 2}, {"message": 4}, {"message": 6}, {"message": 8}]
    assert cat.text.startswith("THOUGHT: look first.") and cat.tokens_turn > 0
    assert sleep.error == "timeout"
    assert submit.meta["final"] is True and submit.tokens_in == 0
    assert cat.tokens_in == 540 - 500 - 20


# ---- SWE-agent ------------------------------------------------------------------------------


def test_swe_agent_text_actions_track_the_open_file():
    t = one("swe_agent_text.json")
    opened, edit, scroll, run, submit = t.steps
    assert opened.name == "open" and opened.target == "/repo/src/a.py" and opened.kind == "observe"
    assert (edit.name, edit.kind, edit.target) == ("edit", "mutate", "/repo/src/a.py")
    assert edit.args == {"command": "edit 1:1\nx = 2\nend_of_edit"}
    assert (scroll.kind, scroll.target) == ("observe", "/repo/src/a.py")
    assert (run.name, run.kind) == ("bash", "exec")
    assert submit.result is None and t.meta["unanswered"] == 1  # submit has no observation
    assert t.meta["tokens_source"] == "estimate" and t.meta["tokens_sent"] == 500


def test_swe_agent_function_calling_tool_call_ids_list():
    t = one("swe_agent_function_calling.json")
    find, view, submit = t.steps
    assert find.call_id == "call_1" and find.result.startswith("Found 1 matches")
    assert (view.kind, view.target) == ("observe", "/repo/x.py")
    assert submit.result.startswith("diff --git") and t.meta["unanswered"] == 0


# ---- Anthropic / Claude Code ----------------------------------------------------------------


def test_anthropic_messages():
    t = one("anthropic_messages.json")
    read, grep, edit, reply = t.steps
    assert (read.kind, read.target, read.result) == ("observe", "a.ts", "const foo = 1;")
    assert grep.result == "src/a.ts:1:foo"  # text blocks joined, out-of-order results paired by id
    assert edit.error == "old_string not found" and edit.kind == "mutate"
    # the completion is split over the turn's text and its calls by characters
    assert (read.tokens_out, grep.tokens_out, edit.tokens_out) == (
        7,
        10,
        30,
    ) and read.tokens_turn == 3
    assert (read.text, reply.kind, reply.name, reply.text) == ("Looking.", "other", "", "Sorry.")
    assert [s.ref for s in t] == [{"message": 1}, {"message": 1}, {"message": 3}, {"message": 5}]
    # prompt = input + cache reads: 100 -> 180 (growth 60 after 20 out), 180 -> 225 (growth 15)
    assert read.tokens_in + grep.tokens_in == 60 and edit.tokens_in == 15


def test_claude_code_split_message_usage_counted_once():
    traces = list(load(FIX / "claude_code_session.jsonl"))
    main, side = traces
    assert main.session == "0f1e2d3c-0000-4000-8000-000000000001"
    assert side.session == main.session + "/sidechain" and side.steps[0].name == "Glob"
    read, bash = calls(main)
    # one API message over three lines: its 40 output tokens are counted once, not 5 + 30 + 40
    assert read.tokens_out + read.tokens_turn == 40 and read.turn == 0 and bash.turn == 1
    assert read.tokens_in == 185 - 110 - 40
    assert (bash.kind, bash.error) == ("exec", "Error: 1 test failed")
    assert bash.tokens_in == 233 - 185 - 12
    assert main.source.endswith("#0") and side.source.endswith("#1")


def _claude_line(uuid: str, parent: str | None, kind: str, message: dict) -> str:
    return json.dumps(
        {
            "parentUuid": parent,
            "isSidechain": False,
            "sessionId": "s-advisor",
            "version": "2.1.101",
            "type": kind,
            "message": message,
            "uuid": uuid,
            "timestamp": "2026-04-14T00:00:00Z",
        }
    )


def test_claude_code_usage_of_several_sampling_passes_reads_the_first_prompt(tmp_path):
    """A response sampled in passes (the advisor server tool runs between them) reports the sum
    of the passes' prompts beside ``usage.iterations``; the prompt it began with, what the
    results before it added to, is its first pass's (the shape of Claude Code 2.1.101)."""

    def usage(i, cc, cr, out, passes=None):
        u = {"input_tokens": i, "cache_creation_input_tokens": cc, "cache_read_input_tokens": cr}
        u["output_tokens"] = out
        u["iterations"] = passes or [dict(u, type="message")]
        return u

    first = {"input_tokens": 600, "cache_creation_input_tokens": 8000}
    first |= {"cache_read_input_tokens": 39000, "output_tokens": 1700, "type": "message"}
    advisor = {"input_tokens": 51000, "output_tokens": 2200, "type": "advisor_message"}
    last = {"input_tokens": 1, "cache_creation_input_tokens": 3000}
    last |= {"cache_read_input_tokens": 48000, "output_tokens": 100, "type": "message"}

    def call(mid, tid, u):
        content = [{"type": "tool_use", "id": tid, "name": "Read", "input": {"file_path": tid}}]
        return {"id": mid, "type": "message", "role": "assistant", "content": content, "usage": u}

    def answer(tid, text):
        content = [{"type": "tool_result", "tool_use_id": tid, "content": text}]
        return {"role": "user", "content": content}

    lines = [
        _claude_line("u1", None, "user", {"role": "user", "content": "Review the PR"}),
        _claude_line("u2", "u1", "assistant", call("m1", "t1", usage(1, 3000, 36000, 200))),
        _claude_line("u3", "u2", "user", answer("t1", "x" * 4000)),
        _claude_line(
            "u4",
            "u3",
            "assistant",
            call("m2", "t2", usage(601, 11000, 87000, 1800, [first, advisor, last])),
        ),
        _claude_line("u5", "u4", "user", answer("t2", "y" * 400)),
        _claude_line("u6", "u5", "assistant", call("m3", "t3", usage(1, 2000, 49000, 50))),
    ]
    path = tmp_path / "advisor.jsonl"
    path.write_text("\n".join(lines) + "\n")
    (t,) = load(path)
    read1, read2, _read3 = calls(t)
    # 47,600 (the first pass's prompt) - 39,001 - 200, not 98,601 (the sum) - 39,001 - 200
    assert read1.tokens_in == 47600 - 39001 - 200 and not read1.tokens_estimated
    assert read2.tokens_in == 51001 - 47600 - 1800 and not read2.tokens_estimated
    assert read2.tokens_out + read2.tokens_turn == 1800  # the passes' outputs, counted once


def test_claude_code_thinking_tokens_are_the_turns_not_the_calls(tmp_path):
    """Claude Code 2.1.2xx writes the thinking inside ``output_tokens`` as
    ``usage.output_tokens_details.thinking_tokens`` (the Messages API's field): it is the turn's
    reasoning, read as ``reasoning_tokens`` is, never split over the turn's calls."""

    def session(details_key):
        def usage(cr, out, thinking):
            u = {"input_tokens": 1, "cache_creation_input_tokens": 0}
            u |= {"cache_read_input_tokens": cr, "output_tokens": out}
            if details_key:
                u["output_tokens_details"] = {details_key: thinking}
            return u

        def call(mid, tid, path, u):
            content = [
                {"type": "thinking", "thinking": "", "signature": "sig"},
                {"type": "tool_use", "id": tid, "name": "Read", "input": {"file_path": path}},
            ]
            return {"id": mid, "type": "message", "role": "assistant", "content": content,
                    "usage": u}  # fmt: skip

        def answer(tid, text):
            return {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": tid, "content": text}]}  # fmt: skip

        lines = [
            _claude_line("u1", None, "user", {"role": "user", "content": "look"}),
            _claude_line("u2", "u1", "assistant", call("m1", "t1", "a.py", usage(9000, 650, 600))),
            _claude_line("u3", "u2", "user", answer("t1", "x" * 2000)),
            _claude_line("u4", "u3", "assistant", call("m2", "t2", "b.py", usage(9700, 80, 40))),
            _claude_line("u5", "u4", "user", answer("t2", "y" * 400)),
            _claude_line("u6", "u5", "assistant", call("m3", "t3", "c.py", usage(9900, 60, 0))),
        ]
        path = tmp_path / f"{details_key}.jsonl"
        path.write_text("\n".join(lines) + "\n")
        (t,) = load(path)
        return [(s.tokens_in, s.tokens_out, s.tokens_turn) for s in calls(t)]

    thinking, reasoning, none = (
        session("thinking_tokens"),
        session("reasoning_tokens"),
        session(None),
    )
    assert thinking == reasoning and thinking != none
    (_in1, out1, turn1), (_in2, out2, turn2), _ = thinking
    assert out1 + turn1 == 650 and turn1 >= 600  # the 600 thinking tokens are the turn's
    assert out2 + turn2 == 80 and turn2 >= 40
    # without the field, the withheld thinking (an empty block, its signature) is still the
    # turn's: the call keeps what its own characters can hold
    assert none[0][1] + none[0][2] == 650 and none[0][1] <= 10


def test_claude_code_message_typed_mid_turn_is_the_person_s(tmp_path):
    """Claude Code 2.1.2xx writes a message the person types while the agent works as a
    ``queued_command`` attachment (``commandMode: prompt``, ``origin.kind: human``), never as a
    user record: the run after it is after the person's message, so a re-run they asked for is
    not charged. A background task's notification, queued the same way, is not the person's."""

    def session(origin, mode="prompt"):
        def bash(mid, tid, cmd, inp):
            content = [{"type": "tool_use", "id": tid, "name": "Bash", "input": {"command": cmd}}]
            u = {"input_tokens": inp, "output_tokens": 20}
            return {"id": mid, "role": "assistant", "content": content, "usage": u}

        def result(tid, text):
            return {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": tid, "content": text}]}  # fmt: skip

        queued = {"type": "queued_command", "prompt": "run the tests again", "commandMode": mode}
        if origin is not None:
            queued["origin"] = {"kind": origin}
        att = json.loads(_claude_line("u4", "u3", "attachment", {}))
        del att["message"]
        att["attachment"] = queued
        att["rendered"] = [{"content": "<system-reminder>run the tests again</system-reminder>"}]
        lines = [
            _claude_line("u1", None, "user", {"role": "user", "content": "test it"}),
            _claude_line("u2", "u1", "assistant", bash("m1", "t1", "pnpm test", 1000)),
            _claude_line("u3", "u2", "user", result("t1", "3 passed\n" * 300)),
            json.dumps(att),
            _claude_line("u5", "u4", "assistant", bash("m2", "t2", "pnpm test", 1800)),
            _claude_line("u6", "u5", "user", result("t2", "3 passed\n" * 300)),
            _claude_line("u7", "u6", "assistant", bash("m3", "t3", "git status", 2600)),
        ]
        path = tmp_path / f"{origin}-{mode}.jsonl"
        path.write_text("\n".join(lines) + "\n")
        (t,) = load(path)
        return t

    for origin in ("human", None):
        t = session(origin)
        assert t.steps[1].after_user, origin
        assert loopcore.analyse_burn(t).findings == ()
        # the reminder's 55 characters took their share of the prompt's growth
        assert t.steps[0].tokens_in < 1800 - 1000 - 20
    notified = session("task-notification", "task-notification")
    assert not notified.steps[1].after_user
    assert [f.kind for f in loopcore.analyse_burn(notified).findings] == ["duplicate_call"]


def test_claude_code_message_queued_mid_turn_is_the_person_s(tmp_path):
    """Claude Code 2.1.3x-2.1.5x writes a message typed while the agent works only as a
    ``queue-operation`` record (``enqueue`` with its text, later a bare ``remove``): the model
    reads it beside the next result and no user record follows. The person asked to start again
    on a fresh branch: writing the same file again after the ``git stash`` is what they asked
    for, no oscillation. What Claude Code queues itself (a background task's record, its
    ``<task-notification>``) is not the person's."""

    def session(queued):
        def write(mid, tid, text, inp):
            content = [{"type": "tool_use", "id": tid, "name": "Write",
                        "input": {"file_path": "/w/index.ts", "content": text}}]  # fmt: skip
            return {"id": mid, "role": "assistant", "content": content,
                    "usage": {"input_tokens": inp, "output_tokens": 20}}  # fmt: skip

        def bash(mid, tid, cmd, inp):
            content = [{"type": "tool_use", "id": tid, "name": "Bash", "input": {"command": cmd}}]
            return {"id": mid, "role": "assistant", "content": content,
                    "usage": {"input_tokens": inp, "output_tokens": 20}}  # fmt: skip

        def result(tid, text):
            return {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": tid, "content": text}]}  # fmt: skip

        queue = {"type": "queue-operation", "operation": "enqueue", "sessionId": "s-advisor",
                 "timestamp": "2026-02-21T00:22:41Z", "content": queued}  # fmt: skip
        lines = [
            _claude_line("u1", None, "user", {"role": "user", "content": "drop the old provider"}),
            _claude_line("u2", "u1", "assistant", write("m1", "t1", "export * from './a';\n", 900)),
            json.dumps(queue),
            _claude_line("u3", "u2", "user", result("t1", "The file has been updated.")),
            json.dumps({"type": "queue-operation", "operation": "remove", "sessionId": "s-advisor"}),
            _claude_line("u4", "u3", "assistant", write("m2", "t2", "export * from './b';\n", 1000)),
            _claude_line("u5", "u4", "user", result("t2", "The file has been updated.")),
            _claude_line("u6", "u5", "assistant", bash("m3", "t3", "git stash && git checkout main", 1100)),
            _claude_line("u7", "u6", "user", result("t3", "Saved working directory")),
            _claude_line("u8", "u7", "assistant", write("m4", "t4", "export * from './a';\n", 1200)),
            _claude_line("u9", "u8", "user", result("t4", "The file has been updated.")),
        ]  # fmt: skip
        path = tmp_path / "s-advisor.jsonl"
        path.write_text("\n".join(lines) + "\n")
        (t,) = load(path)
        return t

    typed = session("before making changes, switch to main and pull, then branch anew")
    assert typed.steps[1].after_user and not typed.steps[2].after_user
    assert loopcore.analyse_burn(typed).findings == ()
    for own in (
        '{"task_id":"bf17bbd","tool_use_id":"toolu_1","description":"Start API","task_type":"local_bash"}',
        "<task-notification>\n<task-id>b7b788a</task-id>\n</task-notification>",
    ):
        t = session(own)
        assert not any(s.after_user for s in t.steps[1:]), own
        assert [f.kind for f in loopcore.analyse_burn(t).findings] == ["oscillation"], own


def test_claude_code_profile_reads_structured_output_as_the_reply():
    # `claude -p --json-schema` ends with a StructuredOutput call (its result "Structured output
    # provided successfully"): the run's answer, which writes nothing, so no epoch advances
    prof = loopcore.taxonomy.PROFILES["claude-code"]
    assert prof.access("StructuredOutput", {"route": "complete"})[:2] == ("other", None)


# ---- OpenTelemetry / Responses / OpenHands / gemini-cli -------------------------------------


def test_otel_execute_tool_spans():
    t = one("otel_genai_spans.json")
    assert t.session == "conv-1"
    weather, email = t.steps  # ordered by start time, not by position in the file
    assert weather.args == {"city": "Paris"} and weather.result == '{"temp_c": 20}'
    assert weather.call_id == "call_w" and weather.tokens_out == 20
    assert weather.tokens_in == 150 - 100 - 20
    assert email.error == "SmtpError" and email.kind == "mutate" and email.turn == 1


def test_openai_responses_items_pair_by_call_id():
    t = one("openai_responses_items.json")
    paris, lyon, reply = t.steps
    assert paris.args == {"city": "Paris"} and paris.result == '{"temp_c": 20}'
    assert lyon.result == '{"temp_c": 18}' and paris.turn == lyon.turn == 0
    assert (reply.name, reply.text, reply.ref) == ("", "20 C in Paris.", {"message": 6})


def test_codex_rollout_shell_and_apply_patch():
    t = one("codex_rollout.jsonl")
    assert t.session == "sess-codex-1"
    shell, patch = calls(t)
    assert (shell.kind, shell.target, shell.result) == ("observe", "README.md", "hello\n")
    assert shell.meta["returncode"] == 0
    assert (patch.kind, patch.target) == ("mutate", "README.md")
    assert shell.tokens_out + shell.tokens_turn == 50 and patch.tokens_out + patch.tokens_turn == 40
    assert shell.tokens_in == 1100 - 1000 - 40  # visible output excludes the 10 reasoning tokens


def test_claude_code_result_written_before_its_call_is_paired(tmp_path):
    """Claude Code at times writes a tool result one line before the tool_use it answers (the
    result's parentUuid names the call's record, as in a 2.1.101 session): read after it."""

    def call(mid, tid, cmd, prompt):
        content = [{"type": "tool_use", "id": tid, "name": "Bash", "input": {"command": cmd}}]
        usage = {"input_tokens": prompt, "output_tokens": 10}
        return {"id": mid, "role": "assistant", "content": content, "usage": usage}

    def answer(tid, text):
        return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid,
                                             "content": text}]}  # fmt: skip

    lines = [
        _claude_line("u1", None, "user", {"role": "user", "content": "commit it"}),
        _claude_line("u2", "u1", "assistant", call("m1", "t1", "git status", 100)),
        _claude_line("u3", "u2", "user", answer("t1", "clean")),
        _claude_line("u5", "u4", "user", answer("t2", "[main 6e24] done")),  # before its call
        _claude_line("u4", "u3", "assistant", call("m2", "t2", "git commit -m x", 200)),
        _claude_line("u6", "u5", "assistant", call("m3", "t3", "git push", 260)),
        _claude_line("u7", "u6", "user", answer("t3", "pushed")),
    ]
    path = tmp_path / "early-result.jsonl"
    path.write_text("\n".join(lines) + "\n")
    (t,) = load(path)
    status, commit, push = calls(t)
    assert commit.result == "[main 6e24] done" and commit.ref == {"line": 5}
    assert commit.tokens_in == 260 - 200 - 10 and not commit.tokens_estimated
    assert t.meta["unanswered"] == 0 and "orphan_results" not in t.meta
    assert [s.result for s in (status, push)] == ["clean", "pushed"]


def _progress_session(folder: pathlib.Path, *, own_file: bool) -> pathlib.Path:
    """A Claude Code 2.1.7x session whose sub-agent's records are copied into ``progress``
    records of the main file (and, with *own_file*, also written to its own file)."""

    def progress(uuid, kind, message):
        rec = json.loads(_claude_line(uuid, None, "progress", {}))
        del rec["message"]
        data = {"message": {"type": kind, "message": message, "uuid": uuid + "-in"}}
        rec["data"] = data | {"type": "agent_progress", "prompt": "", "agentId": "a9"}
        rec["parentToolUseID"] = "t1"
        return json.dumps(rec)

    def read(mid, tid, path, prompt):
        content = [{"type": "tool_use", "id": tid, "name": "Read", "input": {"file_path": path}}]
        return {"id": mid, "role": "assistant", "content": content,
                "usage": {"input_tokens": prompt, "output_tokens": 5}}  # fmt: skip

    def result(tid, text):
        return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid,
                                             "content": text}]}  # fmt: skip

    task = {"type": "tool_use", "id": "t1", "name": "Task", "input": {"prompt": "look"}}
    sub = [
        ("user", {"role": "user", "content": "look at a.py"}),
        ("assistant", read("s1", "r1", "a.py", 50)),
        ("user", result("r1", "x = 1")),
        ("assistant", read("s2", "r2", "a.py", 70)),
        ("user", result("r2", "x = 1")),
    ]
    lines = [
        _claude_line("u1", None, "user", {"role": "user", "content": "go"}),
        _claude_line(
            "u2", "u1", "assistant", {"id": "m1", "role": "assistant", "content": [task]}
        ),  # fmt: skip
        *(progress(f"p{k}", kind, m) for k, (kind, m) in enumerate(sub)),
        _claude_line("u3", "u2", "user", result("t1", "a.py holds x = 1")),
    ]
    main = folder / "s-advisor.jsonl"
    main.write_text("\n".join(lines) + "\n")
    if own_file:
        own = folder / "s-advisor" / "subagents" / "agent-a9.jsonl"
        own.parent.mkdir(parents=True)
        own.write_text(
            "\n".join(
                json.dumps(
                    json.loads(_claude_line(f"q{k}", None, kind, m))
                    | {"isSidechain": True, "agentId": "a9"}
                )
                for k, (kind, m) in enumerate(sub)
            )
            + "\n"
        )
    return main


def test_claude_code_sub_agent_records_in_progress_records_are_read(tmp_path):
    main = _progress_session(tmp_path, own_file=False)
    top, agent = load(main)
    assert [s.name for s in top.steps] == ["Task"]
    assert agent.session == "s-advisor/a9"
    first, again = calls(agent)
    assert (first.target, again.target, again.result) == ("a.py", "a.py", "x = 1")
    assert first.ref == {"line": 4} and again.ref == {"line": 6}  # the progress records' lines
    assert first.tokens_in == 70 - 50 - 5 and not first.tokens_estimated


def test_claude_code_progress_copies_are_not_read_beside_the_sub_agents_own_file(tmp_path):
    main = _progress_session(tmp_path, own_file=True)
    own = str(tmp_path / "s-advisor" / "subagents" / "agent-a9.jsonl")
    # the session file named on its own brings its sub-agent's file; the copies are left to it
    top, agent = load(main)
    assert (top.session, agent.session, agent.source) == ("s-advisor", "s-advisor/a9", own)
    assert [s.ref for s in calls(agent)] == [{"line": 2}, {"line": 4}]  # the own file's lines
    sessions = sorted(t.session for t in load(tmp_path))
    assert sessions == ["s-advisor", "s-advisor/a9"]  # the folder: the sub-agent once
    # named as well, or held by a folder named as well: still once
    for extra in (own, str(tmp_path / "s-advisor")):
        assert [t.session for t in load([str(main), extra])] == ["s-advisor", "s-advisor/a9"]
        assert [t.session for t in load([extra, str(main)])] == ["s-advisor/a9", "s-advisor"]


def test_claude_code_session_file_named_alone_is_read_with_its_sub_agents_everywhere(tmp_path):
    # the local parallel run and the fleet plan their work from the same inputs as load
    from loopcore.fleet import Unit, units

    main = _progress_session(tmp_path, own_file=True)
    own = str(tmp_path / "s-advisor" / "subagents" / "agent-a9.jsonl")
    assert [(u.item, u.in_folder) for u in units([str(main)]) if isinstance(u, Unit)] == [
        (str(main), False),
        (own, True),
    ]
    missing = str(tmp_path / "nope.jsonl")
    assert units([missing]) == [(missing, "missing")]


def test_claude_code_renamed_session_file_alone_reads_the_progress_copies(tmp_path):
    # a session file that no longer bears its session id does not bring the sub-agent files of
    # that id: its sub-agent is read from the copies in its progress records, not missed
    main = _progress_session(tmp_path, own_file=True)
    renamed = main.with_name("full.jsonl")
    main.rename(renamed)
    top, agent = load(renamed)
    assert agent.session == "s-advisor/a9" and agent.source == f"{renamed}#1"
    assert [s.ref for s in calls(agent)] == [{"line": 4}, {"line": 6}]  # the progress records
    # the folder's walk reads the own file, and the copies are left to it
    assert sorted(t.source for t in load(tmp_path)) == [
        str(renamed),
        str(tmp_path / "s-advisor" / "subagents" / "agent-a9.jsonl"),
    ]


def test_claude_code_progress_copies_of_inline_sidechain_records_are_not_read(tmp_path):
    # the same sub-agent's records also inline in the main file, as sidechain records: read
    # once, from those
    main = _progress_session(tmp_path, own_file=False)
    inline = []
    lines = main.read_text().splitlines()
    for k, line in enumerate(lines[2:7]):  # the five progress records
        rec = json.loads(line)["data"]["message"]
        side = json.loads(_claude_line(f"q{k}", None, rec["type"], rec["message"]))
        inline.append(json.dumps(side | {"isSidechain": True, "agentId": "a9"}))
    main.write_text("\n".join(lines + inline) + "\n")
    traces = list(load(main))
    assert [t.session for t in traces] == ["s-advisor", "s-advisor/a9"]
    assert [s.ref for s in calls(traces[1])] == [{"line": 10}, {"line": 12}]  # the inline ones


def test_claude_code_profile_knows_anthropic_server_tools():
    prof = loopcore.taxonomy.PROFILES["claude-code"]
    # the advisor reads the transcript and changes nothing: not an exec, which would make the
    # same read after it look justified
    assert prof.access("advisor", {})[0] == "other"
    assert prof.access("web_fetch", {"url": "https://x"})[:2] == ("observe", "https://x")
    assert prof.access("Read", {"file_path": "a.py"})[:2] == ("observe", "a.py")


def test_codex_reasoning_sent_back_is_not_charged_to_the_next_result(tmp_path):
    """Codex sends its encrypted reasoning items back with the transcript: a call that reasoned
    for 1,408 tokens and printed a short output is followed by a prompt grown by the whole
    completion plus the output (the shape of a real 0.58.0 rollout, gpt-5.1-codex)."""

    def rec(kind, payload):
        return json.dumps({"timestamp": "t", "type": kind, "payload": payload})

    def usage(inp, out, reasoning):
        u = {"input_tokens": inp, "cached_input_tokens": 0, "output_tokens": out}
        u["reasoning_output_tokens"] = reasoning
        return rec("event_msg", {"type": "token_count", "info": {"last_token_usage": u}})

    def shell(cid, cmd):
        args = json.dumps({"command": ["bash", "-lc", cmd]})
        return rec(
            "response_item",
            {"type": "function_call", "name": "shell", "arguments": args, "call_id": cid},
        )

    def output(cid, text):
        return rec(
            "response_item", {"type": "function_call_output", "call_id": cid, "output": text}
        )

    lines = [
        rec("session_meta", {"id": "sess-r", "cwd": "/repo", "cli_version": "0.58.0"}),
        rec(
            "response_item",
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "Fix it"}],
            },
        ),
        rec("response_item", {"type": "reasoning", "summary": [], "encrypted_content": "gAAA"}),
        shell("a", "git status --short"),
        usage(24332, 1456, 1408),
        output("a", "M src/app.py\n" * 19),
        rec("response_item", {"type": "reasoning", "summary": [], "encrypted_content": "gAAB"}),
        shell("b", "git diff --stat"),
        usage(24332 + 1456 + 130, 944, 896),
        output("b", " src/app.py | 2 +-\n"),
        rec(
            "response_item",
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Done."}],
            },
        ),
        usage(24332 + 1456 + 130 + 944 + 20, 12, 0),
    ]
    path = tmp_path / "rollout-reasoning.jsonl"
    path.write_text("\n".join(lines) + "\n")
    (t,) = load(path)
    status, diff = calls(t)
    assert (status.tokens_in, diff.tokens_in) == (130, 20)  # not 1538 and 916
    assert t.total_tokens == 1456 + 130 + 944 + 20 + 12  # the reasoning counted once


def test_openhands_events():
    t = one("openhands_events.json")
    run, read, edit, finish = t.steps
    assert (run.name, run.kind, run.target) == ("execute_bash", "observe", "/w")
    assert run.meta["returncode"] == 0 and run.args == {"command": "ls /w"}
    assert "thought" not in read.args and (read.kind, read.target) == ("observe", "/w/a.py")
    assert (edit.kind, edit.target, edit.error) == (
        "mutate",
        "/w/a.py",
        "No replacement was performed.",
    )
    assert finish.kind == "other" and t.meta["unanswered"] == 1
    assert run.tokens_out + run.tokens_turn == 10 and run.tokens_in == 130 - 100 - 10


def test_openhands_events_folder_is_one_stream(tmp_path):
    events = json.loads((FIX / "openhands_events.json").read_text())
    folder = tmp_path / "conv-7" / "events"
    folder.mkdir(parents=True)
    for e in events:
        (folder / f"{e['id']}.json").write_text(json.dumps(e))
    (t,) = load(tmp_path)
    assert [s.name for s in t] == [s.name for s in one("openhands_events.json")]


def test_gemini_cli_recording_and_checkpoint():
    t = one("gemini_cli_session.json")
    assert t.session == "gem-session-1"
    read, shell = calls(t)
    assert (read.kind, read.target, read.result) == ("observe", "/p/a.py", "x = 1")
    assert (shell.kind, shell.target, shell.error) == ("observe", "/p", "permission denied")
    assert sum(s.tokens_out + s.tokens_turn for s in (read, shell)) == 15  # output + thoughts
    c = one("gemini_cli_checkpoint.json")
    (ls,) = calls(c)
    assert (ls.kind, ls.target, ls.result) == ("observe", ".", "a.py\nb.py")


# ---- loopcore JSONL -------------------------------------------------------------------------


def test_loopcore_jsonl_round_trip(tmp_path):
    s1, s2 = load(FIX / "loopcore_steps.jsonl")
    assert (s1.session, len(s1), s2.session, len(s2)) == ("s1", 3, "s2", 1)
    assert s1.steps[2].target == ("a.ts", "b.ts") and s1.steps[2].meta == {"note": "two files"}
    # a step without kind is classified, one without tokens is estimated
    (bash,) = s2.steps
    assert (bash.kind, bash.target, bash.tokens_estimated) == ("observe", "util.py", True)
    assert s1.meta["tokens_source"] == "usage" and s2.meta["tokens_source"] == "estimate"
    out = tmp_path / "copy.jsonl"
    out.write_bytes(b"".join(orjson.dumps(s.to_dict()) + b"\n" for t in (s1, s2) for s in t))
    again = list(load(out))
    assert [s.to_dict() for t in again for s in t] == [s.to_dict() for t in (s1, s2) for s in t]


# ---- sources: gz, folders, paths, empty -----------------------------------------------------


def test_gzip_file_is_read_by_content(tmp_path):
    gz = tmp_path / "chat.json.gz"
    gz.write_bytes(gzip.compress((FIX / "openai_chat.json").read_bytes()))
    (t,) = load(gz)
    assert t.session == "chat" and len(t) == 4 and t.source == str(gz)
    assert detect_format(gz) == "openai-chat"


def test_folder_is_walked_recursively_and_non_traces_are_ignored(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    shutil.copy(FIX / "openai_chat.json", tmp_path / "a" / "chat.json")
    shutil.copy(FIX / "tau_bench.json", tmp_path / "a" / "b" / "tau.json")
    (tmp_path / "a" / "b" / "tau.json.gz").write_bytes(
        gzip.compress((FIX / "swe_agent_text.json").read_bytes())
    )
    shutil.copy(FIX / "not_a_trace.json", tmp_path / "preds.json")
    (tmp_path / "README.md").write_text("# not a trace")
    (tmp_path / "notes.yaml").write_text("a: 1")
    stats = LoadStats()
    traces = list(load(tmp_path, stats=stats))
    assert [t.format for t in traces] == ["openai-chat", "tau-bench", "tau-bench", "swe-agent"]
    assert stats.files == 4 and stats.traces == 4 and stats.steps == sum(len(t) for t in traces)
    assert stats.ignored == [str(tmp_path / "preds.json")] and stats.errors == []
    assert stats.formats == {"openai-chat": 1, "tau-bench": 2, "swe-agent": 1}


def test_list_of_paths(tmp_path):
    traces = list(load([FIX / "openai_chat.json", str(FIX / "otel_genai_spans.json")]))
    assert [t.format for t in traces] == ["openai-chat", "otel"]


def test_empty_file_is_an_empty_trace():
    t = one("empty.jsonl")
    assert len(t) == 0 and t.meta["empty"] is True and t.total_tokens == 0
    assert detect_format(FIX / "empty.jsonl") == "loopcore"
    (t2,) = load([], format="openai-chat")
    assert len(t2) == 0 and t2.format == "openai-chat"


# ---- bad input ------------------------------------------------------------------------------


def test_malformed_line_names_file_and_line():
    with pytest.raises(TraceFormatError) as ei:
        list(load(FIX / "malformed_steps.jsonl"))
    err = ei.value
    assert err.path == str(FIX / "malformed_steps.jsonl") and err.line == 2
    assert f"{FIX / 'malformed_steps.jsonl'}:2:" in str(err)
    assert isinstance(err, ValueError)


def test_keep_going_skips_and_counts_bad_lines():
    stats = LoadStats()
    (t,) = load(FIX / "malformed_steps.jsonl", keep_going=True, stats=stats)
    assert [s.target for s in t] == ["a", "b"]
    assert t.meta["skipped"] == 2  # the bad JSON line and the step without a name
    assert stats.skipped_lines == 2 and [e.line for e in stats.errors] == [2, 3]
    assert "name" in stats.errors[1].reason


def test_broken_json_document_names_its_line():
    with pytest.raises(TraceFormatError) as ei:
        list(load(FIX / "broken_document.json"))
    assert ei.value.line == 3


def test_unknown_content_lists_the_formats():
    with pytest.raises(TraceFormatError) as ei:
        list(load(FIX / "not_a_trace.json"))
    assert all(name in str(ei.value) for name in FORMATS)
    assert ei.value.path == str(FIX / "not_a_trace.json")
    with pytest.raises(TraceFormatError):
        detect_format({"nothing": "here"})


def test_keep_going_skips_bad_files_and_continues(tmp_path):
    shutil.copy(FIX / "broken_document.json", tmp_path / "a.json")
    shutil.copy(FIX / "openai_chat.json", tmp_path / "b.json")
    (tmp_path / "c.json.gz").write_bytes(b"\x1f\x8b not really gzip")
    with pytest.raises(TraceFormatError):
        list(load(tmp_path))
    stats = LoadStats()
    traces = list(load(tmp_path, keep_going=True, stats=stats))
    assert [t.format for t in traces] == ["openai-chat"]
    assert stats.skipped_files == 2 and sorted(os.path.basename(e.path) for e in stats.errors) == [
        "a.json",
        "c.json.gz",
    ]


def test_missing_path():
    with pytest.raises(TraceFormatError, match="no such file"):
        list(load(FIX / "does-not-exist.json"))
    stats = LoadStats()
    assert list(load(FIX / "does-not-exist.json", keep_going=True, stats=stats)) == []
    assert stats.skipped_files == 1


def test_structurally_wrong_record_is_reported_with_its_line(tmp_path):
    p = tmp_path / "cc.jsonl"
    good = (FIX / "claude_code_session.jsonl").read_text().splitlines()
    good.insert(
        3,
        json.dumps(
            {"type": "assistant", "sessionId": "x", "uuid": "z", "message": "not an object"}
        ),
    )
    p.write_text("\n".join(good) + "\n")
    with pytest.raises(TraceFormatError) as ei:
        list(load(p))
    assert ei.value.line == 4
    stats = LoadStats()
    traces = list(load(p, keep_going=True, stats=stats))
    assert traces[0].meta["skipped"] == 1 and len(calls(traces[0])) == 2


def test_trace_format_error_pickles():
    import pickle

    err = pickle.loads(pickle.dumps(TraceFormatError("bad", "f.json", 3)))
    assert (err.path, err.line, err.reason, str(err)) == ("f.json", 3, "bad", "f.json:3: bad")


# ---- profiles through load ------------------------------------------------------------------


def test_custom_profile_mapping_through_load():
    msgs = [
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "1", "function": {"name": "frob", "arguments": '{"doc_id": "d1"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "1", "content": "x"},
    ]
    (t,) = load(msgs)
    assert t.steps[0].kind == "exec"
    (t,) = load(msgs, profile={"frob": ("observe", "doc_id")})
    assert (t.steps[0].kind, t.steps[0].target) == ("observe", "d1")
    with pytest.raises(ValueError, match="unknown profile"):
        load(msgs, profile="no-such-profile")


def test_public_api_exports():
    import loopcore.taxonomy

    for name in ("load", "detect_format", "TraceFormatError", "LoadStats"):
        assert hasattr(loopcore, name), name
        assert name in loopcore.__all__
    for name in ("FORMATS", "load", "detect_format"):
        assert name in loopcore.adapters.__all__
    for name in ("classify", "classify_shell", "PROFILES"):
        assert name in loopcore.taxonomy.__all__


# ---- less common shapes of the same formats -------------------------------------------------


def test_raw_bytes_and_gzip_bytes():
    data = (FIX / "openai_chat.json").read_bytes()
    (a,) = load(data)
    (b,) = load(gzip.compress(data))
    assert len(a) == len(b) == 4 and a.source is None


def test_otel_jsonl_of_export_requests(tmp_path):
    doc = json.loads((FIX / "otel_genai_spans.json").read_text())
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    lines = []
    for sp in spans:  # the collector's file exporter writes one request per line
        req = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": [sp]}]}]}
        lines.append(json.dumps(req))
    p = tmp_path / "spans.jsonl"
    p.write_text("\n".join(lines) + "\n")
    (t,) = load(p)
    assert t.format == "otel" and [s.name for s in t] == ["get_weather", "send_email"]


def test_responses_objects_with_usage():
    responses = [
        {
            "object": "response",
            "id": "r1",
            "usage": {
                "input_tokens": 100,
                "output_tokens": 12,
                "output_tokens_details": {"reasoning_tokens": 2},
            },
            "input": [{"type": "message", "role": "user", "content": "hi"}],
            "output": [
                {
                    "type": "function_call",
                    "call_id": "a",
                    "name": "read_file",
                    "arguments": '{"path": "x.md"}',
                }
            ],
        },
        {
            "object": "response",
            "id": "r2",
            "usage": {"input_tokens": 150, "output_tokens": 5},
            "input": [{"type": "function_call_output", "call_id": "a", "output": "text"}],
            "output": [
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "ok"}],
                }
            ],
        },
    ]
    (t,) = load(responses)
    assert t.format == "openai-responses"
    s, reply = t.steps
    assert (s.kind, s.target, s.result, s.tokens_out, s.tokens_in) == (
        "observe",
        "x.md",
        "text",
        10,
        150 - 100 - 10,
    )
    assert s.tokens_turn == 2  # the reasoning tokens are the turn's own output, not the call's
    assert (reply.text, reply.tokens_out) == ("ok", 5)


def test_openhands_v1_sdk_events():
    events = [
        {
            "kind": "MessageEvent",
            "id": "e0",
            "source": "user",
            "llm_message": {"role": "user", "content": [{"type": "text", "text": "go"}]},
        },
        {
            "kind": "ActionEvent",
            "id": "e1",
            "source": "agent",
            "tool_name": "terminal",
            "tool_call_id": "t1",
            "llm_response_id": "r1",
            "thought": [{"type": "text", "text": "look"}],
            "action": {"kind": "ExecuteBashAction", "command": "cat a.py"},
        },
        {
            "kind": "ObservationEvent",
            "id": "e2",
            "source": "environment",
            "tool_name": "terminal",
            "tool_call_id": "t1",
            "action_id": "e1",
            "observation": {
                "kind": "ExecuteBashObservation",
                "content": [{"type": "text", "text": "x = 1"}],
                "exit_code": 0,
            },
        },
    ]
    (t,) = load(events)
    assert t.format == "openhands"
    (s,) = t.steps
    assert (s.name, s.kind, s.target, s.result, s.meta["returncode"]) == (
        "terminal",
        "observe",
        "a.py",
        "x = 1",
        0,
    )
    assert s.args == {"command": "cat a.py"}


def test_claude_code_stream_json_shape():
    records = [
        {"type": "system", "subtype": "init", "session_id": "sj-1", "tools": ["Read"]},
        {
            "type": "assistant",
            "session_id": "sj-1",
            "message": {
                "id": "m1",
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "u1", "name": "Read", "input": {"file_path": "/a"}}
                ],
                "usage": {"input_tokens": 5, "output_tokens": 9},
            },
        },
        {
            "type": "user",
            "session_id": "sj-1",
            "message": {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "u1", "content": "A"}],
            },
        },
        {"type": "result", "subtype": "success", "session_id": "sj-1", "total_cost_usd": 0.01},
    ]
    (t,) = load(records)
    assert (t.format, t.session, t.steps[0].target, t.steps[0].tokens_out) == (
        "claude-code",
        "sj-1",
        "/a",
        9,
    )


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "session": st.sampled_from(["a", "b"]),
                "turn": st.integers(0, 5),
                "kind": st.sampled_from(list(loopcore.trace.KINDS)),
                "name": st.text(min_size=1, max_size=8),
                "target": st.one_of(
                    st.none(),
                    st.text(max_size=5),
                    st.lists(st.text(max_size=3), min_size=2, max_size=3),
                ),
                "args": st.dictionaries(
                    st.text(max_size=3),
                    st.integers(-(2**63), 2**63 - 1) | st.text(max_size=4),
                    max_size=3,
                ),
                "result": st.one_of(st.none(), st.text(max_size=10)),
                "tokens_in": st.integers(0, 10**6),
                "tokens_out": st.integers(0, 10**6),
            }
        ),
        max_size=12,
    )
)
def test_loopcore_jsonl_round_trips_any_steps(records):
    data = b"".join(orjson.dumps(r) + b"\n" for r in records)
    traces = list(load(data, format="loopcore"))
    got = [s.to_dict() for t in traces for s in t]
    order = list(dict.fromkeys(r["session"] for r in records))
    # a step written without a coordinate is cited by its place in the input (line or record)
    refs = [d.pop("ref") for d in got]
    assert all(set(ref) <= {"line", "record"} for ref in refs)
    expected = [dict(r, error=None) for sess in order for r in records if r["session"] == sess]
    assert got == expected


def test_openhands_evaluation_output_records(tmp_path):
    """OpenHands' output.jsonl: one record per instance with its event history."""
    events = json.loads((FIX / "openhands_events.json").read_text())
    p = tmp_path / "output.jsonl"
    p.write_text(
        "\n".join(
            json.dumps({"instance_id": f"i{k}", "history": events, "metrics": {}}) for k in range(2)
        )
        + "\n"
    )
    assert detect_format(p) == "openhands"
    traces = list(load(p))
    assert [t.session for t in traces] == ["i0", "i1"] and [t.source for t in traces] == [
        f"{p}#0",
        f"{p}#1",
    ]
    assert all(len(t) == 4 for t in traces)
    # a dict with a history of events is OpenHands, not a SWE-agent trajectory
    assert detect_format({"history": events}) == "openhands"


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.sampled_from(
        [
            "",
            "assistant",
            "tool",
            "user",
            "function_call",
            "execute_tool",
            "bash",
            "ls > x",
            "gemini",
            "model",
        ]
    ),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "role",
                    "content",
                    "tool_calls",
                    "function",
                    "name",
                    "arguments",
                    "id",
                    "tool_call_id",
                    "type",
                    "message",
                    "sessionId",
                    "uuid",
                    "messages",
                    "history",
                    "action",
                    "args",
                    "observation",
                    "cause",
                    "traj",
                    "task_id",
                    "resourceSpans",
                    "scopeSpans",
                    "spans",
                    "attributes",
                    "call_id",
                    "output",
                    "parts",
                    "functionCall",
                    "toolCalls",
                    "tokens",
                    "usage",
                    "kind",
                    "session",
                    "payload",
                    "input",
                    "trajectory_format",
                ]
            ),
            inner,
            max_size=5,
        )
    ),
    max_leaves=25,
)


@settings(max_examples=150, deadline=None)
@given(_json, st.sampled_from(["auto", *FORMATS]))
def test_any_json_loads_or_raises_trace_format_error(obj, fmt):
    """Whatever the content, load either yields Traces or raises TraceFormatError, never a crash."""
    try:
        traces = list(load(obj, fmt))
    except TraceFormatError:
        return
    for t in traces:
        for s in t:
            assert s.kind in loopcore.trace.KINDS and s.tokens_in >= 0 and s.tokens_out >= 0


_ANY_FIELD = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 3),
    st.sampled_from(["", "t", "a.py"]),
    st.lists(st.sampled_from(["a.py", "b.py"]), max_size=2),
    st.lists(st.integers(0, 2), min_size=1, max_size=2),
    st.just({"line": 3}),
)
_STEP_RECORD = st.fixed_dictionaries(
    {"name": st.sampled_from(["bash", "Read", "", "x"])},
    optional={
        name: _ANY_FIELD for name in sorted(loopcore.adapters.loopcore_steps.FIELDS - {"name"})
    },  # fmt: skip
).map(lambda r: dict(r, kind="observe") if r.get("kind") == "t" else r)


def _from_dict_reference(records, path):
    """The loopcore JSONL reader as it was written first, with Step.from_dict: what the faster
    reader must give, step for step, with the same errors."""
    from loopcore.adapters import _base, loopcore_steps

    out, bad = [], []
    profile = loopcore.taxonomy.get_profile(None, loopcore_steps.PROFILE)
    counts: dict = {}
    for i, r in enumerate(records):
        name = r.get("name")
        if not isinstance(name, str) or (
            not name and r.get("text") is None and r.get("rejected") is None
        ):
            bad.append(i)
            continue
        kind, target, args = r.get("kind"), r.get("target"), r.get("args")
        if kind is None:
            kind, classified = profile.classify(name, args)
            target = classified if target is None else target
        elif not isinstance(kind, str) or kind not in loopcore.trace.KINDS:
            bad.append(i)
            continue
        if target is not None and not isinstance(target, (str, list)):
            bad.append(i)
            continue
        session = "s" if r.get("session") is None else str(r.get("session"))
        n = counts.setdefault(session, 0)  # a session's place: its first record that gets here
        turn = r.get("turn", n)
        if not loopcore_steps._count(turn):
            bad.append(i)
            continue
        tin, tout = r.get("tokens_in"), r.get("tokens_out")
        flag = bool(r.get("tokens_estimated", False))
        if tin is None and tout is None:
            tin = _base.estimate_tokens(_base.text_len(r.get("result")))
            tout = _base.estimate_tokens(_base.text_len(args) + len(name))
            flag = True
        else:
            tin, tout = (0 if tin is None else tin), (0 if tout is None else tout)
            if not (loopcore_steps._count(tin) and loopcore_steps._count(tout)):
                bad.append(i)
                continue
        extra = {k: r[k] for k in ("reads", "writes", "ref", "text", "rejected", "tokens_turn", "no_op", "after_user") if k in r}  # fmt: skip
        extra.setdefault("ref", {"record": i})
        meta = r.get("meta")
        try:
            step = loopcore.trace.Step.from_dict(
                extra, session=session, turn=turn, kind=kind, name=name, target=target,
                args=args, result=r.get("result"), error=r.get("error"), tokens_in=tin,
                tokens_out=tout, tokens_estimated=flag, call_id=r.get("call_id"),
                meta=dict(meta) if isinstance(meta, dict) else {},
            )  # fmt: skip
        except ValueError:
            bad.append(i)
            continue
        counts[session] = n + 1
        out.append(step)
    return out, bad, list(counts)


@settings(max_examples=400, deadline=None)
@given(st.lists(_STEP_RECORD, min_size=1, max_size=10))
def test_loopcore_jsonl_reader_gives_what_step_from_dict_gives(impl, tmp_path_factory, records):
    """Every field checked and converted as Step.from_dict does it (lists of str to tuples,
    flags to bools, a fresh meta), the same records refused, on both twins."""
    path = tmp_path_factory.mktemp("steps") / "s.json"
    path.write_bytes(orjson.dumps(records))
    stats = LoadStats()
    traces = list(load(str(path), format="loopcore", keep_going=True, stats=stats))
    want, bad, order = _from_dict_reference(records, str(path))
    got = [s for t in traces for s in t.steps]
    by_session = {session: [] for session in order}
    for s in want:
        by_session.setdefault(s.session, []).append(s)
    want = [s for steps in by_session.values() for s in steps]
    assert [s.to_dict() for s in got] == [s.to_dict() for s in want]

    def exact(s):
        return (s.target, s.reads, s.writes, s.meta, s.no_op, s.tokens_estimated, s.tokens_turn)

    assert [exact(s) for s in got] == [exact(s) for s in want]
    assert [[type(v) for v in exact(s)] for s in got] == [[type(v) for v in exact(s)] for s in want]
    assert [str(e).rsplit("(item ", 1)[-1].rstrip(")") for e in stats.errors] == [
        str(i) for i in bad
    ]


# ---- swe_agent._words: str.split where shlex.split cannot differ from it


def _shlex_words(line: str) -> list[str]:
    import shlex

    try:
        return shlex.split(line)
    except ValueError:
        return line.split()


def test_swe_agent_words_fast_path_covers_every_blank_shlex_does_not_split_on():
    # a blank of str.split that shlex keeps inside a word must send the line to shlex
    import sys

    from loopcore.adapters.swe_agent import _SHLEX_SPECIAL

    blanks = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()]
    assert {c for c in blanks if _SHLEX_SPECIAL.search(c) is None} == {" ", "\t", "\n", "\r"}
    for c in "'\"\\":
        assert _SHLEX_SPECIAL.search(c) is not None


@settings(max_examples=400, deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from(
            list("ab/._-=#$*~ \t\r\n'\"\\")
            + ["\x0b", "\x0c", "\x1c", "\x85", "\xa0", "\u2003", "é"]
        ),
        max_size=30,
    )
)
def test_swe_agent_words_is_shlex_split(line):
    from loopcore.adapters.swe_agent import _words

    assert _words(line) == _shlex_words(line)


@pytest.mark.parametrize(
    "line",
    [
        "open src/a.py",
        "search_dir  foo\t./src ",
        "",
        "   ",
        "open 'a b.py'",
        'find_file "x',
        "a\\ b",
    ],
)
def test_swe_agent_words_examples(line):
    from loopcore.adapters.swe_agent import _words

    assert _words(line) == _shlex_words(line)


# ---- loopcore JSONL: the compiled record loop against the pure one


class _RecordDict(dict):
    """A dict subclass: the compiled loop reads it through its methods, as the reference does."""


def _read_both(records, keep_going, lines=None):
    from loopcore import _native_flag
    from loopcore.adapters import loopcore_steps
    from loopcore.adapters._io import Ctx

    if _native_flag.NO_EXTENSIONS:
        pytest.skip("LOOPCORE_NO_EXTENSIONS=1: no compiled twin to compare")
    from loopcore._native_ingest import read_records

    def run(fn):
        stats = LoadStats()
        ctx = Ctx("s.jsonl", lines, keep_going, stats, None)
        profile = ctx.profile(loopcore_steps.PROFILE)
        sessions: dict = {}
        try:
            fn(records, ctx, profile, "dflt", sessions)
            raised = None
        except TraceFormatError as exc:
            raised = str(exc)
        steps = {
            k: [
                (s.to_dict(), s.target, s.reads, s.writes, s.meta, s.no_op, s.tokens_estimated)
                for s in v
            ]
            for k, v in sessions.items()
        }
        types = [[type(x) for x in step[1:]] for v in steps.values() for step in v]
        return steps, types, [str(e) for e in stats.errors], ctx.skipped, raised

    return run(read_records), run(loopcore_steps._read_records_py)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.one_of(
            _STEP_RECORD,
            _STEP_RECORD.map(_RecordDict),
            st.sampled_from([None, 3, "x", ["name"]]),
        ),
        min_size=1,
        max_size=10,
    ),
    st.booleans(),
    st.booleans(),
)
def test_compiled_loopcore_record_loop_is_the_pure_one(records, keep_going, with_lines):
    """The same Steps (types included), the same records refused with the same messages, the
    same first error without keep_going; records that are dicts, dict subclasses or not dicts."""
    lines = list(range(2, 2 + 2 * len(records), 2)) if with_lines else None
    got, want = _read_both(records, keep_going, lines)
    assert got == want


def test_compiled_loopcore_record_loop_examples():
    records = [
        {"name": "bash", "args": {"command": "cat a.py"}, "result": "x\n" * 5},
        {"name": "Read", "kind": "observe", "target": ["a.py", "b.py"], "turn": 0},
        {"name": "x", "kind": "looks"},
        {"name": "x", "reads": ["a", 1]},
        {"name": "x", "writes": "a"},
        {"name": "x", "text": 3},
        {"name": "x", "rejected": 3},
        {"name": "x", "ref": []},
        {"name": "x", "tokens_turn": -1},
        {"name": "x", "turn": True},
        {"name": "x", "tokens_in": -1},
        {"name": "", "text": "a reply", "session": 7, "no_op": 1, "meta": {"k": 1}},
        "not a step",
    ]
    got, want = _read_both(records, True)
    assert got == want
    steps, _, errors, skipped, raised = got
    assert raised is None and skipped == 10 and len(errors) == 10
    assert [len(v) for v in steps.values()] == [2, 1]
    got, want = _read_both(records, False)
    assert got == want and got[4] is not None


def test_zero_token_counts_are_no_usage():
    from loopcore.adapters._base import usage_of

    zeros = {"input": 0, "output": 0, "cached": 0, "thoughts": 0, "tool": 0, "total": 0}
    assert usage_of(zeros) is None  # gemini-cli's message of tool calls alone
    assert usage_of({"prompt_tokens": 0, "completion_tokens": 0}) is None
    assert usage_of({"input_tokens": 0, "output_tokens": 0}) is None
    assert usage_of({"prompt_tokens": 0, "completion_tokens": 7}) == (None, 7, 0)
    assert usage_of({"prompt_tokens": 12, "completion_tokens": 0}) == (12, 0, 0)
    # a cached prompt is still a prompt
    cached = {"input_tokens": 0, "cache_read_input_tokens": 900, "output_tokens": 4}
    assert usage_of(cached) == (900, 4, 0)


def _gemini_call(cid, name, args, output, status="success"):
    return {
        "id": cid,
        "name": name,
        "args": args,
        "status": status,
        "result": [{"functionResponse": {"id": cid, "name": name, "response": {"output": output}}}],
    }


def test_gemini_cli_calls_written_after_a_notice_belong_to_the_response_before_it(tmp_path):
    """gemini-cli 0.34 writes a response's calls on a new gemini message (no text, all-zero
    tokens) when a hook's warning was shown after the response's text (the shape of real
    recordings of 2026-03); the zeros are no prompt size, and the calls are that turn's."""
    zeros = {"input": 0, "output": 0, "cached": 0, "thoughts": 0, "tool": 0, "total": 0}

    def gem(mid, text, tokens, calls=None):
        m = {"id": mid, "timestamp": "t", "type": "gemini", "content": text, "tokens": tokens}
        if calls is not None:
            m["toolCalls"] = calls
        return m

    def tok(inp, out):
        return {
            "input": inp,
            "output": out,
            "cached": 0,
            "thoughts": 0,
            "tool": 0,
            "total": inp + out,
        }

    warning = {"id": "w", "timestamp": "t", "type": "warning",
               "content": "Hook(s) [sentinel] failed for event BeforeTool"}  # fmt: skip
    edit = {"file_path": "/w/a.py", "old_string": "x = 1", "new_string": "x = 2"}
    doc = {
        "sessionId": "s-hook",
        "projectHash": "h",
        "messages": [
            {"id": "u", "timestamp": "t", "type": "user", "content": "change x"},
            gem("g1", "I will now change x.", tok(186984, 436)),
            warning,
            gem("g2", "", zeros, [_gemini_call("c1", "replace", edit, "Successfully modified")]),
            gem("g3", "Done.", tok(187462, 20)),
        ],
    }
    path = tmp_path / "session-2026-03-18T15-22-s.json"
    path.write_text(json.dumps(doc))
    (t,) = load(path)
    replace, reply = t.steps
    assert (replace.name, replace.turn, replace.text) == ("replace", 0, "I will now change x.")
    assert replace.ref == {"message": 3}  # the call's own message
    assert replace.tokens_in == 187462 - 186984 - 436 and not replace.tokens_estimated
    assert replace.tokens_out + replace.tokens_turn == 436
    assert reply.text == "Done." and t.meta["tokens_source"] == "usage"

    # calls on a message of their own right after the user's prompt are that response's: its
    # zeros are no usage, so what the calls cost is estimated and says so
    doc["messages"] = [
        doc["messages"][0],
        gem(
            "g1",
            "",
            zeros,
            [
                _gemini_call(
                    "c1",
                    "write_file",
                    {"file_path": "/w/b.py", "content": "y = 1\n"},
                    "Successfully created",
                )
            ],
        ),  # fmt: skip
        gem("g2", "Created.", tok(7269, 30)),
    ]
    path.write_text(json.dumps(doc))
    (t,) = load(path)
    write = t.steps[0]
    assert write.tokens_estimated and write.tokens_in == (len("Successfully created") + 3) // 4
    assert t.meta["tokens_source"] == "mixed"


def _codex_rec(kind, payload):
    return json.dumps({"timestamp": "t", "type": kind, "payload": payload})


def _codex_fn(cid, name, args, **extra):
    item = {"type": "function_call", "name": name, "arguments": json.dumps(args), "call_id": cid}
    return _codex_rec("response_item", item | extra)


def _one_rollout(tmp_path, lines):
    """The one trace of a Codex rollout holding *lines*."""
    path = tmp_path / "rollout.jsonl"
    path.write_text("\n".join(lines) + "\n")
    (t,) = load(path)
    return t


def _codex_out(cid, text):
    return _codex_rec(
        "response_item", {"type": "function_call_output", "call_id": cid, "output": text}
    )


def test_codex_polls_of_a_running_process_are_waits_not_repeats(tmp_path):
    """Codex polls a long command with ``write_stdin`` and no input; each poll waits for the
    next chunk of its output and may come back empty (the shape of a real Codex Desktop
    0.142 rollout): polls that return alike are never charged as repeats."""
    poll = {"session_id": 275, "chars": "", "yield_time_ms": 30000}
    running = "Wall time: 30.0025 seconds\nProcess running with session ID 275\nOriginal token count: 0\nOutput:\n"
    lines = [
        _codex_rec("session_meta", {"id": "sess-p", "cwd": "/repo", "cli_version": "0.142.0"}),
        _codex_fn("a", "exec_command", {"cmd": "npm run bench"}),
        _codex_out("a", "Chunk ID: 7358a0\n" + running.replace("30.0025", "10.0")),
        _codex_fn("b", "write_stdin", poll),
        _codex_out("b", "Chunk ID: 1f1f43\n" + running),
        _codex_fn("c", "write_stdin", poll),
        _codex_out("c", "Chunk ID: 8d24c7\n" + running.replace("30.0025", "30.0016")),
        _codex_fn("d", "write_stdin", poll),
        _codex_out("d", "Chunk ID: 5b810b\nWall time: 3.1 seconds\nProcess exited with code 0\nOutput:\nok\n"),
    ]  # fmt: skip
    t = _one_rollout(tmp_path, lines)
    start, first, again, last = t.steps
    assert first.result == "Chunk ID: 1f1f43\n" and again.result == "Chunk ID: 8d24c7\n"
    assert last.result == "Chunk ID: 5b810b\nok\n" and last.meta["returncode"] == 0
    # a command's own output is compared without its chunk's id; one still running keeps its
    # session's
    assert start.result == "Process running with session ID 275\n"
    assert loopcore.analyse_burn(t).findings == ()


def test_codex_a_command_started_again_while_running_is_no_repeat(tmp_path):
    """A real Codex 0.142.5 rollout (EntityProcess/agentv) runs `sleep 60; workmux status ...`
    again and again; each call returns `Process running with session ID N` with no output yet
    and its polls bring the progress (2m, 3m, 10m...). Each start is a new session, not the
    same outcome: no duplicate. The same command that finished alike twice still is one."""
    cmd = {"cmd": "sleep 60; workmux status wtg", "yield_time_ms": 1000}

    def started(cid, sid):
        head = f"Chunk ID: {cid}0\nWall time: 1.0 seconds\nProcess running with session ID {sid}\n"
        return [_codex_fn(cid, "exec_command", cmd), _codex_out(cid, head + "Output:\n")]

    def done(cid):
        out = f"Chunk ID: {cid}0\nWall time: 61.0 seconds\nProcess exited with code 0\nOutput:\nworking\n"
        return [_codex_fn(cid, "exec_command", cmd), _codex_out(cid, out)]

    meta = _codex_rec("session_meta", {"id": "sess-r", "cwd": "/repo", "cli_version": "0.142.5"})
    t = _one_rollout(tmp_path, [meta, *started("a", 9527), *started("b", 90463)])
    assert loopcore.analyse_burn(t).findings == ()
    t = _one_rollout(tmp_path, [meta, *done("a"), *done("b")])
    assert [f.kind for f in loopcore.analyse_burn(t).findings] == ["duplicate_call"]


def _code_exec(cid, program):
    item = {"type": "custom_tool_call", "status": "completed", "call_id": cid, "name": "exec"}
    return _codex_rec("response_item", item | {"input": program})


def _code_out(cid, head, *printed):
    parts = [{"type": "input_text", "text": head}]
    parts += [{"type": "input_text", "text": p} for p in printed]
    return _codex_rec(
        "response_item", {"type": "custom_tool_call_output", "call_id": cid, "output": parts}
    )


def _done(secs):
    return f"Script completed\nWall time {secs} seconds\nOutput:\n"


def _printed(output, code=0, chunk="7f0905", secs=0.000005):
    return json.dumps({"chunk_id": chunk, "wall_time_seconds": secs, "exit_code": code,
                       "original_token_count": 2, "output": output})  # fmt: skip


def test_codex_code_mode_single_calls_are_the_calls_they_make(tmp_path):
    """Codex 0.155-0.156 code mode (the shapes of real rollouts): the model writes a JavaScript
    program run by the custom tool ``exec``; a program that is one ``tools.exec_command`` call
    and the text of its result is read as that call made directly, so a re-read and a re-run are
    seen as they are with ``function_call``s. Other programs stay one opaque exec step."""
    meta = _codex_rec("session_meta", {"id": "sess-cm", "cwd": "/w", "cli_version": "0.156.1"})
    test = 'const r = await tools.exec_command({"cmd":"npm test","workdir":"/w","yield_time_ms":10000});\ntext(r.output);\n'
    lines = [
        meta,
        _code_exec("a", 'text(await tools.exec_command({cmd:"cat src/a.ts"}));\n'),
        _code_out("a", _done(0.1), _printed("const x = 2\n", chunk="aa11", secs=0.01)),
        _code_exec("c", "text(await tools.exec_command({cmd: 'cat src/a.ts', max_output_tokens: 4000}))"),
        _code_out("c", _done(0.2), _printed("const x = 2\n", chunk="bb22", secs=0.02)),
        _code_exec("b", test),
        _code_out("b", _done(3.1), "Tests: 1 failed\n"),
        _code_exec("d", test),
        _code_out("d", _done(2.9), "Tests: 1 failed\n"),
        # two calls, a computed argument: programs, not calls
        _code_exec("e", 'text(await tools.exec_command({cmd:"ls"})); text(await tools.exec_command({cmd:"ls"}));'),
        _code_out("e", _done(0.3), _printed("a\n"), _printed("a\n")),
        _code_exec("f", "const f = 'src/a.ts'; text(await tools.exec_command({cmd: `cat ${f}`}));"),
        _code_out("f", _done(0.1), _printed("const x = 2\n")),
        _code_exec("g", 'text(await tools.exec_command({cmd:"npm run lint"}));'),
        _code_out("g", _done(1.5), _printed("1 problem\n", code=2)),
    ]  # fmt: skip
    t = _one_rollout(tmp_path, lines)
    read, reread, run, rerun, two, computed, lint = t.steps
    assert (read.name, read.kind, read.target) == ("exec_command", "observe", "src/a.ts")
    assert read.args == {"cmd": "cat src/a.ts"} and reread.args == read.args  # no noise args
    assert read.result == reread.result == "const x = 2\n" and read.meta["returncode"] == 0
    assert run.args == {"cmd": "npm test", "workdir": "/w"} and run.result == "Tests: 1 failed\n"
    assert "returncode" not in run.meta  # the program printed the output alone
    assert lint.meta["returncode"] == 2 and lint.result == "1 problem\n"
    for step in (two, computed):
        assert (step.name, step.kind) == ("exec", "exec") and "input" in step.args
    findings = {(f.kind, f.steps) for f in loopcore.analyse_burn(t).findings}
    assert ("redundant_observation", (1,)) in findings and ("duplicate_call", (3,)) in findings

    # the same session with function_call items gives the same steps
    direct = [
        meta,
        _codex_fn("a", "exec_command", {"cmd": "cat src/a.ts"}),
        _codex_out("a", "Chunk ID: aa11\nWall time: 0.01 seconds\nProcess exited with code 0\nOriginal token count: 2\nOutput:\nconst x = 2\n"),
        _codex_fn("c", "exec_command", {"cmd": "cat src/a.ts", "max_output_tokens": 4000}),
        _codex_out("c", "Chunk ID: bb22\nWall time: 0.02 seconds\nProcess exited with code 0\nOriginal token count: 2\nOutput:\nconst x = 2\n"),
        _codex_fn("b", "exec_command", {"cmd": "npm test", "workdir": "/w", "yield_time_ms": 10000}),
        _codex_out("b", "Tests: 1 failed\n"),
        _codex_fn("d", "exec_command", {"cmd": "npm test", "workdir": "/w", "yield_time_ms": 10000}),
        _codex_out("d", "Tests: 1 failed\n"),
    ]  # fmt: skip
    (d,) = load_lines(tmp_path, direct)
    fields = ("name", "kind", "target", "args", "result", "error")
    assert [[getattr(s, f) for f in fields] for s in d.steps] == [
        [getattr(s, f) for f in fields] for s in t.steps[:4]
    ]


def test_codex_code_mode_rollout():
    """A paginated 0.156 rollout in code mode: reads, a test run, a patch through
    ``tools.apply_patch`` (a change of the file it names, not of everything) and a test still
    running, finished by a ``wait`` on its cell."""
    t = one("codex_rollout_code_mode.jsonl")
    got = [(s.name, s.kind, s.target) for s in t.steps]
    assert got == [
        ("exec_command", "observe", "src/parser.py"),
        ("exec_command", "exec", None),
        ("exec_command", "observe", "src/parser.py"),
        ("apply_patch", "mutate", "src/parser.py"),
        ("exec_command", "exec", None),
        ("wait", "exec", None),
        ("", "other", None),
    ]
    read, run, reread, patch, rerun, wait, _reply = t.steps
    assert read.after_user and read.meta["returncode"] == 0 and read.result == reread.result
    assert run.result.startswith("F\nFAILED") and "returncode" not in run.meta
    assert rerun.result.startswith("Script running with cell ID 3 (call_5)")
    assert wait.result == ".\n1 passed\n"
    assert loopcore.analyse_burn(t).findings == ()  # each re-read follows a run


def load_lines(tmp_path, lines):
    path = tmp_path / "direct.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return list(load(path))


def test_codex_code_mode_failures_and_running_programs(tmp_path):
    """A program that threw is an error; one still running printed a part of its output, and
    the ``wait`` calls that bring the rest (the same fixed wait each time) are never repeats."""
    lines = [
        _codex_rec("session_meta", {"id": "sess-cw", "cwd": "/w", "cli_version": "0.155.0"}),
        _code_exec("a", 'text(await tools.exec_command({cmd:"cat missing.txt"}));'),
        _code_out("a", "Script failed\nWall time 0.1 seconds\nOutput:\n", "Error: no such file"),
        _code_exec("b", 'const r = await tools.exec_command({"cmd":"npx jest"}); text(r.output);'),
        _code_out("b", "Script running with cell ID 28\nWall time 10.0 seconds\nOutput:\n", ""),
        _codex_fn("w1", "wait", {"cell_id": "28", "yield_time_ms": 10000}),
        _code_out("w1", "Script running with cell ID 28\nWall time 10.0 seconds\nOutput:\n", ""),
        _codex_fn("w2", "wait", {"cell_id": "28", "yield_time_ms": 10000}),
        _code_out("w2", "Script running with cell ID 28\nWall time 10.0 seconds\nOutput:\n", ""),
        _codex_fn("w3", "wait", {"cell_id": "28", "yield_time_ms": 10000}),
        _code_out("w3", _done(2.0), "Tests: 2 failed\n"),
    ]  # fmt: skip
    t = _one_rollout(tmp_path, lines)
    failed, start, w1, w2, w3 = t.steps
    assert failed.error == "Error: no such file" and failed.result == "Error: no such file"
    assert start.result != w1.result != w2.result and w1.args == w2.args
    assert w3.result == "Tests: 2 failed\n"
    assert loopcore.analyse_burn(t).findings == ()


def test_codex_mcp_tool_is_named_by_its_namespace(tmp_path):
    # Codex 0.137+: {"name": "js", "namespace": "mcp__node_repl"} (a real 0.140 rollout)
    lines = [
        _codex_rec("session_meta", {"id": "sess-m", "cwd": "/repo", "cli_version": "0.140.0"}),
        _codex_fn("a", "js", {"code": "1+1"}, namespace="mcp__node_repl"),
        _codex_out("a", "2"),
        _codex_fn("b", "mcp__node_repl__js", {"code": "2+2"}, namespace="mcp__node_repl"),
        _codex_out("b", "4"),
    ]
    t = _one_rollout(tmp_path, lines)
    assert [s.name for s in t.steps] == ["mcp__node_repl__js", "mcp__node_repl__js"]


def test_claude_code_profile_knows_the_2_1_tools():
    # seen in real Claude Code 2.1.170-2.1.181 sessions: none of them runs anything, and as exec
    # (the default for an unknown tool) each would hide the repeated reads around it
    prof = loopcore.taxonomy.PROFILES["claude-code"]
    for name in ("Skill", "ToolSearch", "TaskCreate", "TaskUpdate", "TaskList", "TaskGet",
                 "EnterPlanMode", "mcp__ccd_session__mark_chapter"):  # fmt: skip
        assert prof.access(name, {})[0] == "other", name
    assert prof.access("Agent", {"prompt": "look"})[0] == "exec"  # a sub-agent may do anything


def _agent_session(folder: pathlib.Path, *, own_file: bool) -> pathlib.Path:
    """A Claude Code 2.1.17x session that ran a sub-agent through the ``Agent`` tool: the main
    file holds only the call and its ``toolUseResult`` summary (the sub-agent's records are in
    its own file, when that is there)."""
    call = {"type": "tool_use", "id": "t1", "name": "Agent", "input": {"prompt": "look"}}
    answer = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                           "content": [{"type": "text", "text": "all fine"}]}]}  # fmt: skip
    done = json.loads(_claude_line("u3", "u2", "user", answer))
    done["toolUseResult"] = {"status": "completed", "agentId": "a9", "totalTokens": 25426,
                             "totalToolUseCount": 23, "totalDurationMs": 88983}  # fmt: skip
    lines = [
        _claude_line("u1", None, "user", {"role": "user", "content": "go"}),
        _claude_line("u2", "u1", "assistant", {"id": "m1", "role": "assistant", "content": [call]}),
        json.dumps(done),
    ]
    main = folder / "s-advisor.jsonl"
    main.write_text("\n".join(lines) + "\n")
    if own_file:
        own = folder / "s-advisor" / "subagents" / "agent-a9.jsonl"
        own.parent.mkdir(parents=True)
        read = {"id": "s1", "role": "assistant", "content": [
            {"type": "tool_use", "id": "r1", "name": "Read", "input": {"file_path": "a.py"}}]}  # fmt: skip
        rec = json.loads(_claude_line("q1", None, "assistant", read))
        own.write_text(json.dumps(rec | {"isSidechain": True, "agentId": "a9"}) + "\n")
    return main


def test_claude_code_sub_agent_runs_whose_records_are_not_read_are_said(tmp_path, capsys):
    from loopcore.cli import main as cli

    session = _agent_session(tmp_path, own_file=False)
    (t,) = load(session)
    assert t.meta["sub_agents_unread"] == [{"agent": "a9", "tool_uses": 23, "tokens": 25426}]
    for extra in ([], ["--jobs", "2"]):
        assert cli(["analyse", str(session), "--no-progress", *extra]) == 0
        out = capsys.readouterr().out
        assert "Warning: 1 sub-agent run (23 tool calls by their own count) in " in out, extra
        assert str(session) in out


def test_claude_code_sub_agent_runs_read_from_their_own_file_are_not_said(tmp_path, capsys):
    from loopcore.cli import main as cli

    session = _agent_session(tmp_path, own_file=True)
    top, agent = load(session)
    assert "sub_agents_unread" not in top.meta and agent.session == "s-advisor/a9"
    assert cli(["analyse", str(tmp_path), "--no-progress"]) == 0
    assert "sub-agent run" not in capsys.readouterr().out


def test_claude_code_2_0_sub_agent_file_beside_the_session_is_read_in_the_walk(tmp_path, capsys):
    """Claude Code 2.0 wrote a sub-agent's records to ``agent-<agentId>.jsonl`` in the
    project's folder, beside the session's file (2.1 moved them to ``<sessionId>/subagents/``):
    the walk of that folder reads them, so the run is not said to be unread. Named on its own,
    the session's file still says it."""
    from loopcore.cli import main as cli

    session = _agent_session(tmp_path, own_file=False)
    read = {"id": "s1", "role": "assistant", "content": [
        {"type": "tool_use", "id": "r1", "name": "Read", "input": {"file_path": "a.py"}}]}  # fmt: skip
    rec = json.loads(_claude_line("q1", None, "assistant", read))
    (tmp_path / "agent-a9.jsonl").write_text(
        json.dumps(rec | {"isSidechain": True, "agentId": "a9"}) + "\n"
    )
    traces = loopcore.load(tmp_path)
    assert sorted(t.session for t in traces) == ["s-advisor", "s-advisor/a9"]
    assert not any((t.meta or {}).get("sub_agents_unread") for t in traces)
    assert cli(["analyse", str(tmp_path), "--no-progress"]) == 0
    assert "sub-agent run" not in capsys.readouterr().out
    (alone,) = load(session)
    assert alone.meta["sub_agents_unread"] == [{"agent": "a9", "tool_uses": 23, "tokens": 25426}]


def test_codex_mcp_error_is_read_from_the_servers_answer(tmp_path):
    # a real 0.140 rollout: the output item holds only the text the model saw; the
    # mcp_tool_call_end event beside it (before or after) says the server answered an error
    def end(cid, result):
        return _codex_rec("event_msg", {"type": "mcp_tool_call_end", "call_id": cid,
                                        "invocation": {"server": "node_repl", "tool": "js"},
                                        "result": result})  # fmt: skip

    failed = {"Ok": {"content": [{"type": "text", "text": "Identifier 'state' has already been declared"}],
                     "isError": True}}  # fmt: skip
    fine = {"Ok": {"content": [{"type": "text", "text": "4"}], "isError": False}}
    seen = '[{"type":"text","text":"Identifier \'state\' has already been declared"}]'
    lines = [
        _codex_rec("session_meta", {"id": "sess-e", "cwd": "/repo", "cli_version": "0.140.0"}),
        _codex_fn("a", "js", {"code": "let state"}, namespace="mcp__node_repl"),
        end("a", failed),
        _codex_out("a", "Wall time: 0.0266 seconds\nOutput:\n" + seen),
        _codex_fn("b", "js", {"code": "let state"}, namespace="mcp__node_repl"),
        _codex_out("b", "Wall time: 0.01 seconds\nOutput:\n" + seen),
        end("b", {"Err": "tool call timed out"}),
        _codex_fn("c", "js", {"code": "2+2"}, namespace="mcp__node_repl"),
        end("c", fine),
        _codex_out("c", "Wall time: 0.01 seconds\nOutput:\n4"),
    ]
    t = _one_rollout(tmp_path, lines)
    a, b, c = t.steps
    assert a.error == "Identifier 'state' has already been declared" and a.result == seen
    assert b.error == "tool call timed out" and c.error is None and c.result == "4"


def test_codex_tool_search_is_a_call_answered_by_the_tools_it_found(tmp_path):
    # Codex 0.140+ loads tool definitions on demand: the model's tool_search_call and the
    # definitions its output brings into the context (2.2 K tokens on a real run) are a step
    usage = {"input_tokens": 0, "cached_input_tokens": 0, "output_tokens": 28}
    tools = [{"type": "namespace", "name": "mcp__linear", "tools": [{"type": "function",
              "name": "_list_milestones", "description": "List all milestones"}]}]  # fmt: skip
    lines = [
        _codex_rec("session_meta", {"id": "sess-t", "cwd": "/repo", "cli_version": "0.140.0"}),
        _codex_rec(
            "response_item",
            {
                "type": "tool_search_call",
                "call_id": "a",
                "execution": "client",
                "arguments": {"query": "deployments", "limit": 8},
            },
        ),  # fmt: skip
        _codex_rec(
            "event_msg",
            {"type": "token_count", "info": {"last_token_usage": usage | {"input_tokens": 37456}}},
        ),  # fmt: skip
        _codex_rec(
            "response_item",
            {"type": "tool_search_output", "call_id": "a", "status": "completed", "tools": tools},
        ),  # fmt: skip
        _codex_fn("b", "exec_command", {"cmd": "ls"}),
        _codex_rec(
            "event_msg",
            {"type": "token_count", "info": {"last_token_usage": usage | {"input_tokens": 39839}}},
        ),  # fmt: skip
        _codex_out("b", "Wall time: 0.1 seconds\nOutput:\na.py\n"),
    ]
    path = tmp_path / "rollout.jsonl"
    path.write_text("\n".join(lines) + "\n")
    stats = loopcore.LoadStats()
    (t,) = load(path, keep_going=True, stats=stats)
    search, ls = t.steps
    assert (search.name, search.kind, search.args) == (
        "tool_search",
        "other",
        {"query": "deployments", "limit": 8},
    )
    assert search.result == tools and search.tokens_in == 39839 - 37456 - 28
    assert not stats.errors and t.meta["unanswered"] == 0 and ls.result == "a.py\n"


# -- a message from the person at the keyboard -------------------------------------------------


def _repeat_findings(t):
    return [(f.kind, f.steps) for f in loopcore.analyse_burn(t).findings]


def test_claude_code_a_typed_prompt_starts_the_evidence_again(tmp_path):
    """The same `git status` before and after the person's next request is no waste (they may
    have changed the tree); a meta record, a tool result and a sub-agent's prompt are not the
    person and mark nothing."""

    def asst(uuid, parent, cid):
        msg = {"id": f"m-{uuid}", "role": "assistant", "content": [
            {"type": "tool_use", "id": cid, "name": "Bash", "input": {"command": "git status"}}]}  # fmt: skip
        return _claude_line(uuid, parent, "assistant", msg)

    def result(uuid, parent, cid):
        msg = {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": cid, "content": "nothing to commit, working tree clean"}]}  # fmt: skip
        return _claude_line(uuid, parent, "user", msg)

    def prompt(uuid, parent, text, **extra):
        rec = json.loads(_claude_line(uuid, parent, "user", {"role": "user", "content": text}))
        return json.dumps(rec | extra)

    def run(between):
        lines = [
            prompt("u0", None, "look at the repo"),
            asst("a1", "u0", "c1"),
            result("r1", "a1", "c1"),
        ]
        lines += [between] if between else []
        lines += [asst("a2", "r1", "c2"), result("r2", "a2", "c2")]
        path = tmp_path / "s-advisor.jsonl"
        path.write_text("\n".join(lines) + "\n")
        (t,) = load(path)
        return t

    t = run(prompt("u1", "r1", "I committed my change, check again"))
    assert [s.after_user for s in t.steps] == [True, True]
    assert _repeat_findings(t) == []
    for between in (None, prompt("u1", "r1", "Caveat: local commands below", isMeta=True)):
        t = run(between)
        assert [s.after_user for s in t.steps] == [True, False]
        assert _repeat_findings(t) == [("duplicate_call", (1,))]


def test_codex_a_user_message_event_starts_the_evidence_again(tmp_path):
    def run(*between):
        lines = [
            _codex_rec("session_meta", {"id": "sess-u", "cwd": "/repo", "cli_version": "0.142.0"}),
            _codex_rec("response_item", {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "<environment_context>/repo</environment_context>"}]}),  # fmt: skip
            _codex_fn("a", "exec_command", {"cmd": "git status --short"}),
            _codex_out("a", "Process exited with code 0\nOutput:\n M a.py\n"),
            *between,
            _codex_fn("b", "exec_command", {"cmd": "git status --short"}),
            _codex_out("b", "Process exited with code 0\nOutput:\n M a.py\n"),
        ]  # fmt: skip
        return _one_rollout(tmp_path, lines)

    typed = _codex_rec("event_msg", {"type": "user_message", "message": "and now?"})
    t = run(typed)
    assert [s.after_user for s in t.steps] == [False, True] and _repeat_findings(t) == []
    t = run(_codex_rec("event_msg", {"type": "agent_message", "message": "checking"}))
    assert [s.after_user for s in t.steps] == [False, False] and _repeat_findings(t)


def test_codex_paginated_usage_as_a_completed_item_counts_once(tmp_path):
    usage = {"input_tokens": 1200, "cached_input_tokens": 1000, "output_tokens": 30}
    tc = {"type": "token_count", "info": {"last_token_usage": usage, "total_token_usage": usage}}

    def run(*records):
        lines = _codex_paginated([
            _codex_rec("session_meta", {"id": "sess-k", "cli_version": "0.155.0",
                                        "history_mode": "paginated"}),
            _codex_fn("a", "exec_command", {"cmd": "ls"}),
            *records,
            _codex_out("a", "Process exited with code 0\nOutput:\na.py\n"),
        ])  # fmt: skip
        return _one_rollout(tmp_path, lines)

    event = _codex_rec("event_msg", tc)
    item = _codex_item(tc)
    one = run(event)
    assert run(item).steps[0].tokens_out == one.steps[0].tokens_out == 30
    both = run(event, item)
    assert [(s.tokens_in, s.tokens_out) for s in both.steps] == [
        (s.tokens_in, s.tokens_out) for s in one.steps
    ]


def _usage160(inp, cached, out):
    return {"input_tokens": inp, "cached_input_tokens": cached, "cache_write_input_tokens": 0,
            "output_tokens": out, "reasoning_output_tokens": 0, "total_tokens": inp + out}  # fmt: skip


def _codex_160_rollout():
    """A sub-agent's paginated rollout as Codex 0.160 writes it (the line shapes of a real
    0.160.0 ``codex-tui`` sub-agent rollout): code-mode programs, a ``token_usage_record``
    after each response and the ``token_count`` event of the same usage after the tool's
    output, the same ``token_count`` written again once the next response has begun, a
    message from the parent as a model-visible ``inter_agent_communication``, and the
    record types that carry no call (security risk score, retained context, realtime)."""
    total = [0, 0, 0]
    recs = [
        _codex_rec("session_meta", {"session_id": "root", "id": "child", "parent_thread_id": "root",
                                    "cwd": "/repo", "originator": "codex-tui", "cli_version": "0.160.0",
                                    "history_mode": "paginated", "thread_source": "subagent",
                                    "source": {"subagent": {"thread_spawn": {"parent_thread_id": "root",
                                                                             "depth": 1}}}}),
        _codex_rec("event_msg", {"type": "task_started", "turn_id": "t1"}),
        _codex_rec("inter_agent_communication", {"author": "/root", "recipient": "/root/review",
                                                 "other_recipients": [], "trigger_turn": True,
                                                 "content": "Review the parser change in src/a.py"}),
    ]  # fmt: skip

    def response(n, cmd, out, usage, *, repeat_count=False):
        total[0] += usage[0]
        total[1] += usage[1]
        total[2] += usage[2]
        running = _usage160(*total)
        tc = {"type": "token_count", "info": {"total_token_usage": running,
                                              "last_token_usage": _usage160(*usage)}}  # fmt: skip
        program = 'text(await tools.exec_command({cmd:%s,"max_output_tokens":4000}));\n'
        recs.extend([
            _codex_item({"type": "Reasoning", "id": f"rs_{n}", "summary_text": [], "raw_content": []}),
            _codex_rec("response_item", {"id": f"rs_{n}", "summary": [], "type": "reasoning"}),
            *([_codex_rec("event_msg", repeat_count)] if repeat_count else []),
            _codex_rec("response_item", {"type": "custom_tool_call", "id": f"ctc_{n}", "status": "completed",
                                         "call_id": f"call_{n}", "name": "exec",
                                         "input": program % json.dumps(cmd)}),
            _codex_rec("token_usage_record", {"thread_id": "child", "turn_id": "t1", "session_id": "root",
                                              "response_id": f"resp_{n}", "usage": _usage160(*usage),
                                              "turn_token_usage": running, "thread_token_usage": running}),
            _codex_item({"type": "CommandExecution", "id": f"exec-{n}", "command": ["/bin/zsh", "-lc", cmd],
                         "cwd": "file:///repo", "status": "completed", "exit_code": 0,
                         "aggregated_output": out}),
            _codex_rec("response_item", {"type": "custom_tool_call_output", "id": f"ctco_{n}",
                                         "call_id": f"call_{n}", "output": [
                {"type": "input_text", "text": "Script completed\nWall time 0.2 seconds\nOutput:\n"},
                {"type": "input_text", "text": json.dumps({"chunk_id": f"c{n}", "wall_time_seconds": 0.01,
                                                           "exit_code": 0, "original_token_count": 3,
                                                           "output": out})}]}),
            _codex_rec("event_msg", tc),
        ])  # fmt: skip
        return tc

    first = response(1, "cat src/a.py", "x = 1\n", (5000, 4000, 40))
    recs.append(_codex_rec("security_risk_score", {"score": 0.1, "turn_id": "t1"}))
    # the token_count of the first response written again after the second one began
    response(2, "rg -n parse src", "src/a.py:1:def parse():\n", (5300, 5000, 30),
             repeat_count=first)  # fmt: skip
    recs.append(_codex_rec("retained_context", {"type": "verified_answer", "turn_id": "t1",
                                                "call_id": "call_q", "questions": []}))  # fmt: skip
    recs.append(_codex_rec("realtime_item", {"type": "presentation", "turn_id": "t1"}))
    response(3, "cat src/a.py", "x = 1\n", (5600, 5300, 20))
    recs.extend([
        _codex_rec("response_item", {"type": "message", "role": "assistant", "phase": "final_answer",
                                     "content": [{"type": "output_text", "text": "No issues."}]}),
        _codex_rec("token_usage_record", {"thread_id": "child", "response_id": "resp_4",
                                          "usage": _usage160(5700, 5600, 10),
                                          "thread_token_usage": _usage160(21600, 19900, 100)}),
        _codex_rec("event_msg", {"type": "token_count", "info": {
            "total_token_usage": _usage160(21600, 19900, 100),
            "last_token_usage": _usage160(5700, 5600, 10)}}),
        _codex_rec("event_msg", {"type": "task_complete", "turn_id": "t1", "last_agent_message": "No issues."}),
    ])  # fmt: skip
    return _codex_paginated(recs)


def test_codex_160_rollout_reads_every_record_and_each_usage_once(tmp_path):
    # 0.160 rollouts failed whole ("a rollout record of type 'token_usage_record' this
    # reader does not know"): every line is read now, each response's usage once
    t = _one_rollout(tmp_path, _codex_160_rollout())
    got = [(s.name, s.kind, s.target, s.tokens_out) for s in t.steps]
    assert got == [
        ("exec_command", "observe", "src/a.py", 40),
        ("exec_command", "observe", "src", 30),
        ("exec_command", "observe", "src/a.py", 20),
        ("", "other", None, 10),
    ]
    assert t.meta["cli_version"] == "0.160.0" and t.meta["unanswered"] == 0
    assert sum(s.tokens_out for s in t.steps) == 100  # the thread's own output total
    # the repeated token_count of the first response is not the second response's usage:
    # the second call's prompt grew by its own result, not by the first one's whole prompt
    read, search, reread, reply = t.steps
    assert read.result == reread.result == "x = 1\n" and read.meta["returncode"] == 0
    assert 0 < search.tokens_in <= 5300 - 5000
    assert [(f.kind, f.steps) for f in loopcore.analyse_burn(t).findings] == [
        ("redundant_observation", (2,))
    ]


def test_codex_repeated_token_count_never_counts_twice(tmp_path):
    # the same running total written twice: the second spent nothing and is no API call's
    usage = {"input_tokens": 1200, "cached_input_tokens": 1000, "output_tokens": 30}
    tc = {"type": "token_count", "info": {"last_token_usage": usage, "total_token_usage": usage}}
    lines = [
        _codex_rec("session_meta", {"id": "sess-d", "cli_version": "0.128.0"}),
        _codex_fn("a", "exec_command", {"cmd": "ls"}),
        _codex_out("a", "Process exited with code 0\nOutput:\na.py\n"),
        _codex_rec("event_msg", tc),
        _codex_rec("response_item", {"type": "reasoning", "summary": []}),
        _codex_rec("event_msg", tc),
        _codex_rec("response_item", {"type": "message", "role": "assistant",
                                     "content": [{"type": "output_text", "text": "a.py is there"}]}),
    ]  # fmt: skip
    t = _one_rollout(tmp_path, lines)
    call, reply = t.steps
    assert call.tokens_out == 30 and reply.tokens_estimated and reply.tokens_out < 30


def test_codex_token_count_with_the_running_total_alone(tmp_path):
    # a token_count that writes only total_token_usage (no last_token_usage): the call's usage
    # is what the total grew by; the first total of the file may hold earlier calls (a resumed
    # thread), so that call's usage stays unknown and is estimated
    def tc(inp, cached, out):
        total = {"input_tokens": inp, "cached_input_tokens": cached, "output_tokens": out,
                 "reasoning_output_tokens": 0, "total_tokens": inp + out}  # fmt: skip
        return _codex_rec("event_msg", {"type": "token_count", "info": {
            "total_token_usage": total, "model_context_window": 258400}})  # fmt: skip

    lines = [
        _codex_rec("session_meta", {"id": "sess-t", "cli_version": "0.160.0"}),
        _codex_fn("a", "exec_command", {"cmd": "ls"}),
        _codex_out("a", "Process exited with code 0\nOutput:\na.py\n"),
        tc(15000, 4000, 60),
        _codex_fn("b", "exec_command", {"cmd": "cat a.py"}),
        _codex_out("b", "Process exited with code 0\nOutput:\nx = 1\n"),
        tc(30100, 19000, 85),
        tc(30100, 19000, 85),  # the same total again: nothing spent since
        _codex_rec("response_item", {"type": "message", "role": "assistant",
                                     "content": [{"type": "output_text", "text": "a.py sets x"}]}),
        tc(60, 10, 90),  # a total that went down (a new thread's count): no usage read from it
    ]  # fmt: skip
    t = _one_rollout(tmp_path, lines)
    ls, cat, reply = t.steps
    assert cat.tokens_out == 25 and reply.tokens_estimated and reply.tokens_out < 25
    assert ls.tokens_out < 60  # estimated from its arguments, not the file's first total


def _uuid7(ms, tail="7000-8000-000000000000"):
    h = f"{ms:012x}"
    return f"{h[:8]}-{h[8:]}-{tail}"


def test_codex_forked_rollout_leaves_its_parents_copied_history_to_the_parent(tmp_path):
    # A legacy rollout of a thread forked with its parent's context writes its own
    # session_meta, then the parent's whole rollout, then its own turns: the copied steps are
    # the parent's (its own rollout has them), told apart by the UUIDv7 times of the turns
    parent, child = _uuid7(1_790_000_000_000), _uuid7(1_790_000_600_000)
    usage = {"input_tokens": 5000, "cached_input_tokens": 4000, "output_tokens": 40}
    tc = _codex_rec("event_msg", {"type": "token_count", "info": {"last_token_usage": usage}})

    def rollout(child_id, parent_id, early_turn, late_turn):
        return [
            _codex_rec("session_meta", {"id": child_id, "forked_from_id": parent_id,
                                        "cli_version": "0.150.0",
                                        "source": {"subagent": {"thread_spawn": {
                                            "parent_thread_id": parent_id}}}}),
            _codex_rec("session_meta", {"id": parent_id, "cli_version": "0.150.0"}),
            _codex_rec("event_msg", {"type": "task_started", "turn_id": early_turn}),
            _codex_rec("event_msg", {"type": "user_message", "message": "fix the footer"}),
            _codex_fn("p1", "exec_command", {"cmd": "cat src/footer.tsx"}),
            tc,
            _codex_out("p1", "Process exited with code 0\nOutput:\n<footer/>\n"),
            _codex_fn("p2", "spawn_agent", {"message": "check the links", "fork_context": True}),
            tc,
            _codex_rec("event_msg", {"type": "task_started", "turn_id": late_turn}),
            _codex_rec("event_msg", {"type": "user_message", "message": "check the links"}),
            _codex_fn("c1", "exec_command", {"cmd": "cat src/footer.tsx"}),
            tc,
            _codex_out("c1", "Process exited with code 0\nOutput:\n<footer/>\n"),
        ]  # fmt: skip

    t = _one_rollout(
        tmp_path, rollout(child, parent, _uuid7(1_790_000_100_000), _uuid7(1_790_000_600_500))
    )
    assert t.session == child and [s.call_id for s in t.steps] == ["c1"]
    assert t.meta["inherited_records"] == 8 and t.meta["forked_from"] == parent
    assert _repeat_findings(t) == []
    # ids that hold no time (not UUIDv7): the copy cannot be told apart, nothing is cut
    t = _one_rollout(tmp_path, rollout("child-thread", "parent-thread", "turn-1", "turn-2"))
    assert [s.call_id for s in t.steps] == ["p1", "p2", "c1"]
    assert "inherited_records" not in t.meta
    # a turn id without time inside the copy: its end cannot be told either
    t = _one_rollout(tmp_path, rollout(child, parent, "turn-1", _uuid7(1_790_000_600_500)))
    assert [s.call_id for s in t.steps] == ["p1", "p2", "c1"]
    # a meta of another thread in a rollout that says it forked from none: nothing is cut
    unforked = rollout(child, parent, _uuid7(1_790_000_100_000), _uuid7(1_790_000_600_500))
    meta = json.loads(unforked[0])
    meta["payload"] = {
        k: v for k, v in meta["payload"].items() if k not in ("forked_from_id", "source")
    }
    t = _one_rollout(tmp_path, [json.dumps(meta), *unforked[1:]])
    assert [s.call_id for s in t.steps] == ["p1", "p2", "c1"]
    # a thread that ended before its first turn: everything after its own meta was copied
    lines = rollout(child, parent, _uuid7(1_790_000_100_000), _uuid7(1_790_000_600_500))
    t = _one_rollout(tmp_path, lines[:9])
    assert t.steps == [] and t.meta["inherited_records"] == 8


def test_codex_compressed_rollouts_are_read_once(tmp_path):
    # Codex keeps older rollouts as rollout-*.jsonl.zst and reads the plain .jsonl when
    # both are there (codex-rs/rollout/src/compression.rs): a folder walk does the same
    if sys.version_info >= (3, 14):
        from compression import zstd
    else:
        from backports import zstd
    lines = [
        _codex_rec("session_meta", {"id": "sess-z", "cwd": "/repo", "cli_version": "0.153.4"}),
        _codex_fn("a", "exec_command", {"cmd": "cat a.py"}),
        _codex_out("a", "Process exited with code 0\nOutput:\nx = 1\n"),
    ]
    body = ("\n".join(lines) + "\n").encode()
    day = tmp_path / "sessions" / "2026" / "09" / "05"
    day.mkdir(parents=True)
    old = day / "rollout-2026-09-05T10-00-00-0001.jsonl.zst"
    old.write_bytes(zstd.compress(body))
    (t,) = load(old)
    assert t.format == "codex" and t.session == "sess-z" and len(t.steps) == 1
    assert t.steps[0].result == "x = 1\n"
    # mid-compression both are there: one trace, from the plain file
    both = day / "rollout-2026-09-05T11-00-00-0002.jsonl"
    both.write_bytes(body.replace(b"sess-z", b"sess-y"))
    (day / (both.name + ".zst")).write_bytes(zstd.compress(body.replace(b"sess-z", b"sess-y")))
    traces = list(load(tmp_path / "sessions"))
    assert sorted(t.session for t in traces) == ["sess-y", "sess-z"]
    assert [t.source for t in traces if t.session == "sess-y"] == [str(both)]


def _codex_paginated(records):
    # a paginated rollout (Codex 0.151+): every line carries its ordinal
    out = []
    for k, line in enumerate(records):
        rec = json.loads(line)
        out.append(json.dumps({"timestamp": rec["timestamp"], "ordinal": k} | rec))
    return out


def _codex_item(item, turn="t1"):
    return _codex_rec("event_msg", {"type": "item_completed", "thread_id": "sess-p",
                                    "turn_id": turn, "item": item,
                                    "started_at_ms": 0, "completed_at_ms": 1})  # fmt: skip


def test_codex_paginated_rollout_person_and_mcp_failures(tmp_path):
    # Paginated rollouts write no user_message or mcp_tool_call_end event: the person's
    # message is a completed UserMessage turn item and an MCP failure a McpToolCall item
    # (status "failed", the server's isError result or a transport error); calls and
    # outputs are response items as before (shape of codex-rs rollout/src/policy.rs)
    def run(*between):
        lines = _codex_paginated([
            _codex_rec("session_meta", {"id": "sess-p", "cwd": "/repo", "cli_version": "0.153.4",
                                        "history_mode": "paginated"}),
            _codex_rec("event_msg", {"type": "task_started", "turn_id": "t1"}),
            _codex_item({"type": "UserMessage", "id": "u1",
                         "content": [{"type": "text", "text": "what changed?", "text_elements": []}]}),
            _codex_rec("response_item", {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "what changed?"}]}),
            _codex_fn("a", "exec_command", {"cmd": "git status --short"}),
            _codex_out("a", "Process exited with code 0\nOutput:\n M a.py\n"),
            _codex_item({"type": "CommandExecution", "id": "a", "command": ["/bin/bash", "-lc",
                         "git status --short"], "status": "completed", "exit_code": 0}),
            *between,
            _codex_fn("b", "exec_command", {"cmd": "git status --short"}),
            _codex_out("b", "Process exited with code 0\nOutput:\n M a.py\n"),
            _codex_fn("c", "lookup", {"q": "x"}, namespace="mcp__docs"),
            _codex_item({"type": "McpToolCall", "id": "c", "server": "docs", "tool": "lookup",
                         "arguments": {"q": "x"}, "status": "failed",
                         "result": {"content": [{"type": "text", "text": "no index"}], "isError": True}}),
            _codex_out("c", "Wall time: 0.01 seconds\nOutput:\nno index"),
            _codex_fn("d", "lookup", {"q": "y"}, namespace="mcp__docs"),
            _codex_out("d", "Wall time: 0.01 seconds\nOutput:\n"),
            _codex_item({"type": "McpToolCall", "id": "d", "server": "docs", "tool": "lookup",
                         "arguments": {"q": "y"}, "status": "failed",
                         "error": {"message": "transport failed"}}),
            _codex_fn("e", "lookup", {"q": "z"}, namespace="mcp__docs"),
            _codex_item({"type": "McpToolCall", "id": "e", "server": "docs", "tool": "lookup",
                         "arguments": {"q": "z"}, "status": "completed",
                         "result": {"content": [{"type": "text", "text": "ok"}], "isError": False}}),
            _codex_out("e", "Wall time: 0.01 seconds\nOutput:\nok"),
        ])  # fmt: skip
        return _one_rollout(tmp_path, lines)

    typed = _codex_item({"type": "UserMessage", "id": "u2", "content": [
        {"type": "text", "text": "I changed it, look again", "text_elements": []}]}, "t2")  # fmt: skip
    t = run(_codex_rec("event_msg", {"type": "task_started", "turn_id": "t2"}), typed)
    assert [s.after_user for s in t.steps] == [True, True, False, False, False]
    assert _repeat_findings(t) == []
    a, b, c, d, e = t.steps
    assert c.error == "no index" and d.error == "transport failed" and e.error is None
    assert not t.meta.get("no_steps") and len(t.steps) == 5

    # Codex mirrors only some of the person's messages: an answer to the agent's question or
    # a prompt with a pasted image may have no UserMessage item, and the message item
    # itself is the person's; what Codex writes (a hook's prompt, AGENTS.md, a skill) is not
    def user(*blocks):
        return _codex_rec("response_item", {"type": "message", "role": "user",
                                            "content": list(blocks)})  # fmt: skip

    def text(x):
        return {"type": "input_text", "text": x}

    person = {
        "reply": [user(text('<send_user_message_question_reply>\n[{"answer":"yes"}]'))],
        "image": [
            user(
                text('<image name=[Image #1] path="/tmp/p.png">'),
                {"type": "input_image", "image_url": "data:image/png;base64,iVBOR"},
                text("</image>"),
                text("[Image #1] this one"),
            )
        ],  # fmt: skip
    }
    codex = {
        "commentary": [
            _codex_item(
                {
                    "type": "AgentMessage",
                    "id": "m1",
                    "content": [{"type": "Text", "text": "checking again"}],
                    "phase": "commentary",
                }
            )
        ],  # fmt: skip
        "hook": [
            user(text('<hook_prompt hook_run_id="stop:1">keep going</hook_prompt>')),
            _codex_item(
                {
                    "type": "HookPrompt",
                    "id": "h1",
                    "fragments": [{"text": "keep going", "hookRunId": "stop:1"}],
                }
            ),
        ],  # fmt: skip
        "agents": [
            user(
                text("# AGENTS.md instructions\n\n<INSTRUCTIONS>\nuse uv"),
                text("<environment_context>\n  <cwd>/repo</cwd>"),
            )
        ],  # fmt: skip
        "skill": [user(text("<skill>\n<name>plans</name>\n</skill>"))],
    }
    for kind, between in person.items():
        t = run(*between)
        assert [s.after_user for s in t.steps][:2] == [True, True], kind
        assert _repeat_findings(t) == [], kind
    for kind, between in codex.items():
        t = run(*between)
        assert [s.after_user for s in t.steps][:2] == [True, False], kind
        assert _repeat_findings(t), kind


def test_gemini_cli_a_user_message_starts_the_evidence_again(tmp_path):
    def gem(mid, cid):
        return {"id": mid, "timestamp": "t", "type": "gemini", "content": "",
                "toolCalls": [_gemini_call(cid, "read_file", {"file_path": "a.py"}, "A" * 400)]}  # fmt: skip

    def run(*between):
        msgs = [
            {"id": "u0", "timestamp": "t", "type": "user", "content": "read a.py"},
            gem("g1", "c1"),
        ]
        msgs += list(between) + [gem("g2", "c2")]
        path = tmp_path / "session-2026-12-01T00-00-abc.json"
        path.write_text(json.dumps({"sessionId": "g-u", "projectHash": "h", "messages": msgs}))
        (t,) = load(path)
        return t

    t = run({"id": "u1", "timestamp": "t", "type": "user", "content": "I edited it, read it again"})
    assert [s.after_user for s in t.steps] == [True, True] and _repeat_findings(t) == []
    t = run({"id": "i1", "timestamp": "t", "type": "info", "content": "a notice"})
    assert [s.after_user for s in t.steps] == [True, False] and _repeat_findings(t)


def test_gemini_cli_headless_stream_is_read(tmp_path):
    # `gemini -p ... --output-format stream-json` (packages/core/src/output/types.ts): it was
    # read as a chat conversation of one reply, every call lost
    events = [
        {"type": "init", "timestamp": "t", "session_id": "gem-s", "model": "gemini-2.5-pro"},
        {"type": "message", "timestamp": "t", "role": "user", "content": "fix a.py"},
        {"type": "message", "timestamp": "t", "role": "assistant", "content": "I will ", "delta": True},
        {"type": "message", "timestamp": "t", "role": "assistant", "content": "look.", "delta": True},
        {"type": "tool_use", "timestamp": "t", "tool_name": "read_file", "tool_id": "r1",
         "parameters": {"file_path": "a.py"}},
        {"type": "tool_use", "timestamp": "t", "tool_name": "run_shell_command", "tool_id": "s1",
         "parameters": {"command": "pytest -q", "description": "run the tests"}},
        {"type": "tool_result", "timestamp": "t", "tool_id": "r1", "status": "success",
         "output": "A" * 400},
        {"type": "tool_result", "timestamp": "t", "tool_id": "s1", "status": "error",
         "error": {"type": "execution_failed", "message": "Command timed out"}},
        {"type": "error", "timestamp": "t", "severity": "warning", "message": "loop detected"},
        {"type": "tool_use", "timestamp": "t", "tool_name": "replace", "tool_id": "e1",
         "parameters": {"file_path": "a.py", "old_string": "x", "new_string": "y"}},
        {"type": "tool_result", "timestamp": "t", "tool_id": "e1", "status": "success",
         "output": "Successfully modified file: a.py"},
        {"type": "message", "timestamp": "t", "role": "assistant", "content": "Done.", "delta": True},
        {"type": "result", "timestamp": "t", "status": "success",
         "stats": {"total_tokens": 900, "input_tokens": 800, "output_tokens": 100, "cached": 0,
                   "input": 800, "duration_ms": 5, "tool_calls": 3}},
    ]  # fmt: skip
    path = tmp_path / "run.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    assert detect_format(str(path)) == "gemini-cli"
    stats = LoadStats()
    (t,) = load(path, stats=stats)
    assert t.format == "gemini-cli" and t.session == "gem-s" and stats.skipped_lines == 0
    assert [(s.kind, s.name, s.target) for s in t.steps] == [
        ("observe", "read_file", "a.py"),
        ("exec", "run_shell_command", None),
        ("mutate", "replace", "a.py"),
        ("other", "", None),
    ]
    read, shell, edit, reply = t.steps
    assert read.result == "A" * 400 and read.error is None and read.after_user
    assert shell.args == {"command": "pytest -q"} and shell.error == "Command timed out"
    assert [s.ref for s in t.steps] == [{"line": 5}, {"line": 6}, {"line": 10}, {"line": 12}]
    assert t.meta["unanswered"] == 0 and t.meta["recording"] == "stream"
    assert t.meta["reported_total_tokens"] == 900
    # a batch is one API call, the reply after its results the next
    assert read.turn == shell.turn and edit.turn == read.turn + 1 and reply.turn == edit.turn + 1


def test_gemini_cli_a_rewound_branch_is_read_and_charged_only_within_itself(tmp_path):
    """/rewind drops a user message and what followed from the conversation; those calls were
    made and billed, so they are read (marked ``rewound``) and a loop inside them is charged.
    The person's prompt after the rewind starts the evidence again: the same read re-run after
    it is not charged."""

    def read(mid):
        return {
            "id": mid,
            "timestamp": "t",
            "type": "gemini",
            "content": "",
            "tokens": {"input": 3000, "output": 20, "cached": 0, "thoughts": 0, "tool": 0, "total": 3020},
            "toolCalls": [_gemini_call(f"{mid}-c", "read_file", {"file_path": "a.py"}, "A" * 2000)],
        }  # fmt: skip

    def user(mid, text):
        return {"id": mid, "timestamp": "t", "type": "user", "content": text}

    lines = [
        {"sessionId": "s-rw", "projectHash": "h", "startTime": "t", "kind": "main"},
        user("u1", "look at a.py"),
        read("g1"),
        read("g2"),  # the same read again, nothing between: the rewound branch's own repeat
        {"$rewindTo": "u1"},
        {"$set": {"messages": []}},
        user("u2", "look at a.py, carefully"),
        read("g3"),
    ]
    p = tmp_path / "session-rw.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in lines))
    (t,) = load(p)
    assert [s.ref["line"] for s in t] == [3, 4, 8]
    assert [bool(s.meta.get("rewound")) for s in t] == [True, True, False]
    assert t.meta["rewound_messages"] == 3 and [s.after_user for s in t] == [True, False, True]
    assert [steps for _kind, steps in _repeat_findings(t)] == [(1,)]
    # a rewind to an id the file does not hold drops everything in gemini-cli's loader: all
    # that came before is marked
    lines[4] = {"$rewindTo": "no-such-id"}
    p.write_text("".join(json.dumps(x) + "\n" for x in lines))
    (t,) = load(p)
    assert [bool(s.meta.get("rewound")) for s in t] == [True, True, False]


def test_opencode_a_user_message_starts_the_evidence_again_unless_opencode_wrote_it(tmp_path):
    def tool(mid, cid):
        return {"info": {"id": mid, "role": "assistant", "sessionID": "ses_u"}, "parts": [
            {"id": f"p{cid}", "type": "tool", "tool": "read", "callID": cid, "state": {
                "status": "completed", "input": {"filePath": "a.py"}, "output": "A" * 400}}]}  # fmt: skip

    def user(mid, **part):
        return {"info": {"id": mid, "role": "user", "sessionID": "ses_u"},
                "parts": [{"id": f"t{mid}", "type": "text", "text": "read it again"} | part]}  # fmt: skip

    def run(between):
        doc = {"info": {"id": "ses_u", "version": "1.3.17"},
               "messages": [user("m0"), tool("m1", "c1"), between, tool("m3", "c2")]}  # fmt: skip
        path = tmp_path / "export.json"
        path.write_text(json.dumps(doc))
        (t,) = load(path, format="opencode")
        return t

    t = run(user("m2"))
    assert [s.after_user for s in t.steps] == [True, True] and _repeat_findings(t) == []
    t = run(user("m2", synthetic=True))
    assert [s.after_user for s in t.steps] == [True, False] and _repeat_findings(t)


def test_openhands_a_person_s_message_starts_the_evidence_again(tmp_path):
    """V0 and V1 streams: a user message is the person's (interactive OpenHands), unless it is
    the text a run sends when no one is there (the evaluation harnesses' fake user response,
    the headless auto-continue, the critic's retry, the goal loop's follow-up), which marks
    nothing."""
    output = "total 4\n-rw-r--r-- 1 dev dev 812 a.py\n" * 10

    def v0(between):
        def msg(i, source, text):
            return {"id": i, "source": source, "action": "message", "args": {"content": text}}

        def run(i, cid):
            meta = {"function_name": "execute_bash", "tool_call_id": cid,
                    "model_response": {"id": f"r{cid}"}}  # fmt: skip
            return [
                {"id": i, "source": "agent", "action": "run",
                 "args": {"command": "ls -l"}, "tool_call_metadata": meta},
                {"id": i + 1, "source": "agent", "observation": "run", "cause": i,
                 "content": output, "extras": {"metadata": {"exit_code": 0}}},
            ]  # fmt: skip

        events = [msg(0, "user", "list the folder"), *run(1, "c1")]
        events += [msg(3, "user", between)] if between else []
        events += run(4, "c2")
        path = tmp_path / "events.json"
        path.write_text(json.dumps(events))
        (t,) = load(path, format="openhands")
        return t

    def v1(between):
        def msg(eid, source, text):
            return {"kind": "MessageEvent", "id": eid, "source": source,
                    "llm_message": {"role": source, "content": [{"type": "text", "text": text}]}}  # fmt: skip

        def run(eid, cid):
            return [
                {"kind": "ActionEvent", "id": eid, "source": "agent", "tool_name": "terminal",
                 "tool_call_id": cid, "llm_response_id": f"r{cid}",
                 "action": {"command": "ls -l"}},
                {"kind": "ObservationEvent", "id": f"o{eid}", "source": "environment",
                 "action_id": eid, "tool_call_id": cid, "tool_name": "terminal",
                 "observation": {"content": [{"type": "text", "text": output}], "exit_code": 0}},
            ]  # fmt: skip

        events = [msg("m0", "user", "list the folder"), *run("a1", "c1")]
        events += [msg("m1", "user", between)] if between else []
        events += run("a2", "c2")
        path = tmp_path / "v1.jsonl"
        path.write_text("\n".join(json.dumps(e) for e in events) + "\n")
        (t,) = load(path, format="openhands")
        return t

    for build in (v0, v1):
        t = build("I added a file, list it again")
        assert [s.after_user for s in t.steps] == [True, True], build.__name__
        assert _repeat_findings(t) == []
        nudges = (
            None,
            "Please continue working on the task on whatever approach you think is suitable.\n"
            "IMPORTANT: YOU SHOULD NEVER ASK FOR HUMAN HELP.\n",
            "Please continue on whatever approach you think is suitable.\n",
            # the SDK critic's retry (iterative refinement) and the goal loop's audit follow-up
            "The task appears incomplete (iteration 1/3, predicted success likelihood: 37.8%)."
            "\n\nPlease review what you've done and verify each requirement is met.\n",
            "The goal is NOT yet complete (audit iteration 2).\nOutstanding: the tests\n\n"
            "Inspect the real current state of the workspace (do not rely on memory).",
        )
        for between in nudges:
            t = build(between)
            assert [s.after_user for s in t.steps] == [True, False], (build.__name__, between)
            assert [steps for _, steps in _repeat_findings(t)] == [(1,)]


def test_cline_a_person_s_words_start_the_evidence_again(tmp_path):
    """Cline / Roo Code: the person's words come inside user messages (an answer, feedback, a
    message on resuming, their edit of an accepted write, a task resumed days later, which the
    harness itself says may have changed the project); tool results, reminders and environment
    details are the harness's and mark nothing."""
    body = "export const region = 'us-west1';\n" * 20

    def read(cid):
        return {"role": "assistant", "ts": 2, "content": [
            {"type": "tool_use", "id": cid, "name": "read_file", "input": {"path": "src/cfg.ts"}}]}  # fmt: skip

    def answer(cid, *extra):
        return {"role": "user", "ts": 3, "content": [
            {"type": "text", "text": f"[read_file for 'src/cfg.ts'] Result:\n{body}"},
            *({"type": "text", "text": t} for t in extra),
            {"type": "text", "text": "<environment_details>\n# Current Time\nnow\n</environment_details>"}]}  # fmt: skip

    def run(*between):
        msgs = [{"role": "user", "ts": 1, "content": [{"type": "text", "text": "<task>\nSet the region.\n</task>"}]}]  # fmt: skip
        msgs += [read("c1"), answer("c1")]
        if between:
            msgs += [
                {
                    "role": "assistant",
                    "ts": 2,
                    "content": [
                        {
                            "type": "tool_use",
                            "id": "q",
                            "name": "ask_followup_question",
                            "input": {"question": "Which region?\nOne of:\n- a\n- b"},
                        }
                    ],
                },
                {
                    "role": "user",
                    "ts": 3,
                    "content": [{"type": "text", "text": t} for t in between],
                },
            ]
        msgs += [read("c2"), answer("c2")]
        folder = tmp_path / "tasks" / f"17770000{len(list(tmp_path.rglob('*.json'))):05d}"
        folder.mkdir(parents=True)
        (folder / "api_conversation_history.json").write_text(json.dumps(msgs))
        (t,) = load(folder / "api_conversation_history.json")
        return [s for s in t.steps if s.name == "read_file"], t

    person = (
        [
            "[ask_followup_question for 'Which region?\nOne of:\n- a\n- b'] Result:\n<answer>\nb\n</answer>"
        ],
        [
            "The user has provided feedback on the results. Consider their input.",
            "<feedback>\nuse b\n</feedback>",
        ],
        [
            "[TASK RESUMPTION] This task was interrupted 3 days ago. Be aware that the project state may have changed since then."
        ],
        [
            "[TASK RESUMPTION] This task was interrupted just now.",
            "New instructions for task continuation:\n<user_message>\nread it again\n</user_message>",
        ],
        [
            "[write_to_file for 'src/cfg.ts'] Result:\nThe user made the following updates to your content:\n\n@@ -1 +1 @@"
        ],
        [
            '[ask_followup_question for \'Which region?\'] Result:\n{"status":"approved","message":"The user approved this operation and provided the following context","feedback":"b"}'
        ],
    )
    for between in person:
        reads, t = run(*between)
        assert [s.after_user for s in reads] == [True, True], between
        assert _repeat_findings(t) == [], between
    harness = (
        (),
        ["[ERROR] You did not use a tool in your previous response! Please retry with a tool use."],
        ["[ask_followup_question for 'Which region?'] Result:\nThe user denied this operation."],
        ["\n\n# TODO LIST UPDATE REQUIRED - You MUST include the task_progress parameter"],
    )
    for between in harness:
        reads, t = run(*between)
        assert [s.after_user for s in reads] == [True, False], between
        assert [k for k, _ in _repeat_findings(t) if k != "rejected_action"] != [], between


def test_a_last_line_cut_short_is_not_read_and_the_rest_is(tmp_path):
    # a session still being written (or cut off by a crash): its last record has no newline
    # and does not parse; the records before it are the trace, the line is named, nothing fails
    good = (FIX / "malformed_steps.jsonl").read_text(encoding="utf-8").splitlines()[0]
    path = tmp_path / "live.jsonl"
    path.write_text(f"{good}\n{good}\n" + good[: len(good) // 2], encoding="utf-8")
    stats = LoadStats()
    (t,) = load(path, stats=stats)
    assert len(t) == 2 and t.meta["incomplete_line"] == 3 and t.meta["skipped"] == 0
    assert stats.errors == [] and stats.skipped_lines == 0
    # the same half line with its newline, or before other lines, is malformed as before
    path.write_text(f"{good}\n" + good[: len(good) // 2] + "\n", encoding="utf-8")
    with pytest.raises(TraceFormatError) as ei:
        list(load(path))
    assert ei.value.line == 2
    path.write_text(f"{good}\n" + good[: len(good) // 2] + f"\n{good}", encoding="utf-8")
    with pytest.raises(TraceFormatError):
        list(load(path))
    # a whole last line without its newline is read as usual
    path.write_text(f"{good}\n{good}", encoding="utf-8")
    (t,) = load(path)
    assert len(t) == 2 and "incomplete_line" not in t.meta


def test_a_session_whose_first_record_is_being_written_is_empty_not_malformed(tmp_path):
    # a .jsonl session caught while its first record is written: nothing to read yet, the
    # line is named; a whole JSON document cut short (.json) and a line broken mid-way stay
    # malformed
    good = (FIX / "malformed_steps.jsonl").read_text(encoding="utf-8").splitlines()[0]
    for name in ("new.jsonl", "new.jsonl.gz"):
        path = tmp_path / name
        half = good[: len(good) // 2].encode()
        path.write_bytes(gzip.compress(half) if name.endswith(".gz") else half)
        stats = LoadStats()
        (t,) = load(path, stats=stats)
        assert len(t) == 0 and t.meta["incomplete_line"] == 1 and t.meta["empty"]
        assert stats.errors == [] and stats.no_steps == []
    cut_doc = tmp_path / "doc.json"
    cut_doc.write_text(good[: len(good) // 2], encoding="utf-8")
    with pytest.raises(TraceFormatError, match="invalid JSON"):
        list(load(cut_doc))
    broken = tmp_path / "broken.jsonl"
    broken.write_text(good.replace(",", " x,", 1), encoding="utf-8")
    with pytest.raises(TraceFormatError, match="invalid JSON"):
        list(load(broken))


def test_an_empty_list_in_a_folder_is_no_trace(tmp_path):
    # ~/.claude/todos/<id>.json is [] for a session with no todo list: no trace, no warning of
    # a source without steps; the same file named on its own, and an empty .jsonl session in
    # the folder, are still empty traces
    home = tmp_path / ".claude"
    (home / "todos").mkdir(parents=True)
    (home / "projects" / "-w").mkdir(parents=True)
    todo = home / "todos" / "5e55e55e-agent-5e55e55e.json"
    todo.write_text("[]")
    (home / "projects" / "-w" / "new.jsonl").write_text("")
    stats = LoadStats()
    got = list(load(home, stats=stats))
    assert [t.session for t in got] == ["new"] and got[0].meta["empty"]
    assert stats.ignored == [str(todo)] and stats.no_steps == []
    (t,) = load(todo)
    assert len(t) == 0 and t.meta["empty"]


def test_a_utf8_byte_order_mark_is_passed_over(tmp_path):
    src = (FIX / "openai_chat.json").read_bytes()
    (tmp_path / "bom").mkdir()
    (tmp_path / "plain").mkdir()
    (tmp_path / "bom" / "s.json").write_bytes(b"\xef\xbb\xbf" + src)
    (tmp_path / "plain" / "s.json").write_bytes(src)
    (a,) = load(tmp_path / "bom" / "s.json")
    (b,) = load(tmp_path / "plain" / "s.json")
    assert [s.to_dict() for s in a] == [s.to_dict() for s in b] and len(a) > 0
    assert a.total_tokens == b.total_tokens


# ----------------------------------------------------------------------------- lone surrogates

_ESCAPES = st.sampled_from(
    ["a", "\\\\", "\\ud83d", "\\ude00", "\\udc00", "\\n", "ud83d", "\\u0041", '\\"', "é", "\\uDBFF"]
)


@given(st.lists(_ESCAPES, max_size=10).map("".join))
@settings(max_examples=2000, deadline=None)
def test_lone_surrogates_are_read_as_a_lenient_decoder_reads_them(body):
    """What loopcore reads is what Python's json (which keeps a lone surrogate) reads, each lone
    surrogate then replaced by U+FFFD: a well-formed pair and an escaped backslash's "u" are
    left alone, and the text keeps its length."""
    import re

    from loopcore._json import loads, mend_surrogates

    text = '{"s": "' + body + '"}'
    want = {"s": re.sub("[\ud800-\udfff]", "\ufffd", json.loads(text)["s"])}
    for data in (text, text.encode()):
        assert loads(data) == want
        mended = mend_surrogates(data)
        assert len(mended) == len(data)
        if "\\ud" not in text.lower():
            assert mended is data


def _with_a_cut_emoji(value, tail):
    """*value* (parsed JSON) with *tail* appended to its longest text (a string with a space:
    no type name or id): a tool output cut to a length in UTF-16 code units ends in an emoji's
    high half."""
    best: list = [None, None, -1]

    def walk(v, parent, key):
        if isinstance(v, str) and parent is not None and " " in v and len(v) > best[2]:
            best[:] = [parent, key, len(v)]
        elif isinstance(v, dict):
            for k, x in v.items():
                walk(x, v, k)
        elif isinstance(v, list):
            for i, x in enumerate(v):
                walk(x, v, i)

    walk(value, None, None)
    if best[0] is not None:
        best[0][best[1]] += tail
    return value


def _surrogate_twins(src: pathlib.Path, root: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    """The fixture written twice under *root*, with the same names: with a lone high surrogate
    (as JSON.stringify and json.dumps escape it) at the end of each record's longest string,
    and with U+FFFD there instead."""
    rel = src.relative_to(FIX)
    out = []
    for tail, name in (("\ud83d", "cut"), ("\ufffd", "mended")):
        dest = root / name / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if rel.parent != pathlib.Path("."):  # a task folder: its other files as they are
            for sib in src.parent.iterdir():
                if sib.is_file() and sib != src:
                    shutil.copy(sib, dest.parent / sib.name)
        text = src.read_text(encoding="utf-8")
        if src.suffix == ".jsonl":
            lines = [
                json.dumps(_with_a_cut_emoji(json.loads(ln), tail)) if ln.strip() else ln
                for ln in text.split("\n")
            ]
            dest.write_text("\n".join(lines), encoding="utf-8")
        else:
            dest.write_text(json.dumps(_with_a_cut_emoji(json.loads(text), tail)), encoding="utf-8")
        out.append(dest)
    return out[0], out[1]


@pytest.mark.parametrize("name", sorted(FIXTURE_FORMATS))
def test_a_lone_surrogate_loses_no_record(name, tmp_path):
    """Claude Code, gemini-cli, opencode and Cline (JavaScript) and the Python harnesses write a
    half of an emoji cut from its pair as a lone surrogate escape, which orjson refuses: every
    format reads such a record as it reads the same record with U+FFFD in its place, and no
    line is malformed."""
    cut, mended = _surrogate_twins(FIX / name, tmp_path)
    cut_records = cut.read_text().split("\n") if cut.suffix == ".jsonl" else [cut.read_text()]
    assert any("\\ud83d" in r for r in cut_records)
    for r in cut_records:
        if "\\ud83d" in r:
            with pytest.raises(orjson.JSONDecodeError, match="surrogate"):
                orjson.loads(r)
    stats = LoadStats()
    got = list(load(cut, stats=stats))
    want = list(load(mended))
    assert not stats.errors and not stats.skipped_lines
    assert [[s.to_dict() for s in t] for t in got] == [[s.to_dict() for s in t] for t in want]
    assert [t.total_tokens for t in got] == [t.total_tokens for t in want]
    assert sum(len(t) for t in got) > 0


def test_tool_call_arguments_with_a_lone_surrogate_are_parsed():
    from loopcore.adapters._base import parse_args

    assert parse_args('{"command": "echo \\ud83d!"}') == ({"command": "echo \ufffd!"}, True)
    assert parse_args('{"command": "echo \\ud83d\\ude00"}') == (
        {"command": "echo \U0001f600"},
        True,
    )
    assert parse_args('{"command": "echo \\\\ud83d"}') == ({"command": "echo \\ud83d"}, True)
    assert parse_args('{"command": "\\ud83d') == ('{"command": "\\ud83d', False)


def test_a_line_with_a_lone_surrogate_and_another_fault_is_still_named(tmp_path):
    """Mending is for surrogates only: a line broken otherwise is malformed, with its own error
    and line, and the lines around it are read."""
    good = (FIX / "loopcore_steps.jsonl").read_text().splitlines()
    lines = [good[0], '{"kind": "observe", "name": "Read\\ud83d", ', *good[1:]]
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(TraceFormatError) as err:
        list(load(path))
    assert err.value.line == 2 and "surrogate" not in str(err.value)
    stats = LoadStats()
    got = list(load(path, keep_going=True, stats=stats))
    assert [e.line for e in stats.errors] == [2] and stats.skipped_lines == 1
    want = list(load(FIX / "loopcore_steps.jsonl"))
    assert [len(t) for t in got] == [len(t) for t in want]


# ---------------------------------------------------------------- NaN and Infinity (Python's json)


@pytest.mark.parametrize(
    "text, want",
    [
        ("[NaN, Infinity, -Infinity]", [math.nan, math.inf, -math.inf]),
        ('{"cost": NaN, "note": "NaN"}', {"cost": math.nan, "note": "NaN"}),
        ("[1e999, -1e999]", [math.inf, -math.inf]),  # as JSON.parse reads them
        ('["\\ud83d", Infinity]', ["\ufffd", math.inf]),  # both retries on one document
    ],
)
def test_non_finite_floats_are_read_as_python_s_json_reads_them(text, want):
    """Python's json.dumps writes a float that is not finite as NaN / Infinity and reads it back;
    orjson refuses the document: loopcore reads it as Python's json does."""
    from loopcore._json import loads

    for data in (text, text.encode()):
        with pytest.raises(orjson.JSONDecodeError):
            orjson.loads(data)
        got = loads(data)
        assert json.dumps(got) == json.dumps(want)  # NaN == NaN under json.dumps, not ==


@pytest.mark.parametrize(
    "text, line",
    [
        ("[NaN,\n  }", 2),  # another fault: named where it is, not at the NaN
        ('{"a": NaN,\n "b": [1, 2,\n ]}', 3),
        ('["\xed\xa0\x80", NaN]', 1),  # an encoded surrogate is still not UTF-8
    ],
)
def test_a_document_with_nan_and_another_fault_is_still_an_error(text, line):
    from loopcore._json import loads

    data = text.encode("latin-1") if "\xed" in text else text.encode()
    with pytest.raises(orjson.JSONDecodeError) as err:
        loads(data)
    assert err.value.lineno == line


def test_a_python_trajectory_with_nan_costs_loses_no_step(impl, tmp_path):
    """A mini-swe-agent trajectory and an OTel export written by Python's json with costs and
    times it could not compute (NaN, Infinity) read as the same records with those numbers
    absent: the same steps, tokens and findings, no malformed file; on both twins."""

    def write(name, doc, dumps):
        path = tmp_path / name
        path.write_text(dumps(doc))
        return path

    for fixture, where in (
        ("mini_swe_agent_v1.json", ("info", "model_stats")),
        ("otel_genai_spans.json", None),
    ):
        doc = json.loads((FIX / fixture).read_text())
        clean = json.loads(json.dumps(doc))
        if where is None:  # every span's start time unknown: the spans keep their order
            spans = [
                sp for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for sp in ss["spans"]
            ]
            assert spans
            for sp in spans:
                sp["startTimeUnixNano"] = math.inf
            for rs in clean["resourceSpans"]:
                for ss in rs["scopeSpans"]:
                    for sp in ss["spans"]:
                        sp["startTimeUnixNano"] = 0
        else:
            node = doc
            for k in where:
                node = node.setdefault(k, {})
            node["instance_cost"] = math.nan
            node["api_calls"] = math.inf
        nan_path = write(f"nan_{fixture}", doc, json.dumps)
        assert "NaN" in nan_path.read_text() or "Infinity" in nan_path.read_text()
        clean_path = write(f"clean_{fixture}", clean, json.dumps)
        stats = LoadStats()
        got = list(load(nan_path, stats=stats))
        want = list(load(clean_path))
        assert not stats.errors and not stats.skipped_lines
        assert sum(len(t) for t in got) > 0
        assert [[s.to_dict() for s in t] for t in got] == [[s.to_dict() for s in t] for t in want]
        assert [impl.analyse_burn(t).to_dict() for t in got] == [
            impl.analyse_burn(t).to_dict() for t in want
        ]


def _every_number(value, to):
    # *value* (parsed JSON) with every number (not a bool) replaced by *to*
    if isinstance(value, dict):
        return {k: _every_number(v, to) for k, v in value.items()}
    if isinstance(value, list):
        return [_every_number(v, to) for v in value]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return to
    return value


@pytest.mark.parametrize("to", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("name", sorted(FIXTURE_FORMATS))
def test_every_number_not_finite_never_crashes_a_reader(name, to, impl, tmp_path):
    """Every number of every format's fixture NaN or +-Infinity (token counts, times, exit
    codes, line numbers): each file loads (or is reported malformed) and analyses with
    0 <= wasted <= total on both twins, never a traceback."""
    src = FIX / name
    dest = tmp_path / name
    files = [src] if src.is_file() else [f for f in src.rglob("*") if f.is_file()]
    for f in files:
        out = dest if f == src else dest / f.relative_to(src)
        out.parent.mkdir(parents=True, exist_ok=True)
        text = f.read_text(encoding="utf-8")
        try:
            if f.name.endswith(".jsonl"):
                lines = [
                    json.dumps(_every_number(json.loads(ln), to))
                    for ln in text.splitlines()
                    if ln.strip()
                ]
                out.write_text("\n".join(lines) + "\n")
            else:
                out.write_text(json.dumps(_every_number(json.loads(text), to)))
        except ValueError:  # not JSON (a database, a text file): as it is
            shutil.copy(f, out)
    stats = LoadStats()
    traces = list(load(dest, keep_going=True, stats=stats))
    # the JSON itself is read (orjson alone refuses every such file): what is left out is left
    # out by a reader, record by record, never the file for its numbers
    assert not [e for e in stats.errors if "invalid JSON" in str(e)]
    assert traces
    for t in traces:
        rep = impl.analyse_burn(t)
        assert 0 <= rep.wasted_tokens <= rep.total_tokens
        assert all(isinstance(s.tokens_in, int) and s.tokens_in >= 0 for s in t)


def test_usage_counts_that_are_not_finite_are_no_counts():
    from loopcore.adapters._base import usage_of

    for bad in (math.nan, math.inf, -math.inf):
        assert usage_of({"input_tokens": bad, "output_tokens": 10}) == (None, 10, 0)
        assert usage_of({"prompt_tokens": 100, "completion_tokens": bad}) == (100, None, 0)


# ------------------------------------------------------------ transcripts in Entire's pieces


def _pieces(src: pathlib.Path, folder: pathlib.Path, cuts: list[int]) -> pathlib.Path:
    """*src* (JSONL) written as Entire writes a transcript over its blob size: cut at the line
    numbers *cuts*, each piece without its last newline, ``full.jsonl``, ``full.jsonl.001``..."""
    lines = src.read_text(encoding="utf-8").rstrip("\n").split("\n")
    folder.mkdir(parents=True)
    bounds = [0, *cuts, len(lines)]
    for k in range(len(bounds) - 1):
        name = "full.jsonl" if k == 0 else f"full.jsonl.{k:03d}"
        (folder / name).write_text("\n".join(lines[bounds[k] : bounds[k + 1]]), encoding="utf-8")
    (folder / "metadata.json").write_text(
        '{"checkpoint_id": "0a1b2c3d4e5f", "agent": "Claude Code"}'
    )
    return folder / "full.jsonl"


@pytest.mark.parametrize("fixture", ["claude_code_session.jsonl", "codex_rollout_0146.jsonl"])
def test_a_transcript_in_entire_s_pieces_is_read_whole(fixture, impl, tmp_path):
    """Entire cuts a transcript over 50 MB at line ends into full.jsonl, full.jsonl.001, ...:
    read from a walk of the checkpoint folder or named by its first piece, it is the whole
    transcript (the pieces after the first were passed over: most of the costliest sessions
    lost in silence); each step cites the line of its own piece."""
    src = FIX / fixture
    n = len(src.read_text().rstrip("\n").split("\n"))
    first = _pieces(src, tmp_path / "ab" / "0a1b2c3d4e" / "0", [n // 3, 2 * n // 3])
    whole = list(load(src))
    assert sum(len(t) for t in whole) > 0
    for source in (tmp_path, first):
        stats = LoadStats()
        got = list(load(source, stats=stats))
        assert not stats.errors and stats.files - len(stats.ignored) == 1
        assert len(got) == len(whole)
        for g, w in zip(got, whole):
            assert g.meta["chunks"] == ["full.jsonl", "full.jsonl.001", "full.jsonl.002"]
            assert [s.to_dict() | {"ref": None} for s in g] == [
                s.to_dict() | {"ref": None} for s in w
            ]
            assert g.total_tokens == w.total_tokens
            assert impl.analyse_burn(g).wasted_tokens == impl.analyse_burn(w).wasted_tokens
            for a, b in zip(g, w):
                if isinstance(b.ref, dict) and "line" in b.ref:
                    line = b.ref["line"]
                    piece = 0 if line <= n // 3 else 1 if line <= 2 * n // 3 else 2
                    want = {**b.ref, "line": line - [0, n // 3, 2 * n // 3][piece]}
                    if piece:
                        want["file"] = f"full.jsonl.{piece:03d}"
                    assert a.ref == want


def test_a_malformed_line_in_a_piece_is_named_in_that_piece(tmp_path):
    src = FIX / "claude_code_session.jsonl"
    first = _pieces(src, tmp_path / "c" / "0", [4, 8])
    piece = first.parent / "full.jsonl.001"
    lines = piece.read_text().split("\n")
    piece.write_text("\n".join([lines[0], "{not json", *lines[1:]]))
    with pytest.raises(TraceFormatError) as err:
        list(load(first))
    assert "full.jsonl.001, line 2" in str(err.value)
    stats = LoadStats()
    got = list(load(first, keep_going=True, stats=stats))
    assert stats.skipped_lines == 1
    assert [len(t) for t in got] == [len(t) for t in load(src)]


def _entire_copy(root: pathlib.Path, where: str, lines: list[str], session: str) -> pathlib.Path:
    """A checkpoint's copy of *session*: ``<where>/full.jsonl`` holding *lines*, with the
    ``metadata.json`` Entire writes beside it."""
    folder = root / where
    folder.mkdir(parents=True)
    (folder / "full.jsonl").write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    (folder / "metadata.json").write_text(
        json.dumps(
            {
                "checkpoint_id": where.replace("/", "")[:12],
                "session_id": session,
                "agent": "Claude Code",
            }
        )  # fmt: skip
    )
    return folder / "full.jsonl"


@pytest.mark.parametrize("fixture", ["claude_code_session.jsonl", "codex_rollout_0146.jsonl"])
def test_entire_checkpoint_copies_of_one_session_are_read_once(fixture, impl, tmp_path):
    """Entire writes a session checkpointed again whole again: each later checkpoint's
    ``full.jsonl`` starts with every byte of the earlier one (entireio/git-sync: 97 sessions in
    673 copies). A walk read every copy as a trace, so the session's calls, tokens and waste
    counted once per checkpoint; now the copies another copy holds whole are passed over."""
    src = FIX / fixture
    lines = src.read_text(encoding="utf-8").rstrip("\n").split("\n")
    n = len(lines)
    root = tmp_path / "checkpoints"
    # the checkpoints in an order the walk does not read them by size; an equal copy too
    # (Entire names one session in more than one way: the bytes tell the copies)
    _entire_copy(root, "0a/1b2c3d4e5f/0", lines[: n // 3], "2026-01-05-s1")
    longest = _entire_copy(root, "1c/2d3e4f5a6b/1", lines, "s1")
    _entire_copy(root, "2e/3f4a5b6c7d/0", lines[: 2 * n // 3], "s1")
    _entire_copy(root, "3a/4b5c6d7e8f/2", lines, "s1")
    whole = list(load(longest))
    stats = LoadStats()
    got = list(load(root, stats=stats))
    assert stats.files - len(stats.ignored) == 1 and not stats.errors
    assert [t.source for t in got] == [t.source for t in whole]
    assert [[s.to_dict() for s in t] for t in got] == [[s.to_dict() for s in t] for t in whole]
    assert sum(impl.analyse_burn(t).total_tokens for t in got) == sum(
        impl.analyse_burn(t).total_tokens for t in whole
    )
    passed = sorted(str(root / w / "full.jsonl") for w in ("0a/1b2c3d4e5f/0", "2e/3f4a5b6c7d/0"))
    assert sorted(stats.copies) == passed + [str(root / "3a/4b5c6d7e8f/2/full.jsonl")]
    # the report says so, the same in one process and in several
    from loopcore import fleet
    from loopcore.report import collect

    local = collect([root]).to_dict()
    assert sorted(local["copies"]) == sorted(stats.copies)
    parallel = fleet.analyse([root], jobs=2)[0].to_dict()
    assert parallel["copies"] == local["copies"]
    assert parallel["overall"] == local["overall"]
    # the same units for a parallel or a fleet run: each copy read once there too

    assert [u.item for u in fleet.units([str(root)]) if u.item.endswith(".jsonl")] == [str(longest)]
    # a copy that differs anywhere holds something the others lack: read as its own trace
    changed = lines[: n // 2 - 1] + [lines[n // 2 - 1].replace('"', '"', 1) + " "]
    _entire_copy(root, "4f/5a6b7c8d9e/0", changed, "s1")
    # an early checkpoint's part of the session (no byte in common), another session, and
    # copies named on their own are read as they are
    _entire_copy(root, "5b/6c7d8e9f0a/0", lines[n // 2 :], "s1")
    stats = LoadStats()
    assert {t.source.split("#")[0] for t in load(root, stats=stats)} == {
        str(longest), str(root / "4f/5a6b7c8d9e/0/full.jsonl"),
        str(root / "5b/6c7d8e9f0a/0/full.jsonl"),
    }  # fmt: skip
    assert stats.files - len(stats.ignored) == 3
    first = root / "0a/1b2c3d4e5f/0/full.jsonl"
    assert {t.source.split("#")[0] for t in load([first, longest])} == {str(first), str(longest)}


def _oh_run(tag: str, commands: list[str]) -> list[dict]:
    """The history of an OpenHands SDK run as an evaluation writes it: an action and its
    observation per command (late-2025 shapes: ``output`` and ``error``, no ``content``)."""
    events: list[dict] = []
    for n, command in enumerate(commands):
        call = f"call_{tag}{n}"
        events.append(
            {
                "kind": "ActionEvent",
                "id": f"{tag}-action-{n}",
                "timestamp": f"2026-03-0{1 + n % 9}T10:00:{n:02d}",
                "source": "agent",
                "thought": [],
                "action": {"kind": "ExecuteBashAction", "command": command, "is_input": False},
                "tool_name": "execute_bash",
                "tool_call_id": call,
                "llm_response_id": f"resp-{tag}-{n}",
                "security_risk": "UNKNOWN",
            }
        )
        events.append(
            {
                "kind": "ObservationEvent",
                "id": f"{tag}-obs-{n}",
                "timestamp": f"2026-03-0{1 + n % 9}T10:01:{n:02d}",
                "source": "environment",
                "tool_name": "execute_bash",
                "tool_call_id": call,
                "observation": {
                    "kind": "ExecuteBashObservation",
                    "output": f"{command}: the budget sheet lists four rows of figures",
                    "error": None,
                },
                "action_id": f"{tag}-action-{n}",
            }
        )
    return events


def _oh_record(instance: str, history: list[dict]) -> dict:
    """A line of an evaluation's ``output.jsonl`` (``EvalOutput.model_dump()``)."""
    return {
        "instance_id": instance,
        "test_result": {"checkpoints": [], "final_score": {"total": 1, "result": 0}},
        "instruction": f"Task {instance}: tidy the quarterly budget notes.",
        "metadata": {"max_iterations": 50, "critic_name": "pass"},
        "history": history,
        "metrics": None,
        "error": None,
        "instance": {"id": instance},
    }


def _oh_output(folder: pathlib.Path, name: str, records: list[dict]) -> pathlib.Path:
    path = folder / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _oh_instance(folder: pathlib.Path, instance: str, history: list[dict]) -> None:
    """The per-instance files the openagentsafety harness writes beside ``output.jsonl``."""
    (folder / f"traj_{instance}.json").write_text(json.dumps(history, indent=2))
    (folder / f"eval_{instance}.json").write_text(
        json.dumps({"checkpoints": [], "final_score": {"total": 1, "result": 0}}, indent=2)
    )
    state = {"instance_id": instance, "history": history, "num_events": len(history)}
    (folder / f"state_{instance}.json").write_text(json.dumps(state, indent=2))


def test_openhands_evaluation_runs_written_several_times_are_read_once(impl, tmp_path):
    """An OpenHands evaluation writes each run into its output folder more than once: a line of
    ``output.jsonl`` (``output.critic_attempt_N.jsonl`` per attempt) and, in the
    openagentsafety harness, ``traj_<id>.json`` and ``state_<id>.json`` with the same history
    (OpenHands/benchmarks: 45 runs in 137 files). A walk read each as a trace, so every run's
    calls, tokens and waste counted three or four times; now a file whose every run another
    file of the folder holds (the same events, or the first of them) is passed over."""
    root = tmp_path / "outputs" / "gpt-4o_maxiter_50_N_initial"
    root.mkdir(parents=True)
    # run a reads the same sheet three times: waste, to be counted once
    a = _oh_run("a", ["cat budget.csv", "cat budget.csv", "wc -l budget.csv", "cat budget.csv"])
    b = _oh_run("b", ["ls", "head notes.md", "grep -n total notes.md"])
    records = [_oh_record("safety-a", a), _oh_record("safety-b", b), _oh_record("safety-c", [])]
    critic = _oh_output(root, "output.critic_attempt_1.jsonl", records)
    _oh_output(root, "output.jsonl", records[:1])
    _oh_instance(root, "safety-a", a)
    _oh_instance(root, "safety-b", b)
    _oh_instance(root, "safety-c", [])
    # a state written while run b was still going: the first of its events
    part = {"instance_id": "safety-b", "history": b[:4], "num_events": 4}
    (root / "state_safety-b.json").write_text(json.dumps(part, indent=2))
    whole = list(load(critic))
    assert [t.session for t in whole] == ["safety-a", "safety-b", "safety-c"]
    stats = LoadStats()
    got = list(load(tmp_path / "outputs", stats=stats))
    assert [t.source for t in got] == [t.source for t in whole]
    assert [[s.to_dict() for s in t] for t in got] == [[s.to_dict() for s in t] for t in whole]
    burn = [impl.analyse_burn(t) for t in got]
    assert burn[0].wasted_tokens > 0
    assert sum(r.total_tokens for r in burn) == sum(
        impl.analyse_burn(t).total_tokens for t in whole
    )
    assert sum(r.wasted_tokens for r in burn) == sum(
        impl.analyse_burn(t).wasted_tokens for t in whole
    )
    passed = ["output.jsonl"] + [
        f"{kind}_safety-{i}.json" for kind in ("state", "traj") for i in "abc"
    ]
    # traj_safety-c.json is [] (no format: ignored); the others are the copies
    assert sorted(stats.copies) == sorted(
        str(root / p) for p in passed if p != "traj_safety-c.json"
    )
    assert stats.files - len(stats.ignored) == 1 and not stats.errors
    # the report says so, the same in one process and in several
    from loopcore import fleet
    from loopcore.report import collect

    local = collect([tmp_path / "outputs"]).to_dict()
    assert sorted(local["copies"]) == sorted(stats.copies)
    parallel = fleet.analyse([tmp_path / "outputs"], jobs=2)[0].to_dict()
    assert parallel["copies"] == local["copies"]
    assert parallel["overall"] == local["overall"]
    runs = [u.item for u in fleet.units([str(root)]) if "_safety-" not in u.item]
    assert runs == [str(critic)]
    # a run that differs in one event is its own run: read; a file named on its own is read
    changed = json.loads(json.dumps(a))
    changed[3]["observation"]["output"] += " (and a fifth row since)"
    (root / "traj_safety-a.json").write_text(json.dumps(changed, indent=2))
    # the same events under another instance id are another run
    other = {"instance_id": "safety-d", "history": b, "num_events": len(b)}
    (root / "state_safety-d.json").write_text(json.dumps(other, indent=2))
    stats = LoadStats()
    sources = [t.source for t in load(root, stats=stats)]
    assert sources == [t.source for t in whole] + [
        str(root / "state_safety-d.json"),
        str(root / "traj_safety-a.json"),
    ]
    assert str(root / "traj_safety-a.json") not in stats.copies
    state_a = root / "state_safety-a.json"
    assert [t.source for t in load([state_a, critic])] == [str(state_a)] + [t.source for t in whole]


def test_entire_v2_raw_transcript_copies_of_one_session_are_read_once(tmp_path):
    """Entire's checkpoints v2 name a checkpoint's copy of the session ``raw_transcript`` (no
    extension; entireio/skills, ref ``entire/checkpoints/v2/full/current``) and write a session
    checkpointed again whole again, as v1 does with ``full.jsonl``: the copy another copy
    holds whole is passed over, and each is read (it had been passed over as no trace name)."""
    lines = (FIX / "codex_rollout_0146.jsonl").read_text(encoding="utf-8").rstrip("\n").split("\n")
    root = tmp_path / "checkpoints"
    early = root / "0a" / "1b2c3d4e5f" / "0" / "raw_transcript"
    later = root / "1c" / "2d3e4f5a6b" / "0" / "raw_transcript"
    for path, part in ((early, lines[: len(lines) // 2]), (later, lines)):
        path.parent.mkdir(parents=True)
        path.write_text("".join(x + "\n" for x in part), encoding="utf-8")
    whole = list(load(later))
    assert whole and len(whole[0]) > 0
    stats = LoadStats()
    got = list(load(root, stats=stats))
    assert [t.source for t in got] == [str(later)]
    assert [[s.to_dict() for s in t] for t in got] == [[s.to_dict() for s in t] for t in whole]
    assert stats.copies == [str(early)]


def test_a_gemini_recording_in_entire_s_pieces_is_one_recording(tmp_path):
    """Entire's gemini-cli chunker cuts a recording's messages into ``{"messages": [...]}``
    documents; they are one recording of all the messages."""
    doc = json.loads((FIX / "gemini_cli_session.json").read_text())
    folder = tmp_path / "g" / "0"
    folder.mkdir(parents=True)
    msgs = doc["messages"]
    (folder / "full.jsonl").write_text(json.dumps({**doc, "messages": msgs[:1]}))
    (folder / "full.jsonl.001").write_text(json.dumps({"messages": msgs[1:2]}))
    (folder / "full.jsonl.002").write_text(json.dumps({"messages": msgs[2:]}))
    (whole,) = load(FIX / "gemini_cli_session.json")
    (got,) = load(tmp_path)
    assert [s.to_dict() for s in got] == [s.to_dict() for s in whole] and len(got) > 0
    assert got.total_tokens == whole.total_tokens


def test_pieces_are_one_unit_of_parallel_work(tmp_path):
    from loopcore import fleet

    first = _pieces(FIX / "claude_code_session.jsonl", tmp_path / "p" / "0", [5])
    (unit,) = [u for u in fleet.units([str(tmp_path)]) if not str(u.item).endswith(".json")]
    assert str(unit.item) == str(first)
    assert unit.size == first.stat().st_size + (first.parent / "full.jsonl.001").stat().st_size


def test_claude_code_a_notification_written_as_a_user_record_is_not_the_person_s(tmp_path):
    """Claude Code 2.1.173 (a public Entire checkpoint) writes a background task's notification
    as a user record with ``origin.kind: task-notification`` and ``promptSource: system``, no
    ``isMeta``: it is no message from the person, so the re-run after it is still a repeat;
    a user record whose origin is ``human`` (or absent) is theirs."""

    def bash(mid, tid, inp):
        content = [
            {"type": "tool_use", "id": tid, "name": "Bash", "input": {"command": "pnpm test"}}
        ]
        return {"id": mid, "role": "assistant", "content": content,
                "usage": {"input_tokens": inp, "output_tokens": 20}}  # fmt: skip

    def result(tid):
        return {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": tid, "content": "3 passed\n" * 300}]}  # fmt: skip

    def session(origin):
        note = json.loads(_claude_line("u4", "u3", "user", {"role": "user", "content":
            "<task-notification>\n<task-id>b1</task-id>\n<status>completed</status>\n</task-notification>"}))  # fmt: skip
        if origin is not None:
            note["origin"] = {"kind": origin}
            note["promptSource"] = "system"
        lines = [
            _claude_line("u1", None, "user", {"role": "user", "content": "test it"}),
            _claude_line("u2", "u1", "assistant", bash("m1", "t1", 1000)),
            _claude_line("u3", "u2", "user", result("t1")),
            json.dumps(note),
            _claude_line("u5", "u4", "assistant", bash("m2", "t2", 1800)),
            _claude_line("u6", "u5", "user", result("t2")),
            _claude_line("u7", "u6", "assistant", bash("m3", "t3", 2600)),
        ]
        path = tmp_path / f"{origin}.jsonl"
        path.write_text("\n".join(lines) + "\n")
        (t,) = load(path)
        return t

    for origin in ("task-notification", "peer"):
        t = session(origin)
        assert not t.steps[1].after_user, origin
        assert [f.kind for f in loopcore.analyse_burn(t).findings][:1] == ["duplicate_call"]
    for origin in ("human", None):
        t = session(origin)
        assert t.steps[1].after_user, origin


def test_codex_a_patch_that_failed_verification_wrote_nothing(tmp_path):
    """Codex verifies a patch whole before it writes a file (`apply_patch verification failed:
    Failed to find expected lines in ...`, 15 such answers in public 0.142 rollouts): the call
    failed and wrote nothing, so the same file printed again, unchanged, is a repeat."""
    body = "".join(f"line {n} of the loader test\n" for n in range(40))
    patch = "*** Begin Patch\n*** Update File: /w/t.ts\n@@\n-it('x')\n+it('y')\n*** End Patch\n"
    failed = "apply_patch verification failed: Failed to find expected lines in /w/t.ts:\n  it('x')"

    def cat(cid):
        return [_codex_fn(cid, "exec_command", {"cmd": "cat /w/t.ts"}),
                _codex_out(cid, f"Chunk ID: {cid}1\nWall time: 0.1 seconds\nProcess exited with code 0\nOutput:\n{body}")]  # fmt: skip

    call = {"type": "custom_tool_call", "status": "completed", "call_id": "p",
            "name": "apply_patch", "input": patch}  # fmt: skip
    out = {"type": "custom_tool_call_output", "call_id": "p", "output": failed}
    meta = _codex_rec("session_meta", {"id": "sess-f", "cwd": "/w", "cli_version": "0.142.4"})
    t = _one_rollout(tmp_path, [meta, *cat("a"), _codex_rec("response_item", call),
                                _codex_rec("response_item", out), *cat("b")])  # fmt: skip
    read, edit, again = t.steps
    assert edit.error == failed and edit.no_op and edit.target == "/w/t.ts"
    assert [(f.kind, f.steps) for f in loopcore.analyse_burn(t).findings] == [
        ("redundant_observation", (2,))
    ]


def test_codex_a_poll_the_rollout_never_answered_is_no_repeat(tmp_path):
    """A rollout written while a command still ran ends with a `write_stdin` poll and no output
    (8 of 62 public Codex Desktop 0.137-0.140 rollouts): it was charged as a duplicate of the
    poll before it (the same session, no input). Which chunk it would have read is unknown:
    it is charged nothing and repeats nothing."""
    poll = {"session_id": 275, "chars": "", "yield_time_ms": 30000}
    running = "Wall time: 30.0 seconds\nProcess running with session ID 275\nOutput:\n"
    lines = [
        _codex_rec("session_meta", {"id": "sess-u", "cwd": "/repo", "cli_version": "0.140.0"}),
        _codex_fn("a", "exec_command", {"cmd": "npm run bench"}),
        _codex_out("a", "Chunk ID: 7358a0\n" + running),
        _codex_fn("b", "write_stdin", poll),
        _codex_out("b", "Chunk ID: 1f1f43\n" + running),
        _codex_fn("c", "write_stdin", poll),
    ]  # fmt: skip
    t = _one_rollout(tmp_path, lines)
    assert t.steps[-1].meta.get("not_run") is True and "not_run" not in t.steps[1].meta
    assert loopcore.analyse_burn(t).findings == ()


def test_codex_waits_for_sub_agents_are_no_repeats(tmp_path):
    """Codex 0.145's multi-agent tools (namespace ``collaboration``): ``wait_agent`` answers
    only whether a sub-agent wrote before the timeout, so a wait again after a timeout, or
    after the sub-agent's message came, has the same arguments and the same answer (a real
    entireio/entire-graph rollout: 181 tokens of duplicates). A wait's answer depends on time,
    as a poll's does: no wait repeats another, an unanswered one is not run, and the tokens
    are the answer's own. The first collab tools' ``wait`` (``ids``) is a wait too."""
    wait = {"timeout_ms": 30000}
    timed_out = '{"message":"Wait timed out.","timed_out":true}'
    mail = {"type": "agent_message", "author": "/root/worker", "recipient": "/root"}
    mail["content"] = [{"type": "input_text", "text": "Message Type: MESSAGE"}]
    lines = [
        _codex_rec("session_meta", {"id": "sess-w", "cwd": "/repo", "cli_version": "0.145.0"}),
        _codex_fn("a", "wait_agent", wait, namespace="collaboration"),
        _codex_out("a", timed_out),
        _codex_fn("b", "wait_agent", wait, namespace="collaboration"),
        _codex_out("b", timed_out),
        _codex_rec("response_item", mail),
        _codex_fn("c", "wait_agent", wait, namespace="collaboration"),
        _codex_out("c", timed_out),
        _codex_fn("d", "wait", {"ids": ["w1"], "timeout_ms": 1000}),
        _codex_out("d", '{"status":{},"timed_out":true}'),
        _codex_fn("e", "wait", {"ids": ["w1"], "timeout_ms": 1000}),
        _codex_out("e", '{"status":{},"timed_out":true}'),
        _codex_fn("f", "wait_agent", wait, namespace="collaboration"),
    ]  # fmt: skip
    t = _one_rollout(tmp_path, lines)
    assert [s.name for s in t.steps[:3]] == ["collaboration__wait_agent"] * 3
    assert t.steps[1].result == "Wait (b)\n" + timed_out and t.steps[1].kind == "exec"
    assert t.steps[-1].meta.get("not_run") is True and "not_run" not in t.steps[0].meta
    assert loopcore.analyse_burn(t).findings == ()


def test_codex_0118_polls_keep_their_chunk_after_the_command_line(tmp_path):
    """Codex 0.118 starts each output's header with the command (``Command: …``, then
    ``Chunk ID``) and writes a poll with no ``chars`` at all: the chunk's id was taken only
    from the first line, so every empty poll of a running test was a duplicate (a real
    entireio/git-sync rollouts: 116 findings in 284 files). A poll keeps its chunk wherever the header has it."""
    poll = {"session_id": 4964, "yield_time_ms": 1000}
    head = "Command: /bin/zsh -lc 'go test ./...'\nChunk ID: {}\nWall time: 5.0 seconds\n"
    running = "Process running with session ID 4964\nOriginal token count: 0\nOutput:\n"
    lines = [
        _codex_rec("session_meta", {"id": "sess-o", "cwd": "/repo", "cli_version": "0.118.0"}),
        _codex_fn("a", "exec_command", {"cmd": "go test ./..."}),
        _codex_out("a", head.format("68fe8b") + running),
        _codex_fn("b", "write_stdin", poll),
        _codex_out("b", head.format("73e2cf") + running),
        _codex_fn("c", "write_stdin", poll),
        _codex_out("c", head.format("254daf") + running),
    ]  # fmt: skip
    t = _one_rollout(tmp_path, lines)
    assert [s.result for s in t.steps[1:]] == ["Chunk ID: 73e2cf\n", "Chunk ID: 254daf\n"]
    assert loopcore.analyse_burn(t).findings == ()


def test_codex_a_web_page_opened_by_no_url_is_unknown(tmp_path):
    """Codex 0.118 writes a web search's ``open_page`` with no ``url`` (a page of the search
    before, which it does not name; 69 of 264 actions in public rollouts): two such were the
    same call. What was opened is unknown: it repeats nothing. The same page by its url twice
    is still one call."""

    def ws(action):
        item = {"type": "web_search_call", "status": "completed", "action": action}
        return _codex_rec("response_item", item)

    page = {"type": "open_page", "url": "https://example.org/doc"}
    meta = _codex_rec("session_meta", {"id": "sess-s", "cwd": "/repo", "cli_version": "0.118.0"})
    t = _one_rollout(tmp_path, [meta, ws({"type": "open_page"}), ws({"type": "open_page"})])
    assert loopcore.analyse_burn(t).findings == ()
    t = _one_rollout(tmp_path, [meta, ws(page), ws(page)])
    assert [f.kind for f in loopcore.analyse_burn(t).findings] == ["duplicate_call"]


def test_records_glued_on_one_line_are_each_read(tmp_path):
    """A resumed Codex 0.118 rollout whose last record had lost its newline: the next record
    follows it on the same line (``…}}{"timestamp"…``; 13 of 284 public copies). The line was
    a malformed record that failed the whole file; both records are read now, on that line.
    A line with anything else after its record is still malformed."""
    meta = _codex_rec("session_meta", {"id": "sess-g", "cwd": "/repo", "cli_version": "0.118.0"})
    lines = [
        meta,
        _codex_fn("a", "exec_command", {"cmd": "ls"}) + _codex_out("a", "Exit code: 0\nOutput:\nx\n"),
        _codex_fn("b", "exec_command", {"cmd": "pwd"}),
        _codex_out("b", "Exit code: 0\nOutput:\n/repo\n"),
    ]  # fmt: skip
    t = _one_rollout(tmp_path, lines)
    assert [(s.name, s.result, s.ref) for s in t.steps[:2]] == [
        ("exec_command", "x\n", {"line": 2}),
        ("exec_command", "/repo\n", {"line": 3}),
    ]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join([meta, lines[2] + " tail", lines[3]]) + "\n")
    with pytest.raises(TraceFormatError):
        list(load(path))
    # a first record nested deeper than Python's parser goes (orjson takes it): malformed, no
    # RecursionError
    deep = '{"a": ' + "[" * 1010 + "]" * 1010 + "}"
    path.write_text("\n".join([meta, deep + lines[3], lines[3]]) + "\n")
    with pytest.raises(TraceFormatError):
        list(load(path))


def test_arguments_an_exporter_redacted_are_unknown(tmp_path):
    """Entire's copy of a Codex 0.145 session has every message between agents redacted
    whole (``"message": "REDACTED"``): two ``send_message`` calls to one sub-agent compared
    equal and were charged as a duplicate (101 tokens). What was sent is unknown, as with a
    call whose arguments were not recorded: such a call repeats nothing. A value redacted in part
    (``echo REDACTED``: whatever was echoed) is unknown in that part, and a chat trace (no Entire
    copy) is read as it was."""
    send = {"target": "/root/worker", "message": "REDACTED"}
    lines = [
        _codex_rec("session_meta", {"id": "sess-x", "cwd": "/repo", "cli_version": "0.145.0"}),
        _codex_fn("a", "send_message", send, namespace="collaboration"),
        _codex_out("a", ""),
        _codex_fn("b", "send_message", send, namespace="collaboration"),
        _codex_out("b", ""),
        _codex_fn("c", "exec_command", {"cmd": "echo REDACTED"}),
        _codex_out("c", "Exit code: 0\nOutput:\nREDACTED\n"),
        _codex_fn("d", "exec_command", {"cmd": "echo REDACTED"}),
        _codex_out("d", "Exit code: 0\nOutput:\nREDACTED\n"),
    ]  # fmt: skip
    t = _one_rollout(tmp_path, lines)
    first, second, echo, again = t.steps[:4]
    assert first.args == {"target": "/root/worker", "message": "REDACTED (unknown: a)"}
    assert second.args["message"] == "REDACTED (unknown: b)"
    assert echo.args == {"cmd": "echo REDACTED-unknown-c"}  # the command around it is kept
    assert again.args == {"cmd": "echo REDACTED-unknown-d"}
    assert loopcore.analyse_burn(t).findings == ()
    fn = {"name": "send", "arguments": json.dumps(send)}
    msgs = [{"role": "user", "content": "task"}]
    for cid in ("c1", "c2"):
        tc = [{"id": cid, "type": "function", "function": fn}]
        msgs += [{"role": "assistant", "content": "", "tool_calls": tc}]
        msgs += [{"role": "tool", "tool_call_id": cid, "content": "sent"}]
    (chat,) = load(msgs)
    assert [s.args for s in calls(chat)] == [send, send]


def test_a_growth_whose_output_count_is_unknown_is_not_put_on_the_results():
    # an API call with a prompt count and no output count: the next prompt's growth holds its
    # output too, so the results are estimated from their text, not given the growth
    def call(cid, path, usage):
        fn = {"name": "read_file", "arguments": json.dumps({"path": path})}
        tc = [{"id": cid, "type": "function", "function": fn}]
        return {"role": "assistant", "content": "", "tool_calls": tc, "usage": usage}

    msgs = [
        {"role": "user", "content": "task"},
        call("c1", "a.py", {"prompt_tokens": 1000}),
        {"role": "tool", "tool_call_id": "c1", "content": "x = 1\n"},
        call("c2", "b.py", {"prompt_tokens": 9000, "completion_tokens": 10}),
        {"role": "tool", "tool_call_id": "c2", "content": "y = 2\n"},
        {
            "role": "assistant",
            "content": "Done.",
            "usage": {"prompt_tokens": 9020, "completion_tokens": 2},
        },
    ]
    (t,) = load(msgs)
    first, second = calls(t)
    assert first.tokens_estimated and first.tokens_in == 2  # not 8000
    assert second.tokens_in == 9020 - 9000 - 10


def test_claude_code_a_usage_snapshot_of_the_stream_is_no_output_count(tmp_path):
    """Claude Code 2.1.38-2.1.39 wrote each copy of a message with `stop_reason` null and the
    usage of the stream's start (marot/spotter's fixtures: 8 output tokens for a message with
    28,058 characters of thinking, the next prompt 29,709 tokens bigger): that growth went to
    the call's 581-character result. Such a count is no count: the result is estimated."""
    thinking = "Weighing the plan before writing it. " * 760

    def asst(mid, blocks, inp, out, stop=None):
        u = {"input_tokens": inp, "output_tokens": out}
        return {"id": mid, "role": "assistant", "content": blocks, "usage": u, "stop_reason": stop}

    use = {"type": "tool_use", "id": "t1", "name": "EnterPlanMode", "input": {}}
    lines = [
        _claude_line("u1", None, "user", {"role": "user", "content": "plan it"}),
        _claude_line("u2", "u1", "assistant", asst("m1", [{"type": "thinking", "thinking": thinking, "signature": "s"}], 5000, 8)),
        _claude_line("u3", "u2", "assistant", asst("m1", [use], 5000, 8)),
        _claude_line("u4", "u3", "user", {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "Entered plan mode. " * 30}]}),
        _claude_line("u5", "u4", "assistant", asst("m2", [{"type": "text", "text": "Here is the plan."}], 34709, 12, "end_turn")),
    ]  # fmt: skip
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(lines) + "\n")
    (t,) = load(path)
    step = t.steps[0]
    assert step.name == "EnterPlanMode" and step.tokens_estimated
    assert step.tokens_in == (len("Entered plan mode. " * 30) + 3) // 4  # not 29,701
    # a count the message's characters can hold is read as it is
    lines[1] = _claude_line("u2", "u1", "assistant", asst("m1", [{"type": "thinking", "thinking": thinking, "signature": "s"}], 5000, 7000))  # fmt: skip
    lines[2] = _claude_line("u3", "u2", "assistant", asst("m1", [use], 5000, 7000))
    path.write_text("\n".join(lines) + "\n")
    (t,) = load(path)
    assert not t.steps[0].tokens_estimated


def test_claude_code_a_read_answered_file_unchanged_observed_the_earlier_read(tmp_path):
    """Claude Code answers a Read of a file unchanged since the model last read it the same way
    with a stub ("File unchanged since last read. ... refer to that instead of re-reading.",
    `toolUseResult.type: file_unchanged`; FileReadTool): the re-read learned nothing, so it is
    the same observation as the full read, charged the stub's tokens; a compaction between
    starts the evidence again."""
    body = "".join(f"{n}\tline {n} of the module\n" for n in range(1, 60))
    stub = ("File unchanged since last read. The content from the earlier Read tool_result in "
            "this conversation is still current \u2014 refer to that instead of re-reading.")  # fmt: skip

    def read(uuid, parent, mid, tid, inp):
        use = {"type": "tool_use", "id": tid, "name": "Read", "input": {"file_path": "/w/m.py"}}
        return _claude_line(uuid, parent, "assistant", {"id": mid, "role": "assistant", "content": [use],
                            "usage": {"input_tokens": inp, "output_tokens": 30}})  # fmt: skip

    def answer(uuid, parent, tid, text):
        return _claude_line(uuid, parent, "user", {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": tid, "content": text}]})  # fmt: skip

    def session(*between):
        lines = [
            _claude_line("u0", None, "user", {"role": "user", "content": "look at m.py"}),
            read("a1", "u0", "m1", "t1", 1000), answer("r1", "a1", "t1", body),
            *between,
            read("a2", "r1", "m2", "t2", 1700), answer("r2", "a2", "t2", stub),
            read("a3", "r2", "m3", "t3", 1780), answer("r3", "a3", "t3", stub),
            _claude_line("a4", "r3", "assistant", {"id": "m4", "role": "assistant",
                         "content": [{"type": "text", "text": "Done."}],
                         "usage": {"input_tokens": 1860, "output_tokens": 5}}),
        ]  # fmt: skip
        path = tmp_path / f"s{len(between)}.jsonl"
        path.write_text("\n".join(lines) + "\n")
        (t,) = load(path)
        return t

    t = session()
    first, again, third = calls(t)
    assert again.result == body and again.meta["unchanged_stub"] is True
    assert again.tokens_in < 60  # the stub's tokens, not the body's
    found = loopcore.analyse_burn(t).findings
    assert [(f.kind, f.steps, f.of_step) for f in found] == [("redundant_observation", (1, 2), 0)]
    compacted = json.loads(_claude_line("c1", "r1", "system", {}))
    del compacted["message"]
    compacted |= {"subtype": "compact_boundary", "content": "Conversation compacted"}
    t = session(json.dumps(compacted))
    # the stub after the compaction gave the model no content: it is only a stub, and so is
    # the one after it (the same stub again, a repeat of nothing it learned)
    assert calls(t)[1].result == stub and "unchanged_stub" not in calls(t)[1].meta
    assert [f.steps for f in loopcore.analyse_burn(t).findings] == [(2,)]


def test_codex_a_look_before_and_after_waiting_for_a_build_is_no_repeat(tmp_path):
    """A real Codex 0.142 rollout (EntityProcess/agentv): `bun run typecheck` is still running,
    `git status` runs meanwhile, a poll sees the build finish ("DTS Build success ... dist/
    index.d.ts"), `git status` again. The build wrote while the agent waited: the second look
    is no repeat of the first."""
    status = (
        "Chunk ID: s{n}\nWall time: 0.1 seconds\nProcess exited with code 0\nOutput:\n## main\n"
    )
    lines = [
        _codex_rec("session_meta", {"id": "sess-w", "cwd": "/repo", "cli_version": "0.142.0"}),
        _codex_fn("a", "exec_command", {"cmd": "bun run typecheck"}),
        _codex_out("a", "Chunk ID: a1\nWall time: 10.0 seconds\nProcess running with session ID 9969\nOutput:\n"),
        _codex_fn("b", "exec_command", {"cmd": "git status --short --branch"}),
        _codex_out("b", status.format(n=1)),
        _codex_fn("c", "write_stdin", {"session_id": 9969, "chars": ""}),
        _codex_out("c", "Chunk ID: c1\nWall time: 20.0 seconds\nProcess exited with code 0\nOutput:\nDTS Build success\n"),
        _codex_fn("d", "exec_command", {"cmd": "git status --short --branch"}),
        _codex_out("d", status.format(n=2)),
    ]  # fmt: skip
    t = _one_rollout(tmp_path, lines)
    assert t.steps[2].kind == "exec"
    assert loopcore.analyse_burn(t).findings == ()
