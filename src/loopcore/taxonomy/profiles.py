"""Harness profiles: which tool names observe, mutate, execute or ask, and what they touch.

A :class:`Profile` maps a tool name to a rule. A rule is one of

* a kind string (``"observe"``): the target is read from the usual argument keys
  (``file_path``, ``path``, ``url``..., else the first ``*_id`` argument);
* a ``(kind, key)`` or ``(kind, (key, key...))`` pair: the target is that argument;
* a callable ``rule(args) -> (kind, target)``.

Names the profile does not know fall back to the verb at the front of the name
(``get_``/``list_``/``search_`` observe, ``update_``/``cancel_``/``book_`` mutate, ``ask``
asks, ``think``/``calculate`` are ``other``) and then to ``exec``: when loopcore cannot tell
what a tool does, it assumes the tool may have changed anything.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping
from functools import lru_cache

from .shell import _SHELLS, classify_shell, classify_shell_access, parse_patch_targets

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "OUTPUT_NORMALISERS",
    "PROFILES",
    "Profile",
    "Rule",
    "classify",
    "get_profile",
    "normalise_output",
    "shell_rule",
]

Target = str | tuple | None
Rule = str | tuple | Callable[["Any"], "tuple[str, Target]"]
_KINDS = frozenset({"observe", "mutate", "exec", "ask", "other"})

# Argument keys that name what a call touches, most specific first.
_TARGET_KEYS = (
    "file_path",
    "absolute_path",
    "path",
    "filepath",
    "filename",
    "file",
    "notebook_path",
    "target_file",
    "file_name",
    "dir_path",
    "directory",
    "dir",
    "url",
    "uri",
    "paths",
)

_OBSERVE_VERBS = frozenset(
    {
        "get",
        "read",
        "view",
        "list",
        "search",
        "find",
        "fetch",
        "lookup",
        "query",
        "show",
        "cat",
        "open",
        "grep",
        "glob",
        "ls",
        "check",
        "describe",
        "inspect",
        "browse",
        "load",
        "retrieve",
        "count",
        "stat",
        "peek",
        "head",
        "tail",
        "scroll",
        "goto",
        "download",
        "navigate",
        "screenshot",
        "status",
        "explore",
        "recall",
        "observe",
        "print",
        "display",
        "diff",
        "web",
    }
)
_MUTATE_VERBS = frozenset(
    {
        "write",
        "edit",
        "update",
        "create",
        "delete",
        "remove",
        "set",
        "add",
        "put",
        "patch",
        "modify",
        "insert",
        "replace",
        "rename",
        "move",
        "cancel",
        "book",
        "send",
        "post",
        "upload",
        "save",
        "append",
        "exchange",
        "return",
        "reset",
        "apply",
        "commit",
        "assign",
        "change",
        "make",
        "new",
        "store",
        "drop",
        "clear",
        "mkdir",
        "rm",
        "touch",
        "publish",
        "reply",
        "undo",
        "revert",
        "archive",
        "close",
        "merge",
        "push",
        "approve",
        "reject",
        "schedule",
    }
)
_ASK_VERBS = frozenset({"ask", "question", "clarify", "confirm", "prompt", "request"})
# the words of an MCP tool's or server's name that say it asks a person (`ask_user`,
# `mcp__human__ask`, a human-in-the-loop server)
_PEOPLE = frozenset(
    {
        "user",
        "human",
        "humans",
        "person",
        "operator",
        "followup",
        "follow",
        "hitl",
        "approval",
        "me",
    }
)
_OTHER_VERBS = frozenset(
    {
        "think",
        "calculate",
        "compute",
        "plan",
        "todo",
        "finish",
        "submit",
        "noop",
        "reason",
        "reflect",
        "done",
        "stop",
        "transfer",
        "echo",
    }
)
_MISSING = object()
_WORD_RE = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


def _first_target(args: Any) -> Target:
    if not isinstance(args, dict):
        return None
    for k in _TARGET_KEYS:
        v = args.get(k)
        if isinstance(v, str) and v:
            return v
        if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
            return tuple(v) if len(v) > 1 else v[0]
    for k, v in args.items():
        if (
            (k == "id" or k.endswith("_id") or k.endswith("Id"))
            and isinstance(v, (str, int))
            and not isinstance(v, bool)
        ):
            return str(v)
    return None


def _command_text(cmd: Any) -> str | None:
    """A shell command as one string: argv lists (Codex ``["bash", "-lc", script]``) included."""
    if isinstance(cmd, str):
        return cmd
    if isinstance(cmd, list) and cmd and all(isinstance(x, str) for x in cmd):
        if (
            len(cmd) >= 3
            and cmd[0].rsplit("/", 1)[-1] in _SHELLS
            and cmd[1].startswith("-")
            and "c" in cmd[1]
        ):
            return cmd[2]
        return shlex.join(cmd)
    return None


def shell_rule(args: Any) -> tuple[str, Target]:
    """Rule for shell tools: classify ``args["command"]`` (or ``cmd``/``script``) as a shell command."""
    if args.__class__ is dict:
        cmd = args.get("command")
        if cmd is None:
            cmd = args.get("cmd", args.get("script"))
    else:
        cmd = args
    if cmd.__class__ is str:
        return classify_shell(cmd)
    text = _command_text(cmd)
    if text is None:
        return ("exec", None)
    return classify_shell(text)


def _shell_access(args: Any) -> tuple:
    """(kind, target, reads, writes, no_op) of a shell tool's call (see classify_shell_access)."""
    if args.__class__ is dict:
        cmd = args.get("command")
        if cmd is None:
            cmd = args.get("cmd", args.get("script"))
    else:
        cmd = args
    if cmd.__class__ is not str:
        cmd = _command_text(cmd)
        if cmd is None:
            return ("exec", None, None, None, False)
    return classify_shell_access(cmd)


