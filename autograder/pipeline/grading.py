"""Grade one submission: an ordered list of small stages, from loading it to holding it for review.

Each stage takes the context and the grade so far and returns the next grade (the way nbgrader
composes preprocessors).

    load_submission -> static_scan -> start_worker -> run_suites -> judge_work -> carry_forward
    -> shrink_failures -> score -> diagnose -> draw_pictures -> grade_knowledge -> grade_timing
    -> apply_late_penalty -> hold_for_review

then autograder/record/results.py writes the finished Grade in every shape (results.json, the terminal
table, a CSV row). This process holds the expected values and writes results; the submission only
ever runs in the worker that the context starts (autograder/pipeline/context.py), which the suites and the
diagnosis share.
"""
import ast
import contextlib
import io
import math
import time
from dataclasses import replace
from pathlib import Path

from autograder.core import paths
from autograder.intake import route, submission
from autograder.integrity import static_check
from autograder.pipeline.context import GradingContext
from autograder.record import carry_forward as ecf
from autograder.record import scoring
# The grade's record lives below the stages, so that results (which writes it) need not import them
from autograder.intake.submission import GradingError
from autograder.record.grade import Grade, Status, Work
from autograder.record.scoring import PartScore, Row, TestResult, to_units

# ------------------------------------------------------------------------------------------------
# The stages
# ------------------------------------------------------------------------------------------------

def load_submission(ctx: GradingContext, grade: Grade) -> Grade:
    sub = submission.load(ctx.path, ctx.workdir)
    return replace(grade, submission=sub.name, source=sub.source, knowledge_answers=sub.knowledge,
                   notes=grade.notes + sub.notes)


def static_scan(ctx: GradingContext, grade: Grade) -> Grade:
    """The assignment's rule in the source. A library attention inside a rubric function zeroes its
    parts. One at module level or in a helper of the student's own (which any function may call) may
    be a comparison the student made (a notebook cell checking against nn.MultiheadAttention) or a
    cheat the graded code reaches later: the grader cannot tell, so it holds every code part for a
    person, as it does for whatever else it cannot decide (static_check.REVIEW); the run-time monitor
    still zeroes the parts whose calls it saw use one. The scan reads the bytes, so a file that is not
    UTF-8 is a finding, not a silent replacement."""
    found = {static_check.FORBIDDEN: {}, static_check.REVIEW: {}}
    code_parts = [p.name for p in ctx.rubric.parts.values() if p.functions]  # timing times the functions too
    cells = _cell_lines(grade.source)
    for finding in static_check.scan(grade.source.read_bytes()):
        parts = ctx.rubric.part_of(finding.function) if finding.function else []
        kind, message = finding.kind, finding.message
        if not parts:
            parts = code_parts
            if kind == static_check.FORBIDDEN:
                kind, message = static_check.REVIEW, (f"{message}; outside the graded functions, so a person "
                                                 "checks whether graded code reaches it")
        for part in parts:
            found[kind].setdefault(part, []).append(f"{cells.line(finding.line)}: {message}")
    return replace(grade, forbidden=found[static_check.FORBIDDEN], held=found[static_check.REVIEW])


def start_worker(ctx: GradingContext, grade: Grade) -> Grade:
    """What runs the submission starts importing torch now (a lone grade's template, or a spawned
    worker, which imports the submission too), alongside this process's own work before the first
    test (pytest's collection; for a lone `grade`, importing torch and pytest, which this module
    leaves to run_suites for that reason)."""
    ctx.start_worker(grade.source)
    return grade


