"""Properties of the burn analysis over random traces, crossing the twins.

Random kinds over few targets, names, args and results, so that repeats, edits, execs, asks,
shell reads and writes, no-ops, rejected turns and looping replies interleave densely; the
compiled kernel gives exactly the pure reference's arrays, and every property holds on both.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import twin
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopcore import _native_flag
from loopcore.burn import BurnSettings, Step, Trace
from loopcore.encoded import FINDING_KINDS, encode, step_facts
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
    st.fixed_dictionaries(
        {"old_string": st.sampled_from("xyz"), "new_string": st.sampled_from("xyz")}
    ),
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
read_step = one.flatmap(
    lambda t: st.tuples(
        st.just("observe"),
        st.just("Read"),
        st.just(t),
        st.just({"p": t}),
        st.sampled_from("AB"),
        st.sampled_from((None, None, "missing")),
        turn_inc,
        tokens,
    )
)
edit_step = one.flatmap(
    lambda t: st.tuples(
        st.just("mutate"),
        st.just("Edit"),
        st.just(t),
        st.fixed_dictionaries(
            {
                "p": st.just(t),
                "old_string": st.sampled_from("xy"),
                "new_string": st.sampled_from("xy"),
            }
        ),
        st.just("ok"),
        st.sampled_from((None, None, None, "no match")),
        turn_inc,
        tokens,
    )
)
write_step = one.flatmap(
    lambda t: st.tuples(
        st.just("mutate"),
        st.just("Write"),
        st.just(t),
        st.fixed_dictionaries({"p": st.just(t), "content": st.sampled_from("XY")}),
        st.just("ok"),
        st.sampled_from((None, None, "no match")),  # a failed write: reads after it differ
        turn_inc,
        tokens,
    )
)
ask_step = st.tuples(
    st.just("ask"),
    st.just("Ask"),
    st.just(None),
    st.fixed_dictionaries({"q": st.sampled_from("123")}),
    st.sampled_from(("yes", "no", None)),
    st.sampled_from((None, None, "no user")),  # asked in vain: no answer
    st.just(1),
    tokens,
)
exec_step = st.tuples(
    st.just("exec"),
    st.just("Bash"),
    st.one_of(st.none(), one),
    st.fixed_dictionaries({"c": st.sampled_from(("make", "test"))}),
    st.sampled_from("AB"),
    st.sampled_from((None, "failed")),
    turn_inc,
    tokens,
)
shell_step = st.sampled_from(
    [
        ("mutate", "bash", "p.txt", {"command": "git diff -- a > p.txt"}, "", ("a",), ("p.txt",)),
        ("mutate", "bash", "a", {"command": "git checkout -- a"}, "", (), ("a",)),
        ("mutate", "bash", None, {"command": "git stash"}, "Saved", (), None),
        ("mutate", "bash", "b", {"command": "echo 'x' > b"}, "", (), ("b",)),
        ("mutate", "bash", "b", {"command": "echo 'y' >> b"}, "", ("b",), ("b",)),
        ("mutate", "bash", "c", {"command": "sed -i 's/q/q/' c"}, "", ("c",), ("c",)),
        ("mutate", "bash", "a", {"command": "sed -i '2a z' a"}, "", ("a",), ("a",)),
        ("observe", "bash", "a", {"command": "grep -n q a"}, "", ("a",), ()),
        ("observe", "bash", "a", {"command": "grep -n z a"}, "", ("a",), ()),
        ("observe", "bash", "a", {"command": "cat a"}, "\n".join(["line of a"] * 30), ("a",), ()),
        (
            "observe",
            "bash",
            "a",
            {"command": "sed -n '1,400p' a"},
            "\n".join(["line of a"] * 30),
            ("a",),
            (),
        ),
        ("exec", "bash", None, {"command": "python3 b"}, "ok", None, None),
        # backups, restores and a script run across them (oscillation d)
        ("mutate", "bash", "a.orig", {"command": "cp a a.orig"}, "", ("a",), ("a.orig",)),
        ("mutate", "bash", "a", {"command": "cp a.orig a"}, "", ("a.orig",), ("a",)),
        ("mutate", "bash", "a", {"command": "git checkout a 2>&1"}, "", (), ("a",)),
        ("mutate", "bash", "a", {"command": "# again\nsed -i '2a z' a"}, "", ("a",), ("a",)),
        ("exec", "bash", None, {"command": "python3 fix.py"}, "fixed", None, None),
        ("exec", "bash", None, {"command": "python3 fix.py"}, "other", None, None),
        # a search tool and a record write (an untargeted read of records)
        ("observe", "search", None, {"q": "x"}, "hits", None, ()),
        ("mutate", "cancel", "r1", {"id": "r1"}, "ok", None, ("r1",)),
    ]
)
reply_text = st.sampled_from(
    [
        None,
        None,
        "I will look at a.",
        "The same line again.\n" * 40,
        "x" * 30 + "```\n" + "loop\n" * 200 + "```",
    ]
)


NOT_RUN = "<tool_use_error>Sibling tool call errored</tool_use_error>"


def _shell(t):
    kind, name, target, args, result, reads, writes = t
    return (kind, name, target, args, result, None, 0, 100, reads, writes)


step_st = st.one_of(
    random_step,
    read_step,
    read_step,
    edit_step,
    edit_step,
    write_step,
    ask_step,
    ask_step,
    exec_step,
    shell_step.map(_shell),
    shell_step.map(_shell),
)
rich_step = st.tuples(
    step_st,
    reply_text,
    st.integers(0, 300),
    # rejected, or cancelled unrun by the harness (a sibling call of its batch failed)
    st.sampled_from([None, None, None, None, "format error", NOT_RUN]),
    st.sampled_from([False, False, False, False, True]),  # a user's message before the step
)


def build(raw, session="s", turn0=0):
    steps, turn = [], turn0
    for n, item in enumerate(raw):
        text = turn_tokens = rejected = None
        after_user = False
        if len(item) == 5:  # a rich step: (step, reply text, turn tokens, rejection, user)
            item, text, turn_tokens, rejected, after_user = item
        kind, name, target, args, result, error, dturn, tokens, *access = item
        turn += dturn
        reads, writes = access if access else (None, None)
        ref = {"message": 2 * n + 1}
        if rejected == NOT_RUN:
            result, error, rejected = None, NOT_RUN, None
            meta = {"not_run": True}
        else:
            meta = {}
        if rejected:
            steps.append(
                Step(
                    session,
                    turn,
                    "other",
                    name,
                    None,
                    args,
                    None,
                    None,
                    tokens,
                    10,
                    rejected=rejected,
                    text=text,
                    tokens_turn=turn_tokens or 0,
                    ref=ref,
                    after_user=after_user,
                )
            )
            continue
        steps.append(
            Step(
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
                reads=reads,
                writes=writes,
                text=text,
                tokens_turn=turn_tokens or 0,
                ref=ref,
                after_user=after_user,
                meta=meta,
            )
        )
    return Trace(steps)


traces_st = st.lists(step_st, max_size=40).map(build)
rich_traces_st = st.lists(st.one_of(step_st, rich_step), max_size=40).map(build)
many_st = st.lists(
    st.lists(st.one_of(step_st, rich_step), max_size=25), min_size=1, max_size=4
).map(lambda raws: [build(r, session=f"s{k}") for k, r in enumerate(raws)])


def _kernel_impls():
    return ["py"] if _native_flag.NO_EXTENSIONS else ["c", "py"]


@pytest.fixture(scope="module")
def impl_name(impl):
    # hypothesis probes its arguments for attributes; hand it the twin's name, not the Impl
    return impl.name


def charges(impl_name, trace):
    """Per-step (codes, of_step) from the kernel twin *impl*, checked against the reference."""
    enc = encode(trace)
    res = twin(impl_name).analyse_encoded(enc)
    ref = twin("py").analyse_encoded(enc)
    codes, of = res.finding.tolist(), res.of_step.tolist()
    assert (codes, of, res.charge.tolist()) == (
        ref.finding.tolist(),
        ref.of_step.tolist(),
        ref.charge.tolist(),
    )
    return codes, of


@SETTINGS
@given(many_st, st.booleans())
def test_kernel_twins_agree_on_random_traces(traces, charge_turn):
    cfg = BurnSettings(charge_turn_output=charge_turn)
    enc = encode(traces, cfg)
    ref = twin("py").analyse_encoded(enc, charge_turn_output=charge_turn)
    reports = twin("py").analyse_many(traces, cfg)
    for impl in _kernel_impls():
        res = twin(impl).analyse_encoded(enc, charge_turn_output=charge_turn)
        for name in (
            "finding",
            "of_step",
            "charge",
            "total_tokens",
            "wasted_tokens",
            "by_kind_tokens",
            "by_kind_steps",
        ):
            assert getattr(res, name).tolist() == getattr(ref, name).tolist(), (impl, name)
        assert res.total_tokens.tolist() == [r.total_tokens for r in reports]
        assert res.wasted_tokens.tolist() == [r.wasted_tokens for r in reports]
        for k, r in enumerate(reports):
            assert res.by_kind_tokens[k].tolist() == [r.by_kind[x]["tokens"] for x in FINDING_KINDS]
            assert res.by_kind_steps[k].tolist() == [r.by_kind[x]["steps"] for x in FINDING_KINDS]
        assert twin(impl).analyse_many(traces, cfg) == reports
        assert [twin(impl).analyse_burn(t, cfg) for t in traces] == reports


@SETTINGS
@given(trace=traces_st)
def test_no_repeat_spans_a_write_of_what_it_reads(impl_name, trace):
    codes, of = charges(impl_name, trace)
    steps = trace.steps
    facts = [step_facts(s) for s in steps]
    for i, code in enumerate(codes):
        if not code:
            continue
        kind = FINDING_KINDS[code - 1]
        j = of[i]
        assert 0 <= j < len(steps) and (j < i or kind == "oscillation")
        if kind in ("redundant_observation", "duplicate_call"):
            reads = facts[i].reads
            for g in facts[j + 1 : i]:
                assert g.writes is not None, "a repeat across a write of everything"
                # a failed write of one named target wrote nothing (docs/burn.md)
                if g.writes and not (g.error and len(g.writes) == 1):
                    assert reads is not None and not set(reads) & set(g.writes)
        elif kind == "question_loop":
            assert steps[i].kind == "ask"
            assert not any(s.kind in ("observe", "mutate", "exec") for s in steps[j + 1 : i])


@SETTINGS
@given(trace=traces_st)
def test_first_occurrence_is_never_charged(impl_name, trace):
    codes, of = charges(impl_name, trace)
    facts = [step_facts(s) for s in trace.steps]
    seen_calls = set()
    for i, f in enumerate(facts):
        kind = FINDING_KINDS[codes[i] - 1] if codes[i] else None
        if f.call not in seen_calls:
            assert kind != "duplicate_call"
        if kind == "duplicate_call":
            assert facts[of[i]].call == f.call
        if kind == "redundant_observation":
            g = facts[of[i]]
            assert (g.targets, g.outcome) == (f.targets, f.outcome)
            assert g.call == f.call or f.substantial
        seen_calls.add(f.call)
    if codes:
        assert codes[0] in (
            0,
            5,
            6,
        )  # only a rejected action or a looping reply is waste on its own


@SETTINGS
@given(trace=rich_traces_st, charge_turn=st.booleans())
def test_wasted_within_total_and_each_step_charged_once(impl_name, trace, charge_turn):
    cfg = BurnSettings(charge_turn_output=charge_turn)
    (r,) = twin(impl_name).analyse_many([trace], cfg)
    assert r == twin("py").analyse_burn(trace, cfg)
    steps = trace.steps
    assert (
        0
        <= r.wasted_tokens
        <= r.total_tokens
        == sum(s.tokens_in + s.tokens_out + s.tokens_turn for s in steps)
    )
    assert 0.0 <= r.waste_ratio <= 1.0
    charged = [i for f in r.findings for i in f.steps]
    assert len(charged) == len(set(charged))
    assert r.wasted_tokens == sum(f.tokens for f in r.findings)
    assert sum(v["steps"] for v in r.by_kind.values()) == len(charged)
    for f in r.findings:
        assert f.refs == tuple(steps[i].ref for i in f.steps)
        if f.kind == "rejected_action":
            assert f.of_step is None and all(steps[i].rejected for i in f.steps)
            assert f.tokens == sum(
                steps[i].tokens_in + steps[i].tokens_out + steps[i].tokens_turn for i in f.steps
            )
        elif f.kind == "degenerate_output":
            assert (
                f.steps == (f.of_step,)
                and 0 < f.tokens <= steps[f.of_step].tokens_out + steps[f.of_step].tokens_turn
            )
        else:
            assert f.of_step not in f.steps
            extra = (lambda s: s.tokens_turn) if charge_turn else (lambda s: 0)
            assert f.tokens == sum(
                steps[i].tokens_in + steps[i].tokens_out + extra(steps[i]) for i in f.steps
            )
            assert f.turn_output_tokens == (
                0 if charge_turn else sum(steps[i].tokens_turn for i in f.steps)
            )
    # every rejected step is charged, as a rejected action
    for i, s in enumerate(steps):
        if s.rejected:
            assert any(f.kind == "rejected_action" and i in f.steps for f in r.findings)


@SETTINGS
@given(
    spec=st.lists(
        st.tuples(
            st.sampled_from(("observe", "mutate", "exec", "other")),
            st.booleans(),
            st.booleans(),
            st.integers(0, 1),
        ),
        max_size=40,
    )
)
def test_a_trace_of_distinct_steps_has_no_finding(impl_name, spec):
    steps, turn = [], 0
    for i, (kind, has_target, is_edit, dturn) in enumerate(spec):
        turn += dturn
        args = {"old_string": f"o{i}", "new_string": f"n{i}"} if is_edit else {"i": i}
        steps.append(
            Step(
                "s",
                turn,
                kind,
                f"tool{i}",
                f"t{i}" if has_target else None,
                args,
                f"r{i}",
                None,
                10,
                0,
            )
        )
    trace = Trace(steps)
    assert twin(impl_name).analyse_burn(trace).findings == ()
    assert not any(charges(impl_name, trace)[0])


@SETTINGS
@given(trace=rich_traces_st)
def test_a_users_message_starts_the_evidence_again(impl_name, trace):
    """After a user's message (Step.after_user) nothing before it is evidence: no charge
    reaches back across one; the steps before the first message are charged as if the trace
    ended there; and each stretch from one message to the next is charged at most as that
    stretch alone would be (alone, its start is taken for the committed content of its
    files, which a message in the middle of a trace does not allow). Question loops are about
    the user's answers themselves and are left out."""
    steps = trace.steps
    codes, of = charges(impl_name, trace)
    cuts = [i for i, st_ in enumerate(steps) if st_.after_user and i > 0]
    for i, code in enumerate(codes):
        if code and code != 4 and of[i] >= 0:
            lo, hi = sorted((of[i], i))
            assert not any(st_.after_user for st_ in steps[lo + 1 : hi + 1]), (i, of[i])
    bounds = [0, *cuts, len(steps)]
    for k in range(len(bounds) - 1):
        a, b = bounds[k], bounds[k + 1]
        alone_codes, alone_of = charges(impl_name, Trace(steps[a:b]))
        for q in range(a, b):
            got = (codes[q], of[q] - a if of[q] >= 0 else -1)
            alone = (alone_codes[q - a], alone_of[q - a])
            if got[0] == 4 or alone[0] == 4:
                continue
            if k == 0:
                assert got == alone, q
            elif got[0]:
                assert got == alone, q


