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
that docs/benchmarks/nbgrader.md records, with the machine they were measured on, and the
core-seconds the machine stood idle during each cold pass (how well a pass keeps the cores busy).
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


def idle_core_seconds() -> float | None:
    """How long the machine's cores have stood idle since it started, summed over them (/proc/stat);
    None where there is no /proc/stat."""
    try:
        with open("/proc/stat") as stat:
            fields = stat.readline().split()[1:]
    except OSError:
        return None
    return (int(fields[3]) + int(fields[4])) / os.sysconf("SC_CLK_TCK")  # idle and iowait


def timed(args, cwd) -> tuple:
    """(wall seconds, CPU seconds of the command and every process it waited for, core-seconds the
    machine stood idle meanwhile or None). On a shared machine the wall time depends on the load; the
    CPU time much less. The idle core-seconds say how well a pass keeps the cores busy (what another
    process runs meanwhile counts as busy)."""
    started, cpu, idle = time.monotonic(), os.times(), idle_core_seconds()
    done = subprocess.run([sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True)
    if done.returncode not in (0, 1):  # gradebook exits 1 when a notebook is flagged
        raise SystemExit(f"{args} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    now, idle_now = os.times(), idle_core_seconds()
    return (time.monotonic() - started, now.children_user + now.children_system - cpu.children_user - cpu.children_system,
            None if idle is None else idle_now - idle)


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
        autograde, autograde_cpu, _ = timed(["nbgrader", "autograde", sim.A], root)
        gradebook = ["autograder", "gradebook", "--course", str(root), "--jobs", str(args.jobs)]
        befores, colds = [], []
        for _ in range(args.rounds):  # in turn, so that a change of load falls on both
            if args.baseline:
                befores.append(timed(gradebook, args.baseline.resolve()))
                shutil.rmtree(root / "isolated")  # its cache: the pass below is cold too
            colds.append(timed(gradebook, REPO))
            if len(colds) < args.rounds:
                shutil.rmtree(root / "isolated")
        cold, cold_cpu = statistics.median(c[0] for c in colds), statistics.median(c[1] for c in colds)
        before = statistics.median(b[0] for b in befores) if befores else None
        warm = timed(gradebook, REPO)[0]
        write = timed([*gradebook, "--write"], REPO)[0]
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
        runs = f", median of {args.rounds} ({', '.join(f'{b[0]:.1f}' for b in befores)} s)" if args.rounds > 1 else ""
        print(f"baseline {args.baseline}, cold: {before:.0f} s wall{runs}, x{before / autograde:.2f} the wall time of "
              f"`nbgrader autograde`; now x{before / cold:.2f} as fast")
    if colds[0][2] is not None:
        idle = ", ".join(f"{c[2]:.1f}" for c in colds)
        idle_before = f"; baseline {', '.join(f'{b[2]:.1f}' for b in befores)}" if befores else ""
        print(f"machine's idle core-seconds during each cold pass: {idle}{idle_before} (of {cores} cores)")
    print(f"gradebook, warm (cached): {warm:.1f} s; --write (cached): {write:.1f} s")
    size, parallel = args.class_size, min(args.jobs, cores)
    print(f"estimate for {size} notebooks, gradebook cold: {cold / n * size / 60:.0f} min at this run's pace; "
          f"{cold_cpu / n * size / parallel / 60:.0f} min on {parallel} idle cores (CPU time / {parallel})")


if __name__ == "__main__":
    main()
