"""A call the sandbox refuses is named where the student and the instructor read about the failure.

The worker's seccomp filter fails a refused call with errno 3000 + its number (confine.REFUSED_BASE),
so that Python's OSError, torch's "Unknown error N" and the C library's messages carry the call;
the worker's error description (confine.explain, through worker_main.describe_exception) says "the
sandbox refused the system call N (name)" in their place, and "the sandbox refused access to PATH"
for a path outside Landlock's allowlist. docs/isolation.md, "Refusals, named".

The filter is checked without installing it (a small classic-BPF interpreter runs it on every
number), the explanation in a process that installs it, and the whole route through the real
grader: `python -m autograder grade`, at both isolation levels, on a submission whose
scaled_dot_product_attention makes a call only seccomp refuses, and on the reference.
"""
import importlib.util
import json
import platform
import re
import subprocess
import sys
import textwrap

import pytest

from autograder.core import rubric as rubric_file
from autograder.core.paths import REFERENCE, REPO
from autograder.isolation.guest import confine
from autograder.isolation.host import levels as isolation

LINUX = sys.platform.startswith("linux") and platform.machine() in confine.ARCHES
pytestmark = pytest.mark.skipif(not LINUX, reason="the worker's syscall filter exists on Linux x86_64 and aarch64")
LEVELS = [pytest.param("sandbox", marks=pytest.mark.skipif(not isolation.sandbox_available(),
                                                           reason="bubblewrap cannot run here")), "process"]
CODE_PARTS = list(rubric_file.load().code_parts)
NAMED = re.compile(r"the sandbox refused the system call \d+ \((\w+)\)")

# ---- the filter, run by a classic-BPF interpreter ---------------------------------------------------

ALLOW, ERRNO, KILL = confine.SECCOMP_RET_ALLOW, confine.SECCOMP_RET_ERRNO, confine.SECCOMP_RET_KILL_PROCESS
PID = 4242


def run_filter(program, nr, arch, args=(0, 0, 0, 0, 0, 0)):
    """What `program` answers for syscall `nr` of audit architecture `arch` (seccomp_data: nr, arch,
    instruction pointer, six 64-bit arguments), with the instructions confine emits."""
    data = {0: nr, 4: arch} | {16 + 8 * i: value & 0xFFFFFFFF for i, value in enumerate(args)}
    a, pc = 0, 0
    while True:
        code, jt, jf, k = program[pc]
        pc += 1
        if code == confine.LD_W_ABS:
            a = data[k]
        elif code in (confine.JEQ_K, confine.JGE_K, confine.JSET_K):
            hit = a == k if code == confine.JEQ_K else a >= k if code == confine.JGE_K else bool(a & k)
            pc += jt if hit else jf
        elif code == confine.ALU_ADD_K:
            a = (a + k) & 0xFFFFFFFF
        elif code == confine.ALU_OR_K:
            a |= k
        elif code == confine.RET_K:
            return k
        elif code == confine.RET_A:
            return a
        else:
            raise AssertionError(f"an instruction the interpreter does not know: {code:#x}")


@pytest.mark.parametrize("machine", sorted(confine.ARCHES))
def test_every_refused_call_fails_with_the_errno_that_names_it(machine):
    audit_arch, numbers = confine.ARCHES[machine]
    program = confine._filter(audit_arch, numbers, PID, allow_threads=False)
    names = confine.syscall_names(machine)
    allowed = {numbers[n] for n in confine.ALLOWED if n in numbers}
    special = {numbers[n] for n in (*confine.IGNORED, *confine.ON_ITSELF, *confine.ON_ITSELF_OR_ZERO,
                                    "sched_setscheduler", "setpriority", "clone", "clone3") if n in numbers}
    for nr in range(confine.MAX_ERRNO - confine.REFUSED_BASE + 1):
        answer = run_filter(program, nr, audit_arch)
        if nr in allowed:
            assert answer == ALLOW, (nr, names.get(nr))
        elif nr not in special:
            assert answer == ERRNO | (confine.REFUSED_BASE + nr), (nr, names.get(nr), hex(answer))
    # What the kernel's cap would blur, the other architecture and x32 keep plain EPERM or a kill.
    assert run_filter(program, confine.MAX_ERRNO, audit_arch) == ERRNO | confine.EPERM
    assert run_filter(program, numbers["read"], audit_arch ^ 1) == KILL
    if machine == "x86_64":
        assert run_filter(program, 0x40000000 + numbers["read"], audit_arch) == ERRNO | confine.EPERM


