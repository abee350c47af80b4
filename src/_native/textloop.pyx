"""Compiled content-loop detector (loopcore._native_textloop): the twin of loopcore._textloop_py.

Same rules, same results; see the pure twin's module doc for them. What differs is how chunks
are found: a polynomial rolling hash over code points (mod 2**64) picks a bucket of hash chains
(zlib's match finder), a hash hit is confirmed by comparing the 50 code points, and each position
links to the previous occurrence of its chunk, so the newest 10 occurrences are 9 link steps
away. Positions are absolute stream offsets that only grow; the history is a code-point buffer
holding at least the newest MAX_HISTORY characters, and anything older than its start is dead
(never read, never deleted), so truncation, a clear and a reset cost nothing.

Nearly no reply loops, so the chains are built only where a loop is possible: a sieve over
8-character grams (one 16-bit store per character, a lookup every 4th) proves for each epoch
(the stretch between two clears) that no chunk in it can reach LOOP_THRESHOLD occurrences close
enough together, until the epoch turns "hot" (see the sieve's comment below for the proof).
repeated_spans answers [] from the sieve alone when no epoch of the text is hot (or, on a short
text the first sieve leaves hot, when a second, sharper one finds none); the core, for
the streaming form and for the rest of repeated_spans, analyses an epoch from the slice in which
it turns hot (see _Core._add for why that finds the same loops).

Memory safety: the text is read from the str's own storage (PyUnicode_DATA, any kind); the sieve
reads it in place, the core copies it into its buffer before any analysis. The only calls into
Python while a pointer into a str is live are allocations in repeated_spans (a GC pass may run
any code), and the str is held by the call then, so its storage stays put; the call's core is
its own (a re-entered call makes another). Every ring is larger than the history
(POS_RING > MAX_HISTORY), so a live position's slot is never reused while it is live.
"""
from cpython.mem cimport PyMem_Calloc, PyMem_Free, PyMem_Malloc
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memchr, memcmp, memcpy, memmove

__all__ = [
    "CHUNK_SIZE",
    "LOOP_THRESHOLD",
    "MAX_AVG_DISTANCE",
    "MAX_HISTORY",
    "MAX_PERIODS",
    "SLICE",
    "TextLoopDetector",
    "repeated_spans",
]

cdef extern from "Python.h":
    int PyUnicode_KIND(object)
    void* PyUnicode_DATA(object)
    Py_ssize_t PyUnicode_GET_LENGTH(object)
    int PyUnicode_1BYTE_KIND
    int PyUnicode_2BYTE_KIND
    object PyUnicode_FromKindAndData(int kind, const void* buffer, Py_ssize_t size)
    int PyUnicode_4BYTE_KIND


cdef enum:
    CS = 50  # CHUNK_SIZE
    LT = 10  # LOOP_THRESHOLD
    MAXD = 250  # MAX_AVG_DISTANCE
    MAXP = 5  # MAX_PERIODS
    HIST = 5000  # MAX_HISTORY
    SL = 2048  # SLICE
    CAP = 4 * HIST + SL  # code points held by the buffer before it is compacted
    POS_RING = 8192  # > HIST: per-position links and hash, indexed by position % POS_RING
    TABLE_BITS = 13
    TABLE = 8192  # hash buckets (power of two, 2 ** TABLE_BITS)

CHUNK_SIZE = CS
LOOP_THRESHOLD = LT
MAX_AVG_DISTANCE = MAXD
MAX_PERIODS = MAXP
MAX_HISTORY = HIST
SLICE = SL

cdef uint64_t BASE = 0x100000001B3ULL
cdef uint64_t MIX = 0x9E3779B97F4A7C15ULL


cdef struct Text:
    # a str's own storage: 1, 2 or 4 bytes a code point (PEP 393); read only under the GIL
    int kind
    const void* data


cdef inline Text _text_of(object s) noexcept:
    cdef Text t
    t.kind = PyUnicode_KIND(s)
    t.data = PyUnicode_DATA(s)
    return t


cdef inline uint32_t _rd(Text t, Py_ssize_t i) noexcept nogil:
    if t.kind == 1:
        return (<const uint8_t*>t.data)[i]
    if t.kind == 2:
        return (<const uint16_t*>t.data)[i]
    return (<const uint32_t*>t.data)[i]


cdef inline bint _blank(uint32_t c) noexcept nogil:
    return c == 32 or c == 9 or c == 13 or c == 12 or c == 11


cdef inline bint _ws(uint32_t c) noexcept nogil:
    return c == 10 or _blank(c)


cdef inline bint _divider(uint32_t c) noexcept nogil:
    return c == 45 or c == 95 or c == 61 or c == 42 or c == 43 or (0x2500 <= c < 0x2580)


cdef inline bint _tablech(uint32_t c) noexcept nogil:
    return c == 124 or c == 43 or c == 45


