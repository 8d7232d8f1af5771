"""The CPU device's settings and clock. Whole sessions on the CPU device, through the sandboxed workers,
run in tests/test_timing_batch.py (the command line) and tests/test_gpu_checks.py; the calibration
study (gpu_checks/study.py, docs/benchmarks/timing-cpu.md) runs the rubric's own settings."""
import dataclasses
import os
import threading
import time

import pytest
import torch

from autograder.core import rubric as rubric_module
from gpu_checks.settings import TimingSettings
from gpu_checks.study import suggested_rubric_lines
from gpu_checks.timing_worker import HostClock


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


# --- the study's suggestion of rubric lines ------------------------------------------------------

def run(status, **medians):
    """A study record: case name -> median ratio, every case in the launch config."""
    return {"status": status, "cases": {name: {"config": "launch", "median": m} for name, m in medians.items()}}


def test_suggested_thresholds_keep_a_separating_value_and_move_one_that_does_not():
    settings = TimingSettings.for_device(rubric_module.load().parts["timing"].settings, "cpu")
    items = {"reference": {"expected": "passed", "runs": [run("passed", fwd=1.1, bwd=1.3)]},
             "good_einsum": {"expected": "passed", "runs": [run("passed", fwd=1.2, bwd=1.4)]},
             # slow in one case is enough to fail a run: counted by its slowest case
             "bad_loop_heads": {"expected": "failed", "runs": [run("failed", fwd=1.5, bwd=2.6),
                                                               run("failed", fwd=1.6, bwd=2.4)]}}
    lines = suggested_rubric_lines(items, settings, "cpu")
    assert lines[:2] == ["[parts.timing.cpu.configs.launch]",
                         "threshold = 2  # slowest good median 1.40, fastest bad 2.40; keep the rubric value"]
    assert lines[2] == "# [parts.timing.cpu.configs.throughput]: not enough data to suggest a threshold"
    items["good_einsum"]["runs"].append(run("passed", fwd=2.1))
    assert suggested_rubric_lines(items, settings, "cpu")[1] == (
        "threshold = 2.2  # slowest good median 2.10, fastest bad 2.40; CHANGE: paste this")
    items["good_einsum"]["runs"].append(run("passed", fwd=2.5))  # slower than the bad variant's runs
    assert suggested_rubric_lines(items, settings, "cpu")[0].startswith(
        "# [parts.timing.cpu.configs.launch]: no separation")
