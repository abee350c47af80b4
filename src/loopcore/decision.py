"""The guard's answer for one call (``Decision``) and the words it says to the model.

A guard Decision is built from integers (the detector code, the count, the step it repeats, and
``_why``: the policy, the tool, the pattern hash and, for cycles, the paired tool or, for the
global breaker's argument churn, the number of variants) and renders its message and key on
first access. The compiled engine builds the very same object in C (guard.pyx, ``_new_decision``).
"""

from __future__ import annotations

from . import _codes
from .policy import DETECTORS

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from typing import Any

__all__ = ["ALLOW", "Decision", "LoopBlocked"]

_DET_NAMES = {
    _codes.D_UNKNOWN: "unknown_tool",
    _codes.D_GLOBAL: "global_breaker",
    _codes.D_POLL: "poll_no_progress",
    _codes.D_CYCLE: "cycle",
    _codes.D_REPEAT: "consecutive_repeat",
    _codes.D_MONOLOGUE: "monologue",
    _codes.D_GENERIC: "generic_repeat",
    _codes.D_ERROR: "error_streak",
    _codes.D_BUDGET: "tool_budget",
    _codes.D_REDUNDANT: "redundant_observation",
    _codes.D_COMPACTION: "compaction_loop",
    _codes.D_CONTEXT: "context_loop",
    _codes.D_CONTENT: "content_loop",
}
assert set(_DET_NAMES.values()) == set(DETECTORS)


class Decision:
    """The guard's answer for one call: ``action`` is "allow", "warn" or "block".

    ``detector`` names what fired (None on allow), ``count`` is the count it compared with its
    threshold, ``message`` the text for the model, ``key`` a stable id for de-duplicating
    warnings, ``of_step`` the step index (per session, from 0) of the earlier call this one
    repeats, or None. The guard's own decisions render ``message`` and ``key`` on first access
    (most warnings are never read), so building one costs no string formatting.
    """

    __slots__ = ("action", "detector", "count", "of_step", "_message", "_key", "_why")
    action: str
    detector: str | None
    count: int
    of_step: int | None
    _message: str | None
    _key: str | None
    _why: tuple[Any, ...] | None
    _FIELDS = ("action", "detector", "count", "message", "key", "of_step")

    def __init__(
        self,
        action: str,
        detector: str | None = None,
        count: int = 0,
        message: str = "",
        key: str | None = None,
        of_step: int | None = None,
    ) -> None:
        self.action = action
        self.detector = detector
        self.count = count
        self.of_step = of_step
        self._message = message
        self._key = key
        self._why = None

    @property
    def message(self) -> str:
        """The text written for the model ("" on allow)."""
        m = self._message
        if m is None:  # a guard decision: rendered once, from the facts it was built with
            m = self._message = _render_message(
                self.detector,  # type: ignore[arg-type]
                self.action == "block",
                self.count,
                self._why,  # type: ignore[arg-type]
            )
        return m

    @message.setter
    def message(self, value: str) -> None:
        self._message = value

    @property
    def key(self) -> str | None:
        """A stable id of the pattern (detector, tool, call or cycle) for de-duplicating warnings."""
        k = self._key
        if k is None and self._why is not None:
            k = self._key = _render_key(self.detector, self._why)  # type: ignore[arg-type]
        return k

    @key.setter
    def key(self, value: str | None) -> None:
        self._key = value

    @property
    def allowed(self) -> bool:
        """True unless the call is blocked (a warned call may run)."""
        return self.action != "block"

    @property
    def blocked(self) -> bool:
        """True when the call must not run; return ``message`` to the model instead."""
        return self.action == "block"

    def to_dict(self) -> dict[str, Any]:
        """The decision as a JSON-ready dict."""
        return {s: getattr(self, s) for s in self._FIELDS}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Decision):
            return NotImplemented
        return all(getattr(self, s) == getattr(other, s) for s in self._FIELDS)

    def __hash__(self) -> int:
        return hash((self.action, self.detector, self.count, self.key, self.of_step))

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            Decision,
            (self.action, self.detector, self.count, self.message, self.key, self.of_step),
        )

    def __repr__(self) -> str:
        if self.action == "allow":
            return "Decision(action='allow')"
        return (
            f"Decision(action={self.action!r}, detector={self.detector!r}, count={self.count}, "
            f"key={self.key!r}, of_step={self.of_step!r})"
        )


def _lazy_decision(code: int, count: int, of_step: int, why: tuple[Any, ...]) -> Decision:
    """A warn/block Decision whose message and key render on first access (see _render_message).

    The compiled twin builds the very same object in C (guard.pyx, ``_new_decision``).
    """
    d = object.__new__(Decision)
    d.action = "block" if code >> 4 == 2 else "warn"
    d.detector = _DET_NAMES[code & 15]
    d.count = count
    d.of_step = of_step if of_step >= 0 else None
    d._message = None
    d._key = None
    d._why = why
    return d


#: The answer to almost every call; shared, never mutated.
ALLOW = Decision("allow")


