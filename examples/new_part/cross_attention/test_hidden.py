"""cross_attention: against nn.MultiheadAttention(query=x, key=context, value=context) with identity
projections and no bias (values, weights, gradients), against the reference in float32, and the padding
property that needs no oracle."""
import warnings
from dataclasses import dataclass

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from autograder.testing.calls import Call
from autograder.testing.checks import expect_tuple, expect_untouched, expect_zero_where
from autograder.testing.oracles import blocked_of, padding_blocked, randn, torch_mha
from tests_hidden.support import (DTYPES, as_kind, examples, expect_close, generator, layout, random_lengths,
                                  with_cases)

pytestmark = pytest.mark.part("cross")
CROSS = "cross_attention"
RETURNS = "return a tuple (out, weights): out (B, Lq, d_model) and the weights (B, h, Lq, Lk)."


@dataclass(frozen=True)
class CrossCase:
    B: int
    Lq: int                  # queries: the length of x
    Lk: int                  # keys and values: the length of context
    d_model: int
    h: int
    padding: str = "none"    # none | bool (True = padding) | additive (-inf = padding) | unused (all False)
    dtype: str = "float64"
    contiguous: bool = True


EDGES = (CrossCase(B=1, Lq=1, Lk=1, d_model=1, h=1), CrossCase(B=1, Lq=5, Lk=2, d_model=6, h=3, padding="bool"),
         CrossCase(B=2, Lq=2, Lk=6, d_model=4, h=4, padding="additive", contiguous=False),
         CrossCase(B=3, Lq=4, Lk=3, d_model=8, h=2, padding="unused"))


@st.composite
def cross_cases(draw, paddings=("none", "bool", "additive", "unused"), dtypes=("float64",), contiguous=(True, False)):
    h, d_k = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    return CrossCase(B=draw(st.integers(1, 3)), Lq=draw(st.integers(1, 6)), Lk=draw(st.integers(1, 6)),
                     d_model=h * d_k, h=h, padding=draw(st.sampled_from(paddings)),
                     dtype=draw(st.sampled_from(dtypes)), contiguous=draw(st.sampled_from(contiguous)))


def cross_inputs(case):
    """(x, context) and the keyword arguments (key_padding_mask) of a case."""
    gen, dtype = generator(case), DTYPES[case.dtype]
    x = layout(randn((case.B, case.Lq, case.d_model), gen, dtype), case.contiguous)
    context = layout(randn((case.B, case.Lk, case.d_model), gen, dtype), case.contiguous)
    if case.padding == "none":
        return (x, context, case.h), {}
    lengths = [case.Lk] * case.B if case.padding == "unused" else random_lengths(gen, case.B, case.Lk)
    kind = "additive" if case.padding == "additive" else "bool"
    return (x, context, case.h), {"key_padding_mask": as_kind(padding_blocked(lengths, case.Lk), kind, dtype)}


def torch_cross(x, context, h, key_padding_mask=None, grads=None):
    """What cross_attention computes, by nn.MultiheadAttention with identity projections and no bias:
    (out, weights), and with grads (for out and weights) the gradients of x and of context too."""
    eye = torch.eye(x.shape[-1], dtype=x.dtype)
    module = torch_mha({"qkv.weight": torch.cat([eye, eye, eye]), "out.weight": eye}, h)
    if key_padding_mask is not None and key_padding_mask.dtype != torch.bool:
        key_padding_mask = key_padding_mask.to(x.dtype)
    # inputs that require grad keep torch off its fused inference path
    x, context = (t.detach().clone().requires_grad_(True) for t in (x, context))
    with torch.enable_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out, weights = module(x, context, context, key_padding_mask=key_padding_mask, need_weights=True,
                              average_attn_weights=False)
        if grads is None:
            return out.detach(), weights.detach()
        return out.detach(), weights.detach(), torch.autograd.grad((out, weights), (x, context), grads)


def check_case(impl, case, **call_fields):
    args, kwargs = cross_inputs(case)
    call = Call(CROSS, args, kwargs, **call_fields)
    outcome = impl.run(call)
    out, weights = expect_tuple(outcome.output, 2, call, RETURNS)
    return call, outcome, out, weights


