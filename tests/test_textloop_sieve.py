"""The compiled content-loop scan's early-out (the sieve), crossed against the pure twin.

The compiled twin proves, before it builds any chunk chain, that no position of an epoch can loop
(see the sieve's comment in src/_native/textloop.pyx); it analyses an epoch only once that proof
fails. These tests aim at the edges of that proof: loops just at the threshold (10 occurrences,
250 characters apart on average, the largest gap a loop allows), loops whose chunks run across the
junction of two kept pieces around a divider or a fenced block, loops past the 5,000-character
history and across 2,048-character slices, 1-, 2- and 4-byte str storage, str subclasses, and
streams cut at random places. Whenever the pure twin finds a loop the sieve must not have ruled it
out, and both twins must give the same answers. The texts are this project's own.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopcore import _native_flag
from loopcore import _textloop_py as P

C = None if _native_flag.NO_EXTENSIONS else _native_flag.load_twin("textloop", "c")
needs_c = pytest.mark.skipif(C is None, reason="LOOPCORE_NO_EXTENSIONS=1")


def fresh(n: int, tag: str = "a") -> str:
    """n characters of text in which no 50-character chunk repeats (numbered words)."""
    out, size, k = [], 0, 0
    while size < n:
        out.append(f"{tag}{k:05d} ")
        size += len(out[-1])
        k += 1
    return "".join(out)[:n]


def cross(text: str, cuts: list[int] | None = None) -> list[tuple[int, int]]:
    """Both twins on *text*, whole and streamed; returns the spans (which the twins agree on).

    Without the compiled twin only the pure one runs (the expectations still hold for it)."""
    spans = P.repeated_spans(text)
    for chunks in ([text], _cut(text, cuts or [])):
        dp = P.TextLoopDetector()
        fed = [dp.feed(c) for c in chunks]
        if len(chunks) == 1:  # fed whole, a text loops just when it has spans
            assert fed == [bool(spans)]
        if C is not None:
            dc = C.TextLoopDetector()
            assert [dc.feed(c) for c in chunks] == fed
            assert (dc.detected, dc.chunk, dc.fed) == (dp.detected, dp.chunk, dp.fed)
    if C is not None:
        assert C.repeated_spans(text) == spans
        if spans:
            assert C._sieve_hot(text) is True
            assert C._sieve_hot(text, second=True) is True
    return spans


def _cut(text: str, cuts: list[int]) -> list[str]:
    pos = sorted({c % (len(text) + 1) for c in cuts})
    out, last = [], 0
    for p in pos + [len(text)]:
        out.append(text[last:p])
        last = p
    return out


UNIT = "The cache is warm now, so the next read is cheap. "  # 50 characters


# --- the thresholds the proof leans on --------------------------------------------------------


@pytest.mark.parametrize("period,loops", [(250, True), (251, False)])
def test_ten_copies_at_the_largest_average_distance(period, loops):
    # ten copies of one 50-character unit, each followed by the same filler: every chunk recurs
    # with period *period*; 9 * 250 = 2250 is the most the newest 10 may span
    filler = fresh(period - 50, "f")
    text = (UNIT + filler) * 10 + UNIT[:1]
    assert bool(cross(text, [777, 1500])) is loops


@pytest.mark.parametrize("gap,loops", [(2242, True), (2243, False)])
def test_the_largest_gap_between_two_occurrences(gap, loops):
    # nine occurrences of a 50-character run one position apart, then a tenth *gap* later: the
    # newest 10 span 8 + gap <= 2250 only for gap <= 2242 (two distinct periods: not a list)
    run = "z" * 58  # "z" * 50 at positions 0..8
    middle = fresh(gap - 50, "m")  # never 50 z's in a row
    text = run + middle + "z" * 50
    assert text.index("z" * 50, 9) == 8 + gap
    spans = cross(text, [3000, 60])
    assert bool(spans) is loops


@pytest.mark.parametrize("near", [50, 100, 242])
@pytest.mark.parametrize("lead", range(8))
def test_one_close_pair_is_enough(near, lead):
    # ten copies of a unit with fresh text around each: one gap of *near* characters and eight
    # of more than 250 (the 9 gaps sum to at most 2250, so this is a loop), so that only the 43
    # grams of one copy recur within 250 characters; *lead* shifts where the sieve's queries fall
    x = "Q" + fresh(50, "u")[1:]
    assert len(x) == 50
    far = (2250 - near) // 8
    assert far > 250
    short = fresh(near - 50, "s")
    long_ = fresh(far - 50, "w")
    text = fresh(lead, "p") + x + short + x + "".join(long_ + x for _ in range(8)) + "."
    assert cross(text, [lead + 120])


@needs_c
def test_ten_copies_are_hot_and_one_copy_is_cold():
    assert cross(UNIT * 9, [50]) == []
    assert cross(UNIT * 10, [50]) == [(50, 500)]
    assert C._sieve_hot(UNIT * 10) is True
    assert C._sieve_hot(UNIT * 10, second=True) is True
    # nine copies close together: the first sieve sees close pairs, the second rules them out
    assert C._sieve_hot(UNIT * 9) is True
    assert C._sieve_hot(UNIT * 9, second=True) is False
    assert C._sieve_hot(fresh(300) + UNIT + fresh(300, "b")) is False


@needs_c
def test_ordinary_text_is_ruled_out_without_chains():
    # the early-out does happen: prose, lists, tables and code with no loop are cold
    rnd = random.Random(3)
    words = "we read the file then check each value and write a short note about it".split()
    lines = []
    for i in range(400):
        k = rnd.random()
        body = " ".join(rnd.choice(words) for _ in range(rnd.randint(5, 18)))
        if k < 0.7:
            lines.append(f"{body.capitalize()} (step {i}).\n")
        elif k < 0.85:
            lines.append(f"- {body} {i}\n")
        elif k < 0.9:
            lines.append(f"| {i} | {body} |\n")
        else:
            lines.append(f"```\nx_{i} = f({i})\n```\n")
    text = "".join(lines)
    assert C._sieve_hot(text) is False
    assert C._sieve_hot(text, second=True) is False
    assert cross(text, [1000, 9000, 20000]) == []
    assert C._sieve_hot(fresh(50_000)) is False


# --- junctions, fences, dividers and clears ---------------------------------------------------


DIVIDERS = ["=====\n", "\u2500" * 12 + "\n", "___\n", "*=*=\n", "  ==  \n", "\u2550\n"]


@pytest.mark.parametrize("turn", range(3))
def test_chunks_across_a_skipped_divider(turn):
    # each line is 30 characters; the 50-character chunks that loop run across the junction of
    # two kept lines, with a divider left out between them -- a different one each time, so only
    # the kept text (not the text around it) repeats
    a, b = "alpha beta gamma delta epsilo\n", "zeta eta theta iota kappa lam\n"
    assert len(a) == len(b) == 30
    text = "".join(
        a + DIVIDERS[(i + turn) % 6] + b + DIVIDERS[(i * 5 + turn) % 6] for i in range(12)
    )
    assert cross(text, [31, 95, 400])
    # the same with unbroken lines of 7 characters: every chunk spans several junctions
    text = "".join(f"ab{i % 2}cde\n" + DIVIDERS[i % 6] for i in range(200))
    assert cross(text, [8, 9, 10])


@pytest.mark.parametrize("block", ["```\ncode inside\n```\n", "```\n```\n", "``````\n"])
def test_fenced_blocks_between_copies(block):
    # a fence clears the history: copies on either side never meet
    a, b = "alpha beta gamma delta epsilo\n", "zeta eta theta iota kappa lam\n"
    text = "".join(a + block + b + block for _ in range(12))
    cross(text, [31, 95, 400])
    text = block + (a + b) * 10 + block + (a + b) * 10
    assert cross(text, [5, 700])


def test_a_fence_or_an_element_between_copies_clears_them():
    for clear in ("```\n", "# heading\n", "- item\n", "| a | b |\n"):
        text = UNIT * 9 + "\n" + clear + UNIT * 9 + "\n"
        assert cross(text, [450, 460]) == []
        text = UNIT * 9 + "\n" + clear + UNIT * 10 + "\n"
        assert cross(text, [450, 461]) != [] or clear == "```\n"


# --- long texts: the history, slices, and several loops ----------------------------------------


@pytest.mark.parametrize("lead", [0, 2040, 2047, 2048, 2049, 4990, 5000, 5001, 7000, 12_345])
def test_loops_after_a_long_lead(lead):
    text = fresh(lead) + UNIT * 11 + fresh(3000, "t") + UNIT * 12
    spans = cross(text, [lead + 7, lead + 260, 2048, 4096])
    assert spans


def test_a_loop_in_a_long_single_line_and_in_lines():
    body = fresh(9000) + ("we loop here, " * 60) + fresh(5000, "q")
    assert cross(body, [100, 9000, 9100])
    lines = "\n".join(body[i : i + 80] for i in range(0, len(body), 80))
    cross(lines, [5000])


def test_two_loops_in_separate_epochs():
    text = UNIT * 12 + "\n# next\n" + fresh(500) + "\n" + ("Other words go round. " * 30)
    spans = cross(text, [600, 601])
    assert len(spans) >= 2


# --- storage kinds and subclasses ---------------------------------------------------------------


@pytest.mark.parametrize("first", [0x41, 0xC0, 0x100, 0x4E00, 0xFF00, 0x10000, 0x1F300, 0x10FF00])
def test_kinds_and_folded_characters(first):
    unit = "".join(chr(first + i) for i in range(50))
    assert cross(unit * 10, [17]) == [(50, 500)]
    assert cross(unit * 9 + "x", [17]) == []
    # characters that fold to the same byte (c and c ^ 0x101) only share buckets
    twins = "".join(chr((first + i) ^ 0x101) for i in range(50))
    cross((unit + twins) * 6, [101])
    cross("ascii lead\n" + unit * 11, [5])


class Loud(str):
    def __len__(self):  # never called: the base storage is what is read
        raise AssertionError("subclass method called")

    __getitem__ = __iter__ = find = count = __len__


@needs_c
def test_str_subclasses():
    text = UNIT * 12 + fresh(100)
    assert C.repeated_spans(Loud(text)) == P.repeated_spans(text) != []
    assert C._sieve_hot(Loud(text)) is True
    assert C._sieve_hot(Loud(text), second=True) is True
    assert C.repeated_spans(Loud(fresh(3000))) == []
    det = C.TextLoopDetector()
    assert det.feed(Loud(text)) is True


@needs_c
def test_non_str_is_a_type_error():
    with pytest.raises(TypeError):
        C._sieve_hot(b"bytes")


# --- generated near-loops -----------------------------------------------------------------------

alphabet = st.sampled_from(
    list("abcde fgh.,\n-#|`=*") + ["\u00e9", "\u2500", "\u4e00", "\U0001f600"]
)
unit_text = st.text(alphabet, min_size=1, max_size=70)
fillers = st.lists(
    st.sampled_from(["", " ", "\n", "x ", "yy\n", "=====\n", "```\n", "- item\n", "## h\n", "zz"]),
    min_size=1,
    max_size=6,
)


@st.composite
def near_loops(draw):
    unit = draw(unit_text)
    reps = draw(st.integers(8, 12))
    fill = draw(fillers)
    lead = draw(st.sampled_from([0, 0, 10, 300, 2040, 4980, 5100]))
    tail = draw(st.sampled_from([0, 5, 200]))
    picks = draw(st.lists(st.integers(0, len(fill) - 1), min_size=reps, max_size=reps))
    body = "".join(unit + fill[k] for k in picks)
    return fresh(lead, "L") + body + fresh(tail, "T")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(near_loops(), st.lists(st.integers(0, 10**6), max_size=10))
def test_near_loops_cross(text, cuts):
    cross(text, cuts)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(unit_text, st.integers(1, 14)), min_size=1, max_size=5),
    st.lists(st.integers(0, 10**6), max_size=10),
)
def test_runs_of_units_cross(parts, cuts):
    cross("".join(u * n for u, n in parts), cuts)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(0, 10**6), min_size=1, max_size=40), st.integers(0, 3))
def test_streams_in_random_chunkings(cuts, which):
    # a long reply with a loop late in it, fed in many small and large chunks
    texts = [
        fresh(6000) + UNIT * 12,
        fresh(3000) + "\n=====\n".join([UNIT] * 12),
        fresh(2500) + ("```\nblock\n```\n" + UNIT) * 11,
        fresh(4000) + "".join(chr(0x4E00 + i % 50) for i in range(600)),
    ]
    text = texts[which]
    cross(text, [c % (len(text) + 1) for c in cuts])


@needs_c
def test_detector_reuse_after_reset_and_across_replies():
    det, ref = C.TextLoopDetector(), P.TextLoopDetector()
    for reply in (fresh(4000) + UNIT * 10, fresh(800), UNIT * 9, UNIT * 10, fresh(6000, "r")):
        for c in _cut(reply, [13, 500, 2100]):
            assert det.feed(c) == ref.feed(c)
        assert (det.detected, det.chunk, det.fed) == (ref.detected, ref.chunk, ref.fed)
        det.reset()
        ref.reset()


@needs_c
def test_hostile_sizes_do_not_hang():
    # a big text of one repeated character, and one with the largest code point: answers agree
    # with the pure twin on a prefix and finish quickly in the compiled twin
    big = "a" * 2_000_000
    spans = C.repeated_spans(big)
    assert spans == [(1, len(big))]
    wide = chr(0x10FFFF) * 300
    assert C.repeated_spans(wide) == P.repeated_spans(wide) == [(1, 300)]
    assert C._sieve_hot(fresh(1_000_000)) is False
