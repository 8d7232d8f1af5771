"""A flat LMS download grouped into a folder per student, and each student's days late (extensions, submission times).

Canvas's *Download Submissions* zip holds every file of every student in one folder, each named
`name[_LATE]_userid_submissionid_originalname[-N].ext` (name: the student's sortable name in lower
case, which may hold underscores; LATE_: Canvas marks the submission late against its due date;
-N: Canvas's suffix for a file uploaded again under the same name). `read_download` groups such
files by student and `stage` copies each group into a folder of its own under the files' original
names, so that a batch grades `mhsa.py` and `knowledge.py` as the student handed them in.

`read_extensions` reads an instructor's CSV of per-student due dates and extensions, and `lateness`
decides each student's days late from what is known of them (docs/autograder.md, the batch section,
states the rules).
"""
import csv
import math
import re
import shutil
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from autograder.core.errors import clean_name
from autograder.core.handin import GradingError, read_regular

CANVAS = re.compile(r"^(?P<student>.+?)(?P<late>_LATE)?_(?P<user>\d+)_(?P<submission>\d+)_(?P<original>.+)$")
CANVAS_FORM = "name[_LATE]_userid_submissionid_file"
RESUBMITTED = re.compile(r"^(?P<stem>.+)-(?P<count>\d+)(?P<suffix>\.[^.]*)?$")  # Canvas's mhsa-1.py
TIMESTAMP = "timestamp.txt"  # nbgrader's submission time, in each submitted folder
COLUMNS = ("student", "due", "extra_days")
DAY_S = 86400.0


@dataclass(frozen=True)
class LmsFile:
    """One file of an LMS download, its name read by the LMS's convention."""
    path: Path
    student: str        # the name part ("lastfirst")
    user_id: str
    submission_id: int
    original: str       # the name the student uploaded, without the LMS's resubmission suffix
    resubmission: int   # Canvas's -N (0: none)
    late: bool          # the LMS marked the submission late


def parse_canvas(path: Path) -> LmsFile | None:
    """The file's parts by Canvas's download convention, or None when its name does not follow it."""
    found = CANVAS.match(Path(path).name)
    if not found:
        return None
    original, resubmission = found["original"], 0
    suffix = RESUBMITTED.match(original)
    if suffix:
        original, resubmission = suffix["stem"] + (suffix["suffix"] or ""), int(suffix["count"])
    return LmsFile(Path(path), found["student"], found["user"], int(found["submission"]), original, resubmission,
                   bool(found["late"]))


@dataclass(frozen=True)
class Download:
    """A flat download: each student's files (by the name a batch gives them), and what was not recognised."""
    students: dict      # name -> [LmsFile], the latest upload of each original name
    unrecognised: tuple  # entry names that follow no known convention (not graded)
    replaced: tuple     # lines: an older upload of the same file, left out for the latest

    def late(self, name: str) -> bool:
        return any(f.late for f in self.students.get(name, ()))


def read_download(folder: Path) -> Download | None:
    """`folder` read as a flat LMS download, or None when none of its files is named by a known
    convention (a folder of per-student folders or of lone .py files). Names starting with "." or "_"
    are skipped, as a batch skips them (__MACOSX, .DS_Store)."""
    entries = [p for p in sorted(Path(folder).iterdir()) if not p.name.startswith((".", "_"))]
    # A link named by the convention is its student's (stage refuses to copy it and says so)
    parsed = {p: parse_canvas(p) if p.is_file() else None for p in entries}
    if not any(parsed.values()):
        return None
    by_user = {}
    for f in filter(None, parsed.values()):
        by_user.setdefault(f.user_id, []).append(f)
    names = [files[0].student for files in by_user.values()]
    students, replaced = {}, []
    for user_id, files in by_user.items():
        name = files[0].student if names.count(files[0].student) == 1 else f"{files[0].student}_{user_id}"
        latest = {}
        for f in sorted(files, key=lambda f: (f.submission_id, f.resubmission)):
            if f.original in latest:
                replaced.append(f"{clean_name(name)}: {clean_name(latest[f.original].path.name)} left out for the "
                                f"later upload {clean_name(f.path.name)}")
            latest[f.original] = f
        students[name] = sorted(latest.values(), key=lambda f: f.original)
    unrecognised = tuple(p.name + ("/" if p.is_dir() else "") for p, f in parsed.items() if f is None)
    return Download(students, unrecognised, tuple(replaced))


