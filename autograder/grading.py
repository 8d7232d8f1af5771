"""Grade one submission: static scan, the test suites against an isolated worker, scores, feedback.

This process holds the expected values and writes results; the submission only ever runs in the
worker processes that the `impl` fixture (and the diagnosis) start.
"""
import contextlib
import io
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from autograder import rubric as rubric_file
from autograder import static_check, submission
from autograder.pytest_plugin import BACKEND_KEY, RUBRIC_KEY
from autograder.scoring import PartScore, TestResult, score_parts, total
from autograder.submission import GradingError

SUITE_DIRS = {"public": "tests_public", "hidden": "tests_hidden"}
SEED_NOTE = "inputs: torch.manual_seed(crc32(test id)) per test; hypothesis derandomized, no database"


@dataclass
class Grade:
    submission: str
    score: float
    max_score: float
    parts: dict
    tests: list
    isolation: str
    suites: tuple
    execution_time: float
    output: str = ""                       # what the submission printed (capped)
    notes: list = field(default_factory=list)
    extra_entries: list = field(default_factory=list)  # timing / knowledge rows for results.json


def grade(path: Path, *, suites=("public", "hidden"), isolation: str = "auto", hide=(),
          rubric=None, extras: bool = True) -> Grade:
    """`extras` adds the parts not graded by tests: timing (CUDA) and the knowledge check."""
    started = time.monotonic()
    rubric = rubric or rubric_file.load()
    with tempfile.TemporaryDirectory(prefix="mhsa-grade-") as workdir:
        sub = submission.load(Path(path), Path(workdir))
        zeroed = forbidden_parts(sub.source.read_text(errors="replace"), rubric)
        hidden = [*hide, *([sub.origin.resolve()] if submission.safe_to_hide(sub.origin) else [])]
        tests, backend = run_suites(sub.source, suites, isolation, hidden, rubric)
        for t in tests:
            if t.forbidden:
                zeroed.setdefault(t.part, []).append(t.forbidden)
        parts = score_parts(tests, rubric, suites, zeroed)
        notes = []
        if isolation != "inprocess" and "hidden" in suites:
            notes = diagnose(sub.source, parts, tests, rubric, isolation, hidden)
        extra_entries = []
        if extras:
            extra_entries += grade_knowledge(sub, rubric, parts)
            extra_entries += grade_timing(sub, rubric, parts, isolation, hidden)
    score, max_score = total(parts)
    return Grade(sub.name, score, max_score, parts, tests, getattr(backend, "isolation", isolation),
                 tuple(suites), round(time.monotonic() - started, 2),
                 backend.printed_output() if hasattr(backend, "printed_output") else "", notes, extra_entries)


def forbidden_parts(source: str, rubric) -> dict:
    """part -> reasons, from the static scan; module-level findings zero every code part."""
    zeroed = {}
    code_parts = [p.name for p in rubric.parts.values() if p.functions]
    for finding in static_check.scan(source):
        parts = rubric.part_of(finding.function) if finding.function else code_parts
        for part in parts:
            zeroed.setdefault(part, []).append(f"line {finding.line}: {finding.message}")
    return zeroed


class _Collector:
    """Receives pytest's reports in this process and keeps one TestResult per test."""

    def __init__(self, rubric):
        self.results, self.errors, self.backend = {}, [], None
        self.rubric = rubric

    def pytest_configure(self, config):
        config.stash[RUBRIC_KEY] = self.rubric  # the worker gets this grade's limits, not the file's

    def pytest_collectreport(self, report):
        if report.failed:
            self.errors.append(f"{report.nodeid}: {report.longreprtext[-2000:]}")

    def pytest_runtest_logreport(self, report):
        info = dict(report.user_properties)
        if "part" not in info or report.skipped:
            return
        previous = self.results.get(report.nodeid)
        if previous is not None and not previous.passed:
            return  # a failed call stays failed even if teardown passes
        self.results[report.nodeid] = TestResult(
            report.nodeid, info["part"], info["suite"], report.passed,
            summary=info.get("summary", ""), detail=info.get("detail", ""), hint=info.get("hint", ""),
            example=info.get("example", ""), forbidden=info.get("forbidden", ""))

    def pytest_sessionfinish(self, session):
        self.backend = session.config.stash.get(BACKEND_KEY, None)


