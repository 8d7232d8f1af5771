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
from dataclasses import dataclass, field
from pathlib import Path

from autograder.core.errors import clean_name, clean_text
from autograder.core.paths import COURSE, NOTEBOOK_SOURCES, ORACLES, REFERENCE
from autograder.intake import cell_names, knowledge


ASSIGNMENT = "mhsa"
SOURCES = NOTEBOOK_SOURCES
SOURCE_NOTEBOOK = f"course/source/{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
COURSE_CONFIG = COURSE / "nbgrader_config.py"
STUDENT_NOTEBOOK = f"assignment/{ASSIGNMENT}.ipynb"
KNOWLEDGE_MODULE = "assignment/knowledge.py"
HIDDEN_BEGIN, HIDDEN_END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
OUTSIDE_NOTEBOOK = ("timing",)  # needs a CUDA device and the reference's timing harness


def nbgrader_points(rubric) -> tuple:
    """What nbgrader's maximum for this course is made of: (part -> points of the parts the notebook
    holds, the written questions, graded by hand in nbgrader's formgrader; they come with the
    notebook's knowledge check, or not at all)."""
    in_notebook = {name: part.points for name, part in rubric.parts.items() if name not in OUTSIDE_NOTEBOOK}
    return in_notebook, knowledge.hand_graded(rubric)
IMPORTS_CELL = "imports"
HELPERS_CELL = "test_helpers"  # the read-only cell of the test cells' helpers (oracles, _expect_close)
TEST_CELL = re.compile(r"^test_(?P<part>[a-z][a-z0-9]*)_")  # rubric.PART_NAME
CELL_HEADER = re.compile(r"^# %% (?P<kind>public|hidden) (?P<function>\w+)\s*$")
LESSON_HEADER = re.compile(r"^<!-- cell: (?P<name>\w+) -->\s*$")
# The Jupyter cell tag of a read-only cell that only teaches (a demonstration, a figure): the reruns of
# the tampering evidence leave it out where no later cell reads what it defines (rerun_program).
LESSON_ONLY = "lesson-only"
METADATA = {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
            "language_info": {"name": "python"}}


def generated_files(rubric) -> dict:
    """Path -> text of each generated file, with the course's `rubric` (its points and suite shares)."""
    source = source_notebook(rubric)
    return {SOURCE_NOTEBOOK: source, STUDENT_NOTEBOOK: student_version(source),
            KNOWLEDGE_MODULE: knowledge.answers_module(knowledge.questions())}


# ------------------------------------------------------------------------------------------------
# The source notebook
# ------------------------------------------------------------------------------------------------

def source_notebook(rubric) -> str:
    prelude, definitions = split_module(REFERENCE.read_text())
    lesson = lesson_sections((SOURCES / "lesson.md").read_text())
    tests = test_cells(SOURCES / "tests", rubric, [name for name, _ in definitions])
    cells = [_markdown("lesson-intro", lesson.pop("intro")),
             _code(IMPORTS_CELL, prelude, locked=True),
             _code(HELPERS_CELL, helpers_cell(), locked=True)]
    for name, code in definitions:
        if name in lesson:
            cells.append(_markdown(f"lesson-{name}", lesson.pop(name)))
        cells.append(_code(name, code, solution=True))
        cells += tests.get(name, [])
    cells += [_markdown("lesson-attention_plot", lesson.pop("attention_plot")),
              _code("attention_plot", (SOURCES / "plot.py").read_text().strip(), tags=[LESSON_ONLY], locked=True),
              *knowledge_section(lesson.pop("knowledge"), rubric)]
    if lesson:
        raise ValueError(f"lesson.md: sections {sorted(lesson)} name no function of reference/mhsa.py")
    return _dumps({"cells": cells, "metadata": METADATA, "nbformat": 4, "nbformat_minor": 5})


def knowledge_section(lesson: str, rubric) -> list:
    """The knowledge check's lesson and cells; none when the rubric does not grade it."""
    part = rubric.parts.get("knowledge")
    return [_markdown("lesson-knowledge", lesson), *knowledge_cells(part.points)] if part else []


