"""Timing workers seen from the grader: one process per module timed, all started the same way.

One process each for the student, the reference and the baseline, all under the same isolation,
running the same gpu_checks/timing_worker.py.

CUDA times are only comparable between calls on the same GPU, and the reference must not live in the
student's process (nor its file in the student's sandbox), so each side times its own calls and the
grader interleaves them by messages. The grader also times each request on its own clock, the one
clock student code cannot touch.
"""
import math
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from autograder.isolation.guest import wire
from autograder.isolation.host.worker import WorkerProcess
from gpu_checks.runqueue import RunQueueClock, worker_thread
from gpu_checks.timing_worker import PROBES

ENTRY = Path(__file__).resolve().parent / "timing_worker.py"


class ParticipantError(Exception):
    """A worker failed: it raised, crashed, timed out or replied garbage. The message reads after
    'your code' or 'the reference'."""


@dataclass(frozen=True)
class Measurement:
    device_ms: float      # CUDA events on the calling stream; on CPU the process's CPU time or host_ms, the larger
    host_ms: float        # host clock across a device-wide synchronize; on CPU less the time spent preempted
    roundtrip_ms: float   # the grader's clock around the whole request
    flags_changed: dict   # flag -> (pinned value, value after the call), as text
    fingerprint: dict     # tensor name -> {shape, dtype, probes, norm, nonfinite} or None
    forbidden: list       # forbidden APIs seen (only when the call was monitored)
    queued_ms: float = 0.0  # of the round trip, time the grader's and the worker's threads waited for a core


@dataclass(frozen=True)
class Sample:
    """One interleaved pair (a triple with the baseline): every role ran the same inputs."""
    seq_len: int
    flops: float
    times: dict  # role ("student", "reference", "baseline") -> Measurement


def setup_request(case, state, device: str) -> dict:
    c = case.config
    return {"op": "setup", "case": case.name, "device": device, "dtype": getattr(torch, case.dtype),
            "init": {"d_model": c.d_model, "num_heads": c.num_heads, "dropout": 0.0}, "state": state,
            "batch": c.batch, "seq_lens": list(c.seq_lens), "backward": case.backward}


def run_request(case, seed: int, seq_len: int, monitor: bool) -> dict:
    return {"op": "run", "case": case.name, "seed": seed, "seq_len": seq_len, "monitor": monitor}


def setup_result(reply) -> dict:
    result = _result(reply)
    if not (isinstance(result, dict) and all(isinstance(result.get(k), str) for k in ("device", "uuid", "torch"))
            and isinstance(result.get("forbidden"), list)):
        raise ParticipantError("sent a malformed reply to setup")
    return result


def measurement(reply, roundtrip_ms: float, queued_ms: float = 0.0) -> Measurement:
    """Checks every field's type: a reply is data from an untrusted process."""
    r = _result(reply)
    ok = (isinstance(r, dict) and all(_time(r.get(k)) for k in ("device_ms", "host_ms"))
          and isinstance(r.get("flags_changed"), dict) and all(_change(v) for v in r["flags_changed"].values())
          and isinstance(r.get("fingerprint"), dict)
          and all(p is None or _fingerprint(p) for p in r["fingerprint"].values())
          and isinstance(r.get("forbidden"), list))
    if not ok:
        raise ParticipantError("sent a malformed timing reply")
    changed = {str(k): tuple(v) for k, v in r["flags_changed"].items()}
    return Measurement(r["device_ms"], r["host_ms"], roundtrip_ms, changed, r["fingerprint"],
                       [str(f) for f in r["forbidden"]], queued_ms)


class TimingWorker:
    """A worker process running timing_worker.py on one module file."""

    def __init__(self, path: Path, device: str, isolation, limits, hidden):
        self.device, self.limits = device, limits
        self._process = WorkerProcess(path, isolation, limits, list(hidden), entry=ENTRY, entry_config={"device": device})
        self._failure = None
        self._queue = RunQueueClock(None)

    def wait_ready(self) -> None:
        """Waits for the module to be imported; workers start together, so imports overlap."""
        hello = self._exchange(None, self.limits.import_timeout)
        if isinstance(hello, dict) and hello.get("status") == "import_error":
            where = str(hello.get("traceback", "")).rstrip()
            raise ParticipantError(f"could not be imported: {hello.get('type')}: {hello.get('message')}"
                                   + (f"\n{where}" if where else ""))
        if not (isinstance(hello, dict) and hello.get("status") == "ready"):
            raise ParticipantError("sent a malformed reply at import")
        self._queue = RunQueueClock(worker_thread(self._process.token, ENTRY.name))

    def cuda_reachable(self) -> tuple:
        """(True, "") or (False, why not), as the worker sees it from inside its isolation."""
        r = _result(self._exchange({"op": "probe"}, self.limits.call_timeout))
        if not (isinstance(r, dict) and isinstance(r.get("cuda"), bool) and isinstance(r.get("reason"), str)):
            raise ParticipantError("sent a malformed reply to the CUDA probe")
        return r["cuda"], r["reason"]

    def setup(self, case, state) -> dict:
        return setup_result(self._exchange(setup_request(case, state, self.device), self.limits.call_timeout))

    def run(self, case, seed: int, seq_len: int, monitor: bool) -> Measurement:
        """Times the request on the grader's clock, and reads how much of it this thread and the worker's
        main thread (from outside the worker) spent waiting for a core: other tenants' doing."""
        queued0, t0 = self._queue.read(), time.perf_counter()
        reply = self._exchange(run_request(case, seed, seq_len, monitor), self.limits.call_timeout)
        elapsed, queued = time.perf_counter() - t0, self._queue.read() - queued0
        return measurement(reply, elapsed * 1e3, queued * 1e3)

    def close(self) -> None:
        self._process.stop()

    def _exchange(self, request, timeout):
        if self._failure:
            raise ParticipantError(self._failure)
        try:
            if request is None:
                return self._process.receive(timeout)
            return self._process.request(wire.encode(request), timeout)
        except TimeoutError:
            self._failure = f"did not answer within {timeout:g} s"
        except (EOFError, OSError):
            self._failure = f"ended: its process {self._process.exit_description()}"
        except wire.WireError as err:
            self._failure = f"sent garbage ({err})"
        # Never asked again: a late reply to this request would be taken for the next one's.
        self._process.stop()
        raise ParticipantError(self._failure)


def _result(reply):
    if isinstance(reply, dict) and reply.get("status") == "raised":
        where = str(reply.get("traceback", "")).rstrip()
        raise ParticipantError(f"raised {reply.get('type')}: {reply.get('message')}" + (f"\n{where}" if where else ""))
    if not (isinstance(reply, dict) and reply.get("status") == "ok"):
        raise ParticipantError("sent a malformed reply")
    return reply.get("result")


def _time(value) -> bool:
    return isinstance(value, float) and math.isfinite(value) and value > 0  # no real call takes 0 ms


def _change(value) -> bool:
    return isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value)


def _fingerprint(p) -> bool:
    if not (isinstance(p, dict) and isinstance(p.get("probes"), list) and len(p["probes"]) == PROBES):
        return False
    return (isinstance(p.get("shape"), list) and isinstance(p.get("dtype"), str) and isinstance(p.get("device"), str)
            and type(p.get("nonfinite")) is int
            and all(isinstance(v, float) for v in [p.get("norm"), *p["probes"]]))
