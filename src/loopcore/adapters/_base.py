"""What every adapter shares: the error type, load statistics, token accounting and pairing.

Token rule (documented in docs/formats.md):

* ``tokens_out`` of a call is the completion tokens of the API call that issued it, split
  evenly among the calls that call issued. When the adapter gives the turn's reply text
  (``Ledger.turn(text=...)`` / ``add_text``), the call gets only its own share instead: the
  visible completion (completion minus reasoning tokens) split over the reply text and the
  calls in proportion to their characters; the rest of the turn's output goes to
  ``tokens_turn`` of the turn's first step (estimated: ``ceil(chars / 4)`` of the text);
* a turn that issued no call, whose reply text the adapter gave ("" included), is a step of its
  own (``kind="other"``, ``name=""``), with the turn's output as ``tokens_out``; a rejected action
  (``Ledger.reject``) is a step with ``rejected`` set, its error message as its result tokens;
* ``tokens_in`` of a call is what its result added to the context: when the prompt sizes of
  the issuing API call (P) and of the next one (P') are known, the growth
  ``P' - P - visible completion`` is split among the results (and any other messages in the
  gap) in proportion to their text lengths; where the trace shows that the model's reasoning
  is sent back with the transcript, the prompts are read less the reasoning they hold (see
  :func:`_context_prompts`), so the growth is ``P' - P - completion``;
* wherever the trace has no usage for that, both are estimated as ``ceil(chars / 4)`` of the
  JSON text of the arguments (out) and of the result text (in), and the step says so with
  ``tokens_estimated=True``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from .._json import loads
from .._native_flag import NO_EXTENSIONS
from ..taxonomy.profiles import Profile
from ..trace import Step, Trace

__all__ = [
    "LoadStats",
    "Ledger",
    "TraceFormatError",
    "estimate_tokens",
    "record_ref",
    "text_of",
    "usage_of",
    "parse_args",
]


class TraceFormatError(ValueError):
    """A trace file (or one line of it) that cannot be read; ``.path`` and ``.line`` say where."""

    def __init__(self, message: str, path: str | None = None, line: int | None = None) -> None:
        self.path = path
        self.line = line
        self.reason = message
        where = path or "<object>"
        if line is not None:
            where = f"{where}:{line}"
        super().__init__(f"{where}: {message}")

    def __reduce__(self):  # keep the attributes through pickling (multiprocessing workers)
        return (TraceFormatError, (self.reason, self.path, self.line))


@dataclass
class LoadStats:
    """What ``load(..., stats=LoadStats())`` read and what it skipped.

    ``errors`` holds every :class:`TraceFormatError` that ``keep_going=True`` skipped past
    (malformed lines and malformed files); ``ignored`` the files of a folder that hold JSON but
    no known trace format (``preds.json`` next to trajectories), which are never errors;
    ``no_steps`` the non-empty sources whose traces have no step at all; ``copies`` the
    copies of a session or run a walk passed over, another file holding them whole.
    """

    files: int = 0
    traces: int = 0
    steps: int = 0
    skipped_lines: int = 0
    skipped_files: int = 0
    errors: list = field(default_factory=list)
    ignored: list = field(default_factory=list)
    formats: dict = field(default_factory=dict)
    #: Sources that held data of a known format yet gave no step (a session with no tool call
    #: or reply, or a format variant the reader missed): worth a warning, never silence.
    no_steps: list = field(default_factory=list)
    #: Entire's checkpoint copies of a session that another copy a walk read holds whole, and
    #: the files of an OpenHands evaluation whose every run another file of the folder holds:
    #: passed over, or the session would count once per checkpoint, the run once per file.
    copies: list = field(default_factory=list)


def estimate_tokens(chars: int) -> int:
    """The estimate used when a trace has no usage fields: ceil(chars / 4)."""
    return (chars + 3) >> 2


def text_len(value: Any) -> int:
    """Length of a result or argument as the model saw it (JSON text for structured values)."""
    if value is None:
        return 0
    if isinstance(value, str):
        return len(value)
    try:
        return len(orjson.dumps(value, default=str))
    except (TypeError, orjson.JSONEncodeError):
        return len(str(value))


def text_of(content: Any) -> Any:
    """Message content as text: a string stays, a list of text parts is joined, else unchanged."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for p in content:
            if isinstance(p, str):
                parts.append(p)
            elif isinstance(p, dict):
                t = p.get("text")
                if isinstance(t, str) and p.get("type", "text") in (
                    "text",
                    "input_text",
                    "output_text",
                ):
                    parts.append(t)
                else:
                    return content  # images or other parts: keep the structure for hashing
            else:
                return content
        return "\n".join(parts)
    return content


