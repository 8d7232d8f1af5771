"""One submission graded in this process: the grade options, the whole-submission time limit, the failure results.

`grade PATH` (autograder/cli/grade.py) and every grader slot (autograder/runners/slot.py, which batches,
clusters, Gradescope and the gradebook reach) grade a file through `grade_one`, so each route keeps the
same limits and writes the same results. A runner hands a slot its options as `GradeOptions.to_argv()`;
the slot reads them back with the same parser (`GradeOptions.add_arguments`, `from_args`).
"""
import argparse
import os
import threading
from dataclasses import dataclass, fields, replace
from pathlib import Path

from autograder.core.paths import RUBRIC_FILE
from autograder.intake.submission import GradingError
from autograder.isolation.host.levels import LEVELS
from autograder.pipeline.context import SUITE_CHOICES, TIMING_DEVICES
from autograder.record.grade import failure

# A grade that reaches the whole-submission limit stops calling the submission and scores what
# finished (grade_one); this is how long it has to do so before it is killed.
WRAP_UP_S = 10.0


@dataclass(frozen=True)
class GradeOptions:
    """The options of one grade: the same for `grade`, a batch's grader slots, a cluster's workers,
    Gradescope's runner and the gradebook's isolated pass. Hidden paths are kept absolute."""
    suite: str = "all"
    timeout: float | None = None          # seconds one call into student code may take
    isolation: str = "auto"
    timing_device: str | None = None      # None: the rubric's [parts.timing] device
    days_late: float = 0.0
    hide: tuple[Path, ...] = ()
    after_due_date: bool = False
    due: str | None = None                # the platform's deadline (ISO 8601), replacing the rubric's `due`
    due_from: str = ""                    # ... whose it is, in words ("Gradescope's late due date")
    rubric: Path = RUBRIC_FILE            # the rubric file every grade of a run loads (slot.main, `grade`)

    def __post_init__(self):
        object.__setattr__(self, "hide", tuple(Path(p).resolve() for p in self.hide))
        object.__setattr__(self, "rubric", Path(self.rubric).resolve())

    @staticmethod
    def add_arguments(p) -> None:
        """These options on an argparse parser (`grade`, `python -m autograder.runners.slot`)."""
        p.add_argument("--suite", choices=sorted(SUITE_CHOICES), default="all", help="test suites to run (default: all)")
        p.add_argument("--timeout", type=float, help="seconds one call into student code may take")
        p.add_argument("--isolation", choices=("auto", *LEVELS), default="auto",
                       help="auto (default): the strongest level this machine supports")
        p.add_argument("--timing-device", choices=TIMING_DEVICES, default=None,
                       help="where the timing part runs: auto (CUDA when present, else not graded), cuda, or cpu "
                            "(CPU-sized configs; proves the harness, or grades speed on a course without GPUs). "
                            "Default: the rubric's [parts.timing] device, else auto")
        p.add_argument("--days-late", type=float, default=0.0,
                       help="days after the due date, for the rubric's late policy ([results] late_penalty_per_day)")
        p.add_argument("--hide", type=Path, action="append", default=[],
                       help="another path the submission must not read (repeatable)")
        p.add_argument("--rubric", type=Path, default=RUBRIC_FILE,
                       help="grade with this rubric instead of the course's rubric.toml (`python -m autograder rubric "
                            "--describe` lists its keys)")
        p.add_argument("--after-due-date", action="store_true",
                       help="the work was collected after the due date (no one can resubmit against this run's "
                            "feedback): the knowledge check is scored per question whatever rubric.toml's "
                            "[parts.knowledge] due says")
        p.add_argument("--due", type=due_argument,
                       help="the deadline (ISO 8601 date or date-time: the last moment a submission is accepted), "
                            "in place of rubric.toml's [parts.knowledge] due: the knowledge check is scored from it")
        p.add_argument("--due-from", default="", help=argparse.SUPPRESS)  # whose deadline --due is, for the feedback

    @classmethod
    def from_args(cls, args) -> "GradeOptions":
        """The options of a parsed command line (any namespace holding every field)."""
        return cls(**{f.name: getattr(args, f.name) for f in fields(cls)})

    def to_argv(self) -> list[str]:
        """These options as a command line that add_arguments parses back to them; defaults left out.
        Every field's flag is its name: --timing-device for timing_device."""
        argv = []
        for f in fields(self):
            value, flag = getattr(self, f.name), "--" + f.name.replace("_", "-")
            if value == f.default:
                continue
            if isinstance(value, bool):
                argv.append(flag)
            elif isinstance(value, tuple):
                argv += [a for item in value for a in (flag, str(item))]
            else:
                argv += [flag, repr(value) if isinstance(value, float) else str(value)]
        return argv

    def hiding(self, *paths) -> "GradeOptions":
        """These options with more paths hidden from the submission (a batch's input and output folders)."""
        return replace(self, hide=(*self.hide, *paths))

    def scored(self, rubric):
        """The rubric these options grade with: the knowledge check scored or withheld, decided once for
        this grade's deadline (knowledge.with_deadline)."""
        from autograder.intake import knowledge

        due = knowledge.parse_moment(self.due) if self.due else None
        return knowledge.with_deadline(rubric, due, self.due_from or "grade --due", collected=self.after_due_date)

    def for_collected_work(self, rubric) -> "GradeOptions":
        """These options for a run over collected work (a batch): where neither --due nor the rubric
        gives a deadline, no one resubmits against this run's feedback, so it is graded as after it."""
        from autograder.intake import knowledge

        knowledge_part = rubric.parts.get("knowledge")
        if self.due or knowledge_part is None or knowledge.deadline(knowledge_part.settings) is not None:
            return self
        return replace(self, after_due_date=True)

    def max_units(self, rubric) -> int:
        """The maximum a grade with these options states, before it has run (a failure states it too)."""
        from autograder.pipeline import grading

        return grading.planned_max_units(rubric, SUITE_CHOICES[self.suite], self.suite == "all", self.timing_device)


