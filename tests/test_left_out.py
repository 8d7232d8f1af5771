"""What a maximum leaves out of the rubric, and why: grades.csv's left_out column and the batch's summary.

The results are made by the grader's own stages and results model (grade_knowledge, timing_part,
to_gradescope, write_failure) or by a real `grade --batch`, so the reasons read are the notes the
grader writes; a result with nothing left out has a blank cell and no line.
"""
import csv
import subprocess
import sys
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest

from autograder.core import paths
from autograder.core import rubric as rubric_file
from autograder.intake import knowledge
from autograder.pipeline import grading
from autograder.pipeline.grade_file import write_failure
from autograder.record import results
from autograder.record.scoring import PartScore, to_units
from autograder.runners import batch

REPO = paths.REPO
RUBRIC = rubric_file.load()
BEFORE_DUE = {"due": datetime(2999, 1, 1, tzinfo=timezone.utc)}  # the knowledge check withheld
AFTER_DUE = {"knowledge_feedback": knowledge.PER_QUESTION}       # the knowledge check scored
TIMED = {"status": "passed", "score": 5.0, "output": "timed on the GPU: passed"}


def no_cuda_timing(monkeypatch) -> dict:
    """What gpu_checks' timing returns on a machine without CUDA (this one made to be one)."""
    import torch
    from gpu_checks import grading as timing

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.delenv(timing.REQUIRE_CUDA_ENV, raising=False)
    return timing.grade_timing(REPO / "reference" / "mhsa.py", RUBRIC, None)


def graded(name: str, knowledge_settings: dict, timing: dict) -> dict:
    """A results file as a grade writes it: every code part at full marks, the knowledge check through
    its stage with `knowledge_settings`, the timing part from the verdict `timing`."""
    part = RUBRIC.parts["knowledge"]
    rubric = replace(RUBRIC, parts={**RUBRIC.parts, "knowledge": replace(part, settings={**part.settings,
                                                                                           **knowledge_settings})})
    code = {name: PartScore(name, p.title, to_units(p.points), to_units(p.points))
            for name, p in RUBRIC.code_parts.items()}
    grade = grading.Grade(name, "process", ("public", "hidden"), parts=code, knowledge_answers={})
    grade = grading.grade_knowledge(SimpleNamespace(rubric=rubric), grade)
    row, timing_part = grading.timing_part(timing, RUBRIC.parts["timing"], "CUDA")
    grade = replace(grade, rows=(*grade.rows, row), parts={**grade.parts, "timing": timing_part})
    return results.to_gradescope(grade, rubric)


def grades_csv(folder: Path, files: dict) -> tuple:
    """(grades.csv's rows as the batch's writer returns them, the file read back by column name)."""
    for name, data in files.items():
        results.write_json_atomic(folder / f"{name}.json", data)
    table = results.write_grades_csv(folder, list(files), RUBRIC)
    with open(folder / results.GRADES_CSV, newline="") as f:
        return table, {row["submission"]: row for row in csv.DictReader(f)}


def test_grades_csv_says_what_a_withheld_knowledge_check_and_an_untimed_part_leave_out(tmp_path, monkeypatch):
    _, rows = grades_csv(tmp_path, {"alice": graded("alice", BEFORE_DUE, no_cuda_timing(monkeypatch)),
                                    "bob": graded("bob", AFTER_DUE, TIMED)})
    alice, bob = rows["alice"], rows["bob"]
    knowledge_left, timing_left = alice["left_out"].split("; ")
    assert knowledge_left.startswith("knowledge 5 (withheld until 2999-01-01 00:00 UTC")
    assert timing_left == "timing 5 (not timed: no CUDA device)"
    assert float(alice["max_score"]) + 5 + 5 == sum(p.points for p in RUBRIC.parts.values())
    assert bob["left_out"] == "" and float(bob["max_score"]) == 100, "nothing left out: a blank cell"
    header = list(rows["alice"])
    assert header[:4] == ["submission", "score", "max_score", "left_out"] and header[-3:] == [
        "isolation", "status", "review"]


