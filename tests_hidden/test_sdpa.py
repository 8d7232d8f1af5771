"""scaled_dot_product_attention: values, masks, gradients, dropout, dtypes and edge shapes."""
import pytest
import torch
from hypothesis import example, given

from autograder.testing.calls import Call
from autograder.testing.checks import expect_tuple, expect_untouched, expect_zero_where
from autograder.testing.compare import Cause, any_of, close_to, dropped, expect, rescaled
from autograder.testing.oracles import additive, blocked_of, randn, random_blocked
from tests_hidden.support import (SdpaCase, examples, expect_close, expect_fraction, expect_shape, generator,
                                  random_in_eval, sdpa_cases, sdpa_inputs)

pytestmark = pytest.mark.part("sdpa")
SDPA = "scaled_dot_product_attention"
MASK_HINT = "add the mask to the scores before the softmax: -inf there makes the weight exactly 0."


@examples(20)
@given(case=sdpa_cases())
@example(case=SdpaCase(batch=(2,), Lq=3, Lk=5, d_k=4, d_v=2, mask="bool"))
@example(case=SdpaCase(batch=(1,), Lq=1, Lk=1, d_k=1, d_v=1))
@example(case=SdpaCase(batch=(2, 3), Lq=4, Lk=2, d_k=3, d_v=5, mask="additive", mask_shape="full"))
def test_matches_reference(impl, ref, case):
    args, kwargs = sdpa_inputs(case)
    call = Call(SDPA, args, kwargs)
    outcome = impl.run(call)
    out, weights = expect_tuple(outcome.output, 2, call)
    want_out, want_weights = ref.run(call).output
    expect_close(weights, want_weights, "weights", call)
    expect_close(out, want_out, "output", call)
    expect_untouched(outcome, call)


@pytest.mark.self_comparison(parity="test_matches_reference")
@examples(12)
@given(case=sdpa_cases(masks=("bool", "additive")))
def test_weights_are_distributions(impl, case):
    """Independent of any reference: rows sum to 1, blocked keys get exactly 0, nothing is negative."""
    args, kwargs = sdpa_inputs(case)
    call = Call(SDPA, args, kwargs)
    _, weights = expect_tuple(impl.run(call).output, 2, call)
    shape = (*case.batch, case.Lq, case.Lk)
    expect_shape(weights, shape, "weights", call)
    expect_zero_where(weights, blocked_of(kwargs["attn_mask"]).expand(shape), f"weights of {call.signature()}",
                      MASK_HINT)
    expect(bool((weights >= 0).all()), f"weights of {call.signature()}: some weights are negative.",
           hint="weights come out of a softmax, which is never negative.")
    expect_close(weights.sum(-1), torch.ones(shape[:-1], dtype=weights.dtype), "row sums of the weights", call,
                 hint="the softmax runs over the keys (the last dimension).")


@examples(10)
@given(case=sdpa_cases(dtypes=("float64",)))
@example(case=SdpaCase(batch=(2,), Lq=3, Lk=4, d_k=2, d_v=3, mask="bool"))
def test_gradients_match_reference(impl, ref, case):
    args, kwargs = sdpa_inputs(case)
    gen = generator(case, "grad")
    grads = (randn((*case.batch, case.Lq, case.d_v), gen), randn((*case.batch, case.Lq, case.Lk), gen))
    call = Call(SDPA, args, kwargs, grad_outputs=grads)
    got, want = impl.run(call), ref.run(call)
    # the values first: wrong values explain wrong gradients, and the hint below is only about gradients
    for what, value, expected in zip(("output", "weights"), expect_tuple(got.output, 2, call), want.output):
        expect_close(value, expected, what, call)
    for i, name in enumerate("qkv"):
        expect_close(got.input_grads.get(f"arg{i}"), want.input_grads[f"arg{i}"], f"gradient of {name}", call,
                     hint="every output, the weights included, must stay connected to q, k and v: "
                          "no .detach(), .data or torch.no_grad().")


def _qkv(seed, shape=(2, 3, 8, 4), scale=1.0, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)
    return tuple(randn(shape, gen, dtype, scale) for _ in range(3))


def test_float32_mask_with_float64_inputs(impl, ref):
    q, k, v = _qkv(1)
    mask = additive(random_blocked((8, 8), torch.Generator().manual_seed(2), allowed_keys=8), torch.float32)
    call = Call(SDPA, (q, k, v), {"attn_mask": mask})
    out, weights = expect_tuple(impl.run(call).output, 2, call)
    want_out, want_weights = ref.run(call).output
    expect_close(weights, want_weights, "weights", call)
    expect_close(out, want_out, "output", call)


