"""Stored columns: ``analyse --parquet DIR`` writes a store, ``analyse DIR`` re-analyses it.

Round trips give byte-identical JSON reports (generated corpus, the real traces, both twins);
a second run appends without touching the first; foreign, corrupt or other-schema folders are
refused with a clear error.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("pyarrow")

from conftest import package_env  # noqa: E402

from loopcore import store  # noqa: E402
from loopcore.cli import main  # noqa: E402
from loopcore.report import collect, to_json  # noqa: E402
from loopcore.trace import Step, Trace  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from make_corpus import write_corpus  # noqa: E402


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("corpus")
    write_corpus(out, 4000, seed=5, per_file_jsonl=7)
    return out


@pytest.fixture(scope="module")
def corpus_json(corpus) -> bytes:
    return to_json(collect([str(corpus)]))


def _digest(folder: pathlib.Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_round_trip_gives_the_same_json_report_on_either_twin(corpus, corpus_json, tmp_path, impl):
    root = tmp_path / "store"
    written = store.collect_to_store([str(corpus)], root, _impl=impl.name, part_steps=1500)
    assert to_json(written) == corpus_json
    run = json.loads(next((root / "runs").iterdir()).read_text())
    assert len(run["parts"]) > 1  # several parts, each a self-contained encoding
    again = store.analyse_store(root, _impl=impl.name)
    assert to_json(again) == corpus_json
    assert again.steps == written.steps > 3000
    assert any(t.report.findings for t in again.traces)


def test_round_trip_over_the_real_traces(shared_traces, tmp_path, impl):
    expected = to_json(collect([str(shared_traces)], keep_going=True))
    root = tmp_path / "store"
    store.collect_to_store([str(shared_traces)], root, keep_going=True, _impl=impl.name)
    assert to_json(store.analyse_store(root, _impl=impl.name)) == expected


def test_cli_writes_a_store_and_reanalyses_it_byte_for_byte(corpus, tmp_path, capsys):
    root, a, b = tmp_path / "store", tmp_path / "a.json", tmp_path / "b.json"
    assert main(["analyse", str(corpus), "--parquet", str(root), "--json", str(a)]) == 0
    assert store.is_store(root)
    assert main(["analyse", str(root), "--json", str(b)]) == 0
    assert a.read_bytes() == b.read_bytes()
    # the table shows the same too
    capsys.readouterr()
    main(["analyse", str(corpus), "--no-progress"])
    direct = capsys.readouterr().out
    main(["analyse", str(root)])
    assert capsys.readouterr().out == direct


def test_steps_carry_refs_raw_targets_and_the_original_charges(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")

    def read(turn: int, target, result: str, tokens: int) -> Step:
        return Step(
            session="s1",
            turn=turn,
            kind="observe",
            name="read",
            target=target,
            args={"t": str(target)},
            result=result,
            tokens_in=tokens,
        )

    steps = [
        read(0, ("b.py", "a.py"), "x" * 50, 10),
        read(1, ("b.py", "a.py"), "x" * 50, 10),
        read(2, "c.py", "y", 3),
        read(3, "c.py", "y", 3),
    ]
    for i, s in enumerate(steps):
        try:
            s.ref = {"line": i + 1}
        except AttributeError:  # a Step without refs: the column stays null
            pass
    trace = Trace(steps, session="s1", source="t.jsonl", format="loopcore")
    enc_report = store.analyse_columns  # the public in-memory twin of re-analysis
    from loopcore.encoded import encode

    enc = encode([trace])
    refs, raw = store.step_side(enc, [trace])
    assert raw[0] == json.dumps(["b.py", "a.py"], separators=(",", ":")) and raw[2] is None
    mem = enc_report(enc, store.trace_meta([trace], ["t.jsonl"]), store._Side(refs, raw))
    f = mem[0].report.findings
    assert [x.target for x in f] == [("b.py", "a.py"), "c.py"]
    root = tmp_path / "s"
    store.write_encoded(
        str(root),
        enc,
        store.trace_meta([trace], ["t.jsonl"]),
        [mem[0].report],
        refs=refs,
        target_raw=raw,
        run="r1",
        date="2026-01-02",
        part=0,
    )
    table = pq.read_table(next((root / "steps" / "date=2026-01-02").iterdir()))
    assert table.column("step").to_pylist() == [0, 1, 2, 3]
    assert table.num_rows == 4
    if getattr(steps[0], "ref", None) is not None:
        assert [json.loads(r) for r in table.column("ref").to_pylist()] == [
            {"line": i + 1} for i in range(4)
        ]


def test_a_second_run_appends_without_rewriting_the_first(corpus, tmp_path, impl):
    other = tmp_path / "other"
    write_corpus(other, 800, seed=11, per_file_jsonl=3)
    root = tmp_path / "store"
    first = store.collect_to_store([str(corpus)], root, date="2026-03-01", _impl=impl.name)
    before = _digest(root)
    second = store.collect_to_store([str(other)], root, date="2026-03-02", _impl=impl.name)
    after = _digest(root)
    assert {k: v for k, v in after.items() if k in before} == before  # nothing rewritten
    assert any("date=2026-03-02" in k for k in after) and any("date=2026-03-01" in k for k in after)
    both = store.analyse_store(root, _impl=impl.name)
    assert [t.to_dict() for t in both.traces] == [t.to_dict() for t in first.traces + second.traces]
    assert both.inputs == [str(corpus), str(other)]
    assert both.files == first.files + second.files
    assert both.overall.wasted_tokens == first.overall.wasted_tokens + second.overall.wasted_tokens
    totals = store.reanalyse_totals(root, _impl=impl.name)
    assert (totals.traces, totals.steps, totals.wasted_tokens) == (
        len(both.traces),
        both.steps,
        both.overall.wasted_tokens,
    )


def test_an_unfinished_run_is_not_part_of_the_store(corpus, tmp_path):
    root = tmp_path / "store"
    store.collect_to_store([str(corpus)], root, date="2026-03-01")
    expected = to_json(store.analyse_store(root))
    # parts written by a run that never wrote its record (killed mid-way) are ignored
    part = next((root / "steps" / "date=2026-03-01").iterdir())
    (part.parent / ("X" + part.name)).write_bytes(part.read_bytes())
    assert to_json(store.analyse_store(root)) == expected


def test_foreign_corrupt_and_other_schema_folders_are_refused(corpus, tmp_path, capsys):
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(store.StoreError, match="neither empty nor a loopcore store"):
        store.collect_to_store([str(corpus)], foreign)
    assert main(["analyse", str(corpus), "--parquet", str(foreign)]) == 2
    assert "refusing to write" in capsys.readouterr().err
    assert sorted(os.listdir(foreign)) == ["notes.txt"]

    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / store.MARKER).write_text("{not json")
    with pytest.raises(store.StoreError, match="not a loopcore store"):
        store.analyse_store(bad)
    (bad / store.MARKER).write_text(json.dumps({"format": "something-else", "schema": 1}))
    with pytest.raises(store.StoreError, match="not a loopcore store"):
        store.analyse_store(bad)
    (bad / store.MARKER).write_text(json.dumps({"format": "loopcore-store", "schema": 99}))
    with pytest.raises(store.StoreError, match="schema 99"):
        store.analyse_store(bad)
    assert main(["analyse", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "schema 99" in err and "Traceback" not in err
    with pytest.raises(store.StoreError, match="schema 99"):
        store.collect_to_store([str(corpus)], bad)
    (bad / store.MARKER).write_text(
        json.dumps({"format": "loopcore-store", "schema": store.STORE_SCHEMA})
    )
    with pytest.raises(store.StoreError, match="without any complete run"):
        store.analyse_store(bad)


def test_damaged_parts_and_records_give_a_clear_error(corpus, tmp_path, capsys):
    root = tmp_path / "store"
    store.collect_to_store([str(corpus)], root)
    part = next((root / "steps").rglob("*.parquet"))
    data = part.read_bytes()
    part.write_bytes(data[: len(data) // 2])
    with pytest.raises(store.StoreError, match="damaged: cannot read steps/"):
        store.analyse_store(root)
    assert main(["analyse", str(root)]) == 2
    assert "is damaged" in capsys.readouterr().err
    part.unlink()
    with pytest.raises(store.StoreError, match="missing"):
        store.analyse_store(root)
    part.write_bytes(data)
    record = next((root / "runs").iterdir())
    run = json.loads(record.read_text())
    run["encoding"] = [["kind", "|u1"]]
    record.write_text(json.dumps(run))
    with pytest.raises(store.StoreError, match="other step columns"):
        store.analyse_store(root)
    run["schema"] = 0
    record.write_text(json.dumps(run))
    with pytest.raises(store.StoreError, match="schema"):
        store.analyse_store(root)
    record.write_text("[")
    with pytest.raises(store.StoreError, match="cannot read the run record"):
        store.analyse_store(root)


def test_parquet_cannot_take_a_store_as_input_or_a_scheduler(corpus, tmp_path, capsys):
    root = tmp_path / "store"
    store.collect_to_store([str(corpus)], root)
    assert main(["analyse", str(root), "--parquet", str(tmp_path / "x")]) == 2
    assert "already one" in capsys.readouterr().err
    assert (
        main(
            [
                "analyse",
                str(corpus),
                "--parquet",
                str(tmp_path / "y"),
                "--scheduler",
                "tcp://127.0.0.1:1",
            ]
        )
        == 2
    )
    assert "--scheduler" in capsys.readouterr().err


def test_kernel_columns_are_step_columns_of_the_encoding():
    cols = store.kernel_columns()
    names = [n for n, _ in store._step_columns()]
    assert cols and set(cols) <= set(names)
    assert {"kind", "tokens", "call"} <= set(cols)


def test_import_loopcore_does_not_import_pyarrow():
    code = "import sys, loopcore, loopcore.cli; print('pyarrow' in sys.modules, 'duckdb' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], env=package_env(), capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["False", "False"]


def _todo_trace(path: pathlib.Path, writes: int) -> None:
    lines = []
    for i in range(writes):
        todos = [
            {"content": f"task {j}", "status": "completed" if j < i % 7 else "pending"}
            for j in range(7)
        ]
        lines.append(
            {
                "session": "todo-heavy",
                "turn": i,
                "kind": "mutate",
                "name": "TodoWrite",
                "target": "todos",
                "args": {"todos": todos},
                "result": "ok",
                "tokens_in": 30,
                "tokens_out": 40,
            }
        )
        lines.append(
            {
                "session": "todo-heavy",
                "turn": i,
                "kind": "observe",
                "name": "Read",
                "target": "a.py",
                "args": {"path": "a.py"},
                "result": "text",
                "tokens_in": 5,
                "tokens_out": 5,
            }
        )
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_the_documented_duckdb_queries_run(corpus, tmp_path):
    duckdb = pytest.importorskip("duckdb")
    todo = tmp_path / "todo" / "todo.jsonl"
    todo.parent.mkdir()
    _todo_trace(todo, 60)
    root = tmp_path / "store"
    day1 = store.collect_to_store([str(corpus)], root, date="2026-04-01")
    day2 = store.collect_to_store([str(todo), str(corpus)], root, date="2026-04-02")
    queries = _doc_queries()
    assert set(queries) == {"top wasting tools", "sessions over 50 todo writes", "waste by day"}
    con = duckdb.connect()
    results = {
        name: con.execute(sql.replace("STORE", str(root))).fetchall()
        for name, sql in queries.items()
    }
    by_day = {str(row[0]): row[1] for row in results["waste by day"]}
    assert by_day == {
        "2026-04-01": day1.overall.wasted_tokens,
        "2026-04-02": day2.overall.wasted_tokens,
    }
    assert results["sessions over 50 todo writes"] == [("todo-heavy", str(todo), 60)]
    top = results["top wasting tools"]
    wasted = {}
    for r in (day1, day2):
        for t in r.traces:
            for f in t.report.findings:
                wasted[f.name] = wasted.get(f.name, 0) + f.tokens
    assert [row[:2] for row in top] == sorted(wasted.items(), key=lambda kv: (-kv[1], kv[0]))[:10]


def _doc_queries() -> dict[str, str]:
    """The ```sql blocks of docs/store.md, keyed by the heading line (``-- name``) each starts with."""
    text = (ROOT / "docs" / "store.md").read_text()
    out = {}
    for block in text.split("```sql")[1:]:
        sql = block.split("```", 1)[0].strip()
        first, _, rest = sql.partition("\n")
        if first.startswith("-- "):
            out[first[3:].strip()] = rest
    return out


