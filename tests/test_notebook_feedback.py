"""On the notebook route the student reads about the cells they wrote: a traceback or a finding of the
static scan names the notebook cell and the line in it (not a line of the extracted program), and
knowledge answers written in knowledge.py beside the notebook are used, or the results say why not."""
import json
import re
import shutil

import pytest

from autograder.core import rubric as rubric_file
from autograder.core.paths import REPO
from autograder.intake import notebook, submission
from autograder.pipeline import grading

SOURCE = REPO / notebook.SOURCE_NOTEBOOK  # every solution cell filled with the reference


def notebook_with(tmp_path, changes: dict) -> dict:
    """A student folder: the untouched stub mhsa.py and a filled notebook whose solution cells get
    `changes` (grade id -> lines put first in the solution region); returns grade id -> (cell number,
    the line of the cell the first change is on)."""
    cells = json.loads(SOURCE.read_text())
    numbers = {}
    for number, cell in enumerate(cells["cells"], start=1):
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        numbers[grade_id] = (number, None)
        if grade_id in changes:
            lines = "".join(cell["source"]).splitlines()
            body = next(i for i, line in enumerate(lines) if "### BEGIN SOLUTION" in line) + 1
            cell["source"] = "\n".join(lines[:body] + changes[grade_id] + lines[body:])
            numbers[grade_id] = (number, body + 1)
    folder = tmp_path / "assignment"
    folder.mkdir()
    shutil.copy(REPO / "assignment" / "mhsa.py", folder / "mhsa.py")
    (folder / "mhsa.ipynb").write_text(json.dumps(cells))
    return numbers


def test_cell_lines_map_program_lines_back_to_cells(tmp_path):
    numbers = notebook_with(tmp_path, {"split_heads": ["    raise RuntimeError('here')"]})
    program = notebook.extract(tmp_path / "assignment" / "mhsa.ipynb").source
    cells = notebook.CellLines.of(program)
    line = next(n for n, text in enumerate(program.splitlines(), start=1) if "raise RuntimeError('here')" in text)
    cell, cell_line = numbers["split_heads"]
    assert cells.line(line) == f"cell {cell} (solution cell split_heads), line {cell_line}"
    assert cells.tracebacks(f'  File "mhsa.py", line {line}, in split_heads') == \
        f'  File "mhsa.ipynb", cell {cell} (solution cell split_heads), line {cell_line}, in split_heads'
    # A .py submission's lines stay as they are.
    plain = notebook.CellLines.of((REPO / "reference" / "mhsa.py").read_text())
    assert plain.line(12) == "line 12" and plain.tracebacks('File "mhsa.py", line 12') == 'File "mhsa.py", line 12'


def test_grading_a_notebook_names_cells_in_tracebacks_and_scan_findings(tmp_path):
    numbers = notebook_with(tmp_path, {
        "scaled_dot_product_attention": ["    raise RuntimeError('stopped in the sdpa cell')"],
        "to_additive_mask": ["    if mask is not None and mask.dim() > 99:",
                             "        return torch.nn.functional.scaled_dot_product_attention(mask, mask, mask)"],
    })
    grade = grading.grade(tmp_path / "assignment", suites=("public",), extras=False, rubric=rubric_file.load())
    raised = [t for t in grade.tests if "stopped in the sdpa cell" in t.summary]
    assert raised
    sdpa, sdpa_line = numbers["scaled_dot_product_attention"]
    for test in raised:
        assert f'File "mhsa.ipynb", cell {sdpa} (solution cell scaled_dot_product_attention), line {sdpa_line}, in ' \
               "scaled_dot_product_attention" in test.summary, test.summary
        assert 'File "mhsa.py"' not in test.summary
    cell, first = numbers["to_additive_mask"]
    findings = grade.forbidden["masks"]
    assert any(re.match(rf"cell {cell} \(solution cell to_additive_mask\), line {first + 1}: ", f)
               for f in findings), findings


@pytest.fixture
def folder(tmp_path):
    notebook_with(tmp_path, {})
    return tmp_path / "assignment"


def test_knowledge_py_beside_a_notebook_with_empty_answer_cells_is_used(folder, tmp_path):
    (folder / "knowledge.py").write_text('Q1_ANSWER = "a"\nQ3_ANSWER = 8\n')
    loaded = submission.load(folder, tmp_path)
    assert loaded.source.read_text().startswith("# The program of notebook mhsa.ipynb")
    assert loaded.knowledge == {"Q1_ANSWER": "a", "Q3_ANSWER": 8}
    assert any("read from knowledge.py beside the notebook" in note for note in loaded.notes), loaded.notes


def test_knowledge_py_is_not_used_over_the_notebooks_answers_and_the_results_say_so(folder, tmp_path):
    cells = json.loads((folder / "mhsa.ipynb").read_text())
    answer = next(c for c in cells["cells"] if "Q1_ANSWER = None" in "".join(c["source"]))
    answer["source"] = 'Q1_ANSWER = "b"'
    (folder / "mhsa.ipynb").write_text(json.dumps(cells))
    (folder / "knowledge.py").write_text('Q1_ANSWER = "a"\n')
    loaded = submission.load(folder, tmp_path)
    assert loaded.knowledge["Q1_ANSWER"] == "b"
    assert any("knowledge.py beside it also holds answers and was not used" in note for note in loaded.notes)


def test_an_unanswered_knowledge_py_changes_nothing(folder, tmp_path):
    shutil.copy(REPO / "assignment" / "knowledge.py", folder / "knowledge.py")
    loaded = submission.load(folder, tmp_path)
    assert all(v is None for v in loaded.knowledge.values())
    assert len(loaded.notes) == 1 and loaded.notes[0].startswith("graded: your notebook"), loaded.notes
