"""The environment of a command typed on a fresh machine: the system's PATH and nothing installed
by hand. Tests that run a user's command (nbgrader, `python -m autograder`) run it with this, so
that a tool found only through the caller's PATH fails here as it would for a new user."""
import os

ENV = {"HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8",
       "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
