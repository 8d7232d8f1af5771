"""Points per part from test outcomes: suite shares, even split, zeroed parts, skipped parts."""
import pytest

from autograder import rubric as rubric_file
from autograder.scoring import PartScore, TestResult, score_parts, total


@pytest.fixture
def rubric():
    return rubric_file.load()


def results(part, suite, outcomes):
    return [TestResult(f"{suite}::{part}{i}", part, suite, ok) for i, ok in enumerate(outcomes)]


def test_all_passed_gives_the_parts_points(rubric):
    tests = results("sdpa", "public", [True, True]) + results("sdpa", "hidden", [True] * 3)
    parts = score_parts(tests, rubric, ("public", "hidden"), {})
    assert parts["sdpa"].score == pytest.approx(rubric.parts["sdpa"].points)
    assert sum(t.max_score for t in tests) == pytest.approx(rubric.parts["sdpa"].points)


def test_suite_shares_and_even_split(rubric):
    points = rubric.parts["heads"].points
    share = rubric.suite_weights
    tests = results("heads", "public", [True, False]) + results("heads", "hidden", [True, False, False, False])
    parts = score_parts(tests, rubric, ("public", "hidden"), {})
    expected = points * (share["public"] / 2 + share["hidden"] / 4)
    assert parts["heads"].score == pytest.approx(expected, abs=1e-3)


def test_a_suite_that_was_not_run_leaves_the_other_as_the_whole(rubric):
    tests = results("masks", "public", [True, False])
    parts = score_parts(tests, rubric, ("public",), {})
    assert parts["masks"].score == pytest.approx(rubric.parts["masks"].points / 2)


def test_a_zeroed_part_scores_nothing_and_says_why(rubric):
    tests = results("mhsa", "public", [True, True])
    parts = score_parts(tests, rubric, ("public",), {"mhsa": ["line 3: uses nn.MultiheadAttention"]})
    assert parts["mhsa"].score == 0 and "nn.MultiheadAttention" in parts["mhsa"].notes[0]
    assert all(t.score == 0 for t in tests)


def test_parts_not_graded_are_left_out_of_the_maximum():
    parts = {"sdpa": PartScore("sdpa", "", 10, 20), "timing": PartScore("timing", "", 0, 5, graded=False)}
    assert total(parts) == (10, 20)