@examples(15)
@given(case=cross_cases())
@with_cases(*EDGES)
def test_matches_torch(impl, case):
    """float64 against nn.MultiheadAttention: tight enough that a slightly wrong scale shows."""
    call, outcome, out, weights = check_case(impl, case)
    want_out, want_weights = torch_cross(*call.args, **call.kwargs)
    expect_close(weights, want_weights, "attention weights (B, h, Lq, Lk)", call)
    expect_close(out, want_out, "output", call)
    expect_untouched(outcome, call)


@pytest.mark.parametrize("kind", ["bool", "additive"])
def test_fully_used_mask_blocks_nothing(impl, kind):
    """Context sequences with no padding at all: a mask with nothing blocked is no mask."""
    case = CrossCase(B=3, Lq=4, Lk=5, d_model=8, h=2, padding="unused")
    x, context, h = cross_inputs(case)[0]
    mask = as_kind(padding_blocked([5, 5, 5], 5), kind, x.dtype)
    call = Call(CROSS, (x, context, h), {"key_padding_mask": mask})
    out, weights = expect_tuple(impl.run(call).output, 2, call, RETURNS)
    want_out, want_weights = torch_cross(x, context, h)
    hint = "no position is padding here (all False, or all 0.0): every context position keeps its weight."
    expect_close(weights, want_weights, "attention weights (B, h, Lq, Lk)", call, hint=hint)
    expect_close(out, want_out, "output", call, hint=hint)


@examples(8)
@given(case=cross_cases(dtypes=("float32",)))
def test_matches_reference_float32(impl, ref, case):
    call, _, out, weights = check_case(impl, case)
    want_out, want_weights = ref.run(call).output
    expect_close(weights, want_weights, "attention weights (B, h, Lq, Lk)", call)
    expect_close(out, want_out, "output", call)


@examples(8)
@given(case=cross_cases(paddings=("none", "bool"), contiguous=(True,)))
@example(case=CrossCase(B=2, Lq=3, Lk=4, d_model=4, h=2, padding="bool"))
def test_gradients_match_torch(impl, case):
    args, kwargs = cross_inputs(case)
    gen = generator(case, "grad")
    grads = (randn((case.B, case.Lq, case.d_model), gen), randn((case.B, case.h, case.Lq, case.Lk), gen))
    call, outcome, out, weights = check_case(impl, case, grad_outputs=grads)
    want_out, want_weights, (want_x, want_context) = torch_cross(*args, **kwargs, grads=grads)
    # the values first: wrong values explain wrong gradients, and the hint below is only about gradients
    expect_close(weights, want_weights, "attention weights (B, h, Lq, Lk)", call)
    expect_close(out, want_out, "output", call)
    hint = ("out and the weights must stay connected to x and context: no .detach(), .data, torch.no_grad() or "
            "tensors rebuilt with torch.tensor(...).")
    expect_close(outcome.input_grads.get("arg0"), want_x, "gradient of x", call, hint=hint)
    expect_close(outcome.input_grads.get("arg1"), want_context, "gradient of context", call, hint=hint)


@pytest.mark.self_comparison(parity="test_matches_torch")
@examples(8)
@given(case=cross_cases(paddings=("bool", "additive")))
def test_padded_context_is_invisible(impl, case):
    """Independent of any oracle: padded context positions get weight exactly 0, and what they hold
    changes no output."""
    call, _, out, weights = check_case(impl, case)
    x, context, h = call.args
    padded = blocked_of(call.kwargs["key_padding_mask"])  # (B, Lk)
    expect_zero_where(weights, padded[:, None, None, :], f"weights of {call.signature()}",
                      "key_padding_mask blocks context positions (columns of the weights): add it to the scores, "
                      "as (B, 1, 1, Lk), before the softmax.")
    changed = torch.where(padded[..., None], randn(context.shape, generator(case, "pad"), context.dtype), context)
    other = Call(CROSS, (x, changed, h), call.kwargs)
    expect_close(expect_tuple(impl.run(other).output, 2, other, RETURNS)[0], out,
                 "output after changing the padded context positions", other,
                 hint="what a padded context position holds still reaches the queries: padded keys get weight.")
