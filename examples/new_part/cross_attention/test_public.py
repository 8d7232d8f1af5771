"""cross_attention: the queries x attend to the keys and values context, head by head.

Checked against torch's attention (oracles.sdpa_expected) run on each head's features of x and context,
so nothing of yours but cross_attention is called; a key padding mask blocks context positions.
"""
import pytest
import torch

from autograder.testing.checks import expect_tuple, expect_zero_where
from autograder.testing.oracles import F64, additive, padding_blocked, sdpa_expected
from tests_public.support import DEVICES, check, expect_like, invoke, randn, random_lengths

pytestmark = pytest.mark.part("cross")

CROSS = "cross_attention"
RETURNS = "return a tuple (out, weights): out (B, Lq, d_model) and the weights (B, h, Lq, Lk)."
LAYOUT = ("head i attends with features i*d_k:(i+1)*d_k of x (the queries) to the same features of context (the "
          "keys and the values); the heads' outputs are concatenated in head order. If tests of sdpa, heads or "
          "masks fail, fix those first: cross_attention builds on them.")


def head(t, i, d_k):
    return t[..., i * d_k:(i + 1) * d_k]


def expected(x, context, h, padding=None, scale=None, values=None):
    """(out (B, Lq, d_model), weights (B, h, Lq, Lk)): torch's attention, one head at a time. `scale` and
    `values` (the sequence the values come from) make the typical mistakes of the suspects below."""
    d_k = x.shape[-1] // h
    values = context if values is None else values
    mask = None if padding is None else padding[:, None, :]  # (B, 1, Lk): blocks keys
    heads = [sdpa_expected(head(x, i, d_k), head(context, i, d_k), head(values, i, d_k), mask, scale)
             for i in range(h)]
    return torch.cat([w.output for w in heads], dim=-1), torch.stack([w.weights for w in heads], dim=1)


def suspects(x, context, h, padding, pick):
    d_model = x.shape[-1]
    found = [
        (lambda: pick(expected(x, context, h, padding, scale=1.0)),
         "did you forget to divide the scores by sqrt(d_k)?"),
        (lambda: pick(expected(x, context, h, padding, scale=d_model ** -0.5)),
         "divide the scores by sqrt(d_k), the size of ONE head (d_model / num_heads), not by sqrt(d_model)."),
        (lambda: pick(expected(x, context, h, padding, values=x)),
         "the values come from context, like the keys: x gives the queries only."),
        (lambda: pick(expected(context, x, h)),
         "the roles are swapped: the queries come from x, the keys and values from context."),
    ]
    if padding is not None:
        found.append((lambda: pick(expected(x, context, h)),
                      "key_padding_mask was ignored: it must reach the softmax, as -inf at the padded keys."))
        if padding.dtype == torch.bool:
            found.append((lambda: pick(expected(x, context, h, ~padding)),
                          "the boolean key_padding_mask is inverted: True marks padding, which is blocked."))
    return found


def check_cross(impl, x, context, h, padding=None):
    """Calls cross_attention(x, context, h), with key_padding_mask=padding unless it is None."""
    __tracebackhide__ = True
    kwargs = {} if padding is None else {"key_padding_mask": padding}
    outcome, call = invoke(impl, CROSS, x, context, h, **kwargs)
    out, weights = expect_tuple(outcome.output, 2, call, RETURNS)
    want_out, want_weights = expected(x, context, h, padding)
    expect_like(weights, want_weights, f"weights returned by {call.signature()}")
    check(weights, want_weights, what=f"weights returned by {call.signature()}", hint=LAYOUT,
          suspects=suspects(x, context, h, padding, lambda r: r[1]))
    if padding is not None:
        blocked = additive(padding, F64) == float("-inf")
        expect_zero_where(weights, blocked[:, None, None, :], f"weights returned by {call.signature()}")
    check(out, want_out, what=f"out returned by {call.signature()}",
          hint="the weights are right but out is not: out = weights @ (the heads of context), merged back to "
               "(B, Lq, d_model) in head order.",
          suspects=suspects(x, context, h, padding, lambda r: r[0]))
    return out, weights


@pytest.mark.parametrize("b, lq, lk, d_model, h", [
    (2, 3, 5, 8, 2),    # fewer queries than keys
    (2, 6, 2, 12, 3),   # more queries than keys
    (1, 4, 4, 6, 1),    # one head, batch of one
    (3, 1, 7, 8, 8),    # one query, d_k = 1
], ids=["lq<lk", "lq>lk", "one-head", "d_k=1"])
def test_matches_attention_head_by_head(impl, b, lq, lk, d_model, h):
    check_cross(impl, randn(b, lq, d_model), randn(b, lk, d_model), h)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
def test_keeps_dtype_and_device(impl, dtype, device):
    x, context = randn(2, 3, 8, dtype=dtype).to(device), randn(2, 4, 8, dtype=dtype).to(device)
    check_cross(impl, x, context, 2)


@pytest.mark.parametrize("kind", ["bool", "float"])
def test_key_padding_mask_blocks_context_positions(impl, kind):
    """The context's padding positions (True, or -inf) get weight exactly 0 from every query."""
    blocked = padding_blocked(random_lengths(3, 6), 6)  # (B, Lk): context sequences of different lengths
    mask = blocked if kind == "bool" else additive(blocked, torch.float32)
    check_cross(impl, randn(3, 4, 8), randn(3, 6, 8), 2, mask)


def test_queries_of_zeros_average_the_real_context(impl):
    """A small exact case: queries of zeros score 0 against every key, so each query's weights are uniform
    over the real (unpadded) context positions, and its output is the mean of those positions."""
    x, context = torch.zeros(2, 3, 4, dtype=F64), randn(2, 5, 4)
    lengths = torch.tensor([5, 2])
    real = ~padding_blocked(lengths, 5)  # (B, Lk)
    uniform = real.to(F64) / lengths[:, None]  # (B, Lk), each row sums to 1
    want_weights = uniform[:, None, None, :].expand(2, 2, 3, 5)  # every head, every query
    want_out = (uniform[:, None, :] @ context).expand(2, 3, 4)  # the mean of the real context tokens
    outcome, call = invoke(impl, CROSS, x, context, 2, key_padding_mask=~real)
    out, weights = expect_tuple(outcome.output, 2, call, RETURNS)
    check(weights, want_weights, what=f"weights returned by {call.signature()} for queries of zeros",
          hint="scores of 0 give equal weights to every key that is not padding (True in key_padding_mask).")
    check(out, want_out, what=f"out returned by {call.signature()} for queries of zeros",
          hint="with equal weights, each query's output is the mean of the real context tokens.")
