"""Test outcomes + rubric -> points per part and per test. Pure functions: easy to test, no I/O."""
from dataclasses import dataclass, field


@dataclass
class TestResult:
    __test__ = False  # a record of a test, not a test class for pytest to collect
    nodeid: str
    part: str
    suite: str            # "public" | "hidden"
    passed: bool
    summary: str = ""     # safe for students even for hidden tests
    detail: str = ""      # expected/actual values: public tests and "full" feedback only
    hint: str = ""
    example: str = ""     # hypothesis's falsifying example
    forbidden: str = ""
    score: float = 0.0
    max_score: float = 0.0


@dataclass
class PartScore:
    name: str
    title: str
    score: float
    max_score: float
    graded: bool = True   # False: left out of the maximum (e.g. timing without CUDA)
    notes: list = field(default_factory=list)
    diagnosis: str = ""   # the likely misconception behind this part's failures, if one matched


def score_parts(tests: list, rubric, suites: tuple, zeroed: dict) -> dict:
    """Points for the test-graded parts; fills each test's score and max_score in place.

    Each part's points are split between the suites that were run and have tests for it (shares
    from the rubric, renormalized), then evenly between that suite's tests. `zeroed` maps a part
    to the reasons it scores 0 whatever its tests say (forbidden APIs).
    """
    parts = {}
    for name, part in rubric.parts.items():
        mine = [t for t in tests if t.part == name and t.suite in suites]
        if not mine:
            continue
        present = {t.suite for t in mine}
        total_share = sum(rubric.suite_weights.get(s, 0.0) for s in present)
        score = 0.0
        for suite in present:
            in_suite = [t for t in mine if t.suite == suite]
            each = part.points * rubric.suite_weights.get(suite, 0.0) / total_share / len(in_suite)
            for t in in_suite:
                t.max_score = each
                t.score = each if t.passed and name not in zeroed else 0.0
                score += t.score
        parts[name] = PartScore(name, part.title, round(score, 4), part.points, notes=list(zeroed.get(name, [])))
    return parts


def total(parts: dict) -> tuple:
    graded = [p for p in parts.values() if p.graded]
    return round(sum(p.score for p in graded), 4), round(sum(p.max_score for p in graded), 4)
