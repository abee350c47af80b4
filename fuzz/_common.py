"""Shared pieces of the atheris harnesses: both twins, and values built from fuzzer bytes.

The harnesses fuzz the working tree's ``src`` when it holds an in-place build of the compiled
core (``python setup.py build_ext --inplace``), else the installed loopcore.
"""

from __future__ import annotations

import glob
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(os.path.dirname(HERE), "src")
if glob.glob(os.path.join(SRC, "loopcore", "_native_hashing*")) and SRC not in sys.path:
    sys.path.insert(0, SRC)

import atheris  # noqa: E402

from loopcore import _native_flag  # noqa: E402

if _native_flag.NO_EXTENSIONS:
    raise SystemExit(
        "the harnesses compare the compiled core with the pure twin: unset LOOPCORE_NO_EXTENSIONS"
    )


def twins(component: str):
    """(compiled, pure) modules of *component*."""
    return _native_flag.load_twin(component, "c"), _native_flag.load_twin(component, "py")


KEYS = ["a", "b", "path", "messageId", "ts", "é", "k" * 130, "", "0"]


def value(fdp: atheris.FuzzedDataProvider, depth: int = 0):
    """A JSON-like value (plus tuples, sets, bytes, big ints, odd floats) from fuzzer bytes."""
    if fdp.remaining_bytes() == 0:
        return None
    kind = fdp.ConsumeIntInRange(0, 15 if depth < 6 else 8)
    if kind == 0:
        return None
    if kind == 1:
        return fdp.ConsumeBool()
    if kind == 2:
        return fdp.ConsumeIntInRange(-(2**63), 2**63 - 1)
    if kind == 3:
        return fdp.ConsumeInt(fdp.ConsumeIntInRange(1, 24))  # beyond int64 too
    if kind == 4:
        return fdp.ConsumeRegularFloat() if fdp.ConsumeBool() else fdp.ConsumeFloat()
    if kind in (5, 6):
        return fdp.ConsumeUnicodeNoSurrogates(fdp.ConsumeIntInRange(0, 40))
    if kind == 7:
        return fdp.ConsumeUnicode(fdp.ConsumeIntInRange(0, 200))  # lone surrogates, long strings
    if kind == 8:
        return fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 160))
    n = fdp.ConsumeIntInRange(0, 6)
    if kind in (9, 10):
        return [value(fdp, depth + 1) for _ in range(n)]
    if kind == 11:
        return tuple(value(fdp, depth + 1) for _ in range(n))
    if kind in (12, 13):
        out = {}
        for _ in range(n):
            k = (
                KEYS[fdp.ConsumeIntInRange(0, len(KEYS) - 1)]
                if fdp.ConsumeBool()
                else fdp.ConsumeUnicode(6)
            )
            out[k] = value(fdp, depth + 1)
        return out
    if kind == 14:
        out = {}
        for _ in range(n):  # non-str keys: ints, tuples, None, floats
            out[fdp.PickValueInList([1, 2, -1, None, 1.5, (1, 2), True, "x"])] = value(
                fdp, depth + 1
            )
        return out
    items = set()
    for _ in range(n):
        v = value(fdp, depth + 1)
        try:
            items.add(v)
        except TypeError:
            pass
    return frozenset(items) if fdp.ConsumeBool() else items


def outcome(fn, *args, **kwargs):
    """("ok", result) or ("raises", type, message): what a call did, to compare twins."""
    try:
        return ("ok", fn(*args, **kwargs))
    except (TypeError, ValueError) as exc:
        return ("raises", type(exc).__name__, str(exc))