cdef inline Py_ssize_t _line_end(Text t, Py_ssize_t s, Py_ssize_t n) noexcept nogil:
    # the index just past the next newline at or after s, or n
    cdef const char* hit
    if t.kind == 1:
        hit = <const char*>memchr(<const char*>t.data + s, 10, <size_t>(n - s))
        return n if hit == NULL else (hit - <const char*>t.data) + 1
    while s < n:
        if _rd(t, s) == 10:
            return s + 1
        s += 1
    return n


cdef Py_ssize_t _fences(Text t, Py_ssize_t s, Py_ssize_t e) noexcept nogil:
    # non-overlapping ``` (a run of k backticks holds k // 3), as JavaScript's /```/g counts
    cdef Py_ssize_t count = 0, run
    cdef const char* hit
    while s < e:
        if t.kind == 1:
            hit = <const char*>memchr(<const char*>t.data + s, 96, <size_t>(e - s))
            if hit == NULL:
                break
            s = hit - <const char*>t.data
        elif _rd(t, s) != 96:
            s += 1
            continue
        run = 0
        while s < e and _rd(t, s) == 96:
            run += 1
            s += 1
        count += run // 3
    return count


cdef bint _is_divider(Text t, Py_ssize_t s, Py_ssize_t e) noexcept nogil:
    cdef bint seen = False
    cdef uint32_t c
    while s < e:
        c = _rd(t, s)
        if _divider(c):
            seen = True
        elif not _ws(c):
            return False
        s += 1
    return seen


cdef bint _is_element(Text t, Py_ssize_t s, Py_ssize_t e) noexcept nogil:
    cdef Py_ssize_t i = s, j
    cdef uint32_t c
    if s == e:
        return False
    c = _rd(t, s)
    if c == 35:  # '#'
        j = s + 1
        while j < e and _rd(t, j) == 35:
            j += 1
        return j < e and _ws(_rd(t, j))
    if c == 62:  # '>'
        return s + 1 < e and _ws(_rd(t, s + 1))
    while i < e and _blank(_rd(t, i)):
        i += 1
    if i == e:
        return False
    c = _rd(t, i)
    if c == 124:  # '|' ... '|'
        j = i + 1
        while j < e:
            if _rd(t, j) == 124:
                return True
            j += 1
        return False
    if _tablech(c) and i + 2 < e and _tablech(_rd(t, i + 1)) and _tablech(_rd(t, i + 2)):
        return True
    if c == 42 or c == 43 or c == 45:
        return i + 1 < e and _ws(_rd(t, i + 1))
    j = i
    while j < e and 48 <= _rd(t, j) <= 57:
        j += 1
    return j > i and j + 1 < e and _rd(t, j) == 46 and _ws(_rd(t, j + 1))


cdef struct Judge:
    # the markdown state machine of the pure twin's _Pieces
    bint line_start
    bint in_code


cdef enum:
    CLEAR = 1  # _judge: clear the history before the piece
    ADD = 2  # _judge: add the piece to the history


cdef inline int _judge(Judge* jd, Text t, Py_ssize_t s, Py_ssize_t e) noexcept nogil:
    # (CLEAR, ADD) bits for the next piece t[s:e], as _Pieces.judge
    return _judge_fenced(jd, t, s, e, _fences(t, s, e))


cdef inline Py_ssize_t _next_tick(Text t, Py_ssize_t s, Py_ssize_t n) noexcept nogil:
    # a lower bound of the next backtick at or after s (n when there is none): exact for a
    # 1-byte text, s itself otherwise
    cdef const char* hit
    if t.kind != 1:
        return s
    hit = <const char*>memchr(<const char*>t.data + s, 96, <size_t>(n - s))
    return n if hit == NULL else hit - <const char*>t.data


cdef int _judge_fenced(Judge* jd, Text t, Py_ssize_t s, Py_ssize_t e, Py_ssize_t fences) noexcept nogil:
    # _judge with the piece's fence count already known
    cdef bint at_start = jd.line_start
    cdef bint was = jd.in_code
    cdef int verdict = 0
    jd.line_start = e > s and _rd(t, e - 1) == 10
    if fences or (at_start and _is_element(t, s, e)):
        verdict = CLEAR
    if fences & 1:
        jd.in_code = not jd.in_code
    if not (was or jd.in_code or _is_divider(t, s, e)):
        verdict |= ADD
    return verdict


