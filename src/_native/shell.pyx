"""Compiled twin of loopcore._shell_py: the shell classifier.

Same answer as the pure twin for every input (tests/test_shell_twins.py checks it with
hypothesis and on every command of the real traces, tests/test_shell_fast_paths.py on the
shortcuts below); the pure module's doc is the reference for the rules, and its tables are
imported from it, so there is one copy of them. What differs is how the work is done:

* the lexer is one pass over the characters (Py_UCS4 reads, byte loops on 1-byte strings, no
  regex) that reproduces the pure twin's token grammar exactly, including its corner cases (a
  blank other than space, tab, CR and newline splits nothing; an unterminated quote runs to the
  end; ``$(...)`` is read two parentheses deep). A word stays a range of the script for as long
  as it is one; only words glued from several pieces go through a buffer. It stops at the first
  command whose program runs unknown code: the whole script is ``exec`` then, whatever follows;
* a command of up to 8 words keeps them as ranges: the rules of the common readers (cat, head,
  grep, sed, find...) read them in place and make strs of the operands only; the other rules
  take the word list, made when asked. Heredoc bodies are ranges too until a rule reads one;
* program names and options are looked up in tables of their ASCII bytes (_Names), not by
  Python's string hash; paths are normalised by a C posixpath.normpath for ASCII paths; the
  sed no-op test is C; the classification otherwise works on the word lists with typed loops
  and character tests instead of regexes and ``startswith`` calls.

Nothing recurses with the input's size: nested commands (``bash -c`` scripts, ``find -exec``)
are read 4 levels deep as in the pure twin, and wrappers (``sudo sudo ...``) loop.
"""
cimport cython
from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject
from cpython.unicode cimport (
    Py_UNICODE_ISSPACE,
    PyUnicode_1BYTE_DATA,
    Py_UCS1,
    PyUnicode_1BYTE_KIND,
    PyUnicode_4BYTE_KIND,
    PyUnicode_DATA,
    PyUnicode_Find,
    PyUnicode_FindChar,
    PyUnicode_FromKindAndData,
    PyUnicode_GET_LENGTH,
    PyUnicode_KIND,
    PyUnicode_New,
    PyUnicode_READ,
    PyUnicode_Substring,
)
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.stdint cimport uint16_t, uint32_t
from libc.stdlib cimport calloc, free, realloc
from libc.string cimport memchr, memcpy

from codes cimport K_EXEC, K_MUTATE, K_OBSERVE, K_OTHER

import posixpath

try:  # the C function posixpath.normpath runs for a str on CPython >= 3.11, without its wrapper
    from posix import _path_normpath
except ImportError:
    _path_normpath = None

from loopcore import _codes
from loopcore import _shell_py as _ref
from loopcore._shell_py import parse_patch_targets

__all__ = ["classify_shell", "classify_shell_access", "lex", "parse_patch_targets"]

# The pure twin's tables (one copy of the rules), bound to typed module globals.
cdef frozenset _PREFIX_WORDS = _ref._PREFIX_WORDS
cdef frozenset _NEUTRAL_SEGMENTS = _ref._NEUTRAL_SEGMENTS
cdef frozenset _NEUTRAL = _ref._NEUTRAL
cdef frozenset _READERS = _ref._READERS
cdef frozenset _PATTERN_READERS = _ref._PATTERN_READERS
cdef frozenset _SYSTEM_OBSERVERS = _ref._SYSTEM_OBSERVERS
cdef frozenset _WRITERS = _ref._WRITERS
cdef frozenset _WRAPPERS = _ref._WRAPPERS
cdef frozenset _SHELLS = _ref._SHELLS
cdef dict _VALUE_OPTS = _ref._VALUE_OPTS
cdef frozenset _GIT_OBSERVE = _ref._GIT_OBSERVE
cdef frozenset _GIT_MUTATE = _ref._GIT_MUTATE
cdef frozenset _GIT_PATH_OPERANDS = _ref._GIT_PATH_OPERANDS
cdef frozenset _DEV_NULL = _ref._DEV_NULL
cdef frozenset _TREE_SEARCHERS = _ref._TREE_SEARCHERS
cdef frozenset _RECURSIVE_GREPS = _ref._RECURSIVE_GREPS
cdef str _ANYTHING = _ref._ANYTHING  # read by a command that may see any file (git diff)
cdef int _MAX_DEPTH = _ref._MAX_DEPTH

cdef frozenset _NO_OPTS = frozenset()
# The literal sets of the pure twin's rules, built once.
cdef frozenset _MORE_WRAPPERS = frozenset({"timeout", "env", "xargs", "time"})
cdef frozenset _DIR_READERS = frozenset({"ls", "ll", "tree", "du"})
cdef frozenset _PATTERN_OPTS = frozenset({"-e", "-f", "--regexp", "--file"})
cdef frozenset _SED_SCRIPT_OPTS = frozenset({"-e", "-f", "--expression", "--file"})
cdef frozenset _AWKS = frozenset({"awk", "gawk", "mawk", "nawk"})
cdef frozenset _CHMODS = frozenset({"chmod", "chown", "chgrp"})
cdef frozenset _COPIERS = frozenset({"mv", "cp", "ln", "install", "rsync", "scp"})
cdef frozenset _COPIER_OPTS = frozenset({"-t", "-S", "-m", "-o", "-g", "-e"})
cdef frozenset _FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
cdef frozenset _FIND_EXEC_END = frozenset({";", "+", "\\;"})
cdef frozenset _GIT_LISTERS = frozenset({"branch", "tag", "remote", "config", "worktree"})
cdef frozenset _GIT_LIST_DELETES = frozenset({"-d", "-D", "-m", "-M", "--delete", "--unset"})
cdef frozenset _GIT_LIST_FIRST = frozenset({"list", "-l", "--list", "-v", "--get", "show", "get-url"})
cdef frozenset _GIT_STATE_ONLY = frozenset({
    "add", "commit", "tag", "branch", "config", "remote", "notes", "gc", "prune", "worktree",
    "submodule",
})
cdef frozenset _GIT_PATH_WRITERS = frozenset({"checkout", "restore", "rm", "mv"})

# What a program name is, in one dict lookup instead of the pure twin's chain of membership
# tests. Filled lowest priority first, so a name in several groups keeps the group the pure
# twin tests first; C_PREFIX is a flag on top (reserved words skipped before the command).
cdef enum:
    C_EXEC = 0  # anything else: unknown code
    C_GIT
    C_FIND
    C_PERL
    C_APPLY_PATCH
    C_PATCH
    C_DD
    C_COPIER
    C_CHMOD
    C_WRITER
    C_TEE
    C_TR
    C_SORT
    C_AWK
    C_SED
    C_SYSTEM
    C_PATTERN_READER
    C_READER
    C_SHELL
    C_NEUTRAL
    C_WRAPPER
    C_NEUTRAL_SEGMENT
    C_MASK = 0xff
    C_PREFIX = 0x100

cdef dict _CATEGORY = {}
for _code, _names in (
    (C_GIT, {"git"}), (C_FIND, {"find"}), (C_PERL, {"perl"}), (C_APPLY_PATCH, {"apply_patch", "applypatch"}),
    (C_PATCH, {"patch"}), (C_DD, {"dd"}), (C_COPIER, _COPIERS), (C_CHMOD, _CHMODS), (C_WRITER, _WRITERS),
    (C_TEE, {"tee"}), (C_TR, {"tr"}), (C_SORT, {"sort"}), (C_AWK, _AWKS), (C_SED, {"sed", "gsed"}),
    (C_SYSTEM, _SYSTEM_OBSERVERS), (C_PATTERN_READER, _PATTERN_READERS), (C_READER, _READERS),
    (C_SHELL, _SHELLS), (C_NEUTRAL, _NEUTRAL), (C_WRAPPER, _WRAPPERS | _MORE_WRAPPERS),
    (C_NEUTRAL_SEGMENT, _NEUTRAL_SEGMENTS),
):
    for _name in _names:
        _CATEGORY[_name] = _code
for _name in _PREFIX_WORDS:
    _CATEGORY[_name] = _CATEGORY.get(_name, C_EXEC) | C_PREFIX


cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object o)


cdef enum:
    _SEG_WORDS = 8  # the most words a _Seg keeps as ranges


cdef struct _Word:
    # a word read in place: characters [a, a + n) of a str's data
    int kind
    const void* data
    Py_ssize_t a, n


cdef inline Py_UCS4 _wat(_Word w, Py_ssize_t i) noexcept:
    return PyUnicode_READ(w.kind, w.data, w.a + i)


cdef inline bint _weq(_Word w, str lit) noexcept:
    # the word is the ASCII literal *lit*
    cdef Py_ssize_t i, m = PyUnicode_GET_LENGTH(lit)
    cdef const Py_UCS1* b = <const Py_UCS1*>PyUnicode_DATA(lit)
    if w.n != m:
        return False
    for i in range(m):
        if _wat(w, i) != b[i]:
            return False
    return True


cdef inline bint _wstarts(_Word w, str lit) noexcept:
    # the word starts with the ASCII literal *lit*
    cdef Py_ssize_t i, m = PyUnicode_GET_LENGTH(lit)
    cdef const Py_UCS1* b = <const Py_UCS1*>PyUnicode_DATA(lit)
    if w.n < m:
        return False
    for i in range(m):
        if _wat(w, i) != b[i]:
            return False
    return True


cdef inline Py_UCS4 _wfirst(_Word w) noexcept:
    return _wat(w, 0) if w.n else 0


cdef inline bint _whas(_Word w, Py_UCS4 c, Py_ssize_t start) noexcept:
    cdef Py_ssize_t i
    for i in range(start, w.n):
        if _wat(w, i) == c:
            return True
    return False


cdef struct _Slot:
    const unsigned char* chars  # NULL: an empty slot
    Py_ssize_t n
    uint32_t hash
    int value


cdef inline uint32_t _key_hash(const unsigned char* p, Py_ssize_t n) noexcept:
    # of n >= 1 characters: the length and three of them, which tell the table's keys apart well
    # enough (a collision costs a probe, never a wrong answer)
    return ((<uint32_t>n * 2654435761u) ^ (p[0] * 16777619u) ^ (p[n - 1] * 40503u)
            ^ (p[n >> 1] * 97u))


@cython.final
@cython.no_gc  # holds bytes only
cdef class _Names:
    """A read-only map from str keys to ints >= 0, looked up without hashing the key the way
    Python does (siphash over every fresh word is much of the classifier's cost): an
    open-addressing table over the keys' ASCII bytes. Keys that are not ASCII (the tables have
    none) go to a dict instead, so the answer is a dict's in every case."""

    cdef _Slot* slots
    cdef size_t mask
    cdef Py_ssize_t max_len
    cdef int empty_value  # the value of the key "", -1 when it is not a key
    cdef list keep  # the keys' bytes, which the slots point into
    cdef dict other  # the keys that are not ASCII, None when there are none

    def __dealloc__(self):
        free(self.slots)

    cdef inline int get(self, str w) noexcept:
        """The value of *w*, -1 when it is not a key."""
        cdef Py_ssize_t n = PyUnicode_GET_LENGTH(w)
        cdef PyObject* v
        if not PyUnicode_IS_ASCII(w):
            if self.other is None:
                return -1
            v = PyDict_GetItem(self.other, w)
            return -1 if v == NULL else <int><object>v
        if n > self.max_len:
            return -1
        if n == 0:
            return self.empty_value
        return self.probe(PyUnicode_1BYTE_DATA(w), n)

    cdef inline int probe(self, const unsigned char* p, Py_ssize_t n) noexcept:
        """The value of the n > 0 ASCII bytes at *p*, -1 when they are not a key."""
        cdef uint32_t h = _key_hash(p, n)
        cdef size_t i = h & self.mask
        cdef Py_ssize_t k
        cdef _Slot* slot
        while True:
            slot = &self.slots[i]
            if slot.chars == NULL:
                return -1
            if slot.hash == h and slot.n == n:
                k = 0
                while k < n and slot.chars[k] == p[k]:
                    k += 1
                if k == n:
                    return slot.value
            i = (i + 1) & self.mask


