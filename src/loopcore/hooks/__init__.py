"""``loopcore hook claude|codex|gemini``: the guard as a command hook of a coding CLI.

The harness starts one hook process per tool call with the event as JSON on stdin. The hook
restores the session's guard from SQLite (see ``_state``), asks it about the call (before it
runs) or records its outcome (after), writes the guard back in the same transaction and
answers in the harness's contract (see ``_contracts``). It is never in the way: a broken
database, a malformed event or a bad policy file answers allow (deny with ``--fail-closed``),
says why on stderr in one line, and exits within ``--budget`` seconds.

This path imports the guard, the policy, the harness profiles, sqlite3 and the stdlib json,
nothing else: no numpy, no rich, no trace adapters, no typing, no orjson (its import pulls in
uuid, datetime and dataclasses: more start-up than it saves on one small event), no argparse.
The hook runs before every tool call, so start-up is its cost (benchmarks/bench_hook.py). ``install`` / ``uninstall`` / ``status`` live in ``_install`` and are imported only
when asked for. User guide: docs/hooks/claude.md, codex.md, gemini.md.
"""

from __future__ import annotations

import _thread
import os
import sys
import time
from collections import namedtuple

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see below)
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import IO, Any

__all__ = ["DEFAULT_BUDGET", "HookOptions", "load_policy", "main", "run_hook"]

DEFAULT_BUDGET = 3.0
DEFAULT_TTL = 6 * 3600.0
DEFAULT_MAX_SESSIONS = 1000
_MAX_PENDING = 32

# The engine twin for tests that drive hooks in-process (None: the process-wide choice, which
# LOOPCORE_NO_EXTENSIONS sets for hook subprocesses).
_IMPLEMENTATION: str | None = None
# True in a real hook process (main reading the real stdin): it ends with os._exit.
_EXIT_FAST = False

_USAGE = """usage: loopcore hook {claude,codex,gemini} [--state DIR] [--policy NAME|FILE] [--fail-closed]
                     [--budget SECONDS] [--ttl SECONDS] [--max-sessions N]
       loopcore hook install {claude,codex,gemini} [--project | --user] [--dir DIR] [--dry-run] [...]
       loopcore hook uninstall {claude,codex,gemini} [--project | --user] [--dir DIR] [--dry-run]
       loopcore hook status [--json] [--state DIR]

Reads one hook event of the named harness on stdin and answers on stdout. See docs/hooks/."""


#: The options of one hook call: harness (claude/codex/gemini), state (directory or None),
#: policy (preset name, file or None), fail_closed, budget and ttl (seconds), max_sessions.
HookOptions = namedtuple(
    "HookOptions",
    "harness state policy fail_closed budget ttl max_sessions",
    defaults=(None, None, False, DEFAULT_BUDGET, DEFAULT_TTL, DEFAULT_MAX_SESSIONS),
)


class _UsageError(ValueError):
    pass


class _StateError(Exception):
    """The state database or directory could not be used (the message says why)."""


def _parse_options(argv: Sequence[str]) -> HookOptions:
    # Hand-rolled: argparse costs more start-up than the rest of a hook call's parsing.
    from ._contracts import HARNESSES

    if not argv or argv[0] not in HARNESSES:
        raise _UsageError(
            f"expected a harness ({', '.join(HARNESSES)}), got {argv[0] if argv else 'nothing'!r}"
        )
    kw: dict[str, Any] = {"harness": argv[0]}
    it = iter(argv[1:])
    for arg in it:
        name, eq, value = arg.partition("=")
        if name == "--fail-closed" and not eq:
            kw["fail_closed"] = True
            continue
        if name not in ("--state", "--policy", "--budget", "--ttl", "--max-sessions"):
            raise _UsageError(f"unknown option {arg!r}")
        if not eq:
            value = next(it, None)  # type: ignore[assignment]
            if value is None:
                raise _UsageError(f"{name} needs a value")
        key = name[2:].replace("-", "_")
        if key in ("budget", "ttl"):
            try:
                kw[key] = float(value)
            except ValueError:
                raise _UsageError(f"{name} must be a number of seconds, got {value!r}") from None
            if not kw[key] > 0:
                raise _UsageError(f"{name} must be positive, got {value!r}")
        elif key == "max_sessions":
            if not value.isdigit() or int(value) < 1:
                raise _UsageError(f"--max-sessions must be a positive integer, got {value!r}")
            kw[key] = int(value)
        else:
            kw[key] = value
    return HookOptions(**kw)


