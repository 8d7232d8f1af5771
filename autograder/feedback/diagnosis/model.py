"""A compact implementation of the contract with switches ("knobs") for known mistakes.

Knobs() is a correct solution; Knobs(scale="none") is one that forgets 1/sqrt(d_k), and so on.
This is written independently of reference/mhsa.py and of the corpus, so that measuring the
diagnosis on the corpus's mutants is an honest test. It only ever runs in the grader's process,
on calls the grader built (never on student objects).
"""
import math

import torch
import torch.nn.functional as F

from autograder.feedback.diagnosis.knobs import Knobs
from autograder.testing.calls import Call


def simulate(call: Call, knobs: Knobs) -> dict:
    """Carries out `call` the way a solution with `knobs` would: {"output", "input_grads",
    "param_grads"}, or {"raised": type name} when such a solution raises."""
    model = _Model(knobs)
    try:
        return model.run(call)
    except Exception as err:  # noqa: BLE001 - a mistake that raises is a prediction too
        return {"raised": type(err).__name__}


class _Model:
    def __init__(self, knobs: Knobs):
        self.k = knobs

    # ---------------------------------------------------------------- functions of the contract

    def to_additive_mask(self, mask, dtype):
        if mask is None:
            return None
        if mask.dtype != torch.bool:
            return mask.to(dtype) if self.k.cast_float_mask else mask
        if self.k.bool_mask == "plus_one":
            return mask.to(dtype)
        if self.k.bool_mask == "plus_one_float32":
            return mask.float()
        blocked = {"blocked": mask, "inverted": ~mask, "ignored": torch.zeros_like(mask)}[self.k.bool_mask]
        return torch.zeros(mask.shape, dtype=dtype).masked_fill(blocked, self.k.blocked_value)

    def scaled_dot_product_attention(self, q, k, v, attn_mask=None, dropout_p=0.0, training=False):
        first, second = {"qk": (q, k), "kq": (k, q), "qq": (q, q), "kk": (k, k)}[self.k.scores]
        keys = second.transpose(*self.k.transpose_dims)
        scale = {"sqrt_dk": math.sqrt(q.shape[-1]), "none": 1.0, "dk": float(q.shape[-1]),
                 "sqrt_dv": math.sqrt(v.shape[-1]), "times_sqrt_dk": 1 / math.sqrt(q.shape[-1])}[self.k.scale]
        scores = first @ keys / scale
        if attn_mask is not None and attn_mask.dtype != torch.bool and self.k.float_mask == "ignored":
            attn_mask = None
        subtracted = self.k.mask_mode == "subtract" or (
            self.k.mask_mode == "subtract_float" and attn_mask is not None and attn_mask.dtype != torch.bool)
        mask = self.to_additive_mask(attn_mask, scores.dtype)
        if mask is not None and subtracted:
            scores = scores - mask
        elif mask is not None and self.k.mask_mode != "zero_after_softmax":
            scores = scores + mask
        weights = torch.softmax(scores, dim=self.k.softmax_dim)
        if mask is not None and self.k.mask_mode == "zero_after_softmax":
            weights = weights * (mask == 0)
        return weights @ v, weights

    def split_heads(self, x, num_heads):
        B, L, D = x.shape
        if self.k.split == "no_transpose":
            return x.reshape(B, num_heads, L, D // num_heads)
        if self.k.split == "interleaved":  # head i holds features i, i + h, i + 2h, ...
            return x.reshape(B, L, D // num_heads, num_heads).permute(0, 3, 1, 2)
        if self.k.split == "no_permute":
            return x.reshape(B, L, num_heads, D // num_heads)
        if self.k.split == "features_positions":
            return x.reshape(B, L, num_heads, D // num_heads).permute(0, 2, 3, 1)
        if self.k.split == "heads_first":
            return x.reshape(B, L, num_heads, D // num_heads).permute(2, 0, 1, 3)
        if self.k.split == "batch_positions":
            return x.reshape(L, B, num_heads, D // num_heads).permute(0, 2, 1, 3)
        return x.reshape(B, L, num_heads, D // num_heads).permute(0, 2, 1, 3)

    def merge_heads(self, x):
        B, h, L, d_k = x.shape
        if self.k.merge == "no_transpose":
            return x.reshape(B, L, h * d_k)
        if self.k.merge == "interleaved":
            return x.permute(0, 2, 3, 1).reshape(B, L, h * d_k)
        if self.k.merge == "features_positions":
            return x.permute(0, 3, 1, 2).reshape(B, L, h * d_k)
        return x.permute(0, 2, 1, 3).reshape(B, L, h * d_k)

    def causal_mask(self, seq_len, device=None, dtype=torch.float32):
        i = torch.arange(seq_len)
        blocked = {"future": i[None, :] > i[:, None], "future_and_diagonal": i[None, :] >= i[:, None],
                   "past": i[None, :] < i[:, None], "after_next": i[None, :] > i[:, None] + 1,
                   "none": torch.zeros(seq_len, seq_len, dtype=torch.bool)}[self.k.causal]
        if self.k.bool_helper:
            return self.to_additive_mask(blocked, dtype)
        return torch.zeros(seq_len, seq_len, dtype=dtype, device=device).masked_fill(blocked, float("-inf"))

    def padding_mask(self, lengths, max_len=None):
        lengths = torch.as_tensor(lengths)
        width = int(lengths.max()) if max_len is None or not self.k.max_len else max_len
        pos = torch.arange(width)[None, :]
        n = lengths[:, None]
        mask = {">=": pos >= n, ">": pos > n, "<": pos < n}[self.k.padding]
        return mask.float() if self.k.padding_float else mask

    def merge_masks(self, attn_mask, key_padding_mask, dtype=torch.float32):
        if self.k.bool_helper:  # the union of the blocked positions, made additive once
            def blocked(m):
                return m if m.dtype == torch.bool else torch.isneginf(m)
            union = [blocked(attn_mask)] if attn_mask is not None else []
            union += [blocked(key_padding_mask)[:, None, None, :]] if key_padding_mask is not None else []
            return self.to_additive_mask(union[0] | union[-1], dtype) if union else None
        merged = self.to_additive_mask(attn_mask, dtype)
        if key_padding_mask is None or not self.k.merge_keeps_padding:
            return merged
        keys = self.to_additive_mask(key_padding_mask, dtype)
        keys = {"keys": lambda: keys[:, None, None, :], "queries": lambda: keys[:, None, :, None],
                "keys_3d": lambda: keys[:, None, :]}[self.k.padding_axis]()
        if merged is None or not self.k.merge_keeps_attn_mask:
            return keys
        return merged + keys

    # ---------------------------------------------------------------- modules, as functions of a state

    def mhsa(self, p, prefix, init, x, attn_mask=None, key_padding_mask=None, need_weights=False):
        d, h = init["d_model"], init["num_heads"]
        h_used = self.k.heads_used or h
        qkv = F.linear(x, p[f"{prefix}qkv.weight"], p.get(f"{prefix}qkv.bias"))
        if self.k.qkv_order == "per_head":
            B, L, _ = x.shape
            q, k, v = qkv.reshape(B, L, h, 3 * (d // h)).transpose(1, 2).chunk(3, dim=-1)
        else:
            q, k, v = qkv.chunk(3, dim=-1)
            if self.k.qkv_order == "kqv":
                q, k = k, q
            v = {"v": v, "q": q, "k": k}[self.k.value_from]
            if self.k.qk_from:
                q = k = {"q": q, "k": k}[self.k.qk_from]
            q, k, v = (self.split_heads(t, h_used) for t in (q, k, v))
        mask = self.merge_masks(attn_mask if self.k.uses_attn_mask else None,
                                key_padding_mask if self.k.uses_key_padding else None, dtype=x.dtype)
        y, weights = self.scaled_dot_product_attention(q, k, v, mask)
        y = self.merge_heads(y)
        if self.k.output_projection != "none":
            weight = p[f"{prefix}out.weight"]
            if self.k.output_projection == "per_head":
                head = torch.arange(d) // (d // h_used)
                weight = weight * (head[:, None] == head[None, :])
            y = F.linear(y, weight, p.get(f"{prefix}out.bias"))
        if not need_weights:
            return y
        return y, weights.mean(dim=1) if self.k.average_weights else weights

    def block(self, p, init, x, attn_mask=None, key_padding_mask=None):
        eps = init.get("layer_norm_eps", 1e-5)
        activation = init.get("activation", "relu")
        if activation not in ("relu", "gelu"):
            raise ValueError(activation)
        activation = self.k.activation_used or activation
        approximate = "tanh" if self.k.gelu == "tanh" else "none"
        act = F.relu if activation == "relu" else (lambda t: F.gelu(t, approximate=approximate))
        if activation == "gelu" and self.k.gelu == "sigmoid":
            act = lambda t: t * torch.sigmoid(1.702 * t)  # noqa: E731
        norm_first = bool(init.get("norm_first", False)) != self.k.swap_norm_first
        if self.k.layout:
            norm_first = self.k.layout == "pre"
        d = init["d_model"]

        def norm(name, t):
            if ("pre" if norm_first else "post") in self.k.shared_norm:
                name = self.k.shared_norm_used
            if ("pre" if norm_first else "post") in self.k.norms_swapped:
                name = {"norm1": "norm2", "norm2": "norm1"}[name]
            weight, bias = (p[f"{name}.weight"], p[f"{name}.bias"]) if self.k.norm_affine else (None, None)
            return F.layer_norm(t, (d,), weight, bias, 1e-5 if name in self.k.default_eps_in else eps)

        def attend(t):
            if self.k.sublayer_dropped == "attn":
                return torch.zeros_like(t)
            if not self.k.block_passes_masks:
                return self.mhsa(p, "attn.", init, t)
            return self.mhsa(p, "attn.", init, t, attn_mask, key_padding_mask)

        def feed_forward(t):
            if self.k.sublayer_dropped == "ff":
                return torch.zeros_like(t)
            return F.linear(act(F.linear(t, p["ff1.weight"], p["ff1.bias"])), p["ff2.weight"], p["ff2.bias"])

        def residual(kind, t, normalized):
            if ("pre" if norm_first else "post") not in self.k.residual_in:
                return t
            return {"input": t, "normalized": normalized, "none": torch.zeros_like(t)}[kind]

        inputs = x
        ff_on_input = ("pre" if norm_first else "post") in self.k.ff_on_input
        inside = self.k.norm_on_sublayer_of if ("pre" if norm_first else "post") in self.k.norm_on_sublayer else ""
        if "attn" in inside:
            x = x + norm("norm1", attend(x))
        elif norm_first:
            n1 = norm("norm1", x)
            x = residual(self.k.attn_residual, x, n1) + attend(n1)
        else:
            x = norm("norm1", residual(self.k.attn_residual, x, x) + attend(x))
        ff_in = inputs if ff_on_input else x
        if "ff" in inside:
            return x + norm("norm2", feed_forward(ff_in))
        if norm_first:
            n2 = norm("norm2", ff_in)
            return residual(self.k.ff_residual, x, n2) + feed_forward(n2)
        return norm("norm2", residual(self.k.ff_residual, x, x) + feed_forward(ff_in))

    # ---------------------------------------------------------------- carrying out a Call

    def run(self, call: Call) -> dict:
        args, kwargs = list(call.args), dict(call.kwargs)
        backward = call.grad_outputs is not None
        named = {f"arg{i}": a for i, a in enumerate(args)} | kwargs
        leaves = {}
        for name, a in named.items():
            if isinstance(a, torch.Tensor) and a.is_floating_point():
                leaves[name] = a.detach().clone().requires_grad_(backward)
        args = [leaves.get(f"arg{i}", a) for i, a in enumerate(args)]
        kwargs = {n: leaves.get(n, a) for n, a in kwargs.items()}
        params = {}
        if call.init is not None:
            params = self._parameters(call)
            fn = {"MultiHeadSelfAttention": lambda *a, **kw: self.mhsa(params, "", call.init, *a, **kw),
                  "TransformerBlock": lambda *a, **kw: self.block(params, call.init, *a, **kw)}[call.target]
        else:
            fn = getattr(self, call.target)
        with torch.enable_grad():
            out = fn(*args, **kwargs)
            if backward:
                outputs = [t for t in (out if isinstance(out, tuple) else (out,)) if t.requires_grad]
                grads = call.grad_outputs if isinstance(call.grad_outputs, (tuple, list)) else (call.grad_outputs,)
                torch.autograd.backward(outputs, list(grads)[:len(outputs)])
        result = {"output": _detach(out), "input_grads": {}, "param_grads": {}}
        if backward:
            result["input_grads"] = {n: t.grad for n, t in leaves.items()}
            result["param_grads"] = {n: t.grad for n, t in params.items()}
        return result

    def _parameters(self, call: Call) -> dict:
        init = call.init
        if init["num_heads"] < 1 or init["d_model"] % init["num_heads"]:
            raise ValueError("num_heads")
        return {name: t.detach().clone().to(call.dtype or t.dtype).requires_grad_(True)
                for name, t in (call.state or {}).items()}


def _detach(out):
    if isinstance(out, torch.Tensor):
        return out.detach()
    if isinstance(out, (tuple, list)):
        return tuple(_detach(o) for o in out)
    return out
