"""Timing alone for a folder of submissions, then merged into results made elsewhere: the commands run
as a TA runs them (`python -m gpu_checks batch|merge` in a subprocess), on the CPU device."""
import csv
import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace

import pytest
import torch

from autograder.core.paths import REFERENCE, REPO, RUBRIC_FILE
from autograder.core.rubric import load
from autograder.isolation.host.levels import resolve, sandbox_available
from autograder.pipeline import grading
from autograder.record import results, scoring
from autograder.record.grade import Grade
from autograder.record.scoring import PartScore, Row, TestResult, to_units
from gpu_checks.batch import load_timing, merge_folder, time_folder, with_timing
from gpu_checks.study import CALIBRATION

# The rubric's CPU configs, with fewer pairs and one dtype: CI time (the study runs the real ones).
SMALL_CPU = 'dtypes = ["float32"]\npairs = 6\nearly_pairs = 5\nrerun_pairs = 12\nwarmup_pairs = 1\n' \
            'check_calls = 1\nsolo_calls = 3\n'
# These tests are about the batch and merge commands, not the checks on a loaded machine: with 6 pairs,
# the median of the out-of-band time moved past the rubric's 5 ms for the reference against itself
# while CI ran another file on the same two cores. As in test_gpu_checks.py (NOISE_PROOF), the
# load-sensitive checks get room; the ratio, which tells bob's loop from alice's reference, keeps its
# threshold. The out-of-band and drift checks are tested in test_gpu_checks.py and calibrated with
# the rubric's own pair counts (docs/benchmarks/timing-cpu.md).
NOISE_PROOF_CPU = {"out_of_band_slack_ms": "50.0", "drift_tolerance": "3.0"}


def small_cpu_rubric() -> str:
    """rubric.toml with SMALL_CPU and NOISE_PROOF_CPU in its [parts.timing.cpu] table."""
    head, marker, tail = RUBRIC_FILE.read_text().partition("[parts.timing.cpu]\n")
    table, next_table, rest = tail.partition("\n[")
    lines = table.splitlines()
    for key, value in NOISE_PROOF_CPU.items():
        at = [i for i, line in enumerate(lines) if line.split("=")[0].strip() == key]
        assert len(at) == 1, (key, table)
        lines[at[0]] = f"{key} = {value}"
    return head + marker + SMALL_CPU + "\n".join(lines) + next_table + rest


