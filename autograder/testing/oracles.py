"""Expected values, computed by PyTorch's own implementations with the assignment's parameter names.

Every expected value of the tests (public and hidden suites, the notebook's test cells) and of the
diagnosis comes from here: F.scaled_dot_product_attention, nn.MultiheadAttention and
nn.TransformerEncoderLayer, loaded with the weights a submission gets. These are the APIs students
may not use, so nothing here is a solution to copy; functions that have no library counterpart
(split_heads, merge_heads) are checked through their properties instead.

This module imports nothing but torch: the notebook's read-only helper cell is this file's text.
"""
import functools
import hashlib
import itertools
import math
import warnings
from collections import OrderedDict
from dataclasses import dataclass, fields

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

F64 = torch.float64


# ------------------------------------------------------------------------------------------------
# Random inputs and weights
# ------------------------------------------------------------------------------------------------

def randn(shape, generator=None, dtype=F64, scale=1.0) -> torch.Tensor:
    """Drawn in float64 and cast, so a float32 input holds the values of its float64 twin.
    generator None draws from torch's global generator (the tests seed it per test)."""
    return (torch.randn(tuple(shape), generator=generator, dtype=F64) * scale).to(dtype)


def draws(generator=None, dtype=F64):
    """draw(shape, scale) for the weight builders below: every tensor from one generator."""
    return lambda shape, scale: randn(shape, generator, dtype, scale)


def seeded_draws(first_seed: int, dtype=F64):
    """draw(shape, scale) giving each tensor its own generator, seeded first_seed, first_seed + 1, ...:
    a tensor keeps its values whatever else is drawn."""
    seeds = itertools.count(first_seed)
    return lambda shape, scale: randn(shape, torch.Generator().manual_seed(next(seeds)), dtype, scale)


def linear_state(draw, name: str, n_out: int, n_in: int, bias=True) -> dict:
    # 1/sqrt(fan_in) keeps scores O(1): attention neither uniform nor one-hot, so mistakes show.
    state = {f"{name}.weight": draw((n_out, n_in), 1 / math.sqrt(n_in))}
    if bias:
        state[f"{name}.bias"] = draw((n_out,), 0.5)
    return state


def mhsa_state(d_model: int, draw, prefix="", bias=True) -> dict:
    """Random weights for MultiHeadSelfAttention: the keys of its state_dict, biases included by
    default, so that every mix-up of q, k, v or heads shows."""
    return (linear_state(draw, f"{prefix}qkv", 3 * d_model, d_model, bias)
            | linear_state(draw, f"{prefix}out", d_model, d_model, bias))


def block_state(d_model: int, d_ff: int, draw) -> dict:
    """Random weights for TransformerBlock, LayerNorm affine parameters included (not 1 and 0), so
    that a swapped or shared norm shows."""
    state = (mhsa_state(d_model, draw, "attn.") | linear_state(draw, "ff1", d_ff, d_model)
             | linear_state(draw, "ff2", d_model, d_ff))
    norms = ("norm1", "norm2")
    state |= {f"{norm}.weight": 1 + draw((d_model,), 0.3) for norm in norms}
    return state | {f"{norm}.bias": draw((d_model,), 0.3) for norm in norms}


# ------------------------------------------------------------------------------------------------
# Masks (True or -inf = blocked)
# ------------------------------------------------------------------------------------------------

def additive(mask: torch.Tensor, dtype) -> torch.Tensor:
    """The mask as torch's attention adds it to the scores: bool True -> -inf, False -> 0.0; a float
    mask keeps its values."""
    return mask.to(dtype) if mask.dtype != torch.bool else \
        torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(mask, float("-inf"))


def blocked_of(mask: torch.Tensor) -> torch.Tensor:
    return mask if mask.dtype == torch.bool else torch.isinf(mask)


def random_blocked(shape, generator=None, p=0.4, allowed_keys=None) -> torch.Tensor:
    """Random bool mask, True (blocked) with probability p, that leaves every row a key: key 0, or a
    random one among the first `allowed_keys`. A fully blocked row is unspecified by the contract,
    so the tests never make one."""
    blocked = torch.rand(tuple(shape), generator=generator) < p
    if allowed_keys is None:
        blocked[..., 0] = False
        return blocked
    keep = torch.randint(allowed_keys, tuple(shape[:-1]), generator=generator)
    return blocked.scatter(-1, keep[..., None], False)


