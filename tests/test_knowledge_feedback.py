"""Knowledge-check feedback: nothing that depends on the key reaches a student before the due date,
so resubmitting cannot reveal it; each question's result once the rubric allows it."""
import json
from dataclasses import replace
from datetime import date, datetime, timezone
from types import SimpleNamespace

import pytest

from autograder.core import rubric as rubric_file
from autograder.intake import knowledge
from autograder.pipeline import grading
from autograder.record import results
from autograder.record.scoring import to_units

KEY = knowledge.load_key()
QUESTIONS = knowledge.autograded(knowledge.questions())
BEFORE_DUE = {"due": datetime(2999, 1, 1, tzinfo=timezone.utc)}
AFTER_DUE = {"due": date(2000, 1, 1)}


def answers(right) -> dict:
    """Every question answered with a well-formed value: right for the questions in `right` (ids or
    a count of the first ones), wrong for the others."""
    right = {q.id for q in QUESTIONS[:right]} if isinstance(right, int) else set(right)
    out = {}
    for q in QUESTIONS:
        value = KEY[q.id]
        if q.id not in right and q.kind == "choice":
            value = next(c for c in q.choices if c != value)
        elif q.id not in right:
            value = not value if q.kind == "truefalse" else value + 1
        out[q.variable] = value
    return out


def student_view(settings: dict, answers_given: dict, now=None) -> str:
    """Everything a student could see of the knowledge check in results.json, graded through the
    grade stage with a rubric whose [parts.knowledge] holds `settings`."""
    rubric = rubric_file.load()
    part = rubric.parts["knowledge"]
    rubric = replace(rubric, parts={**rubric.parts, "knowledge": replace(part, settings={**part.settings, **settings})})
    ctx = SimpleNamespace(rubric=rubric, extras=True)  # all the stage reads of a grading context
    grade = grading.grade_knowledge(ctx, grading.Grade("alice", "sandbox", ("public",), knowledge_answers=answers_given))
    data = results.to_gradescope(grade, rubric)
    data.pop("execution_time")
    return json.dumps(data, sort_keys=True)


def test_resubmitting_before_the_due_date_reveals_nothing_about_the_key():
    """The attack that found the whole key in 19 resubmissions: start from one set of answers and
    change one answer at a time, watching the feedback. Before the due date (and with no due date at
    all, the default) every feedback is the same whichever answers are right, so there is nothing to
    watch; after the due date the same resubmissions do tell (the test can fail)."""
    for settings in (BEFORE_DUE, {}):
        seen = {student_view(settings, answers(right)) for right in range(len(QUESTIONS) + 1)}
        seen |= {student_view(settings, answers([q.id])) for q in QUESTIONS}
        assert len(seen) == 1, "the feedback differs with the number or choice of right answers"
        shown = json.loads(seen.pop())
        assert shown["extra_data"]["parts"]["knowledge"]["graded"] is False and shown["score"] == 0
        row = next(t for t in shown["tests"] if t["tags"] == ["knowledge"])
        assert "status" not in row and "after the deadline" in row["output"]
    after = {student_view(AFTER_DUE, answers([q.id])) for q in QUESTIONS}
    assert len(after) == len(QUESTIONS), "after the due date each question's result is shown"


def test_before_the_due_date_the_form_of_answers_is_still_checked():
    malformed = answers(0) | {QUESTIONS[0].variable: None, QUESTIONS[1].variable: ["not", "a", "value"]}
    view = json.loads(student_view(BEFORE_DUE, malformed))
    row = next(t for t in view["tests"] if t["tags"] == ["knowledge"])
    assert f"{QUESTIONS[0].id}: not answered" in row["output"] and f"{QUESTIONS[1].id}: answer with" in row["output"]
    assert knowledge.WRONG not in row["output"]


def test_after_the_due_date_each_question_is_scored():
    view = json.loads(student_view(AFTER_DUE, answers(1)))
    rows = [t for t in view["tests"] if t["tags"] == ["knowledge"]]
    assert [r["status"] for r in rows] == ["passed"] + ["failed"] * (len(QUESTIONS) - 1)
    assert rows[1]["output"].endswith(knowledge.WRONG)
    points = rubric_file.load().parts["knowledge"].points
    assert view["score"] == pytest.approx(points / len(QUESTIONS))


def test_a_custom_rubric_decides_not_the_shipped_one():
    """The stage grades with the rubric it is given (the shipped one has no due date): a custom
    rubric's knowledge_feedback is obeyed."""
    view = json.loads(student_view({"knowledge_feedback": "per_question"}, answers(len(QUESTIONS))))
    assert view["extra_data"]["parts"]["knowledge"]["graded"] is True
    assert view["score"] == pytest.approx(rubric_file.load().parts["knowledge"].points)


@pytest.mark.parametrize("settings, now, mode", [
    ({}, datetime(2030, 1, 1, tzinfo=timezone.utc), "withheld"),
    ({"knowledge_feedback": "per_question"}, datetime(2000, 1, 1, tzinfo=timezone.utc), "per_question"),
    ({"due": datetime(2026, 12, 15, 23, 59, tzinfo=timezone.utc)}, datetime(2026, 12, 15, 23, 58, tzinfo=timezone.utc),
     "withheld"),
    ({"due": datetime(2026, 12, 15, 23, 59, tzinfo=timezone.utc)}, datetime(2026, 12, 16, tzinfo=timezone.utc),
     "per_question"),
    ({"due": date(2026, 12, 15)}, datetime(2026, 12, 15, 12, 0).astimezone(), "withheld"),
    ({"due": date(2026, 12, 15)}, datetime(2026, 12, 20, tzinfo=timezone.utc), "per_question"),
])
def test_the_rubric_decides_the_feedback(settings, now, mode):
    assert knowledge.feedback_mode(settings, now) == mode


