"""Integer-encoded traces for the bulk burn analysis, and the dispatcher of its kernels.

``encode(traces)`` turns Step objects into numpy columns once; ``analyse_encoded`` then runs
the burn kernel (compiled ``loopcore._native_burn`` or the pure twin ``loopcore._burn_py``)
over millions of steps without touching a Python object. The kernel computes exactly the
findings of :func:`loopcore.burn.analyse_burn`; the rules are documented there and in
docs/burn.md.

Columns (one row per step, traces concatenated in order; ``trace_offsets[k]:trace_offsets[k+1]``
are the steps of trace ``k``, and step indices inside a trace are 0-based positions):

==================  =======  ===================================================================
column              dtype    meaning
==================  =======  ===================================================================
session             int32    index of the trace the step belongs to (``sessions[k]`` its name)
turn                int64    Step.turn; a run of equal turns is one turn group
kind                uint8    index into ``KINDS`` (observe, mutate, exec, ask, other)
tool                int32    interned Step.name (``tools[id]``)
target              int32    interned *set* of targets, -1 when unknown; the members of set
                             ``s`` are ``target_members[target_offsets[s]:target_offsets[s+1]]``
                             (target ids, ``targets[id]`` their names; CSR layout)
args_hash           uint64   canonical_hash(args)
result_hash         uint64   canonical_hash([result, error]); 0 when the step has no outcome
flags               uint8    HAS_OUTCOME | ERROR | ESTIMATED bits
tokens              int64    tokens_in + tokens_out
call                int32    interned (tool, args_hash): identical calls share an id
obs                 int32    interned (target set, outcome) of an observe step with both, else -1
skey / sval         int32    content-state key (target, domain) and state (key, value) ids of a
                             single-target step that reveals content, else -1 (see below)
edit / undo         int32    interned (target, old, new) of an error-free replace edit and of
                             its inverse (target, new, old), else -1
==================  =======  ===================================================================

Content signatures (for oscillation): an observe step with one target and an outcome reveals
the state ``value = result_hash`` in the domain "this exact call" (same tool and args), so only
like-for-like reads are compared. A ``mutate`` with one target whose args carry a whole new
content (``content``/``file_text``/``contents``) reveals ``value = canonical_hash(content)`` in
the domain "written content". A ``mutate`` whose args carry a replacement pair
(``old_string``/``new_string``, ``old_str``/``new_str``, ``old``/``new``, ``old_text``/
``new_text``, ``oldText``/``newText``, ``search``/``replace``) has the edit signature
``(hash(old), hash(new))``; an edit undoes an earlier one when its signature is the swap.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, NamedTuple, Sequence

import numpy as np

from ._native_flag import load
from .hashing import canonical_hash
from .trace import KINDS, Step, Trace

if TYPE_CHECKING:
    from ._burn_py import analyse_columns
else:
    analyse_columns = load("burn").analyse_columns

__all__ = [
    "ERROR",
    "ESTIMATED",
    "FINDING_KINDS",
    "HAS_OUTCOME",
    "EncodedAnalysis",
    "EncodedTrace",
    "StepFacts",
    "analyse_encoded",
    "encode",
    "step_facts",
]

OBSERVE, MUTATE, EXEC, ASK, OTHER = range(5)
_KIND_CODE = {k: i for i, k in enumerate(KINDS)}

#: Finding kinds in code order: the kernels write 1..4 (0 = not charged) into ``finding``.
FINDING_KINDS = ("redundant_observation", "duplicate_call", "oscillation", "question_loop")

HAS_OUTCOME = 1  # the step recorded a result or an error
ERROR = 2  # the step failed
ESTIMATED = 4  # its tokens were estimated, not read from usage fields

_REPLACE_KEYS = (
    ("old_string", "new_string"),
    ("old_str", "new_str"),
    ("old_text", "new_text"),
    ("oldText", "newText"),
    ("old", "new"),
    ("search", "replace"),
)
_CONTENT_KEYS = ("content", "file_text", "contents")
_WRITE_DOMAIN = ("write",)


def _h(value: Any) -> int:
    # repr as the fallback keeps exotic payloads hashable; two different objects then never
    # compare equal, which errs on the side of "not waste".
    return canonical_hash(value, default=repr)


class StepFacts(NamedTuple):
    """What the burn rules need to know about one step (shared by analyse_burn and encode)."""

    kind: int
    targets: tuple[str, ...]  # sorted, unique; () when unknown
    call: tuple[str, int]  # (name, canonical args hash)
    has_outcome: bool
    outcome: int  # canonical_hash([result, error]) or 0
    error: bool
    edit: tuple[int, int] | None  # (hash old, hash new) of an error-free replace edit
    state: tuple[tuple, int] | None  # (domain, value) of a single-target content state


# StepFacts(...) runs a Python-level __new__; building the tuple directly is the same object
# without that extra call (step_facts runs once per step of every trace analysed).
_new_facts = tuple.__new__


def step_facts(step: Step) -> StepFacts:
    """The hashed facts of *step* the burn rules compare; raises ValueError for an unknown kind."""
    kind = _KIND_CODE.get(step.kind)
    if kind is None:
        raise ValueError(f"unknown step kind {step.kind!r}; expected one of {KINDS}")
    target = step.target
    if target is None:
        targets: tuple = ()
    elif target.__class__ is str:  # the common case: one path
        targets = (target,)
    else:
        targets = tuple(sorted(set(step.targets)))
    args = step.args
    call = (step.name, canonical_hash(args, default=repr))
    result, error = step.result, step.error
    has_outcome = result is not None or error is not None
    outcome = canonical_hash([result, error], default=repr) if has_outcome else 0
    failed = error is not None
    edit = None
    state = None
    if len(targets) == 1:
        if kind == OBSERVE and has_outcome:
            state = (("call",) + call, outcome)
        elif kind == MUTATE and not failed and isinstance(args, dict):
            for old_key, new_key in _REPLACE_KEYS:
                if old_key in args and new_key in args:
                    old, new = _h(args[old_key]), _h(args[new_key])
                    if old != new:  # a no-op replacement undoes nothing
                        edit = (old, new)
                    break
            else:
                for key in _CONTENT_KEYS:
                    if key in args:
                        state = (_WRITE_DOMAIN, _h(args[key]))
                        break
    return _new_facts(StepFacts, (kind, targets, call, has_outcome, outcome, failed, edit, state))


class _Interner:
    """Dense ids in first-appearance order, so one session's ids stay close in memory."""

    __slots__ = ("ids", "items")

    def __init__(self) -> None:
        self.ids: dict[Any, int] = {}
        self.items: list[Any] = []

    def __call__(self, key: Any) -> int:
        i = self.ids.get(key)
        if i is None:
            i = self.ids[key] = len(self.items)
            self.items.append(key)
        return i

    def __len__(self) -> int:
        return len(self.items)


