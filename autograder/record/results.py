"""The one results model: a Grade as Gradescope's results.json, read back, changed and written only here.

A Grade is graded, held, or an error, timeout or crash (Status). What it makes of a grade: results.json
(its summary drawn from its own rows and parts), the terminal table, grades.csv. What it does with
results files: load them (strictly, or leniently for the class report) into typed Results (PartRecord,
Hold, TestRow) that every consumer reads, add a part graded elsewhere (with_part: the timing batch's
merge), record what a tool or a reviewer decided (with_extra, decide), rebuild grades.csv, and write
every file atomically. Nothing else in the grader reads or writes
results files (tests/test_results_model.py). It also holds the one text table (text_table) and the
CSV writer that keeps cells from being read as formulas.

Every number shown comes from whole units (autograder/record/scoring.py), so the top-level score is the sum
of the rows shown and each part's score the sum of its rows.
"""
import csv
import html
import io
import json
import math
import os
import re
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from autograder.core.errors import TEXT_CAP, clean_name
from autograder.core.errors import clean_text as printable  # the one cleaning, under the name this module's callers know
from autograder.core.handin import GradingError, read_regular
from autograder.record import carry_forward, scoring
from autograder.record.grade import SEED_NOTE, Grade, Status, Work
from autograder.record.scoring import UNITS, to_units

RESULTS_FILE = "results.json"  # Gradescope's name for it; a batch names each <submission>.json
GRADES_CSV = "grades.csv"      # a batch folder's table: one row per results file
# The version of the grader's own fields (extra_data), written as extra_data["format"]: a change to what a
# field means bumps it, and load() reads this version only, so a results file another version of the
# grader wrote is regraded, not guessed at (the class report reads any results file leniently: load_any).
FORMAT = 1


# ------------------------------------------------------------------------------------------------
# A results file read back: parsed once into these typed objects, which every consumer reads (the
# batch, review, the timing merge, the gradebook, the class report). `Results.data` is the file as
# written, Gradescope's format, and the only thing write() writes; every change makes a new one.
# ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PartRecord:
    """extra_data["parts"][name]: a part's points, whether it counts in the maximum, and why not."""
    score: float
    max_score: float
    graded: bool = True
    notes: tuple = ()
    diagnosis: str = ""
    left_out_because: str = ""
    picture_text: str = ""
    picture_html: str = ""
    computed_score: float | None = None  # set by hand (with_hand_scores): what the tests gave; else None
    hand_note: str = ""                  # set by hand: the reviewer's reason

    @property
    def set_by_hand(self) -> bool:
        return self.computed_score is not None


@dataclass(frozen=True)
class WrittenScore:
    """extra_data["written"][question]: a written question of the knowledge check scored by a person
    (`review --score STUDENT W1=POINTS`), outside the autograded score and maximum."""
    score: float
    max_score: float
    note: str = ""


@dataclass(frozen=True)
class Hold:
    """extra_data["held"]: why a person reviews the grade, the parts at stake, the total each decision
    gives, the decision taken (None until one is), the sha256 of the files graded (what a decision is
    bound to: grade_file.submission_digest) and, when a decision taken on other files or other reasons
    was not carried to this grade, why (record/reviews.py)."""
    reasons: tuple
    parts: tuple
    withheld: bool
    released_score: float
    confirmed_score: float
    decision: str | None = None
    note: str = ""
    sha256: str = ""
    not_carried: str = ""


@dataclass(frozen=True)
class TestRow:
    """One row of results.json's "tests": a test, a knowledge or timing row, an adjustment, a part's summary."""
    __test__ = False  # a record, not a test class for pytest to collect
    name: str
    score: float | None  # None: a row without points (a part's summary, a part not graded)
    max_score: float | None
    status: str          # "passed", "failed", or "" for a row without points
    output: str
    tags: tuple          # (part, suite) for a test; (part,) for a knowledge, timing or adjustment row; (part, "part")
    visibility: str = "visible"  # when Gradescope shows the row to the student (Gradescope's default: visible)


@dataclass(frozen=True)
class Results:
    """A results file read once, its fields typed. Read leniently (Results.of): a field a file lacks or
    holds in another form takes its default, so the class report can read other autograders' files;
    `load` admits this grader's own FORMAT only."""
    data: dict = field(repr=False, compare=False)
    score: float | None
    max_score: float | None
    status: Status | None  # None: a status this grader does not write (another autograder's file)
    submission: str
    isolation: str
    output: str
    parts: dict            # name -> PartRecord, in the rubric's order
    tests: tuple           # TestRow
    held: Hold | None
    forbidden: tuple       # the grader's list of forbidden-API findings (never read out of texts)
    flags: tuple           # what the gradebook found
    notes: tuple
    graded_with: dict      # what produced the grade (pipeline/grade_file.graded_with)
    format: int | None
    work: Work | None = None  # what the graded code was (grade.Work); None where the file does not say
    written: dict = field(default_factory=dict)  # question id -> WrittenScore: scored by hand, outside the maximum

    @classmethod
    def of(cls, data: dict) -> "Results":
        extra = data.get("extra_data") if isinstance(data.get("extra_data"), dict) else {}
        status = extra.get("status", Status.GRADED.value)
        parts = extra.get("parts") if isinstance(extra.get("parts"), dict) else {}
        held = extra.get("held") if isinstance(extra.get("held"), dict) else None
        return cls(
            data=data, score=_number(data.get("score")), max_score=_number(extra.get("max_score")),
            status=Status(status) if status in tuple(Status) else None,
            submission=_text(extra.get("submission")), isolation=_text(extra.get("isolation")),
            output=_text(data.get("output")),
            parts={name: _part(info) for name, info in parts.items() if isinstance(info, dict)},
            tests=tuple(_row(row) for row in data.get("tests") or () if isinstance(row, dict)),
            held=_hold(held) if held else None,
            forbidden=_texts(extra.get("forbidden")), flags=_texts(extra.get("flags")), notes=_texts(extra.get("notes")),
            graded_with=extra["graded_with"] if isinstance(extra.get("graded_with"), dict) else {},
            format=extra.get("format") if isinstance(extra.get("format"), int) else None,
            work=Work(extra["work"]) if extra.get("work") in tuple(Work) else None,
            written=_written(extra.get(WRITTEN_KEY)))

    @property
    def has_grade(self) -> bool:
        """Graded or held: the results hold parts and test rows; a failure holds only its maximum."""
        return self.status is not None and self.status.has_grade

    @property
    def late(self) -> tuple | None:
        """(days late, points taken) by the late penalty row (adjustments' `days` and `score`), or None
        where no late penalty was applied."""
        for a in self.extra("adjustments", []):
            if isinstance(a, dict) and _finite(a.get("days")) and a["days"] > 0 and _finite(a.get("score")):
                return a["days"], a["score"]
        return None

    def extra(self, name: str, default=None):
        """A field a tool recorded in extra_data (with_extra): the gradebook's, the timing merge's."""
        value = self.data.get("extra_data", {}).get(name, default) if isinstance(self.data.get("extra_data"), dict) \
            else default
        return default if value is None else value


