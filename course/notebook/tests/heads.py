# Test cells of the `heads` part (format: course/notebook/README.md).

# %% public split_heads
x = torch.arange(2 * 3 * 12, dtype=torch.float32).reshape(2, 3, 12)
heads = split_heads(x, 4)
assert tuple(heads.shape) == (2, 4, 3, 3), \
    f"split_heads((2,3,12), 4) has shape {tuple(heads.shape)}, expected (2, 4, 3, 3)"
for i in range(4):
    _expect_close(heads[:, i], x[..., 3 * i:3 * (i + 1)],
                  f"head {i} of split_heads((2,3,12), 4): features {3 * i}:{3 * (i + 1)}")
_quick_check_passed("split_heads")

# %% hidden split_heads
# The head layout of nn.MultiheadAttention: head i of its input projection is rows i*d_k:(i+1)*d_k.
x = torch.randn(3, 5, 24)
for num_heads in (1, 2, 8, 24):
    d_k = 24 // num_heads
    expected = torch.stack([x[..., i * d_k:(i + 1) * d_k] for i in range(num_heads)], dim=1)
    _expect_close(split_heads(x, num_heads), expected, f"split_heads((3,5,24), {num_heads})")
strided = torch.randn(5, 3, 24).transpose(0, 1)  # a non-contiguous input
_expect_close(split_heads(strided, 6), split_heads(strided.contiguous(), 6), "split_heads of a non-contiguous input")
assert torch.equal(x, x.clone()), "split_heads must not modify its input"

# %% public merge_heads
heads = torch.randn(2, 4, 3, 5)
merged = merge_heads(heads)
assert tuple(merged.shape) == (2, 3, 20), f"merge_heads((2,4,3,5)) has shape {tuple(merged.shape)}, expected (2, 3, 20)"
for i in range(4):
    _expect_close(merged[..., 5 * i:5 * (i + 1)], heads[:, i],
                  f"features {5 * i}:{5 * (i + 1)} of merge_heads((2,4,3,5)): head {i}")
_quick_check_passed("merge_heads")

# %% hidden merge_heads
# merge_heads inverts split_heads exactly, from non-contiguous inputs too, and keeps gradients.
x = torch.randn(4, 7, 32, dtype=torch.float64)
for num_heads in (1, 4, 32):
    heads = x.reshape(4, 7, num_heads, 32 // num_heads).transpose(1, 2)  # non-contiguous
    _expect_close(merge_heads(heads), x, f"merge_heads of {num_heads} heads (4,{num_heads},7,{32 // num_heads})")
leaf = torch.randn(2, 3, 4, 5, requires_grad=True)
weights = torch.randn(2, 4, 15)
(grad,) = torch.autograd.grad((merge_heads(leaf) * weights).sum(), leaf)
_expect_close(grad, weights.reshape(2, 4, 3, 5).transpose(1, 2), "gradient through merge_heads")
