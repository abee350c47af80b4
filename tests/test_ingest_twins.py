"""The per-step helpers of the ingest path: the compiled encoder's own copies of the encoder's
string rules against the pure reference (loopcore.encoded), and the loader's shortcut that
skips the unhashable-step check for values that cannot fail it."""

from __future__ import annotations

import json

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
    # other blanks str.strip() drops (no-break and ideographic spaces, \r), in every str kind
    st.text(alphabet="#\n \r\u00a0\u3000é\U0001d11ea", max_size=16),
    st.lists(LINES, min_size=1, max_size=4).map(lambda ls: "\n".join(ls) + "\n\u3000# é\n𝄞"),
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


def test_compiled_shell_command_tells_editor_sub_commands_apart_by_their_whole_name(native):
    """The compiled rule skips the set lookup for a command longer than every editor
    sub-command: each name, each one a character longer or shorter, and long commands give the
    pure rule's answer."""
    from loopcore.encoded import _EDITOR_COMMANDS

    names = sorted(_EDITOR_COMMANDS, key=len)
    cases = [*names, *(n + "x" for n in names), *(n[:-1] for n in names), "x" * len(names[-1])]
    cases += ["cat <<'EOF' > a.py\n" + "line\n" * 2000 + "EOF", names[-1] + " " * 3]
    for cmd in cases:
        for key in ("command", "cmd", "script"):
            assert native.shell_command({key: cmd}) == _shell_command({key: cmd}), (key, cmd)
    assert native.shell_command({"command": names[-1]}) is None


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


# ---------------------------------------------------------------- the chat walk


@pytest.fixture(scope="module")
def native_chat():
    if _native_flag.NO_EXTENSIONS:
        pytest.skip("LOOPCORE_NO_EXTENSIONS=1: no compiled twin to compare")
    return _native_flag.load_twin("ingest", "c")


def _walked(walk, messages, keep_going, on_result=None, offset=0, sub=False):
    """What a walk of *messages* gives: the steps and meta of the finished trace and the
    skips, or the error it raised (type and text). *sub*: into a Ledger subclass (whose
    methods the compiled walk calls rather than filling the lists itself)."""
    from loopcore.adapters._base import Ledger, LoadStats
    from loopcore.adapters._io import Ctx

    class SubLedger(Ledger):
        __slots__ = ()

    stats = LoadStats()
    ctx = Ctx("t.jsonl", None, keep_going, stats, None)
    ledger = (SubLedger if sub else Ledger)("s", ctx.profile("mini-swe-agent"))
    try:
        walk(messages, ctx, ledger, on_result=on_result, index_offset=offset)
        trace = ledger.trace(source="t.jsonl", fmt="openai-chat")
    except Exception as exc:  # noqa: BLE001 - the point is to compare
        return ("raises", type(exc), str(exc))
    return (
        [s.to_dict() for s in trace.steps],
        trace.meta,
        ctx.skipped,
        [str(e) for e in stats.errors],
    )


def _hook(step, m, content):
    """A result hook like the adapters' (an error from the message, meta for the step)."""
    extra = m.get("extra")
    if isinstance(extra, dict) and extra.get("exception_info"):
        return content, extra["exception_info"], {"returncode": extra.get("returncode")}
    return content, None, None


IDS = st.sampled_from([None, "", "c1", "c2"])
CONTENT = st.one_of(
    st.none(),
    st.integers(0, 3),
    st.sampled_from(["", "ok", "Error: no", "cat a.py\nhi", "THOUGHT: look\n```bash\nls\n```"]),
    st.lists(
        st.one_of(
            st.sampled_from(["x", "y"]),
            st.fixed_dictionaries(
                {"type": st.sampled_from(["text", "image"]), "text": st.just("t")}
            ),
        ),
        max_size=3,
    ),
)
USAGE = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {"prompt_tokens": st.integers(0, 5000), "completion_tokens": st.integers(0, 900)}
    ),
    st.just({"input_tokens": 10, "output_tokens": 4}),
    st.just("nonsense"),
    # the common case's edges: bools and floats are no ints, reasoning details of any shape
    st.fixed_dictionaries(
        {
            "prompt_tokens": st.sampled_from([7, True, 7.0, "7"]),
            "completion_tokens": st.sampled_from([3, False, 3.5]),
            "completion_tokens_details": st.sampled_from(
                [None, {}, {"reasoning_tokens": 2}, {"reasoning_tokens": True}, "x"]
            ),
        }
    ),
)
ARGS_RAW = st.one_of(
    st.sampled_from(['{"command": "ls"}', '{"command": "cat a.py"}', "{bad json", "", '"x"']),
    # a lone surrogate's escape (a model's half character), mended, beside a well-formed pair
    st.sampled_from(['{"command": "echo \\ud83d"}', '{"command": "echo \\ud83d\\ude00 \\udc00"}']),
    # the other keys a shell command may sit under, and commands that are no str
    st.sampled_from(
        [
            '{"cmd": "cat a.py"}',
            '{"script": "echo hi > b.txt"}',
            '{"command": null, "cmd": "sed -n 1,5p a.py"}',
            '{"command": ["cat", "a.py"]}',
            '{"command": 5}',
        ]
    ),
    st.none(),
    st.integers(0, 2),
    st.just({"command": "pwd"}),
)


