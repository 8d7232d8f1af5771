"""Known misconceptions: how each one shows on the probes, and what a student is told.

A misconception shows on a part either by `variants` (the submission behaves like the model with
those knobs on every probe of the part, and unlike a correct solution on at least one) or by
`check(session, part)` for behaviour a deterministic model cannot predict: dropout, gradients,
in-place writes, exceptions.

Showing is not enough to name it: a wrong diagnosis misleads more than none, and one behaviour
can have several causes (a block whose masks have no effect may drop them, or call a self-attention
that ignores them). `recognise` names a misconception for a part only when the evidence points
to it alone (see `_evidence`); otherwise it names nothing.
"""
from dataclasses import dataclass, replace
from typing import Callable

import torch

from autograder.feedback.diagnosis.model import Knobs, simulate
from autograder.feedback.diagnosis.probes import block_call, block_state, mhsa_call, randn
from autograder.testing.calls import Call

CORRECT = Knobs()
ATTENTION = ("sdpa", "mhsa", "block")
MODULES = ("mhsa", "block")


@dataclass(frozen=True)
class Misconception:
    id: str
    parts: tuple           # parts whose failure it can explain
    message: str
    variants: tuple = ()   # Knobs
    check: Callable = None  # (session, part) -> bool
    home: tuple = ()       # the parts whose own code can hold the mistake; the others only inherit it


# ---------------------------------------------------------------- comparing what was seen with a prediction

_TOLERANCE = {torch.float16: (1e-2, 1e-3), torch.bfloat16: (2e-2, 2e-2), torch.float32: (1e-4, 1e-5)}
_predictions = {}  # (id of a call, knobs) -> (the call, kept alive so its id stays its own; prediction)


def predicted(call: Call, knobs: Knobs) -> dict:
    """What a solution with `knobs` returns for `call`, computed once."""
    if (id(call), knobs) not in _predictions:
        _predictions[id(call), knobs] = call, simulate(call, knobs)
    return _predictions[id(call), knobs][1]


def same(got, want) -> bool:
    if isinstance(want, torch.Tensor):
        if type(got) is not torch.Tensor or got.shape != want.shape or got.dtype != want.dtype:
            return False
        if not want.is_floating_point():
            return torch.equal(got, want)
        rtol, atol = _TOLERANCE.get(want.dtype, (1e-6, 1e-8))
        return bool(torch.isclose(got.double(), want.double(), rtol=rtol, atol=atol, equal_nan=True).all())
    if isinstance(want, (tuple, list)):
        return isinstance(got, (tuple, list)) and len(got) == len(want) and all(map(same, got, want))
    return got is None and want is None


def consistent(seen, prediction: dict, grads: bool = True) -> bool:
    if seen.raised or "raised" in prediction:
        return bool(seen.raised) and "raised" in prediction
    if not same(seen.output, prediction["output"]):
        return False
    # Past a NaN or inf in the output, gradients depend on how each solution wrote the same mistake.
    if not grads or not _finite(prediction["output"]):
        return True
    expected = [(seen.input_grads, prediction["input_grads"]), (seen.param_grads, prediction["param_grads"])]
    return all(same(got.get(name), g) for got, want in expected for name, g in want.items())


def _finite(output) -> bool:
    outputs = output if isinstance(output, (tuple, list)) else (output,)
    return all(torch.isfinite(o).all() for o in outputs if isinstance(o, torch.Tensor))


def behaves_like(session, part: str, knobs: Knobs) -> bool:
    """Like `knobs` on every probe of the part, unlike a correct solution somewhere, and the values
    `knobs` predicts reproduced somewhere: a submission that raises on every probe matches every
    model that raises there too, which says nothing about which mistake it made."""
    deviates = valued = False
    for key, call in session.probes[part].items():
        seen, want = session.observe(key, call), predicted(call, knobs)
        if not consistent(seen, want):
            return False
        deviates = deviates or not consistent(seen, predicted(call, CORRECT))
        valued = valued or "raised" not in want
    return deviates and valued


def _correct_on(session, part, keys) -> bool:
    probes = session.probes[part]
    return all(consistent(session.observe(k, probes[k]), predicted(probes[k], CORRECT)) for k in keys)


