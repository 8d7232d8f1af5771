"""Which file of a student's folder is their work, by one rule that every command follows.

`check`, `pytest tests_public`, `grade` and the Gradescope runner all use it, so that every command
tests the same code.

A folder (the default is assignment/) may hold mhsa.py and a notebook. The rule, stated in the
handout's "How to submit": mhsa.py is graded, unless it is still the untouched stub and a notebook
holds code, in which case the notebook is. Whether a file is still the stub is read from its syntax
tree (every contract function still raises NotImplementedError), never by running it.
"""
import ast
import functools
from dataclasses import dataclass
from pathlib import Path

from autograder.core import rubric
from autograder.core.errors import clean_name
from autograder.core.handin import GradingError, read_regular, refuse_link

PREFERRED_NOTEBOOK = "mhsa.ipynb"
# Notebooks of one folder read to see whether they hold code: mhsa.ipynb first, then by name. Reading
# one takes seconds at the size limit, and a folder of twenty such took minutes; a student's folder
# holds one or two notebooks (a copy, a scratch one).
NOTEBOOKS_WEIGHED = 3


@dataclass(frozen=True)
class Route:
    path: Path          # the mhsa.py or the notebook that holds the student's work
    knowledge: Path | None  # knowledge.py beside mhsa.py (the .py route), None for a notebook
    note: str = ""      # why this file was chosen, when there was a choice; shown to the student


def pick(path: Path) -> Route:
    """The route for a .py file, a notebook, or a folder (or a folder holding assignment/)."""
    path = Path(path)
    refuse_link(path)
    if not path.is_dir():
        if not path.exists():
            raise GradingError(f"{clean_name(path)}: no such file or folder")
        return Route(path, None)
    folder = work_folder(path)
    refuse_link(folder / "mhsa.py")  # said, not skipped: the student may think it is graded
    # Any mhsa.py that is not a folder is the work, a FIFO or a device too: reading it
    # (handin.read_regular) refuses it and says why, where skipping it would say it is missing.
    module = folder / "mhsa.py" if (folder / "mhsa.py").exists() and not (folder / "mhsa.py").is_dir() else None
    notebooks = folder_notebooks(folder)
    knowledge = folder / "knowledge.py"
    if module is None:
        if not notebooks:
            raise GradingError(f"{clean_name(path)}: the folder holds no mhsa.py (nor assignment/mhsa.py, nor a notebook)")
        return Route(notebooks[0], None, f"graded: {clean_name(notebooks[0])} (there is no mhsa.py beside it)")
    weighed = notebooks[:NOTEBOOKS_WEIGHED]
    skipped = (f"; {len(notebooks) - len(weighed)} more notebook(s) beside it were not looked at (only the first "
               f"{NOTEBOOKS_WEIGHED}, {PREFERRED_NOTEBOOK} first, are)" if len(notebooks) > len(weighed) else "")
    filled = [nb for nb in weighed if not is_stub(notebook_source(nb))]
    if not filled:
        return Route(module, knowledge, f"graded: {clean_name(module)}{skipped}" if skipped else "")
    if is_stub(read_regular(module).decode("utf-8", "replace")):
        return Route(filled[0], None, f"graded: your notebook {clean_name(filled[0])}, because {clean_name(module)} "
                                      f"is still the untouched stub{skipped}")
    return Route(module, knowledge, f"graded: {clean_name(module)}; your notebook {clean_name(filled[0])} also holds "
                                    "code, and when both do, mhsa.py is the one graded (see 'How to submit' in the "
                                    f"handout){skipped}")


def work_folder(path: Path) -> Path:
    """The folder of the folder `path` that holds the work: its assignment/ when that holds mhsa.py or a
    notebook, else `path` itself."""
    refuse_link(path / "assignment")  # a linked folder would lead anywhere
    inner = path / "assignment"
    return inner if inner.is_dir() and (_regular(inner / "mhsa.py") or folder_notebooks(inner)) else path


def notebook_source(path: Path) -> str:
    """The program of a notebook as one module, read without running anything."""
    from autograder.intake import notebook

    try:
        read_regular(path)  # refuses a link, a device or an oversized file before it is parsed
        return notebook.extract_submission(path)[0]
    except GradingError:
        return ""  # not a notebook: it holds no work to choose


def is_stub(source: str, contract: tuple = None) -> bool:
    """True when every function of `contract` (default: the course rubric's, Rubric.contract) is missing
    or still raises NotImplementedError in its own body or, for a class, in one of its methods' bodies."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # the last two: nested too deep to parse
        return False  # not the generated stub: it is the student's (broken) work
    defined = {node.name: node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    return all(name not in defined or _unwritten(defined[name]) for name in contract or course_contract())


@functools.cache
def course_contract() -> tuple:
    """The functions the course's rubric.toml grades: what its handout leaves for students to write."""
    return rubric.load().contract


def _unwritten(node) -> bool:
    if isinstance(node, ast.ClassDef):
        return any(_unwritten(child) for child in node.body if isinstance(child, ast.FunctionDef))
    return any(isinstance(statement, ast.Raise) and _names_not_implemented(statement.exc)
               for statement in node.body)


def _names_not_implemented(exc) -> bool:
    target = exc.func if isinstance(exc, ast.Call) else exc
    return isinstance(target, ast.Name) and target.id == "NotImplementedError"


def folder_notebooks(folder: Path) -> list:
    """The notebooks of `folder` the route considers, in its order: mhsa.ipynb first, then by name."""
    found = [p for p in folder.glob("*.ipynb") if _regular(p)]
    return sorted(found, key=lambda p: (p.name != PREFERRED_NOTEBOOK, p.name))


def _regular(path: Path) -> bool:
    return path.is_file() and not path.is_symlink()
