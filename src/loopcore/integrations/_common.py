"""What the framework adapters share: the guard's answer in words, and the telemetry hook."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["Telemetry", "with_warning"]


def with_warning(text: str, message: str) -> str:
    """A tool's text output with the guard's warning appended (the model reads both)."""
    return f"{text}\n\n{message}" if text else message


class Telemetry:
    """Emits each warn/block as an OpenTelemetry span event when ``opentelemetry-api`` is there.

    ``enabled=None`` (the default) emits when the package imports and stays silent otherwise;
    True requires it (ImportError naming the extra); False never emits. The import happens on
    the first warn or block, so an allowed call never pays for it.
    """

    __slots__ = ("_emit", "_required")

    def __init__(self, enabled: bool | None = None) -> None:
        self._required = enabled is True
        self._emit: Callable[..., bool] | None | bool = False if enabled is False else None
        if self._required:
            self._load()

    def _load(self) -> Callable[..., bool] | bool:
        try:
            from .otel import emit_guardrail_result
        except ImportError:
            if self._required:
                raise
            self._emit = False
        else:
            self._emit = emit_guardrail_result
        return self._emit

    def __call__(
        self,
        decision: Any,
        *,
        tool: str,
        source: str,
        call_id: Any = None,
        session: Any = None,
        policy: str | None = None,
    ) -> None:
        emit = self._emit
        if emit is None:
            emit = self._load()
        if emit:
            emit(
                decision, tool=tool, source=source, call_id=call_id, session=session, policy=policy
            )
