# Leaves a process behind: a double fork and a new session, started through a route that Python's
# audit hooks do not see, with an empty environment, so that only a reaper can find it.
import os
import sys

import _posixsubprocess

_ORPHAN = ("import os, time\n"
           "if os.fork(): os._exit(0)\n"
           "os.setsid()\n"
           "if os.fork(): os._exit(0)\n"
           "time.sleep(120)\n")
_argv = [os.fsencode(sys.executable), b"-c", _ORPHAN.encode(), b"mhsa-adversarial-orphan"]
_errors_r, _errors_w = os.pipe()
_fixed = (_argv, [_argv[0]], True, (), None, [b"PATH=/usr/bin:/bin"], -1, -1, -1, -1, -1, -1,
          _errors_r, _errors_w, True, False, -1, -1, None, -1, -1, None)
try:  # the signature of this private function changes between Python versions
    _posixsubprocess.fork_exec(*_fixed, False)
except TypeError:
    _posixsubprocess.fork_exec(*_fixed)
