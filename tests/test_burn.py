"""Burn analysis: the rules of docs/burn.md and their scenarios, on both kernel twins.

Every test goes through ``analyse``: the report of the kernel twin of ``impl`` must equal the
pure reference's (and ``analyse_many``'s) before anything is asserted.
"""

from __future__ import annotations

import json

import pytest
from conftest import twin

import loopcore
from loopcore.burn import (
    QUESTION_LOOP_MIN_TURNS,
    BurnReport,
    Finding,
    RepeatCheck,
    Step,
    Trace,
    analyse_burn,
    would_repeat,
)


def st(
    turn,
    kind,
    name,
    target=None,
    args=None,
    result=None,
    *,
    tokens=100,
    error=None,
    session="s1",
    estimated=False,
):
    return Step(
        session,
        turn,
        kind,
        name,
        target,
        args,
        result,
        error,
        tokens,
        0,
        tokens_estimated=estimated,
    )


def read(turn, path, result="content", tokens=100, **kw):
    return st(turn, "observe", "Read", path, {"file_path": path}, result, tokens=tokens, **kw)


def write(turn, path, content, tokens=100):
    return st(
        turn, "mutate", "Write", path, {"file_path": path, "content": content}, "ok", tokens=tokens
    )


def edit(turn, path, old, new, tokens=100, error=None):
    return st(
        turn,
        "mutate",
        "Edit",
        path,
        {"file_path": path, "old_string": old, "new_string": new},
        None if error else "ok",
        tokens=tokens,
        error=error,
    )


def ask(turn, q, tokens=100):
    return st(turn, "ask", "AskUser", None, {"question": q}, "an answer", tokens=tokens)


def analyse(impl, steps) -> BurnReport:
    """The reference report, after checking the bulk kernel of *impl* gives the same one."""
    trace = steps if isinstance(steps, Trace) else Trace(list(steps))
    ref = twin("py").analyse_burn(trace)
    assert impl.analyse_burn(trace) == ref
    assert impl.analyse_many([trace])[0] == ref
    return ref


def charged(report: BurnReport) -> dict[int, tuple[str, int]]:
    """step -> (finding kind, of_step of the finding)."""
    return {i: (f.kind, f.of_step) for f in report.findings for i in f.steps}


# ------------------------------------------------------------------ scenarios (docs/burn.md)


def test_e1_big_file_read_three_times(impl):
    steps = [
        read(1, "big.ts", "x" * 50, tokens=15000),
        st(1, "other", "think", tokens=300),
        read(2, "big.ts", "x" * 50, tokens=15000),
        read(3, "big.ts", "x" * 50, tokens=15000),
    ]
    r = analyse(impl, steps)
    assert r.total_tokens == 45300
    assert r.wasted_tokens == 30000
    assert round(r.waste_ratio, 3) == 0.662
    (f,) = r.findings
    assert (f.kind, f.steps, f.of_step, f.target, f.tokens) == (
        "redundant_observation",
        (2, 3),
        0,
        "big.ts",
        30000,
    )
    assert (
        r.top_recommendation
        == "cache observations within a session: big.ts cost 30000 tokens to re-learn"
    )
    assert r.by_kind["redundant_observation"] == {"tokens": 30000, "steps": 2}


def test_e2_read_write_identical_read_is_never_waste(impl):
    r = analyse(impl, [read(1, "a.ts", "same"), write(2, "a.ts", "same"), read(3, "a.ts", "same")])
    assert r.findings == ()
    assert r.wasted_tokens == 0
    assert r.top_recommendation is None


def test_e3_same_search_twice_is_one_duplicate(impl):
    search = lambda turn: st(
        turn, "observe", "Grep", None, {"pattern": "TODO", "path": "."}, ["a.ts:3"]
    )
    r = analyse(impl, [search(1), read(1, "b.ts"), search(2)])
    (f,) = r.findings
    assert (f.kind, f.steps, f.of_step, f.tokens) == ("duplicate_call", (2,), 0, 100)
    assert 0 not in charged(r)


def test_e4_edit_back_and_forth_is_an_oscillation(impl):
    r = analyse(
        impl,
        [
            read(1, "a.ts"),
            edit(2, "a.ts", "x = 1", "x = 2"),
            edit(3, "a.ts", "x = 2", "x = 1"),
            edit(4, "a.ts", "x = 1", "x = 2"),
        ],
    )
    (f,) = r.findings
    assert (f.kind, f.steps, f.of_step, f.target) == ("oscillation", (2, 3), 1, "a.ts")
    assert "back and forth" in f.message
    assert r.top_recommendation.endswith("a.ts was changed back and forth, costing 200 tokens")


def test_e5_three_ask_only_turns_are_a_question_loop(impl):
    r = analyse(
        impl,
        [
            read(1, "a.ts"),
            ask(2, "Proceed?"),
            ask(3, "Shall I go on?"),
            ask(4, "Continue?"),
            read(5, "b.ts"),
        ],
    )
    (f,) = r.findings
    assert (f.kind, f.steps, f.of_step) == ("question_loop", (2, 3), 1)
    assert f.tokens == 200
    assert "3 consecutive turns" in f.message


def test_e6_would_repeat_names_the_step_and_the_target():
    steps = [
        read(0, "b.ts"),
        read(1, "c.ts"),
        edit(2, "c.ts", "a", "b"),
        read(3, "a.ts", "old"),
        read(4, "a.ts", "v1"),
        read(5, "d.ts"),
    ]
    # step 3 and 4 read a.ts with the same args; 4 is the most recent
    check = would_repeat(read(6, "a.ts", result=None), Trace(steps))
    assert check == RepeatCheck(True, 4, check.detail)
    assert check and "step 4" in check.detail and "a.ts" in check.detail
    # a mutation of a.ts since makes it a fresh epoch
    check = would_repeat(read(7, "a.ts", result=None), Trace(steps + [write(6, "a.ts", "v2")]))
    assert not check and check.of_step is None and "may have changed" in check.detail
    # an exec anywhere since, likewise
    check = would_repeat(
        read(7, "a.ts", result=None), Trace(steps + [st(6, "exec", "Bash", None, {"c": "make"})])
    )
    assert not check
    # a mutation of another target does not
    assert (
        would_repeat(read(7, "a.ts", result=None), Trace(steps + [write(6, "z.ts", "z")])).of_step
        == 4
    )
    # never seen
    check = would_repeat(read(7, "new.ts"), Trace(steps))
    assert not check and "no earlier call" in check.detail


