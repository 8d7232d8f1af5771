"""The worker template: a grader slot's pristine worker that forks one confined child per worker.

Each test grades (or probes) two submissions through the same template, the first tampering with
everything a Python process holds, the second looking for it, and compares what the second finds
with what a worker spawned the old way (a new Python) finds. The tamperer's own view is checked too:
the tampering took, so a leak would show. The forked child must also be confined exactly as a
spawned worker is, at both levels.
"""
import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

from autograder.core import rubric
from autograder.core.paths import REFERENCE
from autograder.core.rubric import Limits
from autograder.isolation.host import levels as isolation, worker, worker_template
from autograder.pipeline.grade_file import GradeOptions
from autograder.runners import slot
from autograder.testing.backends import WorkerBackend

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the template forks confined children on Linux")
LEVELS = ["process", *(["sandbox"] if isolation.sandbox_available() else [])]
LIMITS = Limits(call_timeout=60, import_timeout=120, memory_mb=3072)

# What a submission could find that an earlier one left behind: its files, in its folder and /tmp;
# modules; torch's global state and generator; threads; environment. Everything here is the same in
# every freshly started worker (the folder's path and the pid are not asked).
STATE = textwrap.dedent('''
    import os, sys, threading, time, types
    import torch
    import torch.nn.functional as F

    def generator():
        """The default generator as the submission finds it at import (every call is seeded anew)."""
        return {"seed": torch.initial_seed(), "rand": torch.rand(3, dtype=torch.float32).tolist()}

    AT_IMPORT = generator()

    def state():
        try:
            tmp = sorted(n for n in os.listdir("/tmp") if n.startswith("left-by"))
        except OSError as err:
            tmp = err.strerror
        probe = torch.tensor([[1.0, 2.0]])
        return {
            "files": sorted(n for n in os.listdir(".") if n != "mhsa.py"),
            "tmp": tmp,
            "softmax": F.softmax(probe, dim=-1).tolist() + torch.softmax(probe, -1).tolist() + probe.softmax(-1).tolist(),
            "modules": sorted(n for n in sys.modules if n.startswith("left_by")),
            "dtype": str(torch.get_default_dtype()),
            **AT_IMPORT,
            "torch_threads": torch.get_num_threads(),
            "grad": torch.is_grad_enabled(),
            "deterministic": torch.are_deterministic_algorithms_enabled(),
            "printed": repr(torch.tensor([1.123456789], dtype=torch.float32)),
            "python_threads": threading.active_count(),
            "env": sorted(k for k in os.environ if k.startswith("LEFT_BY")),
        }
''')
TAMPER = STATE + textwrap.dedent('''
    with open("left-by-first.txt", "w") as f:
        f.write("for the next one")
    try:
        with open("/tmp/left-by-first", "w") as f:
            f.write("for the next one")
    except OSError:
        pass  # Landlock: only its own folder is writable
    zeros = lambda x, *a, **k: torch.zeros_like(x)
    F.softmax = torch.softmax = torch.Tensor.softmax = zeros
    sys.modules["left_by_first"] = types.ModuleType("left_by_first")
    torch.set_default_dtype(torch.float64)
    torch.manual_seed(123)
    torch.set_grad_enabled(False)
    torch.use_deterministic_algorithms(True)
    torch.set_printoptions(precision=1)
    os.environ["LEFT_BY_FIRST"] = "1"
    # The folder the next worker is made in (forked: the template's; spawned: the worker's parent),
    # made unreachable through a descriptor, which no path check sees; and its times changed
    parent = os.open(os.path.dirname(os.getcwd()), os.O_PATH | os.O_DIRECTORY)
    for change in (lambda: os.chmod(".", 0, dir_fd=parent), lambda: os.utime(".", (0, 0), dir_fd=parent)):
        try:
            change()
        except OSError:
            pass
    AT_IMPORT = generator()
    try:
        torch.set_num_threads(3)
    except RuntimeError:
        pass
    try:
        threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
    except RuntimeError:
        pass  # seccomp: no threads in a worker
''')
# The kernel's side of the confinement, read from inside: what the worker holds and what it may do.
CONFINED = textwrap.dedent('''
    import ctypes, errno, os

    _libc = ctypes.CDLL(None, use_errno=True)

    def _outcome(result):
        return "allowed" if result >= 0 else "refused: " + errno.errorcode.get(ctypes.get_errno(), f"errno {ctypes.get_errno()}")

    def confinement(reference):
        with open("/proc/self/status") as f:
            status = {k: v.strip() for k, v in (line.split(":", 1) for line in f)}
        pid = _libc.fork()
        if pid == 0:
            _libc._exit(0)
        folder = os.statvfs(".")
        return {
            "capabilities": [status[k] for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")],
            "no_new_privs": status["NoNewPrivs"], "seccomp": status["Seccomp"],
            "socket": _outcome(_libc.socket(2, 1, 0)),
            "fork": _outcome(pid),
            "reference": _outcome(_libc.open(reference.encode(), 0)),
            "write_tmp": _outcome(_libc.open(b"/tmp/left-by-probe", 0o101, 0o644)),
            "folder_mb": folder.f_blocks * folder.f_frsize >> 20,
            "chmod_parent": _kept(os.path.dirname(os.getcwd()), lambda p: _libc.chmod(p.encode(), 0)),
            "chmod_own_file": _kept("mhsa.py", lambda p: _libc.chmod(p.encode(), 0o777)),
            "touch_parent": _kept(os.path.dirname(os.getcwd()), lambda p: _libc.utimes(p.encode(), None)),
        }

    def _kept(path, change):
        """What a change of `path`'s mode or times returned, and whether they are as before."""
        before = os.stat(path)
        result = _outcome(change(path))
        after = os.stat(path)
        return result, (after.st_mode, after.st_mtime_ns) == (before.st_mode, before.st_mtime_ns)
''')


