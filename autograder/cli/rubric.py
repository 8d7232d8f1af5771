"""`rubric`: check a rubric file against the schema, or print the schema (every key, its default and meaning)."""
from pathlib import Path

from autograder.core import rubric
from autograder.core.paths import RUBRIC_FILE


def add_parser(subparsers):
    p = subparsers.add_parser("rubric", help="check a rubric file, or describe every key rubric.toml may hold",
                              description="Without --describe, checks FILE (default: the course's rubric.toml).")
    p.add_argument("file", nargs="?", type=Path, default=RUBRIC_FILE, help="the rubric to check (default: rubric.toml)")
    p.add_argument("--describe", action="store_true",
                   help="print the schema: every table and key, its kind, default, allowed values and meaning")


def run(args) -> int:
    if args.describe:
        print(rubric.describe())
        return 0
    try:
        loaded = rubric.load(args.file)
    except rubric.RubricError as err:
        print(err)
        return 1
    total = sum(p.points for p in loaded.parts.values())
    print(f"{args.file}: follows the schema; parts graded: {', '.join(loaded.parts)} ({total:g} points in all)")
    return 0
