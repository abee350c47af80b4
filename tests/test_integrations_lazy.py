"""The integrations are optional: ``import loopcore`` pulls none of them, a missing extra says how to get it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from conftest import package_env

FRAMEWORKS = (
    "mcp",
    "langchain",
    "langchain_core",
    "langgraph",
    "agents",
    "pydantic_ai",
    "opentelemetry",
)

# (integration module, the framework module hidden from it, the extra its error must name)
EXTRAS = [
    ("loopcore.integrations.langchain", "langchain", "langchain"),
    ("loopcore.integrations.openai_agents", "agents", "openai-agents"),
    ("loopcore.integrations.pydantic_ai", "pydantic_ai", "pydantic-ai"),
    ("loopcore.integrations.otel", "opentelemetry", "otel"),
]


def _python(code: str) -> subprocess.CompletedProcess:
    env = package_env()
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_import_loopcore_pulls_no_framework():
    proc = _python(f"""
        import sys
        import loopcore, loopcore.integrations, loopcore.integrations.mcp_proxy
        print(sorted(m for m in sys.modules if m.split(".")[0] in {FRAMEWORKS!r}))
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


@pytest.mark.parametrize("module, hidden, extra", EXTRAS)
def test_a_missing_extra_names_the_pip_command(module, hidden, extra):
    proc = _python(f"""
        import importlib.abc, sys

        class Hide(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == {hidden!r} or name.startswith({hidden!r} + "."):
                    raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
                return None

        sys.meta_path.insert(0, Hide())
        try:
            import {module}
        except ImportError as exc:
            print(exc)
        else:
            print("imported")
    """)
    assert proc.returncode == 0, proc.stderr
    assert f"pip install 'loopcore[{extra}]'" in proc.stdout, proc.stdout


def test_telemetry_required_without_the_package_raises():
    proc = _python("""
        import importlib.abc, sys

        class Hide(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "opentelemetry":
                    raise ModuleNotFoundError(name, name=name)

        sys.meta_path.insert(0, Hide())
        from loopcore.integrations._common import Telemetry
        import loopcore
        quiet = Telemetry()  # auto: silently off
        quiet(loopcore.Decision("block", "x", 1, "m"), tool="t", source="tool_input")
        try:
            Telemetry(True)
        except ImportError as exc:
            print(exc)
    """)
    assert proc.returncode == 0, proc.stderr
    assert "pip install 'loopcore[otel]'" in proc.stdout
