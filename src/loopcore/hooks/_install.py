"""``loopcore hook install | uninstall | status``: write the harness's settings, show the state.

``install`` merges loopcore's hook entries into the settings file the harness reads, keeping
every other setting (and the file's indentation) as it was; running it again changes nothing,
and ``uninstall`` removes exactly the entries it added. Which file (docs/hooks/):

* Claude Code: ``.claude/settings.json`` (``--user``: ``~/.claude/settings.json``).
* Codex: ``.codex/hooks.json`` (``--user``: ``$CODEX_HOME/hooks.json``, default ``~/.codex``).
  Codex reads hooks from ``hooks.json`` or from ``[hooks]`` tables in ``config.toml``; the JSON
  file is the one that can be merged without rewriting the user's TOML.
* Gemini CLI: ``.gemini/settings.json`` (``--user``: ``~/.gemini/settings.json``).
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import shlex
import sys
import time
from collections.abc import Sequence
from typing import IO, Any

from ._contracts import HARNESSES

__all__ = ["hook_command", "install", "main", "settings_path", "uninstall"]

#: Seconds the harness waits for the hook (Gemini CLI counts in milliseconds).
HOOK_TIMEOUT = 10

# A handler is loopcore's when its command runs the hook for that harness, however it was started.
_OURS = re.compile(
    r"(?:loopcore-hook|loopcore\.hooks(?: import main;sys\.exit\(main\(\)\))?|loopcore(?:\.exe)?['\"]?\s+hook)"
    r"['\"]?\s+(claude|codex|gemini)\b"
)


class InstallError(Exception):
    """The settings file cannot be read or written (the message names it)."""


def settings_path(harness: str, *, user: bool, directory: str | None = None) -> str:
    """The settings file *harness* reads: the project's under *directory* (default cwd), or the user's."""
    home = os.path.expanduser("~")
    if harness == "claude":
        return os.path.join(
            home if user else (directory or os.getcwd()), ".claude", "settings.json"
        )
    if harness == "codex":
        if user:
            return os.path.join(
                os.environ.get("CODEX_HOME") or os.path.join(home, ".codex"), "hooks.json"
            )
        return os.path.join(directory or os.getcwd(), ".codex", "hooks.json")
    if harness == "gemini":
        return os.path.join(
            home if user else (directory or os.getcwd()), ".gemini", "settings.json"
        )
    raise InstallError(f"unknown harness {harness!r}; expected one of {', '.join(HARNESSES)}")


def fast_entry() -> str:
    """``python -I -S -c ...`` that imports loopcore.hooks from where this install has it.

    ``-S`` skips ``site`` (the .pth files of every installed package) and ``-c`` skips runpy:
    the two cost more than the hook's own work (benchmarks/bench_hook.py). The directories of
    loopcore and of its one third-party import on the hook path (xxhash) go on ``sys.path`` by
    hand. ``-I`` also keeps the project directory the harness runs in (and PYTHONPATH) off
    ``sys.path``, so nothing there can shadow a module. Run ``install`` again after moving the
    environment.
    """
    import importlib.util

    dirs: list[str] = []
    for name in ("loopcore", "xxhash"):
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            raise InstallError(f"cannot find the {name} package of this Python ({sys.executable})")
        d = os.path.dirname(os.path.abspath(list(spec.submodule_search_locations)[0]))
        if d not in dirs:
            dirs.append(d)
    code = f"import sys;sys.path[:0]={json.dumps(dirs)};from loopcore.hooks import main;sys.exit(main())"
    return shlex.join([sys.executable, "-I", "-S", "-c", code])


def hook_command(
    harness: str,
    *,
    state: str | None = None,
    policy: str | None = None,
    fail_closed: bool = False,
    base: str | None = None,
) -> str:
    """The shell command the harness runs: :func:`fast_entry` (or *base*), the harness, and the options given."""
    if base is None:
        base = fast_entry()
    parts = [harness]
    if state:
        parts += ["--state", os.path.abspath(os.path.expanduser(state))]
    if policy:
        parts += ["--policy", os.path.abspath(policy) if os.path.exists(policy) else policy]
    if fail_closed:
        parts.append("--fail-closed")
    return f"{base} {shlex.join(parts)}"


def _handler(harness: str, command: str) -> dict[str, Any]:
    if harness == "gemini":
        return {
            "name": "loopcore",
            "type": "command",
            "command": command,
            "timeout": HOOK_TIMEOUT * 1000,
        }
    return {"type": "command", "command": command, "timeout": HOOK_TIMEOUT}


def _events(harness: str) -> list[str]:
    h = HARNESSES[harness]
    return [e for e in (h.pre, h.post, h.failure) if e]


def _is_ours(handler: Any, harness: str) -> bool:
    if not isinstance(handler, dict) or not isinstance(handler.get("command"), str):
        return False
    m = _OURS.search(handler["command"])
    return m is not None and m.group(1) == harness


def _read(path: str) -> tuple[str, dict[str, Any]]:
    try:
        with open(path, encoding="utf-8", newline="") as f:
            text = f.read()
    except FileNotFoundError:
        return "", {}
    except OSError as exc:
        raise InstallError(f"cannot read {path}: {exc}") from None
    if not text.strip():
        return text, {}
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise InstallError(
            f"{path} is not plain JSON ({exc}); fix it (or remove its comments) and run again, "
            "nothing was changed"
        ) from None
    if not isinstance(doc, dict):
        raise InstallError(
            f"{path}: expected a JSON object at the top, found {type(doc).__name__}; nothing was changed"
        )
    return text, doc


def _render(doc: dict[str, Any], old_text: str) -> str:
    indent: int | str = 2
    m = re.search(r"^([ \t]+)\S", old_text, re.MULTILINE)
    if m:
        ws = m.group(1)
        indent = "\t" if "\t" in ws else len(ws)
    ascii_only = bool(old_text) and "\\u" in old_text
    text = json.dumps(doc, indent=indent, ensure_ascii=ascii_only)
    if "\r\n" in old_text:
        text = text.replace("\n", "\r\n")
    if not old_text or old_text.endswith("\n"):  # a file without a final newline stays so
        text += "\r\n" if "\r\n" in old_text else "\n"
    return text


# -- editing the file's text in place -------------------------------------------------------
# install appends loopcore's groups (and the "hooks" / event keys it needs) to the file's text and
# uninstall cuts exactly those spans out, so a file in any layout (inline arrays, CRLF, no final
# newline) comes back byte for byte. Whatever this cannot express falls back to re-rendering.

_WS = " \t\r\n"
_DECODER = json.JSONDecoder()


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WS:
        i += 1
    return i


def _entries(text: str, i: int) -> tuple[list[tuple[Any, int, int, int]], int]:
    """The entries of the object or array opening at *i*: (key or index, start, value start, end), and the closer's index."""
    close = "}" if text[i] == "{" else "]"
    out: list[tuple[Any, int, int, int]] = []
    j = _skip(text, i + 1)
    if text[j] == close:
        return out, j
    while True:
        start = j
        key: Any = len(out)
        if close == "}":
            key, j = _DECODER.raw_decode(text, j)
            j = _skip(text, j)
            if text[j] != ":":
                raise ValueError("expected ':'")
            j = _skip(text, j + 1)
        vstart = j
        _, j = _DECODER.raw_decode(text, j)
        out.append((key, start, vstart, j))
        j = _skip(text, j)
        if text[j] == ",":
            j = _skip(text, j + 1)
        elif text[j] == close:
            return out, j
        else:
            raise ValueError(f"expected ',' or {close!r}")


