"""`gradescope --try`: the bundle rehearsed here on a submission, as an instructor runs it, and setup.sh
stopping at once where a package index cannot be reached."""
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import threading

import pytest

from autograder.core import paths
from autograder.runners import gradescope
from tests.test_gradescope import right_answers

REPO = paths.REPO
EXAMPLES = REPO / "examples" / "submissions"


def autograder(*args, cwd=REPO) -> subprocess.Popen:
    """`python -m autograder ARGS`, started: tests that need two commands run them side by side."""
    return subprocess.Popen([sys.executable, "-m", "autograder", *map(str, args)], cwd=cwd, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=os.environ | {"PYTHONPATH": str(REPO)})


def finished(process: subprocess.Popen) -> subprocess.CompletedProcess:
    stdout, stderr = process.communicate(timeout=600)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def test_the_reference_folder_gets_full_marks_and_the_same_score_and_maximum_as_grade(tmp_path):
    """The reference uploaded as its folder (reference/mhsa.py inside it): every row is printed with its
    points and when the student sees it, and the kept results.json agrees with `grade` on the same file.
    Run from another directory, so that nothing depends on the repository being the working directory."""
    rehearsal = autograder("gradescope", "--try", REPO / "reference", "--keep", tmp_path / "kept", cwd=tmp_path)
    graded = autograder("grade", REPO / "reference" / "mhsa.py", "--results", tmp_path / "grade.json")
    done, by_grade = finished(rehearsal), finished(graded)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert by_grade.returncode == 0, by_grade.stderr
    kept = json.loads((tmp_path / "kept" / "results.json").read_text())
    expected = json.loads((tmp_path / "grade.json").read_text())
    assert (kept["score"], kept["extra_data"]["max_score"]) == (expected["score"], expected["extra_data"]["max_score"])
    assert kept["score"] == kept["extra_data"]["max_score"] > 0
    assert f"Autograder score: {kept['score']:g} / {kept['extra_data']['max_score']:g}\n" in done.stdout
    assert all(f"  {row['name']}: " in done.stdout for row in kept["tests"])
    assert not any(row.get("status") == "failed" for row in kept["tests"])
    assert "[visible: shown now]" in done.stdout
    metadata = json.loads((tmp_path / "kept" / "submission_metadata.json").read_text())
    assert metadata["assignment"]["due_date"] is None and metadata["created_at"]
    assert f"kept in {tmp_path / 'kept'}" in done.stdout


@pytest.mark.parametrize("due, scored", [("2020-01-31", True), ("2999-12-31", False)])
def test_the_due_date_decides_the_knowledge_check_and_failing_tests_are_named(tmp_path, due, scored):
    """mhsa.py without the 1/sqrt(d_k) scale, with every knowledge answer right, uploaded as two files:
    the failing tests are printed by name either way; a due date in the past scores the knowledge check
    question by question, one in the future withholds it and says until when."""
    shutil.copyfile(EXAMPLES / "buggy_no_scale.py", tmp_path / "mhsa.py")
    shutil.copyfile(right_answers(tmp_path), tmp_path / "knowledge.py")
    done = finished(autograder("gradescope", "--try", tmp_path / "mhsa.py", tmp_path / "knowledge.py", "--due", due,
                               "--keep", tmp_path / "kept"))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    kept = json.loads((tmp_path / "kept" / "results.json").read_text())
    failed = [row["name"] for row in kept["tests"] if row.get("status") == "failed"]
    assert failed and all(f"  {name}: 0 / " in done.stdout for name in failed)
    assert any(name.startswith("sdpa ") for name in failed)
    knowledge = kept["extra_data"]["parts"]["knowledge"]
    assert knowledge["graded"] is scored
    metadata = json.loads((tmp_path / "kept" / "submission_metadata.json").read_text())
    assert metadata["assignment"]["due_date"].startswith(f"{due}T23:59:59")
    if scored:
        assert knowledge["score"] == knowledge["max_score"] > 0
        assert "  knowledge: Q1: 0.5 / 0.5 passed" in done.stdout
        assert "after the deadline" not in done.stdout
    else:
        assert "  knowledge: Q" not in done.stdout
        assert f"after the deadline ({due} 23:59" in done.stdout


@pytest.mark.parametrize("files, message", [
    (["mhsa.py", "missing/knowledge.py"], "no such file or folder: {tmp}/missing/knowledge.py"),
    (["mhsa.py", "copy/mhsa.py"], "two files named mhsa.py"),
])
def test_a_submission_that_cannot_be_uploaded_gets_one_line_and_nothing_is_kept(tmp_path, files, message):
    (tmp_path / "copy").mkdir()
    for name in ("mhsa.py", "copy/mhsa.py"):
        shutil.copyfile(EXAMPLES / "stubs.py", tmp_path / name)
    done = finished(autograder("gradescope", "--try", *(tmp_path / f for f in files), "--keep", tmp_path / "kept"))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and message.format(tmp=tmp_path) in done.stderr, done.stderr
    assert not (tmp_path / "kept").exists()


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return gradescope.build_bundle(tmp_path_factory.mktemp("bundle") / "autograder.zip")


@pytest.fixture
def answering_index():
    """An HTTP server on this machine that answers every request (with an error: an answer all the same)."""
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/simple"
    server.shutdown()
    server.server_close()


def closed_port_url() -> str:
    """An index URL on this machine where nothing listens: a connection to it is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/simple"


@pytest.mark.parametrize("unreachable", ["PIP_INDEX_URL", "TORCH_INDEX_URL"])
def test_setup_sh_stops_in_one_line_before_installing_anything_when_an_index_is_unreachable(
        bundle, tmp_path, answering_index, unreachable):
    """setup.sh under a fake root: the index that cannot be reached is named with the variable that
    replaces it, within seconds, and no venv was begun (the probe comes before any install)."""
    root = gradescope.lay_out(bundle, tmp_path / "autograder", {})
    dead = closed_port_url()
    indexes = {"PIP_INDEX_URL": answering_index, "TORCH_INDEX_URL": answering_index, unreachable: dead}
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}  # straight to 127.0.0.1
    done = subprocess.run(["bash", str(root / "source" / "setup.sh")], cwd=tmp_path, capture_output=True, text=True,
                          env=env | indexes | {gradescope.ROOT_VAR: str(root)}, timeout=20)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.startswith(f"setup.sh: cannot reach {dead} (") and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.endswith(f"): set {unreachable} to an index that is reachable, or run setup.sh where this one is\n")
    assert not (root / "venv").exists()
