"""The project's own environment: `make demo` and `make test`'s setup on a fresh clone with Debian's
/usr/bin/python3 (the demo's: pyproject.toml's core dependencies, no extra), the student release's
setup, the oldest supported Python (requires-python), and TOML reading without the standard
library's tomllib.

The fresh-clone tests clone the committed repository (uncommitted edits are not in it) and build two
virtual environments, one for the clone and one for its student release: a few minutes in all.
"""
import csv
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import setup_venv
from autograder.core import rubric as rubric_file
from autograder.core import toml
from autograder.core.paths import PYPROJECT, REFERENCE, REPO, REQUIREMENTS

SYSTEM_PYTHON = Path("/usr/bin/python3")  # Debian's and Ubuntu's own, which PEP 668 protects
# Every folder of code that students, instructors or graders run.
SHIPPED = ["autograder", "gpu_checks", "tests_public", "tests_hidden", "reference", "assignment", "course",
           "corpus", "examples", "benchmarks", "setup_venv.py"]
# A submission that does not compile on purpose, to test the grader: no Python runs it.
NOT_CODE = r"examples/adversarial/cases/syntax_error\.py$"


def run(args, cwd, env=None, timeout=1200):
    return subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=None if env is None else {**os.environ, **env})


def make(target, cwd, python=SYSTEM_PYTHON, env=None):
    """`make TARGET` as a user types it in a new shell, with `python` creating the virtual environment.
    Variables of the `make test` that runs this test (VENV=..., flags) stay out of it."""
    outer_make = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")
    inherited = {k: v for k, v in os.environ.items() if k not in outer_make}
    return subprocess.run(["make", target, f"PYTHON={python}"], cwd=cwd, capture_output=True, text=True,
                          timeout=1800, env={**inherited, **(env or {})})


def output(result):
    return f"exit {result.returncode}\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"


# ---- the oldest supported Python ---------------------------------------------------------------------

def required_python() -> str:
    return toml.loads(PYPROJECT.read_text())["project"]["requires-python"].removeprefix(">=")


def newer_python_needed(paths, cwd):
    """vermin over `paths`: fails, naming file and feature, where code needs a newer Python than
    requires-python. Imports guarded for older versions carry a `# novermin` comment that says so."""
    vermin = Path(sysconfig.get_path("scripts")) / "vermin"
    # Pessimistic: code this Python cannot even parse counts as needing a newer one.
    return run([vermin, "--no-tips", "--violations", "--pessimistic", f"--target={required_python()}-",
                "--exclude-regex", NOT_CODE, *paths], cwd=cwd)


def test_shipped_code_runs_on_the_oldest_python_that_pyproject_requires():
    assert required_python() == "3.10"
    result = newer_python_needed(SHIPPED, REPO)
    assert result.returncode == 0, output(result)


def test_version_check_catches_code_that_needs_a_newer_python(tmp_path):
    (tmp_path / "reader.py").write_text("import tomllib\n")
    (tmp_path / "groups.py").write_text("try:\n    pass\nexcept* ValueError:\n    pass\n")
    (tmp_path / "alias.py").write_text("type Vector = list[float]\n")
    (tmp_path / "fine.py").write_text("match 1:\n    case 1:\n        pass\n")  # 3.10: allowed
    result = newer_python_needed(["reader.py", "groups.py", "alias.py", "fine.py"], tmp_path)
    assert result.returncode == 1
    assert "'tomllib' module requires !2, 3.11" in result.stdout
    assert "groups.py" in result.stdout and "alias.py" in result.stdout and "fine.py" not in result.stdout


# ---- TOML without tomllib (Python 3.10) -------------------------------------------------------------

# Run in a child: the project's loaders read the rubric, the knowledge key and every corpus manifest.
# With HIDE_TOMLLIB first, `import tomllib` fails as it does on Python 3.10.
LOAD_EVERYTHING = """
import json, sys
from autograder.intake import knowledge; from autograder.core import rubric
from tools import corpus
loaded = {"rubric": repr(rubric.load()), "knowledge_key": knowledge.load_key(),
          "mutants": [repr(m) for m in corpus.load_mutants()]}
reader = sys.modules["autograder.core.toml"].loads.__module__.split(".")[0]
print(json.dumps({"reader": reader, "loaded": loaded}))
"""
HIDE_TOMLLIB = """
import sys
class HideTomllib:
    def find_spec(self, name, path=None, target=None):
        if name == "tomllib" or name.startswith("tomllib."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, HideTomllib())
"""


