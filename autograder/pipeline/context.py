"""Everything one grade needs, decided once, before any stage runs.

The command line (or the Gradescope runner, or a batch) builds a GradingContext; every stage of the
pipeline (autograder/pipeline/grading.py) reads it and nothing else: no stage sees an isolation string,
re-reads the rubric or works out what to hide.
"""
import os
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from autograder.core import rubric as rubric_file
from autograder.core.rubric import TIMING_DEVICES
from autograder.intake import submission as submission_file
from autograder.isolation.host.levels import Isolation, resolve

SUITES = ("public", "hidden")
SUITE_CHOICES = {"public": ("public",), "hidden": ("hidden",), "all": SUITES}  # the command line's --suite


@dataclass
class GradingContext:
    """One grade's settings and the resources it holds (the working folder, the worker).

    `isolation` None runs the submission in this process: `check --debug` only, never to grade.
    `extras` adds the parts not graded by test suites: the knowledge check and timing.
    `timing_device`: "auto" times on CUDA when this machine has it and skips the part otherwise;
    "cuda" and "cpu" time on that device (the CPU with the rubric's CPU-sized configs).
    """
    path: Path
    rubric: rubric_file.Rubric
    isolation: Isolation | None
    suites: tuple = SUITES
    hidden: tuple = ()
    extras: bool = True
    timing_device: str = "auto"
    days_late: float = 0.0   # after the due date, for the rubric's late policy
    notes: tuple = ()        # for instructors: settings the machine made the context change
    time_up: str = ""        # why the whole-submission limit stopped this grade early; "" while there is time
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="mhsa-grade-")))
    _backend: object = field(default=None, repr=False)
    _started: object = field(default=None, repr=False)  # a worker spawned before the backend exists
    _rerun: object = field(default=None, repr=False)    # error carried forward's backend (rerun_backend)
    _rerun_started: object = field(default=None, repr=False)  # its worker, spawned before it (start_rerun_worker)
    _template: object = field(default=None, repr=False)  # the grade's own worker template (start_worker)

    @classmethod
    def create(cls, path, *, rubric: rubric_file.Rubric, suites=SUITES, isolation="auto", hide=(), extras=True,
               timing_device=None, call_timeout=None, days_late=0.0) -> "GradingContext":
        """The context for grading `path`; `isolation` is a level name ("inprocess", "auto",
        "process", "sandbox") or an Isolation; `hide` adds paths the submission must not read. `rubric`:
        the one the command loaded (rubric.load), never re-read here, so that a custom one decides."""
        rubric, fitted = fitted_to_container(rubric)
        if call_timeout:
            rubric = replace(rubric, limits=replace(rubric.limits, call_timeout=float(call_timeout)))
        if isinstance(isolation, str):
            isolation = None if isolation == "inprocess" else resolve(isolation)
        path = Path(path)
        origin = [path.resolve()] if path.exists() and submission_file.safe_to_hide(path) else []
        hiding = (*rubric.hidden, rubric.source, *(Path(h).resolve() for h in hide), *origin)
        hidden = tuple(dict.fromkeys(p for p in hiding if p.exists()))
        device = timing_device or (rubric.parts["timing"].device if "timing" in rubric.parts else "auto")
        if device not in TIMING_DEVICES:
            raise ValueError(f"timing device must be one of {', '.join(TIMING_DEVICES)}; got {device!r}")
        return cls(path, rubric, isolation, tuple(suites), hidden, extras, device, float(days_late),
                   notes=(fitted,) if fitted else ())

    @property
    def isolation_level(self) -> str:
        return self.isolation.level if self.isolation else "inprocess"

    def start_worker(self, source: Path) -> None:
        """Start the grade's worker for `source` now, without waiting for it: it imports torch while
        this process goes on (worker.py imports nothing heavy to start it). Where a grader slot's
        template serves this grade, the worker is forked from it. Where none does (a lone grade), the
        grade starts a template of its own (worker_template.for_grade) and forks every worker from it
        once backend() or rerun_backend() asks: a grade with failures needs carry_forward's worker
        too, and an entry point that blows a limit a new one, each then a fork rather than a Python
        that imports torch. Where no template can serve, the worker is spawned now, as before."""
        if self.isolation is None or self._backend is not None or self._started is not None \
                or self._template is not None:
            return
        from autograder.isolation.host import worker, worker_template

        if not worker.template_installed():
            self._template = worker_template.for_grade(self.isolation, list(self.hidden))
        if self._template is None:
            self._started = self._spawn(source)

    def start_rerun_worker(self, source: Path) -> None:
        """Spawn error carried forward's worker now, without waiting: run_suites calls this as soon as
        its results so far call for a rerun, so that a worker spawned cold imports torch and the
        submission on a spare core while the suites go on, rather than while carry_forward waits for
        it. Not where it would take the grade's own core (one usable CPU, no template to fork it
        from): there the spawn would slow the suites' calls as much as it saves. Nor where the
        template that would fork it is not ready (restarted in the middle of the grade, it imports
        torch again): the fork would wait for it between two of the suites' calls. A head start only:
        where there is none or it fails, carry_forward starts its worker when it asks for it."""
        if self.isolation is not None and self._rerun is None and self._rerun_started is None and not self.time_up:
            from autograder.isolation.host import worker

            if worker.template_fits(self.isolation, list(self.hidden), self._template):
                head_start = worker.template_ready(self._template)  # a fork, now
            else:
                head_start = usable_cpus() > 1  # a spawn, on a spare core
            if head_start:
                try:
                    self._rerun_started = self._spawn(source)
                except Exception:  # noqa: BLE001 - rerun_backend spawns it again; failing there fails the rerun's tests
                    self._rerun_started = None

    def _spawn(self, source: Path):
        from autograder.isolation.host.worker import WorkerProcess

        return WorkerProcess(source, self.isolation, self.rubric.limits, list(self.hidden), template=self._template)

    def backend(self, source: Path):
        """The one backend of this grade, made on first use and shared by the suites and the
        diagnosis (the worker imports the submission once); it takes over a started worker."""
        if self._backend is None:
            from autograder.testing.backends import WorkerBackend, open_in_process

            self._backend = (WorkerBackend(source, self.isolation, self.rubric.limits, list(self.hidden),
                                           started=self._started, template=self._template)
                             if self.isolation else open_in_process(source))
            self._started = None
            if self.time_up:  # the limit came while the backend was being made
                self._backend.stop_early(self.time_up)
        return self._backend

    def rerun_backend(self, source: Path):
        """Error carried forward's backend: a worker of its own, made on first use, whose calls run
        with the correct versions a rerun sends (Backend.stand_ins). Nothing the submission sees, keeps
        or prints there reaches the grade's own worker, its diagnosis or its printed output: the rerun
        reports only whether each test passed."""
        if self._rerun is None:
            from autograder.testing.backends import WorkerBackend, open_in_process

            self._rerun = (WorkerBackend(source, self.isolation, self.rubric.limits, list(self.hidden),
                                         started=self._rerun_started, template=self._template)
                           if self.isolation else open_in_process(source))
            self._rerun_started = None
            if self.time_up:
                self._rerun.stop_early(self.time_up)
        return self._rerun

    def stop_early(self, reason: str) -> None:
        """The whole-submission limit is reached (called from the grade's watchdog thread): calls into
        the submission fail from now on with `reason`, one in flight too, and the grade scores what
        finished (grading.run_suites)."""
        self.time_up = reason
        for backend in (self._backend, self._rerun):
            if backend is not None:
                backend.stop_early(reason)

    def close(self) -> None:
        """Stop the workers and the grade's template and remove the working folder; safe to call twice.
        Each is stopped even where stopping one before it failed: the first failure is raised after."""
        stops = [*(backend.close for backend in (self._backend, self._rerun) if backend is not None),
                 *(held.stop for held in (self._started, self._rerun_started, self._template) if held is not None)]
        self._started = self._rerun_started = self._template = None  # the template last: after its workers
        failure = None
        for stop in stops:
            try:
                stop()
            except Exception as err:  # noqa: BLE001 - raised below, once everything else is stopped
                failure = failure or err
        shutil.rmtree(self.workdir, ignore_errors=True)
        if failure is not None:
            raise failure


