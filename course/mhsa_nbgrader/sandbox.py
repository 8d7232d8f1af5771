"""`nbgrader autograde` runs the student's kernel in bubblewrap where bubblewrap works (detected at
run time, not assumed; AUTOGRADER_NO_SANDBOX=1 turns it off).

The command line comes from autograder.isolation.host.levels.sandbox_argv, the grader's own sandbox, with the
same policy: no network, its own PID namespace (it dies with nbgrader), a view of the filesystem
built from nothing but the system libraries and the Python installation, read-only, and a private,
size-limited /tmp. The course folder, the exchange (gradebook, source notebooks, other students'
work), the repository and its hidden paths are not in it at all. The kernel may also write to the
student's own autograded folder, except the notebook files there: while the kernel runs, the
notebook holds the hidden tests. It talks to nbgrader over Unix sockets in a private folder (ZMQ's
ipc transport): TCP on the loopback would need the host's network namespace.
"""
import os
import shutil
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
        from autograder.isolation.host.levels import sandbox_available

        if sandbox_available():
            self.kernel_manager_class = SandboxedKernelManager
            self.log.info("Running the student's kernel in the bubblewrap sandbox")
        else:
            self.log.warning("bubblewrap is not available (or AUTOGRADER_NO_SANDBOX is set): the student's "
                             "kernel runs unsandboxed, with this user's rights")
        return super().create_kernel_manager()


def bwrap_command(workdir: Path, ipc_dir: Path, hidden: list) -> list:
    from autograder.isolation.host.levels import sandbox_argv

    # In its PID namespace the kernel's parent is pid 1, which ipykernel's parent poller would read as
    # "nbgrader exited"; parent 1 turns the poller off, and --die-with-parent already ends the kernel
    # with nbgrader.
    env = {"HOME": "/tmp", "MPLCONFIGDIR": "/tmp/matplotlib", "JPY_PARENT_PID": "1"}
    return sandbox_argv(workdir, hidden, keep_writes=True, writable=[ipc_dir],
                        masked=sorted(workdir.glob("*.ipynb")), env=env, command=())


def autograde_preprocessors() -> list:
    """nbgrader's autograde pipeline with CourseExecute in place of Execute."""
    default = Autograde.class_traits()["autograde_preprocessors"].default()
    return [CourseExecute if step is Execute else step for step in default]


def _repository_hidden() -> list:
    """rubric.toml's [isolation] hidden paths; read here rather than in the config, which every
    nbgrader command loads, because the rubric module imports torch."""
    from autograder.core import rubric

    return list(rubric.load().hidden)
