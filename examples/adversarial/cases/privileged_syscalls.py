# The calls a worker that stays root (Python installed under root's home) used to be allowed, each
# made harmless in case it succeeds: reboot only switches Ctrl-Alt-Del off, adjtimex and
# clock_adjtime only read, sethostname sets the name it already has, syslog asks the buffer's size,
# fsopen only opens a context, SCHED_FIFO applies to the worker itself, rt_sigqueueinfo sends
# signal 0 (a permission check) to the reaper. Every one must be refused.
import ctypes
import os
import platform

_NUMBERS = {"x86_64": {"reboot": 169, "adjtimex": 159, "clock_adjtime": 305, "sethostname": 170, "syslog": 103,
                       "fsopen": 430, "rt_sigqueueinfo": 129},
            "aarch64": {"reboot": 142, "adjtimex": 171, "clock_adjtime": 266, "sethostname": 161, "syslog": 116,
                        "fsopen": 430, "rt_sigqueueinfo": 138}}[platform.machine()]
_libc = ctypes.CDLL(None, use_errno=True)
_timex = ctypes.create_string_buffer(512)  # struct timex, modes 0: a read
_siginfo = ctypes.create_string_buffer(128)
ctypes.memmove(_siginfo, (ctypes.c_int * 3)(0, 0, -1), 12)  # si_code SI_QUEUE
_name = os.uname().nodename.encode()
_ATTEMPTS = {
    "reboot": lambda: _libc.syscall(_NUMBERS["reboot"], 0xFEE1DEAD, 672274793, 0, None),  # CAD off
    "adjtimex": lambda: _libc.syscall(_NUMBERS["adjtimex"], _timex),
    "clock_adjtime": lambda: _libc.syscall(_NUMBERS["clock_adjtime"], 0, _timex),
    "sethostname": lambda: _libc.syscall(_NUMBERS["sethostname"], _name, len(_name)),
    "syslog": lambda: _libc.syscall(_NUMBERS["syslog"], 10, None, 0),
    "fsopen": lambda: _libc.syscall(_NUMBERS["fsopen"], b"tmpfs", 0),
    "SCHED_FIFO": lambda: os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1)),
    "rt_sigqueueinfo": lambda: _libc.syscall(_NUMBERS["rt_sigqueueinfo"], os.getppid(), 0, _siginfo),
}
_allowed = []
for _what, _attempt in _ATTEMPTS.items():
    try:
        if _attempt() < 0:  # the C library's -1: refused
            continue
    except (OSError, TypeError):  # os.sched_setscheduler raises, and returns None when it works
        continue
    _allowed.append(_what)
print("cheat: allowed", _allowed if _allowed else "nothing: every privileged call refused")
