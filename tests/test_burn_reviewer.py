"""Findings a reviewer accepts (docs/burn.md, The findings and the rules), on both kernel twins.

Shell steps are classified the way the adapters classify them (the generic profile's shell
rule: kind, target, what the command reads and writes, whether it is a provable no-op), so
each scenario exercises the classifier and the rules together.
"""

from __future__ import annotations

import json

import pytest
from conftest import twin

from loopcore.burn import BurnReport, BurnSettings, Step, Trace
from loopcore.taxonomy.profiles import PROFILES

_GENERIC = PROFILES["generic"]


def sh(
    turn,
    command,
    result="",
    *,
    tokens=100,
    error=None,
    ref=None,
    text=None,
    tokens_turn=0,
    estimated=False,
):
    kind, target, reads, writes, no_op = _GENERIC.access("bash", {"command": command})
    return Step(
        "s",
        turn,
        kind,
        "bash",
        target,
        {"command": command},
        result,
        error,
        tokens,
        10,
        tokens_estimated=estimated,
        reads=reads,
        writes=writes,
        no_op=no_op,
        ref=ref if ref is not None else {"message": 2 * turn + 1},
        text=text,
        tokens_turn=tokens_turn,
    )


def analyse(impl, steps, settings=None) -> BurnReport:
    """The pure reference's report, after checking the twin of *impl* gives the same one."""
    trace = steps if isinstance(steps, Trace) else Trace(list(steps))
    ref = twin("py").analyse_burn(trace, settings)
    assert impl.analyse_burn(trace, settings) == ref
    assert impl.analyse_many([trace], settings) == [ref]
    return ref


def charged(report: BurnReport) -> dict[int, tuple[str, int | None]]:
    return {i: (f.kind, f.of_step) for f in report.findings for i in f.steps}


A_PY = "\n".join(f"    line {i}: value = compute({i})" for i in range(300))  # 300 lines of a.py


# ------------------------------------------------------------------ F1, F2: same observation


def test_f1_two_different_greps_that_find_nothing_are_two_pieces_of_work(impl):
    r = analyse(impl, [sh(0, 'grep -n "class A" f.py'), sh(1, 'grep -n "class B" f.py')])
    assert r.findings == ()


def test_f1_the_same_grep_twice_is_one_duplicate(impl):
    r = analyse(impl, [sh(0, 'grep -n "class A" f.py'), sh(1, 'grep  -n "class A"   f.py')])
    assert charged(r) == {1: ("redundant_observation", 0)}  # blanks do not make another command


def test_f2_a_different_command_returning_the_same_substantial_text(impl):
    r = analyse(impl, [sh(0, "cat a.py", A_PY), sh(1, "sed -n '1,400p' a.py", A_PY)])
    assert charged(r) == {1: ("redundant_observation", 0)}


@pytest.mark.parametrize("output", ["", "1:class A", "1:class A\n2:    pass"])
def test_f2_different_commands_with_identical_short_output_are_never_a_finding(impl, output):
    r = analyse(
        impl,
        [
            sh(0, "grep -n A a.py", output),
            sh(1, "grep -n 'A' a.py | head", output),
            sh(2, "cat a.py | grep A", output),
        ],
    )
    assert r.findings == ()


def test_f2_the_substantial_size_is_a_setting(impl):
    steps = [sh(0, "cat a.py", A_PY), sh(1, "sed -n '1,400p' a.py", A_PY)]
    assert BurnSettings().substantial_chars == 400 and BurnSettings().substantial_lines == 10
    assert analyse(impl, steps, BurnSettings(substantial_chars=10**6)).findings == ()
    small = [sh(0, "cat b.py", "x = 1\ny = 2\nz = 3"), sh(1, "head b.py", "x = 1\ny = 2\nz = 3")]
    assert analyse(impl, small).findings == ()
    loose = BurnSettings(substantial_chars=5, substantial_lines=3)
    assert charged(analyse(impl, small, loose)) == {1: ("redundant_observation", 0)}


def test_f2_two_searches_with_the_same_hits_are_two_pieces_of_work(impl):
    # a narrower pattern finding the same lines proves there are no others: new knowledge
    hits = "\n".join(f"src/m{i}.py:{i}: self.query.combined_queries = ()" for i in range(40))
    r = analyse(
        impl,
        [
            sh(0, 'grep -rn "combined_queries" src/', hits),
            sh(1, 'grep -rn "self.query.combined_queries" src/', hits),
        ],
    )
    assert r.findings == ()


