"""Whatever is handed in, loading never crashes: every malformed input gets a results file with the
reason and exit status 2 when nothing can be graded; what can be graded is graded (a broken
knowledge.py costs the knowledge check only); names and messages reach the terminal and the files
without control characters; every CSV opens in a spreadsheet as data, never as a formula."""
import csv
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autograder.core import errors, handin
from autograder.core import rubric as rubric_file
from autograder.core.paths import ASSIGNMENT, REFERENCE, REPO
from autograder.intake import notebook, route, submission
from autograder.record import results
from autograder.record.grade import failure
from autograder.reporting import exports, sources
from autograder.reporting.sources import Record

ESC = "\x1b"
# A file name that draws a fake score table: clear the screen, home the cursor, then a line of its own.
FAKE_SCORE = "x\x1b[2J\x1b[H\nalice: 95 \u2215 95 points\x1b[8m"
DEEP_JSON = '{"cells": ' + "[" * 100_000 + "]" * 100_000 + "}"


def notebook_text(*sources, metadata=None) -> str:
    return json.dumps({"cells": [{"cell_type": "code", "metadata": metadata or {}, "source": s} for s in sources]})


def grade_cli(path: Path, tmp_path: Path, *options) -> tuple:
    """`python -m autograder grade PATH --results r.json` as a TA runs it: (exit status, stdout,
    stderr, the results file). The timing device is named so that nothing imports torch to ask."""
    target = tmp_path / "r.json"
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(path), "--results", str(target),
                           "--timing-device", "cpu", *options], cwd=REPO, capture_output=True, text=True, timeout=600)
    return done.returncode, done.stdout, done.stderr, (json.loads(target.read_text()) if target.exists() else None)


# ------------------------------------------------------------------------------------------------
# Nothing can be graded: exit status 2, a results file, the reason
# ------------------------------------------------------------------------------------------------

UNGRADABLE = {
    "deeply nested JSON": (DEEP_JSON, "is not a notebook"),
    "a JSON list, not a notebook": ("[1, 2]", "is not a notebook"),
    "cells that are not a list": (json.dumps({"cells": 5}), '"cells" is not a list'),
    "bytes that are not JSON": (b"\x89PNG\r\n\x1a\n\x00\xff" * 100, "is not a notebook"),
    "over the size limit": (json.dumps({"cells": [], "pad": "x" * (handin.MAX_SUBMISSION_BYTES + 1)}),
                            "byte limit"),
}


@pytest.mark.parametrize("case", sorted(UNGRADABLE))
def test_a_malformed_notebook_gets_a_results_file_with_the_reason_and_exit_2(tmp_path, case):
    content, reason = UNGRADABLE[case]
    path = tmp_path / "bob.ipynb"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    code, out, err, data = grade_cli(path, tmp_path)
    assert "Traceback" not in err and "Traceback" not in out, err[-2000:]
    assert code == 2 and data is not None, (code, out, err[-2000:])
    assert data["extra_data"]["status"] == "error" and reason in data["output"], data["output"]
    assert data["score"] == 0 and data["extra_data"]["max_score"] > 0


def test_escapes_and_newlines_in_names_never_reach_the_terminal_or_the_results(tmp_path):
    """The submission folder's own name (the table's heading) and a file inside it both draw a fake
    score table; the terminal sees each on one line, without an escape byte."""
    folder = tmp_path / f"bob{FAKE_SCORE}"
    folder.mkdir()
    (folder / f"work{FAKE_SCORE}.ipynb").write_text(DEEP_JSON)
    code, out, err, data = grade_cli(folder, tmp_path)
    assert code == 2 and data is not None and "Traceback" not in err
    for text in (out, err, json.dumps(data, ensure_ascii=False)):
        assert ESC not in text
    assert not any(line.startswith("alice") for line in out.splitlines()), out
    assert "workx?alice: 95 \u2215 95 points.ipynb is not a notebook" in out


def test_a_graded_submissions_table_and_results_show_its_name_on_one_line():
    from autograder.pipeline import grading

    rubric = rubric_file.load()
    grade = grading.Grade(f"bob{FAKE_SCORE}", "sandbox", ("public",))
    table = results.table(grade, rubric)
    assert ESC not in table and table.splitlines()[0].startswith("bobx?alice: 95 \u2215 95 points: 0 / 0 points")
    data = results.to_gradescope(grade, rubric)
    assert data["extra_data"]["submission"] == "bobx?alice: 95 \u2215 95 points"


