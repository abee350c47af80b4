"""The shell classifier: both twins classify and lex every command identically."""

from __future__ import annotations

import sys

import _common
import atheris

C, PY = _common.twins("shell")


def _same(fn_c, fn_p, arg) -> None:
    try:
        rc = ("ok", fn_c(arg))
    except Exception as exc:  # noqa: BLE001 - compared below
        rc = ("raises", type(exc))
    try:
        rp = ("ok", fn_p(arg))
    except Exception as exc:  # noqa: BLE001
        rp = ("raises", type(exc))
    if rc != rp:
        raise AssertionError(f"twins disagree on {arg!r:.300}: c={rc!r:.300} py={rp!r:.300}")


def TestOneInput(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    if fdp.ConsumeBool():
        cmd = fdp.ConsumeUnicode(fdp.remaining_bytes())
    else:  # mostly ASCII shell text: closer to real commands
        cmd = fdp.ConsumeBytes(fdp.remaining_bytes()).decode("latin-1")
    _same(C.classify_shell, PY.classify_shell, cmd)
    _same(C.lex, PY.lex, cmd)


if __name__ == "__main__":
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()
