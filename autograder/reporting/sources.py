"""What the class report reads: the grades, as one list of Records, and the submissions' code.

The grades come from a batch folder, a Gradescope export or an nbgrader gradebook export; the source
code is for the similarity check.

Every field of a results file is read with a default: a results file written by an older or newer
grader, or by hand, still reports what it has.
"""
import csv
import io
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from autograder.core.errors import clean_name, clean_text
from autograder.intake import knowledge, notebook, submission
from autograder.record import results
from autograder.record.grade import Work

BATCH, GRADESCOPE, NBGRADER = "batch", "gradescope", "nbgrader"
KINDS = {BATCH: "a batch's results folder", GRADESCOPE: "a Gradescope export",
         NBGRADER: "an nbgrader gradebook export (per-student totals only)"}
NBGRADER_COLUMNS = {"student_id", "score", "max_score"}
NBGRADER_SUBMITTED = "submitted"  # a course folder's submissions: submitted/<student id>/<assignment>/<notebook>
# What a graded result's work may be besides the student's attempt: the report shows each as a status
# of its own, and counts tests over attempted work only.
NOT_ATTEMPTED = (Work.UNTOUCHED.value, Work.DID_NOT_COMPILE.value)
# The written questions of a batch whose reviewers score them (review --score STUDENT W1=POINTS): one
# part of the report's, beside the rubric's, that nbgrader's gradebook counts in its total too.
WRITTEN_PART = "written"
# What the report reads, bounded: results files through the results model (results.load_any, within
# results.MAX_READ_BYTES), a gradebook export or Gradescope's metadata a few MB for a large course; code
# compared for similarity is the size of a real mhsa.py (the reference is ~20 KB), not the 4 MB a
# submission may be (fingerprinting that takes minutes and gigabytes, for every pair).
MAX_READ_BYTES = 32 << 20
MAX_COMPARED_CHARS = 256 << 10


@dataclass
class Record:
    """One student's grade, whatever the source."""
    name: str
    score: float | None
    max_score: float | None
    status: str = "graded"                    # or timeout, crashed, error; "no submission" (nbgrader)
    isolation: str = ""
    parts: dict = field(default_factory=dict)  # part -> results.PartRecord
    left_out: tuple = ()                      # what max_score leaves out of the rubric, and why (results.LeftOut)
    tests: tuple = ()                         # results.TestRow
    forbidden: list = field(default_factory=list)
    flags: list = field(default_factory=list)
    held: results.Hold | None = None          # a hold for review: reasons, parts, decision
    keys: tuple = ()                          # what a roster may call this student (file name, sid, email)
    output: str = ""                          # the results' top-level text (why a grade is missing)
    work: str = ""                            # grade.Work's value; "" where the results do not say
    written_pending: tuple = ()               # written questions counted but not scored by hand yet (with_written)

    @property
    def graded(self) -> bool:
        return self.status == "graded" and self.score is not None

    @property
    def attempted(self) -> bool:
        """Graded, and the student's own work: neither the untouched stubs nor code that did not compile
        (results that do not say are counted as attempted, as they were graded)."""
        return self.graded and self.work not in NOT_ATTEMPTED

    @property
    def shown_status(self) -> str:
        """The status the report shows: a graded result that is not an attempt shows its work instead
        (untouched, did not compile); held, timeout and the others stay as they are."""
        return self.work if self.status == "graded" and self.work in NOT_ATTEMPTED else self.status


def detect(path: Path) -> str:
    path = Path(path)
    if path.is_file() and path.suffix == ".csv":
        return NBGRADER
    if not path.is_dir():
        raise ValueError(f"{path}: expected a batch's results folder, a Gradescope export folder or an "
                         "nbgrader gradebook CSV (`nbgrader export`)")
    if any(results.load_any(p) for p in path.glob("*.json")):
        return BATCH
    if any(_gradescope_results(p) for p in path.iterdir() if p.is_dir()):
        return GRADESCOPE
    raise ValueError(f"{path}: no results files (NAME.json from `grade --batch`, or SUBMISSION/results.json "
                     "from a Gradescope export)")


