"""Every adapter and load(): mutated real-shaped files (the corpus holds one small file per
format) raise only TraceFormatError; with keep_going they are skips, and whatever loads can be
analysed without an error.

The first input byte picks the format (auto, or one forced adapter) and whether the bytes are
loaded from memory or from a file (plain, gzipped or Zstandard), so _io's reading paths are
covered too.
"""

from __future__ import annotations

import gzip
import os
import sys
import tempfile

import _common  # noqa: F401 - sets sys.path
import atheris

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd

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
    where = (sel >> 5) % 4
    for keep_going in (False, True):
        if where == 0:
            _load(body, fmt, keep_going)
        else:
            name, packed = (
                ("t.json", body),
                ("t.jsonl.gz", gzip.compress(body, compresslevel=1)),
                ("t.jsonl.zst", zstd.compress(body, 1)),
            )[where - 1]
            path = os.path.join(TMP, name)
            with open(path, "wb") as f:
                f.write(packed)
            _load(path, fmt, keep_going)


if __name__ == "__main__":
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()
