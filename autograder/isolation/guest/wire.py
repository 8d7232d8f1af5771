"""A data-only message format between the grader and the worker: a JSON header, then raw bytes.

Reading a message never runs code (unlike pickle): tensors are rebuilt as plain torch.Tensor from
bytes whose size is checked against the header, and only JSON types, tuples, dicts, dtypes and
devices exist besides them. Frames are length-prefixed so that a stream of them fits in a pipe.
"""
import json
import os
import select
import struct
import time

import torch

DTYPES = {
    name: getattr(torch, name)
    for name in ("float16", "bfloat16", "float32", "float64", "complex64", "complex128",
                 "int8", "int16", "int32", "int64", "uint8", "bool")
}
# The most one frame may hold, whatever the call; each reply is held to far less, from what the call
# sent (autograder.isolation.host.worker.reply_limit). A frame is read whole into memory, then copied once.
MAX_FRAME_BYTES = 256 << 20
MAX_HEADER_BYTES = 16 << 20
_LENGTH = struct.Struct("<Q")


class WireError(ValueError):
    """A message that breaks the format: never trusted, never partially used."""


def encode(obj) -> bytes:
    blobs = []

    def enc(x):
        if x is None or isinstance(x, (bool, int, float, str)):
            return x
        if isinstance(x, torch.Tensor):
            if type(x) is not torch.Tensor:
                return {"$subclass": type(x).__qualname__}
            if x.device.type == "meta":  # no data to send; shape, dtype and device still tell
                return {"$meta": list(x.shape), "dtype": str(x.dtype).removeprefix("torch.")}
            t = x.detach().to("cpu")
            # Bytes go in the tensor's memory order, so a transposed (non-contiguous) argument
            # arrives transposed: tests of non-contiguous inputs mean the same in the worker.
            order = sorted(range(t.dim()), key=lambda d: -t.stride(d))
            in_order = t if order == sorted(order) else t.permute(order)
            raw = in_order.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
            blobs.append(raw)
            dtype = str(t.dtype).removeprefix("torch.")
            spec = {"$tensor": len(blobs) - 1, "dtype": dtype, "shape": list(t.shape),
                    "device": str(x.device), "nbytes": len(raw)}
            return spec | ({"order": order} if order != sorted(order) else {})
        if isinstance(x, tuple):
            return {"$tuple": [enc(i) for i in x]}
        if isinstance(x, list):
            return [enc(i) for i in x]
        if isinstance(x, dict):
            return {"$dict": [[str(k), enc(v)] for k, v in x.items()]}
        if isinstance(x, torch.dtype):
            return {"$dtype": str(x).removeprefix("torch.")}
        if isinstance(x, torch.device):
            return {"$device": str(x)}
        return {"$unsupported": type(x).__qualname__}

    header = json.dumps(enc(obj)).encode()
    return _LENGTH.pack(len(header)) + header + b"".join(blobs)


def decode(data: bytes):
    """The value `data` encodes. Any failure at all is a WireError: a reader that stops the sender
    on WireError must never meet another exception type from a malformed message."""
    try:
        return _decode(data)
    except WireError:
        raise
    except Exception as err:  # noqa: BLE001 - deep nesting, odd types, sizes torch refuses ...
        raise WireError(f"unreadable message ({type(err).__name__}: {str(err)[:100]})") from None


