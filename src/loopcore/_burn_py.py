"""The burn rules, pure-Python reference: the one place they are written down as code.

``analyse_columns`` works on the integer columns of an :class:`loopcore.encoded.EncodedTrace`
and charges every step; ``loopcore.burn.analyse_burn``, ``analyse_many`` and ``loopcore
analyse`` all run it (or its compiled twin ``loopcore._native_burn``, src/_native/burn.pyx,
which must give exactly the same arrays). docs/burn.md explains every rule with examples.

Per step, in order (a step is charged at most once, so ``wasted <= total``):

1. ``rejected_action``: the harness rejected the step's action (flag REJECTED): charged its
   whole turn (result, call and turn tokens). Nothing ran, so it changes no table.
2. ``oscillation``, three forms:
   a. an error-free edit whose (old, new) swaps an earlier edit's of the same target, with no
      exec or untargeted write between (adding a debug print, running, removing it is care);
   b. a content state returning to one seen before, after the agent mutated the target and a
      different state was seen in between, with no exec or untargeted write between;
   c. a redo: an error-free single-target mutation with the same call as an earlier one of that
      target (neither of them a command that exited non-zero, flag EXIT_NONZERO: it may have applied
      nothing), after another mutation of the target (the undo), when the redo provably lands on the
      earlier result: the call writes a whole known content (flag ABSOLUTE), the undo was the exact
      inverse edit, or the steps after the redo replay the steps after the first application (same
      calls, same outcomes) and that replay includes an observation of the target and some other
      repeated work (a re-run that taught nothing new), or the undo (the first write of the target
      after the first application) was followed by the redo with no exec in between (nothing ran
      that could have told the agent something). Charged: the redo, its replay, and for a redo whose
      result depends on the state it was applied to, the undo (it returned the target to that
      state); all of them with ``of_step`` the first application. Exec steps do not break this form:
      the evidence is what the agent saw.
   d. a redo on a restored file: right after a restore (flag RESTORE: ``cp F.orig F``, ``git
      checkout -- F``; nothing written or run since) set F to the content token F had when an
      earlier step with the same call ran (the latest backup or restore of F before that step,
      nothing run and nothing else written to F between; a backup keeps its token across
      execs, see ``_tok_before``), that call again, error-free with the same outcome. Charged:
      the redo, the restore, and the replay (the next steps that write no named target and
      repeat a call and outcome of a step between the first run and the restore).
3. ``redundant_observation``: an observe whose obs key (target set + outcome, plus the call
   when the outcome is not substantial) was seen before, nothing it reads written since.
4. ``duplicate_call``: the same call (tool + canonical args) as an earlier step, nothing it
   reads written since, and the same outcome where both recorded one.
5. ``question_loop``: the asks of the 2nd and later turns of a run of at least
   QUESTION_LOOP_MIN_TURNS consecutive ask-only turns (a second pass). A turn's answer is the
   result of its last ask (none when it has no outcome or an error); a turn answered with
   something other than the run's first turn's answer starts a new run (the person said
   something new: a clarifying interview is no loop).
6. ``degenerate_output``: the repeated part of a reply that loops on itself (``degen`` tokens,
   computed by encode() from the reply text with loopcore.textloop.repeated_spans), on a step nothing else charged.

"Written since j" for a step whose ``reads`` column is the set R (what it reads and what it
writes: writing a file again matters once something else changed it): a write of a member of
R (by a step that did not fail, or that writes several targets; for an observation, by any
step: a write that failed told the agent its picture of the target was wrong), or of
everything, strictly after j; a step that reads anything (R = -2) is changed by any write after j. A
provable no-op (writes = -1) writes nothing. Charges: a finding of kinds 2-5 costs the step's
``tokens`` (result + call), plus its ``turn_tokens`` when ``charge_turn`` is set.

A user's message (flag AFTER_USER on the first step after it) starts the evidence again: every
rule above that looks back to an earlier step j takes only steps from the latest such step on
(the person may have changed anything, or asked for the repeat), and a content token set before
it is unknown. Rejected actions, question loops and degenerate replies look at no earlier step.

Scratch tables hold *global* step indices, so an entry left by an earlier trace is simply
older than the current trace's first step and reads as "never seen": no reset between traces.
"""

from __future__ import annotations

import numpy as np

from . import _codes

__all__ = ["N_KINDS", "QUESTION_LOOP_MIN_TURNS", "analyse_columns", "findings_of", "results_of"]

