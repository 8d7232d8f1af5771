"""The student release and the generated files that must match the reference."""
import shutil
from pathlib import Path

from autograder.authoring import doc_numbers, predictions
from autograder.authoring.stubs import generate_stubs, solution_lines
from autograder.core import paths, rubric
from autograder.core.paths import REFERENCE, REPO
from autograder.intake import notebook


RUBRIC_REFERENCE = "docs/rubric.md"  # every key of rubric.toml, from the schema in autograder/core/rubric.py


def generated_files() -> dict:
    """Committed file (relative path) -> the text the single source of truth generates for it: the
    reference's stubs and notebooks, the rubric's reference page, and the rubric's numbers in the
    handout and the docs (autograder/authoring/doc_numbers.py)."""
    reference = REFERENCE.read_text()
    stubs = generate_stubs(reference)
    course_rubric = rubric.load()
    # The bundled examples are real files, not links: a grader never follows a link (it could lead
    # to the reference), so linked examples would be skipped.
    return {"assignment/mhsa.py": stubs, "examples/submissions/stubs.py": stubs,
            "examples/submissions/reference_copy.py": reference,
            RUBRIC_REFERENCE: rubric.describe(),
            **notebook.generated_files(course_rubric), **doc_numbers.generated_files(course_rubric)}


def stale_files() -> list:
    """Generated files whose committed text differs from what the reference generates now, and the
    diagnosis's predictions when they differ from what its models compute now."""
    return [path for path, text in generated_files().items()
            if (REPO / path).is_symlink() or not (REPO / path).is_file() or (REPO / path).read_text() != text
            ] + ([predictions.RELATIVE] if predictions.stale() else [])


class StaleFiles(RuntimeError):
    """Nothing is built from a tree whose generated files are out of date: what students get, and the
    bundle that grades them, would follow different sources."""

    def __init__(self, what: str, stale: list):
        super().__init__(f"{what} is not built: generated files are out of date ({', '.join(stale)}); "
                         "run `python -m autograder release --write` first")


def refuse_stale(what: str) -> None:
    """Raise StaleFiles, naming `what` is not built and why, when a generated file is out of date."""
    stale = stale_files()
    if stale:
        raise StaleFiles(what, stale)


def write_generated() -> list:
    written = []
    for path, text in generated_files().items():
        target = REPO / path
        if target.is_symlink() or not target.is_file() or target.read_text() != text:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.unlink(missing_ok=True)
            target.write_text(text)
            written.append(path)
    if predictions.stale():
        predictions.write()
        written.append(predictions.RELATIVE)
    return written


# What the student release holds, relative to the repository; folders are copied whole. Of the
# grader's code only paths.STUDENT_CODE: `grade` needs the hidden tests and the knowledge key, which a
# student release never holds, and the CLI leaves out a command whose module is missing (autograder/cli/__init__.py).
RELEASE_CONTENT = ["assignment", "tests_public", *paths.STUDENT_CODE, "rubric.toml", "pyproject.toml",
                   "requirements.txt", "setup_venv.py"]
NEVER_RELEASED = ["reference", "tests_hidden", "course", "examples", "docs", "tests", "gpu_checks", "tools"]


def build_release(out: Path) -> Path:
    """Write the student-facing repository to `out` (which must not exist)."""
    out = Path(out)
    if out.exists():
        raise FileExistsError(f"{out} already exists; choose a new folder")
    refuse_stale("the student release")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints")
    for item in RELEASE_CONTENT:
        source = REPO / item
        if source.is_dir():
            shutil.copytree(source, out / item, ignore=ignore)
        else:  # a file; one listed but missing is an error, not a smaller release
            (out / item).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, out / item)
    from autograder.intake import knowledge

    (out / knowledge.RELEASED_QUESTIONS.relative_to(REPO)).write_text(
        knowledge.released_questions(knowledge.questions()))
    student_readme = REPO / "docs" / "student-README.md"
    shutil.copy2(student_readme, out / "README.md")
    leaks = find_leaks(out)
    if leaks:
        shutil.rmtree(out)
        raise RuntimeError("the release would leak instructor material:\n" + "\n".join(leaks))
    return out


def find_leaks(root: Path) -> list:
    """Instructor-only material found under `root`: folders, solution markers, solution lines."""
    root = Path(root)
    leaks = [f"{name}/ is present" for name in NEVER_RELEASED if (root / name).exists()]
    secrets = solution_lines(REFERENCE.read_text())
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.suffix not in (".py", ".md", ".ipynb", ".txt", ".toml", ".json", ".cfg"):
            continue
        text = path.read_text(errors="replace")
        relative = path.relative_to(root)
        if "BEGIN SOLUTION" in text and relative.as_posix() != "autograder/authoring/stubs.py":
            leaks.append(f"{relative}: contains a solution region marker")
        if "BEGIN HIDDEN TESTS" in text and relative.as_posix() != "autograder/intake/notebook.py":
            leaks.append(f"{relative}: contains hidden tests")
        leaks += [f"{relative}: contains the solution line {line!r}" for line in secrets if line in text]
    return leaks
