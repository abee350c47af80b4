"""canonical_hash under hostile input: callbacks that mutate what is being hashed, threads that
rebind it, re-entrant converters, overriding subclasses, exponential sharing, error paths.

Crashes are run in a subprocess (a segfault must fail the test, not the run); every case runs
on both twins (the ``impl`` fixture), and the twins must agree on the answer or the error.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from conftest import package_env

from loopcore import _native_flag


def _run(impl, body: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run *body* in a fresh interpreter with ``h`` = the twin's hashing module."""
    code = textwrap.dedent(f"""
        import sys
        from loopcore import _native_flag
        h = _native_flag.load_twin("hashing", {impl.name!r})
        IMPL = {impl.name!r}
    """) + textwrap.dedent(body)
    env = package_env({"PATH": "/usr/bin:/bin"})
    for name in ("LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS", "PYTHONMALLOC"):  # a sanitizer run
        if name in os.environ:
            env[name] = os.environ[name]
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env
    )


def _ok(res: subprocess.CompletedProcess) -> str:
    assert res.returncode == 0, f"rc={res.returncode}\n{res.stdout}\n{res.stderr}"
    return res.stdout


# ---------------------------------------------------------------- mutation from callbacks


def test_int_subclass_whose_int_clears_the_dict(impl):
    out = _ok(
        _run(
            impl,
            """
        d = {}
        class Evil(int):
            def __int__(self):
                d.clear()
                d.update({str(i): [i] * 50 for i in range(100)})
                return 7
            __index__ = __int__
        d.update({"k%d" % i: [i] * 20 for i in range(40)})
        d["big"] = Evil(2 ** 70)
        d[Evil(2 ** 80)] = "key"
        plain = {"k%d" % i: [i] * 20 for i in range(40)}
        plain["big"] = 2 ** 70
        plain[2 ** 80] = "key"
        expect = h.canonical_hash(plain)
        for _ in range(3):
            got = h.canonical_hash(dict(d), strip={"zz"})
        small = {"a": Evil(2 ** 70), "b": 1}
        print(got == expect, h.canonical_hash(small) == h.canonical_hash({"a": 2 ** 70, "b": 1}))
    """,
        )
    )
    assert out.split() == ["True", "True"]


def test_strip_member_eq_that_clears_or_grows_the_dict(impl):
    out = _ok(
        _run(
            impl,
            """
        results = []
        for mode in ("clear", "grow"):
            for n in (3, 40):   # the fast path (<= 32 keys) and the general path
                d = {"k%d" % i: ["v" * 200, i] for i in range(n)}
                orig = {k: list(v) for k, v in d.items()}
                class Collide:
                    def __hash__(self):
                        return hash("k1")
                    def __eq__(self, other):
                        if mode == "clear":
                            d.clear()
                        else:
                            for i in range(1000):
                                d["new%d" % i] = [i]
                        return False
                got = h.canonical_hash(d, strip={Collide(), "absent"})
                results.append(got == h.canonical_hash(orig))
        print(results)
    """,
        )
    )
    assert out.strip() == "[True, True, True, True]"


def test_str_subclass_key_whose_hash_clears_the_dict(impl):
    out = _ok(
        _run(
            impl,
            """
        d = {}
        class Key(str):
            def __hash__(self):
                d.clear()
                return str.__hash__(self)
            __eq__ = str.__eq__
        results = []
        for n in (2, 40):
            src = {Key("key%d" % i): ["x" * 300, i] for i in range(n)}
            d.clear()
            d.update(src)  # a dict's stored hashes are reused: no __hash__ call here
            assert len(d) == n
            plain = {"key%d" % i: ["x" * 300, i] for i in range(n)}
            expect = h.canonical_hash(plain)
            results.append(h.canonical_hash(d, strip={"nope"}) == expect)
        print(results)
    """,
        )
    )
    assert out.strip() == "[True, True]"


def test_big_values_rebound_by_another_thread_while_digesting(impl):
    # > 32 keys takes the general dict path; megabyte strings are digested without the GIL
    _ok(
        _run(
            impl,
            """
        import threading
        d = {"k%02d" % i: "x" * (1 << 20) for i in range(40)}
        stop = False
        def churn():
            i = 0
            while not stop:
                i += 1
                d["k%02d" % (i % 40)] = chr(97 + i % 26) * ((1 << 20) + i % 7)
        t = threading.Thread(target=churn)
        t.start()
        from loopcore import Guard
        g = Guard(implementation=IMPL)
        try:
            for i in range(60):
                h.canonical_hash(d)
                h.canonical_hash([d, d["k01"]])
                g.check("s", "write", d)
                g.record("s", "write", d, d, tokens=1)
        finally:
            stop = True
            t.join()
        print("ok")
    """,
            timeout=300,
        )
    )


