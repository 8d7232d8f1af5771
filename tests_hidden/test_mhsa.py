"""MultiHeadSelfAttention: against nn.MultiheadAttention (values, weights, gradients), against the
reference in float32, and properties that need no oracle (equivariance, causality, padding, dropout)."""
import pytest
import torch
from hypothesis import example, given

from autograder.testing.calls import Call
from autograder.testing.checks import expect_raises, expect_tuple, expect_untouched, expect_zero_where
from autograder.testing.compare import Cause, Structure, any_of, close_to, dropped, expect, rescaled
from autograder.testing.oracles import blocked_of, mha_expected, randn
from tests_hidden.support import (ATTN_MASKS, MhsaCase, check_causality, check_key_padding_invariance,
                                  check_permutation_equivariance, examples, expect_close, expect_fraction, expect_grads,
                                  expect_shape, generator, mhsa_call, mhsa_cases, mhsa_state, expect_finite, random_in_eval, sequence_inputs,
                                  with_cases)

pytestmark = pytest.mark.part("mhsa")
EDGES = (MhsaCase(B=1, L=1, d_model=1, h=1), MhsaCase(B=1, L=4, d_model=4, h=4, attn_mask="causal"),
         MhsaCase(B=2, L=3, d_model=6, h=1, key_padding=True), MhsaCase(B=1, L=5, d_model=8, h=2, attn_mask="per_head",
                                                                        mask_kind="additive", contiguous=False))
DROPOUT_CASE = MhsaCase(B=2, L=8, d_model=8, h=2)


@examples(15)
@given(case=mhsa_cases())
@with_cases(*EDGES)
def test_matches_torch(impl, case):
    """float64 against nn.MultiheadAttention: tight enough that a slightly wrong scale shows."""
    x, masks = sequence_inputs(case)
    state = mhsa_state(case)
    call = mhsa_call(case, x, masks, state, need_weights=True)
    outcome = impl.run(call)
    out, weights = expect_tuple(outcome.output, 2, call)
    want = mha_expected(state, x, case.h, **masks)
    expect_close(weights, want.weights, "attention weights (B, h, L, L)", call)
    expect_close(out, want.output, "output", call)
    expect_untouched(outcome, call)


@examples(10)
@given(case=mhsa_cases(dtypes=("float32",)))
def test_matches_reference_float32(impl, ref, case):
    x, masks = sequence_inputs(case)
    call = mhsa_call(case, x, masks)
    expect_close(impl.run(call).output, ref.run(call).output, "output", call,
                 hint=Structure("without need_weights, forward returns the output tensor alone."))


@examples(8)
@given(case=mhsa_cases(contiguous=(True,)))
@example(case=MhsaCase(B=2, L=3, d_model=4, h=2, attn_mask="causal", key_padding=True))
def test_gradients_match_torch(impl, case):
    x, masks = sequence_inputs(case)
    state = mhsa_state(case)
    g = randn(x.shape, generator(case, "grad"), x.dtype)
    call = mhsa_call(case, x, masks, state, grad_outputs=(g,))
    expect_grads(impl.run(call), mha_expected(state, x, case.h, **masks, grad_output=g), call)


