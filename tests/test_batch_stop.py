"""Stopping a batch (SIGTERM, or SIGINT as Ctrl-C sends it) stops its slots, their worker templates,
workers, reapers and sandboxes within seconds, keeps every finished grade, writes nothing more, and a
rerun of the same command grades the rest. Each test runs the real command in a subprocess."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autograder.core import paths
from autograder.isolation.host.levels import resolve
from autograder.record import results
from autograder.record.grade import Status

# Two slots: one grades the quick ones (nothing imports) and the first results file appears while the
# other still grades the reference, in its workers.
QUICK, SLOW = ["s0", "s2", "s3"], ["s1"]
SUBMISSIONS = len(QUICK) + len(SLOW)
STOP_S = 5       # how long the batch, and then its whole tree, may take to go


def wait_for(condition, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while not (found := condition()):
        assert time.monotonic() < deadline, f"no {what} within {seconds} s"
        time.sleep(0.1)
    return found


def batch_tree(session: int, marker: bytes) -> list:
    """The processes of the batch's session, and any other whose command line names the test's folder:
    the reapers and bubblewrap start sessions of their own, but their folders live under its TMPDIR."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue  # ended while it was looked at
        if int(stat.rsplit(")", 1)[1].split()[3]) == session or marker in cmdline:  # after the name: state ppid pgrp session
            found.append((int(entry.name), cmdline.replace(b"\0", b" ")[:160]))
    return found


def finished_grades(out: Path) -> dict:
    """Each results file: (inode, mtime), once it has loaded as a complete graded result."""
    grades = {}
    for path in out.glob("*.json"):
        grade = results.load(path)
        assert grade is not None and grade.status == Status.GRADED, f"{path.name} is not a complete grade"
        grades[path.name] = (path.stat().st_ino, path.stat().st_mtime_ns)
    return grades


@pytest.mark.parametrize("isolation, signals, status", [
    ("process", [signal.SIGTERM], 143),
    ("process", [signal.SIGINT, signal.SIGTERM], 130),  # Ctrl-C; a second signal does not cut the clean-up short
    ("sandbox", [signal.SIGTERM], 143),
])
def test_a_stopped_batch_stops_its_tree_keeps_finished_grades_and_resumes(tmp_path, isolation, signals, status):
    if isolation == "sandbox" and resolve("sandbox").level != "sandbox":
        pytest.skip("bubblewrap cannot make a sandbox here")
    folder, out, scratch = tmp_path / "subs", tmp_path / "out", tmp_path / "tmp"
    folder.mkdir()
    scratch.mkdir()
    for name in QUICK:
        (folder / f"{name}.py").write_text("def broken(:\n")
    for name in SLOW:
        (folder / f"{name}.py").write_bytes((paths.REPO / "reference" / "mhsa.py").read_bytes())
    command = [sys.executable, "-m", "autograder", "grade", str(folder), "--batch", "--out", str(out),
               "--jobs", "2", "--suite", "public", "--isolation", isolation]
    env = os.environ | {"TMPDIR": str(scratch)}  # every worker's folder, so every reaper's command line, is here
    run = subprocess.Popen(command, cwd=paths.REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, start_new_session=True)
    try:
        wait_for(lambda: list(out.glob("*.json")) or run.poll() is not None, 60, "results file")
        assert run.poll() is None, "the batch ended before it could be stopped:\n" + run.stdout.read()
        for number in signals:
            run.send_signal(number)
        printed, _ = run.communicate(timeout=STOP_S)
        assert run.returncode == status, printed
        left = lambda: batch_tree(run.pid, str(tmp_path).encode())  # noqa: E731
        wait_for(lambda: not left(), STOP_S, "end of the batch's processes")
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
    kept = finished_grades(out)
    assert 1 <= len(kept) < SUBMISSIONS, f"the stop should have come midway: {kept}"
    assert f"stopped: {len(kept)} of {SUBMISSIONS} submissions have a finished grade" in printed
    assert f"rerun the same command to grade the other {SUBMISSIONS - len(kept)}" in printed
    assert "Traceback" not in printed
    time.sleep(1)  # nothing of the batch is left to write; a late result would show here
    assert finished_grades(out) == kept

    rerun = subprocess.run(command, cwd=paths.REPO, env=env, capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert f"{len(kept)} of {SUBMISSIONS} submissions already graded" in rerun.stderr
    regraded = finished_grades(out)
    assert len(regraded) == SUBMISSIONS and {name: regraded[name] for name in kept} == kept
