"""The worker side of a timing session: builds a MultiHeadSelfAttention on the device and times calls.

It runs as the entry script of a worker process (autograder.isolation.host.worker.WorkerProcess(entry=...) copies it
beside the submission), once for the student and once, identically, for the reference. Like every
module that runs next to student code it imports only the standard library and torch; the worker's
own modules (worker_main, executor) come from config["worker_dir"]. It measures and fingerprints;
every comparison and every decision happens in the grader's process.

Requests (plain data, see gpu_checks.participants):
  probe: whether CUDA is reachable from inside this worker (its sandbox), and if not why
  setup: build the module for a case from the grader's weights, allocate its input buffers
  run:   refill the inputs from a seed, flush L2, pin precision flags, time one call, fingerprint it
"""
import contextlib
import functools
import json
import os
import sys
import time
import zlib

import torch

PROBES = 4  # random projections per fingerprinted tensor
FLUSH_MIN_BYTES = 256 << 20
CPU_FLUSH_BYTES = 8 << 20  # several times a server core's L2 (1-2 MiB)


def _attribute(path):
    """Getter and setter of a dotted torch attribute, e.g. torch.backends.cudnn.allow_tf32."""
    owner_path, _, name = path.rpartition(".")
    owner = functools.reduce(getattr, owner_path.split(".")[1:], torch)
    return (lambda: getattr(owner, name)), (lambda value: setattr(owner, name, value))


def _autocast(device_type):
    return (lambda: torch.is_autocast_enabled(device_type)), (lambda on: torch.set_autocast_enabled(device_type, on))


# Flags that change what a matmul computes (and how fast), pinned to these values before every call
# on both sides: a submission may not buy speed with precision the reference is not allowed.
PINNED = {
    "torch.backends.cuda.matmul.allow_tf32": False,
    "torch.backends.cudnn.allow_tf32": False,
    "torch.get_float32_matmul_precision()": "highest",
    "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction": True,
    "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction": True,
    "autocast cuda": False,
    "autocast cpu": False,
}
# Read before and after every call, pinned or not: the newer fp32_precision settings alias the TF32
# flags, so either spelling of a change is seen.
WATCHED = ("torch.backends.cuda.matmul.fp32_precision", "torch.backends.fp32_precision",
           "torch.backends.cudnn.fp32_precision", "torch.backends.cuda.matmul.allow_fp16_accumulation")


def _flags():
    flags = {path: _attribute(path) for path in PINNED if path.startswith("torch.backends")}
    flags["torch.get_float32_matmul_precision()"] = (torch.get_float32_matmul_precision,
                                                     torch.set_float32_matmul_precision)
    flags["autocast cuda"], flags["autocast cpu"] = _autocast("cuda"), _autocast("cpu")
    for path in WATCHED:
        try:
            getter, setter = _attribute(path)
            getter()
        except AttributeError:  # an older torch without this spelling
            continue
        flags[path] = (getter, setter)
    return flags


FLAGS = _flags()


def pin_flags() -> dict:
    """Sets the pinned flags and returns every watched flag's value."""
    for name, value in PINNED.items():
        FLAGS[name][1](value)
    return read_flags()


def read_flags() -> dict:
    return {name: getter() for name, (getter, _) in FLAGS.items()}


class CudaClock:
    """CUDA events around the call on its stream, and the host clock from a synchronized device to a
    device-wide synchronize after it, which also waits for work the call left on other streams."""

    def __init__(self, device):
        self.start, self.end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0)
        # Writing a buffer twice the L2 size evicts whatever the previous call (or the other
        # process) left there, so every call starts cold, as the reference's does.
        self.flush_buffer = torch.empty(max(2 * l2, FLUSH_MIN_BYTES), dtype=torch.uint8, device=device)

    def flush(self):
        self.flush_buffer.zero_()

    def measure(self, call):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        self.start.record()
        out = call()
        self.end.record()
        torch.cuda.synchronize()
        host_ms = (time.perf_counter() - t0) * 1e3
        return self.start.elapsed_time(self.end), host_ms, out


