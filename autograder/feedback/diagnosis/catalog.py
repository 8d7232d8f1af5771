"""Known misconceptions: how each one shows on the probes, and what a student is told.

A misconception shows on a part either by `variants` (the submission behaves like the model with
those knobs on every probe of the part, and unlike a correct solution on at least one) or by
`check(session, part)` for behaviour a deterministic model cannot predict: dropout, gradients,
in-place writes, exceptions.

Showing is not enough to name it: a wrong diagnosis misleads more than none, and one behaviour
can have several causes (a block whose masks have no effect may drop them, or call a self-attention
that ignores them). `recognise` names a misconception for a part only when the evidence points
to it alone (see `_evidence`); otherwise it names nothing. A mistake is named where its code is (its
`home`): a part that only calls the function holding it is told it comes from there (`message`).

A message states the mistake in terms of the contract and the math, true whatever the code; advice on
how to fix it in code is added only for a construct the part's own code uses (einsum or @, a transpose
or a permute, a softmax call or exp ...), read from the submission's source, and only when exactly one
of the constructs it has advice for is there.
"""
import ast
import re
from dataclasses import dataclass, replace
from typing import Callable

import torch

from autograder.feedback.diagnosis.knobs import Knobs
from autograder.feedback.diagnosis.probes import PROBES, block_call, block_state, mhsa_call, randn
from autograder.testing.calls import Call

CORRECT = Knobs()
ATTENTION = ("sdpa", "mhsa", "block")
MODULES = ("mhsa", "block")


@dataclass(frozen=True)
class Misconception:
    id: str
    parts: tuple           # parts whose failure it can explain
    message: str           # the mistake in terms of the contract and the math, true whatever the code
    variants: tuple = ()   # Knobs
    check: Callable = None  # (session, part) -> bool
    home: tuple = ()       # the parts whose own code can hold the mistake; the others only inherit it
    advice: tuple = ()     # (construct, text): how to fix it in code that uses that construct (see constructs())


# ---------------------------------------------------------------- comparing what was seen with a prediction

_TOLERANCE = {torch.float16: (1e-2, 1e-3), torch.bfloat16: (2e-2, 2e-2), torch.float32: (1e-4, 1e-5)}


def tolerance(dtype: torch.dtype) -> tuple:
    """(rtol, atol) within which `same` takes a result of `dtype` for its prediction."""
    return _TOLERANCE.get(dtype, (1e-6, 1e-8))


def same(got, want) -> bool:
    if isinstance(want, torch.Tensor):
        if type(got) is not torch.Tensor or got.shape != want.shape or got.dtype != want.dtype \
                or got.device != want.device or got.layout != want.layout:  # a meta tensor holds no values
            return False
        if not want.is_floating_point():
            return torch.equal(got, want)
        rtol, atol = tolerance(want.dtype)
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
        seen, want = session.observe(key, call), session.predicted(call, knobs)
        if not consistent(seen, want):
            return False
        deviates = deviates or not consistent(seen, session.predicted(call, CORRECT))
        valued = valued or "raised" not in want
    return deviates and valued


def _correct_on(session, part, keys) -> bool:
    probes = session.probes[part]
    return all(consistent(session.observe(k, probes[k]), session.predicted(probes[k], CORRECT)) for k in keys)


# ---------------------------------------------------------------- checks for what a model cannot predict

def _in_place(session, part) -> bool:
    """An argument changed (values or shape), or torch's error about an in-place operation (autograd's,
    or the result of x += y not fitting in x: only an in-place operation raises "output with shape ...
    doesn't match the broadcast shape"): read in the error's own text, not in the shape trace after it,
    which names the student's files and functions."""
    for key, call in session.probes[part].items():
        seen = session.observe(key, call)
        error = seen.message.split("\n\n")[0].lower().replace("-", "").replace(" ", "")
        if seen.mutated or "inplaceoperation" in error or "doesn'tmatchthebroadcastshape" in error:
            return True
    return False


def _detached(session, part) -> bool:
    key = f"{part} grad"
    call = session.probes[part].get(key)
    if call is None:
        return False
    seen, want = session.observe(key, call), session.predicted(call, CORRECT)
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
        want = session.predicted(call, CORRECT)
        if "raised" in want or not _float32_where_not(session.observe(key, call), want):
            continue
        twin = _float32_twin(call)
        if consistent(session.observe(f"{key} as float32", twin), session.predicted(twin, CORRECT), grads=False):
            return True
    return False