def unrecognised_line(download: Download) -> str:
    """One line naming what a download holds that no convention recognises; "" when nothing."""
    if not download.unrecognised:
        return ""
    return (f"not graded, not named by Canvas's convention ({CANVAS_FORM}): "
            f"{', '.join(clean_name(n) for n in download.unrecognised)}")


def stage(download: Download, into: Path) -> list:
    """Each student's files copied into into/NAME/ under their original names (what was staged before
    is removed first, so a file gone from the download is gone from the grade). Returns lines for the
    files that could not be copied (a link, over the size limit): that student is graded without them."""
    shutil.rmtree(into, ignore_errors=True)
    problems = []
    for name, files in download.students.items():
        folder = into / name
        folder.mkdir(parents=True)
        for f in files:
            try:
                (folder / f.original).write_bytes(read_regular(f.path))
            except (GradingError, OSError) as err:
                problems.append(f"{clean_name(name)}: {clean_name(f.path.name)} not graded: {err}")
    return problems


# ------------------------------------------------------------------------------------------------
# Days late, per student
# ------------------------------------------------------------------------------------------------

class ExtensionsError(ValueError):
    """An extensions CSV that cannot be used, in one line naming the file and the row."""


@dataclass(frozen=True)
class Extension:
    """One student's row of the extensions CSV."""
    due: datetime | None = None   # the student's own due date, time-zone aware
    extra_days: float = 0.0       # days added to the due date

    @property
    def extended(self) -> bool:
        return self.due is not None or self.extra_days > 0


