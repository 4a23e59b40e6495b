"""A file's summary read on its own (`SummaryReader`): what a project's program reads
when another file asks about a name the file defines and no analysis has told it yet."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from torchlint.lint.tokens import STAR_IMPORT, may_tell
from torchlint.settings import Settings
from torchlint.text.source import SourceError, decode, read_bytes

if TYPE_CHECKING:  # the linter and the semantic model are imported when a file is read
    from torchlint.semantic.external import Summary


@dataclass(frozen=True)
class SummaryReader:
    """Reads the summary of a file of a project (by its key in `paths`) on its own,
    where its text may tell something, unless the run's rounds analyse that file anyway
    (`summarized`: a file of the run, or one that may tell the run's files something)
    or its summary needs the project (a star import: the rounds summarize it, as a file
    that `asks_project`)."""

    settings: Settings
    paths: dict[str, Path]
    summarized: set[str]

    def __call__(self, key: str) -> Summary | None:
        from torchlint.lint.linter import Linter
        from torchlint.lint.parser import LintError
        from torchlint.semantic.external import Environment, Summary

        if key in self.summarized:
            return None
        try:
            text = decode(read_bytes(self.paths[key]))[0]
        except (KeyError, SourceError):
            return None
        if not may_tell(text):
            return Summary()
        if STAR_IMPORT.search(text):
            return None  # what it binds is the project's to say: the rounds summarize it
        try:
            return Linter([], self.settings).summarize(text, key, Environment(path=key))
        except LintError:
            return None
