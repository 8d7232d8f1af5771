"""How long grading takes: one submission with every suite, the isolation's overhead, and a batch.

    python benchmarks/grading.py                 # all of it (the batches take minutes)
    python benchmarks/grading.py --batch-size 0  # skip the batches
    python benchmarks/grading.py --batch-only --batch-size 6   # the batches alone, smaller

The batch runs three ways in one run, so that their ratios hold on a busy machine: a grading process
per submission (how the batch worked before grader slots), grader slots (the batch today), and a
Dask cluster of a scheduler and --jobs single-thread workers on this machine (needs dask[distributed]).

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
import subprocess
import sys
import tempfile
import time
from argparse import Namespace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from autograder import grading, isolation  # noqa: E402
from autograder import rubric as rubric_file  # noqa: E402

REFERENCE = REPO / "reference" / "mhsa.py"
BUGGY = REPO / "examples" / "submissions" / "buggy_no_scale.py"
TARGETS = {"one": 6.0, "batch": 120.0}


def cli(*args, **kwargs) -> float:
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "autograder", *args], cwd=REPO, check=True,
                   stdout=subprocess.DEVNULL, **kwargs)
    return time.monotonic() - started


def one_submission(scratch: Path) -> None:
    """What a TA waits for: the command line, every suite; a correct and a buggy submission (failures
    cost more: hypothesis shrinks them and the diagnosis runs)."""
    for name, path in (("reference", REFERENCE), ("buggy_no_scale", BUGGY)):
        seconds = cli("grade", str(path), "--suite", "all", "--results", str(scratch / name / "results.json"))
        print(f"one submission, every suite (`grade {path.relative_to(REPO)} --suite all`): {seconds:.1f} s wall "
              f"(target <= {TARGETS['one']:g} s)")


def overhead() -> None:
    """The same suites on the same submission in this process: student code in-process vs in a worker."""
    levels = ["inprocess", "process"] + (["sandbox"] if isolation.sandbox_available() else [])
    rubric = rubric_file.load()
    grading.grade(REFERENCE, suites=("public",), isolation="inprocess", rubric=rubric, extras=False)  # warm caches
    times = {}
    for level in levels:
        started = time.monotonic()
        grading.grade(REFERENCE, suites=("public", "hidden"), isolation=level, rubric=rubric, extras=False)
        times[level] = time.monotonic() - started
    print("isolation overhead (public + hidden suites on the reference, in one grading process):")
    for level, seconds in times.items():
        print(f"  {level:<10} {seconds:6.1f} s   x{seconds / times['inprocess']:.2f}")


def batch_folder(folder: Path, size: int) -> None:
    from autograder.diagnosis.corpus import load_mutants

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


def batch(scratch: Path, size: int, jobs: int, dask: bool) -> None:
    from autograder import batch as batch_module

    folder = scratch / "batch"
    batch_folder(folder, size)
    ways = {"a process per submission (before)": "before", "grader slots (now)": "slots"}
    if dask:
        ways[f"Dask, {jobs} single-thread workers on this machine"] = "dask"
    seconds = {}
    for label, way in ways.items():
        out = scratch / f"out-{way}"
        args = ["grade", str(folder), "--batch", "--out", str(out), "--jobs", str(jobs)]
        if way == "dask":
            from autograder.cluster import LocalCluster

            cluster = LocalCluster(scratch, workers=jobs)
            args += ["--scheduler", cluster.address]
        try:
            started = time.monotonic()
            if way == "before":
                options = Namespace(path=folder, out=out, jobs=jobs, force=False, suite="all", isolation="auto",
                                    timeout=None, hide=[], batch=True, timing_device=None, scheduler=None)
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                    batch_module.run(options, command=(sys.executable, "-c", PROCESS_PER_SUBMISSION))
            else:
                subprocess.run([sys.executable, "-m", "autograder", *args], cwd=REPO, check=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            seconds[way] = time.monotonic() - started
        finally:
            if way == "dask":
                cluster.close()
        rows = list(csv.DictReader((out / "grades.csv").open()))
        statuses = {s: sum(r["status"] == s for r in rows) for s in sorted({r["status"] for r in rows})}
        print(f"batch of {size} submissions, --jobs {jobs}, {label}: {seconds[way] / 60:.1f} min wall, "
              f"{seconds[way] / size:.1f} s per submission; statuses {statuses}")
    print(f"  slots: x{seconds['before'] / seconds['slots']:.2f} the throughput of a process per submission "
          f"(40 submissions target < {TARGETS['batch'] / 60:g} min)")
    if dask:
        print(f"  Dask: x{seconds['slots'] / seconds['dask']:.2f} the throughput of the local batch (target >= 0.8)")


def machine() -> str:
    import torch

    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"{platform.platform()}, {os.cpu_count()} cores, Python {platform.python_version()}, torch "
            f"{torch.__version__}, isolation auto = {isolation.resolve('auto').level}, load average {load}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=40)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--batch-only", action="store_true", help="skip the single grade and the isolation overhead")
    parser.add_argument("--no-dask", action="store_true", help="skip the batch on a local Dask cluster")
    args = parser.parse_args()
    print(f"{time.strftime('%Y-%m-%d %H:%M')} on {machine()}")
    scratch = Path(tempfile.mkdtemp(prefix="mhsa-bench-"))
    try:
        if not args.batch_only:
            one_submission(scratch)
            overhead()
        if args.batch_size:
            batch(scratch, args.batch_size, args.jobs, dask=not args.no_dask)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
