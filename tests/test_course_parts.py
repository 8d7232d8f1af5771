"""A course adds or drops a part by editing its own files, never the grader: the worked example of
docs/authoring.md, applied to a copy of the project and graded there by every route a course uses.

Adding `cross` (examples/new_part/cross_attention/): the reference gets full marks, the stub 0 in the
new part, and a version with one bug in cross_attention loses points in that part only, alike from
`grade --batch`, Gradescope's runner and nbgrader's autograde with the gradebook. Dropping `block`:
the course grades out of 15 points less and the reference still gets them all.
"""
import csv
import json
import shutil
import subprocess
import sys

import pytest

from autograder.core.paths import REPO
from tests import fresh_machine
from tests.test_nbgrader_course import cells_by_id, with_solutions

EXAMPLE = REPO / "examples" / "new_part" / "cross_attention"
ASSIGNMENT = "mhsa"
FULL_MARKS = {"sdpa": 20.0, "heads": 10.0, "masks": 15.0, "mhsa": 30.0, "block": 15.0}


def copy_project(dest):
    """The project as a fresh clone holds it (committed and new files, nothing ignored)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file() and not source.is_symlink():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def run(args, cwd, check=True, module="autograder"):
    done = subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, capture_output=True, text=True,
                          env=fresh_machine.ENV, timeout=1200)
    assert not check or done.returncode == 0, f"{args} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def add_cross_attention(root):
    """The walkthrough's steps: the function with its solution region, the part's table, its tests in
    both suites, its notebook test cells and its lesson."""
    with open(root / "reference" / "mhsa.py", "a") as reference:
        reference.write("\n\n" + (EXAMPLE / "reference_function.py").read_text().strip() + "\n")
    rubric = root / "rubric.toml"
    rubric.write_text(rubric.read_text().replace(
        "[parts.timing]\n", (EXAMPLE / "rubric_part.toml").read_text().strip() + "\n\n[parts.timing]\n", 1))
    shutil.copy(EXAMPLE / "test_public.py", root / "tests_public" / "test_cross.py")
    shutil.copy(EXAMPLE / "test_hidden.py", root / "tests_hidden" / "test_cross.py")
    shutil.copy(EXAMPLE / "notebook_tests.py", root / "course" / "notebook" / "tests" / "cross.py")
    with open(root / "course" / "notebook" / "lesson.md", "a") as lesson:
        lesson.write("\n" + (EXAMPLE / "lesson.md").read_text().strip() + "\n")


def with_buggy_cross(reference: str) -> str:
    correct = (EXAMPLE / "reference_function.py").read_text().strip()
    return reference.replace(correct, (EXAMPLE / "buggy_function.py").read_text().strip())


def drop_block(root):
    """A course without the Transformer block: its class, table, tests and notebook cells go."""
    reference = root / "reference" / "mhsa.py"
    text = reference.read_text()
    reference.write_text(text[:text.index("class TransformerBlock")].rstrip() + "\n")
    rubric = root / "rubric.toml"
    text = rubric.read_text()
    start = text.index("[parts.block]")
    rubric.write_text(text[:start] + text[text.index("[parts.timing]"):])
    for path in ("tests_public/test_block.py", "tests_hidden/test_block.py", "course/notebook/tests/block.py"):
        (root / path).unlink()
    lesson = root / "course" / "notebook" / "lesson.md"
    text = lesson.read_text()
    start = text.index("<!-- cell: TransformerBlock -->")
    following = text.find("<!-- cell:", start + 1)
    lesson.write_text(text[:start] + text[following:])


def parts_of(results) -> dict:
    """part -> (score, maximum) of every part the grade scored."""
    return {name: (part["score"], part["max_score"]) for name, part in results["extra_data"]["parts"].items()
            if part["graded"]}


def code_parts_of(results) -> dict:
    """parts_of without the knowledge check (a .py upload without knowledge.py scores it 0)."""
    return {name: scores for name, scores in parts_of(results).items() if name != "knowledge"}


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = copy_project(tmp_path_factory.mktemp("course-with-cross"))
    add_cross_attention(root)
    stale = run(["release", "--check"], root, check=False)
    assert stale.returncode == 1 and "out of date: assignment/mhsa.py" in stale.stdout, stale.stdout + stale.stderr
    run(["release", "--write"], root)
    assert "generated files match the reference" in run(["release", "--check"], root).stdout
    submissions = root / "submissions"
    for name, text in [("reference", (root / "reference" / "mhsa.py").read_text()),
                       ("stub", (root / "assignment" / "mhsa.py").read_text()),
                       ("buggy", with_buggy_cross((root / "reference" / "mhsa.py").read_text()))]:
        (submissions / name).mkdir(parents=True)
        (submissions / name / "mhsa.py").write_text(text)
    run(["grade", "--batch", str(submissions), "--out", str(root / "batch"), "--jobs", "2"], root)
    return root


def batch_results(course, student) -> dict:
    return json.loads(next((course / "batch").glob(f"{student}*.json")).read_text())


def test_the_new_part_reaches_the_stub_the_notebook_and_the_handout(course):
    assert "def cross_attention(" in (course / "assignment" / "mhsa.py").read_text()
    assert "cross_attention is not implemented yet" in (course / "assignment" / "mhsa.py").read_text()
    cells = cells_by_id(json.loads((course / "assignment" / "mhsa.ipynb").read_text()))  # ids: grade ids, "-" for "_"
    assert "cross-attention" in cells and any(name.startswith("test-cross-public") for name in cells)
    assert "| `cross` | [`cross_attention`](#cross_attention) | 10 |" in (course / "assignment" / "README.md").read_text()
    assert run(["release", str(course / "student-release")], course).returncode == 0


def test_a_batch_grades_the_new_part_and_charges_its_bug_there_only(course):
    reference, stub, buggy = (batch_results(course, s) for s in ("reference", "stub", "buggy"))
    assert code_parts_of(reference) == {**{p: (v, v) for p, v in FULL_MARKS.items()}, "cross": (10.0, 10.0)}
    assert parts_of(stub)["cross"] == (0.0, 10.0) and stub["score"] == 0
    lost = {part for part, (score, top) in code_parts_of(buggy).items() if score < top}
    assert lost == {"cross"}, parts_of(buggy)
    assert buggy["extra_data"]["max_score"] == reference["extra_data"]["max_score"]



def test_the_class_report_has_a_column_for_the_new_part(course):
    run(["report", str(course / "batch"), "--submissions", str(course / "submissions")], course)
    students = {row["student"]: row for row in csv.DictReader((course / "batch" / "report-students.csv").open())}
    cross = {name: float(students[name]["cross"]) for name in ("reference", "stub", "buggy")}
    assert cross["reference"] == 10 and cross["stub"] == 0 and 0 < cross["buggy"] < 10, cross
    assert float(students["buggy"]["mhsa"]) == 30
    assert "percent of 105" in students["buggy"], "the course's maximum: 110 with cross, less timing's 5 without CUDA"


def test_gradescope_gives_the_same_grades(course, tmp_path):
    """After its due date (as the batch grades collected work), so that the knowledge check counts alike."""
    for student in ("reference", "buggy"):
        kept = tmp_path / student
        run(["gradescope", "--try", str(course / "submissions" / student / "mhsa.py"), "--due", "2026-01-01",
             "--keep", str(kept)], course)
        results = json.loads(next(kept.rglob("results.json")).read_text())
        batch = batch_results(course, student)
        assert (results["score"], results["extra_data"]["max_score"], parts_of(results)) == \
            (batch["score"], batch["extra_data"]["max_score"], parts_of(batch)), student


def test_nbgrader_grades_the_new_part_from_the_notebook(course):
    root = course / "course"
    run(["generate_assignment", ASSIGNMENT], root, module="nbgrader")
    release = (root / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text()
    source = (root / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text()
    written = {"full": with_solutions(release, source)}
    buggy = with_solutions(release, source)
    cell = cells_by_id(buggy)["cross-attention"]
    correct = (EXAMPLE / "reference_function.py").read_text().strip()
    assert "".join(cell["source"]).strip().startswith("def cross_attention")
    cell["source"] = with_buggy_cross(correct)  # the solution cell holds the function as the reference does
    written["buggycross"] = buggy
    for student, nb in written.items():
        folder = root / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        (folder / f"{ASSIGNMENT}.ipynb").write_text(json.dumps(nb))
        (folder / "timestamp.txt").write_text("2026-12-01 10:00:00.000000 UTC")
    run(["autograde", ASSIGNMENT], root, module="nbgrader")
    run(["gradebook", "--course", str(root), "--jobs", "2", "--csv", str(root / "report.csv")], course)
    rows = {row["student"]: row for row in csv.DictReader((root / "report.csv").open())}
    for side in ("in_kernel", "isolated"):  # nbgrader's own grade and the grader's isolated one
        assert float(rows["full"][f"cross_{side}"]) == 10.0, rows["full"]
        assert float(rows["buggycross"][f"cross_{side}"]) < 10.0, rows["buggycross"]
        assert float(rows["buggycross"][f"mhsa_{side}"]) == 30.0, rows["buggycross"]


def test_a_course_without_the_block_grades_out_of_fewer_points(tmp_path):
    root = copy_project(tmp_path / "course-without-block")
    drop_block(root)
    run(["release", "--write"], root)
    assert "TransformerBlock" not in (root / "assignment" / "mhsa.py").read_text()
    graded = tmp_path / "results.json"
    run(["grade", str(root / "reference" / "mhsa.py"), "--results", str(graded)], root)
    results = json.loads(graded.read_text())
    assert code_parts_of(results) == {p: (v, v) for p, v in FULL_MARKS.items() if p != "block"}


def test_a_part_left_half_added_is_named_before_anything_is_built(tmp_path):
    """Each file a new part needs, when missing, stops `release` with the file to write."""
    root = copy_project(tmp_path / "half-added")
    add_cross_attention(root)
    (root / "tests_hidden" / "test_cross.py").unlink()
    (root / "tests_public" / "test_cross.py").unlink()
    (root / "course" / "notebook" / "tests" / "cross.py").unlink()
    refused = run(["release", "--write"], root, check=False)
    assert refused.returncode == 1
    assert "[parts.cross] has no tests" in refused.stderr and "course/notebook/tests/cross.py" in refused.stderr
    rubric = root / "rubric.toml"
    rubric.write_text(rubric.read_text().replace('functions = ["cross_attention"]', 'functions = ["cross_atention"]'))
    refused = run(["release", "--check"], root, check=False)
    assert "grades cross_atention, which reference/mhsa.py does not define" in refused.stderr
    assert "cross_attention has a solution region, but no part of rubric.toml grades it" in refused.stderr
