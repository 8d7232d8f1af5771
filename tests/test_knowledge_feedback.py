"""Knowledge-check feedback: which questions are right is shown only when the rubric allows it."""
from datetime import date, datetime, timezone

import pytest

from autograder import knowledge

KEY = knowledge.load_key()
QUESTIONS = knowledge.autograded(knowledge.questions())


def answers(right: int) -> dict:
    """The first `right` questions answered correctly, the others with a well-formed wrong answer."""
    out = {}
    for i, q in enumerate(QUESTIONS):
        value = KEY[q.id]
        if i >= right and q.kind == "choice":
            value = next(c for c in q.choices if c != value)
        elif i >= right:
            value = not value if q.kind == "truefalse" else value + 1
        out[q.variable] = value
    return out


def test_total_feedback_gives_the_score_but_not_which_answers_are_right():
    one_wrong = knowledge.grade(answers(len(QUESTIONS) - 1), 5.0, KEY, feedback="total")
    assert len(one_wrong) == 1
    row = one_wrong[0]
    assert row["score"] == pytest.approx(5.0 * (len(QUESTIONS) - 1) / len(QUESTIONS)) and row["max_score"] == 5.0
    assert f"{len(QUESTIONS) - 1} of {len(QUESTIONS)}" in row["output"]
    assert "not the right answer" not in row["output"] and "correct" not in row["output"].replace("correctly", "")
    assert not any(q.id in row["output"] for q in QUESTIONS), "a question id would tell which one is wrong"


def test_total_feedback_still_says_what_is_malformed():
    row = knowledge.grade({QUESTIONS[0].variable: 42 if QUESTIONS[0].kind != "number" else "x"}, 5.0, KEY,
                          feedback="total")[0]
    assert f"{QUESTIONS[0].id}: answer with" in row["output"]


def test_per_question_feedback_names_each_answer():
    rows = knowledge.grade(answers(1), 5.0, KEY, feedback="per_question")
    assert [r["status"] for r in rows] == ["passed"] + ["failed"] * (len(QUESTIONS) - 1)
    assert rows[1]["output"].endswith("not the right answer")


@pytest.mark.parametrize("settings, now, mode", [
    ({}, datetime(2030, 1, 1, tzinfo=timezone.utc), "total"),
    ({"knowledge_feedback": "per_question"}, datetime(2000, 1, 1, tzinfo=timezone.utc), "per_question"),
    ({"knowledge_feedback": "total", "due": date(2000, 1, 1)}, datetime(2030, 1, 1, tzinfo=timezone.utc), "total"),
    ({"due": datetime(2026, 12, 15, 23, 59, tzinfo=timezone.utc)}, datetime(2026, 12, 15, 23, 58, tzinfo=timezone.utc),
     "total"),
    ({"due": datetime(2026, 12, 15, 23, 59, tzinfo=timezone.utc)}, datetime(2026, 12, 16, tzinfo=timezone.utc),
     "per_question"),
    ({"due": date(2026, 12, 15)}, datetime(2026, 12, 20, tzinfo=timezone.utc), "per_question"),
])
def test_the_rubric_decides_the_feedback(settings, now, mode):
    assert knowledge.feedback_mode(settings, now) == mode


def test_a_bad_setting_is_refused():
    with pytest.raises(ValueError, match="knowledge_feedback"):
        knowledge.feedback_mode({"knowledge_feedback": "everything"})


def test_the_shipped_rubric_gives_the_total_only():
    from autograder import rubric

    assert knowledge.feedback_mode(rubric.load().parts["knowledge"].settings) == "total"
    assert len(knowledge.grade(answers(0), 5.0, KEY)) == 1
