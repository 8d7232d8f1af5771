"""gpu_checks on CPU: the decision rules with scripted clocks, the worker-side measurements with real
tensors in this process, and two whole sessions through real worker processes. Every anti-cheat
check has a submission or a script here that it must fail. Tests marked `cuda` run on a GPU (skipped
without one; the device run's dry run runs them on the CPU); the device run's own script is tested here
on made-up output."""
import dataclasses
import importlib.util
import json
import math
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from autograder.core import rubric as rubric_module
from autograder.core.paths import REFERENCE as REFERENCE_FILE
from autograder.isolation.guest import executor
from autograder.isolation.host.levels import Isolation
from gpu_checks import device_run, grade_timing, harness
from gpu_checks.__main__ import main as cli_main
from gpu_checks.participants import (Measurement, ParticipantError, measurement, run_request, setup_request,
                                     setup_result)
from gpu_checks.report import render
from gpu_checks.session import (REFERENCE, STUDENT, SessionResult, TimingSetupError, check_drift, measure_case,
                                run_cases)
from gpu_checks.settings import TimingSettings
from gpu_checks.stats import decide, early_failure, median_interval, pair_ratio
from gpu_checks.timing_worker import FLAGS, TimingSession, read_flags

GPU_CHECKS = Path(__file__).resolve().parents[1] / "gpu_checks"
TINY = {"tiny": {"batch": 2, "seq_lens": [8, 16], "d_model": 32, "num_heads": 4, "threshold": 2.0}}
# CPU timings of sub-millisecond calls on a shared CI machine are noisy: the real-tensor tests loosen
# what noise could trip (each check is tested tightly with scripted clocks instead).
NOISE_PROOF = {"out_of_band_slack_ms": 50.0, "drift_tolerance": 3.0, "peak_tflops": {"float32": 1e6, "bfloat16": 1e6}}


def settings(**overrides) -> TimingSettings:
    table = {k: v for k, v in rubric_module.load().parts["timing"].settings.items() if k != "cpu"}
    return TimingSettings.from_table({**table, "configs": TINY, "pairs": 10, "early_pairs": 4, "rerun_pairs": 20,
                                      "warmup_pairs": 1, "check_calls": 1, "solo_calls": 4, **overrides})


def first_case(s):
    return s.cases()[0]  # tiny float32 fwd


# --- the decision, as pure functions --------------------------------------------------------------

def test_interval_is_reproducible_and_brackets_the_median():
    ratios = [1.0 + 0.1 * math.sin(i) for i in range(30)]
    assert median_interval(ratios, 0.95) == median_interval(ratios, 0.95)
    median, low, high = median_interval(ratios, 0.95)
    assert low <= median <= high and high - low < 0.15


def test_decide_pass_fail_undecided_and_final_median():
    assert decide([1.0, 1.1, 0.9, 1.05] * 5, 2.0, 0.95).verdict == "pass"
    assert decide([3.0, 3.1, 2.9, 3.05] * 5, 2.0, 0.95).verdict == "fail"
    straddling = [1.6, 2.4] * 10 + [1.9]
    assert decide(straddling, 2.0, 0.95).verdict == "undecided"
    final = decide(straddling, 2.0, 0.95, final=True)
    assert (final.verdict, final.basis) == ("pass", "median")


def test_early_failure_needs_the_first_ratios_far_over_and_survives_one_hiccup():
    assert early_failure([9.0, 8.0, 0.9, 10.0, 7.0], 2.0, 2.0, 0.95).verdict == "fail"
    assert early_failure([9.0, 3.0, 3.9, 10.0, 1.0], 2.0, 2.0, 0.95) is None


def test_pair_ratio_takes_the_worse_clock_so_side_streams_count():
    side_stream = Measurement(device_ms=0.1, host_ms=3.0, roundtrip_ms=4.0, flags_changed={}, fingerprint={},
                              forbidden=[])
    reference = Measurement(device_ms=1.0, host_ms=1.1, roundtrip_ms=2.0, flags_changed={}, fingerprint={},
                            forbidden=[])
    assert pair_ratio(side_stream, reference) == pytest.approx(3.0 / 1.1)


# --- the session with scripted clocks ---------------------------------------------------------------

