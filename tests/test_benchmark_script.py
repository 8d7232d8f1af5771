"""The benchmark scripts still work (they are run by hand, so they would otherwise rot unnoticed): the
batch folder builds from the corpus, and the batch's CPU is accounted for process by process."""
import importlib.util
import json
import subprocess
import sys

from autograder.core.paths import REPO


def load_script(name: str):
    """benchmarks/NAME.py as a module (the scripts are not a package's modules)."""
    spec = importlib.util.spec_from_file_location(f"{name}_benchmark", REPO / "benchmarks" / f"{name}.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def test_batch_folder_builds_the_requested_number_of_submissions(tmp_path):
    benchmark = load_script("grading")
    benchmark.batch_folder(tmp_path / "batch", 7)
    files = sorted((tmp_path / "batch").glob("*.py"))
    assert len(files) == 7
    assert all(f.read_text().strip() for f in files)


def test_batch_cpu_counts_each_process_in_its_role():
    """The reaper's command line names the template's script after its own, and a template's forks keep
    its command line: the role comes from the program each runs and from its parent."""
    batch_cpu = load_script("batch_cpu")
    python = "/venv/bin/python"
    processes = {
        10: (1, f"{python} -m autograder grade /subs --batch --out /out --jobs 2", 0.3),
        11: (10, f"{python} -m autograder.runners.slot --isolation auto", 5.0),
        12: (11, "bwrap --unshare-all --die-with-parent -- /venv/bin/python -I /w/reaper.py 6", 0.0),
        13: (12, f"{python} -I /w/reaper.py 6 --remove /tmp/t -- {python} -I -u /w/template_main.py 5", 0.1),
        14: (13, f"{python} -I -u /w/template_main.py 5", 1.4),
        15: (14, f"{python} -I -u /w/template_main.py 5", 0.9),
        16: (1, f"{python} -m autograder grade /subs/alice.py", 4.0),
        17: (11, f"{python} -m autograder.runners.slot --isolation auto", 0.0),  # forked, not yet exec'd
    }
    assert {pid: batch_cpu.role(pid, processes) for pid in processes} == {
        10: "runner", 11: "slot", 12: "other", 13: "other", 14: "template", 15: "worker", 16: "other", 17: "other"}
    assert [batch_cpu.descends(pid, 10, processes) for pid in (15, 16)] == [True, False]


def test_batch_cpu_accounts_for_a_cold_batch(tmp_path):
    """One cold batch of two, as a maintainer runs the script: both slots, their templates and the grades'
    workers found, and no more CPU counted by process than the machine was busy; the suites alone on the
    same two timed both ways."""
    figures = tmp_path / "cpu.json"
    done = subprocess.run([sys.executable, "benchmarks/batch_cpu.py", "--batch-size", "2", "--suites-alone",
                           "--json", str(figures)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(figures.read_text())
    assert found["processes"]["slot"] == 2 and found["processes"]["template"] == 2
    assert found["processes"]["worker"] >= 2 and found["cpu_s"]["worker"] > 0 and found["cpu_s"]["slot"] > 0
    assert sum(found["cpu_s"].values()) <= found["busy_core_s"] + 0.5  # ticks of 10 ms per process
    assert found["per_grade_s"] > 0 and "a grade" in done.stdout
    assert found["suites_alone_s"]["plain"] > 0 and found["suites_alone_s"]["monitored"] > 0
    assert "the suites alone" in done.stdout