def _number(value) -> float | None:
    return float(value) if _finite(value) else None


def _text(value) -> str:
    return value if isinstance(value, str) else ""


def _texts(value) -> tuple:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


def _part(info: dict) -> PartRecord:
    hand = info.get(HAND_KEY) if isinstance(info.get(HAND_KEY), dict) else {}
    return PartRecord(computed_score=_number(hand.get("computed_score")), hand_note=_text(hand.get("note")),
                      score=_number(info.get("score")) or 0.0, max_score=_number(info.get("max_score")) or 0.0,
                      graded=info.get("graded", True) is not False, notes=_texts(info.get("notes")),
                      diagnosis=_text(info.get("diagnosis")), left_out_because=_text(info.get("left_out_because")),
                      picture_text=_text(info.get("picture_text")), picture_html=_text(info.get("picture_html")))


def _written(found) -> dict:
    if not isinstance(found, dict):
        return {}
    return {q: WrittenScore(_number(info.get("score")) or 0.0, _number(info.get("max_score")) or 0.0,
                            _text(info.get("note")))
            for q, info in found.items() if isinstance(q, str) and isinstance(info, dict)}


def _row(row: dict) -> TestRow:
    return TestRow(name=_text(row.get("name")), score=_number(row.get("score")), max_score=_number(row.get("max_score")),
                   status=_text(row.get("status")), output=_text(row.get("output")), tags=_texts(row.get("tags")),
                   visibility=_text(row.get("visibility")) or "visible")


def _hold(held: dict) -> Hold:
    return Hold(reasons=_texts(held.get("reasons")), parts=_texts(held.get("parts")),
                withheld=bool(held.get("withheld")), released_score=_number(held.get("released_score")) or 0.0,
                confirmed_score=_number(held.get("confirmed_score")) or 0.0,
                decision=held.get("decision") if held.get("decision") in REVIEW_DECISIONS else None,
                note=_text(held.get("note")), sha256=_text(held.get("sha256")),
                not_carried=_text(held.get("not_carried")))


LIKELY_MISTAKE = "Likely mistake: "  # how every view of a grade introduces a part's diagnosis


def points(units: int) -> float:
    return units / UNITS


def test_output(test, rubric, diagnosis: str = "", failing_upstream: tuple = (), parity_failed: bool = False,
                waits_for: str = "") -> str:
    """What the student reads for one test: everything for public tests, the rubric's policy for hidden.

    A hidden test's own hint names one concern; it is shown only when nothing more specific is known.
    What leads instead, most specific first: the diagnosis of the part (evidence about this
    submission), a part this one builds on that fails too (`failing_upstream`: fix it first), or the
    correctness test that this consistency test depends on (`parity_failed`). A wrong hint costs a
    student more time than none. A test that passed but earns nothing until another test of its part
    passes (`waits_for`: a consistency test's correctness test, an argument check's valid-input test)
    says which one. A test rerun with correct versions of failing parts it builds on (`test.stood_in`,
    error carried forward) says what that showed: passed, the mistake is charged there; failed again,
    it is in this part's own code.
    """
    stood_in = carry_forward.functions_of(rubric, test.stood_in) if test.stood_in else ""
    if test.passed:
        lines = [f"Passed with the grader's correct {stood_in} in place of yours: the mistake that failed it is "
                 f"charged in {carry_forward.parts_in_words(test.stood_in)}, not here."] if stood_in else []
        lines += [f"It earns its points once {waits_for} passes too."] if waits_for else []
        return printable("\n".join(lines))
    policy = "full" if test.suite == "public" else rubric.parts[test.part].feedback
    if policy == "name":
        return f"Failed: {test.name} (part '{test.part}')."
    lines = [f"{LIKELY_MISTAKE}{diagnosis}"] if diagnosis else []
    lines.append(test.summary or "failed")
    if policy == "full" and test.detail:
        lines.append(test.detail)
    lead = None
    if stood_in:  # evidence about this part's own code: it does not replace the test's hint
        lines.append(f"It fails with the grader's correct {stood_in} in place of yours too: the mistake is in "
                     f"part '{test.part}' itself.")
    elif test.suite == "hidden" and not diagnosis:
        if failing_upstream:
            names = ", ".join(f"'{p}'" for p in failing_upstream)
            lead = (f"Part '{test.part}' builds on {names}, which fail{'s' if len(failing_upstream) == 1 else ''} "
                    "tests too: fix that first, then look at this test again.")
        elif parity_failed:
            lead = (f"This check compares your code with itself; it counts once {test.parity} passes: "
                    "fix that first.")
    if lead:
        lines.append(lead)
    elif test.hint and not (test.suite == "hidden" and diagnosis):
        lines.append(f"Hint: {test.hint}")
    if test.example:
        lines.append(f"Smallest failing case: {test.example.removeprefix(scoring.DRAWN_EXAMPLE)}")
    if test.forbidden:
        lines.append(f"This part scores 0: {test.forbidden}")
    return printable("\n".join(lines))