@pytest.mark.parametrize("setting", ['"total"', '"everything"', "true"])
def test_a_setting_that_would_leak_or_is_unknown_is_refused(setting, tmp_path):
    text = rubric_file.RUBRIC_FILE.read_text().replace('# knowledge_feedback = "per_question"',
                                                       f"knowledge_feedback = {setting}")
    (tmp_path / "rubric.toml").write_text(text)
    with pytest.raises(rubric_file.RubricError, match=r"\[parts.knowledge\] knowledge_feedback must be"):
        rubric_file.load(tmp_path / "rubric.toml")


def test_the_shipped_rubric_withholds_the_knowledge_check():
    settings = rubric_file.load().parts["knowledge"].settings
    assert knowledge.feedback_mode(settings) == knowledge.WITHHELD
    rubric = rubric_file.load()
    assert grading.planned_max_units(rubric, extras=True, timing_device="cpu") == \
        sum(to_units(p.points) for p in rubric.parts.values() if p.name != "knowledge"), "a failure states the same maximum"


def test_grading_collected_work_scores_the_knowledge_check(tmp_path):
    """`grade --after-due-date` (a TA's batch of collected work; nbgrader's gradebook passes it for
    collected notebooks) scores each question whatever the rubric's due date: the untouched stubs
    with every answer right earn exactly the knowledge check's points, and the maximum counts them."""
    import subprocess
    import sys

    from autograder.core.paths import ASSIGNMENT, REPO

    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "mhsa.py").write_text(ASSIGNMENT.read_text())
    (tmp_path / "work" / "knowledge.py").write_text("".join(f"{q}_ANSWER = {v!r}\n" for q, v in KEY.items()))
    target = tmp_path / "r.json"
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(tmp_path / "work"), "--results", str(target),
                           "--timing-device", "cpu", "--after-due-date"], cwd=REPO, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads(target.read_text())
    points = rubric_file.load().parts["knowledge"].points
    part = data["extra_data"]["parts"]["knowledge"]
    assert part["graded"] and part["score"] == points
    assert data["score"] == points and data["extra_data"]["max_score"] == 100.0
    rows = [t for t in data["tests"] if t["tags"] == ["knowledge"]]
    assert len(rows) == len(QUESTIONS) and {r["status"] for r in rows} == {"passed"}


def test_the_after_due_date_option_reaches_a_batchs_graders():
    from autograder.pipeline.grade_file import GradeOptions

    assert "--after-due-date" in GradeOptions(after_due_date=True).to_argv()
    assert "--after-due-date" not in GradeOptions(after_due_date=False).to_argv()
    scored = GradeOptions(after_due_date=True).scored(rubric_file.load())
    assert knowledge.feedback_mode(scored.parts["knowledge"].settings) == knowledge.PER_QUESTION


def with_due(due) -> "rubric_file.Rubric":
    rubric = rubric_file.load()
    part = rubric.parts["knowledge"]
    return replace(rubric, parts={**rubric.parts, "knowledge": replace(part, settings={**part.settings, "due": due})})


@pytest.mark.parametrize("rubric_due, platform_due, mode", [
    (None, None, knowledge.WITHHELD),                          # no deadline anywhere: withheld where one resubmits
    (date(2000, 1, 1), None, knowledge.PER_QUESTION),          # the rubric's, passed
    (date(2999, 1, 1), None, knowledge.WITHHELD),              # the rubric's, ahead
    (date(2999, 1, 1), "2000-01-01T00:00:00+00:00", knowledge.PER_QUESTION),  # the platform's replaces it
    (date(2000, 1, 1), "2999-01-01T00:00:00+00:00", knowledge.WITHHELD),      # ... either way
])
def test_the_platforms_deadline_replaces_the_rubrics(rubric_due, platform_due, mode):
    from autograder.pipeline.grade_file import GradeOptions

    options = GradeOptions(due=platform_due, due_from="Gradescope's late due date")
    settings = options.scored(with_due(rubric_due)).parts["knowledge"].settings
    assert knowledge.feedback_mode(settings) == mode
    if mode == knowledge.WITHHELD and (rubric_due or platform_due):
        whose = "Gradescope's late due date" if platform_due else knowledge.RUBRIC_DUE
        assert whose in knowledge.withheld_note(settings) and "until 2999-01-01" in knowledge.withheld_note(settings)


@pytest.mark.parametrize("rubric_due, collected", [(None, True), (date(2999, 1, 1), False), (date(2000, 1, 1), False)])
def test_a_batch_grades_collected_work_unless_a_deadline_is_ahead(rubric_due, collected):
    """No deadline anywhere: a batch grades work no one resubmits against its feedback (collected);
    a deadline, passed or ahead, decides by itself."""
    from autograder.pipeline.grade_file import GradeOptions

    assert GradeOptions().for_collected_work(with_due(rubric_due)).after_due_date is collected
    assert GradeOptions(due="2999-01-01").for_collected_work(with_due(None)).after_due_date is False


def test_the_gradebook_says_when_nbgraders_due_date_is_still_ahead():
    """nbgrader keeps its due date naive, in UTC. The gradebook scores collected notebooks as nbgrader
    does, and says so while that date is ahead: releasing feedback then would show the key."""
    from autograder.runners.gradebook import deadline_ahead

    now = datetime(2026, 12, 3, 12, 0, tzinfo=timezone.utc)
    assert "still ahead" in deadline_ahead(datetime(2026, 12, 3, 13, 0), now)
    assert "2026-12-03 13:00 UTC" in deadline_ahead(datetime(2026, 12, 3, 13, 0), now)
    assert deadline_ahead(datetime(2026, 12, 3, 11, 0), now) == "" and deadline_ahead(None, now) == ""