# A rule may carry an ``access(args) -> (kind, target, reads, writes, no_op)`` attribute: what
# the call reads and writes when that is more than its kind and target say (Profile.access).
shell_rule.access = _shell_access  # type: ignore[attr-defined]


def _patch_rule(args: Any) -> tuple[str, Target]:
    """An ``apply_patch`` mutates the files its patch names: the patch is the whole argument
    (Codex's custom tool), or ``input`` / ``patch`` (Codex's function tool, OpenHands), or
    ``patchText`` (opencode's tool, packages/opencode/src/tool/apply_patch.ts)."""
    text = (
        args
        if isinstance(args, str)
        else (args.get("input") or args.get("patch") or args.get("patchText") or "")
        if isinstance(args, dict)
        else ""
    )
    targets = parse_patch_targets(text) if isinstance(text, str) else ()
    if not targets:
        return ("mutate", None)
    return ("mutate", targets[0] if len(targets) == 1 else targets)


def _editor_rule(args: Any) -> tuple[str, Target]:
    """str_replace_editor / file_editor (OpenHands, SWE-agent 1.x): view observes, the rest write."""
    if not isinstance(args, dict):
        return ("mutate", None)
    path = args.get("path")
    path = path if isinstance(path, str) and path else None
    if args.get("command") == "view":
        return ("observe", path)
    return ("mutate", path)


def _key_rule(kind: str, keys: tuple[str, ...]) -> Callable[[Any], tuple[str, Target]]:
    def rule(args: Any) -> tuple[str, Target]:
        if isinstance(args, dict):
            found = []
            for k in keys:
                v = args.get(k)
                if isinstance(v, str) and v:
                    found.append(v)
                elif isinstance(v, list):
                    found.extend(x for x in v if isinstance(x, str))
            if found:
                return (kind, found[0] if len(found) == 1 else tuple(dict.fromkeys(found)))
        return (kind, None)

    return rule


def _asks_a_server(name: str) -> bool:
    """A server's tool (``mcp__<server>__<tool>``) named for asking a question (``ask``,
    ``ask_question``: DeepWiki's) asks the server, not the person: a query, unless its name or
    its server's says it asks a person (``ask_user``, ``mcp__human__ask``, a human-in-the-loop
    server). Other verbs of asking (``confirm``, ``clarify``, ``request_approval``) still ask."""
    if "__" not in name:
        return False
    words = [w.lower() for w in _WORD_RE.findall(name)]
    tool = [w.lower() for w in _WORD_RE.findall(name.rsplit("__", 1)[-1])]
    return bool(tool) and tool[0] in ("ask", "question") and not any(w in _PEOPLE for w in words)


def _verb_kind(name: str) -> str | None:
    """The kind a tool's name says by its first word (``get_user`` observes), or None."""
    if name.__class__ is str:
        return _verb_kind_of_str(name)
    return _verb_kind_uncached(name)


@lru_cache(maxsize=4096)
def _verb_kind_of_str(name: str) -> str | None:
    # a trace calls few tools, each many times: the name's words are split once
    return _verb_kind_uncached(name)


def _verb_kind_uncached(name: str) -> str | None:
    base = name.rsplit("__", 1)[-1]  # mcp__server__tool
    words = _WORD_RE.findall(base)
    if not words:
        return None
    head = words[0].lower()
    if head in _ASK_VERBS:
        return "observe" if _asks_a_server(name) else "ask"
    if head in _OTHER_VERBS:
        return "other"
    if head in _OBSERVE_VERBS:
        return "observe"
    if head in _MUTATE_VERBS:
        return "mutate"
    return None


def _compile(rule: Rule) -> Callable[[Any], tuple[str, Target]]:
    if callable(rule):
        return rule
    if isinstance(rule, str):
        if rule not in _KINDS:
            raise ValueError(
                f"unknown kind {rule!r} in a profile rule; expected one of {', '.join(sorted(_KINDS))}"
            )
        if rule in ("observe", "mutate"):
            return lambda args, _k=rule: (_k, _first_target(args))
        return lambda args, _k=rule: (_k, None)
    if isinstance(rule, tuple) and len(rule) == 2 and isinstance(rule[0], str):
        kind, keys = rule
        if kind not in _KINDS:
            raise ValueError(
                f"unknown kind {kind!r} in a profile rule; expected one of {', '.join(sorted(_KINDS))}"
            )
        return _key_rule(kind, (keys,) if isinstance(keys, str) else tuple(keys))
    raise TypeError(
        f"a profile rule is a kind, a (kind, arg key(s)) pair or a callable; got {rule!r}"
    )


