"""Helpers of the public tests: calling your code, checking results with hints, random inputs.

Expected values come from autograder/testing/oracles.py: PyTorch's own F.scaled_dot_product_attention,
nn.MultiheadAttention and nn.TransformerEncoderLayer, loaded with the same weights as your module.
Nothing here imports a solution: a test describes a call, the `impl` fixture runs it on your code,
and the result is compared with what torch computes.
"""
import torch
import torch.nn.functional as F

from autograder.testing import oracles
from autograder.testing.calls import Call
from autograder.testing.checks import constructed, expect_untouched
from autograder.testing.compare import Cause, Mismatch, expect, expect_tensor, hint_for, rescaled
from autograder.testing.oracles import F64

NEG_INF = float("-inf")
# Devices the device-keeping tests use. CPU only: the public suite must behave the same on every
# machine and under every isolation level (a sandboxed worker may not see a GPU). CUDA is checked
# separately, on the course's GPU machines.
DEVICES = ["cpu"]


# --------------------------------------------------------------------------------------------------
# Calling the submission
# --------------------------------------------------------------------------------------------------

def _fresh(value):
    """Your code gets copies: whatever it does to them, the test's own tensors stay intact."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, list):
        return [_fresh(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_fresh(v) for v in value)
    return value


def invoke(impl, target, *args, grad_outputs=None, **kwargs):
    """Calls the function `target` of the submission; returns (outcome, call)."""
    __tracebackhide__ = True  # failures point at the test and at your code, not at this helper
    call = Call(target, tuple(_fresh(a) for a in args), {k: _fresh(v) for k, v in kwargs.items()},
                grad_outputs=grad_outputs)
    outcome = impl.run(call)
    expect_untouched(outcome, call)
    return outcome, call


def construct(impl, target, **init):
    """Builds the class `target` without calling forward; returns (outcome, what was built)."""
    __tracebackhide__ = True  # failures point at the test and at your code, not at this helper
    call = Call(target, init=init, construct_only=True)
    return impl.run(call), constructed(call)


STATE_HINT = {
    "MultiHeadSelfAttention": "the module must own exactly two nn.Linear layers, `qkv` "
                              "(d_model -> 3*d_model) and `out` (d_model -> d_model), with bias only "
                              "when bias=True, and no other parameters or (persistent) buffers.",
    "TransformerBlock": "the block must own exactly `attn` (your MultiHeadSelfAttention), `ff1`, `ff2` "
                        "(nn.Linear) and `norm1`, `norm2` (nn.LayerNorm), and no other parameters or (persistent) "
                        "buffers.",
}


def run_module(impl, target, init, *args, state=None, dtype=F64, training=False, grad_outputs=None,
               **kwargs):
    """Builds `target(**init)`, loads `state`, runs forward(*args, **kwargs); returns (outcome, call)."""
    __tracebackhide__ = True  # failures point at the test and at your code, not at this helper
    call = Call(target, tuple(_fresh(a) for a in args), {k: _fresh(v) for k, v in kwargs.items()},
                init=init, state=_fresh(state), dtype=dtype, training=training,
                grad_outputs=grad_outputs)
    try:
        outcome = impl.run(call)
    except RuntimeError as err:
        message = str(err)
        if "state_dict" not in message:
            raise
        first = message.strip().splitlines()[0]
        raise Mismatch(f"{call.signature()}: the test's weights do not fit your module: {first}",
                       detail=message, hint=STATE_HINT.get(target, "")) from None
    expect_untouched(outcome, call)
    return outcome, call


# --------------------------------------------------------------------------------------------------
# Checking results
# --------------------------------------------------------------------------------------------------

def _same(got, candidate, rtol, atol) -> bool:
    if not isinstance(got, torch.Tensor) or not isinstance(candidate, torch.Tensor):
        return False
    if got.shape != candidate.shape:
        return False
    g, c = got.detach().to(candidate.dtype), candidate.detach().to(got.device)
    if not c.is_floating_point():
        return bool((g == c).all())
    return bool(torch.isclose(g, c, rtol=rtol, atol=atol, equal_nan=True).all())


def check(got, expected, *, what, hint="", suspects=(), rtol=None, atol=None, dtype_hint=""):
    """expect_tensor, plus a specific hint when `got` matches a known mistake.

    suspects: (make, hint) pairs; make() computes what a typical wrong implementation returns. The
    first suspect that matches `got` gives the hint; otherwise `hint` is used. Shape, dtype and device
    problems keep compare's own hints (a dtype problem gets `dtype_hint` when there is one).
    """
    __tracebackhide__ = True  # failures point at the test and at your code, not at this helper
    plain = type(got) is torch.Tensor
    if not (plain and got.shape == expected.shape and got.dtype == expected.dtype
            and got.device == expected.device):
        try:
            expect_tensor(got, expected, what=what, rtol=rtol, atol=atol)
        except Mismatch as err:
            if dtype_hint and plain and got.shape == expected.shape and got.dtype != expected.dtype:
                raise Mismatch(err.summary, err.detail, dtype_hint) from None
            raise
    try:
        expect_tensor(got, expected, what=what, rtol=rtol, atol=atol)
    except Mismatch as err:
        default_rtol, default_atol = (1e-5, 1e-7) if expected.dtype == F64 else (1e-3, 1e-4)
        for make, suspect_hint in suspects:
            try:
                candidate = make()
            except Exception:  # noqa: BLE001 - a suspect that cannot be built is just not the cause
                continue
            if _same(got, candidate, default_rtol, default_atol):
                raise Mismatch(err.summary, err.detail, suspect_hint) from None
        text = hint_for(hint, got, expected)
        if got.is_floating_point() and torch.isnan(got).any() and not torch.isnan(expected).any():
            text = NAN_HINT + (f" Otherwise: {text}" if text else "")
        raise Mismatch(err.summary, err.detail, text) from None


NAN_HINT = ("NaN usually comes from -inf - (-inf), 0 * (-inf), or a softmax over a row that is all -inf "
            "(every key blocked). In these tests every query keeps at least one key, so check the mask "
            "convention (True or -inf = blocked), which dimension the mask blocks, and that the softmax runs "
            "over the keys (dim=-1): over the queries, a blocked key is a row of -inf.")


def expect_like(got, expected, what):
    """`got` is a plain tensor with expected's shape, dtype and device (values are not compared)."""
    __tracebackhide__ = True  # failures point at the test and at your code, not at this helper
    if not (type(got) is torch.Tensor and got.shape == expected.shape and got.dtype == expected.dtype
            and got.device == expected.device):
        expect_tensor(got, expected, what=what)


