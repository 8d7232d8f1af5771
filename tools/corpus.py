"""The corpus of known solutions (corpus/): buggy mutants of the reference, and valid variants.

Mutants are not stored as files: the manifests (corpus/mutants*.toml) list one-place patches of
reference/mhsa.py (or of a valid variant, for mistakes made in another style), applied here, so a
change to the base file carries over and a patch that stops applying fails loudly.
"""
from dataclasses import dataclass
from pathlib import Path

from autograder.core import toml
from autograder.core.paths import CORPUS, REFERENCE, REPO  # noqa: F401 - REFERENCE: the corpus's full-marks baseline, for its users
from autograder.core import rubric
from autograder.pipeline.grading import ResultCollector

MANIFEST = CORPUS / "mutants.toml"
# Every manifest, in the order they were written: the first shaped the diagnosis catalog, the second
# (other styles) tuned its extension, the third was kept out of the tuning (docs/hidden-tests.md).
MANIFESTS = (MANIFEST, CORPUS / "mutants-styles.toml", CORPUS / "mutants-heldout.toml")


class CorpusError(ValueError):
    """The manifest is wrong or no longer fits the reference: fix corpus/mutants.toml."""


@dataclass(frozen=True)
class Mutant:
    id: str
    misconception: str
    parts: tuple   # every rubric part whose tests it fails with its own functions, and no other; the first holds the bug
    find: str
    replace: str
    base: str = "reference/mhsa.py"  # the file patched, relative to the repository
    manifest: str = "mutants"         # the manifest's stem: which set the mutant belongs to

    def source(self) -> str:
        text = (REPO / self.base).read_text()
        count = text.count(self.find)
        if count != 1:
            raise CorpusError(f"mutant {self.id}: its `find` text occurs {count} times in {self.base} "
                              "instead of once; update corpus/mutants.toml")
        return text.replace(self.find, self.replace)


def load_mutants(paths=MANIFESTS) -> list:
    """The mutants of the given manifests (a path or several; by default all of them)."""
    paths = [paths] if isinstance(paths, (str, Path)) else paths
    mutants = []
    for path in map(Path, paths):
        entries = toml.loads(path.read_text())["mutants"]
        mutants += [Mutant(e["id"], e["misconception"], tuple(e["parts"]), e["find"], e["replace"],
                           e.get("base", Mutant.base), path.stem) for e in entries]
    ids = [m.id for m in mutants]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise CorpusError(f"duplicate mutant ids {', '.join(duplicates)}")
    parts = list(rubric.load().parts)
    for m in mutants:
        if not m.parts or not set(m.parts) <= set(parts) or m.find == m.replace:
            raise CorpusError(f"{m.manifest}.toml: mutant {m.id} needs parts among {parts} and a patch that "
                              "changes something")
    return mutants


def graded_in_ci(mutants) -> list:
    """The mutants CI grades with the full suites: the first manifest whole, and from the later ones
    the first mutant of each (misconception, part where it lives) not seen before. Grading costs about
    3 s a mutant; benchmarks/mutants.py grades them all."""
    chosen, seen = [], set()
    for m in mutants:
        kind = (m.misconception, m.parts[0])
        if m.manifest == MANIFEST.stem or kind not in seen:
            chosen.append(m)
        seen.add(kind)
    return chosen


def wrong_parts(mutant: Mutant, lost: dict) -> list:
    """How the parts a mutant lost points in differ from its declaration (empty when they match)."""
    problems = []
    missed = sorted(set(mutant.parts) - set(lost))
    if missed:
        problems.append(f"{mutant.id} ({mutant.misconception}) should lose points in {missed} and does not")
    extra = [f for part, failures in lost.items() if part not in mutant.parts for f in failures[:3]]
    if extra:
        problems.append(f"{mutant.id} loses points in undeclared parts: " + "; ".join(extra))
    return problems


def write_mutants(directory: Path, mutants=None) -> dict:
    """Writes <directory>/<id>.py for every mutant; returns id -> path."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = {}
    for mutant in mutants if mutants is not None else load_mutants():
        paths[mutant.id] = directory / f"{mutant.id}.py"
        paths[mutant.id].write_text(mutant.source())
    return paths


def valid_variants() -> list:
    """Correct solutions written in other styles: each must get full marks."""
    return sorted((CORPUS / "valid").glob("*.py"))


def lost_parts(path, declared=None) -> dict:
    """Grades one corpus file with the public and hidden tests, in-process (corpus code is trusted):
    part -> summaries of failed tests, for every part that lost points.

    Without `declared` this is the real grading engine. With it (a mutant's parts), a declared part
    stops at its first failure: the question is only whether each part loses, and the remaining
    failures of a broken part would cost most of the time (hypothesis shrinks each one).
    """
    if declared is None:
        from autograder.core import rubric
        from autograder.pipeline.grading import grade

        result = grade(Path(path), isolation="inprocess", extras=False, rubric=rubric.load())
        lost = {name: [] for name, part in result.parts.items() if part.score < part.max_score}
        for test in result.tests:
            if not test.passed and test.part in lost:
                lost[test.part].append(f"{test.nodeid}: {test.summary}")
        return lost
    return _run_suites(Path(path), set(declared))


class _PartFailures(ResultCollector):
    """The grade's own collector of pytest outcomes, which also skips the tests of a part in
    `stop_after` once that part failed."""

    def __init__(self, stop_after):
        super().__init__()
        self.stop_after = stop_after

    def pytest_runtest_setup(self, item):
        import pytest

        part = next((m.args[0] for m in item.iter_markers("part")), None)
        if part in self.stop_after and part in failed(self):
            pytest.skip(f"part {part} already lost points")


def failed(plugin) -> dict:
    """part -> "node id: summary" of each failed test, for every part with one."""
    found = {}
    for result in plugin.results.values():
        if not result.passed:
            found.setdefault(result.part, []).append(f"{result.nodeid}: {result.summary}")
    return found


def _run_suites(path: Path, stop_after: set) -> dict:
    from autograder.intake.submission import GradingError
    from autograder.pipeline.grading import run_pytest

    plugin = _PartFailures(stop_after)
    try:
        run_pytest(path, ("public", "hidden"), plugin)  # no --isolation: in-process
    except GradingError as err:
        raise CorpusError(str(err)) from None
    return failed(plugin)


def _lost_parts_job(job):
    return lost_parts(*job)


def grade_all(jobs, processes: int = 2) -> dict:
    """jobs: (key, path, declared parts or None) -> {key: lost_parts(path, declared)}, graded
    `processes` at a time in fresh interpreters (each imports torch once, then grades many)."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    jobs = list(jobs)
    with ProcessPoolExecutor(processes, mp_context=get_context("spawn")) as pool:
        results = pool.map(_lost_parts_job, [(str(path), declared) for _, path, declared in jobs])
        return {key: lost for (key, _, _), lost in zip(jobs, results)}
