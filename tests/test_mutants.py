"""Meta-tests of the test suites, on the corpus (corpus/): every known bug loses points in exactly
the parts it declares, and every valid solution, the reference included, gets full marks.

Grading is the slow part (about 3 s a mutant), so CI grades the first manifest whole and one mutant
of each further kind of mistake (`corpus.graded_in_ci`); `python benchmarks/mutants.py` grades them all."""
import pytest

from tools import corpus

MUTANTS = corpus.load_mutants()
GRADED = corpus.graded_in_ci(MUTANTS)
FULL_MARKS = [corpus.REFERENCE, *corpus.valid_variants()]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Grades the chosen corpus once, two submissions at a time; key -> {part: failed tests}."""
    paths = corpus.write_mutants(tmp_path_factory.mktemp("mutants"), GRADED)
    jobs = [(path.name, path, None) for path in FULL_MARKS]
    jobs += [(m.id, paths[m.id], m.parts) for m in GRADED]
    return corpus.grade_all(jobs)


def test_corpus_size():
    styles = {m.base for m in MUTANTS}
    assert len(MUTANTS) >= 100 and len(FULL_MARKS) >= 6 and len(styles) == len(FULL_MARKS)


def test_every_mutant_applies_and_ci_grades_every_kind_of_mistake(tmp_path):
    """Mutants outside the CI subset are still patched here (a stale `find` fails), and the subset
    leaves out no misconception."""
    assert len(corpus.write_mutants(tmp_path, MUTANTS)) == len(MUTANTS)
    assert {m.misconception for m in GRADED} == {m.misconception for m in MUTANTS}


@pytest.mark.parametrize("path", FULL_MARKS, ids=lambda p: p.stem)
def test_valid_solution_gets_full_marks(graded, path):
    lost = graded[path.name]
    assert not lost, f"{path.name} lost points: " + "; ".join(f for failures in lost.values() for f in failures[:3])


@pytest.mark.parametrize("mutant", GRADED, ids=lambda m: m.id)
def test_mutant_loses_exactly_its_parts(graded, mutant):
    problems = corpus.wrong_parts(mutant, graded[mutant.id])
    assert not problems, "\n".join(problems)


def test_a_patch_that_no_longer_applies_fails_loudly(tmp_path):
    stale = corpus.Mutant("stale", "none", ("sdpa",), "text that is not in the reference", "x")
    with pytest.raises(corpus.CorpusError, match="occurs 0 times"):
        corpus.write_mutants(tmp_path, [stale])


def test_a_wrong_declaration_is_reported():
    """The check behind test_mutant_loses_exactly_its_parts fails both ways."""
    mutant = corpus.Mutant("m", "no-scale", ("sdpa", "mhsa"), "a", "b")
    assert corpus.wrong_parts(mutant, {"sdpa": ["t"], "mhsa": ["t"]}) == []
    assert "should lose points in ['mhsa']" in corpus.wrong_parts(mutant, {"sdpa": ["t"]})[0]
    assert "undeclared parts: t2" in corpus.wrong_parts(mutant, {"sdpa": ["t"], "mhsa": ["t"], "block": ["t2"]})[0]
