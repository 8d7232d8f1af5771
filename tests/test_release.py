"""The student release: generated files are checked, nothing instructor-only leaks, and its public
tests run inside it alone."""
import shutil
import subprocess
import sys

import pytest

from autograder import release
from autograder.paths import REFERENCE, REPO

IGNORE = shutil.ignore_patterns(".git", "__pycache__", "build", "grading-out", ".venv", "*.db")


def run(args, cwd, **kw):
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=600, **kw)


@pytest.fixture(scope="module")
def student_release(tmp_path_factory):
    return release.build_release(tmp_path_factory.mktemp("release") / "mhsa-student")


def test_committed_generated_files_are_up_to_date():
    assert release.stale_files() == []


def test_check_fails_when_the_stubs_were_edited_by_hand(tmp_path):
    copy = tmp_path / "repo"
    shutil.copytree(REPO, copy, ignore=IGNORE)
    stubs = copy / "assignment" / "mhsa.py"
    stubs.write_text(stubs.read_text().replace("# YOUR CODE HERE", "# edited by hand", 1))
    result = run(["-m", "autograder", "release", "--check"], cwd=copy)
    assert result.returncode == 1 and "out of date: assignment/mhsa.py" in result.stdout


def test_release_holds_no_instructor_material(student_release):
    assert release.find_leaks(student_release) == []
    for folder in release.NEVER_RELEASED:
        assert not (student_release / folder).exists()
    assert (student_release / "assignment" / "mhsa.py").read_text() == (REPO / "assignment" / "mhsa.py").read_text()


def test_leak_finder_catches_planted_leaks(student_release, tmp_path):
    planted = tmp_path / "planted"
    shutil.copytree(student_release, planted)
    (planted / "tests_hidden").mkdir()
    secret = release.solution_lines(REFERENCE.read_text())[0]
    (planted / "assignment" / "notes.md").write_text(f"my notes\n{secret}\n")
    leaks = release.find_leaks(planted)
    assert any("tests_hidden/ is present" in leak for leak in leaks)
    assert any("notes.md: contains the solution line" in leak for leak in leaks)


def test_public_tests_run_inside_the_release_alone(student_release, tmp_path):
    solution = tmp_path / "elsewhere" / "mhsa.py"
    solution.parent.mkdir()
    shutil.copy(REFERENCE, solution)
    passing = run(["-m", "pytest", "tests_public", "--impl", str(solution), "-q"], cwd=student_release)
    assert passing.returncode == 0, passing.stdout[-2000:]
    failing = run(["-m", "pytest", "tests_public", "-q"], cwd=student_release)
    assert failing.returncode == 1
    assert " passed" not in failing.stdout.splitlines()[-1], failing.stdout[-500:]
    assert "NotImplementedError" in failing.stdout


def test_students_check_command_works_inside_the_release(student_release):
    result = run(["-m", "autograder", "check"], cwd=student_release)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "0 / " in result.stdout and "not implemented yet" in result.stdout