@pytest.mark.parametrize("total", [0, 1, 99, 45300])
def test_e7_wasted_within_total_and_ratio_in_unit_interval(impl, total):
    steps = [read(i, "a.ts", tokens=total) for i in range(4)] + [st(5, "other", "x", tokens=0)]
    r = analyse(impl, steps)
    assert 0 <= r.wasted_tokens <= r.total_tokens == 4 * total
    assert 0.0 <= r.waste_ratio <= 1.0
    assert r.waste_ratio == (0.75 if total else 0.0)


# ------------------------------------------------------------------ the epoch rule


def test_mutation_of_the_target_starts_a_new_epoch(impl):
    r = analyse(impl, [read(1, "a.ts", "v"), edit(2, "a.ts", "p", "q"), read(3, "a.ts", "v")])
    assert r.findings == ()


def test_mutation_of_another_target_keeps_the_epoch(impl):
    r = analyse(impl, [read(1, "a.ts", "v"), edit(2, "b.ts", "p", "q"), read(3, "a.ts", "v")])
    assert charged(r) == {2: ("redundant_observation", 0)}


@pytest.mark.parametrize(
    "changer",
    [
        st(2, "exec", "Bash", "a.ts", {"command": "python a.ts"}, "ran"),
        st(2, "exec", "Bash", None, {"command": "make"}, "ok"),
        st(2, "mutate", "Bash", None, {"command": "weird-tool --inplace"}, "ok"),
    ],
)
def test_exec_or_untargeted_mutation_advances_every_epoch(impl, changer):
    r = analyse(impl, [read(1, "a.ts", "v"), changer, read(3, "a.ts", "v")])
    assert r.findings == ()


def test_failed_write_of_one_target_changes_nothing(impl):
    # an edit that failed ("no match") wrote nothing: a test run after it repeats the first
    # one, and so does the same failed edit again
    run = lambda turn: st(turn, "exec", "Bash", None, {"command": "npm test"}, "1 failed")
    failed = lambda turn: edit(turn, "a.ts", "p", "q", error="no match")
    r = analyse(impl, [run(1), failed(2), run(3)])
    assert charged(r) == {2: ("duplicate_call", 0)}
    r = analyse(impl, [failed(1), read(2, "b.ts"), failed(3)])
    assert charged(r) == {2: ("duplicate_call", 0)}


def test_a_read_after_a_failed_edit_of_the_file_is_no_repeat(impl):
    # the failure told the agent its picture of a.ts was wrong (Claude Code's "String to
    # replace not found"): looking again, by the same call or another, is how it recovers
    failed = edit(2, "a.ts", "p", "q", error="String to replace not found in file.")
    cat = st(1, "observe", "Bash", "a.ts", {"command": "cat a.ts"}, "v")
    assert analyse(impl, [read(1, "a.ts", "v"), failed, read(3, "a.ts", "v")]).findings == ()
    cat2 = st(4, "observe", "Bash", "a.ts", {"command": "cat a.ts"}, "v")
    assert analyse(impl, [cat, failed, cat2]).findings == ()
    # a failed edit of another file tells nothing about a.ts
    other = edit(2, "b.ts", "p", "q", error="no match")
    r = analyse(impl, [read(1, "a.ts", "v"), other, read(3, "a.ts", "v")])
    assert charged(r) == {2: ("redundant_observation", 0)}


@pytest.mark.parametrize(
    "changer",
    [
        # one of several targets may have been written before the failure
        st(
            2,
            "mutate",
            "Bash",
            ("a.ts", "b.ts"),
            {"command": "sed -i s/p/q/ a.ts b.ts"},
            error="exit 1",
        ),
        # a failed run may have done anything before it failed
        st(2, "exec", "Bash", None, {"command": "make"}, error="exit 1"),
    ],
)
def test_failed_half_applicable_step_still_advances_the_epoch(impl, changer):
    r = analyse(impl, [read(1, "a.ts", "v"), changer, read(3, "a.ts", "v")])
    assert r.findings == ()


def test_multi_target_steps_observe_and_advance_every_target(impl):
    cat = lambda turn: st(
        turn, "observe", "Bash", ("a.ts", "b.ts"), {"command": "cat a.ts b.ts"}, "AB"
    )
    # a mutation of b alone breaks the epoch of the pair
    r = analyse(impl, [cat(1), write(2, "b.ts", "B"), cat(3)])
    assert r.findings == ()
    # a move of (b, c) advances b and c, so a read of b is fresh while a read of a is not
    mv = st(3, "mutate", "Bash", ("b.ts", "c.ts"), {"command": "mv b.ts c.ts"}, "")
    r = analyse(impl, [read(1, "a.ts"), read(1, "b.ts"), mv, read(4, "a.ts"), read(4, "b.ts")])
    assert charged(r) == {3: ("redundant_observation", 0)}
    # target order does not make a different observation
    swapped = st(5, "observe", "Bash", ("b.ts", "a.ts"), {"command": "cat a.ts b.ts"}, "AB")
    assert charged(analyse(impl, [cat(1), swapped])) == {1: ("redundant_observation", 0)}


def test_untargeted_observation_is_invalidated_by_any_mutation(impl):
    search = lambda turn: st(turn, "observe", "Grep", None, {"pattern": "x"}, "hits")
    assert analyse(impl, [search(1), write(2, "z.ts", "z"), search(3)]).findings == ()
    assert charged(analyse(impl, [search(1), read(2, "z.ts"), search(3)])) == {
        2: ("duplicate_call", 0)
    }


# ------------------------------------------------------------------ outcomes


def test_repeat_with_a_different_result_is_not_waste(impl):
    # a log that grows, a poll that progresses: the repeat learned something
    r = analyse(impl, [read(1, "log.txt", "line 1"), read(2, "log.txt", "line 1\nline 2")])
    assert r.findings == ()


def test_same_substantial_result_from_another_tool_is_a_redundant_observation(impl):
    text = "\n".join(f"export const line{i} = {i};" for i in range(30))
    cat = st(2, "observe", "Bash", "a.ts", {"command": "cat a.ts"}, text)
    assert charged(analyse(impl, [read(1, "a.ts", text), cat])) == {1: ("redundant_observation", 0)}
    # a short result is not enough: two different calls that say "content" are two pieces of work
    cat = st(2, "observe", "Bash", "a.ts", {"command": "cat a.ts"}, "content")
    assert charged(analyse(impl, [read(1, "a.ts", "content"), cat])) == {}


def test_repeated_failure_the_same_way_is_a_duplicate(impl):
    run = lambda turn: st(
        turn, "exec", "Bash", None, {"command": "npm i lodsh"}, None, error="E404 not found"
    )
    r = analyse(impl, [run(1), run(2), run(3)])
    (f,) = r.findings
    assert (f.kind, f.steps, f.of_step) == ("duplicate_call", (1, 2), 0)