cdef inline int _wget(_Names t, _Word w) noexcept:
    """``t.get(word)`` for a word read in place."""
    cdef unsigned char buf[64]
    cdef const unsigned char* p
    cdef Py_ssize_t i, n = w.n
    cdef Py_UCS4 c
    if t.other is not None:  # keys that are not ASCII: ask with a str
        return t.get(PyUnicode_FromKindAndData(w.kind, <const char*>w.data + w.a * w.kind, n))
    if n > t.max_len:
        return -1
    if n == 0:
        return t.empty_value
    if w.kind == PyUnicode_1BYTE_KIND:
        p = <const unsigned char*>w.data + w.a  # a byte >= 128 matches no (ASCII) key
    else:
        if n > 64:  # longer than the buffer (no key is): ask with a str
            return t.get(PyUnicode_FromKindAndData(w.kind, <const char*>w.data + w.a * w.kind, n))
        for i in range(n):
            c = _wat(w, i)
            if c >= 128:
                return -1
            buf[i] = <unsigned char>c
        p = buf
    return t.probe(p, n)


cdef _Names _name_table(object items):
    """A _Names of *items*: a dict of str -> int >= 0, or a set of str (each then maps to 1)."""
    cdef _Names t = _Names.__new__(_Names)
    cdef dict d = dict(items) if isinstance(items, dict) else dict.fromkeys(items, 1)
    cdef size_t size = 8, i
    cdef bytes b
    cdef uint32_t h
    cdef _Slot* slot
    while size < 2 * len(d) + 2:
        size *= 2
    t.slots = <_Slot*>calloc(size, sizeof(_Slot))
    if t.slots == NULL:
        raise MemoryError()
    t.mask = size - 1
    t.max_len = 0
    t.empty_value = -1
    t.keep = []
    t.other = None
    for key, value in d.items():
        if not isinstance(key, str) or type(value) is not int or value < 0:
            raise TypeError("_Names maps str keys to ints >= 0")
        if not (<str>key).isascii():
            if t.other is None:
                t.other = {}
            t.other[key] = value
            continue
        if not key:
            t.empty_value = value
            continue
        b = (<str>key).encode("ascii")
        t.keep.append(b)
        h = _key_hash(<const unsigned char*><char*>b, len(b))
        i = h & t.mask
        while t.slots[i].chars != NULL:
            i = (i + 1) & t.mask
        slot = &t.slots[i]
        slot.chars = <const unsigned char*><char*>b
        slot.n = len(b)
        slot.hash = h
        slot.value = value
        t.max_len = max(t.max_len, len(b))
    return t


# The program names: category (C_* | C_PREFIX) in the low 16 bits, and above them 1 + the index in
# _OPTS of the program's options that take a value (0: none listed).
cdef list _OPTS = []
cdef dict _INFO = dict(_CATEGORY)
for _name, _opts in _VALUE_OPTS.items():
    _INFO[_name] = _INFO.get(_name, C_EXEC) | (len(_OPTS) + 1) << 16
    _OPTS.append(_name_table(_opts))
cdef _Names _PROGRAMS = _name_table(_INFO)


cdef inline int _info(str name) noexcept:
    # the program's _PROGRAMS value (C_EXEC, no options, when it is not listed)
    cdef int v = _PROGRAMS.get(name)
    return C_EXEC if v < 0 else v


cdef inline _Names _opts_of(int info, _Names default):
    # the options that take a value of the program whose _info is *info*
    cdef int k = info >> 16
    return default if k == 0 else <_Names>_OPTS[k - 1]


cdef inline _Names _opts_named(str cmd):
    return _opts_of(_info(cmd), None)


# The sets the per-word tests read, as _Names.
cdef _Names _NO_OPTS_N = _name_table(_NO_OPTS)
cdef _Names _COPIER_OPTS_N = _name_table(_COPIER_OPTS)
cdef _Names _PATTERN_OPTS_N = _name_table(_PATTERN_OPTS)
cdef _Names _SED_SCRIPT_OPTS_N = _name_table(_SED_SCRIPT_OPTS)
cdef _Names _DEV_NULL_N = _name_table(_DEV_NULL)
cdef _Names _DIR_READERS_N = _name_table(_DIR_READERS)
cdef _Names _FIND_EXEC_N = _name_table(_FIND_EXEC)
cdef _Names _FIND_EXEC_END_N = _name_table(_FIND_EXEC_END)
cdef _Names _NEUTRAL_SEGMENTS_N = _name_table(_NEUTRAL_SEGMENTS)
cdef _Names _SED_OPTS_N = _opts_named(u"sed")
cdef _Names _AWK_OPTS_N = _opts_named(u"awk")
cdef _Names _SORT_OPTS_N = _opts_named(u"sort")
cdef _Names _PATCH_OPTS_N = _opts_named(u"patch")


cdef inline bint _has(str w, Py_UCS4 c, Py_ssize_t start=0) noexcept:
    """``c in w[start:]``, by a plain loop: words are short, and memchr's setup costs more."""
    cdef Py_ssize_t i, n = PyUnicode_GET_LENGTH(w)
    cdef int kind = PyUnicode_KIND(w)
    cdef void* data = PyUnicode_DATA(w)
    cdef const Py_UCS1* b
    if kind == PyUnicode_1BYTE_KIND:
        b = <const Py_UCS1*>data
        for i in range(start, n):
            if b[i] == c:
                return True
        return False
    for i in range(start, n):
        if PyUnicode_READ(kind, data, i) == c:
            return True
    return False

cdef inline Py_ssize_t _findc(str s, Py_UCS4 c, Py_ssize_t start, Py_ssize_t end,
                              int direction) except -2:
    """``PyUnicode_FindChar(s, c, start, end, direction)``, by memchr or a byte loop on a 1-byte
    string (the call's own set-up costs more than the search on most words)."""
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(s), i
    cdef const Py_UCS1* b
    cdef const void* hit
    if PyUnicode_KIND(s) != PyUnicode_1BYTE_KIND or c > 255:
        return PyUnicode_FindChar(s, c, start, end, direction)
    if end > n:
        end = n
    if start < 0:
        start = 0
    if start >= end:
        return -1
    b = <const Py_UCS1*>PyUnicode_DATA(s)
    if direction > 0:
        hit = memchr(b + start, <int>c, <size_t>(end - start))
        return -1 if hit == NULL else <const Py_UCS1*>hit - b
    i = end - 1
    while i >= start:
        if b[i] == c:
            return i
        i -= 1
    return -1


cdef inline bint _eq(str a, str b) noexcept:
    """``a == b`` for exact strs (the lexer's words, literals), without a call: equal strs have
    the same length and the same character size (a str is stored in the smallest that fits)."""
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(a), i
    cdef int kind
    cdef const Py_UCS1* x
    cdef const Py_UCS1* y
    if <PyObject*>a == <PyObject*>b:
        return True
    if n != PyUnicode_GET_LENGTH(b):
        return False
    kind = PyUnicode_KIND(a)
    if kind != PyUnicode_KIND(b):
        return False
    x = <const Py_UCS1*>PyUnicode_DATA(a)
    y = <const Py_UCS1*>PyUnicode_DATA(b)
    for i in range(n * kind):
        if x[i] != y[i]:
            return False
    return True


cdef inline bint _starts(str w, str prefix) noexcept:
    """``w.startswith(prefix)`` for an ASCII *prefix*."""
    cdef Py_ssize_t i, m = PyUnicode_GET_LENGTH(prefix)
    cdef int kind
    cdef void* data
    if PyUnicode_GET_LENGTH(w) < m:
        return False
    kind = PyUnicode_KIND(w)
    data = PyUnicode_DATA(w)
    for i in range(m):
        if PyUnicode_READ(kind, data, i) != (<const Py_UCS1*>PyUnicode_DATA(prefix))[i]:
            return False
    return True


cdef tuple _KIND_NAMES = _codes.KIND_NAMES  # indexed by the K_* codes

# Redirections, as the lexer keeps them (the pure twin's _REDIR_OPS values).
cdef enum:
    R_NONE = 0
    R_OUT = 1           # >  >|  <>  &>
    R_APPEND = 2        # >>  &>>
    R_IN = 3            # <
    R_DUP = 4           # >&  <&
    R_HERESTRING = 5    # <<<
    R_HEREDOC = 6       # <<
    R_HEREDOC_TABS = 7  # <<-

cdef str _OUT = ">"
cdef str _APPEND = ">>"
cdef str _IN = "<"
cdef str _DUP = "dup"
cdef tuple _REDIR_NAMES = (None, _OUT, _APPEND, _IN, _DUP)

# The characters below 256 a plain word run may contain: not a blank (Python's str.isspace())
# and not one of \ ' " $ ` < > | & ; ( ) #. Beyond, everything but a blank.
cdef unsigned char _PLAIN[256]
for _c in range(256):
    _PLAIN[_c] = not (chr(_c).isspace() or chr(_c) in "\\'\"$`<>|&;()#")


cdef inline bint _is_plain(Py_UCS4 c) noexcept:
    if c < 256:
        return _PLAIN[c]
    return not Py_UNICODE_ISSPACE(c)


cdef inline bint _is_digit(Py_UCS4 c) noexcept:
    return c >= u'0' and c <= u'9'


cdef inline bint _is_paren(Py_UCS4 c) noexcept:
    return c == u'(' or c == u')'


# ---------------------------------------------------------------------------------------------
# The lexer


@cython.final
@cython.freelist(64)
@cython.no_gc  # holds lists of strings only: never part of a reference cycle
cdef class _Seg:
    """One simple command: its words, redirections ((op, target) tuples) and heredoc bodies.

    ``redirs`` stays None until the command has one (most have none). A heredoc body is kept as
    its range of the script (*src*) and made a str only when a rule reads it (a shell fed a
    script, apply_patch): most bodies are files written by ``cat > f <<EOF``, never read.

    The words of a command of up to _SEG_WORDS words are kept as ranges of *src* too (those the
    lexer glued from several pieces, and the program's name, as strs in *objs*): the rules of
    the common readers (_classify_span) read them in place and make strs of the operands only;
    the others take the list :meth:`word_list` makes. A longer command has its list at once.
    """

    cdef Py_ssize_t nw  # how many words
    cdef list words  # the words as strs; None while they are kept in sp
    # word i is src[sp[2 * i]:sp[2 * i + 1]], or objs[-1 - sp[2 * i]] when sp[2 * i] < 0
    cdef Py_ssize_t sp[2 * _SEG_WORDS]
    cdef list objs
    # What the lexer found of the program word (see _Lexer.command_word): cmd_b is its index,
    # cmd_info its _PROGRAMS value, cmd_slash whether it has a "/"; cmd_known is False when the
    # lexer did not look (or every word is a reserved word or an assignment)
    cdef bint cmd_known, cmd_slash
    cdef Py_ssize_t cmd_b
    cdef int cmd_info
    cdef list redirs
    cdef str src  # the script
    cdef Py_ssize_t hd_n  # how many heredocs
    cdef Py_ssize_t hd_start, hd_end  # the first one's body, src[hd_start:hd_end]
    cdef list hd_more  # the others' (start, end), None until there are others
    # the tokens of its words that may hold a command substitution, as the pure twin's
    # _Seg.subs: unquoted $(...) and `...` as written, the raw text of "..." holding "$(" or
    # "`"; None while there are none
    cdef list subs

    cdef int add_sub(self, str text) except -1:
        if self.subs is None:
            self.subs = [text]
        else:
            self.subs.append(text)
        return 0

    cdef int add_heredoc(self, str src, Py_ssize_t start, Py_ssize_t end) except -1:
        self.src = src
        if self.hd_n == 0:
            self.hd_start = start
            self.hd_end = end
        elif self.hd_more is None:
            self.hd_more = [(start, end)]
        else:
            self.hd_more.append((start, end))
        self.hd_n += 1
        return 0

    cdef str heredoc(self, Py_ssize_t i):
        # the body of heredoc i < hd_n
        if i == 0:
            return PyUnicode_Substring(self.src, self.hd_start, self.hd_end)
        start, end = self.hd_more[i - 1]
        return PyUnicode_Substring(self.src, start, end)

    cdef list heredocs(self):
        return [self.heredoc(i) for i in range(self.hd_n)]

    cdef str word(self, Py_ssize_t i):
        # word i < nw as a str (a new one for a range at each call)
        cdef Py_ssize_t a
        if self.words is not None:
            return <str>self.words[i]
        a = self.sp[2 * i]
        if a < 0:
            return <str>self.objs[-1 - a]
        return PyUnicode_Substring(self.src, a, self.sp[2 * i + 1])

    cdef list word_list(self):
        cdef Py_ssize_t i
        if self.words is None:
            self.words = [self.word(i) for i in range(self.nw)]
        return self.words

    cdef inline _Word ref(self, Py_ssize_t i) noexcept:
        # word i < nw, to read in place (valid while the seg lives); only when words is None
        cdef _Word r
        cdef Py_ssize_t a = self.sp[2 * i]
        cdef str w
        if a < 0:
            w = <str>self.objs[-1 - a]
            r.kind = PyUnicode_KIND(w)
            r.data = PyUnicode_DATA(w)
            r.a = 0
            r.n = PyUnicode_GET_LENGTH(w)
        else:
            r.kind = PyUnicode_KIND(self.src)
            r.data = PyUnicode_DATA(self.src)
            r.a = a
            r.n = self.sp[2 * i + 1] - a
        return r


