"""TransformerBlock: against nn.TransformerEncoderLayer (values and gradients, post-LN and pre-LN),
against the reference in float32, where dropout acts, and properties that need no oracle."""
import pytest
import torch
from hypothesis import example, given

from autograder.testing.calls import Call
from autograder.testing.checks import expect_raises, expect_untouched
from autograder.testing.compare import expect
from autograder.testing.oracles import block_expected, randn
from tests_hidden.support import (BlockCase, block_call, block_cases, block_init, block_state, check_causality,
                                  check_key_padding_invariance, check_permutation_equivariance, examples,
                                  expect_close, expect_fraction, expect_grads, expect_shape, generator,
                                  expect_finite, random_in_eval, sequence_inputs, with_cases)

pytestmark = pytest.mark.part("block")
EDGES = (BlockCase(B=1, L=1, d_model=2, h=2, d_ff=1), BlockCase(B=2, L=3, d_model=6, h=3, d_ff=4, eps=1e-3),
         BlockCase(B=1, L=4, d_model=4, h=1, d_ff=8, activation="gelu", norm_first=True, eps=1e-6,
                   attn_mask="causal", key_padding=True),
         BlockCase(B=2, L=3, d_model=4, h=2, d_ff=5, norm_first=True, eps=1e-3, attn_mask="per_head",
                   mask_kind="additive"))
DROPOUT_CASE = BlockCase(B=2, L=8, d_model=16, h=2, d_ff=32, norm_first=True)


@examples(15)
@given(case=block_cases())
@with_cases(*EDGES)
def test_matches_torch(impl, case):
    """float64 against nn.TransformerEncoderLayer(batch_first=True): a LayerNorm eps off by a little,
    or the tanh GELU, shows here."""
    x, masks = sequence_inputs(case)
    state = block_state(case)
    call = block_call(case, x, masks, state)
    outcome = impl.run(call)
    expect_close(outcome.output, block_expected(state, x, block_init(case), **masks).output, "output", call)
    expect_untouched(outcome, call)


@examples(10)
@given(case=block_cases(dtypes=("float32",)))
def test_matches_reference_float32(impl, ref, case):
    x, masks = sequence_inputs(case)
    call = block_call(case, x, masks)
    expect_close(impl.run(call).output, ref.run(call).output, "output", call)


@examples(6)
@given(case=block_cases())
@example(case=EDGES[2])
def test_gradients_match_torch(impl, case):
    x, masks = sequence_inputs(case)
    state = block_state(case)
    g = randn(x.shape, generator(case, "grad"), x.dtype)
    call = block_call(case, x, masks, state, grad_outputs=(g,))
    expect_grads(impl.run(call), block_expected(state, x, block_init(case), **masks, grad_output=g), call)


def test_defaults_match_torch(impl):
    """TransformerBlock(d_model, num_heads, d_ff) is nn.TransformerEncoderLayer's default layout:
    ReLU, post-LN, eps 1e-5."""
    case = BlockCase(B=2, L=4, d_model=8, h=2, d_ff=16)
    x, _ = sequence_inputs(case)
    state = block_state(case)
    call = Call("TransformerBlock", (x,), init={"d_model": 8, "num_heads": 2, "d_ff": 16}, state=state,
                dtype=torch.float64)
    expect_close(impl.run(call).output, block_expected(state, x, block_init(case)).output, "output", call)


def test_attributes(impl):
    call = Call("TransformerBlock", init={"d_model": 12, "num_heads": 3, "d_ff": 20}, construct_only=True)
    params = impl.run(call).attributes["params"]
    shapes = {"attn.qkv.weight": [36, 12], "attn.out.weight": [12, 12], "ff1.weight": [20, 12], "ff1.bias": [20],
              "ff2.weight": [12, 20], "ff2.bias": [12], "norm1.weight": [12], "norm1.bias": [12],
              "norm2.weight": [12], "norm2.bias": [12]}
    for name, shape in shapes.items():
        expect(params.get(name) == shape, f"{call.signature()}: parameter {name} should have shape {tuple(shape)}, "
                                          f"got {tuple(params[name]) if name in params else 'none'}.",
               hint="attn = MultiHeadSelfAttention(...), ff1 = nn.Linear(d_model, d_ff), "
                    "ff2 = nn.Linear(d_ff, d_model), norm1 and norm2 = nn.LayerNorm(d_model, eps=...).")


