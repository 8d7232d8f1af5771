"""How the worker is walled off from the grader, detected rather than assumed.

Levels, strongest first:
  sandbox  bubblewrap: no network, own PID namespace (every spawned process dies with it), a
           read-only filesystem in which the repository, the rubric, the results and the other
           submissions do not exist; plus everything of `process`.
  process  a separate process in its own session: scrubbed environment, private temporary working
           directory, memory/CPU/core limits, audit-hook tripwires (no subprocesses, sockets, or
           reads of hidden paths), capped output, and its process group killed at the end.
"""
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

LEVELS = ("sandbox", "process")
WORKER_DIR = Path(__file__).resolve().parent / "sandbox"
SANDBOX_WORKER_DIR = "/tmp/.autograder-worker"  # under the sandbox's own /tmp: / is read-only


@dataclass(frozen=True)
class Isolation:
    level: str

    def command(self, workdir: Path, hidden: list[Path]) -> tuple[list[str], str, list[str]]:
        """(argv prefix up to the worker script, the script path, paths the audit hook denies)."""
        if self.level == "process":
            return [sys.executable, "-I"], str(WORKER_DIR / "worker_main.py"), [str(p) for p in hidden]
        argv = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
                "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
        for path in hidden:
            if path.is_dir():
                argv += ["--tmpfs", str(path)]
            elif path.exists():
                argv += ["--ro-bind", "/dev/null", str(path)]
        argv += ["--ro-bind", str(WORKER_DIR), SANDBOX_WORKER_DIR,
                 "--bind", str(workdir), str(workdir), "--chdir", str(workdir),
                 sys.executable, "-I"]
        return argv, f"{SANDBOX_WORKER_DIR}/worker_main.py", []


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