# What a kept grade was produced by, for the words of a rerun that regrades it (graded_with's fields).
PRODUCERS = {"grader": "the grader changed (its code, tests, reference or rubric.toml)",
             "rubric": "the rubric graded with changed (its points, limits, or the knowledge check's deadline)",
             "options": "the grade options changed", "submission": "the submission changed"}


def graded_with(path: Path, options: GradeOptions, rubric) -> dict:
    """What a grade of `path` with `options` and `rubric` (as loaded, or as options.scored made it:
    scoring twice changes nothing) depends on, as one digest per PRODUCERS field; results files carry
    it (extra_data.graded_with). A kept grade whose record differs is stale: a rerun regrades it
    (batch.run, the gradebook's cache). Where the files sit is left out (hidden paths, the rubric's
    path), so that a folder moved or a cluster's worker agrees."""
    from autograder.core import paths

    settings = replace(options, hide=(), rubric=RUBRIC_FILE).to_argv()
    checkout = paths.REPO
    hidden = tuple(p.relative_to(checkout) if p.is_relative_to(checkout) else p for p in rubric.hidden)
    where_free = replace(options.scored(rubric), source=None, hidden=hidden)
    return {"grader": paths.grader_checksum(), "rubric": _digest(repr(where_free)),
            "options": _digest("\0".join(settings)), "submission": submission_digest(path)}


def stale_because(kept: dict, now: dict) -> list:
    """Why a grade recorded as produced by `kept` is stale against `now` (graded_with), in PRODUCERS' words."""
    return [why for field, why in PRODUCERS.items() if kept.get(field) != now[field]]


