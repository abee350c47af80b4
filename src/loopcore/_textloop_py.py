"""Content loops in model text ("chanting"): the pure-Python twin, and the reference.

The rules follow gemini-cli's content-loop detector (its ``checkContentLoop``):

* Text is split into pieces at newlines (a piece ends with ``"\\n"`` or at the end of what was
  fed), so a whole reply and the same reply streamed line by line are judged alike.
* A piece that starts a line and opens a markdown element -- a table row (``|a|b|`` or a run of
  3+ of ``|+-``), a list item (``*``/``+``/``-`` or ``12.`` followed by whitespace), a heading
  (``#`` run then whitespace) or a blockquote (``>`` then whitespace); a piece starts a line when
  it follows a newline or starts a streamed chunk -- and any piece holding a
  code fence (three backticks) clears the tracking: repetition is never counted across such a
  boundary. Leading blanks are allowed before table and list markers.
* Pieces inside a fenced code block (an odd number of fences toggles the state) and dividers (a
  piece made only of ``-_=*+``, box-drawing characters and blanks) are not added to the history.
* Every position of the history starts a ``CHUNK_SIZE`` (50) character chunk. A chunk seen
  ``LOOP_THRESHOLD`` (10) times is a loop when the newest 10 occurrences lie on average at most
  ``MAX_AVG_DISTANCE`` (250) characters apart and the text between consecutive occurrences takes
  at most ``MAX_PERIODS`` (5) distinct values (a list of distinct items sharing a long prefix is
  not a loop).
* The history keeps the newest ``MAX_HISTORY`` (5,000) characters. Fed text is analysed in
  slices of at most ``SLICE`` characters, so no position of a long chunk goes unanalysed.

Where this differs from gemini-cli (deliberately): gemini's list class ``[*-+]`` is a character
range that leaves out ``-``, and its divider class ``[+-_=*...]`` is a range that takes in digits
and capital letters; here ``-`` items are lists and dividers are what the name says. gemini judges
a streamed chunk as a whole (so one list line anywhere in it clears the tracking before the whole
chunk is added) and analyses only the newest 5,000 characters of an oversized chunk; here each
line piece is judged on its own and every position is analysed. Markers count only at the start
of a line, and the start of every streamed chunk counts as one (as in gemini).

``TextLoopDetector`` is the streaming form (``feed`` returns True once a loop is seen, and keeps
returning True until ``reset``); ``repeated_spans`` is the whole-text form used to charge
degenerate replies: the character ranges covered by the repeats, the first occurrence excluded.
"""

from __future__ import annotations

from collections import deque

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

CHUNK_SIZE = 50
LOOP_THRESHOLD = 10
MAX_AVG_DISTANCE = 5 * CHUNK_SIZE
MAX_PERIODS = LOOP_THRESHOLD // 2
MAX_HISTORY = 5000
# A slice this long keeps every occurrence a loop needs (<= 9 * 250 + 50 characters back)
# inside the history when the slice's positions are analysed.
SLICE = 2048

_BLANK = frozenset(" \t\r\f\v")
_WS = _BLANK | {"\n"}
_DIVIDER = frozenset("-_=*+") | frozenset(chr(c) for c in range(0x2500, 0x2580))
_TABLE = frozenset("|+-")
_BULLET = frozenset("*+-")


def _base_str(text: str) -> str:
    # str subclasses are read through the base type's storage (as the compiled twin reads
    # it): methods a subclass overrides are never called.
    return text if type(text) is str else str.__getitem__(text, slice(None))


def _pieces(text: str):
    """(offset, piece) for each newline-terminated piece of *text* (the last may lack one)."""
    start = 0
    n = len(text)
    while start < n:
        end = text.find("\n", start)
        end = n if end < 0 else end + 1
        yield start, text[start:end]
        start = end


