"""Parallel analysis: local processes (--jobs) and a Dask cluster give the one-process report.

The Dask tests use a real ``distributed.LocalCluster`` of two worker processes; one of them
kills a worker in the middle of the run and checks that nothing is lost or counted twice.
"""

from __future__ import annotations

import math
import os
import pathlib
import signal
import sys
import threading

import pytest

from loopcore import fleet
from loopcore.report import collect, to_json

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from make_corpus import write_corpus  # noqa: E402


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("corpus")
    write_corpus(out, 6000, seed=3, per_file_jsonl=5)
    return out


@pytest.fixture(scope="module")
def serial_json(corpus) -> bytes:
    return to_json(collect([str(corpus)]))


def _json(report_and_html) -> bytes:
    return to_json(report_and_html[0])


def test_units_follow_load_order(corpus):
    from loopcore import load

    us = fleet.units([str(corpus)])
    assert all(isinstance(u, fleet.Unit) for u in us)
    assert [u.item for u in us] == sorted(
        (u.item for u in us), key=lambda p: (os.path.dirname(p), os.path.basename(p))
    )
    assert sum(len(list(load(u.item))) for u in us) == len(list(load(str(corpus))))


def test_processes_give_the_one_process_report(corpus, serial_json):
    assert _json(fleet.analyse([str(corpus)], jobs=2)) == serial_json


