"""What a sandboxed worker needs to reach the GPU: bubblewrap arguments built from what this machine has.

gpu_checks' timing worker runs under the same bubblewrap sandbox as every worker, which starts from an
empty filesystem. CUDA needs, inside it:
  - the device nodes: /dev/nvidiactl, /dev/nvidia-uvm(-tools), /dev/nvidia0..N, /dev/nvidia-modeset and
    the /dev/nvidia-caps folder (MIG), passed through with --dev-bind (a plain bind would not let the
    driver open them);
  - /sys, read-only: the CUDA driver and NVML find the devices' PCI and NUMA topology there;
  - the user-space driver libraries (libcuda.so.1, libnvidia-ml.so.1, libnvidia-ptxjitcompiler.so.1,
    ...) where the dynamic loader finds them, i.e. the paths `ldconfig -p` lists. Most systems keep them
    in /usr/lib*, which the sandbox already shows; a container runtime or a driver installed elsewhere
    (/usr/local/nvidia, /run/nvidia/driver, /opt/...) puts them outside it, and those files are bound at
    the same paths, so the loader cache (/etc/ld.so.cache, also bound) stays right.
/proc/driver/nvidia needs nothing: the sandbox's own /proc shows the driver's entries.

Everything is read from `root` (the real "/" in use; a fake tree in tests), so the argument list is a
pure function of a filesystem and of ldconfig's output. Without device nodes there is nothing to bind,
and ldconfig is not run.
"""
import re
import shutil
import subprocess
from pathlib import Path

# The driver's user-space libraries; the CUDA runtime, cuBLAS and cuDNN come with torch's wheels.
DRIVER_LIBRARY = re.compile(r"^\s*((?:libcuda|libnvidia-[\w.-]+?)\.so[\w.]*)\s+\(.*\)\s+=>\s+(/\S+)\s*$")


def cuda_binds(visible, root: Path = Path("/"), ldconfig_output: str | None = None) -> list[str]:
    """bubblewrap arguments that let a sandboxed process use this machine's NVIDIA GPUs.

    `visible`: folders the sandbox already shows at their own paths (a library inside one needs no
    bind). `ldconfig_output`: the text of `ldconfig -p` (read from the machine when None).
    """
    root = Path(root)
    nodes = sorted(root.glob("dev/nvidia*"))
    if not nodes:
        return []
    argv = []
    for node in nodes:
        inside = "/" + node.relative_to(root).as_posix()
        argv += ["--dev-bind", str(node), inside]
    if (root / "sys").is_dir():
        argv += ["--ro-bind", str(root / "sys"), "/sys"]
    if ldconfig_output is None:
        ldconfig_output = read_ldconfig()
    shown = [Path(v) for v in visible]
    for library in driver_libraries(ldconfig_output):
        if any(v == library or v in library.parents for v in shown):
            continue
        source = root / library.relative_to("/")
        if source.exists():  # a stale cache entry would make bubblewrap fail: leave it out
            argv += ["--ro-bind", str(source), str(library)]
    return argv


def driver_libraries(ldconfig_output: str) -> list[Path]:
    """The driver libraries `ldconfig -p` lists, each path once, in its order."""
    found = []
    for line in ldconfig_output.splitlines():
        match = DRIVER_LIBRARY.match(line)
        if match and Path(match.group(2)) not in found:
            found.append(Path(match.group(2)))
    return found


def read_ldconfig() -> str:
    """`ldconfig -p` (the dynamic loader's cache), or "" when it cannot be read."""
    ldconfig = shutil.which("ldconfig") or next((p for p in ("/sbin/ldconfig", "/usr/sbin/ldconfig")
                                                  if Path(p).exists()), None)
    if ldconfig is None:
        return ""
    try:
        return subprocess.run([ldconfig, "-p"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
