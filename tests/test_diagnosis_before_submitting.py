"""The likely mistake is named before a student submits, the way they run their checks: `check` and
`pytest tests_public` as subprocesses name it in the part that holds it, with the words the graded
result uses; a correct solution hears of none. The table the diagnosis reads is model.py's results,
and model.py itself ships to nobody (tests/test_release.py runs `check` inside a built release)."""
import subprocess
import sys

import pytest
import torch

from autograder.core.paths import REFERENCE, REPO
from autograder.feedback import diagnosis
from autograder.feedback.diagnosis import predictions
from autograder.record.results import LIKELY_MISTAKE
from autograder.testing.backends import open_in_process

SCALE_LINE = "scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))"


@pytest.fixture(scope="module")
def unscaled(tmp_path_factory):
    """The reference without the 1/sqrt(d_k) scale: a mistake in sdpa that mhsa and block inherit."""
    source = REFERENCE.read_text()
    assert SCALE_LINE in source
    path = tmp_path_factory.mktemp("unscaled") / "mhsa.py"
    path.write_text(source.replace(SCALE_LINE, "scores = q @ k.transpose(-2, -1)"))
    return path


@pytest.fixture(scope="module")
def named(unscaled):
    """What the grader's diagnosis names for it, in-process (our own file)."""
    backend = open_in_process(unscaled)
    try:
        found = diagnosis.diagnose(backend, ["sdpa", "mhsa", "block"], source=unscaled.read_text())
    finally:
        backend.close()
    assert "sdpa" in found, found
    return found


def run(*args):
    return subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=600)


def test_check_names_the_likely_mistake_in_the_part_that_holds_it(unscaled, named):
    result = run("-m", "autograder", "check", str(unscaled))
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    sdpa_row = next(i for i, line in enumerate(lines) if line.strip().startswith("sdpa "))
    next_row = next(i for i in range(sdpa_row + 1, len(lines)) if lines[i].strip().startswith("heads "))
    assert any(f"{LIKELY_MISTAKE}{named['sdpa']}" in line for line in lines[sdpa_row:next_row]), result.stdout


def test_pytest_of_the_public_tests_names_it_in_its_summary(unscaled, named):
    result = run("-m", "pytest", "tests_public", "-q", "-p", "no:cacheprovider", "--impl", str(unscaled))
    assert result.returncode == 1, result.stdout[-2000:]
    summary = result.stdout.split("likely mistakes", 1)
    assert len(summary) == 2, result.stdout[-3000:]
    assert f"sdpa (Scaled dot-product attention): {LIKELY_MISTAKE}{named['sdpa']}" in summary[1], summary[1]


def test_a_correct_solution_hears_of_no_mistake():
    checked = run("-m", "autograder", "check", str(REFERENCE))
    tested = run("-m", "pytest", "tests_public", "-q", "-p", "no:cacheprovider", "--impl", str(REFERENCE))
    assert checked.returncode == 0 and tested.returncode == 0, checked.stderr[-2000:] + tested.stdout[-2000:]
    assert LIKELY_MISTAKE not in checked.stdout and "likely mistakes" not in tested.stdout


def test_the_committed_table_predicts_what_the_models_compute():
    from autograder.authoring import predictions as written

    assert not written.stale(), "run `python -m autograder release --write`"
    assert len(predictions.shipped()) > 1000


def test_the_tables_check_ignores_another_cpus_last_bits_and_finds_a_changed_prediction(tmp_path):
    """A float32 prediction moved by a few units in its last place, as another CPU's kernels move it,
    leaves the table current; one moved as a changed model moves it makes the table stale."""
    from safetensors.torch import load_file, save_file
    from safetensors import safe_open
    from autograder.authoring import predictions as written

    with safe_open(str(predictions.TABLE), framework="pt") as handle:
        metadata = handle.metadata()
    tensors = load_file(str(predictions.TABLE))
    name = max((n for n, t in tensors.items() if t.dtype == torch.float32 and t.isfinite().all()),
               key=lambda n: tensors[n].abs().max())

    def table_with(moved):
        path = tmp_path / "predictions.safetensors"
        save_file({**tensors, name: moved}, str(path), metadata=metadata)
        return path

    original = tensors[name]
    last_bits = original + 4 * torch.finfo(torch.float32).eps * original.abs()
    assert not torch.equal(last_bits, original)
    assert not written.stale(table_with(last_bits))
    assert written.stale(table_with(original * (1 + 1e-4)))


def test_a_call_the_table_lacks_is_unpredicted_and_names_nothing(unscaled):
    """Inputs drawn otherwise (another torch) miss the table: the diagnosis says nothing rather than guess."""
    from autograder.feedback.diagnosis import probes
    from autograder.feedback.diagnosis.knobs import Knobs

    call = probes.PROBES["sdpa"]["sdpa plain"]
    assert predictions.shipped()(call, Knobs())["output"] is not None
    with pytest.raises(predictions.Unpredicted):
        predictions.shipped()(probes.FRESH_PROBES["sdpa"]["sdpa plain"], Knobs())
    backend = open_in_process(unscaled)
    try:
        assert diagnosis.diagnose(backend, ["sdpa"], probes=probes.FRESH_PROBES) == {}
    finally:
        backend.close()


def test_the_notebooks_quick_check_names_the_likely_mistake_inside_the_student_release(tmp_path):
    """Run as a student runs it: the released notebook, filled in with the unscaled attention, executed
    top to bottom in its own folder of the release. The failing sdpa quick check is followed by the
    likely mistake; the cells that pass are not."""
    import json

    import nbclient
    import nbformat

    from autograder.authoring import release
    from autograder.intake import notebook

    root = release.build_release(tmp_path / "student")
    definitions = dict(notebook.split_module(REFERENCE.read_text().replace(SCALE_LINE, "scores = q @ k.transpose(-2, -1)"))[1])
    data = json.loads((root / "assignment" / "mhsa.ipynb").read_text())
    for cell in data["cells"]:
        meta = cell["metadata"].get("nbgrader", {})
        if cell["cell_type"] == "code" and meta.get("solution"):
            cell["source"] = definitions[meta["grade_id"]]
    nb = nbformat.reads(json.dumps(data), as_version=4)
    nbclient.NotebookClient(nb, timeout=300, allow_errors=True,
                            resources={"metadata": {"path": str(root / "assignment")}}).execute()

    def printed(grade_id):
        cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
        return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream"), cell

    text, cell = printed("test_sdpa_public_1")
    assert any(o.output_type == "error" for o in cell.outputs), "the quick check fails"
    assert "Likely mistake (part sdpa): " in text and "sqrt(d_k)" in text, text
    assert "Likely mistake" not in printed("test_masks_public_1")[0]
