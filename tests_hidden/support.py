"""What the hidden tests share: readable cases for hypothesis, inputs drawn from them, checks.

Expected values come from autograder/testing/oracles.py (PyTorch's own implementations), shared with the
public tests, the notebook and the diagnosis; checks on what a call did from autograder/testing/checks.py.

A case is a small frozen dataclass, so hypothesis's falsifying example reads like
`case=MhsaCase(B=1, L=3, d_model=8, h=2, attn_mask='causal', ...)`. Its tensors come from a
generator seeded by the case itself: the same case always means the same inputs, whatever ran before.
"""
import zlib
from dataclasses import dataclass

import torch
from hypothesis import example, settings
from hypothesis import strategies as st

from autograder.testing import oracles
from autograder.testing.calls import Call
from autograder.testing.compare import Mismatch, expect, expect_tensor
from autograder.testing.oracles import additive, blocked_of, causal_blocked, padding_blocked, randn, random_blocked

DTYPES = {"float32": torch.float32, "float64": torch.float64}
ATTN_MASKS = ("none", "causal", "random", "per_batch", "per_head")


def examples(n: int) -> settings:
    """Few examples keep one submission's run short; the rest comes from the plugin's "grading"
    profile (derandomized, one failure reported per test, no explain phase)."""
    return settings(max_examples=n)


def with_cases(*cases):
    """Explicit examples, run first on every submission: the edge cases drawing might not reach."""
    def decorate(test):
        for case in cases:
            test = example(case=case)(test)
        return test
    return decorate


# ---------------------------------------------------------------- cases

@dataclass(frozen=True)
class SdpaCase:
    batch: tuple            # leading dimensions of q, k and v: (), (B,) or (B, h)
    Lq: int
    Lk: int
    d_k: int
    d_v: int
    mask: str = "none"      # none | bool (True = blocked) | additive (-inf = blocked)
    mask_shape: str = "shared"  # shared: (Lq, Lk); full: (*batch, Lq, Lk)
    dtype: str = "float64"
    contiguous: bool = True


@dataclass(frozen=True)
class HeadsCase:
    B: int
    L: int
    h: int
    d_k: int
    dtype: str = "float64"
    contiguous: bool = True


@dataclass(frozen=True)
class MhsaCase:
    B: int
    L: int
    d_model: int
    h: int
    attn_mask: str = "none"  # none | causal | random (L, L) | per_batch (B, 1, L, L) | per_head (B, h, L, L)
    key_padding: bool = False
    mask_kind: str = "bool"  # bool (True = blocked) | additive (-inf = blocked)
    dtype: str = "float64"
    bias: bool = True
    contiguous: bool = True


@dataclass(frozen=True)
class BlockCase:
    B: int
    L: int
    d_model: int
    h: int
    d_ff: int
    activation: str = "relu"
    norm_first: bool = False
    eps: float = 1e-5
    attn_mask: str = "none"
    key_padding: bool = False
    mask_kind: str = "bool"
    dtype: str = "float64"


# ---------------------------------------------------------------- strategies
# The first choice of each sampled_from is where hypothesis shrinks to, so it is the plainest one.

@st.composite
def sdpa_cases(draw, masks=("none", "bool", "additive"), dtypes=("float64", "float32")):
    mask = draw(st.sampled_from(masks))
    return SdpaCase(
        batch=draw(st.sampled_from([(2,), (1,), (2, 3), ()])),
        Lq=draw(st.integers(1, 6)), Lk=draw(st.integers(1, 6)),
        d_k=draw(st.integers(1, 5)), d_v=draw(st.integers(1, 5)),
        mask=mask, mask_shape=draw(st.sampled_from(("shared", "full"))) if mask != "none" else "shared",
        dtype=draw(st.sampled_from(dtypes)), contiguous=draw(st.sampled_from((True, False))))