class _Edits:
    def __init__(self, text: str) -> None:
        self.text = text
        self.ops: list[tuple[int, int, str]] = []  # (start, end, replacement), applied last first
        self.nl = "\r\n" if "\r\n" in text else "\n"
        m = re.search(r"^([ \t]+)\S", text, re.MULTILINE)
        self.unit = m.group(1) if m else "  "
        self.ascii = "\\u" in text

    def _dump(self, value: Any, indent: str | None) -> str:
        if indent is None:  # an inline container: its new entry is inline too
            return json.dumps(value, ensure_ascii=self.ascii)
        unit: int | str = "\t" if "\t" in self.unit else len(self.unit)
        return json.dumps(value, indent=unit, ensure_ascii=self.ascii).replace(
            "\n", self.nl + indent
        )

    def append(self, open_at: int, key: str | None, value: Any) -> None:
        entries, close = _entries(self.text, open_at)
        head = json.dumps(key, ensure_ascii=self.ascii) + ": " if key is not None else ""
        if entries:
            lead = self.text[open_at + 1 : entries[0][1]]
            indent = lead.rsplit("\n", 1)[1] if "\n" in lead else None
            self.ops.append(
                (entries[-1][3], entries[-1][3], "," + lead + head + self._dump(value, indent))
            )
            return
        line = self.text.rfind("\n", 0, open_at) + 1
        outer = re.match(r"[ \t]*", self.text[line:]).group(0)
        body = self._dump(value, outer + self.unit)
        self.ops.append(
            (open_at + 1, close, self.nl + outer + self.unit + head + body + self.nl + outer)
        )

    def remove(self, open_at: int, index: int) -> None:
        entries, close = _entries(self.text, open_at)
        _, start, _, end = entries[index]
        if len(entries) == 1:
            self.ops.append((open_at + 1, close, ""))
        elif index > 0:
            self.ops.append((entries[index - 1][3], end, ""))
        else:
            self.ops.append((start, entries[1][1], ""))

    def result(self) -> str:
        text = self.text
        # Last first, so earlier positions stay valid; at one position, the first added ends first.
        order = sorted(range(len(self.ops)), key=lambda k: (self.ops[k][0], k), reverse=True)
        for k in order:
            start, end, repl = self.ops[k]
            text = text[:start] + repl + text[end:]
        return text


