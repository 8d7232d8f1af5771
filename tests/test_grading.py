"""The grading engine end to end: repeatable results, student code kept out of the grader's process,
and the command line's limits reaching the worker."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from autograder.core import paths
from autograder.core import rubric as rubric_file
from autograder.isolation.host import worker_template
from autograder.pipeline import grading
from autograder.record import results

REPO = paths.REPO
BUGGY = REPO / "examples" / "submissions" / "buggy_no_scale.py"


def without_timing(data: dict) -> dict:
    return {key: value for key, value in data.items() if key != "execution_time"}


def test_the_same_submission_gets_the_same_results_twice():
    """Scores, every test's output, the diagnosis and the summary; only the time taken may differ."""
    rubric = rubric_file.load()
    first, second = (results.to_gradescope(grading.grade(BUGGY, rubric=rubric), rubric) for _ in range(2))
    assert 0 < first["score"] < first["extra_data"]["max_score"], "the buggy submission loses some points"
    assert any(t["output"] for t in first["tests"])
    sdpa = first["extra_data"]["parts"]["sdpa"]
    assert any("consistency tests" in note for note in sdpa["notes"]), "a part with a passing consistency test"
    assert "sqrt(d_k)" in sdpa["diagnosis"], "is still diagnosed: a note on the part does not silence it"
    assert without_timing(first) == without_timing(second)


def test_a_grades_pytest_run_loads_the_plugins_it_names_and_no_other_installed_one():
    """pytest-xdist is installed here (the dev extra), as Jupyter's anyio is on an instructor's machine:
    neither joins a grade. hypothesis's own plugin does: it keys a parametrized test's examples."""
    from importlib.metadata import entry_points

    installed = {entry.value for entry in entry_points(group="pytest11")}
    assert {"xdist.plugin", grading.HYPOTHESIS_PYTEST_PLUGIN} <= installed, "else this test could not fail"

    class Plugins(grading.ResultCollector):
        def pytest_configure(self, config):
            self.manager = config.pluginmanager
            self.loaded = {name for name, _ in config.pluginmanager.list_name_plugin()}

    plugins = Plugins()
    grading.run_pytest(paths.REFERENCE, ("public",), plugins,
                       nodeids=("tests_public/test_masks.py::test_to_additive_mask_of_none_is_none",))
    assert [t.passed for t in plugins.results.values()] == [True]
    assert plugins.manager.list_plugin_distinfo() == [], "nothing loaded from an entry point"
    assert grading.HYPOTHESIS_PYTEST_PLUGIN in plugins.loaded
    assert not plugins.manager.has_plugin("xdist") and not any("xdist" in name for name in plugins.loaded)


def test_student_code_runs_in_another_process_and_leaves_this_one_alone(tmp_path):
    submission = tmp_path / "mhsa.py"
    submission.write_text(paths.REFERENCE.read_text() + (
        "\ntorch.MHSA_WAS_HERE = True\n"
        "print('imported by the worker')\n"))
    grade = grading.grade(submission, suites=("public",), extras=False, rubric=rubric_file.load())
    assert not hasattr(torch, "MHSA_WAS_HERE"), "the submission's import changed nothing in the grader"
    assert "imported by the worker" in grade.output
    assert grade.score == grade.max_score == 90


