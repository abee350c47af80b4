"""Helpers shared by the peer suites in tests/peers (one module per peer harness).

Each ``test_peer_*.py`` module translates one peer's own test file case by case: every test's
docstring names the peer repository, the file and the peer's test name, and says what differs
when loopcore deliberately behaves otherwise (docs/peers.md lists those differences and the
counts). The cases run on both engine twins through the ``impl`` fixture of tests/conftest.py.

The peers call a loop "stuck" after they saw the looping calls' outcomes; loopcore decides at
``check`` time, so "stuck after N calls" reads here as "the N+1st identical call is refused".
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import pytest

from loopcore import ALLOW, Decision, Guard, Policy

__all__ = [
    "ALLOW",
    "Decision",
    "Guard",
    "Policy",
    "attempt",
    "call",
    "calls",
    "compaction",
    "disable",
    "fail",
    "missing",
    "ran",
    "say",
    "text",
    "note_event",
]


def missing(reason: str):
    """Mark a case whose peer behaviour loopcore does not have yet (strict: it must fail)."""
    return pytest.mark.xfail(strict=True, reason=reason)


def call(
    g: Guard, session: Hashable, tool: str, args: Any = None, result: Any = None, **kw: Any
) -> Decision:
    """One call as a harness makes it: check, then record the outcome (the block when refused)."""
    d = g.check(session, tool, args, **kw)
    g.record(session, tool, args, d if d.blocked else result, **kw)
    return d


def calls(
    g: Guard,
    session: Hashable,
    tool: str,
    args: Any = None,
    result: Any = None,
    n: int = 1,
    *,
    results: Callable[[int], Any] | None = None,
    **kw: Any,
) -> list[Decision]:
    """*n* calls of ``tool(args)``; ``results(i)`` gives the i-th outcome when outcomes change."""
    return [
        call(g, session, tool, args, results(i) if results is not None else result, **kw)
        for i in range(n)
    ]


def ran(
    g: Guard,
    session: Hashable,
    tool: str,
    args: Any = None,
    result: Any = None,
    n: int = 1,
    *,
    results: Callable[[int], Any] | None = None,
    **kw: Any,
) -> list[Decision]:
    """*n* calls that ran whatever the guard said (a peer test that records outcomes without
    acting on its detector, or a replay): check, then record the real outcome."""
    out = []
    for i in range(n):
        out.append(g.check(session, tool, args, **kw))
        g.record(session, tool, args, results(i) if results is not None else result, **kw)
    return out


def fail(g: Guard, session: Hashable, tool: str, args: Any, error: Any, **kw: Any) -> Decision:
    """One call that fails with *error* (recorded as an error, not a result)."""
    d = g.check(session, tool, args, **kw)
    if d.blocked:
        g.record(session, tool, args, d, **kw)
    else:
        g.record(session, tool, args, error=error, **kw)
    return d


def attempt(g: Guard, session: Hashable, tool: str, args: Any = None, **kw: Any) -> Decision:
    """A call checked but never given an outcome (a peer's ``recordToolCall`` without a result)."""
    return g.check(session, tool, args, **kw)


# -- the calls a harness makes besides check/record ------------------------------------------


def compaction(g: Guard, session: Hashable) -> None:
    """The harness compacted the session's context (OpenClaw's armPostCompaction)."""
    g.note_compaction(session)


def text(g: Guard, session: Hashable, chunk: str) -> Decision:
    """A chunk of the model's streamed reply, checked for content loops."""
    return g.check_text(session, chunk)


def say(g: Guard, session: Hashable, content: str, *, role: str = "assistant") -> Decision:
    """A message in the conversation with no tool call: the agent's (monologue) or the user's."""
    return g.note_message(session, content, role=role)


def note_event(g: Guard, session: Hashable, event: str) -> Decision:
    """A harness event that is not a tool call (e.g. a context-window error and its condensation)."""
    return g.note_event(session, event)


def disable(g: Guard, session: Hashable) -> None:
    """Switch loop detection off for one session (gemini-cli's disableForSession)."""
    g.disable(session)
