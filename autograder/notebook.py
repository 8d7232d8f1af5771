"""The nbgrader notebook: generated from the single source of truth, and read back for grading.

Generated (`python -m autograder release --write`; `--check` fails when one is stale):
  course/source/mhsa/mhsa.ipynb  nbgrader's source notebook: reference/mhsa.py one definition per
                                 solution cell, the lesson (course/notebook/lesson.md), the test cells
                                 (course/notebook/tests/), the attention figure and the knowledge check
  assignment/mhsa.ipynb          what `nbgrader generate_assignment` makes of it: the student version
  assignment/knowledge.py        the knowledge check of the .py route
Read back without running anything: extract() (extract_submission() for the module and answers).
"""
import ast
import json
import re
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

from autograder import knowledge, stubs
from autograder import rubric as rubric_file
from autograder.paths import NOTEBOOK_SOURCES, REFERENCE

ORACLES = Path(__file__).with_name("oracles.py")

ASSIGNMENT = "mhsa"
SOURCES = NOTEBOOK_SOURCES
SOURCE_NOTEBOOK = f"course/source/{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
STUDENT_NOTEBOOK = f"assignment/{ASSIGNMENT}.ipynb"
KNOWLEDGE_MODULE = "assignment/knowledge.py"
HIDDEN_BEGIN, HIDDEN_END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
OUTSIDE_NOTEBOOK = ("timing",)  # needs a CUDA device and the reference's timing harness
IMPORTS_CELL = "imports"
TEST_CELL = re.compile(r"^test_(?P<part>[a-z]+)_")
CELL_HEADER = re.compile(r"^# %% (?P<kind>public|hidden) (?P<function>\w+)\s*$")
LESSON_HEADER = re.compile(r"^<!-- cell: (?P<name>\w+) -->\s*$")
METADATA = {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
            "language_info": {"name": "python"}}


def generated_files() -> dict:
    source = source_notebook()
    return {SOURCE_NOTEBOOK: source, STUDENT_NOTEBOOK: student_version(source),
            KNOWLEDGE_MODULE: knowledge.answers_module(knowledge.questions())}


# ------------------------------------------------------------------------------------------------
# The source notebook
# ------------------------------------------------------------------------------------------------

def source_notebook() -> str:
    rubric = rubric_file.load()
    prelude, definitions = split_module(REFERENCE.read_text())
    lesson = lesson_sections((SOURCES / "lesson.md").read_text())
    tests = test_cells(SOURCES / "tests", rubric, [name for name, _ in definitions])
    cells = [_markdown("lesson-intro", lesson.pop("intro")),
             _code(IMPORTS_CELL, prelude, locked=True),
             _code("test_helpers", helpers_cell(), locked=True)]
    for name, code in definitions:
        if name in lesson:
            cells.append(_markdown(f"lesson-{name}", lesson.pop(name)))
        cells.append(_code(name, code, solution=True))
        cells += tests.get(name, [])
    cells += [_markdown("lesson-attention_plot", lesson.pop("attention_plot")),
              _code("attention_plot", (SOURCES / "plot.py").read_text().strip(), locked=True),
              _markdown("lesson-knowledge", lesson.pop("knowledge")),
              *knowledge_cells(rubric.parts["knowledge"].points)]
    if lesson:
        raise ValueError(f"lesson.md: sections {sorted(lesson)} name no function of reference/mhsa.py")
    return _dumps({"cells": cells, "metadata": METADATA, "nbformat": 4, "nbformat_minor": 5})


def helpers_cell() -> str:
    """The read-only cell the test cells rely on: autograder/oracles.py, loaded as the module `oracles`
    (its own namespace, so that no name defined in a student's cell changes an expected value), then
    course/notebook/tests/helpers.py."""
    source = ORACLES.read_text()
    if "'''" in source:
        raise ValueError(f"{ORACLES.name} must not hold ''': the helper cell quotes it that way")
    loader = ("import sys\nimport types\n\noracles = types.ModuleType(\"oracles\")\n"
              f"sys.modules[\"oracles\"] = oracles\nexec(r'''{source}''', oracles.__dict__)")
    return loader + "\n\n\n" + (SOURCES / "tests" / "helpers.py").read_text().strip()


