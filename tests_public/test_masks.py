"""The mask helpers: to_additive_mask, causal_mask, padding_mask and merge_masks."""
import pytest
import torch

from autograder.testing.compare import Mismatch, expect
from autograder.testing.oracles import additive, causal_blocked
from tests_public.support import DEVICES, NEG_INF, check, invoke, random_bool_mask

pytestmark = pytest.mark.part("masks")

FLOAT_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
DTYPE_IDS = ["float32", "float64", "float16", "bfloat16"]
INF_HINT = ("blocked positions must be exactly float('-inf') and allowed ones exactly 0.0: not a large "
            "negative number such as -1e9, and not the other way round.")


def expect_none(got, what, hint):
    __tracebackhide__ = True
    expect(got is None, f"{what}: expected None, got {type(got).__name__}.", hint=hint)


# -- to_additive_mask -----------------------------------------------------------------------------

def test_to_additive_mask_of_none_is_none(impl):
    outcome, call = invoke(impl, "to_additive_mask", None, torch.float32)
    expect_none(outcome.output, call.signature(), "no mask stays no mask: return None.")


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
def test_to_additive_mask_of_bool(impl, dtype):
    mask = random_bool_mask(2, 3, 4, 5)
    outcome, call = invoke(impl, "to_additive_mask", mask, dtype)
    check(outcome.output, additive(mask, dtype), what=call.signature(), hint=INF_HINT,
          suspects=[(lambda: additive(~mask, dtype),
                     "inverted: True means blocked, so True becomes -inf and False becomes 0.0.")],
          dtype_hint=f"the result has the dtype passed in (here {dtype}), whatever the mask's own dtype.")


@pytest.mark.parametrize("source, target", [(torch.float32, torch.float64), (torch.float64, torch.float32),
                                            (torch.float32, torch.float32)],
                         ids=["float32-to-float64", "float64-to-float32", "float32-to-float32"])
def test_to_additive_mask_casts_float_masks(impl, source, target):
    mask = additive(random_bool_mask(3, 6, 6), source)
    outcome, call = invoke(impl, "to_additive_mask", mask, target)
    check(outcome.output, mask.to(target), what=call.signature(),
          hint="a float mask is already additive: only cast it to the requested dtype, keep its values.",
          suspects=[(lambda: torch.where(mask == 0, NEG_INF, 0.0).to(target),
                     "a float mask is already additive (0.0 allowed, -inf blocked): do not treat it as "
                     "a boolean mask.")],
          dtype_hint=f"cast the float mask to the requested dtype ({target}).")


@pytest.mark.parametrize("device", DEVICES)
def test_to_additive_mask_keeps_device(impl, device):
    mask = random_bool_mask(4, 4).to(device)
    outcome, call = invoke(impl, "to_additive_mask", mask, torch.float32)
    check(outcome.output, additive(mask, torch.float32), what=call.signature(), hint=INF_HINT,
          suspects=[(lambda: additive(~mask, torch.float32),
                     "inverted: True means blocked, so True becomes -inf and False becomes 0.0.")])


# -- causal_mask ----------------------------------------------------------------------------------

def causal_formula(n, dtype=torch.float32, device="cpu"):
    return additive(causal_blocked(n), dtype).to(device)


def causal_suspects(n, dtype=torch.float32):
    return [
        (lambda: causal_formula(n, dtype).T,
         "transposed: row i is query i, and it must not see the future keys j > i, so -inf goes "
         "strictly ABOVE the diagonal."),
        (lambda: causal_formula(n + 1, dtype)[:-1, 1:],
         "the diagonal must stay 0.0: a position may attend to itself (block only j > i)."),
        (lambda: torch.where(causal_formula(n, dtype) == 0, NEG_INF, 0.0).to(dtype),
         "inverted: 0.0 where attention is allowed (j <= i), -inf where it is blocked (j > i)."),
    ]


@pytest.mark.parametrize("n", [1, 2, 5])
def test_causal_mask_values(impl, n):
    outcome, call = invoke(impl, "causal_mask", n)
    check(outcome.output, causal_formula(n), what=call.signature(), hint=INF_HINT,
          suspects=causal_suspects(n),
          dtype_hint="causal_mask returns an additive float mask (0.0 / -inf), float32 unless a dtype "
                     "is given; not a boolean mask.")


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
def test_causal_mask_dtype(impl, dtype):
    outcome, call = invoke(impl, "causal_mask", 4, dtype=dtype)
    check(outcome.output, causal_formula(4, dtype), what=call.signature(), hint=INF_HINT,
          suspects=causal_suspects(4, dtype),
          dtype_hint="create the mask with dtype=dtype (the argument), not a fixed dtype.")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("as_string", [False, True], ids=["torch.device", "string"])
