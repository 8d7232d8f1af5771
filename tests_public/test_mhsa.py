"""MultiHeadSelfAttention against torch.nn.MultiheadAttention loaded with the same weights."""
import math

import pytest
import torch

from autograder.testing.calls import Call
from autograder.testing.checks import expect_raises, expect_tuple, expect_zero_where
from autograder.testing.compare import Cause, dropped, expect
from autograder.testing.oracles import F64, additive, causal_blocked, mha_expected, padding_blocked
from tests_public.support import (check, check_dropped_weights, check_weights_and_output, construct, expect_like,
                                  interleaved_qkv, mhsa_state, randn, random_bool_mask, random_lengths, run_module,
                                  scale_queries)

pytestmark = pytest.mark.part("mhsa")

MHSA = "MultiHeadSelfAttention"
B, L, D, H = 2, 5, 12, 3
WEIGHTS_RETURNED = "with need_weights=True, forward returns (output, weights), weights of shape (B, h, L, L)."
LAYOUT = ("qkv(x) is [q | k | v] along the features (each d_model wide, the layout of "
          "nn.MultiheadAttention.in_proj_weight); head i uses features i*d_k:(i+1)*d_k of each; the "
          "heads' outputs are concatenated in head order and go through `out`. If tests of sdpa, heads "
          "or masks fail, fix those first: this module builds on them.")


def suspects(state, x, h, attn_mask, kpm, pick):
    """Typical mistakes, computed by nn.MultiheadAttention with adjusted weights or masks."""
    d_model = x.shape[-1]
    d_k = d_model // h
    found = [
        (lambda: pick(mha_expected(scale_queries(state, math.sqrt(d_k)), x, h, attn_mask, kpm)),
         "did you forget to divide the scores by sqrt(d_k)?"),
        (lambda: pick(mha_expected(scale_queries(state, math.sqrt(d_k / d_model)), x, h, attn_mask, kpm)),
         f"your scores match a division by {math.sqrt(d_model):g} instead of sqrt(d_k) = {math.sqrt(d_k):g}: "
         "d_k is the size of ONE head (d_model / num_heads)."),
        (lambda: pick(mha_expected(interleaved_qkv(state, h), x, h, attn_mask, kpm)),
         "qkv's output is [q | k | v] (three blocks of d_model features, then heads inside each), not "
         "[q_0 k_0 v_0 | q_1 k_1 v_1 | ...] per head: split it into three along the last dimension "
         "first, then split each into heads."),
    ]
    for name, mask in (("attn_mask", attn_mask), ("key_padding_mask", kpm)):
        if mask is None:
            continue
        others = {"attn_mask": attn_mask, "key_padding_mask": kpm} | {name: None}
        found.append((lambda others=others: pick(mha_expected(state, x, h, others["attn_mask"],
                                                              others["key_padding_mask"])),
                      f"{name} was ignored: both masks must reach the softmax."))
        if mask.dtype is torch.bool:
            flipped = {"attn_mask": attn_mask, "key_padding_mask": kpm} | {name: ~mask}
            found.append((lambda flipped=flipped: pick(mha_expected(state, x, h, flipped["attn_mask"],
                                                                    flipped["key_padding_mask"])),
                          f"the boolean {name} is inverted: True means blocked."))
    if attn_mask is not None and kpm is not None:
        found.append((lambda: pick(mha_expected(state, x, h)),
                      "both masks were ignored: merge attn_mask and key_padding_mask and add the result "
                      "to the scores."))
    if kpm is not None:
        b, length = kpm.shape
        rows = additive(kpm, F64)[:, None, :, None].expand(b, h, length, length)
        as_queries = rows if attn_mask is None else rows + additive(attn_mask, F64)
        found.append((lambda: pick(mha_expected(state, x, h, as_queries)),
                      "key_padding_mask blocks KEYS: as (B, 1, 1, L) it masks columns of the (L, L) "
                      "score matrix, not rows."))
    return found


def forward(impl, x, state, h=H, *, need_weights=True, dtype=F64, training=False, init=None, **masks):
    __tracebackhide__ = True
    init = init or {"d_model": x.shape[-1], "num_heads": h}
    outcome, call = run_module(impl, MHSA, init, x, state=state, dtype=dtype, training=training,
                               need_weights=need_weights, **masks)
    if need_weights:
        out, weights = expect_tuple(outcome.output, 2, call, WEIGHTS_RETURNED)
        return out, weights, call
    return outcome.output, None, call


