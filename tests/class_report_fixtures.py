"""A generated class for the class report's tests: 30 results with known facts, built from the shapes
of real results files (tests/data/class_report/: the batch's output on examples/submissions) and
submissions mixed from the valid solutions of other styles (corpus/valid/, reference/mhsa.py).

Known facts: three misconceptions matched by 6, 4 and 2 students; two near-identical submissions
(one is the other with names, comments and layout changed) among 8 handed-in sources (the other
students' solutions are independent ones of different styles; 22 students hand in no source);
one forbidden API; one tampered notebook;
one timeout; one grade at the `process` level; one grade with another maximum (knowledge graded);
timing rows for every graded student, one of them unreadable; one student hands in the stubs untouched
(assignment/mhsa.py copied) and one a file that does not compile (their results: every test failed,
the grade's `work` field saying why, no timing ratio).
"""
import copy
import csv
import json
import random
import re
import subprocess
import sys
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

from autograder.core.paths import ASSIGNMENT, CORPUS, REFERENCE, REPO

DATA = Path(__file__).parent / "data" / "class_report"
EXAMPLE_RESULTS = {name: json.loads((DATA / f"{name}.json").read_text())
                   for name in ("reference_copy", "buggy_no_scale", "stubs")}
NO_SCALE = EXAMPLE_RESULTS["buggy_no_scale"]["extra_data"]["parts"]["sdpa"]["diagnosis"]
WRONG_DIM = "the softmax runs over the queries (dim=-2) instead of the keys (dim=-1)."
FUTURE = "the causal mask blocks the past instead of the future: use triu(1), not tril(-1)."
FORBIDDEN_NOTE = "line 57: uses nn.MultiheadAttention, which this assignment forbids"
FLAG = "test cell test_mhsa_public_1 passed in the kernel and fails when the same cells run again in the grader's worker"
TIMING_CASES = ("launch float32 fwd", "throughput bfloat16 fwd+bwd")
CODE_PARTS = ("sdpa", "heads", "masks", "mhsa", "block")
# Nothing of it compiles: the handout's first function with its parameter list left open (the grade
# leaves it out, and no contract function is left)
NOT_COMPILING = "import torch\n\n\ndef scaled_dot_product_attention(q, k, v, attn_mask=None\n    return q @ k\n"
SIZE = 30


@dataclass
class GeneratedClass:
    results: Path
    submissions: Path
    names: list
    misconceptions: dict            # diagnosis -> students
    near_identical: tuple
    forbidden: str
    tampered: str
    timed_out: str
    process_level: str
    other_maximum: str
    unreadable_timing: str
    untouched: str
    did_not_compile: str
    ratios: dict = field(default_factory=dict)   # student -> [ratio per case]


def make_class(root: Path, seed: int = 7) -> GeneratedClass:
    rng = random.Random(seed)
    results, submissions = root / "results", root / "submissions"
    results.mkdir(parents=True)
    submissions.mkdir(parents=True)
    names = [f"student{i:02d}" for i in range(1, SIZE + 1)]
    facts = GeneratedClass(results, submissions, names,
                           misconceptions={NO_SCALE: names[0:6], WRONG_DIM: names[6:10], FUTURE: names[10:12]},
                           near_identical=(names[12], names[13]), forbidden=names[14], tampered=names[15],
                           timed_out=names[16], process_level=names[17], other_maximum=names[18],
                           unreadable_timing=names[19], untouched=names[20], did_not_compile=names[21])
    for name in names:
        (results / f"{name}.json").write_text(json.dumps(_results(name, facts, rng), indent=1))
    for name, source in class_sources(facts).items():
        if name == facts.tampered:
            (submissions / f"{name}.ipynb").write_text(json.dumps(notebook(source)))
        else:
            (submissions / f"{name}.py").write_text(source)
    return facts