def test_the_timeout_option_reaches_the_worker_and_auto_falls_back_without_bubblewrap(tmp_path):
    submission = tmp_path / "mhsa.py"
    submission.write_text((REPO / "reference" / "mhsa.py").read_text() +
                          "\n\ndef causal_mask(seq_len, device=None, dtype=None):\n    while True:\n        pass\n")
    out = tmp_path / "results" / "results.json"
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(submission), "--suite", "public",
                           "--timeout", "1.5", "--results", str(out)], cwd=REPO, capture_output=True, text=True,
                          timeout=600, env=os.environ | {"AUTOGRADER_NO_SANDBOX": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads(out.read_text())
    assert any("did not finish within 1.5 s" in t["output"] for t in data["tests"])
    assert data["extra_data"]["parts"]["masks"]["score"] < data["extra_data"]["parts"]["masks"]["max_score"]
    assert data["extra_data"]["isolation"] == "process" and "isolation: process" in done.stdout


def test_a_whole_grade_past_its_time_limit_still_writes_results_and_leaves_no_worker(tmp_path):
    """`grade`'s overall limit: a submission that hangs where the per-call limit cannot stop it (at
    import, whose own limit is 60 s) is stopped at the rubric's whole-submission limit, here 4 s: the
    import in flight is ended, every test fails with the reason, and the grade is written at once."""
    submission = tmp_path / "mhsa.py"
    submission.write_text("while True:\n    pass\n")
    out = tmp_path / "results" / "results.json"
    started = time.monotonic()
    done = run_grade_one(submission, out, time_limit=4.0)
    assert done.returncode == 0, done.stdout + done.stderr
    assert time.monotonic() - started < 4.0 + 30, "the import in flight was not ended at the limit"
    data = json.loads(out.read_text())
    assert data["extra_data"]["status"] == "graded" and data["score"] == 0 and data["extra_data"]["max_score"] == 90.0
    assert data["tests"] and all("grading reached 4 s, the time limit for a whole submission" in t["output"]
                                 for t in data["tests"] if t["tags"][-1] in ("public", "hidden"))
    assert "the whole-submission time limit was reached: 0 of" in data["output"].lower()
    deadline = time.monotonic() + 15  # the reaper notices its lifeline close and kills within moments
    while (leftovers := worker_processes(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not leftovers, f"a worker outlived the grade: {leftovers}"


def test_a_grade_that_does_not_end_after_its_time_limit_is_ended_with_a_timeout_result(tmp_path):
    """The backstop: should the grading process itself not end WRAP_UP_S after the whole-submission
    limit (here a pipeline that hangs in this process), `grade` writes a `timeout` result and exits 2."""
    submission = tmp_path / "mhsa.py"
    submission.write_text(paths.REFERENCE.read_text())
    out = tmp_path / "results" / "results.json"
    done = run_grade_one(submission, out, time_limit=2.0, setup="import time; from autograder.pipeline import grade_file, grading\n"
                         "grade_file.WRAP_UP_S = 1.0\ngrading.run = lambda ctx: time.sleep(600)\n")
    assert done.returncode == 2, done.stdout + done.stderr
    data = json.loads(out.read_text())
    assert data["extra_data"]["status"] == "timeout" and "stopped after 3 s" in data["output"]
    assert data["score"] == 0 and data["extra_data"]["max_score"] == 90.0


def run_grade_one(submission, out, time_limit, setup=""):
    """`grade`'s own function (grade_one, with its backstop) in a subprocess, under a short
    whole-submission limit (the command line takes it from rubric.toml). Its workers' folders are
    under the submission's folder (worker_processes finds them there)."""
    workers = submission.parent / "workers"
    workers.mkdir(exist_ok=True)
    script = (
        f"{setup}import sys; from dataclasses import replace; from pathlib import Path\n"
        "from autograder.core import rubric as rubric_file; from autograder.cli import grade\n"
        "from autograder.pipeline.grade_file import GradeOptions\n"
        f"rubric = replace(rubric_file.load(), submission_timeout={time_limit})\n"
        "options = GradeOptions(suite='public', isolation='process')\n"
        f"sys.exit(grade.grade_one(Path({str(submission)!r}), Path({str(out)!r}), options, rubric, show=True, "
        "time_limit=rubric.submission_timeout, backstop=True))\n")
    return subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env=os.environ | {"PYTHONPATH": str(REPO), "TMPDIR": str(workers)})


def worker_processes(tmp_path) -> list:
    """Command lines of live worker processes that run_grade_one started for the test of `tmp_path`:
    a spawned worker runs autograder/isolation/guest/worker_main.py, the grade's template and every
    worker forked from it template_main.py, each in a folder under its grade's TMPDIR (the workers of
    other tests, running alongside, are not this grade's)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            folder = os.readlink(entry / "cwd")
        except OSError:
            continue
        if ("worker_main.py" in cmdline or "template_main.py" in cmdline) and "reaper" not in cmdline \
                and folder.startswith(str(tmp_path)):
            found.append(cmdline)
    return found


@pytest.mark.parametrize("template", [True, False], ids=["own-template", "no-template"])
def test_a_lone_grade_starts_its_worker_before_importing_torch_and_the_worker_is_used(tmp_path, template):
    """`grade` overlaps the start-up of what runs the submission (the grade's own worker template, or
    with none its worker) with its own imports: the stages before the suites import neither torch nor
    pytest, and the suites then run in a worker of that very process (forked from the template)."""
    from autograder.isolation.guest import confine

    if template and confine.landlock_abi() < 1:
        pytest.skip("no Landlock on this kernel: a grade starts no template of its own")
    submission = tmp_path / "mhsa.py"
    submission.write_text(paths.REFERENCE.read_text() + "\nprint('imported once')\n")
    script = (
        "import sys\n"
        "from autograder.pipeline import grading\n"
        "from autograder.core import rubric as rubric_file\n"
        "from autograder.pipeline.context import GradingContext\n"
        f"ctx = GradingContext.create({str(submission)!r}, suites=('public',), isolation='process', extras=False, "
        "rubric=rubric_file.load())\n"
        "grade = grading.Grade('mhsa', ctx.isolation_level, ctx.suites)\n"
        "for stage in grading.STAGES[:grading.STAGES.index(grading.run_suites)]:\n"
        "    grade = stage(ctx, grade) if grading.enabled(stage, ctx) else grade\n"
        f"started = ctx._template if {template} else ctx._started\n"
        "assert started is not None and started.proc.poll() is None, 'it is running'\n"
        "assert 'torch' not in sys.modules and 'pytest' not in sys.modules, sorted(sys.modules)\n"
        "for stage in grading.STAGES[grading.STAGES.index(grading.run_suites):]:\n"
        "    grade = stage(ctx, grade) if grading.enabled(stage, ctx) else grade\n"
        "worker = ctx._backend._worker\n"
        f"assert (worker.forked and worker is not started) if {template} else (worker is started and not worker.forked)\n"
        "printed = ctx._backend.printed_output()\n"
        "ctx.close()\n"
        "assert started.proc.poll() is not None, 'the grade stopped it'\n"
        "print(grade.score, grade.max_score, printed.count('imported once'))\n")
    env = os.environ | {"PYTHONPATH": str(REPO)}
    if not template:
        env[worker_template.DISABLE_VAR] = "1"
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.split() == ["90.0", "90.0", "1"], "full marks, from one worker that imported the submission once"


@pytest.mark.parametrize("template", [True, False], ids=["own-template", "no-template"])
def test_a_started_worker_that_no_suite_used_is_stopped_with_the_grade(tmp_path, monkeypatch, template):
    from autograder.isolation.guest import confine
    from autograder.pipeline.context import GradingContext

    if template and confine.landlock_abi() < 1:
        pytest.skip("no Landlock on this kernel: a grade starts no template of its own")
    if not template:
        monkeypatch.setenv(worker_template.DISABLE_VAR, "1")
    ctx = GradingContext.create(paths.REFERENCE, suites=("public",), isolation="process", extras=False,
                                rubric=rubric_file.load())
    ctx.start_worker(paths.REFERENCE)
    started, folder = (ctx._template, ctx._template.folder) if template else (ctx._started, ctx._started.workdir)
    ctx.close()
    assert started.proc.poll() is not None and not folder.exists()


def test_grade_piped_into_head_writes_its_results_and_exits_quietly(tmp_path):
    """`grade X --results R | head -2`: the stubs' table (some 90 KB, more than a pipe holds) is cut
    off when head leaves; R is written all the same, and the command ends without a traceback."""
    out = tmp_path / "results.json"
    stubs = REPO / "examples" / "submissions" / "stubs.py"
    command = (f"{sys.executable} -m autograder grade {stubs} --suite public --isolation process --results {out}"
               " | head -2; exit ${PIPESTATUS[0]}")
    done = subprocess.run(["bash", "-c", command], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr[-3000:]
    assert done.stdout.startswith("stubs: 0 / 90 points") and len(done.stdout.splitlines()) == 2
    written = results.load(out, graded_only=True)
    assert written is not None, "no valid results file"
    assert written.score == 0 and written.submission and len(written.tests) > 50


def test_every_command_survives_its_output_closing_before_it_prints():
    """The same for any command (cli.main's output): its reader gone before the first line."""
    process = subprocess.Popen([sys.executable, "-m", "autograder", "rubric", "--describe"], cwd=REPO,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.close()
    stderr = process.communicate(timeout=120)[1].decode()
    assert process.returncode == 0 and stderr == "", stderr
