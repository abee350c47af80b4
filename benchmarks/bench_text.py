"""Content-loop detection (loopcore.textloop): compiled twin vs the pure twin, in MB/s of text.

    python benchmarks/bench_text.py [--mb N] [--chunk N] [--repeats N]

The text is generated here (prose lines, markdown lists, headings, tables and fenced code, in the
proportions of a long assistant reply; no loop in it), about ``--mb`` MB of ASCII, so a byte is a
character. "stream" feeds it to one ``TextLoopDetector`` in ``--chunk``-character chunks (a model
stream's deltas), "whole" runs ``repeated_spans`` on it, and "loop" streams a degenerate reply (one
line repeated) until the detector stops it. "traces" (when ``--traces``, by default
../shared/traces, exists) runs ``repeated_spans`` over every step's reply text of at least
CHUNK_SIZE + LOOP_THRESHOLD - 1 characters in those traces, as ``loopcore analyse`` does to charge
degenerate replies (real text, nearly always without a loop; MB/s counts characters there; the
pure twin gets every eighth text). The twins run alternately in each round and the figure is the
median over rounds of CPU time (``time.thread_time``). Both twins' answers are compared first. The bar: >= 200 MB/s streamed on the compiled side. Exit code 0 = answers agree
(and the bar holds), 1 = they differ, 2 = no compiled core, 3 = below the bar.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _env import environment  # noqa: E402  (benchmarks/_env.py)

from loopcore import _native_flag  # noqa: E402

BAR_MB_S = 200.0
DEFAULT_TRACES = pathlib.Path(__file__).resolve().parent.parent.parent / "shared" / "traces"
WORDS = (
    "the of and to in is that for it as with was on be by this are or from at an not have "
    "function value return file test error module class config cache request result build "
    "should could would check update because however therefore next first then"
).split()


def reply_text(n_bytes: int, seed: int = 7) -> str:
    rnd = random.Random(seed)
    out: list[str] = []
    size = 0
    while size < n_bytes:
        kind = rnd.random()
        if kind < 0.70:
            line = (
                " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(6, 24))).capitalize() + ".\n"
            )
        elif kind < 0.80:
            line = "- " + " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(3, 10))) + "\n"
        elif kind < 0.84:
            line = "## " + " ".join(rnd.choice(WORDS) for _ in range(3)).title() + "\n"
        elif kind < 0.88:
            line = "| " + " | ".join(rnd.choice(WORDS) for _ in range(4)) + " |\n"
        else:
            body = "".join(
                f"    x_{rnd.randint(0, 999)} = f(x_{rnd.randint(0, 999)})\n"
                for _ in range(rnd.randint(2, 8))
            )
            line = "```python\n" + body + "```\n"
        out.append(line)
        size += len(line)
    return "".join(out)


def chunks_of(text: str, n: int) -> list[str]:
    return [text[i : i + n] for i in range(0, len(text), n)]


def trace_texts(folder: str, min_chars: int) -> list[str]:
    """Every step's reply text of at least *min_chars* characters in the traces under *folder*."""
    from loopcore.adapters import LoadStats
    from loopcore.report import iter_traces

    traces = iter_traces([folder], keep_going=True, stats=LoadStats())
    return [s.text for _, t in traces for s in t.steps if s.text and len(s.text) >= min_chars]


def spans_all(tl, texts) -> int:
    return sum(1 for x in texts if tl.repeated_spans(x))