cdef inline _Seg _new_seg():
    # its words are set when it ends (_Lexer.push)
    return _Seg.__new__(_Seg)


cdef extern from *:
    """
    #include <string.h>
    /* First occurrence of needle[0:m] in hay[0:n] (m >= 1), or NULL. memchr on the needle's first
       byte, then memcmp: a heredoc delimiter ("EOF") starts with a rare byte, and memchr runs far
       faster than a general search. After many false starts, memmem (where libc has it). */
    static const char *loopcore_memmem(const char *hay, size_t n, const char *needle, size_t m) {
        const char *p = hay, *end = hay + n;
        int false_starts = 0;
        while (m <= (size_t)(end - p)) {
            p = (const char *)memchr(p, (unsigned char)needle[0], (size_t)(end - p) - m + 1);
            if (p == NULL)
                return NULL;
            if (memcmp(p, needle, m) == 0)
                return p;
            p++;
    #if defined(__GLIBC__) || defined(__APPLE__) || defined(__FreeBSD__) || defined(__OpenBSD__) || defined(__NetBSD__)
            if (++false_starts > 32)
                return m <= (size_t)(end - p) ? (const char *)memmem(p, (size_t)(end - p), needle, m) : NULL;
    #endif
        }
        return NULL;
    }
    /* The first i' >= i with s[i'] not in table (table[byte] == 0), or n. */
    static inline Py_ssize_t loopcore_span(const unsigned char *s, Py_ssize_t i, Py_ssize_t n,
                                           const unsigned char *table) {
        while (i < n && table[s[i]])
            i++;
        return i;
    }
    """
    const char* loopcore_memmem(const char* hay, size_t n, const char* needle, size_t m) nogil
    Py_ssize_t loopcore_span(const unsigned char* s, Py_ssize_t i, Py_ssize_t n,
                             const unsigned char* table) nogil


cdef Py_ssize_t _find(str s, str sub, Py_ssize_t start, Py_ssize_t end) except -2:
    """``s.find(sub, start, end)`` for a non-empty *sub*, by memmem over the characters' bytes
    (CPython's own search is several times slower on the delimiters of heredocs)."""
    cdef int k = PyUnicode_KIND(s), ksub = PyUnicode_KIND(sub)
    cdef Py_ssize_t m = PyUnicode_GET_LENGTH(sub), off, i
    cdef const char* data = <const char*>PyUnicode_DATA(s)
    cdef const char* hit
    cdef const char* pattern
    cdef char* needle = NULL
    cdef Py_UCS4 c
    if ksub > k:  # sub has a character s cannot hold
        return PyUnicode_Find(s, sub, start, end, 1)
    if end - start < m:
        return -1
    if ksub != k:  # widen sub to s's character size
        needle = <char*>PyMem_Malloc(m * k)
        if needle == NULL:
            raise MemoryError()
        for i in range(m):
            c = PyUnicode_READ(ksub, PyUnicode_DATA(sub), i)
            if k == 2:
                (<uint16_t*>needle)[i] = <uint16_t>c
            else:
                (<Py_UCS4*>needle)[i] = c
    pattern = <const char*>needle if needle != NULL else <const char*>PyUnicode_DATA(sub)
    try:
        off = start * k
        while True:
            hit = loopcore_memmem(data + off, <size_t>(end * k - off), pattern, <size_t>(m * k))
            if hit == NULL:
                return -1
            off = hit - data
            if off % k == 0:
                return off // k
            off += k - off % k  # a match across characters: go on from the next character
    finally:
        PyMem_Free(needle)


cdef Py_ssize_t _heredoc_end(str s, Py_ssize_t pos, str delim, bint strip_tabs) except -2:
    """Index of the line that ends a heredoc body starting at *pos* (-1 when there is none)."""
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(s), d = PyUnicode_GET_LENGTH(delim)
    cdef Py_ssize_t k = pos, j, i, nl, tail_end
    cdef Py_ssize_t prev_j = 0, line_start = 0  # start of the line of prev_j
    cdef int kind = PyUnicode_KIND(s)
    cdef void* data = PyUnicode_DATA(s)
    cdef bint ok
    if d == 0:
        return -1
    while True:
        j = _find(s, delim, k, n)
        if j < 0:
            return -1
        # s.rfind("\n", 0, j) + 1, searching only back to the previous match: a long line full
        # of matches costs linear time, not quadratic.
        nl = PyUnicode_FindChar(s, u'\n', prev_j, j, -1)
        if nl >= 0:
            line_start = nl + 1
        prev_j = j
        k = j + d
        if line_start < pos:
            continue
        if j > line_start:  # text before the delimiter: only tabs, and only for <<-
            if not strip_tabs:
                continue
            ok = True
            for i in range(line_start, j):
                if PyUnicode_READ(kind, data, i) != u'\t':
                    ok = False
                    break
            if not ok:
                continue
        tail_end = _findc(s, u'\n', k, n, 1)
        if tail_end < 0:
            tail_end = n
        ok = True
        for i in range(k, tail_end):
            if PyUnicode_READ(kind, data, i) != u'\r':
                ok = False
                break
        if ok:
            return line_start


cdef Py_ssize_t _substitution_end(int kind, const void* data, Py_ssize_t n, Py_ssize_t p) noexcept:
    """End of the ``$(...)`` token at *p* of the characters [0, n): the pure twin's regex
    ``\\$\\([^()]*(?:\\([^()]*(?:\\([^()]*\\)[^()]*)*\\)[^()]*)*\\)?``, greedy."""
    cdef Py_ssize_t q = p + 2, r
    while True:
        while q < n and not _is_paren(PyUnicode_READ(kind, data, q)):
            q += 1
        if q >= n:
            return n
        if PyUnicode_READ(kind, data, q) == u')':
            return q + 1
        # "(": a group (one more level may nest inside it) or the end of the token
        r = q + 1
        while True:
            while r < n and not _is_paren(PyUnicode_READ(kind, data, r)):
                r += 1
            if r >= n:
                return q  # unclosed: the token ends before this "("
            if PyUnicode_READ(kind, data, r) == u')':
                q = r + 1
                break
            r += 1  # a nested "(": it must close before any other parenthesis
            while r < n and not _is_paren(PyUnicode_READ(kind, data, r)):
                r += 1
            if r >= n or PyUnicode_READ(kind, data, r) == u'(':
                return q
            r += 1


cdef list _substitutions(str text):
    """The commands run by the substitutions in *text*, a token kept in ``_Seg.subs``: the pure
    twin's _substitutions (a backslash escapes the next character, `...` ends at the next
    backquote, $(...) where the lexer's token ends, $((...)) is arithmetic read on)."""
    cdef list out = []
    cdef Py_ssize_t i = 0, j, n = PyUnicode_GET_LENGTH(text)
    cdef int kind = PyUnicode_KIND(text)
    cdef const void* data = PyUnicode_DATA(text)
    cdef Py_UCS4 c
    while i < n:
        c = PyUnicode_READ(kind, data, i)
        if c == u'\\':
            i += 2
        elif c == u'`':
            j = _findc(text, u'`', i + 1, n, 1) if i + 1 < n else -1
            if j < 0:
                j = n
            out.append(PyUnicode_Substring(text, i + 1, j))
            i = j + 1
        elif c == u'$' and i + 1 < n and PyUnicode_READ(kind, data, i + 1) == u'(':
            if i + 2 < n and PyUnicode_READ(kind, data, i + 2) == u'(':
                i += 3  # arithmetic
                continue
            j = _substitution_end(kind, data, n, i)
            if PyUnicode_READ(kind, data, j - 1) == u')' and j - i > 2:
                out.append(PyUnicode_Substring(text, i + 2, j - 1))
            else:
                out.append(PyUnicode_Substring(text, i + 2, j))
            i = j
        else:
            i += 1
    return out


