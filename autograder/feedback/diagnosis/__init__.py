"""Names the likely misconception behind a failed part, as a sentence a student reads.

For example: "your output matches attention without the 1/sqrt(d_k) scale".

The submission is probed through its Backend only (it may be a WorkerBackend: student code never
runs here), and what it returns is compared with compact implementations of known mistakes
(model.py), or checked for behaviour those cannot predict (catalog.py); a mistake is named only
when the evidence points to it alone. Accuracy on the hand-written corpus:
`python -m tools.diagnosis_accuracy`; on mechanically generated mutants (tools/mutate.py, judged by
tools/heldout.py): `python benchmarks/diagnosis_generated.py`.
"""
from autograder.feedback.diagnosis.catalog import Evidence, recognise
from autograder.feedback.diagnosis.probes import PROBES, Session


def identify(backend, parts) -> dict:
    """part -> the Misconception recognised for it (parts with none are left out)."""
    evidence = Evidence(Session(backend))
    found = {}
    for part in parts:
        misconception = recognise(evidence, part) if part in PROBES else None
        if misconception is not None:
            found[part] = misconception
    return found


def diagnose(backend, parts) -> dict:
    """part -> a message naming the likely mistake, for the parts where one is recognised."""
    return {part: misconception.message for part, misconception in identify(backend, parts).items()}
