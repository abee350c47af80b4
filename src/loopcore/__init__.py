"""loopcore: stop LLM agents from burning tokens on loops and repeated work.

Two jobs on one compiled core: :class:`Guard` answers allow / warn / block before every tool
call of a live harness; :func:`analyse_burn` accounts for the tokens a recorded trace wasted.
The public API is re-exported here from the dispatcher modules only.
"""
from __future__ import annotations

from ._native_flag import NO_EXTENSIONS, implementation
from .hashing import HASH_FORMAT_VERSION, MAX_DEPTH, canonical_hash

from .trace import KINDS, Step, Trace

__version__ = "0.1.0"

__all__ = [
    "HASH_FORMAT_VERSION",
    "KINDS",
    "MAX_DEPTH",
    "NO_EXTENSIONS",
    "Step",
    "Trace",
    "__version__",
    "canonical_hash",
    "implementation",
]

# --- guard (issue 3): owned by the guard work; import from .guard / .policy only ---
from .guard import ALLOW, Decision, Guard, LoopBlocked, guarded
from .policy import DETECTORS, Policy, PolicyError

__all__ += ["ALLOW", "DETECTORS", "Decision", "Guard", "LoopBlocked", "Policy", "PolicyError", "guarded"]
# --- end guard ---

# --- burn analysis (issue 4): owned by the burn work; import from .burn / .encoded only ---
from .burn import (
    BurnReport,
    BurnSettings,
    Finding,
    RepeatCheck,
    analyse_burn,
    analyse_many,
    would_repeat,
)
from .encoded import EncodedAnalysis, EncodedTrace, analyse_encoded, encode

__all__ += [
    "BurnReport",
    "BurnSettings",
    "EncodedAnalysis",
    "EncodedTrace",
    "Finding",
    "RepeatCheck",
    "analyse_burn",
    "analyse_encoded",
    "analyse_many",
    "encode",
    "would_repeat",
]
# --- end burn ---

# --- adapters / loading (issue 5): owned by the adapters work ---
from .adapters import FORMATS, LoadStats, TraceFormatError, detect_format, load
from .taxonomy import PROFILES, Profile, classify, classify_shell

__all__ += ["FORMATS", "LoadStats", "PROFILES", "Profile", "TraceFormatError", "classify", "classify_shell",
            "detect_format", "load"]
# --- end adapters ---
