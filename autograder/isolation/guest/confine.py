"""Kernel-enforced limits the worker puts on itself before it imports the submission.

Applied in this order by worker_main (inside bubblewrap they stack with its namespaces):
  scratch()     process level: the worker's folder becomes a size-limited tmpfs in a mount namespace
                of its own, so that the whole folder, not only each file, has a budget, and nothing
                written there outlives the worker.
  landlock()    a filesystem allowlist (Linux 5.13+): read-only paths, one writable folder; anything
                else is refused by the kernel, from Python or from C. With Landlock ABI 6+ it also
                stops signals to processes outside the worker (the reaper, the grader).
  drop_privileges()  every capability dropped (bounding, ambient, permitted, effective, inheritable),
                securebits locked so that uid 0 never regains them, no_new_privs; as root, also
                setuid to an unprivileged user (nobody) where nobody can read the Python installation.
  seccomp()     a syscall ALLOWLIST: what a CPU worker running Python, torch and numpy needs; every
                other call fails with an errno that names it, REFUSED_BASE + its number, which
                explain() turns back into "the sandbox refused the system call N (name)" (new variants
                glibc falls back from: ENOSYS). chmod and
                utime calls succeed without effect (IGNORED). Signals,
                resource limits, scheduling and priorities only on the worker itself; threads only
                where allowed; syscalls of another architecture kill the worker.

Why ctypes rather than a binding: the Python bindings on PyPI are not maintained for this use
(`landlock` has only pre-releases, `pyseccomp` was last released in 2021 and needs libseccomp's
shared library on the host; libseccomp's own binding ships only with distributions). The three
Landlock syscalls, a few prctls and one classic BPF program are small and stable kernel ABI.
Each function returns a line saying what it did (or why it could not), reported in the worker's
hello and in the results.
"""
import ctypes
import os
import platform
import re
import stat
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
PR_CAPBSET_DROP = 24
PR_SET_SECUREBITS = 28
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
# uid 0 gets no capabilities from exec or setuid (NOROOT), none kept across setuid (KEEP_CAPS off)
# or raised as ambient, each bit locked: the worker cannot win back what it dropped.
SECUREBITS = (1 << 0 | 1 << 1) | (1 << 3) | (1 << 5) | (1 << 6 | 1 << 7)
CAPABILITY_VERSION_3 = 0x20080522
CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 2, 4, 8, 1 << 14, 1 << 18
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_KILL_PROCESS = 0x80000000
CLONE_THREAD = 0x00010000
EPERM, EACCES, ENOSYS = 1, 13, 38
# A refused call fails with errno REFUSED_BASE + its number ("[Errno 3259] Unknown error 3259" from
# Python, "... Unknown error 3259" from torch's C++), so that whatever reports the failure names the
# call, and explain() names it in words. Every errno the kernel gives a program is below 600, and a
# filter's errno is capped at MAX_ERRNO, so 3000 + any syscall number is unambiguous. (A call whose
# number does not fit, none today, and an x32 call fail with plain EPERM.)
REFUSED_BASE, MAX_ERRNO = 3000, 4095
# What this process applied to itself, for explain(): the syscall names and whether threads are
# allowed (seccomp), the realpaths Landlock allows (landlock).
_APPLIED = {}
CAP_SYS_ADMIN = 21
SCHED_OTHER, SCHED_BATCH, SCHED_IDLE = 0, 3, 5  # what an unprivileged process may choose anyway
PRIO_PROCESS = 0
NOBODY = 65534

