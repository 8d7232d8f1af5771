"""Solution cells as students get them: each stub names its function and the handout's section.

nbgrader's ClearSolutions leaves a bare `raise NotImplementedError()`; NamedStubs then gives it the
message of assignment/mhsa.py's stub (autograder.authoring.stubs.named_raises). `nbgrader generate_assignment`
and `release --write` (which loads this course's nbgrader_config.py) both run it, so that the
notebook students get says what assignment/mhsa.py says."""
from nbgrader import utils
from nbgrader.converters import GenerateAssignment
from nbgrader.preprocessors import ClearSolutions

from autograder.authoring import stubs


class NamedStubs(ClearSolutions):
    def preprocess_cell(self, cell, resources, cell_index):
        cell, resources = super().preprocess_cell(cell, resources, cell_index)
        if cell.cell_type == "code" and utils.is_solution(cell):
            cell.source = stubs.named_raises(cell.source)
        return cell, resources


def preprocessors() -> list:
    """nbgrader's generate_assignment pipeline with NamedStubs in ClearSolutions' place."""
    default = GenerateAssignment.class_traits()["preprocessors"].default()
    if default.count(ClearSolutions) != 1:
        raise RuntimeError(f"nbgrader's generate_assignment pipeline changed ({default}): review mhsa_nbgrader/stubs.py")
    return [NamedStubs if step is ClearSolutions else step for step in default]