PRINT = {"output": {"shape": [2, 8, 32], "dtype": "float32", "device": "cuda:0", "probes": [1.0, -2.0, 0.5, 3.0],
                    "norm": 10.0, "nonfinite": 0}}


def measured(ms, host_ms=None, untimed_ms=1.0, flags=None, fingerprint=PRINT, forbidden=()):
    host_ms = ms * 1.05 if host_ms is None else host_ms
    return Measurement(ms, host_ms, host_ms + untimed_ms, flags or {}, fingerprint, list(forbidden))


def jitter(n):
    return 1 + 0.03 * math.sin(n)


class Scripted:
    """A worker whose readings come from script(call_number, seq_len, monitored) -> Measurement."""

    def __init__(self, script, uuid="gpu-0", forbidden=()):
        self.script, self.uuid, self.forbidden, self.calls = script, uuid, list(forbidden), 0

    def setup(self, case, state):
        return {"device": "scripted", "uuid": self.uuid, "torch": "0", "forbidden": self.forbidden}

    def run(self, case, seed, seq_len, monitor):
        self.calls += 1
        return self.script(self.calls, seq_len, monitor)


def reference_worker():
    return Scripted(lambda n, L, monitored: measured(1.0 * jitter(n)))


def judge(student_script, s=None, **worker_options):
    s = s or settings()
    workers = {STUDENT: Scripted(student_script, **worker_options), REFERENCE: reference_worker()}
    return measure_case(first_case(s), workers, {}, s, random.Random(0)), workers


def test_a_student_as_fast_as_the_reference_passes():
    result, _ = judge(lambda n, L, m: measured(1.1 * jitter(n + 1)))
    assert result.status == "passed", result.reasons
    assert result.decision.high <= 2.0 and not result.rerun


def test_a_far_slower_student_fails_early_after_few_calls():
    result, workers = judge(lambda n, L, m: measured(6.0))
    assert result.status == "failed" and result.decision.basis == "early"
    assert len(result.samples) == 4 and "timing stopped early" in result.reasons[0]
    assert workers[STUDENT].calls == 1 + 1 + 4  # gate, warm-up, early pairs


def test_a_moderately_slower_student_fails_on_the_interval():
    result, _ = judge(lambda n, L, m: measured(2.6 * jitter(n)))
    assert result.status == "failed" and result.decision.basis == "interval" and result.decision.low > 2.0
    assert "2.6" in result.reasons[0] and "at most 2x passes" in result.reasons[0]


def test_a_straddling_student_is_rerun_once_and_the_median_decides():
    result, workers = judge(lambda n, L, m: measured(1.7 if n % 2 else 2.25))
    assert result.rerun and len(result.samples) == 20 and result.decision.basis in ("median", "interval")
    assert workers[STUDENT].calls == 1 + 1 + 10 + 20


def test_work_on_a_side_stream_is_caught_by_the_host_clock():
    result, _ = judge(lambda n, L, m: measured(0.05, host_ms=3.0 * jitter(n)))
    assert result.status == "failed" and result.decision.median > 2.0


def test_changing_a_precision_flag_fails():
    flipped = {"torch.backends.cuda.matmul.allow_tf32": ("False", "True")}
    result, _ = judge(lambda n, L, m: measured(0.5, flags=flipped if n > 2 else None))
    assert result.status == "failed" and "changed torch.backends.cuda.matmul.allow_tf32" in result.reasons[0]


def test_wrong_outputs_on_a_timed_call_fail():
    wrong = {"output": {**PRINT["output"], "probes": [1.0, -2.0, 0.5, 3.5]}}
    result, _ = judge(lambda n, L, m: measured(0.5, fingerprint=wrong if n == 7 else PRINT))
    assert result.status == "failed" and result.reasons[0].startswith("on a timed call")
    assert "off by about 5.0e-02" in result.reasons[0]


def test_wrong_code_is_never_timed():
    wrong = {"output": {**PRINT["output"], "shape": [2, 8, 8]}}
    result, workers = judge(lambda n, L, m: measured(0.5, fingerprint=wrong))
    assert result.status == "failed" and result.reasons[0].startswith("before timing")
    assert result.samples == [] and workers[STUDENT].calls == 1


