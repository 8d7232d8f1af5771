"""Code that runs inside the worker process next to the student's submission.

Modules here import only the standard library and torch, because the worker loads them by file
path inside the sandbox, where the rest of the repository does not exist.
"""