# ------------------------------------------------------------------ F3, F4, F7: reads and writes


def test_f3_git_diff_to_a_file_reads_the_source_and_writes_the_patch(impl):
    diff = "git diff -- a.py > patch.txt"
    edit = Step(
        "s",
        1,
        "mutate",
        "Edit",
        "a.py",
        {"file_path": "a.py", "old_string": "x", "new_string": "y"},
        "ok",
        None,
        50,
        10,
    )
    assert analyse(impl, [sh(0, diff), edit, sh(2, diff)]).findings == ()
    r = analyse(impl, [sh(0, diff), sh(1, "cat b.py", "b"), sh(2, diff)])
    assert charged(r) == {2: ("duplicate_call", 0)}


@pytest.mark.parametrize(
    "restore", ["git checkout -- a.py", "git checkout a.py", "git restore a.py"]
)
def test_f4_restoring_a_path_writes_that_path_only(impl, restore):
    r = analyse(impl, [sh(0, "cat b.py", A_PY), sh(1, restore), sh(2, "cat b.py", A_PY)])
    assert charged(r) == {2: ("redundant_observation", 0)}
    r = analyse(impl, [sh(0, "cat a.py", A_PY), sh(1, restore), sh(2, "cat a.py", A_PY)])
    assert r.findings == ()


@pytest.mark.parametrize("switch", ["git checkout main", "git stash", "git reset --hard"])
def test_f4_switching_branches_stashing_or_resetting_writes_everything(impl, switch):
    r = analyse(impl, [sh(0, "cat b.py", A_PY), sh(1, switch), sh(2, "cat b.py", A_PY)])
    assert r.findings == ()


def test_f7_provable_no_op_seds_advance_no_epoch(impl):
    fail = "FAILED test_f.py::test_a - assert 1 == 2"
    steps = [sh(0, "python -m pytest test_f.py", fail)]
    steps += [sh(1 + k, "sed -i 's/return a/return a/' f.py") for k in range(4)]
    steps.append(sh(5, "python -m pytest test_f.py", fail))
    r = analyse(impl, steps)
    assert charged(r) == {
        2: ("duplicate_call", 1),
        3: ("duplicate_call", 1),
        4: ("duplicate_call", 1),
        5: ("duplicate_call", 0),
    }
    # a real substitution is a change: the re-run after it is new work
    steps[1] = sh(1, "sed -i 's/return a/return b/' f.py")
    assert 5 not in charged(analyse(impl, steps))


def test_f7_an_edit_whose_old_and_new_are_equal_is_a_no_op(impl):
    run = lambda t: Step(
        "s", t, "exec", "bash", None, {"command": "pytest"}, "1 failed", None, 100, 10
    )
    noop = Step(
        "s",
        1,
        "mutate",
        "Edit",
        "f.py",
        {"file_path": "f.py", "old_string": "a", "new_string": "a"},
        "ok",
        None,
        50,
        10,
    )
    assert charged(analyse(impl, [run(0), noop, run(2)])) == {2: ("duplicate_call", 0)}


# ------------------------------------------------------------------ F5, F6: undo and redo


def test_f5_an_insert_deleted_and_redone_with_the_same_views_and_runs(impl):
    view = "\n".join(f"{n}: code line {n}" for n in range(260, 271))
    tests = "FAILED tests/test_x.py::test_y - AssertionError"
    steps = [
        sh(0, "sed -i '264a\\    if x is None: return' a.py"),
        sh(1, "sed -n '260,270p' a.py", view),
        sh(2, "python -m pytest tests/test_x.py", tests),
        sh(3, "sed -i '/if x is None: return/d' a.py"),
        sh(4, "sed -i '264a\\    if x is None: return' a.py"),
        sh(5, "sed -n '260,270p' a.py", view),
        sh(6, "python -m pytest tests/test_x.py", tests),
    ]
    r = analyse(impl, steps)
    (f,) = r.findings
    assert f.kind == "oscillation"
    assert f.steps == (3, 4, 5, 6) and f.of_step == 0 and f.target == "a.py"
    assert f.refs == tuple({"message": 2 * t + 1} for t in (3, 4, 5, 6)) and f.of_ref == {
        "message": 1
    }


