"""``loopcore replay``: the Guard over recorded calls, what it would have warned or blocked."""

from __future__ import annotations

import json
import pathlib

import orjson
import pytest

from loopcore import Step, Trace
from loopcore.cli import EXIT_ERROR, EXIT_FINDINGS, EXIT_OK, main
from loopcore.guard import _make_guard
from loopcore.replay import collect_replay, replay_trace


def todo_writes(n: int, session: str = "s1", per_turn: int = 10, tokens: int = 100) -> list[Step]:
    """A1's shape: todo-list writes, *per_turn* a turn, each with a new list (different args)."""
    return [
        Step(
            session,
            i // per_turn,
            "other",
            "TodoWrite",
            None,
            {
                "todos": [
                    {"content": f"task {j}", "status": "in_progress" if j == i % 7 else "pending"}
                    for j in range(7)
                ]
                + [{"content": f"note {i}", "status": "pending"}]
            },
            "Todos have been modified successfully.",
            tokens_in=tokens,
        )
        for i in range(n)
    ]


def write_jsonl(path: pathlib.Path, steps: list[Step]) -> pathlib.Path:
    path.write_text("".join(json.dumps(s.to_dict()) + "\n" for s in steps), encoding="utf-8")
    return path


def _guard(policy: str = "default"):
    from loopcore.guard import Guard
    from loopcore.policy import Policy

    return Guard(policy=Policy.preset(policy))


def test_a1_todo_budget_replayed_warns_then_blocks_and_counts_blocked_tokens():
    rep = replay_trace(Trace(todo_writes(60)), _guard())
    # the todo-list budget (docs/guard.md, tool_budget): attempts 1-24 allowed, 25-49 warned, 50 and later blocked.
    assert [e.step for e in rep.events if e.action == "warn"] == list(range(24, 49))
    assert [e.step for e in rep.events if e.action == "block"] == list(range(49, 60))
    assert {e.detector for e in rep.events} == {"tool_budget"}
    assert rep.warned == 25 and rep.blocked == 11 and rep.first_block == 49
    # Tokens saved = the blocked steps' own tokens, nothing after them (a lower bound).
    assert rep.saved_tokens == 11 * 100
    assert rep.total_tokens == 60 * 100
    block = next(e for e in rep.events if e.action == "block")
    assert block.tool == "TodoWrite" and block.message and block.count >= 50


def test_replay_events_carry_the_traces_own_coordinate_and_skip_turns_that_ran_nothing():
    steps = todo_writes(30)
    for i, s in enumerate(steps):
        s.ref = {"line": i + 1}
    # a plain reply and a rejected action between the writes: nothing ran, no verdict
    steps.insert(5, Step("s1", 0, "other", "", text="thinking out loud", tokens_out=50))
    steps.insert(
        6,
        Step(
            "s1",
            0,
            "other",
            "TodoWrite",
            None,
            "{bad json",
            rejected="arguments are not valid JSON",
        ),
    )
    rep = replay_trace(Trace(steps), _guard())
    assert rep.events and all(e.ref == {"line": steps[e.step].ref["line"]} for e in rep.events)
    assert not any(e.step in (5, 6) for e in rep.events)
    assert rep.events[0].to_dict()["ref"] == steps[rep.events[0].step].ref
    # the 25th write is still the first warning: the steps that ran nothing did not count
    assert rep.events[0].step == 24 + 2


def test_a2_the_same_calls_spread_over_sessions_never_warn():
    steps = [s for k in range(10) for s in todo_writes(10, session=f"s{k}")]
    rep = replay_trace(Trace(steps), _guard())
    assert rep.events == []
    assert rep.saved_tokens == 0 and rep.first_block is None


def test_honest_work_replays_without_a_verdict():
    steps = [
        Step(
            "s",
            1,
            "observe",
            "read_file",
            f"f{i}.py",
            {"path": f"f{i}.py"},
            f"body {i}",
            tokens_in=50,
        )
        for i in range(40)
    ]
    rep = replay_trace(Trace(steps), _guard())
    assert rep.events == [] and rep.steps == 40 and rep.total_tokens == 2000


def test_each_trace_gets_its_own_guard(tmp_path):
    # Two files with the same session id: 30 writes each stay under the block threshold, while
    # one shared guard would have seen 60 and blocked.
    a = write_jsonl(tmp_path / "a.jsonl", todo_writes(30))
    b = write_jsonl(tmp_path / "b.jsonl", todo_writes(30))
    rep = collect_replay([a, b], format="loopcore")
    assert [t.blocked for t in rep.traces] == [0, 0]
    assert [t.warned for t in rep.traces] == [6, 6]
    assert rep.warned == 12 and rep.blocked == 0 and rep.saved_tokens == 0