# --- the sieve: an exact proof that no position can loop --------------------------------------
#
# Let K be the kept characters in order (the added pieces joined, the skipped ones left out) and
# count positions along K. Every history is a stretch of K inside one epoch (what was added since
# the last clear), so a history chunk is K[p:p+50], even one across the junction of two kept pieces
# with a skipped piece between them. A loop found at p9 means one 50-character string X at
# positions p0 < p1 < ... < p9 of one epoch with p9 - p0 <= MAXD * (LT - 1) = 2250; of its nine
# gaps the smallest, p(k+1) - p(k), is at most NEAR = 2250 / 9 = 250.
#
# Take the 8-character grams of K, each at the position of its last character: X holds 43 of them
# (RUN), at offsets 7..49. Each gram of the copy at p(k+1) also sits at most 250 positions earlier
# in the copy at p(k), in the same epoch. The sieve stores every position in the bucket of its
# gram's hash (positions are stored in order, so a bucket holds the latest one that landed in it)
# and, at a queried position e, reads the bucket first: for e among p(k+1) + 7 .. p(k+1) + 49 the
# latest position there lies in [e - 250, e - 1] (p(k) + offset was stored; anything stored later is
# later still), so e - latest is in 1 .. 250 and the query is "near". Queried are the characters at
# offsets 0, 4, 8, ... of each stretch of K passed to the sieve, so two queried positions one after
# the other along K are at most 4 apart, across a junction too, and any 43 consecutive positions
# hold at least NEED = 43 // 4 = 10 queries in a row. A loop therefore needs, in one epoch, a run of
# NEED near queries one after the other: an epoch is "hot" once it has one. Until an epoch is hot no
# position of it can loop, so nothing needs the chunk chains: repeated_spans answers [] when no
# epoch is hot, and the core analyses an epoch only once it is hot (see _Core._add for why
# analysing late finds the same loops).
#
# Whatever else is in a bucket (another gram with the same hash, a position from an older epoch or
# an earlier call, a 16-bit position that has wrapped, the grams at an epoch's start that reach back
# before it) can only turn a query near, never the reverse, so the table needs no reset. Wider code
# points are folded to a byte before they enter the gram (equal characters fold alike). A clear
# moves the position on past NEAR and restarts the run, which keeps epochs apart (that only
# sharpens the sieve; the proof does not need it).

ctypedef fused cp_t:
    uint8_t
    uint16_t
    uint32_t

cdef enum:
    RUN = CS - 8 + 1  # 43 grams of 8 characters in a chunk
    NEAR = MAXD  # the smallest of LT - 1 gaps that sum to at most MAXD * (LT - 1)
    STRIDE = 4  # a query every STRIDE characters
    NEED = 10  # RUN // STRIDE: queries in a row inside any RUN consecutive positions
    SIEVE_BITS = 12
    SIEVE = 4096  # buckets (2 ** SIEVE_BITS) of 16-bit positions: 8 KB

# NEED is written out because Cython 3.3 crashes compiling // in an enum when cdivision is off
# (the debug build); the import checks it against its definition.
if NEED != RUN // STRIDE:
    raise RuntimeError("textloop: NEED must be RUN // STRIDE")


cdef struct Sieve:
    uint16_t pos     # position of the next kept character (mod 2 ** 16)
    uint32_t pos32   # the second sieve's: 16 * position (mod 2 ** 32)
    uint64_t g       # the last 8 characters (folded), the newest in the high byte
    int run          # near queries in a row
    uint16_t* tab    # [SIEVE] latest positions


cdef inline void _sieve_epoch(Sieve* v) noexcept nogil:
    # a clear: the next kept character starts a new epoch (for either sieve)
    v.pos += NEAR + 1
    v.pos32 += (FAR + 1) << CNT_BITS
    v.run = 0


cdef inline uint32_t _bucket(uint64_t g) noexcept nogil:
    return <uint32_t>((g * MIX) >> (64 - SIEVE_BITS))


cdef inline bint _near(uint16_t pos, uint16_t latest) noexcept nogil:
    # pos - latest (mod 2 ** 16) in 1 .. NEAR
    return <uint16_t>(pos - latest - 1) < NEAR


cdef extern from *:
    """
    /* The 8 bytes p[0:8] as a little-endian number (p[7] in the high byte), at any alignment. */
    static inline uint64_t loopcore_load_le64(const uint8_t* p) {
        uint64_t x;
        memcpy(&x, p, 8);
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        x = __builtin_bswap64(x);
    #endif
        return x;
    }
    """
    uint64_t _load8 "loopcore_load_le64"(const uint8_t* p) noexcept nogil


