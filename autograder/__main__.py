"""`python -m autograder`: starts the command line (autograder/cli.py)."""
from autograder.cli import main

raise SystemExit(main())
