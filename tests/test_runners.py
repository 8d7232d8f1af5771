"""The runner layer: the grade options and their argv form, the grader's one file list, what a cluster's
client sends of a submission, and the gradebook's isolated pass through grader slots (with the batch's
time limit and failure results).

The batch's own outcomes (timeout, crash, error) are tests/test_batch.py's; `grade`'s backstop is
tests/test_grading.py's. Here a stand-in speaks the slot's protocol, so nothing grades for real.
"""
import argparse
import json
import os
import shutil
import sys
import textwrap
from argparse import Namespace
from dataclasses import fields, replace
from pathlib import Path

import pytest

from autograder.core.handin import MAX_SUBMISSION_BYTES, GradingError
from autograder.intake import route
from autograder.runners import gradebook
from autograder.core import paths
from autograder.core import rubric as rubric_file
from autograder.pipeline import grade_file
from autograder.pipeline.grade_file import GradeOptions
from autograder.record import results
from autograder.runners import cluster

RUBRIC = rubric_file.load()


def parsed(argv: list) -> GradeOptions:
    parser = argparse.ArgumentParser()
    GradeOptions.add_arguments(parser)
    return GradeOptions.from_args(parser.parse_args(argv))


def test_every_grade_option_survives_its_argv_form(tmp_path):
    """What a runner hands a slot (to_argv) is what the slot grades with (add_arguments, from_args)."""
    options = GradeOptions(suite="public", timeout=2.5, isolation="process", timing_device="cpu", days_late=1.25,
                           hide=(tmp_path / "subs", tmp_path / "out"), after_due_date=True,
                           due="2026-12-10T23:59:00-08:00", due_from="Gradescope's late due date", rubric=tmp_path / "course-rubric.toml")
    unchanged = [f.name for f in fields(GradeOptions) if getattr(options, f.name) == f.default]
    assert not unchanged, f"give these a value other than the default, so that their argv form is tested: {unchanged}"
    assert parsed(options.to_argv()) == options
    assert parsed([]) == GradeOptions() and GradeOptions().to_argv() == []
    assert parsed(replace(options, timeout=1 / 3).to_argv()).timeout == 1 / 3, "a float loses no digit"