@pytest.fixture(scope="module", params=LEVELS)
def template(request, tmp_path_factory):
    """A started template at each level, installed for this process as a grader slot installs it."""
    level = isolation.Isolation(request.param)
    log = tmp_path_factory.mktemp("template") / "slot.log"
    with open(log, "w") as sink:
        started = worker_template.WorkerTemplate(level, rubric.load().hidden, log=sink)
        worker.install_template(started)
        try:
            yield started, log
        finally:
            worker.install_template(None)
            started.stop()


def submission(tmp_path, name, source):
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    return path


def probe(path, template, *call):
    """(the call's result, whether the worker was forked from the template) for one fresh worker."""
    backend = WorkerBackend(path, template.isolation, LIMITS, rubric.load().hidden)
    try:
        result = backend.call(*call)
        return result, backend._worker.forked
    finally:
        backend.close()


def spawned(path, template, *call):
    """The same call in a worker spawned as before templates: a new Python."""
    worker.install_template(None)
    try:
        result, forked = probe(path, template, *call)
    finally:
        worker.install_template(template)
    assert not forked
    return result


def test_a_submission_can_neither_see_nor_change_the_next_one(template, tmp_path):
    template, _ = template
    tamperer, checker = submission(tmp_path, "tamperer", TAMPER), submission(tmp_path, "checker", STATE)
    fresh = spawned(checker, template, "state")

    tampered, forked = probe(tamperer, template, "state")
    assert forked
    changed = {key for key in fresh if tampered[key] != fresh[key]}
    assert changed >= {"files", "softmax", "modules", "dtype", "seed", "rand", "grad", "deterministic", "printed",
                       "env"}, "the tampering did not take: the check below would prove nothing"
    assert tampered["tmp"] == fresh["tmp"] and tampered["python_threads"] == 1, "it could write /tmp or start a thread"

    after, forked = probe(checker, template, "state")
    again, _ = probe(checker, template, "state")
    assert forked
    random = ("seed", "rand")  # torch seeds its generator at random in every new process
    assert {k: v for k, v in after.items() if k not in random} == {k: v for k, v in fresh.items() if k not in random}
    assert after["seed"] != tampered["seed"] and after["rand"] != tampered["rand"]
    assert after["seed"] != again["seed"], "each child is seeded anew, as a new process is"


def test_a_forked_worker_is_confined_as_a_spawned_one(template, tmp_path):
    template, _ = template
    source = submission(tmp_path, "confined", CONFINED)
    reference = str(REFERENCE.resolve())
    forked, was_forked = probe(source, template, "confinement", reference)
    assert was_forked
    assert forked == spawned(source, template, "confinement", reference)
    assert forked["seccomp"] == "2" and forked["no_new_privs"] == "1"
    assert all(int(mask, 16) == 0 for mask in forked["capabilities"][:3] + forked["capabilities"][4:])
    # refused by the filter, with the errno that names the call (3000 + its number, confine.REFUSED_BASE)
    assert forked["socket"].startswith("refused: errno 30") and forked["fork"].startswith("refused: errno 30")
    assert forked["reference"] != "allowed" and forked["write_tmp"] != "allowed"
    assert forked["folder_mb"] == 64, "its folder is a 64 MB tmpfs of its own"
    # Landlock does not cover a file's mode and times: seccomp makes such calls succeed with no effect
    assert forked["chmod_parent"] == forked["chmod_own_file"] == forked["touch_parent"] == ("allowed", True)


def test_a_template_that_dies_is_restarted_and_no_worker_is_lost(template, tmp_path):
    template, log = template
    checker = submission(tmp_path, "checker", STATE)
    template.proc.kill()  # the template's reaper: it takes the template and its children with it
    template.proc.wait()
    _, forked = probe(checker, template, "state")
    assert not forked, "the worker asked for while the template was dead is spawned"
    _, forked = probe(checker, template, "state")
    assert forked, "the restarted template serves the next one"
    assert "worker template restarted: it ended" in log.read_text()


