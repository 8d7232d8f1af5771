"""Every case of the adversarial corpus (examples/adversarial) graded by the real engine.

Each case is a correct (or stub) submission with one bad behaviour. The grade must finish; the parts
the manifest names lose points with a message the student can read; every other part keeps full
credit; cheats gain nothing; no process the case started survives; nothing is written outside the
worker's own directory. Every case runs at the strongest level this machine has, its workers forked
from one template that serves every case in turn, as a grader slot's serves a class (the route of
every batch and Gradescope grade where the kernel has Landlock): a cheat that left a process or a
file in it would meet the next case. The ones marked `process` in the manifest also run at the
process level with no template, every worker a Python spawned for it: the fallback on a machine
without user namespaces, which has neither bubblewrap nor a template. A lone grade's own template is
tested in tests/test_worker_template.py and tests/test_grading.py.
"""
import importlib.util
import os
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import pytest

from autograder.core import errors
from autograder.core import rubric as rubric_file
from autograder.core.paths import REFERENCE
from autograder.intake import submission
from autograder.isolation.host import worker, worker_template
from autograder.isolation.host.levels import resolve
from autograder.isolation.host.worker import WorkerProcess
from autograder.pipeline import grading
from autograder.record import results
from autograder.testing import backends
from autograder.record.grade import Status

CORPUS = rubric_file.REPO / "examples" / "adversarial"
FORGED_CANARY = Path("/tmp/mhsa-adversarial-forged.json")  # a path forge_results.py writes to
ORPHAN_MARKER = b"mhsa-adversarial-orphan"  # in the command line of spawn_background.py's orphan
OTHER_CHECKOUT = Path("/tmp/mhsa-adversarial-checkout")  # the path other_checkout.py reads


