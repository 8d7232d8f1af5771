"""`python -m autograder check` as a student's tool, run the way a student runs it (in a built student
release, as a subprocess): output that fits a screen on the stubs, the knowledge answers' form, no
`grade` command, no traceback when piped into `head`; and the handout's points matching rubric.toml."""
import re
import subprocess
import sys

import pytest

from autograder.authoring import doc_numbers, release
from autograder.core import rubric
from autograder.core.paths import REPO
from autograder.feedback import student_view
from autograder.intake import knowledge
from autograder.pipeline import grading
from autograder.record import scoring

HANDOUT = REPO / "assignment" / "README.md"
STUDENT_README = REPO / "docs" / "student-README.md"
ROW = re.compile(r"^\| `(?P<part>\w+)` \|(?P<cells>.*)\|\s*$")


def run(command, cwd):
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=900,
                          shell=isinstance(command, str))


@pytest.fixture(scope="module")
def student(tmp_path_factory):
    """A student release with the stubs untouched and a knowledge.py with typical mistakes."""
    root = release.build_release(tmp_path_factory.mktemp("check") / "student")
    answers = root / "assignment" / "knowledge.py"
    answers.write_text(answers.read_text().replace("Q3_ANSWER = None", "Q3_ANSWER = 64 // 8")
                       .replace("Q1_ANSWER = None", 'Q1_ANSWER = "e"').replace("Q2_ANSWER = None", "Q2_ANSWER = True"))
    return root


@pytest.fixture(scope="module")
def check_output(student):
    result = run([sys.executable, "-m", "autograder", "check"], student)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_check_on_the_stubs_fits_a_screen(check_output):
    lines = check_output.splitlines()
    assert len(lines) < 80, check_output
    assert "Traceback" not in check_output
    # each distinct failure once, with how many tests share it
    assert check_output.count("NotImplementedError: split_heads is not implemented yet") == 1
    assert "and 10 more test(s) with the same failure" in check_output
    # capped per part, with the command that shows the rest
    assert re.search(r"\d+ more failed test\(s\) of 'masks', failing another way: pytest tests_public -k masks",
                     check_output)


def test_check_orders_parts_as_the_handout_and_rounds_scores(check_output):
    table = [line.split()[0] for line in check_output.splitlines()[3:10]]
    assert table == list(rubric.load().parts) == ["sdpa", "heads", "masks", "mhsa", "block", "timing", "knowledge"]
    failed = [line.split()[1].rstrip(":") for line in check_output.splitlines() if line.startswith("  FAILED")]
    assert failed == sorted(failed, key=table.index)
    assert "0.00 / 90.00 points" in check_output and "0.00 / 20" in check_output
    assert "timing     not graded here" in check_output and "knowledge  not graded here" in check_output


def test_check_says_what_is_wrong_with_knowledge_answers(check_output):
    assert "Q3: Q3_ANSWER = 64 // 8 is not a literal value: write 8" in check_output
    assert 'Q1: answer with one of "a", "b", "c", "d" (a string)' in check_output
    assert "not answered yet: Q4, Q5, Q6, Q7, Q8, Q9, Q10" in check_output
    assert "Q2:" not in check_output  # a plain value of the right kind: nothing to say (right or wrong)


def test_check_of_the_file_reads_the_knowledge_answers_beside_it(student, tmp_path):
    """`check assignment/mhsa.py` is the handout's layout: knowledge.py beside it holds the answers.
    A file named otherwise (alice.py in a folder of submissions) has none of its own there."""
    from autograder.intake import submission

    result = run([sys.executable, "-m", "autograder", "check", "assignment/mhsa.py"], student)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Q3: Q3_ANSWER = 64 // 8 is not a literal value: write 8" in result.stdout
    (tmp_path / "alice.py").write_text("x = 1\n")
    (tmp_path / "knowledge.py").write_text("Q3_ANSWER = 8\n")
    (tmp_path / "work").mkdir()
    assert submission.load(tmp_path / "alice.py", tmp_path / "work").knowledge is None


def test_knowledge_form_accepts_plain_values_and_refuses_others():
    questions = knowledge.autograded(knowledge.questions())
    def plain(q):
        return repr(next(iter(q.choices))) if q.kind == "choice" else {"truefalse": "False", "number": "2.5"}[q.kind]

    good = knowledge.read_answers("\n".join(f"{q.variable} = {plain(q)}" for q in questions))
    assert student_view.knowledge_form(good) == [f"all {len(questions)} answers are plain values of the right kind"]
    bad = student_view.knowledge_form(knowledge.read_answers("Q2_ANSWER = 1 + 0\nQ3_ANSWER = d_model // h"))
    assert "Q2: Q2_ANSWER = 1 + 0 is not a literal value: answer with True or False" in bad
    assert "Q3: Q3_ANSWER = d_model // h is not a literal value: answer with a number" in bad


