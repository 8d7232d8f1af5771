"""Where things live in the repository: the one place that spells out a path.

Every module that needs the reference, a suite, the rubric or the course folder imports it from
here, so that moving a folder is a one-line change.
"""
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
