"""The worker template seen from the grader: forking a confined child per worker.

A pristine worker that has imported torch and forks a confined child for each worker a grade starts
(autograder/isolation/guest/template_main.py). A child costs a fork, not a Python that imports torch.

A grader slot starts one for all its grades (`start`: installed with worker.install_template); a
grade that no slot's template serves (a lone `grade`) starts one of its own (`for_grade`, handed to
each WorkerProcess it makes). WorkerProcess forks from it, and spawns its worker directly when there
is none, when it does not fit the grade (another level, or a path to mask in the sandbox that the
template's view does not mask), or when the template fails: a template that dies is restarted, one
that refuses (no Landlock, no mount namespace) or keeps failing to start is given up, each with the
reason in the slot's log. No grade is lost to a template, and a worker waits for one only while it
is starting (at most READY_TIMEOUT_S; then it is replaced and the worker spawned).
"""
import json
import os
import secrets
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from autograder.isolation.guest import confine
from autograder.isolation.host.levels import Isolation, resolve
from autograder.isolation.host.worker import (REAPER, REAPER_GRACE_S, SCRUBBED_ENV, TOKEN_VAR, install_template, kill_leftovers,
                              signal_name)

READY_TIMEOUT_S = 60      # importing torch on a loaded machine; a worker spawned instead costs as much
STARTED_TIMEOUT_S = 10    # two forks, a chdir and two messages: only a broken template takes longer
MAX_FAILED_STARTS = 3     # templates that died before serving, in a row, before the slot gives up
MESSAGE_BYTES = 1 << 16
DISABLE_VAR = "AUTOGRADER_NO_TEMPLATE"  # set: every worker is spawned, a Python that imports torch
QUIET = subprocess.DEVNULL  # a template's log that keeps what it and its process say to itself
_refused = {}  # level -> why a template at that level refused in this process: the kernel's answer, kept
_CREDENTIALS = struct.Struct("3i")  # struct ucred: pid, uid, gid

def start(isolation: str, hidden, log=None) -> "WorkerTemplate | None":
    """A grader slot's template for workers at level `isolation` (a name, as on the command line)
    with `hidden` kept from them, installed for this process; None where that level cannot run here
    (each grade then says why). `log`: a file (it has a descriptor: the template process writes to it
    too) where it says that it is ready, restarted or given up; stderr by default; QUIET: nowhere."""
    if os.environ.get(DISABLE_VAR):
        print(f"worker template not used: {DISABLE_VAR} is set; workers are started directly", file=sys.stderr)
        return None
    try:
        level = resolve(isolation)
    except (RuntimeError, ValueError):
        return None
    try:
        template = WorkerTemplate(level, [p for p in map(Path, hidden) if p.exists()], log)
    except OSError as err:
        print(f"worker template not used: it could not be started ({err}); workers are started directly",
              file=sys.stderr)
        return None
    install_template(template)
    return template


def for_grade(isolation: Isolation, hidden) -> "WorkerTemplate | None":
    """A template of one grade's own, where no slot's serves it (a lone `grade`): every worker of the
    grade (its own, carry_forward's, one after a crash) is forked from it rather than a Python that
    imports torch. It says nothing (QUIET): a grade's output is about the submission. None where it
    would only cost a start: AUTOGRADER_NO_TEMPLATE is set, this kernel has no Landlock (the
    template's own first check, asked here too so that such a grade spawns its worker at once), a
    template at this level has refused in this process before, or it could not be started; the
    grade then spawns its workers."""
    if os.environ.get(DISABLE_VAR) or isolation.level in _refused or not sys.platform.startswith("linux") \
            or confine.landlock_abi() < 1:
        return None
    try:
        return WorkerTemplate(isolation, hidden, log=QUIET)
    except Exception:  # noqa: BLE001 - the grade spawns its workers, which meet (and report) any cause again
        return None