def pinned(package: str) -> str:
    """`package==version` as requirements.txt pins it, without its environment marker."""
    lines = [line.split(";")[0].strip() for line in REQUIREMENTS.read_text().splitlines()]
    return next(line for line in lines if line.startswith(f"{package}=="))


def test_toml_files_read_the_same_with_the_tomli_backport(tmp_path):
    backport = tmp_path / "site"
    installed = run([sys.executable, "-m", "pip", "install", "--quiet", "--target", backport,
                     pinned("tomli")], cwd=tmp_path)
    assert installed.returncode == 0, output(installed)
    env = {"PYTHONPATH": os.pathsep.join([str(REPO), str(backport)])}
    fallback = run([sys.executable, "-c", HIDE_TOMLLIB + LOAD_EVERYTHING], cwd=REPO, env=env)
    assert fallback.returncode == 0, output(fallback)
    hidden = run([sys.executable, "-c", HIDE_TOMLLIB + "import tomllib"], cwd=REPO, env=env)
    assert "No module named 'tomllib'" in hidden.stderr, "the blocker must hide tomllib"
    fallback = json.loads(fallback.stdout)
    assert fallback["reader"] == "tomli"
    if sys.version_info >= (3, 11):
        standard = run([sys.executable, "-c", LOAD_EVERYTHING], cwd=REPO, env=env)
        assert standard.returncode == 0, output(standard)
        standard = json.loads(standard.stdout)
        assert standard["reader"] == "tomllib"
        assert fallback["loaded"] == standard["loaded"]
    loaded = fallback["loaded"]
    assert "Part(name='sdpa'" in loaded["rubric"] and len(loaded["mutants"]) >= 50 and loaded["knowledge_key"]


# ---- a fresh clone, set up with Debian's Python -------------------------------------------------------

@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    if not SYSTEM_PYTHON.is_file() or shutil.which("make") is None:
        if os.environ.get("CI"):
            pytest.fail(f"CI needs {SYSTEM_PYTHON} and make to test the setup a user runs")
        pytest.skip(f"no {SYSTEM_PYTHON} or no make: not a Debian-like system")
    path = tmp_path_factory.mktemp("fresh") / "mhsa"
    cloned = run(["git", "clone", "--quiet", REPO, path], cwd=path.parent)
    assert cloned.returncode == 0, output(cloned)
    return path


def test_make_sets_up_a_venv_with_the_system_python_and_the_cores_pins_only(clone):
    setup = make("setup", clone)
    assert setup.returncode == 0, output(setup)
    assert "externally-managed-environment" not in setup.stderr
    config = (clone / ".venv" / "pyvenv.cfg").read_text()
    assert f"home = {SYSTEM_PYTHON.parent}" in config, config
    core = [Requirement(r).name for r in setup_venv.declared()]
    check = run([clone / ".venv/bin/python", "-c", CHECK_PINS, clone / "requirements.txt", *core], cwd=clone)
    assert check.returncode == 0, output(check)
    # `make demo` installs what grading needs, none of the extras (nbgrader, Dask, matplotlib ...).
    extras_only = {Requirement(r).name for r in setup_venv.declared(["dev"])} - set(core)
    assert extras_only, "pyproject.toml declares extras"
    for name in extras_only:
        absent = run([clone / ".venv/bin/python", "-c", f"import importlib.metadata as m; m.version({name!r})"],
                     cwd=clone)
        assert absent.returncode == 1 and "PackageNotFoundError" in absent.stderr, output(absent)
    again = make("setup", clone)
    assert again.returncode == 0 and "Installing" not in again.stdout, output(again)


# Each named package holds the version the file pins for it (markers evaluated, +cpu builds match).
CHECK_PINS = """
import sys
from importlib.metadata import version
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
wanted = {canonicalize_name(name) for name in sys.argv[2:]}
wrong = []
for line in open(sys.argv[1]).read().splitlines():
    line = line.split("#")[0].strip()
    if line:
        req = Requirement(line)
        if canonicalize_name(req.name) in wanted and (req.marker is None or req.marker.evaluate()):
            if not req.specifier.contains(version(req.name), prereleases=True):
                wrong.append(f"{req.name} {version(req.name)} is not {req.specifier}")
sys.exit("\\n".join(wrong) or None)
"""


