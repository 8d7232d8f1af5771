# A fanotify permission mark on the whole filesystem of /tmp, never answered: every open there by
# any process (a sibling's results file, the grader's) would wait on this worker. fanotify needs
# CAP_SYS_ADMIN and is outside the syscall allowlist: refused, so the batch goes on.
import ctypes
import platform

_NUMBERS = {"x86_64": (300, 301), "aarch64": (262, 263)}[platform.machine()]
_FAN_CLASS_CONTENT, _FAN_MARK_ADD, _FAN_MARK_FILESYSTEM, _FAN_OPEN_PERM = 0x4, 0x1, 0x100, 0x10000
_libc = ctypes.CDLL(None, use_errno=True)
_group = _libc.syscall(_NUMBERS[0], _FAN_CLASS_CONTENT, 0)
if _group < 0:
    print(f"cheat: fanotify refused (errno {ctypes.get_errno()})")
else:
    _marked = _libc.syscall(_NUMBERS[1], _group, _FAN_MARK_ADD | _FAN_MARK_FILESYSTEM, _FAN_OPEN_PERM, -100, b"/tmp")
    print("cheat: fanotify mark held on /tmp" if _marked == 0 else "cheat: fanotify group, mark refused")
