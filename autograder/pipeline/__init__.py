"""Grading one submission in this process: the context, the ordered stages, and the failure result when a grade cannot be made."""
