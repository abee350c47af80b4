"""Content loops in model text: the one dispatcher that picks the compiled or the pure twin.

See ``loopcore._textloop_py`` for the rules (gemini-cli's "chanting" detector) and the contract.
"""

from __future__ import annotations

from ._native_flag import NO_EXTENSIONS

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing

if TYPE_CHECKING or NO_EXTENSIONS:
    from ._textloop_py import (
        CHUNK_SIZE,
        LOOP_THRESHOLD,
        MAX_AVG_DISTANCE,
        MAX_HISTORY,
        MAX_PERIODS,
        TextLoopDetector,
        repeated_spans,
    )
else:
    from ._native_textloop import (
        CHUNK_SIZE,
        LOOP_THRESHOLD,
        MAX_AVG_DISTANCE,
        MAX_HISTORY,
        MAX_PERIODS,
        TextLoopDetector,
        repeated_spans,
    )

__all__ = [
    "CHUNK_SIZE",
    "LOOP_THRESHOLD",
    "MAX_AVG_DISTANCE",
    "MAX_HISTORY",
    "MAX_PERIODS",
    "TextLoopDetector",
    "repeated_spans",
]
