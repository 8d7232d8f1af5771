# Another copy of the repository elsewhere on disk (tests/test_adversarial.py puts one at this
# path): nothing hides it, only an allowlist of readable paths keeps it out.
try:
    with open("/tmp/mhsa-adversarial-checkout/reference/mhsa.py") as _f:
        exec(compile(_f.read(), "reference", "exec"), globals())
    print("cheat: running the other checkout's reference")
except OSError as err:
    print("cheat: no other checkout", err)
