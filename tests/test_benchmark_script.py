"""The benchmark's batch folder still builds from the corpus (the script is run by hand, so it would
otherwise rot unnoticed when the corpus changes)."""
import importlib.util

from autograder.core.paths import REPO


def test_batch_folder_builds_the_requested_number_of_submissions(tmp_path):
    spec = importlib.util.spec_from_file_location("grading_benchmark", REPO / "benchmarks" / "grading.py")
    benchmark = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(benchmark)
    benchmark.batch_folder(tmp_path / "batch", 7)
    files = sorted((tmp_path / "batch").glob("*.py"))
    assert len(files) == 7
    assert all(f.read_text().strip() for f in files)