# The allowlist, by name. Files: everything a program does with paths and descriptors (Landlock
# decides which paths); memory; time; its own signals and threads; reading its own identity.
# (mlock: CUDA pins host memory; bounded by RLIMIT_MEMLOCK.)
# Absent on purpose (so refused): sockets, fork/exec, ptrace and reading others' memory, mount and
# the new mount API (fsopen ...), namespaces, chroot, reboot, kexec, modules, setting the clock
# (adjtimex, clock_adjtime, settimeofday), sethostname, syslog, fanotify, inotify, quotas, swap,
# keyrings, bpf, perf, io_uring, userfaultfd, SysV and POSIX IPC (objects that outlive the worker),
# memfd_create (memory that no limit counts until it is mapped),
# setuid and friends, chown, mknod, sync, personality, and any syscall newer than this list.
ALLOWED = (
    "read write readv writev pread64 pwrite64 preadv pwritev preadv2 pwritev2 open openat creat close "
    "close_range lseek stat fstat lstat newfstatat statx access faccessat faccessat2 getdents getdents64 "
    "getcwd chdir fchdir readlink readlinkat mkdir mkdirat rmdir unlink unlinkat rename renameat renameat2 "
    "link linkat symlink symlinkat truncate ftruncate fallocate fsync fdatasync flock "
    "fcntl dup dup2 dup3 pipe pipe2 ioctl statfs fstatfs umask fadvise64 readahead "
    "sendfile copy_file_range splice tee poll ppoll select pselect6 epoll_create epoll_create1 epoll_ctl "
    "epoll_wait epoll_pwait eventfd eventfd2 getxattr lgetxattr fgetxattr listxattr llistxattr flistxattr "
    "mmap munmap mprotect mremap madvise brk msync mincore mlock munlock mlock2 membarrier "
    "get_mempolicy set_mempolicy mbind exit exit_group getpid gettid getppid getuid geteuid getgid getegid getresuid "
    "getresgid getgroups getpgid getpgrp getsid set_tid_address set_robust_list rseq arch_prctl prctl futex "
    "futex_waitv sched_yield sched_getaffinity sched_getparam sched_getscheduler sched_get_priority_max "
    "sched_get_priority_min sched_getattr sched_rr_get_interval getpriority getrlimit setrlimit getrusage "
    "times sysinfo uname getrandom clock_gettime clock_getres clock_nanosleep nanosleep gettimeofday time "
    "getcpu alarm setitimer getitimer timer_create timer_settime timer_gettime timer_getoverrun "
    "timer_delete timerfd_create timerfd_settime timerfd_gettime rt_sigaction rt_sigprocmask rt_sigreturn "
    "rt_sigpending rt_sigsuspend rt_sigtimedwait sigaltstack restart_syscall pause wait4 waitid capget"
).split()
# Allowed only when the target (first argument) is the worker itself: a worker that stays uid 0, like
# any process of the grading user, could otherwise signal, limit or reschedule its siblings.
# kill(0) (its process group, the reaper's) and tkill (any thread id) are refused.
ON_ITSELF = ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")
ON_ITSELF_OR_ZERO = ("prlimit64", "sched_setaffinity", "sched_setparam")  # pid 0 means the caller
# A file's mode and times: these report success and change nothing. Landlock does not cover them, and
# a worker of the grading user (or, in the sandbox, of the user owning the worker template's folder)
# could otherwise make files it may only read, or the folder the next worker is made in, unreadable:
# chmod through a descriptor (os.chmod(..., dir_fd=...)) reaches any path the worker can name.
# Success rather than a refusal, so that library code that copies a mode or touches a file (shutil.copy,
# Path.touch) keeps working in an honest submission.
IGNORED = ("chmod", "fchmod", "fchmodat", "fchmodat2", "utime", "utimes", "utimensat", "futimesat")

