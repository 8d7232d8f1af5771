"""A course simulation with the real nbgrader, the way an instructor runs it (docs/nbgrader.md): a
class of generated notebooks downloaded from Canvas as one zip goes through `nbgrader zip_collect`,
`nbgrader autograde`, manual grades entered as the formgrader enters them, `python -m autograder
gradebook --write`, a one-student regrade, `nbgrader generate_feedback` and `nbgrader export`.
Every exported grade must equal the grade written below, and no honest student may lose a point to
the isolated regrade."""
import csv
import json
import re
import shutil
import subprocess
import sys
import zipfile

import pytest
from nbgrader.api import Gradebook

from autograder.core.rubric import REPO
from autograder.intake import knowledge, notebook
from tests import fresh_machine

A = notebook.ASSIGNMENT
DUE, LATE = "2026-01-10 17:00:00 UTC", "2026-01-12 09:30:00 UTC"
# Canvas user ids; the file each student uploaded, as the LMS download names it.
FULL, PARTIAL, SYNTAX, HELPER, LATE_STUDENT, WRONG_ANSWERS = "1001", "1002", "1003", "1004", "1005", "1006"
EMPTIER, SPY, MISNAMED, EMPTY, UNTOUCHED, MAGICS = "1007", "1008", "1009", "1010", "1011", "1012"
PLOTTER = "1013"  # an added import and an added plotting cell: imports are not a grading rule
MASK_AFTER = "1014"   # honest, with a bug: her attention masks after the softmax
TEST_EDITOR = "1015"  # a full solution, and a line of a test cell taken out
TAMPERERS = {EMPTIER, SPY, TEST_EDITOR}
# Flagged on evidence only (autograder/integrity/kernel_evidence.py). Partial work is not evidence: the late
# student's merge_heads cells pass in the kernel (heads 5) while the isolated suite's split-merge
# round trips fail with her split_heads (heads 3.33), and she is not flagged.
FLAGGED = TAMPERERS
NOTEBOOK_PARTS = ("sdpa", "heads", "masks", "mhsa", "block", "knowledge")
HONEST = {FULL, PARTIAL, SYNTAX, HELPER, LATE_STUDENT, WRONG_ANSWERS, MISNAMED, EMPTY, UNTOUCHED, MAGICS, PLOTTER,
          MASK_AFTER}
UPLOADED = {MISNAMED: "mhsa (1).ipynb"}
# Manual grades a TA enters in the formgrader: the written answers of one student, and an override
# of one test cell of a tamperer (which --write must keep).
MANUAL = {(FULL, "written_w1"): 1.0, (FULL, "written_w2"): 0.5, (EMPTIER, "test_sdpa_public_1"): 3.0}

# The grade each student must end with in `nbgrader export` (score, after the late penalty).
EXPECTED = {
    FULL: 96.5,           # 95 autograded + the written answers' 1.5
    PARTIAL: 50.0,        # no MultiHeadSelfAttention or TransformerBlock: sdpa, heads, masks, knowledge
    SYNTAX: 80.0,         # only TransformerBlock, whose cell does not compile, fails
    HELPER: 95.0,         # a helper in a cell she added, used by her solution
    LATE_STUDENT: 0.0,    # late, and the course's penalty is "zero" (on her in-kernel grade, which stands)
    WRONG_ANSWERS: 90.0,  # every knowledge answer wrong
    EMPTIER: 3.0,         # empties every later cell: isolated 0, plus the TA's override of one cell
    SPY: None,            # redefines a test helper to pass anything: its isolated grade (set below)
    MISNAMED: 95.0,       # uploaded "mhsa (1).ipynb": collected as mhsa.ipynb all the same
    EMPTY: 0.0,           # an empty file
    UNTOUCHED: 0.0,       # the release as it was
    MAGICS: 95.0,         # full solution with a %magic and a !shell cell
    PLOTTER: 95.0,        # full solution, `import time` and a matplotlib cell: the in-kernel grade stands
    MASK_AFTER: None,     # her in-kernel grade, which stands (set below)
    TEST_EDITOR: 95.0,    # nbgrader restores the test cell; flagged, her isolated grade is full marks too
}


