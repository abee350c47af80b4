"""Declares loopcore's Cython extensions and the C they share; everything else is in pyproject.toml.

Every ``src/_native/NAME.pyx`` compiles into ``loopcore._native_NAME``. The vendored C (xxHash's
runtime ISA dispatch on x86) is compiled once into a static library that the extensions link
(build_clib), not once per extension. The .pyx files are translated and compiled in parallel,
one job per usable core unless ``-j N`` says otherwise.

Environment (one truthiness rule, shared with ``loopcore._native_flag``):
  LOOPCORE_NO_EXTENSIONS=1  build and install the pure-Python twins only.
  LOOPCORE_DEBUG_BUILD=1    -O0 -g, bounds and wraparound checks back on.
  LOOPCORE_SANITIZE=address,undefined   build with those -fsanitize= checks (-O1 -g); run the
                            result with the sanitizer runtime preloaded (tools/sanitize_check.sh).
  LOOPCORE_BUILD_JOBS=N     parallel compile jobs when the command line gives no -j.
A release build carries no debug information (-g0; on Linux the linker strips debug sections).
A pure build records itself in the package (``loopcore/_build_flags.py``), so it imports as pure
without the variable at run time.
A compiler failure fails the build: there is no silent pure-Python fallback.
"""

import os
import pathlib
import sys
from concurrent.futures import ThreadPoolExecutor

from setuptools import setup
from setuptools.command.build import build
from setuptools.command.build_clib import build_clib
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

HERE = pathlib.Path(__file__).parent
NATIVE = HERE / "src" / "_native"
VENDOR = pathlib.Path("third_party") / "xxhash"  # vendored xxHash, BSD-2 (its LICENSE beside it)
SHARED_C = "loopcore_shared"  # the static library of the C every extension may call
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
    return any(
        tag in plat or tag == machine for tag in ("x86_64", "amd64", "i686", "i386", "win32")
    )


def native_sources(only=None):
    names = sorted(p.stem for p in NATIVE.glob("*.pyx"))
    if only:
        names = [n for n in names if n in only]
    return names


def build_flags():
    """(cflags, ldflags) for this kind of build: release, LOOPCORE_DEBUG_BUILD or LOOPCORE_SANITIZE.

    Release: -O3 and no debug info (-g0 overrides the -g Python's own CFLAGS carry), and on
    Linux the linker strips what debug sections are left (-Wl,--strip-debug; the symbol table
    stays, so perf and callgrind still name the functions).
    """
    if SANITIZE:
        san = "-fsanitize=" + ",".join(SANITIZE)
        debug = ["-UNDEBUG"] if DEBUG else []  # both: the sanitizers on the debug build's asserts
        return [*debug, "-O1", "-g", "-fno-omit-frame-pointer", "-fno-sanitize-recover=all", san], [
            san
        ]
    if DEBUG:
        return ["-O0", "-g", "-UNDEBUG"], []
    ldflags = ["-Wl,--strip-debug"] if sys.platform.startswith("linux") else []
    return ["-O3", "-g0"], ldflags


def c_libraries():
    """The shared C, compiled once into a static library that every extension links (build_clib).

    On x86 that is xxHash's runtime ISA dispatch unit (AVX2/AVX-512 where the CPU has them),
    built with baseline flags like python-xxhash does, so the wheel runs on any x86-64. Its
    symbols stay hidden: an extension that uses it keeps them to itself.
    """
    if not target_is_x86():
        return []
    cflags, _ = build_flags()
    return [
        (
            SHARED_C,
            {
                "sources": [str(VENDOR / "xxh_x86dispatch.c")],
                "include_dirs": [str(VENDOR)],
                "cflags": [*cflags, "-fvisibility=hidden"],
            },
        )
    ]


def extensions(only=None):
    """One Extension per src/_native/NAME.pyx (or those in *only*); cythonized by StrictBuildExt."""
    from setuptools import Extension

    cflags, ldflags = build_flags()
    native = NATIVE.relative_to(HERE)
    macros = [("LOOPCORE_XXH_DISPATCH", "1")] if target_is_x86() else []
    return [
        Extension(
            f"loopcore._native_{name}",
            [str(native / f"{name}.pyx")],
            include_dirs=[str(native), str(VENDOR)],
            define_macros=macros,
            extra_compile_args=cflags,
            extra_link_args=ldflags,
        )
        for name in native_sources(only)
    ]


def cythonize_all(exts, nthreads):
    """Translate the .pyx sources to C, *nthreads* at a time (Cython's own up-to-date check)."""
    from Cython.Build import cythonize

    directives = {
        "language_level": 3,
        "embedsignature": True,
        "boundscheck": DEBUG,
        "wraparound": DEBUG,
        "initializedcheck": DEBUG,
        "cdivision": not DEBUG,
        "freethreading_compatible": False,
    }
    return cythonize(
        exts,
        compiler_directives=directives,
        include_path=[str(NATIVE.relative_to(HERE))],
        annotate=DEBUG,
        nthreads=nthreads if nthreads > 1 else 0,
        # debug C (bounds checks on) lives apart, so a later release build never reuses it
        build_dir="build/cython-debug" if DEBUG else None,
    )


