"""Points per part from test outcomes: suite shares, even split, exact totals, zeroed parts, skipped
parts, consistency tests that count only once their parity test passes, and argument checks that
count only once the function works on valid arguments."""
import pytest

from autograder.core import rubric as rubric_file
from autograder.record.scoring import UNITS, PartScore, TestResult, apportion, score_parts, total_units


@pytest.fixture
def rubric():
    return rubric_file.load()


def results(part, suite, outcomes, **fields):
    return [TestResult(f"{suite}::test_{part}{i}", part, suite, ok, **fields) for i, ok in enumerate(outcomes)]


def test_all_passed_gives_the_parts_points_exactly(rubric):
    tests = results("sdpa", "public", [True] * 7) + results("sdpa", "hidden", [True] * 13)
    scored, parts = score_parts(tests, rubric, ("public", "hidden"), {})
    assert parts["sdpa"].units == parts["sdpa"].max_units == rubric.parts["sdpa"].points * UNITS
    assert sum(t.units for t in scored) == parts["sdpa"].units, "rows add up to the part, with no rounding gap"


def test_apportion_adds_up_and_stays_proportional():
    shares = apportion(200_000, [0.3 / 7] * 7 + [0.7 / 13] * 13)
    assert sum(shares) == 200_000
    assert max(shares[:7]) - min(shares[:7]) <= 1 and max(shares[7:]) - min(shares[7:]) <= 1


def test_suite_shares_and_even_split(rubric):
    points = rubric.parts["heads"].points
    share = rubric.suite_weights
    tests = results("heads", "public", [True, False]) + results("heads", "hidden", [True, False, False, False])
    _, parts = score_parts(tests, rubric, ("public", "hidden"), {})
    expected = points * (share["public"] / 2 + share["hidden"] / 4)
    assert parts["heads"].score == pytest.approx(expected, abs=1e-4)


def test_a_suite_that_was_not_run_leaves_the_other_as_the_whole(rubric):
    tests = results("masks", "public", [True, False])
    _, parts = score_parts(tests, rubric, ("public",), {})
    assert parts["masks"].score == rubric.parts["masks"].points / 2


def test_a_zeroed_part_scores_nothing_and_says_why(rubric):
    tests = results("mhsa", "public", [True, True])
    scored, parts = score_parts(tests, rubric, ("public",), {"mhsa": ["line 3: uses nn.MultiheadAttention"]})
    assert parts["mhsa"].units == 0 and "nn.MultiheadAttention" in parts["mhsa"].notes[0]
    assert all(t.units == 0 for t in scored)


def test_a_consistency_test_counts_only_when_its_parity_test_passed(rubric):
    parity = [TestResult("hidden::test_matches[a]", "mhsa", "hidden", False),
              TestResult("hidden::test_matches[b]", "mhsa", "hidden", True)]
    consistent = [TestResult("hidden::test_causal[a]", "mhsa", "hidden", True, parity="test_matches"),
                  TestResult("hidden::test_causal[b]", "mhsa", "hidden", True, parity="test_matches"),
                  TestResult("hidden::test_untouched", "mhsa", "hidden", True, parity="test_matches")]
    scored, parts = score_parts(parity + consistent, rubric, ("hidden",), {})
    earned = {t.name: t.units > 0 for t in scored}
    assert earned == {"test_matches[a]": False, "test_matches[b]": True, "test_causal[a]": False,
                      "test_causal[b]": True, "test_untouched": False}
    assert any("consistency tests" in note for note in parts["mhsa"].notes)


def test_a_stub_that_always_raises_earns_nothing_from_consistency_tests(rubric):
    tests = (results("masks", "hidden", [False] * 3)
             + [TestResult("hidden::test_invariant", "masks", "hidden", True, parity="test_masks0")])
    _, parts = score_parts(tests, rubric, ("hidden",), {})
    assert parts["masks"].units == 0


def argument_checks(module, works_outcomes):
    """A constructor test with the given outcomes and two passing argument checks requiring it."""
    works = [TestResult(f"{module}::test_attributes[{i}]", "mhsa", "hidden", ok) for i, ok in enumerate(works_outcomes)]
    checks = [TestResult(f"{module}::test_bad_heads[{i}]", "mhsa", "hidden", True, requires="test_attributes")
              for i in range(2)]
    return works + checks


def test_argument_checks_of_a_stub_that_raises_value_error_earn_nothing(rubric):
    """A stub that raises ValueError for everything passes every argument check: a non-answer."""
    scored, parts = score_parts(argument_checks("hidden/test_mhsa.py", [False, False]), rubric, ("hidden",), {})
    assert parts["mhsa"].units == 0 and all(t.units == 0 for t in scored)
    assert any("bad arguments are refused" in note and "test_attributes" in note for note in parts["mhsa"].notes)


def test_argument_checks_count_once_any_run_of_the_required_test_passes(rubric):
    scored, parts = score_parts(argument_checks("hidden/test_mhsa.py", [False, True]), rubric, ("hidden",), {})
    earned = {t.name: t.units > 0 for t in scored}
    assert earned == {"test_attributes[0]": False, "test_attributes[1]": True,
                      "test_bad_heads[0]": True, "test_bad_heads[1]": True}
    assert not any("bad arguments" in note for note in parts["mhsa"].notes)


def test_the_required_test_is_looked_up_in_the_same_file(rubric):
    """A passing test of the same name in another file (the block's constructor) does not count."""
    tests = argument_checks("hidden/test_mhsa.py", [False]) + [
        TestResult("hidden/test_block.py::test_attributes", "block", "hidden", True)]
    scored, _ = score_parts(tests, rubric, ("hidden",), {})
    assert all(t.units == 0 for t in scored if t.requires)


def test_parts_not_graded_are_left_out_of_the_maximum():
    parts = {"sdpa": PartScore("sdpa", "", 10, 20), "timing": PartScore("timing", "", 0, 5, graded=False)}
    assert total_units(parts) == (10, 20)
