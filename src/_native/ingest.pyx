"""The compiled parts of the trace loaders (loopcore._native_ingest).

``walk_chat`` is the twin of loopcore.adapters.openai_chat._walk_chat_py, message for message;
``new_step`` the twin of the Step constructor (loopcore.trace.Step) the Ledger builds its
steps with; ``finish`` the twin of the Ledger's token accounting (Ledger._finish_py);
``refused_steps`` the twin of loopcore.adapters._refused_steps_py.

The walk reads every message of every chat-shaped trace (openai-chat, mini-swe-agent,
tau-bench) and feeds the Ledger; here each field is read with a C-level dict lookup and the
loop keeps its state in C locals. What it calls (the Ledger, text_of, parse_args, the result
hook) is the reference's own code, so both walks give the same steps, errors and order.
"""
from cpython.dict cimport PyDict_GetItemWithError
from cpython.object cimport PyObject
from cpython.long cimport PyLong_FromVoidPtr
from cpython.ref cimport Py_INCREF, Py_XDECREF
from libc.stdint cimport uint64_t
from loopcore._native_hashing cimport hash_into
from slots cimport slot_offsets

import orjson

from loopcore.adapters._base import _FRAMING, Ledger, parse_args, text_len, text_of, usage_of
from loopcore.adapters._walk import call_unparsed
from loopcore import _native_shell
from loopcore.taxonomy import profiles as _profiles
from loopcore.trace import KINDS, Step

__all__ = ["finish", "new_step", "refused_steps", "walk_chat"]


# Step is a slots dataclass: new_step fills the slots of a new Step at their offsets (the
# member descriptors') instead of running the generated __init__ and __post_init__.
cdef enum:
    N_FIELDS = 21
cdef Py_ssize_t _OFF[N_FIELDS]
cdef object _STEP = Step
cdef frozenset _KIND_SET = frozenset(KINDS)


_FIELDS = (
    "session", "turn", "kind", "name", "target", "args", "result", "error", "tokens_in",
    "tokens_out", "tokens_estimated", "call_id", "meta", "reads", "writes", "ref", "text",
    "rejected", "tokens_turn", "no_op", "after_user",
)


cdef bint _step_slots() except -1:
    # True when Step's fields are, in order, the 20 of new_step and after_user, each a plain
    # object slot
    return tuple(Step.__dataclass_fields__) == _FIELDS and slot_offsets(_STEP, _FIELDS, _OFF)


cdef bint _SLOTS = _step_slots()
SLOT_WRITES = _SLOTS  # for the tests: new_step fills the slots itself


cdef inline void _put(object obj, int f, object value):
    cdef PyObject** slot = <PyObject**>((<char*><PyObject*>obj) + _OFF[f])
    Py_INCREF(value)
    slot[0] = <PyObject*>value  # a new object's slots are empty: nothing to release


def new_step(
    session, turn, kind, name, target, args, result, error, tokens_in, tokens_out,
    tokens_estimated, call_id, meta, reads, writes, ref, text, rejected, tokens_turn, no_op,
):
    """``Step(session, turn, ..., no_op)``, every field but ``after_user`` (False) given in
    order: the same object."""
    return _new_step(
        session, turn, kind, name, target, args, result, error, tokens_in, tokens_out,
        tokens_estimated, call_id, meta, reads, writes, ref, text, rejected, tokens_turn, no_op,
    )


cdef object _new_step(
    session, turn, kind, name, target, args, result, error, tokens_in, tokens_out,
    tokens_estimated, call_id, meta, reads, writes, ref, text, rejected, tokens_turn, no_op,
):
    if (
        not _SLOTS
        or kind not in _KIND_SET
        or isinstance(target, list)
        or (reads is not None and not isinstance(reads, tuple))
        or (writes is not None and not isinstance(writes, tuple))
    ):
        # what __post_init__ converts or refuses: the constructor itself
        return _STEP(
            session, turn, kind, name, target, args, result, error, tokens_in, tokens_out,
            tokens_estimated, call_id, meta, reads, writes, ref, text, rejected, tokens_turn,
            no_op,
        )
    obj = _STEP.__new__(_STEP)
    _put(obj, 0, session)
    _put(obj, 1, turn)
    _put(obj, 2, kind)
    _put(obj, 3, name)
    _put(obj, 4, target)
    _put(obj, 5, args)
    _put(obj, 6, result)
    _put(obj, 7, error)
    _put(obj, 8, tokens_in)
    _put(obj, 9, tokens_out)
    _put(obj, 10, tokens_estimated)
    _put(obj, 11, call_id)
    _put(obj, 12, meta)
    _put(obj, 13, reads)
    _put(obj, 14, writes)
    _put(obj, 15, ref)
    _put(obj, 16, text)
    _put(obj, 17, rejected)
    _put(obj, 18, tokens_turn)
    _put(obj, 19, no_op)
    _put(obj, 20, False)
    return obj


