"""`gradescope OUT.zip`: the autograder bundle to upload to Gradescope, and `--try` to rehearse it (instructors only)."""
import sys
from pathlib import Path

from autograder.pipeline.grade_file import due_argument  # --due is checked as `grade --due` checks it

REHEARSAL_KEEP = Path("build/gradescope-try")


def add_parser(subparsers):
    p = subparsers.add_parser("gradescope", help="build the Gradescope autograder zip, or rehearse it on a submission",
                              description="Upload OUT.zip as a Gradescope programming assignment's "
                                          "autograder; docs/autograder.md explains what it holds. With --try, "
                                          "the bundle grades SUBMISSION here as Gradescope would.")
    p.add_argument("out", type=Path, nargs="?",
                   help="the zip file to write, e.g. build/gradescope-autograder.zip (optional with --try)")
    p.add_argument("--try", dest="rehearse", nargs="+", type=Path, metavar="SUBMISSION",
                   help="files (or folders) uploaded together as one submission, e.g. mhsa.py knowledge.py: "
                        "run the bundle's run_autograder on them in a temporary fake /autograder and print "
                        "what Gradescope would show the student")
    p.add_argument("--due", type=due_argument, metavar="DATE",
                   help="with --try: the assignment's due date in submission_metadata.json (ISO 8601 date or "
                        "date-time); default: none, so that rubric.toml's [parts.knowledge] due decides")
    p.add_argument("--keep", type=Path, default=REHEARSAL_KEEP, metavar="DIR",
                   help=f"with --try: the folder that keeps results.json and submission_metadata.json "
                        f"(default: {REHEARSAL_KEEP})")
    p.set_defaults(parser=p)


def run(args) -> int:
    from autograder.authoring import doc_numbers, release
    from autograder.runners import gradescope

    if args.out is None and not args.rehearse:
        args.parser.error("give OUT.zip, --try SUBMISSION..., or both")
    if not args.rehearse and (args.due or args.keep != REHEARSAL_KEEP):
        args.parser.error("--due and --keep go with --try")
    try:  # before the bundle is built: a missing file is reported at once
        gradescope.uploads(args.rehearse or ())
    except gradescope.RehearsalError as err:
        print(err, file=sys.stderr)
        return 2
    try:  # the bundle grades what the student release hands out: both come from the same sources
        release.refuse_stale("the Gradescope bundle")
    except (release.StaleFiles, doc_numbers.RegionError) as err:
        print(err, file=sys.stderr)
        return 2
    if args.out is not None:
        print(f"Gradescope autograder written to {gradescope.build_bundle(args.out)}")
    if not args.rehearse:
        return 0
    try:
        found = gradescope.rehearse(args.rehearse, args.keep, args.due, args.out)
    except gradescope.RehearsalError as err:
        print(err, file=sys.stderr)
        return 2
    print(gradescope.student_view(found))
    print(f"\nresults.json and submission_metadata.json kept in {args.keep}")
    return 0

