"""How long the nbgrader route takes for a class: `nbgrader autograde`, then the isolated pass of
`python -m autograder gradebook` cold (every notebook graded in isolation), warm (the cache) and
with --write; with an estimate for 300 notebooks.

    python benchmarks/gradebook.py                      # 12 notebooks, --jobs 2
    python benchmarks/gradebook.py --students 24 --jobs 4
    python benchmarks/gradebook.py --baseline /tmp/before   # an older checkout's cold pass too, side by side
    python benchmarks/gradebook.py --baseline /tmp/before --rounds 3   # cold passes in turn, medians

The notebooks are the simulated class of tests/test_nbgrader_course.py (full, partial, a syntax
error, a helper cell, wrong answers, two tamperers, the untouched release...; the empty file left
out), repeated as needed, in a course folder built in a temporary directory. Prints the figures
that docs/benchmarks/nbgrader.md records, with the machine they were measured on.
"""
import argparse
import importlib.util
import itertools
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def simulated_class():
    spec = importlib.util.spec_from_file_location("nbgrader_course", REPO / "tests" / "test_nbgrader_course.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def timed(args, cwd) -> tuple:
    """(wall seconds, CPU seconds of the command and every process it waited for). On a shared
    machine the wall time depends on the load; the CPU time much less."""
    started, cpu = time.monotonic(), os.times()
    done = subprocess.run([sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True)
    if done.returncode not in (0, 1):  # gradebook exits 1 when a notebook is flagged
        raise SystemExit(f"{args} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    now = os.times()
    return time.monotonic() - started, now.children_user + now.children_system - cpu.children_user - cpu.children_system


def course_with_class(scratch: Path, run) -> tuple:
    """A copy of the course in scratch/course with its assignment generated (`run(ARGS, cwd)` runs
    `python -m ARGS`: nbgrader's generate_assignment), and the simulated class's notebooks made from
    that release: (the simulation module, the course folder, student -> notebook bytes)."""
    sim = simulated_class()
    (scratch / "autograder").symlink_to(REPO / "autograder")
    root = scratch / "course"
    shutil.copytree(REPO / "course", root, ignore=shutil.ignore_patterns(
        "release", "submitted", "autograded", "feedback", "downloaded", "isolated", "gradebook.db",
        "__pycache__", ".ipynb_checkpoints"))
    run(["nbgrader", "generate_assignment", sim.A], root)
    release = (root / "release" / sim.A / f"{sim.A}.ipynb").read_text()
    source = (root / "source" / sim.A / f"{sim.A}.ipynb").read_text()
    return sim, root, sim.class_notebooks(release, source)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=12)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--class-size", type=int, default=300, help="the class the estimate is for")
    parser.add_argument("--baseline", type=Path, help="a checkout of an earlier commit (git worktree add DIR REV): "
                                                      "its cold pass runs first, on the same course")
    parser.add_argument("--rounds", type=int, default=1,
                        help="cold passes of each checkout, in turn (the medians count: on a shared machine one "
                             "pass's wall time moves by more than a change may gain)")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="mhsa-nbgrader-bench-"))
    try:
        sim, root, class_notebooks = course_with_class(scratch, timed)
        notebooks = [content for student, content in sorted(class_notebooks.items()) if student != sim.EMPTY]
        for number, content in zip(range(args.students), itertools.cycle(notebooks)):
            target = root / "submitted" / f"s{number:03d}" / sim.A / f"{sim.A}.ipynb"
            target.parent.mkdir(parents=True)
            target.write_bytes(content)
        n = args.students
        load = os.getloadavg()[0]
        autograde, autograde_cpu = timed(["nbgrader", "autograde", sim.A], root)
        gradebook = ["autograder", "gradebook", "--course", str(root), "--jobs", str(args.jobs)]
        befores, colds = [], []
        for _ in range(args.rounds):  # in turn, so that a change of load falls on both
            if args.baseline:
                befores.append(timed(gradebook, args.baseline.resolve())[0])
                shutil.rmtree(root / "isolated")  # its cache: the pass below is cold too
            colds.append(timed(gradebook, REPO))
            if len(colds) < args.rounds:
                shutil.rmtree(root / "isolated")
        cold, cold_cpu = statistics.median(c[0] for c in colds), statistics.median(c[1] for c in colds)
        before = statistics.median(befores) if befores else None
        warm, _ = timed(gradebook, REPO)
        write, _ = timed([*gradebook, "--write"], REPO)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    cores = os.cpu_count()
    print(f"machine: {platform.machine()}, {cores} CPUs, Python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d %H:%M')}, load average {load:.1f} at the start")
    print(f"notebooks: {n}, gradebook --jobs {args.jobs}")
    print(f"nbgrader autograde: {autograde:.0f} s wall ({autograde / n:.1f} s a notebook), "
          f"{autograde_cpu / n:.1f} CPU s a notebook")
    runs = f", median of {args.rounds} ({', '.join(f'{c[0]:.1f}' for c in colds)} s)" if args.rounds > 1 else ""
    print(f"gradebook, cold (isolated grades): {cold:.0f} s wall ({cold / n:.1f} s a notebook), "
          f"{cold_cpu / n:.1f} CPU s a notebook{runs}")
    # Wall time only: autograde's kernels are not among the processes whose CPU time os.times counts
    print(f"gradebook's isolated pass per notebook: x{cold / autograde:.2f} the wall time of `nbgrader autograde` "
          f"per notebook (target <= 0.5)")
    if args.baseline:
        runs = f", median of {args.rounds} ({', '.join(f'{b:.1f}' for b in befores)} s)" if args.rounds > 1 else ""
        print(f"baseline {args.baseline}, cold: {before:.0f} s wall{runs}, x{before / autograde:.2f} the wall time of "
              f"`nbgrader autograde`; now x{before / cold:.2f} as fast")
    print(f"gradebook, warm (cached): {warm:.1f} s; --write (cached): {write:.1f} s")
    size, parallel = args.class_size, min(args.jobs, cores)
    print(f"estimate for {size} notebooks, gradebook cold: {cold / n * size / 60:.0f} min at this run's pace; "
          f"{cold_cpu / n * size / parallel / 60:.0f} min on {parallel} idle cores (CPU time / {parallel})")


if __name__ == "__main__":
    main()