def test_repeated_failure_a_different_way_is_not(impl):
    run = lambda turn, err: st(turn, "exec", "Bash", None, {"command": "npm test"}, None, error=err)
    assert analyse(impl, [run(1, "3 failed"), run(2, "1 failed")]).findings == ()


def test_exec_between_two_identical_execs_breaks_the_epoch(impl):
    run = lambda turn, cmd: st(turn, "exec", "Bash", None, {"command": cmd}, "same output")
    assert (
        analyse(impl, [run(1, "npm test"), run(2, "git pull"), run(3, "npm test")]).findings == ()
    )
    assert charged(analyse(impl, [run(1, "npm test"), read(2, "a"), run(3, "npm test")])) == {
        2: ("duplicate_call", 0)
    }


def test_missing_results_fall_back_to_name_and_args(impl):
    # where a result exists it must match; where the trace recorded none, name + args decide
    r = analyse(impl, [read(1, "a.ts", None), read(2, "a.ts", None)])
    assert charged(r) == {1: ("duplicate_call", 0)}
    # but target + missing result alone is never a redundant observation
    other_args = st(3, "observe", "Read", "a.ts", {"file_path": "a.ts", "offset": 10}, None)
    assert analyse(impl, [read(1, "a.ts", None), other_args]).findings == ()


def test_args_compare_by_canonical_meaning(impl):
    a = st(1, "observe", "Grep", None, {"pattern": "x", "limit": 1, "path": "."}, "hits")
    b = st(2, "observe", "Grep", None, {"path": ".", "limit": 1.0, "pattern": "x"}, "hits")
    assert charged(analyse(impl, [a, b])) == {1: ("duplicate_call", 0)}


def test_identical_write_twice_is_a_duplicate_but_read_between_writes_is_not(impl):
    assert charged(analyse(impl, [write(1, "a", "X"), write(2, "a", "X")])) == {
        1: ("duplicate_call", 0)
    }
    r = analyse(
        impl, [write(1, "a", "X"), read(2, "a", "X"), write(3, "a", "Y"), read(4, "a", "Y")]
    )
    assert r.findings == ()


def test_repeat_chain_charges_every_repeat_under_the_first_occurrence(impl):
    r = analyse(impl, [read(i, "a.ts") for i in range(5)])
    (f,) = r.findings
    assert f.steps == (1, 2, 3, 4) and f.of_step == 0 and f.tokens == 400


# ------------------------------------------------------------------ oscillation


def test_content_returning_to_an_earlier_state_is_an_oscillation(impl):
    steps = [
        read(1, "a.ts", "A"),
        write(2, "a.ts", "B-content"),
        read(3, "a.ts", "B"),
        st(4, "mutate", "Bash", "a.ts", {"command": "git checkout a.ts"}, ""),
        read(5, "a.ts", "A"),
    ]
    assert charged(analyse(impl, steps)) == {4: ("oscillation", 0)}


def test_whole_content_writes_returning_are_an_oscillation(impl):
    r = analyse(
        impl, [write(1, "a", "X"), write(2, "a", "Y"), write(3, "a", "X"), write(4, "a", "Y")]
    )
    (f,) = r.findings  # one finding per target, under the earliest state it returned to
    assert (f.kind, f.steps, f.of_step, f.target, f.tokens) == ("oscillation", (2, 3), 0, "a", 200)


def test_experiment_reverted_after_running_it_is_not_an_oscillation(impl):
    # add a debug print, run, remove it: a careful agent, not waste
    steps = [
        edit(1, "a.py", "f()", "print(1); f()"),
        st(2, "exec", "Bash", None, {"command": "python a.py"}, "1"),
        edit(3, "a.py", "print(1); f()", "f()"),
    ]
    assert analyse(impl, steps).findings == ()
    # A -> B -> A across an exec: the exec may have reset it
    steps = [
        read(1, "a", "A"),
        write(2, "a", "B"),
        read(3, "a", "B"),
        st(4, "exec", "Bash", None, {"command": "make reset"}, ""),
        read(5, "a", "A"),
    ]
    assert analyse(impl, steps).findings == ()


def test_rewriting_the_same_content_is_not_an_oscillation(impl):
    # read A, write, read A: no different state seen in between (E2's shape)
    assert (
        analyse(impl, [read(1, "a", "A"), write(2, "a", "A-text"), read(3, "a", "A")]).findings
        == ()
    )


def test_failed_edits_neither_oscillate_nor_are_undone(impl):
    r = analyse(impl, [edit(1, "a", "x", "y", error="no match"), edit(2, "a", "y", "x")])
    assert r.findings == ()
    r = analyse(impl, [edit(1, "a", "x", "y"), edit(2, "a", "y", "x", error="no match")])
    assert r.findings == ()


def test_inverse_edit_on_another_target_is_not_an_oscillation(impl):
    assert analyse(impl, [edit(1, "a", "x", "y"), edit(2, "b", "y", "x")]).findings == ()


@pytest.mark.parametrize("keys", [("old_str", "new_str"), ("old", "new"), ("search", "replace")])
def test_edit_signatures_of_other_harnesses(impl, keys):
    o, n = keys
    steps = [
        st(1, "mutate", "str_replace", "a", {o: "1", n: "2"}, "ok"),
        st(2, "mutate", "str_replace", "a", {o: "2", n: "1"}, "ok"),
    ]
    assert charged(analyse(impl, steps)) == {1: ("oscillation", 0)}


# ------------------------------------------------------------------ question loops


def test_two_ask_only_turns_are_a_clarifying_dialogue(impl):
    assert QUESTION_LOOP_MIN_TURNS == 3
    assert (
        analyse(impl, [ask(1, "Which file?"), ask(2, "Which function?"), read(3, "a")]).findings
        == ()
    )


def test_question_loop_charges_only_ask_steps_of_later_turns(impl):
    steps = [
        ask(1, "q1"),
        st(1, "other", "todo", None, {"n": 1}),
        ask(1, "q1b"),
        ask(2, "q2"),
        ask(3, "q3"),
        st(3, "other", "todo", None, {"n": 2}),
        ask(4, "q4"),
        read(5, "a"),
        ask(6, "q5"),
    ]
    r = analyse(impl, steps)
    (f,) = r.findings
    assert f.kind == "question_loop"
    assert f.steps == (3, 4, 6) and f.of_step == 2
    assert "4 consecutive turns" in f.message


def test_a_turn_that_did_work_breaks_the_question_loop(impl):
    steps = [ask(1, "q1"), ask(2, "q2"), ask(3, "q3"), read(3, "a"), ask(4, "q4"), ask(5, "q5")]
    assert analyse(impl, steps).findings == ()


