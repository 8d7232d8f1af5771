"""Grades held for review: the run-time monitor's canary, the held status through the results model,
the rubric's held_score, and the `review` command that releases or confirms a hold."""
import csv
import hashlib
import json
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch

from autograder.cli import review
from autograder.core import rubric as rubric_file
from autograder.core.errors import ForbiddenApiError
from autograder.core.paths import REFERENCE
from autograder.isolation.guest.executor import MONITOR_SILENT, ForbiddenApiMonitor
from autograder.pipeline import grading
from autograder.record import results, reviews
from autograder.record.grade import Status
from autograder.testing.backends import InProcessBackend
from autograder.testing.calls import Call

RUBRIC = rubric_file.load()
FAST = replace(RUBRIC, limits=replace(RUBRIC.limits, call_timeout=6.0, import_timeout=30.0))
ATTRGETTER = '\nimport operator\n_internals = operator.attrgetter("_" + "C")(torch)\n'


def test_the_monitor_sees_its_canary_and_reports_when_it_does_not():
    q = torch.randn(1, 2, 3, 4)
    monitor = ForbiddenApiMonitor()
    with monitor:
        torch.nn.functional.scaled_dot_product_attention(q, q, q)
        monitor.check_canary()
    assert monitor.used and not monitor.silent, (monitor.used, monitor.silent)
    popped = ForbiddenApiMonitor()
    with popped:
        with torch.overrides._pop_mode_temporarily():  # the function mode taken off torch's stack
            popped.check_canary()
    assert popped.silent == ["its check operation was not recorded"] and not popped.used, popped.silent


def test_only_the_trusted_reference_runs_unmonitored_and_computes_the_same(tmp_path):
    """The hidden suites' reference (InProcessBackend trusted) skips the monitor, which would only
    slow it down: its outcomes are those of the monitored run, and a file run as a submission
    in-process (the notebook's kernel, the student's own run) is still monitored."""
    x = torch.randn(2, 5, 8)
    call = Call("MultiHeadSelfAttention", (x,), init={"d_model": 8, "num_heads": 2}, grad_outputs=torch.ones(2, 5, 8))
    trusted, watched = InProcessBackend(REFERENCE, trusted=True).run(call), InProcessBackend(REFERENCE).run(call)
    assert torch.equal(trusted.output, watched.output)
    assert all(torch.equal(trusted.param_grads[k], g) for k, g in watched.param_grads.items())
    library = tmp_path / "library.py"
    library.write_text("import torch\n\ndef attend(q):\n"
                       "    return torch.nn.functional.scaled_dot_product_attention(q, q, q)\n")
    q = torch.randn(1, 2, 3, 4)
    assert InProcessBackend(library, trusted=True).run(Call("attend", (q,))).forbidden == []
    with pytest.raises(ForbiddenApiError, match="scaled_dot_product_attention"):
        InProcessBackend(library).run(Call("attend", (q,)))


def test_a_reference_with_an_untraceable_reach_is_held_with_its_earned_score_kept(tmp_path):
    """Correct code plus `operator.attrgetter("_" + "C")(torch)`: every test passes, yet the total is
    withheld (0) with the reason, and each review decision is already known."""
    path = tmp_path / "held.py"
    path.write_text(REFERENCE.read_text() + ATTRGETTER)
    grade = grading.grade(path, suites=("public",), isolation="process", rubric=FAST, extras=False)
    assert grade.status == Status.HELD and grade.withheld
    assert grade.score == 0 and grade.earned_units == grade.max_units > 0 and grade.confirmed_units == 0
    data = results.to_gradescope(grade, FAST)
    assert data["score"] == 0 and data["extra_data"]["status"] == "held" and data["tests"]
    assert "HELD FOR REVIEW" in data["output"] and "attrgetter with a computed name" in data["output"]
    assert data["extra_data"]["held"]["released_score"] == grade.max_score
    assert "HELD FOR REVIEW" in results.table(grade, FAST)
    held = results.load(write(tmp_path / "r.json", data))
    assert held is not None and held.status == Status.HELD, "a held result is a valid results file"
    row = dict(zip(results.csv_header(FAST), results.csv_row("held", held, FAST)))
    assert row["status"] == "held" and row["review"].startswith("held for review: line ")

    released = results.decide(held, "release", "a harmless print of torch._C")
    assert released.score == grade.max_score and released.status == Status.GRADED
    assert released.held.decision == "release" and released.held.note == "a harmless print of torch._C"
    confirmed = results.decide(released, "confirm")
    assert confirmed.score == 0 and all(p.score == 0 for p in confirmed.parts.values())
    assert results.decide(confirmed, "release").parts == held.parts


