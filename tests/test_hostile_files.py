"""The command line and load() under bad files: FIFOs, devices, gzip bombs, dangling links,
nesting the hash refuses, escape sequences in ids. Nothing blocks, reads forever, prints a
traceback or lets a control sequence reach the terminal; input errors exit 2 and
``--keep-going`` analyses the rest and counts what it skipped.

Each case runs ``python -m loopcore`` in a subprocess on both twins (with a timeout: a hang
fails the test instead of the run).
"""

from __future__ import annotations

import gzip
import io
import json
import os
import pathlib
import subprocess
import sys

import pytest
from conftest import package_env

from loopcore import Step, load
from loopcore.adapters import LoadStats, TraceFormatError, _io

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"


def _env(impl_name: str, **extra: str) -> dict[str, str]:
    env = package_env()
    env["LOOPCORE_NO_EXTENSIONS"] = "1" if impl_name == "py" else "0"
    env.pop("COLUMNS", None)
    env.pop("LOOPCORE_TRACEBACK", None)
    env.update(extra)
    return env


def cli(impl, *argv: str, timeout: float = 60, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "loopcore", *argv],
        capture_output=True,
        text=True,
        env=_env(impl.name, **env),
        timeout=timeout,
    )


def good_trace(path: pathlib.Path, session: str = "good") -> pathlib.Path:
    steps = [
        Step(
            session,
            1,
            "observe",
            "read_file",
            "big.ts",
            {"path": "big.ts"},
            "x" * 50,
            tokens_in=5000,
        )
        for _ in range(3)
    ]
    path.write_text("".join(json.dumps(s.to_dict()) + "\n" for s in steps), encoding="utf-8")
    return path


def _clean(res: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in res.stderr and "Traceback" not in res.stdout, res.stderr


# ---------------------------------------------------------------- files that are not files


@pytest.mark.parametrize("name", ["full.jsonl", "raw_transcript"])
def test_a_fifo_named_like_an_entire_transcript_does_not_block_the_walk(impl, tmp_path, name):
    # the walk looks into Entire transcripts for copies of one session before the load does
    good_trace(tmp_path / "a.jsonl")
    (tmp_path / "0").mkdir()
    os.mkfifo(tmp_path / "0" / name)
    res = cli(impl, "analyse", str(tmp_path), "--keep-going", timeout=30)
    _clean(res)
    assert res.returncode == 0, res.stderr
    assert "skipped 1 unreadable input" in res.stderr and "good" in res.stdout


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "folder"])
def test_non_regular_files_are_refused_not_read(impl, tmp_path, kind):
    good_trace(tmp_path / "a.jsonl")
    bad = tmp_path / "x.jsonl"
    if kind == "fifo":
        os.mkfifo(bad)
    elif kind == "dev-zero":
        os.symlink("/dev/zero", bad)
    else:
        bad.mkdir()
        good_trace(bad / "inner.jsonl", "inner")
    res = cli(impl, "analyse", str(tmp_path))
    _clean(res)
    if kind == "folder":  # a folder named like a file is walked like any folder
        assert res.returncode == 0, res.stderr
        return
    assert res.returncode == 2, res.stderr
    assert "not a regular file" in res.stderr and "x.jsonl" in res.stderr
    res = cli(impl, "analyse", str(tmp_path), "--keep-going")
    _clean(res)
    assert res.returncode == 0, res.stderr
    assert "skipped 1 unreadable input" in res.stderr
    assert "good" in res.stdout
    # named directly, too
    res = cli(impl, "analyse", str(bad))
    _clean(res)
    assert res.returncode == 2 and "not a regular file" in res.stderr


def test_read_bytes_refuses_a_fifo_without_waiting(tmp_path):
    fifo = tmp_path / "p.json"
    os.mkfifo(fifo)
    with pytest.raises(TraceFormatError, match="a FIFO, not a regular file"):
        _io.read_bytes(str(fifo))


# ---------------------------------------------------------------- size caps


def test_the_default_limit_is_one_gibibyte(monkeypatch):
    monkeypatch.delenv("LOOPCORE_MAX_FILE_BYTES", raising=False)
    assert _io.DEFAULT_MAX_FILE_BYTES == 1 << 30 == _io.max_file_bytes()
    monkeypatch.setenv("LOOPCORE_MAX_FILE_BYTES", "12345")
    assert _io.max_file_bytes() == 12345


def _bomb(path: pathlib.Path, nbytes: int) -> pathlib.Path:
    with gzip.open(path, "wb", compresslevel=9) as f:
        chunk = b"\0" * (1 << 20)
        for _ in range(nbytes >> 20):
            f.write(chunk)
    return path


