"""The compiled core's fast walk (JSON-like values of short ASCII str keys, encoded with no
snapshot and no Python code) against its general path and the pure twin.

A strip set holding a member that is not a str turns the fast walk off for a whole call (its
membership test could run Python code), so ``canonical_bytes(v, strip=_GENERAL)`` is the
compiled general path's answer for any *v* whose keys are never that member.
"""

from __future__ import annotations

import collections
import enum
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_hostile_hashing import _ok, _run

from loopcore import _native_flag

pytestmark = pytest.mark.skipif(_native_flag.NO_EXTENSIONS, reason="compiled core deselected")

_GENERAL = frozenset({("not", "a", "key")})


def _twins():
    return _native_flag.load_twin("hashing", "c"), _native_flag.load_twin("hashing", "py")


def _check(value, strip=None):
    """The fast walk, the compiled general path and the pure twin give the same bytes."""
    c, py = _twins()
    fast = c.canonical_bytes(value, strip=strip)
    general = c.canonical_bytes(value, strip=_GENERAL | (strip or frozenset()))
    assert fast == general == py.canonical_bytes(value, strip=strip)
    assert c.canonical_hash(value, strip=strip) == py.canonical_hash(value, strip=strip)


class _Color(enum.IntEnum):
    RED = 1


class _Tag(str):
    pass


ascii_keys = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_-ABC0189", max_size=12)
keys = (
    ascii_keys
    | st.text(max_size=6)  # non-ASCII, surrogates: the general path's
    | st.text(alphabet="ab", min_size=126, max_size=131)  # around the inline limit
)
leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.sampled_from([0, -1, 2**30 - 1, 2**30, -(2**30), 2**60, 2**63 - 1, -(2**63), 2**63])
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([-0.0, 1e300, 2.0**63, -(2.0**63), 0.5])
    | st.text(alphabet="abc /.", max_size=40)
    | st.text(max_size=8)
    | st.text(alphabet="xy", min_size=120, max_size=300)
    | st.binary(max_size=140)
    | st.sampled_from([_Color.RED, _Tag("t"), True, False])
)


def _containers(children):
    return (
        st.lists(children, max_size=5)
        | st.tuples(children, children)
        | st.dictionaries(ascii_keys, children, max_size=9)
        | st.dictionaries(keys, children, max_size=4)
        | st.dictionaries(ascii_keys, children, min_size=30, max_size=36).map(
            collections.OrderedDict
        )
        | st.dictionaries(ascii_keys, children, min_size=30, max_size=36)
    )


json_like = st.recursive(leaves, _containers, max_leaves=60)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_like)
def test_fast_walk_general_path_and_twin_agree(value):
    _check(value)
    _check(value, strip=frozenset({"a", "path", ""}))


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(ascii_keys, leaves, max_size=9), st.randoms(use_true_random=False))
def test_small_dicts_in_any_key_order(d, rnd):
    items = list(d.items())
    rnd.shuffle(items)
    c, py = _twins()
    shuffled = dict(items)
    assert c.canonical_bytes(shuffled) == c.canonical_bytes(d) == py.canonical_bytes(d)
    _check({"outer": [shuffled, d], "n": len(d)})


@pytest.mark.parametrize("depth", [1, 2, 3, 4, 11, 12, 13, 14, 40])
def test_nesting_around_the_fast_walk_limit(depth):
    v = {"leaf": [1, "x"]}
    for i in range(depth):
        v = {"k": v, "i": i} if i % 2 else [v, i]
    _check(v)


def test_cycles_inside_and_across_the_fast_walk():
    c, py = _twins()
    lst = [1, "a"]
    lst.append(lst)
    d = {"a": 1, "l": [2]}
    d["self"] = d
    d["l"].append(d)
    for v in (lst, d, {"x": lst}, [d, d]):
        _check(v)

    # a converter returning a container that is open in the general path: the fast walk of
    # the converted dict must see it as a cycle, as the twin does
    class Marker:
        pass

    outer = [Marker(), 5]
    conv = lambda o: {"back": outer, "n": 1}  # noqa: E731
    assert c.canonical_bytes(outer, default=conv) == py.canonical_bytes(outer, default=conv)


