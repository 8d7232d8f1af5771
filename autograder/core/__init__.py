"""What every layer shares: where things live, the rubric, reading a handed-in file, the exceptions.

Nothing here starts a process, imports torch or knows a grade's stages; every other package may
import it.
"""
