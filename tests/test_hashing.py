"""The canonical hash: JSON meaning, the byte format, safety on hostile input, twins agreeing."""

from __future__ import annotations

import collections
import enum
import gc
import json
import math
import random
import struct
import threading
from typing import NamedTuple

import pytest
import xxhash
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopcore import _native_flag

# ---------------------------------------------------------------- golden vectors
# Format version 1. A hash written to disk must mean the same tomorrow and on every platform:
# changing any of these is a format change (bump HASH_FORMAT_VERSION, say so in the changelog).
GOLDEN = [
    ("None", 14675559271411649290),
    ("True", 8503709266395068717),
    ("False", 3729356046086683290),
    ("0", 16009954647084518184),
    ("1", 13763888757992346678),
    ("-1", 149146327810195970),
    ("2**63", 1062798407614771628),
    ("-2**63-1", 4591450250076947748),
    ("1.5", 474292829539149307),
    ('float("nan")', 2715260017276457110),
    ('float("inf")', 17398147137998958791),
    ('""', 11396318002517226212),
    ('"read"', 6550917433984498240),
    ('"é"', 15744174377304165109),
    ('"x" * 200', 8480034981333893248),
    ('b"\\x00"', 8654968188979596394),
    ("[]", 13276919262648587892),
    ('[1, "a", None]', 18331096539478490299),
    ("{}", 15253981856959987083),
    ('{"path": "a.ts", "limit": 200}', 12835427486370653693),
    ("{1: 2, None: [True]}", 6530823230632581450),
    ("{1, 2, 3}", 16402854769386553301),
    ('{"a": {"b": {"c": [1.25, -0.5]}}}', 3894732543598761330),
]

# The documented byte layout, spelled out independently of either implementation.
GOLDEN_BYTES = [
    (None, b"n"),
    (True, b"t"),
    (7, b"i" + struct.pack("<q", 7)),
    (-0.0, b"i" + struct.pack("<q", 0)),
    (2.5, b"d" + struct.pack("<d", 2.5)),
    (float("-nan"), b"d" + bytes.fromhex("000000000000f87f")),
    (2**64, b"I+" + struct.pack("<I", 9) + (2**64).to_bytes(9, "little")),
    (-(2**64), b"I-" + struct.pack("<I", 9) + (2**64).to_bytes(9, "little")),
    ("ab", b"s" + struct.pack("<I", 2) + b"ab"),
    ("\ud800", b"s" + struct.pack("<I", 3) + b"\xed\xa0\x80"),
    (b"ab", b"b" + struct.pack("<I", 2) + b"ab"),
    ("y" * 129, b"S" + struct.pack("<QQ", 129, xxhash.xxh3_64_intdigest(b"y" * 129))),
    ([1, None], b"l" + struct.pack("<I", 2) + b"i" + struct.pack("<q", 1) + b"n"),
    ({"k": None}, b"m" + struct.pack("<I", 1) + b"s\x01\x00\x00\x00kn"),
    (
        {"b": 2, "a": 1},  # pairs sorted bytewise, whatever the insertion order
        b"m"
        + struct.pack("<I", 2)
        + b"s\x01\x00\x00\x00a"
        + b"i"
        + struct.pack("<q", 1)
        + b"s\x01\x00\x00\x00b"
        + b"i"
        + struct.pack("<q", 2),
    ),
    (
        {"a": None, 1: None},  # mixed key types: 'i' (0x69) sorts before 's' (0x73)
        b"m" + struct.pack("<I", 2) + b"i" + struct.pack("<q", 1) + b"n" + b"s\x01\x00\x00\x00an",
    ),
    (
        {"longer": 0, "z": 0},
        b"m"
        + struct.pack("<I", 2)
        + b"s\x01\x00\x00\x00z"
        + b"i"
        + bytes(8)
        + b"s\x06\x00\x00\x00longer"
        + b"i"
        + bytes(8),
    ),
    (frozenset(), b"e" + struct.pack("<I", 0)),
    (
        frozenset({2, 1}),
        b"e" + struct.pack("<I", 2) + b"i" + struct.pack("<q", 1) + b"i" + struct.pack("<q", 2),
    ),
]


def test_format_version_and_limits(impl):
    h = impl.hashing
    assert h.HASH_FORMAT_VERSION == 1
    assert h.MAX_DEPTH == 256
    assert h.INLINE_MAX == 128


