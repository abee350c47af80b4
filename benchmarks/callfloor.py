"""A do-nothing check/record pair with the signatures of ``Guard.check``/``Guard.record``.

bench_guard.py times the same harness loop with it as its baseline: what a harness pays to call
any such pair of functions, so the benchmark can tell that apart from the guard's own work.
It is plain Python (the engine twins hold no benchmark code), so its figure also includes the
cost of entering a Python frame, which the compiled guard's fast path does not pay.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CallFloor"]


class CallFloor:
    """``check`` returns *allow*, ``record`` returns None; neither does anything else."""

    __slots__ = ("allow",)

    def __init__(self, allow: Any) -> None:
        self.allow = allow

    def check(
        self, session, tool, args=None, *, run_id=None, kind=None, target=None, call_id=None
    ) -> Any:
        """Returns *allow* and does nothing else."""
        return self.allow

    def record(
        self,
        session,
        tool,
        args=None,
        result=None,
        *,
        error=None,
        run_id=None,
        call_id=None,
        tokens=None,
        kind=None,
        target=None,
    ) -> None:
        """Does nothing."""
        return None
