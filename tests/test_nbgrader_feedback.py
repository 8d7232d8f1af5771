"""nbgrader's feedback as an instructor makes it (docs/nbgrader.md): `nbgrader autograde`, `python -m
autograder gradebook --write`, `nbgrader generate_feedback`, on tests/test_nbgrader.py's course (the
reference, the untouched release, the reference without the 1/sqrt(d_k) scale, a tamperer). The
feedback names each part's likely mistake from the isolated grade, once, under a test cell of the part,
and shows every score with two decimals, while the gradebook and `nbgrader export` keep exact scores."""
import csv
import html
import re

import pytest
from nbgrader.api import Gradebook

from autograder.core.rubric import REPO
from autograder.intake import notebook
from autograder.record import results
from autograder.runners.gradebook import results_path
from tests.test_nbgrader import course, run  # noqa: F401 - course is a fixture
from tests.test_nbgrader import test_feedback_shows_no_hidden_test_source as no_hidden_test_source  # not collected here

A = notebook.ASSIGNMENT
THIRD = 1 / 3  # a TA's grade of a written answer, with more decimals than the feedback shows
# Every score nbgrader's feedback template writes: the total, each cell in the list at the top and in
# its heading ("Score: 0.00 / 6.00"), the late penalty ("Score: -1.50").
SCORE_TEXT = re.compile(r"Score: (-?[\d.]+)(?: / ([\d.]+))?")


def gradebook_scores(root) -> dict:
    """student -> (the notebook's score, grade id -> score), exactly as the gradebook holds them."""
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        return {s.student.id: (gb.find_submission_notebook(A, A, s.student.id).score,
                               {g.name: g.score for g in gb.find_submission_notebook(A, A, s.student.id).grades})
                for s in gb.find_assignment(A).submissions}


def exported(root) -> dict:
    run(["nbgrader", "export", "--to", "grades.csv"], root)
    with open(root / "grades.csv") as f:
        return {row["student_id"]: float(row["score"]) for row in csv.DictReader(f)}


@pytest.fixture(scope="module")
def feedback(course):  # noqa: F811 - tests/test_nbgrader.py's fixture
    """The course after a TA's grade of one written answer, the isolated grade written and the feedback made."""
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:  # what the formgrader does with a TA's grade
        grade = gb.find_grade("written_w1", A, A, "buggy")
        grade.manual_score, grade.needs_manual_grade = THIRD, False
        gb.db.commit()
    written = run(["autograder", "gradebook", "--course", str(course), "--write"], REPO, check=False)
    assert written.returncode == 1 and "for review" in written.stdout, written.stdout + written.stderr[-3000:]
    state = {"root": course, "scores": gradebook_scores(course)}
    assert sorted(p.stem for p in results_path(course, A, "any").parent.glob("*.json")) == sorted(state["scores"])
    run(["nbgrader", "generate_feedback", A, "--force"], course)
    state["pages"] = {student: (course / "feedback" / student / A / f"{A}.html").read_text()
                      for student in state["scores"]}
    return state


def text_of(page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def test_the_feedback_names_the_likely_mistake_once_under_the_parts_first_failing_test_cell(feedback):
    diagnosed = {name: part.diagnosis for name, part in
                 results.load(results_path(feedback["root"], A, "buggy")).parts.items() if part.diagnosis}
    assert list(diagnosed) == ["sdpa"] and "1/sqrt(d_k)" in diagnosed["sdpa"]  # the scale it forgot
    page = feedback["pages"]["buggy"]
    line = f"{results.LIKELY_MISTAKE}{diagnosed['sdpa']}"
    assert text_of(page).count(results.LIKELY_MISTAKE) == 1 and line in text_of(page)
    # under the first test cell of sdpa that lost points: its public test, right below the function
    cells = re.split(r'<a name="(test_\w+)"></a>', page)
    under = dict(zip(cells[1::2], cells[2::2]))
    assert line in text_of(under["test_sdpa_public_1"])
    # with the isolated grade's picture of its weights beside the expected ones, as HTML tables
    assert "yours - expected" in text_of(under["test_sdpa_public_1"]) and "<table" in under["test_sdpa_public_1"]


def test_a_likely_mistake_is_shown_only_where_the_isolated_grade_names_one(feedback):
    for student, page in feedback["pages"].items():
        diagnosed = [p for p in results.load(results_path(feedback["root"], A, student)).parts.values() if p.diagnosis]
        assert (results.LIKELY_MISTAKE in text_of(page)) == bool(diagnosed), student
    assert results.LIKELY_MISTAKE not in text_of(feedback["pages"]["reference"])  # the honest notebook


def test_every_score_in_the_feedback_has_two_decimals(feedback):
    for student, page in feedback["pages"].items():
        scores = SCORE_TEXT.findall(text_of(page))  # e.g. 12.4167 or 30.0 would fail
        assert len(scores) > 60, student  # the total, and each graded cell twice (the list at the top, its heading)
        shown = [number for pair in scores for number in pair if number]
        assert [n for n in shown if not re.fullmatch(r"-?\d+\.\d\d", n)] == [], student
    total, _ = feedback["scores"]["buggy"]
    assert total == 30 + THIRD  # the in-kernel grade (heads, masks, knowledge) and the TA's third of a point
    assert "mhsa (Score: 30.33 / 97.00)" in text_of(feedback["pages"]["buggy"])
    assert "Score: 0.33 / 1.00" in text_of(feedback["pages"]["buggy"])


def test_the_gradebook_and_the_export_keep_the_exact_scores(feedback):
    root = feedback["root"]
    assert gradebook_scores(root) == feedback["scores"]  # the feedback changed no score
    grades = exported(root)
    assert grades == {student: total for student, (total, _) in feedback["scores"].items()}
    assert grades["buggy"] == 30 + THIRD  # not the 30.33 the feedback shows


def test_a_diagnosis_of_another_notebook_is_not_shown(feedback, tmp_path, monkeypatch):
    """A resubmission autograded again but not yet graded again in isolation: the results file
    graded the earlier notebook, whose mistake the new one may not have."""
    import nbformat

    monkeypatch.syspath_prepend(str(REPO / "course"))
    from mhsa_nbgrader.feedback import likely_mistakes

    root = feedback["root"]
    found = results.load(results_path(root, A, "buggy"))
    nb = nbformat.read(root / "autograded" / "buggy" / A / f"{A}.ipynb", as_version=4)
    submitted = root / "submitted" / "buggy" / A / f"{A}.ipynb"
    assert likely_mistakes(nb, found, submitted) == {"test_sdpa_public_1": found.parts["sdpa"]}
    resubmitted = tmp_path / f"{A}.ipynb"
    resubmitted.write_text(submitted.read_text() + "\n")
    assert likely_mistakes(nb, found, resubmitted) == {}
    assert likely_mistakes(nb, None, submitted) == {}


def test_the_feedback_shows_no_hidden_test_source_with_the_isolated_grade(feedback):
    no_hidden_test_source(feedback["root"])  # the pages made above, likely mistakes included