def run_suites(ctx: GradingContext, grade: Grade) -> Grade:
    """One TestResult per test. Where carry_forward can run, each hypothesis test stops at its first
    failing example, unshrunk (shrinks_later): this run decides which tests pass, and shrink_failures
    shrinks the failures a student reads. When the whole-submission limit stops the grade
    (ctx.stop_early), the tests that finished keep their results, the one in flight and every one not
    yet run fail with the reason, and a note says so."""
    backend = ctx.backend(grade.source)
    rerun_unforeseen = enabled(carry_forward, ctx)  # asked after each test until a rerun is certain

    def after_test(results):  # carry_forward's worker starts while the suites go on, once a rerun is certain
        nonlocal rerun_unforeseen
        if rerun_unforeseen and not ctx.time_up and not backend.import_failure and \
                ecf.rerun_coming(ctx.rubric, results.values(), grade.forbidden):
            rerun_unforeseen = False
            ctx.start_rerun_worker(grade.source)

    collector = _Collector(backend, ctx, after_test)
    run_pytest(grade.source, ctx.suites, collector, stopped=lambda: bool(ctx.time_up), shrink=not shrinks_later(ctx))
    tests = _rows(collector, grade)
    if ctx.time_up:
        not_run = [TestResult(nodeid, part, suite, False, summary=ctx.time_up, stopped=True)
                   for nodeid, (part, suite) in collector.planned.items() if nodeid not in collector.started]
        finished = sum(not t.stopped for t in tests)
        tests += tuple(not_run)
        grade = replace(grade, notes=(*grade.notes, f"The whole-submission time limit was reached: {finished} of "
                                                    f"{len(tests)} tests had finished and keep their results; the "
                                                    "others failed with the reason"))
    return _with_findings(grade, tests)


def _rows(collector, grade: Grade) -> tuple:
    """The collector's TestResults, their tracebacks naming the notebook cell rather than the
    extracted program's line."""
    cells = _cell_lines(grade.source)
    return tuple(replace(t, summary=cells.tracebacks(t.summary), detail=cells.tracebacks(t.detail))
                 for t in collector.results.values())


def _with_findings(grade: Grade, tests) -> Grade:
    """`grade` with `tests`, each forbidden API a test met added to its part's findings: zeroed, or
    held for a person where the monitor could not vouch for the record."""
    zeroed = {part: list(reasons) for part, reasons in grade.forbidden.items()}
    held = {part: list(reasons) for part, reasons in grade.held.items()}
    for t in tests:
        found = held if t.monitor_silent else zeroed
        if t.forbidden and t.forbidden not in found.get(t.part, []):
            found.setdefault(t.part, []).append(t.forbidden)
    return replace(grade, tests=tuple(tests), forbidden=zeroed, held=held)


def judge_work(ctx: GradingContext, grade: Grade) -> Grade:
    """The grade with what its code was (grade.Work, work_done)."""
    return replace(grade, work=work_done(ctx, grade))


