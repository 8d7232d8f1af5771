"""The class report (`python -m autograder report`): a class's grades as a page, CSV files and LMS grades.

One self-contained report.html, the same numbers as CSV files next to it, and grades for the LMS
(docs/class-report.md).

sources reads the grades and the code, tables computes every number, similarity compares the code,
exports joins the roster and writes the LMS files, page renders the HTML.
"""
import io
from pathlib import Path

from autograder.core import rubric as rubric_file
from autograder.record import results
from autograder.record.results import left_out_cell  # `build`'s argument `results` is the folder it reads
from autograder.reporting import exports, page, similarity, sources, tables

REPORT = "report.html"
GENERIC_EXPORT = "grades-export.csv"
CANVAS_EXPORT = "canvas.csv"


def build(results: Path, out: Path, submissions: Path | None = None, roster: Path | None = None,
          canvas_assignment: str | None = None, threshold: float = similarity.THRESHOLD) -> tuple:
    """Write the report and exports into `out`; returns ([files written], [warnings]). What each maximum
    leaves out is of the repository's rubric.toml, the rubric a batch grades with unless told otherwise."""
    course_rubric = rubric_file.load()
    kind, records = sources.load(results, course_rubric)
    out.mkdir(parents=True, exist_ok=True)
    warnings = []
    maximum, outliers = tables.course_maximum(records)
    if outliers:
        warnings.append(f"graded with another maximum than the course's {maximum:g}: "
                        + ", ".join(f"{r.name} ({r.max_score:g}, leaving out "
                                    f"{left_out_cell(r.left_out) or 'nothing'})" for r in outliers)
                        + f"; the exports use {maximum:g} for everyone, and the mean and median are of points "
                          "out of different maxima")
    part_names = list(dict.fromkeys(p for r in records for p, info in r.parts.items() if info.graded))

    summary = tables.summary(records, maximum)
    rows, roster_warnings = exports.join(records, exports.read_roster(roster) if roster else None)
    students = tables.students(rows, part_names, maximum, roster=roster is not None)
    sections = [("summary", "Score distribution", _summary_section(kind, summary, records, part_names, maximum))]
    written_tables = [summary, students]
    if kind != sources.NBGRADER:
        parts = tables.parts(records, part_names)
        shares = tables.part_shares(records, part_names)
        help_needed = tables.needs_help(records)
        hardest = tables.hardest_tests(records, tables.test_descriptions())
        misconceptions = tables.misconceptions(records)
        integrity = tables.integrity(records)
        timing = tables.timing(records)
        similar, similar_html = _similarity(kind, results, submissions, records, threshold, warnings)
        sections += [("parts", "Parts", page.table(parts)),
                     ("needs-help", "Who needs help, with what", page.table(help_needed)),
                     ("part-shares", "Students by part", page.table(shares, shaded=True)),
                     ("hardest", "Hardest tests", page.table(hardest)),
                     ("misconceptions", "Misconceptions", page.table(misconceptions)),
                     ("integrity", "Integrity", page.table(integrity)),
                     ("similarity", "Similarity", similar_html),
                     ("timing", "Timing", _timing_section(timing))]
        written_tables += [parts, help_needed, shares, hardest, misconceptions, integrity, similar, timing]
    elif submissions is not None:  # the gradebook export holds no code, but nbgrader's submitted/ folder does
        similar, similar_html = _similarity(kind, results, submissions, records, threshold, warnings)
        sections.append(("similarity", "Similarity", similar_html))
        written_tables.append(similar)
    sections.append(("students", "Students", page.table(students)))

    written = []
    for t in written_tables:
        written.append(_write(out / f"report-{t.id}.csv", table_csv(t)))
    generic, export_warnings = exports.generic_csv(rows, maximum, part_names)
    written.append(_write(out / GENERIC_EXPORT, generic))
    if canvas_assignment:
        text, canvas_warnings = exports.canvas_csv(rows, maximum, canvas_assignment)
        written.append(_write(out / CANVAS_EXPORT, text))
        export_warnings += canvas_warnings
    exported = f"{GENERIC_EXPORT} and {CANVAS_EXPORT}" if canvas_assignment else GENERIC_EXPORT
    export_warnings += exports.points_possible_warnings(records, maximum, exported, course_rubric,
                                                        from_nbgrader=kind == sources.NBGRADER)
    warnings = list(dict.fromkeys(warnings + roster_warnings + export_warnings))
    title = f"Class report: {len(records)} results ({sources.KINDS[kind]})"
    written.insert(0, _write(out / REPORT, page.page(title, sections, warnings)))
    return written, warnings