@cython.final
@cython.freelist(8)
@cython.no_gc  # owns its commands; nothing refers back to it
cdef class _Lexer:
    """Splits one script into simple commands, a few at a time (see :meth:`advance`).

    The grammar is the pure twin's ``_TOKEN`` regex and ``_lex_slow`` loop, character by
    character. The word being built is either the source range [w_start, w_end) (w_contig) or
    the first w_len characters of buf.
    """

    cdef str s
    cdef int kind
    cdef void* data
    cdef Py_ssize_t n, pos
    cdef bint w_open, w_contig
    cdef Py_ssize_t w_start, w_end, w_len, w_cap
    cdef Py_UCS4* buf
    cdef int redir
    cdef _Seg seg
    cdef list segs
    cdef list pending  # (delimiter, strip tabs, owner) of heredocs whose body starts at the next
                       # newline, None when there are none
    # With stop_exec set, the lexer stops at the first word that names a program the classifier
    # cannot read (see command_word), setting found_exec: the whole script is exec then.
    # cmd_seen: the current command's words so far hold more than reserved words and assignments.
    cdef bint stop_exec, cmd_seen, found_exec
    cdef bint pushed  # a command ended since advance() began
    # The current command's words, as _Seg.sp keeps them (ranges of s, or strs in wobjs); ws is
    # ws_inline or a heap array, of room for w_room words.
    cdef Py_ssize_t* ws
    cdef Py_ssize_t nw, w_room
    cdef Py_ssize_t ws_inline[2 * _SEG_WORDS]
    cdef list wobjs

    cdef void init(self, str s):
        # a new lexer, or a released one (_release): buf and ws stay as they are
        self.s = s
        self.kind = PyUnicode_KIND(s)
        self.data = PyUnicode_DATA(s)
        self.n = PyUnicode_GET_LENGTH(s)
        self.pos = 0
        self.w_open = False
        self.w_contig = False
        self.w_len = 0
        self.redir = R_NONE
        self.seg = _new_seg()
        self.segs = []
        self.pending = None
        self.stop_exec = False
        self.cmd_seen = False
        self.found_exec = False
        self.pushed = False
        if self.ws == NULL:
            self.ws = self.ws_inline
            self.w_room = _SEG_WORDS
        self.nw = 0
        self.wobjs = None

    def __dealloc__(self):
        free(self.buf)
        if self.ws != self.ws_inline:
            PyMem_Free(self.ws)

    cdef int add_word(self, Py_ssize_t a, Py_ssize_t b) except -1:
        """Add a word: s[a:b], or with a < 0 the str wobjs[-1 - a]."""
        cdef Py_ssize_t* grown
        cdef Py_ssize_t room
        if self.nw == self.w_room:
            room = 2 * self.w_room
            grown = <Py_ssize_t*>PyMem_Malloc(2 * room * sizeof(Py_ssize_t))
            if grown == NULL:
                raise MemoryError()
            memcpy(grown, self.ws, 2 * self.nw * sizeof(Py_ssize_t))
            if self.ws != self.ws_inline:
                PyMem_Free(self.ws)
            self.ws = grown
            self.w_room = room
        self.ws[2 * self.nw] = a
        self.ws[2 * self.nw + 1] = b
        self.nw += 1
        return 0

    cdef Py_ssize_t add_obj(self, str w) except 0:  # it returns -1 - index, never 0
        # the index in wobjs for a word kept as a str
        if self.wobjs is None:
            self.wobjs = []
        self.wobjs.append(w)
        return -len(self.wobjs)  # -1 - index

    cdef str made_word(self, Py_ssize_t i):
        # the current command's word i as a str (a new one for a range)
        cdef Py_ssize_t a = self.ws[2 * i]
        if a < 0:
            return <str>self.wobjs[-1 - a]
        return PyUnicode_Substring(self.s, a, self.ws[2 * i + 1])

    cdef str word(self, Py_ssize_t i):
        # the current command's word i as a str, kept as one from now on
        cdef Py_ssize_t a = self.ws[2 * i]
        cdef str w
        if a < 0:
            return <str>self.wobjs[-1 - a]
        w = PyUnicode_Substring(self.s, a, self.ws[2 * i + 1])
        self.ws[2 * i] = self.add_obj(w)
        return w

    cdef inline bint filled(self) noexcept:
        # the current command has a word, a redirection or a heredoc
        return self.nw > 0 or self.seg.redirs is not None or self.seg.hd_n > 0

    cdef inline Py_UCS4 at(self, Py_ssize_t i) noexcept:
        return PyUnicode_READ(self.kind, self.data, i)

    cdef inline Py_ssize_t find(self, Py_UCS4 c, Py_ssize_t start, Py_ssize_t end) except -2:
        """Index of the first *c* in [start, end), or *end*."""
        if start >= end:
            return end
        start = _findc(self.s, c, start, end, 1)
        return end if start < 0 else start

    cdef int _grow(self, Py_ssize_t need) except -1:
        cdef Py_ssize_t cap
        cdef Py_UCS4* grown
        if need > self.w_cap:
            cap = max(need, 2 * self.w_cap, 64)
            grown = <Py_UCS4*>realloc(self.buf, cap * sizeof(Py_UCS4))
            if grown == NULL:
                raise MemoryError()
            self.buf = grown
            self.w_cap = cap
        return 0

    cdef int _copy(self, Py_ssize_t a, Py_ssize_t b) except -1:
        cdef Py_ssize_t i
        self._grow(self.w_len + (b - a))
        for i in range(a, b):
            self.buf[self.w_len] = self.at(i)
            self.w_len += 1
        return 0

    cdef int append(self, Py_ssize_t a, Py_ssize_t b) except -1:
        """Add the source characters [a, b) to the word, opening it (even when a == b)."""
        if not self.w_open:
            self.w_open = True
            self.w_contig = True
            self.w_start = a
            self.w_end = b
            return 0
        if a == b:
            return 0
        if self.w_contig:
            if a == self.w_end:
                self.w_end = b
                return 0
            self.w_contig = False
            self.w_len = 0
            self._copy(self.w_start, self.w_end)
        return self._copy(a, b)

    cdef int append_psub(self, Py_ssize_t a, Py_ssize_t b) except -1:
        """Add the process substitution s[a:b] (``<(...)``, ``>(...)``) to the word written as
        the command substitution ``$(...)`` (the pure twin's "psub" token)."""
        cdef Py_ssize_t c0 = self.w_start, c1 = self.w_end
        cdef bint was_contig = self.w_open and self.w_contig
        if not self.w_open:
            self.w_open = True
            self.w_len = 0
        self.w_contig = False
        if was_contig:
            self.w_len = 0
            self._copy(c0, c1)
        if self.w_len + 1 > self.w_cap:
            self._grow(self.w_len + 1)
        self.buf[self.w_len] = u'$'
        self.w_len += 1
        return self._copy(a + 1, b)

    cdef int end_word(self) except -1:
        cdef str w
        cdef int op
        if not self.w_open:
            return 0
        self.w_open = False
        op = self.redir
        if op == R_NONE:
            if self.w_contig:
                self.add_word(self.w_start, self.w_end)
            else:
                w = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, self.buf, self.w_len)
                self.add_word(self.add_obj(w), 0)
            if self.stop_exec and not self.cmd_seen:
                self.command_word(self.nw - 1)
            return 0
        if self.w_contig:
            w = PyUnicode_Substring(self.s, self.w_start, self.w_end)
        else:
            w = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, self.buf, self.w_len)
        self.redir = R_NONE
        if op == R_HEREDOC or op == R_HEREDOC_TABS:
            if self.pending is None:
                self.pending = []
            self.pending.append((w, op == R_HEREDOC_TABS, self.seg))
        elif op != R_HERESTRING:
            if self.seg.redirs is None:
                self.seg.redirs = []
            self.seg.redirs.append((_REDIR_NAMES[op], w))
        return 0

    cdef int push(self) except -1:
        cdef _Seg seg = self.seg
        cdef Py_ssize_t i
        if self.filled():
            seg.src = self.s
            seg.nw = self.nw
            seg.objs = self.wobjs
            if self.nw <= _SEG_WORDS:
                memcpy(seg.sp, self.ws, 2 * self.nw * sizeof(Py_ssize_t))
            else:
                seg.words = [self.made_word(i) for i in range(self.nw)]
                seg.objs = None
            self.nw = 0
            self.wobjs = None
            self.segs.append(seg)
            self.seg = _new_seg()
            self.cmd_seen = False
            self.pushed = True
        return 0

    cdef int command_word(self, Py_ssize_t i) except -1:
        """Word *i* joins a command with no word yet but reserved words and assignments."""
        cdef _Word w = self.ref(i)
        cdef int code = _wget(_PROGRAMS, w)
        cdef Py_ssize_t slash
        if code < 0:
            code = C_EXEC
        if code & C_PREFIX or (_whas(w, u'=', 0) and _is_assignment(self.made_word(i))):
            return 0  # _classify_words skips it
        self.cmd_seen = True
        self.seg.cmd_known = True
        self.seg.cmd_b = i
        self.seg.cmd_info = code
        # whether _classify_words returns _EXEC for the command whatever its other words are: the
        # program (the part after the last "/") is one it does not know
        slash = w.n - 1
        while slash >= 0 and _wat(w, slash) != u'/':
            slash -= 1
        if slash >= 0:
            self.seg.cmd_slash = True
            if _wget(_NEUTRAL_SEGMENTS_N, w) >= 0:
                return 0
            w.a += slash + 1
            w.n -= slash + 1
            code = _wget(_PROGRAMS, w)
            if code < 0:
                code = C_EXEC
        if (code & C_MASK) == C_EXEC:
            self.found_exec = True
        return 0

    cdef inline _Word ref(self, Py_ssize_t i) noexcept:
        # the current command's word i, to read in place (as _Seg.ref)
        cdef _Word r
        cdef Py_ssize_t a = self.ws[2 * i]
        cdef str w
        if a < 0:
            w = <str>self.wobjs[-1 - a]
            r.kind = PyUnicode_KIND(w)
            r.data = PyUnicode_DATA(w)
            r.a = 0
            r.n = PyUnicode_GET_LENGTH(w)
        else:
            r.kind = self.kind
            r.data = self.data
            r.a = a
            r.n = self.ws[2 * i + 1] - a
        return r

    cdef inline Py_ssize_t substitution_end(self, Py_ssize_t p) noexcept:
        return _substitution_end(self.kind, self.data, self.n, p)

    cdef Py_ssize_t double_quoted(self, Py_ssize_t p) except -1:
        """Lex the ``"..."`` token at *p* into the word; returns the position after it."""
        cdef Py_ssize_t n = self.n, q = p + 1, quote, bs, e, b, i, run
        cdef Py_UCS4 c
        # up to the first '"' that no backslash escapes (each backslash takes the next character)
        quote = self.find(u'"', q, n)
        while True:
            if q > quote:
                quote = self.find(u'"', q, n)
            bs = self.find(u'\\', q, quote)
            if bs >= quote:
                q = quote
                break
            if bs + 1 >= n:
                q = bs  # a backslash at the very end is a token of its own
                break
            q = bs + 2
        e = q + 1 if q < n and self.at(q) == u'"' else q  # after the closing quote, if any
        # the part is tok[1:-1] when the token ends with '"' (even an escaped one), else tok[1:]
        b = e - 1 if (e - p > 1 and self.at(e - 1) == u'"') else e
        if self._may_substitute(p + 1, b):
            self.seg.add_sub(PyUnicode_Substring(self.s, p + 1, b))
        # \" \\ \$ \` and backslash-newline lose their backslash; other escapes stay as written
        self.append(p + 1, p + 1)
        run = p + 1
        i = self.find(u'\\', p + 1, b)
        while i + 1 < b:
            c = self.at(i + 1)
            if c == u'"' or c == u'\\' or c == u'$' or c == u'`' or c == u'\n':
                self.append(run, i)
                run = i + 1
                i += 1  # the escaped character is kept as it is, never read as an escape
            i = self.find(u'\\', i + 1, b)
        self.append(run, b)
        return e

    cdef bint _may_substitute(self, Py_ssize_t a, Py_ssize_t b) except -1:
        # s[a:b] holds "$(" or "`" (the pure twin's test of a double-quoted token's text)
        cdef Py_ssize_t i
        if self.find(u'`', a, b) < b:
            return True
        i = self.find(u'$', a, b)
        while i + 1 < b:
            if self.at(i + 1) == u'(':
                return True
            i = self.find(u'$', i + 1, b)
        return False

    cdef Py_ssize_t operator(self, Py_ssize_t p) except -1:
        """Lex the operator at *p* (digits included: ``2>``); returns the position after it."""
        cdef Py_ssize_t n = self.n, q = p
        cdef Py_UCS4 c, c1, c2
        while _is_digit(self.at(q)):  # the caller made sure "<" or ">" follows the digits
            q += 1
        c = self.at(q)
        c1 = self.at(q + 1) if q + 1 < n else 0
        c2 = self.at(q + 2) if q + 2 < n else 0
        if q > p:
            if self.w_open:  # digits glued to a word are part of it ("a\\22>x")
                self.append(p, q)
            elif self.redir != R_NONE:  # "< 2<": the digits are the pending redirection's file
                self.append(p, q)
            # else a file descriptor number, not an argument
        elif c == u'&':
            if c1 == u'>':
                if c2 == u'>':
                    return self.redirect(q + 3, R_APPEND)
                return self.redirect(q + 2, R_OUT)
            return self.separator(q + 2 if c1 == u'&' else q + 1)
        elif c == u'|':
            return self.separator(q + 2 if (c1 == u'|' or c1 == u'&') else q + 1)
        elif c == u';':
            return self.separator(q + 2 if c1 == u';' else q + 1)
        elif c == u'(' or c == u')':
            return self.separator(q + 1)
        if c == u'<':
            if c1 == u'<':
                if c2 == u'<':
                    return self.redirect(q + 3, R_HERESTRING)
                if c2 == u'-':
                    return self.redirect(q + 3, R_HEREDOC_TABS)
                return self.redirect(q + 2, R_HEREDOC)
            if c1 == u'&':
                return self.redirect(q + 2, R_DUP)
            if c1 == u'>':
                return self.redirect(q + 2, R_OUT)
            return self.redirect(q + 1, R_IN)
        # ">"
        if c1 == u'>':
            return self.redirect(q + 2, R_APPEND)
        if c1 == u'&':
            return self.redirect(q + 2, R_DUP)
        if c1 == u'|':
            return self.redirect(q + 2, R_OUT)
        return self.redirect(q + 1, R_OUT)

    cdef inline Py_ssize_t redirect(self, Py_ssize_t end, int op) except -1:
        self.end_word()
        self.redir = op
        return end

    cdef inline Py_ssize_t separator(self, Py_ssize_t end) except -1:
        self.end_word()
        self.push()
        return end

    cdef Py_ssize_t newline(self, Py_ssize_t p) except -1:
        """After the newline ending at *p*: close the command, then take heredoc bodies whole."""
        cdef Py_ssize_t n = self.n, start, end, j
        cdef str delim
        cdef bint strip_tabs
        cdef _Seg owner
        self.end_word()
        self.push()
        if self.pending is None:
            return p
        for delim, strip_tabs, owner in self.pending:
            start = p
            end = _heredoc_end(self.s, p, delim, strip_tabs)
            if end < 0:
                owner.add_heredoc(self.s, start, n)
                p = n
            else:
                owner.add_heredoc(self.s, start, max(end - 1, start))
                j = _findc(self.s, u'\n', end, n, 1)
                p = n if j < 0 else j + 1
        self.pending = None
        return p

    cdef bint advance(self) except -1:
        """Lex on until more commands are complete (in ``segs``, heredoc bodies attached).

        Returns False once the whole script is lexed. A command is complete when it has ended
        and no heredoc announced before its end still waits for its body.
        """
        cdef Py_ssize_t n = self.n, p = self.pos, q
        cdef Py_UCS4 c
        if p >= n and not self.w_open and not self.filled():
            return False
        self.pushed = False
        while p < n:
            c = self.at(p)
            if c == u' ' or c == u'\t' or c == u'\r':
                p += 1
                while p < n:
                    c = self.at(p)
                    if not (c == u' ' or c == u'\t' or c == u'\r'):
                        break
                    p += 1
                self.end_word()
            elif _is_plain(c) and not (_is_digit(c) and self._digits_redirect(p)):
                q = p + 1
                if self.kind == PyUnicode_1BYTE_KIND:
                    q = loopcore_span(<const unsigned char*>self.data, q, n, _PLAIN)
                else:
                    while q < n and _is_plain(self.at(q)):
                        q += 1
                self.append(p, q)
                p = q
            elif c == u'\n':
                p = self.newline(p + 1)
            elif c == u'#':
                if self.w_open:  # '#' inside a word is a plain character
                    self.append(p, p + 1)
                    p += 1
                else:  # a comment, up to the newline
                    q = _findc(self.s, u'\n', p, n, 1)
                    p = n if q < 0 else q
            elif c == u"'":
                q = _findc(self.s, u"'", p + 1, n, 1)
                if q < 0:
                    self.append(p + 1, n)
                    p = n
                else:
                    self.append(p + 1, q)
                    p = q + 1
            elif c == u'"':
                p = self.double_quoted(p)
            elif c == u'$':
                if p + 1 < n and self.at(p + 1) == u'(':
                    q = self.substitution_end(p)
                    self.seg.add_sub(PyUnicode_Substring(self.s, p, q))
                else:
                    q = p + 1
                self.append(p, q)
                p = q
            elif c == u'`':
                q = _findc(self.s, u'`', p + 1, n, 1)
                q = n if q < 0 else q + 1
                self.seg.add_sub(PyUnicode_Substring(self.s, p, q))
                self.append(p, q)
                p = q
            elif c == u'\\':
                if p + 1 >= n:
                    p += 1  # a lone backslash at the end: nothing
                else:
                    if self.at(p + 1) != u'\n':  # else a line continuation
                        self.append(p + 1, p + 2)
                    p += 2
            elif (c == u'<' or c == u'>') and p + 1 < n and self.at(p + 1) == u'(':
                # a process substitution: read as the command substitution "$(...)"
                q = _substitution_end(self.kind, self.data, n, p)
                self.seg.add_sub(u"$" + PyUnicode_Substring(self.s, p + 1, q))
                self.append_psub(p, q)
                p = q
            elif (c == u'<' or c == u'>' or c == u'|' or c == u'&' or c == u';' or c == u'(' or c == u')'
                  or _is_digit(c)):
                p = self.operator(p)
            else:
                p += 1  # a blank other than space, tab, CR and newline: it splits nothing
            if (self.pushed and self.pending is None) or self.found_exec:
                self.pos = p
                return True
        self.pos = n
        self.end_word()
        self.push()
        return True

    cdef inline bint _digits_redirect(self, Py_ssize_t p) noexcept:
        # digits followed by "<" or ">" are a file descriptor (or a redirection's operand)
        cdef Py_ssize_t n = self.n
        while p < n and _is_digit(self.at(p)):
            p += 1
        return p < n and (self.at(p) == u'<' or self.at(p) == u'>')


