"""Feedback for students: the hidden tests' source is removed and so are the tracebacks of the cells
that held them, which would quote the failing line (a hidden assertion, or the knowledge key).
What remains of an error is its last line: the exception and the message the test wrote for it."""
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
from nbgrader.converters import GenerateFeedback
from nbgrader.preprocessors import ClearHiddenTests, GetGrades


class HideHiddenTests(ClearHiddenTests):
    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type == "code" and self._remove_hidden_test_region(cell):
            for output in cell.outputs:
                if output.output_type == "error":
                    output.traceback = [f"{output.ename}: {output.evalue}"]
        return cell, resources


def preprocessors() -> list:
    """nbgrader's feedback pipeline with HideHiddenTests after the grades are read."""
    default = GenerateFeedback.class_traits()["preprocessors"].default()
    if default != [GetGrades, CSSHTMLHeaderPreprocessor]:
        raise RuntimeError(f"nbgrader's feedback pipeline changed ({default}): review mhsa_nbgrader/feedback.py")
    return [GetGrades, HideHiddenTests, CSSHTMLHeaderPreprocessor]