# What Entire (entireio/cli, redact/) writes in place of what it redacted from its copy of a
# session: ``REDACTED`` (a secret, a high-entropy string) or ``[REDACTED_<LABEL>]`` (the
# OpenAI Privacy Filter's categories). Its Codex copies have every message between agents so
# (the ``message`` of ``spawn_agent``, ``send_message``, ``followup_task``).
_REDACTED_MARKERS = frozenset(
    {"REDACTED"}
    | {
        f"[REDACTED_{label}]"
        for label in ("PERSON", "EMAIL", "PHONE", "ADDRESS", "URL", "DATE", "ACCOUNT_NUMBER")
    }
)
_REDACTED_MAX = max(map(len, _REDACTED_MARKERS))
# Entire redacts a high-entropy run of ``[A-Za-z0-9/+_=-]`` inside a value too: a path up to its
# extension (two different files read as ``REDACTED.md``, two task outputs as
# ``REDACTED.output``), a command's argument (``tail -10 /Users/x/.REDACTED.txt``). The marker
# there is the word REDACTED between characters that are not letters or digits.
_REDACTED_WORD = re.compile(r"(?<![A-Za-z0-9])REDACTED(?![A-Za-z0-9])")


def _is_redacted(v: Any) -> bool:
    return v.__class__ is str and len(v) <= _REDACTED_MAX and v in _REDACTED_MARKERS


def _has_redacted_part(v: Any) -> bool:
    return v.__class__ is str and "REDACTED" in v and _REDACTED_WORD.search(v) is not None


def _has_redacted(args: dict) -> bool:
    """An argument of *args* is a value an exporter redacted (:data:`_REDACTED_MARKERS`), whole
    or in part (:data:`_REDACTED_WORD`)."""
    for v in args.values():
        if _is_redacted(v) or _has_redacted_part(v):
            return True
    return False


def _unknown_redacted(args: dict, call_id: Any, n: int) -> dict:
    """*args* with each redacted value made the unknown value of this call: what was sent is
    unknown, so, as a call whose arguments were not recorded, two such calls are not proven the
    same. A value redacted in part keeps its shape (the rest of the path, the command around it)
    with each marker made this call's own."""
    mark = call_id if isinstance(call_id, str) and call_id else n
    out = {}
    for k, v in args.items():
        if _is_redacted(v):
            v = f"{v} (unknown: {mark})"
        elif _has_redacted_part(v):
            own = "REDACTED-unknown-" + re.sub(r"[^A-Za-z0-9_.-]", "_", str(mark))
            v = _REDACTED_WORD.sub(own, v)
        out[k] = v
    return out


def parse_args(raw: Any) -> tuple[Any, bool]:
    """Tool-call arguments as a value: JSON strings are parsed; (value, ok) where ok=False keeps
    an unparseable string as it was (agents do emit broken JSON; that is data, not a bad file)."""
    if isinstance(raw, (str, bytes)):
        if not raw:
            return {}, True
        try:
            return loads(raw), True
        except orjson.JSONDecodeError:
            return raw, False
    return raw, True


def record_ref(lines: list[int] | None, index: int) -> dict:
    """The ref of record *index* of a source: its 1-based line in a JSONL file (*lines* maps
    records to lines), else its index in the document's list."""
    if lines is not None and 0 <= index < len(lines):
        return {"line": lines[index]}
    return {"message": index}


def _int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and math.isfinite(v):  # NaN / inf from a Python writer: no count
        return int(v)
    if isinstance(v, str) and v.isdigit():
        return int(v)
    return None


def usage_of(u: Any) -> tuple[int | None, int | None, int] | None:
    """(prompt tokens, completion tokens, reasoning tokens) from any known usage schema, or None.

    Knows OpenAI chat (prompt/completion_tokens), OpenAI Responses and Anthropic (input/
    output_tokens; Anthropic's cache_* inputs are added to the prompt since they are part of
    it), Gemini (promptTokenCount...) and gemini-cli (input/output/thoughts).
    """
    if u.__class__ is not dict:
        return None
    p = u.get("prompt_tokens")
    c = u.get("completion_tokens")
    if p.__class__ is int and c.__class__ is int and p > 0:  # the common case, read directly
        d = u.get("completion_tokens_details")
        r = d.get("reasoning_tokens") if d.__class__ is dict else None
        return p, c, r if r.__class__ is int else 0
    got = _usage_fields(u)
    if got is None or got[0] != 0:
        return got
    # A prompt of 0 tokens is no API call's (a cached prompt counts its cached tokens too): it
    # is a count the harness did not record (gemini-cli writes zeros on the message it makes
    # for tool calls alone), never a size the next prompt's growth can be measured from.
    if not got[1]:
        return None
    return None, got[1], got[2]


