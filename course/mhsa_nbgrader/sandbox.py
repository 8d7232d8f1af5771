"""`nbgrader autograde` runs the student's kernel in bubblewrap where bubblewrap works (detected at
run time, not assumed; AUTOGRADER_NO_SANDBOX=1 turns it off).

Inside the sandbox the kernel has no network and its own PID namespace (it dies with nbgrader). It
sees the system read-only, minus /tmp, the home directories (the Python installation is mounted
back), the course folder and the exchange (gradebook, source notebooks, other students' work) and
the repository's hidden paths (rubric.toml [isolation]). It may write to a fresh /tmp and to the
student's own autograded folder, except the notebook files there: while the kernel runs, the
notebook holds the hidden tests. It talks to nbgrader over Unix sockets in a private folder (ZMQ's
ipc transport): TCP on the loopback would need the host's network namespace.
"""
import os
import shutil
import site
import sys
import tempfile
from pathlib import Path

from jupyter_client.manager import AsyncKernelManager
from nbgrader.converters import Autograde
from nbgrader.preprocessors import Execute
from traitlets import List, Unicode


class SandboxedKernelManager(AsyncKernelManager):
    hidden = List(Unicode(), help="Paths the kernel must not see besides the repository's hidden "
                                  "ones (the course folder).").tag(config=True)

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._ipc_dir = tempfile.mkdtemp(prefix="nbgrader-kernel-")
        self.transport = "ipc"
        self.ip = os.path.join(self._ipc_dir, "kernel")
        self.connection_file = os.path.join(self._ipc_dir, "connection.json")

    async def _async_launch_kernel(self, kernel_cmd, **kw):
        self.kernel_spec.interrupt_mode = "message"  # a signal would stop at bwrap, not reach the kernel
        workdir = Path(kw.get("cwd") or os.getcwd()).resolve()
        hidden = [Path(p) for p in self.hidden] + _repository_hidden()
        command = bwrap_command(workdir, Path(self._ipc_dir), hidden)
        await super()._async_launch_kernel(command + kernel_cmd, **kw)

    async def _async_cleanup_resources(self, restart=False):
        await super()._async_cleanup_resources(restart)
        if not restart:
            shutil.rmtree(self._ipc_dir, ignore_errors=True)


class CourseExecute(Execute):
    """nbgrader's Execute, with the kernel sandboxed when bubblewrap works on this machine."""

    def create_kernel_manager(self):
        from autograder.isolation import sandbox_available

        if sandbox_available():
            self.kernel_manager_class = SandboxedKernelManager
            self.log.info("Running the student's kernel in the bubblewrap sandbox")
        else:
            self.log.warning("bubblewrap is not available (or AUTOGRADER_NO_SANDBOX is set): the student's "
                             "kernel runs unsandboxed, with this user's rights")
        return super().create_kernel_manager()


def bwrap_command(workdir: Path, ipc_dir: Path, hidden: list) -> list:
    argv = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
            "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--setenv", "HOME", "/tmp", "--setenv", "MPLCONFIGDIR", "/tmp/matplotlib",
            # In its PID namespace the kernel's parent is pid 1, which ipykernel's parent poller would
            # read as "nbgrader exited"; parent 1 turns the poller off, and --die-with-parent already
            # ends the kernel with nbgrader.
            "--setenv", "JPY_PARENT_PID", "1"]
    for home in {"/home", "/root", os.path.expanduser("~")}:
        if os.path.isdir(home):
            argv += ["--tmpfs", home]
    for path in _python_paths():
        argv += ["--ro-bind", path, path]
    for path in hidden:
        if path.is_dir():
            argv += ["--tmpfs", str(path)]
        elif path.exists():
            argv += ["--ro-bind", "/dev/null", str(path)]
    argv += ["--bind", str(ipc_dir), str(ipc_dir), "--bind", str(workdir), str(workdir), "--chdir", str(workdir)]
    for notebook in sorted(workdir.glob("*.ipynb")):
        argv += ["--ro-bind", "/dev/null", str(notebook)]
    return argv


def _python_paths() -> list:
    """The interpreter and its packages, which may live in a home directory (pyenv, venvs, --user)."""
    candidates = {sys.prefix, sys.base_prefix, sys.exec_prefix, *site.getsitepackages(), site.getusersitepackages()}
    return sorted(p for p in map(os.path.realpath, candidates) if os.path.isdir(p))


def autograde_preprocessors() -> list:
    """nbgrader's autograde pipeline with CourseExecute in place of Execute."""
    default = Autograde.class_traits()["autograde_preprocessors"].default()
    return [CourseExecute if step is Execute else step for step in default]


def _repository_hidden() -> list:
    """rubric.toml's [isolation] hidden paths; read here rather than in the config, which every
    nbgrader command loads, because the rubric module imports torch."""
    from autograder import rubric

    return list(rubric.load().hidden)