def test_nan_fails():
    nan = {"output": {**PRINT["output"], "nonfinite": 1, "norm": float("nan")}}
    result, _ = judge(lambda n, L, m: measured(0.5, fingerprint=nan if n > 3 else PRINT))
    assert result.status == "failed" and "NaN" in result.reasons[0]


def test_forbidden_apis_fail_at_the_monitored_gate():
    sdpa = ["torch function scaled_dot_product_attention"]
    result, _ = judge(lambda n, L, m: measured(0.5, forbidden=sdpa if m else ()))
    assert result.status == "failed" and "forbids" in result.reasons[0]


def test_work_hidden_from_the_worker_clocks_is_caught_by_the_grader_clock():
    result, _ = judge(lambda n, L, m: measured(1.0 * jitter(n), untimed_ms=9.0))
    assert result.status == "failed" and "outside its timed region" in result.reasons[0]


def test_a_clock_claiming_more_than_the_request_took_fails():
    result, _ = judge(lambda n, L, m: Measurement(5.0, 5.0, 1.0, {}, PRINT, []))
    assert result.status == "failed" and "tampered" in result.reasons[0]


def test_faster_than_the_hardware_is_flagged_for_review():
    fast_enough = settings(peak_tflops={"float32": 1e-3, "bfloat16": 1e-3})  # reference ~3e-4 TFLOP/s
    result, _ = judge(lambda n, L, m: measured(0.05 * jitter(n)), s=fast_enough)
    assert result.status == "failed" and result.reasons[0].startswith("flagged for review")


def test_a_peak_below_the_reference_is_the_graders_error():
    with pytest.raises(TimingSetupError, match="peak_tflops"):
        judge(lambda n, L, m: measured(1.0), s=settings(peak_tflops={"float32": 1e-6, "bfloat16": 1e-6}))


def test_a_crashing_student_fails_but_a_crashing_reference_is_the_graders_error():
    def crash(n, L, m):
        raise ParticipantError("ended: its process was killed by SIGSEGV")

    result, _ = judge(crash)
    assert result.status == "failed" and result.reasons[0].startswith("your code ended")
    s = settings()
    with pytest.raises(TimingSetupError, match="the reference ended"):
        measure_case(first_case(s), {STUDENT: reference_worker(), REFERENCE: Scripted(crash)}, {}, s, random.Random(0))


def test_a_reference_starved_of_gpu_memory_by_the_student_fails_the_student():
    def out_of_memory(n, L, m):
        raise ParticipantError("raised OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")

    s = settings()
    result = measure_case(first_case(s), {STUDENT: reference_worker(), REFERENCE: Scripted(out_of_memory)}, {}, s,
                          random.Random(0))
    assert result.status == "failed" and "ran out of GPU memory beside your code" in result.reasons[0]


def test_another_device_or_a_forbidden_submodule_fails_at_setup():
    assert "another device" in judge(lambda n, L, m: measured(1.0), uuid="gpu-1")[0].reasons[0]
    forbidden = judge(lambda n, L, m: measured(1.0), forbidden=["nn.MultiheadAttention at 'attn'"])[0]
    assert "MultiheadAttention" in forbidden.reasons[0]


def test_a_reference_slowed_beside_the_student_is_flagged_for_review():
    s = settings()
    result, _ = judge(lambda n, L, m: measured(0.5 * jitter(n)))
    assert result.status == "passed"
    check_drift([result], Scripted(lambda n, L, m: measured(0.4)), s, random.Random(1))
    assert result.status == "failed" and "slower beside your code than alone" in result.reasons[0]
    steady, _ = judge(lambda n, L, m: measured(0.5 * jitter(n)))
    check_drift([steady], Scripted(lambda n, L, m: measured(1.0)), s, random.Random(1))
    assert steady.status == "passed"


def test_cases_after_a_failure_are_not_run_and_inputs_replay_from_the_seed():
    s = settings()
    seeds = []

    def slow(n, L, m):
        return measured(6.0)

    workers = {STUDENT: Scripted(slow), REFERENCE: Scripted(lambda n, L, m: seeds.append(L) or measured(1.0))}
    results = run_cases(s.cases(), workers, s, lambda case, seed: {}, seed=5)
    assert [r.status for r in results] == ["failed", "not run", "not run", "not run"]
    first = list(seeds)
    seeds.clear()
    run_cases(s.cases(), {STUDENT: Scripted(slow), REFERENCE: workers[REFERENCE]}, s, lambda case, seed: {}, seed=5)
    assert seeds == first
    text = render(SessionResult(results, seed=5, device="cuda"))
    assert "tiny float32 fwd" in text and "not run" in text and "timing stopped early" in text