def test_detector_breakdown_and_json_round_trip(tmp_path, capsys):
    a = write_jsonl(tmp_path / "a.jsonl", todo_writes(60))
    rc = main(["replay", str(a), "--json", "-"])
    assert rc == EXIT_OK
    rep = orjson.loads(capsys.readouterr().out)
    assert rep["policy"] == "default"
    assert rep["overall"]["blocked"] == 11 and rep["overall"]["warned"] == 25
    assert rep["overall"]["saved_tokens"] == 1100
    assert rep["overall"]["by_detector"] == {"tool_budget": {"warn": 25, "block": 11}}
    t = rep["traces"][0]
    assert t["first_block"] == 49 and len(t["events"]) == 36
    first = t["events"][0]
    assert (first["step"], first["action"], first["tool"], first["detector"]) == (
        24,
        "warn",
        "TodoWrite",
        "tool_budget",
    )


def test_replay_table_names_blocks_and_tokens_saved(tmp_path, capsys):
    a = write_jsonl(tmp_path / "a.jsonl", todo_writes(60, session="todo-storm"))
    rc = main(["replay", str(a), "--top", "3"])
    out = capsys.readouterr().out
    assert rc == EXIT_OK
    assert "todo-storm" in out and "1,100" in out and "step 49" in out
    assert "First 3 blocks" in out and "tool_budget" in out
    assert "lower bound" in out


def test_fail_on_block_exits_1(tmp_path, capsys):
    a = write_jsonl(tmp_path / "a.jsonl", todo_writes(60))
    b = write_jsonl(tmp_path / "b.jsonl", todo_writes(20))
    assert main(["replay", str(a), "--fail-on-block"]) == EXIT_FINDINGS
    assert main(["replay", str(b), "--fail-on-block"]) == EXIT_OK
    assert main(["replay", str(a)]) == EXIT_OK
    capsys.readouterr()


@pytest.mark.parametrize("policy", ["default", "openclaw", "opencode", "gemini-cli", "openhands"])
def test_every_preset_replays_the_bundled_example(policy, capsys):
    assert main(["replay", "--policy", policy]) == EXIT_OK
    out = capsys.readouterr().out
    assert "bundled example" in out and policy in out


def test_unknown_policy_lists_the_known_ones(capsys):
    from loopcore.policy import Policy

    assert main(["replay", "--policy", "yolo"]) == EXIT_ERROR
    err = capsys.readouterr().err
    assert "yolo" in err
    for name in Policy.presets():
        assert name in err


def test_replay_bad_input_names_file_and_line(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(todo_writes(1)[0].to_dict()) + "\n[1, 2\n", encoding="utf-8")
    assert main(["replay", str(bad), "--format", "loopcore"]) == EXIT_ERROR
    assert "bad.jsonl:2" in capsys.readouterr().err


@pytest.mark.traces
def test_replay_over_the_shared_traces(shared_traces, capsys):
    rc = main(["replay", str(shared_traces / "tau-bench"), "--json", "-"])
    assert rc == EXIT_OK
    rep = orjson.loads(capsys.readouterr().out)
    assert rep["overall"]["traces"] == 200
    assert 0 <= rep["overall"]["saved_tokens"] <= rep["overall"]["total_tokens"]
    for t in rep["traces"]:
        assert t["warned"] + t["blocked"] == len(t["events"]) <= t["steps"]


# --- the twins agree ------------------------------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_TOOLS = ["read_file", "bash", "TodoWrite", "message", "no_such_tool"]


@st.composite
def loopy_traces(draw):
    """Small vocabularies so repeats, ping-pongs, stable and changing results all happen."""
    n = draw(st.integers(0, 70))
    steps = []
    for i in range(n):
        tool = draw(st.sampled_from(_TOOLS))
        args = (
            {"path": draw(st.sampled_from(["a", "b"]))}
            if tool != "message"
            else {"action": "send", "text": draw(st.sampled_from(["hi", "hi", "bye"]))}
        )
        result = draw(st.sampled_from(["same", "same", f"new {i}", {"messageId": i, "ok": True}]))
        error = draw(st.sampled_from([None, None, None, "boom"]))
        kind = {
            "read_file": "observe",
            "bash": "exec",
            "TodoWrite": "other",
            "message": "other",
        }.get(tool, "other")
        steps.append(
            Step(
                "s",
                i // 5,
                kind,
                tool,
                args["path"] if kind == "observe" else None,
                args,
                result,
                error,
                tokens_in=draw(st.integers(0, 300)),
            )
        )
    return Trace(steps)


def test_replay_is_identical_on_both_twins(impl):
    from loopcore.policy import Policy

    name = impl.name  # hypothesis must not see the Impl object: it probes attributes on arguments

    @settings(max_examples=40, deadline=None)
    @given(
        trace=loopy_traces(),
        policy=st.sampled_from(["default", "openclaw", "opencode", "gemini-cli", "openhands"]),
    )
    def check(trace, policy):
        got = replay_trace(trace, _make_guard(policy=Policy.preset(policy), impl=name))
        ref = replay_trace(trace, _make_guard(policy=Policy.preset(policy), impl="py"))
        assert got.to_dict() == ref.to_dict()
        assert 0 <= got.saved_tokens <= got.total_tokens
        assert got.warned + got.blocked == len(got.events) <= got.steps

    check()