@pytest.mark.parametrize("d_model, num_heads, bias", [(12, 3, True), (8, 8, True), (7, 1, False)])
def test_attributes(impl, d_model, num_heads, bias):
    call = Call("MultiHeadSelfAttention", init={"d_model": d_model, "num_heads": num_heads, "bias": bias},
                construct_only=True)
    attributes = impl.run(call).attributes
    fields, params = attributes["fields"], attributes["params"]
    for name, value in (("num_heads", num_heads), ("d_k", d_model // num_heads)):
        expect(fields.get(name) == value, f"{call.signature()}: attribute {name} should be {value}, "
                                          f"got {fields.get(name, 'nothing')}.")
    shapes = {"qkv.weight": [3 * d_model, d_model], "out.weight": [d_model, d_model]}
    if bias:
        shapes |= {"qkv.bias": [3 * d_model], "out.bias": [d_model]}
    for name, shape in shapes.items():
        expect(params.get(name) == shape, f"{call.signature()}: parameter {name} should have shape {tuple(shape)}, "
                                          f"got {tuple(params[name]) if name in params else 'none'}.",
               hint="qkv = nn.Linear(d_model, 3 * d_model, bias=bias), out = nn.Linear(d_model, d_model, bias=bias).")
    if not bias:
        extra = sorted(n for n in params if n.endswith("bias"))
        expect(not extra, f"{call.signature()}: bias=False, yet there are parameters {', '.join(extra)}.")


@pytest.mark.argument_check(requires="test_attributes")
@pytest.mark.parametrize("d_model, num_heads", [(6, 4), (8, 3), (4, 8), (8, 0), (8, -2)])
def test_invalid_head_count_raises(impl, d_model, num_heads):
    call = Call("MultiHeadSelfAttention", init={"d_model": d_model, "num_heads": num_heads}, construct_only=True)
    expect_raises(impl, call, ValueError, "num_heads must be at least 1 and divide d_model")


@pytest.mark.self_comparison(parity="test_matches_torch")
@examples(8)
@given(case=mhsa_cases(attn_masks=("none",), key_padding=(False,)))
def test_permutation_equivariance(impl, case):
    check_permutation_equivariance(impl, case, mhsa_call)


@pytest.mark.self_comparison(parity="test_matches_torch")
@examples(8)
@given(case=mhsa_cases(attn_masks=("causal",), key_padding=(False,)))
@example(case=MhsaCase(B=2, L=5, d_model=4, h=2, attn_mask="causal"))
def test_causality(impl, case):
    check_causality(impl, case, mhsa_call)


@pytest.mark.self_comparison(parity="test_matches_torch")
@examples(8)
@given(case=mhsa_cases(attn_masks=("none",), key_padding=(True,)))
@example(case=MhsaCase(B=2, L=4, d_model=4, h=2, key_padding=True))
def test_key_padding_invariance(impl, case):
    check_key_padding_invariance(impl, case, mhsa_call)


@pytest.mark.self_comparison(parity="test_matches_torch")
@examples(10)
@given(case=mhsa_cases(attn_masks=ATTN_MASKS[1:]))
def test_blocked_weights_are_exactly_zero(impl, case):
    x, masks = sequence_inputs(case)
    call = mhsa_call(case, x, masks, need_weights=True)
    _, weights = expect_tuple(impl.run(call).output, 2, call)
    shape = (case.B, case.h, case.L, case.L)
    expect_shape(weights, shape, "attention weights", call)
    blocked = torch.zeros(shape, dtype=torch.bool)
    if "attn_mask" in masks:
        blocked = blocked | blocked_of(masks["attn_mask"])
    if "key_padding_mask" in masks:
        blocked = blocked | blocked_of(masks["key_padding_mask"])[:, None, None, :]
    expect_zero_where(weights, blocked, f"attention weights of {call.signature()}",
                      hint="attn_mask blocks (query, key) pairs, key_padding_mask blocks keys; both go into "
                           "the scores before the softmax.")


def test_eval_ignores_dropout(impl, ref):
    x, _ = sequence_inputs(DROPOUT_CASE)
    want = ref.run(mhsa_call(DROPOUT_CASE, x, {}, need_weights=True)).output
    calls = [mhsa_call(DROPOUT_CASE, x, {}, need_weights=True, init={"dropout": 0.5}, seed=seed) for seed in (1, 2)]
    runs = [expect_tuple(impl.run(call).output, 2, call) for call in calls]
    hint = random_in_eval(runs)
    for call, (out, weights) in zip(calls, runs):
        expect_close(weights, want[1], "attention weights", call, hint=hint)
        expect_close(out, want[0], "output", call, hint=hint)


def test_training_without_dropout_matches_eval(impl, ref):
    x, _ = sequence_inputs(DROPOUT_CASE)
    call, in_eval = mhsa_call(DROPOUT_CASE, x, {}, training=True), mhsa_call(DROPOUT_CASE, x, {})
    want = ref.run(in_eval).output
    # Only eval mode right says that training mode alone differs: something random ran.
    right_in_eval = torch.allclose(impl.run(in_eval).output, want, rtol=1e-7, atol=1e-9)
    expect_close(impl.run(call).output, want, "output", call,
                 hint="dropout defaults to 0.0." if right_in_eval else "")


def _output_from_weights(state, x, weights, h):
    """Attention output recomputed from given weights: what dropout on the weights must give."""
    d = x.shape[-1]
    v = (x @ state["qkv.weight"].T + state["qkv.bias"])[..., 2 * d:]
    B, L, _ = x.shape
    heads = v.reshape(B, L, h, d // h).transpose(1, 2)
    merged = (weights @ heads).transpose(1, 2).reshape(B, L, d)
    return merged @ state["out.weight"].T + state["out.bias"]


def test_training_dropout_on_weights(impl, ref):
    """Dropout acts on the attention weights: a share p dropped, the rest scaled by 1/(1-p), and the
    output made of exactly those weights. Holds whatever random numbers a solution draws."""
    p, case = 0.3, DROPOUT_CASE
    x, _ = sequence_inputs(case)
    state = mhsa_state(case)
    clean = ref.run(mhsa_call(case, x, {}, state, need_weights=True)).output[1]
    seen = []
    for seed in (1, 2):
        call = mhsa_call(case, x, {}, state, need_weights=True, init={"dropout": p}, training=True, seed=seed)
        out, weights = expect_tuple(impl.run(call).output, 2, call)
        expect_shape(weights, clean.shape, "attention weights", call)
        kept = weights != 0
        expect_fraction(1 - kept.double().mean().item(), 0.15, 0.45,
                        f"share of attention weights that {call.signature()} zeroed",
                        hint="in training, dropout zeroes attention weights with probability `dropout`.")
        expect_close(weights[kept], clean[kept] / (1 - p), "attention weights that dropout kept", call,
                     hint=Cause("dropout scales the weights it keeps by 1/(1-p).", rescaled))
        expect_close(out, _output_from_weights(state, x, weights, case.h), "output (from the returned weights)", call,
                     hint=Cause("dropout goes on the attention weights, before they multiply v.",
                                any_of(close_to(_output_from_weights(state, x, clean, case.h)), dropped)))
        seen.append(out)
    expect(not torch.equal(seen[0], seen[1]), "training-mode outputs were the same under two different seeds.",
           hint="draw dropout masks from torch's random generator (F.dropout, nn.Dropout).")


def test_training_dropout_keeps_expectation(impl, ref):
    """Averaged over seeds, training outputs approach the eval output (dropout rescales by 1/(1-p))."""
    case, seeds = DROPOUT_CASE, range(1, 65)
    x, _ = sequence_inputs(case)
    state = mhsa_state(case)
    want = ref.run(mhsa_call(case, x, {}, state)).output
    calls = [mhsa_call(case, x, {}, state, init={"dropout": 0.5}, training=True, seed=s) for s in seeds]
    mean = torch.stack([impl.run(c).output for c in calls]).mean(0)
    error = ((mean - want).norm() / want.norm()).item()
    if error >= 0.2:  # the dropout hint only when the student's own eval output is right
        right_in_eval = torch.allclose(impl.run(mhsa_call(case, x, {}, state)).output, want)
        expect(False, f"averaged over {len(calls)} seeds, {calls[0].signature()} is {error:.0%} away from the "
                      f"eval output (relative norm), expected under 20%.",
               hint="dropout keeps the expectation: kept values are scaled by 1/(1-p)." if right_in_eval else "")


@pytest.mark.self_comparison(parity="test_gradients_match_torch")
@examples(6)
@given(case=mhsa_cases(attn_masks=("causal", "per_batch"), key_padding=(True,), kinds=("additive", "bool")))
def test_inputs_untouched_with_gradients(impl, case):
    x, masks = sequence_inputs(case)
    call = mhsa_call(case, x, masks, grad_outputs=(torch.ones_like(x),))
    expect_untouched(impl.run(call), call)


def test_large_inputs_stay_finite(impl, ref):
    for dtype in ("float64", "float32"):
        case = MhsaCase(B=2, L=6, d_model=8, h=2, attn_mask="causal", dtype=dtype)
        x, masks = sequence_inputs(case, scale=40.0)
        call = mhsa_call(case, x, masks, need_weights=True)
        out, weights = expect_tuple(impl.run(call).output, 2, call)
        expect_finite(impl, call, mhsa_call(case, x / 40.0, masks, need_weights=True), out, weights)
        if dtype == "float64":
            expect_close(out, ref.run(call).output[0], "output", call)
