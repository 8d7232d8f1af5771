"""A bug is charged once, in the part that holds it (autograder/record/carry_forward.py): graded through the
CLI as a TA runs it, on bugs in several styles, with the rubric switch off as the control."""
import itertools
import json
import subprocess
import sys

import pytest

from autograder.core import rubric
from autograder.pipeline import grading
from autograder.record import carry_forward
from tools import corpus
from autograder.core.paths import REFERENCE, REPO, RUBRIC_FILE, STAND_INS

REFERENCE_TEXT = REFERENCE.read_text()
NO_SCALE = ("scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))", "scores = q @ k.transpose(-2, -1)")
OUT_BIAS_ALWAYS = ("self.out = nn.Linear(d_model, d_model, bias=bias)", "self.out = nn.Linear(d_model, d_model, bias=True)")
WEIGHTS_AVERAGED = ("return (y, weights) if need_weights else y", "return (y, weights.mean(dim=1)) if need_weights else y")


def patched(*patches, text=REFERENCE_TEXT) -> str:
    for find, replace in patches:
        assert text.count(find) == 1, find
        text = text.replace(find, replace)
    return text


def grade(tmp_path, text: str, rubric_text: str = "") -> dict:
    """`python -m autograder grade mhsa.py --results results.json [--rubric R]`: the results."""
    file, out = tmp_path / "mhsa.py", tmp_path / "results.json"
    file.write_text(text)
    command = [sys.executable, "-m", "autograder", "grade", str(file), "--results", str(out)]
    if rubric_text:
        (tmp_path / "rubric.toml").write_text(rubric_text)
        command += ["--rubric", str(tmp_path / "rubric.toml")]
    run = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert out.exists(), run.stdout + run.stderr
    return json.loads(out.read_text())


def lost(results: dict) -> dict:
    """part -> points lost, for every part that lost some."""
    parts = results["extra_data"]["parts"]
    return {name: round(p["max_score"] - p["score"], 4) for name, p in parts.items()
            if p["graded"] and p["score"] < p["max_score"]}


def rows(results: dict, part: str) -> list:
    return [t for t in results["tests"] if t.get("tags", [None])[0] == part and "score" in t]


def test_a_missing_scale_costs_sdpa_only_and_the_rows_say_why(tmp_path):
    results = grade(tmp_path, patched(NO_SCALE))
    assert set(lost(results)) == {"sdpa"}, lost(results)
    notes = results["extra_data"]["parts"]
    for part, own in (("mhsa", "MultiHeadSelfAttention"), ("block", "TransformerBlock")):
        said = " ".join(notes[part]["notes"])
        assert (f"your {own} is right given a correct scaled_dot_product_attention; the mistake is charged in "
                "part 'sdpa'") in said, said
    carried = [t for t in rows(results, "mhsa") if "Passed with the grader's correct" in t["output"]]
    assert carried and all("charged in part 'sdpa', not here" in t["output"] for t in carried)
    assert all(t["score"] == t["max_score"] for t in carried)


def test_switched_off_in_the_rubric_the_bug_is_charged_in_every_part_that_calls_it(tmp_path):
    off = RUBRIC_FILE.read_text().replace("# carry_forward = false", "carry_forward = false")
    assert "\ncarry_forward = false" in off
    results = grade(tmp_path, patched(NO_SCALE), off)
    assert set(lost(results)) == {"sdpa", "mhsa", "block"}, lost(results)
    assert "Passed with the grader's correct" not in json.dumps(results)


def test_a_stub_that_mhsa_calls_costs_only_its_own_part(tmp_path):
    start = REFERENCE_TEXT.index("    ### BEGIN SOLUTION\n    scores = q @ k")
    end = REFERENCE_TEXT.index("    ### END SOLUTION", start) + len("    ### END SOLUTION")
    results = grade(tmp_path, REFERENCE_TEXT[:start] + "    raise NotImplementedError" + REFERENCE_TEXT[end:])
    assert lost(results) == {"sdpa": 20.0}, lost(results)


def test_a_bug_in_both_parts_is_charged_in_both_and_the_later_part_is_told_it_is_its_own(tmp_path):
    results = grade(tmp_path, patched(NO_SCALE, OUT_BIAS_ALWAYS))
    assert set(lost(results)) == {"sdpa", "mhsa"}, lost(results)
    own = [t for t in rows(results, "mhsa") if t["status"] == "failed"]
    assert own and all("the mistake is in part 'mhsa' itself" in t["output"] for t in own)
    assert "fix that first" not in " ".join(t["output"] for t in own), "sent back to sdpa, which is not the cause"