OBSERVE, MUTATE, EXEC, ASK, OTHER = (
    _codes.K_OBSERVE,
    _codes.K_MUTATE,
    _codes.K_EXEC,
    _codes.K_ASK,
    _codes.K_OTHER,
)
REDUNDANT, DUPLICATE, OSCILLATION = (
    _codes.FIND_REDUNDANT,
    _codes.FIND_DUPLICATE,
    _codes.FIND_OSCILLATION,
)
QUESTION, REJECTED, DEGENERATE = _codes.FIND_QUESTION, _codes.FIND_REJECTED, _codes.FIND_DEGENERATE
#: Number of finding kinds (codes 1..N_KINDS).
N_KINDS = _codes.N_FINDING_KINDS
HAS_OUTCOME, ERROR, F_REJECTED, ABSOLUTE, BACKUP, RESTORE, AFTER_USER = (
    _codes.S_HAS_OUTCOME,
    _codes.S_ERROR,
    _codes.S_REJECTED,
    _codes.S_ABSOLUTE,
    _codes.S_BACKUP,
    _codes.S_RESTORE,
    _codes.S_AFTER_USER,
)
EXIT_NONZERO = _codes.S_EXIT_NONZERO
#: A question loop needs this many consecutive ask-only turns; the first is never charged.
QUESTION_LOOP_MIN_TURNS = 3
NOTHING, ANYTHING = -1, -2  # reads / writes that are no target set


def findings_of(rows):
    """``tuple(Finding(*row) for row in rows)``: the findings the fleet's workers send as field
    tuples, rebuilt (the reference of loopcore._native_burn.findings_of)."""
    from .burn import Finding

    return tuple(Finding(*row) for row in rows)


#: where the findings sit among a BurnReport's fields, in field order
BURN_FINDINGS_AT = 2


def results_of(packed):
    """``[TraceResult(source, session, format, steps, BurnReport(*values))]`` for each
    ``(source, session, format, steps, values)`` the fleet's workers send, the findings among
    *values* rebuilt by :func:`findings_of` (the reference of
    loopcore._native_burn.results_of)."""
    from .burn import BurnReport
    from .report import TraceResult

    out = []
    for item in packed:
        t = tuple(item)
        if len(t) != 5:
            raise ValueError(f"a packed result has 5 fields, not {len(t)}")
        burn = list(t[4])
        burn[BURN_FINDINGS_AT] = findings_of(burn[BURN_FINDINGS_AT])
        out.append(TraceResult(t[0], t[1], t[2], t[3], BurnReport(*burn)))
    return out


def _check(n, cols, trace_offsets, target_offsets, target_members, sizes):
    for name, col in cols.items():
        if col.shape[0] != n:
            raise ValueError(f"column {name} has {col.shape[0]} rows; expected {n}")
    if trace_offsets.shape[0] < 1 or trace_offsets[0] != 0 or trace_offsets[-1] != n:
        raise ValueError("trace_offsets must start at 0 and end at the number of steps")
    if np.any(np.diff(trace_offsets) < 0):
        raise ValueError("trace_offsets must be non-decreasing")
    if (
        target_offsets.shape[0] < 1
        or target_offsets[0] != 0
        or target_offsets[-1] != target_members.shape[0]
    ):
        raise ValueError("target_offsets must start at 0 and end at len(target_members)")
    if np.any(np.diff(target_offsets) <= 0):
        raise ValueError("target_offsets must be increasing: every target set has a member")
    if target_members.shape[0] and (
        target_members.min() < 0 or target_members.max() >= sizes["target_members"]
    ):
        raise ValueError("target_members holds an id outside [0, n_targets)")
    if n and (cols["kind"].max() > OTHER):
        raise ValueError("kind holds a code outside 0..4")
    for name, size in sizes.items():
        if name == "target_members" or not n:
            continue
        col = cols[name]
        low = -2 if name in ("reads", "writes") else -1
        if col.min() < low or col.max() >= size:
            raise ValueError(f"column {name} holds an id outside [{low}, {size})")
    if n and np.any(
        ((cols["skey"] >= 0) != (cols["sval"] >= 0)) | ((cols["skey"] >= 0) & (cols["target"] < 0))
    ):
        raise ValueError(
            "skey and sval must be both set or both -1, and a state key needs a target set"
        )
    if n and (
        np.any(cols["tokens"] < 0) or np.any(cols["turn_tokens"] < 0) or np.any(cols["degen"] < 0)
    ):
        raise ValueError("token columns must be >= 0")


