"""The ``loopcore`` command line: ``analyse`` recorded traces, ``replay`` them through a Guard.

Exit codes (stable; scripts and CI rely on them):

* 0: success.
* 1: ``analyse --fail-above RATIO`` and the overall waste ratio is above RATIO, or
  ``replay --fail-on-block`` and the guard would have blocked a call.
* 2: usage or input error: bad arguments, an unknown format or policy, a missing path, a
  malformed file (named with its line). With ``--keep-going`` bad inputs are skipped and
  counted instead, and 2 is returned only when nothing at all could be read.
"""

from __future__ import annotations

import argparse
import io
import logging
import os
import re
import stat
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["EXIT_ERROR", "EXIT_FINDINGS", "EXIT_OK", "build_parser", "main"]

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_ERROR = 2

#: Below this many input files (and bytes) the work is short and no progress bar is shown.
PROGRESS_MIN_FILES = 20
PROGRESS_MIN_BYTES = 16 << 20


class _CliError(Exception):
    """A usage or input problem reported as ``loopcore: error: ...`` with exit code 2."""


def _ratio(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 <= v <= 1.0:
        raise argparse.ArgumentTypeError(f"a ratio is between 0 and 1 (0.25 = 25%); got {text}")
    return v


def _count(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0; got {v}")
    return v


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser for ``loopcore`` (usage errors exit with code 2)."""
    from . import __version__

    p = argparse.ArgumentParser(
        prog="loopcore",
        description="Find the tokens LLM agents burn on loops and repeated work.",
        epilog="Exit codes: 0 ok, 1 waste above --fail-above (or a block with --fail-on-block), "
        "2 usage or input error. Full reference: `loopcore docs cli` (docs/cli.md; `loopcore "
        "docs` lists every page shipped with the package).",
    )
    p.add_argument("--version", action="version", version=f"loopcore {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    def common(sp: argparse.ArgumentParser) -> None:
        sp.add_argument(
            "paths",
            nargs="*",
            metavar="PATH",
            help="trace files or folders (.gz and .zst too); none = the bundled example trace",
        )
        sp.add_argument(
            "--format",
            default="auto",
            metavar="NAME",
            help="input trace format (default: auto-detect per file)",
        )
        sp.add_argument(
            "--keep-going",
            action="store_true",
            help="skip malformed files and lines, count them, analyse the rest",
        )
        sp.add_argument(
            "--json", metavar="FILE", help="write the full report as JSON ('-' = stdout, no table)"
        )
        sp.add_argument(
            "--top",
            type=_count,
            default=10,
            metavar="N",
            help="rows of findings/events to show (default 10)",
        )
        prog = sp.add_mutually_exclusive_group()
        prog.add_argument(
            "--progress",
            dest="progress",
            action="store_true",
            default=None,
            help="always show a progress bar on stderr",
        )
        prog.add_argument(
            "--no-progress", dest="progress", action="store_false", help="never show a progress bar"
        )

    a = sub.add_parser(
        "analyse",
        aliases=["analyze"],
        help="account for the tokens recorded traces wasted",
        description="Analyse recorded agent traces for wasted tokens.",
    )
    common(a)
    a.add_argument(
        "--html",
        metavar="FILE",
        help="write a self-contained HTML report (charts, timelines, the guard replay overlaid)",
    )
    a.add_argument(
        "--html-policy",
        default="default",
        metavar="NAME",
        help="policy preset of the guard replay overlaid on the HTML report (default: default)",
    )
    a.add_argument(
        "--jobs",
        "-j",
        type=_count,
        default=None,
        metavar="N",
        help="analyse files in N processes (default: the cores this process may use, for inputs of "
        "4 MB or more; 1 = one process); the report is the same either way",
    )
    a.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        default=None,
        help="run on the Dask cluster at ADDRESS (tcp://host:8786); needs loopcore[fleet]",
    )
    a.add_argument(
        "--parquet",
        metavar="DIR",
        default=None,
        help="also store the step columns, findings and per-trace summaries as Parquet in DIR (a new "
        "folder or a store: the run is appended); `loopcore analyse DIR` re-analyses a store "
        "(docs/store.md)",
    )
    a.add_argument(
        "--min-ratio",
        type=_ratio,
        default=0.0,
        metavar="RATIO",
        help="list only traces whose waste ratio is at least RATIO (totals keep all)",
    )
    a.add_argument(
        "--fail-above",
        type=_ratio,
        default=None,
        metavar="RATIO",
        help="exit 1 when the overall waste ratio is above RATIO (for CI)",
    )
    a.add_argument(
        "--charge-turn-output",
        action="store_true",
        help="charge a wasted call's whole turn (its reasoning and reply text too); by default that "
        "is reported beside the charge",
    )
    a.set_defaults(run=_run_analyse)

    r = sub.add_parser(
        "replay",
        help="run the Guard over recorded calls: what would it have warned or blocked?",
        description="Replay recorded traces through a Guard and report its verdicts.",
    )
    common(r)
    r.add_argument(
        "--policy", default="default", metavar="NAME", help="policy preset (default: default)"
    )
    r.add_argument(
        "--fail-on-block",
        action="store_true",
        help="exit 1 when the guard would have blocked a call",
    )
    r.add_argument(
        "--html",
        metavar="FILE",
        help="write a self-contained HTML report of the replay and the burn analysis",
    )
    r.set_defaults(run=_run_replay)

    # `loopcore hook ...` is dispatched in main() before this parser is built (see loopcore.hooks);
    # the entry here lists it in --help.
    sub.add_parser(
        "hook",
        help="the guard as a Claude Code / Codex / Gemini CLI hook (see docs/hooks/)",
        add_help=False,
    )
    m = sub.add_parser(
        "mcp-proxy",
        help="a stdio proxy in front of an MCP server, guarding its tools/call",
        description="Start an MCP server and pump its stdio, checking each tools/call with a "
        "Guard: a block is answered with isError and never forwarded, a warning is appended "
        "to the result, everything else passes through byte for byte. Exits with the "
        "server's exit code. See docs/integrations/mcp.md.",
        usage="loopcore mcp-proxy [options] -- SERVER_CMD [ARGS...]",
    )
    m.add_argument(
        "--policy",
        default=None,
        metavar="NAME|FILE",
        help="policy preset or a JSON file of Policy fields (default: default)",
    )
    m.add_argument(
        "--state",
        default=None,
        metavar="FILE",
        help="restore the guard from FILE at start, save it there at exit (and every 2 s)",
    )
    m.add_argument(
        "--session",
        default=None,
        metavar="ID",
        help="guard session id (default: one per proxy process)",
    )
    m.add_argument(
        "--grace",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="after the client leaves: wait this long for the server before SIGTERM, "
        "and again before SIGKILL (default 5)",
    )
    m.add_argument(
        "--call-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="answer a tools/call the server has not answered within SECONDS with an "
        "isError result, and cancel it on the server (default: wait as long as it takes)",
    )
    m.add_argument("--quiet", action="store_true", help="no line on stderr for each warn/block")
    m.add_argument(
        "server",
        nargs=argparse.REMAINDER,
        metavar="-- SERVER_CMD ARGS",
        help="the MCP server's command",
    )
    m.set_defaults(run=_run_mcp_proxy)
    f = sub.add_parser(
        "formats",
        help="list the trace formats and the harness versions each was checked against",
        description="The trace formats loopcore reads, and the public samples each was checked "
        "against (see docs/formats.md).",
    )
    f.add_argument("--json", action="store_true", help="print the table as JSON")
    f.set_defaults(run=_run_formats)
    d = sub.add_parser(
        "docs",
        help="print a page of the documentation shipped with the package (cli, guard, burn...)",
        description="Print a page of loopcore's documentation (the docs/ folder of the source, "
        "shipped in the package); without PAGE, list the pages.",
    )
    d.add_argument("page", nargs="?", metavar="PAGE", help="a page name, e.g. cli or hooks/claude")
    d.set_defaults(run=_run_docs)
    return p


def _docs_root() -> Path | None:
    """The documentation folder: ``loopcore/_docs`` in an install, ``docs/`` in a checkout."""
    here = Path(__file__).resolve().parent
    for root in (here / "_docs", here.parent.parent / "docs"):
        if (root / "cli.md").is_file():
            return root
    return None


def _run_docs(args: argparse.Namespace) -> int:
    root = _docs_root()
    if root is None:
        raise _CliError("the documentation is not installed with this copy of loopcore")
    pages = sorted(p.relative_to(root).with_suffix("").as_posix() for p in root.rglob("*.md"))
    if not args.page:
        print("\n".join(pages))
        return EXIT_OK
    name = args.page.removesuffix(".md").removeprefix("docs/")
    if name not in pages:
        raise _CliError(f"no page {args.page!r}; pages: {', '.join(pages)}")
    sys.stdout.write((root / f"{name}.md").read_text(encoding="utf-8"))
    return EXIT_OK


def _run_formats(args: argparse.Namespace) -> int:
    import json

    from .adapters import format_table

    rows = format_table()
    if args.json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    for r in rows:
        print(f"{r['name']:<17} {r['reads']}")
        for c in r["checked"]:
            print(
                f"{'':<17}   checked: {c.get('harness', '')} {c.get('version', '')} "
                f"({c.get('repo', '')}:{c.get('path', '')})"
            )
        if not r["checked"]:
            print(f"{'':<17}   checked: the project's own fixtures only")
    return EXIT_OK


def _quiet_blas() -> None:
    """One BLAS thread for this process and its workers, unless the user chose a number.

    loopcore runs no linear algebra, but importing numpy starts OpenBLAS's thread pool, whose
    threads spin for about 0.1 s of CPU looking for work: more than a small ``loopcore
    analyse`` itself costs. Only an environment variable read at numpy's import can stop it.
    """
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with *argv* (default ``sys.argv[1:]``); returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["hook"]:
        # A hook runs before every tool call of a coding CLI: dispatch before anything else loads.
        from .hooks import main as hook_main

        return hook_main(argv[1:])
    _quiet_blas()
    parser = build_parser()
    args = parser.parse_args(argv)  # SystemExit(2) on usage errors, as argparse does
    try:
        return args.run(args)
    except _CliError as exc:
        _err(str(exc))
        return EXIT_ERROR
    except KeyboardInterrupt:
        _err("interrupted")
        return 130
    except (MemoryError, RecursionError) as exc:
        _err(f"the input is too large or too deeply nested to analyse ({type(exc).__name__})")
        return EXIT_ERROR
    except BrokenPipeError:
        # `loopcore analyse | head`: the reader left; not an error worth a traceback.
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        except OSError:
            pass
        return EXIT_OK
    except Exception as exc:  # never a traceback for the user; LOOPCORE_TRACEBACK=1 shows it
        if os.environ.get("LOOPCORE_TRACEBACK"):
            raise
        _err(f"unexpected {type(exc).__name__}: {exc} (set LOOPCORE_TRACEBACK=1 for the traceback)")
        return EXIT_ERROR


def _err(msg: str) -> None:
    from .report import terminal_safe

    print(f"loopcore: error: {terminal_safe(msg)}", file=sys.stderr)


def _print_to_stdout(render: Callable[[Any], None]) -> None:
    """Run *render* on a rich Console for stdout: live terminal, or clean text for pipes."""
    from rich.console import Console

    if sys.stdout.isatty():
        render(Console(file=sys.stdout, highlight=False))
        return
    # Pipes and files get plain text: no colour codes, a fixed generous width instead of
    # rich's 80 columns so rows do not wrap (an explicit COLUMNS still wins), and no
    # trailing padding, so the output diffs and pastes cleanly.
    try:
        width = int(os.environ.get("COLUMNS", "")) or 120
    except ValueError:
        width = 120
    buf = io.StringIO()
    render(Console(file=buf, width=width, highlight=False, color_system=None, force_terminal=False))
    sys.stdout.write("".join(line.rstrip() + "\n" for line in buf.getvalue().splitlines()))
    sys.stdout.flush()


def _check_format(name: str) -> None:
    from .adapters import FORMATS, load

    try:
        load([], name)  # resolves the name (aliases too) without reading anything
    except ValueError:
        raise _CliError(
            f"unknown format {name!r}; known formats: auto, {', '.join(FORMATS)}"
        ) from None


def _input_size(paths: Sequence[str]) -> tuple[int, int]:
    # what a folder walk reads is the adapters' rule: README.md, .yaml, .tsv beside traces are not work
    from .adapters import _ENTIRE_RAW, _TRACE_EXTS
    from .adapters._io import plain_name
    from .adapters.opencode import is_db_name as opencode_db_name

    files = size = 0
    for p in paths:
        if os.path.isdir(p):
            for root, _dirs, names in os.walk(p):
                for n in names:
                    if (
                        not opencode_db_name(n)
                        and n != _ENTIRE_RAW
                        and (n.startswith(".") or not plain_name(n).endswith(_TRACE_EXTS))
                    ):
                        continue
                    files += 1
                    try:
                        size += os.path.getsize(os.path.join(root, n))
                    except OSError:
                        pass
        elif os.path.isfile(p):
            files += 1
            size += os.path.getsize(p)
    return files, size


class _Progress:
    """A transient rich progress bar on stderr, advanced once per input file finished."""

    def __init__(self, paths: Sequence[str], forced: bool | None) -> None:
        self.bar: Any = None
        if forced is False:
            return
        files, size = _input_size(paths)
        long_work = files >= PROGRESS_MIN_FILES or size >= PROGRESS_MIN_BYTES
        # Only a human watching a terminal wants the bar; pipes and CI logs stay clean.
        if not (forced or (long_work and sys.stderr.isatty())):
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.bar = Progress(
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[traces]} traces, {task.fields[steps]:,} steps"),
            TimeElapsedColumn(),
            console=Console(file=sys.stderr, force_terminal=bool(forced) or None),
            transient=True,
        )
        self.task = self.bar.add_task("reading", total=max(files, 1), traces=0, steps=0)
        self.sources: set[str] = set()
        self.traces = 0
        self.steps = 0

    def __enter__(self) -> _Progress:
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            # Files with no trace in them (preds.json) never advance the bar; finish it anyway.
            self.bar.update(self.task, completed=self.bar.tasks[0].total)
            self.bar.stop()

    def callback(self) -> Callable[[Any], None] | None:
        if self.bar is None:
            return None

        def on_trace(trace: Any) -> None:
            self.traces += 1
            self.steps += len(trace.steps)
            # One file can hold many traces, named "path#index" (tau-bench): count the file once.
            self.sources.add((trace.source or "").split("#", 1)[0])
            self.bar.update(
                self.task, completed=len(self.sources), traces=self.traces, steps=self.steps
            )

        return on_trace


def _load_errors() -> tuple[type[BaseException], ...]:
    from .adapters import TraceFormatError

    return (TraceFormatError, OSError)


def _describe(exc: BaseException) -> str:
    text = str(exc)
    path = getattr(exc, "path", None) or getattr(exc, "filename", None)
    line = getattr(exc, "line", None)
    if path and str(path) not in text:
        where = f"{path}:{line}" if isinstance(line, int) and line else str(path)
        text = f"{where}: {text}"
    return text


def _write(dest: str, data: bytes | str, what: str) -> None:
    if isinstance(data, str):
        data = data.encode("utf-8")
    if dest == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    try:
        with open(dest, "wb") as fh:
            fh.write(data)
    except OSError as exc:
        raise _CliError(f"cannot write the {what} to {dest}: {exc.strerror or exc}") from None
    size = len(data)
    shown = f"{size / 1e6:.1f} MB" if size >= 100_000 else f"{size / 1e3:.1f} KB"
    print(f"loopcore: wrote the {what} ({shown}) to {dest}", file=sys.stderr)


# The first bytes of what loopcore writes: a JSON report (analyse's and replay's) and an HTML page.
_OWN_JSON = re.compile(rb'\A\{\s*"schema"\s*:\s*\d+\s*,\s*"loopcore"\s*:')
_OWN_HTML = re.compile(rb"\A<!DOCTYPE html>.{0,2000}?<title>loopcore ", re.DOTALL)


def _check_outputs(args: argparse.Namespace) -> None:
    """Refuse, before any work, to write a report over a file loopcore did not write.

    ``--json FILE`` and ``--html FILE`` take the report's file name, so ``loopcore analyse
    --json trace.jsonl`` reads no trace (the bundled example is analysed) and would replace the
    trace with the report. An existing regular file is overwritten only when it is a report of
    loopcore's own (the same command run again) and not one of the inputs; anything else (a
    device such as /dev/null, ``-`` for stdout, a new name) is written as asked."""
    for flag, dest in (("--json", args.json), ("--html", getattr(args, "html", None))):
        if not dest or dest == "-":
            continue
        try:
            st = os.stat(dest)
        except OSError:
            continue  # a new file (or one open() will name the problem with)
        if not stat.S_ISREG(st.st_mode):
            continue
        named = any(os.path.exists(p) and os.path.samefile(p, dest) for p in (args.paths or []))
        own = False
        if not named:
            try:
                with open(dest, "rb") as fh:
                    head = fh.read(4096)
            except OSError:
                head = b""
            own = bool((_OWN_JSON if flag == "--json" else _OWN_HTML).match(head))
        if own:
            continue
        if named:
            raise _CliError(
                f"{flag} {dest}: that is where the report would be written, and it is one of the "
                f"inputs; give {flag} another file name"
            )
        hint = (
            f" (to analyse it: `loopcore {args.command} {dest} {flag} REPORT`)"
            if not args.paths
            else ""
        )
        raise _CliError(
            f"{flag} {dest}: that is where the report would be written, and it is a file "
            f"loopcore did not write{hint}; give {flag} a new file name, or remove {dest} first"
        )


def _run_analyse(args: argparse.Namespace) -> int:
    from .report import render_html, render_text, to_json

    _check_format(args.format)
    if args.json == "-" and args.html == "-":
        raise _CliError("--json - and --html - cannot both write to stdout")
    _check_outputs(args)
    if args.html:
        _check_policy(args.html_policy)
    started = time.perf_counter()
    html_data = None
    no_steps = _Notes()
    try:
        with _Progress(args.paths, args.progress) as prog:
            stored = _run_store(args, prog.callback(), no_steps)
            if stored is not None:
                report, drawn = stored, None
            elif getattr(args, "charge_turn_output", False):
                # the whole turn charged: analysed in this process, with that setting
                from .report import collect

                report = collect(
                    args.paths,
                    format=args.format,
                    keep_going=args.keep_going,
                    on_trace=_watch_no_steps(prog.callback(), no_steps),
                    charge_turn_output=True,
                )
            else:
                from . import fleet

                report, drawn = fleet.analyse(
                    args.paths,
                    format=args.format,
                    keep_going=args.keep_going,
                    jobs=args.jobs,
                    scheduler=args.scheduler,
                    html_policy=args.html_policy if args.html else None,
                    on_unit=_watch_no_steps(prog.callback(), no_steps),
                )
                if drawn is not None:
                    html_data = argparse.Namespace(
                        timelines=drawn[0], replays=drawn[1], policy=args.html_policy
                    )
    except _load_errors() as exc:
        raise _CliError(f"{_describe(exc)} (use --keep-going to skip bad inputs)") from None
    except ImportError as exc:  # --scheduler without the fleet extra
        raise _CliError(str(exc)) from None
    elapsed = time.perf_counter() - started
    if not report.traces and report.skipped:
        _write_outputs(args, report, to_json, render_html, html_data)
        raise _CliError(f"nothing could be read: all {len(report.skipped)} input(s) were skipped")
    if args.json != "-" and args.html != "-":
        _print_to_stdout(lambda c: render_text(report, c, top=args.top, min_ratio=args.min_ratio))
        _warn_no_steps(no_steps)
        if report.skipped:
            print(
                f"loopcore: skipped {len(report.skipped)} unreadable input(s) (--keep-going)",
                file=sys.stderr,
            )
        n = len(report.traces)
        print(
            f"loopcore: analysed {n:,} trace{'s' if n != 1 else ''}, {report.steps:,} steps in {elapsed:.2f}s",
            file=sys.stderr,
        )
    _write_outputs(args, report, to_json, render_html, html_data)
    if args.fail_above is not None and report.overall.waste_ratio > args.fail_above:
        print(
            f"loopcore: waste ratio {report.overall.waste_ratio:.3f} is above --fail-above {args.fail_above}",
            file=sys.stderr,
        )
        return EXIT_FINDINGS
    return EXIT_OK


def _run_store(
    args: argparse.Namespace, on_trace: Callable[[Any], None] | None, no_steps: _Notes
) -> Any:
    """The stored-columns branch of ``analyse``: re-analyse a store given as the only path, or
    analyse and append to the store of ``--parquet``; None when neither applies."""
    from . import store

    parquet = getattr(args, "parquet", None)
    if len(args.paths) == 1 and store.is_store(args.paths[0]):
        if parquet:
            raise _CliError("--parquet writes traces into a store; the input is already one")
        try:
            return store.analyse_store(args.paths[0])
        except store.StoreError as exc:
            raise _CliError(str(exc)) from None
    if not parquet:
        return None
    if args.scheduler:
        raise _CliError(
            "--parquet analyses in this process; it cannot be combined with --scheduler"
        )
    settings = None
    if getattr(args, "charge_turn_output", False):
        from .burn import BurnSettings

        settings = BurnSettings(charge_turn_output=True)
    try:
        report = store.collect_to_store(
            args.paths,
            parquet,
            format=args.format,
            keep_going=args.keep_going,
            on_trace=_watch_no_steps(on_trace, no_steps),
            settings=settings,
        )
    except store.StoreError as exc:
        raise _CliError(str(exc)) from None
    print(
        f"loopcore: stored {report.steps:,} steps of {len(report.traces):,} traces in {parquet}",
        file=sys.stderr,
    )
    return report


def _chain(*callbacks: Callable[[Any], None] | None) -> Callable[[Any], None]:
    live = [c for c in callbacks if c is not None]

    def on_trace(trace: Any) -> None:
        for c in live:
            c(trace)

    return on_trace


class _Notes:
    """What the traces of a run told that the summary must say: the sources of a known format
    that gave no step, the sessions whose sub-agents' records were not read, and the files
    whose last line was cut short."""

    __slots__ = ("no_steps", "unread", "incomplete")

    def __init__(self) -> None:
        self.no_steps: list[str] = []
        self.unread: list[tuple[str, int, int]] = []  # (source, sub-agents, their tool calls)
        self.incomplete: list[tuple[str, int]] = []  # (file, line)


def _watch_no_steps(callback: Callable[[Any], None] | None, into: _Notes) -> Callable[[Any], None]:
    """An on_trace callback that notes the traces of non-empty inputs that gave no step, and
    those that ran sub-agents whose own records were not read."""

    def on_trace(trace: Any) -> None:
        if trace.meta.get("no_steps"):
            into.no_steps.append(trace.source or "<input>")
        unread = trace.meta.get("sub_agents_unread")
        if unread:
            calls = sum(a.get("tool_uses", 0) for a in unread if isinstance(a, dict))
            into.unread.append((trace.source or "<input>", len(unread), calls))
        line = trace.meta.get("incomplete_line")
        if line:
            # a file of several traces names each "file#k": the line is the file's
            into.incomplete.append(((trace.source or "<input>").split("#", 1)[0], line))
        if callback is not None:
            callback(trace)

    return on_trace


def _warn_no_steps(notes: _Notes) -> None:
    """Say so when inputs of a known format gave no step (a format variant the reader missed
    must not pass for a clean run), and when sessions ran sub-agents whose calls the files
    read do not hold (their work is not in the analysis)."""
    from .report import terminal_safe

    if notes.no_steps:
        sources = sorted(notes.no_steps)  # with --jobs they arrive as the workers finish
        n = len(sources)
        shown = terminal_safe(", ".join(sources[:3])) + (f" and {n - 3} more" if n > 3 else "")
        print(
            f"Warning: {n} input{'s' if n != 1 else ''} of a known format gave no tool call or reply: {shown} "
            f"(see `loopcore formats` and docs/formats.md)"
        )
    if notes.unread:
        unread = sorted(notes.unread)
        agents = sum(u[1] for u in unread)
        calls = sum(u[2] for u in unread)
        n = len(unread)
        shown = terminal_safe(", ".join(u[0] for u in unread[:3])) + (
            f" and {n - 3} more" if n > 3 else ""
        )
        print(
            f"Warning: {agents} sub-agent run{'s' if agents != 1 else ''} ({calls} tool calls by "
            f"their own count) in {shown}: their records are not in the files read, so their "
            f"calls are not analysed (Claude Code writes them to <sessionId>/subagents/ beside "
            f"the session's file: analyse the folder that holds both)"
        )
    if notes.incomplete:
        cut = sorted(notes.incomplete)
        n = len(cut)
        shown = terminal_safe(", ".join(f"{f}:{line}" for f, line in cut[:3])) + (
            f" and {n - 3} more" if n > 3 else ""
        )
        print(
            f"Warning: {n} file{'s' if n != 1 else ''} end{'s' if n == 1 else ''} in a line cut "
            f"short, not read: {shown} (a session still being written, or one a crash cut off; "
            f"every record before it was analysed)"
        )
    sys.stdout.flush()


def _write_outputs(
    args: argparse.Namespace, report: Any, to_json: Any, render_html: Any, html_data: Any = None
) -> None:
    if args.json:
        _write(args.json, to_json(report), "JSON report")
    if getattr(args, "html", None):
        page = render_html(
            report,
            top=args.top,
            min_ratio=args.min_ratio,
            timelines=html_data.timelines if html_data else None,
            replays=html_data.replays if html_data else None,
            policy=html_data.policy if html_data else None,
        )
        _write(args.html, page, "HTML report")


def _run_replay(args: argparse.Namespace) -> int:
    from .replay import collect_replay, render_replay_text, replay_to_json

    _check_format(args.format)
    _check_policy(args.policy)
    # The guard also logs each doom_loop_detected event; the report below already lists them,
    # so keep Python's last-resort handler from echoing every one to stderr.
    quiet = logging.NullHandler()
    logger = logging.getLogger("loopcore")
    logger.addHandler(quiet)
    if args.json == "-" and args.html == "-":
        raise _CliError("--json - and --html - cannot both write to stdout")
    _check_outputs(args)
    html_data = None
    no_steps = _Notes()
    try:
        with _Progress(args.paths, args.progress) as prog:
            on_trace = prog.callback()
            if args.html:
                from .htmlreport import HtmlCollector

                html_data = HtmlCollector(policy=None, burn=True)
                on_trace = _chain(on_trace, html_data)
            report = collect_replay(
                args.paths,
                policy=args.policy,
                format=args.format,
                keep_going=args.keep_going,
                on_trace=_watch_no_steps(on_trace, no_steps),
            )
    except _load_errors() as exc:
        raise _CliError(f"{_describe(exc)} (use --keep-going to skip bad inputs)") from None
    finally:
        logger.removeHandler(quiet)
    if not report.traces and report.skipped:
        raise _CliError(f"nothing could be read: all {len(report.skipped)} input(s) were skipped")
    if args.json != "-" and args.html != "-":
        _print_to_stdout(lambda c: render_replay_text(report, c, top=args.top))
        _warn_no_steps(no_steps)
    if args.json:
        _write(args.json, replay_to_json(report), "JSON replay report")
    if args.html and html_data is not None:
        from .htmlreport import render_report, replay_as_analysis

        page = render_report(
            replay_as_analysis(report, html_data.burns),
            timelines=html_data.timelines,
            replays=report.traces,
            policy=args.policy,
            title=f"loopcore guard replay ({args.policy} policy) and burn analysis",
        )
        _write(args.html, page, "HTML report")
    if args.fail_on_block and report.blocked:
        print(f"loopcore: the guard would have blocked {report.blocked} call(s)", file=sys.stderr)
        return EXIT_FINDINGS
    return EXIT_OK


def _run_mcp_proxy(args: argparse.Namespace) -> int:
    from .integrations.mcp_proxy import load_policy, run_cli

    server = list(args.server)
    if server and server[0] == "--":
        server = server[1:]
    if not server:
        raise _CliError(
            "no MCP server command: loopcore mcp-proxy [options] -- SERVER_CMD [ARGS...]"
        )
    try:
        load_policy(args.policy)
    except (ValueError, OSError) as exc:
        raise _CliError(f"bad --policy {args.policy!r}: {exc}") from None
    try:
        return run_cli(
            server,
            policy=args.policy,
            state=args.state,
            session=args.session,
            grace=args.grace,
            quiet=args.quiet,
            call_timeout=args.call_timeout,
        )
    except OSError as exc:
        raise _CliError(f"cannot start the MCP server {server[0]!r}: {exc}") from None


def _check_policy(name: str) -> None:
    from .policy import Policy

    try:
        Policy.preset(name)
    except ValueError:
        raise _CliError(
            f"unknown policy {name!r}; known policies: {', '.join(Policy.presets())}"
        ) from None


if __name__ == "__main__":  # pragma: no cover - `python -m loopcore.cli`
    sys.exit(main())