class Profile:
    """A named mapping from tool name to rule; ``classify(name, args) -> (kind, target)``."""

    __slots__ = ("name", "rules", "_compiled", "_cache")

    def __init__(self, name: str, rules: Mapping[str, Rule] | None = None) -> None:
        self.name = name
        self.rules: dict[str, Rule] = dict(rules or {})
        self._compiled = {k: _compile(v) for k, v in self.rules.items()}
        self._cache: dict[str, Callable[[Any], tuple[str, Target]] | None] = {}

    def extend(self, rules: Mapping[str, Rule], name: str | None = None) -> Profile:
        """A new profile with *rules* added on top (they win); raises ValueError/TypeError on a bad rule."""
        merged = dict(self.rules)
        merged.update(rules)
        return Profile(name or self.name, merged)

    def _lookup(self, name: str) -> Callable[[Any], tuple[str, Target]] | None:
        try:
            return self._cache[name]
        except KeyError:
            pass
        fn = self._compiled.get(name)
        if fn is None:
            fn = self._compiled.get(name.lower())
        if fn is None and "__" in name:
            fn = self._compiled.get(name.rsplit("__", 1)[-1])
        self._cache[name] = fn
        return fn

    def classify(self, name: str, args: Any = None) -> tuple[str, Target]:
        """(kind, target) of a call to tool *name* with *args*; unknown tools are ``exec``."""
        fn = self._cache.get(name, _MISSING)
        if fn is _MISSING:
            fn = self._lookup(name)
        if fn is not None:
            kind, target = fn(args)
            if kind == "ask" and _asks_a_server(name):
                return "observe", _first_target(args)
            if target.__class__ is list:
                target = tuple(target)
            return kind, target
        kind = _verb_kind(name) or "exec"
        if kind in ("observe", "mutate"):
            return kind, _first_target(args)
        return kind, None

    def access(self, name: str, args: Any = None) -> tuple:
        """(kind, target, reads, writes, no_op) of a call: :meth:`classify` plus what it reads and
        writes where the rule knows more than its kind and target (shell commands); reads and
        writes None otherwise, which the Step derives from kind and target."""
        fn = self._cache.get(name, _MISSING)
        if fn is _MISSING:
            fn = self._lookup(name)
        acc = getattr(fn, "access", None) if fn is not None else None
        if acc is not None:
            kind, target, reads, writes, no_op = acc(args)
            return kind, target, reads, writes, no_op
        kind, target = self.classify(name, args)
        return kind, target, None, None, False

    def __repr__(self) -> str:
        return f"<Profile {self.name!r}: {len(self.rules)} tools>"


_SHELL_TOOLS: dict[str, Rule] = {
    name: shell_rule
    for name in (
        "bash",
        "shell",
        "execute_bash",
        "run_shell_command",
        "execute_command",
        "run_command",
        "terminal",
        "exec_command",
        "local_shell",
        "container.exec",
        "shell_command",
        "run_terminal_cmd",
        "Bash",
        "cmd",
        "sh",
    )
}

CLAUDE_CODE: dict[str, Rule] = {
    "Read": ("observe", "file_path"),
    "NotebookRead": ("observe", "notebook_path"),
    "Edit": ("mutate", "file_path"),
    "MultiEdit": ("mutate", "file_path"),
    "Write": ("mutate", "file_path"),
    "NotebookEdit": ("mutate", "notebook_path"),
    "Grep": ("observe", "path"),
    "Glob": ("observe", "path"),
    "LS": ("observe", "path"),
    "Bash": shell_rule,
    "BashOutput": ("observe", ("bash_id", "shell_id")),
    "KillBash": "exec",
    "KillShell": "exec",
    "WebFetch": ("observe", "url"),
    "WebSearch": ("observe", ()),
    "TodoWrite": "other",
    "TodoRead": "other",
    "Task": "exec",
    "AskUserQuestion": "ask",
    "ExitPlanMode": "ask",
    "SlashCommand": "exec",
    # Claude Code 2.1.x: a skill's instructions enter the context (its work is the calls after
    # it); the task list (TodoWrite's successor) and the lookup of deferred tools change
    # nothing; the desktop app's chapter marks only label the transcript
    "Skill": "other",
    "ToolSearch": "other",
    "TaskCreate": "other",
    "TaskGet": "other",
    "TaskList": "other",
    "TaskUpdate": "other",
    "EnterPlanMode": "other",
    "mcp__ccd_session__mark_chapter": "other",
    # the final answer of a run given a JSON schema (`claude -p --json-schema`, the Agent
    # SDK's structured output): Claude Code validates its input and answers "Structured output
    # provided successfully"; it is the reply, and runs nothing
    "StructuredOutput": "other",
    # a sub-agent's final report to the agent that started it (Claude Code 2.1.281: "Only a
    # SubagentHandback call reaches your caller as your result"): its reply, it runs nothing
    "SubagentHandback": "other",
}

CODEX: dict[str, Rule] = {
    "shell": shell_rule,
    "container.exec": shell_rule,
    "local_shell": shell_rule,
    "exec_command": shell_rule,
    "shell_command": shell_rule,
    "apply_patch": _patch_rule,
    "update_plan": "other",
    "tool_search": "other",
    "view_image": ("observe", "path"),
    "write_stdin": "exec",
}

# OpenHands agent skills called from IPython cells (V0 CodeAct): a cell that is one skill call
# (``open_file('a.py')``, ``print(edit_file_by_replace('a.py', ...))``) observes or mutates that
# path; any other cell is arbitrary Python (exec).
_SKILL_KINDS = {
    "open_file": "observe",
    "goto_line": "observe",
    "scroll_down": "observe",
    "scroll_up": "observe",
    "search_file": "observe",
    "search_dir": "observe",
    "find_file": "observe",
    "parse_pdf": "observe",
    "parse_docx": "observe",
    "parse_latex": "observe",
    "parse_pptx": "observe",
    "create_file": "mutate",
    "edit_file_by_replace": "mutate",
    "insert_content_at_line": "mutate",
    "append_file": "mutate",
    "edit_file": "mutate",
}
# the argument that names the file (search_* / find_file take a term first)
_SKILL_PATH_ARG = {
    "search_file": (1, "file_path"),
    "search_dir": (1, "dir_path"),
    "find_file": (1, "dir_path"),
}


