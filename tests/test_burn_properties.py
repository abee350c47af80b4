"""Properties of the burn analysis over random traces, crossing the twins.

Random kinds over few targets, names, args and results, so that repeats, edits, execs and
asks interleave densely; every property holds for the reference and for both kernels.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopcore import _native_flag
from loopcore.burn import Step, Trace, _charge_steps, analyse_burn, analyse_many
from loopcore.encoded import FINDING_KINDS, analyse_encoded, encode, step_facts
from loopcore.trace import KINDS

TARGETS = ("a", "b", "c")
SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

target_st = st.one_of(
    st.none(),
    st.sampled_from(TARGETS),
    st.lists(st.sampled_from(TARGETS), min_size=1, max_size=3).map(tuple),
)
args_st = st.one_of(
    st.none(),
    st.fixed_dictionaries({"p": st.sampled_from(TARGETS)}),
    st.fixed_dictionaries({"old_string": st.sampled_from("xyz"), "new_string": st.sampled_from("xyz")}),
    st.fixed_dictionaries({"content": st.sampled_from("XY")}),
)
random_step = st.tuples(
    st.sampled_from(KINDS),
    st.sampled_from(("Read", "Edit", "Bash", "Ask")),
    target_st,
    args_st,
    st.one_of(st.none(), st.sampled_from("AB")),  # result
    st.sampled_from((None, None, None, "boom")),  # error
    st.integers(0, 1),  # turn increment
    st.integers(0, 500),  # tokens
)
one = st.sampled_from(TARGETS)
tokens = st.integers(0, 500)
turn_inc = st.integers(0, 1)
# coherent actions, so that edits, reverts, content states and ask-only turns are common
read_step = one.flatmap(lambda t: st.tuples(
    st.just("observe"), st.just("Read"), st.just(t), st.just({"p": t}), st.sampled_from("AB"),
    st.sampled_from((None, None, "missing")), turn_inc, tokens))
edit_step = one.flatmap(lambda t: st.tuples(
    st.just("mutate"), st.just("Edit"), st.just(t),
    st.fixed_dictionaries({"p": st.just(t), "old_string": st.sampled_from("xy"), "new_string": st.sampled_from("xy")}),
    st.just("ok"), st.sampled_from((None, None, None, "no match")), turn_inc, tokens))
write_step = one.flatmap(lambda t: st.tuples(
    st.just("mutate"), st.just("Write"), st.just(t), st.fixed_dictionaries({"p": st.just(t), "content": st.sampled_from("XY")}),
    st.just("ok"), st.just(None), turn_inc, tokens))
ask_step = st.tuples(st.just("ask"), st.just("Ask"), st.just(None), st.fixed_dictionaries({"q": st.sampled_from("123")}),
                     st.sampled_from(("yes", "no", None)), st.just(None), st.just(1), tokens)
exec_step = st.tuples(st.just("exec"), st.just("Bash"), st.one_of(st.none(), one), st.fixed_dictionaries({"c": st.sampled_from(("make", "test"))}),
                      st.sampled_from("AB"), st.sampled_from((None, "failed")), turn_inc, tokens)
step_st = st.one_of(random_step, read_step, read_step, edit_step, edit_step, write_step, ask_step, ask_step, exec_step)


def build(raw, session="s", turn0=0):
    steps, turn = [], turn0
    for kind, name, target, args, result, error, dturn, tokens in raw:
        turn += dturn
        steps.append(Step(session, turn, kind, name, target, args, result, error, tokens, 0))
    return Trace(steps)


traces_st = st.lists(step_st, max_size=40).map(build)
many_st = st.lists(st.lists(step_st, max_size=25), min_size=1, max_size=4).map(
    lambda raws: [build(r, session=f"s{k}") for k, r in enumerate(raws)]
)


def _kernel_impls():
    return ["py"] if _native_flag.NO_EXTENSIONS else ["c", "py"]


@pytest.fixture(scope="module")
def impl_name(impl):
    # hypothesis probes its arguments for attributes; hand it the twin's name, not the Impl
    return impl.name


def charges(impl_name, trace):
    """Per-step (codes, of_step) from the kernel twin *impl*, checked against the reference."""
    res = analyse_encoded(encode(trace), impl=impl_name)
    codes, of = res.finding.tolist(), res.of_step.tolist()
    assert (codes, of) == _charge_steps(trace.steps)
    return codes, of


@SETTINGS
@given(many_st)
def test_kernel_twins_and_reference_agree_on_random_traces(traces):
    enc = encode(traces)
    results = {impl: analyse_encoded(enc, impl=impl) for impl in _kernel_impls()}
    expected_codes, expected_of = [], []
    for t in traces:
        codes, of = _charge_steps(t.steps)
        expected_codes += codes
        expected_of += of
    reports = [analyse_burn(t) for t in traces]
    for impl, res in results.items():
        assert res.finding.tolist() == expected_codes, impl
        assert res.of_step.tolist() == expected_of, impl
        assert res.total_tokens.tolist() == [r.total_tokens for r in reports]
        assert res.wasted_tokens.tolist() == [r.wasted_tokens for r in reports]
        for k, r in enumerate(reports):
            assert res.by_kind_tokens[k].tolist() == [r.by_kind[x]["tokens"] for x in FINDING_KINDS]
            assert res.by_kind_steps[k].tolist() == [r.by_kind[x]["steps"] for x in FINDING_KINDS]
        assert analyse_many(traces, impl=impl) == reports


@SETTINGS
@given(trace=traces_st)
def test_no_finding_spans_a_relevant_mutation_or_an_exec(impl_name, trace):
    codes, of = charges(impl_name, trace)
    steps = trace.steps
    for i, code in enumerate(codes):
        if not code:
            continue
        j = of[i]
        assert 0 <= j < i
        between = steps[j + 1:i]
        # nothing charged ever spans an exec or a mutation of unknown target
        assert not any(s.kind == "exec" or (s.kind == "mutate" and s.target is None) for s in between)
        kind = FINDING_KINDS[code - 1]
        if kind in ("redundant_observation", "duplicate_call"):
            mine = set(steps[i].targets)
            for s in between:
                if s.kind == "mutate":
                    assert mine and steps[i].kind != "exec" and not (mine & set(s.targets))
        elif kind == "question_loop":
            assert steps[i].kind == "ask"
            assert not any(s.kind in ("observe", "mutate", "exec") for s in between)
        else:  # oscillation: the agent itself changed this target since
            (t,) = steps[i].targets
            assert steps[i].target == steps[j].target or steps[j].targets == (t,)


@SETTINGS
@given(trace=traces_st)
def test_first_occurrence_is_never_charged(impl_name, trace):
    codes, of = charges(impl_name, trace)
    facts = [step_facts(s) for s in trace.steps]
    seen_calls, seen_obs = set(), set()
    for i, f in enumerate(facts):
        kind = FINDING_KINDS[codes[i] - 1] if codes[i] else None
        if f.call not in seen_calls:
            assert kind != "duplicate_call"
        if kind == "duplicate_call":
            assert facts[of[i]].call == f.call
        obs_key = (f.targets, f.outcome)
        if f.kind == 0 and f.targets and f.has_outcome:
            if obs_key not in seen_obs:
                assert kind != "redundant_observation"
            seen_obs.add(obs_key)
        if kind == "redundant_observation":
            assert (facts[of[i]].targets, facts[of[i]].outcome) == obs_key
        seen_calls.add(f.call)
    if codes:
        assert codes[0] == 0


@SETTINGS
@given(trace=traces_st)
def test_wasted_within_total_and_each_step_charged_once(impl_name, trace):
    (r,) = analyse_many([trace], impl=impl_name)
    assert r == analyse_burn(trace)
    assert 0 <= r.wasted_tokens <= r.total_tokens == sum(s.tokens for s in trace.steps)
    assert 0.0 <= r.waste_ratio <= 1.0
    charged = [i for f in r.findings for i in f.steps]
    assert len(charged) == len(set(charged))
    assert r.wasted_tokens == sum(trace.steps[i].tokens for i in charged) == sum(f.tokens for f in r.findings)
    assert sum(v["steps"] for v in r.by_kind.values()) == len(charged)
    for f in r.findings:
        assert f.of_step not in f.steps and f.of_step < min(f.steps)


@SETTINGS
@given(spec=st.lists(st.tuples(st.sampled_from(("observe", "mutate", "exec", "other")), st.booleans(),
                               st.booleans(), st.integers(0, 1)), max_size=40))
def test_a_trace_of_distinct_steps_has_no_finding(impl_name, spec):
    steps, turn = [], 0
    for i, (kind, has_target, is_edit, dturn) in enumerate(spec):
        turn += dturn
        args = {"old_string": f"o{i}", "new_string": f"n{i}"} if is_edit else {"i": i}
        steps.append(Step("s", turn, kind, f"tool{i}", f"t{i}" if has_target else None, args, f"r{i}", None, 10, 0))
    trace = Trace(steps)
    assert analyse_burn(trace).findings == ()
    assert not any(charges(impl_name, trace)[0])


@SETTINGS
@given(trace=traces_st, extra=st.lists(step_st, min_size=1, max_size=15))
def test_appending_steps_never_removes_a_finding(impl_name, trace, extra):
    # later steps arrive in later turns: a finding, once made, stays
    last_turn = trace.steps[-1].turn if trace.steps else 0
    longer = Trace(trace.steps + build(extra, turn0=last_turn + 1).steps)
    codes, of = charges(impl_name, trace)
    codes2, of2 = charges(impl_name, longer)
    for i, code in enumerate(codes):
        if code:
            assert (codes2[i], of2[i]) == (code, of[i])
    before = {(f.kind, i) for f in analyse_burn(trace).findings for i in f.steps}
    after = {(f.kind, i) for f in analyse_burn(longer).findings for i in f.steps}
    assert before <= after
    # encoded side by side, the two traces stay independent
    res = analyse_encoded(encode([trace, longer]), impl=impl_name)
    assert np.array_equal(res.finding[:len(trace)], np.asarray(codes, dtype=np.int8))
    assert res.finding[len(trace):].tolist() == codes2
