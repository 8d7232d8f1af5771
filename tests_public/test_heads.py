"""split_heads (B, L, d_model) -> (B, h, L, d_k) and merge_heads, its exact inverse.

Checked head by head against the definition (head i holds features i*d_k:(i+1)*d_k), and through
merge_heads(split_heads(x)) == x; every element of the result is compared.
"""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.testing.oracles import F64
from tests_public.support import DEVICES, check, expect_like, invoke, randn

pytestmark = pytest.mark.part("heads")

SPLIT_HINT = ("split_heads(x, h)[b, i, l, :] must be x[b, l, i*d_k:(i+1)*d_k]: head i holds the "
              "consecutive features i*d_k:(i+1)*d_k of every position.")
MERGE_HINT = ("merge_heads(y)[b, l, i*d_k:(i+1)*d_k] must be y[b, i, l, :]: the heads are concatenated "
              "along the features, head 0 first.")

GRADIENT_HINT = ("use reshape/view/transpose/permute only: no .detach(), .numpy() or copying values into a "
                 "new tensor.")


def split_suspects(x, h):
    b, length, d_model = x.shape
    return [
        (lambda: x.reshape(b, h, length, d_model // h),
         "reshaping (B, L, d_model) straight to (B, h, L, d_k) mixes positions into heads: first view "
         "the features as (h, d_k), giving (B, L, h, d_k), then swap the L and h axes."),
        (lambda: x.reshape(b, length, d_model // h, h).permute(0, 3, 1, 2),
         "head i must hold the consecutive features i*d_k:(i+1)*d_k, not every h-th feature: view "
         "the features as (h, d_k), not (d_k, h)."),
    ]


def merge_suspects(y):
    b, h, length, d_k = y.shape
    return [
        (lambda: y.reshape(b, length, h * d_k),
         "reshaping (B, h, L, d_k) straight to (B, L, h*d_k) mixes heads and positions: first swap "
         "the h and L axes, giving (B, L, h, d_k), then flatten the last two."),
        (lambda: y.permute(0, 2, 3, 1).reshape(b, length, h * d_k),
         "the heads must be concatenated (head i at features i*d_k:(i+1)*d_k), not interleaved: "
         "flatten (h, d_k), not (d_k, h)."),
    ]


def features(t, i, d_k):
    """Features i*d_k:(i+1)*d_k of the last dimension: head i of a (B, L, d_model) tensor."""
    return t[..., i * d_k:(i + 1) * d_k]


def check_split_result(got, x, h, what, hint=SPLIT_HINT, suspects=()):
    """got (B, h, L, d_k): head i must be the features i*d_k:(i+1)*d_k of x (B, L, d_model)."""
    __tracebackhide__ = True
    b, length, d_model = x.shape
    d_k = d_model // h
    expect_like(got, x.new_zeros(b, h, length, d_k), what)
    for i in range(h):
        check(got[:, i], features(x, i, d_k), what=f"head {i} of {what}", hint=hint,
              suspects=[(lambda make=make, i=i: make()[:, i], why) for make, why in suspects])


def check_merge_result(got, y, what, hint=MERGE_HINT, suspects=()):
    """got (B, L, h*d_k): its features i*d_k:(i+1)*d_k must be head i of y (B, h, L, d_k)."""
    __tracebackhide__ = True
    b, h, length, d_k = y.shape
    expect_like(got, y.new_zeros(b, length, h * d_k), what)
    for i in range(h):
        check(features(got, i, d_k), y[:, i], what=f"features {i * d_k}:{(i + 1) * d_k} (head {i}) of {what}",
              hint=hint, suspects=[(lambda make=make, i=i: features(make(), i, d_k), why) for make, why in suspects])


def check_split(impl, x, h):
    __tracebackhide__ = True
    outcome, call = invoke(impl, "split_heads", x, h)
    check_split_result(outcome.output, x, h, call.signature(), suspects=split_suspects(x, h))
    return outcome.output


def check_merge(impl, y):
    __tracebackhide__ = True
    outcome, call = invoke(impl, "merge_heads", y)
    check_merge_result(outcome.output, y, call.signature(), suspects=merge_suspects(y))
    return outcome.output


@pytest.mark.parametrize("b, length, h, d_k", [(2, 5, 3, 4), (1, 7, 2, 8), (3, 4, 6, 2)])
def test_split_heads_values(impl, b, length, h, d_k):
    check_split(impl, randn(b, length, h * d_k), h)


@pytest.mark.parametrize("h", [1, 12], ids=["one-head", "d_k=1"])
def test_split_heads_extreme_head_counts(impl, h):
    check_split(impl, randn(2, 5, 12), h)


@pytest.mark.parametrize("b, length, h, d_k", [(2, 5, 3, 4), (1, 7, 2, 8), (3, 4, 6, 2)])
def test_merge_heads_values(impl, b, length, h, d_k):
    check_merge(impl, randn(b, h, length, d_k))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16],
                         ids=["float32", "float64", "bfloat16"])
def test_keep_dtype_and_device(impl, dtype, device):
    x = randn(2, 5, 12, dtype=dtype).to(device)
    check_split(impl, x, 4)
    check_merge(impl, randn(2, 4, 5, 3, dtype=dtype).to(device))


def test_merge_undoes_split(impl):
    x = randn(2, 6, 20)
    split = check_split(impl, x, 5)
    outcome, call = invoke(impl, "merge_heads", split)
    check(outcome.output, x, what=f"merge_heads(split_heads(x, 5)) for x {tuple(x.shape)}",
          hint="merge_heads must be the exact inverse of split_heads.")


def test_split_heads_is_differentiable(impl):
    x, g = randn(2, 5, 12), randn(2, 3, 5, 4)
    outcome, call = invoke(impl, "split_heads", x, 3, grad_outputs=g)
    check_split_result(outcome.output, x, 3, call.signature())  # forward first: a wrong layout explains the gradient
    check_merge_result(outcome.input_grads.get("arg0"), g, f"gradient of x after backward through "
                       f"{call.signature()}", GRADIENT_HINT)


def test_merge_heads_is_differentiable(impl):
    y, g = randn(2, 3, 5, 4), randn(2, 5, 12)
    outcome, call = invoke(impl, "merge_heads", y, grad_outputs=g)
    check_merge_result(outcome.output, y, call.signature())  # forward first: a wrong layout explains the gradient
    check_split_result(outcome.input_grads.get("arg0"), g, 3, f"gradient of y after backward through "
                       f"{call.signature()}", GRADIENT_HINT)


@settings(max_examples=15)
@given(b=st.integers(1, 3), length=st.integers(1, 6), h=st.integers(1, 5), d_k=st.integers(1, 5),
       seed=st.integers(0, 2**16))
def test_random_shapes_round_trip(impl, b, length, h, d_k, seed):
    x = torch.randn(b, length, h * d_k, generator=torch.Generator().manual_seed(seed), dtype=F64)
    split = check_split(impl, x, h)
    check_merge(impl, split)
