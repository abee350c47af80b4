"""The build itself: the pure build ships no extension, and a broken compiler fails loudly."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def _copy_tree(tmp_path):
    """A clean copy of the sources (no in-place build outputs) to build from."""
    dst = tmp_path / "src-copy"
    skip = shutil.ignore_patterns("*.so", "build", "*.egg-info", "__pycache__", ".venv", ".git", ".hypothesis",
                                  ".pytest_cache")

    def ignore(folder, names):
        out = set(skip(folder, names))
        if pathlib.Path(folder).name == "_native":  # generated C and annotations; vendored C stays
            out |= {n for n in names if n.endswith((".c", ".html"))}
        return out

    shutil.copytree(ROOT, dst, ignore=ignore)
    assert (dst / "third_party" / "xxhash" / "xxh_x86dispatch.c").is_file()
    return dst


def _wheel(src, out, env_extra):
    env = dict(os.environ)
    env.pop("LOOPCORE_NO_EXTENSIONS", None)  # each build says which kind it is (a pure test run sets it)
    env.update(env_extra)
    return subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w", str(out), str(src)],
        env=env,
        capture_output=True,
        text=True,
    )


def test_pure_build_ships_no_compiled_module(tmp_path):
    src = _copy_tree(tmp_path)
    res = _wheel(src, tmp_path / "wheels", {"LOOPCORE_NO_EXTENSIONS": "1"})
    assert res.returncode == 0, res.stdout + res.stderr
    (whl,) = (tmp_path / "wheels").glob("loopcore-*.whl")
    names = zipfile.ZipFile(whl).namelist()
    assert "loopcore/_hashing_py.py" in names
    assert not [n for n in names if n.endswith((".so", ".pyd"))]
    assert "loopcore/py.typed" in names


def test_compiler_failure_fails_the_build_loudly(tmp_path):
    src = _copy_tree(tmp_path)
    res = _wheel(src, tmp_path / "wheels", {"CC": "false", "LDSHARED": "false"})
    assert res.returncode != 0
    out = res.stdout + res.stderr
    assert "Refusing to fall back to pure Python silently" in out or "compiling the Cython core failed" in out
    assert "(CompileError: Command '['false'" in out  # the compiler failed, not a missing source
    assert not list((tmp_path / "wheels").glob("*.whl"))


def _installed_implementation(tmp_path, whl, env_extra):
    target = tmp_path / "site"
    res = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target", str(target),
                          str(whl)], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    env = {k: v for k, v in os.environ.items() if k not in ("LOOPCORE_NO_EXTENSIONS", "PYTHONPATH")}
    env.update(env_extra)
    # the deps come from this interpreter's site-packages; loopcore only from the install
    env["PYTHONPATH"] = str(target)
    return subprocess.run(
        [sys.executable, "-c", "import loopcore; print(loopcore.implementation(), loopcore.__file__)"],
        capture_output=True, text=True, env=env, cwd=tmp_path,
    )


def test_pure_build_imports_as_pure_without_the_variable(tmp_path):
    src = _copy_tree(tmp_path)
    res = _wheel(src, tmp_path / "wheels", {"LOOPCORE_NO_EXTENSIONS": "1"})
    assert res.returncode == 0, res.stdout + res.stderr
    (whl,) = (tmp_path / "wheels").glob("loopcore-*.whl")
    assert "loopcore/_build_flags.py" in zipfile.ZipFile(whl).namelist()
    for env in ({}, {"LOOPCORE_NO_EXTENSIONS": "0"}):
        run = _installed_implementation(tmp_path, whl, env)
        assert run.returncode == 0, run.stderr
        impl, where = run.stdout.split()
        assert impl == "py" and where.startswith(str(tmp_path / "site"))