def load_policy(spec: str | None) -> Any:
    """The Policy named by *spec*: None (default), a preset name, or a .toml / .json file of Policy fields.

    A file may name a ``preset`` to start from; its other keys are Policy fields. Raises
    loopcore.PolicyError (a ValueError) naming the file and the bad field, or OSError.
    """
    from ..policy import Policy, PolicyError

    if spec is None or spec == "default":
        return Policy.default()
    if not (spec.endswith((".toml", ".json")) or os.sep in spec or os.path.exists(spec)):
        try:
            return Policy.preset(spec)
        except ValueError as exc:
            raise PolicyError(f"{exc} (or a path to a .toml / .json policy file)") from None
    with open(spec, "rb") as f:
        data = f.read()
    try:
        if spec.endswith(".toml"):
            import tomllib  # type: ignore[import-not-found,unused-ignore]

            doc = tomllib.loads(data.decode("utf-8"))
        else:
            import json

            doc = json.loads(data)
    except ValueError as exc:  # tomllib.TOMLDecodeError, json.JSONDecodeError, UnicodeDecodeError
        raise PolicyError(
            f"policy file {spec}: not valid {'TOML' if spec.endswith('.toml') else 'JSON'}: {exc}"
        ) from None
    if not isinstance(doc, dict):
        raise PolicyError(
            f"policy file {spec}: expected a table of Policy fields, got {type(doc).__name__}"
        )
    doc = dict(doc)
    preset = doc.pop("preset", None)
    try:
        base = Policy.preset(preset) if preset is not None else Policy.default()
        fields = base.to_dict()
        fields["name"] = os.path.splitext(os.path.basename(spec))[0]
        fields.update(doc)
        return Policy.from_dict(fields)
    except (TypeError, ValueError) as exc:
        raise PolicyError(f"policy file {spec}: {exc}") from None


