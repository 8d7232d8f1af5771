"""`python -m autograder`: starts the command line (autograder/cli/__init__.py)."""
from autograder.cli import main

raise SystemExit(main())