# ---------------------------------------------------------------- checks for what a model cannot predict

def _in_place(session, part) -> bool:
    for key, call in session.probes[part].items():
        seen = session.observe(key, call)
        if seen.mutated or "inplace" in seen.message.lower().replace("-", "").replace(" ", ""):
            return True
    return False


def _detached(session, part) -> bool:
    key = f"{part} grad"
    call = session.probes[part].get(key)
    if call is None:
        return False
    seen, want = session.observe(key, call), predicted(call, CORRECT)
    return not seen.raised and same(seen.output, want["output"]) and not consistent(seen, want)


def _float32_twin(call: Call) -> Call:
    """The same call with every floating tensor, dtype argument and the module in float32 (made once
    per call)."""
    if id(call) not in _twins:
        def cast(value):
            if isinstance(value, torch.dtype) and value.is_floating_point:
                return torch.float32
            return value.float() if isinstance(value, torch.Tensor) and value.is_floating_point() else value
        twin = replace(call, args=tuple(map(cast, call.args)), kwargs={k: cast(v) for k, v in call.kwargs.items()},
                       state=call.state and {k: cast(v) for k, v in call.state.items()},
                       dtype=call.dtype and torch.float32, grad_outputs=None)
        _twins[id(call)] = call, twin
    return _twins[id(call)][1]


_twins = {}  # id of a call -> (the call, kept alive; its float32 twin)


def _float32_where_not(seen, want) -> bool:
    """A float32 result where the correct one is float64 or half, or an error that names the mix."""
    if seen.raised:
        message = seen.message.lower()
        return "float" in message and ("double" in message or "half" in message) and \
            ("dtype" in message or "scalar type" in message)
    outputs = seen.output if isinstance(seen.output, (tuple, list)) else (seen.output,)
    wanted = want["output"] if isinstance(want["output"], (tuple, list)) else (want["output"],)
    return any(isinstance(o, torch.Tensor) and isinstance(w, torch.Tensor) and o.dtype == torch.float32 != w.dtype
               for o, w in zip(outputs, wanted))


def _wrong_dtype(session, part) -> bool:
    """The symptom the message names, and nothing else: on a float64 or half probe a float32 result
    (or a dtype-mix error), while the same probe made in float32 gets the right values."""
    for key, call in session.probes[part].items():
        want = predicted(call, CORRECT)
        if "raised" in want or not _float32_where_not(session.observe(key, call), want):
            continue
        twin = _float32_twin(call)
        if consistent(session.observe(f"{key} as float32", twin), predicted(twin, CORRECT), grads=False):
            return True
    return False


def _only_fails_with(session, part, special: tuple, failure: Callable) -> bool:
    """The probes in `special` fail as `failure` says; every other probe of the part is right."""
    others = [k for k in session.probes[part] if k not in special]
    return _correct_on(session, part, others) and any(
        failure(session.observe(k, session.probes[part][k]), predicted(session.probes[part][k], CORRECT))
        for k in special)


def _squeeze(session, part) -> bool:
    special = {"heads": ("split size one", "merge size one"), "mhsa": ("mhsa batch of one",),
               "block": ("block batch of one",)}.get(part, ())
    return bool(special) and _only_fails_with(session, part, special, lambda seen, want: not consistent(seen, want))


def _unstable_softmax(session, part) -> bool:
    def overflowed(seen, want):
        outputs = seen.output if isinstance(seen.output, (tuple, list)) else (seen.output,)
        return any(isinstance(o, torch.Tensor) and not torch.isfinite(o).all() for o in outputs)
    return _only_fails_with(session, part, (f"{part} large",), overflowed)


def _lengths_list(session, part) -> bool:
    return _only_fails_with(session, part, ("padding list",), lambda seen, want: bool(seen.raised))