def causal_blocked(length: int) -> torch.Tensor:
    """Query i may not see keys j > i: nn.Transformer's own causal mask, as booleans."""
    return torch.isinf(nn.Transformer.generate_square_subsequent_mask(length, dtype=F64))


def padding_blocked(lengths, length: int) -> torch.Tensor:
    """(B, length): True at the positions of sequence b that are >= lengths[b]."""
    return torch.arange(length)[None, :] >= torch.as_tensor(lengths)[:, None]


# ------------------------------------------------------------------------------------------------
# Oracles
# ------------------------------------------------------------------------------------------------

@dataclass
class Expected:
    output: torch.Tensor
    weights: torch.Tensor | None = None      # (B, h, Lq, Lk), per head
    x_grad: torch.Tensor | None = None
    param_grads: dict | None = None          # the assignment's parameter names -> gradient


def sdpa_expected(q, k, v, attn_mask=None, scale=None) -> Expected:
    """F.scaled_dot_product_attention's output and weights (unfused math backend, no dropout). The
    weights are what it returns for the identity matrix as values: the rows of weights @ I."""
    mask = None if attn_mask is None else additive(attn_mask, q.dtype)
    identity = torch.eye(k.shape[-2], dtype=v.dtype, device=v.device).expand(*k.shape[:-1], k.shape[-2])
    with sdpa_kernel(SDPBackend.MATH):
        output = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
        weights = F.scaled_dot_product_attention(q, k, identity, attn_mask=mask, scale=scale)
    return Expected(output, weights)


MHA_NAMES = {"in_proj_weight": "qkv.weight", "in_proj_bias": "qkv.bias",
             "out_proj.weight": "out.weight", "out_proj.bias": "out.bias"}
BLOCK_NAMES = {f"self_attn.{theirs}": f"attn.{ours}" for theirs, ours in MHA_NAMES.items()} | {
    f"{theirs}.{p}": f"{ours}.{p}" for theirs, ours in
    (("linear1", "ff1"), ("linear2", "ff2"), ("norm1", "norm1"), ("norm2", "norm2")) for p in ("weight", "bias")}


def torch_mha(state: dict, num_heads: int) -> nn.MultiheadAttention:
    """nn.MultiheadAttention holding `state` (MultiHeadSelfAttention's names), in eval mode."""
    d_model = state["qkv.weight"].shape[1]
    module = nn.MultiheadAttention(d_model, num_heads, bias="qkv.bias" in state, batch_first=True)
    return _load(module, MHA_NAMES, state)


def torch_block(state: dict, d_model: int, num_heads: int, d_ff: int, dropout=0.0, activation="relu",
                norm_first=False, layer_norm_eps=1e-5) -> nn.TransformerEncoderLayer:
    """nn.TransformerEncoderLayer holding `state`, built from TransformerBlock's constructor arguments;
    in eval mode, so dropout has no effect."""
    layer = nn.TransformerEncoderLayer(d_model, num_heads, d_ff, dropout=dropout, activation=activation,
                                       layer_norm_eps=layer_norm_eps, batch_first=True, norm_first=norm_first)
    return _load(layer, BLOCK_NAMES, state)


def remembered(oracle):
    """`oracle` with its results kept by the exact contents of its arguments. A grader grades many
    submissions in one process, and the derandomized tests draw the same inputs for each: building torch's
    module for every call cost about as much as the submission's own call. Each result is a copy, so a
    test that changes one in place changes no later test's. Arguments off the CPU, or of a kind
    the key does not know, are computed every time."""
    results = OrderedDict()

    @functools.wraps(oracle)
    def oracle_remembered(*args, **kwargs):
        key = _contents((args, kwargs))
        if key is None:
            return oracle(*args, **kwargs)
        if key in results:
            results.move_to_end(key)
        else:
            results[key] = oracle(*args, **kwargs)
            if len(results) > REMEMBERED_RESULTS:
                results.popitem(last=False)
        return _copied(results[key])

    return oracle_remembered


