"""nbgrader's route: submissions graded again in isolation, and flagged on evidence of tampering.

It grades nbgrader submissions in isolation, flags notebooks on evidence that their in-kernel grade
does not stand for their code (autograder/integrity/kernel_evidence.py), and
(with --write) stores isolated scores in the nbgrader gradebook under a policy that cannot lower an
honest grade by accident (docs/nbgrader.md).

`nbgrader autograde` runs the test cells inside the student's own kernel, where the student's code
can defeat them (an input transformer that empties every later cell, a patched torch.allclose).
The isolated grade runs the student's program (autograder.intake.notebook.extract) in the worker, against
the repository's test suites, through grader slots (autograder/runners/slot.py, --jobs at once) as a batch
does, with the same whole-submission limit and the same results for a timeout or a crash. A part
that scores more in the kernel than in isolation is not flagged by itself: on partial work the
notebook's test cells and the suites always differ. A notebook is flagged on evidence: a test cell
or read-only cell changed or removed, or a test cell that passed in the kernel and fails when the
notebook's cells run again in the grader's worker. An isolated grade held for review (autograder/pipeline/grading.py hold_for_review) is shown as held
with its reasons, and --write withholds its held parts (0) when the rubric says so. After reading a
flagged or held notebook, `gradebook --accept STUDENT` keeps that student's in-kernel grade: it takes
this command's scores out, clears the flag and records the acceptance for that very notebook, so
later runs leave it alone. Isolated results are cached per notebook and what grades it (grade_file.graded_with), so a report and a later
--write share one pass and a rerun after a crash resumes. One notebook that cannot be graded is
reported and skipped: the others finish.
"""
import hashlib
import io
import json
import queue
import shutil
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import partial
from pathlib import Path

from autograder.core.paths import grader_checksum
from autograder.record import results

TOLERANCE = 1e-6
POLICIES = {
    "flagged": "only notebooks flagged on evidence of tampering get their isolated scores, in every part (default)",
    "minimum": "every notebook: each part gets the lower of its in-kernel and isolated scores",
    "isolated": "every notebook: each part gets its isolated score, lower or higher",
}
EXIT_FLAGGED, EXIT_FAILED = 1, 4  # or'ed together: 0 all fine, 1 some flagged, 4 some failed, 5 both
STORE = "isolated"  # course/isolated/: results of the isolated grades; never committed (own .gitignore)
ACCEPTED = "accepted.json"  # STORE/ASSIGNMENT/records/accepted.json: student -> checksum of the notebook accepted


@dataclass
class Student:
    name: str
    notebook: Path | None = None
    in_kernel: dict = field(default_factory=dict)   # part -> points autograde gave its test cells
    kernel_cells: dict = field(default_factory=dict)  # test cell grade id -> (points autograde gave it, its maximum)
    results: "results.Results | None" = None         # the isolated grade, as its results file holds it
    error: str = ""                                  # why there is no isolated grade
    notes: list = field(default_factory=list)        # what extraction left out or changed
    flags: list = field(default_factory=list)
    changes: list = field(default_factory=list)      # what --write did, one line each
    ledger: dict = field(default_factory=dict)       # grade id -> the score --write stored, and why
    accepted: bool = False                           # a person kept the in-kernel grade of this notebook

    @property
    def isolated(self) -> dict:
        """part -> isolated points, for the parts the notebook grades and isolation graded."""
        parts = self.results.parts if self.results else {}
        return {p: parts[p].score for p in self.in_kernel if p in parts and parts[p].graded}

    @property
    def held(self) -> "results.Hold | None":
        """The isolated grade's hold for review, undecided, or None."""
        hold = self.results.held if self.results else None
        return hold if hold is not None and hold.decision is None else None

    @property
    def status(self) -> str:
        if self.error:
            return "failed"
        if self.accepted:
            return "accepted"
        return "held" if self.held else "flagged" if self.flags else "ok"


