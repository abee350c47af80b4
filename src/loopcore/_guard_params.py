"""The guard engine's parameters by name: the Python mirror of ``src/_native/guard_params.pxd``.

``Guard`` maps its Policy to these named ints once (``engine_params``); both engine twins take
them by name (the compiled one into a ``Params`` C struct, the pure one into ``Params``). A
threshold of 0 is off; the flags are 0 or 1. Adding a parameter is one line here, one field in
the .pxd (same place in the order) and its use in each twin: tests/test_guard_params.py checks
that the two lists match.
"""

from __future__ import annotations

from collections.abc import Mapping

from .policy import Policy

__all__ = ["PARAM_NAMES", "Params", "engine_params"]

#: the parameters, in the order of the C struct's fields
PARAM_NAMES = (
    "window",
    "generic_warn",
    "generic_block",
    "poll_warn",
    "poll_block",
    "cycle_warn",
    "cycle_block",
    "cycle_periods_mask",
    "cycle_counts_repeats",
    "cycle_block_needs_no_progress",
    "repeat_warn",
    "repeat_block",
    "repeat_block_needs_no_progress",
    "global_block",
    "unknown_block",
    "error_warn",
    "error_block",
    "redundant_warn",
    "monologue_block",
    "argument_churn",
    "error_any_text",
    "repeat_reset_after_block",
    "repeat_warn_once",
    "budget_warn_once",
    "compaction_window",
    "monologue_any_text",
    "context_block",
    "repeat_warn_needs_no_progress",
)


def engine_params(pol: Policy) -> dict[str, int]:
    """The engine parameters *pol* stands for, by name."""

    def z(on: bool, v: int | None) -> int:
        return int(v) if on and v is not None else 0

    mask = sum(1 << k for k in pol.cycle_periods) if pol.cycle else 0
    values = (
        pol.window,
        z(pol.generic_repeat, pol.generic_warn),
        z(pol.generic_repeat, pol.generic_block),
        z(pol.poll_no_progress, pol.poll_warn),
        z(pol.poll_no_progress, pol.poll_block),
        z(pol.cycle, pol.cycle_warn),
        z(pol.cycle, pol.cycle_block),
        mask,
        int(pol.cycle_unit == "repeats"),
        int(pol.cycle_block_needs_no_progress),
        z(pol.consecutive_repeat, pol.repeat_warn),
        z(pol.consecutive_repeat, pol.repeat_block),
        int(pol.repeat_block_needs_no_progress),
        z(pol.global_breaker, pol.global_block),
        z(pol.unknown_tool, pol.unknown_block),
        z(pol.error_streak, pol.error_warn),
        z(pol.error_streak, pol.error_block),
        z(pol.redundant_observation, pol.redundant_warn),
        z(pol.monologue, pol.monologue_block),
        int(pol.global_breaker and pol.argument_churn),
        int(pol.error_any_text),
        int(pol.repeat_reset_after_block),
        int(pol.repeat_warn_once),
        int(pol.budget_warn_once),
        pol.compaction_window if pol.compaction_loop else 0,
        int(pol.monologue_any_text),
        z(pol.context_loop, pol.context_block),
        int(pol.repeat_warn_needs_no_progress),
    )
    return dict(zip(PARAM_NAMES, values))


class Params:
    """The pure engine's parameters: one attribute per name of PARAM_NAMES."""

    __slots__ = PARAM_NAMES

    window: int
    generic_warn: int
    generic_block: int
    poll_warn: int
    poll_block: int
    cycle_warn: int
    cycle_block: int
    cycle_periods_mask: int
    cycle_counts_repeats: int
    cycle_block_needs_no_progress: int
    repeat_warn: int
    repeat_block: int
    repeat_block_needs_no_progress: int
    global_block: int
    unknown_block: int
    error_warn: int
    error_block: int
    redundant_warn: int
    monologue_block: int
    argument_churn: int
    error_any_text: int
    repeat_reset_after_block: int
    repeat_warn_once: int
    budget_warn_once: int
    compaction_window: int
    monologue_any_text: int
    context_block: int
    repeat_warn_needs_no_progress: int

    def __init__(self, params: Mapping[str, int]) -> None:
        missing = [n for n in PARAM_NAMES if n not in params]
        extra = sorted(set(params) - set(PARAM_NAMES))
        if missing or extra:
            raise ValueError(f"engine parameters: missing {missing}, unknown {extra}")
        for n in PARAM_NAMES:
            setattr(self, n, int(params[n]))
