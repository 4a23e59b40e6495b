"""The rounds of a run: each file asked is analysed with what the rest of its project
tells it, and again while that changes, until the project's summaries reach a fixed
point (`Rounds`)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torchlint.config.load import Config
from torchlint.lint.summary import SummaryReader
from torchlint.lint.tokens import any_applies, asks_project, may_tell
from torchlint.project import Layout, Project, answers_digest, content_digest, find_root
from torchlint.project.layout import alone, imported, is_script, levels, sys_paths
from torchlint.results import Answers, FileResult, Job
from torchlint.run.cache import Summaries
from torchlint.run.pool import Task, analyse, compute, file_stamp, item_of
from torchlint.run.runner import discover, program_text, token_rules
from torchlint.text.source import SourceError, decode, read_bytes

if TYPE_CHECKING:  # the rules are imported when a file is read
    from torchlint.rule import Rule


# Chains of calls through a large package settle in a few rounds (accelerate's: five).
MAX_ROUNDS = 8


@dataclass
class _Texts:
    """What the texts of a project's files say before any is analysed (`Rounds._read`)."""

    imports: dict[str, set[str]] = field(default_factory=dict)  # the import graph
    nested: dict[str, set[str]] = field(default_factory=dict)  # in functions and blocks
    analysed: set[str] = field(default_factory=set)  # hold a token of a selected rule
    engaging: set[str] = field(default_factory=set)  # train, evaluate or load data
    scripts: set[str] = field(default_factory=set)  # entry points (a main guard, options)
    asked: set[str] = field(default_factory=set)  # files of the run (not read for summaries)
    # Files the rounds analyse whole or for their summaries (not read on their own).
    summarized: set[str] = field(default_factory=set)


def _relevant(texts: _Texts) -> set[str]:
    """The files that can tell the files of the run something: those that import one of
    them at any depth (their calls), and what all of these import (what they bind), but
    through a package's `__init__.py` not asked (an import of a name it re-exports leads
    to the file defining it; what the package re-exports is not read for its sake).
    With no file asked (an editor's project, any of whose files may be linted), all."""
    if not texts.asked:
        return set(texts.imports)
    importers: dict[str, set[str]] = {}
    for key, targets in texts.imports.items():
        for target in targets | texts.nested.get(key, set()):
            importers.setdefault(target, set()).add(key)
    up = _closure(texts.asked, importers)
    down = {
        k: v | texts.nested.get(k, set())
        for k, v in texts.imports.items()
        if k in texts.asked or Path(k).name != "__init__.py"
    }
    return _closure(up, down)


def _closure(start: set[str], edges: Mapping[str, set[str]]) -> set[str]:
    found, todo = set(start), list(start)
    while todo:
        for key in edges.get(todo.pop(), ()):
            if key not in found:
                found.add(key)
                todo.append(key)
    return found


def _fingerprint(data: Any) -> str:
    return content_digest(json.dumps(data).encode())


def _state(keys: Iterable[str], digests: Mapping[str, str | None]) -> str:
    """Files and the digests of their bytes (None: unreadable), as one digest."""
    return _fingerprint([[k, digests.get(k)] for k in sorted(keys)])


def _settled(project: Project) -> dict[str, str]:
    """The answers of a project's files at the fixed point it is in, as digests: where
    trusted, those of the last, but for the files asked again."""
    found = dict(project.settled) if project.trusted else {}
    keys = project.recheck if project.trusted else project.answers
    found.update({k: answers_digest(project.answers[k]) for k in keys if k in project.answers})
    return found


def result_holds(
    project: Project,
    key: str,
    answers: Answers | None,
    checked: bool,
    digest: str | None = None,
) -> bool:
    """A result of a file of `project` still stands: its answers (or their `digest`:
    `Project.holds`) hold, and it analysed the file (`checked`) if another file now
    reaches into it."""
    reached = project.reached if project.trusted else project.program.reached
    if not checked and key in reached:
        return False
    return project.holds(key, answers, digest)