def test_an_mhsa_bug_leaves_the_block_whole_and_a_waiting_consistency_test_names_its_test(tmp_path):
    """Gating stays inside a part: the block's consistency tests wait for the block's correctness
    test, not for MultiHeadSelfAttention's test of the same name."""
    results = grade(tmp_path, patched(WEIGHTS_AVERAGED))
    assert set(lost(results)) == {"mhsa"}, lost(results)
    waiting = [t for t in rows(results, "mhsa") if t["status"] == "passed" and t["score"] == 0]
    assert waiting, "the averaged weights fail a correctness test whose consistency tests pass"
    assert all("It earns its points once test_" in t["output"] for t in waiting), [t["output"] for t in waiting]


PEEKING_FORWARD = ("        q, k, v = self.qkv(x).chunk(3, dim=-1)  # 3 x (B, L, d_model)\n",
                   "        import sys\n"
                   "        called = scaled_dot_product_attention.__code__\n"
                   "        if called.co_filename != sys._getframe().f_code.co_filename:  # not the file's own sdpa\n"
                   "            print('PEEK printed', called.co_names)\n"
                   "            raise RuntimeError('PEEK raised ' + ' '.join(called.co_names))\n"
                   "        q, k, v = self.qkv(x).chunk(3, dim=-1)  # 3 x (B, L, d_model)\n")


def test_nothing_the_submission_sees_of_a_correct_version_reaches_its_results(tmp_path):
    """A MultiHeadSelfAttention that prints and raises what it finds of the sdpa it calls when that is
    not its own: only whether each rerun test passed comes back, so none of it reaches the results,
    and the part is charged as the student's own code runs it (with its own wrong attention). The
    block, right given a correct MultiHeadSelfAttention, keeps its points."""
    results = grade(tmp_path, patched(NO_SCALE, PEEKING_FORWARD))
    assert "PEEK" not in json.dumps(results)
    assert set(lost(results)) == {"sdpa", "mhsa"}, lost(results)
    own = [t for t in rows(results, "mhsa") if t["status"] == "failed"]
    assert own and all("the mistake is in part 'mhsa' itself" in t["output"] for t in own)


STYLED = [m for m in corpus.load_mutants() if m.base != "reference/mhsa.py" and len(m.parts) > 1
          and m.parts[0] in ("sdpa", "heads", "masks")]


@pytest.mark.parametrize("mutant", sorted({m.base: m for m in STYLED}.values(), key=lambda m: m.base)[:2],
                         ids=lambda m: m.id)
def test_an_upstream_bug_written_in_another_style_is_charged_once(tmp_path, mutant):
    results = grade(tmp_path, mutant.source())
    assert set(lost(results)) == {mutant.parts[0]}, (mutant.id, lost(results))


def test_the_correct_versions_pass_every_test_so_they_never_shift_a_charge_onto_correct_code(tmp_path):
    every = [f for part in ("sdpa", "heads", "masks", "mhsa") for f in rubric.load().parts[part].functions]
    block = REFERENCE_TEXT[REFERENCE_TEXT.index("class TransformerBlock"):]
    program = tmp_path / "mhsa.py"
    program.write_text(carry_forward.stand_in_source(every) + "\n\n" + block)
    collector = grading.ResultCollector()
    grading.run_pytest(program, ("public", "hidden"), collector)
    failed = [t.nodeid for t in collector.results.values() if not t.passed]
    assert len(collector.results) > 150 and not failed, failed


def test_a_rerun_sends_only_the_failed_upstream_parts_correct_versions():
    shipped = rubric.load()
    assert carry_forward.order(shipped)[:5] == ["masks", "sdpa", "heads", "mhsa", "block"]
    first_pass = [grading.TestResult("tests_hidden/test_sdpa.py::test_a", "sdpa", "hidden", False),
                  grading.TestResult("tests_hidden/test_mhsa.py::test_b", "mhsa", "hidden", False),
                  grading.TestResult("tests_hidden/test_mhsa.py::test_c", "mhsa", "hidden", True),
                  grading.TestResult("tests_hidden/test_block.py::test_d", "block", "hidden", False)]
    rerun = carry_forward.rerun_for(shipped, "mhsa", first_pass)
    assert rerun.upstream == ("sdpa",) and rerun.nodeids == ("tests_hidden/test_mhsa.py::test_b",)
    assert "def scaled_dot_product_attention" in rerun.source and "MultiHeadSelfAttention" not in rerun.source
    assert carry_forward.rerun_for(shipped, "sdpa", first_pass) is None, "masks pass: nothing to stand in for"
    assert carry_forward.rerun_for(shipped, "mhsa", first_pass, zeroed={"mhsa": ["forbidden"]}) is None
    block = carry_forward.rerun_for(shipped, "block", first_pass)
    assert "class MultiHeadSelfAttention" in block.source and "TransformerBlock" not in block.source


