# The guard engine's parameters, by name: the one C declaration of them. Its Python mirror is
# loopcore._guard_params.PARAM_NAMES (same names, same order; tests/test_guard_params.py checks it).
# Every field is an int; 0 switches a threshold off, flags are 0/1 (see loopcore._guard_params).
from libc.stdint cimport int64_t

cdef struct Params:
    int64_t window
    int64_t generic_warn
    int64_t generic_block
    int64_t poll_warn
    int64_t poll_block
    int64_t cycle_warn
    int64_t cycle_block
    int64_t cycle_periods_mask
    int64_t cycle_counts_repeats
    int64_t cycle_block_needs_no_progress
    int64_t repeat_warn
    int64_t repeat_block
    int64_t repeat_block_needs_no_progress
    int64_t global_block
    int64_t unknown_block
    int64_t error_warn
    int64_t error_block
    int64_t redundant_warn
    int64_t monologue_block
    int64_t argument_churn
    int64_t error_any_text
    int64_t repeat_reset_after_block
    int64_t repeat_warn_once
    int64_t budget_warn_once
    int64_t compaction_window
    int64_t monologue_any_text
    int64_t context_block
    int64_t repeat_warn_needs_no_progress
    int64_t cycle_evidence_recent
