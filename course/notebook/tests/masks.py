# Test cells of the `masks` part (format: course/notebook/README.md).

# %% public to_additive_mask
blocked = torch.tensor([[False, True], [False, False]])
_expect_close(to_additive_mask(blocked, torch.float32), torch.tensor([[0.0, float("-inf")], [0.0, 0.0]]),
              "to_additive_mask(bool mask, torch.float32)")
_expect_close(to_additive_mask(blocked, torch.float16), torch.tensor([[0.0, float("-inf")], [0.0, 0.0]]).half(),
              "to_additive_mask(bool mask, torch.float16): exactly -inf where True, 0.0 where False")
assert to_additive_mask(None, torch.float32) is None, "to_additive_mask(None, dtype) must return None"
_quick_check_passed("to_additive_mask")

# %% hidden to_additive_mask
blocked = torch.rand(2, 1, 3, 4) < 0.5
expected = torch.where(blocked, float("-inf"), 0.0).double()
_expect_close(to_additive_mask(blocked, torch.float64), expected, "to_additive_mask(bool (2,1,3,4), torch.float64)")
soft = torch.randn(3, 4)
_expect_close(to_additive_mask(soft, torch.float64), soft.double(), "to_additive_mask(float mask, torch.float64): a cast")
_expect_close(to_additive_mask(soft.double(), torch.float32), soft, "to_additive_mask(float64 mask, torch.float32)")

# %% public causal_mask
inf = float("inf")
_expect_close(causal_mask(3), torch.tensor([[0.0, -inf, -inf], [0.0, 0.0, -inf], [0.0, 0.0, 0.0]]), "causal_mask(3)")
_quick_check_passed("causal_mask")

# %% hidden causal_mask
for n in (1, 2, 7):
    _expect_close(causal_mask(n), oracles.additive(oracles.causal_blocked(n), torch.float32), f"causal_mask({n})")
_expect_close(causal_mask(4, dtype=torch.float64), oracles.additive(oracles.causal_blocked(4), torch.float64),
              "causal_mask(4, dtype=torch.float64)")
assert causal_mask(5, device="cpu").device.type == "cpu", "causal_mask must honour device"

# %% public padding_mask
mask = padding_mask(torch.tensor([2, 4]))
expected = torch.tensor([[False, False, True, True], [False, False, False, False]])
assert mask.dtype == torch.bool and torch.equal(mask, expected), f"padding_mask([2, 4]) is {mask}, expected {expected}"
_quick_check_passed("padding_mask")

# %% hidden padding_mask
mask = padding_mask([3, 1, 0], max_len=5)
expected = oracles.padding_blocked([3, 1, 0], 5)
assert mask.dtype == torch.bool and torch.equal(mask, expected), "padding_mask([3, 1, 0], max_len=5) (a list works too)"
assert tuple(padding_mask(torch.tensor([1, 1])).shape) == (2, 1), "max_len defaults to max(lengths)"

# %% public merge_masks
causal = causal_mask(3)
keys = torch.tensor([[False, False, True], [False, False, False]])
merged = merge_masks(causal, keys)
expected = causal[None, None] + torch.where(keys, float("-inf"), 0.0)[:, None, None, :]
_expect_weights(merged.expand(2, 1, 3, 3), expected, "merge_masks(causal (3,3), key padding (2,3)) broadcast to (2,1,3,3)")
assert merge_masks(None, None) is None, "merge_masks(None, None) must return None"
_quick_check_passed("merge_masks")

# %% hidden merge_masks
keys = torch.rand(2, 5) < 0.3
only_keys = merge_masks(None, keys, dtype=torch.float64)
assert only_keys.dim() == 4 and only_keys.dtype == torch.float64, \
    "a key-padding mask alone becomes (B, 1, 1, Lk) of the given dtype"
expected = torch.where(keys, float("-inf"), 0.0).double()[:, None, None, :]
_expect_close(only_keys.expand(2, 1, 1, 5), expected, "merge_masks(None, bool (2,5))")
per_head = torch.rand(2, 4, 3, 5) < 0.3
merged = merge_masks(per_head, keys)
expected = torch.where(per_head, float("-inf"), 0.0) + torch.where(keys, float("-inf"), 0.0)[:, None, None, :]
_expect_close(merged.expand(2, 4, 3, 5), expected, "merge_masks(bool (2,4,3,5), bool (2,5))")
soft = torch.randn(3, 5)
_expect_close(merge_masks(soft, None).expand(1, 1, 3, 5), soft[None, None], "merge_masks(float (3,5), None)")