_STEP_COLUMNS = (
    ("session", np.int32),
    ("turn", np.int64),
    ("kind", np.uint8),
    ("tool", np.int32),
    ("target", np.int32),
    ("args_hash", np.uint64),
    ("result_hash", np.uint64),
    ("flags", np.uint8),
    ("tokens", np.int64),
    ("call", np.int32),
    ("obs", np.int32),
    ("skey", np.int32),
    ("sval", np.int32),
    ("edit", np.int32),
    ("undo", np.int32),
)
# Id columns and the size attribute that bounds them (for concat).
_ID_SPACES = (
    ("tool", "n_tools"),
    ("target", "n_target_sets"),
    ("call", "n_calls"),
    ("obs", "n_obs"),
    ("skey", "n_skeys"),
    ("sval", "n_svals"),
    ("edit", "n_edits"),
    ("undo", "n_edits"),
)


@dataclass(eq=False, repr=False)
class EncodedTrace:
    """Many traces as numpy columns (see the module doc); build it with :func:`encode`."""

    session: np.ndarray
    turn: np.ndarray
    kind: np.ndarray
    tool: np.ndarray
    target: np.ndarray
    args_hash: np.ndarray
    result_hash: np.ndarray
    flags: np.ndarray
    tokens: np.ndarray
    call: np.ndarray
    obs: np.ndarray
    skey: np.ndarray
    sval: np.ndarray
    edit: np.ndarray
    undo: np.ndarray
    trace_offsets: np.ndarray  # int64, n_traces + 1
    target_offsets: np.ndarray  # int64, n_target_sets + 1
    target_members: np.ndarray  # int32 target ids
    sessions: list
    tools: list
    targets: list
    n_calls: int
    n_obs: int
    n_skeys: int
    n_svals: int
    n_edits: int

    def __len__(self) -> int:
        return int(self.kind.shape[0])

    @property
    def n_traces(self) -> int:
        """Number of traces (sessions) encoded."""
        return int(self.trace_offsets.shape[0]) - 1

    @property
    def n_tools(self) -> int:
        """Number of distinct tool names."""
        return len(self.tools)

    @property
    def n_targets(self) -> int:
        """Number of distinct targets."""
        return len(self.targets)

    @property
    def n_target_sets(self) -> int:
        """Number of distinct target sets (a single target is a set of one)."""
        return int(self.target_offsets.shape[0]) - 1

    @property
    def error(self) -> np.ndarray:
        """Boolean column: the step failed."""
        return (self.flags & ERROR) != 0

    @property
    def has_outcome(self) -> np.ndarray:
        """Boolean column: the step recorded a result or an error."""
        return (self.flags & HAS_OUTCOME) != 0

    def __repr__(self) -> str:
        return (
            f"<EncodedTrace: {len(self)} steps in {self.n_traces} traces, "
            f"{self.n_tools} tools, {self.n_targets} targets>"
        )

    @classmethod
    def concat(cls, parts: Sequence["EncodedTrace"]) -> "EncodedTrace":
        """Concatenate encodings (each part's ids shifted into a fresh range); traces stay apart.

        Equal names in different parts get different ids, which changes nothing: every rule of
        the analysis compares steps within one trace. Raises ValueError for an empty sequence.
        """
        parts = list(parts)
        if not parts:
            raise ValueError("EncodedTrace.concat needs at least one part")
        cols: dict[str, Any] = {}
        space_of = dict(_ID_SPACES)
        sizes = sorted(set(space_of.values())) + ["n_traces", "n_targets"]
        base = dict.fromkeys(sizes, 0)
        pieces: dict[str, list] = {name: [] for name, _ in _STEP_COLUMNS}
        toff, tsoff, tmem = [np.zeros(1, np.int64)], [np.zeros(1, np.int64)], []
        step_base = member_base = 0
        for p in parts:
            for name, _ in _STEP_COLUMNS:
                col = getattr(p, name)
                if name == "session":
                    col = col + base["n_traces"]
                elif name in space_of:
                    col = np.where(col >= 0, col + base[space_of[name]], col)
                pieces[name].append(col)
            toff.append(p.trace_offsets[1:] + step_base)
            tsoff.append(p.target_offsets[1:] + member_base)
            tmem.append(p.target_members + base["n_targets"])
            step_base += len(p)
            member_base += int(p.target_members.shape[0])
            for size in sizes:
                base[size] += getattr(p, size)
        for name, dtype in _STEP_COLUMNS:
            cols[name] = np.ascontiguousarray(np.concatenate(pieces[name]), dtype=dtype)
        return cls(
            **cols,
            trace_offsets=np.concatenate(toff),
            target_offsets=np.concatenate(tsoff),
            target_members=np.ascontiguousarray(np.concatenate(tmem), dtype=np.int32),
            sessions=[s for p in parts for s in p.sessions],
            tools=[t for p in parts for t in p.tools],
            targets=[t for p in parts for t in p.targets],
            n_calls=base["n_calls"],
            n_obs=base["n_obs"],
            n_skeys=base["n_skeys"],
            n_svals=base["n_svals"],
            n_edits=base["n_edits"],
        )