def test_large_scores_stay_finite(impl, ref):
    """Scores in the thousands overflow exp() unless the softmax subtracts the row maximum."""
    for dtype in (torch.float64, torch.float32):
        call = Call(SDPA, _qkv(3, (2, 5, 16), scale=30.0, dtype=dtype))
        out, weights = expect_tuple(impl.run(call).output, 2, call)
        expect(bool(torch.isfinite(out).all() and torch.isfinite(weights).all()),
               f"{call.signature()} with scores in the thousands returned inf or NaN.",
               hint="use torch.softmax, or subtract each row's maximum before exp().")
        if dtype == torch.float64:
            want_out, want_weights = ref.run(call).output
            expect_close(weights, want_weights, "weights", call)
            expect_close(out, want_out, "output", call)


def test_eval_ignores_dropout(impl, ref):
    q, k, v = _qkv(4)
    want_out, want_weights = ref.call(SDPA, q, k, v)
    calls = [Call(SDPA, (q, k, v), {"dropout_p": 0.5, "training": False}, seed=seed) for seed in (1, 2)]
    runs = [expect_tuple(impl.run(call).output, 2, call) for call in calls]
    hint = random_in_eval(runs)
    for call, (out, weights) in zip(calls, runs):
        expect_close(weights, want_weights, "weights", call, hint=hint)
        expect_close(out, want_out, "output", call, hint=hint)


def test_zero_dropout_in_training_changes_nothing(impl, ref):
    q, k, v = _qkv(5)
    call = Call(SDPA, (q, k, v), {"dropout_p": 0.0, "training": True})
    out, weights = expect_tuple(impl.run(call).output, 2, call)
    want_out, want_weights = ref.call(SDPA, q, k, v)
    expect_close(weights, want_weights, "weights", call)
    expect_close(out, want_out, "output", call)


def test_training_dropout_on_weights(impl, ref):
    """Whatever random numbers a solution draws: a share p of the weights is dropped, the rest scaled by
    1/(1-p), the output is made of the returned weights, and another seed drops other weights."""
    p = 0.25
    q, k, v = _qkv(6)
    clean = ref.call(SDPA, q, k, v)[1]
    seen = []
    for seed in (1, 2):
        call = Call(SDPA, (q, k, v), {"dropout_p": p, "training": True}, seed=seed)
        out, weights = expect_tuple(impl.run(call).output, 2, call)
        expect_shape(weights, clean.shape, "weights", call)
        kept = weights != 0
        expect_fraction(1 - kept.double().mean().item(), 0.1, 0.4,
                        f"share of the weights that {call.signature()} zeroed",
                        hint="in training, dropout zeroes each weight with probability dropout_p; the weights "
                             "returned are the ones multiplied with v.")
        expect_close(weights[kept], clean[kept] / (1 - p), "weights that dropout kept", call,
                     hint=Cause("dropout scales the weights it keeps by 1/(1-p), as F.dropout does.", rescaled))
        expect_close(out, weights @ v, "output (from the returned weights)", call,
                     hint=Cause("return the weights after dropout, the ones multiplied with v.", any_of(close_to(clean @ v), dropped)))
        seen.append(weights)
    expect(not torch.equal(seen[0], seen[1]), "dropout dropped the same weights under two different seeds.",
           hint="draw the dropout mask from torch's random generator (F.dropout, torch.rand_like).")


@pytest.mark.self_comparison(parity="test_matches_reference")
def test_half_precision_keeps_dtype(impl):
    for dtype in (torch.float16, torch.bfloat16):
        q, k, v = _qkv(7, (2, 4, 8), dtype=dtype)
        mask = random_blocked((4, 4), torch.Generator().manual_seed(8), allowed_keys=4)
        call = Call(SDPA, (q, k, v), {"attn_mask": mask})
        out, weights = expect_tuple(impl.run(call).output, 2, call)
        for what, got, shape in (("output", out, (2, 4, 8)), ("weights", weights, (2, 4, 4))):
            expect_shape(got, shape, what, call)
            expect(got.dtype == dtype, f"{what} of {call.signature()}: expected dtype {dtype}, got {got.dtype}.",
                   hint="outputs keep the dtype of the inputs: avoid .float() and hard-coded dtypes.")
            expect(bool(torch.isfinite(got).all()), f"{what} of {call.signature()} holds inf or NaN.")


@pytest.mark.self_comparison(parity="test_gradients_match_reference")
@examples(6)
@given(case=sdpa_cases(masks=("bool", "additive"), dtypes=("float64",)))
def test_inputs_untouched_with_gradients(impl, case):
    args, kwargs = sdpa_inputs(case)
    gen = generator(case, "grad")
    grads = (randn((*case.batch, case.Lq, case.d_v), gen), randn((*case.batch, case.Lq, case.Lk), gen))
    call = Call(SDPA, args, kwargs, grad_outputs=grads)
    expect_untouched(impl.run(call), call)
