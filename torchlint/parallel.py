"""Many files: answer from the cache what it knows, lint the rest in worker processes.

Results always come back in the order of the input files (the pool maps in order,
in chunks), so output is the same with one process or many. A pool is started only
when the work to do pays for it: below `MIN_POOL_BYTES` of source to lint (cache misses),
starting processes costs more than it saves (measured: benchmarks/README.md). Workers
are forked where that is safe (Linux), so they import nothing; elsewhere they import
only what `torchlint.runner` needs (never torch).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torchlint.cache import Cache
from torchlint.config import Config
from torchlint.linter import TOO_DEEP, parser_thread
from torchlint.results import ANALYSIS_ERROR, FileError, FileResult, Job
from torchlint.runner import display, process_file
from torchlint.source import SourceError, read_bytes

# Below this much source to lint, one process is faster than starting a pool.
MIN_POOL_BYTES = 256 * 1024
WORKERS_ENV = "TORCHLINT_WORKERS"  # a number; 1 runs everything in this process
INTERNAL = "internal error"


def workers() -> int:
    env = os.environ.get(WORKERS_ENV, "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


@dataclass
class _Task:
    index: int
    path: Path
    codes: tuple[str, ...]
    raw: bytes | None = None  # what the cache key was computed from
    stamp: tuple[int, int, int] | None = None  # (mtime_ns, size, inode) when read


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


def lint_one(path: Path, job: Job, codes: Sequence[str]) -> FileResult:
    """`process_file`, with a bug in torchlint or a rule reported on the file, not raised
    (one bad file must not cost the results of a thousand others)."""
    try:
        result = process_file(path, job, codes)
        if not result.records():
            result.text = None  # only reporters read it, for code frames: not worth shipping
        return result
    except RecursionError:
        return FileResult(display(path), errors=[FileError(ANALYSIS_ERROR, TOO_DEEP)])
    except Exception as exc:  # reported on the file, with what to do about it
        message = f"{INTERNAL} ({type(exc).__name__}: {exc}); please report it with this file"
        return FileResult(display(path), errors=[FileError(ANALYSIS_ERROR, message)])


class Interrupted(Exception):
    """Ctrl-C ended a run that rewrites files. `results` holds every file finished before
    the run stopped, so every file written is among them (`exact`); after a second Ctrl-C
    a file in progress may have been written too (not `exact`)."""

    def __init__(self, results: list[FileResult], exact: bool) -> None:
        super().__init__("interrupted")
        self.results, self.exact = results, exact


class _Stop:
    """While files are rewritten, the first Ctrl-C asks the run to stop once the files in
    progress are done (a file is never cut off between its read and its write); a second
    Ctrl-C raises KeyboardInterrupt at once."""

    def __init__(self) -> None:
        self.requested = False
        self.shared: Any = None  # a multiprocessing Event the workers read, once there are any

    def __call__(self, signum: int, frame: Any) -> None:
        self.requested = True
        if self.shared is not None:
            self.shared.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield  # signals reach the main thread only: an embedding caller handles them
            return
        previous = signal.signal(signal.SIGINT, self)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)


_job: Job | None = None
_stop: Any = None  # the parent's stop Event, in a worker


def _init_worker(job: Job, stop: Any) -> None:
    global _job, _stop
    _job, _stop = job, stop
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C


def _work(item: tuple[Path, tuple[str, ...]]) -> FileResult | None:
    assert _job is not None
    if _stop is not None and _stop.is_set():
        return None  # the run was interrupted: not started
    return lint_one(item[0], _job, item[1])


def _pool_size(tasks: Sequence[_Task]) -> int:
    n = workers()
    if n < 2 or len(tasks) < 2:
        return 1
    size = 0
    for task in tasks:
        if task.raw is not None:
            size += len(task.raw)
        else:
            with contextlib.suppress(OSError):
                size += task.path.stat().st_size
        if size >= MIN_POOL_BYTES:
            return min(n, len(tasks))
    return 1


def _compute(
    tasks: Sequence[_Task], job: Job, stop: _Stop | None
) -> Generator[FileResult | None, None, None]:
    """Results for `tasks`, in their order; None for a task not started because `stop`
    was requested."""
    size = _pool_size(tasks)
    if size == 1:
        for task in tasks:
            yield (
                None
                if stop is not None and stop.requested
                else lint_one(task.path, job, task.codes)
            )
        return
    parser_thread.stop()  # fork a process without threads
    method = "fork" if sys.platform == "linux" else "spawn"
    context = multiprocessing.get_context(method)
    if stop is not None:
        stop.shared = context.Event()
        if stop.requested:
            stop.shared.set()
    chunksize = max(1, min(8, len(tasks) // (size * 8)))
    items = [(t.path, t.codes) for t in tasks]
    shared = stop.shared if stop is not None else None
    with context.Pool(size, initializer=_init_worker, initargs=(job, shared)) as pool:
        yield from pool.imap(_work, items, chunksize=chunksize)


def _cacheable(job: Job, task: _Task, result: FileResult) -> bool:
    if task.raw is None or (result.error or "").startswith(INTERNAL):
        return False
    if job.fix and not job.diff and (result.fixed or result.error):
        return False  # the file was (or should have been) rewritten
    return _stamp(task.path) == task.stamp  # not changed while we linted it


def run_files(
    files: Sequence[Path],
    job: Job,
    config: Config,
    on_result: Callable[[FileResult], None] | None = None,
    cache_dir: Path | None = None,
) -> list[FileResult]:
    """Lint (or fix) every file (in worker processes when there are enough), answering
    from the cache in `cache_dir` what it knows (None: no cache). Results, and the calls
    of `on_result` (progress bar, --verbose), come in the order of `files`. A run that
    rewrites files stops at Ctrl-C once the files in progress are done, and raises
    `Interrupted` with the results of every file finished."""
    tasks = [_Task(i, f, tuple(config.rules_for(f, job.codes))) for i, f in enumerate(files)]
    results: list[FileResult | None] = [None] * len(tasks)
    cache = Cache(cache_dir, job) if cache_dir is not None else None
    todo = tasks
    if cache is not None:
        todo = []
        for task in tasks:
            task.stamp = _stamp(task.path)
            try:
                task.raw = read_bytes(task.path)
            except SourceError:
                todo.append(task)  # process_file reports why
                continue
            hit = cache.get(task.path, display(task.path), task.codes, task.raw)
            if hit is None:
                todo.append(task)
            else:
                results[task.index] = hit
    stop = _Stop() if job.fix and not job.diff else None
    out: list[FileResult] = []
    with stop.installed() if stop is not None else contextlib.nullcontext():
        computed = _compute(todo, job, stop)
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