@st.composite
def tool_calls(draw):
    out = []
    for _ in range(draw(st.integers(0, 3))):
        shape = draw(st.integers(0, 9))
        if shape == 0:
            out.append(draw(st.sampled_from(["junk", 3, None])))
            continue
        fn = {
            "name": draw(st.sampled_from(["bash", "read_file", 7, "shell", "Bash"])),
            "arguments": draw(ARGS_RAW),
        }
        if shape == 1:
            fn = draw(st.sampled_from([None, "fn", {"arguments": "{}"}]))
        out.append({"id": draw(IDS), "type": "function", "function": fn})
    return out


@st.composite
def chat_message(draw):
    role = draw(
        st.sampled_from(
            ["assistant", "assistant", "tool", "tool", "user", "system", "function", None]
        )
    )
    m: dict = {"role": role, "content": draw(CONTENT)}
    if role == "assistant":
        calls = draw(tool_calls())
        which = draw(st.integers(0, 6))
        if which == 0:
            m["function_call"] = {"name": "bash", "arguments": '{"command": "ls"}'}
        elif which == 1:
            m["tool_calls"] = draw(st.sampled_from(["not a list", {"a": 1}]))
        elif calls or draw(st.booleans()):
            m["tool_calls"] = calls
        extra: dict = {}
        if draw(st.booleans()):
            extra["response"] = {"usage": draw(USAGE)}
        if draw(st.booleans()):
            extra["actions"] = [
                draw(
                    st.sampled_from(
                        [
                            {"command": "ls -la", "tool_call_id": c.get("id")}
                            if isinstance(c, dict)
                            else None,
                            {"command": 5, "tool_call_id": None},
                            "x",
                        ]
                    )
                )
                for c in calls
            ] + draw(st.sampled_from([[], [{"command": "extra"}]]))
        if extra or draw(st.booleans()):
            m["extra"] = extra if draw(st.integers(0, 5)) else "not a dict"
        if draw(st.booleans()):
            m["usage"] = draw(USAGE)
        if draw(st.booleans()):
            m["reasoning_content"] = draw(st.sampled_from(["", "think", 3]))
    elif role in ("tool", "function"):
        m["tool_call_id"] = draw(IDS)
        if draw(st.booleans()):
            m["name"] = draw(st.sampled_from(["bash", "read_file"]))
        if draw(st.booleans()):
            m["extra"] = {"returncode": 1, "exception_info": draw(st.sampled_from(["", "timeout"]))}
    elif role == "user" and draw(st.booleans()):
        m["extra"] = {"interrupt_type": draw(st.sampled_from(["FormatError", "Other"]))}
    return m


MESSAGES = st.lists(
    st.one_of(chat_message(), chat_message(), chat_message(), st.sampled_from([3, "text", None])),
    max_size=12,
)


@given(MESSAGES, st.booleans(), st.booleans(), st.sampled_from([0, 5]), st.booleans())
@hsettings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_compiled_chat_walk_gives_the_pure_steps(
    native_chat, messages, keep_going, hook, offset, sub
):
    from loopcore.adapters.openai_chat import _walk_chat_py

    on_result = _hook if hook else None
    want = _walked(_walk_chat_py, messages, keep_going, on_result, offset)
    got = _walked(native_chat.walk_chat, messages, keep_going, on_result, offset, sub)
    assert got == want


def test_compiled_chat_walk_gives_the_pure_steps_on_odd_containers(native_chat):
    from loopcore.adapters.openai_chat import _walk_chat_py

    for messages in (
        5,
        None,
        {"role": "assistant"},
        "ab",
        ({"role": "assistant", "content": "x"},),
    ):
        for keep_going in (True, False):
            want = _walked(_walk_chat_py, messages, keep_going)
            assert _walked(native_chat.walk_chat, messages, keep_going) == want


def test_compiled_chat_walk_asks_a_profile_it_does_not_know(native_chat, monkeypatch):
    """The compiled walk classifies a shell command itself only for an exact Profile whose rule
    is shell_rule with its own access: a Profile subclass, or a shell rule whose access was
    replaced, is asked through its methods, as the pure walk asks it."""
    from loopcore.adapters._base import Ledger, LoadStats
    from loopcore.adapters._io import Ctx
    from loopcore.adapters.openai_chat import _walk_chat_py
    from loopcore.taxonomy import profiles

    messages = [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c1", "function": {"name": "bash", "arguments": '{"command": "cat a.py"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "x = 1\n"},
    ]

    class Mine(profiles.Profile):
        __slots__ = ()

        def access(self, name, args=None):
            return ("mutate", "mine.txt", None, ("mine.txt",), False)

    def walked(walk, profile):
        ctx = Ctx("t.json", None, False, LoadStats(), None)
        ledger = Ledger("s", profile)
        walk(messages, ctx, ledger)
        return [s.to_dict() for s in ledger.trace(source="t.json", fmt="openai-chat").steps]

    base = profiles.get_profile("mini-swe-agent")
    mine = Mine(base.name, base.rules)
    want = walked(_walk_chat_py, mine)
    assert want[0]["kind"] == "mutate" and walked(native_chat.walk_chat, mine) == want
    assert walked(native_chat.walk_chat, base)[0]["kind"] == "observe"

    monkeypatch.setattr(
        profiles.shell_rule, "access", lambda args: ("exec", None, None, None, False)
    )
    fresh = profiles.Profile(base.name, base.rules)
    want = walked(_walk_chat_py, fresh)
    assert want[0]["kind"] == "exec" and walked(native_chat.walk_chat, fresh) == want


