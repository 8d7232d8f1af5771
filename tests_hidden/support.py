"""What the hidden tests share: readable cases for hypothesis, inputs drawn from them, oracles, checks.

A case is a small frozen dataclass, so hypothesis's falsifying example reads like
`case=MhsaCase(B=1, L=3, d_model=8, h=2, attn_mask='causal', ...)`. Its tensors come from a
generator seeded by the case itself: the same case always means the same inputs, whatever ran before.
"""
import math
import zlib
from dataclasses import dataclass

import torch
import torch.nn as nn
from hypothesis import example, settings
from hypothesis import strategies as st

from autograder import errors
from autograder.calls import Call
from autograder.compare import Mismatch, expect, expect_tensor

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


def randn(gen, shape, dtype=torch.float64, scale=1.0) -> torch.Tensor:
    # Drawn in float64 and cast, so a float32 case holds the values of its float64 twin.
    return (torch.randn(tuple(shape), generator=gen, dtype=torch.float64) * scale).to(dtype)


def layout(t: torch.Tensor, contiguous: bool) -> torch.Tensor:
    """Same values; when not `contiguous`, the last two dimensions are swapped in memory."""
    if contiguous or t.dim() < 2:
        return t
    return t.transpose(-1, -2).contiguous().transpose(-1, -2)


def additive(blocked: torch.Tensor, dtype) -> torch.Tensor:
    return torch.zeros(blocked.shape, dtype=dtype).masked_fill(blocked, float("-inf"))


def as_kind(blocked: torch.Tensor, kind: str, dtype) -> torch.Tensor:
    return blocked if kind == "bool" else additive(blocked, dtype)


def blocked_of(mask: torch.Tensor) -> torch.Tensor:
    return mask if mask.dtype == torch.bool else torch.isinf(mask)


def random_blocked(gen, shape, allowed_keys: int) -> torch.Tensor:
    """Random bool mask (True = blocked) that leaves every row a key among the first `allowed_keys`:
    a fully blocked row is unspecified by the contract, so tests never make one."""
    blocked = torch.rand(tuple(shape), generator=gen) < 0.4
    keep = torch.randint(allowed_keys, tuple(shape[:-1]), generator=gen)
    return blocked.scatter(-1, keep[..., None], False)


def causal_blocked(L: int) -> torch.Tensor:
    return torch.ones(L, L, dtype=torch.bool).triu(1)


def random_lengths(gen, B: int, L: int) -> list:
    """Lengths in [1, L]; the first is shorter than L whenever it can be, so some key is padding."""
    lengths = torch.randint(1, L + 1, (B,), generator=gen)
    if L > 1:
        lengths[0] = int(torch.randint(1, L, (), generator=gen))
    return lengths.tolist()


def padding_blocked(lengths, L: int) -> torch.Tensor:
    return torch.arange(L)[None, :] >= torch.as_tensor(lengths)[:, None]


def sdpa_inputs(case: SdpaCase):
    """(q, k, v) and the keyword arguments (attn_mask) of a case."""
    gen, dtype = generator(case), DTYPES[case.dtype]
    q = randn(gen, (*case.batch, case.Lq, case.d_k), dtype)
    k = randn(gen, (*case.batch, case.Lk, case.d_k), dtype)
    v = randn(gen, (*case.batch, case.Lk, case.d_v), dtype)
    kwargs = {}
    if case.mask != "none":
        shape = (case.Lq, case.Lk) if case.mask_shape == "shared" else (*case.batch, case.Lq, case.Lk)
        kwargs["attn_mask"] = as_kind(random_blocked(gen, shape, case.Lk), case.mask, dtype)
    return tuple(layout(t, case.contiguous) for t in (q, k, v)), kwargs


def sequence_inputs(case, scale=1.0):
    """x (B, L, d_model) and the forward's mask keyword arguments of an MhsaCase or BlockCase."""
    gen, dtype, B, L = generator(case), DTYPES[case.dtype], case.B, case.L
    x = layout(randn(gen, (B, L, case.d_model), dtype, scale), getattr(case, "contiguous", True))
    masks, allowed = {}, L
    if case.key_padding:
        lengths = random_lengths(gen, B, L)
        allowed = min(lengths)
        masks["key_padding_mask"] = as_kind(padding_blocked(lengths, L), case.mask_kind, dtype)
    shapes = {"random": (L, L), "per_batch": (B, 1, L, L), "per_head": (B, case.h, L, L)}
    if case.attn_mask == "causal":
        masks["attn_mask"] = as_kind(causal_blocked(L), case.mask_kind, dtype)
    elif case.attn_mask in shapes:
        masks["attn_mask"] = as_kind(random_blocked(gen, shapes[case.attn_mask], allowed), case.mask_kind, dtype)
    return x, masks


