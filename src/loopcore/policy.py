"""Guard policies: which detectors run, their thresholds, and the result-hashing rules.

A :class:`Policy` is plain, immutable data. ``Policy.default()`` is loopcore's own choice; the
other presets reproduce the loop detectors that agent harnesses ship (OpenClaw, opencode,
gemini-cli, OpenHands, Roo Code / cline) within loopcore's detector vocabulary.

Counting conventions (the same in every preset):

* ``generic_repeat``, ``poll_no_progress``, ``global_breaker``, ``unknown_tool``,
  ``error_streak``, ``redundant_observation`` and ``monologue`` count the calls recorded
  *before* the one being checked.
* ``tool_budget``, ``cycle`` and ``consecutive_repeat`` count the attempt being checked too:
  the 25th todo write is warned at budget 25; the third identical call is blocked at
  ``consecutive_repeat`` block 3 (opencode's doom loop); a ping-pong of 9 recorded calls plus
  the checked one is 10 calls (OpenClaw's ``ping_pong``).

A threshold of ``None`` switches that level off; ``enabled=False`` switches a detector off.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from dataclasses import dataclass as _record
    from dataclasses import field
    from typing import Any
else:
    # A hook process builds one Policy per call: importing dataclasses (and the inspect, ast and
    # dis it pulls in) and generating the class would be a fifth of the hook's start-up. Type
    # checkers read Policy as the frozen dataclass below; at run time this small equivalent makes
    # it (keyword or positional construction with defaults and factories, __post_init__,
    # frozen attributes, field-wise ==, hash and repr).

    class _Factory:
        __slots__ = ("make",)

        def __init__(self, make):
            self.make = make

    def field(*, default_factory):
        return _Factory(default_factory)

    def _record(*, frozen):
        def build(cls):
            names = tuple(cls.__annotations__)
            defaults = {n: cls.__dict__[n] for n in names}
            for n, v in defaults.items():
                if isinstance(v, _Factory):
                    delattr(cls, n)
            qual = cls.__qualname__

            def __init__(self, *args, **kw):
                if len(args) > len(names):
                    raise TypeError(f"{qual}() takes at most {len(names)} positional arguments")
                for n, v in zip(names, args):
                    if n in kw:
                        raise TypeError(f"{qual}() got multiple values for argument {n!r}")
                    kw[n] = v
                d = self.__dict__
                for n in names:
                    if n in kw:
                        d[n] = kw.pop(n)
                    else:
                        v = defaults[n]
                        d[n] = v.make() if isinstance(v, _Factory) else v
                if kw:
                    raise TypeError(
                        f"{qual}() got an unexpected keyword argument {next(iter(kw))!r}"
                    )
                self.__post_init__()

            def _frozen(self, name, value=None):
                raise AttributeError(f"cannot assign to field {name!r}: {qual} is frozen")

            def __eq__(self, other):
                if other.__class__ is not self.__class__:
                    return NotImplemented
                return all(getattr(self, n) == getattr(other, n) for n in names)

            def __hash__(self):
                return hash(tuple(getattr(self, n) for n in names))

            def __repr__(self):
                return f"{qual}({', '.join(f'{n}={getattr(self, n)!r}' for n in names)})"

            cls.__init__ = __init__
            cls.__setattr__ = cls.__delattr__ = _frozen
            cls.__eq__, cls.__hash__, cls.__repr__ = __eq__, __hash__, __repr__
            cls._field_names = names
            return cls

        return build


__all__ = [
    "DEFAULT_BUDGET_TOOLS",
    "DEFAULT_EXEC_TOOLS",
    "DEFAULT_SEND_ACTIONS",
    "DEFAULT_VOLATILE_KEYS",
    "DETECTORS",
    "Policy",
    "PolicyError",
]

#: Every detector the guard knows, in the order it reports them when several fire at once.
DETECTORS = (
    "unknown_tool",
    "global_breaker",
    "poll_no_progress",
    "cycle",
    "error_streak",
    "consecutive_repeat",
    "monologue",
    "generic_repeat",
    "tool_budget",
    "redundant_observation",
    "compaction_loop",
    "context_loop",
    "content_loop",
)

#: Per-call ids and timestamps a delivery result carries (docs/guard.md, Result hashing). A fresh message id
#: on every send made 30 identical sends look like progress (the duplicate-message incident).
#: Matching is exact and case-sensitive.
DEFAULT_VOLATILE_KEYS = frozenset(
    {
        "messageId",
        "message_id",
        "messageIds",
        "platformMessageId",
        "platformMessageIds",
        "fileId",
        "file_id",
        "fileKey",
        "pollId",
        "poll_id",
        "receipt",
        "runId",
        "idempotencyKey",
        "ts",
        "timestamp",
        "sentAt",
        "deliveredAt",
        "createdAt",
    }
)

#: ``action`` values of a message tool whose results carry fresh delivery ids.
DEFAULT_SEND_ACTIONS = frozenset(
    {
        "send",
        "broadcast",
        "reply",
        "thread-reply",
        "sendWithEffect",
        "sendAttachment",
        "upload-file",
        "sticker",
        "poll",
    }
)

#: The todo/plan tools of the todo-list incident (docs/guard.md, tool_budget).
DEFAULT_BUDGET_TOOLS = ("update_plan", "TodoWrite", "todowrite", "todo_write")

#: Shell/exec tools whose results are judged on status, exit code and output only: durations,
#: pids, cwd and timestamps change on every run and are not progress (docs/guard.md, Result hashing).
DEFAULT_EXEC_TOOLS = frozenset(
    {
        "exec",
        "shell",
        "bash",
        "Bash",
        "local_shell",
        "run_shell_command",
        "execute_command",
        "execute_bash",
        "run_terminal_cmd",
        "run_command",
    }
)

PRESETS = ("default", "openclaw", "opencode", "gemini_cli", "openhands", "cline", "roo", "altimate")


class PolicyError(ValueError):
    """A Policy field has an invalid value (the message names the field and the rule)."""


def _budgets(
    warn: int | None, block: int | None, tools: Iterable[str] = DEFAULT_BUDGET_TOOLS
) -> dict[str, tuple[int | None, int | None]]:
    return {t: (warn, block) for t in tools}


@_record(frozen=True)
class Policy:
    """Detector switches, thresholds and hashing rules of a :class:`loopcore.Guard`.

    Construct with keyword arguments or start from a preset and ``replace(...)`` fields.
    Construction validates every field and raises :class:`PolicyError` (a ValueError) naming
    the field when a threshold is not a positive int, or a warn threshold is not below its
    block threshold.
    """

    #: the master switch: ``False`` allows every call and emits nothing (gemini-cli's and
    #: OpenClaw's "loop detection disabled").
    enabled: bool = True

    #: ring-buffer length: how many recent calls per session the detectors see.
    window: int = 30

    #: cumulative calls of one tool in a session: ``{tool: (warn, block)}``.
    tool_budget: bool = True
    budgets: Mapping[str, tuple[int | None, int | None]] = field(
        default_factory=lambda: _budgets(25, 50)
    )
    #: warn only at the exact warn count (altimate's todowrite cap), not at every call above it.
    budget_warn_once: bool = False

    #: same tool + same canonical args within the window; block only with identical outcomes.
    generic_repeat: bool = True
    generic_warn: int | None = 10
    generic_block: int | None = 20

    #: polling calls whose outcome does not change.
    poll_no_progress: bool = True
    poll_warn: int | None = 10
    poll_block: int | None = 20
    #: tools that always poll, and tools that poll when their ``action`` argument is one of these.
    poll_tools: frozenset[str] = frozenset({"command_status"})
    poll_actions: Mapping[str, frozenset[str]] = field(
        default_factory=lambda: {"process": frozenset({"poll", "log"})}
    )

    #: a cycle of 2..5 distinct calls repeating (A,B,A,B / A,B,C,A,B,C).
    cycle: bool = True
    cycle_warn: int | None = 10
    cycle_block: int | None = 20
    cycle_periods: tuple[int, ...] = (2, 3, 4, 5)
    #: ``"calls"`` counts the calls in the repeating run, ``"repeats"`` the repetitions of it.
    cycle_unit: str = "calls"
    cycle_block_needs_no_progress: bool = True
    #: that evidence is the newest calls that reach ``cycle_block`` (OpenHands looks at its last
    #: six events), not the whole alternating run (OpenClaw: one earlier call without an outcome
    #: in the run keeps it from blocking).
    cycle_evidence_recent: bool = False

    #: the same call made consecutively (period 1); used by the opencode/cline/gemini presets.
    consecutive_repeat: bool = False
    repeat_warn: int | None = None
    repeat_block: int | None = None
    repeat_block_needs_no_progress: bool = False
    #: the warning too needs identical outcomes of the repeated calls (Policy.default()).
    repeat_warn_needs_no_progress: bool = False
    #: warn only at the exact warn count (cline's soft limit), not at every repeat above it.
    repeat_warn_once: bool = False
    #: after a refusal the consecutive count starts again (Roo Code's ToolRepetitionDetector).
    repeat_reset_after_block: bool = False

    #: any identical-call no-progress streak.
    global_breaker: bool = True
    global_block: int | None = 30
    #: the breaker also counts a tool cycling over 2-3 argument variants, each with one stable
    #: outcome (OpenClaw's argument churn); probes of other arguments may be 1 in 10 of the calls.
    argument_churn: bool = True

    #: repeated calls to a tool that does not exist.
    unknown_tool: bool = True
    unknown_block: int | None = 10
    #: when set, any tool outside this set is unknown; else an error saying so marks it.
    known_tools: frozenset[str] | None = None

    #: the same call failing the same way again and again.
    error_streak: bool = True
    error_warn: int | None = 3
    error_block: int | None = 5
    #: count failures of the same call whatever their error text (OpenHands); else the same text.
    error_any_text: bool = False

    #: re-observing a target that nothing changed since (needs kind/target or classify).
    redundant_observation: bool = True
    redundant_warn: int | None = 1

    #: identical consecutive agent messages (calls of kind ``ask``) with no tool call between.
    monologue: bool = False
    monologue_block: int | None = 3
    #: agent messages count whatever they say, and the checked one counts too (the OpenHands
    #: SDK: three agent messages in a row with no tool call between are a monologue).
    monologue_any_text: bool = False

    #: after ``Guard.note_compaction``, the first ``compaction_window`` calls all identical
    #: (tool, args, outcome): the next identical call is refused (OpenClaw's post-compaction guard).
    compaction_loop: bool = True
    compaction_window: int = 3

    #: ``context_block`` context-window condensations in a row (``Guard.note_event``) with
    #: nothing between them: the last is refused (OpenHands' context-window error loop).
    context_loop: bool = False
    context_block: int | None = 10

    #: content loops in streamed reply text (``Guard.check_text``, gemini-cli's chanting rules).
    content_loop: bool = True

    #: top-level argument keys left out when calls are compared (metadata that changes on every
    #: call while the call itself stays the same: cline's ``task_progress`` checklist).
    ignored_args: frozenset[str] = frozenset()

    #: result hashing rules.
    volatile_keys: frozenset[str] = DEFAULT_VOLATILE_KEYS
    send_actions: frozenset[str] = DEFAULT_SEND_ACTIONS
    message_tools: frozenset[str] = frozenset({"message"})
    send_tools: frozenset[str] = frozenset({"sessions_send"})
    exec_tools: frozenset[str] = DEFAULT_EXEC_TOOLS

    #: warnings of one key are emitted once per bucket of this many counts.
    event_bucket: int = 10

    name: str = "custom"

    def __post_init__(self) -> None:
        setattr_ = object.__setattr__
        for fname in (
            "poll_tools",
            "ignored_args",
            "volatile_keys",
            "send_actions",
            "message_tools",
            "send_tools",
            "exec_tools",
        ):
            value = getattr(self, fname)
            if isinstance(value, (str, bytes)):
                raise PolicyError(
                    f"Policy.{fname} must be a collection of names, not a single string"
                )
            setattr_(self, fname, frozenset(value))
        if self.known_tools is not None:
            if isinstance(self.known_tools, (str, bytes)):
                raise PolicyError(
                    "Policy.known_tools must be a collection of names, not a single string"
                )
            setattr_(self, "known_tools", frozenset(self.known_tools))
        setattr_(
            self, "poll_actions", {str(k): frozenset(v) for k, v in dict(self.poll_actions).items()}
        )
        budgets = {}
        for tool, pair in dict(self.budgets).items():
            if not isinstance(tool, str) or not tool:
                raise PolicyError(f"Policy.budgets keys must be tool names; got {tool!r}")
            try:
                warn, block = pair
            except (TypeError, ValueError):
                raise PolicyError(
                    f"Policy.budgets[{tool!r}] must be a (warn, block) pair; got {pair!r}"
                ) from None
            _check_pair(f"budgets[{tool!r}]", warn, block)
            budgets[tool] = (warn, block)
        setattr_(self, "budgets", budgets)
        _check_positive("window", self.window)
        _check_positive("compaction_window", self.compaction_window)
        if self.window > 4096:
            raise PolicyError(f"Policy.window must be at most 4096; got {self.window}")
        _check_positive("event_bucket", self.event_bucket)
        _check_pair("generic_warn/generic_block", self.generic_warn, self.generic_block)
        _check_pair("poll_warn/poll_block", self.poll_warn, self.poll_block)
        _check_pair("cycle_warn/cycle_block", self.cycle_warn, self.cycle_block)
        _check_pair("repeat_warn/repeat_block", self.repeat_warn, self.repeat_block)
        _check_pair("error_warn/error_block", self.error_warn, self.error_block)
        for fname in (
            "global_block",
            "unknown_block",
            "redundant_warn",
            "monologue_block",
            "context_block",
        ):
            value = getattr(self, fname)
            if value is not None:
                _check_positive(fname, value)
        periods = tuple(self.cycle_periods)
        if not periods or any(not _is_int(k) or not 2 <= k <= 5 for k in periods):
            raise PolicyError(
                f"Policy.cycle_periods must be a non-empty set of ints in 2..5; got {self.cycle_periods!r}"
            )
        setattr_(self, "cycle_periods", tuple(sorted(set(periods))))
        if self.cycle_unit not in ("calls", "repeats"):
            raise PolicyError(
                f"Policy.cycle_unit must be 'calls' or 'repeats'; got {self.cycle_unit!r}"
            )
        for fname in (
            "tool_budget",
            "generic_repeat",
            "poll_no_progress",
            "cycle",
            "consecutive_repeat",
            "global_breaker",
            "unknown_tool",
            "error_streak",
            "redundant_observation",
            "monologue",
            "cycle_block_needs_no_progress",
            "cycle_evidence_recent",
            "repeat_block_needs_no_progress",
            "enabled",
            "budget_warn_once",
            "repeat_warn_needs_no_progress",
            "repeat_warn_once",
            "repeat_reset_after_block",
            "argument_churn",
            "error_any_text",
            "monologue_any_text",
            "compaction_loop",
            "context_loop",
            "content_loop",
        ):
            if not isinstance(getattr(self, fname), bool):
                raise PolicyError(
                    f"Policy.{fname} must be True or False; got {getattr(self, fname)!r}"
                )

    # -- construction -----------------------------------------------------------------------

    def replace(self, **changes: Any) -> Policy:
        """A copy with *changes* applied (validated again; raises PolicyError like the constructor)."""
        if "name" not in changes:
            changes["name"] = "custom" if self.name == "custom" else f"{self.name}+custom"
        return type(self)(**{**{n: getattr(self, n) for n in _FIELD_NAMES}, **changes})

    def detector_on(self, detector: str) -> bool:
        """True when *detector* (a name from DETECTORS) is switched on (and the policy enabled);
        KeyError for unknown names."""
        if detector not in DETECTORS:
            raise KeyError(f"unknown detector {detector!r}; expected one of {', '.join(DETECTORS)}")
        return self.enabled and bool(getattr(self, detector))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field (sets as sorted lists); Policy.from_dict inverts it."""
        out: dict[str, Any] = {}
        for fname in _FIELD_NAMES:
            v = getattr(self, fname)
            if isinstance(v, frozenset):
                v = sorted(v)
            elif fname == "budgets":
                v = {k: list(p) for k, p in v.items()}
            elif fname == "poll_actions":
                v = {k: sorted(a) for k, a in v.items()}
            elif isinstance(v, tuple):
                v = list(v)
            out[fname] = v
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Policy:
        """Inverse of to_dict; raises PolicyError for unknown fields or invalid values."""
        names = set(_FIELD_NAMES)
        unknown = set(data) - names
        if unknown:
            raise PolicyError(f"unknown Policy fields: {', '.join(sorted(unknown))}")
        kw = dict(data)
        if "budgets" in kw:
            kw["budgets"] = {k: tuple(v) for k, v in kw["budgets"].items()}
        if "cycle_periods" in kw:
            kw["cycle_periods"] = tuple(kw["cycle_periods"])
        return cls(**kw)

    # -- presets ----------------------------------------------------------------------------

    @classmethod
    def presets(cls) -> tuple[str, ...]:
        """Names accepted by Policy.preset, in a stable order."""
        return PRESETS

    @classmethod
    def preset(cls, name: str) -> Policy:
        """The preset called *name* (see presets()); raises ValueError naming the valid names."""
        key = name.strip().lower().replace("-", "_")
        if key not in PRESETS:
            raise ValueError(
                f"unknown policy preset {name!r}; expected one of {', '.join(PRESETS)}"
            )
        preset: Policy = getattr(cls, key)()
        return preset

    @classmethod
    def default(cls) -> Policy:
        """loopcore's policy: every detector at its default thresholds, plus the tight loop:
        the 3rd consecutive identical call with identical outcomes is warned, the 5th refused.

        A re-run after anything else (an edit of what it reads) is not consecutive, so it never
        counts; known polling calls are judged by ``poll_no_progress`` instead.
        """
        return cls(
            name="default",
            consecutive_repeat=True,
            repeat_warn=3,
            repeat_block=5,
            repeat_block_needs_no_progress=True,
            repeat_warn_needs_no_progress=True,
        )

    @classmethod
    def openclaw(cls) -> Policy:
        """OpenClaw's tool-loop detection: generic repeat, known polls, ping-pong, global breaker.

        Window 30, warn 10, critical 20, breaker 30, unknown tool 10; ping-pong is a cycle of
        period 2 only; no todo budget, no error streak, no redundant-observation warnings.
        """
        return cls(
            name="openclaw",
            tool_budget=False,
            budgets={},
            cycle_periods=(2,),
            error_streak=False,
            redundant_observation=False,
        )

    @classmethod
    def opencode(cls) -> Policy:
        """opencode's doom-loop check: the 3rd identical consecutive call asks (here: blocks)."""
        return _only(cls, "opencode", consecutive_repeat=True, repeat_warn=None, repeat_block=3)

    @classmethod
    def gemini_cli(cls) -> Policy:
        """gemini-cli's loop detection: a cycle of length k = 1..5 repeated 5 times blocks.

        The checked call counts: the 5th identical consecutive call is blocked, as gemini-cli
        stops the turn on the 5th identical tool-call request.
        """
        return _only(
            cls,
            "gemini_cli",
            consecutive_repeat=True,
            repeat_warn=None,
            repeat_block=5,
            cycle=True,
            cycle_periods=(2, 3, 4, 5),
            cycle_unit="repeats",
            cycle_warn=None,
            cycle_block=5,
            cycle_block_needs_no_progress=False,
            content_loop=True,
        )

    @classmethod
    def openhands(cls) -> Policy:
        """OpenHands' StuckDetector: 4 identical action/observation pairs, 3 identical failing
        actions, 3 identical agent messages, or A,B alternating over 6 steps (all recorded
        before the checked call) stop the agent."""
        return _only(
            cls,
            "openhands",
            consecutive_repeat=True,
            repeat_warn=None,
            repeat_block=5,
            repeat_block_needs_no_progress=True,
            error_streak=True,
            error_warn=None,
            error_block=3,
            error_any_text=True,
            monologue=True,
            monologue_block=3,
            monologue_any_text=True,
            context_loop=True,
            context_block=10,
            cycle=True,
            cycle_periods=(2,),
            cycle_warn=None,
            cycle_block=7,
            cycle_block_needs_no_progress=True,
            cycle_evidence_recent=True,
        )

    @classmethod
    def cline(cls) -> Policy:
        """cline's loop detection: identical consecutive calls, warned exactly at the 3rd,
        refused from the 5th; the ``task_progress`` checklist is not part of a call."""
        return _only(
            cls,
            "cline",
            consecutive_repeat=True,
            repeat_warn=3,
            repeat_block=5,
            repeat_warn_once=True,
            ignored_args=frozenset({"task_progress"}),
        )

    @classmethod
    def roo(cls) -> Policy:
        """Roo Code's ToolRepetitionDetector (limit 3): the 4th identical consecutive call is
        refused, and after a refusal the count starts again."""
        return _only(
            cls,
            "roo",
            consecutive_repeat=True,
            repeat_warn=None,
            repeat_block=4,
            repeat_reset_after_block=True,
        )

    @classmethod
    def altimate(cls) -> Policy:
        """altimate-code's todowrite cap as a per-session budget: warned exactly at the 25th
        todo write, silent from the 26th to the 49th, refused from the 50th (refused attempts count)."""
        return _only(
            cls, "altimate", tool_budget=True, budgets=_budgets(25, 50), budget_warn_once=True
        )


