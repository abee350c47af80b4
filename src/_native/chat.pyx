"""Compiled walk of OpenAI-style chat messages (loopcore._native_chat): the twin of
loopcore.adapters.openai_chat._walk_chat_py, message for message.

The walk reads every message of every chat-shaped trace (openai-chat, mini-swe-agent,
tau-bench) and feeds the Ledger; here each field is read with a C-level dict lookup and the
loop keeps its state in C locals. What it calls (the Ledger, text_of, parse_args, the result
hook) is the reference's own code, so both walks give the same steps, errors and order.
"""
from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject

from loopcore.adapters._base import parse_args, text_len, text_of
from loopcore.adapters._walk import call_unparsed

__all__ = ["walk_chat"]


cdef inline object _get(dict d, object key):
    # d.get(key) (the keys are str constants: no lookup error can arise)
    cdef PyObject* v = PyDict_GetItem(d, key)
    if v is NULL:
        return None
    return <object>v


def walk_chat(messages, ctx, ledger, *, on_result=None, index_offset=0):
    """Feed OpenAI-style chat messages into *ledger* (calls, results, context text)."""
    cdef dict m, d_extra, d_tc, d_fn, d_act
    cdef Py_ssize_t i = -1, k, n_calls
    cdef bint ok
    cdef list l_calls, l_actions
    turn = ledger.turn
    call = ledger.call
    pair = ledger.pair
    result = ledger.result
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
                    args, ok = parse_args(raw)
                args_len = (len(raw) if type(raw) is str else text_len(args)) + len(<str>name)
                if ok:
                    call(name, args, call_id, args_len=args_len)
                else:
                    call_unparsed(ledger, name, args, call_id, args_len=args_len)
        elif role == "tool" or role == "function":
            step = pair(_get(m, "tool_call_id"), _get(m, "name"))
            content = _get(m, "content")
            if type(content) is not str:
                content = text_of(content)
            if step is None:
                ledger.orphans += 1
                ledger.context(text_len(content))
                continue
            error = None
            if on_result is not None:
                content, error, meta = on_result(step, m, content)
                if meta:
                    step.meta.update(meta)
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
                ledger.reject(text if type(text) is str and text else "format error")
                continue
            ledger.context(len(content) if type(content) is str else text_len(content))