# One lexer kept for the next script (_release): most calls classify one script, and a lexer
# costs more to make and free than to reset. It is taken (the slot emptied) while in use, so a
# nested script or another thread makes its own.
cdef _Lexer _SPARE = None


cdef inline _Lexer _new_lexer(str s, bint stop_exec=False):
    global _SPARE
    cdef _Lexer lx = _SPARE
    if lx is None:
        lx = _Lexer.__new__(_Lexer)
    else:
        _SPARE = None
    lx.init(s)
    lx.stop_exec = stop_exec
    return lx


cdef void _release(_Lexer lx):
    """*lx* is no longer used: drop what it holds and keep it as the spare (with its buffers,
    unless they grew large)."""
    global _SPARE
    lx.s = None
    lx.data = NULL
    lx.seg = None
    lx.segs = None
    lx.pending = None
    lx.wobjs = None
    if lx.w_cap > 4096:
        free(lx.buf)
        lx.buf = NULL
        lx.w_cap = 0
    if lx.w_room > 1024:
        PyMem_Free(lx.ws)
        lx.ws = lx.ws_inline
        lx.w_room = _SEG_WORDS
    if _SPARE is None:
        _SPARE = lx


cdef list _lex_all(str s):
    cdef _Lexer lx = _new_lexer(s)
    cdef list segs
    while lx.advance():
        pass
    segs = lx.segs
    _release(lx)
    return segs


def lex(s):
    """The simple commands of script *s* as (words, redirections, heredoc bodies); never raises.

    Redirections are (op, target) with op one of ``>``, ``>>``, ``<``, ``dup``. Both twins give
    the same list for every input, which is what the twin tests check.
    """
    cdef _Seg seg
    if not isinstance(s, str):
        raise TypeError(f"lex() takes a str, not {type(s).__name__}")
    return [(seg.word_list(), seg.redirs or [], seg.heredocs()) for seg in _lex_all(<str>s)]


# ---------------------------------------------------------------------------------------------
# Classification


@cython.final
@cython.freelist(32)
@cython.no_gc  # holds lists of strings only
cdef class _Part:
    """A classified part: kind, observed targets, mutated targets, mutated-unknown flag."""

    cdef int kind
    cdef list obs
    cdef list mut
    cdef bint unk


cdef inline _Part _part(int kind, list obs, list mut, bint unk):
    cdef _Part p = _Part.__new__(_Part)
    p.kind = kind
    p.obs = obs
    p.mut = mut
    p.unk = unk
    return p


# Parts and their lists are never mutated once built (callers copy the targets out), so the
# empty list and the parts without targets are shared.
cdef list _EMPTY = []
cdef _Part _OTHER = _part(K_OTHER, _EMPTY, _EMPTY, False)
cdef _Part _EXEC = _part(K_EXEC, _EMPTY, _EMPTY, True)
cdef list _READS_ANYTHING = [_ANYTHING]
cdef _Part _OBSERVE_ANYTHING = _part(K_OBSERVE, _READS_ANYTHING, _EMPTY, False)
cdef _Part _UNKNOWN_MUTATION = _part(K_MUTATE, _EMPTY, _EMPTY, True)


cdef inline Py_UCS4 _first(str w) noexcept:
    return PyUnicode_READ(PyUnicode_KIND(w), PyUnicode_DATA(w), 0) if PyUnicode_GET_LENGTH(w) else 0


cdef inline bint _is_option(str w) noexcept:
    # w.startswith("-")
    return _first(w) == u'-'


cdef inline bint _is_short_option(str w) noexcept:
    # w.startswith("-") and not w.startswith("--")
    return (_first(w) == u'-' and not (PyUnicode_GET_LENGTH(w) > 1
            and PyUnicode_READ(PyUnicode_KIND(w), PyUnicode_DATA(w), 1) == u'-'))


cdef inline bint _name_char(Py_UCS4 c, bint first) noexcept:
    return (u'A' <= c <= u'Z') or (u'a' <= c <= u'z') or c == u'_' or (not first and u'0' <= c <= u'9')


cdef bint _is_assignment(str w) noexcept:
    """``_ASSIGN_RE.match(w)``: ``NAME=``, ``NAME+=``, ``NAME[...]=``, ``NAME[...]+=``."""
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(w), i = 1
    cdef int kind = PyUnicode_KIND(w)
    cdef void* data = PyUnicode_DATA(w)
    if n == 0 or not _name_char(PyUnicode_READ(kind, data, 0), True):
        return False
    while i < n and _name_char(PyUnicode_READ(kind, data, i), False):
        i += 1
    if i < n and PyUnicode_READ(kind, data, i) == u'[':
        i += 1
        while i < n and PyUnicode_READ(kind, data, i) != u']':
            i += 1
        if i >= n:
            return False
        i += 1
    if i < n and PyUnicode_READ(kind, data, i) == u'+':
        i += 1
    return i < n and PyUnicode_READ(kind, data, i) == u'='


cdef list _operands(list words, _Names value_opts, Py_ssize_t drop=0):
    """The non-option arguments of a command line (``--`` ends the options), but the first *drop*."""
    cdef list out = []
    cdef Py_ssize_t i = 1, n = len(words)
    cdef str w
    while i < n:
        w = <str>words[i]
        if _eq(w, u"--"):
            i += 1 + drop
            if i < n:
                out.extend(words[i:])
            break
        if _is_option(w) and PyUnicode_GET_LENGTH(w) > 1:
            if value_opts.get(w) >= 0:
                i += 1
        elif drop:
            drop -= 1
        else:
            out.append(w)
        i += 1
    return out


cdef Py_ssize_t _wrapped_command(list words, Py_ssize_t b, str cmd, int info) except -2:
    """Where the command run by the wrapper *cmd* (of _info *info*) at ``words[b]`` starts; -1
    when it runs none."""
    cdef _Names value_opts = _opts_of(info, _NO_OPTS_N)
    cdef bint skip_duration = cmd == u"timeout", env = cmd == u"env", options = True
    cdef Py_ssize_t i = b + 1, n = len(words)
    cdef str w
    while i < n:
        w = <str>words[i]
        i += 1
        if options:
            if _eq(w, u"--"):
                options = False
                continue
            if _is_option(w) and PyUnicode_GET_LENGTH(w) > 1:
                if cmd == u"command" and w[1] != u"-" and (u"v" in w or u"V" in w):
                    return -1  # command -v / -V: see the pure twin
                if value_opts.get(w) >= 0:
                    i += 1
                continue
        if skip_duration:
            skip_duration = False
        elif not (env and _is_assignment(w)):
            return words.index(w, b + 1)
    return -1


cdef bint _any_opt(list words, _Names exact, str prefix1, str prefix2):
    # any(w[:1] == "-" and (w in exact or w.startswith((prefix1, prefix2))) for w in words[1:])
    cdef Py_ssize_t j
    cdef str w
    for j in range(1, len(words)):
        w = <str>words[j]
        if _is_option(w) and (exact.get(w) >= 0 or _starts(w, prefix1) or _starts(w, prefix2)):
            return True
    return False


cdef _Part _classify_seg(_Seg seg, int depth):
    """_classify_words of the command *seg*: the common readers (cat, head, grep, sed...)
    straight from the words kept in place (_classify_span), the others from the word list."""
    cdef Py_ssize_t b = 0, n = seg.nw
    cdef int info, code
    cdef _Word w
    if seg.words is None and seg.cmd_known:  # the lexer found the program word
        if not seg.cmd_slash:
            b = seg.cmd_b
            info = seg.cmd_info
            code = info & C_MASK
            if (code == C_READER or code == C_PATTERN_READER or code == C_SED or code == C_SYSTEM
                    or code == C_NEUTRAL or code == C_NEUTRAL_SEGMENT or code == C_TR):
                return _classify_span(seg, b, info)
            if code == C_FIND:
                return _span_find(seg, b, depth)
    elif seg.words is None:
        while b < n:  # the reserved words and assignments _classify_words skips
            w = seg.ref(b)
            info = _wget(_PROGRAMS, w)
            if info < 0:
                info = C_EXEC
            if info & C_PREFIX or (_whas(w, u'=', 0) and _is_assignment(seg.word(b))):
                b += 1
                continue
            break
        if b < n and not _whas(w, u'/', 0):
            code = info & C_MASK
            if (code == C_READER or code == C_PATTERN_READER or code == C_SED or code == C_SYSTEM
                    or code == C_NEUTRAL or code == C_NEUTRAL_SEGMENT or code == C_TR):
                return _classify_span(seg, b, info)
            if code == C_FIND:
                return _span_find(seg, b, depth)
    return _classify_words(seg.word_list(), seg, depth)


cdef list _span_operands(_Seg seg, Py_ssize_t b, _Names value_opts, Py_ssize_t drop):
    """_operands of the command whose program is word *b* of *seg* (kept in place)."""
    cdef list out = []
    cdef Py_ssize_t i = b + 1, n = seg.nw
    cdef _Word w
    while i < n:
        w = seg.ref(i)
        if _weq(w, u"--"):
            i += 1 + drop
            while i < n:
                out.append(seg.word(i))
                i += 1
            break
        if w.n > 1 and _wat(w, 0) == u'-':
            if _wget(value_opts, w) >= 0:
                i += 1
        elif drop:
            drop -= 1
        else:
            out.append(seg.word(i))
        i += 1
    return out


cdef bint _span_any_opt(_Seg seg, Py_ssize_t b, _Names exact, str prefix1, str prefix2):
    # _any_opt of the command whose program is word b
    cdef Py_ssize_t j
    cdef _Word w
    for j in range(b + 1, seg.nw):
        w = seg.ref(j)
        if _wfirst(w) == u'-' and (_wget(exact, w) >= 0 or _wstarts(w, prefix1)
                                   or _wstarts(w, prefix2)):
            return True
    return False


