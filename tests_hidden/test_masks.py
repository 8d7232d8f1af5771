"""to_additive_mask, causal_mask, padding_mask and merge_masks, against their definitions."""
from dataclasses import dataclass

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from autograder.testing.calls import Call
from autograder.testing.checks import expect_untouched
from autograder.testing.compare import Cause, Mismatch, close_to, expect
from autograder.testing.oracles import additive, padding_blocked
from tests_hidden.support import examples, expect_close, generator

pytestmark = pytest.mark.part("masks")
FLOATS = ("float32", "float64", "float16", "bfloat16")
SHAPES = ((4,), (3, 5), (2, 1, 3, 3), (2, 2, 1, 4))


def _random_bool(case, shape, salt=""):
    return torch.rand(shape, generator=generator(case, salt)) < 0.5


@examples(10)
@given(shape=st.sampled_from(SHAPES), dtype=st.sampled_from(FLOATS))
def test_to_additive_mask_from_bool(impl, shape, dtype):
    blocked = _random_bool((shape, dtype), shape)
    call = Call("to_additive_mask", (blocked, getattr(torch, dtype)))
    outcome = impl.run(call)
    expect_close(outcome.output, additive(blocked, getattr(torch, dtype)), "output", call,
                 hint="True (blocked) becomes -inf and False becomes 0.0, in the dtype asked for.")
    expect_untouched(outcome, call)


@examples(8)
@given(shape=st.sampled_from(SHAPES), source=st.sampled_from(FLOATS[:2]), dtype=st.sampled_from(FLOATS))
def test_to_additive_mask_casts_float_masks(impl, shape, source, dtype):
    mask = additive(_random_bool((shape, source, dtype), shape), getattr(torch, source))
    call = Call("to_additive_mask", (mask, getattr(torch, dtype)))
    outcome = impl.run(call)
    expect_close(outcome.output, mask.to(getattr(torch, dtype)), "output", call,
                 hint="a float mask is already additive: only its dtype changes.")
    expect_untouched(outcome, call)


def test_to_additive_mask_of_none(impl):
    call = Call("to_additive_mask", (None, torch.float32))
    got = impl.run(call).output
    expect(got is None, f"{call.signature()} should return None, got {type(got).__name__}.")


@examples(12)
@given(L=st.integers(1, 9), dtype=st.sampled_from(("default",) + FLOATS),
       device=st.sampled_from(("default", "cpu", torch.device("cpu"))))
def test_causal_mask(impl, L, dtype, device):
    kwargs = {} if device == "default" else {"device": device}
    if dtype != "default":
        kwargs["dtype"] = getattr(torch, dtype)
    call = Call("causal_mask", (L,), kwargs)
    want = additive(torch.ones(L, L, dtype=torch.bool).triu(1), kwargs.get("dtype", torch.float32))
    expect_close(impl.run(call).output, want, "output", call,
                 hint="-inf strictly above the diagonal (keys after the query), 0.0 on and below it.")


@st.composite
def _lengths(draw):
    lengths = draw(st.lists(st.integers(0, 6), min_size=1, max_size=4))
    return [max(lengths[0], 1)] + lengths[1:]  # max_len is at least 1


@examples(12)
@given(lengths=_lengths(), as_tensor=st.sampled_from((False, True)), extra=st.sampled_from((None, 0, 2)))
@example(lengths=[3, 1], as_tensor=False, extra=None)
@example(lengths=[2, 4, 1], as_tensor=True, extra=2)
def test_padding_mask(impl, lengths, as_tensor, extra):
    max_len = max(lengths) if extra is None else max(lengths) + extra
    args = (torch.tensor(lengths) if as_tensor else list(lengths),)
    call = Call("padding_mask", args if extra is None else args + (max_len,))
    outcome = impl.run(call)
    expect_close(outcome.output, padding_blocked(lengths, max_len), "output", call,
                 hint="True (padding) at positions >= lengths[b]; max_len, when given, sets the width.")
    expect_untouched(outcome, call)


