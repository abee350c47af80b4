"""The per-step helpers of the ingest path: the compiled encoder's own copies of the encoder's
string rules against the pure reference (loopcore.encoded), and the loader's shortcut that
skips the unhashable-step check for values that cannot fail it."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from loopcore import _native_flag
from loopcore.adapters import _plain
from loopcore.encoded import _drop_comment_lines, _shell_command, degenerate_tokens
from loopcore.hashing import MAX_MEMBERS, canonical_hash
from loopcore.trace import Step


@pytest.fixture(scope="module")
def native():
    if _native_flag.NO_EXTENSIONS:
        pytest.skip("LOOPCORE_NO_EXTENSIONS=1: no compiled twin to compare")
    return _native_flag.load_twin("encode", "c")


LINES = st.sampled_from(
    ["", " ", "\t", "# a note", "  # indented note", "#", "cat a.py", "ls -la", "x = 1  # tail"]
)
COMMANDS = st.one_of(
    st.lists(LINES, max_size=6).map("\n".join),
    st.text(alphabet="# \n\tab\u2028\x0c", max_size=12),
    st.sampled_from(["view", "str_replace", "create", "undo_edit", "write", "insert", "cat a"]),
)
VALUES = st.one_of(st.none(), st.integers(-2, 2), COMMANDS, st.lists(COMMANDS, max_size=2))
ARGS = st.one_of(
    VALUES,
    st.dictionaries(st.sampled_from(["command", "cmd", "script", "path", "x"]), VALUES, max_size=4),
)


@given(ARGS)
@hsettings(max_examples=500, deadline=None)
def test_compiled_comment_stripping_and_shell_command_are_the_pure_ones(native, args):
    want = _drop_comment_lines(args)
    got = native.drop_comment_lines(args)
    assert got == want and type(got) is type(want)
    assert (got is args) == (want is args)  # unchanged args are the same object in both
    assert native.shell_command(args) == _shell_command(args)
    assert native.shell_command(want) == _shell_command(want)


LOOP = "the same sentence again and again, over and over in this reply; "
TEXTS = st.one_of(
    st.none(),
    st.sampled_from(["", "short", "x" * 58, "x" * 59, LOOP * 12, LOOP * 3 + "end", "é" * 80]),
    st.text(alphabet="ab \n", max_size=200),
    st.integers(1, 30).map(lambda n: ("abcdefghij" * 6 + "\n") * n),
)


@given(
    TEXTS,
    st.integers(0, 2000),
    st.integers(0, 500),
    st.sampled_from(["", "bash"]),
    st.sampled_from([None, "bad action"]),
)
@hsettings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_compiled_degenerate_tokens_are_the_pure_ones(native, text, turn, out, name, rejected):
    step = Step("s", 0, "other", name, text=text, tokens_turn=turn, rejected=rejected)
    step.tokens_out = out
    assert native.degenerate_tokens(step) == degenerate_tokens(step)


def _hash_fails(value) -> bool:
    try:
        canonical_hash(value, default=repr)
    except ValueError:
        return True
    return False


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=12,
)


@given(JSONISH)
@hsettings(max_examples=400, deadline=None)
def test_plain_values_are_never_refused_by_the_hash(value):
    if _plain(value):
        assert not _hash_fails(value) and not _hash_fails([value, value])


def test_plain_vouches_only_for_shallow_small_values():
    deep: list = []
    node = deep
    for _ in range(300):
        node.append([])
        node = node[0]
    assert _plain("x") and _plain({"command": "ls", "n": 3}) and _plain([1, None, "a"])
    assert not _plain(deep) and _hash_fails(deep)
    assert not _plain({"k": [1]}) and not _plain((1, 2)) and not _plain(object())
    big = list(range(MAX_MEMBERS + 1))
    assert not _plain(big) and _hash_fails(big)
