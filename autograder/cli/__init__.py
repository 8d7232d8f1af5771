"""`python -m autograder COMMAND`: each command lives in its own module with add_parser and run."""
import argparse
import contextlib
import importlib
import importlib.util
import os
import sys

from autograder.core import paths

# command name -> module under autograder/ that defines add_parser(subparsers) and run(args) -> int
COMMANDS = {
    "check": "autograder.cli.check",
    "grade": "autograder.cli.grade",
    "release": "autograder.cli.release",
    "gradescope": "autograder.cli.gradescope",
    "gradebook": "autograder.cli.gradebook",
    "report": "autograder.cli.report",
    "review": "autograder.cli.review",
    "rubric": "autograder.cli.rubric",
}

# command name -> (the extra of pyproject.toml it needs, the modules of that extra it imports). Such a
# command is refused before it starts when a module is missing, in one line that says what to install
# (README.md, "Dependencies"); `grade --scheduler` names the cluster extra itself (autograder/runners/cluster.py).
NEEDS_EXTRA = {
    "release": ("course", ("nbformat", "nbgrader")),  # it generates the notebooks with nbgrader
    "gradescope": ("course", ("nbformat", "nbgrader")),  # it first checks them, as release --check does
    "gradebook": ("course", ("nbgrader",)),
    "report": ("report", ("copydetect", "yaml", "matplotlib")),
}

# jsonschema, which nbgrader imports through nbformat, builds 38 grammars at its import when this
# module is installed (its optional IRI format checker; jupyter-events brings it): 1.4 s of one core,
# more than the rest of nbgrader's import. No command checks a schema's "iri" format (nbformat
# validates notebooks without a format checker), so the commands' process does without it.
IRI_FORMAT_CHECKER = "rfc3987_syntax"


def main(argv=None) -> int:
    paths.put_environment_first()  # the grader's children (nbgrader's alembic, jupyter) come from this environment
    sys.modules.setdefault(IRI_FORMAT_CHECKER, None)  # an import of it fails, and jsonschema goes on without
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
    missing = missing_extra(args.command)
    if missing:
        print(missing, file=sys.stderr)
        return 2
    try:
        with output_may_close():
            return modules[args.command].run(args)
    except ModuleNotFoundError as err:
        missing = missing_extra(args.command, err)
        if not missing:
            raise
        print(missing, file=sys.stderr)
        return 2


class ClosedOutputProof:
    """sys.stdout that survives its reader going away (`grade ... | head -2`): from the first write
    that finds the pipe closed, what is printed goes to /dev/null, and the command carries on, so
    that every file it writes (results, grades.csv, the report) is written, and it ends with its own
    status and no traceback, where Python would otherwise stop at that print with BrokenPipeError."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._discard()
            return len(text)

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def flush(self):
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._discard()

    def _discard(self):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, self._stream.fileno())  # what the stream still buffers is flushed there too
        os.close(devnull)

    def __getattr__(self, name):
        return getattr(self._stream, name)


@contextlib.contextmanager
def output_may_close():
    stream = sys.stdout
    sys.stdout = ClosedOutputProof(stream)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stdout = stream


def missing_extra(command: str, error: ModuleNotFoundError | None = None) -> str | None:
    """The line that says which extra to install, when `command` needs one of which a module is not
    installed, or, given the `error` the command met importing, one that does not load what it needs.
    Before the command, modules are only found, not imported: importing nbgrader takes seconds that the
    gradebook spends starting its grader slots; a module found that cannot load what it needs is caught
    where the command imports it, with the same line (the extra brings the module and what it needs)."""
    extra, modules = NEEDS_EXTRA.get(command, (None, ()))
    if error is None:
        missing = [module for module in modules if importlib.util.find_spec(module) is None]
    else:  # a module of the grader's own that does not import is a bug, not an extra to install
        missing = [error.name] if extra and error.name and error.name.split(".")[0] != "autograder" else []
    if not missing:
        return None
    return (f"{command} needs the {extra} extra (make setup-{extra}, or python3 setup_venv.py --extras {extra}): "
            + "; ".join(f"No module named '{name}'" for name in dict.fromkeys(missing)))
