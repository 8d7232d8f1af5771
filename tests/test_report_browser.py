"""The class report opened in a real browser (headless Chromium): it renders without console errors,
loads nothing from outside, its plots decode, and the tables the browser shows equal the CSV files.

Without Chromium the tests skip, except in CI (CI=true), where a missing browser is a failure.
Set REPORT_SCREENSHOT=docs/class-report.png to refresh the screenshot in the docs.
"""
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.class_report_fixtures import DATA, Tables, assert_page_matches_csv, make_class, report

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run", "--enable-logging=stderr", "--v=0"]
CONSOLE = re.compile(r":CONSOLE[:(]\d+\)?\] (?P<message>.*)")
# Added to a copy of the page only: once everything has loaded, it counts the plots the browser decoded
# and the resources it fetched, and writes both into the DOM that --dump-dom prints.
PROBE = """<script>
window.addEventListener('load', () => {
  const images = Array.from(document.images);
  const broken = images.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.alt);
  if (broken.length) console.error('plot did not render: ' + broken.join(', '));
  document.body.dataset.plotsRendered = images.length - broken.length;
  document.body.dataset.resourcesFetched = performance.getEntriesByType('resource').length;
});
</script>"""

pytestmark = pytest.mark.skipif(BROWSER is None and os.environ.get("CI") != "true",
                                reason="Chromium is not installed (apt-get install chromium)")


def chromium(tmp_path: Path, *args) -> subprocess.CompletedProcess:
    assert BROWSER is not None, "CI needs Chromium: apt-get install chromium"
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"  # a fresh one each time
    return subprocess.run([BROWSER, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True,
                          timeout=180)


def open_page(page: Path, tmp_path: Path) -> tuple:
    """(the DOM after load, the console messages) of `page` with the probe added."""
    probed = tmp_path / f"probed-{page.name}"
    probed.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    run = chromium(tmp_path, "--dump-dom", probed.as_uri())
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout, [m["message"] for m in CONSOLE.finditer(run.stderr)]


def body_data(dom: str, name: str) -> int:
    return int(re.search(rf'<body[^>]* data-{name}="(\d+)"', dom)[1])


def test_console_errors_are_caught(tmp_path):
    """The check below can fail: a page that logs an error and has a broken image is caught."""
    page = tmp_path / "bad.html"
    page.write_text('<!DOCTYPE html><html><body><img alt="broken plot" src="data:image/png;base64,AAAA">'
                    '<script>console.error("planted error")</script></body></html>')
    dom, console = open_page(page, tmp_path)
    assert any("planted error" in m for m in console)
    assert any("plot did not render: broken plot" in m for m in console)
    assert body_data(dom, "plots-rendered") == 0


def check_report(out: Path, tmp_path: Path, plots: int) -> tuple:
    """(the DOM the browser built, its tables), once the checks every report passes have passed."""
    dom, console = open_page(out / "report.html", tmp_path)
    assert console == []
    assert body_data(dom, "resources-fetched") == 0  # self-contained: nothing loaded from anywhere
    assert body_data(dom, "plots-rendered") == plots
    shown = Tables(dom)
    assert len([i for i in shown.images if i.get("class") == "plot"]) == plots
    assert assert_page_matches_csv(shown, out) >= 2
    return dom, shown


def test_report_of_the_bundled_examples_renders(tmp_path):
    run = report(DATA, "--out", tmp_path / "out")
    assert run.returncode == 0, run.stdout + run.stderr
    _, shown = check_report(tmp_path / "out", tmp_path, plots=1 + 5)  # the total and the five graded parts
    # Each maximum says what it leaves out (its own column, after the maximum): timing without CUDA,
    # and the knowledge check these results did not grade.
    students = shown.tables["students"][1:]
    assert all("knowledge 5" in row[3] and "timing 5 (not timed: no CUDA device)" in row[3] for row in students)
    # the knowledge column: blank, as these results hold no answers (not withheld)
    assert [row[:3] + row[4:] for row in students] == [
        ["buggy_no_scale", "55.89", "90.00", "62.1%", "5.97", "10.00", "15.00", "16.89", "8.02", "", "graded",
         "sandbox"],
        ["reference_copy", "90.00", "90.00", "100.0%", "20.00", "10.00", "15.00", "30.00", "15.00", "", "graded",
         "sandbox"],
        ["stubs", "0.00", "90.00", "0.0%", "0.00", "0.00", "0.00", "0.00", "0.00", "", "graded", "sandbox"]]


def test_report_of_a_generated_class_renders(tmp_path):
    facts = make_class(tmp_path / "class")
    out = tmp_path / "out"
    run = report(facts.results, "--submissions", facts.submissions, "--out", out)
    assert run.returncode == 0, run.stdout + run.stderr
    # the total, seven graded parts (timing and, for one student, knowledge included) and the timing ratios
    dom, shown = check_report(out, tmp_path, plots=1 + 7 + 1)
    assert [row[:2] for row in shown.tables["similarity"][1:]] == [list(facts.near_identical)]
    assert len(shown.tables["students"]) == 1 + 30
    # who needs help, with what: each misconception's students, then the untouched and the one that did not compile
    needs_help = {row[0]: row[3] for row in shown.tables["needs-help"][1:]}
    assert needs_help.pop("untouched: every function still the stub") == facts.untouched
    assert needs_help.pop("did not compile: nothing of the code could run, so every test failed") == facts.did_not_compile
    assert sorted(needs_help.values()) == sorted(", ".join(who) for who in facts.misconceptions.values())
    shares = {row[0]: row for row in shown.tables["part-shares"][1:]}
    assert shares[facts.untouched][-1] == "untouched" and shares[facts.did_not_compile][-1] == "did not compile"
    assert len(shares) == 30
    assert 'style="background: hsl(4, 75%, 55%)">0.0%</td>' in dom  # the heatmap: none of a part's points, darkest
    assert len(shown.tables["hardest-tests"]) > 1
    assert "Over the 27 attempted submissions (left out: 1 untouched, 1 did not compile)" in dom
    screenshot = Path(os.environ.get("REPORT_SCREENSHOT") or tmp_path / "report.png")
    run = chromium(tmp_path, "--window-size=1280,2000", f"--screenshot={screenshot.resolve()}",
                   (out / "report.html").as_uri())
    assert run.returncode == 0, run.stderr[-3000:]
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and screenshot.stat().st_size > 50_000
