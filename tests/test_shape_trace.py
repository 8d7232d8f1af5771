"""The shape trace (executor.ShapeTrace): when a torch operation of the student's own code raises a
shape error, what they read lists the shapes of their tensors up to it, with their file's lines and
their functions' names: through `check`, through `pytest tests_public` in-process and from the worker.
A correct submission, a wrong value and an error the student raises themselves show none, and the
forbidden-API monitor stays the first mode every operation meets."""
import re
import subprocess
import sys
import types

import pytest
import torch

from autograder.core import errors
from autograder.core.paths import REFERENCE, REPO
from autograder.isolation.guest import executor
from autograder.testing.backends import InProcessBackend
from autograder.testing.calls import Call

HEADER = "Shapes of your tensors up to the error (most recent last):"
REFERENCE_TEXT = REFERENCE.read_text()
KEYS_4D = "[:, None, None, :]  # (B, 1, 1, Lk)"
FORWARD_MASK = "        mask = merge_masks(attn_mask, key_padding_mask, dtype=x.dtype)  # (B|1, h|1, L, L) or None\n"
# The trace's line for a (B, Lk) key padding mask indexed to (B, 1, Lk), in the function `name`.
TO_B1LK = r"{name}: \((\d+), (\d+)\)\[:, None, :\] -> \(\1, 1, \2\)"
FAILING_ADD = re.compile(r"scaled_dot_product_attention: add\(\(\d+, \d+, \d+, \d+\), \(\d+, 1, \d+\)\) -> error")


def replaced(old: str, new: str) -> str:
    assert REFERENCE_TEXT.count(old) == 1, old
    return REFERENCE_TEXT.replace(old, new)


# merge_masks returns the key padding mask as (B, 1, Lk) instead of (B, 1, 1, Lk): added to the
# (B, h, Lq, Lk) scores in scaled_dot_product_attention, its B lines up with h and the add fails.
MERGE_MASKS_B1LK = replaced(KEYS_4D, "[:, None, :]")
# The same mistake made in MultiHeadSelfAttention.forward itself (it builds the padding part of the
# mask on its own). `check` shows this one: merge_masks' own mistake fails merge_masks' tests on the
# shape of its result, and the mhsa and block tests that then raise pass with the grader's correct
# merge_masks in their place (error carried forward), so `check` lists no error of theirs.
FORWARD_B1LK = replaced(FORWARD_MASK, "        mask = merge_masks(attn_mask, None, dtype=x.dtype)\n"
                                      "        if key_padding_mask is not None:\n"
                                      "            keys = to_additive_mask(key_padding_mask, x.dtype)[:, None, :]\n"
                                      "            mask = keys if mask is None else mask + keys\n")
NO_SCALE = replaced("q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))", "q @ k.transpose(-2, -1)")


def run(command):
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=900)


def submission(tmp_path, text: str):
    path = tmp_path / "mhsa.py"
    path.write_text(text)
    return path


def trace_of(text: str) -> list:
    """The trace's lines in `text` (a failure message, or pytest's or check's output)."""
    assert HEADER in text, text[-4000:]
    lines = []
    for line in text.split(HEADER, 1)[1].splitlines()[1:]:
        line = re.sub(r"^E\s+", "", line).strip()  # pytest's "E   " margin, check's indent
        if not re.match(r"\S+\.py:\d+ ", line):
            break
        lines.append(line)
    return lines


def test_check_shows_the_shapes_up_to_the_error(tmp_path):
    """(1) `check` through the worker: the failing test's message holds the trace, the (B, 1, Lk)
    mask made in the student's forward among its lines and the failing add last."""
    result = run([sys.executable, "-m", "autograder", "check", str(submission(tmp_path, FORWARD_B1LK))])
    assert result.returncode == 0, result.stdout + result.stderr
    lines = trace_of(result.stdout)
    assert 0 < len(lines) <= executor.SHAPE_TRACE_LINES
    assert any(re.search(TO_B1LK.format(name=r"MultiHeadSelfAttention\.forward"), line) for line in lines), lines
    assert FAILING_ADD.search(lines[-1]), lines
    assert all(line.startswith("mhsa.py:") for line in lines), lines
    assert result.stdout.index(HEADER) < result.stdout.index("Raised by the call MultiHeadSelfAttention(")


