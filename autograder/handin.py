"""Reading a file a TA hands in without trusting it, and GradingError, which says grading is impossible.

Everything handed in is untrusted, the paths included: a file is read through one descriptor
opened without following a symbolic link at its last component, only if it is a regular file, and
only up to MAX_SUBMISSION_BYTES, so a link to the reference, to /proc/self/cwd/... or to /dev/zero
gets refused instead of copied. Loading a submission (autograder/submission.py), choosing the file of
a folder (route.py) and extracting a notebook (notebook.py) all read through here.
"""
import os
import stat
from pathlib import Path

MAX_SUBMISSION_BYTES = 4 << 20  # far above any real mhsa.py or notebook (the reference is ~20 KB)


class GradingError(Exception):
    """Grading itself is impossible (not the submission's fault): the CLI exits non-zero."""


def refuse_link(path: Path) -> None:
    """GradingError if `path` is a symbolic link: batch and Gradescope discovery call this on every
    entry they find, and `load` on what it is handed, so no link is ever graded."""
    if Path(path).is_symlink():
        raise GradingError(f"{path}: is a symbolic link, which is not graded: hand in the file itself")


def read_regular(path: Path) -> bytes:
    """The bytes of `path`, which must be a regular file (not a link, FIFO or device) of at most
    MAX_SUBMISSION_BYTES; checked on the open descriptor, so the file cannot be swapped in between."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        if Path(path).is_symlink():
            refuse_link(path)
        raise GradingError(f"{path}: cannot be read ({err.strerror})") from None
    with os.fdopen(fd, "rb") as stream:
        info = os.fstat(stream.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise GradingError(f"{path}: is not a regular file")
        if info.st_size > MAX_SUBMISSION_BYTES:
            raise GradingError(f"{path}: {info.st_size:,} bytes is over the {MAX_SUBMISSION_BYTES:,} byte limit")
        data = stream.read(MAX_SUBMISSION_BYTES + 1)
    if len(data) > MAX_SUBMISSION_BYTES:  # grew while being read
        raise GradingError(f"{path}: over the {MAX_SUBMISSION_BYTES:,} byte limit")
    return data