def gpu_checks(*args, check=True):
    env = os.environ | {"PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "gpu_checks", *map(str, args)], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=600)
    if check:
        assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.fixture(scope="module")
def timed(tmp_path_factory):
    """alice hands in the reference (a .py), bob a loop over queries (a folder): timed once for the module."""
    root = tmp_path_factory.mktemp("timing")
    rubric = root / "rubric.toml"
    rubric.write_text(small_cpu_rubric())
    submissions = root / "submissions"
    (submissions / "bob").mkdir(parents=True)
    shutil.copy(REFERENCE, submissions / "alice.py")
    shutil.copy(CALIBRATION["bad_loop_queries"], submissions / "bob" / "mhsa.py")
    out = root / "timing"
    first = gpu_checks("batch", submissions, "--out", out, "--device", "cpu", "--rubric", rubric)
    return root, submissions, out, rubric, first.stdout


def test_batch_times_each_submission_on_the_cpu_and_says_so(timed):
    _, _, out, _, stdout = timed
    alice, bob = (json.loads((out / f"{name}.json").read_text()) for name in ("alice", "bob"))
    assert (alice["status"], alice["score"], alice["max_score"], alice["device"]) == ("passed", 5.0, 5.0, "cpu")
    assert alice["isolation"] == bob["isolation"] == ("sandbox" if sandbox_available() else "process")
    assert alice["output"].startswith("Timing against the reference on the CPU (not a GPU"), alice["output"]
    assert (bob["status"], bob["score"], bob["max_score"]) == ("failed", 0.0, 5.0)
    assert "your code took" in bob["output"] and "x the reference's time" in bob["output"], bob["output"]
    assert "alice: passed, 5 / 5 on cpu" in stdout and "bob: failed, 0 / 5 on cpu" in stdout


def test_batch_resumes_an_existing_valid_timing_file_means_done(timed, tmp_path):
    _, submissions, out, rubric, _ = timed
    kept = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    said = []
    assert time_folder(submissions, out, load(rubric), resolve("auto"), "cpu", log=said.append) == 0
    assert said == ["2 of 2 submissions already timed (--force times them again)"]
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == kept
    half_written = tmp_path / "bob.json"
    half_written.write_text((out / "bob.json").read_text()[:40])
    assert load_timing(out / "bob.json") is not None and load_timing(half_written) is None


@pytest.mark.skipif(torch.cuda.is_available(), reason="tests the behaviour without CUDA")
def test_batch_without_cuda_refuses_instead_of_writing_skipped_files(tmp_path):
    said = []
    assert time_folder(tmp_path, tmp_path / "out", load(), resolve("auto"), "cuda", log=said.append) == 1
    assert said[0].startswith("cannot time here") and said[0].endswith("--device cpu times on the CPU")
    assert not (tmp_path / "out").exists()


NOT_TIMED = {"status": "skipped", "score": 0.0, "output": "CUDA timing skipped: no CUDA device"}
LATE = "2 day(s) late at 10% a day: 20% of the score taken"


def graded(name: str, timing: dict = NOT_TIMED, device: str = "CUDA when available", late_share: float = 0.0,
           timing_part: bool = True):
    """A Grade as `grade` makes it: mhsa 60 of 60, sdpa 30 of 35 (a hidden test failed), the timing
    part from `timing` (by default not timed: no GPU), with a late penalty of `late_share` if any."""
    rubric = load()
    tests = (TestResult("tests_public/test_mhsa.py::test_a", "mhsa", "public", True, units=600_000, max_units=600_000),
             TestResult("tests_hidden/test_sdpa.py::test_b", "sdpa", "hidden", True, units=300_000, max_units=300_000),
             TestResult("tests_hidden/test_sdpa.py::test_c", "sdpa", "hidden", False, summary="off by sqrt(d_k)",
                        units=0, max_units=50_000))
    parts = {"mhsa": PartScore("mhsa", rubric.parts["mhsa"].title, 600_000, 600_000),
             "sdpa": PartScore("sdpa", rubric.parts["sdpa"].title, 300_000, 350_000)}
    rows = ()
    if timing_part:
        row, parts["timing"] = grading.timing_part(timing, rubric.parts["timing"], device)
        rows = (row,)
    adjustments = ()
    if late_share:
        penalty = scoring.penalty_units(scoring.total_units(parts)[0], late_share)
        adjustments = (Row("late penalty", "late", "failed", penalty, 0, LATE, share=late_share),)
    return Grade(name, "sandbox", ("public", "hidden"), tests=tests, parts=parts, rows=rows, adjustments=adjustments)


def graded_results(name: str, timing_row: bool = True, **options) -> dict:
    """A results.json as `grade` writes it on a machine without a GPU: 90 of 95 points, timing not graded
    (`timing_row` False: graded without the timing part at all)."""
    return results.to_gradescope(graded(name, timing_part=timing_row, **options), load())


def timing_file(name: str, status: str, score: float) -> dict:
    return {"submission": name, "status": status, "score": score, "max_score": 5.0, "device": "cpu",
            "output": f"Timing against the reference on the CPU: {status}", "isolation": "sandbox"}


def check_consistent(data: dict, score: float, max_score: float):
    assert data["score"] == score and data["extra_data"]["max_score"] == max_score
    rows = sum(to_units(t["score"]) for t in data["tests"] if "status" in t)
    assert rows == to_units(data["score"]), "the rows with points add up to the total"
    assert [t["name"] for t in data["tests"] if t["tags"] == ["timing"]] == ["timing: speed against the reference (CPU)"]
    timing = data["extra_data"]["parts"]["timing"]
    assert timing["graded"] and timing["max_score"] == 5.0
    assert data["output"].startswith(f"Score: {score:g} / {max_score:g}  (isolation: sandbox)")
    assert "not graded" not in data["output"] and "  sdpa              30 / 35           1/2  " in data["output"]


def test_merge_into_a_batch_results_folder_adds_the_part_and_is_idempotent(timed, tmp_path):
    _, _, out, rubric, _ = timed
    results = tmp_path / "grades"
    results.mkdir()
    for name in ("alice", "bob"):
        (results / f"{name}.json").write_text(json.dumps(graded_results(name)))
    (results / "grades.csv").write_text("stale\n")
    gpu_checks("merge", out, results, "--rubric", rubric)
    alice, bob = (json.loads((results / f"{n}.json").read_text()) for n in ("alice", "bob"))
    check_consistent(alice, 95.0, 100.0)
    check_consistent(bob, 90.0, 100.0)
    row = next(t for t in bob["tests"] if "timing" in t["tags"])
    assert row["status"] == "failed" and "your code took" in row["output"]
    table = {r["submission"]: r for r in csv.DictReader((results / "grades.csv").open())}
    assert table["alice"]["timing"] == "5.0" and table["alice"]["score"] == "95.0"
    before = {p.name: p.read_bytes() for p in results.iterdir()}
    assert merge_folder(out, results, load(rubric), log=lambda line: None) == 0  # again, in this process
    assert {p.name: p.read_bytes() for p in results.iterdir()} == before


def test_merge_into_per_submission_folders_and_report_what_could_not_merge(timed, tmp_path):
    _, _, out, rubric, _ = timed
    export = tmp_path / "export"
    (export / "alice").mkdir(parents=True)
    (export / "alice" / "results.json").write_text(json.dumps(graded_results("alice", timing_row=False)))
    (export / "bob").mkdir()
    ungraded = {**graded_results("bob"), "tests": []}
    ungraded["extra_data"] = {**ungraded["extra_data"], "status": "timeout", "parts": {}}
    (export / "bob" / "results.json").write_text(json.dumps(ungraded))
    done = gpu_checks("merge", out, export, "--rubric", rubric, check=False)
    assert done.returncode == 1
    assert "merged timing into 1 results file(s)" in done.stdout
    assert "not merged: bob: its results have no grade (timeout); regrade it, then merge" in done.stdout
    check_consistent(json.loads((export / "alice" / "results.json").read_text()), 95.0, 100.0)
    assert json.loads((export / "bob" / "results.json").read_text()) == ungraded


def test_a_skipped_timing_leaves_the_part_out_of_the_maximum_and_its_row_without_a_score():
    skipped = {"submission": "carol", "status": "skipped", "score": 0.0, "max_score": 0.0, "device": None,
               "output": "CUDA timing skipped: no CUDA device", "isolation": "sandbox"}
    data = with_timing(results.Results.of(graded_results("carol", timing_row=False)), skipped, load()).data
    assert data["score"] == 90.0 and data["extra_data"]["max_score"] == 95.0
    row = next(t for t in data["tests"] if t["tags"] == ["timing"])
    # Gradescope shows a row of 0 of 0 as passed: a part not graded has no score and no status at all
    assert {"score", "max_score", "status"}.isdisjoint(row) and row["output"] == skipped["output"]


@pytest.mark.parametrize("status, score", [("passed", 5.0), ("failed", 0.0)])
@pytest.mark.parametrize("late_share", [0.0, 0.2])
def test_merged_results_are_the_results_grade_writes_with_that_timing(status, score, late_share):
    """Merging is grading's own bookkeeping: rows, parts, totals in whole units, the late penalty taken
    of the new total and the summary drawn again, exactly as `grade` with that timing would write them."""
    timing = timing_file("dave", status, score)
    merged = with_timing(results.Results.of(graded_results("dave", late_share=late_share)), timing, load()).data
    expected = results.to_gradescope(graded("dave", timing, device="CPU", late_share=late_share), load())
    assert merged["extra_data"].pop("timing_merged") == {"device": "cpu", "isolation": "sandbox", "status": status}
    assert merged == expected
    total = 95.0 if status == "passed" else 90.0
    assert merged["score"] == round(total * (1 - late_share), 4)
    if late_share:
        penalty = next(t for t in merged["tests"] if t["tags"] == ["late"])
        assert penalty["score"] == -round(total * late_share, 4) == merged["extra_data"]["adjustments"][0]["score"]


def test_merge_refuses_what_it_cannot_redo_and_says_why():
    held = graded_results("erin")
    held["extra_data"] = {**held["extra_data"], "held": {"reasons": ["dynamic import"], "decision": None}}
    edited_late = graded_results("frank", late_share=0.2)
    del edited_late["extra_data"]["adjustments"][0]["share"]  # a file edited by hand
    no_timing = replace(load(), parts={name: part for name, part in load().parts.items() if name != "timing"})
    for data, rubric, why in ((held, load(), "held for review"), (edited_late, load(), "states no share"),
                              (graded_results("gina"), no_timing, r"no \[parts.timing\]")):
        with pytest.raises(ValueError, match=why):
            with_timing(results.Results.of(data), timing_file("x", "passed", 5.0), rubric)
