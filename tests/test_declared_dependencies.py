"""pyproject.toml's dependencies are all that each use needs, shown by running each use's commands
in a fresh environment that holds those dependencies and nothing else.

Every environment is made by setup_venv.py, as `make` makes .venv: pyproject.toml says what, and
requirements.txt, passed to pip as constraints, at which version.
  - the core (pyproject's dependencies, what `make demo` and students install): `grade`, `check` and a
    batch run; no package of an extra is in it, and each extra's commands fail in it, which shows that
    each check below reaches its extra's packages;
  - each extra alone on the core: `report` on a Gradescope export (PyYAML reads its metadata,
    copydetect compares its code, matplotlib draws the histograms); a batch on a local Dask cluster
    (`--scheduler`); the nbgrader course (`release --check`, which generates the notebooks with
    nbgrader, then `nbgrader autograde` of one notebook and the isolated regrade, `gradebook`);
  - an extra that leaves out a package its commands need fails its check (report without PyYAML);
  - the core with the oldest torch that pyproject admits (a real install from PyPI, a CUDA build of
    about 2.5 GB, run on the CPU): both suites pass on the reference, and the bundled examples get the
    same scores, test by test, as with the pinned torch. What that does not cover: the CUDA timing
    part (gpu_checks) and the extras' commands under the old torch, and the grader's own tests, which
    run with the pinned versions only.

The extras' environments share the core's files (hard links, each a whole environment of its own)
rather than install torch four times. A few minutes in all, most of it pip.
"""
import csv
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

import setup_venv
from autograder.core import toml
from autograder.core import rubric as rubric_file
from autograder.core.paths import PYPROJECT, REFERENCE, REPO, REQUIREMENTS
from autograder.intake import notebook
from autograder.isolation.host.levels import sandbox_available
from tests import fresh_machine

EXAMPLES = REPO / "examples" / "submissions"
PROJECT = toml.loads(PYPROJECT.read_text())["project"]
EXTRAS = PROJECT["optional-dependencies"]
INSTALL_S = 1800  # pip, for torch from PyPI on a slow day
COMMAND_S = 900


def names(requirements) -> set:
    """The distributions that requirement strings name, with what their extras add (dask[distributed]
    is dask and distributed) and without the project itself."""
    found = set()
    for line in requirements:
        requirement = Requirement(line)
        if canonicalize_name(requirement.name) != canonicalize_name(PROJECT["name"]):
            found |= {canonicalize_name(requirement.name), *map(canonicalize_name, requirement.extras)}
    return found


# ---- the declarations themselves ---------------------------------------------------------------------

def test_setup_venv_reads_the_requirement_lists_as_tomllib_does():
    assert setup_venv.declared() == PROJECT["dependencies"]
    for extra, requirements in EXTRAS.items():
        itself = [r for r in requirements if Requirement(r).name == PROJECT["name"]]
        inherited = [r for e in itself for name in Requirement(e).extras for r in EXTRAS[name]]
        expected = PROJECT["dependencies"] + [r for r in requirements if r not in itself] + inherited
        assert sorted(setup_venv.declared([extra])) == sorted(dict.fromkeys(expected)), extra


def test_setup_venv_refuses_a_list_it_cannot_read():
    with pytest.raises(ValueError, match="dependencies"):
        setup_venv.string_arrays('dependencies = [\n    "torch",\n    \'numpy\',\n]\n')
    assert setup_venv.string_arrays('x = [ # a ] comment\n "a[b]>=1",  # "c"\n "d"]\n') == {"x": ["a[b]>=1", "d"]}


def pins() -> dict:
    """requirements.txt: name -> [Requirement], one per Python version the markers separate."""
    found = {}
    for line in REQUIREMENTS.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            requirement = Requirement(line)
            found.setdefault(canonicalize_name(requirement.name), []).append(requirement)
    return found


def pinned_version(name: str) -> Version:
    """The version requirements.txt pins for `name` on this Python."""
    (pin,) = [p for p in pins()[canonicalize_name(name)] if p.marker is None or p.marker.evaluate()]
    (specifier,) = pin.specifier
    return Version(specifier.version)


