"""The rubric's numbers in the handout and the docs are generated (autograder/authoring/doc_numbers.py): a changed
rubric fails `release --check` until `release --write` puts its points and totals in, and `check`
then counts out of what the handout says."""
import re
import shutil
import subprocess
import sys

import pytest

from autograder.authoring import doc_numbers, release
from autograder.core import rubric
from autograder.core.paths import REPO, RUBRIC_FILE
from tests import fresh_machine

IGNORE = shutil.ignore_patterns(".git", "__pycache__", "build", "grading-out", ".venv", "*.db")
SDPA = '[parts.sdpa]\ntitle = "Scaled dot-product attention"\npoints = 20\n'
# The files that state the rubric's points or totals; each must hold them in regions only.
WITH_NUMBERS = {"assignment/README.md", "docs/student-README.md", "docs/autograder.md", "docs/nbgrader.md",
                "docs/hidden-tests.md"}


def autograder(args, cwd):
    """`python -m autograder ARGS` in `cwd`, as an instructor types it on a fresh machine."""
    return subprocess.run([sys.executable, "-m", "autograder", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env=fresh_machine.ENV)


def values(text: str) -> dict:
    """Region name -> the text its regions hold (each name's regions agree)."""
    found = {}
    for match in doc_numbers.REGION.finditer(text):
        assert found.setdefault(match["name"], match["text"]) == match["text"], match["name"]
    return found


def hand_written(text: str) -> str:
    return doc_numbers.REGION.sub("", text)


def test_every_file_that_states_the_rubrics_numbers_is_generated():
    assert WITH_NUMBERS <= set(doc_numbers.files())
    generated = release.generated_files()
    assert {path: (REPO / path).read_text() for path in WITH_NUMBERS} == {path: generated[path] for path in WITH_NUMBERS}


def test_the_handouts_tables_hold_every_part_with_its_points_and_the_total():
    course = rubric.load()
    handout = values((REPO / "assignment/README.md").read_text())
    points = dict(re.findall(r"^\| `(\w+)` \| .* \| ([\d.]+) \|$", handout["parts-table"], re.M))
    assert {name: float(p) for name, p in points.items()} == {name: p.points for name, p in course.parts.items()}
    total = sum(p.points for p in course.parts.values())
    assert f"**in all** | **{total:g}** |" in handout["parts-table"]
    assert handout["total"] == f"{total:g}"


def test_a_changed_rubric_fails_the_check_until_the_handout_says_its_points(tmp_path):
    """sdpa 20 -> 25: `release --check` names the handout and the docs, `release --write` writes the new
    points and totals into their regions and nothing else, and `check` counts out of what they say."""
    copy = tmp_path / "repo"
    shutil.copytree(REPO, copy, ignore=IGNORE)
    subs, grades = tmp_path / "subs", tmp_path / "grades"
    subs.mkdir()
    shutil.copyfile(copy / "assignment" / "mhsa.py", subs / "ann.py")
    batch = ["grade", str(subs), "--batch", "--out", str(grades), "--suite", "public", "--jobs", "1"]
    graded = autograder(batch, copy)
    assert graded.returncode == 0 and ",90.0," in (grades / "grades.csv").read_text(), graded.stdout + graded.stderr
    text = (copy / "rubric.toml").read_text()
    assert text.count(SDPA) == 1
    (copy / "rubric.toml").write_text(text.replace(SDPA, SDPA.replace("points = 20", "points = 25")))
    before = {path: (copy / path).read_text() for path in WITH_NUMBERS}

    stale = autograder(["release", "--check"], copy)
    assert stale.returncode == 1, stale.stdout + stale.stderr
    for path in WITH_NUMBERS - {"docs/hidden-tests.md"}:  # the suites' shares did not change
        assert f"out of date: {path} " in stale.stdout, stale.stdout

    written = autograder(["release", "--write"], copy)
    assert written.returncode == 0, written.stdout + written.stderr
    assert autograder(["release", "--check"], copy).returncode == 0
    after = {path: (copy / path).read_text() for path in WITH_NUMBERS}
    assert {p: hand_written(t) for p, t in after.items()} == {p: hand_written(t) for p, t in before.items()}
    handout = values(after["assignment/README.md"])
    assert "| `sdpa` | [`scaled_dot_product_attention`](#scaled_dot_product_attention) | 25 |" in handout["parts-table"]
    assert "| | **in all** | **105** |" in handout["parts-table"]
    assert "| `sdpa` | 25 | public tests | public and hidden tests |" in handout["commands-table"]
    assert "| **in all** | **105** | **95** | |" in handout["commands-table"]
    assert (handout["total"], handout["total-without-gpu"], handout["check-total"]) == ("105", "100", "95")
    assert values(after["docs/student-README.md"]) == {"total": "105", "check-total": "95"}
    assert values(after["docs/nbgrader.md"])["nbgrader-total"] == "102"

    # The batch follows the rubric too: its rerun regrades, says why, and counts out of the new maximum.
    regraded = autograder(batch, copy)
    assert regraded.returncode == 0, regraded.stdout + regraded.stderr
    assert "regrading 1 of 1: the grader changed" in regraded.stderr and "regrading 1 of 1: the rubric graded with changed" \
        in regraded.stderr, regraded.stderr
    assert ",95.0," in (grades / "grades.csv").read_text()

    checked = autograder(["check", "examples/submissions/reference_copy.py"], copy)
    assert "95.00 / 95.00 points from the public tests" in checked.stdout, checked.stdout[-2000:] + checked.stderr


def test_a_rubric_without_timing_leaves_it_out_of_the_tables_and_the_totals(tmp_path):
    path = tmp_path / "rubric.toml"
    path.write_text(RUBRIC_FILE.read_text().replace("[parts.timing]\n", "[parts.timing]\nenabled = false\n", 1))
    texts = doc_numbers.texts(rubric.load(path))
    assert "timing" not in texts["parts-table"] + texts["commands-table"]
    assert texts["total"] == texts["total-without-gpu"] == "95"


@pytest.mark.parametrize("text, problem", [
    ("out of <!-- generated: totl -->90<!-- /generated -->.", "no generated text is called 'totl'"),
    ("out of\n<!-- generated: total -->90<!-- /generated -->.", "opens a line"),
    ("out of <!-- generated: total -->90.", "has no `<!-- /generated -->` after it"),
])
def test_a_region_that_cannot_be_filled_is_refused_with_the_file_and_the_reason(text, problem):
    with pytest.raises(doc_numbers.RegionError, match=re.escape(problem)) as refused:
        doc_numbers.fill(text, doc_numbers.texts(rubric.load()), "docs/x.md")
    assert str(refused.value).startswith("docs/x.md: ")


def test_release_names_a_region_it_cannot_fill_in_one_line(tmp_path):
    copy = tmp_path / "repo"
    shutil.copytree(REPO, copy, ignore=IGNORE)
    page = copy / "docs" / "autograder.md"
    page.write_text(page.read_text() + "\nOut of <!-- generated: totl -->90<!-- /generated -->.\n")
    result = autograder(["release", "--check"], copy)
    assert result.returncode == 2
    assert (result.stdout + result.stderr).splitlines() == [
        "docs/autograder.md: no generated text is called 'totl'; the names are " + ", ".join(doc_numbers.texts(rubric.load()))
        + " (autograder/authoring/doc_numbers.py)"]