def answered(turn, q, answer, *, error=None):
    return st(turn, "ask", "AskUser", None, {"question": q}, answer, error=error)


def test_questions_each_answered_anew_are_an_interview_not_a_loop(impl):
    # a plan-mode interview: every question got its own answer from the person
    steps = [
        answered(1, "Which database?", "Postgres"),
        answered(2, "Which auth provider?", "GitHub OAuth"),
        answered(3, "Deploy where?", "Fly.io"),
        answered(4, "Monorepo?", "yes"),
        read(5, "a.ts"),
    ]
    r = analyse(impl, steps)
    assert r.findings == ()
    assert r.by_kind["question_loop"] == {"tokens": 0, "steps": 0}


def test_questions_asked_in_vain_are_a_loop(impl):
    # no answer (an error, or nothing recorded) moves nothing on
    steps = [
        answered(1, "Proceed?", None, error="no user attached"),
        answered(2, "Shall I go on?", None, error="no user attached"),
        st(3, "ask", "AskUser", None, {"question": "Continue?"}),
    ]
    (f,) = analyse(impl, steps).findings
    assert (f.kind, f.steps, f.of_step) == ("question_loop", (1, 2), 0)


def test_a_new_answer_starts_the_question_loop_again(impl):
    # the run starts again at the turn answered anew; its repeats of that answer are the loop
    steps = [
        answered(1, "Which file?", "a.ts"),
        answered(2, "Shall I start?", "Carry on without asking."),
        answered(3, "Ready?", "Carry on without asking."),
        answered(4, "Go?", "Carry on without asking."),
    ]
    (f,) = analyse(impl, steps).findings
    assert (f.kind, f.steps, f.of_step) == ("question_loop", (2, 3), 1)
    assert "3 consecutive turns" in f.message
    # an unanswered first turn: the first answer that comes is new
    steps[0] = answered(1, "Which file?", None, error="timed out")
    (f,) = analyse(impl, steps).findings
    assert (f.steps, f.of_step) == ((2, 3), 1)


def test_identical_question_with_identical_answer_is_a_duplicate_first(impl):
    steps = [ask(1, "Proceed?"), ask(2, "Proceed?"), ask(3, "Proceed?")]
    r = analyse(impl, steps)
    assert charged(r) == {1: ("duplicate_call", 0), 2: ("duplicate_call", 0)}
    assert r.by_kind["question_loop"] == {"tokens": 0, "steps": 0}


# ------------------------------------------------------------------ the model and the API


def test_each_step_is_charged_at_most_once(impl):
    # the repeat of an edit pair is both an inverse edit and an identical call: one charge
    steps = [edit(1, "a", "x", "y"), edit(2, "a", "y", "x"), edit(3, "a", "x", "y")]
    r = analyse(impl, steps)
    all_charged = [i for f in r.findings for i in f.steps]
    assert len(all_charged) == len(set(all_charged)) == 2
    assert r.wasted_tokens == sum(f.tokens for f in r.findings) == 200


def test_report_to_dict_is_json_and_complete(impl):
    steps = [
        read(1, "big.ts", tokens=10, estimated=True),
        read(2, "big.ts", tokens=10),
        ask(3, "a", 10),
        ask(4, "b", 10),
        ask(5, "c", 10),
    ]
    r = analyse(impl, steps)
    d = json.loads(json.dumps(r.to_dict()))
    assert d["total_tokens"] == 50 and d["wasted_tokens"] == 30 and d["waste_ratio"] == 0.6
    assert d["tokens_estimated"] is True and d["steps"] == 5 and d["session"] == "s1"
    assert set(d["by_kind"]) == set(loopcore.burn.FINDING_KINDS)
    assert d["by_kind"]["question_loop"] == {"tokens": 20, "steps": 2}
    assert [f["kind"] for f in d["findings"]] == ["redundant_observation", "question_loop"]
    assert d["findings"][0] == r.findings[0].to_dict()
    assert d["findings"][0]["steps"] == [1] and d["findings"][0]["target"] == "big.ts"
    assert "redundant_observation" in repr(r.findings[0]) and "30/50" in repr(r)
    assert "(estimated)" in repr(r)


def test_finding_target_tuple_serialises_as_list():
    f = Finding("duplicate_call", (3,), 1, ("a", "b"), "Bash", 5, "m", "s")
    assert f.to_dict()["target"] == ["a", "b"]
    assert json.dumps(f.to_dict())


def test_combine_sums_reports_and_recommends_across_them(impl):
    t1 = Trace(
        [read(1, "big.ts", tokens=1000, session="A"), read(2, "big.ts", tokens=1000, session="A")]
    )
    t2 = Trace(
        [
            read(1, "big.ts", tokens=500, session="B"),
            read(2, "big.ts", tokens=500, session="B"),
            read(3, "small.ts", tokens=10, session="B"),
            read(4, "small.ts", tokens=10, session="B"),
        ]
    )
    reports = [analyse(impl, t1), analyse(impl, t2)]
    c = BurnReport.combine(reports)
    assert (c.total_tokens, c.wasted_tokens, c.steps, c.traces) == (3020, 1510, 6, 2)
    assert c.by_kind["redundant_observation"] == {"tokens": 1510, "steps": 3}
    assert [f.session for f in c.findings] == ["A", "B", "B"]
    assert (
        c.top_recommendation
        == "cache observations within a session: big.ts cost 1500 tokens to re-learn"
    )
    assert c.session is None and not c.tokens_estimated
    empty = BurnReport.combine([])
    assert (empty.total_tokens, empty.waste_ratio, empty.findings, empty.top_recommendation) == (
        0,
        0.0,
        (),
        None,
    )


def test_analyse_many_keeps_traces_apart(impl):
    # the same read in two sessions is two first occurrences
    t1 = Trace([read(1, "a", session="A")])
    t2 = Trace([read(1, "a", session="B"), read(2, "a", session="B")])
    r1, r2 = impl.analyse_many([t1, t2])
    assert r1.findings == () and r2.wasted_tokens == 100
    assert impl.analyse_many([]) == []


def test_analyse_burn_accepts_a_step_list_and_rejects_bad_input():
    assert analyse_burn([read(1, "a"), read(2, "a")]).wasted_tokens == 100
    assert analyse_burn(Trace([])).waste_ratio == 0.0
    bad = read(1, "a")
    bad.kind = "teleport"  # dataclass fields are mutable; analysis re-checks the kind
    with pytest.raises(ValueError, match="teleport"):
        analyse_burn([bad])