def test_requirements_pins_exactly_the_declared_packages_within_the_declared_ranges():
    declared = [Requirement(r) for r in setup_venv.declared(list(EXTRAS))]
    pinned = pins()
    assert set(pinned) == names(map(str, declared)), "requirements.txt pins what pyproject.toml declares, no more"
    for requirement in declared:
        for pin in pinned[canonicalize_name(requirement.name)]:
            assert not pin.extras, f"{pin}: pip refuses extras in a constraints file"
            (operator, version), = [(s.operator, s.version) for s in pin.specifier]
            assert operator == "==", f"{pin} is not a pin"
            assert requirement.specifier.contains(version, prereleases=True), f"{pin} is outside {requirement}"


# ---- environments ------------------------------------------------------------------------------------

@dataclass
class Env:
    path: Path

    def run(self, *args, cwd=REPO, check=True, timeout=COMMAND_S) -> subprocess.CompletedProcess:
        """`ENV/bin/python ARGS` as typed in a new shell on a fresh machine, without activating it."""
        result = subprocess.run([str(self.path / "bin" / "python"), *map(str, args)], cwd=cwd, capture_output=True,
                                text=True, env=fresh_machine.ENV, timeout=timeout)
        assert not check or result.returncode == 0, output(result)
        return result

    def distributions(self) -> set:
        listed = self.run("-c", "import importlib.metadata as m, json; "
                                "print(json.dumps([d.metadata['Name'] for d in m.distributions()]))")
        return {canonicalize_name(name) for name in json.loads(listed.stdout)}


def output(result) -> str:
    return f"{result.args}\nexit {result.returncode}\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"


def set_up(env: Path, extras=(), setup_script=REPO / "setup_venv.py") -> Env:
    args = [sys.executable, setup_script, env, *(["--extras", ",".join(extras)] if extras else [])]
    made = subprocess.run(list(map(str, args)), capture_output=True, text=True, timeout=INSTALL_S)
    assert made.returncode == 0, output(made)
    return Env(env)


def layered(core: Env, path: Path) -> Env:
    """A whole environment of its own that starts as a copy of `core`, its files hard links to the
    core's: pip replaces files, never writes into them, so the core stays as it was."""
    shutil.copytree(core.path, path, symlinks=True, copy_function=os.link)
    return Env(path)


@pytest.fixture(scope="module")
def envs(tmp_path_factory):
    return tmp_path_factory.mktemp("declared")


@pytest.fixture(scope="module")
def core(envs):
    return set_up(envs / "core")


@pytest.fixture(scope="module")
def extra(envs, core):
    """name -> that extra's environment: the core and the extra, set up on first use."""
    made = {}

    def get(name):
        if name not in made:
            made[name] = set_up(layered(core, envs / name).path, [name]).path
        return Env(made[name])
    return get


def grades(folder: Path) -> dict:
    with open(folder / "grades.csv") as table:
        return {row["submission"]: row for row in csv.DictReader(table)}


def by_test(folder: Path) -> dict:
    """Per submission: its score, status and each test's status and score (not times, not wording)."""
    found = {}
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text())
        found[path.stem] = (data["score"], data["extra_data"]["status"],
                            sorted((t["name"], t.get("status"), t.get("score")) for t in data["tests"]))
    return found


def batch(env: Env, out: Path, *extra_args) -> subprocess.CompletedProcess:
    return env.run("-m", "autograder", "grade", EXAMPLES, "--batch", "--out", out, "--jobs", "2", *extra_args)


@pytest.fixture(scope="module")
def core_batch(core, envs):
    out = envs / "core-batch"
    batch(core, out)
    return out


# ---- the core: what `make demo` installs ---------------------------------------------------------------

def test_the_core_grades_one_file_checks_it_and_grades_a_batch(core, core_batch):
    graded = core.run("-m", "autograder", "grade", REFERENCE)
    scored = re.search(r"^mhsa: ([\d.]+) / ([\d.]+) points", graded.stdout, re.M)
    assert scored and float(scored[1]) == float(scored[2]) > 0, output(graded)
    checked = core.run("-m", "autograder", "check", REFERENCE)
    scored = re.search(r"^mhsa: ([\d.]+) / ([\d.]+) points from the public tests", checked.stdout, re.M)
    assert scored and float(scored[1]) == float(scored[2]) > 0, output(checked)
    rows = grades(core_batch)
    assert {row["status"] for row in rows.values()} == {"graded"} and len(rows) == 3, rows
    # A batch grades collected work, knowledge check included; a lone .py holds no answers: 0 of it.
    knowledge_points = rubric_file.load().parts["knowledge"].points
    assert float(rows["reference_copy"]["knowledge"]) == 0
    assert float(rows["reference_copy"]["score"]) + knowledge_points == float(rows["reference_copy"]["max_score"]) > 0
    assert float(rows["stubs"]["score"]) == 0


