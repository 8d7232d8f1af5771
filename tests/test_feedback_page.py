"""`report GRADES --feedback`: a student's feedback page per results file of a batch, run as an instructor
runs it, on a batch of a correct, a buggy and a hostile submission graded once."""
import html
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.record import results

REPO = Path(__file__).resolve().parents[1]
PYTHON = str(REPO / ".venv" / "bin" / "python")
HOSTILE = "<script>alert(1)</script>"


def cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "-m", "autograder", *map(str, args)], cwd=REPO, capture_output=True, text=True,
                          timeout=600)


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    root = tmp_path_factory.mktemp("feedback")
    subs = root / "subs"
    subs.mkdir()
    shutil.copy(REPO / "examples/submissions/reference_copy.py", subs / "correct.py")
    shutil.copy(REPO / "examples/submissions/buggy_no_scale.py", subs / "buggy.py")
    source = (REPO / "reference/mhsa.py").read_text()
    head = "def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):\n"
    assert head in source
    (subs / "hostile.py").write_text(source.replace(head, head + f"    raise ValueError({HOSTILE!r})\n", 1))
    out = root / "out"
    graded = cli("grade", subs, "--batch", "--out", out, "--jobs", "3")
    assert graded.returncode == 0, graded.stdout[-2000:] + graded.stderr[-2000:]
    made = cli("report", out, "--feedback")
    assert made.returncode == 0, made.stdout + made.stderr
    return subs, out


def test_one_page_per_student_buggy_names_part_and_mistake(batch):
    _, out = batch
    pages = sorted(p.name for p in (out / "feedback").iterdir())
    assert pages == ["buggy.html", "correct.html", "hostile.html"]
    buggy = (out / "feedback" / "buggy.html").read_text()
    found = results.load(out / "buggy.json")
    assert found.parts["sdpa"].score < found.parts["sdpa"].max_score
    mistake = html.escape(results.LIKELY_MISTAKE + found.parts["sdpa"].diagnosis)
    assert "Part sdpa:" in buggy and buggy.count(mistake) == 2  # the summary's line, and once under the part
    assert "FAILED sdpa (public): sdpa::test_matches_formula[no-batch]" in buggy
    assert found.parts["sdpa"].picture_html in buggy  # the picture, inline
    correct = (out / "feedback" / "correct.html").read_text()
    right = results.load(out / "correct.json")
    assert all(p.score == p.max_score for name, p in right.parts.items() if name not in ("knowledge", "timing"))
    assert html.escape(right.output) in correct and "FAILED sdpa" not in correct
    for text in (buggy, correct):  # self-contained: no script, nothing fetched
        assert "<script" not in text and "src=\"http" not in text and "<link" not in text


def test_same_words_as_the_nbgrader_feedback(batch):
    """The nbgrader feedback's function picks, from the same results file, the diagnosis and picture it
    shows under a test cell; the page shows exactly those."""
    sys.path.insert(0, str(REPO / "course"))
    try:
        from mhsa_nbgrader.feedback import likely_mistakes
    finally:
        sys.path.remove(str(REPO / "course"))
    subs, out = batch
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "", metadata={"nbgrader": {"grade": True, "grade_id": "test_sdpa_formula", "points": 1, "score": 0}})])
    chosen = likely_mistakes(nb, results.load(out / "buggy.json"), subs / "buggy.py")
    assert list(chosen) == ["test_sdpa_formula"]
    part = chosen["test_sdpa_formula"]
    page = (out / "feedback" / "buggy.html").read_text()
    assert html.escape(f"{results.LIKELY_MISTAKE}{part.diagnosis.strip()}") in page
    assert part.picture_html in page


def test_hostile_output_is_escaped_and_bad_folders_refused(batch, tmp_path):
    _, out = batch
    page = (out / "feedback" / "hostile.html").read_text()
    assert HOSTILE not in page and html.escape(HOSTILE) in page
    run = cli("report", tmp_path, "--feedback")
    assert run.returncode == 2 and "holds no graded results file" in run.stdout and "Traceback" not in run.stderr
    missing = cli("report", tmp_path / "none", "--feedback")
    assert missing.returncode == 2 and "is not a `grade --batch` results folder" in missing.stdout


@pytest.mark.skipif(shutil.which("chromium") is None and shutil.which("chromium-browser") is None,
                    reason="Chromium is not installed (apt-get install chromium)")
def test_page_renders_in_chromium_without_console_errors(batch, tmp_path):
    from tests.test_report_browser import open_page

    _, out = batch
    dom, console = open_page(out / "feedback" / "buggy.html", tmp_path)
    assert console == []
    assert "Feedback: buggy" in dom and "Likely mistake:" in dom and 'data-resources-fetched="0"' in dom
