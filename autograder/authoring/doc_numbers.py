"""The numbers the handout and the docs take from the rubric, written into regions of hand-written text.

A region is `<!-- generated: NAME -->TEXT<!-- /generated -->`, inside a sentence or around a table, in
README.md, assignment/*.md or docs/ (docs/student-README.md is the student release's README).
`python -m autograder release --write` replaces TEXT with what NAME says under rubric.toml, and
`release --check` fails when a committed file's regions say anything else (autograder/authoring/release.py);
everything outside the regions stays as written. The names:

  total               every part's points: what a course grades out of
  total-without-gpu   the same where no CUDA device is found: timing is left out of the maximum,
                      unless the rubric requires CUDA or names the device it times on
  check-total         what `python -m autograder check` counts out of: the parts graded by tests
  notebook-total      the nbgrader notebook's autograded points: every part the notebook holds
  written-points      the points of the notebook's written questions together (graded by hand)
  nbgrader-total      notebook-total and written-points: nbgrader's maximum
  public-share        the public suite's share of each part, in percent ([suites] public)
  hidden-share        the hidden suite's share of each part, in percent ([suites] hidden)
  parts-table         the handout's table of the parts: what students write, the points, the total
  commands-table      the handout's table of which command grades which part, and how
"""
import re
from dataclasses import replace

from autograder.core.paths import REPO
from autograder.intake import notebook
from autograder.pipeline import grading
from autograder.record.scoring import UNITS

REGION = re.compile(r"<!-- generated: (?P<name>[\w-]+) -->(?P<text>.*?)<!-- /generated -->", re.S)
OPENING = "<!-- generated:"

# The two parts that are not functions to write, as the handout describes them ({functions}: links).
NOT_WRITTEN = {
    "timing": "your {functions} on a CUDA GPU, timed against a reference (only when graded on a machine "
              "with a GPU)",
    "knowledge": "the knowledge check: short questions on the ideas in this handout, answered in "
                 f"`{notebook.KNOWLEDGE_MODULE}` (or in the notebook)",
}
# How `check` and a course grade the parts `check` does not count, in the handout's words.
NOT_CHECKED = {
    "timing": ("not graded here: timing needs the course's GPU (or the instructor's CPU setting)",
               "where the course grades it; without a GPU it is left out of the total"),
    "knowledge": ("not graded here: the answer key is the instructor's; `check` says whether each answer "
                  "is a plain value of the right kind", "against the key"),
}


class RegionError(ValueError):
    """A region that cannot be filled: its file, and why."""


def files() -> list:
    """The markdown files, relative to the repository, that hold a region."""
    found = [REPO / "README.md", *sorted((REPO / "assignment").glob("*.md")), *sorted((REPO / "docs").rglob("*.md"))]
    return [path.relative_to(REPO).as_posix() for path in found if path.is_file() and OPENING in path.read_text()]


def generated_files(rubric) -> dict:
    """Path -> the committed text of each file that holds a region, its regions filled in from `rubric`."""
    values = texts(rubric)
    return {path: fill((REPO / path).read_text(), values, path) for path in files()}


def fill(text: str, values: dict, where: str) -> str:
    """`text` with each region's TEXT replaced by its name's value; RegionError naming `where` for a
    region whose name is unknown, that is not closed, or that opens a line although it is inline."""
    def value(match):
        if match["name"] not in values:
            raise RegionError(f"{where}: no generated text is called {match['name']!r}; "
                              f"the names are {', '.join(values)} (autograder/authoring/doc_numbers.py)")
        if "\n" not in values[match["name"]] and match.start() == text.rfind("\n", 0, match.start()) + 1:
            raise RegionError(f"{where}: the region {match['name']!r} opens a line, where markdown ends the "
                              "paragraph: put a word of the sentence before it")
        return f"<!-- generated: {match['name']} -->{values[match['name']]}<!-- /generated -->"

    filled = REGION.sub(value, text)
    if filled.count(OPENING) != len(REGION.findall(filled)):
        raise RegionError(f"{where}: a `{OPENING} NAME -->` region has no `<!-- /generated -->` after it")
    return filled


def texts(rubric) -> dict:
    """Name -> the text of its regions under `rubric`."""
    parts = rubric.parts
    total = sum(p.points for p in parts.values())
    timing = parts.get("timing")
    # grading.timing_counts without a CUDA device: the part counts only where the rubric requires CUDA
    # or names the device.
    timing_left_out = timing is not None and timing.device == "auto" and not timing.require_cuda
    by_part, written_questions = notebook.nbgrader_points(rubric)
    in_notebook, written = sum(by_part.values()), sum(q.points for q in written_questions)
    checked = counted_by_check(rubric)
    return {
        "total": number(total),
        "total-without-gpu": number(total - timing.points if timing_left_out else total),
        "check-total": number(grading.planned_max_units(rubric, ("public",), extras=False) / UNITS),
        "notebook-total": number(in_notebook),
        "written-points": number(written),
        "nbgrader-total": number(in_notebook + written),
        "public-share": f"{number(100 * rubric.suite_weights['public'])}%",
        "hidden-share": f"{number(100 * rubric.suite_weights['hidden'])}%",
        "parts-table": parts_table(rubric, total),
        "commands-table": commands_table(rubric, checked, total),
    }


def counted_by_check(rubric) -> list:
    """The parts `check` counts: asked, one part at a time, of the rule its maximum follows
    (grading.planned_max_units with check's options: the public suite, no extras)."""
    return [name for name, part in rubric.parts.items()
            if grading.planned_max_units(replace(rubric, parts={name: part}), ("public",), extras=False)]


def parts_table(rubric, total: float) -> str:
    rows = ["| part | what you write | points |", "| --- | --- | --- |"]
    for part in rubric.parts.values():
        functions = ", ".join(f"[`{name}`](#{name.lower()})" for name in part.functions)
        what = NOT_WRITTEN[part.name].format(functions=functions) if part.name in NOT_WRITTEN else functions
        rows.append(f"| `{part.name}` | {what} | {number(part.points)} |")
    rows.append(f"| | **in all** | **{number(total)}** |")
    return _block(rows)


def commands_table(rubric, checked: list, total: float) -> str:
    rows = ["| part | points | `python -m autograder check` | graded by your course |", "| --- | --- | --- | --- |"]
    for part in rubric.parts.values():
        check, course = ("public tests", "public and hidden tests") if part.name in checked else NOT_CHECKED[part.name]
        rows.append(f"| `{part.name}` | {number(part.points)} | {check} | {course} |")
    counted = sum(rubric.parts[name].points for name in checked)
    rows.append(f"| **in all** | **{number(total)}** | **{number(counted)}** | |")
    return _block(rows)


def _block(rows: list) -> str:
    """A table between a region's markers, each on a line of its own with a blank line around it."""
    return "\n\n" + "\n".join(rows) + "\n\n"


def number(points: float) -> str:
    return f"{round(points, 4):g}"
