"""loopcore: stop LLM agents from burning tokens on loops and repeated work.

Two jobs on one compiled core: :class:`Guard` answers allow / warn / block before every tool
call of a live harness; :func:`analyse_burn` accounts for the tokens a recorded trace wasted.
The public API is re-exported here from the dispatcher modules only.

The re-exports are lazy (PEP 562): ``import loopcore`` loads nothing but the twin switch, and
each name imports its module on first use. A command hook is a fresh process per tool call, so
the guard's path must not pay for numpy (the burn analysis) or the trace adapters.
"""

from __future__ import annotations

import importlib

from ._native_flag import NO_EXTENSIONS, implementation

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (type checkers take the name)

#: public name -> the dispatcher module that defines it (imported on first access).
_LAZY: dict[str, str] = {
    "__version__": "._version",  # the one version source (pyproject.toml reads it too)
    "HASH_FORMAT_VERSION": ".hashing",
    "MAX_DEPTH": ".hashing",
    "canonical_hash": ".hashing",
    "KINDS": ".trace",
    "Step": ".trace",
    "Trace": ".trace",
}

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

# --- guard: import from .guard / .policy only ---
_LAZY.update(dict.fromkeys(("ALLOW", "Decision", "Guard", "LoopBlocked", "guarded"), ".guard"))
_LAZY.update(dict.fromkeys(("DETECTORS", "Policy", "PolicyError"), ".policy"))

__all__ += [
    "ALLOW",
    "DETECTORS",
    "Decision",
    "Guard",
    "LoopBlocked",
    "Policy",
    "PolicyError",
    "guarded",
]
# --- end guard ---

# --- burn analysis: import from .burn / .encoded only ---
_LAZY.update(
    dict.fromkeys(
        (
            "BurnReport",
            "BurnSettings",
            "Finding",
            "RepeatCheck",
            "analyse_burn",
            "analyse_many",
            "would_repeat",
        ),
        ".burn",
    )
)
_LAZY.update(
    dict.fromkeys(("EncodedAnalysis", "EncodedTrace", "analyse_encoded", "encode"), ".encoded")
)

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

# --- adapters / loading ---
_LAZY.update(
    dict.fromkeys(
        ("FORMATS", "LoadStats", "TraceFormatError", "detect_format", "load"), ".adapters"
    )
)
_LAZY.update(dict.fromkeys(("PROFILES", "Profile", "classify", "classify_shell"), ".taxonomy"))

__all__ += [
    "FORMATS",
    "LoadStats",
    "PROFILES",
    "Profile",
    "TraceFormatError",
    "classify",
    "classify_shell",
    "detect_format",
    "load",
]
# --- end adapters ---

if TYPE_CHECKING:  # type checkers and IDEs see plain imports
    from typing import Any

    from ._version import __version__
    from .adapters import FORMATS, LoadStats, TraceFormatError, detect_format, load
    from .burn import BurnReport, Finding, RepeatCheck, analyse_burn, analyse_many, would_repeat
    from .encoded import EncodedAnalysis, EncodedTrace, analyse_encoded, encode
    from .guard import ALLOW, Decision, Guard, LoopBlocked, guarded
    from .hashing import HASH_FORMAT_VERSION, MAX_DEPTH, canonical_hash
    from .policy import DETECTORS, Policy, PolicyError
    from .taxonomy import PROFILES, Profile, classify, classify_shell
    from .trace import KINDS, Step, Trace
del TYPE_CHECKING


def __getattr__(name: str) -> Any:
    """Import a public name's module on first access (PEP 562); AttributeError for others."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'loopcore' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