def _usage_fields(u: dict) -> tuple[int | None, int | None, int] | None:
    # usage_of's reading of each schema, zeros as they are
    if "prompt_tokens" in u or "completion_tokens" in u:
        d = u.get("completion_tokens_details")
        r = _int(d.get("reasoning_tokens")) if isinstance(d, dict) else None
        return _int(u.get("prompt_tokens")), _int(u.get("completion_tokens")), r or 0
    if "input_tokens" in u or "output_tokens" in u:
        # Anthropic's usage of a response sampled in several passes (a server tool such as the
        # advisor runs between them) sums the passes' prompts; the prompt the response began
        # with, what the results before it added to, is its first pass's
        passes = u.get("iterations")
        first = passes[0] if passes.__class__ is list and len(passes) > 1 else None
        src = first if first.__class__ is dict and "input_tokens" in first else u
        p = _int(src.get("input_tokens"))
        if p is not None:
            p += (_int(src.get("cache_creation_input_tokens")) or 0) + (
                _int(src.get("cache_read_input_tokens")) or 0
            )
        # the reasoning inside output_tokens: OpenAI Responses' reasoning_tokens, Anthropic's
        # thinking_tokens (Claude Code 2.1.2xx writes them), Codex's reasoning_output_tokens
        d = u.get("output_tokens_details")
        if isinstance(d, dict):
            r = _int(d.get("reasoning_tokens"))
            if r is None:
                r = _int(d.get("thinking_tokens"))
        else:
            r = _int(u.get("reasoning_output_tokens"))
        return p, _int(u.get("output_tokens")), r or 0
    if "promptTokenCount" in u or "candidatesTokenCount" in u:
        t = _int(u.get("thoughtsTokenCount")) or 0
        c = _int(u.get("candidatesTokenCount"))
        return _int(u.get("promptTokenCount")), None if c is None else c + t, t
    if "input" in u and "output" in u:
        t = _int(u.get("thoughts")) or 0
        c = _int(u.get("output"))
        return _int(u.get("input")), None if c is None else c + t, t
    return None


# A turn is a list, not an object (this runs once per API call of every trace loaded):
# [prompt tokens, completion tokens, reasoning tokens, index of its first step, other chars,
#  its calls still waiting for a result (Step objects, oldest first), its reply text (None: the
#  adapter did not say), its ref]. A call always belongs to
# the latest turn, so the steps of turn t are the run steps[turns[t][_START]:turns[t + 1][_START]].
_P, _C, _R, _START, _EXTRA, _OPEN, _TEXT, _REF = range(8)
_NO_USAGE = (None, None, 0)


def _split_growth(
    answered: list,
    prompt: int | None,
    nxt: int | None,
    completion: int | None,
    reasoning: int,
    extra: int,
) -> bool:
    """Set ``tokens_in`` of the (step, result chars) in *answered*: the prompt's growth to the
    next API call (less the completion tokens it holds) split in proportion to the result text
    (*extra* chars of other messages in the gap take their share too); True when the usage
    allowed that, else the estimate ceil(chars / 4) and False."""
    if prompt is not None and nxt is not None and completion is not None:
        visible = completion - reasoning  # completion tokens the next prompt holds
        growth = nxt - prompt - (visible if visible > 0 else 0)
        if growth >= 0:
            total = extra
            for _, chars in answered:
                total += chars
            for s, chars in answered:
                s.tokens_in = growth * chars // total if total else 0
            return True
    for s, chars in answered:
        if chars:
            s.tokens_in = (chars + 3) >> 2
            s.tokens_estimated = True
    return False


# Tokens a message's framing may add beyond its characters (a token is at least a character)
_FRAMING = 64


