"""`report RESULTS`: the class report (report.html and its CSV files) and grades for the LMS."""
from pathlib import Path


def add_parser(subparsers):
    p = subparsers.add_parser("report", help="class report (report.html + CSV) of a batch, a Gradescope export "
                                             "or an nbgrader gradebook export; grades for Canvas")
    p.add_argument("results", type=Path, help="a `grade --batch` results folder, a Gradescope export folder, "
                                              "or the CSV of `nbgrader export`")
    p.add_argument("--out", type=Path, help="where to write (default: the results folder, or the CSV's folder)")
    p.add_argument("--submissions", type=Path, help="the submissions the batch graded (.py files, folders, "
                                                    "notebooks), or an nbgrader course folder (its submitted/ID/"
                                                    "mhsa/mhsa.ipynb): needed for the similarity check")
    p.add_argument("--roster", type=Path, help="CSV joining submissions to LMS identities: a 'submission' column "
                                               "(file name or nbgrader student id), then name, id, sis_user_id, "
                                               "login, section (or Canvas's own column names)")
    p.add_argument("--format", choices=("canvas",), action="append", default=[],
                   help="canvas: also write canvas.csv for Canvas's gradebook import (needs --roster)")
    p.add_argument("--assignment", default="Multi-head self-attention",
                   help="the Canvas assignment column: its name, or 'Name (canvas id)' to update an existing one")
    p.add_argument("--feedback", action="store_true",
                   help="instead of the class report, write each student's feedback page of a `grade --batch` "
                        "folder: OUT/feedback/<submission>.html (docs/autograder.md)")
    p.add_argument("--similarity-threshold", type=float, default=None,
                   help="list pairs sharing at least this share of their own code (default 0.7)")


def run(args) -> int:
    if args.feedback:
        return feedback_pages(args)
    from autograder.reporting import build, similarity

    if "canvas" in args.format and args.roster is None:
        print("--format canvas needs --roster: Canvas matches rows by the students' LMS ids")
        return 2
    out = args.out or (args.results if args.results.is_dir() else args.results.parent)
    threshold = similarity.THRESHOLD if args.similarity_threshold is None else args.similarity_threshold
    try:
        written, warnings = build(args.results, out, args.submissions, args.roster,
                                  args.assignment if "canvas" in args.format else None, threshold)
    except (ValueError, OSError) as err:
        print(f"report: {err}")
        return 2
    for warning in warnings:
        print(f"warning: {warning}")
    print("wrote " + ", ".join(str(p) for p in written))
    return 0


def feedback_pages(args) -> int:
    from autograder.reporting import feedback_page

    if not args.results.is_dir():
        print(f"report --feedback: {args.results} is not a `grade --batch` results folder")
        return 2
    try:
        written = feedback_page.write_all(args.results, args.out or args.results)
    except (ValueError, OSError) as err:
        print(f"report --feedback: {err}")
        return 2
    print(f"wrote {len(written)} feedback page(s) in {written[0].parent}")
    return 0
