"""`grade DIR --batch --out OUT --scheduler ADDRESS`: the batch's submissions graded on a Dask cluster.

The scheduler and workers are Dask's own (`dask scheduler`, `dask worker`, or dask-jobqueue on
Slurm/PBS/SGE), started by course staff from a checkout of this repository; docs/autograder.md shows
how, with TLS. This module is the client: it sends each submission's bytes with its task (the files a
grade reads, each within the local route's size limit: one over it refuses that submission with a
results file that says why), and writes each result atomically into OUT exactly as the local batch
does (resume, --force and grades.csv are the batch's). On a worker the task grades through a grader
slot of that worker (autograder/runners/slot.py), so a submission still gets a fresh sandboxed worker
process of its own and the whole-submission time limit; a slot that dies or hangs gives the same
"crashed"/"timeout" result as on one machine.

A Dask worker runs whatever function a client sends it, so student code must never reach the
cluster's network: the client refuses to grade unless every worker has the sandbox level (no
network), and refuses workers whose grader (hidden tests, rubric, grading code) differs from its own.
A worker that dies mid-grade is retried on another; a submission that kills workers twice is recorded
as crashed (the scheduler's allowed_failures). With the timing part on CUDA the grade runs only on
workers that declare the resource GPU (`dask worker ... --resources GPU=1`).
"""
import dataclasses
import functools
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import uuid
from pathlib import Path

from autograder.core import paths
from autograder.core.errors import clean_name
from autograder.core.handin import GradingError, read_regular, refuse_link
from autograder.intake import route
from autograder.isolation.host.levels import resolve
from autograder.pipeline.context import SUITE_CHOICES
from autograder.pipeline.grade_file import GradeOptions, graded_with, write_failure
from autograder.record import results
from autograder.runners.slot import SLOT_COMMAND, Slot, Submission, grade_in_slot

ALLOWED_FAILURES = 1  # worker deaths a task survives: one retry elsewhere, then KilledWorker
CONNECT_TIMEOUT_S = 60


def refusal(args) -> str | None:
    """Why cluster mode cannot run with these options (None: it can)."""
    if args.isolation not in ("auto", "sandbox"):
        return (f"--scheduler needs the sandbox isolation level (--isolation auto or sandbox), not "
                f"{args.isolation}: a Dask worker runs any function a client sends it, so student code that "
                "can open a socket to the scheduler would control every worker")
    if Path(getattr(args, "rubric", paths.RUBRIC_FILE)).resolve() != paths.RUBRIC_FILE:
        return ("--scheduler grades with each worker's own rubric.toml (part of the grader's checksum), not "
                f"--rubric {args.rubric}: put the rubric in rubric.toml on this machine and every worker")
    try:
        import distributed  # noqa: F401
    except ImportError:
        return "--scheduler needs Dask: make setup-cluster (or python3 setup_venv.py --extras cluster)"
    return None


@functools.lru_cache(maxsize=1)
def grader_version() -> str:
    """A checksum of the grader (paths.GRADER_FILES: the grading code, the suites, the reference, the
    rubric), taken once per process (a worker whose checkout changed under it must be restarted)."""
    return paths.grader_checksum()


def worker_report() -> dict:
    """What the client checks on each worker before sending it any submission (runs there)."""
    return {"version": grader_version(), "isolation": resolve("auto").level}


def check_workers(client, version: str) -> tuple[list, str]:
    """(the workers that may grade, the reason to refuse the whole run or "")."""
    reports = client.run(worker_report)
    unsafe = sorted(w for w, r in reports.items() if r["isolation"] != "sandbox")
    if unsafe:
        return [], (f"refused: these Dask workers cannot run the sandbox level (bubblewrap, no network), so student "
                    f"code there could reach the cluster: {', '.join(unsafe)}")
    matching = sorted(w for w, r in reports.items() if r["version"] == version)
    stale = sorted(set(reports) - set(matching))
    if stale:
        print(f"not grading on {', '.join(stale)}: their grader differs from this one ({version}); update "
              "their checkout and restart them")
    if not matching:
        return [], "refused: no Dask worker has this grader's version"
    return matching, ""


