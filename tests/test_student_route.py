"""Which file of a student's folder is tested and graded (autograder/intake/route.py), the same for
`check`, `pytest tests_public` and the graders; and the notebook route end to end, run the way a
student runs it, in a built student release."""
import json
import shutil
import subprocess
import sys

import pytest

from autograder.authoring import release
from autograder.core.paths import REFERENCE, REPO
from autograder.intake import notebook, route
from autograder.intake.submission import GradingError, load

STUB_MODULE = (REPO / "assignment" / "mhsa.py").read_text()
STUB_NOTEBOOK = (REPO / "assignment" / "mhsa.ipynb").read_text()


def filled_notebook() -> str:
    """The student notebook with every solution cell holding the reference's definition."""
    definitions = dict(notebook.split_module(REFERENCE.read_text())[1])
    data = json.loads(STUB_NOTEBOOK)
    for cell in data["cells"]:
        meta = cell["metadata"].get("nbgrader", {})
        if cell["cell_type"] == "code" and meta.get("solution"):
            cell["source"] = definitions[meta["grade_id"]]
    return json.dumps(data)


def folder(tmp_path, module=None, ipynb=None):
    tmp_path.mkdir(parents=True, exist_ok=True)
    if module is not None:
        (tmp_path / "mhsa.py").write_text(module)
    if ipynb is not None:
        (tmp_path / "mhsa.ipynb").write_text(ipynb)
    return tmp_path


def test_stub_is_told_from_work_by_its_syntax_tree():
    assert route.is_stub(STUB_MODULE)
    assert not route.is_stub(REFERENCE.read_text())
    assert route.is_stub(route.notebook_source(REPO / "assignment" / "mhsa.ipynb"))
    one_written = STUB_MODULE.replace('raise NotImplementedError("split_heads is not implemented yet: '
                                      "see 'split_heads' in assignment/README.md\")", "return x")
    assert one_written != STUB_MODULE and not route.is_stub(one_written)


def test_filled_notebook_is_picked_over_the_stub_and_said_so(tmp_path):
    chosen = route.pick(folder(tmp_path, STUB_MODULE, filled_notebook()))
    assert chosen.path.name == "mhsa.ipynb"
    assert "mhsa.py is still the untouched stub" in chosen.note


def test_when_both_hold_code_mhsa_py_wins_and_it_is_said(tmp_path):
    chosen = route.pick(folder(tmp_path, REFERENCE.read_text(), filled_notebook()))
    assert chosen.path.name == "mhsa.py" and chosen.knowledge == tmp_path / "knowledge.py"
    assert "mhsa.py is the one graded" in chosen.note


def test_no_note_when_there_was_no_choice(tmp_path):
    assert route.pick(folder(tmp_path / "a", REFERENCE.read_text(), STUB_NOTEBOOK)).note == ""
    assert route.pick(folder(tmp_path / "b", STUB_MODULE, STUB_NOTEBOOK)).path.name == "mhsa.py"
    with pytest.raises(GradingError, match="holds no mhsa.py"):
        route.pick(folder(tmp_path / "c"))


def test_grading_a_folder_uses_the_route_and_records_why(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    sub = load(folder(tmp_path / "sub", STUB_MODULE, filled_notebook()), work)
    assert not route.is_stub(sub.source.read_text())
    assert any("still the untouched stub" in note for note in sub.notes)


def test_gradescope_upload_of_both_says_which_was_graded(tmp_path):
    from autograder.runners import gradescope

    upload = folder(tmp_path / "submission" / "assignment", STUB_MODULE, filled_notebook()).parent
    (tmp_path / "work").mkdir()
    sub = load(gradescope.find_submission(upload), tmp_path / "work")
    assert sub.notes and "your notebook" in sub.notes[0] and "still the untouched stub" in sub.notes[0]
    both = folder(tmp_path / "both", REFERENCE.read_text(), filled_notebook())
    assert "mhsa.py is the one graded" in load(gradescope.find_submission(both), tmp_path / "work").notes[0]


def test_linked_mhsa_py_is_refused_not_skipped(tmp_path):
    work = folder(tmp_path / "sub", ipynb=filled_notebook())
    (work / "mhsa.py").symlink_to(REFERENCE)
    with pytest.raises(GradingError, match="symbolic link"):
        route.pick(work)


# ------------------------------------------------------------------------------------------------
# End to end, in a student release, as subprocesses
# ------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def notebook_student(tmp_path_factory):
    """A student release whose notebook is filled in and whose mhsa.py is the untouched stub."""
    root = release.build_release(tmp_path_factory.mktemp("route") / "student")
    (root / "assignment" / "mhsa.ipynb").write_text(filled_notebook())
    return root


def run(args, cwd):
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=900)


def test_check_grades_the_filled_notebook(notebook_student):
    result = run(["-m", "autograder", "check"], notebook_student)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "graded: your notebook assignment/mhsa.ipynb, because assignment/mhsa.py is still" in result.stdout
    assert "90.00 / 90.00 points" in result.stdout, result.stdout


@pytest.mark.parametrize("isolation", ["inprocess", "process", "sandbox"])
def test_pytest_runs_on_the_notebook_at_every_isolation_level(notebook_student, isolation):
    if isolation == "sandbox" and shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    result = run(["-m", "pytest", "tests_public", "--impl", "assignment/mhsa.ipynb", "--isolation", isolation,
                  "-q", "-x", "-k", "sdpa or heads"], notebook_student)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert " passed" in result.stdout and "failed" not in result.stdout


def test_plain_pytest_says_it_tests_the_notebook(notebook_student):
    result = run(["-m", "pytest", "tests_public", "-q", "-x", "-k", "sdpa"], notebook_student)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "graded: your notebook" in result.stdout


def test_pytest_on_the_stub_notebook_fails_with_the_stub_message(tmp_path):
    stub = folder(tmp_path, ipynb=STUB_NOTEBOOK) / "mhsa.ipynb"
    result = run(["-m", "pytest", "tests_public", "--impl", str(stub), "-q", "-x", "-k", "sdpa"], REPO)
    assert result.returncode == 1
    assert "scaled_dot_product_attention is not implemented yet: see 'scaled_dot_product_attention'" in result.stdout
