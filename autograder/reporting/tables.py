"""The numbers of the class report, as Tables that become its HTML tables and CSV files.

Each Table becomes one HTML table and one CSV file with the same cells, so the page and the CSV
cannot disagree."""
import ast
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field

from autograder.core.paths import SUITE_DIRS
from autograder.record import results

HARDEST_PER_PART = 5
TEST_NAME = re.compile(r"^(?P<part>[\w-]+) \((?P<suite>\w+)\): (?P<module>\w+)::(?P<test>[^\[]+)(?P<params>\[.*\])?$")


@dataclass
class Table:
    id: str          # the HTML id and the CSV file name (report-<id>.csv)
    title: str
    columns: list
    rows: list = field(default_factory=list)   # lists of strings, exactly as shown and written
    note: str = ""
    details: dict = field(default_factory=dict)  # column -> per-row lists shown behind <details> (names)


def number(x) -> str:
    return "" if x is None else f"{x:.2f}"


def percent(x) -> str:
    return f"{100 * x:.1f}%"


def course_maximum(records) -> tuple:
    """(the maximum the course graded with: the most common one among graded records, [outliers]).
    Without a graded record, the most common maximum of any record (or None)."""
    maxima = Counter(r.max_score for r in records if r.graded and r.max_score)
    if not maxima:
        anyone = Counter(r.max_score for r in records if r.max_score)
        return (anyone.most_common(1)[0][0] if anyone else None), []
    best = max(maxima.items(), key=lambda kv: (kv[1], kv[0]))[0]
    return best, [r for r in records if r.graded and r.max_score and r.max_score != best]


def students(rows, part_names, maximum, roster: bool) -> Table:
    """One row per (student, record) of the roster join. With a roster each row names the student as
    the roster does (name and LMS id) beside the submission it was matched to: a student on the roster
    without a submission has a row with no score, a submission nobody on the roster claims has no name."""
    table = []
    for student, r in rows:
        identity = [student.name, student.id or student.sis_user_id or student.login] if student else ["", ""]
        submission = r.name if r else student.submission
        if r is None:
            grade = ["", "", "", "", *([""] * len(part_names)), "no submission", ""]
        else:
            parts = [number(r.parts[p].score) if p in r.parts and r.parts[p].graded else "" for p in part_names]
            grade = [number(r.score) if r.graded else "", number(r.max_score), results.left_out_cell(r.left_out),
                     percent(r.score / maximum) if r.graded and maximum else "", *parts, r.status, r.isolation]
        table.append([*identity, submission, *grade] if roster else [submission, *grade])
    columns = ["score", "max_score", "left_out", f"percent of {maximum:g}" if maximum else "percent", *part_names,
               "status", "isolation"]
    return Table("students", "Students", ["student", "id", "submission", *columns] if roster else ["student", *columns],
                 table)


def summary(records, maximum) -> Table:
    """The class in numbers; with what the course maximum leaves out of the rubric, and the graded
    results whose maximum is another (the mean and median are then of points out of different maxima)."""
    graded = [r for r in records if r.graded]
    scores = [r.score for r in graded]
    rows = [["results", str(len(records))], ["graded", str(len(scores))],
            ["without a grade", str(len(records) - len(scores))],
            ["course maximum", number(maximum)]]
    leaves_out = results.left_out_counts([results.left_out_cell(r.left_out) for r in graded if r.max_score == maximum])
    if leaves_out:
        rows.append(["left out of the course maximum", leaves_out])
    others = Counter(r.max_score for r in graded if r.max_score and r.max_score != maximum)  # course_maximum's outliers
    if others:
        rows.append(["graded out of another maximum",
                     ", ".join(f"{number(m)} for {n}" for m, n in others.most_common())])
    if scores:
        rows += [["mean", number(statistics.mean(scores))], ["median", number(statistics.median(scores))],
                 ["full marks", percent(sum(s >= maximum - 1e-6 for s in scores) / len(scores)) if maximum else ""]]
    note = ("Not every graded result has the course maximum: the mean and median are of points out of different "
            "maxima, and full marks are the course maximum's.") if others else ""
    return Table("summary", "Summary", ["measure", "value"], rows, note=note)


def part_scores(records, part_names) -> dict:
    """part -> [(student, score, max_score)] over the records where the part was graded."""
    return {p: [(r.name, r.parts[p].score, r.parts[p].max_score)
                for r in records if r.graded and p in r.parts and r.parts[p].graded] for p in part_names}


def parts(records, part_names) -> Table:
    rows = []
    for p, scores in part_scores(records, part_names).items():
        if not scores:
            continue
        values = [s for _, s, _ in scores]
        full = sum(s >= m - 1e-6 for _, s, m in scores)
        rows.append([p, str(len(scores)), number(max(m for _, _, m in scores)), number(statistics.mean(values)),
                     number(statistics.median(values)), percent(full / len(scores))])
    return Table("parts", "Parts", ["part", "graded", "max_score", "mean", "median", "full marks"], rows)


def hardest_tests(records, descriptions) -> Table:
    """Per part, the test functions failed most often (parametrized cases counted together)."""
    runs = {}
    for r in records:
        if not r.graded:
            continue
        for t in r.tests:
            if t.status not in ("passed", "failed"):
                continue  # not-graded rows (timing without CUDA, knowledge)
            m = TEST_NAME.match(t.name)
            if not m:
                continue
            key = (m["part"], m["suite"], m["module"], m["test"])
            runs.setdefault(key, []).append(t.status == "failed")
    by_part = {}
    for key, failed in runs.items():
        if any(failed):
            by_part.setdefault(key[0], []).append((sum(failed) / len(failed), sum(failed), len(failed), key))
    rows = []
    for part in sorted(by_part):
        for rate, failed, total, (_, suite, module, test) in sorted(by_part[part], key=lambda x: (-x[0], x[3]))[
                :HARDEST_PER_PART]:
            rows.append([part, suite, f"{module}::{test}", percent(rate), f"{failed}/{total}",
                         descriptions.get((suite, module, test)) or describe_name(test)])
    return Table("hardest-tests", "Hardest tests", ["part", "suite", "test", "failure rate", "failed runs",
                                                    "what it checks"], rows,
                 note=f"Up to {HARDEST_PER_PART} per part; a parametrized test counts each case as one run. "
                      "The description is the test's docstring, else its name in words.")