def _is_element(piece: str) -> bool:
    """True when *piece*, at the start of a line, opens a table, list, heading or blockquote."""
    n = len(piece)
    if n == 0:
        return False
    c = piece[0]
    if c == "#":
        j = 1
        while j < n and piece[j] == "#":
            j += 1
        return j < n and piece[j] in _WS
    if c == ">":
        return n > 1 and piece[1] in _WS
    i = 0
    while i < n and piece[i] in _BLANK:
        i += 1
    if i == n:
        return False
    c = piece[i]
    if c == "|":
        return piece.find("|", i + 1) >= 0
    if c in _TABLE and i + 2 < n and piece[i + 1] in _TABLE and piece[i + 2] in _TABLE:
        return True
    if c in _BULLET:
        return i + 1 < n and piece[i + 1] in _WS
    j = i
    while j < n and "0" <= piece[j] <= "9":
        j += 1
    return j > i and j + 1 < n and piece[j] == "." and piece[j + 1] in _WS


def _is_divider(piece: str) -> bool:
    seen = False
    for c in piece:
        if c in _DIVIDER:
            seen = True
        elif c not in _WS:
            return False
    return seen


class _Scanner:
    """The chunk statistics over one history; positions are absolute stream offsets."""

    __slots__ = ("_text", "_base", "_next", "_occ", "_order", "found", "marks")

    def __init__(self, collect: bool = False) -> None:
        self._text = ""
        self._base = 0  # absolute position of _text[0]
        self._next = 0  # absolute position of the next chunk to analyse
        self._occ: dict[str, deque[int]] = {}
        self._order: deque[tuple[int, str]] = deque()
        self.found: tuple[int, str] | None = None
        self.marks: list[int] | None = [] if collect else None

    @property
    def total(self) -> int:
        return self._base + len(self._text)

    def clear(self) -> None:
        self._base = self.total
        self._text = ""
        self._next = self._base
        self._occ.clear()
        self._order.clear()

    def add(self, piece: str) -> bool:
        """Append *piece* and analyse it; True when a loop is found (streaming stops there)."""
        for s in range(0, len(piece), SLICE):
            if self._add_slice(piece[s : s + SLICE]) and self.marks is None:
                return True
        return False

    def _add_slice(self, part: str) -> bool:
        text = self._text + part
        cut = len(text) - MAX_HISTORY
        if cut > 0:
            text = text[cut:]
            self._base += cut
            order, occ = self._order, self._occ
            while order and order[0][0] < self._base:
                _, chunk = order.popleft()
                q = occ[chunk]
                q.popleft()
                if not q:
                    del occ[chunk]
            if self._next < self._base:
                self._next = self._base
        self._text = text
        return self._analyse()

    def _analyse(self) -> bool:
        text, base = self._text, self._base
        end = base + len(text) - CHUNK_SIZE
        hit = False
        while self._next <= end:
            pos = self._next
            i = pos - base
            chunk = text[i : i + CHUNK_SIZE]
            q = self._occ.get(chunk)
            if q is None:
                q = self._occ[chunk] = deque()
            q.append(pos)
            self._order.append((pos, chunk))
            if len(q) >= LOOP_THRESHOLD and self._looping(q):
                hit = True
                if self.found is None:
                    self.found = (pos, chunk)
                if self.marks is None:
                    return True  # like gemini, the position that completed the loop stays current
                self.marks.extend(q[k] for k in range(len(q) - LOOP_THRESHOLD + 1, len(q)))
            self._next = pos + 1
        return hit

    def _looping(self, q: deque[int]) -> bool:
        n = len(q)
        first, last = q[n - LOOP_THRESHOLD], q[n - 1]
        if last - first > MAX_AVG_DISTANCE * (LOOP_THRESHOLD - 1):
            return False
        base, text = self._base, self._text
        periods = {text[q[k] - base : q[k + 1] - base] for k in range(n - LOOP_THRESHOLD, n - 1)}
        return len(periods) <= MAX_PERIODS


