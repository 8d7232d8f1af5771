"""The hidden suite gives the same verdicts, summaries and falsifying examples on every run, and in
the worker as in-process; and it stays fast enough to grade a class."""
import json
import subprocess
import sys

import pytest

from tools.corpus import load_mutants, write_mutants
from autograder.core.rubric import REPO

# A submission that fails in three parts, so that failure summaries and hypothesis's falsifying
# examples are compared too, not only passes.
MUTANT = "sdpa-no-scale"
TIME_LIMIT_S = 45  # one submission, hidden suite, in a worker (about 10 s on two busy cores)

GRADE = """
import json, sys
from autograder.core import rubric
from autograder.pipeline.grading import grade
g = grade(sys.argv[1], suites=("hidden",), isolation=sys.argv[2], extras=False, rubric=rubric.load())
print(json.dumps({"tests": [[t.nodeid, t.passed, t.summary, t.detail, t.example] for t in g.tests],
                  "parts": {n: p.score for n, p in g.parts.items()}, "seconds": g.execution_time}))
"""


def grade_hidden(path, isolation: str) -> dict:
    """In a fresh interpreter, as a grading run would be."""
    done = subprocess.run([sys.executable, "-c", GRADE, str(path), isolation], capture_output=True, text=True,
                          cwd=REPO, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def mutant(tmp_path_factory):
    found = [m for m in load_mutants() if m.id == MUTANT]
    return write_mutants(tmp_path_factory.mktemp("determinism"), found)[MUTANT]


@pytest.fixture(scope="module")
def first(mutant):
    return grade_hidden(mutant, "inprocess")


def test_two_runs_are_identical(mutant, first):
    assert any(not passed for _, passed, *_ in first["tests"])
    assert grade_hidden(mutant, "inprocess") | {"seconds": None} == first | {"seconds": None}


def test_the_worker_gives_the_same_verdicts_and_summaries(mutant, first):
    isolated = grade_hidden(mutant, "process")
    assert [t[:3] for t in isolated["tests"]] == [t[:3] for t in first["tests"]]
    assert isolated["parts"] == first["parts"]
    assert isolated["seconds"] < TIME_LIMIT_S
