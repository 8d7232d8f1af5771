"""`python -m autograder COMMAND`: each command lives in its own module with add_parser and run."""
import argparse
import importlib

from autograder import paths

# command name -> module under autograder/ that defines add_parser(subparsers) and run(args) -> int
COMMANDS = {
    "check": "autograder.commands.check",
    "grade": "autograder.commands.grade",
    "release": "autograder.commands.release",
    "gradescope": "autograder.commands.gradescope",
    "gradebook": "autograder.commands.gradebook",
    "report": "autograder.commands.report",
    "review": "autograder.commands.review",
    "rubric": "autograder.commands.rubric",
}


def main(argv=None) -> int:
    paths.put_environment_first()  # the grader's children (nbgrader's alembic, jupyter) come from this environment
    parser = argparse.ArgumentParser(prog="python -m autograder",
                                     description="Grade the multi-head self-attention assignment.")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    modules = {}
    for name, module_name in COMMANDS.items():
        try:
            modules[name] = importlib.import_module(module_name)
        except ModuleNotFoundError as err:
            if err.name != module_name:  # a command missing from a student release is fine
                raise
            continue
        modules[name].add_parser(subparsers)
    args = parser.parse_args(argv)
    return modules[args.command].run(args)
