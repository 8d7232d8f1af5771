"""The failing case a student reads is the smallest hypothesis finds, and it is searched for only
where a student reads it: the runs that decide which tests pass stop at the first failing example
(`--unshrunk`), and the grade's shrink_failures stage shrinks the failures left after carry_forward."""
import json
import re
import subprocess
import sys
from types import SimpleNamespace

from hypothesis.internal.conjecture import engine

from autograder.core import rubric
from autograder.core.paths import REFERENCE, REPO
from autograder.pipeline import grading
from autograder.record import scoring
from autograder.record.grade import Grade
from autograder.record.scoring import TestResult

NO_SCALE = ("scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))", "scores = q @ k.transpose(-2, -1)")
DRAWN_IN_SDPA = "tests_public/test_sdpa.py::test_random_shapes"


def written(tmp_path, *patches) -> str:
    text = REFERENCE.read_text()
    for find, replace in patches:
        assert text.count(find) == 1, find
        text = text.replace(find, replace)
    (tmp_path / "mhsa.py").write_text(text)
    return str(tmp_path / "mhsa.py")


def falsifying(*args) -> str:
    """The falsifying example a student's `pytest` prints, from `Falsifying example:` to its `)`."""
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
                         cwd=REPO, capture_output=True, text=True, timeout=600)
    assert run.returncode == 1, run.stdout + run.stderr
    lines = [line.removeprefix("E").strip() for line in run.stdout.split("Falsifying example: ", 1)[1].splitlines()]
    return " ".join(lines[:lines.index(")") + 1])


def test_unshrunk_stops_at_the_first_failing_example_and_the_test_still_fails(tmp_path):
    impl = written(tmp_path, NO_SCALE)
    shrunk = falsifying(DRAWN_IN_SDPA, "--impl", impl)
    found = falsifying(DRAWN_IN_SDPA, "--impl", impl, "--unshrunk")
    assert "lq=1, lk=2, d_k=2, d_v=1, seed=0" in shrunk, shrunk
    assert found != shrunk, found


def test_a_grade_shrinks_only_the_failures_a_student_reads(tmp_path, monkeypatch):
    """A missing scale fails tests of sdpa, mhsa and block with drawn examples; carry_forward clears
    those of mhsa and block, so only sdpa's drawn failure is shrunk, to what the student's own pytest
    shows."""
    shrinks = []
    shrink = engine.ConjectureRunner.shrink
    monkeypatch.setattr(engine.ConjectureRunner, "shrink",
                        lambda self, *args, **kwargs: shrinks.append(1) or shrink(self, *args, **kwargs))
    impl = written(tmp_path, NO_SCALE)
    grade = grading.grade(impl, suites=("public", "hidden"), isolation="inprocess", rubric=rubric.load(), extras=False)
    drawn = [t for t in grade.tests if t.drawn_failure]
    assert [t.nodeid for t in drawn] == [DRAWN_IN_SDPA], [t.nodeid for t in drawn]
    assert len(shrinks) == 1
    assert {t.part for t in grade.tests if not t.passed} == {"sdpa"}
    shown = re.sub(r"\s+", " ", drawn[0].example.removeprefix("Falsifying example: "))
    assert shown.replace("impl=<InProcessBackend>, ", "") == \
        falsifying(DRAWN_IN_SDPA, "--impl", impl).replace("impl=<InProcessBackend>, ", "")