def split_module(source: str) -> tuple:
    """(the imports between the docstring and the first definition, [(name, definition source)])."""
    tree, lines = ast.parse(source), source.splitlines()
    body = tree.body[1:] if ast.get_docstring(tree) is not None else tree.body
    definitions = [n for n in body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    statements = [n for n in body if n not in definitions]
    if any(n.lineno > definitions[0].lineno for n in statements):
        raise ValueError("reference/mhsa.py: module-level code after the first definition has no cell to go to")
    start = tree.body[0].end_lineno if body is not tree.body else 0
    starts = [_first_line(n) - 1 for n in definitions] + [len(lines)]
    prelude = "\n".join(lines[start:starts[0]]).strip()
    # A definition runs to the next one: its last statement may be followed by `### END SOLUTION`.
    return prelude, [(n.name, "\n".join(lines[begin:end]).strip())
                     for n, begin, end in zip(definitions, starts, starts[1:])]


def _first_line(node) -> int:
    return min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])


def lesson_sections(text: str) -> dict:
    """name -> markdown of each `<!-- cell: name -->` section (text before the first is a comment)."""
    sections, name = {}, None
    for line in text.splitlines():
        header = LESSON_HEADER.match(line)
        if header:
            name = header["name"]
            if name in sections:
                raise ValueError(f"lesson.md: two sections named {name}")
            sections[name] = []
        elif name is not None:
            sections[name].append(line)
    return {name: "\n".join(body).strip() for name, body in sections.items()}


def test_cells(folder: Path, rubric, functions: list) -> dict:
    """function -> its test cells; a part's points (rubric.toml) are shared by the suites' shares,
    then evenly by the cells of each suite."""
    cells = {}
    for part in rubric.parts.values():
        if part.name in OUTSIDE_NOTEBOOK or not part.functions:
            continue
        parsed = _parse_test_file(folder / f"{part.name}.py")
        for kind, function, _ in parsed:
            if function not in part.functions or function not in functions:
                raise ValueError(f"tests/{part.name}.py: {function} is not a function of part {part.name}")
        kinds = {kind for kind, _, _ in parsed}
        if not kinds:
            raise ValueError(f"tests/{part.name}.py holds no test cell: part {part.name} would be worth 0")
        shares = {k: rubric.suite_weights[k] / sum(rubric.suite_weights[s] for s in kinds) for k in kinds}
        numbers = dict.fromkeys(kinds, 0)
        for kind, function, code in parsed:
            numbers[kind] += 1
            points = part.points * shares[kind] / sum(k == kind for k, _, _ in parsed)
            cells.setdefault(function, []).append(
                _test_cell(f"test_{part.name}_{kind}_{numbers[kind]}", function, kind, code, points))
    return cells


def _parse_test_file(path: Path) -> list:
    cells = []
    for line in path.read_text().splitlines():
        header = CELL_HEADER.match(line)
        if header:
            cells.append((header["kind"], header["function"], []))
        elif cells:
            cells[-1][2].append(line)
    return [(kind, function, "\n".join(code).strip()) for kind, function, code in cells]


def _test_cell(grade_id: str, function: str, kind: str, code: str, points: float) -> dict:
    worth = f"{points:g} point{'s' if points != 1 else ''}"
    if kind == "public":
        return _code(grade_id, f"# Tests of {function} ({worth}).\n{code}", grade=True, points=points)
    return _code(grade_id, f"# Hidden tests of {function} ({worth}): they run when your notebook is graded.\n"
                           f"{HIDDEN_BEGIN}\n{code}\n{HIDDEN_END}", grade=True, points=points)


def knowledge_cells(points: float) -> list:
    """Per question: the question, an answer cell and a test cell (the key only in its hidden part);
    written questions get a markdown answer cell graded by hand."""
    questions, key = knowledge.questions(), knowledge.load_key()
    each = points / len(knowledge.autograded(questions))
    cells = []
    for q in questions:
        name = q.id.lower()
        if not q.autograded:
            cells.append(_markdown(f"question-{name}", f"**{q.id}** (written answer, {q.points:g} point(s), "
                                                       f"graded by hand). {q.text}"))
            cells.append(_markdown(f"written_{name}", f"*Marking guide:* {q.guide}", solution=True,
                                   grade=True, points=q.points))
            continue
        choices = "".join(f"\n* `\"{letter}\"`: {text}" for letter, text in q.choices.items())
        cells.append(_markdown(f"question-{name}", f"**{q.id}.** {q.text}{choices}\n\n"
                                                   f"Answer in `{q.variable}` with {q.how_to_answer()}."))
        cells.append(_code(f"answer-{name}", f"{q.variable} = None"))
        test = (f"# Checks the form of your answer to {q.id}; whether it is right is checked when graded.\n"
                f"assert {q.form_check()}, {f'{q.id}: answer with {q.how_to_answer()}'!r}\n"
                f"{HIDDEN_BEGIN}\nassert {q.correct_check(key[q.id])}, {f'{q.id}: not the right answer'!r}\n"
                f"{HIDDEN_END}")
        cells.append(_code(knowledge_cell(q.id), test, grade=True, points=each))
    return cells


