"""nbgrader extensions of the MHSA course, loaded by course/nbgrader_config.py (docs/nbgrader.md)."""