def _context_prompts(turns: list, steps: list, results: dict) -> list:
    """Each turn's prompt size as the growth rule reads it: less the reasoning of the earlier
    API calls when the trace shows that its reasoning stays in the context.

    Some harnesses send the model's reasoning back with the transcript (Codex its encrypted
    reasoning items, mini-swe-agent the ``reasoning_content`` of DeepSeek's reasoner), so the
    next prompt holds the whole completion, reasoning included; others leave it out. The
    trace tells which, from the gaps between consecutive API calls with reasoning:

    * the prompt grew by less than the completion, by more than ``_FRAMING`` can explain, with
      nothing but the call's results in the gap (0 <= P' - P < completion - _FRAMING): the
      reasoning was left out (the two tests have the same slack: a prompt's count of a block
      sent back may differ a little from the count of its output, and one gap 29 tokens short
      in a Claude Code session whose 95 other gaps held the whole completion had every turn's
      reasoning counted twice);
    * the prompt grew by more than the visible completion, the gap's characters and
      ``_FRAMING`` together can hold (a token is at least a character): only the reasoning
      explains the rest, so it stayed.

    With a gap of the second kind and none of the first, each prompt is read less the reasoning
    tokens of the turns before it, so a result is never charged its call's reasoning; else the
    prompts are read as they are (a prompt that shrank, the context cut, tells nothing)."""
    prompts = [row[_P] for row in turns]
    kept = False
    for t in range(len(turns) - 1):
        row = turns[t]
        p, c, r, nxt = row[_P], row[_C], row[_R], turns[t + 1][_P]
        if r <= 0 or p is None or c is None or nxt is None or nxt < p:
            continue
        growth = nxt - p
        extra = row[_EXTRA]
        if growth + _FRAMING < c and not extra:
            return prompts  # this call's reasoning did not reach the next prompt
        if not kept:
            gap = extra
            for i in range(row[_START], turns[t + 1][_START]):
                chars = results.get(id(steps[i]))
                if chars is not None:
                    gap += chars
            kept = growth - (c - r if c > r else 0) > gap + _FRAMING
    if not kept:
        return prompts
    carried = 0
    for t, row in enumerate(turns):
        if prompts[t] is not None:
            prompts[t] -= carried
        if row[_C] is not None and row[_R] > 0:
            carried += row[_R]
    return prompts