def test_compiled_walk_classifies_shell_calls_before_anything_can_look(native_chat):
    """The compiled walk classifies a run of shell calls after walking their messages: a result
    hook written in Python, a rejected turn, an unparsed call and a walk that stops on a bad
    message each see (or leave) the classified Steps, as the pure walk does."""
    from loopcore.adapters._base import Ledger, LoadStats, TraceFormatError
    from loopcore.adapters._io import Ctx
    from loopcore.adapters.openai_chat import _walk_chat_py

    def call(cid, command, raw=None):
        args = raw if raw is not None else '{"command": "%s"}' % command
        return {"id": cid, "function": {"name": "bash", "arguments": args}}

    messages = [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                call("c1", "cat a.py"),
                call("c2", "rm b.py"),
                call("c3", "sed -i s/x/x/ c.py"),
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "x = 1\n"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [call("c4", "ls"), call("c5", "", "{broken")],
        },
        {"role": "user", "content": "no", "extra": {"interrupt_type": "FormatError"}},
        {"role": "assistant", "content": "", "tool_calls": [call("c6", "git checkout -- a.py")]},
        {"role": "tool", "tool_call_id": "c6", "content": ""},
        {"role": "assistant", "content": "", "tool_calls": [call("c7", "cat d.py")]},
        7,  # a bad message: an error without keep_going
    ]

    def run(walk, keep_going):
        seen = []

        def hook(step, m, content):
            seen.append([(s.kind, s.target, s.reads, s.writes, s.no_op) for s in ledger.steps])
            return content, None, None

        ctx = Ctx("t.jsonl", None, keep_going, LoadStats(), None)
        ledger = Ledger("s", ctx.profile("mini-swe-agent"))
        try:
            walk(messages, ctx, ledger, on_result=hook)
            raised = None
        except TraceFormatError as exc:
            raised = str(exc)
        steps = [(s.kind, s.target, s.reads, s.writes, s.no_op, s.name) for s in ledger.steps]
        return seen, steps, raised

    for keep_going in (True, False):
        want = run(_walk_chat_py, keep_going)
        got = run(native_chat.walk_chat, keep_going)
        assert got == want
        assert want[0][0][1][0] == "mutate" and want[0][0][2][4] is True  # rm; sed s/x/x/
        assert (want[2] is None) is keep_going


@given(MESSAGES)
@hsettings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_compiled_walk_fills_the_ledgers_turns_as_the_pure_one(native_chat, messages):
    """The turns the walk leaves in an exact Ledger (usage, step counts, the context text that
    entered after each turn, the text, the ref), before the accounting reads them."""
    from loopcore.adapters._base import Ledger, LoadStats
    from loopcore.adapters._io import Ctx
    from loopcore.adapters.openai_chat import _walk_chat_py

    def turns(walk):
        ctx = Ctx("t.jsonl", None, True, LoadStats(), None)
        ledger = Ledger("s", ctx.profile("mini-swe-agent"))
        walk(messages, ctx, ledger)
        return [[t[0], t[1], t[2], t[3], t[4], t[6], t[7]] for t in ledger.turns], ledger.orphans

    assert turns(native_chat.walk_chat) == turns(_walk_chat_py)