def test_f5_without_proof_the_redo_is_not_charged(impl):
    # the view after the redo shows something else: the undo and redo did not land on the old state
    view = "\n".join(f"{n}: code line {n}" for n in range(260, 271))
    steps = [
        sh(0, "sed -i '264a\\    if x is None: return' a.py"),
        sh(1, "sed -n '260,270p' a.py", view),
        sh(2, "python -m pytest", "1 failed"),
        sh(3, "sed -i '/if x is None: return/d' a.py"),
        sh(4, "sed -i '264a\\    if x is None: return' a.py"),
        sh(5, "sed -n '260,270p' a.py", view + "\nsomething new"),
        sh(6, "python -m pytest", "1 failed"),
    ]
    assert analyse(impl, steps).findings == ()


def test_f5_a_debug_print_added_run_and_removed_is_care_not_waste(impl):
    add = {"file_path": "a.py", "old_string": "x = f()", "new_string": "x = f()\nprint(x)"}
    rm = {"file_path": "a.py", "old_string": "x = f()\nprint(x)", "new_string": "x = f()"}
    steps = [
        Step("s", 0, "mutate", "Edit", "a.py", add, "ok", None, 50, 10),
        sh(1, "python a.py", "42"),
        Step("s", 2, "mutate", "Edit", "a.py", rm, "ok", None, 50, 10),
        sh(3, "python -m pytest", "ok"),
    ]
    assert analyse(impl, steps).findings == ()


def test_f6_a_helper_rebuilt_line_by_line_after_a_revert(impl):
    steps = [
        sh(0, "echo 'import a' > fix.py"),
        sh(1, "echo 'a.patch()' >> fix.py"),
        sh(2, "python3 fix.py", "Traceback: boom"),
        sh(3, "git checkout -- fix.py"),
        sh(4, "echo 'import a' > fix.py"),
        sh(5, "echo 'a.patch()' >> fix.py"),
        sh(6, "echo 'a.patch(strict=True)' >> fix.py"),
        sh(7, "python3 fix.py", "done"),
    ]
    r = analyse(impl, steps)
    assert charged(r) == {4: ("oscillation", 0), 5: ("oscillation", 0)}  # the new line is new work


# ------------------------------------------------------------------ F8, F9: turns that ran nothing


def test_f8_rejected_actions_are_charged_their_turn_and_the_error(impl):
    steps = [
        sh(0, "ls", "a.py"),
        Step(
            "s",
            1,
            "other",
            "",
            rejected="Please always provide EXACTLY ONE action in triple backticks, found 0.",
            text="I think we should look at a.py",
            tokens_in=40,
            tokens_out=300,
            ref={"message": 3},
        ),
        Step(
            "s",
            2,
            "other",
            "bash",
            args='{"command": "cat a.py',
            rejected="arguments are not valid JSON",
            tokens_in=20,
            tokens_out=80,
            tokens_turn=500,
            ref={"message": 5},
        ),
        Step(
            "s",
            3,
            "other",
            "no_such_tool",
            args={},
            rejected="unknown tool no_such_tool",
            tokens_in=15,
            tokens_out=30,
            ref={"message": 7},
        ),
        sh(4, "cat a.py", A_PY),
    ]
    r = analyse(impl, steps)
    (f,) = [f for f in r.findings if f.kind == "rejected_action"]
    assert f.steps == (1, 2, 3) and f.of_step is None and f.of_ref is None
    assert f.tokens == 340 + 600 + 45
    assert r.total_tokens == sum(s.tokens_in + s.tokens_out + s.tokens_turn for s in steps)
    assert r.by_kind["rejected_action"] == {"tokens": 985, "steps": 3}
    assert f.refs == ({"message": 3}, {"message": 5}, {"message": 7})


def test_f8_every_turn_counts_in_total_tokens(impl):
    reply = Step("s", 1, "other", "", text="Done.", tokens_out=25)
    r = analyse(impl, [sh(0, "ls", "a.py", tokens=10), reply])
    assert r.total_tokens == 10 + 10 + 25 and r.findings == ()