cdef _Part _span_find(_Seg seg, Py_ssize_t b, int depth):
    """_classify_find of the command whose program is word *b* of *seg* (kept in place)."""
    cdef list paths = [], inner
    cdef Py_ssize_t j = b + 1, k, n = seg.nw
    cdef _Word w
    cdef Py_UCS4 c
    cdef _Part part
    while j < n:
        w = seg.ref(j)
        c = _wfirst(w)
        if c == u'-' or c == u'(' or c == u'!' or _wstarts(w, u"\\("):
            break
        paths.append(seg.word(j))
        j += 1
    if not paths:
        paths = [u"."]
    for k in range(b, n):
        if _weq(seg.ref(k), u"-delete"):
            return _UNKNOWN_MUTATION  # which files go is only known at run time
    for k in range(b, n):
        if _wget(_FIND_EXEC_N, seg.ref(k)) >= 0:
            inner = []
            j = k + 1
            while j < n:
                w = seg.ref(j)
                if _wget(_FIND_EXEC_END_N, w) >= 0:
                    break
                if not _weq(w, u"{}"):
                    inner.append(seg.word(j))
                j += 1
            if j == k + 1:
                continue  # "-exec ;" runs nothing
            if depth >= _MAX_DEPTH:
                part = _EXEC  # "find -exec find -exec ...": too deep to read
            else:
                part = _classify_words(inner, None, depth + 1)
            if part.kind == K_OBSERVE or part.kind == K_OTHER:
                continue
            # The files an -exec writes are only known at run time.
            return _UNKNOWN_MUTATION if part.kind == K_MUTATE else _EXEC
    return _part(K_OBSERVE, paths, _EMPTY, False)


cdef _Part _classify_span(_Seg seg, Py_ssize_t b, int info):
    """_classify_words's rules for the programs _classify_seg sends here, on the words of *seg*
    kept in place: word *b* is the program (no "/" in it), of _info *info*."""
    cdef int code = info & C_MASK
    cdef Py_ssize_t j, n = seg.nw
    cdef _Word w
    cdef list ops
    cdef bint explicit, inplace
    if code == C_NEUTRAL or code == C_NEUTRAL_SEGMENT or code == C_TR:
        return _OTHER
    if code == C_SYSTEM:
        return _OBSERVE_ANYTHING
    if code == C_READER:
        ops = _span_operands(seg, b, _opts_of(info, _NO_OPTS_N), 0)
        if not ops and _wget(_DIR_READERS_N, seg.ref(b)) >= 0:
            ops = [u"."]
        return _part(K_OBSERVE, ops, _EMPTY, False)
    if code == C_PATTERN_READER:
        explicit = _span_any_opt(seg, b, _PATTERN_OPTS_N, u"--regexp=", u"--file=")
        if not explicit and _weq(seg.ref(b), u"rg"):
            for j in range(b, n):
                if _weq(seg.ref(j), u"--files"):
                    explicit = True
                    break
        ops = _span_operands(seg, b, _opts_of(info, _NO_OPTS_N), 0 if explicit else 1)
        if not ops and _searches_tree(seg.word(b), [seg.word(j) for j in range(b, n)]):
            return _OBSERVE_ANYTHING
        return _part(K_OBSERVE, ops, _EMPTY, False)
    # C_SED
    inplace = False
    for j in range(b + 1, n):
        w = seg.ref(j)
        if (_wfirst(w) == u'-' and not _weq(w, u"--")
                and (_wstarts(w, u"-i") or _wstarts(w, u"--in-place")
                     or (not _wstarts(w, u"--") and _whas(w, u'i', 1)
                         and _wget(_SED_OPTS_N, w) < 0))):
            inplace = True
            break
    ops = _span_operands(
        seg, b, _SED_OPTS_N,
        0 if _span_any_opt(seg, b, _SED_SCRIPT_OPTS_N, u"--expression=", u"--file=") else 1)
    if inplace:
        return _part(K_MUTATE, ops, ops, not ops)  # an in-place edit reads what it rewrites
    return _part(K_OBSERVE, ops, _EMPTY, False)


cdef _Part _classify_words(list words, _Seg seg, int depth):
    """Classify one simple command given as words (after redirections were taken out); *seg*
    holds its heredoc bodies (None: it has none)."""
    cdef Py_ssize_t b = 0, n = len(words), j, slash
    cdef str cmd, w, tdir
    cdef list ops, targets, reads, heredocs
    cdef _Names opts
    cdef bint inplace, explicit
    cdef int code, info
    while True:
        while b < n:
            w = <str>words[b]
            info = _info(w)
            code = info & 0xffff
            if code & C_PREFIX or (_has(w, u'=') and _is_assignment(w)):
                b += 1
                continue
            break
        if b >= n:
            return _OTHER
        cmd = w
        slash = _findc(w, u'/', 0, PyUnicode_GET_LENGTH(w), -1)
        if slash >= 0:
            if _NEUTRAL_SEGMENTS_N.get(w) >= 0:
                return _OTHER
            cmd = w[slash + 1:]  # the program's name
            info = _info(cmd)
            code = info & 0xffff
        code &= C_MASK
        if code == C_NEUTRAL_SEGMENT:
            return _OTHER
        if code != C_WRAPPER:
            break
        b = _wrapped_command(words, b, cmd, info)
        if b < 0:
            return _OBSERVE_ANYTHING if cmd == u"env" else _OTHER
    if b:
        words = words[b:]
        n = len(words)
    if code == C_NEUTRAL:
        return _OTHER
    if code == C_SHELL:
        # bash -c 'script' / bash -lc 'script': classify the script itself.
        for j in range(1, n - 1):
            w = <str>words[j]
            if _is_short_option(w) and u"c" in w:
                if depth < _MAX_DEPTH:
                    return _classify_script(<str>words[j + 1], depth + 1)
                return _EXEC
        if n == 1 and seg is not None and seg.hd_n and depth < _MAX_DEPTH:
            return _classify_script(seg.heredoc(0), depth + 1)
        return _EXEC
    if code == C_READER:
        ops = _operands(words, _opts_of(info, _NO_OPTS_N))
        if not ops and _DIR_READERS_N.get(cmd) >= 0:
            ops = [u"."]
        return _part(K_OBSERVE, ops, _EMPTY, False)
    if code == C_PATTERN_READER:
        explicit = _any_opt(words, _PATTERN_OPTS_N, u"--regexp=", u"--file=")
        if cmd == u"rg" and u"--files" in words:
            explicit = True
        ops = _operands(words, _opts_of(info, _NO_OPTS_N), 0 if explicit else 1)  # else the pattern
        if not ops and _searches_tree(cmd, words):
            return _OBSERVE_ANYTHING
        return _part(K_OBSERVE, ops, _EMPTY, False)
    if code == C_SYSTEM:
        return _OBSERVE_ANYTHING
    if code == C_SED:
        opts = _SED_OPTS_N
        inplace = False
        for j in range(1, n):
            w = <str>words[j]
            if (_is_option(w) and not _eq(w, u"--")
                    and (_starts(w, u"-i") or _starts(w, u"--in-place")
                         or (_is_short_option(w) and _has(w, u'i', 1) and opts.get(w) < 0))):
                inplace = True
                break
        # the first operand is the script, unless -e/-f gave it
        ops = _operands(words, opts, 0 if _any_opt(words, _SED_SCRIPT_OPTS_N, u"--expression=", u"--file=") else 1)
        if inplace:
            return _part(K_MUTATE, ops, ops, not ops)  # an in-place edit reads what it rewrites
        return _part(K_OBSERVE, ops, _EMPTY, False)
    if code == C_AWK:
        inplace = u"inplace" in words and u"-i" in words
        ops = _operands(words, _AWK_OPTS_N, 0 if u"-f" in words else 1)  # else the program
        if inplace:
            ops = [o for o in ops if o != u"inplace"]
            return _part(K_MUTATE, ops, ops, not ops)  # an in-place edit reads what it rewrites
        return _part(K_OBSERVE, ops, _EMPTY, False)
    if code == C_SORT:
        out = None
        for j in range(n):
            w = <str>words[j]
            if (w == u"-o" or w == u"--output") and j + 1 < n:
                out = words[j + 1]
            elif w.startswith(u"--output="):
                out = w.split(u"=", 1)[1]
        ops = _operands(words, _SORT_OPTS_N)
        if out:
            return _part(K_MUTATE, ops, [out], False)  # sort -o out in: reads in
        return _part(K_OBSERVE, ops, _EMPTY, False)
    if code == C_TR:
        return _OTHER
    if code == C_TEE:
        ops = [o for o in _operands(words, _NO_OPTS_N) if _DEV_NULL_N.get(<str>o) < 0]
        return _part(K_MUTATE, _EMPTY, ops, False) if ops else _OTHER
    if code == C_WRITER:
        ops = _operands(words, _opts_of(info, _NO_OPTS_N))
        return _part(K_MUTATE, _EMPTY, ops, not ops)
    if code == C_CHMOD:
        ops = _operands(words, _opts_of(info, _NO_OPTS_N), 1)  # after the mode or owner
        return _part(K_MUTATE, _EMPTY, ops, not ops)
    if code == C_COPIER:
        ops = _operands(words, _opts_of(info, _COPIER_OPTS_N))
        tdir = None
        for j in range(n - 1):
            w = <str>words[j]
            if w == u"-t" or w == u"--target-directory":
                tdir = <str>words[j + 1]
                break
        if cmd == u"mv":
            targets = ops + [tdir] if tdir else ops
        elif tdir:
            targets = [tdir]
        else:
            targets = ops[len(ops) - 1:] if len(ops) >= 2 else []
        reads = [] if cmd == u"mv" else (ops if tdir else ops[:len(ops) - 1] if ops else [])
        return _part(K_MUTATE, reads, targets, not targets)
    if code == C_DD:
        outs = [w[3:] for w in words[1:] if w.startswith(u"of=")]
        ins = [w[3:] for w in words[1:] if w.startswith(u"if=")]
        return _part(K_MUTATE, ins, outs, False) if outs else _part(K_OBSERVE, ins, _EMPTY, False)
    if code == C_PATCH:
        ops = _operands(words, _PATCH_OPTS_N)
        if u"--dry-run" in words:
            return _part(K_OBSERVE, ops, _EMPTY, False)
        return _part(K_MUTATE, _EMPTY, ops[:1], not ops)
    if code == C_APPLY_PATCH:
        heredocs = seg.heredocs() if seg is not None else []
        targets = list(parse_patch_targets(u"\n".join(heredocs) + u"\n" + u"\n".join(words[1:])))
        return _part(K_MUTATE, _EMPTY, targets, not targets)
    if code == C_PERL:
        ops = _perl_operands(words)
        if ops is not None:
            return _part(K_MUTATE, ops, ops, not ops)  # an in-place edit reads what it rewrites
    if code == C_FIND:
        return _classify_find(words, depth)
    if code == C_GIT:
        return _classify_git(words)
    return _EXEC


cdef bint _searches_tree(str cmd, list words):
    # the pure twin's _searches_tree: the searcher *cmd*, given no path, reads a whole tree
    # (rg, ag, ack, git grep; grep -r) rather than its stdin; words[0] is the program
    cdef Py_ssize_t j
    cdef str w
    if cmd in _TREE_SEARCHERS:
        return True
    if cmd not in _RECURSIVE_GREPS:
        return False
    for j in range(1, len(words)):
        w = <str>words[j]
        if _eq(w, u"--recursive") or _eq(w, u"--dereference-recursive"):
            return True
        if _is_short_option(w) and (_has(w, u'r', 0) or _has(w, u'R', 0)):
            return True
    return False


cdef list _perl_operands(list words):
    # the file operands of a perl command line that edits in place, or None when it does not
    # (the reference: _shell_py._perl_operands, bundles and glued values read the same way)
    cdef list out = []
    cdef bint inplace = False, code = False
    cdef Py_ssize_t i = 1, n = len(words), j, last
    cdef str w
    cdef Py_UCS4 c
    while i < n:
        w = <str>words[i]
        if w == u"--":
            out.extend(words[i + 1:])
            break
        if len(w) > 1 and w[0] == u"-" and w[1] != u"-":
            if w == u"-M" or w == u"-I":
                i += 1
            else:
                last = len(w) - 1
                for j in range(1, len(w)):
                    c = w[j]
                    if c == u"e" or c == u"E":
                        code = True
                        if j == last:
                            i += 1
                        break
                    if c == u"i":
                        inplace = True
                        break
                    if c in u"MmIl0CdDxF":
                        break
        elif w[:2] != u"--":
            out.append(w)
        i += 1
    if not inplace:
        return None
    return out if code else out[1:]