def test_replay_reports_events_itself_and_leaves_logging_as_it_was(tmp_path, capsys):
    import logging
    import subprocess
    import sys

    a = write_jsonl(tmp_path / "a.jsonl", todo_writes(30))
    # In a fresh process (pytest's own log capture would hide Python's last-resort handler):
    # the guard's per-event log lines must not flood stderr; the report lists the events.
    proc = subprocess.run(
        [sys.executable, "-m", "loopcore", "replay", str(a)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == EXIT_OK, proc.stderr
    assert "doom_loop_detected" not in proc.stderr
    assert "tool_budget" in proc.stdout
    logger = logging.getLogger("loopcore")
    before = list(logger.handlers)
    assert main(["replay", str(a)]) == EXIT_OK
    capsys.readouterr()
    assert logger.handlers == before


LABELS = pathlib.Path(__file__).resolve().parent / "labels" / "shared_traces.json"


def _labelled_steps() -> tuple[dict, dict]:
    """file -> {(session, coordinate): verdict} from the hand labels of ../shared/traces (a loop's
    charged steps count as waste), and file -> the label file's own entries."""
    doc = json.loads(LABELS.read_text())
    verdicts: dict = {}
    for c in doc["cases"]:
        key = (c.get("session"), json.dumps(c["at"], sort_keys=True))
        verdicts.setdefault(c["file"], {})[key] = c["verdict"]
    for loop in doc["loops"]:
        for at in loop["charged"]:
            key = (loop.get("session"), json.dumps(at, sort_keys=True))
            verdicts.setdefault(loop["file"], {}).setdefault(key, "waste")
    return verdicts


@pytest.mark.parametrize("policy", ["default", "openclaw", "opencode", "openhands", "cline", "roo"])
def test_no_preset_blocks_a_step_labelled_not_waste(shared_traces, policy):
    """Replayed over the hand-labelled traces, no preset refuses a call a reader judged useful
    (docs/guard.md lists the per-preset figures over all of ../shared/traces)."""
    verdicts = _labelled_steps()
    paths = sorted({shared_traces / f for f in verdicts})
    rep = collect_replay(paths, policy=policy, keep_going=True)
    on_useful = []
    for tr in rep.traces:
        name = tr.source.split("traces/", 1)[-1].split("#", 1)[0]
        labels = verdicts.get(name, {})
        session = tr.session if name.startswith("tau-bench/") else None
        for e in tr.events:
            at = json.dumps({k: v for k, v in (e.ref or {}).items() if k != "file"}, sort_keys=True)
            if e.action == "block" and labels.get((session, at)) == "not_waste":
                on_useful.append((name, session, e.ref, e.detector))
    assert rep.traces and not on_useful


def test_a_step_that_writes_its_target_ends_a_re_observation():
    """``git diff > p.txt`` (kind observe, writes p.txt) changes p.txt: reading it again after is
    not redundant. Without the write in between, the second read is warned."""

    def read(turn):
        return Step("s", turn, "observe", "bash", "p.txt", {"command": "cat p.txt"}, "old")

    redirect = Step(
        "s",
        2,
        "observe",
        "bash",
        "a.py",
        {"command": "git diff -- a.py > p.txt"},
        "",
        reads=("a.py",),
        writes=("p.txt",),
    )
    rep = replay_trace(Trace([read(1), redirect, read(3)]), _guard())
    assert rep.events == []
    rep = replay_trace(Trace([read(1), read(3)]), _guard())
    assert [e.detector for e in rep.events] == ["redundant_observation"]
    no_op = Step(
        "s", 2, "mutate", "bash", "p.txt", {"command": "sed -i s/x/x/ p.txt"}, "", no_op=True
    )
    rep = replay_trace(Trace([read(1), no_op, read(3)]), _guard())
    assert [e.detector for e in rep.events] == ["redundant_observation"]


def test_a_users_message_in_the_trace_is_told_to_the_guard():
    # the same read again and again warns; with the person's message before each repeat (what
    # the live guard is told through note_message(role="user")) every loop's evidence restarts
    def reads(marked):
        return [
            Step("s1", i, "observe", "Read", "a.py", {"file_path": "a.py"}, "same", None, 50, 5,
                 after_user=marked and i > 0)
            for i in range(8)
        ]  # fmt: skip

    repeats = {"redundant_observation", "consecutive_repeat"}
    before = replay_trace(Trace(reads(False)), _guard()).events
    assert [e.step for e in before if e.detector in repeats] == list(range(1, 8))
    after = replay_trace(Trace(reads(True)), _guard()).events
    assert not [e for e in after if e.detector in repeats]