def test_public_api_is_exported():
    for name in (
        "BurnReport",
        "Finding",
        "RepeatCheck",
        "analyse_burn",
        "analyse_many",
        "would_repeat",
    ):
        assert name in loopcore.__all__ and hasattr(loopcore, name)
    from loopcore import encoded

    for name in ("encode", "EncodedTrace", "analyse_encoded"):  # the columnar layer
        assert name in encoded.__all__ and name not in loopcore.__all__
    assert loopcore.burn.Step is loopcore.Step and loopcore.burn.Trace is loopcore.Trace


def test_unhashable_payloads_fall_back_without_false_positives(impl):
    class Opaque:
        pass

    steps = [
        st(1, "observe", "probe", None, {"x": 1}, Opaque()),
        st(2, "observe", "probe", None, {"x": 1}, Opaque()),
    ]
    assert analyse(impl, steps).findings == ()


# ------------------------------------------------------------------ undo and redo across execs


def sh(turn, kind, target, cmd, result="", reads=None, writes=None, tokens=100, error=None):
    """A shell step as an adapter gives it (the classifier's reads and writes)."""
    return Step(
        "s1",
        turn,
        kind,
        "bash",
        target,
        {"command": cmd},
        result,
        error,
        tokens,
        0,
        reads=reads,
        writes=writes,
    )


def backup(turn, f, b):
    return sh(turn, "mutate", b, f"cp {f} {b}", reads=(f,), writes=(b,))


def restore(turn, b, f):
    return sh(turn, "mutate", f, f"cp {b} {f}", reads=(b,), writes=(f,))


def insert(turn, f, comment=""):
    return sh(turn, "mutate", f, comment + f"sed -i '3a import os' {f}", reads=(f,), writes=(f,))


def run(turn, cmd, out):
    return sh(turn, "exec", None, cmd, out)


def test_insert_redone_on_the_restored_backup_is_an_oscillation(impl):
    # the insert, runs, the backup restored, the same insert again (a comment line above it
    # does not make it another call): the redo and the restore that undid the first insert
    steps = [
        backup(1, "a.py", "a.py.orig"),
        insert(2, "a.py"),
        run(3, "python t.py", "fail"),
        restore(4, "a.py.orig", "a.py"),
        insert(5, "a.py", "# add the import again\n"),
    ]
    assert {i: k for i, (k, _) in charged(analyse(impl, steps)).items()} == {
        3: "oscillation",
        4: "oscillation",
    }


def test_script_rerun_on_the_restored_backup_and_its_replay_are_an_oscillation(impl):
    fix = sh(1, "mutate", "fix.py", "cat > fix.py << 'EOF'\nedit a.py\nEOF", writes=("fix.py",))
    steps = [
        backup(0, "a.py", "a.py.bak"),
        restore(1, "a.py.bak", "a.py"),
        fix,
        run(2, "python fix.py", "fixed"),
        run(3, "python test.py", "2 passed"),
        run(4, "python refine.py", "refined"),
        run(5, "python test.py", "1 failed"),
        restore(6, "a.py.bak", "a.py"),
        run(7, "python fix.py", "fixed"),
        run(8, "python test.py", "2 passed"),
        run(9, "python other.py", "new"),
    ]
    got = charged(analyse(impl, steps))
    assert {i: k for i, (k, _) in got.items()} == {
        7: "oscillation",
        8: "oscillation",
        9: "oscillation",
    }


def test_script_rewritten_after_the_restore_is_new_work(impl):
    fix = lambda turn, body: sh(  # noqa: E731
        turn, "mutate", "fix.py", f"cat > fix.py << 'EOF'\n{body}\nEOF", writes=("fix.py",)
    )
    steps = [
        backup(0, "a.py", "a.py.bak"),
        restore(1, "a.py.bak", "a.py"),
        fix(1, "v1"),
        run(2, "python fix.py", "fixed"),
        restore(3, "a.py.bak", "a.py"),
        fix(4, "v2"),
        run(5, "python fix.py", "fixed"),
    ]
    assert analyse(impl, steps).findings == ()


def test_rerun_after_a_restore_with_an_exec_before_the_first_run_is_not_proven(impl):
    # something ran between the restore and the first run: the state it ran on is unknown
    steps = [
        backup(0, "a.py", "a.py.bak"),
        restore(1, "a.py.bak", "a.py"),
        run(2, "python setup_env.py", "ok"),
        run(3, "python fix.py", "fixed"),
        restore(4, "a.py.bak", "a.py"),
        run(5, "python fix.py", "fixed"),
    ]
    assert analyse(impl, steps).findings == ()


def test_edit_redone_after_git_checkout_of_the_committed_file(impl):
    steps = [
        insert(1, "a.py"),
        sh(2, "mutate", "a.py", "git checkout -- a.py", writes=("a.py",), reads=()),
        insert(3, "a.py"),
    ]
    assert {i: k for i, (k, _) in charged(analyse(impl, steps)).items()} == {
        1: "oscillation",
        2: "oscillation",
    }


def test_restoring_again_after_a_new_attempt_is_a_real_revert(impl):
    steps = [
        sh(1, "mutate", "a.py", "git checkout a.py 2>&1", writes=("a.py",), reads=()),
        insert(2, "a.py"),
        sh(
            3,
            "mutate",
            "a.py",
            "# restore again\ngit checkout a.py 2>&1",
            writes=("a.py",),
            reads=(),
        ),
    ]
    assert analyse(impl, steps).findings == ()


def test_failed_tool_calls_between_identical_calls_change_nothing(impl):
    book = lambda turn, err: st(  # noqa: E731
        turn, "mutate", "book", "u1", {"user": "u1", "pay": "gift_1"}, err, error=err
    )
    steps = [
        book(1, "Error: gift_1 not found"),
        book(2, "Error: gift_1 not found"),
        book(3, "Error: gift_1 not found"),
    ]
    assert {i: k for i, (k, _) in charged(analyse(impl, steps)).items()} == {
        1: "duplicate_call",
        2: "duplicate_call",
    }


def test_search_tool_repeated_across_a_write_of_a_record(impl):
    # a search API without a target, in a trace that writes records (not files)
    search = lambda turn: st(  # noqa: E731
        turn, "observe", "search_flights", None, {"from": "A", "to": "B"}, "[HAT1, HAT2]"
    )
    cancel = st(2, "mutate", "cancel_reservation", "R1", {"id": "R1"}, "cancelled")
    assert charged(analyse(impl, [search(1), cancel, search(3)])) == {2: ("duplicate_call", 0)}
    whole = st(2, "mutate", "reset_all", None, {}, "ok")  # a write of everything
    assert analyse(impl, [search(1), whole, search(3)]).findings == ()