@pytest.mark.argument_check(requires="test_attributes")
@pytest.mark.parametrize("activation", ["tanh", "swish", ""])
def test_unknown_activation_raises(impl, activation):
    call = Call("TransformerBlock", init={"d_model": 8, "num_heads": 2, "d_ff": 16, "activation": activation},
                construct_only=True)
    expect_raises(impl, call, ValueError, "activation is 'relu' or 'gelu'")


def test_eval_ignores_dropout(impl):
    case = BlockCase(B=2, L=5, d_model=8, h=2, d_ff=16, attn_mask="causal")
    x, masks = sequence_inputs(case)
    state = block_state(case)
    want = block_expected(state, x, block_init(case), **masks).output
    calls = [block_call(case, x, masks, state, init={"dropout": 0.5}, seed=seed) for seed in (1, 2)]
    runs = [impl.run(call).output for call in calls]
    hint = random_in_eval(runs)
    for call, out in zip(calls, runs):
        expect_close(out, want, "output", call, hint=hint)


def _constant_attention_state(case):
    """Values all ones and W^O the identity: self-attention outputs each query's sum of attention
    weights, exactly 1 without dropout. The feed-forward branch adds exactly 0 (ff2 = 0)."""
    state, d = block_state(case), case.d_model
    state["attn.qkv.weight"][2 * d:] = 0
    state["attn.qkv.bias"][2 * d:] = 1
    state["attn.out.weight"] = torch.eye(d, dtype=state["attn.out.weight"].dtype)
    for name in ("attn.out.bias", "ff2.weight", "ff2.bias"):
        state[name].zero_()
    return state


def _constant_feed_forward_state(case):
    """Every hidden unit holds act(1) and ff2 averages them: without dropout the feed-forward branch
    adds act(1) everywhere. Self-attention adds exactly 0 (W^O = 0)."""
    state = block_state(case)
    for name in ("attn.out.weight", "attn.out.bias", "ff1.weight", "ff2.bias"):
        state[name].zero_()
    state["ff1.bias"].fill_(1.0)
    state["ff2.weight"].fill_(1.0 / case.d_ff)
    return state


def _dropout_checks(impl, ref, state, branch, outer_hint, inner_hint, p=0.3, seeds=16):
    """In training (pre-LN), x + branch - x shows what dropout did to the one branch that is not
    silenced, whatever random numbers a solution draws: a share p of its outputs zeroed (the dropout
    after it), the kept ones not all equal to the dropout-free value / (1-p) (the dropout inside it),
    and on average over seeds the dropout-free value (every dropout rescales by 1/(1-p))."""
    case = DROPOUT_CASE
    x, _ = sequence_inputs(case)
    clean = ref.run(block_call(case, x, {}, state)).output - x
    # The dropout hints only when the student's own eval output is right: otherwise the branch is wrong
    # before any dropout, and its zeros and values say nothing about where dropout stands.
    right_in_eval = torch.allclose(impl.run(block_call(case, x, {}, state)).output - x, clean)
    outer_hint, inner_hint = (outer_hint, inner_hint) if right_in_eval else ("", "")
    deltas = []
    for seed in range(1, seeds + 1):
        call = block_call(case, x, {}, state, init={"dropout": p}, training=True, seed=seed)
        out = impl.run(call).output
        expect_shape(out, x.shape, "output", call)
        deltas.append(out - x)
    for delta in deltas[:2]:
        kept = delta != 0
        expect_fraction(1 - kept.double().mean().item(), 0.15, 0.45,
                        f"share of the {branch} branch's outputs zeroed by {call.signature()}", hint=outer_hint)
        untouched = torch.isclose(delta, clean / (1 - p), rtol=1e-6, atol=1e-9) & kept
        expect_fraction(untouched.double().sum().item() / max(int(kept.sum()), 1), 0.0, 0.5,
                        f"share of the {branch} branch's kept outputs that are exactly their dropout-free value "
                        f"/ (1-p) under {call.signature()}", hint=inner_hint)
    ratio = (torch.stack(deltas).mean() / clean.mean()).item()
    if abs(ratio - 1) >= 0.15:
        expect(False, f"averaged over {seeds} seeds, the {branch} branch of {call.signature()} "
                      f"is {ratio:.2f} times its dropout-free value, expected 1.",
               hint="dropout keeps the expectation: kept values are scaled by 1/(1-p), as F.dropout does."
               if right_in_eval else "")