@pytest.mark.parametrize("isolation", ["inprocess", "process"])
def test_pytest_shows_the_shapes_up_to_the_error(tmp_path, isolation):
    """(2) the student's own `pytest tests_public --impl FILE`, in-process (the default) and from the
    worker: merge_masks' (B, 1, Lk) result is in the trace of the error it leads to."""
    result = run([sys.executable, "-m", "pytest", "tests_public", "--impl", str(submission(tmp_path, MERGE_MASKS_B1LK)),
                  "--isolation", isolation, "-p", "no:cacheprovider", "-x", "-k", "test_mask_kinds"])
    assert result.returncode == 1, result.stdout[-3000:]
    lines = trace_of(result.stdout)
    assert any(re.search(TO_B1LK.format(name="merge_masks"), line) for line in lines), lines
    assert FAILING_ADD.search(lines[-1]), lines
    assert "executor.py" not in result.stdout and "autograder/" not in result.stdout


def test_a_correct_submission_shows_no_trace():
    """(3) the reference through the same tests: nothing fails, nothing is traced."""
    result = run([sys.executable, "-m", "pytest", "tests_public", "--impl", str(REFERENCE), "-p", "no:cacheprovider",
                  "-k", "test_mask_kinds or key_padding"])
    assert result.returncode == 0, result.stdout[-3000:]
    assert HEADER not in result.stdout


def test_a_wrong_value_shows_no_trace(tmp_path):
    """(4) a missing 1/sqrt(d_k) fails on values, not on an error: no trace."""
    result = run([sys.executable, "-m", "pytest", "tests_public/test_sdpa.py", "--impl",
                  str(submission(tmp_path, NO_SCALE)), "-p", "no:cacheprovider", "-x"])
    assert result.returncode == 1 and "FAILED" in result.stdout, result.stdout[-3000:]
    assert HEADER not in result.stdout


# ---------------------------------------------------------------- the executor's record, in this process

def module(tmp_path, source: str):
    """A submission made of `source`, loaded as the in-process backend loads one."""
    return InProcessBackend(submission(tmp_path, "import torch\nimport torch.nn.functional as F\n" + source))


def raised(backend, target, *args) -> BaseException:
    with pytest.raises(Exception) as caught:
        backend.run(Call(target, args))
    return caught.value


def test_the_header_is_the_executors():
    assert executor.SHAPE_TRACE_HEADER == HEADER


def test_only_the_students_lines_and_the_last_few(tmp_path):
    """Operations torch runs inside nn.Linear count for the student's line that called it; the grader's
    and torch's own frames never show; only the last SHAPE_TRACE_LINES of a long run."""
    backend = module(tmp_path, "def f(x):\n"
                               "    layer = torch.nn.Linear(4, 6)\n"
                               "    for _ in range(40):\n"
                               "        x = x.unsqueeze(0).squeeze(0)\n"
                               "    y = layer(x)\n"
                               "    return y.view(7, -1)\n")
    err = raised(backend, "f", torch.randn(2, 4))
    assert type(err) is RuntimeError and str(err).startswith("shape '[7, -1]' is invalid")
    lines = trace_of(str(err))
    assert len(lines) == executor.SHAPE_TRACE_LINES
    assert lines[-2] == "mhsa.py:7  f: linear((2, 4), (6, 4), (6,)) -> (2, 6)"
    assert lines[-1] == "mhsa.py:8  f: view((2, 6), 7, -1) -> error"
    assert all(line.startswith("mhsa.py:6  f: ") for line in lines[:-2]), lines


