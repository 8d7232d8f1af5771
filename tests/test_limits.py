"""Limits that keep what was graded: a call that blows the time or memory limit is not run again (its
entry point fails at once, with the first reason), so one bad method costs its own parts and those
that call it, never the rest; and the whole-submission limit keeps the tests that finished.

Short limits throughout (a per-call limit of seconds, a whole-submission limit of 20 s) so that each
test takes seconds, not the rubric's minutes.
"""
import json
import os
import subprocess
import sys
import time
from argparse import Namespace
from collections import Counter

import pytest
import torch

from autograder.core import errors
from autograder.core import rubric as rubric_file
from autograder.core.paths import ASSIGNMENT, REFERENCE, REPO
from autograder.core.rubric import Limits
from autograder.isolation.host import levels as isolation
from autograder.pipeline import grading
from autograder.pipeline.grade_file import WRAP_UP_S
from autograder.runners import batch
from autograder.testing.backends import WorkerBackend, entry_points
from autograder.testing.calls import Call

ADVERSARIAL = REPO / "examples" / "adversarial"

SANE_PARTS = ("sdpa", "heads", "masks")  # what nothing in the reference's modules calls back into
# MultiHeadSelfAttention.forward never returns: the block, which calls it, hangs too.
TIME_BOMB = REFERENCE.read_text() + (
    "\n\ndef _forever(self, *args, **kwargs):\n    while True:\n        pass\n\n\n"
    "MultiHeadSelfAttention.forward = _forever\n")
# Every call of MultiHeadSelfAttention.forward asks for 400 GiB, 1 GiB at a time, written.
MEMORY_BOMB = REFERENCE.read_text() + (
    "\n\ndef _hoard(self, *args, **kwargs):\n    return [torch.ones(1 << 30, dtype=torch.uint8) for _ in range(400)]\n\n\n"
    "MultiHeadSelfAttention.forward = _hoard\n")
# padding_mask never returns, and the per-call limit (60 s) is longer than the whole grade's (20 s).
HANG_IN_MASKS = REFERENCE.read_text() + "\n\ndef padding_mask(lengths, max_len=None):\n    while True:\n        pass\n"


def first_lines(data) -> Counter:
    """How many test rows open with each first line of output."""
    return Counter(t["output"].split("\n")[0] for t in data["tests"] if t["tags"][-1] in ("public", "hidden"))


@pytest.fixture(scope="module")
def time_bomb_by_grade(tmp_path_factory):
    """The time bomb graded by the `grade` command, in a subprocess: (results, seconds)."""
    folder = tmp_path_factory.mktemp("grade")
    submission = folder / "time_bomb.py"
    submission.write_text(TIME_BOMB)
    out = folder / "results" / "results.json"
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(submission), "--suite", "public",
                           "--isolation", "process", "--timeout", "2", "--results", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(out.read_text()), time.monotonic() - started


def test_a_time_bomb_in_one_method_costs_only_the_parts_that_call_it(time_bomb_by_grade):
    """The bomb is charged in MultiHeadSelfAttention's part once: the block, whose own code is right,
    keeps its points (its tests rerun with a correct MultiHeadSelfAttention, carry_forward)."""
    data, seconds = time_bomb_by_grade
    parts = data["extra_data"]["parts"]
    assert all(parts[p]["score"] == parts[p]["max_score"] for p in SANE_PARTS + ("block",)), parts
    assert 0 < parts["mhsa"]["score"] < parts["mhsa"]["max_score"], \
        "the forward calls fail; the constructor tests, which never call forward, keep their points"
    lines = first_lines(data)
    timed_out = [line for line in lines if "did not finish within 2 s" in line]
    assert len(timed_out) == 1 and lines[timed_out[0]] == 1, \
        f"one call ran into the limit (the module's forward), no more: {lines}"
    assert not any(line.startswith("TransformerBlock.forward was not run again") for line in lines), lines
    assert lines["MultiHeadSelfAttention.forward was not run again in this grade: an earlier call into it ran "
                 "past the time limit of one call:"] > 5
    assert seconds < 120, f"{seconds:.0f} s: a blown call should cost seconds, not a minute"


