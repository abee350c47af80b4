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
    skip = shutil.ignore_patterns(
        "*.so",
        "build",
        "*.egg-info",
        "__pycache__",
        ".venv",
        ".git",
        ".hypothesis",
        ".pytest_cache",
    )

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
    env.pop(
        "LOOPCORE_NO_EXTENSIONS", None
    )  # each build says which kind it is (a pure test run sets it)
    env.update(env_extra)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-build-isolation",
            "--no-deps",
            "-w",
            str(out),
            str(src),
        ],
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
    assert (
        "Refusing to fall back to pure Python silently" in out
        or "compiling the Cython core failed" in out
    )
    assert "(CompileError: Command '['false'" in out  # the compiler failed, not a missing source
    assert not list((tmp_path / "wheels").glob("*.whl"))


def _installed_implementation(tmp_path, whl, env_extra):
    target = tmp_path / "site"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-index",
            "--target",
            str(target),
            str(whl),
        ],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    env = {k: v for k, v in os.environ.items() if k not in ("LOOPCORE_NO_EXTENSIONS", "PYTHONPATH")}
    env.update(env_extra)
    # the deps come from this interpreter's site-packages; loopcore only from the install
    env["PYTHONPATH"] = str(target)
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "import loopcore; print(loopcore.implementation(), loopcore.__file__)",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
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


def _elf_sections(path):
    """Section names of an ELF file (enough of the format to list them; no readelf needed)."""
    import struct

    data = pathlib.Path(path).read_bytes()
    assert data[:4] == b"\x7fELF", path
    is64, little = data[4] == 2, data[5] == 1
    end = "<" if little else ">"
    if is64:
        (shoff,) = struct.unpack_from(end + "Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from(end + "HHH", data, 0x3A)
        name_at, offset_at, fmt = 0, 0x18, "Q"
    else:
        (shoff,) = struct.unpack_from(end + "I", data, 0x20)
        shentsize, shnum, shstrndx = struct.unpack_from(end + "HHH", data, 0x2E)
        name_at, offset_at, fmt = 0, 0x10, "I"

    def header(i):
        base = shoff + i * shentsize
        (name,) = struct.unpack_from(end + "I", data, base + name_at)
        (offset,) = struct.unpack_from(end + fmt, data, base + offset_at)
        return name, offset

    _, strtab = header(shstrndx)
    names = []
    for i in range(shnum):
        name, _ = header(i)
        names.append(data[strtab + name : data.index(b"\0", strtab + name)].decode())
    return names


def _build_inplace(src, env_extra, *names):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPCORE_")}
    env.update(env_extra)
    res = subprocess.run(
        [sys.executable, "tools/build_inplace.py", *names],
        cwd=src,
        env=env,
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    return res


HASH_PROBE = """
import json, random, sys, xxhash
from loopcore import _native_hashing as native, _hashing_py as pure
bad = []
for size in (0, 17, 129, 240, 241, 4096, 1 << 16, 1 << 20):
    data = random.Random(size).randbytes(size)
    if native._xxh3_bytes(data) != xxhash.xxh3_64_intdigest(data) or native.canonical_hash(data) != pure.canonical_hash(data):
        bad.append(size)
print(json.dumps({"file": native.__file__, "bad": bad}))
"""


def _hash_probe(src):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPCORE_")}
    env["PYTHONPATH"] = str(src / "src")  # the copy's own fresh build
    out = subprocess.run(
        [sys.executable, "-c", HASH_PROBE], cwd=src, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    import json

    return json.loads(out.stdout)


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads the ELF sections of the built module"
)
def test_release_build_has_no_debug_info_and_hashes_right(tmp_path):
    """A release build (the default) carries no debug sections, and its hash (the shared xxHash
    library, runtime ISA dispatch included) is XXH3 and the pure twin's at every size."""
    src = _copy_tree(tmp_path)
    _build_inplace(src, {}, "hashing")
    (so,) = (src / "src" / "loopcore").glob("_native_hashing*.so")
    sections = _elf_sections(so)
    assert ".text" in sections and ".dynsym" in sections
    assert not [s for s in sections if s.startswith((".debug", ".zdebug"))], sections
    got = _hash_probe(src)
    assert got["bad"] == [] and got["file"] == str(so)
    # a second build finds the library up to date and leaves the module alone
    before = so.stat().st_mtime_ns
    _build_inplace(src, {}, "hashing")
    assert so.stat().st_mtime_ns == before


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads the ELF sections of the built module"
)
def test_debug_build_keeps_debug_info(tmp_path):
    """LOOPCORE_DEBUG_BUILD=1 is -O0 -g: the module (the shared library's code too) has DWARF."""
    src = _copy_tree(tmp_path)
    _build_inplace(src, {"LOOPCORE_DEBUG_BUILD": "1"}, "hashing")
    (so,) = (src / "src" / "loopcore").glob("_native_hashing*.so")
    assert ".debug_info" in _elf_sections(so)
    assert _hash_probe(src)["bad"] == []
    # the build switched back to release rebuilds the library and relinks the module
    _build_inplace(src, {}, "hashing")
    assert not [s for s in _elf_sections(so) if s.startswith(".debug")]


def test_wheel_metadata_version_is_the_one_source(tmp_path):
    from loopcore import _version

    src = _copy_tree(tmp_path)
    res = _wheel(src, tmp_path / "wheels", {"LOOPCORE_NO_EXTENSIONS": "1"})
    assert res.returncode == 0, res.stdout + res.stderr
    (whl,) = (tmp_path / "wheels").glob("loopcore-*.whl")
    assert whl.name.startswith(f"loopcore-{_version.__version__}-")
    with zipfile.ZipFile(whl) as zf:
        (meta,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        assert f"\nVersion: {_version.__version__}\n" in zf.read(meta).decode()
        assert "loopcore/_version.py" in zf.namelist()


def test_the_pages_the_help_points_to_ship_in_the_wheel(tmp_path):
    """`loopcore --help` sends the reader to `loopcore docs cli`: an installed wheel prints it."""
    src = _copy_tree(tmp_path)
    res = _wheel(src, tmp_path / "wheels", {"LOOPCORE_NO_EXTENSIONS": "1"})
    assert res.returncode == 0, res.stdout + res.stderr
    (whl,) = (tmp_path / "wheels").glob("loopcore-*.whl")
    with zipfile.ZipFile(whl) as zf:
        names = set(zf.namelist())
    pages = sorted(p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md"))
    assert "cli.md" in pages
    assert {f"loopcore/_docs/{p}" for p in pages} <= names
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target", str(target)]
        + [str(whl)],
        check=True,
        capture_output=True,
    )
    env = {k: v for k, v in os.environ.items() if k not in ("LOOPCORE_NO_EXTENSIONS", "PYTHONPATH")}
    env["PYTHONPATH"] = str(target)

    def cli(*args):
        return subprocess.run(
            [sys.executable, "-m", "loopcore", *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
        )

    helped = cli("--help")
    assert helped.returncode == 0 and "loopcore docs cli" in " ".join(helped.stdout.split())
    page = cli("docs", "cli")
    assert page.returncode == 0, page.stderr
    assert page.stdout == (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    listed = cli("docs")
    assert "cli" in listed.stdout.split() and "guard" in listed.stdout.split()
    missing = cli("docs", "no-such-page")
    assert missing.returncode == 2 and "no page" in missing.stderr