def test_compiled_walk_counts_context_and_orphans_as_the_pure_one(native_chat):
    from loopcore.adapters._base import Ledger, LoadStats
    from loopcore.adapters._io import Ctx
    from loopcore.adapters.openai_chat import _walk_chat_py

    messages = [
        {"role": "user", "content": "before any turn"},
        {
            "role": "assistant",
            "content": "a",
            "tool_calls": [
                {"id": "c1", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "out"},
        {"role": "tool", "tool_call_id": "nobody", "content": ["x", "yz"]},
        {"role": "user", "content": "twelve chars"},
        {"role": "system", "content": [{"type": "text", "text": "abc"}]},
    ]

    def turns(walk):
        ctx = Ctx("t.jsonl", None, True, LoadStats(), None)
        ledger = Ledger("s", ctx.profile("mini-swe-agent"))
        walk(messages, ctx, ledger)
        return [t[4] for t in ledger.turns], ledger.orphans

    want = turns(_walk_chat_py)
    assert want[1] == 1 and want[0][0] > 12
    assert turns(native_chat.walk_chat) == want


@pytest.mark.parametrize(
    "answer",
    [
        ("observe", ["a.py", "b.py"], ["a.py", "b.py"], None, 0),  # a list target: a tuple
        ("observe", "a.py", "a.py", ["b.py"], 1),
        ("looks", None, None, None, False),  # not a kind: the Step refuses it
    ],
)
def test_a_classification_the_step_converts_or_refuses_is_handled_as_the_pure_walk(
    native_chat, monkeypatch, answer
):
    """The shell calls classified after the walk take the Step constructor's conversions (a
    list target) and refusals (an unknown kind), as the pure walk's Steps do."""
    from loopcore.adapters.openai_chat import _walk_chat_py
    from loopcore.taxonomy import profiles

    monkeypatch.setattr(profiles, "classify_shell_access", lambda command: answer)
    messages = [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c1", "function": {"name": "bash", "arguments": '{"command": "cat a.py"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "x = 1\n"},
    ]
    for keep_going in (True, False):
        want = _walked(_walk_chat_py, messages, keep_going)
        assert _walked(native_chat.walk_chat, messages, keep_going) == want
    if answer[0] == "looks":
        assert want[0] == "raises" and want[1] is ValueError
        return
    from loopcore.adapters._base import Ledger, LoadStats
    from loopcore.adapters._io import Ctx

    def access(walk):  # the Steps' own values (to_dict lists tuples)
        ctx = Ctx("t.jsonl", None, True, LoadStats(), None)
        ledger = Ledger("s", ctx.profile("mini-swe-agent"))
        walk(messages, ctx, ledger)
        return [(s.kind, s.target, s.reads, s.writes, s.no_op) for s in ledger.steps]

    got = access(native_chat.walk_chat)
    assert got == access(_walk_chat_py)
    assert all(x is None or type(x) in (str, tuple) for step in got for x in step[1:4])


def test_chat_formats_load_the_same_traces_with_either_walk(
    native_chat, shared_traces, monkeypatch
):
    """The shared mini-swe-agent and tau-bench files through the pure walk and the compiled one."""
    from loopcore.adapters import load, mini_swe_agent, openai_chat, tau_bench

    def loaded():
        return [
            (t.session, t.meta, [s.to_dict() for s in t.steps])
            for t in load(str(shared_traces), keep_going=True)
            if t.format in ("mini-swe-agent", "tau-bench", "openai-chat")
        ]

    got = loaded()
    for mod in (openai_chat, mini_swe_agent, tau_bench):
        monkeypatch.setattr(mod, "walk_chat", openai_chat._walk_chat_py)
    want = loaded()
    assert len(want) > 300 and got == want


def test_tau2_bench_simulations_load_the_same_with_either_walk(native_chat, monkeypatch):
    """A tau2-bench result is walked message by message (its own shape turned into the chat
    one): the compiled walk and the pure one give the same steps."""
    import pathlib

    from loopcore.adapters import load, openai_chat, tau_bench

    fixture = pathlib.Path(__file__).parent / "fixtures" / "tau2_bench.json"

    def loaded():
        return [(t.session, t.meta, [s.to_dict() for s in t.steps]) for t in load(fixture)]

    got = loaded()
    monkeypatch.setattr(tau_bench, "walk_chat", openai_chat._walk_chat_py)
    want = loaded()
    assert len(want) == 2 and len(want[0][2]) == 5 and got == want


# ---------------------------------------------------------------- the encoder's field reads


def test_compiled_encoder_reads_exact_steps_at_their_slots_and_others_by_name(native):
    """An exact Step is read at its slots' offsets; a subclass (which may override a field with
    a property) through getattr; both give the columns of the pure encoder."""
    import dataclasses

    from loopcore.encoded import DEFAULT_SETTINGS, encode_with
    from loopcore.trace import Trace

    assert native.SLOT_READS is True

    class Loud(Step):
        __slots__ = ()

        @property  # type: ignore[misc]
        def tokens_turn(self):
            return 7

        @tokens_turn.setter
        def tokens_turn(self, value):
            pass

    base = [
        Step("s", 0, "observe", "bash", "a.py", {"command": "cat a.py"}, "A" * 500, None, 5, 2),
        Step("s", 1, "mutate", "Edit", "a.py", {"old_string": "x", "new_string": "y"}, "ok"),
        Step("s", 2, "other", "", text="again and again, the same words; " * 20, tokens_out=40),
    ]
    loud = [Loud(**{f.name: getattr(s, f.name) for f in dataclasses.fields(Step)}) for s in base]
    pure = _native_flag.load_twin("encode", "py")
    for steps in (base, loud):
        got = encode_with([Trace(steps)], DEFAULT_SETTINGS, native)
        want = encode_with([Trace(steps)], DEFAULT_SETTINGS, pure)
        for name in ("kind", "turn_tokens", "tokens", "degen", "args_hash", "result_hash", "flags"):
            assert getattr(got, name).tolist() == getattr(want, name).tolist(), name
    assert encode_with([Trace(loud)], DEFAULT_SETTINGS, native).turn_tokens.tolist() == [7, 7, 7]


# ---------------------------------------------------------------- the Ledger's Step constructor

FIELD_VALUES = st.tuples(
    st.sampled_from(["s", "other session"]),
    st.integers(-1, 5),
    st.sampled_from(["observe", "mutate", "exec", "ask", "other", "teleport", None]),
    st.sampled_from(["", "bash", "Read"]),
    st.one_of(
        st.none(), st.sampled_from(["a.py", ("a.py", "b.py")]), st.lists(st.just("c"), max_size=2)
    ),
    st.one_of(st.none(), st.just({"command": "ls"}), st.just("raw")),
    st.one_of(st.none(), st.just("out")),
    st.one_of(st.none(), st.just("boom"), st.just(True)),
    st.integers(0, 9),
    st.integers(0, 9),
    st.booleans(),
    st.one_of(st.none(), st.just("c1")),
    st.one_of(st.just({}), st.just({"returncode": 1})),
    st.one_of(st.none(), st.just(()), st.just(("a.py",)), st.just(["a.py"]), st.just("a.py")),
    st.one_of(st.none(), st.just(()), st.just(("b.py",)), st.just(["b.py", "c"])),
    st.one_of(st.none(), st.just({"message": 3})),
    st.one_of(st.none(), st.just("reply")),
    st.one_of(st.none(), st.just("bad action")),
    st.integers(0, 9),
    st.booleans(),
)


@given(FIELD_VALUES)
@hsettings(max_examples=500, deadline=None)
def test_compiled_new_step_is_the_step_constructor(native_chat, fields):
    try:
        want = Step(*fields)
    except Exception as exc:  # noqa: BLE001 - the point is to compare
        with pytest.raises(type(exc), match="^" + __import__("re").escape(str(exc)) + "$"):
            native_chat.new_step(*fields)
        return
    got = native_chat.new_step(*fields)
    assert type(got) is Step and got == want and got.to_dict() == want.to_dict()
    assert repr(got) == repr(want)
    for name in Step.__dataclass_fields__:  # the same objects in the slots, not copies
        value = getattr(want, name)
        if not isinstance(value, (tuple, dict)):
            assert getattr(got, name) is value or getattr(got, name) == value
    got.tokens_in = 5  # an ordinary, writable Step
    assert got.tokens == 5 + got.tokens_out


def test_compiled_new_step_fills_the_slots_itself(native_chat):
    assert native_chat.SLOT_WRITES is True
    step = native_chat.new_step(
        "s",
        0,
        "observe",
        "Read",
        "a.py",
        {},
        None,
        None,
        1,
        2,
        False,
        None,
        {},
        None,
        None,
        None,
        None,
        None,
        0,
        False,
    )
    assert step.read_set == ("a.py",) and step.write_set == () and step.meta == {}


# ---------------------------------------------------------------- the loader's hash check


def _nested(depth, leaf, as_dict):
    value = leaf
    for _ in range(depth):
        value = {"k": value} if as_dict else [value]
    return value


NESTED = st.builds(_nested, st.integers(0, 300), st.sampled_from(["x", 1, None]), st.booleans())
STEP_VALUES = st.one_of(JSONISH, NESTED, st.just(object()), st.just((1, [2])))


@given(st.lists(st.tuples(STEP_VALUES, STEP_VALUES, STEP_VALUES), max_size=6))
@hsettings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_compiled_hash_check_refuses_the_pure_steps(native_chat, values):
    from loopcore.adapters import _refused_steps_py

    steps = [Step("s", 0, "exec", "t", None, a, r, e) for a, r, e in values]
    want = _refused_steps_py(steps)
    assert native_chat.refused_steps(steps) == want
    assert [i for i, _ in want] == [
        i for i, (a, r, e) in enumerate(values) if _hash_fails(a) or _hash_fails([r, e])
    ]


def test_compiled_hash_check_refuses_too_many_members(native_chat):
    from loopcore.adapters import _refused_steps_py

    wide = Step("s", 0, "exec", "t", None, {"x": list(range(MAX_MEMBERS + 1))}, "ok")
    steps = [Step("s", 0, "exec", "t", None, {"command": "ls"}, "ok"), wide]
    want = _refused_steps_py(steps)
    assert [i for i, _ in want] == [1] and "members" in want[0][1]
    assert native_chat.refused_steps(steps) == want


# ---------------------------------------------------------------- the Ledger's token accounting

BIG = 2**70  # usage fields are unbounded ints: no C integer may carry them
TOKENS = st.one_of(st.none(), st.integers(-5, 5000), st.sampled_from([BIG, -BIG, 0]))
LEDGER_OPS = st.lists(
    st.one_of(
        st.tuples(
            st.just("turn"),
            st.one_of(
                st.none(),
                st.fixed_dictionaries(
                    {"prompt_tokens": TOKENS, "completion_tokens": TOKENS},
                    optional={
                        "completion_tokens_details": st.fixed_dictionaries(
                            {"reasoning_tokens": st.one_of(TOKENS, st.just(BIG))}
                        )
                    },
                ),
                st.fixed_dictionaries({"input_tokens": TOKENS, "output_tokens": TOKENS}),
            ),
            st.one_of(st.none(), st.sampled_from(["", "ok", "let me look at the file " * 3])),
        ),
        st.tuples(st.just("call"), st.sampled_from(["bash", "read_file"]), st.integers(0, 301)),
        st.tuples(st.just("call"), st.just("bash"), st.just(0)),
        st.tuples(
            st.just("result"),
            st.integers(0, 5),
            st.sampled_from(["", "z", "x" * 41, "out\n" * 9 + "!", "y" * 50]),
        ),
        st.tuples(st.just("hidden"), st.integers(0, 5), st.just("never seen")),
        st.tuples(st.just("reject"), st.sampled_from(["bad", ""]), st.integers(0, 50)),
        st.tuples(st.just("context"), st.integers(0, 900)),
    ),
    max_size=24,
)


def _ledger_of(ops, cls):
    from loopcore.adapters._base import Ledger
    from loopcore.taxonomy import get_profile

    ledger = (Ledger if cls is None else cls)("s", get_profile("mini-swe-agent"))
    calls = []
    for op in ops:
        if op[0] == "turn":
            ledger.turn(op[1], text=op[2], ref={"message": len(ledger.turns)})
        elif op[0] == "call" and ledger.turns:
            calls.append(ledger.call(op[1], {"command": "ls"}, f"c{len(calls)}", args_len=op[2]))
        elif op[0] in ("result", "hidden") and calls:
            step = calls[op[1] % len(calls)]
            ledger.result(step, op[2], in_context=op[0] == "result")
        elif op[0] == "reject":
            ledger.reject(op[1] or "format error", "bash" if op[2] else "", args_len=op[2])
        elif op[0] == "context":
            ledger.context(op[1])
    return ledger


@given(LEDGER_OPS)
@hsettings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_compiled_token_accounting_is_the_pure_one(native_chat, ops):
    """Ledger.finish of an exact Ledger (the compiled twin) against Ledger._finish_py, the
    reference, on the same calls, results, rejections and usage, huge and negative ints too."""
    _same_accounting(native_chat, ops)


def _same_accounting(native_chat, ops):
    # the compiled finish of the ledger *ops* build against the pure one of the same ops
    compiled = _ledger_of(ops, None)
    pure = _ledger_of(ops, None)
    got_steps, got_source = native_chat.finish(compiled)
    want_steps, want_source = pure._finish_py()
    assert got_source == want_source
    assert [s.to_dict() for s in got_steps] == [s.to_dict() for s in want_steps]
    assert [type(s) for s in got_steps] == [type(s) for s in want_steps]
    assert compiled._replies == pure._replies


def test_a_ledger_subclass_keeps_its_own_accounting(native_chat):
    """A subclass may override _split_turn: its finish is the Python one, which calls it."""
    from loopcore.adapters._base import Ledger

    seen = []

    class Mine(Ledger):
        __slots__ = ()

        def _split_turn(self, lo, hi, *rest):
            seen.append((lo, hi))
            return super()._split_turn(lo, hi, *rest)

    ledger = _ledger_of(
        [("turn", {"prompt_tokens": 10, "completion_tokens": 4}, "hi"), ("call", "bash", 9)],
        Mine,
    )
    ledger.finish()
    assert seen == [(0, 1)]


RESULT_EXTRA = st.one_of(
    st.none(),
    st.just("not a dict"),
    st.fixed_dictionaries(
        {},
        optional={
            "returncode": st.sampled_from([0, 1, -9, None, "2", True]),
            "exception_info": st.sampled_from(["", None, "timed out", {"type": "X"}, 0]),
        },
    ),
)
RESULT_CONTENT = st.one_of(
    st.none(),
    st.integers(0, 2),
    st.sampled_from(
        [
            "",
            "<returncode>0</returncode>\nok",
            "<returncode>-1</returncode>",
            "<returncode>١٢</returncode>",  # str.isdigit digits that int() reads
            "x" * 200 + "<returncode>3</returncode>",  # past the first 200 characters
            "<returncode>3</returncode" + ">" * 3,
        ]
    ),
)


@given(RESULT_EXTRA, RESULT_CONTENT, st.booleans())
@hsettings(max_examples=300, deadline=None)
def test_compiled_mini_swe_agent_result_hook_is_the_pure_one(native_chat, extra, content, sub):
    from loopcore.adapters.mini_swe_agent import _v2_result

    class Sub(dict):
        pass

    m = {"role": "tool", "content": content}
    if extra is not None:
        m["extra"] = extra
    if sub:
        m = Sub(m)
    a, b = Step("s", 0, "exec", "bash"), Step("s", 0, "exec", "bash")
    assert native_chat.v2_result(a, m, content) == _v2_result(b, m, content)
    assert a.meta == b.meta


# ---------------------------------------------------------------- the encoder's copy rules

WORD = st.sampled_from(
    [
        "cp", "cat", "git", "checkout", "restore", "HEAD", "--", "--worktree", "-p", "-f", "-r",
        "a.py", "a.py.orig", "a.py.bak", "/tmp/a.py", "b_backup.py", "x~", "F.OLD", "echo",
        "printf", "cd", "/testbed", "'a b'", '"$X"', "`pwd`", "hi",
    ]
)  # fmt: skip
JOIN = st.sampled_from([" ", " && ", "; ", " | ", " > ", " >> ", " 2>&1 ", " 2>/dev/null ", " < "])


@st.composite
def copy_commands(draw):
    parts = [draw(WORD)]
    for _ in range(draw(st.integers(0, 6))):
        parts.append(draw(JOIN))
        parts.append(draw(WORD))
    cmd = "".join(parts)
    if draw(st.booleans()):
        cmd += " <<'EOF'\nbody $HOME\nEOF" if draw(st.booleans()) else " <<EOF\nplain\nEOF"
    return cmd


TARGETS = st.one_of(
    st.none(),
    st.just(()),
    st.lists(st.sampled_from(["a.py", "a.py.orig", "b.txt"]), min_size=1, max_size=2).map(tuple),
)


@given(copy_commands(), TARGETS, TARGETS)
@hsettings(max_examples=1500, deadline=None)
def test_compiled_copy_and_full_write_rules_are_the_pure_ones(native, cmd, reads, writes):
    from loopcore.encoded import _copy_flag, _full_write

    assert native.copy_flag(cmd, reads, writes) == _copy_flag(cmd, reads, writes)
    for key in ("command", "cmd", "script"):
        args = {key: cmd}
        assert native.full_write(args) == _full_write(args)
    assert native.full_write(cmd) == _full_write(cmd)
    assert native.full_write({"command": 3, "cmd": cmd}) == _full_write({"command": 3, "cmd": cmd})


def test_the_copy_rules_cover_what_they_name(native):
    """The strategy above reaches every answer of both rules (so the crossing means something)."""
    cases = {
        ("cp a.py a.py.orig", ("a.py",), ("a.py.orig",)): 1,
        ("cp a.py.orig a.py", ("a.py.orig",), ("a.py",)): 2,
        ("cd /testbed && git checkout -- a.py", None, ("a.py",)): 2,
    }
    from loopcore.encoded import BACKUP, RESTORE, _copy_flag

    flag = {1: BACKUP, 2: RESTORE}
    for (cmd, reads, writes), want in cases.items():
        assert native.copy_flag(cmd, reads, writes) == _copy_flag(cmd, reads, writes) == flag[want]
    assert native.full_write({"command": "echo hi > b.txt"}) is True
    assert native.full_write({"command": "cat > b.txt <<'EOF'\nx\nEOF"}) is True
    assert native.full_write({"command": "echo $HOME > b.txt"}) is False


# every blank str.strip() drops, in each str kind, around text and newlines
SIZE_TEXT = st.text(
    alphabet=" \t\n\r\x0b\x0c\x1c\x1f\x85\xa0ax\u3000\u2028é\U0001d11e", max_size=60
)
SIZE_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=False),
    SIZE_TEXT,
    st.integers(0, 40).map(lambda n: "  line of text\n\n \t\n" * n),
)


