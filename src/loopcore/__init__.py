"""loopcore: stop LLM agents from burning tokens on loops and repeated work.

Two jobs on one compiled core: :class:`Guard` answers allow / warn / block before every tool
call of a live harness; :func:`analyse_burn` accounts for the tokens a recorded trace wasted;
:func:`load` reads the recorded traces. docs/api.md lists the public names; everything else
(the columnar layer, hashing, the registries of kinds, formats, profiles and detectors) lives in
submodules.

The names are imported lazily (PEP 562): ``import loopcore`` loads nothing but the twin switch,
and each name imports its module on first use. A command hook is a fresh process per tool call,
so the guard's path must not pay for numpy (the burn analysis) or the trace adapters.
"""

from __future__ import annotations

import importlib

from ._native_flag import implementation

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (type checkers take the name)

#: public name -> the module that defines it (imported on first access).
_LAZY: dict[str, str] = {
    "__version__": "._version",
    "ALLOW": ".decision",
    "Decision": ".decision",
    "LoopBlocked": ".decision",
    "Guard": ".guard",
    "Policy": ".policy",
    "PolicyError": ".policy",
    "BurnReport": ".burn",
    "BurnSettings": ".burn",
    "Finding": ".burn",
    "RepeatCheck": ".burn",
    "analyse_burn": ".burn",
    "analyse_many": ".burn",
    "would_repeat": ".burn",
    "LoadStats": ".adapters",
    "TraceFormatError": ".adapters",
    "detect_format": ".adapters",
    "load": ".adapters",
    "Step": ".trace",
    "Trace": ".trace",
}

__all__ = [
    "ALLOW",
    "BurnReport",
    "BurnSettings",
    "Decision",
    "Finding",
    "Guard",
    "LoadStats",
    "LoopBlocked",
    "Policy",
    "PolicyError",
    "RepeatCheck",
    "Step",
    "Trace",
    "TraceFormatError",
    "__version__",
    "analyse_burn",
    "analyse_many",
    "detect_format",
    "implementation",
    "load",
    "would_repeat",
]

if TYPE_CHECKING:  # type checkers and IDEs see plain imports
    from typing import Any

    from ._version import __version__
    from .adapters import LoadStats, TraceFormatError, detect_format, load
    from .burn import (
        BurnReport,
        BurnSettings,
        Finding,
        RepeatCheck,
        analyse_burn,
        analyse_many,
        would_repeat,
    )
    from .decision import ALLOW, Decision, LoopBlocked
    from .guard import Guard
    from .policy import Policy, PolicyError
    from .trace import Step, Trace
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