def stream(tl, chunks) -> bool:
    det = tl.TextLoopDetector()
    for c in chunks:
        if det.feed(c):
            return True
    return False


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=8.0, help="MB of text (default 8)")
    ap.add_argument(
        "--chunk", type=int, default=64, help="characters per streamed chunk (default 64)"
    )
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument(
        "--traces", default=str(DEFAULT_TRACES), help="trace folder for the real-text line"
    )
    args = ap.parse_args(argv)
    print(environment("python benchmarks/bench_text.py " + " ".join(argv or sys.argv[1:])))
    if _native_flag.NO_EXTENSIONS:
        print("no compiled core (LOOPCORE_NO_EXTENSIONS=1)")
        return 2
    C = _native_flag.load_twin("textloop", "c")
    P = _native_flag.load_twin("textloop", "py")
    text = reply_text(int(args.mb * 1e6))
    mb = len(text.encode()) / 1e6
    chunks = chunks_of(text, args.chunk)
    small = chunks_of(text[: len(text) // 8], args.chunk)  # the pure twin gets an eighth
    loop_reply = "Let me reconsider the approach and try again.\n" * 2000
    loop_chunks = chunks_of(loop_reply, args.chunk)

    # correctness first: same answers on the same input
    ok = (
        stream(C, small) == stream(P, small)
        and C.repeated_spans(text[: len(text) // 8]) == P.repeated_spans(text[: len(text) // 8])
        and stream(C, loop_chunks) is True
        and stream(P, loop_chunks) is True
        and C.repeated_spans(loop_reply) == P.repeated_spans(loop_reply) != []
    )
    det_c, det_p = C.TextLoopDetector(), P.TextLoopDetector()
    for c in loop_chunks:
        if det_c.feed(c):
            break
    for c in loop_chunks:
        if det_p.feed(c):
            break
    ok = ok and det_c.fed == det_p.fed and det_c.chunk == det_p.chunk
    real: list[str] = []
    if os.path.isdir(args.traces):
        real = trace_texts(args.traces, C.CHUNK_SIZE + C.LOOP_THRESHOLD - 1)
    real_sample = real[::8]
    real_mchars = sum(map(len, real)) / 1e6
    ok = ok and [C.repeated_spans(x) for x in real_sample] == [
        P.repeated_spans(x) for x in real_sample
    ]
    print(f"text: {mb:.1f} MB, {len(chunks)} chunks of {args.chunk}; twins agree: {ok}")
    if real:
        print(
            f"traces: {len(real):,} reply texts, {real_mchars:.2f} M characters "
            f"({spans_all(C, real)} with a loop) from {args.traces}"
        )
    if not ok:
        return 1

    jobs = {
        "stream c": (lambda: stream(C, chunks), mb),
        "stream py": (lambda: stream(P, small), mb / 8),
        "whole c": (lambda: C.repeated_spans(text), mb),
        "whole py": (lambda: P.repeated_spans(text[: len(text) // 8]), mb / 8),
        "loop c": (lambda: stream(C, loop_chunks), det_c.fed / 1e6),
        "loop py": (lambda: stream(P, loop_chunks), det_p.fed / 1e6),
    }
    cases = ["stream", "whole", "loop"]
    if real:
        jobs["traces c"] = (lambda: spans_all(C, real), real_mchars)
        jobs["traces py"] = (
            lambda: spans_all(P, real_sample),
            sum(map(len, real_sample)) / 1e6,
        )
        cases.append("traces")
    samples: dict[str, list[float]] = {k: [] for k in jobs}
    for _ in range(args.repeats):
        for name, (fn, size) in jobs.items():
            t0 = time.thread_time()
            fn()
            samples[name].append(size / max(time.thread_time() - t0, 1e-9))
    med = {k: statistics.median(v) for k, v in samples.items()}
    print()
    print("| case | compiled MB/s | pure MB/s | ratio |")
    print("|---|---|---|---|")
    for case in cases:
        c, p = med[f"{case} c"], med[f"{case} py"]
        print(f"| {case} | {c:,.0f} | {p:,.1f} | {c / p:,.0f}x |")
    if real:
        secs = real_mchars / med["traces c"]
        print(
            f"\ntraces: {secs * 1e3:.1f} ms CPU for {len(real):,} texts "
            f"({secs / (real_mchars * 1e6) * 1e9:.2f} ns a character)"
        )
    bar = med["stream c"] >= BAR_MB_S
    print(
        f"\nbar: streamed >= {BAR_MB_S:.0f} MB/s compiled: {'met' if bar else 'NOT met'} "
        f"({med['stream c']:,.0f} MB/s)"
    )
    return 0 if bar else 3


if __name__ == "__main__":
    sys.exit(main())