def check_against_torch(impl, x, state, h=H, attn_mask=None, key_padding_mask=None, **kwargs):
    __tracebackhide__ = True
    out, weights, call = forward(impl, x, state, h, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                                 **kwargs)
    want = mha_expected(state, x, h, attn_mask, key_padding_mask)
    expected_out, expected_w = want.output, want.weights
    expect_like(weights, expected_w, f"weights returned by {call.signature()}")
    blocked = torch.zeros(x.shape[0], h, x.shape[1], x.shape[1], dtype=torch.bool)
    for mask, shape in ((attn_mask, None), (key_padding_mask, (x.shape[0], 1, 1, x.shape[1]))):
        if mask is not None:
            blocked |= (additive(mask, F64) == float("-inf")).reshape(shape or mask.shape)
    check(weights, expected_w, what=f"weights returned by {call.signature()}", hint=LAYOUT,
          suspects=suspects(state, x, h, attn_mask, key_padding_mask, lambda r: r.weights))
    expect_zero_where(weights, blocked, f"weights returned by {call.signature()}")
    check(out, expected_out, what=f"output of {call.signature()}",
          hint="the attention weights are right but the output is not: merge the heads back to "
               "(B, L, d_model) in head order, then apply `out` (W^O).",
          suspects=suspects(state, x, h, attn_mask, key_padding_mask, lambda r: r.output))


# -- construction -----------------------------------------------------------------------------------

@pytest.mark.parametrize("d_model, h, bias", [(12, 3, True), (8, 1, True), (8, 8, False)],
                         ids=["12-3", "one-head", "d_k=1-no-bias"])
def test_constructor_attributes(impl, d_model, h, bias):
    outcome, what = construct(impl, MHSA, d_model=d_model, num_heads=h, bias=bias)
    fields, params = outcome.attributes.get("fields", {}), outcome.attributes.get("params", {})
    expect(fields.get("num_heads") == h and fields.get("d_k") == d_model // h,
           f"{what}: expected attributes num_heads={h} and d_k={d_model // h}, got "
           f"num_heads={fields.get('num_heads')!r} and d_k={fields.get('d_k')!r}.",
           hint="store self.num_heads and self.d_k (= d_model // num_heads) as plain ints.")
    expected = {"qkv.weight": [3 * d_model, d_model], "out.weight": [d_model, d_model]}
    if bias:
        expected |= {"qkv.bias": [3 * d_model], "out.bias": [d_model]}
    expect(params == expected, f"{what}: expected parameters {expected}, got {params}.",
           hint="one nn.Linear `qkv` (d_model -> 3*d_model) and one nn.Linear `out` (d_model -> d_model), "
                "both with bias=bias; no other parameters (use the functions you wrote for the rest).")


@pytest.mark.parametrize("d_model, h", [(12, 5), (12, 0), (12, -3), (12, 24)],
                         ids=["5-does-not-divide-12", "zero", "negative", "more-than-features"])
@pytest.mark.argument_check(requires="test_constructor_attributes")
def test_invalid_head_count_raises_value_error(impl, d_model, h):
    expect_raises(impl, Call(MHSA, init={"d_model": d_model, "num_heads": h}, construct_only=True), ValueError,
                  hint="raise ValueError in __init__ when num_heads < 1 or num_heads does not divide d_model.")


# -- forward ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
def test_output_shape_and_dtype(impl, dtype):
    x, state = randn(B, L, D, dtype=dtype), mhsa_state(D, dtype=dtype)
    out, _, call = forward(impl, x, state, need_weights=False, dtype=dtype)
    expected = mha_expected(state, x, H).output
    check(out, expected, what=f"output of {call.signature()}", hint=LAYOUT,
          suspects=suspects(state, x, H, None, None, lambda r: r.output))


def test_need_weights_false_returns_only_the_output(impl):
    x, state = randn(B, L, D), mhsa_state(D)
    out, _, call = forward(impl, x, state, need_weights=False)
    expect(type(out) is torch.Tensor, f"{call.signature()}: expected a tensor, got {type(out).__name__}.",
           hint="return only the output tensor when need_weights is False (the default).")
    check(out, mha_expected(state, x, H).output, what=f"output of {call.signature()}", hint=LAYOUT)


def causal(n, kind):
    blocked = causal_blocked(n)
    return blocked if kind == "bool" else additive(blocked, torch.float32)


def padding(lengths, n, kind):
    blocked = padding_blocked(lengths, n)
    return blocked if kind == "bool" else additive(blocked, torch.float32)


MASK_CASES = {
    "no-mask": lambda: {},
    "causal-float": lambda: {"attn_mask": causal(L, "float")},
    "causal-bool": lambda: {"attn_mask": causal(L, "bool")},
    "random-bool-L-L": lambda: {"attn_mask": random_bool_mask(L, L)},
    "key-padding-bool": lambda: {"key_padding_mask": padding(random_lengths(B, L), L, "bool")},
    "key-padding-float": lambda: {"key_padding_mask": padding(random_lengths(B, L), L, "float")},
    "causal-and-key-padding": lambda: {"attn_mask": causal(L, "float"),
                                       "key_padding_mask": padding(random_lengths(B, L), L, "bool")},
    "bool-B-1-L-L-and-key-padding": lambda: {"attn_mask": random_bool_mask(B, 1, L, L),
                                             "key_padding_mask": padding(random_lengths(B, L), L, "bool")},
    "float-B-h-L-L": lambda: {"attn_mask": additive(random_bool_mask(B, H, L, L), torch.float64)},
}


