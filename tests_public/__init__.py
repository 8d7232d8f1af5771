"""Public tests of the assignment: `pytest tests_public`."""