def test_a_child_that_fails_before_its_submission_restarts_the_template(template, tmp_path):
    """A forked worker that cannot enter its folder (here: it is missing) fails before it reads the
    submission: the template is at fault, so it is restarted and the worker spawned, never the student
    blamed."""
    template, log = template
    workdir = Path(template.serving_folder()) / "missing-worker-folder"
    pipes = [os.pipe() for _ in range(4)]
    fds = [pipes[0][0], pipes[1][1], pipes[2][1], pipes[3][0]]  # request, reply, output, lifeline
    try:
        child = template.spawn(workdir, workdir / "mhsa.py", {}, {}, fds)
    finally:
        for read, write in pipes:
            os.close(read)
            os.close(write)
    assert child is None
    assert "worker template restarted: a worker it was asked for did not get ready" in log.read_text()
    _, forked = probe(submission(tmp_path, "checker", STATE), template, "state")
    assert forked, "the restarted template serves the next one"


def test_a_grade_hiding_what_the_sandbox_shows_is_not_forked(template):
    """The template's sandbox masks what the slot hides; a grade that must hide more (a path inside
    the Python installation) spawns its own; so does one at another level."""
    template, _ = template
    inside = isolation.torch_init_file()
    assert template.fits(template.isolation, [*rubric.load().hidden, Path("/nonexistent-elsewhere")])
    assert template.fits(template.isolation, [inside]) == (template.isolation.level == "process"), \
        "the audit hook denies it to each process-level worker; the sandbox's view is the template's"
    other = isolation.Isolation("sandbox" if template.isolation.level == "process" else "process")
    assert not template.fits(other, [])


def test_a_slot_grades_the_reference_in_full_after_a_tamperer(tmp_path):
    """Two submissions through one grader slot and its template: the first replaces softmax, sets
    float64, a seed, no grad and deterministic algorithms, writes files and variables; the reference
    graded next gets full marks."""
    tamperer = submission(tmp_path, "tamperer", REFERENCE.read_text() + TAMPER)
    log = tmp_path / "slot.log"
    grader = slot.Slot([*slot.SLOT_COMMAND], GradeOptions(suite="public"), log)
    rules = rubric.load()
    try:
        for name, path in (("tamperer", tamperer), ("reference", REFERENCE)):
            slot.grade_in_slot(grader, slot.Submission(name, path), tmp_path / f"{name}.json", rules, "auto", lambda: 90)
    finally:
        grader.close()
    first, second = (json.loads((tmp_path / f"{name}.json").read_text()) for name in ("tamperer", "reference"))
    assert first["score"] < first["extra_data"]["max_score"], "the tampering cost the tamperer its points"
    assert second["score"] == second["extra_data"]["max_score"] and second["extra_data"]["status"] == "graded"
    said = log.read_text()
    assert "worker template ready" in said and "restarted" not in said and "not used" not in said, said


def what_a_grade_starts() -> tuple:
    """(its own template, its spawned worker), each None where it has none, as a process-level grade
    of the reference starts them in start_worker; stopped again at once."""
    from autograder.pipeline.context import GradingContext

    ctx = GradingContext.create(REFERENCE, suites=("public",), isolation="process", extras=False,
                                rubric=rubric.load())
    try:
        ctx.start_worker(REFERENCE)
        return ctx._template, ctx._started
    finally:
        ctx.close()


def test_a_lone_grade_starts_no_template_where_the_kernel_has_no_landlock(monkeypatch):
    """The template would refuse there (its children's writes could reach the next one): a lone grade
    asks the kernel first and spawns its worker at once, as it would with AUTOGRADER_NO_TEMPLATE."""
    monkeypatch.setattr(worker, "_template", None)  # a lone grade: no slot's template (this module's fixture)
    monkeypatch.delenv(worker_template.DISABLE_VAR, raising=False)
    if worker_template.confine.landlock_abi() >= 1:  # the control: with Landlock the grade has a template
        template, spawned = what_a_grade_starts()
        assert template is not None and spawned is None
    monkeypatch.setattr(worker_template.confine, "landlock_abi", lambda: 0)
    template, spawned = what_a_grade_starts()
    assert template is None and spawned is not None and not spawned.forked


def test_a_grade_in_a_slot_whose_template_was_given_up_spawns_at_once(monkeypatch):
    """A slot's template decides for its grades: given up, each grade spawns its worker at once (as
    before), and starts no template of its own."""
    class GivenUp:
        given_up = "it did not say it was ready within 60 s, 3 times in a row"

        def fits(self, isolation, hidden):
            return True

    monkeypatch.setattr(worker, "_template", GivenUp())
    template, spawned = what_a_grade_starts()
    assert template is None and spawned is not None and not spawned.forked


def test_a_level_whose_template_refused_gets_no_template_again_in_this_process(monkeypatch):
    """A refusal is the kernel's answer (no mount namespace here): later lone grades at that level
    spawn their workers at once instead of starting a template that would refuse again."""
    monkeypatch.setattr(worker, "_template", None)  # a lone grade: no slot's template (this module's fixture)
    monkeypatch.setitem(worker_template._refused, "process", "no mount namespace can be made here")
    template, spawned = what_a_grade_starts()
    assert template is None and spawned is not None