class _Answer:
    """Writes the answer exactly once: the main path or the budget watchdog, whichever is first."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self.lock = _thread.allocate_lock()
        self.done = False

    def give(self, text: str) -> bool:
        with self.lock:
            if self.done:
                return False
            self.done = True
            if text:
                self.out.write(text + "\n")
            self.out.flush()
            return True


def _say(err: IO[str], harness: str, message: str) -> None:
    """One line on stderr (the harness shows it in its hook log)."""
    try:
        err.write(f"loopcore hook {harness}: {' '.join(message.split())}\n")
        err.flush()
    except (OSError, ValueError):
        pass


def run_hook(
    opts: HookOptions,
    raw: bytes | Callable[[], bytes],
    out: IO[str],
    err: IO[str],
    *,
    watchdog: bool = True,
) -> int:
    """Answer one hook event (*raw*: the stdin bytes, or a callable reading them); returns 0.

    With *watchdog*, a timer answers the fallback and exits the process when ``opts.budget``
    runs out, reading stdin included (the harness must never wait on the guard).
    """
    from ._contracts import HARNESSES, MalformedEvent, fallback, parse_event

    h = HARNESSES[opts.harness]
    ans = _Answer(out)
    deadline = time.monotonic() + opts.budget
    phase: str | None = None

    def give_up(why: str) -> int:
        _say(
            err,
            h.name,
            f"{why}; {'denying' if opts.fail_closed and phase in ('pre', None) else 'allowing'} the call",
        )
        ans.give(fallback(h, phase, opts.fail_closed, why))
        return 0

    if watchdog:

        def expire() -> None:
            if ans.give(fallback(h, phase, opts.fail_closed, "the guard ran out of time")):
                _say(
                    err,
                    h.name,
                    f"no answer within the {opts.budget:g} s budget; "
                    f"{'denying' if opts.fail_closed and phase in ('pre', None) else 'allowing'} the call",
                )
                os._exit(0)

        # A bare thread waiting on a held lock: release() cancels it. (threading.Timer's start()
        # waits until the new thread has run, which on a loaded machine can cost a scheduler
        # slice, several ms, on every call.)
        cancel = _thread.allocate_lock()
        cancel.acquire()

        def watch() -> None:
            if not cancel.acquire(timeout=opts.budget):
                expire()

        _thread.start_new_thread(watch, ())
    try:
        if callable(raw):
            raw = raw()
        try:
            ev = parse_event(h, raw)
        except MalformedEvent as exc:
            return give_up(f"malformed event: {exc}")
        phase = ev.phase
        if phase is None:
            return give_up(
                f"{ev.name!r} is not an event this hook handles (install it on "
                f"{h.pre}/{h.post}{'/' + h.failure if h.failure else ''})"
            )
        try:
            policy = load_policy(opts.policy)
        except (OSError, ValueError) as exc:
            return give_up(f"policy: {exc}")
        try:
            text = _decide(h, ev, policy, opts, err, deadline)
        except _StateError as exc:
            return give_up(str(exc))
        ans.give(text)
        return 0
    except Exception as exc:  # noqa: BLE001 - a bug in the guard must never stop the harness
        return give_up(f"internal error {type(exc).__name__}: {exc}")
    finally:
        if watchdog:
            cancel.release()


def _classify(h: Any, ev: Any) -> tuple[Any, Any]:
    from ..taxonomy.profiles import PROFILES

    prof = PROFILES[h.profile]
    args = ev.args
    if (
        h.name == "codex"
        and ev.tool == "apply_patch"
        and isinstance(args, dict)
        and isinstance(args.get("command"), str)
    ):
        return prof.classify(
            "apply_patch", args["command"]
        )  # Codex sends the patch body as tool_input.command
    return prof.classify(ev.tool, args)


# Connections a hook process leaves open on purpose (see main: the process ends with os._exit).
_KEEP: list[Any] = []


def _decide(h: Any, ev: Any, policy: Any, opts: HookOptions, err: IO[str], deadline: float) -> str:
    """The answer text, after one transaction on the session's row; raises _StateError."""
    import json

    from ..guard import _make_guard, _restore_guard
    from ._contracts import answer
    from ._state import Store, sqlite3, state_dir

    kind, target = _classify(h, ev)
    # Wait for the lock with most of what is left of the budget, keeping time to answer.
    busy = max(0.05, (deadline - time.monotonic()) * 0.7)
    store = Store(state_dir(opts.state), busy=busy, ttl=opts.ttl, max_sessions=opts.max_sessions)
    events: list[dict[str, Any]] = []
    action, message, context = "allow", "", None
    try:
        store.open()
        try:
            row = store.load(h.name, ev.session)
            guard, pending, created = None, None, None
            if row is not None:
                snap, pending, created = row
                try:
                    guard = _restore_guard(
                        snap,
                        impl=_IMPLEMENTATION,
                        policy=policy,
                        on_event=events.append,
                        ttl=None,
                    )
                except ValueError as exc:
                    _say(
                        err,
                        h.name,
                        f"session {ev.session!r}: its saved guard state is unusable ({exc}); "
                        "starting the session afresh",
                    )
                    pending = created = None
            if guard is None:
                guard = _make_guard(policy, impl=_IMPLEMENTATION, on_event=events.append, ttl=None)
            if ev.phase == "pre":
                d = guard.check(
                    ev.session,
                    ev.tool,
                    ev.args,
                    run_id=ev.run_id,
                    kind=kind,
                    target=target,
                    call_id=ev.call_id,
                )
                action = d.action
                if action != "allow":
                    message = d.message
                    if (
                        action == "warn" and h.json_only
                    ):  # Gemini CLI: delivered on the call's AfterTool
                        pend = json.loads(pending) if pending else []
                        pend.append([_call_key(guard, ev), message])
                        pending = json.dumps(pend[-_MAX_PENDING:], separators=(",", ":"))
            else:
                guard.record(
                    ev.session,
                    ev.tool,
                    ev.args,
                    ev.result,
                    error=ev.error,
                    run_id=ev.run_id,
                    call_id=ev.call_id,
                    kind=kind,
                    target=target,
                )
                if pending and h.json_only:
                    pend = json.loads(pending)
                    key = _call_key(guard, ev)
                    for i, (k, msg) in enumerate(pend):
                        if k == key:
                            context = msg
                            del pend[i]
                            break
                    pending = json.dumps(pend, separators=(",", ":")) if pend else None
            last = None
            if events:
                e = events[-1]
                last = json.dumps(
                    {
                        "level": e["level"],
                        "detector": e["detector"],
                        "tool": e["tool"],
                        "count": e["count"],
                        "call_id": ev.call_id,
                    },
                    separators=(",", ":"),
                )
            store.save(h.name, ev.session, guard.snapshot(), guard.stats(), pending, last, created)
            store.commit()
        except BaseException:
            if store.con is not None and store.con.in_transaction:
                store.con.execute("ROLLBACK")
            raise
    except sqlite3.DatabaseError as exc:
        text = str(exc)
        if type(exc) is sqlite3.DatabaseError or "malformed" in text or "not a database" in text:
            try:
                dest = store.quarantine()
            except OSError as exc2:
                raise _StateError(
                    f"state database {store.path} is corrupt ({text}) and could not be moved "
                    f"aside ({exc2})"
                ) from None
            raise _StateError(
                f"state database {store.path} is corrupt ({text}); moved it to {dest}, "
                "the next call starts a fresh one"
            ) from None
        raise _StateError(f"state database {store.path}: {text}") from None
    except OSError as exc:
        raise _StateError(f"state directory {store.directory}: {exc}") from None
    finally:
        if _EXIT_FAST and store.con is not None and not store.con.in_transaction:
            # Closing the last connection checkpoints the WAL into the database and fsyncs it, a
            # large part of a hook call's time (benchmarks/bench_hook.py). The transaction is
            # committed; SQLite checkpoints the WAL itself every wal_autocheckpoint pages.
            _KEEP.append(store.con)
            store.con = None
        store.close()
    if events:
        try:
            now = time.time()
            store.log_events(
                [
                    json.dumps(
                        {**e, "time": now, "harness": h.name, "call_id": ev.call_id},
                        default=str,
                        separators=(",", ":"),
                    ).encode()
                    for e in events
                ]
            )
        except OSError as exc:
            _say(err, h.name, f"could not append to {store.events_path}: {exc}")
    return answer(h, ev, action, message, context)


