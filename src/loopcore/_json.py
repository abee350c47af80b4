"""One JSON parse for the trace readers and the MCP proxy: orjson, lone UTF-16 surrogates mended.

JSON text may escape a UTF-16 code unit on its own (``"\\ud83d"``), and the harnesses written
in JavaScript (Claude Code, gemini-cli, opencode, Cline) or Python (``json.dumps`` of a string
decoded with ``surrogateescape``) do write such escapes: a tool output cut to a length in code
units can split an emoji's surrogate pair, leaving its high half alone, and the model itself
sometimes emits one. ``JSON.stringify`` and ``json.dumps`` write the half as an escape, and
orjson (strict UTF-8, as RFC 8259 asks for interchange) refuses the whole record: "no low
surrogate in string". Such a session is real and often the costliest kind (the API then rejects
every later turn of it), so a record is never lost for a half character: when orjson refuses a
document for a surrogate, each escape of a lone surrogate is replaced by ``\\ufffd`` (U+FFFD,
the replacement character, as a decoder does for an ill-formed sequence) and the document is
parsed again. The escape and its replacement are both 6 bytes, so every other error still names
the right line and column, and strings keep their length in characters. A well-formed pair
(``\\ud83d\\ude00``) is left as it is; a backslash that is itself escaped (``\\\\ud83d``, the
text "\\ud83d") starts no escape and is left too.

Python's ``json.dumps`` writes a float that is not finite as ``NaN``, ``Infinity`` or
``-Infinity`` (its default, ``allow_nan=True``), and Python's ``json`` reads them back, as
JavaScript's ``JSON.parse`` reads a number too large for a double as ``Infinity``: a trajectory
or export a Python harness wrote with a cost or a score it could not compute is read by its own
tools, and orjson refuses the whole of it. When orjson refuses a document and the text holds one
of those words (or orjson says a number is infinite), it is parsed again by Python's ``json``,
which gives the floats ``nan`` / ``inf``; anything else wrong with the document is still an
error, named where Python's parser stops. Both retries run only for a document orjson refused:
a well-formed one costs nothing more.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

__all__ = ["loads", "mend_surrogates"]

# A run of backslashes, then "u" and a surrogate; a high one may be followed by the escape of a
# low one. The run's length says whether its last backslash starts an escape (odd) or is the
# second half of an escaped backslash (even). Only surrogate escapes match, so a document
# with thousands of other escapes costs one C scan and no Python call for each of them.
_HIGH = r"[dD][89abAB][0-9a-fA-F]{2}"
_LOW = r"[dD][c-fC-F][0-9a-fA-F]{2}"
_PATTERN = rf"(\\+)u(?:({_HIGH})(\\u{_LOW})?|{_LOW})"
_BYTES = re.compile(_PATTERN.encode())
_STR = re.compile(_PATTERN)


def _mend(whole: Any, run: Any, high: Any, low: Any, fffd: Any) -> Any:
    # the replacement of one match (bytes or str alike)
    if len(run) % 2 == 0:
        # the "u" is text after an escaped backslash; a low escape right after it is alone
        return whole if low is None else whole[:-6] + fffd
    if high is not None and low is not None:
        return whole  # a well-formed pair
    return run[:-1] + fffd + (whole[:0] if low is None else low)


def _mend_bytes(m: re.Match[bytes]) -> bytes:
    run, high, low = m.group(1, 2, 3)
    return _mend(m.group(), run, high, low, b"\\ufffd")  # type: ignore[no-any-return]


def _mend_str(m: re.Match[str]) -> str:
    run, high, low = m.group(1, 2, 3)
    return _mend(m.group(), run, high, low, "\\ufffd")  # type: ignore[no-any-return]


def mend_surrogates(text: bytes | str) -> bytes | str:
    """*text* (JSON) with every escape of a lone UTF-16 surrogate replaced by ``\\ufffd``; the
    same object when it has none."""
    if isinstance(text, str):
        return _STR.sub(_mend_str, text) if "\\u" in text else text
    return _BYTES.sub(_mend_bytes, text) if b"\\u" in text else text


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """``orjson.loads(data)``, parsed again with lone surrogates mended when orjson refuses it
    for one, and by Python's ``json`` when it holds ``NaN`` / ``Infinity`` (see the module doc);
    raises orjson.JSONDecodeError as orjson does for anything else."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        err = exc
    raw: bytes | str = data if isinstance(data, (bytes, str)) else bytes(data)
    if "surrogate" in err.msg:
        mended = mend_surrogates(raw)
        if mended is raw or mended == raw:
            raise err
        try:
            return orjson.loads(mended)
        except orjson.JSONDecodeError as exc:
            err = exc
        raw = mended
    if not _non_finite(raw, err):
        raise err
    return _loads_non_finite(raw, err)


_WORDS = (b"NaN", b"Infinity")


def _non_finite(raw: bytes | str, err: orjson.JSONDecodeError) -> bool:
    # whether Python's json may read what orjson refused: a NaN / Infinity word, or a number
    # orjson says is infinite (1e999)
    if "infinity" in err.msg:
        return True
    if isinstance(raw, str):
        return any(w.decode() in raw for w in _WORDS)
    return any(w in raw for w in _WORDS)


def _loads_non_finite(raw: bytes | str, err: orjson.JSONDecodeError) -> Any:
    try:
        # strict UTF-8 as orjson reads it (Python's json would let an encoded surrogate through)
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError:
        raise err from None
    text = mend_surrogates(text)  # type: ignore[assignment]
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        # the error where Python's parser stopped, as orjson's error type (the callers catch it)
        raise orjson.JSONDecodeError(exc.msg, exc.doc, exc.pos) from None
    except (ValueError, RecursionError):
        # a number of more digits than Python reads, nesting deeper than its stack: orjson's
        # error stands
        raise err from None