def run(args, cwd, check=True):
    result = subprocess.run([sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True, env=fresh_machine.ENV,
                            timeout=1800)
    assert not check or result.returncode == 0, f"{args} failed:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
    return result


def cells_by_id(nb):
    return {c["id"]: c for c in nb["cells"]}


def with_solutions(release, source, functions=None):
    """The release with the source notebook's solution cells (all, or those of `functions`) and
    every knowledge answer set to the key's."""
    nb, solutions, key = json.loads(release), cells_by_id(json.loads(source)), knowledge.load_key()
    for cell in nb["cells"]:
        meta = cell["metadata"].get("nbgrader", {})
        if meta.get("solution") and cell["cell_type"] == "code" and (functions is None or meta["grade_id"] in functions):
            cell["source"] = solutions[cell["id"]]["source"]
        match = re.fullmatch(r"(Q\d+)_ANSWER = None", "".join(cell["source"]))
        if match:
            cell["source"] = f"{match[1]}_ANSWER = {key[match[1]]!r}"
    return nb


def edit(nb, cell_id, old, new):
    cell = cells_by_id(nb)[cell_id]
    text = "".join(cell["source"])
    assert old in text, (cell_id, old)
    cell["source"] = text.replace(old, new)


def insert_after(nb, cell_id, source):
    index = next(i for i, c in enumerate(nb["cells"]) if c["id"] == cell_id)
    nb["cells"].insert(index + 1, {"cell_type": "code", "execution_count": None, "id": f"mine-{index}",
                                   "metadata": {}, "outputs": [], "source": source})


def class_notebooks(release, source) -> dict:
    """student -> the bytes of the notebook they uploaded."""
    full = lambda: with_solutions(release, source)  # noqa: E731
    nbs = {s: full() for s in (FULL, SYNTAX, HELPER, LATE_STUDENT, WRONG_ANSWERS, MISNAMED, MAGICS, PLOTTER,
                               MASK_AFTER, TEST_EDITOR)}
    edit(nbs[MASK_AFTER], "scaled-dot-product-attention",
         "    if attn_mask is not None:\n        scores = scores + to_additive_mask(attn_mask, scores.dtype)\n"
         "    weights = torch.softmax(scores, dim=-1)",
         "    weights = torch.softmax(scores, dim=-1)\n    if attn_mask is not None:\n"
         "        weights = weights * (to_additive_mask(attn_mask, scores.dtype) == 0)")
    edit(nbs[TEST_EDITOR], "test-sdpa-public-1", '_expect_close(weights.sum(-1), torch.ones(2, 5), "row sums of the weights")',
         "pass")
    nbs[PARTIAL] = with_solutions(release, source, {"to_additive_mask", "scaled_dot_product_attention", "split_heads",
                                                    "merge_heads", "causal_mask", "padding_mask", "merge_masks"})
    edit(nbs[SYNTAX], "TransformerBlock", "def forward(self", "def forward(self,, ")
    edit(nbs[HELPER], "scaled-dot-product-attention", "q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))",
         "scaled_scores(q, k)")
    insert_after(nbs[HELPER], "lesson-scaled-dot-product-attention",
                 "def scaled_scores(q, k):\n    return q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))")
    edit(nbs[LATE_STUDENT], "split-heads", "x.reshape(B, L, num_heads, d_model // num_heads).transpose(1, 2)",
         "x.reshape(B, num_heads, L, d_model // num_heads)")
    for cell in nbs[WRONG_ANSWERS]["cells"]:
        if re.fullmatch(r"Q\d+_ANSWER = .*", "".join(cell["source"])):
            cell["source"] = re.sub(r"= .*", "= 'z'", "".join(cell["source"]))
    insert_after(nbs[MAGICS], "imports", "%matplotlib inline\n!echo listing\nimport numpy as np")
    insert_after(nbs[PLOTTER], "TransformerBlock",
                 "import matplotlib.pyplot as plt\n\nlayer = MultiHeadSelfAttention(16, 4)\n"
                 "out, weights = layer(torch.randn(1, 6, 16), need_weights=True)\n"
                 "plt.imshow(weights[0, 0].detach())\nplt.show()")
    insert_after(nbs[PLOTTER], "imports", "import time")
    nbs[EMPTIER] = json.loads(release)
    insert_after(nbs[EMPTIER], "test-helpers", "get_ipython().input_transformers_cleanup.append(lambda lines: [])")
    nbs[SPY] = with_solutions(release, source)
    edit(nbs[SPY], "scaled-dot-product-attention", " / math.sqrt(q.size(-1))", "")
    insert_after(nbs[SPY], "test-helpers", "def _expect_close(actual, expected, what, atol=1e-5, rtol=1e-4):\n    pass")
    nbs[UNTOUCHED] = json.loads(release)
    uploads = {s: json.dumps(nb).encode() for s, nb in nbs.items()}
    uploads[EMPTY] = b""
    return uploads


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """The whole term, run once; each test then checks one thing that came out of it."""
    repo = tmp_path_factory.mktemp("nbgrader-course")
    (repo / "autograder").symlink_to(REPO / "autograder")
    root = repo / "course"
    shutil.copytree(REPO / "course", root, ignore=shutil.ignore_patterns(
        "release", "submitted", "autograded", "feedback", "downloaded", "isolated", "gradebook.db", "__pycache__",
        ".ipynb_checkpoints"))
    with open(root / "nbgrader_config.py", "a") as config:
        config.write('\nc.LateSubmissionPlugin.penalty_method = "zero"\n')
    run(["nbgrader", "generate_assignment", A], root)
    run(["nbgrader", "db", "assignment", "add", A, f"--duedate={DUE}"], root)
    release = (root / "release" / A / f"{A}.ipynb").read_text()
    source = (root / "source" / A / f"{A}.ipynb").read_text()
    archive = root / "downloaded" / A / "archive"
    archive.mkdir(parents=True)
    with zipfile.ZipFile(archive / "submissions.zip", "w") as lms:
        for student, content in class_notebooks(release, source).items():
            late = "LATE_" if student == LATE_STUDENT else ""
            lms.writestr(f"student{student}_{late}{student}_{int(student) * 7}_{UPLOADED.get(student, 'mhsa.ipynb')}",
                         content)
    run(["nbgrader", "zip_collect", A], root)
    # Canvas's file names carry no time: the LMS's list of submission times gives the late one.
    (root / "submitted" / LATE_STUDENT / A / "timestamp.txt").write_text(LATE)
    run(["nbgrader", "autograde", A], root, check=False)  # the empty file fails; every other notebook is graded
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:  # what the formgrader does with a TA's grade
        for (student, cell), score in MANUAL.items():
            grade = gb.find_grade(cell, A, A, student)
            grade.manual_score, grade.needs_manual_grade = score, False
        gb.db.commit()
    state = {"root": root, "kernel": snapshot(root)}
    state["report"] = run(["autograder", "gradebook", "--course", str(root), "--jobs", "2", "--csv",
                           str(root / "report.csv")], REPO, check=False)
    state["write"] = run(["autograder", "gradebook", "--course", str(root), "--write"], REPO, check=False)
    state["written"] = snapshot(root)
    run(["nbgrader", "export", "--to", "before-regrade.csv"], root)
    run(["nbgrader", "autograde", A, "--student", EMPTIER, "--force"], root)
    state["regraded"] = snapshot(root)
    state["rewrite"] = run(["autograder", "gradebook", "--course", str(root), "--student", EMPTIER, "--write"],
                           REPO, check=False)
    state["after"] = snapshot(root)
    run(["nbgrader", "generate_feedback", A], root)
    run(["nbgrader", "export", "--to", "grades.csv"], root)
    return state


def snapshot(root) -> dict:
    """student -> grade id -> (auto score, manual score, needs manual grade)."""
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        return {s.student.id: {g.name: (g.auto_score, g.manual_score, g.needs_manual_grade)
                               for g in gb.find_submission_notebook(A, A, s.student.id).grades}
                for s in gb.find_assignment(A).submissions}


def flagged_in_nbgrader(root) -> set:
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        return {s.student.id for s in gb.find_assignment(A).submissions
                if gb.find_submission_notebook(A, A, s.student.id).flagged}


def exported(root, name="grades.csv") -> dict:
    with open(root / name) as f:
        return {row["student_id"]: row for row in csv.DictReader(f)}


def isolated_results(root, student) -> dict:
    return json.loads((root / "isolated" / A / f"{student}.json").read_text())


def test_zip_collect_files_every_notebook_under_its_student(course):
    root = course["root"]
    collected = sorted(p.relative_to(root / "submitted").as_posix() for p in (root / "submitted").rglob("*.ipynb"))
    assert collected == sorted(f"{s}/{A}/{A}.ipynb" for s in EXPECTED)  # "mhsa (1).ipynb" included


def test_report_flags_the_tamperers_and_reports_the_empty_file_without_stopping(course):
    report = course["report"]
    assert report.returncode == 5, report.stdout + report.stderr[-3000:]  # 1 flagged | 4 failed
    with open(course["root"] / "report.csv") as f:
        rows = {row["student"]: row for row in csv.DictReader(f)}
    assert {s for s, row in rows.items() if row["status"] == "flagged"} == FLAGGED
    assert {s for s, row in rows.items() if row["status"] == "failed"} == {EMPTY}
    assert "not a notebook" in rows[EMPTY]["error"]
    assert "TransformerBlock" in rows[SYNTAX]["notes"] and "left out" in rows[SYNTAX]["notes"]
    assert "%matplotlib inline" in rows[MAGICS]["notes"] and "!echo listing" in rows[MAGICS]["notes"]
    for student in (FULL, HELPER, SYNTAX, MISNAMED, MAGICS, PLOTTER):  # the isolated grade agrees with the kernel
        assert float(rows[student]["isolated"]) == float(rows[student]["in_kernel"]), student
    assert "grading" not in course["write"].stderr  # --write reuses the report's isolated grades
    # the reruns' workers were forked from a template, whose own lines stay off the terminal
    assert "worker template" not in report.stdout + report.stderr


def test_flags_reach_nbgrader_and_the_results_files(course):
    assert flagged_in_nbgrader(course["root"]) == FLAGGED
    for student in set(EXPECTED) - {EMPTY}:
        flags = isolated_results(course["root"], student)["extra_data"]["flags"]
        assert isinstance(flags, list) and all(isinstance(f, str) for f in flags)
        assert bool(flags) == (student in FLAGGED), (student, flags)


def test_every_exported_grade_is_the_expected_one(course):
    grades = exported(course["root"])
    spy = isolated_results(course["root"], SPY)["extra_data"]["parts"]
    kernel = {s: sum(auto or 0 for auto, _, _ in course["kernel"][s].values()) for s in (MASK_AFTER, LATE_STUDENT)}
    expected = EXPECTED | {SPY: round(sum(spy[p]["score"] for p in NOTEBOOK_PARTS), 4), MASK_AFTER: round(kernel[MASK_AFTER], 4)}
    assert expected[SPY] < 95 and 50 < expected[MASK_AFTER] < 95
    assert {s: round(float(row["score"]), 4) for s, row in grades.items()} == expected
    assert float(grades[LATE_STUDENT]["raw_score"]) == pytest.approx(kernel[LATE_STUDENT])
    assert float(grades[LATE_STUDENT]["late_submission_penalty"]) == float(grades[LATE_STUDENT]["raw_score"])
    assert 0 < float(grades[LATE_STUDENT]["raw_score"]) < 95  # her split-heads bug costs the parts that call it, in the kernel


def test_the_flags_are_evidence_in_neutral_words(course):
    flags = {s: isolated_results(course["root"], s)["extra_data"]["flags"] for s in TAMPERERS}
    assert any("test cell test_sdpa_public_1 differs from the released one" == f for f in flags[TEST_EDITOR])
    for student in (EMPTIER, SPY):  # cells emptied, a helper redefined: the same cells fail outside the kernel
        assert any(f.startswith("test cell test_sdpa_") and "passed in the kernel and fails when the same cells run "
                   "again in the grader's worker" in f for f in flags[student]), flags[student]
    assert not any("tamper" in f for fs in flags.values() for f in fs)


def test_no_honest_student_loses_a_point_to_the_regrade(course):
    grades = exported(course["root"])
    for student in HONEST:
        cells = course["kernel"][student]
        graded = sum(manual if manual is not None else auto or 0 for auto, manual, _ in cells.values())
        assert float(grades[student]["raw_score"]) >= graded - 1e-6, student
        if student not in FLAGGED:
            assert course["written"][student] == cells, student  # not one cell touched


def test_manual_grades_survive_the_write_and_the_regrade(course):
    for snap in ("written", "regraded", "after"):
        for (student, cell), score in MANUAL.items():
            assert course[snap][student][cell][1] == score, (snap, student, cell)


def test_a_one_student_regrade_leaves_the_others_and_needs_no_manual_grading(course):
    regraded, after = course["regraded"][EMPTIER], course["after"][EMPTIER]
    written = course["written"][EMPTIER]
    for cell, (auto, manual, needs) in written.items():  # the regrade and the rewrite restore the stored state;
        if (EMPTIER, cell) in MANUAL:  # nbgrader asks a TA to review their own grade again: by design
            needs = after[cell][2]
        assert after[cell] == (auto, manual, needs), cell
    ours = [c for c, (_, manual, _) in written.items() if manual is not None and (EMPTIER, c) not in MANUAL]
    assert ours and all(regraded[c][2] for c in ours)  # nbgrader marks what has a manual score ...
    assert not any(after[c][2] for c in ours)  # ... and the rewrite clears it: no cell waits for a grader
    assert course["rewrite"].returncode == 1  # the student is still flagged
    before, now = exported(course["root"], "before-regrade.csv"), exported(course["root"])
    assert {s: r for s, r in before.items() if s != EMPTIER} == {s: r for s, r in now.items() if s != EMPTIER}
    assert {s: c for s, c in course["after"].items() if s != EMPTIER} == \
        {s: c for s, c in course["written"].items() if s != EMPTIER}


def test_feedback_gives_the_isolated_reason_for_each_changed_cell(course):
    def page(student):
        return (course["root"] / "feedback" / student / A / f"{A}.html").read_text()

    changed = [c for c, (_, manual, _) in course["written"][EMPTIER].items()
               if manual is not None and (EMPTIER, c) not in MANUAL]
    assert page(EMPTIER).count("Score from the isolated regrade") == len(changed) > 20
    assert "Score from the isolated regrade" not in page(FULL)


def test_the_minimum_policy_and_the_late_penalty_follow_the_stored_scores(course):
    """`--policy minimum` on the late student keeps the lower score of each part (her heads part from
    isolation, the rest from the kernel), nbgrader's own late policy ("zero") is applied to it; the
    default policy then puts her in-kernel grade back (she is not flagged)."""
    root = course["root"]
    result = run(["autograder", "gradebook", "--course", str(root), "--student", LATE_STUDENT, "--write",
                  "--policy", "minimum"], REPO, check=False)
    assert result.returncode == 0, result.stdout  # not flagged: partial work is not evidence
    assert "grading" not in result.stderr  # the cached isolated grade, not a new one
    run(["nbgrader", "export", "--to", "minimum.csv"], root)
    row = exported(root, "minimum.csv")[LATE_STUDENT]
    extra = isolated_results(root, LATE_STUDENT)["extra_data"]
    lower = sum(min(extra["in_kernel"][p], extra["parts"][p]["score"]) for p in NOTEBOOK_PARTS)
    assert float(row["raw_score"]) == pytest.approx(lower) and lower < sum(extra["in_kernel"].values())
    assert float(row["late_submission_penalty"]) == float(row["raw_score"]) and float(row["score"]) == 0
    run(["autograder", "gradebook", "--course", str(root), "--student", LATE_STUDENT, "--write"], REPO, check=False)
    assert snapshot(root)[LATE_STUDENT] == course["written"][LATE_STUDENT]


def test_a_batch_gives_a_collected_notebook_the_gradebooks_score_and_maximum(course, tmp_path):
    """The same notebook by two routes: the gradebook's isolated grade and `grade --batch` on the
    collected file (no due date anywhere: both grade collected work, knowledge check included)."""
    subs = tmp_path / "subs"
    subs.mkdir()
    for student in (FULL, WRONG_ANSWERS):
        shutil.copyfile(course["root"] / "submitted" / student / A / f"{A}.ipynb", subs / f"{student}.ipynb")
    run(["autograder", "grade", str(subs), "--batch", "--out", str(tmp_path / "out"), "--jobs", "2"], REPO)
    for student in (FULL, WRONG_ANSWERS):
        batch = json.loads((tmp_path / "out" / f"{student}.json").read_text())
        isolated = isolated_results(course["root"], student)
        assert (batch["score"], batch["extra_data"]["max_score"]) == \
            (isolated["score"], isolated["extra_data"]["max_score"]), student
        assert batch["extra_data"]["parts"]["knowledge"]["graded"], "collected work: the knowledge check is scored"


def test_the_pass_grades_each_notebook_nbgrader_graded_and_no_other(course, tmp_path):
    """The slots grade the notebooks on disk while nbgrader's database is read; the database decides:
    a notebook submitted after autograde gets no isolated grade, and one whose autograde folder is
    gone is graded all the same."""
    (tmp_path / "autograder").symlink_to(REPO / "autograder")
    root = tmp_path / "course"
    shutil.copytree(course["root"], root)
    shutil.copytree(root / "submitted" / FULL, root / "submitted" / "1099")  # submitted after autograde
    shutil.rmtree(root / "autograded" / PARTIAL)  # autograde's folder gone, its grades kept in the database
    report = run(["autograder", "gradebook", "--course", str(root), "--student", "1099", "--student", PARTIAL,
                  "--csv", str(tmp_path / "report.csv")], REPO, check=False)
    assert report.returncode == 4, report.stdout + report.stderr[-3000:]  # 1099 failed
    with open(tmp_path / "report.csv") as f:
        rows = {row["student"]: row for row in csv.DictReader(f)}
    assert rows["1099"]["status"] == "failed" and "not autograded" in rows["1099"]["error"]
    assert not rows["1099"]["isolated"], rows["1099"]
    with open(course["root"] / "report.csv") as f:
        before = {row["student"]: row for row in csv.DictReader(f)}[PARTIAL]
    assert rows[PARTIAL]["status"] == "ok" and rows[PARTIAL]["isolated"] == before["isolated"] != "", rows[PARTIAL]


def test_a_pass_from_the_cache_reports_the_same_without_torch_or_the_iri_grammars(course, tmp_path):
    """Every grade and rerun cached (the fixture's passes): the report is the cold pass's, and the
    gradebook's own process imports neither torch (only a rerun needs it) nor the IRI format checker
    jsonschema would build at import (autograder/cli/__init__.py): seconds of one core each time an
    instructor reads the report again."""
    (tmp_path / "autograder").symlink_to(REPO / "autograder")
    root = tmp_path / "course"
    shutil.copytree(course["root"], root)
    # the command as `python -m autograder` runs it, then the names of the modules its process loaded
    command = ("import sys\nfrom autograder.cli import main\ncode = main(sys.argv[1:])\n"
               "print('loaded:', *(name for name, module in sys.modules.items() if module is not None), file=sys.stderr)\n"
               "raise SystemExit(code)")
    again = subprocess.run([sys.executable, "-c", command, "gradebook", "--course", str(root), "--csv",
                            str(tmp_path / "report.csv")], cwd=REPO, capture_output=True, text=True,
                           env=fresh_machine.ENV, timeout=600)
    assert again.returncode == course["report"].returncode, again.stdout + again.stderr[-3000:]
    assert "grading" not in again.stderr
    loaded = set(again.stderr.splitlines()[-1].split()[1:])
    assert {"nbgrader.api", "jsonschema"} <= loaded  # what the pass needs, loaded by this very probe
    assert not loaded & {"torch", "rfc3987_syntax"}, sorted(loaded & {"torch", "rfc3987_syntax"})

    def rows(path):
        with open(path) as f:
            return {row["student"]: row for row in csv.DictReader(f)}

    assert rows(tmp_path / "report.csv") == rows(course["root"] / "report.csv")
