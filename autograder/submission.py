"""What a TA hands the grader (a .py file, a folder, a notebook) turned into one mhsa.py to grade.

Everything handed in is untrusted, the paths included: every file is read with autograder/handin.py.
"""
import os
import shutil
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from autograder.handin import GradingError, read_regular, refuse_link
from autograder.isolation import torch_init_file


@dataclass(frozen=True)
class Submission:
    name: str
    origin: Path           # what was handed in
    source: Path           # the mhsa.py that is graded (a private copy)
    knowledge: dict | None  # knowledge-check answers, read without running anything; None if absent
    notes: tuple = ()       # which file of a folder was graded and why, when there was a choice


def load(path: Path, workdir: Path) -> Submission:
    """Copy (or extract) the submission into `workdir`; never imports or runs it, never follows links."""
    path = Path(path)
    refuse_link(path)
    if not path.exists():
        raise GradingError(f"{path}: no such file or folder")
    target = Path(workdir) / "mhsa.py"
    knowledge_file, notes = None, ()
    if path.suffix == ".ipynb":
        from autograder import notebook

        copy = Path(workdir) / "submission.ipynb"  # extracted from a private copy, never from the link
        copy.write_bytes(read_regular(path))
        source, answers = notebook.extract_submission(copy)
        target.write_text(source)
        return Submission(path.stem, path, target, answers)
    if path.is_dir():
        from autograder import route  # the one rule for which file of a folder is the work

        chosen = route.pick(path)
        if chosen.path.suffix == ".ipynb":
            return replace(load(chosen.path, workdir), notes=(chosen.note,))
        target.write_bytes(read_regular(chosen.path))
        knowledge_file = chosen.knowledge
        notes = (chosen.note,) if chosen.note else ()
    elif path.suffix == ".py":
        target.write_bytes(read_regular(path))
    else:
        raise GradingError(f"{path}: expected a .py file, a .ipynb notebook or a folder holding mhsa.py")
    answers = None
    if knowledge_file is not None and os.path.lexists(knowledge_file):
        from autograder import knowledge

        answers = knowledge.read_answers(read_regular(knowledge_file).decode("utf-8", "replace"))
    return Submission(path.name.removesuffix(".py"), path, target, answers, notes)


def safe_to_hide(path: Path) -> bool:
    """Hiding a folder that holds the Python installation would break the worker's own imports."""
    path = Path(path).resolve()
    needed = [Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).resolve(), Path(shutil.__file__)]
    torch = torch_init_file()
    if torch is not None:
        needed.append(torch)
    return all(path != n.resolve() and path not in n.resolve().parents for n in needed)
