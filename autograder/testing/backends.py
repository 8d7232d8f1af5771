"""Backends carry out Calls on a submission: in this process (debugging) or in a worker (grading).

Both give the same Outcome and raise the same exceptions, so every test runs unchanged either way.
"""
import copy
import dataclasses
import importlib.util
import re
import sys
import types
from pathlib import Path

import torch

from autograder.core import errors
from autograder.core.rubric import Limits
from autograder.isolation.guest import executor, wire
from autograder.isolation.host.levels import Isolation
from autograder.isolation.host.worker import WorkerProcess
from autograder.testing.calls import Call, Outcome

# How torch and Python say that an allocation went past the worker's memory limit (RLIMIT_AS).
OUT_OF_MEMORY = re.compile(r"can't allocate memory|not enough memory|out of memory|cannot allocate memory", re.I)
HELLO_BYTES = 64 << 10  # the worker's first reply: "ready", or why the import failed


class Backend:
    name = "backend"
    isolation = "none"

    time_up = ""  # why the whole-submission limit stopped the grade; "" while there is time
    stand_ins = ""  # while error carried forward reruns tests: correct versions every call runs with
    import_failure = None  # why the submission could not be imported, once a call has found out
    blew_a_limit = False  # a call blew a limit (time, memory, crash): later calls into it fail at once

    def run(self, call: Call) -> Outcome:
        __tracebackhide__ = True  # pytest shows the test's frame and the student's, not the grader's
        if self.time_up:
            raise errors.GradeStopped(self.time_up)
        if self.stand_ins:
            call = dataclasses.replace(call, stand_ins=self.stand_ins)
        outcome = self._run(call)
        if outcome.monitor_silent:  # the record cannot be trusted: a person reviews the grade (grading.run_suites)
            raise errors.MonitorSilent(f"while {call.target} ran, {executor.MONITOR_SILENT} "
                                       f"({outcome.monitor_silent[0]}): a person reviews this grade")
        if outcome.forbidden:
            raise errors.ForbiddenApiError(
                f"{call.target} used {', '.join(outcome.forbidden)}, which this assignment forbids: "
                "implement attention yourself with matmul, softmax and friends")
        return outcome

    def __repr__(self):
        """Without an address: hypothesis prints fixtures in falsifying examples, and results must not
        change from one run to the next."""
        return f"<{type(self).__name__}>"

    def call(self, target: str, *args, **kwargs):
        """The output of one function call: the common case in tests."""
        return self.run(Call(target, args, kwargs)).output

    def close(self) -> None:
        pass

    def stop_early(self, reason: str) -> None:
        """The whole-submission limit is reached: every later call fails at once with `reason`."""
        self.time_up = reason

    def _run(self, call: Call) -> Outcome:
        raise NotImplementedError


class InProcessBackend(Backend):
    """Imports the submission here: breakpoints and prints work, nothing is isolated. `trusted`: the
    grader's own code (the reference solution), whose calls run without the forbidden-API monitor
    and the shape trace (executor.execute's `watched`): it uses nothing forbidden and its errors
    reach no student, and the monitor's operator recorder would make each call several times slower."""

    isolation = "none"

    def __init__(self, path: Path, trusted: bool = False):
        self.name, self.trusted = str(path), trusted
        spec = importlib.util.spec_from_file_location(f"mhsa_under_test_{abs(hash(str(path)))}", path)
        self.module = importlib.util.module_from_spec(spec)
        # Registered before it runs, as `import` does: `@dataclass` under `from __future__ import
        # annotations` looks its module up in sys.modules while the class is being made.
        sys.modules[spec.name] = self.module
        try:
            spec.loader.exec_module(self.module)
        except BaseException:
            sys.modules.pop(spec.name, None)
            raise

    @classmethod
    def of_namespace(cls, name: str, namespace: dict) -> "InProcessBackend":
        """The definitions of a namespace that already ran (a notebook's kernel) as a submission."""
        backend = cls.__new__(cls)
        backend.name, backend.module, backend.trusted = name, types.SimpleNamespace(**namespace), False
        return backend

    def _run(self, call: Call) -> Outcome:
        __tracebackhide__ = True
        # a copy: the submission must never hold, or write into, the test's own tensors
        try:
            return Outcome(**executor.execute(self.module, copy.deepcopy(call.to_wire()), watched=not self.trusted))
        except Exception as err:
            errors.add_shape_trace(err, executor.shape_trace_of(err))  # the student's own exception, its trace added
            raise


