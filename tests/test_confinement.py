"""The process level as a security boundary when the worker stays root.

A grader run as root, with Python where `nobody` cannot read it (under /root: this project's CI, many
containers), cannot hand its worker to `nobody`: the worker stays uid 0. Everything below must still
be refused to it: what root's capabilities allowed (reboot, the clock, the host name, the kernel log,
mounting, real-time scheduling, fanotify, immutable files) and what the same uid allows without them
(limits, signals and priorities of sibling workers and of the grader), and its folder has a budget as
a whole. Each probe below is harmless if it were to succeed (reads, the current host name, signal 0, a
process the test starts for the purpose).

The uid-0 path is taken two ways: in this process by adding a folder only root can read to the
worker's Python roots (fast, one worker for every probe), and for the batch by a real virtual
environment inside a 0700 folder, a course's Python that `nobody` cannot read.
"""
import importlib.util
import json
import os
import platform
import shutil
import site
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from autograder.core.paths import REFERENCE, REPO
from autograder.core.rubric import Limits
from autograder.isolation.guest import confine
from autograder.isolation.host import levels as isolation, worker
from autograder.testing.backends import WorkerBackend

AS_ROOT = os.geteuid() == 0
# Syscall numbers of what the probes try (none of them is in the worker's allowlist but prlimit64,
# rt_sigqueueinfo and sched_setaffinity, which are allowed on the worker itself only).
NUMBERS = {"x86_64": {"reboot": 169, "adjtimex": 159, "clock_adjtime": 305, "sethostname": 170, "syslog": 103,
                      "fsopen": 430, "fanotify_init": 300, "prlimit64": 302, "rt_sigqueueinfo": 129,
                      "setpriority": 141, "sched_setaffinity": 203},
           "aarch64": {"reboot": 142, "adjtimex": 171, "clock_adjtime": 266, "sethostname": 161, "syslog": 116,
                       "fsopen": 430, "fanotify_init": 262, "prlimit64": 261, "rt_sigqueueinfo": 138,
                       "setpriority": 140, "sched_setaffinity": 122}}.get(platform.machine())


def refused(call):
    """What a probe reports for a call the worker's filter refuses: errno 3000 + its number (confine.REFUSED_BASE)."""
    number = {name: n for n, name in confine.syscall_names().items()}[call]
    return f"refused: errno {confine.REFUSED_BASE + number}"


pytestmark = pytest.mark.skipif(NUMBERS is None or not sys.platform.startswith("linux"),
                                reason="the worker's syscall filter has tables for Linux x86_64 and aarch64")

