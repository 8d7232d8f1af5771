"""pytest plugin for the assignment's tests: which submission they test and how it runs.

The submission (--impl), how it runs (--isolation), the rubric part of each test, fixed seeds, and
derandomized hypothesis.

Loaded for every run through pyproject's addopts, so `pytest tests_public` works as a student types it.
"""
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, settings

from autograder.core import errors, paths, rubric
from autograder.isolation.guest.executor import seed_cpu
from autograder.isolation.host.levels import resolve
from autograder.testing.backends import Backend, WorkerBackend, open_in_process
from autograder.testing.compare import Mismatch

GRADER_BACKEND = pytest.StashKey[Backend]()  # set by the grading engine for the suites it runs
ISOLATION_CHOICES = ("inprocess", "auto", "process", "sandbox")

# Derandomized with no example database: the same submission always meets the same examples. The
# explain phase is off: it reruns a failing test hundreds of times for a note students do not need.
# One failure per test keeps its summary a Mismatch (several would arrive as an ExceptionGroup).
settings.register_profile("grading", derandomize=True, database=None, deadline=None, print_blob=False,
                          suppress_health_check=list(HealthCheck), report_multiple_bugs=False,
                          phases=(Phase.explicit, Phase.generate, Phase.shrink))
settings.load_profile("grading")


def pytest_addoption(parser):
    group = parser.getgroup("mhsa", "multi-head self-attention assignment")
    group.addoption("--impl", default="assignment",
                    help="submission to test: 'assignment' (default: its mhsa.py, or its filled notebook while "
                         "mhsa.py is the stub), 'reference', or a path to mhsa.py, a notebook or a folder")
    group.addoption("--isolation", default="inprocess", choices=ISOLATION_CHOICES,
                    help="inprocess (default: debuggable), or run the submission in a worker process: "
                         "process, sandbox (bubblewrap) or auto (the strongest available)")
    group.addoption("--hide", action="append", default=[], metavar="PATH",
                    help="another path the submission must not read (worker isolation only)")
    group.addoption("--unshrunk", action="store_true",
                    help="report each failing hypothesis example as first found, without shrinking it (the "
                         "grader's runs that only decide which tests pass)")


def pytest_configure(config):
    config.addinivalue_line("markers", "part(name): the rubric part this test grades")
    config.addinivalue_line("markers", "self_comparison(parity): the test compares the submission with itself or "
                                       "checks a property of its outputs, with no expected value; `parity` names "
                                       "the test of the same function that compares with an oracle")
    config.addinivalue_line("markers", "argument_check(requires): the test checks that bad arguments are refused; "
                                       "it counts only when `requires`, a test in the same file of the same "
                                       "function on valid arguments, passes")


def resolve_impl(value: str, workdir: Path) -> Path:
    """The mhsa.py to test: a .py as it is (tracebacks and breakpoints point at it), the file a folder's
    route picks (autograder/intake/route.py), a notebook's program extracted into `workdir`."""
    from autograder.intake import route, submission

    named = {"assignment": paths.ASSIGNMENT_DIR, "reference": paths.REFERENCE}
    try:
        path = route.pick(named.get(value, Path(value))).path
        if path.suffix == ".ipynb":
            path = submission.load(path, workdir).source
    except submission.GradingError as err:
        raise pytest.UsageError(f"--impl {value}: {err}") from None
    return path.resolve()


def pytest_sessionstart(session):
    """Say which file is tested when a folder offered a choice (a filled notebook beside the stub),
    even under -q."""
    from autograder.intake import route, submission

    value = session.config.getoption("impl")
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    try:
        note = route.pick({"assignment": paths.ASSIGNMENT_DIR}.get(value, Path(value))).note
    except submission.GradingError:
        return  # said when the impl fixture is set up
    if note and reporter is not None:
        reporter.write_line(note)


@pytest.fixture(scope="session")
def impl(request) -> Backend:
    """The submission under test, as a Backend: tests describe calls, never touch its objects.

    The grading engine hands in its own backend (GRADER_BACKEND: it owns and closes it); a student's
    `pytest tests_public` gets one made from --impl and --isolation."""
    config = request.config
    provided = config.stash.get(GRADER_BACKEND, None)
    if provided is not None:
        yield provided
        return
    path = resolve_impl(config.getoption("impl"), request.getfixturevalue("tmp_path_factory").mktemp("impl"))
    mode = config.getoption("isolation")
    rules = rubric.load()
    if mode == "inprocess":
        backend = open_in_process(path)
    else:
        hidden = [p for p in rules.hidden if p.exists()] + [Path(p).resolve() for p in config.getoption("hide")]
        backend = WorkerBackend(path, resolve(mode), rules.limits, hidden)
    yield backend
    try:
        config.hook.pytest_mhsa_tests_done(config=config, backend=backend, path=path, rubric=rules)
    finally:
        backend.close()


