"""The student release: generated files are checked, nothing instructor-only leaks (no solution
formula either), and its public tests run inside it alone."""
import io
import json
import re
import shutil
import subprocess
import sys
import tokenize
import zipfile
from pathlib import Path

import pytest

from autograder.authoring import release
from autograder.core.paths import REFERENCE, REPO

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


# Code that computes attention or rearranges heads the way a solution does. Shipped code (tests, the
# oracles, the notebook's helper and test cells) takes expected values from PyTorch's own
# implementations instead, and checks split_heads/merge_heads head by head. Strings and comments are
# not code: hints may spell the formula out in words.
FORMULAS = {
    "a softmax": r"\bsoftmax\s*\(|\bSoftmax\s*\(",
    "scores scaled by 1/sqrt(d_k)": r"/\s*math\.sqrt\(\s*(?:\w+\.(?:size|shape)\b|d_k\b)"
                                    r"|(?:size\(\s*-1\s*\)|shape\[\s*-1\s*\]|\bd_k)\s*\*\*\s*-\s*0?\.5",
    "q @ k^T": r"(?:@|matmul\(\s*\w+\s*,)\s*\w+\.transpose\(\s*-[12]\s*,\s*-[12]\s*\)|\.mT\b",
    "a head split or merge": r"\.transpose\(\s*1\s*,\s*2\s*\)|\.permute\(\s*0\s*,\s*2\s*,\s*1\s*,\s*3\s*\)"
                             r"|torch\.cat\(\s*\w+\.unbind\(\s*1\s*\)|torch\.cat\(\s*\[\s*\w+\[\s*:\s*,\s*i\s*\]"
                             r"|torch\.stack\(\s*\[[^\]]*\*\s*d_k",
}
STUBS = "assignment/mhsa.py"  # what students edit: the solution's signatures, with empty bodies


def code_without_strings(source: str) -> str:
    """The code of a Python source, its strings and comments left out (kept when it does not parse)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return source
    dropped = {tokenize.STRING, tokenize.COMMENT, getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}
    code, previous = [], None
    for token in tokens:
        if token.type in dropped:
            continue
        if token.type in (tokenize.NAME, tokenize.NUMBER) and previous in (tokenize.NAME, tokenize.NUMBER):
            code.append(" ")  # `return x`, not `returnx`; everything else is written without spaces
        code.append(token.string)
        previous = token.type
    return "".join(code)


def shipped_code(root: Path):
    """(where, code) of every Python file and notebook code cell under `root`, except what students
    fill in: the stubs and the notebook's solution cells."""
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if path.suffix == ".py" and relative != STUBS:
            yield relative, path.read_text(errors="replace")
        elif path.suffix == ".ipynb":
            for cell in json.loads(path.read_text()).get("cells", []):
                if cell["cell_type"] == "code" and not cell.get("metadata", {}).get("nbgrader", {}).get("solution"):
                    source = "".join(cell["source"])
                    code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
                    yield f"{relative} cell {cell.get('id')}", code


def formula_leaks(root: Path) -> list:
    """Solution formulas in shipped code under `root`: `where: what`."""
    return [f"{where}: {name}" for where, source in shipped_code(root) for name, pattern in FORMULAS.items()
            if re.search(pattern, code_without_strings(source))]


def test_no_solution_formula_ships(student_release):
    assert formula_leaks(student_release) == []
    assert any(where.startswith("autograder/testing/oracles.py") for where, _ in shipped_code(student_release))
    assert any(" cell test-helpers" in where for where, _ in shipped_code(student_release))


# Formula oracles as the public tests and the notebook's helper cell held them before they used
# PyTorch's implementations: each must be caught.
FORMULA_ORACLES = {
    "attention": """
def attention(q, k, v, mask=None, *, scale=None, dim=-1):
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale
    scores = scores if mask is None else scores + additive(mask, scores.dtype)
    weights = scores.softmax(dim=dim)
    return torch.matmul(weights, v), weights
""",
    "sdpa_formula": """
def _sdpa_formula(q, k, v, mask=None):
    scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(k.shape[-1]))
""",
    "split_formula": """
def split_formula(x, h):
    d_k = x.shape[-1] // h
    return torch.stack([x[..., i * d_k:(i + 1) * d_k] for i in range(h)], dim=1)
""",
    "merge_formula": """
def merge_formula(y):
    return torch.cat([y[:, i] for i in range(y.shape[1])], dim=-1)
""",
    "merge_in_notebook": "expected = torch.cat(heads.unbind(1), dim=-1)\n",
    "mhsa_from_weights": """
v = (x @ w_v.T + state["qkv.bias"][2 * D:]).reshape(B, L, H, D // H).transpose(1, 2)
""",
    "scaled_scores": "scores = q @ k.transpose(-2, -1) * q.size(-1) ** -0.5\n",
}


