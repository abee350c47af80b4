"""Pure-Python twin of the burn kernel: the same loop as src/_native/burn.pyx, step for step.

It works on the columns of an :class:`loopcore.encoded.EncodedTrace` (ints only) and must give
exactly what the compiled kernel gives; both must equal ``loopcore.burn.analyse_burn``, the
readable reference. Rules (see loopcore.burn): per-target epochs advanced by mutations, an exec
or a target-less mutation advances every epoch; priority oscillation > redundant_observation >
duplicate_call > question_loop; a step is charged at most once; first occurrences never.

Scratch tables hold *global* step indices, so an entry left by an earlier trace is simply
older than the current trace's first step and reads as "never seen": no reset between traces.
"""
from __future__ import annotations

import numpy as np

__all__ = ["QUESTION_LOOP_MIN_TURNS", "analyse_columns"]

OBSERVE, MUTATE, EXEC, ASK, OTHER = range(5)
REDUNDANT, DUPLICATE, OSCILLATION, QUESTION = 1, 2, 3, 4
#: A question loop needs this many consecutive ask-only turns; the first is never charged.
QUESTION_LOOP_MIN_TURNS = 3


def _check(n, cols, trace_offsets, target_offsets, target_members, sizes):
    for name, col in cols.items():
        if col.shape[0] != n:
            raise ValueError(f"column {name} has {col.shape[0]} rows; expected {n}")
    if trace_offsets.shape[0] < 1 or trace_offsets[0] != 0 or trace_offsets[-1] != n:
        raise ValueError("trace_offsets must start at 0 and end at the number of steps")
    if np.any(np.diff(trace_offsets) < 0):
        raise ValueError("trace_offsets must be non-decreasing")
    if target_offsets.shape[0] < 1 or target_offsets[0] != 0 or target_offsets[-1] != target_members.shape[0]:
        raise ValueError("target_offsets must start at 0 and end at len(target_members)")
    if np.any(np.diff(target_offsets) <= 0):
        raise ValueError("target_offsets must be increasing: every target set has a member")
    if target_members.shape[0] and (target_members.min() < 0 or target_members.max() >= sizes["target_members"]):
        raise ValueError("target_members holds an id outside [0, n_targets)")
    if n and (cols["kind"].max() > OTHER):
        raise ValueError("kind holds a code outside 0..4")
    for name, size in sizes.items():
        if name == "target_members" or not n:
            continue
        col = cols[name]
        if col.min() < -1 or col.max() >= size:
            raise ValueError(f"column {name} holds an id outside [-1, {size})")
    if n and np.any(((cols["skey"] >= 0) != (cols["sval"] >= 0)) | ((cols["skey"] >= 0) & (cols["target"] < 0))):
        raise ValueError("skey and sval must be both set or both -1, and a state key needs a target set")


