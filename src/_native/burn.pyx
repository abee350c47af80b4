"""Compiled burn kernel (loopcore._native_burn): the twin of loopcore._burn_py, step for step.

Works only on integer columns of an EncodedTrace; the loop runs without the GIL. The rules are
those of the pure reference loopcore._burn_py (its module doc lists them), written again here
as typed loops over raw pointers; tests/test_burn_twins.py proves both give the same arrays. Scratch tables
hold global step indices, so an entry left by an earlier trace is older than the current trace's
first step and reads as "never seen": nothing is reset between traces. See loopcore.burn for the
rules and loopcore._burn_py for the readable twin of this exact loop.
"""
import numpy as np

from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_GET_SIZE
from slots cimport slot_offsets
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t

__all__ = ["N_KINDS", "QUESTION_LOOP_MIN_TURNS", "analyse_columns", "findings_of", "results_of"]

from codes cimport (
    FIND_DEGENERATE as DEGENERATE,
    FIND_DUPLICATE as DUPLICATE,
    FIND_OSCILLATION as OSCILLATION,
    FIND_QUESTION as QUESTION,
    FIND_REDUNDANT as REDUNDANT,
    FIND_REJECTED as REJECTED,
    K_ASK as ASK,
    K_EXEC as EXEC,
    K_MUTATE as MUTATE,
    K_OBSERVE as OBSERVE,
    K_OTHER as OTHER,
    N_FINDING_KINDS as NK,
    S_ABSOLUTE as F_ABSOLUTE,
    S_AFTER_USER as F_AFTER_USER,
    S_BACKUP as F_BACKUP,
    S_ERROR as F_ERROR,
    S_EXIT_NONZERO as F_EXIT_NONZERO,
    S_HAS_OUTCOME as F_OUTCOME,
    S_REJECTED as F_REJECTED,
    S_RESTORE as F_RESTORE,
)

cdef enum:
    NOTHING = -1
    ANYTHING = -2

N_KINDS = NK

QUESTION_LOOP_MIN_TURNS = 3
cdef int64_t _QMIN = 3


cdef struct K:
    # the columns and the outputs as raw pointers (memoryviews passed to helpers would cost
    # an atomic reference count per call in the hot loop)
    int8_t* finding
    int32_t* of_step
    int64_t* charge
    int64_t* wasted
    int64_t* bkt
    int64_t* bks
    const int64_t* tokens
    const int64_t* turn_tokens
    const int64_t* degen
    const uint8_t* kind
    const uint16_t* flags
    const uint64_t* result
    const int32_t* call
    const int32_t* reads
    const int64_t* toff
    const int32_t* tmem
    bint charge_turn


cdef inline void _charge(K* o, int64_t seg, int64_t i, int8_t code, int64_t j, int64_t s0) noexcept nogil:
    cdef int64_t c
    if code == REJECTED:
        c = o.tokens[i] + o.turn_tokens[i]
    elif code == DEGENERATE:
        c = o.degen[i]
    else:
        c = o.tokens[i] + (o.turn_tokens[i] if o.charge_turn else 0)
    o.finding[i] = code
    o.of_step[i] = <int32_t>(j - s0) if j >= 0 else -1
    o.charge[i] = c
    o.wasted[seg] += c
    o.bkt[seg * NK + code - 1] += c
    o.bks[seg * NK + code - 1] += 1


cdef inline bint _member(K* o, int32_t r, int32_t t) noexcept nogil:
    # is target t in the read set r (a read of anything proves no one target's state)
    cdef int64_t m
    if r < 0:
        return False
    for m in range(o.toff[r], o.toff[r + 1]):
        if o.tmem[m] == t:
            return True
    return False


cdef inline int32_t _source(K* o, int32_t r, int32_t d) noexcept nogil:
    # the source of a copy that writes d and depends on the set r: its one other member, or -1
    cdef int64_t m
    if r < 0 or o.toff[r + 1] - o.toff[r] > 2:
        return -1
    for m in range(o.toff[r], o.toff[r + 1]):
        if o.tmem[m] != d:
            return o.tmem[m]
    return -1


cdef int64_t _tok_before(K* o, int64_t j, int32_t t, const int32_t* writes, const int64_t* set_tok,
                         int64_t e0, int64_t s0) noexcept nogil:
    # the content token of t just before step j (see loopcore._burn_py._tok_before)
    cdef int64_t q = j - 1
    cdef int32_t w
    while q >= e0:
        w = writes[q]
        if w == ANYTHING:
            return -1
        if ((o.flags[q] & (F_BACKUP | F_RESTORE)) and set_tok[q] != -1
                and (_member(o, w, t) or _member(o, o.reads[q], t))):
            return set_tok[q]
        if _member(o, w, t):
            return -1
        q -= 1
    return -3 - <int64_t>t if e0 == s0 else -1