def test_a_batch_gives_the_time_bomb_the_same_grade(time_bomb_by_grade, tmp_path):
    folder, out = tmp_path / "subs", tmp_path / "out"
    folder.mkdir()
    (folder / "time_bomb.py").write_text(TIME_BOMB)
    args = Namespace(path=folder, out=out, jobs=1, force=False, suite="public", isolation="process", timeout=2.0,
                     hide=[], batch=True, timing_device=None, days_late=0.0, after_due_date=False, due=None, due_from="",
                     rubric=rubric_file.RUBRIC_FILE)
    assert batch.run(args) == 0
    data = json.loads((out / "time_bomb.json").read_text())
    by_grade = time_bomb_by_grade[0]
    assert data["extra_data"]["status"] == "graded"
    assert data["score"] == by_grade["score"] and data["extra_data"]["parts"] == by_grade["extra_data"]["parts"]


def test_a_memory_bomb_is_called_once_and_then_fails_at_once_with_its_reason(tmp_path):
    """The backend remembers the entry point that ran into the memory limit: MultiHeadSelfAttention's
    forward. Its constructor, which did not, and every other function still run."""
    source = tmp_path / "mhsa.py"
    source.write_text(MEMORY_BOMB)
    backend = WorkerBackend(source, isolation.resolve("process"), Limits(call_timeout=60, memory_mb=3072))
    forward = Call("MultiHeadSelfAttention", (torch.ones(2, 3, 8, dtype=torch.float64),), init={"d_model": 8, "num_heads": 2})
    try:
        with pytest.raises(RuntimeError, match="can't allocate memory"):
            backend.run(forward)
        started = time.monotonic()
        with pytest.raises(RuntimeError) as again:
            backend.run(forward)
        assert time.monotonic() - started < 0.5, "the second call was run again"
        assert isinstance(again.value, errors.SubmissionError)
        text = str(again.value)
        assert text.startswith("MultiHeadSelfAttention.forward was not run again in this grade: an earlier call "
                               "into it ran into the memory limit") and "can't allocate memory" in text
        built = backend.run(Call("MultiHeadSelfAttention", init={"d_model": 8, "num_heads": 2}, construct_only=True))
        assert built.attributes["fields"]["num_heads"] == 2
        assert backend.call("causal_mask", 3).shape == (3, 3)
    finally:
        backend.close()


def test_a_worker_made_as_the_whole_submission_limit_comes_is_ended_at_once(tmp_path):
    """The limit's watchdog ends the worker it finds; one still being made (a fork waits for its
    template's start) is ended as soon as it exists, rather than waited for through its import."""
    source = tmp_path / "mhsa.py"
    source.write_text("import time\ntime.sleep(600)\n")  # an import that never ends
    backend = WorkerBackend(source, isolation.resolve("process"), Limits(call_timeout=60, import_timeout=60))
    backend.stop_early("grading reached its time limit")  # as if it came while the worker was made
    started = time.monotonic()
    try:
        with pytest.raises(errors.SubmissionImportError, match="the process importing your mhsa.py"):
            backend._ensure_worker()  # what the call in flight does with the worker it made
    finally:
        backend.close()
    assert time.monotonic() - started < 30, "the grade waited for the import's own limit"