def _output(grade: Grade, test, rubric) -> str:
    """test_output with what this grade knows about the test's part and its dependencies."""
    part = grade.parts.get(test.part)
    diagnosis = part.diagnosis if part is not None and test.suite == "hidden" else ""
    failing = tuple(name for name in rubric.parts[test.part].builds_on
                    if name in grade.parts and grade.parts[name].units < grade.parts[name].max_units)
    parity_failed = bool(test.parity) and not scoring.parity_holds(test, grade.tests)
    waits_for = test.parity if parity_failed else (
        test.requires if not scoring.works_on_valid_input(test, grade.tests) else "")
    return test_output(test, rubric, diagnosis, failing, parity_failed, waits_for)


def test_name(test) -> str:
    path, _, name = test.nodeid.partition("::")
    return f"{test.part} ({test.suite}): {Path(path).stem.removeprefix('test_')}::{name}"


def rows(grade: Grade, rubric) -> list:
    """The rows of results.json: one per test, the knowledge and timing rows (without points where
    the part was not graded), adjustments (a late penalty), then one summary row per part (no points of their own: the rows with
    points add up to the total). Every row with points has a status. Hidden-test rows, and the part
    rows that reveal them, take the rubric's visibility."""
    shown = rubric.results
    md = shown.output_format == "md"
    out = []
    for t in grade.tests:
        out.append({"name": test_name(t), "score": points(t.units), "max_score": points(t.max_units),
                    "status": "passed" if t.passed else "failed",
                    "output": _format(_output(grade, t, rubric), md),
                    "visibility": shown.hidden_visibility if t.suite == "hidden" else "visible",
                    "tags": [t.part, t.suite]})
    out += [row_record(r, md) for r in (*grade.rows, *grade.adjustments)]
    if shown.part_rows:
        for p in grade.parts.values():
            has_hidden = any(t.part == p.name and t.suite == "hidden" for t in grade.tests)
            out.append(part_row(p, shown.hidden_visibility if has_hidden else "visible", md))
    return out


def part_row(p: scoring.PartScore, visibility: str, md: bool) -> dict:
    """A part's summary row: no points of its own (the rows with points add up to the total)."""
    text = "\n".join([_state(part_record(p)), *(printable(n) for n in p.notes),
                      *([f"{LIKELY_MISTAKE}{p.diagnosis}"] if p.diagnosis else [])])
    row = {"name": f"part {p.name}: {p.title}", "output": _format(text, md), "visibility": visibility,
           "tags": [p.name, "part"]}
    if p.picture_html:  # Gradescope renders a row's HTML: the weights as shaded tables
        row |= {"output": f"<pre>{html.escape(text)}</pre>\n{p.picture_html}", "output_format": "html"}
    return row


def row_record(r: scoring.Row, md: bool) -> dict:
    """A knowledge, timing or adjustment row of results.json. A row not graded (timing without CUDA, a
    knowledge check withheld until the due date) has no score and no status: Gradescope has no status
    for it, and a row with a score of 0 of 0 shows as passed; a row with no score at all, like the part
    rows, only shows its name and why."""
    row = {"name": r.name, "output": _format(printable(r.output), md), "visibility": "visible", "tags": [r.part]}
    if r.status in ("passed", "failed"):
        row |= {"score": points(r.units), "max_score": points(r.max_units), "status": r.status}
    return row


def part_record(p: scoring.PartScore) -> dict:
    """extra_data["parts"][name]: a part's points, whether it was graded, its notes and diagnosis."""
    return {"score": p.score, "max_score": p.max_score, "graded": p.graded,
            "notes": [printable(n) for n in p.notes], "diagnosis": p.diagnosis,
            **({"left_out_because": printable(p.left_out_because)} if not p.graded else {}),
            **({"picture_text": p.picture_text, "picture_html": p.picture_html} if p.picture_html else {})}


def _format(text: str, md: bool) -> str:
    """Messages hold code and values (q k^T, a*b): in Markdown they go in a code block as they are."""
    return f"```text\n{text}\n```" if md and text else text


def to_gradescope(grade: Grade, rubric) -> dict:
    """results.json in Gradescope's format; extra_data carries what instructors and tools need."""
    md = rubric.results.output_format == "md"
    data = {
        "score": points(grade.units),
        "execution_time": grade.execution_time,
        "output": "",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": rows(grade, rubric) if grade.status.has_grade else [],
        "extra_data": {
            "format": FORMAT, "submission": clean_name(grade.submission), "status": grade.status.value, "max_score": points(grade.max_units),
            "isolation": grade.isolation, "suites": list(grade.suites), "seeds": SEED_NOTE,
            "parts": {name: part_record(p) for name, p in grade.parts.items()},
            "adjustments": [{"name": r.name, "score": points(r.units), "reason": r.output, "share": r.share,
                             "days": r.days} for r in grade.adjustments],
            "forbidden": sorted({printable(r) for reasons in grade.forbidden.values() for r in reasons}),
            "notes": [printable(n) for n in grade.notes],
            "flags": [],
            "printed_output": printable(grade.output[-TEXT_CAP:]),
            "graded_with": dict(grade.produced_by),
        },
    }
    if grade.work is not None:
        data["extra_data"]["work"] = grade.work.value
    if grade.status == Status.HELD:
        data["extra_data"]["held"] = held_record(grade)
    if md:
        data["output_format"] = data["test_output_format"] = "md"
    summary = summary_text(data, rubric) if grade.status.has_grade else \
        f"{_head(data)}\n{printable(grade.message)}"
    data["output"] = _format(summary, md)
    return data


def of_grade(grade: Grade, rubric) -> Results:
    """A grade as the results a file holds: what grade_file writes and every route reads back."""
    return Results.of(to_gradescope(grade, rubric))


