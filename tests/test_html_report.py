"""The HTML report, opened in a real browser (headless Chromium driven through Selenium).

Chromium and its driver come from Debian's packages (``chromium``, ``chromium-driver``; .ci/run
installs them) and Selenium from PyPI; the tests skip with the reason when either is missing.
Selenium is pointed at the system chromedriver, so nothing is downloaded at run time.

Set ``LOOPCORE_SCREENSHOT_DIR`` to keep the screenshots (the README's picture is made that way:
``LOOPCORE_SCREENSHOT_DIR=docs/img python -m pytest tests/test_html_report.py``).
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

import pytest
from conftest import package_env

from loopcore.htmlreport import clean_text

ROOT = pathlib.Path(__file__).resolve().parent.parent

HOSTILE = [
    "<script>window.__pwned = 1</script>",
    '"><img src=x onerror="window.__pwned=1">',
    "javascript:window.__pwned=1",
    "\x1b]0;owned\x07\x1b[2J",
    "</script><script>window.__pwned=1</script>",
    "<!--",
    "\u2028line\u2029sep",
]


def _chromium() -> tuple[str, str] | None:
    browser = next(
        (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
    )
    driver = shutil.which("chromedriver") or (
        "/usr/bin/chromedriver" if os.path.exists("/usr/bin/chromedriver") else None
    )
    return (browser, driver) if browser and driver else None


@pytest.fixture(scope="module")
def browser():
    webdriver = pytest.importorskip(
        "selenium.webdriver", reason="selenium is not installed (pip install '.[test]')"
    )
    found = _chromium()
    if found is None:
        pytest.skip("headless Chromium not found: apt-get install chromium chromium-driver")
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    opts.binary_location = found[0]
    for a in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
        "--disable-extensions",
        "--no-first-run",
    ):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(service=Service(executable_path=found[1]), options=opts)
    drv.set_page_load_timeout(120)
    yield drv
    drv.quit()


def _cli(*args: str, cwd: pathlib.Path | None = None) -> subprocess.CompletedProcess:
    env = package_env()
    return subprocess.run(
        [sys.executable, "-m", "loopcore", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=600,
    )


def _open(drv, path: pathlib.Path) -> float:
    """Load *path*, wait for the page's script to finish; the seconds it took."""
    drv.get_log("browser")  # drop what earlier pages logged
    t0 = time.perf_counter()
    drv.get(path.resolve().as_uri())
    deadline = time.time() + 120
    while (
        drv.execute_script("return document.body && document.body.getAttribute('data-ready')")
        != "1"
    ):
        if time.time() > deadline:
            raise AssertionError(f"the report's script never finished: {drv.get_log('browser')}")
        time.sleep(0.05)
    return time.perf_counter() - t0


def _errors(drv) -> list:
    return [e for e in drv.get_log("browser") if e.get("level") in ("SEVERE", "ERROR")]


def _screenshot(drv, tmp_path: pathlib.Path, name: str) -> pathlib.Path:
    keep = os.environ.get("LOOPCORE_SCREENSHOT_DIR")
    dest = pathlib.Path(keep) if keep else tmp_path
    dest.mkdir(parents=True, exist_ok=True)
    out = dest / name
    drv.save_screenshot(str(out))
    assert out.stat().st_size > 10_000  # a blank page compresses to far less
    return out


def _write_steps(path: pathlib.Path, steps: list[dict]) -> None:
    path.write_text("".join(json.dumps(s) + "\n" for s in steps), encoding="utf-8")


# ------------------------------------------------------------------------------------- the example


def test_example_report_in_chromium(browser, tmp_path):
    out = tmp_path / "report.html"
    r = _cli("analyse", "--html", str(out))
    assert r.returncode == 0, r.stderr
    assert "HTML report" in r.stderr and "KB" in r.stderr  # the size is printed
    _open(browser, out)
    assert _errors(browser) == []
    from selenium.webdriver.common.by import By

    rows = browser.find_elements(By.CSS_SELECTOR, "#traces-body tr.trace")
    assert len(rows) == 1
    # the costliest trace is opened on load: its timeline has one bar per step (37 in the example)
    bars = browser.find_elements(By.CSS_SELECTOR, "#detail svg.timeline rect.step")
    assert len(bars) == 37
    marks = browser.find_elements(By.CSS_SELECTOR, "#detail svg.timeline rect.waste-mark")
    findings = browser.find_elements(By.CSS_SELECTOR, "#detail table.findings tr.finding")
    assert len(findings) == 4
    assert len(marks) >= 4  # every charged step is marked
    assert browser.find_elements(
        By.CSS_SELECTOR, "#detail svg.timeline path.link"
    )  # linked to what it repeats
    assert browser.find_elements(
        By.CSS_SELECTOR, "#detail .guard-mark"
    )  # the default guard warns there
    charts = browser.find_elements(By.CSS_SELECTOR, "#summary figure.chart svg g.bar")
    assert len(charts) >= 3
    assert "re-learn" in browser.find_element(By.CSS_SELECTOR, "#summary .rec").text
    browser.set_window_size(
        1400, 2100
    )  # the overview and the opened trace's timeline in one picture
    try:
        _screenshot(browser, tmp_path, "report.png")
    finally:
        browser.set_window_size(1400, 1000)


