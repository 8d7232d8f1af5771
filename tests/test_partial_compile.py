"""A .py submission with one syntax error loses only what the broken top-level statement defines, as
a notebook cell that does not compile does (autograder/intake/submission.py partial_module), and the
results say which line and what is missing."""
import json
import subprocess
import sys

from autograder.core.paths import REFERENCE, REPO
from autograder.intake import submission

REFERENCE_TEXT = REFERENCE.read_text()
BLOCK_FORWARD = "    def forward(self, x, attn_mask=None, key_padding_mask=None):\n"
SDPA_IF = "    if attn_mask is not None:\n        scores = scores + to_additive_mask("


def without_colon(line: str) -> tuple:
    """(the reference with the colon of `line`, which it holds once, removed; the line's number)."""
    assert REFERENCE_TEXT.count(line) == 1
    number = REFERENCE_TEXT[:REFERENCE_TEXT.index(line)].count("\n") + 1
    first = line.split("\n")[0]
    return REFERENCE_TEXT.replace(line, line.replace(first, first.removesuffix(":"), 1)), number


def grade(tmp_path, text: str) -> tuple:
    """`python -m autograder grade mhsa.py --results results.json`, as a TA runs it: (results, output)."""
    file, out = tmp_path / "mhsa.py", tmp_path / "results.json"
    file.write_text(text)
    run = subprocess.run([sys.executable, "-m", "autograder", "grade", str(file), "--results", str(out)],
                         cwd=REPO, capture_output=True, text=True, timeout=900)
    assert out.exists(), run.stdout + run.stderr
    return json.loads(out.read_text()), run.stdout


def scores(results: dict) -> dict:
    return {name: (p["score"], p["max_score"]) for name, p in results["extra_data"]["parts"].items()}


def test_syntax_error_in_transformer_block_costs_only_the_block(tmp_path):
    broken, line = without_colon(BLOCK_FORWARD)
    results, printed = grade(tmp_path, broken)
    got = scores(results)
    for part in ("sdpa", "heads", "masks", "mhsa"):
        assert got[part][0] == got[part][1] > 0, (part, got)
    assert got["block"][0] == 0
    note = results["extra_data"]["notes"][0]
    assert f"mhsa.py line {line} does not compile" in note and "(TransformerBlock)" in note, note
    assert note in results["output"] and note in printed


def test_syntax_error_in_sdpa_costs_sdpa_not_heads_or_masks(tmp_path):
    broken, line = without_colon(SDPA_IF)
    results, _ = grade(tmp_path, broken)  # mhsa and block call it: carried forward, they keep their points
    got = scores(results)
    assert got["sdpa"][0] == 0
    for part in ("heads", "masks", "mhsa", "block"):
        assert got[part][0] == got[part][1] > 0, (part, got)
    assert f"line {line} does not compile" in results["output"]
    assert "(scaled_dot_product_attention)" in results["extra_data"]["notes"][0]
    # the name is left bound, so mhsa's call of it is not read as the library function's
    assert "forbids" not in json.dumps(results), "a missing definition read as a library attention"


def test_a_file_that_compiles_is_graded_byte_for_byte():
    for path in (REFERENCE, REPO / "assignment" / "mhsa.py"):
        data = path.read_bytes()
        graded, notes = submission.partial_module(data, "mhsa.py")
        assert graded is data and notes == ()


def test_a_broken_last_line_is_left_out_and_every_other_line_kept():
    text = REFERENCE_TEXT + 'print("done"'  # no newline at the end either
    graded, notes = submission.partial_module(text.encode(), "alice.py")
    lines = text.split("\n")
    assert graded.decode().split("\n") == lines[:-1] + [""]
    compile(graded, "mhsa.py", "exec")
    assert notes == (f"alice.py line {len(lines)} does not compile (SyntaxError: '(' was never closed): "
                     "it is left out; the rest is graded",)


def test_lines_keep_their_numbers_and_docstring_text_at_column_0_is_not_split():
    broken, line = without_colon(BLOCK_FORWARD)
    graded = submission.partial_module(broken.encode(), "mhsa.py")[0].decode().split("\n")
    original = broken.split("\n")
    assert len(graded) == len(original)
    block = REFERENCE_TEXT.split("\n").index("class TransformerBlock(nn.Module):")
    assert graded[:block] == original[:block]
    assert graded[block].startswith("def TransformerBlock(*args, **kwargs): raise NotImplementedError(") and not any(graded[block + 1:])
    # The module docstring's text starts at column 0: still one chunk with the docstring's first line.
    assert submission.top_level_chunks(original)[0][1] > REFERENCE_TEXT.split('"""')[1].count("\n")


def test_continuations_at_column_0_stay_with_their_statement():
    lines = ["try:", "    import numpy", "except ImportError:", "    numpy = None", "x = (1,", ")",
             "@staticmethod", "def f(:", "    pass", "y = 2"]
    assert submission.top_level_chunks(lines) == [(0, 4), (4, 6), (6, 9), (9, 10)]


def test_the_folder_route_leaves_out_the_broken_chunk_too(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "work").mkdir()
    broken, _ = without_colon(BLOCK_FORWARD)
    (tmp_path / "sub" / "mhsa.py").write_text(broken)
    sub = submission.load(tmp_path / "sub", tmp_path / "work")
    compile(sub.source.read_bytes(), "mhsa.py", "exec")
    assert "TransformerBlock" in sub.notes[0] and "class TransformerBlock" not in sub.source.read_text()
