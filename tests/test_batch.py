"""Batch grading: long-lived grader slots, resumable, with a results file for every outcome.

Most tests run autograder.runners.batch in this process with a stand-in for a grader slot
(a few lines of Python that behave by the submission's name) so that timeouts and crashes are quick
to provoke; the resume test runs the real command in a real subprocess and kills it midway.
"""
import csv
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from argparse import Namespace
from dataclasses import replace
from pathlib import Path

import pytest

from autograder.core import paths
from autograder.core import rubric as rubric_file
from autograder.pipeline import grade_file
from autograder.record import results
from autograder.runners import batch, slot

REPO = rubric_file.REPO
RUBRIC = rubric_file.load()
# Stands in for a grader slot (`python -m autograder.runners.slot OPTIONS`, one JSON job a line on stdin): what
# it does depends on the submission's name. Its results say what produced them, as a grade's do.
FAKE_SLOT = f"FORMAT = {results.FORMAT}\n" + textwrap.dedent("""
    import argparse, json, os, signal, sys, time
    from pathlib import Path
    from autograder.core import rubric as rubric_file
    from autograder.pipeline.grade_file import GradeOptions, graded_with
    parser = argparse.ArgumentParser()
    GradeOptions.add_arguments(parser)
    options = GradeOptions.from_args(parser.parse_args())
    for line in sys.stdin:
        job = json.loads(line)
        sub, results, name = job["path"], job["results"], os.path.basename(job["path"])
        print(json.dumps({"started": job["id"]}), flush=True)
        if "slow" in name:
            time.sleep(60)
        if "segv" in name:
            os.kill(os.getpid(), signal.SIGSEGV)
        if "noresults" in name:  # says it could not grade, but leaves no results file behind
            print(json.dumps({"done": job["id"], "code": 2}), flush=True)
            continue
        data = {"score": 7.5, "execution_time": 0.1, "output": " ".join(sys.argv[1:]), "tests": [],
                "extra_data": {"format": FORMAT, "submission": name, "max_score": 90.0, "isolation": "process", "status": "graded",
                               "parts": {"sdpa": {"score": 7.5, "max_score": 20.0, "graded": True, "notes": []}},
                               "graded_with": graded_with(Path(sub), options, rubric_file.load(options.rubric))}}
        if "empty" in name:
            data.update(score=0.0, output="This submission could not be graded: the folder holds no mhsa.py")
            data["extra_data"].update(status="error", parts={})
        with open(results + ".new", "w") as f:
            json.dump(data, f)
        os.replace(results + ".new", results)  # atomically, as `grade` does
        print(json.dumps({"done": job["id"], "code": 2 if "empty" in name else 0}), flush=True)
""")
FAKE = (sys.executable, "-c", FAKE_SLOT)


def batch_args(folder, out, **overrides):
    return Namespace(**{"path": folder, "out": out, "jobs": 2, "force": False, "suite": "public", "isolation": "process",
                        "timeout": None, "hide": [], "batch": True, "timing_device": None, "days_late": 0.0,
                        "after_due_date": False, "due": None, "due_from": "", "rubric": paths.RUBRIC_FILE, **overrides})


def read_csv(out):
    return {row["submission"]: row for row in csv.DictReader((out / "grades.csv").open())}


def test_submissions_are_files_notebooks_and_folders_and_names_stay_apart(tmp_path):
    for name in ("alice.py", "alice.py.py", "bob.ipynb", "carol", "alice", ".hidden.py", "__pycache__", "notes.txt"):
        (tmp_path / name).mkdir() if "." not in name or name == "__pycache__" else (tmp_path / name).write_text("")
    (tmp_path / "mallory.py").symlink_to(REPO / "reference" / "mhsa.py")
    found = {s.name: s.path.name for s in slot.discover(tmp_path)}
    assert found == {"alice": "alice", "alice.py": "alice.py", "alice.py~2": "alice.py.py", "bob": "bob.ipynb",
                     "carol": "carol"}, "every submission has a results file of its own; links are skipped"


