"""Time spent ready to run but without a core, from Linux's scheduler statistics (/proc/.../schedstat).

On a shared CPU machine the grader's clock around a request mostly measures other tenants: the
worker's thread sat on the run queue while someone else's process ran (for longer the longer its
call), and the grader's own thread waited to wake up after the reply. Both are read here by the
grader, the worker's from outside it, so that the grader's clock stays the one clock student code
cannot touch. Without scheduler statistics (not Linux) nothing is subtracted.
"""
from pathlib import Path

from autograder.isolation.host.worker import TOKEN_VAR


def queued_seconds(path: str) -> float | None:
    """The run-queue time a schedstat file reports ("on-cpu-ns run-queue-ns timeslices"), or None."""
    try:
        return int(Path(path).read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


def worker_thread(token: str, script: str) -> str | None:
    """The schedstat file of the worker's main thread: the process that carries the worker's token and
    runs `script` as `python -I -u SCRIPT` (the reaper and bubblewrap carry the token as well)."""
    marker = f"{TOKEN_VAR}={token}".encode()
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if len(argv) > 3 and argv[1:3] == [b"-I", b"-u"] and argv[3].endswith(script.encode()) \
                    and marker in (entry / "environ").read_bytes().split(b"\0"):
                return str(entry / "schedstat")
        except OSError:
            continue
    return None


class RunQueueClock:
    """Seconds the grader's calling thread and the worker's main thread have waited for a core. The two
    waits may overlap (both ready, other tenants running), so the sum can exceed the time lost: it is
    subtracted only where that errs towards the student (the out-of-band check), never from the
    round trip that bounds what the worker's clocks may claim."""

    def __init__(self, worker_schedstat: str | None):
        self.paths = ["/proc/thread-self/schedstat", *([worker_schedstat] if worker_schedstat else [])]

    def read(self) -> float:
        return sum(queued_seconds(path) or 0.0 for path in self.paths)
