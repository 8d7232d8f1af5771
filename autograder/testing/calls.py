"""What a test asks of a submission (Call) and what comes back (Outcome), as plain data.

Tests never touch the student's objects: they describe a call, a backend carries it out in-process
or in the worker, and the test compares the Outcome with values it computed itself.
"""
from dataclasses import dataclass, field, fields
from typing import Any

import torch


@dataclass(frozen=True)
class Call:
    target: str                      # a function or class name of the contract
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    init: dict | None = None         # constructor arguments: target is a class, args go to forward
    state: dict | None = None        # state_dict loaded with strict=True after construction
    dtype: torch.dtype | None = None  # module.to(dtype) before the state is loaded
    training: bool = False
    seed: int = 0                    # the CPU generator seeded right before the call (dropout masks)
    grad_outputs: Any = None         # backward with these; Outcome then carries the gradients
    construct_only: bool = False     # build the module and describe it, no forward
    stand_ins: str = ""              # source of correct versions run in place of the student's (autograder/record/carry_forward.py)

    def to_wire(self) -> dict:
        """The call as a dict of its fields, holding the test's own objects: the worker receives
        bytes, and the in-process backend deep-copies it before the submission sees it."""
        wire = {f.name: getattr(self, f.name) for f in fields(self)}
        return wire | {"args": list(self.args)}

    def signature(self) -> str:
        """How the call reads in a failure message: names, shapes and flags, never values."""
        parts = [_short(a) for a in self.args] + [f"{k}={_short(v)}" for k, v in self.kwargs.items()]
        call = f"{self.target}({', '.join(parts)})"
        if self.init is None:
            return call
        init = ", ".join(f"{k}={v!r}" for k, v in self.init.items())
        mode = "train" if self.training else "eval"
        dtype = f", {str(self.dtype).removeprefix('torch.')}" if self.dtype else ""
        return f"{self.target}({init}) in {mode} mode{dtype}, forward({', '.join(parts)})"


@dataclass
class Outcome:
    output: Any
    input_grads: dict = field(default_factory=dict)
    param_grads: dict = field(default_factory=dict)
    attributes: dict = field(default_factory=dict)
    mutated: list = field(default_factory=list)
    forbidden: list = field(default_factory=list)
    monitor_silent: list = field(default_factory=list)  # why the forbidden-API record cannot be vouched for


def _short(value) -> str:
    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).removeprefix("torch.")
        return f"{dtype}{tuple(value.shape)}"
    if isinstance(value, torch.dtype):
        return str(value)
    if isinstance(value, (list, tuple)) and len(value) > 6:
        return f"{type(value).__name__} of {len(value)}"
    return repr(value)
