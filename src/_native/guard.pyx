"""Compiled twin of loopcore._guard_py: the guard's per-call state engine.

Same contract, parameters (by name, the ``Params`` struct of guard_params.pxd), return codes and
dump layout as the pure twin (its module doc is the reference). Each session's ring of the last ``window`` calls lives in one C block
(struct of arrays: tool, args, result, target, call id, step index, flags, kind), about
50 bytes per slot; the detector scans run over it without touching Python objects.
"""
cimport cython
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.object cimport PyTypeObject
from cpython.dict cimport PyDict_GetItemWithError
from cpython.exc cimport PyErr_Occurred
from cpython.object cimport PyObject
from cpython.list cimport PyList_GET_ITEM
from cpython.set cimport PySet_Contains
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.unicode cimport PyUnicode_GET_LENGTH, PyUnicode_READ_CHAR
from libc.stdint cimport int64_t, uint8_t, uint64_t
from libc.string cimport memset

from codes cimport (
    D_BUDGET,
    D_COMPACTION,
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
    G_BARRIER as F_BARRIER,
    G_ERROR as F_ERROR,
    G_HAS as F_HAS,
    G_UNKNOWN as F_UNKNOWN,
    K_ASK,
    K_COMPACTION,
    K_CONDENSATION,
    K_EXEC,
    K_MUTATE,
    K_OBSERVE,
    K_OTHER,
    K_USER,
    MAX_DEPTH,
    kind_from_stored,
    kind_to_stored,
)
from guard_params cimport Params
from slots cimport slot_offsets
from loopcore._native_hashing cimport hash_into, hash_into_t

from collections.abc import Mapping

from loopcore._guard_params import PARAM_NAMES

cdef enum:
    CHURN_MIN = 3
    L_WARN = 1
    L_BLOCK = 2

OTHER, OBSERVE, MUTATE, EXEC, ASK = K_OTHER, K_OBSERVE, K_MUTATE, K_EXEC, K_ASK
USER, COMPACTION, CONDENSATION = K_USER, K_COMPACTION, K_CONDENSATION
F_HAS_, F_ERROR_, F_UNKNOWN_, F_BARRIER_ = F_HAS, F_ERROR, F_UNKNOWN, F_BARRIER
CHURN_MIN_CALLS = CHURN_MIN
WARN, BLOCK = 1, 2
N_PARAMS = len(PARAM_NAMES)
DUMP_VERSION = 1

cdef uint64_t MASK64 = 0xFFFFFFFFFFFFFFFF
cdef object _REPR = repr
cdef enum:
    MAX_EVENT_KEYS = 256  # event buckets kept per session (OpenClaw's bound on its warning map)
    TOOL_CACHE = 8  # tool name objects the fast paths recognise by identity
cdef int64_t INT64_MAX = 0x7FFFFFFFFFFFFFFF


# -- result projections (same functions and results as the pure twin) ---------------------

cdef tuple _EXIT_KEYS = ("exitCode", "exit_code", "returncode", "returnCode", "exit_status", "exitStatus")
cdef tuple _OUT_KEYS = ("aggregated", "output", "stdout", "combined", "tail", "result")


cdef str _text_content(dict result):
    content = result.get("content")
    if not isinstance(content, list):
        return ""
    parts = []
    for e in <list>content:
        if isinstance(e, dict):
            t = (<dict>e).get("text")
            if isinstance(t, str):
                parts.append(t)
    return "\n".join(parts).strip()


def project_exec(result):
    """(status, exit code, timed out, output, stderr) of a shell/exec/poll result, or the result
    itself when it is not a dict of a known shape; durations, pids, cwd and timestamps are
    dropped (they change on every run and are not progress; docs/guard.md, Result hashing). Never raises."""
    return _project_exec(result)


cdef object _project_exec(result):
    if not isinstance(result, dict):
        return result
    details = (<dict>result).get("details")
    d = <dict>details if isinstance(details, dict) else <dict>result
    return _project_exec_d(<dict>result, d, d.get("status"))


cdef object _project_exec_d(dict result, dict d, status):
    # *d* is result's details (or result) and *status* d.get("status"): the fast record path
    # has looked both up already to spot a veto.
    cdef PyObject* found
    exit_code = None
    for k in _EXIT_KEYS:
        found = PyDict_GetItemWithError(d, k)  # `k in d` and `d[k]` in one lookup
        if found != NULL:
            exit_code = <object>found
            break
    output = None
    for k in _OUT_KEYS:
        v = d.get(k)
        if isinstance(v, str) and v:
            output = v
            break
    if output is None:
        output = _text_content(result) or None
    stderr = d.get("stderr")
    if not (isinstance(stderr, str) and stderr):
        stderr = None
    if status is None and exit_code is None and output is None and stderr is None:
        return result  # not a shape we know: hash it whole rather than guess
    # a tuple, not a dict: half the hashing time (see the pure twin)
    return (
        status if isinstance(status, (str, int, bool)) else None,
        exit_code if isinstance(exit_code, (int, str)) else None,
        bool(d.get("timedOut") or d.get("timed_out")),
        output,
        stderr,
    )


cdef inline bint _has_str(dict d, str key) except -1:
    # isinstance(d.get(key), str): the borrowed value is only type-tested, before anything
    # else can run
    cdef PyObject* v = PyDict_GetItemWithError(d, key)
    if v == NULL:
        return -1 if PyErr_Occurred() else 0
    return isinstance(<object>v, str)


cdef bint _is_delivery_object(dict d) except -1:
    # A message object's own `id` is its fresh per-send id; a bare `id` elsewhere (a route or
    # conversation) is a stable fact and stays (docs/guard.md, Result hashing).
    return (
        _has_str(d, "id")
        and _has_str(d, "text")
        and (_has_str(d, "direction") or _has_str(d, "senderId")
             or _has_str(d, "accountId") or isinstance(d.get("conversation"), dict))
    )


cdef void _collect_scalars(v, list out, int depth) except *:
    if isinstance(v, str):
        if len(<str>v) >= 4:
            out.append(v)
    elif isinstance(v, int) and not isinstance(v, bool):
        if v >= 1000 or v <= -1000:
            out.append(str(v))
    elif depth >= MAX_DEPTH:
        return  # deeper (or cyclic) removed values: what is collected so far is what counts
    elif isinstance(v, dict):
        for x in (<dict>v).values():
            _collect_scalars(x, out, depth + 1)
    elif isinstance(v, (list, tuple)):
        for x in v:
            _collect_scalars(x, out, depth + 1)


cdef object _strip_send(v, frozenset keys, list removed, int depth):
    cdef dict out
    cdef bint drop_id
    # Past MAX_DEPTH containers (or round a cycle) the value is kept as it is: hashing it then
    # raises its ValueError naming the path, as for any value nested too deep.
    if depth >= MAX_DEPTH:
        return v
    if isinstance(v, dict):
        drop_id = _is_delivery_object(<dict>v)
        out = {}
        for k, x in (<dict>v).items():
            if PySet_Contains(keys, k) or (drop_id and k == "id"):
                _collect_scalars(x, removed, depth + 1)
                continue
            # scalars come back unchanged: skip the call for the common exact types
            if x is None or type(x) is str or type(x) is bool or type(x) is int or type(x) is float:
                out[k] = x
            else:
                out[k] = _strip_send(x, keys, removed, depth + 1)
        return out
    if isinstance(v, (list, tuple)):
        return [_strip_send(x, keys, removed, depth + 1) for x in v]
    return v


cdef object _scrub_text(v, tuple removed, int depth):
    # Text that restates a stripped id ("sent message 4711") would defeat the strip.
    if isinstance(v, str):
        for r in removed:
            if r in v:
                v = v.replace(r, "\x00id\x00")
        return v
    if depth >= MAX_DEPTH:
        return v
    if isinstance(v, dict):
        return {k: _scrub_text(x, removed, depth + 1) for k, x in (<dict>v).items()}
    if isinstance(v, list):
        return [_scrub_text(x, removed, depth + 1) for x in v]
    return v


def _len_then_text(r):
    return (-len(r), r)


def strip_send_result(result, volatile_keys):
    """A send-like result without its per-call volatile ids (keys, delivery-object ids, and the
    text that restates them); structured ``details`` stand for the whole result when present.
    Containers deeper than MAX_DEPTH (or a cycle) are left as they are (see the pure twin)."""
    return _strip_send_result(result, volatile_keys if isinstance(volatile_keys, frozenset)
                              else frozenset(volatile_keys))


cdef enum:
    MAX_SEND_NODES = 100000  # loopcore._guard_py.MAX_SEND_NODES


cdef int _count_send_nodes(x, int depth, int64_t* seen) except -1:
    # depth-first, with no allocation: the containers below *x* (every reference counted),
    # stopping as soon as there are more than MAX_SEND_NODES
    if depth >= MAX_DEPTH:
        return 0
    if isinstance(x, dict):
        seen[0] += 1
        if seen[0] > MAX_SEND_NODES:
            return 1
        for y in (<dict>x).values():
            if (isinstance(y, (dict, list, tuple)) and _count_send_nodes(y, depth + 1, seen)):
                return 1
    elif isinstance(x, (list, tuple)):
        seen[0] += 1
        if seen[0] > MAX_SEND_NODES:
            return 1
        for y in x:
            if (isinstance(y, (dict, list, tuple)) and _count_send_nodes(y, depth + 1, seen)):
                return 1
    return 0


cdef int _check_send_size(v) except -1:
    # The send-result walks follow every reference down to MAX_DEPTH: a result holding two
    # references to itself (or a deep chain of shared sub-objects) would take 2**MAX_DEPTH steps.
    # Count the containers they would visit first and refuse past MAX_SEND_NODES.
    cdef int64_t seen = 0
    if _count_send_nodes(v, 0, &seen):
        raise ValueError(f"send-like result holds more than {MAX_SEND_NODES} nested containers "
                         "(shared or self-referential references); it cannot be stripped")
    return 0


