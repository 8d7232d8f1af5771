"""Pictures of attention weights and masks: the expected ones beside the student's, on one small fixed case.

When a part about attention weights or masks fails, a table of numbers says more than "values
differ": `picture(backend, part)` runs one small fixed call per part (never a hidden test's inputs)
on the submission through its backend, computes the expected values with `testing/oracles.py`
(PyTorch's own implementations, no formula of the solution), and returns a `Picture`: plain data
that prints as three grids side by side (expected | yours | yours - expected), renders as HTML, and
goes into a results file and back (`to_data`, `from_data`). It returns None where there is nothing
sound to draw: a part without weights, a call that raised, an output of the wrong type or shape,
or one that matches the expected values to two decimals.
"""
import html
import math
from dataclasses import dataclass
from typing import Callable

import torch

from autograder.testing import oracles
from autograder.testing.calls import Call
from autograder.testing.oracles import F64

DIFFERS = 0.01  # a cell is marked where yours and the expected, both to two decimals, differ by more
BLOCKS = ("expected", "yours", "yours - expected")
LEGEND = (f"rows = queries, columns = keys; * = yours differs from expected by more than {DIFFERS}; "
          "-inf = blocked")
HTML_LEGEND = (f"rows = queries, columns = keys; outlined = yours differs from expected by more than {DIFFERS}; "
               "-inf (grey) = blocked; darker = larger, red = negative")
CELL = 5  # characters of a number in the text grid; one more follows it: `*` where the cell differs, else a space

# A cell: a float rounded to two decimals, None for -inf (blocked), or "nan" / "inf".
NOT_FINITE = ("nan", "inf")


@dataclass(frozen=True)
class Picture:
    """One case's attention weights (or mask): per slice (a batch, a head), a matrix of queries x keys."""
    part: str
    title: str
    slices: tuple    # a caption per matrix: "batch 0", "batch 0, head 1"
    rows: tuple      # query labels
    columns: tuple   # key labels
    expected: tuple  # [slice][row][column] cells
    yours: tuple     # the same shape

    def differences(self) -> tuple:
        """yours - expected, cell by cell, as cells (-inf - -inf and the like count as 0.0)."""
        return tuple(tuple(tuple(_minus(y, e) for y, e in zip(yours, expected))
                           for yours, expected in zip(*matrices)) for matrices in zip(self.yours, self.expected))

    def differing(self) -> int:
        """How many cells differ by more than DIFFERS (a non-finite difference always does)."""
        return sum(_marked(d) for matrix in self.differences() for row in matrix for d in row)

    def text(self) -> str:
        """Character grids for a terminal: per slice, expected | yours | yours - expected (under 100
        columns for five keys), differing cells marked with `*`."""
        label = max(len(r) for r in self.rows)
        width = len(self.columns) * (CELL + 1)
        lines, differences = [self.title, LEGEND], self.differences()
        for index, caption in enumerate(self.slices):
            blocks = (self.expected[index], self.yours[index], differences[index])
            lines += ["", caption,
                      " " * label + " | ".join(name.rjust(CELL).ljust(width) for name in BLOCKS),
                      " " * label + " | ".join("".join(f"{c.rjust(CELL)} " for c in self.columns) for _ in BLOCKS)]
            for r, name in enumerate(self.rows):
                cells = ["".join(f"{_shown(c)} " for c in blocks[0][r])]
                cells += ["".join(f"{_shown(c)}{'*' if _marked(d) else ' '}" for c, d in zip(block[r], blocks[2][r]))
                          for block in blocks[1:]]
                lines.append(name.ljust(label) + " | ".join(cells))
        return "\n".join(line.rstrip() for line in lines) + "\n"

    def html(self) -> str:
        """A self-contained HTML fragment (inline styles only; no scripts, no external resources):
        per slice three small tables, shaded by value, differing cells outlined; all text escaped."""
        out = ['<div style="font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12px; margin: 0.5em 0">',
               f'<div style="font-weight: bold">{_esc(self.title)}</div>',
               f'<div style="color: #555555">{_esc(HTML_LEGEND)}</div>']
        for caption, expected, yours, differences in zip(self.slices, self.expected, self.yours, self.differences()):
            out += [f'<div style="margin-top: 0.8em">{_esc(caption)}</div>',
                    '<div style="display: flex; flex-wrap: wrap; gap: 1.5em; align-items: flex-start">']
            for name, matrix in zip(BLOCKS, (expected, yours, differences)):
                out.append(self._table(name, matrix, differences if name != BLOCKS[0] else None))
            out.append("</div>")
        out.append("</div>")
        return "\n".join(out) + "\n"

    def _table(self, name, matrix, differences) -> str:
        head = "padding: 1px 4px; font-weight: normal; color: #555555"
        out = ['<table style="border-collapse: collapse; margin: 0">',
               f'<caption style="caption-side: top; text-align: left; font-weight: bold">{_esc(name)}</caption>',
               "<tr><th></th>" + "".join(f'<th style="{head}">{_esc(c)}</th>' for c in self.columns) + "</tr>"]
        for r, label in enumerate(self.rows):
            cells = []
            for c, cell in enumerate(matrix[r]):
                background, colour = _shade(cell)
                style = f"background: {background}; color: {colour}; padding: 2px 5px; text-align: right"
                if differences is not None and _marked(differences[r][c]):
                    style += "; outline: 2px solid #e000a0; outline-offset: -2px; font-weight: bold"
                cells.append(f'<td style="{style}">{_esc(_shown(cell).strip())}</td>')
            out.append(f'<tr><th style="{head}">{_esc(label)}</th>{"".join(cells)}</tr>')
        out.append("</table>")
        return "\n".join(out)

    def to_data(self) -> dict:
        """The picture as JSON-able plain data (lists, strings, floats, None)."""
        return {"part": self.part, "title": self.title, "slices": list(self.slices), "rows": list(self.rows),
                "columns": list(self.columns), "expected": _lists(self.expected), "yours": _lists(self.yours)}

    @classmethod
    def from_data(cls, data: dict) -> "Picture":
        """The picture `to_data` gave; ValueError when `data` is not one."""
        if not isinstance(data, dict) or set(data) != {"part", "title", "slices", "rows", "columns", "expected", "yours"}:
            raise ValueError("a picture is a dict of part, title, slices, rows, columns, expected and yours")
        part, title = (_text(data[key], key) for key in ("part", "title"))
        slices, rows, columns = (_texts(data[key], key) for key in ("slices", "rows", "columns"))
        if not (slices and rows and columns):
            raise ValueError("a picture has at least one slice, row and column")
        shape = (len(slices), len(rows), len(columns))
        return cls(part, title, slices, rows, columns, _matrices(data["expected"], shape), _matrices(data["yours"], shape))