def test_small_inputs_stay_in_one_process(corpus, monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("a small input must not start workers")

    monkeypatch.setattr(fleet, "_Runner", refuse)
    one = next(p for p in corpus.rglob("*.traj.json"))
    fleet.analyse([str(one)])  # jobs=None: below PARALLEL_MIN_BYTES, one process


def test_bad_inputs_are_skipped_in_order_and_counted(corpus, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"name": "x"}\n{not json\n')
    garbage = tmp_path / "garbage.json"
    garbage.write_text("[[[")
    paths = [str(corpus), str(bad), str(tmp_path / "missing.jsonl"), str(garbage)]
    serial = to_json(collect(paths, keep_going=True))
    assert _json(fleet.analyse(paths, jobs=2, keep_going=True)) == serial
    from loopcore.adapters import TraceFormatError

    with pytest.raises(TraceFormatError):
        fleet.analyse([str(corpus), str(garbage)], jobs=2)


def test_cli_jobs_are_byte_identical(corpus, tmp_path):
    from loopcore.cli import main

    outs = []
    for j in ("1", "2"):
        dest = tmp_path / f"r{j}.json"
        assert main(["analyse", str(corpus), "--jobs", j, "--json", str(dest)]) == 0
        outs.append(dest.read_bytes())
    assert outs[0] == outs[1]


def test_cli_jobs_with_html(corpus, tmp_path):
    from loopcore.cli import main

    pages = []
    for j in ("1", "2"):
        dest = tmp_path / f"r{j}.html"
        assert main(["analyse", str(corpus), "--jobs", j, "--html", str(dest)]) == 0
        pages.append(dest.read_text(encoding="utf-8"))
    assert pages[0] == pages[1]


def test_shared_traces_on_two_processes(shared_traces):
    paths = [str(shared_traces)]
    assert _json(fleet.analyse(paths, jobs=2)) == to_json(collect(paths))


# ------------------------------------------------------------------------------------- Dask


@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip(
        "distributed", reason="Dask is not installed: pip install 'loopcore[fleet]'"
    )
    import logging

    # Worker deaths below are on purpose; keep the nanny's complaints out of the test log.
    for name in ("distributed", "distributed.nanny", "distributed.scheduler", "distributed.worker"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    import dask

    # A loaded machine (CI shares its cores) can take many seconds to start two worker processes.
    with dask.config.set(
        {"distributed.comm.timeouts.connect": "120s", "distributed.comm.timeouts.tcp": "120s"}
    ):
        with distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",
            silence_logs=logging.CRITICAL,
            timeout="120s",
        ) as lc:
            with distributed.Client(lc, timeout="120s") as client:
                client.wait_for_workers(2, timeout=180)
                yield lc, client


def test_dask_gives_the_one_process_report(cluster, corpus, serial_json):
    _, client = cluster
    assert _json(fleet.analyse([str(corpus)], client=client)) == serial_json


def test_dask_scheduler_address(cluster, corpus, serial_json):
    lc, _ = cluster
    assert _json(fleet.analyse([str(corpus)], scheduler=lc.scheduler_address)) == serial_json


def test_dask_keep_going(cluster, corpus, tmp_path):
    _, client = cluster
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    paths = [str(bad), str(corpus)]
    assert _json(fleet.analyse(paths, client=client, keep_going=True)) == to_json(
        collect(paths, keep_going=True)
    )


def test_dask_result_fetch_that_never_answers_is_asked_again(
    cluster, corpus, serial_json, monkeypatch
):
    """A fetch of a finished task's result whose reply never comes (seen on a loaded machine:
    the request's read waiting forever, scheduler and worker idle) is abandoned after
    FETCH_TIMEOUT and asked for again: the run ends with the same report instead of hanging."""
    import distributed

    _, client = cluster
    real = distributed.Future.result
    lost: set[str] = set()

    def first_fetch_lost(self, timeout=None):
        if self.key not in lost:  # this key's first fetch: its reply never arrives
            lost.add(self.key)
            raise TimeoutError(f"timed out after {timeout} s.")
        return real(self, timeout=timeout)

    monkeypatch.setattr(distributed.Future, "result", first_fetch_lost)
    assert _json(fleet.analyse([str(corpus)], client=client)) == serial_json
    assert lost  # every task's result was fetched twice

    def never(self, timeout=None):
        raise TimeoutError(f"timed out after {timeout} s.")

    monkeypatch.setattr(distributed.Future, "result", never)
    with pytest.raises(TimeoutError, match=f"{fleet.FETCH_ATTEMPTS} tries"):
        fleet.analyse([str(corpus)], client=client)


def test_dask_worker_killed_mid_run(cluster, corpus, serial_json):
    _, client = cluster
    pids = client.run(os.getpid)  # {worker address: pid}
    victim = sorted(pids.values())[0]
    killed = threading.Event()

    def on_unit(_done):
        # After the first unit comes back, kill one worker while the rest are queued or running.
        if not killed.is_set():
            killed.set()
            os.kill(victim, signal.SIGKILL)

    got = _json(fleet.analyse([str(corpus)], client=client, on_unit=on_unit))
    assert killed.is_set()
    assert got == serial_json  # every unit exactly once, though a worker died under some
    client.wait_for_workers(2, timeout=180)  # the nanny brought it back; later tests keep two


def test_cli_scheduler_without_dask_is_a_clean_error(monkeypatch, capsys, corpus):
    import builtins

    real = builtins.__import__

    def no_dask(name, *a, **k):
        if name == "distributed" or name.startswith("distributed."):
            raise ImportError("No module named 'distributed'")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_dask)
    from loopcore.cli import main

    assert main(["analyse", str(corpus), "--scheduler", "tcp://127.0.0.1:1"]) == 2
    assert "pip install 'loopcore[fleet]'" in capsys.readouterr().err


# ------------------------------------------------------------------------- byte ranges


def _steps_file(path: pathlib.Path, sessions: list[tuple[str | None, int]], **extra) -> None:
    """A loopcore JSONL file: *sessions* as (session or None, steps), one after another."""
    import json

    lines = []
    for k, (sid, n) in enumerate(sessions):
        for i in range(n):
            f = f"src/m{(i * 7 + k) % 5}.py"
            rec = {"name": "bash", "args": {"command": f"cat {f}"}, "result": f"body of {f}"}
            if sid is not None:
                rec["session"] = sid
            rec["tokens_in"], rec["tokens_out"] = 40 + i % 3, 12
            lines.append(json.dumps(rec))
            if extra.get("blank_every") and i % extra["blank_every"] == 0:
                lines.append("")
    if extra.get("explicit_refs"):
        lines = [ln[:-1] + f', "ref": {{"line": {900 + j}}}}}' for j, ln in enumerate(lines) if ln]
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def ranged(tmp_path_factory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("ranged")
    _steps_file(out / "a.jsonl", [(f"s{k}", 3 + (k * 5) % 17) for k in range(60)])
    # one session longer than many ranges, blank lines between steps
    _steps_file(out / "b.jsonl", [("first", 5), ("long", 400), ("last", 9)], blank_every=7)
    _steps_file(out / "c.jsonl", [(None, 300)])  # no session field: one trace, the file's name
    _steps_file(out / "d.jsonl", [(f"t{k}", 11) for k in range(30)], explicit_refs=True)
    return out


def _in_process(path: str, range_bytes: int):
    """Every range of *path* analysed on its own, in this process; the pieces."""
    unit = fleet.units([path])[0]
    (pieces,) = fleet.plan([unit], "auto", range_bytes)
    before = 0
    for r in pieces:
        r.line = before
        before += fleet._count_newlines(r.path, r.start, r.end)
    return pieces, [fleet._analyse_range(r, "auto", False) for r in pieces]


@pytest.mark.parametrize("name", ["a.jsonl", "b.jsonl", "c.jsonl", "d.jsonl"])
@pytest.mark.parametrize("range_bytes", [700, 4096])
def test_ranges_stand_alone_and_give_the_whole_file_report(ranged, name, range_bytes):
    path = str(ranged / name)
    pieces, got = _in_process(path, range_bytes)
    assert len(pieces) > 2 and all(isinstance(p, fleet.Range) for p in pieces)
    assert fleet._ranges_hold(got)  # no range gave up: the file was really cut
    res = fleet._unit_result(got, path)
    want = collect([path])
    assert [t.to_dict() for t in res.results] == [t.to_dict() for t in want.traces]
    # every step was read by exactly one range
    assert sum(p.steps for p in got) == want.steps


def test_interleaved_sessions_fall_back_to_the_whole_file(ranged, tmp_path):
    import json

    p = tmp_path / "mixed.jsonl"
    recs = [
        {
            "session": f"s{i % 3}",
            "name": "bash",
            "args": {"command": f"cat f{i % 4}"},
            "result": "x",
        }
        for i in range(400)
    ]
    p.write_text("".join(json.dumps(r) + "\n" for r in recs))
    _, got = _in_process(str(p), 2048)
    assert not fleet._ranges_hold(got)  # the same session came back in a later range
    assert _json(fleet.analyse([str(p)], jobs=2, range_bytes=2048)) == to_json(collect([str(p)]))


def test_a_bad_line_falls_back_and_is_reported_as_one_process_does(ranged, tmp_path):
    p = tmp_path / "bad.jsonl"
    text = (ranged / "a.jsonl").read_text().splitlines()
    text[len(text) // 2] = "{not json"
    p.write_text("\n".join(text) + "\n")
    _, got = _in_process(str(p), 2048)
    assert any(g.irregular for g in got)
    paths = [str(p), str(ranged / "b.jsonl")]
    assert _json(fleet.analyse(paths, jobs=2, keep_going=True, range_bytes=2048)) == to_json(
        collect(paths, keep_going=True)
    )
    from loopcore.adapters import TraceFormatError

    with pytest.raises(TraceFormatError) as err:
        fleet.analyse(paths, jobs=2, range_bytes=2048)
    with pytest.raises(TraceFormatError) as one:
        collect(paths)
    assert str(err.value) == str(one.value)


def test_ranges_on_processes(ranged):
    paths = [str(ranged)]
    assert _json(fleet.analyse(paths, jobs=2, range_bytes=1024)) == to_json(collect(paths))


def test_ranges_on_dask(cluster, ranged, corpus):
    _, client = cluster
    paths = [str(ranged), str(corpus)]
    assert _json(fleet.analyse(paths, client=client, range_bytes=1024)) == to_json(collect(paths))


# ---------------------------------------------------------------------------------- packing


@pytest.mark.parametrize("workers", [1, 2, 7])
@pytest.mark.parametrize("corpus_mb", [400, 20_000])
def test_tasks_cover_every_piece_once_largest_first_and_shrink(workers, corpus_mb):
    import random

    rng = random.Random(workers)
    sizes = [rng.choice([4 << 20, 16 << 20]) for _ in range(9)]
    sizes += [rng.randrange(1, 200_000) for _ in range(3000)]
    while sum(sizes) < corpus_mb << 20:  # a large corpus: the size cap decides, not the share
        sizes += [rng.choice([16 << 20, 5 << 20])] + [rng.randrange(1, 200_000) for _ in range(50)]
    tasks = fleet._tasks(list(range(len(sizes))), sizes, workers, fleet.TASK_BYTES)
    assert sorted(i for t in tasks for i in t) == list(range(len(sizes)))
    weight = [sum(sizes[i] for i in t) for t in tasks]
    assert max(weight) <= max(fleet.TASK_BYTES, max(sizes))
    # handed out in this order: large tasks first, the small ones last (the workers finish
    # together), and few of them (each costs the scheduler and the client)
    assert weight[0] >= weight[-1]
    assert max(weight[len(weight) // 2 :]) <= max(weight[: len(weight) // 2])
    # none but the last is under half the floor (a task closes only when the next, smaller,
    # piece would overfill it)
    share_of_all = min(fleet.TASK_BYTES, sum(sizes) // workers)
    floor = max(fleet._MIN_TASK_BYTES, share_of_all // fleet.TAIL_TASKS)
    assert all(w > floor // 2 for w in weight[:-1])
    # each task takes at least a quarter of a worker's share of what is left: geometric
    share = 2 * workers * fleet.TASK_SHARE
    bound = share * (math.log(fleet.TAIL_TASKS / fleet.TASK_SHARE) + 1)
    assert len(tasks) <= math.ceil(bound) + 2 * sum(sizes) // fleet.TASK_BYTES + 1
    # the largest piece goes in the first task
    assert sizes.index(max(sizes)) in tasks[0]


def test_tasks_of_one_piece_and_of_none():
    assert fleet._tasks([], [], 2, fleet.TASK_BYTES) == []
    assert fleet._tasks(["x"], [10], 2, fleet.TASK_BYTES) == [[0]]


def test_packed_task_results_read_back_as_the_results(corpus, ranged):
    units = [u for u in fleet.units([str(corpus), str(ranged)]) if isinstance(u, fleet.Unit)]
    task = units[:5] + units[-2:]
    blob = fleet._run_task_packed(task, "auto", False, None)
    assert isinstance(blob, bytes)
    got, want = fleet._unpack_task(blob), fleet._run_task(task, "auto", False, None)
    assert len(got) == len(want) == len(task)
    for g, w in zip(got, want):
        assert g.packed == w.packed and g.seen == w.seen and g.steps == w.steps
        r1 = fleet._unit_result([g], None).results
        r2 = fleet._unit_result([w], None).results
        assert [t.to_dict() for t in r1] == [t.to_dict() for t in r2]
