"""Shared helpers of the public tests: calling the submission, checking results, and the oracles.

The oracles are PyTorch's own modules (nn.MultiheadAttention, nn.TransformerEncoderLayer) loaded
with the same weights as your module, and formulas written out in the tests. Nothing here imports a
solution: a test describes a call, the `impl` fixture runs it on your code, and the result is
compared with what torch computes.
"""
import math
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

from autograder import errors
from autograder.calls import Call
from autograder.compare import Mismatch, expect, expect_tensor

NEG_INF = float("-inf")
F64 = torch.float64
# Devices the device-keeping tests use. CPU only: the public suite must behave the same on every
# machine and under every isolation level (a sandboxed worker may not see a GPU). CUDA is checked
# separately, on the course's GPU machines.
DEVICES = ["cpu"]


# --------------------------------------------------------------------------------------------------
# Calling the submission
# --------------------------------------------------------------------------------------------------

def _fresh(value):
    """Your code gets copies: whatever it does to them, the test's own tensors stay intact."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, list):
        return [_fresh(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_fresh(v) for v in value)
    return value


def _argument_names(call: Call, names):
    named = {f"arg{i}": f"argument {i + 1}" for i in range(len(call.args))}
    return [named.get(n, n) for n in names]


def _check_not_mutated(call: Call, outcome) -> None:
    expect(not outcome.mutated,
           f"{call.signature()} modified its input(s) in place: "
           f"{', '.join(_argument_names(call, outcome.mutated))}.",
           hint="no function may change its arguments: use out-of-place operations (x = x + y, "
                "masked_fill, x / s) instead of in-place ones (x += y, masked_fill_, x /= s).")


def invoke(impl, target, *args, grad_outputs=None, **kwargs):
    """Calls the function `target` of the submission; returns (outcome, call)."""
    __tracebackhide__ = True  # failures point at the test and at your code, not at this helper
    __tracebackhide__ = True  # failures point at the test and at your code, not at this helper
    call = Call(target, tuple(_fresh(a) for a in args), {k: _fresh(v) for k, v in kwargs.items()},
                grad_outputs=grad_outputs)
    outcome = impl.run(call)
    _check_not_mutated(call, outcome)
    return outcome, call


def construct(impl, target, **init):
    """Builds the class `target` without calling forward; returns (outcome, what was built)."""
    __tracebackhide__ = True  # failures point at the test and at your code, not at this helper
    call = Call(target, init=init, construct_only=True)
    return impl.run(call), constructed(call)


STATE_HINT = {
    "MultiHeadSelfAttention": "the module must own exactly two nn.Linear layers, `qkv` "
                              "(d_model -> 3*d_model) and `out` (d_model -> d_model), with bias only "
                              "when bias=True, and no other parameters or (persistent) buffers.",
    "TransformerBlock": "the block must own exactly `attn` (your MultiHeadSelfAttention), `ff1`, `ff2` "
                        "(nn.Linear) and `norm1`, `norm2` (nn.LayerNorm), and no other parameters or (persistent) "
                        "buffers.",
}


def run_module(impl, target, init, *args, state=None, dtype=F64, training=False, grad_outputs=None,
               **kwargs):
    """Builds `target(**init)`, loads `state`, runs forward(*args, **kwargs); returns (outcome, call)."""
    __tracebackhide__ = True  # failures point at the test and at your code, not at this helper
    call = Call(target, tuple(_fresh(a) for a in args), {k: _fresh(v) for k, v in kwargs.items()},
                init=init, state=_fresh(state), dtype=dtype, training=training,
                grad_outputs=grad_outputs)
    try:
        outcome = impl.run(call)
    except RuntimeError as err:
        message = str(err)
        if "state_dict" not in message:
            raise
        first = message.strip().splitlines()[0]
        raise Mismatch(f"{call.signature()}: the test's weights do not fit your module: {first}",
                       detail=message, hint=STATE_HINT.get(target, "")) from None
    _check_not_mutated(call, outcome)
    return outcome, call


# --------------------------------------------------------------------------------------------------
# Checking results
# --------------------------------------------------------------------------------------------------

def _same(got, candidate, rtol, atol) -> bool:
    if not isinstance(got, torch.Tensor) or not isinstance(candidate, torch.Tensor):
        return False
    if got.shape != candidate.shape:
        return False
    g, c = got.detach().to(candidate.dtype), candidate.detach().to(got.device)
    if not c.is_floating_point():
        return bool((g == c).all())
    return bool(torch.isclose(g, c, rtol=rtol, atol=atol, equal_nan=True).all())


def check(got, expected, *, what, hint="", suspects=(), rtol=None, atol=None, dtype_hint=""):
    """expect_tensor, plus a specific hint when `got` matches a known mistake.

    suspects: (make, hint) pairs; make() computes what a typical wrong implementation returns. The
    first suspect that matches `got` gives the hint; otherwise `hint` is used. Shape, dtype and device
    problems keep compare's own hints (a dtype problem gets `dtype_hint` when there is one).
    """
    __tracebackhide__ = True  # failures point at the test and at your code, not at this helper
    plain = type(got) is torch.Tensor
    if not (plain and got.shape == expected.shape and got.dtype == expected.dtype
            and got.device == expected.device):
        try:
            expect_tensor(got, expected, what=what, rtol=rtol, atol=atol)
        except Mismatch as err:
            if dtype_hint and plain and got.shape == expected.shape and got.dtype != expected.dtype:
                raise Mismatch(err.summary, err.detail, dtype_hint) from None
            raise
    try:
        expect_tensor(got, expected, what=what, rtol=rtol, atol=atol)
    except Mismatch as err:
        default_rtol, default_atol = (1e-5, 1e-7) if expected.dtype == F64 else (1e-3, 1e-4)
        for make, suspect_hint in suspects:
            try:
                candidate = make()
            except Exception:  # noqa: BLE001 - a suspect that cannot be built is just not the cause
                continue
            if _same(got, candidate, default_rtol, default_atol):
                raise Mismatch(err.summary, err.detail, suspect_hint) from None
        if got.is_floating_point() and torch.isnan(got).any() and not torch.isnan(expected).any():
            hint = NAN_HINT + (f" Otherwise: {hint}" if hint else "")
        raise Mismatch(err.summary, err.detail, hint) from None


NAN_HINT = ("NaN usually comes from -inf - (-inf), 0 * (-inf), or a softmax over a row that is all -inf "
            "(every key blocked). In these tests every query keeps at least one key, so check the mask "
            "convention (True or -inf = blocked) and which dimension the mask blocks.")


def expect_like(got, expected, what):
    """`got` is a plain tensor with expected's shape, dtype and device (values are not compared)."""
    __tracebackhide__ = True  # failures point at the test and at your code, not at this helper
    if not (type(got) is torch.Tensor and got.shape == expected.shape and got.dtype == expected.dtype
            and got.device == expected.device):
        expect_tensor(got, expected, what=what)


