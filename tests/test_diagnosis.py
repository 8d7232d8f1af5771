"""The misconception diagnosis: its model is right where it should be; on every mutant of the corpus
it names the declared mistake or nothing (never another); it names the right one often enough, never
accuses a valid solution, and works through a worker."""
import pytest

from autograder.feedback.diagnosis import diagnose, identify
from autograder.testing.backends import InProcessBackend, WorkerBackend
from tools import diagnosis_accuracy as evaluate
from autograder.feedback.diagnosis.catalog import CATALOG, CORRECT, DROPOUT_CALLS, IDS, consistent
from tools.corpus import REFERENCE, load_mutants, valid_variants, write_mutants
from autograder.feedback.diagnosis.probes import PROBES, Session
from autograder.isolation.host.levels import Isolation

MUTANTS = load_mutants()
RIGHT_FLOOR = 0.95  # share of mutants whose declared misconception is named where the bug lives


@pytest.fixture(scope="module")
def named():
    """mutant id -> {declared part: misconception id named}, diagnosed once for the whole module."""
    return evaluate.diagnose_mutants(MUTANTS)


def test_the_correct_model_agrees_with_the_reference_on_every_probe():
    """Otherwise a deviation from the model would not mean a mistake."""
    session = Session(InProcessBackend(REFERENCE))
    calls = [(key, call) for probes in PROBES.values() for key, call in probes.items()]
    calls += [(key, call) for key, call in DROPOUT_CALLS.items() if key.endswith("off")]
    differ = [key for key, call in calls if not consistent(session.observe(key, call), session.predicted(call, CORRECT))]
    assert not differ


def test_every_misconception_has_a_way_to_be_recognised():
    assert all(m.parts and m.message and (m.variants or m.check) and set(m.home) <= set(PROBES) for m in CATALOG)
    assert len({m.id for m in CATALOG}) == len(CATALOG)


def test_every_mutant_declares_a_known_misconception():
    assert [m.id for m in MUTANTS if m.misconception not in IDS] == []


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.id)
def test_mutant_is_given_its_own_misconception_or_none(named, mutant):
    """A wrong diagnosis misleads a student more than none."""
    wrong = {part: found for part, found in named[mutant.id].items() if found != mutant.misconception}
    assert not wrong, f"{mutant.id} is a {mutant.misconception} mistake, diagnosed as {wrong}"


def test_rates_on_the_corpus(named):
    verdicts = {m.id: evaluate.verdict(m, named[m.id]) for m in MUTANTS}
    right = [m for m, v in verdicts.items() if v == evaluate.RIGHT]
    assert [m for m, v in verdicts.items() if v == evaluate.WRONG] == []
    silent = [m for m, v in verdicts.items() if v == evaluate.SILENT]
    assert len(right) >= RIGHT_FLOOR * len(MUTANTS), f"right for {len(right)} of {len(MUTANTS)}; silent on {silent}"


def test_verdicts_count_a_wrong_part_as_wrong():
    mutant = next(m for m in MUTANTS if m.id == "sdpa-no-scale")
    assert evaluate.verdict(mutant, {"sdpa": "no-scale", "mhsa": "no-scale"}) == evaluate.RIGHT
    assert evaluate.verdict(mutant, {"mhsa": "no-scale"}) == evaluate.SILENT
    assert evaluate.verdict(mutant, {"sdpa": "no-scale", "block": "missing-wo"}) == evaluate.WRONG


def test_valid_solutions_get_no_diagnosis():
    found = {path.name: identify(InProcessBackend(path), list(PROBES)) for path in [REFERENCE, *valid_variants()]}
    assert {name: f for name, f in found.items() if f} == {}


def test_diagnosis_through_a_worker(tmp_path):
    """Student code runs in the worker; the diagnosis only sends calls and reads replies."""
    mutant = next(m for m in MUTANTS if m.id == "sdpa-no-scale")
    path = write_mutants(tmp_path, [mutant])[mutant.id]
    backend = WorkerBackend(path, Isolation("process"))
    try:
        found = diagnose(backend, ["sdpa", "heads"])
    finally:
        backend.close()
    assert set(found) == {"sdpa"} and "sqrt(d_k)" in found["sdpa"]


@pytest.mark.parametrize("part", sorted(PROBES))
def test_a_correct_part_gets_no_diagnosis(part):
    assert diagnose(InProcessBackend(REFERENCE), [part]) == {}


def test_a_function_left_as_its_stub_does_not_hide_a_mistake(tmp_path):
    """head_loop's self-attention never calls split_heads/merge_heads: with those left unimplemented,
    its own mistake (v taken from q) is still named, and the stubbed heads part gets nothing."""
    mutant = next(m for m in MUTANTS if m.id == "loop-v-from-q")
    source = mutant.source()
    for name in ("split_heads", "merge_heads"):
        signature_end = source.index(":\n", source.index(f"def {name}(")) + 1
        source = source[:signature_end] + f'\n    raise NotImplementedError("{name}")' + \
            source[source.index("\n\n\n", signature_end):]
    path = tmp_path / "stubbed_heads.py"
    path.write_text(source)
    named = {part: m.id for part, m in identify(InProcessBackend(path), ["heads", "mhsa", "block"]).items()}
    assert named == {"mhsa": "v-from-q", "block": "v-from-q"}
