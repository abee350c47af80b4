"""What a hook process imports: no numpy, no rich, no trace adapters; ``import loopcore`` is lazy."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hook_events import Claude, hook_env
from test_api import documented_api

HEAVY = (
    "numpy",
    "rich",
    "loopcore.adapters",
    "loopcore.burn",
    "loopcore.encoded",
    "loopcore.report",
    "loopcore.replay",
    "loopcore._burn_py",
    "loopcore._native_burn",
)

#: The public API: the names docs/api.md lists (tests/test_api.py checks loopcore.__all__).
PUBLIC = sorted(documented_api())


def _imported(args: list[str], stdin: bytes, env: dict) -> set[str]:
    p = subprocess.run(
        [sys.executable, "-X", "importtime", *args],
        input=stdin,
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr.decode()
    return {
        line.rsplit("|", 1)[1].strip()
        for line in p.stderr.decode().splitlines()
        if line.startswith("import time:") and "|" in line
    } - {"imported package"}


@pytest.mark.parametrize("entry", [["-m", "loopcore.hooks"], ["-m", "loopcore", "hook"]])
def test_a_hook_call_imports_nothing_heavy(tmp_path, impl, entry):
    c = Claude()
    ev = json.dumps(c.pre("Read", {"file_path": "/home/dev/shop/a.py"})).encode()
    mods = _imported([*entry, "claude", "--state", str(tmp_path)], ev, hook_env(impl.name))
    assert "loopcore.guard" in mods and "loopcore.taxonomy.profiles" in mods and "_sqlite3" in mods
    assert not [m for m in mods if m.startswith(HEAVY)]


def test_import_loopcore_is_lazy_and_keeps_its_api(impl):
    code = (
        "import sys, loopcore; before = sorted(m for m in sys.modules if m.startswith(('numpy', 'loopcore.')));"
        "import json; print(json.dumps([before, loopcore.__all__, sorted(dir(loopcore))]))"
    )
    p = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, env=hook_env(impl.name), timeout=60
    )
    before, all_, dir_ = json.loads(p.stdout)
    assert before == ["loopcore._native_flag"]
    assert all_ == PUBLIC
    assert set(PUBLIC) <= set(dir_)


def test_every_public_name_resolves_to_its_module():
    import loopcore
    from loopcore import adapters, burn, decision, guard, policy, trace

    for name in PUBLIC:
        assert hasattr(loopcore, name), name
    assert loopcore.Guard is guard.Guard and loopcore.Policy is policy.Policy
    assert loopcore.analyse_burn is burn.analyse_burn and loopcore.ALLOW is guard.ALLOW
    assert loopcore.load is adapters.load and loopcore.Decision is decision.Decision
    assert loopcore.Step is trace.Step
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        loopcore.nope  # noqa: B018
    ns: dict = {}
    exec("from loopcore import *", ns)  # noqa: S102
    assert set(PUBLIC) - {"__version__"} <= set(ns)


#: Start-up costs a hook call does without (benchmarks/bench_hook.py): typing (the guard's
#: modules take their annotations as strings), orjson (its import pulls in uuid, datetime and
#: dataclasses), argparse and the CLI module, logging (made only when an event is logged), the
#: sqlite3 package (the hook opens the database through the C module; the package adds datetime).
LEAN = (
    "orjson",
    "argparse",
    "logging",
    "uuid",
    "datetime",
    "sqlite3",
    "loopcore.cli",
    "loopcore.hooks._install",
)


def test_the_installed_command_imports_only_the_hook_path(tmp_path, impl):
    import shlex

    from loopcore.hooks._install import hook_command

    argv = shlex.split(hook_command("claude", state=str(tmp_path)))
    assert argv[1:3] == ["-I", "-S"]  # no site, no .pth files, no project directory on sys.path
    c = Claude()
    ev = json.dumps(c.pre("Read", {"file_path": "/home/dev/shop/a.py"})).encode()
    p = subprocess.run(
        [argv[0], "-X", "importtime", *argv[1:]],
        input=ev,
        capture_output=True,
        env=hook_env(impl.name),
        timeout=60,
    )
    assert p.returncode == 0 and p.stdout == b"", p.stderr.decode()[-2000:]
    mods = {
        line.rsplit("|", 1)[1].strip()
        for line in p.stderr.decode().splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "loopcore.guard" in mods and "_sqlite3" in mods and "site" not in mods
    assert not [m for m in mods if m.startswith(HEAVY + LEAN)]
    if impl.name != "py":  # the pure engine twin's own modules may use typing
        assert "typing" not in mods


def test_the_loopcore_console_script_sends_hook_straight_to_the_hook(tmp_path, impl):
    """``loopcore hook claude`` (the console script's entry) never loads loopcore.cli."""
    c = Claude()
    ev = json.dumps(c.pre("Read", {"file_path": "/home/dev/shop/b.py"})).encode()
    code = (
        "import sys; sys.argv = ['loopcore', 'hook', 'claude', '--state', sys.argv[1]];"
        "from loopcore.hooks._entry import main; sys.exit(main())"
    )
    mods = _imported(["-c", code, str(tmp_path)], ev, hook_env(impl.name))
    assert "loopcore.guard" in mods and "_sqlite3" in mods
    assert not [m for m in mods if m.startswith(HEAVY + LEAN)]
    p = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.argv = ['loopcore', '--version'];"
            "from loopcore.hooks._entry import main; sys.exit(main())",
        ],
        capture_output=True,
        env=hook_env(impl.name),
        timeout=60,
    )
    assert p.returncode == 0 and p.stdout.strip()