def test_a_gzip_bomb_is_a_clear_error_not_memory_error(impl, tmp_path):
    bomb = _bomb(tmp_path / "bomb.jsonl.gz", 64 << 20)
    assert bomb.stat().st_size < 1 << 20
    good_trace(tmp_path / "a.jsonl")
    res = cli(impl, "analyse", str(bomb), LOOPCORE_MAX_FILE_BYTES=str(8 << 20))
    _clean(res)
    assert res.returncode == 2, res.stderr
    assert "expands to more than 8,388,608 bytes, the per-file limit" in res.stderr
    assert "LOOPCORE_MAX_FILE_BYTES" in res.stderr
    res = cli(impl, "analyse", str(tmp_path), "--keep-going", LOOPCORE_MAX_FILE_BYTES=str(8 << 20))
    _clean(res)
    assert res.returncode == 0 and "skipped 1 unreadable input" in res.stderr


def test_gunzip_never_holds_more_than_the_limit():
    data = gzip.compress(b"a" * (10 << 20))
    with pytest.raises(TraceFormatError, match="expands to more than 1,000 bytes"):
        _io.gunzip(data, lambda n: b"", "x.gz", 1000)
    # at the limit exactly, it is read
    assert _io.gunzip(gzip.compress(b"b" * 1000), lambda n: b"", "x.gz", 1000) == b"b" * 1000
    # concatenated members, and a truncated one
    two = gzip.compress(b"1") + gzip.compress(b"2")
    assert _io.gunzip(two, lambda n: b"", None, 10) == b"12"
    with pytest.raises(TraceFormatError, match="truncated gzip"):
        _io.gunzip(two[:-5], lambda n: b"", None, 10)


def test_read_bytes_inflates_gzip_files_of_every_shape(tmp_path):
    """One member (read in one go), concatenated members, an empty member, a stream fed in
    pieces, trailing bytes that are no gzip, a truncated file: the bytes gzip gives, or the
    error."""
    body = bytes(range(256)) * 4000  # ~1 MB out of more than one compressed chunk's worth
    cases = {
        "one": gzip.compress(body),
        "two": gzip.compress(b"1") + gzip.compress(b"2"),
        "empty_member": gzip.compress(b"") + gzip.compress(b"x"),
        "big": b"".join(gzip.compress(body[i : i + 4096], 0) for i in range(0, len(body), 4096)),
    }
    for name, raw in cases.items():
        path = tmp_path / f"{name}.json.gz"
        path.write_bytes(raw)
        assert _io.read_bytes(str(path)) == gzip.decompress(raw), name
    pieces = iter([cases["two"][5:12], cases["two"][12:], b""])
    assert _io.gunzip(cases["two"][:5], lambda n: next(pieces), None, 10) == b"12"
    bad = tmp_path / "trailing.json.gz"
    bad.write_bytes(cases["one"] + b"not gzip")
    with pytest.raises(TraceFormatError, match="not a readable gzip"):
        _io.read_bytes(str(bad))
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(cases["one"][:-9])
    with pytest.raises(TraceFormatError, match="truncated gzip"):
        _io.read_bytes(str(cut))


def _zstd():
    if sys.version_info >= (3, 14):
        from compression import zstd
    else:
        from backports import zstd
    return zstd


def _skippable(payload: bytes) -> bytes:
    # a skippable frame (magic 0x184D2A50..5F, then its length): no output, read past
    return b"\x50\x2a\x4d\x18" + len(payload).to_bytes(4, "little") + payload