# Syscall numbers of the names above (x86_64: asm/unistd_64.h; aarch64: the generic table, which
# has no legacy path calls such as open or stat), and each table's audit architecture.
ARCHES = {
    "x86_64": (0xC000003E, {
        "read": 0, "write": 1, "readv": 19, "writev": 20, "pread64": 17, "pwrite64": 18, "preadv": 295,
        "pwritev": 296, "preadv2": 327, "pwritev2": 328, "open": 2, "openat": 257, "creat": 85, "close":
        3, "close_range": 436, "lseek": 8, "stat": 4, "fstat": 5, "lstat": 6, "newfstatat": 262,
        "statx": 332, "access": 21, "faccessat": 269, "faccessat2": 439, "getdents": 78, "getdents64":
        217, "getcwd": 79, "chdir": 80, "fchdir": 81, "readlink": 89, "readlinkat": 267, "mkdir": 83,
        "mkdirat": 258, "rmdir": 84, "unlink": 87, "unlinkat": 263, "rename": 82, "renameat": 264,
        "renameat2": 316, "link": 86, "linkat": 265, "symlink": 88, "symlinkat": 266, "chmod": 90,
        "fchmod": 91, "fchmodat": 268, "fchmodat2": 452, "truncate": 76, "ftruncate": 77, "fallocate": 285, "fsync": 74,
        "fdatasync": 75, "flock": 73, "fcntl": 72, "dup": 32, "dup2": 33, "dup3": 292, "pipe": 22,
        "pipe2": 293, "ioctl": 16, "statfs": 137, "fstatfs": 138, "umask": 95, "utime": 132, "utimes":
        235, "utimensat": 280, "futimesat": 261, "fadvise64": 221, "readahead": 187, "sendfile": 40, "copy_file_range":
        326, "splice": 275, "tee": 276, "poll": 7, "ppoll": 271, "select": 23, "pselect6": 270,
        "epoll_create": 213, "epoll_create1": 291, "epoll_ctl": 233, "epoll_wait": 232, "epoll_pwait":
        281, "eventfd": 284, "eventfd2": 290, "getxattr": 191, "lgetxattr": 192, "fgetxattr": 193,
        "listxattr": 194, "llistxattr": 195, "flistxattr": 196, "memfd_create": 319, "mmap": 9,
        "munmap": 11, "mprotect": 10, "mremap": 25, "madvise": 28, "brk": 12, "msync": 26, "mincore":
        27, "membarrier": 324, "get_mempolicy": 239, "set_mempolicy": 238, "mbind": 237, "exit": 60,
        "exit_group": 231, "getpid": 39, "gettid": 186, "getppid": 110, "getuid": 102, "geteuid": 107,
        "getgid": 104, "getegid": 108, "getresuid": 118, "getresgid": 120, "getgroups": 115, "getpgid":
        121, "getpgrp": 111, "getsid": 124, "set_tid_address": 218, "set_robust_list": 273, "rseq": 334,
        "arch_prctl": 158, "prctl": 157, "futex": 202, "futex_waitv": 449, "sched_yield": 24,
        "sched_getaffinity": 204, "sched_getparam": 143, "sched_getscheduler": 145,
        "sched_get_priority_max": 146, "sched_get_priority_min": 147, "sched_getattr": 315,
        "sched_rr_get_interval": 148, "getpriority": 140, "getrlimit": 97, "setrlimit": 160,
        "getrusage": 98, "times": 100, "sysinfo": 99, "uname": 63, "getrandom": 318, "clock_gettime":
        228, "clock_getres": 229, "clock_nanosleep": 230, "nanosleep": 35, "gettimeofday": 96, "time":
        201, "getcpu": 309, "alarm": 37, "setitimer": 38, "getitimer": 36, "timer_create": 222,
        "timer_settime": 223, "timer_gettime": 224, "timer_getoverrun": 225, "timer_delete": 226,
        "timerfd_create": 283, "timerfd_settime": 286, "timerfd_gettime": 287, "rt_sigaction": 13,
        "rt_sigprocmask": 14, "rt_sigreturn": 15, "rt_sigpending": 127, "rt_sigsuspend": 130,
        "rt_sigtimedwait": 128, "sigaltstack": 131, "restart_syscall": 219, "pause": 34, "wait4": 61,
        "waitid": 247, "capget": 125, "kill": 62, "tgkill": 234, "rt_sigqueueinfo": 129,
        "rt_tgsigqueueinfo": 297, "prlimit64": 302, "sched_setaffinity": 203, "sched_setscheduler": 144,
        "sched_setparam": 142, "setpriority": 141, "clone": 56, "clone3": 435, "capset": 126, "mlock": 149, "munlock": 150, "mlock2": 325
    }),
    "aarch64": (0xC00000B7, {
        "read": 63, "write": 64, "readv": 65, "writev": 66, "pread64": 67, "pwrite64": 68, "preadv": 69,
        "pwritev": 70, "preadv2": 286, "pwritev2": 287, "openat": 56, "close": 57, "close_range": 436,
        "lseek": 62, "fstat": 80, "newfstatat": 79, "statx": 291, "faccessat": 48, "faccessat2": 439,
        "getdents64": 61, "getcwd": 17, "chdir": 49, "fchdir": 50, "readlinkat": 78, "mkdirat": 34,
        "unlinkat": 35, "renameat": 38, "renameat2": 276, "linkat": 37, "symlinkat": 36, "fchmod": 52,
        "fchmodat": 53, "fchmodat2": 452, "truncate": 45, "ftruncate": 46, "fallocate": 47, "fsync": 82, "fdatasync": 83,
        "flock": 32, "fcntl": 25, "dup": 23, "dup3": 24, "pipe2": 59, "ioctl": 29, "statfs": 43,
        "fstatfs": 44, "umask": 166, "utimensat": 88, "fadvise64": 223, "readahead": 213, "sendfile":
        71, "copy_file_range": 285, "splice": 76, "tee": 77, "ppoll": 73, "pselect6": 72,
        "epoll_create1": 20, "epoll_ctl": 21, "epoll_pwait": 22, "eventfd2": 19, "getxattr": 8,
        "lgetxattr": 9, "fgetxattr": 10, "listxattr": 11, "llistxattr": 12, "flistxattr": 13,
        "memfd_create": 279, "mmap": 222, "munmap": 215, "mprotect": 226, "mremap": 216, "madvise": 233,
        "brk": 214, "msync": 227, "mincore": 232, "membarrier": 283, "get_mempolicy": 236,
        "set_mempolicy": 237, "mbind": 235, "exit": 93, "exit_group": 94, "getpid": 172, "gettid": 178,
        "getppid": 173, "getuid": 174, "geteuid": 175, "getgid": 176, "getegid": 177, "getresuid": 148,
        "getresgid": 150, "getgroups": 158, "getpgid": 155, "getsid": 156, "set_tid_address": 96,
        "set_robust_list": 99, "rseq": 293, "prctl": 167, "futex": 98, "futex_waitv": 449,
        "sched_yield": 124, "sched_getaffinity": 123, "sched_getparam": 121, "sched_getscheduler": 120,
        "sched_get_priority_max": 125, "sched_get_priority_min": 126, "sched_getattr": 275,
        "sched_rr_get_interval": 127, "getpriority": 141, "getrlimit": 163, "setrlimit": 164,
        "getrusage": 165, "times": 153, "sysinfo": 179, "uname": 160, "getrandom": 278, "clock_gettime":
        113, "clock_getres": 114, "clock_nanosleep": 115, "nanosleep": 101, "gettimeofday": 169,
        "getcpu": 168, "setitimer": 103, "getitimer": 102, "timer_create": 107, "timer_settime": 110,
        "timer_gettime": 108, "timer_getoverrun": 109, "timer_delete": 111, "timerfd_create": 85,
        "timerfd_settime": 86, "timerfd_gettime": 87, "rt_sigaction": 134, "rt_sigprocmask": 135,
        "rt_sigreturn": 139, "rt_sigpending": 136, "rt_sigsuspend": 133, "rt_sigtimedwait": 137,
        "sigaltstack": 132, "restart_syscall": 128, "wait4": 260, "waitid": 95, "capget": 90, "kill":
        129, "tgkill": 131, "rt_sigqueueinfo": 138, "rt_tgsigqueueinfo": 240, "prlimit64": 261,
        "sched_setaffinity": 122, "sched_setscheduler": 119, "sched_setparam": 118, "setpriority": 140,
        "clone": 220, "clone3": 435, "capset": 91, "mlock": 228, "munlock": 229, "mlock2": 284
    }),
}