def _decode(data: bytes):
    if len(data) < _LENGTH.size:
        raise WireError("truncated message")
    (header_len,) = _LENGTH.unpack_from(data)
    if header_len > min(len(data) - _LENGTH.size, MAX_HEADER_BYTES):
        raise WireError(f"header of {header_len} bytes does not fit the message")
    body = memoryview(data)[_LENGTH.size + header_len:]
    try:
        header = json.loads(bytes(data[_LENGTH.size:_LENGTH.size + header_len]))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise WireError(f"unreadable header: {err}") from None
    offsets = []

    def tensor(spec):
        dtype = DTYPES.get(spec.get("dtype"))
        shape = spec.get("shape")
        nbytes = spec.get("nbytes")
        if dtype is None or not isinstance(shape, list) or not all(isinstance(n, int) and n >= 0 for n in shape):
            raise WireError(f"bad tensor header {spec!r}")
        numel = 1
        for n in shape:
            numel *= n
        itemsize = dtype.itemsize
        if nbytes != numel * itemsize:
            raise WireError(f"tensor header says {nbytes} bytes for shape {shape} of {dtype}")
        start = offsets[-1] if offsets else 0
        if start + nbytes > len(body):
            raise WireError("tensor bytes run past the end of the message")
        offsets.append(start + nbytes)
        if numel == 0:
            return torch.empty(shape, dtype=dtype)
        order = spec.get("order", list(range(len(shape))))
        if not (isinstance(order, list) and all(type(d) is int for d in order)
                and sorted(order) == list(range(len(shape)))):
            raise WireError(f"bad dimension order {order!r:.80}")
        raw = torch.frombuffer(bytearray(body[start:start + nbytes]), dtype=torch.uint8).view(dtype)
        if order == sorted(order):  # memory order is the dimensions' order: no permutation to undo
            return raw.reshape(shape)
        inverse = sorted(range(len(order)), key=order.__getitem__)
        return raw.reshape([shape[d] for d in order]).permute(inverse)

    def dec(x):
        if x is None or isinstance(x, (bool, int, float, str)):
            return x
        if isinstance(x, list):
            return [dec(i) for i in x]
        if not isinstance(x, dict) or len(x) == 0:
            raise WireError(f"unexpected value {x!r:.80}")
        if "$tensor" in x:
            device = str(x.get("device", "cpu"))
            return tensor(x) if device == "cpu" else tensor(x).to(_known_device(device))
        if "$meta" in x:
            return meta_tensor(x)
        if "$tuple" in x and isinstance(x["$tuple"], list):
            return tuple(dec(i) for i in x["$tuple"])
        if "$dict" in x and isinstance(x["$dict"], list):
            return {str(k): dec(v) for k, v in x["$dict"]}
        if "$dtype" in x:
            if x["$dtype"] not in DTYPES:
                raise WireError(f"unknown dtype {x['$dtype']!r:.40}")
            return DTYPES[x["$dtype"]]
        if "$device" in x:
            return torch.device(str(x["$device"]))
        if "$subclass" in x:
            return Unsupported(f"a tensor subclass ({x['$subclass']!s:.60})")
        if "$unsupported" in x:
            return Unsupported(f"a {x['$unsupported']!s:.60}")
        raise WireError(f"unexpected value {x!r:.80}")

    return dec(header)


def meta_tensor(spec):
    dtype, shape = DTYPES.get(spec.get("dtype")), spec.get("$meta")
    if dtype is None or not isinstance(shape, list) or not all(isinstance(n, int) and n >= 0 for n in shape):
        raise WireError(f"bad meta tensor header {spec!r:.80}")
    return torch.empty(shape, dtype=dtype, device="meta")


class Unsupported:
    """Stands in for a value the sender could not send as data; the grader reports it as wrong."""

    __slots__ = ("what",)

    def __init__(self, what):
        self.what = what

    def __repr__(self):
        return f"<{self.what}>"


def _known_device(name):
    """Tensors come back on the device they were on, which must exist in this process too."""
    try:
        device = torch.device(name)
        torch.empty(0, device=device)
    except (RuntimeError, ValueError):
        raise WireError(f"tensor on unknown device {name!r:.40}") from None
    return device


def write_frame(fd: int, payload: bytes, deadline: float | None = None) -> None:
    """Writes one frame; TimeoutError past `deadline` (time.monotonic). The grader's end of a pipe is
    non-blocking, so a reader that stops reading costs the deadline, never a blocked write."""
    view = memoryview(_LENGTH.pack(len(payload)) + payload)
    while view:
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            raise TimeoutError
        if not select.select([], [fd], [], remaining)[1]:
            raise TimeoutError
        try:
            written = os.write(fd, view[:1 << 16])  # at most a pipe's buffer: never blocks long
        except BlockingIOError:
            continue
        view = view[written:]


def read_frame(fd: int, deadline: float | None = None, max_bytes: int = MAX_FRAME_BYTES) -> bytes:
    """One frame from fd; TimeoutError past `deadline` (time.monotonic), EOFError if the writer died,
    WireError if it announces more than `max_bytes` (capped at MAX_FRAME_BYTES)."""
    (length,) = _LENGTH.unpack(_read_exact(fd, _LENGTH.size, deadline))
    limit = min(max_bytes, MAX_FRAME_BYTES)
    if length > limit:
        raise WireError(f"frame of {length} bytes is over the {limit} byte limit")
    return _read_exact(fd, length, deadline)


def _read_exact(fd, n, deadline):
    chunks, missing = [], n
    while missing:
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                raise TimeoutError
        chunk = os.read(fd, min(missing, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        missing -= len(chunk)
    return b"".join(chunks)
