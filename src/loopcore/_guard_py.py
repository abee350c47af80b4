"""Pure-Python twin of the guard's state engine: the reference the compiled core must match.

The engine sees integers only. ``loopcore.guard.Guard`` interns tool names to ids (>= 1),
hashes arguments, results and targets to unsigned 64-bit ints and maps the Policy to the
parameter tuple below; the engine keeps, per session, a ring of the last ``window`` calls
(tool id, args hash, result hash, flags, kind, target hash, call-id hash, step index) plus
the cumulative per-tool budget counters, and answers ``check``/``record``.

``check`` returns 0 (allow) or ``level << 4 | detector``; the details of a non-allow answer are
left in the state's ``out_count``, ``out_of_step`` (-1 for none), ``out_aux`` (the paired tool
id of a cycle) and ``out_aux2`` (a stable 64-bit id of the pattern, for the warning key).

Parameters come by name (``loopcore._guard_params.PARAM_NAMES``; the compiled twin reads the
same names into the C struct of ``src/_native/guard_params.pxd``): thresholds (0 switches one
off) and 0/1 flags, documented beside their Policy fields.

Kinds 5-7 are not calls but events the harness reports, pushed into the ring as markers:
a user message (5: the evidence of every streak starts again after it), a compaction (6) and a
context-window condensation (7). Flag 8 on an entry stops the consecutive count there (the
call before a refusal, when the count starts again after refusals).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from . import _codes
from ._codes import (
    D_BUDGET,
    D_COMPACTION,
    D_CONTENT,
    D_CONTEXT,
    D_CYCLE,
    D_ERROR,
    D_GENERIC,
    D_GLOBAL,
    D_MONOLOGUE,
    D_POLL,
    D_REDUNDANT,
    D_REPEAT,
    D_UNKNOWN,
    MAX_DEPTH,
    kind_from_stored,
    kind_to_stored,
)
from ._guard_params import PARAM_NAMES, Params

__all__ = [
    "ASK",
    "EXEC",
    "MUTATE",
    "OBSERVE",
    "OTHER",
    "USER",
    "COMPACTION",
    "CONDENSATION",
    "F_BARRIER",
    "F_ERROR",
    "F_HAS",
    "F_UNKNOWN",
    "BLOCK",
    "WARN",
    "N_PARAMS",
    "DUMP_VERSION",
    "D_UNKNOWN",
    "D_GLOBAL",
    "D_POLL",
    "D_CYCLE",
    "D_REPEAT",
    "D_MONOLOGUE",
    "D_GENERIC",
    "D_ERROR",
    "D_BUDGET",
    "D_REDUNDANT",
    "D_COMPACTION",
    "D_CONTEXT",
    "D_CONTENT",
    "Engine",
    "State",
    "Table",
    "ToolInfo",
    "bind_fast",
    "block_veto",
    "project_exec",
    "strip_send_result",
]

OTHER, OBSERVE, MUTATE, EXEC, ASK = (
    _codes.K_OTHER,
    _codes.K_OBSERVE,
    _codes.K_MUTATE,
    _codes.K_EXEC,
    _codes.K_ASK,
)
USER, COMPACTION, CONDENSATION = _codes.K_USER, _codes.K_COMPACTION, _codes.K_CONDENSATION
F_HAS, F_ERROR, F_UNKNOWN, F_BARRIER = (
    _codes.G_HAS,
    _codes.G_ERROR,
    _codes.G_UNKNOWN,
    _codes.G_BARRIER,
)
WARN, BLOCK = 1, 2
N_PARAMS = len(PARAM_NAMES)
MAX_EVENT_KEYS = 256  # event buckets kept per session (OpenClaw's bound on its warning map)
#: an argument variant with this many calls, all with one outcome, is a stable variant
CHURN_MIN_CALLS = 3
DUMP_VERSION = 1
_MASK64 = (1 << 64) - 1


# -- result projections (the compiled twin has the same functions) ----------------------

_EXIT_KEYS = ("exitCode", "exit_code", "returncode", "returnCode", "exit_status", "exitStatus")
_OUT_KEYS = ("aggregated", "output", "stdout", "combined", "tail", "result")
_ERR_KEYS = ("stderr",)


def _text_content(result: dict) -> str:
    content = result.get("content")
    if not isinstance(content, list):
        return ""
    parts = [e["text"] for e in content if isinstance(e, dict) and isinstance(e.get("text"), str)]
    return "\n".join(parts).strip()


def project_exec(result: Any) -> Any:
    """(status, exit code, timed out, output, stderr) of a shell/exec/poll result, or the result
    itself when it is not a dict of a known shape; durations, pids, cwd and timestamps are
    dropped (they change on every run and are not progress; docs/guard.md, Result hashing). Never raises."""
    if not isinstance(result, dict):
        return result
    details = result.get("details")
    d = details if isinstance(details, dict) else result
    exit_code = next((d[k] for k in _EXIT_KEYS if k in d), None)
    output = next((d[k] for k in _OUT_KEYS if isinstance(d.get(k), str) and d[k]), None)
    if output is None:
        output = _text_content(result) or None
    stderr = next((d[k] for k in _ERR_KEYS if isinstance(d.get(k), str) and d[k]), None)
    status = d.get("status")
    if status is None and exit_code is None and output is None and stderr is None:
        return result  # not a shape we know: hash it whole rather than guess
    # A tuple, not a dict: it hashes in half the time (no key encoding and sorting) and the
    # fields are always these five in this order.
    return (
        status if isinstance(status, (str, int, bool)) else None,
        exit_code if isinstance(exit_code, (int, str)) else None,
        bool(d.get("timedOut") or d.get("timed_out")),
        output,
        stderr,
    )


def _is_delivery_object(d: dict) -> bool:
    # A message object's own `id` is its fresh per-send id; a bare `id` elsewhere (a route or
    # conversation) is a stable fact and stays (docs/guard.md, Result hashing).
    return (
        isinstance(d.get("id"), str)
        and isinstance(d.get("text"), str)
        and (
            isinstance(d.get("direction"), str)
            or isinstance(d.get("senderId"), str)
            or isinstance(d.get("accountId"), str)
            or isinstance(d.get("conversation"), dict)
        )
    )


def _collect_scalars(v: Any, out: set, depth: int = 0) -> None:
    if isinstance(v, str):
        if len(v) >= 4:
            out.add(v)
    elif isinstance(v, int) and not isinstance(v, bool):
        if abs(v) >= 1000:
            out.add(str(v))
    elif depth >= MAX_DEPTH:
        return  # deeper (or cyclic) removed values: what is collected so far is what counts
    elif isinstance(v, dict):
        for x in v.values():
            _collect_scalars(x, out, depth + 1)
    elif isinstance(v, (list, tuple)):
        for x in v:
            _collect_scalars(x, out, depth + 1)


def _strip_send(v: Any, keys: frozenset, removed: set, depth: int = 0) -> Any:
    # Past MAX_DEPTH containers (or round a cycle) the value is kept as it is: hashing it then
    # raises its ValueError naming the path, as for any value nested too deep.
    if depth >= MAX_DEPTH:
        return v
    if isinstance(v, dict):
        drop_id = _is_delivery_object(v)
        out = {}
        for k, x in v.items():
            if k in keys or (drop_id and k == "id"):
                _collect_scalars(x, removed, depth + 1)
                continue
            out[k] = _strip_send(x, keys, removed, depth + 1)
        return out
    if isinstance(v, (list, tuple)):
        return [_strip_send(x, keys, removed, depth + 1) for x in v]
    return v


def _scrub_text(v: Any, removed: tuple, depth: int = 0) -> Any:
    # Text that restates a stripped id ("sent message 4711") would defeat the strip.
    if isinstance(v, str):
        for r in removed:
            if r in v:
                v = v.replace(r, "\x00id\x00")
        return v
    if depth >= MAX_DEPTH:
        return v
    if isinstance(v, dict):
        return {k: _scrub_text(x, removed, depth + 1) for k, x in v.items()}
    if isinstance(v, list):
        return [_scrub_text(x, removed, depth + 1) for x in v]
    return v


#: The most containers a send-like result may hold, counted as the strip walks them (a shared
#: sub-object counts each time it is reached): two references to itself would take
#: 2**MAX_DEPTH steps otherwise.
MAX_SEND_NODES = 100_000


def _check_send_size(v: Any) -> None:
    stack = [(v, 0)]
    seen = 0
    while stack:
        x, depth = stack.pop()
        if depth >= MAX_DEPTH:
            continue
        if isinstance(x, dict):
            items: Any = x.values()
        elif isinstance(x, (list, tuple)):
            items = x
        else:
            continue
        seen += 1
        if seen > MAX_SEND_NODES:
            raise ValueError(
                f"send-like result holds more than {MAX_SEND_NODES} nested containers "
                "(shared or self-referential references); it cannot be stripped"
            )
        for y in items:
            if isinstance(y, (dict, list, tuple)):
                stack.append((y, depth + 1))


def strip_send_result(result: Any, volatile_keys: frozenset) -> Any:
    """A send-like result without its per-call volatile ids (keys, delivery-object ids, and the
    text that restates them); structured ``details`` stand for the whole result when present.

    Containers nested deeper than MAX_DEPTH (or a cycle) are left as they are, so hashing the
    projection raises the hash's ValueError for them; this function itself never recurses
    without bound. Raises ValueError when the result holds more than MAX_SEND_NODES containers
    as the walk counts them (see _check_send_size)."""
    if isinstance(result, dict) and isinstance(result.get("details"), dict):
        result = result["details"]
    _check_send_size(result)
    removed: set = set()
    stripped = _strip_send(result, volatile_keys, removed)
    # Whether any text restates a stripped id does not depend on their order: sort (longest
    # first, so a longer id is not half-replaced by a shorter one) only when something does.
    if removed and _mentions(stripped, tuple(removed)):
        stripped = _scrub_text(stripped, tuple(sorted(removed, key=lambda r: (-len(r), r))))
    return stripped


def _mentions(v: Any, removed: tuple, depth: int = 0) -> bool:
    # Most results never restate a stripped id: find that out without rebuilding anything.
    if isinstance(v, str):
        return any(r in v for r in removed)
    if depth >= MAX_DEPTH:
        return False
    if isinstance(v, dict):
        return any(_mentions(x, removed, depth + 1) for x in v.values())
    if isinstance(v, list):
        return any(_mentions(x, removed, depth + 1) for x in v)
    return False


_I64 = (-(1 << 63), 1 << 63)
_U64 = (0, 1 << 64)
_I32 = (-(1 << 31), 1 << 31)
_U8 = (0, 256)


def _ranged(x: Any, bounds: tuple[int, int] | None) -> int:
    # An int (bool included, as C converts it) within *bounds*, else TypeError/ValueError.
    if not isinstance(x, int):
        raise TypeError(f"expected an int, got {type(x).__name__}")
    if bounds is not None and not bounds[0] <= x < bounds[1]:
        raise ValueError(f"value {x} out of range")
    return int(x)


class State:
    """One session's guard state (ring of recent calls, budget counters, last answer)."""

    __slots__ = (
        "tool",
        "args",
        "res",
        "flags",
        "kind",
        "tgt",
        "cid",
        "seq",
        "budget",
        "n_steps",
        "veto_tool",
        "veto_args",
        "out_count",
        "out_of_step",
        "out_aux",
        "out_aux2",
        "touched",
        "extra",
        "cap",
    )

    def __init__(self, n_budget: int, cap: int = 0) -> None:
        self.cap = cap  # the window of the engine that made it
        self.tool: list[int] = []
        self.args: list[int] = []
        self.res: list[int] = []
        self.flags: list[int] = []
        self.kind: list[int] = []
        self.tgt: list[int] = []
        self.cid: list[int] = []
        self.seq: list[int] = []
        self.budget = [0] * n_budget
        self.n_steps = 0
        self.veto_tool = 0
        self.veto_args = 0
        self.out_count = 0
        self.out_of_step = -1
        self.out_aux = 0
        self.out_aux2 = 0
        self.touched = 0.0  # wrapper-owned: last access (monotonic seconds)
        self.extra: dict[Any, int] | None = None  # wrapper-owned: warning buckets

    def __len__(self) -> int:
        return len(self.tool)