cdef bint _sieve_run(Sieve* v, const cp_t* d, Py_ssize_t n) noexcept nogil:
    # Pass the kept characters d[0:n] through the sieve; True once the epoch is hot (the pass stops
    # there: a hot epoch needs no more sieving). The gram ending at d[i] is d[i-7:i+1] with d[i] in
    # the high byte: read straight from a 1-byte text, shifted in otherwise (and for the first
    # characters, whose gram reaches back into what came before).
    cdef uint16_t* tab = v.tab
    cdef uint16_t pos = v.pos, latest
    cdef uint64_t g = v.g
    cdef uint32_t c, b0, b1, b2, b3
    cdef int run = v.run
    cdef Py_ssize_t i = 0, head = n
    if cp_t is uint8_t:
        if head > 8:
            head = 8
    while i < head:
        c = d[i]
        if cp_t is not uint8_t:
            c = (c ^ (c >> 8) ^ (c >> 16)) & 0xFF
        g = (g >> 8) | (<uint64_t>c << 56)
        b0 = _bucket(g)
        if i % STRIDE == 0:
            run = (run + 1) & -<int>_near(pos, tab[b0])
            if run >= NEED:
                v.pos = pos  # the epoch is hot: nothing more is sieved until the next clear
                v.run = run
                return True
        tab[b0] = pos
        pos += 1
        i += 1
    if cp_t is uint8_t:
        # i == 8 here when n > 8: four grams a round, the first one queried
        while i + STRIDE <= n:
            b0 = _bucket(_load8(d + i - 7))
            b1 = _bucket(_load8(d + i - 6))
            b2 = _bucket(_load8(d + i - 5))
            b3 = _bucket(_load8(d + i - 4))
            latest = tab[b0]
            tab[b0] = pos
            tab[b1] = <uint16_t>(pos + 1)
            tab[b2] = <uint16_t>(pos + 2)
            tab[b3] = <uint16_t>(pos + 3)
            run = (run + 1) & -<int>_near(pos, latest)
            pos += STRIDE
            i += STRIDE
            if run >= NEED:
                v.pos = pos  # the epoch is hot: nothing more is sieved until the next clear
                v.run = run
                return True
        if i < n:  # the last 1 .. 3 grams, the first one queried
            b0 = _bucket(_load8(d + i - 7))
            run = (run + 1) & -<int>_near(pos, tab[b0])
            if run >= NEED:
                v.pos = pos  # the epoch is hot: nothing more is sieved until the next clear
                v.run = run
                return True
            while i < n:
                tab[_bucket(_load8(d + i - 7))] = pos
                pos += 1
                i += 1
        if n >= 8:
            g = _load8(d + n - 8)
    v.pos = pos
    v.g = g
    v.run = run
    return False


cdef inline bint _sieve(Sieve* v, Text t, Py_ssize_t s, Py_ssize_t e) noexcept nogil:
    if t.kind == 1:
        return _sieve_run(v, <const uint8_t*>t.data + s, e - s)
    if t.kind == 2:
        return _sieve_run(v, <const uint16_t*>t.data + s, e - s)
    return _sieve_run(v, <const uint32_t*>t.data + s, e - s)


# repeated_spans' sieve table, kept across calls: whatever it holds only turns queries near, so
# it needs no reset; each call starts its positions past the last call's
cdef uint16_t _spans_tab[SIEVE]
cdef uint16_t _spans_pos = 0


cdef bint _may_loop(Text t, Py_ssize_t n, bint second) noexcept nogil:
    # False when a sieve (the first, or the second when *second*) proves that no position of the
    # whole text t[0:n] can loop. Pieces kept one after the other are sieved as one stretch (both
    # sieves take any cut of K), and a piece's fences are counted only when a backtick lies in it.
    global _spans_pos, _count_pos
    cdef Judge jd
    cdef Sieve sv
    cdef Sieve* v = &sv
    cdef Py_ssize_t s = 0, e, fences, tick, run_s = 0, run_e = 0
    cdef int verdict
    cdef bint hot = False
    jd.line_start = True
    jd.in_code = False
    sv.tab = _spans_tab
    sv.pos = _spans_pos
    sv.pos32 = _count_pos
    sv.g = 0
    sv.run = 0
    _sieve_epoch(v)
    tick = _next_tick(t, 0, n)
    while s < n:
        e = _line_end(t, s, n)
        fences = 0
        if tick < e:
            fences = _fences(t, s, e)
            tick = _next_tick(t, e, n)
        verdict = _judge_fenced(&jd, t, s, e, fences)
        if verdict & CLEAR:
            if run_e > run_s and _stretch(v, second, t, run_s, run_e):
                hot = True
                break
            run_s = run_e
            _sieve_epoch(v)
        if verdict & ADD:
            if s != run_e:  # a piece was left out since the stretch: sieve it, start anew
                if run_e > run_s and _stretch(v, second, t, run_s, run_e):
                    hot = True
                    break
                run_s = s
            run_e = e
        s = e
    else:
        hot = run_e > run_s and _stretch(v, second, t, run_s, run_e)
    _spans_pos = sv.pos
    _count_pos = sv.pos32
    return hot


cdef inline bint _stretch(Sieve* v, bint second, Text t, Py_ssize_t s, Py_ssize_t e) noexcept nogil:
    if second:
        return _count(v, _count_tab, t, s, e)
    return _sieve(v, t, s, e)