def test_make_demo_grades_the_examples_in_the_venv(clone):
    demo = make("demo", clone)
    assert demo.returncode == 0, output(demo)
    with open(clone / "grading-out/examples/grades.csv") as table:
        rows = {row["submission"]: row for row in csv.DictReader(table)}
    assert set(rows) == {"reference_copy", "stubs", "buggy_no_scale"}, output(demo)
    assert {row["status"] for row in rows.values()} == {"graded"}, rows
    reference, stubs, buggy = rows["reference_copy"], rows["stubs"], rows["buggy_no_scale"]
    # Every code part graded without CUDA (timing is blank) earns full marks; a batch grades collected
    # work, so the knowledge check is scored, and a lone .py holds no answers: 0 of it.
    assert reference["timing"] == "" and float(reference["knowledge"]) == 0
    code = {name: part.points for name, part in rubric_file.load().parts.items()
            if part.functions and name != "timing"}
    assert {name: float(reference[name]) for name in code} == code, reference
    assert float(reference["score"]) == sum(code.values())
    assert float(stubs["score"]) == 0
    assert 0 < float(buggy["score"]) < float(buggy["max_score"])


def test_student_release_sets_up_with_the_system_python(clone, tmp_path):
    built = make("release", clone)
    assert built.returncode == 0, output(built)
    release = tmp_path / "student-release"
    shutil.move(clone / "build" / "student-release", release)  # out of the clone, as students get it
    assert (release / "setup_venv.py").read_text() == (clone / "setup_venv.py").read_text()
    # The student README's two commands, then its first check: every public test fails on the stubs
    # with NotImplementedError, and the same tests pass on a correct solution.
    setup = run([SYSTEM_PYTHON, "setup_venv.py"], cwd=release)
    assert setup.returncode == 0, output(setup)
    stubs = run(["bash", "-c", "source .venv/bin/activate && pytest tests_public -q -x"], cwd=release)
    assert stubs.returncode == 1 and "NotImplementedError" in stubs.stdout, output(stubs)
    solution = tmp_path / "solution" / "mhsa.py"
    solution.parent.mkdir()
    shutil.copy(REFERENCE, solution)
    solved = run([".venv/bin/python", "-m", "pytest", "tests_public/test_sdpa.py", "--impl", solution, "-q"],
                 cwd=release)
    assert solved.returncode == 0, output(solved)


def test_a_dependency_added_to_pyproject_refreshes_the_venv(clone):
    pyproject = clone / "pyproject.toml"
    original = pyproject.read_text()
    absent = "vermin"  # an extra's (dev): pinned in requirements.txt, not in the core
    assert make("setup", clone).returncode == 0
    assert run([clone / ".venv/bin/python", "-c", f"import {absent}"], cwd=clone).returncode == 1
    pyproject.write_text(original.replace("dependencies = [\n", f'dependencies = [\n    "{absent}",\n', 1))
    try:
        refreshed = make("setup", clone)
        assert refreshed.returncode == 0 and "Installing" in refreshed.stdout, output(refreshed)
        installed = run([clone / ".venv/bin/python", "-c", f"import importlib.metadata as m; print(m.version({absent!r}))"],
                        cwd=clone)
        assert installed.stdout.strip() == pinned(absent).split("==")[1], output(installed)  # at the pinned version
    finally:
        pyproject.write_text(original)


def test_a_python_without_venv_support_stops_with_one_line_saying_what_to_install(tmp_path):
    for name in ("Makefile", "setup_venv.py", "requirements.txt", "pyproject.toml"):
        shutil.copy(REPO / name, tmp_path / name)
    # As on Debian without python3-venv: the interpreter has no ensurepip.
    blocker = tmp_path / "no-ensurepip" / "ensurepip"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'ensurepip'\")\n")
    result = make("setup", tmp_path, python=sys.executable, env={"PYTHONPATH": str(blocker.parent)})
    assert result.returncode != 0
    ours = [line for line in result.stderr.splitlines() if not line.startswith("make")]
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert len(ours) == 1 and f"apt-get install python{version}-venv" in ours[0], output(result)
    assert "Traceback" not in result.stdout + result.stderr
    assert not (tmp_path / ".venv").exists()