cdef object _strip_send_result(result, frozenset keys):
    cdef list removed = []
    _check_send_size(_send_body(result))
    stripped = _strip_send(_send_body(result), keys, removed, 0)
    # Whether any text restates a stripped id does not depend on their order: sort (longest
    # first, so a longer id is not half-replaced by a shorter one) only when something does.
    if removed and _mentions(stripped, removed, 0):
        stripped = _scrub_text(stripped, tuple(sorted(removed, key=_len_then_text)), 0)
    return stripped


cdef struct SendScan:
    int64_t seen  # containers visited (the walk gives up past MAX_SEND_NODES)
    Py_ssize_t kept_max  # the length of the longest str the strip would keep


cdef int _scan_removed(v, list removed, int depth, SendScan* sc) except -1:
    # _collect_scalars, counting the containers it walks (1 past MAX_SEND_NODES): exact ints of
    # 64 bits go into *removed* as ints, turned into text only if some kept text is long enough
    # to hold them (a longer int becomes text at once: str() may refuse it, as the strip would).
    cdef int overflow
    cdef long long iv
    if isinstance(v, str):
        if PyUnicode_GET_LENGTH(v) >= 4:
            removed.append(v)
    elif type(v) is int:
        iv = PyLong_AsLongLongAndOverflow(v, &overflow)  # an exact int: this cannot fail
        if overflow:  # beyond 64 bits: far past +-1000
            removed.append(str(v))
        elif iv >= 1000 or iv <= -1000:
            removed.append(v)
    elif isinstance(v, int) and not isinstance(v, bool):
        if v >= 1000 or v <= -1000:
            removed.append(str(v))
    elif depth >= MAX_DEPTH:
        return 0
    elif isinstance(v, dict):
        sc.seen += 1
        if sc.seen > MAX_SEND_NODES:
            return 1
        for x in (<dict>v).values():
            if _scan_removed(x, removed, depth + 1, sc):
                return 1
    elif isinstance(v, (list, tuple)):
        sc.seen += 1
        if sc.seen > MAX_SEND_NODES:
            return 1
        for x in v:
            if _scan_removed(x, removed, depth + 1, sc):
                return 1
    return 0


cdef int _scan_send(v, frozenset keys, list removed, int depth, SendScan* sc) except -1:
    # _strip_send's walk without building anything: collects what it would remove into
    # *removed* and the longest text it would keep; 1 when the strip needs the full path (a
    # delivery object, whose bare id goes too, a value deeper than MAX_DEPTH, or more than
    # MAX_SEND_NODES containers, which the full path refuses), else 0.
    cdef Py_ssize_t n
    if depth >= MAX_DEPTH:
        return 1
    if isinstance(v, dict):
        sc.seen += 1
        if sc.seen > MAX_SEND_NODES or _is_delivery_object(<dict>v):
            return 1
        for k, x in (<dict>v).items():
            if PySet_Contains(keys, k):
                if _scan_removed(x, removed, depth + 1, sc):
                    return 1
            elif type(x) is str:
                n = PyUnicode_GET_LENGTH(x)
                if n > sc.kept_max:
                    sc.kept_max = n
            elif not (x is None or type(x) is bool or type(x) is int or type(x) is float):
                if _scan_send(x, keys, removed, depth + 1, sc):
                    return 1
        return 0
    if isinstance(v, (list, tuple)):
        sc.seen += 1
        if sc.seen > MAX_SEND_NODES:
            return 1
        for x in v:
            if _scan_send(x, keys, removed, depth + 1, sc):
                return 1
        return 0
    if isinstance(v, str):
        n = PyUnicode_GET_LENGTH(v)
        if n > sc.kept_max:
            sc.kept_max = n
    return 0


cdef inline Py_ssize_t _decimal_len(int64_t x) noexcept:
    # len(str(x))
    cdef Py_ssize_t n = 1
    cdef uint64_t u
    if x < 0:
        n = 2
        u = <uint64_t>0 - <uint64_t>x
    else:
        u = <uint64_t>x
    while u >= 10:
        u //= 10
        n += 1
    return n


cdef bint _mentions_kept(v, frozenset keys, list removed, int depth) except -1:
    # _mentions over what _strip_send would keep (values under stripped keys are skipped);
    # only called when _scan_send found nothing deeper than MAX_DEPTH.
    if isinstance(v, str):
        for r in removed:
            if r in <str>v:
                return True
        return False
    if isinstance(v, dict):
        for k, x in (<dict>v).items():
            if not PySet_Contains(keys, k) and _mentions_kept(x, keys, removed, depth + 1):
                return True
        return False
    if isinstance(v, (list, tuple)):
        for x in v:
            if _mentions_kept(x, keys, removed, depth + 1):
                return True
    return False


cdef inline object _send_body(result):
    # what _strip_send_result strips: structured ``details`` stand for the whole result
    if isinstance(result, dict):
        details = (<dict>result).get("details")
        if isinstance(details, dict):
            return details
    return result


cdef bint _send_needs_copy(body, frozenset keys) except -1:
    # Whether _strip_send_result must build its copy for the send result *body* (_send_body):
    # a delivery object (its bare id goes), a value deeper than MAX_DEPTH, more containers than
    # it strips (it raises), or kept text that restates a stripped id. One walk; a stripped id
    # longer than every kept text cannot be restated, so it is not looked for.
    cdef list removed = []
    cdef list texts = None
    cdef SendScan sc
    cdef int overflow
    cdef long long x
    sc.seen = 0
    sc.kept_max = 0
    if _scan_send(body, keys, removed, 0, &sc):
        return True
    if not removed or sc.kept_max < 4:
        return False
    for r in removed:
        if type(r) is int:  # 64 bits (_scan_removed)
            x = PyLong_AsLongLongAndOverflow(r, &overflow)
            if _decimal_len(x) > sc.kept_max:
                continue
            r = str(r)
        if PyUnicode_GET_LENGTH(r) <= sc.kept_max:
            if texts is None:
                texts = []
            texts.append(r)
    return texts is not None and _mentions_kept(body, keys, texts, 0)


cdef bint _mentions(v, list removed, int depth) except -1:
    # Most results never restate a stripped id: find that out without rebuilding anything.
    if isinstance(v, str):
        for r in removed:
            if r in v:
                return True
        return False
    if depth >= MAX_DEPTH:
        return False
    if isinstance(v, dict):
        for x in (<dict>v).values():
            if _mentions(x, removed, depth + 1):
                return True
        return False
    if isinstance(v, list):
        for x in v:
            if _mentions(x, removed, depth + 1):
                return True
    return False


@cython.final
cdef class State:
    """One session's guard state (ring of recent calls, budget counters, last answer)."""

    cdef uint64_t* tool
    cdef uint64_t* args
    cdef uint64_t* res
    cdef uint64_t* tgt
    cdef uint64_t* cid
    cdef int64_t* seq
    cdef uint8_t* flags
    cdef uint8_t* kind
    cdef int64_t* budget
    cdef void* block
    cdef int cap
    cdef int n
    cdef int head
    cdef int nbudget
    cdef int n_user  # user-message markers in the ring (most sessions have none: scans skip them)
    cdef int n_compaction  # compaction markers in the ring
    cdef public int64_t n_steps
    cdef public uint64_t veto_tool
    cdef public uint64_t veto_args
    cdef public int64_t out_count
    cdef public int64_t out_of_step
    cdef public uint64_t out_aux
    cdef public uint64_t out_aux2
    cdef public double touched
    cdef public object extra
    cdef object key  # its (session, run_id) key in its Table (the very object stored there)
    # the event bucket last looked up or set in ``extra`` (the dict itself, its key, its value)
    cdef object bk_dict
    cdef int bk_code
    cdef uint64_t bk_tid
    cdef uint64_t bk_x
    cdef int64_t bk_bucket

    def __cinit__(self, int cap, int nbudget):
        cdef size_t size = <size_t>cap * (5 * 8 + 8 + 2) + <size_t>nbudget * 8 + 8
        cdef char* p
        self.block = PyMem_Malloc(size)
        if self.block == NULL:
            raise MemoryError()
        memset(self.block, 0, size)
        p = <char*>self.block
        # 8-byte columns first, then the budget counters, then the byte columns: all aligned
        self.tool = <uint64_t*>p
        self.args = self.tool + cap
        self.res = self.args + cap
        self.tgt = self.res + cap
        self.cid = self.tgt + cap
        self.seq = <int64_t*>(self.cid + cap)
        self.budget = self.seq + cap
        self.flags = <uint8_t*>(self.budget + nbudget)
        self.kind = self.flags + cap
        self.cap = cap
        self.nbudget = nbudget
        self.n = 0
        self.head = 0
        self.n_user = 0
        self.n_compaction = 0
        self.out_of_step = -1
        self.extra = None

    def __dealloc__(self):
        if self.block != NULL:
            PyMem_Free(self.block)
            self.block = NULL

    def __len__(self):
        return self.n

    cdef inline void _unmark(self, uint8_t kind) noexcept nogil:
        # an entry of *kind* leaves the ring
        if kind == K_USER:
            self.n_user -= 1
        elif kind == K_COMPACTION:
            self.n_compaction -= 1

    cdef inline int ph(self, int i) noexcept nogil:
        cdef int j = self.head + i
        if j >= self.cap:
            j -= self.cap
        return j

    cdef void push(self, uint64_t tool, uint64_t args, uint64_t res, uint8_t flags, uint8_t kind,
                   uint64_t tgt, uint64_t cid) noexcept nogil:
        cdef int j
        if self.n < self.cap:
            j = self.ph(self.n)
            self.n += 1
        else:
            j = self.head
            self.head += 1
            if self.head == self.cap:
                self.head = 0
            self._unmark(self.kind[j])
        if kind == K_USER:
            self.n_user += 1
        elif kind == K_COMPACTION:
            self.n_compaction += 1
        self.tool[j] = tool
        self.args[j] = args
        self.res[j] = res
        self.flags[j] = flags
        self.kind[j] = kind
        self.tgt[j] = tgt
        self.cid[j] = cid
        self.seq[j] = self.n_steps
        self.n_steps += 1


