"""`review GRADES`: the grades held for review in a batch's results folder, and a person's decision on one.

    python -m autograder review grades/                       # what is held, and why
    python -m autograder review grades/ --release alice       # the grade counts as the tests earned it
    python -m autograder review grades/ --confirm bob --note "uses torch._C to reach the fused kernel"
    python -m autograder review grades/ --score carol masks=8 mhsa=20 --note "regrade: the test assumed float masks"
    python -m autograder review grades/ --score dave W1=1 W2=0.5 --note "W2: the cross-attention example is missing"
    python -m autograder review grades/ --unscore carol masks   # back to what the tests gave (every part: no PART)

A decision rewrites the student's results file and grades.csv through the one results model
(results.decide), and is recorded in GRADES/records/reviews.json with the reasons it was taken on and
the sha256 of the files graded, so that a rerun of the batch (`--force`) applies it again to a hold of
the same files for the same reasons only; a changed file is held again, for a new look, with a line
saying the earlier decision was not carried (record/reviews.py). A score set by hand is bound to the
files graded likewise (GRADES/records/scores.json): a rerun sets it again on the same files only, and
lists it as not applied on others.
"""
import math
from pathlib import Path

from autograder.core import rubric as rubric_file
from autograder.core.paths import RUBRIC_FILE
from autograder.intake import knowledge
from autograder.record import results, reviews
from autograder.record.reviews import DONE, held, record, short

def add_parser(subparsers):
    p = subparsers.add_parser("review", help="list grades held for review, or release or confirm one",
                              description=__doc__.split("\n\n", 1)[1].split("\n\nA decision")[0])
    p.add_argument("grades", type=Path, help="a batch's results folder (grade DIR --batch --out GRADES)")
    decision = p.add_mutually_exclusive_group()
    decision.add_argument("--release", metavar="STUDENT", help="the hold was a false alarm: the earned score counts")
    decision.add_argument("--confirm", metavar="STUDENT",
                          help="the hold was right: the parts it concerns score 0, the rest counts")
    decision.add_argument("--score", nargs="+", metavar=("STUDENT", "PART=POINTS"),
                          help="set parts' scores by hand (a regrade request), 0 to the part's maximum, or score the "
                               "written questions (W1, W2: outside the autograded maximum); needs --note")
    decision.add_argument("--unscore", nargs="+", metavar=("STUDENT", "PART"),
                          help="back to the scores the tests gave, for these parts (every part set by hand: none named)")
    p.add_argument("--rubric", type=Path, default=RUBRIC_FILE,
                   help="the rubric the batch was graded with (grade --rubric), for grades.csv's columns")
    p.add_argument("--note", default="", help="why, in a sentence: kept in the results file and GRADES/records/reviews.json")


def run(args) -> int:
    out = args.grades
    if not out.is_dir():
        print(f"{out} is not a folder of results (grade DIR --batch --out GRADES writes one)")
        return 2
    name = args.release or args.confirm
    if name is None and not (args.score or args.unscore):
        print(listing(out))
        return 0
    try:
        rubric = rubric_file.load(args.rubric)
        if args.score or args.unscore:
            return by_hand(out, rubric, args)
        decision = "release" if args.release else "confirm"
        record(out, name, decision, args.note)
        reviews.reapply_scores(out, rubric, [name])  # a decision rebuilds the parts: the scores set by hand stay
        decided = results.load(out / f"{name}.json")
    except ValueError as err:  # a RubricError too: nothing is recorded then
        print(err)
        return 2
    rewrite_csv(out, rubric)
    print(f"{results.printable(name)}: {DONE[decision]} after review, bound to the files graded "
          f"({short(decided.held.sha256)}); score {decided.score:g} / {decided.max_score or 0:g}; "
          f"{out / results.GRADES_CSV} rewritten")
    return 0


def by_hand(out: Path, rubric, args) -> int:
    """--score or --unscore; ValueError (nothing changed) for bad input."""
    if args.unscore:
        name, *parts = args.unscore
        changed = reviews.unset_scores(out, rubric, name, parts)
        what = "back to what the tests gave"
    else:
        name, *pairs = args.score
        if not args.note.strip():
            raise ValueError("--score needs --note TEXT: why the score is set by hand (the student reads it)")
        changed = reviews.set_scores(out, rubric, name, part_points(pairs), args.note, written_questions(rubric))
        what = "set by hand"
    rewrite_csv(out, rubric)
    by_hand = [t for t in (results.hand_scores_text(changed.parts), results.written_text(changed.written)) if t]
    print(f"{results.printable(name)}: {what}; score {changed.score:g} / {changed.max_score or 0:g}"
          f"{''.join('; ' + t for t in by_hand)}; {out / results.GRADES_CSV} rewritten")
    return 0


def written_questions(rubric) -> dict:
    """The written questions a person scores, question -> its points (knowledge.hand_graded)."""
    return {q.id: q.points for q in knowledge.hand_graded(rubric)}


def part_points(pairs: list) -> dict:
    """PART=POINTS words as {part: points}; ValueError naming the first that is not one."""
    if not pairs:
        raise ValueError("--score STUDENT PART=POINTS [PART=POINTS ...]: name at least one part and its points")
    found = {}
    for pair in pairs:
        part, sep, value = pair.partition("=")
        try:
            found[part] = float(value) if sep and part else math.nan
        except ValueError:
            found[part] = math.nan
        if not math.isfinite(found[part]):
            raise ValueError(f"{results.printable(pair)!r} is not PART=POINTS (e.g. masks=8 or W1=1)")
    return found


def listing(out: Path) -> str:
    entries = held(out)
    lines = [f"{results.printable(name)}: "
             + (why if why else f"scores set by hand on files {short(taken.get('sha256', ''))}: "
                + "; ".join(f"{what} {e.get('points'):g} ({e.get('note', '')})"
                            for what, e in reviews.scored_by_hand(taken).items()))
             for name, (taken, why) in reviews.hand_scores(out).items()]
    if not entries:
        return "\n".join([*lines, f"no grade in {out} is held for review"])
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
