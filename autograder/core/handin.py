"""Reading a file a TA hands in without trusting it, and GradingError, which says grading is impossible.

Everything handed in is untrusted, the paths included: a file is read through one descriptor
opened without following a symbolic link at its last component, only if it is a regular file, and
only up to MAX_SUBMISSION_BYTES, so a link to the reference, to /proc/self/cwd/... or to /dev/zero
gets refused instead of copied. Loading a submission (autograder/intake/submission.py), choosing the file of
a folder (route.py) and extracting a notebook (notebook.py) all read through here.
"""
import os
import stat
from pathlib import Path

from autograder.core.errors import clean_name

MAX_SUBMISSION_BYTES = 4 << 20  # far above any real mhsa.py or notebook (the reference is ~20 KB)


class GradingError(Exception):
    """Grading itself is impossible (not the submission's fault): the CLI exits non-zero."""


def refuse_link(path: Path) -> None:
    """GradingError if `path` is a symbolic link: batch and Gradescope discovery call this on every
    entry they find, and `load` on what it is handed, so no link is ever graded."""
    if Path(path).is_symlink():
        raise GradingError(f"{clean_name(path)}: is a symbolic link, which is not graded: hand in the file itself")


def read_regular(path: Path, limit: int = MAX_SUBMISSION_BYTES) -> bytes:
    """The bytes of `path`, which must be a regular file (not a link, FIFO or device) of at most
    `limit` bytes; checked on the open descriptor, so the file cannot be swapped in between."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        if Path(path).is_symlink():
            refuse_link(path)
        raise GradingError(f"{clean_name(path)}: cannot be read ({err.strerror})") from None
    with os.fdopen(fd, "rb") as stream:
        info = os.fstat(stream.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise GradingError(f"{clean_name(path)}: is not a regular file")
        if info.st_size > limit:
            raise GradingError(f"{clean_name(path)}: {info.st_size:,} bytes is over the {limit:,} byte limit")
        data = stream.read(limit + 1)
    if len(data) > limit:  # grew while being read
        raise GradingError(f"{clean_name(path)}: over the {limit:,} byte limit")
    return data