def _allow_failures(count: int, dask_scheduler=None) -> None:
    dask_scheduler.allowed_failures = count  # runs on the scheduler, which passes itself


def pack(path: Path) -> tuple[str, dict]:
    """A submission as bytes to travel with its task: (kind, {relative path: bytes}). Of a folder only
    what a grade reads travels (intake/route.py: of the folder that holds the work, mhsa.py,
    knowledge.py and the notebooks, those past the ones the route reads, which it only counts, empty),
    each read as the local route reads it (handin.read_regular: no link, a regular file, at most
    MAX_SUBMISSION_BYTES), so no submission costs this process more than a few files of that size. A
    file that reader refuses, an oversized one above all, refuses the submission (GradingError)."""
    if not path.is_dir():
        return "file", {path.name: read_regular(path)}
    folder = route.work_folder(path)
    refuse_link(folder / "mhsa.py")
    files = {}
    for file in (folder / "mhsa.py", folder / "knowledge.py"):
        if os.path.lexists(file) and not file.is_dir():  # a folder named mhsa.py is no module, to the route too
            files[str(file.relative_to(path))] = read_regular(file)
    for i, notebook in enumerate(route.folder_notebooks(folder)):
        files[str(notebook.relative_to(path))] = read_regular(notebook) if i < route.NOTEBOOKS_WEIGHED else b""
    return "folder", files


def unpack(name: str, kind: str, files: dict, into: Path) -> Path:
    root = into if kind == "file" else into / name
    root.mkdir(parents=True, exist_ok=True)  # a folder with nothing to grade stays a folder
    for relative, data in files.items():
        target = (root / relative).resolve()
        if not target.is_relative_to(root.resolve()):
            continue  # a name like ../x cannot come from pack(); never write outside the scratch folder
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return root / next(iter(files)) if kind == "file" else root


_local = threading.local()  # each worker thread's slot, kept between tasks


def _slot(options: GradeOptions) -> Slot:
    slot = getattr(_local, "slot", None)
    if slot is not None and (not slot.alive or _local.options != options):
        slot.close()
        slot = None
    if slot is None:
        log = Path(tempfile.mkdtemp(prefix="mhsa-cluster-slot-")) / "slot.log"
        slot = _local.slot = Slot([*SLOT_COMMAND], options, log)
        _local.options = options
    return slot


def grade_on_worker(name: str, kind: str, files: dict, options: GradeOptions, max_units: int, version: str) -> dict:
    """The task: grade one submission on this worker through its slot; the results file's data."""
    from autograder.core import rubric as rubric_file

    if grader_version() != version:
        raise RuntimeError(f"this worker's grader differs from the client's ({version})")
    rubric = rubric_file.load()
    with tempfile.TemporaryDirectory(prefix="mhsa-cluster-") as scratch:
        path = unpack(name, kind, files, Path(scratch) / "submission")
        target = Path(scratch) / "results" / f"{name}.json"
        target.parent.mkdir()
        grade_in_slot(_slot(options), Submission(name, path), target, rubric, "sandbox", lambda: max_units)
        found = results.load(target)
        return None if found is None else found.data  # plain data back to the client


def worker_options(options: GradeOptions) -> GradeOptions:
    """The options a cluster's workers grade with: always the sandbox, whatever this machine supports."""
    return dataclasses.replace(options, isolation="sandbox")