class Hooks:
    """What this plugin calls, for the plugins above it (autograder/feedback/pytest_plugin.py)."""

    @staticmethod
    def pytest_mhsa_tests_done(config, backend, path, rubric):
        """A student's own run (never the grader's) has run its tests; `backend` still holds the
        submission at `path`."""


def pytest_addhooks(pluginmanager):
    pluginmanager.add_hookspecs(Hooks)


@pytest.fixture(autouse=True)
def _fixed_seed(request):
    """Inputs are drawn from a seed fixed per test, so a submission always sees the same data."""
    seed_cpu(zlib.crc32(request.node.nodeid.encode()))


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "impl" not in getattr(item, "fixturenames", ()):
            continue
        parts = [m.args[0] if m.args else None for m in item.iter_markers("part")]
        if len(parts) != 1 or not isinstance(parts[0], str) or not rubric.PART_NAME.match(parts[0]) \
                or parts[0] in rubric.STAGE_PARTS:
            raise pytest.UsageError(f"{item.nodeid}: needs exactly one @pytest.mark.part(NAME) naming a part of "
                                    f"rubric.toml graded by the tests ([parts.NAME]); has {parts}")


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_call(item):
    """--unshrunk: this run of a hypothesis test stops at the first failing example. Shrinking it
    never changes whether the test fails, only which example the failure shows. A test's settings
    are fixed when its module is imported (a grader slot imports the suites once), so the shrink
    phase is left out of them for this call only, as hypothesis's own pytest plugin adjusts a test's
    settings for a parametrized run (tryfirst: around that plugin, which reads them)."""
    test = getattr(item.obj, "__func__", item.obj)
    own = getattr(test, "_hypothesis_internal_use_settings", None)
    if own is None or not item.config.getoption("unshrunk"):
        return (yield)
    test._hypothesis_internal_use_settings = settings(own, phases=[p for p in own.phases if p is not Phase.shrink])
    try:
        return (yield)
    finally:
        test._hypothesis_internal_use_settings = own


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Attach to each report what the grader needs: part, suite and a student-facing failure."""
    report = (yield).get_result()
    where = part_and_suite(item)
    if where is None or report.when != "call" and not report.failed:
        return
    report.user_properties.append(("part", where[0]))
    report.user_properties.append(("suite", where[1]))
    consistency = item.get_closest_marker("self_comparison")
    if consistency is not None:
        report.user_properties.append(("parity", consistency.kwargs.get("parity", "")))
    argument_check = item.get_closest_marker("argument_check")
    if argument_check is not None:
        report.user_properties.append(("requires", argument_check.kwargs["requires"]))
    if call.excinfo is None:
        return
    for key, value in describe_failure(call.excinfo.value).items():
        report.user_properties.append((key, value))


def part_and_suite(item) -> tuple | None:
    """(rubric part, suite) of a graded test; None for one that grades no part."""
    part = next((m.args[0] for m in item.iter_markers("part")), None)
    return None if part is None else (part, "hidden" if "tests_hidden" in item.path.parts else "public")


def describe_failure(exc: BaseException) -> dict:
    """A failure as strings: summary (safe for hidden tests), detail (values), hint, example."""
    notes = [n for n in getattr(exc, "__notes__", ()) if n.startswith("Falsifying")]
    info = {"kind": type(exc).__name__, "example": "\n".join(notes)}
    if isinstance(exc, Mismatch):
        info |= {"summary": exc.summary, "detail": exc.detail, "hint": exc.hint}
    elif isinstance(exc, errors.SubmissionError) or isinstance(exc, NotImplementedError):
        info |= {"summary": str(exc)}
    else:
        info |= {"summary": f"{type(exc).__name__}: {exc}".strip()}
    if isinstance(exc, errors.ForbiddenApiError):
        info["forbidden"] = str(exc)
        info["monitor_silent"] = isinstance(exc, errors.MonitorSilent)
    info["stopped"] = isinstance(exc, errors.GradeStopped)
    return info