def test_re_entrant_default_is_bounded_and_raises_value_error(impl):
    out = _ok(
        _run(
            impl,
            """
        class Node:
            def __init__(self, inner):
                self.inner = inner
        v = 0
        for _ in range(5000):
            v = Node(v)
        def conv(o):
            return h.canonical_hash(o.inner, default=conv)
        try:
            h.canonical_hash(v, default=conv)
        except ValueError as exc:
            print("ValueError", "nesting deeper than 256" in str(exc))
        # shallow re-entry still works and matches the plain value
        print(h.canonical_hash(Node(Node(5)), default=conv) == h.canonical_hash(h.canonical_hash(h.canonical_hash(5))))
    """,
        )
    )
    assert out.split() == ["ValueError", "True", "True"]


def test_re_entrant_default_in_a_small_thread_stack(impl):
    _ok(
        _run(
            impl,
            """
        import threading
        threading.stack_size(1 << 20)
        class Node:
            def __init__(self, inner):
                self.inner = inner
        v = 0
        for _ in range(5000):
            v = Node(v)
        def conv(o):
            return h.canonical_hash(o.inner, default=conv)
        box = []
        def work():
            try:
                h.canonical_hash(v, default=conv)
            except ValueError as exc:
                box.append(type(exc).__name__)
        t = threading.Thread(target=work)
        t.start(); t.join()
        assert box == ["ValueError"], box
    """,
        )
    )


# ---------------------------------------------------------------- the subclass rule


class _Items(dict):
    def items(self):
        return [("forged", 1)]

    def __iter__(self):
        return iter(["forged"])

    def keys(self):
        return ["forged"]


class _List(list):
    def __iter__(self):
        return iter([99])

    def __len__(self):
        return 1


class _Tuple(tuple):
    def __iter__(self):
        return iter([99])

    def __len__(self):
        return 1


class _Str(str):
    def encode(self, *a, **k):
        return b"forged"

    def __str__(self):
        return "forged"


class _Int(int):
    def __int__(self):
        return 99

    def __index__(self):
        return 99

    def __neg__(self):
        return 99

    def __lt__(self, other):
        return True


class _Float(float):
    def __float__(self):
        return 99.5


class _Bytes(bytes):
    def __bytes__(self):
        return b"forged"


class _Set(set):
    def __iter__(self):
        return iter([99])


class _Frozen(frozenset):
    def __iter__(self):
        return iter([99])


SUBCLASS_CASES = [
    (lambda: _Items({"a": 1, "b": [2]}), {"a": 1, "b": [2]}),
    (lambda: _Items({i: i for i in range(40)}), {i: i for i in range(40)}),
    (lambda: _List([1, 2, 3]), [1, 2, 3]),
    (lambda: _Tuple((1, 2, 3)), (1, 2, 3)),
    (lambda: _Str("héllo"), "héllo"),
    (lambda: _Str("plain"), "plain"),
    (lambda: {_Str("k"): 1, "z": 2}, {"k": 1, "z": 2}),
    (lambda: _Int(5), 5),
    (lambda: _Int(2**70), 2**70),
    (lambda: _Int(-(2**70)), -(2**70)),
    (lambda: _Float(2.25), 2.25),
    (lambda: _Float(4.0), 4),
    (lambda: _Bytes(b"raw"), b"raw"),
    (lambda: _Set({1, 2}), {1, 2}),
    (lambda: _Frozen({1, 2}), frozenset({1, 2})),
]


@pytest.mark.parametrize(
    "make,plain", SUBCLASS_CASES, ids=[str(i) for i in range(len(SUBCLASS_CASES))]
)
def test_subclasses_hash_as_their_base_storage(impl, make, plain):
    h = impl.hashing
    assert h.canonical_bytes(make()) == h.canonical_bytes(plain)
    assert h.canonical_hash({"x": [make()]}) == h.canonical_hash({"x": [plain]})


# ---------------------------------------------------------------- errors: same path, documented type


def _error(mod, value, **kw):
    with pytest.raises((TypeError, ValueError)) as info:
        mod.canonical_hash(value, **kw)
    return type(info.value).__name__, str(info.value)


TWO_FAILURES = [
    lambda: {"b": object(), "a": 1j},
    lambda: {"k%02d" % (39 - i): (object() if i in (3, 30) else i) for i in range(40)},
    lambda: {"é": object(), "a": 1j, "z": 1},
    lambda: {"x" * 200: object(), "a": 1j},
    lambda: {_Str("b"): object(), "a": 1j},
    lambda: [{"m%d" % i: (1j if i % 7 == 3 else i) for i in range(50)}],
]


