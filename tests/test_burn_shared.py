"""The burn analysis over the real traces in ../shared/traces (read in place, never copied)."""

from __future__ import annotations

import pytest

from loopcore import BurnReport, load
from loopcore.burn import analyse_burn

pytestmark = pytest.mark.traces


@pytest.fixture(scope="module")
def real(shared_traces):
    traces = list(load(shared_traces))
    assert traces
    return traces, [analyse_burn(t) for t in traces]


def test_kernels_equal_the_reference_on_real_traces(impl, real):
    traces, reports = real
    assert impl.analyse_many(traces) == reports


def test_real_reports_are_sane(real):
    traces, reports = real
    for t, r in zip(traces, reports):
        assert 0 <= r.wasted_tokens <= r.total_tokens == t.total_tokens
        assert r.steps == len(t) and r.tokens_estimated == t.tokens_estimated
        for f in r.findings:
            assert max(f.steps) < len(t) and len(f.refs) == len(f.steps)
            if f.kind == "rejected_action":
                assert f.of_step is None and all(t.steps[i].rejected for i in f.steps)
            elif f.kind == "degenerate_output":
                assert f.steps == (f.of_step,)
            else:
                assert f.of_step < min(f.steps) and f.of_ref == t.steps[f.of_step].ref
    overall = BurnReport.combine(reports)
    assert overall.traces == len(traces)
    assert overall.wasted_tokens == sum(v["tokens"] for v in overall.by_kind.values())