def _results(name: str, facts: GeneratedClass, rng: random.Random) -> dict:
    if name == facts.timed_out:
        return {"score": 0.0, "execution_time": 300.0, "output": "Grading was stopped after 300 s, the time limit "
                "for a whole submission.", "tests": [],
                "extra_data": {"submission": name, "status": "timeout", "isolation": "sandbox", "max_score": 95.0,
                               "parts": {}}}
    diagnosis = next((d for d, who in facts.misconceptions.items() if name in who), None)
    data = copy.deepcopy(EXAMPLE_RESULTS["buggy_no_scale" if diagnosis == NO_SCALE else "reference_copy"])
    extra = data["extra_data"]
    extra.update(submission=name, status="graded")
    if diagnosis == WRONG_DIM:
        _fail(data, "sdpa", rng.sample(range(8), 5), WRONG_DIM)
    elif diagnosis == FUTURE:
        _fail(data, "masks", [0, 1], FUTURE)
    if name == facts.forbidden:
        _fail(data, "mhsa", range(100), "")
        extra["parts"]["mhsa"]["notes"] = [FORBIDDEN_NOTE]
        extra["forbidden"] = [FORBIDDEN_NOTE]
        for t in data["tests"]:
            if t["tags"][0] == "mhsa" and t["tags"][1] == "hidden":
                t["output"] += f"\nThis part scores 0: {FORBIDDEN_NOTE}"
    if name == facts.tampered:
        extra["flags"] = [FLAG]
    if name == facts.process_level:
        extra["isolation"] = "process"
    if name == facts.other_maximum:
        extra["parts"]["knowledge"].update(score=5.0, graded=True, notes=[])
    work = {facts.untouched: "untouched", facts.did_not_compile: "did not compile"}.get(name)
    if work:  # every test fails: nothing of it runs
        extra["work"] = work
        for part in CODE_PARTS:
            _fail(data, part, range(100), "")
    ratios = [round(rng.uniform(0.6, 2.6), 2) for _ in TIMING_CASES]
    readable = name != facts.unreadable_timing and not work
    if readable:
        facts.ratios[name] = ratios
    _timing(data, ratios, readable=readable)
    graded = [p for p in extra["parts"].values() if p["graded"]]
    data["score"] = round(sum(p["score"] for p in graded), 4)
    extra["max_score"] = round(sum(p["max_score"] for p in graded), 4)
    return data


def _fail(data: dict, part: str, which, diagnosis: str) -> None:
    """Fail the part's tests at positions `which` (within the part) and recompute its score."""
    mine = [t for t in data["tests"] if t["tags"][0] == part]
    for i in which:
        if i < len(mine):
            mine[i].update(status="failed", score=0.0, output=mine[i]["output"] or "failed")
    info = data["extra_data"]["parts"][part]
    info["score"] = round(sum(t["score"] for t in mine), 4)
    info["diagnosis"] = diagnosis


