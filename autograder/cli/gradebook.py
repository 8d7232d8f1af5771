"""`gradebook`: nbgrader submissions graded again in isolation (autograder/runners/gradebook.py), and flagged on evidence of tampering."""
from pathlib import Path

from autograder.core.paths import COURSE
from autograder.isolation.host.levels import LEVELS
from autograder.runners.gradebook import POLICIES


def add_parser(subparsers):
    p = subparsers.add_parser("gradebook", help="nbgrader: compare in-kernel scores with isolated grades; "
                                                "--write stores isolated ones in the gradebook (--policy)")
    p.add_argument("--course", type=Path, default=COURSE,
                   help="the nbgrader course folder (default: course/)")
    p.add_argument("--assignment", default="mhsa", help="the nbgrader assignment (default: mhsa)")
    p.add_argument("--student", action="append", help="only this student (repeatable; default: every submission)")
    p.add_argument("--write", action="store_true",
                   help="store isolated scores as manual scores of the autograded test cells, by --policy; "
                        "mark flagged notebooks in nbgrader; recompute late penalties")
    p.add_argument("--policy", choices=sorted(POLICIES), default="flagged",
                   help="; ".join(f"{name}: {text}" for name, text in POLICIES.items()))
    p.add_argument("--jobs", type=int, default=2, help="notebooks graded at once (default: 2)")
    p.add_argument("--force", action="store_true", help="regrade even where a cached isolated result exists")
    p.add_argument("--csv", type=Path, help="write the report here too (default: course/isolated/ASSIGNMENT/report.csv)")
    p.add_argument("--isolation", choices=("auto", *LEVELS), default="auto",
                   help="auto (default): the strongest level this machine supports")
    p.add_argument("--accept", action="append", metavar="STUDENT",
                   help="after reading a flagged or held notebook: keep this student's in-kernel grade (takes "
                        "this command's scores out of the gradebook, clears the flag; repeatable)")


def run(args) -> int:
    from autograder.runners import gradebook

    return gradebook.run(args)