def analyse_columns(
    kind,
    turn,
    tokens,
    turn_tokens,
    degen,
    flags,
    result_hash,
    target,
    target_offsets,
    target_members,
    reads,
    writes,
    call,
    obs,
    skey,
    sval,
    edit,
    undo,
    trace_offsets,
    n_targets,
    n_calls,
    n_obs,
    n_skeys,
    n_svals,
    n_edits,
    charge_turn=False,
):
    """Charge every step of the encoded traces; returns (finding, of_step, charge, total,
    wasted, by_kind_tokens, by_kind_steps) as numpy arrays (see EncodedAnalysis). Raises
    ValueError on inconsistent columns."""
    kind = np.asarray(kind)
    n = kind.shape[0]
    cols = dict(
        kind=kind,
        turn=np.asarray(turn),
        tokens=np.asarray(tokens),
        turn_tokens=np.asarray(turn_tokens),
        degen=np.asarray(degen),
        flags=np.asarray(flags),
        result_hash=np.asarray(result_hash),
        target=np.asarray(target),
        reads=np.asarray(reads),
        writes=np.asarray(writes),
        call=np.asarray(call),
        obs=np.asarray(obs),
        skey=np.asarray(skey),
        sval=np.asarray(sval),
        edit=np.asarray(edit),
        undo=np.asarray(undo),
    )
    trace_offsets = np.asarray(trace_offsets)
    target_offsets = np.asarray(target_offsets)
    target_members = np.asarray(target_members)
    n_sets = target_offsets.shape[0] - 1
    _check(
        n,
        cols,
        trace_offsets,
        target_offsets,
        target_members,
        dict(
            target_members=n_targets,
            target=n_sets,
            reads=n_sets,
            writes=n_sets,
            call=n_calls,
            obs=n_obs,
            skey=n_skeys,
            sval=n_svals,
            edit=n_edits,
            undo=n_edits,
        ),
    )
    if n > 0x7FFFFFFF:
        raise ValueError("at most 2**31 - 1 steps per call; analyse bigger encodings in parts")

    kind_l = kind.tolist()
    turn_l = cols["turn"].tolist()
    tokens_l = cols["tokens"].tolist()
    turn_tok_l = cols["turn_tokens"].tolist()
    degen_l = cols["degen"].tolist()
    flags_l = cols["flags"].tolist()
    res_l = cols["result_hash"].tolist()
    target_l = cols["target"].tolist()
    reads_l = cols["reads"].tolist()
    writes_l = cols["writes"].tolist()
    call_l = cols["call"].tolist()
    obs_l = cols["obs"].tolist()
    skey_l = cols["skey"].tolist()
    sval_l = cols["sval"].tolist()
    edit_l = cols["edit"].tolist()
    undo_l = cols["undo"].tolist()
    toff = target_offsets.tolist()
    tmem = target_members.tolist()
    charge_turn = bool(charge_turn)

    n_traces = trace_offsets.shape[0] - 1
    finding = [0] * n
    of_step = [-1] * n
    charged = [0] * n
    total = [0] * n_traces
    wasted = [0] * n_traces
    bk_tokens = [[0] * N_KINDS for _ in range(n_traces)]
    bk_steps = [[0] * N_KINDS for _ in range(n_traces)]

    last_mut = [-1] * n_targets  # latest write of this target
    last_mut_ok = [-1] * n_targets  # ... by a step that did not fail
    last_call = [-1] * n_calls
    last_obs = [-1] * n_obs
    last_state = [-1] * n_skeys  # latest state id revealed under this key
    last_sval = [-1] * n_svals  # latest step that revealed exactly this state
    last_edit = [-1] * n_edits
    # content tokens (oscillation d): what is known of a target's content, as a token shared by
    # targets proven equal (a backup and the file it was copied from); see _tok
    tok = [-1] * n_targets
    tok_set = [-1] * n_targets  # the step that set tok (older than the trace: nothing known)
    tok_proof = [False] * n_targets  # a backup: changed only by a write that names it
    first_touch = [-1] * n_targets  # the first step of the trace that names the target
    set_tok = [-1] * n  # the token a backup / restore step gave the file it wrote

    def charge(seg, i, code, j, s0):
        if code == REJECTED:
            c = tokens_l[i] + turn_tok_l[i]
        elif code == DEGENERATE:
            c = degen_l[i]
        else:
            c = tokens_l[i] + (turn_tok_l[i] if charge_turn else 0)
        finding[i] = code
        of_step[i] = j - s0 if j >= 0 else -1
        charged[i] = c
        wasted[seg] += c
        bk_tokens[seg][code - 1] += c
        bk_steps[seg][code - 1] += 1

    def same_outcome(i, j):
        # equal outcomes, or an outcome missing on one side
        return not (flags_l[i] & flags_l[j] & HAS_OUTCOME) or res_l[i] == res_l[j]

    for seg in range(n_traces):
        s0 = int(trace_offsets[seg])
        s1 = int(trace_offsets[seg + 1])
        last_global = -1  # latest write of everything (an exec, an untargeted mutation)
        last_mglobal = (
            -1
        )  # ... by a mutation (git stash, git checkout BRANCH): an undo of any target
        last_any = -1  # latest write of anything (a failed write of named targets aside)
        last_write = -1  # latest write of anything
        e0 = s0  # the first step that counts as evidence: the trace's, or the latest AFTER_USER

        def cur_tok(t):
            """The content token of target t now, or -1 when nothing is known of it."""
            ts_ = tok_set[t]
            if ts_ < e0 or last_mut[t] > ts_:  # noqa: B023
                return -1
            if not tok_proof[t] and last_global > ts_:  # noqa: B023
                return -1
            return tok[t]

        def changed(j, r, seen_by):
            """Was anything the reads r depend on written strictly after step j? *seen_by*: the
            latest write of each target that counts (last_mut_ok, or last_mut for an
            observation: a write of what it reads that failed told the agent its picture of
            the target was wrong, so looking again is no repeat)."""
            if r == NOTHING:
                return False
            if r == ANYTHING:
                return last_any > j  # noqa: B023 (the latest write, read at call time)
            if last_global > j:  # noqa: B023
                return True
            for m in range(toff[r], toff[r + 1]):
                if seen_by[tmem[m]] > j:
                    return True
            return False

        for i in range(s0, s1):
            k_i = kind_l[i]
            f_i = flags_l[i]
            ts = target_l[i]
            if f_i & AFTER_USER:
                e0 = i
            if f_i & F_REJECTED:
                charge(seg, i, REJECTED, -1, s0)
                continue  # nothing ran: no table changes
            if finding[i] == 0:  # else an earlier redo charged it as its replay
                code = 0
                j = -1
                # oscillation a: an error-free edit that swaps an earlier edit's old/new
                u = undo_l[i]
                if u >= 0:
                    j = last_edit[u]
                    if j >= e0 and last_global < j:
                        code = OSCILLATION
                # oscillation b: content returns to a state seen before a different one
                if code == 0:
                    sk = skey_l[i]
                    if sk >= 0:
                        j = last_sval[sval_l[i]]
                        if j >= e0 and last_global < j and last_state[sk] != sval_l[i]:
                            # ... and the agent changed the target since (latest write of it)
                            mut_t = -1
                            for m in range(toff[ts], toff[ts + 1]):
                                if last_mut[tmem[m]] > mut_t:
                                    mut_t = last_mut[tmem[m]]
                            if mut_t > j:
                                code = OSCILLATION
                # oscillation c: a redo of an earlier mutation after an undo; a command that
                # exited non-zero may have applied nothing, so it neither redoes a mutation nor
                # is one a later call redoes (a commit a hook refused, a push the remote
                # rejected, then run again)
                if (
                    code == 0
                    and k_i == MUTATE
                    and not f_i & (ERROR | RESTORE | EXIT_NONZERO)
                    and ts >= 0
                    and toff[ts + 1] - toff[ts] == 1
                    and call_l[i] >= 0
                    and _member(writes_l[i], tmem[toff[ts]], toff, tmem)
                ):
                    j = last_call[call_l[i]]
                    t = tmem[toff[ts]]
                    und = last_mut[t] if last_mut[t] > last_mglobal else last_mglobal
                    if (
                        j >= e0
                        and kind_l[j] == MUTATE
                        and not flags_l[j] & (ERROR | EXIT_NONZERO)
                        and und > j
                    ):
                        absolute = f_i & ABSOLUTE
                        confirmed = absolute or (
                            und == last_mut[t] and undo_l[und] >= 0 and undo_l[und] == edit_l[j]
                        )
                        # the replay: steps after the redo repeating the steps after the first
                        # application, call for call and outcome for outcome
                        length = 0
                        seen = other = disproved = False
                        while i + length + 1 < s1 and j + length + 1 < i:
                            a = i + length + 1
                            b = j + length + 1
                            if flags_l[a] & AFTER_USER:
                                break  # the user spoke: nothing after it replays anything
                            if (
                                call_l[a] < 0
                                or call_l[a] != call_l[b]
                                or finding[a] != 0
                                or (flags_l[a] ^ flags_l[b]) & (HAS_OUTCOME | F_REJECTED)
                                or res_l[a] != res_l[b]
                            ):
                                # the same look at the target showing something else: not redone
                                disproved = (
                                    call_l[a] >= 0
                                    and call_l[a] == call_l[b]
                                    and kind_l[a] == OBSERVE
                                    and _member(reads_l[a], t, toff, tmem)
                                )
                                break
                            if (
                                kind_l[a] == OBSERVE
                                and flags_l[a] & HAS_OUTCOME
                                and _member(reads_l[a], t, toff, tmem)
                            ):
                                seen = True
                            else:
                                other = True
                            length += 1
                        # a replay proves the redo when it shows the target as before and repeats
                        # other work too (a re-run with the same output: nothing was learned); so
                        # does an undo followed by the redo with nothing run in between that could
                        # have told the agent something new
                        if (
                            not confirmed
                            and not absolute
                            and not (seen and other)
                            and not disproved
                        ):
                            confirmed = _undone_then_redone(
                                j,
                                i,
                                t,
                                kind_l,
                                flags_l,
                                reads_l,
                                writes_l,
                                set_tok,
                                e0,
                                s0,
                                toff,
                                tmem,
                            )
                        if confirmed or (seen and other):
                            code = OSCILLATION
                            for q in range(1, length + 1):
                                charge(seg, i + q, OSCILLATION, j, s0)
                            if (
                                not absolute
                                and und == last_mut[t]
                                and finding[und] == 0
                                and kind_l[und] == MUTATE
                            ):
                                # the undo returned the target to the state the first
                                # application started from
                                charge(seg, und, OSCILLATION, j, s0)
                # oscillation d: after restoring a file, the same call as one run on that
                # same restored content (a redo across exec steps)
                if code == 0 and call_l[i] >= 0 and (k_i == MUTATE or k_i == EXEC):
                    j = last_call[call_l[i]]
                    u2 = last_write
                    if (
                        j >= e0
                        and u2 > j
                        and flags_l[u2] & RESTORE
                        and set_tok[u2] != -1
                        and _redo_after_restore(
                            i,
                            j,
                            u2,
                            kind_l,
                            flags_l,
                            res_l,
                            reads_l,
                            writes_l,
                            last_mut,
                            first_touch,
                            set_tok,
                            e0,
                            s0,
                            toff,
                            tmem,
                        )
                    ):
                        code = OSCILLATION
                        if finding[u2] == 0:
                            charge(seg, u2, OSCILLATION, j, s0)  # the undo it redoes
                        a = i + 1
                        while a < s1 and finding[a] == 0 and call_l[a] >= 0:
                            if (
                                kind_l[a] == MUTATE
                                or writes_l[a] >= 0
                                or flags_l[a] & (F_REJECTED | AFTER_USER)
                            ):
                                break
                            b = _replayed(a, j, u2, call_l, flags_l, res_l)
                            if b < 0:
                                break
                            charge(seg, a, OSCILLATION, b, s0)
                            a += 1
                seen_by = last_mut if k_i == OBSERVE else last_mut_ok
                if code == 0:
                    o = obs_l[i]
                    if o >= 0:
                        j = last_obs[o]
                        if j >= e0 and not changed(j, reads_l[i], seen_by):
                            code = REDUNDANT
                if code == 0:
                    c = call_l[i]
                    if c >= 0:
                        j = last_call[c]
                        if j >= e0 and same_outcome(i, j) and not changed(j, reads_l[i], seen_by):
                            code = DUPLICATE
                if code:
                    charge(seg, i, code, j, s0)

            if call_l[i] >= 0:
                last_call[call_l[i]] = i
            if obs_l[i] >= 0:
                last_obs[obs_l[i]] = i
            if skey_l[i] >= 0:
                last_state[skey_l[i]] = sval_l[i]
                last_sval[sval_l[i]] = i
            if edit_l[i] >= 0:
                last_edit[edit_l[i]] = i
            # the targets the step names (its write set is part of its reads column, unless
            # that column says "anything")
            r_i = reads_l[i]
            for r in (target_l[i], r_i, writes_l[i] if r_i < 0 else -1):
                if r >= 0:
                    for m in range(toff[r], toff[r + 1]):
                        if first_touch[tmem[m]] < s0:
                            first_touch[tmem[m]] = i
            if f_i & (BACKUP | RESTORE) and writes_l[i] >= 0 and not f_i & ERROR:
                d = tmem[toff[writes_l[i]]]
                src = _source(reads_l[i], d, toff, tmem)
                if src >= 0 or f_i & RESTORE:
                    if src >= 0:
                        x = cur_tok(src)
                        if x == -1:
                            x = i  # a new token: the content both now share
                        tok[src] = x
                        tok_set[src] = i
                        tok_proof[src] = not f_i & BACKUP
                    else:
                        x = -3 - d  # the committed content of d
                    tok[d] = x
                    tok_set[d] = i
                    tok_proof[d] = bool(f_i & BACKUP)
                    set_tok[i] = x
            w = writes_l[i]
            if w == ANYTHING:
                last_global = i
                last_any = i
                last_write = i
                if k_i == MUTATE:
                    last_mglobal = i
            elif w >= 0:
                # a failed write of one named target changed nothing a repeat depends on (a
                # tool checks its arguments first; a failed edit, sed -i, cp write nothing); one
                # of several targets may have half-applied. It is still a write an oscillation
                # can see
                ok = not f_i & ERROR or toff[w + 1] - toff[w] > 1
                for m in range(toff[w], toff[w + 1]):
                    last_mut[tmem[m]] = i
                    if ok:
                        last_mut_ok[tmem[m]] = i
                if ok:
                    last_any = i
                last_write = i
        total[seg] = sum(tokens_l[s0:s1]) + sum(turn_tok_l[s0:s1])

        # Question loops, a second pass: it charges only steps the pass above left uncharged,
        # and needs at least QUESTION_LOOP_MIN_TURNS asks to find anything.
        if kind_l[s0:s1].count(ASK) >= QUESTION_LOOP_MIN_TURNS:
            _question_loops(seg, s0, s1, kind_l, turn_l, flags_l, res_l, finding, charge)

        # Degenerate replies: the repeated part of a reply on a step nothing else charged.
        for i in range(s0, s1):
            if degen_l[i] > 0 and finding[i] == 0:
                charge(seg, i, DEGENERATE, i, s0)

    return (
        np.asarray(finding, dtype=np.int8),
        np.asarray(of_step, dtype=np.int32),
        np.asarray(charged, dtype=np.int64),
        np.asarray(total, dtype=np.int64),
        np.asarray(wasted, dtype=np.int64),
        np.asarray(bk_tokens, dtype=np.int64).reshape(n_traces, N_KINDS),
        np.asarray(bk_steps, dtype=np.int64).reshape(n_traces, N_KINDS),
    )


