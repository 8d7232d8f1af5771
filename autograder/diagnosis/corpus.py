"""The corpus of known solutions (corpus/): buggy mutants of the reference, and valid variants.

Mutants are not stored as files: corpus/mutants.toml lists one-place patches of reference/mhsa.py,
applied here, so a change to the reference carries over and a patch that stops applying fails loudly.
"""
import tomllib
from dataclasses import dataclass
from pathlib import Path

from autograder.rubric import PARTS, REPO

CORPUS = REPO / "corpus"
MANIFEST = CORPUS / "mutants.toml"
REFERENCE = REPO / "reference" / "mhsa.py"


class CorpusError(ValueError):
    """The manifest is wrong or no longer fits the reference: fix corpus/mutants.toml."""


@dataclass(frozen=True)
class Mutant:
    id: str
    misconception: str
    parts: tuple   # every rubric part that must lose points, and no other
    find: str
    replace: str

    def source(self, reference: str) -> str:
        count = reference.count(self.find)
        if count != 1:
            raise CorpusError(f"mutant {self.id}: its `find` text occurs {count} times in reference/mhsa.py "
                              "instead of once; update corpus/mutants.toml")
        return reference.replace(self.find, self.replace)


def load_mutants(path: Path = MANIFEST) -> list:
    entries = tomllib.loads(Path(path).read_text())["mutants"]
    mutants = [Mutant(e["id"], e["misconception"], tuple(e["parts"]), e["find"], e["replace"]) for e in entries]
    ids = [m.id for m in mutants]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise CorpusError(f"{path}: duplicate mutant ids {', '.join(duplicates)}")
    for m in mutants:
        if not m.parts or not set(m.parts) <= set(PARTS) or m.find == m.replace:
            raise CorpusError(f"{path}: mutant {m.id} needs parts among {PARTS} and a patch that changes something")
    return mutants


def write_mutants(directory: Path, mutants=None) -> dict:
    """Writes <directory>/<id>.py for every mutant; returns id -> path."""
    reference = REFERENCE.read_text()
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = {}
    for mutant in mutants if mutants is not None else load_mutants():
        paths[mutant.id] = directory / f"{mutant.id}.py"
        paths[mutant.id].write_text(mutant.source(reference))
    return paths


def valid_variants() -> list:
    """Correct solutions written in other styles: each must get full marks."""
    return sorted((CORPUS / "valid").glob("*.py"))


def lost_parts(path) -> dict:
    """Grades one corpus file with the public and hidden tests, in-process (corpus code is trusted):
    part -> summaries of its failed tests, for every part that lost points."""
    from autograder.grading import grade

    result = grade(Path(path), isolation="inprocess", extras=False)
    lost = {name: [] for name, part in result.parts.items() if part.score < part.max_score}
    for test in result.tests:
        if not test.passed and test.part in lost:
            lost[test.part].append(f"{test.nodeid}: {test.summary}")
    return lost


def grade_all(paths, jobs: int = 2) -> dict:
    """str(path) -> lost_parts(path), graded `jobs` at a time in fresh processes."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    paths = [str(p) for p in paths]
    with ProcessPoolExecutor(jobs, mp_context=get_context("spawn")) as pool:
        return dict(zip(paths, pool.map(lost_parts, paths)))