def load(path: Path, rubric) -> tuple:
    """(kind, records sorted by name); `rubric`: the course's, for what each maximum leaves out of it."""
    kind = detect(path)
    records = _nbgrader(Path(path)) if kind == NBGRADER else {BATCH: _batch, GRADESCOPE: _gradescope}[kind](
        Path(path), rubric)
    return kind, sorted(records, key=lambda r: r.name)


def read_text(path: Path) -> str:
    """The text of `path`, a regular file of at most MAX_READ_BYTES (not a link, a FIFO or a
    device, which could block the report or lead anywhere); OSError saying why not."""
    try:
        return submission.read_regular(path, MAX_READ_BYTES).decode("utf-8", "replace")
    except submission.GradingError as err:
        raise OSError(str(err)) from None


def from_results(found: results.Results, name: str, rubric, keys=()) -> Record:
    """A student's Record from their results (read leniently: results.load_any)."""
    status = found.status.value if found.status is not None else \
        str(found.data.get("extra_data", {}).get("status") or "unknown")
    return Record(name=clean_name(name), score=found.score, max_score=found.max_score, status=status,
                  isolation=found.isolation, parts=dict(found.parts), left_out=tuple(results.left_out(found, rubric)),
                  tests=found.tests, forbidden=list(dict.fromkeys(found.forbidden)),  # the grader's own list, never its texts
                  flags=list(found.flags), held=found.held, keys=tuple(dict.fromkeys([name, *keys])),
                  output=found.output, work=found.work.value if found.work is not None else "")


def _batch(folder: Path, rubric) -> list:
    found = [(p.stem, kept) for p in sorted(folder.glob("*.json")) if (kept := results.load_any(p)) is not None]
    records = [from_results(kept, name, rubric) for name, kept in found]
    if any(kept.written for _, kept in found):  # the course scores the written questions on this route
        questions = knowledge.hand_graded(rubric)
        records = [with_written(record, kept.written, questions) for record, (_, kept) in zip(records, found)]
    return records


def with_written(record: Record, written: dict, questions: list) -> Record:
    """A graded `record` with the written `questions` as a part of its own (WRITTEN_PART): the points a
    person gave (`written`: question -> results.WrittenScore; a question not scored counts 0, as an
    ungraded cell does in nbgrader; `written_pending` names it) added to its score, and their points to
    its maximum, so that the report and the exports total what nbgrader's gradebook totals. The part's
    notes say each score and its reason. A record without a grade is kept."""
    if record.score is None or record.max_score is None or not questions:
        return record
    earned = sum(written[q.id].score for q in questions if q.id in written)
    possible = sum(q.points for q in questions)
    notes = tuple(f"{q.id} {written[q.id].score:g}/{q.points:g}" + (f": {written[q.id].note}" if written[q.id].note else "")
                  for q in questions if q.id in written)
    part = results.PartRecord(score=earned, max_score=possible, notes=notes)
    return replace(record, score=round(record.score + earned, 6), max_score=round(record.max_score + possible, 6),
                   parts={**record.parts, WRITTEN_PART: part},
                   written_pending=tuple(q.id for q in questions if q.id not in written))


def _gradescope(folder: Path, rubric) -> list:
    """A Gradescope export: one folder per submission (submission_<id>/, holding results.json or
    results/results.json) and submission_metadata.yml naming each folder's submitters."""
    metadata = _gradescope_metadata(folder / "submission_metadata.yml")
    records = []
    for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
        found = _gradescope_results(sub)
        if found is None:
            continue
        submitters = metadata.get(sub.name, [])
        name = ", ".join(s["name"] for s in submitters if s.get("name")) or sub.name
        keys = [sub.name, *(s.get(k) for s in submitters for k in ("sid", "email", "name") if s.get(k))]
        records.append(from_results(results.load_any(found), name, rubric, keys))
    return records


