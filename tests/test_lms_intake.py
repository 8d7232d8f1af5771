"""A flat LMS download graded as one submission per student, and per-student lateness (`grade --batch --extensions`).

The batches run the real command in a subprocess on copies of the reference under Canvas's download
names, with the public suite only and a rubric whose late policy takes 10% a day.
"""
import csv
import json
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from autograder.intake import lms

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO / "reference" / "mhsa.py"


def late_rubric(tmp_path: Path) -> Path:
    text = (REPO / "rubric.toml").read_text()
    assert "late_penalty_per_day = 0.0" in text
    path = tmp_path / "rubric.toml"
    path.write_text(text.replace("late_penalty_per_day = 0.0", "late_penalty_per_day = 0.1"))
    return path


def batch(tmp_path: Path, folder: Path, *extra) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autograder", "grade", str(folder), "--batch", "--out",
                           str(tmp_path / "out"), "--suite", "public", "--isolation", "process", "--jobs", "3",
                           "--rubric", str(late_rubric(tmp_path)), *map(str, extra)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)


def test_a_flat_canvas_download_grades_one_submission_per_student_with_their_own_lateness(tmp_path):
    download = tmp_path / "download"
    download.mkdir()
    for name in ("lovelaceada_101_9001_mhsa.py", "hopper_grace_LATE_102_9002_mhsa-1.py",
                 "turingalan_LATE_103_9003_mhsa.py"):
        (download / name).write_bytes(REFERENCE.read_bytes())
    (download / "lovelaceada_101_9001_knowledge.py").write_text("Q1 = 'not an answer'\n")
    (download / "notes.txt").write_text("the TA's own file\n")
    extensions = tmp_path / "extensions.csv"
    extensions.write_text("student,extra_days\nturingalan,2\n")

    run = batch(tmp_path, download, "--extensions", extensions)

    assert run.returncode == 0, run.stdout + run.stderr
    unrecognised = [line for line in run.stdout.splitlines() if "notes.txt" in line]
    assert unrecognised == ["not graded, not named by Canvas's convention (name[_LATE]_userid_submissionid_file): "
                            "notes.txt"]
    out = tmp_path / "out"
    rows = {row["submission"]: row for row in csv.DictReader((out / "grades.csv").open())}
    assert set(rows) == {"lovelaceada", "hopper_grace", "turingalan"}, "one row per student, by the name part"
    staged = out / "records" / "lms"
    assert sorted(p.name for p in (staged / "lovelaceada").iterdir()) == ["knowledge.py", "mhsa.py"]
    assert [p.name for p in (staged / "hopper_grace").iterdir()] == ["mhsa.py"], "Canvas's -1 is stripped"
    # Canvas's LATE_ without a time: one day, the least the policy charges; the extension covers it
    assert rows["hopper_grace"]["days_late"] == "1"
    earned = float(rows["hopper_grace"]["score"]) - float(rows["hopper_grace"]["late_penalty"])
    assert earned > 0 and float(rows["hopper_grace"]["late_penalty"]) == pytest.approx(-0.1 * earned, abs=1e-3)
    assert rows["turingalan"]["days_late"] == rows["turingalan"]["late_penalty"] == "", "the same work, on time"
    assert float(rows["turingalan"]["score"]) == pytest.approx(earned)
    assert rows["lovelaceada"]["days_late"] == ""
    late = json.loads((out / "hopper_grace.json").read_text())
    row = next(t for t in late["tests"] if t["name"] == "late penalty")
    assert row["score"] < 0 and row["output"].startswith("1 day(s) late at 10% a day"), "the student sees it"
    assert "hopper_grace: 1 day(s) late: the LMS marks it late" in run.stdout


def test_nbgrader_timestamps_against_each_students_due_date(tmp_path):
    folder = tmp_path / "submitted"
    for student, stamp in (("alice", "2026-01-12 09:30:00.123456 UTC"), ("bob", "2026-01-12 09:30:00 UTC")):
        (folder / student).mkdir(parents=True)
        (folder / student / "mhsa.py").write_bytes(REFERENCE.read_bytes())
        (folder / student / "timestamp.txt").write_text(stamp + "\n")
    extensions = tmp_path / "extensions.csv"
    extensions.write_text("student,due,extra_days\nalice,2026-01-10T17:00:00+00:00,\n"
                          "bob,2026-01-10T17:00:00+00:00,2\n")

    run = batch(tmp_path, folder, "--extensions", extensions)

    assert run.returncode == 0, run.stdout + run.stderr
    rows = {row["submission"]: row for row in csv.DictReader((tmp_path / "out" / "grades.csv").open())}
    assert rows["alice"]["days_late"] == "2", "1 day 16.5 hours late counts as 2"
    assert rows["bob"]["days_late"] == "" and float(rows["bob"]["score"]) > float(rows["alice"]["score"])
    assert "bob: 0 day(s) late: handed in 2026-01-12T09:30:00+00:00, due 2026-01-12T17:00:00+00:00" in run.stdout