def _nbgrader(grade_id, solution=False, grade=False, locked=False, points=None) -> dict:
    if not (solution or grade or locked):
        return {}
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3,
            "solution": solution, "task": False}
    if grade:
        meta["points"] = round(points, 6)
    return {"nbgrader": meta}


def _code(cell_id, source, **nbgrader) -> dict:
    return {"cell_type": "code", "execution_count": None, "id": cell_id.replace("_", "-"),
            "metadata": _nbgrader(cell_id, **nbgrader), "outputs": [], "source": source}


def _markdown(cell_id, source, **nbgrader) -> dict:
    return {"cell_type": "markdown", "id": cell_id.replace("_", "-"), "metadata": _nbgrader(cell_id, **nbgrader),
            "source": source}


def _dumps(notebook: dict) -> str:
    """nbformat's own layout (indent 1, sorted keys, multi-line sources as lists), so that
    nbgrader's and Jupyter's rewrites leave the file unchanged."""
    import nbformat

    return nbformat.writes(nbformat.from_dict(notebook)) + "\n"


# ------------------------------------------------------------------------------------------------
# The student version: nbgrader's own generate_assignment, run on a scratch course
# ------------------------------------------------------------------------------------------------

def student_version(source: str) -> str:
    from nbgrader.converters import GenerateAssignment
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config import Config

    with tempfile.TemporaryDirectory(prefix="mhsa-generate-") as scratch:
        notebook = Path(scratch, "source", ASSIGNMENT, f"{ASSIGNMENT}.ipynb")
        notebook.parent.mkdir(parents=True)
        notebook.write_text(source)
        config = Config()
        config.CourseDirectory.root = scratch
        config.CourseDirectory.assignment_id = ASSIGNMENT
        config.GenerateAssignment.no_database = True  # what `--no-db` sets: the cells are the same
        config.SaveCells.enabled = False
        GenerateAssignment(coursedir=CourseDirectory(config=config), config=config).start()
        return normalize(Path(scratch, "release", ASSIGNMENT, f"{ASSIGNMENT}.ipynb").read_text())


def normalize(text: str) -> str:
    """A notebook as _dumps writes it: nbgrader's output in a byte-stable form, its bare stubs
    (`raise NotImplementedError()`) given the message of the .py stubs."""
    released = json.loads(text)
    for cell in released["cells"]:
        if cell["cell_type"] == "code" and cell["metadata"].get("nbgrader", {}).get("solution"):
            cell["source"] = stubs.named_raises("".join(cell["source"]))
    return _dumps(released)


# ------------------------------------------------------------------------------------------------
# Reading a submitted notebook back, without running it
# ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Extraction:
    source: str    # the student's program as one module, mhsa.py
    answers: dict  # Q<n>_ANSWER -> the literal value assigned (knowledge.Unreadable if not a literal)
    notes: list    # what was left out or changed, one line per cell, naming the cell


def extract_submission(path) -> tuple:
    """(mhsa.py equivalent of the notebook, knowledge answers): see extract()."""
    found = extract(path)
    return found.source, found.answers