def _as_traces(traces: Trace | Iterable[Trace]) -> list[Trace]:
    if isinstance(traces, Trace):
        return [traces]
    out = []
    for t in traces:
        if not isinstance(t, Trace):
            raise TypeError(f"encode() takes Trace objects; got {type(t).__name__}")
        out.append(t)
    return out


def encode(traces: Trace | Iterable[Trace]) -> EncodedTrace:
    """Encode one Trace or many into numpy columns for the bulk kernels (see the module doc).

    Hashes args and outcomes with the canonical hash and interns names, targets and keys to
    dense ints. Raises TypeError for something that is not a Trace, ValueError for a step
    with an unknown kind, and TypeError/ValueError from canonical_hash for unhashable args.
    """
    traces = _as_traces(traces)
    tools, targets, tsets = _Interner(), _Interner(), _Interner()
    calls, obs_keys, skeys, svals, edits = _Interner(), _Interner(), _Interner(), _Interner(), _Interner()
    members: list[int] = []
    set_offsets = [0]
    offsets = [0]
    rows: dict[str, list] = {name: [] for name, _ in _STEP_COLUMNS}
    (c_session, c_turn, c_kind, c_tool, c_target, c_args, c_result, c_flags, c_tokens,
     c_call, c_obs, c_skey, c_sval, c_edit, c_undo) = (rows[name] for name, _ in _STEP_COLUMNS)
    for k, trace in enumerate(traces):
        for step in trace.steps:
            f = step_facts(step)
            tool = tools(step.name)
            if f.targets:
                n_before = len(tsets)
                tset = tsets(f.targets)
                if tset == n_before:  # a new set: append its members (CSR)
                    members.extend(targets(t) for t in f.targets)
                    set_offsets.append(len(members))
            else:
                tset = -1
            call = calls((tool, f.call[1]))
            c_session.append(k)
            c_turn.append(step.turn)
            c_kind.append(f.kind)
            c_tool.append(tool)
            c_target.append(tset)
            c_args.append(f.call[1])
            c_result.append(f.outcome)
            c_flags.append(
                (HAS_OUTCOME if f.has_outcome else 0)
                | (ERROR if f.error else 0)
                | (ESTIMATED if step.tokens_estimated else 0)
            )
            c_tokens.append(step.tokens_in + step.tokens_out)
            c_call.append(call)
            c_obs.append(obs_keys((tset, f.outcome)) if f.kind == OBSERVE and tset >= 0 and f.has_outcome else -1)
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
    return EncodedTrace(
        **cols,
        trace_offsets=np.asarray(offsets, dtype=np.int64),
        target_offsets=np.asarray(set_offsets, dtype=np.int64),
        target_members=np.asarray(members, dtype=np.int32),
        sessions=[t.session for t in traces],
        tools=list(tools.items),
        targets=list(targets.items),
        n_calls=len(calls),
        n_obs=len(obs_keys),
        n_skeys=len(skeys),
        n_svals=len(svals),
        n_edits=len(edits),
    )


