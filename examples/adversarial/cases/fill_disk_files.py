# 2 GB into the worker's folder as 32 MB files, each under the per-file limit: only a budget for the
# whole folder stops it (a size-limited tmpfs of the worker's own, at both levels).
def _fill_many(total_mb=2048, file_mb=32):
    written = 0
    try:
        for index in range(total_mb // file_mb):
            with open(f"fill-{index}.bin", "wb") as sink:
                for _ in range(file_mb):
                    sink.write(b"\0" * (1 << 20))
                    sink.flush()
                    written += 1
    except OSError as err:
        return written, type(err).__name__
    return written, None


_written, _error = _fill_many()
print(f"cheat: {_written} MB written" + (f", then {_error}" if _error else ""))
if _error and _written <= 64:
    print("cheat: the folder's budget stopped the writes")