def _state(p: dict) -> str:
    return f"{p['score']:g} / {p['max_score']:g}" if p.get("graded", True) else "not graded"


def _is_test_row(row: dict, part: str | None = None) -> bool:
    tags = row.get("tags", [])
    return len(tags) == 2 and tags[1] in ("public", "hidden") and (part is None or tags[0] == part)


def text_table(rows: list, align: str, min_widths=(), indent: str = "") -> list:
    """Rows of cells (the header first) as lines of text: each column as wide as its widest cell and at
    least its `min_widths` entry, aligned by `align` ("<" left, ">" right, one a column), two spaces
    apart, no trailing spaces. The one text table of the grader: a grade's parts, a batch's scores,
    the gradebook's comparison, a timing session's cases."""
    least = [*min_widths, *[0] * (len(align) - len(min_widths))]
    widths = [max([least[i], *(len(str(r[i])) for r in rows)]) for i in range(len(align))]
    return [(indent + "  ".join(f"{str(cell):{a}{w}}" for cell, a, w in zip(row, align, widths))).rstrip()
            for row in rows]


PART_COLUMNS = ("<>><", (9, 14, 12))  # a grade's part table: part, score, tests passed, title


def _part_lines(data: dict, rubric) -> list:
    """The score table of a results.json: a line per part (its points, its tests passed, its title), its
    notes and diagnosis, then the adjustments and the instructor notes. Texts in `data` are clean."""
    parts = data["extra_data"].get("parts", {})
    cells = [("part", "score", "tests passed", "")]
    for name, p in parts.items():
        mine = [t for t in data["tests"] if _is_test_row(t, name)]
        passed = f"{sum(t.get('status') == 'passed' for t in mine)}/{len(mine)}" if mine else "-"
        cells.append((name, _state(p), passed, rubric.parts[name].title if name in rubric.parts else ""))
    header, *part_lines = text_table(cells, *PART_COLUMNS, indent="  ")
    lines = [header]
    for line, p in zip(part_lines, parts.values()):
        lines.append(line)
        lines += [f"      {note}" for note in p.get("notes", []) if note]
        if p.get("diagnosis"):
            lines.append(f"      {LIKELY_MISTAKE}{p['diagnosis']}")
    lines += [f"  {a['name']}: {a['score']:g} ({printable(a['reason'])})"
              for a in data["extra_data"].get("adjustments", [])]
    lines += [f"  Note: {n}" for n in data["extra_data"].get("notes", [])]
    return lines


def _head(data: dict) -> str:
    extra = data["extra_data"]
    return f"Score: {data['score']:g} / {extra['max_score']:g}  (isolation: {extra['isolation']})"


def summary_text(data: dict, rubric) -> str:
    """The top-level text of a graded (or held) results.json, from its own rows and parts: the score,
    each part, instructor notes. While hidden rows are not visible, the parts (which reveal them) are
    left to their rows."""
    head = _head(data)
    held = data["extra_data"].get("held")
    if held:  # a decided hold (a score set by hand after it) says the decision too
        head = "\n".join([head, *_hold_lines(held), *(_verdict_lines(held) if held.get("decision") else [])])
    if rubric.results.hidden_visibility != "visible":
        public = [t for t in data["tests"] if _is_test_row(t) and t["tags"][1] == "public"]
        return (f"{head}\nPublic tests passed: {sum(t.get('status') == 'passed' for t in public)} of {len(public)}. "
                f"Hidden tests and per-part results: shown {rubric.results.hidden_visibility.replace('_', ' ')}.")
    return "\n".join([head, *_part_lines(data, rubric)])


def table(grade: Grade, rubric, failures: bool = True) -> str:
    """The terminal view: parts, then each failed test with its student-facing message."""
    lines = [f"{clean_name(grade.submission)}: {grade.score:g} / {grade.max_score:g} points "
             f"(suites: {', '.join(grade.suites)}; isolation: {grade.isolation}; {grade.execution_time:.1f} s)"]
    if not grade.status.has_grade:
        return "\n".join([*lines, printable(grade.message)])
    if grade.status == Status.HELD:
        lines += ["", *held_lines(grade)]
    lines += ["", *_part_lines(to_gradescope(grade, rubric), rubric)]
    if failures:
        for t in (t for t in grade.tests if not t.passed):
            text = _output(grade, t, rubric).replace("\n", "\n      ")
            lines += ["", f"  FAILED {test_name(t)}", f"      {text}"]
    return "\n".join(lines)


def with_extra(results: Results, fields: dict) -> Results:
    """The results with `fields` added to their extra_data (what a tool records about the grade: the
    gradebook's flags and what it wrote); pure, new results out."""
    data = results.data
    return Results.of({**data, "extra_data": {**data["extra_data"], **fields}})


# ------------------------------------------------------------------------------------------------
# A part graded elsewhere (the timing batch on a GPU machine) put into an existing results.json
# ------------------------------------------------------------------------------------------------

def with_part(results: Results, rubric, part: scoring.PartScore, row: scoring.Row, extra: dict | None = None) -> Results:
    """A graded results.json with `part` (its record) and its one `row` replaced, as `grade` would
    have written them: the row takes the place of the part's old row (or comes before the adjustments
    and part rows), the totals are counted again in whole units from the parts, an adjustment (a late
    penalty) takes its share of the new total, and the summary is drawn again. `extra` is added to
    extra_data. Pure: the same inputs give the same file, so merging twice changes nothing. ValueError
    for results this cannot redo honestly: no grade, a hold for review (its released and confirmed
    totals are the reviewer's), a late penalty whose share is not recorded."""
    data = results.data
    extra_data = data["extra_data"]
    if extra_data.get("status") != Status.GRADED or not isinstance(extra_data.get("parts"), dict):
        raise ValueError(f"its results have no grade ({extra_data.get('status')}); regrade it, then merge")
    if extra_data.get("held"):
        raise ValueError("its grade is (or was) held for review, and the review decides its total: "
                         "regrade it with this part instead")
    md = data.get("output_format") == "md"
    parts = {**extra_data["parts"], part.name: part_record(part)}
    penalties = {a.get("name") for a in extra_data.get("adjustments", [])}
    tests = [t for t in data["tests"] if t.get("tags") != [part.name]]
    replaced = next((i for i, t in enumerate(data["tests"]) if t.get("tags") == [part.name]), None)
    first_after = next((i for i, t in enumerate(tests) if t.get("tags", [""])[-1] == "part"
                        or (len(t.get("tags", [])) == 1 and t["name"] in penalties)), len(tests))
    tests.insert(first_after if replaced is None else replaced, row_record(row, md))
    tests = [part_row(part, t["visibility"], md) if t.get("tags") == [part.name, "part"] else t for t in tests]
    has_part_rows = any(t.get("tags", [""])[-1] == "part" for t in tests)
    if has_part_rows and not any(t.get("tags") == [part.name, "part"] for t in tests):
        tests.append(part_row(part, "visible", md))
    return _totalled(data, rubric, parts, tests, extra)