@SETTINGS
@given(trace=rich_traces_st, extra=st.lists(step_st, min_size=1, max_size=15))
def test_appending_steps_never_uncharges_a_step(impl_name, trace, extra):
    # later steps arrive in later turns: a charged step stays charged (a later redo may name
    # it as part of its oscillation instead)
    last_turn = trace.steps[-1].turn if trace.steps else 0
    longer = Trace(trace.steps + build(extra, turn0=last_turn + 1).steps)
    codes, of = charges(impl_name, trace)
    codes2, of2 = charges(impl_name, longer)
    for i, code in enumerate(codes):
        if code:
            assert codes2[i] != 0
            if code != 3 and codes2[i] != 3:
                assert (codes2[i], of2[i]) == (code, of[i])
    # encoded side by side, the two traces stay independent
    res = twin(impl_name).analyse_encoded(encode([trace, longer]))
    assert np.array_equal(res.finding[: len(trace)], np.asarray(codes, dtype=np.int8))
    assert res.finding[len(trace) :].tolist() == codes2


@SETTINGS
@given(trace=rich_traces_st)
def test_a_call_the_harness_never_ran_is_never_charged_nor_repeated(impl_name, trace):
    """A call cancelled before it ran (``meta["not_run"]``) observed and wrote nothing: it is
    charged nothing as a call (the looping reply of the turn it opens is still that reply's
    waste), no finding cites it as the work it repeats, and dropping it changes no other
    step's charge."""
    codes, of = charges(impl_name, trace)
    degenerate = FINDING_KINDS.index("degenerate_output") + 1
    unrun = {i for i, s in enumerate(trace.steps) if s.meta.get("not_run")}
    for i in unrun:
        assert codes[i] in (0, degenerate)
    assert not unrun & {of[i] for i, c in enumerate(codes) if c and c != degenerate}
    kept = [i for i in range(len(trace.steps)) if i not in unrun]
    if unrun and kept:
        steps = [trace.steps[i] for i in kept]
        if any(s.after_user for s in (trace.steps[i] for i in unrun)):
            return  # the person's message moves to the next kept step: not the same trace
        codes2, _ = charges(impl_name, Trace(steps))
        assert [codes[i] for i in kept] == codes2