cdef _Part _classify_find(list words, int depth):
    cdef list paths = [], inner
    cdef Py_ssize_t j = 1, k, n = len(words)
    cdef str w
    cdef Py_UCS4 c
    cdef _Part part
    while j < n:
        w = <str>words[j]
        c = _first(w)
        if c == u'-' or c == u'(' or c == u'!' or w.startswith(u"\\("):
            break
        paths.append(w)
        j += 1
    if not paths:
        paths = [u"."]
    if u"-delete" in words:
        # Which files go is only known at run time.
        return _UNKNOWN_MUTATION
    for k in range(n):
        if _FIND_EXEC_N.get(<str>words[k]) >= 0:
            inner = []
            j = k + 1
            while j < n and _FIND_EXEC_END_N.get(<str>words[j]) < 0:
                if not _eq(<str>words[j], u"{}"):
                    inner.append(words[j])
                j += 1
            if j == k + 1:
                continue  # "-exec ;" runs nothing
            if depth >= _MAX_DEPTH:
                part = _EXEC  # "find -exec find -exec ...": too deep to read
            else:
                part = _classify_words(inner, None, depth + 1)
            if part.kind == K_OBSERVE or part.kind == K_OTHER:
                continue
            # The files an -exec writes are only known at run time.
            return _UNKNOWN_MUTATION if part.kind == K_MUTATE else _EXEC
    return _part(K_OBSERVE, paths, _EMPTY, False)


cdef tuple _FETCH_LOCAL = _ref._FETCH_LOCAL


cdef _Part _classify_git(list words):
    cdef Py_ssize_t j = 1, n = len(words)
    cdef frozenset opts = <frozenset>_VALUE_OPTS[u"git"]
    cdef str sub, a, first
    cdef list args, paths, fetched
    cdef bint all_options, deletes
    while j < n and _is_option(<str>words[j]):
        j += 2 if words[j] in opts else 1
    if j >= n:
        return _OTHER
    sub = <str>words[j]
    args = words[j + 1:]
    if u"--" in args:
        paths = args[args.index(u"--") + 1:]
    else:
        paths = []
    if sub in _GIT_PATH_OPERANDS and not paths:
        paths = [a for a in args if not _is_option(a)]
    first = <str>args[0] if args else None
    if sub == u"stash" and (first == u"list" or first == u"show"):
        return _OBSERVE_ANYTHING
    if sub in _GIT_LISTERS:
        all_options = True
        deletes = False
        for a in args:
            if not _is_option(a):
                all_options = False
            if a in _GIT_LIST_DELETES:
                deletes = True
        if not args or (all_options and not deletes) or (first is not None and first in _GIT_LIST_FIRST):
            return _OBSERVE_ANYTHING
    if sub in _GIT_OBSERVE:
        # with no path after "--" it reads the repository: any file of it, or its history
        return _part(K_OBSERVE, paths, _EMPTY, False) if paths else _OBSERVE_ANYTHING
    if sub in _GIT_MUTATE:
        if sub == u"push":
            # the remote's history changes, not the repository's: a commit is never the undo of
            # a push, so pushing the next commit redoes nothing
            return _part(K_MUTATE, _EMPTY, [u"git:remote"], False)
        if sub == u"fetch" or (sub == u"remote" and first == u"update"):
            # what a fetch brings is the remote's; it writes the remote-tracking refs and
            # FETCH_HEAD, and a fetch is never undone (nothing else writes them); a refspec with
            # a local destination or a deepened history writes the repository too
            fetched = [u"git:FETCH_HEAD", u"git:refs/remotes"]
            for a in args:
                if (<str>a).startswith(_FETCH_LOCAL) if _is_option(<str>a) else u":" in <str>a:
                    fetched.append(u"git:repo")
                    break
            return _part(K_MUTATE, [u"git:repo", u"git:remote", u"git:dir"], fetched, False)
        if sub in _GIT_STATE_ONLY:
            # Only git's own state changes; the working tree is as it was. It depends on the
            # files of the .git folder (git:dir, see _git_dir).
            return _part(K_MUTATE, [u"git:dir"], [u"git:repo"], False)
        if sub == u"checkout" and not paths and u"--" not in args:
            # "git checkout a.py" restores a file, "git checkout main" switches branches
            ops = []
            all_files = True
            for a in args:
                if _is_option(a):
                    all_files = False
                    break
                if not _looks_like_file(a):
                    all_files = False
                    break
                ops.append(a)
            if ops and all_files:
                paths = ops
        if sub in _GIT_PATH_WRITERS and paths:
            for a in paths:
                if _is_tree(a):
                    return _UNKNOWN_MUTATION
            return _part(K_MUTATE, _EMPTY, paths, False)
        return _UNKNOWN_MUTATION
    return _EXEC


cdef bint _looks_like_file(str a):
    # the last path part has an extension (a.py), and no revision syntax (HEAD~1, main^, rev:path)
    cdef Py_ssize_t slash = a.rfind(u"/")
    cdef str last = a[slash + 1:]
    cdef Py_ssize_t dot = last.rfind(u".")
    return 0 < dot < len(last) - 1 and not (_has(a, u'~') or _has(a, u'^') or _has(a, u':'))


cdef bint _is_tree(str p):
    # a folder (the whole tree, "src/"): what it writes is unknown
    return p == u"." or p == u"./" or p == u"*" or p == u":/" or p.endswith(u"/")


cdef enum:
    _NORM_MAX = 1024  # the longest path _normpath_ascii takes
    _NORM_PARTS = 513  # the most parts it can keep: each is a character and a "/" but the first


cdef str _normpath(str path):
    """``posixpath.normpath(path)``: by _normpath_ascii for an ASCII path with no NUL of up to
    _NORM_MAX characters (the targets of agents' commands), by Python's otherwise."""
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(path)
    if 0 < n <= _NORM_MAX and PyUnicode_IS_ASCII(path) and not _has(path, 0):
        return _normpath_ascii(<const Py_UCS1*>PyUnicode_DATA(path), n)
    if _path_normpath is None:
        return posixpath.normpath(path)
    return _path_normpath(path) or u"."


cdef str _normpath_ascii(const Py_UCS1* p, Py_ssize_t n):
    """posixpath.normpath of the n > 0 ASCII characters at *p*, the pure-Python algorithm of
    posixpath (the C one of CPython gives the same for these paths, which the tests check
    exhaustively on short paths of "/", "." and "a"): drop empty and "." parts, let ".." remove
    the part before it (but not a "..", and not past the start of a relative path, which keeps
    it); keep one leading "/", or two but not three."""
    cdef char out[_NORM_MAX]
    cdef Py_ssize_t starts[_NORM_PARTS]  # where each kept part (its "/" first) starts
    cdef bint dotdot[_NORM_PARTS]  # the kept part is ".."
    cdef Py_ssize_t initial = 0, o = 0, parts = 0, i = 0, a, m
    cdef bint dd
    cdef str r
    if p[0] == b'/':
        initial = 2 if n > 1 and p[1] == b'/' and not (n > 2 and p[2] == b'/') else 1
    for o in range(initial):
        out[o] = b'/'
    o = initial
    while i <= n:
        a = i
        while i < n and p[i] != b'/':
            i += 1
        m = i - a  # the part p[a:i]
        i += 1
        if m == 0 or (m == 1 and p[a] == b'.'):
            continue
        dd = m == 2 and p[a] == b'.' and p[a + 1] == b'.'
        if not dd or (initial == 0 and parts == 0) or (parts > 0 and dotdot[parts - 1]):
            starts[parts] = o
            dotdot[parts] = dd
            if parts > 0:
                out[o] = b'/'
                o += 1
            memcpy(&out[o], &p[a], m)
            o += m
            parts += 1
        elif parts > 0:
            parts -= 1
            o = starts[parts]
    if o == 0:
        return u"."
    r = PyUnicode_New(o, 127)
    memcpy(PyUnicode_DATA(r), out, o)
    return r


cdef enum:
    T_NORM = 1     # posixpath.normpath(t) may differ from t
    T_SCHEME = 2   # t has "://" (a URL)


cdef int _target_flags(str t) noexcept:
    """T_NORM unless t is not empty and has no empty, "." or ".." part (no "//", no part that
    starts with ".") and no trailing "/", the paths normpath returns as they are; T_SCHEME when t
    has "://". One pass over the characters."""
    cdef Py_ssize_t i, n = PyUnicode_GET_LENGTH(t)
    cdef int kind = PyUnicode_KIND(t)
    cdef void* data = PyUnicode_DATA(t)
    cdef const Py_UCS1* b
    cdef const void* hit
    cdef Py_UCS4 c, nxt
    cdef int flags = 0
    if n == 0:
        return T_NORM
    if PyUnicode_READ(kind, data, 0) == u'.' or PyUnicode_READ(kind, data, n - 1) == u'/':
        flags = T_NORM
    if kind == PyUnicode_1BYTE_KIND:  # the same tests, at each "/" and ":" memchr finds
        b = <const Py_UCS1*>data
        hit = memchr(b, u'/', <size_t>(n - 1))
        while hit != NULL and not flags & T_NORM:
            i = <const Py_UCS1*>hit - b
            if b[i + 1] == u'.' or b[i + 1] == u'/':
                flags |= T_NORM
            hit = memchr(b + i + 1, u'/', <size_t>(n - 2 - i)) if i + 2 < n else NULL
        hit = memchr(b, u':', <size_t>(n - 1))
        while hit != NULL:
            i = <const Py_UCS1*>hit - b
            if i + 2 < n and b[i + 1] == u'/' and b[i + 2] == u'/':
                flags |= T_SCHEME
                break
            hit = memchr(b + i + 1, u':', <size_t>(n - 2 - i)) if i + 2 < n else NULL
        return flags
    for i in range(n - 1):
        c = PyUnicode_READ(kind, data, i)
        if c == u'/':
            nxt = PyUnicode_READ(kind, data, i + 1)
            if nxt == u'.' or nxt == u'/':
                flags |= T_NORM
        elif c == u':' and i + 2 < n and PyUnicode_READ(kind, data, i + 1) == u'/' \
                and PyUnicode_READ(kind, data, i + 2) == u'/':
            flags |= T_SCHEME
    return flags


cdef str _join_norm(str cwd, str t):
    """``posixpath.normpath(posixpath.join(cwd, t))`` for a non-empty *cwd*."""
    cdef str path
    if _first(t) == u'/':
        path = t
    elif cwd[PyUnicode_GET_LENGTH(cwd) - 1] == u'/':
        path = cwd + t
    else:
        path = cwd + u"/" + t
    return _normpath(path) if _target_flags(path) & T_NORM else path


cdef str _join(str cwd, str t):
    cdef Py_UCS4 c = _first(t)
    if c == u'/' or c == u'~' or c == u'$' or _starts(t, u"git:"):
        return t
    return _join_norm(cwd, t)


cdef _Part _classify_script(str script, int depth):
    cdef _Lexer lx = _new_lexer(script, True)
    cdef _Part part = _classify_lexed(lx, depth)
    _release(lx)
    return part