@pytest.mark.parametrize("case", list(MASK_CASES))
def test_matches_torch_multihead_attention(impl, case):
    x, state = randn(B, L, D), mhsa_state(D)
    check_against_torch(impl, x, state, **MASK_CASES[case]())


@pytest.mark.parametrize("d_model, h", [(8, 1), (8, 8), (16, 4)], ids=["one-head", "d_k=1", "16-4"])
def test_head_counts(impl, d_model, h):
    x, state = randn(3, 4, d_model), mhsa_state(d_model)
    check_against_torch(impl, x, state, h, attn_mask=causal(4, "bool"))


def test_without_bias(impl):
    x, state = randn(B, L, D), mhsa_state(D, bias=False)
    out, weights, call = forward(impl, x, state, init={"d_model": D, "num_heads": H, "bias": False})
    want = mha_expected(state, x, H)
    expected_out, expected_w = want.output, want.weights
    check(weights, expected_w, what=f"weights returned by {call.signature()}", hint=LAYOUT)
    check(out, expected_out, what=f"output of {call.signature()}",
          hint=LAYOUT)  # the weights are right here: what follows them, whatever the bias


def test_sequence_of_length_one(impl):
    x, state = randn(B, 1, D), mhsa_state(D)
    check_against_torch(impl, x, state)


def test_dropout_is_off_in_eval_mode(impl):
    x, state = randn(B, L, D), mhsa_state(D)
    init = {"d_model": D, "num_heads": H, "dropout": 0.5}
    out, weights, call = forward(impl, x, state, init=init)
    hint = Cause("dropout is active only in training mode (self.training); in eval mode nothing is dropped.", dropped)
    check_weights_and_output(out, weights, mha_expected(state, x, H), call.signature(), hint)


def test_training_mode_without_dropout_is_deterministic(impl):
    x, state = randn(B, L, D), mhsa_state(D)
    out, weights, call = forward(impl, x, state, training=True, attn_mask=causal(L, "bool"))
    hint = Cause("with dropout=0.0, training mode must compute exactly what eval mode does.", dropped)
    check_weights_and_output(out, weights, mha_expected(state, x, H, causal(L, "bool")), call.signature(), hint)


def test_dropout_applies_to_attention_weights_in_training(impl):
    p = 0.5
    x, state = randn(B, L, D), mhsa_state(D)
    init = {"d_model": D, "num_heads": H, "dropout": p}
    _, weights, call = forward(impl, x, state, init=init, training=True)
    clean = mha_expected(state, x, H).weights
    check_dropped_weights(weights, clean, p, f"weights returned by {call.signature()}",
                          drop_hint="in training mode, apply dropout with p=dropout to the attention weights.",
                          scale_hint="the surviving weights are the softmax weights scaled by 1/(1 - dropout), "
                                     "as torch.nn.functional.dropout gives them.")
    # That the output is made of exactly these weights is checked when your work is graded.


def test_gradients_match_torch(impl):
    x, state, g = randn(B, L, D), mhsa_state(D), randn(B, L, D)
    mask = causal(L, "bool")
    kpm = padding(random_lengths(B, L), L, "bool")
    # the forward pass first: a wrong output explains wrong gradients better than the gradients do
    out, _, call = forward(impl, x, state, need_weights=False, attn_mask=mask, key_padding_mask=kpm)
    check(out, mha_expected(state, x, H, mask, kpm).output, what=f"output of {call.signature()}",
          hint=LAYOUT, suspects=suspects(state, x, H, mask, kpm, lambda r: r.output))
    outcome, call = run_module(impl, MHSA, {"d_model": D, "num_heads": H}, x, state=state,
                               attn_mask=mask, key_padding_mask=kpm, grad_outputs=g)
    want = mha_expected(state, x, H, mask, kpm, grad_output=g)
    hint = ("keep forward differentiable: no .detach(), .item(), .numpy(), .data or torch.tensor(...) "
            "rebuilding tensors, and no in-place writes into tensors autograd needs.")
    check(outcome.input_grads.get("arg0"), want.x_grad, what=f"gradient of x after backward through {call.signature()}",
          hint=hint)
    for name in ("qkv.weight", "qkv.bias", "out.weight", "out.bias"):
        check(outcome.param_grads.get(name), want.param_grads[name],
              what=f"gradient of {name} after backward through {call.signature()}", hint=hint)
