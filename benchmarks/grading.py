"""How long grading takes: one submission with every suite, the isolation's overhead, and a batch.

    python benchmarks/grading.py                 # all of it (the batches take minutes)
    python benchmarks/grading.py --batch-size 0  # skip the batches
    python benchmarks/grading.py --batch-only --batch-size 6   # the batches alone, smaller
    git worktree add /tmp/before REV && python benchmarks/grading.py --baseline /tmp/before

The batch runs several ways in one run, so that their ratios hold on a busy machine: a grading process
per submission (how the batch worked before grader slots), grader slots (the batch today), and a
Dask cluster of a scheduler and --jobs single-thread workers on this machine (needs dask[distributed]).
--baseline DIR adds another checkout of the repository (an earlier commit) to the same run: its
single grades alternate with this one's, and its batch runs with the others, so a change is
measured before and after under the same load.

The unit beside them: a cold in-process pytest run of both suites on the reference in a fresh Python
(what the tests themselves cost); one grade and a batch's seconds per submission are also given as
ratios of it, measured in the same run.

Prints the figures that docs/benchmarks/grading.md records, with the machine they were measured on.
The batch is made of examples/submissions, the valid variants in corpus/valid and the buggy mutants of
corpus/mutants.toml, repeated as needed.
"""
import argparse
import contextlib
import csv
import io
import itertools
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from argparse import Namespace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from autograder.core import rubric as rubric_file  # noqa: E402
from autograder.isolation.host import levels as isolation  # noqa: E402
from autograder.pipeline import grading

REFERENCE = REPO / "reference" / "mhsa.py"
BUGGY = REPO / "examples" / "submissions" / "buggy_no_scale.py"
TARGETS = {"one": 6.0, "batch": 120.0, "one_unit": 1.0}  # one_unit: a ratio to cold_suites
# A cold batch's seconds per submission against its submissions' cold in-process suites, by batch size.
BATCH_UNIT_TARGETS = {12: 0.2, 40: 0.15}


def cli(*args, repo: Path = REPO) -> tuple[float, float]:
    """(wall seconds, CPU seconds) that `python -m autograder ARGS` takes in the checkout `repo`. The
    CPU is the whole machine's (/proc/stat, on an otherwise idle machine): a worker forked from a
    template is reaped by nobody that reports its time to this process, and on a busy machine (CI,
    a shared server) the CPU, not the wall, is what a grade costs."""
    started, cpu = time.monotonic(), machine_cpu()
    subprocess.run([sys.executable, "-m", "autograder", *args], cwd=repo, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, env=os.environ | {"PYTHONPATH": str(repo)})
    return time.monotonic() - started, machine_cpu() - cpu


