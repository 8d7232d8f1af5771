"""Where things live in the repository: the one place that spells out a path.

Every module that needs the reference, a suite, the rubric or the course folder imports it from
here, so that moving a folder is a one-line change.
"""
import hashlib
import os
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO / "reference" / "mhsa.py"
ASSIGNMENT_DIR = REPO / "assignment"
ASSIGNMENT = ASSIGNMENT_DIR / "mhsa.py"
RUBRIC_FILE = REPO / "rubric.toml"
PYPROJECT = REPO / "pyproject.toml"
REQUIREMENTS = REPO / "requirements.txt"
SUITE_DIRS = {"public": REPO / "tests_public", "hidden": REPO / "tests_hidden"}
KNOWLEDGE_KEY = SUITE_DIRS["hidden"] / "knowledge_key.toml"
STAND_INS = SUITE_DIRS["hidden"] / "stand_ins.py"  # correct versions for error carried forward
COURSE = REPO / "course"
NOTEBOOK_SOURCES = COURSE / "notebook"
KNOWLEDGE_QUESTIONS = NOTEBOOK_SOURCES / "knowledge.toml"
CORPUS = REPO / "corpus"
DOCS = REPO / "docs"
# What a grade depends on besides the submission, relative to REPO: the grading code, the suites, the
# reference (the timing part runs it beside the student's code), the knowledge questions, the rubric
# and pytest's settings. A Gradescope bundle ships exactly these, a cluster worker must hold exactly
# these (its checksum), and the gradebook's cache of isolated grades is keyed by them.
GRADER_FILES = ("autograder", "gpu_checks", "tests_public", "tests_hidden", "reference", "course/notebook",
                "rubric.toml", "pyproject.toml")


def grader_files(root: Path = REPO) -> list[Path]:
    """Every file of GRADER_FILES under `root`, sorted, without Python's caches."""
    found = []
    for name in GRADER_FILES:
        top = root / name
        for path in sorted([top] if top.is_file() else top.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                found.append(path)
    return found


def grader_checksum(root: Path = REPO) -> str:
    """A checksum of the grader (the names and bytes of grader_files): two checkouts that agree on it
    grade alike."""
    digest = hashlib.sha256()
    for path in grader_files(root):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def put_environment_first(environ=os.environ) -> None:
    """Put the running interpreter's scripts folder (`.venv/bin`) first on PATH, once.

    Tools installed into the environment start one another by name: nbgrader's gradebook runs
    `alembic`, jupyter starts its kernels. An environment used without being activated
    (`.venv/bin/python -m autograder`, `.venv/bin/nbgrader`) would otherwise find those tools only
    where the caller's PATH happens to hold them, and a fresh machine holds none."""
    scripts = sysconfig.get_path("scripts")
    entries = environ.get("PATH", os.defpath).split(os.pathsep)
    if entries[0] != scripts:
        environ["PATH"] = os.pathsep.join([scripts, *(e for e in entries if e != scripts)])
