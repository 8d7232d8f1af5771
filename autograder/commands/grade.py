"""`grade PATH`: grade one submission (or, with --batch, a folder of them)."""
from pathlib import Path

from autograder import rubric as rubric_file
from autograder.isolation import LEVELS
from autograder.submission import GradingError

SUITES = {"public": ("public",), "hidden": ("hidden",), "all": ("public", "hidden")}


def add_parser(subparsers):
    p = subparsers.add_parser("grade", help="grade a submission (.py, folder or .ipynb) with the test suites")
    p.add_argument("path", type=Path, help="mhsa.py, a folder holding it, a notebook; with --batch a folder of those")
    p.add_argument("--suite", choices=sorted(SUITES), default="all", help="test suites to run (default: all)")
    p.add_argument("--results", type=Path, help="write a Gradescope results.json here")
    p.add_argument("--timeout", type=float, help="seconds one call into student code may take")
    p.add_argument("--isolation", choices=("auto", *LEVELS), default="auto",
                   help="auto (default): the strongest level this machine supports")
    p.add_argument("--batch", action="store_true", help="PATH is a folder of submissions")
    p.add_argument("--out", type=Path, help="with --batch: folder for results files and grades.csv")
    p.add_argument("--jobs", type=int, default=2, help="with --batch: submissions graded at once")
    p.add_argument("--force", action="store_true", help="with --batch: regrade finished submissions")
    p.add_argument("--hide", type=Path, action="append", default=[], help="another path the submission must not read (repeatable)")


def run(args) -> int:
    if args.batch:
        from autograder import batch

        return batch.run(args)
    from autograder import grading, results

    rubric = rubric_file.load()
    if args.timeout:
        rubric = with_timeout(rubric, args.timeout)
    hide = [p.resolve() for p in args.hide] + ([args.results.resolve().parent] if args.results else [])
    try:
        grade = grading.grade(args.path, suites=SUITES[args.suite], isolation=args.isolation,
                              hide=hide, rubric=rubric, extras=args.suite == "all")
    except GradingError as err:
        print(f"grading impossible: {err}")
        return 2
    print(results.table(grade, rubric))
    if args.results:
        results.write_json_atomic(args.results, results.to_gradescope(grade, rubric))
        print(f"\nresults written to {args.results}")
    return 0


def with_timeout(rubric, seconds):
    from dataclasses import replace

    return replace(rubric, limits=replace(rubric.limits, call_timeout=float(seconds)))