cdef bint _undone_then_redone(K* o, int64_t j, int64_t i, int32_t t, const int32_t* writes,
                              const int64_t* set_tok, int64_t e0, int64_t s0) noexcept nogil:
    # between the first application j of a mutation of t and its redo i: the first write of t
    # after j (the undo) is followed by no exec before i; an undo that restores a backup must
    # restore the content t had before j (a backup taken after j holds j's work)
    cdef int64_t k = j + 1, q, x
    cdef int32_t w
    while k < i:
        w = writes[k]
        if (w == ANYTHING and o.kind[k] == MUTATE) or _member(o, w, t):
            break
        k += 1
    if k >= i:
        return False
    for q in range(k + 1, i):
        if o.kind[q] == EXEC:
            return False
    if (o.flags[k] & F_RESTORE) and _source(o, o.reads[k], t) >= 0:
        x = _tok_before(o, j, t, writes, set_tok, e0, s0)
        return x != -1 and x == set_tok[k]
    return True


cdef bint _redo_after_restore(K* o, int64_t i, int64_t j, int64_t u2, const int32_t* writes,
                              const int32_t* last_mut, const int32_t* first_touch,
                              const int64_t* set_tok, int64_t e0, int64_t s0) noexcept nogil:
    # oscillation d (see loopcore._burn_py._redo_after_restore)
    cdef uint8_t k_i = o.kind[i]
    cdef uint16_t both
    cdef int32_t t, w, r
    cdef int64_t m, q
    if o.kind[j] != k_i or ((o.flags[i] | o.flags[j]) & F_ERROR):
        return False
    both = o.flags[i] & o.flags[j] & F_OUTCOME
    if (both and o.result[i] != o.result[j]) or (k_i == EXEC and not both):
        return False
    t = o.tmem[o.toff[writes[u2]]]
    if k_i == MUTATE:
        w = writes[i]
        r = o.reads[i]
        if w < 0 or o.toff[w + 1] - o.toff[w] != 1 or o.tmem[o.toff[w]] != t or r < 0:
            return False
        for m in range(o.toff[r], o.toff[r + 1]):
            if o.tmem[m] != t and last_mut[o.tmem[m]] > j:
                return False
    # a read set can miss an input (sed '3r snippet.py' f): no file named by j but t rewritten
    for q in range(j + 1, i):
        w = writes[q]
        if w >= 0:
            for m in range(o.toff[w], o.toff[w + 1]):
                if o.tmem[m] != t and first_touch[o.tmem[m]] <= j:
                    return False
    return _tok_before(o, j, t, writes, set_tok, e0, s0) == set_tok[u2]


cdef inline int64_t _replayed(K* o, int64_t a, int64_t j, int64_t u2) noexcept nogil:
    # the latest step between j and u2 with step a's call and outcome, or -1
    cdef int64_t b = u2 - 1
    while b > j:
        if (o.call[b] == o.call[a] and (o.flags[a] & o.flags[b] & F_OUTCOME)
                and o.result[a] == o.result[b] and not (o.flags[b] & F_REJECTED)):
            return b
        b -= 1
    return -1


cdef inline bint _changed(K* o, int64_t j, int32_t r, int64_t last_any, int64_t last_global,
                          const int32_t* last_mut) noexcept nogil:
    # was anything the reads r depend on written strictly after step j?
    cdef int64_t m
    if r == NOTHING:
        return False
    if r == ANYTHING:
        return last_any > j
    if last_global > j:
        return True
    for m in range(o.toff[r], o.toff[r + 1]):
        if last_mut[o.tmem[m]] > j:
            return True
    return False