def test_held_score_earned_shows_the_earned_total_still_flagged():
    grade = grading.Grade("x", "process", ("public",), parts={"sdpa": grading.scoring.PartScore("sdpa", "t", 7, 20)},
                          held={"sdpa": ["line 3: reaches into torch._C"]})
    for policy, total in (("withheld", 0), ("earned", 7)):
        rubric = replace(RUBRIC, results=replace(RUBRIC.results, held_score=policy))
        held = grading.hold_for_review(SimpleNamespace(rubric=rubric, days_late=0), grade)
        assert held.status == "held" and held.units == total and held.confirmed_units == 0


def test_an_unknown_held_score_is_refused(tmp_path):
    text = (rubric_file.RUBRIC_FILE.read_text()).replace('held_score = "withheld"', 'held_score = "half"')
    (tmp_path / "rubric.toml").write_text(text)
    with pytest.raises(ValueError, match="held_score"):
        rubric_file.load(tmp_path / "rubric.toml")


def held_results(name: str, reasons=("line 9: reaches into torch._C, which the grader cannot follow",)) -> dict:
    return {"score": 0.0, "output": "Score: 0 / 20\nHELD FOR REVIEW", "tests": [],
            "extra_data": {"format": results.FORMAT, "submission": name, "status": "held", "max_score": 20.0,
                           "isolation": "process",
                           "parts": {"sdpa": {"score": 12.0, "max_score": 20.0, "graded": True, "notes": []}},
                           "held": {"reasons": list(reasons), "parts": ["sdpa"], "withheld": True,
                                    "released_score": 12.0, "confirmed_score": 0.0, "decision": None,
                                    "sha256": hashlib.sha256(name.encode()).hexdigest()}}}


def write(path, data):
    path.write_text(json.dumps(data))
    return path


def test_review_releases_a_grade_and_a_rerun_keeps_the_decision(tmp_path, capsys):
    out = tmp_path / "grades"
    out.mkdir()
    write(out / "alice.json", held_results("alice"))
    write(out / "bob.json", held_results("bob"))
    assert review.run(SimpleNamespace(grades=out, rubric=rubric_file.RUBRIC_FILE, release=None, confirm=None, score=None, unscore=None, note="")) == 0
    assert "alice: HELD" in capsys.readouterr().out

    assert review.run(SimpleNamespace(grades=out, rubric=rubric_file.RUBRIC_FILE, release="alice", confirm=None, score=None, unscore=None, note="prints torch._C")) == 0
    rows = {r["submission"]: r for r in csv.DictReader((out / "grades.csv").open())}
    assert rows["alice"]["score"] == "12.0" and rows["alice"]["status"] == "graded"
    assert rows["alice"]["review"].startswith("released after review") and rows["bob"]["status"] == "held"

    # A rerun (--force) writes the held result again: the recorded decision applies to the same hold,
    # not to a hold with other reasons (a changed submission).
    write(out / "alice.json", held_results("alice"))
    write(out / "bob.json", held_results("bob"))
    reviews.record(out, "bob", "confirm")
    write(out / "bob.json", held_results("bob", reasons=("line 40: uses exec, which the grader cannot follow",)))
    assert reviews.reapply(out, ["alice", "bob"]) == ["alice"]
    assert json.loads((out / "alice.json").read_text())["score"] == 12.0
    assert json.loads((out / "bob.json").read_text())["extra_data"]["status"] == "held"


