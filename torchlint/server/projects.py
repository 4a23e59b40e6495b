"""The projects of the editor's documents: what each document is told of the rest of its
project, as `torchlint check` tells it (no LSP types here; the worker thread only).

A document in a workspace folder belongs to the project around it (`find_root`: the
nearest folder with a marker, else the workspace folder); an untitled buffer, or a file
outside every folder, is analysed alone. A project is opened when one of its documents
is first linted: its files found as `torchlint check` finds them, and the summaries its
cache holds for their bytes read at once. The rest are computed afterwards, a file at a
time between lints, by the rounds a run goes through (`rounds.Rounds`). A project
knows its files as saved: a document's unsaved text is linted with what the project
says, and tells the project nothing until it is saved (`reread`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from torchlint.config.load import Config, ConfigError
from torchlint.config.plan import RunPlan
from torchlint.project import Project, find_root
from torchlint.results import ANALYSIS_ERROR, Answers, FileError, FileResult
from torchlint.run.cache import location
from torchlint.run.files import Mode
from torchlint.run.pool import INTERNAL
from torchlint.run.rounds import Rounds, result_holds
from torchlint.run.runner import display
from torchlint.semantic.external import Environment
from torchlint.server.settings import Configs, EditorSettings, setup
from torchlint.settings import Settings

if TYPE_CHECKING:
    from torchlint.run.pool import Task as _Task

_ids = itertools.count(1)  # openings, in order: a later one replaces an earlier one
How = tuple[tuple[str, ...], Settings]  # the rules a project is read for, and their settings


@dataclass
class Opened:
    """One project of the session: its rounds (the project is their only one)."""

    root: Path
    rounds: Rounds
    plan: RunPlan  # what the project's files are read for (its rules and settings)
    id: int = field(default_factory=lambda: next(_ids))
    cached: int = 0  # summaries read from the cache when opened
    computed: int = 0  # summaries computed since

    @property
    def how(self) -> How:
        return self.plan.codes, self.plan.settings

    @property
    def project(self) -> Project:
        return self.rounds.projects[0]

    def key(self, path: Path) -> str | None:
        return self.project.layout.key(path)

    def environment(self, path: Path) -> Environment:
        """What the project tells the document at `path` (a fresh record of answers)."""
        key = self.key(path)
        assert key is not None
        return self.project.environment(key)

    def keep_fetched(self) -> None:
        """Store the summaries the project read on demand during a document's lint (of
        files on disk: what the project knows already)."""
        self.rounds.store_fetched()

    def stale(self, path: Path, answers: Answers, checked: bool) -> bool:
        """A lint of the document at `path` was told what the project no longer says."""
        key = self.key(path)
        return key is not None and not result_holds(self.project, key, answers, checked)

    # -- the rounds, a step at a time --------------------------------------------------

    def batches(self, round_: int) -> list[list[_Task]]:
        return self.rounds.batches(self.rounds.to_summarize())

    def analyse(self, task: _Task) -> FileResult:
        """One file's summary; a bug in torchlint is an error of that file (as in a run),
        never the end of the rounds."""
        self.computed += 1
        try:
            return self.rounds.analyse(task)
        except Exception as exc:  # (RecursionError too)
            message = f"{INTERNAL} ({type(exc).__name__}: {exc}); please report it with this file"
            return FileResult(display(task.path), errors=[FileError(ANALYSIS_ERROR, message)])

    def keep(self, tasks: list[_Task], results: list[FileResult]) -> None:
        for task, result in zip(tasks, results, strict=True):
            self.rounds.keep(task, result)

    def reread(self, changed: set[Path], moved: set[Path]) -> bool:
        """Files changed on disk (`moved`: created or deleted): those of the project read
        again; False when the project must be opened again instead: a file of it created
        or deleted, or one it did not know, or a package's `__init__.py` (the layout
        holds its re-exports). Files the config excludes do not count."""
        config = self.rounds.config
        for path in sorted(moved | changed):
            key = self.key(path)
            if key is None or config.excluded(path):
                continue
            if path in moved or key not in self.project.layout.paths:
                return False
            if key.endswith("__init__.py"):
                return False
        for path in sorted(changed):
            key = self.key(path)
            if key is not None and key in self.project.layout.paths:
                self.rounds.reread(0, key)
        return True

    def carry(self, old: Opened) -> None:
        """The summaries of an earlier opening of the project, for the files whose bytes
        are the same (what a cache would give, also without one)."""
        for (_, key), digest in self.rounds.digests.items():
            summary = old.project.summaries.get(key)
            if summary is not None and old.rounds.digests.get((0, key)) == digest:
                self.project.update(key, summary.to_json(), old.project.answers.get(key, {}))


class Projects:
    """The session's projects, by root."""

    def __init__(self, configs: Configs, cache: bool = True) -> None:
        self.configs = configs  # the server's (the worker thread's)
        self.cache = cache  # read and write the summary cache (`torchlint server --no-cache`)
        self.opened: dict[Path, Opened] = {}
        self.outdated: dict[Path, Opened] = {}  # to be opened again (`clear`)

    def clear(self) -> None:
        """Config files changed: each project is opened again when next asked (its files
        found again), keeping what it knows."""
        self.outdated.update(self.opened)
        self.opened.clear()

    def find(self, path: Path, folder: Path | None, editor: EditorSettings) -> Opened | None:
        """The project of the document at `path` (`folder`: the workspace folder holding
        it), opened if need be; None for a document analysed alone."""
        if folder is None:
            return None
        root = find_root(path.absolute(), folder.absolute())
        try:
            config = self.configs.config(root, root)
            chosen = setup(self.configs, editor, None, root)
        except ConfigError:
            return None  # its own lint says why, where it applies
        assert chosen is not None
        old = self.opened.get(root)
        if old is not None and old.how == (chosen.codes, chosen.settings):
            return old
        return self._open(root, chosen, config, old or self.outdated.pop(root, None))

    def reopen(self, opened: Opened) -> Opened:
        """The project opened again (its files found again), keeping what it knows; a
        project whose config cannot be read now stays as it was."""
        try:
            config = self.configs.config(opened.root, opened.root)
        except ConfigError:
            return opened
        return self._open(opened.root, opened.plan, config, opened)

    def _open(self, root: Path, plan: RunPlan, config: Config, old: Opened | None) -> Opened:
        cache_dir = location(config.root) if self.cache else None
        rounds = Rounds([], Mode.CHECK.job(plan), config, {}, cache_dir)  # as `check` reads them
        rounds.open(root)
        opened = Opened(root, rounds, plan, cached=len(rounds.projects[0].summaries))
        if old is not None:
            opened.carry(old)
        self.opened[root] = opened
        return opened