# Every syscall's name by its number, to name a refused one: x86_64's table (the kernel's
# arch/x86/entry/syscalls/syscall_64.tbl) and the generic one aarch64 uses (scripts/syscall.tbl), each
# from 0, then the numbers from 424 that every architecture shares; "-" where no call has the number.
# Up to Linux 7.0; a newer call is named by its number only.
NAMES_FROM_0 = {
    "x86_64": """
    read write open close stat fstat lstat poll lseek mmap mprotect munmap brk rt_sigaction rt_sigprocmask
    rt_sigreturn ioctl pread64 pwrite64 readv writev access pipe select sched_yield mremap msync mincore
    madvise shmget shmat shmctl dup dup2 pause nanosleep getitimer alarm setitimer getpid sendfile socket
    connect accept sendto recvfrom sendmsg recvmsg shutdown bind listen getsockname getpeername socketpair
    setsockopt getsockopt clone fork vfork execve exit wait4 kill uname semget semop semctl shmdt msgget
    msgsnd msgrcv msgctl fcntl flock fsync fdatasync truncate ftruncate getdents getcwd chdir fchdir rename
    mkdir rmdir creat link unlink symlink readlink chmod fchmod chown fchown lchown umask gettimeofday
    getrlimit getrusage sysinfo times ptrace getuid syslog getgid setuid setgid geteuid getegid setpgid
    getppid getpgrp setsid setreuid setregid getgroups setgroups setresuid getresuid setresgid getresgid
    getpgid setfsuid setfsgid getsid capget capset rt_sigpending rt_sigtimedwait rt_sigqueueinfo
    rt_sigsuspend sigaltstack utime mknod uselib personality ustat statfs fstatfs sysfs getpriority
    setpriority sched_setparam sched_getparam sched_setscheduler sched_getscheduler sched_get_priority_max
    sched_get_priority_min sched_rr_get_interval mlock munlock mlockall munlockall vhangup modify_ldt
    pivot_root _sysctl prctl arch_prctl adjtimex setrlimit chroot sync acct settimeofday mount umount2
    swapon swapoff reboot sethostname setdomainname iopl ioperm create_module init_module delete_module
    get_kernel_syms query_module quotactl nfsservctl getpmsg putpmsg afs_syscall tuxcall security gettid
    readahead setxattr lsetxattr fsetxattr getxattr lgetxattr fgetxattr listxattr llistxattr flistxattr
    removexattr lremovexattr fremovexattr tkill time futex sched_setaffinity sched_getaffinity
    set_thread_area io_setup io_destroy io_getevents io_submit io_cancel get_thread_area lookup_dcookie
    epoll_create epoll_ctl_old epoll_wait_old remap_file_pages getdents64 set_tid_address restart_syscall
    semtimedop fadvise64 timer_create timer_settime timer_gettime timer_getoverrun timer_delete
    clock_settime clock_gettime clock_getres clock_nanosleep exit_group epoll_wait epoll_ctl tgkill utimes
    vserver mbind set_mempolicy get_mempolicy mq_open mq_unlink mq_timedsend mq_timedreceive mq_notify
    mq_getsetattr kexec_load waitid add_key request_key keyctl ioprio_set ioprio_get inotify_init
    inotify_add_watch inotify_rm_watch migrate_pages openat mkdirat mknodat fchownat futimesat newfstatat
    unlinkat renameat linkat symlinkat readlinkat fchmodat faccessat pselect6 ppoll unshare set_robust_list
    get_robust_list splice tee sync_file_range vmsplice move_pages utimensat epoll_pwait signalfd
    timerfd_create eventfd fallocate timerfd_settime timerfd_gettime accept4 signalfd4 eventfd2
    epoll_create1 dup3 pipe2 inotify_init1 preadv pwritev rt_tgsigqueueinfo perf_event_open recvmmsg
    fanotify_init fanotify_mark prlimit64 name_to_handle_at open_by_handle_at clock_adjtime syncfs sendmmsg
    setns getcpu process_vm_readv process_vm_writev kcmp finit_module sched_setattr sched_getattr renameat2
    seccomp getrandom memfd_create kexec_file_load bpf execveat userfaultfd membarrier mlock2
    copy_file_range preadv2 pwritev2 pkey_mprotect pkey_alloc pkey_free statx io_pgetevents rseq uretprobe
    uprobe
    """,
    "aarch64": """
    io_setup io_destroy io_submit io_cancel io_getevents setxattr lsetxattr fsetxattr getxattr lgetxattr
    fgetxattr listxattr llistxattr flistxattr removexattr lremovexattr fremovexattr getcwd lookup_dcookie
    eventfd2 epoll_create1 epoll_ctl epoll_pwait dup dup3 fcntl inotify_init1 inotify_add_watch
    inotify_rm_watch ioctl ioprio_set ioprio_get flock mknodat mkdirat unlinkat symlinkat linkat renameat
    umount2 mount pivot_root nfsservctl statfs fstatfs truncate ftruncate fallocate faccessat chdir fchdir
    chroot fchmod fchmodat fchownat fchown openat close vhangup pipe2 quotactl getdents64 lseek read write
    readv writev pread64 pwrite64 preadv pwritev sendfile pselect6 ppoll signalfd4 vmsplice splice tee
    readlinkat newfstatat fstat sync fsync fdatasync sync_file_range2 timerfd_create timerfd_settime
    timerfd_gettime utimensat acct capget capset personality exit exit_group waitid set_tid_address unshare
    futex set_robust_list get_robust_list nanosleep getitimer setitimer kexec_load init_module delete_module
    timer_create timer_gettime timer_getoverrun timer_settime timer_delete clock_settime clock_gettime
    clock_getres clock_nanosleep syslog ptrace sched_setparam sched_setscheduler sched_getscheduler
    sched_getparam sched_setaffinity sched_getaffinity sched_yield sched_get_priority_max
    sched_get_priority_min sched_rr_get_interval restart_syscall kill tkill tgkill sigaltstack rt_sigsuspend
    rt_sigaction rt_sigprocmask rt_sigpending rt_sigtimedwait rt_sigqueueinfo rt_sigreturn setpriority
    getpriority reboot setregid setgid setreuid setuid setresuid getresuid setresgid getresgid setfsuid
    setfsgid times setpgid getpgid getsid setsid getgroups setgroups uname sethostname setdomainname
    getrlimit setrlimit getrusage umask prctl getcpu gettimeofday settimeofday adjtimex getpid getppid
    getuid geteuid getgid getegid gettid sysinfo mq_open mq_unlink mq_timedsend mq_timedreceive mq_notify
    mq_getsetattr msgget msgctl msgrcv msgsnd semget semctl semtimedop semop shmget shmctl shmat shmdt
    socket socketpair bind listen accept connect getsockname getpeername sendto recvfrom setsockopt
    getsockopt shutdown sendmsg recvmsg readahead brk munmap mremap add_key request_key keyctl clone execve
    mmap fadvise64 swapon swapoff mprotect msync mlock munlock mlockall munlockall mincore madvise
    remap_file_pages mbind get_mempolicy set_mempolicy migrate_pages move_pages rt_tgsigqueueinfo
    perf_event_open accept4 recvmmsg - - - - - - - - - - - - - - - - wait4 prlimit64
    fanotify_init fanotify_mark name_to_handle_at open_by_handle_at clock_adjtime syncfs setns sendmmsg
    process_vm_readv process_vm_writev kcmp finit_module sched_setattr sched_getattr renameat2 seccomp
    getrandom memfd_create bpf execveat userfaultfd membarrier mlock2 copy_file_range preadv2 pwritev2
    pkey_mprotect pkey_alloc pkey_free statx io_pgetevents rseq kexec_file_load
    """,
}
NAMES_FROM_424 = """
    pidfd_send_signal io_uring_setup io_uring_enter io_uring_register open_tree move_mount fsopen fsconfig
    fsmount fspick pidfd_open clone3 close_range openat2 pidfd_getfd faccessat2 process_madvise epoll_pwait2
    mount_setattr quotactl_fd landlock_create_ruleset landlock_add_rule landlock_restrict_self memfd_secret
    process_mrelease futex_waitv set_mempolicy_home_node cachestat fchmodat2 map_shadow_stack futex_wake
    futex_wait futex_requeue statmount listmount lsm_get_self_attr lsm_set_self_attr lsm_list_modules mseal
    setxattrat getxattrat listxattrat removexattrat open_tree_attr file_getattr file_setattr listns
    rseq_slice_yield
"""