# --- the worker side with real tensors, in this process ----------------------------------------------

class LocalWorker:
    """timing_worker's session and the grader's reply checks, without the process: trusted files only."""

    def __init__(self, path: Path, device: str = "cpu"):
        self.device = device
        spec = importlib.util.spec_from_file_location(f"timed_{path.stem}", path)
        self.module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(self.module)
        self.session = TimingSession(executor.ForbiddenApiMonitor, executor.forbidden_submodules)

    def setup(self, case, state):
        return setup_result(self._answer(setup_request(case, state, self.device)))

    def run(self, case, seed, seq_len, monitor):
        t0 = time.perf_counter()
        reply = self._answer(run_request(case, seed, seq_len, monitor))
        return measurement(reply, (time.perf_counter() - t0) * 1e3)

    def _answer(self, request):
        try:
            return {"status": "ok", "result": self.session.execute(self.module, request)}
        except Exception as err:  # noqa: BLE001 - as worker_main turns it into a reply
            return {"status": "raised", "type": type(err).__name__, "message": str(err)}


@pytest.fixture(autouse=True)
def one_thread():
    """As in the worker (worker_main sets it): intra-op threads on a shared CI machine cost 100x."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def restored_flags():
    before = read_flags()
    yield
    for name, value in before.items():
        FLAGS[name][1](value)


def judge_file(path: Path, s, device: str = "cpu"):
    config = s.configs[0]
    state = LocalWorker(REFERENCE_FILE).module.MultiHeadSelfAttention(config.d_model, config.num_heads).state_dict()
    workers = {STUDENT: LocalWorker(path, device), REFERENCE: LocalWorker(REFERENCE_FILE, device)}
    return [measure_case(case, workers, state, s, random.Random(3)) for case in s.cases()]


def test_real_tensors_a_correct_rewrite_agrees_with_the_reference_in_every_case_and_dtype():
    speed_blind = settings(**NOISE_PROOF, configs={"tiny": {**TINY["tiny"], "threshold": 100.0}}, pairs=6,
                           early_pairs=3)
    results = judge_file(GPU_CHECKS / "calibration" / "good_einsum.py", speed_blind)
    assert [r.status for r in results] == ["passed"] * 4, [r.reasons for r in results]


@pytest.mark.parametrize("name, expected", [
    ("sleeps.py", "timing stopped early"),
    ("caches_by_pointer.py", "on a timed call, your code: the output is off by"),
    ("nan_after_warmup.py", "NaN"),
    ("uses_sdpa.py", "before timing, your code: used torch function scaled_dot_product_attention"),
    ("flips_tf32.py", "changed torch.backends.cuda.matmul.allow_tf32 from False to True"),
])
def test_real_tensors_each_cheat_fails(name, expected, restored_flags):
    s = settings(**NOISE_PROOF, dtypes=["float32"])
    result = judge_file(GPU_CHECKS / "adversarial" / name, s)[0]
    assert result.status == "failed" and expected in result.reasons[0], result.reasons


def test_fingerprints_agree_on_equal_tensors_and_not_on_others():
    from gpu_checks.checks import tensor_problem
    from gpu_checks.timing_worker import fingerprint

    y = torch.randn(2, 8, 32)
    same, moved = fingerprint({"output": y}, 7)["output"], fingerprint({"output": y * (1 + 1e-3)}, 7)["output"]
    assert tensor_problem("output", same, fingerprint({"output": y.clone()}, 7)["output"], 5e-5) is None
    assert "off by" in tensor_problem("output", moved, same, 5e-5)
    not_a_tensor = fingerprint({"output": y.tolist()}, 7)["output"]
    assert tensor_problem("output", not_a_tensor, same, 5e-5).endswith("torch.Tensor")


def test_malformed_worker_replies_are_rejected():
    good = {"device_ms": 1.0, "host_ms": 1.0, "flags_changed": {}, "fingerprint": PRINT, "forbidden": []}
    assert measurement({"status": "ok", "result": good}, 2.0).device_ms == 1.0
    for bad in ({**good, "host_ms": -1.0}, {**good, "fingerprint": {"output": {"probes": [1.0]}}},
                {**good, "flags_changed": {"x": "True"}}, {**good, "device_ms": float("nan")},
                {**good, "device_ms": 0.0}):
        with pytest.raises(ParticipantError, match="malformed"):
            measurement({"status": "ok", "result": bad}, 2.0)


# --- whole sessions through real worker processes ------------------------------------------------

def small_rubric(device: str = "cpu", **overrides):
    """The rubric with the device's timing keys made small: tiny shapes, few pairs, float32 only."""
    real = rubric_module.load()
    table = real.parts["timing"].settings
    small = {"configs": {"tiny": {**TINY["tiny"], "threshold": 4.0}}, "dtypes": ["float32"], "pairs": 6,
             "early_pairs": 3, "rerun_pairs": 8, "warmup_pairs": 1, "check_calls": 1, "solo_calls": 3, **NOISE_PROOF,
             **overrides}
    settings = {**table, "cpu": {**table["cpu"], **small}} if device == "cpu" else {**table, **small}
    timing = dataclasses.replace(real.parts["timing"], settings=settings)
    return dataclasses.replace(real, parts={**real.parts, "timing": timing})


