"""Reading a source once: bytes (inflated when compressed), one orjson parse, JSONL line by line.

Only regular files are read (a FIFO, a device such as /dev/zero, a socket or a folder named
``x.jsonl`` is a TraceFormatError, checked on the opened descriptor, never by waiting on it),
and what one file may expand to is capped: ``LOOPCORE_MAX_FILE_BYTES`` (bytes, default
``DEFAULT_MAX_FILE_BYTES`` = 1 GiB) bounds a plain file and the inflated content of a gzip
(``.gz``) or Zstandard (``.zst``: Codex keeps older rollouts as ``rollout-*.jsonl.zst``) file;
both are inflated in bounded steps, so a compression bomb ends in a TraceFormatError naming the
file and the limit, never in MemoryError. The format is told by the content, not the name.
See docs/formats.md.
"""

from __future__ import annotations

import os
import stat
import sys
import zlib
from collections.abc import Callable, Sequence
from typing import Any, BinaryIO

import orjson

from .._json import loads
from ..taxonomy.profiles import Profile, get_profile
from ._base import LoadStats, TraceFormatError

__all__ = [
    "DEFAULT_MAX_FILE_BYTES",
    "Ctx",
    "COMPRESSED_SUFFIXES",
    "Parsed",
    "gunzip",
    "inflate_bytes",
    "max_file_bytes",
    "parse_bytes",
    "plain_name",
    "read_bytes",
    "stem_of",
    "unzstd",
]

_GZIP_MAGIC = b"\x1f\x8b"
_UTF8_BOM = b"\xef\xbb\xbf"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
#: Names a compressed trace file may end with after its own extension.
COMPRESSED_SUFFIXES = (".gz", ".zst")
#: What one file may hold, or expand to when gzipped, unless LOOPCORE_MAX_FILE_BYTES says otherwise.
DEFAULT_MAX_FILE_BYTES = 1 << 30
_CHUNK = 1 << 20
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_BINARY", 0)
)


def max_file_bytes() -> int:
    """The per-file limit in bytes: ``LOOPCORE_MAX_FILE_BYTES`` when set, else the default."""
    raw = os.environ.get("LOOPCORE_MAX_FILE_BYTES", "").strip()
    if not raw:
        return DEFAULT_MAX_FILE_BYTES
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n <= 0:
        raise TraceFormatError(
            f"LOOPCORE_MAX_FILE_BYTES={raw!r} is not a positive number of bytes", None
        )
    return n


def plain_name(name: str) -> str:
    """*name* without a compression suffix (``.gz``, ``.zst``)."""
    for suffix in COMPRESSED_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _too_big(path: str | None, limit: int, gz: bool) -> TraceFormatError:
    what = "expands to more than" if gz else "is larger than"
    return TraceFormatError(
        f"{what} {limit:,} bytes, the per-file limit (set LOOPCORE_MAX_FILE_BYTES to raise it)",
        path,
    )


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a regular file"


class _Gzip:
    """gzip members through zlib: input the bound held back stays in ``unconsumed_tail``."""

    label = "gzip"
    error: type[Exception] = zlib.error

    @staticmethod
    def new() -> Any:
        return zlib.decompressobj(31)  # wbits 31 = the gzip container

    @staticmethod
    def wants(d: Any) -> bool:
        return True  # zlib holds back input, never output

    @staticmethod
    def feed(d: Any, pending: bytes, room: int) -> tuple[bytes, bytes]:
        return d.decompress(pending, room), d.unconsumed_tail


class _Zstd:
    """Zstandard frames (skippable ones too): output the bound held back stays in the
    decompressor, which takes no input until it is drained."""

    label = "Zstandard"

    def __init__(self, zstd: Any) -> None:
        self.zstd = zstd
        self.error = zstd.ZstdError

    def new(self) -> Any:
        return self.zstd.ZstdDecompressor()

    @staticmethod
    def wants(d: Any) -> bool:
        return bool(d.needs_input)

    @staticmethod
    def feed(d: Any, pending: bytes, room: int) -> tuple[bytes, bytes]:
        if d.needs_input:
            return d.decompress(pending, room), b""
        return d.decompress(b"", room), pending


def _inflate(
    first: bytes, read: Callable[[int], bytes], path: str | None, limit: int, codec: Any
) -> bytes:
    """Inflate a stream of *codec* units (gzip members, Zstandard frames) that starts with
    *first* and continues with ``read(n)``, never holding more than *limit* bytes of output;
    a unit cut short, or bytes after one that start no other, are errors naming the file."""
    parts: list[bytes] = []
    total = 0
    d = codec.new()
    in_unit = False
    pending = first
    try:
        while True:
            if not pending and codec.wants(d):
                pending = read(_CHUNK)
                if not pending:
                    break
            in_unit = True
            out, pending = codec.feed(d, pending, limit - total + 1)
            total += len(out)
            if total > limit:
                raise _too_big(path, limit, True)
            if out:  # a lone part is returned as it is: b"".join copies only for 2 or more
                parts.append(out)
            if d.eof:
                pending = d.unused_data + pending
                d = codec.new()
                in_unit = False
    except codec.error as exc:
        raise TraceFormatError(f"not a readable {codec.label} file ({exc})", path) from None
    if in_unit:
        raise TraceFormatError(f"truncated {codec.label} stream", path)
    return b"".join(parts)


