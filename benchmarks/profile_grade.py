"""Where one grade's time goes: each stage of the grading pipeline, timed in a grader slot.

    python benchmarks/profile_grade.py                          # the reference and a buggy submission, 3 grades each
    python benchmarks/profile_grade.py --isolation process --repeats 5 --json /tmp/profile.json
    python benchmarks/profile_grade.py --files path/to/mhsa.py --repeats 2

For each file, one after the other:
  1. one cold grade: `python -m autograder grade FILE --isolation LEVEL` in a fresh Python, timed from
     outside (the interpreter, torch, pytest, the worker and every stage: what a TA waits for);
  2. the unit: a cold in-process pytest run of both suites on FILE in a fresh Python (benchmarks/grading.py's
     cold_suites, the unit of the ratios in docs/benchmarks/grading.md);
  3. a slot-like process: a fresh Python started as autograder/runners/slot.py starts (the rubric loaded, the
     worker template started and installed, the grader's imports), grading FILE --repeats times through
     grade_file.grade_one, as a slot grades each job. Each grade is profiled: the seconds of every stage of
     grading.STAGES that grading.enabled lets run ("off": it did not); within a stage that runs pytest, its
     start-up (options, plugins, conftest), collection (importing the suites, building their tests) and the
     tests (to pytest.main's return); the calls into the worker (WorkerBackend._call: their count and round
     trip, the wait for the worker to import the submission apart); and the workers forked from the template
     or spawned (the timing part's are always spawned). "(outside the stages)" is the rest of grade_one: the
     context made, the worker stopped, the results file written.
The slot's first grade is cold (the suites imported, hypothesis's strategies built, the template's first
fork); the later ones are what a batch pays per submission, given as medians.

Nothing in the grader changes: in the slot-like process only, the profile wraps grading.run (to hand it each
stage wrapped in a timer), pytest.main (run_pytest hands it the grade's collector as its one plugin; the
wrapper adds one that notes the phases), WorkerBackend._call and _ensure_worker, and WorkerProcess.__init__.

Prints the machine, then per file a table a maintainer can paste into docs, the calls, and two ratios to the
unit: one cold grade, and one warm grade in a slot. --json PATH writes every figure.
"""
import argparse
import contextlib
import functools
import json
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack
from multiprocessing import get_context
from pathlib import Path
from unittest import mock

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from autograder.pipeline import grading  # noqa: E402
from benchmarks import grading as benchmark  # noqa: E402 - the cold grade, the unit and the machine line

OUTSIDE = "(outside the stages)"  # the context made, the worker stopped, the results file written
PHASES = ("pytest start-up", "collection", "tests")  # the tests' phase ends as pytest.main returns


class PytestPhases:
    """pytest plugin: when each phase of one pytest.main call ended (perf_counter seconds)."""

    def __init__(self):
        self.ended = {}

    @pytest.hookimpl(trylast=True)  # after every other plugin's session start: that is start-up too
    def pytest_sessionstart(self, session):
        self.ended["pytest start-up"] = time.perf_counter()

    def pytest_collection_finish(self, session):
        self.ended["collection"] = time.perf_counter()


