"""Every module of autograder/, gpu_checks/ and tools/ opens with a docstring whose first line is one sentence
that says the module's job: a reader of a file, or of the first lines of all of them, learns what
each is for without reading on.

What a test can check is the form: a docstring, whose first line is a whole sentence (it ends there)
and only one (no second sentence starts on it). Whether the sentence names the job well is for a
reviewer to judge.
"""
import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("autograder", "gpu_checks", "tools")
# A full stop that does not end a sentence.
ABBREVIATION = re.compile(r"\b(?:e\.g|i\.e|vs|etc|cf)\.$")


def first_line_problem(docstring: str | None) -> str | None:
    """Why a module docstring's first line is not one whole sentence, or None when it is."""
    if docstring is None or not docstring.strip():
        return "no docstring"
    first = docstring.strip().splitlines()[0].strip()
    if not first.endswith((".", "?", "!")):
        return f"its first line does not end the sentence: {first!r}"
    for stop in re.finditer(r"[.!?][\"')\]`]*\s+(?=[A-Z`\"'(])", first):
        if not ABBREVIATION.search(first[:stop.start() + 1]):
            return f"its first line holds more than one sentence: {first!r}"
    return None


def modules():
    return sorted(path for package in PACKAGES for path in (REPO / package).rglob("*.py"))


@pytest.mark.parametrize("path", modules(), ids=lambda path: str(path.relative_to(REPO)))
def test_the_first_line_of_every_module_says_its_job_in_one_sentence(path):
    problem = first_line_problem(ast.get_docstring(ast.parse(path.read_text()), clean=False))
    assert problem is None, f"{path.relative_to(REPO)}: {problem}"


def test_the_check_fails_a_missing_docstring_a_wrapped_sentence_and_a_second_sentence():
    assert first_line_problem(None) == "no docstring"
    assert "does not end" in first_line_problem("The batch: every submission graded by\nslots.")
    assert "more than one" in first_line_problem("Test outcomes -> points. Pure functions.")
    assert first_line_problem("The slot, e.g. one grading process per core.\n\nMore text. And more.") is None
    assert first_line_problem("`grade PATH`: grade one submission (`--batch`: a folder).") is None