def _totalled(data: dict, rubric, parts: dict, tests: list, extra: dict | None = None) -> Results:
    """Graded results with these `parts` and `tests` rows: the totals counted again in whole units from
    the parts, an adjustment (a late penalty) taking its share of the new total (its row too), the
    summary drawn again, `extra` added to extra_data. ValueError for a late penalty whose share is not
    recorded."""
    extra_data = data["extra_data"]
    adjustments = [dict(a) for a in extra_data.get("adjustments", [])]
    if not all(isinstance(a.get("share"), (int, float)) for a in adjustments):
        raise ValueError("its late penalty states no share of the total: regrade it first")
    earned = sum(to_units(p["score"]) for p in parts.values() if p.get("graded", True))
    maximum = sum(to_units(p["max_score"]) for p in parts.values() if p.get("graded", True))
    for a in adjustments:
        a["score"] = points(scoring.penalty_units(earned, a["share"]))
    penalties = {a["name"]: a["score"] for a in adjustments}
    tests = [{**t, "score": penalties[t["name"]]} if len(t.get("tags", [])) == 1 and t["name"] in penalties else t
             for t in tests]
    md = data.get("output_format") == "md"
    totalled = {**data, "score": points(max(0, earned + sum(to_units(a["score"]) for a in adjustments))),
                "tests": tests, "extra_data": {**extra_data, "max_score": points(maximum), "parts": parts,
                                               "adjustments": adjustments, **(extra or {})}}
    totalled["output"] = _format(summary_text(totalled, rubric), md)
    return Results.of(totalled)


def write_grades_csv(folder: Path, names, rubric) -> list:
    """folder/grades.csv (GRADES_CSV) from the results files folder/<name>.json alone, so that it is
    right however a batch was interrupted or a file was rewritten (a review, a merged timing); a name
    without a valid results file has no row. Its rows, the header first, as values (not CSV text)."""
    found = {name: kept for name in names if (kept := load(Path(folder) / f"{name}.json")) is not None}
    late = any(r.late for r in found.values())  # the late columns, where any student was charged
    written = any(r.written for r in found.values())  # the written column, where a person scored any
    rows = [csv_header(rubric, late, written), *(csv_row(name, r, rubric, late, written) for name, r in found.items())]
    buffer = io.StringIO()
    writer = SpreadsheetWriter(buffer)
    for row in rows:
        writer.writerow(row)
    write_atomic(Path(folder) / GRADES_CSV, buffer.getvalue())
    return rows


def csv_header(rubric, late: bool = False, written: bool = False) -> list:
    """grades.csv's columns; `late`: with days_late and late_penalty (the points the late policy took);
    `written`: with the written questions' points scored by hand (outside score and max_score)."""
    return ["submission", "score", "max_score", "left_out", *rubric.parts, "isolation", "status", "review",
            *(("days_late", "late_penalty") if late else ()), *(("written",) if written else ())]


def csv_row(name: str, results: Results, rubric, late: bool = False, written: bool = False) -> list:
    """One grades.csv row from results (a part not graded is blank; left_out says what the maximum
    does not hold, and why; written is blank where no written question was scored)."""
    parts = results.parts
    return [clean_name(name), results.score, "" if results.max_score is None else results.max_score,
            left_out_cell(left_out(results, rubric)),
            *(parts[p].score if p in parts and parts[p].graded else "" for p in rubric.parts),
            results.isolation, results.status.value if results.status else "", review_cell(results),
            *((results.late or ("", "")) if late else ()),
            *((written_points(results) if results.written else "",) if written else ())]


# ------------------------------------------------------------------------------------------------
# What a stated maximum leaves out of the rubric's points, and why: every output that carries a total
# (grades.csv, the batch's summary, the class report and its exports) says it in these words, so that
# two totals of the same work that differ say how
# ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class LeftOut:
    """Points of the rubric that a result's maximum does not hold, and why."""
    part: str      # "" where the results do not say which parts the points are
    points: float
    why: str

    def __str__(self) -> str:
        return f"{self.part} {self.points:g} ({self.why})" if self.part else f"{self.points:g} points ({self.why})"


LEFT_OUT_SEPARATOR = "; "  # between the things one maximum leaves out; never inside a reason
REASON_CAP = 160


def left_out(results: Results, rubric) -> list:
    """What the maximum a results file states leaves out of the rubric's points, as LeftOut items: each
    part recorded as not graded (its points, why from its notes); then any points of the rubric the
    results do not account for otherwise, named by part where the rubric's parts missing from the
    results add up to them exactly, else as points the results do not say the parts of (a result
    without a grade records no parts). [] for results that state no maximum of this grader's."""
    maximum = results.max_score
    if maximum is None:
        return []
    parts = results.parts
    rubric_points = {name: part.points for name, part in rubric.parts.items()}
    found = [LeftOut(name, _recorded_points(info, rubric_points.get(name, 0.0)), _why_not_graded(info))
             for name, info in parts.items() if not info.graded]
    unaccounted = (to_units(sum(rubric_points.values())) - to_units(maximum)
                   - sum(to_units(item.points) for item in found))
    absent = {name: worth for name, worth in rubric_points.items() if name not in parts}
    if unaccounted > 0 and sum(to_units(worth) for worth in absent.values()) == unaccounted:
        found += [LeftOut(name, worth, "not in the results") for name, worth in absent.items()]
    elif unaccounted > 0:
        found.append(LeftOut("", points(unaccounted), "the results do not say which parts"
                             if results.has_grade or results.status is None
                             else f"no grade ({results.status.value}): no parts recorded"))
    return [item for item in found if item.points > 0]


