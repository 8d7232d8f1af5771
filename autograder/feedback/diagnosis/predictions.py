"""What each known mistake computes on the diagnosis's fixed calls, read from a data file.

The catalog recognises a mistake by comparing a submission's results with what a solution holding
that mistake returns on the same calls. Those results come from compact implementations of the
assignment (model.py), which are solutions too; so model.py stays with the instructor, and what
ships, to students and to graders alike, is its results on the fixed calls: predictions.safetensors,
written by `python -m autograder release --write` (autograder/authoring/predictions.py). Both sides
read the same table, so `check` names a mistake exactly as the graded result does.

A call is found by a fingerprint of everything it holds (its tensors' bytes included): a call the
table lacks, or inputs drawn differently by another torch, is Unpredicted, and the catalog then names
nothing rather than guess.
"""
import functools
import hashlib
import json
from pathlib import Path

import torch

from autograder.testing.calls import Call

TABLE = Path(__file__).with_name("predictions.safetensors")
FORMAT = 1


class Unpredicted(LookupError):
    """The table holds no prediction for this call and these knobs."""


def fingerprint(call: Call) -> str:
    """A digest of every field of `call`, tensors by dtype, shape and bytes."""
    digest = hashlib.sha256()
    _feed(digest, (call.target, call.args, call.kwargs, call.init, call.state, call.dtype, call.training,
                   call.seed, call.grad_outputs, call.construct_only, call.stand_ins))
    return digest.hexdigest()[:32]


def _feed(digest, value) -> None:
    if isinstance(value, torch.Tensor):
        flat = value.detach().cpu().contiguous().reshape(-1)
        digest.update(f"T{value.dtype}{tuple(value.shape)}".encode())
        digest.update(flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b"")
    elif isinstance(value, dict):
        digest.update(b"{")
        for key in sorted(value, key=str):
            _feed(digest, key)
            _feed(digest, value[key])
        digest.update(b"}")
    elif isinstance(value, (tuple, list)):
        digest.update(b"(" if isinstance(value, tuple) else b"[")
        for item in value:
            _feed(digest, item)
        digest.update(b")")
    else:
        digest.update(f"{type(value).__name__}:{value!r};".encode())


def knobs_key(knobs) -> str:
    """The knobs that differ from a correct solution's, as text: `scale='none'`; '' for a correct one."""
    default = type(knobs)()
    return ", ".join(f"{name}={value!r}" for name, value in sorted(vars(knobs).items())
                     if value != getattr(default, name))


def entry_key(call: Call, knobs) -> str:
    return f"{fingerprint(call)}|{knobs_key(knobs)}"


# ---------------------------------------------------------------- a prediction as data

def encode(prediction: dict, tensors: dict) -> dict:
    """`prediction` (simulate's dict) as JSON-able data; its tensors go to `tensors`, named by content."""
    def plain(value):
        if isinstance(value, torch.Tensor):
            value = value.detach().contiguous()
            digest = hashlib.sha256(f"{value.dtype}{tuple(value.shape)}".encode())
            digest.update(value.reshape(-1).view(torch.uint8).numpy().tobytes() if value.numel() else b"")
            name = digest.hexdigest()[:24]
            tensors[name] = value
            return {"tensor": name}
        if isinstance(value, dict):
            return {"dict": {str(k): plain(v) for k, v in value.items()}}
        if isinstance(value, (tuple, list)):
            return {"tuple": [plain(v) for v in value]}
        if value is None or isinstance(value, (bool, int, float, str)):
            return {"value": value}
        raise TypeError(f"a prediction holds a {type(value).__name__}")
    return {key: plain(value) for key, value in prediction.items()}


def decode(data: dict, tensors: dict) -> dict:
    def value_of(item):
        kind, value = next(iter(item.items()))
        if kind == "tensor":
            return tensors[value]
        if kind == "dict":
            return {k: value_of(v) for k, v in value.items()}
        if kind == "tuple":
            return tuple(value_of(v) for v in value)
        return value
    return {key: value_of(item) for key, item in data.items()}


class Table:
    """Predictions by (call, knobs), loaded once from a safetensors file (plain tensors and a JSON
    index: reading it runs nothing)."""

    def __init__(self, path: Path = TABLE):
        from safetensors.torch import load_file
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as handle:
            metadata = handle.metadata() or {}
        if int(metadata.get("format", 0)) != FORMAT:
            raise ValueError(f"{path.name}: format {metadata.get('format')}, expected {FORMAT}")
        self._index = json.loads(metadata["index"])
        self._tensors = load_file(str(path))
        self._decoded = {}

    def __len__(self) -> int:
        return len(self._index)

    def keys(self):
        return self._index.keys()

    def __call__(self, call: Call, knobs) -> dict:
        return self.entry(entry_key(call, knobs))

    def entry(self, key: str) -> dict:
        if key not in self._decoded:
            if key not in self._index:
                raise Unpredicted(key)
            self._decoded[key] = decode(self._index[key], self._tensors)
        return self._decoded[key]


@functools.cache
def shipped() -> Table:
    """The table that ships beside this module, read on first use."""
    return Table()