@pytest.mark.parametrize("src,expected", GOLDEN, ids=[g[0] for g in GOLDEN])
def test_golden_hashes(impl, src, expected):
    assert impl.hashing.canonical_hash(eval(src)) == expected  # noqa: S307 - literals only


@pytest.mark.parametrize("value,expected", GOLDEN_BYTES, ids=repr)
def test_golden_bytes(impl, value, expected):
    assert impl.hashing.canonical_bytes(value) == expected
    assert impl.hashing.canonical_hash(value) == xxhash.xxh3_64_intdigest(expected)


# ---------------------------------------------------------------- JSON meaning


class Color(enum.IntEnum):
    RED = 3


class Mode(str, enum.Enum):
    FAST = "fast"


class Point(NamedTuple):
    x: int
    y: int


class MyFloat(float):
    pass


class MyList(list):
    pass


@pytest.mark.parametrize(
    "a,b",
    [
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}),
        (1, 1.0),
        (0.0, -0.0),
        (-0.0, 0),
        (float("nan"), -float("nan")),
        (float("nan"), struct.unpack("<d", bytes.fromhex("0100000000f0ff7f"))[0]),
        ((1, 2), [1, 2]),
        (2**70, float(2**70)),
        (1e300, int(1e300)),
        (Color.RED, 3),
        (Mode.FAST, "fast"),
        (Point(1, 2), [1, 2]),
        (MyFloat(2.5), 2.5),
        (MyList([1]), [1]),
        (collections.OrderedDict([("b", 1), ("a", 2)]), {"a": 2, "b": 1}),
        (collections.defaultdict(int, {"a": 1}), {"a": 1}),
        ({1, 2, 3}, frozenset([3, 2, 1])),
        ({1: "x"}, {1.0: "x"}),
        (bytearray(b"ab"), b"ab"),
        ("x" * 5000, "".join(["x"] * 5000)),
    ],
    ids=repr,
)
def test_equal_meaning_equal_hash(impl, a, b):
    h = impl.hashing.canonical_hash
    assert h(a) == h(b)


@pytest.mark.parametrize(
    "a,b",
    [
        (True, 1),
        (False, 0),
        (None, 0),
        (None, "null"),
        ("1", 1),
        ("ab", b"ab"),
        ([], {}),
        ([1, 2], [2, 1]),
        ({1, 2}, [1, 2]),
        ({"a": 1}, {"a": 2}),
        ({"a": 1}, {"b": 1}),
        ({"a": [1]}, {"a": 1}),
        ([[1], 2], [1, [2]]),
        (1.5, 1.25),
        (float("inf"), float("-inf")),
        (float("inf"), float("nan")),
        (2**63, 2**63 - 1),
        (-(2**64), 2**64),
        ("x" * 128, "x" * 129),
        ({"a": None}, {"a": None, "b": None}),
        ([{}], [[]]),
        ("a", "a\x00"),
    ],
    ids=repr,
)
def test_different_meaning_different_hash(impl, a, b):
    h = impl.hashing.canonical_hash
    assert h(a) != h(b)


def test_hash_is_unsigned_64_bit(impl):
    for v in (None, "x" * 40_000, {"a": [1, 2, {"b": 3}]}, -(2**200)):
        out = impl.hashing.canonical_hash(v)
        assert type(out) is int and 0 <= out < 2**64


def test_strip_removes_keys_at_every_depth(impl):
    h = impl.hashing.canonical_hash
    noisy = {
        "ok": True,
        "messageId": "m-1",
        "nested": [{"ts": 1, "text": "hi", "deeper": {"ts": 9}}],
    }
    clean = {"ok": True, "nested": [{"text": "hi", "deeper": {}}]}
    assert h(noisy, strip={"messageId", "ts"}) == h(clean)
    assert h(noisy, strip=["messageId", "ts"]) == h(clean)
    assert h(noisy, strip=frozenset({"messageId", "ts"})) == h(clean)
    assert h(noisy) != h(clean)
    # exact, case-sensitive matching
    assert h({"TS": 1}, strip={"ts"}) != h({}, strip={"ts"})
    with pytest.raises(TypeError, match="collection of keys"):
        h(noisy, strip="ts")