def test_replay_report_in_chromium(browser, tmp_path):
    out = tmp_path / "replay.html"
    r = _cli("replay", "--policy", "default", "--html", str(out))
    assert r.returncode == 0, r.stderr
    _open(browser, out)
    assert _errors(browser) == []
    from selenium.webdriver.common.by import By

    assert browser.find_elements(By.CSS_SELECTOR, "#detail table.guard tr.gev")
    assert "guard replay" in browser.title


def test_summary_reads_without_javascript(tmp_path):
    out = tmp_path / "report.html"
    assert _cli("analyse", "--html", str(out)).returncode == 0
    page = out.read_text(encoding="utf-8")
    # the figures and the charts are in the HTML itself, not built by the script
    assert 'id="wasted-tokens">5,202<' in page
    assert page.count('<g class="bar">') >= 3
    assert '<tr class="trace" data-i="0">' in page
    assert (
        "http://" not in page.replace("http://www.w3.org/2000/svg", "") and "https://" not in page
    )


# ------------------------------------------------------------------------------------- hostile strings


def _hostile_trace(path: pathlib.Path) -> None:
    steps = []
    for j, s in enumerate(HOSTILE):
        for _ in range(3):  # read three times: the repeats are findings that quote the strings
            steps.append(
                {
                    "session": s,
                    "name": s,
                    "kind": "observe",
                    "target": s,
                    "args": {"path": s},
                    "result": s * 3,
                    "tokens_in": 50,
                    "tokens_out": 5,
                }
            )
        steps.append(
            {
                "session": s,
                "name": "edit",
                "kind": "mutate",
                "target": s,
                "args": {"path": s, "n": j},
                "result": "ok",
                "tokens_in": 1,
                "tokens_out": 1,
            }
        )
    _write_steps(path, steps)


def test_hostile_strings_execute_nothing(browser, tmp_path):
    trace = tmp_path / "hostile.jsonl"
    _hostile_trace(trace)
    out = tmp_path / "hostile.html"
    r = _cli("analyse", str(trace), "--html", str(out))
    assert r.returncode == 0, r.stderr
    page = out.read_text(encoding="utf-8")
    assert "<script>window" not in page and "<img src=x" not in page and "\x1b" not in page
    assert page.count("<script") == 2  # the data block and the page's own script, nothing else
    _open(browser, out)
    assert browser.execute_script("return window.__pwned") is None
    assert _errors(browser) == []
    from selenium.webdriver.common.by import By

    assert len(browser.find_elements(By.CSS_SELECTOR, "#traces-body tr.trace")) == len(HOSTILE)
    assert not browser.find_elements(By.CSS_SELECTOR, "img")
    # each trace's detail renders its strings as text
    for i in range(len(HOSTILE)):
        browser.execute_script("window.loopcoreShow(arguments[0])", i)
        text = browser.find_element(By.ID, "detail").text
        assert "Trace: " in text
    assert browser.execute_script("return window.__pwned") is None
    body = browser.find_element(By.TAG_NAME, "body").text
    assert "<script>window.__pwned = 1</script>" in body
    assert "\\x1b]0;owned" in body  # control characters shown, escaped
    _screenshot(browser, tmp_path, "hostile.png")


def test_clean_text_escapes_controls():
    assert clean_text("a\x1b[2Jb") == "a\\x1b[2Jb"
    assert clean_text("x\u2028y") == "x\\u2028y"
    assert clean_text("tab\tand\nnewline") == "tab\tand\nnewline"
    assert clean_text(("a", "b")) == "a, b"
    assert len(clean_text("z" * 1000)) == 300


# ------------------------------------------------------------------------------------- scale