def helpers_cell() -> str:
    """The read-only cell the test cells rely on: autograder/testing/oracles.py, loaded as the module `oracles`
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
    for part in rubric.code_parts.values():
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


def _code(cell_id, source, tags=(), **nbgrader) -> dict:
    return {"cell_type": "code", "execution_count": None, "id": cell_id.replace("_", "-"),
            "metadata": _nbgrader(cell_id, **nbgrader) | ({"tags": list(tags)} if tags else {}), "outputs": [],
            "source": source}


def lesson_only_cells(path) -> frozenset:
    """The grade ids of the read-only code cells of the instructor's notebook at `path` tagged
    LESSON_ONLY (a test cell or a solution cell never is one); none when it cannot be read."""
    try:
        cells = json.loads(Path(path).read_text()).get("cells", [])
    except (OSError, ValueError, AttributeError):
        return frozenset()
    found = set()
    for cell in cells if isinstance(cells, list) else []:
        if not isinstance(cell, dict) or not isinstance(cell.get("metadata"), dict):
            continue
        meta, tags = _nbgrader_metadata(cell), cell["metadata"].get("tags", [])
        if (cell.get("cell_type") == "code" and meta.get("locked") and not meta.get("grade")
                and not meta.get("solution") and isinstance(tags, list) and LESSON_ONLY in tags):
            found.add(meta.get("grade_id"))
    return frozenset(found - {None})


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
    """What `nbgrader generate_assignment` makes of `source`, with the course's own nbgrader_config.py
    (its stubs name their function: course/mhsa_nbgrader/stubs.py), in a scratch course folder."""
    from nbgrader.converters import GenerateAssignment
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config.loader import PyFileConfigLoader

    with tempfile.TemporaryDirectory(prefix="mhsa-generate-") as scratch:
        notebook = Path(scratch, "source", ASSIGNMENT, f"{ASSIGNMENT}.ipynb")
        notebook.parent.mkdir(parents=True)
        notebook.write_text(source)
        config = PyFileConfigLoader(COURSE_CONFIG.name, path=str(COURSE_CONFIG.parent)).load_config()
        config.CourseDirectory.root = scratch
        config.CourseDirectory.assignment_id = ASSIGNMENT
        config.GenerateAssignment.no_database = True  # what `--no-db` sets: the cells are the same
        config.SaveCells.enabled = False
        GenerateAssignment(coursedir=CourseDirectory(config=config), config=config).start()
        return normalize(Path(scratch, "release", ASSIGNMENT, f"{ASSIGNMENT}.ipynb").read_text())


def normalize(text: str) -> str:
    """A notebook as _dumps writes it: nbgrader's output in a byte-stable form."""
    return _dumps(json.loads(text))


# ------------------------------------------------------------------------------------------------
# Reading a submitted notebook back, without running it
# ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Extraction:
    source: str    # the student's program as one module, mhsa.py
    answers: dict  # Q<n>_ANSWER -> the literal value assigned (knowledge.Unreadable if not a literal)
    notes: list    # what was left out or changed, one line per cell, naming the cell


def extract_submission(path, name: str = "") -> tuple:
    """(mhsa.py equivalent of the notebook, knowledge answers): see extract()."""
    found = extract(path, name)
    return found.source, found.answers


def extract(path, name: str = "") -> Extraction:
    """The student's program, read back from a notebook without running anything; `name`: the
    notebook's name in messages, when `path` is a private copy of it.

    The module holds every code cell the student wrote or kept, in notebook order, as the kernel ran
    them, except the cells nbgrader replaces with its own (test cells and read-only cells; the
    read-only imports cell is kept, the student's code relies on it). A cell that does not compile
    is left out with a note, so that only what it defines fails its tests; IPython magics and shell
    escapes are removed with a note. The kernel runs every cell even after one raised, so each run
    of statements that are not definitions runs under `try`: one failing statement cannot stop the
    whole module from importing. Answers are the literal values assigned to Q<n>_ANSWER, the last
    one winning. `name` is the notebook's name as the student knows it (default: the file's), which
    the program's header and line map (LINE_MAP) give.
    """
    name = clean_name(name or Path(path).name)
    parts, answers, notes = [], {}, []
    for number, cell in enumerate(read_cells(path, name), start=1):
        meta = _nbgrader_metadata(cell) if isinstance(cell, dict) else {}
        if meta.get("grade") or meta.get("locked") and meta.get("grade_id") != IMPORTS_CELL:
            continue  # a test cell or a read-only cell (test helpers, the plot): nbgrader runs its own copy
        found = student_cell(number, cell, notes)
        if found is not None:
            label, module_code, cell_answers = found
            parts.append((number, label, [(f"# {label}", None), *module_code]))
            answers |= cell_answers
    header = (f"# The program of notebook {name}, by autograder.intake.notebook.extract()\n"
              + "".join(f"# note: {note}\n" for note in notes))
    lines, origins = header.splitlines(), {}
    for number, label, cell_lines in parts:
        lines.append("")
        for text, cell_line in cell_lines:
            lines.append(text)
            if cell_line is not None:
                origins[len(lines)] = (number, cell_line)
    labels = {number: label for number, label, _ in parts}
    lines.append(LINE_MAP + json.dumps({"notebook": name, "cells": labels,
                                        "runs": _runs(origins)}, separators=(",", ":")))
    return Extraction("\n".join(lines) + "\n", answers, notes)