# Dropout: a few calls beyond the probes, judged against the same call without dropout.
P_TRAIN = 0.3
_Q, _K, _V = randn(31, 2, 2, 6, 4), randn(32, 2, 2, 6, 4), randn(33, 2, 2, 6, 3)
_X = randn(34, 2, 6, 8)
_SDPA = "scaled_dot_product_attention"
DROPOUT_CALLS = {
    "sdpa off": Call(_SDPA, (_Q, _K, _V)),
    "sdpa eval": Call(_SDPA, (_Q, _K, _V), {"dropout_p": 0.5, "training": False}, seed=1),
    "sdpa train": Call(_SDPA, (_Q, _K, _V), {"dropout_p": P_TRAIN, "training": True}, seed=1),
    "mhsa off": mhsa_call(_X, kwargs={"need_weights": True}),
    "mhsa eval": mhsa_call(_X, init={"dropout": 0.5}, kwargs={"need_weights": True}, seed=1),
    "mhsa train": mhsa_call(_X, init={"dropout": P_TRAIN}, kwargs={"need_weights": True}, training=True, seed=1),
    "block off": block_call(_X),
    "block eval": block_call(_X, {"dropout": 0.5}, seed=1),
}


def _feed_forward_only_state():
    """Self-attention adds exactly 0 (W^O = 0), so x + ffn - x shows the feed-forward branch alone."""
    state = block_state(8, 16)
    for name in ("attn.out.weight", "attn.out.bias"):
        state[name] = torch.zeros_like(state[name])
    return state


_FF_STATE = _feed_forward_only_state()
DROPOUT_CALLS |= {"block ff off": block_call(_X, {"norm_first": True}, state=_FF_STATE),
                  "block ff train": block_call(_X, {"norm_first": True, "dropout": P_TRAIN}, state=_FF_STATE,
                                               training=True, seed=1)}


def _dropout_seen(session, key):
    """(what the submission gave, what it gives without dropout), or None when the latter is wrong."""
    function = key.split()[0]
    off_key = f"{function} ff off" if " ff " in key else f"{function} off"
    off = session.observe(off_key, DROPOUT_CALLS[off_key])
    if not consistent(off, predicted(DROPOUT_CALLS[off_key], CORRECT), grads=False):
        return None
    seen = session.observe(key, DROPOUT_CALLS[key])
    return None if seen.raised else (seen.output, off.output)


def _weights(output):
    return output[1] if isinstance(output, (tuple, list)) and len(output) == 2 else None


def _dropout_in_eval(session, part) -> bool:
    seen = _dropout_seen(session, f"{part} eval")
    return seen is not None and not same(*seen)


def _attention_weights_undropped(session, part) -> bool:
    seen = _dropout_seen(session, f"{'sdpa' if part == 'sdpa' else 'mhsa'} train")
    return seen is not None and same(*seen)


def _feed_forward_undropped(session) -> bool:
    seen = _dropout_seen(session, "block ff train")
    return seen is not None and same(*seen)


def _dropout_never(session, part) -> bool:
    return _attention_weights_undropped(session, part) or (part == "block" and _feed_forward_undropped(session))


def _dropout_no_rescale(session, part) -> bool:
    seen = _dropout_seen(session, f"{'sdpa' if part == 'sdpa' else 'mhsa'} train")
    if seen is None:
        return False
    dropped, clean = _weights(seen[0]), _weights(seen[1])
    if not isinstance(dropped, torch.Tensor) or dropped.shape != clean.shape:
        return False
    kept = dropped != 0
    return bool((~kept).any()) and same(dropped[kept], clean[kept])


def _weights_before_dropout(session, part) -> bool:
    seen = _dropout_seen(session, f"{part} train")
    if seen is None or _weights(seen[0]) is None:
        return False
    return same(_weights(seen[0]), _weights(seen[1])) and not same(seen[0][0], seen[1][0])


def _feed_forward_dropout_missing(session, part) -> bool:
    """Dropout after ff2 (some outputs zeroed) but not inside: the kept ones are all clean / (1-p)."""
    seen = _dropout_seen(session, "block ff train")
    if seen is None or not isinstance(seen[0], torch.Tensor) or seen[0].shape != _X.shape:
        return False
    delta, clean = seen[0] - _X, seen[1] - _X
    kept = delta != 0
    return bool((~kept).any()) and same(delta[kept], clean[kept] / (1 - P_TRAIN))


