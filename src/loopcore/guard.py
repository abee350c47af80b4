"""The online guard: allow / warn / block before every tool call of a live agent harness.

``Guard`` does the bookkeeping that is not hot (policy, tool registry, hashing rules, event
records, snapshots) and calls one twin: the sessions table and state engine of
``loopcore._native_guard`` (Cython) or ``loopcore._guard_py`` (pure Python), picked once below
(the compiled one unless it is absent or ``LOOPCORE_NO_EXTENSIONS=1``), with identical
decisions. The table answers each call with a Decision, its event buckets included; the Guard
never reads an engine's state. See docs/guard.md for the user guide and its twin boundary.
"""

from __future__ import annotations

import functools
import re
import sys
import time
from collections.abc import Callable, Hashable, Iterator

from xxhash import xxh3_64_intdigest

from . import _codes, _native_flag
from . import _guard_snapshot as _snapshot
from ._guard_params import engine_params as _engine_params
from ._guard_snapshot import _SNAP_HEADER, _SNAP_MAGIC, _SNAP_VERSION  # noqa: F401 (tests, tools)
from .decision import (  # noqa: F401
    _DET_NAMES,
    ALLOW,
    Decision,
    LoopBlocked,
    _lazy_decision,
    _render_key,
    _render_message,
)
from .policy import Policy
from .textloop import LOOP_THRESHOLD, TextLoopDetector

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from typing import Any

    # the pure twin is the reference: type checkers read it
    from . import _guard_py as _twin
    from . import _hashing_py as _hash_twin
else:
    _twin = _native_flag.load_twin("guard")
    _hash_twin = _native_flag.load_twin("hashing")

__all__ = ["ALLOW", "Decision", "Guard", "LoopBlocked"]

_log: Any = None
_logging: Any = None  # the logging module, imported with the logger
#: Set by processes whose stderr someone else reads (the command hooks): the "loopcore" logger
#: then gets a NullHandler when it is first made, so an unconfigured logging module never prints
#: an event on stderr through its last-resort handler.
_QUIET_LOGGER = False


def _logger() -> Any:
    """The "loopcore" logger, made on the first event: logging costs a hook process ~7 ms to
    import, and a process that emits no event never needs it."""
    global _log, _logging
    if _log is None:
        import logging

        lg = logging.getLogger("loopcore")
        if _QUIET_LOGGER:
            lg.addHandler(logging.NullHandler())
        _logging = logging
        _log = lg
    return _log


def _log_reaches(log: Any, level: int) -> bool:
    """Whether a record of *level* logged on *log* could be seen by anything: False when the
    logger is off for the level, or when every handler the record would reach is a plain
    ``logging.NullHandler`` (which drops it unread) and no logger filter, logger subclass or
    record factory could see it being made. The record then is not built at all: a LogRecord
    costs more than the rest of a warn decision."""
    if not log.isEnabledFor(level):
        return False
    lg = _logging
    if log.filters or type(log) is not lg.Logger or lg.getLogRecordFactory() is not lg.LogRecord:
        return True
    found = False
    c = log
    while c is not None:
        for h in c.handlers:
            if type(h) is not lg.NullHandler:
                return True
            found = True
        if not c.propagate:
            break
        c = c.parent
    return not found  # no handler at all: logging's last resort prints it


_KINDS: dict[str | None, int] = {None: _codes.K_OTHER}
_KINDS.update((name, code) for code, name in enumerate(_codes.KIND_NAMES))
_K_ASK, _K_USER = _codes.K_ASK, _codes.K_USER
_K_COMPACTION, _K_CONDENSATION = _codes.K_COMPACTION, _codes.K_CONDENSATION
# The names under which reported events sit in a session's window (never a real tool's name:
# a tool name cannot start with a parenthesis in any harness loopcore knows).
_MSG_TOOL, _USER_TOOL, _COMPACTION_TOOL, _CONDENSATION_TOOL = (
    "(agent message)",
    "(user message)",
    "(compaction)",
    "(condensation)",
)
_EVENTS = {
    "condensation": (_CONDENSATION_TOOL, _K_CONDENSATION),
    "compaction": (_COMPACTION_TOOL, _K_COMPACTION),
    "user_message": (_USER_TOOL, _K_USER),
}
_F_ERROR, _F_UNKNOWN = 2, 4
_MASK64 = (1 << 64) - 1
_MAX_TOOL_CACHE = 4096

