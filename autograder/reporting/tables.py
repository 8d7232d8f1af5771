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
from autograder.record.grade import Work
from autograder.reporting.sources import NOT_ATTEMPTED, WRITTEN_PART

HARDEST_PER_PART = 5
KNOWLEDGE = "knowledge"  # the knowledge check's part: a column of the Students table even while withheld
WITHHELD = "withheld"    # a part cell whose part is withheld until its deadline (results.LeftOut's reason)
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
    part_names = with_knowledge(part_names, [r for _, r in rows if r is not None])
    table = []
    for student, r in rows:
        identity = [student.name, student.id or student.sis_user_id or student.login] if student else ["", ""]
        submission = r.name if r else student.submission
        if r is None:
            grade = ["", "", "", "", *([""] * len(part_names)), "no submission", ""]
        else:
            parts = [part_cell(r, p, lambda info: number(info.score)) for p in part_names]
            grade = [number(r.score) if r.graded else "", number(r.max_score), results.left_out_cell(r.left_out),
                     percent(r.score / maximum) if r.graded and maximum else "", *parts, r.shown_status, r.isolation]
        table.append([*identity, submission, *grade] if roster else [submission, *grade])
    columns = ["score", "max_score", "left_out", f"percent of {maximum:g}" if maximum else "percent", *part_names,
               "status", "isolation"]
    return Table("students", "Students", ["student", "id", "submission", *columns] if roster else ["student", *columns],
                 table)


def with_knowledge(part_names, records) -> list:
    """The part columns: the graded parts, and the knowledge check wherever the results record it, even
    when it is withheld for everyone (the column then says so rather than vanish)."""
    if KNOWLEDGE in part_names or not any(KNOWLEDGE in r.parts for r in records):
        return list(part_names)
    return [*part_names, KNOWLEDGE]


def part_cell(record, part: str, shown) -> str:
    """A student's cell for `part`: `shown(PartRecord)` where it was graded, "withheld" where it is
    withheld until its deadline (never a score before then), else blank."""
    info = record.parts.get(part) if record.graded else None
    if info is None:
        return ""
    if info.graded:
        return shown(info)
    withheld = any(item.part == part and item.why.startswith(WITHHELD) for item in record.left_out)
    return WITHHELD if withheld else ""


def part_shares(records, part_names) -> Table:
    """Students by parts: each cell the share of the part's points the student earned (the page colours
    it), with each student's status, so that the untouched and the ones that did not compile stand out."""
    parts = with_knowledge(part_names, records)
    rows = [[r.name, *(part_cell(r, p, lambda info: percent(info.score / info.max_score) if info.max_score else "")
                       for p in parts), r.shown_status] for r in records]
    return Table("part-shares", "Students by part", ["student", *parts, "status"], rows,
                 note="Each cell: the share of the part's points the student earned (red: none, white: all). "
                      "Blank: no grade for that part; withheld: not scored until its deadline.")


def summary(records, maximum) -> Table:
    """The class in numbers; with what the course maximum leaves out of the rubric, and the graded
    results whose maximum is another (the mean and median are then of points out of different maxima)."""
    graded = [r for r in records if r.graded]
    scores = [r.score for r in graded]
    rows = [["results", str(len(records))], ["graded", str(len(scores))]]
    if any(r.work for r in records):  # results that say what was graded (a gradebook export never does)
        rows += [[f"graded: {work}", str(sum(r.work == work for r in graded))] for work in NOT_ATTEMPTED]
    rows += [["without a grade", str(len(records) - len(scores))], ["course maximum", number(maximum)]]
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
    """Per part, the test functions failed most often (parametrized cases counted together), over the
    attempted work only: the untouched stubs and code that did not compile fail every test, which says
    nothing about how hard a test is."""
    runs = {}
    for r in records:
        if not r.attempted:
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
                 note=f"Over the {sum(r.attempted for r in records)} attempted submissions{_left_out_work(records)}. "
                      f"Up to {HARDEST_PER_PART} per part; a parametrized test counts each case as one run. "
                      "The description is the test's docstring, else its name in words.")


def _left_out_work(records) -> str:
    """" (left out: 2 untouched, 1 did not compile)", or "" when every graded submission was attempted."""
    counts = {work: sum(r.graded and r.work == work for r in records) for work in NOT_ATTEMPTED}
    return f" (left out: {', '.join(f'{n} {work}' for work, n in counts.items())})" if any(counts.values()) else ""


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


def diagnosed(records) -> list:
    """[(diagnosis, [students], [parts])], each diagnosis the grader matched in any part, the most
    students first."""
    who, where = {}, {}
    for r in records:
        for part, info in r.parts.items():
            diagnosis = info.diagnosis.strip()
            if diagnosis:
                who.setdefault(diagnosis, set()).add(r.name)
                where.setdefault(diagnosis, set()).add(part)
    return [(d, sorted(who[d]), sorted(where[d])) for d in sorted(who, key=lambda d: (-len(who[d]), d))]


def misconceptions(records) -> Table:
    """Each diagnosis, how many students it matched (in any part), in which parts, and who."""
    found = diagnosed(records)
    rows = [[d, str(len(who)), ", ".join(parts)] for d, who, parts in found]
    return Table("misconceptions", "Misconceptions", ["likely misconception", "students", "parts"], rows,
                 details={"students": [who for _, who, _ in found]})


# The needs-help list's words for work that was not attempted (sources.NOT_ATTEMPTED)
WORK_HELP = {Work.UNTOUCHED.value: "untouched: every function still the stub",
             Work.DID_NOT_COMPILE.value: "did not compile: nothing of the code could run, so every test failed"}


def needs_help(records) -> Table:
    """Who needs help, with what: each diagnosed misconception with the students showing it, then the
    students whose graded work was the untouched stubs or did not compile; names written out."""
    rows = [[f"{results.LIKELY_MISTAKE}{d}", ", ".join(parts), str(len(who)), ", ".join(who)]
            for d, who, parts in diagnosed(records)]
    for work, what in WORK_HELP.items():
        names = sorted(r.name for r in records if r.status in ("graded", "held") and r.work == work)
        if names:
            rows.append([what, "every part", str(len(names)), ", ".join(names)])
    return Table("needs-help", "Who needs help", ["with what", "parts", "students", "who"], rows,
                 note="Each likely mistake the grader diagnosed (a student may show several), then the work that "
                      "was not attempted.")


HELD_STATES = {"release": "released after review", "confirm": "confirmed after review"}


def integrity(records) -> Table:
    rows = []
    for r in records:
        rows += [[r.name, "forbidden API", f] for f in r.forbidden]
        rows += [[r.name, "notebook check", f] for f in r.flags]  # evidence, in the words of kernel_evidence
        if r.held is not None:
            rows += [[r.name, HELD_STATES.get(r.held.decision, "held for review"), reason] for reason in r.held.reasons]
        rows += [[r.name, "score set by hand", results.hand_score_text(name, part)]
                 for name, part in r.parts.items() if part.set_by_hand]
        rows += [[r.name, "written, scored by hand", note] for note in r.parts[WRITTEN_PART].notes] \
            if WRITTEN_PART in r.parts else []
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
