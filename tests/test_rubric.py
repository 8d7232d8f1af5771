"""rubric.toml: a declared schema (every key's kind, default, allowed values and meaning), a typo or a
wrong kind refused with the file and the key named, the rubric loaded once by each entry and passed
down (a custom rubric decides what every route shows), and stages switched on and off from it."""
import ast
import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

from autograder import cli
from autograder.authoring.release import RUBRIC_REFERENCE
from autograder.core import rubric as rubric_file
from autograder.core.paths import ASSIGNMENT, REPO, RUBRIC_FILE
from autograder.intake import knowledge
from autograder.intake.route import _unwritten
from autograder.pipeline import grading
from autograder.record.scoring import to_units

SHIPPED = RUBRIC_FILE.read_text()
KEY = knowledge.load_key()


def write(tmp_path, text: str):
    path = tmp_path / "custom.toml"
    path.write_text(text)
    return path


def edited(old: str, new: str) -> str:
    assert SHIPPED.count(old) == 1, f"the shipped rubric no longer holds {old!r}"
    return SHIPPED.replace(old, new)


@pytest.mark.parametrize("text, message", [
    (edited("late_days_max = 0", "late_day_max = 0"),
     r"\[results\] unknown key 'late_day_max' \(did you mean 'late_days_max'\?\)"),
    (edited("[limits]", "[limit]"), r"unknown table \[limit\] \(did you mean 'limits'\?\)"),
    (edited("[parts.heads]", "[parts.head]"), r"\[parts.mhsa\] builds_on names parts that are not graded by the test suites: heads"),
    (edited("[parts.heads]", "[parts.Heads]"), r"part name \[parts.Heads\] must be lower case"),
    (edited("memory_mb = 6144", 'memory_mb = "6G"'), r"\[limits\] memory_mb must be an integer, got '6G' \(a string\)"),
    (edited("part_rows = true", "part_rows = 1"), r"\[results\] part_rows must be a boolean"),
    (edited("late_penalty_per_day = 0.0", "late_penalty_per_day = 10"), r"late_penalty_per_day must be from 0 to 1"),
    (edited('held_score = "withheld"', 'held_score = "half"'), r"held_score must be one of withheld, earned"),
    (edited('default = "summary"', 'default = "summary"\nmhsa = "ful"'), r"\[feedback\] mhsa must be one of"),
    (edited('# knowledge_feedback = "per_question"', 'knowledge_feedback = "total"'),
     r"\[parts.knowledge\] knowledge_feedback must be one of per_question"),
    (edited("# due = 2026-12-15T23:59:00Z", 'due = "2026-12-15"'), r"\[parts.knowledge\] due must be a date or date-time"),
    (edited('title = "Masks"\n', ""), r"\[parts.masks\] needs 'title'"),
    (edited('builds_on = ["mhsa"]', 'builds_on = ["mhs"]'), r"\[parts.block\] builds_on names parts that are not graded.*: mhs"),
    (edited('builds_on = ["mhsa"]', 'builds_on = ["timing"]'), r"\[parts.block\] builds_on names parts that are not graded.*: timing"),
    (edited('functions = ["TransformerBlock"]', 'functions = ["Transformer Block"]'), r"\[parts.block\] functions: 'Transformer Block' is not a Python name"),
    (edited("public = 0.3", "public = 0.4"), r"\[suites\] shares must add up to 1"),
    (edited('title = "Masks"', 'title = "Masks"\nenabled = false'), r"\[parts.masks\] unknown key 'enabled'"),
    (SHIPPED + "\n[[x", r"not valid TOML"),
    (edited("pairs = 20 ", "pair = 20 "), r"\[parts.timing\] unknown key 'pair' \(did you mean 'pairs'\?\)"),
    (edited('dtypes = ["float32", "bfloat16"]', 'dtypes = ["float32", "fp16"]'), r"\[parts.timing\] dtypes must be among"),
    (edited("rtol = { float32 = 5e-5,", "rtol = { float32 = -5e-5,"), r"\[parts.timing\] rtol must hold values at least 0"),
    (edited("seq_lens = [16, 32]", 'seq_lens = [16, "32"]'),
     r"\[parts.timing.cpu.configs.launch\] seq_lens must be a list of integers"),
    (edited("drift_tolerance = 1.5 ", "drift_tolerence = 1.5 "), r"\[parts.timing.cpu\] unknown key 'drift_tolerence'"),
])
def test_a_mistake_in_the_rubric_is_refused_naming_the_file_and_the_key(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(rubric_file.RubricError, match=message) as refused:
        rubric_file.load(path)
    assert str(refused.value).startswith(f"{path}: ")


def test_the_shipped_rubric_follows_the_schema_and_omitted_keys_take_the_declared_defaults(tmp_path):
    shipped = rubric_file.load()
    assert list(shipped.parts) == ["sdpa", "heads", "masks", "mhsa", "block", "timing", "knowledge"] and sum(p.points for p in shipped.parts.values()) == 100
    parts_only = SHIPPED.split("# How each part's points are shared")[0]  # every [parts.*], no other table
    bare = rubric_file.load(write(tmp_path, parts_only))
    assert bare.limits == rubric_file.Limits() and bare.results == rubric_file.Results() and bare.diagnosis
    assert bare.suite_weights == {"public": 0.3, "hidden": 0.7}
    assert bare.hidden == shipped.hidden, "leaving [isolation] out must not expose the reference to the worker"
    assert bare.source == tmp_path / "custom.toml" and shipped.source == RUBRIC_FILE


def test_every_key_is_described_and_the_generated_page_is_current():
    page = rubric_file.describe()
    for table in rubric_file.SCHEMA:
        assert f"## [{table.name}]" in page
        for key in table.keys:
            assert key.description and f"| `{key.name}` | {key.kind} |" in page
    assert (REPO / RUBRIC_REFERENCE).read_text() == page, "run `python -m autograder release --write`"


def test_the_rubric_command_checks_a_file_and_describes_the_schema(tmp_path, capsys):
    assert cli.main(["rubric"]) == 0
    assert "follows the schema" in capsys.readouterr().out
    assert cli.main(["rubric", str(write(tmp_path, edited("cpu_s = 600", "cpu_seconds = 600")))]) == 1
    assert "[limits] unknown key 'cpu_seconds'" in capsys.readouterr().out
    assert cli.main(["rubric", "--describe"]) == 0
    assert capsys.readouterr().out.strip() == rubric_file.describe().strip()


def test_the_contract_is_what_the_stub_leaves_to_write():
    tree = ast.parse(ASSIGNMENT.read_text())
    left = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and _unwritten(n)}
    assert left == set(rubric_file.load().contract)


