"""The class report and the LMS exports, run as an instructor runs them: `python -m autograder report`."""
import csv
import html
import json
import re
import shutil
import statistics
import subprocess
import sys
from datetime import datetime, timezone

import pytest

from autograder.authoring import release
from autograder.core import rubric as rubric_file
from autograder.core.paths import ASSIGNMENT_DIR, REPO
from autograder.intake import knowledge
from autograder.record import results
from autograder.reporting import exports, sources, tables
from tests.class_report_fixtures import (CODE_PARTS, DATA, FLAG, FORBIDDEN_NOTE, NO_SCALE, NOT_COMPILING,
                                        TIMING_CASES, Tables, assert_page_matches_csv, by_first, make_class,
                                        notebook, read_csv, report, solution_styles)

ASSIGNMENT = "MHSA (4711)"
RUBRIC = rubric_file.load()
# gpu_checks' text for the reference timed on the CPU (`grade reference/mhsa.py --timing-device cpu`), two cases kept
REAL_CPU_TIMING = """\
Timing against the reference on the CPU (not a GPU: CPU-sized configs from the rubric's [parts.timing.cpu]) \
(cpu, torch 2.13.0+cpu, session seed 759670159): passed
ratio = your time / the reference's, median over interleaved pairs; a case passes when its interval is within the \
threshold.
TFLOP/s: median per call, matmul flops only, by the device clock (the host clock).

case                         pairs  ratio  interval      threshold  verdict  TFLOP/s yours  reference  sdpa
launch float32 fwd           20     1.01   [0.90, 1.07]  2          passed   0.0042         0.00427    -
throughput bfloat16 fwd+bwd  20     1.02   [0.99, 1.11]  2          passed   0.0175         0.0178     -
"""


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    root = tmp_path_factory.mktemp("class")
    facts = make_class(root)
    roster = root / "roster.csv"
    with open(roster, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["submission", "name", "id", "sis_user_id", "login", "section"])
        for i, name in enumerate(facts.names[:-1]):  # the last student is missing from the roster
            writer.writerow([f"{name}.py", f"Student {i + 1}", 1000 + i, f"S{i:04d}", f"{name}@uni.edu", "A"])
        writer.writerow(["student31", "Absent Student", 2000, "S9999", "absent@uni.edu", "B"])
    out = root / "out"
    run = report(facts.results, "--submissions", facts.submissions, "--roster", roster, "--format", "canvas",
                 "--assignment", ASSIGNMENT, "--out", out)
    assert run.returncode == 0, run.stdout + run.stderr
    return facts, out, run.stdout, Tables((out / "report.html").read_text())


def test_page_shows_the_same_numbers_as_the_csv(generated):
    _, out, _, page = generated
    assert assert_page_matches_csv(page, out) == 10
    assert set(page.tables) == {"summary", "parts", "needs-help", "part-shares", "hardest-tests", "misconceptions",
                                "integrity", "similarity", "timing", "students"}


def test_summary_and_parts_match_the_results_files(generated):
    facts, out, _, _ = generated
    data = {n: json.loads((facts.results / f"{n}.json").read_text()) for n in facts.names}
    graded = {n: d for n, d in data.items() if n != facts.timed_out}
    summary = {row[0]: row[1] for row in read_csv(out / "report-summary.csv")[1:]}
    assert summary["results"] == "30" and summary["graded"] == "29" and summary["without a grade"] == "1"
    assert summary["graded: untouched"] == "1" and summary["graded: did not compile"] == "1"
    assert summary["course maximum"] == "95.00"
    assert summary["mean"] == f"{statistics.mean(d['score'] for d in graded.values()):.2f}"
    assert summary["median"] == f"{statistics.median(d['score'] for d in graded.values()):.2f}"
    parts = by_first(read_csv(out / "report-parts.csv"))
    sdpa = [d["extra_data"]["parts"]["sdpa"]["score"] for d in graded.values()]
    assert parts["sdpa"][1:] == ["29", "20.00", f"{statistics.mean(sdpa):.2f}", f"{statistics.median(sdpa):.2f}",
                                 f"{100 * sum(s == 20 for s in sdpa) / 29:.1f}%"]
    assert parts["knowledge"][1] == "1"  # graded for one student only


def test_misconceptions_are_counted_sorted_and_name_their_students(generated):
    facts, out, _, page = generated
    rows = read_csv(out / "report-misconceptions.csv")
    expected = sorted(facts.misconceptions.items(), key=lambda kv: -len(kv[1]))
    assert [(r[0], int(r[1]), r[3].split("; ")) for r in rows[1:]] == [(d, len(w), w) for d, w in expected]
    assert rows[1][2] == "block, mhsa, sdpa" and rows[1][0] == NO_SCALE
    for _, who in expected:  # the names sit behind a <details> element, in the order of the table
        assert any(detail.replace("who", "", 1).strip() == ", ".join(who) for detail in page.details)


