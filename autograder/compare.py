"""Assertions whose failure messages speak to a student.

A Mismatch carries a summary (what was called, what is wrong: shapes, dtypes, how far off and where)
and a detail (the expected and actual values). Hidden tests show students the summary only.
"""
import torch

from autograder.sandbox.wire import Unsupported

TOLERANCES = {  # (rtol, atol)
    torch.float64: (1e-7, 1e-9),
    torch.float32: (1e-4, 1e-5),
    torch.bfloat16: (2e-2, 2e-2),
    torch.float16: (5e-3, 5e-3),
}


class Mismatch(AssertionError):
    def __init__(self, summary: str, detail: str = "", hint: str = ""):
        self.summary, self.detail, self.hint = summary, detail, hint
        super().__init__(self.text(show_values=True))

    def text(self, show_values: bool) -> str:
        lines = [self.summary]
        if show_values and self.detail:
            lines.append(self.detail)
        if self.hint:
            lines.append(f"Hint: {self.hint}")
        return "\n".join(lines)


def tolerance(dtype: torch.dtype) -> tuple:
    return TOLERANCES.get(dtype, (0.0, 0.0))


def expect(condition: bool, summary: str, detail: str = "", hint: str = "") -> None:
    if not condition:
        raise Mismatch(summary, detail, hint)


def expect_tensor(got, expected: torch.Tensor, *, what: str, rtol=None, atol=None, hint: str = "",
                  check_dtype: bool = True) -> None:
    """`got` must be a plain tensor with expected's shape, dtype and device, and close values.

    Positions where both are ±inf must agree exactly (masks); NaN never matches.
    """
    if not isinstance(got, torch.Tensor) or type(got) is not torch.Tensor:
        kind = ("a tensor subclass" if isinstance(got, torch.Tensor) else repr(got) if got is None
                else got.what if isinstance(got, Unsupported) else type(got).__name__)
        raise Mismatch(f"{what}: expected a torch.Tensor, got {kind}.", hint=hint)
    if tuple(got.shape) != tuple(expected.shape):
        raise Mismatch(f"{what}: expected shape {tuple(expected.shape)}, got {tuple(got.shape)}.",
                       hint=hint or _shape_hint(tuple(got.shape), tuple(expected.shape)))
    if check_dtype and got.dtype != expected.dtype:
        raise Mismatch(f"{what}: expected dtype {_name(expected.dtype)}, got {_name(got.dtype)}.",
                       hint=hint or "outputs keep the dtype of the inputs: avoid hard-coded .float() "
                                    "or torch.float32 when creating tensors.")
    if got.device != expected.device:
        raise Mismatch(f"{what}: expected a tensor on {expected.device}, got one on {got.device}.",
                       hint=hint or "create new tensors with device=x.device.")
    if expected.dtype == torch.bool or not expected.is_floating_point():
        bad = got != expected
    else:
        default_rtol, default_atol = tolerance(expected.dtype)
        rtol = default_rtol if rtol is None else rtol
        atol = default_atol if atol is None else atol
        bad = ~torch.isclose(got.detach().to(expected.dtype), expected.detach(), rtol=rtol, atol=atol)
    if not bad.any():
        return
    count, total = int(bad.sum()), bad.numel()
    where, error = _worst(got.detach(), expected.detach(), bad)
    position = f" at index {where}" if where else ""
    raise Mismatch(
        f"{what}: {count} of {total} values differ from the expected ones; {error}{position}.",
        detail=f"At {where or 'that position'}: expected {_value(expected, where)}, got {_value(got, where)}.",
        hint=hint)


def _worst(got, expected, bad):
    index = tuple(int(i) for i in bad.nonzero()[0])
    if expected.is_floating_point():
        g, e = got.to(expected.dtype), expected
        nan = torch.isnan(g) & bad
        if nan.any():
            index = tuple(int(i) for i in nan.nonzero()[0])
            return index, "NaN where a number was expected"
        inf = (torch.isinf(g) | torch.isinf(e)) & bad
        if inf.any():
            index = tuple(int(i) for i in inf.nonzero()[0])
            return index, "infinities where they should not be (or missing where they should)"
        diff = torch.where(bad, (g - e).abs(), torch.zeros_like(e))
        flat = int(diff.reshape(-1).argmax())
        index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), diff.shape))
        return index, f"largest error {float(diff.reshape(-1)[flat]):.3g}"
    return index, "first difference"


def _value(t, where):
    try:
        return f"{t[where].item()!r}" if where else repr(t.item() if t.numel() == 1 else t)
    except (IndexError, RuntimeError, ValueError):
        return "?"


def _name(dtype):
    return str(dtype).removeprefix("torch.")


def _shape_hint(got, expected):
    if sorted(got) == sorted(expected):
        return "the right sizes in the wrong order: check which dimensions you transposed or permuted."
    if len(got) != len(expected):
        return f"expected {len(expected)} dimensions, got {len(got)}: a missing reshape, or a squeeze()?"
    return ""
