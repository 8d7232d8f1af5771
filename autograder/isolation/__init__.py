"""Walling student code off from the grader: the host side starts and confines workers, the guest side runs in them.

`host/` runs in the grader (isolation levels, the bubblewrap command, a worker process and the
worker template); `guest/` is copied into the worker by file path and imports nothing of the
repository.
"""
