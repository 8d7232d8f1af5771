"""Every grading route on a machine where torch says CUDA is available: `grade` (the CLI), a batch
and the Gradescope runner each produce a complete result, with the timing part routed to the CPU.

This machine has no GPU, so a sitecustomize module on the grader's PYTHONPATH makes
torch.cuda.is_available() answer True in the grading processes (not in the workers, which start
with `python -I` and a scrubbed environment). The timing stage then meets exactly what it meets on a
GPU machine: the route that once passed an isolation name where an Isolation was needed, and
crashed every grade there.
"""
import json
import os
import subprocess
import sys
import zipfile

import pytest

from autograder.core import paths

REFERENCE = paths.REFERENCE
SITECUSTOMIZE = "import torch\ntorch.cuda.is_available = lambda: True\n"


@pytest.fixture(scope="module")
def cuda_env(tmp_path_factory):
    site = tmp_path_factory.mktemp("cuda-says-yes")
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    path = os.pathsep.join([str(site), str(paths.REPO)])
    return os.environ | {"PYTHONPATH": path}


def check_complete(data: dict, name: str, collected: bool = False):
    """A graded result with every part, timing graded on the CPU, and rows that add up. `collected`:
    a batch, which with no deadline anywhere scores the knowledge check (a lone .py: 0 of it)."""
    extra = data["extra_data"]
    assert extra["status"] == "graded", data["output"]
    assert set(extra["parts"]) >= {"sdpa", "heads", "masks", "mhsa", "block", "timing", "knowledge"}
    timing = extra["parts"]["timing"]
    assert timing["graded"] and timing["max_score"] == 5.0, timing
    timing_row = next(t for t in data["tests"] if t["tags"] == ["timing"])
    assert "(CPU)" in timing_row["name"] and timing_row["status"] in ("passed", "failed")
    if collected:
        assert extra["max_score"] == 100.0, "the code parts, timing and the knowledge check"
        assert extra["parts"]["knowledge"]["graded"] and extra["parts"]["knowledge"]["score"] == 0
    else:
        assert extra["max_score"] == 95.0, "the code parts and timing; the knowledge check waits for its deadline"
        assert not extra["parts"]["knowledge"]["graded"]
    assert round(sum(t["score"] for t in data["tests"] if "score" in t), 4) == data["score"]
    assert extra["submission"] == name


def test_grade_on_a_cuda_machine_with_timing_on_the_cpu(cuda_env, tmp_path):
    out = tmp_path / "results.json"
    done = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.is_available())"],
                          env=cuda_env, capture_output=True, text=True)
    assert done.stdout.strip() == "True", "the stand-in must reach the grading process"
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(REFERENCE), "--results", str(out),
                           "--timing-device", "cpu"], cwd=paths.REPO, env=cuda_env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    check_complete(json.loads(out.read_text()), "mhsa")


def test_batch_on_a_cuda_machine_with_timing_on_the_cpu(cuda_env, tmp_path):
    folder, out = tmp_path / "subs", tmp_path / "out"
    folder.mkdir()
    (folder / "alice.py").write_text(REFERENCE.read_text())
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(folder), "--batch", "--out", str(out),
                           "--jobs", "1", "--timing-device", "cpu"], cwd=paths.REPO, env=cuda_env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    check_complete(json.loads((out / "alice.json").read_text()), "alice", collected=True)


def test_gradescope_on_a_cuda_machine_with_timing_on_the_cpu(cuda_env, tmp_path):
    from autograder.runners import gradescope

    root = tmp_path / "autograder"
    with zipfile.ZipFile(gradescope.build_bundle(tmp_path / "bundle.zip")) as bundle:
        bundle.extractall(root / "source")
    rubric = root / "source" / "rubric.toml"  # the instructor's setting for a container without GPUs
    text = rubric.read_text()
    assert 'device = "auto"' in text
    rubric.write_text(text.replace('device = "auto"', 'device = "cpu"', 1))
    (root / "submission").mkdir()
    (root / "submission" / "mhsa.py").write_text(REFERENCE.read_text())
    (root / "results").mkdir()
    env = cuda_env | {"AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": sys.executable,
                      "PYTHONPATH": cuda_env["PYTHONPATH"].replace(str(paths.REPO), str(root / "source"))}
    done = subprocess.run(["bash", str(root / "source" / "run_autograder")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # The runner grades the upload folder, so the submission is named after it.
    check_complete(json.loads((root / "results" / "results.json").read_text()), "submission")