def syscall_names(machine=None) -> dict:
    """{number: name} of every syscall of `machine` (this one's by default) that confine knows."""
    words = NAMES_FROM_0.get(machine or platform.machine())
    if words is None:
        return {}
    names = dict(enumerate(words.split())) | dict(enumerate(NAMES_FROM_424.split(), start=424))
    return {number: name for number, name in names.items() if name != "-"}


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _syscall(number, *args):
    result = _libc.syscall(ctypes.c_long(number), *args)
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


def _check(result):
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def _no_new_privs():
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))


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
    read_paths, write_paths = list(read_paths), list(write_paths)
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
    _APPLIED["landlock"] = tuple(os.path.realpath(p) for p in (*read_paths, *write_paths))
    return f"landlock: ABI {abi}, filesystem allowlist" + (", signals to itself only" if abi >= 6 else "")


# What the worker's own /proc entry shows of the machine rather than of the worker: the mount table
# (at the process level, the host's mounts: the paths of its other folders) and the network tables
# (the host's sockets, with their paths). A Landlock rule allows a whole hierarchy, so the entry's
# other files and folders are allowed one by one (task/: each thread's, which hold its mount table
# too), and not its links (root, cwd, exe: a rule would follow them; /proc/<pid>/root is /).
HOST_VIEWS = ("mountinfo", "mounts", "mountstats", "net", "task")


