"""Writes and checks the diagnosis's table of predictions (autograder/feedback/diagnosis/predictions.py).

Every (call, knobs) the catalog may compare a submission with (catalog.prediction_needs) is carried
out by model.py and stored. The file is generated like the stubs and the notebooks (`release
--write`, `release --check`), but it is checked by value: floating-point results may differ in
their last bits between machines, so a committed table is stale only when a prediction is missing,
extra, or differs by more than a tenth of the catalog's own tolerance (MACHINE_SHARE).
"""
import json
from pathlib import Path

import torch

from autograder.feedback.diagnosis import catalog, predictions
from autograder.feedback.diagnosis.model import simulate
from autograder.core.paths import REPO

RELATIVE = predictions.TABLE.relative_to(REPO).as_posix()
# A prediction is stale when it moved by more than this share of the tolerance the catalog compares a
# submission's result with (catalog.tolerance). Another CPU's kernels (AVX-512 against AVX2, say) move a
# float32 result by a few units in its last place, about 1e-7 of it: far below this, and a table that
# moved that little names the same mistakes. A model change moves predictions by the mistake's size.
MACHINE_SHARE = 0.1


def build() -> tuple:
    """(index, tensors): each needed prediction encoded, its tensors stored once by content."""
    index, tensors = {}, {}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # thousands of tiny operations: threads only wait for each other
    try:
        for call, knobs in catalog.prediction_needs():
            key = predictions.entry_key(call, knobs)
            if key not in index:
                index[key] = predictions.encode(simulate(call, knobs), tensors)
    finally:
        torch.set_num_threads(threads)
    return dict(sorted(index.items())), tensors


def write(path: Path = predictions.TABLE) -> None:
    from safetensors.torch import save_file

    index, tensors = build()
    metadata = {"format": str(predictions.FORMAT), "index": json.dumps(index, sort_keys=True, separators=(",", ":"))}
    save_file(dict(sorted(tensors.items())), str(path), metadata=metadata)


def stale(path: Path = predictions.TABLE) -> bool:
    """Whether the committed table would predict anything else than model.py does now."""
    if not path.is_file():
        return True
    try:
        table = predictions.Table(path)
    except Exception:  # noqa: BLE001 - a table that cannot be read is stale
        return True
    index, tensors = build()
    if set(table.keys()) != set(index):
        return True
    return any(not _close(table.entry(key), predictions.decode(data, tensors)) for key, data in index.items())


def _close(a, b) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.shape != b.shape or a.dtype != b.dtype:
            return False
        if not a.is_floating_point():
            return torch.equal(a, b)
        rtol, atol = (bound * MACHINE_SHARE for bound in catalog.tolerance(b.dtype))
        return bool(torch.isclose(a.double(), b.double(), rtol=rtol, atol=atol, equal_nan=True).all())
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(map(_close, a, b))
    return a == b