def run_suites(source: Path, suites, isolation: str, hidden, rubric) -> tuple:
    collector = _Collector(rubric)
    run_pytest(source, suites, isolation, collector, hidden)
    return list(collector.results.values()), collector.backend


def run_pytest(source: Path, suites, isolation: str, plugin, hidden=()) -> None:
    """Run `suites` quietly against `source`, reports going to `plugin` (which keeps collection
    failures in `plugin.errors`); GradingError when the suites themselves cannot run."""
    repo = rubric_file.REPO
    args = [*(str(repo / SUITE_DIRS[s]) for s in suites), "--impl", str(source), "--isolation", isolation,
            "-q", "-p", "no:warnings", "-p", "no:cacheprovider", "--rootdir", str(repo),
            "-c", str(repo / "pyproject.toml")]
    for path in hidden:
        args += ["--hide", str(path)]
    log = io.StringIO()
    with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        code = pytest.main(args, plugins=[plugin])
    if plugin.errors or code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        raise GradingError(f"the test suites could not run on {source} (pytest exit {int(code)}):\n"
                           + "\n".join(plugin.errors or [log.getvalue()[-3000:]]))


def diagnose(source: Path, parts: dict, tests: list, rubric, isolation: str, hidden) -> list:
    """Set each failed part's likely misconception; returns notes for the instructor, if any."""
    failed = [name for name, p in parts.items() if p.score < p.max_score and not p.notes]
    if not failed or not any(t.passed for t in tests):  # nothing runs: nothing to compare
        return []
    from autograder import diagnosis
    from autograder.backends import WorkerBackend
    from autograder.isolation import resolve

    backend = WorkerBackend(source, resolve(isolation), rubric.limits, hidden)
    try:
        found = diagnosis.diagnose(backend, failed)
    except Exception as err:  # noqa: BLE001 - a diagnosis is advice; the grade stands without it
        return [f"no diagnosis: {type(err).__name__}: {err}"]
    finally:
        backend.close()
    for part, message in found.items():
        parts[part].diagnosis = message
    return []


def grade_knowledge(sub, rubric, parts) -> list:
    part = rubric.parts.get("knowledge")
    if part is None:
        return []
    from autograder import knowledge

    reason = None
    if sub.knowledge is None:
        reason = "no knowledge-check answers in this submission (assignment/knowledge.py or the notebook)"
    elif not knowledge.KEY_FILE.is_file():  # a student's release has no key: only instructors grade it
        reason = "the answer key is not in this copy of the repository"
    if reason:
        parts["knowledge"] = PartScore("knowledge", part.title, 0.0, part.points, graded=False,
                                       notes=[f"{reason}: not graded here"])
        return []

    rows = knowledge.grade(sub.knowledge, part.points)
    score = round(sum(r["score"] for r in rows), 4)
    parts["knowledge"] = PartScore("knowledge", part.title, score, part.points)
    return rows


def grade_timing(sub, rubric, parts, isolation, hidden) -> list:
    part = rubric.parts.get("timing")
    if part is None:
        return []
    try:
        from gpu_checks import grade_timing as timing
        from gpu_checks.session import TimingSetupError
    except ImportError:
        result = {"status": "skipped", "score": 0.0, "max_score": part.points,
                  "output": "gpu_checks is not installed here"}
    else:
        try:
            result = timing(sub.source, rubric, isolation, hidden=hidden)
        except TimingSetupError as err:  # the grading machine's fault: never the student's points
            result = {"status": "skipped", "score": 0.0, "max_score": part.points,
                      "output": f"the timing check could not run on this machine: {err}"}
    graded = result["status"] != "skipped"
    parts["timing"] = PartScore("timing", part.title, float(result["score"]) if graded else 0.0,
                                float(result["max_score"]), graded=graded, notes=[result["output"]])
    return [{"name": "timing: CUDA speed against the reference", "part": "timing", **result}]