def _recorded_points(info: PartRecord, rubric_points: float) -> float:
    """A part's points as its record states them; the rubric's where a results file states none (the
    class report reads other autograders' files too)."""
    return info.max_score if info.max_score > 0 else rubric_points


def _finite(value) -> bool:
    """A number a results file may state (JSON also reads NaN and Infinity, and a hand-edited file may hold them)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _why_not_graded(info: PartRecord) -> str:
    """The part record's own reason (part_record's left_out_because); for a results file without one
    (another autograder's), the first line of its notes as written: never a guess."""
    if info.left_out_because.strip():
        return _reason(info.left_out_because)
    notes = [n for n in info.notes if n.strip()]
    return _reason(", ".join(n.strip().splitlines()[0] for n in notes)) if notes else "not graded, no reason recorded"


def _reason(text: str) -> str:
    return printable(text, cap=REASON_CAP, one_line=True).replace(";", ",")


def left_out_cell(items) -> str:
    """grades.csv's left_out cell (and the class report's): "" when nothing is left out."""
    return LEFT_OUT_SEPARATOR.join(map(str, items))


def left_out_counts(cells: list) -> str:
    """Each thing that the left_out `cells` (one per result) hold, and for how many of them:
    "knowledge 5 (why) for all 3; timing 5 (why) for 2"; "" when none holds anything."""
    counts = Counter(item for cell in cells for item in cell.split(LEFT_OUT_SEPARATOR) if item)
    return LEFT_OUT_SEPARATOR.join(f"{item} for {'all ' if n == len(cells) > 1 else ''}{n}"
                                   for item, n in counts.items())


def left_out_lines(maxima_and_cells: list, noun: str) -> list:
    """What the maxima of a set of results leave out, in lines: `maxima_and_cells` holds a (maximum as
    shown, left_out cell) per result, `noun` names one result ("submission"). First, where the results
    do not all have the same maximum, a line saying so; then a line for each maximum that leaves
    something out. [] where one maximum leaves nothing out: nothing to say."""
    cells = {}
    for maximum, cell in maxima_and_cells:
        cells.setdefault(maximum, []).append(cell)
    ordered = sorted(cells.items(), key=lambda kv: -len(kv[1]))
    lines = [f"not every {noun} has the same maximum: "
             + ", ".join(f"{maximum} for {_count(len(group), noun)}" for maximum, group in ordered)] \
        if len(cells) > 1 else []
    lines += [f"the maximum ({maximum}) of {_count(len(group), noun)} leaves out: {counts}"
              for maximum, group in ordered if (counts := left_out_counts(group))]
    return lines


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


# ------------------------------------------------------------------------------------------------
# Grades held for review (grading.hold_for_review) and the reviewer's decision (`review` command)
# ------------------------------------------------------------------------------------------------

REVIEW_DECISIONS = ("release", "confirm")


def held_record(grade: Grade) -> dict:
    """extra_data["held"]: why, which parts, the total each review decision gives, and the sha256 of
    the files graded (graded_with's submission), to which a decision on this hold is bound."""
    return {"reasons": sorted({printable(r) for reasons in grade.held.values() for r in reasons}),
            "parts": list(grade.held), "withheld": grade.withheld,
            "released_score": points(grade.earned_units), "confirmed_score": points(grade.confirmed_units),
            "decision": None, "sha256": grade.produced_by.get("submission", "")}


def held_lines(grade: Grade) -> list:
    """What the student (and every instructor view) reads about a held grade."""
    return _hold_lines(held_record(grade))


def _hold_lines(held: dict) -> list:
    shown = ("The score above is withheld (0) until then; the tests below ran as usual." if held["withheld"] else
             "The score above is what the tests earned; it may change after the review.")
    return ["HELD FOR REVIEW: the grader could not decide part of this submission on its own, so a person "
            "looks at it before the grade counts.", shown, "Why:", *(f"  - {reason}" for reason in held["reasons"])]


def review_cell(results: Results) -> str:
    """grades.csv's review column: empty, or the hold (and the decision taken on it) with its reasons,
    then each part's score set by hand (hand_scores_text)."""
    held = results.held
    cells = [text for text in (hand_scores_text(results.parts), written_text(results.written)) if text]
    if held is None:
        return " | ".join(cells)
    state = {"release": "released after review", "confirm": "confirmed after review"}.get(held.decision,
                                                                                         "held for review")
    return " | ".join([f"{state}: " + "; ".join([*held.reasons, *([held.not_carried] if held.not_carried else [])]),
                       *cells])


# ------------------------------------------------------------------------------------------------
# A part's score set by hand by a reviewer (`review --score`, record/reviews.py): the part's record keeps
# what the tests gave (HAND_KEY), and a row of the difference keeps the rows adding up to the total
# ------------------------------------------------------------------------------------------------

HAND_KEY = "set_by_hand"  # a part record's {"computed_score", "note"} while its score is set by hand
HAND_TAG = "set by hand"  # the second tag of a part's set-by-hand row: (part, HAND_TAG)
HAND_NOTE = "Score set by hand"
WRITTEN_KEY = "written"  # extra_data's written questions scored by hand (WrittenScore)


def hand_scores_text(parts: dict) -> str:
    """Each of `parts` (name -> PartRecord) whose score is set by hand, in a line: "score set by hand:
    sdpa 14 (the tests gave 10: NOTE)"; "" when none is."""
    found = [hand_score_text(name, p) for name, p in parts.items() if p.set_by_hand]
    return "score set by hand: " + "; ".join(found) if found else ""


def hand_score_text(name: str, part: PartRecord) -> str:
    """A part whose score is set by hand, in words: "sdpa 14 (the tests gave 10: NOTE)"."""
    return f"{name} {part.score:g} (the tests gave {part.computed_score:g}{': ' + part.hand_note if part.hand_note else ''})"


def written_text(written: dict) -> str:
    """The written questions scored by hand, in a line: "written, scored by hand: W1 1/1 (NOTE)"; "" for none."""
    found = [f"{q} {w.score:g}/{w.max_score:g}{f' ({w.note})' if w.note else ''}" for q, w in written.items()]
    return "written, scored by hand: " + "; ".join(found) if found else ""


def written_points(results: Results) -> float:
    return points(sum(to_units(w.score) for w in results.written.values()))


def with_written_scores(results: Results, scores: dict) -> Results:
    """The results with exactly the written questions in `scores` (question -> (points, its maximum,
    note)) scored by hand, in extra_data["written"] (none: the field removed). The written questions
    are graded by a person, outside the autograded score and maximum, which stay as they are; the
    student reads them in their feedback and the class report counts them. Pure: new results out."""
    data = results.data
    extra_data = {k: v for k, v in data["extra_data"].items() if k != WRITTEN_KEY}
    if scores:
        extra_data[WRITTEN_KEY] = {q: {"score": float(p), "max_score": float(m), "note": printable(note)}
                                   for q, (p, m, note) in scores.items()}
    return Results.of({**data, "extra_data": extra_data})


def with_hand_scores(results: Results, rubric, scores: dict) -> Results:
    """Graded results with exactly the parts in `scores` (part -> (points, note)) set by hand, every other
    part at what the tests gave: each such part's record keeps its computed score and the note, says so
    in its notes, and a row of the difference (tags (part, HAND_TAG)) keeps the rows adding up to the
    total; the maximum is unchanged and a late penalty takes its share of the new total. `scores` {}
    restores every computed score. ValueError, with the reason in a line, for results without a grade,
    a hold not decided yet, a part not in them or not graded, or points outside 0..the part's maximum.
    Pure: new results out."""
    data = results.data
    extra_data = data["extra_data"]
    if extra_data.get("status") != Status.GRADED or not isinstance(extra_data.get("parts"), dict):
        held = extra_data.get("status") == Status.HELD
        raise ValueError("its grade is held for review: release or confirm it first (review --release | --confirm)"
                         if held else f"its results have no grade ({extra_data.get('status')})")
    changed = {name for name, p in extra_data["parts"].items() if HAND_KEY in p} | set(scores)
    parts = {name: _computed(p) for name, p in extra_data["parts"].items()}
    tests = [t for t in data["tests"] if t.get("tags", [""])[-1] != HAND_TAG]
    md = data.get("output_format") == "md"
    hand_rows = []
    for name, (score, note) in scores.items():
        p = parts.get(name)
        if p is None or not p.get("graded", True):
            why = p.get("left_out_because") or "not graded" if p else "not in these results"
            raise ValueError(f"part {name!r} is {why}: its score cannot be set by hand")
        if not (_finite(score) and 0 <= score <= p["max_score"]):
            raise ValueError(f"part {name!r} scores 0 to {p['max_score']:g}, not {score:g}")
        line = f"{HAND_NOTE}: {score:g} / {p['max_score']:g} (the tests gave {p['score']:g})" + \
            (f": {printable(note)}" if note else "")
        delta = to_units(score) - to_units(p["score"])
        hand_rows.append({"name": f"{name}: {HAND_NOTE.lower()}", "score": points(delta), "max_score": 0.0,
                          "status": "passed" if delta >= 0 else "failed", "output": _format(line, md),
                          "visibility": "visible", "tags": [name, HAND_TAG]})
        parts[name] = {**p, "score": score, "notes": [*p.get("notes", []), line],
                       HAND_KEY: {"computed_score": p["score"], "note": printable(note)}}
    tests = [part_row(_part_score(t["tags"][0], parts[t["tags"][0]], rubric), t["visibility"], md)
             if t.get("tags", [""])[-1] == "part" and t["tags"][0] in changed & set(parts) else t for t in tests]
    first_after = next((i for i, t in enumerate(tests) if t.get("tags", [""])[-1] == "part"
                        or t.get("tags") == ["late"]), len(tests))
    return _totalled(data, rubric, parts, tests[:first_after] + hand_rows + tests[first_after:])


def _part_score(name: str, part: dict, rubric) -> scoring.PartScore:
    """A part record (part_record's) as the PartScore its summary row is drawn from."""
    return scoring.PartScore(name, rubric.parts[name].title if name in rubric.parts else name, to_units(part["score"]),
                             to_units(part["max_score"]), part.get("graded", True), tuple(part.get("notes", [])),
                             part.get("left_out_because", ""), part.get("diagnosis", ""),
                             part.get("picture_text", ""), part.get("picture_html", ""))


def _computed(part: dict) -> dict:
    """A part record as the tests scored it: without a score set by hand, its note or its mark."""
    hand = part.get(HAND_KEY)
    if not isinstance(hand, dict):
        return part
    return {**{k: v for k, v in part.items() if k != HAND_KEY}, "score": hand["computed_score"],
            "notes": [n for n in part.get("notes", []) if not n.startswith(HAND_NOTE)]}


def hold_not_carried(results: Results, why: str) -> Results:
    """A held results.json that says why a recorded review decision was not applied to it (the files
    or the reasons differ from those it was taken on: record/reviews.py). Pure: new results out."""
    data = results.data
    held = data["extra_data"].get("held")
    if not held:
        raise ValueError("this grade is not held for review")
    return Results.of({**data, "extra_data": {**data["extra_data"], "held": {**held, "not_carried": printable(why)}}})


def decide(results: Results, decision: str, note: str = "") -> Results:
    """A held results.json with a reviewer's decision: "release" gives the total as earned,
    "confirm" the total with the held parts at 0; the status becomes "graded", the hold and the
    decision stay on record. A decided grade can be decided again (the held state is kept in the
    record). Pure: new results out."""
    if decision not in REVIEW_DECISIONS:
        raise ValueError(f"a review decision is one of {', '.join(REVIEW_DECISIONS)}, not {decision!r}")
    data = results.data
    held = data["extra_data"].get("held")
    if not held:
        raise ValueError("this grade is not held for review")
    earned_parts = held.get("earned_parts", data["extra_data"].get("parts", {}))
    held_output = held.get("held_output", data.get("output", ""))
    score = held["released_score"] if decision == "release" else held["confirmed_score"]
    parts = earned_parts if decision == "release" else {
        name: {**part, "score": 0.0} if name in held["parts"] else part for name, part in earned_parts.items()}
    record = {**{k: v for k, v in held.items() if k != "not_carried"},  # decided on these files now
              "decision": decision, "note": printable(note), "earned_parts": earned_parts,
              "held_output": held_output}
    output = "\n".join([held_output, *_verdict_lines(record)])
    return Results.of({**data, "score": score, "output": output,
                       "extra_data": {**data["extra_data"], "status": Status.GRADED.value, "held": record,
                                      "parts": parts}})


def _verdict_lines(held: dict) -> list:
    """What a decided hold's summary says after the hold: the decision, and the reviewer's note."""
    verdict = ("Reviewed: the grade is released as the tests earned it." if held["decision"] == "release" else
               "Reviewed: the hold is confirmed; the parts it concerns (" + ", ".join(held["parts"]) + ") score 0.")
    return [verdict, *([f"Reviewer's note: {held['note']}"] if held.get("note") else [])]


# A cell a spreadsheet would read as a formula (=HYPERLINK(...), +cmd|..., -2+3, @SUM(...)) is
# written with a leading apostrophe, which shows it as the text it is (OWASP's CSV-injection advice).
# A plain number is left alone, negative ones included: "-1.5" in a score column stays a number
# (a late penalty, a negative part score), while "-1+1" is text. Text cells are also cleaned of
# control characters, like everything else the grader writes.
FORMULA_START = ("=", "+", "-", "@", "\t")
PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def spreadsheet_cell(value):
    """`value` as a CSV cell that opens as data, never as a formula (see FORMULA_START)."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    text = printable(value)
    if text.startswith(FORMULA_START) and not PLAIN_NUMBER.fullmatch(text):
        return "'" + text
    return text


class SpreadsheetWriter:
    """csv.writer for every CSV the grader writes (grades.csv, the class report's tables and exports,
    the gradebook's report.csv): each cell through spreadsheet_cell."""

    def __init__(self, stream):
        self._writer = csv.writer(stream, lineterminator="\n")

    def writerow(self, row) -> None:
        self._writer.writerow([spreadsheet_cell(cell) for cell in row])


def load(path: Path, graded_only: bool = False) -> Results | None:
    """The results file at `path` if it is complete, well-formed and in this grader's FORMAT (and, with
    `graded_only`, has a grade: graded, or held for review), else None."""
    data = _read_json(path)
    ok = (isinstance(data, dict) and isinstance(data.get("score"), (int, float))
          and isinstance(data.get("tests"), list) and isinstance(data.get("extra_data"), dict)
          and data["extra_data"].get("format") == FORMAT and data["extra_data"].get("status") in tuple(Status))
    if ok and graded_only:
        ok = Status(data["extra_data"]["status"]).has_grade and isinstance(data["extra_data"].get("parts"), dict)
    return Results.of(data) if ok else None


def load_any(path: Path) -> Results | None:
    """A Gradescope results file, leniently: a JSON object with a numeric score or a list of tests (the
    grader's own files, older ones, and other autograders' alike: the class report reads every field
    with a default); None for anything else."""
    data = _read_json(path)
    if isinstance(data, dict) and (isinstance(data.get("score"), (int, float)) or isinstance(data.get("tests"), list)):
        return Results.of(data)
    return None


# The grader's own records beside a folder of results files (a batch's review decisions, the
# gradebook's accepted notebooks) live in this subfolder: a submission or a student named like a
# record ("reviews") has its results file <name>.json, which then can never be the record.
RECORDS = "records"


def read_record(folder: Path, name: str) -> dict:
    """The record `name` kept beside the results in `folder`: its object, or {} when it is missing,
    unreadable or not an object (nothing recorded yet)."""
    data = _read_json(Path(folder) / RECORDS / name)
    return data if isinstance(data, dict) else {}


def write_record(folder: Path, name: str, data: dict) -> None:
    write_json_atomic(Path(folder) / RECORDS / name, data)


# What a results file may be: one of this grader's is at most a few hundred KB (every text in it is
# capped); a Gradescope export may hold another autograder's.
MAX_READ_BYTES = 32 << 20


def _read_json(path: Path):
    """The JSON in `path`, read as a file nobody vouches for (a regular file, not a link, FIFO or
    device, of at most MAX_READ_BYTES), or None when it is not one or not JSON."""
    try:
        return json.loads(read_regular(path, MAX_READ_BYTES).decode("utf-8", "replace"))
    except (GradingError, OSError, ValueError, RecursionError):  # RecursionError: JSON nested thousands deep
        return None


def write(path: Path, results: Results) -> None:
    """The results file at `path`, atomically: the file as the results hold it."""
    write_json_atomic(path, results.data)


def write_json_atomic(path: Path, data: dict) -> None:
    """Any JSON file the grader keeps (a record, a timing file), atomically; results files go through write()."""
    write_atomic(path, json.dumps(data, indent=2))


def write_atomic(path: Path, text: str) -> None:
    """Readers see the old file or the new one, never half of one (rename is atomic on POSIX)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
