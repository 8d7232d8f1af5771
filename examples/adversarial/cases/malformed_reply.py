# Crafted frames on the worker's reply pipe before its own first message: a header whose length
# runs past the message, deep nesting, a tensor of absurd shape.
import os
import struct
import sys

_BAD = [b'{"$tensor": 0, "dtype": "float32", "shape": [1e999], "nbytes": 4}', b"[" * 100000,
        b'{"$dict": [[1, 2, 3]]}', b'{"$tensor": 0, "dtype": "float32", "shape": [4294967296, 4294967296], "nbytes": 0}']
_reply_fd = int(sys.argv[2])
for _header in _BAD:
    _message = struct.pack("<Q", len(_header) + 1000) + _header
    os.write(_reply_fd, struct.pack("<Q", len(_message)) + _message)