class Engine:
    """The per-call detector logic over integer-encoded session state (see the module doc)."""

    __slots__ = ("p", "bwarn", "bblock", "window")

    def __init__(
        self, params: Mapping[str, int], budget_warn: Sequence[int], budget_block: Sequence[int]
    ) -> None:
        if not isinstance(params, Mapping):
            raise ValueError("engine parameters must be a mapping of PARAM_NAMES to ints")
        if len(budget_warn) != len(budget_block):
            raise ValueError("budget_warn and budget_block differ in length")
        self.p = Params(params)
        if self.p.window < 1:
            raise ValueError("window must be positive")
        self.window = self.p.window
        self.bwarn = tuple(int(x) for x in budget_warn)
        self.bblock = tuple(int(x) for x in budget_block)

    def new_state(self) -> State:
        """A fresh, empty session state."""
        return State(len(self.bwarn), self.window)

    def fits(self, st: State) -> None:
        """ValueError unless *st* was made by an engine of this window and budget count."""
        if st.cap != self.window or len(st.budget) != len(self.bwarn):
            raise ValueError(
                f"state of another size: {st.cap} slots and {len(st.budget)} budget counters, "
                f"this engine has {self.window} and {len(self.bwarn)}"
            )

    # -- hot path ---------------------------------------------------------------------------

    def _push(
        self, st: State, tool: int, args: int, res: int, flags: int, kind: int, tgt: int, cid: int
    ) -> None:
        st.tool.append(tool)
        st.args.append(args)
        st.res.append(res)
        st.flags.append(flags)
        st.kind.append(kind)
        st.tgt.append(tgt)
        st.cid.append(cid)
        st.seq.append(st.n_steps)
        st.n_steps += 1
        if len(st.tool) > self.window:
            for col in (st.tool, st.args, st.res, st.flags, st.kind, st.tgt, st.cid, st.seq):
                del col[0]

    def check(
        self,
        st: State,
        tool: int,
        args: int,
        kind: int,
        target: int,
        cid: int,
        poll: int,
        unknown: int,
        bslot: int,
    ) -> int:
        """Decide on a call before it runs; push it into the ring unless blocked.

        Raises ValueError for a State made by an engine of another window or budget count."""
        if st.cap != self.window or len(st.budget) != len(self.bwarn):
            self.fits(st)
        p = self.p
        T, A, R, F, K, G, S = st.tool, st.args, st.res, st.flags, st.kind, st.tgt, st.seq
        n = len(T)
        st.veto_tool = 0
        block = warn = 0
        b_count = w_count = 0
        b_of = w_of = -1
        b_aux = w_aux = b_aux2 = w_aux2 = 0

        if kind >= USER:
            return self._event(st, tool, args, kind)

        bcount = 0
        if bslot >= 0:
            st.budget[bslot] += 1
            bcount = st.budget[bslot]

        # unknown_tool: newest consecutive calls of this tool that turned out not to exist
        if p.unknown_block:
            s = 0
            for i in range(n - 1, -1, -1):
                if T[i] != tool or not F[i] & F_UNKNOWN:
                    break
                s += 1
            if s >= p.unknown_block:
                block, b_count, b_of = D_UNKNOWN, s, S[n - 1]

        # identical-call streaks over calls with an outcome (other calls are skipped)
        np_ = 0
        np_res = 0
        np_of = -1
        np_done = False
        es = 0
        es_res = 0
        es_done = False
        rc = 0
        rc_of = -1
        for i in range(n - 1, -1, -1):
            if T[i] != tool or A[i] != args:
                if K[i] == USER:
                    break
                continue
            rc += 1
            if rc_of < 0:
                rc_of = S[i]
            if not F[i] & F_HAS:
                continue
            if not np_done:
                if np_ == 0:
                    np_res, np_, np_of = R[i], 1, S[i]
                elif R[i] == np_res:
                    np_ += 1
                else:
                    np_done = True
            if not es_done:
                if not F[i] & F_ERROR:
                    es_done = True
                elif es == 0:
                    es, es_res = 1, R[i]
                elif R[i] == es_res or p.error_any_text:
                    es += 1
                else:
                    es_done = True

        if not block and p.global_block and np_ >= p.global_block:
            block, b_count, b_of, b_aux2 = D_GLOBAL, np_, np_of, np_res
        if not block and p.argument_churn and p.global_block and n >= p.global_block:
            m, variants, of = self._churn(st, tool)
            if m >= p.global_block:
                block, b_count, b_of, b_aux = D_GLOBAL, m, of, variants

        if not block and p.compaction_window and n >= p.compaction_window:
            c = self._after_compaction(st, tool, args)
            if c:
                block, b_count, b_of = D_COMPACTION, c, S[n - 1]

        if poll:
            if not block and p.poll_block and np_ >= p.poll_block:
                block, b_count, b_of, b_aux2 = D_POLL, np_, np_of, np_res
            if not warn and p.poll_warn and np_ >= p.poll_warn:
                warn, w_count, w_of, w_aux2 = D_POLL, np_, np_of, np_res

        # cycle of period 2..5 (distinct calls) ending with the checked call
        if p.cycle_periods_mask:
            best_c = best_k = 0
            best_ev = False
            for k in (2, 3, 4, 5):
                if not p.cycle_periods_mask & (1 << k) or n < k:
                    continue
                # how far the period-k repetition reaches back (the call k back must equal this
                # one; most calls stop here, so this runs before the distinctness test below)
                t = 0
                q = n - k
                while q >= 0:
                    tq, aq = (tool, args) if q + k == n else (T[q + k], A[q + k])
                    if T[q] != tq or A[q] != aq:
                        break
                    t += 1
                    q -= 1
                if t == 0:
                    continue
                # the unit s[n-k+1..n] must be k distinct calls (so k is the minimal period),
                # none of them a user message: a cycle's evidence starts again after one, as
                # every streak's does (a person asking for the same check turn after turn is
                # not a loop of the agent's)
                distinct = True
                for a in range(n - k + 1, n + 1):
                    if a < n and K[a] == USER:
                        distinct = False
                        break
                    ta, aa = (tool, args) if a == n else (T[a], A[a])
                    for b in range(a + 1, n + 1):
                        tb, ab = (tool, args) if b == n else (T[b], A[b])
                        if ta == tb and aa == ab:
                            distinct = False
                            break
                    if not distinct:
                        break
                if not distinct:
                    continue
                L = t + k
                c = L // k if p.cycle_counts_repeats else L
                if c > best_c:
                    ev = True
                    lo = n - L + 1
                    if p.cycle_evidence_recent and p.cycle_block:
                        # the evidence is the newest calls that reach the block threshold only
                        need = p.cycle_block * k if p.cycle_counts_repeats else p.cycle_block
                        lo = max(lo, n - need + 1)
                    for q in range(lo, n):
                        if not F[q] & F_HAS or (q - k >= lo and R[q] != R[q - k]):
                            ev = False
                            break
                    best_c, best_k, best_ev = c, k, ev
            if best_c:
                combo = (args + best_k) & _MASK64
                for q in range(n - best_k + 1, n):
                    combo = (combo + A[q]) & _MASK64
                if (
                    not block
                    and p.cycle_block
                    and best_c >= p.cycle_block
                    and (best_ev or not p.cycle_block_needs_no_progress)
                ):
                    block, b_count, b_of, b_aux, b_aux2 = (
                        D_CYCLE,
                        best_c,
                        S[n - best_k],
                        T[n - 1],
                        combo,
                    )
                if not warn and p.cycle_warn and best_c >= p.cycle_warn:
                    warn, w_count, w_of, w_aux, w_aux2 = (
                        D_CYCLE,
                        best_c,
                        S[n - best_k],
                        T[n - 1],
                        combo,
                    )

        # the same call failing (before the consecutive count: a failure's streak is the better name)
        if es:
            if not block and p.error_block and es >= p.error_block:
                block, b_count, b_of, b_aux2 = D_ERROR, es, rc_of, es_res
            if not warn and p.error_warn and es >= p.error_warn:
                warn, w_count, w_of, w_aux2 = D_ERROR, es, rc_of, es_res

        # consecutive identical calls (period 1), counting the checked call; polls are judged
        # by poll_no_progress instead
        if (p.repeat_warn or p.repeat_block) and not poll:
            t = 0
            ev = True
            for i in range(n - 1, -1, -1):
                if T[i] != tool or A[i] != args or F[i] & F_BARRIER:
                    break
                # failures are no evidence here when error_streak judges them
                if (
                    not F[i] & F_HAS
                    or (t and R[i] != R[i + 1])
                    or (F[i] & F_ERROR and (p.error_warn or p.error_block))
                ):
                    ev = False
                t += 1
            if t:
                L = t + 1
                if (
                    not block
                    and p.repeat_block
                    and L >= p.repeat_block
                    and (ev or not p.repeat_block_needs_no_progress)
                ):
                    block, b_count, b_of = D_REPEAT, L, S[n - 1]
                if (
                    not warn
                    and p.repeat_warn
                    and L >= p.repeat_warn
                    and (ev or not p.repeat_warn_needs_no_progress)
                    and (L == p.repeat_warn or not p.repeat_warn_once)
                ):
                    warn, w_count, w_of = D_REPEAT, L, S[n - 1]

        # agent messages with no tool call between (identical ones, or any with p.monologue_any_text)
        if p.monologue_block and kind == ASK:
            t = 0
            for i in range(n - 1, -1, -1):
                if (
                    K[i] != ASK
                    or F[i] & F_BARRIER
                    or (not p.monologue_any_text and (T[i] != tool or A[i] != args))
                ):
                    break
                t += 1
            if p.monologue_any_text:
                t += 1
            if not block and t >= p.monologue_block:
                block, b_count, b_of = D_MONOLOGUE, t, S[n - 1] if n else -1

        if not poll:
            if not block and p.generic_block and np_ >= p.generic_block:
                block, b_count, b_of, b_aux2 = D_GENERIC, np_, np_of, np_res
            if not warn and p.generic_warn and rc >= p.generic_warn:
                warn, w_count, w_of = D_GENERIC, rc, rc_of

        if bcount:
            bb = self.bblock[bslot]
            bw = self.bwarn[bslot]
            if not block and bb and bcount >= bb:
                block, b_count = D_BUDGET, bcount
            if not warn and bw and bcount >= bw and (bcount == bw or not p.budget_warn_once):
                warn, w_count = D_BUDGET, bcount

        if p.redundant_warn and kind == OBSERVE and target and not warn:
            c = 0
            of = -1
            for i in range(n - 1, -1, -1):
                ki = K[i]
                if ki == EXEC or ki == USER or (ki == MUTATE and (G[i] == target or G[i] == 0)):
                    break
                if (
                    ki == OBSERVE
                    and G[i] == target
                    and T[i] == tool
                    and A[i] == args
                    and F[i] & F_HAS
                    and not F[i] & F_ERROR
                ):
                    c += 1
                    if of < 0:
                        of = S[i]
            if c >= p.redundant_warn:
                warn, w_count, w_of = D_REDUNDANT, c, of

        if block:
            st.veto_tool = tool
            st.veto_args = args
            st.out_count, st.out_of_step, st.out_aux, st.out_aux2 = b_count, b_of, b_aux, b_aux2
            if block == D_REPEAT and p.repeat_reset_after_block:
                F[n - 1] |= F_BARRIER  # the count starts again after this refusal
            return BLOCK << 4 | block
        self._push(st, tool, args, 0, F_UNKNOWN if unknown else 0, kind, target, cid)
        if warn:
            st.out_count, st.out_of_step, st.out_aux, st.out_aux2 = w_count, w_of, w_aux, w_aux2
            return WARN << 4 | warn
        return 0

    def _event(self, st: State, tool: int, args: int, kind: int) -> int:
        # A reported event (user message, compaction, condensation): a marker in the ring.
        p = self.p
        if kind == CONDENSATION and p.context_block:
            K = st.kind
            c = 1
            for i in range(len(K) - 1, -1, -1):
                if K[i] != CONDENSATION:
                    break
                c += 1
            if c >= p.context_block:
                st.veto_tool = 0
                st.out_count, st.out_of_step, st.out_aux, st.out_aux2 = (
                    c,
                    st.seq[-1] if st.seq else -1,
                    0,
                    0,
                )
                return BLOCK << 4 | D_CONTEXT
        st.veto_tool = 0
        self._push(st, tool, args, 0, F_HAS, kind, 0, 0)
        return 0

    def _churn(self, st: State, tool: int) -> tuple[int, int, int]:
        # (calls of *tool* with an outcome, stable variants, step of the newest) when they are
        # argument churn: 2-3 variants of >= CHURN_MIN_CALLS calls each with one outcome, and
        # other calls at most 1 in 10; else (0, 0, -1).
        T, A, R, F, K, S = st.tool, st.args, st.res, st.flags, st.kind, st.seq
        groups: dict[int, list] = {}
        m = 0
        of = -1
        for i in range(len(T) - 1, -1, -1):
            if K[i] == USER:
                break
            if T[i] != tool or not F[i] & F_HAS:
                continue
            m += 1
            if of < 0:
                of = S[i]
            g = groups.get(A[i])
            if g is None:
                groups[A[i]] = [R[i], 1, True]
            else:
                g[1] += 1
                if R[i] != g[0]:
                    g[2] = False
        stable = [g[1] for g in groups.values() if g[2] and g[1] >= CHURN_MIN_CALLS]
        if 2 <= len(stable) <= 3 and (m - sum(stable)) * 10 <= m:
            return m, len(stable), of
        return 0, 0, -1

    def _after_compaction(self, st: State, tool: int, args: int) -> int:
        # The first p.compaction_window calls after the newest compaction marker, when they are exactly p.compaction_window
        # and all this call with one outcome: p.compaction_window; else 0.
        w = self.p.compaction_window
        T, A, R, F, K = st.tool, st.args, st.res, st.flags, st.kind
        n = len(T)
        for i in range(n - 1, max(-1, n - w - 2), -1):
            if K[i] == COMPACTION:
                if n - 1 - i != w:
                    return 0
                for q in range(i + 1, n):
                    if T[q] != tool or A[q] != args or not F[q] & F_HAS or R[q] != R[i + 1]:
                        return 0
                return w
        return 0

    def record(
        self,
        st: State,
        tool: int,
        args: int,
        result: int,
        flags: int,
        kind: int,
        target: int,
        cid: int,
        bslot: int,
        veto: int,
    ) -> int:
        """Attach an outcome: 0 ignored (a guard veto), 1 attached to a pending call, 2 appended.

        *veto* is 1 for the guard's own veto (always ignored), 2 for a result that looks like
        its block message (ignored only right after blocking this very call), else 0.
        """
        if st.cap != self.window or len(st.budget) != len(self.bwarn):
            self.fits(st)
        if veto == 1 or (
            veto == 2 and st.veto_tool and st.veto_tool == tool and st.veto_args == args
        ):
            # the guard's own block is not an outcome: hashing it would reset the streak (C8)
            st.veto_tool = 0
            return 0
        st.veto_tool = 0
        T, A, F, C = st.tool, st.args, st.flags, st.cid
        for i in range(len(T) - 1, -1, -1):
            if (
                T[i] == tool
                and A[i] == args
                and not F[i] & F_HAS
                and (not cid or not C[i] or C[i] == cid)
            ):
                st.res[i] = result
                F[i] |= flags | F_HAS
                if i < len(T) - 1 and st.kind[-1] == ASK:
                    # an outcome arriving after agent messages: they are no longer one monologue
                    F[-1] |= F_BARRIER
                return 1
        # Budgets count check() attempts only: an outcome whose call left the window (many
        # concurrent calls in one session) must not count that call twice.
        self._push(st, tool, args, result, flags | F_HAS, kind, target, cid)
        return 2

    # -- persistence ------------------------------------------------------------------------

    def dump(self, st: State) -> list[int]:
        """The state as a flat list of ints (same layout in both twins); load() inverts it."""
        out = [DUMP_VERSION, st.n_steps, st.veto_tool, st.veto_args, len(st.budget)]
        out.extend(st.budget)
        n = len(st.tool)
        out.append(n)
        for i in range(n):
            out.extend(
                (
                    st.tool[i],
                    st.args[i],
                    st.res[i],
                    st.flags[i],
                    kind_to_stored(st.kind[i]),
                    st.tgt[i],
                    st.cid[i],
                    st.seq[i],
                )
            )
        return out

    def load(self, data: Sequence[int]) -> State:  # noqa: C901 - one check per field
        """Rebuild a state from dump(); ValueError when the data does not fit this engine."""
        if not isinstance(data, (list, tuple)):
            raise ValueError(f"state dump must be a list of ints, not {type(data).__name__}")
        try:
            if len(data) < 6:
                raise ValueError(f"state dump is too short ({len(data)} values)")
            if data[0] != DUMP_VERSION:
                raise ValueError(f"state dump version {data[0]} is not {DUMP_VERSION}")
            nb = data[4]
            nb = _ranged(nb, _I32)
            if nb != len(self.bwarn):
                raise ValueError(
                    f"state has {nb} budget counters, this policy has {len(self.bwarn)}"
                )
            if len(data) < 6 + nb:
                raise ValueError("state dump is too short for its budget counters")
            st = State(nb, self.window)
            # the ranges the compiled twin's C fields take (a value outside is a ValueError there)
            st.n_steps = _ranged(data[1], _I64)
            st.veto_tool, st.veto_args = _ranged(data[2], _U64), _ranged(data[3], _U64)
            st.budget = [_ranged(x, _I64) for x in data[5 : 5 + nb]]
            pos = 5 + nb
            n = _ranged(data[pos], _I32)
            pos += 1
            if n < 0 or len(data) != pos + 8 * n:
                raise ValueError("state dump length does not match its entry count")
            start = max(0, n - self.window)
            for i in range(start, n):
                e = data[pos + 8 * i : pos + 8 * i + 8]
                st.tool.append(_ranged(e[0], None) & _MASK64)
                st.args.append(_ranged(e[1], None) & _MASK64)
                st.res.append(_ranged(e[2], None) & _MASK64)
                st.flags.append(_ranged(e[3], _U8))
                st.kind.append(kind_from_stored(_ranged(e[4], _U8)))
                st.tgt.append(_ranged(e[5], None) & _MASK64)
                st.cid.append(_ranged(e[6], None) & _MASK64)
                st.seq.append(_ranged(e[7], _I64))
        except (IndexError, TypeError) as exc:
            raise ValueError(f"state dump is malformed: {exc}") from None
        return st

    def nbytes(self, st: State) -> int:
        """Approximate bytes held by *st* (the ring and counters; Python object overhead included)."""
        import sys

        total = sys.getsizeof(st) + sys.getsizeof(st.budget) + 28 * len(st.budget)
        for col in (st.tool, st.args, st.res, st.flags, st.kind, st.tgt, st.cid, st.seq):
            total += sys.getsizeof(col) + sum(sys.getsizeof(x) for x in col if x > 256 or x < -5)
        return total


