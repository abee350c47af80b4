"""Canonical hashing: the one dispatcher that picks the compiled or the pure-Python twin.

See ``loopcore._hashing_py`` for the byte format (the reference) and the full contract.
"""

from __future__ import annotations

from ._native_flag import NO_EXTENSIONS

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the hook path)

if TYPE_CHECKING or NO_EXTENSIONS:
    from ._hashing_py import (
        HASH_FORMAT_VERSION,
        INLINE_MAX,
        MAX_DEPTH,
        MAX_MEMBERS,
        canonical_bytes,
        canonical_hash,
    )
else:
    from ._native_hashing import (
        HASH_FORMAT_VERSION,
        INLINE_MAX,
        MAX_DEPTH,
        MAX_MEMBERS,
        canonical_bytes,
        canonical_hash,
    )

__all__ = [
    "HASH_FORMAT_VERSION",
    "INLINE_MAX",
    "MAX_DEPTH",
    "MAX_MEMBERS",
    "canonical_bytes",
    "canonical_hash",
]
