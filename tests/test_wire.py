"""The grader/worker message format: data only, every size checked, nothing trusted."""
import os
import time

import pytest
import torch

from autograder.isolation.guest import wire


def roundtrip(obj):
    return wire.decode(wire.encode(obj))


def test_plain_values_and_tensors_survive_the_trip():
    x = torch.randn(2, 3, dtype=torch.float64)
    sent = {"x": x, "n": 3, "f": 0.5, "s": "hi", "none": None, "flag": True, "pair": (1, [2, 3]),
            "dtype": torch.bfloat16, "device": torch.device("cpu"), "empty": torch.empty(0, 4),
            "ints": torch.arange(5), "mask": torch.tensor([True, False])}
    got = roundtrip(sent)
    assert torch.equal(got["x"], x) and got["x"].dtype == torch.float64
    assert got["pair"] == (1, [2, 3]) and isinstance(got["pair"], tuple)
    assert got["dtype"] is torch.bfloat16 and got["device"] == torch.device("cpu")
    assert got["empty"].shape == (0, 4) and torch.equal(got["ints"], torch.arange(5))
    assert [got[k] for k in ("n", "f", "s", "none", "flag")] == [3, 0.5, "hi", None, True]


def test_a_non_contiguous_tensor_arrives_with_its_values():
    x = torch.randn(3, 4).t()
    assert torch.equal(roundtrip(x), x)


def test_a_tensor_subclass_arrives_as_unsupported_however_it_lies():
    class Liar(torch.Tensor):
        __class__ = property(lambda self: torch.Tensor)

        def __eq__(self, other):
            return True

    got = roundtrip(torch.zeros(2).as_subclass(Liar))
    assert isinstance(got, wire.Unsupported) and "tensor subclass (" in got.what
    assert type(got) is not torch.Tensor


def test_other_objects_arrive_as_unsupported_markers():
    got = roundtrip({"f": len, "obj": object()})
    assert isinstance(got["f"], wire.Unsupported) and isinstance(got["obj"], wire.Unsupported)


def test_a_meta_tensor_keeps_its_shape_dtype_and_device():
    got = roundtrip(torch.empty(3, 4, dtype=torch.float16, device="meta"))
    assert got.device.type == "meta" and got.shape == (3, 4) and got.dtype == torch.float16


def header(obj, blobs=b""):
    import json

    text = json.dumps(obj).encode()
    return wire._LENGTH.pack(len(text)) + text + blobs


@pytest.mark.parametrize("message, complaint", [
    (b"\x01", "truncated"),
    (header({"$tensor": 0, "dtype": "float32", "shape": [4], "device": "cpu", "nbytes": 16}, b"\0" * 8),
     "past the end"),
    (header({"$tensor": 0, "dtype": "float32", "shape": [4], "device": "cpu", "nbytes": 8}, b"\0" * 8),
     "header says"),
    (header({"$tensor": 0, "dtype": "object", "shape": [1], "device": "cpu", "nbytes": 8}), "bad tensor"),
    (header({"$tensor": 0, "dtype": "float32", "shape": [-1], "device": "cpu", "nbytes": 0}), "bad tensor"),
    (header({"$dtype": "torch.float32"}), "unknown dtype"),
    (header({"$pickle": "gASV"}), "unexpected value"),
    (header({"$meta": [2], "dtype": "nope"}), "bad meta"),
    (header({"$tensor": 0, "dtype": "float32", "shape": [1], "device": "nowhere:0", "nbytes": 4}, b"\0" * 4),
     "unknown device"),
])
def test_malformed_messages_are_refused(message, complaint):
    with pytest.raises(wire.WireError, match=complaint):
        wire.decode(message)


def test_frames_carry_their_length_and_refuse_oversized_ones():
    r, w = os.pipe()
    try:
        wire.write_frame(w, b"payload")
        assert wire.read_frame(r, time.monotonic() + 1) == b"payload"
        os.write(w, wire._LENGTH.pack(wire.MAX_FRAME_BYTES + 1))
        with pytest.raises(wire.WireError, match="over the"):
            wire.read_frame(r, time.monotonic() + 1)
    finally:
        os.close(r)
        os.close(w)


def test_reading_times_out_on_silence_and_reports_a_closed_writer():
    r, w = os.pipe()
    with pytest.raises(TimeoutError):
        wire.read_frame(r, time.monotonic() + 0.1)
    os.write(w, b"\x05")
    os.close(w)
    with pytest.raises(EOFError):
        wire.read_frame(r, time.monotonic() + 1)
    os.close(r)


@pytest.mark.parametrize("header", [
    b'{"$tensor": 0, "dtype": "float32", "shape": [1e999], "nbytes": 4}', b"[" * 100000, b'{"$dict": [[1, 2, 3]]}',
    b'{"$dict": 5}', b'{"$tuple": {"a": 1}}', b'{"$tensor": 0, "dtype": "float32", "shape": [4294967296, 4294967296], '
    b'"nbytes": 0}', b'{"$device": 5}', b'{"$meta": [1e308], "dtype": "float32"}', b'{"$meta": 3, "dtype": "float32"}',
    b'{"$tensor": 0, "dtype": "float32", "shape": [2], "nbytes": 8, "order": [5]}', b'{"$dict": [["k"]]}',
    b'{"$tensor": 0, "dtype": "float32", "shape": [1], "nbytes": 4, "device": "cuda:99"}',
])
def test_every_malformed_header_is_a_wire_error(header):
    """Only WireError ever leaves decode: a reader that stops the sender on it never leaks one."""
    message = wire._LENGTH.pack(len(header)) + header + b"\0" * 8
    with pytest.raises(wire.WireError):
        wire.decode(message)


def test_a_header_longer_than_its_message_is_refused():
    with pytest.raises(wire.WireError, match="does not fit"):
        wire.decode(wire._LENGTH.pack(1 << 40) + b"{}")


def test_a_frame_over_the_callers_limit_is_refused_before_it_is_read():
    r, w = os.pipe()
    try:
        os.write(w, wire._LENGTH.pack(2000))
        with pytest.raises(wire.WireError, match="over the 1000 byte limit"):
            wire.read_frame(r, time.monotonic() + 1, max_bytes=1000)
    finally:
        os.close(r)
        os.close(w)


def test_writing_to_a_reader_that_never_reads_times_out():
    r, w = os.pipe()
    os.set_blocking(w, False)
    started = time.monotonic()
    try:
        with pytest.raises(TimeoutError):
            wire.write_frame(w, b"x" * (4 << 20), time.monotonic() + 0.5)
    finally:
        os.close(r)
        os.close(w)
    assert time.monotonic() - started < 5
