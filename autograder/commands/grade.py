"""`grade PATH`: grade one submission (or, with --batch, a folder of them)."""
from pathlib import Path

from autograder.context import SUITE_CHOICES, TIMING_DEVICES
from autograder.isolation import LEVELS
from autograder.submission import GradingError


def add_parser(subparsers):
    p = subparsers.add_parser("grade", help="grade a submission (.py, folder or .ipynb) with the test suites")
    p.add_argument("path", type=Path, help="mhsa.py, a folder holding it, a notebook; with --batch a folder of those")
    p.add_argument("--suite", choices=sorted(SUITE_CHOICES), default="all", help="test suites to run (default: all)")
    p.add_argument("--results", type=Path, help="write a Gradescope results.json here")
    p.add_argument("--timeout", type=float, help="seconds one call into student code may take")
    p.add_argument("--isolation", choices=("auto", *LEVELS), default="auto",
                   help="auto (default): the strongest level this machine supports")
    p.add_argument("--timing-device", choices=TIMING_DEVICES, default=None,
                   help="where the timing part runs: auto (CUDA when present, else not graded), cuda, or cpu "
                        "(CPU-sized configs; proves the harness, or grades speed on a course without GPUs). "
                        "Default: the rubric's [parts.timing] device, else auto")
    p.add_argument("--batch", action="store_true", help="PATH is a folder of submissions")
    p.add_argument("--out", type=Path, help="with --batch: folder for results files and grades.csv")
    p.add_argument("--jobs", type=int, default=2, help="with --batch: submissions graded at once")
    p.add_argument("--force", action="store_true", help="with --batch: regrade finished submissions")
    p.add_argument("--hide", type=Path, action="append", default=[], help="another path the submission must not read (repeatable)")


def run(args) -> int:
    """Exit status 0: graded; 2: grading was impossible (the results file, if asked for, says why)."""
    if args.batch:
        from autograder import batch

        return batch.run(args)
    from autograder import grading, results
    from autograder.context import GradingContext
    from autograder.rubric import load

    rubric = load()
    suites = SUITE_CHOICES[args.suite]
    hide = [*args.hide, *([args.results.resolve().parent] if args.results else [])]
    ctx = GradingContext.create(args.path, rubric=rubric, suites=suites, isolation=args.isolation, hide=hide,
                                extras=args.suite == "all", timing_device=args.timing_device,
                                call_timeout=args.timeout)
    try:
        grade, code = grading.run(ctx), 0
    except GradingError as err:
        grade = grading.failure(args.path.name.removesuffix(".py"), "error",
                                f"This submission could not be graded: {err}",
                                grading.planned_max_units(rubric, suites, ctx.extras, ctx.timing_device),
                                ctx.isolation_level, suites)
        code = 2
    print(results.table(grade, rubric))
    if args.results:
        results.write_json_atomic(args.results, results.to_gradescope(grade, rubric))
        print(f"\nresults written to {args.results}")
    return code
