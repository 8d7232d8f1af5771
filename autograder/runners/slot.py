"""A grader slot: one long-lived grading process that grades one submission after another.

    python -m autograder.runners.slot [grade options]     # --suite, --isolation, --timeout, --hide, ...

Starting a grading process (torch, pytest, hypothesis, the rubric) costs seconds; a batch pays it
once per slot instead of once per submission. Student code still never runs here: every worker
a grade starts is a fresh child forked from the slot's worker template (autograder/isolation/host/worker_template.py:
a pristine worker that has imported torch, confined like a spawned one before it reads the
submission), or a fresh worker process (and sandbox) of its own where there is no template, exactly
as `grade` starts one; the worker is gone before the next job is read.

The protocol, one JSON object a line. The batch writes jobs on the slot's stdin:
    {"id": "alice", "path": "/subs/alice.py", "results": "/out/alice.json"}
and the slot answers on its stdout (status only: scores travel in the results file):
    {"started": "alice"}              when it begins the job (the batch's time limit counts from here)
    {"done": "alice", "code": 0}      0 graded, 2 grading impossible: the results file says which
Anything else the slot prints goes to its stderr (the batch's log). The slot exits at the end of
its stdin. Each grade keeps the whole-submission limit itself, scoring what finished when it is
reached; the batch side is Slot, below: it kills a slot whose job runs past kill_after (that limit
and time to wrap up), and records a slot that dies holding a job as "crashed".

Every runner grades through this module: a batch (grade_in_slots), a cluster's worker (grade_in_slot),
Gradescope's runner (grade_in_child), the gradebook's isolated pass (grade_in_slots) and the timing
batch (discover). It hands a slot its options as grade_file.GradeOptions and writes every result
without a grade through grade_file.write_failure.
"""
import argparse
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from autograder.core import paths
from autograder.core.errors import clean_name
from autograder.isolation.host.worker import signal_name
from autograder.pipeline.grade_file import GradeOptions, grade_one, graded_with, kill_after, timeout_message, write_failure
from autograder.record import results

SLOT_COMMAND = (sys.executable, "-m", "autograder.runners.slot")
# The maximum a failure's results file states (GradeOptions.max_units), asked for only when a grade
# fails: working it out asks torch whether CUDA is there, a second's import that a runner whose
# slots all answer never needs (the slots state their own maximum).
Maximum = Callable[[], int]
POLL_S = 0.2  # how often a runner looks at its slots when none of them says anything


@dataclass(frozen=True)
class Submission:
    name: str   # the results file is OUT/<name>.json and the CSV row is named so
    path: Path


def discover(folder: Path) -> list[Submission]:
    """The submissions in `folder`, sorted: .py files, notebooks and folders; hidden names skipped,
    links skipped with a message (a link could point at the reference or at /dev/zero).
    Entries whose names would share a results file (alice.py and alice/) keep their full names."""
    entries = []
    for p in sorted(folder.iterdir()):
        if p.name.startswith((".", "_")) or not (p.is_dir() or p.suffix in (".py", ".ipynb")):
            continue
        if p.is_symlink():
            print(f"skipped {clean_name(p.name)}: a symbolic link, not a submission (copy the file itself into {folder})")
            continue
        entries.append(p)
    # Names are cleaned (errors.clean_name) before they are made unique: a file name's escape sequences
    # must not reach the results file's name, grades.csv or the terminal.
    names = [clean_name(p.name.removesuffix(".py") if p.suffix == ".py" else p.stem if p.is_file() else p.name)
             for p in entries]
    names = [clean_name(p.name) if names.count(n) > 1 else n for p, n in zip(entries, names)]
    for i, name in enumerate(names):  # alice.py.py is "alice.py" beside the file alice.py: number it
        if names[:i].count(name):
            names[i] = f"{name}~{names[:i].count(name) + 1}"
    return [Submission(name, p.absolute()) for p, name in zip(entries, names)]


@dataclass
class Attempt:
    """One submission's grading attempt, as the batch sees it: how it ended, never what it scored."""
    name: str
    started: float = field(default_factory=time.monotonic)  # the time limit's start
    code: int | None = None       # the grade's answer: 0 graded, 2 grading impossible
    ended: str = ""               # how the grader ended without answering: "signal SIGSEGV", "exit status 1"
    timed_out: bool = False
    tail: str = ""                # the grader's last output, for a crash report
    produced_by: dict = field(default_factory=dict)  # grade_file.graded_with, for a failure's results too


