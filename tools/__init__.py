"""The project's evaluation tooling, outside the product: the corpus's loaders, the mutant generator and the diagnosis's accuracy measures.

The tests and the benchmark scripts use these; no module of autograder/ or gpu_checks/ imports them,
and neither a student's release nor the Gradescope bundle ships them (autograder/core/paths.py lists what
ships; tests/test_imports.py and tests/test_release.py check both).
"""