def _ipython_rule(args: Any) -> tuple[str, Target]:
    import ast

    code = args.get("code") if isinstance(args, dict) else args
    if not isinstance(code, str) or not any(name in code for name in _SKILL_KINDS):
        return ("exec", None)
    try:
        body = ast.parse(code).body
    except (SyntaxError, ValueError):
        return ("exec", None)
    if (
        len(body) != 1
        or not isinstance(body[0], ast.Expr)
        or not isinstance(body[0].value, ast.Call)
    ):
        return ("exec", None)
    call = body[0].value
    if (
        isinstance(call.func, ast.Name)
        and call.func.id == "print"
        and len(call.args) == 1
        and isinstance(call.args[0], ast.Call)
    ):
        call = call.args[0]
    name = call.func.id if isinstance(call.func, ast.Name) else None
    kind = _SKILL_KINDS.get(name or "")
    if kind is None:
        return ("exec", None)
    pos, key = _SKILL_PATH_ARG.get(name, (0, "file_name"))
    node = (
        call.args[pos]
        if len(call.args) > pos
        else next(
            (
                k.value
                for k in call.keywords
                if k.arg in (key, "path", "file_name", "file_path", "dir_path")
            ),
            None,
        )
    )
    target = (
        node.value
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value
        else None
    )
    return (kind, target)


_ACP_PATHS = ("path", "file_path", "abs_path", "filePath", "notebook_path")

OPENHANDS: dict[str, Rule] = {
    "execute_bash": shell_rule,
    "bash": shell_rule,
    "terminal": shell_rule,
    "str_replace_editor": _editor_rule,
    "file_editor": _editor_rule,
    "edit_file": ("mutate", "path"),
    "execute_ipython_cell": _ipython_rule,
    "browser": "exec",
    "web_read": ("observe", "url"),
    "fetch": ("observe", "url"),
    "think": "other",
    "finish": "other",
    "task_tracker": "other",
    # event-stream action names (OpenHands V0 events)
    "run": shell_rule,
    "read": ("observe", "path"),
    "write": ("mutate", "path"),
    "edit": ("mutate", ("path", "file_path")),
    "run_ipython": _ipython_rule,
    "browse": ("observe", "url"),
    # an agent driven over ACP: its calls carry the ACP spec's tool kind, not a tool name,
    # and the agent's own input (Claude Code's file_path, others' path)
    "acp:read": ("observe", _ACP_PATHS),
    "acp:search": ("observe", _ACP_PATHS),
    "acp:fetch": ("observe", "url"),
    "acp:edit": ("mutate", _ACP_PATHS),
    "acp:delete": ("mutate", _ACP_PATHS),
    "acp:execute": shell_rule,
    "acp:think": "other",
    "acp:switch_mode": "other",
    # V1 (SDK) tools beside terminal / file_editor
    "apply_patch": _patch_rule,
    "planning_file_editor": _editor_rule,
    "read_file": ("observe", ("file_path", "path")),
    "write_file": ("mutate", ("file_path", "path")),
    "list_directory": ("observe", ("dir_path", "path")),
    "glob": ("observe", ("path",)),
    "grep": ("observe", ("path",)),
    "task": "exec",
    # navigating loads a page (and leaves the one the browser was on): a change of the browser,
    # not a look at it
    "browser_navigate": "exec",
    "browser_get_content": "observe",
    "browser_get_state": "observe",
    "browser_list_tabs": "observe",
    "browser_get_storage": "observe",
    "browse_interactive": "exec",
    "delegate": "exec",
    "recall": "other",
    "mcp": "exec",
}

SWE_AGENT: dict[str, Rule] = {
    "open": ("observe", ("path", "path_or_file", "file")),
    "goto": ("observe", ("open_file",)),
    "scroll_up": ("observe", ("open_file",)),
    "scroll_down": ("observe", ("open_file",)),
    "search_file": ("observe", ("file", "open_file")),
    "search_dir": ("observe", ("dir",)),
    "find_file": ("observe", ("dir",)),
    "filemap": ("observe", "file_path"),
    "create": ("mutate", ("filename", "path")),
    "edit": ("mutate", ("open_file",)),
    "insert": ("mutate", ("open_file",)),
    "append": ("mutate", ("open_file",)),
    "str_replace_editor": _editor_rule,
    "submit": "other",
    "exit_forfeit": "other",
    "bash": shell_rule,
    "python": "exec",
}

