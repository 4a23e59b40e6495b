"""Running many files: `files.run(plan, files, mode)`, the one entry of the CLI's check,
fix and explain and of the verifier, and the only code that reads or writes the results'
cache; discovery and one file's text (`runner`), the cache (`cache`), the worker
processes (`pool`), and the rounds that bring a project's summaries to a fixed point
(`rounds`)."""
