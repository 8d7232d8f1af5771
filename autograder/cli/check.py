"""`check [PATH]`: the public tests against a student's own work, with a score table per part."""
import os
import sys
from pathlib import Path

from autograder.intake.submission import GradingError


def add_parser(subparsers):
    p = subparsers.add_parser("check", help="run the public tests on your work and show a score table")
    p.add_argument("path", nargs="?", type=Path, default=Path("assignment"),
                   help="your mhsa.py, notebook, or folder (default: assignment/; its filled notebook is "
                        "checked when mhsa.py is still the stub)")
    p.add_argument("--debug", action="store_true",
                   help="run your code inside this process so breakpoints and prints work (no isolation)")


def run(args) -> int:
    from autograder.core.rubric import load
    from autograder.feedback import student_view
    from autograder.pipeline import grading

    rubric = load()
    try:
        grade = grading.grade(args.path, suites=("public",), isolation="inprocess" if args.debug else "auto",
                              rubric=rubric, extras=False)
    except GradingError as err:
        return show(f"cannot check: {err}", status=2)
    return show(student_view.report(grade, rubric))


def show(text: str, status: int = 0) -> int:
    try:
        print(text, flush=True)
    except BrokenPipeError:
        # `check | head` closed the pipe: what is left is unwanted. Point stdout at /dev/null so that
        # Python's own flush at exit does not print a traceback either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return status
