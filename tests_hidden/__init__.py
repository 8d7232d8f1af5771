"""Hidden tests: never released to students (see docs/hidden-tests.md)."""