class Profiler:
    """The slot-like process's view of its grades: `grade` runs one and returns what it spent, filled in
    by the wrappers that `instrumented` installs."""

    def __init__(self):
        self.record = None
        self.stage = OUTSIDE

    def grade(self, path: Path, options, rubric, results_file: Path) -> dict:
        from autograder.pipeline.grade_file import grade_one

        self.record = {"stages": {}, "pytest": {}, "calls_by_stage": {}, "import_wait_s": 0.0,
                       "workers": {"forked": 0, "spawned": 0}}
        started = time.perf_counter()
        # what slot.main calls for each job: the whole-submission limit's watchdog and the results file too
        if grade_one(path, results_file, options, rubric, time_limit=rubric.submission_timeout) != 0:
            raise RuntimeError(f"grading {path} was impossible: its profile would time a failure's results")
        record, self.record = self.record, None
        record["total_s"] = time.perf_counter() - started
        record["stages"] = {s.__name__: record["stages"].get(s.__name__) for s in grading.STAGES}
        by_stage = record["calls_by_stage"].values()
        record["calls"] = {"count": sum(n for n, _ in by_stage), "seconds": sum(s for _, s in by_stage)}
        return record

    def instrumented(self) -> ExitStack:
        """The wrappers, installed in this process until the returned stack closes."""
        from autograder.isolation.host.worker import WorkerProcess
        from autograder.testing.backends import WorkerBackend

        run, main = grading.run, pytest.main
        call, ensure_worker, new_worker = WorkerBackend._call, WorkerBackend._ensure_worker, WorkerProcess.__init__

        def timed_run(ctx, stages=grading.STAGES):
            return run(ctx, tuple(map(self.timed, stages)))

        def timed_main(args, plugins=()):
            phases = PytestPhases()
            started = time.perf_counter()
            try:
                return main(args, plugins=[*plugins, phases])
            finally:
                ended = [started, *(phases.ended.get(p) for p in PHASES[:-1]), time.perf_counter()]
                spent = self.record["pytest"].setdefault(self.stage, dict.fromkeys(PHASES, 0.0))
                for phase, begin, end in zip(PHASES, ended, ended[1:]):
                    if begin is not None and end is not None:  # a session stopped early lacks its later phases
                        spent[phase] += end - begin

        def timed_call(backend, call_):
            started = time.perf_counter()
            try:
                return call(backend, call_)
            finally:
                count, seconds = self.record["calls_by_stage"].get(self.stage, (0, 0.0))
                self.record["calls_by_stage"][self.stage] = (count + 1, seconds + time.perf_counter() - started)

        def timed_ensure_worker(backend):
            # the first call of a worker waits for it to import the submission: not a round trip
            waiting, started = not backend._greeted, time.perf_counter()
            try:
                return ensure_worker(backend)
            finally:
                if waiting:
                    self.record["import_wait_s"] += time.perf_counter() - started

        def counted_worker(worker, *args, **kwargs):
            new_worker(worker, *args, **kwargs)
            self.record["workers"]["forked" if worker.forked else "spawned"] += 1

        stack = ExitStack()
        stack.enter_context(mock.patch.object(grading, "run", timed_run))
        stack.enter_context(mock.patch.object(pytest, "main", timed_main))
        stack.enter_context(mock.patch.object(WorkerBackend, "_call", timed_call))
        stack.enter_context(mock.patch.object(WorkerBackend, "_ensure_worker", timed_ensure_worker))
        stack.enter_context(mock.patch.object(WorkerProcess, "__init__", counted_worker))
        return stack

    def timed(self, stage):
        """`stage` timed. grading.run asks grading.enabled about the wrapper, which ENABLED does not
        name (so it runs); the wrapper asks about the stage itself, so the same stages run as without it."""

        @functools.wraps(stage)
        def timed_stage(ctx, grade):
            if not grading.enabled(stage, ctx):
                return grade
            self.stage, started = stage.__name__, time.perf_counter()
            try:
                return stage(ctx, grade)
            finally:
                self.record["stages"][stage.__name__] = time.perf_counter() - started
                self.stage = OUTSIDE

        return timed_stage


def in_slot(path: Path, isolation: str, repeats: int) -> dict:
    """`repeats` grades of `path` in this process, set up as slot.main sets up a grader slot (run in a
    fresh Python of its own: a slot's first grade is only cold there)."""
    from autograder.core import rubric as rubric_file
    from autograder.isolation.host import worker_template
    from autograder.pipeline.grade_file import GradeOptions

    started = time.perf_counter()
    options = GradeOptions(isolation=isolation)
    rubric = rubric_file.load(options.rubric)
    template = worker_template.start(options.isolation, [*rubric.hidden, rubric.source, *options.hide])
    from autograder.testing import backends  # noqa: F401 - as slot.main: imported before the first job
    startup = time.perf_counter() - started
    scratch = Path(tempfile.mkdtemp(prefix="mhsa-profile-"))
    profiler = Profiler()
    try:
        with profiler.instrumented():
            grades = [profiler.grade(path, options, rubric, scratch / f"{i}.json") for i in range(repeats)]
    finally:
        if template is not None:
            template.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    return {"slot_startup_s": startup, "template": template is not None, "grades": grades}