def test_the_core_holds_no_package_that_only_an_extra_declares(core):
    only_extras = names(setup_venv.declared(list(EXTRAS))) - names(PROJECT["dependencies"])
    assert only_extras >= {"dask", "distributed", "nbgrader", "ipykernel", "matplotlib", "vermin", "pyyaml"}
    assert core.distributions() & only_extras == set()


def gradescope_export(root: Path, results: Path) -> Path:
    """A Gradescope export of two students who hand in the same code: their results from the core's
    batch, their code, and submission_metadata.yml naming them."""
    export = root / "gradescope-export"
    for folder, name in (("submission_1001", "reference_copy"), ("submission_1002", "buggy_no_scale")):
        (export / folder / "results").mkdir(parents=True)
        shutil.copy(results / f"{name}.json", export / folder / "results" / "results.json")
        shutil.copy(REFERENCE, export / folder / "mhsa.py")
    (export / "submission_metadata.yml").write_text(
        "submission_1001:\n  :submitters:\n  - :name: Ada Lovelace\n    :sid: '111'\n"
        "submission_1002:\n  :submitters:\n  - :name: Alan Turing\n    :sid: '222'\n")
    return export


def report(env: Env, export: Path, out: Path, check=True) -> subprocess.CompletedProcess:
    return env.run("-m", "autograder", "report", export, "--out", out, check=check)


def run_cluster_batch(env: Env, out: Path, logs: Path) -> subprocess.CompletedProcess:
    """A batch of the examples on a Dask scheduler with one worker on localhost, all run by `env`."""
    logs.mkdir(parents=True, exist_ok=True)
    driver = ("import subprocess, sys\n"
              "from pathlib import Path\n"
              "from autograder.runners.cluster import LocalCluster\n"
              f"cluster = LocalCluster(Path({str(logs)!r}), workers=1)\n"
              "try:\n"
              f"    done = subprocess.run([sys.executable, '-m', 'autograder', 'grade', {str(EXAMPLES)!r}, '--batch',\n"
              f"                          '--out', {str(out)!r}, '--jobs', '1', '--scheduler', cluster.address])\n"
              "finally:\n"
              "    cluster.close()\n"
              "sys.exit(done.returncode)\n")
    return env.run("-c", driver, check=False)


def test_each_extras_commands_fail_in_the_core_alone(core, core_batch, tmp_path):
    """The checks below reach what their extras add: without it, each fails."""
    without_report = report(core, gradescope_export(tmp_path, core_batch), tmp_path / "report", check=False)
    assert without_report.returncode != 0 and "No module named 'yaml'" in without_report.stderr, output(without_report)
    without_dask = core.run("-m", "autograder", "grade", EXAMPLES, "--batch", "--out", tmp_path / "cluster",
                            "--scheduler", "tcp://127.0.0.1:9", check=False)
    assert without_dask.returncode != 0 and "needs Dask" in without_dask.stdout + without_dask.stderr, \
        output(without_dask)
    without_course = core.run("-m", "autograder", "release", "--check", check=False)
    missing = re.search(r"No module named '(\w+)", without_course.stderr)
    assert without_course.returncode != 0 and missing and missing[1] in names(EXTRAS["course"]), output(without_course)


# ---- each extra alone on the core ----------------------------------------------------------------------

def check_report(env: Env, core_batch: Path, root: Path) -> subprocess.CompletedProcess:
    out = root / "report"
    made = report(env, gradescope_export(root, core_batch), out, check=False)
    if made.returncode == 0:
        with open(out / "report-students.csv") as table:
            assert {row[0] for row in csv.reader(table)} >= {"Ada Lovelace", "Alan Turing"}  # from the YAML
        with open(out / "report-similarity.csv") as table:
            assert [row[:2] for row in csv.reader(table)][1:] == [["Ada Lovelace", "Alan Turing"]]  # copydetect
        assert '<img class="plot"' in (out / "report.html").read_text()  # matplotlib's histograms
    return made


def test_report_extra_reads_a_gradescope_export_compares_code_and_draws_the_page(extra, core_batch, tmp_path):
    made = check_report(extra("report"), core_batch, tmp_path)
    assert made.returncode == 0, output(made)