class WorkerBackend(Backend):
    """Runs the submission in a worker process; a hang or crash costs only the call it happened in."""

    def __init__(self, path: Path, isolation: Isolation, limits: Limits = Limits(), hidden=(),
                 started: WorkerProcess | None = None, template=None):
        """`started`: a worker already spawned for this submission with these settings
        (GradingContext.start_worker); the backend owns it and reads its greeting on first use.
        `template`: the grade's own worker template, which every worker this backend starts is forked
        from where it can be (None: this process's installed one, if any; WorkerProcess)."""
        self.name, self.path = str(path), Path(path)
        self.isolation, self.limits, self.hidden = isolation.level, limits, list(hidden)
        self._isolation, self._template = isolation, template
        self._worker = started
        self._greeted = False  # whether self._worker has said it imported the submission
        self._blown = {}  # entry point -> the error of its call that blew a limit (time, memory, crash)
        self.output_log = []
        self.confinement = []  # what the worker applied to itself (isolation/guest/confine.py), in words

    def _run(self, call: Call) -> Outcome:
        """Carry out `call`. A call that blows a limit (time, memory, or the process) fails, and so
        does, at once and with the same reason, every later call into the entry point it blew it in
        (and a module's forward when its constructor blew it): running it again would only blow the
        limit again, at seconds a call, until the whole-submission limit took every other part's
        points with it. Grades stay deterministic: the tests run in a fixed order."""
        __tracebackhide__ = True
        for entry in entry_points(call):
            if entry in self._blown:
                kind, why = self._blown[entry]
                raise kind(f"{entry} was not run again in this grade: an earlier call into it {why}")
        try:
            return self._call(call)
        except errors.SubmissionError:
            if self.time_up:  # the call was cut short by the whole-submission limit, not by its own fault
                raise errors.GradeStopped(self.time_up) from None
            raise

    def _blew(self, call: Call, err: errors.SubmissionError, how: str) -> errors.SubmissionError:
        """Remember that `call` blew a limit (`how`, in words): its entry point fails fast from now on."""
        self._blown[entry_points(call)[-1]] = (type(err), f"{how}:\n\n{err}")
        return err

    @property
    def blew_a_limit(self) -> bool:
        return bool(self._blown)

    def _call(self, call: Call) -> Outcome:
        __tracebackhide__ = True
        worker = self._ensure_worker()
        try:
            reply = worker.request(wire.encode(call.to_wire() | {"return_inputs": True}), self.limits.call_timeout)
        except TimeoutError:
            self._stop()
            raise self._blew(call, errors.SubmissionTimeout(
                f"{call.signature()} did not finish within {self.limits.call_timeout:g} s "
                "(an infinite loop, or a Python loop over every element?)"), "ran past the time limit of one call") from None
        except (EOFError, OSError, wire.WireError) as err:
            why = (worker.exit_description() if not isinstance(err, wire.WireError)
                   else f"sent garbage ({errors.clean_text(err, 200)})")
            self._stop()
            raise self._blew(call, errors.SubmissionCrashed(
                f"the process running your code {why} during {call.signature()}"), "ended the process running it") from None
        return self._outcome(reply, call)

    def _outcome(self, reply, call) -> Outcome:
        __tracebackhide__ = True
        if not isinstance(reply, dict) or reply.get("status") not in ("ok", "raised"):
            self._stop()
            raise errors.SubmissionCrashed(f"the process running your code sent a malformed reply to {call.target}")
        if reply["status"] == "raised":
            err = errors.raised(reply.get("type"), reply.get("message"), reply.get("traceback", ""), call.signature(),
                                reply.get("shapes", ""))
            if isinstance(err, (MemoryError, RuntimeError)) and OUT_OF_MEMORY.search(str(reply.get("message"))):
                raise self._blew(call, err, "ran into the memory limit")
            raise err
        result = reply.get("result")
        fields = {"output": None, "input_grads": dict, "param_grads": dict, "attributes": dict,
                  "mutated": list, "forbidden": list, "monitor_silent": list}
        if not isinstance(result, dict) or set(result) != set(fields):
            raise errors.SubmissionCrashed(f"the process running your code sent a malformed result for {call.target}")
        for key, kind in fields.items():
            if kind is not None and not isinstance(result[key], kind):
                raise errors.SubmissionCrashed(f"malformed '{key}' in the result for {call.target}")
        for grads in (result["input_grads"], result["param_grads"]):
            if not all(g is None or type(g) is torch.Tensor for g in grads.values()):
                raise errors.SubmissionCrashed(f"gradients of {call.target} are not plain tensors")
        result["attributes"] = _clean_strings(result["attributes"])
        result["mutated"] = mutated_inputs(call, reply.get("inputs"))
        for key in ("forbidden", "monitor_silent"):
            result[key] = [errors.clean_text(f, 200) for f in result[key][:20]]
        return Outcome(**result)

    def _ensure_worker(self) -> WorkerProcess:
        if self.import_failure is not None:
            raise errors.SubmissionImportError(self.import_failure)
        if self._worker is None:
            self._worker = WorkerProcess(self.path, self._isolation, self.limits, self.hidden, template=self._template)
            self._greeted = False
            if self.time_up:  # the limit came while it was being made (a fork waits for its template): end it
                self._worker.interrupt()
        if self._greeted:
            return self._worker
        worker = self._worker
        try:
            hello = worker.receive(self.limits.import_timeout, HELLO_BYTES)
        except TimeoutError:
            failure = f"importing your mhsa.py did not finish within {self.limits.import_timeout:g} s"
        except (EOFError, OSError):
            failure = f"the process importing your mhsa.py {worker.exit_description()}"
        except wire.WireError as err:
            failure = f"the process importing your mhsa.py sent garbage ({errors.clean_text(err, 200)})"
        except BaseException:
            self._stop()  # never leave a worker behind, whatever went wrong here
            raise
        else:
            failure = _import_failure_text(hello)
            if failure is None and isinstance(hello.get("confinement"), list):
                self.confinement = [errors.clean_text(line, 200) for line in hello["confinement"][:8]]
        if failure is not None:
            self._stop()
            self.import_failure = failure
            raise errors.SubmissionImportError(failure)
        self._greeted = True
        return worker

    def _stop(self) -> None:
        """Stop the worker; safe from two threads at once (a grade's watchdog closes the backend while
        the grade itself may be stopping a worker that failed)."""
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.stop()
            self.output_log.append(worker.output.text())

    def printed_output(self) -> str:
        """Everything the submission printed (capped per worker), for the results' top-level output."""
        live = [self._worker.output.text()] if self._worker is not None else []
        return "".join(self.output_log + live)

    def close(self) -> None:
        self._stop()

    def stop_early(self, reason: str) -> None:
        """Also ends a call in flight: the worker is killed (a call in flight then fails with `reason`)."""
        super().stop_early(reason)
        worker = self._worker
        if worker is not None:
            worker.interrupt()