def _call_key(guard: Any, ev: Any) -> str:
    return f"{guard.args_hash(ev.tool, ev.args):016x}"


def main(
    argv: Sequence[str] | None = None,
    *,
    stdin: IO[bytes] | None = None,
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
) -> int:
    """``loopcore hook ...`` with *argv* (default ``sys.argv[1:]``); returns the exit code.

    A hook call on the real stdin (*stdin* None) ends the process itself once it has answered.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    if argv and argv[0] in ("install", "uninstall", "status"):
        from ._install import main as admin_main

        return admin_main(argv, out, err)
    if not argv or argv[0] in ("-h", "--help"):
        (out if argv else err).write(_USAGE + "\n")
        return 0 if argv else 2
    from .. import _guard_snapshot
    from .. import guard as _guard

    # The guard also logs each event to the "loopcore" logger; with no handler configured Python
    # would print it on stderr, which a harness may read as the hook's output. The guard makes
    # that logger (with a NullHandler, so) only when it has an event to log.
    _guard._QUIET_LOGGER = True
    # One small session per process: the stdlib json costs less than importing orjson.
    _guard_snapshot.FAST_JSON = False
    try:
        opts = _parse_options(argv)
    except _UsageError as exc:
        # Still answer: an exit code 2 would make Claude Code block every call.
        harness = argv[0] if argv[0] in ("claude", "codex", "gemini") else "?"
        _say(err, harness, f"usage error: {exc}; allowing the call (see loopcore hook --help)")
        if harness == "gemini":
            out.write("{}\n")
        return 0
    if stdin is not None:
        return run_hook(opts, stdin.read, out, err, watchdog=False)
    global _EXIT_FAST
    _EXIT_FAST = True
    rc = run_hook(opts, sys.stdin.buffer.read, out, err)
    # The answer is written: end here. Interpreter teardown (freeing every module) and the
    # database close would add their cost to every tool call of the harness.
    for stream in (out, err):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(rc)
