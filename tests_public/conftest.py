"""Public tests: run `pytest tests_public` (your assignment/mhsa.py) or add --impl PATH."""