# --- a second sieve, for repeated_spans' texts the first one leaves hot ------------------------
#
# The first sieve asks for one close pair of copies; a loop has ten copies. For each offset
# j = 7..49 the gram of X at offset j lands at p0 + j, ..., p9 + j, in one epoch, consecutive ones
# at most FAR = 2250 - 8 = 2242 apart (the other eight gaps are >= 1 each). A bucket here keeps the
# latest position stored in it and a count: the previous count + 1 (capped at LT) when the new
# position is at most FAR after the latest one, else 1. At each landing p(k) + j, k >= 1, the
# latest position in the bucket is at or after p(k-1) + j (that landing was stored) and before
# p(k) + j, so the count grows by one at each of the ten landings and is LT at p9 + j, whatever
# else the bucket holds. So a loop at p9 needs LT at each of the 43 positions p9 + 7 .. p9 + 49, in
# its epoch: this sieve looks at every position and calls an epoch hot once 43 in a row have LT.
# As for the first sieve, anything else in a bucket (another gram, an older epoch or call, a
# 28-bit position that has wrapped, grams reaching back before the epoch) can only raise counts.

cdef enum:
    FAR = MAXD * (LT - 1) - (LT - 2)  # the largest gap between consecutive copies of a loop
    CNT_BITS = 4  # an entry is (position mod 2 ** 28) * 16 + count (count <= LT < 16)


cdef bint _count_run(Sieve* v, uint32_t* tab, const cp_t* d, Py_ssize_t n) noexcept nogil:
    # Pass the kept characters d[0:n] through the second sieve (v.pos is its position, as 16 *
    # position in an entry's units; v.g and v.run as in the first); True once the epoch is hot.
    cdef uint32_t p16 = <uint32_t>v.pos32, ent, cnt, b, c
    cdef uint64_t g = v.g
    cdef int run = v.run
    cdef Py_ssize_t i
    for i in range(n):
        c = d[i]
        if cp_t is not uint8_t:
            c = (c ^ (c >> 8) ^ (c >> 16)) & 0xFF
        g = (g >> 8) | (<uint64_t>c << 56)
        b = _bucket(g)
        ent = tab[b]
        # p16 - ent = 16 * (pos - latest) - count (mod 2 ** 32): in 1 .. 16 * FAR when
        # pos - latest (mod 2 ** 28) is in 1 .. FAR
        cnt = ent & ((1 << CNT_BITS) - 1)
        cnt = cnt + (cnt < LT) if p16 - ent - 1 < FAR << CNT_BITS else 1
        tab[b] = p16 | cnt
        p16 += 1 << CNT_BITS
        run = run + 1 if cnt == LT else 0
        if run >= RUN:
            v.pos32 = p16
            v.run = run
            return True
    v.pos32 = p16
    v.g = g
    v.run = run
    return False


cdef inline bint _count(Sieve* v, uint32_t* tab, Text t, Py_ssize_t s, Py_ssize_t e) noexcept nogil:
    if t.kind == 1:
        return _count_run(v, tab, <const uint8_t*>t.data + s, e - s)
    if t.kind == 2:
        return _count_run(v, tab, <const uint16_t*>t.data + s, e - s)
    return _count_run(v, tab, <const uint32_t*>t.data + s, e - s)


cdef enum:
    SECOND_MAX = 16384  # repeated_spans runs the second sieve on texts up to this long

cdef uint32_t _count_tab[SIEVE]  # the second sieve's table, kept across calls as the first's
cdef uint32_t _count_pos = 0


