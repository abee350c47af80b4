"""The ``loopcore`` command line: analyse, exit codes, bad input, outputs, the bundled example."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import orjson
import pytest

from loopcore import Step
from loopcore.cli import EXIT_ERROR, EXIT_FINDINGS, EXIT_OK, main
from loopcore.report import EXAMPLE_TRACE

ROOT = pathlib.Path(__file__).resolve().parent.parent


def write_jsonl(path: pathlib.Path, steps: list[Step]) -> pathlib.Path:
    path.write_text("".join(json.dumps(s.to_dict()) + "\n" for s in steps), encoding="utf-8")
    return path


def reread_trace(
    session: str = "s1", reads: int = 3, tokens: int = 15_000, other: int = 300
) -> list[Step]:
    """E1's shape: big.ts read *reads* times, same result, plus some other honest work."""
    steps = [
        Step(
            session,
            1,
            "observe",
            "read_file",
            "big.ts",
            {"path": "big.ts"},
            "x" * 50,
            tokens_in=tokens,
        )
        for _ in range(reads)
    ]
    steps.append(
        Step(session, 1, "observe", "list_dir", ".", {"path": "."}, ["big.ts"], tokens_in=other)
    )
    return steps


def honest_trace(session: str = "honest") -> list[Step]:
    return [
        Step(
            session,
            1,
            "observe",
            "read_file",
            f"f{i}.py",
            {"path": f"f{i}.py"},
            f"body {i}",
            tokens_in=100,
        )
        for i in range(5)
    ]


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


# --- the main job: analyse ------------------------------------------------------------------


def test_no_path_analyses_the_bundled_example_and_says_so(capsys):
    rc, out, err = run(["analyse"], capsys)
    assert rc == EXIT_OK
    assert "bundled example" in out
    assert "example-fix-timezone" in out
    assert "overall" in out and "Top recommendation" in out


def test_bundled_example_shows_every_kind_of_waste_and_mostly_honest_work():
    from loopcore.report import collect

    rep = collect([])
    assert rep.example and len(rep.traces) == 1
    kinds = {f.kind for f in rep.traces[0].report.findings}
    assert kinds == {"redundant_observation", "duplicate_call", "oscillation", "question_loop"}
    # Plenty of honest work: the waste is real but the minority of the session.
    assert 0.05 < rep.overall.waste_ratio < 0.5
    assert not rep.overall.tokens_estimated


def test_bundled_example_is_packaged_and_not_stale():
    assert EXAMPLE_TRACE.is_file()
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "make_example.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr


def test_summary_row_per_trace_overall_and_top_findings(tmp_path, capsys):
    a = write_jsonl(tmp_path / "a.jsonl", reread_trace("sess-a"))
    b = write_jsonl(tmp_path / "b.jsonl", honest_trace("sess-b"))
    rc, out, _ = run(["analyse", str(a), str(b)], capsys)
    assert rc == EXIT_OK
    assert "sess-a" in out and "sess-b" in out and "overall" in out
    # E1's figures: 45,300 total, 30,000 wasted, 66.2%.
    row_a = next(line for line in out.splitlines() if "sess-a" in line and "45,300" in line)
    assert "30,000" in row_a and "66.2%" in row_a
    assert "big.ts" in out
    assert "Top recommendation" in out and "30000" in out.replace(",", "")


def test_output_to_a_pipe_is_plain_text(tmp_path, capsys):
    a = write_jsonl(tmp_path / "a.jsonl", reread_trace())
    _, out, err = run(["analyse", str(a)], capsys)
    assert "\x1b[" not in out and "\x1b[" not in err
    assert all(line == line.rstrip() for line in out.splitlines())