cdef int _validate(Py_ssize_t n, const uint8_t* kind, const int32_t* target, const int32_t* reads,
                   const int32_t* writes, const int32_t* call, const int32_t* obs, const int32_t* skey,
                   const int32_t* sval, const int32_t* edit, const int32_t* undo, const int64_t* tokens,
                   const int64_t* turn_tokens, const int64_t* degen, int64_t n_sets, int64_t n_calls,
                   int64_t n_obs, int64_t n_skeys, int64_t n_svals, int64_t n_edits) noexcept nogil:
    # Out-of-range ids would index past the scratch tables: reject them before the loop, in one
    # pass of branch-free OR reductions. An id in [low, size) is (uint32)(id - low) < size - low.
    cdef Py_ssize_t i
    cdef uint32_t bk = 0, bt = 0, br = 0, bw = 0, bc = 0, bo = 0, bs = 0, bv = 0, be = 0, bx = 0, bn = 0
    cdef uint32_t lt = <uint32_t>(n_sets + 1), lr = <uint32_t>(n_sets + 2), lc = <uint32_t>(n_calls + 1)
    cdef uint32_t lo = <uint32_t>(n_obs + 1), ls = <uint32_t>(n_skeys + 1), lv = <uint32_t>(n_svals + 1)
    cdef uint32_t le = <uint32_t>(n_edits + 1)
    if n_sets > 0x7ffffff0 or n_calls > 0x7ffffff0 or n_obs > 0x7ffffff0 or n_skeys > 0x7ffffff0 \
            or n_svals > 0x7ffffff0 or n_edits > 0x7ffffff0:
        return 12
    for i in range(n):
        bk |= kind[i] > OTHER
        bt |= <uint32_t>(target[i] + 1) >= lt
        br |= <uint32_t>(reads[i] + 2) >= lr
        bw |= <uint32_t>(writes[i] + 2) >= lr
        bc |= <uint32_t>(call[i] + 1) >= lc
        bo |= <uint32_t>(obs[i] + 1) >= lo
        bs |= <uint32_t>(skey[i] + 1) >= ls
        bv |= <uint32_t>(sval[i] + 1) >= lv
        be |= (<uint32_t>(edit[i] + 1) >= le) | (<uint32_t>(undo[i] + 1) >= le)
        # a state key and its state come together, and only on a step with targets
        bx |= ((skey[i] >= 0) ^ (sval[i] >= 0)) | ((skey[i] >= 0) & (target[i] < 0))
        bn |= (tokens[i] < 0) | (turn_tokens[i] < 0) | (degen[i] < 0)
    if bk:
        return 1
    if bt:
        return 2
    if br:
        return 3
    if bw:
        return 4
    if bc:
        return 5
    if bo:
        return 6
    if bs:
        return 7
    if bv:
        return 8
    if be:
        return 9
    if bx:
        return 10
    if bn:
        return 11
    return 0


_INVALID = {
    1: "kind holds a code outside 0..4",
    2: "column target holds an id outside [-1, n_target_sets)",
    3: "column reads holds an id outside [-2, n_target_sets)",
    4: "column writes holds an id outside [-2, n_target_sets)",
    5: "column call holds an id outside [-1, n_calls)",
    6: "column obs holds an id outside [-1, n_obs)",
    7: "column skey holds an id outside [-1, n_skeys)",
    8: "column sval holds an id outside [-1, n_svals)",
    9: "column edit or undo holds an id outside [-1, n_edits)",
    10: "skey and sval must be both set or both -1, and a state key needs a target set",
    11: "token columns must be >= 0",
    12: "an id space is larger than int32 ids can address",
}