# ---------------------------------------------------------------- weights

def _linear(gen, name, n_out, n_in, bias, dtype) -> dict:
    # 1/sqrt(fan_in) keeps scores O(1): attention neither uniform nor one-hot, so mistakes show.
    state = {f"{name}.weight": randn(gen, (n_out, n_in), dtype, 1 / math.sqrt(n_in))}
    if bias:
        state[f"{name}.bias"] = randn(gen, (n_out,), dtype, 0.5)
    return state


def _norm(gen, name, d, dtype) -> dict:
    return {f"{name}.weight": 1 + randn(gen, (d,), dtype, 0.3), f"{name}.bias": randn(gen, (d,), dtype, 0.3)}


def mhsa_state(case, prefix: str = "") -> dict:
    """Random weights for MultiHeadSelfAttention, biases included, so every mix-up shows."""
    gen, dtype, d = generator(case, "weights"), DTYPES[case.dtype], case.d_model
    bias = getattr(case, "bias", True)
    return _linear(gen, f"{prefix}qkv", 3 * d, d, bias, dtype) | _linear(gen, f"{prefix}out", d, d, bias, dtype)


def block_state(case) -> dict:
    gen, dtype, d = generator(case, "block weights"), DTYPES[case.dtype], case.d_model
    return (mhsa_state(case, "attn.") | _linear(gen, "ff1", case.d_ff, d, True, dtype)
            | _linear(gen, "ff2", d, case.d_ff, True, dtype) | _norm(gen, "norm1", d, dtype)
            | _norm(gen, "norm2", d, dtype))


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


# ---------------------------------------------------------------- torch's own modules as oracles

MHA_NAMES = {"in_proj_weight": "qkv.weight", "in_proj_bias": "qkv.bias",
             "out_proj.weight": "out.weight", "out_proj.bias": "out.bias"}
BLOCK_NAMES = {f"self_attn.{k}": f"attn.{v}" for k, v in MHA_NAMES.items()} | {
    f"{theirs}.{p}": f"{ours}.{p}" for theirs, ours in
    (("linear1", "ff1"), ("linear2", "ff2"), ("norm1", "norm1"), ("norm2", "norm2")) for p in ("weight", "bias")}


@dataclass
class Expected:
    output: torch.Tensor
    weights: torch.Tensor | None = None
    x_grad: torch.Tensor | None = None
    param_grads: dict | None = None


def _load(module, names, state, dtype):
    module.to(dtype).load_state_dict({theirs: state[ours] for theirs, ours in names.items() if ours in state})
    return module.eval()


def _torch_masks(case, masks):
    """nn.MultiheadAttention wants a 4-D mask as (B*h, L, L)."""
    attn_mask = masks.get("attn_mask")
    if attn_mask is not None and attn_mask.dim() == 4:
        attn_mask = attn_mask.expand(case.B, case.h, case.L, case.L).reshape(-1, case.L, case.L)
    return attn_mask, masks.get("key_padding_mask")


def _run(module, names, forward, x, grad_output) -> Expected:
    # x requires grad: this also keeps torch off its fused inference path.
    x = x.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        out, weights = forward(x)
        if grad_output is not None:
            out.backward(grad_output)
    grads = {names[n]: p.grad for n, p in module.named_parameters()} if grad_output is not None else None
    return Expected(out.detach(), None if weights is None else weights.detach(),
                    x.grad if grad_output is not None else None, grads)


def torch_mha(case: MhsaCase, state, x, masks, grad_output=None) -> Expected:
    module = _load(nn.MultiheadAttention(case.d_model, case.h, bias=case.bias, batch_first=True),
                   MHA_NAMES, state, DTYPES[case.dtype])
    attn_mask, kpm = _torch_masks(case, masks)
    return _run(module, MHA_NAMES, lambda x: module(x, x, x, key_padding_mask=kpm, attn_mask=attn_mask,
                                                    need_weights=True, average_attn_weights=False),
                x, grad_output)


def torch_block(case: BlockCase, state, x, masks, grad_output=None) -> Expected:
    layer = nn.TransformerEncoderLayer(case.d_model, case.h, case.d_ff, dropout=0.0, activation=case.activation,
                                       layer_norm_eps=case.eps, batch_first=True, norm_first=case.norm_first)
    module = _load(layer, BLOCK_NAMES, state, DTYPES[case.dtype])
    attn_mask, kpm = _torch_masks(case, masks)
    return _run(module, BLOCK_NAMES, lambda x: (module(x, src_mask=attn_mask, src_key_padding_mask=kpm), None),
                x, grad_output)


# ---------------------------------------------------------------- checks with student-facing messages

