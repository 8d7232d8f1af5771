"""Feedback for students: the hidden tests' source is removed and so are the tracebacks of the cells
that held them, which would quote the failing line (a hidden assertion, or the knowledge key).
What remains of an error is its last line: the exception and the message the test wrote for it.
A cell whose score `python -m autograder gradebook --write` replaced with its isolated score says
so, with the reason, under its own output (which may still say that the tests passed in the kernel).
A part whose isolated grade names a likely mistake (the diagnosis), or draws its attention weights
beside the expected ones, shows them once, under one test cell of the part. Every score is shown with two decimals; the gradebook keeps the exact ones."""
from pathlib import Path

from jinja2.filters import do_round
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
from nbformat.v4 import new_output
from nbgrader.converters import GenerateFeedback
from nbgrader.preprocessors import ClearHiddenTests, GetGrades, NbGraderPreprocessor
from traitlets import Unicode


class HideHiddenTests(ClearHiddenTests):
    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type == "code" and self._remove_hidden_test_region(cell):
            for output in cell.outputs:
                if output.output_type == "error":
                    output.traceback = [f"{output.ename}: {output.evalue}"]
        return cell, resources


class IsolatedScoreNotes(NbGraderPreprocessor):
    """What the isolated grade (`gradebook`'s results file for the student) adds under test cells: the
    reason for each score `gradebook --write` stored, and each part's likely mistake."""
    course = Unicode("", help="The course folder, where `gradebook --write` keeps its results.").tag(config=True)

    def preprocess(self, nb, resources):
        from autograder.runners.gradebook import results_path
        from autograder.record import results

        info = resources["nbgrader"]
        course = Path(self.course)
        found = results.load(results_path(course, info["assignment"], info["student"]))
        written = found.extra("written_to_gradebook", {}) if found is not None else {}
        self.written = written if isinstance(written, dict) else {}
        submitted = course / "submitted" / info["student"] / info["assignment"] / f"{info['notebook']}.ipynb"
        self.mistakes = likely_mistakes(nb, found, submitted)
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, cell_index):
        from autograder.record import results

        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        written = self.written.get(grade_id)
        if cell.cell_type == "code" and written:
            cell.outputs.append(new_output("stream", name="stdout", text=f"\n{written['reason']}\n"))
        part = self.mistakes.get(grade_id)
        if cell.cell_type == "code" and part is not None:
            if part.diagnosis.strip():
                cell.outputs.append(new_output("stream", name="stdout",
                                               text=f"\n{results.LIKELY_MISTAKE}{part.diagnosis.strip()}\n"))
            if part.picture_html:  # the isolated grade's own drawing: a fixed small case, escaped text
                cell.outputs.append(new_output("display_data", data={"text/html": part.picture_html,
                                                                     "text/plain": part.picture_text}))
        return cell, resources


def likely_mistakes(nb, found, submitted: Path) -> dict:
    """grade id -> the part record whose diagnosis and picture to show under that test cell: for each
    part whose isolated grade has either, under the part's first test cell that lost points in this
    feedback, else its first test cell.
    Nothing without an isolated grade, or for one of another notebook than the one now in submitted/
    (a resubmission not graded again in isolation): its diagnosis would be about code the student no
    longer has."""
    from autograder.intake.notebook import part_of_cell
    from autograder.pipeline.grade_file import submission_digest

    if found is None or not submitted.is_file() or found.graded_with.get("submission") != submission_digest(submitted):
        return {}
    diagnoses = {name: part for name, part in found.parts.items() if part.diagnosis.strip() or part.picture_html}
    chosen = {}  # part -> (grade id, lost points)
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        part = part_of_cell(meta.get("grade_id") or "") if cell.cell_type == "code" and meta.get("grade") else None
        if part not in diagnoses:
            continue
        lost = (meta.get("score") or 0.0) < (meta.get("points") or 0.0)
        if part not in chosen or (lost and not chosen[part][1]):
            chosen[part] = (meta["grade_id"], lost)
    return {grade_id: diagnoses[part] for part, (grade_id, _) in chosen.items()}


def two_decimals(value, precision=0, method="common"):
    """The feedback template's `round` filter: nbgrader's feedback.html.j2 writes every score (the
    total, the late penalty, each cell's score and points) as `| float | round(2)`, which shows 30.0
    and 1.5; this shows them as 30.00 and 1.50. Display only: the gradebook's scores stay exact."""
    return f"{do_round(value, precision, method):.{precision}f}"


def template_filters() -> dict:
    """c.HTMLExporter.filters for generate_feedback. The formgrader's HTMLExporter gets them too: its
    grading page shows each cell's points as `/ 1.00` (text only; the score typed in is a number)."""
    return {"round": two_decimals}


def preprocessors() -> list:
    """nbgrader's feedback pipeline with HideHiddenTests and IsolatedScoreNotes after the grades are read."""
    default = GenerateFeedback.class_traits()["preprocessors"].default()
    if default != [GetGrades, CSSHTMLHeaderPreprocessor]:
        raise RuntimeError(f"nbgrader's feedback pipeline changed ({default}): review mhsa_nbgrader/feedback.py")
    return [GetGrades, HideHiddenTests, IsolatedScoreNotes, CSSHTMLHeaderPreprocessor]