def grade_all(address: str, todo: list, out: Path, options: GradeOptions, rubric, max_units: int, finished) -> int:
    """Grade `todo` on the cluster at `address`, each result written into OUT as it comes and
    `finished(sub, status)` called; 2 if refused."""
    from distributed import Client, as_completed

    version = grader_version()
    options = worker_options(options)
    timing_device = options.timing_device or (rubric.parts["timing"].device if "timing" in rubric.parts else None)
    timing_on_cuda = timing_device == "cuda"
    with Client(address, timeout=CONNECT_TIMEOUT_S) as client:
        client.wait_for_workers(1, timeout=CONNECT_TIMEOUT_S)
        workers, problem = check_workers(client, version)
        if problem:
            print(problem)
            return 2
        client.run_on_scheduler(_allow_failures, ALLOWED_FAILURES)
        futures = {}
        for sub in todo:
            try:
                kind, files = pack(sub.path)
            except (GradingError, OSError) as err:  # what the local route refuses too: this student's result
                reason = err if isinstance(err, GradingError) else \
                    f"{clean_name(sub.path)}: could not be read ({err.strerror})"
                write_failure(out / f"{sub.name}.json", sub.name, "error",
                              f"This submission could not be graded: {reason}", rubric, max_units, "sandbox",
                              SUITE_CHOICES[options.suite], produced_by=graded_with(sub.path, options, rubric))
                finished(sub, "error")
                continue
            future = client.submit(grade_on_worker, sub.name, kind, files, options, max_units, version,
                                   key=f"grade-{sub.name}-{uuid.uuid4().hex[:8]}", pure=False, workers=workers,
                                   resources={"GPU": 1} if timing_on_cuda else None)
            futures[future] = sub
        for future in as_completed(futures):
            sub = futures[future]
            target = out / f"{sub.name}.json"
            finished(sub, _settle(future, target, sub.name, rubric, max_units, graded_with(sub.path, options, rubric)))
    return 0


def _settle(future, target: Path, name: str, rubric, max_units: int, produced_by: dict) -> str:
    """The task's results written at `target`; a task that failed on the cluster gets a "crashed" result
    saying why. Returns the status."""
    from distributed.scheduler import KilledWorker

    try:
        data = future.result()
        found = results.Results.of(data) if isinstance(data, dict) else None
        if found is None or found.status is None:
            raise ValueError("its task returned no results")
    except KilledWorker:
        message = (f"The grading machines running this submission died {ALLOWED_FAILURES + 1} times while grading "
                   "it. Score 0 until an instructor regrades it.")
    except Exception as err:  # noqa: BLE001 - any failure on the cluster is this submission's result, not the batch's end
        message = (f"The grader failed on the cluster while grading this submission ({type(err).__name__}: {err}). "
                   "Score 0 until an instructor regrades it.")
    else:
        results.write(target, found)
        return found.status.value
    write_failure(target, name, "crashed", message, rubric, max_units, "sandbox", produced_by=produced_by)
    return "crashed"


class LocalCluster:
    """A Dask scheduler and `workers` single-thread workers on localhost, as Dask's own commands in
    subprocesses (for the tests and the benchmark). Each runs in a process group of its own, so that
    kill() takes a worker's grader slot with it, as a machine that dies would."""

    def __init__(self, logs: Path, workers: int, worker_env=None):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.address = f"tcp://127.0.0.1:{port}"
        env = os.environ | {"PYTHONPATH": str(paths.REPO)}
        self.scheduler = self._start("scheduler", ["--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
                                     logs / "scheduler.log", env)
        self.workers = [self._start("worker", [self.address, "--nthreads", "1", "--no-nanny", "--no-dashboard",
                                               "--name", f"w{i}", "--host", "127.0.0.1"], logs / f"worker{i}.log",
                                    env | (worker_env or {})) for i in range(workers)]

    @staticmethod
    def _start(command: str, args: list, log: Path, env: dict) -> subprocess.Popen:
        with open(log, "wb") as sink:
            return subprocess.Popen([sys.executable, "-m", f"distributed.cli.dask_{command}", *args], cwd=paths.REPO,
                                    env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)

    @staticmethod
    def kill(process: subprocess.Popen) -> None:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()

    def close(self) -> None:
        for process in [*self.workers, self.scheduler]:
            self.kill(process)