@cython.final
cdef class Engine:
    """The per-call detector logic over integer-encoded session state (see _guard_py)."""

    cdef Params prm
    cdef int64_t* bwarn
    cdef int64_t* bblock
    cdef int nbudget
    cdef readonly int window

    def __cinit__(self, params, budget_warn, budget_block):
        cdef int i
        self.bwarn = NULL
        self.bblock = NULL
        if not isinstance(params, Mapping):
            raise ValueError("engine parameters must be a mapping of PARAM_NAMES to ints")
        missing = [n for n in PARAM_NAMES if n not in params]
        extra = sorted(set(params) - set(PARAM_NAMES))
        if missing or extra:
            raise ValueError(f"engine parameters: missing {missing}, unknown {extra}")
        if len(budget_warn) != len(budget_block):
            raise ValueError("budget_warn and budget_block differ in length")
        self.prm.window = params["window"]
        self.prm.generic_warn = params["generic_warn"]
        self.prm.generic_block = params["generic_block"]
        self.prm.poll_warn = params["poll_warn"]
        self.prm.poll_block = params["poll_block"]
        self.prm.cycle_warn = params["cycle_warn"]
        self.prm.cycle_block = params["cycle_block"]
        self.prm.cycle_periods_mask = params["cycle_periods_mask"]
        self.prm.cycle_counts_repeats = params["cycle_counts_repeats"]
        self.prm.cycle_block_needs_no_progress = params["cycle_block_needs_no_progress"]
        self.prm.repeat_warn = params["repeat_warn"]
        self.prm.repeat_block = params["repeat_block"]
        self.prm.repeat_block_needs_no_progress = params["repeat_block_needs_no_progress"]
        self.prm.global_block = params["global_block"]
        self.prm.unknown_block = params["unknown_block"]
        self.prm.error_warn = params["error_warn"]
        self.prm.error_block = params["error_block"]
        self.prm.redundant_warn = params["redundant_warn"]
        self.prm.monologue_block = params["monologue_block"]
        self.prm.argument_churn = params["argument_churn"]
        self.prm.error_any_text = params["error_any_text"]
        self.prm.repeat_reset_after_block = params["repeat_reset_after_block"]
        self.prm.repeat_warn_once = params["repeat_warn_once"]
        self.prm.budget_warn_once = params["budget_warn_once"]
        self.prm.compaction_window = params["compaction_window"]
        self.prm.monologue_any_text = params["monologue_any_text"]
        self.prm.context_block = params["context_block"]
        self.prm.repeat_warn_needs_no_progress = params["repeat_warn_needs_no_progress"]
        self.prm.cycle_evidence_recent = params["cycle_evidence_recent"]
        if self.prm.window < 1:
            raise ValueError("window must be positive")
        self.window = <int>self.prm.window
        self.nbudget = len(budget_warn)
        self.bwarn = <int64_t*>PyMem_Malloc(8 * (self.nbudget + 1))
        self.bblock = <int64_t*>PyMem_Malloc(8 * (self.nbudget + 1))
        if self.bwarn == NULL or self.bblock == NULL:
            raise MemoryError()
        for i in range(self.nbudget):
            self.bwarn[i] = budget_warn[i]
            self.bblock[i] = budget_block[i]

    def __dealloc__(self):
        PyMem_Free(self.bwarn)
        PyMem_Free(self.bblock)

    def new_state(self):
        """A fresh, empty session state."""
        return State(self.window, self.nbudget)

    cdef int _fits(self, State st) except -1:
        # A State of another engine has another block size: writing into it would go past its end.
        if st.cap != self.window or st.nbudget != self.nbudget:
            raise ValueError(f"state of another size: {st.cap} slots and {st.nbudget} budget counters, "
                             f"this engine has {self.window} and {self.nbudget}")
        return 0

    def fits(self, State st):
        """ValueError unless *st* was made by an engine of this window and budget count."""
        self._fits(st)

    def check(self, State st, uint64_t tool, uint64_t args, int kind, uint64_t target, uint64_t cid,
              bint poll, bint unknown, int bslot):
        """Decide on a call before it runs; push it into the ring unless blocked.

        Raises ValueError for a State made by an engine of another window or budget count."""
        self._fits(st)
        if bslot >= self.nbudget:
            raise IndexError("budget slot out of range")
        return _check(self, st, tool, args, kind, target, cid, poll, unknown, bslot)

    def record(self, State st, uint64_t tool, uint64_t args, uint64_t result, int flags, int kind,
               uint64_t target, uint64_t cid, int bslot, int veto):
        """Attach an outcome: 0 ignored (a guard veto), 1 attached to a pending call, 2 appended.

        *veto* is 1 for the guard's own veto (always ignored), 2 for a result that looks like
        its block message (ignored only right after blocking this very call), else 0.
        """
        self._fits(st)
        if bslot >= self.nbudget:
            raise IndexError("budget slot out of range")
        return _record(st, tool, args, result, flags, kind, target, cid, veto)

    def dump(self, State st):
        """The state as a flat list of ints (same layout in both twins); load() inverts it."""
        cdef int i, j
        out = [DUMP_VERSION, st.n_steps, st.veto_tool, st.veto_args, st.nbudget]
        for i in range(st.nbudget):
            out.append(st.budget[i])
        out.append(st.n)
        for i in range(st.n):
            j = st.ph(i)
            out.extend((st.tool[j], st.args[j], st.res[j], st.flags[j], kind_to_stored(st.kind[j]), st.tgt[j], st.cid[j], st.seq[j]))
        return out

    @cython.boundscheck(True)
    @cython.wraparound(True)
    def load(self, data):
        """Rebuild a state from dump(); ValueError when the data does not fit this engine."""
        cdef State st
        cdef int i, nb, n, pos, start, j
        # bounds checks on: a checksum-valid snapshot can still hold a short or empty dump
        if not isinstance(data, (list, tuple)):
            raise ValueError(f"state dump must be a list of ints, not {type(data).__name__}")
        try:
            if len(data) < 6:
                raise ValueError(f"state dump is too short ({len(data)} values)")
            if data[0] != DUMP_VERSION:
                raise ValueError(f"state dump version {data[0]} is not {DUMP_VERSION}")
            nb = data[4]
            if nb != self.nbudget:
                raise ValueError(f"state has {nb} budget counters, this policy has {self.nbudget}")
            if len(data) < 6 + nb:
                raise ValueError("state dump is too short for its budget counters")
            st = State(self.window, self.nbudget)
            st.n_steps = data[1]
            st.veto_tool = data[2]
            st.veto_args = data[3]
            for i in range(nb):
                st.budget[i] = data[5 + i]
            pos = 5 + nb
            n = data[pos]
            pos += 1
            if n < 0 or len(data) != pos + 8 * n:
                raise ValueError("state dump length does not match its entry count")
            start = n - self.window if n > self.window else 0
            for i in range(start, n):
                e = data[pos + 8 * i:pos + 8 * i + 8]
                j = st.n
                st.tool[j] = e[0] & MASK64
                st.args[j] = e[1] & MASK64
                st.res[j] = e[2] & MASK64
                st.flags[j] = e[3]
                st.kind[j] = e[4]
                st.kind[j] = kind_from_stored(st.kind[j])
                if st.kind[j] == K_USER:
                    st.n_user += 1
                elif st.kind[j] == K_COMPACTION:
                    st.n_compaction += 1
                st.tgt[j] = e[5] & MASK64
                st.cid[j] = e[6] & MASK64
                st.seq[j] = e[7]
                st.n += 1
        except (IndexError, TypeError, OverflowError) as exc:
            raise ValueError(f"state dump is malformed: {exc}") from None
        return st

    def nbytes(self, State st):
        """Bytes held by *st*: the C block plus the Python object header."""
        return <int>(st.cap * (5 * 8 + 8 + 2) + st.nbudget * 8 + 8) + <int>type(st).__basicsize__


cdef inline bint same(State st, int i, uint64_t tool, uint64_t args) noexcept nogil:
    cdef int j = st.ph(i)
    return st.tool[j] == tool and st.args[j] == args


cdef int _record(State st, uint64_t tool, uint64_t args, uint64_t result, int flags, int kind,
                 uint64_t target, uint64_t cid, int veto) noexcept:
    cdef int i, j
    if veto == 1 or (veto == 2 and st.veto_tool != 0 and st.veto_tool == tool and st.veto_args == args):
        # the guard's own block is not an outcome: hashing it would reset the streak (C8)
        st.veto_tool = 0
        return 0
    st.veto_tool = 0
    for i in range(st.n - 1, -1, -1):
        j = st.ph(i)
        if (st.tool[j] == tool and st.args[j] == args and not st.flags[j] & F_HAS
                and (cid == 0 or st.cid[j] == 0 or st.cid[j] == cid)):
            st.res[j] = result
            st.flags[j] |= <uint8_t>(flags | F_HAS)
            if i < st.n - 1 and st.kind[st.ph(st.n - 1)] == K_ASK:
                # an outcome arriving after agent messages: they are no longer one monologue
                st.flags[st.ph(st.n - 1)] |= F_BARRIER
            return 1
    # Budgets count check() attempts only: an outcome whose call left the window (many
    # concurrent calls in one session) must not count that call twice.
    st.push(tool, args, result, <uint8_t>(flags | F_HAS), <uint8_t>kind, target, cid)
    return 2


cdef int _event(Engine e, State st, uint64_t tool, uint64_t args, int kind) noexcept:
    # A reported event (user message, compaction, condensation): a marker in the ring.
    cdef int i, c
    if kind == K_CONDENSATION and e.prm.context_block:
        c = 1
        for i in range(st.n - 1, -1, -1):
            if st.kind[st.ph(i)] != K_CONDENSATION:
                break
            c += 1
        if c >= e.prm.context_block:
            st.veto_tool = 0
            st.out_count = c
            st.out_of_step = st.seq[st.ph(st.n - 1)] if st.n else -1
            st.out_aux = 0
            st.out_aux2 = 0
            return L_BLOCK << 4 | D_CONTEXT
    st.veto_tool = 0
    st.push(tool, args, 0, F_HAS, <uint8_t>kind, 0, 0)
    return 0