def context(rubric, **overrides):
    return SimpleNamespace(**{"rubric": rubric, "extras": True, "isolation": object(), "suites": ("public", "hidden"),
                              "days_late": 0.0, **overrides})


def test_stages_are_switched_from_the_rubric(tmp_path):
    shipped = rubric_file.load()
    on = context(shipped, days_late=2.0)
    assert all(grading.enabled(stage, on) for stage in grading.STAGES if stage is not grading.apply_late_penalty)
    assert not grading.enabled(grading.apply_late_penalty, on), "the shipped rubric has no late policy"
    late = rubric_file.load(write(tmp_path, edited("late_penalty_per_day = 0.0", "late_penalty_per_day = 0.1")))
    assert grading.enabled(grading.apply_late_penalty, context(late, days_late=2.0))
    assert not grading.enabled(grading.apply_late_penalty, context(late, days_late=0.0))

    off = rubric_file.load(write(tmp_path, edited("require_cuda = false", "require_cuda = false\nenabled = false")
                                 .replace('title = "Knowledge check"', 'title = "Knowledge check"\nenabled = false')
                                 .replace('default = "summary"', 'default = "summary"\ndiagnosis = false')))
    assert "timing" not in off.parts and "knowledge" not in off.parts
    skipped = [s for s in grading.STAGES if not grading.enabled(s, context(off))]
    assert skipped == [grading.diagnose, grading.grade_knowledge, grading.grade_timing, grading.apply_late_penalty]
    code_points = sum(to_units(p.points) for p in shipped.parts.values() if p.name not in ("timing", "knowledge"))
    assert grading.planned_max_units(off, timing_device="cpu") == code_points, "a switched-off part is not in the maximum"
    assert not grading.enabled(grading.grade_knowledge, context(shipped, extras=False))


def custom_rubric(tmp_path):
    """The shipped rubric with the knowledge check scored per question and timing switched off."""
    return write(tmp_path, edited('# knowledge_feedback = "per_question"', 'knowledge_feedback = "per_question"')
                 .replace("require_cuda = false", "require_cuda = false\nenabled = false"))


def answered_stub(folder):
    """The untouched stub (its tests fail at once) with every knowledge answer right."""
    folder.mkdir(parents=True)
    (folder / "mhsa.py").write_text(ASSIGNMENT.read_text())
    (folder / "knowledge.py").write_text("".join(f"{q}_ANSWER = {v!r}\n" for q, v in KEY.items()))
    return folder