TAU_BENCH: dict[str, Rule] = {
    "think": "other",
    "calculate": "other",
    "transfer_to_human_agents": "other",
    "list_all_airports": "observe",
    "search_direct_flight": ("observe", ()),
    "search_onestop_flight": ("observe", ()),
    "get_reservation_details": ("observe", "reservation_id"),
    "get_user_details": ("observe", "user_id"),
    "get_order_details": ("observe", "order_id"),
    "get_product_details": ("observe", "product_id"),
    "find_user_id_by_email": ("observe", ()),
    "find_user_id_by_name_zip": ("observe", ()),
    "list_all_product_types": "observe",
    "update_reservation_flights": ("mutate", "reservation_id"),
    "update_reservation_baggages": ("mutate", "reservation_id"),
    "update_reservation_passengers": ("mutate", "reservation_id"),
    "cancel_reservation": ("mutate", "reservation_id"),
    "book_reservation": ("mutate", "user_id"),
    "send_certificate": ("mutate", "user_id"),
    "cancel_pending_order": ("mutate", "order_id"),
    "modify_pending_order_address": ("mutate", "order_id"),
    "modify_pending_order_items": ("mutate", "order_id"),
    "modify_pending_order_payment": ("mutate", "order_id"),
    "modify_user_address": ("mutate", "user_id"),
    "return_delivered_order_items": ("mutate", "order_id"),
    "exchange_delivered_order_items": ("mutate", "order_id"),
}

GEMINI_CLI: dict[str, Rule] = {
    "read_file": ("observe", ("absolute_path", "file_path", "path")),
    "read_many_files": ("observe", ("paths",)),
    "write_file": ("mutate", ("file_path", "absolute_path", "path")),
    "replace": ("mutate", ("file_path", "absolute_path", "path")),
    "edit": ("mutate", ("file_path", "absolute_path", "path")),
    "list_directory": ("observe", ("path", "dir_path")),
    "glob": ("observe", ("path", "dir_path")),
    "search_file_content": ("observe", ("path", "dir_path")),
    "grep": ("observe", ("path", "dir_path")),
    "run_shell_command": shell_rule,
    "web_fetch": ("observe", ()),
    "google_web_search": ("observe", ()),
    "save_memory": ("mutate", ()),
    "write_todos": "other",
}

MINI_SWE_AGENT: dict[str, Rule] = {"bash": shell_rule}


def _stdin_rule(args: Any) -> tuple[str, Target]:
    """Codex ``write_stdin``: with input it drives the process; with none (``chars`` empty) it
    waits for the next output of a running command, and the command runs meanwhile (a build
    writes its files while the agent waits): either way the process may change anything, so
    a look before the wait and the same look after it are two (a poll's own output keeps its
    chunk id, so no poll repeats another)."""
    return ("exec", None)


def _web_search_rule(args: Any) -> tuple[str, Target]:
    """A web search observes its query (Codex ``web_search_call`` actions, ``google_web_search``)."""
    if isinstance(args, dict):
        for k in ("query", "q", "url", "pattern"):
            v = args.get(k)
            if isinstance(v, str) and v:
                return ("observe", v if k == "url" else f"search:{v}")
        qs = args.get("queries")
        if isinstance(qs, list) and qs and all(isinstance(q, str) for q in qs):
            return (
                "observe",
                tuple(f"search:{q}" for q in qs) if len(qs) > 1 else f"search:{qs[0]}",
            )
    return ("observe", None)


CODEX.update(
    {
        "write_stdin": _stdin_rule,
        "web_search": _web_search_rule,
        "web_search_call": _web_search_rule,
        "view_image": ("observe", "path"),
    }
)

GEMINI_CLI.update(
    {
        "read_file": ("observe", ("file_path", "absolute_path", "path")),
        "grep_search": ("observe", ("dir_path", "path")),
        "search_file_content": ("observe", ("dir_path", "path")),
        "glob": ("observe", ("dir_path", "path")),
        "list_directory": ("observe", ("dir_path", "path")),
        "read_many_files": ("observe", ("include", "paths")),
        "web_fetch": ("observe", ("url", "prompt")),
        "google_web_search": _web_search_rule,
        "update_topic": "other",
        "complete_task": "other",
        "write_todos": "other",
        "ask_user": "ask",
        "enter_plan_mode": "other",
        "exit_plan_mode": "ask",
        "activate_skill": "other",
        "get_internal_docs": ("observe", ("path", "topic")),
        "read_mcp_resource": ("observe", ("uri",)),
        "list_mcp_resources": "observe",
        "invoke_agent": "exec",
        "save_memory": ("mutate", ()),
    }
)
for _n in (
    "tracker_create_task",
    "tracker_update_task",
    "tracker_get_task",
    "tracker_list_tasks",
    "tracker_add_dependency",
    "tracker_visualize",
):
    GEMINI_CLI[_n] = "other"

OPENCODE: dict[str, Rule] = {
    "read": ("observe", ("filePath", "file_path", "path")),
    "write": ("mutate", ("filePath", "file_path", "path")),
    "edit": ("mutate", ("filePath", "file_path", "path")),
    "multiedit": ("mutate", ("filePath", "file_path", "path")),
    "patch": _patch_rule,
    "apply_patch": _patch_rule,
    "glob": ("observe", ("path",)),
    "grep": ("observe", ("path",)),
    "list": ("observe", ("path",)),
    "ls": ("observe", ("path",)),
    "bash": shell_rule,
    "webfetch": ("observe", "url"),
    "websearch": _web_search_rule,
    "codesearch": _web_search_rule,
    "todowrite": "other",
    "todoread": "other",
    "task": "exec",
    "skill": "other",
    "question": "ask",
    "lsp": ("observe", ("filePath", "path")),
    "invalid": "other",
}


def _read_files_rule(args: Any) -> tuple[str, Target]:
    """The Cline SDK's ``read_files``: the paths of ``files`` (requests ``{"path": ...}``), of
    ``file_paths``, or the string or list it was given (the forms its schema accepts)."""
    v = args
    if isinstance(args, dict):
        v = args.get("files", args.get("file_paths", args.get("path")))
    if isinstance(v, (str, dict)):
        v = [v]
    paths: list[str] = []
    for x in v if isinstance(v, list) else ():
        p = x.get("path") if isinstance(x, dict) else x
        if isinstance(p, str) and p and p not in paths:
            paths.append(p)
    if not paths:
        return ("observe", None)
    return ("observe", paths[0] if len(paths) == 1 else tuple(paths))


