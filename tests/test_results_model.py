"""The one results model: autograder/record/results.py is the only code of autograder/ and gpu_checks/ that
reads or writes a results file (Gradescope's results.json, a batch's NAME.json) or grades.csv, and
the only code that builds, edits or reads a results dict. Everyone else goes through its operations
(load, load_any, of_grade, with_part, with_extra, decide, write_grades_csv, write) and reads the typed
Results they give (its fields: score, status, parts, held, tests...).

The walk reads every module with `ast`. Within one function (or a module's top level), it flags
  - reading or writing a file by itself (json.load/loads/dump/dumps, open, read_text, write_text,
    read_bytes, write_bytes, csv readers and writers, SpreadsheetWriter, write_atomic, read_regular)
    where the function deals with results: it names results.json or grades.csv (or the model's
    RESULTS_FILE, GRADES_CSV), or a results dict's keys ("extra_data"; "score" with "tests");
  - a dict built with an "extra_data" key: a results dict made by hand;
  - an assignment into a results dict's "extra_data": a results dict edited by hand;
  - a read of a results dict's "extra_data": a results dict parsed by hand, where Results has the field.
Docstrings do not count (they may describe results files).
"""
import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("autograder", "gpu_checks", "course")
MODEL = "autograder/record/results.py"
# Modules that may read results without the model, and why.
EXEMPT = {
    "gpu_checks/device_run.py": "the lent GPU machine's driver script is standard library only by design (a "
                                "broken environment is a finding, not a crash); it reads back the results of "
                                "the grades it ran, for its summary",
}
# A path to one of the files, not prose that names it ("give its results folder, not grades.csv")
FILE_PATH = re.compile(r"[\w./-]*\b(results\.json|grades\.csv)")
MODEL_NAMES = ("RESULTS_FILE", "GRADES_CSV")
RAW_JSON = {"load", "loads", "dump", "dumps"}
RAW_FILE = {"read_text", "write_text", "read_bytes", "write_bytes", "open"}
RAW_CSV = {"reader", "writer", "DictReader", "DictWriter"}
RAW_NAMES = {"open", "write_atomic", "read_regular", "SpreadsheetWriter"}


def _scopes(tree: ast.AST):
    """(name, nodes) for the module's top level and each function, a nested function on its own."""
    def own_nodes(root):
        todo, found = list(ast.iter_child_nodes(root)), []
        while todo:
            node = todo.pop()
            found.append(node)
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                todo.extend(ast.iter_child_nodes(node))
        return found

    yield "<module>", own_nodes(tree)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, own_nodes(node)


def _docstrings(tree: ast.AST) -> set:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _deals_with_results(nodes, docstrings) -> bool:
    texts = [n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)
             and id(n) not in docstrings]
    names = {n.attr for n in nodes if isinstance(n, ast.Attribute)} | {n.id for n in nodes if isinstance(n, ast.Name)}
    return (any(FILE_PATH.fullmatch(t) for t in texts) or bool(names & set(MODEL_NAMES))
            or "extra_data" in texts or {"score", "tests"} <= set(texts))


def _raw_io(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name) and func.id in RAW_NAMES:
        return func.id
    if isinstance(func, ast.Attribute):
        owner = func.value.id if isinstance(func.value, ast.Name) else ""
        if (owner == "json" and func.attr in RAW_JSON or owner == "csv" and func.attr in RAW_CSV
                or func.attr in RAW_FILE | RAW_NAMES):
            return f"{owner + '.' if owner else ''}{func.attr}"
    return None


def _extra_data_target(target) -> bool:
    """An assignment target inside a results dict's extra_data: data["extra_data"][...] = ..."""
    while isinstance(target, ast.Subscript):
        if isinstance(target.slice, ast.Constant) and target.slice.value == "extra_data":
            return True
        target = target.value
    return False


def findings(source: str, where: str) -> list:
    """What `source` does to results files and dicts outside the model, one line each."""
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    found = []
    for scope, nodes in _scopes(tree):
        if _deals_with_results(nodes, docstrings):
            found += [f"{where}:{n.lineno} {scope}: {io} of a results file by itself"
                      for n in nodes if isinstance(n, ast.Call) and (io := _raw_io(n))]
        found += [f"{where}:{n.lineno} {scope}: builds a results dict by hand" for n in nodes
                  if isinstance(n, ast.Dict) and any(isinstance(k, ast.Constant) and k.value == "extra_data"
                                                     for k in n.keys)]
        targets = [(n, t) for n in nodes if isinstance(n, (ast.Assign, ast.AugAssign, ast.Delete))
                   for t in (n.targets if isinstance(n, (ast.Assign, ast.Delete)) else [n.target])]
        edited = {id(t) for n, t in targets if _extra_data_target(t)}
        found += [f"{where}:{n.lineno} {scope}: edits a results dict by hand" for n, t in targets
                  if _extra_data_target(t)]
        found += [f"{where}:{n.lineno} {scope}: reads a results dict by hand" for n in nodes
                  if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load) and id(n) not in edited
                  and isinstance(n.slice, ast.Constant) and n.slice.value == "extra_data"]
    return sorted(set(found))


