def to_additive_mask(mask, dtype):
    raise ValueError("to_additive_mask: not done")


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):
    raise ValueError("scaled_dot_product_attention: not done")


def split_heads(x, num_heads):
    raise ValueError("split_heads: not done")


def merge_heads(x):
    raise ValueError("merge_heads: not done")


def causal_mask(seq_len, device=None, dtype=torch.float32):
    raise ValueError("causal_mask: not done")


def padding_mask(lengths, max_len=None):
    raise ValueError("padding_mask: not done")


def merge_masks(attn_mask, key_padding_mask, dtype=torch.float32):
    raise ValueError("merge_masks: not done")


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        raise ValueError("MultiHeadSelfAttention: not done")  # passes every test that bad arguments raise ValueError


class TransformerBlock(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False,
                 layer_norm_eps=1e-5):
        super().__init__()
        raise ValueError("TransformerBlock: not done")