def test_read_bytes_inflates_zstandard_files_of_every_shape(tmp_path):
    """Zstandard by content: one frame (read in one go), several frames, a skippable frame,
    an empty frame, a stream fed in pieces; trailing bytes that are no frame and a frame cut
    short are errors naming the file, as for gzip."""
    zstd = _zstd()
    body = bytes(range(256)) * 4000
    cases = {
        "one": zstd.compress(body),
        "two": zstd.compress(b"1") + zstd.compress(b"2"),
        "skippable": zstd.compress(b"1") + _skippable(b"meta") + zstd.compress(b"2"),
        "empty_frame": zstd.compress(b"") + zstd.compress(b"x"),
        "many": b"".join(zstd.compress(body[i : i + 4096]) for i in range(0, len(body), 4096)),
    }
    want = {"one": body, "two": b"12", "skippable": b"12", "empty_frame": b"x", "many": body}
    for name, raw in cases.items():
        path = tmp_path / f"{name}.jsonl.zst"
        path.write_bytes(raw)
        assert _io.read_bytes(str(path)) == want[name], name
    pieces = iter([cases["two"][5:12], cases["two"][12:], b""])
    assert _io.unzstd(cases["two"][:5], lambda n: next(pieces), None, 10) == b"12"
    bad = tmp_path / "trailing.jsonl.zst"
    bad.write_bytes(cases["one"] + b"not zstd")
    with pytest.raises(TraceFormatError, match="not a readable Zstandard file") as err:
        _io.read_bytes(str(bad))
    assert err.value.path == str(bad)
    cut = tmp_path / "cut.jsonl.zst"
    cut.write_bytes(cases["one"][: len(cases["one"]) // 2])
    with pytest.raises(TraceFormatError, match="truncated Zstandard stream"):
        _io.read_bytes(str(cut))


def test_unzstd_never_holds_more_than_the_limit(monkeypatch):
    zstd = _zstd()
    bomb = zstd.compress(b"\0" * (64 << 20))
    assert len(bomb) < 1 << 20
    with pytest.raises(TraceFormatError, match="expands to more than 1,000 bytes"):
        _io.unzstd(bomb, lambda n: b"", "x.zst", 1000)
    # at the limit exactly, it is read
    assert _io.unzstd(zstd.compress(b"b" * 1000), lambda n: b"", "x.zst", 1000) == b"b" * 1000
    monkeypatch.setenv("LOOPCORE_MAX_FILE_BYTES", str(1 << 20))
    with pytest.raises(TraceFormatError, match="expands to more than"):
        list(load(bomb))  # a bytes source is capped as a file is


def test_a_zstandard_bomb_is_a_clear_error_and_the_rest_is_read(impl, tmp_path):
    zstd = _zstd()
    bomb = tmp_path / "rollout-bomb.jsonl.zst"
    bomb.write_bytes(zstd.compress(b" " * (64 << 20)))
    good_trace(tmp_path / "a.jsonl")
    res = cli(impl, "analyse", str(bomb), LOOPCORE_MAX_FILE_BYTES=str(8 << 20))
    _clean(res)
    assert res.returncode == 2, res.stderr
    assert "expands to more than 8,388,608 bytes, the per-file limit" in res.stderr
    res = cli(impl, "analyse", str(tmp_path), "--keep-going", LOOPCORE_MAX_FILE_BYTES=str(8 << 20))
    _clean(res)
    assert res.returncode == 0 and "skipped 1 unreadable input" in res.stderr


def test_a_plain_file_over_the_limit_and_a_bad_limit_value(impl, tmp_path):
    big = good_trace(tmp_path / "a.jsonl")
    res = cli(impl, "analyse", str(big), LOOPCORE_MAX_FILE_BYTES="100")
    _clean(res)
    assert res.returncode == 2 and "is larger than 100 bytes, the per-file limit" in res.stderr
    res = cli(impl, "analyse", str(big), LOOPCORE_MAX_FILE_BYTES="lots")
    _clean(res)
    assert (
        res.returncode == 2
        and "LOOPCORE_MAX_FILE_BYTES='lots' is not a positive number" in res.stderr
    )


def test_bytes_sources_are_capped_too(monkeypatch):
    monkeypatch.setenv("LOOPCORE_MAX_FILE_BYTES", str(1 << 20))
    with pytest.raises(TraceFormatError, match="expands to more than"):
        list(load(gzip.compress(b" " * (4 << 20))))


# ---------------------------------------------------------------- OpenHands events folders


def _events_folder(tmp_path: pathlib.Path) -> pathlib.Path:
    events = json.loads((FIX / "openhands_events.json").read_text())
    folder = tmp_path / "conv-7" / "events"
    folder.mkdir(parents=True)
    for e in events:
        (folder / f"{e['id']}.json").write_text(json.dumps(e))
    return folder


def test_a_dangling_event_file_is_a_clear_error_or_a_counted_skip(impl, tmp_path):
    folder = _events_folder(tmp_path)
    os.symlink(tmp_path / "gone.json", folder / "9999.json")
    res = cli(impl, "analyse", str(tmp_path))
    _clean(res)
    assert res.returncode == 2, res.stderr
    assert "9999.json" in res.stderr and "cannot read" in res.stderr
    assert "[Errno" not in res.stderr
    res = cli(impl, "analyse", str(tmp_path), "--keep-going")
    _clean(res)
    assert res.returncode == 0, res.stderr
    assert "skipped 1 unreadable input" in res.stderr


def test_a_dangling_event_file_in_load_keeps_the_rest_of_the_stream(tmp_path):
    folder = _events_folder(tmp_path)
    (whole,) = load(tmp_path)
    os.symlink(tmp_path / "gone.json", folder / "9999.json")
    with pytest.raises(TraceFormatError, match="9999.json: cannot read"):
        list(load(tmp_path))
    stats = LoadStats()
    (t,) = load(tmp_path, keep_going=True, stats=stats)
    assert [s.name for s in t] == [s.name for s in whole]
    assert stats.skipped_files == 1 and t.meta["skipped"] == 1


# ---------------------------------------------------------------- nesting the hash refuses


def _deep(n: int):
    v: object = "leaf"
    for _ in range(n):
        v = {"k": v}
    return v


def test_args_nested_300_deep_make_a_malformed_step_not_a_traceback(impl, tmp_path):
    path = tmp_path / "deep.jsonl"
    steps = [
        Step("deep", 1, "observe", "read_file", "a.ts", {"path": "a.ts"}, "same", tokens_in=900)
        for _ in range(3)
    ]
    rows = [s.to_dict() for s in steps]
    rows.insert(1, {**rows[0], "args": _deep(300)})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    res = cli(impl, "analyse", str(path))
    _clean(res)
    assert res.returncode == 2, res.stderr
    assert (
        "deep.jsonl: step 1 (read_file) cannot be analysed" in res.stderr
        and "nesting deeper than 256 levels" in res.stderr
    )
    res = cli(impl, "analyse", str(path), "--keep-going", "--json", "-")
    _clean(res)
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    (trace,) = report["traces"]
    assert trace["steps"] == 3  # the other three steps are analysed
    assert trace["wasted_tokens"] > 0
    assert len(report["skipped"]) == 1


def test_load_reports_the_deep_step_and_keeps_the_rest(tmp_path):
    path = tmp_path / "deep.jsonl"
    ok = Step("s", 1, "observe", "read_file", "a.ts", {"path": "a.ts"}, "r", tokens_in=10).to_dict()
    rows = [ok, {**ok, "result": [_deep(400)]}, ok]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(
        TraceFormatError, match=r"deep.jsonl: step 1 \(read_file\) cannot be analysed"
    ):
        list(load(path))
    stats = LoadStats()
    (t,) = load(path, keep_going=True, stats=stats)
    assert len(t) == 2 and t.meta["skipped"] == 1 and stats.skipped_lines == 1


# ---------------------------------------------------------------- escape sequences


EVIL = "\x1b]0;pwned\x07\x1b[2J\x1b[H\x9b31m\x07"


def test_escape_sequences_never_reach_the_terminal(impl, tmp_path):
    path = tmp_path / "evil.jsonl"
    steps = [
        Step(
            "s" + EVIL,
            1,
            "observe",
            "read_file",
            "t" + EVIL,
            {"path": "t" + EVIL},
            "same",
            tokens_in=4000,
        )
        for _ in range(3)
    ]
    path.write_text("".join(json.dumps(s.to_dict()) + "\n" for s in steps), encoding="utf-8")
    res = cli(impl, "analyse", str(path))
    _clean(res)
    assert res.returncode == 0, res.stderr
    for raw in ("\x1b", "\x07", "\x9b"):
        assert raw not in res.stdout and raw not in res.stderr
    assert "\\x1b]0;pwned" in res.stdout
    # a bad line whose error names an evil file name
    bad = tmp_path / ("b" + EVIL + ".jsonl")
    bad.write_text("{not json\n")
    res = cli(impl, "analyse", str(bad))
    _clean(res)
    assert res.returncode == 2 and "\x1b" not in res.stderr


def test_escape_sequences_on_a_real_terminal_console(tmp_path):
    from rich.console import Console

    from loopcore.report import collect, render_text, terminal_safe

    path = tmp_path / "evil.jsonl"
    steps = [
        Step(
            "s" + EVIL, 1, "observe", "read_file", "t" + EVIL, {"path": "x"}, "same", tokens_in=4000
        )
        for _ in range(3)
    ]
    path.write_text("".join(json.dumps(s.to_dict()) + "\n" for s in steps), encoding="utf-8")
    buf = io.StringIO()
    render_text(
        collect([path]), Console(file=buf, force_terminal=True, color_system="truecolor", width=200)
    )
    out = buf.getvalue()
    assert "\x1b]0;" not in out and "\x1b[2J" not in out and "\x07" not in out and "\x9b" not in out
    assert terminal_safe("a\x1bb\x85\x7f\n") == "a\\x1bb\\x85\\x7f\\x0a"