class Ledger:
    """Builds the steps of one session: API calls (turns), the tool calls each issued, their
    results, then the token accounting of the module docstring in :meth:`finish`."""

    __slots__ = (
        "session",
        "profile",
        "steps",
        "turns",
        "orphans",
        "_classify",
        "_access",
        "_args_chars",
        "_results",
        "_replies",
        "_users",
        "_hidden",
        "_compactions",
        "_passes",
        "unknown_redacted",
    )

    def __init__(self, session: str, profile: Profile, *, unknown_redacted: bool = False) -> None:
        self.session = session
        self.profile = profile
        self.steps: list[Step] = []
        self.turns: list[list] = []
        self.orphans = 0
        self._classify = profile.classify
        self._access = profile.access
        # Per step, by index: the characters of its arguments (name included).
        self._args_chars: list[int] = []
        # Per answered step, by id(step): its result's characters when the result entered the
        # context, None when no later call ever saw it. Steps that are not keys are unanswered.
        # (Keyed by identity: the steps stay alive in self.steps, and a result is attached to
        # the step object an adapter holds, so no index needs to be looked up for it.)
        self._results: dict[int, int | None] = {}
        self._replies = 0  # steps finish() added for the turns that ran nothing
        # The turns that begin after a user's message (see user()), ascending.
        self._users: list[int] = []
        # The turns whose reasoning the trace holds no text of (see hidden_reasoning()).
        self._hidden: list[int] = []
        # The turns that begin after the harness compacted the context (see compacted()).
        self._compactions: list[int] = []
        # The turns whose API call ran tools on the provider's side (see server_tools()).
        self._passes: list[int] = []
        # Set by the readers of formats Entire copies (entireio/cli redacts its copies): an
        # argument whose whole value is a redaction marker is unknown (see call()).
        self.unknown_redacted = unknown_redacted

    # -- building -----------------------------------------------------------------------
    def turn(self, usage: Any = None, *, text: str | None = None, ref: dict | None = None) -> int:
        """Start the next API call; *usage* is a raw usage dict (any known schema) or None.
        *text* is the turn's reply text as the trace holds it ("" for none; None when the
        adapter does not read it), *ref* the trace's coordinate of the turn (its calls get it
        unless they are given their own)."""
        u = _NO_USAGE if usage is None else (usage_of(usage) or _NO_USAGE)
        turns = self.turns
        turns.append([u[0], u[1], u[2], len(self.steps), 0, [], text, ref])
        return len(turns) - 1

    def add_text(self, text: str) -> None:
        """Append reply text to the current turn (a turn whose text comes in several blocks,
        joined by newlines)."""
        if not self.turns:
            self.turn(None)
        t = self.turns[-1]
        t[_TEXT] = text if not t[_TEXT] else t[_TEXT] + "\n" + text

    def reject(
        self,
        message: str,
        name: str = "",
        args: Any = None,
        *,
        args_len: int | None = None,
        ref: dict | None = None,
        chars: int | None = None,
    ) -> Step:
        """Record that the harness rejected the current turn's action (nothing ran): *message*
        is the harness's answer (or a short description), whose tokens are the step's result
        tokens; *name* / *args* the attempted call, if any (its characters count as the call's
        own output)."""
        turns = self.turns
        if not turns:
            self.turn(None)
        step = Step(
            self.session,
            len(turns) - 1,
            "other",
            name,
            None,
            args,
            None,
            None,
            0,
            0,
            False,
            None,
            ref=ref if ref is not None else turns[-1][_REF],
            rejected=message,
        )
        self.steps.append(step)
        if args_len is None:
            args_len = (text_len(args) + len(name)) if (args is not None or name) else 0
        self._args_chars.append(args_len)
        self._results[id(step)] = len(message) if chars is None else chars
        return step

    def hidden_reasoning(self) -> None:
        """The current turn reasoned without the trace holding its text (a thinking block whose
        text the API withheld, a redacted one). When the usage gives no reasoning count, the
        output beyond what the turn's text and calls can hold is read as that reasoning (see
        :meth:`finish`), so the calls are not given the reasoning's tokens."""
        self._mark_turn(self._hidden)

    def server_tools(self) -> None:
        """The current API call ran tools on the provider's side (a web search, a code
        interpreter, a remote MCP call): it sampled in several passes, and the prompt its usage
        reports sums them, the tools' content included. That prompt tells nothing of what the
        results before the call added (nor does the reasoning the call dropped or kept), so
        :meth:`finish` reads it as unknown: the results around it are estimated from their
        text, not given the pages a search read."""
        self._mark_turn(self._passes)

    def _mark_turn(self, marks: list[int]) -> None:
        # add the current turn (started if there is none) to *marks*, once
        if not self.turns:
            self.turn(None)
        t = len(self.turns) - 1
        if not marks or marks[-1] != t:
            marks.append(t)

    def _hidden_reasoning(self) -> None:
        # each hidden-reasoning turn with no reasoning count: its output less an estimate of
        # what its text and calls hold (a token for every 4 characters, as estimates go)
        turns, args_chars = self.turns, self._args_chars
        for t in self._hidden:
            row = turns[t]
            completion = row[_C]
            if row[_R] > 0 or completion is None or completion <= 0:
                continue
            end = turns[t + 1][_START] if t + 1 < len(turns) else len(self.steps)
            text = row[_TEXT]
            visible = ((len(text) if text else 0) + 3) >> 2
            for i in range(row[_START], end):
                visible += (args_chars[i] + 3) >> 2
            if completion > visible:
                row[_R] = completion - visible
        self._hidden = []

    def set_usage(self, usage: Any, turn: int = -1) -> None:
        """Replace the usage of a turn (the last one by default): Claude Code repeats it per line."""
        u = usage_of(usage)
        if u is not None:
            t = self.turns[turn]
            t[_P], t[_C], t[_R] = u

    def call(
        self,
        name: str,
        args: Any,
        call_id: str | None = None,
        *,
        args_len: int | None = None,
        kind: str | None = None,
        target: Any = None,
        classify_args: Any = None,
        meta: dict | None = None,
        ref: dict | None = None,
        reads: Any = None,
        writes: Any = None,
        no_op: bool = False,
    ) -> Step:
        """Record a tool call issued by the current turn (a turn is opened if there is none).

        *args_len* is the characters of the call as the model wrote it (name included) when the
        adapter knows it (else the JSON text of *args* is measured); *kind* and *target* skip the
        profile's classification, *classify_args* classifies other args than the ones stored;
        *ref* is the call's coordinate in the trace (default: the turn's), *reads* / *writes* /
        *no_op* the Step fields of the same names. With :attr:`unknown_redacted`, an argument
        whose whole value is a redaction marker (``REDACTED``) is made unknown: two such calls
        are not proven the same, so the call repeats nothing.
        """
        turns = self.turns
        if not turns:
            self.turn(None)
        if self.unknown_redacted and args.__class__ is dict and _has_redacted(args):
            if args_len is None:
                args_len = text_len(args) + len(name)
            args = _unknown_redacted(args, call_id, len(self.steps))
        if kind is None:
            kind, target, r, w, nop = self._access(
                name, args if classify_args is None else classify_args
            )
            if reads is None:
                reads = r
            if writes is None:
                writes = w
            no_op = no_op or nop
        # every field positionally, in one call (this runs once per tool call loaded)
        step = _new_step(
            self.session,
            len(turns) - 1,
            kind,
            name,
            target,
            args,
            None,
            None,
            0,
            0,
            False,
            call_id,
            meta if meta else {},
            None if reads is None else tuple(reads),
            None if writes is None else tuple(writes),
            turns[-1][_REF] if ref is None else ref,
            None,
            None,
            0,
            True if no_op else False,
        )
        self.steps.append(step)
        self._args_chars.append(text_len(args) + len(name) if args_len is None else args_len)
        turns[-1][_OPEN].append(step)
        return step

    def result(
        self,
        step: Step,
        result: Any,
        error: Any = None,
        *,
        in_context: bool = True,
        chars: int | None = None,
    ) -> None:
        """Attach a result to *step*; ``in_context=False`` for results no later call ever saw
        (a final submission), which then add no input tokens."""
        step.result = result
        if error is not None:
            step.error = error
        if not in_context:
            self._results[id(step)] = None
        elif chars is None:
            self._results[id(step)] = len(result) if result.__class__ is str else text_len(result)
        else:
            self._results[id(step)] = chars
        # No longer open. The open calls of a turn are few (usually one), and found by identity:
        # two open calls can be equal (same tool, args and id) yet only this one is answered.
        opens = self.turns[step.turn][_OPEN]
        if opens and opens[0] is step:
            del opens[0]
        else:
            for k, s in enumerate(opens):
                if s is step:
                    del opens[k]
                    break

    def pair(self, call_id: str | None, name: str | None = None) -> Step | None:
        """The call a result answers: by id within the latest issuing turn first (tau-bench reuses
        ids across turns), then by id in earlier turns, then the first open call of the latest
        turn with open calls (same name preferred). None when nothing is waiting."""
        turns = self.turns
        latest = len(turns) - 1
        while latest >= 0 and not turns[latest][_OPEN]:
            latest -= 1
        if latest < 0:
            return None
        opens = turns[latest][_OPEN]
        if call_id:
            for s in opens:
                if s.call_id == call_id:
                    return s
            for t in range(latest - 1, -1, -1):
                for s in turns[t][_OPEN]:
                    if s.call_id == call_id:
                        return s
            if any(s.call_id for s in opens):
                return None
        if name:
            for s in opens:
                if s.name == name:
                    return s
        return opens[0]

    def open_calls(self) -> list[Step]:
        """Calls still waiting for a result, oldest first."""
        return [s for t in self.turns for s in t[_OPEN]]

    def last_open_call(self) -> Step | None:
        """The newest call still waiting for a result (``open_calls()[-1]``), or None."""
        for t in reversed(self.turns):
            if t[_OPEN]:
                opens: list[Step] = t[_OPEN]
                return opens[-1]
        return None

    def user(self) -> None:
        """A message from the person at the keyboard (a prompt typed into an interactive
        harness, not a tool's result nor text the harness adds): the first step of a later turn
        gets ``Step.after_user``, so the burn rules take nothing before it as evidence that work
        was repeated. Its text is context as before (:meth:`context`)."""
        self._mark_next(self._users)

    def compacted(self) -> None:
        """The harness compacted the context (a summary replaced the conversation, or old tool
        outputs were cleared): the model no longer holds what it saw, so reading it again is
        no repeat. The first step of a later turn gets ``Step.after_user`` (no burn rule looks
        back across it, as after a person's message) and ``meta["after_compaction"]``."""
        self._mark_next(self._compactions)

    def _mark_next(self, marks: list[int]) -> None:
        # add the next turn (the first one not begun yet) to *marks*, once
        n = len(self.turns)
        if not marks or marks[-1] != n:
            marks.append(n)

    def context(self, chars: int) -> None:
        """Other text that entered the context after the current turn (user messages...)."""
        if self.turns:
            self.turns[-1][_EXTRA] += chars

    # -- accounting ---------------------------------------------------------------------
    def finish(self) -> tuple[list[Step], str]:
        """Fill in the tokens; returns (steps, tokens_source): usage / estimate / mixed, or none
        for a trace without steps. The accounting is :meth:`_finish_py` (the reference); an
        exact Ledger runs its compiled twin, ``loopcore._native_ingest.finish``. A turn marked
        by :meth:`hidden_reasoning` is given its reasoning first, and one marked by
        :meth:`server_tools` loses its prompt size, so both twins read them so."""
        if self._hidden:
            self._hidden_reasoning()
        for t in self._passes:
            self.turns[t][_P] = None
        if _native_finish is not None and self.__class__ is Ledger:
            result: tuple[list[Step], str] = _native_finish(self)
            return result
        return self._finish_py()

    def _finish_py(self) -> tuple[list[Step], str]:
        # Ledger.finish, the pure twin: a subclass may override _split_turn
        steps = self.steps
        turns = self.turns
        args_chars = self._args_chars
        results = self._results
        used = estimated = 0
        # Each turn with the one after it: a turn's steps end where the next turn's begin, and
        # the next prompt size tells what its results added. The last turn is followed by a
        # stand-in without usage that begins after the last step.
        following = turns[1:]
        following.append([None, None, 0, len(steps), 0, [], None, None])
        # the prompt sizes the growth rule reads (less any reasoning they carry), the stand-in's
        # None last
        prompts = _context_prompts(turns, steps, results)
        prompts.append(None)
        replies: list[tuple[int, Step]] = []  # (position, step) of the turns that ran nothing
        for t, ((_prompt, completion, reasoning, lo, extra, _open, text, ref), after) in enumerate(
            zip(turns, following)
        ):
            prompt, nxt = prompts[t], prompts[t + 1]
            hi = after[_START]
            if text is not None or lo == hi:
                if lo == hi:
                    if text is None:
                        continue  # the adapter does not read reply text: nothing to say of the turn
                    s = Step(
                        self.session,
                        t,
                        "other",
                        "",
                        None,
                        None,
                        None,
                        None,
                        0,
                        0,
                        False,
                        None,
                        ref=ref,
                        text=text,
                    )
                    if completion is not None and completion >= 0:
                        s.tokens_out = completion
                        used += 1
                    else:
                        s.tokens_out = (len(text) + 3) >> 2 if text else 0
                        s.tokens_estimated = True
                        estimated += 1
                    replies.append((lo, s))
                    continue
                u, e = self._split_turn(lo, hi, prompt, completion, reasoning, extra, text, nxt)
                used += u
                estimated += e
                continue
            if hi - lo == 1:
                # The common case, one call per API call: the same arithmetic as below
                # without the per-turn lists and loops.
                s = steps[lo]
                if completion is not None and completion >= 0:
                    s.tokens_out = completion
                    used += 1
                else:
                    s.tokens_out = (args_chars[lo] + 3) >> 2
                    s.tokens_estimated = True
                    estimated += 1
                chars = results.get(id(s))
                if chars is None:
                    continue
                if prompt is not None and nxt is not None and completion is not None:
                    visible = completion - reasoning
                    growth = nxt - prompt - (visible if visible > 0 else 0)
                    if growth >= 0:
                        total = extra + chars
                        s.tokens_in = growth * chars // total if total else 0
                        used += 1
                        continue
                if chars:
                    s.tokens_in = (chars + 3) >> 2
                    s.tokens_estimated = True
                estimated += 1
                continue
            if lo == hi:
                continue
            # tokens_out: the completion split evenly over the calls it issued, else estimated
            if completion is not None and completion >= 0:
                q, r = divmod(completion, hi - lo)
                for k in range(hi - lo):
                    steps[lo + k].tokens_out = q + (1 if k < r else 0)
                used += 1
            else:
                for i in range(lo, hi):
                    s = steps[i]
                    s.tokens_out = (args_chars[i] + 3) >> 2
                    s.tokens_estimated = True
                estimated += 1
            # tokens_in: (step, result chars) of the calls whose results entered the context
            answered = []
            for i in range(lo, hi):
                s = steps[i]
                chars = results.get(id(s))
                if chars is not None:
                    answered.append((s, chars))
            if not answered:
                continue
            if _split_growth(answered, prompt, nxt, completion, reasoning, extra):
                used += 1
            else:
                estimated += 1
        if replies:
            merged: list[Step] = []
            prev = 0
            for pos, s in replies:
                merged.extend(steps[prev:pos])
                merged.append(s)
                prev = pos
            merged.extend(steps[prev:])
            steps[:] = merged
            self._replies = len(replies)
        if not steps:
            source = "none"
        elif used and estimated:
            source = "mixed"
        elif used:
            source = "usage"
        else:
            source = "estimate"
        return steps, source

    def _split_turn(
        self,
        lo: int,
        hi: int,
        prompt: int | None,
        completion: int | None,
        reasoning: int,
        extra: int,
        text: str | None,
        nxt: int | None,
    ) -> tuple[int, int]:
        """The tokens of a turn whose reply text is known (steps[lo:hi], at least one): each
        step its own share of the output, the rest of the output as tokens_turn of the first
        (tokens_out when no step has a call of its own); returns (used, estimated) counts."""
        steps = self.steps
        args_chars = self._args_chars
        results = self._results
        used = estimated = 0
        tchars = len(text) if text else 0
        if hi - lo == 1:
            # The common case, one call in the turn: the arithmetic below for one step, without
            # the per-turn lists (and _split_growth for one answered step)
            first = steps[lo]
            first.text = text
            own0 = args_chars[lo]
            if completion is not None and completion >= 0:
                visible = completion - reasoning if completion > reasoning else 0
                denom = tchars + own0
                v = visible * own0 // denom if denom else 0
                if own0:
                    first.tokens_out = v
                    first.tokens_turn = completion - v
                else:
                    first.tokens_out = completion
                used = 1
            else:
                first.tokens_estimated = True
                if own0:
                    first.tokens_out = (own0 + 3) >> 2
                    first.tokens_turn = (tchars + 3) >> 2
                else:
                    first.tokens_out = (tchars + 3) >> 2
                estimated = 1
            chars = results.get(id(first))
            if chars is None:
                return used, estimated
            if prompt is not None and nxt is not None and completion is not None:
                visible = completion - reasoning
                growth = nxt - prompt - (visible if visible > 0 else 0)
                if growth >= 0:
                    total = extra + chars
                    first.tokens_in = growth * chars // total if total else 0
                    return used + 1, estimated
            if chars:
                first.tokens_in = (chars + 3) >> 2
                first.tokens_estimated = True
            return used, estimated + 1
        own = args_chars[lo:hi]
        first = steps[lo]
        first.text = text
        if completion is not None and completion >= 0:
            visible = completion - reasoning if completion > reasoning else 0
            denom = tchars + sum(own)
            given = 0
            for k in range(hi - lo):
                v = visible * own[k] // denom if denom else 0
                steps[lo + k].tokens_out = v
                given += v
            rest = completion - given
            if any(own):
                first.tokens_turn = rest
            else:
                first.tokens_out += rest
            used += 1
        else:
            for k in range(hi - lo):
                s = steps[lo + k]
                s.tokens_out = (own[k] + 3) >> 2
                s.tokens_estimated = True
            rest = (tchars + 3) >> 2
            if any(own):
                first.tokens_turn = rest
            else:
                first.tokens_out += rest
            estimated += 1
        answered = []
        for i in range(lo, hi):
            s = steps[i]
            chars = results.get(id(s))
            if chars is not None:
                answered.append((s, chars))
        if not answered:
            return used, estimated
        if _split_growth(answered, prompt, nxt, completion, reasoning, extra):
            used += 1
        else:
            estimated += 1
        return used, estimated

    def trace(self, *, source: str | None, fmt: str, meta: dict | None = None) -> Trace:
        """The finished Trace (tokens filled in, meta tokens_source/unanswered set)."""
        steps, tokens_source = self.finish()
        if self._users:
            _mark_after_user(steps, self._users)
        if self._compactions:
            for s in _mark_after_user(steps, self._compactions):
                s.meta["after_compaction"] = True
        m = {
            "tokens_source": tokens_source,
            "unanswered": len(steps) - self._replies - len(self._results),
        }
        if self.orphans:
            m["orphan_results"] = self.orphans
        if meta:
            m.update(meta)
        return Trace(steps, session=self.session, source=source, format=fmt, meta=m)


def _mark_after_user(steps: list[Step], users: list[int]) -> list[Step]:
    """Set ``after_user`` on the first step of a turn >= each of *users* (ascending turn
    indexes; the steps are in turn order): several messages before one step mark it once.
    Returns the steps marked."""
    k = 0
    n = len(users)
    marked = []
    for s in steps:
        if s.turn >= users[k]:
            s.after_user = True
            marked.append(s)
            while k < n and users[k] <= s.turn:
                k += 1
            if k == n:
                break
    return marked


# Step(...) with every field in order: the compiled twin fills a new Step's slots in C (the
# same object); imported last, as it reads this module's helpers
if TYPE_CHECKING or NO_EXTENSIONS:
    _new_step: Any = Step
    _native_finish: Any = None
else:
    from .._native_ingest import finish as _native_finish
    from .._native_ingest import new_step as _new_step