def test_causal_mask_device(impl, device, as_string):
    outcome, call = invoke(impl, "causal_mask", 3, device=device if as_string else torch.device(device),
                           dtype=torch.float64)
    check(outcome.output, causal_formula(3, torch.float64, device), what=call.signature(), hint=INF_HINT,
          suspects=causal_suspects(3, torch.float64),
          dtype_hint="create the mask with dtype=dtype (the argument), not a fixed dtype.")


# -- padding_mask ---------------------------------------------------------------------------------

def padding_formula(lengths, max_len=None):
    lengths = [int(n) for n in lengths]
    width = max(lengths) if max_len is None else max_len
    return torch.tensor([[j >= n for j in range(width)] for n in lengths], dtype=torch.bool).reshape(
        len(lengths), width)


def padding_suspects(lengths, max_len=None):
    expected = padding_formula(lengths, max_len)
    shifted = padding_formula([int(n) + 1 for n in lengths], expected.shape[1] + 1)[:, :-1]
    return [
        (lambda: ~expected, "inverted: True marks the padding (positions >= length), which attention "
                            "must skip; real tokens are False."),
        (lambda: shifted, "off by one: position lengths[b] is already padding (positions start at 0)."),
    ]


PADDING_DTYPE = "padding_mask returns a boolean mask (torch.bool), True at padded positions."


@pytest.mark.parametrize("lengths", [[3, 1, 4], [2], [5, 5]], ids=["mixed", "single", "no-padding"])
def test_padding_mask_from_list(impl, lengths):
    outcome, call = invoke(impl, "padding_mask", lengths)
    check(outcome.output, padding_formula(lengths), what=call.signature(),
          hint="padding_mask(lengths)[b, j] is True exactly when j >= lengths[b]; the width is "
               "max(lengths) unless max_len is given.",
          suspects=padding_suspects(lengths), dtype_hint=PADDING_DTYPE)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32], ids=["int64", "int32"])
def test_padding_mask_from_tensor(impl, dtype):
    lengths = torch.tensor([2, 5, 3, 1], dtype=dtype)
    outcome, call = invoke(impl, "padding_mask", lengths)
    check(outcome.output, padding_formula(lengths.tolist()), what=call.signature(),
          hint="lengths may be a list or a 1-D tensor: handle both (torch.as_tensor helps).",
          suspects=padding_suspects(lengths.tolist()), dtype_hint=PADDING_DTYPE)


def test_padding_mask_max_len(impl):
    outcome, call = invoke(impl, "padding_mask", [3, 1, 4], max_len=7)
    check(outcome.output, padding_formula([3, 1, 4], 7), what=call.signature(),
          hint="with max_len given the mask is (B, max_len), padded positions (j >= lengths[b]) True.",
          suspects=padding_suspects([3, 1, 4], 7), dtype_hint=PADDING_DTYPE)


@pytest.mark.parametrize("device", DEVICES)
def test_padding_mask_keeps_device(impl, device):
    lengths = torch.tensor([4, 2]).to(device)
    outcome, call = invoke(impl, "padding_mask", lengths)
    check(outcome.output, padding_formula([4, 2]).to(device), what=call.signature(),
          hint="padding_mask(lengths)[b, j] is True exactly when j >= lengths[b]; the mask lives on the "
               "device of the lengths tensor.",
          suspects=padding_suspects([4, 2]), dtype_hint=PADDING_DTYPE)


# -- merge_masks ----------------------------------------------------------------------------------

B, H, LQ, LK = 2, 3, 4, 5  # all different, so a wrong broadcast cannot go unnoticed


def merge_formula(attn_mask, key_padding_mask, dtype=torch.float32):
    merged = torch.zeros(B, H, LQ, LK, dtype=dtype)
    for mask, shape in ((attn_mask, None), (key_padding_mask, (B, 1, 1, LK))):
        if mask is not None:
            merged = merged + additive(mask, dtype).reshape(shape or mask.shape)
    return merged