def test_integrity_names_the_forbidden_api_the_tampering_the_timeout_and_the_isolation(generated):
    facts, out, _, page = generated
    rows = [tuple(r) for r in read_csv(out / "report-integrity.csv")[1:]]
    assert (facts.forbidden, "forbidden API", FORBIDDEN_NOTE) in rows
    assert (facts.tampered, "notebook check", FLAG) in rows
    assert any(r[:2] == (facts.timed_out, "timeout") and "300 s" in r[2] for r in rows)
    assert (facts.process_level, "isolation", "graded at the 'process' level, not 'sandbox'") in rows
    assert len(rows) == 4  # nobody else: a clean student is not flagged
    assert "process (1), sandbox (29)" in (out / "report.html").read_text()


def test_similarity_finds_the_near_identical_pair_and_nothing_else(generated):
    facts, out, _, _ = generated
    rows = read_csv(out / "report-similarity.csv")[1:]
    assert [tuple(r[:2]) for r in rows] == [facts.near_identical]
    assert float(rows[0][2]) >= 0.95
    html = (out / "report.html").read_text()
    assert "10 submissions read from" in html  # the tampered notebook's code too, through the notebook extraction
    assert f"Too little own code to compare: {facts.untouched}, {facts.did_not_compile}." in html
    assert facts.tampered not in html.split("No source for:")[1].split("</p>")[0]
    assert f"{facts.near_identical[0]} and {facts.near_identical[1]}: side by side" in html
    columns = re.findall(r"<pre>(.*?)</pre>", html, re.S)
    assert len(columns) == 2
    for column in columns:  # the shared code is highlighted in both: nearly all of it
        marked = "".join(re.findall(r"<mark>(.*?)</mark>", column, re.S))
        assert len(marked) > 0.8 * len(re.sub(r"<[^>]+>", "", column))


def test_who_needs_help_names_each_misconception_s_students_and_the_work_not_attempted(generated):
    facts, out, _, page = generated
    rows = read_csv(out / "report-needs-help.csv")
    assert rows[0] == ["with what", "parts", "students", "who"]
    expected = sorted(facts.misconceptions.items(), key=lambda kv: -len(kv[1]))
    assert [(r[0], int(r[2]), r[3]) for r in rows[1:4]] == [
        (f"{results.LIKELY_MISTAKE}{d}", len(who), ", ".join(who)) for d, who in expected]
    assert rows[1][1] == "block, mhsa, sdpa"
    assert rows[4:] == [["untouched: every function still the stub", "every part", "1", facts.untouched],
                        ["did not compile: nothing of the code could run, so every test failed", "every part", "1",
                         facts.did_not_compile]]
    assert page.tables["needs-help"] == rows  # the names written out on the page, not hidden


def test_students_by_part_shows_each_share_and_the_statuses(generated):
    facts, out, _, page = generated
    header, *rows = read_csv(out / "report-part-shares.csv")
    assert header == ["student", *CODE_PARTS, "timing", "knowledge", "status"]
    shares = {row[0]: dict(zip(header, row)) for row in rows}
    assert len(shares) == 30 and page.tables["part-shares"] == [header, *rows]
    data = json.loads((facts.results / "student01.json").read_text())["extra_data"]["parts"]
    assert shares["student01"]["sdpa"] == f"{100 * data['sdpa']['score'] / data['sdpa']['max_score']:.1f}%"
    assert shares[facts.names[-1]]["block"] == "100.0%" and shares[facts.names[-1]]["status"] == "graded"
    for student, status in ((facts.untouched, "untouched"), (facts.did_not_compile, "did not compile")):
        assert [shares[student][p] for p in CODE_PARTS] == ["0.0%"] * 5 and shares[student]["status"] == status
    assert shares[facts.other_maximum]["knowledge"] == "100.0%" and shares["student01"]["knowledge"] == ""
    assert set(shares[facts.timed_out][p] for p in CODE_PARTS) == {""}
    html = (out / "report.html").read_text()  # a heatmap: none of the points is the darkest red, all of them white
    assert '<td class="num" style="background: hsl(4, 75%, 55%)">0.0%</td>' in html
    assert '<td class="num" style="background: hsl(4, 75%, 100%)">100.0%</td>' in html
    students = by_first(read_csv(out / "report-students.csv"))
    assert students["Student 21"][-2] == "untouched" and students["Student 22"][-2] == "did not compile"


def test_hardest_tests_count_attempted_work_only(generated):
    facts, out, _, _ = generated
    rows = read_csv(out / "report-hardest-tests.csv")[1:]
    attempted = 29 - 2  # graded, less the untouched stubs and the file that did not compile
    assert rows and all(int(row[4].split("/")[1]) % attempted == 0 for row in rows)
    html = (out / "report.html").read_text()
    assert f"Over the {attempted} attempted submissions (left out: 1 untouched, 1 did not compile)." in html