def _only_fails_with(session, part, special: tuple, failure: Callable) -> bool:
    """The probes in `special` fail as `failure` says; every other probe of the part is right."""
    others = [k for k in session.probes[part] if k not in special]
    return _correct_on(session, part, others) and any(
        failure(session.observe(k, session.probes[part][k]), session.predicted(session.probes[part][k], CORRECT))
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
    if not consistent(off, session.predicted(DROPOUT_CALLS[off_key], CORRECT), grads=False):
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
    return same(_weights(seen[0]), _weights(seen[1])) and not same(seen[0][0], seen[1][0]) and \
        not _output_dropped(session, part)


def _dropped_elementwise(dropped, clean, p=P_TRAIN) -> bool:
    """`dropped` is `clean` with some entries zeroed and the others scaled by 1/(1-p)."""
    if not isinstance(dropped, torch.Tensor) or dropped.shape != clean.shape:
        return False
    kept = dropped.abs() > 1e-9
    return bool((~kept).any() and kept.any()) and \
        bool(torch.allclose(dropped[kept].double(), clean[kept].double() / (1 - p), rtol=1e-6, atol=1e-9))


def _output_dropped(session, part) -> bool:
    """Dropout on attention's result instead of its weights: in training mode the weights are the clean
    ones, and the result is the clean one dropped entry by entry: attention's output, or for
    self-attention the merged heads before W^O (read back through W^O, whose weights the grader chose)
    or its output after it."""
    key = f"{'sdpa' if part == 'sdpa' else 'mhsa'} train"
    seen = _dropout_seen(session, key)
    if seen is None or _weights(seen[0]) is None or not same(_weights(seen[0]), _weights(seen[1])):
        return False
    dropped, clean = seen[0][0], seen[1][0]
    if part == "sdpa":
        return _dropped_elementwise(dropped, clean)
    state = DROPOUT_CALLS[key].state
    weight, bias = state["out.weight"].double(), state["out.bias"].double()

    def merged(y):
        return torch.linalg.solve(weight, (y.double() - bias).unsqueeze(-1)).squeeze(-1)
    return isinstance(dropped, torch.Tensor) and dropped.shape == clean.shape and (
        _dropped_elementwise(dropped, clean) or _dropped_elementwise(merged(dropped), merged(clean)))


def _feed_forward_dropout_missing(session, part) -> bool:
    """Dropout after ff2 (some outputs zeroed) but not inside: the kept ones are all clean / (1-p)."""
    seen = _dropout_seen(session, "block ff train")
    if seen is None or not isinstance(seen[0], torch.Tensor) or seen[0].shape != _X.shape:
        return False
    delta, clean = seen[0] - _X, seen[1] - _X
    kept = delta != 0
    return bool((~kept).any()) and same(delta[kept], clean[kept] / (1 - P_TRAIN))


def _softmax_of_dropped_scores(dropped, clean, p=P_TRAIN) -> bool:
    """Weights `dropped` = softmax(scores') where each of scores' is scores/(1-p) (kept) or 0 (dropped),
    and `clean` = softmax(scores) (no mask, so every weight is positive). The scores are read back from
    `clean` up to a constant per row, c: log clean = scores - c. So in each row a kept weight has
    log dropped - log clean / (1-p) equal to one constant, a dropped one has log dropped equal to another."""
    if not (isinstance(dropped, torch.Tensor) and isinstance(clean, torch.Tensor)) or dropped.shape != clean.shape \
            or not torch.isfinite(dropped).all() or (dropped <= 0).any() or (clean <= 0).any():
        return False
    log_dropped, log_clean = dropped.double().log(), clean.double().log()
    kept_value, dropped_value = log_dropped - log_clean / (1 - p), log_dropped
    rows = kept_value.reshape(-1, kept_value.shape[-1]), dropped_value.reshape(-1, kept_value.shape[-1])
    some_dropped = False
    for kept_row, dropped_row in zip(*rows):
        fits = None
        for a in kept_row:  # the kept constant is one of the row's own values (a row keeps at least one)
            kept = (kept_row - a).abs() < 1e-6
            rest = dropped_row[~kept]
            if not kept.all() and (rest - rest[0]).abs().max() >= 1e-6:
                continue
            fits = kept
            break
        if fits is None:
            return False
        some_dropped = some_dropped or not fits.all()
    return some_dropped


def _scores_dropped(session, part) -> bool:
    """Dropout before the softmax: in training mode the weights are a softmax of dropped scores."""
    seen = _dropout_seen(session, f"{'sdpa' if part == 'sdpa' else 'mhsa'} train")
    return seen is not None and _softmax_of_dropped_scores(_weights(seen[0]), _weights(seen[1]))


def _norms_without_parameters(session, part) -> bool:
    """Every block probe fails to load the state because the LayerNorms have no weight or bias
    (nn.LayerNorm(..., elementwise_affine=False) or bias=False): unexpected norm keys, none missing."""
    for key, call in session.probes[part].items():
        seen = session.observe(key, call)
        unexpected = re.search(r"Unexpected key\(s\) in state_dict:([^\n]*)", seen.message)
        if not seen.raised or "Missing key" in seen.message or unexpected is None:
            return False
        names = re.findall(r'"([^"]+)"', unexpected.group(1))
        if not names or not all(re.fullmatch(r"norm[12]\.(weight|bias)", n) for n in names):
            return False
    return True


def _weights_always_returned(session, part) -> bool:
    """(output, weights) returned also without need_weights, its output right; every other probe right."""
    def tuple_returned(seen, want):
        return isinstance(seen.output, (tuple, list)) and len(seen.output) == 2 and "output" in want and \
            same(seen.output[0], want["output"])
    return _only_fails_with(session, part, ("mhsa large", "mhsa grad"), tuple_returned)


def _view_not_contiguous(session, part) -> bool:
    """Every probe of the part is right or raises torch's error for .view on a tensor whose memory is not
    laid out for it (a transposed one), and one raises it."""
    seen_error = False
    for key, call in session.probes[part].items():
        seen = session.observe(key, call)
        if "view size is not compatible" in seen.message:
            seen_error = True
        elif not consistent(seen, session.predicted(call, CORRECT)):
            return False
    return seen_error


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

def _m(id, parts, message, *variants, check=None, home=None, advice=()):
    """`home` defaults to the first part: where the function that holds the mistake is graded."""
    return Misconception(id, parts, message, tuple(variants), check, home if home is not None else parts[:1],
                         tuple(advice))


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
    _m("float32-cast", ATTENTION + ("masks",), "a float32 appears where the inputs are float64 or half: the result "
       "keeps the inputs' dtype, so a hard-coded dtype (.float(), torch.float32, a default dtype) changes it.",
       check=_wrong_dtype, home=ANYWHERE,
       advice=[("float32", "your code has {found}: use the inputs' dtype (x.dtype, or the dtype argument) instead.")]),
    _m("causal-diagonal", ("masks",), "your causal mask also blocks the diagonal: a token may attend to itself; "
       "block only the keys after the query (key index j > query index i).", Knobs(causal="future_and_diagonal"),
       advice=[("triu", "with torch.triu, diagonal=1 leaves the diagonal open."),
               ("tril", "with torch.tril, the open part is tril(..., diagonal=0), the diagonal included.")]),
    _m("causal-direction", ("masks",), "your causal mask blocks the past instead of the future: block the keys "
       "after each query (above the diagonal, key index j > query index i).", Knobs(causal="past"),
       advice=[("triu", "the future is torch.triu(..., diagonal=1): above the diagonal."),
               ("tril", "torch.tril keeps the past: the blocked part is above the diagonal, torch.triu(..., "
                        "diagonal=1).")]),
    _m("causal-offset", ("masks",), "your causal mask lets the next key through: block every key after the "
       "query (key index j > query index i).", Knobs(causal="after_next"),
       advice=[("triu", "with torch.triu, diagonal=1 starts right above the diagonal.")]),
    _m("causal-empty", ("masks",), "your causal mask blocks nothing: -inf belongs above the diagonal.",
       Knobs(causal="none")),
    _m("padding-off-by-one", ("masks",), "your padding mask is off by one: position j is padding when "
       "j >= length, not j > length.", Knobs(padding=">")),
    _m("padding-mask-not-bool", ("masks",), "your padding mask holds numbers (1.0 at padding) instead of "
       "booleans: True marks padding; a float mask is read as additive, so 1.0 would be added to the scores "
       "instead of blocking them.", Knobs(padding_float=True)),
    _m("padding-inverted", ("masks",), "your padding mask is inverted: True marks padding (positions >= length).",
       Knobs(padding="<")),
    _m("max-len-ignored", ("masks",), "padding_mask ignores max_len: when it is given, the mask has max_len "
       "columns.", Knobs(max_len=False)),
    _m("lengths-list", ("masks",), "padding_mask fails for a Python list of lengths: it takes a list or a tensor; "
       "convert with torch.as_tensor(lengths).", check=_lengths_list),
    _m("padding-on-queries", ("masks",) + MODULES, "your key padding mask blocks queries (rows of the scores) "
       "instead of keys (columns): against scores (B, h, Lq, Lk) it is shaped (B, 1, 1, Lk).",
       Knobs(padding_axis="queries"), home=("masks", "mhsa"),
       advice=[("none_index", "index it as [:, None, None, :]."), ("unsqueeze", "unsqueeze(1).unsqueeze(2).")]),
    _m("padding-mask-3d", ("masks",) + MODULES, "your key padding mask is expanded to (B, 1, Lk) instead of "
       "(B, 1, 1, Lk): against scores (B, h, Lq, Lk) its batch dimension lines up with the heads, so each "
       "sequence's padding blocks keys of another sequence (or the shapes do not broadcast).",
       Knobs(padding_axis="keys_3d"), home=("masks", "mhsa"),
       advice=[("none_index", "index it as [:, None, None, :]."), ("unsqueeze", "unsqueeze(1).unsqueeze(2).")]),
    _m("merge-drops-attn-mask", ("masks",) + MODULES, "with both masks given, merge_masks keeps only the key "
       "padding mask: add the two additive masks.", Knobs(merge_keeps_attn_mask=False), home=("masks", "mhsa")),
    _m("bool-inverted", ("masks",) + ATTENTION, "your output matches boolean masks read the wrong way round: "
       "True means blocked (as in nn.MultiheadAttention).", Knobs(bool_mask="inverted"), home=MASK_CODE),
    _m("masked-fill-not-assigned", ("masks",) + ATTENTION, "your output matches boolean masks being ignored: a "
       "True entry must put -inf into the scores.", Knobs(bool_mask="ignored"), home=MASK_CODE,
       advice=[("masked_fill", "masked_fill returns a new tensor, so its result must be assigned."),
               ("where", "torch.where returns a new tensor, so its result must be assigned.")]),
    _m("bool-mask-plus-one", ("masks",) + ATTENTION, "your output matches boolean masks added to the scores as "
       "numbers: True adds +1.0 where it must add -inf, so blocked keys get more weight instead of none.",
       Knobs(bool_mask="plus_one"), Knobs(bool_mask="plus_one_float32"), home=MASK_CODE,
       advice=[("conversion", "a conversion ({found}) turns True into 1.0: put -inf where the mask is True "
                              "(masked_fill or torch.where) and 0.0 elsewhere.")]),
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
       "the weights run over the queries; the score of query i and key j is row i, column j, q_i . k_j.",
       Knobs(scores="kq"), home=("sdpa",),
       advice=[("matmul", "compute q @ k.transpose(-2, -1)."),
               ("einsum", "in the einsum, the query's index comes first in the output: "
                          "torch.einsum('...qd,...kd->...qk', q, k).")]),
    _m("qk-same-source", ATTENTION, "your output matches scores computed from q alone or k alone (q q^T or "
       "k k^T): the scores are q k^T, each from its own projection.", Knobs(scores="qq"), Knobs(scores="kk"),
       Knobs(qk_from="q"), Knobs(qk_from="k"), home=ATTENTION_CODE),
    _m("mask-ignored", ATTENTION, "your output matches attention with no mask at all: neither boolean nor "
       "additive masks reach the scores.", Knobs(bool_mask="ignored", float_mask="ignored"),
       Knobs(uses_attn_mask=False, uses_key_padding=False), home=ATTENTION_CODE),
    _m("softmax-dim", ATTENTION, "your weights match a softmax over another dimension than the keys (for some "
       "input shapes or all): it runs over the last dimension of the scores (..., Lq, Lk), whatever the number "
       "of leading dimensions, so each query's weights sum to 1.",
       *(Knobs(softmax_dim=d) for d in (-2, 1, 0, 2, -3)), home=ATTENTION_CODE,
       advice=[("softmax", "pass dim=-1 to the softmax."),
               ("exp", "divide the exponentials by their sum over dim=-1 (keepdim=True).")]),
    _m("mask-after-softmax", ATTENTION, "your weights match masking after the softmax (blocked weights zeroed, "
       "rows no longer summing to 1): add the mask to the scores before the softmax.",
       Knobs(mask_mode="zero_after_softmax"), home=ATTENTION_CODE),
    _m("mask-sign", ATTENTION, "your output matches subtracting the additive mask: -inf must be added to the "
       "scores.", Knobs(mask_mode="subtract"), Knobs(mask_mode="subtract_float"), home=ATTENTION_CODE),
    _m("fixed-transpose-dims", ATTENTION, "your attention works for one number of dimensions only (4-D, or "
       "3-D): q, k and v may have any number of leading dimensions (..., L, d); the scores pair their last two.",
       Knobs(transpose_dims=(2, 3)), Knobs(transpose_dims=(1, 2)), home=ATTENTION_CODE,
       advice=[("transpose", "transpose the last two dimensions, k.transpose(-2, -1)."),
               ("permute", "a permute names every dimension: use k.transpose(-2, -1)."),
               ("einsum", "write the leading dimensions as an ellipsis: '...qd,...kd->...qk'.")]),
    # heads
    _m("split-no-transpose", ("heads",) + MODULES, "your heads match (B, L, d_model) read straight as "
       "(B, h, L, d_k): head i holds the features i*d_k:(i+1)*d_k of every position, so the features split into "
       "(h, d_k) first, then h moves before the positions.", Knobs(split="no_transpose"), home=HEADS_CODE,
       advice=[("reshape", "reshape to (B, L, h, d_k), then transpose(1, 2).")]),
    _m("merge-no-transpose", ("heads",) + MODULES, "your merge matches (B, h, L, d_k) read straight as "
       "(B, L, h*d_k), without moving the heads back after the positions first.", Knobs(merge="no_transpose"),
       home=HEADS_CODE, advice=[("reshape", "transpose(1, 2), then reshape to (B, L, h*d_k).")]),
    _m("heads-mixed-with-positions", ("heads",) + MODULES, "your heads keep positions out of dimension 2 "
       "((B, L, h, d_k) or (B, h, d_k, L) used as (B, h, L, d_k)), so attention runs across heads or features.",
       Knobs(split="no_permute"), Knobs(split="features_positions"), home=HEADS_CODE,
       advice=[("reshape", "reshape to (B, L, h, d_k), then transpose(1, 2).")]),
    _m("heads-mixed-with-batch", ("heads",) + MODULES, "your heads match the batch mixed with the heads or "
       "positions: x (B, L, d_model) splits its features into (h, d_k), and the result is (B, h, L, d_k).",
       Knobs(split="heads_first"), Knobs(split="batch_positions"), home=HEADS_CODE,
       advice=[("reshape", "reshape x to (B, L, h, d_k), then transpose(1, 2).")]),
    _m("merge-wrong-axes", ("heads",) + MODULES, "your merge moves the wrong dimensions: (B, h, L, d_k) becomes "
       "(B, L, h, d_k) (heads and positions exchanged), then (B, L, h*d_k).", Knobs(merge="features_positions"),
       home=HEADS_CODE, advice=[("reshape", "transpose(1, 2), then reshape to (B, L, h*d_k).")]),
    _m("view-not-contiguous", ("heads",) + MODULES, "your heads call .view on a transposed tensor, whose "
       "memory is not laid out for it, so it raises: use .reshape (or .contiguous() before .view).",
       check=_view_not_contiguous, home=HEADS_CODE),
    _m("split-interleaved", ("heads",) + MODULES, "your heads take every h-th feature instead of a contiguous "
       "block: head i holds features i*d_k:(i+1)*d_k.", Knobs(split="interleaved"), home=HEADS_CODE,
       advice=[("reshape", "split the features as (h, d_k), not (d_k, h): reshape to (B, L, h, d_k).")]),
    _m("heads-strided", ("heads",) + MODULES, "your split_heads and merge_heads agree with each other, but give "
       "head i the strided features i, i+h, i+2h, ... instead of the contiguous block i*d_k:(i+1)*d_k (the layout "
       "of nn.MultiheadAttention, which the output projection's weights assume).",
       Knobs(split="interleaved", merge="interleaved"), home=HEADS_CODE,
       advice=[("reshape", "split the features as (h, d_k), not (d_k, h): reshape to (B, L, h, d_k), and "
                           "merge back in the same order.")]),
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
       "projected only into its own d_k features): W^O mixes the heads, so it applies to the merged "
       "(B, L, d_model) output.", Knobs(output_projection="per_head")),
    _m("hard-coded-heads", MODULES, "your module behaves as if num_heads were fixed: use the num_heads it was "
       "built with.", *(Knobs(heads_used=h) for h in (1, 2, 4, 8))),
    _m("ignores-key-padding", ("masks",) + MODULES, "key_padding_mask has no effect: merge_masks (or your "
       "forward) must add it to the mask, shaped (B, 1, 1, Lk) against the scores (B, h, Lq, Lk).",
       Knobs(uses_key_padding=False), Knobs(merge_keeps_padding=False), home=("masks", "mhsa")),
    _m("ignores-attn-mask", MODULES, "attn_mask has no effect in your forward: merge it into the mask.",
       Knobs(uses_attn_mask=False)),
    _m("weights-always-returned", ("mhsa",), "forward returns (output, weights) also when need_weights is "
       "False: it returns the output alone unless need_weights is True.", check=_weights_always_returned),
    _m("weights-averaged", ("mhsa",), "need_weights returns weights averaged over the heads: return the "
       "per-head weights, (B, h, L, L).", Knobs(average_weights=True)),
    # TransformerBlock
    _m("pre-post-swapped", ("block",), "your block matches norm_first read the other way round: norm_first=False "
       "is post-LN, x = norm(x + sublayer(x)).", Knobs(swap_norm_first=True)),
    _m("norm-first-ignored", ("block",), "your block uses the same LayerNorm layout whatever norm_first says: "
       "norm_first=False is post-LN, norm(x + sublayer(x)); norm_first=True is pre-LN, x + sublayer(norm(x)).",
       Knobs(layout="post"), Knobs(layout="pre")),
    _m("norm-inside-residual", ("block",), "your block matches LayerNorm applied to the sublayer's output inside "
       "the residual, x + norm(sublayer(x)): post-LN (norm_first=False) normalizes the sum, "
       "norm(x + sublayer(x)); pre-LN (norm_first=True) normalizes the sublayer's input, x + sublayer(norm(x)).",
       *(Knobs(norm_on_sublayer=layouts, norm_on_sublayer_of=sublayers) for layouts in ("post", "pre", "post+pre")
         for sublayers in ("attn+ff", "attn", "ff"))),
    _m("ff-on-block-input", ("block",), "your block's feed-forward network reads the block's input x instead of "
       "the self-attention sublayer's result: the sublayers run in sequence, the feed-forward on x after "
       "attention's output has been added to it (and, post-LN, normalized).",
       *(Knobs(ff_on_input=layouts) for layouts in ("post", "pre", "post+pre"))),
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
    _m("norms-swapped", ("block",), "your block matches norm1 and norm2 swapped: norm1 belongs to the "
       "self-attention sublayer, norm2 to the feed-forward network.",
       *(Knobs(norms_swapped=layouts) for layouts in ("post", "pre", "post+pre"))),
    _m("shared-norm", ("block",), "your block matches one that uses the same LayerNorm for both sublayers: "
       "norm1 belongs to self-attention, norm2 to the feed-forward network.",
       *(Knobs(shared_norm=layout, shared_norm_used=used) for used in ("norm1", "norm2")
         for layout in ("post", "pre", "post+pre"))),
    _m("eps-ignored", ("block",), "your block matches LayerNorm with its default eps (1e-5) instead of "
       "layer_norm_eps.", *(Knobs(default_eps_in=norms) for norms in ("norm1+norm2", "norm1", "norm2")),
       advice=[("layer_norm_module", "pass eps=layer_norm_eps to nn.LayerNorm."),
               ("layer_norm_functional", "pass eps to F.layer_norm.")]),
    _m("norm-affine-unused", ("block",), "your LayerNorms match normalization without their weight and bias: "
       "norm1 and norm2 scale and shift the normalized values by their learnable weight and bias.",
       Knobs(norm_affine=False), Knobs(norm_affine=False, default_eps_in="norm1+norm2"),
       advice=[("layer_norm_functional", "F.layer_norm(x, shape) leaves them out: pass the norm's weight, bias "
                                         "and eps, or call the nn.LayerNorm module itself.")]),
    _m("norms-without-parameters", ("block",), "your LayerNorms have no learnable weight or bias, so the "
       "block's state cannot be loaded: norm1 and norm2 are nn.LayerNorm(d_model, eps=layer_norm_eps), with "
       "their weight and bias, as in nn.TransformerEncoderLayer.", check=_norms_without_parameters,
       advice=[("no_affine", "drop {found}.")]),
    _m("tanh-gelu", ("block",), "your GELU matches the tanh approximation: the contract's GELU is the exact erf "
       "form, x * Phi(x) (F.gelu's default).", Knobs(gelu="tanh"),
       advice=[("gelu_tanh", "drop approximate='tanh'."), ("tanh", "use F.gelu instead of the tanh formula.")]),
    _m("gelu-sigmoid", ("block",), "your GELU matches the sigmoid approximation x * sigmoid(1.702 x): the "
       "contract's GELU is the exact erf form, x * Phi(x) (F.gelu's default).", Knobs(gelu="sigmoid"),
       advice=[("sigmoid", "use F.gelu instead of the sigmoid formula.")]),
    # behaviour a model cannot predict
    _m("in-place", ATTENTION + ("heads", "masks"), "an argument is modified in place (its values or its shape), "
       "or an in-place operation fails (autograd refuses it, or its result does not fit the tensor written to): "
       "a function returns new tensors and leaves its arguments as they were.", check=_in_place, home=ANYWHERE,
       advice=[("in_place", "your code has {found}: use the out-of-place form (x = x + y, masked_fill, "
                            "unsqueeze, x = x / s) instead.")]),
    _m("unstable-softmax", ATTENTION, "large scores give inf or NaN: your softmax overflows.",
       check=_unstable_softmax, home=ATTENTION_CODE,
       advice=[("exp", "subtract each row's maximum before exp(), or use torch.softmax.")]),
    _m("squeeze", ("heads",) + MODULES, "calls with a dimension of size 1 (B=1, L=1, h=1 or d_k=1) fail, and "
       "only those: something drops that dimension.", check=_squeeze, home=ANYWHERE,
       advice=[("squeeze", "squeeze() drops every dimension of size 1: name the one you mean, squeeze(dim), or "
                           "leave it out.")]),
    _m("detached", ATTENTION, "the values are right but the gradients are not: part of the computation is cut "
       "from autograd (by .detach(), .data, torch.no_grad() or a tensor rebuilt from values).", check=_detached,
       home=ANYWHERE, advice=[("detach", "In your code: {found}.")]),
    _m("dropout-in-eval", ATTENTION, "dropout is applied in eval mode: apply it only when training.",
       check=_dropout_in_eval, home=ANYWHERE),
    _m("weights-before-dropout", ("sdpa", "mhsa"), "the weights you return are the ones before dropout, while "
       "the output uses dropped ones: return the weights multiplied with v.", check=_weights_before_dropout,
       home=ATTENTION_CODE),
    _m("dropout-on-scores", ("sdpa", "mhsa"), "in training mode your weights match dropout applied to the scores "
       "before the softmax (each row still sums to 1 and no weight is 0): dropout applies to the weights after "
       "the softmax, zeroing some and scaling the others by 1/(1-p).", check=_scores_dropped, home=ATTENTION_CODE),
    _m("dropout-on-output", ("sdpa", "mhsa"), "in training mode your weights are not dropped but your result "
       "is: dropout applies to the attention weights, before they multiply v, not to what comes out.",
       check=_output_dropped, home=ATTENTION_CODE),
    _m("dropout-never", ATTENTION, "dropout is never applied in training mode.", check=_dropout_never,
       home=ANYWHERE),
    _m("dropout-no-rescale", ATTENTION, "dropout zeroes values without scaling the kept ones by 1/(1-p).",
       check=_dropout_no_rescale, home=ANYWHERE,
       advice=[("random_mask", "divide the kept values by (1 - p), or use F.dropout.")]),
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