cdef tuple _NO_USAGE = (None, None, 0)  # loopcore.adapters._base._NO_USAGE
cdef object _LOADS = orjson.loads  # parse_args's parser and the error it answers
cdef object _JSON_ERROR = orjson.JSONDecodeError
cdef object _V2_RESULT = None  # v2_result (defined below): a hook that reads no access
cdef object _REPR = repr  # the hash's converter, read once (a builtin lookup a call otherwise)

# Profile.access for a shell tool is its rule's access, profiles._shell_access, which reads the
# command and classifies it (cached per command): done here for an exact Profile whose rule for
# the name is shell_rule and whose args hold the command as a str; anything else (other tools,
# a Profile subclass, a rule whose access was replaced) through the method itself.
cdef object _PROFILE = _profiles.Profile
cdef object _PROFILE_ACCESS = _profiles.Profile.access
cdef object _SHELL_RULE = _profiles.shell_rule
cdef object _METHOD = type(_profiles.Profile("_").access)
# The dispatcher's classifier caches per command string; the walk calls the compiled
# classifier under it directly when the name profiles._shell_access looks up is still that
# cached one: the same answer (a function of the command alone) without hashing every
# command, often a file's whole text in a heredoc, for a cache that few commands hit.
cdef object _CACHED_ACCESS = _profiles.classify_shell_access
cdef object _UNCACHED_ACCESS = _native_shell.classify_shell_access


cdef inline object _shell_access():
    # the classifier profiles._shell_access would call, looked up as it looks it up
    classify = _profiles.classify_shell_access
    return _UNCACHED_ACCESS if classify is _CACHED_ACCESS else classify


cdef object _profile_of(object access):
    # the exact Profile whose own access method *access* is, else None
    if type(access) is _METHOD and access.__func__ is _PROFILE_ACCESS:
        prof = access.__self__
        if type(prof) is _PROFILE and type(prof._cache) is dict:
            return prof
    return None


cdef object _fast_shell_cmd(object prof, object name, object args):
    # the command profiles._shell_access would classify, when Profile.access(name, args) is
    # that rule's access on an exact Profile and the command is a str; else None
    cdef object cmd
    if (
        prof is not None
        and type(args) is dict
        and _get(<dict>prof._cache, name) is _SHELL_RULE
        and getattr(_SHELL_RULE, "access", None) is _profiles._shell_access
    ):
        cmd = _get(<dict>args, "command")
        if cmd is None:
            cmd = (<dict>args).get("cmd", (<dict>args).get("script"))
        if type(cmd) is str:
            return cmd
    return None


cdef tuple _access(object prof, object access, object name, object args):
    # Profile.access(name, args), as a 5-tuple (kind, target, reads, writes, no_op)
    cmd = _fast_shell_cmd(prof, name, args)
    if cmd is not None:
        return <tuple?>_shell_access()(cmd)
    kind, target, reads, writes, no_op = access(name, args)
    return (kind, target, reads, writes, no_op)


# Shell calls of an exact Ledger are classified after the walk of their messages, not one by
# one inside it: the shell classifier's code and the walk's each stay in the instruction cache
# for a run of calls (interleaved, each evicted the other at every call). Until then such a
# Step holds placeholders ("exec", no target, reads, writes); nothing the walk runs in between
# reads them (a result hook other than v2_result, and the Ledger's reject and unparsed-call
# paths, see the classified Steps: the pending ones are classified before those run).
cdef enum:
    P_KIND = 2
    P_TARGET = 4
    P_READS = 13
    P_WRITES = 14
    P_NO_OP = 19


cdef inline void _put_again(object step, int f, object value):
    # step.<field f> = value over the placeholder a pending Step was made with (released)
    cdef PyObject** slot = <PyObject**>((<char*><PyObject*>step) + _OFF[f])
    cdef PyObject* old = slot[0]
    Py_INCREF(value)
    slot[0] = <PyObject*>value
    Py_XDECREF(old)


cdef int _classify_pending(list pending) except -1:
    # pending = [step, command, step, command, ...]: each step's access, as walk_chat would
    # have set it at the step's creation (Profile.access -> classify_shell_access)
    cdef Py_ssize_t j = 0
    classify = _shell_access()
    while j < len(pending):
        step = pending[j]
        cmd = pending[j + 1]
        j += 2
        kind, target, reads, writes, no_op = <tuple?>classify(cmd)
        reads = None if reads is None else tuple(reads)
        writes = None if writes is None else tuple(writes)
        no_op = True if no_op else False
        if kind not in _KIND_SET or isinstance(target, list):
            # what Step's __post_init__ converts or refuses: the constructor's own values
            made = _STEP(
                step.session, step.turn, kind, step.name, target, step.args, None, None, 0, 0,
                False, step.call_id, {}, reads, writes, step.ref, None, None, 0, no_op,
            )
            kind, target, reads, writes = made.kind, made.target, made.reads, made.writes
        _put_again(step, P_KIND, kind)
        _put_again(step, P_TARGET, target)
        _put_again(step, P_READS, reads)
        _put_again(step, P_WRITES, writes)
        _put_again(step, P_NO_OP, no_op)
    del pending[:]
    return 0