def test_restoring_a_backup_taken_after_the_work_is_no_undo_of_it(impl):
    # the backup holds the insert (and what a script did after it): restoring it undoes the
    # script, not the insert, so the same insert after it is not proven a redo
    steps = [
        insert(1, "a.py"),
        run(2, "python patch_it.py", "patched"),
        backup(3, "a.py", "a.py.backup2"),
        run(4, "python more.py", "changed"),
        restore(5, "a.py.backup2", "a.py"),
        insert(6, "a.py"),
    ]
    assert analyse(impl, steps).findings == ()


def _classified(profile, tool, key, turn, cmd, result):
    """A shell step of *tool* (its command under *key*) as *profile* classifies it."""
    kind, target, reads, writes, no_op = loopcore.taxonomy.PROFILES[profile].access(
        tool, {key: cmd}
    )
    return Step(
        "s1", turn, kind, tool, target, {key: cmd}, result, None, 100, 0,
        reads=reads, writes=writes, no_op=no_op,
    )  # fmt: skip


def test_a_push_after_a_new_commit_redoes_nothing(impl):
    # the shape of a real Codex run: commit, push, check; later commit the next change, push
    # again, check. The commit is no undo of the push (git push changes the remote, not the
    # repository), so the second push and the check after it are new work.
    def bash(turn, cmd, result):
        return _classified("mini-swe-agent", "bash", "command", turn, cmd, result)

    steps = [
        bash(1, "git add a.md && git commit -m one", "[main d15f942] one"),
        bash(2, "git push origin main", "8af9240..d15f942  main -> main"),
        bash(3, "git status -sb", "## main...origin/main"),
        bash(4, "python bench.py", "ok"),
        bash(5, "git add b.md && git commit -m two", "[main b09228b] two"),
        bash(6, "git push origin main", "d15f942..b09228b  main -> main"),
        bash(7, "git status -sb", "## main...origin/main"),
    ]
    assert [s.target for s in steps[:2]] == ["git:repo", "git:remote"]
    assert analyse(impl, steps).findings == ()


_LOCKED = (
    "fatal: Unable to create '/w/.git/index.lock': File exists.\n\n"
    "Another git process seems to be running in this repository, e.g.\n"
    "an editor opened by 'git commit'. Please make sure all processes\n"
    "are terminated then try again."
)


def _codex_rollout(path, calls):
    """A Codex 0.118 rollout running each (command, exit code, output) of *calls*, one API call
    each, the output behind 0.118's header (``Command: …`` first)."""
    recs = [
        {"type": "session_meta", "payload": {"id": "019d6d29-0000-7000-8000-00000000a001",
                                             "cli_version": "0.118.0", "cwd": "/w"}},
        {"type": "event_msg", "payload": {"type": "user_message", "message": "Commit it."}},
    ]  # fmt: skip
    for n, (cmd, code, out) in enumerate(calls):
        recs.append({"type": "response_item", "payload": {
            "type": "function_call", "name": "exec_command", "call_id": f"c{n}",
            "arguments": json.dumps({"cmd": cmd, "workdir": "/w"})}})  # fmt: skip
        recs.append({"type": "response_item", "payload": {
            "type": "function_call_output", "call_id": f"c{n}",
            "output": f"Command: /bin/zsh -lc '{cmd}'\nChunk ID: {n:06x}\n"
                      f"Wall time: 0.0000 seconds\nProcess exited with code {code}\n"
                      f"Original token count: {len(out) // 4}\nOutput:\n{out}"}})  # fmt: skip
        recs.append({"type": "event_msg", "payload": {"type": "token_count", "info": {
            "last_token_usage": {"input_tokens": 9000 + 100 * n, "cached_input_tokens": 0,
                                 "output_tokens": 40, "reasoning_output_tokens": 0,
                                 "total_tokens": 9040 + 100 * n}}}})  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    (t,) = loopcore.load(str(path))
    return t


def test_git_retried_after_removing_a_stale_index_lock_is_no_repeat(impl, tmp_path):
    # the shape of real Codex 0.118 runs (entireio/git-sync): `git add` fails on a stale
    # .git/index.lock, the agent removes it and runs the same `git add`, which fails the same
    # way (another git process took the lock again), removes it again and adds again. The
    # removal writes the .git folder every git command that changes the repository depends
    # on (git:dir), and reads git:repo (the add in between left a new lock): no repeat.
    add = "git add README.md internal/syncer/syncer.go"
    trace = _codex_rollout(
        tmp_path / "rollout.jsonl",
        [
            (add, 128, _LOCKED),
            ("rm -f .git/index.lock", 0, ""),
            (add, 128, _LOCKED),
            ("rm -f .git/index.lock", 0, ""),
            (add, 0, ""),
            ('git commit -m "Add the probe"', 0, "[main 77295db] Add the probe"),
        ],
    )
    assert [s.target for s in trace.steps[:2]] == ["git:repo", (".git/index.lock", "git:dir")]
    assert analyse(impl, trace).findings == ()
    # the same add run twice with nothing between is still a repeat
    again = _codex_rollout(tmp_path / "again.jsonl", [(add, 128, _LOCKED), (add, 128, _LOCKED)])
    assert [f.kind for f in analyse(impl, again).findings] == ["duplicate_call"]


_HOOK_FAILED = (
    "trim trailing whitespace.................................................Failed\n"
    "- hook id: trailing-whitespace\n- exit code: 1\n- files were modified by this hook\n"
)


@pytest.mark.parametrize(
    "calls",
    [
        # the real run: `git add` fails on the index lock, the commit finds nothing staged, the
        # lock is removed (already gone), then the same add and commit succeed
        [
            ("git add README.md", 128, _LOCKED),
            ('git commit -m "Explain why push remains"', 1, "no changes added to commit"),
            ("rm .git/index.lock", 1, "rm: .git/index.lock: No such file or directory"),
            ("git add README.md", 0, ""),
            ('git commit -m "Explain why push remains"', 0, "[main 9529088] Explain why"),
        ],
        # a pre-commit hook refuses the commit (and fixes the file), the fix is staged, the
        # same commit again: it commits for the first time
        [
            ('git commit -m "Add the probe"', 1, _HOOK_FAILED),
            ("git add internal/syncer/syncer.go", 0, ""),
            ('git commit -m "Add the probe"', 0, "[main 77295db] Add the probe"),
        ],
        # the remote rejects the push, the agent rebases on it, the same push again
        [
            ("git push origin main", 1, " ! [rejected]        main -> main (fetch first)"),
            ("git pull --rebase origin main", 0, "Successfully rebased and updated main."),
            ("git push origin main", 0, "8af9240..d15f942  main -> main"),
        ],
        # the commit failed on the index lock, an older commit is undone, the commit again
        [
            ('git commit -m "Add the probe"', 128, _LOCKED),
            ("git reset --soft HEAD~1", 0, ""),
            ('git commit -m "Add the probe"', 0, "[main 77295db] Add the probe"),
        ],
    ],
    ids=["lock", "hook", "push", "reset"],
)
def test_a_command_that_exited_non_zero_is_no_first_application_of_a_redo(impl, tmp_path, calls):
    # the shape of real Codex runs (entireio/git-sync): a git command that changes the
    # repository or the remote fails (its exit code beside a plain result, no error), the
    # state changes, the same command succeeds. The failed run applied nothing, so the
    # success redoes nothing; the failed run is no redo of an earlier success either.
    trace = _codex_rollout(tmp_path / "rollout.jsonl", calls)
    assert trace.steps[0].error is None and trace.steps[0].meta["returncode"] != 0
    assert analyse(impl, trace).findings == ()
    # an earlier success, then the same command failing after an undo: no redo either
    last, between = calls[-1], calls[-2]
    failed_again = _codex_rollout(
        tmp_path / "again.jsonl", [last, between, (last[0], 1, "fatal: it failed this time")]
    )
    assert analyse(impl, failed_again).findings == ()


