"""A part's score set by hand after a regrade request (`review GRADES --score STUDENT PART=POINTS --note
TEXT`), as a TA types it, `python -m autograder ...` in a subprocess on one small batch: bob forgets the
1/sqrt(d_k) scale (sdpa 0 of 20), alice hands in the reference. The score set by hand shows with its note
in bob's results.json, grades.csv, the class report and the Canvas export; a rerun with --force keeps
it; --unscore restores what the tests gave; a resubmitted file keeps the computed score; a grade held
for review is decided first; bad input changes nothing."""
import csv
import json
import subprocess
import sys

import pytest

from autograder.core.paths import REPO
from tests import fresh_machine

EXAMPLES = REPO / "examples" / "submissions"
NOTE = "regrade: the scale is applied in the caller"


def autograder(*args):
    return subprocess.run([sys.executable, "-m", "autograder", *map(str, args)], cwd=REPO, capture_output=True,
                          text=True, timeout=600, env=fresh_machine.ENV)


def ok(*args) -> str:
    result = autograder(*args)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stdout + result.stderr
    return result.stdout + result.stderr


def read_csv(path) -> dict:
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return {row.get("submission") or row.get("Student"): row for row in rows}


def results_of(out, name) -> dict:
    return json.loads((out / f"{name}.json").read_text())


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """(submissions, grades folder, the batch command) after grading alice and bob, bob's sdpa set to 15."""
    tmp = tmp_path_factory.mktemp("score")
    subs, out = tmp / "subs", tmp / "grades"
    subs.mkdir()
    (subs / "alice.py").write_text((EXAMPLES / "reference_copy.py").read_text())
    (subs / "bob.py").write_text((EXAMPLES / "buggy_no_scale.py").read_text())
    grade = ("grade", subs, "--batch", "--out", out, "--suite", "public", "--jobs", "2")
    ok(*grade)
    assert results_of(out, "bob")["extra_data"]["parts"]["sdpa"]["score"] == 0
    said = ok("review", out, "--score", "bob", "sdpa=15", "--note", NOTE)
    assert "bob: set by hand; score 85 / 90" in said
    return subs, out, grade


def shows_the_score_set_by_hand(out, tmp_path):
    """Asserts every view of bob's grade shows sdpa 15 set by hand with the note, and the total 85 of 90."""
    bob = results_of(out, "bob")
    assert (bob["score"], bob["extra_data"]["max_score"]) == (85, 90)
    assert bob["extra_data"]["parts"]["sdpa"]["score"] == 15
    assert round(sum(row.get("score") or 0 for row in bob["tests"]), 6) == 85  # the rows still add up to the total
    assert f"Score set by hand: 15 / 20 (the tests gave 0): {NOTE}" in bob["output"]
    hand_rows = [row for row in bob["tests"] if row["tags"] == ["sdpa", "set by hand"]]
    assert [(row["score"], row["max_score"]) for row in hand_rows] == [(15, 0)]
    assert NOTE in hand_rows[0]["output"]

    grades = read_csv(out / "grades.csv")
    assert (grades["bob"]["score"], grades["bob"]["sdpa"]) == ("85.0", "15.0")
    assert grades["bob"]["review"] == f"score set by hand: sdpa 15 (the tests gave 0: {NOTE})"
    assert (grades["alice"]["score"], grades["alice"]["review"]) == ("90.0", "")

    roster = tmp_path / "roster.csv"
    roster.write_text("name,id,sis_user_id,login,section,submission\nAlice,1,11,alice,A,alice\nBob,2,22,bob,A,bob\n")
    report = ok("report", out, "--roster", roster, "--format", "canvas", "--assignment", "MHSA",
                "--out", tmp_path / "report")
    assert f"bob: score set by hand: sdpa 15 (the tests gave 0: {NOTE})" in report
    canvas = read_csv(tmp_path / "report" / "canvas.csv")
    assert (canvas["Bob"]["MHSA"], canvas["Alice"]["MHSA"]) == ("85.00", "90.00")
    with open(tmp_path / "report" / "report-integrity.csv", newline="") as f:
        integrity = [row for row in csv.reader(f) if row[1] == "score set by hand"]
    assert integrity == [["bob", "score set by hand", f"sdpa 15 (the tests gave 0: {NOTE})"]]


