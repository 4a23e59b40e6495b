"""The worker pool: lint files (or read their summaries) in worker processes.

Results always come back in the order of the tasks, so output is the same with one
process or many. Worker processes are started only when the work to do pays for it:
below `MIN_POOL_BYTES` of source to lint (cache misses), starting processes costs more
than it saves (measured: benchmarks/README.md). Where forking is safe (Linux), this
process works beside the processes it forks, which import nothing (`_Shared`); elsewhere
a pool's workers import only what `torchlint.run.runner` needs (never torch).
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from torchlint.lint import registry
from torchlint.project import Project
from torchlint.results import ANALYSIS_ERROR, FileError, FileResult, Job
from torchlint.run.runner import display, process_file, rules_of, summarize_file

# Below this much source to lint, one process is faster than starting a pool.
MIN_POOL_BYTES = 256 * 1024
WORKERS_ENV = "TORCHLINT_WORKERS"  # a number; 1 runs everything in this process
# How worker processes start: forked where that is safe, else spawned (they inherit
# nothing: the projects and the local rules are sent).
START_METHOD = "fork" if sys.platform == "linux" else "spawn"
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
class Task:
    index: int  # position among the files asked; -1: a file read for its summary only
    path: Path
    codes: tuple[str, ...]
    raw: bytes | None = None  # what the cache key was computed from
    stamp: tuple[int, int, int] | None = None  # (mtime_ns, size, inode) when read
    project: int | None = None  # the index of its project in the run, if any
    key: str | None = None  # its key in that project


def file_stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


class Interrupted(Exception):
    """Ctrl-C ended a run that rewrites files. `results` holds every file finished before
    the run stopped, so every file written is among them (`exact`); after a second Ctrl-C
    a file in progress may have been written too (not `exact`)."""

    def __init__(self, results: list[FileResult], exact: bool) -> None:
        super().__init__("interrupted")
        self.results, self.exact = results, exact


class Stop:
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
_projects: list[Project] = []  # the run's projects (forked workers inherit them)


def use_projects(projects: list[Project]) -> None:
    """The projects the tasks of the pools started from now on belong to."""
    global _projects
    _projects = projects


_Item = tuple[Path, tuple[str, ...], int | None, str | None, bool]


def _init_worker(job: Job, stop: Any, projects: list[Project], local: tuple[Path, ...]) -> None:
    """(a spawned pool's worker) What the run's processes share, sent."""
    global _job, _stop, _projects
    _job, _stop, _projects = job, stop, projects
    if local:  # the local rules loaded again (loaded once already: no error)
        with contextlib.suppress(registry.RuleLoadError):  # a pool whose start fails hangs
            registry.local_rules(local)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C


@contextlib.contextmanager
def _collected_after() -> Iterator[None]:
    """Python's cyclic collector paused while a file is analysed, and its young
    generations collected after. A file's tree and semantic model (hundreds of thousands
    of linked objects) live until its analysis ends: collections in the middle of it
    promote them to the old generation, which they leave dead, and full collections over
    everything the run keeps follow every few files (a fifth of a cold run's CPU)."""
    if not gc.isenabled():  # a caller that manages the collector itself
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect(1)
        if _freezing:
            gc.freeze()


_freezing = False  # within `survivors_frozen` (inherited by forked workers)


@contextlib.contextmanager
def survivors_frozen() -> Iterator[None]:
    """(a run) What outlives each file's analysis is set apart from the cyclic
    collector's scans (`gc.freeze`) until the run ends, then given back. The results and
    summaries a run keeps grow with the project, and full collections over them, which
    find nothing to free, came every few dozen files (4% of a cold run's CPU; in workers,
    they also copied the pages they share with the parent). A process that freezes
    objects itself is left alone."""
    global _freezing
    if _freezing or gc.get_freeze_count():
        yield
        return
    _freezing = True
    try:
        yield
    finally:
        _freezing = False
        gc.unfreeze()


def analyse(item: _Item, job: Job, projects: Sequence[Project] = ()) -> FileResult:
    """A file linted or fixed (or read for its summary only) with what its project, if
    any, tells it (of `projects`, else of the run's: `use_projects`), the cyclic collector
    paused meanwhile; the summaries its program read meanwhile (`Program.fetch`) go with
    it. A bug in torchlint or a rule is reported on the file, not raised (one bad file
    must not cost the results of a thousand others)."""
    path, codes, index, key, summary_only = item
    project = (projects or _projects)[index] if index is not None and key else None
    with _collected_after():
        env = project.environment(key) if project is not None and key else None
        if env is not None and summary_only:
            result = summarize_file(path, job, env)
        else:
            try:
                result = process_file(path, job, codes, env)
                if not result.records() and result.diff is None:
                    # only reporters read it, for code frames, and verify the fixed text
                    result.text = None
            except RecursionError:
                from torchlint.lint.parser import TOO_DEEP

                result = FileResult(display(path), errors=[FileError(ANALYSIS_ERROR, TOO_DEEP)])
            except Exception as exc:  # reported on the file, with what to do about it
                message = (
                    f"{INTERNAL} ({type(exc).__name__}: {exc}); please report it with this file"
                )
                result = FileResult(display(path), errors=[FileError(ANALYSIS_ERROR, message)])
        program = project.linked if project is not None else None
        if program is not None and program.fetched:
            result.fetched = {k: s.to_json() for k, s in program.fetched.items()}
            program.fetched.clear()
    return result


def _work(item: _Item) -> FileResult | None:
    assert _job is not None
    if _stop is not None and _stop.is_set():
        return None  # the run was interrupted: not started
    return analyse(item, _job)


def _size(task: Task) -> int:
    if task.raw is not None:
        return len(task.raw)
    try:
        return task.path.stat().st_size
    except OSError:
        return 0


def _pool_size(tasks: Sequence[Task]) -> tuple[int, list[int]]:
    """How many processes compute `tasks` (this one among them, where it forks), and
    the size of each task where there are several."""
    n = workers()
    if n < 2 or len(tasks) < 2:
        return 1, []
    sizes = [_size(t) for t in tasks]
    return (min(n, len(tasks)) if sum(sizes) >= MIN_POOL_BYTES else 1), sizes


def item_of(task: Task) -> _Item:
    return task.path, task.codes, task.project, task.key, task.index < 0


def compute(
    tasks: Sequence[Task], job: Job, stop: Stop | None
) -> Generator[FileResult | None, None, None]:
    """Results for `tasks`, in their order; None for a task not started because `stop`
    was requested."""
    items = [item_of(t) for t in tasks]
    size, sizes = _pool_size(tasks)
    if size == 1:
        for item in items:
            yield None if stop is not None and stop.requested else analyse(item, job)
        return
    method = START_METHOD
    if method == "fork":
        _imported_for(tasks)
    parser = sys.modules.get("torchlint.lint.parser")  # its thread runs once it is imported
    if parser is not None:
        parser.parser_thread.stop()  # fork a process without threads
    context = multiprocessing.get_context(method)
    if stop is not None:
        stop.shared = context.Event()
        if stop.requested:
            stop.shared.set()
    shared = stop.shared if stop is not None else None
    if method == "fork":
        yield from _Shared(items, sizes, job, shared, context).run(size - 1)
        return
    chunksize = max(1, min(8, len(tasks) // (size * 8)))
    initargs = (job, shared, _projects, registry.local_folders())
    with context.Pool(size, initializer=_init_worker, initargs=initargs) as pool:
        yield from pool.imap(_work, items, chunksize=chunksize)


class _Shared:
    """Items computed by this process and the processes it forks, each taking an item
    no one has taken as soon as it is free: the forked ones the largest left (so that
    no process is left with a large one at the end), this one the smallest (it holds
    the run's projects besides: its peak memory stays that of the state). Beside a
    pool of as many workers, one process fewer is forked, whose memory would be paged
    in again (a fork per batch of a round: a tenth of a cold run's CPU, two processes
    apiece), and the results this process computes are not sent. A process that dies
    leaves an error on the item it was computing; the items no one took after a stop is
    requested come back as None."""

    def __init__(
        self,
        items: list[_Item],
        sizes: list[int],
        job: Job,
        shared: Any,
        context: Any,
    ) -> None:
        self.items, self.job, self.shared = items, job, shared
        self.order = sorted(range(len(items)), key=lambda i: -sizes[i])
        self.position = {index: n for n, index in enumerate(self.order)}
        # Positions in `order` not taken yet: from `front` (included) to `back`.
        self.front = context.RawValue("q", 0)
        self.back = context.RawValue("q", len(items))
        self.lock = context.Lock()
        self.context = context
        self.results: dict[int, FileResult | BaseException] = {}
        self.ended: dict[int, int | None] = {}  # exit codes of the forked processes
        self.arrived = threading.Condition()

    def _take(self, smallest: bool = False) -> int | None:
        """The index of the next item to compute (the largest left, or the `smallest`),
        None when all are taken or a stop is requested."""
        if self.shared is not None and self.shared.is_set():
            return None
        with self.lock:
            front: int = self.front.value
            back: int = self.back.value
            if front >= back:
                return None
            if smallest:
                self.back.value = position = back - 1
            else:
                self.front.value = (position := front) + 1
        return self.order[position]

    def _serve(self, connection: Any) -> None:
        """(a forked process) Compute items until none is left; send each result."""
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
        while (index := self._take()) is not None:
            try:
                result: FileResult | BaseException = analyse(self.items[index], self.job)
            except Exception as exc:  # raised where the results are read, as in a pool
                result = exc
            connection.send((index, result))
        connection.close()

    def _receive(self, connections: dict[Connection, Any]) -> None:
        """(a thread of this process) Keep each result sent as it comes, so that no
        sender waits on a full pipe; note each forked process's end."""
        from multiprocessing.connection import wait

        while connections:
            ready = wait(list(connections))
            for connection in [c for c in connections if c in ready]:
                try:
                    index, result = connection.recv()
                except (EOFError, OSError):
                    process = connections.pop(connection)
                    process.join()
                    with self.arrived:
                        self.ended[process.pid] = process.exitcode
                        self.arrived.notify()
                    continue
                with self.arrived:
                    self.results[index] = result
                    self.arrived.notify()

    def run(self, forks: int) -> Iterator[FileResult | None]:
        connections: dict[Connection, Any] = {}
        receiver = threading.Thread(target=self._receive, args=(connections,), daemon=True)
        try:
            for _ in range(forks):
                reader, writer = self.context.Pipe(duplex=False)
                process = self.context.Process(target=self._serve, args=(writer,), daemon=True)
                try:
                    process.start()
                except OSError:  # no process to be had (a limit): this one does the rest
                    reader.close()
                    break
                finally:
                    writer.close()
                connections[reader] = process
            started = len(connections)
            receiver.start()  # after the forks: they start without threads
            mine: dict[int, FileResult] = {}
            while (index := self._take(smallest=True)) is not None:
                mine[index] = analyse(self.items[index], self.job)
            for index in range(len(self.items)):
                yield mine.pop(index) if index in mine else self._wait(index, started)
        finally:
            for process in list(connections.values()):
                process.terminate()
            if receiver.is_alive():
                receiver.join()

    def _wait(self, index: int, forks: int) -> FileResult | None:
        """The result a forked process computes for item `index`: an error if every
        forked process ended without it though it was taken; None if it never was."""
        with self.arrived:
            while index not in self.results and len(self.ended) < forks:
                self.arrived.wait()
            result = self.results.pop(index, None)
        if isinstance(result, BaseException):
            raise result
        if result is not None or self.front.value <= self.position[index] < self.back.value:
            return result
        codes = sorted({str(code) for code in self.ended.values() if code})
        message = f"{INTERNAL} (its worker process ended: exit code {', '.join(codes)})"
        return FileResult(
            display(self.items[index][0]), errors=[FileError(ANALYSIS_ERROR, message)]
        )


def _imported_for(tasks: Sequence[Task]) -> None:
    """(before forking workers) What the tasks' analyses import, imported here once:
    the linter, libcst, the semantic model, the rules of their codes. Forked workers
    inherit it; else each worker of each pool (a pool per level of a project's import
    graph) imports them again: a tenth of a cold run's CPU on 836 files."""
    import torchlint.lint.linter  # noqa: F401

    rules_of(sorted({code for task in tasks for code in task.codes}))
