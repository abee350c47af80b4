"""Guard snapshots: the byte format of ``Guard.snapshot`` and ``Guard.restore``.

A snapshot is ``MAGIC``, a header (format version, payload length, xxh3-64 of the version and the
payload) and a JSON payload: the policy, the interned tool names, the counters, and per session
its ids, idle age, event buckets and the engine's flat int dump (the same layout in both twins,
so a snapshot restores on either). Format 3 checksums the version too and tags the ids JSON
cannot hold (ints past 64 bits, strings with lone surrogates); formats 1 and 2 still restore.
"""

from __future__ import annotations

import json
import struct

from xxhash import xxh3_64_intdigest

from .policy import Policy

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from typing import Any

__all__ = ["dump", "load"]

#: The payload's JSON codec: orjson (several times faster on a guard of thousands of sessions),
#: imported on first use; a process that pays for every import (the command hooks, one small
#: session per process) sets this False for the stdlib's json. Each reads the other's output.
FAST_JSON = True


def _dumps(doc: Any) -> bytes:
    if FAST_JSON:
        import orjson

        return orjson.dumps(doc)
    return json.dumps(doc, separators=(",", ":")).encode()


def _loads(payload: bytes) -> Any:
    if FAST_JSON:
        import orjson

        return orjson.loads(payload)
    return json.loads(payload)


_SNAP_MAGIC = b"LOOPCORE-GUARD\x00\x01"
# 2: event buckets as [code, tool id, pattern hash, bucket] rows; 3: the checksum covers the
# version too, and ids JSON cannot hold (ints past 64 bits, lone surrogates) are tagged objects
_SNAP_VERSION = 3
_SNAP_HEADER = struct.Struct("<IQQ")  # version, payload length, xxh3-64 of (version +) payload


def _snap_digest(version: int, payload: bytes) -> int:
    if version >= 3:
        return xxh3_64_intdigest(struct.pack("<I", version) + payload)
    return xxh3_64_intdigest(payload)


def _enc_id(v: Any) -> Any:
    # JSON holds str (valid UTF-8) and 64-bit ints; anything else the guard accepted is tagged
    if isinstance(v, str):
        try:
            v.encode("utf-8")
            return v
        except UnicodeEncodeError:
            return {"u": v.encode("utf-8", "surrogatepass").hex()}
    if isinstance(v, int) and not -(1 << 63) <= v < (1 << 64):
        return {"i": str(v)}
    return v


def _dec_id(v: Any) -> Any:
    if isinstance(v, dict):
        if set(v) == {"u"} and isinstance(v["u"], str):
            return bytes.fromhex(v["u"]).decode("utf-8", "surrogatepass")
        if set(v) == {"i"} and isinstance(v["i"], str):
            return int(v["i"])
        raise ValueError(f"unknown id encoding {v!r}")
    if v is not None and (not isinstance(v, (str, int)) or isinstance(v, bool)):
        raise ValueError(f"an id must be a str, an int or null; got {v!r}")
    return v


def dump(guard: Any) -> bytes:
    """The snapshot bytes of *guard* (see Guard.snapshot)."""
    with guard._event_lock:
        now = guard._table.now()
        sessions = []
        for (session, run_id), st in guard._table.items():
            for ident in (session, run_id):
                if ident is not None and (
                    not isinstance(ident, (str, int)) or isinstance(ident, bool)
                ):
                    raise TypeError(
                        f"snapshot: session and run ids must be str or int; got {ident!r}"
                    )
            buckets = [[*dk, b] for dk, b in (st.extra or {}).items()]
            sessions.append(
                [
                    _enc_id(session),
                    _enc_id(run_id),
                    max(0.0, now - st.touched),
                    buckets,
                    guard._engine.dump(st),
                ]
            )
        payload = _dumps(
            {
                "format": "loopcore.guard",
                "policy": guard.policy.to_dict(),
                "names": [[tid, _enc_id(name)] for tid, name in guard._names.items()],
                "counts": guard._table.counters(),
                "sessions": sessions,
            }
        )
    return (
        _SNAP_MAGIC
        + _SNAP_HEADER.pack(_SNAP_VERSION, len(payload), _snap_digest(_SNAP_VERSION, payload))
        + payload
    )


def load(cls: Any, data: Any, policy: Policy | None, kwargs: dict) -> Any:
    """A *cls* (Guard) rebuilt from snapshot bytes (see Guard.restore)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"Guard.restore needs bytes, got {type(data).__name__}")
    data = bytes(data)
    if not data.startswith(_SNAP_MAGIC):
        if 0 < len(data) < len(_SNAP_MAGIC) and _SNAP_MAGIC.startswith(data):
            raise ValueError("guard snapshot is truncated (the header is incomplete)")
        raise ValueError("not a loopcore guard snapshot (bad magic bytes)")
    head = data[len(_SNAP_MAGIC) : len(_SNAP_MAGIC) + _SNAP_HEADER.size]
    if len(head) < _SNAP_HEADER.size:
        raise ValueError("guard snapshot is truncated (the header is incomplete)")
    version, length, digest = _SNAP_HEADER.unpack(head)
    if version not in (1, 2, _SNAP_VERSION):
        raise ValueError(
            f"guard snapshot version {version} is not supported (expected {_SNAP_VERSION})"
        )
    payload = data[len(_SNAP_MAGIC) + _SNAP_HEADER.size :]
    if len(payload) != length:
        raise ValueError(
            f"guard snapshot is truncated or padded: {len(payload)} payload bytes, expected {length}"
        )
    if _snap_digest(version, payload) != digest:
        raise ValueError("guard snapshot is corrupted (checksum mismatch)")
    try:
        doc = _loads(payload)
        if not isinstance(doc, dict) or doc.get("format") != "loopcore.guard":
            raise ValueError("payload is not a loopcore guard state")
        if policy is None:
            if not isinstance(doc["policy"], dict):
                raise ValueError("the snapshot's policy is not an object")
            policy = Policy.from_dict(doc["policy"])
        guard = cls(policy, **kwargs)
        now = guard._table.now()
        for tid, name in doc["names"]:
            name = _dec_id(name)
            if not isinstance(name, str) or not isinstance(tid, int):
                raise ValueError(f"a tool name entry must be [int, str]; got {[tid, name]!r}")
            guard._names[tid] = name
        counts = doc.get("counts", {})
        if not isinstance(counts, dict):
            raise ValueError("the snapshot's counts are not an object")
        guard._table.set_counters(counts)
        for session, run_id, age, buckets, flat in doc["sessions"]:
            st = guard._engine.load(flat)
            st.touched = now - float(age)
            # Version 1 keyed its event buckets by rendered strings; dropping them only means
            # a warning already reported may be reported once more.
            if version > 1 and buckets:
                st.extra = {(int(c), int(t), int(x)): int(b) for c, t, x, b in buckets}
            guard._table.put(_dec_id(session), _dec_id(run_id), st)
    except (
        KeyError,
        TypeError,
        AttributeError,
        IndexError,
        OverflowError,
        json.JSONDecodeError,  # orjson.JSONDecodeError is one
        UnicodeDecodeError,
    ) as exc:
        raise ValueError(f"guard snapshot is malformed: {exc!r}") from None
    return guard
