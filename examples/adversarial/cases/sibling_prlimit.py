# Lowers RLIMIT_CPU to one second on every other process it can reach by pid (sibling workers, the
# grader): with the same uid and no capabilities, only the syscall filter's "on itself only" stops it.
import ctypes
import os
import platform

_PRLIMIT64 = {"x86_64": 302, "aarch64": 261}[platform.machine()]
_RLIMIT_CPU = 0
_libc = ctypes.CDLL(None, use_errno=True)
_one_second = (ctypes.c_uint64 * 2)(1, 1)
_limited = [pid for pid in range(2, max(1 << 16, os.getpid() + 20000))
            if pid != os.getpid() and _libc.syscall(_PRLIMIT64, pid, _RLIMIT_CPU, _one_second, None) == 0]
print(f"cheat: RLIMIT_CPU set on {len(_limited)} other processes" if _limited else
      "cheat: no other process limited")