@st.composite
def heads_cases(draw, dtypes=("float64", "float32")):
    return HeadsCase(B=draw(st.integers(1, 3)), L=draw(st.integers(1, 5)), h=draw(st.integers(1, 4)),
                     d_k=draw(st.integers(1, 4)), dtype=draw(st.sampled_from(dtypes)),
                     contiguous=draw(st.sampled_from((True, False))))


@st.composite
def _masking(draw, attn_masks, key_padding, kinds):
    attn_mask = draw(st.sampled_from(attn_masks))
    padded = draw(st.sampled_from(key_padding))
    kind = draw(st.sampled_from(kinds)) if attn_mask != "none" or padded else "bool"
    return {"attn_mask": attn_mask, "key_padding": padded, "mask_kind": kind}


@st.composite
def mhsa_cases(draw, attn_masks=ATTN_MASKS, key_padding=(False, True), kinds=("bool", "additive"),
               dtypes=("float64",), bias=(True, False), contiguous=(True, False)):
    h, d_k = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    return MhsaCase(B=draw(st.integers(1, 3)), L=draw(st.integers(1, 6)), d_model=h * d_k, h=h,
                    **draw(_masking(attn_masks, key_padding, kinds)), dtype=draw(st.sampled_from(dtypes)),
                    bias=draw(st.sampled_from(bias)), contiguous=draw(st.sampled_from(contiguous)))


@st.composite
def block_cases(draw, attn_masks=ATTN_MASKS, key_padding=(False, True), kinds=("bool", "additive"),
                dtypes=("float64",), norm_first=(False, True), activations=("relu", "gelu"),
                eps=(1e-5, 1e-3, 1e-6)):
    h, d_k = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    return BlockCase(B=draw(st.integers(1, 3)), L=draw(st.integers(1, 6)), d_model=h * d_k, h=h,
                     d_ff=draw(st.integers(1, 12)), activation=draw(st.sampled_from(activations)),
                     norm_first=draw(st.sampled_from(norm_first)), eps=draw(st.sampled_from(eps)),
                     **draw(_masking(attn_masks, key_padding, kinds)), dtype=draw(st.sampled_from(dtypes)))


# ---------------------------------------------------------------- tensors

def generator(case, salt: str = "") -> torch.Generator:
    return torch.Generator().manual_seed(zlib.crc32(f"{case!r}{salt}".encode()))


def layout(t: torch.Tensor, contiguous: bool) -> torch.Tensor:
    """Same values; when not `contiguous`, the last two dimensions are swapped in memory."""
    if contiguous or t.dim() < 2:
        return t
    return t.transpose(-1, -2).contiguous().transpose(-1, -2)


def as_kind(blocked: torch.Tensor, kind: str, dtype) -> torch.Tensor:
    return blocked if kind == "bool" else additive(blocked, dtype)


def random_lengths(gen, B: int, L: int) -> list:
    """Lengths in [1, L]; the first is shorter than L whenever it can be, so some key is padding."""
    lengths = torch.randint(1, L + 1, (B,), generator=gen)
    if L > 1:
        lengths[0] = int(torch.randint(1, L, (), generator=gen))
    return lengths.tolist()


def sdpa_inputs(case: SdpaCase):
    """(q, k, v) and the keyword arguments (attn_mask) of a case."""
    gen, dtype = generator(case), DTYPES[case.dtype]
    q = randn((*case.batch, case.Lq, case.d_k), gen, dtype)
    k = randn((*case.batch, case.Lk, case.d_k), gen, dtype)
    v = randn((*case.batch, case.Lk, case.d_v), gen, dtype)
    kwargs = {}
    if case.mask != "none":
        shape = (case.Lq, case.Lk) if case.mask_shape == "shared" else (*case.batch, case.Lq, case.Lk)
        kwargs["attn_mask"] = as_kind(random_blocked(shape, gen, allowed_keys=case.Lk), case.mask, dtype)
    return tuple(layout(t, case.contiguous) for t in (q, k, v)), kwargs