def monitor_cost(calls: int = 300) -> dict:
    """Milliseconds of one call of the reference's MultiHeadSelfAttention, forward and backward (batch 2,
    7 tokens, d_model 32, 4 heads: a size the suites use), in a fresh process: plain; under the monitor
    as it runs in-process (executor._monitored: the shape trace, the forbidden-API monitor with its
    operator recorder and module watch, then the canary); and as the worker runs it, with library
    attention refused (refusal.py), which takes the operator recorder's place, with and without the shape
    trace (what the trace itself costs). `constructed`: the same, the module built in each call as a
    suite's call builds the student's (its initialisation's operations go through the monitor and the
    trace too), plain and as the worker runs it. The pipes are not in it: a call's round trip less the
    monitored call is the wire, the worker's loop and the checks of the inputs."""
    import importlib.util

    import torch

    sys.path.insert(0, str(REPO / "autograder" / "isolation" / "guest"))
    import executor  # the worker's own modules, loaded as the worker loads them: by path
    import refusal

    torch.set_num_threads(1)  # as the worker runs
    spec = importlib.util.spec_from_file_location("reference_mhsa", benchmark.REFERENCE)
    reference = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reference)
    torch.manual_seed(0)
    module, x = reference.MultiHeadSelfAttention(32, 4), torch.randn(2, 7, 32, requires_grad=True)

    def call(construct=False):
        out = (reference.MultiHeadSelfAttention(32, 4) if construct else module)(x)
        (out[0] if isinstance(out, tuple) else out).sum().backward()

    def monitored(construct=False, traced=True):
        monitor = executor.ForbiddenApiMonitor()
        with executor.ShapeTrace(spec.origin) if traced else contextlib.nullcontext(), monitor:
            call(construct)
            monitor.check_canary()

    def per_call_ms(step, *args) -> float:
        for _ in range(20):  # warm: torch's lazy imports and caches
            step(*args)
        started = time.perf_counter()
        for _ in range(calls):
            step(*args)
        return (time.perf_counter() - started) / calls * 1000

    def medians(*steps) -> list:
        """Each (step, *args)'s milliseconds, the steps in turn three times: the medians."""
        return [statistics.median(runs) for runs in zip(*[[per_call_ms(*step) for step in steps] for _ in range(3)])]

    plain, watched, plain_built = medians((call,), (monitored,), (call, True))
    refused = refusal.prepare(executor.note_refused, executor.FORBIDDEN_OPS, executor.FORBIDDEN_FUNCTIONS,
                              executor.library_attention_class, executor.library_label)
    executor.refuse_library_attention(refusal.start(refused))  # as the worker does after the import
    in_worker, untraced, built, built_untraced = medians((monitored,), (monitored, False, False),
                                                         (monitored, True), (monitored, True, False))
    return {"plain_ms": plain, "monitored_ms": watched, "worker_ms": in_worker, "worker_untraced_ms": untraced,
            "constructed": {"plain_ms": plain_built, "worker_ms": built, "worker_untraced_ms": built_untraced}}


def round_trip_cost(isolation: str, calls: int = 300) -> dict:
    """Milliseconds of the smallest call of the suites (causal_mask(4)) on the reference, through a
    worker at `isolation` and in-process, in turn: the difference is what a round trip itself costs
    (the call encoded, sent, decoded and run under the monitor there, the reply back, the inputs
    checked for in-place writes), whatever the call computes."""
    from autograder.isolation.host.levels import resolve
    from autograder.testing.backends import InProcessBackend, WorkerBackend
    from autograder.testing.calls import Call

    worker, local = WorkerBackend(benchmark.REFERENCE, resolve(isolation)), InProcessBackend(benchmark.REFERENCE)
    call = Call("causal_mask", (4,))

    def per_call_ms(backend) -> float:
        for _ in range(20):
            backend.run(call)
        started = time.perf_counter()
        for _ in range(calls):
            backend.run(call)
        return (time.perf_counter() - started) / calls * 1000

    try:
        through, here = zip(*[(per_call_ms(worker), per_call_ms(local)) for _ in range(3)])
    finally:
        worker.close()
    return {"worker_ms": statistics.median(through), "in_process_ms": statistics.median(here)}