def test_a_submission_named_like_the_review_record_keeps_its_row_and_the_decisions(tmp_path):
    """The review record lives in its own folder: a submission named `reviews` has the results file
    reviews.json, which the record must neither read nor overwrite."""
    out = tmp_path / "grades"
    out.mkdir()
    student = {**held_results("reviews"), "score": 20.0, "extra_data": {
        **held_results("reviews")["extra_data"], "status": "graded", "held": None}}
    write(out / "reviews.json", student)
    write(out / "alice.json", held_results("alice"))
    assert review.run(SimpleNamespace(grades=out, rubric=rubric_file.RUBRIC_FILE, release="alice", confirm=None, score=None, unscore=None, note="")) == 0
    assert json.loads((out / "reviews.json").read_text()) == student
    rows = {r["submission"]: r for r in csv.DictReader((out / "grades.csv").open())}
    assert set(rows) == {"alice", "reviews"} and rows["reviews"]["score"] == "20.0"
    write(out / "alice.json", held_results("alice"))  # a rerun (--force) holds alice again
    assert reviews.reapply(out, ["alice", "reviews"]) == ["alice"]


@pytest.mark.parametrize("name, message", [("carol", "no results"), ("dave", "not held")])
def test_review_refuses_what_it_cannot_decide(tmp_path, capsys, name, message):
    write(tmp_path / "dave.json", {**held_results("dave"), "extra_data": {
        **held_results("dave")["extra_data"], "status": "graded", "held": None}})
    assert review.run(SimpleNamespace(grades=tmp_path, rubric=rubric_file.RUBRIC_FILE, release=name, confirm=None, score=None, unscore=None, note="")) == 2
    assert message in capsys.readouterr().out


def test_the_class_reports_integrity_section_lists_holds_and_decisions():
    from autograder.reporting import sources, tables

    held = sources.from_results(results.Results.of(held_results("alice")), "alice", FAST)
    released = sources.from_results(results.decide(results.Results.of(held_results("bob")), "release"), "bob", FAST)
    rows = tables.integrity([held, released]).rows
    assert ["alice", "held for review", "line 9: reaches into torch._C, which the grader cannot follow"] in rows
    assert ["bob", "released after review", "line 9: reaches into torch._C, which the grader cannot follow"] in rows
    assert not held.graded, "a withheld total is not counted in the class's scores"


def gradebook_student(name="erin", held=True):
    from autograder.runners import gradebook

    data = held_results(name)
    data["extra_data"]["parts"]["sdpa"]["score"] = 20.0
    data["extra_data"]["held"]["released_score"] = 20.0
    if not held:
        data["extra_data"]["held"] = None
        data["extra_data"]["status"] = "graded"
    return gradebook.Student(name, in_kernel={"sdpa": 20.0}, results=results.Results.of(data))


def test_the_gradebook_shows_a_held_notebook_and_withholds_its_held_parts():
    from autograder.runners import gradebook

    student = gradebook_student()
    assert student.status == "held" and gradebook.parts_to_write("flagged", student) == {"sdpa"}
    assert "HELD FOR REVIEW: line 9" in gradebook.table([student])
    row = next(csv.DictReader(gradebook.csv_report([student]).splitlines()))
    assert row["status"] == "held" and row["review"].startswith("held: line 9")
    cells = [SimpleNamespace(name="test_sdpa_public_1", max_score=6.0, auto_score=6.0, manual_score=None)]
    [(score, reason)] = gradebook.cell_scores(cells, student, {"sdpa"}).values()
    assert score == 0.0 and reason.startswith("Held for review") and "torch._C" in reason
    assert results.load(write_tmp(student.results.data), graded_only=True) is not None, "a held isolated grade is a grade"


def write_tmp(data):
    import tempfile
    from pathlib import Path

    path = Path(tempfile.mkdtemp()) / "r.json"
    return write(path, data)


def test_accepting_a_notebook_takes_this_commands_scores_out_and_keeps_a_tas_override():
    """What `gradebook --accept` does to the cells: the scores this command wrote (its ledger) come
    out, so the in-kernel score stands; a TA's own manual score stays; nothing is written again."""
    from autograder.runners import gradebook

    student = gradebook_student()
    student.accepted = True
    ours = SimpleNamespace(name="test_sdpa_public_1", auto_score=6.0, manual_score=0.0, needs_manual_grade=False)
    tas = SimpleNamespace(name="test_sdpa_hidden_1", auto_score=14.0, manual_score=10.0, needs_manual_grade=False)
    ledger = gradebook.apply([ours, tas], {}, {"test_sdpa_public_1": {"score": 0.0, "reason": "held"}}, student)
    assert ledger == {} and ours.manual_score is None and tas.manual_score == 10.0
    assert student.status == "accepted" and gradebook.parts_to_write("isolated", student) == set()
    assert "accepted after review" in gradebook.table([student])