def machine_cpu() -> float:
    """CPU seconds this machine has spent busy since it booted (every process, idle and I/O wait left out)."""
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, Path("/proc/stat").read_text().split()[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def cold_suites(submission: Path = REFERENCE) -> float:
    """Seconds of the unit the grading figures are measured in: a cold pytest run of both suites on
    `submission` in this process's interpreter, the submission in-process (no isolation, no grader),
    in a fresh Python: what the tests themselves cost, start-up included. Failing tests (exit 1) are
    part of what a buggy submission costs; anything else stops the benchmark."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pytest", "tests_public", "tests_hidden", "--impl", str(submission),
                           "-q"], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          env=os.environ | {"PYTHONPATH": str(REPO)})
    if done.returncode not in (0, 1):
        raise SystemExit(f"pytest on {submission} ended with {done.returncode}: {done.stderr[-2000:]!r}")
    return time.monotonic() - started


def one_submission(scratch: Path, baseline: Path | None, repeats: int) -> tuple[float, float]:
    """What a TA waits for: the command line, every suite; a correct and a buggy submission (failures
    cost more: hypothesis shrinks them and the diagnosis runs). With a baseline, its runs alternate
    with this checkout's and the medians are compared. The reference's runs alternate with the unit,
    a cold in-process pytest run of both suites (cold_suites). Returns (the reference's grade, the
    unit), medians in seconds."""
    checkouts = {"now": REPO} | ({"baseline": baseline} if baseline else {})
    for name, path in (("reference", REFERENCE), ("buggy_no_scale", BUGGY)):
        seconds = {label: [] for label in checkouts}
        cpu = {label: [] for label in checkouts}
        unit = []
        for _, (label, repo) in itertools.product(range(repeats), checkouts.items()):
            if name == "reference" and label == "now":
                unit.append(cold_suites())
            wall, busy = cli("grade", str(repo / path.relative_to(REPO)), "--suite", "all", "--results",
                             str(scratch / label / name / "results.json"), repo=repo)
            seconds[label].append(wall)
            cpu[label].append(busy)
        now, now_cpu = statistics.median(seconds["now"]), statistics.median(cpu["now"])
        print(f"one submission, every suite (`grade {path.relative_to(REPO)} --suite all`): {now:.1f} s wall, "
              f"{now_cpu:.1f} s of the machine's CPU, medians of {repeats} (target <= {TARGETS['one']:g} s)")
        if baseline:
            before, before_cpu = statistics.median(seconds["baseline"]), statistics.median(cpu["baseline"])
            print(f"  baseline {baseline}: {before:.1f} s wall, {before_cpu:.1f} s of CPU; now x{before / now:.2f} "
                  f"as fast, x{now_cpu / before_cpu:.2f} the CPU")
        if name == "reference":
            reference_seconds, unit_seconds = now, statistics.median(unit)
            print(f"unit: a cold in-process pytest run of both suites on the reference (`pytest tests_public "
                  f"tests_hidden --impl reference/mhsa.py`, a fresh Python): {unit_seconds:.1f} s, median of {repeats}")
            print(f"  one grade of the reference: x{now / unit_seconds:.2f} the unit (target <= x{TARGETS['one_unit']:g})")
            if baseline:
                print(f"  baseline: x{before / unit_seconds:.2f} the unit")
    return reference_seconds, unit_seconds


def overhead(one_grade: float, repeats: int) -> None:
    """The same suites on the same submission in this process: student code in-process vs in a worker,
    the levels alternating, the median of `repeats` runs each. The in-process time is what the one-grade
    target's x1.5 is measured against (`one_grade`: the reference's command-line grade, in seconds)."""
    levels = ["inprocess", "process"] + (["sandbox"] if isolation.sandbox_available() else [])
    rubric = rubric_file.load()
    # warm: both suites' modules imported and hypothesis's strategies built, as in a grader slot
    grading.grade(REFERENCE, suites=("public", "hidden"), isolation="inprocess", rubric=rubric, extras=False)
    times = {level: [] for level in levels}
    for _, level in itertools.product(range(repeats), levels):
        started = time.monotonic()
        grading.grade(REFERENCE, suites=("public", "hidden"), isolation=level, rubric=rubric, extras=False)
        times[level].append(time.monotonic() - started)
    median = {level: statistics.median(seconds) for level, seconds in times.items()}
    print(f"isolation overhead (public + hidden suites on the reference, in one grading process, median of {repeats}):")
    for level, seconds in median.items():
        print(f"  {level:<10} {seconds:6.1f} s   x{seconds / median['inprocess']:.2f}")
    print(f"one grade on the command line (above): x{one_grade / median['inprocess']:.2f} the in-process suite time "
          "(target <= x1.5)")


def batch_folder(folder: Path, size: int) -> None:
    from tools.corpus import load_mutants

    folder.mkdir(parents=True)
    sources = [(p.stem, p.read_text()) for p in sorted((REPO / "examples" / "submissions").glob("*.py"))]
    sources += [(f"valid_{p.stem}", p.read_text()) for p in sorted((REPO / "corpus" / "valid").glob("*.py"))]
    sources += [(f"mutant_{m.id}", m.source()) for m in load_mutants()]
    for index, (name, text) in zip(range(size), itertools.cycle(sources)):
        (folder / f"{index:03d}_{name}.py").write_text(text)


# A grader slot that grades each job in a new `grade` process: the batch as it was before slots.
PROCESS_PER_SUBMISSION = """
import json, subprocess, sys
for line in sys.stdin:
    job = json.loads(line)
    print(json.dumps({"started": job["id"]}), flush=True)
    code = subprocess.run([sys.executable, "-m", "autograder", "grade", job["path"], "--results", job["results"],
                           *sys.argv[1:]], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    print(json.dumps({"done": job["id"], "code": code}), flush=True)
"""


def time_batch(way: str, folder: Path, out: Path, jobs: int, baseline: Path | None, scratch: Path) -> float:
    """Seconds of one batch of `folder` graded `way` into `out` (a new folder: nothing is resumed)."""
    from autograder.runners import batch as batch_module

    args = ["grade", str(folder), "--batch", "--out", str(out), "--jobs", str(jobs)]
    if way == "dask":
        from autograder.runners.cluster import LocalCluster

        cluster = LocalCluster(scratch, workers=jobs)
        args += ["--scheduler", cluster.address]
    try:
        started = time.monotonic()
        if way == "before":
            options = Namespace(path=folder, out=out, jobs=jobs, force=False, suite="all", isolation="auto",
                                timeout=None, hide=[], batch=True, timing_device=None, scheduler=None,
                                days_late=0.0, after_due_date=False, due=None, due_from="", rubric=REPO / "rubric.toml")
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                batch_module.run(options, command=(sys.executable, "-c", PROCESS_PER_SUBMISSION))
        else:
            repo = baseline if way == "baseline" else REPO
            subprocess.run([sys.executable, "-m", "autograder", *args], cwd=repo, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           env=os.environ | {"PYTHONPATH": str(repo)})
        return time.monotonic() - started
    finally:
        if way == "dask":
            cluster.close()


def batch(scratch: Path, size: int, jobs: int, dask: bool, baseline: Path | None, unit: float | None,
          rounds: int = 1) -> None:
    """The batch several ways side by side, `rounds` times in turn (the median counts); `unit`: the cold
    in-process suites' seconds (cold_suites), which each way's seconds per submission are also given
    as a ratio of."""
    folder = scratch / "batch"
    batch_folder(folder, size)
    ways = {"a process per submission (before slots)": "before", "grader slots (now)": "slots"}
    if baseline:
        ways = {f"grader slots, baseline {baseline}": "baseline", **ways}
    if dask:
        ways[f"Dask, {jobs} single-thread workers on this machine"] = "dask"
    seconds = {way: [] for way in ways.values()}
    for round_ in range(rounds):  # the ways alternate, so that a change of load falls on all of them
        for way in ways.values():
            seconds[way].append(time_batch(way, folder, scratch / f"out-{way}-{round_}", jobs, baseline, scratch))
    seconds = {way: statistics.median(runs) for way, runs in seconds.items()}
    for label, way in ways.items():
        rows = list(csv.DictReader((scratch / f"out-{way}-0" / "grades.csv").open()))
        statuses = {s: sum(r["status"] == s for r in rows) for s in sorted({r["status"] for r in rows})}
        per_unit = f" = x{seconds[way] / size / unit:.2f} the unit" if unit else ""
        print(f"batch of {size} submissions, --jobs {jobs}, {label}: {seconds[way] / 60:.1f} min wall, "
              f"{seconds[way] / size:.1f} s per submission{per_unit} (median of {rounds}); statuses {statuses}")
    if unit:
        print(f"  slots: x{seconds['slots'] / size / unit:.2f} the unit (the reference's cold suites) per submission")
    # The target's measure: the batch's seconds per submission against a cold in-process run of both
    # suites on each of the same submissions (buggy ones cost more: shrinking, every failure), after.
    each = [cold_suites(path) for path in sorted(folder.glob("*.py"))]
    per_submission = statistics.mean(each)
    print(f"cold in-process suites, each submission of the batch in a fresh Python: {per_submission:.1f} s on average "
          f"({min(each):.1f} to {max(each):.1f} s)")
    for label, way in ways.items():
        print(f"  {label}: x{seconds[way] / size / per_submission:.2f} of it per submission"
              + (f" (target <= x{BATCH_UNIT_TARGETS[size]:g})" if way == "slots" and size in BATCH_UNIT_TARGETS else ""))
    print(f"  slots: x{seconds['before'] / seconds['slots']:.2f} the throughput of a process per submission "
          f"(40 submissions target < {TARGETS['batch'] / 60:g} min)")
    if baseline:
        print(f"  slots now: x{seconds['baseline'] / seconds['slots']:.2f} the throughput of the baseline's slots")
    if dask:
        print(f"  Dask: x{seconds['slots'] / seconds['dask']:.2f} the throughput of the local batch (target >= 0.8)")


def machine() -> str:
    import torch

    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"{platform.platform()}, {os.cpu_count()} cores, Python {platform.python_version()}, torch "
            f"{torch.__version__}, isolation auto = {isolation.resolve('auto').level}, load average {load}, "
            f"bytecode cache {'off (PYTHONDONTWRITEBYTECODE)' if os.environ.get('PYTHONDONTWRITEBYTECODE') else 'on'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=40)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--batch-only", action="store_true", help="skip the single grade and the isolation overhead")
    parser.add_argument("--no-dask", action="store_true", help="skip the batch on a local Dask cluster")
    parser.add_argument("--baseline", type=Path, help="another checkout of this repository to time in the same run")
    parser.add_argument("--rounds", type=int, default=1, help="batches of each way, in turn (the median counts)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each single grade and isolation level (the median counts)")
    args = parser.parse_args()
    baseline = args.baseline.resolve() if args.baseline else None
    print(f"{time.strftime('%Y-%m-%d %H:%M')} on {machine()}")
    scratch = Path(tempfile.mkdtemp(prefix="mhsa-bench-"))
    try:
        unit = None
        if not args.batch_only:
            one_grade, unit = one_submission(scratch, baseline, args.repeats)
            overhead(one_grade, args.repeats)
        if args.batch_size:
            # With --batch-only there is no median of the reference's cold runs to compare with (one
            # cold run, the first after an install, can take three times the next); the batch is
            # compared with its own submissions' cold suites, which follow it.
            batch(scratch, args.batch_size, args.jobs, dask=not args.no_dask, baseline=baseline, unit=unit,
                  rounds=args.rounds)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