def test_a_rerun_is_foreseen_exactly_when_carry_forward_would_start_one():
    """run_suites spawns carry_forward's worker early on rerun_coming: for every set of failed parts, a
    part zeroed or not, it agrees with rerun_for, the rule carry_forward itself follows."""
    shipped = rubric.load()
    parts = [name for name in shipped.parts if name not in ("knowledge", "timing")]
    foreseen = 0
    for failed in itertools.chain.from_iterable(itertools.combinations(parts, n) for n in range(len(parts) + 1)):
        tests = [grading.TestResult(f"tests_hidden/test_{p}.py::test_a", p, "hidden", p not in failed) for p in parts]
        tests.append(grading.TestResult("tests_hidden/test_extra.py::test_a", "not-in-the-rubric", "hidden", False))
        for zeroed in ({}, {"mhsa": ["forbidden"]}, {"block": ["forbidden"]}):
            coming = any(carry_forward.rerun_for(shipped, p, tests, zeroed) for p in parts)
            assert carry_forward.rerun_coming(shipped, tests, zeroed) == coming, (failed, zeroed)
            foreseen += coming
    assert 0 < foreseen < 3 * 2 ** len(parts)


@pytest.mark.parametrize("text, cpus, template, started", [
    # no template (AUTOGRADER_NO_TEMPLATE, no Landlock): each worker is a Python that imports torch
    (patched(NO_SCALE), 2, False, [("start_worker", False), ("run_suites", False)]),  # imports while the suites run
    (patched(NO_SCALE), 1, False, [("start_worker", False), ("carry_forward", False)]),  # would slow the suites' calls
    (REFERENCE_TEXT, 2, False, [("start_worker", False)]),                          # nothing failed: none in vain
    # the grade's own template: its worker is forked at the first call, the rerun's once it is certain
    (patched(NO_SCALE), 1, True, [("run_suites", True), ("run_suites", True)]),
    (REFERENCE_TEXT, 1, True, [("run_suites", True)]),
], ids=["buggy", "buggy-one-cpu", "reference", "buggy-template", "reference-template"])
def test_a_lone_grade_starts_carry_forwards_worker_once_a_rerun_is_certain(tmp_path, monkeypatch, text, cpus,
                                                                          template, started):
    """A lone grade, in this process as the command line runs it: the stage each worker was started
    in, whether it was forked from the grade's own template, and the grade a missing scale gets
    however its rerun worker started (sdpa loses alone)."""
    from autograder.isolation.guest import confine
    from autograder.isolation.host import worker, worker_template
    from autograder.pipeline import context

    if template and confine.landlock_abi() < 1:
        pytest.skip("no Landlock on this kernel: a grade starts no template of its own")
    if not template:
        monkeypatch.setenv(worker_template.DISABLE_VAR, "1")
    file = tmp_path / "mhsa.py"
    file.write_text(text)
    monkeypatch.setattr(context, "usable_cpus", lambda: cpus)
    stage, seen = [""], []
    start = worker.WorkerProcess.__init__

    def noted(self, *args, **kwargs):
        start(self, *args, **kwargs)
        seen.append((stage[0], self.forked))

    def named(step):
        def run(ctx, grade):  # grading.run asks ENABLED about the wrapper (which it does not name): ask here
            if not grading.enabled(step, ctx):
                return grade
            stage[0] = step.__name__
            return step(ctx, grade)
        return run

    monkeypatch.setattr(worker.WorkerProcess, "__init__", noted)
    ctx = context.GradingContext.create(file, rubric=rubric.load(), isolation="auto", extras=False)  # timing: workers of its own
    try:
        graded = grading.run(ctx, tuple(map(named, grading.STAGES)))
    finally:
        ctx.close()
    assert seen == started
    below = {p.name for p in graded.parts.values() if p.graded and p.units < p.max_units}
    assert below == (set() if text == REFERENCE_TEXT else {"sdpa"}), below