def test_an_extra_that_leaves_out_a_needed_package_fails_its_check(envs, core, core_batch, tmp_path):
    """A scratch copy of the project whose report extra forgets PyYAML."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    for name in ("setup_venv.py", "requirements.txt"):
        shutil.copy(REPO / name, scratch / name)
    forgetful = PYPROJECT.read_text().replace('"PyYAML>=6", ', "")
    assert forgetful != PYPROJECT.read_text()
    (scratch / "pyproject.toml").write_text(forgetful)
    env = set_up(layered(core, envs / "report-without-yaml").path, ["report"], scratch / "setup_venv.py")
    assert "pyyaml" not in env.distributions() and {"copydetect", "matplotlib"} <= env.distributions()
    made = check_report(env, core_batch, tmp_path)
    assert made.returncode != 0 and "No module named 'yaml'" in made.stderr, output(made)


def test_cluster_extra_grades_a_batch_on_a_dask_cluster_as_the_local_batch_does(extra, core_batch, tmp_path):
    if not sandbox_available():  # as tests/test_cluster.py: .ci/run installs bubblewrap where it can
        pytest.skip("cluster mode needs the sandbox level (bubblewrap)")
    out = tmp_path / "cluster"
    done = run_cluster_batch(extra("cluster"), out, tmp_path / "logs")
    assert done.returncode == 0, output(done)
    assert {name: (row["score"], row["status"]) for name, row in grades(out).items()} == \
        {name: (row["score"], row["status"]) for name, row in grades(core_batch).items()}


def test_course_extra_generates_autogrades_and_regrades_a_notebook(extra, tmp_path):
    course_env = extra("course")
    course_env.run("-m", "autograder", "release", "--check")  # the notebooks, generated again with nbgrader
    # nbgrader on a copy of course/ beside a link to the grader, as the repository lays it out.
    (tmp_path / "autograder").symlink_to(REPO / "autograder")
    root = tmp_path / "course"
    shutil.copytree(REPO / "course", root, ignore=shutil.ignore_patterns(
        "release", "submitted", "autograded", "feedback", "downloaded", "isolated", "gradebook.db", "__pycache__",
        ".ipynb_checkpoints"))
    assignment = notebook.ASSIGNMENT
    course_env.run("-m", "nbgrader", "generate_assignment", assignment, cwd=root)
    submitted = root / "submitted" / "ada" / assignment / f"{assignment}.ipynb"
    submitted.parent.mkdir(parents=True)
    shutil.copy(root / "source" / assignment / f"{assignment}.ipynb", submitted)  # the solution, figure included
    course_env.run("-m", "nbgrader", "autograde", assignment, cwd=root)
    course_env.run("-m", "autograder", "gradebook", "--course", root, "--student", "ada")
    isolated = json.loads((root / "isolated" / assignment / "ada.json").read_text())
    assert isolated["score"] > 0, isolated
    course_env.run("-m", "nbgrader", "export", "--to", "grades.csv", cwd=root)
    with open(root / "grades.csv") as table:
        exported = {row["student_id"]: row for row in csv.DictReader(table)}
    assert float(exported["ada"]["score"]) > 0, exported


# ---- the oldest torch pyproject admits -------------------------------------------------------------------

def minimum_torch() -> Version:
    torch, = [Requirement(r) for r in PROJECT["dependencies"] if Requirement(r).name == "torch"]
    (operator, version), = [(s.operator, s.version) for s in torch.specifier]
    assert operator == ">=", torch
    return Version(version)


def test_the_oldest_torch_allowed_grades_as_the_pinned_one(envs, core, core_batch):
    oldest = layered(core, envs / "oldest-torch")
    # Not through requirements.txt, which pins the newest: the oldest release that pyproject admits.
    oldest.run("-m", "pip", "install", "--disable-pip-version-check", "--quiet", f"torch=={minimum_torch()}",
               timeout=INSTALL_S)
    version = oldest.run("-c", "import torch; print(torch.__version__)").stdout.strip()
    assert Version(Version(version).public) == minimum_torch(), version
    oldest.run("-m", "pytest", "tests_public", "tests_hidden", "--impl", REFERENCE, "-q")
    out = envs / "oldest-torch-batch"
    batch(oldest, out)
    pinned = by_test(core_batch)
    assert len(pinned) == 3 and all(tests for _, _, tests in pinned.values()), pinned
    assert by_test(out) == pinned
    # The copy's install replaced its own files only: the core still has the pinned torch.
    core_version = core.run("-c", "import torch; print(torch.__version__)").stdout.strip()
    assert Version(Version(core_version).public) == pinned_version("torch"), core_version
