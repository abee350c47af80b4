"""The integer codes the kernels share, for the pure twins: the mirror of ``src/_native/codes.pxd``.

Same names, same values (tests/test_codes.py reads the .pxd and checks them). Step kinds follow
``loopcore.trace.KINDS``, then come the events the guard keeps in its window; the burn columns,
the guard engine and the shell classifier all use this one layout. Guard state dumps keep the
layout they have always had (:func:`kind_to_stored`), so older snapshots restore unchanged.
"""

from __future__ import annotations

__all__ = [
    "D_BUDGET",
    "D_COMPACTION",
    "D_CONTENT",
    "D_CONTEXT",
    "D_CYCLE",
    "D_ERROR",
    "D_GENERIC",
    "D_GLOBAL",
    "D_MONOLOGUE",
    "D_POLL",
    "D_REDUNDANT",
    "D_REPEAT",
    "D_UNKNOWN",
    "FIND_DEGENERATE",
    "FIND_DUPLICATE",
    "FIND_OSCILLATION",
    "FIND_QUESTION",
    "FIND_REDUNDANT",
    "FIND_REJECTED",
    "G_BARRIER",
    "G_ERROR",
    "G_HAS",
    "G_UNKNOWN",
    "KIND_NAMES",
    "K_ASK",
    "K_COMPACTION",
    "K_CONDENSATION",
    "K_EXEC",
    "K_MUTATE",
    "K_OBSERVE",
    "K_OTHER",
    "K_USER",
    "MAX_DEPTH",
    "N_FINDING_KINDS",
    "N_STEP_KINDS",
    "S_ABSOLUTE",
    "S_AFTER_USER",
    "S_BACKUP",
    "S_ERROR",
    "S_ESTIMATED",
    "S_EXIT_NONZERO",
    "S_HAS_OUTCOME",
    "S_NO_OP",
    "S_REJECTED",
    "S_RESTORE",
    "kind_from_stored",
    "kind_to_stored",
]

# Step kinds, then the guard's window events.
K_OBSERVE = 0
K_MUTATE = 1
K_EXEC = 2
K_ASK = 3
K_OTHER = 4
K_USER = 5
K_COMPACTION = 6
K_CONDENSATION = 7
N_STEP_KINDS = 5
#: The name of each step kind, by code (``loopcore.trace.KINDS`` is this tuple).
KIND_NAMES = ("observe", "mutate", "exec", "ask", "other")

# Burn finding codes (0 = not charged; ``loopcore.encoded.FINDING_KINDS[code - 1]`` names them).
FIND_REDUNDANT = 1
FIND_DUPLICATE = 2
FIND_OSCILLATION = 3
FIND_QUESTION = 4
FIND_REJECTED = 5
FIND_DEGENERATE = 6
N_FINDING_KINDS = 6

# Step flags (the EncodedTrace.flags column).
S_HAS_OUTCOME = 1
S_ERROR = 2
S_ESTIMATED = 4
S_REJECTED = 8
S_ABSOLUTE = 16
S_NO_OP = 32
S_BACKUP = 64
S_RESTORE = 128
S_AFTER_USER = 256
S_EXIT_NONZERO = 512

# Guard window flags.
G_HAS = 1
G_ERROR = 2
G_UNKNOWN = 4
G_BARRIER = 8

# Guard detector codes.
D_UNKNOWN = 1
D_GLOBAL = 2
D_POLL = 3
D_CYCLE = 4
D_REPEAT = 5
D_MONOLOGUE = 6
D_GENERIC = 7
D_ERROR = 8
D_BUDGET = 9
D_REDUNDANT = 10
D_COMPACTION = 11
D_CONTEXT = 12
D_CONTENT = 13

#: How deep the canonical hash (and the guard's walks over a result) follow containers.
MAX_DEPTH = 256


def kind_to_stored(k: int) -> int:
    """The code a guard state dump stores for kind *k* (other=0, observe=1 ... ask=4, events as they are)."""
    if k == K_OTHER:
        return 0
    if k < K_OTHER:
        return k + 1
    return k


def kind_from_stored(s: int) -> int:
    """The inverse of :func:`kind_to_stored`, for every value (a dump round-trips byte for byte)."""
    if s == 0:
        return K_OTHER
    if s <= K_OTHER:
        return s - 1
    return s
