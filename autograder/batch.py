"""`grade DIR --batch --out OUT`: every submission in DIR graded, resumably, by --jobs grader slots.

A grader slot (autograder/slot.py) is a long-lived grading process that grades one submission after
another, so the start-up (torch, pytest, the rubric) is paid once per slot, not per submission; each
submission still runs in a fresh worker process of its own, started and stopped by its grade. Each
grade must finish within the rubric's whole-submission limit ([limits] submission_timeout_s).
A grade writes its results file atomically and only once it is complete, so an existing, valid
results file means "done": a rerun skips it (unless --force) and a killed batch loses at most the
submissions in flight. A slot reports through its status lines and the results file only (never
through what it prints): a grade that times out, crashes or cannot start still gets a results file,
with score 0, the usual maximum and the reason; a slot that hangs is killed, one that dies is
replaced, and the batch itself never stops for one submission. OUT/grades.csv is rebuilt from the
results files. With --scheduler the same submissions go to a Dask cluster (autograder/cluster.py),
with the same results files. The Gradescope runner grades its one submission the same way
(grade_in_child).
"""
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from autograder import grading, results, reviews
from autograder import rubric as rubric_file
from autograder.context import SUITE_CHOICES
from autograder.errors import clean_name
from autograder.isolation import resolve
from autograder.slot import POLL_S, SLOT_COMMAND, Slot, grade_in_slot, kill_after, settle

FAILURES = grading.STATUSES[1:]  # results without a grade


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



def run(args, rubric=None, command=SLOT_COMMAND) -> int:
    """The `grade --batch` command; `rubric` and `command` are there for tests (limits, a stand-in slot)."""
    folder, out = Path(args.path), args.out
    if not folder.is_dir():
        print(f"--batch needs a folder of submissions; {folder} is not one")
        return 2
    if out is None:
        print("--batch needs --out FOLDER for the results files and grades.csv")
        return 2
    scheduler = getattr(args, "scheduler", None)
    if scheduler:
        from autograder import cluster

        refusal = cluster.refusal(args)
        if refusal:
            print(refusal)
            return 2
    rubric = rubric or rubric_file.load()
    if getattr(args, "after_due_date", False):  # the children get the option too (child_options)
        from autograder import knowledge

        rubric = knowledge.scored_after_due(rubric)
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob(".*.tmp"):  # half-written files of a killed run: never valid, never needed
        stale.unlink(missing_ok=True)
    submissions = discover(folder)
    todo = [s for s in submissions if args.force or results.load(out / f"{s.name}.json") is None]
    isolation = "sandbox" if scheduler else resolve(args.isolation).level
    child_args = child_options(args, hide=[folder, out, *args.hide])
    max_units = grading.planned_max_units(rubric, SUITE_CHOICES[args.suite], args.suite == "all", args.timing_device)
    progress = Progress(len(submissions), len(submissions) - len(todo))
    try:
        if scheduler:
            from autograder import cluster

            code = cluster.grade_all(scheduler, todo, out, child_args, rubric, max_units, progress)
            if code:
                return code
        else:
            grade_locally(todo, out, child_args, rubric, isolation, max_units, progress, args.jobs, command)
    except KeyboardInterrupt:
        progress.close()
        print("interrupted: the submissions in flight were dropped; rerun the same command "
              "to grade the rest (finished grades are kept)")
        return 130
    progress.close()
    reviews.reapply(out, [s.name for s in todo])  # a decision taken on a hold survives a rerun (--force)
    table = results.write_grades_csv(out, [s.name for s in submissions], rubric)
    print(summary(table, out, len(submissions), len(submissions) - progress.initial))
    return 0


def grade_locally(todo: list, out: Path, child_args: list, rubric, isolation: str, max_units: int,
                  progress: "Progress", jobs: int, command) -> None:
    """`todo` graded by `jobs` slots on this machine; a slot that is killed or dies is replaced."""
    todo = list(todo)
    logs = Path(tempfile.mkdtemp(prefix="mhsa-batch-"))
    slots: list[Slot | None] = [None] * max(1, min(jobs, len(todo)))
    try:
        while todo or any(s is not None and s.busy for s in slots):
            for i, slot in enumerate(slots):
                if todo and (slot is None or not slot.alive) and (slot is None or not slot.busy):
                    slot = slots[i] = Slot([*command], child_args, logs / f"slot-{i}.log")
                if todo and not slot.busy:
                    sub = todo.pop(0)
                    slot.send(sub.name, sub.path, out / f"{sub.name}.json")
            time.sleep(POLL_S)
            progress.draw(sum(s is not None and s.busy for s in slots))
            for slot in slots:
                attempt = slot.check(kill_after(rubric)) if slot is not None and slot.busy else None
                if attempt is not None:
                    target = out / f"{attempt.name}.json"
                    status = settle(attempt, target, rubric, isolation, max_units)
                    progress.advance(attempt.name, status, results.load(target))
    finally:
        for slot in slots:
            if slot is not None:
                slot.kill() if slot.busy else slot.close()
        shutil.rmtree(logs, ignore_errors=True)


