"""The calls the diagnosis makes on a submission (fixed inputs), and what it observed.

Each part has a few probes chosen so that known mistakes tell themselves apart: Lq != Lk and
d_v != d_k, bool and additive masks, 3-D and 4-D inputs, size-1 dimensions, a float64 and a half
precision case, large inputs, a backward pass. Extra probes (dropout, constructors) serve the checks
in catalog.py. Everything here runs in the grader; the submission only through its Backend.
"""
from dataclasses import dataclass, field

import torch

from autograder.feedback.diagnosis import predictions
from autograder.testing import oracles
from autograder.testing.calls import Call
from autograder.testing.oracles import F64, additive, causal_blocked, padding_blocked


def randn(seed, *shape, dtype=F64, scale=1.0):
    return oracles.randn(shape, torch.Generator().manual_seed(seed), dtype, scale)


def _blocked(seed, *shape):
    """Random bool mask (True = blocked) that leaves key 0 open in every row."""
    return oracles.random_blocked(shape, torch.Generator().manual_seed(seed))


def mhsa_state(d, prefix="", seed=10, bias=True) -> dict:
    return oracles.mhsa_state(d, oracles.seeded_draws(seed), prefix, bias)


def block_state(d, d_ff, seed=20) -> dict:
    return oracles.block_state(d, d_ff, oracles.seeded_draws(seed))


def mhsa_call(x, d=8, h=2, **fields) -> Call:
    kwargs = fields.pop("kwargs", {})
    init = {"d_model": d, "num_heads": h} | fields.pop("init", {})
    return Call("MultiHeadSelfAttention", (x,), kwargs, init=init, state=fields.pop("state", mhsa_state(d)),
                dtype=x.dtype, **fields)


BLOCK_INIT = {"d_model": 8, "num_heads": 2, "d_ff": 16, "layer_norm_eps": 1e-3}


def block_call(x, init=None, **fields) -> Call:
    init = BLOCK_INIT | (init or {})
    state = fields.pop("state", None) or block_state(init["d_model"], init["d_ff"])
    return Call("TransformerBlock", (x,), fields.pop("kwargs", {}), init=init, state=state, dtype=x.dtype, **fields)


def _sdpa_probes(fresh=0):
    q, k, v = randn(fresh + 1, 2, 3, 4), randn(fresh + 2, 2, 5, 4), randn(fresh + 3, 2, 5, 2)
    q4, k4, v4 = randn(fresh + 4, 2, 2, 3, 4), randn(fresh + 5, 2, 2, 5, 4), randn(fresh + 6, 2, 2, 5, 3)
    half = tuple(t.to(torch.float16) for t in (q, k, v))
    sdpa = "scaled_dot_product_attention"
    return {
        "sdpa plain": Call(sdpa, (q, k, v)),
        # Lq == Lk: scores computed the wrong way round (k q^T) give values here instead of an error
        "sdpa square": Call(sdpa, (q4[0], k4[0, :, :3], v4[0, :, :3]), {"attn_mask": _blocked(fresh + 12, 3, 3)}),
        "sdpa bool mask": Call(sdpa, (q, k, v), {"attn_mask": _blocked(fresh + 7, 3, 5)}),
        "sdpa additive mask": Call(sdpa, (q, k, v), {"attn_mask": additive(_blocked(fresh + 8, 2, 3, 5), F64)}),
        "sdpa 4-D": Call(sdpa, (q4, k4, v4), {"attn_mask": _blocked(fresh + 9, 2, 2, 3, 5)}),
        "sdpa float32": Call(sdpa, tuple(t.float() for t in (q, k, v)), {"attn_mask": _blocked(fresh + 7, 3, 5)}),
        "sdpa half": Call(sdpa, half, {"attn_mask": _blocked(fresh + 7, 3, 5)}),
        "sdpa large": Call(sdpa, (q * 40, k * 40, v)),
        "sdpa grad": Call(sdpa, (q4, k4, v4), {"attn_mask": _blocked(fresh + 9, 2, 2, 3, 5)},
                          grad_outputs=(randn(fresh + 10, 2, 2, 3, 3), randn(fresh + 11, 2, 2, 3, 5))),
    }


def _heads_probes(fresh=0):
    return {
        "split": Call("split_heads", (randn(fresh + 1, 2, 3, 6), 2)),
        "split three heads": Call("split_heads", (randn(fresh + 2, 2, 4, 6), 3)),
        "split size one": Call("split_heads", (randn(fresh + 3, 1, 1, 4), 4)),
        "merge": Call("merge_heads", (randn(fresh + 4, 2, 2, 3, 3),)),
        "merge size one": Call("merge_heads", (randn(fresh + 5, 1, 1, 1, 2),)),
    }


