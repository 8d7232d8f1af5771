"""The one report writer: a Grade as Gradescope's results.json, the terminal table and a CSV row.

A Grade is graded, or an error, timeout or crash; files are written atomically.

Every number shown comes from whole units (autograder/scoring.py), so the top-level score is the sum
of the rows shown and each part's score the sum of its rows.
"""
import csv
import json
import os
import re
import tempfile
from pathlib import Path

from autograder import scoring
from autograder.errors import TEXT_CAP, clean_name
from autograder.errors import clean_text as printable  # the one cleaning, under the name this module's callers know
from autograder.grading import HELD, SEED_NOTE, STATUSES, Grade
from autograder.scoring import UNITS



def points(units: int) -> float:
    return units / UNITS


def test_output(test, rubric, diagnosis: str = "", failing_upstream: tuple = (), parity_failed: bool = False) -> str:
    """What the student reads for one test: everything for public tests, the rubric's policy for hidden.

    A hidden test's own hint names one concern; it is shown only when nothing more specific is known.
    What leads instead, most specific first: the diagnosis of the part (evidence about this
    submission), a part this one builds on that fails too (`failing_upstream`: fix it first), or the
    correctness test that this consistency test depends on (`parity_failed`). A wrong hint costs a
    student more time than none.
    """
    if test.passed:
        return ""
    policy = "full" if test.suite == "public" else rubric.parts[test.part].feedback
    if policy == "name":
        return f"Failed: {test.name} (part '{test.part}')."
    lines = [f"Likely mistake: {diagnosis}"] if diagnosis else []
    lines.append(test.summary or "failed")
    if policy == "full" and test.detail:
        lines.append(test.detail)
    lead = None
    if test.suite == "hidden" and not diagnosis:
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
        lines.append(f"Smallest failing case: {test.example.removeprefix('Falsifying example: ')}")
    if test.forbidden:
        lines.append(f"This part scores 0: {test.forbidden}")
    return printable("\n".join(lines))


def _output(grade: Grade, test, rubric) -> str:
    """test_output with what this grade knows about the test's part and its dependencies."""
    part = grade.parts.get(test.part)
    diagnosis = part.diagnosis if part is not None and test.suite == "hidden" else ""
    failing = tuple(name for name in rubric.parts[test.part].builds_on
                    if name in grade.parts and grade.parts[name].units < grade.parts[name].max_units)
    outcomes = {t.name: t.passed for t in grade.tests}
    parity_failed = bool(test.parity) and not scoring.parity_holds(test, outcomes)
    return test_output(test, rubric, diagnosis, failing, parity_failed)


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
    for r in (*grade.rows, *grade.adjustments):
        row = {"name": r.name, "output": _format(printable(r.output), md), "visibility": "visible", "tags": [r.part]}
        if r.status in ("passed", "failed"):
            row |= {"score": points(r.units), "max_score": points(r.max_units), "status": r.status}
        # else not graded (timing without CUDA, a knowledge check withheld until the due date):
        # Gradescope has no status for it, and a row with a score of 0 of 0 shows as passed; a row
        # with no score at all, like the part rows, only shows its name and why.
        out.append(row)
    if shown.part_rows:
        for p in grade.parts.values():
            has_hidden = any(t.part == p.name and t.suite == "hidden" for t in grade.tests)
            text = "\n".join([f"{_state(p)}", *(printable(n) for n in p.notes),
                              *([f"Likely mistake: {p.diagnosis}"] if p.diagnosis else [])])
            out.append({"name": f"part {p.name}: {p.title}", "output": _format(text, md),
                        "visibility": shown.hidden_visibility if has_hidden else "visible", "tags": [p.name, "part"]})
    return out


def _format(text: str, md: bool) -> str:
    """Messages hold code and values (q k^T, a*b): in Markdown they go in a code block as they are."""
    return f"```text\n{text}\n```" if md and text else text