def own_proc_entries(pid) -> list:
    """The paths of /proc/<pid> and of its threads' entries that the worker may read: all but HOST_VIEWS."""
    folders = [f"/proc/{pid}", *(f"/proc/{pid}/task/{tid}" for tid in _names(f"/proc/{pid}/task"))]
    return [f"{folder}/{name}" for folder in folders for name in _names(folder)
            if name not in HOST_VIEWS and not os.path.islink(f"{folder}/{name}")]


def _names(folder) -> list:
    try:
        return sorted(os.listdir(folder))
    except OSError:
        return []


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


def worker_uid(needed, folder) -> int:
    """The user the worker will run as: as root, nobody, unless nobody could not read the `needed`
    paths (a Python installed in root's home) or reach the worker's own `folder` by its path (a
    temporary folder inside one only root may enter: code that asks tempfile for a folder, or torch
    for its caches, would find none); otherwise the user it already is."""
    if os.geteuid() == 0 and not _in_user_namespace() and not closed_to_nobody(needed, folder):
        return NOBODY
    return os.geteuid()


def closed_to_nobody(needed, folder) -> str:
    """Why nobody could not run this worker: a `needed` path it could not read, or a folder above
    `folder` it could not enter, in words; "" when it could."""
    unreadable = next((p for p in needed if not _world_readable(p)), None)
    if unreadable is not None:
        return f"nobody could not read {unreadable}"
    shut = next((parent for parent in _parents(os.path.realpath(folder))
                 if not os.stat(parent).st_mode & stat.S_IXOTH), None)
    return f"nobody could not enter {shut}, above its folder" if shut is not None else ""


def _in_user_namespace() -> bool:
    """Inside a user namespace (bubblewrap's, a rootless container's), where nobody may not be mapped."""
    try:
        with open("/proc/self/uid_map") as f:
            return f.read().split() != ["0", "0", "4294967295"]
    except OSError:
        return False


def scratch(folder, size_bytes, needed) -> str:
    """Replaces `folder` (the worker's own, holding the submission) with a tmpfs of `size_bytes` in a
    mount namespace only this worker has, owned by the user it will run as, its files copied in.
    Writes beyond the budget fail with ENOSPC whatever the number of files; the host's disk never
    sees them, and they vanish with the worker. Needs root, or a user namespace where root is not:
    without either, the folder stays on disk and only the per-file limit holds."""
    uid = worker_uid(needed, folder)
    gid = NOBODY if uid == NOBODY else os.getegid()
    files = {entry.name: (entry.stat().st_mode, _read(entry.path))
             for entry in os.scandir(folder) if entry.is_file(follow_symlinks=False)}
    try:
        enter_mount_namespace()
        _check(_libc.mount(b"none", b"/", None, ctypes.c_ulong(MS_REC | MS_PRIVATE), None))  # nothing reaches the host
        options = f"size={size_bytes},mode=0700,uid={uid},gid={gid}"
        _check(_libc.mount(b"tmpfs", os.fsencode(folder), b"tmpfs",
                           ctypes.c_ulong(MS_NOSUID | MS_NODEV | MS_NOEXEC), options.encode()))
    except OSError as err:
        if os.geteuid() == 0:  # on disk then: the folder must still be writable by the user it runs as
            for path in (folder, *(os.path.join(folder, name) for name in files)):
                os.chown(path, uid, gid)
        return f"scratch: per-file limit only, the folder stays on disk (no mount namespace: {err.strerror})"
    os.chdir(folder)  # the working directory still pointed at the folder under the mount
    for name, (mode, data) in files.items():
        path = os.path.join(folder, name)
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, stat.S_IMODE(mode))
        if os.geteuid() == 0:
            os.chown(path, uid, gid)
    return f"scratch: its folder is a {size_bytes >> 20} MB tmpfs of its own"


def _read(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def enter_mount_namespace():
    """Root: a new mount namespace. Anyone else, and root without CAP_SYS_ADMIN (a child of the
    worker template inside bubblewrap): a user namespace mapping only itself, with one."""
    if os.geteuid() == 0 and int(_capabilities().get("CapEff", "0"), 16) & (1 << CAP_SYS_ADMIN):
        _check(_libc.unshare(CLONE_NEWNS))
        return
    uid, gid = os.geteuid(), os.getegid()
    _check(_libc.unshare(CLONE_NEWUSER | CLONE_NEWNS))
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)