cdef tuple _usage(object usage):
    # usage_of(usage) or _NO_USAGE; its common case (int prompt_tokens > 0 and completion_tokens)
    # read here, the rest by usage_of itself
    cdef object p, c, d, r
    if type(usage) is dict:
        p = _get(<dict>usage, "prompt_tokens")
        c = _get(<dict>usage, "completion_tokens")
        if type(p) is int and type(c) is int and p > 0:
            d = _get(<dict>usage, "completion_tokens_details")
            r = _get(<dict>d, "reasoning_tokens") if type(d) is dict else None
            return (p, c, r if type(r) is int else 0)
    return usage_of(usage) or _NO_USAGE


cdef inline object _get(dict d, object key):
    # d.get(key) (the keys are str constants: their hash and equality cannot fail; the lookup
    # that does not save and restore the error state around itself)
    cdef PyObject* v = PyDict_GetItemWithError(d, key)
    if v is NULL:
        return None
    return <object>v


cdef object _pair(list turns, object call_id, object name):
    # Ledger.pair: by id within the latest issuing turn, then by id in earlier turns, then the
    # first open call of the latest turn with open calls (same name preferred)
    cdef Py_ssize_t latest = len(turns) - 1, t
    cdef list opens
    while latest >= 0 and not (<list>turns[latest])[5]:
        latest -= 1
    if latest < 0:
        return None
    opens = (<list>turns[latest])[5]
    if call_id:
        for s in opens:
            if s.call_id == call_id:
                return s
        for t in range(latest - 1, -1, -1):
            for s in (<list>turns[t])[5]:
                if s.call_id == call_id:
                    return s
        for s in opens:
            if s.call_id:
                return None
    if name:
        for s in opens:
            if s.name == name:
                return s
    return opens[0]


def walk_chat(messages, ctx, ledger, *, on_result=None, index_offset=0):
    """Feed OpenAI-style chat messages into *ledger* (calls, results, context text).

    For an exact Ledger, a turn, a plain call (no kind, meta, ref or access given), the pairing
    of a result with its call and the result are done here the way Ledger.turn, Ledger.call,
    Ledger.pair and Ledger.result do them (on its lists); any other ledger through its
    methods."""
    cdef bint inline = type(ledger) is Ledger
    cdef list turns = None, steps = None, args_chars = None
    cdef dict results = None
    cdef list pending = []  # shell calls classified after the walk (see _classify_pending)
    turn = ledger.turn
    call = ledger.call
    prof = access = session = None
    if inline:
        turns = ledger.turns
        steps = ledger.steps
        args_chars = ledger._args_chars
        access = ledger._access
        prof = _profile_of(access)
        session = ledger.session
        results = ledger._results
    pair = ledger.pair
    result = ledger.result
    try:
        _walk_messages(
            messages, ctx, ledger, on_result, index_offset, inline, prof, access, session,
            turns, steps, args_chars, results, turn, call, pair, result, pending,
        )
    finally:
        if pending:
            _classify_pending(pending)


cdef inline int _context(object ledger, bint inline, list turns, object chars) except -1:
    # ledger.context(chars): for an exact Ledger as Ledger.context does it, on its turns
    if not inline:
        ledger.context(chars)
    elif turns:
        t = turns[len(turns) - 1]
        t[4] += chars  # the turn's _EXTRA
    return 0


