"""tau-bench result files: a list of ``{task_id, trial, reward, info, traj}``, one trace each.

``traj`` is OpenAI chat messages with a simulated user. Tool-call ids are reused (even within
one trajectory), so each ``tool`` message is paired with the calls of the assistant message
right before it, never by id alone. Tool errors come back as plain ``"Error: ..."`` text.
There is no per-call usage: tokens are estimated.
"""

from __future__ import annotations

from typing import Any

from ._base import Ledger, Trace
from ._io import Ctx
from .openai_chat import walk_chat

NAME = "tau-bench"
PROFILE = "tau-bench"


def _result(step: Any, m: dict, content: Any) -> tuple[Any, Any, dict | None]:
    if isinstance(content, str) and content.startswith("Error"):
        return content, content, None
    return content, None, None


def parse(doc: Any, ctx: Ctx) -> list[Trace]:
    """One trace per task/trial entry; source is ``path#N``."""
    entries = doc if isinstance(doc, list) else [doc]
    out = []
    profile = ctx.profile(PROFILE)
    for n, e in enumerate(entries):
        if not isinstance(e, dict) or not isinstance(e.get("traj"), list):
            ctx.bad("a tau-bench entry needs a traj list", n)
            continue
        session = f"task-{e.get('task_id')}/trial-{e.get('trial', 0)}"
        ledger = Ledger(session, profile)
        walk_chat(e["traj"], ctx, ledger, on_result=_result)
        meta = {"task_id": e.get("task_id"), "trial": e.get("trial"), "reward": e.get("reward")}
        out.append(
            ledger.trace(source=f"{ctx.path}#{n}" if ctx.path else f"#{n}", fmt=NAME, meta=meta)
        )
    return out


def sniff(doc: Any) -> bool:
    """Entries with task_id and a traj list."""
    first = doc[0] if isinstance(doc, list) and doc else doc
    return (
        isinstance(first, dict)
        and isinstance(first.get("traj"), list)
        and ("task_id" in first or "reward" in first)
    )
