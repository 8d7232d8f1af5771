"""Kernel-enforced limits the worker puts on itself before it imports the submission.

Applied in this order by worker_main, at both isolation levels (inside bubblewrap they stack with
its namespaces):
  landlock()   a filesystem allowlist (Linux 5.13+): read-only paths, one writable folder; anything
               else is refused by the kernel, from Python or from C. With Landlock ABI 6+ it also
               stops signals to processes outside the worker (the reaper, the grader).
  drop_root()  when running as root: setuid/setgid to an unprivileged user (nobody).
  seccomp()    a syscall filter: no sockets, no new processes (and no threads unless allowed), no
               ptrace or reading other processes' memory, no signals but to itself, no mounts or
               namespaces, no syscalls of another architecture.

Why ctypes rather than a binding: the Python bindings on PyPI are not maintained for this use
(`landlock` has only pre-releases, `pyseccomp` was last released in 2021 and needs libseccomp's
shared library on the host; libseccomp's own binding ships only with distributions). The three
Landlock syscalls and one prctl for a classic BPF program are small and stable kernel ABI.
Each function returns a line saying what it did (or why it could not), reported in the worker's
hello and in the results.
"""
import ctypes
import os
import platform
import struct

# Landlock (include/uapi/linux/landlock.h)
SYS_LANDLOCK = {"create_ruleset": 444, "add_rule": 445, "restrict_self": 446}  # same on every arch
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
SCOPE_SIGNAL = 2
FS = {"execute": 1 << 0, "write_file": 1 << 1, "read_file": 1 << 2, "read_dir": 1 << 3,
      "remove_dir": 1 << 4, "remove_file": 1 << 5, "make_char": 1 << 6, "make_dir": 1 << 7,
      "make_reg": 1 << 8, "make_sock": 1 << 9, "make_fifo": 1 << 10, "make_block": 1 << 11,
      "make_sym": 1 << 12, "refer": 1 << 13, "truncate": 1 << 14, "ioctl_dev": 1 << 15}
FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1, 5: (1 << 16) - 1}
FILE_ONLY = FS["execute"] | FS["write_file"] | FS["read_file"] | FS["truncate"] | FS["ioctl_dev"]
READ = FS["execute"] | FS["read_file"] | FS["read_dir"]
NET_BY_ABI = 3  # ABI 4+: TCP bind and connect, both handled (so both refused: no rule allows them)

PR_SET_NO_NEW_PRIVS = 38
PR_SET_DUMPABLE = 4
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_KILL_PROCESS = 0x80000000
CLONE_THREAD = 0x00010000
EPERM, ENOSYS = 1, 38

# Per architecture: the audit arch, then syscall numbers (asm/unistd_64.h; aarch64 uses the
# generic table and has no fork, vfork or kill-by-old-name variants).
ARCHES = {
    "x86_64": (0xC000003E, {
        "socket": 41, "socketpair": 53, "clone": 56, "fork": 57, "vfork": 58, "execve": 59, "kill": 62,
        "ptrace": 101, "tkill": 200, "tgkill": 234, "process_vm_readv": 310, "process_vm_writev": 311,
        "execveat": 322, "clone3": 435, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161,
        "unshare": 272, "setns": 308, "bpf": 321, "userfaultfd": 323, "perf_event_open": 298,
        "keyctl": 250, "add_key": 248, "request_key": 249, "io_uring_setup": 425,
        "open_by_handle_at": 304, "kexec_load": 246, "init_module": 175, "finit_module": 313,
        "pidfd_open": 434, "pidfd_send_signal": 424, "pidfd_getfd": 438, "process_madvise": 440,
        "kcmp": 312, "mknod": 133, "mknodat": 259}),
    "aarch64": (0xC00000B7, {
        "socket": 198, "socketpair": 199, "clone": 220, "execve": 221, "kill": 129, "ptrace": 117,
        "tkill": 130, "tgkill": 131, "process_vm_readv": 270, "process_vm_writev": 271, "execveat": 281,
        "clone3": 435, "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51, "unshare": 97,
        "setns": 268, "bpf": 280, "userfaultfd": 282, "perf_event_open": 241, "keyctl": 219,
        "add_key": 217, "request_key": 218, "io_uring_setup": 425, "open_by_handle_at": 265,
        "kexec_load": 104, "init_module": 105, "finit_module": 273, "pidfd_open": 434,
        "pidfd_send_signal": 424, "pidfd_getfd": 438, "process_madvise": 440, "kcmp": 272,
        "mknodat": 33}),
}
SIGNAL_SELF_ONLY = ("kill", "tgkill")  # allowed when the first argument is this process (abort())
ALWAYS_REFUSED = ("socket", "socketpair", "fork", "vfork", "execve", "execveat", "ptrace", "tkill",
                  "process_vm_readv", "process_vm_writev", "mount", "umount2", "pivot_root", "chroot",
                  "unshare", "setns", "bpf", "userfaultfd", "perf_event_open", "keyctl", "add_key",
                  "request_key", "io_uring_setup", "open_by_handle_at", "kexec_load", "init_module",
                  "finit_module", "pidfd_open", "pidfd_send_signal", "pidfd_getfd", "process_madvise",
                  "kcmp", "mknod", "mknodat")
NOBODY = 65534

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _syscall(number, *args):
    result = _libc.syscall(ctypes.c_long(number), *args)
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