def test_every_outcome_gets_a_results_file_and_a_csv_row(tmp_path, capsys, monkeypatch):
    folder, out = tmp_path / "subs", tmp_path / "out"
    folder.mkdir()
    for name in ("good.py", "slow.py", "segv.py", "noresults.py"):
        (folder / name).write_text("")
    (folder / "empty").mkdir()
    rubric = replace(RUBRIC, submission_timeout=3.0)
    monkeypatch.setattr(grade_file, "WRAP_UP_S", 0.5)  # the stand-in has nothing to wrap up: killed at 3.5 s

    assert batch.run(batch_args(folder, out), rubric=rubric, command=FAKE) == 0

    files = {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")}
    assert set(files) == {"good", "slow", "segv", "empty", "noresults"}
    assert files["good"]["score"] == 7.5
    assert files["slow"]["extra_data"]["status"] == "timeout" and "stopped after 3.5 s" in files["slow"]["output"]
    assert files["segv"]["extra_data"]["status"] == "crashed" and "SIGSEGV" in files["segv"]["output"]
    assert files["empty"]["extra_data"]["status"] == "error" and "no mhsa.py" in files["empty"]["output"]
    assert files["noresults"]["extra_data"]["status"] == "crashed" and "exit status 2" in files["noresults"]["output"]
    assert all(files[n]["score"] == 0 and files[n]["extra_data"]["max_score"] == 90.0
               for n in ("slow", "segv", "empty", "noresults"))
    rows = read_csv(out)
    assert list(next(csv.reader((out / "grades.csv").open()))) == \
        ["submission", "score", "max_score", "left_out", *RUBRIC.parts, "isolation", "status", "review"]
    assert rows["good"]["sdpa"] == "7.5" and rows["good"]["heads"] == "" and rows["good"]["status"] == "graded"
    assert {rows[n]["status"] for n in ("slow", "segv", "empty", "noresults")} == {"timeout", "crashed", "error"}
    assert rows["slow"]["score"] == "0.0" and rows["slow"]["max_score"] == "90.0"
    captured = capsys.readouterr()
    assert "[5/5]" in captured.err
    assert "no grade (timeout, crash or error) for: empty, noresults, segv, slow" in captured.out


def test_the_batch_hides_its_input_and_output_folders_from_the_workers(tmp_path):
    folder, out = tmp_path / "subs", tmp_path / "out"
    folder.mkdir()
    (folder / "good.py").write_text("")
    batch.run(batch_args(folder, out, hide=[tmp_path / "extra"]), command=FAKE)
    argv = json.loads((out / "good.json").read_text())["output"]
    for path in (folder, out, tmp_path / "extra"):
        assert f"--hide {path.resolve()}" in argv


def test_finished_grades_are_kept_and_force_regrades_them(tmp_path):
    folder, out = tmp_path / "subs", tmp_path / "out"
    folder.mkdir()
    (folder / "good.py").write_text("")
    batch.run(batch_args(folder, out), command=FAKE)
    os.utime(out / "good.json", ns=(0, 0))  # dated 1970: a file written again is dated now
    first = (out / "good.json").stat()
    (out / ".good.json.abc.tmp").write_text("{half a file")  # what a killed atomic write leaves

    batch.run(batch_args(folder, out), command=(sys.executable, "-c", "raise SystemExit(1)"))
    assert (out / "good.json").stat().st_mtime_ns == first.st_mtime_ns == 0, "a finished grade was recomputed"
    assert not list(out.glob(".*.tmp"))

    batch.run(batch_args(folder, out, force=True), command=FAKE)
    assert (out / "good.json").stat().st_mtime_ns != 0


def test_a_killed_batch_resumes_without_recomputing_finished_grades(tmp_path):
    """The real command, killed (with its whole process group, as a terminal would) once the first
    results file appears; the rerun keeps that file as it is and grades the rest."""
    folder, out = tmp_path / "subs", tmp_path / "out"
    folder.mkdir()
    for name in ("a", "b", "c"):
        (folder / f"{name}.py").write_text("def broken(:\n")  # quick to grade: nothing imports
    command = [sys.executable, "-m", "autograder", "grade", str(folder), "--batch", "--out", str(out),
               "--jobs", "1", "--suite", "public", "--isolation", "process"]
    first_run = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 start_new_session=True)
    deadline = time.monotonic() + 300
    while not list(out.glob("[abc].json")) and time.monotonic() < deadline and first_run.poll() is None:
        time.sleep(0.2)
    os.killpg(first_run.pid, signal.SIGKILL)
    first_run.wait()
    done = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in out.glob("[abc].json")}
    assert 1 <= len(done) < 3, f"the kill should have come midway: {done}"

    rerun = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in out.glob("[abc].json") if p.name in done} == done
    rows = read_csv(out)
    assert set(rows) == {"a", "b", "c"} and all(r["status"] == "graded" and r["score"] == "0.0" for r in rows.values())
    assert f"{len(done)} of 3 submissions already graded by this grader, rubric, options and submission: kept" \
        in rerun.stderr


