"""Thin adapters that put one :class:`loopcore.Guard` in front of the tools of other harnesses.

Each submodule is imported on its own and only on demand, so ``import loopcore`` pulls in none
of the frameworks:

* ``loopcore.integrations.mcp_proxy``: a stdio proxy in front of any MCP server (no extra
  needed; the ``mcp`` extra only adds the SDK its tests talk through).
* ``loopcore.integrations.langchain``: LangChain v1 agent middleware and a LangGraph
  ``ToolNode`` wrapper (``pip install 'loopcore[langchain]'``).
* ``loopcore.integrations.openai_agents``: OpenAI Agents SDK tool guardrails
  (``pip install 'loopcore[openai-agents]'``).
* ``loopcore.integrations.pydantic_ai``: a pydantic-ai capability with tool hooks
  (``pip install 'loopcore[pydantic-ai]'``).
* ``loopcore.integrations.otel``: each warn/block as an event on the current OpenTelemetry span
  (``pip install 'loopcore[otel]'``).

None of them changes the guard's rules: they call ``Guard.check`` before a tool runs and
``Guard.record`` after. See docs/integrations/.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["require"]


def require(module: str, extra: str, package: str | None = None) -> ModuleType:
    """Import *module*, or raise ImportError naming ``pip install 'loopcore[extra]'``."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"this loopcore integration needs {package or module.split('.')[0]!r}, which is not "
            f"installed: pip install 'loopcore[{extra}]' ({exc})"
        ) from exc
