# cython: boundscheck=False, wraparound=False
"""Compiled encoder (loopcore._native_encode): the twin of loopcore._encode_py, step for step.

Turns the Steps of many Traces into the integer columns of an EncodedTrace (documented in
loopcore.encoded) without building a facts tuple or a Python list per step: each step's facts
are computed in C locals and written straight into preallocated numpy columns. The rules are
those of loopcore.encoded.step_facts and of the pure loop in loopcore._encode_py (the
reference); ids are interned in the same first-appearance order, so both give identical
columns. The rarer, string-heavy helpers (shell lexing of a content read, reply-loop detection,
path aliases) are the reference's own functions.
"""
import numpy as np

from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint64_t
from loopcore._native_hashing cimport hash_into
from slots cimport slot_offsets
from cpython.unicode cimport PyUnicode_GET_LENGTH, PyUnicode_READ, PyUnicode_KIND, PyUnicode_DATA
from cpython.unicode cimport PyUnicode_1BYTE_KIND
from cpython.unicode cimport Py_UNICODE_ISSPACE
from cpython.dict cimport PyDict_GetItemWithError
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.pyport cimport PY_SSIZE_T_MAX
from libc.string cimport memchr, memcpy
from cpython.object cimport PyObject

from loopcore.encoded import (
    _COMMAND_KEYS,
    _CONTENT_KEYS,
    _FILE_LIKE,
    _UNTARGETED,
    _BACKUP_NAME,
    _CP_OPTIONS,
    BACKUP,
    RESTORE,
    _EDITOR_COMMANDS,
    _KIND_CODE,
    _LOOP_MIN_CHARS,
    _REPLACE_KEYS,
    _STEP_COLUMNS,
    _FROM_START,
    _READER_PROGRAMS,
    _READER_WORDS,
    _widen,
    FOLDER_DEPTH,
)
from loopcore.taxonomy.shell import lex as _lex
from loopcore.textloop import repeated_spans as _repeated_spans
from loopcore.hashing import canonical_hash
from loopcore.trace import KINDS, Step, _shell_reads_anything

__all__ = [
    "copy_flag",
    "degenerate_tokens",
    "drop_comment_lines",
    "encode_columns",
    "full_write",
    "shell_command",
]

from codes cimport (
    K_EXEC,
    K_MUTATE,
    K_OBSERVE,
    S_ABSOLUTE,
    S_AFTER_USER,
    S_ERROR,
    S_ESTIMATED,
    S_EXIT_NONZERO,
    S_HAS_OUTCOME,
    S_NO_OP,
    S_REJECTED,
)

cdef enum:
    N_CALL = 1
    N_STATE_READ = 2
    N_STATE_WRITE = 4
    N_EDIT = 8
    N_SUBSTANTIAL = 16

cdef enum:
    NOTHING = -1
    ANYTHING = -2

cdef tuple _EMPTY = ()


# Step is a slots dataclass: a field of an exact Step is read at its slot's offset (the member
# descriptor's), not through attribute lookup; anything else (a subclass) through getattr.
cdef enum:
    F_KIND, F_TARGET, F_ARGS, F_RESULT, F_ERROR, F_NAME, F_REJECTED, F_NO_OP, F_READS, F_WRITES
    F_TURN, F_ESTIMATED, F_TOKENS_IN, F_TOKENS_OUT, F_TOKENS_TURN, F_TEXT, F_AFTER_USER, F_META
    N_FIELDS

_FIELD_NAMES = (
    "kind", "target", "args", "result", "error", "name", "rejected", "no_op", "reads", "writes",
    "turn", "tokens_estimated", "tokens_in", "tokens_out", "tokens_turn", "text", "after_user",
    "meta",
)
cdef Py_ssize_t _OFF[N_FIELDS]
cdef object _STEP = Step


cdef bint _SLOTS = slot_offsets(_STEP, _FIELD_NAMES, _OFF)
SLOT_READS = _SLOTS  # for the tests: exact Steps are read at their slots


cdef inline object _f(object step, bint fast, int f):
    # getattr(step, _FIELD_NAMES[f]); *fast*: step is an exact Step with slot offsets known
    cdef PyObject* v
    if fast:
        v = (<PyObject**>((<char*><PyObject*>step) + _OFF[f]))[0]
        if v is not NULL:
            return <object>v
    return getattr(step, _FIELD_NAMES[f])


cdef inline object _get(dict d, object key):
    # d.get(key) as a C lookup (dict.get through its method costs ~700 instructions a call)
    cdef PyObject* v = PyDict_GetItemWithError(d, key)
    if v is NULL:
        return None
    return <object>v


cdef inline object _command_of(dict d):
    # d.get("command", d.get("cmd")): "command" when the key is there, whatever its value
    cdef PyObject* v = PyDict_GetItemWithError(d, "command")
    if v is NULL:
        return _get(d, "cmd")
    return <object>v


cdef object _REPR = repr  # the hash's converter, read once (a builtin lookup a call otherwise)