def expect_output_tuple(output, n, what, hint):
    __tracebackhide__ = True  # failures point at the test and at your code, not at this helper
    expect(isinstance(output, (tuple, list)) and len(output) == n,
           f"{what}: expected a tuple of {n}, got "
           f"{type(output).__name__ if not isinstance(output, (tuple, list)) else f'{len(output)} items'}.",
           hint=hint)
    return tuple(output)


def constructed(call: Call) -> str:
    """How a constructor call reads in a message: `Name(arg=value, ...)`."""
    return f"{call.target}({', '.join(f'{k}={v!r}' for k, v in (call.init or {}).items())})"


def expect_raises(impl, exc_type, call: Call, hint: str):
    """The call must raise `exc_type`. NotImplementedError and the grader's own errors (timeouts,
    crashes, forbidden APIs) propagate as they are; any other exception is the wrong kind of error."""
    __tracebackhide__ = True  # failures point at the test and at your code, not at this helper
    what = constructed(call) if call.construct_only else call.signature()
    try:
        impl.run(call)
    except exc_type:
        return
    except NotImplementedError:
        raise
    except errors.SubmissionError as err:
        if not isinstance(err, errors.SubmissionRaised):
            raise
        wrong = err
    except Mismatch:
        raise
    except Exception as err:  # noqa: BLE001 - whatever the submission raised, reported as such
        wrong = err
    else:
        raise Mismatch(f"{what} returned normally; it should raise {exc_type.__name__}.", hint=hint)
    kind = type(wrong).__name__
    if isinstance(wrong, AssertionError):
        hint = ("use `raise ValueError(...)`, not `assert`: asserts are removed under `python -O` and "
                "are the wrong type of error for bad arguments.")
    raise Mismatch(f"{what} raised {kind}, but the contract asks for {exc_type.__name__}.",
                   detail=str(wrong).strip(), hint=hint) from None


def blocked_positions_are_zero(weights, blocked, what):
    """weights (..., Lq, Lk) must be exactly 0.0 where `blocked` (broadcastable bool) is True."""
    __tracebackhide__ = True  # failures point at the test and at your code, not at this helper
    blocked = blocked.expand_as(weights)
    leaked = (weights.detach() != 0) & blocked
    if leaked.any():
        where = tuple(int(i) for i in leaked.nonzero()[0])
        raise Mismatch(f"{what}: {int(leaked.sum())} attention weights at blocked positions are not 0 "
                       f"(first at index {where}: {weights[where].item()!r}).",
                       hint="blocked positions must get -inf added before the softmax, so that "
                            "exp(-inf) = 0 exactly; a large negative number (-1e9) or masking after "
                            "the softmax is not the same. For boolean masks True means blocked.")


