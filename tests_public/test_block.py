"""TransformerBlock against torch.nn.TransformerEncoderLayer(batch_first=True) with the same weights.

The LayerNorms get random affine parameters (not the default 1 and 0) and a non-default eps, so a
swapped or shared norm, or an ignored eps, shows up.
"""
import math

import pytest
import torch

from autograder.testing.calls import Call
from autograder.testing.checks import expect_raises
from autograder.testing.compare import Cause, any_of, close_to, expect
from autograder.testing.oracles import F64, additive, block_expected, causal_blocked, padding_blocked
from tests_public.support import (block_state, check, construct, expect_like, randn, random_bool_mask,
                                  random_lengths, run_module, scale_queries, swapped_norms, tanh_gelu)

pytestmark = pytest.mark.part("block")

BLOCK = "TransformerBlock"
B, L, D, H, D_FF = 2, 5, 12, 3, 20
EPS = 1e-3
ORDER = {False: "post-LN: x = norm1(x + SA(x)), then x = norm2(x + FF(x))",
         True: "pre-LN: x = x + SA(norm1(x)), then x = x + FF(norm2(x))"}


def settings(norm_first=False, activation="relu", dropout=0.1, layer_norm_eps=EPS):
    return {"d_model": D, "num_heads": H, "d_ff": D_FF, "dropout": dropout, "activation": activation,
            "norm_first": norm_first, "layer_norm_eps": layer_norm_eps}


