"""`grade DIR --batch --out OUT`: every submission in DIR graded in a process of its own, resumably.

Each submission (a .py file, a notebook, or a folder) is graded by
`python -m autograder grade SUB --results OUT/<name>.json`, at most --jobs at once, each within the
rubric's whole-submission limit ([limits] submission_timeout_s). `grade` writes its results file
atomically and only once the grade is complete, so an existing, valid results file means "done": a
rerun skips it (unless --force) and a killed batch loses at most the submissions in flight. A child
reports through its exit status and its results file only (never through what it prints): a grade
that times out, crashes or cannot start still gets a results file, with score 0, the usual maximum
and the reason; the batch itself never stops for one submission. OUT/grades.csv is rebuilt from the
results files. The Gradescope runner grades its one submission the same way (grade_in_child).
"""
import csv
import io
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from autograder import grading, paths, results
from autograder import rubric as rubric_file
from autograder.context import SUITE_CHOICES
from autograder.isolation import resolve
from autograder.worker import signal_name

GRADE_COMMAND = (sys.executable, "-m", "autograder", "grade")
FAILURES = grading.STATUSES[1:]  # results without a grade
POLL_S = 0.2


@dataclass(frozen=True)
class Submission:
    name: str   # the results file is OUT/<name>.json and the CSV row is named so
    path: Path


@dataclass
class Running:
    submission: Submission
    process: subprocess.Popen
    log: Path
    started: float = field(default_factory=time.monotonic)
    started_ns: int = field(default_factory=time.time_ns)
    timed_out: bool = False


def discover(folder: Path) -> list[Submission]:
    """The submissions in `folder`, sorted: .py files, notebooks and folders; hidden names skipped,
    links skipped with a message (a link could point at the reference or at /dev/zero).
    Entries whose names would share a results file (alice.py and alice/) keep their full names."""
    entries = []
    for p in sorted(folder.iterdir()):
        if p.name.startswith((".", "_")) or not (p.is_dir() or p.suffix in (".py", ".ipynb")):
            continue
        if p.is_symlink():
            print(f"skipped {p.name}: a symbolic link, not a submission (copy the file itself into {folder})")
            continue
        entries.append(p)
    names = [p.name.removesuffix(".py") if p.suffix == ".py" else p.stem if p.is_file() else p.name for p in entries]
    names = [p.name if names.count(n) > 1 else n for p, n in zip(entries, names)]
    for i, name in enumerate(names):  # alice.py.py is "alice.py" beside the file alice.py: number it
        if names[:i].count(name):
            names[i] = f"{name}~{names[:i].count(name) + 1}"
    return [Submission(name, p.absolute()) for p, name in zip(entries, names)]


load_results = results.load


def run(args, rubric=None, command=GRADE_COMMAND) -> int:
    """The `grade --batch` command; `rubric` and `command` are there for tests (limits, a fake grader)."""
    folder, out = Path(args.path), args.out
    if not folder.is_dir():
        print(f"--batch needs a folder of submissions; {folder} is not one")
        return 2
    if out is None:
        print("--batch needs --out FOLDER for the results files and grades.csv")
        return 2
    rubric = rubric or rubric_file.load()
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob(".*.tmp"):  # half-written files of a killed run: never valid, never needed
        stale.unlink(missing_ok=True)
    submissions = discover(folder)
    todo = [s for s in submissions if args.force or load_results(out / f"{s.name}.json") is None]
    isolation = resolve(args.isolation).level
    child_args = child_options(args, hide=[folder, out, *args.hide])
    max_units = grading.planned_max_units(rubric, SUITE_CHOICES[args.suite], args.suite == "all", args.timing_device)
    progress = Progress(len(submissions), len(submissions) - len(todo))
    logs = Path(tempfile.mkdtemp(prefix="mhsa-batch-"))
    running = []
    try:
        while todo or running:
            while todo and len(running) < max(1, args.jobs):
                sub = todo.pop(0)
                running.append(start(sub, out / f"{sub.name}.json", logs, [*command], child_args))
            time.sleep(POLL_S)
            progress.draw(len(running))
            for job in [j for j in running if finished(j, rubric.submission_timeout)]:
                running.remove(job)
                status = settle(job, out / f"{job.submission.name}.json", rubric, isolation, max_units)
                progress.advance(job.submission.name, status, load_results(out / f"{job.submission.name}.json"))
    except KeyboardInterrupt:
        for job in running:
            job.process.kill()
            job.process.wait()
        progress.close()
        print(f"interrupted: {len(running)} submission(s) in flight were dropped; rerun the same command "
              "to grade the rest (finished grades are kept)")
        return 130
    finally:
        shutil.rmtree(logs, ignore_errors=True)
    progress.close()
    table = write_csv(out, submissions, rubric)
    print(summary(table, out, len(submissions), len(submissions) - progress.initial))
    return 0


