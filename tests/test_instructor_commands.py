"""The instructor's commands run as an instructor types them: one without its extra says in one line
what to install, `release OUT` and `gradescope` refuse a stale tree in one line and write nothing, and
the docs name the bundle that `make gradescope` writes."""
import re
import shutil
import subprocess
import sys

import pytest

from autograder import cli
from autograder.core.paths import PYPROJECT, REPO
from autograder.core.toml import loads
from tests import fresh_machine

IGNORE = shutil.ignore_patterns(".git", "__pycache__", "build", "grading-out", ".venv", "*.db")


def autograder(args, cwd, **env):
    """`python -m autograder ARGS` in `cwd`, as typed on a fresh machine (with `env` added)."""
    return subprocess.run([sys.executable, "-m", "autograder", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=600, env=fresh_machine.ENV | env)


def one_line(result) -> str:
    """What the command printed, asserted to be one line and no traceback."""
    lines = (result.stdout + result.stderr).splitlines()
    assert len(lines) == 1 and "Traceback" not in lines[0], result.stdout + result.stderr
    return lines[0]


def without(tmp_path, module: str) -> dict:
    """The environment of a Python in which MODULE is not installed: not found, and `import MODULE`
    fails as it does where it is missing."""
    site = tmp_path / "site"
    site.mkdir(parents=True)
    (site / "sitecustomize.py").write_text(
        "import sys\n"
        "from importlib.machinery import PathFinder\n\n\n"
        "class Without(PathFinder):\n"
        "    @classmethod\n"
        "    def find_spec(cls, name, path=None, target=None):\n"
        f"        return None if name.split('.')[0] == {module!r} else super().find_spec(name, path, target)\n\n\n"
        "sys.meta_path[sys.meta_path.index(PathFinder)] = Without\n")
    return {"PYTHONPATH": str(site)}


def unloadable(tmp_path, module: str) -> dict:
    """The environment of a Python in which MODULE is installed but cannot load what it needs."""
    shim = tmp_path / "shim" / module
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'needed'\", name='needed')\n")
    return {"PYTHONPATH": str(shim.parent)}


ARGS = {"release": ["--check"], "gradescope": ["{tmp}/bundle.zip"], "gradebook": ["--course", "{tmp}/course"],
        "report": ["{tmp}/results"]}


@pytest.mark.parametrize("command", sorted(cli.NEEDS_EXTRA))
def test_a_command_without_its_extra_says_in_one_line_which_to_install(command, tmp_path):
    extra, modules = cli.NEEDS_EXTRA[command]
    for module in modules:
        result = autograder([command, *(a.format(tmp=tmp_path) for a in ARGS[command])], REPO,
                            **without(tmp_path / module, module))
        assert result.returncode == 2
        line = one_line(result)
        assert line.startswith(f"{command} needs the {extra} extra ") and f"No module named '{module}'" in line, line
        assert f"make setup-{extra}" in line and f"python3 setup_venv.py --extras {extra}" in line, line
    assert not (tmp_path / "bundle.zip").exists()


def test_the_extra_is_found_before_a_command_not_imported():
    """Importing nbgrader takes seconds: the gradebook imports it in its own time, while its grader
    slots start and grade, not before it begins."""
    check = ("import sys; from autograder import cli; assert cli.missing_extra('gradebook') is None; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('nbgrader', 'nbformat', 'torch')))")
    result = subprocess.run([sys.executable, "-c", check], cwd=REPO, capture_output=True, text=True, timeout=60,
                            env=fresh_machine.ENV)
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stdout + result.stderr


def test_a_module_of_the_extra_that_cannot_load_what_it_needs_gets_the_same_line(tmp_path):
    """Before a command only the extra's modules are found (importing nbgrader takes seconds the
    gradebook spends starting its slots); one found that does not import is named where it is met."""
    result = autograder(["gradebook", "--course", tmp_path / "course"], REPO, **unloadable(tmp_path, "nbgrader"))
    assert result.returncode == 2
    line = one_line(result)
    assert line.startswith("gradebook needs the course extra ") and "No module named 'needed'" in line, line


def test_each_extra_a_command_needs_is_declared_and_installed_as_the_readme_says():
    declared = loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    makefile, readme = (REPO / "Makefile").read_text(), (REPO / "README.md").read_text()
    extras = re.search(r"^EXTRAS := (.*)$", makefile, re.M)[1].split()
    for command, (extra, _) in cli.NEEDS_EXTRA.items():
        assert extra in declared and extra in extras, command
        assert f"`make setup-{extra}`" in readme and f"python3 setup_venv.py --extras {extra}" in readme, extra


@pytest.fixture(scope="module")
def stale_tree(tmp_path_factory):
    """A copy of the repository whose stubs were edited by hand."""
    copy = tmp_path_factory.mktemp("stale") / "repo"
    shutil.copytree(REPO, copy, ignore=IGNORE)
    stubs = copy / "assignment" / "mhsa.py"
    stubs.write_text(stubs.read_text().replace("# YOUR CODE HERE", "# edited by hand", 1))
    return copy


@pytest.mark.parametrize("command, out", [("release", "student-release"), ("gradescope", "bundle.zip")])
def test_a_stale_tree_is_refused_in_one_line_and_nothing_is_written(stale_tree, command, out, tmp_path):
    result = autograder([command, tmp_path / out], stale_tree)
    assert result.returncode == 2
    line = one_line(result)
    assert "assignment/mhsa.py" in line and "python -m autograder release --write" in line, line
    assert not (tmp_path / out).exists()


def bundle_path() -> str:
    """The bundle `make gradescope` writes."""
    target = re.search(r"^gradescope:.*\n\t.* -m autograder gradescope (\S+)$", (REPO / "Makefile").read_text(), re.M)
    return target[1]


def test_the_docs_and_the_grader_name_the_bundle_make_gradescope_writes():
    """Every zip under build/ and every zip given to `autograder gradescope` in the README, the docs and
    the grader's code is the Makefile's bundle (or the usage's placeholder, OUT.zip)."""
    named = set()
    for path in [REPO / "README.md", *(REPO / "docs").rglob("*.md"), *(REPO / "autograder").rglob("*.py")]:
        text = path.read_text()
        found = re.findall(r"build/[\w.-]+\.zip", text) + re.findall(r"autograder gradescope\s+(\S+\.zip)", text)
        named |= {(path.relative_to(REPO).as_posix(), zip_path) for zip_path in found}
    assert named and {zip_path for _, zip_path in named} <= {bundle_path(), "OUT.zip"}, sorted(named)