def child_env() -> dict:
    """The grader's environment, with the repository importable whatever the current directory."""
    path = [str(paths.REPO), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return os.environ | {"PYTHONPATH": os.pathsep.join(path)}


def how_it_ended(code: int) -> str:
    return f"signal {signal_name(-code)}" if code < 0 else f"exit status {code}"


class Slot:
    """A runner's handle on one grader slot process (or, for tests, a stand-in speaking its protocol)."""

    def __init__(self, command: list, options: GradeOptions, log: Path, news: threading.Event | None = None):
        self.log, self.options = log, options
        # set when the slot says something or its output ends: a runner waiting on it hands the next
        # job over as soon as one is done, not at its next look (POLL_S)
        self.news = news or threading.Event()
        with open(log, "ab") as sink:  # the slot keeps its own copy of the descriptor
            self.process = subprocess.Popen([*command, *options.to_argv()], stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, stderr=sink, cwd=paths.REPO, env=child_env(),
                                            text=True, bufsize=1)
        self.lines = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.job: Attempt | None = None
        self.log_offset = 0

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.put((time.monotonic(), line))  # when it came: the time limit counts from "started"
            self.news.set()
        self.news.set()

    @property
    def busy(self) -> bool:
        return self.job is not None

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def send(self, name: str, path: Path, target: Path, rubric) -> None:
        """Hand the slot a job; its clock starts now and restarts when the slot begins it. A results
        file already at `target` is removed first: the one there afterwards is this job's answer (a
        file's time cannot tell: it is kept to a clock tick, and a slot ready ahead may write within one)."""
        target.unlink(missing_ok=True)
        self.job = Attempt(name, produced_by=graded_with(path, self.options, rubric))
        self.log_offset = self.log.stat().st_size
        try:
            self.process.stdin.write(json.dumps({"id": name, "path": str(path), "results": str(target)}) + "\n")
            self.process.stdin.flush()
        except OSError:
            pass  # the slot is gone: check() reports how it ended

    def check(self, timeout: float) -> Attempt | None:
        """The job's attempt once it has ended (answered, died, or killed after `timeout` s), else None."""
        job = self.job
        if self._answer(job):
            self.job = None
            return job
        if not self.alive:
            self.reader.join(timeout=5)  # the slot's last lines, if any, are read before judging it
            if not self._answer(job):
                job.ended = how_it_ended(self.process.returncode)
                job.tail = self._log_tail()
            self.job = None
            return job
        if time.monotonic() - job.started >= timeout:
            self.kill()
            job.timed_out = True
            self.job = None
            return job
        return None

    def _answer(self, job: Attempt) -> bool:
        while True:
            try:
                arrived, line = self.lines.get_nowait()
                message = json.loads(line)
            except queue.Empty:
                return False
            except ValueError:
                continue  # not a protocol line: the slot's own output belongs in its log
            if message.get("started") == job.name:
                job.started = arrived
            elif message.get("done") == job.name:
                job.code = int(message["code"])
                return True

    def _log_tail(self) -> str:
        with open(self.log, "rb") as f:
            f.seek(self.log_offset)
            return f.read().decode(errors="replace")[-3000:].strip()

    def kill(self) -> None:
        """Stop the slot now; its workers' reapers see the lifeline close and clean up."""
        if self.alive:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def release(self) -> None:
        """End of input, without waiting: an idle slot exits by itself (its worker template stopped,
        its interpreter torn down) while others still grade."""
        try:
            self.process.stdin.close()
        except OSError:
            pass

    def close(self, grace: float = 10.0) -> None:
        """End of input: an idle slot exits by itself; one that does not is killed."""
        self.release()
        try:
            self.process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            self.kill()


def grade_in_slot(slot: Slot, sub: Submission, target: Path, rubric, isolation: str, maximum: Maximum) -> str:
    """Hand `slot` one submission and wait for its end; its results file is at `target` whatever
    happens. Returns the status."""
    slot.send(sub.name, sub.path, target, rubric)
    while (attempt := slot.check(kill_after(rubric))) is None:
        wait_for_news(slot.news)
    return settle(attempt, target, rubric, isolation, maximum)


def wait_for_news(news: threading.Event) -> None:
    """Until a slot says something (or POLL_S, for the time limits); cleared before the slots are
    looked at, so that a line arriving while they are is waited for no longer than that look."""
    news.wait(POLL_S)
    news.clear()


def grade_in_child(sub: Submission, target: Path, options: GradeOptions, rubric, isolation: str, maximum: Maximum,
                   command=SLOT_COMMAND) -> str:
    """Grade one submission in a grader process of its own within the rubric's whole-submission
    limit; its results file is at `target` whatever happens. Returns the status."""
    logs = Path(tempfile.mkdtemp(prefix="mhsa-grade-log-"))
    slot = Slot([*command], options, logs / "slot.log")
    try:
        return grade_in_slot(slot, sub, target, rubric, isolation, maximum)
    finally:  # still busy: interrupted, and the slot ignores Ctrl-C (main)
        slot.kill() if slot.busy else slot.close()
        shutil.rmtree(logs, ignore_errors=True)


class Slots:
    """A runner's grader slots: their logs' folder, the event any of them sets when it says something,
    and the slots by index (None until started). Started ahead (`started`: how many), they import
    torch and start their worker templates while a runner with other work to do first (the gradebook
    reads nbgrader's database, seconds) does it; grade_in_slots takes them over."""

    def __init__(self, options: GradeOptions, command=SLOT_COMMAND, started: int = 0):
        self.options, self.command = options, tuple(command)
        self.logs = Path(tempfile.mkdtemp(prefix="mhsa-slots-"))
        self.news = threading.Event()  # shared by the slots: any of them may be the next one done
        self.slots: list[Slot | None] = [self.start(i) for i in range(started)]

    def start(self, i: int) -> Slot:
        return Slot([*self.command], self.options, self.logs / f"slot-{i}.log", self.news)

    def close(self) -> None:
        """Every slot stopped (a busy one killed), its log removed; safe to call twice."""
        started = [slot for slot in self.slots if slot is not None]
        for slot in started:  # every slot told first, so that they wind down together
            slot.kill() if slot.busy else slot.release()
        for slot in started:
            slot.close()
        shutil.rmtree(self.logs, ignore_errors=True)


def grade_in_slots(todo: list, out: Path, options: GradeOptions, rubric, isolation: str, maximum: Maximum, jobs: int,
                   finished, running=lambda count: None, command=SLOT_COMMAND, ahead: Slots | None = None) -> None:
    """`todo` (Submissions) graded by `jobs` slots on this machine, each into OUT/<name>.json; a slot
    that is killed or dies is replaced. `finished(sub, status)` is called as each one ends (its results
    file written), `running(count)` with the number of slots grading as they are looked at (0 once all
    are done). `ahead`: slots started for these options and command beforehand, taken over (one with
    nothing to grade winds down at once)."""
    todo = list(todo)
    by_name = {sub.name: sub for sub in todo}
    if ahead is not None and (ahead.options, ahead.command) != (options, tuple(command)):
        raise ValueError("slots started ahead for other options or another command")
    group = ahead or Slots(options, command)
    slots = group.slots
    slots += [None] * (max(1, min(jobs, len(todo))) - len(slots))
    try:
        while todo or any(s is not None and s.busy for s in slots):
            for i, slot in enumerate(slots):
                if todo and (slot is None or not slot.alive) and (slot is None or not slot.busy):
                    slot = slots[i] = group.start(i)
                if todo and not slot.busy:
                    sub = todo.pop(0)
                    slot.send(sub.name, sub.path, out / f"{sub.name}.json", rubric)
                elif not todo and slot is not None and not slot.busy:
                    slot.release()  # nothing left for it: it winds down while the others finish
            wait_for_news(group.news)
            running(sum(s is not None and s.busy for s in slots))
            for slot in slots:
                attempt = slot.check(kill_after(rubric)) if slot is not None and slot.busy else None
                if attempt is not None:
                    status = settle(attempt, out / f"{attempt.name}.json", rubric, isolation, maximum)
                    finished(by_name[attempt.name], status)
        running(0)
    finally:
        group.close()


def settle(attempt: Attempt, target: Path, rubric, isolation: str, maximum: Maximum) -> str:
    """The attempt's status, from its grader's answer and results file alone. A grade that answered
    0 or 2 (graded, or grading impossible) wrote a results file that says so; for any other end the
    file is replaced by one that says why there is no grade."""
    found = results.load(target) if target.exists() else None  # Slot.send removed any older one
    if not attempt.timed_out and attempt.code in (0, 2) and found is not None:
        return found.status.value
    if attempt.timed_out:
        status, message = "timeout", timeout_message(rubric.submission_timeout)
    else:
        status = "crashed"
        how = attempt.ended or f"exit status {attempt.code} without a results file"
        message = (f"The grader stopped with {how} while grading this submission. Score 0 until an "
                   f"instructor regrades it.\n\nLast output:\n{attempt.tail}")
    write_failure(target, attempt.name, status, message, rubric, maximum(), isolation,
                  elapsed=time.monotonic() - attempt.started, produced_by=attempt.produced_by)
    return status


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.runners.slot", description=__doc__.splitlines()[0])
    GradeOptions.add_arguments(parser)
    options = GradeOptions.from_args(parser.parse_args(argv))
    # A terminal's Ctrl-C reaches the whole process group: the runner stops its slots itself (killed, so a
    # grade cut short writes nothing), and a slot must not record that grade as failed. A handler, not
    # SIG_IGN, so that the workers this slot starts do not inherit it.
    signal.signal(signal.SIGINT, lambda *_: None)
    status = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # whatever else is printed goes to the log

    from autograder.core import rubric as rubric_file
    from autograder.isolation.host import worker_template

    rubric = rubric_file.load(options.rubric)
    # Every worker of this slot is forked from one template (it imports torch while this process does)
    template = worker_template.start(options.isolation, [*rubric.hidden, rubric.source, *options.hide])
    from autograder.testing import backends  # noqa: F401 - start-up paid here, not in a submission's time limit

    try:
        for line in sys.stdin:
            job = json.loads(line)
            status.write(json.dumps({"started": job["id"]}) + "\n")
            code = grade_one(Path(job["path"]), Path(job["results"]), options, rubric,
                             time_limit=rubric.submission_timeout)
            status.write(json.dumps({"done": job["id"], "code": code}) + "\n")
    finally:
        if template is not None:
            template.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
