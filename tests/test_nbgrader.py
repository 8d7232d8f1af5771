"""The nbgrader course with the real nbgrader on a temporary copy of course/: generate_assignment,
autograde (reference, untouched, buggy and tampering notebooks), export, generate_feedback. Also the
kernel sandbox and the stderr-warning filter on their own. The isolated regrade
(`python -m autograder gradebook`) is tested on a whole class in tests/test_nbgrader_course.py."""
import html
import json
import re
import shutil
import subprocess
import sys

import pytest
from nbgrader.api import Gradebook

from autograder.core import rubric
from autograder.core.rubric import REPO
from autograder.intake import knowledge, notebook
from autograder.isolation.host.levels import sandbox_available
from tests import fresh_machine

COURSE = REPO / "course"
STUDENTS = ("reference", "untouched", "buggy", "tamper")
NO_SCALE = " / math.sqrt(q.size(-1))"
# A student cell that empties every later cell before it runs: the tests in the kernel pass vacuously.
TAMPER = "get_ipython().input_transformers_cleanup.append(lambda lines: [])"


def run(args, cwd, check=True):
    result = subprocess.run([sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True, env=fresh_machine.ENV,
                            timeout=1200)
    assert not check or result.returncode == 0, f"{args} failed:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
    return result


def answered(nb):
    """The notebook with every knowledge answer set to the key's."""
    key = knowledge.load_key()
    for cell in nb["cells"]:
        match = re.fullmatch(r"(Q\d+)_ANSWER = None", "".join(cell["source"]))
        if match:
            cell["source"] = f"{match[1]}_ANSWER = {key[match[1]]!r}"
    return nb


def submissions(source, release):
    """student -> notebook: the reference (with the key's answers), the untouched release, the
    reference without the 1/sqrt(d_k) scale, and the release with a tampering cell."""
    reference = answered(json.loads(source))
    buggy = answered(json.loads(source))
    for cell in buggy["cells"]:
        if cell["id"] == "scaled-dot-product-attention":
            cell["source"] = "".join(cell["source"]).replace(NO_SCALE, "")
    tamper = json.loads(release)
    helpers = next(i for i, c in enumerate(tamper["cells"]) if c["id"] == "test-helpers")
    tamper["cells"].insert(helpers + 1, {"cell_type": "code", "execution_count": None, "id": "mine",
                                         "metadata": {}, "outputs": [], "source": TAMPER})
    return {"reference": reference, "untouched": json.loads(release), "buggy": buggy, "tamper": tamper}


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A copy of course/ beside a link to the autograder package: the layout of the repository, so
    nbgrader runs as an instructor would run it, with no PYTHONPATH."""
    repo = tmp_path_factory.mktemp("nbgrader")
    (repo / "autograder").symlink_to(REPO / "autograder")
    root = repo / "course"
    shutil.copytree(COURSE, root, ignore=shutil.ignore_patterns(
        "release", "submitted", "autograded", "feedback", "downloaded", "isolated", "gradebook.db", "__pycache__",
        ".ipynb_checkpoints"))
    run(["nbgrader", "generate_assignment", notebook.ASSIGNMENT], root)
    release = (root / "release" / notebook.ASSIGNMENT / f"{notebook.ASSIGNMENT}.ipynb").read_text()
    source = (root / "source" / notebook.ASSIGNMENT / f"{notebook.ASSIGNMENT}.ipynb").read_text()
    assert NO_SCALE in source
    for student, nb in submissions(source, release).items():
        target = root / "submitted" / student / notebook.ASSIGNMENT / f"{notebook.ASSIGNMENT}.ipynb"
        target.parent.mkdir(parents=True)
        target.write_text(json.dumps(nb))
    log = run(["nbgrader", "autograde", notebook.ASSIGNMENT], root)
    assert ("kernel in the bubblewrap sandbox" in log.stdout + log.stderr) == sandbox_available()
    return root


def part_scores(root, student, field="auto_score"):
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        scores = {}
        for cell in gb.find_submission_notebook(notebook.ASSIGNMENT, notebook.ASSIGNMENT, student).grades:
            part = notebook.part_of_cell(cell.name)
            if part is not None:
                scores[part] = round(scores.get(part, 0.0) + (getattr(cell, field) or 0.0), 4)
        return scores


def rubric_points():
    return {p.name: p.points for p in rubric.load().parts.values() if p.name not in notebook.OUTSIDE_NOTEBOOK}


def test_generate_assignment_gives_the_committed_student_notebook(course):
    release = course / "release" / notebook.ASSIGNMENT / f"{notebook.ASSIGNMENT}.ipynb"
    assert notebook.normalize(release.read_text()) == (REPO / notebook.STUDENT_NOTEBOOK).read_text()


def stub_raises(text: str) -> dict:
    """Solution cell -> its `raise NotImplementedError(...)` lines, for the cells that hold one."""
    cells = {cell["id"]: [line.strip() for line in "".join(cell["source"]).splitlines() if "NotImplementedError" in line]
             for cell in json.loads(text)["cells"]
             if cell["cell_type"] == "code" and cell["metadata"].get("nbgrader", {}).get("solution")}
    return {cell: lines for cell, lines in cells.items() if lines}


def test_generate_assignment_gives_each_stub_the_committed_notebooks_message(course):
    """nbgrader's own release, as the course's nbgrader_config.py runs it, untouched by any rewriting:
    every stub names its function and the handout, as in the committed notebook and assignment/mhsa.py."""
    released = stub_raises((course / "release" / notebook.ASSIGNMENT / f"{notebook.ASSIGNMENT}.ipynb").read_text())
    assert released == stub_raises((REPO / notebook.STUDENT_NOTEBOOK).read_text())
    stubs = [line.strip() for line in (REPO / "assignment" / "mhsa.py").read_text().splitlines()
             if "NotImplementedError(" in line]
    assert sorted(line for lines in released.values() for line in lines) == sorted(stubs)
    assert "raise NotImplementedError()" not in stubs


def test_autograde_scores_reference_untouched_and_buggy_notebooks(course):
    full = rubric_points()
    assert part_scores(course, "reference") == full  # torch's warnings on stderr cost nothing
    assert part_scores(course, "untouched") == dict.fromkeys(full, 0.0)
    unaffected = ("heads", "masks", "knowledge")  # the missing scale breaks everything built on sdpa
    assert part_scores(course, "buggy") == {p: full[p] if p in unaffected else 0.0 for p in full}
    assert part_scores(course, "tamper") == full  # fooled in the kernel: tests/test_nbgrader_course.py


def test_export_writes_every_students_total(course):
    run(["nbgrader", "export", "--to", "grades.csv"], course)
    rows = (course / "grades.csv").read_text().splitlines()
    totals = {r.split(",")[3]: float(r.split(",")[9]) for r in rows[1:]}
    assert totals == {"reference": 95.0, "untouched": 0.0, "buggy": 30.0, "tamper": 95.0}


def test_feedback_shows_no_hidden_test_source(course):
    run(["nbgrader", "generate_feedback", notebook.ASSIGNMENT], course)
    source = [c["source"] for c in json.loads((REPO / notebook.SOURCE_NOTEBOOK).read_text())["cells"]]
    hidden = "\n".join(m for s in source for m in re.findall(re.escape(notebook.HIDDEN_BEGIN) + "(.*?)" +
                                                              re.escape(notebook.HIDDEN_END), "".join(s), re.S))
    visible = "\n".join(re.sub(re.escape(notebook.HIDDEN_BEGIN) + ".*?" + re.escape(notebook.HIDDEN_END), "",
                               "".join(s), flags=re.S) for s in source)
    secret = {line.strip() for line in hidden.splitlines() if len(line.strip()) > 12} - set(map(str.strip, visible.splitlines()))
    assert len(secret) > 50
    for student in STUDENTS:
        page = html.unescape(re.sub(r"<[^>]+>", "", (course / "feedback" / student / notebook.ASSIGNMENT /
                                                     f"{notebook.ASSIGNMENT}.html").read_text()))
        assert not [line for line in secret if line in page], student
        assert "HIDDEN TESTS" not in page
    buggy = html.unescape((course / "feedback" / "buggy" / notebook.ASSIGNMENT / f"{notebook.ASSIGNMENT}.html").read_text())
    assert "weights with a bool mask (4, 6)" in buggy  # a hidden test's own message is kept


@pytest.mark.skipif(not sandbox_available(), reason="bubblewrap does not work here")
def test_the_kernel_sandbox_hides_the_course_and_the_network(tmp_path, monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.syspath_prepend(str(COURSE))
    from mhsa_nbgrader.sandbox import SandboxedKernelManager

    course = tmp_path / "course"
    workdir = course / "autograded" / "someone" / "mhsa"
    workdir.mkdir(parents=True)
    (course / "gradebook.db").write_text("grades")
    probe = """
import json, os, socket
def attempt(action):
    try:
        action()
        return "allowed"
    except OSError as err:
        return type(err).__name__
found = {
    "network": attempt(lambda: socket.create_connection(("1.1.1.1", 53), timeout=3)),
    "notebook": attempt(lambda: open("probe.ipynb").read()),
    "gradebook": os.path.exists(%r),
    "reference": os.path.exists(%r),
    "write": attempt(lambda: open("scratch.txt", "w").write("x")),
}
print(json.dumps(found))
""" % (str(course / "gradebook.db"), str(REPO / "reference"))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(probe)])
    nbformat.write(nb, workdir / "probe.ipynb")
    kernel = SandboxedKernelManager(kernel_name="python3", hidden=[str(course)])
    NotebookClient(nb, km=kernel, timeout=120, resources={"metadata": {"path": str(workdir)}}).execute()
    outputs = nb.cells[0].outputs
    found = json.loads(next(o.text for o in outputs if o.get("name") == "stdout"))
    assert found == {"network": found["network"], "notebook": "PermissionError", "gradebook": False,
                     "reference": False, "write": "allowed"}
    assert found["network"] != "allowed", found
    assert (workdir / "scratch.txt").read_text() == "x"


def test_only_stderr_made_of_warnings_is_dropped():
    from nbformat.v4 import new_code_cell, new_output
    from nbgrader.preprocessors import IgnorePattern
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(COURSE)).load_config()
    assert config.IgnorePattern.enabled
    warning = ("/torch/nn/modules/activation.py:1336: UserWarning: Support for mismatched key_padding_mask "
               "and attn_mask is deprecated. Use same type for both instead.\n  key_padding_mask = F._canonical_mask(\n")
    cell = new_code_cell(outputs=[new_output("stream", name="stderr", text=warning),
                                  new_output("stream", name="stderr", text=warning + "my own message\n"),
                                  new_output("stream", name="stdout", text=warning)])
    cell, _ = IgnorePattern(config=config).preprocess_cell(cell, {}, 0)
    assert [(o.name, o.text) for o in cell.outputs] == [("stderr", warning + "my own message\n"), ("stdout", warning)]