PROBE = textwrap.dedent('''
    import ctypes, errno, fcntl, os

    _libc = ctypes.CDLL(None, use_errno=True)

    def _outcome(result):
        """'allowed', or 'refused: ERRNO' (the C library returns -1 and sets errno)."""
        return "allowed" if result >= 0 else "refused: " + errno.errorcode.get(ctypes.get_errno(), f"errno {ctypes.get_errno()}")

    def syscall(number, *args):
        converted = [ctypes.create_string_buffer(a.encode()) if isinstance(a, str) else a for a in args]
        return _outcome(_libc.syscall(number, *converted))

    def timex(number, *leading):
        """adjtimex / clock_adjtime with modes 0: a read, harmless if it were allowed."""
        return _outcome(_libc.syscall(number, *leading, ctypes.create_string_buffer(512)))

    def sethostname(number):
        name = os.uname().nodename.encode()  # the name it already has
        return _outcome(_libc.syscall(number, name, len(name)))

    def sched_fifo():
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
            return "allowed"
        except OSError as err:
            return "refused: " + errno.errorcode.get(err.errno, f"errno {err.errno}")

    def prlimit_cpu(number, pid, seconds=None):
        """RLIMIT_CPU of `pid` set to `seconds`, or only read when None."""
        new = None if seconds is None else (ctypes.c_uint64 * 2)(seconds, seconds)
        return _outcome(_libc.syscall(number, pid, 0, new, (ctypes.c_uint64 * 2)()))

    def sigqueue(number, pid):
        info = ctypes.create_string_buffer(128)
        ctypes.memmove(info, (ctypes.c_int * 3)(0, 0, -1), 12)  # si_code SI_QUEUE
        return _outcome(_libc.syscall(number, pid, 0, info))  # signal 0: permission check only

    def signal_zero(pid):
        return _outcome(_libc.kill(pid, 0))

    def chattr_immutable():
        with open("stuck.bin", "wb") as f:
            f.write(b"x")
            flags = ctypes.c_long(0)
            try:
                fcntl.ioctl(f.fileno(), 0x80086601, flags)  # FS_IOC_GETFLAGS
                flags.value |= 0x10  # FS_IMMUTABLE_FL
                fcntl.ioctl(f.fileno(), 0x40086602, flags)  # FS_IOC_SETFLAGS
                return "allowed"
            except OSError as err:
                return "refused: " + errno.errorcode[err.errno]

    def fill(file_mb, files):
        """Writes `files` files of `file_mb` MB into its folder; (MB written, the error that stopped it)."""
        written = 0
        try:
            for index in range(files):
                with open(f"fill-{index}.bin", "wb") as sink:
                    for _ in range(file_mb):
                        sink.write(b"\\0" * (1 << 20))
                        sink.flush()
                        written += 1
        except OSError as err:
            return [written, errno.errorcode[err.errno]]
        return [written, None]

    def status():
        with open("/proc/self/status") as f:
            fields = dict(line.split(":", 1) for line in f)
        securebits = _libc.prctl(27, 0, 0, 0, 0)  # PR_GET_SECUREBITS
        return {k: v.strip() for k, v in fields.items() if k.startswith(("Cap", "Uid", "NoNewPrivs"))} | \\
            {"securebits": securebits}

    def folder():
        return os.getcwd()
''')


@pytest.fixture(scope="module")
def root_worker(tmp_path_factory):
    """A process-level worker that cannot become nobody: its Python roots include a folder only root
    can read (as when Python lives under /root); a `sleep` started by this test stands for a sibling."""
    work = tmp_path_factory.mktemp("confinement")
    closed = work / "closed"
    closed.mkdir(mode=0o700)
    source = work / "probe.py"
    source.write_text(PROBE)
    patch = pytest.MonkeyPatch()
    real_roots = worker.python_roots
    patch.setattr(worker, "python_roots", lambda: [*real_roots(), closed])
    backend = WorkerBackend(source, isolation.Isolation("process"), Limits(call_timeout=60, memory_mb=3072))
    sibling = subprocess.Popen(["sleep", "300"])
    try:
        backend.call("folder")  # starts it
        yield backend, sibling
    finally:
        backend.close()
        sibling.kill()
        sibling.wait()
        patch.undo()


def test_the_worker_stays_root_but_holds_no_capability(root_worker):
    backend, _ = root_worker
    seen = backend.call("status")
    if AS_ROOT:
        assert seen["Uid"].split()[0] == "0", "this test is about a worker that stays uid 0"
        assert any(line.startswith("user: stays uid 0") for line in backend.confinement), backend.confinement
        assert seen["securebits"] == confine.SECUREBITS, "securebits not set and locked"
    for name in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(seen[name], 16) == 0 or (name == "CapBnd" and not AS_ROOT), (name, seen[name])
    assert seen["NoNewPrivs"] == "1"


@pytest.mark.parametrize("what", ["reboot", "adjtimex", "clock_adjtime", "sethostname", "syslog", "fsopen",
                                  "fanotify_init", "SCHED_FIFO"])
