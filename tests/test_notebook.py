"""The generated nbgrader notebook and reading notebooks back, without running nbgrader or a kernel
(tests/test_nbgrader.py runs the real thing)."""
import ast
import json
import re

import pytest
import torch

from autograder.core import rubric
from autograder.core.rubric import REPO
from autograder.intake import knowledge, notebook

SOURCE = REPO / notebook.SOURCE_NOTEBOOK
STUDENT = REPO / notebook.STUDENT_NOTEBOOK
HIDDEN_REGION = re.compile(re.escape(notebook.HIDDEN_BEGIN) + ".*?" + re.escape(notebook.HIDDEN_END), re.S)


def cells(path):
    return [c | {"source": "".join(c["source"])} for c in json.loads(path.read_text())["cells"]]


def meta(cell):
    return cell["metadata"].get("nbgrader", {})


def write_notebook(path, sources):
    path.write_text(json.dumps({"cells": [{"cell_type": "code", "metadata": {}, "source": s, "outputs": []}
                                          for s in sources], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path


def test_generation_is_deterministic():
    course = rubric.load()
    assert notebook.source_notebook(course) == notebook.source_notebook(course) == SOURCE.read_text()


def test_points_per_part_are_the_rubrics():
    points = {}
    for cell in cells(SOURCE):
        part = notebook.part_of_cell(meta(cell).get("grade_id", ""))
        if part is not None:
            points[part] = points.get(part, 0) + meta(cell)["points"]
    expected = {p.name: p.points for p in rubric.load().parts.values() if p.name not in notebook.OUTSIDE_NOTEBOOK}
    assert points.keys() == expected.keys()
    for part, total in expected.items():
        assert points[part] == pytest.approx(total, abs=1e-5), part


def test_one_solution_cell_per_definition_of_the_reference():
    _, definitions = notebook.split_module((REPO / "reference" / "mhsa.py").read_text())
    solutions = {meta(c)["grade_id"]: c["source"] for c in cells(SOURCE) if meta(c).get("solution") and c["cell_type"] == "code"}
    assert list(solutions) == [name for name, _ in definitions]
    for name, code in definitions:
        assert solutions[name] == code
    assert solutions["MultiHeadSelfAttention"].startswith("class MultiHeadSelfAttention(nn.Module):")
    assert solutions["MultiHeadSelfAttention"].count("### BEGIN SOLUTION") == 2  # one region per method


def test_hidden_tests_and_the_key_stay_in_hidden_regions_of_test_cells():
    key = knowledge.load_key()
    checks = [q.correct_check(key[q.id]) for q in knowledge.autograded(knowledge.questions())]
    for cell in cells(SOURCE):
        if notebook.HIDDEN_BEGIN in cell["source"]:
            assert meta(cell).get("grade"), cell["id"]
        outside = HIDDEN_REGION.sub("", cell["source"])
        assert not any(check in outside for check in checks), cell["id"]
    released = STUDENT.read_text() + (REPO / notebook.KNOWLEDGE_MODULE).read_text()
    assert "HIDDEN TESTS" not in released and "BEGIN SOLUTION" not in released
    assert not any(json.dumps(check)[1:-1] in released or check in released for check in checks)


def test_the_notebook_and_the_py_route_judge_answers_alike():
    """Each knowledge test cell, run as Python, passes exactly when knowledge.check does."""
    key = knowledge.load_key()
    tests = {meta(c)["grade_id"]: c["source"] for c in cells(SOURCE) if meta(c).get("grade")}
    for q in knowledge.autograded(knowledge.questions()):
        code = tests[notebook.knowledge_cell(q.id)].replace(notebook.HIDDEN_BEGIN, "").replace(notebook.HIDDEN_END, "")
        for answer in (None, key[q.id], "a", "Z", "b ", True, False, 8, 8.0, 7, [1]):
            try:
                exec(code, {q.variable: answer})  # noqa: S102 - the repository's own test cell
                passed = True
            except AssertionError:
                passed = False
            assert passed == knowledge.check(q, key[q.id], answer)[0], (q.id, answer)


def test_source_notebook_extracts_to_the_reference():
    source, answers = notebook.extract_submission(SOURCE)
    reference = (REPO / "reference" / "mhsa.py").read_text()

    def definitions(text):
        return [ast.dump(n) for n in ast.parse(text).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]

    assert definitions(source) == definitions(reference)
    namespace = {}
    exec(compile(source, "extracted", "exec"), namespace)  # noqa: S102 - the reference itself
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 6)
    out, weights = namespace["scaled_dot_product_attention"](q, k, v)
    torch.testing.assert_close(out, torch.softmax(q @ k.transpose(1, 2) / 2, -1) @ v)
    assert answers == {q.variable: None for q in knowledge.autograded(knowledge.questions())}


def test_student_version_extracts_to_stubs():
    source, answers = notebook.extract_submission(STUDENT)
    namespace = {}
    exec(compile(source, "extracted", "exec"), namespace)  # noqa: S102 - nbgrader's stubs
    with pytest.raises(NotImplementedError):
        namespace["causal_mask"](3)
    assert set(answers.values()) == {None}


def test_extraction_reads_literals_only_and_never_runs_the_notebook(tmp_path):
    path = write_notebook(tmp_path / "mine.ipynb", [
        "%matplotlib inline\nimport numpy as np\nQ1_ANSWER = 'b'",
        "Q1_ANSWER = 'a'\nQ2_ANSWER = open('/etc/hostname').read()\nQ3_ANSWER: int = 8",
        "def broken(:\n    pass",
        "print('side effect')\nQ4_ANSWER = None",
    ])
    source, answers = notebook.extract_submission(path)
    assert answers["Q1_ANSWER"] == "a" and answers["Q3_ANSWER"] == 8 and answers["Q4_ANSWER"] is None
    assert isinstance(answers["Q2_ANSWER"], knowledge.Unreadable)
    assert "import numpy as np" in source and "def broken" not in source  # a cell that does not compile is left out


def test_solution_cells_and_imports_make_the_module(tmp_path):
    nb = json.loads(STUDENT.read_text())
    for cell in nb["cells"]:
        if cell["id"] == "causal-mask":
            cell["source"] = "def causal_mask(seq_len, device=None, dtype=torch.float32):\n    return np.zeros(1)\n"
    nb["cells"].insert(3, {"cell_type": "code", "metadata": {}, "outputs": [], "source": "import numpy as np\nx = 1"})
    path = tmp_path / "mhsa.ipynb"
    path.write_text(json.dumps(nb))
    source, _ = notebook.extract_submission(path)
    namespace = {}
    exec(compile(source, "extracted", "exec"), namespace)  # noqa: S102 - written above
    assert namespace["causal_mask"](3).shape == (1,) and namespace["x"] == 1  # the student's own cell is kept


def test_grade_knowledge():
    key = knowledge.load_key()
    points = rubric.load().parts["knowledge"].points
    full = knowledge.grade({f"{qid}_ANSWER": value for qid, value in key.items()}, points, {"knowledge_feedback": knowledge.PER_QUESTION})
    empty = knowledge.grade({}, points, {"knowledge_feedback": knowledge.PER_QUESTION})
    assert sum(r["score"] for r in full) == pytest.approx(points) and sum(r["max_score"] for r in full) == pytest.approx(points)
    assert sum(r["score"] for r in empty) == 0 and {r["status"] for r in empty} == {"failed"}
    assert {"name", "part", "question", "score", "max_score", "status", "output"} <= set(full[0])


def test_knowledge_module_has_every_answer_variable_unset():
    answers = knowledge.read_answers((REPO / notebook.KNOWLEDGE_MODULE).read_text())
    assert answers == {q.variable: None for q in knowledge.autograded(knowledge.questions())}


def test_lesson_covers_every_definition():
    lesson = notebook.lesson_sections((notebook.SOURCES / "lesson.md").read_text())
    _, definitions = notebook.split_module((REPO / "reference" / "mhsa.py").read_text())
    names = [name for name, _ in definitions]
    assert set(lesson) <= {"intro", "attention_plot", "knowledge", *names}
    assert {"intro", "attention_plot", "knowledge", "scaled_dot_product_attention", "MultiHeadSelfAttention",
            "TransformerBlock"} <= set(lesson)
