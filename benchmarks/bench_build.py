"""What a user's build costs: ``pip wheel . --no-deps`` and ``pip install .``, and the wheel's size.

    python benchmarks/bench_build.py [--tree PATH] [--runs N] [--skip-install] [--keep]

Each run builds from a fresh copy of the source tree (no generated C, no ``.so``, no ``build/``:
what a clean clone holds), with pip's normal build isolation, so it pays what ``pip install .``
pays: the isolated build environment (installed from pip's cache), Cython, gcc, the wheel.

* ``pip wheel . --no-deps``: the build alone.
* ``pip install .`` into a new virtualenv whose runtime dependencies were installed first (not
  timed, from the warm cache): the build plus the install of loopcore itself.

Beside the wall time, the user + system CPU time of pip and every process it started (the C
compiler included): on a shared machine the wall time also counts the wait for a core, the CPU
time is the work. The load average is printed before and after. The wheel is checked: it holds a
compiled module per ``src/_native/*.pyx`` and ``import loopcore`` from the install says ``c``.

``--tree`` measures another checkout (e.g. the main branch, for a before/after pair).
Bars: ``pip install .`` <= 30 s wall, wheel <= 2 MB. Exit code 0 = bars met, 1 = a bar
missed, 2 = a build failed.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _env import environment, print_table  # noqa: E402  (benchmarks/_env.py)

ROOT = pathlib.Path(__file__).resolve().parent.parent
BAR_INSTALL_S = 30.0
BAR_WHEEL_MB = 2.0
RUNTIME_DEPS = ["numpy>=1.26", "xxhash>=3.1", "orjson>=3.9", "rich>=13"]
SKIP_DIRS = {
    ".git",
    ".venv",
    "build",
    "dist",
    ".hypothesis",
    ".pytest_cache",
    "__pycache__",
    "bench-results",
}


def copy_tree(src: pathlib.Path, dst: pathlib.Path) -> pathlib.Path:
    """A clean-clone copy of *src*: no build outputs, no generated C beside the .pyx files."""

    def ignore(folder: str, names: list[str]) -> set[str]:
        out = {n for n in names if n in SKIP_DIRS or n.endswith((".so", ".pyd", ".o", ".egg-info"))}
        if pathlib.Path(folder).name == "_native":
            out |= {n for n in names if n.endswith((".c", ".cpp", ".html"))}
        return out

    shutil.copytree(src, dst, ignore=ignore)
    return dst


def timed(
    cmd: list[str], env: dict[str, str], cwd: pathlib.Path
) -> tuple[float, float, subprocess.CompletedProcess]:
    """(wall seconds, user+sys CPU seconds of the command and its children, result)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, res


def load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def check_wheel(whl: pathlib.Path, tree: pathlib.Path) -> list[str]:
    names = zipfile.ZipFile(whl).namelist()
    want = sorted(f"loopcore/_native_{p.stem}" for p in (tree / "src" / "_native").glob("*.pyx"))
    got = sorted(
        n.split(".")[0] for n in names if n.startswith("loopcore/_native_") and n.endswith(".so")
    )
    problems = [] if got == want else [f"wheel holds {got}, expected {want}"]
    return problems


def fail(what: str, res: subprocess.CompletedProcess) -> None:
    print(f"bench_build: {what} failed (rc={res.returncode})", file=sys.stderr)
    print((res.stdout + res.stderr)[-4000:], file=sys.stderr)
    sys.exit(2)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--tree",
        type=pathlib.Path,
        default=ROOT,
        help="source tree to build (default: this checkout)",
    )
    ap.add_argument("--runs", type=int, default=1, help="builds of each kind (median reported)")
    ap.add_argument("--skip-install", action="store_true", help="time pip wheel only")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder")
    ap.add_argument(
        "--python", default=sys.executable, help="interpreter whose pip builds (default: this one)"
    )
    args = ap.parse_args()

    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPCORE_")}
    env.pop("PYTHONPATH", None)
    tree = args.tree.resolve()
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="loopcore-bench-build."))
    print(environment(" ".join([os.path.relpath(__file__), *sys.argv[1:]])))
    print(f"tree: {tree}  ({args.runs} run(s) of each; load average before: {load()})")
    rows = []
    wheel_sizes = []
    try:
        wheel_runs = []
        for i in range(args.runs):
            src = copy_tree(tree, scratch / f"wheel-src-{i}")
            out = scratch / f"wheels-{i}"
            wall, cpu, res = timed(
                [args.python, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), "."],
                env,
                src,
            )
            if res.returncode:
                fail("pip wheel", res)
            (whl,) = out.glob("loopcore-*.whl")
            problems = check_wheel(whl, tree)
            if problems:
                print("bench_build: " + "; ".join(problems), file=sys.stderr)
                return 2
            wheel_sizes.append(whl.stat().st_size)
            wheel_runs.append((wall, cpu))
        rows.append(
            [
                "pip wheel . --no-deps",
                f"{statistics.median(w for w, _ in wheel_runs):.1f}",
                f"{statistics.median(c for _, c in wheel_runs):.1f}",
                "-",
                "-",
            ]
        )

        install_wall = None
        if not args.skip_install:
            venv = scratch / "venv"
            subprocess.run([args.python, "-m", "venv", str(venv)], check=True)
            py = str(venv / "bin" / "python")
            res = subprocess.run(
                [py, "-m", "pip", "install", "-q", *RUNTIME_DEPS],
                env=env,
                capture_output=True,
                text=True,
            )
            if res.returncode:
                fail("installing the runtime dependencies", res)
            install_runs = []
            for i in range(args.runs):
                src = copy_tree(tree, scratch / f"install-src-{i}")
                wall, cpu, res = timed(
                    [py, "-m", "pip", "install", "-q", "--force-reinstall", "--no-deps", "."],
                    env,
                    src,
                )
                if res.returncode:
                    fail("pip install .", res)
                install_runs.append((wall, cpu))
            probe = subprocess.run(
                [py, "-c", "import loopcore; print(loopcore.implementation())"],
                env=env,
                cwd=scratch,
                capture_output=True,
                text=True,
            )
            if probe.stdout.strip() != "c":
                print(
                    f"bench_build: the installed loopcore is {probe.stdout.strip()!r}, not 'c': {probe.stderr}",
                    file=sys.stderr,
                )
                return 2
            install_wall = statistics.median(w for w, _ in install_runs)
            rows.append(
                [
                    "pip install .",
                    f"{install_wall:.1f}",
                    f"{statistics.median(c for _, c in install_runs):.1f}",
                    f"<= {BAR_INSTALL_S:.0f}",
                    "met" if install_wall <= BAR_INSTALL_S else "MISSED",
                ]
            )
        size_mb = max(wheel_sizes) / 1e6
        rows.append(
            [
                "wheel size (MB)",
                f"{size_mb:.2f}",
                "-",
                f"<= {BAR_WHEEL_MB:.0f}",
                "met" if size_mb <= BAR_WHEEL_MB else "MISSED",
            ]
        )
        print_table(["step", "wall s", "CPU s (user+sys)", "bar", "verdict"], rows)
        print(f"load average after: {load()}")
        missed = size_mb > BAR_WHEEL_MB or (
            install_wall is not None and install_wall > BAR_INSTALL_S
        )
        return 1 if missed else 0
    finally:
        if args.keep:
            print(f"kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