cdef int64_t _churn(State st, uint64_t tool, int64_t* of, int* variants) noexcept:
    # _guard_py.Engine._churn: calls of *tool* with an outcome when they are argument churn
    # (2-3 variants of >= CHURN_MIN calls with one outcome each, other calls <= 1 in 10), else 0.
    # Groups are kept in small arrays: more than 3 + m / 10 + 1 groups can never be churn.
    cdef int i, j, g, ng = 0, cap = st.n + 1
    cdef int64_t m = 0, covered = 0
    cdef int nstable = 0
    cdef uint64_t* ga = <uint64_t*>PyMem_Malloc(cap * 8)
    cdef uint64_t* gr = <uint64_t*>PyMem_Malloc(cap * 8)
    cdef int64_t* gc = <int64_t*>PyMem_Malloc(cap * 8)
    cdef uint8_t* gs = <uint8_t*>PyMem_Malloc(cap)
    of[0] = -1
    variants[0] = 0
    if ga == NULL or gr == NULL or gc == NULL or gs == NULL:
        PyMem_Free(ga)
        PyMem_Free(gr)
        PyMem_Free(gc)
        PyMem_Free(gs)
        return 0
    for i in range(st.n - 1, -1, -1):
        j = st.ph(i)
        if st.kind[j] == K_USER:
            break
        if st.tool[j] != tool or not st.flags[j] & F_HAS:
            continue
        m += 1
        if of[0] < 0:
            of[0] = st.seq[j]
        for g in range(ng):
            if ga[g] == st.args[j]:
                gc[g] += 1
                if gr[g] != st.res[j]:
                    gs[g] = 0
                break
        else:
            ga[ng] = st.args[j]
            gr[ng] = st.res[j]
            gc[ng] = 1
            gs[ng] = 1
            ng += 1
    for g in range(ng):
        if gs[g] and gc[g] >= CHURN_MIN:
            nstable += 1
            covered += gc[g]
    PyMem_Free(ga)
    PyMem_Free(gr)
    PyMem_Free(gc)
    PyMem_Free(gs)
    if 2 <= nstable <= 3 and (m - covered) * 10 <= m:
        variants[0] = nstable
        return m
    of[0] = -1
    return 0


cdef int64_t _after_compaction(State st, uint64_t tool, uint64_t args, int w) noexcept:
    # _guard_py.Engine._after_compaction
    cdef int n = st.n, i, q, j, j1, lo = n - w - 2
    if lo < -1:
        lo = -1
    for i in range(n - 1, lo, -1):
        j = st.ph(i)
        if st.kind[j] == K_COMPACTION:
            if n - 1 - i != w:
                return 0
            j1 = st.ph(i + 1)
            for q in range(i + 1, n):
                j = st.ph(q)
                if st.tool[j] != tool or st.args[j] != args or not st.flags[j] & F_HAS or st.res[j] != st.res[j1]:
                    return 0
            return w
    return 0


cdef int _check(Engine e, State st, uint64_t tool, uint64_t args, int kind, uint64_t target,
                uint64_t cid, bint poll, bint unknown, int bslot) noexcept:
    cdef Params* p = &e.prm
    cdef int n = st.n
    cdef int i, j, k, q, a, b, t, L, lo, best_k
    cdef int block = 0, warn = 0
    cdef int64_t b_count = 0, w_count = 0, b_of = -1, w_of = -1
    cdef uint64_t b_aux = 0, w_aux = 0, b_aux2 = 0, w_aux2 = 0
    cdef int64_t bcount = 0, s, np_ = 0, np_of = -1, es = 0, rc = 0, rc_of = -1, c, best_c, of, nt = 0
    cdef uint64_t np_res = 0, es_res = 0, combo, ta, aa, tb, ab, tq, aq
    cdef bint np_done = False, es_done = False, distinct, ev, best_ev, users
    cdef uint8_t f, ki
    cdef int variants = 0

    if kind >= K_USER:
        return _event(e, st, tool, args, kind)
    st.veto_tool = 0
    if bslot >= 0:
        st.budget[bslot] += 1
        bcount = st.budget[bslot]

    # unknown_tool: newest consecutive calls of this tool that turned out not to exist
    if p.unknown_block:
        s = 0
        for i in range(n - 1, -1, -1):
            j = st.ph(i)
            if st.tool[j] != tool or not st.flags[j] & F_UNKNOWN:
                break
            s += 1
        if s >= p.unknown_block:
            block = D_UNKNOWN
            b_count = s
            b_of = st.seq[st.ph(n - 1)]

    # identical-call streaks over calls with an outcome (other calls are skipped); nt counts
    # this tool's calls with an outcome over the same stretch (what argument churn counts)
    users = st.n_user != 0
    for i in range(n - 1, -1, -1):
        j = st.ph(i)
        if st.tool[j] != tool:
            if users and st.kind[j] == K_USER:
                break
            continue
        f = st.flags[j]
        if st.args[j] != args:
            if users and st.kind[j] == K_USER:
                break
            if f & F_HAS:
                nt += 1
            continue
        rc += 1
        if rc_of < 0:
            rc_of = st.seq[j]
        if not f & F_HAS:
            continue
        nt += 1
        if not np_done:
            if np_ == 0:
                np_res = st.res[j]
                np_ = 1
                np_of = st.seq[j]
            elif st.res[j] == np_res:
                np_ += 1
            else:
                np_done = True
        if not es_done:
            if not f & F_ERROR:
                es_done = True
            elif es == 0:
                es = 1
                es_res = st.res[j]
            elif st.res[j] == es_res or p.error_any_text:
                es += 1
            else:
                es_done = True

    if not block and p.global_block and np_ >= p.global_block:
        block = D_GLOBAL
        b_count = np_
        b_of = np_of
        b_aux2 = np_res
    # churn counts at most nt calls: below the breaker's threshold it cannot block
    if not block and p.argument_churn and p.global_block and nt >= p.global_block:
        c = _churn(st, tool, &of, &variants)
        if c >= p.global_block:
            block = D_GLOBAL
            b_count = c
            b_of = of
            b_aux = <uint64_t>variants

    if not block and p.compaction_window and st.n_compaction and n >= p.compaction_window:
        c = _after_compaction(st, tool, args, <int>p.compaction_window)
        if c:
            block = D_COMPACTION
            b_count = c
            b_of = st.seq[st.ph(n - 1)]

    if poll:
        if not block and p.poll_block and np_ >= p.poll_block:
            block = D_POLL
            b_count = np_
            b_of = np_of
            b_aux2 = np_res
        if not warn and p.poll_warn and np_ >= p.poll_warn:
            warn = D_POLL
            w_count = np_
            w_of = np_of
            w_aux2 = np_res

    # cycle of period 2..5 (distinct calls) ending with the checked call
    if p.cycle_periods_mask:
        best_c = 0
        best_k = 0
        best_ev = False
        for k in range(2, 6):
            if not p.cycle_periods_mask & (1 << k) or n < k:
                continue
            j = st.ph(n - k)
            if st.tool[j] != tool or st.args[j] != args:
                continue  # the call k back differs: no period-k repetition ends here (t == 0)
            # how far the period-k repetition reaches back (the call k back must equal this one;
            # most calls stop here, so this runs before the distinctness test below)
            t = 0
            q = n - k
            while q >= 0:
                if q + k == n:
                    tq = tool
                    aq = args
                else:
                    j = st.ph(q + k)
                    tq = st.tool[j]
                    aq = st.args[j]
                if not same(st, q, tq, aq):
                    break
                t += 1
                q -= 1
            if t == 0:
                continue
            # the unit s[n-k+1..n] must be k distinct calls (so k is the minimal period), none
            # of them a user message (see the pure twin)
            distinct = True
            for a in range(n - k + 1, n + 1):
                if a == n:
                    ta = tool
                    aa = args
                else:
                    j = st.ph(a)
                    if users and st.kind[j] == K_USER:
                        distinct = False
                        break
                    ta = st.tool[j]
                    aa = st.args[j]
                for b in range(a + 1, n + 1):
                    if b == n:
                        tb = tool
                        ab = args
                    else:
                        j = st.ph(b)
                        tb = st.tool[j]
                        ab = st.args[j]
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
                    q = n - <int>(p.cycle_block * k if p.cycle_counts_repeats else p.cycle_block) + 1
                    if q > lo:
                        lo = q
                for q in range(lo, n):
                    j = st.ph(q)
                    if not st.flags[j] & F_HAS or (q - k >= lo and st.res[j] != st.res[st.ph(q - k)]):
                        ev = False
                        break
                best_c = c
                best_k = k
                best_ev = ev
        if best_c:
            combo = args + <uint64_t>best_k
            for q in range(n - best_k + 1, n):
                combo += st.args[st.ph(q)]
            if not block and p.cycle_block and best_c >= p.cycle_block and (best_ev or not p.cycle_block_needs_no_progress):
                block = D_CYCLE
                b_count = best_c
                b_of = st.seq[st.ph(n - best_k)]
                b_aux = st.tool[st.ph(n - 1)]
                b_aux2 = combo
            if not warn and p.cycle_warn and best_c >= p.cycle_warn:
                warn = D_CYCLE
                w_count = best_c
                w_of = st.seq[st.ph(n - best_k)]
                w_aux = st.tool[st.ph(n - 1)]
                w_aux2 = combo

    # the same call failing (before the consecutive count: a failure's streak is the better name)
    if es:
        if not block and p.error_block and es >= p.error_block:
            block = D_ERROR
            b_count = es
            b_of = rc_of
            b_aux2 = es_res
        if not warn and p.error_warn and es >= p.error_warn:
            warn = D_ERROR
            w_count = es
            w_of = rc_of
            w_aux2 = es_res

    # consecutive identical calls (period 1), counting the checked call; polls are judged by
    # poll_no_progress instead
    if (p.repeat_warn or p.repeat_block) and not poll:
        t = 0
        ev = True
        for i in range(n - 1, -1, -1):
            j = st.ph(i)
            if st.tool[j] != tool or st.args[j] != args or st.flags[j] & F_BARRIER:
                break
            # failures are no evidence here when error_streak judges them
            if (not st.flags[j] & F_HAS or (t and st.res[j] != st.res[st.ph(i + 1)])
                    or (st.flags[j] & F_ERROR and (p.error_warn or p.error_block))):
                ev = False
            t += 1
        if t:
            L = t + 1
            if not block and p.repeat_block and L >= p.repeat_block and (ev or not p.repeat_block_needs_no_progress):
                block = D_REPEAT
                b_count = L
                b_of = st.seq[st.ph(n - 1)]
            if (not warn and p.repeat_warn and L >= p.repeat_warn and (ev or not p.repeat_warn_needs_no_progress)
                    and (L == p.repeat_warn or not p.repeat_warn_once)):
                warn = D_REPEAT
                w_count = L
                w_of = st.seq[st.ph(n - 1)]

    # agent messages with no tool call between (identical ones, or any with p.monologue_any_text)
    if p.monologue_block and kind == K_ASK:
        t = 0
        for i in range(n - 1, -1, -1):
            j = st.ph(i)
            if (st.kind[j] != K_ASK or st.flags[j] & F_BARRIER
                    or (not p.monologue_any_text and (st.tool[j] != tool or st.args[j] != args))):
                break
            t += 1
        if p.monologue_any_text:
            t += 1
        if not block and t >= p.monologue_block:
            block = D_MONOLOGUE
            b_count = t
            b_of = st.seq[st.ph(n - 1)] if n else -1

    if not poll:
        if not block and p.generic_block and np_ >= p.generic_block:
            block = D_GENERIC
            b_count = np_
            b_of = np_of
            b_aux2 = np_res
        if not warn and p.generic_warn and rc >= p.generic_warn:
            warn = D_GENERIC
            w_count = rc
            w_of = rc_of

    if bcount:
        if not block and e.bblock[bslot] and bcount >= e.bblock[bslot]:
            block = D_BUDGET
            b_count = bcount
        if (not warn and e.bwarn[bslot] and bcount >= e.bwarn[bslot]
                and (bcount == e.bwarn[bslot] or not p.budget_warn_once)):
            warn = D_BUDGET
            w_count = bcount

    if p.redundant_warn and kind == K_OBSERVE and target and not warn:
        c = 0
        of = -1
        for i in range(n - 1, -1, -1):
            j = st.ph(i)
            ki = st.kind[j]
            if ki == K_EXEC or ki == K_USER or (ki == K_MUTATE and (st.tgt[j] == target or st.tgt[j] == 0)):
                break
            f = st.flags[j]
            if (ki == K_OBSERVE and st.tgt[j] == target and st.tool[j] == tool and st.args[j] == args
                    and f & F_HAS and not f & F_ERROR):
                c += 1
                if of < 0:
                    of = st.seq[j]
        if c >= p.redundant_warn:
            warn = D_REDUNDANT
            w_count = c
            w_of = of

    if block:
        st.veto_tool = tool
        st.veto_args = args
        st.out_count = b_count
        st.out_of_step = b_of
        st.out_aux = b_aux
        st.out_aux2 = b_aux2
        if block == D_REPEAT and p.repeat_reset_after_block:
            st.flags[st.ph(n - 1)] |= F_BARRIER  # the count starts again after this refusal
        return L_BLOCK << 4 | block
    st.push(tool, args, 0, F_UNKNOWN if unknown else 0, <uint8_t>kind, target, cid)
    if warn:
        st.out_count = w_count
        st.out_of_step = w_of
        st.out_aux = w_aux
        st.out_aux2 = w_aux2
        return L_WARN << 4 | warn
    return 0


