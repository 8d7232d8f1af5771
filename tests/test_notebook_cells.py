"""The notebook's public test cells teach the handout's rules: run in one namespace as a kernel runs
them (the imports, the read-only helpers, the solution cells, then each test cell as the student's
notebook holds it, hidden regions removed), they pass on the reference and fail, naming what is
wrong, on a one-place break of a rule (eval-mode dropout fails the sdpa cell). Every passing cell
says it is a quick check and gives the command of the public tests."""
import json
import re

import pytest

from autograder.core.paths import REPO
from autograder.intake import notebook

STUDENT = json.loads((REPO / notebook.STUDENT_NOTEBOOK).read_text())
SOURCE = json.loads((REPO / notebook.SOURCE_NOTEBOOK).read_text())
PUBLIC_CELL = re.compile(r"^test_(?P<part>[a-z]+)_public_\d+$")
# A one-place break of a handout rule in one solution cell: cell -> (find, replace), and the part
# whose public cell must then fail.
MUTANTS = {
    "eval-mode-dropout": ("scaled_dot_product_attention", "if training and dropout_p > 0.0:",
                          "if dropout_p > 0.0:", "sdpa"),
    "bool-mask-filled-with-0": ("to_additive_mask", '.masked_fill(mask, float("-inf"))', ".masked_fill(mask, 0.0)",
                                "masks"),
    "pre-LN-residual-from-normalized-x": ("TransformerBlock", "x = x + self_attention(self.norm1(x))",
                                          "x = self.norm1(x)\n            x = x + self_attention(x)", "block"),
    "float16-mask-overflow": ("scaled_dot_product_attention",
                              "scores = scores + to_additive_mask(attn_mask, scores.dtype)",
                              "scores = scores.masked_fill(attn_mask, -1e9) if attn_mask.dtype == torch.bool "
                              "else scores + attn_mask", "sdpa"),
}


def meta(cell):
    return cell.get("metadata", {}).get("nbgrader", {})


def source(cell):
    return "".join(cell["source"])


def run_public_cells(solutions: dict) -> dict:
    """Runs the notebook as a kernel would; part -> (messages of failed public cells, what passing
    cells printed)."""
    import contextlib
    import io

    namespace = {}
    by_id = {meta(c).get("grade_id"): c for c in STUDENT["cells"]}
    exec(source(by_id[notebook.IMPORTS_CELL]), namespace)  # noqa: S102 - the repository's own cells
    exec(source(by_id["test_helpers"]), namespace)  # noqa: S102
    results = {}
    for cell in SOURCE["cells"]:
        grade_id = meta(cell).get("grade_id", "")
        if meta(cell).get("solution") and cell["cell_type"] == "code":
            exec(solutions.get(grade_id, source(cell)), namespace)  # noqa: S102
        public = PUBLIC_CELL.match(grade_id)
        if public:
            failed, printed = results.setdefault(public["part"], ([], []))
            output = io.StringIO()
            try:
                with contextlib.redirect_stdout(output):
                    exec(source(by_id[grade_id]), namespace)  # noqa: S102 - the student's copy of the cell
            except Exception as err:  # noqa: BLE001 - a failing test cell is what is measured
                failed.append(f"{grade_id}: {type(err).__name__}: {err}")
            printed.append(output.getvalue())
    return results


def mutated(cell_id, find, replace):
    cell = next(c for c in SOURCE["cells"] if meta(c).get("grade_id") == cell_id)
    code = source(cell)
    assert code.count(find) == 1, f"{cell_id} no longer holds {find!r}"
    return {cell_id: code.replace(find, replace)}


def test_public_cells_pass_on_the_reference_and_say_they_are_a_quick_check():
    results = run_public_cells({})
    assert set(results) == {"sdpa", "heads", "masks", "mhsa", "block"}
    for part, (failed, printed) in results.items():
        assert not failed, failed
        for text in printed:
            assert "quick check passed" in text and "python -m autograder check assignment/mhsa.ipynb" in text


@pytest.mark.parametrize("rule", sorted(MUTANTS))
def test_breaking_a_rule_fails_its_public_cell(rule):
    cell_id, find, replace, part = MUTANTS[rule]
    results = run_public_cells(mutated(cell_id, find, replace))
    failed = results[part][0]
    assert failed, f"{rule}: every public cell of {part} passed"