def test_only_the_results_model_reads_or_writes_results_files():
    found = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            where = path.relative_to(REPO).as_posix()
            if where != MODEL and where not in EXEMPT:
                found += findings(path.read_text(), where)
    assert not found, "results files and dicts go through autograder/record/results.py:\n" + "\n".join(found)


def test_the_walk_looks_at_the_code_that_handles_results():
    """Not trivially satisfied: the modules that handle results are there and deal with results, and
    the model itself, walked the same way, is found doing what only it may do."""
    model = (REPO / MODEL).read_text()
    assert any("write_grades_csv: write_atomic" in f for f in findings(model, MODEL))
    assert any("to_gradescope: builds a results dict by hand" in f for f in findings(model, MODEL))
    for where in ("gpu_checks/batch.py", "autograder/reporting/sources.py", "autograder/runners/batch.py"):
        tree = ast.parse((REPO / where).read_text())
        assert any(_deals_with_results(nodes, _docstrings(tree)) for _, nodes in _scopes(tree)), where


def test_a_writer_or_reader_of_its_own_is_caught():
    """The shapes this repository had before the model took them over: the timing merge's hand-made
    results, the gradebook's edit of a saved results file, grades.csv written with csv, a lenient
    reader of results.json."""
    examples = {
        "merge": '''
def with_timing(data, timing):
    extra = dict(data["extra_data"])
    score = round(sum(t["score"] for t in data["tests"]), 4)
    return {**data, "score": score, "extra_data": extra}
''',
        "gradebook": '''
def accept(saved):
    data = json.loads(saved.read_text())
    data["extra_data"] |= {"accepted": True}
    results.write_json_atomic(saved, data)
''',
        "csv": '''
def write_csv(out, rows):
    with open(out / "grades.csv", "w") as f:
        csv.writer(f).writerows(rows)
''',
        "reader": '''
def read_results(path):
    data = json.loads(path.read_text())
    return data if isinstance(data.get("score"), float) or isinstance(data.get("tests"), list) else None
''',
        "model name": '''
def export(folder):
    return (folder / results.RESULTS_FILE).read_text()
''',
    }
    for name, source in examples.items():
        assert findings(source, name), f"{name}: not caught"
    assert findings(examples["merge"], "m") == ["m:3 with_timing: reads a results dict by hand",
                                                "m:5 with_timing: builds a results dict by hand"]
    assert findings(examples["gradebook"], "g") == ["g:3 accept: json.loads of a results file by itself",
                                                    "g:3 accept: saved.read_text of a results file by itself",
                                                    "g:4 accept: edits a results dict by hand"]
    by_hand = findings('''
def grade_summary(target):
    data = results.load(target)
    return data["extra_data"].get("status") if data else None
''', "s")
    assert by_hand == ["s:4 grade_summary: reads a results dict by hand"]


def test_what_is_not_a_results_file_is_left_alone():
    """Other JSON and CSV (a timing file, the worker's protocol, a report), reading a results dict's
    fields, and a docstring that talks about results.json, are not findings."""
    legitimate = '''
def load_timing(path):
    """A per-submission timing file, merged into results.json later."""
    return json.loads(Path(path).read_text())


def failed_tests(data, part):
    return [row for row in data["tests"] if part in row["tags"] and row.get("status") == "failed"]


def grade_summary(target):
    found = results.load(target)
    return found.status if found else None


def report(path, rows):
    path.write_text(csv_report(rows))


def nbgrader_export(path):
    rows = list(csv.DictReader(path.open()))
    if not rows:
        raise ValueError(f"{path}: not an nbgrader export; for a batch, give its results folder, not grades.csv")
'''
    assert findings(legitimate, "ok") == []


def test_the_one_text_table_aligns_columns_and_widens_for_a_long_cell():
    from autograder.record.results import text_table

    lines = text_table([("part", "score", ""), ("sdpa", "20 / 20", "title"), ("a_long_part_name", "5 / 5", "")],
                       "<><", (9, 14))
    # the first column takes its longest cell (16), the second its minimum (14); no trailing spaces
    assert lines == [f"{'part':<16}  {'score':>14}", f"{'sdpa':<16}  {'20 / 20':>14}  title",
                     f"a_long_part_name  {'5 / 5':>14}"]
