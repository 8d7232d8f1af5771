"""Pictures of attention weights and masks (autograder/feedback/pictures.py): nothing to show for the
reference, the expected and the student's side by side where a mistake changes them, nothing drawn
for an output of the wrong shape or a call that raised, and plain data that survives JSON."""
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from autograder.feedback import pictures
from autograder.feedback.pictures import BLOCKS, LEGEND, Picture, picture
from autograder.isolation.host.levels import Isolation
from autograder.testing.backends import WorkerBackend, open_in_process
from tests.test_release import FORMULAS, code_without_strings

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO / "reference" / "mhsa.py"
# One-place breaks of the reference: (find, replace)
NO_SCALE = ("scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))", "scores = q @ k.transpose(-2, -1)")
NO_KEY_PADDING = ("        keys = to_additive_mask(key_padding_mask, dtype)[:, None, None, :]  # (B, 1, 1, Lk)\n"
                  "        merged = keys if merged is None else merged + keys\n", "        pass\n")
WEIGHTS_TRANSPOSED = ("return weights @ v, weights\n", "return weights @ v, weights.transpose(-2, -1)\n")
MERGE_RAISES = ("    merged = to_additive_mask(attn_mask, dtype)\n",
                "    raise RuntimeError('not yet')\n")


def variant(tmp_path, *changes) -> Path:
    source = REFERENCE.read_text()
    for find, replace in changes:
        assert source.count(find) == 1, f"reference/mhsa.py no longer holds {find!r}"
        source = source.replace(find, replace)
    path = tmp_path / "mhsa.py"
    path.write_text(source)
    return path


class Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.text = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def parsed(fragment: str) -> Tags:
    tags = Tags()
    tags.feed(fragment)
    tags.close()
    return tags


@pytest.mark.parametrize("part", ["sdpa", "heads", "masks", "mhsa", "block"])
def test_the_reference_has_nothing_to_show(part):
    assert picture(open_in_process(REFERENCE), part) is None


def test_a_missing_scale_shows_expected_and_yours_side_by_side(tmp_path):
    drawn = picture(open_in_process(variant(tmp_path, NO_SCALE)), "sdpa")
    assert isinstance(drawn, Picture) and drawn.part == "sdpa" and drawn.differing() > 0
    assert drawn.rows == ("q0", "q1", "q2", "q3") and drawn.columns == ("k0", "k1", "k2", "k3", "k4")
    expected, yours = drawn.expected[0], drawn.yours[0]
    for row in expected:  # the expected weights: rows of probabilities, two decimals
        assert abs(sum(row) - 1) < 0.03 and all(cell == round(cell, 2) for cell in row)
    assert yours != expected

    text = drawn.text()
    lines = text.splitlines()
    assert lines[0] == drawn.title and LEGEND in lines
    assert "rows = queries, columns = keys" in LEGEND
    header = next(line for line in lines if line.startswith(" ") and "yours - expected" in line)
    assert [name in header for name in BLOCKS] == [True] * 3 and header.count(" | ") == 2
    assert "*" in text and max(len(line) for line in lines) <= 100
    grid = [line for line in lines if line.startswith("q")]
    assert len(grid) == 4 and all(line.count(" | ") == 2 for line in grid)
    assert "*" not in grid[0].split(" | ")[0]  # marks are in yours and the difference, not in the expected

    fragment = drawn.html()
    tags = parsed(fragment)
    assert [tag for tag, _ in tags.tags].count("table") == 3
    assert not {tag for tag, _ in tags.tags} & {"script", "link", "img", "iframe", "style", "object"}
    assert not any(name.startswith("on") or name in ("src", "href") for _, attrs in tags.tags for name in attrs)
    assert "outline" in fragment and "url(" not in fragment
    assert [t for t in tags.text if t.strip() in BLOCKS] == list(BLOCKS)


