# Course repository tasks. `make demo` sets up and grades the bundled examples; `make test` runs
# everything CI runs, the merge gate, prints the 25 slowest tests and writes every test's time to
# build/test-report.xml (benchmarks/test_durations.py totals it by file); `make test-fast`, the edit
# loop, runs the same but leaves out the grader's tests marked slow (tests/conftest.py lists them).
# All run in a project-local virtual environment, .venv, that the first run creates with PYTHON
# (setup_venv.py) and that is brought up to date whenever pyproject.toml or requirements.txt
# changes. Each target installs only what it needs: pyproject.toml's dependencies (grading) for
# `demo`, its `course` extra (nbgrader) for `release`, `gradescope` (both check the generated notebooks
# first) and `regenerate`, every extra (`dev`) for `test` and `test-fast`; `make setup-EXTRA` installs
# one extra by hand.
# PYTHON=/path/to/python3 chooses the interpreter that creates it (delete .venv to switch);
# VENV=/path/to/env uses an environment you already have instead (created there if missing).
PYTHON ?= python3
VENV ?= .venv
VENV_PYTHON := $(VENV)/bin/python
# Runs the environment's Python with the environment's bin folder first on PATH: its tools start one
# another by name (nbgrader's gradebook runs `alembic`), and a fresh machine has none of them elsewhere.
IN_VENV := PATH="$(abspath $(VENV))/bin:$$PATH" $(VENV_PYTHON)
# Newer than pyproject.toml and requirements.txt once the environment holds what they declare and pin:
# INSTALLED for grading alone, INSTALLED-EXTRA for grading and one extra.
INSTALLED := $(VENV)/.installed
EXTRAS := course cluster report dev
# The grader's tests run a file per core (pytest-xdist), at most four: a test mostly waits (a worker's
# start, a time limit, pip), and one file's tests share its fixtures and fixed paths in one process.
SIDE_BY_SIDE := --numprocesses auto --maxprocesses 4 --dist loadfile

.PHONY: setup $(addprefix setup-,$(EXTRAS)) demo test test-fast release gradescope regenerate

setup: $(INSTALLED)

$(addprefix setup-,$(EXTRAS)): setup-%: $(INSTALLED)-%

$(INSTALLED): pyproject.toml requirements.txt
	@$(PYTHON) setup_venv.py $(VENV)
	@touch $@

$(addprefix $(INSTALLED)-,$(EXTRAS)): $(INSTALLED)-%: pyproject.toml requirements.txt
	@$(PYTHON) setup_venv.py $(VENV) --extras $*
	@touch $@

demo: setup
	$(IN_VENV) -m autograder grade examples/submissions --batch --out grading-out/examples --force --jobs 2

test: setup-dev
	$(IN_VENV) -m autograder release --check
	$(IN_VENV) -m pytest tests_public tests_hidden --impl reference -q
	$(IN_VENV) -m pytest tests -q $(SIDE_BY_SIDE) --durations=25 --junitxml=build/test-report.xml

test-fast: setup-dev
	$(IN_VENV) -m autograder release --check
	$(IN_VENV) -m pytest tests_public tests_hidden --impl reference -q
	$(IN_VENV) -m pytest tests -q $(SIDE_BY_SIDE) -m "not slow"

release: setup-course
	$(IN_VENV) -m autograder release build/student-release

gradescope: setup-course
	$(IN_VENV) -m autograder gradescope build/gradescope-autograder.zip

regenerate: setup-course
	$(IN_VENV) -m autograder release --write