def test_hidden_paths_are_absolute_and_a_batch_adds_its_folders(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    options = GradeOptions(hide=(Path("extra"),)).hiding(Path("subs"), tmp_path / "out")
    assert options.hide == (tmp_path / "extra", tmp_path / "subs", tmp_path / "out")
    assert options.to_argv() == [a for p in options.hide for a in ("--hide", str(p))]


def test_the_grader_files_hold_what_timing_needs_and_every_runner_uses_them(tmp_path):
    """The timing part runs the reference beside the student's code: a worker whose reference differs
    grades differently, so the cluster's checksum must see it."""
    shipped = {p.relative_to(paths.REPO).as_posix() for p in paths.grader_files()}
    assert {"reference/mhsa.py", "tests_hidden/knowledge_key.toml", "course/notebook/knowledge.toml",
            "rubric.toml", "autograder/pipeline/grading.py", "gpu_checks/grading.py"} <= shipped
    assert not any("__pycache__" in name for name in shipped)
    assert cluster.grader_version() == paths.grader_checksum()

    for name in paths.GRADER_FILES:  # a small checkout of its own: one file per entry
        target = tmp_path / name if "." in Path(name).name else tmp_path / name / "x.py"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("one")
    before = paths.grader_checksum(tmp_path)
    (tmp_path / "reference" / "x.py").write_text("two")
    assert paths.grader_checksum(tmp_path) != before, "a changed reference must change the grader's checksum"


# Stands in for a grader slot: by the notebook's folder, a grade hangs, the slot dies, or a grade is written.
STAND_IN_SLOT = (sys.executable, "-c", f"FORMAT = {results.FORMAT}\n" + textwrap.dedent("""
    import json, os, signal, sys, time
    for line in sys.stdin:
        job = json.loads(line)
        print(json.dumps({"started": job["id"]}), flush=True)
        if "segv" in job["path"]:
            os.kill(os.getpid(), signal.SIGSEGV)
        if "hangs" in job["path"]:
            time.sleep(60)
        data = {"score": 20.0, "output": "Score: 20 / 90", "tests": [], "extra_data": {
            "format": FORMAT, "status": "graded", "max_score": 90.0, "parts": {"sdpa": {"score": 20.0, "max_score": 20.0}}}}
        with open(job["results"], "w") as f:
            json.dump(data, f)
        print(json.dumps({"done": job["id"], "code": 0}), flush=True)
"""))


def gradebook_class(tmp_path, *names) -> tuple:
    """(course, store, students): each student with the released notebook, 20 points in the kernel."""
    course, store = tmp_path / "course", tmp_path / "store"
    (store / "cache").mkdir(parents=True)
    students = []
    for name in names:
        notebook = tmp_path / name / "mhsa.ipynb"
        notebook.parent.mkdir()
        shutil.copy(paths.ASSIGNMENT_DIR / "mhsa.ipynb", notebook)
        students.append(gradebook.Student(name, notebook, in_kernel={"sdpa": 20.0}))
    return course, store, students


def test_the_gradebook_grades_through_slots_with_the_batchs_limit_and_failures(tmp_path, monkeypatch):
    """A notebook whose isolated grade hangs is stopped at the rubric's limit plus the wrap-up time,
    one whose grader dies is reported as a crash; neither gets a score or a cache entry, while a
    notebook graded beside them keeps its grade."""
    monkeypatch.setattr(grade_file, "WRAP_UP_S", 0.5)
    course, store, students = gradebook_class(tmp_path, "hangs", "segv", "graded")
    args = Namespace(force=True, jobs=2, isolation="process")

    gradebook.grade_all(students, course, store, args, replace(RUBRIC, submission_timeout=1.0),
                        command=STAND_IN_SLOT)

    hangs, segv, graded = students
    assert hangs.results is None and "ended with timeout" in hangs.error and "stopped after 1.5 s" in hangs.error
    assert segv.results is None and "ended with crashed" in segv.error and "SIGSEGV" in segv.error
    assert graded.results.score == 20.0 and not graded.error and graded.isolated == {"sdpa": 20.0}
    cached = [json.loads(p.read_text()) for p in (store / "cache").iterdir()]
    assert cached == [graded.results.data], "the cache holds the one grade, not the failures"


def test_the_reruns_of_the_evidence_take_only_the_cores_the_grades_leave_free():
    """A rerun waits while every slot grades, takes a core as a slot runs out of work, takes every core
    once the grades are done, and none starts once the pass has stopped."""
    import threading
    import time

    cores = gradebook.SpareCores(2)
    ran, stopped = [], []
    hold = {name: threading.Event() for name in ("first", "second", "third")}

    def rerun(name):
        try:
            with cores.core():
                ran.append(name)
                hold[name].wait(timeout=60)
        except gradebook.PassStopped:
            stopped.append(name)

    def soon(seen) -> bool:
        """Whether `seen()` holds within 10 s."""
        deadline = time.monotonic() + 10
        while not seen() and time.monotonic() < deadline:
            time.sleep(0.02)
        return seen()

    threads = {name: threading.Thread(target=rerun, args=(name,)) for name in hold}
    try:
        threads["first"].start()
        time.sleep(0.5)
        assert ran == [], "a rerun ran beside two slots grading"
        cores.grading(1)
        assert soon(lambda: ran == ["first"]), "a slot left with nothing to grade leaves its core to a rerun"
        threads["second"].start()
        time.sleep(0.5)
        assert ran == ["first"], "a rerun ran beside the slot still grading and the other rerun"
        cores.grading(0)
        assert soon(lambda: ran == ["first", "second"]), "the grades done, every core is the reruns'"
        threads["third"].start()
        cores.stop()
        assert soon(lambda: stopped == ["third"]) and ran == ["first", "second"]
    finally:
        for name, thread in threads.items():
            hold[name].set()
            if thread.is_alive():
                thread.join(timeout=10)


def test_slots_started_ahead_grade_the_gradebooks_pass_and_end_with_it(tmp_path, monkeypatch):
    """The gradebook starts its slots before reading nbgrader's database; those very slots grade, no
    other starts, and every one of them has exited when the pass is done, also when all was cached."""
    from autograder.runners import slot

    course, store, students = gradebook_class(tmp_path, "first", "second", "third")
    args = Namespace(force=False, jobs=2, isolation="process")
    options = gradebook.isolated_options(args, course)
    other = slot.Slots(options, STAND_IN_SLOT, started=1)
    with pytest.raises(ValueError, match="other options"):
        slot.grade_in_slots([], tmp_path, replace(options, after_due_date=False), RUBRIC, "process", lambda: 90, 2,
                            print, command=STAND_IN_SLOT, ahead=other)
    other.close()
    for cold in (True, False):
        ahead = slot.Slots(options, STAND_IN_SLOT, started=2)
        monkeypatch.setattr(slot, "Slot", None)  # no slot may be started past this point
        gradebook.grade_all(students, course, store, args, RUBRIC, command=STAND_IN_SLOT, ahead=ahead)
        monkeypatch.undo()
        assert [s.results.score for s in students] == [20.0] * 3, cold
        for started in ahead.slots:
            assert started.process.wait(timeout=10) == 0, "a slot ahead is left running"
        assert not ahead.logs.exists()


def test_the_results_file_a_slot_wrote_is_its_answer_whatever_its_time_and_an_older_one_never_is(tmp_path):
    """A file's time is kept to a clock tick, and a slot ready ahead may answer within one: the
    answer is the file the slot wrote (the stand-in sets its time to 1970), never one left from before."""
    from autograder.runners import slot

    def stand_in(writes: bool):
        return (sys.executable, "-c", f"WRITES = {writes}\n" + textwrap.dedent("""
            import json, os, sys
            for line in sys.stdin:
                job = json.loads(line)
                print(json.dumps({"started": job["id"]}), flush=True)
                if WRITES:
                    with open(job["results"], "w") as f:
                        json.dump({"score": 20.0, "output": "Score: 20 / 90", "tests": [], "extra_data": {
                            "format": %d, "status": "graded", "max_score": 90.0, "parts": {}}}, f)
                    os.utime(job["results"], ns=(0, 0))
                print(json.dumps({"done": job["id"], "code": 0}), flush=True)
        """ % results.FORMAT))

    target = tmp_path / "alice.json"
    for writes, status, score in ((True, "graded", 20.0), (False, "crashed", 0.0)):
        # an older graded result at the target, as a batch run before left it
        target.write_text(json.dumps({"score": 90.0, "output": "Score: 90 / 90", "tests": [], "extra_data": {
            "format": results.FORMAT, "status": "graded", "max_score": 90.0, "parts": {}}}))
        assert slot.grade_in_child(slot.Submission("alice", tmp_path / "alice.py"), target, GradeOptions(), RUBRIC,
                                   "process", lambda: 90, command=stand_in(writes)) == status
        found = results.load(target)
        assert (found.status.value, found.score) == (status, score), writes


def test_a_failure_result_says_why_in_the_gradebook_report(tmp_path):
    target = tmp_path / "r.json"
    grade_file.write_failure(target, "alice", "error", "This submission could not be graded: no mhsa.py", RUBRIC,
                             0, "sandbox")
    found = results.load(target)
    assert found.status == "error" and found.score == 0
    assert gradebook.failure_reason("error", found) == \
        "the isolated grade ended with error: This submission could not be graded: no mhsa.py"
    assert gradebook.failure_reason("crashed", None) == "the isolated grade ended with crashed: no results file"
    assert json.loads(target.read_text())["extra_data"]["max_score"] == 0


def test_the_cluster_sends_what_a_grade_reads_within_the_local_limit(tmp_path):
    """cluster.pack: a folder's files travel read as the local route reads them, bounded by its limit;
    an oversized mhsa.py is refused without being read (a sparse 64 GB file here), a file no grade
    reads is not sent, and the folder rebuilt on a worker routes exactly as the original does."""
    huge = tmp_path / "huge"
    huge.mkdir()
    with open(huge / "mhsa.py", "wb") as f:
        f.truncate(64 << 30)
    with pytest.raises(GradingError, match=f"over the {MAX_SUBMISSION_BYTES:,} byte limit"):
        cluster.pack(huge)

    work = tmp_path / "alice" / "assignment"
    work.mkdir(parents=True)
    (work / "mhsa.py").write_text((paths.REPO / "assignment" / "mhsa.py").read_text())  # the stub: notebooks weighed
    (work / "knowledge.py").write_text("Q1 = 'b'\n")
    notebook = (paths.REPO / "assignment" / "mhsa.ipynb").read_text()
    for i in range(route.NOTEBOOKS_WEIGHED + 2):
        (work / f"copy{i}.ipynb").write_text(notebook)
    (work / "weights.bin").write_bytes(bytes(1 << 20))
    os.mkfifo(work / "pipe.py")  # read by nothing: a FIFO would block a reader that tried
    kind, files = cluster.pack(tmp_path / "alice")
    assert kind == "folder"
    assert sorted(files) == ["assignment/copy0.ipynb", "assignment/copy1.ipynb", "assignment/copy2.ipynb",
                             "assignment/copy3.ipynb", "assignment/copy4.ipynb", "assignment/knowledge.py",
                             "assignment/mhsa.py"]
    assert files["assignment/copy3.ipynb"] == files["assignment/copy4.ipynb"] == b"", "only counted by the route"
    rebuilt = cluster.unpack("alice", kind, files, tmp_path / "worker")
    original, remote = route.pick(tmp_path / "alice"), route.pick(rebuilt)
    assert remote.path.relative_to(rebuilt) == original.path.relative_to(tmp_path / "alice")
    assert "2 more notebook(s)" in original.note
    assert remote.note.replace(str(rebuilt), "ALICE") == original.note.replace(str(tmp_path / "alice"), "ALICE")