def _commands_text(args: Any) -> str | None:
    # the Cline SDK's run_commands: its commands, one a line (a script run in order)
    v = args.get("commands", args.get("command")) if isinstance(args, dict) else args
    if isinstance(v, str):
        return v
    if isinstance(v, list) and v and all(isinstance(c, str) for c in v):
        return "\n".join(v)
    return None


def _run_commands_rule(args: Any) -> tuple[str, Target]:
    """The Cline SDK's ``run_commands``: its commands classified as one shell script."""
    text = _commands_text(args)
    return ("exec", None) if text is None else classify_shell(text)


def _run_commands_access(args: Any) -> tuple:
    text = _commands_text(args)
    return ("exec", None, None, None, False) if text is None else _shell_access(text)


_run_commands_rule.access = _run_commands_access  # type: ignore[attr-defined]


def _fetch_requests_rule(args: Any) -> tuple[str, Target]:
    """The Cline SDK's ``fetch_web_content``: the URLs of its ``requests``."""
    reqs = args.get("requests") if isinstance(args, dict) else None
    urls = []
    for r in reqs if isinstance(reqs, list) else ():
        if isinstance(r, dict) and isinstance(r.get("url"), str) and r["url"] not in urls:
            urls.append(r["url"])
    if not urls:
        return ("observe", None)
    return ("observe", urls[0] if len(urls) == 1 else tuple(urls))


CLINE: dict[str, Rule] = {
    # the Cline SDK's tools (Cline 4.x, its CLI and extension)
    "read_files": _read_files_rule,
    "search_codebase": _web_search_rule,
    "run_commands": _run_commands_rule,
    "fetch_web_content": _fetch_requests_rule,
    "editor": ("mutate", ("path",)),
    "skills": "other",
    "ask_question": "ask",
    "read_file": ("observe", ("path", "absolutePath")),
    "write_to_file": ("mutate", ("path", "absolutePath")),
    "replace_in_file": ("mutate", ("path", "absolutePath")),
    "apply_diff": ("mutate", ("path",)),
    "insert_content": ("mutate", ("path",)),
    # Roo Code 3.3x+'s native edit tools take file_path (search_and_replace is kept in the
    # history under its own name, an alias of edit)
    "search_and_replace": ("mutate", ("path", "file_path")),
    "edit": ("mutate", ("file_path", "path")),
    "search_replace": ("mutate", ("file_path", "path")),
    "apply_patch": _patch_rule,
    "edit_file": ("mutate", ("path", "target_file", "file_path")),
    "search_files": ("observe", ("path",)),
    "list_files": ("observe", ("path",)),
    "list_code_definition_names": ("observe", ("path",)),
    "codebase_search": ("observe", ("path", "query")),
    "execute_command": shell_rule,
    "browser_action": "exec",
    "use_mcp_tool": "exec",
    "access_mcp_resource": ("observe", ("uri",)),
    "load_mcp_documentation": "observe",
    "web_fetch": ("observe", "url"),
    "web_search": _web_search_rule,
    "ask_followup_question": "ask",
    "attempt_completion": "other",
    "plan_mode_respond": "other",
    "act_mode_respond": "other",
    "focus_chain": "other",
    "update_todo_list": "other",
    "new_task": "exec",
    "switch_mode": "other",
    "condense": "other",
    "summarize_task": "other",
    "report_bug": "other",
    "new_rule": ("mutate", ("path",)),
    "use_skill": "other",
    "skill": "other",
    "use_subagents": "exec",
    "fetch_instructions": "observe",
    "run_slash_command": "exec",
    "generate_image": ("mutate", ("path",)),
}


def _strip_codex_headers(text: str) -> tuple[str, dict]:
    """Codex prefixes each exec output with a header block (``Chunk ID: ...``, ``Wall time: ...``,
    ``Process exited with code N``, ``Process running with session ID N``, ``Original token
    count: N``, ``Exit code: N``, then ``Output:``); the chunk id and wall time differ on every
    call, so identical outputs only compare equal without them. Returns (body, facts): facts hold
    ``returncode`` / ``exec_session`` when the header says so."""
    if not text.startswith(_CODEX_HEADER_STARTS):
        return text, {}
    facts: dict = {}
    pos = 0
    n = len(text)
    while pos < n:
        end = text.find("\n", pos)
        if end < 0:
            end = n
        line = text[pos:end]
        if line == "Output:":
            return text[end + 1 :], facts
        m = _CODEX_HEADER_RE.match(line)
        if m is None:
            return text, {}  # not a header after all: leave the text alone
        code = m.group("code") or m.group("code2")
        if code is not None:
            facts["returncode"] = int(code)
        elif m.group("sid") is not None:
            facts["exec_session"] = m.group("sid")
        pos = end + 1
    return text, {}


_CODEX_HEADER_STARTS = (
    "Chunk ID:",
    "Wall time",
    "Exit code:",
    "Process exited",
    "Process running",
    "Command:",
    "Script completed",
    "Original token count:",
)
_CODEX_HEADER_RE = re.compile(
    r"^(?:Chunk ID: \S*|Wall time:? [\d.]+ ?\w*|Process exited with code (?P<code>-?\d+)|Exit code:? (?P<code2>-?\d+)"
    r"|Process running with session ID (?P<sid>\S+)|Original token count: \d+|Total output lines: \d+"
    r"|Command: .*|Script completed)$"
)


