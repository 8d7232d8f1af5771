"""Feedback for students: the hidden tests' source is removed and so are the tracebacks of the cells
that held them, which would quote the failing line (a hidden assertion, or the knowledge key).
What remains of an error is its last line: the exception and the message the test wrote for it.
A cell whose score `python -m autograder gradebook --write` replaced with its isolated score says
so, with the reason, under its own output (which may still say that the tests passed in the kernel)."""
import json
from pathlib import Path

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
    course = Unicode("", help="The course folder, where `gradebook --write` keeps its results.").tag(config=True)

    def preprocess(self, nb, resources):
        from autograder.runners.gradebook import results_path
        from autograder.record import results

        info = resources["nbgrader"]
        found = results.load(results_path(Path(self.course), info["assignment"], info["student"]))
        written = found.extra("written_to_gradebook", {}) if found is not None else {}
        self.written = written if isinstance(written, dict) else {}
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, cell_index):
        written = self.written.get(cell.metadata.get("nbgrader", {}).get("grade_id"))
        if cell.cell_type == "code" and written:
            cell.outputs.append(new_output("stream", name="stdout", text=f"\n{written['reason']}\n"))
        return cell, resources


def preprocessors() -> list:
    """nbgrader's feedback pipeline with HideHiddenTests and IsolatedScoreNotes after the grades are read."""
    default = GenerateFeedback.class_traits()["preprocessors"].default()
    if default != [GetGrades, CSSHTMLHeaderPreprocessor]:
        raise RuntimeError(f"nbgrader's feedback pipeline changed ({default}): review mhsa_nbgrader/feedback.py")
    return [GetGrades, HideHiddenTests, IsolatedScoreNotes, CSSHTMLHeaderPreprocessor]
