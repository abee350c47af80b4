# What loopcore._native_hashing exports to the other compiled modules (`from
# loopcore._native_hashing cimport ...`): the canonical hash as a C call, no Python call and no
# argument parsing. The file sits at the module's qualified path so Cython binds it to that
# extension (src/_native/hashing.pyx).
from libc.stdint cimport uint64_t

# canonical_hash(value, strip=strip, default=default) into *out: 0, or -1 with the exception set.
# *strip* must be None or a frozenset.
ctypedef int (*hash_into_t)(object value, object strip, object default, uint64_t* out) except -1

cdef int hash_into(object value, object strip, object default, uint64_t* out) except -1