def read_extensions(path: Path) -> dict:
    """student -> Extension from a CSV with a header row: `student` and at least one of `due` (ISO 8601
    date or date-time; a date is the end of that day, a time without offset this machine's time zone)
    and `extra_days` (a number of days, 0 or more). An empty cell means "not given"."""
    from autograder.intake import knowledge

    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            rows = list(csv.reader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise ExtensionsError(f"{path}: cannot be read ({err})") from None
    if not rows:
        raise ExtensionsError(f"{path}: empty; it needs a header row: student,due,extra_days")
    header = [h.strip() for h in rows[0]]
    unknown = [h for h in header if h not in COLUMNS]
    if "student" not in header or unknown or len(header) < 2 or len(set(header)) < len(header):
        raise ExtensionsError(f"{path} row 1: the header must be student and due and/or extra_days, each once "
                              f"(got {','.join(clean_name(h) for h in header)})")
    found = {}
    for number, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        where = f"{path} row {number}"
        if len(row) != len(header):
            raise ExtensionsError(f"{where}: {len(row)} cells for {len(header)} columns")
        cells = dict(zip(header, (c.strip() for c in row)))
        student = cells["student"]
        if not student:
            raise ExtensionsError(f"{where}: no student named")
        if student in found:
            raise ExtensionsError(f"{where}: {clean_name(student)} is listed twice")
        due = extra = None
        if cells.get("due"):
            try:
                moment = knowledge.parse_moment(cells["due"])
            except ValueError:
                raise ExtensionsError(f"{where}: due {clean_name(cells['due'])!r} is not an ISO 8601 date or "
                                      "date-time (e.g. 2026-12-10 or 2026-12-10T23:59:00-08:00)") from None
            due = knowledge.deadline({"due": moment})
        if cells.get("extra_days"):
            try:
                extra = float(cells["extra_days"])
            except ValueError:
                extra = -1.0
            if not math.isfinite(extra) or extra < 0:
                raise ExtensionsError(f"{where}: extra_days {clean_name(cells['extra_days'])!r} is not a number of "
                                      "days, 0 or more")
        if due is None and extra is None:
            raise ExtensionsError(f"{where}: {clean_name(student)} has neither a due date nor extra_days")
        found[student] = Extension(due, extra or 0.0)
    return found


def submission_time(path: Path) -> datetime | None:
    """When a submission folder was handed in, from nbgrader's timestamp.txt in it ("2026-01-12
    09:30:00.123456 UTC"; without a zone, UTC, as nbgrader reads it); None without a readable one."""
    stamp = Path(path) / TIMESTAMP
    if not Path(path).is_dir() or not stamp.is_file():
        return None
    try:
        text = read_regular(stamp, limit=1024).decode().strip()
        text = re.sub(r"\s*(UTC|Z)$", "+00:00", text)
        moment = datetime.fromisoformat(text)
    except (GradingError, UnicodeDecodeError, ValueError):
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


@dataclass(frozen=True)
class Lateness:
    days: float   # days after the student's own due date (the late policy rounds a part of a day up)
    why: str      # how it was decided, in words


def lateness(extension: Extension | None, submitted: datetime | None, lms_late: bool | None,
             days_late: float) -> Lateness:
    """A student's days late. `extension`: their row of the extensions CSV; `submitted`: their
    submission time (timestamp.txt); `lms_late`: the LMS's late mark (None: not an LMS download);
    `days_late`: the batch's --days-late, for a submission whose lateness nothing else tells."""
    extension = extension or Extension()
    if submitted is not None and extension.due is not None:
        due = extension.due + timedelta(days=extension.extra_days)
        # Whole days, as the late policy counts them (a part of a day is a day): students a few minutes
        # apart share one --days-late, so a batch starts grader slots for a few values, not one each
        days = float(max(0, math.ceil((submitted - due).total_seconds() / DAY_S)))
        return Lateness(days, f"handed in {submitted.isoformat()}, due {due.isoformat()}")
    if lms_late is not None:
        if not lms_late:
            return Lateness(0.0, "on time (the LMS does not mark it late)")
        if extension.extended:
            return Lateness(0.0, "the LMS marks it late against the course's due date, but the student has an "
                                 "extension and the download gives no time: counted on time")
        return Lateness(1.0, "the LMS marks it late and gives no time: counted as 1 day, the least the late "
                             "policy charges")
    if extension.due is not None:
        return Lateness(0.0, "an own due date but no submission time (timestamp.txt): counted on time")
    days = max(0.0, days_late - extension.extra_days)
    return Lateness(days, f"--days-late {days_late:g}" + (f" less {extension.extra_days:g} extra days"
                                                          if extension.extra_days else ""))


def collect(folder: Path, staging: Path, extensions: Path | None, days_late: float, discover) -> tuple:
    """(submissions, name -> days late, remarks to print) for a batch of `folder`. A flat download is
    staged into `staging` first and its folders found there; `discover` is the batch's own finder of
    submissions in a folder. Raises ExtensionsError, before anything is staged, for a CSV it cannot use."""
    extended = read_extensions(extensions) if extensions else {}
    download, remarks = read_download(folder), []
    if download is not None:
        remarks += [line for line in (unrecognised_line(download), *download.replaced, *stage(download, staging))
                    if line]
        folder = staging
    submissions = discover(folder)
    unknown = sorted(set(extended) - {s.name for s in submissions})
    if unknown:
        remarks.append(f"{extensions}: no submission for {', '.join(clean_name(n) for n in unknown)} "
                       "(their rows are unused)")
    late = {s.name: lateness(extended.get(s.name), submission_time(s.path),
                             download.late(s.name) if download else None, days_late) for s in submissions}
    remarks += [f"{clean_name(name)}: {why.days:.4g} day(s) late: {why.why}" for name, why in late.items()
                if why.days or name in extended]
    return submissions, {name: why.days for name, why in late.items()}, remarks


def by_days_late(todo: list, days: dict) -> list:
    """[(days late, [submissions])]: `todo` grouped by each name's days late, in order of first appearance."""
    groups = {}
    for sub in todo:
        groups.setdefault(days[sub.name], []).append(sub)
    return list(groups.items())