def check_weights_and_output(out, weights, want, what, hint):
    """Attention weights and output against the oracle's `want`, with one hint for both."""
    __tracebackhide__ = True  # failures point at the test and at your code, not at this helper
    check(weights, want.weights, what=f"weights returned by {what}", hint=hint)
    check(out, want.output, what=f"output of {what}", hint=hint)


def check_dropped_weights(weights, clean, p, what, drop_hint, scale_hint):
    """Training-mode attention weights: some, not all, dropped (exactly 0); the others are the
    dropout-free weights `clean` scaled by 1/(1 - p). `scale_hint` is given only when the survivors are
    the right weights times another factor: survivors that differ otherwise were wrong before dropout."""
    __tracebackhide__ = True  # failures point at the test and at your code, not at this helper
    expect_like(weights, clean, what)
    dropped = weights == 0
    expect(0 < int(dropped.sum()) < dropped.numel(),
           f"{what}: {int(dropped.sum())} of {dropped.numel()} weights are 0; with dropout {p} about "
           f"{p:.0%} should be.", hint=drop_hint)
    kept = torch.where(dropped, torch.zeros_like(clean), clean / (1 - p))
    check(weights, kept, what=f"{what} (the weights that survived dropout)",
          suspects=[(lambda: torch.where(dropped, torch.zeros_like(clean), clean),
                     "the weights that survive dropout are scaled by 1/(1 - p), as "
                     "torch.nn.functional.dropout does.")],
          hint=Cause(scale_hint, rescaled))


# --------------------------------------------------------------------------------------------------
# Random data
# --------------------------------------------------------------------------------------------------

def randn(*shape, dtype=F64, scale=1.0):
    return oracles.randn(shape, dtype=dtype, scale=scale)


def random_bool_mask(*shape, p=0.3):
    """True (blocked) with probability p, but never a whole row: every query keeps a key."""
    return oracles.random_blocked(shape, p=p)


def random_lengths(batch, max_len):
    """Lengths in 1..max_len, with max_len present (so padding_mask's default width is max_len)."""
    lengths = torch.randint(1, max_len + 1, (batch,))
    lengths[0] = max_len
    return lengths


def mhsa_state(d_model, bias=True, dtype=F64):
    return oracles.mhsa_state(d_model, oracles.draws(dtype=dtype), bias=bias)


def block_state(d_model, d_ff, dtype=F64):
    return oracles.block_state(d_model, d_ff, oracles.draws(dtype=dtype))


# --------------------------------------------------------------------------------------------------
# Typical mistakes, as the weights torch's modules would need to make them (for hints)
# --------------------------------------------------------------------------------------------------

def scale_queries(state, factor, prefix=""):
    """The same weights with q multiplied by `factor`: a different scale inside the softmax."""
    state = dict(state)
    d_model = state[f"{prefix}qkv.weight"].shape[1]
    for name in (f"{prefix}qkv.weight", f"{prefix}qkv.bias"):
        if name in state:
            tensor = state[name].clone()
            tensor[:d_model] *= factor
            state[name] = tensor
    return state


def interleaved_qkv(state, num_heads, prefix=""):
    """The weights as seen by code that reads qkv's output as (h, 3, d_k) instead of (3, h, d_k)."""
    state = dict(state)
    d_model = state[f"{prefix}qkv.weight"].shape[1]
    d_k = d_model // num_heads
    rows = torch.arange(3 * d_model).view(num_heads, 3, d_k).transpose(0, 1).reshape(-1)
    for name in (f"{prefix}qkv.weight", f"{prefix}qkv.bias"):
        if name in state:
            state[name] = state[name][rows]
    return state


def swapped_norms(state):
    state = dict(state)
    for p in ("weight", "bias"):
        state[f"norm1.{p}"], state[f"norm2.{p}"] = state[f"norm2.{p}"], state[f"norm1.{p}"]
    return state


def tanh_gelu(x):
    return F.gelu(x, approximate="tanh")
