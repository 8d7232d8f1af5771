"""The isolation levels: what a worker can see and do, the reaper, and the fallback without bubblewrap.

The reaper tests start autograder/isolation/guest/reaper.py on small commands (no torch, fast). The worker
tests run one probe submission per level and ask it what it can see and do.
"""
import importlib.util
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from autograder.core import errors
from autograder.core import rubric as rubric_file
from autograder.core.paths import REFERENCE, REPO
from autograder.core.rubric import Limits
from autograder.isolation.host import levels as isolation
from autograder.isolation.host.worker import REAPER, SCRUBBED_ENV, TOKEN_VAR, kill_leftovers
from autograder.testing.backends import WorkerBackend

MARKER = "mhsa-isolation-test-orphan"
# A process that leaves a grandchild behind in a session of its own, then exits with status 7.
DOUBLE_FORK = textwrap.dedent("""
    import os, sys, time
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(60)
        os._exit(0)
    time.sleep(float(sys.argv[1]))
    os._exit(7)
""")
LEVELS = [pytest.param("sandbox", marks=pytest.mark.skipif(not isolation.sandbox_available(),
                                                           reason="bubblewrap cannot run here")),
          "process"]


def marked_processes():
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and MARKER.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def start_reaper(*command, lifeline_holder=None):
    """The reaper on `command`; returns (reaper, the lifeline's write end or None if handed to a holder)."""
    lifeline_r, lifeline_w = os.pipe()
    reaper = subprocess.Popen([sys.executable, "-I", str(REAPER), str(lifeline_r), "--", *command],
                              pass_fds=(lifeline_r,), start_new_session=True)
    os.close(lifeline_r)
    return reaper, lifeline_w


