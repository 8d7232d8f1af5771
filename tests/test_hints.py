"""A hint names a cause only when the test observed it (autograder/testing/compare.py's Cause): each family of
cause hints is given for its own mistake, and never for a mistake of another kind, over a fixed
sample of the mutant corpus through the public and hidden suites (benchmarks/hints.py counts the
same over all of it)."""
import importlib.util

import pytest
import torch

from autograder.testing import compare
from tools.corpus import load_mutants
from autograder.core.paths import CORPUS, REPO

spec = importlib.util.spec_from_file_location("hints_benchmark", REPO / "benchmarks" / "hints.py")
hints = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hints)

MUTANTS = {m.id: m for name in ("mutants", "mutants-styles", "mutants-heldout")
           for m in load_mutants(CORPUS / f"{name}.toml")}
# one mutant per family, holding that family's cause
CAUSED = {"overflow": "sdpa-naive-softmax", "dropout in eval": "mhsa-dropout-in-eval",
          "dropout rescale": "sdpa-dropout-without-rescale", "detach": "sdpa-detached-softmax",
          "averaged heads": "need-weights-averaged", "padding on queries": "key-padding-on-queries"}


# Every eighth mutant by id (benchmarks/hints.py runs them all).
SAMPLE = sorted(MUTANTS)[::8]
WRONG_SCALE = "sdpa-no-scale"


@pytest.fixture(scope="module")
def failed_hints(tmp_path_factory) -> dict:
    """mutant id -> {failed test: its hint}, for every mutant this module reads, run in one child."""
    wanted = sorted({*CAUSED.values(), *SAMPLE, WRONG_SCALE})
    return hints.failed_hints(REPO, {m: MUTANTS[m].source() for m in wanted}, tmp_path_factory.mktemp("hints"))


@pytest.mark.parametrize("family", sorted(CAUSED))
def test_each_cause_hint_is_given_for_its_own_mistake(failed_hints, family):
    found = failed_hints[CAUSED[family]]
    assert any(hints.family_of(h) == family for h in found.values()), found


@pytest.mark.parametrize("mutant_id", SAMPLE)
def test_no_hint_names_a_cause_the_mistake_does_not_have(failed_hints, mutant_id):
    found = failed_hints[mutant_id]
    assert found, f"{mutant_id} fails no test"
    assert hints.misfires(MUTANTS[mutant_id], found) == []


def test_a_wrong_scale_gets_no_dropout_or_overflow_hint_in_the_tests_named_for_them(failed_hints):
    """The student's case: a dropout-named and an overflow-named test fail because of the scale."""
    found = failed_hints[WRONG_SCALE]
    named = [t for t in found if "dropout" in t or "overflow" in t]
    assert named, found
    assert all(hints.family_of(found[t]) is None for t in named), {t: found[t] for t in named}


def test_evidence_reads_the_result():
    expected = torch.tensor([[0.25, 0.75], [0.5, 0.5]], dtype=torch.float64)
    assert compare.non_finite(torch.tensor([[float("nan"), 1.0], [0.5, 0.5]], dtype=torch.float64), expected)
    assert not compare.non_finite(expected * 2, expected)
    assert compare.dropped(torch.tensor([[0.0, 1.5], [1.0, 1.0]], dtype=torch.float64), expected)
    masked = torch.tensor([[0.0, 1.0], [0.5, 0.5]], dtype=torch.float64)  # a mask renormalizes what is left
    assert not compare.dropped(masked, expected)
    assert compare.rescaled(expected * 0.5, expected) and not compare.rescaled(expected.flip(-1), expected)
    hint = compare.Cause("an overflow", compare.non_finite)
    assert compare.hint_for(hint, expected * 2, expected) == "" and compare.hint_for("as asked", expected, expected)
    with pytest.raises(compare.Mismatch) as silent:
        compare.expect_tensor(expected * 2, expected, what="weights", hint=hint)
    assert "Hint" not in str(silent.value)
    with pytest.raises(compare.Mismatch) as shown:
        compare.expect_tensor(expected / 0, expected, what="weights", hint=hint)
    assert "Hint: an overflow" in str(shown.value)


def test_a_shape_hint_says_what_the_shapes_and_values_show():
    weights = torch.rand(2, 4, 3, 3, dtype=torch.float64)
    averaged = compare.shape_hint(weights.mean(1), weights)
    assert averaged.startswith("the expected values averaged over dimension 1 (size 4)"), averaged
    assert compare.shape_hint(weights[:, 0] + 1, weights) == "dimension 1 (size 4) is missing."
    assert "reshape" in compare.shape_hint(weights.reshape(2, 12, 3), weights)
    assert compare.shape_hint(torch.rand(5), weights) == ""