def _source(r, d, toff, tmem):
    """The source of a copy that writes d and depends on the set r: its one other member, or
    -1 (none: a restore from the committed content)."""
    if r < 0 or toff[r + 1] - toff[r] > 2:
        return -1
    for m in range(toff[r], toff[r + 1]):
        if tmem[m] != d:
            return tmem[m]
    return -1


def _tok_before(j, t, flags_l, reads_l, writes_l, set_tok, e0, s0, toff, tmem):
    """The content token of t just before step j, from the latest backup or restore of t with
    nothing run and nothing else written to t since; the committed content when t was written by
    nothing since the trace began and nothing ran (and no user's message came, e0 == s0); -1
    when unknown."""
    q = j - 1
    while q >= e0:
        w = writes_l[q]
        if w == ANYTHING:
            return -1
        if (
            flags_l[q] & (BACKUP | RESTORE)
            and set_tok[q] != -1
            and (_member(w, t, toff, tmem) or _member(reads_l[q], t, toff, tmem))
        ):
            return set_tok[q]
        if _member(w, t, toff, tmem):
            return -1
        q -= 1
    return -3 - t if e0 == s0 else -1


def _redo_after_restore(
    i,
    j,
    u2,
    kind_l,
    flags_l,
    res_l,
    reads_l,
    writes_l,
    last_mut,
    first_touch,
    set_tok,
    e0,
    s0,
    toff,
    tmem,
):
    """Oscillation d: step i repeats the call of step j (same kind, both error-free, the same
    outcome) right after the restore u2 (nothing written or run between u2 and i) set file t to
    the content t had when j ran; a mutation i writes only t and reads nothing else written
    since j; and no file the trace had named by j but t was rewritten between j and i."""
    k_i = kind_l[i]
    if kind_l[j] != k_i or (flags_l[i] | flags_l[j]) & ERROR:
        return False
    both = flags_l[i] & flags_l[j] & HAS_OUTCOME
    if (both and res_l[i] != res_l[j]) or (k_i == EXEC and not both):
        return False
    t = tmem[toff[writes_l[u2]]]
    if k_i == MUTATE:
        w = writes_l[i]
        r = reads_l[i]
        if w < 0 or toff[w + 1] - toff[w] != 1 or tmem[toff[w]] != t or r < 0:
            return False
        for m in range(toff[r], toff[r + 1]):
            if tmem[m] != t and last_mut[tmem[m]] > j:
                return False
    # a read set can miss an input (``sed '3r snippet.py' f`` reads snippet.py): no file the
    # trace had named by j but t may have been rewritten since
    for q in range(j + 1, i):
        w = writes_l[q]
        if w >= 0:
            for m in range(toff[w], toff[w + 1]):
                if tmem[m] != t and first_touch[tmem[m]] <= j:
                    return False
    return _tok_before(j, t, flags_l, reads_l, writes_l, set_tok, e0, s0, toff, tmem) == set_tok[u2]


