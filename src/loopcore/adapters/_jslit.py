"""Codex's code mode: a program that is one tool call, read as that call.

In code mode (Codex 0.15x) the model does not call tools directly: it writes a JavaScript
program, run by the custom tool ``exec``, whose ``tools.NAME(...)`` calls do the work and whose
``text(...)`` calls make the output. Most programs are a single call and the text of its
result::

    text(await tools.exec_command({cmd: "cat src/a.ts"}));
    const r = await tools.exec_command({"cmd": "npm test", "workdir": "/w"}); text(r.output);

Such a program is that call, made directly: :func:`single_call` gives its tool, its argument
object and what of the result the program prints. Anything else (two calls, a loop, a
computed argument, a template string with a substitution) is not read here, and stays one
opaque ``exec`` step, which may write anything.

The argument is a JavaScript object literal, read strictly: keys are identifiers or strings;
values are strings (double, single or back quotes without ``${``), numbers, ``true``,
``false``, ``null``, arrays and objects of those, at most :data:`MAX_DEPTH` deep. Whatever
else it holds (a variable, a call, a comment) makes it no literal, and the program opaque.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["MAX_DEPTH", "NOT_LITERAL", "literal", "single_call"]

#: Containers nested deeper than this make an argument no literal (a program is not a place
#: for deep data; the bound keeps the reader's recursion small on hostile input).
MAX_DEPTH = 16

_IDENT = r"[A-Za-z_$][A-Za-z0-9_$]*"
# text(await tools.NAME(ARG));
_DIRECT = re.compile(
    rf"\A\s*text\(\s*await\s+tools\.({_IDENT})\(\s*(.*?)\s*\)\s*\)\s*;?\s*\Z", re.DOTALL
)
# const r = await tools.NAME(ARG); text(r);   or   text(r.output);
_BOUND = re.compile(
    rf"\A\s*(?:const|let|var)\s+({_IDENT})\s*=\s*await\s+tools\.({_IDENT})\(\s*(.*?)\s*\)\s*;"
    rf"\s*text\(\s*\1(\.output)?\s*\)\s*;?\s*\Z",
    re.DOTALL,
)
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_KEY = re.compile(_IDENT)
_SIMPLE_ESCAPES = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "b": "\b",
    "f": "\f",
    "v": "\v",
    "0": "\0",
}


class _NotLiteral(Exception):
    pass


#: What :func:`literal` gives for a text that is no literal (None is the literal ``null``).
NOT_LITERAL: Any = object()


def single_call(program: str) -> tuple[str, Any, bool] | None:
    """``(tool, argument, whole)`` of a program that is one tool call and the text of its
    result (*whole*: the whole result is printed, not only its ``output``), else None."""
    m = _DIRECT.match(program)
    if m is not None:
        tool, arg, whole = m.group(1), m.group(2), True
    else:
        m = _BOUND.match(program)
        if m is None:
            return None
        tool, arg, whole = m.group(2), m.group(3), m.group(4) is None
    value = literal(arg)
    if value is NOT_LITERAL:
        return None
    return tool, value, whole


def literal(text: str) -> Any:
    """The value of a JavaScript literal that is all of *text* (blanks around it allowed), or
    ``NOT_LITERAL`` when *text* is anything else."""
    try:
        value, pos = _value(text, _skip(text, 0), 0)
    except (_NotLiteral, IndexError, ValueError, RecursionError):
        return NOT_LITERAL
    if _skip(text, pos) != len(text):
        return NOT_LITERAL
    return value


def _skip(s: str, i: int) -> int:
    n = len(s)
    while i < n and s[i] in " \t\r\n":
        i += 1
    return i


def _value(s: str, i: int, depth: int) -> tuple[Any, int]:
    c = s[i]
    if c == "{" or c == "[":
        if depth >= MAX_DEPTH:
            raise _NotLiteral
        return (_object if c == "{" else _array)(s, i + 1, depth + 1)
    if c in "\"'`":
        return _string(s, i)
    for word, value in (("true", True), ("false", False), ("null", None)):
        if s.startswith(word, i) and not _ident_char(s, i + len(word)):
            return value, i + len(word)
    m = _NUMBER.match(s, i)
    if m is None or _ident_char(s, m.end()):
        raise _NotLiteral
    t = m.group()
    return (float(t) if any(ch in t for ch in ".eE") else int(t)), m.end()


def _ident_char(s: str, i: int) -> bool:
    return i < len(s) and (s[i].isalnum() or s[i] in "_$")


def _object(s: str, i: int, depth: int) -> tuple[dict, int]:
    out: dict = {}
    i = _skip(s, i)
    while s[i] != "}":
        if s[i] in "\"'`":
            key, i = _string(s, i)
        else:
            m = _KEY.match(s, i)
            if m is None:
                raise _NotLiteral
            key, i = m.group(), m.end()
        i = _skip(s, i)
        if s[i] != ":":
            raise _NotLiteral
        value, i = _value(s, _skip(s, i + 1), depth)
        out[key] = value  # a repeated key: the last one, as JavaScript keeps it
        i = _after_member(s, i, "}")
    return out, i + 1


def _array(s: str, i: int, depth: int) -> tuple[list, int]:
    out: list = []
    i = _skip(s, i)
    while s[i] != "]":
        value, i = _value(s, i, depth)
        out.append(value)
        i = _after_member(s, i, "]")
    return out, i + 1


def _after_member(s: str, i: int, close: str) -> int:
    """Past a container member: its comma (a trailing one allowed), or at *close*."""
    i = _skip(s, i)
    if s[i] == ",":
        return _skip(s, i + 1)
    if s[i] != close:
        raise _NotLiteral
    return i


# The characters a string's scan stops at: its quote, a backslash, and what it cannot hold
# (a line break in a quoted string; a substitution's ``$`` in a template).
_STOPS = {
    '"': re.compile(r'["\\\n\r]'),
    "'": re.compile(r"['\\\n\r]"),
    "`": re.compile(r"[`\\$]"),
}


def _string(s: str, i: int) -> tuple[str, int]:
    quote = s[i]
    stops = _STOPS[quote]
    i += 1
    parts: list[str] = []
    while True:
        m = stops.search(s, i)
        if m is None:
            raise _NotLiteral  # never closed
        j = m.start()
        c = s[j]
        parts.append(s[i:j])
        if c == quote:
            return "".join(parts), j + 1
        if c == "\\":
            ch, i = _escape(s, j + 1)
            parts.append(ch)
        elif c == "$":
            if s.startswith("${", j):
                raise _NotLiteral  # a substitution: computed, not a literal
            parts.append("$")
            i = j + 1
        else:
            raise _NotLiteral  # a quoted string cannot hold a line break


def _escape(s: str, i: int) -> tuple[str, int]:
    c = s[i]
    simple = _SIMPLE_ESCAPES.get(c)
    if simple is not None:
        if c == "0" and i + 1 < len(s) and s[i + 1].isdigit():
            raise _NotLiteral  # an octal escape: not allowed in strict code
        return simple, i + 1
    if c == "x":
        return chr(_hex(s[i + 1 : i + 3], 2)), i + 3
    if c == "u":
        if s.startswith("{", i + 1):
            end = s.index("}", i + 2)
            code = _hex(s[i + 2 : end], 0)
            if code > 0x10FFFF:
                raise _NotLiteral
            return chr(code), end + 1
        code = _hex(s[i + 1 : i + 5], 4)
        if 0xD800 <= code < 0xDC00 and s.startswith("\\u", i + 5):
            low = _hex(s[i + 7 : i + 11], 4)
            if 0xDC00 <= low < 0xE000:
                return chr(0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)), i + 11
        return chr(code), i + 5
    if c == "\r":  # a line continuation: the escaped line break is no character
        return "", i + 2 if s.startswith("\n", i + 1) else i + 1
    if c == "\n" or c == "\u2028" or c == "\u2029":
        return "", i + 1
    if c.isdigit():
        raise _NotLiteral  # \1..\9: not allowed in strict code
    return c, i + 1  # any other escaped character is itself


def _hex(digits: str, width: int) -> int:
    if (width and len(digits) != width) or not digits or len(digits) > 6:
        raise _NotLiteral
    if not all(ch in "0123456789abcdefABCDEF" for ch in digits):
        raise _NotLiteral
    return int(digits, 16)