cdef int _walk_messages(
    messages, ctx, ledger, on_result, index_offset, bint inline, prof, access, session,
    list turns, list steps, list args_chars, dict results, turn, call, pair, result,
    list pending,
) except -1:
    # walk_chat's loop; shell calls of an exact Ledger are left in *pending*
    cdef dict m, d_extra, d_tc, d_fn, d_act
    cdef Py_ssize_t i = -1, k, n_calls
    cdef bint ok
    cdef list l_calls, l_actions, t_last, opens
    cdef bint hook_reads = on_result is not None and on_result is not _V2_RESULT
    for item in messages:
        i += 1
        if type(item) is not dict:
            ctx.bad(f"a chat message must be an object, got {type(item).__name__}", i + index_offset)
            continue
        m = <dict>item
        role = _get(m, "role")
        if role == "assistant":
            usage = _get(m, "usage")
            extra = _get(m, "extra")
            d_extra = None
            if type(extra) is dict:
                d_extra = <dict>extra
                if usage is None:
                    resp = _get(d_extra, "response")
                    if type(resp) is dict:
                        usage = _get(<dict>resp, "usage")
            content = _get(m, "content")
            text = content if type(content) is str else text_of(content)
            if type(text) is not str:
                text = ""
            reasoning = _get(m, "reasoning_content")
            if type(reasoning) is str and reasoning:
                text = reasoning + "\n" + text if text else reasoning
            if inline:  # Ledger.turn(usage, text=text, ref=...)
                u = _NO_USAGE if usage is None else _usage(usage)
                turns.append([u[0], u[1], u[2], len(steps), 0, [], text, {"message": i + index_offset}])
            else:
                turn(usage, text=text, ref={"message": i + index_offset})
            calls = _get(m, "tool_calls")
            if not calls:
                if isinstance(_get(m, "function_call"), dict):
                    calls = [{"function": m["function_call"], "id": None}]
                else:
                    continue
            if type(calls) is not list:
                ctx.bad("tool_calls must be a list", i + index_offset)
                continue
            l_calls = <list>calls
            n_calls = len(l_calls)
            # mini-swe-agent stores each call's parsed command in extra.actions: use it
            # rather than parsing the arguments string a second time.
            actions = _get(d_extra, "actions") if d_extra is not None else None
            l_actions = None
            if type(actions) is list and len(<list>actions) == n_calls:
                l_actions = <list>actions
            for k in range(n_calls):
                tc = l_calls[k]
                fn = _get(<dict>tc, "function") if type(tc) is dict else None
                name = _get(<dict>fn, "name") if type(fn) is dict else None
                if type(name) is not str:
                    ctx.bad("a tool call without function.name", i + index_offset)
                    continue
                d_fn = <dict>fn
                d_tc = <dict>tc
                raw = _get(d_fn, "arguments")
                call_id = _get(d_tc, "id")
                args = None
                if l_actions is not None:
                    act = l_actions[k]
                    if type(act) is dict:
                        d_act = <dict>act
                        if len(d_act) == 2 and _get(d_act, "tool_call_id") == call_id:
                            command = _get(d_act, "command")
                            if type(command) is str:
                                args = {"command": command}
                ok = True
                if args is None:
                    if type(raw) is str:  # parse_args(raw) for a str, its common case
                        if not raw:
                            args = {}
                        else:
                            try:
                                args = _LOADS(raw)
                            except _JSON_ERROR:  # the reference's answer, lone surrogates mended
                                args, ok = parse_args(raw)
                    else:
                        args, ok = parse_args(raw)
                args_len = (len(raw) if type(raw) is str else text_len(args)) + len(<str>name)
                if ok and inline and turns:  # Ledger.call(name, args, call_id, args_len=...)
                    t_last = turns[len(turns) - 1]
                    cmd = _fast_shell_cmd(prof, name, args) if _SLOTS else None
                    if cmd is not None:  # classified after the walk: placeholders until then
                        step = _new_step(
                            session, len(turns) - 1, "exec", name, None, args, None, None, 0,
                            0, False, call_id, {}, None, None, t_last[7], None, None, 0, False,
                        )
                        pending.append(step)
                        pending.append(cmd)
                    else:
                        kind, target, reads, writes, no_op = _access(prof, access, name, args)
                        step = _new_step(
                            session, len(turns) - 1, kind, name, target, args, None, None, 0,
                            0, False, call_id, {}, None if reads is None else tuple(reads),
                            None if writes is None else tuple(writes), t_last[7], None, None,
                            0, True if no_op else False,
                        )
                    steps.append(step)
                    args_chars.append(args_len)
                    (<list>t_last[5]).append(step)
                elif ok:
                    call(name, args, call_id, args_len=args_len)
                else:
                    if pending:
                        _classify_pending(pending)
                    call_unparsed(ledger, name, args, call_id, args_len=args_len)
        elif role == "tool" or role == "function":
            if inline:
                step = _pair(turns, _get(m, "tool_call_id"), _get(m, "name"))
            else:
                step = pair(_get(m, "tool_call_id"), _get(m, "name"))
            content = _get(m, "content")
            if type(content) is not str:
                content = text_of(content)
            if step is None:
                ledger.orphans += 1
                _context(ledger, inline, turns, text_len(content))
                continue
            error = None
            if on_result is not None:
                if hook_reads and pending:
                    _classify_pending(pending)
                content, error, meta = on_result(step, m, content)
                if meta:
                    step.meta.update(meta)
            if inline and type(step) is _STEP:  # Ledger.result(step, content, error)
                step.result = content
                if error is not None:
                    step.error = error
                results[id(step)] = (
                    len(<str>content) if type(content) is str else text_len(content)
                )
                t_turn = step.turn
                if type(t_turn) is int and 0 <= t_turn < len(turns):
                    opens = (<list>turns[<Py_ssize_t>t_turn])[5]
                else:
                    opens = turns.__getitem__(t_turn)[5]  # (Python indexing, as the Ledger's)
                if opens and opens[0] is step:
                    del opens[0]
                else:
                    for k in range(len(opens)):
                        if opens[k] is step:
                            del opens[k]
                            break
            else:
                result(step, content, error)
            if step.rejected is not None and type(content) is str and content:
                step.rejected = content  # the harness's own answer
        else:
            content = _get(m, "content")
            extra = _get(m, "extra")
            if (
                role == "user"
                and type(extra) is dict
                and _get(<dict>extra, "interrupt_type") == "FormatError"
            ):
                # the harness rejected a turn the trace does not keep: that turn, rejected
                text = content if type(content) is str else text_of(content)
                turn(None, text="", ref={"message": i + index_offset})
                if pending:
                    _classify_pending(pending)
                ledger.reject(text if type(text) is str and text else "format error")
                continue
            _context(
                ledger, inline, turns, len(content) if type(content) is str else text_len(content)
            )