def test_the_batch_summary_says_what_the_maxima_leave_out_and_nothing_where_nothing_is(tmp_path, monkeypatch):
    untimed = no_cuda_timing(monkeypatch)
    table, _ = grades_csv(tmp_path, {"alice": graded("alice", BEFORE_DUE, untimed),
                                     "carol": graded("carol", BEFORE_DUE, untimed),
                                     "bob": graded("bob", AFTER_DUE, TIMED)})
    lines = batch.summary(table, tmp_path, total=3, graded_now=3).splitlines()
    assert "not every submission has the same maximum: 90 for 2 submissions, 100 for 1 submission" in lines
    left_out = next(line for line in lines if line.startswith("the maximum (90) of 2 submissions leaves out: "))
    assert "knowledge 5 (withheld until 2999-01-01" in left_out and left_out.endswith(
        "for all 2; timing 5 (not timed: no CUDA device) for all 2")
    assert lines[0].split() == ["submission", "score", *RUBRIC.parts, "status"], "left_out is not a table column"

    complete, _ = grades_csv(tmp_path / "complete", {"bob": graded("bob", AFTER_DUE, TIMED)})
    text = batch.summary(complete, tmp_path, total=1, graded_now=1)
    assert "leaves out" not in text and "same maximum" not in text


def test_a_result_without_a_grade_says_its_maximum_leaves_out_points_it_cannot_name(tmp_path):
    """A failure records no parts: the points its maximum leaves out are stated, the parts are not guessed."""
    write_failure(tmp_path / "dave.json", "dave", "timeout", "stopped after 300 s", RUBRIC, to_units(90), "process")
    results.write_grades_csv(tmp_path, ["dave"], RUBRIC)
    with open(tmp_path / results.GRADES_CSV, newline="") as f:
        dave = next(csv.DictReader(f))
    assert dave["left_out"] == "10 points (no grade (timeout): no parts recorded)"


def test_reasons_are_the_graders_own_few_words_never_a_guess(monkeypatch):
    """The reason is the one the grading stage recorded with the part (left_out_because); a results
    file without one (another autograder's) shows the first line of its notes as written."""
    def reason(notes, max_score=5.0, **recorded):
        data = {"extra_data": {"max_score": 95.0, "status": "graded", "parts": {
            "knowledge": {"score": 0.0, "max_score": max_score, "graded": False, "notes": notes, **recorded}}}}
        return [str(item) for item in results.left_out(results.Results.of(data), RUBRIC)]

    monkeypatch.setattr(paths, "KNOWLEDGE_KEY", paths.REPO / "no-such-key.toml")  # a student's release
    without_key = graded("erin", AFTER_DUE, TIMED)["extra_data"]["parts"]["knowledge"]
    assert reason(without_key["notes"], left_out_because=without_key["left_out_because"]) == [
        "knowledge 5 (the answer key is not in this copy of the repository)"]
    assert reason([knowledge.withheld_note({})], left_out_because=knowledge.withheld_reason({})) == [
        f"knowledge 5 ({knowledge.withheld_note({}).split(', so that')[0]})"]
    assert reason(["a note this grader does not write\nits second line"]) == [
        "knowledge 5 (a note this grader does not write)"], "shown as written, not reworded"
    assert reason([]) == ["knowledge 5 (not graded, no reason recorded)"]
    assert reason(["x"], max_score=0.0) == ["knowledge 5 (x)"], "an older grader's 0: the rubric's points"


@pytest.fixture(scope="module")
def real_batch(tmp_path_factory):
    """`grade DIR --batch` as a TA runs it, the knowledge check due in the future, with a rubric whose
    timing part is switched off (so that a CUDA machine grades the same)."""
    root = tmp_path_factory.mktemp("batch")
    (root / "subs").mkdir()
    (root / "subs" / "alice.py").write_text((REPO / "reference" / "mhsa.py").read_text())
    rubric = root / "rubric.toml"
    rubric.write_text((REPO / "rubric.toml").read_text().replace("# enabled = false", "enabled = false", 1))
    assert "timing" not in rubric_file.load(rubric).parts
    run = subprocess.run([sys.executable, "-m", "autograder", "grade", root / "subs", "--batch", "--out", root / "out",
                          "--rubric", rubric, "--due", "2999-01-01T00:00:00+00:00", "--isolation", "process", "--jobs", "1"],
                         cwd=REPO, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    return root / "out", run.stdout


def test_a_batch_writes_the_left_out_points_into_grades_csv_and_says_them_under_its_table(real_batch):
    out, stdout = real_batch
    with open(out / results.GRADES_CSV, newline="") as f:
        alice = next(csv.DictReader(f))
    assert alice["max_score"] == "90.0" and alice["score"] == "90.0"
    assert alice["left_out"] == "knowledge 5 (withheld until 2999-01-01 00:00 UTC (grade --due))"
    assert ("the maximum (90) of 1 submission leaves out: knowledge 5 (withheld until 2999-01-01 00:00 UTC "
            "(grade --due)) for 1") in stdout.splitlines()
