"""split_heads (B, L, d_model) -> (B, h, L, d_k) and merge_heads, its exact inverse."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tests_public.oracles import DEVICES, F64, check, invoke, randn

pytestmark = pytest.mark.part("heads")

SPLIT_HINT = ("split_heads(x, h)[b, i, l, :] must be x[b, l, i*d_k:(i+1)*d_k]: head i holds the "
              "consecutive features i*d_k:(i+1)*d_k of every position.")
MERGE_HINT = ("merge_heads(y)[b, l, i*d_k:(i+1)*d_k] must be y[b, i, l, :]: the heads are concatenated "
              "along the features, head 0 first.")


def split_formula(x, h):
    d_k = x.shape[-1] // h
    return torch.stack([x[..., i * d_k:(i + 1) * d_k] for i in range(h)], dim=1)


def merge_formula(y):
    return torch.cat([y[:, i] for i in range(y.shape[1])], dim=-1)


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


def check_split(impl, x, h):
    __tracebackhide__ = True
    outcome, call = invoke(impl, "split_heads", x, h)
    check(outcome.output, split_formula(x, h), what=f"{call.signature()}", hint=SPLIT_HINT,
          suspects=split_suspects(x, h))
    return outcome.output


def check_merge(impl, y):
    __tracebackhide__ = True
    outcome, call = invoke(impl, "merge_heads", y)
    check(outcome.output, merge_formula(y), what=f"{call.signature()}", hint=MERGE_HINT,
          suspects=merge_suspects(y))
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
    check_merge(impl, split_formula(x, 4))


def test_merge_undoes_split(impl):
    x = randn(2, 6, 20)
    split = check_split(impl, x, 5)
    outcome, call = invoke(impl, "merge_heads", split)
    check(outcome.output, x, what=f"merge_heads(split_heads(x, 5)) for x {tuple(x.shape)}",
          hint="merge_heads must be the exact inverse of split_heads.")


def test_split_heads_is_differentiable(impl):
    x, g = randn(2, 5, 12), randn(2, 3, 5, 4)
    outcome, call = invoke(impl, "split_heads", x, 3, grad_outputs=g)
    check(outcome.input_grads.get("arg0"), merge_formula(g), what=f"gradient of x after backward through "
          f"{call.signature()}", hint="use reshape/view/transpose/permute only: no .detach(), .numpy() or "
                                      "copying values into a new tensor.")


def test_merge_heads_is_differentiable(impl):
    y, g = randn(2, 3, 5, 4), randn(2, 5, 12)
    outcome, call = invoke(impl, "merge_heads", y, grad_outputs=g)
    check(outcome.input_grads.get("arg0"), split_formula(g, 3), what=f"gradient of y after backward "
          f"through {call.signature()}", hint="use reshape/view/transpose/permute only: no .detach(), "
                                              ".numpy() or copying values into a new tensor.")


@settings(max_examples=15)
@given(b=st.integers(1, 3), length=st.integers(1, 6), h=st.integers(1, 5), d_k=st.integers(1, 5),
       seed=st.integers(0, 2**16))
def test_random_shapes_round_trip(impl, b, length, h, d_k, seed):
    x = torch.randn(b, length, h * d_k, generator=torch.Generator().manual_seed(seed), dtype=F64)
    split = check_split(impl, x, h)
    check_merge(impl, split)