def drop_privileges(needed, folder) -> list:
    """Every capability dropped and locked away, and, as root, the user changed where it can be
    (worker_uid: `needed` are the paths it must read, `folder` its own).

    The bounding set and the securebits need CAP_SETPCAP: first. Then setuid to nobody (which
    clears the rest by itself); then capset to nothing, which also covers a worker that stays uid 0.
    no_new_privs: nothing the worker could exec (it cannot exec) would gain privileges either."""
    lines = []
    _check(_libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0))
    if _has_setpcap():
        cap = 0
        while _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0:  # EINVAL past the kernel's last one
            cap += 1
        _check(_libc.prctl(PR_SET_SECUREBITS, SECUREBITS, 0, 0, 0))
        locked = ", securebits locked"
    else:
        locked = ""  # nothing to drop from the bounding set that could ever be used
    lines.append(_change_user(needed, folder))
    header = (ctypes.c_uint32 * 2)(CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable (two words each): none
    _check(_libc.capset(header, data))
    _no_new_privs()
    left = _capabilities()
    if any(int(v, 16) for k, v in left.items() if k != "CapBnd"):
        raise OSError(EPERM, f"capabilities remain: {left}")
    bounding = "" if int(left.get("CapBnd", "0"), 16) == 0 else " (bounding set kept: no CAP_SETPCAP)"
    lines.append(f"capabilities: none{bounding}{locked}, no_new_privs")
    return lines


def _change_user(needed, folder) -> str:
    if os.geteuid() != 0:
        return f"user: runs as uid {os.geteuid()}"
    uid = worker_uid(needed, folder)
    if uid == 0 and _in_user_namespace():
        return "user: uid 0 of its own user namespace, without capabilities"
    if uid == 0:
        return f"user: stays uid 0, without capabilities ({closed_to_nobody(needed, folder)})"
    try:
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
    except OSError as err:  # no CAP_SETUID (a user namespace without it): no capabilities either
        return f"user: stays uid 0 without capabilities ({err.strerror})"
    _libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # keeps /proc/self readable by the worker itself
    return f"user: dropped root for uid {NOBODY}"


def _capabilities() -> dict:
    with open("/proc/self/status") as f:
        return {k: v.strip() for k, _, v in (line.partition(":") for line in f) if k.startswith("Cap")}


def _has_setpcap() -> bool:
    return bool(int(_capabilities().get("CapEff", "0"), 16) & (1 << 8))  # CAP_SETPCAP


def _world_readable(path) -> bool:
    path = os.path.realpath(path)
    try:
        return bool(os.stat(path).st_mode & stat.S_IROTH) and \
            all(os.stat(parent).st_mode & stat.S_IXOTH for parent in _parents(path))
    except OSError:
        return True  # absent: nothing to lose


def _parents(path) -> list:
    """The folders above the absolute `path`, up to the root."""
    found = []
    while path != "/":
        path = os.path.dirname(path)
        found.append(path)
    return found


def seccomp(allow_threads: bool = False) -> str:
    """Installs the allowlist; everything else fails with errno REFUSED_BASE + its number (clone3
    with ENOSYS, so that the C library falls back to clone, whose flags the filter can read)."""
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
    _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0))
    _APPLIED["seccomp"] = (syscall_names(), allow_threads)
    return (f"seccomp: an allowlist of {len([n for n in ALLOWED if n in numbers])} syscalls (a refused one "
            f"fails with errno {REFUSED_BASE} + its number); signals, limits and scheduling on itself only; "
            "file modes and times unchangeable" + ("" if allow_threads else "; no threads"))


UNKNOWN_ERROR = re.compile(r"Unknown error (\d+)")  # strerror's text for an errno it has no name for
NO_THREAD = "can't start new thread"  # Python's RuntimeError when the C library cannot start one


def refused_call(number) -> str:
    """The words for a call this worker's filter refused: "the sandbox refused the system call N (name)"."""
    names, _ = _APPLIED.get("seccomp", ({}, False))
    name = names.get(number)
    return f"the sandbox refused the system call {number}" + (f" ({name})" if name else "")


def explain(err, message: str) -> str:
    """`message`, the text of `err` (an exception raised in this worker), saying which refusal of the
    confinement caused it, where one did: a call the filter refused (its errno, also as strerror's
    "Unknown error N" inside torch's messages, or a thread that could not start), or a path outside
    Landlock's allowlist (EACCES). Unchanged otherwise, and outside a worker that confined itself.
    The words are a hint for the reader, not evidence: code can raise such an errno itself."""
    try:
        if "seccomp" in _APPLIED:
            message = UNKNOWN_ERROR.sub(lambda m: _call_words(int(m.group(1))) or m.group(0), message)
        notes = []
        for cause in _chain(err):
            words = _refusal_of(cause)
            if words and words not in message and words not in notes:
                notes.append(words)
        return message + "".join(f" ({words})" for words in notes)
    except Exception:  # noqa: BLE001 - a student's exception object may fail in any way when read
        return message


def _call_words(errno) -> str:
    number = errno - REFUSED_BASE
    return refused_call(number) if 0 <= number <= MAX_ERRNO - REFUSED_BASE else ""


