"""`review GRADES`: the grades held for review in a batch's results folder, and a person's decision on one.

    python -m autograder review grades/                       # what is held, and why
    python -m autograder review grades/ --release alice       # the grade counts as the tests earned it
    python -m autograder review grades/ --confirm bob --note "uses torch._C to reach the fused kernel"

A decision rewrites the student's results file and grades.csv through the one results model
(results.decide), and is recorded in GRADES/records/reviews.json with the reasons it was taken on and
the sha256 of the files graded, so that a rerun of the batch (`--force`) applies it again to a hold of
the same files for the same reasons only; a changed file is held again, for a new look, with a line
saying the earlier decision was not carried (record/reviews.py).
"""
from pathlib import Path

from autograder.core import rubric as rubric_file
from autograder.core.paths import RUBRIC_FILE
from autograder.record import results
from autograder.record.reviews import DONE, held, record, short


def add_parser(subparsers):
    p = subparsers.add_parser("review", help="list grades held for review, or release or confirm one",
                              description=__doc__.split("\n\n", 1)[1].split("\n\nA decision")[0])
    p.add_argument("grades", type=Path, help="a batch's results folder (grade DIR --batch --out GRADES)")
    decision = p.add_mutually_exclusive_group()
    decision.add_argument("--release", metavar="STUDENT", help="the hold was a false alarm: the earned score counts")
    decision.add_argument("--confirm", metavar="STUDENT",
                          help="the hold was right: the parts it concerns score 0, the rest counts")
    p.add_argument("--rubric", type=Path, default=RUBRIC_FILE,
                   help="the rubric the batch was graded with (grade --rubric), for grades.csv's columns")
    p.add_argument("--note", default="", help="why, in a sentence: kept in the results file and GRADES/records/reviews.json")


def run(args) -> int:
    out = args.grades
    if not out.is_dir():
        print(f"{out} is not a folder of results (grade DIR --batch --out GRADES writes one)")
        return 2
    name = args.release or args.confirm
    if name is None:
        print(listing(out))
        return 0
    decision = "release" if args.release else "confirm"
    try:
        rubric = rubric_file.load(args.rubric)
        decided = record(out, name, decision, args.note)
    except ValueError as err:  # a RubricError too: nothing is recorded then
        print(err)
        return 2
    rewrite_csv(out, rubric)
    print(f"{results.printable(name)}: {DONE[decision]} after review, bound to the files graded "
          f"({short(decided.held.sha256)}); score {decided.score:g} / {decided.max_score or 0:g}; "
          f"{out / results.GRADES_CSV} rewritten")
    return 0


def listing(out: Path) -> str:
    entries = held(out)
    if not entries:
        return f"no grade in {out} is held for review"
    lines = []
    for name, found in entries.items():
        hold = found.held
        state = DONE.get(hold.decision, "HELD")
        lines += [f"{results.printable(name)}: {state}; released {hold.released_score:g}, "
                  f"confirmed {hold.confirmed_score:g} (parts at stake: {', '.join(hold.parts)}); "
                  f"files {short(hold.sha256)}",
                  *(f"    {reason}" for reason in hold.reasons),
                  *([f"    {hold.not_carried}"] if hold.not_carried else [])]
    undecided = sum(1 for found in entries.values() if not found.held.decision)
    lines.append(f"\n{undecided} of {len(entries)} still to review: "
                 f"python -m autograder review {out} --release NAME | --confirm NAME [--note TEXT]")
    return "\n".join(lines)


def rewrite_csv(out: Path, rubric) -> None:
    names = sorted(p.stem for p in out.glob("*.json"))  # write_grades_csv keeps results files only
    results.write_grades_csv(out, names, rubric)