GRADER_RESERVE_MB = 1536  # the grading process itself: torch, pytest and the expected values


def fitted_to_container(rubric) -> tuple:
    """(the rubric, a note or None): the worker's memory limit lowered below this machine's cgroup
    memory limit (a Gradescope container, a Slurm job). A worker that outgrows its own limit fails
    its own calls; one that outgrows the container meets the kernel's OOM killer, which may take the
    grader, and the results file, with it."""
    available = container_memory_mb()
    if available is None or rubric.limits.memory_mb <= available - GRADER_RESERVE_MB:
        return rubric, None
    memory_mb = max(512, available - GRADER_RESERVE_MB)
    note = (f"worker memory limited to {memory_mb} MiB (the rubric says {rubric.limits.memory_mb}) to fit this "
            f"container's {available} MiB")
    return replace(rubric, limits=replace(rubric.limits, memory_mb=memory_mb)), note


def container_memory_mb() -> int | None:
    """This process's cgroup memory limit in MiB (cgroup v2 or v1), or None when there is none."""
    limits = [int(value) >> 20 for value in _cgroup_files("memory.max", "memory", "memory.limit_in_bytes")
              if value.isdigit() and int(value) < 1 << 50]  # "max", or the v1 stand-in for none
    return min(limits) if limits else None


def usable_cpus() -> int:
    """The CPUs this process may keep busy at once: its affinity, less where a cgroup quota (v2's
    `cpu.max`, a container's `--cpus`) allows fewer, rounded down (at least 1)."""
    quotas = [value.partition(" ")[::2] for value in _cgroup_files("cpu.max", None, None)]
    quotas += zip(_cgroup_files(None, "cpu", "cpu.cfs_quota_us"), _cgroup_files(None, "cpu", "cpu.cfs_period_us"))
    cpus = len(os.sched_getaffinity(0))
    for quota, period in quotas:  # "max" and v1's -1: no quota
        if quota.isdigit() and period.isdigit() and int(period):
            cpus = min(cpus, max(1, int(quota) // int(period)))
    return cpus


def _cgroup_files(v2_name: str, v1_controller, v1_name) -> list:
    """The text of this process's cgroup file `v2_name` (cgroup v2) and of `v1_name` in the v1 hierarchy
    of `v1_controller` (either None: not looked for), stripped; none where they cannot be read."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        _, controllers, group = line.split(":", 2)
        if controllers == "" and v2_name:
            path = Path("/sys/fs/cgroup") / group.lstrip("/") / v2_name
        elif v1_controller and v1_controller in controllers.split(","):
            path = Path("/sys/fs/cgroup") / v1_controller / group.lstrip("/") / v1_name
        else:
            continue
        try:
            found.append(path.read_text().strip())
        except OSError:
            continue
    return found
