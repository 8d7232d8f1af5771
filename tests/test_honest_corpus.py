"""Honest-but-unusual work (corpus/honest) keeps full marks on every code part: imports are not a
grading rule, notebook magics and shell lines cost nothing, and no honest habit is held for review.
Graded the way TAs grade: one batch over the whole corpus, and `grade` and Gradescope's runner on the
submissions that carry every habit at once. (The nbgrader regrade of a student with an added import
and a plotting cell is in tests/test_nbgrader_course.py.)"""
import csv
import importlib.util
import json
import shutil
import subprocess
import sys

import pytest

from autograder.core import rubric as rubric_file
from autograder.core.paths import REPO
from autograder.intake import notebook
from autograder.integrity.static_check import scan

HONEST = REPO / "corpus" / "honest"
OUTSIDE = REPO / "corpus" / "honest_outside"  # written by a tester who never saw the grader's rules
RUBRIC = rubric_file.load()
CODE_PARTS = list(RUBRIC.code_parts)


def _build():
    spec = importlib.util.spec_from_file_location("honest_build", HONEST / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BUILD = _build()
SUBMISSIONS = sorted(BUILD.files())


def test_the_committed_corpus_is_what_its_script_writes():
    assert BUILD.stale() == [], "run python corpus/honest/build.py"


def test_the_corpus_has_every_habit_as_a_file_and_as_a_notebook():
    assert {"stdlib_imports.py", "future_annotations.py", "dataclasses_typing.py", "unused_plotting_imports.py",
            "print_at_import.py", "main_smoke_test.py", "repr_class_name.py", "manual_seed_at_import.py",
            "stdlib_reflection.py", "set_num_threads.py",
            "all_habits.py", "nb_plot_cell.ipynb", "nb_magics.ipynb", "nb_scratch_prints.ipynb",
            "nb_all_habits.ipynb"} <= set(SUBMISSIONS)
    text = (HONEST / "nb_all_habits.ipynb").read_text()
    assert all(habit in text for habit in ("%matplotlib inline", "!nvidia-smi", "%timeit", "plt.imshow", "print("))


@pytest.mark.parametrize("name", SUBMISSIONS)
def test_no_honest_habit_is_refused_or_held_by_the_scan(name):
    path = HONEST / name
    source = notebook.extract(path).source if path.suffix == ".ipynb" else path.read_text()
    assert scan(source.encode()) == []


def test_a_cell_magic_whose_body_is_not_python_is_left_out_and_a_bound_magic_binds_none(tmp_path):
    nb = json.loads((HONEST / "nb_magics.ipynb").read_text())
    nb["cells"].append({"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                        "source": "%%writefile helper.py\ndef f(:\n"})
    nb["cells"].append({"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                        "source": "gpus = !nvidia-smi -L\ntimes = %timeit -o causal_mask(8)\ntorch.zeros?\n"})
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(nb))
    found = notebook.extract(path)
    assert "def f(:" not in found.source and "gpus = None" in found.source and "times = None" in found.source
    assert not any("left out" in note for note in found.notes), found.notes


def _full_marks_on_code_parts(data: dict) -> list:
    """The code parts of a results file that lost points (with why), and a status other than graded."""
    parts = data["extra_data"]["parts"]
    lost = [f"{p}: {parts[p]['score']}/{parts[p]['max_score']} {parts[p]['notes']}" for p in CODE_PARTS
            if parts[p]["score"] != parts[p]["max_score"]]
    status = data["extra_data"]["status"]
    return lost + ([f"status {status}: {data['output'][:500]}"] if status != "graded" else [])


@pytest.mark.parametrize("corpus", [HONEST, OUTSIDE], ids=["honest", "outside"])
def test_every_honest_submission_gets_full_marks_in_a_batch(tmp_path, corpus):
    folder, out = tmp_path / "honest", tmp_path / "grades"
    folder.mkdir()
    names = sorted(p.name for p in corpus.iterdir() if p.suffix in (".py", ".ipynb") and p.name != "build.py")
    assert len(names) >= 13
    for name in names:
        shutil.copy(corpus / name, folder / name)
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(folder), "--batch", "--out", str(out),
                           "--jobs", "2", "--suite", "all"], cwd=REPO, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = {r["submission"]: r for r in csv.DictReader((out / "grades.csv").open())}
    assert len(rows) == len(names)
    problems = {name: _full_marks_on_code_parts(json.loads((out / f"{name}.json").read_text())) for name in rows}
    assert {name: p for name, p in problems.items() if p} == {}
    assert all(r["status"] == "graded" and r["review"] == "" for r in rows.values()), rows


@pytest.mark.parametrize("name", ["all_habits.py", "nb_all_habits.ipynb"])
def test_gradescopes_runner_gives_full_marks_to_every_habit_at_once(tmp_path, name):
    """run_autograder under a fake /autograder, as Gradescope runs it on an upload."""
    from autograder.runners import gradescope
    from tests.test_gradescope import run_autograder

    bundle = gradescope.build_bundle(tmp_path / "bundle" / "autograder.zip")
    upload = "mhsa.ipynb" if name.endswith(".ipynb") else "mhsa.py"
    assert _full_marks_on_code_parts(run_autograder(bundle, tmp_path, {upload: HONEST / name})) == []


@pytest.mark.parametrize("name", ["all_habits.py", "nb_all_habits.ipynb"])
def test_grade_gives_full_marks_to_every_habit_at_once(tmp_path, name):
    results_file = tmp_path / "results.json"
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(HONEST / name), "--results",
                           str(results_file)], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert _full_marks_on_code_parts(json.loads(results_file.read_text())) == []