@pytest.mark.c_extension
@pytest.mark.parametrize("make", TWO_FAILURES, ids=[str(i) for i in range(len(TWO_FAILURES))])
def test_twins_name_the_same_path_when_two_values_fail(make):
    if _native_flag.NO_EXTENSIONS:
        pytest.skip("needs both twins")
    c, py = _native_flag.load_twin("hashing", "c"), _native_flag.load_twin("hashing", "py")
    assert _error(c, make()) == _error(py, make())


def _deep_tuple(n):
    v: tuple = ()
    for _ in range(n):
        v = (v,)
    return v


DEEP_IN_KEYS = [
    lambda: {frozenset({_deep_tuple(300)})},
    lambda: {_deep_tuple(300)},
    lambda: {_deep_tuple(300): 1},
    lambda: [{"a": {_deep_tuple(300): 1}}],
]


@pytest.mark.parametrize("make", DEEP_IN_KEYS, ids=[str(i) for i in range(len(DEEP_IN_KEYS))])
def test_nesting_past_max_depth_in_set_members_and_keys_is_value_error(impl, make):
    kind, msg = _error(impl.hashing, make())
    assert kind == "ValueError"
    assert "nesting deeper than 256 levels at value" in msg
    assert len(msg) < 1000


@pytest.mark.c_extension
@pytest.mark.parametrize("make", DEEP_IN_KEYS, ids=[str(i) for i in range(len(DEEP_IN_KEYS))])
def test_twins_agree_on_deep_key_errors(make):
    if _native_flag.NO_EXTENSIONS:
        pytest.skip("needs both twins")
    c, py = _native_flag.load_twin("hashing", "c"), _native_flag.load_twin("hashing", "py")
    assert _error(c, make()) == _error(py, make())


def test_failing_repr_in_an_error_path_does_not_replace_the_error(impl):
    class Bad:
        def __repr__(self):
            raise RuntimeError("no repr")

        def __hash__(self):
            return 1

    kind, msg = _error(impl.hashing, {Bad(): 1})
    assert kind == "TypeError"
    assert "unsupported dict key: unsupported type 'Bad' at value[<Bad>]" in msg


# ---------------------------------------------------------------- exponential sharing


def test_exponentially_shared_lists_raise_a_clear_error(impl):
    out = _ok(
        _run(
            impl,
            """
        import os, resource
        if "asan" not in os.environ.get("LD_PRELOAD", ""):  # ASan reserves terabytes of shadow
            resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
        x = []
        for _ in range(40):
            x = [x, x]
        try:
            h.canonical_hash(x)
        except ValueError as exc:
            print("ValueError", str(exc))
        print(h.MAX_MEMBERS)
    """,
            timeout=120,
        )
    )
    first, second = out.strip().splitlines()
    assert first.startswith(
        "ValueError canonical_hash: more than 1048576 container members in one value at value[0]"
    )
    assert second == "1048576"


def test_members_limit_boundary(impl):
    h = impl.hashing
    assert h.canonical_hash([0] * h.MAX_MEMBERS) == h.canonical_hash([0] * h.MAX_MEMBERS)
    with pytest.raises(
        ValueError, match="more than 1048576 container members in one value at value$"
    ):
        h.canonical_hash([0] * (h.MAX_MEMBERS + 1))
    with pytest.raises(ValueError, match=r"at value\[1\]$"):
        h.canonical_hash([[0] * (h.MAX_MEMBERS - 5), [0] * 10])


def test_shared_but_small_structures_keep_their_hash(impl):
    h = impl.hashing
    x: list = [1]
    for _ in range(12):
        x = [x, x]
    y: list = [1]
    for _ in range(12):
        y = [y, [*y]]  # the same meaning, nothing shared at the top
    assert h.canonical_hash(x) == h.canonical_hash(y)


def test_python_code_that_hashes_again_from_strip_or_repr_is_bounded(impl):
    out = _ok(
        _run(
            impl,
            """
        armed = []
        class Key(str):
            def __hash__(self):
                if armed:
                    h.canonical_hash(D, strip={"s"})
                return str.__hash__(self)
            __eq__ = str.__eq__
        D = {Key("x"): 1}
        armed.append(1)
        try:
            h.canonical_hash(D, strip={"s"})
        except ValueError as exc:
            print("strip", "nesting deeper than 256" in str(exc))
        class Loud:
            def __hash__(self):
                return 1
            def __repr__(self):
                h.canonical_hash([{Loud(): 1}])
                return "Loud"
        try:
            h.canonical_hash({Loud(): 1})
        except TypeError as exc:
            print("repr", str(exc))
    """,
        )
    )
    strip_line, repr_line = out.strip().splitlines()
    assert strip_line == "strip True"
    assert (
        repr_line
        == "repr canonical_hash: unsupported dict key: unsupported type 'Loud' at value[<Loud>]"
    )