cdef extern from "<time.h>" nogil:
    ctypedef int clockid_t
    cdef struct timespec:
        long tv_sec
        long tv_nsec
    int clock_gettime(clockid_t clk, timespec* tp)


cdef extern from *:
    """
    /* Idle times only need millisecond resolution: the coarse monotonic clock (same timeline,
       updated every tick) costs a third of the precise one, which was read twice per call. */
    #ifdef CLOCK_MONOTONIC_COARSE
    #define LOOPCORE_IDLE_CLOCK CLOCK_MONOTONIC_COARSE
    #else
    #define LOOPCORE_IDLE_CLOCK CLOCK_MONOTONIC
    #endif
    """
    clockid_t LOOPCORE_IDLE_CLOCK


@cython.final
cdef class ToolInfo:
    """What the fast path needs to know about one tool name (registered by the Guard)."""

    cdef readonly uint64_t tid
    cdef readonly int bslot
    cdef readonly bint poll
    cdef readonly object poll_actions
    cdef readonly bint unknown
    cdef readonly bint exec
    cdef readonly bint send
    cdef readonly object send_actions

    def __cinit__(self, uint64_t tid, int bslot, bint poll, poll_actions, bint unknown, bint exec_, bint send,
                  send_actions):
        self.tid = tid
        self.bslot = bslot
        self.poll = poll
        self.poll_actions = poll_actions
        self.unknown = unknown
        self.exec = exec_
        self.send = send
        self.send_actions = send_actions