@dataclass(eq=False)
class EncodedAnalysis:
    """What the burn kernel computed for every step and every trace of an EncodedTrace.

    ``finding[i]`` (int8) is 0 (not charged) or 1..4 (``FINDING_KINDS[code - 1]``);
    ``of_step[i]`` (int32) is the 0-based index, inside its own trace, of the earlier step it
    repeats (-1 when not charged). Per trace: ``total_tokens``, ``wasted_tokens``, and ``by_kind_tokens`` /
    ``by_kind_steps`` of shape (n_traces, 4) in FINDING_KINDS order.
    """

    finding: np.ndarray
    of_step: np.ndarray
    total_tokens: np.ndarray
    wasted_tokens: np.ndarray
    by_kind_tokens: np.ndarray
    by_kind_steps: np.ndarray

    def __repr__(self) -> str:
        return (
            f"<EncodedAnalysis: {self.finding.shape[0]} steps, {int((self.finding != 0).sum())} charged, "
            f"{int(self.wasted_tokens.sum())}/{int(self.total_tokens.sum())} tokens wasted>"
        )


def analyse_encoded(enc: EncodedTrace, *, impl: str | None = None) -> EncodedAnalysis:
    """Run the burn kernel over *enc* (``impl`` "c"/"py" forces a twin; default: the live core).

    The findings equal :func:`loopcore.burn.analyse_burn` step for step. Raises ValueError
    when the columns are inconsistent (lengths, offsets).
    """
    kernel = analyse_columns if impl is None else load("burn", impl).analyse_columns
    out = kernel(
        enc.kind, enc.turn, enc.tokens, enc.flags, enc.result_hash, enc.target, enc.target_offsets, enc.target_members,
        enc.call, enc.obs, enc.skey, enc.sval, enc.edit, enc.undo, enc.trace_offsets,
        enc.n_targets, enc.n_calls, enc.n_obs, enc.n_skeys, enc.n_svals, enc.n_edits,
    )
    return EncodedAnalysis(*out)
