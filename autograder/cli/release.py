"""`release`: build the student repository, or check/refresh the files generated from the reference."""
import sys
from pathlib import Path


def add_parser(subparsers):
    p = subparsers.add_parser("release", help="build the student release or check generated files",
                              description="Without options, --check is implied when OUT is missing.")
    p.add_argument("out", nargs="?", type=Path, help="folder to write the student repository to (new)")
    p.add_argument("--check", action="store_true", help="fail if generated files are out of date")
    p.add_argument("--write", action="store_true", help="regenerate them: stubs, notebooks, the points in the handout and docs")


def run(args) -> int:
    from autograder.authoring import doc_numbers, release

    try:
        return _run(args, release)
    except (FileExistsError, release.StaleFiles, doc_numbers.RegionError) as err:
        print(err, file=sys.stderr)
        return 2


def _run(args, release) -> int:
    problems = release.course_problems()
    for problem in problems:
        print(f"not one assignment: {problem}", file=sys.stderr)
    if problems:
        return 1
    if args.write:
        for path in release.write_generated():
            print(f"regenerated {path}")
    if args.check or (args.out is None and not args.write):
        stale = release.stale_files()
        for path in stale:
            print(f"out of date: {path} (run `python -m autograder release --write`)")
        if stale:
            return 1
        print("generated files match the reference")
    if args.out is not None:
        out = release.build_release(args.out)
        print(f"student release written to {out}")
    return 0