def _splice(old_text: str, doc: dict[str, Any], new_doc: dict[str, Any]) -> str | None:
    """*old_text* edited into *new_doc* when only hooks entries were added or removed, else None."""
    try:
        root = _skip(old_text, 0)
        ed = _Edits(old_text)
        members = {k: (vs, i) for i, (k, _, vs, _) in enumerate(_entries(old_text, root)[0])}
        old_h, new_h = doc.get("hooks"), new_doc.get("hooks")
        if old_h is None:
            ed.append(root, "hooks", new_h)
        elif new_h is None:
            ed.remove(root, members["hooks"][1])
        elif old_h != new_h:
            hooks_at = members["hooks"][0]
            events = {k: (vs, i) for i, (k, _, vs, _) in enumerate(_entries(old_text, hooks_at)[0])}
            for event in list(old_h) + [e for e in new_h if e not in old_h]:
                old_g, new_g = old_h.get(event), new_h.get(event)
                if old_g == new_g:
                    continue
                if old_g is None:
                    ed.append(hooks_at, event, new_g)
                elif new_g is None:
                    ed.remove(hooks_at, events[event][1])
                elif new_g[: len(old_g)] == old_g:
                    for group in new_g[len(old_g) :]:
                        ed.append(events[event][0], None, group)
                else:  # groups removed: new_g must be old_g with some whole groups left out
                    keep = iter(new_g)
                    nxt = next(keep, None)
                    gone = []
                    for i, group in enumerate(old_g):
                        if nxt is not None and group == nxt:
                            nxt = next(keep, None)
                        else:
                            gone.append(i)
                    if nxt is not None:
                        return None
                    for i in gone:
                        ed.remove(events[event][0], i)
        text = ed.result()
        if json.dumps(json.loads(text)) != json.dumps(new_doc):
            return None
        return text
    except (ValueError, IndexError, KeyError, TypeError, AttributeError):
        return None


def _merge(doc: dict[str, Any], harness: str, command: str | None, path: str) -> dict[str, Any]:
    """*doc* with loopcore's handlers set to *command* (None: removed); other settings untouched."""
    hooks = doc.get("hooks")
    if hooks is None:
        if command is None:
            return doc
        hooks = {}
    if not isinstance(hooks, dict):
        raise InstallError(f'{path}: "hooks" is not an object; nothing was changed')
    hooks = dict(hooks)
    for event in _events(harness):
        groups = hooks.get(event)
        if groups is None:
            groups = []
        if not isinstance(groups, list):
            raise InstallError(f"{path}: hooks.{event} is not a list; nothing was changed")
        new_groups: list[Any] = []
        placed = False
        for group in groups:
            handlers = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(handlers, list) or not any(_is_ours(x, harness) for x in handlers):
                new_groups.append(group)
                continue
            kept = []
            for x in handlers:
                if not _is_ours(x, harness):
                    kept.append(x)
                elif command is not None and not placed:
                    kept.append({**x, **_handler(harness, command)})
                    placed = True
            if kept:
                new_groups.append({**group, "hooks": kept})
        if command is not None and not placed:
            new_groups.append({"matcher": "*", "hooks": [_handler(harness, command)]})
        if new_groups:
            hooks[event] = new_groups
        else:
            hooks.pop(event, None)
    out = dict(doc)
    if hooks:
        out["hooks"] = hooks
    else:
        out.pop("hooks", None)
    return out