ORDER = ("masks", "heads", "sdpa", "mhsa", "block")  # a part before the parts that call it
# The parts whose functions a part's code usually calls: a mistake seen there may be inherited.
DEPENDS = {"sdpa": ("masks",), "heads": (), "masks": (), "mhsa": ("sdpa", "heads", "masks"),
           "block": ("mhsa", "sdpa", "heads", "masks")}


class Evidence:
    """What a submission's probes say about each misconception on each part, each question answered once."""

    def __init__(self, session):
        self.session, self._shows, self._partly, self._correct = session, {}, {}, {}

    def shows(self, part, m) -> bool:
        """The part behaves as the misconception predicts."""
        if (part, m.id) not in self._shows:
            if m.check is not None:
                self._shows[part, m.id] = bool(m.check(self.session, part))
            else:
                self._shows[part, m.id] = any(behaves_like(self.session, part, knobs) for knobs in m.variants)
        return self._shows[part, m.id]

    def supports(self, part, m) -> bool:
        """The probes show the misconception in the part: on all of them, or on some with the others
        right while a part that calls it shows it on all of its own (softmax over dim=2 is right for
        3-D inputs and wrong for 4-D ones: attention shows it on its 4-D probes, self-attention whole)."""
        return self.shows(part, m) or (self.partly_shows(part, m) and any(
            part in DEPENDS[caller] and caller in m.parts and self.shows(caller, m) for caller in DEPENDS))

    def partly_shows(self, part, m) -> bool:
        """Wherever the part is wrong, the misconception predicts it, and it reproduces its values on
        at least one such probe (a prediction of an error says nothing of which mistake it was)."""
        if (part, m.id) not in self._partly:
            if m.check is not None:
                self._partly[part, m.id] = self.shows(part, m)
            else:
                self._partly[part, m.id] = any(self._partly_like(part, knobs) for knobs in m.variants)
        return self._partly[part, m.id]

    def _partly_like(self, part, knobs) -> bool:
        valued = False
        for key, call in self.session.probes[part].items():
            seen = self.session.observe(key, call)
            if consistent(seen, self.session.predicted(call, CORRECT)):
                continue
            want = self.session.predicted(call, knobs)
            if not consistent(seen, want):
                return False
            valued = valued or "raised" not in want
        return valued

    def wrong(self, part) -> bool:
        """The part differs from a correct solution on its probes, and is not left as its stub."""
        return not self.correct(part) and not self.stub(part)

    def stub(self, part) -> bool:
        """Some of the part's functions are still stubs (NotImplementedError) and the others are right:
        a part being written, or a notebook's later sections not run yet."""
        probes = self.session.probes[part]
        unwritten = [key for key, call in probes.items() if self.session.observe(key, call).raised == "NotImplementedError"]
        return bool(unwritten) and _correct_on(self.session, part, [key for key in probes if key not in unwritten])

    def correct(self, part) -> bool:
        if part not in self._correct:
            self._correct[part] = _correct_on(self.session, part, self.session.probes[part])
        return self._correct[part]

    def explained(self, part, m) -> bool:
        """Whatever the part gets wrong on its probes, the misconception predicts it (a part whose
        functions are stubs or right is not called wrongly by working code, so it explains nothing and
        hides nothing)."""
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
            predict = self.session.predicted
            if not (consistent(seen, predict(call, CORRECT)) or consistent(seen, predict(call, knobs))):
                return False
        return True


