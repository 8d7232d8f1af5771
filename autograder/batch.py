"""`grade DIR --batch --out OUT`: every submission in DIR graded in a process of its own, resumably.

Each submission (a .py file, a notebook, or a folder) is graded by
`python -m autograder grade SUB --results OUT/<name>.json`, at most --jobs at once, each within the
rubric's whole-submission limit ([limits] submission_timeout_s). `grade` writes its results file
atomically and only once the grade is complete, so an existing, valid results file means "done": a
rerun skips it (unless --force) and a killed batch loses at most the submissions in flight. A grade
that times out, crashes or cannot start still gets a results file, with score 0 and the reason; the
batch itself never stops for one submission. OUT/grades.csv is rebuilt from the results files.
"""
import csv
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from autograder import results
from autograder import rubric as rubric_file
from autograder.isolation import resolve
from autograder.worker import signal_name

GRADE_COMMAND = (sys.executable, "-m", "autograder", "grade")
FAILURES = ("timeout", "crashed", "error")  # statuses of results files the batch wrote itself
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
    """The submissions in `folder`, sorted: .py files, notebooks and folders; hidden names skipped.
    Two entries with the same stem (alice.py and alice/) keep their full names apart."""
    entries = [p for p in sorted(folder.iterdir())
               if not p.name.startswith((".", "_")) and (p.is_dir() or p.suffix in (".py", ".ipynb"))]
    stems = [p.stem if p.is_file() else p.name for p in entries]
    return [Submission(stem if stems.count(stem) == 1 else p.name, p.absolute()) for p, stem in zip(entries, stems)]


def load_results(path: Path) -> dict | None:
    """The results file at `path` if it is complete and well-formed, else None (grade it again)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    ok = (isinstance(data, dict) and isinstance(data.get("score"), (int, float))
          and isinstance(data.get("tests"), list) and isinstance(data.get("extra_data"), dict))
    return data if ok else None


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
    child_args = ["--suite", args.suite, "--isolation", args.isolation, "--hide", str(folder.resolve()),
                  "--hide", str(out), *(a for p in args.hide for a in ("--hide", str(Path(p).resolve())))]
    if args.timeout:
        child_args += ["--timeout", str(args.timeout)]
    progress = Progress(len(submissions), len(submissions) - len(todo))
    logs = Path(tempfile.mkdtemp(prefix="mhsa-batch-"))
    running = []
    try:
        while todo or running:
            while todo and len(running) < max(1, args.jobs):
                running.append(start(todo.pop(0), out, logs, [*command], child_args))
            time.sleep(POLL_S)
            progress.draw(len(running))
            for job in [j for j in running if finished(j, rubric.submission_timeout)]:
                running.remove(job)
                status = settle(job, out, rubric, isolation)
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


def start(sub: Submission, out: Path, logs: Path, command: list, child_args: list) -> Running:
    log = logs / f"{sub.name}.log"
    with open(log, "wb") as sink:  # the child keeps its own copy of the descriptor
        process = subprocess.Popen([*command, str(sub.path), "--results", str(out / f"{sub.name}.json"), *child_args],
                                   stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT,
                                   cwd=rubric_file.REPO, env=child_env())
    return Running(sub, process, log)


def child_env() -> dict:
    """The grader's environment, with the repository importable whatever the current directory."""
    paths = [str(rubric_file.REPO), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return os.environ | {"PYTHONPATH": os.pathsep.join(paths)}


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


def settle(job: Running, out: Path, rubric, isolation: str) -> str:
    """The job's status; unless it graded, its results file is replaced by one that says why not."""
    target = out / f"{job.submission.name}.json"
    code = job.process.returncode
    fresh = target.exists() and target.stat().st_mtime_ns >= job.started_ns
    if not job.timed_out and code == 0 and fresh and load_results(target):
        return "graded"
    tail = job.log.read_text(errors="replace")[-3000:].strip()
    elapsed = time.monotonic() - job.started
    if job.timed_out:
        status = "timeout"
        message = (f"Grading was stopped after {rubric.submission_timeout:g} s, the time limit for a whole "
                   "submission: some of your code is very slow, or hangs where the per-call limit could not "
                   "stop it. Score 0 until an instructor looks at it.")
    elif code == 2:
        status = "error"
        reason = next((line for line in tail.splitlines() if line.startswith("grading impossible")), tail[-500:])
        message = f"This submission could not be graded: {reason}"
    else:
        status = "crashed"
        how = f"signal {signal_name(-code)}" if code < 0 else f"exit status {code}"
        message = (f"The grader stopped with {how} while grading this submission. Score 0 until an "
                   f"instructor regrades it.\n\nLast output:\n{tail}")
    results.write_json_atomic(target, failure_results(job.submission, status, message, elapsed, rubric, isolation))
    return status


def failure_results(sub: Submission, status: str, message: str, elapsed: float, rubric, isolation: str) -> dict:
    """A Gradescope-format results file for a submission that has no grade."""
    tested = [p for p in rubric.parts.values() if p.functions and p.name != "timing"]
    return {"score": 0.0, "execution_time": round(elapsed, 2), "output": message, "visibility": "visible",
            "stdout_visibility": "hidden", "tests": [],
            "extra_data": {"submission": sub.name, "status": status, "isolation": isolation,
                           "max_score": sum(p.points for p in tested), "parts": {}}}


def write_csv(out: Path, submissions: list, rubric) -> str:
    """grades.csv from the results files alone, so that it is right however the batch was interrupted."""
    parts = list(rubric.parts)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["submission", "score", "max_score", *parts, "isolation", "status"])
    for sub in submissions:
        data = load_results(out / f"{sub.name}.json")
        if data is None:
            continue
        extra = data["extra_data"]
        scores = extra.get("parts", {})
        writer.writerow([sub.name, data["score"], extra.get("max_score", ""),
                         *(scores[p]["score"] if scores.get(p, {}).get("graded", False) else "" for p in parts),
                         extra.get("isolation", ""), extra.get("status", "graded")])
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