@cython.final
cdef class Table:
    """The guard's sessions: ``(session, run_id) -> State`` with an LRU cap and an idle TTL,
    and the guard's answers: the engine's code made a Decision, its event bucket looked up.

    ``check``/``record`` look the session up (creating, expiring and evicting as needed) and
    run the engine in one C call that never releases the GIL, so concurrent callers never lose
    a count without paying for a lock. ``check`` returns *allow* or a warn/block *decision*
    (see the pure twin's Table: same arguments, same objects, same events).
    """

    cdef readonly Engine engine
    cdef readonly int max_sessions
    cdef readonly double ttl
    cdef readonly object clock
    cdef readonly object sessions
    cdef dict plain  # session -> its state under run id None: the same states as in sessions
    cdef readonly dict runs
    cdef object _get_fn
    cdef object _move_fn
    cdef readonly dict tools
    cdef object hash_fn
    cdef hash_into_t c_hash  # set when hash_fn is the compiled canonical_hash
    cdef object veto_type
    cdef readonly frozenset volatile_keys
    cdef object last_args
    cdef object last_cid  # the last call id hashed, and its hash (record() passes the same one)
    cdef uint64_t last_cid_h
    cdef uint64_t last_ah
    cdef object last_session
    cdef object last_run
    cdef State last_state
    cdef State cur_state  # the last _fast_check's state, tool and args hash (read at once)
    cdef ToolInfo cur_info
    cdef object cur_tool  # the tool name of the last _fast_check (record() passes the same one)
    cdef list tc_names  # the tool name objects looked up last (a harness passes the same ones)
    cdef list tc_infos  # ... and their ToolInfo
    cdef int tc_next
    cdef uint64_t cur_ah
    cdef uint64_t ops
    cdef readonly object policy
    cdef readonly dict names  # tool id -> name (a cycle's message names its pair)
    cdef type decision
    cdef Py_ssize_t slot_off[7]  # the Decision class's slot offsets (slot_off[0] == 0: not known)
    cdef readonly object allow
    cdef tuple det_names
    cdef object emit
    cdef int64_t bucket_size
    cdef frozenset ignored_args  # None when the policy ignores no argument key
    cdef public int64_t checks, warns, blocks, records, tokens, evicted

    def __cinit__(self, Engine engine, policy, int max_sessions, double ttl, clock=None, hash_fn=None,
                  type decision=None, allow=None, det_names=(), emit=None):
        from collections import OrderedDict
        if max_sessions < 1:
            raise ValueError("max_sessions must be positive")
        if policy.event_bucket < 1:
            raise ValueError("event bucket size must be positive")
        if decision is not None and (decision.__new__ is not object.__new__
                                     or decision.__setattr__ is not object.__setattr__):
            raise TypeError("Table needs a Decision class built by object.__new__ with plain slots")
        self.engine = engine
        self.policy = policy
        self.slot_off[0] = 0
        if decision is not None and not slot_offsets(decision, _DECISION_SLOTS, self.slot_off):
            self.slot_off[0] = 0
        self.names = {}
        self.decision = decision
        self.allow = allow
        self.det_names = tuple(det_names)
        self.emit = emit
        self.bucket_size = policy.event_bucket
        self.ignored_args = frozenset(policy.ignored_args) or None
        self.max_sessions = max_sessions
        self.ttl = ttl  # 0: never expire
        self.clock = clock
        self.sessions = OrderedDict()
        self.plain = {}
        self.runs = {}
        self._get_fn = self.sessions.get
        self._move_fn = self.sessions.move_to_end
        self.tools = {}
        self.tc_names = [None] * TOOL_CACHE
        self.tc_infos = [None] * TOOL_CACHE
        self.tc_next = 0
        self.hash_fn = hash_fn
        self.c_hash = NULL
        if hash_fn is not None:
            from loopcore import _native_hashing
            if hash_fn is _native_hashing.canonical_hash:
                self.c_hash = hash_into
        self.veto_type = decision if decision is not None else ()
        self.volatile_keys = frozenset(policy.volatile_keys)
        self.ops = 0

    cdef inline double _now(self) except? -1.0:
        cdef timespec ts
        if self.clock is not None:
            return self.clock()
        clock_gettime(LOOPCORE_IDLE_CLOCK, &ts)
        return ts.tv_sec + ts.tv_nsec * 1e-9

    cdef State _get(self, session, run_id):
        cdef State st
        cdef double now
        # A session's calls come in runs (check, record, the next call...): the most recent
        # session is already last in LRU order, so skip the dict work when it is asked again.
        st = self.last_state
        if st is not None and run_id is self.last_run and (
                session is self.last_session
                or (type(session) is str and type(self.last_session) is str and session == self.last_session)):
            now = self._now()
            if not (self.ttl > 0 and now - st.touched > self.ttl):
                st.touched = now
                self.ops += 1
                if self.ttl > 0 and (self.ops & 1023) == 0:
                    self._sweep(now)
                return st
        st = self._lookup(session, run_id)
        self.last_session = session
        self.last_run = run_id
        self.last_state = st
        return st

    cdef State _lookup(self, session, run_id):
        cdef State st
        cdef double now
        cdef PyObject* found
        if run_id is None:
            # most sessions have no run ids: found by the session alone, no key tuple built
            key = None
            found = PyDict_GetItemWithError(self.plain, session)
        else:
            key = (session, run_id)
            # the OrderedDict's own dict part: the lookup without a method call
            found = PyDict_GetItemWithError(self.sessions, key)
        obj = <object>found if found != NULL else None
        now = self._now()
        if obj is None or (self.ttl > 0 and now - (<State>obj).touched > self.ttl):
            if obj is not None:
                key = (<State>obj).key  # expired: its key object stays in the OrderedDict
            elif key is None:
                key = (session, None)
            st = State(self.engine.window, self.engine.nbudget)
            st.key = key
            self.sessions[key] = st
            self._move_fn(key)
            if run_id is None:
                self.plain[session] = st
            else:
                runs = self.runs.get(session)
                if runs is None:
                    self.runs[session] = runs = set()
                runs.add(run_id)
            while len(self.sessions) > self.max_sessions:
                self._evict()
        else:
            st = <State>obj
            self._move_fn(st.key)  # the stored key object: found by identity
        st.touched = now
        self.ops += 1
        if self.ttl > 0 and (self.ops & 1023) == 0:
            self._sweep(now)
        return st

    cdef _evict(self):
        key, st = self.sessions.popitem(last=False)
        if st is self.last_state:
            self.last_state = None
        session, run_id = key
        self.evicted += 1
        if run_id is None:
            if self.plain.get(session) is st:
                del self.plain[session]
        else:
            runs = self.runs.get(session)
            if runs is not None:
                runs.discard(run_id)
                if not runs:
                    del self.runs[session]

    cdef _sweep(self, double now):
        # The OrderedDict is in access order, so the idle sessions are at the front.
        cdef double limit = now - self.ttl
        while self.sessions and (<State>next(iter(self.sessions.values()))).touched < limit:
            self._evict()

    cdef inline int _count(self, int code) noexcept:
        self.checks += 1
        if code:
            if code >> 4 == L_BLOCK:
                self.blocks += 1
            else:
                self.warns += 1
        return code

    cdef object _check(self, session, run_id, name, uint64_t tool, uint64_t args, int kind, uint64_t target,
                       uint64_t cid, bint poll, bint unknown, int bslot):
        cdef State st
        cdef int code
        if bslot >= self.engine.nbudget:
            raise IndexError("budget slot out of range")
        st = self._get(session, run_id)
        code = self._count(_check(self.engine, st, tool, args, kind, target, cid, poll, unknown, bslot))
        if code == 0:
            return self.allow
        return self._decide(code, st, name, tool, args, session, run_id)

    cdef object _decide(self, int code, State st, name, uint64_t tid, uint64_t ah, session, run_id):
        # The pure twin's Table._decide and the emission after it. Everything the engine left
        # behind is read before the first allocation (a garbage collection run there could let
        # another thread check in between), and the bucket is looked up and set with no
        # allocation of a tracked object between, so under the GIL no lock is needed.
        cdef int64_t count = st.out_count
        cdef int64_t of_step = st.out_of_step
        cdef uint64_t aux = st.out_aux
        cdef uint64_t aux2 = st.out_aux2
        cdef int det = code & 15
        cdef int64_t bucket = count // self.bucket_size
        cdef PyObject* last
        cdef dict buckets
        cdef uint64_t k_tid, k_x
        if det == D_CYCLE:
            why = (self.policy, name, aux2, self.names.get(aux, "another tool"))
            k_tid = 0
            k_x = aux2
        else:
            # the global breaker's aux is the number of argument variants when it counted churn
            why = (self.policy, name, ah, aux if det == D_GLOBAL and aux else None)
            k_tid = tid
            k_x = 0 if det == D_BUDGET else ah
        if self.slot_off[0]:
            d = _fill_decision(self.decision, self.slot_off, "block" if code >> 4 == L_BLOCK else "warn",
                               self.det_names[det], count, of_step, why)
        else:
            d = _new_decision(self.decision, "block" if code >> 4 == L_BLOCK else "warn", self.det_names[det],
                              count, of_step, why)
        bucket_obj = bucket
        if st.extra is None:
            fresh = {}
            if st.extra is None:
                st.extra = fresh
        buckets = <dict>st.extra
        if (st.bk_dict is buckets and st.bk_code == code and st.bk_tid == k_tid and st.bk_x == k_x
                and bucket <= st.bk_bucket):
            return d  # the very bucket looked up last: inside it, nothing to emit
        dk = (code, k_tid, k_x)
        last = PyDict_GetItemWithError(buckets, dk)
        if last != NULL and bucket <= <int64_t><object>last:
            _remember_bucket(st, buckets, code, k_tid, k_x, <int64_t><object>last)
            return d  # most warnings repeat inside their bucket and emit nothing
        if last != NULL:
            del buckets[dk]  # re-inserted last: the oldest pattern is evicted first
        buckets[dk] = bucket_obj
        if len(buckets) > MAX_EVENT_KEYS:
            del buckets[next(iter(buckets))]  # the oldest: never the key just set
        _remember_bucket(st, buckets, code, k_tid, k_x, bucket)
        if self.emit is not None:
            self.emit(session, run_id, name, d)
        return d

    cdef object _record(self, session, run_id, uint64_t tool, uint64_t args, uint64_t result, int flags,
                        int kind, uint64_t target, uint64_t cid, int bslot, int veto, int64_t tokens):
        if bslot >= self.engine.nbudget:
            raise IndexError("budget slot out of range")
        cdef State st = self._get(session, run_id)
        self.records += 1
        # saturating: the total stays at 2**63 - 1 rather than wrap (the pure twin does the same)
        self.tokens = self.tokens + tokens if tokens <= INT64_MAX - self.tokens else INT64_MAX
        return _record(st, tool, args, result, flags, kind, target, cid, veto)

    cdef uint64_t _hash(self, value) except? 0:
        cdef uint64_t h = 0
        if self.c_hash != NULL:
            # values canonical_hash does not support are hashed by repr() (the pure twin tries
            # without it first: the same hash, since a converter only ever sees such values)
            self.c_hash(value, None, _REPR, &h)
            return h
        try:
            return self.hash_fn(value)
        except TypeError:
            return self.hash_fn(value, default=repr)

    def check(self, session, run_id, name, uint64_t tool, uint64_t args, int kind, uint64_t target,
              uint64_t cid, bint poll, bint unknown, int bslot):
        """Look up the session and run Engine.check on the call of tool *name* (id *tool*);
        *allow* or a warn/block decision (its event emitted when it crosses a bucket)."""
        return self._check(session, run_id, name, tool, args, kind, target, cid, poll, unknown, bslot)

    def record(self, session, run_id, uint64_t tool, uint64_t args, uint64_t result, int flags, int kind,
               uint64_t target, uint64_t cid, int bslot, int veto, int64_t tokens):
        """Look up the session and run Engine.record."""
        return self._record(session, run_id, tool, args, result, flags, kind, target, cid, bslot, veto, tokens)

    def remember(self, args, uint64_t ah):
        """Note that *args* (this very object) was checked with hash *ah*."""
        self.last_args = args
        self.last_ah = ah

    def hash_checked(self, args):
        """The hash *args* was checked with when it is the last checked object, else a fresh one."""
        if args is self.last_args and args is not None:
            return self.last_ah
        return self._args_hash(args)

    cdef inline uint64_t _cid_hash(self, call_id) except 0:
        # the call id's hash, never 0; check() and its record() hash the same id object once
        cdef uint64_t h
        if call_id is self.last_cid:
            return self.last_cid_h
        h = self._hash(call_id) or 1
        if type(call_id) is str or type(call_id) is int:  # immutable: the hash cannot go stale
            self.last_cid = call_id  # a strong reference: the identity cannot be reused meanwhile
            self.last_cid_h = h
        return h

    cdef uint64_t _args_hash(self, args) except? 0:
        # a dict's top-level keys in policy.ignored_args are left out (cline's task_progress)
        cdef frozenset ign = self.ignored_args
        cdef uint64_t h = 0
        if ign is not None and type(args) is dict and not ign.isdisjoint(<dict>args):
            args = {k: v for k, v in (<dict>args).items() if k not in ign}
        if self.c_hash != NULL:  # self._hash(args), without the call
            self.c_hash(args, None, _REPR, &h)
            return h
        return self._hash(args)

    def args_hash(self, args):
        """The hash of a call's *args* as the detectors compare them (policy.ignored_args left out)."""
        return self._args_hash(args)

    def buckets(self, State st):
        """[(bucket key, last bucket)] of *st*'s announced events, oldest first (a copy)."""
        return list((<dict>st.extra).items()) if st.extra else []

    def veto(self, result):
        """block_veto(result) with this table's Decision class."""
        return _block_veto(result, self.veto_type)

    def register(self, str name, ToolInfo info):
        """Make *name* known to the fast paths (the registry is a cache: clear_tools() may drop it)."""
        self.tools[name] = info
        self._forget_tool_objects()
        self.names[info.tid] = name

    def clear_tools(self):
        """Forget every registered tool (they are registered again on their next call)."""
        self.tools.clear()
        self._forget_tool_objects()
        self.names.clear()
        self.cur_tool = None

    cdef void _forget_tool_objects(self) noexcept:
        cdef int i
        for i in range(TOOL_CACHE):
            self.tc_names[i] = None
            self.tc_infos[i] = None

    cdef inline object _tool_info(self, tool):
        # self.tools.get(tool), first by identity among the last TOOL_CACHE name objects (the
        # names are immutable exact strs; the cache holds them, so an identity cannot be reused)
        cdef int i
        cdef list names = self.tc_names
        for i in range(TOOL_CACHE):
            if PyList_GET_ITEM(names, i) == <PyObject*>tool:
                return self.tc_infos[i]
        info = self.tools.get(tool)
        if info is not None and type(tool) is str:
            i = self.tc_next
            self.tc_names[i] = tool
            self.tc_infos[i] = info
            self.tc_next = (i + 1) % TOOL_CACHE
        return info

    cdef int _fast_check(self, session, tool, args, run_id, call_id=None) except -2:
        # -1: *tool* is not registered; else the engine's code, with cur_state, cur_info and
        # cur_ah describing the call (the caller reads them before anything can run Python code).
        cdef ToolInfo t
        cdef bint poll
        cdef uint64_t ah, cid = 0
        cdef State st
        cdef int code
        info = self._tool_info(tool)
        if info is None:
            return -1
        t = <ToolInfo>info
        ah = self._args_hash(args)
        if call_id is not None:  # Guard.check: the call id's hash, never 0
            cid = self._cid_hash(call_id)
        # record() usually follows with the very same args object: remember its hash (a strong
        # reference, so the identity cannot be reused by another object).
        self.last_args = args
        self.last_ah = ah
        poll = t.poll
        if not poll and t.poll_actions is not None and isinstance(args, dict):
            poll = (<dict>args).get("action") in t.poll_actions
        st = self._get(session, run_id)
        code = self._count(_check(self.engine, st, t.tid, ah, K_OTHER, 0, cid, poll, t.unknown, t.bslot))
        self.cur_state = st
        self.cur_info = t
        self.cur_tool = tool
        self.cur_ah = ah
        return code

    cpdef object fast_check(self, session, tool, args, run_id, call_id=None):
        """check() for a registered tool without kind/target: hashes *args* itself.

        Returns None when the tool is not registered (the caller takes the full path), else
        what ``check`` returns."""
        cdef int code = self._fast_check(session, tool, args, run_id, call_id)
        if code <= 0:
            return None if code < 0 else self.allow
        return self._decide(code, self.cur_state, tool, self.cur_info.tid, self.cur_ah, session, run_id)

    cdef int _fast_record(self, session, tool, args, result, run_id, int64_t tokens, call_id=None) except -2:
        # -1: not for the fast path (unregistered tool, a veto-shaped result); else Engine.record's code.
        cdef ToolInfo t
        cdef uint64_t ah, rh = 0, cid = 0
        cdef int veto = 0
        cdef object d = None, status = None
        if tool is self.cur_tool and self.cur_info is not None:
            info = self.cur_info  # the call just checked (the registry maps its name to it)
        else:
            info = self._tool_info(tool)
            if info is None:
                return -1
        t = <ToolInfo>info
        if isinstance(result, dict):
            # _block_veto's lookups, kept for the exec projection
            d = (<dict>result).get("details")
            if not isinstance(d, dict):
                d = result
            status = (<dict>d).get("status")
            veto = _dict_veto(<dict>d, status)
        else:
            veto = _block_veto(result, self.veto_type)
            if veto == 2:
                return -1  # the block message as the tool's output: Guard.record decides on it
        if call_id is not None:
            cid = self._cid_hash(call_id)
        if args is self.last_args and args is not None:
            ah = self.last_ah  # the hash of the call as it was checked
        else:
            ah = self._args_hash(args)
        if not veto:
            if d is not None and t.exec:
                # the projection _outcome would make, reusing the lookups above
                rh = self._hash(_project_exec_d(<dict>result, <dict>d, status))
            else:
                rh = self._outcome_hash(t, args, result, d)  # d: _send_body(result) or None
        if t.bslot >= self.engine.nbudget:
            raise IndexError("budget slot out of range")
        cdef State st = self._get(session, run_id)
        self.records += 1
        # saturating: the total stays at 2**63 - 1 rather than wrap (the pure twin does the same)
        self.tokens = self.tokens + tokens if tokens <= INT64_MAX - self.tokens else INT64_MAX
        return _record(st, t.tid, ah, rh, F_UNKNOWN if t.unknown and not veto else 0, K_OTHER, 0, cid, veto)

    cpdef object fast_record(self, session, tool, args, result, run_id, int64_t tokens, call_id=None):
        """record() for a registered tool and an ordinary result: hashes args and the outcome.

        Returns None when it cannot (unregistered tool, a veto-shaped result)."""
        cdef int code = self._fast_record(session, tool, args, result, run_id, tokens, call_id)
        return None if code < 0 else code

    cdef uint64_t _send_hash(self, result, body) except? 0:
        # == self._hash(_strip_send_result(result, self.volatile_keys)), without building the
        # stripped copy when it is not needed: the usual send result has no delivery object and
        # no text restating a stripped id, so hashing it with the volatile keys stripped inside
        # the hash gives the same bytes. *body* is _send_body(result) when the caller has it.
        cdef uint64_t h = 0
        if body is None:
            body = _send_body(result)
        if self.c_hash == NULL or _send_needs_copy(body, self.volatile_keys):
            return self._hash(_strip_send_result(result, self.volatile_keys))
        try:
            self.c_hash(body, self.volatile_keys, None, &h)
        except TypeError:
            self.c_hash(body, self.volatile_keys, repr, &h)
        return h

    def send_hash(self, result):
        """The hash record() gives a send-like *result* (tests cross it with the full strip)."""
        return self._send_hash(result, None)

    def send_needs_copy(self, result):
        """True when record() hashes a stripped copy of the send-like *result*, False when it
        hashes it in place with the volatile keys stripped inside the hash (tests check that
        both paths run)."""
        _check_send_size(_send_body(result))
        return _send_needs_copy(_send_body(result), self.volatile_keys)

    cdef uint64_t _outcome_hash(self, ToolInfo t, args, result, body) except? 0:
        # == self._hash(self._outcome(t, args, result)), with the send strip done in the hash;
        # *body* is _send_body(result) when the caller has it, else None
        if t.exec or (t.poll_actions is not None and isinstance(args, dict)
                      and (<dict>args).get("action") in t.poll_actions):
            return self._hash(_project_exec(result))
        if t.send or (t.send_actions is not None and isinstance(args, dict)
                      and (<dict>args).get("action") in t.send_actions):
            return self._send_hash(result, body)
        return self._hash(result)

    cdef object _outcome(self, ToolInfo t, args, result):
        if t.exec or (t.poll_actions is not None and isinstance(args, dict)
                      and (<dict>args).get("action") in t.poll_actions):
            return _project_exec(result)
        if t.send or (t.send_actions is not None and isinstance(args, dict)
                      and (<dict>args).get("action") in t.send_actions):
            return _strip_send_result(result, self.volatile_keys)
        return result

    def outcome(self, ToolInfo t, args, result):
        """The value hashed as *result*'s outcome: exec/poll results projected, send-like stripped."""
        return self._outcome(t, args, result)

    def drop(self, session):
        """Remove every state of *session* (all run ids)."""
        self.last_state = None
        self.sessions.pop((session, None), None)
        self.plain.pop(session, None)
        for run_id in self.runs.pop(session, ()):
            self.sessions.pop((session, run_id), None)

    def get(self, session, run_id):
        """The state of (session, run_id) or None; does not touch the LRU order."""
        return self._get_fn((session, run_id))

    def put(self, session, run_id, State st):
        """Insert a restored state as the most recently used (evicting beyond the cap);
        ValueError for a state of another engine's size."""
        self.engine._fits(st)
        self.last_state = None
        key = (session, run_id)
        st.key = key
        self.sessions[key] = st
        self._move_fn(key)
        if run_id is None:
            self.plain[session] = st
        else:
            self.runs.setdefault(session, set()).add(run_id)
        while len(self.sessions) > self.max_sessions:
            self._evict()

    def items(self):
        """[((session, run_id), state)] least recently used first."""
        return list(self.sessions.items())

    def has_session(self, session):
        """True when *session* has state under any run id."""
        return (session, None) in self.sessions or session in self.runs

    def now(self):
        """The table's clock."""
        return self._now()

    def counters(self):
        """checks, warns, blocks, records, tokens, evicted, sessions."""
        return {"checks": self.checks, "warns": self.warns, "blocks": self.blocks, "records": self.records,
                "tokens": self.tokens, "evicted": self.evicted, "sessions": len(self.sessions)}

    def set_counters(self, counts):
        """Restore counters saved by counters() (unknown names are ignored)."""
        for k in ("checks", "warns", "blocks", "records", "tokens", "evicted"):
            if k in counts:
                setattr(self, k, int(counts[k]))

    def __len__(self):
        return len(self.sessions)


