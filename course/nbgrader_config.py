"""nbgrader configuration of the MHSA course (docs/nbgrader.md).

The course root is the folder of this file, wherever the repository is checked out. nbgrader reads
nbgrader_config.py from the current directory: run nbgrader commands from this folder.
"""
import sys
from pathlib import Path

COURSE = Path(__file__).resolve().parent
REPO = COURSE.parent
# mhsa_nbgrader/ sits next to this file; the autograder package one level up (a copy of the course
# elsewhere needs the repository on PYTHONPATH).
sys.path[:0] = [str(COURSE)] + ([str(REPO)] if (REPO / "autograder").is_dir() else [])

from mhsa_nbgrader import feedback, sandbox  # noqa: E402

c = get_config()  # noqa: F821 - nbgrader defines get_config when it loads this file

c.CourseDirectory.root = str(COURSE)
c.CourseDirectory.course_id = "mhsa"

# nbgrader's default exchange, named here because the kernel must not see it either (it holds
# every student's submission): change it here if you use another.
c.Exchange.root = "/srv/nbgrader/exchange"

# The student's kernel: sandboxed where bubblewrap works (mhsa_nbgrader/sandbox.py), without the
# course folder and the exchange; a cell may run for 2 minutes (the first imports torch).
c.Autograde.autograde_preprocessors = sandbox.autograde_preprocessors()
c.SandboxedKernelManager.hidden = [str(COURSE), c.Exchange.root]
c.Execute.timeout = 120

# nbgrader gives 0 to a test cell with any output on stderr. PyTorch's warnings (a deprecation, a
# fast path not taken) go there from correct code, so stderr made only of warnings is dropped: the
# tests themselves fail by raising, never by writing to stderr.
c.IgnorePattern.enabled = True
c.IgnorePattern.pattern = r"\A(?:[^\n]*:\d+: \w*Warning: [^\n]*\n(?:  [^\n]*\n)*)+\Z"

# Feedback shows neither hidden tests nor the tracebacks that would quote them (mhsa_nbgrader/feedback.py).
c.GenerateFeedback.preprocessors = feedback.preprocessors()
