"""pytest plugin: a student's own `pytest tests_public` ends with the likely mistake of each failed part.

The same diagnosis as the graded result's (the grade's `diagnose` stage), on the same submission,
through the backend the tests used, once they have all run. The grader's own runs are left alone:
its `diagnose` stage does this for them.
"""
from pathlib import Path

import pytest

from autograder.record.results import LIKELY_MISTAKE

MISTAKES = pytest.StashKey[dict]()  # part -> the diagnosis's message


class PartTally:
    """Each graded test's result by part: part -> (passed, failed, failed for a forbidden API)."""

    def __init__(self):
        self.parts = {}

    def pytest_runtest_logreport(self, report):
        properties = dict(report.user_properties)
        if "part" not in properties or (report.when != "call" and not report.failed):
            return
        passed, failed, forbidden = self.parts.get(properties["part"], (0, 0, 0))
        self.parts[properties["part"]] = (passed + report.passed, failed + report.failed,
                                          forbidden + bool(report.failed and properties.get("forbidden")))

    def failed_parts(self, parts) -> list:
        """Those of `parts` (in their order) that failed a test for something other than a forbidden API
        (said by the test), once some test passed: code that runs nowhere gives the diagnosis nothing
        to compare."""
        if not any(passed for passed, _, _ in self.parts.values()):
            return []
        return [part for part in parts if part in self.parts and self.parts[part][1] > self.parts[part][2]]


TALLY = pytest.StashKey[PartTally]()


def pytest_configure(config):
    config.stash[TALLY] = tally = PartTally()
    config.pluginmanager.register(tally, "mhsa-part-tally")


def pytest_mhsa_tests_done(config, backend, path: Path, rubric):
    failed = config.stash[TALLY].failed_parts(rubric.code_parts)
    if not (failed and rubric.diagnosis):
        return
    from autograder.feedback import diagnosis

    try:
        config.stash[MISTAKES] = diagnosis.diagnose(backend, failed, source=path.read_text())
    except Exception:  # noqa: BLE001 - advice: failing to give it changes none of the tests' results
        return


def pytest_terminal_summary(terminalreporter, config):
    found = config.stash.get(MISTAKES, {})
    if not found:
        return
    from autograder.core.rubric import load

    titles = {name: part.title for name, part in load().parts.items()}
    terminalreporter.section("likely mistakes")
    for part, message in found.items():
        terminalreporter.write_line(f"{part} ({titles.get(part, part)}): {LIKELY_MISTAKE}{message}")