# --------------------------------------------------------------------------------------------------
# Random data
# --------------------------------------------------------------------------------------------------

def randn(*shape, dtype=F64, scale=1.0):
    return torch.randn(*shape, dtype=dtype) * scale


def random_bool_mask(*shape, p=0.3):
    """True (blocked) with probability p, but never a whole row: every query keeps a key."""
    mask = torch.rand(*shape) < p
    mask[..., 0] = False
    return mask


def random_lengths(batch, max_len):
    """Lengths in 1..max_len, with max_len present (so padding_mask's default width is max_len)."""
    lengths = torch.randint(1, max_len + 1, (batch,))
    lengths[0] = max_len
    return lengths


def mhsa_state(d_model, bias=True, dtype=F64):
    """Random weights for MultiHeadSelfAttention: the keys of its state_dict."""
    scale = 1.0 / math.sqrt(d_model)
    state = {"qkv.weight": randn(3 * d_model, d_model, dtype=dtype, scale=scale),
             "out.weight": randn(d_model, d_model, dtype=dtype, scale=scale)}
    if bias:
        state["qkv.bias"] = randn(3 * d_model, dtype=dtype, scale=0.2)
        state["out.bias"] = randn(d_model, dtype=dtype, scale=0.2)
    return state


def block_state(d_model, d_ff, dtype=F64):
    """Random weights for TransformerBlock, LayerNorm affine parameters included (not 1 and 0)."""
    state = {f"attn.{k}": v for k, v in mhsa_state(d_model, dtype=dtype).items()}
    state |= {
        "ff1.weight": randn(d_ff, d_model, dtype=dtype, scale=1 / math.sqrt(d_model)),
        "ff1.bias": randn(d_ff, dtype=dtype, scale=0.2),
        "ff2.weight": randn(d_model, d_ff, dtype=dtype, scale=1 / math.sqrt(d_ff)),
        "ff2.bias": randn(d_model, dtype=dtype, scale=0.2),
        "norm1.weight": 1 + randn(d_model, dtype=dtype, scale=0.5),
        "norm1.bias": randn(d_model, dtype=dtype, scale=0.5),
        "norm2.weight": 1 + randn(d_model, dtype=dtype, scale=0.5),
        "norm2.bias": randn(d_model, dtype=dtype, scale=0.5),
    }
    return state


# --------------------------------------------------------------------------------------------------
# Oracles: torch's own modules with the same weights
# --------------------------------------------------------------------------------------------------

MHA_NAMES = {"qkv.weight": "in_proj_weight", "qkv.bias": "in_proj_bias",
             "out.weight": "out_proj.weight", "out.bias": "out_proj.bias"}
BLOCK_NAMES = {f"attn.{k}": f"self_attn.{v}" for k, v in MHA_NAMES.items()} | {
    "ff1.weight": "linear1.weight", "ff1.bias": "linear1.bias",
    "ff2.weight": "linear2.weight", "ff2.bias": "linear2.bias",
    "norm1.weight": "norm1.weight", "norm1.bias": "norm1.bias",
    "norm2.weight": "norm2.weight", "norm2.bias": "norm2.bias",
}


def _load(module, state, names):
    params = dict(module.named_parameters())
    with torch.no_grad():
        for ours, theirs in names.items():
            if ours in state:
                params[theirs].copy_(state[ours])
    return module


def torch_mha(state, d_model, num_heads, dropout=0.0, dtype=F64):
    mha = nn.MultiheadAttention(d_model, num_heads, dropout=dropout, bias="qkv.bias" in state,
                                batch_first=True, dtype=dtype)
    return _load(mha, state, MHA_NAMES).eval()


def _like_queries(mask, dtype):
    """torch's modules want float masks in the dtype of the queries."""
    return mask if mask is None or mask.dtype == torch.bool else mask.to(dtype)


def torch_attn_mask(attn_mask, batch, num_heads):
    """Our attn_mask shapes -> nn.MultiheadAttention's: (L, L) stays, (B, 1|h, L, L) -> (B*h, L, L)."""
    if attn_mask is None or attn_mask.dim() == 2:
        return attn_mask
    lq, lk = attn_mask.shape[-2:]
    return attn_mask.expand(batch, num_heads, lq, lk).reshape(batch * num_heads, lq, lk)