def _gradescope_results(folder: Path) -> Path | None:
    for candidate in (folder / results.RESULTS_FILE, folder / "results" / results.RESULTS_FILE):
        if results.load_any(candidate) is not None:
            return candidate
    return None


def _gradescope_metadata(path: Path) -> dict:
    """folder -> [{name, sid, email}]; Gradescope writes Ruby-style keys (':submitters', ':name')."""
    if not path.is_file():
        return {}
    import yaml

    data = yaml.safe_load(read_text(path)) or {}
    out = {}
    for folder, info in data.items():
        submitters = (info or {}).get(":submitters") or (info or {}).get("submitters") or []
        out[str(folder)] = [{k.lstrip(":"): str(v) for k, v in s.items() if v is not None}
                            for s in submitters if isinstance(s, dict)]
    return out


def _nbgrader(path: Path) -> list:
    """`nbgrader export`'s CSV: one row per student and assignment. nbgrader writes a score of 0 with
    an empty timestamp for a student who submitted nothing: that is "no submission" here, not a 0."""
    rows = list(csv.DictReader(io.StringIO(read_text(path), newline="")))
    if not rows or not NBGRADER_COLUMNS <= set(rows[0]):
        raise ValueError(f"{path}: not an nbgrader gradebook export (columns {sorted(NBGRADER_COLUMNS)} needed); "
                         "for a batch, give its results folder, not grades.csv")
    assignments = {row.get("assignment") for row in rows}
    if len(assignments) > 1:  # the export holds the whole course: this assignment's rows only
        rows = [row for row in rows if row.get("assignment") == notebook.ASSIGNMENT]
        if not rows:
            raise ValueError(f"{path}: no rows of assignment {notebook.ASSIGNMENT!r} (found {sorted(assignments)})")
    records = []
    for row in rows:
        submitted = bool(row.get("timestamp", "x").strip())
        name = " ".join(filter(None, (row.get("first_name", "").strip(), row.get("last_name", "").strip())))
        records.append(Record(name=clean_name(row["student_id"]), score=_number(row["score"]) if submitted else None,
                              max_score=_number(row["max_score"]), status="graded" if submitted else "no submission",
                              keys=tuple(filter(None, (row["student_id"], row.get("email", ""), name)))))
    return records


def _number(value) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def submission_sources(folder: Path) -> tuple:
    """({submission name: the mhsa.py that is graded}, [what could not be read or compared]) for a
    batch's input folder, with the batch's own names and the grader's own reading of .py files,
    folders and notebooks (each bounded by it); code over MAX_COMPARED_CHARS is not compared.
    nbgrader's layout too: a course folder, or its submitted/ folder, whose submitted/ID/mhsa/ holds
    the student's notebook, named by the student id (the solution cells, as the notebook route reads them)."""
    from autograder.runners.slot import discover  # imports the grading engine (and torch): only when code is compared

    folder = Path(folder)
    if (folder / NBGRADER_SUBMITTED).is_dir() and not (folder / NBGRADER_SUBMITTED).is_symlink():
        folder = folder / NBGRADER_SUBMITTED
    sources, problems = {}, []
    with tempfile.TemporaryDirectory(prefix="mhsa-report-") as tmp:
        for number, sub in enumerate(discover(folder)):
            name = clean_name(sub.name)
            workdir = Path(tmp) / str(number)  # the name is the student's: not a safe file name
            workdir.mkdir()
            nbgrader_folder = sub.path / notebook.ASSIGNMENT
            path = nbgrader_folder if nbgrader_folder.is_dir() and not nbgrader_folder.is_symlink() else sub.path
            try:
                code = submission.load(path, workdir).source.read_text(errors="replace")
            except (submission.GradingError, OSError, ValueError) as err:
                problems.append(f"{name}: {clean_text(err, 300)}")
                continue
            if len(code) > MAX_COMPARED_CHARS:
                problems.append(f"{name}: {len(code):,} characters of code, over the {MAX_COMPARED_CHARS:,} compared "
                                "for similarity: not compared")
                continue
            sources[name] = code
    return sources, problems