def work_done(ctx: GradingContext, grade: Grade) -> Work:
    """What the graded code was. Attempted: some contract function holds code of the student's own
    (route.is_stub is false), whatever it scored. Untouched: every contract function is defined and
    still raises NotImplementedError, as handed out (its parameters renamed or not). Did not compile:
    nothing of it could run: the worker could not import the program (a SyntaxError that
    load_submission could not leave out, a file that is not UTF-8, an import that raised), or a
    contract function is missing or is load_submission's stand-in for code that did not compile (a
    notebook's solution cell that did not compile leaves its function out)."""
    if ctx.backend(grade.source).import_failure:
        return Work.DID_NOT_COMPILE
    program = grade.source.read_text(errors="replace")
    if not route.is_stub(program, ctx.rubric.contract):
        return Work.ATTEMPTED
    defined = {node.name: ast.dump(node) for node in ast.parse(program).body
               if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    lost = any(defined.get(name) in (None, ast.dump(ast.parse(submission.stand_in(name)).body[0]))
               for name in ctx.rubric.contract)
    return Work.DID_NOT_COMPILE if lost else Work.UNTOUCHED


def carry_forward(ctx: GradingContext, grade: Grade) -> Grade:
    """Error carried forward (autograder/record/carry_forward.py): a part's failed tests run once more with
    correct versions of the failed parts it builds on in place of the student's, part by part, each
    after the parts it builds on (whose own reruns decide first whether their code is wrong), in a
    worker of their own (GradingContext.rerun_backend). Only whether each test passed comes back: one
    that passes takes the rerun's pass (`stood_in` names those parts); one that fails again keeps the
    first run's row, from the student's own code, and `stood_in` marks it as this part's own mistake.
    No text written while the correct versions were in the worker reaches the student. Skipped once
    the whole-submission limit is reached: what finished keeps its result."""
    if ctx.backend(grade.source).import_failure:
        return grade  # nothing imported: every rerun would fail the same way, after the same wait
    by_id = {t.nodeid: t for t in grade.tests}
    for part in ecf.order(ctx.rubric):
        rerun = ecf.rerun_for(ctx.rubric, part, tuple(by_id.values()), grade.forbidden)
        if rerun is None or ctx.time_up:
            continue
        backend = ctx.rerun_backend(grade.source)
        collector = _Collector(backend, ctx)
        backend.stand_ins = rerun.source
        try:
            run_pytest(grade.source, ctx.suites, collector, stopped=lambda: bool(ctx.time_up), nodeids=rerun.nodeids,
                       shrink=False)
        finally:
            backend.stand_ins = ""
        for t in collector.results.values():
            if t.nodeid in by_id and not t.forbidden and not t.stopped:  # stopped: the first pass's result stands
                first = by_id[t.nodeid]
                by_id[t.nodeid] = replace(t if t.passed else first, stood_in=rerun.upstream)
    return replace(grade, tests=tuple(by_id.values()))


def shrinks_later(ctx: GradingContext) -> bool:
    """Whether the failing examples wait for shrink_failures: where carry_forward can clear failures
    (it is on and has its correct versions; a student's release has none). Elsewhere run_suites
    shrinks them as it goes, once, as a student's own pytest does."""
    return enabled(carry_forward, ctx) and ecf.stand_ins_available()


def shrink_failures(ctx: GradingContext, grade: Grade) -> Grade:
    """The smallest failing case of each failure a student reads. run_suites and carry_forward stop
    each hypothesis test at its first failing example: shrinking one never changes whether that test
    fails, and most of a buggy grade's shrinking went to failures that carry_forward then clears (a
    part failing only through a part it builds on). The failures left on an example hypothesis drew
    run once more in the student's worker, shrinking on; each that fails on a drawn example again
    takes that run's row, its stood_in kept (what the first run would have reported had it shrunk).
    Which tests pass stays as decided before: a test that passes now, or fails only on an explicit
    example, keeps its first failure with its example as found, and so does one the whole-submission
    limit stops. Skipped when nothing imported, when the limit is reached, and when a call blew a
    limit: its entry point now fails at once, so the rerun would not meet the code the test met."""
    drawn = tuple(t.nodeid for t in grade.tests if t.drawn_failure and not t.stopped)
    backend = ctx.backend(grade.source)
    if not drawn or ctx.time_up or backend.import_failure or backend.blew_a_limit:
        return grade
    collector = _Collector(backend, ctx)
    run_pytest(grade.source, ctx.suites, collector, stopped=lambda: bool(ctx.time_up), nodeids=drawn)
    shrunk = {t.nodeid: t for t in _rows(collector, grade) if t.drawn_failure and not t.stopped}
    return _with_findings(grade, tuple(replace(shrunk[t.nodeid], stood_in=t.stood_in) if t.nodeid in shrunk else t
                                       for t in grade.tests))


def _cell_lines(source: Path):
    """Where each line of the graded program was written: the notebook's cells for a notebook, else
    the program's own lines."""
    from autograder.intake import notebook

    return notebook.CellLines.of(source.read_text(errors="replace"))


def score(ctx: GradingContext, grade: Grade) -> Grade:
    tests, parts = scoring.score_parts(grade.tests, ctx.rubric, ctx.suites, grade.forbidden)
    return replace(grade, tests=tests, parts=parts)


def diagnose(ctx: GradingContext, grade: Grade) -> Grade:
    """Each failed part's likely misconception, probed through the grade's own worker."""
    failed = [name for name, p in grade.parts.items() if p.units < p.max_units and name not in grade.forbidden]
    if not failed or not any(t.passed for t in grade.tests):
        return grade  # nothing runs at all: nothing to compare
    if ctx.time_up:  # probes would fail for want of time, not for what the code does: no advice beats wrong advice
        return grade
    from autograder.feedback import diagnosis

    try:
        found = diagnosis.diagnose(ctx.backend(grade.source), failed, source=Path(grade.source).read_text())
    except Exception as err:  # noqa: BLE001 - a diagnosis is advice; the grade stands without it
        return replace(grade, notes=(*grade.notes, f"no diagnosis: {type(err).__name__}: {err}"))
    if ctx.time_up:  # the limit came during the probes
        return grade
    parts = {name: replace(p, diagnosis=found[name]) if name in found else p for name, p in grade.parts.items()}
    return replace(grade, parts=parts)


def draw_pictures(ctx: GradingContext, grade: Grade) -> Grade:
    """For each failed part about attention weights or masks, its weights beside the expected ones on
    one small fixed case (never a hidden test's inputs), through the grade's own worker."""
    failed = [name for name, p in grade.parts.items() if p.units < p.max_units and name not in grade.forbidden]
    if not failed or not any(t.passed for t in grade.tests) or ctx.time_up:
        return grade
    from autograder.feedback import pictures

    drawn = {}
    for name in (part for part in failed if part in pictures.PARTS):
        try:
            found = pictures.picture(ctx.backend(grade.source), name)
        except Exception:  # noqa: BLE001 - a picture is advice; the grade stands without it
            found = None
        if ctx.time_up:  # the limit came while drawing: what was drawn may be of a stopped call
            return grade
        if found is not None:
            drawn[name] = replace(grade.parts[name], picture_text=found.text(), picture_html=found.html())
    return replace(grade, parts=grade.parts | drawn)


NO_KEY = "the answer key is not in this copy of the repository"


def knowledge_left_out(part) -> str:
    """Why the knowledge part is left out of the maximum, "" when it counts: the one predicate that
    grade_knowledge and planned_max_units share. A student's release has no key (only instructors
    grade it); before its deadline the check is withheld."""
    if not paths.KNOWLEDGE_KEY.is_file():
        return NO_KEY
    from autograder.intake import knowledge

    return "" if knowledge.feedback_mode(part.settings) == knowledge.PER_QUESTION else \
        knowledge.withheld_reason(part.settings)


def grade_knowledge(ctx: GradingContext, grade: Grade) -> Grade:
    part = ctx.rubric.parts["knowledge"]
    from autograder.intake import knowledge

    left_out = knowledge_left_out(part)
    if left_out == NO_KEY:
        return _with_part(grade, PartScore("knowledge", part.title, 0, to_units(part.points), graded=False,
                                           notes=(f"{NO_KEY}: not graded here",), left_out_because=NO_KEY))
    answers = grade.knowledge_answers or {}
    notes = () if grade.knowledge_answers is not None else (
        "no knowledge-check answers in this submission (assignment/knowledge.py or the notebook): 0 points",)
    entries = knowledge.grade(answers, part.points, part.settings)
    withheld = bool(left_out)  # until the deadline: not graded yet, its rows say only the answers' form
    shares = scoring.apportion(to_units(part.points), [1] * len(entries))
    rows = tuple(Row(e["name"], "knowledge", e["status"], round(share * e["score"] / e["max_score"]),
                     0 if withheld else share, e["output"]) for e, share in zip(entries, shares))
    return _with_part(replace(grade, rows=(*grade.rows, *rows)),
                      PartScore("knowledge", part.title, sum(r.units for r in rows), to_units(part.points),
                                graded=not withheld, notes=notes + (knowledge.withheld_note(part.settings),) * withheld,
                                left_out_because=left_out))


def grade_timing(ctx: GradingContext, grade: Grade) -> Grade:
    """The timing part: the only place the grading engine reaches gpu_checks."""
    part = ctx.rubric.parts["timing"]
    if ctx.isolation is None:
        result = {"status": "skipped", "score": 0.0, "output": "timing needs worker isolation"}
    elif ctx.time_up:  # where the part is timed it keeps its place in the maximum, as on every other route
        counts = timing_counts(part, ctx.timing_device)
        result = {"status": "failed" if counts else "skipped", "score": 0.0, "output": f"not timed: {ctx.time_up}"}
    else:
        from gpu_checks import grade_timing as time_submission
        from gpu_checks.session import TimingSetupError

        device = None if ctx.timing_device == "auto" else ctx.timing_device
        try:
            result = time_submission(grade.source, ctx.rubric, ctx.isolation, hidden=ctx.hidden, device=device)
        except TimingSetupError as err:  # the grading machine's fault: never the student's points
            result = {"status": "skipped", "score": 0.0,
                      "output": f"the timing check could not run on this machine: {err}"}
    row, timing = timing_part(result, part, _timed_device(ctx))
    return _with_part(replace(grade, rows=(*grade.rows, row)), timing)


def timing_part(result: dict, part, device: str) -> tuple:
    """(row, PartScore) of a timing verdict (status, score, output) for the rubric's timing `part`,
    `device` in words: a skipped timing is not graded, so it stays out of the maximum. The timing
    batch's merge (gpu_checks/batch.py) makes its rows here too."""
    graded = result["status"] != "skipped"
    units = to_units(float(result["score"])) if graded else 0
    max_units = to_units(part.points) if graded else 0
    row = Row(f"timing: speed against the reference ({device})", "timing", result["status"],
              units, max_units, result["output"])
    left_out_because = "" if graded else result.get("left_out_because") or result["output"].strip().split("\n")[0]
    return row, PartScore("timing", part.title, units, to_units(part.points), graded=graded,
                          notes=(result["output"],) if not graded else (), left_out_because=left_out_because)


def apply_late_penalty(ctx: GradingContext, grade: Grade) -> Grade:
    """The rubric's late policy ([results] late_penalty_per_day, late_days_max) as one row with
    negative points, so that the rows still add up to the total; part scores stay as earned."""
    share, why = _late_share(ctx)
    penalty = scoring.penalty_units(scoring.total_units(grade.parts)[0], share)
    row = Row("late penalty", "late", "failed", penalty, 0, why, share=share, days=math.ceil(ctx.days_late))
    return replace(grade, adjustments=(*grade.adjustments, row))


def _late_share(ctx: GradingContext):
    """(share of the score taken, why) under the rubric's late policy, or None when not late."""
    policy = ctx.rubric.results
    days = math.ceil(ctx.days_late) if ctx.days_late > 0 else 0
    if not days or not (policy.late_penalty_per_day or policy.late_days_max):
        return None
    too_late = policy.late_days_max and days > policy.late_days_max
    share = 1.0 if too_late else min(1.0, policy.late_penalty_per_day * days)
    why = (f"{days} day(s) late, past the {policy.late_days_max}-day limit: the score is 0" if too_late else
           f"{days} day(s) late at {policy.late_penalty_per_day:.0%} a day: {share:.0%} of the score taken")
    return share, why


def hold_for_review(ctx: GradingContext, grade: Grade) -> Grade:
    """What the grader could not decide (grade.held) holds the whole grade for a person: status
    "held", the total withheld as 0 until released unless the rubric's [results] held_score says
    "earned". Both outcomes of the review are computed now, so that `review` only picks one: released,
    the total as earned; confirmed, the held parts score 0 (as a forbidden API would) and the late
    penalty applies to the rest."""
    if not grade.held:
        return grade
    kept = sum(p.units for name, p in grade.parts.items() if name not in grade.held)
    late = _late_share(ctx)
    confirmed = kept + (scoring.penalty_units(kept, late[0]) if late else 0)
    return replace(grade, status=Status.HELD, withheld=ctx.rubric.results.held_score == "withheld",
                   confirmed_units=max(0, confirmed))


def _timed_device(ctx: GradingContext) -> str:
    return {"auto": "CUDA when available", "cuda": "CUDA", "cpu": "CPU"}[ctx.timing_device]


def _with_part(grade: Grade, part: PartScore) -> Grade:
    return replace(grade, parts={**grade.parts, part.name: part})


STAGES = (load_submission, static_scan, start_worker, run_suites, judge_work, carry_forward, shrink_failures, score,
          diagnose, draw_pictures, grade_knowledge, grade_timing, apply_late_penalty, hold_for_review)

# Whether a stage runs for this grade, decided from the context (the rubric and the command line) before
# the stage starts, as nbgrader's preprocessors have an `enabled` trait; a stage not named here always
# runs. The rubric's switches are declared in autograder/core/rubric.py's SCHEMA (docs/rubric.md).
ENABLED = {
    # [results] carry_forward; the suites' results decide what reruns (none: nothing to do)
    carry_forward: lambda ctx: ctx.rubric.results.carry_forward,
    # only where run_suites left the failing examples as found
    shrink_failures: shrinks_later,
    # probes need a worker; the public suite's results alone say which parts to diagnose (`check`)
    diagnose: lambda ctx: ctx.rubric.diagnosis and ctx.isolation is not None,
    # [feedback] pictures; drawn through a worker, as the probes are
    draw_pictures: lambda ctx: ctx.rubric.pictures and ctx.isolation is not None,
    # [parts.knowledge] / [parts.timing] (a part with enabled = false is not in rubric.parts)
    grade_knowledge: lambda ctx: ctx.extras and "knowledge" in ctx.rubric.parts,
    grade_timing: lambda ctx: ctx.extras and "timing" in ctx.rubric.parts,
    # [results] late_penalty_per_day / late_days_max, for a submission that is late
    apply_late_penalty: lambda ctx: _late_share(ctx) is not None,
}


def enabled(stage, ctx: GradingContext) -> bool:
    return ENABLED.get(stage, lambda ctx: True)(ctx)


def run(ctx: GradingContext, stages=STAGES) -> Grade:
    """Every stage in order that is enabled for `ctx`; the context's worker and folder are gone when
    this returns."""
    started = time.monotonic()
    grade = Grade(Path(ctx.path).name.removesuffix(".py"), ctx.isolation_level, ctx.suites, notes=ctx.notes)
    try:
        for stage in stages:
            if enabled(stage, ctx):
                grade = stage(ctx, grade)
        backend = ctx._backend
        printed = backend.printed_output() if hasattr(backend, "printed_output") else ""
    finally:
        ctx.close()
    return replace(grade, output=printed, execution_time=round(time.monotonic() - started, 2))


def grade(path: Path, **options) -> Grade:
    """Grade `path` with every stage; `options` are GradingContext.create's (suites, isolation, hide,
    rubric, extras, timing_device, call_timeout). Raises GradingError when grading is impossible."""
    return run(GradingContext.create(path, **options))


# ------------------------------------------------------------------------------------------------
# Running the suites
# ------------------------------------------------------------------------------------------------

class ResultCollector:
    """pytest plugin: one TestResult per graded test (one with a rubric part) from pytest's reports, by
    node id, and the collection failures (`errors`, which make run_pytest refuse the run). The one
    reader of pytest's outcomes: a grade's collector and the corpus's (tools/corpus.py) build on it."""

    def __init__(self):
        self.results, self.errors = {}, []

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
            example=info.get("example", ""), forbidden=info.get("forbidden", ""),
            monitor_silent=info.get("monitor_silent", False), stopped=info.get("stopped", False),
            parity=info.get("parity", ""), requires=info.get("requires", ""))