def _replayed(a, j, u2, call_l, flags_l, res_l):
    """The latest step between j and u2 with step a's call and outcome, or -1."""
    for b in range(u2 - 1, j, -1):
        if (
            call_l[b] == call_l[a]
            and flags_l[a] & flags_l[b] & HAS_OUTCOME
            and res_l[a] == res_l[b]
            and not flags_l[b] & F_REJECTED
        ):
            return b
    return -1


def _undone_then_redone(j, i, t, kind_l, flags_l, reads_l, writes_l, set_tok, e0, s0, toff, tmem):
    """Between the first application j of a mutation of target t and its redo i: the first
    write of t after j (the undo) is followed by no exec before i; an undo that restores a
    backup must restore the content t had before j (a backup taken after j holds j's work)."""
    k = j + 1
    while k < i:
        w = writes_l[k]
        if (w == ANYTHING and kind_l[k] == MUTATE) or _member(w, t, toff, tmem):
            break
        k += 1
    else:
        return False
    for q in range(k + 1, i):
        if kind_l[q] == EXEC:
            return False
    if flags_l[k] & RESTORE and _source(reads_l[k], t, toff, tmem) >= 0:
        x = _tok_before(j, t, flags_l, reads_l, writes_l, set_tok, e0, s0, toff, tmem)
        return x != -1 and x == set_tok[k]
    return True


