"""encode() and the EncodedTrace columns (the compiled encoder against its pure twin), and the
kernels' input contract on both twins."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest
from conftest import twin
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from loopcore import _native_flag
from loopcore.burn import Step, Trace
from loopcore.encoded import (
    _STEP_COLUMNS,
    ABSOLUTE,
    DEFAULT_SETTINGS,
    ERROR,
    ESTIMATED,
    EXIT_NONZERO,
    FINDING_KINDS,
    HAS_OUTCOME,
    NO_OP,
    REJECTED,
    BurnSettings,
    EncodedTrace,
    encode,
    encode_with,
)
from loopcore.hashing import canonical_hash


def s(
    turn, kind, name, target=None, args=None, result=None, error=None, tokens=10, session="s", **kw
):
    return Step(session, turn, kind, name, target, args, result, error, tokens, 1, **kw)


def sample():
    t1 = Trace(
        [
            s(0, "observe", "Read", "a.ts", {"p": "a.ts"}, "A"),
            s(0, "observe", "Bash", ("b.ts", "a.ts"), {"c": "cat a.ts b.ts"}, "AB", tokens=5),
            s(1, "mutate", "Edit", "a.ts", {"old_string": "x", "new_string": "y"}, "ok"),
            s(1, "mutate", "Write", "b.ts", {"content": "B"}, "ok", tokens_estimated=True),
            s(2, "exec", "Bash", None, {"c": "make"}, None, error="exit 2"),
            s(3, "ask", "Ask", None, {"q": "?"}),
        ],
        session="one",
    )
    t2 = Trace(
        [
            s(0, "observe", "Read", "a.ts", {"p": "a.ts"}, "A", session="two"),
            s(1, "other", "todo", None, None, session="two"),
        ],
        session="two",
    )
    return [t1, t2]


def test_encode_columns():
    enc = encode(sample())
    assert len(enc) == 8 and enc.n_traces == 2
    assert enc.trace_offsets.tolist() == [0, 6, 8]
    assert enc.sessions == ["one", "two"]
    assert enc.session.tolist() == [0] * 6 + [1, 1]
    assert enc.turn.tolist() == [0, 0, 1, 1, 2, 3, 0, 1]
    assert enc.kind.tolist() == [0, 0, 1, 1, 2, 3, 0, 4]
    assert enc.tokens.tolist() == [11, 6, 11, 11, 11, 11, 11, 11]
    assert [enc.tools[i] for i in enc.tool] == [
        "Read",
        "Bash",
        "Edit",
        "Write",
        "Bash",
        "Ask",
        "Read",
        "todo",
    ]
    assert enc.args_hash[0] == canonical_hash({"p": "a.ts"})
    assert enc.result_hash[0] == canonical_hash(["A", None])
    assert enc.result_hash[4] == canonical_hash([None, "exit 2"])
    assert enc.result_hash[5] == 0
    assert enc.flags.tolist() == [1, 1, 1, 1 | ESTIMATED | ABSOLUTE, HAS_OUTCOME | ERROR, 0, 1, 0]
    assert enc.error.tolist() == [False] * 4 + [True] + [False] * 3
    assert enc.has_outcome.tolist() == [True] * 5 + [False, True, False]
    for col, dtype in (
        ("session", np.int32),
        ("turn", np.int64),
        ("kind", np.uint8),
        ("tool", np.int32),
        ("target", np.int32),
        ("args_hash", np.uint64),
        ("result_hash", np.uint64),
        ("flags", np.uint16),
        ("tokens", np.int64),
        ("call", np.int32),
        ("reads", np.int32),
        ("writes", np.int32),
        ("turn_tokens", np.int64),
        ("degen", np.int64),
    ):
        assert getattr(enc, col).dtype == dtype and getattr(enc, col).flags.c_contiguous


def test_targets_are_interned_sets_in_csr():
    enc = encode(sample())

    def members(step):
        ts = enc.target[step]
        if ts < 0:
            return None
        lo, hi = enc.target_offsets[ts], enc.target_offsets[ts + 1]
        return [enc.targets[t] for t in enc.target_members[lo:hi]]

    assert [members(i) for i in range(8)] == [
        ["a.ts"],
        ["a.ts", "b.ts"],
        ["a.ts"],
        ["b.ts"],
        None,
        None,
        ["a.ts"],
        None,
    ]
    assert enc.target[0] == enc.target[2] == enc.target[6]  # one id per set, across traces
    assert enc.n_targets == 2 and enc.n_target_sets == 3


def test_keys_derived_for_the_kernel():
    enc = encode(sample())
    assert enc.call[0] == enc.call[6] and len(set(enc.call.tolist())) == 7
    # observations with a target and an outcome have an obs key; same set + outcome, same key
    assert enc.obs.tolist()[:2] != [-1, -1] and enc.obs[0] == enc.obs[6]
    assert enc.obs[2:6].tolist() == [-1, -1, -1, -1]
    # content states: single-target reads and whole-content writes; not the two-target cat
    assert enc.skey[0] >= 0 and enc.skey[1] == -1 and enc.skey[3] >= 0 and enc.skey[2] == -1
    assert enc.skey[0] != enc.skey[3]
    # the replace edit and its inverse
    assert enc.edit[2] >= 0 and enc.undo[2] >= 0 and enc.edit[2] != enc.undo[2]
    assert (enc.edit[[0, 1, 3, 4, 5, 6, 7]] == -1).all()
    assert enc.n_edits == 2


def test_encode_accepts_one_trace_and_rejects_other_things():
    assert len(encode(sample()[0])) == 6
    with pytest.raises(TypeError, match="Trace"):
        encode([[s(0, "observe", "Read")]])
    empty = encode([])
    assert len(empty) == 0 and empty.n_traces == 0 and empty.trace_offsets.tolist() == [0]
    assert "0 steps in 0 traces" in repr(empty)


def test_concat_equals_encoding_together(impl):
    a, b = sample()
    joined = EncodedTrace.concat([encode(a), encode(b)])
    together = encode([a, b])
    assert joined.trace_offsets.tolist() == together.trace_offsets.tolist()
    assert joined.sessions == together.sessions
    for col in ("kind", "turn", "tokens", "flags", "result_hash", "args_hash", "session"):
        assert getattr(joined, col).tolist() == getattr(together, col).tolist()
    ra = impl.analyse_encoded(joined)
    rb = impl.analyse_encoded(together)
    for field in (
        "finding",
        "of_step",
        "total_tokens",
        "wasted_tokens",
        "by_kind_tokens",
        "by_kind_steps",
    ):
        assert getattr(ra, field).tolist() == getattr(rb, field).tolist()
    with pytest.raises(ValueError):
        EncodedTrace.concat([])


def test_concat_keeps_ids_of_parts_apart(impl):
    # the same trace twice: each copy's first read is a first occurrence
    t = Trace(
        [
            s(0, "observe", "Read", "a", {"p": "a"}, "A"),
            s(1, "observe", "Read", "a", {"p": "a"}, "A"),
        ]
    )
    enc = EncodedTrace.concat([encode(t)] * 3)
    assert enc.n_traces == 3 and enc.n_calls == 3 and enc.n_targets == 3
    res = impl.analyse_encoded(enc)
    assert res.finding.tolist() == [0, 1] * 3
    assert res.of_step.tolist() == [-1, 0] * 3
    assert res.wasted_tokens.tolist() == [11, 11, 11]


def test_analysis_arrays_and_repr(impl):
    traces = sample() + [
        Trace([s(i, "observe", "Grep", None, {"q": 1}, "hits", session="g") for i in range(3)])
    ]
    res = impl.analyse_encoded(encode(traces))
    assert res.finding.dtype == np.int8 and res.of_step.dtype == np.int32
    assert res.by_kind_tokens.shape == res.by_kind_steps.shape == (3, 6)
    assert res.finding[-3:].tolist() == [0, 2, 2] and res.of_step[-3:].tolist() == [-1, 0, 1]
    assert res.charge[-3:].tolist() == [0, 11, 11] and res.charge.dtype == np.int64
    assert res.by_kind_steps[2, FINDING_KINDS.index("duplicate_call")] == 2
    reports = impl.analyse_many(traces)
    assert res.total_tokens.tolist() == [r.total_tokens for r in reports]
    assert res.wasted_tokens.tolist() == [r.wasted_tokens for r in reports]
    assert "2 charged" in repr(res)


def _columns(enc):
    return dict(
        kind=enc.kind,
        turn=enc.turn,
        tokens=enc.tokens,
        turn_tokens=enc.turn_tokens,
        degen=enc.degen,
        flags=enc.flags,
        result_hash=enc.result_hash,
        target=enc.target,
        target_offsets=enc.target_offsets,
        target_members=enc.target_members,
        reads=enc.reads,
        writes=enc.writes,
        call=enc.call,
        obs=enc.obs,
        skey=enc.skey,
        sval=enc.sval,
        edit=enc.edit,
        undo=enc.undo,
        trace_offsets=enc.trace_offsets,
        n_targets=enc.n_targets,
        n_calls=enc.n_calls,
        n_obs=enc.n_obs,
        n_skeys=enc.n_skeys,
        n_svals=enc.n_svals,
        n_edits=enc.n_edits,
    )


@pytest.mark.parametrize(
    "change, match",
    [
        (lambda c: c.update(turn=c["turn"][:-1]), "turn has"),
        (lambda c: c.update(trace_offsets=np.array([0, 3], dtype=np.int64)), "trace_offsets"),
        (
            lambda c: c.update(trace_offsets=np.array([0, 7, 6, 8], dtype=np.int64)),
            "non-decreasing",
        ),
        (
            lambda c: c.update(call=np.where(np.arange(8) == 2, 99, c["call"]).astype(np.int32)),
            "call",
        ),
        (
            lambda c: c.update(call=np.where(np.arange(8) == 2, -2, c["call"]).astype(np.int32)),
            "call",
        ),
        (
            lambda c: c.update(reads=np.where(np.arange(8) == 2, -3, c["reads"]).astype(np.int32)),
            "reads",
        ),
        (
            lambda c: c.update(
                writes=np.where(np.arange(8) == 2, 50, c["writes"]).astype(np.int32)
            ),
            "writes",
        ),
        (
            lambda c: c.update(
                turn_tokens=np.where(np.arange(8) == 2, -1, c["turn_tokens"]).astype(np.int64)
            ),
            "token",
        ),
        (lambda c: c.update(degen=c["degen"][:-1]), "degen has"),
        (
            lambda c: c.update(
                target=np.where(np.arange(8) == 2, 50, c["target"]).astype(np.int32)
            ),
            "target",
        ),
        (
            lambda c: c.update(kind=np.where(np.arange(8) == 2, 9, c["kind"]).astype(np.uint8)),
            "kind",
        ),
        (lambda c: c.update(n_svals=0), "sval"),
        (lambda c: c.update(n_edits=1), "undo"),
        (lambda c: c.update(n_targets=1), "target_members"),
        (
            lambda c: c.update(target_offsets=np.array([0, 1, 1, 3], dtype=np.int64)),
            "target_offsets",
        ),
        (
            lambda c: c.update(
                skey=np.where(np.arange(8) == 7, 0, c["skey"]).astype(np.int32),
                sval=np.where(np.arange(8) == 7, 0, c["sval"]).astype(np.int32),
            ),
            "state key",
        ),
        (
            lambda c: c.update(sval=np.where(np.arange(8) == 7, 0, c["sval"]).astype(np.int32)),
            "both set",
        ),
    ],
)
def test_kernel_rejects_inconsistent_columns(impl, change, match):
    cols = _columns(encode(sample()))
    change(cols)
    with pytest.raises(ValueError, match=match):
        impl.burn.analyse_columns(**cols)


def test_kernel_accepts_read_only_columns(impl):
    enc = encode(sample())
    cols = _columns(enc)
    for v in cols.values():
        if isinstance(v, np.ndarray):
            v.setflags(write=False)
    out = impl.burn.analyse_columns(**cols)
    assert out[0].tolist() == twin("py").analyse_encoded(enc).finding.tolist()


def test_kernel_twins_share_the_question_loop_threshold(impl):
    assert impl.burn.QUESTION_LOOP_MIN_TURNS == 3


def test_reads_and_writes_columns():
    t = Trace(
        [
            s(
                0,
                "mutate",
                "bash",
                "p.txt",
                {"command": "git diff -- a.py > p.txt"},
                "",
                reads=("a.py",),
                writes=("p.txt",),
            ),
            s(1, "observe", "Read", "a.py", {"p": "a.py"}, "A"),
            s(2, "exec", "bash", None, {"command": "make"}, "ok"),
            s(3, "mutate", "Edit", "a.py", {"old_string": "x", "new_string": "x"}, "ok"),  # a no-op
            s(4, "other", "", text="just talking"),
            s(5, "other", "bash", rejected="format error"),
        ]
    )
    enc = encode(t)
    name = lambda ts: (
        None
        if ts < 0
        else [
            enc.targets[m]
            for m in enc.target_members[enc.target_offsets[ts] : enc.target_offsets[ts + 1]]
        ]
    )
    assert [name(x) for x in enc.reads[:2]] == [
        ["a.py", "p.txt"],
        ["a.py"],
    ]  # what it reads and writes
    assert name(enc.writes[0]) == ["p.txt"] and enc.writes[1] == -1
    assert enc.reads[2] == -2 and enc.writes[2] == -2  # an exec reads anything, writes everything
    assert enc.writes[3] == -1 and enc.flags[3] & NO_OP  # a no-op writes nothing
    assert enc.call[4] == -1 and enc.call[5] == -1  # nothing ran
    assert enc.flags[5] & REJECTED


def test_substantial_outcomes_key_observations_by_target():
    big = "\n".join(f"line {i} of a.py" for i in range(40))
    t = Trace(
        [
            s(0, "observe", "bash", "a.py", {"command": "cat a.py"}, big),
            s(1, "observe", "bash", "a.py", {"command": "sed -n '1,400p' a.py"}, big),
            s(2, "observe", "bash", "a.py", {"command": "grep x a.py"}, ""),
            s(3, "observe", "bash", "a.py", {"command": "grep y a.py"}, ""),
        ]
    )
    enc = encode(t)
    assert enc.obs[0] == enc.obs[1]  # same substantial text of the same target
    assert enc.obs[2] != enc.obs[3]  # short: only the same call is the same observation
    strict = encode(t, BurnSettings(substantial_chars=10**6))
    assert strict.obs[0] != strict.obs[1]
    with pytest.raises(ValueError, match="substantial_chars"):
        BurnSettings(substantial_chars=-1)


# ----------------------------------------------------------------------------- the two encoders

_META = (
    "trace_offsets",
    "target_offsets",
    "target_members",
    "sessions",
    "tools",
    "targets",
    "n_calls",
    "n_obs",
    "n_skeys",
    "n_svals",
    "n_edits",
)


@pytest.fixture(scope="module")
def encoders():
    """(compiled, pure) encoders; tests that compare them skip when the core is deselected."""
    if _native_flag.NO_EXTENSIONS:
        pytest.skip("LOOPCORE_NO_EXTENSIONS=1: no compiled twin to compare")
    return _native_flag.load_twin("encode", "c"), _native_flag.load_twin("encode", "py")


def encoded_by(encoder, traces, settings=DEFAULT_SETTINGS):
    """("ok", columns as lists) of *traces* through *encoder*, or ("raises", exception type)."""
    try:
        enc = encode_with(traces, settings, encoder)
    except Exception as exc:  # noqa: BLE001 - the point is to compare
        return ("raises", type(exc))
    cols = {
        name: (getattr(enc, name).dtype, getattr(enc, name).tolist()) for name, _ in _STEP_COLUMNS
    }
    for name in _META:
        v = getattr(enc, name)
        cols[name] = v.tolist() if isinstance(v, np.ndarray) else v
    return ("ok", cols)


def assert_twins_agree(encoders, traces, settings=DEFAULT_SETTINGS):
    c, py = encoders
    got, want = encoded_by(c, traces, settings), encoded_by(py, traces, settings)
    assert got == want
    return want


PATHS = [
    "a.py",
    "src/a.py",
    "/testbed/src/a.py",
    "b.py",
    "p.txt",
    "git:HEAD",
    "src",
    "./src/",
    ".",
    "/testbed",
    "/testbed/src",
    "/",
    ".//src",
    "src/.",
]
LOOP = "the same sentence again and again, over and over in this reply; " * 12
BIG = "".join(f"line {i} of a file\n" for i in range(30))
text_values = st.sampled_from(["", "x", "ok", "a\n\n b\n", " \t\n", BIG, "ünï©ødé\u2028z", LOOP])
payloads = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False) | text_values,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("kv"), inner, max_size=2)
    ),
    max_leaves=6,
)
commands = st.sampled_from(
    [
        "cat a.py",
        "cat  a.py ",
        "cd /testbed && cat src/a.py",
        "sed -n '1,40p' a.py",
        "sed -n '20,30p' a.py",
        "tail a.py",
        "grep -n x a.py",
        "echo 'x' > p.txt",
        "printf hi > b.py",
        "cat <<'EOF' > a.py\nbody\nEOF",
        "echo $HOME > p.txt",
        "python -m pytest -q",
        "view",
        "cp a.py a.py.orig",
        "cp -p src/a.py.bak src/a.py",
        "cat b.py.bak > b.py",
        "git checkout -- a.py",
        "cd /testbed && git restore p.txt",
        "# look at the file first\ncat a.py",
        "str_replace",
    ]
)


@st.composite
def any_args(draw):
    shape = draw(st.integers(0, 5))
    if shape == 0:
        return draw(payloads)
    if shape == 1:
        return {draw(st.sampled_from(["command", "cmd", "script"])): draw(commands)}
    if shape == 2:
        old, new = draw(
            st.sampled_from(
                [
                    ("old_string", "new_string"),
                    ("old_str", "new_str"),
                    ("old", "new"),
                    ("oldText", "newText"),
                    ("search", "replace"),
                ]
            )
        )
        return {"path": "a.py", old: draw(st.sampled_from("xy")), new: draw(st.sampled_from("xy"))}
    if shape == 3:
        return {draw(st.sampled_from(["content", "file_text", "contents"])): draw(text_values)}
    if shape == 4:
        return {"path": draw(st.sampled_from(PATHS))}
    return None


targets_st = (
    st.none()
    | st.sampled_from(PATHS)
    | st.lists(st.sampled_from(PATHS), min_size=1, max_size=3).map(tuple)
)
access_st = st.none() | st.lists(st.sampled_from(PATHS), max_size=3).map(tuple)


@st.composite
def any_steps(draw, session):
    return Step(
        session,
        draw(st.integers(0, 4)),
        draw(st.sampled_from(["observe", "observe", "mutate", "exec", "ask", "other"])),
        draw(st.sampled_from(["Read", "Bash", "bash", "Edit", "read_file", "view", "ask", ""])),
        draw(targets_st),
        draw(any_args()),
        draw(st.none() | payloads),
        draw(st.none() | st.just(True) | text_values | payloads),
        draw(st.integers(0, 900)),
        draw(st.integers(0, 90)),
        tokens_estimated=draw(st.booleans()),
        reads=draw(access_st),
        writes=draw(access_st),
        text=draw(st.none() | text_values),
        rejected=draw(st.none() | st.none() | st.just("bad action")),
        tokens_turn=draw(st.integers(0, 300)),
        no_op=draw(st.booleans()) and draw(st.booleans()),
        after_user=draw(st.booleans()) and draw(st.booleans()),
        # a call the harness never ran, and meta that only looks like it
        meta=draw(
            st.sampled_from(
                [
                    {},
                    {},
                    {},
                    {"not_run": True},
                    {"not_run": 1},
                    {"rc": 1},
                    {"returncode": 1},
                    {"returncode": 0},
                    {"returncode": -9},
                    {"returncode": True},
                    {"returncode": "1"},
                ]
            )
        ),
    )


@st.composite
def any_traces(draw):
    out = []
    for k in range(draw(st.integers(0, 4))):
        steps = sorted(draw(st.lists(any_steps(f"s{k}"), max_size=14)), key=lambda s: s.turn)
        out.append(Trace(steps, session=f"s{k}"))
    return out


@given(any_traces(), st.integers(0, 500), st.integers(0, 12))
@hsettings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_compiled_encoder_gives_the_pure_columns(encoders, traces, chars, lines):
    """Random steps (edits, writes, shell reads, path aliases, rejected turns, looping replies):
    the compiled encoder's columns, ids and sizes are the pure twin's, value for value."""
    assert_twins_agree(
        encoders, traces, BurnSettings(substantial_chars=chars, substantial_lines=lines)
    )


def test_encoders_agree_on_an_unknown_kind_and_an_empty_input(encoders):
    bad = s(0, "observe", "Read", "a.py", {}, "A")
    bad.kind = "teleport"
    assert encoded_by(encoders[0], [Trace([bad])]) == ("raises", ValueError)
    assert encoded_by(encoders[1], [Trace([bad])]) == ("raises", ValueError)
    got = assert_twins_agree(encoders, [])[1]
    assert got["trace_offsets"] == [0] and got["session"][1] == []


def test_encoders_agree_on_the_shared_traces(encoders, shared_traces):
    from loopcore.report import iter_traces

    traces = [t for _, t in iter_traces([str(shared_traces)], keep_going=True)]
    got = assert_twins_agree(encoders, traces)[1]
    assert len(got["kind"][1]) > 1000 and any(v >= 0 for v in got["edit"][1])


def test_encoders_agree_on_a_generated_corpus(encoders, tmp_path):
    import subprocess
    import sys

    from loopcore.report import iter_traces

    tool = pathlib.Path(__file__).resolve().parent.parent / "tools" / "make_corpus.py"
    subprocess.run([sys.executable, str(tool), str(tmp_path), "--steps", "3000"], check=True)
    traces = [t for _, t in iter_traces([str(tmp_path)])]
    got = assert_twins_agree(encoders, traces)[1]
    assert len(got["kind"][1]) >= 3000


def test_encoders_agree_on_backups_restores_and_untargeted_searches(encoders):
    from loopcore.encoded import BACKUP, RESTORE

    def shell(turn, kind, cmd, target, **kw):
        return s(turn, kind, "bash", target, {"command": cmd}, "", **kw)

    steps = [
        shell(
            0, "mutate", "cp a.py a.py.orig", "a.py.orig", reads=("a.py",), writes=("a.py.orig",)
        ),
        s(1, "observe", "search", None, {"q": "x"}, "hits"),
        shell(2, "mutate", "cp a.py.orig a.py", "a.py", reads=("a.py.orig",), writes=("a.py",)),
        s(3, "observe", "search", None, {"q": "x"}, "hits"),
    ]
    records = [s(0, "observe", "search", None, {"q": "x"}, "hits"), s(1, "mutate", "put", "rec7")]
    got = assert_twins_agree(encoders, [Trace(steps), Trace(records)])[1]
    flags = got["flags"][1]
    assert flags[0] & BACKUP and flags[2] & RESTORE
    # the search reads anything in the trace that writes files, a name of its own in the other
    assert got["reads"][1][1] == -2 and got["reads"][1][4] >= 0


def test_exit_nonzero_marks_a_step_that_ran_and_whose_command_exited_non_zero(impl):
    # an int exit code other than 0, on a step with an outcome the harness ran; a bool, a
    # string, 0, a rejected or never-run call, or a step with no outcome is no such step
    def run(rc, result="out", **kw):
        return s(0, "mutate", "bash", "git:repo", {"command": "git commit"}, result, **kw, meta=rc)

    class Code(int):
        pass

    steps = [
        run({"returncode": 1}),
        run({"returncode": 128}, result=None, error="fatal"),
        run({"returncode": -9}),
        run({"returncode": Code(2)}),
        run({"returncode": 0}),
        run({"returncode": True}),
        run({"returncode": "1"}),
        run({"returncode": 1.0}),
        run({}),
        run({"returncode": 1}, result=None),
        run({"returncode": 1}, rejected="denied"),
        run({"returncode": 1, "not_run": True}),
    ]
    enc = encode_with([Trace(steps)], DEFAULT_SETTINGS, impl.encode)
    got = [bool(f & EXIT_NONZERO) for f in enc.flags.tolist()]
    assert got == [True] * 4 + [False] * 8
    assert enc.flags[1] & ERROR and not enc.flags[0] & ERROR  # apart from ERROR
