"""Pure-Python twin of the canonical hash: the reference the compiled core must match.

Byte format, version 1 (``HASH_FORMAT_VERSION``). ``canonical_hash(v)`` is XXH3-64 (seed 0)
of ``enc(v)``; all integers are little-endian, ``u32``/``u64`` unsigned:

=====================  ==========================================================================
value                  encoding
=====================  ==========================================================================
None                   ``n``
True / False           ``t`` / ``f`` (a bool is never a number: ``True`` != ``1``)
int, int64 range       ``i`` + 8-byte signed
int, beyond int64      ``I`` + ``+``/``-`` + u32 length + magnitude bytes (minimal, little-endian)
float                  integral finite floats encode as the int of the same value (``1.0`` is
                       ``1``, ``-0.0`` is ``0``, ``1e300`` is ``int(1e300)``); others ``d`` + the
                       8-byte IEEE-754 double, every NaN as ``0x7ff8000000000000``
str                    UTF-8 with lone surrogates passed through; ``s`` + u32 length + bytes when
                       at most 128 bytes, else ``S`` + u64 length + u64 XXH3-64 of the bytes
bytes, bytearray       as str with tags ``b`` / ``B``
list, tuple            ``l`` + u32 count + each item
dict                   ``m`` + u32 count + the kept pairs ``enc(key) + enc(value)``, sorted bytewise
                       (so key order never matters; the encoding is prefix-free, so for distinct
                       str keys this is the order of their encoded keys)
set, frozenset         ``e`` + u32 count + the items' encodings, sorted bytewise
a cycle                ``c``: a container met again while it is itself being encoded
=====================  ==========================================================================

Subclasses of dict/list/tuple/str/bytes/int/float/set (OrderedDict, IntEnum, namedtuple, a
``str`` Enum...) encode as their base type. ``strip`` drops pairs whose key is in the set, at
every depth, before counting. Any other type raises TypeError naming the path, unless
``default`` converts it (the converted value is one level deeper). A container nested
``MAX_DEPTH`` containers deep raises ValueError naming the path.
"""
from __future__ import annotations

import json
import math
import struct
from typing import Any, Callable, Collection, Iterable

from xxhash import xxh3_64_intdigest

__all__ = ["HASH_FORMAT_VERSION", "MAX_DEPTH", "INLINE_MAX", "canonical_hash", "canonical_bytes"]

HASH_FORMAT_VERSION = 1
MAX_DEPTH = 256
INLINE_MAX = 128  # str/bytes longer than this are represented by their own XXH3-64 digest

_I64_MIN = -(1 << 63)
_I64_MAX = (1 << 63) - 1
_NAN_BITS = b"\x00\x00\x00\x00\x00\x00\xf8\x7f"
_pack_q = struct.Struct("<q").pack
_pack_Q = struct.Struct("<Q").pack
_pack_I = struct.Struct("<I").pack
_pack_d = struct.Struct("<d").pack


class _HashPathError(Exception):
    """Internal: carries a TypeError/ValueError outward while the path is collected."""

    def __init__(self, exc_type: type, message: str) -> None:
        self.exc_type = exc_type
        self.message = message
        self.segments: list[str] = []


def _seg_key(key: Any) -> str:
    if isinstance(key, str):
        return "[" + json.dumps(str(key), ensure_ascii=False) + "]"
    return f"[{key!r}]"