def _member(r, t, toff, tmem):
    """Is target t in the read set r (ANYTHING counts: it reads t too)?"""
    if r == ANYTHING:
        return False  # a read of anything proves no one target's state
    if r < 0:
        return False
    for m in range(toff[r], toff[r + 1]):
        if tmem[m] == t:
            return True
    return False


def _answer(flags_l, res_l, k):
    """The answer to the ask at *k*: its result's hash, or -1 when it got none (no outcome, or
    an error) and so asked in vain."""
    f = flags_l[k]
    return res_l[k] if f & HAS_OUTCOME and not f & ERROR else -1


def _question_loops(seg, s0, s1, kind_l, turn_l, flags_l, res_l, finding, charge):
    # A turn's answer is that of its last ask. A turn answered with something other than the
    # run's first answer moved the dialogue on (the person said something new: a plan-mode
    # interview, one question after another), so the run starts again at it; the asks of a
    # loop got no answer, or the same answer each time (a headless harness's "carry on").
    run_len = 0
    run_g1_last = run_g2_start = run_g2_end = run_g2_last = prev_last = -1
    run_answer = -1
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
            answer = _answer(flags_l, res_l, g_last_ask)
            if run_len > 0 and answer != -1 and answer != run_answer:
                run_len = 0  # a new answer: this turn may begin a loop of its own
            run_len += 1
            if run_len == 1:
                run_g1_last = g_last_ask
                run_answer = answer
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