cdef inline void _remember_bucket(State st, dict buckets, int code, uint64_t tid, uint64_t x,
                                  int64_t bucket) noexcept:
    # buckets[(code, tid, x)] == bucket now; only _decide changes a state's buckets, and the next
    # change either sets this again or is this key's (an eviction takes the oldest key)
    st.bk_dict = buckets
    st.bk_code = code
    st.bk_tid = tid
    st.bk_x = x
    st.bk_bucket = bucket


cdef int _block_veto(result, veto_type) except -1:
    # The one place the compiled twin recognises a block handed back as a call's result:
    # 1 the guard's own veto (a block Decision, or OpenClaw's tool-loop denial), 2 text that
    # starts like the guard's block message (a veto only right after blocking this very call),
    # 0 an ordinary result. The common results (str, dict) are tested first: a Decision is never
    # one of them (its __slots__ forbid str/dict subclasses).
    cdef object d
    if isinstance(result, str):
        # (the first character decides for nearly every result, before the method call)
        if (PyUnicode_GET_LENGTH(result) >= 8 and PyUnicode_READ_CHAR(result, 0) == u"B"
                and (<str>result).startswith("BLOCKED:")):
            return 2
        return 0
    if isinstance(result, dict):
        d = (<dict>result).get("details")
        if not isinstance(d, dict):
            d = result
        return _dict_veto(<dict>d, (<dict>d).get("status"))
    if isinstance(result, veto_type):
        return 1 if result.action == "block" else 0
    return 0


