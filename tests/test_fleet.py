"""Parallel analysis: local processes (--jobs) and a Dask cluster give the one-process report.

The Dask tests use a real ``distributed.LocalCluster`` of two worker processes; one of them
kills a worker in the middle of the run and checks that nothing is lost or counted twice.
"""

from __future__ import annotations

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

    monkeypatch.setattr(fleet, "_on_processes", refuse)
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
