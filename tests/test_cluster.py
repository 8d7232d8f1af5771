"""Cluster mode (`grade DIR --batch --scheduler ADDRESS`) on a real Dask cluster on localhost.

The scheduler and workers are Dask's own commands in subprocesses (autograder.runners.cluster.LocalCluster),
each in a process group of its own so that killing one takes its grader slot with it (as a machine
that dies would); all of them are killed in teardown. The cluster's results must equal the local batch's, submission by submission and
test by test, even though a worker is killed midway; a submission over the local size limit is refused
by the client, with its results file, and the others are graded.
"""
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autograder.core.paths import REPO
from autograder.isolation.host.levels import sandbox_available
from autograder.runners.cluster import LocalCluster

pytest.importorskip("distributed")
pytestmark = pytest.mark.skipif(not sandbox_available(), reason="cluster mode needs the sandbox level (bubblewrap)")

ADVERSARIAL = ("network", "segfault", "os_exit")  # reaching out, killing the worker, leaving early
STARTUP_S = 120


@pytest.fixture
def cluster(tmp_path):
    running = LocalCluster(tmp_path, workers=2)
    yield running
    running.close()


def grade_batch(folder: Path, out: Path, *extra, **popen) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "autograder", "grade", str(folder), "--batch", "--out", str(out),
                             "--jobs", "2", "--suite", "all", *extra], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, **popen)


def comparable(out: Path) -> dict:
    """Per submission: score, status and each test's status (not times, not the output's wording of timing)."""
    found = {}
    for path in sorted(out.glob("*.json")):
        data = json.loads(path.read_text())
        found[path.stem] = (data["score"], data["extra_data"]["status"],
                            sorted((t["name"], t.get("status")) for t in data["tests"]))
    return found


def test_a_cluster_grades_like_the_local_batch_even_when_a_worker_dies(tmp_path, cluster):
    folder = tmp_path / "subs"
    folder.mkdir()
    for path in sorted((REPO / "examples" / "submissions").glob("*.py")):
        shutil.copy(path, folder / path.name)
    sys.path.insert(0, str(REPO / "examples" / "adversarial"))
    try:
        import build as adversarial
    finally:
        sys.path.remove(str(REPO / "examples" / "adversarial"))
    for case in adversarial.cases():
        if case.name in ADVERSARIAL:
            (folder / f"adv_{case.name}.py").write_text(case.source())

    local = grade_batch(folder, tmp_path / "local")
    remote = grade_batch(folder, tmp_path / "cluster", "--scheduler", cluster.address)
    deadline = time.monotonic() + STARTUP_S + 600
    while not list((tmp_path / "cluster").glob("*.json")) and remote.poll() is None and time.monotonic() < deadline:
        time.sleep(0.5)
    cluster.kill(cluster.workers[0])  # a grading machine dies midway: its submission is retried on the other
    remote_output = remote.communicate(timeout=900)[0]
    local_output = local.communicate(timeout=900)[0]
    assert remote.returncode == 0, remote_output + (tmp_path / "worker1.log").read_text()[-3000:]
    assert local.returncode == 0, local_output

    expected = comparable(tmp_path / "local")
    assert len(expected) == 3 + len(ADVERSARIAL)
    found = comparable(tmp_path / "cluster")
    assert found == expected, {name: json.loads((tmp_path / "cluster" / f"{name}.json").read_text())["output"][:2000]
                               for name in found if found[name] != expected.get(name)}
    assert expected["reference_copy"][1] == "graded" and expected["stubs"][0] < expected["reference_copy"][0]
    assert "[6/6]" in remote_output and (tmp_path / "cluster" / "grades.csv").read_text().count("\n") == 7
    # What the workers graded with is what this machine expects: a rerun keeps every grade.
    again = grade_batch(folder, tmp_path / "cluster", "--scheduler", cluster.address).communicate(timeout=600)[0]
    assert "6 of 6 submissions already graded by this grader, rubric, options and submission: kept" in again, again


def test_cluster_mode_refuses_the_process_level(tmp_path):
    (tmp_path / "subs").mkdir()
    done = grade_batch(tmp_path / "subs", tmp_path / "out", "--scheduler", "tcp://127.0.0.1:9", "--isolation",
                       "process")
    output = done.communicate(timeout=300)[0]
    assert done.returncode == 2
    assert "needs the sandbox isolation level" in output and "scheduler" in output


def test_cluster_mode_refuses_workers_without_the_sandbox(tmp_path):
    """A worker whose machine falls back to the process level could let student code reach the cluster."""
    folder = tmp_path / "subs"
    folder.mkdir()
    shutil.copy(REPO / "examples" / "submissions" / "stubs.py", folder)
    unsafe = LocalCluster(tmp_path, workers=1, worker_env={"AUTOGRADER_NO_SANDBOX": "1"})
    try:
        done = grade_batch(folder, tmp_path / "out", "--scheduler", unsafe.address)
        output = done.communicate(timeout=STARTUP_S + 60)[0]
    finally:
        unsafe.close()
    assert done.returncode == 2, output
    assert "cannot run the sandbox level" in output
    assert not list((tmp_path / "out").glob("*.json")), "nothing may be graded on an unsafe cluster"


def test_an_oversized_folder_is_refused_by_the_client_and_the_others_are_graded(tmp_path, cluster):
    """A folder whose mhsa.py is over the local route's limit (handin.MAX_SUBMISSION_BYTES) is never
    read whole nor sent: its results file says why, as the local batch's does, and the batch goes on. A
    folder holding a large file the grade never reads is graded, without sending that file."""
    from autograder.core.handin import MAX_SUBMISSION_BYTES

    folder = tmp_path / "subs"
    reference = (REPO / "reference" / "mhsa.py").read_text()
    for name in ("normal", "oversized", "with_data"):
        (folder / name).mkdir(parents=True)
        (folder / name / "mhsa.py").write_text(reference)
    with open(folder / "oversized" / "mhsa.py", "a") as f:
        f.write("#" * MAX_SUBMISSION_BYTES + "\n")
    (folder / "with_data" / "weights.bin").write_bytes(bytes(3 * MAX_SUBMISSION_BYTES))

    done = grade_batch(folder, tmp_path / "out", "--suite", "public", "--scheduler", cluster.address)
    output = done.communicate(timeout=STARTUP_S + 600)[0]
    assert done.returncode == 0, output
    found = {path.stem: json.loads(path.read_text()) for path in (tmp_path / "out").glob("*.json")}
    assert sorted(found) == ["normal", "oversized", "with_data"], output
    for name in ("normal", "with_data"):
        graded = found[name]
        assert graded["extra_data"]["status"] == "graded" and graded["score"] == 90, graded["output"][:2000]
    refused = found["oversized"]
    assert refused["extra_data"]["status"] == "error" and refused["score"] == 0
    assert (f"This submission could not be graded: {folder / 'oversized' / 'mhsa.py'}: "
            f"{MAX_SUBMISSION_BYTES + len(reference) + 1:,} bytes is over the {MAX_SUBMISSION_BYTES:,} byte limit"
            in refused["output"]), refused["output"]
    assert "Traceback" not in output and (tmp_path / "out" / "grades.csv").read_text().count("\n") == 4