def assert_custom_rubric_obeyed(data):
    points = rubric_file.load().parts["knowledge"].points
    rows = [t for t in data["tests"] if t["tags"] == ["knowledge"]]
    assert len(rows) == len(knowledge.autograded(knowledge.questions())) and {r["status"] for r in rows} == {"passed"}
    assert data["extra_data"]["parts"]["knowledge"]["graded"] and data["score"] == points
    assert "timing" not in data["extra_data"]["parts"] and data["extra_data"]["max_score"] == 90 + points


def test_grade_with_a_custom_rubric_shows_what_that_rubric_says(tmp_path):
    """The shipped rubric withholds the knowledge check; `grade --rubric` with one that scores it per
    question shows each question's result (and leaves the switched-off timing part out), where the
    rubric used to be re-read from rubric.toml."""
    target = tmp_path / "r.json"
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(answered_stub(tmp_path / "work")),
                           "--results", str(target), "--rubric", str(custom_rubric(tmp_path))],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert_custom_rubric_obeyed(json.loads(target.read_text()))


def test_a_batchs_graders_use_the_batchs_rubric(tmp_path):
    answered_stub(tmp_path / "subs" / "alice")
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(tmp_path / "subs"), "--batch", "--out",
                           str(out), "--jobs", "1", "--rubric", str(custom_rubric(tmp_path))],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert_custom_rubric_obeyed(json.loads((out / "alice.json").read_text()))
    assert "timing" not in (out / "grades.csv").read_text().splitlines()[0].split(",")


def test_a_broken_custom_rubric_stops_grade_with_its_message(tmp_path):
    broken = write(tmp_path, edited("cpu_s = 600", "cpu_seconds = 600"))
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(ASSIGNMENT), "--rubric", str(broken)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and f"{broken}: [limits] unknown key 'cpu_seconds'" in done.stdout


def test_the_timing_settings_declared_are_the_ones_gpu_checks_reads():
    from dataclasses import fields

    from gpu_checks.settings import Config, TimingSettings

    assert {k.name for k in rubric_file.TIMING_SETTINGS} == {f.name for f in fields(TimingSettings)}
    assert {k.name for k in rubric_file.TIMING_CONFIG} == {f.name for f in fields(Config)} - {"name"}
    timing = rubric_file.load().parts["timing"].settings
    for device in ("cuda", "cpu"):
        assert TimingSettings.for_device(timing, device).cases(), "the shipped settings are read as before"


def test_a_custom_rubric_is_hidden_from_the_worker_like_rubric_toml(tmp_path):
    from autograder.pipeline.context import GradingContext

    custom = rubric_file.load(custom_rubric(tmp_path))
    ctx = GradingContext.create(ASSIGNMENT, rubric=custom, isolation="inprocess", extras=False)
    try:
        assert custom.source in ctx.hidden and RUBRIC_FILE in ctx.hidden
    finally:
        ctx.close()


def test_a_cluster_refuses_a_custom_rubric_its_workers_would_not_have(tmp_path):
    from autograder.runners import cluster

    said = cluster.refusal(SimpleNamespace(isolation="auto", rubric=custom_rubric(tmp_path)))
    assert said is not None and "--rubric" in said and "rubric.toml" in said
    assert "--rubric" not in (cluster.refusal(SimpleNamespace(isolation="auto", rubric=RUBRIC_FILE)) or "")


def test_run_skips_a_stage_the_rubric_switches_off(tmp_path):
    """grading.run, not only grading.enabled: the knowledge stage grades with the shipped rubric and
    is not run at all with one whose [parts.knowledge] says enabled = false."""
    def ran(rubric):
        ctx = context(rubric, path=ASSIGNMENT, isolation_level="inprocess", notes=(), _backend=None, close=lambda: None)
        return grading.run(ctx, stages=(grading.grade_knowledge,))

    assert "knowledge" in ran(rubric_file.load()).parts
    off = rubric_file.load(write(tmp_path, edited('title = "Knowledge check"', 'title = "Knowledge check"\nenabled = false')))
    assert ran(off).parts == {}


def test_a_function_belongs_to_its_code_part_and_to_timing_where_it_is_timed():
    """A forbidden API the scan finds in MultiHeadSelfAttention zeroes mhsa and the timing of it; the
    contract and the code parts leave timing out (the suites do not grade it)."""
    shipped = rubric_file.load()
    assert shipped.part_of("MultiHeadSelfAttention") == ["mhsa", "timing"]
    assert shipped.part_of("split_heads") == ["heads"]
    assert "timing" not in shipped.code_parts and "knowledge" not in shipped.code_parts
    assert shipped.contract[0] == "scaled_dot_product_attention" and len(set(shipped.contract)) == len(shipped.contract)