def _invalid_constructions(session, part) -> list:
    """What the submission raised (type names, "" for nothing) for constructor arguments it must refuse."""
    calls = {"mhsa": [("MultiHeadSelfAttention", {"d_model": 6, "num_heads": 4}),
                      ("MultiHeadSelfAttention", {"d_model": 8, "num_heads": 0}),
                      ("MultiHeadSelfAttention", {"d_model": 8, "num_heads": -2})],
             "block": [("TransformerBlock", {"d_model": 8, "num_heads": 2, "d_ff": 16, "activation": "tanh"}),
                       ("TransformerBlock", {"d_model": 8, "num_heads": 3, "d_ff": 16})]}[part]
    return [session.observe(f"invalid {target} {init}", Call(target, init=init, construct_only=True)).raised
            for target, init in calls]


def _accepts_invalid(session, part) -> bool:
    return "" in _invalid_constructions(session, part)


def _asserts(session, part) -> bool:
    return "AssertionError" in _invalid_constructions(session, part)


def _bias_ignored(session, part) -> bool:
    call = Call("MultiHeadSelfAttention", init={"d_model": 8, "num_heads": 2, "bias": False}, construct_only=True)
    seen = session.observe("mhsa without bias", call)
    return not seen.raised and any(n.endswith("bias") for n in seen.attributes.get("params", {}))


# ---------------------------------------------------------------- the catalog

def _m(id, parts, message, *variants, check=None, home=None):
    """`home` defaults to the first part: where the function that holds the mistake is graded."""
    return Misconception(id, parts, message, tuple(variants), check, home if home is not None else parts[:1])


def _residual_variants(kind, layouts):
    """The residual mistake around self-attention, the feed-forward network or both, in each layout."""
    sublayers = ({"attn_residual": kind}, {"ff_residual": kind}, {"attn_residual": kind, "ff_residual": kind})
    return tuple(Knobs(residual_in=layout, **where) for layout in layouts for where in sublayers)


# Where a mistake can be written: a mask mistake in the masks functions or inline wherever masks are
# applied, an attention mistake in scaled_dot_product_attention or inline in forward, and so on.
MASK_CODE = ("masks", "sdpa", "mhsa")
ATTENTION_CODE = ("sdpa", "mhsa")
HEADS_CODE = ("heads", "mhsa")
ANYWHERE = ("sdpa", "heads", "masks", "mhsa", "block")