@pytest.mark.parametrize("problem, message", [("not_a_folder", "needs a folder"), ("no_out", "needs --out")])
def test_a_batch_without_a_folder_or_an_output_is_refused(tmp_path, capsys, problem, message):
    folder = tmp_path / "x.py" if problem == "not_a_folder" else tmp_path
    folder.touch() if problem == "not_a_folder" else None
    assert batch.run(batch_args(folder, None if problem == "no_out" else tmp_path / "out"), command=FAKE) == 2
    assert message in capsys.readouterr().out


def test_summary_prints_a_score_table_per_part():
    table = [["submission", "score", "max_score", "left_out", "sdpa", "heads", "timing", "isolation", "status", "review"],
             ["alice", 25.5, 30.0, "", 20.0, 5.5, "", "sandbox", "graded", ""],
             ["bob", 0.0, 30.0, "", "", "", "", "sandbox", "timeout", ""]]
    text = batch.summary(table, Path("out"), total=2, graded_now=2)
    header, alice, bob = text.splitlines()[:3]
    assert header.split() == ["submission", "score", "sdpa", "heads", "timing", "status"]
    assert alice.split() == ["alice", "25.5/30", "20", "5.5", "-", "graded"]
    assert bob.split() == ["bob", "0/30", "-", "-", "-", "timeout"]
    assert "no grade (timeout, crash or error) for: bob" in text
    assert "leaves out" not in text, "nothing left out of the maximum: nothing said of it"


def test_a_rerun_regrades_what_changed_and_says_why(tmp_path, capsys, monkeypatch):
    """A kept grade is keyed by what produced it: the grader, the rubric, the options and the
    submission's bytes. A rerun regrades exactly the grades whose producer changed, and says how many
    and why; what did not change is kept as it is."""
    folder, out = tmp_path / "subs", tmp_path / "out"
    folder.mkdir()
    for name in ("ann", "ben", "cid"):
        (folder / f"{name}.py").write_text(f"# {name}\n")

    def rerun(**overrides) -> tuple:
        for kept in out.glob("*.json"):  # dated 1970: a file written again is dated now
            os.utime(kept, ns=(0, 0))
        assert batch.run(batch_args(folder, out, **overrides), command=FAKE) == 0
        regraded = {p.stem for p in out.glob("*.json") if p.stat().st_mtime_ns != 0}
        return regraded, capsys.readouterr().err

    assert rerun()[0] == {"ann", "ben", "cid"}
    regraded, said = rerun()
    assert not regraded and "3 of 3 submissions already graded by this grader, rubric, options and submission: kept" in said

    (folder / "ben.py").write_text("# ben, resubmitted\n")
    regraded, said = rerun()
    assert regraded == {"ben"} and "regrading 1 of 3: the submission changed" in said

    points = rubric_file.RUBRIC_FILE.read_text().replace("points = 20", "points = 25", 1)
    (tmp_path / "rubric.toml").write_text(points)
    regraded, said = rerun(rubric=tmp_path / "rubric.toml")
    assert regraded == {"ann", "ben", "cid"} and "regrading 3 of 3: the rubric graded with changed" in said

    regraded, said = rerun(rubric=tmp_path / "rubric.toml", timeout=5.0)
    assert regraded == {"ann", "ben", "cid"} and "regrading 3 of 3: the grade options changed" in said

    monkeypatch.setattr(paths, "grader_checksum", lambda root=paths.REPO: "a-fixed-hidden-test")
    regraded, said = rerun(rubric=tmp_path / "rubric.toml", timeout=5.0)
    assert regraded == {"ann", "ben", "cid"} and "regrading 3 of 3: the grader changed" in said