def _evidence(evidence: Evidence, part: str, m: Misconception) -> tuple:
    """How strongly the probes point to `m` for `part`, and which part's code holds it: (2, the lowest
    part it calls that shows the same mistake) when it is inherited; (1, part) when the part's own code
    can hold it and every part it calls is right; (0, None) when the behaviour may come from elsewhere
    (a part it calls is wrong in another way). A mistake written in a part it calls is inherited even
    when that part shows it on some of its probes only: the calling part is never told that its own
    code holds it. Evidence on some probes only counts half a step less than on all of them: where a
    model reproduces the part whole, it is the better account."""
    if not evidence.supports(part, m):
        return 0, None
    calls = DEPENDS[part]
    if not all(evidence.explained(d, m) for d in calls):
        return 0, None
    showing = [d for d in ORDER if d in calls and d in m.parts and evidence.supports(d, m)]
    if showing:
        return 2 - 0.5 * (not evidence.shows(showing[0], m)), showing[0]
    if any(evidence.wrong(d) for d in calls):  # wrong only as `m` predicts, but raising where it does
        return 0, None
    return (1 - 0.5 * (not evidence.shows(part, m)), part) if part in m.home else (0, None)


def locate(evidence: Evidence, part: str) -> tuple:
    """(the misconception the part's behaviour points to, the part whose code holds it), or (None, None)
    when no known one or several do."""
    scored = [(_evidence(evidence, part, m), m) for m in CATALOG if part in m.parts]
    best = max((score for (score, _), _ in scored), default=0)
    named = [(m, origin) for (score, origin), m in scored if score == best and best > 0]
    # A model that reproduces every value is more specific than a check that sees one symptom (a
    # float mask left in float32 also trips the float32 check): it wins, when it is the only one.
    modelled = [(m, origin) for m, origin in named if m.variants]
    if len(named) > 1 and len(modelled) == 1:
        named = modelled
    return named[0] if len(named) == 1 else (None, None)


