"""`gradescope OUT.zip`: the autograder bundle to upload to Gradescope (instructors only)."""
import sys
from pathlib import Path


def add_parser(subparsers):
    p = subparsers.add_parser("gradescope", help="build the Gradescope autograder zip",
                              description="Upload OUT.zip as a Gradescope programming assignment's "
                                          "autograder; docs/autograder.md explains what it holds.")
    p.add_argument("out", type=Path, help="the zip file to write, e.g. build/gradescope-autograder.zip")


def run(args) -> int:
    from autograder.authoring import doc_numbers, release
    from autograder.runners import gradescope

    try:  # the bundle grades what the student release hands out: both come from the same sources
        release.refuse_stale("the Gradescope bundle")
    except (release.StaleFiles, doc_numbers.RegionError) as err:
        print(err, file=sys.stderr)
        return 2
    out = gradescope.build_bundle(args.out)
    print(f"Gradescope autograder written to {out}")
    return 0
