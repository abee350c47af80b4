"""The reader of Codex code-mode programs (loopcore.adapters._jslit): strict, bounded, and
never a call it cannot prove."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from loopcore.adapters._jslit import MAX_DEPTH, NOT_LITERAL, literal, single_call

_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(_json)
def test_every_json_text_is_the_literal_of_its_value(value):
    for text in (json.dumps(value), json.dumps(value, ensure_ascii=False, indent=1)):
        got = literal(text)
        assert got == value and type(got) is type(value)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_any_text_is_read_or_refused_never_raises(text):
    literal(text)
    single_call(text)
    single_call(f"text(await tools.exec_command({text}));")


def test_javascript_spellings():
    assert literal("{cmd: 'a\\'b', n: 1, ok: true, v: null,}") == {
        "cmd": "a'b",
        "n": 1,
        "ok": True,
        "v": None,
    }
    assert literal('{"k": `line 1\nline 2`}') == {"k": "line 1\nline 2"}
    assert literal(r'"\x41\u0042\u{1F600}\ud83d\ude00\q"') == "AB\U0001f600\U0001f600q"
    assert literal('"a\\\nb"') == "ab"  # a line continuation
    assert literal("[1, 2.5, -3e2, [ ]]") == [1, 2.5, -300.0, []]
    assert literal("{a: 1, a: 2}") == {"a": 2}  # the last of a repeated key, as JavaScript


def test_what_is_not_a_literal():
    for text in (
        "{cmd: `cat ${f}`}",  # a substitution
        "{cmd: f}",  # a variable
        "{cmd: 'a' + 'b'}",
        "{cmd: 'a'} // done",
        "{cmd: 'a\nb'}",  # a line break in a quoted string
        "'\\1'",  # an octal escape
        "{cmd: 'a'",
        "",
        "01",
        "1x",
        "truey",
        "{'a' 1}",
        "{a: 1} {b: 2}",
    ):
        assert literal(text) is NOT_LITERAL, text


def test_deep_or_huge_input_is_refused_quickly():
    assert literal("[" * MAX_DEPTH + "]" * MAX_DEPTH) == eval("[" * MAX_DEPTH + "]" * MAX_DEPTH)
    assert literal("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)) is NOT_LITERAL
    assert literal("[" * 200_000) is NOT_LITERAL
    assert literal("{a:" * 200_000) is NOT_LITERAL
    big = "x" * 5_000_000
    assert literal(f'"{big}"') == big


def test_single_call_shapes():
    assert single_call('text(await tools.exec_command({cmd:"ls"}));\n') == (
        "exec_command",
        {"cmd": "ls"},
        True,
    )
    bound = 'const r = await tools.exec_command({"cmd":"npm test"});\ntext(r.output);\n'
    assert single_call(bound) == ("exec_command", {"cmd": "npm test"}, False)
    assert single_call("let out = await tools.view_image({path: 'a.png'}); text(out)") == (
        "view_image",
        {"path": "a.png"},
        True,
    )
    assert single_call('text(await tools.exec_command({cmd:"echo (a)"}))') == (
        "exec_command",
        {"cmd": "echo (a)"},
        True,
    )
    for program in (
        'text(await tools.exec_command({cmd:"a"})); text(await tools.exec_command({cmd:"b"}));',
        'const r = await tools.exec_command({cmd:"a"}); text(s.output);',  # another variable
        'const r = await tools.exec_command({cmd:"a"}); text(r.output.slice(0, 10));',
        'await tools.exec_command({cmd:"rm -rf build"}); text("done");',
        'for (const f of ["a", "b"]) text(await tools.exec_command({cmd: "cat " + f}));',
        "text(await tools.exec_command({cmd: x}));",
    ):
        assert single_call(program) is None, program