def _nest(inner):
    return st.one_of(
        inner,
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(st.text("abc", max_size=2), inner, max_size=3),
    )


# three levels of containers: one more than the text count looks into
SIZE_VALUES = _nest(_nest(_nest(SIZE_LEAVES)))


@given(SIZE_VALUES, st.integers(0, 30))
@hsettings(max_examples=1500, deadline=None)
def test_compiled_text_size_is_the_pure_one(native, value, cap):
    """A result's characters and non-empty lines: the compiled count (one-byte texts skip each
    filled line with memchr) is the pure one, lines being counted up to the cap only."""
    from loopcore.encoded import _text_size

    chars, lines = _text_size(value)
    got_chars, got_lines = native.text_size(value, cap)
    assert got_chars == chars
    assert min(got_lines, cap) == min(lines, cap)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\n",
        "a",
        " a",
        "a\n",
        "\n\na\n\n",
        " \t\n \n",
        "\xa0\n\x85x\n",
        "x" * 1000 + "\n" * 3,
        "\x1c\x1d\x1e\x1fa",
        "é\n \né",
        "a\nb\nc\n\n d",
        "a\u3000\n\u3000\nb",
    ],
)
def test_text_size_edges(native, text):
    from loopcore.encoded import _text_size

    assert native.text_size(text, 1000) == _text_size(text)
    for cap in range(4):
        assert native.text_size(text, cap) == (len(text), min(_text_size(text)[1], cap))


