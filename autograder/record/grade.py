"""The record of one grade (Grade) and its statuses: what the stages build and results writes.

It sits below both, so that the one results model (autograder/record/results.py) reads a grade without
importing the stages that make it (autograder/pipeline/grading.py). Test, part and row records, and the
integer point units, are autograder/record/scoring.py's.
"""
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from autograder.record import scoring
from autograder.record.scoring import Points

SEED_NOTE = "inputs: the CPU generator seeded with crc32(test id) per test; hypothesis derandomized, no database"


class Status(str, Enum):
    """What became of a grade; its value is what results.json and grades.csv say (a str, so JSON
    writes it as it is and a status read back compares equal to its member)."""
    GRADED = "graded"
    HELD = "held"        # graded, but what the grader could not decide waits for a person (`review` command)
    ERROR = "error"      # the submission could not be graded (nothing to grade, the suites could not run)
    TIMEOUT = "timeout"  # the whole-submission time limit ran out before the grade was written
    CRASHED = "crashed"  # the grading process died

    def __str__(self) -> str:
        return self.value

    @property
    def has_grade(self) -> bool:
        """Whether the results hold scores: graded or held; a failure has none, only its maximum."""
        return self in (Status.GRADED, Status.HELD)


FAILURES = (Status.ERROR, Status.TIMEOUT, Status.CRASHED)  # results without a grade


class Work(str, Enum):
    """What the graded code was, beside the grade's Status (which it never changes): the student's own
    attempt, the stubs still unwritten, or code of which nothing could run. Its value is results.json's
    extra_data["work"]; pipeline/grading.py's work_done decides it."""
    ATTEMPTED = "attempted"
    UNTOUCHED = "untouched"              # every contract function as the handout left it
    DID_NOT_COMPILE = "did not compile"  # not imported, or no contract function left but what did not compile

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Grade(Points):
    submission: str
    isolation: str
    suites: tuple
    status: Status = Status.GRADED
    message: str = ""                       # why there is no grade, when status is not "graded"
    source: Path | None = None              # the private copy of the submission being graded
    knowledge_answers: dict | None = None
    work: Work | None = None                # known once the suites ran; None for a grade that never got there
    forbidden: dict = field(default_factory=dict)   # part -> reasons it scores 0
    held: dict = field(default_factory=dict)        # part -> why a person must review it first
    withheld: bool = False                  # a held grade's total reads 0 until released (the rubric's held_score)
    confirmed_units: int = 0                # a held grade's total if the reviewer confirms: its held parts 0
    tests: tuple = ()                       # TestResult, scored once the score stage ran
    parts: dict = field(default_factory=dict)       # part -> PartScore, in rubric order
    rows: tuple = ()                        # knowledge and timing rows (scoring.Row)
    adjustments: tuple = ()                 # rows that change the total, not a part: a late penalty
    notes: tuple = ()                       # for instructors: what the grader could not do
    output: str = ""                        # what the submission printed (capped)
    execution_time: float = 0.0
    max_units_if_failed: int = 0            # the maximum a failure result states
    produced_by: dict = field(default_factory=dict)  # grade_file.graded_with: what a rerun compares

    @property
    def earned_units(self) -> int:
        """The total the tests earned, late penalty included: what a held grade gets once released."""
        return max(0, scoring.total_units(self.parts)[0] + sum(r.units for r in self.adjustments))

    @property
    def units(self) -> int:
        return 0 if self.status == Status.HELD and self.withheld else self.earned_units

    @property
    def max_units(self) -> int:
        return scoring.total_units(self.parts)[1] if self.status.has_grade else self.max_units_if_failed


def failure(name: str, status: str, message: str, max_units: int, isolation: str, suites=(),
            elapsed: float = 0.0) -> Grade:
    """A Grade for a submission that could not be graded: score 0 out of the usual maximum, and why."""
    status = Status(status)
    assert status in FAILURES
    return Grade(name, isolation, tuple(suites), status=status, message=message, execution_time=round(elapsed, 2),
                 max_units_if_failed=max_units)
