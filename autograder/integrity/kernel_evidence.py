"""Evidence that a notebook's in-kernel grade does not stand for its code: what `gradebook` flags.

`nbgrader autograde` runs the test cells in the student's own kernel, where code in the student's
cells can defeat them (an input transformer that empties every later cell, a test helper redefined to
pass anything). A part that scores more in the kernel than in the isolated suites is not evidence of
that: on partial work the notebook's test cells and the suites always differ (a correct merge_heads
passes its cells while the suites' split-merge round trips fail with a wrong split_heads). Evidence is
what only tampering explains:

- **changed_cells**: a test cell or read-only code cell whose source differs from the released
  notebook's (and from the instructor's, hidden tests included), or one that is gone (neither its grade id nor its source is in the notebook). Text cells
  are not compared: a note typed into a lesson cell touches no test.
- **rerun**: a test cell that passed in the kernel and fails when the notebook's cells run again in
  the grader's worker (notebook.rerun_program: the student's cells as the extraction keeps them, the
  instructor's test cells, the helpers restored before each; a lesson-only demonstration left out
  where no later cell needs it). A cell counts only when it fails in two reruns, each with its own
  random inputs, so that luck on a tolerance is not evidence.

What this does not see: a student's cell that defeats the rerun as well as the kernel (it runs in the
same program as the test cells); such code is what the static scan holds the isolated grade for
(dynamic reach into the interpreter), and the isolated grade itself never runs the notebook's tests.
"""
from dataclasses import dataclass
from pathlib import Path

from autograder.core.errors import clean_name
from autograder.intake import notebook

RERUNS = 2  # a passing kernel cell counts as evidence only when it fails in this many reruns


@dataclass(frozen=True)
class Released:
    """What the instructor released and nbgrader recorded, the reference every notebook is read against."""
    notebook: dict      # grade id -> the released notebook's source of each read-only code cell and test cell
    recorded: dict      # grade id -> the source nbgrader recorded (hidden tests included): what autograde runs
    tests: frozenset    # the grade ids of test cells
    lesson_only: frozenset = frozenset()  # read-only cells the instructor tagged notebook.LESSON_ONLY


def _source(cell) -> str:
    source = cell.get("source", "")
    return _normal("".join(source) if isinstance(source, list) else str(source))


def _normal(text: str) -> str:
    """A cell's code without blank lines and trailing spaces: what nbgrader's clearing of hidden
    tests and a notebook editor's saving may change without anyone touching the code."""
    return "\n".join(line.rstrip() for line in text.splitlines() if line.strip())


def changed_cells(path: Path, released: Released) -> list:
    """Evidence lines about the read-only code cells and test cells of the notebook at `path`."""
    cells = [c for c in notebook.read_cells(path, path.name) if isinstance(c, dict)]
    by_id = {}
    for cell in cells:
        grade_id = notebook._nbgrader_metadata(cell).get("grade_id")
        if grade_id in released.notebook and cell.get("cell_type") == "code":
            by_id.setdefault(grade_id, _source(cell))
    sources = {_source(c) for c in cells}
    found = []
    for grade_id, text in released.notebook.items():
        kind = "test cell" if grade_id in released.tests else "read-only cell"
        # The instructor's own version (hidden tests included, as nbgrader recorded it) is no more
        # a change than the released one: both are what autograde runs.
        written = {_normal(text), _normal(released.recorded.get(grade_id, text))}
        if grade_id in by_id and by_id[grade_id] not in written:
            found.append(f"{kind} {clean_name(grade_id)} differs from the released one")
        elif grade_id not in by_id and not written & sources:
            found.append(f"{kind} {clean_name(grade_id)} is not in the notebook")
    return found


def rerun(path: Path, released: Released, backend_for, seed: int = 0) -> dict:
    """grade id -> whether each test cell passed when the notebook ran again, its random inputs drawn
    from `seed`; `backend_for(program)`
    gives a backend for a program file (a worker, with the grade's isolation and limits). Raises
    errors.SubmissionError (or the worker's import failure) when the program cannot run."""
    # imported here, not above: Call imports torch (a second of one core), which comparing the
    # released cells does not need, nor a gradebook pass whose reruns are all cached
    from autograder.testing.calls import Call

    program = path.with_name(f"{path.stem}-rerun{seed}.py")
    program.write_text(notebook.rerun_program(path, released.recorded, set(released.tests), path.name, seed,
                                                released.lesson_only))
    backend = backend_for(program)
    try:
        outcome = backend.run(Call(notebook.RERUN_OUTCOMES))
    finally:
        backend.close()
    return {str(k): bool(v) for k, v in (outcome.output or {}).items()}


def rerun_evidence(kernel: dict, reruns: list) -> list:
    """Evidence lines: the test cells that passed in the kernel (`kernel`: grade id -> (points, max))
    and failed in every one of `reruns` (grade id -> passed)."""
    found = []
    for grade_id, (points, most) in sorted(kernel.items()):
        passed_in_kernel = most > 0 and points >= most - 1e-6
        if passed_in_kernel and reruns and all(r.get(grade_id) is False for r in reruns):
            found.append(f"test cell {clean_name(grade_id)} passed in the kernel and fails when the same "
                         "cells run again in the grader's worker")
    return found