def _apply(path: str, harness: str, command: str | None, dry_run: bool, out: IO[str]) -> bool:
    old_text, doc = _read(path)
    new_doc = _merge(doc, harness, command, path)
    if new_doc == doc:
        out.write(
            f"{path}: already {'installed' if command else 'without loopcore hooks'}; nothing to change\n"
        )
        return False
    new_text = (_splice(old_text, doc, new_doc) if old_text.strip() else None) or _render(
        new_doc, old_text
    )
    if dry_run:
        out.writelines(
            difflib.unified_diff(
                old_text.splitlines(True),
                new_text.splitlines(True),
                f"{path} (now)",
                f"{path} (after)",
            )
        )
        out.write(f"(dry run: {path} was not changed)\n")
        return True
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.loopcore-{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            f.write(new_text)
        if os.path.exists(path):
            os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        os.replace(tmp, path)  # atomic: the harness never reads half a file
    except OSError as exc:
        raise InstallError(f"cannot write {path}: {exc}") from None
    out.write(
        f"{path}: {'installed' if command else 'removed'} loopcore's {harness} hooks "
        f"({', '.join(_events(harness))})\n"
    )
    return True


def install(
    harness: str, path: str, command: str, *, dry_run: bool = False, out: IO[str] = sys.stdout
) -> bool:
    """Merge loopcore's hooks for *harness* into *path*; True when the file changes (or would)."""
    return _apply(path, harness, command, dry_run, out)


def uninstall(harness: str, path: str, *, dry_run: bool = False, out: IO[str] = sys.stdout) -> bool:
    """Remove exactly loopcore's hooks for *harness* from *path*; True when the file changes (or would)."""
    return _apply(path, harness, None, dry_run, out)


def _codex_hooks_disabled(config: str) -> str | None:
    """A note when the Codex config.toml beside hooks.json switches hooks off, else None."""
    try:
        import tomllib

        with open(config, "rb") as f:
            features = tomllib.load(f).get("features", {})
    except (OSError, ValueError, ImportError):
        return None
    for key in ("hooks", "codex_hooks"):
        if isinstance(features, dict) and features.get(key) is False:
            return (
                f"{config} sets [features] {key} = false: Codex runs no hooks until that is removed"
            )
    return None


def _gemini_hooks_off(path: str) -> str | None:
    """A note when the Gemini CLI settings switch hooks (or loopcore's hook by name) off, else None."""
    try:
        _, doc = _read(path)
    except InstallError:
        return None
    for where, table, key in (
        ("hooksConfig.enabled", doc.get("hooksConfig"), "enabled"),
        ("tools.enableHooks", doc.get("tools"), "enableHooks"),  # older Gemini CLI releases
        ("hooks.enabled", doc.get("hooks"), "enabled"),
    ):
        if isinstance(table, dict) and table.get(key) is False:
            return f"{path} sets {where} to false: Gemini CLI runs no hooks until that is changed"
    for where, table in (("hooksConfig", doc.get("hooksConfig")), ("hooks", doc.get("hooks"))):
        off = table.get("disabled") if isinstance(table, dict) else None
        if isinstance(off, list) and "loopcore" in off:
            return f'{path} lists "loopcore" in {where}.disabled: Gemini CLI skips the hook'
    return None


# -- status ---------------------------------------------------------------------------------


def _iso(t: float | None) -> str | None:
    return None if t is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def status(state: str | None, as_json: bool, out: IO[str]) -> int:
    import sqlite3

    from ._state import Store, state_dir

    store = Store(state_dir(state))
    rows: list[dict[str, Any]] = []
    try:
        store.connect(create=False)
        rows = store.sessions()
    except FileNotFoundError:
        pass
    except sqlite3.DatabaseError as exc:
        raise InstallError(f"cannot read {store.path}: {exc}") from None
    finally:
        store.close()
    sessions = []
    for r in rows:
        last = json.loads(r["last"]) if r["last"] else None
        sessions.append(
            {
                "session": r["session"],
                "harness": r["harness"],
                "calls": r["calls"],
                "warned": r["warned"],
                "blocked": r["blocked"],
                "records": r["records"],
                "created": _iso(r["created"]),
                "updated": _iso(r["updated"]),
                "last": last,
            }
        )
    if as_json:
        out.write(
            json.dumps(
                {"state": store.path, "events": store.events_path, "sessions": sessions}, indent=2
            )
            + "\n"
        )
        return 0
    out.write(f"state:  {store.path}\nevents: {store.events_path}\n")
    if not sessions:
        out.write("no sessions tracked\n")
        return 0
    head = ("HARNESS", "SESSION", "CALLS", "WARNED", "BLOCKED", "LAST ACTIVE", "LAST DECISION")
    table = [head]
    for s in sessions:
        last = s["last"]
        what = (
            f"{last['level']} {last['detector']} on {last['tool']} (count {last['count']})"
            if last
            else "-"
        )
        table.append(
            (
                s["harness"],
                s["session"],
                str(s["calls"]),
                str(s["warned"]),
                str(s["blocked"]),
                s["updated"] or "-",
                what,
            )
        )
    widths = [max(len(row[i]) for row in table) for i in range(len(head) - 1)]
    for row in table:
        out.write("  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[-1] + "\n")
    return 0


# -- command line ---------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="loopcore hook", description="Install loopcore's guard as a coding CLI's hook."
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in ("install", "uninstall"):
        sp = sub.add_parser(name, help=f"{name} the hooks in the harness's settings file")
        sp.add_argument("harness", choices=sorted(HARNESSES))
        scope = sp.add_mutually_exclusive_group()
        scope.add_argument(
            "--project",
            dest="user",
            action="store_false",
            default=False,
            help="the project's settings under --dir (default: the current directory)",
        )
        scope.add_argument(
            "--user",
            dest="user",
            action="store_true",
            help="the user's settings in the home directory",
        )
        sp.add_argument(
            "--dir", metavar="DIR", help="the project directory (default: the current directory)"
        )
        sp.add_argument("--settings", metavar="FILE", help="write this settings file instead")
        sp.add_argument("--dry-run", action="store_true", help="print the change, write nothing")
        if name == "install":
            sp.add_argument(
                "--state", metavar="DIR", help="the hook's state directory (default: see docs)"
            )
            sp.add_argument(
                "--policy", metavar="NAME|FILE", help="a policy preset or a .toml/.json policy file"
            )
            sp.add_argument(
                "--fail-closed", action="store_true", help="deny calls when the guard cannot decide"
            )
            sp.add_argument(
                "--command",
                dest="base",
                metavar="CMD",
                help="the command that starts the hook (default: this install's loopcore-hook)",
            )
    st = sub.add_parser(
        "status", help="the sessions the hooks track, with what they warned or blocked"
    )
    st.add_argument("--json", action="store_true", help='print {"sessions": [...]} for scripts')
    st.add_argument("--state", metavar="DIR", help="the hook's state directory")
    return p


def main(argv: Sequence[str], out: IO[str], err: IO[str]) -> int:
    """``loopcore hook install|uninstall|status ...``; exit 0 ok, 2 usage or settings error."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "status":
            return status(args.state, args.json, out)
        path = args.settings or settings_path(args.harness, user=args.user, directory=args.dir)
        if args.command == "uninstall":
            uninstall(args.harness, path, dry_run=args.dry_run, out=out)
            return 0
        if args.policy:
            from . import load_policy

            try:
                load_policy(args.policy)
            except (OSError, ValueError) as exc:
                raise InstallError(f"--policy {args.policy}: {exc}") from None
        command = hook_command(
            args.harness,
            state=args.state,
            policy=args.policy,
            fail_closed=args.fail_closed,
            base=args.base,
        )
        install(args.harness, path, command, dry_run=args.dry_run, out=out)
        note = None
        if args.harness == "codex":
            note = _codex_hooks_disabled(os.path.join(os.path.dirname(path), "config.toml"))
        elif args.harness == "gemini" and not args.dry_run:
            note = _gemini_hooks_off(path)
        if note:
            err.write(f"loopcore hook: note: {note}\n")
        return 0
    except InstallError as exc:
        err.write(f"loopcore hook: error: {exc}\n")
        return 2