cdef inline bint _scalar(object v):
    cdef object t = type(v)
    return t is str or v is None or t is int or t is float or t is bool


cdef bint _plain(object v):
    # loopcore.adapters._plain: canonical_hash(v) surely raises nothing
    cdef object t = type(v)
    if _scalar(v):
        return True
    if t is dict:
        if len(<dict>v) > 4096:
            return False
        for key, x in (<dict>v).items():
            if not (_scalar(key) and _scalar(x)):
                return False
        return True
    if t is list:
        if len(<list>v) > 4096:
            return False
        for x in <list>v:
            if not _scalar(x):
                return False
        return True
    return False


def refused_steps(list steps):
    """``[(index, message)]`` of the steps whose args or ``[result, error]`` canonical_hash
    refuses with ValueError, in order; the twin of loopcore.adapters._refused_steps_py."""
    cdef list out = []
    cdef Py_ssize_t i
    cdef uint64_t h
    for i in range(len(steps)):
        step = steps[i]
        args = step.args
        result = step.result
        error = step.error
        if _plain(args) and _plain(result) and _plain(error):
            continue
        try:
            hash_into(args, None, _REPR, &h)
            if result is not None or error is not None:
                hash_into([result, error], None, _REPR, &h)
        except ValueError as exc:
            out.append((i, str(exc)))
    return out


# ------------------------------------------------------------------ the Ledger's token accounting
# finish is the twin of loopcore.adapters._base._finish_py (Ledger.finish): the same
# arithmetic on the same Python ints (no C integer can overflow: usage fields are unbounded),
# statement for statement, with the turn rows and steps read from the lists in C and an exact
# Step's token fields written at their slots (anything else through setattr).

cdef enum:
    S_TOKENS_IN = 8
    S_TOKENS_OUT = 9
    S_TOKENS_ESTIMATED = 10
    S_TEXT = 16
    S_TOKENS_TURN = 18

_SET_NAMES = {
    S_TOKENS_IN: "tokens_in",
    S_TOKENS_OUT: "tokens_out",
    S_TOKENS_ESTIMATED: "tokens_estimated",
    S_TEXT: "text",
    S_TOKENS_TURN: "tokens_turn",
}


cdef inline void _set(object step, int f, object value) except *:
    # step.<field f> = value
    cdef PyObject** slot
    cdef PyObject* old
    if _SLOTS and type(step) is _STEP:
        slot = <PyObject**>((<char*><PyObject*>step) + _OFF[f])
        old = slot[0]
        Py_INCREF(value)
        slot[0] = <PyObject*>value
        Py_XDECREF(old)  # last: the old value's release may run any code
    else:
        setattr(step, _SET_NAMES[f], value)


cdef inline object _chars_of(dict results, object step):
    # results.get(id(step))
    cdef PyObject* v = PyDict_GetItemWithError(results, PyLong_FromVoidPtr(<void*>step))
    if v is NULL:
        return None
    return <object>v