def wait_until(predicate, seconds=10.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


@pytest.fixture(autouse=True)
def no_orphans_before_or_after():
    for pid in marked_processes():
        os.kill(pid, signal.SIGKILL)
    yield
    assert wait_until(lambda: not marked_processes()), "a process escaped"


def test_when_the_worker_exits_its_orphans_die_and_its_status_is_kept():
    reaper, lifeline = start_reaper(sys.executable, "-c", DOUBLE_FORK, "0.5", MARKER)
    assert reaper.wait(timeout=30) == 7
    assert not marked_processes()
    os.close(lifeline)


@pytest.mark.parametrize("how", ["grader closes the lifeline", "grader dies"])
def test_when_the_grader_lets_go_everything_dies(how):
    reaper, lifeline = start_reaper(sys.executable, "-c", DOUBLE_FORK, "60", MARKER)
    assert wait_until(lambda: len(marked_processes()) >= 2), "the worker and its orphan should be running"
    if how == "grader dies":  # the lifeline's only other holder is a process that is then killed
        holder = subprocess.Popen(["sleep", "60"], pass_fds=(lifeline,))
        os.close(lifeline)
        holder.kill()
        holder.wait()
    else:
        os.close(lifeline)
    assert reaper.wait(timeout=30) == -signal.SIGKILL
    assert not marked_processes()


def test_the_reaper_removes_the_workers_folder_when_the_grader_is_killed(tmp_path):
    """The worker's folder is not left on disk when the grader is SIGKILLed mid-grade."""
    folder = tmp_path / "mhsa-worker-x"
    folder.mkdir()
    (folder / "mhsa.py").write_text("x = 1\n")
    lifeline_r, lifeline_w = os.pipe()
    reaper = subprocess.Popen([sys.executable, "-I", str(REAPER), str(lifeline_r), "--remove", str(folder), "--",
                               sys.executable, "-c", "import time; time.sleep(60)", MARKER],
                              pass_fds=(lifeline_r,), start_new_session=True)
    os.close(lifeline_r)
    holder = subprocess.Popen(["sleep", "60"], pass_fds=(lifeline_w,))  # stands for the grader
    os.close(lifeline_w)
    assert wait_until(lambda: bool(marked_processes()))
    holder.kill()
    holder.wait()
    assert reaper.wait(timeout=30) == -signal.SIGKILL
    assert not folder.exists()


def test_the_reaper_dies_of_the_signal_that_killed_the_worker():
    reaper, lifeline = start_reaper(sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    assert reaper.wait(timeout=30) == -signal.SIGSEGV
    os.close(lifeline)


def test_leftovers_are_found_by_the_token_in_their_environment():
    """The last resort when the reaper itself was killed: anything still carrying the token."""
    stray = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", MARKER],
                             env={TOKEN_VAR: "t0ken", "PATH": "/usr/bin:/bin"}, start_new_session=True)
    try:
        assert wait_until(lambda: stray.pid in marked_processes())
        assert kill_leftovers("t0ken", session_id=-1) == [stray.pid]
        assert stray.wait(timeout=10) == -signal.SIGKILL
    finally:
        stray.kill()


def test_auto_falls_back_to_the_process_level_without_bubblewrap(monkeypatch):
    isolation.sandbox_available.cache_clear()
    monkeypatch.setenv("AUTOGRADER_NO_SANDBOX", "1")
    try:
        assert isolation.resolve("auto") == isolation.Isolation("process")
        with pytest.raises(RuntimeError, match="needs bubblewrap"):
            isolation.resolve("sandbox")
    finally:
        isolation.sandbox_available.cache_clear()


def test_the_sandbox_mounts_neither_the_repository_nor_hidden_paths(tmp_path):
    argv = isolation.sandbox_argv(tmp_path / "work", [REPO / "reference", tmp_path / "results"])
    python = tuple(str(root) for root in isolation.python_roots())  # a venv may live in the repository
    from_repo = [arg for arg in argv if str(REPO) in arg and not arg.startswith(python)]
    assert from_repo == [str(isolation.WORKER_DIR)], "of the repository, only the worker's own code is mounted"
    assert not any("results" in arg for arg in argv), "a hidden path outside every mount is not even named"


PROBE = textwrap.dedent('''
    import ctypes, os, socket, subprocess, torch

    def environment():
        return {"keys": sorted(os.environ), "home": os.environ.get("HOME"), "tmp": os.environ.get("TMPDIR"),
                "cwd": os.getcwd()}

    def exists(path):
        return os.path.exists(path)

    def read(path):
        try:
            with open(path) as f:
                return "read: " + f.read(20)
        except OSError as err:
            return f"refused: {err}"

    def write(path):
        try:
            with open(path, "w") as f:
                f.write("escaped")
            return "written"
        except OSError as err:
            return f"refused: {err}"

    def write_from_c(path):
        """Below Python's audit hooks: only the sandbox's read-only filesystem stops this."""
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.open(path.encode(), os.O_WRONLY | os.O_CREAT, 0o644)
        return "written" if fd >= 0 else f"refused: errno {ctypes.get_errno()}"

    def attempt(what):
        actions = {"subprocess": lambda: subprocess.run(["true"]),
                   "connect": lambda: socket.create_connection(("127.0.0.1", 9), timeout=1),
                   "kill the reaper": lambda: os.kill(os.getppid(), 9)}
        try:
            actions[what]()
            return "done"
        except OSError as err:
            return f"refused: {err}"

    def confined(what, path=""):
        """What the kernel (Landlock, seccomp) refuses even to C code or to dir_fd tricks."""
        import threading
        libc = ctypes.CDLL(None, use_errno=True)
        actions = {
            "read from C": lambda: libc.open(path.encode(), os.O_RDONLY),
            "open with dir_fd": lambda: os.open(os.path.basename(path), os.O_RDONLY,
                                                dir_fd=os.open(os.path.dirname(path), os.O_RDONLY)),
            "socketpair": lambda: socket.socketpair(),
            "socket from C": lambda: libc.socket(socket.AF_INET, socket.SOCK_DGRAM, 0),
            "kill the reaper from C": lambda: libc.kill(os.getppid(), 0),
            "thread": lambda: threading.Thread(target=int).start(),
            "fork from C": lambda: libc.fork(),
        }
        try:
            result = actions[what]()
        except (OSError, RuntimeError) as err:
            return f"refused: {err}"
        if isinstance(result, int) and result < 0:
            return f"refused: errno {ctypes.get_errno()}"
        return "done"

    def allocate(gigabytes):
        try:
            torch.ones(int(gigabytes * 2**28))  # float32: 4 bytes each
            return "allocated"
        except (RuntimeError, MemoryError) as err:
            return f"refused: {type(err).__name__}: {str(err)[:80]}"
''')


@pytest.fixture(params=LEVELS)
def probe(request, tmp_path, monkeypatch):
    """A worker on the probe, hiding tmp_path/hidden and the rubric's paths; a secret in the grader's
    environment."""
    monkeypatch.setenv("MHSA_GRADER_SECRET", "s3cret")
    source = tmp_path / "probe.py"
    source.write_text(PROBE)
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "answers.txt").write_text("the hidden answers")
    backend = WorkerBackend(source, isolation.resolve(request.param), Limits(call_timeout=60, memory_mb=3072),
                            [hidden, *rubric_file.load().hidden])
    yield backend, tmp_path, hidden
    backend.close()


