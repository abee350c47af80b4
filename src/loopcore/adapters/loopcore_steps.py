"""loopcore's own JSONL: one step per line, the schema of ``Step.to_dict()``.

=================  ========  ====================================================================
field              required  meaning
=================  ========  ====================================================================
name               yes       tool name (str)
session            no        session id; default: the file name without extensions
turn               no        index of the API call that issued the step; default: step index
kind               no        observe / mutate / exec / ask / other; default: from the profile
target             no        str, list of str, or null; default: from the profile when kind is
                             missing, else null
args, result       no        any JSON
error              no        null, or the error text / true
tokens_in/out      no        int >= 0; when both are missing they are estimated (len / 4)
tokens_estimated   no        bool
call_id            no        str
meta               no        object
reads, writes      no        list of str, or null (derived from kind and target)
ref                no        object: the step's coordinate in the trace it came from (kept as
                             written: a loopcore file is itself a copy of some trace); default:
                             its place in this file, ``{"line": N}`` (JSONL) or ``{"record": i}``
text               no        str: the reply text of the turn that issued the step
rejected           no        str: the harness's message when it rejected the action
tokens_turn        no        int >= 0: the rest of the turn's output
no_op              no        bool: the call provably changed nothing
after_user         no        bool: a message from the user came just before the step (the burn
                             rules take nothing before it as evidence of a repeat)
=================  ========  ====================================================================

A file may hold several sessions: one trace per session, in order of first appearance. A JSON
array of steps, or ``{"session": ..., "steps": [...]}``, is read the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._native_flag import NO_EXTENSIONS
from ..trace import KINDS, Step, Trace
from ._base import _new_step, estimate_tokens, text_len
from ._io import Ctx

NAME = "loopcore"
PROFILE = "generic"
_KINDS = frozenset(KINDS)
FIELDS = frozenset(
    {
        "session",
        "turn",
        "kind",
        "name",
        "target",
        "args",
        "result",
        "error",
        "tokens_in",
        "tokens_out",
        "tokens_estimated",
        "call_id",
        "meta",
        "reads",
        "writes",
        "ref",
        "text",
        "rejected",
        "tokens_turn",
        "no_op",
        "after_user",
    }
)


def _count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _own_fields(r: dict) -> tuple:
    """(reads, writes, ref, text, rejected, tokens_turn, no_op) of a record, checked and
    converted as ``Step.from_dict`` and the Step constructor check and convert them (lists of
    str become tuples); raises ValueError with from_dict's message."""
    reads = r.get("reads")
    writes = r.get("writes")
    for name, v in (("reads", reads), ("writes", writes)):
        if v is not None and not (isinstance(v, list) and all(isinstance(x, str) for x in v)):
            raise ValueError(f"{name} must be a list of strings or null")
    text = r.get("text")
    rejected = r.get("rejected")
    for name, v in (("text", text), ("rejected", rejected)):
        if v is not None and not isinstance(v, str):
            raise ValueError(f"{name} must be a string or null")
    ref = r.get("ref")
    if ref is not None and not isinstance(ref, dict):
        raise ValueError("ref must be an object or null")
    tokens_turn = r.get("tokens_turn", 0)
    if not _count(tokens_turn):
        raise ValueError("tokens_turn must be an integer >= 0")
    return (
        None if reads is None else tuple(reads),
        None if writes is None else tuple(writes),
        ref,
        text,
        rejected,
        tokens_turn,
        bool(r["no_op"]) if "no_op" in r else False,
    )


