"""canonical_hash: the compiled core and the pure twin give the same bytes, or the same error."""

from __future__ import annotations

import sys

import _common
import atheris

C, PY = _common.twins("hashing")
STRIPS = [None, frozenset({"messageId", "ts"}), {"a"}, ("path", 1)]


def TestOneInput(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    strip = STRIPS[fdp.ConsumeIntInRange(0, len(STRIPS) - 1)]
    default = repr if fdp.ConsumeBool() else None
    v = _common.value(fdp)
    if fdp.ConsumeBool():  # a cycle or a shared reference
        v = [v, v]
        if fdp.ConsumeBool():
            v.append(v)
    c = _common.outcome(C.canonical_bytes, v, strip=strip, default=default)
    p = _common.outcome(PY.canonical_bytes, v, strip=strip, default=default)
    if c != p:
        raise AssertionError(f"twins disagree on {v!r:.300}: c={c!r:.300} py={p!r:.300}")
    if c[0] == "ok" and C.canonical_hash(v, strip=strip, default=default) != PY.canonical_hash(
        v, strip=strip, default=default
    ):
        raise AssertionError("same bytes, different hashes")


if __name__ == "__main__":
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()
