"""The Gradescope bundle, run the way Gradescope runs it, in a temporary /autograder."""
import json
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from autograder.core import toml
from autograder.core import rubric as rubric_file
from autograder.runners import gradescope
from tests.test_imports import import_graph, modules

REPO = rubric_file.REPO
TEST_FIELDS = {"name": str, "score": (int, float), "max_score": (int, float), "output": str, "visibility": str,
               "tags": list}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return gradescope.build_bundle(tmp_path_factory.mktemp("bundle") / "autograder.zip")


def test_the_bundle_holds_the_grader_the_tests_and_the_scripts(bundle):
    with zipfile.ZipFile(bundle) as z:
        names = set(z.namelist())
        modes = {i.filename: i.external_attr >> 16 for i in z.infolist()}
        requirements = z.read("requirements.txt").decode()
    for needed in ("setup.sh", "run_autograder", "rubric.toml", "reference/mhsa.py", "autograder/pipeline/grading.py",
                   "autograder/isolation/guest/worker_main.py", "autograder/isolation/guest/reaper.py", "autograder/testing/oracles.py"):
        assert needed in names
    assert any(n.startswith("tests_hidden/test_") for n in names)
    assert modes["run_autograder"] & stat.S_IXUSR and modes["setup.sh"] & stat.S_IXUSR
    assert not any("__pycache__" in n for n in names)
    assert {line.split("==")[0].lower() for line in requirements.split()} == gradescope.core_packages()
    assert {"torch", "numpy", "pytest", "hypothesis", "tqdm"} <= gradescope.core_packages()
    assert all("==" in line for line in requirements.split()), "versions are pinned"


def code_imported_by(names: set) -> set:
    """Every autograder/ or gpu_checks/ module file that the Python files `names` (paths relative to
    the repository) import anywhere, inside functions too: the import graph tests/test_imports.py
    checks for cycles. The CLI's table of commands is not an import: it leaves out a command whose
    module is missing (autograder/cli/__init__.py), as a student's release and the bundle do."""
    packages = ("autograder", "gpu_checks")
    files = {name: path.relative_to(REPO).as_posix() for name, path in modules(REPO, packages).items()}
    graph = import_graph(REPO, packages)
    return {files[i.target] for name, file in files.items() if file in names for i in graph[name]}


def test_the_bundle_holds_every_module_its_code_imports(bundle):
    """The bundle ships a list (paths.GRADER_CODE), not the folders: what its code imports, anywhere,
    must be on it, or a grade on Gradescope fails the first time that import runs."""
    with zipfile.ZipFile(bundle) as z:
        shipped = set(z.namelist())
    missing = code_imported_by(shipped) - shipped
    assert not missing, f"imported by the bundle's code but not in paths.GRADER_CODE: {sorted(missing)}"
    unlisted = shipped - {"autograder/feedback/diagnosis/probes.py"}  # the check can fail: a module left off the list
    assert code_imported_by(unlisted) - unlisted == {"autograder/feedback/diagnosis/probes.py"}