def test_the_run_settings_are_kept_for_the_reanalysis(corpus, tmp_path):
    from loopcore.burn import BurnSettings

    if "charge_turn_output" not in BurnSettings.__dataclass_fields__:
        pytest.skip("this analysis has no turn-output setting")
    root, a, b = tmp_path / "store", tmp_path / "a.json", tmp_path / "b.json"
    assert (
        main(
            [
                "analyse",
                str(corpus),
                "--charge-turn-output",
                "--parquet",
                str(root),
                "--json",
                str(a),
            ]
        )
        == 0
    )
    assert main(["analyse", str(root), "--json", str(b)]) == 0
    assert a.read_bytes() == b.read_bytes()
    assert json.loads(a.read_bytes()) == json.loads(
        to_json(collect([str(corpus)], charge_turn_output=True))
    )


def test_totals_of_many_parts_come_back_in_store_order(corpus, tmp_path):
    # parts are read and analysed a part per core; the per-trace totals keep the store's order
    root = tmp_path / "store"
    written = store.collect_to_store([str(corpus)], root, part_steps=700)
    (run,) = store._runs(str(root))
    assert len(run["parts"]) > 3
    totals = store.reanalyse_totals(root)
    assert totals.trace_total_tokens.tolist() == [t.report.total_tokens for t in written.traces]
    assert totals.trace_wasted_tokens.tolist() == [t.report.wasted_tokens for t in written.traces]
    assert totals.steps == written.steps


