"""The public suite teaches the handout's rules: code students really copy (corpus/realworld/: The
Annotated Transformer, d2l.ai, nanoGPT, jadore801120's transformer, adapted to the contract) loses
points in `check` (the public tests) exactly for the handout rules it breaks, which its docstring
names, and nowhere else; and a one-place break of each rule in the reference fails the rule's tests
(the reference and corpus/valid keep full marks: tests/test_mutants.py)."""
import ast
import re

import pytest

from tools import corpus
from autograder.core.paths import REPO

REALWORLD = sorted((REPO / "corpus" / "realworld").glob("*.py"))
# Handout rule -> the public tests that teach it (file::function, every parameter).
RULE_TESTS = {
    "float16-masking": {"tests_public/test_sdpa.py::test_masks_in_half_precision"},
    "feed-forward-dropout": {"tests_public/test_block.py::test_feed_forward_dropout_placement"},
    "eval-mode-dropout": {"tests_public/test_sdpa.py::test_dropout_is_off_when_not_training",
                          "tests_public/test_mhsa.py::test_dropout_is_off_in_eval_mode",
                          "tests_public/test_block.py::test_matches_torch_encoder_layer"},
    "bool-mask-to-minus-inf": {"tests_public/test_masks.py::test_to_additive_mask_of_bool",
                               "tests_public/test_sdpa.py::test_bool_mask_true_positions_get_zero_weight"},
}
# One-place breaks of each rule in the reference: (find, replace).
RULE_MUTANTS = {
    "float16-masking": ('.masked_fill(mask, float("-inf"))', ".masked_fill(mask, -1e9)"),
    "feed-forward-dropout": ("self.ff2(self.dropout_ff(self.activation(self.ff1(y))))",
                             "self.ff2(self.activation(self.ff1(y)))"),
    "eval-mode-dropout": ("if training and dropout_p > 0.0:", "if dropout_p > 0.0:"),
    "bool-mask-to-minus-inf": ('.masked_fill(mask, float("-inf"))', ".masked_fill(mask, 0.0)"),
}
RULE_LINE = re.compile(r"^\s+(?P<rule>[a-z0-9-]+):", re.M)


def broken_rules(path) -> set:
    """The rules an adaptation's docstring lists under "Handout rules it breaks:"."""
    doc = ast.get_docstring(ast.parse(path.read_text()))
    listed = doc.split("Handout rules it breaks:", 1)[1]
    return {m["rule"] for m in RULE_LINE.finditer(listed)} & set(RULE_TESTS)


def failed_public_tests(path) -> set:
    """Public tests (file::function) that fail for `path`'s own code in the grading pipeline `check`
    runs: a test that passes again with a correct version of a part it builds on (`stood_in`) failed
    on the student's code first, and is charged to that part."""
    from autograder.core import rubric
    from autograder.pipeline.grading import grade

    result = grade(path, suites=("public",), isolation="inprocess", extras=False, rubric=rubric.load())
    return {t.nodeid.split("[")[0] for t in result.tests if not t.passed or t.stood_in}


def test_every_adaptation_names_rules_the_suite_knows():
    assert len(REALWORLD) == 4
    for path in REALWORLD:
        assert broken_rules(path), f"{path.name}: its docstring names no rule of {sorted(RULE_TESTS)}"


@pytest.mark.parametrize("path", REALWORLD, ids=lambda p: p.stem)
def test_adaptation_loses_points_exactly_for_its_rules(path):
    expected = set().union(*(RULE_TESTS[rule] for rule in broken_rules(path)))
    assert failed_public_tests(path) == expected


@pytest.mark.parametrize("rule", sorted(RULE_MUTANTS))
def test_breaking_a_rule_fails_its_public_tests(rule, tmp_path):
    find, replace = RULE_MUTANTS[rule]
    reference = corpus.REFERENCE.read_text()
    assert reference.count(find) == 1, f"{rule}: the reference no longer holds {find!r}"
    mutant = tmp_path / "mhsa.py"
    mutant.write_text(reference.replace(find, replace))
    failed = failed_public_tests(mutant)
    assert failed & RULE_TESTS[rule], f"{rule}: none of {sorted(RULE_TESTS[rule])} fails; failed: {sorted(failed)}"
