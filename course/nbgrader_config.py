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

from autograder.core.paths import put_environment_first  # noqa: E402
from mhsa_nbgrader import feedback, sandbox, stubs  # noqa: E402

# `.venv/bin/nbgrader` without an activated environment: the gradebook starts `alembic` by name.
put_environment_first()

c = get_config()  # noqa: F821 - nbgrader defines get_config when it loads this file

c.CourseDirectory.root = str(COURSE)
c.CourseDirectory.course_id = "mhsa"

# nbgrader's default exchange, named here because the kernel must not see it either (it holds
# every student's submission): change it here if you use another.
c.Exchange.root = "/srv/nbgrader/exchange"

# Each stub in the student's notebook names its function and the handout's section, as
# assignment/mhsa.py's do, instead of nbgrader's bare `raise NotImplementedError()` (mhsa_nbgrader/stubs.py).
c.GenerateAssignment.preprocessors = stubs.preprocessors()

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

# Feedback shows neither hidden tests nor the tracebacks that would quote them, says why a cell's
# score was replaced by its isolated score and each part's likely mistake from the isolated grade, and
# shows every score with two decimals (mhsa_nbgrader/feedback.py).
c.GenerateFeedback.preprocessors = feedback.preprocessors()
c.IsolatedScoreNotes.course = str(COURSE)
c.HTMLExporter.filters = feedback.template_filters()

# `nbgrader zip_collect mhsa` for an LMS download (docs/nbgrader.md): put the zip or the files in
# downloaded/mhsa/archive/. File names as Canvas writes them: NAME_[LATE_]USERID_SUBMISSIONID_FILE,
# where FILE is what the student uploaded, perhaps renamed by their browser or by Canvas
# ("mhsa (1).ipynb", "mhsa-2.ipynb"): every notebook whose name starts with mhsa is collected as
# mhsa.ipynb of student USERID. zip_collect matches the regular expression against the whole path.
c.FileNameCollectorPlugin.named_regexp = (
    r".*/[^/_]+_(?:LATE_)?(?P<student_id>\d+)_\d+_(?P<file_id>mhsa)[^/]*\.ipynb$")
