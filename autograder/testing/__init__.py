"""What the suites use on a submission: calls as plain data, the backends that carry them out, oracles, checks, the pytest plugin."""
