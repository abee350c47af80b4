"""Every adapter and load(): mutated real-shaped files (the corpus holds one small file per
format) raise only TraceFormatError; with keep_going they are skips, and whatever loads can be
analysed without an error.

The first input byte picks the format (auto, or one forced adapter) and whether the bytes are
loaded from memory or from a file (plain or gzipped), so _io's reading paths are covered too.
"""

from __future__ import annotations

import gzip
import os
import sys
import tempfile

import _common  # noqa: F401 - sets sys.path
import atheris

from loopcore import analyse_burn, load
from loopcore.adapters import FORMATS, LoadStats, TraceFormatError

CHOICES = ("auto", *FORMATS)
TMP = tempfile.mkdtemp(prefix="loopcore-fuzz-load-")


def _load(source, fmt: str, keep_going: bool) -> None:
    stats = LoadStats()
    try:
        traces = list(load(source, format=fmt, keep_going=keep_going, stats=stats))
    except TraceFormatError:
        return  # the documented error (with keep_going, a whole-document error still raises)
    for t in traces:
        analyse_burn(t)


def TestOneInput(data: bytes) -> None:
    if len(data) < 2:
        return
    sel, body = data[0], data[1:]
    fmt = CHOICES[sel % len(CHOICES)]
    where = (sel >> 5) % 3
    for keep_going in (False, True):
        if where == 0:
            _load(body, fmt, keep_going)
        else:
            path = os.path.join(TMP, "t.jsonl.gz" if where == 2 else "t.json")
            with open(path, "wb") as f:
                f.write(gzip.compress(body, compresslevel=1) if where == 2 else body)
            _load(path, fmt, keep_going)


if __name__ == "__main__":
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()
