"""The shell classifier: what a bash command observes or mutates.

``classify_shell("sed -n '1,20p' a.py | grep foo")`` -> ``("observe", "a.py")``. The command is
lexed the way a POSIX shell splits it (quotes, escapes, ``|``/``&&``/``||``/``;``/newlines,
subshells, redirections, heredocs, ``$(...)``), each simple command is classified from a table
of well-known programs, and the parts are combined:

* any part that runs code the classifier cannot read (``python``, ``pytest``, ``make``, any
  unknown program) makes the whole command ``exec``: its side effects are unknown;
* otherwise any part that writes (``sed -i``, ``tee``, ``>``/``>>``, ``mv``, ``cp``, ``rm``,
  ``touch``, ``patch``, ``git apply|checkout|stash``...) makes it ``mutate``, with the written
  paths as targets, or None when a writer's targets cannot be read (``git stash``);
* otherwise any reader (``cat``, ``head``, ``tail``, ``nl``, ``sed -n``, ``grep``, ``rg``,
  ``ls``, ``find``, ``git diff|log|status``...) makes it ``observe`` with the paths it reads;
* a command of only neutral parts (``cd``, ``echo``, ``export``) is ``other``.

``cd DIR`` earlier in the same command prefixes later relative targets, so ``cd /repo && cat a``
observes ``/repo/a``. Results are cached per command string: agents repeat commands a lot.

This module is the dispatcher: the work is done by the compiled twin ``loopcore._native_shell``
(src/_native/shell.pyx) or by the pure-Python twin ``loopcore._shell_py`` (the reference, which
documents the rules in full), as ``loopcore._native_flag`` decides.
"""
from __future__ import annotations

from functools import lru_cache

from .._native_flag import load
from .._shell_py import _SHELLS  # plain data, shared by both twins

__all__ = ["classify_shell", "parse_patch_targets"]

_twin = load("shell")
_classify_uncached = _twin.classify_shell
parse_patch_targets = _twin.parse_patch_targets


@lru_cache(maxsize=65536)
def classify_shell(command: str) -> "tuple[str, str | tuple[str, ...] | None]":
    """(kind, target) of a shell command: kind is observe/mutate/exec/other; never raises.

    The target of a ``mutate`` is what it writes (None when a writer's targets cannot be
    read, which the analysis takes as "everything may have changed"); of an ``observe``, what
    it reads; of ``exec`` and ``other``, None.
    """
    return _classify_uncached(command)