def sequence_inputs(case, scale=1.0):
    """x (B, L, d_model) and the forward's mask keyword arguments of an MhsaCase or BlockCase."""
    gen, dtype, B, L = generator(case), DTYPES[case.dtype], case.B, case.L
    x = layout(randn((B, L, case.d_model), gen, dtype, scale), getattr(case, "contiguous", True))
    masks, allowed = {}, L
    if case.key_padding:
        lengths = random_lengths(gen, B, L)
        allowed = min(lengths)
        masks["key_padding_mask"] = as_kind(padding_blocked(lengths, L), case.mask_kind, dtype)
    shapes = {"random": (L, L), "per_batch": (B, 1, L, L), "per_head": (B, case.h, L, L)}
    if case.attn_mask == "causal":
        masks["attn_mask"] = as_kind(causal_blocked(L), case.mask_kind, dtype)
    elif case.attn_mask in shapes:
        blocked = random_blocked(shapes[case.attn_mask], gen, allowed_keys=allowed)
        masks["attn_mask"] = as_kind(blocked, case.mask_kind, dtype)
    return x, masks


# ---------------------------------------------------------------- weights

def mhsa_state(case) -> dict:
    """Random weights for MultiHeadSelfAttention (biases unless the case has none)."""
    draw = oracles.draws(generator(case, "weights"), DTYPES[case.dtype])
    return oracles.mhsa_state(case.d_model, draw, bias=getattr(case, "bias", True))


def block_state(case) -> dict:
    return oracles.block_state(case.d_model, case.d_ff, oracles.draws(generator(case, "weights"), DTYPES[case.dtype]))


def mhsa_init(case, **extra) -> dict:
    init = {"d_model": case.d_model, "num_heads": case.h}
    if not getattr(case, "bias", True):
        init["bias"] = False
    return init | extra


def block_init(case, **extra) -> dict:
    return {"d_model": case.d_model, "num_heads": case.h, "d_ff": case.d_ff, "activation": case.activation,
            "norm_first": case.norm_first, "layer_norm_eps": case.eps} | extra


def mhsa_call(case, x, masks, state=None, **fields) -> Call:
    """A MultiHeadSelfAttention call; `fields` are Call fields, `need_weights` goes to forward."""
    kwargs = dict(masks)
    if fields.pop("need_weights", False):
        kwargs["need_weights"] = True
    init = mhsa_init(case, **fields.pop("init", {}))
    return Call("MultiHeadSelfAttention", (x,), kwargs, init=init, state=state or mhsa_state(case),
                dtype=DTYPES[case.dtype], **fields)


def block_call(case, x, masks, state=None, **fields) -> Call:
    init = block_init(case, **fields.pop("init", {}))
    return Call("TransformerBlock", (x,), dict(masks), init=init, state=state or block_state(case),
                dtype=DTYPES[case.dtype], **fields)


# ---------------------------------------------------------------- checks with student-facing messages

def expect_close(got, expected, what: str, call: Call, **tolerance) -> None:
    expect_tensor(got, expected, what=f"{what} of {call.signature()}", **tolerance)


def random_in_eval(runs) -> str:
    """The eval-mode dropout hint, for the results of one call under two seeds: only when they differ,
    which shows that something random ran (a wrong value alone may have any cause)."""
    first, second = runs
    tensors = zip(first, second) if isinstance(first, tuple) else [(first, second)]
    same = all(isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
               and torch.allclose(a, b, rtol=0, atol=0, equal_nan=True) for a, b in tensors)
    return "" if same else "the results differ under two seeds: dropout applies in training mode only."


def expect_finite(impl, call: Call, ordinary: Call, *tensors) -> None:
    """`tensors` (the results of `call`, on large inputs) hold no inf or NaN. The overflow hint only
    when the same call on inputs of ordinary size (`ordinary`) stays finite: then the size caused it."""
    if all(bool(torch.isfinite(t).all()) for t in tensors):
        return
    small = impl.run(ordinary).output
    small = small if isinstance(small, tuple) else (small,)
    finite = all(isinstance(t, torch.Tensor) and bool(torch.isfinite(t).all()) for t in small)
    raise Mismatch(f"{call.signature()} with large inputs returned inf or NaN.",
                   hint="use torch.softmax, or subtract each row's maximum before exp()." if finite else "")