def test_a_submission_that_cannot_be_imported_fails_every_case_and_says_why(monkeypatch):
    class Unimportable(Scripted):
        def __init__(self, path, device, isolation, limits, hidden):
            super().__init__(lambda n, L, m: measured(1.0))
            self.path, self.closed = path, False

        def wait_ready(self):
            if self.path.name == "broken.py":
                raise ParticipantError("could not be imported: RuntimeError: broken at import")

        def close(self):
            self.closed = True

    monkeypatch.setattr(harness, "TimingWorker", Unimportable)
    session = harness.run_session(Path("broken.py"), settings(), Isolation("process"), None, [], "cpu", seed=1)
    assert not session.passed and session.cases == []
    assert render(session) == ("Timing on the CPU (not a GPU: CPU-sized configs from the rubric's [parts.timing.cpu]): "
                               "failed. your code could not be imported: RuntimeError: broken at import")


def test_grade_timing_catches_clocks_tampered_inside_the_worker():
    result = grade_timing(GPU_CHECKS / "adversarial" / "tampered_clock.py", small_rubric(out_of_band_slack_ms=10.0),
                          Isolation("process"), device="cpu", seed=11)
    assert (result["status"], result["score"]) == ("failed", 0.0)
    assert "outside its timed region" in result["output"], result["output"]


# --- skipping without CUDA ----------------------------------------------------------------------

needs_no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="tests the behaviour without CUDA")


@needs_no_cuda
def test_without_cuda_the_part_is_skipped_and_left_out_of_the_maximum(monkeypatch):
    monkeypatch.delenv("AUTOGRADER_REQUIRE_CUDA", raising=False)
    result = grade_timing(REFERENCE_FILE, rubric_module.load(), Isolation("process"))
    assert (result["status"], result["score"], result["max_score"]) == ("skipped", 0.0, 0.0)
    assert "no CUDA device" in result["output"]


@needs_no_cuda
@pytest.mark.parametrize("how", ["rubric", "env"])
def test_without_cuda_a_required_part_fails_and_counts(how, monkeypatch):
    rubric = rubric_module.load()
    if how == "rubric":
        monkeypatch.delenv("AUTOGRADER_REQUIRE_CUDA", raising=False)
        timing = dataclasses.replace(rubric.parts["timing"], require_cuda=True)
        rubric = dataclasses.replace(rubric, parts={**rubric.parts, "timing": timing})
    else:
        monkeypatch.setenv("AUTOGRADER_REQUIRE_CUDA", "1")
    result = grade_timing(REFERENCE_FILE, rubric, Isolation("process"))
    assert (result["status"], result["score"], result["max_score"]) == ("failed", 0.0, 5.0)
    assert "required" in result["output"]


@needs_no_cuda
def test_command_line_says_skipped_and_exits_0(capsys):
    assert cli_main([str(REFERENCE_FILE)]) == 0
    assert capsys.readouterr().out.startswith("skipped: no CUDA device")


# --- settings ------------------------------------------------------------------------------------