def test_a_merge_masks_that_ignores_the_key_padding_mask_shows_the_blocked_pattern(tmp_path):
    backend = open_in_process(variant(tmp_path, NO_KEY_PADDING))
    drawn = picture(backend, "masks")
    assert drawn is not None and len(drawn.slices) == 2
    expected, yours = drawn.expected[0], drawn.yours[0]
    assert expected[4] == (0.0, 0.0, 0.0, None, None)  # query 4 of batch 0: keys 3 and 4 are padding
    assert yours[4] == (0.0,) * 5                       # yours lets it see them
    assert " -inf" in drawn.text() and "inf*" in drawn.text()
    assert picture(backend, "sdpa") is None
    assert picture(backend, "mhsa") is not None  # the padded keys get weight in MultiHeadSelfAttention too


def test_no_picture_of_the_wrong_shape_or_of_a_call_that_raised(tmp_path):
    transposed = open_in_process(variant(tmp_path, WEIGHTS_TRANSPOSED))
    assert picture(transposed, "sdpa") is None  # (1, 5, 4) where (1, 4, 5) is expected: nothing sound to draw
    raising = open_in_process(variant(tmp_path, MERGE_RAISES))
    assert picture(raising, "masks") is None and picture(raising, "mhsa") is None


def test_to_data_and_from_data_round_trip_through_json(tmp_path):
    drawn = picture(open_in_process(variant(tmp_path, NO_KEY_PADDING)), "masks")
    data = json.loads(json.dumps(drawn.to_data(), allow_nan=False))
    assert Picture.from_data(data) == drawn
    assert Picture.from_data(data).text() == drawn.text() and Picture.from_data(data).html() == drawn.html()


def sample(**changes) -> Picture:
    fields = dict(part="sdpa", title="t", slices=("batch 0",), rows=("q0", "q1"), columns=("k0", "k1"),
                  expected=(((0.5, 0.5), (1.0, 0.0)),), yours=(((0.5, 0.5), (1.0, 0.0)),))
    return Picture(**(fields | changes))


def test_cells_that_are_not_numbers_and_large_numbers_fit_the_grid():
    drawn = sample(yours=((("nan", "inf"), (None, -123456.0)),))
    assert drawn.differing() == 4
    assert drawn.differences() == ((("nan", "inf"), (None, -123456.0)),)
    text = drawn.text()
    assert "  nan*" in text and "  inf*" in text and " -inf*" in text and " -big*" in text
    assert Picture.from_data(json.loads(json.dumps(drawn.to_data(), allow_nan=False))) == drawn
    assert sample(yours=(((0.51, 0.49), (1.0, 0.0)),)).differing() == 0  # 0.01 apart: not marked


def test_text_from_a_results_file_is_escaped_in_html_and_checked_on_reading():
    hostile = "<script>alert('x')</script> & <img src=x onerror=1>"
    drawn = sample(title=hostile, rows=("<b>", "q1"), yours=(((0.9, 0.1), (1.0, 0.0)),))
    fragment = drawn.html()
    assert "<script" not in fragment and "<img" not in fragment and "<b>" not in fragment
    assert hostile in "".join(parsed(fragment).text)
    data = drawn.to_data()
    for broken in ({**data, "title": "two\nlines"}, {**data, "title": "\x1b[2J"}, {**data, "rows": ["q0"]},
                   {**data, "expected": [[[0.5, "x"], [1.0, 0.0]]]}, {**data, "yours": [[[True, 0.5], [1, 0]]]},
                   {**data, "extra": 1}, [], {k: v for k, v in data.items() if k != "part"}):
        with pytest.raises(ValueError):
            Picture.from_data(broken)


def test_picture_through_a_worker(tmp_path):
    """In the grader the submission runs in a worker: the picture only sends a call and reads the reply."""
    backend = WorkerBackend(variant(tmp_path, NO_SCALE), Isolation("process"))
    try:
        drawn = picture(backend, "mhsa")
    finally:
        backend.close()
    assert drawn is not None and drawn.slices == ("batch 0, head 0 (keys 3 and 4 are padding)",
                                                  "batch 0, head 1 (keys 3 and 4 are padding)")
    assert drawn == picture(open_in_process(variant(tmp_path, NO_SCALE)), "mhsa")


def test_the_module_holds_no_solution_formula():
    code = code_without_strings(Path(pictures.__file__).read_text())
    assert [name for name, pattern in FORMULAS.items() if re.search(pattern, code)] == []