def test_a_worker_sees_a_scrubbed_environment_and_a_private_directory(probe):
    backend, _, _ = probe
    seen = backend.call("environment")
    keys = set(seen["keys"])
    assert "MHSA_GRADER_SECRET" not in keys and keys >= set(SCRUBBED_ENV) | {TOKEN_VAR}
    assert keys & set(os.environ) <= set(SCRUBBED_ENV) | {"HOME", "TMPDIR", "PWD"}, "the grader's variables leaked"
    assert seen["home"] == seen["tmp"] == seen["cwd"] != os.getcwd()
    workdir = Path(seen["cwd"])
    assert workdir.is_dir()
    backend.close()
    assert not workdir.exists(), "the worker's directory is removed when it stops"


def test_a_worker_cannot_read_hidden_paths_or_write_outside_its_directory(probe):
    backend, tmp_path, hidden = probe
    assert backend.call("read", str(hidden / "answers.txt")).startswith("refused")
    assert backend.call("read", str(REFERENCE)).startswith("refused")
    assert backend.call("write", str(tmp_path / "outside.txt")).startswith("refused")
    assert not (tmp_path / "outside.txt").exists()
    assert backend.call("write", backend.call("environment")["cwd"] + "/scratch.txt") == "written"
    if backend.isolation == "sandbox":  # not even there, and not writable from C either
        assert backend.call("exists", str(hidden)) is False
        # The repository's folder itself may exist as an empty mount point when the environment
        # lives inside it (make's .venv); what it holds does not.
        for secret in (REFERENCE, REPO / "tests_hidden", REPO / "rubric.toml", REPO / "corpus"):
            assert backend.call("exists", str(secret)) is False, secret
        assert backend.call("write_from_c", str(tmp_path / "from_c.txt")).startswith("refused")
        assert not (tmp_path / "from_c.txt").exists()


@pytest.mark.parametrize("what", ["subprocess", "connect", "kill the reaper"])
def test_a_worker_cannot_start_processes_use_the_network_or_signal(probe, what):
    backend, _, _ = probe
    assert "refused" in backend.call("attempt", what)


@pytest.mark.parametrize("what", ["socketpair", "socket from C", "kill the reaper from C", "thread", "fork from C"])
def test_the_kernel_refuses_what_audit_hooks_cannot_see(probe, what):
    """seccomp, at both levels: no sockets, signals to others, threads or processes, even from C."""
    backend, _, _ = probe
    assert backend.call("confined", what).startswith("refused")


@pytest.mark.parametrize("what", ["read from C", "open with dir_fd"])
def test_files_outside_the_allowlist_are_unreadable_even_from_c(probe, what):
    """Landlock: a file nothing hides (another checkout of the repository, say) is out of reach too,
    through the C library or a folder's descriptor."""
    backend, tmp_path, _ = probe
    elsewhere = tmp_path / "other-checkout" / "reference" / "mhsa.py"
    elsewhere.parent.mkdir(parents=True)
    elsewhere.write_text("the reference")
    assert backend.call("confined", what, str(elsewhere)).startswith("refused")
    assert backend.call("confined", what, str(REFERENCE)).startswith("refused")


def test_the_worker_reports_its_confinement(probe):
    backend, _, _ = probe
    backend.call("environment")
    assert any(line.startswith("landlock: ABI") for line in backend.confinement), backend.confinement
    assert any(line.startswith("capabilities: none") for line in backend.confinement), backend.confinement
    assert any(line.startswith("seccomp: an allowlist") for line in backend.confinement), backend.confinement


MOUNT_TABLES = ("/proc/self/mountinfo", "/proc/self/mounts", "/proc/mounts", "/proc/self/mountstats",
                "/proc/thread-self/mountinfo", "/etc/mtab", "/proc/self/net/unix")


def test_the_mount_table_is_unreadable_but_the_workers_own_entry_is_not(probe):
    """The host's mounts (paths of its other folders) and sockets are out of reach, from C too; the
    rest of the worker's own /proc entry, which the C library, confine.py and the timing clock read,
    is not."""
    backend, _, _ = probe
    for path in MOUNT_TABLES:
        assert backend.call("read", path).startswith("refused"), path
        assert backend.call("confined", "read from C", path).startswith("refused"), path
    for own in ("/proc/self/status", "/proc/self/maps", "/proc/self/stat", "/proc/self/uid_map",
                "/proc/thread-self/schedstat"):  # the last, gpu_checks' CPU clock
        assert backend.call("read", own).startswith("read: "), own


def host_mount_lines() -> list:
    """Each line of this machine's mount table without its two ids (a new mount namespace renumbers
    them): what a worker that could read the table would show."""
    with open("/proc/self/mountinfo") as f:
        return [" ".join(line.split()[2:]) for line in f if line.strip()]