def test_a_batch_gives_every_malformed_submission_its_results_file_and_a_row(tmp_path):
    inbox, out = tmp_path / "inbox", tmp_path / "out"
    inbox.mkdir()
    (inbox / "deep.ipynb").write_text(DEEP_JSON)
    (inbox / "cells.ipynb").write_text(json.dumps({"cells": {"a": 1}}))
    (inbox / f"=HYPERLINK(1){FAKE_SCORE}.ipynb").write_text("[1]")
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(inbox), "--batch", "--out", str(out),
                           "--jobs", "1", "--timing-device", "cpu"], cwd=REPO, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert ESC not in done.stdout + done.stderr
    rows = list(csv.DictReader((out / "grades.csv").open()))
    assert len(rows) == 3 and {r["status"] for r in rows} == {"error"}, rows
    assert ESC not in (out / "grades.csv").read_text()
    assert not any(ESC in p.name or "\n" in p.name for p in out.iterdir()), "results files' names are cleaned too"
    assert any(r["submission"].startswith("'=HYPERLINK(1)") for r in rows), "a formula-like name is quoted"
    for name in ("deep", "cells"):
        found = results.load(out / f"{name}.json")
        assert found.status == "error" and "is not a notebook" in found.output


# ------------------------------------------------------------------------------------------------
# What can be graded is graded
# ------------------------------------------------------------------------------------------------

def test_a_knowledge_py_that_does_not_parse_costs_the_knowledge_check_only(tmp_path):
    folder = tmp_path / "carol"
    folder.mkdir()
    (folder / "mhsa.py").write_text(REFERENCE.read_text())
    (folder / "knowledge.py").write_text('Q1_ANSWER = "b"\nQ2_ANSWER = (\nQ3_ANSWER = True\n')
    code, out, err, data = grade_cli(folder, tmp_path, "--suite", "public")  # the public suite: quicker
    assert code == 0 and "Traceback" not in err, err[-2000:]
    parts = data["extra_data"]["parts"]
    code_parts = [p.name for p in rubric_file.load().parts.values() if p.functions and p.name != "timing"]
    assert all(parts[p]["score"] == parts[p]["max_score"] > 0 for p in code_parts), parts
    note = next(n for n in data["extra_data"]["notes"] if n.startswith("knowledge check"))
    assert "knowledge.py is not valid Python" in note and "line 2" in note and "(2 found)" in note
    assert "knowledge.py is not valid Python" in out


def test_answers_on_lines_of_their_own_are_read_from_a_broken_knowledge_py(tmp_path):
    path = tmp_path / "knowledge.py"
    path.write_text('Q1_ANSWER = "b"\ndef broken(:\nQ3_ANSWER: bool = True\nQ4_ANSWER = [[[\n')
    answers, notes = submission.read_knowledge(path)
    assert answers == {"Q1_ANSWER": "b", "Q3_ANSWER": True} and "not valid Python" in notes[0]


def test_knowledge_py_is_read_never_run(tmp_path):
    marker = tmp_path / "ran"
    path = tmp_path / "knowledge.py"
    path.write_text(f"open({str(marker)!r}, 'w').close()\nQ1_ANSWER = __import__('os').getcwd()\nQ2_ANSWER = 3\n")
    answers, notes = submission.read_knowledge(path)
    assert not marker.exists() and answers["Q2_ANSWER"] == 3 and notes == ()
    assert type(answers["Q1_ANSWER"]).__name__ == "Unreadable"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_knowledge_py_that_is_not_a_file_costs_the_knowledge_check_only(tmp_path):
    (tmp_path / "mhsa.py").write_text(REFERENCE.read_text())
    os.mkfifo(tmp_path / "knowledge.py")  # reading it would block forever
    work = tmp_path / "work"
    work.mkdir()
    loaded = submission.load(tmp_path, work)
    assert loaded.source.read_text() == REFERENCE.read_text() and loaded.knowledge == {}
    assert any("is not a regular file" in n for n in loaded.notes)


def test_cells_of_the_wrong_shape_are_left_out_with_a_note_and_the_rest_is_read(tmp_path):
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps({"cells": [
        "not a cell", 7,
        {"cell_type": "code", "metadata": [1, 2], "source": "a = 1"},                  # metadata not a mapping
        {"cell_type": "code", "metadata": {"nbgrader": "yes"}, "source": "b = 2"},     # nbgrader not a mapping
        {"cell_type": "code", "metadata": {}, "source": [1, 2]},                        # source not text
        {"cell_type": "code", "metadata": {"nbgrader": {"solution": True, "grade_id": "g\nimport os"}},
         "source": "def f(:\n"},                                                      # a newline in a grade id
        {"cell_type": "code", "metadata": {}, "source": "y = " + "a." * 100_000 + "b"},  # too deep to compile
        {"cell_type": "code", "metadata": {}, "source": "Q1_ANSWER = 'c'"},
    ]}))
    found = notebook.extract(path)
    assert "a = 1" in found.source and "b = 2" in found.source and found.answers == {"Q1_ANSWER": "c"}
    assert any("its source is not text" in n for n in found.notes)
    assert any("solution cell g?import os" in n for n in found.notes)
    assert any("nested too deeply" in n or "RecursionError" in n for n in found.notes)
    assert "\nimport os" not in found.source, "a grade id cannot turn the header comment into code"
    compile(found.source, "nb", "exec")