#: the fields of Policy, in order (its annotations: every one is a field).
_FIELD_NAMES: tuple[str, ...] = tuple(Policy.__annotations__)


def _only(cls: type[Policy], name: str, **on: Any) -> Policy:
    """A preset with every detector off except those in *on* (the peers ship one detector)."""
    off: dict[str, Any] = {
        "tool_budget": False,
        "budgets": {},
        "generic_repeat": False,
        "poll_no_progress": False,
        "cycle": False,
        "consecutive_repeat": False,
        "global_breaker": False,
        "unknown_tool": False,
        "error_streak": False,
        "redundant_observation": False,
        "monologue": False,
        "compaction_loop": False,
        "context_loop": False,
        "content_loop": False,
    }
    off.update(on)
    return cls(name=name, **off)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_positive(name: str, value: Any) -> None:
    if not _is_int(value) or value < 1:
        raise PolicyError(f"Policy.{name} must be a positive int; got {value!r}")


def _check_pair(name: str, warn: Any, block: Any) -> None:
    wname, _, bname = name.partition("/")
    bname = bname or name
    if warn is not None:
        _check_positive(wname if bname != name else f"{name} warn", warn)
    if block is not None:
        _check_positive(bname if bname != name else f"{name} block", block)
    if warn is not None and block is not None and not warn < block:
        raise PolicyError(
            f"Policy.{name}: the warn threshold ({warn}) must be below the block threshold ({block})"
        )