def mha_expected(state, x, num_heads, attn_mask=None, key_padding_mask=None, grad_output=None):
    """What nn.MultiheadAttention computes with the same weights, in eval mode.

    Returns (out (B, L, d_model), weights (B, h, L, L)), plus, when grad_output is given, the
    gradients {"x": ..., "qkv.weight": ..., ...}.
    """
    x = x.detach().clone().requires_grad_(grad_output is not None)
    mha = torch_mha(state, x.shape[-1], num_heads, dtype=x.dtype)
    mask = _like_queries(torch_attn_mask(attn_mask, x.shape[0], num_heads), x.dtype)
    key_padding_mask = _like_queries(key_padding_mask, x.dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # mixing a bool and a float mask is deprecated in torch
        out, weights = mha(x, x, x, attn_mask=mask, key_padding_mask=key_padding_mask,
                           need_weights=True, average_attn_weights=False)
    if grad_output is None:
        return out.detach(), weights.detach()
    out.backward(grad_output)
    params = dict(mha.named_parameters())
    grads = {"x": x.grad} | {ours: params[theirs].grad for ours, theirs in MHA_NAMES.items() if ours in state}
    return out.detach(), weights.detach(), grads


def torch_block(state, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False,
                layer_norm_eps=1e-5, dtype=F64):
    layer = nn.TransformerEncoderLayer(d_model, num_heads, dim_feedforward=d_ff, dropout=dropout,
                                       activation=activation, layer_norm_eps=layer_norm_eps,
                                       batch_first=True, norm_first=norm_first, dtype=dtype)
    return _load(layer, state, BLOCK_NAMES).eval()


def block_expected(state, x, init, attn_mask=None, key_padding_mask=None, grad_output=None):
    """What nn.TransformerEncoderLayer computes with the same weights and settings, in eval mode."""
    x = x.detach().clone().requires_grad_(grad_output is not None)
    layer = torch_block(state, dtype=x.dtype, **init)
    mask = _like_queries(torch_attn_mask(attn_mask, x.shape[0], init["num_heads"]), x.dtype)
    key_padding_mask = _like_queries(key_padding_mask, x.dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = layer(x, src_mask=mask, src_key_padding_mask=key_padding_mask)
    if grad_output is None:
        return out.detach()
    out.backward(grad_output)
    params = dict(layer.named_parameters())
    grads = {"x": x.grad} | {ours: params[theirs].grad for ours, theirs in BLOCK_NAMES.items()}
    return out.detach(), grads


# --------------------------------------------------------------------------------------------------
# Typical mistakes, rebuilt from torch's modules (for hints)
# --------------------------------------------------------------------------------------------------

def scale_queries(state, factor, prefix=""):
    """The same weights with q multiplied by `factor`: a different scale inside the softmax."""
    state = dict(state)
    d_model = state[f"{prefix}qkv.weight"].shape[1]
    for name in (f"{prefix}qkv.weight", f"{prefix}qkv.bias"):
        if name in state:
            tensor = state[name].clone()
            tensor[:d_model] *= factor
            state[name] = tensor
    return state


def interleaved_qkv(state, num_heads, prefix=""):
    """The weights as seen by code that reads qkv's output as (h, 3, d_k) instead of (3, h, d_k)."""
    state = dict(state)
    d_model = state[f"{prefix}qkv.weight"].shape[1]
    d_k = d_model // num_heads
    rows = torch.arange(3 * d_model).view(num_heads, 3, d_k).transpose(0, 1).reshape(-1)
    for name in (f"{prefix}qkv.weight", f"{prefix}qkv.bias"):
        if name in state:
            state[name] = state[name][rows]
    return state


def swapped_norms(state):
    state = dict(state)
    for p in ("weight", "bias"):
        state[f"norm1.{p}"], state[f"norm2.{p}"] = state[f"norm2.{p}"], state[f"norm1.{p}"]
    return state


def tanh_gelu(x):
    return F.gelu(x, approximate="tanh")


# --------------------------------------------------------------------------------------------------
# Formulas
# --------------------------------------------------------------------------------------------------

def additive(mask, dtype):
    """The additive form of a mask: bool True -> -inf, False -> 0.0; a float mask as it is."""
    return torch.where(mask, NEG_INF, 0.0).to(dtype) if mask.dtype is torch.bool else mask.to(dtype)


def attention(q, k, v, mask=None, *, scale=None, dim=-1):
    """softmax(q k^T * scale + mask) v with scale 1/sqrt(d_k): returns (out, weights)."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale
    scores = scores if mask is None else scores + additive(mask, scores.dtype)
    weights = scores.softmax(dim=dim)
    return torch.matmul(weights, v), weights