cdef class _IdMap:
    """Dense ids for keys of four 64-bit words, in first-appearance order: the interning tables
    of the call, observation, state and edit ids, whose keys are all integers (``(tool,
    args_hash)``, ``(target_set, result_hash[, call])``...), so no key tuple, no Python int and
    no tuple hash is made per step. Open addressing with linear probing, kept at most half full;
    the same ids as a dict that gives each new key the next number."""

    cdef uint64_t* keys  # 4 words a slot
    cdef int32_t* ids    # -1: an empty slot
    cdef Py_ssize_t cap
    cdef Py_ssize_t n

    def __cinit__(self):
        self.cap = 0
        self.n = 0
        self.keys = NULL
        self.ids = NULL
        self._grow(64)

    def __dealloc__(self):
        PyMem_Free(self.keys)
        PyMem_Free(self.ids)

    cdef int _grow(self, Py_ssize_t cap) except -1:
        cdef uint64_t* keys = <uint64_t*>PyMem_Malloc(cap * 4 * sizeof(uint64_t))
        cdef int32_t* ids = <int32_t*>PyMem_Malloc(cap * sizeof(int32_t))
        cdef Py_ssize_t i, j
        cdef uint64_t* k
        if keys == NULL or ids == NULL:
            PyMem_Free(keys)
            PyMem_Free(ids)
            raise MemoryError()
        for i in range(cap):
            ids[i] = -1
        for i in range(self.cap):  # re-place the old slots
            if self.ids[i] >= 0:
                k = self.keys + 4 * i
                j = <Py_ssize_t>(_mix(k[0], k[1], k[2], k[3]) & <uint64_t>(cap - 1))
                while ids[j] >= 0:
                    j = (j + 1) & (cap - 1)
                memcpy(keys + 4 * j, k, 4 * sizeof(uint64_t))
                ids[j] = self.ids[i]
        PyMem_Free(self.keys)
        PyMem_Free(self.ids)
        self.keys = keys
        self.ids = ids
        self.cap = cap
        return 0

    cdef int32_t intern(self, uint64_t a, uint64_t b, uint64_t c, uint64_t d) except -1:
        cdef Py_ssize_t j
        cdef uint64_t* k
        if 2 * (self.n + 1) > self.cap:
            if self.cap > PY_SSIZE_T_MAX // 2 // (4 * <Py_ssize_t>sizeof(uint64_t)):
                raise MemoryError()
            self._grow(2 * self.cap)
        j = <Py_ssize_t>(_mix(a, b, c, d) & <uint64_t>(self.cap - 1))
        while self.ids[j] >= 0:
            k = self.keys + 4 * j
            if k[0] == a and k[1] == b and k[2] == c and k[3] == d:
                return self.ids[j]
            j = (j + 1) & (self.cap - 1)
        if self.n >= 0x7FFFFFFF:
            raise OverflowError("more than 2**31 - 1 distinct keys in one encode")
        k = self.keys + 4 * j
        k[0] = a
        k[1] = b
        k[2] = c
        k[3] = d
        self.ids[j] = <int32_t>self.n
        self.n += 1
        return self.ids[j]


cdef inline uint64_t _mix(uint64_t a, uint64_t b, uint64_t c, uint64_t d) noexcept nogil:
    # a slot for a key: the words folded with odd multipliers, then a 64-bit finaliser
    cdef uint64_t h = a * 0x9E3779B97F4A7C15ULL
    h = (h ^ (h >> 29) ^ b) * 0xBF58476D1CE4E5B9ULL
    h = (h ^ (h >> 31) ^ c) * 0x94D049BB133111EBULL
    h = (h ^ (h >> 30) ^ d) * 0x9E3779B97F4A7C15ULL
    return h ^ (h >> 32)


# the kinds of key that share a table (their tag word keeps them apart)
cdef enum:
    OBS_WHOLE = 1  # (target set, result hash): a substantial read, any call
    OBS_CALL = 2   # (target set, result hash, call)
    SKEY_CALL = 1  # (target set, ("call", call))
    SKEY_WRITE = 2  # (target set, ("write",))


cdef inline int _intern(dict ids, list items, object key):
    cdef object i = _get(ids, key)
    if i is None:
        n = len(items)
        ids[key] = n
        items.append(key)
        return n
    return <int>i


cdef unsigned char _SPACE1[256]  # Py_UNICODE_ISSPACE of each one-byte character


cdef bint _space_table() except -1:
    cdef int c
    for c in range(256):
        _SPACE1[c] = 1 if Py_UNICODE_ISSPACE(<Py_UCS4>c) else 0
    return True


_space_table()


cdef void _str_size(str value, int64_t* chars, int64_t* lines, int64_t cap):
    # characters, and the lines of value.split("\n") that strip() leaves non-empty; lines are
    # counted up to *cap* only (the substantial test asks "at least cap lines")
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(value), i
    chars[0] += n
    if lines[0] >= cap:
        return
    cdef int kind = PyUnicode_KIND(value)
    cdef void* data = PyUnicode_DATA(value)
    cdef const unsigned char* p
    cdef const unsigned char* end
    cdef const unsigned char* nl
    cdef Py_UCS4 c
    cdef bint filled = False
    cdef int64_t count = lines[0]
    if kind == PyUnicode_1BYTE_KIND:
        # one byte a character: past a line's leading blanks, a filled line is counted and
        # the rest of it skipped with memchr (a line is filled from its first non-blank on)
        p = <const unsigned char*>data
        end = p + n
        while p < end:
            while p < end and p[0] != 10 and _SPACE1[p[0]]:
                p += 1
            if p == end:
                break
            if p[0] == 10:
                p += 1
                continue
            count += 1
            if count >= cap:
                break
            nl = <const unsigned char*>memchr(p, 10, <size_t>(end - p))
            if nl == NULL:
                break
            p = nl + 1
        lines[0] = count
        return
    for i in range(n):
        c = PyUnicode_READ(kind, data, i)
        if c == 10:
            if filled:
                count += 1
                if count >= cap:
                    lines[0] = count
                    return
            filled = False
        elif not filled and not Py_UNICODE_ISSPACE(c):
            filled = True
    if filled:
        count += 1
    lines[0] = count


