# Write 512 MB into the worker's folder and into /tmp: both must stop early (the file size limit,
# the sandbox's size-limited tmpfs, or the tripwire on writes outside the folder).
def _fill(path, megabytes=512):
    written = 0
    try:
        with open(path, "wb") as sink:
            for _ in range(megabytes):
                sink.write(b"\0" * (1 << 20))
                sink.flush()
                written += 1
    except OSError as err:
        return f"stopped at {written} MB ({type(err).__name__})"
    return f"filled {written} MB"


_results = [_fill("fill.bin"), _fill("/tmp/fill.bin")]
print("cheat:", _results)
if all(r.startswith("stopped") for r in _results):
    print("cheat: both writes stopped")
