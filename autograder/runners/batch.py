"""`grade DIR --batch --out OUT`: every submission in DIR graded, resumably, by --jobs grader slots.

A grader slot (autograder/runners/slot.py) is a long-lived grading process that grades one submission after
another, so the start-up (torch, pytest, the rubric) is paid once per slot, not per submission; each
submission still runs in a fresh worker process of its own, started and stopped by its grade. Each
grade must finish within the rubric's whole-submission limit ([limits] submission_timeout_s).
A grade writes its results file atomically and only once it is complete, with what produced it
(extra_data.graded_with: the grader, the rubric, the options and the submission's bytes,
grade_file.graded_with). A rerun keeps a grade produced by what would produce it now, regrades every
other and says how many and why (--force regrades all); a killed batch loses at most the
submissions in flight. A slot reports through its status lines and the results file only (never
through what it prints): a grade that times out, crashes or cannot start still gets a results file,
with score 0, the usual maximum and the reason; a slot that hangs is killed, one that dies is
replaced, and the batch itself never stops for one submission. OUT/grades.csv is rebuilt from the
results files. With --scheduler the same submissions go to a Dask cluster (autograder/runners/cluster.py),
with the same results files. The slots, and the failure results, are autograder/runners/slot.py's, which
every runner shares. A flat LMS download and each student's days late (--extensions) are read first
(autograder/intake/lms.py); the students of each days-late value are graded by slots of that value.
"""
import functools
import signal
import sys
from dataclasses import replace
from pathlib import Path

