"""Compiled twin of loopcore._hashing_py: the canonical hash (format HASH_FORMAT_VERSION).

The byte format and every rule are defined by the pure-Python twin's docstring; this module
must produce the same bytes for every input (the tests cross the twins with hypothesis).

How it stays fast and safe:
- a JSON-like value (dicts of at most 32 short ASCII str keys, lists, tuples, and scalars: None,
  bool, int64 ints, floats, str and bytes below the GIL-release size; no subclasses) is
  encoded by one C walk (``loopcore_fw_value``) that runs no Python code at all, so it reads
  every container through borrowed pointers: no snapshot, no reference counting, keys sorted
  on the stack. The first value it cannot take abandons the walk (nothing is kept) and the
  general path below encodes the value; inside the general path each dict tries the walk
  again a few levels deep (GENERAL_FAST_DEPTH), so no member is walked more than a few times;
- one per-call arena (starts on the C stack, grows on the heap) receives the canonical bytes;
  dicts with short str keys (nearly every tool payload) are streamed in key order after a
  small on-stack sort of their keys; other dicts and sets are encoded in place and their
  members reordered bytewise only when out of order, so nothing builds Python objects;
- str data is read in place (``PyUnicode_AsUTF8AndSize``: no copy for ASCII, a cached copy
  otherwise); str/bytes over INLINE_MAX bytes are digested straight from the object's buffer
  (the GIL is released for large immutable buffers);
- recursion depth is bounded by MAX_DEPTH, so no input can overflow the C stack; the path to a
  failing value is kept as a stack of (container, key/index) so errors name it without unwinding.

Memory-safety audit (every call into Python code and every GIL release; the pure twin's module
doc states the same rules as behaviour):
- The fast walk calls no Python code and releases no GIL: its values need no converter, its
  ``strip`` is None or an exact frozenset of exact str (membership compares str to str in C;
  any other strip turns the walk off for the call), it allocates no Python object (only the
  arena, with malloc) and leaves big strings (>= NOGIL_MIN) to the general path. Nothing can
  change a container between reading it and writing its bytes, so borrowed pointers hold.
- Python code can run in the middle of a hash only through (a) ``strip`` membership tests
  (``PySet_Contains`` calls the key's ``__hash__`` and, on a hash collision, a member's
  ``__eq__``), (b) the ``default=`` converter, (c) building an error message (``repr``). No
  subclass override is ever called: ints are read with ``PyLong_AsLongLongAndOverflow`` and,
  past int64, copied with ``int.__int__`` (base storage), floats with ``PyFloat_AsDouble``,
  str/bytes/list/tuple/dict through their storage macros, sets through ``set.__iter__`` /
  ``frozenset.__iter__``.
- Every dict is snapshotted before (a) or (b) can run: the fast path copies its (<= FAST_KEYS)
  pairs into an on-stack array with a strong reference to each key and value, in a loop
  that calls no Python code (the entries read in place on CPython 3.11-3.13 once an import-time
  self-check confirmed their layout, ``PyDict_Next`` otherwise), and filters ``strip`` only
  afterwards; the
  general path takes ``PyDict_Items`` (a list of owned pairs). Sets are copied into a list.
  So a callback that clears, grows or rebinds the container frees nothing we still read, and
  the container's size is never trusted after such a call.
- Lists are read live (the twin does the same): the size is re-read before every item and the
  item is held by an owned reference while it is encoded. Tuples are immutable and held by
  their owner (an owned local or snapshot higher up); the root is held by the caller.
- Path segments (``seg_key``) and cycle ancestors (``anc``) are borrowed pointers, valid
  because every object they name is held by a snapshot or owned local of a frame that is
  still open.
- The GIL is released only to digest a str/bytes of >= NOGIL_MIN bytes, and only while this
  frame holds its own strong reference to that object (an immutable buffer): another thread
  may rebind the dict slot or list item that held it, the buffer stays alive.
- Depth counts across re-entrant calls: the ``default=`` converter and the ``strip``
  membership tests run with the thread-local ``loopcore_hash_base`` set to the current depth
  + 2 (error-path ``repr`` with it at MAX_DEPTH), and a nested call starts there, so Python
  code that calls ``canonical_hash`` again without end raises the documented ValueError after
  at most MAX_DEPTH / 2 nested calls; nested calls keep their Ctx and first buffer on the heap,
  so each costs a few hundred bytes of C stack.
- At most MAX_MEMBERS container members are walked per call (counted as each container is
  entered), which bounds time and the arena for inputs that share references exponentially.
"""
cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_FromStringAndSize
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE
from cpython.dict cimport PyDict_Next, PyDict_Size
from cpython.float cimport PyFloat_AS_DOUBLE
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_FromDouble
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF, Py_DECREF
from cpython.set cimport PySet_Contains
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from libc.math cimport floor, isinf, isnan
from libc.stdint cimport int64_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcmp, memcpy

from codes cimport MAX_DEPTH as C_MAX_DEPTH

import json as _json

cdef extern from "xxh_inline.h":
    uint64_t XXH3_64bits(const void* data, size_t length) nogil
    uint64_t loopcore_xxh3_large(const void* data, size_t length) nogil
    uint32_t XXH_readLE32(const void* p) nogil
    uint64_t XXH_readLE64(const void* p) nogil
    int XXH_CPU_LITTLE_ENDIAN

cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define LOOPCORE_HOT static inline __attribute__((always_inline))
    #else
    #define LOOPCORE_HOT static inline
    #endif
    /* The arena's one hot write: tag + u32 LE length + the bytes. Short copies (nearly every
     * key and short value) are a few fixed-size moves, not a call into libc's memcpy. */
    LOOPCORE_HOT void loopcore_put_blob(unsigned char* p, unsigned char tag,
                                         const char* data, size_t n) {
        uint32_t len = (uint32_t)n;
        p[0] = tag;
        len = XXH_readLE32(&len);
        memcpy(p + 1, &len, 4);
        p += 5;
        if (n > 32) {  /* at most INLINE_MAX: a few 32-byte moves, the last one overlapping */
            size_t i;
            for (i = 0; i + 32 < n; i += 32) memcpy(p + i, data + i, 32);
            memcpy(p + n - 32, data + n - 32, 32);
        } else if (n >= 16) {
            memcpy(p, data, 16);
            memcpy(p + n - 16, data + n - 16, 16);
        } else if (n >= 8 && n < 16) {
            memcpy(p, data, 8);
            memcpy(p + n - 8, data + n - 8, 8);
        } else if (n >= 4 && n < 8) {
            memcpy(p, data, 4);
            memcpy(p + n - 4, data + n - 4, 4);
        } else {
            size_t i;
            for (i = 0; i < n; i++) p[i] = (unsigned char)data[i];
        }
    }
    /* The digest of the whole encoding: one-shot XXH3-64 (seed 0) either way; short inputs
     * take the inlined scalar code, longer ones the CPU's widest vector unit (the dispatcher:
     * AVX-512 / AVX2 where present, as python-xxhash does), not the baseline SSE2 inlined code. */
    static inline XXH64_hash_t loopcore_xxh3_digest(const void* p, size_t n) {
        return n <= 240 ? XXH3_64bits(p, n) : loopcore_xxh3_large(p, n);
    }
    """
    void loopcore_put_blob(unsigned char* p, unsigned char tag, const char* data, size_t n) noexcept nogil
    uint64_t loopcore_xxh3_digest(const void* p, size_t n) noexcept nogil

cdef extern from *:
    """
    /* A dict's entries read in place, for the str-keyed fast path: what PyDict_Next walks,
     * without its per-call generic work (split tables, general keys, bounds). Only on
     * CPython 3.11-3.13 with the GIL, only for a combined table of str keys (the layout of
     * those versions: a PyDictKeysObject header, dk_indices, then {key, value} pairs, NULL
     * values for deleted slots), and only once an import-time self-check on a dict built for
     * it found that layout (loopcore_dict_selfcheck). Anything else returns NULL: the caller
     * walks with PyDict_Next. */
    #if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030E0000 \
        && !defined(Py_GIL_DISABLED) && !defined(PYPY_VERSION) && !defined(Py_LIMITED_API)
    typedef struct {
        Py_ssize_t dk_refcnt;
        uint8_t dk_log2_size;
        uint8_t dk_log2_index_bytes;
        uint8_t dk_kind;
        uint32_t dk_version;
        Py_ssize_t dk_usable;
        Py_ssize_t dk_nentries;
        char dk_indices[];
    } loopcore_dictkeys;
    static int loopcore_dict_direct = 0;
    static inline PyObject** loopcore_dict_entries_any(PyObject* d, Py_ssize_t* n) {
        PyDictObject* mp = (PyDictObject*)d;
        loopcore_dictkeys* dk;
        if (mp->ma_values != NULL) return NULL;
        dk = (loopcore_dictkeys*)mp->ma_keys;
        if (dk->dk_kind != 1 /* DICT_KEYS_UNICODE */) return NULL;
        *n = dk->dk_nentries;
        return (PyObject**)(dk->dk_indices + ((size_t)1 << dk->dk_log2_index_bytes));
    }
    static inline PyObject** loopcore_dict_entries(PyObject* d, Py_ssize_t* n) {
        return loopcore_dict_direct ? loopcore_dict_entries_any(d, n) : NULL;
    }
    /* d must be a fresh dict {k0: v0, k1: v1} of exact str keys: the layout is trusted only if
     * the header reads as a minimal table (8 slots, 1-byte indices) holding exactly those. */
    static int loopcore_dict_selfcheck(PyObject* d, PyObject* k0, PyObject* v0,
                                       PyObject* k1, PyObject* v1) {
        PyDictObject* mp = (PyDictObject*)d;
        loopcore_dictkeys* dk = (loopcore_dictkeys*)mp->ma_keys;
        PyObject** ent;
        Py_ssize_t n = 0;
        if (!PyDict_CheckExact(d) || mp->ma_used != 2 || mp->ma_values != NULL) return 0;
        if (dk->dk_refcnt < 1 || dk->dk_log2_size != 3 || dk->dk_log2_index_bytes != 3
            || dk->dk_kind != 1 || dk->dk_nentries != 2 || dk->dk_usable < 0
            || dk->dk_usable > 5) return 0;
        ent = loopcore_dict_entries_any(d, &n);
        if (ent == NULL || n != 2 || ent[0] != k0 || ent[1] != v0 || ent[2] != k1 || ent[3] != v1)
            return 0;
        loopcore_dict_direct = 1;
        return 1;
    }
    #else
    static int loopcore_dict_direct = 0;
    static inline PyObject** loopcore_dict_entries(PyObject* d, Py_ssize_t* n) {
        (void)d; (void)n; return NULL;
    }
    static int loopcore_dict_selfcheck(PyObject* d, PyObject* k0, PyObject* v0,
                                       PyObject* k1, PyObject* v1) {
        (void)d; (void)k0; (void)v0; (void)k1; (void)v1; return 0;
    }
    #endif
    """
    int loopcore_dict_direct
    PyObject** loopcore_dict_entries(object d, Py_ssize_t* n) noexcept
    int loopcore_dict_selfcheck(object d, object k0, object v0, object k1, object v1) noexcept

cdef extern from *:
    """
    /* The fast walk: JSON-like values - dicts of exact short ASCII str keys, lists, tuples,
     * and scalars (None, bool, an int that fits int64, a float, a str or bytes below the
     * GIL-release size) - as nearly every tool payload is ({"path", "offset", "limit"},
     * {"command", "timeout"}...). Encoding one runs no Python code at all: no converter (no
     * value needs one), no strip test that can call __hash__/__eq__ (strip is NULL or a
     * frozenset of exact str, whose membership test is C), no allocation of a Python object,
     * no GIL release. So containers are read through borrowed pointers, with no snapshot and
     * no reference counting: nothing can change them while they are read. A dict's keys are
     * sorted on the stack first, then each pair is written in key order. The first value the
     * walk cannot take abandons it (the caller keeps nothing) and the general path encodes the
     * value. The bytes are the general path's. */
    #include <math.h>
    #define LOOPCORE_FLAT_KEYS 32
    #define LOOPCORE_FLAT_INLINE 128
    #define LOOPCORE_FLAT_NOGIL (1 << 20)
    #define LOOPCORE_FLAT_ROOM (5 + LOOPCORE_FLAT_INLINE)  /* the most a scalar takes */
    #define LOOPCORE_FAST_DEPTH 12  /* containers deep, from where the walk starts */

    typedef struct {
        const char* k;
        Py_ssize_t kn;
        PyObject* v;
    } loopcore_fkey;

    /* the order of the encoded keys 's' + u32 LE length + bytes: lengths <= 128 < 256, so
     * the length decides first, then the bytes (distinct keys: never equal) */
    LOOPCORE_HOT int loopcore_key_after(const loopcore_fkey* a, const loopcore_fkey* b) {
        Py_ssize_t i;
        if (a->kn != b->kn) return a->kn > b->kn;
        for (i = 0; i < a->kn; i++)
            if (a->k[i] != b->k[i]) return (unsigned char)a->k[i] > (unsigned char)b->k[i];
        return 0;
    }

    /* an exact int that fits int64: 1 and its value in *x, else 0 (never an error) */
    LOOPCORE_HOT int loopcore_small_int(PyObject* v, int64_t* x) {
        int overflow = 0;
        long long r;
    #if PY_VERSION_HEX >= 0x030C0000 && !defined(Py_LIMITED_API) && !defined(PYPY_VERSION)
        if (PyUnstable_Long_IsCompact((PyLongObject*)v)) {
            *x = (int64_t)PyUnstable_Long_CompactValue((PyLongObject*)v);
            return 1;
        }
    #elif !defined(Py_LIMITED_API) && !defined(PYPY_VERSION)
        Py_ssize_t size = Py_SIZE(v);
        if (size == 0) { *x = 0; return 1; }
        if (size == 1) { *x = (int64_t)((PyLongObject*)v)->ob_digit[0]; return 1; }
        if (size == -1) { *x = -(int64_t)((PyLongObject*)v)->ob_digit[0]; return 1; }
    #endif
        r = PyLong_AsLongLongAndOverflow(v, &overflow);
        *x = (int64_t)r;
        return !overflow;
    }

    LOOPCORE_HOT unsigned char* loopcore_put_u64(unsigned char* p, unsigned char tag, uint64_t v) {
        p[0] = tag;
        v = XXH_readLE64(&v);
        memcpy(p + 1, &v, 8);
        return p + 9;
    }

    static inline unsigned char* loopcore_put_digest(unsigned char* p, unsigned char tag,
                                                     const char* data, Py_ssize_t n) {
        uint64_t h = loopcore_xxh3_digest(data, (size_t)n);
        p = loopcore_put_u64(p, tag, (uint64_t)n);
        h = XXH_readLE64(&h);
        memcpy(p, &h, 8);
        return p + 8;
    }

    /* write scalar *v* at p (LOOPCORE_FLAT_ROOM bytes free) and return the end, or NULL when
     * it is not a flat scalar */
    LOOPCORE_HOT unsigned char* loopcore_put_scalar(unsigned char* p, PyObject* v) {
        PyTypeObject* t = Py_TYPE(v);
        Py_ssize_t n;
        int64_t x;
        if (t == &PyUnicode_Type) {
            if (!PyUnicode_IS_COMPACT_ASCII(v)) return NULL;
            n = PyUnicode_GET_LENGTH(v);
            if (n <= LOOPCORE_FLAT_INLINE) {
                loopcore_put_blob(p, 's', (const char*)PyUnicode_1BYTE_DATA(v), (size_t)n);
                return p + 5 + n;
            }
            if (n >= LOOPCORE_FLAT_NOGIL) return NULL;
            return loopcore_put_digest(p, 'S', (const char*)PyUnicode_1BYTE_DATA(v), n);
        }
        if (t == &PyLong_Type) {
            if (!loopcore_small_int(v, &x)) return NULL;
            return loopcore_put_u64(p, 'i', (uint64_t)x);
        }
        if (v == Py_True) { p[0] = 't'; return p + 1; }
        if (v == Py_False) { p[0] = 'f'; return p + 1; }
        if (v == Py_None) { p[0] = 'n'; return p + 1; }
        if (t == &PyFloat_Type) {
            double d = PyFloat_AS_DOUBLE(v);
            uint64_t bits;
            if (isnan(d)) {
                bits = 0x7ff8000000000000ULL;
            } else if (isinf(d) || floor(d) != d) {
                memcpy(&bits, &d, 8);
            } else if (-9223372036854775808.0 <= d && d < 9223372036854775808.0) {
                return loopcore_put_u64(p, 'i', (uint64_t)(int64_t)d);
            } else {
                return NULL;  /* an integral double past int64: the big-int encoding */
            }
            return loopcore_put_u64(p, 'd', bits);
        }
        if (t == &PyBytes_Type) {
            n = PyBytes_GET_SIZE(v);
            if (n <= LOOPCORE_FLAT_INLINE) {
                loopcore_put_blob(p, 'b', PyBytes_AS_STRING(v), (size_t)n);
                return p + 5 + n;
            }
            if (n >= LOOPCORE_FLAT_NOGIL) return NULL;
            return loopcore_put_digest(p, 'B', PyBytes_AS_STRING(v), n);
        }
        return NULL;
    }

    /* The walk's state. The output starts in the caller's buffer and grows on the heap; the
     * caller takes buf/cap/heap back whatever the result (the buffer may have moved). */
    typedef struct {
        unsigned char* buf;
        Py_ssize_t len;
        Py_ssize_t cap;
        int heap;
        PyObject* strip;            /* NULL or a frozenset of exact str */
        PyObject* const* anc;       /* the general path's open containers (a cycle: 'c') */
        Py_ssize_t nanc;
        Py_ssize_t members;         /* container members walked (the general path's count) */
        Py_ssize_t max_members;     /* past this the general path raises: give up */
        int nopen;
        PyObject* open[LOOPCORE_FAST_DEPTH];
    } loopcore_fw;

    static int loopcore_fw_grow(loopcore_fw* w, Py_ssize_t need) {
        Py_ssize_t cap = w->cap * 2;
        unsigned char* nb;
        while (cap < w->len + need) cap *= 2;
        if (w->heap) {
            nb = (unsigned char*)realloc(w->buf, (size_t)cap);
        } else {
            nb = (unsigned char*)malloc((size_t)cap);
            if (nb != NULL) memcpy(nb, w->buf, (size_t)w->len);
        }
        if (nb == NULL) {
            PyErr_NoMemory();  /* the walk ends here: nothing borrowed is read again */
            return -1;
        }
        w->buf = nb;
        w->cap = cap;
        w->heap = 1;
        return 0;
    }

    #define LOOPCORE_FW_ROOM(w, need) \
        if ((w)->cap - (w)->len < (need) && loopcore_fw_grow((w), (need)) < 0) return -1

    LOOPCORE_HOT void loopcore_put_u32(unsigned char* p, unsigned char tag, Py_ssize_t n) {
        uint32_t n32 = (uint32_t)n;
        p[0] = tag;
        n32 = XXH_readLE32(&n32);
        memcpy(p + 1, &n32, 4);
    }

    /* a container met again while it is being encoded: the cycle marker */
    static inline int loopcore_fw_is_open(const loopcore_fw* w, PyObject* v) {
        Py_ssize_t i;
        for (i = 0; i < w->nopen; i++)
            if (w->open[i] == v) return 1;
        for (i = 0; i < w->nanc; i++)
            if (w->anc[i] == v) return 1;
        return 0;
    }

    /* write a value that is no container at p (LOOPCORE_FLAT_ROOM bytes free): the end, or
     * NULL when it is not a fast-walk scalar. The common kinds are tested first. */
    LOOPCORE_HOT unsigned char* loopcore_put_leaf(unsigned char* p, PyObject* v) {
        Py_ssize_t n;
        int64_t x;
        if (Py_TYPE(v) == &PyUnicode_Type && PyUnicode_IS_COMPACT_ASCII(v)
            && (n = PyUnicode_GET_LENGTH(v)) <= LOOPCORE_FLAT_INLINE) {
            loopcore_put_blob(p, 's', (const char*)PyUnicode_1BYTE_DATA(v), (size_t)n);
            return p + 5 + n;
        }
        if (Py_TYPE(v) == &PyLong_Type && loopcore_small_int(v, &x))
            return loopcore_put_u64(p, 'i', (uint64_t)x);
        return loopcore_put_scalar(p, v);
    }

    static int loopcore_fw_container(loopcore_fw* w, PyObject* v, int budget);

    /* a str that is not ASCII (else 1): its UTF-8, lone surrogates passed through (the
     * general path's "surrogatepass"), encoded here rather than with PyUnicode_AsUTF8AndSize,
     * which may allocate and, on a surrogate, raise. Strings that could reach the GIL-release
     * size in UTF-8 are left to the general path. */
    static int loopcore_fw_utf8(loopcore_fw* w, PyObject* s) {
        Py_ssize_t len, i, n;
        int kind;
        const void* data;
        unsigned char* out;
        unsigned char* q;
        unsigned char* p;
        uint64_t h;
        if (Py_TYPE(s) != &PyUnicode_Type || !PyUnicode_IS_COMPACT(s)) return 1;
    #if PY_VERSION_HEX < 0x030E0000 && !defined(Py_LIMITED_API) && !defined(PYPY_VERSION)
        if (((PyCompactUnicodeObject*)s)->utf8 != NULL) {
            /* the UTF-8 CPython keeps once asked for it (no surrogates in it) */
            const char* u = ((PyCompactUnicodeObject*)s)->utf8;
            n = ((PyCompactUnicodeObject*)s)->utf8_length;
            if (n >= LOOPCORE_FLAT_NOGIL) return 1;
            LOOPCORE_FW_ROOM(w, LOOPCORE_FLAT_ROOM);
            p = w->buf + w->len;
            q = n <= LOOPCORE_FLAT_INLINE ? (loopcore_put_blob(p, 's', u, (size_t)n), p + 5 + n)
                                          : loopcore_put_digest(p, 'S', u, n);
            w->len = q - w->buf;
            return 0;
        }
    #endif
        len = PyUnicode_GET_LENGTH(s);
        if (len >= LOOPCORE_FLAT_NOGIL / 4) return 1;
        LOOPCORE_FW_ROOM(w, 22 + 4 * len);
        kind = PyUnicode_KIND(s);
        data = PyUnicode_DATA(s);
        out = w->buf + w->len + 22;  /* past the longest header: the bytes, then moved */
        q = out;
        i = 0;
        if (kind == PyUnicode_1BYTE_KIND) {
            /* Latin-1: runs of ASCII eight at a time, the rest two bytes each */
            const Py_UCS1* s1 = (const Py_UCS1*)data;
            uint64_t x;
            while (i < len) {
                if (i + 8 <= len) {
                    memcpy(&x, s1 + i, 8);
                    if (!(x & 0x8080808080808080ULL)) {
                        memcpy(q, &x, 8);
                        q += 8;
                        i += 8;
                        continue;
                    }
                }
                Py_UCS1 c1 = s1[i++];
                if (c1 < 0x80) {
                    *q++ = c1;
                } else {
                    *q++ = (unsigned char)(0xC0 | (c1 >> 6));
                    *q++ = (unsigned char)(0x80 | (c1 & 0x3F));
                }
            }
        } else if (kind == PyUnicode_2BYTE_KIND) {
            /* UCS-2: runs of ASCII four at a time, the rest (lone surrogates too) two or
             * three bytes each */
            const Py_UCS2* s2 = (const Py_UCS2*)data;
            uint64_t x;
            while (i < len) {
                if (i + 4 <= len) {
                    memcpy(&x, s2 + i, 8);
                    if (!(x & 0xFF80FF80FF80FF80ULL)) {
                        q[0] = (unsigned char)s2[i];
                        q[1] = (unsigned char)s2[i + 1];
                        q[2] = (unsigned char)s2[i + 2];
                        q[3] = (unsigned char)s2[i + 3];
                        q += 4;
                        i += 4;
                        continue;
                    }
                }
                Py_UCS2 c2 = s2[i++];
                if (c2 < 0x80) {
                    *q++ = (unsigned char)c2;
                } else if (c2 < 0x800) {
                    *q++ = (unsigned char)(0xC0 | (c2 >> 6));
                    *q++ = (unsigned char)(0x80 | (c2 & 0x3F));
                } else {
                    *q++ = (unsigned char)(0xE0 | (c2 >> 12));
                    *q++ = (unsigned char)(0x80 | ((c2 >> 6) & 0x3F));
                    *q++ = (unsigned char)(0x80 | (c2 & 0x3F));
                }
            }
        }
        /* what is left (all of a UCS-4 text), one code point at a time */
        for (; i < len; i++) {
            Py_UCS4 c = PyUnicode_READ(kind, data, i);
            if (c < 0x80) {
                *q++ = (unsigned char)c;
            } else if (c < 0x800) {
                *q++ = (unsigned char)(0xC0 | (c >> 6));
                *q++ = (unsigned char)(0x80 | (c & 0x3F));
            } else if (c < 0x10000) {
                *q++ = (unsigned char)(0xE0 | (c >> 12));
                *q++ = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
                *q++ = (unsigned char)(0x80 | (c & 0x3F));
            } else {
                *q++ = (unsigned char)(0xF0 | (c >> 18));
                *q++ = (unsigned char)(0x80 | ((c >> 12) & 0x3F));
                *q++ = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
                *q++ = (unsigned char)(0x80 | (c & 0x3F));
            }
        }
        n = q - out;
        p = w->buf + w->len;
        if (n <= LOOPCORE_FLAT_INLINE) {
            loopcore_put_u32(p, 's', n);
            memmove(p + 5, out, (size_t)n);
            w->len += 5 + n;
        } else {
            h = loopcore_xxh3_digest(out, (size_t)n);
            p = loopcore_put_u64(p, 'S', (uint64_t)n);
            h = XXH_readLE64(&h);
            memcpy(p, &h, 8);
            w->len += 17;
        }
        return 0;
    }

    #define LOOPCORE_IS_CONTAINER(t) \
        ((t) == &PyDict_Type || (t) == &PyList_Type || (t) == &PyTuple_Type)

    static int loopcore_fw_list(loopcore_fw* w, PyObject* v, int budget) {
        Py_ssize_t i, n = Py_SIZE(v);
        PyObject** items = PySequence_Fast_ITEMS(v);
        unsigned char* p;
        unsigned char* q;
        int r;
        w->members += n;
        if (w->members > w->max_members) return 1;
        LOOPCORE_FW_ROOM(w, 5);
        p = w->buf + w->len;
        loopcore_put_u32(p, 'l', n);
        p += 5;
        w->open[w->nopen++] = v;
        for (i = 0; i < n; i++) {
            PyObject* x = items[i];
            if (w->buf + w->cap - p < LOOPCORE_FLAT_ROOM) {
                w->len = p - w->buf;
                if (loopcore_fw_grow(w, LOOPCORE_FLAT_ROOM) < 0) return -1;
                p = w->buf + w->len;
            }
            if (!LOOPCORE_IS_CONTAINER(Py_TYPE(x))) {
                q = loopcore_put_leaf(p, x);
                if (q != NULL) {
                    p = q;
                    continue;
                }
                w->len = p - w->buf;
                r = loopcore_fw_utf8(w, x);
                if (r) return r;
                p = w->buf + w->len;
                continue;
            }
            w->len = p - w->buf;
            r = loopcore_fw_container(w, x, budget);
            if (r) return r;
            p = w->buf + w->len;
        }
        w->len = p - w->buf;
        w->nopen--;
        return 0;
    }

    static int loopcore_fw_dict(loopcore_fw* w, PyObject* d, int budget) {
        loopcore_fkey e[LOOPCORE_FLAT_KEYS];
        loopcore_fkey t;
        Py_ssize_t size = PyDict_GET_SIZE(d), n = 0, nent = 0, pos = 0, i, j;
        PyObject** ents;
        PyObject* k;
        PyObject* v;
        unsigned char* p;
        unsigned char* q;
        int r;
        if (size > LOOPCORE_FLAT_KEYS) return 1;
        w->members += size;
        if (w->members > w->max_members) return 1;
        ents = loopcore_dict_entries(d, &nent);
        if (ents == NULL) {
            /* the same pairs in the same order, through PyDict_Next, into e[] first */
            PyObject* k2;
            PyObject* v2;
            while (PyDict_Next(d, &pos, &k2, &v2)) {
                if (n == LOOPCORE_FLAT_KEYS) return 1;
                e[n].k = (const char*)k2;  /* the key object for now */
                e[n].v = v2;
                n++;
            }
            nent = n;
            n = 0;
        }
        for (i = 0; i < nent; i++) {
            if (ents != NULL) {
                k = ents[2 * i];
                v = ents[2 * i + 1];
                if (v == NULL) continue;
            } else {
                k = (PyObject*)e[i].k;
                v = e[i].v;
            }
            if (Py_TYPE(k) != &PyUnicode_Type || !PyUnicode_IS_COMPACT_ASCII(k)
                || PyUnicode_GET_LENGTH(k) > LOOPCORE_FLAT_INLINE || n == LOOPCORE_FLAT_KEYS)
                return 1;
            if (w->strip != NULL) {
                r = PySet_Contains(w->strip, k);
                if (r < 0) return -1;
                if (r) continue;
            }
            e[n].k = (const char*)PyUnicode_1BYTE_DATA(k);
            e[n].kn = PyUnicode_GET_LENGTH(k);
            e[n].v = v;
            n++;
        }
        for (i = 1; i < n; i++) {
            t = e[i];
            j = i - 1;
            while (j >= 0 && loopcore_key_after(&e[j], &t)) {
                e[j + 1] = e[j];
                j--;
            }
            e[j + 1] = t;
        }
        LOOPCORE_FW_ROOM(w, 5);
        p = w->buf + w->len;
        loopcore_put_u32(p, 'm', n);
        p += 5;
        w->open[w->nopen++] = d;
        for (i = 0; i < n; i++) {
            if (w->buf + w->cap - p < 5 + e[i].kn + LOOPCORE_FLAT_ROOM) {
                w->len = p - w->buf;
                if (loopcore_fw_grow(w, 5 + e[i].kn + LOOPCORE_FLAT_ROOM) < 0) return -1;
                p = w->buf + w->len;
            }
            loopcore_put_blob(p, 's', e[i].k, (size_t)e[i].kn);
            p += 5 + e[i].kn;
            v = e[i].v;
            if (!LOOPCORE_IS_CONTAINER(Py_TYPE(v))) {
                q = loopcore_put_leaf(p, v);
                if (q != NULL) {
                    p = q;
                    continue;
                }
                w->len = p - w->buf;
                r = loopcore_fw_utf8(w, v);
                if (r) return r;
                p = w->buf + w->len;
                continue;
            }
            w->len = p - w->buf;
            r = loopcore_fw_container(w, v, budget);
            if (r) return r;
            p = w->buf + w->len;
        }
        w->len = p - w->buf;
        w->nopen--;
        return 0;
    }

    /* a dict, list or tuple (LOOPCORE_IS_CONTAINER): its encoding, or the cycle marker */
    static int loopcore_fw_container(loopcore_fw* w, PyObject* v, int budget) {
        if (loopcore_fw_is_open(w, v)) {
            LOOPCORE_FW_ROOM(w, 1);
            w->buf[w->len++] = 'c';
            return 0;
        }
        if (budget <= 0 || w->nopen == LOOPCORE_FAST_DEPTH) return 1;
        if (Py_TYPE(v) == &PyDict_Type) return loopcore_fw_dict(w, v, budget - 1);
        return loopcore_fw_list(w, v, budget - 1);
    }

    /* encode *v* at the end of the output: 0 done, 1 not for this walk (the caller keeps
     * nothing), -1 an error is set. *budget*: how many containers deep the walk may go. */
    static int loopcore_fw_value(loopcore_fw* w, PyObject* v, int budget) {
        unsigned char* q;
        if (Py_TYPE(v) == &PyDict_Type && w->nopen == 0 && w->nanc == 0 && budget > 0)
            return loopcore_fw_dict(w, v, budget - 1);  /* the usual call: an args dict */
        if (LOOPCORE_IS_CONTAINER(Py_TYPE(v))) return loopcore_fw_container(w, v, budget);
        LOOPCORE_FW_ROOM(w, LOOPCORE_FLAT_ROOM);
        q = loopcore_put_leaf(w->buf + w->len, v);
        if (q == NULL) return loopcore_fw_utf8(w, v);
        w->len = q - w->buf;
        return 0;
    }
    """
    ctypedef struct loopcore_fw:
        unsigned char* buf
        Py_ssize_t len
        Py_ssize_t cap
        int heap
        PyObject* strip
        PyObject** anc
        Py_ssize_t nanc
        Py_ssize_t members
        Py_ssize_t max_members
        int nopen
    int loopcore_fw_value(loopcore_fw* w, object v, int budget) except -1
    enum:
        LOOPCORE_FLAT_INLINE
        LOOPCORE_FLAT_NOGIL
        LOOPCORE_FAST_DEPTH

cdef extern from *:
    """
    #if defined(_MSC_VER)
    #define LOOPCORE_TLS __declspec(thread)
    #else
    #define LOOPCORE_TLS _Thread_local
    #endif
    /* the depth a re-entrant call (from a default= converter) starts at, per thread */
    static LOOPCORE_TLS Py_ssize_t loopcore_hash_base = 0;
    /* how many such callbacks are running, in all threads (read and written with the GIL
     * held): while it is 0 every thread's loopcore_hash_base is 0, and a call need not pay
     * for reading the thread-local */
    static Py_ssize_t loopcore_hash_callbacks = 0;
    """
    Py_ssize_t loopcore_hash_base
    Py_ssize_t loopcore_hash_callbacks

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object, Py_ssize_t*)
    object PyUnicode_AsEncodedString(object, const char*, const char*)
    object PyDict_Items(object)
    bint PyFrozenSet_Check(object)
    void PyErr_Clear()
    bint PyUnicode_Check(object)
    bint PyUnicode_CheckExact(object)
    bint PyBytes_Check(object)
    bint PyByteArray_Check(object)
    bint PyLong_Check(object)
    bint PyLong_CheckExact(object)
    bint PyFloat_Check(object)
    bint PyFloat_CheckExact(object)
    bint PyList_Check(object)
    bint PyList_CheckExact(object)
    bint PyTuple_Check(object)
    bint PyTuple_CheckExact(object)
    bint PyDict_Check(object)
    bint PyDict_CheckExact(object)
    bint PyAnySet_Check(object)
    double PyFloat_AsDouble(object) except? -1.0
    bint PyUnicode_IS_COMPACT_ASCII(object)
    void* PyUnicode_1BYTE_DATA(object)
    Py_ssize_t PyUnicode_GET_LENGTH(object)

HASH_FORMAT_VERSION = 1
MAX_DEPTH = C_MAX_DEPTH
MAX_MEMBERS = 1 << 20
INLINE_MAX = 128
_REPR_MAX = 80

_int_base = int.__int__
_str_base = str.__str__
_set_iter = set.__iter__
_frozenset_iter = frozenset.__iter__

cdef enum:
    C_INLINE_MAX = 128
    STACK_BUF = 4096
    C_MAX_MEMBERS = 1 << 20
    NOGIL_MIN = 1 << 20

cdef enum SegKind:
    SEG_INDEX = 0
    SEG_VALUE = 1
    SEG_KEY = 2
    SEG_ITEM = 3

ctypedef struct Ctx:
    unsigned char* buf
    Py_ssize_t len
    Py_ssize_t cap
    bint buf_heap
    PyObject* strip          # borrowed; NULL when nothing is stripped
    PyObject* default        # borrowed; NULL when no converter
    bint fast_ok             # strip is NULL or a frozenset of exact str: the fast walk applies
    Py_ssize_t nopen         # containers currently being encoded
    Py_ssize_t members       # container members walked so far (bounded by MAX_MEMBERS)
    PyObject* anc[C_MAX_DEPTH]
    Py_ssize_t seg_index[C_MAX_DEPTH]
    PyObject* seg_key[C_MAX_DEPTH]
    unsigned char seg_kind[C_MAX_DEPTH]


# ---------------------------------------------------------------- arena primitives

cdef inline void _tag_u32(Ctx* c, unsigned char tag, uint32_t v) noexcept:
    cdef unsigned char* p = c.buf + c.len
    p[0] = tag
    v = XXH_readLE32(&v)
    memcpy(p + 1, &v, 4)
    c.len += 5


cdef inline void _tag_u64(Ctx* c, unsigned char tag, uint64_t v) noexcept:
    cdef unsigned char* p = c.buf + c.len
    p[0] = tag
    v = XXH_readLE64(&v)
    memcpy(p + 1, &v, 8)
    c.len += 9


cdef inline void _tag_u32_bytes(Ctx* c, unsigned char tag, const char* data, Py_ssize_t n) noexcept:
    loopcore_put_blob(c.buf + c.len, tag, data, <size_t>n)
    c.len += 5 + n


cdef int _grow(Ctx* c, Py_ssize_t need) except -1:
    cdef Py_ssize_t cap = c.cap * 2
    cdef unsigned char* nb
    while cap < need:
        cap *= 2
    if c.buf_heap:
        nb = <unsigned char*>realloc(c.buf, cap)
        if nb == NULL:
            raise MemoryError()
    else:
        nb = <unsigned char*>malloc(cap)
        if nb == NULL:
            raise MemoryError()
        memcpy(nb, c.buf, c.len)
        c.buf_heap = True
    c.buf = nb
    c.cap = cap
    return 0


cdef inline int _reserve(Ctx* c, Py_ssize_t extra) except -1:
    if c.len + extra > c.cap:
        _grow(c, c.len + extra)
    return 0


cdef inline void _u8(Ctx* c, unsigned char v) noexcept:
    c.buf[c.len] = v
    c.len += 1


cdef inline void _u32(Ctx* c, uint32_t v) noexcept:
    v = XXH_readLE32(&v)   # identity on little-endian hosts, a byte swap elsewhere
    memcpy(c.buf + c.len, &v, 4)
    c.len += 4


cdef inline void _u64(Ctx* c, uint64_t v) noexcept:
    v = XXH_readLE64(&v)
    memcpy(c.buf + c.len, &v, 8)
    c.len += 8


# ---------------------------------------------------------------- errors with a path

import reprlib as _reprlib


class _Repr(_reprlib.Repr):
    def repr_instance(self, x, level):  # let a failing __repr__ raise: _safe_repr names the type
        return repr(x)


_repr = _Repr()
_repr.maxlevel = 3
_repr.maxstring = _repr.maxother = _REPR_MAX


def _safe_repr(obj):
    """A bounded repr for error paths (the twin's): never recurses deeply, never raises. A
    __repr__ that hashes again starts at MAX_DEPTH: scalars hash, containers raise at once."""
    global loopcore_hash_base, loopcore_hash_callbacks
    cdef Py_ssize_t saved = loopcore_hash_base
    loopcore_hash_base = C_MAX_DEPTH
    loopcore_hash_callbacks += 1
    try:
        text = _repr.repr(obj)
    except Exception:
        return f"<{type(obj).__name__}>"
    finally:
        loopcore_hash_base = saved
        loopcore_hash_callbacks -= 1
    if len(text) > _REPR_MAX:
        text = text[: _REPR_MAX - 3] + "..."
    return text


cdef object _path(Ctx* c):
    cdef Py_ssize_t i
    parts = ["value"]
    for i in range(c.nopen):
        kind = c.seg_kind[i]
        if kind == SEG_INDEX:
            parts.append(f"[{c.seg_index[i]}]")
        elif kind == SEG_VALUE:
            key = <object>c.seg_key[i]
            if isinstance(key, str):
                parts.append("[" + _json.dumps(_str_base(key), ensure_ascii=False) + "]")
            else:
                parts.append(f"[{_safe_repr(key)}]")
        elif kind == SEG_KEY:
            parts.append(f"[{_safe_repr(<object>c.seg_key[i])}]")
        else:
            parts.append("{" + _safe_repr(<object>c.seg_key[i]) + "}")
    return "".join(parts)


cdef int _fail(Ctx* c, type exc_type, str message) except -1:
    # A key that failed is named by the segment of the dict that holds it.
    if c.nopen and c.seg_kind[c.nopen - 1] == SEG_KEY:
        message = "unsupported dict key: " + message
    raise exc_type(f"canonical_hash: {message} at {_path(c)}")


# ---------------------------------------------------------------- scalars

cdef int _enc_bigint(Ctx* c, object v) except -1:
    cdef bytes m
    cdef Py_ssize_t n
    neg = v < 0
    mag = -v if neg else v
    m = mag.to_bytes((mag.bit_length() + 7) // 8, "little")
    n = PyBytes_GET_SIZE(m)
    _reserve(c, 6 + n)
    _u8(c, b"I")
    _u8(c, b"-" if neg else b"+")
    _u32(c, <uint32_t>n)
    memcpy(c.buf + c.len, PyBytes_AS_STRING(m), n)
    c.len += n
    return 0


cdef inline int _enc_i64(Ctx* c, int64_t v) except -1:
    _reserve(c, 9)
    _tag_u64(c, b"i", <uint64_t>v)
    return 0


cdef inline int _enc_int(Ctx* c, object v) except -1:
    cdef int overflow = 0
    cdef long long x = PyLong_AsLongLongAndOverflow(v, &overflow)
    if overflow:
        # an exact int copy of the base storage: a subclass's __int__/__neg__/__lt__ never run
        return _enc_bigint(c, v if PyLong_CheckExact(v) else _int_base(v))
    # x == -1 is a legal value: the call cannot fail for an int, so no error check is needed
    return _enc_i64(c, x)


cdef int _enc_double(Ctx* c, double x) except -1:
    cdef uint64_t bits
    if isnan(x):
        bits = 0x7ff8000000000000ULL
    elif isinf(x) or floor(x) != x:
        memcpy(&bits, &x, 8)
    elif -9223372036854775808.0 <= x < 9223372036854775808.0:
        return _enc_i64(c, <int64_t>x)
    else:
        return _enc_bigint(c, PyLong_FromDouble(x))
    _reserve(c, 9)
    _tag_u64(c, b"d", bits)
    return 0


cdef int _enc_big_blob(Ctx* c, unsigned char big, const char* p, Py_ssize_t n, bint immutable,
                       object owner) except -1:
    cdef uint64_t h
    cdef object keep
    if immutable and n >= NOGIL_MIN and owner is not None:
        keep = owner  # no-cython-lint (our own strong reference keeps the buffer alive without the GIL)
        with nogil:
            h = loopcore_xxh3_large(p, n)
    else:
        h = loopcore_xxh3_digest(p, n)
    _reserve(c, 17)
    _tag_u64(c, big, <uint64_t>n)
    _u64(c, h)
    return 0


cdef inline int _enc_blob(Ctx* c, unsigned char small, unsigned char big,
                          const char* p, Py_ssize_t n, bint immutable, object owner) except -1:
    if n > C_INLINE_MAX:
        return _enc_big_blob(c, big, p, n, immutable, owner)
    _reserve(c, 5 + n)
    _tag_u32_bytes(c, small, p, n)
    return 0


cdef inline int _enc_str(Ctx* c, object s) except -1:
    if PyUnicode_IS_COMPACT_ASCII(s):
        # ASCII is its own UTF-8: read the characters in place
        return _enc_blob(c, b"s", b"S", <const char*>PyUnicode_1BYTE_DATA(s), PyUnicode_GET_LENGTH(s), True, s)
    return _enc_str_utf8(c, s)


cdef int _enc_str_utf8(Ctx* c, object s) except -1:
    cdef Py_ssize_t n
    cdef const char* p
    cdef bytes b
    p = PyUnicode_AsUTF8AndSize(s, &n)
    if p != NULL:
        return _enc_blob(c, b"s", b"S", p, n, True, s)
    # Lone surrogates cannot be strict UTF-8; pass them through, as the twin does.
    PyErr_Clear()
    b = PyUnicode_AsEncodedString(s, b"utf-8", b"surrogatepass")
    return _enc_blob(c, b"s", b"S", PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b), True, b)


# ---------------------------------------------------------------- containers

cdef inline int _open(Ctx* c, object v, Py_ssize_t depth) except -1:
    """Return 1 if container *v* is already open (a cycle), else 0; check the depth."""
    cdef Py_ssize_t i
    cdef PyObject* p = <PyObject*>v
    for i in range(c.nopen):
        if c.anc[i] == p:
            return 1
    if depth >= C_MAX_DEPTH:
        _fail(c, ValueError, f"nesting deeper than {C_MAX_DEPTH} levels")
    return 0


cdef inline int _push(Ctx* c, object v, Py_ssize_t n) except -1:
    """Count the *n* members of container *v* against MAX_MEMBERS, then push it."""
    c.members += n
    if c.members > C_MAX_MEMBERS:
        _fail(c, ValueError, f"more than {C_MAX_MEMBERS} container members in one value")
    c.anc[c.nopen] = <PyObject*>v
    c.nopen += 1
    return 0


cdef int _enc_list(Ctx* c, object v, Py_ssize_t depth) except -1:
    cdef Py_ssize_t i, n, slot
    cdef bint is_list = PyList_Check(v)
    if _open(c, v, depth):
        _reserve(c, 1)
        _u8(c, b"c")
        return 0
    n = PyList_GET_SIZE(v) if is_list else PyTuple_GET_SIZE(v)
    _push(c, v, n)
    slot = c.nopen - 1
    c.seg_kind[slot] = SEG_INDEX
    _reserve(c, 5)
    _tag_u32(c, b"l", <uint32_t>n)
    i = 0
    if is_list:
        # re-read the size every round: a default= callback may shrink the list
        while i < PyList_GET_SIZE(v):
            item = <object>PyList_GET_ITEM(v, i)
            c.seg_index[slot] = i
            _enc_value(c, item, depth + 1)
            i += 1
    else:
        while i < n:
            c.seg_index[slot] = i
            _enc(c, <object>PyTuple_GET_ITEM(v, i), depth + 1)
            i += 1
    c.nopen -= 1
    return 0


ctypedef struct Range:
    Py_ssize_t off
    Py_ssize_t n


cdef inline int _cmp_range(const unsigned char* buf, Range a, Range b) noexcept nogil:
    # bytewise order, a proper prefix first: the order of Python's bytes comparison
    cdef Py_ssize_t m = a.n if a.n < b.n else b.n
    cdef int r = memcmp(buf + a.off, buf + b.off, m)
    if r != 0:
        return r
    return (a.n > b.n) - (a.n < b.n)


cdef void _sort_ranges(const unsigned char* buf, Range* a, Range* tmp, Py_ssize_t n) noexcept nogil:
    """Stable sort of byte ranges: insertion sort when short, bottom-up merge sort otherwise."""
    cdef Py_ssize_t width, lo, mid, hi, i, j, k
    cdef Range v
    cdef Range* src = a
    cdef Range* dst = tmp
    cdef Range* sw
    if n <= 16:
        for i in range(1, n):
            v = a[i]
            j = i - 1
            while j >= 0 and _cmp_range(buf, a[j], v) > 0:
                a[j + 1] = a[j]
                j -= 1
            a[j + 1] = v
        return
    width = 1
    while width < n:
        lo = 0
        while lo < n:
            mid = lo + width if lo + width < n else n
            hi = lo + 2 * width if lo + 2 * width < n else n
            i = lo
            j = mid
            k = lo
            while i < mid and j < hi:
                if _cmp_range(buf, src[j], src[i]) < 0:
                    dst[k] = src[j]
                    j += 1
                else:
                    dst[k] = src[i]
                    i += 1
                k += 1
            while i < mid:
                dst[k] = src[i]
                i += 1
                k += 1
            while j < hi:
                dst[k] = src[j]
                j += 1
                k += 1
            lo = hi
        sw = src
        src = dst
        dst = sw
        width *= 2
    if src != a:
        memcpy(a, src, n * sizeof(Range))


cdef class _RangeList:
    """Growable array of member ranges for one container on the general (sorting) path."""
    cdef Range* r
    cdef Py_ssize_t n, cap

    def __cinit__(self):
        self.cap = 16
        self.n = 0
        self.r = <Range*>malloc(2 * self.cap * sizeof(Range))
        if self.r == NULL:
            raise MemoryError()

    def __dealloc__(self):
        free(self.r)

    cdef int push(self, Py_ssize_t off) except -1:
        cdef Range* nr
        if self.n == self.cap:
            nr = <Range*>realloc(self.r, 4 * self.cap * sizeof(Range))
            if nr == NULL:
                raise MemoryError()
            self.r = nr
            self.cap *= 2
        self.r[self.n].off = off
        self.r[self.n].n = 0
        self.n += 1
        return 0


cdef int _sort_members(Ctx* c, _RangeList lst, Py_ssize_t start) except -1:
    """Reorder the members recorded in *lst* (they fill arena[start:len]) bytewise."""
    cdef Py_ssize_t n = lst.n
    cdef Py_ssize_t i, end = c.len, total, pos
    cdef Range* r = lst.r
    cdef bint in_order = True
    cdef unsigned char* scratch
    for i in range(n):
        r[i].n = (r[i + 1].off if i + 1 < n else end) - r[i].off
        if i and in_order and _cmp_range(c.buf, r[i - 1], r[i]) > 0:
            in_order = False
    if in_order:
        return 0
    _sort_ranges(c.buf, r, r + lst.cap, n)
    total = end - start
    _reserve(c, total)
    scratch = c.buf + end
    pos = 0
    for i in range(n):
        memcpy(scratch + pos, c.buf + r[i].off, r[i].n)
        pos += r[i].n
    memcpy(c.buf + start, scratch, total)
    return 0


cdef inline void _put_count(Ctx* c, Py_ssize_t at, Py_ssize_t count) noexcept:
    cdef uint32_t n = <uint32_t>count
    n = XXH_readLE32(&n)
    memcpy(c.buf + at, &n, 4)


ctypedef struct KeyEntry:
    PyObject* key            # owned references while the entry lives
    PyObject* value
    const char* data
    Py_ssize_t n


cdef inline int _cmp_key(const KeyEntry* a, const KeyEntry* b) noexcept nogil:
    # order of the encoded keys 's' + u32 LE length + bytes, all lengths <= INLINE_MAX < 256:
    # the first length byte decides, so (length, bytes) is the bytewise order
    if a.n != b.n:
        return -1 if a.n < b.n else 1
    return memcmp(a.data, b.data, a.n)


cdef enum:
    FAST_KEYS = 32


cdef inline int _snap(KeyEntry* e, Py_ssize_t n, PyObject* kp, PyObject* vp) noexcept:
    """Take one pair into the fast path's snapshot (a strong reference to each), or return 1
    when the dict is not for the fast path (too many keys, a key that is not a short ASCII str;
    a long key is digested, and the general path orders those)."""
    cdef Py_ssize_t klen
    if n == FAST_KEYS or not (PyUnicode_CheckExact(<object>kp) and PyUnicode_IS_COMPACT_ASCII(<object>kp)):
        return 1
    klen = PyUnicode_GET_LENGTH(<object>kp)
    if klen > C_INLINE_MAX:
        return 1
    Py_INCREF(<object>kp)
    Py_INCREF(<object>vp)
    e[n].key = kp
    e[n].value = vp
    e[n].data = <const char*>PyUnicode_1BYTE_DATA(<object>kp)
    e[n].n = klen
    return 0


cdef int _enc_dict_str_keys(Ctx* c, object v, Py_ssize_t depth, Py_ssize_t slot) except -1:
    """Dicts whose keys are all short ASCII/UTF-8 str (almost every tool payload): sort the
    keys first, then stream the pairs in order - no member moves. Returns 1 if not applicable.

    The pairs are copied (strong references) before ``strip`` is consulted: a membership test
    can run Python code (see the audit at the top)."""
    cdef KeyEntry stack_e[FAST_KEYS]
    cdef KeyEntry* e = stack_e
    cdef KeyEntry tmp
    cdef bint drop[FAST_KEYS]
    cdef Py_ssize_t size = PyDict_Size(v), pos = 0, n = 0, kept, i, j
    cdef PyObject* kp
    cdef PyObject* vp
    cdef PyObject** ents
    cdef Py_ssize_t nent = 0, saved
    cdef int rc = 0
    global loopcore_hash_base, loopcore_hash_callbacks
    if size > FAST_KEYS:
        return 1
    # 1. the snapshot: no Python code runs in these loops (the entries read in place where
    # the layout is known, else PyDict_Next; the same pairs in the same order either way)
    ents = loopcore_dict_entries(v, &nent)
    if ents != NULL:
        for pos in range(nent):
            vp = ents[2 * pos + 1]
            if vp != NULL:
                rc = _snap(e, n, ents[2 * pos], vp)
                if rc:
                    break
                n += 1
    else:
        while PyDict_Next(v, &pos, &kp, &vp):
            rc = _snap(e, n, kp, vp)
            if rc:
                break
            n += 1
    try:
        if rc:
            return 1
        # 2. strip (may run Python code: only our copies are read from here on); the array is
        # compacted only once every test has returned, so an exception leaves it whole
        if c.strip != NULL:
            saved = loopcore_hash_base
            loopcore_hash_base = depth + 2  # a __hash__/__eq__ that hashes again continues the depth
            loopcore_hash_callbacks += 1
            try:
                for i in range(n):
                    drop[i] = PySet_Contains(<object>c.strip, <object>e[i].key)
            finally:
                loopcore_hash_base = saved
                loopcore_hash_callbacks -= 1
            kept = 0
            for i in range(n):
                if drop[i]:
                    Py_DECREF(<object>e[i].key)
                    Py_DECREF(<object>e[i].value)
                else:
                    e[kept] = e[i]
                    kept += 1
            n = kept
        _push(c, v, size)
        for i in range(1, n):
            tmp = e[i]
            j = i - 1
            while j >= 0 and _cmp_key(&e[j], &tmp) > 0:
                e[j + 1] = e[j]
                j -= 1
            e[j + 1] = tmp
        _reserve(c, 5)
        _tag_u32(c, b"m", <uint32_t>n)
        c.seg_kind[slot] = SEG_VALUE
        for i in range(n):
            _reserve(c, 5 + e[i].n)
            _tag_u32_bytes(c, b"s", e[i].data, e[i].n)
            c.seg_key[slot] = e[i].key
            _enc_value(c, <object>e[i].value, depth + 1)
        return 0
    finally:
        for i in range(n):
            Py_DECREF(<object>e[i].key)
            Py_DECREF(<object>e[i].value)


def _pair_key_bytes(kv):
    """The encoded key of a (str key, value) pair: the sort key of a str-keyed dict."""
    b = PyUnicode_AsEncodedString(kv[0], b"utf-8", b"surrogatepass")
    n = len(b)
    if n <= C_INLINE_MAX:
        return b"s" + n.to_bytes(4, "little") + b
    return b"S" + n.to_bytes(8, "little") + _xxh3_bytes(b).to_bytes(8, "little")


cdef uint64_t _xxh3_raw(bytes b):
    return loopcore_xxh3_large(PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b))


def _xxh3_bytes(bytes b):
    return _xxh3_raw(b)


cdef int _enc_pair(Ctx* c, _RangeList members, Py_ssize_t slot, object key, object val,
                   Py_ssize_t depth) except -1:
    c.seg_key[slot] = <PyObject*>key
    members.push(c.len)
    c.seg_kind[slot] = SEG_KEY
    _enc(c, key, depth + 1)
    c.seg_kind[slot] = SEG_VALUE
    _enc(c, val, depth + 1)
    return 0


cdef enum:
    GENERAL_FAST_DEPTH = 3


cdef int _fast(Ctx* c, object v, int budget) except -1:
    """1 when the fast walk (see loopcore_fw_value) encoded *v* at the arena's end, 0 when
    *v* is not for it (nothing written). *budget*: containers deep it may go."""
    cdef loopcore_fw w
    cdef int r
    w.buf = c.buf
    w.len = c.len
    w.cap = c.cap
    w.heap = c.buf_heap
    w.strip = c.strip
    w.anc = c.anc
    w.nanc = c.nopen
    w.members = 0
    w.max_members = C_MAX_MEMBERS - c.members  # past it the general path raises, naming it
    w.nopen = 0
    try:
        r = loopcore_fw_value(&w, v, budget)
    finally:
        c.buf = w.buf  # grown or not, the arena is the walk's now
        c.cap = w.cap
        c.buf_heap = w.heap
    if r:
        return 0
    c.len = w.len
    c.members += w.members
    return 1


cdef int _enc_dict(Ctx* c, object v, Py_ssize_t depth) except -1:
    cdef Py_ssize_t slot, count_at
    cdef _RangeList members
    cdef list items
    cdef bint all_str = True
    cdef Py_ssize_t saved, budget
    global loopcore_hash_base, loopcore_hash_callbacks
    if _open(c, v, depth):
        _reserve(c, 1)
        _u8(c, b"c")
        return 0
    # a few levels at most from here: a subtree that is not for the fast walk is walked
    # again below, so each member is walked at most GENERAL_FAST_DEPTH + 1 times
    budget = C_MAX_DEPTH - depth  # containers nested from here that the limit allows
    if budget > GENERAL_FAST_DEPTH:
        budget = GENERAL_FAST_DEPTH
    if c.fast_ok and _fast(c, v, <int>budget):
        return 0
    slot = c.nopen  # the slot _push will fill
    if _enc_dict_str_keys(c, v, depth, slot) == 0:
        c.nopen -= 1
        return 0
    # general path: any key types. The snapshot (owned pairs, the storage's iteration order)
    # is taken before strip or default= can run Python code; see the audit at the top.
    items = PyDict_Items(v)
    _push(c, v, len(items))
    if c.strip != NULL:
        saved = loopcore_hash_base
        loopcore_hash_base = depth + 2  # as in the fast path
        loopcore_hash_callbacks += 1
        try:
            items = [kv for kv in items if not PySet_Contains(<object>c.strip, (<tuple>kv)[0])]
        finally:
            loopcore_hash_base = saved
            loopcore_hash_callbacks -= 1
    for kv in items:
        if not PyUnicode_Check((<tuple>kv)[0]):
            all_str = False
            break
    if all_str:
        items.sort(key=_pair_key_bytes)  # encoded-key order, as the twin (same first failure)
    members = _RangeList()
    _reserve(c, 5)
    _u8(c, b"m")
    count_at = c.len
    c.len += 4
    for kv in items:
        _enc_pair(c, members, slot, (<tuple>kv)[0], (<tuple>kv)[1], depth)
    _put_count(c, count_at, members.n)
    _sort_members(c, members, count_at + 4)
    c.nopen -= 1
    return 0


cdef int _enc_set(Ctx* c, object v, Py_ssize_t depth) except -1:
    cdef Py_ssize_t slot, count_at
    cdef _RangeList members
    cdef list snap
    if _open(c, v, depth):
        _reserve(c, 1)
        _u8(c, b"c")
        return 0
    # the base type's iterator (an __iter__ override never runs), copied before any callback
    snap = list(_frozenset_iter(v) if PyFrozenSet_Check(v) else _set_iter(v))
    _push(c, v, len(snap))
    slot = c.nopen - 1
    members = _RangeList()
    c.seg_kind[slot] = SEG_ITEM
    _reserve(c, 5)
    _u8(c, b"e")
    count_at = c.len
    c.len += 4
    for item in snap:
        c.seg_key[slot] = <PyObject*>item
        members.push(c.len)
        _enc(c, item, depth + 1)
    _put_count(c, count_at, members.n)
    _sort_members(c, members, count_at + 4)
    c.nopen -= 1
    return 0


# ---------------------------------------------------------------- dispatch

cdef inline int _enc_value(Ctx* c, object v, Py_ssize_t depth) except -1:
    # members of dicts and lists are mostly short ASCII strings and small ints: encode those
    # right here and leave the full dispatch (and its call) to everything else
    cdef Py_ssize_t n
    cdef int overflow = 0
    cdef long long x
    if PyUnicode_CheckExact(v) and PyUnicode_IS_COMPACT_ASCII(v):
        n = PyUnicode_GET_LENGTH(v)
        if n <= C_INLINE_MAX:
            _reserve(c, 5 + n)
            _tag_u32_bytes(c, b"s", <const char*>PyUnicode_1BYTE_DATA(v), n)
            return 0
    elif PyLong_CheckExact(v):
        x = PyLong_AsLongLongAndOverflow(v, &overflow)
        if not overflow:
            _reserve(c, 9)
            _tag_u64(c, b"i", <uint64_t>x)
            return 0
    return _enc(c, v, depth)


cdef int _enc(Ctx* c, object v, Py_ssize_t depth) except -1:
    # exact types first (the common case), then subclasses with their base meaning
    t = type(v)
    if t is str:
        return _enc_str(c, v)
    if t is dict:
        return _enc_dict(c, v, depth)
    if t is int:
        return _enc_int(c, v)
    if t is list or t is tuple:
        return _enc_list(c, v, depth)
    if t is float:
        return _enc_double(c, PyFloat_AS_DOUBLE(v))
    if v is None:
        _reserve(c, 1)
        _u8(c, b"n")
        return 0
    if v is True:
        _reserve(c, 1)
        _u8(c, b"t")
        return 0
    if v is False:
        _reserve(c, 1)
        _u8(c, b"f")
        return 0
    if PyLong_Check(v):
        return _enc_int(c, v)
    if PyFloat_Check(v):
        return _enc_double(c, PyFloat_AsDouble(v))
    if PyUnicode_Check(v):
        return _enc_str(c, v)
    if PyBytes_Check(v):
        return _enc_blob(c, b"b", b"B", PyBytes_AS_STRING(v), PyBytes_GET_SIZE(v), True, v)
    if PyByteArray_Check(v):
        return _enc_blob(c, b"b", b"B", PyByteArray_AS_STRING(v), PyByteArray_GET_SIZE(v), False, None)
    if PyList_Check(v) or PyTuple_Check(v):
        return _enc_list(c, v, depth)
    if PyDict_Check(v):
        return _enc_dict(c, v, depth)
    if PyAnySet_Check(v):
        return _enc_set(c, v, depth)
    global loopcore_hash_base, loopcore_hash_callbacks
    cdef Py_ssize_t saved
    if c.default != NULL:
        if depth + 1 >= C_MAX_DEPTH:  # checked before the call: a recursing converter stops here
            _fail(c, ValueError, f"nesting deeper than {C_MAX_DEPTH} levels (default= conversions count)")
        saved = loopcore_hash_base
        loopcore_hash_base = depth + 2  # a re-entrant canonical_hash continues this depth
        loopcore_hash_callbacks += 1
        try:
            converted = (<object>c.default)(v)
        finally:
            loopcore_hash_base = saved
            loopcore_hash_callbacks -= 1
        return _enc(c, converted, depth + 1)
    return _fail(c, TypeError, f"unsupported type {type(v).__name__!r}")


cdef object _str_strip = None    # the last strip found to hold only exact str (kept alive,
cdef object _other_strip = None  # so its id is not reused) and the last found not to


cdef bint _str_only(object strip):
    """True when *strip* is a frozenset of exact str: testing a str key against it runs no
    Python code (str hashing and equality are C), so the fast walk may run."""
    global _str_strip, _other_strip
    if strip is _str_strip:
        return True
    if strip is _other_strip or type(strip) is not frozenset:
        return False
    for k in strip:
        if type(k) is not str:
            _other_strip = strip
            return False
    _str_strip = strip
    return True


cdef object _strip_set(object strip):
    if strip is None:
        return None
    if isinstance(strip, (str, bytes)):
        raise TypeError("strip must be a collection of keys, not a single string")
    if isinstance(strip, frozenset):
        return strip
    return frozenset(strip)


cdef int _run(Ctx* c, object value, object strip, object default, Py_ssize_t base) except -1:
    # c.buf/c.cap/c.buf_heap are set by the caller (a stack buffer, or the heap when nested);
    # *base* is loopcore_hash_base as _compute read it (only while a callback runs somewhere:
    # a thread-local costs a call to read)
    c.len = 0
    c.nopen = 0
    c.members = 0
    c.strip = NULL if strip is None else <PyObject*>strip
    c.default = NULL if default is None else <PyObject*>default
    c.fast_ok = strip is None or _str_only(strip)
    return _enc(c, value, base)


cdef inline void _release(Ctx* c) noexcept:
    if c.buf_heap:
        free(c.buf)


cdef object _nested(object value, object strip, object default, uint64_t* out, bint want_bytes,
                    Py_ssize_t base):
    """A call made from inside a default= converter: the Ctx lives on the heap (see the audit)."""
    cdef Ctx* c = <Ctx*>malloc(sizeof(Ctx))
    result = None
    if c == NULL:
        raise MemoryError()
    c.buf = NULL
    c.buf_heap = False
    try:
        c.buf = <unsigned char*>malloc(STACK_BUF)
        if c.buf == NULL:
            raise MemoryError()
        c.buf_heap = True
        c.cap = STACK_BUF
        _run(c, value, strip, default, base)
        if want_bytes:
            result = PyBytes_FromStringAndSize(<char*>c.buf, c.len)
        else:
            out[0] = loopcore_xxh3_digest(c.buf, c.len)
    finally:
        _release(c)
        free(c)
    return result


cdef object _top(object value, object strip, object default, uint64_t* out, bint want_bytes):
    # a top-level call starts at depth 0 (loopcore_hash_base is 0 outside any callback)
    """A top-level call: the Ctx and the first arena block live on the C stack."""
    cdef Ctx c
    cdef unsigned char stack_buf[STACK_BUF]
    cdef loopcore_fw w
    result = None
    if strip is None or _str_only(strip):
        # a JSON-like value of short ASCII keys (nearly every tool payload) needs none of the
        # general machinery: the fast walk (see loopcore_fw_value); anything else, or deeper
        # than LOOPCORE_FAST_DEPTH, takes the general path from the start
        w.buf = stack_buf
        w.len = 0
        w.cap = STACK_BUF
        w.heap = False
        w.strip = NULL if strip is None else <PyObject*>strip
        w.anc = NULL
        w.nanc = 0
        w.members = 0
        w.max_members = C_MAX_MEMBERS
        w.nopen = 0
        try:
            if loopcore_fw_value(&w, value, LOOPCORE_FAST_DEPTH) == 0:
                if want_bytes:
                    return PyBytes_FromStringAndSize(<char*>w.buf, w.len)
                out[0] = loopcore_xxh3_digest(w.buf, w.len)
                return None
        finally:
            if w.heap:
                free(w.buf)
    c.buf = stack_buf
    c.cap = STACK_BUF
    c.buf_heap = False
    try:
        _run(&c, value, strip, default, 0)
        if want_bytes:
            result = PyBytes_FromStringAndSize(<char*>c.buf, c.len)
        else:
            out[0] = loopcore_xxh3_digest(c.buf, c.len)
    finally:
        _release(&c)
    return result


cdef bint _short_str(object s, uint64_t* out) noexcept:
    """A short ASCII str alone (a call id): its 's' encoding on the stack, digested."""
    cdef unsigned char small[5 + C_INLINE_MAX]
    cdef Py_ssize_t n
    if not PyUnicode_IS_COMPACT_ASCII(s):
        return False
    n = PyUnicode_GET_LENGTH(s)
    if n > C_INLINE_MAX:
        return False
    loopcore_put_blob(small, b"s", <const char*>PyUnicode_1BYTE_DATA(s), <size_t>n)
    out[0] = loopcore_xxh3_digest(small, <size_t>(5 + n))
    return True


cdef inline object _compute(object value, object strip, object default, uint64_t* out, bint want_bytes):
    # the two paths are separate functions so that a nested call's frame holds no Ctx
    cdef Py_ssize_t base
    if not want_bytes and PyUnicode_CheckExact(value) and _short_str(value, out):
        return None
    base = loopcore_hash_base if loopcore_hash_callbacks else 0
    if base:
        return _nested(value, strip, default, out, want_bytes, base)
    return _top(value, strip, default, out, want_bytes)


cdef int hash_into(object value, object strip, object default, uint64_t* out) except -1:
    # The C entry other compiled modules cimport (loopcore/_native_hashing.pxd beside this
    # file declares it): the guard hashes every call's args and outcome with no Python call
    # and no argument parsing. *strip* must be None or a frozenset; otherwise the same as
    # canonical_hash.
    _compute(value, strip, default, out, False)
    return 0


# The in-place dict walk is switched on only if a dict built here reads as the layout it
# expects (see loopcore_dict_selfcheck); otherwise every dict is walked with PyDict_Next.
_k0, _k1, _v0, _v1 = "selfcheck_a", "selfcheck_b", object(), object()
if LOOPCORE_FLAT_INLINE != C_INLINE_MAX or LOOPCORE_FLAT_NOGIL != NOGIL_MIN:
    raise ImportError("loopcore._native_hashing: the flat-dict constants disagree")
_DICT_IN_PLACE = bool(loopcore_dict_selfcheck({_k0: _v0, _k1: _v1}, _k0, _v0, _k1, _v1))
del _k0, _k1, _v0, _v1


@cython.binding(False)  # a plain builtin function: the cheapest call CPython has
def canonical_hash(value, *, strip=None, default=None):
    """Unsigned 64-bit XXH3 hash of *value*'s JSON meaning (format HASH_FORMAT_VERSION).

    Key order, 1 vs 1.0, -0.0 vs 0.0, NaN payloads and tuple vs list never change it; ``strip``
    drops dict keys at every depth. Raises TypeError (unsupported type, unless ``default``
    converts it) or ValueError (nesting deeper than MAX_DEPTH, more than MAX_MEMBERS members),
    naming the path.
    """
    cdef uint64_t h
    if strip is not None:
        strip = _strip_set(strip)
    _compute(value, strip, default, &h, False)
    return h


@cython.binding(False)
def canonical_bytes(value, *, strip=None, default=None):
    """The canonical byte encoding that canonical_hash digests (see loopcore._hashing_py).

    Raises TypeError for unsupported types and ValueError for nesting deeper than MAX_DEPTH
    or more than MAX_MEMBERS members, both naming the path.
    """
    if strip is not None:
        strip = _strip_set(strip)
    return _compute(value, strip, default, NULL, True)
