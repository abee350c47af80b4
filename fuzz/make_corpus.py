"""Regenerate the seed corpus (fuzz/corpus/<target>/): small inputs of our own making.

    python fuzz/make_corpus.py

load: each test fixture (the project's own files), as is and with a forced-format/file/gzip
selector byte; restore: real snapshots and payloads; shell: typical commands; hash and guard:
a few fixed byte strings (their harnesses read any bytes as a value or a call stream).
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import random

import _common  # noqa: F401 - sets sys.path

from loopcore import Policy
from loopcore.guard import _SNAP_HEADER, _SNAP_MAGIC, _make_guard

HERE = pathlib.Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
FIXTURES = HERE.parent / "tests" / "fixtures"


def put(target: str, data: bytes) -> None:
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / hashlib.sha1(data).hexdigest()[:16]).write_bytes(data)


def main() -> None:
    rnd = random.Random(11)
    for f in sorted(FIXTURES.iterdir()):
        if not f.is_file():
            continue  # a folder fixture (sub-agent files, a task folder): its files are no seed
        body = f.read_bytes()
        put("load", b"\x00" + body)  # auto, from memory
        put("load", bytes([0x20]) + body)  # auto, from a file
        put("load", bytes([0x40]) + body)  # auto, gzipped file
    for cmd in [
        "cat a.py | grep x > out.txt",
        "sed -i 's/a/b/' f.py && git diff",
        "bash -lc 'ls; rm -rf b'",
        "python - <<'EOF'\nprint(1)\nEOF",
        "find . -name '*.py' -exec wc -l {} \\;",
        "cd /r && make test",
        'echo $(pwd) `id` "$HOME"',
        "apply_patch <<'P'\n*** Begin Patch\n*** Update File: a\n*** End Patch\nP",
    ]:
        put("shell", b"\x00" + cmd.encode())
    for n in (8, 32, 128, 512):
        put("hash", bytes(rnd.randrange(256) for _ in range(n)))
        put("guard", bytes(rnd.randrange(256) for _ in range(n * 2)))
    for pol in (Policy.default(), Policy.openclaw()):
        g = _make_guard(pol, impl="py")
        for i in range(30):
            s = f"s{i % 3}"
            g.check(s, "read", {"path": f"{i % 4}.ts"})
            g.record(s, "read", {"path": f"{i % 4}.ts"}, "same", tokens=100)
            g.check(s, "message", {"action": "send", "text": "hi"})
            g.record(s, "message", {"action": "send"}, {"ok": True, "messageId": str(i)})
        snap = g.snapshot()
        put("restore", b"\x00" + snap)
        put("restore", b"\x01" + snap[len(_SNAP_MAGIC) + _SNAP_HEADER.size :])
    print(f"corpus in {os.path.relpath(CORPUS)}")


if __name__ == "__main__":
    main()