def test_values_the_fast_walk_leaves_to_the_general_path():
    big = "z" * (1 << 20)  # digested with the GIL released, on the general path
    for v in (
        {"s": big, "n": 1},
        {"s": big[:-1], "n": 1},
        {"k": "é", "n": 2},
        {"é": 1},
        {"k" * 129: 1},
        {"k": 10**30},
        {"k": 2.0**70},
        {"k": {1, 2}},
        {"k": bytearray(b"ab")},
        {"k": collections.OrderedDict(a=1)},
        {"k": _Tag("v"), _Tag("key"): 1},
        {"k": _Color.RED},
        {f"k{i}": i for i in range(33)},
        {f"k{i}": [i] for i in range(32)},
        {},
        [],
        (),
        "top",
        7,
        math.nan,
    ):
        _check(v)


@pytest.mark.parametrize(
    "text",
    [
        "é",
        "ü" * 64,  # 128 bytes of UTF-8: inline
        "ü" * 65,  # 130: digested
        "€" * 42,
        "€" * 43,
        "\U0001f600" * 32,
        "\U0001f600" * 33,
        "\ud800",
        "a\udcffb\udbff\udfff",  # lone and paired surrogates: passed through one by one
        "\x80" * 200,
        "ä" * ((1 << 18) - 1),  # the longest the fast walk encodes itself
        "ä" * (1 << 18),  # could reach the GIL-release size: the general path's
    ],
    ids=lambda s: f"{len(s)}-chars-{len(s.encode('utf-8', 'surrogatepass'))}-bytes",
)
def test_non_ascii_values_around_the_inline_limit(text):
    _check(text)
    _check({"text": text, "n": 1})
    _check({"parts": [text, "ascii", text[:3]], "d": {"t": text}})


# runs of ASCII of every length around the 8- (Latin-1) and 4-wide (UCS-2) steps of the UTF-8
# encoder, between characters of each str kind
_RUN_PIECES = st.one_of(
    st.integers(0, 19).map(lambda n: "abcdefghijklmnopqrs"[:n]),
    st.sampled_from(
        [
            "\x80",
            "\xe9",
            "\xff",
            "\u0100",
            "\u07ff",
            "\u0800",
            "\u20ac",
            "\ud800",
            "\udfff",
            "\uffff",
            "\U0001f600",
            "\x7f",
        ]
    ),
)


@given(st.lists(_RUN_PIECES, min_size=1, max_size=12).map("".join))
@settings(max_examples=1500, deadline=None)
def test_ascii_runs_inside_non_ascii_text(text):
    _check(text)
    _check({"t": text, "u": text[1:]})


def test_strip_with_only_str_and_with_other_members():
    v = {"path": "a", "id": 7, "nested": [{"id": 1, "x": 2}, {"y": {"id": 3}}]}
    c, py = _twins()
    for strip in (
        frozenset({"id"}),
        {"id"},
        ["id", "x"],
        frozenset({"id", 5}),
        frozenset({"id", _Tag("x")}),
    ):
        assert c.canonical_bytes(v, strip=strip) == py.canonical_bytes(v, strip=strip)
    # the same str-only strip set reused (it is remembered) and then another one
    s1, s2 = frozenset({"id"}), frozenset({"x"})
    for strip in (s1, s1, s2, s1):
        assert c.canonical_hash(v, strip=strip) == py.canonical_hash(v, strip=strip)


def test_converter_values_inside_fast_dicts():
    c, py = _twins()

    class P:
        def __init__(self, p):
            self.p = p

    conv = lambda o: {"path": o.p, "depth": [1, 2]}  # noqa: E731
    v = {"a": {"b": P("x.ts"), "c": 1}, "d": [P("y"), {"e": 2}]}
    assert c.canonical_bytes(v, default=conv) == py.canonical_bytes(v, default=conv)


def test_strip_member_eq_that_clears_a_dict_the_fast_walk_would_take(impl):
    """A str-keyed dict the fast walk would take, stripped by a set holding a str subclass
    whose __hash__ collides with a key and whose __eq__ clears the dict: the general path's
    snapshot is hashed, on both twins, with no crash."""
    out = _ok(
        _run(
            impl,
            """
        victim = {"path": "a.ts", "limit": 200, "nested": {"offset": 0}}
        class Evil(str):
            def __hash__(self):
                return hash("path")
            def __eq__(self, other):
                victim.clear()
                victim.update({f"k{i}": [i] * 50 for i in range(40)})
                return False
        got = h.canonical_hash(victim, strip=frozenset({Evil("zz"), "nothing"}))
        want = h.canonical_hash({"path": "a.ts", "limit": 200, "nested": {"offset": 0}})
        print(got == want, len(victim))
    """,
        )
    )
    assert out.split() == ["True", "40"]
