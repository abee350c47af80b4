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
import loopcore.taxonomy; loopcore.taxonomy.classify_shell("cat a.py | grep x")
loaded = sorted(m for m in sys.modules if m.startswith(("loopcore._native_", "loopcore._")) and
                m.split(".")[1] in ("_native_hashing", "_native_guard", "_native_burn", "_native_shell",
                                    "_hashing_py", "_guard_py", "_burn_py", "_shell_py"))
print(json.dumps({"impl": loopcore.implementation(), "hashing": loopcore.hashing.canonical_hash.__module__,
                  "loaded": loaded}))
"""


def _probe(env_value):
    env = dict(os.environ)
    env.pop("LOOPCORE_NO_EXTENSIONS", None)
    if env_value is not None:
        env["LOOPCORE_NO_EXTENSIONS"] = env_value
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True
    )
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
        mod = _native_flag.load_twin(comp, "c")
        assert mod.__file__.endswith((".so", ".pyd")), mod.__file__


@pytest.mark.parametrize("value", ["1", "true", "YES", "on"])
def test_flag_selects_the_pure_twins(value):
    got = _probe(value)
    assert got["impl"] == "py"
    assert got["hashing"] == "loopcore._hashing_py"
    assert got["loaded"] == [
        "loopcore._burn_py",
        "loopcore._guard_py",
        "loopcore._hashing_py",
        "loopcore._shell_py",
    ]


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
        _native_flag.load_twin("hashing", "rust")


# ---------------------------------------------------------------- the build's shape (setup.py)


def _setup_module():
    """setup.py as a module (its setup() call is guarded by __main__)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("loopcore_setup_under_test", ROOT / "setup.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_vendored_c_is_compiled_once_into_a_library():
    """No extension compiles the vendored C itself: it is one static library they all link."""
    pytest.importorskip("Cython")
    setup = _setup_module()
    exts = setup.extensions()
    assert sorted(e.name for e in exts) == sorted(
        f"loopcore._native_{p.stem}" for p in (ROOT / "src" / "_native").glob("*.pyx")
    )
    for ext in exts:
        assert [pathlib.Path(s).suffix for s in ext.sources] == [".pyx"], ext.sources
    libs = setup.c_libraries()
    if setup.target_is_x86():
        ((name, info),) = libs
        assert name == setup.SHARED_C
        assert [pathlib.Path(s).name for s in info["sources"]] == ["xxh_x86dispatch.c"]
        assert "-fvisibility=hidden" in info["cflags"]
    else:
        assert libs == []


def test_build_ext_defaults_to_every_core_and_links_the_library(monkeypatch):
    pytest.importorskip("Cython")
    from setuptools import Distribution

    setup = _setup_module()
    monkeypatch.delenv("LOOPCORE_BUILD_JOBS", raising=False)

    def command(**opts):
        # a setup() call that declares only the extensions, as tools/build_inplace.py makes
        dist = Distribution({"ext_modules": setup.extensions(["hashing"])})
        cmd = setup.StrictBuildExt(dist)
        for key, value in opts.items():
            setattr(cmd, key, value)
        cmd.finalize_options()
        return dist, cmd

    dist, cmd = command()
    assert cmd.parallel == setup.build_jobs() >= 1
    if setup.target_is_x86():
        # build_ext.run links what the distribution's build_clib built
        assert dist.has_c_libraries() and dist.libraries == setup.c_libraries()
        assert dist.cmdclass["build_clib"] is setup.StrictBuildClib
    assert command(parallel="1")[1].parallel == 1  # -j 1 on the command line wins
    monkeypatch.setenv("LOOPCORE_BUILD_JOBS", "3")
    assert command()[1].parallel == 3


def test_release_flags_carry_no_debug_info(monkeypatch):
    setup = _setup_module()
    monkeypatch.setattr(setup, "DEBUG", False)
    monkeypatch.setattr(setup, "SANITIZE", [])
    cflags, ldflags = setup.build_flags()
    assert (
        "-O3" in cflags and cflags[-1] == "-g0" and "-g" not in cflags
    )  # -g0 last: it beats Python's -g
    monkeypatch.setattr(setup, "DEBUG", True)
    cflags, ldflags = setup.build_flags()
    assert cflags == ["-O0", "-g", "-UNDEBUG"] and ldflags == []
    monkeypatch.setattr(setup, "SANITIZE", ["address", "undefined"])
    cflags, ldflags = setup.build_flags()
    assert (
        "-fsanitize=address,undefined" in cflags
        and ldflags == ["-fsanitize=address,undefined"]
        and "-g" in cflags
    )


def test_no_pyx_needs_numpy_headers_unless_the_build_requires_numpy():
    """numpy is no build dependency while no .pyx cimports it (memoryviews need no numpy headers)."""
    import re

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    cimports = [
        p.name
        for p in (ROOT / "src" / "_native").glob("*.p*")
        if re.search(r"^\s*(cimport numpy|from numpy cimport)", p.read_text(), re.M)
    ]
    if cimports:
        assert any(r.startswith("numpy") for r in requires), (
            f"{cimports} cimport numpy: add it to build requires"
        )


@pytest.mark.c_extension
@pytest.mark.parametrize("size", [0, 1, 3, 16, 17, 128, 129, 240, 241, 1024, 4096, 65536, 1 << 20])
def test_compiled_xxh3_matches_python_xxhash_at_every_size(size):
    """The compiled hash goes through xxHash's runtime ISA dispatch for large buffers (the shared
    library): at every size it is XXH3-64 exactly, as python-xxhash computes it."""
    if _native_flag.NO_EXTENSIONS:
        pytest.skip("LOOPCORE_NO_EXTENSIONS=1 in this run: the pure build is under test")
    import random

    import xxhash

    native = _native_flag.load_twin("hashing", "c")
    pure = _native_flag.load_twin("hashing", "py")
    data = random.Random(size).randbytes(size)
    assert native._xxh3_bytes(data) == xxhash.xxh3_64_intdigest(data)
    assert native.canonical_hash(data) == pure.canonical_hash(data)
    assert native.canonical_hash(data.hex()) == pure.canonical_hash(data.hex())


# ---------------------------------------------------------------- one version source


def test_one_version_source():
    import re

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    from loopcore import _version

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "loopcore._version.__version__"
    }
    assert re.fullmatch(r"\d+\.\d+\.\d+([.-]?\w+)?", _version.__version__)
    writers = [
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "src" / "loopcore").rglob("*.py")
        if re.search(r"^__version__\s*=", p.read_text(), re.M)
    ]
    assert writers == ["src/loopcore/_version.py"]


def test_version_is_lazy_and_matches_the_installed_metadata():
    from conftest import package_env

    code = (
        "import sys, loopcore; before = 'loopcore._version' in sys.modules; v = loopcore.__version__;"
        "from loopcore import _version; import json;"
        "print(json.dumps([before, v, _version.__version__, 'loopcore._version' in sys.modules]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=package_env(), capture_output=True, text=True, check=True
    )
    import json

    before, version, source, after = json.loads(out.stdout)
    assert before is False and after is True  # import loopcore does not read it; the first use does
    assert version == source
    import importlib.metadata

    import loopcore

    try:
        dist = importlib.metadata.distribution("loopcore")
    except importlib.metadata.PackageNotFoundError:
        return  # an in-place build run from src/: no installed metadata to compare
    if (
        pathlib.Path(loopcore.__file__)
        .resolve()
        .is_relative_to(pathlib.Path(dist.locate_file("")).resolve())
    ):
        assert dist.version == version
