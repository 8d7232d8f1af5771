"""The misconception diagnosis: its model is right where it should be, it names the right mistake
on the corpus often enough, never accuses a valid solution, and works through a worker."""
import pytest

from autograder.backends import InProcessBackend, WorkerBackend
from autograder.diagnosis import diagnose, evaluate
from autograder.diagnosis.catalog import CATALOG, CORRECT, DROPOUT_CALLS, consistent, predicted
from autograder.diagnosis.corpus import REFERENCE, load_mutants, write_mutants
from autograder.diagnosis.probes import PROBES, Session
from autograder.isolation import Isolation

ACCURACY_FLOOR = 0.8


def test_the_correct_model_agrees_with_the_reference_on_every_probe():
    """Otherwise a deviation from the model would not mean a mistake."""
    session = Session(InProcessBackend(REFERENCE))
    calls = [(key, call) for probes in PROBES.values() for key, call in probes.items()]
    calls += [(key, call) for key, call in DROPOUT_CALLS.items() if key.endswith("off")]
    differ = [key for key, call in calls if not consistent(session.observe(key, call), predicted(key, call, CORRECT))]
    assert not differ


def test_every_misconception_has_a_way_to_be_recognised():
    assert all(m.parts and m.message and (m.variants or m.check) for m in CATALOG)
    assert len({m.id for m in CATALOG}) == len(CATALOG)


def test_accuracy_on_the_corpus():
    report = evaluate.evaluate()
    assert report.accuracy >= ACCURACY_FLOOR, f"named right for {report.accuracy:.0%}; wrong: {report.wrong}"
    assert not report.false_alarms


def test_diagnosis_through_a_worker(tmp_path):
    """Student code runs in the worker; the diagnosis only sends calls and reads replies."""
    mutant = next(m for m in load_mutants() if m.id == "sdpa-no-scale")
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
