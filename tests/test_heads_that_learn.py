"""The notebook's "heads that learn" cell (course/notebook/plot.py, read-only and ungraded): run as a
kernel runs it, after the reference's definitions, it trains in well under a minute and its heads
specialise, one on the previous token and another on the earlier occurrence of the same letter, in
what it prints and in what it measures, for the shipped seed and two others. After the stubs, or an
attention whose weights have the wrong shape, it stops at once with a message that says why."""
import contextlib
import io
import json
import re
import time
import warnings

import matplotlib
import pytest
import torch

from autograder.core.paths import REPO
from autograder.intake import notebook

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - after choosing the backend

CELLS = {c["metadata"].get("nbgrader", {}).get("grade_id"): "".join(c["source"])
         for c in json.loads((REPO / notebook.STUDENT_NOTEBOOK).read_text())["cells"]}
CELL = CELLS["attention_plot"]
SHIPPED_SEED = "SEED = 0 "
HEAD_LINE = re.compile(r"^head (\d+): +(\d+)% of its attention on the previous token, +(\d+)% on the earlier "
                       r"occurrence of the same letter$", re.M)
MOSTLY = 0.8


def run_cell(definitions: str, cell: str = CELL) -> tuple:
    """(the namespace, what the cell printed, seconds): the definitions, then the cell, in one namespace."""
    namespace = {}
    exec(compile(definitions, "definitions", "exec"), namespace)  # noqa: S102 - the repository's own code
    output, start = io.StringIO(), time.perf_counter()
    try:
        with contextlib.redirect_stdout(output), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*non-interactive.*")  # plt.show() with Agg
            exec(compile(cell, "attention_plot", "exec"), namespace)  # noqa: S102 - the notebook's cell
    finally:
        plt.close("all")
    return namespace, output.getvalue(), time.perf_counter() - start


def test_the_cell_in_the_notebook_is_plot_py():
    assert CELL == (REPO / "course/notebook/plot.py").read_text().strip()
    assert CELL.count(SHIPPED_SEED) == 1


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_reference_heads_specialise_within_a_minute(seed):
    threads = torch.get_num_threads()
    namespace, printed, seconds = run_cell((REPO / "reference/mhsa.py").read_text(),
                                           CELL.replace(SHIPPED_SEED, f"SEED = {seed} "))
    assert seconds < 60, f"the cell took {seconds:.0f} s"
    assert torch.get_num_threads() == threads  # the kernel's thread count is given back
    assert re.search(r"^Trained 300 steps in [\d.]+ s\. On new sequences the model names the previous letter "
                     r"\d+% and the earlier occurrence \d+% of the time\.$", printed, re.M), printed
    heads = {int(h): (int(p) / 100, int(e) / 100) for h, p, e in HEAD_LINE.findall(printed)}
    assert sorted(heads) == [0, 1], printed
    previous_heads = {h for h, (p, e) in heads.items() if p >= MOSTLY and e < 1 - MOSTLY}
    earlier_heads = {h for h, (p, e) in heads.items() if e >= MOSTLY and p < 1 - MOSTLY}
    assert previous_heads and earlier_heads and previous_heads != earlier_heads, printed
    # What is printed is what was measured.
    measured = [share for head in zip(namespace["previous_share"].tolist(), namespace["earlier_share"].tolist())
                for share in head]
    assert [share for h in sorted(heads) for share in heads[h]] == pytest.approx(measured, abs=0.006)
    figure = namespace["figure"]
    assert len(figure.axes) == 3  # two heads and the colour bar
    assert "previous token" in figure.axes[0].get_title() and "earlier occurrence" in figure.axes[0].get_title()


def test_the_stubs_stop_the_cell_at_once_with_a_clear_message():
    threads = torch.get_num_threads()
    with pytest.raises(RuntimeError, match=r"^Training your MultiHeadSelfAttention failed \(NotImplementedError: "
                                           r"MultiHeadSelfAttention.__init__ is not implemented yet.*\)\. Make the "
                                           r"tests above pass, then run this cell again\.$") as failure:
        run_cell((REPO / "assignment/mhsa.py").read_text())
    assert isinstance(failure.value.__cause__, NotImplementedError)  # the student's traceback is kept
    assert torch.get_num_threads() == threads


def test_weights_of_the_wrong_shape_are_named():
    averaged = (REPO / "reference/mhsa.py").read_text().replace(
        "return (y, weights) if need_weights else y", "return (y, weights.mean(1)) if need_weights else y")
    assert "weights.mean(1)" in averaged
    start = time.perf_counter()
    with pytest.raises(RuntimeError, match=r"need_weights=True should return weights of shape \(B, h, L, L\) = "
                                           r"\(64, 2, 13, 13\), not \(64, 13, 13\)"):
        run_cell(averaged)
    assert time.perf_counter() - start < 10