def test_strip_of_absent_keys_changes_nothing(impl):
    h = impl.hashing.canonical_hash
    v = {"a": [1, {"b": 2}], "c": "d"}
    assert h(v, strip={"zzz", "messageId"}) == h(v) == h(v, strip=())


# ---------------------------------------------------------------- hostile input


def test_cycles_hash_to_a_fixed_marker(impl):
    h = impl.hashing.canonical_hash
    a = [1]
    a.append(a)
    b = [1]
    b.append(b)
    assert h(a) == h(b)
    d = {"k": 1}
    d["self"] = d
    e = {"k": 1}
    e["self"] = e
    assert h(d) == h(e)
    assert h(d) != h({"k": 1})
    # a cycle through a dict and a list
    x: dict = {"items": []}
    x["items"].append(x)
    y: dict = {"items": []}
    y["items"].append(y)
    assert h(x) == h(y)


def test_shared_references_hash_in_full(impl):
    h = impl.hashing.canonical_hash
    shared = [1, 2]
    assert h([shared, shared]) == h([[1, 2], [1, 2]])
    inner = {"a": 1}
    assert h({"x": inner, "y": inner}) == h({"x": {"a": 1}, "y": {"a": 1}})


def _nested_list(depth):
    v: list = []
    for _ in range(depth):
        v = [v]
    return v


def _nested_dict(depth):
    v: dict = {}
    for _ in range(depth):
        v = {"k": v}
    return v


def test_depth_limit_boundary(impl):
    h = impl.hashing
    h.canonical_hash(_nested_list(h.MAX_DEPTH - 1))  # MAX_DEPTH containers: allowed
    with pytest.raises(ValueError, match="nesting deeper than 256"):
        h.canonical_hash(_nested_list(h.MAX_DEPTH))


@pytest.mark.parametrize("make", [_nested_list, _nested_dict], ids=["list", "dict"])
def test_a_million_levels_raise_value_error_not_a_crash(impl, make):
    deep = make(1_000_000)
    with pytest.raises(ValueError, match=r"nesting deeper than 256 levels at value"):
        impl.hashing.canonical_hash(deep)
    # the structure must be torn down iteratively, or CPython itself overflows on dealloc
    while deep:
        deep = deep[0] if isinstance(deep, list) else deep["k"]
    gc.collect()


def test_unsupported_type_names_the_path(impl):
    h = impl.hashing.canonical_hash
    with pytest.raises(TypeError, match=r'unsupported type \'object\' at value\["opts"\]\[2\]'):
        h({"opts": [1, 2, object()]})
    with pytest.raises(TypeError, match=r"unsupported dict key: unsupported type 'object'"):
        h({object(): 1})
    with pytest.raises(TypeError, match=r"at value\[0\]\[1\]"):
        h([(1, 1j)])
    with pytest.raises(TypeError, match=r'at value\["a b"\]'):
        h({"a b": memoryview(b"x")})
    with pytest.raises(TypeError, match=r'at value\["q\\""\]'):
        h({'q"': 1j})


def test_default_converts_unknown_types(impl):
    h = impl.hashing.canonical_hash

    class Path:
        def __init__(self, p):
            self.p = p

    conv = lambda o: {"path": o.p} if isinstance(o, Path) else repr(o)  # noqa: E731
    assert h({"x": Path("a.ts")}, default=conv) == h({"x": {"path": "a.ts"}})
    assert h([1j], default=conv) == h(["1j"])
    # a converter that never converges hits the depth limit instead of looping forever
    with pytest.raises(ValueError, match="default= conversions"):
        h(object(), default=lambda o: object())
    # errors raised by the converter propagate unchanged
    with pytest.raises(KeyError):
        h([object()], default=lambda o: {}["missing"])


@pytest.mark.parametrize("keys", [("a", "b"), (1, 2)], ids=["str-keys", "int-keys"])
def test_callbacks_mutating_the_container_do_not_crash(impl, keys):
    """A default= callback that mutates the container being hashed: both twins hash the
    snapshot taken when the container was entered (no crash, no use-after-free)."""
    h = impl.hashing.canonical_hash
    d = {keys[0]: object(), keys[1]: 1}

    def evil(o):
        d.clear()
        d["new"] = list(range(100))
        return "x"

    assert h(d, default=evil) == h({keys[0]: "x", keys[1]: 1})
    lst = [object(), 1, 2]

    def shrink(o):
        lst.clear()
        return "x"

    assert isinstance(h(lst, default=shrink), int)


