"""Running many files: discovery and one file at a time (`runner`), the result cache
(`cache`), the worker processes (`pool`), the rounds that bring a project's summaries to
a fixed point (`rounds`), and `parallel`: `run_files`, the one entry the CLI and the
verifier call, and `opened` + `converge`, the rounds and the cache `explain` uses (the
only code that reads or writes the results' cache)."""