def run_autograder(bundle, tmp_path, submission_files: dict, knowledge_due: str = "", metadata: dict | None = None) -> dict:
    """Lay out ROOT/source (the unzipped bundle), ROOT/submission and ROOT/results, run
    ROOT/source/run_autograder as Gradescope would, and return results.json. `knowledge_due`: a
    TOML date for the rubric's [parts.knowledge] due; `metadata`: ROOT/submission_metadata.json."""
    root = gradescope.lay_out(bundle, tmp_path / "autograder", submission_files, metadata)
    if knowledge_due:  # the course's due date has passed: the knowledge check is scored (rubric.toml)
        rubric = root / "source" / "rubric.toml"
        rubric.write_text(rubric.read_text().replace("[parts.knowledge]\n", f"[parts.knowledge]\ndue = {knowledge_due}\n"))
    done = subprocess.run([str(root / "source" / "run_autograder")], cwd=tmp_path,
                          env=gradescope.autograder_environment(root), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads((root / "results" / "results.json").read_text())


def check_gradescope_format(data):
    assert isinstance(data["score"], (int, float)) and isinstance(data["execution_time"], (int, float))
    assert isinstance(data["output"], str) and data["tests"]
    parts = set(rubric_file.load().parts)
    for test in data["tests"]:
        # Text only, no points of its own: one summary row per part, and the row of a part that was
        # not graded (timing without CUDA, the knowledge check before its due date).
        text_only = test["tags"][1:] == ["part"] or "score" not in test
        for name, kind in TEST_FIELDS.items():
            if text_only and name in ("score", "max_score"):
                assert name not in test
                continue
            assert isinstance(test[name], kind), (name, test)
        if text_only:
            assert "status" not in test and "max_score" not in test
        else:  # without one Gradescope marks a row by its score: 0 of 0 (a part not graded) would read as passed
            assert test["status"] in ("passed", "failed"), ("a row with points needs a status", test)
        assert test["visibility"] in ("visible", "hidden", "after_due_date", "after_published")
        assert test["tags"][0] in parts
        assert test.get("output_format", "text") in ("text", "html", "simple_format", "md", "ansi")


def right_answers(tmp_path) -> Path:
    """A knowledge.py with every autograded answer right, from the key."""
    key = toml.loads((REPO / "tests_hidden" / "knowledge_key.toml").read_text())
    path = tmp_path / "answers.py"
    path.write_text("".join(f"{question}_ANSWER = {value!r}\n" for question, value in key.items()))
    return path


def gradescope_metadata(due: str, late_due: str | None, created: str = "2026-12-01T10:00:00.000000-08:00") -> dict:
    """submission_metadata.json as Gradescope writes it (the fields the grader reads, and a few more)."""
    return {"id": 123456, "created_at": created, "submission_method": "upload",
            "assignment": {"due_date": due, "late_due_date": late_due, "release_date": "2026-11-01T00:00:00.000000-07:00",
                           "title": "MHSA", "total_points": "100.0"},
            "users": [{"email": "student@example.com", "id": 1234, "name": "Student User"}], "previous_submissions": []}


def test_the_reference_gets_full_marks_on_every_graded_part(bundle, tmp_path):
    """Uploaded inside a folder, as a zip of the repository would put it, with the knowledge check
    beside mhsa.py, regraded after Gradescope's due date (the rubric sets none): every part is
    graded, the knowledge check included, and all earn full marks."""
    data = run_autograder(bundle, tmp_path, {"my-work/assignment/mhsa.py": REPO / "reference" / "mhsa.py",
                                             "my-work/assignment/knowledge.py": right_answers(tmp_path)},
                          metadata=gradescope_metadata("2026-12-02T23:59:00.000000-08:00", None))
    check_gradescope_format(data)
    graded = {name: p for name, p in data["extra_data"]["parts"].items() if p["graded"]}
    assert {"sdpa", "heads", "masks", "mhsa", "block", "knowledge"} <= set(graded)
    assert all(p["score"] == p["max_score"] for p in graded.values()), graded
    assert data["score"] == data["extra_data"]["max_score"] > 0
    # public and hidden test rows, and rubric.toml's [results] part_rows: one summary row per part
    assert {t["tags"][1] for t in data["tests"] if len(t["tags"]) > 1} == {"public", "hidden", "part"}


def test_a_failed_part_shows_its_likely_mistake_and_its_weights_as_html(bundle, tmp_path):
    """Without the 1/sqrt(d_k) scale: sdpa's summary row names the mistake and, in Gradescope's HTML
    format, shows the weights beside the expected ones; the rows without a picture keep the text format."""
    unscaled = tmp_path / "unscaled.py"
    unscaled.write_text((REPO / "reference" / "mhsa.py").read_text().replace(
        "scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))", "scores = q @ k.transpose(-2, -1)"))
    data = run_autograder(bundle, tmp_path, {"mhsa.py": unscaled})
    check_gradescope_format(data)
    row = next(t for t in data["tests"] if t["tags"] == ["sdpa", "part"])
    assert row["output_format"] == "html" and "Likely mistake: " in row["output"], row
    assert "<table" in row["output"] and "<script" not in row["output"].lower()
    assert data["extra_data"]["parts"]["sdpa"]["picture_text"].count("yours - expected") >= 1
    assert all("output_format" not in t for t in data["tests"] if t["tags"][-1] != "part")


@pytest.mark.parametrize("late_due, scored", [("2999-12-31T23:59:00.000000-08:00", False),
                                              ("2026-12-03T01:00:00.000000-08:00", True)])
def test_gradescopes_own_deadline_decides_the_knowledge_check(bundle, tmp_path, late_due, scored):
    """Gradescope's dates, not a second one in rubric.toml: while its late due date is ahead anyone can
    still resubmit, so the check is withheld and says until when; once it has passed a regrade scores it."""
    data = run_autograder(bundle, tmp_path, {"mhsa.py": REPO / "assignment" / "mhsa.py",
                                             "knowledge.py": right_answers(tmp_path)},
                          metadata=gradescope_metadata("2026-12-01T23:59:00.000000-08:00", late_due))
    part = data["extra_data"]["parts"]["knowledge"]
    points = rubric_file.load().parts["knowledge"].points
    assert part["graded"] is scored and part["score"] == (points if scored else 0)
    assert data["score"] == (points if scored else 0), "the stubs earn nothing else"
    if not scored:
        assert any("until 2999-12-31" in note and "Gradescope's late due date" in note for note in part["notes"])
        row = next(t for t in data["tests"] if t["tags"] == ["knowledge"])
        assert "after the deadline (2999-12-31" in row["output"]


def test_after_the_deadline_gradescope_and_a_batch_give_the_same_score_and_maximum(bundle, tmp_path):
    """The same files by two routes: Gradescope's regrade after its late due date, and a TA's batch of
    the collected work (no due date anywhere)."""
    work = tmp_path / "subs" / "ann"
    work.mkdir(parents=True)
    shutil.copyfile(REPO / "reference" / "mhsa.py", work / "mhsa.py")
    shutil.copyfile(right_answers(tmp_path), work / "knowledge.py")
    gradescope_results = run_autograder(bundle, tmp_path, {"mhsa.py": work / "mhsa.py", "knowledge.py": work / "knowledge.py"},
                                        metadata=gradescope_metadata("2026-12-01T23:59:00.000000-08:00",
                                                                     "2026-12-02T23:59:00.000000-08:00"))
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(tmp_path / "subs"), "--batch", "--out",
                           str(tmp_path / "out")], cwd=REPO, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    batch_results = json.loads((tmp_path / "out" / "ann.json").read_text())
    for data in (gradescope_results, batch_results):
        assert data["extra_data"]["parts"]["knowledge"]["graded"]
    assert (gradescope_results["score"], gradescope_results["extra_data"]["max_score"]) == \
        (batch_results["score"], batch_results["extra_data"]["max_score"])


def test_the_stubs_get_nothing(bundle, tmp_path):
    data = run_autograder(bundle, tmp_path, {"mhsa.py": REPO / "assignment" / "mhsa.py"})
    check_gradescope_format(data)
    assert data["score"] == 0
    assert all(t["status"] == "failed" for t in data["tests"] if "status" in t)


def test_an_upload_without_mhsa_py_gets_a_results_file_that_says_so(bundle, tmp_path):
    data = run_autograder(bundle, tmp_path, {"README.txt": REPO / "rubric.toml"})
    assert data["score"] == 0 and "could not be graded" in data["output"] and "mhsa.py" in data["output"]
