"""The honest-but-unusual corpus: correct work written with habits real students have.

Each submission is the reference solution (reference/mhsa.py, solution markers removed) with one habit
added, as a .py file or as the student notebook with every solution cell filled in. Every one must get
full marks on every code part by every route (tests/test_honest_corpus.py): imports are not a grading
rule, magics and shell lines cost nothing, and no honest habit is held for review.

    python corpus/honest/build.py           # (re)write the files beside this script
    python corpus/honest/build.py --check   # exit 1 when a committed file differs from what this writes
"""
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))  # also when run as a script

from autograder.intake import notebook  # noqa: E402

MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION")

# name -> (code put before the reference, code put after it)
PY_HABITS = {
    "stdlib_imports": ("import logging\nimport os.path\nimport random\nimport sys\nimport time\nimport warnings\n",
                       "logger = logging.getLogger(__name__)\nSTARTED = time.time()\nrandom.seed(0)\n"
                       "HERE = os.path.dirname(os.path.abspath(__file__))\nPYTHON = sys.version_info[:2]\n"
                       "warnings.filterwarnings(\"ignore\", category=UserWarning)\n"),
    "future_annotations": ("from __future__ import annotations\n", ""),
    "dataclasses_typing": ("from dataclasses import dataclass, field\nfrom typing import Optional, Tuple\n",
                           "@dataclass(frozen=True)\nclass AttentionConfig:\n    d_model: int = 64\n"
                           "    num_heads: int = 4\n    dropout: float = 0.0\n"
                           "    tags: Tuple[str, ...] = field(default_factory=tuple)\n"
                           "    note: Optional[str] = None\n"),
    "unused_plotting_imports": ("import matplotlib.pyplot as plt\nfrom tqdm import tqdm\n", ""),
    "print_at_import": ("", "print(\"mhsa.py loaded: attention from scratch\")\n"),
    "main_smoke_test": ("", "if __name__ == \"__main__\":\n    layer = MultiHeadSelfAttention(16, 4)\n"
                            "    print(layer(torch.randn(2, 5, 16))[0].shape)\n"),
    "repr_class_name": ("", "class AttentionShape:\n    def __init__(self, batch, heads, length):\n"
                            "        self.batch, self.heads, self.length = batch, heads, length\n\n"
                            "    def __repr__(self):\n        return (f\"{self.__class__.__name__}(batch={self.batch}, \"\n"
                            "                f\"heads={self.heads}, length={self.length})\")\n"),
    "manual_seed_at_import": ("", "torch.manual_seed(0)\n"),
    "set_num_threads": ("", "torch.set_num_threads(4)  # faster on my laptop\n"),
    "stdlib_reflection": ("import gc\nimport inspect\nimport pickle\n",
                          "PARAMETERS = list(inspect.signature(MultiHeadSelfAttention.__init__).parameters)\n"
                          "METHODS = [name for name, _ in inspect.getmembers(TransformerBlock, inspect.isfunction)]\n"
                          "_INITIAL = pickle.dumps(MultiHeadSelfAttention(16, 4).state_dict())\n\n\n"
                          "def live_tensors():\n    \"\"\"How many tensors are alive (a memory check while debugging).\"\"\"\n"
                          "    gc.collect()\n    return sum(torch.is_tensor(o) for o in gc.get_objects())\n\n\n"
                          "def load_initial():\n    return pickle.loads(_INITIAL)\n"),
}
PY_HABITS["all_habits"] = (
    "from __future__ import annotations\n" + "".join(before for name, (before, _) in PY_HABITS.items()
                                                      if name != "future_annotations"),
    "".join(after for _, after in PY_HABITS.values()))

# name -> cells added after the cell whose grade id is the key's first element
PLOT = ("import matplotlib.pyplot as plt\n\nlayer = MultiHeadSelfAttention(16, 4)\n"
        "out, weights = layer(torch.randn(1, 6, 16), need_weights=True)\n"
        "plt.imshow(weights[0, 0].detach(), cmap=\"viridis\")\nplt.title(\"head 0\")\nplt.colorbar()\nplt.show()\n")
NOTEBOOK_HABITS = {
    "nb_plot_cell": [("TransformerBlock", PLOT)],
    "nb_magics": [("imports", "%matplotlib inline\n!nvidia-smi\nimport time\n"),
                  ("causal_mask", "%timeit causal_mask(64)\n"),
                  ("MultiHeadSelfAttention", "%%time\nlayer = MultiHeadSelfAttention(16, 4)\n"
                                             "print(layer(torch.randn(2, 5, 16))[0].shape)\n"),
                  ("TransformerBlock", "files = !ls\n%load_ext autoreload\n%autoreload 2\n")],
    "nb_scratch_prints": [("imports", "import time\nimport random\nprint(torch.__version__)\n"),
                          ("to_additive_mask", "print(to_additive_mask(torch.tensor([[False, True]]), torch.float32))\n"),
                          ("split_heads", "x = torch.randn(2, 5, 8)\nprint(split_heads(x, 2).shape)\nx.shape\n")],
}
NOTEBOOK_HABITS["nb_all_habits"] = [cell for cells in NOTEBOOK_HABITS.values() for cell in cells]


def reference() -> str:
    lines = (REPO / "reference" / "mhsa.py").read_text().splitlines(keepends=True)
    return "".join(line for line in lines if line.strip() not in MARKERS)


def python_file(before: str, after: str) -> str:
    return f"{before}{reference()}\n\n{after}" if after else f"{before}{reference()}"


def filled_notebook(added: list) -> str:
    """The student notebook, every solution cell holding the reference's definition, `added` code cells
    (a cell of the student's own: no nbgrader metadata) after the cells they name."""
    definitions = dict(notebook.split_module(reference())[1])
    data = json.loads((REPO / notebook.STUDENT_NOTEBOOK).read_text())
    cells = []
    for cell in data["cells"]:
        meta = cell["metadata"].get("nbgrader", {})
        if cell["cell_type"] == "code" and meta.get("solution"):
            cell = {**cell, "source": definitions[meta["grade_id"]]}
        cells.append(cell)
        for i, (after, source) in enumerate(added):
            if meta.get("grade_id") == after:
                cells.append({"cell_type": "code", "execution_count": None, "id": f"habit-{i}", "metadata": {},
                              "outputs": [], "source": source})
    return json.dumps({**data, "cells": cells}, indent=1, sort_keys=True) + "\n"


def files() -> dict:
    """file name -> text of every submission of the corpus."""
    out = {f"{name}.py": python_file(*habit) for name, habit in PY_HABITS.items()}
    out |= {f"{name}.ipynb": filled_notebook(added) for name, added in NOTEBOOK_HABITS.items()}
    return out


def stale() -> list:
    """Names whose committed file differs from what this script writes (or is missing, or extra)."""
    wanted = files()
    present = {p.name for p in HERE.iterdir() if p.suffix in (".py", ".ipynb") and p.name != "build.py"}
    return sorted({n for n, text in wanted.items() if not (HERE / n).is_file() or (HERE / n).read_text() != text}
                  | (present - set(wanted)))


if __name__ == "__main__":
    if sys.argv[1:] == ["--check"]:
        names = stale()
        print("stale: " + ", ".join(names) + " (run python corpus/honest/build.py)" if names else "up to date")
        sys.exit(1 if names else 0)
    for name, text in files().items():
        (HERE / name).write_text(text)
        print(HERE / name)
