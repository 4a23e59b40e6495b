"""The whole-program layer: the project a file belongs to (`layout`), the summaries of
its files linked into one program (`program`), and `Project`, what a run keeps of them:
each file's summary with the answers about the rest of the project it was computed
from. A summary (or a result) holds while those answers do; after an edit, the files
whose answers changed are the ones analysed again."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from torchlint.project.layout import Layout, find_root
from torchlint.results import Answers, answers_to_json

if TYPE_CHECKING:  # imported when first used: a run answered from the cache needs neither
    from torchlint.project.program import Fetch, Passing, Program
    from torchlint.semantic.external import Environment, Summary

__all__ = ["Layout", "Program", "Project", "find_root"]


def answers_digest(answers: Answers) -> str:
    """A file's answers, as a short digest (what a fixed point and a result keep of them)."""
    text = json.dumps(answers_to_json(answers), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def content_digest(raw: bytes) -> str:
    """The digest a file's bytes are stored under."""
    return hashlib.sha256(raw).hexdigest()


def __getattr__(name: str) -> Any:
    if name == "Program":
        from torchlint.project.program import Program

        return Program
    raise AttributeError(name)


@dataclass
class Project:
    """One project of a run."""

    layout: Layout
    summaries: dict[str, Summary] = field(default_factory=dict)
    answers: dict[str, Answers] = field(default_factory=dict)  # key -> its answers
    # Files that train, evaluate or load data (`tokens.engages`), and the scripts that
    # import them: they ask the project what they use; the others are analysed on their
    # own until the project reaches them.
    engaged: set[str] = field(default_factory=set)
    unreadable: set[str] = field(default_factory=set)  # files that could not be analysed
    fetch: Fetch | None = None  # reads a file's summary when another file needs it
    # Summaries read on demand (`fetch`) and not yet stored: kept here, so that a program
    # linked again after an update does not read them again.
    fetched: dict[str, Summary] = field(default_factory=dict)
    # The project's files are byte for byte what they were when a run last reached a
    # fixed point, but for the files in `recheck` (with the summary each had then):
    # every answer stored then holds while their summaries are still those. Nothing is
    # read until something needs the program (`seed` reads the stored summaries).
    trusted: bool = False
    recheck: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    reached: set[str] = field(default_factory=set)  # `Program.reaches` at the fixed point
    # Each file's answers at the fixed point (`answers_digest`): a result asking the same
    # holds without reading a stored summary.
    settled: dict[str, str] = field(default_factory=dict)
    seed: Callable[[], None] | None = None
    _program: Program | None = None
    _passing: Passing = field(default_factory=dict)  # what each call passes (`Program`)

    def ready(self) -> None:
        """The stored summaries, read."""
        if self.seed is not None:
            seed, self.seed, trusted = self.seed, None, self.trusted
            seed()
            self.trusted = trusted  # what was stored is the state trusted

    def holds_stored(self, key: str) -> bool:
        """What was stored for `key` holds without asking again."""
        return self.trusted and key not in self.recheck

    @property
    def program(self) -> Program:
        self.ready()
        if self._program is None:
            from torchlint.project.program import Program

            fetch = self._fetch if self.fetch is not None else None
            self._program = Program(self.layout, dict(self.summaries), fetch, self._passing)
        return self._program

    @property
    def linked(self) -> Program | None:
        """The program, if linked already (`program` links it)."""
        return self._program

    def _fetch(self, key: str) -> Summary | None:
        assert self.fetch is not None
        summary = self.fetch(key)
        if summary is not None:
            self.summaries[key] = self.fetched[key] = summary
            self.answers[key] = {}  # read on its own: it asked nothing
        return summary

    def take_fetched(self) -> dict[str, Summary]:
        """The summaries read on demand since last taken (to be stored)."""
        found, self.fetched = self.fetched, {}
        return found

    def environment(self, key: str) -> Environment:
        """What a file of the project is told: all of it where it engages or the project
        reaches it, else nothing but its own name (for the summary it gives)."""
        reached = key in self.reached if self.trusted else self.program.reaches(key)
        if key in self.engaged or reached:
            env = self.program.environment(key)
            env.engaged = key in self.engaged
            return env
        from torchlint.semantic.external import Environment

        return Environment(path=key)

    def holds(self, key: str, answers: Answers | None, digest: str | None = None) -> bool:
        """Answers recorded for `key` are still what the program answers: where trusted,
        those of the fixed point (a result computed before it, while another file
        differed, is checked). Answers known by their `digest` alone (None) hold only
        where trusted."""
        if self.holds_stored(key) and self.settled.get(key) == (
            digest or answers_digest(answers or {})
        ):
            return True
        return answers is not None and self.environment(key).holds(answers)

    def update(self, key: str, summary: dict[str, Any] | None, answers: Answers) -> bool:
        """Keep a file's new summary; True when it differs from the one the program was
        linked from (the program is linked again when next asked)."""
        fixed = self.trusted and key in self.recheck and self.recheck[key] == summary
        if fixed and self.seed is not None:
            self.answers[key] = answers  # as at the fixed point: nothing to read or link
            return False
        self.ready()
        self.answers[key] = answers
        old = self.summaries.get(key)
        if summary is None:
            changed = old is not None
            self.summaries.pop(key, None)
        else:
            changed = old is None or old.to_json() != summary
            if changed:
                from torchlint.semantic.external import Summary

                self.summaries[key] = Summary.from_json(summary)
        if changed:
            self._program = None
            if key not in self.recheck or self.recheck[key] != summary:
                self.trusted = False  # the fixed point is left: every answer is checked
        return changed

    def demanded(self) -> set[str]:
        """Files without a summary that a recorded question asked about (a name imported
        from them, a star import): another file needs what they define."""
        self.ready()
        found: set[str] = set()
        for importer, answers in self.answers.items():
            for question in answers:
                if question.kind not in ("export", "star"):
                    continue
                what = question.subject
                if "::" in what:
                    target = what.partition("::")[0]
                else:
                    resolved = self.layout.resolve(importer, what)
                    target = resolved[0] if resolved is not None else ""
                if target in self.layout.paths and target not in self.summaries:
                    found.add(target)
        return found - self.unreadable