def text_size(value, int64_t cap):
    """``(characters, non-empty lines)`` of *value* as loopcore.encoded._text_size counts them,
    lines counted up to *cap*: the compiled twin, for the tests."""
    cdef int64_t chars = 0, lines = 0
    _text_size(value, 0, &chars, &lines, cap)
    return chars, lines


cdef void _text_size(object value, int depth, int64_t* chars, int64_t* lines, int64_t cap):
    # loopcore.encoded._text_size, accumulating into chars / lines (lines counted up to cap)
    if value is None:
        return
    if isinstance(value, str):
        _str_size(<str>value, chars, lines, cap)
        return
    if depth < 2 and isinstance(value, dict):
        for v in (<dict>value).values():
            _text_size(v, depth + 1, chars, lines, cap)
        return
    if depth < 2 and isinstance(value, (list, tuple)):
        for v in value:
            _text_size(v, depth + 1, chars, lines, cap)
        return
    if isinstance(value, (bool, int, float)):
        chars[0] += len(repr(value))
        lines[0] += 1


cdef inline object _h(object value):
    return canonical_hash(value, default=repr)


cdef object _norm_args(object args):
    # loopcore.encoded._norm_command: a shell call's command with its blanks normalised
    if type(args) is not dict:
        return args
    cdef dict d = <dict>args
    if not ("command" in d or "cmd" in d or "script" in d):
        return args
    cdef str cmd, norm
    cdef Py_ssize_t n
    for key in _COMMAND_KEYS:
        value = _get(d, key)
        if type(value) is str:
            cmd = <str>value
            n = PyUnicode_GET_LENGTH(cmd)
            if (
                "  " in cmd
                or "\n" in cmd
                or "\t" in cmd
                or (n and Py_UNICODE_ISSPACE(cmd[0]))
                or (n and Py_UNICODE_ISSPACE(cmd[n - 1]))
            ):
                norm = " ".join(cmd.split())
                if norm != cmd:
                    d = dict(d)
                    d[key] = norm
                    return d
            return args
    return args


cdef list _lexed(str cmd, list memo):
    # taxonomy.shell.lex(cmd), the last command's kept in *memo* ([command, segments], or None
    # for no memo) for the other rules of the same step: lex is a function of the command alone
    # and the rules only read its segments. The same command object, not an equal one: hashing
    # a long command to look it up costs about what lexing it again does.
    if memo is None:
        return _lex(cmd)
    if memo[0] is cmd:
        return <list>memo[1]
    segs = _lex(cmd)
    memo[0] = cmd
    memo[1] = segs
    return segs


cdef bint _reads_content(object name, object args, list memo) except -1:
    # loopcore.encoded._content_read, with the compiled shell lexer (the twin of the pure one)
    cmd = _command_of(<dict>args) if type(args) is dict else None
    if type(cmd) is str:
        if cmd == "view":
            return True
        parts = [words for words, _r, _h in _lexed(cmd, memo) if words and words[0] != "cd"]
        if len(parts) != 1:
            return False
        words = parts[0]
        prog = words[0].rpartition("/")[2]
        if prog == "tail":
            return False  # the end of a file: a region, compared only with the same call
        if prog == "sed":
            for w in words[1:]:
                if _FROM_START.fullmatch(w):
                    return True
            return False
        return prog in _READER_PROGRAMS
    low = name.lower()
    for w in _READER_WORDS:
        if w in low:
            return True
    return False


cdef dict _path_aliases(set names):
    # loopcore.encoded._aliases (the order of each alias tuple differs at most; _widen sorts).
    # A pair is a name and a tail of it after a "/" that is a name too; such a tail ends with the
    # name's last part (what follows its last "/"), so both share it: a name whose last part no
    # other name has is in no pair and is not cut into tails.
    if len(names) < 2:
        return {}
    cdef dict out = {}, last = {}
    cdef Py_ssize_t k
    for name in names:
        if type(name) is str:
            part = _last_part(<str>name)
            n = _get(last, part)
            last[part] = 1 if n is None else 2
    for name in names:
        if "/" not in name or name.startswith("git:"):
            continue
        if type(name) is str and _get(last, _last_part(<str>name)) != 2:
            continue
        k = name.find("/", 1 if name[0] == "/" else 0)
        while k >= 0:
            tail = name[k + 1 :]
            if tail in names:
                out.setdefault(name, []).append(tail)
                out.setdefault(tail, []).append(name)
            k = name.find("/", k + 1)
    return {n: tuple(v) for n, v in out.items()}


cdef str _folder_key(str name):
    # loopcore.encoded._folder_key: no leading "./" (".//x" is "x"), no trailing "/" or "/.";
    # "." for the working folder, "/" the root
    while name.startswith("./"):
        name = name[2:].lstrip("/")
    while len(name) > 1 and name.endswith("/."):
        name = name[:-2] or "/"
    if len(name) > 1:
        name = name.rstrip("/") or "/"
    return name or "."


cdef list _slashes(str key):
    # loopcore.encoded._slashes: the positions of the first FOLDER_DEPTH "/" of key
    cdef list out = []
    cdef Py_ssize_t i = key.find("/")
    while i >= 0 and len(out) < FOLDER_DEPTH:
        out.append(i)
        i = key.find("/", i + 1)
    return out