def test_reply_loop_scans_after_the_facts_as_the_reference_scans(native):
    """The compiled encoder runs a trace's reply-loop scans after the facts of all its steps,
    where the reference runs them: a bad step kind is found before a text that cannot be
    scanned, a scan that fails fails as the reference's, and loops are counted the same with
    any token counts."""
    from loopcore.encoded import DEFAULT_SETTINGS, encode_with
    from loopcore.trace import Trace

    pure = _native_flag.load_twin("encode", "py")
    loop = "the same sentence again and again, over and over in this reply; " * 12

    def outcome(twin, steps):
        try:
            enc = encode_with([Trace(steps)], DEFAULT_SETTINGS, twin)
        except Exception as exc:  # noqa: BLE001 - the point is to compare
            return ("raises", type(exc), str(exc))
        return enc.degen.tolist()

    odd_text = Step("s", 0, "other", "", text=list(loop), tokens_out=40)
    bad_kind = Step("s", 1, "other", "")
    object.__setattr__(bad_kind, "kind", "nonsense")
    cases = [
        [Step("s", 0, "other", "", text=loop, tokens_out=40), bad_kind],
        [odd_text, bad_kind],
        [Step("s", 0, "other", "", text=loop, tokens_out=2**62 + 5, tokens_in=-(2**62))],
        [Step("s", 0, "other", "", text=loop, tokens_turn=2**40), Step("s", 0, "exec", "bash")],
        [Step("s", 0, "other", "", text=loop, tokens_out=40, rejected="no")] * 3,
    ]
    for steps in cases:
        assert outcome(native, steps) == outcome(pure, steps)
    assert outcome(pure, cases[0])[1] is ValueError
    assert outcome(pure, cases[1])[1] is ValueError  # the kind, before the unscannable text
    assert outcome(pure, [odd_text])[1] is TypeError
    assert outcome(native, [odd_text]) == outcome(pure, [odd_text])
    assert outcome(pure, cases[4])[0] > 0