# ------------------------------------------------------------------------------------------------
# The fixed cases
# ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Case:
    call: Call
    expected: torch.Tensor             # (slices, rows, columns)
    yours: Callable                    # the call's output -> a tensor like `expected`, or None
    title: str
    slices: tuple
    rows: tuple
    columns: tuple


def _generator(seed):
    return torch.Generator().manual_seed(seed)


def _sdpa_case() -> _Case:
    q = oracles.randn((1, 4, 4), _generator(1))
    k, v = oracles.randn((1, 5, 4), _generator(2)), oracles.randn((1, 5, 4), _generator(3))
    blocked = oracles.random_blocked((4, 5), _generator(4), p=0.4)  # every query keeps a key
    expected = oracles.sdpa_expected(q, k, v, blocked).weights  # (1, 4, 5)
    return _Case(Call("scaled_dot_product_attention", (q, k, v), {"attn_mask": blocked}), expected,
                 lambda output: _plain(_second(output), expected.shape),
                 "scaled_dot_product_attention: weights for q (1,4,4), k and v (1,5,4), a bool attn_mask (4,5)",
                 ("batch 0",), _labels("q", 4), _labels("k", 5))


MASK_LENGTHS = (3, 4)


def _masks_case() -> _Case:
    causal = oracles.causal_blocked(5)
    padding = oracles.padding_blocked(list(MASK_LENGTHS), 5)  # (2, 5)
    expected = oracles.additive(causal[None] | padding[:, None, :], F64)  # blocked by either: (2, 5, 5)

    def yours(output):
        mask = _plain(output)
        try:
            return None if mask is None else torch.broadcast_to(mask, (2, 1, 5, 5))[:, 0]
        except RuntimeError:
            return None

    slices = tuple(f"batch {b}: key padding from key {n} on" for b, n in enumerate(MASK_LENGTHS))
    return _Case(Call("merge_masks", (oracles.additive(causal, F64), padding, F64)), expected, yours,
                 "merge_masks(causal float (5,5), key padding bool (2,5), float64), broadcast to (2,1,5,5)",
                 slices, _labels("q", 5), _labels("k", 5))


def _mhsa_case() -> _Case:
    x = oracles.randn((2, 5, 8), _generator(5))
    state = oracles.mhsa_state(8, oracles.seeded_draws(10))
    padding = oracles.padding_blocked([3, 5], 5)
    expected = oracles.mha_expected(state, x, 2, key_padding_mask=padding).weights  # (2, 2, 5, 5)

    def yours(output):
        weights = _plain(_second(output), expected.shape)
        return None if weights is None else weights[0]

    call = Call("MultiHeadSelfAttention", (x,), {"key_padding_mask": padding, "need_weights": True},
                init={"d_model": 8, "num_heads": 2}, state=state, dtype=F64)
    return _Case(call, expected[0], yours,
                 "MultiHeadSelfAttention(8, 2): weights for x (2,5,8), key_padding_mask lengths 3 and 5",
                 ("batch 0, head 0 (keys 3 and 4 are padding)", "batch 0, head 1 (keys 3 and 4 are padding)"),
                 _labels("q", 5), _labels("k", 5))


