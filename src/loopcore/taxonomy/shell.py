"""The shell classifier: what a bash command observes or mutates.

``classify_shell("sed -n '1,20p' a.py | grep foo")`` -> ``("observe", "a.py")``: the command
is lexed the way a POSIX shell splits it, each simple command is classified from a table of
well-known programs (readers observe, writers mutate, anything that runs unknown code is
exec), and the parts are combined. The rules are documented in full by the pure-Python twin,
``loopcore._shell_py`` (the reference), and in docs/formats.md.

This module is the dispatcher: the work is done by the compiled twin ``loopcore._native_shell``
(src/_native/shell.pyx) or by the pure twin, as ``loopcore._native_flag.NO_EXTENSIONS`` says.
Results are cached per command string here: agents repeat commands a lot.
"""

from __future__ import annotations

from functools import lru_cache

from .._native_flag import NO_EXTENSIONS
from .._shell_py import _SHELLS  # noqa: F401 (plain data: the tables both twins read)

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the hook path)

if TYPE_CHECKING or NO_EXTENSIONS:
    from .._shell_py import classify_shell as _classify_uncached
    from .._shell_py import classify_shell_access as _access_uncached
    from .._shell_py import lex, parse_patch_targets
else:
    from .._native_shell import classify_shell as _classify_uncached
    from .._native_shell import classify_shell_access as _access_uncached
    from .._native_shell import lex, parse_patch_targets

__all__ = ["classify_shell", "classify_shell_access", "lex", "parse_patch_targets"]


@lru_cache(maxsize=65536)
def classify_shell(command: str) -> tuple[str, str | tuple[str, ...] | None]:
    """(kind, target) of a shell command: kind is observe/mutate/exec/other; never raises.

    The target of a ``mutate`` is what it writes (None when a writer's targets cannot be
    read, which the analysis takes as "everything may have changed"); of an ``observe``, what
    it reads; of ``exec`` and ``other``, None.
    """
    return _classify_uncached(command)


@lru_cache(maxsize=65536)
def classify_shell_access(
    command: str,
) -> tuple[str, str | tuple[str, ...] | None, tuple[str, ...] | None, tuple[str, ...] | None, bool]:
    """(kind, target, reads, writes, no_op) of a shell command; never raises.

    ``kind`` and ``target`` are :func:`classify_shell`'s; ``reads`` / ``writes`` are the targets
    it reads and writes (None: anything / everything), ``no_op`` says it provably changes
    nothing (``sed -i 's/x/x/' f``). ``git diff -- a.py > p.txt`` reads ``("a.py",)`` and writes
    ``("p.txt",)``; ``git checkout -- a.py`` writes ``("a.py",)`` only; ``git checkout main``,
    ``git stash`` and ``git reset --hard`` write everything.
    """
    return _access_uncached(command)
