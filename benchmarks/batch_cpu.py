"""Where a cold batch's CPU goes, process by process: the grading processes, the worker templates, the
workers, the rest.

    python benchmarks/batch_cpu.py                       # one cold batch of 12, --jobs 2
    python benchmarks/batch_cpu.py --batch-size 40 --rounds 2 --json /tmp/cpu.json
    python benchmarks/batch_cpu.py --rounds 3 --suites-alone   # and the suites' own work, for the floor

Each round is one cold `python -m autograder grade DIR --batch --jobs N` of benchmarks/grading.py's batch
folder (examples, valid styles, mutants), and one grader slot started on its own that grades nothing (its
start-up alone), while this process reads the CPU time (user + system) of every process from /proc every
POLL_S seconds. A process counts in the role its command line and its parent give it:
    runner    the batch itself (`grade DIR --batch`), which hands out the submissions
    slot      a grader slot (autograder.runners.slot): the grading process, where the suites run
    template  a worker template a slot started (isolation/guest/template_main.py): importing torch, once
    worker    a process the template forked (a grade's worker, carry_forward's, their supervisors): the
              submission's calls under the monitor
    other     the rest: bubblewrap, the reaper
Only the command's descendants count (another program running meanwhile does not). Beside them, the
machine's busy core-seconds (/proc/stat, every program's) and the wall time. A process's last reading
counts, so one that lives less than POLL_S is missed, and the readings cost this process some CPU
(counted in the machine's, not in any role): run it on an otherwise quiet machine.

With --suites-alone, each round also runs the same submissions' suites one after the other in one warm Python,
in-process, as the grade's first run does (grading.run_pytest: the grader's pytest options, failures
unshrunk), after one run that imports and warms everything: once under the monitor as a student's `pytest
tests_public` runs it, and once with none (the path the trusted reference takes). Their CPU is the suites'
own work with no isolation, no worker, no wire and no carry_forward, shrinking or diagnosis: what any
grader that runs these suites pays for each submission, the start-up left out.

Why not a sampling profiler: one that counts the threads holding the GIL (py-spy --gil) misses what torch
computes with the GIL released and counts a holder the kernel has preempted as busy; on two cores shared
by four processes that moves the shares by a third. The kernel's own accounts do neither.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks import grading as benchmark  # noqa: E402 - the batch folder, the machine, its busy time

POLL_S = 0.02
ROLES = ("runner", "slot", "template", "worker", "other")
TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def read_processes(newer_than: int) -> dict:
    """pid -> (parent pid, command line, CPU seconds) of every process now whose pid is above `newer_than`
    (pids grow on a machine that has not wrapped them, so this is what started since)."""
    seen = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) <= newer_than:
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
            command = Path(f"/proc/{entry.name}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # it ended between the listing and the reading
            continue
        fields = stat.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
        seen[int(entry.name)] = (int(fields[1]), command, (int(fields[11]) + int(fields[12])) * TICK_S)
    return seen


def descends(pid: int, ancestor: int, processes: dict) -> bool:
    while pid != ancestor:
        if pid not in processes:
            return False
        pid = processes[pid][0]
    return True


def program(command: str) -> str:
    """What a Python command line runs: `-m MODULE`'s module or the script's file name ("" for another
    program). The reaper's line names the template's script too, after its own."""
    words = command.split()
    if not words or not os.path.basename(words[0]).startswith("python"):
        return ""
    for i, word in enumerate(words[1:], 1):
        if word == "-m":
            return words[i + 1] if i + 1 < len(words) else ""
        if not word.startswith("-"):
            return os.path.basename(word)
    return ""


def role(pid: int, processes: dict) -> str:
    parent, command, _ = processes[pid]
    run, parents_run = program(command), program(processes.get(parent, (0, "", 0))[1])
    if run == "template_main.py":
        return "worker" if parents_run == run else "template"
    if run == "autograder.runners.slot":  # a slot's own child seen before its exec counts as other
        return "other" if parents_run == run else "slot"
    if run == "autograder" and "--batch" in command.split():
        return "runner"
    return "other"


def measured(command: list) -> dict:
    """Run `command` (in the repository, no input, its output dropped) and account for every process it starts:
    the wall seconds, the machine's busy core-seconds, and per role the CPU seconds and the process count."""
    first = int(Path("/proc/sys/kernel/ns_last_pid").read_text())  # every later process has a higher pid
    processes = {}
    started, busy = time.monotonic(), benchmark.machine_cpu()
    child = subprocess.Popen(command, cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, env=os.environ | {"PYTHONPATH": str(REPO)})
    while child.poll() is None:
        for pid, (parent, line, cpu) in read_processes(first).items():
            known = processes.get(pid)
            # the last command line seen counts: a child seen between its fork and its exec still
            # shows its parent's (an ended process's line reads empty)
            processes[pid] = (parent, line or (known[1] if known else ""), cpu)
        time.sleep(POLL_S)
    wall, busy = time.monotonic() - started, benchmark.machine_cpu() - busy
    if child.returncode:
        raise SystemExit(f"{' '.join(command)} ended with {child.returncode}")
    cpu, count = Counter(), Counter()
    for pid, (_, _, seconds) in processes.items():
        if descends(pid, child.pid, processes):  # not another program started meanwhile
            cpu[role(pid, processes)] += seconds
            count[role(pid, processes)] += 1
    return {"wall_s": wall, "busy_core_s": busy, "cpu_s": {r: cpu[r] for r in ROLES}, "processes": dict(count)}


