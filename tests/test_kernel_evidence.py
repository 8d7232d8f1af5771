"""What `gradebook` flags a notebook for (autograder/integrity/kernel_evidence.py): evidence only. The notebook's
cells against the released ones, and its test cells run again in the grader's worker; the course
simulation (tests/test_nbgrader_course.py) runs the same through the real nbgrader."""
import copy
import json

import pytest

from autograder.core import rubric as rubric_file
from autograder.core.paths import REPO
from autograder.intake import cell_names, notebook
from autograder.integrity import kernel_evidence
from autograder.isolation.host.levels import resolve
from autograder.testing.backends import WorkerBackend

SOURCE = json.loads((REPO / notebook.SOURCE_NOTEBOOK).read_text())    # the solution, hidden tests in place
STUDENT = json.loads((REPO / notebook.STUDENT_NOTEBOOK).read_text())  # what nbgrader releases


def _code_cells(nb, keep):
    found = {}
    for cell in nb["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell["cell_type"] == "code" and meta.get("grade_id") and keep(meta):
            found[meta["grade_id"]] = "".join(cell["source"])
    return found


RECORDED = _code_cells(SOURCE, lambda m: m.get("locked") or m.get("grade"))
RELEASED = kernel_evidence.Released({k: notebook.without_hidden_tests(v) for k, v in RECORDED.items()}, RECORDED,
                                    frozenset(_code_cells(SOURCE, lambda m: m.get("grade"))),
                                    notebook.lesson_only_cells(REPO / notebook.SOURCE_NOTEBOOK))


def solved():
    """The released notebook with the solution's cells: what an honest student hands in."""
    nb = copy.deepcopy(STUDENT)
    solutions = {c["id"]: c["source"] for c in SOURCE["cells"]}
    for cell in nb["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("solution") and cell["cell_type"] == "code":
            cell["source"] = solutions[cell["id"]]
    return nb


def write(tmp_path, nb):
    path = tmp_path / "mhsa.ipynb"
    path.write_text(json.dumps(nb))
    return path


def insert_after(nb, cell_id, source):
    index = next(i for i, c in enumerate(nb["cells"]) if c["id"] == cell_id)
    nb["cells"].insert(index + 1, {"cell_type": "code", "id": f"mine-{index}", "metadata": {}, "outputs": [],
                                   "execution_count": None, "source": source})


def rerun(tmp_path, nb, seed=0, released=RELEASED) -> dict:
    rubric = rubric_file.load()
    isolation = resolve("auto")
    return kernel_evidence.rerun(write(tmp_path, nb), released,
                                 lambda p: WorkerBackend(p, isolation, rubric.limits, list(rubric.hidden)), seed)


def program(tmp_path, nb) -> str:
    return notebook.rerun_program(write(tmp_path, nb), RELEASED.recorded, set(RELEASED.tests), "mhsa.ipynb", 0,
                                  RELEASED.lesson_only)


LEFT_OUT = "'attention_plot': a lesson-only cell, left out"


def test_the_released_notebook_itself_shows_no_changed_cell(tmp_path):
    assert kernel_evidence.changed_cells(write(tmp_path, STUDENT), RELEASED) == []
    assert kernel_evidence.changed_cells(write(tmp_path, solved()), RELEASED) == []
    # the instructor's own notebook, hidden tests in its test cells: what autograde runs, not a change
    assert kernel_evidence.changed_cells(write(tmp_path, SOURCE), RELEASED) == []


def test_a_changed_or_removed_test_cell_is_evidence_and_dropped_metadata_is_not(tmp_path):
    edited = solved()
    cell = next(c for c in edited["cells"] if c["id"] == "test-sdpa-public-1")
    cell["source"] = "".join(cell["source"]).replace("_quick_check_passed(", "print(")
    edited["cells"] = [c for c in edited["cells"] if c["id"] != "test-heads-public-1"]
    found = kernel_evidence.changed_cells(write(tmp_path, edited), RELEASED)
    assert found == ["test cell test_sdpa_public_1 differs from the released one",
                     "test cell test_heads_public_1 is not in the notebook"]
    stripped = solved()  # an editor that drops nbgrader's metadata keeps the cells themselves
    for c in stripped["cells"]:
        c["metadata"] = {}
    assert kernel_evidence.changed_cells(write(tmp_path, stripped), RELEASED) == []


def test_an_honest_notebook_passes_every_code_test_cell_again_and_its_kernel_hooks_do_nothing(tmp_path):
    nb = solved()
    insert_after(nb, "imports", "%matplotlib inline\nget_ipython().run_line_magic('precision', '3')\n"
                                "display('hello')")
    outcomes = rerun(tmp_path, nb)
    code_tests = {g for g in RELEASED.tests if not g.startswith("test_knowledge")}
    assert code_tests and all(outcomes[g] for g in code_tests), [g for g in code_tests if not outcomes[g]]


@pytest.mark.parametrize("tamper", [
    "def _expect_close(actual, expected, what, atol=1e-5, rtol=1e-4):\n    pass",  # a helper that passes anything
    "get_ipython().input_transformers_cleanup.append(lambda lines: [])",          # every later cell emptied
], ids=["helper-redefined", "cells-emptied"])
def test_tampering_that_fools_the_kernel_fails_the_same_cells_outside_it(tmp_path, tamper):
    nb = copy.deepcopy(STUDENT)  # the stubs: nothing written, every test cell must fail
    insert_after(nb, "test-helpers", tamper)
    outcomes = rerun(tmp_path, nb)
    assert not any(outcomes.values()), outcomes
    kernel = {g: (1.0, 1.0) for g in RELEASED.tests}  # what the fooled kernel gave: every cell passed
    found = kernel_evidence.rerun_evidence(kernel, [outcomes, outcomes])
    assert len(found) == len(RELEASED.tests)
    assert "test cell test_sdpa_public_1 passed in the kernel and fails when the same cells run again" in " ".join(found)


def test_a_cell_counts_only_when_it_failed_in_every_rerun_and_passed_in_the_kernel():
    kernel = {"test_a": (2.0, 2.0), "test_b": (2.0, 2.0), "test_c": (0.0, 2.0)}
    reruns = [{"test_a": False, "test_b": False, "test_c": False}, {"test_a": False, "test_b": True, "test_c": False}]
    found = kernel_evidence.rerun_evidence(kernel, reruns)
    assert len(found) == 1 and found[0].startswith("test cell test_a passed in the kernel")
    assert kernel_evidence.rerun_evidence(kernel, []) == []


def test_the_lesson_only_demonstration_is_left_out_of_a_rerun_and_every_outcome_stays_the_same(tmp_path):
    assert RELEASED.lesson_only == {"attention_plot"}  # the training demo, tagged in the generated notebook
    assert LEFT_OUT in program(tmp_path, solved())
    every_cell_run = kernel_evidence.Released(RELEASED.notebook, RELEASED.recorded, RELEASED.tests)
    assert rerun(tmp_path, solved()) == rerun(tmp_path, solved(), released=every_cell_run)


@pytest.mark.parametrize("later", [
    "print(model.attention)",                    # the student looks at the demo's trained model
    "steps_taken = globals()['steps']",           # a name reached through its string
    "def report():\n    return MASK.shape\nreport()",  # read inside a function of a later cell
], ids=["name", "string", "function"])
def test_a_lesson_only_cell_stays_in_the_rerun_when_a_later_cell_may_read_what_it_defines(tmp_path, later):
    nb = solved()
    insert_after(nb, "attention-plot", later)
    assert LEFT_OUT not in program(tmp_path, nb)


def test_an_import_in_a_lesson_only_cell_counts_only_when_it_rebinds_a_name_to_another_module(tmp_path):
    plot = RELEASED.recorded["attention_plot"]
    assert "import torch\n" in plot  # the demonstration imports torch again, as the imports cell did
    nb = solved()
    insert_after(nb, "imports", "import numpy as torch")  # a student's torch is not the demo's
    assert LEFT_OUT not in program(tmp_path, nb)
    lesson, before = cell_names.of("import torch\nSTEPS = 3"), [cell_names.of("import torch")]
    assert cell_names.may_leave_out(lesson, before, [cell_names.of("x = torch.zeros(1)")])
    assert not cell_names.may_leave_out(lesson, before, [cell_names.of("x = torch.zeros(STEPS)")])
    assert not cell_names.may_leave_out(lesson, [cell_names.of("import numpy as torch")],
                                        [cell_names.of("x = torch.zeros(1)")])
    unreadable = cell_names.of("%timeit torch.zeros(1)")  # a cell that does not parse may read anything
    assert unreadable.reads is cell_names.EVERYTHING and not cell_names.may_leave_out(lesson, before, [unreadable])