cdef class _Core:
    """History, chunk chains and piece state shared by the streaming and whole-text forms.

    Chunks are found the way zlib finds matches: ``head[bucket]`` is the newest position whose
    chunk hash falls in the bucket and ``chain[pos]`` the one before it in that bucket; a walk
    from the head stops at the first position with the same hash and the same 50 code points
    (that is the previous occurrence, ``same[pos]``) or at a position older than the history,
    which is never read again. Nothing is ever deleted: a clear only moves ``base`` up, and
    absolute positions only grow, so a stale entry is simply older than ``base``.
    """
    cdef uint32_t* buf       # code points of absolute positions [phys, total)
    cdef int64_t phys        # absolute position of buf[0]
    cdef int64_t total       # absolute end of the history
    cdef int64_t base        # absolute start of the logical history (newest HIST characters)
    cdef int64_t nxt         # next position to analyse
    cdef int64_t hpos        # position whose chunk hash is in h (-1: none)
    cdef uint64_t h
    cdef uint64_t pow49
    cdef int64_t* head       # [bucket]: newest position in the bucket (-1: none)
    cdef int64_t* chain      # [pos % POS_RING]: previous position in pos's bucket
    cdef int64_t* same       # [pos % POS_RING]: previous occurrence of pos's chunk (-1: none)
    cdef uint64_t* hashes    # [pos % POS_RING]: pos's chunk hash
    cdef Judge jd            # the markdown state of the pieces
    cdef int64_t found_pos   # -1 until a loop is found
    cdef uint32_t found_chunk[CS]
    cdef bint collect
    cdef object marks        # bytearray over absolute positions in collect mode
    cdef int64_t mark_base   # absolute position of marks[0]
    cdef Sieve sv            # the sieve over the kept characters (its own table)
    cdef bint hot            # the sieve found this epoch hot: analyse it

    def __cinit__(self):
        cdef int i
        self.buf = <uint32_t*>PyMem_Malloc(CAP * sizeof(uint32_t))
        self.head = <int64_t*>PyMem_Malloc(TABLE * sizeof(int64_t))
        self.chain = <int64_t*>PyMem_Malloc(POS_RING * sizeof(int64_t))
        self.same = <int64_t*>PyMem_Malloc(POS_RING * sizeof(int64_t))
        self.hashes = <uint64_t*>PyMem_Malloc(POS_RING * sizeof(uint64_t))
        self.sv.tab = <uint16_t*>PyMem_Calloc(SIEVE, sizeof(uint16_t))
        if (self.buf == NULL or self.head == NULL or self.chain == NULL or self.same == NULL
                or self.hashes == NULL or self.sv.tab == NULL):
            raise MemoryError()
        self.sv.pos = 0
        self.sv.pos32 = 0
        self.sv.g = 0
        self.sv.run = 0
        for i in range(TABLE):
            self.head[i] = -1
        self.pow49 = 1
        for i in range(CS - 1):  # no-cython-lint (a counted loop)
            self.pow49 *= BASE
        self.phys = 0
        self.total = 0
        self._reset()

    def __dealloc__(self):
        PyMem_Free(self.buf)
        PyMem_Free(self.head)
        PyMem_Free(self.chain)
        PyMem_Free(self.same)
        PyMem_Free(self.hashes)
        PyMem_Free(self.sv.tab)

    cdef void _reset(self) noexcept:
        # O(1): absolute positions keep growing, so everything older than base is dead
        self._clear()
        self.jd.line_start = True
        self.jd.in_code = False
        self.found_pos = -1
        self.collect = False
        self.marks = None

    cdef void _clear(self) noexcept nogil:
        self.base = self.total
        self.nxt = self.total
        self.hpos = -1
        _sieve_epoch(&self.sv)
        self.hot = False

    cdef void _append(self, Text t, Py_ssize_t s, Py_ssize_t n) noexcept nogil:
        # n <= SL code points from t[s:]. Keep the logical history (and one more: the rolling
        # hash reads pos - 1), widening to 4 bytes a code point.
        cdef int64_t keep_from
        cdef uint32_t* dst
        cdef Py_ssize_t i
        if self.total - self.phys + n > CAP:
            keep_from = self.total + n - HIST - 1
            if keep_from < self.base - 1:
                keep_from = self.base - 1
            if keep_from < self.phys:
                keep_from = self.phys
            memmove(self.buf, self.buf + (keep_from - self.phys),
                    <size_t>(self.total - keep_from) * sizeof(uint32_t))
            self.phys = keep_from
        dst = self.buf + (self.total - self.phys)
        if t.kind == 1:
            for i in range(n):
                dst[i] = (<const uint8_t*>t.data)[s + i]
        elif t.kind == 2:
            for i in range(n):
                dst[i] = (<const uint16_t*>t.data)[s + i]
        else:
            memcpy(dst, <const uint32_t*>t.data + s, <size_t>n * sizeof(uint32_t))
        self.total += n
        if self.total - self.base > HIST:
            self.base = self.total - HIST
            if self.nxt < self.base:
                self.nxt = self.base
                self.hpos = -1

    cdef bint _looping(self, int64_t pos) noexcept nogil:
        cdef int64_t occ[LT]
        cdef int i, j, distinct = 0
        cdef int64_t la, lb, q
        cdef bint dup
        occ[LT - 1] = pos
        for i in range(LT - 2, -1, -1):
            q = self.same[occ[i + 1] & (POS_RING - 1)]
            if q < self.base:  # fewer than LT occurrences in the history
                return False
            occ[i] = q
        if occ[LT - 1] - occ[0] > MAXD * (LT - 1):
            return False
        for i in range(LT - 1):
            la = occ[i + 1] - occ[i]
            dup = False
            for j in range(i):
                lb = occ[j + 1] - occ[j]
                if la == lb and memcmp(self.buf + (occ[i] - self.phys), self.buf + (occ[j] - self.phys),
                                       <size_t>la * sizeof(uint32_t)) == 0:
                    dup = True
                    break
            if not dup:
                distinct += 1
                if distinct > MAXP:
                    return False
        return True

    cdef void _mark(self, int64_t pos) noexcept:
        # collect mode: the window's occurrences after its first are repeats
        cdef unsigned char* m = <unsigned char*><char*>self.marks
        cdef int64_t p = pos
        cdef int i
        for i in range(LT - 1):  # no-cython-lint (a counted loop)
            m[p - self.mark_base] = 1
            p = self.same[p & (POS_RING - 1)]

    cdef bint _analyse(self) noexcept:
        # Locals, not attributes, in the loop: stores through the int64 rings could alias self.
        cdef int64_t pos = self.nxt, q, end = self.total - CS, base = self.base
        cdef int64_t hpos = self.hpos
        cdef uint64_t h = self.h, pow49 = self.pow49
        cdef uint32_t b, r
        cdef int32_t i
        cdef const uint32_t* c
        cdef const uint32_t* buf = self.buf
        cdef int64_t phys = self.phys
        cdef int64_t* head = self.head
        cdef int64_t* chain = self.chain
        cdef int64_t* same = self.same
        cdef uint64_t* hashes = self.hashes
        cdef bint hit = False
        while pos <= end:
            c = buf + (pos - phys)
            if hpos >= 0 and hpos == pos - 1:
                h = (h - (c - 1)[0] * pow49) * BASE + c[CS - 1]
            else:
                h = 0
                for i in range(CS):
                    h = h * BASE + c[i]
            hpos = pos
            b = <uint32_t>((h * MIX) >> (64 - TABLE_BITS))
            q = head[b]
            while q >= base:
                r = <uint32_t>(q & (POS_RING - 1))
                if hashes[r] == h and memcmp(buf + (q - phys), c, CS * sizeof(uint32_t)) == 0:
                    break
                q = chain[r]
            r = <uint32_t>(pos & (POS_RING - 1))
            chain[r] = head[b]
            head[b] = pos
            hashes[r] = h
            if q < base:
                same[r] = -1
            else:
                same[r] = q
                self.nxt = pos
                if self._looping(pos):
                    hit = True
                    if self.found_pos < 0:
                        self.found_pos = pos
                        memcpy(self.found_chunk, c, CS * sizeof(uint32_t))
                    if not self.collect:
                        self.h = h
                        self.hpos = hpos
                        return True
                    self._mark(pos)
            pos += 1
        self.nxt = pos
        self.h = h
        self.hpos = hpos
        return hit

    cdef bint _add(self, Text t, Py_ssize_t s, Py_ssize_t e) noexcept:
        # Append t[s:e] slice by slice; an epoch's positions are analysed only from the slice in
        # which the sieve finds it hot, then in every slice (as the pure twin does from the start).
        # That finds the same loops, marks and first loop: a loop completed at x turns the epoch
        # hot by x + 49 (the sieve's comment), so x is analysed in the same slice either way.
        # Late, positions are analysed in order from nxt, which the history's truncation keeps at
        # or after base: every position still held is entered into the chains, in order, only
        # against a later base. What the chains answer at such an x depends only on occurrences
        # of chunks at most MAXD * (LT - 1) = 2250 before x, and x is analysed in a slice whose
        # history reaches back past x - 2250 (x > total - SL - CS and total - HIST < x - 2250 - CS),
        # so those answers are the same; no position before x - 2250 can complete a loop.
        cdef Py_ssize_t m
        while s < e:
            m = e - s
            if m > SL:
                m = SL
            self._append(t, s, m)
            if not self.hot:
                self.hot = _sieve(&self.sv, t, s, s + m)
            if self.hot and self._analyse() and not self.collect:
                return True
            s += m
        return False

    cdef bint _piece(self, Text t, Py_ssize_t s, Py_ssize_t e) noexcept:
        # Judge the piece t[s:e] (clearing the history when it must); True when it is added.
        cdef int verdict = _judge(&self.jd, t, s, e)
        if verdict & CLEAR:
            self._clear()
        return (verdict & ADD) != 0


