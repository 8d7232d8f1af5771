"""One worker process seen from the grader: start it, send calls, drain its output, kill it all.

Starting a worker imports nothing heavy here: the wire format (and with it torch) is imported when
the first frame is read, so a grade can start its worker (or its template, worker_template.py)
before the grading process has imported torch, and the two imports run side by side
(autograder/pipeline/grading.py, start_worker).
"""
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from autograder.isolation.host.levels import (SANDBOX_WORKER_DIR, WORKER_DIR, Isolation, python_roots, readable_paths,
                                  writable_devices)
from autograder.core.rubric import Limits

REAPER = Path(__file__).resolve().parents[1] / "guest" / "reaper.py"
TOKEN_VAR = "AUTOGRADER_WORKER_TOKEN"
REPLY_FLOOR_BYTES = 16 << 20
# Largest file a worker may write (RLIMIT_FSIZE), and the size of its whole folder (memory-backed:
# a tmpfs of its own, at both levels) and in the sandbox of its /tmp: enough for scratch files, far
# from filling the host's disk or memory.
WORKER_FILE_BYTES = 64 << 20
NOBODY = 65534
REAPER_GRACE_S = 10  # the reaper kills and reaps in milliseconds; waiting longer means it is gone
SCRUBBED_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0",
                "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1",
                # the most OpenMP threads: torch.set_num_threads(4) in a submission then runs on one thread
                # rather than ending the worker when the sandbox refuses the threads it would start
                "OMP_THREAD_LIMIT": "1"}


_template = None  # the grader slot's worker template (worker_template.WorkerTemplate), if any


def install_template(template) -> None:
    """Fork this process's workers from `template` where it fits them (None: spawn every worker)."""
    global _template
    _template = template


def template_installed() -> bool:
    """Whether this process has a grader slot's template: its grades fork from it where it fits and
    serves, and spawn their workers otherwise, as they always have."""
    return _template is not None


def template_fits(isolation: Isolation, hidden, template=None) -> bool:
    """Whether a worker for `isolation` with `hidden` kept from it would be forked from `template`
    (None: this process's installed one), a fork rather than a Python that imports torch: it fits
    them and has not been given up (unless it fails just then)."""
    template = template or _template
    return template is not None and not template.given_up and template.fits(isolation, hidden)


def template_ready(template=None) -> bool:
    """Whether `template` (None: the installed one), where template_fits, would fork a worker without
    waiting: ready now, not still importing torch after its start or a restart."""
    template = template or _template
    return template is not None and template.serving_now()


class CappedOutput:
    """Keeps the first `cap` bytes a stream produces and counts the rest, reading until EOF."""

    def __init__(self, fd: int, cap: int):
        self.cap, self.kept, self.total = cap, bytearray(), 0
        self._thread = threading.Thread(target=self._drain, args=(fd,), daemon=True)
        self._thread.start()

    def _drain(self, fd):
        with os.fdopen(fd, "rb", buffering=0) as stream:
            while chunk := stream.read(1 << 16):
                self.total += len(chunk)
                room = self.cap - len(self.kept)
                if room > 0:
                    self.kept += chunk[:room]

    def text(self, wait: float = 0.0) -> str:
        self._thread.join(wait)
        out = self.kept.decode("utf-8", "replace")
        if self.total > self.cap:
            out += f"\n[... output cut: {self.total:,} bytes printed, {self.cap:,} kept]"
        return out


