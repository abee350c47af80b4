"""Compiled burn kernel (loopcore._native_burn): the twin of loopcore._burn_py, step for step.

Works only on integer columns of an EncodedTrace; the loop runs without the GIL. Scratch tables
hold global step indices, so an entry left by an earlier trace is older than the current trace's
first step and reads as "never seen": nothing is reset between traces. See loopcore.burn for the
rules and loopcore._burn_py for the readable twin of this exact loop.
"""
import numpy as np

from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t

__all__ = ["QUESTION_LOOP_MIN_TURNS", "analyse_columns"]

cdef enum:
    OBSERVE = 0
    MUTATE = 1
    EXEC = 2
    ASK = 3
    OTHER = 4

cdef enum:
    REDUNDANT = 1
    DUPLICATE = 2
    OSCILLATION = 3
    QUESTION = 4

QUESTION_LOOP_MIN_TURNS = 3
cdef int64_t _QMIN = 3


cdef struct Out:
    # raw pointers into the output arrays: memoryviews passed to helpers would cost an atomic
    # reference count per call in the hot loop
    int8_t* finding
    int32_t* of_step
    int64_t* wasted
    int64_t* bkt
    int64_t* bks
    const int64_t* tokens


cdef inline void _charge(Out* o, int64_t seg, int64_t i, int8_t code, int64_t j,
                         int64_t s0) noexcept nogil:
    o.finding[i] = code
    o.of_step[i] = <int32_t>(j - s0)
    o.wasted[seg] += o.tokens[i]
    o.bkt[seg * 4 + code - 1] += o.tokens[i]
    o.bks[seg * 4 + code - 1] += 1


cdef int _validate(const uint8_t[::1] kind, const int32_t[::1] target, const int32_t[::1] call,
                   const int32_t[::1] obs, const int32_t[::1] skey, const int32_t[::1] sval,
                   const int32_t[::1] edit, const int32_t[::1] undo, int64_t n_sets,
                   int64_t n_calls, int64_t n_obs, int64_t n_skeys, int64_t n_svals,
                   int64_t n_edits) noexcept nogil:
    # Out-of-range ids would index past the scratch tables: reject them before the loop.
    # An id in [-1, size) is exactly (uint32)(id + 1) <= size: branch-free OR reductions.
    cdef Py_ssize_t i, n = kind.shape[0]
    cdef uint32_t bk = 0, bt = 0, bc = 0, bo = 0, bs = 0, bv = 0, be = 0, bx = 0
    cdef uint32_t lt = <uint32_t>n_sets, lc = <uint32_t>n_calls, lo = <uint32_t>n_obs
    cdef uint32_t ls = <uint32_t>n_skeys, lv = <uint32_t>n_svals, le = <uint32_t>n_edits
    if n_sets > 0x7fffffff or n_calls > 0x7fffffff or n_obs > 0x7fffffff or n_skeys > 0x7fffffff \
            or n_svals > 0x7fffffff or n_edits > 0x7fffffff:
        return 9
    for i in range(n):
        bk |= kind[i] > OTHER
    for i in range(n):
        bt |= <uint32_t>(target[i] + 1) > lt
        bc |= <uint32_t>call[i] >= lc
        bo |= <uint32_t>(obs[i] + 1) > lo
    for i in range(n):
        bs |= <uint32_t>(skey[i] + 1) > ls
        bv |= <uint32_t>(sval[i] + 1) > lv
        be |= (<uint32_t>(edit[i] + 1) > le) | (<uint32_t>(undo[i] + 1) > le)
        # a state key and its state come together, and only on a step with targets
        bx |= ((skey[i] >= 0) ^ (sval[i] >= 0)) | ((skey[i] >= 0) & (target[i] < 0))
    if bk:
        return 1
    if bt:
        return 2
    if bc:
        return 3
    if bo:
        return 4
    if bs:
        return 5
    if bv:
        return 6
    if be:
        return 7
    if bx:
        return 8
    return 0