cdef tuple _folders(set names):
    # loopcore.encoded._folders: (each name that may be a folder with the names that may lie in
    # it, the names that hold every path: the working folder and the root); names with a ":"
    # or the untargeted mark are no paths
    cdef dict keys = {}, out = {}, tails = {}
    cdef list same, holders, slashes, folder, got
    cdef str key
    cdef Py_ssize_t i, start, end
    for name in names:
        if isinstance(name, str) and ":" not in <str>name and "\x00" not in <str>name:
            key = _folder_key(<str>name)
            same = <list>_get(keys, key)
            if same is None:
                keys[key] = [name]
            else:
                same.append(name)
    cdef frozenset here = frozenset(keys.pop(".", []) + keys.pop("/", []))
    # only a name whose last part sits before a "/" in some name can hold anything
    cdef set dirs = set(), lasts = set()
    cdef dict segs = {}
    cdef Py_ssize_t prev, t
    for key_o in keys:
        parts = (<str>key_o).split("/", FOLDER_DEPTH)[:-1]
        segs[key_o] = parts
        dirs.update(parts)
    for key_o, same_o in keys.items():
        key = <str>key_o
        last = key[key.rfind("/") + 1 :]
        if last in dirs:
            lasts.add(last)
            for i in _slashes(key):
                if i + 1 < len(key):
                    got = <list>_get(tails, key[i + 1 :])
                    if got is None:
                        tails[key[i + 1 :]] = list(<list>same_o)
                    else:
                        got.extend(<list>same_o)
    for key_o, same_o in keys.items():
        key = <str>key_o
        same = <list>same_o
        holders = list(same) if len(same) > 1 else []
        if lasts.isdisjoint(<list>segs[key_o]):
            slashes = []  # no name is a folder of this one
        else:
            slashes = _slashes(key)
        prev = 0
        for t in range(len(slashes)):
            end = slashes[t]
            if key[prev:end] in lasts:  # else no name is the path up to this "/"
                starts = [0]
                starts.extend([i + 1 for i in slashes[:t]])
                for start in starts:
                    if end > start:
                        part = key[start:end]
                        folder = <list>_get(keys, part)
                        if folder is not None:
                            holders.extend(folder)
                        folder = <list>_get(tails, part)
                        if folder is not None:
                            holders.extend(folder)
            prev = end + 1
        for name in same:
            for holder in holders:
                if holder != name:
                    got = <list>_get(out, holder)
                    if got is None:
                        out[holder] = [name]
                    else:
                        got.append(name)
    return {n: tuple(v) for n, v in out.items()}, here


cdef str _last_part(str name):
    # name[name.rfind("/") + 1:]
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(name), i = n - 1
    cdef int kind = PyUnicode_KIND(name)
    cdef void* data = PyUnicode_DATA(name)
    while i >= 0 and PyUnicode_READ(kind, data, i) != 47:  # "/"
        i -= 1
    return name if i < 0 else name[i + 1 :]


cdef inline void _add_all(set names, object items) except *:
    # names.update(items), a tuple's members added in C
    if type(items) is tuple:
        for x in <tuple>items:
            names.add(x)
    else:
        names.update(items)


cdef inline object _targets_of(object t):
    # Step.targets
    if t is None:
        return _EMPTY
    if isinstance(t, tuple):
        return t
    return (t,)


cdef inline object _read_set(object step, bint fast, int kind, object shell):
    # Step.read_set, the kind already coded; *shell* is _shell_cmd of the step's args without
    # their comment lines, None only when the raw args run no shell command the classifier
    # could read as observe or mutate (a call with no command, an editor sub-command)
    cdef object r = _f(step, fast, F_READS)
    if r is not None:
        return r
    if kind == K_OBSERVE or kind == K_MUTATE:
        r = _targets_of(_f(step, fast, F_TARGET))
        if r and shell is not None and _shell_reads_anything(
            _f(step, fast, F_ARGS), u"observe" if kind == K_OBSERVE else u"mutate"
        ):
            return None  # a shell command read as reading anything (git diff > p.patch)
        return r if r else None
    return None


cdef inline object _write_set(object step, bint fast, int kind):
    # Step.write_set, the kind already coded
    if _f(step, fast, F_NO_OP):
        return _EMPTY
    cdef object w = _f(step, fast, F_WRITES)
    if w is not None:
        return w
    if kind == K_MUTATE:
        w = _targets_of(_f(step, fast, F_TARGET))
        return w if w else None
    if kind == K_EXEC:
        return None
    return _EMPTY


cdef inline tuple _set(object t):
    if t is None or len(t) <= 1:
        return t
    return tuple(sorted(set(t)))


cdef Py_ssize_t _comment_prefix(str cmd):
    # The length of the lines that open *cmd* and are blank or full-line comments, each with its
    # "\n" (0: none): ``cmd.split("\n")`` read in place, where a line is skipped when
    # ``strip()`` leaves nothing or ``lstrip()`` leaves a "#", and the last line never is.
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(cmd), i = 0, start = 0
    cdef int kind = PyUnicode_KIND(cmd)
    cdef void* data = PyUnicode_DATA(cmd)
    cdef Py_UCS4 c
    while True:
        # start is the first character of a line; its leading blanks (never the newline)
        i = start
        while i < n:
            c = PyUnicode_READ(kind, data, i)
            if c == 10 or not Py_UNICODE_ISSPACE(c):
                break
            i += 1
        if i == n:
            return start  # the last line, blank: kept
        c = PyUnicode_READ(kind, data, i)
        if c != 10:
            if c != 35:  # "#"
                return start  # a line that runs something
            while i < n and PyUnicode_READ(kind, data, i) != 10:
                i += 1
            if i == n:
                return start  # the last line, a comment: kept
        start = i + 1  # past this line's newline: the next line exists (maybe empty)


