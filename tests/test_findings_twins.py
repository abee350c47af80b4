"""The fleet's client rebuilds every trace's findings from the field tuples its workers send
(``encoded.findings_of``): the compiled twin fills each Finding's slots itself, the pure one
calls the constructor. Both must give equal Findings, of the exact class, for any row, and
refuse a malformed row alike."""

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
