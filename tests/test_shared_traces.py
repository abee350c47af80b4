"""Every real trace in ../shared/traces loads, pairs completely and analyses within bounds.

The files are read in place through the ``shared_traces`` fixture (skipped when absent); the
counts asserted here are the ones ../shared/traces/README.md documents for that snapshot.
"""

from __future__ import annotations

import collections
import gzip

import orjson
import pytest

from loopcore.adapters import LoadStats, load

pytestmark = pytest.mark.traces


@pytest.fixture(scope="module")
def loaded(shared_traces):
    stats = LoadStats()
    traces = list(load(shared_traces, stats=stats))
    return traces, stats


def test_every_file_loads(loaded, shared_traces):
    traces, stats = loaded
    assert stats.errors == [] and stats.skipped_lines == 0 and stats.skipped_files == 0
    # preds.json (patches, not trajectories) is the only JSON that is not a trace
    assert sorted(p.rsplit("/", 1)[-1] for p in stats.ignored) == ["preds.json.gz", "preds.json.gz"]
    assert stats.formats == {"mini-swe-agent": 99 + 15 + 8, "swe-agent": 19, "tau-bench": 200}
    assert all(t.meta["skipped"] == 0 for t in traces)


def test_call_counts_match_the_readme(loaded):
    traces, _ = loaded
    calls = collections.Counter()
    for t in traces:
        # the tool calls that ran (turns that ran nothing are steps too: replies, rejected actions)
        calls[t.format] += sum(1 for s in t if s.name and s.rejected is None)
    assert calls == {"mini-swe-agent": 7924 + 655 + 318, "tau-bench": 1164, "swe-agent": 209}


def test_pairing_is_complete(loaded):
    """Every call has its result, except the 15 text-format SWE-agent submits, which have no
    observation in history; mini-swe-agent's submit is answered by the final exit message."""
    traces, _ = loaded
    unanswered = collections.Counter()
    for t in traces:
        assert t.meta.get("orphan_results", 0) == 0, t.source
        unanswered[t.format] += t.meta["unanswered"]
        for s in t.steps:
            if s.result is None and s.meta.get("final") is None and s.name and s.rejected is None:
                assert t.format == "swe-agent" and s.name == "submit", (t.source, s)
        finals = [i for i, s in enumerate(t.steps) if s.meta.get("final")]
        calls = [i for i, s in enumerate(t.steps) if s.name and s.rejected is None]
        assert finals in ([], calls[-1:]), t.source
    assert +unanswered == {"swe-agent": 15}


def test_tau_bench_reused_ids_pair_with_the_adjacent_message(shared_traces):
    path = next(shared_traces.glob("tau-bench/**/*.json.gz"))
    raw = orjson.loads(gzip.decompress(path.read_bytes()))
    traces = list(load(path))
    assert len(traces) == len(raw) == 200
    for entry, trace in zip(raw, traces):
        expected = [(m["name"], m["content"]) for m in entry["traj"] if m["role"] == "tool"]
        assert [(s.name, s.result) for s in trace if s.name] == expected


def test_tokens_come_from_usage_where_the_trace_has_it(loaded):
    traces, _ = loaded
    for t in traces:
        if not t.steps:  # runs that died on an API error before any call
            assert t.meta["tokens_source"] == "none"
        elif t.format == "mini-swe-agent":
            assert t.meta["tokens_source"] in ("usage", "mixed"), t.source
            assert (
                not any(s.tokens_estimated for s in t if not s.meta.get("final"))
                or t.meta["tokens_source"] == "mixed"
            )
        else:  # tau-bench and SWE-agent demonstrations have no per-call usage
            assert t.meta["tokens_source"] == "estimate", t.source
        assert all(s.tokens_in >= 0 and s.tokens_out >= 0 for s in t)


def test_shell_commands_are_classified(loaded):
    traces, _ = loaded
    kinds = collections.Counter(s.kind for t in traces if t.format == "mini-swe-agent" for s in t)
    # mini-swe-agent works through bash alone: all kinds but ask must show up in bulk
    assert kinds["observe"] > 1000 and kinds["mutate"] > 500 and kinds["exec"] > 500
    assert kinds["ask"] == 0


def test_analysis_bounds_on_every_trace(loaded, impl):
    traces, _ = loaded
    reports = impl.analyse_many(traces)
    assert len(reports) == len(traces)
    for t, r in zip(traces, reports):
        assert 0 <= r.wasted_tokens <= r.total_tokens, t.source
        assert r.total_tokens == t.total_tokens, t.source
        assert 0.0 <= r.waste_ratio <= 1.0


def test_reasoning_the_context_carries_is_counted_once(loaded, shared_traces):
    """mini-swe-agent sends DeepSeek's reasoner its own ``reasoning_content`` back, so each
    prompt holds the whole completion before it, reasoning included (every gap of these runs
    shows it). Counted once, as the call's output and never again as a result's input, the
    tokens of a trajectory whose usage is complete are what its context grew by from the first
    prompt to the last, plus the last output: P_last - P_first + completion_last."""
    folder = shared_traces / "mini-swe-agent-pr816" / "deepseek_reasoner_dev"
    by_source = {t.source: t for t in loaded[0]}
    checked = 0
    for path in sorted(folder.glob("*/*.traj.json.gz")):
        doc = orjson.loads(gzip.decompress(path.read_bytes()))
        usages = [
            ((m.get("extra") or {}).get("response") or {}).get("usage")
            for m in doc["messages"]
            if m.get("role") == "assistant"
        ]
        t = by_source[str(path)]
        if not usages or None in usages or t.meta["tokens_source"] != "usage":
            continue
        reasoning = [u["completion_tokens_details"]["reasoning_tokens"] for u in usages]
        assert sum(reasoning) > 1000, path  # a run that reasons, or the check shows nothing
        expected = (
            usages[-1]["prompt_tokens"]
            - usages[0]["prompt_tokens"]
            + usages[-1]["completion_tokens"]
        )
        assert t.total_tokens == expected, path
        checked += 1
    assert checked == 5