@pytest.mark.parametrize("machine", sorted(confine.ARCHES))
def test_the_calls_refused_by_their_arguments_are_named_and_the_fallbacks_stay(machine):
    audit_arch, numbers = confine.ARCHES[machine]
    program = confine._filter(audit_arch, numbers, PID, allow_threads=False)

    def answer(name, *args):
        return run_filter(program, numbers[name], audit_arch, args)

    def refused(name):
        return ERRNO | (confine.REFUSED_BASE + numbers[name])

    assert answer("kill", PID, 0) == ALLOW and answer("kill", 1, 0) == refused("kill")
    assert answer("prlimit64", 0) == answer("prlimit64", PID) == ALLOW
    assert answer("prlimit64", 1) == refused("prlimit64")
    assert answer("sched_setscheduler", 0, 0) == ALLOW
    assert answer("sched_setscheduler", 0, 1) == refused("sched_setscheduler")  # SCHED_FIFO
    assert answer("sched_setscheduler", 1, 0) == refused("sched_setscheduler")  # another process
    assert answer("setpriority", 0, 0) == ALLOW and answer("setpriority", 0, 1) == refused("setpriority")
    assert answer("clone", 0x3D0F00) == refused("clone")  # pthread_create's flags: CLONE_THREAD
    assert answer("clone", 0x11) == refused("clone")  # fork's (SIGCHLD): still no processes
    # The C library falls back from ENOSYS to clone, whose flags the filter reads; chmod and utime
    # succeed without effect, so that shutil.copy and Path.touch work.
    assert answer("clone3") == ERRNO | confine.ENOSYS
    assert all(answer(name) == ERRNO for name in confine.IGNORED if name in numbers)
    threads = confine._filter(audit_arch, numbers, PID, allow_threads=True)
    assert run_filter(threads, numbers["clone"], audit_arch, (0x3D0F00,)) == ALLOW
    assert run_filter(threads, numbers["clone"], audit_arch, (0x11,)) == refused("clone")


@pytest.mark.parametrize("machine", sorted(confine.ARCHES))
def test_the_name_tables_agree_with_the_allowlists_numbers(machine):
    names = confine.syscall_names(machine)
    _, numbers = confine.ARCHES[machine]
    assert {name: names.get(number) for name, number in numbers.items() if names.get(number) != name} == {}
    assert len(set(names.values())) == len(names), "a name twice"
    assert names[435] == "clone3" and names[462] == "mseal"


# ---- the explanation, in a process that confined itself ----------------------------------------------

EXPLAINED = textwrap.dedent('''
    import json, os, sys, threading
    sys.path.insert(0, sys.argv[1])
    import confine

    os.makedirs(sys.argv[2], exist_ok=True)
    confine.landlock([sys.prefix, sys.base_prefix, "/usr", "/lib", "/lib64", "/etc", sys.argv[1]], [sys.argv[2]])
    confine.seccomp()

    def raised(action):
        try:
            action()
        except BaseException as err:  # noqa: BLE001
            return confine.explain(err, str(err))
        return "no error"

    def chained():
        try:
            os.setsid()
        except OSError as err:
            raise ValueError("could not start a session") from err

    def torch_style():  # torch's C++ puts strerror's text in a RuntimeError's message
        try:
            os.mknod(os.path.join(sys.argv[2], "node"))
        except OSError as err:
            raise RuntimeError(f"open failed: {os.strerror(err.errno)} ({err.errno})") from None

    print(json.dumps({
        "mknod": raised(lambda: os.mknod(os.path.join(sys.argv[2], "node"))),
        "setuid": raised(lambda: os.setuid(os.getuid())),
        "chained": raised(chained),
        "torch_style": raised(torch_style),
        "thread": raised(lambda: threading.Thread(target=int).start()),
        "outside": raised(lambda: open("/proc/1/status")),
        "inside_missing": raised(lambda: open(os.path.join(sys.argv[2], "missing"))),
        "plain": raised(lambda: int("x")),
        "own_errno": raised(lambda: (_ for _ in ()).throw(PermissionError(1, "Operation not permitted"))),
    }))
''')


