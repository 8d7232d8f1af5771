"""`check [PATH]`: the public tests against a student's own work, with a score table per part."""
from pathlib import Path

from autograder.submission import GradingError


def add_parser(subparsers):
    p = subparsers.add_parser("check", help="run the public tests on your work and show a score table")
    p.add_argument("path", nargs="?", type=Path, default=Path("assignment"),
                   help="your mhsa.py, notebook, or folder (default: assignment/)")
    p.add_argument("--debug", action="store_true",
                   help="run your code inside this process so breakpoints and prints work (no isolation)")


def run(args) -> int:
    from autograder import grading, results
    from autograder.rubric import load

    rubric = load()
    try:
        grade = grading.grade(args.path, suites=("public",), isolation="inprocess" if args.debug else "auto",
                              rubric=rubric, extras=False)
    except GradingError as err:
        print(f"cannot check: {err}")
        return 2
    print(results.table(grade, rubric))
    print("\nThese are the public tests only; hidden tests grade the same parts more thoroughly.")
    return 0