def test_a_score_set_by_hand_shows_with_its_note_everywhere(batch, tmp_path):
    shows_the_score_set_by_hand(batch[1], tmp_path)
    assert "bob: scores set by hand on files sha256" in ok("review", batch[1])


@pytest.mark.parametrize("args, says", [
    (("--score", "bob", "sdpa=21"), "part 'sdpa' scores 0 to 20, not 21"),
    (("--score", "bob", "sdpa=-1"), "part 'sdpa' scores 0 to 20, not -1"),
    (("--score", "bob", "sdpa=lots"), "'sdpa=lots' is not PART=POINTS"),
    (("--score", "bob", "attention=3"), "no part or written question 'attention'; the parts: sdpa, heads, masks, mhsa"),
    (("--score", "carol", "sdpa=3"), "no results for 'carol'"),
    (("--score", "bob", "W9=1"), "no part or written question 'W9'; the parts: sdpa, heads"),
    (("--score", "bob", "W1=2"), "written question W1 scores 0 to 1, not 2"),
    (("--score", "bob", "timing=1"), "part 'timing' is not in these results"),
    (("--unscore", "bob", "masks"), "bob has no score set by hand for masks; set by hand: sdpa"),
])
def test_bad_input_says_why_in_one_line_and_changes_nothing(batch, args, says):
    out = batch[1]
    before = {p.name: p.read_bytes() for p in [*out.glob("*.json"), *out.glob("*.csv"), *out.glob("records/*")]}
    result = autograder("review", out, *args, "--note", "x")
    assert result.returncode == 2 and says in result.stdout, result.stdout + result.stderr
    assert len(result.stdout.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert {p.name: p.read_bytes() for p in [*out.glob("*.json"), *out.glob("*.csv"), *out.glob("records/*")]} == before


def test_score_needs_a_note(batch):
    result = autograder("review", batch[1], "--score", "bob", "sdpa=3")
    assert result.returncode == 2 and result.stdout.startswith("--score needs --note TEXT")
    assert results_of(batch[1], "bob")["extra_data"]["parts"]["sdpa"]["score"] == 15


WRITTEN_NOTE = "W2: names no cross-attention model"


def test_written_questions_are_scored_by_hand_beside_the_autograded_score(batch, tmp_path):
    """W1 and W2 (knowledge.toml's written questions, 1 point each, graded by hand in nbgrader's
    formgrader on the notebook route) scored on the batch route: outside results.json's autograded
    score and maximum, in grades.csv's written column, and counted by the report and the Canvas export
    as nbgrader's gradebook counts them (every student's points possible gain the 2 points; a student not
    scored yet counts 0, and the export says who). Kept by a forced rerun; --unscore takes them back."""
    subs, out, grade = batch
    said = ok("review", out, "--score", "bob", "W1=1", "W2=0.5", "--note", WRITTEN_NOTE)
    assert f"bob: set by hand; score 85 / 90; score set by hand: sdpa 15 (the tests gave 0: {NOTE}); " \
           f"written, scored by hand: W1 1/1 ({WRITTEN_NOTE}); W2 0.5/1 ({WRITTEN_NOTE})" in said
    ok(*grade, "--force")

    bob = results_of(out, "bob")
    assert (bob["score"], bob["extra_data"]["max_score"]) == (85, 90)  # the autograded total is unchanged
    assert bob["extra_data"]["written"] == {"W1": {"score": 1.0, "max_score": 1.0, "note": WRITTEN_NOTE},
                                            "W2": {"score": 0.5, "max_score": 1.0, "note": WRITTEN_NOTE}}
    grades = read_csv(out / "grades.csv")
    assert (grades["bob"]["written"], grades["alice"]["written"], grades["bob"]["score"]) == ("1.5", "", "85.0")
    assert f"written, scored by hand: W1 1/1 ({WRITTEN_NOTE})" in grades["bob"]["review"]

    roster = tmp_path / "roster.csv"
    roster.write_text("name,id,sis_user_id,login,section,submission\nAlice,1,11,alice,A,alice\nBob,2,22,bob,A,bob\n")
    report = ok("report", out, "--roster", roster, "--format", "canvas", "--assignment", "MHSA",
                "--out", tmp_path / "report")
    assert "count the written questions W1, W2, scored by hand (review --score); not scored yet for alice: " \
           "counted 0" in report
    with open(tmp_path / "report" / "canvas.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[1][-1] == "92" and {r[0]: r[-1] for r in rows[2:]} == {"Alice": "90.00", "Bob": "86.50"}
    with open(tmp_path / "report" / "report-integrity.csv", newline="") as f:
        integrity = [row for row in csv.reader(f) if row[1] == "written, scored by hand"]
    assert integrity == [["bob", "written, scored by hand", f"W1 1/1: {WRITTEN_NOTE}"],
                         ["bob", "written, scored by hand", f"W2 0.5/1: {WRITTEN_NOTE}"]]
    ok("report", out, "--feedback", "--out", tmp_path / "pages")
    page = (tmp_path / "pages" / "feedback" / "bob.html").read_text()
    assert "Written questions, scored by hand" in page and f"W2: 0.5 / 1: {WRITTEN_NOTE}" in page

    said = ok("review", out, "--unscore", "bob", "W1", "W2")
    assert "written, scored by hand" not in said
    assert "written" not in results_of(out, "bob")["extra_data"]
    assert "written" not in read_csv(out / "grades.csv")["bob"]
    assert list(json.loads((out / "records" / "scores.json").read_text())["bob"]["parts"]) == ["sdpa"]


def test_kept_by_a_forced_rerun_dropped_by_unscore_and_not_carried_to_other_files(batch, tmp_path):
    subs, out, grade = batch
    ok(*grade, "--force")
    shows_the_score_set_by_hand(out, tmp_path)

    said = ok("review", out, "--unscore", "bob")
    assert "bob: back to what the tests gave; score 70 / 90" in said
    bob = results_of(out, "bob")
    assert (bob["score"], bob["extra_data"]["parts"]["sdpa"]["score"]) == (70, 0)
    assert "set by hand" not in json.dumps(bob).lower()
    assert read_csv(out / "grades.csv")["bob"]["review"] == ""
    assert json.loads((out / "records" / "scores.json").read_text()) == {}

    # set on one file, then the student hands in another: the record is kept, listed as not applied
    ok("review", out, "--score", "bob", "sdpa=15", "--note", NOTE)
    (subs / "bob.py").write_text((subs / "bob.py").read_text() + "\n# resubmitted\n")
    # and alice hands in a file held for review (ctypes reaches into the interpreter)
    (subs / "alice.py").write_text((subs / "alice.py").read_text() + "\nimport ctypes\n")
    rerun = ok(*grade)
    assert "bob: scores set by hand (sdpa) on files sha256" in rerun and "not applied" in rerun
    assert results_of(out, "bob")["score"] == 70
    assert "not applied" in ok("review", out)
    assert "bob" in json.loads((out / "records" / "scores.json").read_text())

    # a grade held for review stays held: its score is the review's to decide first
    held = autograder("review", out, "--score", "alice", "sdpa=10", "--note", "partial credit")
    assert held.returncode == 2 and held.stdout.strip() == (
        "its grade is held for review: release or confirm it first (review --release | --confirm)")
    assert results_of(out, "alice")["extra_data"]["status"] == "held"
    ok("review", out, "--release", "alice", "--note", "ctypes imported, never used")
    ok("review", out, "--score", "alice", "sdpa=10", "--note", "partial credit")
    alice = results_of(out, "alice")
    assert (alice["score"], alice["extra_data"]["held"]["decision"]) == (80, "release")