class HostClock:
    """CPU mode. There is no device to wait for, and on a shared machine the wall clock mostly measures
    other tenants (a call preempted for one time slice looks several times slower), so:
    host_ms: the wall clock minus the time the calling thread sat on the run queue, ready but without
             a core (Linux /proc/thread-self/schedstat); sleeping and waiting for other threads count;
    device_ms: the larger of that and the CPU time of all the process's threads, so work handed to
             other threads counts too (the CPU's counterpart of a side stream).
    The flush evicts the core's private caches, so that no call profits from its own previous one (as
    the reference would when timed alone in the drift check)."""

    def __init__(self):
        self.flush_buffer = torch.empty(CPU_FLUSH_BYTES, dtype=torch.uint8)
        try:
            self.schedstat = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
        except OSError:  # not Linux, or a kernel without scheduler statistics: the wall clock it is
            self.schedstat = None

    def flush(self):
        self.flush_buffer.zero_()

    def run_queue_s(self) -> float:
        if self.schedstat is None:
            return 0.0
        return int(os.pread(self.schedstat, 128, 0).split()[1]) / 1e9  # "on-cpu-ns run-queue-ns slices"

    def measure(self, call):
        # The wall clock outermost: a wait between two reads then counts as the call's own time, so
        # host_s can only err on the long side.
        t0 = time.perf_counter()
        queued0, cpu0 = self.run_queue_s(), time.process_time()
        out = call()
        cpu, queued = time.process_time() - cpu0, self.run_queue_s() - queued0
        wall = time.perf_counter() - t0
        host_s = max(wall - queued, 1e-7)
        return max(cpu, host_s) * 1e3, host_s * 1e3, out


class CaseState:
    def __init__(self, module, inputs, backward):
        self.module, self.inputs, self.backward = module, inputs, backward  # inputs: L -> (x, grad_out)

    def call(self, x, grad_out):
        if not self.backward:
            with torch.no_grad():
                return self.module(x)
        out = self.module(x)
        out.backward(grad_out)
        return out

    def results(self, x, out) -> dict:
        """The tensors a call produced, by name: what gets fingerprinted and compared."""
        if not self.backward:
            return {"output": out}
        grads = {f"gradient of {name}": p.grad for name, p in self.module.named_parameters()}
        return {"output": out, "gradient of the input": x.grad, **grads}


class TimingSession:
    """One per worker. `execute(module, request)` is handed to worker_main.main, which answers requests
    with it and turns anything it raises into an error reply."""

    def __init__(self, monitor_type, forbidden_submodules):
        self.monitor_type, self.forbidden_submodules = monitor_type, forbidden_submodules
        self.cases, self.clock = {}, None

    def execute(self, submission, request):
        return {"probe": self.probe, "setup": self.setup, "run": self.run}[request["op"]](submission, request)

    def probe(self, submission, request):
        """Whether CUDA works in here: the sandbox may lack a device node or a driver library that the
        grader's own process has, and the grader must say so instead of blaming the submission."""
        if torch.cuda.is_available():
            return {"cuda": True, "reason": ""}
        try:
            torch.cuda.init()
            reason = "torch.cuda.is_available() is False"
        except Exception as err:  # noqa: BLE001 - the reason is the point
            reason = f"{type(err).__name__}: {err}"
        return {"cuda": False, "reason": reason}

    def setup(self, submission, request):
        device, dtype = torch.device(request["device"]), request["dtype"]
        if self.clock is None:
            self.clock = CudaClock(device) if device.type == "cuda" else HostClock()
        module = submission.MultiHeadSelfAttention(**request["init"])
        module.load_state_dict(request["state"], strict=True)
        module = module.to(device=device, dtype=dtype).eval()
        batch, d_model, backward = request["batch"], request["init"]["d_model"], request["backward"]
        inputs = {seq_len: _buffers((batch, seq_len, d_model), device, dtype, backward)
                  for seq_len in request["seq_lens"]}
        self.cases[request["case"]] = CaseState(module, inputs, backward)
        return {"device": _device_name(device), "uuid": _device_uuid(device), "torch": torch.__version__,
                "forbidden": self.forbidden_submodules(module)}

    def run(self, submission, request):
        state = self.cases[request["case"]]
        x, grad_out = state.inputs[request["seq_len"]]
        # Fresh contents in the same buffers: a cache keyed on pointers returns stale (wrong) outputs,
        # one keyed on contents never hits. Generated here, outside the timed region.
        generator = torch.Generator(device=x.device).manual_seed(request["seed"])
        with torch.no_grad():
            x.normal_(generator=generator)
            if grad_out is not None:
                grad_out.normal_(generator=generator)
        x.grad = None
        for p in state.module.parameters():
            p.grad = None
        self.clock.flush()
        pinned = pin_flags()
        monitor = self.monitor_type() if request["monitor"] else contextlib.nullcontext()
        with monitor:
            device_ms, host_ms, out = self.clock.measure(lambda: state.call(x, grad_out))
        after = read_flags()
        return {"device_ms": device_ms, "host_ms": host_ms,
                "flags_changed": {k: [str(v), str(after[k])] for k, v in pinned.items() if after[k] != v},
                "fingerprint": fingerprint(state.results(x, out), request["seed"]),
                "forbidden": list(monitor.used) if request["monitor"] else []}