def test_days_late_from_a_due_date_a_timestamp_and_extra_days(tmp_path):
    due = datetime(2026, 1, 10, 17, 0, tzinfo=timezone.utc)
    on_time = lms.lateness(lms.Extension(due), datetime(2026, 1, 10, 16, 0, tzinfo=timezone.utc), None, 0.0)
    assert on_time.days == 0
    late = lms.lateness(lms.Extension(due, 1.0), datetime(2026, 1, 12, 9, 30, tzinfo=timezone.utc), None, 0.0)
    assert late.days == 1, "16.5 hours past the extended due date is one day, as the policy counts it"
    folder = tmp_path / "alice"
    folder.mkdir()
    (folder / "timestamp.txt").write_text("2026-01-12 09:30:00.123456 UTC\n")
    assert lms.submission_time(folder) == datetime(2026, 1, 12, 9, 30, 0, 123456, tzinfo=timezone.utc)
    (folder / "timestamp.txt").write_text("yesterday")
    assert lms.submission_time(folder) is None
    assert lms.lateness(None, None, None, 3.0).days == 3, "nothing known: the batch's --days-late"
    assert lms.lateness(lms.Extension(None, 2.0), None, None, 3.0).days == 1, "less the extra days"
    assert lms.lateness(lms.Extension(due), None, None, 3.0).days == 0, "an own due date and no time: on time"


@pytest.mark.parametrize("content, says", [
    ("student,extra_days\nalice,2\nbob,soon\n", "extensions.csv row 3: extra_days 'soon' is not a number of days"),
    ("student,due\nalice,next friday\n", "extensions.csv row 2: due 'next friday' is not an ISO 8601 date"),
    ("student,extra_days\nalice,1\nalice,2\n", "extensions.csv row 3: alice is listed twice"),
    ("name,extra_days\nalice,1\n", "extensions.csv row 1: the header must be student and due and/or extra_days"),
])
def test_a_malformed_extensions_csv_stops_the_batch_in_one_line(tmp_path, content, says):
    folder = tmp_path / "subs"
    folder.mkdir()
    (folder / "alice.py").write_bytes(REFERENCE.read_bytes())
    extensions = tmp_path / "extensions.csv"
    extensions.write_text(content)

    run = batch(tmp_path, folder, "--extensions", extensions)

    assert run.returncode == 2 and "Traceback" not in run.stdout + run.stderr
    lines = run.stdout.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], run.stdout
    assert not list((tmp_path / "out").glob("*.json")), "nothing is graded"


@pytest.mark.parametrize("name, student, late, original, resubmission", [
    ("lastfirst_12345_678901_mhsa.py", "lastfirst", False, "mhsa.py", 0),
    ("lastfirst_LATE_12345_678901_mhsa.py", "lastfirst", True, "mhsa.py", 0),
    ("van_der_berg_LATE_12_34_knowledge-1.py", "van_der_berg", True, "knowledge.py", 1),
    ("smith_1_2_my_file_3_4-12.ipynb", "smith", False, "my_file_3_4.ipynb", 12),
])
def test_canvas_names_are_read_by_their_convention(name, student, late, original, resubmission):
    found = lms.parse_canvas(Path(name))
    assert (found.student, found.late, found.original, found.resubmission) == (student, late, original, resubmission)


@pytest.mark.parametrize("name", ["reference_copy.py", "alice.py", "lastfirst_12345_mhsa.py", "12_34_mhsa.py"])
def test_other_names_are_not_canvas_names(name):
    assert lms.parse_canvas(Path(name)) is None


def test_a_later_upload_replaces_an_earlier_one_of_the_same_file(tmp_path):
    for name in ("lastfirst_7_100_mhsa.py", "lastfirst_7_100_mhsa-1.py", "otherone_8_101_mhsa.py"):
        (tmp_path / name).write_text(name)
    download = lms.read_download(tmp_path)
    assert [f.path.name for f in download.students["lastfirst"]] == ["lastfirst_7_100_mhsa-1.py"]
    assert download.replaced == ("lastfirst: lastfirst_7_100_mhsa.py left out for the later upload "
                                 "lastfirst_7_100_mhsa-1.py",)
    assert lms.read_download(REPO / "examples" / "submissions") is None, "lone .py files are not a download"