def test_lone_surrogates_and_unicode(impl):
    h = impl.hashing.canonical_hash
    assert h("\ud800") != h("\udc00")
    assert h("a\ud800b") == h("a\ud800b")
    assert h({"\udcff": "\U0001f600"}) == h({"\udcff": "\U0001f600"})
    assert h("é" * 300) != h("e" * 300)


def test_large_values_give_fixed_size_hashes(impl):
    h = impl.hashing.canonical_hash
    big = "line of output\n" * 300_000  # 4.5 MB
    assert h(big) == h("".join(["line of output\n"] * 300_000))
    assert h(big) != h(big + " ")
    assert h({"command": "x" * 20_000}) == h({"command": "x" * 20_000})
    assert h(b"\x00" * 3_000_000) != h(b"\x00" * 3_000_001)


def test_threads_hashing_big_strings_concurrently(impl):
    h = impl.hashing.canonical_hash
    blobs = [("%d" % i) * 400_000 for i in range(4)]
    expected = [h(b) for b in blobs]
    results: dict = {}

    def work(i):
        results[i] = [h(blobs[i % 4]) for _ in range(5)]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, got in results.items():
        assert got == [expected[i % 4]] * 5


# ---------------------------------------------------------------- the twins agree (hypothesis)

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=40)
    | st.text(min_size=120, max_size=300)
    | st.binary(max_size=200)
)
keys = (
    st.text(max_size=12)
    | st.integers(-5, 5)
    | st.booleans()
    | st.none()
    | st.floats(allow_nan=False)
)
json_like = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=6)
        | st.tuples(children, children)
        | st.dictionaries(keys, children, max_size=6)
        | st.frozensets(st.integers(-3, 3) | st.text(max_size=3), max_size=4)
    ),
    max_leaves=40,
)


def _shuffle_keys(v, rnd):
    if isinstance(v, dict):
        items = [(k, _shuffle_keys(x, rnd)) for k, x in v.items()]
        rnd.shuffle(items)
        return dict(items)
    if isinstance(v, list):
        return [_shuffle_keys(x, rnd) for x in v]
    if isinstance(v, tuple):
        return tuple(_shuffle_keys(x, rnd) for x in v)
    return v


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_like)
def test_twins_give_the_same_bytes(value):
    if _native_flag.NO_EXTENSIONS:
        pytest.skip("compiled core deselected")
    c = _native_flag.load_twin("hashing", "c")
    py = _native_flag.load_twin("hashing", "py")
    assert c.canonical_bytes(value) == py.canonical_bytes(value)
    assert c.canonical_hash(value) == py.canonical_hash(value)
    assert c.canonical_hash(value, strip={"a", "", 1}) == py.canonical_hash(
        value, strip={"a", "", 1}
    )


@settings(max_examples=200, deadline=None)
@given(json_like, st.randoms(use_true_random=False))
def test_key_order_never_changes_the_hash(value, rnd):
    for name in ("py",) if _native_flag.NO_EXTENSIONS else ("c", "py"):
        h = _native_flag.load_twin("hashing", name).canonical_hash
        assert h(_shuffle_keys(value, rnd)) == h(value)


@settings(max_examples=200, deadline=None)
@given(json_like)
def test_stripping_absent_keys_changes_nothing(value):
    for name in ("py",) if _native_flag.NO_EXTENSIONS else ("c", "py"):
        h = _native_flag.load_twin("hashing", name).canonical_hash
        assert h(value, strip={"\x00never-a-key\x00"}) == h(value)


def _json_roundtrip_equal(v):
    """Values equal in JSON meaning: a JSON round trip (tuples -> lists, int-valued floats)."""
    return json.loads(json.dumps(v))


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers(-(2**53), 2**53)
        | st.text(max_size=10)
        | st.floats(allow_nan=False, allow_infinity=False),
        lambda ch: st.lists(ch, max_size=4) | st.dictionaries(st.text(max_size=5), ch, max_size=4),
        max_leaves=20,
    )
)
def test_equal_values_give_equal_hashes(value):
    for name in ("py",) if _native_flag.NO_EXTENSIONS else ("c", "py"):
        h = _native_flag.load_twin("hashing", name).canonical_hash
        assert h(value) == h(_json_roundtrip_equal(value))


