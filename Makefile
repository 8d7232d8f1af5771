# Course repository tasks. `make demo` sets up and grades the bundled examples; `make test` runs
# everything CI runs. PYTHON can point at a virtual environment's interpreter.
PYTHON ?= python3

.PHONY: setup demo test test-fast release gradescope regenerate

setup:
	$(PYTHON) -m pip install -q -r requirements.txt

demo: setup
	$(PYTHON) -m autograder grade examples/submissions --batch --out grading-out/examples --force --jobs 2

test: setup
	$(PYTHON) -m autograder release --check
	$(PYTHON) -m pytest tests_public tests_hidden --impl reference -q
	$(PYTHON) -m pytest tests -q

release:
	$(PYTHON) -m autograder release build/student-release

gradescope:
	$(PYTHON) -m autograder gradescope build/gradescope-autograder.zip

regenerate:
	$(PYTHON) -m autograder release --write