def _timing(data: dict, ratios: list, readable: bool) -> None:
    """The timing row in gpu_checks.report.render's layout (cells two or more spaces apart)."""
    header = ("case", "pairs", "ratio", "interval", "threshold", "verdict", "TFLOP/s yours", "reference", "sdpa")
    rows = [header] + [(case, "20", f"{r:.2f}", f"[{r - 0.1:.2f}, {r + 0.1:.2f}]", "2", "passed" if r <= 2 else "failed",
                        "31.2", "35.0", "-") for case, r in zip(TIMING_CASES, ratios)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    table = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    passed = all(r <= 2 for r in ratios)
    text = ("\n".join(["Timing against the reference on the CUDA GPU (NVIDIA H200, torch 2.13.0, session seed 5): "
                       + ("passed" if passed else "failed"),
                       "ratio = your time / the reference's, median over interleaved pairs.", "", *table])
            if readable else "CUDA timing: failed. your code could not be imported: RuntimeError: broken at import")
    passed = passed and readable
    data["tests"] = [t for t in data["tests"] if t["tags"][0] != "timing"]
    data["tests"].append({"name": "timing: CUDA speed against the reference", "score": 5.0 if passed else 0.0,
                          "max_score": 5.0, "status": "passed" if passed else "failed", "output": text,
                          "visibility": "visible", "tags": ["timing"]})
    data["extra_data"]["parts"]["timing"].update(score=5.0 if passed else 0.0, max_score=5.0, graded=True, notes=[])


# --- submissions -----------------------------------------------------------------------------------
# A class's independent solutions share a third of their code at most (same API, same library calls):
# the solutions of different styles stand for those students. The others hand in no source here.
FORBIDDEN_SOURCE = """import torch
import torch.nn as nn


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        self.inner = nn.MultiheadAttention(d_model, num_heads, dropout=dropout, bias=bias, batch_first=True)

    def forward(self, x, attn_mask=None, key_padding_mask=None, need_weights=False):
        out, weights = self.inner(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                                  need_weights=need_weights, average_attn_weights=False)
        return (out, weights) if need_weights else out
"""


def solution_styles() -> dict:
    """style -> source of a whole solution (solution markers removed)."""
    files = sorted((CORPUS / "valid").glob("*.py")) + [REFERENCE]
    return {path.stem: "\n".join(line for line in path.read_text().splitlines() if "### " not in line) + "\n"
            for path in files}


def class_sources(facts: GeneratedClass) -> dict:
    """student -> source, for the students who hand one in: one style each, the copy of one of them,
    and the forbidden API."""
    styles = solution_styles()
    copied, copy = facts.near_identical
    others = [n for n in facts.names if n not in (copied, copy, facts.forbidden, facts.tampered, facts.untouched,
                                                 facts.did_not_compile)]
    sources = {copied: styles.pop("einsum"), facts.tampered: styles.pop("head_loop")}
    sources |= dict(zip(others, styles.values()))
    sources[copy] = disguise(sources[copied])
    sources[facts.forbidden] = FORBIDDEN_SOURCE
    sources[facts.untouched] = ASSIGNMENT.read_text()
    sources[facts.did_not_compile] = NOT_COMPILING
    return sources


def disguise(source: str) -> str:
    """The copy a student hands in: local names renamed, comments added, blank lines changed."""
    renames = {"scores": "logits", "weights": "attn", "mask": "msk", "blocked": "masked_out", "out": "result"}
    for old, new in renames.items():
        source = re.sub(rf"\b{old}\b", new, source)
    lines = []
    for line in source.splitlines():
        lines.append(line)
        if line.strip().startswith("def "):
            lines.append(" " * (len(line) - len(line.lstrip()) + 4) + "# my own implementation")
    return "\n".join(lines).replace("\n\n\n", "\n\n") + "\n"


def notebook(source: str) -> dict:
    cell = {"cell_type": "code", "execution_count": None, "id": "solution", "outputs": [], "source": source,
            "metadata": {"nbgrader": {"grade": False, "grade_id": "solution", "locked": False, "solution": True}}}
    return {"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


# --- running the report and reading what it wrote --------------------------------------------------

def report(*args, cwd=REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autograder", "report", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=600)


def read_csv(path: Path) -> list:
    with open(path, newline="") as f:
        return list(csv.reader(f))


def by_first(rows: list) -> dict:
    return {row[0]: row for row in rows[1:]}


class Tables(HTMLParser):
    """The tables of a page as {id: [[cell text]]}, the names behind <details> and the page's images."""

    def __init__(self, text: str):
        super().__init__()
        self.tables, self.details, self.images, self._table, self._cell, self._in_details = {}, [], [], None, None, False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self._table = self.tables.setdefault(attrs.get("id"), [])
        elif tag == "tr" and self._table is not None:
            self._table.append([])
        elif tag in ("td", "th") and self._table is not None:
            self._cell = ""
        elif tag == "details":
            self._in_details = True
            self.details.append("")
        elif tag == "img":
            self.images.append(attrs)

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self._table[-1].append(self._cell.strip())
            self._cell = None
        elif tag == "table":
            self._table = None
        elif tag == "details":
            self._in_details = False

    def handle_data(self, data):
        if self._in_details:
            self.details[-1] += data
        elif self._cell is not None:
            self._cell += data


def assert_page_matches_csv(page: Tables, out: Path) -> int:
    """Every table on the page has the cells of its CSV file (names columns aside); returns how many."""
    for table_id, rows in page.tables.items():
        written = read_csv(out / f"report-{table_id}.csv")
        shown_columns = len(rows[0])
        assert [row[:shown_columns] for row in written] == rows, table_id
    return len(page.tables)
