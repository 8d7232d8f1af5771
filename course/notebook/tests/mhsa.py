# Test cells of the `mhsa` part (format: course/notebook/README.md).

# %% public MultiHeadSelfAttention
state = _weights(16)
mine = _load(MultiHeadSelfAttention(16, 4), state)
x = torch.randn(2, 5, 16)
expected = oracles.mha_expected(state, x, 4)
_, weights = mine(x, need_weights=True)  # the weights first: where they differ, the cell shows them
_expect_weights(weights, expected.weights, "per-head weights (need_weights=True) against nn.MultiheadAttention")
_expect_close(mine(x), expected.output, "MultiHeadSelfAttention(16, 4)(x (2,5,16)) against nn.MultiheadAttention")
# In eval mode dropout is off: a module built with dropout=0.5 computes the same, with a causal mask too.
mine = _load(MultiHeadSelfAttention(16, 4, dropout=0.5), state)
_expect_close(mine(x, attn_mask=causal_mask(5)), oracles.mha_expected(state, x, 4, attn_mask=causal_mask(5)).output,
              "MultiHeadSelfAttention(16, 4, dropout=0.5) in eval mode with a causal mask (no dropout in eval)")
try:
    MultiHeadSelfAttention(16, 3)
except ValueError:
    pass
else:
    raise AssertionError("MultiHeadSelfAttention(16, 3) must raise ValueError: 3 heads do not divide 16")
_quick_check_passed("MultiHeadSelfAttention")

# %% hidden MultiHeadSelfAttention
# Masks: causal (float), key padding (bool), both at once, and a per-batch boolean attention mask.
state = _weights(24)
mine = _load(MultiHeadSelfAttention(24, 3), state)
x = torch.randn(3, 6, 24)
causal = causal_mask(6)
keys = padding_mask(torch.tensor([6, 4, 1]))
per_head = oracles.random_blocked((3, 3, 6, 6))
cases = {"causal": dict(attn_mask=causal), "key padding": dict(key_padding_mask=keys),
         "causal + key padding": dict(attn_mask=causal, key_padding_mask=keys)}
for name, masks in cases.items():
    expected = oracles.mha_expected(state, x, 3, **masks)
    out, weights = mine(x, need_weights=True, **masks)
    _expect_close(out, expected.output, f"output with a {name} mask")
    _expect_close(weights, expected.weights, f"weights with a {name} mask")
_expect_close(mine(x, attn_mask=per_head), oracles.mha_expected(state, x, 3, attn_mask=per_head).output,
              "output with a bool (B, h, L, L) attention mask")

# %% hidden MultiHeadSelfAttention
# Other sizes, no bias, one head, float64 and gradients of the input and of every parameter.
for d_model, num_heads, bias in ((32, 8, False), (12, 1, True), (8, 8, True)):
    state = oracles.mhsa_state(d_model, oracles.draws(dtype=torch.float32), bias=bias)
    mine = _load(MultiHeadSelfAttention(d_model, num_heads, bias=bias), state)
    x = torch.randn(2, 7, d_model)
    _expect_close(mine(x), oracles.mha_expected(state, x, num_heads).output,
                  f"MultiHeadSelfAttention({d_model}, {num_heads}, bias={bias})")
state = _weights(16, dtype=torch.float64)
mine = _load(MultiHeadSelfAttention(16, 2).double(), state)
x = torch.randn(2, 4, 16, dtype=torch.float64, requires_grad=True)
grad_out = torch.randn(2, 4, 16, dtype=torch.float64)
mine_grads = torch.autograd.grad(mine(x), [x, mine.qkv.weight, mine.out.weight], grad_out)
expected = oracles.mha_expected(state, x, 2, grad_output=grad_out)
torch_grads = (expected.x_grad, expected.param_grads["qkv.weight"], expected.param_grads["out.weight"])
for name, got, want in zip(("x", "qkv.weight", "out.weight"), mine_grads, torch_grads):
    _expect_close(got, want, f"gradient with respect to {name} (float64)", atol=1e-8, rtol=1e-6)

# %% hidden MultiHeadSelfAttention
# Dropout: off in eval mode, on the weights in training mode; the module's settings.
state = _weights(16)
mine = _load(MultiHeadSelfAttention(16, 4, dropout=0.5), state)
x = torch.randn(2, 8, 16)
_expect_close(mine(x), oracles.mha_expected(state, x, 4).output, "eval mode with dropout=0.5 (no dropout in eval)")
mine.train()
out, weights = mine(x, need_weights=True)
eval_out, eval_weights = mine.eval()(x, need_weights=True)
assert bool((weights == 0).any()), "training mode with dropout=0.5 must drop some attention weights"
assert not torch.allclose(out, eval_out), "training mode with dropout=0.5 must change the output"
kept = weights != 0
_expect_close(weights[kept], 2 * eval_weights[kept], "kept weights in training mode (scaled by 1/(1-p))")
mine = MultiHeadSelfAttention(20, 5)
assert mine.num_heads == 5 and mine.d_k == 4, "MultiHeadSelfAttention(20, 5) must set num_heads=5 and d_k=4"
assert sorted(name for name, _ in mine.named_parameters()) == ["out.bias", "out.weight", "qkv.bias", "qkv.weight"], \
    "parameters must be qkv (Linear d_model -> 3 d_model) and out (Linear d_model -> d_model)"