def analyse_columns(
    const uint8_t[::1] kind, const int64_t[::1] turn, const int64_t[::1] tokens,
    const int64_t[::1] turn_tokens, const int64_t[::1] degen,
    const uint16_t[::1] flags, const uint64_t[::1] result_hash, const int32_t[::1] target,
    const int64_t[::1] target_offsets, const int32_t[::1] target_members,
    const int32_t[::1] reads, const int32_t[::1] writes,
    const int32_t[::1] call, const int32_t[::1] obs, const int32_t[::1] skey,
    const int32_t[::1] sval, const int32_t[::1] edit, const int32_t[::1] undo,
    const int64_t[::1] trace_offsets, int64_t n_targets, int64_t n_calls, int64_t n_obs,
    int64_t n_skeys, int64_t n_svals, int64_t n_edits, charge_turn=False,
):
    """Charge every step of the encoded traces; returns (finding, of_step, charge, total,
    wasted, by_kind_tokens, by_kind_steps) as numpy arrays (see EncodedAnalysis). Raises
    ValueError on inconsistent columns."""
    cdef Py_ssize_t n = kind.shape[0]
    cdef Py_ssize_t n_traces = trace_offsets.shape[0] - 1
    cdef Py_ssize_t n_sets = target_offsets.shape[0] - 1
    cdef Py_ssize_t c, m
    cdef int bad = 0

    for name, col in (("turn", turn), ("tokens", tokens), ("turn_tokens", turn_tokens), ("degen", degen),
                      ("flags", flags), ("result_hash", result_hash), ("target", target), ("reads", reads),
                      ("writes", writes), ("call", call), ("obs", obs), ("skey", skey), ("sval", sval),
                      ("edit", edit), ("undo", undo)):
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
    if n:
        with nogil:
            bad = _validate(n, &kind[0], &target[0], &reads[0], &writes[0], &call[0], &obs[0], &skey[0], &sval[0],
                            &edit[0], &undo[0], &tokens[0], &turn_tokens[0], &degen[0], n_sets, n_calls, n_obs,
                            n_skeys, n_svals, n_edits)
        if bad:
            raise ValueError(_INVALID[bad])
    if n > 0x7fffffff:
        # step indices live in int32 tables (half the cache footprint of int64)
        raise ValueError("at most 2**31 - 1 steps per call; analyse bigger encodings in parts")

    finding_a = np.zeros(n, dtype=np.int8)
    of_a = np.full(n, -1, dtype=np.int32)
    charge_a = np.zeros(n, dtype=np.int64)
    total_a = np.zeros(n_traces, dtype=np.int64)
    wasted_a = np.zeros(n_traces, dtype=np.int64)
    bkt_a = np.zeros((n_traces, NK), dtype=np.int64)
    bks_a = np.zeros((n_traces, NK), dtype=np.int64)
    if n == 0:
        return finding_a, of_a, charge_a, total_a, wasted_a, bkt_a, bks_a
    # One scratch block of tables indexed by id, holding global step indices (see the module
    # doc); every table has a slot in front of it, so id -1 ("none") indexes a dummy.
    scratch_a = np.full(n_targets + n_calls + n_obs + n_skeys + n_svals + n_edits + 6, -1, dtype=np.int32)
    # content tokens (oscillation d): per target the token, the step that set it, the first step
    # naming it and the latest write by a step that did not fail; per step the token it set
    tokens_a = np.full((4, n_targets + 1), -1, dtype=np.int64)
    tok_proof_a = np.zeros(n_targets + 1, dtype=np.uint8)
    set_tok_a = np.full(n, -1, dtype=np.int64)
    last_ok_a = np.full(n_targets + 1, -1, dtype=np.int32)
    first_touch_a = np.full(n_targets + 1, -1, dtype=np.int32)

    cdef int8_t[::1] finding = finding_a
    cdef int32_t[::1] of_step = of_a
    cdef int64_t[::1] charge_v = charge_a
    cdef int64_t[::1] total = total_a
    cdef int64_t[::1] wasted = wasted_a
    cdef int64_t[:, ::1] bkt = bkt_a
    cdef int64_t[:, ::1] bks = bks_a
    cdef int32_t[::1] scratch = scratch_a
    cdef int64_t[:, ::1] tokens_v = tokens_a
    cdef uint8_t[::1] tok_proof_v = tok_proof_a
    cdef int64_t[::1] set_tok_v = set_tok_a
    cdef int32_t[::1] last_ok_v = last_ok_a
    cdef int32_t[::1] first_touch_v = first_touch_a
    cdef int64_t* tok = &tokens_v[0, 0]
    cdef int64_t* tok_set = &tokens_v[1, 0]
    cdef uint8_t* tok_proof = &tok_proof_v[0]
    cdef int64_t* set_tok = &set_tok_v[0]
    cdef int32_t* last_mut_ok = &last_ok_v[0]
    cdef int32_t* first_touch = &first_touch_v[0]
    cdef K o
    o.finding = &finding[0]
    o.of_step = &of_step[0]
    o.charge = &charge_v[0]
    o.wasted = &wasted[0]
    o.bkt = &bkt[0, 0]
    o.bks = &bks[0, 0]
    o.tokens = &tokens[0]
    o.turn_tokens = &turn_tokens[0]
    o.degen = &degen[0]
    o.kind = &kind[0]
    o.flags = &flags[0]
    o.result = &result_hash[0]
    o.call = &call[0]
    o.reads = &reads[0]
    o.toff = &target_offsets[0]
    o.tmem = &target_members[0] if target_members.shape[0] else <const int32_t*>NULL
    o.charge_turn = bool(charge_turn)
    cdef const int64_t* toff = o.toff
    cdef const int32_t* tmem = o.tmem
    cdef int32_t* last_mut = &scratch[1]  # latest write of this target
    cdef int32_t* last_call = last_mut + n_targets + 1  # latest step with this call id
    cdef int32_t* last_obs = last_call + n_calls + 1  # latest observe with this obs id
    cdef int32_t* last_state = last_obs + n_obs + 1  # latest state id seen under this skey
    cdef int32_t* last_sval = last_state + n_skeys + 1  # latest step that showed this state
    cdef int32_t* last_edit = last_sval + n_svals + 1  # latest error-free edit with this id

    cdef const uint8_t* kind_p = &kind[0]
    cdef const int64_t* turn_p = &turn[0]
    cdef const uint16_t* flags_p = &flags[0]
    cdef const uint64_t* result_p = &result_hash[0]
    cdef const int32_t* target_p = &target[0]
    cdef const int32_t* reads_p = &reads[0]
    cdef const int32_t* writes_p = &writes[0]
    cdef const int32_t* call_p = &call[0]
    cdef const int32_t* obs_p = &obs[0]
    cdef const int32_t* skey_p = &skey[0]
    cdef const int32_t* sval_p = &sval[0]
    cdef const int32_t* edit_p = &edit[0]
    cdef const int32_t* undo_p = &undo[0]
    cdef const int64_t* tokens_p = &tokens[0]
    cdef const int64_t* turn_tokens_p = &turn_tokens[0]
    cdef const int64_t* degen_p = &degen[0]
    cdef int8_t* finding_p = &finding[0]

    cdef Py_ssize_t seg, i, k2, q
    cdef int64_t s0, s1, e0, j, last_global, last_mglobal, last_any, seg_total, mut_t, und, length, a, b
    cdef int64_t g_start, g_end, g_last_ask, run_len, run_g1_last, run_g2_start, run_g2_end
    cdef int64_t t_turn, n_ask
    cdef int64_t run_g2_last, prev_last
    cdef uint64_t run_answer, answer
    cdef bint run_answered, answered
    cdef bint g_ask, g_work, absolute, confirmed, seen, other, disproved
    cdef uint8_t k
    cdef uint16_t f_i
    cdef int8_t code
    cdef int32_t ts, u, sk, w, cl, ob, t, d, src, rr
    cdef const int32_t* seen_by
    cdef int64_t u2, x, last_write, ts_
    cdef bint ok

    with nogil:
        for seg in range(n_traces):
            s0 = trace_offsets[seg]
            s1 = trace_offsets[seg + 1]
            last_global = -1  # latest write of everything (an exec, an untargeted mutation)
            last_mglobal = -1  # ... by a mutation: an undo of any target
            last_any = -1  # latest write of anything (a failed write of named targets aside)
            last_write = -1  # latest write of anything
            e0 = s0  # the first step that counts as evidence: the trace's, or the latest AFTER_USER
            seg_total = 0
            n_ask = 0
            for i in range(s0, s1):
                k = kind_p[i]
                f_i = flags_p[i]
                ts = target_p[i]
                seg_total += tokens_p[i] + turn_tokens_p[i]
                n_ask += k == ASK
                if f_i & F_AFTER_USER:
                    e0 = i
                if f_i & F_REJECTED:
                    _charge(&o, seg, i, REJECTED, -1, s0)
                    continue  # nothing ran: no table changes
                cl = call_p[i]
                if finding_p[i] == 0:  # else an earlier redo charged it as its replay
                    code = 0
                    j = -1
                    # oscillation a: an error-free edit that swaps an earlier edit's old/new
                    u = undo_p[i]
                    if u >= 0:
                        j = last_edit[u]
                        if j >= e0 and last_global < j:
                            code = OSCILLATION
                    # oscillation b: content returns to a state seen before a different one
                    if code == 0:
                        sk = skey_p[i]
                        if sk >= 0:
                            j = last_sval[sval_p[i]]
                            if j >= e0 and last_global < j and last_state[sk] != sval_p[i]:
                                mut_t = -1
                                for m in range(toff[ts], toff[ts + 1]):
                                    if last_mut[tmem[m]] > mut_t:
                                        mut_t = last_mut[tmem[m]]
                                if mut_t > j:
                                    code = OSCILLATION
                    # oscillation c: a redo of an earlier mutation after an undo; a command that
                    # exited non-zero neither redoes nor is redone (it may have applied nothing)
                    if (code == 0 and k == MUTATE and not (f_i & (F_ERROR | F_RESTORE | F_EXIT_NONZERO))
                            and ts >= 0 and toff[ts + 1] - toff[ts] == 1
                            and cl >= 0 and _member(&o, writes_p[i], tmem[toff[ts]])):
                        j = last_call[cl]
                        t = tmem[toff[ts]]
                        und = last_mut[t] if last_mut[t] > last_mglobal else last_mglobal
                        if (j >= e0 and kind_p[j] == MUTATE and not (flags_p[j] & (F_ERROR | F_EXIT_NONZERO))
                                and und > j):
                            absolute = (f_i & F_ABSOLUTE) != 0
                            confirmed = absolute or (und == last_mut[t] and undo_p[und] >= 0
                                                     and undo_p[und] == edit_p[j])
                            length = 0
                            seen = False
                            other = False
                            disproved = False
                            while i + length + 1 < s1 and j + length + 1 < i:
                                a = i + length + 1
                                b = j + length + 1
                                if flags_p[a] & F_AFTER_USER:
                                    break  # the user spoke: nothing after it replays anything
                                if (call_p[a] < 0 or call_p[a] != call_p[b] or finding_p[a] != 0
                                        or ((flags_p[a] ^ flags_p[b]) & (F_OUTCOME | F_REJECTED))
                                        or result_p[a] != result_p[b]):
                                    # the same look at the target showing something else: not redone
                                    disproved = (call_p[a] >= 0 and call_p[a] == call_p[b] and kind_p[a] == OBSERVE
                                                 and _member(&o, reads_p[a], t))
                                    break
                                if kind_p[a] == OBSERVE and (flags_p[a] & F_OUTCOME) and _member(&o, reads_p[a], t):
                                    seen = True
                                else:
                                    other = True
                                length += 1
                            if not confirmed and not absolute and not (seen and other) and not disproved:
                                confirmed = _undone_then_redone(&o, j, i, t, writes_p, set_tok, e0, s0)
                            if confirmed or (seen and other):
                                code = OSCILLATION
                                for q in range(1, length + 1):
                                    _charge(&o, seg, i + q, OSCILLATION, j, s0)
                                if (not absolute and und == last_mut[t] and finding_p[und] == 0
                                        and kind_p[und] == MUTATE):
                                    _charge(&o, seg, und, OSCILLATION, j, s0)
                    # oscillation d: after restoring a file, the same call as one run on that
                    # same restored content (a redo across exec steps)
                    if code == 0 and cl >= 0 and (k == MUTATE or k == EXEC):
                        j = last_call[cl]
                        u2 = last_write
                        if (j >= e0 and u2 > j and (flags_p[u2] & F_RESTORE) and set_tok[u2] != -1
                                and _redo_after_restore(&o, i, j, u2, writes_p, last_mut, first_touch,
                                                        set_tok, e0, s0)):
                            code = OSCILLATION
                            if finding_p[u2] == 0:
                                _charge(&o, seg, u2, OSCILLATION, j, s0)  # the undo it redoes
                            a = i + 1
                            while a < s1 and finding_p[a] == 0 and call_p[a] >= 0:
                                if kind_p[a] == MUTATE or writes_p[a] >= 0 or (flags_p[a] & (F_REJECTED | F_AFTER_USER)):
                                    break
                                b = _replayed(&o, a, j, u2)
                                if b < 0:
                                    break
                                _charge(&o, seg, a, OSCILLATION, b, s0)
                                a += 1
                    # an observation counts failed writes of what it reads too (_burn_py: seen_by)
                    seen_by = last_mut if k == OBSERVE else last_mut_ok
                    if code == 0:
                        ob = obs_p[i]
                        if ob >= 0:
                            j = last_obs[ob]
                            if j >= e0 and not _changed(&o, j, reads_p[i], last_any, last_global, seen_by):
                                code = REDUNDANT
                    if code == 0 and cl >= 0:
                        j = last_call[cl]
                        if (j >= e0 and not ((flags_p[i] & flags_p[j] & F_OUTCOME) and result_p[i] != result_p[j])
                                and not _changed(&o, j, reads_p[i], last_any, last_global, seen_by)):
                            code = DUPLICATE
                    if code:
                        _charge(&o, seg, i, code, j, s0)

                # an id of -1 writes its table's dummy slot
                last_call[cl] = <int32_t>i
                last_obs[obs_p[i]] = <int32_t>i
                sk = skey_p[i]
                if sk >= 0:
                    last_state[sk] = sval_p[i]
                    last_sval[sval_p[i]] = <int32_t>i
                last_edit[edit_p[i]] = <int32_t>i
                # the targets the step names (its write set is part of its reads column, unless
                # that column says "anything")
                for q in range(3):
                    rr = ts if q == 0 else (reads_p[i] if q == 1 else (writes_p[i] if reads_p[i] < 0 else -1))
                    if rr >= 0:
                        for m in range(toff[rr], toff[rr + 1]):
                            if first_touch[tmem[m]] < s0:
                                first_touch[tmem[m]] = <int32_t>i
                if (f_i & (F_BACKUP | F_RESTORE)) and writes_p[i] >= 0 and not (f_i & F_ERROR):
                    d = tmem[toff[writes_p[i]]]
                    src = _source(&o, reads_p[i], d)
                    if src >= 0 or (f_i & F_RESTORE):
                        if src >= 0:
                            # the token of src now, or a new one (the content both now share)
                            ts_ = tok_set[src]
                            if (ts_ < e0 or last_mut[src] > ts_
                                    or (not tok_proof[src] and last_global > ts_)):
                                x = i
                            else:
                                x = tok[src]
                            tok[src] = x
                            tok_set[src] = i
                            tok_proof[src] = 0 if (f_i & F_BACKUP) else 1
                        else:
                            x = -3 - <int64_t>d  # the committed content of d
                        tok[d] = x
                        tok_set[d] = i
                        tok_proof[d] = 1 if (f_i & F_BACKUP) else 0
                        set_tok[i] = x
                w = writes_p[i]
                if w == ANYTHING:
                    last_global = i
                    last_any = i
                    last_write = i
                    if k == MUTATE:
                        last_mglobal = i
                elif w >= 0:
                    # a failed write of one named target changed nothing a repeat depends on (one
                    # of several may have half-applied); still a write an oscillation can see
                    ok = not (f_i & F_ERROR) or toff[w + 1] - toff[w] > 1
                    for m in range(toff[w], toff[w + 1]):
                        last_mut[tmem[m]] = <int32_t>i
                        if ok:
                            last_mut_ok[tmem[m]] = <int32_t>i
                    if ok:
                        last_any = i
                    last_write = i
            total[seg] = seg_total

            # Question loops, a second pass: it charges only steps the pass above left uncharged.
            if n_ask >= _QMIN:
                run_len = 0
                run_g1_last = -1
                run_g2_start = -1
                run_g2_end = -1
                run_g2_last = -1
                prev_last = -1
                run_answer = 0
                run_answered = False
                g_start = s0
                while g_start < s1:
                    # the turn group [g_start, g_end): scan it; once it did work, only find its end
                    t_turn = turn_p[g_start]
                    g_end = g_start
                    g_ask = False
                    g_work = False
                    g_last_ask = -1
                    while g_end < s1 and turn_p[g_end] == t_turn:
                        k = kind_p[g_end]
                        if k < ASK:  # observe, mutate or exec: not an ask-only turn
                            g_work = True
                            break
                        if k == ASK:
                            g_ask = True
                            g_last_ask = g_end
                        g_end += 1
                    if g_work:
                        while g_end < s1 and turn_p[g_end] == t_turn:
                            g_end += 1
                        run_len = 0
                    elif g_ask:
                        # a turn's answer is its last ask's; a new one starts the run again
                        # (the reference: _burn_py._question_loops)
                        answered = (flags_p[g_last_ask] & F_OUTCOME) != 0 and not (flags_p[g_last_ask] & F_ERROR)
                        answer = result_p[g_last_ask]
                        if run_len > 0 and answered and not (run_answered and answer == run_answer):
                            run_len = 0
                        run_len += 1
                        if run_len == 1:
                            run_g1_last = g_last_ask
                            run_answered = answered
                            run_answer = answer
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

            # Degenerate replies: the repeated part of a reply on a step nothing else charged.
            for i in range(s0, s1):
                if degen_p[i] > 0 and finding_p[i] == 0:
                    _charge(&o, seg, i, DEGENERATE, i, s0)

    return finding_a, of_a, charge_a, total_a, wasted_a, bkt_a, bks_a