def test_f9_a_reply_repeating_one_line_a_thousand_times(impl):
    text = "Let me check the file.\n" + "I need to verify the fix works.\n" * 1000
    step = Step("s", 0, "other", "", text=text, tokens_out=8000, ref={"message": 2})
    r = analyse(impl, [step])
    (f,) = r.findings
    assert f.kind == "degenerate_output" and f.steps == (0,) and f.refs == ({"message": 2},)
    line = len("I need to verify the fix works.\n")
    # the repeats, not the first occurrence: 999 lines of the 1,001
    assert abs(f.tokens - 8000 * 999 * line // len(text)) <= 8000 * line // len(text)


def test_f9_a_50_character_chunk_ten_times_in_close_succession(impl):
    chunk = "The answer depends on the value of x in the loop. "  # 50 characters
    assert len(chunk) == 50
    text = (
        "First, some context about the problem at hand. "
        + chunk * 10
        + "Then something else entirely."
    )
    step = Step("s", 0, "other", "", text=text, tokens_out=len(text) // 4)
    (f,) = analyse(impl, [step]).findings
    assert f.kind == "degenerate_output" and 0 < f.tokens < step.tokens_out
    nine = Step("s", 0, "other", "", text="Intro. " + chunk * 9 + "End.", tokens_out=200)
    assert analyse(impl, [nine]).findings == ()


def test_f9_code_blocks_lists_and_tables_do_not_count(impl):
    code = "Here is the data:\n```\n" + "0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0\n" * 200 + "```\nDone."
    table = "| a | b |\n|---|---|\n" + "| the same cell value here | and here too, again |\n" * 100
    items = "Steps:\n" + "- run the same command against the module again\n" * 100
    for text in (code, table, items):
        step = Step("s", 0, "other", "", text=text, tokens_out=len(text) // 4)
        assert analyse(impl, [step]).findings == (), text[:40]


def test_f9_the_repeated_part_of_a_call_turn_is_charged_from_its_turn_tokens(impl):
    text = "Looking at it.\n" + "I will read the file again to be sure.\n" * 100
    step = sh(0, "cat a.py", A_PY, text=text, tokens_turn=1000)
    (f,) = analyse(impl, [step]).findings
    assert f.kind == "degenerate_output" and 0 < f.tokens <= 1000 and f.turn_output_tokens == 0


# ------------------------------------------------------------------ F10, F11, F12


def test_f10_findings_name_steps_by_index_and_by_the_traces_own_coordinate(impl, tmp_path):
    steps = [
        sh(0, "cat a.py", A_PY, ref={"message": 114}),
        sh(1, "cat a.py", A_PY, ref={"message": 116}),
    ]
    r = analyse(impl, steps)
    (f,) = r.findings
    assert (f.steps, f.refs, f.of_step, f.of_ref) == (
        (1,),
        ({"message": 116},),
        0,
        {"message": 114},
    )
    d = json.loads(json.dumps(r.to_dict()))["findings"][0]
    assert d["refs"] == [{"message": 116}] and d["of_ref"] == {"message": 114} and d["of_step"] == 0
    assert "messages[116]" in f.message and "messages[114]" in f.message
    line = [sh(0, "cat a.py", A_PY, ref={"line": 41}), sh(1, "cat a.py", A_PY, ref={"line": 42})]
    assert "line 42" in analyse(impl, line).findings[0].message


def test_f11_reasoning_is_reported_beside_the_charge_not_in_it(impl):
    steps = [
        sh(0, "cat a.py", A_PY, tokens=900),
        sh(1, "cat a.py", A_PY, tokens=900, tokens_turn=7500),
    ]
    r = analyse(impl, steps)
    (f,) = r.findings
    assert f.tokens == 910 and f.turn_output_tokens == 7500
    assert r.to_dict()["findings"][0]["turn_output_tokens"] == 7500
    assert r.total_tokens == 910 + 910 + 7500
    (g,) = analyse(impl, steps, BurnSettings(charge_turn_output=True)).findings
    assert g.tokens == 910 + 7500 and g.turn_output_tokens == 0


def test_f11_only_charges_that_rest_on_estimates_are_marked(impl):
    steps = [
        sh(0, "cat a.py", A_PY, estimated=True),
        sh(1, "cat a.py", A_PY),
        sh(2, "cat b.py", A_PY),
        sh(3, "cat b.py", A_PY, estimated=True),
    ]
    r = analyse(impl, steps)
    assert r.tokens_estimated
    assert [(f.steps, f.tokens_estimated) for f in r.findings] == [((1,), False), ((3,), True)]


def test_f12_wasted_never_exceeds_total_and_total_counts_every_turn(impl):
    text = "again and again and again, the very same words. " * 200
    steps = [
        sh(0, "cat a.py", A_PY, text=text, tokens_turn=2000),
        sh(1, "cat a.py", A_PY, text=text, tokens_turn=2000),
        Step(
            "s", 2, "other", "", rejected="format error", text=text, tokens_in=10, tokens_out=2000
        ),
        Step("s", 3, "other", "", text=text, tokens_out=2000),
    ]
    for cfg in (None, BurnSettings(charge_turn_output=True)):
        r = analyse(impl, steps, cfg)
        assert 0 <= r.wasted_tokens <= r.total_tokens == 110 + 2000 + 110 + 2000 + 2010 + 2000
        assert 0 <= r.waste_ratio <= 1


def test_f2_two_regions_with_the_same_text_are_two_pieces_of_work(impl):
    region = "\n".join(
        f"            return self.value_{i}  # the same shape in two places" for i in range(12)
    )
    r = analyse(
        impl,
        [
            sh(0, "sed -n '1310,1321p' related.py", region),
            sh(1, "sed -n '1330,1341p' related.py", region),
            sh(2, "tail -n 12 related.py", region),
        ],
    )
    assert r.findings == ()


def test_f8_swe_agent_format_errors_are_rejected_turns(impl):
    from loopcore import load

    doc = {
        "trajectory": [],
        "info": {},
        "history": [
            {"role": "system", "content": "You are an agent."},
            {"role": "assistant", "content": "I will look around.\n```\nls\n```", "action": "ls"},
            {"role": "user", "content": "a.py b.py"},
            {
                "role": "assistant",
                "content": "Let me think about what to do next without a command.",
            },
            {
                "role": "user",
                "content": "Your output was not formatted correctly. You must always include one discussion "
                "and one command as part of your response.",
            },
            {"role": "assistant", "content": "Sorry.\n```\ncat a.py\n```", "action": "cat a.py"},
            {"role": "user", "content": "print(1)"},
        ],
    }
    (t,) = load(doc)
    assert [(s.name, bool(s.rejected), s.ref) for s in t] == [
        ("bash", False, {"message": 1}),
        ("", True, {"message": 3}),
        ("bash", False, {"message": 5}),
    ]
    r = analyse(impl, t)
    (f,) = r.findings
    assert f.kind == "rejected_action" and f.steps == (1,) and f.refs == ({"message": 3},)


def test_f5_reverting_a_fix_to_run_a_baseline_then_reapplying_it_is_not_waste(impl):
    fix = "sed -i 's/except E:/except (E, V):/g' a.py"
    check = "grep -n 'except (E, V):' a.py"
    steps = [
        sh(0, "cp a.py a.py.backup"),
        sh(1, fix),
        sh(2, check, "142: except (E, V):"),
        sh(3, "python3 test_one.py", "ok"),
        sh(4, "cp a.py.backup a.py"),  # the fix taken out on purpose ...
        sh(5, "python3 -m pytest tests/", "1 failed"),  # ... to see the tests fail without it
        sh(6, fix),
        sh(7, check, "142: except (E, V):"),
        sh(8, "python3 test_all.py", "ok"),  # and then something new
    ]
    assert analyse(impl, steps).findings == ()


def test_f3_a_write_under_an_absolute_path_changes_the_relative_one(impl):
    # the working folder is not recorded: patch.txt and /testbed/patch.txt may be one file
    steps = [
        sh(0, "cat patch.txt", A_PY),
        sh(1, "cd /testbed && git diff HEAD -- a.py > patch.txt"),
        sh(2, "cat patch.txt", A_PY),
    ]
    assert steps[1].writes == ("/testbed/patch.txt",)
    assert analyse(impl, steps).findings == ()


def test_blanks_are_normalised_in_observe_commands_only(impl):
    body = "cat > fix.py <<'EOF'\nx = 1\n{}y = 2\nEOF"
    first, second = (
        sh(0, body.format("")),
        sh(2, body.format("\n")),
    )  # one more blank line: new content
    steps = [first, sh(1, "rm fix.py"), second]
    assert analyse(impl, steps).findings == ()


def test_f5_an_insert_redone_right_after_restoring_the_backup(impl):
    # nothing ran between the undo and the redo that could have told the agent something new
    steps = [
        sh(0, "cp enums.py enums.py.bak"),
        sh(1, "sed -i '1i import enum' enums.py"),
        sh(2, "python -m pytest tests/", "1 failed"),
        sh(3, "cp enums.py.bak enums.py"),
        sh(4, "sed -i '1i import enum' enums.py"),
    ]
    r = analyse(impl, steps)
    (f,) = r.findings
    assert (f.kind, f.steps, f.of_step) == ("oscillation", (3, 4), 1)
