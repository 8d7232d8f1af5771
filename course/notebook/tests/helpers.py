# Helpers of the test cells (read-only). The tests compare your results with PyTorch's own modules
# or with the formulas written out in the tests, never with a stored solution.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def _expect_close(actual, expected, what, atol=1e-5, rtol=1e-4):
    """Fails with the shape, dtype or largest difference when `actual` is not `expected`."""
    assert isinstance(actual, torch.Tensor), f"{what}: expected a tensor, got {type(actual).__name__}"
    assert actual.shape == expected.shape, \
        f"{what}: shape {tuple(actual.shape)}, expected {tuple(expected.shape)}"
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype}, expected {expected.dtype}"
    actual, expected = actual.detach(), expected.detach()
    if not torch.allclose(actual, expected, atol=atol, rtol=rtol, equal_nan=True):
        error = (actual.double() - expected.double()).abs().nan_to_num(float("inf")).max().item()
        raise AssertionError(f"{what}: values differ from the expected ones (largest difference {error:.3g})")


def _sdpa_formula(q, k, v, mask=None):
    """The attention weights and output written out: softmax(q k^T / sqrt(d_k) + mask) v."""
    scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(k.shape[-1]))
    if mask is not None:
        scores = scores + mask
    weights = scores.softmax(dim=-1)
    return torch.matmul(weights, v), weights


def _torch_attention(d_model, num_heads, bias=True):
    """nn.MultiheadAttention and the state dict that loads its weights into your module."""
    torch_mha = nn.MultiheadAttention(d_model, num_heads, bias=bias, batch_first=True).eval()
    state = {"qkv.weight": torch_mha.in_proj_weight, "out.weight": torch_mha.out_proj.weight}
    if bias:
        state |= {"qkv.bias": torch_mha.in_proj_bias, "out.bias": torch_mha.out_proj.bias}
    return torch_mha, {name: value.detach().clone() for name, value in state.items()}


def _torch_block(d_model, num_heads, d_ff, **options):
    """nn.TransformerEncoderLayer and the state dict that loads its weights into your block."""
    layer = nn.TransformerEncoderLayer(d_model, num_heads, d_ff, dropout=0.0, batch_first=True,
                                       **options).eval()
    names = {"self_attn.in_proj_weight": "attn.qkv.weight", "self_attn.in_proj_bias": "attn.qkv.bias",
             "self_attn.out_proj.weight": "attn.out.weight", "self_attn.out_proj.bias": "attn.out.bias",
             "linear1.weight": "ff1.weight", "linear1.bias": "ff1.bias",
             "linear2.weight": "ff2.weight", "linear2.bias": "ff2.bias",
             "norm1.weight": "norm1.weight", "norm1.bias": "norm1.bias",
             "norm2.weight": "norm2.weight", "norm2.bias": "norm2.bias"}
    return layer, {names[name]: value.detach().clone() for name, value in layer.state_dict().items()}


def _load(module, state):
    """Loads `state` into your module; the message names the parameters the tests expect."""
    try:
        module.load_state_dict(state, strict=True)
    except RuntimeError as err:
        raise AssertionError(f"your module's parameters must be named {sorted(state)}: {err}") from None
    return module.eval()


torch.manual_seed(0)
