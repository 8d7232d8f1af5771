"""Grades for the LMS: the roster join, a generic CSV and Canvas's gradebook import CSV.

Every row carries the course's maximum (the most common graded maximum). A student on the roster
without a grade gets an explicit blank and a warning, never a silent 0: in Canvas a blank leaves the
cell ungraded, a 0 would count. What that maximum leaves out of the rubric, and how nbgrader's total
for the same course differs, comes with the exports as warnings.
"""
import csv
import io
from dataclasses import dataclass
from pathlib import Path

from autograder.intake import notebook
from autograder.record import results
from autograder.reporting import sources
from autograder.record.results import SpreadsheetWriter

# Canvas's gradebook import: these five identity columns, then one column per assignment; the row
# after the header gives each assignment's points possible.
CANVAS_IDENTITY = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
CANVAS_POINTS_ROW = "Points Possible"
# Roster columns: our names, and Canvas's own (a Canvas gradebook export plus a `submission` column works).
ROSTER_COLUMNS = {"submission": ("submission",), "name": ("name", "Student"), "id": ("id", "ID"),
                  "sis_user_id": ("sis_user_id", "SIS User ID"), "login": ("login", "SIS Login ID"),
                  "section": ("section", "Section")}


@dataclass
class Student:
    submission: str
    name: str = ""
    id: str = ""
    sis_user_id: str = ""
    login: str = ""
    section: str = ""


def read_roster(path: Path) -> list:
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        found = {ours: next((c for c in names if c in (reader.fieldnames or [])), None)
                 for ours, names in ROSTER_COLUMNS.items()}
        if found["submission"] is None:
            raise ValueError(f"{path}: the roster needs a 'submission' column (the file name of the student's "
                             "submission, or their nbgrader student id)")
        students = [Student(**{ours: (row.get(col) or "").strip() for ours, col in found.items() if col})
                    for row in reader]
    # A student with a blank submission stays (a non-submitter in a Canvas export: join warns); a row
    # naming nobody (a blank line, Canvas's own "Points Possible" row) is not a student.
    return [s for s in students if (s.submission or s.id or s.sis_user_id or s.login or s.name)
            and not (s.name == CANVAS_POINTS_ROW and not (s.submission or s.id))]


def _key(text: str) -> str:
    return text.strip().lower().removesuffix(".py").removesuffix(".ipynb")


def join(records, roster) -> tuple:
    """([(Student, Record or None)] in roster order, then records nobody on the roster claims with a
    Student of their own name; [warnings])."""
    if roster is None:
        return [(Student(r.name, name=r.name), r) for r in records], []
    by_key = {}
    for r in records:
        for k in r.keys:
            by_key.setdefault(_key(k), r)
    rows, claimed, warnings = [], set(), []
    for student in roster:
        record = by_key.get(_key(student.submission)) if student.submission else None
        rows.append((student, record))
        if record is None:
            who = student.name or student.submission or student.id or student.sis_user_id or student.login
            warnings.append(f"{who} ({student.submission or 'blank submission'}) is on the roster but "
                            "has no submission: left blank, not 0")
        else:
            claimed.add(record.name)
    for r in records:
        if r.name not in claimed:
            warnings.append(f"{r.name}: graded but not on the roster: in the generic CSV without an LMS identity, "
                            "left out of the Canvas CSV")
            rows.append((None, r))
    return rows, warnings


def score_cell(student, record, warnings: list) -> str:
    if record is None:
        return ""
    if not record.graded:
        name = student.name if student else ""
        who = record.name if name in ("", record.name) else f"{name} ({record.name})"
        warnings.append(f"{who}: no grade ({record.status}): left blank, not 0; see its results")
        return ""
    hand = results.hand_scores_text(record.parts)
    if hand:  # the score exported is the reviewer's: say so beside the file
        warnings.append(f"{record.name}: {hand}")
    return f"{record.score:.2f}"


