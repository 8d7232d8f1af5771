"""Meta-tests of the test suites, on the corpus (corpus/): every known bug loses points in exactly
the parts it declares, and every valid solution, the reference included, gets full marks."""
import pytest

from autograder.diagnosis import corpus

MUTANTS = corpus.load_mutants()
FULL_MARKS = [corpus.REFERENCE, *corpus.valid_variants()]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Grades the whole corpus once, two submissions at a time; key -> {part: failed tests}."""
    paths = corpus.write_mutants(tmp_path_factory.mktemp("mutants"), MUTANTS)
    jobs = [(path.name, path, None) for path in FULL_MARKS]
    jobs += [(m.id, paths[m.id], m.parts) for m in MUTANTS]
    return corpus.grade_all(jobs)


def test_corpus_size():
    assert len(MUTANTS) >= 30 and len(FULL_MARKS) >= 6


@pytest.mark.parametrize("path", FULL_MARKS, ids=lambda p: p.stem)
def test_valid_solution_gets_full_marks(graded, path):
    lost = graded[path.name]
    assert not lost, f"{path.name} lost points: " + "; ".join(f for failures in lost.values() for f in failures[:3])


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.id)
def test_mutant_loses_exactly_its_parts(graded, mutant):
    lost = graded[mutant.id]
    missed = sorted(set(mutant.parts) - set(lost))
    extra = {part: failures for part, failures in lost.items() if part not in mutant.parts}
    assert not missed, f"{mutant.id} ({mutant.misconception}) should lose points in {missed} and does not"
    assert not extra, f"{mutant.id} loses points in undeclared parts: " + "; ".join(
        f for failures in extra.values() for f in failures[:3])


def test_a_patch_that_no_longer_applies_fails_loudly(tmp_path):
    stale = corpus.Mutant("stale", "none", ("sdpa",), "text that is not in the reference", "x")
    with pytest.raises(corpus.CorpusError, match="occurs 0 times"):
        corpus.write_mutants(tmp_path, [stale])
