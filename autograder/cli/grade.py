"""`grade PATH`: grade one submission (or, with --batch, a folder of them)."""
from pathlib import Path

from autograder.pipeline.grade_file import GradeOptions, grade_one


def add_parser(subparsers):
    p = subparsers.add_parser("grade", help="grade a submission (.py, folder or .ipynb) with the test suites")
    p.add_argument("path", type=Path, help="mhsa.py, a folder holding it, a notebook; with --batch a folder of those")
    p.add_argument("--results", type=Path, help="write a Gradescope results.json here")
    GradeOptions.add_arguments(p)
    p.add_argument("--batch", action="store_true", help="PATH is a folder of submissions")
    p.add_argument("--out", type=Path, help="with --batch: folder for results files and grades.csv")
    p.add_argument("--jobs", type=int, default=2, help="with --batch: submissions graded at once")
    p.add_argument("--force", action="store_true", help="with --batch: regrade finished submissions")
    p.add_argument("--extensions", type=Path, metavar="FILE.csv",
                   help="with --batch: per-student due dates and extensions for the late policy, a CSV with the "
                        "columns student and due (ISO 8601) and/or extra_days (docs/autograder.md)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="with --batch: grade on this Dask distributed cluster (e.g. tls://head:8786) instead of "
                        "this machine; needs the sandbox level on every worker (docs/autograder.md)")


def run(args) -> int:
    """Exit status 0: graded; 2: grading was impossible (the results file, if asked for, says why)."""
    if args.batch:
        from autograder.runners import batch

        return batch.run(args)
    from autograder.core.rubric import RubricError, load

    try:
        rubric = load(args.rubric)
    except RubricError as err:
        print(err)
        return 2
    return grade_one(args.path, args.results, GradeOptions.from_args(args), rubric, show=True,
                     time_limit=rubric.submission_timeout,
                     backstop=True)