CATALOG = [
    # masks
    _m("float-mask-not-cast", ("masks",), "to_additive_mask returns a float mask in its own dtype: cast it to the "
       "dtype asked for.", Knobs(cast_float_mask=False)),
    _m("float32-cast", ATTENTION + ("masks",), "a float32 appears where the inputs are float64 or half: a "
       "hard-coded dtype (.float(), torch.float32, a default dtype) changes the result's dtype.",
       check=_wrong_dtype, home=ANYWHERE),
    _m("causal-diagonal", ("masks",), "your causal mask also blocks the diagonal: a token may attend to itself; "
       "block only keys after the query (torch.triu(..., diagonal=1)).", Knobs(causal="future_and_diagonal")),
    _m("causal-direction", ("masks",), "your causal mask blocks the past instead of the future: block the keys "
       "after each query (above the diagonal).", Knobs(causal="past")),
    _m("causal-offset", ("masks",), "your causal mask lets the next key through: block every key after the "
       "query (torch.triu(..., diagonal=1)).", Knobs(causal="after_next")),
    _m("causal-empty", ("masks",), "your causal mask blocks nothing: -inf belongs above the diagonal.",
       Knobs(causal="none")),
    _m("padding-off-by-one", ("masks",), "your padding mask is off by one: position j is padding when "
       "j >= length, not j > length.", Knobs(padding=">")),
    _m("padding-inverted", ("masks",), "your padding mask is inverted: True marks padding (positions >= length).",
       Knobs(padding="<")),
    _m("max-len-ignored", ("masks",), "padding_mask ignores max_len: when it is given, the mask has max_len "
       "columns.", Knobs(max_len=False)),
    _m("lengths-list", ("masks",), "padding_mask fails for a Python list of lengths: convert with "
       "torch.as_tensor(lengths).", check=_lengths_list),
    _m("padding-on-queries", ("masks",) + MODULES, "your key padding mask blocks queries (rows of the scores) "
       "instead of keys (columns): expand it as [:, None, None, :].", Knobs(padding_axis="queries"),
       home=("masks", "mhsa")),
    _m("merge-drops-attn-mask", ("masks",) + MODULES, "with both masks given, merge_masks keeps only the key "
       "padding mask: add the two additive masks.", Knobs(merge_keeps_attn_mask=False), home=("masks", "mhsa")),
    _m("bool-inverted", ("masks",) + ATTENTION, "your output matches boolean masks read the wrong way round: "
       "True means blocked (as in nn.MultiheadAttention).", Knobs(bool_mask="inverted"), home=MASK_CODE),
    _m("masked-fill-not-assigned", ("masks",) + ATTENTION, "your output matches boolean masks being ignored: "
       "masked_fill returns a new tensor, so its result must be assigned.", Knobs(bool_mask="ignored"),
       home=MASK_CODE),
    _m("large-negative-not-inf", ("masks", "sdpa"), "your masks use a large finite negative number (such as -1e9 "
       "or -1e4) instead of -inf: the contract asks for -inf; a finite value overflows in half precision, and "
       "added to large scores it no longer blocks.",
       *(Knobs(blocked_value=v, bool_helper=helper) for v in (-1e9, -1e4) for helper in (False, True)),
       home=("masks", "sdpa")),
    _m("float-mask-ignored", ATTENTION, "your output matches additive (float) masks being ignored: only boolean "
       "masks reach the scores; add a float mask to the scores (MultiHeadSelfAttention passes its merged mask "
       "as a float mask).", Knobs(float_mask="ignored"), home=ATTENTION_CODE),
    # scaled dot-product attention
    _m("no-scale", ATTENTION, "your output matches attention without the 1/sqrt(d_k) scale: divide q k^T by "
       "sqrt(d_k) before the softmax.", Knobs(scale="none"), home=ATTENTION_CODE),
    _m("scale-by-dk", ATTENTION, "your output matches scores divided by d_k instead of sqrt(d_k).",
       Knobs(scale="dk"), home=ATTENTION_CODE),
    _m("scale-by-dv", ATTENTION, "your output matches a scale of sqrt(d_v), the size of v, instead of sqrt(d_k), "
       "the size of q and k.", Knobs(scale="sqrt_dv"), home=ATTENTION_CODE),
    _m("scale-inverted", ATTENTION, "your output matches scores multiplied by sqrt(d_k) instead of divided by "
       "it.", Knobs(scale="times_sqrt_dk"), home=ATTENTION_CODE),
    _m("scores-transposed", ATTENTION, "your scores match k q^T instead of q k^T: q and k are swapped, so "
       "the weights run over the queries; compute q @ k.transpose(-2, -1).", Knobs(scores="kq"), home=("sdpa",)),
    _m("qk-same-source", ATTENTION, "your output matches scores computed from q alone or k alone (q q^T or "
       "k k^T): the scores are q k^T, each from its own projection.", Knobs(scores="qq"), Knobs(scores="kk"),
       Knobs(qk_from="q"), Knobs(qk_from="k"), home=ATTENTION_CODE),
    _m("mask-ignored", ATTENTION, "your output matches attention with no mask at all: neither boolean nor "
       "additive masks reach the scores.", Knobs(bool_mask="ignored", float_mask="ignored"),
       Knobs(uses_attn_mask=False, uses_key_padding=False), home=ATTENTION_CODE),
    _m("softmax-dim", ATTENTION, "your weights match a softmax over another dimension than the keys: it runs "
       "over the keys (dim=-1), so each query's weights sum to 1.", Knobs(softmax_dim=-2), Knobs(softmax_dim=1),
       Knobs(softmax_dim=0), home=ATTENTION_CODE),
    _m("mask-after-softmax", ATTENTION, "your weights match masking after the softmax (blocked weights zeroed, "
       "rows no longer summing to 1): add the mask to the scores before the softmax.",
       Knobs(mask_mode="zero_after_softmax"), home=ATTENTION_CODE),
    _m("mask-sign", ATTENTION, "your output matches subtracting the additive mask: -inf must be added to the "
       "scores.", Knobs(mask_mode="subtract"), Knobs(mask_mode="subtract_float"), home=ATTENTION_CODE),
    _m("fixed-transpose-dims", ATTENTION, "your attention only works for 4-D inputs: transpose the last two "
       "dimensions, k.transpose(-2, -1), whatever the number of leading dimensions.",
       Knobs(transpose_last_two=False), home=ATTENTION_CODE),
    # heads
    _m("split-no-transpose", ("heads",) + MODULES, "your heads match a reshape straight to (B, h, L, d_k): "
       "reshape to (B, L, h, d_k), then transpose(1, 2).", Knobs(split="no_transpose"), home=HEADS_CODE),
    _m("merge-no-transpose", ("heads",) + MODULES, "your merge matches a reshape to (B, L, h*d_k) without "
       "transposing back first: transpose(1, 2), then reshape.", Knobs(merge="no_transpose"), home=HEADS_CODE),
    _m("heads-mixed-with-positions", ("heads",) + MODULES, "your heads keep positions out of dimension 2 "
       "((B, L, h, d_k) or (B, h, d_k, L) used as (B, h, L, d_k)), so attention runs across heads or features: "
       "reshape to (B, L, h, d_k), then transpose(1, 2).",
       Knobs(split="no_permute"), Knobs(split="features_positions"), home=HEADS_CODE),
    _m("heads-mixed-with-batch", ("heads",) + MODULES, "your heads match the batch mixed with the heads or "
       "positions: reshape x (B, L, d_model) to (B, L, h, d_k), then transpose(1, 2).",
       Knobs(split="heads_first"), Knobs(split="batch_positions"), home=HEADS_CODE),
    _m("merge-wrong-axes", ("heads",) + MODULES, "your merge moves the wrong dimensions before the reshape: "
       "transpose(1, 2) (heads and positions), then reshape to (B, L, h*d_k).", Knobs(merge="features_positions"),
       home=HEADS_CODE),
    _m("split-interleaved", ("heads",) + MODULES, "your heads take every h-th feature instead of a contiguous "
       "block: head i holds features i*d_k:(i+1)*d_k.", Knobs(split="interleaved"), home=HEADS_CODE),
    # MultiHeadSelfAttention
    _m("qkv-order", MODULES, "your output matches q and k swapped (scores k q^T instead of q k^T): the qkv "
       "projection's output is [q | k | v], the layout of nn.MultiheadAttention.in_proj_weight.",
       Knobs(qkv_order="kqv")),
    _m("qkv-per-head", MODULES, "your output matches a per-head [q | k | v] layout: the qkv output is "
       "[q | k | v], each d_model wide; split it into q, k, v first, then each into heads.",
       Knobs(qkv_order="per_head")),
    *(_m(f"v-from-{source}", MODULES, f"your output matches v taken from the {source} projection: v is the third "
         "d_model-wide block of the qkv output, [q | k | v].", Knobs(value_from=source)) for source in "qk"),
    _m("missing-wo", MODULES, "your output matches attention without the output projection W^O (self.out).",
       Knobs(output_projection="none")),
    _m("wo-per-head", MODULES, "your output matches W^O applied to each head on its own (each head's output "
       "projected only into its own d_k features): W^O mixes the heads, so apply self.out to the merged "
       "(B, L, d_model) output.", Knobs(output_projection="per_head")),
    _m("hard-coded-heads", MODULES, "your module behaves as if num_heads were fixed: use the num_heads it was "
       "built with.", *(Knobs(heads_used=h) for h in (1, 2, 4, 8))),
    _m("ignores-key-padding", ("masks",) + MODULES, "key_padding_mask has no effect: merge_masks (or your "
       "forward) must add it to the mask, expanded as [:, None, None, :].", Knobs(uses_key_padding=False),
       Knobs(merge_keeps_padding=False), home=("masks", "mhsa")),
    _m("ignores-attn-mask", MODULES, "attn_mask has no effect in your forward: merge it into the mask.",
       Knobs(uses_attn_mask=False)),
    _m("weights-averaged", ("mhsa",), "need_weights returns weights averaged over the heads: return the "
       "per-head weights, (B, h, L, L).", Knobs(average_weights=True)),
    # TransformerBlock
    _m("pre-post-swapped", ("block",), "your block matches norm_first read the other way round: norm_first=False "
       "is post-LN, x = norm(x + sublayer(x)).", Knobs(swap_norm_first=True)),
    _m("norm-first-ignored", ("block",), "your block uses the same LayerNorm layout whatever norm_first says: "
       "norm_first=False is post-LN, norm(x + sublayer(x)); norm_first=True is pre-LN, x + sublayer(norm(x)).",
       Knobs(layout="post"), Knobs(layout="pre")),
    _m("activation-ignored", ("block",), "your block matches one that uses the same activation whatever "
       "activation says: ReLU when activation='relu', GELU (exact, F.gelu) when activation='gelu'.",
       Knobs(activation_used="relu"), Knobs(activation_used="gelu")),
    _m("block-drops-masks", ("block",), "your block's output matches self-attention called without the masks: "
       "pass attn_mask and key_padding_mask on to self.attn.", Knobs(block_passes_masks=False)),
    _m("sublayer-missing", ("block",), "your block matches one without its self-attention or its feed-forward "
       "sublayer: each adds its output to the residual stream.", Knobs(sublayer_dropped="attn"),
       Knobs(sublayer_dropped="ff")),
    _m("residual-from-normalized", ("block",), "your pre-LN residual adds the normalized input: the residual is x "
       "itself, x + sublayer(norm(x)).", *_residual_variants("normalized", ("pre",))),
    _m("missing-residual", ("block",), "your block matches one without a residual connection around a sublayer.",
       *_residual_variants("none", ("post", "pre", "post+pre"))),
    _m("shared-norm", ("block",), "your block matches one that uses the same LayerNorm for both sublayers: "
       "norm1 belongs to self-attention, norm2 to the feed-forward network.",
       *(Knobs(shared_norm=layout, shared_norm_used=used) for used in ("norm1", "norm2")
         for layout in ("post", "pre", "post+pre"))),
    _m("eps-ignored", ("block",), "your block matches LayerNorm with its default eps: pass layer_norm_eps to "
       "nn.LayerNorm.", *(Knobs(default_eps_in=norms) for norms in ("norm1+norm2", "norm1", "norm2"))),
    _m("tanh-gelu", ("block",), "your GELU matches the tanh approximation: use the exact erf form "
       "(F.gelu's default).", Knobs(gelu="tanh")),
    # behaviour a model cannot predict
    _m("in-place", ATTENTION + ("heads", "masks"), "an argument is modified in place, or an in-place operation "
       "breaks autograd: use x = x + y, masked_fill, x / s instead of x += y, masked_fill_, x /= s.",
       check=_in_place, home=ANYWHERE),
    _m("unstable-softmax", ATTENTION, "large scores give inf or NaN: your softmax overflows; use torch.softmax, or "
       "subtract each row's maximum before exp().", check=_unstable_softmax, home=ATTENTION_CODE),
    _m("squeeze", ("heads",) + MODULES, "calls with a dimension of size 1 (B=1, L=1, h=1 or d_k=1) fail: a "
       "squeeze() drops it.", check=_squeeze, home=ANYWHERE),
    _m("detached", ATTENTION, "the values are right but the gradients are not: part of the computation is cut "
       "from autograd (.detach(), .data, torch.no_grad(), a tensor rebuilt from values).", check=_detached,
       home=ANYWHERE),
    _m("dropout-in-eval", ATTENTION, "dropout is applied in eval mode: apply it only when training.",
       check=_dropout_in_eval, home=ANYWHERE),
    _m("weights-before-dropout", ("sdpa", "mhsa"), "the weights you return are the ones before dropout, while "
       "the output uses dropped ones: return the weights multiplied with v.", check=_weights_before_dropout,
       home=ATTENTION_CODE),
    _m("dropout-never", ATTENTION, "dropout is never applied in training mode.", check=_dropout_never,
       home=ANYWHERE),
    _m("dropout-no-rescale", ATTENTION, "dropout zeroes values without scaling the kept ones by 1/(1-p): use "
       "F.dropout, or divide by (1-p).", check=_dropout_no_rescale, home=ANYWHERE),
    _m("dropout-misplaced", ("block",), "dropout is missing between the activation and ff2, where "
       "nn.TransformerEncoderLayer applies it.", check=_feed_forward_dropout_missing),
    _m("value-error", MODULES, "invalid arguments are accepted: raise ValueError when num_heads < 1 or does not "
       "divide d_model, and for an activation other than 'relu' or 'gelu'.", check=_accepts_invalid,
       home=MODULES),
    _m("assert-not-value-error", MODULES, "invalid arguments raise AssertionError: the contract asks for "
       "ValueError (raise ValueError(...); an assert is also skipped under python -O).", check=_asserts,
       home=MODULES),
    _m("bias-ignored", ("mhsa",), "bias=False is ignored: build both projections with bias=bias.",
       check=_bias_ignored),
]
IDS = {m.id for m in CATALOG}