def expect_shape(got, shape: tuple, what: str, call: Call) -> None:
    expect(isinstance(got, torch.Tensor), f"{what} of {call.signature()}: expected a tensor, got {type(got).__name__}.")
    expect(tuple(got.shape) == tuple(shape),
           f"{what} of {call.signature()}: expected shape {tuple(shape)}, got {tuple(got.shape)}.")


def expect_grads(outcome, expected: oracles.Expected, call: Call) -> None:
    """The output, then the gradient of x and of every parameter, against the oracle's: wrong values
    explain wrong gradients, so gradients (and the hint about detaching) are judged on right values only."""
    expect_close(outcome.output, expected.output, "output", call)
    grads = [("gradient of x", outcome.input_grads.get("arg0"), expected.x_grad)]
    grads += [(f"gradient of parameter {name}", outcome.param_grads.get(name), g)
              for name, g in sorted(expected.param_grads.items())]
    for what, got, want in grads:
        if got is None:
            raise Mismatch(f"{what} of {call.signature()} is missing: the output does not depend on it "
                           "through autograd.", hint="look for .detach(), .data, torch.no_grad() or a "
                                                     "tensor rebuilt with torch.tensor(...).")
        expect_close(got, want, what, call)


def expect_fraction(fraction: float, low: float, high: float, summary: str, hint: str = "") -> None:
    expect(low <= fraction <= high, f"{summary}: {fraction:.0%}, expected between {low:.0%} and {high:.0%}.",
           hint=hint)


# ---------------------------------------------------------------- properties shared by mhsa and block
# `make_call(case, x, masks)` builds the Call of the part under test; its output is a (B, L, d) tensor.

def check_permutation_equivariance(impl, case, make_call) -> None:
    """Without masks or positions, attention cannot tell token order: permuting x permutes the output."""
    x, _ = sequence_inputs(case)
    perm = torch.randperm(case.L, generator=generator(case, "perm"))
    call, permuted = make_call(case, x, {}), make_call(case, x[:, perm], {})
    expect_close(impl.run(permuted).output, impl.run(call).output[:, perm], "output for permuted tokens", permuted,
                 hint="treat every token alike: tokens mix only through the attention weights.")


def check_causality(impl, case, make_call) -> None:
    """Changing future tokens changes no output at or before the present."""
    x, masks = sequence_inputs(case)
    t = case.L // 2
    future = x.clone()
    future[:, t + 1:] = randn(future[:, t + 1:].shape, generator(case, "future"), x.dtype)
    call, changed = make_call(case, x, masks), make_call(case, future, masks)
    expect_close(impl.run(changed).output[:, :t + 1], impl.run(call).output[:, :t + 1],
                 f"output at positions <= {t} after changing later tokens", changed,
                 hint="no query may see a later key: add attn_mask to the scores before the softmax.")


def check_key_padding_invariance(impl, case, make_call) -> None:
    """Padded tokens are invisible as keys: changing them leaves every real token's output alone.
    Used without a causal mask, so that padding applied to the wrong axis cannot hide behind it."""
    x, masks = sequence_inputs(case)
    padded = blocked_of(masks["key_padding_mask"])  # (B, L)
    changed_x = torch.where(padded[..., None], randn(x.shape, generator(case, "pad"), x.dtype), x)
    call, changed = make_call(case, x, masks), make_call(case, changed_x, masks)
    real = ~padded
    expect_close(impl.run(changed).output[real], impl.run(call).output[real],
                 "output at real (unpadded) tokens after changing padded ones", changed,
                 hint="what a padded token holds still reaches the real tokens: padded keys get attention weight.")