REMEMBERED_RESULTS = 2048  # per oracle: one submission's suites leave about 50 in each, under 0.1 MB


def _contents(value):
    """A key equal for arguments of equal contents (dtype, shape and every byte of a tensor), None when
    `value` holds what it cannot describe."""
    if isinstance(value, torch.Tensor):
        if value.device.type != "cpu" or value.is_complex() or value.layout != torch.strided:
            return None
        try:
            data = value.detach().reshape(-1).contiguous().view(torch.uint8).numpy()
        except RuntimeError:  # a torch without numpy (a student's kernel may have one): no key
            return None
        return "tensor", value.dtype, tuple(value.shape), hashlib.blake2b(data, digest_size=16).digest()
    if isinstance(value, (tuple, list)):
        items = tuple(map(_contents, value))
        return None if None in items else (type(value).__name__, items)
    if isinstance(value, dict):
        items = _contents(list(value.items()))  # each key and value described as above
        return None if items is None else ("dict", items)
    if value is None or isinstance(value, (bool, int, float, str)):
        return type(value).__name__, repr(value)  # 1, 1.0 and True, or 0.0 and -0.0, are equal keys otherwise
    return None


def _copied(expected: Expected) -> Expected:
    def copy(value):
        if isinstance(value, dict):
            return {k: copy(v) for k, v in value.items()}
        return value.clone() if isinstance(value, torch.Tensor) else value

    return Expected(**{f.name: copy(getattr(expected, f.name)) for f in fields(Expected)})


@remembered
def mha_expected(state, x, num_heads, attn_mask=None, key_padding_mask=None, grad_output=None) -> Expected:
    """What nn.MultiheadAttention computes with the same weights and masks (ours: attn_mask (L, L),
    (B, 1, L, L) or (B, h, L, L); key_padding_mask (B, L)), and with grad_output the gradients."""
    module = torch_mha(state, num_heads)
    attn_mask, key_padding_mask = _torch_masks(x, num_heads, attn_mask, key_padding_mask)
    return _run(module, MHA_NAMES, x, grad_output,
                lambda x: module(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                                 need_weights=True, average_attn_weights=False))


@remembered
def block_expected(state, x, init, attn_mask=None, key_padding_mask=None, grad_output=None) -> Expected:
    """What nn.TransformerEncoderLayer computes with the same weights, settings (TransformerBlock's
    constructor arguments) and masks."""
    layer = torch_block(state, **init)
    attn_mask, key_padding_mask = _torch_masks(x, init["num_heads"], attn_mask, key_padding_mask)
    return _run(layer, BLOCK_NAMES, x, grad_output,
                lambda x: (layer(x, src_mask=attn_mask, src_key_padding_mask=key_padding_mask), None))


def _load(module, names, state):
    dtype = next(iter(state.values())).dtype
    module.to(dtype).load_state_dict({theirs: state[ours] for theirs, ours in names.items() if ours in state})
    return module.eval()


def _torch_masks(x, num_heads, attn_mask, key_padding_mask):
    """torch wants a 4-D attn_mask as (B*h, L, L), and float masks in the dtype of the queries."""
    if attn_mask is not None and attn_mask.dim() == 4:
        batch, length = x.shape[0], x.shape[1]
        attn_mask = attn_mask.expand(batch, num_heads, length, length).reshape(-1, length, length)
    return tuple(m if m is None or m.dtype == torch.bool else m.to(x.dtype) for m in (attn_mask, key_padding_mask))


def _run(module, names, x, grad_output, forward) -> Expected:
    # x requires grad even without a backward pass: that keeps torch off its fused inference path.
    x = x.detach().clone().requires_grad_(True)
    with torch.enable_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # mixing a bool and a float mask is deprecated in torch
        output, weights = forward(x)
        if grad_output is not None:
            output.backward(grad_output)
    if grad_output is None:
        return Expected(output.detach(), None if weights is None else weights.detach())
    grads = {names[name]: p.grad for name, p in module.named_parameters()}
    return Expected(output.detach(), None if weights is None else weights.detach(), x.grad, grads)