def test_the_whole_submission_limit_keeps_the_tests_that_finished(tmp_path):
    """`grade`'s own function under a 20 s whole-submission limit: the tests that finished before
    padding_mask hung keep their results and points; the one in flight and all the rest fail with the
    reason, and the grade is written right after the limit, not when the hung call's own limit ends."""
    submission = tmp_path / "mhsa.py"
    submission.write_text(HANG_IN_MASKS)
    out = tmp_path / "results" / "results.json"
    script = (
        "import sys; from dataclasses import replace; from pathlib import Path\n"
        "from autograder.core import rubric as rubric_file; from autograder.cli import grade\n"
        "rubric = replace(rubric_file.load(), submission_timeout=20.0)\n"
        "from autograder.pipeline.grade_file import GradeOptions\n"
        "options = GradeOptions(suite='public', isolation='process', timeout=60.0)\n"
        f"sys.exit(grade.grade_one(Path({str(submission)!r}), Path({str(out)!r}), options, rubric, "
        "time_limit=rubric.submission_timeout, backstop=True))\n")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env=os.environ | {"PYTHONPATH": str(REPO)})
    seconds = time.monotonic() - started
    assert done.returncode == 0, done.stdout + done.stderr
    assert seconds < 20 + WRAP_UP_S, f"{seconds:.0f} s: the grade did not stop at its limit"
    data = json.loads(out.read_text())
    assert data["extra_data"]["status"] == "graded"
    tests = [t for t in data["tests"] if t["tags"][-1] == "public"]
    reason = "grading reached 20 s, the time limit for a whole submission, before this finished"
    stopped = [t for t in tests if reason in t["output"]]
    finished = [t for t in tests if t not in stopped]
    assert all(t["status"] == "failed" and t["score"] == 0 for t in stopped)
    assert all(t["status"] == "passed" and t["score"] == t["max_score"] > 0 for t in finished), \
        "every test that finished (of the reference, padding_mask aside) passed and kept its points"
    by_part = {part: {t["status"] for t in tests if t["tags"][0] == part} for part in rubric_file.load().parts}
    assert by_part["masks"] == {"passed", "failed"}, "masks' tests before the hang finished; the rest did not"
    assert by_part["sdpa"] == by_part["mhsa"] == {"failed"}, "the files after masks' were never reached"
    assert data["score"] == pytest.approx(sum(t["score"] for t in finished))
    parts = data["extra_data"]["parts"]
    done_parts = [p for p in parts if p != "knowledge" and by_part[p] == {"passed"}]
    assert done_parts and all(parts[p]["score"] == parts[p]["max_score"] for p in done_parts)
    assert (f"the whole-submission time limit was reached: {len(finished)} of {len(tests)} tests had finished"
            in data["output"].lower())


def test_stubs_that_raise_value_error_score_nothing_in_either_suite(tmp_path):
    """The argument checks of both suites pass for stubs that raise ValueError everywhere; they count
    only with the constructor's own test, so every code part scores 0."""
    path = tmp_path / "value_error_stubs.py"
    path.write_text(ASSIGNMENT.read_text() + (ADVERSARIAL / "cases" / "value_error_stubs.py").read_text())
    grade = grading.grade(path, isolation="process", extras=False, rubric=rubric_file.load())
    assert grade.score == 0 and all(p.units == 0 for p in grade.parts.values())
    passed = {(t.part, t.suite) for t in grade.tests if t.passed}
    assert passed == {("mhsa", "public"), ("mhsa", "hidden"), ("block", "public"), ("block", "hidden")}, \
        "the argument checks themselves pass: the scoring rule withholds their points"


@pytest.mark.parametrize("device, counts", [("cpu", True), ("auto", torch.cuda.is_available())])
def test_timing_after_the_limit_is_not_run_and_keeps_the_usual_maximum(device, counts):
    """Once the whole-submission limit is reached, the timing part is not run: it scores 0 where it
    would have been timed (so the maximum is every route's), and stays out of it where it would not."""
    ctx = grading.GradingContext.create(REFERENCE, isolation="process", timing_device=device, rubric=rubric_file.load())
    try:
        ctx.stop_early("grading reached 1 s, the time limit for a whole submission")
        grade = grading.grade_timing(ctx, grading.Grade("reference", "process", ctx.suites))
    finally:
        ctx.close()
    timing = grade.parts["timing"]
    assert timing.units == 0 and timing.graded == counts
    assert "not timed: grading reached 1 s" in grade.rows[-1].output


def test_a_forward_call_runs_its_constructor_first_and_a_construction_only_that():
    """What a blown call fails later: a forward call is failed by a blown constructor or forward; a
    construct-only call only by a blown constructor; a function call only by itself."""
    init = {"d_model": 8, "num_heads": 2}
    assert entry_points(Call("MultiHeadSelfAttention", (), init=init)) == \
        ("MultiHeadSelfAttention.__init__", "MultiHeadSelfAttention.forward")
    assert entry_points(Call("MultiHeadSelfAttention", init=init, construct_only=True)) == \
        ("MultiHeadSelfAttention.__init__",)
    assert entry_points(Call("causal_mask", (3,))) == ("causal_mask",)
