"""What students read: the rubric's feedback policy for hidden tests, and the results.json layout."""
from dataclasses import replace

import pytest

from autograder.core import rubric as rubric_file
from autograder.record import results
from autograder.record.grade import Grade, failure
from autograder.record.scoring import PartScore, Row, TestResult


def failed_test(suite):
    return TestResult(f"tests_{suite}/test_sdpa.py::test_parity[case]", "sdpa", suite, False,
                      summary="out: 12 of 40 values differ; largest error 0.31 at index (0, 1, 2).",
                      detail="At (0, 1, 2): expected 0.125, got 0.435.", hint="check the scale.",
                      example="Falsifying example: test_parity(case=SdpaCase(B=1, L=2, d_k=4))",
                      units=0, max_units=20_000)


def with_feedback(level):
    rubric = rubric_file.load()
    parts = dict(rubric.parts)
    parts["sdpa"] = replace(parts["sdpa"], feedback=level)
    return replace(rubric, parts=parts)


def test_hidden_summary_leads_with_the_diagnosis_and_shows_the_case_but_no_expected_values():
    text = results.test_output(failed_test("hidden"), with_feedback("summary"), "no 1/sqrt(d_k) scale")
    assert text.splitlines()[0] == "Likely mistake: no 1/sqrt(d_k) scale"
    assert "12 of 40 values differ" in text
    assert "Smallest failing case: test_parity(case=SdpaCase(B=1, L=2, d_k=4))" in text
    assert "expected 0.125" not in text
    assert "Hint:" not in text, "the test's fixed hint may be about another concern than the diagnosed one"


def test_a_hidden_test_shows_its_own_hint_only_when_nothing_more_specific_is_known():
    rubric = with_feedback("summary")
    assert "Hint: check the scale." in results.test_output(failed_test("hidden"), rubric)
    upstream = results.test_output(failed_test("hidden"), rubric, failing_upstream=("heads",))
    assert "builds on 'heads', which fails tests too: fix that first" in upstream and "Hint:" not in upstream
    consistency = replace(failed_test("hidden"), parity="test_matches")
    text = results.test_output(consistency, rubric, parity_failed=True)
    assert "counts once test_matches passes" in text and "Hint:" not in text


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
    tests = (failed_test("hidden"), replace(failed_test("public"), passed=True, units=20_000))
    parts = {"sdpa": PartScore("sdpa", "Scaled dot-product attention", 20_000, 40_000, diagnosis="no scale"),
             "timing": PartScore("timing", "CUDA", 0, 50_000, graded=False, notes=("no CUDA",))}
    grade = Grade("alice", "sandbox", ("public", "hidden"), tests=tests, parts=parts, execution_time=3.5,
                  notes=("no diagnosis: the worker stopped",))
    data = results.to_gradescope(grade, rubric_file.load())
    assert data["score"] == 2.0 and data["execution_time"] == 3.5 and "no CUDA" in data["output"]
    assert data["extra_data"]["max_score"] == 4.0, "a part that was not graded is left out of the maximum"
    assert [t["tags"] for t in data["tests"]] == [["sdpa", "hidden"], ["sdpa", "public"], ["sdpa", "part"],
                                                  ["timing", "part"]], "test rows, then one summary row per part"
    assert sum(t["score"] for t in data["tests"] if "score" in t) == data["score"]
    assert {"name", "score", "max_score", "status", "output", "visibility"} <= set(data["tests"][0])
    hidden = data["tests"][0]
    assert hidden["status"] == "failed" and "Likely mistake: no scale" in hidden["output"]
    assert data["extra_data"]["isolation"] == "sandbox" and data["extra_data"]["status"] == "graded"
    assert data["extra_data"]["notes"] == ["no diagnosis: the worker stopped"]
    assert "no diagnosis: the worker stopped" in data["output"] and "no diagnosis" in results.table(grade, rubric_file.load())


