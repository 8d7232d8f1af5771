"""The student's program read back from a submitted notebook (autograder.intake.notebook.extract): what
the isolated grade imports. No kernel, no nbgrader: seconds."""
import json

import pytest

from autograder.core.rubric import REPO
from autograder.intake import notebook
from autograder.intake.submission import GradingError
from autograder.integrity import static_check

STUDENT = REPO / notebook.STUDENT_NOTEBOOK


def released():
    return json.loads(STUDENT.read_text())


def add_cell(nb, after_id, source):
    index = next(i for i, c in enumerate(nb["cells"]) if c["id"] == after_id)
    nb["cells"].insert(index + 1, {"cell_type": "code", "execution_count": None, "id": f"own-{index}",
                                   "metadata": {}, "outputs": [], "source": source})


def set_cell(nb, cell_id, source):
    next(c for c in nb["cells"] if c["id"] == cell_id)["source"] = source


def load(nb, tmp_path):
    path = tmp_path / "mhsa.ipynb"
    path.write_text(json.dumps(nb))
    found = notebook.extract(path)
    namespace = {}
    exec(compile(found.source, "extracted", "exec"), namespace)  # noqa: S102 - notebooks written by these tests
    return found, namespace


def test_a_helper_in_an_added_cell_is_part_of_the_program(tmp_path):
    nb = released()
    add_cell(nb, "imports", "def twice(n):\n    return 2 * n")
    set_cell(nb, "causal-mask", "def causal_mask(seq_len, device=None, dtype=None):\n    return twice(seq_len)")
    found, namespace = load(nb, tmp_path)
    assert namespace["causal_mask"](3) == 6 and found.notes == []


def test_a_cell_that_does_not_compile_is_left_out_with_a_note_naming_it(tmp_path):
    nb = released()
    set_cell(nb, "TransformerBlock", "class TransformerBlock(nn.Module):\n    def forward(self,, x):\n        pass")
    set_cell(nb, "causal-mask", "def causal_mask(seq_len, device=None, dtype=None):\n    return seq_len")
    found, namespace = load(nb, tmp_path)
    assert "TransformerBlock" not in namespace and namespace["causal_mask"](4) == 4  # the rest is intact
    [note] = found.notes
    assert note.startswith("cell ") and "solution cell TransformerBlock" in note and "left out" in note
    assert "SyntaxError" in note and "(TransformerBlock) is missing" in note
    assert note in found.source  # the module says so too


def test_magics_and_shell_escapes_are_removed_with_a_note(tmp_path):
    nb = released()
    add_cell(nb, "imports", "%matplotlib inline\n!pip list\ndef quiet():\n    !ls\n    return 1")
    found, namespace = load(nb, tmp_path)
    assert namespace["quiet"]() == 1
    [note] = found.notes
    assert "%matplotlib inline" in note and "!pip list" in note and "!ls" in note


def test_a_statement_that_raises_does_not_stop_the_program(tmp_path):
    """The kernel runs every cell, even after one raised: so does the module."""
    nb = released()
    add_cell(nb, "imports", "get_ipython().input_transformers_cleanup.append(lambda lines: [])\nSTEP = 1")
    set_cell(nb, "causal-mask", "x = 1 / 0\ndef causal_mask(seq_len, device=None, dtype=None):\n    return seq_len + 1")
    found, namespace = load(nb, tmp_path)
    assert namespace["causal_mask"](1) == 2 and "STEP" not in namespace  # the raising cell stopped at its error


def test_test_cells_and_read_only_cells_are_the_graders_and_left_out(tmp_path):
    found, namespace = load(released(), tmp_path)
    assert "_expect_close" not in namespace  # the test helpers' cell
    assert "ATTENTION" not in found.source and "HIDDEN" not in found.source
    assert "assert" not in found.source  # no test cell
    assert {"torch", "nn", "F", "math"} <= set(namespace)  # the read-only imports cell is kept


def test_extraction_runs_nothing(tmp_path):
    marker = tmp_path / "ran"
    nb = released()
    add_cell(nb, "imports", f"open({str(marker)!r}, 'w').write('x')")
    (tmp_path / "nb").mkdir()
    path = tmp_path / "nb" / "mhsa.ipynb"
    path.write_text(json.dumps(nb))
    assert "open(" in notebook.extract(path).source and not marker.exists()


def test_forbidden_apis_in_an_own_cell_are_found_and_attributed(tmp_path):
    nb = released()
    add_cell(nb, "imports", "def attend(q, k, v):\n    return F.scaled_dot_product_attention(q, k, v)")
    path = tmp_path / "mhsa.ipynb"
    path.write_text(json.dumps(nb))
    findings = static_check.scan(notebook.extract(path).source)
    assert [f.function for f in findings] == ["attend"]


@pytest.mark.parametrize("content", ["", "not json", "[1, 2]"])
def test_a_file_that_is_not_a_notebook_cannot_be_graded(tmp_path, content):
    path = tmp_path / "mhsa.ipynb"
    path.write_text(content)
    with pytest.raises(GradingError, match="not a notebook"):
        notebook.extract(path)