def test_a_command_that_exited_zero_and_is_run_again_after_an_undo_is_a_redo(impl, tmp_path):
    # the same sequence with nothing failing: the commit undone (reset --soft) and made again
    # with nothing run between is an oscillation
    calls = [
        ('git commit -m "Add the probe"', 0, "[main 77295db] Add the probe"),
        ("git reset --soft HEAD~1", 0, ""),
        ('git commit -m "Add the probe"', 0, "[main 77295db] Add the probe"),
    ]
    r = analyse(impl, _codex_rollout(tmp_path / "rollout.jsonl", calls))
    assert charged(r) == {2: ("oscillation", 0)}


def test_fetching_again_after_fixing_the_remote_is_no_redo(impl):
    # the shape of a real Codex 0.142 run (EntityProcess/agentv): a fetch fails (the remote's
    # URL is wrong), the agent fixes the URL and fetches again; elsewhere a fetch, the branch
    # cleanup the person asked for, a last fetch. `remote set-url` and `branch -D` are no undo
    # of a fetch (what it brings is the remote's), so neither second fetch is a redo.
    def sh(turn, cmd, result):
        return _classified("codex", "exec_command", "cmd", turn, cmd, result)

    fixed = [
        sh(1, "git fetch origin", "fatal: repository 'https://github.com/..git/' not found"),
        sh(2, "git remote set-url origin https://github.com/e/agentv.git", ""),
        sh(3, "git fetch origin", "From https://github.com/e/agentv\n * [new branch] fix"),
        sh(4, "git status -sb", "## fix...origin/fix"),
    ]
    written = ("git:FETCH_HEAD", "git:refs/remotes")
    assert (fixed[0].target, fixed[0].write_set) == (written, written)
    assert analyse(impl, fixed).findings == ()
    cleanup = [
        sh(1, "git fetch origin", ""),
        sh(2, "git fetch origin && git rev-parse HEAD origin/main", "354de72\n354de72\n"),
        sh(3, "git branch -f results origin/results && git branch -D old", "Deleted branch old"),
        sh(4, "git fetch origin", ""),
        sh(5, "git status -sb", "## main...origin/main"),
    ]
    # no fetch undoes another either: the second is no undo of the first, the last no redo
    assert analyse(impl, cleanup).findings == ()
    # a refspec with a local destination, or a deepened history, writes the repository too;
    # `git remote update` fetches
    for cmd in ("git fetch origin main:main", "git fetch --unshallow", "git fetch -u origin x:x"):
        assert "git:repo" in sh(1, cmd, "").write_set, cmd
    assert sh(1, "git remote update", "").write_set == written
    # two fetches with nothing between them, the same answer: the second learned nothing
    again = [sh(1, "git fetch origin", ""), sh(2, "git fetch origin", "")]
    assert [f.kind for f in analyse(impl, again).findings] == ["duplicate_call"]


def test_a_diff_into_a_file_after_an_edit_is_no_repeat(impl):
    # `git diff > p.patch` reads the repository as `git diff` does (any file of it): written to
    # a file, its output is no proof it read nothing. An edit between two of them changes what
    # the second writes; with nothing between, the second is still a repeat.
    def bash(turn, cmd, result=""):
        return _classified("mini-swe-agent", "bash", "command", turn, cmd, result)

    diff = "git diff > p.patch"
    assert (bash(1, diff).reads, bash(1, diff).writes) == (None, ("p.patch",))
    edited = [bash(1, diff), edit(2, "a.py", "x = 1", "x = 2"), bash(3, diff)]
    assert analyse(impl, edited).findings == ()
    again = [bash(1, diff), bash(2, diff)]
    assert [f.kind for f in analyse(impl, again).findings] == ["duplicate_call"]

    # a Step made without reads derives the same: the classifier's reading of its command
    def made(turn, cmd):
        return st(turn, "mutate", "bash", "p.patch", {"command": cmd}, "")

    assert made(1, diff).read_set is None
    assert analyse(impl, [made(1, diff), edit(2, "a.py", "x", "y"), made(3, diff)]).findings == ()
    named = "git diff -- a.py > p.patch"
    assert made(1, named).read_set == ("p.patch",)  # reads named: derived from the target
    found = analyse(impl, [made(1, named), edit(2, "b.py", "x", "y"), made(3, named)]).findings
    assert [f.kind for f in found] == ["duplicate_call"]
    # a filter of what a pipe or a heredoc feeds it reads no file: the same holds as before
    fed = "echo hi | grep h > out.txt"
    assert bash(1, fed).reads == ()
    assert [f.kind for f in analyse(impl, [bash(1, fed), bash(2, fed)]).findings] == [
        "duplicate_call"
    ]