def test_dropout_in_attention_branch(impl, ref):
    """nn.TransformerEncoderLayer drops attention weights (inside self-attention) and the
    self-attention output (dropout1)."""
    _dropout_checks(impl, ref, _constant_attention_state(DROPOUT_CASE), "self-attention",
                    outer_hint="apply dropout to the self-attention output before adding it to the residual.",
                    inner_hint="self-attention inside the block must drop attention weights too: "
                               "pass dropout to MultiHeadSelfAttention.")


def test_dropout_in_feed_forward_branch(impl, ref):
    """nn.TransformerEncoderLayer drops after the activation and after ff2 (dropout, dropout2)."""
    _dropout_checks(impl, ref, _constant_feed_forward_state(DROPOUT_CASE), "feed-forward",
                    outer_hint="apply dropout to the feed-forward output (after ff2) before adding it to the residual.",
                    inner_hint="apply dropout between the activation and ff2, as nn.TransformerEncoderLayer does.")


@pytest.mark.self_comparison(parity="test_matches_torch")
@examples(6)
@given(case=block_cases(attn_masks=("none",), key_padding=(False,)))
def test_permutation_equivariance(impl, case):
    check_permutation_equivariance(impl, case, block_call)


@pytest.mark.self_comparison(parity="test_matches_torch")
@examples(6)
@given(case=block_cases(attn_masks=("causal",), key_padding=(False,)))
@example(case=BlockCase(B=2, L=5, d_model=4, h=2, d_ff=6, attn_mask="causal"))
def test_causality(impl, case):
    check_causality(impl, case, block_call)


@pytest.mark.self_comparison(parity="test_matches_torch")
@examples(6)
@given(case=block_cases(attn_masks=("none",), key_padding=(True,)))
@example(case=BlockCase(B=2, L=4, d_model=4, h=2, d_ff=6, key_padding=True))
def test_key_padding_invariance(impl, case):
    check_key_padding_invariance(impl, case, block_call)


@pytest.mark.self_comparison(parity="test_matches_torch")
@pytest.mark.parametrize("norm_first", [False, True])
def test_inputs_untouched(impl, norm_first):
    case = BlockCase(B=2, L=4, d_model=8, h=2, d_ff=16, norm_first=norm_first, attn_mask="causal",
                     key_padding=True, mask_kind="additive")
    x, masks = sequence_inputs(case)
    call = block_call(case, x, masks)
    expect_untouched(impl.run(call), call)


def test_large_inputs_stay_finite(impl):
    """Post-LN feeds x itself to self-attention: large inputs make large scores."""
    for dtype in ("float64", "float32"):
        case = BlockCase(B=2, L=6, d_model=8, h=2, d_ff=16, attn_mask="causal", dtype=dtype)
        x, masks = sequence_inputs(case, scale=40.0)
        state = block_state(case)
        call = block_call(case, x, masks, state)
        out = impl.run(call).output
        expect_shape(out, x.shape, "output", call)
        expect_finite(impl, call, block_call(case, x / 40.0, masks, state), out)
        if dtype == "float64":
            expect_close(out, block_expected(state, x, block_init(case), **masks).output, "output", call)
