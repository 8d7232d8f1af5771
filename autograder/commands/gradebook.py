"""`gradebook`: grade nbgrader submissions in isolation, flag in-kernel scores that are too high, and
(with --write) store the isolated scores in the nbgrader gradebook.

`nbgrader autograde` runs the test cells inside the student's own kernel, where the student's code
can defeat them (an input transformer that empties every later cell, a patched torch.allclose).
The isolated grade runs only the notebook's solution cells, in the worker, against the repository's
test suites. A part that scores more in the kernel than in isolation is flagged for a look: the
suites differ, so a flag is a reason to read the notebook, not a verdict.
"""
from pathlib import Path

from autograder.isolation import LEVELS
from autograder.paths import COURSE

TOLERANCE = 1e-6


def add_parser(subparsers):
    p = subparsers.add_parser("gradebook", help="nbgrader: compare in-kernel scores with isolated grades; "
                                                "--write stores the isolated ones in the gradebook")
    p.add_argument("--course", type=Path, default=COURSE,
                   help="the nbgrader course folder (default: course/)")
    p.add_argument("--assignment", default="mhsa", help="the nbgrader assignment (default: mhsa)")
    p.add_argument("--student", action="append", help="only this student (repeatable; default: every submission)")
    p.add_argument("--write", action="store_true",
                   help="store the isolated scores as the manual scores of the autograded test cells")
    p.add_argument("--isolation", choices=("auto", *LEVELS), default="auto",
                   help="auto (default): the strongest level this machine supports")


def run(args) -> int:
    from nbgrader.api import Gradebook

    from autograder import grading, notebook

    course = args.course.resolve()
    flagged_any = False
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        students = args.student or sorted(s.student.id for s in gb.find_assignment(args.assignment).submissions)
        print(f"{'student':<20} {'in kernel':>10} {'isolated':>10}  flags")
        for student in students:
            cells = gb.find_submission_notebook(notebook.ASSIGNMENT, args.assignment, student).grades
            path = course / "submitted" / student / args.assignment / f"{notebook.ASSIGNMENT}.ipynb"
            isolated = grading.grade(path, isolation=args.isolation, hide=[course])
            in_kernel = kernel_scores(cells)
            scores = {name: part.score for name, part in isolated.parts.items() if name in in_kernel}
            flags = [f"{name}: {in_kernel[name]:g} in the kernel > {scores[name]:g} isolated"
                     for name in in_kernel if in_kernel[name] > scores[name] + TOLERANCE]
            flagged_any |= bool(flags)
            print(f"{student:<20} {sum(in_kernel.values()):>10g} {sum(scores.values()):>10g}  "
                  + ("; ".join(flags) + " - read this notebook" if flags else "-"))
            if args.write:
                store(cells, isolated)
        if args.write:
            gb.db.commit()
            print("isolated scores stored as manual scores of the autograded test cells")
    return 1 if flagged_any else 0


def kernel_scores(cells) -> dict:
    """part -> the points nbgrader's autograde gave its test cells in the student's kernel."""
    from autograder.notebook import part_of_cell

    scores = {}
    for cell in cells:
        part = part_of_cell(cell.name)
        if part is not None:
            scores[part] = scores.get(part, 0.0) + (cell.auto_score or 0.0)
    return scores


def store(cells, isolated) -> None:
    """Knowledge cells get their question's isolated score; every other test cell its share of its
    part's isolated score, in proportion to its points."""
    from autograder.notebook import knowledge_cell, part_of_cell

    questions = {knowledge_cell(row["question"]): row["score"] for row in isolated.extra_entries if "question" in row}
    for cell in cells:
        part = part_of_cell(cell.name)
        if part is None:
            continue
        if cell.name in questions:
            cell.manual_score = questions[cell.name]
        else:
            share = isolated.parts[part]
            cell.manual_score = round(share.score * cell.max_score / share.max_score, 6) if share.max_score else 0.0