def read_cells(path, name: str) -> list:
    """The cells of the notebook at `path` (`name` in messages): GradingError when it is not one."""
    from autograder.core.handin import GradingError

    try:
        cells = json.loads(Path(path).read_text(errors="replace")).get("cells", [])
    except (ValueError, AttributeError, RecursionError) as err:  # RecursionError: JSON nested thousands deep
        raise GradingError(f"{name} is not a notebook (not JSON with a list of cells: "
                           f"{clean_text(err, 200)})") from None
    if not isinstance(cells, list):
        raise GradingError(f"{name} is not a notebook (its \"cells\" is not a list)")
    return cells


def student_cell(number: int, cell, notes: list):
    """(label, module code lines, knowledge answers) of one code cell as the extraction keeps it, or
    None for a cell that is not code or is left out (why: appended to `notes`)."""
    if not isinstance(cell, dict) or cell.get("cell_type") != "code":
        return None  # text, or not a cell at all
    label = _cell_label(number, _nbgrader_metadata(cell))
    source = cell.get("source", "")
    if not (isinstance(source, str) or isinstance(source, list) and all(isinstance(s, str) for s in source)):
        notes.append(f"{label} was left out: its source is not text")
        return None
    code, magics = _without_magics(source)
    if magics:
        notes.append(f"{label}: IPython magics and shell commands removed: {clean_name('; '.join(magics))}")
    try:
        compile(code, label, "exec", dont_inherit=True)
        return label, _module_code(code), knowledge.read_answers(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as err:
        # RecursionError and MemoryError: code nested too deep for the parser or the syntax tree
        defined = ", ".join(DEFINITION.findall(code))
        reason = err.msg if isinstance(err, SyntaxError) else str(err) or "nested too deeply to read"
        notes.append(f"{label} was left out: it does not compile ({type(err).__name__}: {clean_name(reason)}"
                     f"{f', line {err.lineno}' if getattr(err, 'lineno', None) else ''})"
                     + (f"; what it defines ({clean_name(defined)}) is missing" if defined else ""))
        return None


# What the rerun program defines before the notebook's cells: where each test cell's outcome goes,
# and stand-ins for the kernel's own objects, which a plain module lacks: a call of display() or
# get_ipython() in honest code must not fail a test that passed in the kernel, and a hook installed
# through get_ipython() (an input transformer that empties every later cell) reaches nothing.
RERUN_OUTCOMES = "notebook_test_cells"  # the function whose result is grade id -> whether the cell passed
RERUN_PRELUDE = f"""\
__test_cells__ = {{}}


class _NoKernel:
    def __getattr__(self, name):
        return self

    def __call__(self, *args, **kwargs):
        return self

    def __iter__(self):
        return iter(())


def get_ipython():
    return _NoKernel()


def display(*objects, **kwargs):
    return None


def {RERUN_OUTCOMES}():
    return dict(__test_cells__)
"""


HIDDEN_REGION = re.compile(rf"^[ \t]*{re.escape(HIDDEN_BEGIN)}.*?^[ \t]*{re.escape(HIDDEN_END)}[ \t]*\n?", re.S | re.M)


def without_hidden_tests(source: str) -> str:
    """A test cell as students have it: its hidden-test regions removed, as nbgrader's ClearHiddenTests does."""
    return HIDDEN_REGION.sub("", source)


def rerun_program(path, released: dict, tests: set, name: str = "", seed: int = 0,
                  lesson_only: frozenset = frozenset()) -> str:
    """The notebook as one program that runs its test cells again, outside the student's kernel.

    Every cell in the notebook's order: the student's cells as extract() keeps them; in place of each
    read-only code cell and test cell, the instructor's version (`released`: grade id -> source as
    nbgrader recorded it, hidden tests included; `tests`: the grade ids that are test cells). Before
    each test cell the helpers cell runs again, so that a student's cell cannot change what a test
    compares with; each test cell's outcome is recorded (RERUN_OUTCOMES). Test cells the notebook no
    longer holds run at the end, as nbgrader's autograde adds them back. `seed` seeds torch's
    generator first: the test cells draw their inputs from it. A read-only cell in `lesson_only`
    (tagged LESSON_ONLY) is left out where no later cell of this notebook reads a name it binds
    (cell_names.may_leave_out): a demonstration that trains a model for seconds tests nothing."""
    name = clean_name(name or Path(path).name)
    helpers = released.get(HELPERS_CELL, "")
    prelude = RERUN_PRELUDE + f"\n\nimport torch as _torch\n_torch.manual_seed({int(seed)})"
    pieces, done, notes = [(None, prelude, prelude)], set(), []  # (grade id, source read, program text)
    for number, cell in enumerate(read_cells(path, name), start=1):
        grade_id = _nbgrader_metadata(cell).get("grade_id") if isinstance(cell, dict) else None
        if grade_id in released and grade_id not in done:
            done.add(grade_id)
            pieces.append((grade_id, released[grade_id],
                           _released_cell(grade_id, released[grade_id], helpers if grade_id in tests else None)))
        elif (found := student_cell(number, cell, notes)) is not None:
            code = "\n".join(text for text, _ in found[1])
            pieces.append((None, code, code))
    pieces += [(g, released[g], _released_cell(g, released[g], helpers))
               for g in released if g in tests and g not in done]
    names = [cell_names.of(source) for _, source, _ in pieces]
    again = [cell_names.of(helpers)]  # the helpers cell runs again before every test cell
    kept = [text if grade_id not in lesson_only or grade_id in tests
            or not cell_names.may_leave_out(names[i], names[:i], names[i + 1:] + again)
            else f"# {grade_id!r}: a lesson-only cell, left out (no later cell reads what it defines)"
            for i, (grade_id, _, text) in enumerate(pieces)]
    return "\n\n".join(kept) + "\n"


def _released_cell(grade_id: str, source: str, helpers) -> str:
    """A read-only cell as the instructor wrote it; a test cell (`helpers` not None) after the helpers,
    its outcome recorded."""
    run = lambda code, label: f"    exec(compile({code!r}, {label!r}, 'exec'), globals())"  # noqa: E731
    if helpers is None:
        return f"try:\n{run(source, grade_id)}\nexcept Exception:\n    pass"
    return (f"try:\n{run(helpers, HELPERS_CELL)}\n{run(source, grade_id)}\n"
            f"    __test_cells__[{grade_id!r}] = True\nexcept Exception:\n    __test_cells__[{grade_id!r}] = False")


# The last line of an extracted program: which notebook cell and line each of its lines comes from,
# so that what the student reads (a traceback, a finding of the static scan) names the cell they wrote.
LINE_MAP = "# notebook lines: "
PROGRAM_LINE = re.compile(r'File "mhsa\.py", line (?P<line>\d+)')


def _runs(origins: dict) -> list:
    """{program line: (cell, cell line)} as runs [first program line, cell, first cell line, length]."""
    runs = []
    for line, (cell, cell_line) in sorted(origins.items()):
        last = runs[-1] if runs else None
        if last and last[0] + last[3] == line and last[1] == cell and last[2] + last[3] == cell_line:
            last[3] += 1
        else:
            runs.append([line, cell, cell_line, 1])
    return runs


@dataclass(frozen=True)
class CellLines:
    """Program lines of an extracted notebook mapped back to its cells (see LINE_MAP)."""
    notebook: str = ""
    where: dict = field(default_factory=dict)  # program line -> "cell 7 (solution cell split_heads), line 3"

    @classmethod
    def of(cls, program: str) -> "CellLines":
        """The map of `program`, or an empty one when it is not an extracted notebook."""
        last = program.rstrip("\n").rsplit("\n", 1)[-1]
        if not last.startswith(LINE_MAP):
            return cls()
        try:
            found = json.loads(last[len(LINE_MAP):])
            where = {}
            for first, cell, cell_line, length in found["runs"]:
                label = found["cells"][str(cell)]
                where |= {first + i: f"{label}, line {cell_line + i}" for i in range(length)}
            return cls(str(found["notebook"]), where)
        except (ValueError, KeyError, TypeError):
            return cls()

    def line(self, number: int) -> str:
        """Where program line `number` was written: the cell and the line in it, or as it is."""
        return self.where.get(number, f"line {number}")

    def tracebacks(self, text: str) -> str:
        """`text` with every `File "mhsa.py", line N` of a traceback naming the notebook cell instead."""
        if not self.where:
            return text
        return PROGRAM_LINE.sub(lambda m: f'File "{self.notebook}", {self.line(int(m["line"]))}', text)


DEFINITION = re.compile(r"^(?:async\s+)?(?:def|class)\s+(\w+)", re.M)
MAGIC = re.compile(r"^(?P<indent>\s*)(?P<magic>[%!].*)$")
ASSIGNED_MAGIC = re.compile(r"^(?P<indent>\s*)(?P<target>[A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*)"
                            r"\s*=\s*(?P<magic>[%!].*)$")
HELP = re.compile(r"^(?P<indent>\s*)(?P<magic>[A-Za-z_][\w.]*\?{1,2})\s*$")
PYTHON_CELL_MAGICS = ("time", "timeit", "capture", "prun")
DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _nbgrader_metadata(cell: dict) -> dict:
    """The cell's nbgrader metadata; {} when it is missing or not a mapping (a hand-edited notebook)."""
    meta = cell.get("metadata")
    meta = meta.get("nbgrader") if isinstance(meta, dict) else None
    return meta if isinstance(meta, dict) else {}


def _cell_label(number: int, meta: dict) -> str:
    """How notes name a cell; the grade id is the notebook's text, so it is cleaned (it goes into a
    comment line of the extracted module, where a newline would turn the rest into code)."""
    grade_id = clean_name(meta.get("grade_id", "?"))
    if meta.get("solution"):
        return f"cell {number} (solution cell {grade_id})"
    if meta.get("grade_id"):
        return f"cell {number} ({grade_id})"
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


def _module_code(code: str) -> list:
    """A compiled cell as module code, as (line, the cell's line number it comes from or None):
    definitions as they are (the static scan attributes what it finds to the definition it is in),
    other statements under `try`, as the kernel went on after a cell that raised."""
    lines = code.splitlines()
    out, loose, cursor = [], [], 0
    for node in ast.parse(code).body:
        start = max(_first_line(node) - 1, cursor)
        taken = [(lines[i], i + 1) for i in range(start, node.end_lineno)]
        cursor = max(cursor, node.end_lineno)  # `a = 1; b = 2`: two statements, one line, taken once
        if not taken or isinstance(node, ast.ImportFrom) and node.module == "__future__":
            continue  # a __future__ import is only valid at the top of a module; nothing here needs one
        if isinstance(node, DEFINITIONS):
            out += _guarded(loose) + taken
            loose = []
        else:
            loose += taken
    return out + _guarded(loose)


def _guarded(statements: list) -> list:
    if not statements:
        return []
    return [("try:", None), *((f"    {text}", origin) for text, origin in statements),
            ("except Exception:", None), ("    pass", None)]


def knowledge_cell(question_id: str) -> str:
    """The grade id of the test cell of knowledge question `question_id` (Q3 -> test_knowledge_q3)."""
    return f"test_knowledge_{question_id.lower()}"


def part_of_cell(grade_id: str) -> str | None:
    """The rubric part an autograded test cell belongs to (None for other cells)."""
    match = TEST_CELL.match(grade_id)
    return match["part"] if match else None
