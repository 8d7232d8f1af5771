"""Test outcomes + rubric -> points per part and per test, by pure functions (no I/O, new objects out).

Points are counted in whole units of 1/10,000 of a point and split by largest remainders, so the
rows of a result add up exactly to their part and the parts to the total: no 89.9955 against 90.
"""
from dataclasses import dataclass, replace

from autograder.record import carry_forward

UNITS = 10_000  # a point's smallest share
# What hypothesis writes before a drawn example that failed; an explicit one (@example) reads
# "Falsifying explicit example: " and is never shrunk.
DRAWN_EXAMPLE = "Falsifying example: "


class Points:
    """`score` and `max_score` in points, from the whole `units` and `max_units` of a record."""

    @property
    def score(self) -> float:
        return self.units / UNITS

    @property
    def max_score(self) -> float:
        return self.max_units / UNITS


@dataclass(frozen=True)
class TestResult(Points):
    __test__ = False  # a record of a test, not a test class for pytest to collect
    nodeid: str
    part: str
    suite: str            # "public" | "hidden"
    passed: bool
    summary: str = ""     # safe for students even for hidden tests
    detail: str = ""      # expected/actual values: public tests and "full" feedback only
    hint: str = ""
    example: str = ""     # hypothesis's falsifying example (DRAWN_EXAMPLE or an explicit one)
    forbidden: str = ""
    monitor_silent: bool = False  # `forbidden` says the monitor could not vouch for the call: held, not zeroed
    stopped: bool = False  # the whole-submission time limit stopped it (or it never ran): it did not finish
    parity: str = ""      # a self-comparison test: the name of the parity test it depends on
    requires: str = ""    # an argument-checking test: the test of the same function on valid input
    stood_in: tuple = ()  # rerun with correct versions of these failed parts' functions (error carried forward)
    units: int = 0        # points earned, in UNITS
    max_units: int = 0

    @property
    def name(self) -> str:
        """The test function's name with its parameters, as in the node id."""
        return self.nodeid.rsplit("::", 1)[-1]

    @property
    def drawn_failure(self) -> bool:
        """Failed on an example hypothesis drew (which shrinking can make smaller), not on an explicit one."""
        return not self.passed and self.example.startswith(DRAWN_EXAMPLE)


@dataclass(frozen=True)
class PartScore(Points):
    name: str
    title: str
    units: int
    max_units: int
    graded: bool = True   # False: left out of the maximum (e.g. timing without CUDA)
    notes: tuple = ()     # why points were taken or why the part was not graded
    left_out_because: str = ""  # when not graded, why in a few words (grades.csv's left_out, the report)
    diagnosis: str = ""   # the likely misconception behind this part's failures, if one matched
    picture_text: str = ""  # expected and actual attention weights side by side (feedback/pictures.py)
    picture_html: str = ""  # the same as a self-contained HTML fragment


@dataclass(frozen=True)
class Row(Points):
    """A result row that is not a test: one knowledge-check question, the timing verdict, or an
    adjustment of the total (a late penalty)."""
    name: str
    part: str
    status: str           # "passed" | "failed" | "skipped" (not graded: no points either way)
    units: int
    max_units: int
    output: str = ""
    share: float = 0.0    # an adjustment's share of the parts' total (a late penalty): a merge takes it again
    days: int = 0         # a late penalty's days late, as its policy counted them


def to_units(points: float) -> int:
    return round(points * UNITS)


def apportion(total_units: int, weights: list) -> list:
    """Whole units in proportion to `weights`, adding up to `total_units` exactly (largest remainder)."""
    if not weights:
        return []
    whole = sum(weights)
    exact = [total_units * w / whole for w in weights]
    shares = [int(e) for e in exact]
    by_remainder = sorted(range(len(weights)), key=lambda i: (-(exact[i] - shares[i]), i))
    for i in by_remainder[:total_units - sum(shares)]:
        shares[i] += 1
    return shares


