# Course repository tasks. `make demo` sets up and grades the bundled examples; `make test` runs
# everything CI runs. Both run in a project-local virtual environment, .venv, that the first run
# creates with PYTHON (setup_venv.py) and that is brought up to date whenever requirements.txt
# changes. PYTHON=/path/to/python3 chooses the interpreter that creates it (delete .venv to switch);
# VENV=/path/to/env uses an environment you already have instead (created there if missing).
PYTHON ?= python3
VENV ?= .venv
VENV_PYTHON := $(VENV)/bin/python
# Newer than requirements.txt once the environment holds what it pins.
REQUIREMENTS_INSTALLED := $(VENV)/.requirements-installed

.PHONY: setup demo test release gradescope regenerate

setup: $(REQUIREMENTS_INSTALLED)

$(REQUIREMENTS_INSTALLED): requirements.txt
	@$(PYTHON) setup_venv.py $(VENV)
	@touch $@

demo: setup
	$(VENV_PYTHON) -m autograder grade examples/submissions --batch --out grading-out/examples --force --jobs 2

test: setup
	$(VENV_PYTHON) -m autograder release --check
	$(VENV_PYTHON) -m pytest tests_public tests_hidden --impl reference -q
	$(VENV_PYTHON) -m pytest tests -q

release: setup
	$(VENV_PYTHON) -m autograder release build/student-release

gradescope: setup
	$(VENV_PYTHON) -m autograder gradescope build/gradescope-autograder.zip

regenerate: setup
	$(VENV_PYTHON) -m autograder release --write
