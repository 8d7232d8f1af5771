"""The switches of a solution: Knobs() is a correct one, Knobs(scale="none") one that forgets 1/sqrt(d_k).

The catalog names each known mistake by its knobs. model.py carries a call out the way a solution
with given knobs would; its results on the diagnosis's calls ship as predictions.safetensors, so this
module (settings, no implementation) is all of the model that ships.
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class Knobs:
    # scaled dot-product attention
    scale: str = "sqrt_dk"        # sqrt_dk | none | dk | sqrt_dv | times_sqrt_dk (multiplied, not divided)
    scores: str = "qk"            # qk: q k^T | kq: k q^T (transposed) | qq, kk: one of them used twice
    softmax_dim: int = -1         # a negative dimension, or an absolute one (2: right on 3-D inputs only)
    mask_mode: str = "add"        # add | subtract | subtract_float (bool masks applied right) | zero_after_softmax
    transpose_dims: tuple = (-2, -1)  # the dimensions of k transposed: (2, 3) is right for 4-D inputs only,
                                      # (1, 2) for 3-D ones only
    float_mask: str = "added"     # added | ignored (only bool masks reach the scores)
    # masks
    bool_mask: str = "blocked"    # blocked (True = blocked) | inverted | ignored | plus_one (mask.to(dtype):
                                  # 1.0 added where blocked) | plus_one_float32 (mask.float(), whatever the dtype)
    blocked_value: float = float("-inf")
    cast_float_mask: bool = True
    causal: str = "future"        # future | future_and_diagonal | past | after_next (one future key let through) | none
    padding: str = ">="           # >= | > | <
    padding_float: bool = False   # True: padding_mask returns 1.0 / 0.0 (float32) instead of True / False
    max_len: bool = True
    padding_axis: str = "keys"    # keys (B, 1, 1, Lk) | queries (B, 1, Lq, 1) | keys_3d (B, 1, Lk): B meets the heads
    merge_keeps_attn_mask: bool = True
    merge_keeps_padding: bool = True
    bool_helper: bool = False     # causal_mask and merge_masks built from bool masks by to_additive_mask
    # heads
    split: str = "heads"          # heads | no_transpose | interleaved (head i: features i, i+h, ...) |
                                  # no_permute (B, L, h, d_k) | heads_first (h, B, L, d_k) |
                                  # batch_positions (B and L read swapped)
    merge: str = "heads"          # heads | no_transpose | features_positions (d_k and L swapped first) |
                                  # interleaved (the inverse of the interleaved split)
    # MultiHeadSelfAttention
    qkv_order: str = "qkv"        # qkv | kqv | per_head
    value_from: str = "v"         # v | q | k: the third projection replaced by another
    qk_from: str = ""             # "": their own projections; "q" or "k": both q and k from that one
    output_projection: str = "full"  # full | none | per_head (each head's own block of W^O only)
    heads_used: int = 0           # 0: num_heads; else a hard-coded count
    uses_key_padding: bool = True
    uses_attn_mask: bool = True
    average_weights: bool = False
    # TransformerBlock
    swap_norm_first: bool = False
    layout: str = ""              # "": as norm_first says; "post" or "pre": that layout whatever it says
    activation_used: str = ""     # "": as activation says; "relu" or "gelu": that one whatever it says
    block_passes_masks: bool = True
    sublayer_dropped: str = ""    # "attn" or "ff": that sublayer left out of the block
    attn_residual: str = "input"  # input | normalized | none: what is added back around self-attention
    ff_residual: str = "input"    # the same around the feed-forward network
    residual_in: str = "post+pre"  # the layouts (norm_first False: post, True: pre) with that residual
    shared_norm: str = ""         # "", "post", "pre", "post+pre": where one norm stands in for the other
    shared_norm_used: str = "norm1"  # the norm used for both there
    default_eps_in: str = ""      # the norms ("norm1", "norm2", "norm1+norm2") built without layer_norm_eps
    gelu: str = "erf"             # erf | tanh | sigmoid (x * sigmoid(1.702 x))
    norms_swapped: str = ""       # "", "post", "pre", "post+pre": there norm2 serves attention, norm1 the feed-forward
    norm_on_sublayer: str = ""    # "", "post", "pre", "post+pre": there x + norm(sublayer(x)), the norm inside
                                  # the residual, on the sublayer's output
    norm_on_sublayer_of: str = "attn+ff"  # the sublayers written so: attn, ff or both
    ff_on_input: str = ""         # "", "post", "pre", "post+pre": there the feed-forward reads the block's input
                                  # x, not the attention sublayer's result (its residual still that result)
    norm_affine: bool = True      # False: LayerNorm without its weight and bias (F.layer_norm(x, shape))