def to_gradescope(grade: Grade, rubric) -> dict:
    """results.json in Gradescope's format; extra_data carries what instructors and tools need."""
    data = {
        "score": points(grade.units),
        "execution_time": grade.execution_time,
        "output": _format(summary_text(grade, rubric), rubric.results.output_format == "md"),
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": rows(grade, rubric) if grade.status in ("graded", HELD) else [],
        "extra_data": {
            "submission": clean_name(grade.submission), "status": grade.status, "max_score": points(grade.max_units),
            "isolation": grade.isolation, "suites": list(grade.suites), "seeds": SEED_NOTE,
            "parts": {name: {"score": p.score, "max_score": p.max_score, "graded": p.graded,
                             "notes": [printable(n) for n in p.notes], "diagnosis": p.diagnosis}
                      for name, p in grade.parts.items()},
            "adjustments": [{"name": r.name, "score": points(r.units), "reason": r.output} for r in grade.adjustments],
            "forbidden": sorted({printable(r) for reasons in grade.forbidden.values() for r in reasons}),
            "notes": [printable(n) for n in grade.notes],
            "flags": [],
            "printed_output": printable(grade.output[-TEXT_CAP:]),
        },
    }
    if grade.status == HELD:
        data["extra_data"]["held"] = held_record(grade)
    if rubric.results.output_format == "md":
        data["output_format"] = data["test_output_format"] = "md"
    return data


def _state(p) -> str:
    return f"{p.score:g} / {p.max_score:g}" if p.graded else "not graded"


def _part_lines(grade: Grade) -> list:
    lines = []
    for p in grade.parts.values():
        mine = [t for t in grade.tests if t.part == p.name]
        passed = f"{sum(t.passed for t in mine)}/{len(mine)}" if mine else "-"
        lines.append(f"  {p.name:<10} {_state(p):>14}  {passed:>12}  {p.title}")
        lines += [f"      {printable(note)}" for note in p.notes if note]
        if p.diagnosis:
            lines.append(f"      Likely mistake: {p.diagnosis}")
    return lines


def summary_text(grade: Grade, rubric) -> str:
    """The top-level text of results.json: the score, each part, instructor notes, or why no grade.
    While hidden rows are not visible, the parts (which reveal them) are left to their rows."""
    head = f"Score: {grade.score:g} / {grade.max_score:g}  (isolation: {grade.isolation})"
    if grade.status not in ("graded", HELD):
        return f"{head}\n{printable(grade.message)}"
    if grade.status == HELD:
        head = "\n".join([head, *held_lines(grade)])
    if rubric.results.hidden_visibility != "visible":
        public = [t for t in grade.tests if t.suite == "public"]
        return (f"{head}\nPublic tests passed: {sum(t.passed for t in public)} of {len(public)}. "
                f"Hidden tests and per-part results: shown {rubric.results.hidden_visibility.replace('_', ' ')}.")
    lines = [head, f"  {'part':<10} {'score':>14}  {'tests passed':>12}", *_part_lines(grade)]
    lines += [f"  {r.name}: {points(r.units):g} ({printable(r.output)})" for r in grade.adjustments]
    lines += [f"  Note: {printable(n)}" for n in grade.notes]
    return "\n".join(lines)


def table(grade: Grade, rubric, failures: bool = True) -> str:
    """The terminal view: parts, then each failed test with its student-facing message."""
    lines = [f"{clean_name(grade.submission)}: {grade.score:g} / {grade.max_score:g} points "
             f"(suites: {', '.join(grade.suites)}; isolation: {grade.isolation}; {grade.execution_time:.1f} s)"]
    if grade.status not in ("graded", HELD):
        return "\n".join([*lines, printable(grade.message)])
    if grade.status == HELD:
        lines += ["", *held_lines(grade)]
    lines += ["", f"  {'part':<10} {'score':>14}  {'tests passed':>12}", *_part_lines(grade)]
    lines += [f"  {r.name}: {points(r.units):g} ({printable(r.output)})" for r in grade.adjustments]
    lines += [f"  Note: {printable(n)}" for n in grade.notes]
    if failures:
        for t in (t for t in grade.tests if not t.passed):
            text = _output(grade, t, rubric).replace("\n", "\n      ")
            lines += ["", f"  FAILED {test_name(t)}", f"      {text}"]
    return "\n".join(lines)


def csv_header(rubric) -> list:
    return ["submission", "score", "max_score", *rubric.parts, "isolation", "status", "review"]


