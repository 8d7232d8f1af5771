"""How the worker is walled off from the grader, detected rather than assumed.

Levels, strongest first (docs/isolation.md says what each stops and what it does not):
  sandbox  bubblewrap: no network, own PID namespace, and a filesystem built from nothing but the
           system libraries, the Python installation and the worker's own directory, read-only
           except that directory; the repository, the rubric, the results and the other
           submissions are not in it at all. Plus everything of `process`.
  process  a separate process in its own session under a reaper that kills everything it spawns:
           scrubbed environment, private working directory (a 64 MB tmpfs of its own on Linux),
           memory/CPU/core limits, Landlock, no capabilities, a seccomp allowlist (isolation/guest/confine.py),
           audit-hook tripwires, capped output.
"""
import glob
import importlib.util
import os
import shutil
import site
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from autograder.isolation.host.cuda_binds import cuda_binds

LEVELS = ("sandbox", "process")
# Isolated mode (no user site, no PYTHON* variables, no current directory on sys.path); unbuffered,
# so that what a submission printed reaches the grader even when its worker is killed.
PYTHON = (sys.executable, "-I", "-u")
WORKER_DIR = Path(__file__).resolve().parents[1] / "guest"
SANDBOX_WORKER_DIR = "/tmp/.autograder-worker"  # under the sandbox's own /tmp: / is read-only
# What a Python process needs from the host: libraries and the dynamic loader's configuration.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives",
                "/etc/localtime", "/etc/passwd", "/etc/group", "/etc/nsswitch.conf")
# Read at run time by torch (CPU features) and the C library; nothing about other processes.
RUNTIME_FILES = ("/dev/null", "/dev/zero", "/dev/urandom", "/proc/cpuinfo", "/sys/devices/system/cpu")
UNPRIVILEGED_UID = 65534  # nobody: the worker template's user inside the sandbox
SCRATCH_BYTES = 64 << 20  # the sandbox's /tmp and worker folder: memory-backed, so bounded


@dataclass(frozen=True)
class Isolation:
    level: str

    def command(self, workdir: Path, hidden: list[Path], template: bool = False) -> tuple[list[str], str, list[str]]:
        """(argv prefix up to the worker script, the script path, paths the audit hook denies).
        The worker `template` (template_main.py) has the host's folder `workdir`, writable, where the
        grader makes each child's folder; in the sandbox it is not uid 0 of bubblewrap's user
        namespace, so that each child can map itself into a user namespace of its own (mapping uid 0
        would need CAP_SETFCAP) and mount its own folder there."""
        script = "template_main.py" if template else "worker_main.py"
        if self.level == "process":
            return [*PYTHON], str(WORKER_DIR / script), self.denied(hidden)
        argv = sandbox_argv(Path(workdir), hidden, keep_writes=template)
        if template:
            argv[1:1] = ["--unshare-user", "--uid", str(UNPRIVILEGED_UID), "--gid", str(UNPRIVILEGED_UID)]
        return argv, f"{SANDBOX_WORKER_DIR}/{script}", []

    def denied(self, hidden: list[Path]) -> list[str]:
        """The paths a worker's audit hook denies: in the sandbox they are not there at all."""
        return [str(p) for p in hidden] if self.level == "process" else []

    def masked(self, hidden: list[Path]) -> set[Path]:
        """The paths of `hidden` the sandbox's view must mask (the others are not in it at all)."""
        return set() if self.level == "process" else set(masked_paths(hidden, sandbox_view()[1]))


def readable_paths() -> list[str]:
    """What the worker may read at either level (its Landlock allowlist; in the sandbox, also the
    only things mounted): system libraries, the Python installation, its own code, a few devices."""
    paths = [*SYSTEM_DIRS, *SYSTEM_FILES, *map(str, python_roots()), str(WORKER_DIR), SANDBOX_WORKER_DIR,
             *RUNTIME_FILES]
    if glob.glob("/dev/nvidia*"):  # CUDA, for gpu_checks' timing session: what cuda_binds mounts
        from autograder.isolation.host.cuda_binds import driver_libraries, read_ldconfig

        paths += ["/sys", "/proc/driver/nvidia", *glob.glob("/dev/nvidia*"), *map(str, driver_libraries(read_ldconfig()))]
    return [p for p in paths if os.path.lexists(p) or p == SANDBOX_WORKER_DIR]


def writable_devices() -> list[str]:
    return ["/dev/null", *sorted(glob.glob("/dev/nvidia*"))]


