"""What students read: the rubric's feedback policy for hidden tests, and the results.json layout."""
from dataclasses import replace

import pytest

from autograder import results
from autograder import rubric as rubric_file
from autograder.grading import Grade
from autograder.scoring import PartScore, TestResult


def failed_test(suite):
    return TestResult(f"tests_{suite}/test_sdpa.py::test_parity[case]", "sdpa", suite, False,
                      summary="out: 12 of 40 values differ; largest error 0.31 at index (0, 1, 2).",
                      detail="At (0, 1, 2): expected 0.125, got 0.435.", hint="check the scale.",
                      example="Falsifying example: test_parity(case=SdpaCase(B=1, L=2, d_k=4))",
                      score=0.0, max_score=2.0)


def with_feedback(level):
    rubric = rubric_file.load()
    parts = dict(rubric.parts)
    parts["sdpa"] = replace(parts["sdpa"], feedback=level)
    return replace(rubric, parts=parts)


def test_hidden_summary_shows_the_case_and_diagnosis_but_no_expected_values():
    text = results.test_output(failed_test("hidden"), with_feedback("summary"), "no 1/sqrt(d_k) scale")
    assert "12 of 40 values differ" in text and "Hint: check the scale." in text
    assert "Smallest failing case: test_parity(case=SdpaCase(B=1, L=2, d_k=4))" in text
    assert "Likely mistake: no 1/sqrt(d_k) scale" in text
    assert "expected 0.125" not in text


def test_hidden_name_policy_shows_only_the_test_and_part():
    text = results.test_output(failed_test("hidden"), with_feedback("name"), "no scale")
    assert text == "Failed: test_parity[case] (part 'sdpa')."


@pytest.mark.parametrize("suite, level", [("hidden", "full"), ("public", "name"), ("public", "summary")])
def test_values_are_shown_for_full_feedback_and_always_for_public_tests(suite, level):
    text = results.test_output(failed_test(suite), with_feedback(level))
    assert "expected 0.125, got 0.435" in text


def test_passed_tests_say_nothing():
    passed = replace(failed_test("hidden"), passed=True)
    assert results.test_output(passed, rubric_file.load()) == ""


def test_gradescope_results_have_the_spec_fields_and_add_up():
    tests = [failed_test("hidden"), replace(failed_test("public"), passed=True, score=2.0)]
    parts = {"sdpa": PartScore("sdpa", "Scaled dot-product attention", 2.0, 4.0, diagnosis="no scale"),
             "timing": PartScore("timing", "CUDA", 0.0, 5.0, graded=False, notes=["no CUDA"])}
    grade = Grade("alice", 2.0, 4.0, parts, tests, "sandbox", ("public", "hidden"), 3.5)
    data = results.to_gradescope(grade, rubric_file.load())
    assert data["score"] == 2.0 and data["execution_time"] == 3.5 and "no CUDA" in data["output"]
    assert [t["tags"][0] for t in data["tests"]] == ["sdpa", "sdpa"]
    assert sum(t["score"] for t in data["tests"]) == data["score"]
    assert {"name", "score", "max_score", "status", "output", "visibility"} <= set(data["tests"][0])
    hidden = data["tests"][0]
    assert hidden["status"] == "failed" and "Likely mistake: no scale" in hidden["output"]
    assert data["extra_data"]["isolation"] == "sandbox"