def profile_file(path: Path, isolation: str, repeats: int, cold_repeats: int) -> dict:
    """The cold grade, the unit and the slot's grades of `path`, measured one after the other, so that
    their ratios hold on a busy machine; the cold grade and the unit `cold_repeats` times each, in turn
    (one cold run is at the mercy of the disk cache and the load: the medians count)."""
    cold, unit = [], []
    for _ in range(cold_repeats):
        cold.append(benchmark.cli("grade", str(path), "--isolation", isolation)[0])  # its wall seconds
        unit.append(benchmark.cold_suites(path))
    figures = {"cold_grade_s": statistics.median(cold), "unit_s": statistics.median(unit),
               "cold_grade_runs_s": cold, "unit_runs_s": unit}
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as slot:
        figures |= slot.submit(in_slot, path, isolation, repeats).result()
    later = figures["grades"][1:]
    figures["warm_grade_s"] = statistics.median(g["total_s"] for g in later) if later else None
    figures["cold_grade_per_unit"] = figures["cold_grade_s"] / figures["unit_s"]
    figures["warm_grade_per_unit"] = figures["warm_grade_s"] / figures["unit_s"] if later else None
    return figures


def rows(grade: dict) -> dict:
    """Row -> seconds of one grade (None: the stage did not run): the stages in order, each followed by
    its pytest phases ("stage/phase"), then what ran outside the stages and the whole grade."""
    found = {}
    for stage, seconds in grade["stages"].items():
        found[stage] = seconds
        found |= {f"{stage}/{phase}": spent for phase, spent in grade["pytest"].get(stage, {}).items()}
    found[OUTSIDE] = grade["total_s"] - sum(s for s in grade["stages"].values() if s is not None)
    found["whole grade"] = grade["total_s"]
    return found


def cell(seconds) -> str:
    return "off" if seconds is None else f"{seconds:.2f}"


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def calls(grade: dict) -> str:
    count, seconds = grade["calls"]["count"], grade["calls"]["seconds"] - grade["import_wait_s"]
    per_call = f"{seconds / count * 1000:.1f} ms a call" if count else "no calls"
    by_stage = ", ".join(f"{stage} {n}" for stage, (n, _) in grade["calls_by_stage"].items())
    return (f"{count} calls ({by_stage}), {seconds:.2f} s round trip ({per_call}), and {grade['import_wait_s']:.2f} s "
            f"waiting for the worker to import the submission; workers: {grade['workers']['forked']} forked from "
            f"the template, {grade['workers']['spawned']} spawned")


