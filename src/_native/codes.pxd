# The integer codes the compiled kernels share: the one C declaration of each. Their Python
# mirror is loopcore._codes (same names, same values; tests/test_codes.py checks it). Only
# enums and inline helpers live here, so a `cimport codes` costs no import at run time.

cdef enum:
    # Step kinds: loopcore.trace.KINDS in order, then the events the guard keeps in its window.
    # The burn columns (EncodedTrace.kind, stored parts), the guard and the shell classifier all
    # use this layout; guard state dumps keep their own (see kind_to_stored).
    K_OBSERVE = 0
    K_MUTATE = 1
    K_EXEC = 2
    K_ASK = 3
    K_OTHER = 4
    K_USER = 5
    K_COMPACTION = 6
    K_CONDENSATION = 7
    N_STEP_KINDS = 5  # the kinds a Step may have (K_OBSERVE..K_OTHER)

cdef enum:
    # Burn finding codes: the kernels write them into the finding column (0 = not charged);
    # loopcore.encoded.FINDING_KINDS[code - 1] names each.
    FIND_REDUNDANT = 1
    FIND_DUPLICATE = 2
    FIND_OSCILLATION = 3
    FIND_QUESTION = 4
    FIND_REJECTED = 5
    FIND_DEGENERATE = 6
    N_FINDING_KINDS = 6

cdef enum:
    # Step flags (the EncodedTrace.flags column, stored parts too).
    S_HAS_OUTCOME = 1  # the step recorded a result or an error
    S_ERROR = 2  # the step failed
    S_ESTIMATED = 4  # its tokens were estimated
    S_REJECTED = 8  # the harness rejected the action: nothing ran
    S_ABSOLUTE = 16  # a write of a whole known content
    S_NO_OP = 32  # a mutation that provably changes nothing
    S_BACKUP = 64  # copies its one read file into a backup (cp F F.orig)
    S_RESTORE = 128  # sets its one written file to a backup's or its committed content
    S_AFTER_USER = 256  # a user's message came just before it: nothing earlier is evidence
    S_EXIT_NONZERO = 512  # it ran and its command exited non-zero: it may have applied nothing

cdef enum:
    # Guard window flags (one byte per slot of a session's ring; state dumps hold them).
    G_HAS = 1  # the call's outcome is recorded
    G_ERROR = 2
    G_UNKNOWN = 4  # the harness said the tool does not exist
    G_BARRIER = 8

cdef enum:
    # Guard detector codes (loopcore.policy.DETECTORS names them; loopcore.decision renders them).
    D_UNKNOWN = 1
    D_GLOBAL = 2
    D_POLL = 3
    D_CYCLE = 4
    D_REPEAT = 5
    D_MONOLOGUE = 6
    D_GENERIC = 7
    D_ERROR = 8
    D_BUDGET = 9
    D_REDUNDANT = 10
    D_COMPACTION = 11
    D_CONTEXT = 12
    D_CONTENT = 13

cdef enum:
    # How deep the canonical hash (and the guard's walks over a result) follow containers.
    MAX_DEPTH = 256


cdef inline int kind_to_stored(int k) noexcept nogil:
    # A guard state dump keeps the kind layout it has always had (other=0, observe=1, mutate=2,
    # exec=3, ask=4, events unchanged), so snapshots of every format restore as they were.
    if k == K_OTHER:
        return 0
    if k < K_OTHER:
        return k + 1
    return k


cdef inline int kind_from_stored(int s) noexcept nogil:
    # The inverse of kind_to_stored, for every value (a dump round-trips byte for byte).
    if s == 0:
        return K_OTHER
    if s <= K_OTHER:
        return s - 1
    return s
