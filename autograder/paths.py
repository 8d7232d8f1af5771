"""Where things live in the repository: the one place that spells out a path.

Every module that needs the reference, a suite, the rubric or the course folder imports it from
here, so that moving a folder is a one-line change.
"""
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
COURSE = REPO / "course"
NOTEBOOK_SOURCES = COURSE / "notebook"
KNOWLEDGE_QUESTIONS = NOTEBOOK_SOURCES / "knowledge.toml"
CORPUS = REPO / "corpus"
DOCS = REPO / "docs"


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