# ---------------------------------------------------------------------------------------------
# Results from their field tuples (the fleet's client rebuilds every trace's TraceResult,
# BurnReport and findings from the tuples its workers send): the slots of each new object
# filled at their offsets, where the dataclasses' __init__ sets each field one
# object.__setattr__ at a time. The classes are looked up on first use (loopcore.burn imports
# this module; loopcore.report imports loopcore.burn).
#
# A rebuilt Finding whose fields hold no container the cyclic collector follows (str, int,
# None, bool, and tuples and dicts of those: every Finding the workers send) is untracked, with
# its tuples of such values, as CPython untracks a tuple of atoms and as msgspec's gc=False
# structs are never tracked: a fleet run rebuilds a million findings per million steps, and
# the collector's first pass over them alone cost more than rebuilding them (measured). Such a
# Finding cannot be part of a reference cycle unless a caller puts a container into one of its
# ref dicts; reference counting frees it as before.

cdef extern from "Python.h":
    bint PyObject_IS_GC(object)
    bint PyObject_GC_IsTracked(object)
    void PyObject_GC_UnTrack(void*)

cdef enum:
    N_FINDING_FIELDS = 12
    N_BURN_FIELDS = 10
    N_RESULT_FIELDS = 5
    BURN_FINDINGS_AT = 2