_GEMINI_NOISE = re.compile(
    r"^(?:Process Group PGID: .*|Background PIDs: .*|</?untrusted_context>)$"
)
_GEMINI_EXIT = re.compile(r"^Exit Code: (-?\d+)$")


def _strip_gemini_shell_footer(text: str) -> tuple[str, dict]:
    """gemini-cli's run_shell_command result ends with per-call lines (``Process Group PGID: N``,
    ``Background PIDs: ...``) and may be wrapped in ``<untrusted_context>`` tags; the process
    group differs on every call. Returns (text without them, facts): ``returncode`` from the
    last ``Exit Code: N`` line."""
    if "Process Group PGID:" not in text and "untrusted_context>" not in text:
        return text, {}
    facts: dict = {}
    kept = []
    for line in text.split("\n"):
        if _GEMINI_NOISE.match(line):
            continue
        m = _GEMINI_EXIT.match(line)
        if m is not None:
            facts["returncode"] = int(m.group(1))
        kept.append(line)
    return "\n".join(kept), facts


# gemini-cli's notices of a tool output it truncated and saved whole to a file: each starts the
# result, and the file's path (to the end of its line) is named for the call (and, since 0.3x,
# the prompt), so it is new every time.
_GEMINI_SAVED = (
    # 0.3x+: the scheduler's formatTruncatedToolOutput
    ("Output too large. Showing first ", "For full output see: "),
    # 0.1x-0.2x: truncateAndSaveToFile
    ("Tool output was too large and has been truncated.", "The full output has been saved to: "),
    # the context pipeline's distillation, the path after the truncated text
    ("[Message Normalized: Tool output exceeded size limit]", "\n\nFull output saved to: "),
)


def _gemini_saved_file(text: str) -> tuple[str, dict]:
    """gemini-cli truncates a shell or MCP output over its limit, saves it whole to
    ``<project temp>/tool-outputs/[session-<prompt id>/]<tool>_<call id>.txt`` (``<call
    id>.output`` before 0.3x) and gives the model a notice naming that file: the path becomes
    ``<file>``, the rest (sizes, head and tail) stays. Returns (text, facts): ``output_file`` is
    the path as written."""
    for head, marker in _GEMINI_SAVED:
        if not text.startswith(head):
            continue
        at = text.rfind(marker) if marker.startswith("\n") else text.find(marker)
        if at < 0:
            return text, {}
        start = at + len(marker)
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        path = text[start:end].rstrip("\r")
        if not path:
            return text, {}
        return text[:start] + "<file>" + text[start + len(path) :], {"output_file": path}
    return text, {}


def _gemini_output(text: str) -> tuple[str, dict]:
    # gemini-cli's normaliser: the shell footer, then a saved output's file
    text, facts = _strip_gemini_shell_footer(text)
    text, more = _gemini_saved_file(text)
    return text, {**facts, **more} if more else facts


# opencode's hint after a truncated tool output: the file (``tool_<id>`` in its truncation
# folder) is new on every call; the line after it is opencode's own advice.
_OPENCODE_SAVED = re.compile(
    r"Full output saved to: ([^\r\n]+)\r?\n"
    r"Use (?:Grep to search|the Task tool to have explore agent process)"
)


def _opencode_saved_file(text: str) -> tuple[str, dict]:
    """opencode truncates a tool output over its limit (a bash command's streamed output too),
    saves it whole to a file of its truncation folder named for the call (``tool_<id>``), and
    gives the model the head or tail, or the size, with ``Full output saved to: <path>`` and a
    line of advice on reading it: the path becomes ``<file>``. Returns (text, facts):
    ``output_file`` is the path as written."""
    if "Full output saved to: " not in text:
        return text, {}
    m = _OPENCODE_SAVED.search(text)
    if m is None:
        return text, {}
    path = m.group(1)
    return text[: m.start(1)] + "<file>" + text[m.end(1) :], {"output_file": path}


# the path follows on the same line, or (in some sub-agents' results) on the next one
_CLAUDE_PERSISTED = re.compile(
    r"<persisted-output>\r?\n[^\n]*?Full output saved to:(?: |\r?\n)([^\r\n]+)"
)


_CLAUDE_EXIT = re.compile(r"Exit code (-?[0-9]{1,10})(?:\r?\n|$)")


def _claude_persisted_name(text: str) -> tuple[str, dict]:
    """Claude Code 2.1.2+ keeps a tool output over its size limit in a file of its own,
    ``<session>/tool-results/<id>.txt``, and gives the model ``<persisted-output>``, ``Output too
    large (1.2MB). Full output saved to: <path>``, then a preview of its first 2 KB; the file's
    id is new on every call, so two identical big outputs (a test run, a log, a search re-run)
    only compare equal without it. Returns (text with the file named ``<id>`` and its folder
    and extension kept, facts): ``output_file`` is the path as written. A Bash command that
    exited non-zero is answered ``Exit code N`` then its output: the text is kept and
    ``returncode`` is N."""
    if text.startswith("Exit code "):
        m = _CLAUDE_EXIT.match(text)
        return text, ({"returncode": int(m.group(1))} if m is not None else {})
    if not text.startswith("<persisted-output>"):
        return text, {}
    m = _CLAUDE_PERSISTED.match(text)
    if m is None:
        return text, {}
    path = m.group(1).rstrip()
    k = max(path.rfind("/"), path.rfind("\\"))
    name = path[k + 1 :]
    dot = name.rfind(".")
    kept = path[: k + 1] + "<id>" + (name[dot:] if dot > 0 else "")
    return text[: m.start(1)] + kept + text[m.start(1) + len(path) :], {"output_file": path}


