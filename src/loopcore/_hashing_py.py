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
``str`` Enum...) encode as their base type, read from the base type's storage: a subclass's
Python-level overrides (``items``, ``__iter__``, ``__len__``, ``encode``, ``__str__``,
``__int__``, ``__index__``, ``__float__``, ``__bytes__``...) are never called, so they can
neither change the hash nor run code in the middle of it. ``strip`` drops pairs whose key is in
the set, at every depth, before counting. Any other type raises TypeError naming the path,
unless ``default`` converts it (the converted value is one level deeper).

Hostile input (both twins behave the same; the compiled core relies on it for memory safety):

- each dict and set is snapshotted (its pairs/members, in iteration order) when it is entered,
  before any Python code can run (a ``strip`` membership test may call a key's ``__hash__`` or
  a member's ``__eq__``; ``default`` is arbitrary code); the snapshot is what gets hashed, so
  mutating the container mid-hash changes nothing and never crashes. Lists are read live, each
  item bounds-checked (a callback that shrinks a list ends its walk early).
- the pairs of a dict whose kept keys are all ``str`` are encoded in encoded-key order, other
  dicts in iteration order; so the first failing value, which the error names, is the same in
  both twins.
- a container nested ``MAX_DEPTH`` containers deep raises ValueError naming the path. Depth
  counts across re-entrant calls: a ``default`` converter that calls ``canonical_hash`` again
  (on the same thread) continues the depth of the call it runs in, plus two, and so does one
  made from a ``strip`` membership test (a key's ``__hash__``, a member's ``__eq__``); one made
  from an error path's ``repr`` starts at ``MAX_DEPTH``. So Python code recursing through
  ``canonical_hash`` without end raises this ValueError, never RecursionError or a C stack
  overflow.
- one call may walk at most ``MAX_MEMBERS`` container members (list/tuple items, dict pairs
  before stripping, set members, counted as each container is entered, shared references
  counted each time they are reached); past that it raises ValueError naming the container.
  Forty lists that each hold the previous one twice (``x = [x, x]``) are 2**40 members: an
  error in well under a second instead of time and memory exponential in the depth.
- error paths name set members and non-str dict keys by a bounded ``repr`` (at most
  ``_REPR_MAX`` characters, a placeholder when ``repr`` itself fails), so building the message
  never recurses or raises.
"""

from __future__ import annotations

import json
import math
import reprlib
import struct
import threading
from collections.abc import Callable, Collection, Iterable
from typing import Any

from xxhash import xxh3_64_intdigest

from . import _codes

__all__ = [
    "HASH_FORMAT_VERSION",
    "MAX_DEPTH",
    "MAX_MEMBERS",
    "INLINE_MAX",
    "canonical_hash",
    "canonical_bytes",
]

HASH_FORMAT_VERSION = 1
MAX_DEPTH = _codes.MAX_DEPTH
MAX_MEMBERS = 1 << 20  # container members one call may walk (see the module doc)
_REPR_MAX = 80
INLINE_MAX = 128  # str/bytes longer than this are represented by their own XXH3-64 digest

_I64_MIN = -(1 << 63)
_I64_MAX = (1 << 63) - 1
_NAN_BITS = b"\x00\x00\x00\x00\x00\x00\xf8\x7f"
_pack_q = struct.Struct("<q").pack
_pack_Q = struct.Struct("<Q").pack
_pack_I = struct.Struct("<I").pack
_pack_d = struct.Struct("<d").pack
_ALL = slice(None)


class _HashPathError(Exception):
    """Internal: carries a TypeError/ValueError outward while the path is collected."""

    def __init__(self, exc_type: type, message: str) -> None:
        self.exc_type = exc_type
        self.message = message
        self.segments: list[str] = []


class _Repr(reprlib.Repr):
    def repr_instance(self, x, level):  # let a failing __repr__ raise: _safe_repr names the type
        return repr(x)


_repr = _Repr()
_repr.maxlevel = 3
_repr.maxstring = _repr.maxother = _REPR_MAX


def _safe_repr(obj: Any) -> str:
    """A bounded repr for error paths: never recurses deeply, never raises."""
    saved = getattr(_tls, "base", 0)
    _tls.base = MAX_DEPTH  # a __repr__ that hashes again: scalars hash, containers raise at once
    try:
        text = _repr.repr(obj)
    except Exception:  # a failing or recursing __repr__ must not replace the real error
        return f"<{type(obj).__name__}>"
    finally:
        _tls.base = saved
    if len(text) > _REPR_MAX:
        text = text[: _REPR_MAX - 3] + "..."
    return text


def _seg_key(key: Any) -> str:
    if isinstance(key, str):
        return "[" + json.dumps(str.__str__(key), ensure_ascii=False) + "]"
    return f"[{_safe_repr(key)}]"


_tls = threading.local()  # .base: the depth a re-entrant call (from default=) starts at


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
    _enc_blob(out, b"s", b"S", str.encode(k, "utf-8", "surrogatepass"))
    return bytes(out)


def _pair_key_bytes(kv: tuple) -> bytes:
    return _str_key_bytes(kv[0])


class _Encoder:
    __slots__ = ("strip", "default", "path", "members")

    def __init__(self, strip: frozenset | None, default: Callable[[Any], Any] | None) -> None:
        self.strip = strip
        self.default = default
        self.path: list[int] = []  # ids of the containers being encoded (cycle detection)
        self.members = 0

    def enc(self, out: bytearray, v: Any, depth: int) -> None:
        if v is None:
            out += b"n"
        elif v is True:
            out += b"t"
        elif v is False:
            out += b"f"
        elif isinstance(v, int):
            _enc_int(out, int.__int__(v))  # base storage: an __int__/__index__ override never runs
        elif isinstance(v, float):
            x = float.__float__(v)
            if x != x:
                out += b"d"
                out += _NAN_BITS
            elif math.isinf(x) or not x.is_integer():
                out += b"d"
                out += _pack_d(x)
            else:
                _enc_int(out, int(x))
        elif isinstance(v, str):
            _enc_blob(out, b"s", b"S", str.encode(v, "utf-8", "surrogatepass"))
        elif isinstance(v, bytes):
            _enc_blob(out, b"b", b"B", bytes.__getitem__(v, _ALL))
        elif isinstance(v, bytearray):
            _enc_blob(out, b"b", b"B", bytes(bytearray.__getitem__(v, _ALL)))
        elif isinstance(v, (list, tuple, dict, set, frozenset)):
            self.enc_container(out, v, depth)
        elif self.default is not None:
            if depth + 1 >= MAX_DEPTH:  # checked before the call: a recursing converter stops here
                raise _HashPathError(
                    ValueError,
                    f"nesting deeper than {MAX_DEPTH} levels (default= conversions count)",
                )
            saved = getattr(_tls, "base", 0)
            _tls.base = depth + 2  # a re-entrant canonical_hash continues this depth
            try:
                converted = self.default(v)
            finally:
                _tls.base = saved
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
        if isinstance(v, list):
            n = list.__len__(v)
            walk: Iterable[Any] = list.__iter__(v)
        elif isinstance(v, tuple):
            n = tuple.__len__(v)
            walk = tuple.__iter__(v)
        elif isinstance(v, dict):
            walk = list(dict.items(v))  # the snapshot (see the module doc)
            n = len(walk)
        elif isinstance(v, set):
            walk = list(set.__iter__(v))
            n = len(walk)
        else:
            walk = list(frozenset.__iter__(v))
            n = len(walk)
        self.members += n
        if self.members > MAX_MEMBERS:
            raise _HashPathError(
                ValueError, f"more than {MAX_MEMBERS} container members in one value"
            )
        self.path.append(ident)
        child = depth + 1
        if isinstance(v, (list, tuple)):
            out += b"l"
            out += _pack_I(n)
            i = 0
            for item in walk:
                try:
                    self.enc(out, item, child)
                except _HashPathError as err:
                    err.segments.append(f"[{i}]")
                    raise
                i += 1
        elif isinstance(v, dict):
            strip = self.strip
            if strip is None:
                items: Any = walk
            else:
                saved = getattr(_tls, "base", 0)
                _tls.base = depth + 2  # a key's __hash__ / a member's __eq__ that hashes again
                try:
                    items = [kv for kv in walk if kv[0] not in strip]
                finally:
                    _tls.base = saved
            if all(isinstance(k, str) for k, _ in items):
                # str-keyed dicts are encoded in encoded-key order (stable), so that the first
                # failing value, and so the error message, is the same in both twins.
                items.sort(key=_pair_key_bytes)
            pairs = []
            for k, val in items:
                pair = bytearray()
                try:
                    self.enc(pair, k, child)
                except _HashPathError as err:
                    if not err.segments:  # the key itself failed, not something inside it
                        err.message = "unsupported dict key: " + err.message
                    err.segments.append(f"[{_safe_repr(k)}]")
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
            for item in walk:
                one = bytearray()
                try:
                    self.enc(one, item, child)
                except _HashPathError as err:
                    err.segments.append("{" + _safe_repr(item) + "}")
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
        _Encoder(_strip_set(strip), default).enc(out, value, getattr(_tls, "base", 0))
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