class WorkerTemplate:
    """A started template; `spawn` forks a worker from it, `stop` ends it and every child."""

    def __init__(self, isolation: Isolation, hidden, log=None):
        self.isolation, self.hidden = isolation, [Path(p) for p in hidden]
        self.masked = isolation.masked(self.hidden)
        self.log = log or sys.stderr
        self.given_up = ""      # why this template is no longer used; "" while it is
        self.failed_starts = 0
        self._lock = threading.Lock()
        self._start()

    def _start(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="mhsa-template-"))
        try:
            self.folder.chmod(0o711)  # bubblewrap, root in its own user namespace, must reach the files
            prefix, script, _ = self.isolation.command(self.folder, self.hidden, template=True)
            self._control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        except BaseException:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise
        lifeline_r, self._lifeline = os.pipe()
        self.token = secrets.token_hex(16)
        env = SCRUBBED_ENV | {"HOME": str(self.folder), "TMPDIR": str(self.folder), TOKEN_VAR: self.token}
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", str(REAPER), str(lifeline_r), "--remove", str(self.folder), "--",
                 *prefix, script, str(theirs.fileno())],
                stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log, pass_fds=(theirs.fileno(), lifeline_r),
                cwd=self.folder, env=env, start_new_session=True)
        except BaseException:  # nothing started: nothing of it is left behind
            self._control.close()
            os.close(self._lifeline)
            self._lifeline = -1  # stop() must not close a number the system may have given out again
            shutil.rmtree(self.folder, ignore_errors=True)
            raise
        finally:
            theirs.close()
            os.close(lifeline_r)
        self.ready = False

    def fits(self, isolation: Isolation, hidden) -> bool:
        """Whether a worker of this level with these paths hidden may be forked from this template:
        the same level, and in the sandbox nothing to mask that the template's view does not."""
        return isolation == self.isolation and isolation.masked(hidden) <= self.masked

    def serving_now(self) -> bool:
        """Whether a worker asked for now would be forked at once: the template said it was ready
        and still runs (a restarted one is importing torch again until it says so)."""
        return not self.given_up and self.ready and self.proc.poll() is None

    def serving_folder(self) -> Path | None:
        """The folder to make a forked worker's folder in, once the template is serving; None when it
        is not (given up, or failed and restarted: the caller spawns its worker itself)."""
        with self._lock:
            return self.folder if not self.given_up and self._await_ready() else None

    def spawn(self, workdir: Path, submission: Path, config: dict, env: dict, fds) -> "TemplateChild | None":
        """Fork a worker for `submission` in `workdir` (inside `serving_folder()`); `fds`: its request
        (read end), reply (write end), output (write end) and lifeline (read end) pipes; `env`: its
        variables beyond the template's. None when the template cannot: the caller spawns the worker
        itself."""
        with self._lock:
            if self.given_up or not self._await_ready():
                return None
            request = {"workdir": str(workdir), "submission": str(submission), "config": config, "env": env}
            mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                mine.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
                with theirs:
                    socket.send_fds(self._control, [json.dumps(request).encode()], [*fds, theirs.fileno()])
                pid = _started(mine)
            except OSError as err:
                mine.close()
                self._restart(f"it stopped taking requests ({err.strerror})")
                return None
            if pid is None:
                mine.close()
                self._restart("a worker it was asked for did not get ready to read its submission")
                return None
            return TemplateChild(mine, pid)

    def _await_ready(self) -> bool:
        """Whether the template is serving, waiting for its first word if it has not said it yet."""
        if self.ready:
            if self.proc.poll() is None:
                return True
            self._restart(f"it ended ({_how_it_ended(self.proc.returncode)})")
            return False
        hello = _message(self._control, READY_TIMEOUT_S)
        if hello and hello.get("ready"):
            self.ready, self.failed_starts = True, 0
            self._say(f"worker template ready ({self.isolation.level}): workers are forked from it")
            return True
        if hello and "refused" in hello:
            _refused[self.isolation.level] = str(hello["refused"])
            self._give_up(str(hello["refused"]))
            return False
        self.failed_starts += 1
        self._restart("it ended before it was ready" if hello is not None
                      else f"it did not say it was ready within {READY_TIMEOUT_S} s")
        return False

    def _restart(self, why: str) -> None:
        self.stop()
        if self.failed_starts >= MAX_FAILED_STARTS:
            self._give_up(f"{why}, {self.failed_starts} times in a row")
            return
        self._say(f"worker template restarted: {why}; this worker was started directly")
        self._start()

    def _give_up(self, why: str) -> None:
        self.stop()
        self.given_up = why
        self._say(f"worker template not used: {why}; workers are started directly, one Python each")

    def _say(self, line: str) -> None:
        if self.log != QUIET:
            print(line, file=self.log, flush=True)

    def stop(self) -> None:
        """End the template and every child it forked; safe to call twice."""
        self._control.close()
        if self._lifeline >= 0:
            os.close(self._lifeline)
            self._lifeline = -1
        try:
            self.proc.wait(timeout=REAPER_GRACE_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        kill_leftovers(self.token, self.proc.pid)
        shutil.rmtree(self.folder, ignore_errors=True)


class TemplateChild:
    """A worker forked by the template, as WorkerProcess sees it: the part of subprocess.Popen it
    uses. `pid` is its supervisor's (a session of its own); `returncode` is the worker's, negative
    for a signal, as Popen says it (EOF without a report: the supervisor was killed)."""

    def __init__(self, reports: socket.socket, pid: int):
        self._reports, self.pid, self.returncode = reports, pid, None

    def poll(self):
        return self._collect(0)

    def wait(self, timeout=None):
        if self._collect(timeout) is None:
            raise subprocess.TimeoutExpired("worker", timeout)
        return self.returncode

    def kill(self) -> None:
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def _collect(self, timeout):
        if self.returncode is None:
            report = _message(self._reports, timeout)
            if report is None:
                return None
            status = report.get("status")
            self.returncode = os.waitstatus_to_exitcode(status) if isinstance(status, int) else -signal.SIGKILL
            self._reports.close()
        return self.returncode


def _how_it_ended(code: int) -> str:
    return f"killed by {signal_name(-code)}" if code < 0 else f"exit status {code}"


def _message(sock: socket.socket, timeout) -> dict | None:
    """The next JSON message on `sock`; {} at its end or for garbage, None when none came in time."""
    if not select.select([sock], [], [], timeout)[0]:
        return None
    try:
        data = sock.recv(MESSAGE_BYTES)
        message = json.loads(data) if data else {}
    except (OSError, ValueError):
        return {}
    return message if isinstance(message, dict) else {}


def _started(sock: socket.socket) -> int | None:
    """The supervisor's pid, in this process's PID namespace (the kernel translates the message's
    credentials), once it says it started and its worker says it is set up; None if either does not
    (a worker that ended first is reported with its status instead)."""
    deadline = time.monotonic() + STARTED_TIMEOUT_S
    pid, set_up = None, False
    while select.select([sock], [], [], max(0.0, deadline - time.monotonic()))[0]:
        data, ancillary, _, _ = sock.recvmsg(MESSAGE_BYTES, socket.CMSG_SPACE(_CREDENTIALS.size))
        message = json.loads(data) if data else {}
        if not message or "status" in message:
            return None
        set_up = set_up or bool(message.get("set_up"))
        for level, kind, payload in ancillary:
            if (level, kind) == (socket.SOL_SOCKET, socket.SCM_CREDENTIALS) and message.get("started"):
                pid = _CREDENTIALS.unpack(payload[:_CREDENTIALS.size])[0]
        if pid is not None and set_up:
            return pid
    return None