def unpack(output, n: int, call: Call) -> tuple:
    """A function that returns n values must return a tuple (or list) of n."""
    expect(isinstance(output, (tuple, list)) and len(output) == n,
           f"{call.signature()} must return {n} values, got {_describe(output)}.")
    return tuple(output)


def _describe(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"a single tensor of shape {tuple(value.shape)}"
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)}"
    return type(value).__name__


def expect_close(got, expected, what: str, call: Call, **tolerance) -> None:
    expect_tensor(got, expected, what=f"{what} of {call.signature()}", **tolerance)


def expect_shape(got, shape: tuple, what: str, call: Call) -> None:
    expect(isinstance(got, torch.Tensor), f"{what} of {call.signature()}: expected a tensor, got {_describe(got)}.")
    expect(tuple(got.shape) == tuple(shape),
           f"{what} of {call.signature()}: expected shape {tuple(shape)}, got {tuple(got.shape)}.")


def expect_zero_where(got: torch.Tensor, blocked: torch.Tensor, what: str, call: Call, hint: str) -> None:
    """Exact zeros where `blocked`: a blocked key gets no attention at all, not just a little."""
    leaks = blocked & (got.detach() != 0)
    if leaks.any():
        first = tuple(int(i) for i in leaks.nonzero()[0])
        raise Mismatch(f"{what} of {call.signature()}: {int(leaks.sum())} of {int(blocked.sum())} blocked "
                       f"positions are not exactly 0, first at index {first}.", hint=hint)


def expect_untouched(outcome, call: Call) -> None:
    expect(not outcome.mutated,
           f"{call.signature()} modified its input(s) {', '.join(_names(call, outcome.mutated))} in place.",
           hint="build new tensors (x = x + y, masked_fill) instead of writing into the arguments "
                "(x += y, masked_fill_, [...] = ).")


def _names(call: Call, keys) -> list:
    """The executor names positional arguments arg0, arg1, ...; say which argument they are."""
    positional = {"scaled_dot_product_attention": ("q", "k", "v")}.get(call.target, ("x",) if call.init else ())
    return [positional[int(k[3:])] if k.startswith("arg") and int(k[3:]) < len(positional) else k for k in keys]


def expect_grads(outcome, expected: Expected, call: Call) -> None:
    """The gradient of x and of every parameter, against the oracle's."""
    grads = [("gradient of x", outcome.input_grads.get("arg0"), expected.x_grad)]
    grads += [(f"gradient of parameter {name}", outcome.param_grads.get(name), g)
              for name, g in sorted(expected.param_grads.items())]
    for what, got, want in grads:
        if got is None:
            raise Mismatch(f"{what} of {call.signature()} is missing: the output does not depend on it "
                           "through autograd.", hint="look for .detach(), .data, torch.no_grad() or a "
                                                     "tensor rebuilt with torch.tensor(...).")
        expect_close(got, want, what, call)


def expect_raises(impl, call: Call, exc_type, why: str) -> None:
    try:
        impl.run(call)
    except exc_type:
        return
    except (errors.SubmissionImportError, errors.SubmissionTimeout, errors.SubmissionCrashed,
            errors.ForbiddenApiError):
        raise  # not an answer to the question asked: reported as such
    except Exception as err:  # noqa: BLE001 - any other exception is the finding
        raise Mismatch(f"{call.signature()} should raise {exc_type.__name__} ({why}); it raised "
                       f"{type(err).__name__}.") from None
    raise Mismatch(f"{call.signature()} should raise {exc_type.__name__} ({why}); it returned normally.")


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
    future[:, t + 1:] = randn(generator(case, "future"), future[:, t + 1:].shape, x.dtype)
    call, changed = make_call(case, x, masks), make_call(case, future, masks)
    expect_close(impl.run(changed).output[:, :t + 1], impl.run(call).output[:, :t + 1],
                 f"output at positions <= {t} after changing later tokens", changed,
                 hint="no query may see a later key: add attn_mask to the scores before the softmax.")


def check_key_padding_invariance(impl, case, make_call) -> None:
    """Padded tokens are invisible as keys: changing them leaves every real token's output alone.
    Used without a causal mask, so that padding applied to the wrong axis cannot hide behind it."""
    x, masks = sequence_inputs(case)
    padded = blocked_of(masks["key_padding_mask"])  # (B, L)
    changed_x = torch.where(padded[..., None], randn(generator(case, "pad"), x.shape, x.dtype), x)
    call, changed = make_call(case, x, masks), make_call(case, changed_x, masks)
    real = ~padded
    expect_close(impl.run(changed).output[real], impl.run(call).output[real],
                 "output at real (unpadded) tokens after changing padded ones", changed,
                 hint="key_padding_mask (B, L) blocks keys (columns of the scores), not queries (rows).")