def build_jobs():
    """Parallel jobs when the command line gives none: LOOPCORE_BUILD_JOBS, else the usable cores."""
    raw = os.environ.get("LOOPCORE_BUILD_JOBS", "").strip()
    if raw:
        return max(1, int(raw))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _refuse(what, exc):
    return SystemExit(
        f"loopcore: compiling {what} failed ({type(exc).__name__}: {exc}). "
        "Refusing to fall back to pure Python silently; install a C compiler and the Python "
        "headers, or set LOOPCORE_NO_EXTENSIONS=1 to build the pure-Python twin on purpose."
    )


class StrictBuildClib(build_clib):
    """build_clib that keeps an up-to-date library and fails loudly.

    A library is rebuilt only when a source or a header beside it is newer than the archive, or
    when its flags changed (a release, debug or sanitizer build: the flags are stamped beside the
    archive), so an in-place rebuild after editing one .pyx does not recompile the vendored C.
    """

    def _stamp(self, name, info):
        archive = pathlib.Path(self.compiler.library_filename(name, output_dir=self.build_clib))
        flags = repr((info.get("cflags", []), info.get("macros", []), os.environ.get("CC", "")))
        return archive, archive.with_name(archive.name + ".flags"), flags

    def _up_to_date(self, name, info):
        archive, stamp, flags = self._stamp(name, info)
        if not archive.is_file() or not stamp.is_file() or stamp.read_text() != flags:
            return False
        inputs = [pathlib.Path(src) for src in info["sources"]]
        for folder in info.get("include_dirs", []):
            inputs += pathlib.Path(folder).glob("*.h")
        built = archive.stat().st_mtime
        return all(path.stat().st_mtime < built for path in inputs)

    def build_libraries(self, libraries):
        todo = [(name, info) for name, info in libraries if not self._up_to_date(name, info)]
        try:
            super().build_libraries(todo)
        except Exception as exc:  # noqa: BLE001 - re-raised with context
            raise _refuse(
                "the shared C library " + ", ".join(name for name, _ in todo), exc
            ) from exc
        for name, info in todo:
            _, stamp, flags = self._stamp(name, info)
            stamp.write_text(flags)

    def archives(self):
        """The library files the extensions link (a rebuilt library relinks them)."""
        return [str(self._stamp(name, info)[0]) for name, info in self.libraries or []]


class StrictBuildExt(build_ext):
    """build_ext that links the shared C library, cythonizes and compiles in parallel, and turns
    any compiler failure into a loud, explained error.

    ``-j N`` on the command line wins; ``pip install .`` passes none, so the default is every
    usable core (LOOPCORE_BUILD_JOBS to choose).
    """

    def finalize_options(self):
        if not self.distribution.libraries and self.distribution.ext_modules:
            # a setup() call that declares only the extensions (tools/build_inplace.py)
            self.distribution.libraries = c_libraries()
        self.distribution.cmdclass.setdefault("build_clib", StrictBuildClib)
        super().finalize_options()  # puts build_clib's folder and library names on the link line
        if self.parallel is None:
            self.parallel = build_jobs()

    def run(self):
        try:
            jobs = (
                build_jobs()
                if self.parallel is True or not isinstance(self.parallel, int)
                else self.parallel
            )
            with ThreadPoolExecutor(max_workers=1) as pool:
                # the library compiles (gcc, a child process) while Cython translates the .pyx
                clib = None
                if self.distribution.has_c_libraries() and self.extensions:
                    clib = pool.submit(self.run_command, "build_clib")
                translated = {ext.name: ext for ext in cythonize_all(self.extensions, jobs)}
                if clib is not None:
                    clib.result()
            archives = (
                self.get_finalized_command("build_clib").archives() if clib is not None else []
            )
            for (
                ext
            ) in self.extensions:  # the objects build_ext's finalize_options annotated, now on C
                ext.sources = translated[ext.name].sources
                ext.depends = [*ext.depends, *archives]  # a rebuilt library relinks them
            # longest first: the parallel build ends when its biggest module does
            self.extensions.sort(key=lambda ext: -sum(os.path.getsize(s) for s in ext.sources))
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
            raise _refuse(ext.name, exc) from exc


class LibraryInExtBuild(build):
    """build whose build_ext runs build_clib itself (beside Cython's translation), not before it."""

    sub_commands = [(name, pred) for name, pred in build.sub_commands if name != "build_clib"]


class MarkedBuildPy(build_py):
    """build_py that writes loopcore/_build_flags.py (which kind of build this install is) and
    ships the documentation pages (docs/**/*.md) as loopcore/_docs, for ``loopcore docs``."""

    def run(self):
        super().run()
        docs = HERE / "docs"
        for page in sorted(docs.rglob("*.md")):
            out = pathlib.Path(self.build_lib) / "loopcore" / "_docs" / page.relative_to(docs)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(page.read_bytes())
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
        setup(
            ext_modules=extensions(),
            libraries=c_libraries(),
            cmdclass={
                "build": LibraryInExtBuild,
                "build_clib": StrictBuildClib,
                "build_ext": StrictBuildExt,
                "build_py": MarkedBuildPy,
            },
        )