cdef object _drop_comments(object args):
    # loopcore.encoded._drop_comment_lines: the full-line comments that open a shell command
    if type(args) is not dict:
        return args
    cdef dict d = <dict>args
    cdef Py_ssize_t k
    for key in _COMMAND_KEYS:
        value = _get(d, key)
        if type(value) is str and "#" in <str>value and "\n" in <str>value:
            k = _comment_prefix(<str>value)
            if k:
                d = dict(d)
                d[key] = (<str>value)[k:]
                return d
            return args
    return args


# The longest editor sub-command: a longer command cannot be one, so it is never hashed to find
# out (a str's first hash reads all of it, and a command is often a whole file in a heredoc).
cdef Py_ssize_t _EDITOR_MAX = max(map(len, _EDITOR_COMMANDS))


cdef object _shell_cmd(object args):
    # loopcore.encoded._shell_command: the shell command a call runs, or None
    if type(args) is not dict:
        return None
    for key in _COMMAND_KEYS:
        value = _get(<dict>args, key)
        if type(value) is str:
            if PyUnicode_GET_LENGTH(value) > _EDITOR_MAX:
                return value
            return None if value in _EDITOR_COMMANDS else value
    return None


cdef bint _full_write(object args, list memo) except -1:
    # loopcore.encoded._full_write: echo/printf/cat-heredoc of a known text into one file
    if type(args) is not dict:
        return False
    cmd = _command_of(<dict>args)
    if type(cmd) is not str or ">" not in <str>cmd:
        return False
    cdef list segs = _lexed(cmd, memo)
    if len(segs) != 1:
        return False
    words, redirs, heredocs = segs[0]
    if (
        not words
        or words[0] not in ("echo", "printf", "cat")
        or len(redirs) != 1
        or redirs[0][0] != ">"
    ):
        return False
    if words[0] == "cat" and (len(words) != 1 or len(heredocs) != 1):
        return False
    text = " ".join(words[1:]) + "".join(heredocs)
    return "$" not in text and "`" not in text


cdef int _copy_flag(str cmd, object reads, object writes, list memo) except -1:
    # loopcore.encoded._copy_flag: BACKUP / RESTORE / 0
    if not writes or len(writes) != 1:
        return 0
    cdef list segs = []
    for seg in _lexed(cmd, memo):
        w = seg[0]
        if w and not (w[0] == "cd" or (w[0] == "echo" and not seg[1])):
            segs.append(seg)
    if len(segs) != 1:
        return 0
    words, redirs, heredocs = segs[0]
    if heredocs:
        return 0
    redirs = [r for r in redirs if r[0] != "dup" and r[1] != "/dev/null"]
    if words[0] == "git" and len(words) >= 3:
        rest = words[2:]
        if words[1] == "checkout" and rest[:1] == ["HEAD"]:
            rest = rest[1:]
        if rest[:1] == ["--"]:
            rest = rest[1:]
        elif words[1] == "restore" and rest[:1] == ["--worktree"]:
            rest = rest[1:]
        ok = words[1] in ("checkout", "restore") and len(rest) == 1 and not redirs
        return RESTORE if ok and not rest[0].startswith("-") and reads in ((), None, writes) else 0
    if words[0] == "cp" and not redirs:
        ops = [w for w in words[1:] if w not in _CP_OPTIONS]
        if len(ops) != 2:
            return 0
        for w in ops:
            if w.startswith("-"):
                return 0
        src, dst = ops
    elif words[0] == "cat" and len(words) == 2 and len(redirs) == 1 and redirs[0][0] == ">":
        src, dst = words[1], redirs[0][1]
    else:
        return 0
    if not reads or len(reads) != 1 or reads == writes:
        return 0
    src_backup = _backup_name(src)
    dst_backup = _backup_name(dst)
    if dst_backup and not src_backup:
        return BACKUP
    if src_backup and not dst_backup:
        return RESTORE
    return 0


cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object o)


cdef inline unsigned int _lower_ascii(unsigned int c) noexcept:
    return c + 32 if 65 <= c <= 90 else c


cdef bint _at(const unsigned char* data, Py_ssize_t i, Py_ssize_t n, const char* word) noexcept:
    # the ASCII text data[i:] opens with *word* (lowercase), letters in either case
    cdef Py_ssize_t k = 0
    while word[k]:
        if i + k >= n or _lower_ascii(data[i + k]) != <unsigned char>word[k]:
            return False
        k += 1
    return True


cdef bint _backup_name(object name) except -1:
    # ``_BACKUP_NAME.search(name) is not None`` (loopcore.encoded), in C for an ASCII str: the
    # regex's words hold no "/", so one followed by no "/" is one in the name's last part; its
    # case folding is ASCII's for an ASCII name (the Kelvin sign, the long s and the dotted and
    # dotless I fold onto ASCII letters, so any other name is left to the regex)
    cdef Py_ssize_t n, i, start = 0
    cdef const unsigned char* data
    if type(name) is not str or not PyUnicode_IS_ASCII(name):
        return _BACKUP_NAME.search(name) is not None
    n = PyUnicode_GET_LENGTH(name)
    data = <const unsigned char*>PyUnicode_DATA(name)
    if n >= 5 and data[0] == 47 and _at(data, 1, n, b"tmp/"):
        return True
    for i in range(n):
        if data[i] == 47:  # "/"
            start = i + 1
    for i in range(start, n):
        if (
            data[i] == 126  # "~"
            or _at(data, i, n, b"orig")
            or _at(data, i, n, b"bak")
            or _at(data, i, n, b"backup")
            or _at(data, i, n, b".old")
            or _at(data, i, n, b".save")
        ):
            return True
    return False


