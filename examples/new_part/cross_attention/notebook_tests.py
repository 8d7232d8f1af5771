# Test cells of the `cross` part (format: course/notebook/README.md).

# %% public cross_attention
# Head i of torch's attention on features 2i:2i+2 of x (the queries) and of context (the keys and values).
x, context = torch.randn(2, 3, 4), torch.randn(2, 5, 4)
padded = oracles.padding_blocked([5, 2], 5)  # (2, 5): the second context sequence has 2 real tokens
for name, masks in (("no mask", {}), ("key_padding_mask (2,5)", {"key_padding_mask": padded})):
    out, weights = cross_attention(x, context, 2, **masks)
    assert tuple(out.shape) == (2, 3, 4) and tuple(weights.shape) == (2, 2, 3, 5), \
        f"cross_attention(x (2,3,4), context (2,5,4), 2) with {name}: shapes {tuple(out.shape)} and " \
        f"{tuple(weights.shape)}, expected (2, 3, 4) and (2, 2, 3, 5)"
    mask = None if not masks else padded[:, None, :]  # blocks keys: (B, 1, Lk)
    heads = [oracles.sdpa_expected(x[..., 2 * i:2 * i + 2], context[..., 2 * i:2 * i + 2],
                                   context[..., 2 * i:2 * i + 2], mask) for i in range(2)]
    _expect_weights(weights, torch.stack([w.weights for w in heads], dim=1),
                    f"weights of cross_attention(x (2,3,4), context (2,5,4), 2) with {name}")
    _expect_close(out, torch.cat([w.output for w in heads], dim=-1),
                  f"output of cross_attention(x (2,3,4), context (2,5,4), 2) with {name}")
_quick_check_passed("cross_attention")

# %% hidden cross_attention
# nn.MultiheadAttention(query=x, key=context, value=context) with identity projections and no bias computes
# what cross_attention does: other sizes, a float mask, a mask with nothing blocked, float64 gradients.
def _torch_cross(x, context, num_heads, key_padding_mask=None):
    eye = torch.eye(x.shape[-1], dtype=x.dtype)
    module = oracles.torch_mha({"qkv.weight": torch.cat([eye, eye, eye]), "out.weight": eye}, num_heads)
    return module(x, context, context, key_padding_mask=key_padding_mask, need_weights=True,
                  average_attn_weights=False)


for b, lq, lk, d_model, num_heads in ((1, 1, 1, 1, 1), (3, 6, 2, 12, 3), (2, 2, 7, 8, 8)):
    x, context = torch.randn(b, lq, d_model), torch.randn(b, lk, d_model)
    blocked = oracles.padding_blocked(torch.randint(1, lk + 1, (b,)), lk)
    for name, mask in (("no mask", None), ("a bool mask", blocked),
                       ("a float mask", oracles.additive(blocked, torch.float32)),
                       ("a mask with nothing blocked", torch.zeros(b, lk, dtype=torch.bool))):
        what = f"cross_attention(x ({b},{lq},{d_model}), context ({b},{lk},{d_model}), {num_heads}) with {name}"
        with torch.no_grad():
            expected_out, expected_weights = _torch_cross(x, context, num_heads, mask)
        out, weights = cross_attention(x, context, num_heads, key_padding_mask=mask)
        _expect_close(weights, expected_weights, f"weights of {what}")
        _expect_close(out, expected_out, f"output of {what}")
x = torch.randn(2, 3, 8, dtype=torch.float64, requires_grad=True)
context = torch.randn(2, 4, 8, dtype=torch.float64, requires_grad=True)
blocked = oracles.padding_blocked([4, 1], 4)
grad_out, grad_weights = torch.randn(2, 3, 8, dtype=torch.float64), torch.randn(2, 2, 3, 4, dtype=torch.float64)
mine = torch.autograd.grad(cross_attention(x, context, 2, key_padding_mask=blocked), [x, context],
                           [grad_out, grad_weights])
torch_grads = torch.autograd.grad(_torch_cross(x, context, 2, blocked), [x, context], [grad_out, grad_weights])
for name, got, want in zip(("x", "context"), mine, torch_grads):
    _expect_close(got, want, f"gradient with respect to {name} (float64)", atol=1e-8, rtol=1e-6)
