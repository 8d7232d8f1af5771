"""CUDA inside the sandbox, tested without a GPU: the bubblewrap arguments built from a fake machine
(device nodes, /sys, driver libraries as `ldconfig -p` lists them), those arguments run by a real
bubblewrap, and the timing worker's own report that CUDA is out of its reach."""
import shutil
import subprocess
from pathlib import Path

import pytest

from autograder.core.rubric import load
from autograder.isolation.host import cuda_binds as cuda_binds_module
from autograder.isolation.host import levels as isolation
from autograder.isolation.host.cuda_binds import cuda_binds, driver_libraries
from gpu_checks.grading import session_environment
from gpu_checks.harness import REFERENCE_FILE, timing_workers
from gpu_checks.session import REFERENCE, TimingSetupError

LDCONFIG = """\
1234 libs found in cache `/etc/ld.so.cache'
\tlibnvidia-ml.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1
\tlibcudart.so.12 (libc6,x86-64) => /opt/cuda/lib64/libcudart.so.12
\tlibcuda.so.1 (libc6,x86-64) => /run/nvidia/driver/lib/libcuda.so.1
\tlibcuda.so (libc6,x86-64) => /run/nvidia/driver/lib/libcuda.so
\tlibnvidia-ptxjitcompiler.so.1 (libc6,x86-64) => /run/nvidia/driver/lib/libnvidia-ptxjitcompiler.so.1
\tlibnvidia-gone.so.1 (libc6,x86-64) => /run/nvidia/driver/lib/libnvidia-gone.so.1
\tlibcuda.so.1 (libc6,x86-64) => /run/nvidia/driver/lib/libcuda.so.1
\tlibc.so.6 (libc6,x86-64) => /lib/x86_64-linux-gnu/libc.so.6
"""


@pytest.fixture
def machine(tmp_path):
    """A fake root: four device nodes and the MIG caps folder, /sys, the driver half in /usr (shown by
    the sandbox anyway) and half under /run/nvidia/driver (a container runtime's layout)."""
    root = tmp_path / "root"
    for node in ("dev/nvidia0", "dev/nvidiactl", "dev/nvidia-uvm", "dev/nvidia-caps/nvidia-cap1",
                 "sys/bus/pci/devices/0000:00:04.0/vendor", "usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
                 "run/nvidia/driver/lib/libcuda.so.1", "run/nvidia/driver/lib/libnvidia-ptxjitcompiler.so.1",
                 "opt/cuda/lib64/libcudart.so.12"):
        (root / node).parent.mkdir(parents=True, exist_ok=True)
        (root / node).write_text(f"fake {Path(node).name}\n")
    (root / "run/nvidia/driver/lib/libcuda.so").symlink_to("libcuda.so.1")
    return root


def test_driver_libraries_are_the_loaders_cuda_and_nvidia_entries_once_each():
    assert [str(p) for p in driver_libraries(LDCONFIG)] == [
        "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", "/run/nvidia/driver/lib/libcuda.so.1",
        "/run/nvidia/driver/lib/libcuda.so", "/run/nvidia/driver/lib/libnvidia-ptxjitcompiler.so.1",
        "/run/nvidia/driver/lib/libnvidia-gone.so.1"]


def test_binds_devices_sys_and_the_driver_libraries_the_sandbox_does_not_show(machine):
    argv = cuda_binds(["/usr", "/lib"], root=machine, ldconfig_output=LDCONFIG)
    r = str(machine)
    assert argv == [
        "--dev-bind", f"{r}/dev/nvidia-caps", "/dev/nvidia-caps",
        "--dev-bind", f"{r}/dev/nvidia-uvm", "/dev/nvidia-uvm",
        "--dev-bind", f"{r}/dev/nvidia0", "/dev/nvidia0",
        "--dev-bind", f"{r}/dev/nvidiactl", "/dev/nvidiactl",
        "--ro-bind", f"{r}/sys", "/sys",
        # libnvidia-ml is under /usr (shown already); libcudart is torch's, not the driver's;
        # libnvidia-gone is a stale cache entry (binding it would make bubblewrap fail)
        "--ro-bind", f"{r}/run/nvidia/driver/lib/libcuda.so.1", "/run/nvidia/driver/lib/libcuda.so.1",
        "--ro-bind", f"{r}/run/nvidia/driver/lib/libcuda.so", "/run/nvidia/driver/lib/libcuda.so",
        "--ro-bind", f"{r}/run/nvidia/driver/lib/libnvidia-ptxjitcompiler.so.1",
        "/run/nvidia/driver/lib/libnvidia-ptxjitcompiler.so.1"]


def test_without_device_nodes_nothing_is_bound_and_ldconfig_is_not_run(tmp_path, monkeypatch):
    def fail():
        raise AssertionError("ldconfig read on a machine without a GPU")

    monkeypatch.setattr(cuda_binds_module, "read_ldconfig", fail)
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "null").touch()
    assert cuda_binds(["/usr"], root=tmp_path) == []


def test_the_sandbox_command_line_carries_the_cuda_binds(monkeypatch, tmp_path):
    monkeypatch.setattr(isolation, "cuda_binds", lambda visible: ["--dev-bind", "/marker", "/dev/nvidia0"])
    argv = isolation.sandbox_argv(tmp_path, [])
    at = argv.index("/marker")
    assert argv[at - 1:at + 2] == ["--dev-bind", "/marker", "/dev/nvidia0"]
    assert at < argv.index("--chdir")


needs_bwrap = pytest.mark.skipif(not isolation.sandbox_available(), reason="needs bubblewrap with user namespaces")


@needs_bwrap
def test_bubblewrap_accepts_the_binds_and_the_sandbox_sees_what_cuda_needs(machine):
    """The argument list run by bubblewrap itself, on the fake machine's files: the device nodes, the MIG
    caps, /sys and the out-of-tree driver library are where CUDA looks for them."""
    base = [shutil.which("bwrap"), "--unshare-all", "--die-with-parent", "--dev", "/dev", "--proc", "/proc"]
    for path in isolation.SYSTEM_DIRS:
        if Path(path).is_symlink():
            base += ["--symlink", str(Path(path).readlink()), path]
        elif Path(path).exists():
            base += ["--ro-bind", path, path]
    script = ("test -e /dev/nvidia0 && test -e /dev/nvidiactl && test -e /dev/nvidia-caps/nvidia-cap1 && "
              "cat /sys/bus/pci/devices/0000:00:04.0/vendor /run/nvidia/driver/lib/libcuda.so "
              "/run/nvidia/driver/lib/libnvidia-ptxjitcompiler.so.1 && test ! -e /opt/cuda")
    argv = cuda_binds(isolation.SYSTEM_DIRS, root=machine, ldconfig_output=LDCONFIG)
    done = subprocess.run([*base, *argv, "sh", "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:3] == ["fake vendor", "fake libcuda.so.1", "fake libnvidia-ptxjitcompiler.so.1"]


def test_cuda_out_of_the_workers_reach_is_the_graders_error_with_the_reason():
    """On this machine CUDA is missing everywhere; asked to time on cuda anyway, the harness asks the
    reference's worker, which says why it cannot, and that becomes the operator's error."""
    _, limits, hidden = session_environment(load(), "cpu")
    level = isolation.resolve("auto")
    with pytest.raises(TimingSetupError) as raised:
        with timing_workers({REFERENCE: REFERENCE_FILE, "student": REFERENCE_FILE}, "cuda", level, limits, hidden):
            pass
    message = str(raised.value)
    assert f"not inside the timing worker ({level.level} isolation)" in message
    assert "Torch not compiled with CUDA enabled" in message or "is_available() is False" in message
