"""A run over many files, the one entry of the CLI's check, fix and explain, and the
verifier (`run`): answer from the cache what it knows, analyse the rest, each with what
the rest of its project tells it (`rounds`), in worker processes (`pool`). The one module
that reads and writes the results' cache (`cache.Cache`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

from torchlint.config.plan import RunPlan
from torchlint.results import FileResult, Job
from torchlint.run.cache import Cache
from torchlint.run.pool import (
    INTERNAL,
    Interrupted,
    Stop,
    Task,
    compute,
    file_stamp,
    survivors_frozen,
    use_projects,
)
from torchlint.run.rounds import Rounds
from torchlint.run.runner import display, failed, lint_notebook, lint_text
from torchlint.text.source import SourceError, decode, read_bytes

if TYPE_CHECKING:
    from torchlint.semantic.external import Environment

__all__ = ["Interrupted", "Mode", "Run", "run", "run_stdin"]


class Mode(Enum):
    """What a run does with each file."""

    CHECK = "check"  # report its findings
    FIX = "fix"  # rewrite it with its fixes
    DIFF = "diff"  # compute its fixes, show them as a diff, write nothing

    def job(self, plan: RunPlan, edits: bool = False) -> Job:
        """What every file of a run in this mode is told under `plan` (`edits`: each
        finding carries its fix's edits, for the reporters that show them)."""
        return plan.job(fix=self is not Mode.CHECK, diff=self is Mode.DIFF, with_edits=edits)


@dataclass
class Run:
    """A run's results, in the order of its files, and what each file's project told it
    (`environment`: what `explain` analyses the file with again)."""

    results: list[FileResult]
    rounds: Rounds

    def environment(self, index: int) -> Environment:
        """What its project tells the file at `index` among the files asked."""
        task = self.rounds.tasks[index]
        assert task.project is not None and task.key is not None
        return self.rounds.projects[task.project].environment(task.key)


def run(
    plan: RunPlan,
    files: Sequence[Path],
    mode: Mode = Mode.CHECK,
    *,
    edits: bool = False,
    cache_dir: Path | None = None,
    bases: Mapping[Path, Path] | None = None,
    walked: Sequence[Path] = (),
    on_result: Callable[[FileResult], None] | None = None,
) -> Run:
    """Check (or fix) every file under `plan` (in worker processes when there are
    enough), answering from the cache in `cache_dir` what it knows (None: no cache).
    Each file is analysed with what the rest of its project tells it (`Rounds`; `bases`:
    the folder each file was found from, its project's root where no marker says
    otherwise; `walked`: the folders searched for them, whose files a project rooted
    there has). Results, and the calls of `on_result` (progress bar, --verbose), come in
    the order of `files`. A run that rewrites files stops at Ctrl-C once the files in
    progress are done, and raises `Interrupted` with the results of every file finished."""
    job = mode.job(plan, edits)
    tasks = [Task(i, f, tuple(plan.config.rules_for(f, job.codes))) for i, f in enumerate(files)]
    rounds = Rounds(tasks, job, plan.config, dict(bases or {}), cache_dir, walked)
    # Fixes are made once the project is linked: its fixed point is a check's.
    check = job if mode is Mode.CHECK else replace(job, fix=False, diff=False, with_edits=False)
    cache = Cache(cache_dir, check) if cache_dir is not None else None
    use_projects(rounds.projects)  # the worker processes started in the run get them
    try:
        with survivors_frozen():  # what the run keeps, out of the collector's scans
            known = _known(cache, rounds)
            results = rounds.converge(check, known)
            _store(cache, check, rounds.tasks, results, known)
            if mode is not Mode.CHECK:
                results = _rewrite(tasks, job, on_result, cache_dir, rounds)
            elif on_result is not None:
                for result in results:
                    on_result(result)
    finally:
        use_projects([])
    return Run(results, rounds)


def run_stdin(plan: RunPlan, data: bytes, name: str, mode: Mode, edits: bool = False) -> FileResult:
    """Standard input checked (or fixed: the text to write in `fixed_text`) under `plan`,
    as the file `name` ("-": none), alone."""
    job = mode.job(plan, edits)
    try:
        text, _ = decode(data)
    except SourceError as exc:
        return failed(name, exc)
    codes = plan.config.rules_for(Path(name), job.codes) if name != "-" else job.codes
    lint = lint_notebook if name.endswith(".ipynb") else lint_text
    result, new_text = lint(text, name, job, codes)
    if mode is Mode.FIX:
        result.fixed_text = text if result.errors else new_text
    return result


def _known(cache: Cache | None, rounds: Rounds) -> list[FileResult | None] | None:
    """A result for each file asked found in the cache, that holds (`Rounds.record`ed)."""
    if cache is None:
        return None
    known: list[FileResult | None] = []
    for task in rounds.tasks:
        hit = _lookup(cache, rounds, task)
        known.append(hit if hit is not None and rounds.record(task, hit) else None)
    return known


def _store(
    cache: Cache | None,
    job: Job,
    tasks: Sequence[Task],
    results: Sequence[FileResult],
    known: Sequence[FileResult | None] | None,
) -> None:
    """The results computed (not found in the cache) stored there."""
    if cache is None or known is None:
        return
    for task, result, hit in zip(tasks, results, known, strict=True):
        if result is not hit and _cacheable(job, task, result):
            cache.put(task.path, result.path, task.codes, task.raw or b"", result)


def _rewrite(
    tasks: Sequence[Task],
    job: Job,
    on_result: Callable[[FileResult], None] | None,
    cache_dir: Path | None,
    rounds: Rounds,
) -> list[FileResult]:
    """Fix (or diff) every file with what its project (among those of `rounds`, at
    their fixed point) tells it."""
    results: list[FileResult | None] = [None] * len(tasks)
    cache = Cache(cache_dir, job) if cache_dir is not None else None
    todo = list(tasks)
    if cache is not None:
        todo = []
        for task in tasks:
            hit = _lookup(cache, rounds, task)
            if hit is None:
                todo.append(task)
            else:
                results[task.index] = hit
    stop = Stop() if job.fix and not job.diff else None
    out: list[FileResult] = []
    with stop.installed() if stop is not None else contextlib.nullcontext():
        computed = compute(todo, job, stop)
        pending = iter(todo)
        try:
            for known in results:
                result = known
                if result is None:
                    task = next(pending)
                    result = next(computed)
                    if result is None:  # not started: the run was interrupted
                        continue
                    if cache is not None and _cacheable(job, task, result):
                        cache.put(task.path, result.path, task.codes, task.raw or b"", result)
                if on_result is not None:
                    on_result(result)
                out.append(result)
        except KeyboardInterrupt:
            if stop is None:
                raise
            raise Interrupted(out, exact=False) from None
        finally:
            computed.close()  # stops the pool, also on Ctrl-C
    if stop is not None and stop.requested:
        raise Interrupted(out, exact=True)
    return out


def _lookup(cache: Cache, rounds: Rounds, task: Task) -> FileResult | None:
    """The cached result of a task, if it holds: the same bytes, the same answers from
    its project. Bytes its project's scan read (their stamp and digest) are not read again
    while their stamp is the same; on a miss, they are (for the result to be stored)."""
    task.stamp = file_stamp(task.path)
    name = display(task.path)
    known, hit = rounds.scanned(task), None
    if known is not None and task.stamp is not None and list(task.stamp) == known[0]:
        hit = cache.get(task.path, name, task.codes, None, known[1])
    if hit is None:
        try:
            task.raw = read_bytes(task.path)
        except SourceError:
            return None  # process_file reports why
        hit = cache.get(task.path, name, task.codes, task.raw)
    return hit if hit is not None and rounds.holds(task, hit) else None


def _cacheable(job: Job, task: Task, result: FileResult) -> bool:
    if task.raw is None or (result.error or "").startswith(INTERNAL):
        return False
    if job.fix and not job.diff and (result.fixed or result.error):
        return False  # the file was (or should have been) rewritten
    return file_stamp(task.path) == task.stamp  # not changed while we linted it