def test_json_file_holds_the_full_report(tmp_path, capsys):
    a = write_jsonl(tmp_path / "a.jsonl", reread_trace("sess-a"))
    b = write_jsonl(tmp_path / "b.jsonl", honest_trace("sess-b"))
    dest = tmp_path / "r.json"
    rc, _, err = run(["analyse", str(a), str(b), "--json", str(dest)], capsys)
    assert rc == EXIT_OK and str(dest) in err
    rep = orjson.loads(dest.read_bytes())
    assert rep["schema"] == 1 and rep["example"] is False
    assert [t["session"] for t in rep["traces"]] == ["sess-a", "sess-b"]
    assert rep["overall"]["total_tokens"] == 45_300 + 500
    assert rep["overall"]["wasted_tokens"] == 30_000
    assert rep["overall"]["traces"] == 2 and rep["overall"]["steps"] == 9
    ta = rep["traces"][0]
    assert ta["total_tokens"] == 45_300 and ta["wasted_tokens"] == 30_000
    assert {f["kind"] for f in ta["findings"]} == {"redundant_observation"}
    assert rep["traces"][1]["findings"] == []


def test_json_to_stdout_is_only_json(tmp_path, capsys):
    a = write_jsonl(tmp_path / "a.jsonl", reread_trace())
    rc, out, _ = run(["analyse", str(a), "--json", "-"], capsys)
    assert rc == EXIT_OK
    assert orjson.loads(out)["overall"]["wasted_tokens"] == 30_000


def test_html_is_self_contained_and_escaped(tmp_path, capsys):
    evil = "<script>alert('x')</script>.ts"
    steps = [
        Step("<b>sess</b>", 1, "observe", "read_file", evil, {"path": evil}, "same", tokens_in=10)
        for _ in range(2)
    ]
    a = write_jsonl(tmp_path / "a.jsonl", steps)
    dest = tmp_path / "r.html"
    rc, _, _ = run(["analyse", str(a), "--html", str(dest)], capsys)
    assert rc == EXIT_OK
    page = dest.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    # two script elements, both the page's own: the escaped data block and the renderer
    assert page.count("<script") == 2 and "<script>alert" not in page and "<b>sess" not in page
    assert '<script type="application/json" id="lc-data">' in page
    assert "&lt;script&gt;" in page and "&lt;b&gt;sess&lt;/b&gt;" in page
    assert "\\u003cscript\\u003ealert" in page  # the same string inside the JSON block
    offline = page.replace("http://www.w3.org/2000/svg", "")  # the SVG namespace name, not a load
    for external in ("http://", "https://", "<link", "src=", "@import"):
        assert external not in offline


def test_top_limits_the_findings_listed(tmp_path, capsys):
    files = [
        write_jsonl(tmp_path / f"t{i}.jsonl", reread_trace(f"s{i}", tokens=1000 * (i + 1)))
        for i in range(3)
    ]
    _, out, _ = run(["analyse", *map(str, files), "--top", "1"], capsys)
    assert "Top 1 finding" in out
    findings_part = out.split("Top 1 finding", 1)[1]
    assert "s2" in findings_part and "s0" not in findings_part


def test_min_ratio_hides_traces_but_not_their_tokens(tmp_path, capsys):
    a = write_jsonl(tmp_path / "a.jsonl", reread_trace("wasteful"))
    b = write_jsonl(tmp_path / "b.jsonl", honest_trace("careful"))
    _, out, _ = run(["analyse", str(a), str(b), "--min-ratio", "0.5"], capsys)
    assert "wasteful" in out and "careful" not in out
    assert "45,800" in out  # the overall total still includes the hidden trace
    assert "below --min-ratio" in out


# --- exit codes -----------------------------------------------------------------------------


def test_fail_above_exits_1_only_above_the_threshold(tmp_path, capsys):
    a = write_jsonl(tmp_path / "a.jsonl", reread_trace())  # ratio 0.662
    assert run(["analyse", str(a), "--fail-above", "0.5"], capsys)[0] == EXIT_FINDINGS
    assert run(["analyse", str(a), "--fail-above", "0.7"], capsys)[0] == EXIT_OK
    b = write_jsonl(tmp_path / "b.jsonl", honest_trace())
    assert run(["analyse", str(b), "--fail-above", "0"], capsys)[0] == EXIT_OK


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["frobnicate"],
        ["analyse", "--top", "-1"],
        ["analyse", "--min-ratio", "2"],
        ["analyse", "--fail-above", "lots"],
        ["analyse", "--progress", "--no-progress"],
    ],
)
def test_usage_errors_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == EXIT_ERROR
    assert "usage:" in capsys.readouterr().err