def test_rubric_settings_expand_to_launch_and_throughput_cases_in_two_dtypes():
    s = TimingSettings.for_device(rubric_module.load().parts["timing"].settings, "cuda")
    names = [c.name for c in s.cases()]
    assert names[0] == "launch float32 fwd" and len(names) == 8 and "throughput bfloat16 fwd+bwd" in names
    launch = s.cases()[0]
    assert launch.flops(512) == 8 * 2 * 512 * 1024 ** 2 + 4 * 2 * 512 ** 2 * 1024
    assert s.cases()[1].flops(512) == 3 * launch.flops(512)


def test_a_missing_or_misspelt_rubric_key_is_an_error():
    table = {k: v for k, v in rubric_module.load().parts["timing"].settings.items() if k != "cpu"}
    table["pair"] = table.pop("pairs")
    with pytest.raises(ValueError, match="missing keys \\['pairs'\\], unknown keys \\['pair'\\]"):
        TimingSettings.from_table(table)


# --- on a CUDA GPU ------------------------------------------------------------------------------
# gpu_checks/device_run.py runs these on the lent GPU; its CPU dry run runs the same tests on the CPU
# (GPU_CHECKS_TEST_DEVICE=cpu), so that they are rehearsed before the one call that counts.

@pytest.fixture
def timing_device():
    device = os.environ.get(device_run.TEST_DEVICE_ENV, "cuda")
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    return device


# A loop over 128 queries costs hundreds of extra operations: far over 3x on any device.
SMALL_LAUNCH = {"launch": {"batch": 2, "seq_lens": [64, 128], "d_model": 64, "num_heads": 4, "threshold": 3.0}}


@pytest.mark.cuda
def test_on_the_device_a_correct_rewrite_agrees_with_the_reference_in_every_case_and_dtype(timing_device):
    speed_blind = settings(**NOISE_PROOF, configs={"tiny": {**TINY["tiny"], "threshold": 100.0}}, pairs=6,
                           early_pairs=3)
    results = judge_file(GPU_CHECKS / "calibration" / "good_einsum.py", speed_blind, timing_device)
    assert [r.status for r in results] == ["passed"] * 4, [r.reasons for r in results]
    assert results[0].device["uuid"] != "cpu" if timing_device == "cuda" else results[0].device["uuid"] == "cpu"


@pytest.mark.cuda
@pytest.mark.parametrize("name, expected", [
    ("caches_by_pointer.py", "on a timed call, your code: the output is off by"),
    ("nan_after_warmup.py", "NaN"),
    ("flips_tf32.py", "changed torch.backends.cuda.matmul.allow_tf32 from False to True"),
    ("side_stream_loop.py", "x the reference's time"),
])
def test_on_the_device_each_cheat_fails(name, expected, timing_device, restored_flags):
    if name == "side_stream_loop.py" and timing_device != "cuda":
        pytest.skip("a side stream needs CUDA")
    s = settings(**NOISE_PROOF, configs={"launch": {**SMALL_LAUNCH["launch"], "num_heads": 16}}, dtypes=["float32"])
    result = judge_file(GPU_CHECKS / "adversarial" / name, s, timing_device)[0]
    assert result.status == "failed" and expected in result.reasons[0], result.reasons


@pytest.mark.cuda
def test_on_the_device_grade_timing_passes_the_reference_and_fails_a_loop_over_queries(timing_device):
    """Whole sessions through worker processes at the process level, as `grade` runs them on a GPU
    machine without bubblewrap; on CUDA the device is found by itself (auto) and reached inside the
    workers (harness.require_cuda_inside)."""
    rubric = small_rubric(timing_device, configs=SMALL_LAUNCH, dtypes=["float32", "bfloat16"])
    asked = None if timing_device == "cuda" else "cpu"
    reference = grade_timing(REFERENCE_FILE, rubric, Isolation("process"), device=asked, seed=5)
    assert (reference["status"], reference["score"], reference["device"]) == ("passed", 5.0, timing_device), \
        reference["output"]
    assert ("on the CPU" in reference["output"].splitlines()[0]) == (timing_device == "cpu")
    loop = grade_timing(GPU_CHECKS / "calibration" / "bad_loop_queries.py", rubric, Isolation("process"),
                        device=asked, seed=5)
    assert (loop["status"], loop["score"]) == ("failed", 0.0)
    assert "x the reference's time" in loop["output"], loop["output"]


