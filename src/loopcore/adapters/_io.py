"""Reading a source once: bytes (gunzipped when needed), one orjson parse, JSONL line by line."""
from __future__ import annotations

import os
import zlib
from typing import Any

import orjson

from ..taxonomy.profiles import Profile, get_profile
from ._base import LoadStats, TraceFormatError

__all__ = ["Ctx", "Parsed", "parse_bytes", "read_bytes", "stem_of"]

_GZIP_MAGIC = b"\x1f\x8b"


def read_bytes(path: str) -> bytes:
    """The file's bytes, gunzipped when it is gzip (by content, not by name)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == _GZIP_MAGIC:
        try:
            # wbits 31 = gzip container; a decompressobj handles concatenated members too.
            out = []
            while data:
                d = zlib.decompressobj(31)
                out.append(d.decompress(data))
                data = d.unused_data
                if not d.eof:
                    raise TraceFormatError("truncated gzip stream", path)
            data = b"".join(out)
        except zlib.error as exc:
            raise TraceFormatError(f"not a readable gzip file ({exc})", path) from None
    return data


def stem_of(path: str | None) -> str:
    """The file name without directories and without .gz/.json/.jsonl/.traj/.traj.json."""
    if not path:
        return "session"
    name = os.path.basename(str(path).split("#", 1)[0])
    for ext in (".gz", ".json", ".jsonl", ".ndjson", ".traj", ".traj"):
        if name.endswith(ext):
            name = name[: -len(ext)]
    return name or "session"


class Parsed:
    """A parsed source: ``doc`` is the JSON value (a JSONL file becomes the list of its records,
    with ``lines[i]`` the line number of record i); ``bad`` the JSONL lines that did not parse."""

    __slots__ = ("doc", "lines", "bad", "empty")

    def __init__(self, doc: Any, lines: list[int] | None = None, bad: list[tuple[int, str]] | None = None,
                 empty: bool = False) -> None:
        self.doc = doc
        self.lines = lines
        self.bad = bad or []
        self.empty = empty


def parse_bytes(data: bytes, path: str | None) -> Parsed:
    """Parse a whole JSON document, else JSON Lines; raises TraceFormatError naming file and line."""
    if not data or data.isspace():  # isspace stops at the first other byte; strip() would copy
        return Parsed([], [], empty=True)
    try:
        return Parsed(orjson.loads(data))
    except orjson.JSONDecodeError as exc:
        whole_error = exc
    # JSON Lines: only when the first record parses on its own, so a broken pretty-printed
    # document reports its own error and line instead of a cascade of bad "lines".
    records: list[Any] = []
    lines: list[int] = []
    bad: list[tuple[int, str]] = []
    first = True
    lineno = 0
    for raw in data.split(b"\n"):
        lineno += 1
        if not raw.strip():
            continue
        try:
            rec = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            if first:
                raise TraceFormatError(f"invalid JSON: {whole_error.msg}", path, whole_error.lineno) from None
            bad.append((lineno, f"invalid JSON: {exc.msg}"))
            continue
        if first and not isinstance(rec, (dict, list)):
            raise TraceFormatError(f"invalid JSON: {whole_error.msg}", path, whole_error.lineno) from None
        first = False
        records.append(rec)
        lines.append(lineno)
    return Parsed(records, lines, bad)


class Ctx:
    """Per-source state an adapter reports through: where it is and what was skipped."""

    __slots__ = ("path", "lines", "keep_going", "stats", "skipped", "_profile_arg", "stem")

    def __init__(self, path: str | None, lines: list[int] | None, keep_going: bool, stats: LoadStats | None,
                 profile: Any) -> None:
        self.path = path
        self.lines = lines
        self.keep_going = keep_going
        self.stats = stats
        self.skipped = 0
        self._profile_arg = profile
        self.stem = stem_of(path)

    def profile(self, default: str) -> Profile:
        """The user's profile, or the format's default one."""
        return get_profile(self._profile_arg, default)

    def bad(self, message: str, index: int | None = None, line: int | None = None) -> None:
        """Report a malformed record (record *index* of a JSONL file gives its line number).
        Raises TraceFormatError, or with keep_going counts it and returns so the caller skips it."""
        if line is None and index is not None and self.lines is not None and index < len(self.lines):
            line = self.lines[index]
        elif line is None and index is not None:
            message = f"{message} (item {index})"
        err = TraceFormatError(message, self.path, line)
        if not self.keep_going:
            raise err
        self.skipped += 1
        if self.stats is not None:
            self.stats.errors.append(err)
            self.stats.skipped_lines += 1
