"""Supervisor of one worker: every process the worker started dies when the worker does.

When the worker ends, or the grader lets go of it, every process the worker started dies too,
whatever session or process group it moved itself to.

Started by autograder.isolation.host.worker as `python -I reaper.py LIFELINE_FD [--remove DIR] -- COMMAND...`; it
removes DIR (the worker's folder) once everything is dead, so a folder outlives neither the worker
nor a grader killed with SIGKILL. It runs COMMAND
(the worker, or bubblewrap around it) as its child and never runs student code itself. On Linux it
makes itself a child subreaper, so a descendant orphaned by a double fork is re-parented here rather
than to init, where nothing could find it again; killing children until none are left then kills
every descendant. The grader holds the other end of the lifeline pipe: closing it (or the grader
dying, which closes it too) means "stop everything now". The reaper exits the way the worker did
(its exit status, or the same signal), so the grader can still tell a segfault from a sys.exit.
The worker template (template_main.py) runs the same supervision, `supervise`, around each child.
"""
import ctypes
import os
import resource
import select
import shutil
import signal
import sys

PR_SET_CHILD_SUBREAPER = 36


def main():
    lifeline, split = int(sys.argv[1]), sys.argv.index("--")
    command, options = sys.argv[split + 1:], sys.argv[2:split]
    remove = options[options.index("--remove") + 1] if "--remove" in options else None

    def run_command():
        os.close(lifeline)
        os.execv(command[0], command)

    exit_like(supervise(lifeline, run_command, remove))


def supervise(lifeline, start, remove=None, keep=()):
    """Runs `start()` in a child (it must not return: it execs or exits) and waits for that child to
    end or for the lifeline to close; then kills every remaining descendant, removes the folder
    `remove`, and returns the child's wait status. Descriptors other than the lifeline and `keep` are
    closed once the child is started: the worker's pipes must read EOF when it is gone. Also run by
    the worker template (template_main.py) for each child it forks."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # mirroring a SIGSEGV must not dump a core
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # only there to wake select through wake_w
    worker = os.fork()
    if worker == 0:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in (wake_r, wake_w):
            os.close(fd)
        start()
        os._exit(1)  # `start` must not return
    close_other_fds(keep=(lifeline, wake_r, wake_w, *keep))
    status = None
    while status is None:
        ready = select.select([lifeline, wake_r], [], [])[0]
        if lifeline in ready:
            os.kill(worker, signal.SIGKILL)
            status = os.waitpid(worker, 0)[1]
            break
        os.read(wake_r, 512)
        status = reap(worker)
    kill_children()
    if remove:
        shutil.rmtree(remove, ignore_errors=True)
    return status


def close_other_fds(keep):
    """Closes every descriptor above stderr but those in `keep`."""
    low = 3
    for fd in sorted(fd for fd in keep if fd >= low):  # closerange(3, 0) would close them all
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1 << 16)


def reap(worker):
    """Collects exited children; the worker's wait status once it has exited, else None."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return None
        if pid == 0:
            return None
        if pid == worker:
            return status


def kill_children():
    """SIGKILL every child until none is left: a killed child's own children are re-parented here."""
    while children := list(_children()):
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in children:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


def _children():
    me = os.getpid()
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me:  # stat field 4: parent pid
            yield int(entry)


def exit_like(status):
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


if __name__ == "__main__":
    main()