cdef Py_ssize_t _FOFF[N_FINDING_FIELDS]
cdef Py_ssize_t _BOFF[N_BURN_FIELDS]
cdef Py_ssize_t _ROFF[N_RESULT_FIELDS]
cdef object _FINDING = None
cdef object _BURN = None
cdef object _RESULT = None
cdef bint _FSLOTS = False
cdef bint _RSLOTS = False

_FINDING_NAMES = (
    "kind", "steps", "of_step", "target", "name", "tokens", "message", "session", "refs",
    "of_ref", "turn_output_tokens", "tokens_estimated",
)
_BURN_NAMES = (
    "total_tokens", "wasted_tokens", "findings", "by_kind", "top_recommendation",
    "tokens_estimated", "steps", "traces", "session", "estimated_tokens",
)
_RESULT_NAMES = ("source", "session", "format", "steps", "report")


cdef bint _fills(cls, tuple names, Py_ssize_t* offs) except -1:
    return (
        tuple(cls.__dataclass_fields__) == names
        and not hasattr(cls, "__post_init__")
        and slot_offsets(cls, names, offs)
    )


cdef int _finding_init() except -1:
    global _FINDING, _FSLOTS
    from loopcore.burn import Finding

    _FSLOTS = _fills(Finding, _FINDING_NAMES, _FOFF)
    _FINDING = Finding
    return 0