def test_the_trace_keeps_what_tells_about_shapes(tmp_path):
    """Kept: a tensor whose shape or dtype differs from its one tensor argument's, several tensors out
    (chunk), and any operation with two tensor arguments. Left out: an operation that gives no tensor
    (a size, a number, a list of sizes) and one tensor in giving the same shape and dtype out."""
    backend = module(tmp_path, "def f(x):\n"
                               "    n = x.size(0)\n"
                               "    sizes = [x.dim(), x.numel()]\n"
                               "    y = torch.softmax(x, -1)\n"
                               "    a, b = x.chunk(2, -1)\n"
                               "    z = a + b\n"
                               "    w = z.sum(-1)\n"
                               "    return w.view(5, -1)\n")
    lines = trace_of(str(raised(backend, "f", torch.randn(3, 4))))
    assert [re.sub(r"^mhsa\.py:\d+\s+f: ", "", line) for line in lines] == [
        "chunk((3, 4), 2, -1) -> ((3, 2), (3, 2))", "add((3, 2), (3, 2)) -> (3, 2)", "sum((3, 2), -1) -> (3,)",
        "view((3,), 5, -1) -> error"], lines


def test_an_error_of_the_students_own_has_no_trace(tmp_path):
    """The student's own raise (an argument check) and an error torch raised that their code caught
    and replaced: no trace, the message as they wrote it."""
    backend = module(tmp_path, "def f(x):\n"
                               "    y = x.unsqueeze(0)\n"
                               "    raise ValueError('x must be 3-D')\n"
                               "def g(x):\n"
                               "    try:\n"
                               "        return x.view(7, -1)\n"
                               "    except RuntimeError:\n"
                               "        raise RuntimeError('cannot view')\n")
    assert str(raised(backend, "f", torch.randn(2, 4))) == "x must be 3-D"
    assert str(raised(backend, "g", torch.randn(2, 4))) == "cannot view"


def test_a_shape_that_does_not_unpack_is_traced(tmp_path):
    """merge_heads handed a 3-D tensor: `B, h, L, d_k = x.shape` fails in the student's code."""
    source = REFERENCE_TEXT.replace("return x.reshape(B, L, num_heads, d_model // num_heads).transpose(1, 2)",
                                    "return x.reshape(B, L, d_model)")
    with pytest.raises(ValueError) as caught:
        InProcessBackend(submission(tmp_path, source)).run(
            Call("MultiHeadSelfAttention", (torch.randn(2, 5, 12),), init={"d_model": 12, "num_heads": 3}))
    assert "not enough values to unpack" in str(caught.value)
    assert any(re.search(r"MultiHeadSelfAttention\.forward: chunk\(\(2, 5, 36\), 3\)", line)
               for line in trace_of(str(caught.value)))


def test_the_worker_sends_the_trace_apart_and_the_grader_cleans_it():
    """errors.raised places the worker's trace after the message and before the call, as text from a
    submission: cleaned like the rest."""
    err = errors.raised("RuntimeError", "sizes differ", '  File "mhsa.py", line 3, in f\n', "f(float32(2, 4))",
                        f"{HEADER}\n  mhsa.py:3  f\x1b[2J: add((2, 4), (3,)) -> error")
    text = str(err)
    assert isinstance(err, RuntimeError)
    assert text.index("sizes differ") < text.index(HEADER) < text.index("Raised by the call") \
        < text.index("Where it was raised")
    assert "\x1b" not in text and "mhsa.py:3  f: add((2, 4), (3,)) -> error" in text
    assert HEADER not in str(errors.raised("RuntimeError", "sizes differ", "", "f()"))


def test_the_monitor_stays_first_and_still_wins(tmp_path):
    """Every operation meets the ForbiddenApiMonitor first (the top of torch's mode stack), the trace
    below it; a library attention followed by a shape error is reported as the forbidden API."""
    backend = module(tmp_path, "def modes(x):\n"
                               "    from torch.overrides import _get_current_function_mode_stack\n"
                               "    return [type(m).__name__ for m in _get_current_function_mode_stack()]\n"
                               "def cheat(q):\n"
                               "    out = F.scaled_dot_product_attention(q, q, q)\n"
                               "    return out + torch.zeros(3, 3)\n")
    assert backend.run(Call("modes", (torch.zeros(1),))).output[-2:] == ["ShapeTrace", "ForbiddenApiMonitor"]
    with pytest.raises(errors.ForbiddenApiError):
        backend.run(Call("cheat", (torch.randn(2, 5, 4),)))
    assert executor.shape_trace_of(types.SimpleNamespace()) == ""
