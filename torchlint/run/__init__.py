"""Running many files: `run(plan, files, mode)`, the one entry of the CLI's check, fix
and explain and of the verifier, and the only code that reads or writes the results'
cache (`files`); discovery and one file's text (`runner`), the cache (`cache`), the
worker processes (`pool`), and the rounds that bring a project's summaries to a fixed
point (`rounds`)."""

from torchlint.run.files import Interrupted, Mode, Run, run, run_stdin

__all__ = ["Interrupted", "Mode", "Run", "run", "run_stdin"]
