"""How long grading takes: one submission with every suite, the isolation's overhead, and a batch.

    python benchmarks/grading.py                 # all three (the batch takes minutes)
    python benchmarks/grading.py --batch-size 0  # skip the batch

Prints the figures that docs/benchmarks/grading.md records, with the machine they were measured on.
The batch is made of examples/submissions, the valid variants in corpus/valid and the buggy mutants of
corpus/mutants.toml, repeated as needed.
"""
import argparse
import csv
import itertools
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from autograder import grading, isolation  # noqa: E402
from autograder import rubric as rubric_file  # noqa: E402

REFERENCE = REPO / "reference" / "mhsa.py"
BUGGY = REPO / "examples" / "submissions" / "buggy_no_scale.py"
TARGETS = {"one": 30.0, "batch": 600.0}


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


def batch(scratch: Path, size: int, jobs: int) -> None:
    folder, out = scratch / "batch", scratch / "batch-out"
    batch_folder(folder, size)
    seconds = cli("grade", str(folder), "--batch", "--out", str(out), "--jobs", str(jobs),
                  stderr=subprocess.DEVNULL)
    rows = list(csv.DictReader((out / "grades.csv").open()))
    statuses = {s: sum(r["status"] == s for r in rows) for s in sorted({r["status"] for r in rows})}
    print(f"batch of {size} submissions, --jobs {jobs}: {seconds / 60:.1f} min wall, "
          f"{seconds / size:.1f} s per submission (target < {TARGETS['batch'] / 60:g} min); statuses {statuses}")


def machine() -> str:
    import torch

    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"{platform.platform()}, {os.cpu_count()} cores, Python {platform.python_version()}, torch "
            f"{torch.__version__}, isolation auto = {isolation.resolve('auto').level}, load average {load}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=40)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    print(f"{time.strftime('%Y-%m-%d %H:%M')} on {machine()}")
    scratch = Path(tempfile.mkdtemp(prefix="mhsa-bench-"))
    try:
        one_submission(scratch)
        overhead()
        if args.batch_size:
            batch(scratch, args.batch_size, args.jobs)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