def test_privileged_calls_are_refused(root_worker, what):
    backend, _ = root_worker
    numbers = NUMBERS
    calls = {"reboot": ("syscall", numbers["reboot"], 0xFEE1DEAD, 672274793, 0, 0),  # Ctrl-Alt-Del off
             "adjtimex": ("timex", numbers["adjtimex"]),
             "clock_adjtime": ("timex", numbers["clock_adjtime"], 0),
             "sethostname": ("sethostname", numbers["sethostname"]),
             "syslog": ("syscall", numbers["syslog"], 10, 0, 0),  # SYSLOG_ACTION_SIZE_BUFFER
             "fsopen": ("syscall", numbers["fsopen"], "tmpfs", 0),
             "fanotify_init": ("syscall", numbers["fanotify_init"], 0x4, 0),  # FAN_CLASS_CONTENT
             "SCHED_FIFO": ("sched_fifo",)}
    assert backend.call(*calls[what]) == refused("sched_setscheduler" if what == "SCHED_FIFO" else what)


def test_limits_and_signals_reach_only_the_worker_itself(root_worker):
    """prlimit64, rt_sigqueueinfo, kill, setpriority and sched_setaffinity on a process of the same
    uid are refused; on the worker itself they still work (the C library and torch use them)."""
    backend, sibling = root_worker
    before = Path(f"/proc/{sibling.pid}/limits").read_text()
    assert backend.call("prlimit_cpu", NUMBERS["prlimit64"], sibling.pid, 1000) == refused("prlimit64")
    assert backend.call("prlimit_cpu", NUMBERS["prlimit64"], sibling.pid) == refused("prlimit64")
    assert backend.call("sigqueue", NUMBERS["rt_sigqueueinfo"], sibling.pid) == refused("rt_sigqueueinfo")
    assert backend.call("signal_zero", sibling.pid) == refused("kill")
    assert backend.call("syscall", NUMBERS["setpriority"], 0, sibling.pid, 19) == refused("setpriority")
    assert backend.call("syscall", NUMBERS["sched_setaffinity"], sibling.pid, 1, "\x01") == refused("sched_setaffinity")
    assert Path(f"/proc/{sibling.pid}/limits").read_text() == before
    assert sibling.poll() is None and os.getpriority(os.PRIO_PROCESS, sibling.pid) == 0
    assert backend.call("prlimit_cpu", NUMBERS["prlimit64"], 0) == "allowed", "it may read its own limits"
    assert backend.call("syscall", NUMBERS["setpriority"], 0, 0, 1) == "allowed", "it may lower its own priority"


def test_no_file_can_be_made_immutable(root_worker):
    """chattr +i needs CAP_LINUX_IMMUTABLE, which is gone: nothing is left the reaper cannot remove."""
    backend, _ = root_worker
    assert backend.call("chattr_immutable") == "refused: EPERM"


def test_the_whole_folder_has_a_budget(root_worker):
    """Files each under the per-file limit (64 MB) stop together at the folder's 64 MB; nothing of it
    reaches the host's disk: the worker's folder seen from here stays as the grader made it."""
    backend, _ = root_worker
    assert any(line.startswith("scratch: its folder is a 64 MB tmpfs") for line in backend.confinement), \
        backend.confinement
    host_folder = Path(backend.call("folder"))
    written, error = backend.call("fill", 16, 16)  # 256 MB asked for
    assert error == "ENOSPC" and 48 <= written <= 64, (written, error)
    assert sorted(p.name for p in host_folder.iterdir()) == ["mhsa.py"], "the writes reached the host"