def backup_name(name):
    """The compiled twin of ``loopcore.encoded._BACKUP_NAME.search(name) is not None``."""
    return _backup_name(name)


def full_write(args):
    """The compiled twin of loopcore.encoded._full_write."""
    return _full_write(args, None)


def copy_flag(cmd, reads, writes):
    """The compiled twin of loopcore.encoded._copy_flag."""
    return _copy_flag(cmd, reads, writes, None)


cdef int64_t _degen(object step, bint fast) except? -1:
    # loopcore.encoded.degenerate_tokens
    text = _f(step, fast, F_TEXT)
    if not text or len(text) < _LOOP_MIN_CHARS:
        return 0
    out = _f(step, fast, F_TOKENS_TURN) or (
        _f(step, fast, F_TOKENS_OUT)
        if not _f(step, fast, F_NAME) or _f(step, fast, F_REJECTED) is not None
        else 0
    )
    if not out:
        return 0
    rep = 0
    for a, b in _repeated_spans(text):
        rep += b - a
    return min(out, out * rep // len(text)) if rep else 0


def drop_comment_lines(args):
    """The compiled twin of loopcore.encoded._drop_comment_lines."""
    return _drop_comments(args)


def shell_command(args):
    """The compiled twin of loopcore.encoded._shell_command."""
    return _shell_cmd(args)


def degenerate_tokens(step):
    """The compiled twin of loopcore.encoded.degenerate_tokens."""
    return _degen(step, type(step) is _STEP and _SLOTS)


def encode_columns(list traces, settings):
    """``(columns, trace_offsets, target_offsets, target_members, tools, targets, sizes)`` of
    *traces*, sizes being ``(n_calls, n_obs, n_skeys, n_svals, n_edits)``; the same values as
    loopcore._encode_py.encode_columns."""
    cdef Py_ssize_t total = 0, i = 0, i0, k, j, n_steps
    for t in traces:
        total += len(t.steps)
    cols = {name: np.empty(total, dtype=dtype) for name, dtype in _STEP_COLUMNS}
    cdef int32_t[::1] c_session = cols["session"]
    cdef int64_t[::1] c_turn = cols["turn"]
    cdef uint8_t[::1] c_kind = cols["kind"]
    cdef int32_t[::1] c_tool = cols["tool"]
    cdef int32_t[::1] c_target = cols["target"]
    cdef int32_t[::1] c_reads = cols["reads"]
    cdef int32_t[::1] c_writes = cols["writes"]
    cdef uint64_t[::1] c_args = cols["args_hash"]
    cdef uint64_t[::1] c_result = cols["result_hash"]
    cdef uint16_t[::1] c_flags = cols["flags"]
    cdef int64_t[::1] c_tokens = cols["tokens"]
    cdef int64_t[::1] c_turn_tokens = cols["turn_tokens"]
    cdef int64_t[::1] c_degen = cols["degen"]
    cdef int32_t[::1] c_call = cols["call"]
    cdef int32_t[::1] c_obs = cols["obs"]
    cdef int32_t[::1] c_skey = cols["skey"]
    cdef int32_t[::1] c_sval = cols["sval"]
    cdef int32_t[::1] c_edit = cols["edit"]
    cdef int32_t[::1] c_undo = cols["undo"]
    # per-step facts of the first pass, kept in C until the second pass interns them
    scratch = np.empty((3, total), dtype=np.uint64)
    cdef uint64_t[:, ::1] c_hash = scratch  # state value, old hash, new hash
    # the last shell command the rules below lexed, with its segments (see _lexed)
    cdef list lexed = [None, None]
    note = np.empty(total, dtype=np.uint8)
    cdef uint8_t[::1] c_note = note  # STATE_READ / STATE_WRITE / EDIT / SUBSTANTIAL / CALL bits

    cdef dict tool_ids = {}, target_ids = {}, tset_ids = {}
    cdef list tools = [], targets = [], tsets = []
    cdef _IdMap call_ids = _IdMap(), obs_ids = _IdMap(), skey_ids = _IdMap()
    cdef _IdMap sval_ids = _IdMap(), edit_ids = _IdMap()
    cdef list members = []
    cdef list set_offsets = [0]
    offsets = np.empty(len(traces) + 1, dtype=np.int64)
    cdef int64_t[::1] c_offsets = offsets
    c_offsets[0] = 0

    cdef int64_t sub_chars = settings.substantial_chars
    cdef int64_t sub_lines = settings.substantial_lines
    cdef int kind, flags, tool, tset, call, sk
    cdef uint8_t nb
    cdef bint has_outcome, failed, no_op, untargeted, fast
    cdef uint64_t outcome, hv
    cdef int64_t chars, lines
    cdef list l_targets, l_reads, l_writes
    cdef list later = []  # steps of the trace with a reply text, scanned after its facts
    cdef object name, target, targets_t, result, error, args, reads, writes, deps, rc
    cdef object kind_code, old_h, new_h, step, steps
    cdef dict alias, inside, wide
    cdef frozenset here
    cdef set names

    for k in range(len(traces)):
        steps = traces[k].steps
        n_steps = len(steps)
        i0 = i
        l_targets = [None] * n_steps
        untargeted = False
        l_reads = [None] * n_steps
        l_writes = [None] * n_steps
        # pass 1: the facts of every step (step_facts); write sets are widened over the
        # trace's path aliases, which need every name of the trace first
        for j in range(n_steps):
            step = steps[j]
            fast = type(step) is _STEP and _SLOTS
            kind_code = _get(_KIND_CODE, _f(step, fast, F_KIND))
            if kind_code is None:
                raise ValueError(f"unknown step kind {step.kind!r}; expected one of {KINDS}")
            kind = kind_code
            target = _f(step, fast, F_TARGET)
            if target is None:
                targets_t = _EMPTY
            elif type(target) is str:
                targets_t = (target,)
            else:
                targets_t = tuple(sorted(set(step.targets)))
            flags = 0
            nb = 0
            result = _f(step, fast, F_RESULT)
            error = _f(step, fast, F_ERROR)
            has_outcome = result is not None or error is not None
            outcome = 0
            if has_outcome:  # canonical_hash([result, error], default=repr), as a C call
                hash_into([result, error], None, _REPR, &outcome)
            failed = error is not None
            name = _f(step, fast, F_NAME)
            c_args[i] = 0
            meta = _f(step, fast, F_META)
            if _f(step, fast, F_REJECTED) is not None:
                flags = S_REJECTED
                reads = _EMPTY
                writes = _EMPTY
            elif type(meta) is dict and _get(<dict>meta, "not_run") is True:
                # a call the harness never ran (see step_facts): no outcome, no call, no access
                has_outcome = False
                outcome = 0
                reads = _EMPTY
                writes = _EMPTY
            else:
                if has_outcome and type(meta) is dict:
                    # an exit code, not a bool; apart from ERROR (see step_facts)
                    rc = _get(<dict>meta, "returncode")
                    if isinstance(rc, int) and not isinstance(rc, bool) and rc != 0:
                        flags |= S_EXIT_NONZERO
                args = _drop_comments(_f(step, fast, F_ARGS))
                # blanks are normalised in an observe command only (a heredoc is content)
                if name:
                    nb |= N_CALL
                    hash_into(_norm_args(args) if kind == K_OBSERVE else args, None, _REPR, &hv)
                    c_args[i] = hv
                no_op = _f(step, fast, F_NO_OP)
                shell = _shell_cmd(args)
                if len(targets_t) == 1:
                    if kind == K_OBSERVE and has_outcome:
                        nb |= N_STATE_READ
                    elif kind == K_MUTATE and not failed and isinstance(args, dict):
                        for old_key, new_key in _REPLACE_KEYS:
                            if old_key in args and new_key in args:
                                old_h = _h(args[old_key])
                                new_h = _h(args[new_key])
                                if old_h != new_h:
                                    nb |= N_EDIT
                                    c_hash[1, i] = old_h
                                    c_hash[2, i] = new_h
                                else:  # changes nothing and undoes nothing
                                    no_op = True
                                break
                        else:
                            for key in _CONTENT_KEYS:
                                if key in args:
                                    nb |= N_STATE_WRITE
                                    c_hash[0, i] = _h(args[key])
                                    flags |= S_ABSOLUTE
                                    break
                            else:
                                if _full_write(args, lexed) and step.write_set == targets_t:
                                    flags |= S_ABSOLUTE
                if no_op:
                    flags |= S_NO_OP
                    writes = _EMPTY
                else:
                    writes = _set(_write_set(step, fast, kind))
                reads = _set(_read_set(step, fast, kind, shell))
                if shell is not None and kind == K_MUTATE and not failed and not no_op:
                    flags |= _copy_flag(shell, reads, writes, lexed)
                elif reads is None and shell is None and kind == K_OBSERVE and name:
                    # a tool's read without a target (a search API): see step_facts
                    reads = _UNTARGETED
                    untargeted = True
                if has_outcome and kind == K_OBSERVE and len(targets_t):
                    chars = lines = 0
                    _text_size(result, 0, &chars, &lines, sub_lines)
                    if error is not None and error is not True:
                        _text_size(error, 0, &chars, &lines, sub_lines)
                    if (
                        chars >= sub_chars
                        and lines >= sub_lines
                        and _reads_content(name, args, lexed)
                    ):
                        nb |= N_SUBSTANTIAL
            l_targets[j] = targets_t
            l_reads[j] = reads
            l_writes[j] = writes
            c_note[i] = nb
            c_session[i] = k
            c_turn[i] = _f(step, fast, F_TURN)
            c_kind[i] = kind
            c_result[i] = outcome
            c_flags[i] = (
                (S_HAS_OUTCOME if has_outcome else 0)
                | (S_ERROR if failed else 0)
                | (S_ESTIMATED if _f(step, fast, F_ESTIMATED) else 0)
                | (S_AFTER_USER if _f(step, fast, F_AFTER_USER) else 0)
                | flags
            )
            c_tokens[i] = _f(step, fast, F_TOKENS_IN) + _f(step, fast, F_TOKENS_OUT)
            c_turn_tokens[i] = _f(step, fast, F_TOKENS_TURN)
            if _f(step, fast, F_TEXT):
                later.append(j)
            else:
                c_degen[i] = 0
            i += 1
        # the reply-loop scans of the trace, in a run of their own after its facts (the
        # scanner's code and the pass's each stay in the instruction cache), as the reference
        # scans after every step's facts: a bad step kind is found before a text that cannot
        # be scanned
        for j in later:
            step = steps[j]
            c_degen[i0 + j] = _degen(step, type(step) is _STEP and _SLOTS)
        del later[:]

        if untargeted:
            # a trace that writes files: a search tool without a target may read any of them
            for j in range(n_steps):
                w = l_writes[j]
                if w and any(_FILE_LIKE.search(x) for x in w):
                    for j2 in range(n_steps):
                        if l_reads[j2] is _UNTARGETED:
                            l_reads[j2] = None
                    break
        names = set()
        for j in range(n_steps):
            _add_all(names, <tuple>l_targets[j])
            w = l_writes[j]
            if w:
                _add_all(names, w)
            r = l_reads[j]
            if r:
                _add_all(names, r)
        alias = _path_aliases(names)
        inside, here = _folders(names)
        wide = {}

        # pass 2: intern names, sets and keys in the order of the reference
        i = i0
        for j in range(n_steps):
            step = steps[j]
            targets_t = l_targets[j]
            reads = l_reads[j]
            writes = l_writes[j]
            if alias and writes:
                writes = _widen(writes, alias)
            if here and reads and not here.isdisjoint(reads):
                reads = None  # the working folder or the root holds anything
            if inside:
                # a failed write of one named target wrote nothing, folder or not
                if writes and not (c_flags[i] & S_ERROR and len(writes) == 1):
                    got_w = _get(wide, writes)
                    if got_w is None:
                        got_w = wide[writes] = _widen(writes, inside)
                    writes = got_w
                if reads:
                    got_w = _get(wide, reads)
                    if got_w is None:
                        got_w = wide[reads] = _widen(reads, inside)
                    reads = got_w
            nb = c_note[i]
            tool = _intern(tool_ids, tools, _f(step, type(step) is _STEP and _SLOTS, F_NAME))
            if len(targets_t):
                tset = _tset(tset_ids, tsets, target_ids, targets, members, set_offsets, targets_t)
            else:
                tset = -1
            call = call_ids.intern(<uint64_t>tool, c_args[i], 0, 0) if nb & N_CALL else -1
            c_tool[i] = tool
            c_target[i] = tset
            c_call[i] = call
            # a repeat depends on what the step reads and on what it writes (writing a file
            # again matters once something else changed it)
            if reads is None or writes is None:
                deps = None
            elif not writes or writes == reads:
                deps = reads
            else:
                deps = tuple(sorted(set(reads) | set(writes)))
            c_reads[i] = _access(
                tset_ids, tsets, target_ids, targets, members, set_offsets, deps, targets_t, tset
            )
            c_writes[i] = _access(
                tset_ids, tsets, target_ids, targets, members, set_offsets, writes, targets_t, tset
            )
            if c_kind[i] == K_OBSERVE and tset >= 0 and c_flags[i] & S_HAS_OUTCOME:
                # (a call of -1, none, is a key word like any other: ids are >= 0)
                if nb & N_SUBSTANTIAL:
                    c_obs[i] = obs_ids.intern(<uint64_t>tset, c_result[i], 0, OBS_WHOLE)
                else:
                    c_obs[i] = obs_ids.intern(
                        <uint64_t>tset, c_result[i], <uint64_t><int64_t>call, OBS_CALL
                    )
            else:
                c_obs[i] = -1
            if nb & N_STATE_READ:
                # the domain of a read is its call id, so interned ids replace the name + args
                sk = skey_ids.intern(<uint64_t>tset, <uint64_t><int64_t>call, 0, SKEY_CALL)
                c_skey[i] = sk
                c_sval[i] = sval_ids.intern(<uint64_t>sk, c_result[i], 0, 0)
            elif nb & N_STATE_WRITE:
                sk = skey_ids.intern(<uint64_t>tset, 0, 0, SKEY_WRITE)
                c_skey[i] = sk
                c_sval[i] = sval_ids.intern(<uint64_t>sk, c_hash[0, i], 0, 0)
            else:
                c_skey[i] = -1
                c_sval[i] = -1
            if nb & N_EDIT:
                c_edit[i] = edit_ids.intern(<uint64_t>tset, c_hash[1, i], c_hash[2, i], 0)
                c_undo[i] = edit_ids.intern(<uint64_t>tset, c_hash[2, i], c_hash[1, i], 0)
            else:
                c_edit[i] = -1
                c_undo[i] = -1
            i += 1
        c_offsets[k + 1] = i
    return (
        cols,
        offsets,
        np.asarray(set_offsets, dtype=np.int64),
        np.asarray(members, dtype=np.int32),
        tools,
        targets,
        (call_ids.n, obs_ids.n, skey_ids.n, sval_ids.n, edit_ids.n),
    )


cdef int _tset(
    dict tset_ids, list tsets, dict target_ids, list targets, list members, list set_offsets,
    tuple ts,
):
    cdef object i = _get(tset_ids, ts)
    if i is not None:
        return <int>i
    n = len(tsets)
    tset_ids[ts] = n
    tsets.append(ts)
    for t in ts:  # a new set: append its members (CSR)
        members.append(_intern(target_ids, targets, t))
    set_offsets.append(len(members))
    return n


cdef int _access(
    dict tset_ids, list tsets, dict target_ids, list targets, list members, list set_offsets,
    object ts, tuple own, int own_id,
):
    if ts is None:
        return ANYTHING
    if not ts:
        return NOTHING
    if ts == own:
        return own_id
    return _tset(tset_ids, tsets, target_ids, targets, members, set_offsets, ts)