def entry_points(call: Call) -> tuple:
    """The entry points of the submission a call runs, the one it is named after last: a function;
    a module's constructor; or its constructor, then its forward."""
    if call.init is None:
        return (call.target,)
    if call.construct_only:
        return (f"{call.target}.__init__",)
    return f"{call.target}.__init__", f"{call.target}.forward"


def mutated_inputs(call: Call, inputs) -> list:
    """Tensor arguments the submission changed in place, judged here against the grader's own copies
    (the worker's own verdict could be bent by a submission that patches torch.equal)."""
    if not (isinstance(inputs, dict) and isinstance(inputs.get("args"), list)
            and isinstance(inputs.get("kwargs"), dict) and len(inputs["args"]) == len(call.args)):
        raise errors.SubmissionCrashed(f"the process running your code sent malformed inputs back for {call.target}")
    sent = {f"arg{i}": a for i, a in enumerate(call.args)} | dict(call.kwargs)
    back = {f"arg{i}": a for i, a in enumerate(inputs["args"])} | inputs["kwargs"]
    return [name for name, mine in sent.items() if isinstance(mine, torch.Tensor)
            and not (type(back.get(name)) is torch.Tensor and executor.same_bits(back[name], mine.detach()))]


def _clean_strings(value):
    """Every string inside `value` (module attributes) capped and without control characters."""
    if isinstance(value, str):
        return errors.clean_text(value, 200)
    if isinstance(value, dict):
        return {errors.clean_text(k, 200): _clean_strings(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_clean_strings(v) for v in value)
    return value


def _import_failure_text(hello) -> str | None:
    if isinstance(hello, dict) and hello.get("status") == "ready":
        return None
    if isinstance(hello, dict) and hello.get("status") == "import_error":
        kind, message = errors.clean_text(hello.get("type"), 100), errors.clean_text(hello.get("message"))
        where = errors.clean_text(hello.get("traceback", ""))
        return f"importing your mhsa.py raised {kind}: {message}\n{where}".rstrip()
    return "the process importing your mhsa.py sent a malformed reply"


class BrokenBackend(Backend):
    """A submission that could not be imported in this process: every call fails with the reason."""

    isolation = "none"

    def __init__(self, name, reason):
        self.name, self.reason = name, reason
        self.import_failure = reason

    def _run(self, call):
        raise errors.SubmissionImportError(f"could not import your mhsa.py: {self.reason}")


def open_in_process(path: Path) -> Backend:
    """The submission imported here for debugging, or a backend that reports why it cannot be."""
    try:
        return in_process(path)
    except (errors.SubmissionImportError, SyntaxError) as err:
        return BrokenBackend(str(path), f"{type(err).__name__}: {err}")


def in_process(path: Path) -> InProcessBackend:
    try:
        return InProcessBackend(path)
    except SyntaxError:
        raise
    except Exception as err:  # noqa: BLE001 - reported to the student as an import failure
        raise errors.SubmissionImportError(f"importing {path} raised {type(err).__name__}: {err}") from err
    finally:
        sys.modules.pop("mhsa", None)