class Rounds:
    """The projects of a run's files, and the rounds that bring their summaries to a
    fixed point: every file asked is analysed with what the rest of its project tells it,
    and analysed again while that changes (at most MAX_ROUNDS times). Besides the files
    asked, each project's files that hold a token of a selected rule are read for their
    summaries (what they pass to the others, how they use what the others build), and
    any other file of the project once another file needs what it defines. Summaries are
    stored by content with the answers they were computed from, and reused while those
    answers hold. The language server keeps one for each project of a session (`open`
    with no file asked), runs its rounds a file at a time (`to_summarize`, `batches`,
    `analyse`, `keep`), and reads a saved file again (`reread`)."""

    def __init__(
        self,
        tasks: list[Task],
        job: Job,
        config: Config,
        bases: dict[Path, Path],
        cache_dir: Path | None,
        walked: Sequence[Path] = (),
    ) -> None:
        self.tasks = tasks
        self.job = job
        self.config = config
        self.store = Summaries(cache_dir, job.settings.knowledge) if cache_dir is not None else None
        self.projects: list[Project] = []
        self.texts: list[_Texts] = []  # by project
        # Each project file, read for its summary only where no analysis gives it: files not
        # asked that hold a token of a selected rule, any file another file needs.
        self.others: dict[tuple[int, str], Task] = {}
        self.telling: set[tuple[int, str]] = set()  # files not asked that may tell something
        self.digests: dict[tuple[int, str], str] = {}  # of each file's bytes, as read
        # What was read off each project's files (`_read`), kept in the store for the next
        # run: a file whose stamp is unchanged is not read again.
        self.scans: list[dict[str, Any]] = []
        self.before: list[dict[str, Any]] = []  # the scans of the last run
        self.selected = ",".join(sorted(job.codes))  # what `analysed` depends on
        self.levels: dict[tuple[int, str], int] = {}  # in the import graph (`levels`)
        by_root: dict[Path, list[Task]] = {}
        roots: dict[tuple[Path, Path], Path] = {}  # (folder, base) -> root
        for task in tasks:
            base = bases.get(task.path, task.path.parent).absolute()
            folder = task.path.absolute().parent
            if (folder, base) not in roots:
                roots[(folder, base)] = find_root(task.path.absolute(), base)
            by_root.setdefault(roots[(folder, base)], []).append(task)
        # The files found under each folder the run searched: a project rooted there has
        # them already (the same walk, with the same configuration).
        self.found: dict[Path, list[Path]] = {d.absolute(): [] for d in walked}
        for path, base in bases.items():
            if base.absolute() in self.found:
                self.found[base.absolute()].append(path)
        for root, asked in by_root.items():
            self.open(root, asked)

    @cached_property
    def rules(self) -> list[type[Rule]] | None:
        """The rules selected, as their tokens need them (`token_rules`)."""
        return token_rules(self.job.codes)

    def _told(self, text: str) -> bool:
        """A selected rule may have something to say about `text`."""
        knowledge = self.job.settings.knowledge
        return self.rules is None or any_applies(self.rules, text, knowledge)

    def open(self, root: Path, asked: Sequence[Task] = ()) -> int:
        """Add the project at `root`, with the files of the run in it; its index."""
        walked = self.found.get(root.absolute())
        if walked is None:
            walked = [] if alone(root) else discover([str(root)], self.config).files
        files = [f for f in walked if f.suffix in (".py", ".ipynb")]
        layout = Layout(root, [*files, *(t.path for t in asked)])
        index = len(self.projects)
        texts = _Texts()
        project = Project(
            layout, fetch=SummaryReader(self.job.settings, layout.paths, texts.summarized)
        )
        self.projects.append(project)
        self.texts.append(texts)
        before = self.store.scan(root) if self.store is not None else {}
        self.before.append(before)
        header = {"selected": self.selected, "layout": _fingerprint(sorted(layout.paths))}
        self.scans.append({**header, "files": {}})
        for task in asked:
            task.project, task.key = index, layout.key(task.path) or task.path.name
        mine = {t.key for t in asked}
        for key, path in layout.paths.items():
            self.others[(index, key)] = Task(-1, path, (), project=index, key=key)
            self._read(index, key, asked=key in mine)
        self._link(index)
        if self.store is not None:
            state = self._state(index)
            project.seed = lambda: self._seed(project, index, root)
            # Byte for byte as at the last fixed point, or but for files asked (a commit's,
            # an editor's): nothing is read until needed, and what the files asked tell is
            # compared with what they told then.
            # A fixed point holds for a run whose files tell it nothing that was not read
            # then (a run of other files reads what imports them).
            covered = self._summarized(index) <= set(before.get("summarized", ()))
            project.trusted = before.get("fixed") == state and "answers" in before and covered
            project.reached = set(before.get("reached", ()))
            project.settled = dict(before.get("answers", {}))
            changed = None if project.trusted else self._changed(index, before)
            if covered and changed is not None and changed <= {t.key for t in asked}:
                project.trusted = True
                for key in changed:
                    digest = before["files"][key]["digest"]
                    stored = self.store.get(root, key, digest) if digest else None
                    project.recheck[key] = stored[0] if stored is not None else None
            if not project.trusted:
                project.ready()
        return index

    def _changed(self, index: int, before: dict[str, Any]) -> set[str] | None:
        """The files of a project whose bytes differ from those of its last fixed point;
        None if there is none, or files were added or removed since."""
        if not {"fixed", "layout", "answers"} <= before.keys():
            return None
        scan = self.scans[index]
        if scan["layout"] != before["layout"]:
            return None
        keys = self.projects[index].layout.paths
        then = {k: found.get("digest") for k, found in before["files"].items()}
        if _state(keys, then) != before["fixed"]:
            return None  # the scan is not the fixed point's
        return {k for k in keys if then.get(k) != self.digests.get((index, k))}

    def _state(self, index: int) -> str:
        """The files of a project and their bytes, as one digest."""
        keys = self.projects[index].layout.paths
        return _state(keys, {k: self.digests.get((index, k)) for k in keys})

    def settled(self, fixed: bool = True) -> None:
        """Store what was read off each project's files; with `fixed` (every answer
        holds), the state they are in as a fixed point, which the next run over the same
        bytes trusts."""
        if self.store is None:
            return
        for index, project in enumerate(self.projects):
            scan = dict(self.scans[index])
            if fixed:  # the state, the files another file reaches into, the answers
                scan["fixed"] = self._state(index)
                scan["reached"] = sorted(
                    project.reached if project.trusted else project.program.reached
                )
                scan["answers"] = _settled(project)
                read = set(self.before[index].get("summarized", ())) if project.trusted else set()
                scan["summarized"] = sorted(read | self._summarized(index))
            if scan["files"] and scan != self.before[index]:
                self.store.put_scan(project.layout.root, scan)

    def _read(self, index: int, key: str, asked: bool = False) -> None:
        """What a file's text says before it is analysed: what it imports, whether a
        selected rule reads it, whether it trains or is a script; the bytes of a file not
        asked (its analysis would give its summary)."""
        texts = self.texts[index]
        for kind in (texts.analysed, texts.engaging, texts.scripts, texts.asked):
            kind.discard(key)
        texts.imports.pop(key, None)
        texts.nested.pop(key, None)
        self.telling.discard((index, key))
        self.digests.pop((index, key), None)
        scan = self.scans[index]
        scan["files"].pop(key, None)
        layout = self.projects[index].layout
        path = layout.paths[key]
        stamp = file_stamp(path)
        before = self.before[index]
        found = before.get("files", {}).get(key)
        if not (found and stamp is not None and found["stamp"] == list(stamp)):
            try:
                raw = read_bytes(path)
                text = program_text(key, decode(raw)[0])
            except SourceError:
                return
            names = imported(text)
            found = {
                "stamp": list(stamp) if stamp is not None else None,
                "digest": content_digest(raw),
                "names": [i.name for i in names if not i.nested],
                "nested": [i.name for i in names if i.nested],
                "told": self._told(text),
                "engages": asks_project(text, self.job.settings.knowledge),
                "script": is_script(key, text),
                "paths": sys_paths(text),
            }
        elif before.get("selected") != self.selected:  # its text is the same, the rules not
            try:
                text = program_text(key, decode(read_bytes(path))[0])
                found = {
                    **found,
                    "told": self._told(text),
                }
            except SourceError:
                return
        layout.add_paths(key, found.get("paths", ()))
        if before.get("layout") == scan["layout"] and "imports" in found:
            resolved, nested = set(found["imports"]), set(found["nested_imports"])
        else:
            resolved = layout.imports(key, found["names"])
            nested = layout.imports(key, found["nested"]) - resolved
        scan["files"][key] = {
            **found,
            "imports": sorted(resolved),
            "nested_imports": sorted(nested),
        }
        self.digests[(index, key)] = found["digest"]
        texts.imports[key] = resolved
        texts.nested[key] = nested
        if found["told"]:
            texts.analysed.add(key)
        if found["engages"]:
            texts.engaging.add(key)
        elif found["script"]:
            texts.scripts.add(key)
        if asked:
            texts.asked.add(key)

    def _link(self, index: int) -> None:
        """The files of a project that engage it, and their levels in its import graph."""
        texts = self.texts[index]
        graph, nested, engaging = texts.imports, texts.nested, texts.engaging
        # A script that imports a file that trains wires it (`train.py` calling the engine).
        wiring = {k for k in texts.scripts if (graph[k] | nested[k]) & engaging}
        self.projects[index].engaged = engaging | wiring
        # What they call and pass tells the others what they are given: read for their
        # summaries whatever rules are selected (a `train.py` holding no rule's token),
        # as are the files that hold a selected rule's token; of all these, those that
        # can tell the files of the run something (`_relevant`), the others being left
        # out of a run of some files (a hook's). The reader leaves them to the rounds.
        telling = (engaging | wiring | texts.analysed) & _relevant(texts) - texts.asked
        texts.summarized.clear()
        texts.summarized.update(telling | (texts.analysed & texts.asked))
        self.telling = {t for t in self.telling if t[0] != index} | {(index, k) for k in telling}
        self.levels.update({(index, k): n for k, n in levels(graph, nested).items()})

    def _telling(self, index: int) -> set[str]:
        return {key for i, key in self.telling if i == index}

    def _summarized(self, index: int) -> set[str]:
        """The files of a project a run analyses whole or for their summaries."""
        return self._telling(index) | self.texts[index].asked

    def _seed(self, project: Project, index: int, root: Path) -> None:
        """The summaries stored for the bytes each file holds now; for a file asked again
        since the fixed point, the one it had there until it is analysed (what the
        fixed point's answers were computed from)."""
        assert self.store is not None
        files = self.before[index].get("files", {})
        for (i, key), digest in list(self.digests.items()):
            if i != index:
                continue
            stored = self.store.get(root, key, digest)
            if stored is None and key in project.recheck and files.get(key, {}).get("digest"):
                stored = self.store.get(root, key, files[key]["digest"])
            if stored is not None:  # answers recorded already are this run's
                project.update(key, stored[0], project.answers.get(key, stored[1]))

    def reread(self, index: int, key: str) -> bool:
        """Read a file of a project (not asked) again after it changed on disk: its
        summary is the one stored for its new bytes, else computed by the next round.
        False if its bytes are those read before."""
        before = self.digests.get((index, key))
        self.before[index] = {}  # read it whatever its stamp says
        self._read(index, key)
        self._link(index)
        digest = self.digests.get((index, key))
        if digest is not None and digest == before:
            return False
        project = self.projects[index]
        stored = None
        if self.store is not None and digest is not None:
            stored = self.store.get(project.layout.root, key, digest)
        project.unreadable.discard(key)
        project.update(key, *(stored or (None, {})))
        return True

    def converge(
        self, job: Job, known: Sequence[FileResult | None] | None = None
    ) -> list[FileResult]:
        """The results of the files asked (in the order of `tasks`), each computed with
        answers that hold; `known`: a result for each task found before the rounds (the
        cache's, `record`ed), kept while it holds."""
        results: list[FileResult | None] = [None] * len(self.tasks)
        for task, hit in zip(self.tasks, known or [None] * len(self.tasks), strict=True):
            results[task.index] = hit
        for round_ in range(MAX_ROUNDS + 1):  # the last only checks what the others did
            todo: list[Task] = []
            for task in self.tasks:
                result = results[task.index]
                if result is None or not self.holds(task, result):
                    todo.append(task)
            todo += self.to_summarize()
            if not todo or round_ == MAX_ROUNDS:
                self.settled(fixed=not todo)
                break
            # Every file is analysed with the program as its batch began (the same answers
            # in one process or many); what they tell is linked after.
            for batch in self.batches(todo):
                self._link_before(batch)
                computed = list(compute(batch, job, None))
                for task, result in zip(batch, computed, strict=True):
                    assert result is not None
                    self.keep(task, result)
                    if task.index >= 0:
                        results[task.index] = result
        return [r for r in results if r is not None]

    def _link_before(self, batch: list[Task]) -> None:
        """Link the programs a batch reads here, once: worker processes forked for it
        inherit them (each would link its own copy, for every batch)."""
        for index in sorted({t.project for t in batch if t.project is not None}):
            project = self.projects[index]
            if not project.trusted:
                project.program.reached  # noqa: B018 (computed now, for the workers)

    def to_summarize(self) -> list[Task]:
        """The files read for their summaries only that a round analyses: those that may
        tell something or that another file needs, with no summary that holds."""
        todo: list[Task] = []
        demanded = [set() if p.trusted else p.demanded() for p in self.projects]
        for (index, key), task in self.others.items():
            project = self.projects[index]
            if project.trusted:
                continue  # every summary it needs is stored and holds
            if key in demanded[index] and not self._may_tell(task):
                from torchlint.semantic.external import Summary

                project.update(key, Summary().to_json(), {})  # nothing to read there
                continue
            # A summary computed with the program's answers (where a run read it for
            # what it tells) is read again when they change, whatever this run needs.
            asked_then = key not in self.texts[index].asked and bool(project.answers.get(key))
            wanted = (index, key) in self.telling or key in demanded[index] or asked_then
            known = key in project.summaries or key in project.unreadable
            if wanted and not (known and project.holds(key, project.answers.get(key, {}))):
                todo.append(task)
        self.store_fetched()  # what checking the answers read
        return todo

    def batches(self, todo: list[Task]) -> list[list[Task]]:
        """The batches of a round: up the import graph a level at a time, so that what a
        file imports is known when it is analysed (in a later round too: what changed in
        a file reaches the files importing it in the same round, not the next)."""
        found: dict[int, list[Task]] = {}
        for task in todo:
            level = self.levels.get((task.project or 0, task.key or ""), 0)
            found.setdefault(level, []).append(task)
        return [found[n] for n in sorted(found)]

    def analyse(self, task: Task) -> FileResult:
        """One task of a round, in this process."""
        assert task.project is not None
        return analyse(item_of(task), self.job, self.projects)

    def _may_tell(self, task: Task) -> bool:
        assert task.project is not None and task.key is not None
        if (task.project, task.key) in self.telling:
            return True

        try:
            return may_tell(decode(read_bytes(task.path))[0])
        except SourceError:
            return False

    def scanned(self, task: Task) -> tuple[list[int], str] | None:
        """The stamp and the digest of a task's bytes as its project's scan read them."""
        found = None
        if task.project is not None and task.key is not None:
            found = self.scans[task.project]["files"].get(task.key)
        return (found["stamp"], found["digest"]) if found else None

    def holds(self, task: Task, result: FileResult) -> bool:
        """A result of a task (computed in a round, or the cache's) still stands."""
        if task.project is None or not task.key:
            return True
        project = self.projects[task.project]
        trusted = result.stored is None or project.holds(task.key, None, result.stored)
        if not trusted and not self._complete(task, result):
            return False  # not in the store (or of other answers): analysed again
        checked = result.checked or result.error is not None
        return result_holds(project, task.key, result.answers, checked, result.stored)

    def store_fetched(self) -> None:
        """Store the summaries the projects read on demand (in this process or a worker)."""
        for index, project in enumerate(self.projects):
            for key, summary in project.take_fetched().items():
                digest = self.digests.get((index, key))
                if self.store is not None and digest is not None:
                    self.store.put(project.layout.root, key, digest, summary.to_json(), {})

    def record(self, task: Task, result: FileResult) -> bool:
        """What a file's result tells its project; False for a cached result whose
        summary the store no longer holds (it is analysed again)."""
        if task.project is None or not task.key:
            return True
        project = self.projects[task.project]
        if result.summary is None and result.error is not None:
            project.unreadable.add(task.key)
        elif (
            result.summary is None
            and result.stored is None
            and (task.key in project.summaries or task.key in project.recheck)
        ):
            return True  # not analysed (no rule reads it): what was read for another file stands
        if project.holds_stored(task.key):
            return True  # a stored result, of the bytes the stored summaries are of
        if result.stored is not None and not self._complete(task, result):
            return False
        project.update(task.key, result.summary, result.answers or {})
        return True

    def _complete(self, task: Task, result: FileResult) -> bool:
        """A cached result's summary and answers, read from the store (False if it holds
        none for the file's bytes with those answers)."""
        assert task.project is not None and task.key is not None
        key = (task.project, task.key)
        digest = content_digest(task.raw) if task.raw else self.digests.get(key)
        if self.store is None or digest is None:
            return False
        root = self.projects[task.project].layout.root
        stored = self.store.get(root, task.key, digest)
        if stored is None or answers_digest(stored[1]) != result.stored:
            return False
        result.summary, result.answers = stored
        result.stored = None
        return True

    def keep(self, task: Task, result: FileResult) -> None:
        """Keep what a task's analysis tells its project (and store it)."""
        if task.project is None or not task.key:
            return
        project = self.projects[task.project]
        for key, summary in (result.fetched or {}).items():  # read by a worker process
            if key not in project.summaries:
                project.update(key, summary, {})
                project.fetched[key] = project.summaries[key]
        self.store_fetched()
        self.record(task, result)
        digest = (
            content_digest(task.raw) if task.raw else self.digests.get((task.project, task.key))
        )
        if self.store is not None and result.summary is not None and digest is not None:
            self.store.put(
                project.layout.root, task.key, digest, result.summary, result.answers or {}
            )