def _masks_probes(fresh=0):
    float32_mask = additive(_blocked(fresh + 3, 3, 4), torch.float32)
    return {
        "to_additive bool": Call("to_additive_mask", (_blocked(fresh + 1, 3, 4), F64)),
        "to_additive float": Call("to_additive_mask", (float32_mask, F64)),
        "causal": Call("causal_mask", (4,), {"dtype": F64}),
        "causal default": Call("causal_mask", (3,)),
        "padding list": Call("padding_mask", ([2, 4, 1],)),
        "padding tensor": Call("padding_mask", (torch.tensor([2, 4, 1]), 6)),
        "merge both": Call("merge_masks", (_blocked(fresh + 4, 4, 4), padding_blocked([2, 4], 4), F64)),
        "merge padding": Call("merge_masks", (None, additive(padding_blocked([3, 1], 4), torch.float32), F64)),
        "merge per batch": Call("merge_masks", (additive(_blocked(fresh + 5, 2, 1, 4, 4), torch.float32), None, F64)),
    }


def _mhsa_probes(fresh=0):
    x = randn(fresh + 1, 2, 4, 8)
    state = mhsa_state(8, seed=10 + fresh)

    def probe(x, **fields):
        return mhsa_call(x, state=state, **fields)

    padding = padding_blocked([2, 4], 4)
    causal_padding = {"attn_mask": causal_blocked(4), "key_padding_mask": padding, "need_weights": True}
    return {
        "mhsa plain": probe(x, kwargs={"need_weights": True}),
        "mhsa attn mask": probe(x, kwargs={"attn_mask": _blocked(fresh + 2, 4, 4), "need_weights": True}),
        "mhsa key padding": probe(x, kwargs={"key_padding_mask": padding, "need_weights": True}),
        "mhsa causal + padding": probe(x, kwargs=causal_padding),
        "mhsa four heads": probe(x, h=4, kwargs={"need_weights": True}),
        "mhsa batch of one": probe(x[:1], kwargs={"need_weights": True}),
        "mhsa large": probe(x * 40),
        "mhsa grad": probe(x, kwargs={"attn_mask": causal_blocked(4)}, grad_outputs=(randn(fresh + 3, 2, 4, 8),)),
    }


def _block_probes(fresh=0):
    x = randn(fresh + 1, 2, 4, 8)
    state = block_state(8, 16, seed=20 + fresh)

    def probe(x, init=None, **fields):
        return block_call(x, init, state=state, **fields)

    masks = {"attn_mask": causal_blocked(4), "key_padding_mask": padding_blocked([2, 4], 4)}
    return {
        "block post-LN": probe(x),
        "block pre-LN gelu": probe(x, {"norm_first": True, "activation": "gelu"}),
        "block masks": probe(x, kwargs=masks),
        "block pre-LN masks": probe(x, {"norm_first": True}, kwargs=masks),
        "block four heads causal": probe(x, {"num_heads": 4}, kwargs={"attn_mask": causal_blocked(4)}),
        "block batch of one": probe(x[:1]),
        "block large": probe(x * 40),
        "block grad": probe(x, {"norm_first": True}, kwargs=masks, grad_outputs=(randn(fresh + 3, 2, 4, 8),)),
    }


def build_probes(fresh: int = 0) -> dict:
    """part -> {key: Call}; `fresh` shifts every seed, for the same probes on other values."""
    return {"sdpa": _sdpa_probes(fresh), "heads": _heads_probes(fresh), "masks": _masks_probes(fresh),
            "mhsa": _mhsa_probes(fresh), "block": _block_probes(fresh)}


PROBES = build_probes()
# The same probes on values the diagnosis never sees: what a named mistake must also reproduce
# there (tools/heldout.py measures the diagnosis against them).
FRESH_PROBES = build_probes(fresh=1000)


@dataclass
class Observed:
    output: object = None
    input_grads: dict = field(default_factory=dict)
    param_grads: dict = field(default_factory=dict)
    mutated: list = field(default_factory=list)
    attributes: dict = field(default_factory=dict)
    raised: str = ""      # exception type name when the call raised
    message: str = ""


class Session:
    """The submission behind a Backend, called at most once per distinct probe, and what known mistakes
    predict for the same calls: `predict(call, knobs)`, by default the shipped table (predictions.py),
    which raises predictions.Unpredicted for a call it lacks."""

    def __init__(self, backend, probes=PROBES, predict=None):
        self.backend, self.probes = backend, probes
        self._predict = predict or predictions.shipped()
        self._seen, self._predicted = {}, {}

    def predicted(self, call: Call, knobs) -> dict:
        """What a solution with `knobs` returns for `call`, looked up once (the call kept alive, so that
        its id stays its own)."""
        if (id(call), knobs) not in self._predicted:
            self._predicted[id(call), knobs] = call, self._predict(call, knobs)
        return self._predicted[id(call), knobs][1]

    def observe(self, key: str, call: Call) -> Observed:
        if key not in self._seen:
            self._seen[key] = self._run(call)
        return self._seen[key]

    def _run(self, call: Call) -> Observed:
        try:
            outcome = self.backend.run(call)
        except Exception as err:  # noqa: BLE001 - whatever the submission raised is an observation
            return Observed(raised=type(err).__name__, message=str(err)[:500])
        return Observed(outcome.output, outcome.input_grads, outcome.param_grads, outcome.mutated, outcome.attributes)
