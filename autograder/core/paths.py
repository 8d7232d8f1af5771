"""Where things live in the repository: the one place that spells out a path.

Every module that needs the reference, a suite, the rubric or the course folder imports it from
here, so that moving a folder is a one-line change.
"""
import hashlib
import os
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
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
ORACLES = REPO / "autograder" / "testing" / "oracles.py"  # the notebook carries their source
# The product's code, by who receives it: a module is listed, by its path relative to REPO, where it
# ships. Anything else (a new module, a new package, the evaluation tooling in tools/) stays in the
# instructor's repository until someone lists it here (tests/test_release.py adds one of each).
# STUDENT_CODE: what a student's release runs: `check`, `rubric`, the public suite's support and the
# worker that holds the student's code (forked from the grade's worker template).
STUDENT_CODE = tuple(f"autograder/{name}.py" for name in (
    "__main__", "cli/__init__", "cli/check", "cli/rubric",
    "core/__init__", "core/paths", "core/toml", "core/rubric", "core/errors", "core/handin",
    "record/__init__", "record/grade", "record/scoring", "record/carry_forward", "record/results",
    "isolation/__init__", "isolation/host/__init__", "isolation/host/levels", "isolation/host/cuda_binds",
    "isolation/host/worker", "isolation/host/worker_template",
    "isolation/guest/__init__", "isolation/guest/confine", "isolation/guest/executor", "isolation/guest/reaper",
    "isolation/guest/wire", "isolation/guest/worker_main", "isolation/guest/refusal", "isolation/guest/template_main",
    "intake/__init__", "intake/submission", "intake/notebook", "intake/cell_names", "intake/route", "intake/knowledge",
    "testing/__init__", "testing/backends", "testing/calls", "testing/compare", "testing/checks", "testing/oracles",
    "testing/pytest_plugin",
    "integrity/__init__", "integrity/static_check",
    "feedback/__init__", "feedback/student_view", "feedback/pytest_plugin", "feedback/pictures",
    "feedback/diagnosis/__init__", "feedback/diagnosis/catalog", "feedback/diagnosis/knobs",
    "feedback/diagnosis/probes", "feedback/diagnosis/predictions",
    "pipeline/__init__", "pipeline/context", "pipeline/grading")) + (
    # model.py's results on the diagnosis's calls: the diagnosis without an implementation to read
    "autograder/feedback/diagnosis/predictions.safetensors",)
# GRADER_CODE: what grading a submission runs beyond a student's checks: the grader slots, the
# hidden suite's diagnosis, Gradescope's entry point and the timing part.
GRADER_CODE = STUDENT_CODE + tuple(f"autograder/{name}.py" for name in (
    "pipeline/grade_file", "runners/__init__", "runners/slot", "runners/gradescope")) + tuple(
    f"gpu_checks/{name}.py" for name in (
        "__init__", "checks", "grading", "harness", "participants", "report", "runqueue", "session",
        "settings", "stats", "timing_worker", "baselines/fused_mhsa"))
# What a grade depends on besides the submission, relative to REPO: the grading code, the suites, the
# reference (the timing part runs it beside the student's code), the knowledge questions, the rubric
# and pytest's settings. A Gradescope bundle ships exactly these, a cluster worker must hold exactly
# these (its checksum), and the gradebook's cache of isolated grades is keyed by them.
GRADER_FILES = (*GRADER_CODE, "tests_public", "tests_hidden", "reference", "course/notebook", "rubric.toml",
                "pyproject.toml")


def grader_files(root: Path = REPO) -> list[Path]:
    """Every file of GRADER_FILES under `root`, sorted, without Python's caches."""
    found = []
    for name in GRADER_FILES:
        top = root / name
        if not top.exists():  # a listed path that is missing: an error, not a smaller grader
            raise FileNotFoundError(f"{top} is listed in paths.GRADER_FILES but missing")
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