# --- the device run's script (gpu_checks/device_run.py), rehearsed without a GPU ------------------

def test_device_run_plans_every_step_on_the_device_asked_within_the_total_time(tmp_path):
    gpu = {s.name: s for s in device_run.plan(False, tmp_path, tmp_path / "out")}
    dry = {s.name: s for s in device_run.plan(True, tmp_path, tmp_path / "out")}
    assert list(gpu) == list(dry) == ["versions", "cuda_tests", "grade_reference", "grade_bad_loop_heads", "validate"]
    for name in ("grade_reference", "grade_bad_loop_heads"):
        assert " --isolation process --timing-device cuda " in " ".join(gpu[name].commands[0]) + " "
        assert " --timing-device cpu " in " ".join(dry[name].commands[0]) + " "
    assert gpu["validate"].commands[0][-4:] == ["--device", "cuda", "--out", str(tmp_path / "validation")]
    assert "--rubric" in dry["validate"].commands[0] and "pairs = 6" in (tmp_path / "dry-run-rubric.toml").read_text()
    assert (gpu["cuda_tests"].env, dry["cuda_tests"].env) == ({"GPU_CHECKS_TEST_DEVICE": "cuda"},
                                                              {"GPU_CHECKS_TEST_DEVICE": "cpu"})
    assert "nvidia-smi" in gpu["versions"].commands[2]
    # the steps before validate, at their limits, leave it two minutes of budget and its grace
    fixed = sum(s.limit_s for s in gpu.values() if s.name != "validate")
    assert fixed + device_run.VALIDATE_GRACE_S + 120 <= device_run.TOTAL_S["gpu"] <= 8 * 60
    # what comes back from the device: at most 8 plain files, in one folder, with plain names
    assert len(device_run.FILES) <= 8 and all(re.fullmatch(r"[A-Za-z0-9._-]+", f) for f in device_run.FILES.values())


def test_device_run_keeps_going_after_a_step_fails_or_runs_out_of_time(tmp_path):
    py = sys.executable
    steps = [device_run.Step("hangs", [[py, "-c", "import subprocess, sys, time; subprocess.Popen("
                                        "[sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)"]], 2),
             device_run.Step("fails", [[py, "-c", "print('half'); raise SystemExit(3)"],
                                       [py, "-c", "print('on')"]], 30),
             device_run.Step("missing", [["no-such-program-here"]], 30),
             device_run.Step("works", [[py, "-c", "print('done')"]], 30)]
    log = tmp_path / "device-run.log"
    started = time.monotonic()
    for step in steps:
        device_run.run_step(step, log, dict(os.environ))
    assert time.monotonic() - started < 20  # the hanging step and its child were killed at its limit
    assert [s.result["status"] for s in steps] == ["timed out after 2 s", "exit 3",
                                                   "could not start no-such-program-here: No such file or directory",
                                                   "ok"]
    assert steps[1].result["exit_codes"] == [3, 0]
    text = log.read_text()
    assert "===== fails: exit 3" in text and "half" in text and "on\n" in text and "done" in text


