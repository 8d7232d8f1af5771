"""The grading engine end to end: repeatable results, student code kept out of the grader's process,
and the command line's limits reaching the worker."""
import json
import os
import subprocess
import sys

import torch

from autograder import grading, paths, results
from autograder import rubric as rubric_file

REPO = paths.REPO
BUGGY = REPO / "examples" / "submissions" / "buggy_no_scale.py"


def without_timing(data: dict) -> dict:
    return {key: value for key, value in data.items() if key != "execution_time"}


def test_the_same_submission_gets_the_same_results_twice():
    """Scores, every test's output, the diagnosis and the summary; only the time taken may differ."""
    rubric = rubric_file.load()
    first, second = (results.to_gradescope(grading.grade(BUGGY, rubric=rubric), rubric) for _ in range(2))
    assert 0 < first["score"] < first["extra_data"]["max_score"], "the buggy submission loses some points"
    assert any(t["output"] for t in first["tests"])
    assert without_timing(first) == without_timing(second)


def test_student_code_runs_in_another_process_and_leaves_this_one_alone(tmp_path):
    submission = tmp_path / "mhsa.py"
    submission.write_text(paths.REFERENCE.read_text() + (
        "\ntorch.MHSA_WAS_HERE = True\n"
        "print('imported by the worker')\n"))
    grade = grading.grade(submission, suites=("public",), extras=False)
    assert not hasattr(torch, "MHSA_WAS_HERE"), "the submission's import changed nothing in the grader"
    assert "imported by the worker" in grade.output
    assert grade.score == grade.max_score == 90


def test_the_timeout_option_reaches_the_worker_and_auto_falls_back_without_bubblewrap(tmp_path):
    submission = tmp_path / "mhsa.py"
    submission.write_text((REPO / "reference" / "mhsa.py").read_text() +
                          "\n\ndef causal_mask(seq_len, device=None, dtype=None):\n    while True:\n        pass\n")
    out = tmp_path / "results" / "results.json"
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(submission), "--suite", "public",
                           "--timeout", "1.5", "--results", str(out)], cwd=REPO, capture_output=True, text=True,
                          timeout=600, env=os.environ | {"AUTOGRADER_NO_SANDBOX": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads(out.read_text())
    assert any("did not finish within 1.5 s" in t["output"] for t in data["tests"])
    assert data["extra_data"]["parts"]["masks"]["score"] < data["extra_data"]["parts"]["masks"]["max_score"]
    assert data["extra_data"]["isolation"] == "process" and "isolation: process" in done.stdout