# ------------------------------------------------------------------------------------------------
# Bounds
# ------------------------------------------------------------------------------------------------

def test_route_reads_a_bounded_number_of_notebooks(tmp_path, monkeypatch):
    """Twenty notebooks beside the stub took route.pick minutes; it reads at most NOTEBOOKS_WEIGHED,
    mhsa.ipynb first, and says how many it did not."""
    (tmp_path / "mhsa.py").write_text(ASSIGNMENT.read_text())
    stub_notebook = (REPO / "assignment" / "mhsa.ipynb").read_text()
    for i in range(20):
        (tmp_path / f"copy{i:02}.ipynb").write_text(stub_notebook)
    (tmp_path / "mhsa.ipynb").write_text(stub_notebook)
    read = []
    real = route.notebook_source
    monkeypatch.setattr(route, "notebook_source", lambda path: read.append(path.name) or real(path))
    chosen = route.pick(tmp_path)
    assert read == ["mhsa.ipynb", "copy00.ipynb", "copy01.ipynb"]
    assert chosen.path.name == "mhsa.py" and "18 more notebook(s)" in chosen.note


def test_the_report_reads_results_and_code_within_bounds(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "MAX_READ_BYTES", 1000)
    (tmp_path / "big.json").write_text(json.dumps({"score": 1, "pad": "x" * 2000}))
    assert results.load_any(tmp_path / "big.json") is None
    os.mkfifo(tmp_path / "fifo.json")  # would block an unbounded open().read()
    started = time.monotonic()
    assert results.load_any(tmp_path / "fifo.json") is None and time.monotonic() - started < 5
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "small.py").write_text(REFERENCE.read_text())
    (inbox / "huge.py").write_text(REFERENCE.read_text() + "\n" + "x = 1\n" * 60_000)
    code, problems = sources.submission_sources(inbox)
    assert set(code) == {"small"} and any(p.startswith("huge: ") and "not compared" in p for p in problems)


# ------------------------------------------------------------------------------------------------
# One way to clean text; CSV cells that cannot be formulas
# ------------------------------------------------------------------------------------------------

def test_text_is_cleaned_one_way():
    assert results.printable is errors.clean_text
    forged = "\x1b[2J\x1b[Halice: 95 / 95\x1b]0;title\x07\x9b31m ok\r\nnext\x00\u202eevil"
    assert errors.clean_text(forged) == "alice: 95 / 95 ok\nnext??evil"
    assert errors.clean_name("a\nb\tc\x1b[1m") == "a?b?c"
    assert errors.clean_text("x" * 100_000, cap=100).endswith("[... cut: 100,000 characters in all]")


@pytest.mark.parametrize("cell, written", [
    ("=HYPERLINK(\"http://evil\")", "'=HYPERLINK(\"http://evil\")"),
    ("+cmd|' /C calc'!A0", "'+cmd|' /C calc'!A0"),
    ("-2+3", "'-2+3"),
    ("@SUM(A1:A9)", "'@SUM(A1:A9)"),
    ("\tx", "'\tx"),
    ("-1.5", "-1.5"),            # a number, negative or not, stays a number
    ("+2", "+2"),
    ("-1e-3", "-1e-3"),
    (-1.5, -1.5),
    (95, 95),
    ("", ""),
    ("alice", "alice"),
    ("a\x1b[2Jb", "ab"),
])
def test_formula_cells_are_quoted_and_numbers_are_not(cell, written):
    assert results.spreadsheet_cell(cell) == written


def test_every_csv_export_quotes_formulas(tmp_path):
    record = Record(name="=cmd()", score=-1.5, max_score=95.0, parts={"sdpa": results.PartRecord(20.0, 20.0)})
    student = exports.Student("=cmd()", name="@bob", id="+1x", section="-A")
    generic, _ = exports.generic_csv([(student, record)], 95.0, ["sdpa"])
    canvas, _ = exports.canvas_csv([(student, record)], 95.0, "=MHSA")
    generic_rows = list(csv.reader(io.StringIO(generic)))
    assert generic_rows[1][:7] == ["'+1x", "", "", "'@bob", "'-A", "'=cmd()", "-1.50"]
    assert list(csv.reader(io.StringIO(canvas)))[0][-1] == "'=MHSA"
    folder = _results_folder(tmp_path)
    results.write_grades_csv(folder, ["=1+1"], rubric_file.load())
    assert list(csv.reader((folder / results.GRADES_CSV).open()))[1][0] == "'=1+1"


def _results_folder(tmp_path: Path) -> Path:
    rubric = rubric_file.load()
    grade = failure("=1+1", "error", "unreadable", 950_000, "sandbox")
    results.write_json_atomic(tmp_path / "=1+1.json", results.to_gradescope(grade, rubric))
    return tmp_path