def gunzip(first: bytes, read: Callable[[int], bytes], path: str | None, limit: int) -> bytes:
    """Inflate a gzip stream (concatenated members too) that starts with *first* and continues
    with ``read(n)``, never holding more than *limit* bytes of output."""
    return _inflate(first, read, path, limit, _Gzip)


def _zstd_module() -> Any:
    # Python 3.14's compression.zstd, else its backport (a dependency below 3.14); imported
    # only when a file is Zstandard, so no other path pays for it
    if sys.version_info >= (3, 14):
        from compression import zstd  # type: ignore[import-not-found, unused-ignore]
    else:
        from backports import zstd  # type: ignore[import-not-found, unused-ignore]
    return zstd


def unzstd(first: bytes, read: Callable[[int], bytes], path: str | None, limit: int) -> bytes:
    """Inflate a Zstandard stream (several frames too, skippable ones among them) that starts
    with *first* and continues with ``read(n)``, never holding more than *limit* bytes of
    output; a frame cut short is an error, as a gzip member is."""
    try:
        zstd = _zstd_module()
    except ImportError:
        raise TraceFormatError(
            "a Zstandard file, and the backports.zstd package that reads it is not installed "
            "(pip install backports.zstd)",
            path,
        ) from None
    return _inflate(first, read, path, limit, _Zstd(zstd))


def _inflater(head: bytes) -> Callable[..., bytes] | None:
    """The inflater of a stream that starts with *head* (its first 4 bytes), else None."""
    if head[:2] == _GZIP_MAGIC:
        return gunzip
    if head[:4] == _ZSTD_MAGIC:
        return unzstd
    return None


def inflate_bytes(data: bytes, path: str | None, limit: int) -> bytes:
    """*data* inflated when it is gzip or Zstandard (by content), else as it is."""
    inflate = _inflater(data[:4])
    return data if inflate is None else inflate(data, lambda n: b"", path, limit)


def read_bytes(path: str, limit: int | None = None) -> bytes:
    """The file's bytes, inflated when it is gzip or Zstandard (by content, not by name).

    Raises TraceFormatError when the path cannot be opened, is not a regular file, or holds
    (or expands to) more than *limit* bytes (default: :func:`max_file_bytes`)."""
    limit = max_file_bytes() if limit is None else limit
    try:
        fd = os.open(path, _OPEN_FLAGS)  # O_NONBLOCK: opening a FIFO never waits for a writer
    except OSError as exc:
        raise TraceFormatError(f"cannot read: {exc.strerror or exc}", path) from None
    try:
        st = os.fstat(fd)
        mode = st.st_mode
        if not stat.S_ISREG(mode):
            raise TraceFormatError(
                f"{_kind(mode)}, not a regular file: only regular files are read", path
            )
        f: BinaryIO = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    try:
        with f:
            head = f.read(4)
            inflate = _inflater(head)
            if inflate is not None:
                # the compressed bytes in one read (at most the limit, as for a plain file; more
                # in pieces if the file grew), so a one-member file inflates into one buffer,
                # never joined from pieces
                first = head + f.read(min(max(st.st_size - len(head), 0), limit) + 1)
                return inflate(first, f.read, path, limit)
            f.seek(0)  # a regular file: read it whole in one buffer, no concatenation copy
            # a buffer of the file's size, not of the limit (read(n) allocates n bytes first);
            # a file that grew since fstat is read on, up to the limit
            want = min(st.st_size, limit) + 1
            data = f.read(want)
            if len(data) == want and want <= limit:
                data += f.read(limit + 1 - want)
    except OSError as exc:
        raise TraceFormatError(f"cannot read: {exc.strerror or exc}", path) from None
    if len(data) > limit:
        raise _too_big(path, limit, False)
    return data


def stem_of(path: str | None) -> str:
    """The file name without directories and without .gz/.zst/.json/.jsonl/.traj/.traj.json."""
    if not path:
        return "session"
    name = plain_name(os.path.basename(str(path).split("#", 1)[0]))
    for ext in (".json", ".jsonl", ".ndjson", ".traj", ".traj"):
        if name.endswith(ext):
            name = name[: -len(ext)]
    return name or "session"