def test_a_failure_charged_to_its_own_part_is_shrunk_too(tmp_path):
    """A bug in mhsa beside the missing scale, graded on the command line in a worker: the failures
    of both parts that stay after carry_forward (mhsa's as its own mistake) show the case the
    student's own pytest shows for the same test, shrunk."""
    wrong_heads = ("return (y, weights) if need_weights else y", "return (y, weights.mean(dim=1)) if need_weights else y")
    impl, out = written(tmp_path, NO_SCALE, wrong_heads), tmp_path / "results.json"
    run = subprocess.run([sys.executable, "-m", "autograder", "grade", impl, "--results", str(out)],
                         cwd=REPO, capture_output=True, text=True, timeout=900)
    assert out.exists(), run.stdout + run.stderr
    shown = {}
    for row in json.loads(out.read_text())["tests"]:
        case = re.search(r"Smallest failing case: (test_\w+\(.*?\n\s*\))", row.get("output", ""), re.S)
        if case:
            shown[row["name"]] = re.sub(r"\s+", " ", case[1]).replace("impl=<WorkerBackend>, ", "")
    by_test = {name.rsplit("::", 1)[-1]: case for name, case in shown.items()}
    assert set(by_test) == {"test_random_shapes", "test_blocked_weights_are_exactly_zero"}, shown
    for nodeid in (DRAWN_IN_SDPA, "tests_hidden/test_mhsa.py::test_blocked_weights_are_exactly_zero"):
        expected = falsifying(nodeid, "--impl", impl).replace("impl=<InProcessBackend>, ", "")
        assert by_test[nodeid.rsplit("::", 1)[-1]] == expected, (nodeid, by_test, expected)


def test_the_shrinking_rerun_never_changes_which_tests_pass(monkeypatch, tmp_path):
    """The stage's rule, with the rerun's outcomes chosen: a failure whose rerun passes, or fails only
    on an explicit example (the worker's state moved on), keeps its first row; one that fails on a drawn
    example again takes the rerun's row and keeps its stood_in; an explicit failure is not rerun; and
    none is rerun once a call has blown a limit."""
    drawn, explicit = scoring.DRAWN_EXAMPLE, "Falsifying explicit example: "
    first = (TestResult("t::passes_now", "sdpa", "public", False, summary="first", example=drawn + "t(x=9)"),
             TestResult("t::explicit_now", "sdpa", "public", False, summary="first", example=drawn + "t(x=9)"),
             TestResult("t::own_mistake", "mhsa", "hidden", False, summary="first", example=drawn + "t(x=9)",
                        stood_in=("sdpa",)),
             TestResult("t::explicit", "sdpa", "public", False, summary="first", example=explicit + "t(x=1)"),
             TestResult("t::passed", "sdpa", "public", True))
    rerun = {"t::passes_now": TestResult("t::passes_now", "sdpa", "public", True),
             "t::explicit_now": TestResult("t::explicit_now", "sdpa", "public", False, summary="again",
                                           example=explicit + "t(x=1)"),
             "t::own_mistake": TestResult("t::own_mistake", "mhsa", "hidden", False, summary="shrunk",
                                          example=drawn + "t(x=0)")}
    asked = []

    def run_pytest(source, suites, collector, stopped, nodeids=(), shrink=True):
        asked.append((nodeids, shrink))
        collector.results.update({nodeid: rerun[nodeid] for nodeid in nodeids})

    monkeypatch.setattr(grading, "run_pytest", run_pytest)
    (tmp_path / "mhsa.py").write_text("")
    worker = SimpleNamespace(import_failure=None, blew_a_limit=False)
    ctx = SimpleNamespace(time_up="", suites=("public", "hidden"), backend=lambda source: worker)
    grade = grading.shrink_failures(ctx, Grade("s", "sandbox", ("public", "hidden"), source=tmp_path / "mhsa.py",
                                                tests=first))
    assert asked == [(("t::passes_now", "t::explicit_now", "t::own_mistake"), True)]
    assert [t.passed for t in grade.tests] == [t.passed for t in first]
    assert grade.tests[:2] == first[:2] and grade.tests[3:] == first[3:]
    assert (grade.tests[2].summary, grade.tests[2].example, grade.tests[2].stood_in) == \
        ("shrunk", drawn + "t(x=0)", ("sdpa",))

    worker.blew_a_limit, asked[:] = True, []
    assert grading.shrink_failures(ctx, Grade("s", "sandbox", ("public", "hidden"), source=tmp_path / "mhsa.py",
                                              tests=first)).tests == first
    assert asked == []