# The parts whose functions a part's code usually calls: a mistake seen there may be inherited.
DEPENDS = {"sdpa": ("masks",), "heads": (), "masks": (), "mhsa": ("sdpa", "heads", "masks"),
           "block": ("mhsa", "sdpa", "heads", "masks")}


class Evidence:
    """What a submission's probes say about each misconception on each part, each question answered once."""

    def __init__(self, session):
        self.session, self._shows, self._correct = session, {}, {}

    def shows(self, part, m) -> bool:
        """The part behaves as the misconception predicts."""
        if (part, m.id) not in self._shows:
            if m.check is not None:
                self._shows[part, m.id] = bool(m.check(self.session, part))
            else:
                self._shows[part, m.id] = any(behaves_like(self.session, part, knobs) for knobs in m.variants)
        return self._shows[part, m.id]

    def stub(self, part) -> bool:
        return all(self.session.observe(key, call).raised == "NotImplementedError"
                   for key, call in self.session.probes[part].items())

    def correct(self, part) -> bool:
        if part not in self._correct:
            self._correct[part] = _correct_on(self.session, part, self.session.probes[part])
        return self._correct[part]

    def explained(self, part, m) -> bool:
        """Whatever the part gets wrong on its probes, the misconception predicts it (a part left as
        its stub is not called by working code, so it explains nothing and hides nothing)."""
        if self.correct(part) or self.stub(part):
            return True
        if part not in m.parts:
            return False
        if m.check is not None:
            return self.shows(part, m)
        return any(self._deviations_predicted(part, knobs) for knobs in m.variants)

    def _deviations_predicted(self, part, knobs) -> bool:
        for key, call in self.session.probes[part].items():
            seen = self.session.observe(key, call)
            if not (consistent(seen, predicted(call, CORRECT)) or consistent(seen, predicted(call, knobs))):
                return False
        return True


def _evidence(evidence: Evidence, part: str, m: Misconception):
    """How strongly the probes point to `m` for `part`: 2 when a part it calls shows the same mistake
    (inherited), 1 when the part's own code can hold it and every part it calls is right or wrong only
    as `m` predicts, 0 when the behaviour may come from elsewhere (a part it calls, wrong in another way)."""
    if not evidence.shows(part, m):
        return 0
    calls = DEPENDS[part]
    if not all(evidence.explained(d, m) for d in calls):
        return 0
    if any(d in m.parts and evidence.shows(d, m) for d in calls):
        return 2
    return 1 if part in m.home else 0


def recognise(evidence: Evidence, part: str):
    """The misconception the part's behaviour points to, or None when no known one or several do."""
    scored = [(_evidence(evidence, part, m), m) for m in CATALOG if part in m.parts]
    best = max((score for score, _ in scored), default=0)
    named = [m for score, m in scored if score == best and best > 0]
    # A model that reproduces every value is more specific than a check that sees one symptom (a
    # float mask left in float32 also trips the float32 check): it wins, when it is the only one.
    modelled = [m for m in named if m.variants]
    if len(named) > 1 and len(modelled) == 1:
        named = modelled
    return named[0] if len(named) == 1 else None