def sandbox_argv(workdir: Path, hidden: list[Path], *, keep_writes: bool = False, writable=(), masked=(),
                 env: dict | None = None, command=PYTHON) -> list[str]:
    """The bubblewrap command line, for the grader's workers and nbgrader's kernels alike: a view
    built from nothing but the system libraries and the Python installation, read-only, with a
    size-limited private /tmp in memory, no network, its own PID namespace, then `command`.

    The working folder `workdir` is, by default, a size-limited folder in memory holding its files
    read-only (a worker's writes never reach the host); with `keep_writes` it is the host's folder,
    writable (nbgrader's autograded folder). `writable`: other host folders mounted writable;
    `masked`: files inside them replaced by an empty one; `env`: variables set inside."""
    argv = [shutil.which("bwrap") or "bwrap", "--unshare-all", "--die-with-parent", "--new-session",
            "--cap-drop", "ALL", "--dev", "/dev", "--proc", "/proc",
            *scratch_tmpfs("/tmp")]
    view, visible = sandbox_view()
    argv += view
    argv += cuda_binds(visible)  # GPUs, for gpu_checks' timing session (nothing without /dev/nvidia*)
    for path in masked_paths(hidden, visible):
        if path.is_dir():
            argv += ["--tmpfs", str(path.resolve())]
        elif path.exists():
            argv += ["--ro-bind", "/dev/null", str(path.resolve())]
    argv += ["--ro-bind", str(WORKER_DIR), SANDBOX_WORKER_DIR]
    if keep_writes:
        argv += ["--bind", str(workdir), str(workdir)]
    else:
        argv += scratch_tmpfs(str(workdir))
        for file in sorted(Path(workdir).iterdir()) if Path(workdir).is_dir() else ():  # the submission (and gpu_checks' entry script)
            argv += ["--ro-bind", str(file), str(file)]
    for folder in writable:
        argv += ["--bind", str(folder), str(folder)]
    for file in masked:
        argv += ["--ro-bind", "/dev/null", str(file)]
    for name, value in (env or {}).items():
        argv += ["--setenv", name, value]
    return argv + ["--chdir", str(workdir), "--remount-ro", "/", *command]


def sandbox_view() -> tuple[list[str], list[Path]]:
    """(bubblewrap's arguments that show the system libraries and the Python installation, read-only;
    the paths they show)."""
    argv, visible = [], []
    for path in SYSTEM_DIRS + SYSTEM_FILES:
        if os.path.islink(path) and path in SYSTEM_DIRS:  # merged /usr: /bin -> usr/bin
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.exists(path):
            argv += ["--ro-bind", path, path]
            visible.append(Path(path))
    for root in python_roots():
        if not any(root == v or v in root.parents for v in visible):
            argv += ["--ro-bind", str(root), str(root)]
            visible.append(root)
    return argv, visible


def masked_paths(hidden, visible: list[Path]) -> list[Path]:
    """The paths of `hidden` inside something the sandbox shows, resolved: they must be masked; any
    other simply does not exist in it."""
    return [p.resolve() for p in map(Path, hidden) if any(v in p.resolve().parents for v in visible)]


def scratch_tmpfs(path: str) -> list[str]:
    """A writable, memory-backed folder at `path`, limited to SCRATCH_BYTES where bubblewrap can
    limit it (--size, bubblewrap 0.7+); writable by the unprivileged user the worker becomes."""
    limits = ["--size", str(SCRATCH_BYTES)] if bwrap_supports("--size") else []
    perms = ["--perms", "1777"] if bwrap_supports("--perms") else []
    return [*perms, *limits, "--tmpfs", path]


@lru_cache(maxsize=None)
def bwrap_supports(option: str) -> bool:
    try:
        usage = subprocess.run([shutil.which("bwrap") or "bwrap", "--help"], capture_output=True,
                               text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return f"{option} " in usage.stdout + usage.stderr


def python_roots() -> list[Path]:
    """Where this interpreter, its standard library and torch live (a venv and its base)."""
    roots = {Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix), Path(sys.executable).resolve().parent.parent}
    if os.path.isdir(site.getusersitepackages()):  # packages installed with pip --user (nbgrader's kernel)
        roots.add(Path(site.getusersitepackages()))
    torch = torch_init_file()
    if torch is not None:
        roots.add(torch.resolve().parent.parent)
    return sorted(r.resolve() for r in roots)


def torch_init_file() -> Path | None:
    """torch's __init__.py, found without importing torch: a grade starts its worker before this
    process has paid the seconds that import takes."""
    spec = importlib.util.find_spec("torch")
    return Path(spec.origin) if spec is not None and spec.origin else None


def resolve(requested: str = "auto") -> Isolation:
    """The requested level, or for "auto" the strongest level this machine supports."""
    if requested == "auto":
        return Isolation("sandbox" if sandbox_available() else "process")
    if requested not in LEVELS:
        raise ValueError(f"isolation must be one of auto, {', '.join(LEVELS)}; got {requested!r}")
    if requested == "sandbox" and not sandbox_available():
        raise RuntimeError("isolation 'sandbox' needs bubblewrap (bwrap) with user namespaces; "
                           "install it (apt-get install bubblewrap) or use --isolation process")
    return Isolation(requested)


@lru_cache(maxsize=1)
def sandbox_available() -> bool:
    """bwrap present and allowed to create namespaces (often refused inside containers).
    AUTOGRADER_NO_SANDBOX=1 forces the process level; cached, so tests clear the cache."""
    if os.environ.get("AUTOGRADER_NO_SANDBOX") or not sys.platform.startswith("linux"):
        return False
    bwrap = shutil.which("bwrap")
    if not bwrap:
        return False
    probe = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all",
             "--die-with-parent", "--new-session", "true"]
    try:
        return subprocess.run(probe, capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