cdef _Part _classify_lexed(_Lexer lx, int depth):
    """Classify the script *lx* lexes (a lexer that stops at unknown code, see _Lexer)."""
    # The targets so far. A part's lists are never changed once built, so the script borrows
    # them (most scripts have one part with targets) and copies only to change them.
    cdef list observed = _EMPTY, mutated = _EMPTY, segs
    cdef bint own_obs = False, own_mut = False
    cdef bint unknown_mutation = False
    cdef int kinds = 0, kind
    cdef str cwd = u"", dest, op, target
    cdef _Seg seg
    cdef _Part part
    cdef Py_ssize_t i, done = 0, o0, m0
    cdef tuple redir
    cdef object text, sub
    while lx.advance():
        if lx.found_exec:
            return _EXEC  # a command that runs unknown code: the whole script is exec
        segs = lx.segs
        while done < len(segs):
            seg = <_Seg>segs[done]
            done += 1
            if seg.subs is not None:
                # The commands of its substitutions run first, as parts of the script of their
                # own.
                for text in seg.subs:
                    for sub in _substitutions(<str>text):
                        if depth >= _MAX_DEPTH:
                            return _EXEC  # too deep to read
                        part = _classify_script(<str>sub, depth + 1)
                        if part.kind == K_EXEC:
                            return _EXEC
                        if part.obs:
                            if not own_obs:
                                observed = list(observed)
                                own_obs = True
                            if cwd:
                                for target in part.obs:
                                    observed.append(_join(cwd, target))
                            else:
                                observed.extend(part.obs)
                        if part.mut:
                            if not own_mut:
                                mutated = list(mutated)
                                own_mut = True
                            if cwd:
                                for target in part.mut:
                                    mutated.append(_join(cwd, target))
                            else:
                                mutated.extend(part.mut)
                        kinds |= 1 << part.kind
                        unknown_mutation = unknown_mutation or (part.unk and part.kind == K_MUTATE)
            if seg.nw and (_eq(<str>seg.words[0], u"cd") if seg.words is not None
                           else _weq(seg.ref(0), u"cd")):
                dest = seg.word(1) if seg.nw > 1 else u"~"
                if _eq(dest, u"-") or _first(dest) == u'~' or _first(dest) == u'$':
                    cwd = u""
                else:
                    cwd = _join_norm(cwd, dest) if cwd else dest
                continue
            part = _classify_seg(seg, depth) if seg.nw else _OTHER
            if part.kind == K_EXEC:
                # One part that runs unknown code makes the whole script exec, whatever the other
                # parts do, and an exec result carries no targets: the rest need not be read.
                return _EXEC
            kind = part.kind
            o0 = len(observed)
            m0 = len(mutated)
            if part.obs:
                if not observed:
                    observed = part.obs
                else:
                    if not own_obs:
                        observed = list(observed)
                        own_obs = True
                    observed.extend(part.obs)
            if part.mut:
                if not mutated:
                    mutated = part.mut
                else:
                    if not own_mut:
                        mutated = list(mutated)
                        own_mut = True
                    mutated.extend(part.mut)
            for redir in seg.redirs or ():
                op = <str>redir[0]
                target = <str>redir[1]
                if _eq(op, _DUP) or _DEV_NULL_N.get(target) >= 0:
                    continue
                if _eq(op, _OUT) or _eq(op, _APPEND):
                    if not own_mut:
                        mutated = list(mutated)
                        own_mut = True
                    mutated.append(target)
                    if _eq(op, _APPEND):  # an append's result depends on what was there
                        if not own_obs:
                            observed = list(observed)
                            own_obs = True
                        observed.append(target)
                    if kind == K_OTHER or kind == K_OBSERVE:
                        kind = K_MUTATE
                elif _eq(op, _IN):
                    if not own_obs:
                        observed = list(observed)
                        own_obs = True
                    observed.append(target)
                    if kind == K_OTHER:
                        kind = K_OBSERVE
            if cwd:
                if o0 < len(observed):
                    if not own_obs:
                        observed = list(observed)
                        own_obs = True
                    for i in range(o0, len(observed)):
                        observed[i] = _join(cwd, <str>observed[i])
                if m0 < len(mutated):
                    if not own_mut:
                        mutated = list(mutated)
                        own_mut = True
                    for i in range(m0, len(mutated)):
                        mutated[i] = _join(cwd, <str>mutated[i])
            kinds |= 1 << kind
            unknown_mutation = unknown_mutation or (part.unk and (kind == K_MUTATE or kind == K_EXEC))
    if kinds & (1 << K_MUTATE):
        return _part(K_MUTATE, observed, mutated, unknown_mutation)
    if kinds & (1 << K_OBSERVE):
        return _part(K_OBSERVE, observed, _EMPTY, False)
    return _OTHER


cdef str _norm(str t):
    # "./a.py", "a.py" and "src/../a.py" name one file; "src/" and "src" one folder.
    cdef int flags
    if PyUnicode_GET_LENGTH(t) == 0 or _starts(t, u"git:"):
        return t
    flags = _target_flags(t)
    return _normpath(t) if flags == T_NORM else t  # not a URL, and normpath may change it


cdef object _pack(list targets):
    cdef tuple uniq
    cdef list seen
    cdef str t, u
    cdef Py_ssize_t n = len(targets), i
    if n == 1:
        return _norm(<str>targets[0])
    if n == 0:
        return None
    if n > 16:
        uniq = tuple(dict.fromkeys([_norm(<str>t) for t in targets]))
    else:  # dict.fromkeys by comparisons: a few targets, each compared with those kept
        seen = []
        for i in range(n):
            t = _norm(<str>targets[i])
            for u in seen:
                if u == t:
                    break
            else:
                seen.append(t)
        uniq = tuple(seen)
    return uniq[0] if len(uniq) == 1 else uniq


cdef bint _in_git_dir(str t):
    # the pure twin's _in_git_dir: a path inside a repository's ".git" folder, or the folder
    return (_eq(t, u".git") or _starts(t, u".git/") or t.endswith(u"/.git")
            or u"/.git/" in t) and u"://" not in t


cdef bint _writes_git_dir(list mutated):
    # the pure twin's _git_dir applies: a write inside a ".git" folder also writes git:dir and
    # reads git:repo
    cdef str t
    for t in mutated:
        if _in_git_dir(t):
            return True
    return False


cdef inline bint _unresolved(str t) noexcept:
    # a target built from a variable or a substitution ($f, $(...)) names nothing we can track
    cdef Py_ssize_t i, n = PyUnicode_GET_LENGTH(t)
    cdef int kind = PyUnicode_KIND(t)
    cdef void* data = PyUnicode_DATA(t)
    cdef const Py_UCS1* b
    cdef Py_UCS4 c
    if kind == PyUnicode_1BYTE_KIND:
        b = <const Py_UCS1*>data
        for i in range(n):
            if b[i] == u'$' or b[i] == u'`':
                return True
        return False
    for i in range(n):
        c = PyUnicode_READ(kind, data, i)
        if c == u'$' or c == u'`':
            return True
    return False


def classify_shell(command):
    """(kind, target) of a shell command: kind is observe/mutate/exec/other; never raises.

    The target of a ``mutate`` is what it writes (None when a writer's targets cannot be
    read, which the analysis takes as "everything may have changed"); of an ``observe``, what
    it reads; of ``exec`` and ``other``, None.

    Uncached; ``loopcore.taxonomy.shell.classify_shell`` is the cached one.
    """
    cdef _Part part
    cdef bint unknown
    cdef str t
    cdef list observed
    if not isinstance(command, str):
        return ("exec", None)
    part = _classify_script(<str>command, 0)
    if part.kind == K_MUTATE:
        unknown = part.unk
        if not unknown:
            for t in part.mut:
                if _unresolved(t):
                    unknown = True
                    break
        if unknown:
            return ("mutate", None)
        if _writes_git_dir(part.mut):
            return ("mutate", _pack(part.mut + [u"git:dir"]))
        return ("mutate", _pack(part.mut))
    if part.kind == K_OBSERVE:
        observed = part.obs
        for t in observed:
            if _unresolved(t):
                observed = [t for t in observed if not _unresolved(t)]
                break
        return ("observe", _pack(observed))
    return (_KIND_NAMES[part.kind], None)


cdef inline tuple _as_access(object packed):
    # the pure twin's _access_tuple of targets whose _pack is *packed*
    if packed is None:
        return ()
    return <tuple>packed if isinstance(packed, tuple) else (packed,)


cdef tuple _access_tuple(list targets):
    return _as_access(_pack(targets))


cdef bint _no_op_command(list segs):
    # one simple "sed -i" part whose scripts replace a literal text by itself (segs: the
    # command's simple commands, all of them)
    cdef _Seg seg
    cdef list words
    if len(segs) != 1:
        return False
    seg = <_Seg>segs[0]
    if seg.redirs or seg.subs is not None:
        return False
    words = seg.word_list()
    if not words or not (words[0] == u"sed" or words[0] == u"gsed"):
        return False
    return _sed_no_op(words)


cdef bint _sed_no_op(list words):
    """The pure twin's _sed_no_op: every script the ``sed -i`` command line runs is a
    substitution of a literal text by itself."""
    cdef list scripts = []
    cdef bint explicit = False
    cdef Py_ssize_t i = 1, n = len(words)
    cdef str w
    while i < n:
        w = <str>words[i]
        if _eq(w, u"-e") or _eq(w, u"--expression"):
            if i + 1 >= n:
                return False
            scripts.append(words[i + 1])
            explicit = True
            i += 2
            continue
        if _starts(w, u"--expression="):
            scripts.append(w[13:])
            explicit = True
        elif (_eq(w, u"-f") or _eq(w, u"--file") or _starts(w, u"--file=") or _eq(w, u"-n")
              or _eq(w, u"--quiet") or _eq(w, u"--silent")):
            return False
        i += 1
    if not explicit:
        scripts = _operands(words, _SED_OPTS_N)
        if not scripts:
            return False
        scripts = scripts[:1]
    for w in scripts:
        if not _no_op_sub(w):
            return False
    return len(scripts) > 0


# The characters a literal text of _no_op_sub may not hold (the pure twin's _NO_OP_SUB: regex
# metacharacters, the delimiters, newline and ";"), and the delimiters.
cdef str _NOT_LITERAL = u"\\.*[]^$+?(){}|&/#,:@!\n;"
cdef str _SUB_DELIMITERS = u"/|#,:@!"


cdef bint _no_op_sub(str script):
    """``_NO_OP_SUB.fullmatch(script) is not None``: ``s<d>T<d>T<d>`` or with a final ``g``, T a
    non-empty text of literal characters (none of _NOT_LITERAL). T cannot hold the delimiter,
    so where it ends is known: the regex has one way to match."""
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(script), j = 2, m, k, i
    cdef int kind = PyUnicode_KIND(script)
    cdef void* data = PyUnicode_DATA(script)
    cdef Py_UCS4 d
    if n < 5 or PyUnicode_READ(kind, data, 0) != u's':
        return False
    d = PyUnicode_READ(kind, data, 1)
    if _findc(_SUB_DELIMITERS, d, 0, PyUnicode_GET_LENGTH(_SUB_DELIMITERS), 1) < 0:
        return False
    while j < n and _findc(_NOT_LITERAL, PyUnicode_READ(kind, data, j), 0, PyUnicode_GET_LENGTH(_NOT_LITERAL), 1) < 0:
        j += 1
    m = j - 2
    if m == 0 or j >= n or PyUnicode_READ(kind, data, j) != d:
        return False
    k = j + 1
    if n - k < m + 1:
        return False
    for i in range(m):
        if PyUnicode_READ(kind, data, k + i) != PyUnicode_READ(kind, data, 2 + i):
            return False
    k += m
    if PyUnicode_READ(kind, data, k) != d:
        return False
    k += 1
    return k == n or (k == n - 1 and PyUnicode_READ(kind, data, k) == u'g')


def classify_shell_access(command):
    """(kind, target, reads, writes, no_op) of a shell command; never raises.

    The pure twin's ``classify_shell_access`` documents the answer. Uncached;
    ``loopcore.taxonomy.shell.classify_shell_access`` is the cached one.
    """
    cdef _Part part
    cdef bint unknown, resolved = True
    cdef str t
    cdef object reads, packed
    cdef _Lexer lx
    cdef list segs
    if not isinstance(command, str):
        return ("exec", None, None, None, False)
    lx = _new_lexer(<str>command, True)
    part = _classify_lexed(lx, 0)
    segs = lx.segs
    _release(lx)
    if part.kind == K_EXEC:
        return ("exec", None, None, None, False)
    if part.kind == K_OTHER:
        return ("other", None, (), (), False)
    if part.kind == K_MUTATE and _writes_git_dir(part.mut):
        part = _part(K_MUTATE, part.obs + [u"git:repo"], part.mut + [u"git:dir"], part.unk)
    for t in part.obs:
        if _unresolved(t):
            resolved = False
            break
    if part.kind == K_OBSERVE:
        if resolved:
            # the target and the reads are one packing of the same list
            packed = _pack(part.obs)
            reads = _as_access(packed)
            return ("observe", packed, reads if reads else None, (), False)
        return ("observe", _pack([t for t in part.obs if not _unresolved(t)]), None, (), False)
    reads = _access_tuple(part.obs) if resolved else None
    unknown = part.unk
    if not unknown:
        for t in part.mut:
            if _unresolved(t):
                unknown = True
                break
    if unknown:
        return ("mutate", None, reads, None, False)
    packed = _pack(part.mut)
    # a mutate result read the whole script: segs holds all its simple commands
    return ("mutate", packed, reads, _as_access(packed), _no_op_command(segs))
