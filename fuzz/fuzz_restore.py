"""Guard.restore on mutated snapshots: the only error is the documented ValueError, on both
twins, and a guard that restores works (check, record, snapshot) without raising.

The first input byte picks the mode: even = the rest is a whole snapshot (header, checksum and
all); odd = the rest is a payload, given a valid header and checksum here, so mutations reach
the payload's parser instead of stopping at the checksum.
"""

from __future__ import annotations

import sys

import _common  # noqa: F401 - sets sys.path
import atheris
from xxhash import xxh3_64_intdigest

from loopcore import Guard
from loopcore.guard import _SNAP_HEADER, _SNAP_MAGIC, _SNAP_VERSION, _restore_guard


def _wrap(payload: bytes) -> bytes:
    return (
        _SNAP_MAGIC
        + _SNAP_HEADER.pack(_SNAP_VERSION, len(payload), xxh3_64_intdigest(payload))
        + payload
    )


def _exercise(g: Guard) -> None:
    for session in ("s1", "s2", 7):
        d = g.check(session, "read", {"path": "a.ts"})
        assert d.action in ("allow", "warn", "block")
        g.record(session, "read", {"path": "a.ts"}, "same", tokens=10)
    g.stats()
    again = _restore_guard(g.snapshot(), impl=g.implementation)
    assert again.stats() == g.stats()


def TestOneInput(data: bytes) -> None:
    if not data:
        return
    blob = data[1:] if data[0] % 2 == 0 else _wrap(data[1:])
    for impl in ("c", "py"):
        try:
            g = _restore_guard(blob, impl=impl)
        except ValueError:
            continue
        _exercise(g)


if __name__ == "__main__":
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()
