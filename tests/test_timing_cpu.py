"""The timing check on the CPU device, the way grading calls it: `grade_timing(..., device="cpu")` with
the rubric's [parts.timing.cpu] configs, through real timing workers under the sandbox (bubblewrap is
installed on CI). Fewer pairs and one dtype than the rubric, to keep CI short; the calibration study
(gpu_checks/study.py, docs/benchmarks/timing-cpu.md) runs the rubric's own settings."""
import dataclasses
import os
import threading
import time

import pytest
import torch

from autograder import rubric as rubric_module
from autograder.isolation import resolve, sandbox_available
from autograder.paths import REFERENCE
from gpu_checks import grade_timing
from gpu_checks.settings import TimingSettings
from gpu_checks.study import CALIBRATION
from gpu_checks.timing_worker import HostClock


def cpu_rubric():
    """The rubric's CPU configs as they are; float32 only and fewer pairs."""
    real = rubric_module.load()
    table = real.parts["timing"].settings
    cpu = {**table["cpu"], "dtypes": ["float32"], "pairs": 10, "rerun_pairs": 20, "warmup_pairs": 2,
           "check_calls": 1, "solo_calls": 5}
    timing = dataclasses.replace(real.parts["timing"], settings={**table, "cpu": cpu})
    return dataclasses.replace(real, parts={**real.parts, "timing": timing})


@pytest.fixture(scope="module")
def isolation():
    level = resolve("auto")
    assert level.level == ("sandbox" if sandbox_available() else "process")
    return level


def test_the_reference_passes_on_the_cpu_and_the_result_says_so(isolation):
    result = grade_timing(REFERENCE, cpu_rubric(), isolation, device="cpu", seed=3)
    assert (result["status"], result["score"], result["max_score"], result["device"]) == ("passed", 5.0, 5.0, "cpu"), \
        result["output"]
    assert result["output"].startswith("Timing against the reference on the CPU (not a GPU")
    assert "launch float32 fwd+bwd" in result["output"] and "throughput float32 fwd" in result["output"]


def test_a_loop_over_queries_fails_on_the_cpu_with_the_reason(isolation):
    result = grade_timing(CALIBRATION["bad_loop_queries"], cpu_rubric(), isolation, device="cpu", seed=3)
    assert (result["status"], result["score"], result["max_score"]) == ("failed", 0.0, 5.0), result["output"]
    assert "- launch float32 fwd: your code took" in result["output"]
    assert "x the reference's time" in result["output"] and "at most 2x passes" in result["output"]


def test_the_cpu_settings_replace_the_cuda_ones_and_nothing_else():
    table = rubric_module.load().parts["timing"].settings
    cuda, cpu = TimingSettings.for_device(table, "cuda"), TimingSettings.for_device(table, "cpu")
    assert [c.name for c in cpu.configs] == ["launch", "throughput"] and cpu.configs != cuda.configs
    assert max(c.d_model for c in cpu.configs) <= 256  # CPU-sized
    assert set(table["cpu"]) - {"configs"} <= {f.name for f in dataclasses.fields(TimingSettings)}
    untouched = [f.name for f in dataclasses.fields(TimingSettings) if f.name not in table["cpu"]]
    assert all(getattr(cpu, name) == getattr(cuda, name) for name in untouched)
    with pytest.raises(ValueError, match="unknown keys \\['pair'\\]"):
        TimingSettings.for_device({**table, "cpu": {**table["cpu"], "pair": 3}}, "cpu")
    with pytest.raises(ValueError, match="needs a \\[parts.timing.cpu\\] table"):
        TimingSettings.for_device({k: v for k, v in table.items() if k != "cpu"}, "cpu")


# --- the CPU clock ------------------------------------------------------------------------------

def test_the_cpu_clock_counts_sleeping_and_work_on_other_threads():
    clock = HostClock()
    device_ms, host_ms, _ = clock.measure(lambda: time.sleep(0.05))
    assert host_ms >= 45 and device_ms >= host_ms  # waiting is the call's own time

    def burn():
        end = time.process_time() + 0.2
        while time.process_time() < end:
            pass

    def on_a_thread():
        worker = threading.Thread(target=burn)
        worker.start()
        worker.join()

    device_ms, host_ms, _ = clock.measure(on_a_thread)
    assert device_ms >= 190  # the other thread's CPU time


def test_the_cpu_clock_leaves_out_time_spent_waiting_for_a_core():
    """Two busy processes per core: the wall clock of a fixed amount of work grows, the CPU clock does not."""
    import multiprocessing

    def work():  # about 20 ms on one core
        x = torch.randn(128, 128)
        for _ in range(50):
            x = (x @ x).clamp_(-1, 1)

    clock = HostClock()
    if clock.schedstat is None:
        pytest.skip("no /proc/thread-self/schedstat on this kernel: the CPU clock is the wall clock there")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in the worker
    hogs = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(2 * (os.cpu_count() or 1))]
    try:
        alone = min(clock.measure(work)[1] for _ in range(3))
        for hog in hogs:
            hog.start()
        t0 = time.perf_counter()
        _, host_ms, _ = clock.measure(work)
        wall_ms = (time.perf_counter() - t0) * 1e3
    finally:
        torch.set_num_threads(threads)
        for hog in hogs:
            if hog.pid is not None:
                hog.kill()
                hog.join()
    assert wall_ms > 1.5 * alone  # the machine was contended
    assert host_ms < 0.75 * wall_ms


def _spin():
    while True:
        pass