def _read_records_py(
    records: Any, ctx: Ctx, profile: Any, default_session: str, sessions: dict[str, list[Step]]
) -> None:
    """The Steps of *records* appended to ``sessions[session]`` in order; each record that is not
    a valid step is reported through ``ctx.bad`` and skipped. The pure twin of
    ``loopcore._native_ingest.read_records``."""
    for i, r in enumerate(records):
        if not isinstance(r, dict):
            ctx.bad(f"a step must be an object, got {type(r).__name__}", i)
            continue
        name = r.get("name")
        if not isinstance(name, str) or (
            not name and r.get("text") is None and r.get("rejected") is None
        ):
            # a nameless step is a turn that ran nothing: a reply (text) or a rejected action
            ctx.bad("a step needs a non-empty string 'name'", i)
            continue
        kind = r.get("kind")
        target = r.get("target")
        args = r.get("args")
        if kind is None:
            kind, classified = profile.classify(name, args)
            if target is None:
                target = classified
        elif not isinstance(kind, str) or kind not in _KINDS:  # (a list is no kind: unhashable)
            ctx.bad(f"kind must be one of {', '.join(KINDS)}; got {kind!r}", i)
            continue
        if target is not None and not isinstance(target, (str, list)):
            ctx.bad("target must be a string, a list of strings or null", i)
            continue
        session = r.get("session")
        session = default_session if session is None else str(session)
        steps = sessions.setdefault(session, [])
        turn = r.get("turn", len(steps))
        if not _count(turn):
            ctx.bad(f"turn must be an integer >= 0; got {turn!r}", i)
            continue
        tin, tout = r.get("tokens_in"), r.get("tokens_out")
        flag = bool(r.get("tokens_estimated", False))
        if tin is None and tout is None:
            tin = estimate_tokens(text_len(r.get("result")))
            tout = estimate_tokens(text_len(args) + len(name))
            flag = True
        else:
            tin = 0 if tin is None else tin
            tout = 0 if tout is None else tout
            if not (_count(tin) and _count(tout)):
                ctx.bad("tokens_in and tokens_out must be integers >= 0", i)
                continue
        meta = r.get("meta")
        try:
            reads, writes, ref, text, rejected, tokens_turn, no_op = _own_fields(r)
        except ValueError as exc:
            ctx.bad(str(exc), i)
            continue
        if "ref" not in r:
            # a step written without a coordinate of its own is cited by its place in this file
            lines = ctx.lines
            ref = {"line": lines[i]} if lines is not None and i < len(lines) else {"record": i}
        try:  # the Step's own checks (a profile's rule may give a kind that is none)
            step = _new_step(
                session,
                turn,
                kind,
                name,
                tuple(target) if target.__class__ is list else target,
                args,
                r.get("result"),
                r.get("error"),
                tin,
                tout,
                flag,
                r.get("call_id"),
                dict(meta) if isinstance(meta, dict) else {},
                reads,
                writes,
                ref,
                text,
                rejected,
                tokens_turn,
                no_op,
            )
        except ValueError as exc:
            ctx.bad(str(exc), i)
            continue
        if "after_user" in r and r["after_user"]:
            step.after_user = True
        steps.append(step)


def parse(doc: Any, ctx: Ctx) -> list[Trace]:
    """Traces from loopcore step records, one per session."""
    default_session = ctx.stem
    records = doc
    if isinstance(doc, dict):
        records = doc.get("steps") if isinstance(doc.get("steps"), list) else [doc]
        default_session = (
            str(doc.get("session") or default_session) if "steps" in doc else default_session
        )
    profile = ctx.profile(PROFILE)
    sessions: dict[str, list[Step]] = {}
    _read_records(records, ctx, profile, default_session, sessions)
    traces = []
    for n, (session, steps) in enumerate(sessions.items()):
        est = sum(1 for s in steps if s.tokens_estimated)
        source = "estimate" if est == len(steps) else ("mixed" if est else "usage")
        src = ctx.path if len(sessions) == 1 or not ctx.path else f"{ctx.path}#{n}"
        traces.append(
            Trace(steps, session=session, source=src, format=NAME, meta={"tokens_source": source})
        )
    if not traces:
        traces.append(
            Trace(
                [],
                session=default_session,
                source=ctx.path,
                format=NAME,
                meta={"tokens_source": "none"},
            )
        )
    return traces


def sniff(records: list) -> bool:
    """Records that look like steps: a name plus step fields, and no chat role."""
    for r in records[:20]:
        if (
            isinstance(r, dict)
            and isinstance(r.get("name"), str)
            and "role" not in r
            and (
                "kind" in r
                or "tokens_in" in r
                or "tokens_out" in r
                or ("session" in r and "args" in r)
            )
        ):
            return True
    return False


if TYPE_CHECKING or NO_EXTENSIONS:
    _read_records = _read_records_py
else:
    from .._native_ingest import read_records as _read_records
