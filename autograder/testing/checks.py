"""Checks that both test suites make on what a call did, with the messages students read.

Values are compared with autograder.testing.compare; the expected values come from autograder.testing.oracles.
"""
import ast
import functools

import torch

from autograder.core import errors, paths
from autograder.testing.calls import Call
from autograder.testing.compare import Mismatch, expect


def constructed(call: Call) -> str:
    """How a constructor call reads in a message: `Name(arg=value, ...)`."""
    return f"{call.target}({', '.join(f'{k}={v!r}' for k, v in (call.init or {}).items())})"


@functools.cache
def contract_parameters() -> dict:
    """name -> the positional parameters of each top-level function of the handout's mhsa.py, and of each
    class's forward() (self left out), so that a message names the argument a submission changed. Read
    from the reference where it is (the grader's), else from the stubs, whose signatures are the
    reference's (a student's release)."""
    source = next((p for p in (paths.REFERENCE, paths.ASSIGNMENT) if p.is_file()), None)
    if source is None:
        return {}
    found = {}
    for node in ast.parse(source.read_text()).body:
        if isinstance(node, ast.FunctionDef):
            found[node.name] = _positional(node)
        elif isinstance(node, ast.ClassDef):
            forward = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None)
            if forward is not None:
                found[node.name] = _positional(forward)[1:]
    return found


def _positional(function: ast.FunctionDef) -> tuple:
    return tuple(a.arg for a in (*function.args.posonlyargs, *function.args.args))


def expect_untouched(outcome, call: Call) -> None:
    """No function may change its arguments in place."""
    __tracebackhide__ = True  # failures point at the test and at the submission, not at this helper
    names = argument_names(call, outcome.mutated)
    expect(not outcome.mutated,
           f"{call.signature()} modified its argument{'s' if len(names) > 1 else ''} {', '.join(names)} in place.",
           hint="no function may change its arguments: build new tensors with out-of-place operations "
                "(x = x + y, masked_fill, x / s) instead of in-place ones (x += y, masked_fill_, x /= s, [...] =).")


def argument_names(call: Call, keys) -> list:
    """The executor names positional arguments arg0, arg1, ...; say which parameter each one is."""
    positional = contract_parameters().get(call.target, ())
    names = []
    for key in keys:
        index = int(key[3:]) if key.startswith("arg") and key[3:].isdigit() else None
        if index is None:
            names.append(f"`{key}`")
        elif index < len(positional):
            names.append(f"`{positional[index]}`")
        else:
            names.append(f"argument {index + 1}")
    return names


def expect_raises(impl, call: Call, exc_type, hint: str) -> None:
    """The call must raise `exc_type`. NotImplementedError and the grader's own findings (timeouts,
    crashes, forbidden APIs) propagate as they are; any other exception is the wrong kind of error."""
    __tracebackhide__ = True  # failures point at the test and at the submission, not at this helper
    what = constructed(call) if call.construct_only else call.signature()
    try:
        impl.run(call)
    except exc_type:
        return
    except (NotImplementedError, Mismatch):
        raise
    except errors.SubmissionError as err:
        if not isinstance(err, errors.SubmissionRaised):
            raise
        wrong = err
    except Exception as err:  # noqa: BLE001 - whatever the submission raised, reported as such
        wrong = err
    else:
        raise Mismatch(f"{what} returned normally; it should raise {exc_type.__name__}.", hint=hint)
    if isinstance(wrong, AssertionError):
        hint = ("use `raise ValueError(...)`, not `assert`: asserts are removed under `python -O` and "
                "are the wrong type of error for bad arguments.")
    raise Mismatch(f"{what} raised {type(wrong).__name__}, but the contract asks for {exc_type.__name__}.",
                   detail=str(wrong).strip(), hint=hint) from None


def expect_tuple(output, n: int, call: Call, hint: str = "") -> tuple:
    """A function that returns n values must return a tuple (or list) of n."""
    __tracebackhide__ = True  # failures point at the test and at the submission, not at this helper
    expect(isinstance(output, (tuple, list)) and len(output) == n,
           f"{call.signature()} must return {n} values, got {_describe(output)}.", hint=hint)
    return tuple(output)


def _describe(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"a single tensor of shape {tuple(value.shape)}"
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)}"
    return type(value).__name__


BLOCKED_HINT = ("blocked positions must get -inf added before the softmax, so that exp(-inf) = 0 exactly; a "
                "large negative number (-1e9) or masking after the softmax is not the same. For boolean masks "
                "True means blocked.")


def expect_zero_where(weights, blocked, what: str, hint: str = BLOCKED_HINT) -> None:
    """Attention weights (..., Lq, Lk) exactly 0.0 where `blocked` (broadcastable bool) is True: a
    blocked key gets no attention at all, not just a little."""
    __tracebackhide__ = True  # failures point at the test and at the submission, not at this helper
    blocked = blocked.expand_as(weights)
    leaks = blocked & (weights.detach() != 0)
    if leaks.any():
        first = tuple(int(i) for i in leaks.nonzero()[0])
        raise Mismatch(f"{what}: {int(leaks.sum())} of {int(blocked.sum())} blocked positions are not exactly 0 "
                       f"(first at index {first}: {weights[first].item()!r}).", hint=hint)