def test_grade_at_the_process_level_shows_nothing_of_the_hosts_mounts(tmp_path):
    """`grade --isolation process`, as a TA runs it, on the adversarial case whose sdpa raises with the
    mount table when it can read it: full marks, and no line of the host's table in anything printed
    or written."""
    case = _adversarial_case("mount_table", base="reference")
    source, results_file = tmp_path / "mount_table.py", tmp_path / "results.json"
    source.write_text(case.source())
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(source), "--isolation", "process",
                           "--suite", "public", "--results", str(results_file)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    written = results_file.read_text()
    seen = done.stdout + done.stderr + written
    assert "cheat: mount table refused" in written and "mount table read" not in seen, done.stdout[-3000:]
    assert not [line for line in host_mount_lines() if line in seen]
    data = json.loads(written)
    assert data["score"] == data["extra_data"]["max_score"] > 0, done.stdout[-3000:]
    assert data["extra_data"]["isolation"] == "process"


def _adversarial_case(name, base):
    """examples/adversarial/cases/<name>.py on its base, as tests/test_adversarial.py grades it."""
    spec = importlib.util.spec_from_file_location("adversarial_build", REPO / "examples" / "adversarial" / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Case(name, base, loses=(), message="", process=True)


def live_children() -> list:
    me = str(os.getpid()).encode()
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "stat").read_bytes().rsplit(b")", 1)[1].split()[1] == me:
                found.append(int(entry.name))
        except (OSError, IndexError):
            continue
    return found


@pytest.mark.parametrize("level", LEVELS)
def test_malformed_first_replies_never_leave_workers_behind(tmp_path, level):
    """Crafted frames in place of the worker's hello: each is refused as garbage and its worker is
    stopped, so the number of live workers stays bounded however many times it happens."""
    headers = [b'{"$tensor": 0, "dtype": "float32", "shape": [1e999], "nbytes": 4}', b"[" * 100000,
               b'{"$dict": [[1, 2, 3]]}', b'{"$dict": 5}', b'{"$tuple": {"a": 1}}', b'"\\ud800"',
               b'{"$tensor": 0, "dtype": "float32", "shape": [4294967296, 4294967296], "nbytes": 0}',
               b'{"$device": "nowhere"}', b'{"$meta": [1e308], "dtype": "float32"}', b"\xff\xfe",
               b'{"$tensor": 0, "dtype": "float32", "shape": [2], "nbytes": 8, "order": [5]}', b"null"]
    before = len(live_children())
    for i, header in enumerate(headers):
        source = tmp_path / f"garbage{i}.py"
        source.write_text(textwrap.dedent(f"""
            import os, struct, sys
            header = {header!r}
            message = struct.pack("<Q", len(header)) + header
            os.write(int(sys.argv[2]), struct.pack("<Q", len(message)) + message)
            import time; time.sleep(60)
        """))
        backend = WorkerBackend(source, isolation.resolve(level), Limits(import_timeout=60))
        with pytest.raises(errors.SubmissionImportError, match="sent garbage|malformed"):
            backend.call("anything")
        assert len(live_children()) <= before, "a worker outlived its refused reply"
        backend.close()


def test_a_worker_that_stops_reading_costs_the_call_timeout_not_the_grader(tmp_path):
    """A fake "ready", then no reading: a large request must time out, not block the grader."""
    source = tmp_path / "deaf.py"
    source.write_text(textwrap.dedent("""
        import json, os, struct, sys, time
        header = json.dumps({"$dict": [["status", "ready"]]}).encode()
        message = struct.pack("<Q", len(header)) + header
        os.write(int(sys.argv[2]), struct.pack("<Q", len(message)) + message)
        time.sleep(3600)
    """))
    import torch

    backend = WorkerBackend(source, isolation.resolve("process"), Limits(call_timeout=2, import_timeout=60))
    started = time.monotonic()
    try:
        with pytest.raises(errors.SubmissionTimeout):
            backend.call("causal_mask", torch.zeros(1 << 20))  # 4 MB: far more than a pipe holds
    finally:
        backend.close()
    assert time.monotonic() - started < 30


def test_the_memory_limit_holds_with_torch_loaded(probe):
    backend, _, _ = probe
    assert backend.call("allocate", 0.25) == "allocated"
    assert backend.call("allocate", 4).startswith("refused")  # over memory_mb=3072
    assert backend.call("allocate", 0.25) == "allocated", "the worker survives a refused allocation"


def test_the_cpu_limit_kills_a_worker_that_spins(tmp_path):
    source = tmp_path / "spin.py"
    source.write_text("def spin():\n    while True:\n        pass\n")
    backend = WorkerBackend(source, isolation.resolve("process"), Limits(call_timeout=300, cpu_seconds=20))
    try:
        with pytest.raises(errors.SubmissionCrashed, match="CPU time limit"):
            backend.call("spin")
    finally:
        backend.close()