CASES = {"sdpa": _sdpa_case, "masks": _masks_case, "mhsa": _mhsa_case}
PARTS = tuple(CASES)  # the parts with a picture; heads and block have no weights to show


def picture(backend, part: str) -> Picture | None:
    """The expected weights (or mask) of `part`'s fixed case beside the submission's, or None: a part
    without one, a call that raised, an output of the wrong type or shape, or nothing that differs."""
    if part not in CASES:
        return None
    case = CASES[part]()
    try:
        outcome = backend.run(case.call)
    except Exception:  # noqa: BLE001 - a call that raises has nothing to draw; its tests say why
        return None
    yours = case.yours(outcome.output)
    if yours is None:
        return None
    drawn = Picture(part, case.title, case.slices, case.rows, case.columns, _cells(case.expected), _cells(yours))
    return drawn if drawn.differing() else None


# ------------------------------------------------------------------------------------------------
# Cells
# ------------------------------------------------------------------------------------------------

def _labels(prefix, n) -> tuple:
    return tuple(f"{prefix}{i}" for i in range(n))


def _second(output):
    """The second of a pair (out, weights), or None."""
    return output[1] if isinstance(output, (tuple, list)) and len(output) == 2 else None


def _plain(value, shape=None) -> torch.Tensor | None:
    """`value` as a float64 CPU tensor when it is a plain floating tensor (of `shape`, when given)."""
    if type(value) is not torch.Tensor or not value.is_floating_point() or value.device.type != "cpu" \
            or value.layout != torch.strided:  # a meta or sparse result has no values to draw
        return None
    if shape is not None and tuple(value.shape) != tuple(shape):
        return None
    return value.detach().to("cpu", F64)


def _cell(value: float):
    if value == -math.inf:
        return None
    if math.isnan(value):
        return "nan"
    if value == math.inf:
        return "inf"
    return round(value, 2) + 0.0  # + 0.0: no -0.0


def _cells(matrices: torch.Tensor) -> tuple:
    return tuple(tuple(tuple(_cell(v) for v in row) for row in matrix) for matrix in matrices.tolist())


def _number(cell) -> float:
    return -math.inf if cell is None else float(cell)


def _minus(yours, expected):
    if yours == expected:
        return 0.0
    return _cell(_number(yours) - _number(expected))


def _marked(difference) -> bool:
    return not isinstance(difference, float) or abs(difference) > DIFFERS + 1e-9


def _shown(cell) -> str:
    """A cell in CELL characters: two decimals where they fit, fewer for larger numbers."""
    if cell is None:
        return " -inf"
    if isinstance(cell, str):
        return cell.rjust(CELL)
    for text in (f"{cell:.2f}", f"{cell:.1f}", f"{cell:.0f}"):
        if len(text) <= CELL:
            return text.rjust(CELL)
    return " +big" if cell > 0 else " -big"


def _shade(cell) -> tuple:
    """(background, text colour) of a cell: white to blue for 0 to 1 and above, white to red below 0."""
    if cell is None:
        return "#6b6b6b", "#ffffff"
    if isinstance(cell, str):
        return "#f2c200", "#000000"
    strength = min(abs(cell), 1.0)
    base = (33, 102, 172) if cell >= 0 else (178, 24, 43)
    red, green, blue = (round(255 + (c - 255) * strength) for c in base)
    return f"#{red:02x}{green:02x}{blue:02x}", "#ffffff" if strength > 0.55 else "#000000"


def _esc(text: str) -> str:
    return html.escape(str(text), quote=True)


def _lists(matrices) -> list:
    return [[list(row) for row in matrix] for matrix in matrices]


# ------------------------------------------------------------------------------------------------
# Reading data back
# ------------------------------------------------------------------------------------------------

def _text(value, key) -> str:
    if not isinstance(value, str) or not value.isprintable() or len(value) > 200:
        raise ValueError(f"a picture's {key} must be one printable line of text")
    return value


def _texts(value, key) -> tuple:
    if not isinstance(value, list) or len(value) > 64:
        raise ValueError(f"a picture's {key} must be a list of at most 64 texts")
    return tuple(_text(v, key) for v in value)


def _read_cell(value):
    if value is None or value in NOT_FINITE:
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"a picture's cell must be a number, None, 'nan' or 'inf', not {type(value).__name__}")
    return _cell(float(value))


def _matrices(value, shape) -> tuple:
    slices, rows, columns = shape
    if not (isinstance(value, list) and len(value) == slices
            and all(isinstance(m, list) and len(m) == rows for m in value)
            and all(isinstance(r, list) and len(r) == columns for m in value for r in m)):
        raise ValueError(f"a picture's matrices must be nested lists of shape {shape}")
    return tuple(tuple(tuple(_read_cell(v) for v in row) for row in matrix) for matrix in value)