@pytest.mark.parametrize("oracle", list(FORMULA_ORACLES))
def test_formula_finder_catches_formula_oracles(student_release, tmp_path, oracle):
    planted = tmp_path / "planted"
    shutil.copytree(student_release, planted)
    (planted / "tests_public" / "formulas.py").write_text(f"import math\nimport torch\n{FORMULA_ORACLES[oracle]}")
    assert [leak for leak in formula_leaks(planted) if leak.startswith("tests_public/formulas.py")]


def test_formula_finder_reads_notebook_cells_but_not_solutions_or_strings(student_release, tmp_path):
    planted = tmp_path / "planted"
    shutil.copytree(student_release, planted)
    notebook = planted / "assignment" / "mhsa.ipynb"
    cells = json.loads(notebook.read_text())
    formula = FORMULA_ORACLES["attention"]
    cells["cells"] += [
        {"cell_type": "code", "id": "mine", "metadata": {}, "outputs": [], "execution_count": None, "source": formula},
        {"cell_type": "code", "id": "answer", "metadata": {"nbgrader": {"solution": True}}, "outputs": [],
         "execution_count": None, "source": formula},
        {"cell_type": "code", "id": "hint", "metadata": {}, "outputs": [], "execution_count": None,
         "source": f"HINT = {formula!r}  # weights = softmax(q @ k.transpose(-2, -1) / math.sqrt(d_k))"},
    ]
    notebook.write_text(json.dumps(cells))
    found = {leak.split(": ")[0] for leak in formula_leaks(planted)}
    assert found == {"assignment/mhsa.ipynb cell mine"}


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


def test_the_release_grades_a_correct_solution_with_its_public_tests(student_release, tmp_path):
    solution = tmp_path / "mine" / "mhsa.py"
    solution.parent.mkdir()
    shutil.copy(REFERENCE, solution)
    result = run(["-m", "autograder", "check", str(solution)], cwd=student_release)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "90.00 / 90.00 points from the public tests" in result.stdout, result.stdout[-2000:]


def test_code_nobody_listed_ships_neither_to_students_nor_to_gradescope(tmp_path):
    """paths.STUDENT_CODE and paths.GRADER_CODE are lists of what ships: a new module and a new package
    stay in the instructor's repository, run the way an instructor builds the release and the bundle."""
    copy = tmp_path / "repo"
    shutil.copytree(REPO, copy, ignore=IGNORE)
    (copy / "autograder" / "instructor_tool.py").write_text("NOTES = 'for the instructor'\n")
    (copy / "autograder" / "new_feature").mkdir()
    (copy / "autograder" / "new_feature" / "__init__.py").write_text("")
    (copy / "autograder" / "new_feature" / "engine.py").write_text("NOTES = 'for the instructor'\n")
    (copy / "gpu_checks" / "new_study.py").write_text("NOTES = 'for the instructor'\n")
    built = run(["-m", "autograder", "release", str(tmp_path / "student")], cwd=copy)
    assert built.returncode == 0, built.stdout + built.stderr
    bundled = run(["-m", "autograder", "gradescope", str(tmp_path / "autograder.zip")], cwd=copy)
    assert bundled.returncode == 0, bundled.stdout + bundled.stderr
    released = {p.relative_to(tmp_path / "student").as_posix() for p in (tmp_path / "student").rglob("*.py")}
    with zipfile.ZipFile(tmp_path / "autograder.zip") as z:
        bundle = set(z.namelist())
    new = {"autograder/instructor_tool.py", "autograder/new_feature/__init__.py",
           "autograder/new_feature/engine.py", "gpu_checks/new_study.py"}
    assert not new & released and not new & bundle
    assert {"autograder/pipeline/grading.py", "autograder/cli/check.py"} <= released  # the lists do ship
    assert {"autograder/pipeline/grading.py", "autograder/runners/gradescope.py", "gpu_checks/grading.py"} <= bundle
    assert "autograder/runners/slot.py" not in released and "autograder/runners/batch.py" not in bundle