def child_options(args, hide) -> list:
    """The `grade` options a child gets: the batch's own, and every folder it must hide."""
    options = ["--suite", args.suite, "--isolation", args.isolation,
               *(a for p in hide for a in ("--hide", str(Path(p).resolve())))]
    if args.timeout:
        options += ["--timeout", str(args.timeout)]
    if args.timing_device:
        options += ["--timing-device", args.timing_device]
    if getattr(args, "days_late", 0):
        options += ["--days-late", str(args.days_late)]
    if getattr(args, "after_due_date", False):
        options.append("--after-due-date")
    return options


def grade_in_child(sub: Submission, target: Path, child_args: list, rubric, isolation: str, max_units: int,
                   command=SLOT_COMMAND) -> str:
    """Grade one submission in a grader process of its own within the rubric's whole-submission
    limit; its results file is at `target` whatever happens. Returns the status."""
    logs = Path(tempfile.mkdtemp(prefix="mhsa-grade-log-"))
    slot = Slot([*command], child_args, logs / "slot.log")
    try:
        return grade_in_slot(slot, sub.name, sub.path, target, rubric, isolation, max_units)
    finally:
        slot.close()
        shutil.rmtree(logs, ignore_errors=True)


def summary(table: list, out: Path, total: int, graded_now: int) -> str:
    """The score table (points per part; '-' where a part was not graded), then what happened. `table`:
    grades.csv's rows, the header first (results.write_grades_csv)."""
    header, *rows = table
    column = {name: i for i, name in enumerate(header)}
    failed = [r[0] for r in rows if r[column["status"]] in FAILURES]
    held = [r[0] for r in rows if r[column["status"]] == grading.HELD]
    shown = [c for c in header if c not in ("submission", "max_score", "isolation", "review")]

    def cell(row, c):
        value = row[column[c]]
        if c == "score":
            return f"{_number(value)}/{_number(row[column['max_score']])}"
        return value if c == "status" else _number(value) if value != "" else "-"

    cells = [["submission", *shown], *([clean_name(row[0]), *(cell(row, c) for c in shown)] for row in rows)]
    lines = results.text_table(cells, "<" + ">" * len(shown), (0, *(9,) * len(shown)))
    lines += ["", f"{len(rows)} of {total} submissions have results ({graded_now} graded now, "
              f"{total - graded_now} kept from before); table: {out / results.GRADES_CSV}"]
    if failed:
        lines.append(f"no grade (timeout, crash or error) for: {', '.join(failed)}; see their results files")
    if held:
        lines.append(f"held for review: {', '.join(held)}; see `python -m autograder review {out}`")
    return "\n".join(lines)


class Progress:
    """A progress bar (tqdm: rate and time left) on stderr when it is a terminal; one line per finished
    submission otherwise ("[3/40] alice: 85 / 90 (graded)"), for logs and CI."""

    def __init__(self, total: int, initial: int):
        from tqdm import tqdm

        self.total, self.initial, self.done, self.failed = total, initial, initial, 0
        self.stream = sys.stderr
        self.tty = self.stream.isatty()
        if initial:
            self.stream.write(f"{initial} of {total} submissions already graded: skipped (--force regrades)\n")
        self.bar = tqdm(total=total, initial=initial, file=self.stream, unit="submission", disable=not self.tty,
                        dynamic_ncols=True)

    def advance(self, name: str, status: str, data: dict | None) -> None:
        self.done += 1
        self.failed += status in FAILURES
        if self.tty:
            self.bar.update(1)
        else:
            score = f"{data['score']:g} / {data['extra_data'].get('max_score', '?')}" if data else "-"
            self.stream.write(f"[{self.done}/{self.total}] {clean_name(name)}: {score} ({status})\n")
            self.stream.flush()

    def draw(self, running: int) -> None:
        """What is in flight, beside the bar (the bar's own clock moves by itself)."""
        if self.tty:
            self.bar.set_postfix_str(f"{running} running, {self.failed} without a grade", refresh=False)

    def close(self) -> None:
        self.bar.close()
        self.stream.flush()


def _number(value) -> str:
    try:
        return f"{float(value):.4g}"
    except ValueError:
        return str(value)