def recognise(evidence: Evidence, part: str):
    """The misconception the part's behaviour points to, or None when no known one or several do."""
    return locate(evidence, part)[0]


# ---------------------------------------------------------------- what a student reads, fitted to their code

# The functions (or classes) of the contract whose code each part grades, and how a message names them.
CODE = {"sdpa": ("scaled_dot_product_attention",), "heads": ("split_heads", "merge_heads"),
        "masks": ("to_additive_mask", "causal_mask", "padding_mask", "merge_masks"),
        "mhsa": ("MultiHeadSelfAttention",), "block": ("TransformerBlock",)}
WHERE = {"sdpa": "scaled_dot_product_attention", "heads": "split_heads or merge_heads",
         "masks": "the mask functions", "mhsa": "MultiHeadSelfAttention", "block": "TransformerBlock"}
_CONTRACT = {name for names in CODE.values() for name in names}
_NOT_IN_PLACE = {"requires_grad_", "manual_seed", "retain_grad"}


def message(m: Misconception, part: str, origin: str, source: str = None) -> str:
    """What the student reads for `part`: the mistake, where it is written when that is a part this one
    calls, and advice on the construct their code uses, when there is one that fits (only where the
    mistake is written: `source` is the program text, None for no advice)."""
    if origin and origin != part:
        return f"from {WHERE[origin]}, which this part calls: {m.message}"
    fitting = advice(m, source, part) if source else ""
    return f"{m.message} {fitting}" if fitting else m.message


