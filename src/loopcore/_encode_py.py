"""Pure-Python encoder (loopcore._encode_py): Steps to the integer columns of an EncodedTrace.

The reference twin of the compiled ``loopcore._native_encode``: both take a list of Traces and
return the same columns, ids interned in first-appearance order. :func:`loopcore.encoded.encode`
dispatches to one of them and documents the columns; the facts of a step are those of
:func:`loopcore.encoded.step_facts`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .encoded import (
    _ANYTHING,
    _FILE_LIKE,
    _NOTHING,
    _STEP_COLUMNS,
    _UNTARGETED,
    AFTER_USER,
    ERROR,
    ESTIMATED,
    HAS_OUTCOME,
    OBSERVE,
    BurnSettings,
    _aliases,
    _folders,
    _Interner,
    _target_names,
    _widen,
    degenerate_tokens,
    step_facts,
)
from .trace import Trace

__all__ = ["encode_columns"]


def encode_columns(traces: list[Trace], settings: BurnSettings) -> tuple[Any, ...]:
    """``(columns, trace_offsets, target_offsets, target_members, tools, targets, sizes)`` of
    *traces*, sizes being ``(n_calls, n_obs, n_skeys, n_svals, n_edits)``."""
    tools, targets, tsets = _Interner(), _Interner(), _Interner()
    calls, obs_keys, skeys, svals, edits = (
        _Interner(),
        _Interner(),
        _Interner(),
        _Interner(),
        _Interner(),
    )
    members: list[int] = []
    set_offsets = [0]
    offsets = [0]
    rows: dict[str, list] = {name: [] for name, _ in _STEP_COLUMNS}
    (
        c_session,
        c_turn,
        c_kind,
        c_tool,
        c_target,
        c_reads,
        c_writes,
        c_args,
        c_result,
        c_flags,
        c_tokens,
        c_turn_tokens,
        c_degen,
        c_call,
        c_obs,
        c_skey,
        c_sval,
        c_edit,
        c_undo,
    ) = (rows[name] for name, _ in _STEP_COLUMNS)

    def tset_of(ts: tuple[str, ...]) -> int:
        n_before = len(tsets)
        tset = tsets(ts)
        if tset == n_before:  # a new set: append its members (CSR)
            members.extend(targets(t) for t in ts)
            set_offsets.append(len(members))
        return tset

    def access(ts: tuple[str, ...] | None, own: tuple[str, ...], own_id: int) -> int:
        if ts is None:
            return _ANYTHING
        if not ts:
            return _NOTHING
        if ts == own:
            return own_id
        return tset_of(ts)

    for k, trace in enumerate(traces):
        facts = [step_facts(step, settings) for step in trace.steps]
        if any(f.reads is _UNTARGETED for f in facts) and any(
            f.writes and any(_FILE_LIKE.search(w) for w in f.writes) for f in facts
        ):
            # a trace that writes files: a search tool without a target may read any of them
            facts = [f._replace(reads=None) if f.reads is _UNTARGETED else f for f in facts]
        names = _target_names(facts)
        alias = _aliases(names)
        inside, here = _folders(names)
        wide: dict[tuple[str, ...], tuple[str, ...]] = {}  # a set of names -> with its contents
        for step, f in zip(trace.steps, facts):
            if alias and f.writes:
                wider = _widen(f.writes, alias)
                if wider is not f.writes:
                    f = f._replace(writes=wider)
            if here and f.reads and not here.isdisjoint(f.reads):
                f = f._replace(reads=None)  # the working folder or the root holds anything
            if inside:
                # a failed write of one named target wrote nothing, folder or not
                if f.writes and not (f.error and len(f.writes) == 1):
                    got = wide.get(f.writes)
                    if got is None:
                        got = wide[f.writes] = _widen(f.writes, inside)
                    if got is not f.writes:
                        f = f._replace(writes=got)
                if f.reads:
                    got = wide.get(f.reads)
                    if got is None:
                        got = wide[f.reads] = _widen(f.reads, inside)
                    if got is not f.reads:
                        f = f._replace(reads=got)
            tool = tools(step.name)
            tset = tset_of(f.targets) if f.targets else -1
            call = calls((tool, f.call[1])) if f.call is not None else -1
            c_session.append(k)
            c_turn.append(step.turn)
            c_kind.append(f.kind)
            c_tool.append(tool)
            c_target.append(tset)
            # a repeat depends on what the step reads and on what it writes (writing a file
            # again matters once something else changed it)
            if f.reads is None or f.writes is None:
                deps = None
            elif not f.writes or f.writes == f.reads:
                deps = f.reads
            else:
                deps = tuple(sorted(set(f.reads) | set(f.writes)))
            c_reads.append(access(deps, f.targets, tset))
            c_writes.append(access(f.writes, f.targets, tset))
            c_args.append(f.call[1] if f.call is not None else 0)
            c_result.append(f.outcome)
            c_flags.append(
                (HAS_OUTCOME if f.has_outcome else 0)
                | (ERROR if f.error else 0)
                | (ESTIMATED if step.tokens_estimated else 0)
                | (AFTER_USER if step.after_user else 0)
                | f.flags
            )
            c_tokens.append(step.tokens_in + step.tokens_out)
            c_turn_tokens.append(step.tokens_turn)
            c_degen.append(degenerate_tokens(step) if step.text else 0)
            c_call.append(call)
            if f.kind == OBSERVE and tset >= 0 and f.has_outcome:
                c_obs.append(
                    obs_keys((tset, f.outcome) if f.substantial else (tset, f.outcome, call))
                )
            else:
                c_obs.append(-1)
            if f.state is not None:
                domain, value = f.state
                # the domain of a read is its call id, so interned ids replace the name + args
                dom = ("call", call) if domain[0] == "call" else domain
                sk = skeys((tset, dom))
                c_skey.append(sk)
                c_sval.append(svals((sk, value)))
            else:
                c_skey.append(-1)
                c_sval.append(-1)
            if f.edit is not None:
                old, new = f.edit
                c_edit.append(edits((tset, old, new)))
                c_undo.append(edits((tset, new, old)))
            else:
                c_edit.append(-1)
                c_undo.append(-1)
        offsets.append(len(c_kind))
    cols = {name: np.asarray(rows[name], dtype=dtype) for name, dtype in _STEP_COLUMNS}
    return (
        cols,
        np.asarray(offsets, dtype=np.int64),
        np.asarray(set_offsets, dtype=np.int64),
        np.asarray(members, dtype=np.int32),
        list(tools.items),
        list(targets.items),
        (len(calls), len(obs_keys), len(skeys), len(svals), len(edits)),
    )