class _Pieces:
    """The markdown state machine that turns pieces into clear / add / skip."""

    __slots__ = ("line_start", "in_code")

    def __init__(self) -> None:
        self.line_start = True
        self.in_code = False

    def judge(self, piece: str) -> tuple[bool, bool]:
        """(clear the history first, add the piece) for the next *piece*."""
        at_start = self.line_start
        self.line_start = piece.endswith("\n")
        fences = piece.count("```")
        clear = bool(fences) or (at_start and _is_element(piece))
        was = self.in_code
        if fences % 2:
            self.in_code = not self.in_code
        add = not (was or self.in_code or _is_divider(piece))
        return clear, add


class TextLoopDetector:
    """Streaming content-loop detector for one reply (see the module doc for the rules)."""

    __slots__ = ("_pieces", "_scan", "_fed")

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Forget everything: a new reply starts (gemini resets on each prompt and tool call)."""
        self._pieces = _Pieces()
        self._scan = _Scanner()
        self._fed = 0

    def feed(self, chunk: str) -> bool:
        """Add streamed text; True once a loop has been seen (and on every later call).

        Raises TypeError when *chunk* is not a str.
        """
        if not isinstance(chunk, str):
            raise TypeError(f"chunk must be str, not {type(chunk).__name__}")
        chunk = _base_str(chunk)
        if self._scan.found is not None:
            return True
        self._fed += len(chunk)
        self._pieces.line_start = True  # gemini: a streamed chunk's start is a line start too
        for _, piece in _pieces(chunk):
            clear, add = self._pieces.judge(piece)
            if clear:
                self._scan.clear()
            if add and self._scan.add(piece):
                return True
        return False

    @property
    def detected(self) -> bool:
        """True once a loop has been seen."""
        return self._scan.found is not None

    @property
    def chunk(self) -> str | None:
        """The repeated CHUNK_SIZE-character chunk that completed the loop, or None."""
        found = self._scan.found
        return None if found is None else found[1]

    @property
    def fed(self) -> int:
        """Characters fed since the last reset (up to the call that found the loop)."""
        return self._fed


def repeated_spans(text: str) -> list[tuple[int, int]]:
    """Character ranges ``[start, end)`` of *text* covered by repeats of a looping chunk.

    The text is judged as if streamed line by line into a fresh TextLoopDetector, but every
    loop is collected instead of stopping at the first; the first occurrence of each repeated
    chunk is not in any range. Ranges are sorted and disjoint; empty when there is no loop.
    Raises TypeError when *text* is not a str.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be str, not {type(text).__name__}")
    text = _base_str(text)
    judge = _Pieces()
    scan = _Scanner(collect=True)
    segments: list[tuple[int, int, int]] = []  # (absolute start, text offset, length)
    for offset, piece in _pieces(text):
        clear, add = judge.judge(piece)
        if clear:
            scan.clear()
        if add:
            segments.append((scan.total, offset, len(piece)))
            scan.add(piece)
    marks = scan.marks
    if not marks:
        return []
    return _map_spans(sorted(set(marks)), segments)


def _map_spans(marks: list[int], segments: list[tuple[int, int, int]]) -> list[tuple[int, int]]:
    # Merge [m, m + CHUNK_SIZE) over the sorted marks, then map absolute ranges through the
    # appended segments (skipped pieces leave gaps between text offsets).
    merged: list[list[int]] = []
    for m in marks:
        if merged and m <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], m + CHUNK_SIZE)
        else:
            merged.append([m, m + CHUNK_SIZE])
    out: list[tuple[int, int]] = []
    si = 0
    for a, b in merged:
        while segments[si][0] + segments[si][2] <= a:
            si += 1
        k = si
        while k < len(segments) and segments[k][0] < b:
            s_abs, s_off, s_len = segments[k]
            lo = max(a, s_abs) - s_abs + s_off
            hi = min(b, s_abs + s_len) - s_abs + s_off
            if out and out[-1][1] == lo:
                out[-1] = (out[-1][0], hi)
            else:
                out.append((lo, hi))
            k += 1
    return out


def _judgements(text: str) -> list[tuple[bool, bool]]:
    """[(clear, add)] for each piece of *text* (a test hook: the twins must judge alike)."""
    judge = _Pieces()
    return [judge.judge(piece) for _, piece in _pieces(_base_str(text))]