def test_a_refusal_is_named_in_the_error_text(tmp_path):
    guest = REPO / "autograder" / "isolation" / "guest"
    script = tmp_path / "explained.py"
    script.write_text(EXPLAINED)
    done = subprocess.run([sys.executable, "-I", str(script), str(guest), str(tmp_path / "own")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    said = json.loads(done.stdout)
    assert re.fullmatch(r"\[Errno 3\d+\] the sandbox refused the system call \d+ \(mknod(at)?\)", said["mknod"]), said
    assert NAMED.search(said["setuid"]).group(1) == "setuid", said
    assert said["chained"].startswith("could not start a session (the sandbox refused the system call"), said
    assert "(setsid)" in said["chained"], said
    assert re.fullmatch(r"open failed: the sandbox refused the system call \d+ \(mknod(at)?\) \(3\d+\)",
                        said["torch_style"]), said
    assert said["thread"].startswith("can't start new thread (the sandbox refused the system call"), said
    assert "(clone): no threads while grading" in said["thread"], said
    assert said["outside"].endswith("(the sandbox refused access to /proc/1/status)"), said
    # What the sandbox did not refuse is left as it was.
    assert "sandbox" not in said["inside_missing"] and "No such file" in said["inside_missing"], said
    assert said["plain"] == "invalid literal for int() with base 10: 'x'", said
    assert said["own_errno"] == "[Errno 1] Operation not permitted", said


def test_nothing_is_explained_in_a_process_that_did_not_confine_itself():
    err = OSError(confine.REFUSED_BASE + 41, "Unknown error 3041")
    assert confine.explain(err, str(err)) == str(err)


# ---- through the real grader ------------------------------------------------------------------------

# A call that Python's audit hook lets through (a write inside the worker's own folder), Landlock
# would allow (a regular file there), and only the allowlist refuses: mknod (mknodat in recent
# C libraries).
SECCOMP_ONLY = '''

import os as _os

_reference_sdpa = scaled_dot_product_attention


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):
    _os.mknod("refused.bin")
    return _reference_sdpa(q, k, v, attn_mask, dropout_p, training)
'''
# A file outside Landlock's allowlist (another process's /proc entry) that the audit hook does not hide.
LANDLOCK_ONLY = '''

_reference_sdpa = scaled_dot_product_attention


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):
    open("/proc/1/status").close()
    return _reference_sdpa(q, k, v, attn_mask, dropout_p, training)
'''


def grade(path, *options):
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(path), *options], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def failed_tests(stdout: str) -> dict:
    """{test: its message} of each FAILED block of `grade`'s table."""
    blocks = re.split(r"^  FAILED ", stdout, flags=re.M)[1:]
    return {block.split("\n", 1)[0]: block.split("\n", 1)[1] for block in blocks}


@pytest.mark.parametrize("level", LEVELS)
def test_a_call_only_seccomp_refuses_is_named_in_the_failed_tests_message(tmp_path, level):
    path = tmp_path / "mhsa.py"
    path.write_text(REFERENCE.read_text() + SECCOMP_ONLY)
    stdout = grade(path, "--suite", "public", "--isolation", level)
    assert f"isolation: {level}" in stdout
    failed = failed_tests(stdout)
    sdpa = [message for test, message in failed.items() if test.startswith("sdpa ")]
    assert sdpa, stdout[-3000:]
    for message in sdpa:
        first = message.strip().split("\n", 1)[0]
        assert re.fullmatch(r"OSError: \[Errno 3\d+\] the sandbox refused the system call \d+ \(mknod(at)?\)",
                            first), message


@pytest.mark.parametrize("level", LEVELS)
def test_a_path_outside_landlocks_allowlist_is_named(tmp_path, level):
    path = tmp_path / "mhsa.py"
    path.write_text(REFERENCE.read_text() + LANDLOCK_ONLY)
    stdout = grade(path, "--suite", "public", "--isolation", level)
    sdpa = [message for test, message in failed_tests(stdout).items() if test.startswith("sdpa ")]
    assert sdpa and all("(the sandbox refused access to /proc/1/status)" in m for m in sdpa), stdout[-3000:]


@pytest.mark.parametrize("level", LEVELS)
def test_the_reference_still_gets_full_marks(tmp_path, level):
    results = tmp_path / "results.json"
    stdout = grade(REFERENCE, "--isolation", level, "--results", str(results))
    data = json.loads(results.read_text())
    parts = data["extra_data"]["parts"]
    assert data["extra_data"]["isolation"] == level and data["extra_data"]["status"] == "graded"
    assert {p: parts[p]["score"] for p in CODE_PARTS} == {p: parts[p]["max_score"] for p in CODE_PARTS}, stdout
    assert "sandbox refused" not in json.dumps(data)


# ---- the benchmark script ---------------------------------------------------------------------------

def _benchmark():
    spec = importlib.util.spec_from_file_location("sandbox_refusals", REPO / "benchmarks" / "sandbox_refusals.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_benchmark_builds_its_corpus_and_reads_refusals(tmp_path):
    """The benchmark is run by hand: its folder and its reading of strace's lines must not rot."""
    benchmark = _benchmark()
    expected = benchmark.build_corpus(tmp_path / "corpus")
    assert len(expected) >= 30 and set(expected.values()) <= {"full", "partial", "none"}
    assert sorted(p.name.rsplit(".", 1)[0] for p in (tmp_path / "corpus").iterdir()) == sorted(expected)
    names = confine.syscall_names("x86_64")
    lines = ["1234  mknodat(AT_FDCWD, \"x\", 0600) = -1 (errno 3259)",  # strace 6
             "1234  clone(child_stack=NULL, flags=CLONE_VM) = -1 E??? (Unknown error 3056)",  # older
             "1234  openat(AT_FDCWD, \"/proc/1/status\", O_RDONLY) = -1 EACCES (Permission denied)",
             "1234  clone3({flags=CLONE_VM}, 88) = -1 ENOSYS (Function not implemented)"]
    assert benchmark.refusals_in(lines, names) == {"mknodat (259)": 1, "clone (56)": 1}
