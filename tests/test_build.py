"""The install really exposes the compiled core, and the flag really selects the pure twins."""
from __future__ import annotations

import ast
import os
import pathlib
import subprocess
import sys

import pytest

from loopcore import _native_flag

ROOT = pathlib.Path(__file__).resolve().parent.parent
COMPONENTS = ("hashing", "guard", "burn", "shell")

PROBE = """
import json, sys, loopcore
g = loopcore.Guard()
g.check("s", "read", {"path": "a"})
g.record("s", "read", {"path": "a"}, "text")
steps = [loopcore.Step("s", 0, "observe", "read", "a", {"path": "a"}, "x", tokens_in=5)] * 2
loopcore.analyse_many([loopcore.Trace(list(steps))])
loopcore.classify_shell("cat a.py | grep x")
loaded = sorted(m for m in sys.modules if m.startswith(("loopcore._native_", "loopcore._")) and
                m.split(".")[1] in ("_native_hashing", "_native_guard", "_native_burn", "_native_shell",
                                    "_hashing_py", "_guard_py", "_burn_py", "_shell_py"))
print(json.dumps({"impl": loopcore.implementation(), "hashing": loopcore.canonical_hash.__module__,
                  "loaded": loaded}))
"""


def _probe(env_value):
    env = dict(os.environ)
    env.pop("LOOPCORE_NO_EXTENSIONS", None)
    if env_value is not None:
        env["LOOPCORE_NO_EXTENSIONS"] = env_value
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
    import json

    return json.loads(out.stdout)


@pytest.mark.c_extension
def test_default_import_is_the_compiled_core():
    if _native_flag.NO_EXTENSIONS:
        pytest.skip("LOOPCORE_NO_EXTENSIONS=1 in this run: the pure build is under test")
    got = _probe(None)
    assert got["impl"] == "c"
    assert got["hashing"] == "loopcore._native_hashing"
    for comp in COMPONENTS:
        assert f"loopcore._native_{comp}" in got["loaded"]
    for comp in COMPONENTS:
        mod = _native_flag.load(comp, "c")
        assert mod.__file__.endswith((".so", ".pyd")), mod.__file__


@pytest.mark.parametrize("value", ["1", "true", "YES", "on"])
def test_flag_selects_the_pure_twins(value):
    got = _probe(value)
    assert got["impl"] == "py"
    assert got["hashing"] == "loopcore._hashing_py"
    assert got["loaded"] == ["loopcore._burn_py", "loopcore._guard_py", "loopcore._hashing_py", "loopcore._shell_py"]


@pytest.mark.parametrize("value", ["", "0", "false", "No", "off"])
def test_falsy_flag_values(value, monkeypatch):
    monkeypatch.setenv("LOOPCORE_NO_EXTENSIONS", value)
    assert _native_flag.env_flag("LOOPCORE_NO_EXTENSIONS") is False


def test_build_and_runtime_share_one_truthiness_rule():
    """setup.py's env_flag must be the same rule as loopcore._native_flag.env_flag."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    falsy = None
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "FALSY":
            falsy = ast.literal_eval(node.value)
    assert falsy == set(_native_flag._FALSY)


def test_unknown_implementation_name():
    with pytest.raises(ValueError, match="expected 'c' or 'py'"):
        _native_flag.load("hashing", "rust")