def test_carry_forwards_head_start_never_waits_for_a_template_that_is_not_ready(tmp_path, monkeypatch):
    """A template restarted in the middle of a grade imports torch again: run_suites then leaves
    carry_forward's worker to carry_forward, which forks it once the template is ready, rather than
    wait for the template between two of the suites' calls. The grade's own template, just started,
    is in that state until its first worker's fork waits for it."""
    from autograder.isolation.guest import confine
    from autograder.isolation.host import worker
    from autograder.pipeline import context

    if confine.landlock_abi() < 1:
        pytest.skip("no Landlock on this kernel: a grade starts no template of its own")
    file = tmp_path / "mhsa.py"
    file.write_text(patched(NO_SCALE))
    forked = []
    start = worker.WorkerProcess.__init__

    def noted(self, *args, **kwargs):
        start(self, *args, **kwargs)
        forked.append(self.forked)

    monkeypatch.setattr(worker.WorkerProcess, "__init__", noted)
    ctx = context.GradingContext.create(file, rubric=rubric.load(), isolation="auto", extras=False)
    try:
        ctx.start_worker(file)  # the grade's own template, importing torch
        ctx.start_rerun_worker(file)
        assert forked == [], "the head start waited for a template that was not ready"
        assert ctx.backend(file).call("causal_mask", 3).shape == (3, 3)  # its fork waits for the template
        ctx.start_rerun_worker(file)
        assert forked == [True, True]
    finally:
        ctx.close()


@pytest.mark.parametrize("v2, v1, cpus", [
    ([], [], 4), (["max 100000"], [], 4), (["150000 100000"], [], 1), (["200000 100000"], [], 2),
    ([], [("-1", "100000")], 4), ([], [("100000", "100000")], 1)])
def test_a_cpu_quota_leaves_fewer_cpus_than_the_affinity(monkeypatch, v2, v1, cpus):
    """usable_cpus, which decides whether carry_forward's worker may import beside the suites: a
    container's quota (cgroup v2 `cpu.max`, v1 `cpu.cfs_quota_us` over its period) rounds down."""
    from autograder.pipeline import context

    files = {"cpu.max": v2, "cpu.cfs_quota_us": [q for q, _ in v1], "cpu.cfs_period_us": [p for _, p in v1]}
    monkeypatch.setattr(context, "_cgroup_files", lambda v2_name, controller, v1_name: files[v2_name or v1_name])
    monkeypatch.setattr(context.os, "sched_getaffinity", lambda pid: set(range(4)))
    assert context.usable_cpus() == cpus


def test_without_the_stand_ins_file_nothing_is_carried_forward(monkeypatch, tmp_path):
    """A student's release has no tests_hidden/: its grades are the student's own code throughout."""
    monkeypatch.setattr(carry_forward.paths, "STAND_INS", tmp_path / "absent.py")
    first_pass = [grading.TestResult("tests_hidden/test_sdpa.py::test_a", "sdpa", "hidden", False),
                  grading.TestResult("tests_hidden/test_mhsa.py::test_b", "mhsa", "hidden", False)]
    assert carry_forward.rerun_for(rubric.load(), "mhsa", first_pass) is None
    assert STAND_INS.is_file()


def test_every_route_charges_the_bug_once_alike(tmp_path):
    """The same missing scale as a .py and as a notebook in one batch, and on Gradescope: the same part
    scores as `grade`, sdpa losing alone."""
    from autograder.runners import gradescope
    from tests.test_gradescope import run_autograder

    folder, out = tmp_path / "subs", tmp_path / "out"
    folder.mkdir()
    (folder / "as_py.py").write_text(patched(NO_SCALE))
    source = json.loads((REPO / "course/source/mhsa/mhsa.ipynb").read_text())
    for cell in source["cells"]:
        text = "".join(cell["source"])
        if NO_SCALE[0] in text:
            cell["source"] = text.replace(*NO_SCALE)
    (folder / "as_notebook.ipynb").write_text(json.dumps(source))
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(folder), "--batch", "--out", str(out),
                           "--jobs", "2"], cwd=REPO, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    alone = grade(tmp_path / "alone", patched(NO_SCALE)) if (tmp_path / "alone").mkdir() is None else None
    on_gradescope = run_autograder(gradescope.build_bundle(tmp_path / "autograder.zip"), tmp_path,
                                   {"mhsa.py": folder / "as_py.py"})
    code_parts = ("sdpa", "heads", "masks", "mhsa", "block")
    by_route = {name: {p: data["extra_data"]["parts"][p]["score"] for p in code_parts} for name, data in {
        "grade": alone, "batch .py": json.loads((out / "as_py.json").read_text()),
        "batch notebook": json.loads((out / "as_notebook.json").read_text()), "gradescope": on_gradescope}.items()}
    assert len({tuple(scores.values()) for scores in by_route.values()}) == 1, by_route
    assert set(lost(alone)) == {"sdpa"}
