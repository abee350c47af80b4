"""The one place that decides between the compiled core and the pure-Python twins.

``LOOPCORE_NO_EXTENSIONS`` is read with the same truthiness rule as ``setup.py`` uses at
build time: unset, empty, ``0``, ``false``, ``no`` and ``off`` (any case) are false, anything
else is true. Off CPython the pure twins are always used, and so are they in an install built
with ``LOOPCORE_NO_EXTENSIONS=1`` (setup.py records that in ``loopcore/_build_flags.py``), with
or without the variable at run time.

When the flag is false the compiled modules must import: a missing or broken build is an
``ImportError`` that says so, never a silent fallback.
"""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType

__all__ = ["NO_EXTENSIONS", "env_flag", "implementation", "load_twin", "pure_build"]

_FALSY = frozenset({"", "0", "false", "no", "off"})


def env_flag(name: str) -> bool:
    """True when environment variable *name* is set to a truthy value (see module doc)."""
    return os.environ.get(name, "").strip().lower() not in _FALSY


def pure_build() -> bool:
    """True when this install was built pure (setup.py's ``_build_flags.py`` marker says so).

    The marker is read as text, not imported: ``import loopcore`` stays one module deep."""
    marker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_build_flags.py")
    try:
        with open(marker, encoding="utf-8") as f:
            text = f.read()
    except OSError:  # a source checkout or an in-place build: no marker
        return False
    return "PURE_BUILD = True" in text


NO_EXTENSIONS: bool = (
    env_flag("LOOPCORE_NO_EXTENSIONS") or pure_build() or sys.implementation.name != "cpython"
)


def implementation() -> str:
    """``"c"`` when the compiled core is live, ``"py"`` when the pure-Python twins are."""
    return "py" if NO_EXTENSIONS else "c"


def load_twin(component: str, impl: str | None = None) -> ModuleType:
    """Import the twin module of *component* (``"hashing"``, ``"guard"``, ``"burn"``,
    ``"shell"``, ``"textloop"``) for *impl* (``"c"``, ``"py"``; default: the live one).

    The dispatchers (``hashing``, ``textloop``, ``taxonomy.shell``, ``encoded`` for the burn
    kernel) pick their twin with a static branch on :data:`NO_EXTENSIONS`; the guard picks its
    engine here, and the tests reach either twin through this function (the ``impl`` fixture).
    Other modules import the dispatchers, never a twin (the pure twins' own shared tables
    excepted). Raises ImportError with a remedy when the compiled module is missing, ValueError
    for an unknown *impl*.
    """
    impl = impl or implementation()
    if impl == "py":
        return importlib.import_module(f"loopcore._{component}_py")
    if impl != "c":
        raise ValueError(f"unknown implementation {impl!r}; expected 'c' or 'py'")
    try:
        return importlib.import_module(f"loopcore._native_{component}")
    except ImportError as exc:
        raise ImportError(
            f"loopcore's compiled core (loopcore._native_{component}) is not importable: {exc}. "
            "Reinstall with a C compiler available (pip install .), or select the pure-Python "
            "twins explicitly with LOOPCORE_NO_EXTENSIONS=1."
        ) from exc