def child_options(args, hide) -> list:
    """The `grade` options a child gets: the batch's own, and every folder it must hide."""
    options = ["--suite", args.suite, "--isolation", args.isolation,
               *(a for p in hide for a in ("--hide", str(Path(p).resolve())))]
    if args.timeout:
        options += ["--timeout", str(args.timeout)]
    if args.timing_device:
        options += ["--timing-device", args.timing_device]
    return options


def start(sub: Submission, target: Path, logs: Path, command: list, child_args: list) -> Running:
    log = logs / f"{sub.name}.log"
    with open(log, "wb") as sink:  # the child keeps its own copy of the descriptor
        process = subprocess.Popen([*command, str(sub.path), "--results", str(target), *child_args],
                                   stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT,
                                   cwd=paths.REPO, env=child_env())
    return Running(sub, process, log)


def child_env() -> dict:
    """The grader's environment, with the repository importable whatever the current directory."""
    path = [str(paths.REPO), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return os.environ | {"PYTHONPATH": os.pathsep.join(path)}


def grade_in_child(sub: Submission, target: Path, child_args: list, rubric, isolation: str, max_units: int,
                   command=GRADE_COMMAND) -> str:
    """Grade one submission in a child process within the rubric's whole-submission limit; its
    results file is at `target` whatever happens. Returns the status."""
    logs = Path(tempfile.mkdtemp(prefix="mhsa-grade-log-"))
    try:
        job = start(sub, target, logs, [*command], child_args)
        while not finished(job, rubric.submission_timeout):
            time.sleep(POLL_S)
        return settle(job, target, rubric, isolation, max_units)
    finally:
        shutil.rmtree(logs, ignore_errors=True)


def finished(job: Running, timeout: float) -> bool:
    """True once the child has exited, or has been killed for running past `timeout`."""
    if job.process.poll() is not None:
        return True
    if time.monotonic() - job.started < timeout:
        return False
    job.process.send_signal(signal.SIGKILL)  # its workers' reapers see the lifeline close and clean up
    job.process.wait()
    job.timed_out = True
    return True


def settle(job: Running, target: Path, rubric, isolation: str, max_units: int) -> str:
    """The job's status, from its exit status and results file alone. A child that exited 0 or 2
    (graded, or grading impossible) wrote a results file that says so; for any other end the file is
    replaced by one that says why there is no grade."""
    code = job.process.returncode
    fresh = target.exists() and target.stat().st_mtime_ns >= job.started_ns
    data = results.load(target) if fresh else None
    if not job.timed_out and code in (0, 2) and data is not None:
        return data["extra_data"]["status"]
    elapsed = time.monotonic() - job.started
    if job.timed_out:
        status = "timeout"
        message = (f"Grading was stopped after {rubric.submission_timeout:g} s, the time limit for a whole "
                   "submission: some of your code is very slow, or hangs where the per-call limit could not "
                   "stop it. Score 0 until an instructor looks at it.")
    else:
        status = "crashed"
        how = f"signal {signal_name(-code)}" if code < 0 else f"exit status {code}"
        tail = job.log.read_text(errors="replace")[-3000:].strip()
        message = (f"The grader stopped with {how} while grading this submission. Score 0 until an "
                   f"instructor regrades it.\n\nLast output:\n{tail}")
    grade = grading.failure(job.submission.name, status, message, max_units, isolation, elapsed=elapsed)
    results.write_json_atomic(target, results.to_gradescope(grade, rubric))
    return status


def write_csv(out: Path, submissions: list, rubric) -> str:
    """grades.csv from the results files alone, so that it is right however the batch was interrupted."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(results.csv_header(rubric))
    for sub in submissions:
        data = load_results(out / f"{sub.name}.json")
        if data is not None:
            writer.writerow(results.csv_row(sub.name, data, rubric))
    results.write_atomic(out / "grades.csv", buffer.getvalue())
    return buffer.getvalue()


def summary(table: str, out: Path, total: int, graded_now: int) -> str:
    """The score table (points per part; '-' where a part was not graded), then what happened."""
    rows = list(csv.DictReader(io.StringIO(table)))
    failed = [r["submission"] for r in rows if r["status"] in FAILURES]
    columns = [c for c in (csv.DictReader(io.StringIO(table)).fieldnames or [])
               if c not in ("submission", "max_score", "isolation")]
    width = max([len("submission"), *(len(r["submission"]) for r in rows)])
    lines = ["  ".join([f"{'submission':<{width}}", *(f"{c:>9}" for c in columns)])]
    for row in rows:
        cells = [f"{row['submission']:<{width}}"]
        for c in columns:
            value = row[c]
            if c == "score":
                value = f"{_number(value)}/{_number(row['max_score'])}"
            elif c != "status":
                value = _number(value) if value else "-"
            cells.append(f"{value:>9}")
        lines.append("  ".join(cells))
    lines += ["", f"{len(rows)} of {total} submissions have results ({graded_now} graded now, "
              f"{total - graded_now} kept from before); table: {out / 'grades.csv'}"]
    if failed:
        lines.append(f"no grade (timeout, crash or error) for: {', '.join(failed)}; see their results files")
    return "\n".join(lines)


class Progress:
    """A progress bar on stderr when it is a terminal; one line per finished submission otherwise."""

    WIDTH = 30

    def __init__(self, total: int, initial: int):
        self.total, self.initial, self.done, self.failed = total, initial, initial, 0
        self.stream, self.started = sys.stderr, time.monotonic()
        self.tty = self.stream.isatty()
        if initial:
            self.stream.write(f"{initial} of {total} submissions already graded: skipped (--force regrades)\n")

    def advance(self, name: str, status: str, data: dict | None) -> None:
        self.done += 1
        self.failed += status in FAILURES
        if not self.tty:
            score = f"{data['score']:g} / {data['extra_data'].get('max_score', '?')}" if data else "-"
            self.stream.write(f"[{self.done}/{self.total}] {name}: {score} ({status})\n")

    def draw(self, running: int) -> None:
        """Redraws the bar (on a terminal), so that the clock moves between finished submissions."""
        if not self.tty:
            return
        filled = self.WIDTH * self.done // max(1, self.total)
        elapsed = time.monotonic() - self.started
        graded_now = self.done - self.initial
        left = (self.total - self.done) * elapsed / graded_now if graded_now else None
        eta = f", ~{_clock(left)} left" if left is not None else ""
        self.stream.write(f"\r[{'#' * filled}{'.' * (self.WIDTH - filled)}] {self.done}/{self.total} done, "
                          f"{running} running, {self.failed} without a grade, {_clock(elapsed)} elapsed{eta}   ")
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.draw(running=0)
            self.stream.write("\n")
        self.stream.flush()


def _number(text: str) -> str:
    try:
        return f"{float(text):.4g}"
    except ValueError:
        return text


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60}:{seconds % 60:02d}"
