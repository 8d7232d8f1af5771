# Course repository tasks. `make demo` sets up and grades the bundled examples; `make test` runs
# everything CI runs. Both run in a project-local virtual environment, .venv, that the first run
# creates with PYTHON (setup_venv.py) and that is brought up to date whenever requirements.txt
# changes. PYTHON=/path/to/python3 chooses the interpreter that creates it (delete .venv to switch);
# VENV=/path/to/env uses an environment you already have instead (created there if missing).
PYTHON ?= python3
VENV ?= .venv
VENV_PYTHON := $(VENV)/bin/python
# Runs the environment's Python with the environment's bin folder first on PATH: its tools start one
# another by name (nbgrader's gradebook runs `alembic`), and a fresh machine has none of them elsewhere.
IN_VENV := PATH="$(abspath $(VENV))/bin:$$PATH" $(VENV_PYTHON)
# Newer than requirements.txt once the environment holds what it pins.
REQUIREMENTS_INSTALLED := $(VENV)/.requirements-installed

.PHONY: setup demo test release gradescope regenerate

setup: $(REQUIREMENTS_INSTALLED)

$(REQUIREMENTS_INSTALLED): requirements.txt
	@$(PYTHON) setup_venv.py $(VENV)
	@touch $@

demo: setup
	$(IN_VENV) -m autograder grade examples/submissions --batch --out grading-out/examples --force --jobs 2

test: setup
	$(IN_VENV) -m autograder release --check
	$(IN_VENV) -m pytest tests_public tests_hidden --impl reference -q
	$(IN_VENV) -m pytest tests -q

release: setup
	$(IN_VENV) -m autograder release build/student-release

gradescope: setup
	$(IN_VENV) -m autograder gradescope build/gradescope-autograder.zip

regenerate: setup
	$(IN_VENV) -m autograder release --write