def _load_corpus():
    spec = importlib.util.spec_from_file_location("adversarial_build", CORPUS / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CASES = _load_corpus().cases()
RUBRIC = rubric_file.load()
# Short limits keep the corpus quick; both still cover a call and importing torch on a busy machine.
FAST = replace(RUBRIC, limits=replace(RUBRIC.limits, call_timeout=6.0, memory_mb=3072))
RUNS = [pytest.param(c, "auto", id=f"{c.name}-auto") for c in CASES] + \
       [pytest.param(c, "process", id=f"{c.name}-process") for c in CASES if c.process]


@pytest.fixture(scope="module", autouse=True)
def other_checkout():
    """A second copy of the reference at a fixed path outside the repository, for other_checkout.py."""
    target = OTHER_CHECKOUT / "reference" / "mhsa.py"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(REFERENCE.read_text())
    OTHER_CHECKOUT.chmod(0o755)
    yield
    shutil.rmtree(OTHER_CHECKOUT, ignore_errors=True)


@pytest.fixture(scope="module")
def slot(tmp_path_factory):
    """The template every case at the strongest level forks its workers from, started as a grader
    slot starts its own, and the hidden results folder it keeps from them; None where this machine
    cannot run one (the cases then spawn their workers)."""
    hidden = tmp_path_factory.mktemp("hidden") / "results"
    hidden.mkdir()
    template = worker_template.start("auto", [hidden], log=worker_template.QUIET)
    worker.install_template(None)  # installed for the cases at that level only (test_case_is_graded...)
    if template is not None and template.serving_folder() is None:  # it refused: no Landlock here
        template = None
    yield template, hidden
    if template is not None:
        template.stop()


@pytest.fixture
def scene(tmp_path, monkeypatch, slot):
    """A private temporary folder for the grade's and the workers' directories, and a hidden
    results folder: after the grade both must be empty again, and so must the slot's template's
    folder, with no child of the template left."""
    template, hidden = slot
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    FORGED_CANARY.unlink(missing_ok=True)
    yield tmp_path, tmp, hidden
    assert survivors(str(tmp).encode(), template) == [], "a process the submission started is still running"
    assert list(tmp.iterdir()) == [], "something was left or written beside the worker's directory"
    assert list(hidden.iterdir()) == [], "something was written into a hidden folder"
    if template is not None:  # a cheat costs the slot's later grades nothing: its template still serves
        assert not template.given_up, f"the slot's template was given up: {template.given_up}"
        assert list(template.folder.iterdir()) == [], "something was left in the template's folder"
    assert not FORGED_CANARY.exists(), f"the submission wrote {FORGED_CANARY}"


def survivors(marker: bytes, template=None, grace_s=5.0) -> list:
    """Processes of the grade still alive: its command line names the grade's private folder (a
    spawned worker's reaper), or its working directory lies in it, or it is the orphan, or it
    descends from the slot's template and is not the template itself (a worker forked from it, or
    anything such a worker started: the template's supervisor of each worker is a child subreaper).
    A forked worker's supervisor reports the worker's end and then exits, so those get `grace_s`."""
    deadline = time.monotonic() + grace_s
    while True:
        table = processes()
        own = template_chain(template, table) if template is not None and not template.given_up else set()
        forked = descendants(template.proc.pid, table) - own if own else set()
        found = [(pid, cmdline.replace(b"\0", b" ")[:200]) for pid, (_, cmdline, folder) in table.items()
                 if pid not in own and (marker in cmdline or folder.startswith(marker) or ORPHAN_MARKER in cmdline
                                        or pid in forked)]
        if not found or time.monotonic() > deadline or not set(dict(found)) <= forked:
            return found
        time.sleep(0.05)


def processes() -> dict:
    """pid -> (parent pid, command line, working directory) of every other process but the dead
    ones not yet waited for (zombies)."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            state, parent = (entry / "stat").read_bytes().rsplit(b")", 1)[1].split()[:2]
            if state == b"Z":
                continue
            parent = int(parent)
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        try:
            folder = os.fsencode(os.readlink(entry / "cwd"))
        except OSError:
            folder = b""
        table[int(entry.name)] = (parent, cmdline, folder)
    return table


def descendants(root: int, table: dict) -> set:
    found, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, (parent, *_) in table.items() if parent in frontier} - found
        found |= frontier
    return found


def template_chain(template, table) -> set:
    """The template's own processes: its reaper, bubblewrap's two where there is a sandbox, and the
    template's Python, the first Python below the reaper; the workers it forks are that Python's
    children."""
    chain, pid = {template.proc.pid}, template.proc.pid
    while True:
        children = [c for c, (parent, *_) in table.items() if parent == pid]
        if len(children) != 1:
            return chain
        pid = children[0]
        chain.add(pid)
        if os.path.basename(table[pid][1].split(b"\0")[0]).startswith(b"python"):
            return chain


def feedback(grade) -> str:
    """Everything a student reads about the grade."""
    texts = [results.test_output(t, FAST) for t in grade.tests if not t.passed]
    texts += [note for p in grade.parts.values() for note in p.notes] + [grade.output, *grade.notes]
    held = results.held_lines(grade) if grade.status == Status.HELD else []
    return "\n".join([*held, *texts])


def grade_case(case, level, folder, hidden, rubric=FAST):
    if case.call_timeout_s is not None:
        rubric = replace(rubric, limits=replace(rubric.limits, call_timeout=case.call_timeout_s))
    if case.import_timeout_s is not None:
        rubric = replace(rubric, limits=replace(rubric.limits, import_timeout=case.import_timeout_s))
    path = folder / f"{case.name}.py"
    path.write_text(case.source())
    return grading.grade(path, suites=("public",), isolation=level, hide=[hidden], rubric=rubric, extras=False)


@pytest.mark.parametrize("case, level", RUNS)
def test_case_is_graded_as_the_manifest_says(case, level, scene, slot, monkeypatch, request):
    folder, _, hidden = scene
    if level == "process":
        monkeypatch.setenv(worker_template.DISABLE_VAR, "1")
    else:
        worker.install_template(slot[0])
        request.addfinalizer(lambda: worker.install_template(None))
    grade = grade_case(case, level, folder, hidden)

    assert grade.isolation == resolve(level).level
    losing = set(grade.parts) if case.loses == "all" else set(case.loses)
    assert set(grade.parts) >= losing
    text = feedback(grade)
    if case.held:  # a person decides: the total is withheld; the tests show the run-time defences
        assert grade.status == Status.HELD and grade.score == 0, \
            f"{grade.status} {grade.score}: {dict((n, p.score) for n, p in grade.parts.items())}\n{text[:3000]}"
        assert any(case.held.lower() in r.lower() for reasons in grade.held.values() for r in reasons), grade.held
        tested = {t.part for t in grade.tests}
        failing = {t.part for t in grade.tests if not t.passed}
        assert failing == losing & tested, f"tests failed in {failing}, expected {losing & tested}:\n{text[:3000]}"
    else:
        assert grade.status == "graded", grade.held
        for name, part in grade.parts.items():
            if name in losing:
                assert part.score < part.max_score, f"{name} kept full credit"
            else:
                assert part.score == part.max_score, f"{name} lost points it should keep:\n{text[:3000]}"
    if case.base == "stubs":
        assert grade.score == 0 and grade.earned_units == 0, "a cheat on the stubs gained points"
    assert case.message.lower() in text.lower(), text[:3000]
    assert not errors.CONTROL.search(text), "a control character reached the student's feedback"


def test_the_check_after_each_case_finds_a_worker_forked_from_the_slots_template(slot, tmp_path):
    """The control for the check after each case: a worker forked from the slot's template is found
    (with its folder in the template's) while it runs, and nothing once it is stopped."""
    template, hidden = slot
    if template is None:
        pytest.skip("no worker template on this machine: every case spawns its workers")
    source = tmp_path / "mhsa.py"
    source.write_text(REFERENCE.read_text())
    running = WorkerProcess(source, resolve("auto"), FAST.limits, [hidden], template=template)
    try:
        assert running.forked and running.proc.pid in dict(survivors(b"/no-such-folder", template, grace_s=0))
        assert list(template.folder.iterdir()) != []
    finally:
        running.stop()
    assert survivors(b"/no-such-folder", template) == [] and list(template.folder.iterdir()) == []


def test_reading_the_reference_works_without_isolation(tmp_path, monkeypatch, capsys):
    """The control for read_hidden: the same cheat run with no isolation at all (in this process,
    from the repository) does find and run the reference, so the 0 above is the grader's doing
    (the static scan and the worker's confinement) and not a dud case."""
    case = next(c for c in CASES if c.name == "read_hidden")
    path = tmp_path / "read_hidden.py"
    path.write_text(case.source())
    monkeypatch.chdir(REFERENCE.parents[1])
    backend = backends.in_process(path)
    assert "cheat: running the reference" in capsys.readouterr().out
    assert backend.call("causal_mask", 3).shape == (3, 3), "the stubs would raise NotImplementedError"


def test_the_corpus_covers_the_brief():
    """The behaviours the grader promises to survive each have a case."""
    names = {c.name for c in CASES}
    assert names >= {"syntax_error", "missing_function", "wrong_signature", "exception", "exit_at_import",
                     "exit_in_function", "os_exit", "segfault", "loop_at_import", "loop_in_function",
                     "memory_bomb", "print_flood", "wrong_shape", "wrong_dtype", "wrong_device", "nan",
                     "lying_subclass", "read_hidden", "forge_results", "monkeypatch_compare", "zero_inputs",
                     "spawn_background", "forbidden_getattr", "forbidden_torch_ops", "disable_monitor",
                     "thread_attention", "utf7_hidden_import", "builtins_lookup", "computed_private",
                     "interpreter_modules", "huge_message", "replace_describe", "large_output", "malformed_reply",
                     "stop_reading", "fill_disk", "dir_fd_read", "other_checkout", "network", "memory_bomb_forward",
                     "value_error_stubs",
                     # every route around the scan and the monitor found by attacking the grader
                     "deep_chain", "attrgetter_internals", "disable_torch_function", "disable_torch_dispatch",
                     "getattr_alias", "module_alias", "numpy_ctypes", "open_written_module",
                     "torch_hub_package_library"}


# The forbidden-attention routes: each must end with a finding that zeroes a part or a hold.
ATTENTION_ROUTES = ("deep_chain", "attrgetter_internals", "disable_torch_function", "disable_torch_dispatch",
                    "getattr_alias", "module_alias", "open_written_module", "forbidden_getattr",
                    "forbidden_torch_ops", "computed_private", "builtins_lookup", "thread_attention",
                    "utf7_hidden_import", "disable_monitor", "interpreter_modules", "resolver_modes_off",
                    "partial_modes_off", "mock_getter_module", "thread_resolver", "code_taken_at_import",
                    "gc_undoes_refusal", "onnx_attention_resolver", "flex_math_gc", "gc_copies_library_code",
                    "fx_trace_at_import")


def test_no_route_to_a_library_attention_ends_without_a_finding_or_a_hold():
    """The manifest's verdicts (which the graded test above enforces) for every route to a library
    attention: held for a person, or a part that loses points."""
    for case in (c for c in CASES if c.name in ATTENTION_ROUTES):
        assert case.held or case.loses, f"{case.name} could keep full marks unseen"


@pytest.mark.parametrize("target", [REFERENCE, Path("/dev/zero")], ids=["reference", "dev-zero"])
@pytest.mark.parametrize("layout", ["folder", "file"])
def test_a_linked_submission_is_refused_before_anything_is_read(tmp_path, target, layout):
    """A submission that is (or holds) a symbolic link to the reference or to /dev/zero: the grader
    refuses it without reading through the link (no full marks, no disk filled)."""
    if layout == "folder":
        (tmp_path / "sub").mkdir()
        (tmp_path / "sub" / "mhsa.py").symlink_to(target)
        path = tmp_path / "sub"
    else:
        path = tmp_path / "sub.py"
        path.symlink_to(target)
    with pytest.raises(submission.GradingError, match="symbolic link"):
        grading.grade(path, suites=("public",), isolation="process", rubric=FAST, extras=False)


def test_a_submission_that_is_not_a_regular_file_is_refused(tmp_path):
    (tmp_path / "sub").mkdir()
    os.mkfifo(tmp_path / "sub" / "mhsa.py")
    with pytest.raises(submission.GradingError, match="not a regular file"):
        submission.load(tmp_path / "sub", tmp_path)


def test_hiding_the_folder_that_holds_the_workers_does_not_hide_the_worker(tmp_path, monkeypatch):
    """`grade --results /tmp/x.json` hides /tmp, where the workers' folders live: the reference
    must still get full marks at the process level."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    source = tmp_path / "reference.py"
    source.write_text(REFERENCE.read_text())
    grade = grading.grade(source, suites=("public",), isolation="process", hide=[tmp_path], rubric=FAST,
                          extras=False)
    assert grade.score == grade.max_score > 0