#: Per-harness output normalisation: profile name -> ``fn(text) -> (text, facts)``. A harness that
#: wraps tool outputs in per-call noise (Codex's ``Chunk ID`` / ``Wall time`` header) gets the
#: noise removed so two identical results compare equal; *facts* are what the noise said
#: (``returncode``, ``exec_session``). See docs/formats.md.
OUTPUT_NORMALISERS: dict[str, Callable[[str], tuple[str, dict]]] = {
    "claude-code": _claude_persisted_name,
    "codex": _strip_codex_headers,
    "gemini-cli": _gemini_output,
    "opencode": _opencode_saved_file,
}


def normalise_output(profile: Profile | str | None, text: Any) -> tuple[Any, dict]:
    """*text* as the tool returned it, without the harness's per-call wrapper (see
    OUTPUT_NORMALISERS); non-string results and harnesses without a normaliser pass through."""
    name = profile.name if isinstance(profile, Profile) else profile
    if not isinstance(text, str) or not isinstance(name, str):
        return text, {}
    fn = OUTPUT_NORMALISERS.get(name.split("+", 1)[0])
    if fn is None:
        return text, {}
    return fn(text)


#: The server tools the Messages API runs itself (``server_tool_use`` blocks): any harness on
#: Anthropic's API may meet them (Claude Code's responses hold the advisor's, for one).
ANTHROPIC_SERVER: dict[str, Rule] = {
    "text_editor_code_execution": _editor_rule,
    "bash_code_execution": shell_rule,
    "code_execution": "exec",
    "web_search": _web_search_rule,
    "web_fetch": ("observe", "url"),
    "tool_search_tool_regex": ("observe", ()),
    "tool_search_tool_bm25": ("observe", ()),
    "advisor": "other",
}

#: The tools Anthropic defines: client tools with a fixed schema (text editor, bash, memory) and
#: the server tools.
ANTHROPIC: dict[str, Rule] = {
    "str_replace_based_edit_tool": _editor_rule,
    "str_replace_editor": _editor_rule,
    "memory": _editor_rule,
    "bash": shell_rule,
    "computer": "exec",
    **ANTHROPIC_SERVER,
}

_GENERIC: dict[str, Rule] = {}
for _table in (
    _SHELL_TOOLS,
    ANTHROPIC,
    CLINE,
    TAU_BENCH,
    GEMINI_CLI,
    SWE_AGENT,
    OPENHANDS,
    CODEX,
    CLAUDE_CODE,
):
    _GENERIC.update(_table)
# "edit" in a generic trace is a file edit with an explicit path (SWE-agent's uses the open file).
_GENERIC["edit"] = ("mutate", ("path", "file_path", "open_file"))
_GENERIC["read"] = ("observe", ("path", "file_path"))

#: The built-in profiles by name; ``generic`` knows every harness's tools at once.
PROFILES: dict[str, Profile] = {
    "generic": Profile("generic", _GENERIC),
    "claude-code": Profile("claude-code", {**_SHELL_TOOLS, **ANTHROPIC_SERVER, **CLAUDE_CODE}),
    "codex": Profile("codex", {**_SHELL_TOOLS, **CODEX}),
    "openhands": Profile("openhands", {**_SHELL_TOOLS, **OPENHANDS}),
    "swe-agent": Profile("swe-agent", {**_SHELL_TOOLS, **SWE_AGENT}),
    "mini-swe-agent": Profile("mini-swe-agent", {**_SHELL_TOOLS, **MINI_SWE_AGENT}),
    "tau-bench": Profile("tau-bench", TAU_BENCH),
    "gemini-cli": Profile("gemini-cli", {**_SHELL_TOOLS, **GEMINI_CLI}),
    "opencode": Profile("opencode", {**_SHELL_TOOLS, **OPENCODE}),
    "cline": Profile("cline", {**_SHELL_TOOLS, **CLINE}),
}


def get_profile(
    profile: Profile | str | Mapping[str, Rule] | None, default: str = "generic"
) -> Profile:
    """Resolve a profile argument: a Profile, a built-in name, a mapping of extra rules on top of
    *default*, or None for *default*. Raises ValueError naming the built-in profiles."""
    if profile is None:
        return PROFILES[default]
    if isinstance(profile, Profile):
        return profile
    if isinstance(profile, str):
        try:
            return PROFILES[profile]
        except KeyError:
            raise ValueError(
                f"unknown profile {profile!r}; known profiles: {', '.join(PROFILES)}"
            ) from None
    if isinstance(profile, Mapping):
        return PROFILES[default].extend(profile, name=f"{default}+custom")
    raise TypeError(
        f"profile must be a Profile, a profile name or a mapping of rules; got {type(profile).__name__}"
    )


def classify(
    name: str, args: Any = None, profile: Profile | str | Mapping[str, Rule] | None = None
) -> tuple[str, Target]:
    """(kind, target) of a tool call under *profile* (default: generic); raises ValueError on an unknown profile name."""
    return get_profile(profile).classify(name, args)