def table_csv(t: tables.Table) -> str:
    buffer = io.StringIO()
    writer = results.SpreadsheetWriter(buffer)
    detail_columns = list(t.details)
    writer.writerow([*t.columns, *(f"{c} (names)" for c in detail_columns)])
    for i, row in enumerate(t.rows):
        writer.writerow([*row, *("; ".join(t.details[c][i]) for c in detail_columns)])
    return buffer.getvalue()


def _write(path: Path, text: str) -> Path:
    path.write_text(text)  # a report is rewritten whole by the next run: no need for the results' atomic write
    return path


def _summary_section(kind, summary, records, part_names, maximum) -> str:
    scores = [r.score for r in records if r.graded]
    html = page.table(summary)
    if kind == sources.NBGRADER:
        html += ('<p class="note">From an nbgrader gradebook export: per-student totals only (no parts, tests, '
                 'diagnoses, integrity or code), so this report shows the score distribution alone.</p>')
    if scores:
        html += page.figure(page.histogram(scores, "Total score", f"points (course maximum {maximum:g})",
                                           span=(0, maximum or max(scores))), "distribution of total scores")
    for p, values in tables.part_scores(records, part_names).items():
        if values:
            html += page.figure(page.histogram([s for _, s, _ in values], f"Part {p}", "points",
                                               span=(0, max(m for _, _, m in values))),
                                f"distribution of scores in part {p}")
    return html


def _similarity(kind, results, submissions, records, threshold, warnings) -> tuple:
    columns = ["student", "other student", "score", "share of student's code", "share of other's code"]
    folder = submissions or (Path(results) if kind == sources.GRADESCOPE else None)
    if folder is None:
        warnings.append("similarity not checked: --submissions was not given")
        t = tables.Table("similarity", "Similarity", columns, note="Not checked: the submissions were not given "
                         "(--submissions DIR, the folder the batch graded).")
        return t, page.table(t)
    code, problems = sources.submission_sources(folder)
    known = {k: r.name for r in records for k in r.keys}
    code = {known.get(name, name): text for name, text in code.items()}
    pairs, too_small = similarity.similar_pairs(code, threshold)
    note = (f"Solution code compared with copydetect (winnowing, as in MOSS), the stub text of assignment/mhsa.py "
            f"ignored; pairs where each shares at least {threshold:.0%} of its own code with the other. "
            f"Score = the smaller share. {len(code)} submissions read from {folder}.")
    if too_small:
        note += f" Too little own code to compare: {', '.join(too_small)}."
    if problems:
        note += f" Not readable: {'; '.join(problems)}."
    without = sorted({r.name for r in records} - set(code))
    if without:
        note += f" No source for: {', '.join(without)}."
    t = tables.Table("similarity", "Similarity", columns,
                     [[p.a, p.b, tables.number(p.score), tables.percent(p.share_a), tables.percent(p.share_b)]
                      for p in pairs], note=note)
    views = "".join(
        f'<details class="pair"><summary>{page.esc(p.a)} and {page.esc(p.b)}: side by side</summary>'
        f'<div class="side"><div><strong>{page.esc(p.a)}</strong><pre>{p.view_a}</pre></div>'
        f'<div><strong>{page.esc(p.b)}</strong><pre>{p.view_b}</pre></div></div></details>' for p in pairs)
    return t, page.table(t) + views


def _timing_section(timing: tables.Table) -> str:
    if not timing.rows:
        return '<p class="note">The timing part did not run for any submission (no CUDA when they were graded).</p>'
    ratios = [float(row[3]) for row in timing.rows]
    thresholds = sorted({float(row[4]) for row in timing.rows})
    fig = page.histogram(ratios, "Speed ratio against the reference", "your time / reference time",
                         [(x, f"threshold {x:g}") for x in thresholds])
    return page.figure(fig, "distribution of speed ratios") + page.table(timing)