@pytest.fixture(scope="module")
def closed_python(tmp_path_factory):
    """A virtual environment of this Python inside a folder only root can enter, seeing this
    environment's packages: run as root, its workers cannot become nobody."""
    if not AS_ROOT:
        pytest.skip("the uid-0 path needs the tests to run as root (as CI does)")
    home = tmp_path_factory.mktemp("root-home")
    home.chmod(0o700)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(home / "venv")], check=True, timeout=120)
    packages = next((home / "venv" / "lib").glob("python*/site-packages"))
    (packages / "environment.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return home / "venv" / "bin" / "python"


def test_a_batch_is_unaffected_by_its_siblings_attacks(closed_python, tmp_path):
    """`grade --batch --jobs 2` as root with Python in a 0700 folder: the fanotify mark and prlimit on
    siblings of examples/adversarial are graded first, then the reference, in the same two grader
    slots, which still gets full marks; grades.csv has every row. (The disk fill is the folder
    budget's test above, and the adversarial corpus's fill_disk_files.)"""
    spec = importlib.util.spec_from_file_location("adversarial_build", REPO / "examples" / "adversarial" / "build.py")
    adversarial = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(adversarial)
    folder, out = tmp_path / "batch", tmp_path / "grades"
    folder.mkdir()
    whoami = 'print("whoami: uid", os.getuid(), "CapEff", open("/proc/self/status").read().split("CapEff:")[1].split()[0])\n'
    for case in adversarial.cases():
        if case.name in ("sibling_fanotify", "sibling_prlimit"):  # the second one imports os
            (folder / f"{case.name}.py").write_text(case.source() + (whoami if case.name == "sibling_prlimit" else ""))
    shutil.copy(REFERENCE, folder / "z_reference_after_the_attacks.py")
    done = subprocess.run([str(closed_python), "-m", "autograder", "grade", str(folder), "--batch", "--out", str(out),
                           "--jobs", "2", "--isolation", "process", "--suite", "public"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert len((out / "grades.csv").read_text().splitlines()) == 1 + 3
    reference = json.loads((out / "z_reference_after_the_attacks.json").read_text())
    assert reference["score"] == reference["extra_data"]["max_score"] > 0, reference["output"][:2000]
    prlimit, fanotify = ((out / f"{name}.json").read_text() for name in ("sibling_prlimit", "sibling_fanotify"))
    assert "whoami: uid 0 CapEff 0000000000000000" in prlimit, "the batch's workers were meant to stay root"
    assert "cheat: no other process limited" in prlimit
    assert "cheat: fanotify refused" in fanotify
    for text in (prlimit, fanotify):  # importing ctypes is a person's question; the tests ran all the same
        assert json.loads(text)["extra_data"]["status"] == "held"
        assert "imports ctypes" in json.loads(text)["extra_data"]["held"]["reasons"][0]



TEMPFILE_PROBE = '''
import tempfile


def scratch_file():
    """Where tempfile puts a file of the submission's (torch's caches, torch.fx, a student's own)."""
    with tempfile.NamedTemporaryFile() as f:
        f.write(b"x")
        return tempfile.gettempdir()
'''


def test_a_worker_whose_folder_is_inside_a_closed_folder_still_has_a_temporary_folder(tmp_path, monkeypatch):
    """The grader's temporary folder is inside one only root may enter (TMPDIR in root's home; pytest's
    own): a worker that became nobody could not reach its folder by its path, and tempfile, which code
    at import uses (torch.fx's tracing, torch's caches), would find no usable folder at all. The worker
    then stays uid 0 without capabilities, as it does when nobody cannot read Python, and says why."""
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    monkeypatch.setattr(tempfile, "tempdir", str(closed))
    source = tmp_path / "probe.py"
    source.write_text(TEMPFILE_PROBE)
    backend = WorkerBackend(source, isolation.Isolation("process"), Limits(call_timeout=60, memory_mb=3072))
    try:
        assert backend.call("scratch_file").startswith(str(closed)), "the worker's folder is its temporary folder"
        if AS_ROOT:
            assert not any(line.startswith("user: dropped root") for line in backend.confinement), backend.confinement
    finally:
        backend.close()
    assert confine.closed_to_nobody([], str(closed / "worker")) == f"nobody could not enter {closed}, above its folder"
    open_folder = Path(tempfile.mkdtemp(dir="/tmp"))  # /tmp lets everyone in, and so does this one
    open_folder.chmod(0o711)
    try:
        assert confine.closed_to_nobody([], str(open_folder / "worker")) == ""
    finally:
        open_folder.rmdir()
