"""attention-is-all-you-need-pytorch (jadore801120/attention-is-all-you-need-pytorch,
transformer/Modules.py ScaledDotProductAttention, transformer/SubLayers.py MultiHeadAttention and
PositionwiseFeedForward), adapted to this assignment's contract the way a student who copies it
would: w_qs, w_ks, w_vs become one `qkv`, fc becomes `out`, the residual and layer_norm that the
original keeps inside each sub-layer move to the block, which gains the pre-LN order.

Adapted so that it passes every public test of the suite that existed before the handout's rules were
taught (90/90 from `check`). Handout rules it breaks:
  float16-masking:      a boolean mask is filled with -1e9 (`attn.masked_fill(mask == 0, -1e9)` in the
                        original), which does not fit in float16: masked_fill refuses it (section 1.5);
  feed-forward-dropout: PositionwiseFeedForward is w_2(relu(w_1(x))), then dropout: no dropout between
                        the activation and ff2 (sections 1.6 and 3).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def to_additive_mask(mask, dtype):
    if mask is None:
        return None
    if mask.dtype == torch.bool:
        return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(mask, float('-inf'))
    return mask.to(dtype)


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):
    ''' Scaled Dot-Product Attention '''
    temperature = q.size(-1) ** 0.5
    attn = torch.matmul(q / temperature, k.transpose(-2, -1))

    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            attn = attn.masked_fill(attn_mask, -1e9)
        else:
            attn = attn + attn_mask.to(attn.dtype)

    attn = F.dropout(F.softmax(attn, dim=-1), dropout_p, training)
    output = torch.matmul(attn, v)

    return output, attn


def split_heads(x, num_heads):
    sz_b, len_q, d_model = x.size()
    # Separate different heads: b x lq x n x dv, then transpose for attention dot product: b x n x lq x dv
    return x.view(sz_b, len_q, num_heads, d_model // num_heads).transpose(1, 2)


def merge_heads(x):
    sz_b, n_head, len_q, d_v = x.size()
    # Transpose to move the head dimension back: b x lq x n x dv
    # Combine the last two dimensions to concatenate all the heads together: b x lq x (n*dv)
    return x.transpose(1, 2).contiguous().view(sz_b, len_q, -1)


def causal_mask(seq_len, device=None, dtype=torch.float32):
    ''' For masking out the subsequent info. '''
    subsequent_mask = (1 - torch.triu(torch.ones((1, seq_len, seq_len), device=device), diagonal=1)).bool()
    return to_additive_mask(~subsequent_mask[0], dtype)


def padding_mask(lengths, max_len=None):
    lengths = torch.as_tensor(lengths)
    len_s = int(lengths.max()) if max_len is None else max_len
    return torch.arange(len_s, device=lengths.device).unsqueeze(0) >= lengths.unsqueeze(-1)


def merge_masks(attn_mask, key_padding_mask, dtype=torch.float32):
    mask = to_additive_mask(attn_mask, dtype)
    if key_padding_mask is not None:
        pad = to_additive_mask(key_padding_mask, dtype).unsqueeze(1).unsqueeze(1)  # For head and query axis broadcasting.
        mask = pad if mask is None else mask + pad
    return mask


class MultiHeadSelfAttention(nn.Module):
    ''' Multi-Head Attention module '''

    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if num_heads < 1 or d_model % num_heads != 0:
            raise ValueError('n_head must divide d_model')
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = dropout

    def forward(self, x, attn_mask=None, key_padding_mask=None, need_weights=False):
        # Pass through the pre-attention projection: b x lq x (n*dv)
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = split_heads(q, self.num_heads), split_heads(k, self.num_heads), split_heads(v, self.num_heads)
        mask = merge_masks(attn_mask, key_padding_mask, x.dtype)
        q, attn = scaled_dot_product_attention(q, k, v, mask, self.dropout, self.training)
        q = self.out(merge_heads(q))
        return (q, attn) if need_weights else q


class TransformerBlock(nn.Module):
    ''' Compose with two layers '''

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False,
                 layer_norm_eps=1e-5):
        super().__init__()
        if activation not in ('relu', 'gelu'):
            raise ValueError(activation)
        self.attn = MultiHeadSelfAttention(d_model, num_heads, dropout=dropout)
        self.ff1 = nn.Linear(d_model, d_ff)  # position-wise
        self.ff2 = nn.Linear(d_ff, d_model)  # position-wise
        self.activation = F.relu if activation == 'relu' else F.gelu
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.attn_dropout = nn.Dropout(dropout)
        self.ffn_dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def pos_ffn(self, x):
        x = self.ff2(self.activation(self.ff1(x)))
        return self.ffn_dropout(x)

    def forward(self, enc_input, attn_mask=None, key_padding_mask=None):
        residual = enc_input
        if self.norm_first:
            enc_output = residual + self.attn_dropout(self.attn(self.norm1(enc_input), attn_mask, key_padding_mask))
            return enc_output + self.pos_ffn(self.norm2(enc_output))
        enc_output = self.norm1(residual + self.attn_dropout(self.attn(enc_input, attn_mask, key_padding_mask)))
        return self.norm2(enc_output + self.pos_ffn(enc_output))