cdef object _growth(list answered, prompt, nxt, completion, reasoning, extra):
    # loopcore.adapters._base._split_growth: True / False
    if prompt is not None and nxt is not None and completion is not None:
        visible = completion - reasoning
        growth = nxt - prompt - (visible if visible > 0 else 0)
        if growth >= 0:
            total = extra
            for pair in answered:
                total += (<tuple>pair)[1]
            for pair in answered:
                chars = (<tuple>pair)[1]
                _set((<tuple>pair)[0], S_TOKENS_IN, growth * chars // total if total else 0)
            return True
    for pair in answered:
        chars = (<tuple>pair)[1]
        if chars:
            s = (<tuple>pair)[0]
            _set(s, S_TOKENS_IN, (chars + 3) >> 2)
            _set(s, S_TOKENS_ESTIMATED, True)
    return False


cdef list _answered(list steps, dict results, Py_ssize_t lo, Py_ssize_t hi):
    cdef list out = []
    cdef Py_ssize_t i
    for i in range(lo, hi):
        s = steps[i]
        chars = _chars_of(results, s)
        if chars is not None:
            out.append((s, chars))
    return out


cdef tuple _split_turn(
    list steps, list args_chars, dict results, Py_ssize_t lo, Py_ssize_t hi,
    prompt, completion, reasoning, extra, text, nxt,
):
    # loopcore.adapters._base.Ledger._split_turn: (used, estimated)
    cdef int used = 0, estimated = 0
    cdef Py_ssize_t k
    tchars = len(text) if text else 0
    if hi - lo == 1:
        first = steps[lo]
        _set(first, S_TEXT, text)
        own0 = args_chars[lo]
        if completion is not None and completion >= 0:
            visible = completion - reasoning if completion > reasoning else 0
            denom = tchars + own0
            v = visible * own0 // denom if denom else 0
            if own0:
                _set(first, S_TOKENS_OUT, v)
                _set(first, S_TOKENS_TURN, completion - v)
            else:
                _set(first, S_TOKENS_OUT, completion)
            used = 1
        else:
            _set(first, S_TOKENS_ESTIMATED, True)
            if own0:
                _set(first, S_TOKENS_OUT, (own0 + 3) >> 2)
                _set(first, S_TOKENS_TURN, (tchars + 3) >> 2)
            else:
                _set(first, S_TOKENS_OUT, (tchars + 3) >> 2)
            estimated = 1
        chars = _chars_of(results, first)
        if chars is None:
            return used, estimated
        if prompt is not None and nxt is not None and completion is not None:
            visible = completion - reasoning
            growth = nxt - prompt - (visible if visible > 0 else 0)
            if growth >= 0:
                total = extra + chars
                _set(first, S_TOKENS_IN, growth * chars // total if total else 0)
                return used + 1, estimated
        if chars:
            _set(first, S_TOKENS_IN, (chars + 3) >> 2)
            _set(first, S_TOKENS_ESTIMATED, True)
        return used, estimated + 1
    own = args_chars[lo:hi]
    first = steps[lo]
    _set(first, S_TEXT, text)
    if completion is not None and completion >= 0:
        visible = completion - reasoning if completion > reasoning else 0
        denom = tchars + sum(own)
        given = 0
        for k in range(hi - lo):
            v = visible * own[k] // denom if denom else 0
            _set(steps[lo + k], S_TOKENS_OUT, v)
            given += v
        rest = completion - given
        if any(own):
            _set(first, S_TOKENS_TURN, rest)
        else:
            _set(first, S_TOKENS_OUT, first.tokens_out + rest)
        used += 1
    else:
        for k in range(hi - lo):
            s = steps[lo + k]
            _set(s, S_TOKENS_OUT, (own[k] + 3) >> 2)
            _set(s, S_TOKENS_ESTIMATED, True)
        rest = (tchars + 3) >> 2
        if any(own):
            _set(first, S_TOKENS_TURN, rest)
        else:
            _set(first, S_TOKENS_OUT, first.tokens_out + rest)
        estimated += 1
    answered = _answered(steps, results, lo, hi)
    if not answered:
        return used, estimated
    if _growth(answered, prompt, nxt, completion, reasoning, extra):
        used += 1
    else:
        estimated += 1
    return used, estimated


cdef list _context_prompts(list turns, list steps, dict results):
    # loopcore.adapters._base._context_prompts: each turn's prompt less the reasoning of the
    # turns before it when a gap shows the reasoning stays in the context (and none that it
    # does not), else as it is
    cdef list prompts = [(<list>row)[0] for row in turns]
    cdef list row
    cdef Py_ssize_t t, i, n = len(turns)
    cdef bint kept = False
    for t in range(n - 1):
        row = <list>turns[t]
        p, c, r, nxt = row[0], row[1], row[2], (<list>turns[t + 1])[0]
        if r <= 0 or p is None or c is None or nxt is None or nxt < p:
            continue
        growth = nxt - p
        extra = row[4]
        if growth + _FRAMING < c and not extra:
            return prompts  # this call's reasoning did not reach the next prompt
        if not kept:
            gap = extra
            for i in range(<Py_ssize_t>row[3], <Py_ssize_t>(<list>turns[t + 1])[3]):
                chars = _chars_of(results, steps[i])
                if chars is not None:
                    gap += chars
            kept = growth - (c - r if c > r else 0) > gap + _FRAMING
    if not kept:
        return prompts
    carried = 0
    for t in range(n):
        row = <list>turns[t]
        if prompts[t] is not None:
            prompts[t] = prompts[t] - carried
        if row[1] is not None and row[2] > 0:
            carried += row[2]
    return prompts


def finish(ledger):
    """The twin of loopcore.adapters._base._finish_py: (steps, tokens_source)."""
    cdef list steps = ledger.steps
    cdef list turns = ledger.turns
    cdef list args_chars = ledger._args_chars
    cdef dict results = ledger._results
    cdef int used = 0, estimated = 0, u, e
    cdef Py_ssize_t t, n_turns = len(turns), lo, hi, prev, k
    cdef list row, after, replies = [], merged
    cdef list sentinel = [None, None, 0, len(steps), 0, [], None, None]
    # the prompt sizes the growth rule reads (less any reasoning they carry), None last
    cdef list prompts = _context_prompts(turns, steps, results)
    prompts.append(None)
    for t in range(n_turns):
        row = turns[t]
        after = turns[t + 1] if t + 1 < n_turns else sentinel
        _prompt, completion, reasoning, lo_o, extra, _open, text, ref = row
        prompt = prompts[t]
        nxt = prompts[t + 1]
        lo = lo_o
        hi = after[3]
        if text is not None or lo == hi:
            if lo == hi:
                if text is None:
                    continue
                s = _new_step(
                    ledger.session, t, "other", "", None, None, None, None, 0, 0, False, None,
                    {}, None, None, ref, text, None, 0, False,
                )
                if completion is not None and completion >= 0:
                    _set(s, S_TOKENS_OUT, completion)
                    used += 1
                else:
                    _set(s, S_TOKENS_OUT, (len(text) + 3) >> 2 if text else 0)
                    _set(s, S_TOKENS_ESTIMATED, True)
                    estimated += 1
                replies.append((lo, s))
                continue
            u, e = _split_turn(
                steps, args_chars, results, lo, hi, prompt, completion, reasoning, extra, text,
                nxt,
            )
            used += u
            estimated += e
            continue
        if hi - lo == 1:
            s = steps[lo]
            if completion is not None and completion >= 0:
                _set(s, S_TOKENS_OUT, completion)
                used += 1
            else:
                _set(s, S_TOKENS_OUT, (args_chars[lo] + 3) >> 2)
                _set(s, S_TOKENS_ESTIMATED, True)
                estimated += 1
            chars = _chars_of(results, s)
            if chars is None:
                continue
            if prompt is not None and nxt is not None and completion is not None:
                visible = completion - reasoning
                growth = nxt - prompt - (visible if visible > 0 else 0)
                if growth >= 0:
                    total = extra + chars
                    _set(s, S_TOKENS_IN, growth * chars // total if total else 0)
                    used += 1
                    continue
            if chars:
                _set(s, S_TOKENS_IN, (chars + 3) >> 2)
                _set(s, S_TOKENS_ESTIMATED, True)
            estimated += 1
            continue
        if lo == hi:
            continue
        if completion is not None and completion >= 0:
            q, r = divmod(completion, hi - lo)
            for k in range(hi - lo):
                _set(steps[lo + k], S_TOKENS_OUT, q + (1 if k < r else 0))
            used += 1
        else:
            for k in range(lo, hi):
                s = steps[k]
                _set(s, S_TOKENS_OUT, (args_chars[k] + 3) >> 2)
                _set(s, S_TOKENS_ESTIMATED, True)
            estimated += 1
        answered = _answered(steps, results, lo, hi)
        if not answered:
            continue
        if _growth(answered, prompt, nxt, completion, reasoning, extra):
            used += 1
        else:
            estimated += 1
    if replies:
        merged = []
        prev = 0
        for pair in replies:
            pos = (<tuple>pair)[0]
            merged.extend(steps[prev:pos])
            merged.append((<tuple>pair)[1])
            prev = pos
        merged.extend(steps[prev:])
        steps[:] = merged
        ledger._replies = len(replies)
    if not steps:
        source = "none"
    elif used and estimated:
        source = "mixed"
    elif used:
        source = "usage"
    else:
        source = "estimate"
    return steps, source


# ------------------------------------------------------------------ mini-swe-agent 2.x results

cdef object _RETURNCODE = None  # loopcore.adapters.mini_swe_agent._returncode, on first use


def v2_result(step, m, content):
    """The twin of loopcore.adapters.mini_swe_agent._v2_result, the result hook of its 2.x
    walk: (content, error, None), the exit code into ``step.meta["returncode"]``."""
    global _RETURNCODE
    cdef object extra = _get(<dict>m, "extra") if type(m) is dict else m.get("extra")
    error = None
    if type(extra) is dict:
        rc = _get(<dict>extra, "returncode")
        exc = _get(<dict>extra, "exception_info")
        if exc:
            error = exc  # a time-out or a crash of the command runner, not a non-zero exit
    else:
        if _RETURNCODE is None:
            from loopcore.adapters.mini_swe_agent import _returncode

            _RETURNCODE = _returncode
        rc = _RETURNCODE(content)
    if rc is not None:
        step.meta["returncode"] = rc
    return content, error, None


_V2_RESULT = v2_result


# ---------------------------------------------------------------------------------------------
# loopcore's JSONL: the record loop of loopcore.adapters.loopcore_steps (_read_records_py), the
# same checks in the same order with the same messages. A record that is an exact dict is read
# with C lookups; a dict subclass through its own methods, as the reference reads it.

cdef str _KIND_LIST = ", ".join(KINDS)


cdef inline object _rget(object r, str key, object default):
    # r.get(key, default)
    cdef PyObject* v
    if type(r) is dict:
        v = PyDict_GetItemWithError(<dict>r, key)
        return default if v is NULL else <object>v
    return r.get(key, default)


cdef inline bint _is_count(object v) except -1:
    # loopcore_steps._count: an int (not a bool) >= 0
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


cdef str _str_list_error(object v):
    # None, or what is wrong with a reads/writes value (a list of str or None)
    if v is None:
        return None
    if isinstance(v, list):
        for x in v:
            if not isinstance(x, str):
                return "must be a list of strings or null"
        return None
    return "must be a list of strings or null"


def read_records(records, ctx, profile, default_session, dict sessions):
    """The compiled twin of ``loopcore.adapters.loopcore_steps._read_records_py``."""
    cdef Py_ssize_t i = -1
    cdef list steps
    for r in records:
        i += 1
        if not isinstance(r, dict):
            ctx.bad(f"a step must be an object, got {type(r).__name__}", i)
            continue
        name = _rget(r, "name", None)
        if not isinstance(name, str) or (
            not name and _rget(r, "text", None) is None and _rget(r, "rejected", None) is None
        ):
            ctx.bad("a step needs a non-empty string 'name'", i)
            continue
        kind = _rget(r, "kind", None)
        target = _rget(r, "target", None)
        args = _rget(r, "args", None)
        if kind is None:
            kind, classified = profile.classify(name, args)
            if target is None:
                target = classified
        elif not isinstance(kind, str) or kind not in _KIND_SET:
            ctx.bad(f"kind must be one of {_KIND_LIST}; got {kind!r}", i)
            continue
        if target is not None and not isinstance(target, (str, list)):
            ctx.bad("target must be a string, a list of strings or null", i)
            continue
        session = _rget(r, "session", None)
        session = default_session if session is None else str(session)
        steps = sessions.setdefault(session, [])
        turn = _rget(r, "turn", len(steps))
        if not _is_count(turn):
            ctx.bad(f"turn must be an integer >= 0; got {turn!r}", i)
            continue
        tin = _rget(r, "tokens_in", None)
        tout = _rget(r, "tokens_out", None)
        flag = True if _rget(r, "tokens_estimated", False) else False
        if tin is None and tout is None:
            tin = (text_len(_rget(r, "result", None)) + 3) >> 2  # estimate_tokens
            tout = (text_len(args) + len(name) + 3) >> 2
            flag = True
        else:
            tin = 0 if tin is None else tin
            tout = 0 if tout is None else tout
            if not (_is_count(tin) and _is_count(tout)):
                ctx.bad("tokens_in and tokens_out must be integers >= 0", i)
                continue
        meta = _rget(r, "meta", None)
        # loopcore_steps._own_fields
        reads = _rget(r, "reads", None)
        writes = _rget(r, "writes", None)
        problem = _str_list_error(reads)
        if problem is not None:
            ctx.bad("reads " + problem, i)
            continue
        problem = _str_list_error(writes)
        if problem is not None:
            ctx.bad("writes " + problem, i)
            continue
        text = _rget(r, "text", None)
        rejected = _rget(r, "rejected", None)
        if text is not None and not isinstance(text, str):
            ctx.bad("text must be a string or null", i)
            continue
        if rejected is not None and not isinstance(rejected, str):
            ctx.bad("rejected must be a string or null", i)
            continue
        ref = _rget(r, "ref", None)
        if ref is not None and not isinstance(ref, dict):
            ctx.bad("ref must be an object or null", i)
            continue
        tokens_turn = _rget(r, "tokens_turn", 0)
        if not _is_count(tokens_turn):
            ctx.bad("tokens_turn must be an integer >= 0", i)
            continue
        no_op = (True if r["no_op"] else False) if "no_op" in r else False
        after_user = ("after_user" in r) and (True if r["after_user"] else False)
        if "ref" not in r:
            # a step written without a coordinate of its own is cited by its place in this file
            lines = ctx.lines
            ref = {"line": lines[i]} if lines is not None and i < len(lines) else {"record": i}
        try:  # the Step's own checks (a profile's rule may give a kind that is none)
            step = _new_step(
                session, turn, kind, name, tuple(target) if type(target) is list else target,
                args, _rget(r, "result", None), _rget(r, "error", None), tin, tout, flag,
                _rget(r, "call_id", None), dict(meta) if isinstance(meta, dict) else {},
                None if reads is None else tuple(reads), None if writes is None else tuple(writes),
                ref, text, rejected, tokens_turn, no_op,
            )
        except ValueError as exc:
            ctx.bad(str(exc), i)
            continue
        if after_user:
            step.after_user = True
        steps.append(step)
