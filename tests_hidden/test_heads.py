"""split_heads and merge_heads, against their definition: head i holds features i*d_k:(i+1)*d_k."""
import pytest
import torch
from hypothesis import given

from autograder.testing.calls import Call
from autograder.testing.checks import expect_untouched
from autograder.testing.oracles import randn
from tests_hidden.support import DTYPES, HeadsCase, examples, expect_close, generator, heads_cases, layout, with_cases

pytestmark = pytest.mark.part("heads")
LAYOUT_HINT = "head i holds features i*d_k:(i+1)*d_k: reshape to (B, L, h, d_k), then transpose(1, 2)."
EDGES = (HeadsCase(B=1, L=1, h=1, d_k=1), HeadsCase(B=1, L=3, h=4, d_k=1), HeadsCase(B=2, L=1, h=1, d_k=3),
         HeadsCase(B=2, L=3, h=2, d_k=2, contiguous=False))


def _split(x, h):
    d_k = x.shape[-1] // h
    return torch.stack([x[..., i * d_k:(i + 1) * d_k] for i in range(h)], dim=1)


def _inputs(case, shape):
    return layout(randn(shape, generator(case), DTYPES[case.dtype]), case.contiguous)


@examples(15)
@given(case=heads_cases())
@with_cases(*EDGES)
def test_split_heads(impl, case):
    x = _inputs(case, (case.B, case.L, case.h * case.d_k))
    call = Call("split_heads", (x, case.h))
    outcome = impl.run(call)
    expect_close(outcome.output, _split(x, case.h), "output", call, hint=LAYOUT_HINT)
    expect_untouched(outcome, call)


@examples(15)
@given(case=heads_cases())
@with_cases(*EDGES)
def test_merge_heads(impl, case):
    y = _inputs(case, (case.B, case.h, case.L, case.d_k))
    call = Call("merge_heads", (y,))
    outcome = impl.run(call)
    expect_close(outcome.output, torch.cat(y.unbind(1), dim=-1), "output", call,
                 hint="merge_heads undoes split_heads: transpose(1, 2), then reshape to (B, L, h*d_k).")
    expect_untouched(outcome, call)


@examples(6)
@given(case=heads_cases(dtypes=("float64",)))
def test_gradients_flow_back(impl, case):
    """Both are rearrangements, so a gradient comes back rearranged the other way."""
    x = _inputs(case, (case.B, case.L, case.h * case.d_k))
    g = randn((case.B, case.h, case.L, case.d_k), generator(case, "grad"))
    call = Call("split_heads", (x, case.h), grad_outputs=(g,))
    expect_close(impl.run(call).input_grads.get("arg0"), torch.cat(g.unbind(1), dim=-1), "gradient of x", call)
    call = Call("merge_heads", (g,), grad_outputs=(x,))
    expect_close(impl.run(call).input_grads.get("arg0"), _split(x, case.h), "gradient of the input", call)