def advice(m: Misconception, source: str, part: str) -> str:
    """The one piece of the misconception's advice whose construct the part's code uses ("" when none
    or several do: advice for a construct the code does not use would not fit it)."""
    if not m.advice:
        return ""
    found = constructs(code_of(source, part))
    fitting = [(construct, text) for construct, text in m.advice if construct in found]
    if len(fitting) != 1:
        return ""
    construct, text = fitting[0]
    text = text.format(found=", ".join(dict.fromkeys(found[construct])))
    return text[:1].upper() + text[1:]


def code_of(source: str, part: str) -> list:
    """The statements of the part's functions or classes in `source`, and of the helpers they call that
    the program defines (not other functions of the contract: those are graded as their own parts)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    defined = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined[node.name] = node
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            defined[node.targets[0].id] = node.value
    todo = [name for name in CODE[part] if name in defined]
    seen, statements = set(todo), []
    while todo:
        node = defined[todo.pop()]
        body = _bodies(node)
        statements += body
        for inner in (n for statement in body for n in ast.walk(statement)):
            func = inner.func if isinstance(inner, ast.Call) else None
            if isinstance(func, ast.Attribute):  # a helper class's method: Helper.method(...)
                func = func.value
            name = func.id if isinstance(func, ast.Name) else None
            if name in defined and name not in _CONTRACT and name not in seen:
                seen.add(name)
                todo.append(name)
    return statements


def _bodies(node) -> list:
    """The statements a definition runs (its methods' bodies, for a class), not its signature."""
    if isinstance(node, ast.ClassDef):
        return [s for item in node.body for s in _bodies(item)] if node.body else []
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return list(node.body)
    return [node] if isinstance(node, ast.expr) else []


def _name(call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def constructs(statements) -> dict:
    """construct -> the snippets of code that use it, for the constructs advice is written for."""
    found = {}

    def add(construct, snippet=""):
        found.setdefault(construct, []).append(snippet)

    simple = {"einsum": "einsum", "matmul": "matmul", "bmm": "matmul", "mm": "matmul", "transpose": "transpose",
              "swapaxes": "transpose", "swapdims": "transpose", "permute": "permute", "reshape": "reshape",
              "view": "reshape", "rearrange": "rearrange", "softmax": "softmax", "exp": "exp",
              "masked_fill": "masked_fill", "where": "where", "triu": "triu", "tril": "tril",
              "unsqueeze": "unsqueeze", "LayerNorm": "layer_norm_module", "layer_norm": "layer_norm_functional",
              "tanh": "tanh", "sigmoid": "sigmoid", "rand": "random_mask", "squeeze": "squeeze", "rand_like": "random_mask", "bernoulli": "random_mask"}
    for node in (n for statement in statements for n in ast.walk(statement)):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            add("matmul")
        elif isinstance(node, ast.Attribute) and node.attr in ("T", "mT") and isinstance(node.ctx, ast.Load):
            add("transpose")
        elif isinstance(node, ast.Attribute) and node.attr in ("float32", "float") and \
                isinstance(node.value, ast.Name) and node.value.id == "torch":
            add("float32", f"torch.{node.attr}")
        elif isinstance(node, ast.Attribute) and node.attr == "data" and isinstance(node.ctx, ast.Load):
            add("detach", ".data")
        elif isinstance(node, ast.AugAssign):
            add("in_place", ast.unparse(node).split("=")[0].strip() + "= ...")
        elif isinstance(node, ast.Subscript) and any(isinstance(n, ast.Constant) and n.value is None
                                                      for n in ast.walk(node.slice)):
            add("none_index")
        elif isinstance(node, (ast.For, ast.comprehension)) and isinstance(node.iter, ast.Call) and \
                _name(node.iter) == "range":
            add("loop")
        if not isinstance(node, ast.Call):
            continue
        name = _name(node)
        if name in simple:
            add(simple[name])
        if name == "float" and isinstance(node.func, ast.Attribute) and not node.args:
            add("float32", ".float()")
        if name in ("float", "double", "half", "to", "type") and isinstance(node.func, ast.Attribute):
            add("conversion", ast.unparse(node))
        if name in ("detach", "no_grad", "item", "tolist", "numpy"):
            add("detach", f"torch.{name}()" if name == "no_grad" else f".{name}()")
        if name.endswith("_") and not name.startswith("_") and name not in _NOT_IN_PLACE:
            add("in_place", f".{name}(...)")
        for keyword in node.keywords:
            value = keyword.value
            if keyword.arg == "approximate" and isinstance(value, ast.Constant) and value.value == "tanh":
                add("gelu_tanh")
            if name == "LayerNorm" and keyword.arg in ("elementwise_affine", "bias") and \
                    isinstance(value, ast.Constant) and value.value is False:
                add("no_affine", f"{keyword.arg}=False")
    return found


def by_id(misconception_id: str) -> Misconception:
    return next(m for m in CATALOG if m.id == misconception_id)


def prediction_needs():
    """Every (call, knobs) whose prediction the checks above may ask for: each probe with a correct
    solution and with every variant of a misconception of its part, each probe's float32 twin and
    each dropout call with a correct solution. The table of predictions (predictions.py) holds these."""
    for part, calls in PROBES.items():
        variants = sorted({knobs for m in CATALOG if part in m.parts for knobs in m.variants}, key=repr)
        for call in calls.values():
            for knobs in (CORRECT, *variants):
                yield call, knobs
            yield _float32_twin(call), CORRECT
    for call in DROPOUT_CALLS.values():
        yield call, CORRECT