def _chain(err, depth=8):
    """`err` and the exceptions it was raised from or during, nearest first."""
    seen = []
    while isinstance(err, BaseException) and len(seen) < depth and not any(err is s for s in seen):
        seen.append(err)
        err = err.__cause__ or err.__context__
    return seen


def _refusal_of(err) -> str:
    """The words for one exception's refusal by the confinement, or ""."""
    if "seccomp" in _APPLIED and isinstance(err, OSError) and isinstance(err.errno, int):
        words = _call_words(err.errno)
        if words:
            return words
    if "seccomp" in _APPLIED and not _APPLIED["seccomp"][1] and type(err) is RuntimeError \
            and str(err) == NO_THREAD:
        return refused_call(ARCHES.get(platform.machine(), (0, {}))[1].get("clone")) + ": no threads while grading"
    if "landlock" in _APPLIED and isinstance(err, OSError) and err.errno == EACCES:
        for path in (err.filename, err.filename2):
            if isinstance(path, (str, bytes)) and not _landlock_allows(path):
                return f"the sandbox refused access to {os.fsdecode(path)}"
    return ""


def _landlock_allows(path) -> bool:
    """Whether `path` lies under a path Landlock allows this worker (read or write)."""
    real = os.path.realpath(os.fsdecode(path))
    return any(real == root or real.startswith(root.rstrip(os.sep) + os.sep) for root in _APPLIED["landlock"])


# Classic BPF: (code, jt, jf, k)
LD_W_ABS, JEQ_K, JGE_K, JSET_K, RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
ALU_ADD_K, ALU_OR_K, RET_A = 0x04, 0x44, 0x16  # A += k, A |= k, return A


def _ret(action):
    return (RET_K, 0, 0, action)


def _arg(index):
    """Loads the low 32 bits of argument `index` (little-endian; pids and flags are 32-bit)."""
    return (LD_W_ABS, 0, 0, 16 + 8 * index)


def _one_of(values, then, otherwise):
    """With an argument loaded: `then` when it is one of `values`, else `otherwise` (the last two
    instructions: `otherwise` at len - 2, the jump target of a check that fails before it)."""
    code = [(JEQ_K, len(values) - i, 0, v) for i, v in enumerate(values)]
    return code + [otherwise, then]


def _filter(audit_arch, numbers, pid, allow_threads):
    """Loads the syscall number once; then, per allowed call, "if nr == N: its handler" where the
    handler always returns (most are a plain allow), so each check jumps only over its own handler."""
    allow, eperm, enosys = _ret(SECCOMP_RET_ALLOW), _ret(SECCOMP_RET_ERRNO | EPERM), _ret(SECCOMP_RET_ERRNO | ENOSYS)

    def deny(name):  # the errno that names the call (explain)
        return _ret(SECCOMP_RET_ERRNO | (REFUSED_BASE + numbers.get(name, 0)))

    handlers = {name: [allow] for name in ALLOWED} | {name: [_ret(SECCOMP_RET_ERRNO | 0)] for name in IGNORED}
    for name in ON_ITSELF:
        handlers[name] = [_arg(0), *_one_of([pid], allow, deny(name))]
    for name in ON_ITSELF_OR_ZERO:
        handlers[name] = [_arg(0), *_one_of([0, pid], allow, deny(name))]
    # Real-time and deadline policies are refused whatever the limits say (CAP_SYS_NICE is gone too).
    policy = [_arg(1), *_one_of([SCHED_OTHER, SCHED_BATCH, SCHED_IDLE], allow, deny("sched_setscheduler"))]
    handlers["sched_setscheduler"] = [_arg(0), (JEQ_K, 1, 0, 0), (JEQ_K, 0, len(policy) - 2, pid), *policy]
    target = [_arg(1), *_one_of([0, pid], allow, deny("setpriority"))]
    handlers["setpriority"] = [_arg(0), (JEQ_K, 0, len(target) - 2, PRIO_PROCESS), *target]
    handlers["clone"] = [_arg(0), (JSET_K, 0, 1, CLONE_THREAD), allow if allow_threads else deny("clone"),
                         deny("clone")]
    handlers["clone3"] = [enosys]
    prog = [(LD_W_ABS, 0, 0, 4), (JEQ_K, 1, 0, audit_arch), _ret(SECCOMP_RET_KILL_PROCESS), (LD_W_ABS, 0, 0, 0)]
    if audit_arch == ARCHES["x86_64"][0]:  # the x32 ABI: the same calls under other numbers
        prog += [(JGE_K, 0, 1, 0x40000000), eperm]
    for name, handler in handlers.items():
        if name in numbers:
            prog += [(JEQ_K, 0, len(handler), numbers[name]), *handler]
    # Any other call: the accumulator still holds its number (each handler above returns).
    prog += [(JGE_K, 0, 1, MAX_ERRNO - REFUSED_BASE + 1), eperm,
             (ALU_ADD_K, 0, 0, REFUSED_BASE), (ALU_OR_K, 0, 0, SECCOMP_RET_ERRNO), (RET_A, 0, 0, 0)]
    if len(prog) > 4096:
        raise ValueError("seccomp filter longer than the kernel accepts")
    return prog