class LoopBlocked(RuntimeError):
    """Raised by a tool wrapped by ``Guard.wrap`` with ``on_block="raise"``; ``.decision`` holds the block."""

    def __init__(self, decision: Decision) -> None:
        super().__init__(decision.message)
        self.decision = decision


def _todo_like(tool: str) -> bool:
    t = tool.lower()
    return "todo" in t or "plan" in t


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


# A guard Decision's ``_why``: (policy, tool, pattern hash, paired tool name or None); the
# pattern hash is the cycle's id for cycles, else the call's args hash.


def _render_key(det: str, why: tuple[Any, ...]) -> str:
    _pol, tool, x, _other = why
    if det == "tool_budget":
        return f"tool_budget:{tool}"
    if det == "cycle":
        return f"cycle:{x:016x}"
    return f"{det}:{tool}:{x:016x}"


def _render_message(det: str, block: bool, count: int, why: tuple[Any, ...]) -> str:
    pol, tool, _x, other = why
    if det == "tool_budget":
        what = "updating the todo list / plan" if _todo_like(tool) else f"calling {tool}"
        if block:
            return (
                f"BLOCKED: {tool} has been called {count} times in this session. Stop {what} "
                "and continue with the work itself."
            )
        limit = pol.budgets.get(tool, (None, None))[1]
        lim = f" (the limit is {limit})" if limit else ""
        return (
            f"WARNING: {tool} has been called {count} times in this session{lim}. Stop {what} "
            "and continue with the work itself."
        )
    if det == "generic_repeat":
        if block:
            return (
                f"BLOCKED: you called {tool} with identical arguments and got identical outcomes "
                f"{count} times. It is not making progress; try a different approach or report "
                "the task as failed."
            )
        return (
            f"WARNING: you have called {tool} {count} times with identical arguments. If this is "
            "not making progress, stop retrying and report the task as failed."
        )
    if det == "poll_no_progress":
        if block:
            return (
                f"BLOCKED: you polled {tool} {count} times with identical arguments and no progress. "
                "This is a stuck polling loop; report the task as failed."
            )
        return (
            f"WARNING: you have polled {tool} {count} times with identical arguments and no progress. "
            "Stop polling: wait longer between checks, or report the task as failed if the process is stuck."
        )
    if det == "cycle":
        pair = f" (with {other})" if other != tool else ""
        unit = "repetitions" if pol.cycle_unit == "repeats" else "consecutive calls"
        what = "a ping-pong loop" if pol.cycle_periods == (2,) else "a loop"
        if block:
            return (
                f"BLOCKED: you are cycling through the same tool calls{pair}, {count} {unit} with "
                f"no progress: {what}. Stop and try a different approach or report the task as failed."
            )
        return (
            f"WARNING: you are alternating between the same tool calls{pair}, {count} {unit}. This "
            f"looks like {what}; stop retrying and change approach."
        )
    if det == "consecutive_repeat":
        if block:
            return (
                f"BLOCKED: this is the {_ordinal(count)} identical consecutive call of {tool}. "
                "Repeating it will not change the result; try something else."
            )
        return (
            f"WARNING: this is the {_ordinal(count)} identical consecutive call of {tool}. "
            "If it is not making progress, change approach."
        )
    if det == "global_breaker":
        if other:
            return (
                f"BLOCKED: {tool} has cycled through {other} repeated argument patterns with the same "
                f"stable outcomes {count} times. The global circuit breaker stopped it: the arguments "
                "change but nothing else does; change approach or report the task as failed."
            )
        return (
            f"BLOCKED: {tool} has repeated identical no-progress outcomes {count} times. "
            "The global circuit breaker stopped it to prevent a runaway loop; change approach or "
            "report the task as failed."
        )
    if det == "compaction_loop":
        return (
            f"BLOCKED: since the context was compacted, you repeated the same {tool} call {count} "
            "times with the same result: the loop from before the compaction is starting again. "
            "Use the result you have and continue differently."
        )
    if det == "context_loop":
        return (
            f"BLOCKED: the context window was condensed {count} times in a row with nothing done "
            "between. Stop and report the task as failed, or ask the user how to continue."
        )
    if det == "unknown_tool":
        return (
            f"BLOCKED: {tool} does not exist; you tried it {count} times. Stop calling it and "
            "continue without it."
        )
    if det == "error_streak":
        how = "" if pol.error_any_text else " the same way"
        if block:
            return (
                f"BLOCKED: the same call failed {count} times: {tool} failed{how} with identical "
                "arguments. Retrying will fail again; fix the cause or try a different approach."
            )
        return (
            f"WARNING: the same call failed {count} times: {tool} failed{how} with identical arguments. "
            "Do not retry unchanged; fix the cause first."
        )
    if det == "monologue":
        if pol.monologue_any_text:
            return (
                f"BLOCKED: this is your {_ordinal(count)} message in a row without a tool call. "
                "Take an action with a tool, or end the turn."
            )
        return (
            f"BLOCKED: you sent the same message {count} times without doing anything in between. "
            "Take an action or end the turn."
        )
    return (
        f"NOTE: this repeats an earlier identical {tool} call and nothing has changed its target "
        "since; reuse the earlier result instead of observing it again."
    )
