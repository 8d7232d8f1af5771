"""The grader's test harness. This process is a user of the environment too: nbgrader's Gradebook,
opened here to read scores, starts `alembic` by name.

It also marks slow tests `slow`: `make test-fast` (the edit loop) leaves them out with
`-m "not slow"`, `make test` (CI, the merge gate) runs them all. Both lists below were chosen by
measuring on the 2-core machine; docs/benchmarks/test-durations.md says how to measure again. A test
renamed or added is simply not marked: it runs in both tiers, and only makes the fast one slower."""
from pathlib import Path

import pytest

from autograder.core import paths

paths.put_environment_first()

# Whole files, slow as a whole: each grades a corpus or the whole grading routes through real
# workers, works as a student in a built release, builds fresh environments, runs real nbgrader, a
# browser, a cluster or a container, or runs timing sessions.
SLOW_FILES = {
    # grade a corpus of submissions, each through real sandboxed workers
    "test_adversarial.py",  # the adversarial corpus, at the strongest and at the process level
    "test_mutants.py",  # every mutant and valid solution of corpus/
    "test_diagnosis.py",  # the diagnosis of every mutant of the corpus (one fixture: a minute)
    "test_diagnosis_generated.py",  # AST-generated mutants against the catalog's models
    "test_honest_corpus.py",  # corpus/honest and corpus/honest_outside as batches
    "test_profile_grade.py",  # benchmarks/profile_grade.py end to end: a cold grade, the unit, grades in a slot
    "test_realworld.py",  # corpus/realworld through `check`
    "test_same_grades.py",  # grader slots grading files twice
    "test_hidden_determinism.py",  # the hidden suite on mutants, twice and through the worker
    "test_cuda_routes.py",  # `grade`, a batch and Gradescope's runner in full (about 40 s each)
    # run as a student runs it: a student release built, then `check` and pytest in subprocesses
    "test_check.py",
    "test_student_route.py",
    # build environments: fresh virtual environments, pip installs, an old torch
    "test_declared_dependencies.py",
    "test_environment.py",
    # the real nbgrader on a copy of the course
    "test_nbgrader.py",
    "test_nbgrader_course.py",
    "test_nbgrader_feedback.py",  # test_nbgrader.py's course, then gradebook --write and generate_feedback
    "test_course_parts.py",  # a part added to (and one dropped from) a copy of the project, graded by every route
    # a real headless browser, a real Dask cluster, a container like Gradescope's
    "test_report_browser.py",
    "test_cluster.py",
    "test_gradescope_container.py",
    # timing: whole timing sessions through the command line
    "test_timing_batch.py",
    # a batch graded, reviewed and regraded through the command line (review decisions bound to files)
    "test_review_binding.py",
    # an instructor's term through the command line: batches stopped by a signal, scores set by hand,
    # feedback pages, Gradescope's bundle rehearsed, a Canvas download with extensions
    "test_batch_stop.py",
    "test_review_score.py",
    "test_feedback_page.py",
    "test_gradescope_try.py",
    "test_lms_intake.py",
}

# Single tests of otherwise quicker files that took 10 s or more each in one of the measured runs (a
# whole grade, a batch, a limit waited out), as "file::function" (every parametrization of it).
SLOW_TESTS = {
    "test_sandbox_refusals.py::test_a_call_only_seccomp_refuses_is_named_in_the_failed_tests_message",
    "test_sandbox_refusals.py::test_a_path_outside_landlocks_allowlist_is_named",
    "test_sandbox_refusals.py::test_the_reference_still_gets_full_marks",
    "test_attention_refusal.py::test_honest_use_of_pickle_gc_and_inspect_keeps_full_marks_and_is_not_held",
    "test_batch.py::test_a_killed_batch_resumes_without_recomputing_finished_grades",
    "test_benchmark_script.py::test_batch_cpu_accounts_for_a_cold_batch",
    "test_class_report.py::test_a_real_batch_tells_untouched_and_not_compiling_work_from_an_attempt_that_scores_0",
    "test_carry_forward.py::test_every_route_charges_the_bug_once_alike",
    "test_carry_forward.py::test_an_upstream_bug_written_in_another_style_is_charged_once",
    "test_confinement.py::test_a_batch_is_unaffected_by_its_siblings_attacks",
    "test_gradescope.py::test_an_upload_without_mhsa_py_gets_a_results_file_that_says_so",
    "test_hints.py::test_no_hint_names_a_cause_the_mistake_does_not_have",
    "test_gradescope.py::test_the_reference_gets_full_marks_on_every_graded_part",
    "test_gradescope.py::test_the_stubs_get_nothing",
    "test_grading.py::test_the_same_submission_gets_the_same_results_twice",
    "test_grading.py::test_the_timeout_option_reaches_the_worker_and_auto_falls_back_without_bubblewrap",
    "test_grading.py::test_a_lone_grade_starts_its_worker_before_importing_torch_and_the_worker_is_used",
    "test_grading.py::test_a_whole_grade_past_its_time_limit_still_writes_results_and_leaves_no_worker",
    "test_isolation.py::test_malformed_first_replies_never_leave_workers_behind",
    "test_isolation.py::test_the_cpu_limit_kills_a_worker_that_spins",
    "test_knowledge_feedback.py::test_grading_collected_work_scores_the_knowledge_check",
    "test_limits.py::test_the_whole_submission_limit_keeps_the_tests_that_finished",
    "test_loading_robustness.py::test_a_knowledge_py_that_does_not_parse_costs_the_knowledge_check_only",
    # these two share the time_bomb_by_grade fixture (a `grade` run, about 20 s)
    "test_limits.py::test_a_time_bomb_in_one_method_costs_only_the_parts_that_call_it",
    "test_limits.py::test_a_batch_gives_the_time_bomb_the_same_grade",
    "test_partial_compile.py::test_syntax_error_in_sdpa_costs_sdpa_not_heads_or_masks",
    "test_partial_compile.py::test_syntax_error_in_transformer_block_costs_only_the_block",
    # these two run the public tests and `check` inside a built student release
    "test_release.py::test_public_tests_run_inside_the_release_alone",
    "test_release.py::test_students_check_command_works_inside_the_release",
    "test_rubric.py::test_a_batchs_graders_use_the_batchs_rubric",
    "test_shrinking.py::test_a_failure_charged_to_its_own_part_is_shrunk_too",
    "test_rubric.py::test_grade_with_a_custom_rubric_shows_what_that_rubric_says",
    "test_worker_template.py::test_a_slot_grades_the_reference_in_full_after_a_tamperer",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        name = Path(str(item.fspath)).name
        if name in SLOW_FILES or f"{name}::{item.originalname}" in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)