def test_a_real_batch_tells_untouched_and_not_compiling_work_from_an_attempt_that_scores_0(tmp_path):
    """`grade --batch` records each submission's work in its results; the report counts the hardest
    tests over the attempts (one that scores 0, one whose syntax error in one function the grade left
    out) and leaves the untouched stubs (a .py and the notebook) and the file that does not compile
    out, and lists them as needing help."""
    submissions = tmp_path / "submissions"
    submissions.mkdir()
    stub = (ASSIGNMENT_DIR / "mhsa.py").read_text()
    (submissions / "untouched.py").write_text(stub)
    # a stub whose parameters the student renamed, no code written: untouched all the same, it compiles
    (submissions / "renamed.py").write_text(stub.replace("def split_heads(x, num_heads):", "def split_heads(t, heads):"))
    shutil.copy(ASSIGNMENT_DIR / "mhsa.ipynb", submissions / "untouched_notebook.ipynb")
    (submissions / "broken.py").write_text(NOT_COMPILING)
    (submissions / "zero.py").write_text(re.sub(r"raise NotImplementedError\(.*\)", "return 0", stub))
    reference = (REPO / "reference" / "mhsa.py").read_text()
    (submissions / "partly.py").write_text(reference.replace("def split_heads(x, num_heads):", "def split_heads(x, num_heads)"))
    out = tmp_path / "grades"
    run = subprocess.run([sys.executable, "-m", "autograder", "grade", str(submissions), "--batch", "--out", str(out),
                          "--jobs", "4"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    found = {name: results.load(out / f"{name}.json")
             for name in ("untouched", "untouched_notebook", "renamed", "broken", "zero", "partly")}
    assert {name: (r.status.value, r.work.value, r.score) for name, r in found.items() if name != "partly"} == {
        "untouched": ("graded", "untouched", 0.0), "untouched_notebook": ("graded", "untouched", 0.0),
        "renamed": ("graded", "untouched", 0.0),
        "broken": ("graded", "did not compile", 0.0), "zero": ("graded", "attempted", 0.0)}
    assert found["partly"].work.value == "attempted" and found["partly"].score > 0
    assert "does not compile" in found["partly"].notes[0]

    run = report(out, "--submissions", submissions, "--out", tmp_path / "report")
    assert run.returncode == 0, run.stdout + run.stderr
    hardest = read_csv(tmp_path / "report" / "report-hardest-tests.csv")[1:]
    # each test ran once per attempt (a parametrized one once per case): twice, never five times
    assert hardest and all(int(row[4].split("/")[1]) % 2 == 0 for row in hardest)
    assert any(row[4] == "1/2" for row in hardest)  # zero.py fails what partly.py passes: both counted
    html = (tmp_path / "report" / "report.html").read_text()
    assert "Over the 2 attempted submissions (left out: 3 untouched, 1 did not compile)." in html
    students = by_first(read_csv(tmp_path / "report" / "report-students.csv"))
    assert {name: row[-2] for name, row in students.items()} == {
        "broken": "did not compile", "partly": "graded", "renamed": "untouched", "untouched": "untouched",
        "untouched_notebook": "untouched", "zero": "graded"}
    needs_help = by_first(read_csv(tmp_path / "report" / "report-needs-help.csv"))
    assert needs_help["untouched: every function still the stub"][3] == "renamed, untouched, untouched_notebook"
    assert needs_help["did not compile: nothing of the code could run, so every test failed"][3] == "broken"


def test_similarity_reads_nbgrader_s_submitted_notebooks(tmp_path):
    """nbgrader's layout, submitted/ID/mhsa/mhsa.ipynb: the solution code is read from each notebook, and
    two identical notebooks are found, whether --submissions names the course folder or its submitted/."""
    styles = solution_styles()
    for student, source in (("ada", styles["einsum"]), ("alan", styles["einsum"]), ("grace", styles["head_loop"])):
        folder = tmp_path / "course" / "submitted" / student / "mhsa"
        folder.mkdir(parents=True)
        (folder / "mhsa.ipynb").write_text(json.dumps(notebook(source)))
        (folder / "timestamp.txt").write_text("2026-11-01 10:00:00")
    gradebook = tmp_path / "grades.csv"
    gradebook.write_text("assignment,duedate,timestamp,student_id,last_name,first_name,email,raw_score,"
                         "late_submission_penalty,score,max_score\n"
                         + "".join(f"mhsa,,2026-11-01 10:00:00,{s},{s},{s},,90.0,0.0,90.0,95.0\n"
                                   for s in ("ada", "alan", "grace")))
    for given in ("course", "course/submitted"):
        out = tmp_path / given.replace("/", "-")
        run = report(gradebook, "--submissions", tmp_path / given, "--out", out)
        assert run.returncode == 0, run.stdout + run.stderr
        rows = read_csv(out / "report-similarity.csv")[1:]
        assert [r[:3] for r in rows] == [["ada", "alan", "1.00"]], given
        html = (out / "report.html").read_text()
        assert "3 submissions read from" in html and "Not readable" not in html and "No source for" not in html
    run = report(gradebook, "--out", tmp_path / "no-code")  # without --submissions: totals only, as before
    assert run.returncode == 0 and not (tmp_path / "no-code" / "report-similarity.csv").exists()


def test_similarity_ignores_the_stub_text():
    stub = (REPO / "assignment" / "mhsa.py").read_text()
    from autograder.reporting import similarity

    pairs, too_small = similarity.similar_pairs({"a": stub, "b": stub + "\n# nothing written\n"})
    assert pairs == [] and too_small == ["a", "b"]


def test_timing_ratios_are_read_from_the_timing_rows(generated):
    facts, out, _, _ = generated
    rows = read_csv(out / "report-timing.csv")[1:]
    got = {}
    for student, device, case, ratio, threshold, verdict in rows:
        got.setdefault(student, []).append(float(ratio))
        assert device == "GPU"
        assert threshold == "2.00" and verdict == ("passed" if float(ratio) <= 2 else "failed")
        assert case in TIMING_CASES
    assert got == facts.ratios
    assert f"No ratio could be read for: {facts.unreadable_timing}" in (out / "report.html").read_text()


def test_parse_timing_is_conservative():
    text = ("case  pairs  ratio  interval      threshold  verdict\n"
            "tiny float32 fwd  20  1.50  [1.40, 1.60]  2  passed\n"
            "tiny bfloat16 fwd  -  -  -  -  not run\n")
    assert tables.parse_timing(text) == [{"case": "tiny float32 fwd", "ratio": 1.5, "threshold": 2.0,
                                          "verdict": "passed"}]
    assert tables.parse_timing("CUDA timing: failed. your code could not be imported") == []
    assert [(c["case"], c["ratio"]) for c in tables.parse_timing(REAL_CPU_TIMING)] == [
        ("launch float32 fwd", 1.01), ("throughput bfloat16 fwd+bwd", 1.02)]
    assert tables.timing_device(REAL_CPU_TIMING) == "CPU"
    assert tables.parse_timing("ratio 1.5 threshold 2") == []


def test_hardest_tests_carry_the_docstring_of_the_test():
    descriptions = tables.test_descriptions()
    assert descriptions[("hidden", "block", "test_defaults_match_torch")].startswith(
        "TransformerBlock(d_model, num_heads, d_ff) is nn.TransformerEncoderLayer's default layout")
    record = sources.from_results(results.Results.of(json.loads((DATA / "buggy_no_scale.json").read_text())), "x",
                                  RUBRIC)
    rows = tables.hardest_tests([record], descriptions).rows
    described = {row[2]: row[5] for row in rows}
    assert described["block::test_defaults_match_torch"] == descriptions[("hidden", "block", "test_defaults_match_torch")]
    assert described["mhsa::test_eval_ignores_dropout"] == "eval ignores dropout"  # no docstring: its name in words
    assert all(row[3] == "100.0%" for row in rows)


def test_canvas_csv_has_canvas_columns_and_points_possible_row(generated):
    facts, out, stdout, _ = generated
    rows = read_csv(out / "canvas.csv")
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", ASSIGNMENT]
    assert rows[1] == ["Points Possible", "", "", "", "", "95"]
    students = {r[0]: r for r in rows[2:]}
    assert len(students) == 30  # the roster: 29 with a submission, one without
    results = {n: json.loads((facts.results / f"{n}.json").read_text()) for n in facts.names}
    assert students["Student 1"] == ["Student 1", "1000", "S0000", "student01@uni.edu", "A",
                                     f"{results['student01']['score']:.2f}"]
    assert students["Absent Student"][5] == ""  # blank, never a silent 0
    timed_out = facts.names.index(facts.timed_out)
    assert students[f"Student {timed_out + 1}"][5] == ""
    assert "Absent Student (student31) is on the roster but has no submission: left blank, not 0" in stdout
    assert f"Student {timed_out + 1} ({facts.timed_out}): no grade (timeout): left blank, not 0" in stdout
    assert f"{facts.names[-1]}: graded but not on the roster" in stdout


def test_generic_export_uses_the_course_maximum_for_everyone(generated):
    facts, out, stdout, _ = generated
    rows = read_csv(out / "grades-export.csv")
    assert rows[0][:9] == ["id", "sis_user_id", "login", "name", "section", "submission", "score", "max", "percentage"]
    assert {r[7] for r in rows[1:]} == {"95"}
    other = next(r for r in rows if r[5] == facts.other_maximum)
    assert other[8] == f"{100 * float(other[6]) / 95:.1f}"
    assert f"another maximum than the course's 95: {facts.other_maximum} (100, leaving out nothing)" in stdout
    assert next(r for r in rows if r[5] == "student31")[6] == ""
    assert next(r for r in rows if r[5] == facts.names[-1])[:5] == ["", "", "", "", ""]  # not on the roster


def test_students_table_names_students_as_the_roster_does(generated):
    facts, out, _, page = generated
    rows = read_csv(out / "report-students.csv")
    assert rows[0][:5] == ["student", "id", "submission", "score", "max_score"]
    students = by_first(rows)
    results = json.loads((facts.results / "student01.json").read_text())
    assert students["Student 1"][:4] == ["Student 1", "1000", "student01", f"{results['score']:.2f}"]
    assert students["Absent Student"][1:4] == ["2000", "student31", ""]
    assert students["Absent Student"][-2:] == ["no submission", ""]
    unclaimed = next(r for r in rows if r[2] == facts.names[-1])
    assert unclaimed[:2] == ["", ""] and unclaimed[3] != ""  # graded, but nobody on the roster claims it
    assert len(rows) == 1 + 31 and page.tables["students"] == rows


def test_a_non_submitter_in_a_canvas_export_is_warned_about_and_left_blank(tmp_path):
    """A Canvas gradebook export with a `submission` column added: Canvas's "Points Possible" row is
    not a student; a student whose submission cell is blank (handed in nothing) keeps a Canvas row with
    a blank score, is warned about, and is in the Students table under the roster's name."""
    roster = tmp_path / "roster.csv"
    roster.write_text("Student,ID,SIS User ID,SIS Login ID,Section,submission\n"
                      "    Points Possible,,,,,\n"
                      "\"Lovelace, Ada\",1,111,ada,A,reference_copy.py\n"
                      "\"Hopper, Grace\",3,333,grace,B,\n"
                      "\"Turing, Alan\",2,222,alan,A,buggy_no_scale\n"
                      ",,,,,\n")
    run = report(DATA, "--roster", roster, "--format", "canvas", "--assignment", ASSIGNMENT, "--out", tmp_path / "out")
    assert run.returncode == 0, run.stdout + run.stderr
    warning = "Hopper, Grace (blank submission) is on the roster but has no submission: left blank, not 0"
    assert warning in run.stdout
    assert warning in html.unescape((tmp_path / "out" / "report.html").read_text())  # the page's Warnings box
    canvas = read_csv(tmp_path / "out" / "canvas.csv")
    assert canvas[1] == ["Points Possible", "", "", "", "", "90"]
    assert canvas[2:] == [["Lovelace, Ada", "1", "111", "ada", "A", "90.00"],
                          ["Hopper, Grace", "3", "333", "grace", "B", ""],
                          ["Turing, Alan", "2", "222", "alan", "A", "55.89"]]
    students = read_csv(tmp_path / "out" / "report-students.csv")
    assert [r[:4] for r in students[1:]] == [["Lovelace, Ada", "1", "reference_copy", "90.00"],
                                            ["Hopper, Grace", "3", "", ""],
                                            ["Turing, Alan", "2", "buggy_no_scale", "55.89"],
                                            ["", "", "stubs", "0.00"]]
    assert students[2][-2] == "no submission"
    assert "stubs: graded but not on the roster" in run.stdout


# The knowledge check withheld, as a grade before the rubric's due date writes it
WITHHELD_SETTINGS = {"due": datetime(2999, 1, 1, tzinfo=timezone.utc)}
WITHHELD_NOTE = knowledge.withheld_note(WITHHELD_SETTINGS)


def lms_class(folder, withheld: dict) -> dict:
    """Results of ada, alan (buggy) and grace, timed on a GPU; the knowledge check withheld for the
    students in `withheld`, scored for the others. Returns each student's results."""
    folder.mkdir()
    made = {}
    for name, example in (("ada", "reference_copy"), ("alan", "buggy_no_scale"), ("grace", "reference_copy")):
        data = json.loads((DATA / f"{example}.json").read_text())
        parts = data["extra_data"]["parts"]
        parts["timing"].update(score=5.0, max_score=5.0, graded=True, notes=[])
        parts["knowledge"].update(score=0.0 if name in withheld else 5.0, max_score=5.0, graded=name not in withheld,
                                  notes=[WITHHELD_NOTE] if name in withheld else [])
        if name in withheld:  # as results.part_record writes a part left out of the maximum
            parts["knowledge"]["left_out_because"] = knowledge.withheld_reason(WITHHELD_SETTINGS)
        data["score"] = round(sum(p["score"] for p in parts.values() if p["graded"]), 4)
        data["extra_data"]["max_score"] = sum(p["max_score"] for p in parts.values() if p["graded"])
        (folder / f"{name}.json").write_text(json.dumps(data))
        made[name] = data
    return made


def lms_report(tmp_path, withheld) -> tuple:
    """`report --roster --format canvas` of lms_class: (its stdout, its output folder)."""
    lms_class(tmp_path / "results", withheld)
    roster = tmp_path / "roster.csv"
    roster.write_text("submission,name,id\nada,Ada,1\nalan,Alan,2\ngrace,Grace,3\n")
    out = tmp_path / "out"
    run = report(tmp_path / "results", "--roster", roster, "--format", "canvas", "--assignment", ASSIGNMENT,
                 "--out", out)
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout, out


WRITTEN = [q for q in knowledge.questions() if not q.autograded]  # knowledge.toml's, graded by hand in nbgrader
# nbgrader's maximum: every part but timing (not in the notebook), and the written questions
NBGRADER_TOTAL = sum(p.points for name, p in RUBRIC.parts.items() if name != "timing") + sum(q.points for q in WRITTEN)


def nbgrader_difference(adds: str) -> str:
    """The warning comparing nbgrader's total with a batch's maximum, which leaves out `adds` too."""
    return (f"nbgrader's total for this course is {NBGRADER_TOTAL:g}: it adds {adds}the written questions "
            f"{', '.join(q.id for q in WRITTEN)} ({sum(q.points for q in WRITTEN):g} points, graded by hand in "
            f"nbgrader's formgrader only); it has no timing {RUBRIC.parts['timing'].points:g} (not in the notebook)")


def test_canvas_export_says_what_its_points_possible_leave_out_and_what_nbgrader_adds(tmp_path):
    """The instructor's case: Canvas out of 95 with the knowledge check withheld, nbgrader out of more.
    The export says what its points possible leave out and why, and what nbgrader's total holds
    instead; a student graded out of another maximum is named with what theirs leaves out."""
    stdout, out = lms_report(tmp_path, withheld={"ada", "alan"})
    assert read_csv(out / "canvas.csv")[1] == ["Points Possible", "", "", "", "", "95"]
    withheld = WITHHELD_NOTE.split(", so that")[0]
    assert withheld.startswith("withheld until 2999-01-01")
    left_out = f"knowledge 5 ({withheld})"
    assert (f"warning: the points possible in grades-export.csv and canvas.csv (95) leave out: {left_out} for all 2"
            in stdout.splitlines())
    assert f"warning: {nbgrader_difference('knowledge 5 and ')}" in stdout.splitlines()
    assert "another maximum than the course's 95: grace (100, leaving out nothing)" in stdout
    summary = {row[0]: row[1] for row in read_csv(out / "report-summary.csv")[1:]}
    assert summary["left out of the course maximum"] == f"{left_out} for all 2"
    assert summary["graded out of another maximum"] == "100.00 for 1", "not averaged in silently"
    header, *rows = read_csv(out / "report-students.csv")
    assert {row[0]: row[header.index("left_out")] for row in rows} == {"Ada": left_out, "Alan": left_out, "Grace": ""}
    page = html.unescape((out / "report.html").read_text())
    assert f"leave out: {left_out} for all 2" in page and "different maxima" in page


def test_an_export_with_nothing_left_out_says_nothing_of_it(tmp_path):
    """Everything graded: blank cells, no row and no warning about the maximum; nbgrader's total still
    differs (its written questions, no timing), and the warning says only that."""
    stdout, out = lms_report(tmp_path, withheld=set())
    assert "leave out" not in stdout and "another maximum" not in stdout
    assert f"warning: {nbgrader_difference('')}" in stdout.splitlines()
    summary = {row[0] for row in read_csv(out / "report-summary.csv")[1:]}
    assert not summary & {"left out of the course maximum", "graded out of another maximum"}
    header, *rows = read_csv(out / "report-students.csv")
    assert {row[header.index("left_out")] for row in rows} == {""}


def test_the_knowledge_column_shows_its_score_and_withheld_stays_withheld(tmp_path):
    """Before its deadline the knowledge check has no score in the report: its column says withheld, for
    everyone it is withheld for, even when that is everyone (the column is not dropped)."""
    for withheld, expected in (({"ada", "alan"}, {"Ada": "withheld", "Alan": "withheld", "Grace": "5.00"}),
                               ({"ada", "alan", "grace"}, {"Ada": "withheld", "Alan": "withheld", "Grace": "withheld"})):
        folder = tmp_path / str(len(withheld))
        folder.mkdir()
        _, out = lms_report(folder, withheld=withheld)
        header, *rows = read_csv(out / "report-students.csv")
        assert {row[0]: row[header.index("knowledge")] for row in rows} == expected
        header, *rows = read_csv(out / "report-part-shares.csv")
        assert {row[0]: row[header.index("knowledge")] for row in rows} == {
            submission: "100.0%" if cell == "5.00" else cell for submission, cell in
            zip(("ada", "alan", "grace"), expected.values())}


def test_canvas_needs_a_roster(generated):
    facts, *_ = generated
    run = report(facts.results, "--format", "canvas", "--out", facts.results.parent / "no-roster")
    assert run.returncode == 2 and "--format canvas needs --roster" in run.stdout


def test_report_says_when_submissions_were_not_given(tmp_path):
    run = report(DATA, "--out", tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    html = (tmp_path / "report.html").read_text()
    assert "Not checked: the submissions were not given" in html
    assert "similarity not checked: --submissions was not given" in run.stdout
    assert read_csv(tmp_path / "report-misconceptions.csv")[1][:2] == [NO_SCALE, "1"]


def test_gradescope_export_is_read_with_its_submitters(tmp_path):
    export = tmp_path / "assignment_42_export"
    for folder, name in (("submission_1001", "reference_copy"), ("submission_1002", "buggy_no_scale")):
        (export / folder / "results").mkdir(parents=True)
        (export / folder / "results" / "results.json").write_text((DATA / f"{name}.json").read_text())
        (export / folder / "mhsa.py").write_text((REPO / "reference" / "mhsa.py").read_text())
    (export / "submission_metadata.yml").write_text(
        "submission_1001:\n  :submitters:\n  - :name: Ada Lovelace\n    :sid: '111'\n    :email: ada@uni.edu\n"
        "  :score: 90.0\n"
        "submission_1002:\n  :submitters:\n  - :name: Alan Turing\n    :sid: '222'\n    :email: alan@uni.edu\n")
    roster = tmp_path / "roster.csv"
    roster.write_text("Student,ID,SIS User ID,SIS Login ID,Section,submission\n"
                      "\"Lovelace, Ada\",1,111,ada,A,111\n\"Turing, Alan\",2,222,alan,A,alan@uni.edu\n")
    run = report(export, "--roster", roster, "--format", "canvas", "--out", tmp_path / "out")
    assert run.returncode == 0, run.stdout + run.stderr
    students = by_first(read_csv(tmp_path / "out" / "report-students.csv"))
    assert students["Lovelace, Ada"][:4] == ["Lovelace, Ada", "1", "Ada Lovelace", "90.00"]
    assert students["Turing, Alan"][:4] == ["Turing, Alan", "2", "Alan Turing", "55.89"]
    canvas = read_csv(tmp_path / "out" / "canvas.csv")
    assert canvas[2:] == [["Lovelace, Ada", "1", "111", "ada", "A", "90.00"],
                          ["Turing, Alan", "2", "222", "alan", "A", "55.89"]]
    # The export holds the code too: both hand in the reference, which the similarity check finds.
    assert [r[:2] for r in read_csv(tmp_path / "out" / "report-similarity.csv")[1:]] == [["Ada Lovelace", "Alan Turing"]]


def test_nbgrader_export_gives_totals_only_and_blank_for_no_submission(tmp_path):
    gradebook = tmp_path / "grades.csv"  # the columns `nbgrader export` writes
    gradebook.write_text(
        "assignment,duedate,timestamp,student_id,last_name,first_name,email,raw_score,late_submission_penalty,"
        "score,max_score\n"
        "mhsa,,2026-11-01 10:00:00,ada,Lovelace,Ada,ada@uni.edu,80.0,0.0,80.0,95.0\n"
        "mhsa,,2026-11-01 11:00:00,alan,Turing,Alan,alan@uni.edu,95.0,0.0,95.0,95.0\n"
        "mhsa,,,grace,Hopper,Grace,grace@uni.edu,0.0,0.0,0.0,95.0\n"
        "ps1,,2026-10-01 10:00:00,ada,Lovelace,Ada,ada@uni.edu,10.0,0.0,10.0,10.0\n")  # another assignment
    run = report(gradebook, "--out", tmp_path / "out")
    assert run.returncode == 0, run.stdout + run.stderr
    html = (tmp_path / "out" / "report.html").read_text()
    assert "per-student totals only" in html and "nbgrader gradebook export" in html
    assert "hardest-tests" not in html  # no tests in a gradebook export: no empty sections pretending otherwise
    summary = {r[0]: r[1] for r in read_csv(tmp_path / "out" / "report-summary.csv")[1:]}
    assert summary["graded"] == "2" and summary["mean"] == "87.50"
    assert "graded: untouched" not in summary  # a gradebook export does not say what was graded
    export = {r[5]: r for r in read_csv(tmp_path / "out" / "grades-export.csv")[1:]}
    assert export["grace"][6] == "" and export["ada"][6] == "80.00" and export["ada"][8] == "84.2"
    assert "grace: no grade (no submission): left blank, not 0" in run.stdout
    # The maximum is nbgrader's own: what this course's notebook holds that other routes do not, and the reverse
    assert ("the points possible in grades-export.csv (95) are nbgrader's; this course's notebook totals "
            f"{NBGRADER_TOTAL:g}: it holds the written questions") in run.stdout


def test_inputs_that_are_not_results_are_refused_with_the_reason(tmp_path):
    (tmp_path / "grades.csv").write_text("submission,score,max_score\nalice,90,95\n")
    run = report(tmp_path / "grades.csv", "--out", tmp_path / "out")
    assert run.returncode == 2 and "give its results folder, not grades.csv" in run.stdout
    run = report(tmp_path / "nothing-here")
    assert run.returncode == 2 and "expected a batch's results folder" in run.stdout
    (tmp_path / "empty").mkdir()
    run = report(tmp_path / "empty")
    assert run.returncode == 2 and "no results files" in run.stdout
    assert not (tmp_path / "out").exists()


def test_forbidden_apis_in_a_real_grade_are_listed(tmp_path):
    """tests/data/class_report_current: the grader's results for examples/adversarial's forbidden_getattr
    (the library's attention fetched by a computed getattr), as `grade --batch` wrote them."""
    run = report(DATA.parent / "class_report_current", "--out", tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    rows = read_csv(tmp_path / "report-integrity.csv")[1:]
    found = [detail for student, kind, detail in rows if (student, kind) == ("forbidden_getattr", "forbidden API")]
    assert any(d.startswith("line 166: calls getattr with a computed name") for d in found)  # the static scan
    assert any(d.startswith("scaled_dot_product_attention used torch function scaled_dot_product_attention")
               for d in found)  # the runtime check
    assert len(found) == len(set(found))


def test_forbidden_apis_come_from_the_grader_s_list_never_from_its_texts():
    """extra_data["forbidden"] is where the grader records a forbidden API; the report reads that list
    and does not parse the notes or the tests' output for the same words."""
    data = json.loads((DATA / "reference_copy.json").read_text())
    data["extra_data"]["forbidden"] = ["line 3: imports torch.ops, which this assignment does not allow"]
    data["extra_data"]["parts"]["mhsa"]["notes"] = ["line 3: imports torch.ops, which this assignment does not allow",
                                                    "another note"]
    assert sources.from_results(results.Results.of(data), "x", RUBRIC).forbidden == data["extra_data"]["forbidden"]
    del data["extra_data"]["forbidden"]
    runtime = ("MultiHeadSelfAttention used torch function scaled_dot_product_attention, which this assignment "
               "forbids: implement attention yourself with matmul, softmax and friends")
    data["tests"][0]["output"] = f"output differs\nThis part scores 0: {runtime}"
    assert sources.from_results(results.Results.of(data), "x", RUBRIC).forbidden == []
    data["extra_data"]["forbidden"] = [runtime, 7, runtime]  # as a hand-edited file might hold it
    assert sources.from_results(results.Results.of(data), "x", RUBRIC).forbidden == [runtime]


def test_results_with_missing_fields_are_still_read(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps({"score": 3, "tests": [{"name": "odd"}], "extra_data": {}}))
    (tmp_path / "b.json").write_text(json.dumps({"score": 5}))
    (tmp_path / "notes.json").write_text(json.dumps(["not", "results"]))
    kind, records = sources.load(tmp_path, RUBRIC)
    assert kind == sources.BATCH and [(r.name, r.score, r.status) for r in records] == [("a", 3.0, "graded"),
                                                                                        ("b", 5.0, "graded")]


def test_roster_accepts_canvas_column_names(tmp_path):
    path = tmp_path / "roster.csv"
    path.write_text("\ufeffStudent,ID,SIS User ID,SIS Login ID,Section,submission\nAda,1,111,ada,A,ada.py\n")
    assert exports.read_roster(path) == [exports.Student("ada.py", "Ada", "1", "111", "ada", "A")]
    path.write_text("Student,ID,submission\n    Points Possible,,\nAda,1,ada.py\nGrace,3,\n,,\n")
    assert exports.read_roster(path) == [exports.Student("ada.py", "Ada", "1"), exports.Student("", "Grace", "3")]
    path.write_text("name,id\nAda,1\n")
    with pytest.raises(ValueError, match="'submission' column"):
        exports.read_roster(path)


def test_student_release_does_not_offer_the_report(tmp_path):
    out = release.build_release(tmp_path / "mhsa-student")
    assert not (out / "autograder" / "reporting").exists()
    run = subprocess.run([sys.executable, "-m", "autograder", "report", "x"], cwd=out, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 2 and "invalid choice: 'report'" in run.stderr