def _corpus(path: pathlib.Path, n: int) -> None:
    """*n* small sessions in one loopcore JSONL file; every 3rd wastes a re-read, every 7th a repeat."""
    lines = []
    for i in range(n):
        s = f"s{i:05d}"
        fmt = ("src/a.py", "src/b.py", "docs/c.md")[i % 3]
        lines.append(
            {
                "session": s,
                "name": "read_file",
                "kind": "observe",
                "target": fmt,
                "args": {"path": fmt},
                "result": f"text {i % 11}",
                "tokens_in": 100 + i % 50,
                "tokens_out": 10,
            }
        )
        lines.append(
            {
                "session": s,
                "name": "grep",
                "kind": "observe",
                "target": "src",
                "args": {"q": f"x{i}"},
                "result": f"hit {i}",
                "tokens_in": 20,
                "tokens_out": 8,
            }
        )
        if i % 3 == 0:
            lines.append(dict(lines[-2]))
        if i % 7 == 0:
            lines.append(
                {
                    "session": s,
                    "name": "run_tests",
                    "kind": "exec",
                    "args": {"cmd": "pytest"},
                    "result": "1 failed",
                    "tokens_in": 40,
                    "tokens_out": 6,
                }
            )
            lines.append(dict(lines[-1]))
        lines.append(
            {
                "session": s,
                "name": "edit",
                "kind": "mutate",
                "target": fmt,
                "args": {"path": fmt, "i": i},
                "result": "ok",
                "tokens_in": 5,
                "tokens_out": 30,
            }
        )
    _write_steps(path, lines)


def test_ten_thousand_traces_stay_responsive(browser, tmp_path):
    trace = tmp_path / "fleet.jsonl"
    _corpus(trace, 10_000)
    out = tmp_path / "fleet.html"
    r = _cli("analyse", str(trace), "--html", str(out))
    assert r.returncode == 0, r.stderr
    size = out.stat().st_size
    assert size < 12_000_000, size  # a few hundred bytes a trace, bounded
    seconds = _open(browser, out)
    print(f"10,000-trace report: {size / 1e6:.1f} MB, loaded in {seconds:.2f} s")
    assert _errors(browser) == []
    from selenium.webdriver.common.by import By

    rows = browser.find_elements(By.CSS_SELECTOR, "#traces-body tr.trace")
    assert len(rows) == 50  # paged, not 10,000 rows at once
    assert "of 10,000" in browser.find_element(By.ID, "page-info").text
    browser.find_element(By.ID, "next").click()
    assert "51-100 of 10,000" in browser.find_element(By.ID, "page-info").text
    # filter: only traces with a duplicate_call (every 7th)
    from selenium.webdriver.support.ui import Select

    Select(browser.find_element(By.ID, "f-kind")).select_by_value("duplicate_call")
    assert f"of {len(range(0, 10_000, 7)):,}" in browser.find_element(By.ID, "page-info").text
    rows = browser.find_elements(By.CSS_SELECTOR, "#traces-body tr.trace")
    rows[0].click()
    assert browser.find_elements(By.CSS_SELECTOR, "#detail svg.timeline rect.waste-mark")
    # sort by steps: most first, then (a second click) fewest first
    head = browser.find_element(By.CSS_SELECTOR, 'th[data-sort="steps"]')

    def steps_column() -> list[int]:
        cells = browser.find_elements(By.CSS_SELECTOR, "#traces-body tr.trace td:nth-child(3)")
        return [int(c.text.replace(",", "")) for c in cells]

    head.click()
    desc = steps_column()
    head.click()
    asc = steps_column()
    assert desc == sorted(desc, reverse=True) and asc == sorted(asc) and desc[0] > asc[0]
    assert _errors(browser) == []
    _screenshot(browser, tmp_path, "fleet.png")


def test_long_trace_timeline_is_folded(tmp_path):
    from loopcore.htmlreport import TIMELINE_MAX_BARS

    steps = [
        {
            "session": "long",
            "name": "read_file",
            "kind": "observe",
            "target": f"f{i % 97}",
            "args": {"path": f"f{i % 97}"},
            "result": "same",
            "tokens_in": 10,
            "tokens_out": 1,
        }
        for i in range(5000)
    ]
    trace = tmp_path / "long.jsonl"
    _write_steps(trace, steps)
    out = tmp_path / "long.html"
    assert _cli("analyse", str(trace), "--html", str(out)).returncode == 0
    page = out.read_text(encoding="utf-8")
    data = json.loads(page.split('id="lc-data">', 1)[1].split("</script>", 1)[0])
    tl = data["traces"][0]["tl"]
    assert len(tl["k"]) == TIMELINE_MAX_BARS and tl["n"] == 5000
    assert sum(tl["t"]) == 5000 * 11  # buckets keep every token
    assert out.stat().st_size < 200_000