def fingerprint(tensors: dict, seed: int) -> dict:
    """name -> shape, dtype, device, PROBES random projections, L2 norm and count of non-finite values, or None
    for anything but a plain tensor. Projections onto vectors drawn from the call's seed estimate the
    error's norm without sending whole outputs (64 MB at the largest shape) across the pipe; the
    student's side cannot match them without producing the right tensor."""
    prints = {}
    for name, t in tensors.items():
        if type(t) is not torch.Tensor:
            prints[name] = None
            continue
        flat = t.detach().reshape(-1).double()  # (N,)
        generator = torch.Generator(device=t.device).manual_seed(seed ^ zlib.crc32(name.encode()))
        probes = [torch.dot(flat, torch.randn(flat.numel(), generator=generator, device=t.device,
                                              dtype=torch.float32).double()).item() for _ in range(PROBES)]
        prints[name] = {"shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch."),
                        "device": str(t.device), "probes": probes, "norm": flat.norm().item(),
                        "nonfinite": int((~torch.isfinite(flat)).sum().item())}
    return prints


def _buffers(shape, device, dtype, backward):
    """(x, grad_out), both (B, L, d_model), allocated once per shape and refilled for every call."""
    x = torch.empty(shape, device=device, dtype=dtype, requires_grad=backward)
    return x, torch.empty(shape, device=device, dtype=dtype) if backward else None


def _device_name(device):
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def _device_uuid(device):
    return str(torch.cuda.get_device_properties(device).uuid) if device.type == "cuda" else "cpu"


def start_cuda():
    """Creates the CUDA context and runs a small forward and backward while the worker is still
    unconfined: the driver starts by opening device files and a Unix socket, which Landlock and the
    seccomp filter refuse (cudaGetDeviceCount then fails with Error 304), and once started it needs
    neither. A failure is left for the probe to report in words."""
    try:
        x = torch.ones(64, 64, device="cuda", requires_grad=True)
        (x @ x).softmax(-1).sum().backward()
        torch.cuda.synchronize()
    except Exception:  # noqa: BLE001 - the probe request says why CUDA is unreachable
        pass


def main():
    config = json.loads(sys.argv[4])
    sys.path.insert(0, config["worker_dir"])
    import executor
    import worker_main

    if config.get("device", "cpu").startswith("cuda"):
        start_cuda()

    worker_main.main(TimingSession(executor.ForbiddenApiMonitor, executor.forbidden_submodules).execute)


if __name__ == "__main__":
    main()
