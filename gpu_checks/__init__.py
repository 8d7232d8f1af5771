"""CUDA timing of a submission's MultiHeadSelfAttention against the reference (rubric part `timing`).

docs/gpu-checks.md has the design; `python -m gpu_checks SUBMISSION` prints a table.
"""
from gpu_checks.grading import grade_timing

__all__ = ["grade_timing"]