def fake_device_output(tmp_path, kind="gpu"):
    """A device run's OUT as the steps leave it, with made-up figures."""
    out, work = tmp_path / "out", tmp_path / "work"
    (work / "validation").mkdir(parents=True)
    out.mkdir()
    (work / "versions.out").write_text(
        '$ python -c ...\n{"python": "3.12.3", "torch": "2.11.0+cu130", "cuda": "13.0", "cuda_available": true, '
        '"gpu": "NVIDIA H200", "gpu_memory_gib": 139.8, "capability": "9.0", "triton": "3.6.0"}\n'
        '{"as_worker_user": {"user": "nobody", "cuda_available": true, "matmul_ok": true}}\n'
        "$ nvidia-smi ...\nname, driver_version, memory.total [MiB], power.limit [W], clocks.max.sm [MHz]\n"
        "NVIDIA H200, 580.65.06, 143771 MiB, 700.00 W, 1980 MHz\n")
    row = {"name": "timing: speed against the reference (CUDA)", "score": 5.0, "max_score": 5.0, "tags": ["timing"],
           "output": "Timing against the reference on CUDA: passed\nlaunch float32 fwd  20  1.02"}
    (out / "grade-reference.json").write_text(json.dumps(
        {"score": 100.0, "tests": [row], "extra_data": {"status": "graded", "max_score": 100.0}}))
    (out / "cuda-tests.xml").write_text(
        '<testsuites><testsuite><testcase classname="tests.test_gpu_checks" name="test_a" time="1.5"/>'
        '<testcase classname="tests.test_gpu_checks" name="test_b" time="0.1"><skipped message="needs a CUDA GPU"/>'
        '</testcase><testcase classname="tests.test_gpu_checks" name="test_c" time="2"><failure message="boom"/>'
        "</testcase></testsuite></testsuites>")
    (work / "validation" / "gpu-validation-2026-12-01.md").write_text(
        "# gpu_checks validation\n\n## Expectations\n\n| reference | passed | 10 | 10 of 10 | 1.03 |\n")
    (work / "validation" / "gpu-validation-2026-12-01.json").write_text(json.dumps(
        {"all_expectations_met": True, "elapsed_s": 200, "budget_s": 215, "isolation": "process",
         "machine": "NVIDIA H200", "items": {"reference": {"expected": "passed", "runs": []}}}))
    steps = device_run.plan(kind != "gpu", work, out)
    for step in steps:
        step.result = {"status": "ok", "limit_s": 30, "exit_codes": [0], "seconds": 1.0}
    steps[2].result = {"status": "exit 1", "limit_s": 75, "exit_codes": [1], "seconds": 40.0}
    steps[3].result = {"status": "not run"}
    device_run.write_summary(kind, "2026-12-01T16:00:00+00:00", time.monotonic() - 300, steps, out, work)
    return out


def test_device_run_summary_reads_every_step_output(tmp_path):
    out = fake_device_output(tmp_path)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["versions"]["gpu"] == "NVIDIA H200" and summary["versions"]["driver"] == "580.65.06"
    assert summary["versions"]["as_worker_user"] == {"user": "nobody", "cuda_available": True, "matmul_ok": True}
    assert summary["all_steps_ok"] is False and summary["steps"][2]["status"] == "exit 1"
    assert summary["grades"] == {"reference": {"status": "graded", "score": 100.0, "max_score": 100.0, "timing": {
        "name": "timing: speed against the reference (CUDA)", "score": 5.0, "max_score": 5.0,
        "output": "Timing against the reference on CUDA: passed\nlaunch float32 fwd  20  1.02"}}}
    tests = summary["cuda_tests"]
    assert (tests["passed"], tests["failed"], tests["skipped"]) == (1, 1, 1)
    assert summary["validation"]["all_expectations_met"] is True
    assert sorted(summary["files"]) == ["cuda-tests.xml", "grade-reference.json", "summary.json", "summary.md",
                                        "validation.json", "validation.md"]
    page = (out / "summary.md").read_text()
    assert "NVIDIA H200" in page and "driver 580.65.06" in page and "| grade_reference | 75 | 40.0 | exit 1 |" in page
    assert "- failed: tests.test_gpu_checks::test_c (2.0 s) boom" in page and "10 of 10" in page


@pytest.mark.parametrize("kind, stem", [("gpu", "gpu-validation-2026-12-01"),
                                        ("cpu-dry-run", "cpu-dry-run-device-run-2026-12-01")])
def test_publishing_a_device_run_writes_the_benchmark_page_named_by_what_ran(tmp_path, kind, stem):
    out = fake_device_output(tmp_path, kind)
    docs = tmp_path / "docs"
    done = subprocess.run([sys.executable, str(GPU_CHECKS / "publish_device_run.py"), str(out), "--out", str(docs)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in docs.iterdir()) == [f"{stem}.json", f"{stem}.md"]
    page, figures = (docs / f"{stem}.md").read_text(), json.loads((docs / f"{stem}.json").read_text())
    assert "NVIDIA H200" in page and "10 of 10" in page and figures["summary"]["kind"] == kind
    assert figures["validation"]["budget_s"] == 215
    empty = subprocess.run([sys.executable, str(GPU_CHECKS / "publish_device_run.py"), str(tmp_path / "nothing")],
                           capture_output=True, text=True)
    assert empty.returncode == 1 and "no summary.json" in empty.stderr