def extract(path) -> Extraction:
    """The student's program, read back from a notebook without running anything.

    The module holds every code cell the student wrote or kept, in notebook order, as the kernel ran
    them, except the cells nbgrader replaces with its own (test cells and read-only cells; the
    read-only imports cell is kept, the student's code relies on it). A cell that does not compile
    is left out with a note, so that only what it defines fails its tests; IPython magics and shell
    escapes are removed with a note. The kernel runs every cell even after one raised, so each run
    of statements that are not definitions runs under `try`: one failing statement cannot stop the
    whole module from importing. Answers are the literal values assigned to Q<n>_ANSWER, the last
    one winning.
    """
    from autograder.submission import GradingError

    try:
        cells = json.loads(Path(path).read_text(errors="replace")).get("cells", [])
    except (ValueError, AttributeError) as err:
        raise GradingError(f"{Path(path).name} is not a notebook (not JSON with a list of cells: {err})") from None
    parts, answers, notes = [], {}, []
    for number, cell in enumerate(cells, start=1):
        meta = cell.get("metadata", {}).get("nbgrader", {}) if isinstance(cell, dict) else {}
        if not isinstance(cell, dict) or cell.get("cell_type") != "code" or meta.get("grade"):
            continue  # text, or a test cell: the grader's own
        if meta.get("locked") and meta.get("grade_id") != IMPORTS_CELL:
            continue  # a read-only cell (test helpers, the plot): nbgrader runs its own copy
        label = _cell_label(number, meta)
        code, magics = _without_magics(cell.get("source", ""))
        if magics:
            notes.append(f"{label}: IPython magics and shell commands removed: {'; '.join(magics)}")
        try:
            compile(code, label, "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as err:
            defined = ", ".join(DEFINITION.findall(code))
            notes.append(f"{label} was left out: it does not compile ({type(err).__name__}: {err.msg if isinstance(err, SyntaxError) else err}"
                         f"{f', line {err.lineno}' if getattr(err, 'lineno', None) else ''})"
                         + (f"; what it defines ({defined}) is missing" if defined else ""))
            continue
        parts.append(f"# {label}\n{_module_code(code)}")
        answers |= knowledge.read_answers(code)
    header = (f"# The program of notebook {Path(path).name}, by autograder.notebook.extract()\n"
              + "".join(f"# note: {note}\n" for note in notes))
    return Extraction("\n\n".join([header, *parts]) + "\n", answers, notes)


DEFINITION = re.compile(r"^(?:async\s+)?(?:def|class)\s+(\w+)", re.M)
MAGIC = re.compile(r"^(?P<indent>\s*)(?P<magic>[%!].*)$")
ASSIGNED_MAGIC = re.compile(r"^(?P<indent>\s*)(?P<target>[A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*)"
                            r"\s*=\s*(?P<magic>[%!].*)$")
HELP = re.compile(r"^(?P<indent>\s*)(?P<magic>[A-Za-z_][\w.]*\?{1,2})\s*$")
PYTHON_CELL_MAGICS = ("time", "timeit", "capture", "prun")
DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _cell_label(number: int, meta: dict) -> str:
    if meta.get("solution"):
        return f"cell {number} (solution cell {meta.get('grade_id', '?')})"
    if meta.get("grade_id"):
        return f"cell {number} ({meta['grade_id']})"
    return f"cell {number} (a cell you added)"


def _without_magics(source) -> tuple:
    """(cell source as Python, the magic lines removed): each becomes `pass` at its indentation,
    so that the block around it stays valid; `files = !ls` and `t = %timeit -o f()` bind None, as
    the names must exist for what follows; `obj?` (help) goes too. A cell magic whose body is not
    Python (%%writefile, %%bash, %%html ...) makes the whole cell go, as the kernel runs none of it;
    one whose body the kernel runs as Python (%%time, %%timeit, %%capture) keeps its body."""
    text = "".join(source) if isinstance(source, list) else str(source)
    first = text.lstrip().split("\n", 1)[0].strip()
    if first.startswith("%%") and first[2:].split(" ")[0] not in PYTHON_CELL_MAGICS:
        return "", [first]
    lines, removed = [], []
    for line in text.splitlines():
        magic = MAGIC.match(line) or HELP.match(line)
        assigned = ASSIGNED_MAGIC.match(line)
        if magic:
            removed.append(magic["magic"].strip())
            line = f"{magic['indent']}pass"
        elif assigned:
            removed.append(assigned["magic"].strip())
            line = f"{assigned['indent']}{assigned['target'].strip()} = None"
        lines.append(line)
    return "\n".join(lines), removed


def _module_code(code: str) -> str:
    """A compiled cell as module code: definitions as they are (the static scan attributes what it
    finds to the definition it is in), other statements under `try`, as the kernel went on after
    a cell that raised."""
    lines = code.splitlines()
    out, loose, cursor = [], [], 0
    for node in ast.parse(code).body:
        text = "\n".join(lines[max(_first_line(node) - 1, cursor):node.end_lineno])
        cursor = max(cursor, node.end_lineno)  # `a = 1; b = 2`: two statements, one line, taken once
        if not text or isinstance(node, ast.ImportFrom) and node.module == "__future__":
            continue  # a __future__ import is only valid at the top of a module; nothing here needs one
        if isinstance(node, DEFINITIONS):
            out.append(_guarded(loose))
            loose = []
            out.append(text)
        else:
            loose.append(text)
    out.append(_guarded(loose))
    return "\n".join(chunk for chunk in out if chunk)


def _guarded(statements: list) -> str:
    if not statements:
        return ""
    body = "\n".join(statements)
    return f"try:\n{textwrap.indent(body, '    ', lambda line: True)}\nexcept Exception:\n    pass"


def grade_knowledge(answers: dict) -> list:
    """Per-question results of the knowledge answers, worth the rubric's knowledge points together."""
    return knowledge.grade(answers, rubric_file.load().parts["knowledge"].points)


def knowledge_cell(question_id: str) -> str:
    """The grade id of the test cell of knowledge question `question_id` (Q3 -> test_knowledge_q3)."""
    return f"test_knowledge_{question_id.lower()}"


def part_of_cell(grade_id: str) -> str | None:
    """The rubric part an autograded test cell belongs to (None for other cells)."""
    match = TEST_CELL.match(grade_id)
    return match["part"] if match else None