def score_parts(tests: tuple, rubric, suites: tuple, zeroed: dict) -> tuple:
    """(tests with their points, {part: PartScore}) for the test-graded parts.

    Each part's points are split between the suites that were run and have tests for it (shares
    from the rubric, renormalized), then evenly between that suite's tests. `zeroed` maps a part to
    the reasons it scores 0 whatever its tests say (forbidden APIs). A test that compares the
    submission only with itself earns its points only when the parity test it names passed: a
    submission that computes nothing right is not rewarded for computing it consistently. Likewise an
    argument-checking test earns its points only when the function works on valid input
    (works_on_valid_input): a stub that raises ValueError for everything has answered nothing.
    """
    parity = {t.nodeid: parity_holds(t, tests) for t in tests}
    works = {t.nodeid: works_on_valid_input(t, tests) for t in tests}
    scored, parts = [], {}
    for name, part in rubric.parts.items():
        mine = [t for t in tests if t.part == name and t.suite in suites]
        if not mine:
            continue
        weights = [rubric.suite_weights.get(t.suite, 0.0) / sum(u.suite == t.suite for u in mine) for t in mine]
        maxima = apportion(to_units(part.points), weights)
        notes = list(zeroed.get(name, []))
        earned = 0
        for test, max_units in zip(mine, maxima):
            counts = test.passed and name not in zeroed and parity[test.nodeid] and works[test.nodeid]
            scored.append(replace(test, units=max_units if counts else 0, max_units=max_units))
            earned += scored[-1].units
        carried = [t for t in mine if t.passed and t.stood_in]
        if name not in zeroed and carried:
            upstream = tuple(dict.fromkeys(u for t in carried for u in t.stood_in))
            own = ", ".join(part.functions) or f"part '{name}'"
            correct = carry_forward.functions_of(rubric, upstream)
            notes.append(f"{len(carried)} tests pass with the grader's correct {correct} in place of yours and keep "
                         f"their points: your {own} is right given a correct {correct}; the mistake is charged in "
                         f"{carry_forward.parts_in_words(upstream)}")
        if name not in zeroed and any(t.passed and not parity[t.nodeid] for t in mine):
            waited = ", ".join(sorted({t.parity for t in mine if t.passed and not parity[t.nodeid]}))
            notes.append(f"consistency tests earn points only once the correctness test they check against passes "
                         f"({waited} must pass first)")
        if name not in zeroed and any(t.passed and not works[t.nodeid] for t in mine):
            first = ", ".join(sorted({t.requires for t in mine if not works[t.nodeid]}))
            notes.append(f"tests that bad arguments are refused earn points only once the same code works on valid "
                         f"arguments ({first} must pass first)")
        parts[name] = PartScore(name, part.title, earned, to_units(part.points), notes=tuple(notes))
    return tuple(scored), parts


def parity_holds(test: TestResult, tests) -> bool:
    """True unless `test` depends on a parity test that failed: the run with the same parameters
    when there is one, else every run of it (none run counts as failed). The parity test is looked
    up in the same test file, so gating stays inside a part: a TransformerBlock's consistency test
    waits for the block's own test_matches_torch, never for MultiHeadSelfAttention's of that name."""
    if not test.parity:
        return True
    module = test.nodeid.split("::")[0]
    outcomes = {t.name: t.passed for t in tests if t.nodeid.split("::")[0] == module}
    params = test.name[len(test.name.split("[")[0]):]
    same_case = f"{test.parity}{params}"
    if params and same_case in outcomes:
        return outcomes[same_case]
    runs = [passed for n, passed in outcomes.items() if n == test.parity or n.startswith(test.parity + "[")]
    return bool(runs) and all(runs)


def works_on_valid_input(test: TestResult, tests) -> bool:
    """True unless `test` checks argument validation and the test it requires (in the same test file;
    any of its runs) passed in none of its runs. Any run, not every run: one working case shows that
    the function was written, and its other mistakes already cost their own tests."""
    if not test.requires:
        return True
    module = test.nodeid.split("::")[0]
    return any(t.passed for t in tests if t.nodeid.split("::")[0] == module
               and (t.name == test.requires or t.name.startswith(test.requires + "[")))


def penalty_units(earned_units: int, share: float) -> int:
    """A penalty that takes `share` of `earned_units` (a late penalty), in negative whole units."""
    return -round(earned_units * share)


def total_units(parts: dict) -> tuple:
    """(earned, maximum) over the graded parts."""
    graded = [p for p in parts.values() if p.graded]
    return sum(p.units for p in graded), sum(p.max_units for p in graded)