def test_student_release_has_no_grade_command(student):
    help_text = run([sys.executable, "-m", "autograder", "--help"], student)
    assert help_text.returncode == 0 and "check" in help_text.stdout
    assert not re.search(r"^\s+grade\b", help_text.stdout, re.M), help_text.stdout
    grade = run([sys.executable, "-m", "autograder", "grade", "assignment"], student)
    assert grade.returncode == 2 and "invalid choice: 'grade'" in grade.stderr
    released = student / knowledge.RELEASED_QUESTIONS.relative_to(REPO)
    assert released.is_file() and "guide" not in released.read_text()


def test_check_piped_into_head_ends_quietly(student):
    result = run(f"{sys.executable} -m autograder check | head -n 1", student)
    assert result.stdout.count("\n") == 1 and "points from the public tests" in result.stdout
    assert "Traceback" not in result.stderr and "BrokenPipeError" not in result.stderr, result.stderr


def points_tables(text: str) -> list:
    """{part: points} of every Markdown table with a `points` column."""
    tables, header = [], None
    for line in text.splitlines():
        if line.startswith("| part |"):
            header = [cell.strip() for cell in line.strip("|").split("|")]
            tables.append({})
        elif header and (row := ROW.match(line)):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if "points" in header:
                tables[-1][row["part"]] = float(cells[header.index("points")])
        elif not line.startswith("|"):
            header = None
    return [t for t in tables if t]


def test_handout_points_match_the_rubric_and_every_command():
    rules = rubric.load()
    expected = {name: part.points for name, part in rules.parts.items()}
    tables = points_tables(HANDOUT.read_text())
    assert len(tables) == 2 and all(table == expected for table in tables), tables
    # The handout's numbers sit in generated regions (autograder/authoring/doc_numbers.py): read as a student does.
    handout = " ".join(doc_numbers.REGION.sub(lambda m: m["text"], HANDOUT.read_text()).split())
    total = sum(expected.values())
    check_max = grading.planned_max_units(rules, suites=("public",), extras=False) / scoring.UNITS
    without_timing = total - expected["timing"]
    assert f"| **in all** | **{total:g}** |" in handout
    assert f"`check` counts out of **{check_max:g}**" in handout
    assert f"Your course grades out of {total:g}, or out of {without_timing:g} where timing is not run" in handout
    assert f"counts out of {check_max:g}" in " ".join(doc_numbers.REGION.sub(lambda m: m["text"],
                                                                              STUDENT_README.read_text()).split())
    assert points_tables(STUDENT_README.read_text()) == []  # one table, in the handout


@pytest.mark.parametrize("isolation", ["inprocess", "process"])
def test_a_failure_shows_the_call_and_only_the_students_frames(tmp_path, isolation):
    """merge_masks raising inside torch: the message names the call and its arguments, and the
    traceback holds the test's frame and the student's, not the grader's (nor, from the worker, torch's)."""
    source = (REPO / "reference" / "mhsa.py").read_text()
    head = "def merge_masks(attn_mask, key_padding_mask, dtype=torch.float32):\n"
    assert head in source
    broken = tmp_path / "mhsa.py"
    broken.write_text(source.replace(head, head + "    torch.split(torch.zeros(2), [5])\n", 1))
    result = run([sys.executable, "-m", "pytest", "tests_public", "--impl", str(broken), "--isolation", isolation,
                  "-x", "-k", "merge_masks_of_nothing"], REPO)
    assert result.returncode == 1, result.stdout[-3000:]
    assert "autograder/" not in result.stdout, result.stdout
    assert 'mhsa.py", line' in result.stdout or "mhsa.py:" in result.stdout
    if isolation == "process":
        assert "Raised by the call merge_masks(None, None)" in result.stdout
        assert "torch/" not in result.stdout.split("Where it was raised in your code:")[1]


def test_a_dataclass_under_postponed_annotations_imports_in_process(tmp_path):
    """`@dataclass` with `from __future__ import annotations` looks its module up in sys.modules while
    the class is made: the student's own `pytest tests_public` must import it as `import` would."""
    source = (REPO / "reference" / "mhsa.py").read_text()
    config = ("from __future__ import annotations\nfrom dataclasses import dataclass\n\n\n"
              "@dataclass\nclass Config:\n    d_model: int = 16\n    n_heads: int = 4\n\n\n")
    student = tmp_path / "mhsa.py"
    student.write_text(config + source)
    result = run([sys.executable, "-m", "pytest", "tests_public", "--impl", str(student), "-x", "-q",
                  "-k", "sdpa"], REPO)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "passed" in result.stdout and "failed" not in result.stdout