def test_a_failure_has_the_usual_maximum_no_rows_and_the_reason(tmp_path):
    grade = failure("bob", "timeout", "Grading was stopped after 300 s", 950_000, "sandbox", ("public", "hidden"), 301.0)
    data = results.to_gradescope(grade, rubric_file.load())
    assert data["score"] == 0 and data["extra_data"]["max_score"] == 95.0 and data["tests"] == []
    assert data["extra_data"]["status"] == "timeout" and "stopped after 300 s" in data["output"]
    results.write_json_atomic(tmp_path / "bob.json", data)
    assert results.load(tmp_path / "bob.json").data == data, "a batch treats it as finished"


def test_text_from_student_code_cannot_redraw_the_terminal_or_flood_the_results():
    forged = "\x1b[2J\x1b[Halice: 95 / 95 points\x07" + "x" * 50_000
    test = replace(failed_test("public"), summary=forged)
    text = results.test_output(test, rubric_file.load())
    assert "\x1b" not in text and "\x07" not in text
    assert len(text) < results.TEXT_CAP + 200


def timing_grade(status, units, max_units, output):
    """A grade whose timing row has `status`; the part is graded unless the row was skipped."""
    passed = replace(failed_test("public"), passed=True, units=20_000)
    graded = status != "skipped"
    parts = {"sdpa": PartScore("sdpa", "Scaled dot-product attention", 20_000, 20_000),
             "timing": PartScore("timing", "CUDA speed", units, 50_000, graded=graded,
                                 notes=() if graded else (output,))}
    row = Row("timing: speed against the reference (CUDA when available)", "timing", status, units, max_units, output)
    return Grade("alice", "sandbox", ("public",), tests=(passed,), parts=parts, rows=(row,))


@pytest.mark.parametrize("part_rows", [True, False])
def test_a_timing_part_that_was_not_graded_has_no_row_that_gradescope_would_mark_passed(part_rows):
    """Gradescope marks a row without a status by its score, and 0 of 0 reads as passed; it has no
    "not graded". So the row has no score at all (it only says why), and the summary says so too."""
    rubric = rubric_file.load()
    rubric = replace(rubric, results=replace(rubric.results, part_rows=part_rows))
    data = results.to_gradescope(timing_grade("skipped", 0, 0, "CUDA timing skipped: no CUDA device"), rubric)
    [row] = [t for t in data["tests"] if t["tags"] == ["timing"]]
    assert not {"score", "max_score", "status"} & set(row) and "no CUDA device" in row["output"]
    assert all(t["status"] in ("passed", "failed") for t in data["tests"] if "score" in t)
    assert "not graded" in data["output"] and "CUDA timing skipped: no CUDA device" in data["output"]
    assert data["score"] == 2.0 and data["extra_data"]["max_score"] == 2.0
    part_row = [t for t in data["tests"] if t["tags"] == ["timing", "part"]]
    assert [t["output"].splitlines()[:2] for t in part_row] == (
        [["not graded", "CUDA timing skipped: no CUDA device"]] if part_rows else [])


@pytest.mark.parametrize("status, units", [("passed", 50_000), ("failed", 0)])
def test_a_timing_part_that_was_graded_keeps_its_row_and_status(status, units):
    data = results.to_gradescope(timing_grade(status, units, 50_000, "ratio 1.1, threshold 2"), rubric_file.load())
    row = next(t for t in data["tests"] if t["tags"] == ["timing"])
    assert (row["status"], row["score"], row["max_score"]) == (status, units / 10_000, 5.0)
    assert data["extra_data"]["max_score"] == 7.0


def test_results_carry_their_format_and_load_reads_that_format_only(tmp_path):
    """A results file says which version of the grader's fields it holds; one written by another
    version (or with none) is not read as this one's: a batch regrades it instead of guessing."""
    import json

    rubric = rubric_file.load()
    data = results.to_gradescope(failure("alice", "error", "no mhsa.py", 9000, "process"), rubric)
    assert data["extra_data"]["format"] == results.FORMAT
    path = tmp_path / "alice.json"
    results.write_json_atomic(path, data)
    assert results.load(path).data == data
    for other in ({}, {"format": results.FORMAT + 1}, {"format": str(results.FORMAT)}):
        changed = {**data, "extra_data": {k: v for k, v in data["extra_data"].items() if k != "format"} | other}
        path.write_text(json.dumps(changed))
        assert results.load(path) is None, other
        assert results.load_any(path).data == changed  # the class report still reads it, field by field
