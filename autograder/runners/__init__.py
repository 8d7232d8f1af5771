"""Routes that grade submissions through grader slots: the slot itself, a batch, a Dask cluster, Gradescope."""