def test_a_search_of_a_folder_after_an_edit_inside_it_is_no_repeat(impl):
    # the shape of a real Codex 0.140 rollout (planetfall-seed-signalkit): `rg ... src` finds
    # nothing, a patch updates /repo/src/debris.js, the same `rg` again before the checks. The
    # folder holds the file (its path, or a tail of an absolute one), and the working folder
    # holds anything: read, write, read is never waste.
    def bash(turn, cmd, result):
        return _classified("mini-swe-agent", "bash", "command", turn, cmd, result)

    hits = "src/debris.js:3:const blue = 1;\n" * 3

    def session(folder, written):
        return [
            bash(1, f"rg -n blue {folder}", hits),
            bash(2, f"sed -i 's/teal/red/' {written}", ""),
            bash(3, f"rg -n blue {folder}", hits),
        ]

    for folder, written in (
        ("src", "src/debris.js"),
        ("src", "/repo/src/debris.js"),
        ("src/", "src/debris.js"),
        ("./src", "/repo/src/debris.js"),
        (".//src", "src/debris.js"),
        ("src/.", "src/debris.js"),
        (".", "src/debris.js"),
        (".", "/repo/debris.js"),
        ("/", "/etc/debris.js"),
        ("/repo/src", "/repo/src/a/b.js"),
        ("/repo/src", "src/debris.js"),  # the folder named from a root the trace does not show
    ):
        assert analyse(impl, session(folder, written)).findings == (), (folder, written)
    # a folder written whole (rm -r) changes a read of a file in it
    gone = [
        bash(1, "cat src/debris.js", hits),
        bash(2, "rm -rf src", ""),
        bash(3, "cat src/debris.js", hits),
    ]
    assert analyse(impl, gone).findings == ()
    # an edit outside the folder changes nothing it reads: the search again is a repeat
    for written in ("lib/debris.js", "/repo/srcx/debris.js", "src.js"):
        found = analyse(impl, session("src", written)).findings
        assert [(f.kind, f.steps) for f in found] == [("redundant_observation", (2,))], written
    # a failed copy into a folder wrote nothing: the file read again unchanged is a repeat
    failed = [
        bash(1, "cat src/debris.js", hits),
        _classified("mini-swe-agent", "bash", "command", 2, "cp /nope src", ""),
        bash(3, "cat src/debris.js", hits),
    ]
    failed[1].error = "cp: cannot stat '/nope': No such file or directory"
    assert failed[1].write_set == ("src",)
    found = analyse(impl, failed).findings
    assert [(f.kind, f.steps) for f in found] == [("redundant_observation", (2,))]


def test_a_folder_s_contents_are_found_fast_and_alike_for_any_string(impl):
    # a hostile target of thousands of "/" costs no more than its first FOLDER_DEPTH, and a
    # str subclass (numpy's str_) is a name like any other, in both twins
    import numpy as np

    deep = "/" + "/".join(["d"] * 5000) + "/x.py"
    steps = [
        sh(1, "observe", np.str_("src"), "rg -n blue src", "src/a.py:1:blue\n" * 3),
        sh(2, "mutate", "src/a.py", "sed -i s/a/b/ src/a.py", reads=("src/a.py",), writes=("src/a.py",)),
        sh(3, "observe", np.str_("src"), "rg -n blue src", "src/a.py:1:blue\n" * 3),
        sh(4, "observe", deep, f"cat {deep}", "x = 1\n"),
    ]  # fmt: skip
    assert analyse(impl, steps).findings == ()


# ------------------------------------------------------------------ a user's message


def _after_user(step):
    step.after_user = True
    return step


def test_a_repeat_after_a_users_message_is_no_waste(impl):
    # the person may have changed the tree between two requests: the same `git status`, read
    # and search again after their message are new looks, the same ones before it are waste
    steps = [
        sh(1, "observe", "git:repo", "git status", "clean", reads=("git:repo",), writes=()),
        read(2, "a.py", "A"),
        read(3, "a.py", "A"),
        _after_user(
            sh(4, "observe", "git:repo", "git status", "clean", reads=("git:repo",), writes=())
        ),
        read(5, "a.py", "A"),
        read(6, "a.py", "A"),
    ]
    assert charged(analyse(impl, steps)) == {
        2: ("redundant_observation", 1),
        5: ("redundant_observation", 4),
    }
    steps[3].after_user = False
    assert charged(analyse(impl, steps)) == {
        2: ("redundant_observation", 1),
        3: ("redundant_observation", 0),
        4: ("redundant_observation", 1),
        5: ("redundant_observation", 1),
    }


def test_an_undo_the_user_asked_for_is_no_oscillation(impl):
    # "put it back": the edit undone and redone across the person's messages is their choice
    steps = [
        read(1, "a.ts"),
        edit(2, "a.ts", "x = 1", "x = 2"),
        _after_user(edit(3, "a.ts", "x = 2", "x = 1")),
        _after_user(edit(4, "a.ts", "x = 1", "x = 2")),
    ]
    assert analyse(impl, steps).findings == ()
    steps[2].after_user = steps[3].after_user = False
    assert {i: k for i, (k, _) in charged(analyse(impl, steps)).items()} == {
        2: "oscillation",
        3: "oscillation",
    }


def test_a_content_state_known_before_a_users_message_is_not_known_after_it(impl):
    # the same test run before an insert and after `git checkout` undid it is a redo on the
    # committed content, when nothing changed a.py since the trace began; after the person's
    # message a.py may hold their changes, so the first run saw what the checkout does not give
    steps = [
        read(1, "b.py", "B"),
        _after_user(run(2, "python t.py", "fail")),
        insert(3, "a.py"),
        sh(4, "mutate", "a.py", "git checkout -- a.py", writes=("a.py",), reads=()),
        run(5, "python t.py", "fail"),
    ]
    assert analyse(impl, steps).findings == ()
    steps[1].after_user = False
    assert charged(analyse(impl, steps)) == {3: ("oscillation", 1), 4: ("oscillation", 1)}


def test_a_redos_replay_stops_at_a_users_message(impl):
    # a redo after its undo, with no exec between (proven), and the same run after both: the
    # run after the person's message is theirs to ask for, not part of the replay
    steps = [
        insert(1, "a.py"),
        run(2, "python t.py", "fail"),
        sh(3, "mutate", "a.py", "git checkout -- a.py", writes=("a.py",), reads=()),
        insert(4, "a.py"),
        _after_user(run(5, "python t.py", "fail")),
    ]
    got = charged(analyse(impl, steps))
    assert 4 not in got and got.get(3, ("", 0))[0] == "oscillation"
    steps[4].after_user = False
    assert charged(analyse(impl, steps))[4] == ("oscillation", 0)


def test_a_backup_taken_before_a_users_message_proves_nothing_after_it(impl):
    # a.py.orig copied before the person's message; after it a.py may hold their changes, so
    # restoring the copy is not proven to give back what the first test run saw
    steps = [
        backup(1, "a.py", "a.py.orig"),
        _after_user(backup(2, "a.py", "a.py.bak")),
        run(3, "python t.py", "fail"),
        insert(4, "a.py"),
        restore(5, "a.py.orig", "a.py"),
        run(6, "python t.py", "fail"),
    ]
    assert analyse(impl, steps).findings == ()
    steps[1].after_user = False
    assert {i for i, (k, _) in charged(analyse(impl, steps)).items() if k == "oscillation"} >= {5}