def generic_csv(rows, maximum, part_names) -> tuple:
    """(CSV text, warnings): id, name, login, section, score, max, percentage, then one column per part."""
    out, warnings = io.StringIO(), []
    writer = SpreadsheetWriter(out)
    writer.writerow(["id", "sis_user_id", "login", "name", "section", "submission", "score", "max", "percentage",
                     *part_names])
    for student, record in rows:
        s = student or Student("")
        score = score_cell(student, record, warnings)
        parts = [f"{record.parts[p].score:.2f}" if record and record.graded and p in record.parts and record.parts[p].graded
                 else "" for p in part_names]
        writer.writerow([s.id, s.sis_user_id, s.login, s.name, s.section, record.name if record else s.submission,
                         score, _points(maximum), f"{100 * float(score) / maximum:.1f}" if score and maximum else "",
                         *parts])
    return out.getvalue(), warnings


def canvas_csv(rows, maximum, assignment: str) -> tuple:
    """(CSV text, warnings) for Canvas's gradebook import: roster students only (Canvas needs their identity)."""
    out, warnings = io.StringIO(), []
    writer = SpreadsheetWriter(out)
    writer.writerow([*CANVAS_IDENTITY, assignment])
    writer.writerow([CANVAS_POINTS_ROW, "", "", "", "", _points(maximum)])
    for student, record in rows:
        if student is None:
            continue
        score = score_cell(student, record, warnings)
        writer.writerow([student.name, student.id, student.sis_user_id, student.login, student.section, score])
    return out.getvalue(), warnings


def _points(maximum) -> str:
    return "" if maximum is None else f"{maximum:g}"


def points_possible_warnings(records, maximum, files: str, rubric, from_nbgrader: bool) -> list:
    """What the `files`' points possible (the course `maximum`) leave out of the rubric, and how
    nbgrader's total for this course differs from them: nbgrader's notebook holds the written questions
    (graded by hand in nbgrader's formgrader, their points in knowledge.toml) and no part outside the
    notebook (notebook.OUTSIDE_NOTEBOOK). [] where neither has anything to add to the maximum."""
    if maximum is None:
        return []
    in_notebook, written = notebook.nbgrader_points(rubric)
    outside = {name: part.points for name, part in rubric.parts.items() if name not in in_notebook}
    nbgrader_total = sum(in_notebook.values()) + sum(q.points for q in written)
    counted = any(sources.WRITTEN_PART in r.parts for r in records)  # scored by hand on this route too
    by_hand = (f"the written questions {', '.join(q.id for q in written)} ({sum(q.points for q in written):g} "
               "points, graded by hand in nbgrader's formgrader only)") if written and not counted else ""
    if from_nbgrader:  # the maximum is nbgrader's own: what this course's notebook holds
        holds = _clauses(f"it holds {by_hand}" if by_hand else "", _not_in_notebook(outside))
        return [f"the points possible in {files} ({maximum:g}) are nbgrader's; this course's notebook totals "
                f"{nbgrader_total:g}: {holds}"] if holds else []
    at_maximum = [r for r in records if r.graded and r.max_score == maximum]
    if not at_maximum:  # no grade says what the maximum holds
        return []
    warnings = [_written_warning(at_maximum, written, maximum, files)] if counted else []
    leaves_out = results.left_out_counts([results.left_out_cell(r.left_out) for r in at_maximum])
    if leaves_out:
        warnings.append(f"the points possible in {files} ({maximum:g}) leave out: {leaves_out}")
    left_out_parts = {item.part for r in at_maximum for item in r.left_out}
    adds = [f"{name} {worth:g}" for name, worth in in_notebook.items() if name in left_out_parts] + \
        ([by_hand] if by_hand else [])
    differences = _clauses(f"it adds {' and '.join(adds)}" if adds else "",
                           _not_in_notebook({name: worth for name, worth in outside.items()
                                             if name not in left_out_parts}))
    if differences:
        warnings.append(f"nbgrader's total for this course is {nbgrader_total:g}: {differences}")
    return warnings


def _written_warning(records, written: list, maximum, files: str) -> str:
    """What the points possible count of the `written` questions, and who has not been scored on them yet."""
    waiting = [r.name for r in records if r.written_pending]
    return (f"the points possible in {files} ({maximum:g}) count the written questions "
            f"{', '.join(q.id for q in written)}, scored by hand (review --score)"
            + (f"; not scored yet for {', '.join(waiting)}: counted 0" if waiting else ""))


def _not_in_notebook(parts: dict) -> str:
    return f"it has no {', '.join(f'{name} {worth:g}' for name, worth in parts.items())} (not in the notebook)" \
        if parts else ""


def _clauses(*texts) -> str:
    return "; ".join(text for text in texts if text)