def report(name: str, isolation: str, level: str, figures: dict) -> None:
    grades = figures["grades"]
    first, later = rows(grades[0]), [rows(g) for g in grades[1:]]
    warm = {row: median(r.get(row) for r in later) for row in first} if later else {}
    shared = warm or first  # the share of the grade a batch pays for; the first grade's without later ones
    print(f"\n{name}, isolation {level}: {len(grades)} grade(s) in a slot-like process (its start-up "
          f"{figures['slot_startup_s']:.1f} s, once; worker template {'used' if figures['template'] else 'none'})\n")
    # a phase's row is "  stage: phase": Markdown drops the indent, the stage's name stays
    labels = {row: "  " + row.replace("/", ": ") if "/" in row else row for row in first}
    width = max(map(len, labels.values()))
    print(f"| {'stage':<{width}} | {'first grade (s)':>15} | {'later grades, median (s)':>24} | {'share':>5} |")
    print(f"| {'-' * width} | {'-' * 14}: | {'-' * 23}: | {'-' * 4}: |")
    for row, seconds in first.items():
        then = cell(warm.get(row)) if later else "-"
        share = f"{shared[row] / shared['whole grade']:.0%}" if shared[row] is not None else ""
        print(f"| {labels[row]:<{width}} | {cell(seconds):>15} | {then:>24} | {share:>5} |")
    print(f"\ncalls into the worker, first grade: {calls(grades[0])}")
    for i, grade in enumerate(grades[1:], 2):
        print(f"  grade {i}: {calls(grade)}")
    runs = len(figures["unit_runs_s"])
    print(f"one cold grade (`python -m autograder grade {name} --isolation {isolation}`, a fresh Python): "
          f"{figures['cold_grade_s']:.1f} s, median of {runs} ({', '.join(f'{t:.1f}' for t in figures['cold_grade_runs_s'])})")
    print(f"unit (`pytest tests_public tests_hidden --impl {name}`, in-process, a fresh Python): "
          f"{figures['unit_s']:.1f} s, median of {runs} ({', '.join(f'{t:.1f}' for t in figures['unit_runs_s'])})")
    print(f"one cold grade / unit: x{figures['cold_grade_per_unit']:.2f}")
    ratio = f"x{figures['warm_grade_per_unit']:.2f} (median of {len(later)})" if later else "not measured (--repeats 1)"
    print(f"one warm grade in a slot / unit: {ratio}; the slot's first grade "
          f"x{grades[0]['total_s'] / figures['unit_s']:.2f}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3,
                        help="grades of each file in the slot-like process (default 3; the first is cold)")
    parser.add_argument("--cold-repeats", type=int, default=3,
                        help="cold grades and units of each file, in turn (default 3; the medians count)")
    parser.add_argument("--isolation", choices=("auto", "process", "sandbox"), default="auto")
    parser.add_argument("--files", nargs="+", type=Path, default=[benchmark.REFERENCE, benchmark.BUGGY])
    parser.add_argument("--json", type=Path, help="write every figure here")
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.cold_repeats < 1:
        parser.error("--repeats and --cold-repeats must be at least 1")
    from autograder.isolation.host.levels import resolve

    level = resolve(args.isolation).level
    machine = benchmark.machine()
    print(f"{time.strftime('%Y-%m-%d %H:%M')} on {machine}")
    files = {}
    for path in args.files:
        path = path.resolve()
        name = str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)
        files[name] = profile_file(path, args.isolation, args.repeats, args.cold_repeats)
        report(name, args.isolation, level, files[name])
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as fresh:
        monitor = fresh.submit(monitor_cost).result()
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as fresh:  # no refusal in force there
        trip = fresh.submit(round_trip_cost, args.isolation).result()
    plain = monitor["plain_ms"]
    print(f"\nthe monitor: one MultiHeadSelfAttention forward and backward {plain:.2f} ms plain, "
          f"{monitor['monitored_ms']:.2f} ms monitored in-process, operators recorded (x{monitor['monitored_ms'] / plain:.1f}), "
          f"{monitor['worker_ms']:.2f} ms as the worker runs it, library attention refused (x{monitor['worker_ms'] / plain:.1f}), "
          f"of which the shape trace {monitor['worker_ms'] - monitor['worker_untraced_ms']:.2f} ms")
    built = monitor["constructed"]
    print(f"  the module built in the call, as a suite's call builds it: {built['plain_ms']:.2f} ms plain, "
          f"{built['worker_ms']:.2f} ms as the worker runs it (x{built['worker_ms'] / built['plain_ms']:.1f}), "
          f"of which the shape trace {built['worker_ms'] - built['worker_untraced_ms']:.2f} ms")
    print(f"a round trip: causal_mask(4) {trip['worker_ms']:.2f} ms through a worker, {trip['in_process_ms']:.2f} ms "
          f"in-process: {trip['worker_ms'] - trip['in_process_ms']:.2f} ms a call for the round trip itself")
    if args.json:
        args.json.write_text(json.dumps({"machine": machine, "isolation": args.isolation, "level": level,
                                         "repeats": args.repeats, "cold_repeats": args.cold_repeats,
                                         "files": files, "monitor": monitor, "round_trip": trip}, indent=1))


if __name__ == "__main__":
    main()
