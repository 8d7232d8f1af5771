"""scaled_dot_product_attention: softmax(q k^T / sqrt(d_k) + mask) v, with optional dropout."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.testing.calls import Call
from autograder.testing.checks import expect_tuple, expect_zero_where
from autograder.testing.compare import Cause, Mismatch, any_of, close_to, dropped, non_finite
from autograder.testing.oracles import F64, sdpa_expected
from tests_public.support import (DEVICES, check, check_dropped_weights, check_weights_and_output, invoke,
                                  randn, random_bool_mask)

pytestmark = pytest.mark.part("sdpa")

SDPA = "scaled_dot_product_attention"
RETURNS = "return a tuple (out, weights): the attention output and the attention weights."


def sdpa(impl, *args, **kwargs):
    __tracebackhide__ = True
    outcome, call = invoke(impl, SDPA, *args, **kwargs)
    out, weights = expect_tuple(outcome.output, 2, call, RETURNS)
    return out, weights, call


def weight_suspects(q, k, v, mask=None):
    """What typical mistakes make of the weights (computed by torch with the wrong scale, mask or
    axis); each with the hint that names the mistake."""
    d_k, d_v = q.shape[-1], v.shape[-1]

    def weights(scale=None, mask=mask):
        return lambda: sdpa_expected(q, k, v, mask, scale).weights

    def over_queries():  # the softmax over the queries: torch's over the keys of k q^T, transposed
        flipped = None if mask is None else mask.transpose(-1, -2)
        return sdpa_expected(k, q, q, flipped).weights.transpose(-1, -2)

    suspects = [
        (weights(scale=1.0), "did you forget to divide the scores q k^T by sqrt(d_k)?"),
        (weights(scale=1.0 / d_k), "divide the scores by sqrt(d_k), not by d_k."),
        (weights(scale=d_k ** 0.5), "the scores are divided by sqrt(d_k), not multiplied by it."),
        (weights(scale=d_v ** -0.5), "d_k is the size of the last dimension of q and k, not of v."),
        (over_queries, "the softmax runs over the wrong dimension: each query's weights over the keys (the "
                       "last dimension) must sum to 1."),
    ]
    if mask is not None and mask.dtype == torch.bool:
        suspects.append((weights(mask=~mask),
                         "the boolean mask is inverted: True means blocked (-inf), False means allowed."))
        suspects.append((weights(mask=None),
                         "the mask was ignored: add it (as -inf where blocked) to the scores before "
                         "the softmax."))

        def blocked_scores_zeroed():  # a key of zeros scores 0: one query at a time, its blocked keys zeroed
            batch = q.shape[:-2]
            allowed = (~mask).to(k.dtype).expand(*batch, q.shape[-2], k.shape[-2])
            keys, values = k.expand(*batch, *k.shape[-2:]), v.expand(*batch, *v.shape[-2:])
            return torch.cat([sdpa_expected(q[..., i:i + 1, :], keys * allowed[..., i, :, None], values).weights
                              for i in range(q.shape[-2])], dim=-2)

        suspects.append((blocked_scores_zeroed,
                         "blocked scores were set to 0, not -inf: a score of 0 still gets a share of the "
                         "softmax. Fill blocked positions with float('-inf') (handout, section 1.5)."))
    return suspects


def check_attention(out, weights, call, q, k, v, mask=None, **tol):
    __tracebackhide__ = True
    want = sdpa_expected(q, k, v, mask)
    expected_out, expected_w = want.output, want.weights
    check(weights, expected_w, what=f"weights returned by {call.signature()}",
          suspects=weight_suspects(q, k, v, mask),
          hint="weights = softmax(q k^T / sqrt(d_k) + mask) over the last dimension (the keys).", **tol)
    check(out, expected_out, what=f"out returned by {call.signature()}",
          hint="the weights are right but the output is not: out = weights @ v.", **tol)


@pytest.mark.parametrize("lead, lq, lk, d_k, d_v", [
    ((), 5, 7, 8, 3),          # no batch dimensions at all
    ((2,), 4, 6, 16, 5),       # (B, L, d)
    ((2, 3), 5, 7, 8, 4),      # (B, h, L, d_k): how MultiHeadSelfAttention calls it
    ((1, 2, 2), 3, 3, 2, 6),   # more leading dimensions
], ids=["no-batch", "3d", "4d", "5d"])
def test_matches_formula(impl, lead, lq, lk, d_k, d_v):
    q, k, v = randn(*lead, lq, d_k), randn(*lead, lk, d_k), randn(*lead, lk, d_v)
    out, weights, call = sdpa(impl, q, k, v)
    check_attention(out, weights, call, q, k, v)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
def test_keeps_dtype_and_device(impl, dtype, device):
    q, k, v = (randn(2, 3, 5, 4, dtype=dtype).to(device) for _ in range(3))
    out, weights, call = sdpa(impl, q, k, v)
    check_attention(out, weights, call, q, k, v)


@pytest.mark.self_comparison(parity="test_matches_formula")
def test_weights_rows_sum_to_one(impl):
    q, k, v = randn(3, 6, 8), randn(3, 9, 8), randn(3, 9, 2)
    _, weights, call = sdpa(impl, q, k, v)
    check(weights.sum(-1), torch.ones(3, 6, dtype=F64), what=f"weights.sum(-1) for {call.signature()}",
          hint="the softmax runs over the keys (the last dimension): every row of weights sums to 1.")


def test_large_scores_do_not_overflow(impl):
    q, k, v = randn(2, 5, 8, dtype=torch.float32, scale=30.0), randn(2, 5, 8, dtype=torch.float32), \
        randn(2, 5, 3, dtype=torch.float32)
    out, weights, call = sdpa(impl, q, k, v)
    hint = Cause("large scores overflow exp(): use torch.softmax (it subtracts each row's maximum first) "
                 "instead of exp(x) / exp(x).sum().", non_finite)
    want = sdpa_expected(q, k, v)
    expected_out, expected_w = want.output, want.weights
    check(weights, expected_w, what=f"weights returned by {call.signature()} for scores of size ~100",
          hint=hint)
    check(out, expected_out, what=f"out returned by {call.signature()} for scores of size ~100", hint=hint)


def test_bool_mask_true_positions_get_zero_weight(impl):
    q, k, v = randn(2, 3, 5, 8), randn(2, 3, 7, 8), randn(2, 3, 7, 4)
    mask = random_bool_mask(5, 7)  # (Lq, Lk): broadcast over batch and heads
    out, weights, call = sdpa(impl, q, k, v, attn_mask=mask)
    check_attention(out, weights, call, q, k, v, mask)
    expect_zero_where(weights, mask, f"weights returned by {call.signature()}")


def test_float_mask_is_added(impl):
    q, k, v = randn(2, 3, 6, 8), randn(2, 3, 6, 8), randn(2, 3, 6, 4)
    mask = torch.zeros(6, 6).masked_fill(random_bool_mask(6, 6), float("-inf"))  # float32 mask
    out, weights, call = sdpa(impl, q, k, v, attn_mask=mask)
    check_attention(out, weights, call, q, k, v, mask)
    expect_zero_where(weights, mask == float("-inf"), f"weights returned by {call.signature()}")


def test_per_batch_mask_broadcasts_over_the_head_axis(impl):
    q, k, v = randn(2, 4, 5, 8), randn(2, 4, 5, 8), randn(2, 4, 5, 3)
    mask = random_bool_mask(2, 1, 5, 5)  # (B, 1, Lq, Lk)
    out, weights, call = sdpa(impl, q, k, v, mask)
    check_attention(out, weights, call, q, k, v, mask)
    expect_zero_where(weights, mask, f"weights returned by {call.signature()}")


def test_dropout_is_off_when_not_training(impl):
    q, k, v = randn(2, 3, 5, 8), randn(2, 3, 5, 8), randn(2, 3, 5, 4)
    out, weights, call = sdpa(impl, q, k, v, dropout_p=0.5, training=False)
    hint = Cause("dropout applies only when training=True; with training=False the weights are not dropped.",
                 dropped)
    check_weights_and_output(out, weights, sdpa_expected(q, k, v), call.signature(), hint)


def test_dropout_p_zero_when_training_changes_nothing(impl):
    q, k, v = randn(2, 3, 5, 8), randn(2, 3, 5, 8), randn(2, 3, 5, 4)
    out, weights, call = sdpa(impl, q, k, v, dropout_p=0.0, training=True)
    check_attention(out, weights, call, q, k, v)


def test_dropout_when_training(impl):
    p = 0.5
    q, k, v = randn(2, 3, 6, 8), randn(2, 3, 7, 8), randn(2, 3, 7, 4)
    out, weights, call = sdpa(impl, q, k, v, dropout_p=p, training=True)
    clean = sdpa_expected(q, k, v).weights
    check_dropped_weights(weights, clean, p, f"weights returned by {call.signature()}",
                          drop_hint="apply dropout (e.g. torch.nn.functional.dropout with p=dropout_p) to the "
                                    "weights when training is true, and return the weights after dropout.",
                          scale_hint="the weights that survive dropout must be softmax(q k^T / sqrt(d_k)) / "
                                     "(1 - dropout_p).")
    check(out, weights.to(F64) @ v, what=f"out returned by {call.signature()}",
          hint=Cause("out must be computed from the weights after dropout (the ones you return).",
                     any_of(close_to(clean @ v), dropped)))


def test_gradients_flow_to_q_k_v(impl):
    q, k, v = randn(2, 5, 4), randn(2, 6, 4), randn(2, 6, 3)
    g_out, g_w = randn(2, 5, 3), randn(2, 5, 6)
    outcome, call = invoke(impl, SDPA, q, k, v, grad_outputs=(g_out, g_w))
    out, weights = expect_tuple(outcome.output, 2, call, RETURNS)
    check_attention(out, weights, call, q, k, v)  # forward first
    q_, k_, v_ = (t.clone().requires_grad_() for t in (q, k, v))
    want = sdpa_expected(q_, k_, v_)
    torch.autograd.backward([want.output, want.weights], [g_out, g_w])
    for name, arg, expected in (("q", "arg0", q_.grad), ("k", "arg1", k_.grad), ("v", "arg2", v_.grad)):
        check(outcome.input_grads.get(arg), expected,
              what=f"gradient of {name} after backward through {call.signature()}",
              hint="keep the computation differentiable: no .detach(), .item(), .numpy(), .data or "
                   "torch.tensor(...) rebuilding a tensor, and return the weights you multiplied with v.")


@settings(max_examples=15)
@given(batch=st.integers(1, 3), lq=st.integers(1, 6), lk=st.integers(1, 6), d_k=st.integers(1, 9),
       d_v=st.integers(1, 5), seed=st.integers(0, 2**16))
def test_random_shapes(impl, batch, lq, lk, d_k, d_v, seed):
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(batch, n, d, generator=gen, dtype=F64) for n, d in ((lq, d_k), (lk, d_k), (lk, d_v)))
    out, weights, call = sdpa(impl, q, k, v)
    check_attention(out, weights, call, q, k, v)


HALF_MASK_HINT = ("fill blocked scores with float('-inf') (or add the additive mask), not a large negative "
                  "number: -1e9 and -1e6 do not fit in float16 (its largest magnitude is 65504), so "
                  "masked_fill refuses them and a cast turns them into -inf anyway (handout, section 1.5).")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_masks_in_half_precision(impl, dtype):
    """Mixed-precision training runs attention in float16 or bfloat16: the mask must work there too."""
    q, k, v = randn(2, 3, 5, 8, dtype=dtype), randn(2, 3, 5, 8, dtype=dtype), randn(2, 3, 5, 4, dtype=dtype)
    mask = random_bool_mask(5, 5)
    try:
        out, weights, call = sdpa(impl, q, k, v, attn_mask=mask)
    except RuntimeError as err:
        if "overflow" not in str(err):
            raise
        what = Call(SDPA, (q, k, v), {"attn_mask": mask}).signature()
        raise Mismatch(f"{what} raised RuntimeError: {str(err).splitlines()[0]}", detail=str(err),
                       hint=HALF_MASK_HINT) from None
    # torch's attention in float32 on the same half-precision values, rounded to the inputs' dtype
    want = sdpa_expected(*(t.float() for t in (q, k, v)), mask)
    hint = ("in float16 and bfloat16 too, weights = softmax(q k^T / sqrt(d_k) + mask), with -inf where the "
            "mask is True: blocked keys get weight exactly 0. If the float64 tests fail too, fix those first.")
    check(weights, want.weights.to(dtype), what=f"weights returned by {call.signature()}", hint=hint)
    check(out, want.output.to(dtype), what=f"out returned by {call.signature()}", hint=hint)
    expect_zero_where(weights, mask, f"weights returned by {call.signature()}")