class _Collector(ResultCollector):
    """Hands the grade's backend to the suites and keeps one TestResult per test from pytest's reports;
    stops the session once `ctx.time_up` (the whole-submission limit) is set."""

    def __init__(self, backend, ctx: GradingContext, after_test=lambda results: None):
        """`after_test(results)`: called with the results so far after each test."""
        super().__init__()
        self.backend, self.ctx, self.after_test = backend, ctx, after_test
        self.planned = {}     # node id -> (part, suite) of every graded test, in run order
        self.started = set()  # node ids of the tests pytest began

    def pytest_configure(self, config):
        from autograder.testing.pytest_plugin import GRADER_BACKEND

        config.stash[GRADER_BACKEND] = self.backend

    def pytest_sessionstart(self, session):
        self.session = session

    def pytest_collection_finish(self, session):
        from autograder.testing.pytest_plugin import part_and_suite

        self.planned = {item.nodeid: where for item in session.items if (where := part_and_suite(item))}

    def pytest_runtest_logstart(self, nodeid, location):
        self.started.add(nodeid)

    def pytest_runtest_logfinish(self, nodeid, location):
        self.after_test(self.results)
        if self.ctx.time_up:
            self.session.shouldstop = self.ctx.time_up  # pytest stops before the next test


# The module hypothesis's distribution registers as its pytest plugin (entry point `hypothesispytest`).
HYPOTHESIS_PYTEST_PLUGIN = "_hypothesis_pytestplugin"