def test_the_compiled_walk_classifies_shell_calls_without_the_per_command_cache(native_chat):
    """With the dispatcher's own classifier in place the compiled walk calls the compiled
    classifier under its cache (the same answers, see the walk crossings above): no command is
    hashed into the cache, and the Steps are the pure walk's."""
    from loopcore.adapters._base import Ledger, LoadStats
    from loopcore.adapters._io import Ctx
    from loopcore.adapters.openai_chat import _walk_chat_py
    from loopcore.taxonomy.shell import classify_shell_access

    messages = []
    for k, cmd in enumerate(["cat a.py", "cat a.py", "sed -i 's/x/y/' a.py", "ls"]):
        args = json.dumps({"command": cmd})
        messages.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": f"c{k}", "function": {"name": "bash", "arguments": args}}],
            }
        )
        messages.append({"role": "tool", "tool_call_id": f"c{k}", "content": "out\n"})

    def steps(walk):
        ctx = Ctx("t.jsonl", None, True, LoadStats(), None)
        ledger = Ledger("s", ctx.profile("mini-swe-agent"))
        walk(messages, ctx, ledger)
        return [(s.kind, s.target, s.reads, s.writes, s.no_op) for s in ledger.steps]

    classify_shell_access.cache_clear()
    got = steps(native_chat.walk_chat)
    assert classify_shell_access.cache_info().currsize == 0
    assert got == steps(_walk_chat_py)
    assert got[2][0] == "mutate" and got[0] == got[1]