def run(args) -> int:
    from autograder.core import rubric as rubric_file

    course, assignment = args.course.resolve(), args.assignment
    store = course / STORE / assignment
    (store / "cache").mkdir(parents=True, exist_ok=True)
    (course / STORE / ".gitignore").write_text("# grades of students: never committed\n*\n")
    db_url = f"sqlite:///{course / 'gradebook.db'}"
    if getattr(args, "accept", None):
        return accept(args.accept, db_url, course, assignment)
    rubric = rubric_file.load()
    ahead = start_slots_ahead(course, assignment, store, args, rubric)
    reruns = RerunTemplate(args, rubric, course)  # started by the first rerun that needs it
    try:
        return graded_pass(args, course, assignment, store, db_url, rubric, ahead, reruns)
    finally:
        if ahead is not None:
            ahead.close()  # where they were not used (nothing to grade after all, or an error)
        reruns.stop()


def graded_pass(args, course: Path, assignment: str, store: Path, db_url: str, rubric, ahead,
                reruns: "RerunTemplate") -> int:
    """The pass itself: the isolated grades, nbgrader's scores read meanwhile, the evidence gathered as
    the grades end, the report."""
    autograded = [Student(name, path) for name, path in autograded_notebooks(course, assignment, args).items()]
    graded, cores = queue.Queue(), SpareCores(max(1, args.jobs))
    # The slots grade while another thread imports nbgrader and reads its database: seconds of one core
    # that would otherwise delay the first grade, or leave a core idle while the slots start. A third
    # gathers each notebook's evidence once its grade has ended, on the cores the grades leave free.
    with ThreadPoolExecutor(max_workers=2) as helpers:
        reading = helpers.submit(read_gradebook, db_url, course, assignment, args)
        gathering = helpers.submit(evidence_as_graded, reading, graded, course, store, args, rubric, reruns, cores)
        try:
            try:
                grade_all(autograded, course, store, args, rubric, ahead=ahead, graded=graded.put,
                          running=cores.grading)
                read = reading.result()
                on_disk = {student.name for student in autograded}
                # a notebook nbgrader's database says it autograded, where autograde's folder is gone
                left = [s for s in read[0] if not s.error and s.name not in on_disk] if read is not None else []
                if left:
                    cores.grading(max(1, args.jobs))  # its slots' cores, from the start: no rerun starts beside them
                    grade_all(left, course, store, args, rubric, graded=graded.put, running=cores.grading)
            finally:
                graded.put(None)  # first: the evidence's thread must see the end, whatever happens next
                cores.grading(0)  # every core is the evidence's now
            gathering.result()
        except BaseException:
            cores.stop()  # no rerun starts after an error or Ctrl-C
            raise
    if read is None:
        print(f"no assignment {assignment!r} in {course / 'gradebook.db'}: run nbgrader generate_assignment "
              "and autograde first")
        return EXIT_FAILED
    students, _, due = read
    if due:
        print(due, file=sys.stderr)
    own = {student.name: student for student in autograded}
    for student in students:
        if not student.error and student.name in own:  # nbgrader's reason for no grade comes first
            mine = own[student.name]
            student.results, student.error, student.notes, student.flags = mine.results, mine.error, mine.notes, mine.flags
    accepted = read_accepted(store)
    for student in students:
        student.accepted = student.notebook is not None and accepted.get(student.name) == checksum(student.notebook)
    if args.write:
        write(students, db_url, course, assignment, args.policy)
    for student in students:
        if student.results is not None:
            save_student_results(store / f"{student.name}.json", student, args.write)
    report = table(students)
    target = args.csv or store / "report.csv"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(csv_report(students))
    print(report)
    print(f"\nreport: {target}")
    flagged = [s.name for s in students if s.status in ("flagged", "held")]
    failed = [s.name for s in students if s.error]
    if flagged:
        print(f"flagged or held for review (read these notebooks; marked in nbgrader with --write; keep a "
              f"student's in-kernel grade with --accept STUDENT): {', '.join(flagged)}")
    if failed:
        print(f"no isolated grade (see the report): {', '.join(failed)}")
    return (EXIT_FLAGGED if flagged else 0) | (EXIT_FAILED if failed else 0)