def analyse_columns(
    kind, turn, tokens, flags, result_hash, target, target_offsets, target_members, call, obs, skey, sval,
    edit, undo, trace_offsets, n_targets, n_calls, n_obs, n_skeys, n_svals, n_edits,
):
    """Charge every step of the encoded traces; returns (finding, of_step, total, wasted,
    by_kind_tokens, by_kind_steps) as numpy arrays (see EncodedAnalysis). Raises ValueError
    on inconsistent columns."""
    kind = np.asarray(kind)
    n = kind.shape[0]
    cols = dict(kind=kind, turn=np.asarray(turn), tokens=np.asarray(tokens), flags=np.asarray(flags),
                result_hash=np.asarray(result_hash), target=np.asarray(target),
                call=np.asarray(call), obs=np.asarray(obs), skey=np.asarray(skey), sval=np.asarray(sval),
                edit=np.asarray(edit), undo=np.asarray(undo))
    trace_offsets = np.asarray(trace_offsets)
    target_offsets = np.asarray(target_offsets)
    target_members = np.asarray(target_members)
    n_sets = target_offsets.shape[0] - 1
    _check(n, cols, trace_offsets, target_offsets, target_members, dict(
        target_members=n_targets, target=n_sets, call=n_calls, obs=n_obs, skey=n_skeys,
        sval=n_svals, edit=n_edits, undo=n_edits))
    if n and cols["call"].min() < 0:
        raise ValueError("column call holds -1; every step has a call id")
    if n > 0x7FFFFFFF:
        raise ValueError("at most 2**31 - 1 steps per call; analyse bigger encodings in parts")

    kind_l = kind.tolist()
    turn_l = cols["turn"].tolist()
    tokens_l = cols["tokens"].tolist()
    has_l = ((cols["flags"] & 1) != 0).tolist()
    res_l = cols["result_hash"].tolist()
    target_l = cols["target"].tolist()
    call_l = cols["call"].tolist()
    obs_l = cols["obs"].tolist()
    skey_l = cols["skey"].tolist()
    sval_l = cols["sval"].tolist()
    edit_l = cols["edit"].tolist()
    undo_l = cols["undo"].tolist()
    toff = target_offsets.tolist()
    tmem = target_members.tolist()

    n_traces = trace_offsets.shape[0] - 1
    finding = [0] * n
    of_step = [-1] * n
    total = [0] * n_traces
    wasted = [0] * n_traces
    bk_tokens = [[0, 0, 0, 0] for _ in range(n_traces)]
    bk_steps = [[0, 0, 0, 0] for _ in range(n_traces)]

    last_mut = [-1] * n_targets
    last_call = [-1] * n_calls
    last_obs = [-1] * n_obs
    last_state = [-1] * n_skeys  # latest state id revealed under this key
    last_sval = [-1] * n_svals  # latest step that revealed exactly this state
    last_edit = [-1] * n_edits

    def charge(seg, i, code, j, s0):
        finding[i] = code
        of_step[i] = j - s0
        wasted[seg] += tokens_l[i]
        bk_tokens[seg][code - 1] += tokens_l[i]
        bk_steps[seg][code - 1] += 1

    for seg in range(n_traces):
        s0 = int(trace_offsets[seg])
        s1 = int(trace_offsets[seg + 1])
        last_global = -1  # latest exec or target-less mutation
        last_any = -1  # latest mutation of anything
        for i in range(s0, s1):
            k_i = kind_l[i]
            ts = target_l[i]
            code = 0
            j = -1

            # oscillation, form 1: an error-free edit that swaps an earlier edit's old/new
            u = undo_l[i]
            if u >= 0:
                j = last_edit[u]
                if j >= s0 and last_global < j:
                    code = OSCILLATION
            # oscillation, form 2: content returns to a state seen before a different one
            if code == 0:
                sk = skey_l[i]
                if sk >= 0:
                    j = last_sval[sval_l[i]]
                    if j >= s0 and last_global < j and last_state[sk] != sval_l[i]:
                        # ... and the agent changed the target since (latest mutation of it)
                        mut_t = -1
                        for m in range(toff[ts], toff[ts + 1]):
                            if last_mut[tmem[m]] > mut_t:
                                mut_t = last_mut[tmem[m]]
                        if mut_t > j:
                            code = OSCILLATION
            if code == 0:
                o = obs_l[i]
                if o >= 0:
                    j = last_obs[o]
                    if j >= s0 and not _changed(j, k_i, ts, last_any, last_global, last_mut, toff, tmem):
                        code = REDUNDANT
            if code == 0:
                j = last_call[call_l[i]]
                if (j >= s0 and not (has_l[i] and has_l[j] and res_l[i] != res_l[j])
                        and not _changed(j, k_i, ts, last_any, last_global, last_mut, toff, tmem)):
                    # a repeat is waste only with the same outcome, where both have one
                    code = DUPLICATE
            if code:
                charge(seg, i, code, j, s0)

            last_call[call_l[i]] = i
            if obs_l[i] >= 0:
                last_obs[obs_l[i]] = i
            if skey_l[i] >= 0:
                last_state[skey_l[i]] = sval_l[i]
                last_sval[sval_l[i]] = i
            if edit_l[i] >= 0:
                last_edit[edit_l[i]] = i
            if k_i == MUTATE:
                if ts >= 0:
                    for m in range(toff[ts], toff[ts + 1]):
                        last_mut[tmem[m]] = i
                else:
                    last_global = i
                last_any = i
            elif k_i == EXEC:
                last_global = i
                last_any = i
        total[seg] = sum(tokens_l[s0:s1])

        # Question loops, a second pass: it charges only steps the pass above left uncharged,
        # and needs at least QUESTION_LOOP_MIN_TURNS asks to find anything.
        if kind_l[s0:s1].count(ASK) < QUESTION_LOOP_MIN_TURNS:
            continue
        run_len = 0
        run_g1_last = run_g2_start = run_g2_end = run_g2_last = prev_last = -1
        g_start = s0
        while g_start < s1:
            # the turn group [g_start, g_end): scan it; once it did work, only find its end
            t = turn_l[g_start]
            g_end = g_start
            g_ask = g_work = False
            g_last_ask = -1
            while g_end < s1 and turn_l[g_end] == t:
                k = kind_l[g_end]
                if k < ASK:  # observe, mutate or exec: not an ask-only turn
                    g_work = True
                    break
                if k == ASK:
                    g_ask = True
                    g_last_ask = g_end
                g_end += 1
            if g_work:
                while g_end < s1 and turn_l[g_end] == t:
                    g_end += 1
                run_len = 0
            elif g_ask:
                run_len += 1
                if run_len == 1:
                    run_g1_last = g_last_ask
                elif run_len == 2:
                    run_g2_start, run_g2_end, run_g2_last = g_start, g_end, g_last_ask
                else:
                    if run_len == QUESTION_LOOP_MIN_TURNS:
                        for k in range(run_g2_start, run_g2_end):
                            if kind_l[k] == ASK and finding[k] == 0:
                                charge(seg, k, QUESTION, run_g1_last, s0)
                        prev_last = run_g2_last
                    for k in range(g_start, g_end):
                        if kind_l[k] == ASK and finding[k] == 0:
                            charge(seg, k, QUESTION, prev_last, s0)
                prev_last = g_last_ask
            else:  # only "other" steps: neither asked nor worked
                run_len = 0
            g_start = g_end

    return (
        np.asarray(finding, dtype=np.int8),
        np.asarray(of_step, dtype=np.int32),
        np.asarray(total, dtype=np.int64),
        np.asarray(wasted, dtype=np.int64),
        np.asarray(bk_tokens, dtype=np.int64).reshape(n_traces, 4),
        np.asarray(bk_steps, dtype=np.int64).reshape(n_traces, 4),
    )


def _changed(j, k_i, ts, last_any, last_global, last_mut, toff, tmem):
    """True when something relevant to step i was mutated strictly after step j."""
    if k_i == EXEC or ts < 0:
        # an exec reads anything; a step with unknown targets may depend on anything
        return last_any > j
    if last_global > j:
        return True
    for m in range(toff[ts], toff[ts + 1]):
        if last_mut[tmem[m]] > j:
            return True
    return False