def _enc_int(out: bytearray, v: int) -> None:
    if _I64_MIN <= v <= _I64_MAX:
        out += b"i"
        out += _pack_q(v)
    else:
        mag = -v if v < 0 else v
        m = mag.to_bytes((mag.bit_length() + 7) // 8, "little")
        out += b"I-" if v < 0 else b"I+"
        out += _pack_I(len(m))
        out += m


def _enc_blob(out: bytearray, small: bytes, big: bytes, data: bytes) -> None:
    n = len(data)
    if n <= INLINE_MAX:
        out += small
        out += _pack_I(n)
        out += data
    else:
        out += big
        out += _pack_Q(n)
        out += _pack_Q(xxh3_64_intdigest(data))


def _str_key_bytes(k: str) -> bytes:
    out = bytearray()
    _enc_blob(out, b"s", b"S", k.encode("utf-8", "surrogatepass"))
    return bytes(out)


class _Encoder:
    __slots__ = ("strip", "default", "path")

    def __init__(self, strip: frozenset | None, default: Callable[[Any], Any] | None) -> None:
        self.strip = strip
        self.default = default
        self.path: list[int] = []  # ids of the containers being encoded (cycle detection)

    def enc(self, out: bytearray, v: Any, depth: int) -> None:
        if v is None:
            out += b"n"
        elif v is True:
            out += b"t"
        elif v is False:
            out += b"f"
        elif isinstance(v, int):
            _enc_int(out, int(v))
        elif isinstance(v, float):
            x = float(v)
            if x != x:
                out += b"d"
                out += _NAN_BITS
            elif math.isinf(x) or not x.is_integer():
                out += b"d"
                out += _pack_d(x)
            else:
                _enc_int(out, int(x))
        elif isinstance(v, str):
            _enc_blob(out, b"s", b"S", v.encode("utf-8", "surrogatepass"))
        elif isinstance(v, (bytes, bytearray)):
            _enc_blob(out, b"b", b"B", bytes(v))
        elif isinstance(v, (list, tuple, dict, set, frozenset)):
            self.enc_container(out, v, depth)
        elif self.default is not None:
            converted = self.default(v)
            if depth + 1 >= MAX_DEPTH:
                raise _HashPathError(
                    ValueError, f"nesting deeper than {MAX_DEPTH} levels (default= conversions count)"
                )
            self.enc(out, converted, depth + 1)
        else:
            raise _HashPathError(TypeError, f"unsupported type {type(v).__name__!r}")

    def enc_container(self, out: bytearray, v: Any, depth: int) -> None:
        ident = id(v)
        if ident in self.path:
            out += b"c"
            return
        if depth >= MAX_DEPTH:
            raise _HashPathError(ValueError, f"nesting deeper than {MAX_DEPTH} levels")
        self.path.append(ident)
        child = depth + 1
        if isinstance(v, (list, tuple)):
            out += b"l"
            out += _pack_I(len(v))
            i = 0
            for item in v:
                try:
                    self.enc(out, item, child)
                except _HashPathError as err:
                    err.segments.append(f"[{i}]")
                    raise
                i += 1
        elif isinstance(v, dict):
            strip = self.strip
            items = [(k, val) for k, val in v.items() if strip is None or k not in strip]
            if all(isinstance(k, str) for k, _ in items):
                # The compiled core encodes str-keyed dicts in key order; do the same so that
                # the first failing value (and so the error message) is the same in both.
                items.sort(key=lambda kv: _str_key_bytes(kv[0]))
            pairs = []
            for k, val in items:
                pair = bytearray()
                try:
                    self.enc(pair, k, child)
                except _HashPathError as err:
                    err.message = "unsupported dict key: " + err.message
                    err.segments.append(f"[{k!r}]")
                    raise
                try:
                    self.enc(pair, val, child)
                except _HashPathError as err:
                    err.segments.append(_seg_key(k))
                    raise
                pairs.append(bytes(pair))
            pairs.sort()
            out += b"m"
            out += _pack_I(len(pairs))
            out += b"".join(pairs)
        else:  # set / frozenset
            members = []
            for item in v:
                one = bytearray()
                try:
                    self.enc(one, item, child)
                except _HashPathError as err:
                    err.segments.append("{" + repr(item) + "}")
                    raise
                members.append(bytes(one))
            members.sort()
            out += b"e"
            out += _pack_I(len(members))
            out += b"".join(members)
        self.path.pop()


def _strip_set(strip: Iterable[Any] | None) -> frozenset | None:
    if strip is None:
        return None
    if isinstance(strip, (str, bytes)):
        raise TypeError("strip must be a collection of keys, not a single string")
    return strip if isinstance(strip, frozenset) else frozenset(strip)


def canonical_bytes(
    value: Any,
    *,
    strip: Collection[Any] | None = None,
    default: Callable[[Any], Any] | None = None,
) -> bytes:
    """The canonical byte encoding (format ``HASH_FORMAT_VERSION``) that canonical_hash digests.

    Raises TypeError for unsupported types and ValueError for nesting deeper than MAX_DEPTH,
    both naming the path (``value["opts"][2]``).
    """
    out = bytearray()
    try:
        _Encoder(_strip_set(strip), default).enc(out, value, 0)
    except _HashPathError as err:
        path = "value" + "".join(reversed(err.segments))
        raise err.exc_type(f"canonical_hash: {err.message} at {path}") from None
    return bytes(out)


def canonical_hash(
    value: Any,
    *,
    strip: Collection[Any] | None = None,
    default: Callable[[Any], Any] | None = None,
) -> int:
    """Unsigned 64-bit XXH3 hash of *value*'s JSON meaning (see the module doc for the format).

    Key order, 1 vs 1.0, -0.0 vs 0.0, NaN payloads and tuple vs list never change it; ``strip``
    drops dict keys at every depth. Raises TypeError (unsupported type, unless ``default``
    converts it) or ValueError (nesting deeper than MAX_DEPTH), naming the path.
    """
    return xxh3_64_intdigest(canonical_bytes(value, strip=strip, default=default))
