"""What a student hands in, read without running it: the file routed, a notebook's cells, the knowledge answers."""