class WorkerProcess:
    """A started worker. `request` raises TimeoutError, EOFError (it died) or wire.WireError.

    The worker runs under a reaper (autograder/isolation/guest/reaper.py) that holds one end of a lifeline
    pipe; `stop` closes it and the reaper kills every process the worker started. Each worker also
    carries a random token in its environment, which `stop` looks for as a last resort. A worker
    forked from a template (`forked`) runs under the same reaper code in the template's
    process tree; `proc` then stands for it (worker_template.TemplateChild), and the last resort is
    its supervisor's session.
    """

    def __init__(self, submission: Path, isolation: Isolation, limits: Limits, hidden: list[Path],
                 entry: Path | None = None, entry_config: dict | None = None, template=None):
        """`entry`: a script run instead of worker_main.py (gpu_checks' timing session). It is copied
        beside the submission, where the sandbox can see it, and finds worker_main through
        config["worker_dir"]; `entry_config` joins that configuration (the timing session's device).

        Where `template` (a grade's own; None: the one installed for this process, a grader slot's:
        worker_template.py) fits, the worker is forked from it; otherwise, or when the template
        cannot, a new Python is spawned."""
        self.token = secrets.token_hex(16)
        template = (template or _template) if entry is None and template_fits(isolation, hidden, template) else None
        folder = template.serving_folder() if template is not None else None
        self.forked = False
        if folder is not None:
            config, child_fds = self._prepare(submission, isolation, limits, hidden, entry, folder)
            self.proc = template.spawn(self.workdir, self.workdir / "mhsa.py", config, self._own_env(), child_fds)
            self.forked = self.proc is not None
            if not self.forked:  # the template failed: it is restarted, and this worker spawned
                self._discard(child_fds)
        if not self.forked:
            config, child_fds = self._prepare(submission, isolation, limits, hidden, entry, None)
            config |= entry_config or {}
            self.proc = self._spawn(isolation, hidden, entry, config, child_fds)
        self.sandboxed = isolation.level == "sandbox" and not self.forked  # bubblewrap's exit codes
        for fd in child_fds:
            os.close(fd)
        os.set_blocking(self._req_w, False)  # writes wait with a deadline (wire.write_frame)
        self.output = CappedOutput(self._out_r, limits.output_bytes)

    def _prepare(self, submission, isolation, limits, hidden, entry, folder):
        """The worker's folder (in the template's `folder` for a forked worker), its configuration and
        its pipes; returns (config, the worker's ends: request, reply, output, lifeline)."""
        self.workdir = Path(tempfile.mkdtemp(prefix="mhsa-worker-", dir=folder))
        copy = self.workdir / "mhsa.py"
        copy.write_bytes(Path(submission).read_bytes())
        if entry is not None:
            Path(self.workdir / Path(entry).name).write_bytes(Path(entry).read_bytes())
        if os.geteuid() == 0 and folder is None:  # the worker drops root for nobody (isolation/guest/confine.py): its folder is nobody's
            for path in (self.workdir, *self.workdir.iterdir()):
                os.chown(path, NOBODY, NOBODY)
            self.workdir.chmod(0o711)  # bubblewrap, root in its own user namespace, must reach the files
        forked = folder is not None
        config = {"memory_bytes": limits.memory_mb << 20, "cpu_seconds": limits.cpu_seconds,
                  "file_bytes": WORKER_FILE_BYTES, "denied_paths": isolation.denied(hidden),
                  "write_dirs": [str(self.workdir)], "read_paths": readable_paths(),
                  "python_paths": [str(r) for r in python_roots()],
                  "write_paths": [str(self.workdir), *writable_devices()],
                  "worker_dir": str(WORKER_DIR if isolation.level == "process" else SANDBOX_WORKER_DIR),
                  # CUDA starts threads of its own; the timing session runs no student code on them
                  "allow_threads": entry is not None,
                  # the folder's budget at the process level (bubblewrap gives a spawned worker its
                  # own; a forked one shares the template's sandbox, so it takes one itself)
                  "scratch_bytes": WORKER_FILE_BYTES if isolation.level == "process" or forked else None}
        req_r, self._req_w = os.pipe()
        self._resp_r, resp_w = os.pipe()
        self._out_r, out_w = os.pipe()
        lifeline_r, self._lifeline = os.pipe()
        return config, [req_r, resp_w, out_w, lifeline_r]

    def _discard(self, child_fds) -> None:
        for fd in (*child_fds, self._req_w, self._resp_r, self._out_r, self._lifeline):
            os.close(fd)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def _spawn(self, isolation, hidden, entry, config, child_fds) -> subprocess.Popen:
        """A new Python running worker_main.py (or `entry`) under a reaper."""
        req_r, resp_w, out_w, lifeline_r = child_fds
        prefix, script, _ = isolation.command(self.workdir, hidden)
        if entry is not None:
            script = str(self.workdir / Path(entry).name)
        return subprocess.Popen(
            [sys.executable, "-I", str(REAPER), str(lifeline_r), "--remove", str(self.workdir), "--",
             *prefix, script, str(req_r), str(resp_w), str(self.workdir / "mhsa.py"), json.dumps(config)],
            stdin=subprocess.DEVNULL, stdout=out_w, stderr=out_w, pass_fds=(req_r, resp_w, lifeline_r),
            cwd=self.workdir, env=SCRUBBED_ENV | self._own_env(), start_new_session=True)

    def _own_env(self) -> dict:
        """The variables of this worker beyond the scrubbed environment (a template's own)."""
        return {"HOME": str(self.workdir), "TMPDIR": str(self.workdir), TOKEN_VAR: self.token}

    def request(self, payload: bytes, timeout: float, max_reply: int | None = None):
        """Sends one request and returns the reply; `timeout` covers both ways (a worker that stops
        reading costs it too). The reply may be at most `max_reply` bytes (default: reply_limit)."""
        from autograder.isolation.guest import wire

        deadline = time.monotonic() + timeout
        wire.write_frame(self._req_w, payload, deadline)
        return self._receive(deadline, reply_limit(payload) if max_reply is None else max_reply)

    def receive(self, timeout: float, max_bytes: int | None = None):
        """The worker's next message (default cap: the wire's largest frame)."""
        return self._receive(time.monotonic() + timeout, max_bytes)

    def _receive(self, deadline: float, max_bytes: int | None):
        from autograder.isolation.guest import wire

        return wire.decode(wire.read_frame(self._resp_r, deadline, wire.MAX_FRAME_BYTES if max_bytes is None else max_bytes))

    def exit_description(self) -> str:
        """Why the worker is gone, in words a student understands."""
        try:
            code = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return "stopped answering"
        if self.sandboxed and 128 < code < 128 + signal.NSIG:  # bubblewrap reports a signal as 128 + its number
            code = 128 - code
        if code < 0:
            name = signal_name(-code)
            reasons = {"SIGSEGV": " (a segmentation fault)", "SIGKILL": " (killed: often the memory limit)",
                       "SIGXCPU": " (the CPU time limit)", "SIGABRT": " (aborted)"}
            return f"was killed by {name}{reasons.get(name, '')}"
        return f"exited with status {code} (a call to sys.exit or os._exit?)"

    def interrupt(self) -> None:
        """End the worker from another thread, now: its reaper sees the lifeline close and kills it, so
        a request waiting on it ends with EOFError at once instead of at its time limit (the grade's
        whole-submission limit). `stop` still cleans up."""
        lifeline, self._lifeline = self._lifeline, -1  # taken first, so that `stop` does not close it again
        if lifeline >= 0:
            os.close(lifeline)

    def stop(self) -> None:
        """Kill the worker and everything it started; safe to call twice."""
        for fd in (self._req_w, self._resp_r, self._lifeline):
            try:
                os.close(fd)
            except OSError:
                pass
        self._req_w = self._resp_r = self._lifeline = -1
        try:
            self.proc.wait(timeout=REAPER_GRACE_S)
        except subprocess.TimeoutExpired:  # the reaper itself was stopped or killed from inside
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.kill()
            self.proc.wait()
        kill_leftovers(self.token, self.proc.pid)
        self.output.text(wait=2)
        shutil.rmtree(self.workdir, ignore_errors=True)


