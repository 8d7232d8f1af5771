"""What a TA hands the grader (a .py file, a folder, a notebook) turned into one mhsa.py to grade."""
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path


class GradingError(Exception):
    """Grading itself is impossible (not the submission's fault): the CLI exits non-zero."""


@dataclass(frozen=True)
class Submission:
    name: str
    origin: Path           # what was handed in
    source: Path           # the mhsa.py that is graded (a private copy)
    knowledge: dict | None  # knowledge-check answers, read without running anything; None if absent


def load(path: Path, workdir: Path) -> Submission:
    """Copy (or extract) the submission into `workdir`; never imports or runs it."""
    path = Path(path)
    if not path.exists():
        raise GradingError(f"{path}: no such file or folder")
    target = Path(workdir) / "mhsa.py"
    knowledge_file = None
    if path.suffix == ".ipynb":
        from autograder import notebook

        source, answers = notebook.extract_submission(path)
        target.write_text(source)
        return Submission(path.stem, path, target, answers)
    if path.is_dir():
        folder = path / "assignment" if (path / "assignment" / "mhsa.py").is_file() else path
        notebooks = sorted(folder.glob("*.ipynb"))
        if not (folder / "mhsa.py").is_file() and notebooks:
            return load(notebooks[0], workdir)
        if not (folder / "mhsa.py").is_file():
            raise_missing(path)
        shutil.copyfile(folder / "mhsa.py", target)
        knowledge_file = folder / "knowledge.py"
    elif path.suffix == ".py":
        shutil.copyfile(path, target)
    else:
        raise GradingError(f"{path}: expected a .py file, a .ipynb notebook or a folder holding mhsa.py")
    answers = None
    if knowledge_file is not None and knowledge_file.is_file():
        from autograder import knowledge

        answers = knowledge.read_answers(knowledge_file.read_text(errors="replace"))
    return Submission(path.name.removesuffix(".py"), path, target, answers)


def raise_missing(path):
    raise GradingError(f"{path}: the folder holds no mhsa.py (nor assignment/mhsa.py, nor a notebook)")


def safe_to_hide(path: Path) -> bool:
    """Hiding a folder that holds the Python installation would break the worker's own imports."""
    path = Path(path).resolve()
    needed = [Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).resolve(), Path(shutil.__file__)]
    try:
        import torch

        needed.append(Path(torch.__file__))
    except ImportError:
        pass
    return all(path != n.resolve() and path not in n.resolve().parents for n in needed)
