"""What a TA hands the grader (a .py file, a folder, a notebook) turned into one mhsa.py to grade.

Everything handed in is untrusted, the paths included: every file is read with autograder/handin.py.
"""
import os
import shutil
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from autograder.errors import clean_name, clean_text
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
    """Copy (or extract) the submission into `workdir`; never imports or runs it, never follows links.
    Whatever was handed in, the result is a Submission or a GradingError that says why: a grade
    with no results file and a traceback helps nobody, so anything unforeseen in the input is
    reported as unreadable too."""
    try:
        return _load(Path(path), Path(workdir))
    except GradingError:
        raise
    except Exception as err:  # noqa: BLE001 - the input is untrusted; see the docstring
        raise GradingError(f"{clean_name(path)}: could not be read ({type(err).__name__}: "
                           f"{clean_text(err, 300)})") from None


def _load(path: Path, workdir: Path) -> Submission:
    refuse_link(path)
    if not path.exists():
        raise GradingError(f"{clean_name(path)}: no such file or folder")
    target = workdir / "mhsa.py"
    if path.suffix == ".ipynb":
        from autograder import notebook

        copy = workdir / "submission.ipynb"  # extracted from a private copy, never from the link
        copy.write_bytes(read_regular(path))
        source, answers = notebook.extract_submission(copy, path.name)
        target.write_text(source)
        answers, note = notebook_answers(answers, path.parent / "knowledge.py")
        return Submission(path.stem, path, target, answers, (note,) if note else ())
    if path.is_dir():
        from autograder import route  # the one rule for which file of a folder is the work

        chosen = route.pick(path)
        if chosen.path.suffix == ".ipynb":
            graded = _load(chosen.path, workdir)
            return replace(graded, notes=(chosen.note, *graded.notes))
        target.write_bytes(read_regular(chosen.path))
        answers, knowledge_notes = read_knowledge(chosen.knowledge)
        notes = ((chosen.note,) if chosen.note else ()) + knowledge_notes
        return Submission(path.name.removesuffix(".py"), path, target, answers, notes)
    if path.suffix == ".py":
        target.write_bytes(read_regular(path))
        # The handout's layout: knowledge.py beside mhsa.py holds its answers. Beside a file named
        # otherwise (alice.py in a folder of submissions) it would be nobody's in particular.
        answers, notes = read_knowledge(path.parent / "knowledge.py" if path.name == "mhsa.py" else None)
        return Submission(path.name.removesuffix(".py"), path, target, answers, notes)
    raise GradingError(f"{clean_name(path)}: expected a .py file, a .ipynb notebook or a folder holding mhsa.py")


def read_knowledge(path: Path | None) -> tuple:
    """(answers, notes) from the knowledge.py at `path`: (None, ()) when there is none. A file that
    cannot be read or parsed costs the knowledge check only, never the code's grade: the notes say
    why, and answers on lines of their own are still read (knowledge.read_answers_leniently)."""
    if path is None or not os.path.lexists(path):
        return None, ()
    from autograder import knowledge

    try:
        text = read_regular(path).decode("utf-8", "replace")
    except GradingError as err:
        return {}, (f"knowledge check: {err}; its answers count as not given",)
    answers, problem = knowledge.read_answers_leniently(text)
    return answers, ((f"knowledge check: {clean_name(path.name)} {problem}",) if problem else ())


def notebook_answers(answers: dict, beside: Path) -> tuple:
    """(the knowledge answers of a notebook submission, a note for the student or ""). The notebook's
    answer cells are the answers; when they are all empty and a knowledge.py beside the notebook holds
    answers, those are used, since that is plainly where the student answered. Either way the note
    says which answers were read when both places could have held them."""
    found, problems = read_knowledge(beside)
    if found is None:
        return answers, ""
    if problems and not any(v is not None for v in found.values()):
        return answers, f"{problems[0]}; the knowledge answers are the notebook's"
    if not any(v is not None for v in found.values()):
        return answers, ""
    if any(v is not None for v in (answers or {}).values()):
        return answers, (f"the knowledge answers are the notebook's answer cells; {beside.name} beside it also "
                         "holds answers and was not used (the answers go with the file that is graded)")
    return found, (f"the knowledge answers were read from {beside.name} beside the notebook, whose answer "
                   "cells are empty")


def safe_to_hide(path: Path) -> bool:
    """Hiding a folder that holds the Python installation would break the worker's own imports."""
    path = Path(path).resolve()
    needed = [Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).resolve(), Path(shutil.__file__)]
    torch = torch_init_file()
    if torch is not None:
        needed.append(torch)
    return all(path != n.resolve() and path not in n.resolve().parents for n in needed)