# One warm Python running the suites on each submission in turn; prints its CPU seconds for all of them.
SUITES_ALONE = """
import functools, sys, time
from pathlib import Path
from autograder.pipeline import grading
from autograder.testing import backends

monitored, files = sys.argv[1] == "monitored", [Path(f) for f in sys.argv[2:]]
if not monitored:  # the reference's path: no forbidden-API monitor, no shape trace
    backends.in_process = functools.partial(backends.InProcessBackend, trusted=True)

def suites(path):
    grading.run_pytest(path, ("public", "hidden"), grading.ResultCollector(), shrink=False)

suites(files[0])  # the imports, the suites' modules, torch's lazy first calls
started = time.process_time()
for path in files:
    suites(path)
print(time.process_time() - started)
"""


def suites_alone(folder: Path, monitored: bool) -> float:
    """CPU seconds of the suites on every submission of `folder`, one after the other in one warm Python."""
    files = sorted(str(p) for p in folder.glob("*.py"))
    run = subprocess.run([sys.executable, "-c", SUITES_ALONE, "monitored" if monitored else "plain", *files],
                         cwd=REPO, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                         env=os.environ | {"PYTHONPATH": str(REPO)})
    if run.returncode:
        raise SystemExit(f"the suites alone ended with {run.returncode}:\n{run.stderr[-2000:]}")
    return float(run.stdout.split()[-1])


def one_round(scratch: Path, folder: Path, jobs: int, alone: bool) -> dict:
    batch = measured([sys.executable, "-m", "autograder", "grade", str(folder), "--batch", "--out",
                      str(scratch / f"out-{time.monotonic_ns()}"), "--jobs", str(jobs)])
    # A slot that grades nothing: its end of stdin comes at once, so this is its start-up (the slot's
    # imports and rubric; its template is stopped as soon as the slot ends, so the batch's template
    # figure, not this one, is what a template costs).
    idle = measured([sys.executable, "-m", "autograder.runners.slot"])
    figures = {"batch": batch, "idle_slot_s": idle["cpu_s"]["slot"]}
    if alone:
        figures["suites_alone_s"] = {"plain": suites_alone(folder, False), "monitored": suites_alone(folder, True)}
    return figures


def report(size: int, jobs: int, rounds: list) -> dict:
    def median(get):
        return statistics.median(get(r) for r in rounds)

    wall, busy = median(lambda r: r["batch"]["wall_s"]), median(lambda r: r["batch"]["busy_core_s"])
    cpu = {name: median(lambda r, n=name: r["batch"]["cpu_s"][n]) for name in ROLES}
    counted = sum(cpu.values())
    idle_slot = median(lambda r: r["idle_slot_s"])
    processes = rounds[0]["batch"]["processes"]
    print(f"one cold batch of {size}, --jobs {jobs} (medians of {len(rounds)}): {wall:.1f} s wall, "
          f"{busy:.1f} core-seconds busy ({busy / wall / os.cpu_count():.0%} of {os.cpu_count()} cores), "
          f"{counted:.1f} of them counted by process")
    for name in ROLES:
        print(f"  {name:<9} {cpu[name]:6.1f} s  {cpu[name] / counted:4.0%}  ({processes.get(name, 0)} processes)")
    slots = processes.get("slot", 0)
    fixed = idle_slot * slots + cpu["template"] + cpu["runner"]
    per_grade = (cpu["slot"] - idle_slot * slots + cpu["worker"]) / size
    print(f"a slot's start-up, alone: {idle_slot:.1f} s; so the batch's start-up (slots' start-ups, templates, "
          f"runner) {fixed:.1f} s, and a grade {per_grade:.2f} s: "
          f"{(cpu['slot'] - idle_slot * slots) / size:.2f} s in its slot, {cpu['worker'] / size:.2f} s in its workers")
    figures = {"size": size, "jobs": jobs, "wall_s": wall, "busy_core_s": busy, "cpu_s": cpu, "processes": processes,
               "idle_slot_s": idle_slot, "start_up_s": fixed, "per_grade_s": per_grade, "rounds": rounds}
    if "suites_alone_s" in rounds[0]:
        alone = {way: median(lambda r, w=way: r["suites_alone_s"][w]) for way in ("plain", "monitored")}
        print(f"the suites alone, warm in one process, in-process (medians of {len(rounds)}): {alone['plain']:.1f} s "
              f"with no monitor, {alone['monitored']:.1f} s monitored; a grade in the batch {per_grade:.2f} s against "
              f"{alone['plain'] / size:.2f} s of the suites' own work (x{per_grade * size / alone['plain']:.2f})")
        figures["suites_alone_s"] = alone
    return figures


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=12)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1, help="cold batches, one after the other (the median counts)")
    parser.add_argument("--suites-alone", action="store_true",
                        help="also time the suites on the same submissions in one warm process, monitored and not")
    parser.add_argument("--json", type=Path, help="write every figure here")
    args = parser.parse_args(argv)
    print(f"{time.strftime('%Y-%m-%d %H:%M')} on {benchmark.machine()}")
    scratch = Path(tempfile.mkdtemp(prefix="mhsa-batch-cpu-"))
    try:
        folder = scratch / "batch"
        benchmark.batch_folder(folder, args.batch_size)
        rounds = [one_round(scratch, folder, args.jobs, args.suites_alone) for _ in range(args.rounds)]
        figures = report(args.batch_size, args.jobs, rounds)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()
