"""Names the likely misconception behind a failed part, as a sentence a student reads.

For example: "your output matches attention without the 1/sqrt(d_k) scale".

The submission is probed through its Backend only (it may be a WorkerBackend: student code never
runs here), and what it returns is compared with compact implementations of known mistakes
(model.py), or checked for behaviour those cannot predict (catalog.py); a mistake is named only
when the evidence points to it alone. The message states the mistake in terms of the contract; given
the submission's source, it adds advice for the construct the function holding the mistake uses
(einsum, @, a loop, a transpose ...), and a part that only inherits a mistake from a function it calls
says so. Accuracy on the hand-written corpus: `python -m tools.diagnosis_accuracy`; on mechanically
generated mutants (tools/mutate.py, judged by tools/heldout.py): `python benchmarks/diagnosis_generated.py`.
"""
from autograder.feedback.diagnosis.catalog import Evidence, locate, message
from autograder.feedback.diagnosis.predictions import Unpredicted
from autograder.feedback.diagnosis.probes import PROBES, Session


def _located(backend, parts, probes=PROBES) -> dict:
    """part -> (the Misconception recognised for it, the part whose code holds it). A part whose
    evidence needs a prediction the table lacks gets none: the diagnosis says less rather than guess."""
    evidence = Evidence(Session(backend, probes))
    found = {}
    for part in parts:
        try:
            misconception, origin = locate(evidence, part) if part in probes else (None, None)
        except Unpredicted:
            continue
        if misconception is not None:
            found[part] = misconception, origin
    return found


def identify(backend, parts) -> dict:
    """part -> the Misconception recognised for it (parts with none are left out)."""
    return {part: misconception for part, (misconception, _) in _located(backend, parts).items()}


def diagnose(backend, parts, source: str = None, probes=PROBES) -> dict:
    """part -> a message naming the likely mistake, for the parts where one is recognised. `source`, the
    program text of the graded file, lets the message add advice that fits the code (none without it).
    `probes`: other calls than the diagnosis's own, which the table holds no predictions for."""
    return {part: message(misconception, part, origin, source)
            for part, (misconception, origin) in _located(backend, parts, probes).items()}