class Parsed:
    """A parsed source: ``doc`` is the JSON value (a JSONL file becomes the list of its records,
    with ``lines[i]`` the line number of record i); ``bad`` the JSONL lines that did not parse
    (``(line, message)``; the line is None for a record that has none, a database row);
    ``incomplete`` the line number of a last record cut short (see :func:`parse_bytes`)."""

    __slots__ = ("doc", "lines", "bad", "empty", "incomplete")

    def __init__(
        self,
        doc: Any,
        lines: list[int] | None = None,
        bad: Sequence[tuple[int | None, str]] | None = None,
        empty: bool = False,
        incomplete: int | None = None,
    ) -> None:
        self.doc = doc
        self.lines = lines
        self.bad = bad or []
        self.empty = empty
        self.incomplete = incomplete


def _glued_records(raw: bytes) -> list[dict] | None:
    """The JSON objects a line holds one after another (``{…}{…}``), when it is nothing
    else: two or more, each an object; else None."""
    import json

    try:
        text = raw.decode()
    except UnicodeDecodeError:
        return None
    decode = json.JSONDecoder().raw_decode
    out: list[dict] = []
    pos, n = 0, len(text.rstrip())
    while pos < n:
        try:
            rec, end = decode(text, pos)
        except (ValueError, RecursionError):  # nesting orjson takes, deeper than Python's stack
            return None
        if not isinstance(rec, dict):
            return None
        out.append(loads(text[pos:end]))  # parsed as every record is
        pos = end
    return out if len(out) > 1 else None


def parse_bytes(data: bytes, path: str | None) -> Parsed:
    """Parse a whole JSON document, else JSON Lines; raises TraceFormatError naming file and line.

    A UTF-8 byte order mark at the start (written by Windows tools that re-save a file) is
    passed over, as JSON's RFC 8259 lets a parser do. A JSON Lines file whose last line has no
    newline and does not parse, after records that do, is a file still being written (a harness
    appends each record with its newline, so a reader can catch the last one half written) or
    cut short by a crash: the records before it are read, and the line is
    ``Parsed.incomplete``, never a malformed record that fails the file. A ``.jsonl`` file
    whose only line is such a record (a session whose first record is being written) is an
    empty source with that line incomplete: a whole JSON document cut short is malformed, and
    only the name tells the two apart."""
    if data[:3] == _UTF8_BOM:
        data = data[3:]
    if not data or data.isspace():  # isspace stops at the first other byte; strip() would copy
        return Parsed([], [], empty=True)
    try:
        return Parsed(loads(data))
    except orjson.JSONDecodeError as exc:
        whole_error = exc
    if (
        whole_error.msg == "unexpected end of data"
        and path is not None
        and plain_name(path).endswith(".jsonl")
        and b"\n" not in data
        and data.lstrip()[:1] == b"{"
    ):
        return Parsed([], [], empty=True, incomplete=1)
    # JSON Lines: only when the first record parses on its own, so a broken pretty-printed
    # document reports its own error and line instead of a cascade of bad "lines".
    records: list[Any] = []
    lines: list[int] = []
    bad: list[tuple[int, str]] = []
    first = True
    lineno = 0
    chunks = data.split(b"\n")
    # the last chunk is a line without its newline when the data does not end in one
    cut = len(chunks) if chunks[-1].strip() else 0
    incomplete = None
    for raw in chunks:
        lineno += 1
        if not raw.strip():
            continue
        try:
            rec = loads(raw)
        except orjson.JSONDecodeError as exc:
            if first:
                raise TraceFormatError(
                    f"invalid JSON: {whole_error.msg}", path, whole_error.lineno
                ) from None
            if lineno == cut:
                incomplete = lineno
                continue
            glued = _glued_records(raw) if exc.msg == "unexpected content after document" else None
            if glued is None:
                bad.append((lineno, f"invalid JSON: {exc.msg}"))
                continue
            # records written one after another with no newline between them (a Codex
            # rollout resumed after its last record lost its newline): each is read, on
            # this line
            records.extend(glued)
            lines.extend([lineno] * len(glued))
            continue
        if first and not isinstance(rec, (dict, list)):
            raise TraceFormatError(
                f"invalid JSON: {whole_error.msg}", path, whole_error.lineno
            ) from None
        first = False
        records.append(rec)
        lines.append(lineno)
    return Parsed(records, lines, bad, incomplete=incomplete)


class Ctx:
    """Per-source state an adapter reports through: where it is and what was skipped."""

    __slots__ = (
        "path",
        "lines",
        "keep_going",
        "stats",
        "skipped",
        "_profile_arg",
        "stem",
        "in_folder",
    )

    def __init__(
        self,
        path: str | None,
        lines: list[int] | None,
        keep_going: bool,
        stats: LoadStats | None,
        profile: Any,
        in_folder: bool = False,
    ) -> None:
        self.path = path
        #: the source was found by the walk of a folder (which reads everything beside it)
        self.in_folder = in_folder
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
        if (
            line is None
            and index is not None
            and self.lines is not None
            and index < len(self.lines)
        ):
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