def check_merged(got, attn_mask, key_padding_mask, dtype, what):
    """`got` must broadcast to (B, h, Lq, Lk) and then equal the merged additive mask."""
    __tracebackhide__ = True
    expected = merge_formula(attn_mask, key_padding_mask, dtype)
    expect(type(got) is torch.Tensor, f"{what}: expected a torch.Tensor, got {type(got).__name__}.",
           hint="return one additive float mask (or None when both masks are None).")
    try:
        shape = torch.broadcast_shapes(tuple(got.shape), expected.shape)
    except RuntimeError:
        shape = None
    expect(got.dim() <= 4 and shape == expected.shape,
           f"{what}: the result has shape {tuple(got.shape)}, which does not broadcast to "
           f"(B, h, Lq, Lk) = {tuple(expected.shape)}.",
           hint="a (B, Lk) key_padding_mask must become (B, 1, 1, Lk) before it is combined with the "
                "attention mask: it blocks keys (the last dimension) for every head and query.")
    full = got.expand(expected.shape)
    suspects = []
    if key_padding_mask is not None and attn_mask is None:
        suspects.append((lambda: merge_formula(None, key_padding_mask, dtype).transpose(-1, -2),
                         "key_padding_mask blocks keys (the last dimension), not queries."))
    if key_padding_mask is not None and key_padding_mask.dtype == torch.bool:
        suspects.append((lambda: merge_formula(attn_mask, ~key_padding_mask, dtype),
                         "key_padding_mask is inverted: True means a padded key, which is blocked."))
    if attn_mask is not None and key_padding_mask is not None:
        suspects.append((lambda: merge_formula(attn_mask, None, dtype),
                         "the key_padding_mask was dropped: the merged mask blocks a position when "
                         "either mask blocks it."))
        suspects.append((lambda: merge_formula(None, key_padding_mask, dtype),
                         "the attn_mask was dropped: the merged mask blocks a position when either "
                         "mask blocks it."))
    check(full, expected, what=f"{what}, broadcast to (B, h, Lq, Lk)", hint=INF_HINT, suspects=suspects,
          dtype_hint=f"merge_masks returns an additive float mask of the requested dtype ({dtype}), "
                     "whatever the kinds of masks it gets.")


def test_merge_masks_of_nothing_is_none(impl):
    outcome, call = invoke(impl, "merge_masks", None, None)
    expect_none(outcome.output, call.signature(), "with neither mask there is nothing to merge: return None.")


@pytest.mark.parametrize("kind", ["bool", "float"])
@pytest.mark.parametrize("shape", [(LQ, LK), (B, 1, LQ, LK), (B, H, LQ, LK)],
                         ids=["Lq-Lk", "B-1-Lq-Lk", "B-h-Lq-Lk"])
def test_merge_masks_attn_mask_only(impl, shape, kind):
    attn_mask = random_bool_mask(*shape)
    attn_mask = attn_mask if kind == "bool" else additive(attn_mask, torch.float32)
    outcome, call = invoke(impl, "merge_masks", attn_mask, None)
    check_merged(outcome.output, attn_mask, None, torch.float32, call.signature())


@pytest.mark.parametrize("kind", ["bool", "float"])
def test_merge_masks_key_padding_only(impl, kind):
    kpm = padding_formula([3, 5])  # (B, Lk)
    kpm = kpm if kind == "bool" else additive(kpm, torch.float32)
    outcome, call = invoke(impl, "merge_masks", None, kpm)
    check_merged(outcome.output, None, kpm, torch.float32, call.signature())


@pytest.mark.parametrize("kinds", ["bool-bool", "float-bool", "bool-float", "float-float"])
@pytest.mark.parametrize("shape", [(LQ, LK), (B, 1, LQ, LK), (B, H, LQ, LK)],
                         ids=["Lq-Lk", "B-1-Lq-Lk", "B-h-Lq-Lk"])
def test_merge_masks_both(impl, shape, kinds):
    attn_kind, kpm_kind = kinds.split("-")
    attn_mask, kpm = random_bool_mask(*shape), padding_formula([2, 4], LK)
    if attn_kind == "float":
        attn_mask = additive(attn_mask, torch.float32)
    if kpm_kind == "float":
        kpm = additive(kpm, torch.float32)
    outcome, call = invoke(impl, "merge_masks", attn_mask, kpm)
    check_merged(outcome.output, attn_mask, kpm, torch.float32, call.signature())


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16], ids=["float64", "float16"])
def test_merge_masks_dtype(impl, dtype):
    attn_mask, kpm = random_bool_mask(LQ, LK), padding_formula([5, 2])
    outcome, call = invoke(impl, "merge_masks", attn_mask, kpm, dtype=dtype)
    check_merged(outcome.output, attn_mask, kpm, dtype, call.signature())


def test_merge_masks_never_gives_nan(impl):
    # a position blocked by both masks is still just -inf (-inf + -inf), never NaN
    attn_mask = torch.ones(LQ, LK, dtype=torch.bool)
    attn_mask[:, 0] = False
    kpm = padding_formula([1, 3], LK)
    outcome, call = invoke(impl, "merge_masks", attn_mask, kpm)
    got = outcome.output
    if type(got) is torch.Tensor and got.is_floating_point() and torch.isnan(got).any():
        raise Mismatch(f"{call.signature()}: the merged mask contains NaN.",
                       hint="never compute -inf - (-inf) or 0 * -inf: add the additive masks, or "
                            "combine the boolean masks with | before converting.")
    check_merged(got, attn_mask, kpm, torch.float32, call.signature())
