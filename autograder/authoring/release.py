"""The student release and the generated files that must match the reference."""
import ast
import re
import shutil
from pathlib import Path

from autograder.authoring import doc_numbers, predictions
from autograder.authoring.stubs import BEGIN, generate_stubs, solution_lines
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


PART_MARKER = re.compile(r"""mark\.part\(\s*["']([^"']*)["']""")  # how a test module tags its part


def course_problems(course_rubric=None) -> list:
    """What stops the course's files from making one assignment, each in a sentence: the parts of
    rubric.toml, the reference's solution regions, the tests' part markers, the notebook's test cells
    and the stand-ins of error carried forward must name the same parts and functions. Adding or
    dropping a part is editing those files; this says which one is left."""
    course_rubric = course_rubric or rubric.load()
    reference = REFERENCE.read_text()
    tree = ast.parse(reference)
    lines = reference.splitlines()
    written = {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))
               and any(BEGIN.match(line) for line in lines[node.lineno - 1:node.end_lineno])}
    parts = course_rubric.code_parts
    problems = [f"rubric.toml [parts.{name}] grades {function}, which reference/mhsa.py does not define with a "
                "solution region" for name, part in parts.items() for function in part.functions
                if function not in written]
    problems += [f"reference/mhsa.py: {function} has a solution region, but no part of rubric.toml grades it "
                 "(name it in a part's functions, or take it out of the reference)"
                 for function in sorted(written - set(course_rubric.contract))]
    tagged = {}
    for folder in paths.SUITE_DIRS.values():
        for module in sorted(folder.glob("test_*.py")):
            for name in PART_MARKER.findall(module.read_text()):
                tagged.setdefault(name, []).append(f"{folder.name}/{module.name}")
    problems += [f"{', '.join(modules)} tag part {name!r}, which rubric.toml does not grade (add [parts.{name}], "
                 "or remove the tests)" for name, modules in tagged.items() if name not in parts]
    problems += [f"rubric.toml [parts.{name}] has no tests: tag a module of tests_public/ or tests_hidden/ with "
                 f"pytestmark = pytest.mark.part(\"{name}\")" for name in parts if name not in tagged]
    problems += [f"rubric.toml [parts.{name}] has no notebook test cells: write "
                 f"{(notebook.SOURCES / 'tests' / f'{name}.py').relative_to(REPO)}"
                 for name in parts if not (notebook.SOURCES / "tests" / f"{name}.py").is_file()]
    built_on = [f for part in parts.values() for upstream in part.builds_on for f in parts[upstream].functions]
    if paths.STAND_INS.is_file():
        defined = {n.name for n in ast.parse(paths.STAND_INS.read_text()).body
                   if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        problems += [f"{paths.STAND_INS.relative_to(REPO)} has no correct version of {function}, which a part "
                     "builds on (error carried forward runs it in place of the student's)"
                     for function in dict.fromkeys(built_on) if function not in defined]
    return problems


def stale_files() -> list:
    """Generated files whose committed text differs from what the reference generates now, and the
    diagnosis's predictions when they differ from what its models compute now."""
    return [path for path, text in generated_files().items()
            if (REPO / path).is_symlink() or not (REPO / path).is_file() or (REPO / path).read_text() != text
            ] + ([predictions.RELATIVE] if predictions.stale() else [])


class StaleFiles(RuntimeError):
    """Nothing is built from a tree whose generated files are out of date, or whose parts disagree
    (course_problems): what students get, and the bundle that grades them, would follow different sources."""

    def __init__(self, what: str, stale: list, problems: list = ()):
        why = ("the course's files do not make one assignment: " + "; ".join(problems) if problems else
               f"generated files are out of date ({', '.join(stale)}); run `python -m autograder release --write` first")
        super().__init__(f"{what} is not built: {why}")


def refuse_stale(what: str) -> None:
    """Raise StaleFiles, naming `what` is not built and why, when the course's parts disagree or a
    generated file is out of date."""
    problems = course_problems()
    if problems:
        raise StaleFiles(what, [], problems)
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