def _no_new_privs():
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is missing or disabled."""
    try:
        return _syscall(SYS_LANDLOCK["create_ruleset"], None, ctypes.c_size_t(0),
                        ctypes.c_uint32(CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0


def landlock(read_paths, write_paths) -> str:
    """Everything not under `read_paths` (read, list, execute) or `write_paths` (anything) is refused."""
    abi = landlock_abi()
    if abi < 1:
        return "landlock: not available on this kernel"
    fs = FS_BY_ABI.get(abi, FS_BY_ABI[5])
    attr = struct.pack("<QQQ", fs, NET_BY_ABI if abi >= 4 else 0, SCOPE_SIGNAL if abi >= 6 else 0)
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    buffer = ctypes.create_string_buffer(attr[:size], size)
    ruleset = _syscall(SYS_LANDLOCK["create_ruleset"], buffer, ctypes.c_size_t(size), ctypes.c_uint32(0))
    try:
        for paths, access in ((read_paths, READ), (write_paths, fs)):
            for path in paths:
                _allow(ruleset, path, access & fs)
        _no_new_privs()
        _syscall(SYS_LANDLOCK["restrict_self"], ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)
    return f"landlock: ABI {abi}, filesystem allowlist" + (", signals to itself only" if abi >= 6 else "")


def _allow(ruleset, path, access):
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # not on this machine: nothing to allow
    try:
        if not os.path.isdir(path):
            access &= FILE_ONLY
        rule = ctypes.create_string_buffer(struct.pack("<Qi", access, fd), 12)
        _syscall(SYS_LANDLOCK["add_rule"], ctypes.c_int(ruleset), ctypes.c_int(RULE_PATH_BENEATH), rule,
                 ctypes.c_uint32(0))
    finally:
        os.close(fd)


def drop_root(needed) -> str:
    """As root, become `nobody` (the grader made the worker's folder its own); otherwise nothing to
    drop. Skipped, and said so, when `nobody` could not read the `needed` paths (a Python installed
    in root's home): the Landlock allowlist still confines the worker then."""
    if os.geteuid() != 0:
        return f"user: runs as uid {os.geteuid()}"
    closed = [p for p in needed if not _world_readable(p)]
    if closed:
        return f"user: stays root, nobody could not read {closed[0]}"
    try:
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
    except OSError as err:  # no CAP_SETUID (a user namespace without it): still no other rights
        return f"user: stays uid 0 without capabilities ({err.strerror})"
    _libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # keeps /proc/self readable by the worker itself
    return f"user: dropped root for uid {NOBODY}"


def _world_readable(path) -> bool:
    import stat

    path = os.path.realpath(path)
    try:
        if not os.stat(path).st_mode & stat.S_IROTH:
            return False
        while path != "/":
            path = os.path.dirname(path)
            if not os.stat(path).st_mode & stat.S_IXOTH:
                return False
    except OSError:
        return True  # absent: nothing to lose
    return True


def seccomp(allow_threads: bool = False) -> str:
    """Installs the syscall filter; calls refused by it fail with EPERM (clone3 with ENOSYS, so that
    the C library falls back to clone, whose flags the filter can read)."""
    arch = ARCHES.get(platform.machine())
    if arch is None:
        return f"seccomp: no syscall table for {platform.machine()}"
    audit_arch, numbers = arch
    program = _filter(audit_arch, numbers, os.getpid(), allow_threads)
    code = b"".join(struct.pack("<HBBI", *insn) for insn in program)
    filt = ctypes.create_string_buffer(code, len(code))

    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = Prog(len(program), ctypes.addressof(filt))
    _no_new_privs()
    if _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return "seccomp: no sockets, processes, ptrace or foreign signals" + ("" if allow_threads else ", no threads")


# Classic BPF: (code, jt, jf, k)
LD_W_ABS, JEQ_K, JSET_K, RET_K = 0x20, 0x15, 0x45, 0x06


def _filter(audit_arch, numbers, pid, allow_threads):
    deny, enosys = SECCOMP_RET_ERRNO | EPERM, SECCOMP_RET_ERRNO | ENOSYS
    prog = [(LD_W_ABS, 0, 0, 4), (JEQ_K, 1, 0, audit_arch), (RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS),
            (LD_W_ABS, 0, 0, 0)]
    if audit_arch == ARCHES["x86_64"][0]:  # the x32 ABI: the same calls under other numbers
        prog += [(0x35, 0, 1, 0x40000000), (RET_K, 0, 0, deny)]  # JGE_K
    # Each check: "if nr == N, jump to its handler"; handlers follow the list, in the same order.
    checks = [(numbers[n], [(RET_K, 0, 0, deny)]) for n in ALWAYS_REFUSED if n in numbers]
    checks.append((numbers["clone3"], [(RET_K, 0, 0, enosys)]))
    for name in SIGNAL_SELF_ONLY:
        if name in numbers:
            checks.append((numbers[name], [(LD_W_ABS, 0, 0, 16), (JEQ_K, 0, 1, pid),
                                           (RET_K, 0, 0, SECCOMP_RET_ALLOW), (RET_K, 0, 0, deny)]))
    clone = [(LD_W_ABS, 0, 0, 16), (JSET_K, 0, 1, CLONE_THREAD),
             (RET_K, 0, 0, SECCOMP_RET_ALLOW if allow_threads else deny), (RET_K, 0, 0, deny)]
    checks.append((numbers["clone"], clone))
    offset = 0
    for i, (number, handler) in enumerate(checks):
        # jump target relative to the next instruction: the remaining checks, the allow, earlier handlers
        prog.append((JEQ_K, (len(checks) - i - 1) + 1 + offset, 0, number))
        offset += len(handler)
    prog.append((RET_K, 0, 0, SECCOMP_RET_ALLOW))
    for _, handler in checks:
        prog += handler
    if any(jt > 255 for _, jt, _, _ in prog):
        raise ValueError("seccomp filter too long for classic BPF jumps")
    return prog
