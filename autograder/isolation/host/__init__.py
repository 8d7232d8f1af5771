"""The grader's side of a worker: the isolation levels, the bubblewrap command, starting, feeding and killing workers."""