def read_gradebook(db_url: str, course: Path, assignment: str, args):
    """nbgrader's side of the pass: (the students, each with the scores autograde gave in the kernel
    (read_in_kernel), the cells nbgrader recorded (released_cells), what to say of the due date), or
    None where the database has no such assignment."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(db_url) as gb:
        try:
            recorded = gb.find_assignment(assignment)
        except MissingEntry:
            return None
        known = sorted(s.student.id for s in recorded.submissions)
        submitted = sorted(p.parent.name for p in (course / "submitted").glob(f"*/{assignment}") if p.is_dir())
        students = [Student(name) for name in (args.student or sorted(set(known) | set(submitted)))]
        for student in students:
            read_in_kernel(gb, course, assignment, student)
        return students, released_cells(gb, course, assignment), deadline_ahead(recorded.duedate)


def autograded_notebooks(course: Path, assignment: str, args) -> dict:
    """Student -> the notebook submitted on disk, for each student (of --student) whose folder nbgrader's
    autograde made: the notebooks the pass grades, found before nbgrader's database is read (where
    read_in_kernel finds them)."""
    names = args.student or sorted(p.name for p in (course / "submitted").glob("*") if p.is_dir())
    found = {name: submitted_notebook(course, assignment, name) for name in names
             if (course / "autograded" / name / assignment).is_dir()}
    return {name: path for name, path in found.items() if path.is_file()}


def submitted_notebook(course: Path, assignment: str, student: str) -> Path:
    """Where nbgrader's collect puts a student's notebook of the assignment."""
    from autograder.intake import notebook

    return course / "submitted" / student / assignment / f"{notebook.ASSIGNMENT}.ipynb"


def deadline_ahead(duedate, now: datetime | None = None) -> str:
    """What to say when nbgrader's due date for the assignment (naive UTC, as nbgrader keeps it) is
    still ahead. The knowledge check is scored all the same, as nbgrader's own autograde scores it:
    nbgrader's feedback reaches students only when released, so the due date is the instructor's to
    keep there."""
    if duedate is None:
        return ""
    due = duedate if duedate.tzinfo else duedate.replace(tzinfo=timezone.utc)
    if (now or datetime.now(timezone.utc)) >= due:
        return ""
    return (f"nbgrader's due date for this assignment ({due:%Y-%m-%d %H:%M} UTC) is still ahead: the knowledge check is "
            "scored per question, as nbgrader scores it; release feedback (nbgrader generate_feedback) only after it")


def read_in_kernel(gb, course: Path, assignment: str, student: Student) -> None:
    from nbgrader.api import MissingEntry

    from autograder.intake import notebook
    from autograder.intake.notebook import part_of_cell

    path = submitted_notebook(course, assignment, student.name)
    folder = path.parent
    try:
        cells = gb.find_submission_notebook(notebook.ASSIGNMENT, assignment, student.name).grades
    except MissingEntry:
        student.error = f"not autograded: run `nbgrader autograde {assignment} --student {student.name}`"
        return
    student.in_kernel = kernel_scores(cells)
    student.kernel_cells = {c.name: (c.auto_score or 0.0, c.max_score or 0.0) for c in cells
                            if part_of_cell(c.name) is not None}
    if not path.is_file():
        found = sorted(p.name for p in folder.glob("*.ipynb")) if folder.is_dir() else []
        student.error = (f"no {path.name} in {folder.relative_to(course)}"
                         + (f" (found: {', '.join(found)}: rename it, then autograde this student again)" if found else ""))
        return
    student.notebook = path


def kernel_scores(cells) -> dict:
    """part -> the points nbgrader's autograde gave its test cells in the student's kernel."""
    from autograder.intake.notebook import part_of_cell

    scores = {}
    for cell in cells:
        part = part_of_cell(cell.name)
        if part is not None:
            scores[part] = scores.get(part, 0.0) + (cell.auto_score or 0.0)
    return scores


# ------------------------------------------------------------------------------------------------
# The isolated grades: grader slots, --jobs at once, cached per checksum
# ------------------------------------------------------------------------------------------------

def isolated_options(args, course: Path):
    """How the isolated pass grades: collected notebooks, so no one can resubmit against this
    feedback (knowledge scored per question), with the course kept from the worker."""
    from autograder.pipeline.grade_file import GradeOptions

    return GradeOptions(isolation=args.isolation, hide=(course,), after_due_date=True)


def cached_grade(store: Path, notebook: Path, options, rubric) -> Path:
    """Where the isolated grade of `notebook` is cached, keyed by what produced it
    (grade_file.graded_with): a change to any of it regrades."""
    from autograder.pipeline.grade_file import graded_with

    produced_by = json.dumps(graded_with(notebook, options, rubric), sort_keys=True).encode()
    return store / "cache" / f"{hashlib.sha256(produced_by).hexdigest()}.json"


def start_slots_ahead(course: Path, assignment: str, store: Path, args, rubric):
    """Grader slots started before nbgrader is imported, when an autograded notebook has no cached
    isolated grade; None for a pass from the cache."""
    from autograder.runners.slot import Slots

    options = isolated_options(args, course)
    notebooks = autograded_notebooks(course, assignment, args).values()
    if args.force or any(not cached_grade(store, p, options, rubric).is_file() for p in notebooks):
        return Slots(options, started=max(1, args.jobs))
    return None


def grade_all(students: list, course: Path, store: Path, args, rubric, command=None, ahead=None,
              graded=lambda student: None, running=lambda count: None) -> None:
    """Each student's isolated grade (student.results), from the cache or graded now; or why none
    (student.error). `command`: a stand-in for the grader slot, for tests; `ahead`: slots already
    started for this pass (start_slots_ahead); `graded(student)` is called as each student's grade is
    known (or why there is none), `running(count)` with the number of slots grading as it changes."""
    from autograder.intake import notebook
    from autograder.intake.submission import GradingError
    from autograder.isolation.host.levels import resolve
    from autograder.record import results
    from autograder.runners.slot import SLOT_COMMAND, Submission, grade_in_slots

    options = isolated_options(args, course)
    todo = {}
    for student in students:
        if student.error:
            continue
        try:
            student.notes = notebook.extract(student.notebook).notes
        except GradingError as err:
            student.error = str(err)
            graded(student)
            continue
        cached = cached_grade(store, student.notebook, options, rubric)
        student.results = None if args.force else results.load(cached, graded_only=True)
        if student.results is None:
            todo[student.name] = (student, cached)
        else:
            graded(student)
    if not todo:
        if ahead is not None:
            ahead.close()  # started for a notebook that turned out to have no grade to make
        return
    print(f"grading {len(todo)} notebook(s) in isolation, {args.jobs} at a time "
          f"({len(students) - len(todo)} cached or without a notebook)", file=sys.stderr)
    rubric = options.scored(rubric)
    scratch = Path(tempfile.mkdtemp(prefix="mhsa-gradebook-"))
    done = []

    def finished(sub, status: str) -> None:
        student, cached = todo[sub.name]
        written = scratch / f"{sub.name}.json"
        student.results = results.load(written, graded_only=True)
        if student.results is not None:
            results.write(cached, student.results)  # the cache holds complete grades only
            outcome = f"{student.results.score:g}"
        else:
            student.error = failure_reason(status, results.load(written))
            outcome = f"failed: {student.error}"
        done.append(student)
        print(f"[{len(done)}/{len(todo)}] {student.name}: {outcome}", file=sys.stderr)
        graded(student)

    try:
        grade_in_slots([Submission(name, student.notebook) for name, (student, _) in todo.items()], scratch, options,
                       rubric, resolve(options.isolation).level, partial(options.max_units, rubric), args.jobs,
                       finished, running, command=command or SLOT_COMMAND, ahead=ahead)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def failure_reason(status: str, found: results.Results | None) -> str:
    """Why an isolated grade has no score, from its results file: a failure's output is its score
    line, then the reason (for a crash, the grader's last output after it)."""
    reason = [line.strip() for line in (found.output if found else "").splitlines()[1:] if line.strip()]
    return f"the isolated grade ended with {status}: " + (" | ".join(reason[:3]) or "no results file")


# ------------------------------------------------------------------------------------------------
# Comparison and the write policy
# ------------------------------------------------------------------------------------------------

def released_cells(gb, course: Path, assignment: str):
    """What nbgrader recorded at generate_assignment for the assignment's notebook: every read-only
    code cell and test cell (kernel_evidence.Released), with the read-only cells the instructor's
    notebook (source/, else release/) tags lesson-only."""
    from autograder.intake import notebook
    from autograder.integrity import kernel_evidence

    recorded = gb.find_notebook(notebook.ASSIGNMENT, assignment)
    graded = {c.name for c in recorded.grade_cells if c.cell_type == "code"}
    sources = {c.name: c.source for c in recorded.source_cells
               if c.cell_type == "code" and (c.locked or c.name in graded)}
    instructors = [course / folder / assignment / f"{notebook.ASSIGNMENT}.ipynb" for folder in ("source", "release")]
    tagged = next(filter(None, map(notebook.lesson_only_cells, instructors)), frozenset())
    return kernel_evidence.Released({name: notebook.without_hidden_tests(text) for name, text in sources.items()},
                                    sources, frozenset(graded & set(sources)),
                                    frozenset(tagged & set(sources) - graded))


class RerunTemplate:
    """The workers the reruns of the evidence run in, each forked from one worker template (as a grader
    slot's workers are): a fork instead of a new Python importing torch, seconds a notebook. The
    template is started by the first rerun of the pass (`worker`), on a core the grades leave free: a
    pass whose reruns are cached starts none. Its own lines (ready, restarted) are not for the
    instructor's terminal: the report is what they read."""

    def __init__(self, args, rubric, course: Path):
        # what a rerun's worker must not read: the hidden tests, the reference and the course folder
        self._isolation, self._hidden = args.isolation, [*rubric.hidden, rubric.source, course]
        self._limits = rubric.limits
        self._template, self._started = None, False
        self._starting = threading.Lock()

    def worker(self, program: Path):
        """A backend running `program` in a worker with the grade's isolation and limits, forked from
        the template (started here, once) as soon as it has imported torch."""
        from autograder.isolation.host import worker_template
        from autograder.isolation.host.levels import resolve
        from autograder.testing.backends import WorkerBackend  # imports torch: only where a rerun runs

        with self._starting:
            if not self._started:
                self._started = True
                self._template = worker_template.start(self._isolation, self._hidden, log=worker_template.QUIET)
        return WorkerBackend(program, isolation=resolve(self._isolation), limits=self._limits, hidden=self._hidden)

    def stop(self) -> None:
        from autograder.isolation.host import worker_template

        with self._starting:
            if self._template is not None:
                self._template.stop()
                worker_template.install_template(None)
                self._template = None


class PassStopped(Exception):
    """The pass ended in an error or was interrupted: no rerun starts any more."""


class SpareCores:
    """The cores of --jobs that the isolated grades leave free, for the reruns of the evidence. A rerun
    waits for one: the reruns fill the cores that stand idle while the last grades finish, and never
    run beside a grade (on two cores the grades then ran as much slower as the reruns took)."""

    def __init__(self, jobs: int):
        self.jobs = jobs
        self._grading = jobs  # slots grading: every core until grade_in_slots says otherwise
        self._rerunning = 0
        self._stopped = False
        self._changed = threading.Condition()

    def grading(self, count: int) -> None:
        """`count` slots grade now (grade_in_slots' `running`); 0 when the grades are done."""
        with self._changed:
            self._grading = count
            self._changed.notify_all()

    def stop(self) -> None:
        with self._changed:
            self._stopped = True
            self._changed.notify_all()

    @contextmanager
    def core(self):
        """Held for one rerun; waits until a core is free. Raises PassStopped once stop() was called."""
        with self._changed:
            self._changed.wait_for(lambda: self._stopped or self._grading + self._rerunning < self.jobs)
            if self._stopped:
                raise PassStopped
            self._rerunning += 1
        try:
            yield
        finally:
            with self._changed:
                self._rerunning -= 1
                self._changed.notify_all()


def evidence_as_graded(reading, graded: queue.Queue, course: Path, store: Path, args, rubric,
                       template: RerunTemplate, cores: SpareCores) -> None:
    """The evidence of each notebook whose isolated grade ends with a score (`graded`: the Students as
    their grades end, then None), gathered once nbgrader's database is read (`reading`: the future of
    read_gradebook), --jobs notebooks at a time, each rerun on a spare core. A student the database
    says nbgrader did not grade gets none."""
    read = reading.result()
    in_kernel = {student.name: student for student in read[0] if not student.error} if read else {}
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        gathered = []
        while (student := graded.get()) is not None:
            if student.error or student.name not in in_kernel:
                continue
            student.kernel_cells = in_kernel[student.name].kernel_cells
            gathered.append(pool.submit(gather_evidence, student, read[1], course, store, args, rubric, template,
                                        cores))
        for future in gathered:
            future.result()


def gather_evidence(student: Student, released, course: Path, store: Path, args, rubric, template: RerunTemplate,
                    cores: SpareCores) -> None:
    """A notebook's evidence of tampering (student.flags): its read-only and test cells against the
    released ones, and its test cells run again in the grader's worker, twice where the first rerun
    finds a cell that passed in the kernel and fails there (kernel_evidence). The reruns are cached
    per notebook, released cells and grader files, as the isolated grades are; each holds a core of
    `cores` and forks its worker from `template`."""
    from autograder.integrity import kernel_evidence

    student.flags = kernel_evidence.changed_cells(student.notebook, released)
    fingerprint = (grader_checksum() + repr(sorted(released.recorded.items()))
                   + repr(sorted(released.lesson_only))).encode()
    cache_name = f"{hashlib.sha256(fingerprint + student.notebook.read_bytes()).hexdigest()}.rerun.json"
    done = [] if args.force else list(results.read_record(store / "cache", cache_name).get("reruns", []))
    ran = len(done)

    def wanted() -> bool:
        return len(done) < kernel_evidence.RERUNS and (
            not done or bool(kernel_evidence.rerun_evidence(student.kernel_cells, done)))

    with tempfile.TemporaryDirectory(prefix="mhsa-rerun-") as folder:
        copy = Path(folder) / "mhsa.ipynb"
        shutil.copyfile(student.notebook, copy)
        while wanted():
            with cores.core():
                try:
                    done.append(kernel_evidence.rerun(copy, released, template.worker, seed=len(done)))
                except Exception as err:  # noqa: BLE001 - no rerun is no evidence: the grade stands
                    student.notes.append(f"the notebook's test cells could not run again in the grader's worker "
                                         f"({type(err).__name__}: {str(err)[:200]}): no rerun evidence")
                    break
    if len(done) > ran:
        results.write_record(store / "cache", cache_name, {"reruns": done})
    student.flags += kernel_evidence.rerun_evidence(student.kernel_cells, done)


def parts_to_write(policy: str, student: Student) -> set:
    """The parts whose isolated scores --write stores, by `policy` (POLICIES); none for a notebook a
    person accepted, every one for a held notebook (its held parts then withheld: cell_scores)."""
    isolated = student.isolated
    if student.accepted:
        return set()
    if policy == "isolated" or policy == "flagged" and (student.flags or student.held):
        return set(isolated)
    if policy == "minimum":
        return {p for p in isolated if isolated[p] < student.in_kernel[p] - TOLERANCE}
    return set()


def write(students: list, db_url: str, course: Path, assignment: str, policy: str) -> None:
    """Store isolated scores as manual scores by `policy`, never over a manual score that this
    command did not write (a TA's override); then nbgrader's own late-penalty policy."""
    from nbgrader.api import Gradebook

    from autograder.intake import notebook

    ledgers = {s.name: previous_ledger(course / STORE / assignment / f"{s.name}.json") for s in students}
    with Gradebook(db_url) as gb:
        for student in students:
            if student.error:
                continue
            submission = gb.find_submission_notebook(notebook.ASSIGNMENT, assignment, student.name)
            wanted = cell_scores(submission.grades, student, parts_to_write(policy, student))
            student.ledger = apply(submission.grades, wanted, ledgers[student.name], student)
            if (student.flags or student.held) and not student.accepted and not submission.flagged:
                submission.flagged = True
                student.changes.append("flagged in nbgrader")
        gb.db.commit()
    config = course_config(course)
    for student in students:
        if not student.error:
            recompute_late_penalty(config, db_url, assignment, student.name)


def cell_scores(cells, student: Student, parts: set) -> dict:
    """grade id -> (isolated score, reason) for the test cells of `parts`: a knowledge question's
    cell gets that question's score, other cells their share of their part's isolated score."""
    from autograder.intake.knowledge import question_of_row
    from autograder.intake.notebook import knowledge_cell, part_of_cell

    found = student.results
    details = found.parts
    hold = student.held
    withheld = set(hold.parts) if hold is not None and hold.withheld else set()
    questions = {knowledge_cell(question): row for row in found.tests
                 if (question := question_of_row(row.name)) is not None}
    wanted = {}
    for cell in cells:
        part = part_of_cell(cell.name)
        if part not in parts:
            continue
        detail = details[part]
        if part in withheld:
            wanted[cell.name] = (0.0, "Held for review: the grader could not decide part of your notebook on its own, "
                                      "so a person looks at it before this part counts. Why: "
                                      + "; ".join(hold.reasons))
            continue
        if cell.name in questions:
            row = questions[cell.name]
            score = row.score or 0.0
            why = f"your answer scored {score:.2f} / {row.max_score or 0.0:.2f}: {row.output or 'right'}"
        else:
            score = round(detail.score * cell.max_score / detail.max_score, 6) if detail.max_score else 0.0
            why = failed_tests(found, part)
        wanted[cell.name] = (score, (f"Score from the isolated regrade: your notebook's code, run outside its "
                                     f"kernel against the course's tests, scored {detail.score:.2f} / "
                                     f"{detail.max_score:.2f} in part {part} (the tests in your notebook gave "
                                     f"{student.in_kernel[part]:.2f}); this cell is worth its share. {why}").strip())
    return wanted


def failed_tests(found: results.Results, part: str, shown: int = 3) -> str:
    failed = [row for row in found.tests if part in row.tags and row.status == "failed"]
    if not failed:
        return "Every test of this part passed in isolation."
    lines = [f"- {row.name}: {row.output.splitlines()[0] if row.output else 'failed'}" for row in failed[:shown]]
    more = f"\n... and {len(failed) - shown} more" if len(failed) > shown else ""
    return f"{len(failed)} test(s) failed in isolation:\n" + "\n".join(lines) + more


def apply(cells, wanted: dict, ledger: dict, student: Student) -> dict:
    """Set or clear this command's manual scores; returns the new ledger (grade id -> what this
    command wrote). A manual score that the ledger does not account for is a grader's: kept."""
    new = {}
    for cell in cells:
        mine = ledger.get(cell.name)
        ours = cell.manual_score is None or (mine is not None and abs(cell.manual_score - mine["score"]) <= TOLERANCE)
        score, reason = wanted.get(cell.name, (None, ""))
        if score is not None and cell.auto_score is not None and abs(score - cell.auto_score) <= TOLERANCE:
            score = None  # the kernel's score stands: no manual score needed
        if not ours:
            if score is not None:
                student.changes.append(f"{cell.name}: kept the manual grade {cell.manual_score:g} (isolated: {score:g})")
            continue
        if score is None:
            if mine is not None:
                cell.manual_score, cell.needs_manual_grade = None, False
                student.changes.append(f"{cell.name}: isolated score removed, back to {cell.auto_score or 0:g}")
            continue
        if cell.manual_score is None or abs(cell.manual_score - score) > TOLERANCE:
            student.changes.append(f"{cell.name}: {cell.auto_score or 0:g} -> {score:g}")
        cell.manual_score, cell.needs_manual_grade = score, False  # a regrade marks it again: cleared here
        new[cell.name] = {"score": score, "reason": reason}
    return new


def previous_ledger(path: Path) -> dict:
    saved = results.load(path)
    return saved.extra("written_to_gradebook", {}) if saved else {}


def course_config(course: Path):
    from traitlets.config.loader import PyFileConfigLoader

    return PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()


def recompute_late_penalty(config, db_url: str, assignment: str, student: str) -> None:
    """nbgrader's own AssignLatePenalties on the stored scores (it reads the notebook's score from
    the gradebook, manual scores included); the notebook it is given is not used."""
    from nbformat.v4 import new_notebook
    from nbgrader.preprocessors import AssignLatePenalties

    from autograder.intake.notebook import ASSIGNMENT

    resources = {"nbgrader": {"notebook": ASSIGNMENT, "assignment": assignment, "student": student, "db_url": db_url}}
    AssignLatePenalties(config=config).preprocess(new_notebook(), resources)


# ------------------------------------------------------------------------------------------------
# What it leaves: per-student results files, the table, the CSV
# ------------------------------------------------------------------------------------------------

def results_path(course: Path, assignment: str, student: str) -> Path:
    """The isolated grade of one student as Gradescope results.json, with extra_data["flags"]
    (a list of strings) and extra_data["written_to_gradebook"] (grade id -> score and reason)."""
    return Path(course) / STORE / assignment / f"{student}.json"


def save_student_results(path: Path, student: Student, wrote: bool) -> None:
    results.write(path, results.with_extra(student.results, {
        "student": student.name, "flags": student.flags, "extraction_notes": student.notes,
        "in_kernel": student.in_kernel, "written_to_gradebook": student.ledger if wrote else previous_ledger(path)}))


def table(students: list) -> str:
    width = max([len("student"), *(len(s.name) for s in students)])
    cells = [("student", "in kernel", "isolated", "flags")]
    for s in students:
        kernel = f"{sum(s.in_kernel.values()):g}" if s.in_kernel else "-"
        isolated = f"{sum(s.isolated.values()):g}" if s.results else "-"
        state = (f"FAILED: {s.error}" if s.error else
                 "accepted after review: the in-kernel grade stands" if s.accepted else
                 "HELD FOR REVIEW: " + "; ".join([*s.held.reasons, *s.flags]) + " - read this notebook" if s.held else
                 "; ".join(s.flags) + " - read this notebook" if s.flags else "-")
        cells.append((s.name, kernel, isolated, state))
    header, *rows = results.text_table(cells, "<>><", (width, 9, 9))
    lines = [header]
    for s, row in zip(students, rows):
        lines.append(row)
        lines += [f"{'':<{width}}   note: {note}" for note in s.notes]
        scores = [c for c in s.changes if "->" in c or "removed" in c]  # every one is in the CSV
        if scores:
            lines.append(f"{'':<{width}}   wrote: {len(scores)} cell score(s)")
        lines += [f"{'':<{width}}   wrote: {change}" for change in s.changes if change not in scores]
    return "\n".join(lines)


def csv_report(students: list) -> str:
    parts = sorted({p for s in students for p in s.in_kernel})
    buffer = io.StringIO()
    writer = results.SpreadsheetWriter(buffer)
    writer.writerow(["student", "status", "in_kernel", "isolated",
                     *(f"{p}_{side}" for p in parts for side in ("in_kernel", "isolated")),
                     "flags", "notes", "written", "error", "review"])
    for s in students:
        isolated = s.isolated
        writer.writerow([s.name, s.status, round(sum(s.in_kernel.values()), 4) if s.in_kernel else "",
                         round(sum(isolated.values()), 4) if s.results else "",
                         *(value for p in parts for value in (s.in_kernel.get(p, ""), isolated.get(p, ""))),
                         "; ".join(s.flags), "; ".join(s.notes), "; ".join(s.changes), s.error,
                         "accepted" if s.accepted else "held: " + "; ".join(s.held.reasons) if s.held else ""])
    return buffer.getvalue()


# ------------------------------------------------------------------------------------------------
# Accepting a notebook's in-kernel grade after review
# ------------------------------------------------------------------------------------------------

def accept(names: list, db_url: str, course: Path, assignment: str) -> int:
    """Keep each named student's in-kernel grade: every manual score this command wrote comes out (a
    TA's own override stays), the nbgrader flag is cleared, the late penalty recomputed, and the
    notebook's checksum recorded, so later runs write nothing for it until the notebook changes."""
    from nbgrader.api import Gradebook, MissingEntry

    from autograder.intake import notebook

    store = course / STORE / assignment
    accepted = read_accepted(store)
    done = []
    with Gradebook(db_url) as gb:
        for name in names:
            path = course / "submitted" / name / assignment / f"{notebook.ASSIGNMENT}.ipynb"
            try:
                submission = gb.find_submission_notebook(notebook.ASSIGNMENT, assignment, name)
            except MissingEntry:
                print(f"{name}: no autograded submission of {assignment} in the gradebook; nothing accepted")
                continue
            if not path.is_file():
                print(f"{name}: no {path.name} in {path.parent}; nothing accepted")
                continue
            student = Student(name, path)
            ledger = previous_ledger(results_path(course, assignment, name))
            student.ledger = apply(submission.grades, {}, ledger, student)
            submission.flagged = False
            accepted[name] = checksum(path)
            done.append(student)
        gb.db.commit()
    results.write_record(store, ACCEPTED, accepted)
    config = course_config(course)
    for student in done:
        recompute_late_penalty(config, db_url, assignment, student.name)
        saved = results_path(course, assignment, student.name)
        found = results.load(saved)
        if found is not None:
            results.write(saved, results.with_extra(found, {"written_to_gradebook": {}, "accepted": True}))
        print(f"{student.name}: in-kernel grade accepted; flag cleared"
              + (f"; {len(student.changes)} cell score(s) taken out" if student.changes else ""))
    return 0 if len(done) == len(names) else EXIT_FAILED


def read_accepted(store: Path) -> dict:
    return results.read_record(store, ACCEPTED)


def checksum(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