def reply_limit(payload: bytes) -> int:
    """The largest reply a request may get: its outputs, gradients and returned inputs are of the
    order of what was sent (inputs, weights, output gradients), plus room for small calls whose
    output outgrows their arguments (causal_mask(n) is n x n)."""
    from autograder.isolation.guest import wire

    return min(wire.MAX_FRAME_BYTES, REPLY_FLOOR_BYTES + 4 * len(payload))


def signal_name(number: int) -> str:
    return signal.Signals(number).name if number in set(signal.Signals) else f"signal {number}"


def kill_leftovers(token: str, session_id: int) -> list[int]:
    """SIGKILL processes that kept the worker's token in their environment or stayed in its session.

    Only needed when the reaper could not do its job (a process that killed the reaper, then left
    both the session and the token behind, is out of reach: see docs/isolation.md). Returns the pids.
    """
    if not Path("/proc").is_dir():
        return []
    marker = f"{TOKEN_VAR}={token}".encode()
    killed = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            fields = (entry / "stat").read_bytes().rsplit(b")", 1)[1].split()
            doomed = (int(fields[3]) == session_id  # stat field 6: session id
                      or marker in (entry / "environ").read_bytes().split(b"\0"))
        except (OSError, IndexError, ValueError):
            continue
        if doomed:
            try:
                os.kill(int(entry.name), signal.SIGKILL)
                killed.append(int(entry.name))
            except OSError:
                pass
    return killed