def submission_digest(path: Path) -> str:
    """The bytes of a submission: its file, or every file of its folder with its place in it (links
    are never followed, as a grade never follows one), as a whole sha256 (hex): a review decision is
    bound to it (record/reviews.py), so a shortened one would let two files made to collide share one."""
    import hashlib

    path = Path(path)
    digest = hashlib.sha256()
    if path.is_file():
        files = [path]
    else:
        files = sorted(Path(top) / name for top, _, names in os.walk(path) for name in names)
    for file in files:
        if file.is_symlink() or not file.is_file():
            continue
        digest.update(file.relative_to(path).as_posix().encode() + b"\0" if file != path else b"")
        with file.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def _digest(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()[:16]


def due_argument(text: str) -> str:
    """--due's value, checked here so that a wrong date stops the command line, not a grade."""
    from autograder.intake import knowledge

    try:
        knowledge.parse_moment(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 date or date-time: {text!r} (e.g. 2026-12-10 or "
                                         "2026-12-10T23:59:00-08:00)") from None
    return text


def kill_after(rubric) -> float:
    """Seconds after which a grader that has not answered is killed and its submission gets a `timeout`
    result: the whole-submission limit, at which the grade itself stops and keeps what finished, plus
    the time to do so. Every route keeps it: `grade`'s own backstop, and a slot's runner (slot.Slot.check)."""
    return rubric.submission_timeout + WRAP_UP_S


def timeout_message(time_limit: float) -> str:
    """Why a grade that did not end by kill_after has no score."""
    return (f"Grading was stopped after {time_limit + WRAP_UP_S:g} s: it did not end {WRAP_UP_S:g} s after reaching "
            f"{time_limit:g} s, the time limit for a whole submission. Score 0 until an instructor looks at it.")


def write_failure(target: Path | None, name: str, status: str, message: str, rubric, max_units: int,
                  isolation: str, suites=(), elapsed: float = 0.0, produced_by: dict | None = None):
    """The one writer of a result without a grade (timeout, crashed, error): score 0 of `max_units`, and
    `message` to say why, written atomically at `target` (when given), with what produced it
    (graded_with) where known. Returns the Grade."""
    from autograder.record import results

    grade = replace(failure(name, status, message, max_units, isolation, suites, elapsed=elapsed),
                    produced_by=produced_by or {})
    if target is not None:
        results.write(target, results.of_grade(grade, rubric))
    return grade


def grade_one(path: Path, results_file: Path | None, options: GradeOptions, rubric, show=False, time_limit=None,
              backstop=False) -> int:
    """Grade `path` with `options`; 0 graded, 2 grading impossible. The results file (if
    asked for) is written atomically, once the grade is complete; `show` prints the score table.
    `time_limit`: seconds for the whole grade. When they are up, the call in flight is stopped, every
    later call into the submission fails at once, and the grade ends as usual: the tests that finished
    keep their results, the others fail with the reason (grading.run_suites). `backstop`: should the
    grade still not have ended WRAP_UP_S later (this process itself stuck), write a `timeout`
    results file and end the process; a batch's slot has no backstop of its own: its runner kills it
    at kill_after, and writes that result (slot.settle)."""
    from autograder.pipeline import grading
    from autograder.pipeline.context import GradingContext
    from autograder.record import results

    produced_by = graded_with(path, options, rubric)
    rubric = options.scored(rubric)
    suites = SUITE_CHOICES[options.suite]
    hide = [*options.hide, *([results_file.resolve().parent] if results_file else [])]
    ctx = GradingContext.create(path, rubric=rubric, suites=suites, isolation=options.isolation, hide=hide,
                                extras=options.suite == "all", timing_device=options.timing_device,
                                call_timeout=options.timeout, days_late=options.days_late)

    def max_units() -> int:  # a failure's maximum; asked only on failure (it may import torch for CUDA)
        return grading.planned_max_units(rubric, suites, ctx.extras, ctx.timing_device)

    # Whoever takes this first writes the result: the watchdog's timeout, or the grade that finished in
    # time. Without it a grade could finish after the watchdog fired, its worker killed by the
    # watchdog, and report that kill as the student's crash.
    finishing = threading.Lock()

    def time_is_up():
        ctx.stop_early(f"grading reached {time_limit:g} s, the time limit for a whole submission, before this "
                       "finished: some of your code is very slow, or hangs where the per-call limit could not stop it")

    def out_of_time():
        finishing.acquire()
        try:  # whatever fails here, the process ends: the grade must not hang on a lock this thread holds
            grade = write_failure(results_file, path.name.removesuffix(".py"), "timeout", timeout_message(time_limit),
                                  rubric, max_units(), ctx.isolation_level, suites, produced_by=produced_by)
            print(results.table(grade, rubric), flush=True)
            ctx.close()  # the worker too (were this to fail, its reaper sees the lifeline close at exit)
        finally:
            os._exit(2)

    watchdogs = [threading.Timer(time_limit, time_is_up)] if time_limit else []
    if time_limit and backstop:
        watchdogs.append(threading.Timer(time_limit + WRAP_UP_S, out_of_time))
    for watchdog in watchdogs:
        watchdog.daemon = True
        watchdog.start()
    try:
        grade, code = grading.run(ctx), 0
    except GradingError as err:
        grade = failure(path.name.removesuffix(".py"), "error",
                                f"This submission could not be graded: {err}", max_units(), ctx.isolation_level, suites)
        code = 2
    finally:
        for watchdog in watchdogs:
            watchdog.cancel()
    finishing.acquire()  # held by a watchdog that fired: it writes the timeout and ends the process
    grade = replace(grade, produced_by=produced_by)
    if results_file:  # before anything is printed: whatever becomes of the output, the results are there
        results.write(results_file, results.of_grade(grade, rubric))
    if show:
        print(results.table(grade, rubric))
        if results_file:
            print(f"\nresults written to {results_file}")
    return code
