"""gpu_checks on CPU: the decision rules with scripted clocks, the worker-side measurements with real
tensors in this process, and two whole sessions through real worker processes. Every anti-cheat
check has a submission or a script here that it must fail."""
import dataclasses
import importlib.util
import math
import random
import time
from pathlib import Path

import pytest
import torch

from autograder import rubric as rubric_module
from autograder.isolation import Isolation
from autograder.paths import REFERENCE as REFERENCE_FILE
from autograder.sandbox import executor
from gpu_checks import grade_timing, harness
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

    def __init__(self, path: Path):
        spec = importlib.util.spec_from_file_location(f"timed_{path.stem}", path)
        self.module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(self.module)
        self.session = TimingSession(executor.ForbiddenApiMonitor, executor.forbidden_submodules)

    def setup(self, case, state):
        return setup_result(self._answer(setup_request(case, state, "cpu")))

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


def judge_file(path: Path, s):
    state = LocalWorker(REFERENCE_FILE).module.MultiHeadSelfAttention(32, 4).state_dict()
    workers = {STUDENT: LocalWorker(path), REFERENCE: LocalWorker(REFERENCE_FILE)}
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

def rubric_for_cpu(**overrides):
    """The rubric with its [parts.timing.cpu] table made small: tiny shapes, few pairs, float32 only."""
    real = rubric_module.load()
    table = real.parts["timing"].settings
    cpu = {**table["cpu"], "configs": {"tiny": {**TINY["tiny"], "threshold": 4.0}}, "dtypes": ["float32"],
           "pairs": 6, "early_pairs": 3, "rerun_pairs": 8, "warmup_pairs": 1, "check_calls": 1, "solo_calls": 3,
           **NOISE_PROOF, **overrides}
    timing = dataclasses.replace(real.parts["timing"], settings={**table, "cpu": cpu})
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
    result = grade_timing(GPU_CHECKS / "adversarial" / "tampered_clock.py", rubric_for_cpu(out_of_band_slack_ms=10.0),
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