def test_help_and_version_exit_0(capsys):
    for argv in (["--help"], ["analyse", "--help"], ["replay", "--help"], ["--version"]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 0
    assert "loopcore" in capsys.readouterr().out


# --- bad input ------------------------------------------------------------------------------


def test_malformed_line_names_file_and_line(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    good = json.dumps(reread_trace()[0].to_dict())
    bad.write_text(good + "\n{not json\n" + good + "\n", encoding="utf-8")
    rc, out, err = run(["analyse", str(bad), "--format", "loopcore"], capsys)
    assert rc == EXIT_ERROR
    assert "bad.jsonl:2" in err
    assert "--keep-going" in err
    assert out == ""


def test_keep_going_analyses_the_rest_and_counts_what_was_skipped(tmp_path, capsys):
    write_jsonl(tmp_path / "a.jsonl", reread_trace("good-one"))
    (tmp_path / "broken.jsonl").write_text("{not json at all\n", encoding="utf-8")
    dest = tmp_path / "r.json"
    rc, out, err = run(
        ["analyse", str(tmp_path), "--format", "loopcore", "--keep-going", "--json", str(dest)],
        capsys,
    )
    assert rc == EXIT_OK
    assert "good-one" in out
    assert "Skipped" in out and "broken.jsonl" in out
    rep = orjson.loads(dest.read_bytes())
    assert [t["session"] for t in rep["traces"]] == ["good-one"]
    assert len(rep["skipped"]) >= 1
    assert any(s["path"].endswith("broken.jsonl") for s in rep["skipped"])
    assert "skipped" in err


def test_keep_going_skips_a_bad_line_and_keeps_the_rest_of_its_trace(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    lines = [json.dumps(s.to_dict()) for s in reread_trace("mixed")]
    bad.write_text("\n".join([lines[0], "{oops", *lines[1:]]) + "\n", encoding="utf-8")
    dest = tmp_path / "r.json"
    rc, out, _ = run(["analyse", str(bad), "--keep-going", "--json", str(dest)], capsys)
    assert rc == EXIT_OK
    rep = orjson.loads(dest.read_bytes())
    assert rep["overall"]["steps"] == 4 and rep["overall"]["wasted_tokens"] == 30_000
    assert [(s["path"].endswith("bad.jsonl"), s["line"]) for s in rep["skipped"]] == [(True, 2)]
    assert "bad.jsonl:2" in out


def test_keep_going_with_nothing_readable_is_an_error(tmp_path, capsys):
    (tmp_path / "broken.jsonl").write_text("{not json\n", encoding="utf-8")
    rc, _, err = run(
        ["analyse", str(tmp_path / "broken.jsonl"), "--format", "loopcore", "--keep-going"], capsys
    )
    assert rc == EXIT_ERROR
    assert "nothing could be read" in err


def test_unknown_format_lists_the_known_ones(tmp_path, capsys):
    from loopcore.adapters import FORMATS

    a = write_jsonl(tmp_path / "a.jsonl", honest_trace())
    rc, _, err = run(["analyse", str(a), "--format", "yaml-of-doom"], capsys)
    assert rc == EXIT_ERROR
    assert "yaml-of-doom" in err and "known formats" in err
    for name in FORMATS:
        assert name in err


def test_missing_path_is_an_input_error(tmp_path, capsys):
    rc, _, err = run(["analyse", str(tmp_path / "nope.jsonl")], capsys)
    assert rc == EXIT_ERROR and "nope.jsonl" in err


def test_empty_file_is_an_empty_trace_not_a_crash(tmp_path, capsys):
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    dest = tmp_path / "r.json"
    rc, out, _ = run(["analyse", str(empty), "--format", "loopcore", "--json", str(dest)], capsys)
    assert rc == EXIT_OK
    rep = orjson.loads(dest.read_bytes())
    assert rep["overall"]["total_tokens"] == 0 and rep["overall"]["waste_ratio"] == 0
    assert rep["overall"]["steps"] == 0
    assert rep["skipped"] == []
    assert "overall" in out


def test_unwritable_output_is_an_error_not_a_traceback(tmp_path, capsys):
    a = write_jsonl(tmp_path / "a.jsonl", honest_trace())
    rc, _, err = run(
        ["analyse", str(a), "--json", str(tmp_path / "no" / "such" / "dir.json")], capsys
    )
    assert rc == EXIT_ERROR and "cannot write" in err


def test_a_report_is_never_written_over_a_trace(tmp_path, capsys):
    """``--json FILE`` takes the report's file: ``analyse --json trace.jsonl`` names no input (so
    the bundled example would be analysed) and must not replace the trace with the report."""
    a = write_jsonl(tmp_path / "a.jsonl", honest_trace())
    before = a.read_bytes()
    rc, _, err = run(["analyse", "--json", str(a)], capsys)
    assert rc == EXIT_ERROR and "loopcore did not write" in err
    assert f"loopcore analyse {a} --json REPORT" in err  # what was probably meant
    assert a.read_bytes() == before
    # an input named as the report's file, for --json and --html, analyse and replay
    for cmd in ("analyse", "replay"):
        for flag in ("--json", "--html"):
            rc, _, err = run([cmd, str(a), flag, str(a)], capsys)
            assert rc == EXIT_ERROR and "one of the inputs" in err, (cmd, flag)
            assert a.read_bytes() == before
    notes = tmp_path / "notes.txt"
    notes.write_text("mine\n")
    rc, _, err = run(["analyse", str(a), "--html", str(notes)], capsys)
    assert rc == EXIT_ERROR and notes.read_text() == "mine\n"


def test_a_report_of_loopcore_s_own_is_written_again(tmp_path, capsys):
    a = write_jsonl(tmp_path / "a.jsonl", honest_trace())
    out, page = tmp_path / "r.json", tmp_path / "r.html"
    for cmd in ("analyse", "analyse", "replay", "replay", "analyse"):
        rc, _, err = run([cmd, str(a), "--json", str(out), "--html", str(page)], capsys)
        assert rc == EXIT_OK, (cmd, err)
    assert json.loads(out.read_text())["inputs"] == [str(a)]
    rc, _, _ = run(["analyse", str(a), "--json", os.devnull], capsys)  # a device is not a file
    assert rc == EXIT_OK


def test_a_cline_task_with_only_its_ui_log_is_said_not_analysed(tmp_path, capsys):
    """Cline / Roo Code keep the conversation in api_conversation_history.json; a task folder
    holding only ui_messages.json (the UI's log, what public repositories often commit) has
    nothing loopcore reads, and the report says so instead of a quiet 0 traces."""
    task = tmp_path / "tasks" / "1760001234567"
    task.mkdir(parents=True)
    (task / "ui_messages.json").write_text(
        '[{"ts": 1, "type": "say", "say": "text", "text": "hi"}]'
    )
    rc, out, _ = run(["analyse", str(tmp_path)], capsys)
    assert rc == EXIT_OK
    assert "1 Cline / Roo Code task folder holds only ui_messages.json" in " ".join(out.split())
    assert "Nothing was analysed" in out
    (task / "api_conversation_history.json").write_text("[]")
    _, out, _ = run(["analyse", str(tmp_path)], capsys)
    assert "holds only ui_messages.json" not in " ".join(out.split())


def test_inputs_without_a_step_are_not_called_free_of_waste(tmp_path, capsys):
    """An empty rollout read alone gives a trace of no step: the report says nothing was
    there to charge, not that every repeated call had a reason."""
    empty = tmp_path / "rollout-2026-01-01T00-00-00-x.jsonl"
    empty.write_bytes(b"")
    rc, out, _ = run(["analyse", str(empty)], capsys)
    assert rc == EXIT_OK
    flat = " ".join(out.split())
    assert "No step to analyse: the 1 trace read holds no tool call or reply" in flat
    assert "No waste found" not in flat
    page = tmp_path / "report.html"
    run(["analyse", str(empty), "--html", str(page)], capsys)
    assert "No step to analyse" in page.read_text()
    assert "every repeated call had a reason" not in page.read_text()
    a = write_jsonl(tmp_path / "a.jsonl", reread_trace())
    _, out, _ = run(["analyse", str(a), str(empty)], capsys)
    assert "No step to analyse" not in out


# --- progress -------------------------------------------------------------------------------


def test_progress_bar_goes_to_stderr_only_when_asked(tmp_path, capsys):
    a = write_jsonl(tmp_path / "a.jsonl", reread_trace())
    _, plain_out, plain_err = run(["analyse", str(a)], capsys)
    assert "\x1b[" not in plain_err  # not a TTY and not forced: no bar
    _, forced_out, forced_err = run(["analyse", str(a), "--progress"], capsys)
    # The forced bar writes terminal control codes to stderr and never touches stdout.
    assert "\x1b[" in forced_err
    assert forced_out == plain_out


# --- as installed ---------------------------------------------------------------------------


def _env(impl_name: str) -> dict[str, str]:
    env = dict(os.environ)
    env["LOOPCORE_NO_EXTENSIONS"] = "1" if impl_name == "py" else "0"
    env.pop("COLUMNS", None)
    return env


def test_python_dash_m_runs_the_same_report_on_both_twins(impl, tmp_path):
    """`python -m loopcore analyse --json -` in a fresh process gives the in-process report."""
    from loopcore.report import collect

    a = write_jsonl(tmp_path / "a.jsonl", reread_trace("sess-a"))
    proc = subprocess.run(
        [sys.executable, "-m", "loopcore", "analyse", str(a), str(EXAMPLE_TRACE), "--json", "-"],
        capture_output=True,
        env=_env(impl.name),
        timeout=120,
    )
    assert proc.returncode == EXIT_OK, proc.stderr.decode()
    got = orjson.loads(proc.stdout)
    assert got["implementation"] == impl.name
    want = orjson.loads(orjson.dumps(collect([a, EXAMPLE_TRACE]).to_dict(), default=list))
    for rep in (got, want):
        rep.pop("implementation")
    assert got == want


@pytest.mark.traces
def test_analyse_the_shared_traces_gives_a_sensible_report_for_every_file(
    shared_traces, tmp_path, capsys
):
    dest = tmp_path / "r.json"
    rc, out, err = run(["analyse", str(shared_traces), "--json", str(dest)], capsys)
    assert rc == EXIT_OK, err
    rep = orjson.loads(dest.read_bytes())
    # A file holding many traces (tau-bench) names each as "path#index".
    sources = {t["source"].split("#", 1)[0] for t in rep["traces"]}
    trace_files = [
        p for p in shared_traces.rglob("*") if p.name.endswith((".traj.json.gz", ".traj.gz"))
    ]
    trace_files += list(shared_traces.glob("tau-bench/*/*.json.gz"))
    assert len(trace_files) > 100
    assert {str(p) for p in trace_files} <= sources
    assert rep["overall"]["steps"] > 9_000
    for t in rep["traces"]:
        assert 0 <= t["wasted_tokens"] <= t["total_tokens"]
        assert 0 <= t["waste_ratio"] <= 1
    assert "overall" in out and "Top recommendation" in out


def test_narrow_output_keeps_every_number_whole(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    a = write_jsonl(
        tmp_path / "a.jsonl", reread_trace("a-rather-long-session-name-from-a-harness-run-0042")
    )
    _, out, _ = run(["analyse", str(a)], capsys)
    assert max(len(line) for line in out.splitlines()) <= 80
    row = next(line for line in out.splitlines() if "45,300" in line)
    assert "30,000" in row and "66.2%" in row


def test_the_cli_starts_numpy_with_one_blas_thread_unless_told_otherwise():
    """loopcore runs no linear algebra: the CLI asks OpenBLAS for one thread (its idle pool
    spins for ~0.1 s of CPU after numpy's import), and a number the user set is kept."""
    import subprocess
    import sys

    from conftest import package_env

    probe = (
        "import os, sys, loopcore.cli as c; c._quiet_blas(); import numpy; "
        "print(os.environ.get('OPENBLAS_NUM_THREADS'), 'numpy' in sys.modules)"
    )
    for given, want in ((None, "1 True"), ("3", "3 True")):
        env = package_env()
        env.pop("OPENBLAS_NUM_THREADS", None)
        if given is not None:
            env["OPENBLAS_NUM_THREADS"] = given
        out = subprocess.run(
            [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
        )
        assert out.stdout.split() == want.split()


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_session_still_being_written_is_analysed_and_its_cut_line_named(tmp_path, capsys, jobs):
    lines = [json.dumps(s.to_dict()) for s in reread_trace("live")]
    (tmp_path / "live.jsonl").write_text("\n".join(lines) + "\n" + lines[0][:20], encoding="utf-8")
    write_jsonl(tmp_path / "other.jsonl", reread_trace("other"))
    dest = tmp_path / "r.json"
    rc, out, err = run(["analyse", str(tmp_path), "--jobs", jobs, "--json", str(dest)], capsys)
    assert rc in (EXIT_OK, EXIT_FINDINGS), err
    rep = orjson.loads(dest.read_bytes())
    assert sorted(t["session"] for t in rep["traces"]) == ["live", "other"]
    assert rep["skipped"] == []
    assert f"live.jsonl:{len(lines) + 1}" in out and "cut short" in out


def test_a_session_whose_first_record_is_being_written_is_named_not_fatal(tmp_path, capsys):
    write_jsonl(tmp_path / "done.jsonl", reread_trace("done"))
    first = json.dumps(reread_trace("new")[0].to_dict())
    (tmp_path / "new.jsonl").write_text(first[: len(first) // 2], encoding="utf-8")
    rc, out, err = run(["analyse", str(tmp_path), "--jobs", "1"], capsys)
    assert rc in (EXIT_OK, EXIT_FINDINGS), err
    assert "new.jsonl:1" in out and "cut short" in out


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_session_with_a_lone_surrogate_is_analysed_whole(tmp_path, capsys, jobs):
    """A tool output cut mid-emoji leaves a lone surrogate escape in the session (Claude Code's
    "no low surrogate in string" sessions): the session is analysed, its repeats found, as the
    same session with U+FFFD in place of the half character."""
    reports = {}
    for name, tail in (("cut", "\ud83d"), ("mended", "\ufffd")):
        folder = tmp_path / name
        folder.mkdir()
        steps = reread_trace("s1")
        for s in steps:
            if isinstance(s.result, str):
                s.result += tail
        write_jsonl(folder / "s1.jsonl", steps)
        dest = tmp_path / f"{name}.json"
        rc, out, err = run(["analyse", str(folder), "--jobs", jobs, "--json", str(dest)], capsys)
        assert rc in (EXIT_OK, EXIT_FINDINGS), err
        reports[name] = orjson.loads(dest.read_bytes())
    assert "\\ud83d" in (tmp_path / "cut" / "s1.jsonl").read_text()
    cut, mended = reports["cut"], reports["mended"]
    assert cut["skipped"] == [] and cut["overall"] == mended["overall"]
    assert cut["overall"]["wasted_tokens"] > 0