# "unknown tool: foo" / "tool foo not found" / "tool 'foo' is not available" (OpenClaw's shapes)
_UNKNOWN_TOOL_RE = re.compile(
    r"unknown tool[:\s]+[\"']?[a-z0-9_.-]+|tool\s+[\"']?[a-z0-9_.-]+[\"']?\s+(?:not found|is not available|does not exist)",
    re.IGNORECASE,
)

_TOKENS_LIMIT = 1 << 63  # record(tokens=...) takes 0 <= tokens < 2**63; the total saturates there


class _ToolInfo:
    __slots__ = (
        "name",
        "tid",
        "bslot",
        "poll",
        "poll_actions",
        "unknown",
        "exec",
        "send",
        "send_actions",
        "ti",
    )
    name: str
    tid: int
    bslot: int
    poll: bool
    poll_actions: frozenset[str] | None
    unknown: bool
    exec: bool
    send: bool
    send_actions: frozenset[str] | None
    ti: Any


def _error_text(error: Any) -> str:
    if isinstance(error, BaseException):
        return str(error) or type(error).__name__
    if isinstance(error, str):
        return error
    return repr(error)


#: The result projections of the process-wide twin (the Guard uses its own twin's).
project_exec = _twin.project_exec
strip_send_result = _twin.strip_send_result


def _plain_str(tool: Any) -> str:
    """The exact str of a str subclass (a str Enum member...) read from its storage: a subclass's
    own __hash__/__eq__ would miss the tool registry. TypeError for anything else."""
    if not isinstance(tool, str):
        raise TypeError(f"tool must be a str, got {type(tool).__name__}")
    return str.__getitem__(tool, slice(None))