def csv_row(name: str, data: dict, rubric) -> list:
    """One grades.csv row from a results.json (a part not graded is blank)."""
    extra = data["extra_data"]
    scores = extra.get("parts", {})
    return [clean_name(name), data["score"], extra.get("max_score", ""),
            *(scores[p]["score"] if scores.get(p, {}).get("graded", False) else "" for p in rubric.parts),
            extra.get("isolation", ""), extra.get("status", "graded"), review_cell(data)]


# ------------------------------------------------------------------------------------------------
# Grades held for review (grading.hold_for_review) and the reviewer's decision (`review` command)
# ------------------------------------------------------------------------------------------------

REVIEW_DECISIONS = ("release", "confirm")


def held_record(grade: Grade) -> dict:
    """extra_data["held"]: why, which parts, and the total each review decision gives."""
    return {"reasons": sorted({printable(r) for reasons in grade.held.values() for r in reasons}),
            "parts": list(grade.held), "withheld": grade.withheld,
            "released_score": points(grade.earned_units), "confirmed_score": points(grade.confirmed_units),
            "decision": None}


def held_lines(grade: Grade) -> list:
    """What the student (and every instructor view) reads about a held grade."""
    shown = ("The score above is withheld (0) until then; the tests below ran as usual." if grade.withheld else
             "The score above is what the tests earned; it may change after the review.")
    return ["HELD FOR REVIEW: the grader could not decide part of this submission on its own, so a person "
            "looks at it before the grade counts.", shown, "Why:",
            *(f"  - {reason}" for reason in held_record(grade)["reasons"])]


def review_cell(data: dict) -> str:
    """grades.csv's review column: empty, or the hold (and the decision taken on it) with its reasons."""
    held = data["extra_data"].get("held")
    if not held:
        return ""
    state = {"release": "released after review", "confirm": "confirmed after review"}.get(held.get("decision"),
                                                                                         "held for review")
    return f"{state}: " + "; ".join(held.get("reasons", []))


def decide(data: dict, decision: str, note: str = "") -> dict:
    """A held results.json with a reviewer's decision: "release" gives the total as earned,
    "confirm" the total with the held parts at 0; the status becomes "graded", the hold and the
    decision stay on record. A decided grade can be decided again (the held state is kept in the
    record). Pure: a new dict out."""
    if decision not in REVIEW_DECISIONS:
        raise ValueError(f"a review decision is one of {', '.join(REVIEW_DECISIONS)}, not {decision!r}")
    held = data["extra_data"].get("held")
    if not held:
        raise ValueError("this grade is not held for review")
    earned_parts = held.get("earned_parts", data["extra_data"].get("parts", {}))
    held_output = held.get("held_output", data.get("output", ""))
    score = held["released_score"] if decision == "release" else held["confirmed_score"]
    verdict = ("Reviewed: the grade is released as the tests earned it." if decision == "release" else
               "Reviewed: the hold is confirmed; the parts it concerns (" + ", ".join(held["parts"]) + ") score 0.")
    parts = earned_parts if decision == "release" else {
        name: {**part, "score": 0.0} if name in held["parts"] else part for name, part in earned_parts.items()}
    record = {**held, "decision": decision, "note": printable(note), "earned_parts": earned_parts,
              "held_output": held_output}
    output = "\n".join(filter(None, [held_output, verdict, f"Reviewer's note: {printable(note)}" if note else ""]))
    return {**data, "score": score, "output": output,
            "extra_data": {**data["extra_data"], "status": "graded", "held": record, "parts": parts}}


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


def load(path: Path) -> dict | None:
    """The results file at `path` if it is complete and well-formed, else None."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    ok = (isinstance(data, dict) and isinstance(data.get("score"), (int, float))
          and isinstance(data.get("tests"), list) and isinstance(data.get("extra_data"), dict)
          and data["extra_data"].get("status") in (*STATUSES, HELD))
    return data if ok else None


def read_json_record(path: Path) -> dict:
    """A record the grader keeps beside results (reviews.json, the gradebook's accepted.json): its
    object, or {} when it is missing, unreadable or not an object (nothing recorded yet)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_json_atomic(path: Path, data: dict) -> None:
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