cdef class TextLoopDetector:
    """Streaming content-loop detector for one reply (see loopcore._textloop_py for the rules)."""
    cdef _Core core
    cdef int64_t _fed

    def __cinit__(self):
        self.core = _Core()
        self._fed = 0

    def reset(self):
        """Forget everything: a new reply starts (gemini resets on each prompt and tool call)."""
        self.core._reset()
        self._fed = 0

    def feed(self, chunk):
        """Add streamed text; True once a loop has been seen (and on every later call).

        Raises TypeError when *chunk* is not a str.
        """
        cdef Py_ssize_t n, s, e
        cdef Text t
        cdef _Core core = self.core
        if not isinstance(chunk, str):
            raise TypeError(f"chunk must be str, not {type(chunk).__name__}")
        if core.found_pos >= 0:
            return True
        # str subclasses: the base storage is read, no method of theirs is called
        n = PyUnicode_GET_LENGTH(chunk)
        t = _text_of(chunk)
        self._fed += n
        core.jd.line_start = True  # gemini: a streamed chunk's start is a line start too
        s = 0
        while s < n:
            e = _line_end(t, s, n)
            if core._piece(t, s, e) and core._add(t, s, e):
                return True
            s = e
        return False

    @property
    def detected(self):
        """True once a loop has been seen."""
        return self.core.found_pos >= 0

    @property
    def chunk(self):
        """The repeated CHUNK_SIZE-character chunk that completed the loop, or None."""
        if self.core.found_pos < 0:
            return None
        return PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, self.core.found_chunk, CS)

    @property
    def fed(self):
        """Characters fed since the last reset (up to the call that found the loop)."""
        return self._fed


