"""benchmarks/profile_grade.py still profiles a grade (the script is run by hand, so it would otherwise rot
unnoticed when the pipeline changes): every stage is accounted for, the suites and the calls into the
worker are measured, and the stages never add up to more than the grade they were measured in."""
import json
import subprocess
import sys

from autograder.core.paths import REPO
from autograder.pipeline import grading


def test_one_grade_is_profiled_stage_by_stage(tmp_path):
    figures = tmp_path / "profile.json"
    done = subprocess.run([sys.executable, "benchmarks/profile_grade.py", "--repeats", "1", "--cold-repeats", "1", "--files",
                           "reference/mhsa.py", "--isolation", "process", "--json", str(figures)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "one cold grade / unit" in done.stdout
    found = json.loads(figures.read_text())
    # each figure measured; how they compare is the benchmark's to report (docs/benchmarks/grade-profile.md):
    # one sample of a millisecond, taken while the suite runs four files at once, can come out either way
    assert all(found["monitor"][figure] > 0
               for figure in ("plain_ms", "monitored_ms", "worker_ms", "worker_untraced_ms"))
    assert all(found["monitor"]["constructed"][figure] > 0 for figure in ("plain_ms", "worker_ms", "worker_untraced_ms"))
    assert all(found["round_trip"][figure] > 0 for figure in ("in_process_ms", "worker_ms"))
    profile = found["files"]["reference/mhsa.py"]
    assert profile["cold_grade_s"] > 0 and profile["unit_s"] > 0
    [grade] = profile["grades"]
    stages = grade["stages"]
    assert list(stages) == [stage.__name__ for stage in grading.STAGES]
    # a stage ENABLED does not name always runs; the others ran or were left out (None)
    assert all(stages[stage.__name__] is not None for stage in grading.STAGES if stage not in grading.ENABLED)
    assert stages["run_suites"] > 0
    assert grade["pytest"]["run_suites"]["collection"] > 0 and grade["pytest"]["run_suites"]["tests"] > 0
    assert grade["calls"]["count"] > 0 and grade["calls"]["seconds"] > 0
    assert grade["workers"]["forked"] >= 1  # a slot-like process: its workers come from the template
    assert sum(s for s in stages.values() if s is not None) <= grade["total_s"] + 0.01