cdef inline int _dict_veto(dict d, status) except -1:
    # _block_veto of a dict result whose details (or itself) are *d*, d.get("status") *status*
    if status is None:  # the usual result: None never equals "blocked"
        return 0
    if status == "blocked" and d.get("deniedReason") == "tool-loop":
        return 1
    return 0


def block_veto(result, veto_type):
    """1 when *result* is the guard's own block (a block *veto_type* Decision, or OpenClaw's
    tool-loop denial), 2 when it is text starting with the block message's "BLOCKED:", else 0."""
    return _block_veto(result, veto_type if veto_type is not None else ())


cdef extern from "Python.h":
    object PyType_GenericAlloc(PyTypeObject* tp, Py_ssize_t nitems)


cdef extern from "Python.h":
    void Py_INCREF(object o)


cdef tuple _DECISION_SLOTS = ("action", "detector", "count", "of_step", "_message", "_key", "_why")


cdef inline void _put_slot(object d, Py_ssize_t off, object v) noexcept:
    # a slot of a fresh instance (NULL until now) takes a new reference to *v*
    Py_INCREF(v)
    (<PyObject**>((<char*><PyObject*>d) + off))[0] = <PyObject*>v


cdef object _fill_decision(type cls, Py_ssize_t* off, str action, str detector, int64_t count,
                           int64_t of_step, tuple why):
    # _new_decision with the slot offsets _slot_offsets found
    d = PyType_GenericAlloc(<PyTypeObject*>cls, 0)
    _put_slot(d, off[0], action)
    _put_slot(d, off[1], detector)
    _put_slot(d, off[2], count)
    _put_slot(d, off[3], of_step if of_step >= 0 else None)
    _put_slot(d, off[4], None)
    _put_slot(d, off[5], None)
    _put_slot(d, off[6], why)
    return d


cdef object _new_decision(type cls, str action, str detector, int64_t count, int64_t of_step, tuple why):
    # guard._lazy_decision in C: the same slots, set on a bare instance (Decision's allocator is
    # the generic one and it has no __new__/__init__ side effects; bind_fast checks that).
    d = PyType_GenericAlloc(<PyTypeObject*>cls, 0)
    d.action = action
    d.detector = detector
    d.count = count
    d.of_step = of_step if of_step >= 0 else None
    d._message = None
    d._key = None
    d._why = why
    return d


cdef extern from "Python.h":
    """
    /* Guard.check / Guard.record as METH_FASTCALL | METH_KEYWORDS builtins bound to a _Fast:
       CPython calls them with the caller's argument array and keyword names as they are (no
       bound-method layer, no argument tuple, no keyword dict). */
    #define LOOPCORE_FASTCALL_KW (METH_FASTCALL | METH_KEYWORDS)
    """
    ctypedef struct PyMethodDef:
        const char* ml_name
        void* ml_meth
        int ml_flags
        const char* ml_doc
    int LOOPCORE_FASTCALL_KW
    object PyCFunction_NewEx(PyMethodDef* ml, object self, object module)
    object PyObject_Vectorcall(object callable, PyObject** args, size_t nargsf, PyObject* kwnames)
    Py_ssize_t PyTuple_GET_SIZE(PyObject* p)
    PyObject* PyTuple_GET_ITEM(PyObject* p, Py_ssize_t i)


@cython.final
cdef class _Fast:
    """Guard.check and Guard.record for a guard without ``classify``: the common case in C.

    ``bind_fast`` makes its ``check``/``record`` builtins (``_fast_check_kw``/``_fast_record_kw``
    bound to it), which replace the Guard's. Same signatures and results as
    ``Guard.check``/``Guard.record``: the table answers a plain call (its decision and event
    included); anything else (kind, target, error, an unusual token count, an unregistered tool,
    arguments these entries do not bind) goes to the Guard's own methods with the very arguments
    it was given, so behaviour and errors are identical by construction.
    """

    cdef Table table
    cdef object allow
    cdef object slow_check
    cdef object slow_record

    def __cinit__(self, Table table, slow_check, slow_record):
        self.table = table
        self.allow = table.allow
        self.slow_check = slow_check
        self.slow_record = slow_record


# The keyword names the entries bind by identity: the compiler interns the keywords of a call
# site and Cython these constants (any other object goes to the Guard's method, which binds by
# equality).
cdef str _KW_ARGS = "args"
cdef str _KW_RESULT = "result"
cdef str _KW_RUN_ID = "run_id"
cdef str _KW_CALL_ID = "call_id"
cdef str _KW_TOKENS = "tokens"
cdef str _KW_KIND = "kind"
cdef str _KW_TARGET = "target"
cdef str _KW_ERROR = "error"


cdef object _fast_check_kw(object fast, PyObject** argv, Py_ssize_t nargs, PyObject* kwnames):
    # check(session, tool, args=None, *, run_id=None, kind=None, target=None, call_id=None)
    cdef _Fast f = <_Fast>fast
    cdef Table tb = f.table
    cdef Py_ssize_t i, nkw
    cdef PyObject* name
    cdef int code
    if nargs < 2 or nargs > 3:
        return PyObject_Vectorcall(f.slow_check, argv, <size_t>nargs, kwnames)
    args = <object>argv[2] if nargs == 3 else None
    run_id = None
    call_id = None
    if kwnames != NULL:
        nkw = PyTuple_GET_SIZE(kwnames)
        for i in range(nkw):
            name = PyTuple_GET_ITEM(kwnames, i)
            if name == <PyObject*>_KW_CALL_ID:
                call_id = <object>argv[nargs + i]
            elif name == <PyObject*>_KW_RUN_ID:
                run_id = <object>argv[nargs + i]
            elif name == <PyObject*>_KW_ARGS and nargs == 2:
                args = <object>argv[nargs + i]
            elif not ((name == <PyObject*>_KW_KIND or name == <PyObject*>_KW_TARGET)
                      and argv[nargs + i] == <PyObject*>None):
                return PyObject_Vectorcall(f.slow_check, argv, <size_t>nargs, kwnames)
    session = <object>argv[0]
    tool = <object>argv[1]
    code = tb._fast_check(session, tool, args, run_id, call_id)
    if code == 0:
        return f.allow
    if code > 0:
        return tb._decide(code, tb.cur_state, tool, tb.cur_info.tid, tb.cur_ah, session, run_id)
    return PyObject_Vectorcall(f.slow_check, argv, <size_t>nargs, kwnames)


cdef object _fast_record_kw(object fast, PyObject** argv, Py_ssize_t nargs, PyObject* kwnames):
    # record(session, tool, args=None, result=None, *, error=None, run_id=None, call_id=None,
    #        tokens=None, kind=None, target=None)
    cdef _Fast f = <_Fast>fast
    cdef Py_ssize_t i, nkw
    cdef PyObject* name
    cdef int64_t ntok = 0
    if nargs < 2 or nargs > 4:
        return PyObject_Vectorcall(f.slow_record, argv, <size_t>nargs, kwnames)
    args = <object>argv[2] if nargs >= 3 else None
    result = <object>argv[3] if nargs == 4 else None
    run_id = None
    call_id = None
    if kwnames != NULL:
        nkw = PyTuple_GET_SIZE(kwnames)
        for i in range(nkw):
            name = PyTuple_GET_ITEM(kwnames, i)
            if name == <PyObject*>_KW_CALL_ID:
                call_id = <object>argv[nargs + i]
            elif name == <PyObject*>_KW_RUN_ID:
                run_id = <object>argv[nargs + i]
            elif name == <PyObject*>_KW_RESULT and nargs <= 3:
                result = <object>argv[nargs + i]
            elif name == <PyObject*>_KW_ARGS and nargs == 2:
                args = <object>argv[nargs + i]
            elif name == <PyObject*>_KW_TOKENS:
                tokens = <object>argv[nargs + i]
                if tokens is not None:
                    if not (type(tokens) is int and 0 <= tokens <= INT64_MAX):
                        return PyObject_Vectorcall(f.slow_record, argv, <size_t>nargs, kwnames)
                    ntok = tokens
            elif not ((name == <PyObject*>_KW_KIND or name == <PyObject*>_KW_TARGET
                       or name == <PyObject*>_KW_ERROR) and argv[nargs + i] == <PyObject*>None):
                return PyObject_Vectorcall(f.slow_record, argv, <size_t>nargs, kwnames)
    if f.table._fast_record(<object>argv[0], <object>argv[1], args, result, run_id, ntok, call_id) >= 0:
        return None
    return PyObject_Vectorcall(f.slow_record, argv, <size_t>nargs, kwnames)


cdef PyMethodDef _CHECK_DEF
_CHECK_DEF.ml_name = "check"
_CHECK_DEF.ml_meth = <void*>_fast_check_kw
_CHECK_DEF.ml_flags = LOOPCORE_FASTCALL_KW
_CHECK_DEF.ml_doc = (b"check(session, tool, args=None, *, run_id=None, kind=None, target=None, call_id=None)\n"
                     b"--\n\nGuard.check (see there).")
cdef PyMethodDef _RECORD_DEF
_RECORD_DEF.ml_name = "record"
_RECORD_DEF.ml_meth = <void*>_fast_record_kw
_RECORD_DEF.ml_flags = LOOPCORE_FASTCALL_KW
_RECORD_DEF.ml_doc = (b"record(session, tool, args=None, result=None, *, error=None, run_id=None, "
                      b"call_id=None, tokens=None, kind=None, target=None)\n--\n\nGuard.record (see there).")


def bind_fast(Table table, check, record):
    """(check, record) callables with Guard.check/record's signatures that run the common case in
    C on *table* and hand everything else to *check*/*record* (the Guard's own methods)."""
    fast = _Fast(table, check, record)
    return PyCFunction_NewEx(&_CHECK_DEF, fast, None), PyCFunction_NewEx(&_RECORD_DEF, fast, None)
