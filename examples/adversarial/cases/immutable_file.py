# chattr +i on a file in the worker's folder (FS_IOC_SETFLAGS with FS_IMMUTABLE_FL): a file nobody
# but CAP_LINUX_IMMUTABLE could remove, left behind on the host. The capability is dropped.
import ctypes
import fcntl

_FS_IOC_GETFLAGS, _FS_IOC_SETFLAGS, _FS_IMMUTABLE_FL = 0x80086601, 0x40086602, 0x10
with open("stuck.bin", "wb") as _f:
    _f.write(b"\0" * (1 << 20))
    _flags = ctypes.c_long(0)
    try:
        fcntl.ioctl(_f.fileno(), _FS_IOC_GETFLAGS, _flags)
        _flags.value |= _FS_IMMUTABLE_FL
        fcntl.ioctl(_f.fileno(), _FS_IOC_SETFLAGS, _flags)
        print("cheat: stuck.bin is immutable")
    except OSError as err:
        print(f"cheat: chattr +i refused ({err.strerror})")
