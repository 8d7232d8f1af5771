"""One submission graded in this process: the grade options, the whole-submission watchdog, the results file.

`grade PATH` (autograder/commands/grade.py) and every grader slot (autograder/slot.py, which batches,
clusters, Gradescope and the gradebook reach) grade a file through `grade_one`, so each route keeps the
same limits and writes the same results.
"""
import os
import threading
from pathlib import Path

from autograder.context import SUITE_CHOICES, TIMING_DEVICES
from autograder.isolation import LEVELS
from autograder.paths import RUBRIC_FILE
from autograder.submission import GradingError

# A grade that reaches the whole-submission limit stops calling the submission and scores what
# finished (grade_one); this is how long it has to do so before it is killed.
WRAP_UP_S = 10.0


def add_grade_options(p) -> None:
    """The options of one grade: the same for `grade`, a batch's grader slots and a cluster's workers."""
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
    p.add_argument("--rubric", type=Path, default=RUBRIC_FILE,
                   help="grade with this rubric instead of the course's rubric.toml (`python -m autograder rubric "
                        "--describe` lists its keys)")
    p.add_argument("--hide", type=Path, action="append", default=[], help="another path the submission must not read (repeatable)")
    p.add_argument("--after-due-date", action="store_true",
                   help="the work was collected after the due date (no one can resubmit against this run's feedback): "
                        "the knowledge check is scored per question whatever rubric.toml's [parts.knowledge] due says")


def grade_one(path: Path, results_file: Path | None, args, rubric, show=False, time_limit=None,
              backstop=False) -> int:
    """Grade `path` with `args`' grade options; 0 graded, 2 grading impossible. The results file (if
    asked for) is written atomically, once the grade is complete; `show` prints the score table.
    `time_limit`: seconds for the whole grade. When they are up, the call in flight is stopped, every
    later call into the submission fails at once, and the grade ends as usual: the tests that finished
    keep their results, the others fail with the reason (grading.run_suites). `backstop`: should the
    grade still not have ended WRAP_UP_S later (this process itself stuck), write a `timeout`
    results file and end the process; a batch's slot has no backstop of its own: the batch kills it
    at slot.kill_after, and writes that result."""
    from autograder import grading, knowledge, results
    from autograder.context import GradingContext

    if getattr(args, "after_due_date", False):
        rubric = knowledge.scored_after_due(rubric)
    suites = SUITE_CHOICES[args.suite]
    hide = [*args.hide, *([results_file.resolve().parent] if results_file else [])]
    ctx = GradingContext.create(path, rubric=rubric, suites=suites, isolation=args.isolation, hide=hide,
                                extras=args.suite == "all", timing_device=args.timing_device,
                                call_timeout=args.timeout, days_late=getattr(args, "days_late", 0.0))

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
            grade = grading.failure(path.name.removesuffix(".py"), "timeout",
                                    f"Grading was stopped after {time_limit + WRAP_UP_S:g} s: it did not end "
                                    f"{WRAP_UP_S:g} s after reaching {time_limit:g} s, the time limit for a whole "
                                    "submission. Score 0 until an instructor looks at it.", max_units(),
                                    ctx.isolation_level, suites)
            if results_file:
                results.write_json_atomic(results_file, results.to_gradescope(grade, rubric))
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
        grade = grading.failure(path.name.removesuffix(".py"), "error",
                                f"This submission could not be graded: {err}", max_units(), ctx.isolation_level, suites)
        code = 2
    finally:
        for watchdog in watchdogs:
            watchdog.cancel()
    finishing.acquire()  # held by a watchdog that fired: it writes the timeout and ends the process
    if show:
        print(results.table(grade, rubric))
    if results_file:
        results.write_json_atomic(results_file, results.to_gradescope(grade, rubric))
        if show:
            print(f"\nresults written to {results_file}")
    return code