class Guard:
    """Allow / warn / block before each tool call; record the outcome after it.

    ``policy`` (default ``Policy.default()``) picks detectors and thresholds. ``on_event`` is
    called with a ``doom_loop_detected`` dict on each warn/block crossing (de-duplicated per
    count bucket); exceptions it raises are logged, never propagated. ``max_sessions`` (LRU)
    and ``ttl`` (idle seconds, None for never) bound memory. ``classify(tool, args) ->
    (kind, target)`` supplies kind/target when check() is not given them. A Guard is safe to
    share between threads. ``implementation`` says which twin runs it ("c" or "py").
    """

    #: (engine twin, hashing twin) modules; loopcore.guard._make_guard sets another pair
    _twins: tuple[Any, Any] = (_twin, _hash_twin)

    def __init__(
        self,
        policy: Policy | None = None,
        *,
        on_event: Callable[[dict[str, Any]], Any] | None = None,
        max_sessions: int = 10_000,
        ttl: float | None = 6 * 3600.0,
        classify: Callable[[str, Any], tuple[str | None, Any]] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if policy is None:
            policy = Policy.default()
        if not isinstance(policy, Policy):
            raise TypeError(f"policy must be a loopcore.Policy, got {type(policy).__name__}")
        if not isinstance(max_sessions, int) or isinstance(max_sessions, bool) or max_sessions < 1:
            raise ValueError(f"max_sessions must be a positive int; got {max_sessions!r}")
        if ttl is not None and not ttl > 0:
            raise ValueError(f"ttl must be positive seconds or None; got {ttl!r}")
        if on_event is not None and not callable(on_event):
            raise TypeError("on_event must be callable")
        self.policy = policy
        self.on_event = on_event
        self.max_sessions = max_sessions
        self.ttl = ttl
        self.classify = classify
        self._clock = clock
        mod, hashing = self._twins
        self._mod = mod
        self.implementation = "py" if mod.__name__.endswith("_py") else "c"
        self._hash = hashing.canonical_hash
        self._budget_tools = tuple(policy.budgets) if policy.tool_budget else ()
        self._budget_slot = {t: i for i, t in enumerate(self._budget_tools)}
        self._engine: _twin.Engine = mod.Engine(
            _engine_params(policy),
            [policy.budgets[t][0] or 0 for t in self._budget_tools],
            [policy.budgets[t][1] or 0 for t in self._budget_tools],
        )
        self._table: _twin.Table = mod.Table(
            self._engine,
            policy,
            max_sessions,
            float(ttl or 0.0),
            None if clock is time.monotonic else clock,
            self._hash,
            Decision,
            ALLOW,
            tuple(_DET_NAMES.get(i) for i in range(16)),
            self._event,
        )
        self._fast_check = self._table.fast_check
        self._fast_record = self._table.fast_record
        self._tools: dict[str, _ToolInfo] = {}
        self._names: dict[int, str] = self._table.names  # tool id -> name, the table's
        self._disabled: set[Hashable] = set()  # sessions with detection switched off (disable())
        self._texts: dict[
            tuple[Hashable, Hashable], list[Any]
        ] = {}  # (session, run_id) -> [TextLoopDetector, n_steps at the last chunk]
        if not policy.enabled:
            # the master switch: every call allowed, nothing recorded, nothing emitted
            self.check, self.record = self._off_check, self._off_record  # type: ignore[method-assign]
        elif (
            classify is None
            and type(self).check is Guard.check
            and type(self).record is Guard.record
        ):
            # The compiled twin offers check/record callables that run the common case, warn and
            # block decisions included, with no Python frame, and hand everything else to the
            # methods below (same behaviour).
            fast = mod.bind_fast(self._table, self._slow_check, self._slow_record)  # type: ignore[attr-defined]
            if fast is not None:
                self.check, self.record = fast  # type: ignore[method-assign]

    def __repr__(self) -> str:
        return f"<Guard policy={self.policy.name!r} engine={self.implementation!r} sessions={len(self._table)}>"

    # -- per-call ---------------------------------------------------------------------------

    def _tool(self, tool: str) -> _ToolInfo:
        if type(tool) is not str:
            tool = _plain_str(tool)
        info = self._tools.get(tool)
        if info is not None:
            return info
        pol = self.policy
        info = _ToolInfo()
        info.name = tool
        info.tid = self._hash(tool) or 1
        info.bslot = self._budget_slot.get(tool, -1)
        info.poll = pol.poll_no_progress and tool in pol.poll_tools
        acts = pol.poll_actions.get(tool) if pol.poll_no_progress else None
        info.poll_actions = acts or None
        info.unknown = pol.known_tools is not None and tool not in pol.known_tools
        info.exec = tool in pol.exec_tools
        info.send = tool in pol.send_tools
        info.send_actions = pol.send_actions if tool in pol.message_tools else None
        if len(self._tools) >= _MAX_TOOL_CACHE:  # a cache: every entry can be recomputed
            self._tools.clear()
            self._table.clear_tools()
        self._tools[tool] = info
        info.ti = self._mod.ToolInfo(
            info.tid,
            info.bslot,
            info.poll,
            info.poll_actions,
            info.unknown,
            info.exec or info.poll,
            info.send,
            info.send_actions,
        )
        self._table.register(tool, info.ti)
        return info

    def _kind_target(self, tool: str, args: Any, kind: str | None, target: Any) -> tuple[int, int]:
        if kind is None and self.classify is not None:
            kind, t2 = self.classify(tool, args)
            if target is None:
                target = t2
        k = _KINDS.get(kind, -1)
        if k < 0:
            raise ValueError(
                f"kind must be one of observe, mutate, exec, ask, other or None; got {kind!r}"
            )
        if target is None:
            return k, 0
        if isinstance(target, (tuple, list)):
            if k == _codes.K_MUTATE:
                return k, 0  # a multi-target mutation (mv a b): treat as changing everything
            if len(target) == 1:
                target = target[0]
        return k, self._hash(target, default=repr) or 1

    def check(
        self,
        session: Hashable,
        tool: str,
        args: Any = None,
        *,
        run_id: Hashable | None = None,
        kind: str | None = None,
        target: Any = None,
        call_id: Any = None,
    ) -> Decision:
        """Decide on a call before it runs (the attempt counts, a blocked one too).

        Returns ``ALLOW`` or a warn/block Decision. Raises TypeError when *tool* is not a str,
        ValueError for an unknown *kind* or args nested deeper than loopcore.hashing.MAX_DEPTH; values
        canonical_hash does not support are hashed by repr().
        """
        if self._disabled and session in self._disabled:
            return ALLOW
        if type(tool) is not str:
            tool = _plain_str(tool)
        if kind is None and target is None and self.classify is None:
            out = self._fast_check(session, tool, args, run_id, call_id)
            if out is None:  # first sight of this tool name: register it and retry
                self._tool(tool)
                out = self._fast_check(session, tool, args, run_id, call_id)
            d: Decision = out
            return d
        info = self._tools.get(tool) or self._tool(tool)
        ah = self._table.args_hash(args)
        self._table.remember(args, ah)
        acts = info.poll_actions
        poll = info.poll or (
            acts is not None and isinstance(args, dict) and args.get("action") in acts
        )
        k, tg = self._kind_target(tool, args, kind, target)
        cid = 0 if call_id is None else (self._hash(call_id, default=repr) or 1)
        d = self._table.check(
            session, run_id, tool, info.tid, ah, k, tg, cid, poll, info.unknown, info.bslot
        )
        return d

    def _event(
        self, session: Hashable, run_id: Hashable | None, tool: str | None, d: Decision
    ) -> None:
        # The table calls this when a decision crosses into a new event bucket (a warning is
        # announced once per bucket of counts, a block likewise: OpenClaw's warning buckets).
        if self.on_event is None and not _log_reaches(_logger(), 40 if d.action == "block" else 30):
            return  # nobody would see the event: build nothing
        self._emit(
            {
                "event": "doom_loop_detected",
                "session": session,
                "run_id": run_id,
                "tool": tool,
                "detector": d.detector,
                "level": d.action,
                "count": d.count,
                "key": d.key,
                "of_step": d.of_step,
                "message": d.message,
                "policy": self.policy.name,
            }
        )

    def record(
        self,
        session: Hashable,
        tool: str,
        args: Any = None,
        result: Any = None,
        *,
        error: Any = None,
        run_id: Hashable | None = None,
        call_id: Any = None,
        tokens: int | None = None,
        kind: str | None = None,
        target: Any = None,
    ) -> None:
        """Record a call's outcome after it ran (or failed, with *error*).

        It attaches to the newest matching call checked in this session and run that has no
        outcome yet (same call id when both have one); with none, it counts as a new call.
        Recording the guard's own block (the Decision, its message, or OpenClaw's tool-loop
        denial) is ignored, so a block stays a block; a real outcome of a blocked call (e.g. in
        a replay) is recorded as a call.
        Raises TypeError when *tool* is not a str.
        """
        if self._disabled and session in self._disabled:
            return None
        if type(tool) is not str:
            tool = _plain_str(tool)
        if tokens is not None and not (type(tokens) is int and 0 <= tokens < _TOKENS_LIMIT):
            if (
                isinstance(tokens, bool)
                or not isinstance(tokens, int)
                or not 0 <= tokens < _TOKENS_LIMIT
            ):
                raise ValueError(f"tokens must be an int in 0..2**63-1; got {tokens!r}")
            tokens = int(tokens)
        if (
            error is None
            and kind is None
            and target is None
            and self.classify is None
            and self._fast_record(session, tool, args, result, run_id, int(tokens or 0), call_id)
            is not None
        ):
            return
        info = self._tools.get(tool) or self._tool(tool)
        ah = self._table.hash_checked(args)
        veto = 0
        flags = 0
        if error is not None:
            text = _error_text(error)
            rh = xxh3_64_intdigest(b"error\x00" + text.encode("utf-8", "surrogatepass"))
            flags = _F_ERROR
            if info.unknown or _UNKNOWN_TOOL_RE.search(text):
                flags |= _F_UNKNOWN
        else:
            # 1: the guard's own block; 2: its block message as the tool's output, a veto only if
            # this very call was just blocked (the engine decides); 0: an ordinary outcome
            veto = self._table.veto(result)
            rh = 0 if veto == 1 else self._result_hash(info, args, result)
            if not veto and info.unknown:
                flags = _F_UNKNOWN
        if kind is None and target is None and self.classify is None:
            k, tg = _codes.K_OTHER, 0
        else:
            k, tg = self._kind_target(tool, args, kind, target)
        cid = 0 if call_id is None else (self._hash(call_id, default=repr) or 1)
        self._table.record(
            session, run_id, info.tid, ah, rh, flags, k, tg, cid, info.bslot, veto, int(tokens or 0)
        )

    def _result_hash(self, info: _ToolInfo, args: Any, result: Any) -> int:
        return int(self._hash(self._table.outcome(info.ti, args, result), default=repr))

    # -- public helpers ---------------------------------------------------------------------

    def args_hash(self, tool: str, args: Any) -> int:
        """The 64-bit signature the guard compares for *tool* called with *args* (tool included)."""
        info = self._tool(tool)
        return int((info.tid * 0x9E3779B97F4A7C15 + self._table.args_hash(args)) & _MASK64)

    def result_hash(self, tool: str, args: Any, result: Any = None, *, error: Any = None) -> int:
        """The 64-bit outcome hash record() would store (send-like ids stripped, exec projected)."""
        info = self._tool(tool)
        if error is not None:
            return xxh3_64_intdigest(
                b"error\x00" + _error_text(error).encode("utf-8", "surrogatepass")
            )
        return self._result_hash(info, args, result)

    def reset(self, session: Hashable) -> None:
        """Clear all state of *session* (every run id); the next call starts from zero.

        A session switched off with disable() stays off."""
        self._table.drop(session)
        self._drop_texts(session)

    def forget(self, session: Hashable) -> None:
        """Remove *session* entirely (its state, and a disable() of it)."""
        self._table.drop(session)
        self._drop_texts(session)
        self._disabled.discard(session)

    def disable(self, session: Hashable) -> None:
        """Switch detection off for *session*: its calls are allowed and recorded nowhere, its
        text is not checked, and it emits nothing (gemini-cli's disable-for-session)."""
        self._disabled.add(session)
        # the compiled fast path knows nothing of disabled sessions: use the methods that do
        self.__dict__.pop("check", None)
        self.__dict__.pop("record", None)
        self._table.drop(session)
        self._drop_texts(session)

    def _drop_texts(self, session: Hashable) -> None:
        for key in [k for k in self._texts if k[0] == session]:
            del self._texts[key]

    def _off_check(self, session: Hashable, tool: str, args: Any = None, **kw: Any) -> Decision:
        return ALLOW

    def _off_record(
        self, session: Hashable, tool: str, args: Any = None, result: Any = None, **kw: Any
    ) -> None:
        return None

    # -- events other than tool calls -------------------------------------------------------

    def _live(self, session: Hashable) -> bool:
        return self.policy.enabled and not (self._disabled and session in self._disabled)

    def _note(
        self, session: Hashable, run_id: Hashable | None, tool: str, kind: int, args: int = 0
    ) -> Decision:
        info = self._tools.get(tool) or self._tool(tool)
        d: Decision = self._table.check(
            session, run_id, tool, info.tid, args, kind, 0, 0, False, False, -1
        )
        return d

    def note_compaction(self, session: Hashable, *, run_id: Hashable | None = None) -> None:
        """The harness compacted *session*'s context: the next ``compaction_window`` calls are
        watched for the loop a compaction can restart (OpenClaw's post-compaction guard)."""
        if self._live(session):
            self._note(session, run_id, _COMPACTION_TOOL, _K_COMPACTION)

    def note_message(
        self,
        session: Hashable,
        text: str,
        *,
        role: str = "assistant",
        run_id: Hashable | None = None,
    ) -> Decision:
        """A message with no tool call: the agent's (``role="assistant"``, checked by the
        ``monologue`` detector; ALLOW or a block) or the user's (``role="user"``: every loop's
        evidence starts again after it). Raises ValueError for another role, TypeError when
        *text* is not a str."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        if role not in ("assistant", "user"):
            raise ValueError(f"role must be 'assistant' or 'user'; got {role!r}")
        if not self._live(session):
            return ALLOW
        if role == "user":
            self._drop_texts(session)
            return self._note(session, run_id, _USER_TOOL, _K_USER)
        info = self._tools.get(_MSG_TOOL) or self._tool(_MSG_TOOL)
        ah = self._hash(text.strip())
        d: Decision = self._table.check(
            session, run_id, _MSG_TOOL, info.tid, ah, _K_ASK, 0, 0, False, False, -1
        )
        if d is not ALLOW:
            return d
        self._table.record(session, run_id, info.tid, ah, 0, 0, _K_ASK, 0, 0, -1, 0, 0)
        return ALLOW

    def note_event(
        self, session: Hashable, event: str, *, run_id: Hashable | None = None
    ) -> Decision:
        """A harness event that is not a tool call: ``"condensation"`` (a context-window
        condensation; ``context_loop`` refuses the ``context_block``-th in a row),
        ``"compaction"`` (as note_compaction) or ``"user_message"``. Returns ALLOW or a block;
        raises ValueError for another event."""
        spec = _EVENTS.get(event)
        if spec is None:
            raise ValueError(f"event must be one of {', '.join(sorted(_EVENTS))}; got {event!r}")
        if not self._live(session):
            return ALLOW
        if event == "user_message":
            self._drop_texts(session)
        return self._note(session, run_id, *spec)

    def check_text(
        self, session: Hashable, chunk: str, *, run_id: Hashable | None = None
    ) -> Decision:
        """Check a chunk of the model's streamed reply (or a whole reply) for a content loop:
        ALLOW, or a ``content_loop`` block once a 50-character chunk repeats 10 times close
        together outside code, tables, lists, headings and dividers (gemini-cli's rules, see
        loopcore.textloop). A tool call between chunks starts a new reply. Raises TypeError
        when *chunk* is not a str."""
        if not isinstance(chunk, str):
            raise TypeError(f"chunk must be a str, got {type(chunk).__name__}")
        if not self.policy.content_loop or not self._live(session):
            return ALLOW
        key = (session, run_id)
        st = self._table.get(session, run_id)
        steps = st.n_steps if st is not None else 0
        entry = self._texts.get(key)
        if entry is None:
            if len(self._texts) >= self.max_sessions:
                del self._texts[next(iter(self._texts))]
            entry = self._texts[key] = [TextLoopDetector(), steps]
        elif entry[1] != steps:  # a tool call since the last chunk: a new reply
            entry[0].reset()
            entry[1] = steps
        det = entry[0]
        was = det.detected
        if not det.feed(chunk):
            return ALLOW
        rep = det.chunk or ""
        d = Decision(
            "block",
            "content_loop",
            LOOP_THRESHOLD,
            f'BLOCKED: your reply keeps repeating the same text ("{rep.strip()[:60]}..." '
            f"{LOOP_THRESHOLD} times). Stop repeating it; say something new or end the reply.",
            key=f"content_loop:{xxh3_64_intdigest(rep.encode('utf-8', 'surrogatepass')):016x}",
        )
        if not was:
            self._emit(
                {
                    "event": "doom_loop_detected",
                    "session": session,
                    "run_id": run_id,
                    "tool": None,
                    "detector": "content_loop",
                    "level": "block",
                    "count": d.count,
                    "key": d.key,
                    "of_step": None,
                    "message": d.message,
                    "policy": self.policy.name,
                }
            )
        return d

    def __len__(self) -> int:
        return len(self._table)

    def __contains__(self, session: object) -> bool:
        return self._table.has_session(session)

    def sessions(self) -> Iterator[Hashable]:
        """The live session ids, least recently used first (each once, whatever its run ids)."""
        return iter(list(dict.fromkeys(s for (s, _), _st in self._table.items())))

    def stats(self) -> dict[str, int]:
        """Counters: checks, warns, blocks, records, tokens recorded, evicted and live sessions."""
        return self._table.counters()

    def history(
        self, session: Hashable, *, run_id: Hashable | None = None
    ) -> list[tuple[str | None, int, int | None]]:
        """The calls in *session*'s window, oldest first: (tool, args hash, result hash or None)."""
        st = self._table.get(session, run_id)
        if st is None:
            return []
        dump = self._engine.dump(st)
        nb = dump[4]
        n = dump[5 + nb]
        out = []
        pos = 6 + nb
        for i in range(n):
            e = dump[pos + 8 * i : pos + 8 * i + 8]
            out.append((self._names.get(e[0]), e[1], e[2] if e[3] & 1 else None))
        return out

    def wrap(
        self,
        fn: Callable[..., Any] | None = None,
        *,
        session: Hashable | Callable[[], Hashable] = "default",
        name: str | None = None,
        kind: str | None = None,
        target: Callable[..., Any] | None = None,
        run_id: Hashable | None = None,
        on_block: str = "message",
    ) -> Callable[..., Any]:
        """Guard a plain Python tool function: check before each call, record after; used as
        ``guard.wrap(fn)``, ``@guard.wrap`` or ``@guard.wrap(session=..., on_block=...)``.

        The call's args are the keyword arguments (plus ``"args"`` for positional ones). On block
        the function does not run and the wrapper returns the block message
        (``on_block="message"``) or raises :class:`LoopBlocked` (``on_block="raise"``); on warn a
        str result gets the warning appended. Exceptions of the tool are recorded as errors and
        re-raised. *session* may be a callable returning the current session id; *name* defaults
        to the function's name. Raises ValueError for an unknown *on_block*.
        """
        deco = _guarded(
            self, session, name=name, kind=kind, target=target, run_id=run_id, on_block=on_block
        )
        return deco if fn is None else deco(fn)

    # -- decisions and events ---------------------------------------------------------------

    def _emit(self, event: dict[str, Any]) -> None:
        log = _logger()
        level = 40 if event["level"] == "block" else 30  # logging.ERROR / logging.WARNING
        if _log_reaches(log, level):
            # What log.log() does, minus its stack walk (findCaller), which cost more than the rest
            # of the event: the caller is always this very line.
            log.handle(
                log.makeRecord(
                    log.name,
                    level,
                    __file__,
                    sys._getframe().f_lineno,
                    "doom_loop_detected: %s %s on %s in session %r (count %d)",
                    (
                        event["level"],
                        event["detector"],
                        event["tool"],
                        event["session"],
                        event["count"],
                    ),
                    None,
                    "_emit",
                    {"loopcore_event": event},
                )
            )
        cb = self.on_event
        if cb is not None:
            try:
                cb(event)
            except Exception:  # noqa: BLE001 - a broken callback must never break the harness
                log.exception("loopcore: on_event callback raised; the event was dropped")

    # -- persistence ------------------------------------------------------------------------

    def snapshot(self) -> bytes:
        """All state (policy, sessions, windows, counters, event buckets) as bytes.

        Raises TypeError when a session or run id is not a str, int or None (JSON keys).
        """
        return _snapshot.dump(self)

    @classmethod
    def restore(cls, data: bytes, *, policy: Policy | None = None, **kwargs: Any) -> Guard:
        """A Guard rebuilt from snapshot() bytes (policy from the snapshot unless given).

        *kwargs* are Guard's keywords (on_event, max_sessions, ttl, classify, clock). Raises
        ValueError when *data* is not a loopcore guard snapshot, is truncated or corrupted, or
        does not fit the policy.
        """
        guard: Guard = _snapshot.load(lambda pol: cls(pol, **kwargs), data, policy)
        return guard

    def memory_bytes(self) -> int:
        """Approximate bytes of session state held by the engine (rings and counters)."""
        return sum(self._engine.nbytes(st) for _key, st in self._table.items())


# The Guard's own check/record, which the compiled fast path hands what it does not take.
Guard._slow_check = Guard.check  # type: ignore[attr-defined]
Guard._slow_record = Guard.record  # type: ignore[attr-defined]


def _make_guard(
    policy: Policy | None = None, *, impl: str | None = None, cls: type[Guard] = Guard, **kw: Any
) -> Guard:
    """A Guard (or *cls*) on the twin *impl* ("c" or "py"; None: the process-wide one), for tests,
    benchmarks and tools that cross the twins; *kw* are Guard's keywords."""
    g = cls.__new__(cls)
    if impl is not None:
        g._twins = (_native_flag.load_twin("guard", impl), _native_flag.load_twin("hashing", impl))
    g.__init__(policy, **kw)  # type: ignore[misc]
    return g


def _restore_guard(
    data: bytes, *, impl: str | None = None, policy: Policy | None = None, **kw: Any
) -> Guard:
    """Guard.restore on the twin *impl* (see _make_guard)."""
    g: Guard = _snapshot.load(lambda pol: _make_guard(pol, impl=impl, **kw), data, policy)
    return g


def _guarded(
    guard: Guard,
    session: Hashable | Callable[[], Hashable] = "default",
    *,
    name: str | None = None,
    kind: str | None = None,
    target: Callable[..., Any] | None = None,
    run_id: Hashable | None = None,
    on_block: str = "message",
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: run a plain tool function under *guard*, check before, record after
    (what :meth:`Guard.wrap` returns).

    The call's args are the keyword arguments (plus ``"args"`` for positional ones). On block
    the function does not run and the wrapper returns the block message (``on_block="message"``)
    or raises :class:`LoopBlocked` (``on_block="raise"``); on warn a str result gets the warning
    appended. Exceptions of the tool are recorded as errors and re-raised. *session* may be a
    callable returning the current session id. Raises ValueError for an unknown *on_block*.
    """
    if on_block not in ("message", "raise"):
        raise ValueError(f"on_block must be 'message' or 'raise'; got {on_block!r}")

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        tool = name or fn.__name__

        @functools.wraps(fn)
        def wrapper(*a: Any, **kw: Any) -> Any:
            sess = session() if callable(session) else session
            args: Any = dict(kw)
            if a:
                args["args"] = list(a)
            tgt = target(*a, **kw) if target is not None else None
            d = guard.check(sess, tool, args, run_id=run_id, kind=kind, target=tgt)
            if d.action == "block":
                guard.record(sess, tool, args, d, run_id=run_id, kind=kind, target=tgt)
                if on_block == "raise":
                    raise LoopBlocked(d)
                return d.message
            try:
                result = fn(*a, **kw)
            except Exception as exc:
                guard.record(sess, tool, args, error=exc, run_id=run_id, kind=kind, target=tgt)
                raise
            guard.record(sess, tool, args, result, run_id=run_id, kind=kind, target=tgt)
            if d.action == "warn" and isinstance(result, str):
                return f"{result}\n\n{d.message}"
            return result

        wrapper.__loopcore_guard__ = guard  # type: ignore[attr-defined]
        return wrapper

    return decorate