class ToolInfo:
    """What the fast path needs to know about one tool name (registered by the Guard)."""

    __slots__ = ("tid", "bslot", "poll", "poll_actions", "unknown", "exec", "send", "send_actions")

    def __init__(
        self,
        tid: int,
        bslot: int,
        poll: bool,
        poll_actions,
        unknown: bool,
        exec_: bool,
        send: bool,
        send_actions,
    ) -> None:
        self.tid = tid
        self.bslot = bslot
        self.poll = bool(poll)
        self.poll_actions = poll_actions
        self.unknown = bool(unknown)
        self.exec = bool(exec_)
        self.send = bool(send)
        self.send_actions = send_actions


class Table:
    """The guard's sessions: ``(session, run_id) -> State`` with an LRU cap and an idle TTL,
    and the guard's answers: the engine's code made a Decision, its event bucket looked up.

    ``check``/``record`` look the session up (creating, expiring and evicting as needed) and
    run the engine in one step under one lock, so concurrent callers never lose a count.
    ``check`` returns *allow* or a warn/block *decision*: its message renders from the facts it
    was built with (``_why``: *policy*, the tool, the pattern hash and, for a cycle, the paired
    tool's name from ``names``; see loopcore.decision). A warning or block is announced through
    ``emit(session, run_id, tool, decision)`` once per bucket of ``policy.event_bucket``
    counts and pattern (OpenClaw's warning buckets), outside the lock.
    """

    def __init__(
        self,
        engine: Engine,
        policy,
        max_sessions: int,
        ttl: float,
        clock=None,
        hash_fn=None,
        decision=None,
        allow=None,
        det_names: Sequence[str | None] = (),
        emit=None,
    ) -> None:
        import threading
        import time
        from collections import OrderedDict

        if max_sessions < 1:
            raise ValueError("max_sessions must be positive")
        if policy.event_bucket < 1:
            raise ValueError("event bucket size must be positive")
        self.engine = engine
        self.policy = policy
        self.max_sessions = int(max_sessions)
        self.ttl = float(ttl)  # 0: never expire
        self.clock = clock if clock is not None else time.monotonic
        self.sessions: OrderedDict = OrderedDict()
        self.runs: dict = {}
        self.lock = threading.Lock()
        self.tools: dict = {}
        self.names: dict[int, str] = {}  # tool id -> name (a cycle's message names its pair)
        self.hash_fn = hash_fn
        self.decision = decision
        self.veto_type = decision if decision is not None else ()
        self.allow = allow
        self.det_names = tuple(det_names)
        self.emit = emit
        self.bucket_size = int(policy.event_bucket)
        self.volatile_keys = frozenset(policy.volatile_keys)
        self.ignored_args = frozenset(policy.ignored_args) or None
        self.last: tuple = (None, 0)
        self.ops = 0
        self.checks = self.warns = self.blocks = self.records = self.tokens = self.evicted = 0

    def _get(self, session, run_id) -> State:
        key = (session, run_id)
        sessions = self.sessions
        st = sessions.get(key)
        now = self.clock()
        ttl = self.ttl
        if st is None or (ttl > 0 and now - st.touched > ttl):
            st = self.engine.new_state()
            sessions[key] = st
            sessions.move_to_end(key)
            if run_id is not None:
                self.runs.setdefault(session, set()).add(run_id)
            while len(sessions) > self.max_sessions:
                self._evict()
        else:
            sessions.move_to_end(key)
        st.touched = now
        self.ops += 1
        if ttl > 0 and not self.ops & 1023:
            self._sweep(now)
        return st

    def _evict(self) -> None:
        (session, run_id), _ = self.sessions.popitem(last=False)
        self.evicted += 1
        if run_id is not None:
            runs = self.runs.get(session)
            if runs is not None:
                runs.discard(run_id)
                if not runs:
                    del self.runs[session]

    def _sweep(self, now: float) -> None:
        # The OrderedDict is in access order, so the idle sessions are at the front.
        limit = now - self.ttl
        sessions = self.sessions
        while sessions and next(iter(sessions.values())).touched < limit:
            self._evict()

    def check(
        self,
        session,
        run_id,
        name: str,
        tool: int,
        args: int,
        kind: int,
        target: int,
        cid: int,
        poll: int,
        unknown: int,
        bslot: int,
    ):
        """Look up the session and run Engine.check on the call of tool *name* (id *tool*);
        *allow* or a warn/block decision (its event emitted when it crosses a bucket)."""
        with self.lock:
            st = self._get(session, run_id)
            code = self.engine.check(st, tool, args, kind, target, cid, poll, unknown, bslot)
            self.checks += 1
            if not code:
                return self.allow
            if code >> 4 == BLOCK:
                self.blocks += 1
            else:
                self.warns += 1
            d, crossed = self._decide(code, st, name, tool, args)
        if crossed and self.emit is not None:
            self.emit(session, run_id, name, d)
        return d

    def _decide(self, code: int, st: State, name: str, tool: int, args: int) -> tuple:
        # (the decision, whether it crossed into a new event bucket); under the lock
        det = code & 15
        aux, aux2 = st.out_aux, st.out_aux2
        why: tuple[Any, str, int, str | int | None]
        if det == D_CYCLE:
            why = (self.policy, name, aux2, self.names.get(aux, "another tool"))
            dk = (code, 0, aux2)
        else:
            # the global breaker's aux is the number of argument variants when it counted churn
            why = (self.policy, name, args, aux if det == D_GLOBAL and aux else None)
            dk = (code, tool, 0 if det == D_BUDGET else args)
        d = object.__new__(self.decision)
        d.action = "block" if code >> 4 == BLOCK else "warn"
        d.detector = self.det_names[det]
        d.count = st.out_count
        d.of_step = st.out_of_step if st.out_of_step >= 0 else None
        d._message = None
        d._key = None
        d._why = why
        bucket = st.out_count // self.bucket_size
        buckets = st.extra
        if buckets is None:
            buckets = st.extra = {}
        last = buckets.get(dk)
        if last is not None and bucket <= last:
            return d, False
        buckets.pop(dk, None)
        buckets[dk] = bucket
        if len(buckets) > MAX_EVENT_KEYS:
            del buckets[next(iter(buckets))]
        return d, True

    def record(
        self,
        session,
        run_id,
        tool: int,
        args: int,
        result: int,
        flags: int,
        kind: int,
        target: int,
        cid: int,
        bslot: int,
        veto: int,
        tokens: int,
    ) -> int:
        """Look up the session and run Engine.record."""
        with self.lock:
            st = self._get(session, run_id)
            self.records += 1
            # saturating at 2**63 - 1, as the compiled twin's int64 counter does
            self.tokens = min(self.tokens + tokens, (1 << 63) - 1)
            return self.engine.record(st, tool, args, result, flags, kind, target, cid, bslot, veto)

    def _hash(self, value) -> int:
        try:
            return self.hash_fn(value)
        except TypeError:
            return self.hash_fn(value, default=repr)

    def args_hash(self, args) -> int:
        """The hash of a call's *args* as the detectors compare them: a dict's top-level keys
        in ``policy.ignored_args`` are left out (cline's task_progress)."""
        ign = self.ignored_args
        if ign is not None and type(args) is dict and not ign.isdisjoint(args):
            args = {k: v for k, v in args.items() if k not in ign}
        return self._hash(args)

    def remember(self, args, ah: int) -> None:
        """Note that *args* (this very object) was checked with hash *ah*."""
        self.last = (args, ah)

    def hash_checked(self, args) -> int:
        """The hash *args* was checked with when it is the last checked object, else a fresh one."""
        last_args, last_ah = self.last
        if args is last_args and args is not None:
            return last_ah
        return self.args_hash(args)

    def buckets(self, st: State) -> list:
        """[(bucket key, last bucket)] of *st*'s announced events, oldest first (a copy)."""
        with self.lock:
            return list(st.extra.items()) if st.extra else []

    def veto(self, result) -> int:
        """block_veto(result) with this table's Decision class."""
        return block_veto(result, self.veto_type)

    def register(self, name: str, info: ToolInfo) -> None:
        """Make *name* known to the fast paths (the registry is a cache: clear_tools() may drop it)."""
        self.tools[name] = info
        self.names[info.tid] = name

    def clear_tools(self) -> None:
        """Forget every registered tool (they are registered again on their next call)."""
        self.tools.clear()
        self.names.clear()

    def fast_check(self, session, tool, args, run_id, call_id=None):
        """check() for a registered tool without kind/target/call id: hashes *args* itself.

        Returns None when the tool is not registered (the caller takes the full path), else
        what ``check`` returns."""
        t = self.tools.get(tool)
        if t is None:
            return None
        ah = self.args_hash(args)
        # record() usually follows with the very same args object: remember its hash (a strong
        # reference, so the identity cannot be reused by another object).
        self.last = (args, ah)
        poll = t.poll
        if not poll and t.poll_actions is not None and isinstance(args, dict):
            poll = args.get("action") in t.poll_actions
        cid = 0 if call_id is None else (self._hash(call_id) or 1)
        return self.check(session, run_id, tool, t.tid, ah, OTHER, 0, cid, poll, t.unknown, t.bslot)

    def fast_record(self, session, tool, args, result, run_id, tokens: int, call_id=None):
        """record() for a registered tool and an ordinary result: hashes args and the outcome.

        Returns None when it cannot (unregistered tool, a veto-shaped result)."""
        t = self.tools.get(tool)
        if t is None:
            return None
        veto = block_veto(result, self.veto_type)
        if veto == 2:
            return None  # the block message as the tool's output: Guard.record decides on it
        last_args, last_ah = self.last
        ah = (
            last_ah if args is last_args and args is not None else self.args_hash(args)
        )  # the call as checked
        rh = 0 if veto else self._hash(self.outcome(t, args, result))
        cid = 0 if call_id is None else (self._hash(call_id) or 1)
        flags = F_UNKNOWN if t.unknown and not veto else 0
        return self.record(
            session, run_id, t.tid, ah, rh, flags, OTHER, 0, cid, t.bslot, veto, tokens
        )

    def send_hash(self, result) -> int:
        """The hash record() gives a send-like *result*: its stripped copy, hashed."""
        return self._hash(strip_send_result(result, self.volatile_keys))

    def outcome(self, t: ToolInfo, args, result):
        """The value hashed as *result*'s outcome: exec/poll results projected, send-like stripped."""
        if t.exec or (
            t.poll_actions is not None
            and isinstance(args, dict)
            and args.get("action") in t.poll_actions
        ):
            return project_exec(result)
        if t.send or (
            t.send_actions is not None
            and isinstance(args, dict)
            and args.get("action") in t.send_actions
        ):
            return strip_send_result(result, self.volatile_keys)
        return result

    def drop(self, session) -> None:
        """Remove every state of *session* (all run ids)."""
        with self.lock:
            self.sessions.pop((session, None), None)
            for run_id in self.runs.pop(session, ()):
                self.sessions.pop((session, run_id), None)

    def get(self, session, run_id):
        """The state of (session, run_id) or None; does not touch the LRU order."""
        return self.sessions.get((session, run_id))

    def put(self, session, run_id, st: State) -> None:
        """Insert a restored state as the most recently used (evicting beyond the cap);
        ValueError for a state of another engine's size."""
        self.engine.fits(st)
        with self.lock:
            self.sessions[(session, run_id)] = st
            self.sessions.move_to_end((session, run_id))
            if run_id is not None:
                self.runs.setdefault(session, set()).add(run_id)
            while len(self.sessions) > self.max_sessions:
                self._evict()

    def items(self) -> list:
        """[((session, run_id), state)] least recently used first."""
        with self.lock:
            return list(self.sessions.items())

    def has_session(self, session) -> bool:
        """True when *session* has state under any run id."""
        return (session, None) in self.sessions or session in self.runs

    def now(self) -> float:
        """The table's clock."""
        return self.clock()

    def counters(self) -> dict:
        """checks, warns, blocks, records, tokens, evicted, sessions."""
        with self.lock:
            return {
                "checks": self.checks,
                "warns": self.warns,
                "blocks": self.blocks,
                "records": self.records,
                "tokens": self.tokens,
                "evicted": self.evicted,
                "sessions": len(self.sessions),
            }

    def set_counters(self, counts: dict) -> None:
        """Restore counters saved by counters() (unknown names are ignored)."""
        with self.lock:
            for k in ("checks", "warns", "blocks", "records", "tokens", "evicted"):
                if k in counts:
                    v = int(counts[k])
                    if not -(1 << 63) <= v < (1 << 63):  # the compiled twin's int64 counters
                        raise OverflowError(f"counter {k} out of range: {v}")
                    setattr(self, k, v)

    def __len__(self) -> int:
        return len(self.sessions)


def block_veto(result: Any, veto_type) -> int:
    """1 when *result* is the guard's own block (a block *veto_type* Decision, or OpenClaw's
    tool-loop denial), 2 when it is text starting with the block message's "BLOCKED:", else 0.

    The one place this twin recognises a block handed back as a call's result."""
    if isinstance(result, str):
        return 2 if result.startswith("BLOCKED:") else 0
    if isinstance(result, dict):
        d = result.get("details")
        d = d if isinstance(d, dict) else result
        return 1 if d.get("status") == "blocked" and d.get("deniedReason") == "tool-loop" else 0
    if veto_type and isinstance(result, veto_type):
        return 1 if result.action == "block" else 0
    return 0


def bind_fast(table, check, record):
    """None: in pure Python the Guard's own methods are already the fastest path."""
    return None