def run_pytest(source: Path, suites, plugin, stopped=lambda: False, nodeids=(), shrink=True) -> None:
    """Run `suites` quietly against `source`, reports going to `plugin` (which keeps collection
    failures in `plugin.errors`); GradingError when the suites themselves cannot run. `stopped()`:
    whether the plugin stopped the session on purpose (the whole-submission limit). `nodeids`: only
    these tests of the suites (node ids relative to the repository). `shrink`: whether hypothesis
    shrinks a failing example (--unshrunk when not)."""
    import pytest

    # What no grade reads, left out for speed: a failed test's traceback (--tb=no: pytest would parse
    # the source of every frame of it, seconds for a buggy submission; the grade reads the failure
    # from the report's user properties), and unraisableexception, which turns stray __del__ errors
    # into warnings and runs gc.collect five times at the end of the session. Collection errors keep
    # their full text either way. The plugins are the ones named, not every one installed: pytest
    # would otherwise read every package's metadata on each run, import the other plugins an
    # instructor's environment holds (xdist, anyio through Jupyter) and assertion-rewrite each of
    # their modules, hypothesis's whole package included, from source when bytecode is not cached.
    # hypothesis's own plugin stays: it keys a parametrized test's examples by its node id.
    where = [str(paths.REPO / nodeid) for nodeid in nodeids] or [str(paths.SUITE_DIRS[s]) for s in suites]
    args = [*where, "--impl", str(source),
            "-q", "--tb=no", "-p", "no:warnings", "-p", "no:cacheprovider", "-p", "no:unraisableexception",
            "--disable-plugin-autoload", "-p", HYPOTHESIS_PYTEST_PLUGIN,
            "--rootdir", str(paths.REPO), "-c", str(paths.PYPROJECT), *(() if shrink else ("--unshrunk",))]
    log = io.StringIO()
    with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        code = pytest.main(args, plugins=[plugin])
    ended = [pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED] + [pytest.ExitCode.INTERRUPTED] * stopped()
    if plugin.errors or code not in ended:
        raise GradingError(f"the test suites could not run on {source} (pytest exit {int(code)}):\n"
                           + "\n".join(plugin.errors or [log.getvalue()[-3000:]]))


def planned_max_units(rubric, suites=("public", "hidden"), extras=True, timing_device=None) -> int:
    """The maximum a complete grade with these settings states: what a failure result states too, so
    that every route reports the same maximum for the same course setup. A part counts unless the
    predicate its stage uses leaves it out (knowledge_left_out, timing_counts). `timing_device` None:
    the rubric's."""
    units = sum(to_units(p.points) for p in rubric.code_parts.values())
    if not extras:
        return units
    knowledge = rubric.parts.get("knowledge")
    if knowledge is not None and not knowledge_left_out(knowledge):
        units += to_units(knowledge.points)
    timing = rubric.parts.get("timing")
    device = timing_device or (timing.device if timing is not None else "auto")
    if timing is not None and timing_counts(timing, device):
        units += to_units(timing.points)
    return units


def timing_counts(timing, device: str) -> bool:
    """Whether the timing part is in the maximum: on a named device, where CUDA is required, or where
    the default ("auto") finds CUDA."""
    return device != "auto" or timing.require_cuda or _cuda_available()


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()