def repeated_spans(text):
    """Character ranges ``[start, end)`` of *text* covered by repeats of a looping chunk.

    Same contract as loopcore._textloop_py.repeated_spans. Raises TypeError for a non-str.
    """
    cdef Py_ssize_t n, s, e, i, a, b, k, nseg = 0, npieces
    cdef Text t
    cdef _Core core
    cdef int64_t* seg_abs = NULL
    cdef int64_t* seg_off = NULL
    cdef int64_t lo, hi, s_abs, s_len, s_off, total
    cdef unsigned char* m
    cdef list out = []
    if not isinstance(text, str):
        raise TypeError(f"text must be str, not {type(text).__name__}")
    n = PyUnicode_GET_LENGTH(text)
    t = _text_of(text)
    # the sieves' proofs: no position can loop (nearly every reply). The first sieve is cheap;
    # the second, sharper, reads the whole text at about three times its cost, so it runs only
    # on a text short enough that this stays below what the core would spend on the text's
    # hot epochs (the core analyses only those)
    if not _may_loop(t, n, False) or (n <= SECOND_MAX and not _may_loop(t, n, True)):
        return out
    core = _take_core()
    try:
        core.collect = True
        core.marks = bytearray(n + 1)  # may run Python code (a GC pass): t stays valid, text is held
        core.mark_base = core.total
        # one segment per added piece at most (a piece ends at a newline), plus a sentinel
        npieces = 1
        s = 0
        while s < n:
            s = _line_end(t, s, n)
            npieces += 1
        seg_abs = <int64_t*>PyMem_Malloc((npieces + 1) * sizeof(int64_t))
        seg_off = <int64_t*>PyMem_Malloc((npieces + 1) * sizeof(int64_t))
        if seg_abs == NULL or seg_off == NULL:
            raise MemoryError()
        s = 0
        while s < n:
            e = _line_end(t, s, n)
            if core._piece(t, s, e):
                seg_abs[nseg] = core.total - core.mark_base
                seg_off[nseg] = s
                nseg += 1
                core._add(t, s, e)
            s = e
        if core.found_pos < 0:
            return out
        total = core.total - core.mark_base
        seg_abs[nseg] = total  # sentinel: the end of the last segment
        # merge [mark, mark + CS) runs over history positions, then map through the segments
        m = <unsigned char*><char*>core.marks
        i = 0
        k = 0
        while i < total:
            if not m[i]:
                i += 1
                continue
            a = i
            b = i + CS
            i += 1
            while i < b and i < total:
                if m[i]:
                    b = i + CS
                i += 1
            while seg_abs[k + 1] <= a:
                k += 1
            while k < nseg and seg_abs[k] < b:
                s_abs = seg_abs[k]
                s_len = seg_abs[k + 1] - s_abs
                s_off = seg_off[k]
                lo = (a if a > s_abs else s_abs) - s_abs + s_off
                hi = (b if b < s_abs + s_len else s_abs + s_len) - s_abs + s_off
                if out and out[len(out) - 1][1] == lo:
                    out[len(out) - 1] = (out[len(out) - 1][0], hi)
                else:
                    out.append((lo, hi))
                if seg_abs[k + 1] <= b:
                    k += 1
                else:
                    break
        return out
    finally:
        PyMem_Free(seg_abs)
        PyMem_Free(seg_off)
        _give_core(core)


cdef _Core _spare = None  # repeated_spans' core between calls (its reset is O(1))


cdef _Core _take_core():
    # The spare core, or a new one when it is in use (a call re-entered through a GC pass while
    # marks were allocated) or not made yet.
    global _spare
    cdef _Core core = _spare
    if core is None:
        return _Core()
    _spare = None
    core._reset()
    return core


cdef void _give_core(_Core core) noexcept:
    global _spare
    core.marks = None
    core.collect = False
    if _spare is None:
        _spare = core


def _sieve_hot(text, second=False):
    """True unless the first sieve (the second when *second*) proves that no position of *text*
    can loop (a test hook: whenever repeated_spans finds a loop this must be True)."""
    if not isinstance(text, str):
        raise TypeError(f"text must be str, not {type(text).__name__}")
    return _may_loop(_text_of(text), PyUnicode_GET_LENGTH(text), bool(second))


def _judgements(text):
    """[(clear, add)] for each piece of *text* (a test hook: the twins must judge alike)."""
    cdef _Core core = _Core()
    cdef Py_ssize_t n, s = 0, e
    cdef Text t
    cdef int64_t before
    cdef bint add
    cdef list out = []
    if not isinstance(text, str):
        raise TypeError(f"text must be str, not {type(text).__name__}")
    n = PyUnicode_GET_LENGTH(text)
    t = _text_of(text)
    while s < n:
        e = _line_end(t, s, n)
        core.total += 1  # a marker: a clear moves base up to total
        before = core.base
        add = core._piece(t, s, e)
        out.append((core.base != before, bool(add)))
        s = e
    return out
