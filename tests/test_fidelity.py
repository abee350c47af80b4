"""The burn analysis against the project's own labels on ../shared/traces (docs/fidelity.md).

Every labelled case and loop of tests/labels/shared_traces.json is one test, run on both twins:
a step labelled waste is charged with its labelled kind, a step labelled not waste is not
charged, a labelled loop is found. Labels the analysis gets wrong today carry
``known_wrong_today`` and run as strict xfails: each is still run and reported, and a fix turns
it into an XPASS failure until the mark is removed (``python benchmarks/bench_fidelity.py
--write-known-wrong`` rewrites the marks from a run). The matching itself (coordinates, kinds,
precision and recall) lives in benchmarks/bench_fidelity.py, which this module loads.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
_SPEC = importlib.util.spec_from_file_location(
    "bench_fidelity", ROOT / "benchmarks" / "bench_fidelity.py"
)
fidelity = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = fidelity
_SPEC.loader.exec_module(fidelity)

LABELS = fidelity.load_labels()
KNOWN_WRONG = "the analysis gets this label wrong today (known_wrong_today in tests/labels/shared_traces.json)"


def _params(labels: list[dict]) -> list:
    return [
        pytest.param(
            d,
            id=d["id"],
            marks=[pytest.mark.xfail(strict=True, reason=KNOWN_WRONG)]
            if d.get("known_wrong_today")
            else [],
        )
        for d in labels
    ]


@pytest.fixture(scope="session")
def traces_dir() -> pathlib.Path:
    path = pathlib.Path(fidelity.DEFAULT_TRACES)
    if not path.is_dir():
        pytest.skip(
            f"real traces not found at {path} (../shared/traces beside the checkout, or "
            "LOOPCORE_SHARED_TRACES); the labels describe those files"
        )
    return path


@pytest.fixture(scope="session")
def loaded(traces_dir):
    from loopcore.adapters import load

    return list(load(str(traces_dir)))


@pytest.fixture(scope="session")
def run(impl, loaded, traces_dir):
    return fidelity.run_analysis(
        str(traces_dir), impl.name, fidelity.labelled_traces(LABELS), loaded
    )


def _describe(label: dict) -> str:
    where = label.get("at") or label["charged"]
    session = f" {label['session']}" if label.get("session") else ""
    return f"{label['id']} {label['file']}{session} {where}: {label['reason']}"


@pytest.mark.traces
@pytest.mark.parametrize("case", _params(LABELS["cases"]))
def test_labelled_step(run, case):
    right, what = fidelity.judge_case(run, case)
    expected = (
        case["verdict"]
        if case["verdict"] == "not_waste"
        else "/".join(fidelity.accepted_kinds(case))
    )
    assert right, f"labelled {expected}, {what} -- {_describe(case)}"


@pytest.mark.traces
@pytest.mark.parametrize("loop", _params(LABELS["loops"]))
def test_labelled_loop_found(run, loop):
    found, _ = fidelity.judge_loop(run, loop)
    assert found, f"loop not found ({'/'.join(fidelity.accepted_kinds(loop))}) -- {_describe(loop)}"


def test_label_file_is_a_usable_evaluation():
    """At least 100 labelled steps of both verdicts, each with a reason, and some loops."""
    cases = LABELS["cases"]
    assert len(cases) >= 100
    assert {c["verdict"] for c in cases} == {"waste", "not_waste"}
    assert all(d["reason"].strip() for d in cases + LABELS["loops"])
    assert LABELS["loops"] and all(
        set(map(json.dumps, lp["charged"])) <= set(map(json.dumps, lp["steps"]))
        for lp in LABELS["loops"]
    )


def _messages(traces_dir: pathlib.Path, label: dict) -> list:
    with gzip.open(traces_dir / label["file"], "rt", encoding="utf-8") as f:
        doc = json.load(f)
    if isinstance(doc, list):
        return next(
            e["traj"] for e in doc if f"task-{e['task_id']}/trial-{e['trial']}" == label["session"]
        )
    return doc["messages"] if "messages" in doc else doc["history"]


@pytest.mark.traces
def test_every_coordinate_names_a_turn_of_its_trace(traces_dir):
    """Each labelled coordinate is a model turn of that trace (or, for a rejected turn whose
    reply the trace does not keep, the harness's error message)."""
    cache: dict = {}
    for d in LABELS["cases"] + LABELS["loops"]:
        key = (d["file"], d.get("session"))
        if key not in cache:
            cache[key] = _messages(traces_dir, d)
        messages = cache[key]
        coords = [d["at"]] if "at" in d else d["steps"]
        for coord in coords + ([d["of"]] if "of" in d else []):
            m = messages[coord["message"]]
            assert m["role"] == "assistant" or d.get("kind") == "rejected_action", (d["id"], coord)


@pytest.mark.traces
def test_coordinates_cover_every_step(loaded, traces_dir):
    """Every step of every trace gets a coordinate (Step.ref, or the rebuilt one)."""
    docs: dict = {}
    for trace in loaded:
        refs = fidelity.trace_refs(trace, docs)
        assert len(refs) == len(trace.steps) and all(r is not None for r in refs), trace.source


def test_matching_rules_on_a_made_up_run():
    """The judging itself, without the traces: coordinates match on the label's keys, a waste
    label needs one of its kinds, a not-waste label no charge at all, a loop one charged step."""
    Charge = fidelity.Charge
    run = fidelity.Run(
        "py",
        charges={
            ("a.json", None): [
                Charge("duplicate_call", {"message": 4, "file": "a.json"}, {"message": 2}),
                Charge("oscillation", {"message": 9}, {"message": 5}),
            ],
        },
    )
    waste = {
        "id": "x1",
        "file": "a.json",
        "at": {"message": 4},
        "verdict": "waste",
        "kind": ["redundant_observation", "duplicate_call"],
        "reason": "r",
    }
    wrong_kind = dict(waste, id="x2", kind="redundant_observation")
    clean = {
        "id": "x3",
        "file": "a.json",
        "at": {"message": 6},
        "verdict": "not_waste",
        "reason": "r",
    }
    charged = dict(clean, id="x4", at={"message": 9})
    other_trace = dict(waste, id="x5", file="b.json")
    assert fidelity.judge_case(run, waste) == (True, "charged as duplicate_call")
    assert fidelity.judge_case(run, wrong_kind) == (False, "charged as duplicate_call")
    assert fidelity.judge_case(run, clean) == (True, "not charged")
    assert fidelity.judge_case(run, charged) == (False, "charged as oscillation")
    assert fidelity.judge_case(run, other_trace) == (False, "not charged")
    loop = {
        "id": "l1",
        "file": "a.json",
        "kind": "oscillation",
        "steps": [{"message": 5}, {"message": 9}],
        "charged": [{"message": 9}, {"message": 11}],
        "reason": "r",
    }
    assert fidelity.judge_loop(run, loop) == (True, 1)
    assert fidelity.judge_loop(run, dict(loop, kind="duplicate_call")) == (False, 0)
    s = fidelity.score(
        run, {"cases": [waste, wrong_kind, clean, charged, other_trace], "loops": [loop]}
    )
    # charged labelled steps: x1, x2 (waste) and x4 (not waste) -> precision 2/3
    assert (s.charged_labelled, s.charged_waste, s.precision) == (3, 2, 2 / 3)
    assert (s.loops, s.loops_found, s.recall) == (1, 1, 1.0)
    assert [ident for ident, _ in s.wrong] == ["x2", "x4", "x5"]
