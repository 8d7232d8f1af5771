"""TOML reading on every Python the project supports.

The standard library's `tomllib` from Python 3.11, its backport `tomli` on 3.10 (pyproject.toml
declares it there only)."""
try:
    from tomllib import loads  # novermin: the backport below stands in for it on Python 3.10
except ModuleNotFoundError:
    from tomli import loads

__all__ = ["loads"]