cdef int _result_init() except -1:
    global _BURN, _RESULT, _RSLOTS
    from loopcore.burn import BurnReport
    from loopcore.report import TraceResult

    _RSLOTS = _fills(BurnReport, _BURN_NAMES, _BOFF) and _fills(
        TraceResult, _RESULT_NAMES, _ROFF
    )
    _BURN = BurnReport
    _RESULT = TraceResult
    return 0


cdef object _filled(cls, tuple r, Py_ssize_t* offs, Py_ssize_t n, Py_ssize_t at=-1, sub=None):
    # a new instance of the slots class *cls* with r[i] in the slot at offs[i] (r has n items),
    # and *sub* in place of r[at] when *at* is a field's index
    obj = cls.__new__(cls)
    cdef PyObject** slot
    cdef Py_ssize_t f
    for f in range(n):
        v = sub if f == at else r[f]
        slot = <PyObject**>((<char*><PyObject*>obj) + offs[f])
        Py_INCREF(v)
        slot[0] = <PyObject*>v  # a new object's slots are empty: nothing to release
    return obj


cdef bint _settled(object v):
    # True when the collector need not follow *v*: not a container, or a dict or tuple it does
    # not track; a tuple whose items are all such values is untracked first (one level: the
    # fields of a Finding are flat)
    if not PyObject_IS_GC(v):
        return True
    if type(v) is dict:
        return not PyObject_GC_IsTracked(v)
    if type(v) is not tuple:
        return False
    if PyObject_GC_IsTracked(v):
        for item in <tuple>v:
            if PyObject_IS_GC(item) and (
                PyObject_GC_IsTracked(item) or (type(item) is not dict and type(item) is not tuple)
            ):
                return False
        PyObject_GC_UnTrack(<PyObject*>v)
    return True