_INVALID = {
    1: "kind holds a code outside 0..4",
    2: "column target holds an id outside [-1, n_target_sets)",
    3: "column call holds an id outside [0, n_calls)",
    4: "column obs holds an id outside [-1, n_obs)",
    5: "column skey holds an id outside [-1, n_skeys)",
    6: "column sval holds an id outside [-1, n_svals)",
    7: "column edit or undo holds an id outside [-1, n_edits)",
    8: "skey and sval must be both set or both -1, and a state key needs a target set",
    9: "an id space is larger than int32 ids can address",
}


def analyse_columns(
    const uint8_t[::1] kind, const int64_t[::1] turn, const int64_t[::1] tokens,
    const uint8_t[::1] flags, const uint64_t[::1] result_hash, const int32_t[::1] target,
    const int64_t[::1] target_offsets, const int32_t[::1] target_members,
    const int32_t[::1] call, const int32_t[::1] obs, const int32_t[::1] skey,
    const int32_t[::1] sval, const int32_t[::1] edit, const int32_t[::1] undo,
    const int64_t[::1] trace_offsets, int64_t n_targets, int64_t n_calls, int64_t n_obs,
    int64_t n_skeys, int64_t n_svals, int64_t n_edits,
):
    """Charge every step of the encoded traces; returns (finding, of_step, total, wasted,
    by_kind_tokens, by_kind_steps) as numpy arrays (see EncodedAnalysis). Raises ValueError
    on inconsistent columns."""
    cdef Py_ssize_t n = kind.shape[0]
    cdef Py_ssize_t n_traces = trace_offsets.shape[0] - 1
    cdef Py_ssize_t n_sets = target_offsets.shape[0] - 1
    cdef Py_ssize_t c, m
    cdef int bad

    for name, col in (("turn", turn), ("tokens", tokens), ("flags", flags),
                      ("result_hash", result_hash), ("target", target), ("call", call),
                      ("obs", obs), ("skey", skey), ("sval", sval), ("edit", edit),
                      ("undo", undo)):
        if col.shape[0] != n:
            raise ValueError(f"column {name} has {col.shape[0]} rows; expected {n}")
    if n_traces < 0 or trace_offsets[0] != 0 or trace_offsets[n_traces] != n:
        raise ValueError("trace_offsets must start at 0 and end at the number of steps")
    for c in range(n_traces):
        if trace_offsets[c + 1] < trace_offsets[c]:
            raise ValueError("trace_offsets must be non-decreasing")
    if n_sets < 0 or target_offsets[0] != 0 or target_offsets[n_sets] != target_members.shape[0]:
        raise ValueError("target_offsets must start at 0 and end at len(target_members)")
    for c in range(n_sets):
        if target_offsets[c + 1] <= target_offsets[c]:
            raise ValueError("target_offsets must be increasing: every target set has a member")
    for m in range(target_members.shape[0]):
        if target_members[m] < 0 or target_members[m] >= n_targets:
            raise ValueError("target_members holds an id outside [0, n_targets)")
    with nogil:
        bad = _validate(kind, target, call, obs, skey, sval, edit, undo, n_sets,
                        n_calls, n_obs, n_skeys, n_svals, n_edits)
    if bad:
        raise ValueError(_INVALID[bad])

    if n > 0x7fffffff:
        # step indices live in int32 tables (half the cache footprint of int64)
        raise ValueError("at most 2**31 - 1 steps per call; analyse bigger encodings in parts")

    # every step writes its finding and of_step, so the outputs need no initialising pass
    finding_a = np.empty(n, dtype=np.int8)
    of_a = np.empty(n, dtype=np.int32)
    total_a = np.zeros(n_traces, dtype=np.int64)
    wasted_a = np.zeros(n_traces, dtype=np.int64)
    bkt_a = np.zeros((n_traces, 4), dtype=np.int64)
    bks_a = np.zeros((n_traces, 4), dtype=np.int64)
    if n == 0:
        return finding_a, of_a, total_a, wasted_a, bkt_a, bks_a
    # One scratch block of tables indexed by id, holding global step indices (see the module
    # doc). Every table but last_call has a slot in front of it, so id -1 ("none") indexes a
    # dummy: the loop writes unconditionally and reads without a branch, and only the decisions
    # look at whether an id is -1. last_mut's dummy is never written (mutations write real
    # members only), so a step without targets reads -1 there.
    scratch_a = np.full(n_targets + n_calls + n_obs + n_skeys + n_svals + n_edits + 5, -1,
                        dtype=np.int32)
    # per target set: its first member, -1 in a dummy slot for "no target"
    first_a = np.full(n_sets + 1, -1, dtype=np.int32)
    multi_a = np.zeros(n_sets + 1, dtype=np.uint8)

    cdef int8_t[::1] finding = finding_a
    cdef int32_t[::1] of_step = of_a
    cdef int64_t[::1] total = total_a
    cdef int64_t[::1] wasted = wasted_a
    cdef int64_t[:, ::1] bkt = bkt_a
    cdef int64_t[:, ::1] bks = bks_a
    cdef int32_t[::1] scratch = scratch_a
    cdef int32_t[::1] first_v = first_a
    cdef uint8_t[::1] multi_v = multi_a
    cdef Out o
    o.finding = &finding[0]
    o.of_step = &of_step[0]
    o.wasted = &wasted[0]
    o.bkt = &bkt[0, 0]
    o.bks = &bks[0, 0]
    o.tokens = &tokens[0]
    cdef const int64_t* toff = &target_offsets[0]
    cdef const int32_t* tmem = &target_members[0] if target_members.shape[0] else <const int32_t*>NULL
    cdef int32_t* set_first = &first_v[1]
    cdef uint8_t* set_multi = &multi_v[1]
    cdef int32_t* last_mut = &scratch[1]  # latest mutation of this target
    cdef int32_t* last_call = last_mut + n_targets  # latest step with this call id
    cdef int32_t* last_obs = last_call + n_calls + 1  # latest observe with this obs id
    cdef int32_t* last_state = last_obs + n_obs + 1  # latest state id seen under this skey
    cdef int32_t* last_sval = last_state + n_skeys + 1  # latest step that showed this state
    cdef int32_t* last_edit = last_sval + n_svals + 1  # latest error-free edit with this id

    # raw pointers: memoryview structs live on the stack and cost a reload per access
    cdef const uint8_t* kind_p = &kind[0]
    cdef const int64_t* turn_p = &turn[0]
    cdef const int64_t* tokens_p = &tokens[0]
    cdef const uint8_t* flags_p = &flags[0]
    cdef const uint64_t* result_p = &result_hash[0]
    cdef const int32_t* target_p = &target[0]
    cdef const int32_t* call_p = &call[0]
    cdef const int32_t* obs_p = &obs[0]
    cdef const int32_t* skey_p = &skey[0]
    cdef const int32_t* sval_p = &sval[0]
    cdef const int32_t* edit_p = &edit[0]
    cdef const int32_t* undo_p = &undo[0]
    cdef const int8_t* finding_p = &finding[0]

    cdef Py_ssize_t seg, i, k2
    cdef int64_t sel, s0, s1, j, jo, js, je, jc, last_global, last_any, seg_total, mut_t, horizon
    cdef int64_t g_start, g_end, g_last_ask, run_len, run_g1_last, run_g2_start, run_g2_end
    cdef int64_t t, n_ask
    cdef int64_t run_g2_last, prev_last
    cdef bint g_ask, g_work, same_outcome
    cdef uint8_t k
    cdef int8_t code
    cdef int32_t ts, u, sk, sv, ob, cl, ed, i32

    with nogil:
        for c in range(n_sets):
            set_first[c] = tmem[toff[c]]
            set_multi[c] = toff[c + 1] - toff[c] > 1
        for seg in range(n_traces):
            s0 = trace_offsets[seg]
            s1 = trace_offsets[seg + 1]
            last_global = -1  # latest exec or target-less mutation
            last_any = -1  # latest mutation of anything
            seg_total = 0
            n_ask = 0
            for i in range(s0, s1):
                k = kind_p[i]
                ts = target_p[i]
                cl = call_p[i]
                ob = obs_p[i]
                sk = skey_p[i]
                sv = sval_p[i]
                u = undo_p[i]
                ed = edit_p[i]
                seg_total += tokens_p[i]
                n_ask += k == ASK

                # the latest mutation this step depends on: of its targets, or of anything
                mut_t = last_mut[set_first[ts]]
                if set_multi[ts]:
                    for m in range(toff[ts] + 1, toff[ts + 1]):
                        mut_t = mut_t if mut_t > last_mut[tmem[m]] else last_mut[tmem[m]]
                # an exec, or a step without targets, depends on anything. Whether a step is one
                # is unpredictable, so select with a mask rather than a branch.
                horizon = last_global if last_global > mut_t else mut_t
                sel = -<int64_t>((k == EXEC) | (ts < 0))
                horizon = (last_any & sel) | (horizon & ~sel)

                je = last_edit[u]
                js = last_sval[sv]
                jo = last_obs[ob]
                jc = last_call[cl]
                code = 0
                j = -1
                if u >= 0 and je >= s0 and last_global < je:
                    # oscillation: an error-free edit that swaps an earlier edit's old/new
                    code = OSCILLATION
                    j = je
                elif (sk >= 0 and js >= s0 and last_global < js and mut_t > js
                        and last_state[sk] != sv):
                    # oscillation: content returns to a state seen before a different one
                    code = OSCILLATION
                    j = js
                elif ob >= 0 and jo >= s0 and horizon <= jo:
                    code = REDUNDANT
                    j = jo
                elif jc >= s0 and horizon <= jc:
                    # a repeat is waste only with the same outcome, where both have one
                    same_outcome = not ((flags_p[i] & flags_p[jc] & 1) and result_p[i] != result_p[jc])
                    if same_outcome:
                        code = DUPLICATE
                        j = jc
                if code:
                    _charge(&o, seg, i, code, j, s0)
                else:
                    o.finding[i] = 0
                    o.of_step[i] = -1

                # unconditional: an id of -1 writes its table's dummy slot
                i32 = <int32_t>i
                last_call[cl] = i32
                last_obs[ob] = i32
                last_state[sk] = sv
                last_sval[sv] = i32
                last_edit[ed] = i32
                if k == MUTATE and ts >= 0:
                    for m in range(toff[ts], toff[ts + 1]):
                        last_mut[tmem[m]] = i32
                last_any = i if (k == MUTATE or k == EXEC) else last_any
                last_global = i if (k == EXEC or (k == MUTATE and ts < 0)) else last_global
            total[seg] = seg_total

            # Question loops, in a second pass over the trace while it is hot in cache: it
            # charges only steps the pass above left uncharged, and keeps that loop lean. It
            # needs at least QUESTION_LOOP_MIN_TURNS asks to find anything.
            if n_ask < _QMIN:
                continue
            run_len = 0
            run_g1_last = -1
            run_g2_start = -1
            run_g2_end = -1
            run_g2_last = -1
            prev_last = -1
            g_start = s0
            while g_start < s1:
                # the turn group [g_start, g_end): scan it; once it did work, only find its end
                t = turn_p[g_start]
                g_end = g_start
                g_ask = False
                g_work = False
                g_last_ask = -1
                while g_end < s1 and turn_p[g_end] == t:
                    k = kind_p[g_end]
                    if k < ASK:  # observe, mutate or exec: not an ask-only turn
                        g_work = True
                        break
                    if k == ASK:
                        g_ask = True
                        g_last_ask = g_end
                    g_end += 1
                if g_work:
                    while g_end < s1 and turn_p[g_end] == t:
                        g_end += 1
                    run_len = 0
                elif g_ask:
                    run_len += 1
                    if run_len == 1:
                        run_g1_last = g_last_ask
                    elif run_len == 2:
                        run_g2_start = g_start
                        run_g2_end = g_end
                        run_g2_last = g_last_ask
                    else:
                        if run_len == _QMIN:
                            for k2 in range(run_g2_start, run_g2_end):
                                if kind_p[k2] == ASK and finding_p[k2] == 0:
                                    _charge(&o, seg, k2, QUESTION, run_g1_last, s0)
                            prev_last = run_g2_last
                        for k2 in range(g_start, g_end):
                            if kind_p[k2] == ASK and finding_p[k2] == 0:
                                _charge(&o, seg, k2, QUESTION, prev_last, s0)
                    prev_last = g_last_ask
                else:  # only "other" steps: neither asked nor worked
                    run_len = 0
                g_start = g_end

    return finding_a, of_a, total_a, wasted_a, bkt_a, bks_a