def test_a_store_keeps_the_exit_nonzero_bit_and_a_store_without_it_its_report(tmp_path, impl):
    # a flag bit added to the encoding is stored in the flags column as it comes (the same
    # schema): re-analysed, a store gives the report of the run that wrote it. A store written
    # before the bit has it clear on every step, and its columns give the report that run gave
    # (the commit retried after a failed one charged as a redo)
    pq = pytest.importorskip("pyarrow.parquet")
    from test_burn import _HOOK_FAILED, _codex_rollout

    from loopcore.encoded import EXIT_NONZERO, encode

    folder = tmp_path / "traces"
    folder.mkdir()
    calls = [
        ('git commit -m "Add the probe"', 1, _HOOK_FAILED),
        ("git add internal/syncer/syncer.go", 0, ""),
        ('git commit -m "Add the probe"', 0, "[main 77295db] Add the probe"),
    ]
    trace = _codex_rollout(folder / "rollout.jsonl", calls)
    expected = to_json(collect([str(folder)]))
    root = tmp_path / "store"
    assert to_json(store.collect_to_store([str(folder)], root, _impl=impl.name)) == expected
    again = store.analyse_store(root, _impl=impl.name)
    assert to_json(again) == expected and not again.traces[0].report.findings
    (part,) = (root / "steps").rglob("*.parquet")
    flags = pq.read_table(part, columns=["flags"]).column("flags").to_pylist()
    assert [bool(f & EXIT_NONZERO) for f in flags] == [True, False, False]
    enc = encode([trace])
    enc.flags &= np.uint16(0xFFFF & ~EXIT_NONZERO)
    meta = store.trace_meta([trace], [str(folder / "rollout.jsonl")])
    side = store._Side(*store.step_side(enc, [trace]))
    (old,) = store.analyse_columns(enc, meta, side, _impl=impl.name)
    assert [(f.kind, f.steps) for f in old.report.findings] == [("oscillation", (1, 2))]
