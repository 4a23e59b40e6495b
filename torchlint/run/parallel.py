"""Many files: answer from the cache what it knows, lint the rest in worker processes
(`pool`), each with what the rest of its project tells it (`rounds`). The one module that
reads and writes the results' cache (`cache.Cache`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path

from torchlint.config.load import Config
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
from torchlint.run.runner import display
from torchlint.text.source import SourceError, read_bytes

__all__ = ["Interrupted", "converge", "opened", "run_files"]


def run_files(
    files: Sequence[Path],
    job: Job,
    config: Config,
    on_result: Callable[[FileResult], None] | None = None,
    cache_dir: Path | None = None,
    bases: dict[Path, Path] | None = None,
    walked: Sequence[Path] = (),
) -> list[FileResult]:
    """Lint (or fix) every file (in worker processes when there are enough), answering
    from the cache in `cache_dir` what it knows (None: no cache). Each file is analysed
    with what the rest of its project tells it (`Rounds`; `bases`: the folder each file
    was found from, its project's root where no marker says otherwise; `walked`: the
    folders searched for them, whose files a project rooted there has). Results, and the
    calls of `on_result` (progress bar, --verbose), come in the order of `files`. A run
    that rewrites files stops at Ctrl-C once the files in progress are done, and raises
    `Interrupted` with the results of every file finished."""
    tasks = [Task(i, f, tuple(config.rules_for(f, job.codes))) for i, f in enumerate(files)]
    with opened(tasks, job, config, bases or {}, cache_dir, walked) as rounds:
        if not (job.fix or job.diff):
            results = converge(rounds, job, cache_dir)
            for result in results:
                if on_result is not None:
                    on_result(result)
            return results
        # link first
        converge(rounds, replace(job, fix=False, diff=False, with_edits=False), cache_dir)
        return _rewrite(tasks, job, on_result, cache_dir, rounds)


def converge(rounds: Rounds, job: Job, cache_dir: Path | None) -> list[FileResult]:
    """The results of the files `rounds` was opened with (`Rounds.converge`): those the
    cache in `cache_dir` holds for their bytes and answers read from it first, and those
    computed stored there."""
    if cache_dir is None:
        return rounds.converge(job)
    cache = Cache(cache_dir, job)
    known: list[FileResult | None] = []
    for task in rounds.tasks:
        hit = _lookup(cache, rounds, task)
        known.append(hit if hit is not None and rounds.record(task, hit) else None)
    results = rounds.converge(job, known)
    for task, result, hit in zip(rounds.tasks, results, known, strict=True):
        if result is not hit and _cacheable(job, task, result):
            cache.put(task.path, result.path, task.codes, task.raw or b"", result)
    return results


@contextlib.contextmanager
def opened(
    tasks: list[Task],
    job: Job,
    config: Config,
    bases: dict[Path, Path],
    cache_dir: Path | None,
    walked: Sequence[Path] = (),
) -> Iterator[Rounds]:
    """The rounds of a run's `tasks` (`Rounds`: their projects), for the block: the
    worker processes started in it get those projects, and what the run keeps is kept
    out of the collector's scans until it ends (`survivors_frozen`)."""
    rounds = Rounds(tasks, job, config, bases, cache_dir, walked)
    use_projects(rounds.projects)
    try:
        with survivors_frozen():
            yield rounds
    finally:
        use_projects([])


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
