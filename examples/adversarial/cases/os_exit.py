import os


def padding_mask(lengths, max_len=None):
    os._exit(3)  # ends the process at once: no exception, no cleanup