def block_suspects(state, x, init, attn_mask, kpm):
    def variant(state=state, attn_mask=attn_mask, kpm=kpm, **changes):
        return lambda: block_expected(state, x, init | changes, attn_mask, kpm).output

    found = [
        (variant(state=swapped_norms(state)),
         "norm1 and norm2 are swapped: norm1 belongs to the attention sub-layer, norm2 to the feed-forward one."),
        (variant(norm_first=not init["norm_first"]),
         f"wrong LayerNorm placement: norm_first={init['norm_first']} means {ORDER[init['norm_first']]}."),
        (variant(layer_norm_eps=1e-5),
         "the LayerNorms ignore layer_norm_eps: pass eps=layer_norm_eps to nn.LayerNorm."),
        (variant(state=scale_queries(state, math.sqrt(D // H), prefix="attn.")),
         "the attention scores are not divided by sqrt(d_k) (check your MultiHeadSelfAttention)."),
    ]
    if init["activation"] == "gelu":
        found.append((variant(activation=tanh_gelu),
                      "use the exact GELU (erf form, torch.nn.functional.gelu's default), not the tanh "
                      "approximation."))
    other = "gelu" if init["activation"] == "relu" else "relu"
    found.append((variant(activation=other), f"activation={init['activation']!r} was asked for, but the "
                                             f"feed-forward network used {other}."))
    if attn_mask is not None and kpm is not None:
        found.append((variant(attn_mask=None, kpm=None), "the masks must be passed on to the attention."))
    for name, mask in (("attn_mask", attn_mask), ("kpm", kpm)):
        if mask is not None:
            found.append((variant(**{name: None}), f"{name.replace('kpm', 'key_padding_mask')} must be "
                                                   "passed on to the attention."))
    return found


def check_block_output(got, call, state, x, init, attn_mask=None, key_padding_mask=None, hint=""):
    __tracebackhide__ = True
    norm_first = init.get("norm_first", False)
    expected = block_expected(state, x, init, attn_mask, key_padding_mask).output
    check(got, expected, what=f"output of {call.signature()}",
          hint=hint or f"with norm_first={norm_first} the block is {ORDER[norm_first]}, where "
                       "FF(x) = ff2(activation(ff1(x))) and SA is your MultiHeadSelfAttention; in eval "
                       "mode no dropout is applied. If tests of MultiHeadSelfAttention fail, fix those "
                       "first.",
          suspects=block_suspects(state, x, init, attn_mask, key_padding_mask))


def check_block(impl, init, x=None, state=None, attn_mask=None, key_padding_mask=None, dtype=F64,
                training=False):
    __tracebackhide__ = True
    x = randn(B, L, D, dtype=dtype) if x is None else x
    state = block_state(D, D_FF, dtype=dtype) if state is None else state
    masks = {k: v for k, v in (("attn_mask", attn_mask), ("key_padding_mask", key_padding_mask)) if v is not None}
    outcome, call = run_module(impl, BLOCK, init, x, state=state, dtype=dtype, training=training, **masks)
    check_block_output(outcome.output, call, state, x, init, attn_mask, key_padding_mask)


# -- construction -----------------------------------------------------------------------------------

def test_constructor_attributes(impl):
    outcome, what = construct(impl, BLOCK, **settings())
    children, params = outcome.attributes.get("children", {}), outcome.attributes.get("params", {})
    wanted = {"attn": "MultiHeadSelfAttention", "ff1": "Linear", "ff2": "Linear", "norm1": "LayerNorm",
              "norm2": "LayerNorm"}
    missing = {k: v for k, v in wanted.items() if children.get(k) != v}
    expect(not missing, f"{what}: expected submodules {wanted}; missing or of another type: "
                        f"{ {k: children.get(k) for k in missing} }.",
           hint="create attn = MultiHeadSelfAttention(...), ff1 and ff2 (nn.Linear), norm1 and norm2 "
                "(nn.LayerNorm) under exactly these names.")
    expected = {"attn.qkv.weight": [3 * D, D], "attn.qkv.bias": [3 * D], "attn.out.weight": [D, D],
                "attn.out.bias": [D], "ff1.weight": [D_FF, D], "ff1.bias": [D_FF], "ff2.weight": [D, D_FF],
                "ff2.bias": [D], "norm1.weight": [D], "norm1.bias": [D], "norm2.weight": [D], "norm2.bias": [D]}
    expect(params == expected, f"{what}: expected parameters {expected}, got {params}.",
           hint="ff1 maps d_model -> d_ff, ff2 maps d_ff -> d_model; the norms are nn.LayerNorm(d_model); "
                "no other parameters.")


@pytest.mark.argument_check(requires="test_constructor_attributes")
@pytest.mark.parametrize("activation", ["tanh", "swish", "sigmoid"])
def test_unknown_activation_raises_value_error(impl, activation):
    expect_raises(impl, Call(BLOCK, init=settings(activation=activation), construct_only=True), ValueError,
                  hint="only 'relu' and 'gelu' are valid activations: raise ValueError for anything else.")


@pytest.mark.argument_check(requires="test_constructor_attributes")
def test_invalid_head_count_raises_value_error(impl):
    init = settings() | {"num_heads": 5}
    expect_raises(impl, Call(BLOCK, init=init, construct_only=True), ValueError,
                  hint="the block's MultiHeadSelfAttention must reject num_heads that do not divide d_model.")


# -- forward ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_matches_torch_encoder_layer(impl, norm_first, activation):
    check_block(impl, settings(norm_first, activation))


@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_matches_torch_encoder_layer_with_causal_and_padding(impl, norm_first, activation):
    check_block(impl, settings(norm_first, activation), attn_mask=causal_blocked(L),
                key_padding_mask=padding_blocked(random_lengths(B, L), L))


@pytest.mark.parametrize("case", ["float-causal", "bool-B-h-L-L", "float-key-padding"])
def test_mask_kinds(impl, case):
    masks = {
        "float-causal": lambda: {"attn_mask": additive(causal_blocked(L), torch.float32)},
        "bool-B-h-L-L": lambda: {"attn_mask": random_bool_mask(B, H, L, L)},
        "float-key-padding": lambda: {"key_padding_mask": additive(padding_blocked(random_lengths(B, L), L), F64)},
    }[case]()
    check_block(impl, settings(norm_first=True), **masks)


def test_default_layer_norm_eps(impl):
    init = settings()
    del init["layer_norm_eps"]
    x = randn(B, L, D, scale=0.05)  # small activations: the eps matters
    state = block_state(D, D_FF)
    outcome, call = run_module(impl, BLOCK, init, x, state=state)
    # The default's hint only when the output is the block's with another eps: a wrong value alone may
    # come from anywhere in the block.
    other_eps = [close_to(block_expected(state, x, init | {"layer_norm_eps": eps}).output)
                 for eps in (0.0, 1e-12, 1e-8, 1e-6, 1e-3)]
    check_block_output(outcome.output, call, state, x, init | {"layer_norm_eps": 1e-5},
                       hint=Cause("layer_norm_eps defaults to 1e-5, the default of nn.LayerNorm and "
                                  "nn.TransformerEncoderLayer.", any_of(*other_eps)))


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_float32(impl, norm_first):
    check_block(impl, settings(norm_first, "gelu"), dtype=torch.float32, attn_mask=causal_blocked(L))


def test_training_mode_without_dropout_is_deterministic(impl):
    check_block(impl, settings(True, "relu", dropout=0.0), training=True, attn_mask=causal_blocked(L))


@pytest.mark.self_comparison(parity="test_matches_torch_encoder_layer")
def test_dropout_is_active_in_training_mode(impl):
    init = settings(False, "relu", dropout=0.5)
    x, state = randn(B, L, D), block_state(D, D_FF)
    outcome, call = run_module(impl, BLOCK, init, x, state=state, training=True)
    got, clean = outcome.output, block_expected(state, x, init).output
    expect_like(got, clean, f"output of {call.signature()}")
    expect(bool(torch.isfinite(got).all()), f"output of {call.signature()} is not finite.")
    expect(not torch.allclose(got, clean), f"output of {call.signature()} equals the eval-mode output.",
           hint="in training mode the block applies dropout (p=dropout) where nn.TransformerEncoderLayer "
                "does: after attention, inside the feed-forward network and after it.")


def test_gradients_match_torch(impl):
    init = settings(True, "gelu")
    x, state, g = randn(B, L, D), block_state(D, D_FF), randn(B, L, D)
    mask, kpm = causal_blocked(L), padding_blocked(random_lengths(B, L), L)
    outcome, call = run_module(impl, BLOCK, init, x, state=state, attn_mask=mask, key_padding_mask=kpm,
                               grad_outputs=g)
    check_block_output(outcome.output, call, state, x, init, mask, kpm)  # forward first
    want = block_expected(state, x, init, mask, kpm, grad_output=g)
    hint = "keep forward differentiable: no .detach(), .item(), .numpy(), .data or in-place writes."
    check(outcome.input_grads.get("arg0"), want.x_grad,
          what=f"gradient of x after backward through {call.signature()}", hint=hint)
    for name, expected in want.param_grads.items():
        check(outcome.param_grads.get(name), expected,
              what=f"gradient of {name} after backward through {call.signature()}", hint=hint)


def feed_forward_only_state(d_ff=D_FF):
    """Weights under which the block's output minus its input is the feed-forward branch alone, and
    that branch is exactly act(1) everywhere without dropout: self-attention adds 0 (W^O = 0), every
    hidden unit holds act(1) (ff1 = 0 with bias 1, whatever the norm gives it), ff2 averages them."""
    state = block_state(D, d_ff)
    for name in ("attn.out.weight", "attn.out.bias", "ff1.weight", "ff2.bias"):
        state[name] = torch.zeros_like(state[name])
    state["ff1.bias"] = torch.ones_like(state["ff1.bias"])
    state["ff2.weight"] = torch.full_like(state["ff2.weight"], 1.0 / d_ff)
    return state


def test_feed_forward_dropout_placement(impl):
    """nn.TransformerEncoderLayer drops in two places of the feed-forward sub-layer: after the
    activation (inside FF, before ff2) and on FF's output (before the residual sum)."""
    p = 0.5
    init, x, state = settings(norm_first=True, activation="relu", dropout=p), randn(B, L, D), feed_forward_only_state()
    outcome, call = run_module(impl, BLOCK, init, x, state=state, training=True)
    expect_like(outcome.output, x, f"output of {call.signature()}")
    branch = outcome.output - x  # what the feed-forward branch added: relu(1) = 1 without dropout
    dropped = branch.abs() < 1e-9
    expect(0.2 < float(dropped.double().mean()) < 0.8,
           f"{call.signature()}, with weights that make the feed-forward branch add exactly "
           f"1.0 to every feature without dropout: {int(dropped.sum())} of {dropped.numel()} of its outputs "
           f"are 0; with dropout {p} about {p:.0%} should be.",
           hint="apply dropout to the feed-forward output (after ff2) before adding it to the residual, as "
                "nn.TransformerEncoderLayer does (handout, section 1.6)." if not dropped.any() and bool(
                    ((branch - 1).abs() < 1e-6).all()) else "")  # only when the branch is exactly its dropout-free value
    # Kept outputs are (1 / (1-p)) * ff2(dropout(hidden)): the average of the surviving hidden units.
    # Without the inner dropout all of them are exactly 1 / (1-p).
    untouched = (branch - 1 / (1 - p)).abs() < 1e-9
    share = float(untouched.double().sum()) / max(int((~dropped).sum()), 1)
    expect(share < 0.5,
           f"{call.signature()}, with weights that make the feed-forward branch add exactly "
           f"1.0 to every feature without dropout: {share:.0%} of the outputs that survived dropout are exactly "
           f"1 / (1 - p), as if no hidden unit had been dropped; dropout between the activation and ff2 would "
           f"change most of them.",
           hint="FF(x) = ff2(dropout(activation(ff1(x)))), then dropout again before the residual sum: "
                "nn.TransformerEncoderLayer drops after the activation too (handout, sections 1.6 and 3).")