cdef object _finding(row):
    if not _FSLOTS or type(row) is not tuple or PyTuple_GET_SIZE(row) != N_FINDING_FIELDS:
        return _FINDING(*row)
    cdef tuple r = <tuple>row
    obj = _filled(_FINDING, r, _FOFF, N_FINDING_FIELDS)
    cdef Py_ssize_t f
    for f in range(N_FINDING_FIELDS):
        if not _settled(r[f]):
            return obj
    PyObject_GC_UnTrack(<PyObject*>obj)
    return obj


cdef tuple _findings(rows):
    if _FINDING is None:
        _finding_init()
    return tuple([_finding(row) for row in rows])


def findings_of(rows):
    """``tuple(Finding(*row) for row in rows)``: the same objects (the twin of
    loopcore._burn_py.findings_of). A row that is not a tuple of the 12 fields goes to the
    constructor itself, which takes it or raises as it does."""
    return _findings(rows)


def results_of(packed):
    """``[TraceResult(source, session, format, steps, BurnReport(*values))]`` for each
    ``(source, session, format, steps, values)`` of *packed*, the findings among *values*
    rebuilt by :func:`findings_of`: the same objects (the twin of
    loopcore._burn_py.results_of). An item of another shape goes through the constructors."""
    if _RESULT is None:
        _result_init()
    cdef list out = []
    cdef tuple t, values
    for item in packed:
        if (
            _RSLOTS
            and type(item) is tuple
            and PyTuple_GET_SIZE(item) == N_RESULT_FIELDS
            and type((<tuple>item)[4]) is tuple
            and PyTuple_GET_SIZE((<tuple>item)[4]) == N_BURN_FIELDS
        ):
            t = <tuple>item
            values = <tuple>t[4]
            found = _findings(values[BURN_FINDINGS_AT])
            report = _filled(_BURN, values, _BOFF, N_BURN_FIELDS, BURN_FINDINGS_AT, found)
            out.append(_filled(_RESULT, t, _ROFF, N_RESULT_FIELDS, 4, report))
            continue
        t = tuple(item)
        if PyTuple_GET_SIZE(t) != N_RESULT_FIELDS:
            raise ValueError(f"a packed result has {N_RESULT_FIELDS} fields, not {len(t)}")
        burn = list(t[4])
        if len(burn) <= BURN_FINDINGS_AT:  # indexing is unchecked here (setup.py)
            raise IndexError("list index out of range")
        burn[BURN_FINDINGS_AT] = _findings(burn[BURN_FINDINGS_AT])
        out.append(_RESULT(t[0], t[1], t[2], t[3], _BURN(*burn)))
    return out