def test_a_results_file_that_does_not_say_what_produced_it_is_regraded(tmp_path, capsys):
    folder, out = tmp_path / "subs", tmp_path / "out"
    folder.mkdir()
    (folder / "ann.py").write_text("")
    batch.run(batch_args(folder, out), command=FAKE)
    data = json.loads((out / "ann.json").read_text())
    del data["extra_data"]["graded_with"]
    (out / "ann.json").write_text(json.dumps(data))
    capsys.readouterr()
    batch.run(batch_args(folder, out), command=FAKE)
    assert "regrading 1 of 1: its results file does not say what produced it" in capsys.readouterr().err
    assert json.loads((out / "ann.json").read_text())["extra_data"]["graded_with"]


def test_a_failure_result_says_what_produced_it_and_is_kept_while_nothing_changes(tmp_path, capsys, monkeypatch):
    """A timeout or a crash is written by the runner, not the grade: it carries what produced it too,
    so a rerun keeps it like any grade (a stuck submission is not retried for another 300 s every time)
    and regrades it once its submission changes."""
    folder, out = tmp_path / "subs", tmp_path / "out"
    folder.mkdir()
    for name in ("good.py", "slow.py", "segv.py"):
        (folder / name).write_text("")
    text = rubric_file.RUBRIC_FILE.read_text()
    (tmp_path / "rubric.toml").write_text(re.sub(r"submission_timeout_s = \S+", "submission_timeout_s = 3", text))
    monkeypatch.setattr(grade_file, "WRAP_UP_S", 0.5)
    args = batch_args(folder, out, rubric=tmp_path / "rubric.toml")
    assert batch.run(args, command=FAKE) == 0
    first = {p.stem: p.stat().st_ino for p in out.glob("*.json")}
    assert {json.loads((out / f"{n}.json").read_text())["extra_data"]["status"] for n in ("slow", "segv")} == \
        {"timeout", "crashed"}
    assert all(json.loads((out / f"{n}.json").read_text())["extra_data"]["graded_with"] for n in first)
    capsys.readouterr()

    assert batch.run(args, command=FAKE) == 0
    assert {p.stem: p.stat().st_ino for p in out.glob("*.json")} == first
    assert "3 of 3 submissions already graded by this grader, rubric, options and submission: kept" in \
        capsys.readouterr().err

    (folder / "segv.py").write_text("# fixed\n")
    for kept in out.glob("*.json"):  # dated 1970: a file written again is dated now
        os.utime(kept, ns=(0, 0))
    assert batch.run(args, command=FAKE) == 0
    assert {p.stem for p in out.glob("*.json") if p.stat().st_mtime_ns != 0} == {"segv"}
    assert "regrading 1 of 3: the submission changed" in capsys.readouterr().err


def test_a_checkout_in_another_folder_states_the_same_rubric_but_another_hidden_list_does_not(tmp_path, monkeypatch):
    """graded_with leaves out where the checkout sits: the same rubric loaded from another folder (a
    moved course folder, a cluster's worker) keeps its grades; hiding other paths does not."""
    from autograder.core import paths
    from autograder.pipeline.grade_file import GradeOptions, graded_with

    sub = tmp_path / "ann.py"
    sub.write_text("")
    options = GradeOptions()
    rubric = rubric_file.load()
    here = graded_with(sub, options, rubric)["rubric"]
    moved = tmp_path / "moved"
    monkeypatch.setattr(paths, "REPO", moved)
    as_moved = replace(rubric, hidden=tuple(moved / p.relative_to(rubric_file.REPO) for p in rubric.hidden))
    assert graded_with(sub, options, as_moved)["rubric"] == here
    assert graded_with(sub, options, replace(as_moved, hidden=(moved / "reference",)))["rubric"] != here