BACKUP_TEXT = st.text(
    alphabet=st.sampled_from(
        list("/~.abkcupdlsvegiORIGBAKCUPSVEDLTMtmp_-")
        + ["\u212a", "\u017f", "\u0130", "\u0131", "é"]
    ),
    max_size=24,
)


@given(st.one_of(BACKUP_TEXT, st.sampled_from(["/tmp/a", "/TMP/", "/tmp", "a/b.bak/c", "x~/y"])))
@hsettings(max_examples=1500, deadline=None)
def test_compiled_backup_name_is_the_pure_pattern(native, name):
    from loopcore.encoded import _BACKUP_NAME

    assert native.backup_name(name) is (_BACKUP_NAME.search(name) is not None)


@pytest.mark.parametrize(
    "name, want",
    [
        ("a.py.orig", True), ("a.py.BAK", True), ("dir.bak/a.py", False), ("/tmp/x.py", True),
        ("/Tmp/x.py", True), ("x/tmp/a.py", False), ("a.Save", True), ("a~", True),
        ("backup/a.py", False), ("a_backup.py", True), ("a.py", False), ("a.old.py", True),
        ("a.\u212aak", False), ("a.ba\u212a", True), ("", False),
    ],
)  # fmt: skip
def test_compiled_backup_name_examples(native, name, want):
    from loopcore.encoded import _BACKUP_NAME

    assert (_BACKUP_NAME.search(name) is not None) is want
    assert native.backup_name(name) is want


# API calls that reason, each followed by a prompt grown by the whole completion (the reasoning
# sent back) or by the visible part only, plus what the results add: both readings of
# _context_prompts, and gaps that disagree, in both twins
REASONING_CALLS = st.lists(
    st.tuples(
        st.integers(0, 3000),  # completion
        st.integers(0, 3000),  # reasoning (may exceed the completion)
        st.booleans(),  # the next prompt holds the reasoning
        st.integers(-50, 400),  # what the gap adds beyond the completion it holds
        st.sampled_from(["", "ok\n", "x" * 300]),  # the call's result
        st.integers(0, 2),  # calls the API call issued
        st.sampled_from([0, 0, 40]),  # characters of other messages in the gap
    ),
    min_size=1,
    max_size=12,
)


@given(REASONING_CALLS, st.integers(0, 10**6))
@hsettings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_compiled_reading_of_reasoning_in_the_prompts_is_the_pure_one(native_chat, calls, start):
    ops = []
    prompt = start
    for completion, reasoning, kept, more, result, n_calls, context in calls:
        usage = {"prompt_tokens": prompt, "completion_tokens": completion}
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
        ops.append(("turn", usage, ""))
        for k in range(n_calls):
            ops.append(("call", "read_file", 20 + k))
            ops.append(("result", -1, result))
        if context:
            ops.append(("context", context))
        prompt += (completion if kept else max(completion - reasoning, 0)) + more
    ops.append(("turn", {"prompt_tokens": prompt, "completion_tokens": 3}, "done"))
    # each result answers the call just made (index -1 of the calls so far)
    _same_accounting(native_chat, ops)