from autograder.core import rubric as rubric_file
from autograder.core.errors import clean_name
from autograder.intake import lms
from autograder.isolation.host.levels import resolve
from autograder.pipeline.grade_file import GradeOptions, graded_with, stale_because
from autograder.record import results, reviews
from autograder.record.grade import FAILURES, Status
from autograder.runners.slot import SLOT_COMMAND, discover, grade_in_slots



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
        from autograder.runners import cluster

        refusal = cluster.refusal(args)
        if refusal:
            print(refusal)
            return 2
    out = Path(out).resolve()
    options = GradeOptions.from_args(args).hiding(folder, out)
    try:
        unscored = rubric or rubric_file.load(options.rubric)
    except rubric_file.RubricError as err:
        print(err)
        return 2
    options = options.for_collected_work(unscored)
    rubric = options.scored(unscored)  # as each slot's grade scores it
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob(".*.tmp"):  # half-written files of a killed run: never valid, never needed
        stale.unlink(missing_ok=True)
    try:  # a flat LMS download is graded from OUT/records/lms/, a folder per student
        submissions, late, remarks = lms.collect(folder, out / "records" / "lms", getattr(args, "extensions", None),
                                                 options.days_late, discover)
    except lms.ExtensionsError as err:
        print(err)
        return 2
    for line in remarks:
        print(line)
    if scheduler:
        options = cluster.worker_options(options)
    producers = {s.name: graded_with(s.path, replace(options, days_late=late[s.name]), unscored) for s in submissions}
    kept = KeptGrades(out, producers)
    todo = submissions if args.force else [s for s in submissions if not kept.current(s.name)]
    maximum = functools.cache(functools.partial(options.max_units, rubric))
    progress = Progress(len(submissions), len(submissions) - len(todo), kept.why_regraded(todo))

    def finished(sub, status: str) -> None:
        progress.advance(sub.name, status, results.load(out / f"{sub.name}.json"))

    stop_on_signals()
    try:
        for days, group in lms.by_days_late(todo, late):  # a slot grades with one --days-late
            if scheduler:
                code = cluster.grade_all(scheduler, group, out, replace(options, days_late=days), rubric, maximum(),
                                         finished)
                if code:
                    return code
            else:
                grade_in_slots(group, out, replace(options, days_late=days), rubric, resolve(options.isolation).level,
                               maximum, args.jobs, finished, progress.draw, command)
    except KeyboardInterrupt as stop:  # the slots are gone (grade_in_slots), and with them what they held
        progress.close()
        kept = KeptGrades(out, producers)
        done = sum(kept.current(s.name) for s in submissions)
        print(f"stopped: {done} of {len(submissions)} submissions have a finished grade, kept in {out}; "
              f"rerun the same command to grade the other {len(submissions) - done}")
        return 128 + getattr(stop, "signal", signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    progress.close()
    # A decision taken on a hold survives a rerun (--force) of the same files held for the same reasons;
    # any other hold of the name stays held, and says why the decision was not carried.
    reviews.reapply(out, [s.name for s in todo])
    hand_not_applied = reviews.reapply_scores(out, rubric, [s.name for s in todo])  # scores set by hand, on the same files only
    table = results.write_grades_csv(out, [s.name for s in submissions], rubric)
    print(summary(table, out, len(submissions), len(submissions) - progress.initial))
    for name, why in reviews.not_carried(out, [s.name for s in todo]).items():
        print(f"{clean_name(name)}: held again; {why}")
    for name, why in hand_not_applied.items():
        print(f"{clean_name(name)}: {why}")
    return 0


class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGINT during a batch; exit status 128 + `signal`, as a shell reports a process it ends."""

    def __init__(self, number: int):
        super().__init__(signal.Signals(number).name)
        self.signal = number


def stop_on_signals() -> None:
    """SIGTERM, like Ctrl-C, unwinds the batch so that its slots are killed with their workers (a slot
    left running would finish its job and write its results after the batch is gone). A second signal
    is ignored: it must not cut that clean-up short (by a handler: SIG_IGN would make Python report a
    signal already pending as a race)."""
    def stop(number, _frame):
        signal.signal(signal.SIGINT, ignore)
        signal.signal(signal.SIGTERM, ignore)
        raise Stopped(number)

    def ignore(_number, _frame):
        pass

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)


def summary(table: list, out: Path, total: int, graded_now: int) -> str:
    """The score table (points per part; '-' where a part was not graded), what the maxima leave out
    (results.left_out_lines: nothing where nothing is), then what happened. `table`: grades.csv's
    rows, the header first (results.write_grades_csv)."""
    header, *rows = table
    column = {name: i for i, name in enumerate(header)}
    failed = [r[0] for r in rows if r[column["status"]] in FAILURES]
    held = [r[0] for r in rows if r[column["status"]] == Status.HELD]
    shown = [c for c in header if c not in ("submission", "max_score", "left_out", "isolation", "review")]

    def cell(row, c):
        value = row[column[c]]
        if c == "score":
            return f"{_number(value)}/{_number(row[column['max_score']])}"
        return value if c == "status" else _number(value) if value != "" else "-"

    cells = [["submission", *shown], *([clean_name(row[0]), *(cell(row, c) for c in shown)] for row in rows)]
    lines = results.text_table(cells, "<" + ">" * len(shown), (0, *(9,) * len(shown)))
    maxima = [(_number(row[column["max_score"]]), row[column["left_out"]]) for row in rows]
    lines += ["", *results.left_out_lines(maxima, "submission")]
    lines += [f"{len(rows)} of {total} submissions have results ({graded_now} graded now, "
              f"{total - graded_now} kept from before); table: {out / results.GRADES_CSV}"]
    if failed:
        lines.append(f"no grade (timeout, crash or error) for: {', '.join(failed)}; see their results files")
    if held:
        lines.append(f"held for review: {', '.join(held)}; see `python -m autograder review {out}`")
    return "\n".join(lines)


class KeptGrades:
    """The results files in OUT against what would produce them now (`producers`, graded_with per
    submission; each file carries its own, extra_data.graded_with): which grades a rerun keeps, and
    why it regrades the others."""

    def __init__(self, out: Path, producers: dict):
        self.producers = producers
        self.kept = {name: results.load(out / f"{name}.json") for name in producers}

    def current(self, name: str) -> bool:
        return self.kept[name] is not None and not self.stale(name)

    def stale(self, name: str) -> list:
        """Why the grade kept for `name` is stale (PRODUCERS' words); [] when it is current or absent."""
        if self.kept[name] is None:
            return []
        produced_by = self.kept[name].graded_with
        if not produced_by:
            return ["its results file does not say what produced it"]
        return stale_because(produced_by, self.producers[name])

    def why_regraded(self, todo: list) -> dict:
        """reason -> how many of `todo` are regraded for it."""
        counts = {}
        for sub in todo:
            for why in self.stale(sub.name):
                counts[why] = counts.get(why, 0) + 1
        return counts


class Progress:
    """A progress bar (tqdm: rate and time left) on stderr when it is a terminal; one line per finished
    submission otherwise ("[3/40] alice: 85 / 90 (graded)"), for logs and CI."""

    def __init__(self, total: int, initial: int, regraded: dict | None = None):
        from tqdm import tqdm

        self.total, self.initial, self.done, self.failed = total, initial, initial, 0
        self.stream = sys.stderr
        self.tty = self.stream.isatty()
        if initial:
            self.stream.write(f"{initial} of {total} submissions already graded by this grader, rubric, options and "
                              "submission: kept (--force regrades)\n")
        for why, count in (regraded or {}).items():
            self.stream.write(f"regrading {count} of {total}: {why}\n")
        self.bar = tqdm(total=total, initial=initial, file=self.stream, unit="submission", disable=not self.tty,
                        dynamic_ncols=True)

    def advance(self, name: str, status: str, found: results.Results | None) -> None:
        self.done += 1
        self.failed += status in FAILURES
        if self.tty:
            self.bar.update(1)
        else:
            maximum = "?" if found is None or found.max_score is None else f"{found.max_score:g}"
            score = f"{found.score:g} / {maximum}" if found else "-"
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