def test_no_collision_in_100k_distinct_values(impl):
    h = impl.hashing.canonical_hash
    rnd = random.Random(20261129)
    values = set()
    n = 100_000 if impl.name == "c" else 20_000  # the pure twin is the slow reference
    while len(values) < n:
        kind = rnd.randrange(4)
        if kind == 0:
            values.add(("read", f"src/{rnd.randrange(10**9)}.ts"))
        elif kind == 1:
            values.add(
                (
                    "cmd",
                    " ".join(
                        rnd.choice("ls cat grep sed -n -rn src/ *.py".split())
                        for _ in range(rnd.randrange(1, 8))
                    ),
                    rnd.randrange(100),
                )
            )
        elif kind == 2:
            values.add(("num", rnd.randrange(-(10**12), 10**12), rnd.random()))
        else:
            values.add(
                (
                    "opts",
                    tuple(
                        sorted(
                            (f"k{rnd.randrange(50)}", rnd.randrange(5))
                            for _ in range(rnd.randrange(1, 5))
                        )
                    ),
                )
            )
    # encode each as the JSON-like structure a tool would send
    hashes = set()
    for v in values:
        payload = {"tool": v[0], "args": list(v[1:]) if v[0] != "opts" else dict(v[1])}
        hashes.add(h(payload))
    distinct_payloads = len(
        {
            json.dumps(
                {"tool": v[0], "args": list(v[1:]) if v[0] != "opts" else dict(v[1])},
                sort_keys=True,
            )
            for v in values
        }
    )
    assert len(hashes) == distinct_payloads


def test_inf_and_nan_are_numbers_not_ints(impl):
    h = impl.hashing.canonical_hash
    assert h(math.inf) == h(float("inf"))
    assert h(math.nan) == h(float("nan"))
    assert h(1e16) == h(10**16)
    assert h(1e16 + 2) == h(10**16 + 2)


# ---------------------------------------------------------------- dict storage shapes
# The compiled core reads a str-keyed dict's entries in place on CPython 3.11-3.13 (see
# src/_native/hashing.pyx) and walks every other dict with PyDict_Next: each storage shape a
# dict can have must give the pure twin's bytes.


def _dict_shapes():
    class Obj:
        def __init__(self):
            self.path = "a.py"
            self.limit = 20

    deleted = {"a": 1, "b": 2, "c": 3, "d": [4]}
    del deleted["b"]  # a deleted slot inside the entries
    regrown = dict.fromkeys(f"k{i}" for i in range(40))
    for i in range(35):
        del regrown[f"k{i}"]
    regrown["new"] = "x"
    general = {"a": 1, 2: "two"}
    del general[2]  # str keys only now, in a table built for any key type
    reinserted = {"z": 1, "y": 2}
    del reinserted["z"]
    reinserted["z"] = 3
    emptied = {"a": 1, "b": 2}
    del emptied["a"], emptied["b"]
    return {
        "deleted slot": deleted,
        "mostly deleted, then grown": regrown,
        "general table, str keys": general,
        "delete then re-insert": reinserted,
        "split table (an instance dict)": vars(Obj()),
        "empty after deletes": emptied,
        "nested shapes": {"outer": [deleted, vars(Obj()), general]},
    }


@pytest.mark.parametrize("shape", sorted(_dict_shapes()))
def test_every_dict_storage_shape_gives_the_twin_bytes(shape, impl):
    value = _dict_shapes()[shape]
    py = _native_flag.load_twin("hashing", "py")
    assert impl.hashing.canonical_bytes(value) == py.canonical_bytes(value)
    assert impl.hashing.canonical_hash(value) == py.canonical_hash(value)
    assert impl.hashing.canonical_hash(value) == impl.hashing.canonical_hash(dict(value))


def test_in_place_dict_walk_is_on_where_its_layout_is_known():
    import platform
    import sys
    import sysconfig

    if _native_flag.NO_EXTENSIONS:
        pytest.skip("LOOPCORE_NO_EXTENSIONS=1: no compiled core")
    c = _native_flag.load_twin("hashing", "c")
    known = platform.python_implementation() == "CPython" and (3, 11) <= sys.version_info < (3, 14)
    free_threaded = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
    assert c._DICT_IN_PLACE == (known and not free_threaded)
