"""Declares loopcore's Cython extensions; everything else is in pyproject.toml.

Every ``src/_native/NAME.pyx`` compiles into ``loopcore._native_NAME``.

Environment (one truthiness rule, shared with ``loopcore._native_flag``):
  LOOPCORE_NO_EXTENSIONS=1  build and install the pure-Python twins only.
  LOOPCORE_DEBUG_BUILD=1    -O0 -g, bounds and wraparound checks back on.
  LOOPCORE_SANITIZE=address,undefined   build with those -fsanitize= checks (-O1 -g); run the
                            result with the sanitizer runtime preloaded (tools/sanitize_check.sh).
A pure build records itself in the package (``loopcore/_build_flags.py``), so it imports as pure
without the variable at run time.
A compiler failure fails the build: there is no silent pure-Python fallback.
"""
import os
import pathlib
import sys

from setuptools import setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

HERE = pathlib.Path(__file__).parent
NATIVE = HERE / "src" / "_native"
FALSY = {"", "0", "false", "no", "off"}


def env_flag(name):
    # Must stay identical to loopcore._native_flag.env_flag (a test checks it).
    return os.environ.get(name, "").strip().lower() not in FALSY


NO_EXTENSIONS = env_flag("LOOPCORE_NO_EXTENSIONS") or sys.implementation.name != "cpython"
DEBUG = env_flag("LOOPCORE_DEBUG_BUILD")
SANITIZE = [s.strip() for s in os.environ.get("LOOPCORE_SANITIZE", "").split(",") if s.strip()]


def target_is_x86():
    import platform
    import sysconfig

    plat = sysconfig.get_platform().lower()
    machine = platform.machine().lower()
    return any(tag in plat or tag == machine for tag in ("x86_64", "amd64", "i686", "i386", "win32"))


def native_sources(only=None):
    names = sorted(p.stem for p in NATIVE.glob("*.pyx"))
    if only:
        names = [n for n in names if n in only]
    return names


def extensions(only=None):
    import numpy
    from Cython.Build import cythonize
    from setuptools import Extension

    directives = {
        "language_level": 3,
        "embedsignature": True,
        "boundscheck": DEBUG,
        "wraparound": DEBUG,
        "initializedcheck": DEBUG,
        "cdivision": not DEBUG,
        "freethreading_compatible": False,
    }
    if DEBUG:
        cflags = ["-O0", "-g", "-UNDEBUG"]
    else:
        cflags = ["-O3"]
    ldflags = []
    if SANITIZE:
        san = "-fsanitize=" + ",".join(SANITIZE)
        cflags = [f for f in cflags if not f.startswith("-O")] + [
            "-O1", "-g", "-fno-omit-frame-pointer", "-fno-sanitize-recover=all", san]
        ldflags = [san]
    native = NATIVE.relative_to(HERE)
    vendor = pathlib.Path("third_party") / "xxhash"  # vendored xxHash, BSD-2 (its LICENSE beside it)
    macros = [("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")]
    extra_sources = []
    if target_is_x86():
        # xxHash's runtime ISA dispatch (AVX2/AVX-512 where the CPU has them), built with
        # baseline flags like python-xxhash does, so the wheel runs on any x86-64.
        extra_sources.append(str(vendor / "xxh_x86dispatch.c"))
        macros.append(("LOOPCORE_XXH_DISPATCH", "1"))
    exts = [
        Extension(
            f"loopcore._native_{name}",
            [str(native / f"{name}.pyx"), *extra_sources],
            include_dirs=[str(native), str(vendor), numpy.get_include()],
            define_macros=macros,
            extra_compile_args=cflags,
            extra_link_args=ldflags,
        )
        for name in native_sources(only)
    ]
    return cythonize(
        exts,
        compiler_directives=directives,
        include_path=[str(NATIVE.relative_to(HERE))],
        annotate=DEBUG,
        # debug C (bounds checks on) lives apart, so a later release build never reuses it
        build_dir="build/cython-debug" if DEBUG else None,
    )


class StrictBuildExt(build_ext):
    """build_ext that turns any compiler failure into a loud, explained error."""

    def run(self):
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 - re-raised with context
            raise SystemExit(
                "loopcore: compiling the Cython core failed "
                f"({type(exc).__name__}: {exc}).\n"
                "Install a C compiler and the Python headers, or build the pure-Python "
                "twin on purpose with LOOPCORE_NO_EXTENSIONS=1."
            ) from exc

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001
            raise SystemExit(
                f"loopcore: compiling {ext.name} failed ({type(exc).__name__}: {exc}). "
                "Refusing to fall back to pure Python silently; set LOOPCORE_NO_EXTENSIONS=1 "
                "to build the pure-Python twin on purpose."
            ) from exc


class MarkedBuildPy(build_py):
    """build_py that writes loopcore/_build_flags.py: which kind of build this install is."""

    def run(self):
        super().run()
        target = pathlib.Path(self.build_lib) / "loopcore" / "_build_flags.py"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(
            '"""Written by setup.py at build time: which kind of build this install is."""\n'
            f"PURE_BUILD = {bool(NO_EXTENSIONS)!r}\n"
        )


if __name__ == "__main__":  # setuptools.build_meta runs this file as __main__
    if NO_EXTENSIONS:
        setup(ext_modules=[], cmdclass={"build_py": MarkedBuildPy})
    else:
        setup(ext_modules=extensions(), cmdclass={"build_ext": StrictBuildExt, "build_py": MarkedBuildPy})
