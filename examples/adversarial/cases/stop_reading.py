# Say "ready" on the worker's behalf, then never read a request: a grader that writes a large
# request blocks in the write unless writes have a deadline.
import json
import os
import struct
import sys
import time

_header = json.dumps({"$dict": [["status", "ready"]]}).encode()
_message = struct.pack("<Q", len(_header)) + _header
os.write(int(sys.argv[2]), struct.pack("<Q", len(_message)) + _message)
time.sleep(3600)
