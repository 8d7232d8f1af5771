"""Assertions whose failure messages speak to a student.

A Mismatch carries a summary (what was called, what is wrong: shapes, dtypes, how far off and where)
and a detail (the expected and actual values). Hidden tests show students the summary only.

A hint that names a cause (dropout, overflow, a layout) is a Cause: it is given only when the result
shows that cause (`seen`), so that a test about dropout does not blame dropout for a wrong scale.
A hint about the kind of result (a tensor, not a tuple) is a Structure: given only when the type or
shape is wrong. A hint that restates what is asked for is a plain string and always given.
"""
from dataclasses import dataclass
from typing import Callable

import torch

from autograder.isolation.guest.wire import Unsupported

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


@dataclass(frozen=True)
class Cause:
    """A hint naming a cause of a wrong value, given only when `seen(got, expected)` observes it."""
    text: str
    seen: Callable


@dataclass(frozen=True)
class Structure:
    """A hint about the kind of result asked for (a tensor, not a tuple; a shape), given only when the
    result's type or shape is wrong: wrong values have other causes."""
    text: str


def hint_for(hint, got, expected) -> str:
    """The text of `hint` for this result: a Cause's only when its evidence is in `got`; a
    Structure's never (the type and shape were right)."""
    if isinstance(hint, Structure):
        return ""
    if not isinstance(hint, Cause):
        return hint
    try:
        return hint.text if hint.seen(got, expected) else ""
    except Exception:  # noqa: BLE001 - evidence that cannot be read is no evidence
        return ""


def plain(hint) -> str:
    """A hint for a wrong type, shape, dtype or device: a Cause is about values, so it says nothing."""
    if isinstance(hint, Structure):
        return hint.text
    return "" if isinstance(hint, Cause) else hint


# --- evidence: what a wrong result shows (each seen(got, expected) -> bool) --------------------

def non_finite(got, expected) -> bool:
    """inf or NaN where the expected values are finite: an overflow, or -inf arithmetic."""
    return bool((~torch.isfinite(got) & torch.isfinite(expected)).any())


def dropped(got, expected) -> bool:
    """Some values exactly 0 where the expected are not, and the others the expected values times one
    factor (1, or 1/(1-p)): what dropout does. A mask on the wrong entries zeroes values too, but
    the softmax then spreads the weight over the others, which no one factor gives."""
    hit = (got == 0) & (expected != 0)
    if not hit.any():
        return False
    kept = ~hit & (expected != 0)
    return not kept.any() or bool(rescaled(got[kept], expected[kept]) or torch.allclose(
        got[kept].detach().to(torch.float64), expected[kept].detach().to(torch.float64), rtol=1e-4, atol=1e-6))


def rescaled(got, expected) -> bool:
    """`got` is `expected` times one factor other than 1 (a scale applied twice, or not at all)."""
    g, e = got.detach().to(torch.float64).reshape(-1), expected.detach().to(torch.float64).reshape(-1)
    big = e.abs() > 1e-6
    if not big.any():
        return False
    factor = float((g[big] / e[big]).median())
    return abs(factor - 1) > 1e-3 and bool(torch.allclose(g, factor * e, rtol=1e-3, atol=1e-6))


def close_to(other) -> Callable:
    """Evidence that `got` equals `other` (what a known mistake computes)."""
    return lambda got, expected: (tuple(got.shape) == tuple(other.shape) and bool(torch.allclose(
        got.detach().to(torch.float64), other.detach().to(torch.float64), rtol=1e-4, atol=1e-6)))


def any_of(*evidence) -> Callable:
    return lambda got, expected: any(seen(got, expected) for seen in evidence)


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
        raise Mismatch(f"{what}: expected a torch.Tensor, got {kind}.", hint=plain(hint))
    if tuple(got.shape) != tuple(expected.shape):
        raise Mismatch(f"{what}: expected shape {tuple(expected.shape)}, got {tuple(got.shape)}.",
                       hint=plain(hint) or shape_hint(got, expected))
    if check_dtype and got.dtype != expected.dtype:
        raise Mismatch(f"{what}: expected dtype {_name(expected.dtype)}, got {_name(got.dtype)}.",
                       hint=plain(hint) or "outputs keep the dtype of the inputs: avoid hard-coded .float() "
                                           "or torch.float32 when creating tensors.")
    if got.device != expected.device:
        raise Mismatch(f"{what}: expected a tensor on {expected.device}, got one on {got.device}.",
                       hint=plain(hint) or "create new tensors with device=x.device.")
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
        hint=hint_for(hint, got, expected))


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


def shape_hint(got: torch.Tensor, expected: torch.Tensor) -> str:
    """What the shapes themselves show, and nothing they do not."""
    g, e = tuple(got.shape), tuple(expected.shape)
    if sorted(g) == sorted(e):
        return "the right sizes in the wrong order: check which dimensions you transposed or permuted."
    missing = [dim for dim in range(len(e)) if len(g) == len(e) - 1 and e[:dim] + e[dim + 1:] == g]
    if missing and expected.is_floating_point() and got.is_floating_point():
        for dim in missing:
            for how, reduce in (("averaged", torch.mean), ("summed", torch.sum)):
                if close_to(reduce(expected.detach(), dim))(got, expected):
                    return f"the expected values {how} over dimension {dim} (size {e[dim]}): keep that dimension."
    if len(missing) == 1:
        return f"dimension {missing[0]} (size {e[missing[0]]}) is missing."
    if got.numel() == expected.numel():
        return "the right number of values in another shape: check the reshape or view."
    return ""
