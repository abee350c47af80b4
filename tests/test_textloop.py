"""Content loops ("chanting", after gemini-cli's content-loop rules): both twins, and crossed.

The texts here are this project's own; the shapes follow gemini-cli's content-loop tests (a 50
character unit repeated, fences, tables, lists, headings, dividers between repeats).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopcore import _native_flag

needs_c = pytest.mark.skipif(_native_flag.NO_EXTENSIONS, reason="LOOPCORE_NO_EXTENSIONS=1")

UNIT = "The cache is warm now, so the next read is cheap. "  # 50 characters
assert len(UNIT) == 50
LINE = "I will check the configuration file once more.\n"


def units(n: int, k: int = 0) -> list[str]:
    """n distinct 50-character units (no markdown markers in them)."""
    return [f"Paragraph {k}-{i:04d} says something new about the code. "[:50] for i in range(n)]


def feed_all(tl, chunks):
    det = tl.TextLoopDetector()
    return det, [det.feed(c) for c in chunks]


def test_constants(impl):
    tl = impl.textloop
    assert (
        tl.CHUNK_SIZE,
        tl.LOOP_THRESHOLD,
        tl.MAX_AVG_DISTANCE,
        tl.MAX_PERIODS,
        tl.MAX_HISTORY,
    ) == (50, 10, 250, 5, 5000)


def test_ten_repeats_of_a_chunk_are_a_loop_on_the_tenth(impl):
    det, got = feed_all(impl.textloop, [UNIT] * 10)
    assert got == [False] * 9 + [True]
    assert det.detected and det.chunk == UNIT
    assert det.feed("anything") is True  # stays detected until reset
    det.reset()
    assert not det.detected and det.chunk is None and det.feed(UNIT) is False


def test_nine_repeats_are_not(impl):
    det, got = feed_all(impl.textloop, [UNIT] * 9)
    assert not any(got) and not det.detected


def test_random_text_is_not_a_loop(impl):
    det, got = feed_all(impl.textloop, units(300))
    assert not any(got)
    assert impl.textloop.repeated_spans("".join(units(300))) == []


def test_repeats_far_apart_are_not_a_loop(impl):
    # 10 repeats, each followed by 6 fresh units: 350 characters apart on average (> 250)
    chunks = []
    fresh = iter(units(80))
    for _ in range(10):
        chunks.append(UNIT)
        chunks.extend(next(fresh) for _ in range(6))
    det, got = feed_all(impl.textloop, chunks)
    assert not any(got)


def test_repeats_close_together_with_fillers_are_a_loop(impl):
    chunks = []
    for i in range(10):
        chunks.append(UNIT)
        chunks.append(f"filler {i % 2}. ")  # two distinct periods
    det, got = feed_all(impl.textloop, chunks)
    assert any(got)


def test_shared_prefix_with_distinct_tails_is_not_a_loop(impl):
    # gemini's period rule: more than 5 distinct texts between occurrences = a list, not a loop
    chunks = [UNIT + f"item number {i} differs. " for i in range(12)]
    det, got = feed_all(impl.textloop, chunks)
    assert not any(got)


def test_code_fences_exclude_their_content(impl):
    tl = impl.textloop
    det, got = feed_all(tl, ["```python\n"] + [UNIT] * 20 + ["```\n"])
    assert not any(got)
    text = "Here is the code:\n```\n" + (UNIT + "\n") * 30 + "```\nDone.\n"
    assert tl.repeated_spans(text) == []
    assert tl.TextLoopDetector().feed(text) is False


def test_text_after_a_closed_fence_counts_again(impl):
    det, got = feed_all(impl.textloop, ["```\n", "x = 1\n", "```\n"] + [UNIT] * 10)
    assert got[-1] is True


@pytest.mark.parametrize(
    "marker",
    [
        "| a | b |\n",
        "|---|---|\n",
        "+---+---+\n",
        "  | cell | cell |\n",
        "- item\n",
        "* item\n",
        "+ item\n",
        "12. item\n",
        "   - nested item\n",
        "# Heading\n",
        "### Sub heading\n",
        "> quoted\n",
    ],
)
def test_markdown_elements_clear_the_tracking(impl, marker):
    # 9 repeats, an element, 9 more: never 10 in one tracked stretch
    chunks = [UNIT] * 9 + ["\n", marker] + [UNIT] * 9
    det, got = feed_all(impl.textloop, chunks)
    assert not any(got), marker
    # without the element the same stream is a loop
    det, got = feed_all(impl.textloop, [UNIT] * 9 + ["\n", "plain words\n"] + [UNIT] * 9)
    assert any(got)


@pytest.mark.parametrize(
    "line",
    [
        "- same item text, again and again and again\n",
        "| a | table | row | repeated | many | times |\n",
        "## The same heading over and over and over\n",
    ],
)
def test_repeated_elements_are_never_a_loop(impl, line):
    assert impl.textloop.repeated_spans(line * 200) == []
    assert impl.textloop.TextLoopDetector().feed(line * 200) is False


@pytest.mark.parametrize(
    "divider,loops",
    [
        ("=====\n", True),
        ("___\n", True),
        ("\u2500" * 20 + "\n", True),
        ("\u2550\u2550\u2550\n", True),
        ("---\n", False),  # also a table rule (a run of |+-): clears the tracking
        ("* * *\n", False),  # also a list marker: clears the tracking
    ],
)
def test_dividers_are_skipped_not_counted(impl, divider, loops):
    text = "".join("word salad here, line\n" + divider for _ in range(100))
    spans = impl.textloop.repeated_spans(text)
    assert bool(spans) is loops
    for lo, hi in spans:
        assert divider.strip() not in text[lo:hi]


def test_markers_count_at_line_and_chunk_starts(impl):
    tl = impl.textloop
    # a marker in the middle of a line is text: no clear, so 10 repeats are tracked
    det, got = feed_all(tl, ["then " + UNIT * 5 + "- not a list\n" + UNIT * 5])
    assert any(got)
    assert tl.repeated_spans("then " + UNIT * 5 + "- not a list\n" + UNIT * 5) != []
    # a streamed chunk's start is a line start (gemini's rule): this one clears
    det, got = feed_all(tl, ["then "] + [UNIT] * 5 + ["- a list item\n"] + [UNIT] * 5)
    assert not any(got)
    det, got = feed_all(tl, [UNIT] * 5 + ["\n", "- a list\n"] + [UNIT] * 5)
    assert not any(got)


def test_one_line_repeated_a_thousand_times(impl):
    tl = impl.textloop
    text = LINE * 1000
    assert tl.repeated_spans(text) == [(len(LINE), len(text))]
    det = tl.TextLoopDetector()
    for i in range(1000):  # noqa: B007 (i is read after the loop)
        if det.feed(LINE):
            break
    assert det.detected and i < 20
    assert det.chunk in text


def test_spans_exclude_the_first_occurrence(impl):
    tl = impl.textloop
    intro = "Let me think about this problem step by step.\n"
    text = intro + UNIT * 12 + "\nAnd then something else entirely.\n"
    spans = tl.repeated_spans(text)
    assert spans == [(len(intro) + 50, len(intro) + 600)]
    assert tl.repeated_spans(UNIT * 10) == [(50, 500)]
    assert tl.repeated_spans(UNIT * 9) == []


def test_spans_map_around_skipped_pieces(impl):
    # a divider between repeats is skipped: the history joins around it, the spans do not cover it
    tl = impl.textloop
    text = (UNIT + "\n") * 6 + "=====\n" + (UNIT + "\n") * 6
    spans = tl.repeated_spans(text)
    assert spans and all("=====" not in text[lo:hi] for lo, hi in spans)
    assert spans[0][0] == 51


def test_long_single_chunk_is_analysed_everywhere(impl):
    # a 100,000-character chunk fed at once: every position is analysed (no tail-only analysis)
    tl = impl.textloop
    text = "".join(units(2000)) + UNIT * 12
    det = tl.TextLoopDetector()
    assert det.feed(text) is True
    text2 = UNIT * 12 + "".join(units(2000))
    det = tl.TextLoopDetector()
    assert det.feed(text2) is True
    assert tl.repeated_spans(text2) == [(50, 600)]


def test_non_str_is_a_type_error(impl):
    tl = impl.textloop
    with pytest.raises(TypeError):
        tl.TextLoopDetector().feed(b"bytes")
    with pytest.raises(TypeError):
        tl.repeated_spans(None)


class Sneaky(str):
    def find(self, *a):  # never called: the base storage is what is read
        raise AssertionError("subclass method called")

    count = find
    __getitem__ = find
    endswith = find


def test_str_subclass_reads_the_base_storage(impl):
    tl = impl.textloop
    text = LINE * 50
    assert tl.repeated_spans(Sneaky(text)) == tl.repeated_spans(text)
    assert tl.TextLoopDetector().feed(Sneaky(text)) is True


def test_wide_characters(impl):
    tl = impl.textloop
    for first in (0xC0, 0x4E00, 0x1F300):  # 1-, 2- and 4-byte str storage
        unit = "".join(chr(first + i) for i in range(50))
        assert tl.repeated_spans(unit * 10) == [(50, 500)], hex(first)
        assert tl.repeated_spans("ascii start\n" + unit * 10) == [(62, 512)]


# --- crossing the twins -------------------------------------------------------------------

pieces = st.sampled_from(
    [
        UNIT,
        UNIT[:20],
        LINE,
        "\n",
        "```",
        "```\n",
        "- ",
        "* x\n",
        "1. ",
        "# ",
        "> ",
        "|",
        "| a |\n",
        "---\n",
        "===",
        " ",
        "ab",
        "cd\n",
        "\u2500\u2500\u2500\n",
        "\u00e9t\u00e9 ",
        "\U0001f600",
    ]
)
texts = st.lists(st.tuples(pieces, st.integers(1, 30)), max_size=12).map(
    lambda parts: "".join(p * n for p, n in parts)
)


def _cut(text, cuts):
    pos = sorted({c % (len(text) + 1) for c in cuts})
    out, last = [], 0
    for p in pos + [len(text)]:
        out.append(text[last:p])
        last = p
    return out


@needs_c
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts, st.lists(st.integers(0, 10**6), max_size=8))
def test_twins_agree(text, cuts):
    from loopcore import _native_textloop as C
    from loopcore import _textloop_py as P

    assert C._judgements(text) == P._judgements(text)
    assert C.repeated_spans(text) == P.repeated_spans(text)
    chunks = _cut(text, cuts)
    dc, dp = C.TextLoopDetector(), P.TextLoopDetector()
    assert [dc.feed(c) for c in chunks] == [dp.feed(c) for c in chunks]
    assert (dc.detected, dc.chunk, dc.fed) == (dp.detected, dp.chunk, dp.fed)


@settings(max_examples=150, deadline=None)
@given(texts)
def test_whole_text_and_stream_agree(impl, text):
    # The whole-text form finds a loop exactly when the text streamed in one go (or line by
    # line) does; every span lies inside the text, sorted and disjoint, and never starts at 0
    # (the first occurrence is not charged).
    tl = impl.textloop
    spans = tl.repeated_spans(text)
    assert tl.TextLoopDetector().feed(text) is bool(spans)
    det = tl.TextLoopDetector()
    lines = re.findall(r"[^\n]*\n|[^\n]+", text)
    assert any([det.feed(line) for line in lines]) is bool(spans)
    last = -1
    for lo, hi in spans:
        assert last < lo < hi <= len(text)
        assert lo >= 1
        last = hi


@needs_c
def test_default_import_is_compiled_and_flag_selects_pure():
    code = "import loopcore.textloop as t; print(t.TextLoopDetector.__module__)"
    env = dict(os.environ)
    env.pop("LOOPCORE_NO_EXTENSIONS", None)
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "loopcore._native_textloop"
    env["LOOPCORE_NO_EXTENSIONS"] = "1"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "loopcore._textloop_py"