SWAPPED_MONITOR = '''

from torch.overrides import TorchFunctionMode


class _PassThrough(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):
    torch._C._pop_torch_function_stack()                      # the grader's function mode, gone for good
    torch._C._push_on_torch_function_stack(_PassThrough())    # an inert one in its place
    mask = to_additive_mask(attn_mask, q.dtype)
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)) + (0 if mask is None else mask), -1)
    return weights @ v, weights
'''


def test_a_monitor_swapped_out_at_run_time_holds_the_grade_even_without_the_scan(tmp_path):
    """The canary on its own: with the static scan left out of the stages, a submission that replaces
    the worker's function mode by an inert one is held, with the monitor's own reason."""
    from autograder.pipeline.context import GradingContext

    path = tmp_path / "swapped.py"
    path.write_text(REFERENCE.read_text() + SWAPPED_MONITOR)
    ctx = GradingContext.create(path, suites=("public",), isolation="process", rubric=FAST, extras=False)
    grade = grading.run(ctx, stages=tuple(s for s in grading.STAGES if s is not grading.static_scan))
    assert grade.status == Status.HELD and grade.score == 0
    assert any(MONITOR_SILENT in r for reasons in grade.held.values() for r in reasons), grade.held
    assert "sdpa" in grade.held


def test_gradebook_accept_keeps_the_in_kernel_grade_in_nbgrader_in_one_command(tmp_path):
    """`gradebook --accept STUDENT` on a real nbgrader gradebook: the score `gradebook --write` stored
    (its ledger) comes out, a TA's override stays, the flag is cleared, and the acceptance is recorded
    against the notebook's checksum."""
    from nbgrader.api import Gradebook

    from autograder.runners import gradebook

    course = tmp_path / "course"
    notebook_file = course / "submitted" / "s1" / "mhsa" / "mhsa.ipynb"
    notebook_file.parent.mkdir(parents=True)
    notebook_file.write_text('{"cells": []}')
    (course / "nbgrader_config.py").write_text("c = get_config()\n")
    url = f"sqlite:///{course / 'gradebook.db'}"
    with Gradebook(url) as gb:
        gb.add_assignment("mhsa")
        gb.add_notebook("mhsa", "mhsa")
        for cell in ("test_sdpa_public_1", "test_sdpa_hidden_1"):
            gb.add_grade_cell(cell, "mhsa", "mhsa", max_score=10.0, cell_type="code")
        gb.add_student("s1")
        gb.add_submission("mhsa", "s1")
        ours, tas = (gb.find_grade(c, "mhsa", "mhsa", "s1") for c in ("test_sdpa_public_1", "test_sdpa_hidden_1"))
        ours.auto_score, ours.manual_score = 10.0, 0.0    # withheld by gradebook --write
        tas.auto_score, tas.manual_score = 10.0, 7.0      # a TA's override
        gb.find_submission_notebook("mhsa", "mhsa", "s1").flagged = True
        gb.db.commit()
    saved = gradebook.results_path(course, "mhsa", "s1")
    saved.parent.mkdir(parents=True)
    saved.write_text(json.dumps({**held_results("s1"), "extra_data": {
        **held_results("s1")["extra_data"], "written_to_gradebook": {"test_sdpa_public_1": {"score": 0.0}}}}))

    args = SimpleNamespace(course=course, assignment="mhsa", accept=["s1"])
    assert gradebook.run(args) == 0
    with Gradebook(url) as gb:
        scores = {g.name: g.score for g in gb.find_submission_notebook("mhsa", "mhsa", "s1").grades}
        assert scores == {"test_sdpa_public_1": 10.0, "test_sdpa_hidden_1": 7.0}
        assert not gb.find_submission_notebook("mhsa", "mhsa", "s1").flagged
    accepted = gradebook.read_accepted(course / gradebook.STORE / "mhsa")
    assert accepted == {"s1": gradebook.checksum(notebook_file)}
    assert json.loads(saved.read_text())["extra_data"]["written_to_gradebook"] == {}