@dataclass(frozen=True)
class MergeCase:
    B: int
    h: int
    Lq: int
    Lk: int
    attn: str          # none | bool | additive
    attn_shape: str    # shared (Lq, Lk) | per_batch (B, 1, Lq, Lk) | per_head (B, h, Lq, Lk)
    padding: str       # none | bool | additive
    dtype: str         # the dtype argument: default | float32 | float64


@st.composite
def merge_cases(draw):
    attn = draw(st.sampled_from(("bool", "additive", "none")))
    shape = draw(st.sampled_from(("shared", "per_batch", "per_head"))) if attn != "none" else "shared"
    return MergeCase(B=draw(st.integers(1, 3)), h=draw(st.integers(1, 3)), Lq=draw(st.integers(1, 4)),
                     Lk=draw(st.integers(1, 4)), attn=attn, attn_shape=shape,
                     padding=draw(st.sampled_from(("bool", "additive", "none"))),
                     dtype=draw(st.sampled_from(("default", "float64", "float32"))))


def _merge_inputs(case):
    """Masks of the case (float ones always float32, so the dtype argument has work to do)."""
    shapes = {"shared": (case.Lq, case.Lk), "per_batch": (case.B, 1, case.Lq, case.Lk),
              "per_head": (case.B, case.h, case.Lq, case.Lk)}
    masks = {}
    for name, kind, shape in (("attn_mask", case.attn, shapes[case.attn_shape]),
                              ("key_padding_mask", case.padding, (case.B, case.Lk))):
        if kind != "none":
            blocked = _random_bool(case, shape, name)
            masks[name] = blocked if kind == "bool" else additive(blocked, torch.float32)
    return masks


@examples(20)
@given(case=merge_cases())
@example(case=MergeCase(B=2, h=2, Lq=3, Lk=3, attn="bool", attn_shape="shared", padding="bool", dtype="default"))
@example(case=MergeCase(B=2, h=1, Lq=2, Lk=3, attn="none", attn_shape="shared", padding="bool", dtype="float64"))
def test_merge_masks(impl, case):
    masks = _merge_inputs(case)
    dtype = torch.float32 if case.dtype == "default" else getattr(torch, case.dtype)
    args = (masks.get("attn_mask"), masks.get("key_padding_mask"))
    call = Call("merge_masks", args if case.dtype == "default" else args + (dtype,))
    outcome = impl.run(call)
    got = outcome.output
    expect_untouched(outcome, call)
    if not masks:
        expect(got is None, f"{call.signature()} should return None, got {type(got).__name__}.")
        return
    target = (case.B, case.h, case.Lq, case.Lk)
    want = torch.zeros(target, dtype=dtype)
    if "attn_mask" in masks:
        want = want + additive(masks["attn_mask"], dtype)
    hint = ""
    if "key_padding_mask" in masks:
        padding = additive(masks["key_padding_mask"], dtype)
        on_queries = want + padding[:, None, :, None] if case.Lq == case.Lk else None  # the mistake, where it fits
        want = want + padding[:, None, None, :]
        if on_queries is not None:
            hint = Cause("key_padding_mask (B, Lk) blocks keys: it lines up with the last dimension, as "
                         "[:, None, None, :]; yours blocks queries.", close_to(on_queries))
    expect_close(_broadcast(got, target, call), want, "output (broadcast to (B, h, Lq, Lk))", call, hint=hint)


def _broadcast(got, target, call):
    if not isinstance(got, torch.Tensor):
        raise Mismatch(f"{call.signature()} should return a tensor, got {type(got).__name__}.")
    try:
        ok = got.dim() <= 4 and torch.broadcast_shapes(got.shape, target) == target
    except RuntimeError:
        ok = False
    expect(ok, f"output of {call.signature()}: shape {tuple(got.shape)} does not broadcast to (B, h, Lq, Lk) "
               f"= {target}.")
    return got.expand(target)