def describe_name(test: str) -> str:
    """`TestX::test_keeps_dtype` -> "keeps dtype" (for tests without a docstring)."""
    return test.split("::")[-1].removeprefix("test_").replace("_", " ")


def test_descriptions(suite_dirs=SUITE_DIRS) -> dict:
    """(suite, module, test) -> the first line of the test's docstring, for tests that have one."""
    found = {}
    for suite, folder in suite_dirs.items():
        for path in sorted(folder.glob("test_*.py")):
            module = path.stem.removeprefix("test_")
            try:
                tree = ast.parse(path.read_text())
            except (OSError, SyntaxError):
                continue
            for node, qualified in _test_functions(tree):
                doc = ast.get_docstring(node)
                if doc:
                    found[(suite, module, qualified)] = " ".join(doc.strip().split("\n\n")[0].split())
    return found


def _test_functions(tree):
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            yield node, node.name
        elif isinstance(node, ast.ClassDef):
            for inner in node.body:
                if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)) and inner.name.startswith("test"):
                    yield inner, f"{node.name}::{inner.name}"


def misconceptions(records) -> Table:
    """Each diagnosis, how many students it matched (in any part), in which parts, and who."""
    who, where = {}, {}
    for r in records:
        for part, info in r.parts.items():
            diagnosis = info.diagnosis.strip()
            if diagnosis:
                who.setdefault(diagnosis, set()).add(r.name)
                where.setdefault(diagnosis, set()).add(part)
    ordered = sorted(who, key=lambda d: (-len(who[d]), d))
    rows = [[d, str(len(who[d])), ", ".join(sorted(where[d]))] for d in ordered]
    return Table("misconceptions", "Misconceptions", ["likely misconception", "students", "parts"], rows,
                 details={"students": [sorted(who[d]) for d in ordered]})


HELD_STATES = {"release": "released after review", "confirm": "confirmed after review"}


def integrity(records) -> Table:
    rows = []
    for r in records:
        rows += [[r.name, "forbidden API", f] for f in r.forbidden]
        rows += [[r.name, "notebook check", f] for f in r.flags]  # evidence, in the words of kernel_evidence
        if r.held is not None:
            rows += [[r.name, HELD_STATES.get(r.held.decision, "held for review"), reason] for reason in r.held.reasons]
        if r.status not in ("graded", "no submission", "held"):
            rows.append([r.name, r.status, _first_line(r)])
        if r.isolation and r.isolation != "sandbox":
            rows.append([r.name, "isolation", f"graded at the '{r.isolation}' level, not 'sandbox'"])
    levels = Counter(r.isolation for r in records if r.isolation)
    note = "Isolation levels used: " + (", ".join(f"{level} ({n})" for level, n in sorted(levels.items()))
                                        or "not recorded")
    return Table("integrity", "Integrity", ["student", "kind", "detail"], rows, note=note)


def _first_line(record) -> str:
    return record.output.strip().splitlines()[0] if record.output.strip() else "no grade"


def timing(records) -> Table:
    """The speed ratios parsed from each timing row; the students whose text held none are named."""
    rows, unreadable = [], []
    for r in records:
        row = next((t for t in r.tests if t.tags[:1] == ("timing",) and t.status), None)
        if row is None:
            continue
        text = row.output
        cases = parse_timing(text)
        if not cases:
            unreadable.append(r.name)
        rows += [[r.name, timing_device(text), c["case"], number(c["ratio"]), number(c["threshold"]), c["verdict"]]
                 for c in cases]
    note = ("ratio = the student's time / the reference's (median over interleaved pairs); a case passes when "
            "its interval is within the threshold.")
    if unreadable:
        note += f" No ratio could be read for: {', '.join(unreadable)} (shown in their results)."
    return Table("timing", "Timing", ["student", "device", "case", "ratio", "threshold", "verdict"], rows, note=note)


def timing_device(text: str) -> str:
    """Where the session ran, from its first line: a CPU verdict must never pass for a GPU one."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    if "on the CPU" in first:
        return "CPU"
    return "GPU" if "CUDA" in first or "GPU" in first else "?"


def parse_timing(text: str) -> list:
    """The timed cases of gpu_checks' report (a header row naming 'ratio' and 'threshold', then rows
    with cells two spaces apart). Rows that do not parse (cases not run) are left out, never guessed."""
    lines = text.splitlines()
    header_at = next((i for i, line in enumerate(lines) if line.startswith("case") and " ratio " in line
                      and " threshold " in line), None)
    if header_at is None:
        return []
    header = re.split(r"\s{2,}", lines[header_at].strip())
    cases = []
    for line in lines[header_at + 1:]:
        if not line.strip():
            break
        cells = dict(zip(header, re.split(r"\s{2,}", line.strip())))
        try:
            ratio, threshold = float(cells["ratio"]), float(cells["threshold"])
        except (KeyError, ValueError):
            continue
        cases.append({"case": cells["case"], "ratio": ratio, "threshold": threshold,
                      "verdict": cells.get("verdict", "")})
    return cases
