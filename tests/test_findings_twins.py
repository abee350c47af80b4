"""The fleet's client rebuilds every trace's result and findings from the field tuples its
workers send (``encoded.results_of``, ``encoded.findings_of``): the compiled twin fills each
object's slots itself, the pure one calls the constructors. Both must give equal objects, of
the exact classes, for any input, and refuse a malformed one alike."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from loopcore import _native_flag
from loopcore.burn import Finding


@pytest.fixture(scope="module")
def native():
    if _native_flag.NO_EXTENSIONS:
        pytest.skip("LOOPCORE_NO_EXTENSIONS=1: no compiled twin to compare")
    return _native_flag.load_twin("burn", "c")


PURE = _native_flag.load_twin("burn", "py")

_scalar = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8))
_ref = st.one_of(st.none(), st.dictionaries(st.sampled_from(["message", "line"]), st.integers()))
_row = st.tuples(
    st.sampled_from(["duplicate_call", "redundant_observation", "rejected_action"]),
    st.lists(st.integers(0, 99), max_size=4).map(tuple),
    st.one_of(st.none(), st.integers(0, 99)),
    st.one_of(st.none(), st.text(max_size=6), st.lists(st.text(max_size=4), max_size=3).map(tuple)),
    st.text(max_size=6),
    st.integers(0, 10**20),
    st.text(max_size=30),
    st.one_of(st.none(), st.text(max_size=6)),
    st.lists(_ref, max_size=3).map(tuple),
    _ref,
    st.integers(0, 999),
    st.booleans(),
)
# rows the fast path must hand to the constructor: lists, short and long tuples, odd values
_odd = st.one_of(
    _row.map(list),
    _row.map(lambda r: r[:7]),
    _row.map(lambda r: r[:5]),
    _row.map(lambda r: r + (1,)),
    st.lists(_scalar, max_size=14).map(tuple),
)


def _outcome(fn, rows):
    try:
        out = fn(rows)
    except TypeError as exc:
        return ("TypeError", str(exc))
    assert type(out) is tuple and all(type(f) is Finding for f in out)
    return out


@hsettings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_row, _odd), max_size=6))
def test_findings_of_twins_agree(native, rows):
    assert _outcome(native.findings_of, rows) == _outcome(PURE.findings_of, rows)


@hsettings(max_examples=100, deadline=None)
@given(_row)
def test_a_rebuilt_finding_is_the_one_sent(native, row):
    (f,) = native.findings_of([row])
    assert f == Finding(*row)
    assert tuple(getattr(f, n) for n in native._FINDING_NAMES) == row
    with pytest.raises(AttributeError):  # still frozen
        f.tokens = 0  # type: ignore[misc]


# ---------------------------------------------------------------------------------------------
# whole results: TraceResult(source, session, format, steps, BurnReport(*values))

_by_kind = st.dictionaries(
    st.sampled_from(["duplicate_call", "oscillation"]),
    st.fixed_dictionaries({"tokens": st.integers(0, 99), "steps": st.integers(0, 9)}),
    max_size=2,
)
_values = st.tuples(
    st.integers(0, 10**12),
    st.integers(0, 10**12),
    st.lists(st.one_of(_row, _odd), max_size=3).map(tuple),
    _by_kind,
    st.one_of(st.none(), st.text(max_size=8)),
    st.booleans(),
    st.integers(0, 999),
    st.integers(0, 9),
    st.one_of(st.none(), st.text(max_size=6)),
    st.integers(0, 999),
)
_packed = st.tuples(
    st.text(max_size=8),
    st.text(max_size=6),
    st.one_of(st.none(), st.sampled_from(["claude-code", "mini-swe-agent"])),
    st.integers(0, 999),
    _values,
)
# items the fast path must hand to the constructors
_odd_packed = st.one_of(
    _packed.map(list),
    _packed.map(lambda t: t[:4]),
    _packed.map(lambda t: t[:4] + (list(t[4]),)),
    _packed.map(lambda t: t[:4] + (t[4][:9],)),
    _packed.map(lambda t: t[:4] + (t[4][:2],)),
    _packed.map(lambda t: t + (0,)),
)


def _results(fn, packed):
    from loopcore.burn import BurnReport
    from loopcore.report import TraceResult

    try:
        out = fn(packed)
    except (TypeError, ValueError, IndexError) as exc:
        return (type(exc).__name__, str(exc))
    assert type(out) is list
    for r in out:
        assert type(r) is TraceResult and type(r.report) is BurnReport
        assert all(type(f) is Finding for f in r.report.findings)
    return out


@hsettings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_packed, _odd_packed), max_size=4))
def test_results_of_twins_agree(native, packed):
    assert _results(native.results_of, packed) == _results(PURE.results_of, packed)


def test_the_findings_sit_where_both_twins_put_them():
    from dataclasses import fields

    from loopcore.burn import BurnReport

    names = [f.name for f in fields(BurnReport)]
    assert names.index("findings") == PURE.BURN_FINDINGS_AT


def test_a_rebuilt_finding_of_plain_values_is_left_to_reference_counting(native):
    """The compiled twin untracks a Finding whose fields hold only plain values (and its
    tuples of them): the cyclic collector has nothing to find there. One that holds a
    container the collector follows (here a list) stays tracked, and so does its report."""
    import gc

    plain = (
        "duplicate_call",
        (1, 2),
        0,
        ("a", "b"),
        "bash",
        5,
        "m",
        "s",
        ({"line": 3},),
        {"line": 1},
        0,
        False,
    )
    odd = plain[:3] + (["a"],) + plain[4:]
    (r,) = native.results_of(
        [("src", "s", None, 3, (9, 5, (plain, odd), {}, None, False, 3, 1, "s", 0))]
    )
    f_plain, f_odd = r.report.findings
    assert not gc.is_tracked(f_plain)
    assert not gc.is_tracked(f_plain.steps) and not gc.is_tracked(f_plain.target)
    assert gc.is_tracked(f_odd)
    assert gc.is_tracked(r) and gc.is_tracked(r.report)
    assert f_plain == Finding(*plain) and f_odd == Finding(*odd)
    # the pure twin builds the same objects through the constructors
    (p,) = PURE.results_of([("src", "s", None, 3, (9, 5, (plain,), {}, None, False, 3, 1, "s", 0))])
    assert p.report.findings == (f_plain,)
