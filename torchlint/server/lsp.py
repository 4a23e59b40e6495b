"""The language server: LSP over stdin/stdout, on pygls.

Documents are linted from the editor's text, never from the file on disk: at once on
open (and on save if their config changed), and on change: at once after a pause in
typing, after a pause of `DEBOUNCE_S` within a burst of changes (`pause`: a burst of
keystrokes costs two lints, its first and its last). Every call into the engine runs on
one worker thread, so the protocol loop always answers; a request the client cancels
stops waiting, and work of its that has not started never runs; a result for text that
has changed since is dropped, not shown.

Code actions are listed from the last lint (cheap: a cursor move asks for them) and get
their edits only when the client resolves the one the user picks (`codeAction/resolve`);
a client that cannot resolve gets the edits of the few actions under its cursor at once.

A document of a workspace folder is linted with what the rest of its project tells it
(`projects`). The summaries of the project's files come from its cache, or are computed
in the background between lints (`_converge`); a file saved or changed on disk is read
again. Each time the project settles, the open documents told what it no longer says
are linted again.

The messages of the protocol are in protocol.py, code actions in actions.py, what is held
of a document and the LSP shapes of findings and fixes in shapes.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument

from torchlint import __version__
from torchlint.config.load import ConfigError
from torchlint.config.plan import RunPlan
from torchlint.run.rounds import MAX_ROUNDS
from torchlint.semantic.external import Environment
from torchlint.server import actions, analysis
from torchlint.server.analysis import Cell, Problem, Report
from torchlint.server.projects import Opened, Projects
from torchlint.server.settings import SECTION, Configs, EditorSettings, setup
from torchlint.server.shapes import NAME, Analysis, Snapshot, Told, analysed

DEBOUNCE_S = 0.05
NOTEBOOK_SYNC = types.NotebookDocumentSyncOptions(
    notebook_selector=[
        types.NotebookDocumentFilterWithNotebook(
            notebook="jupyter-notebook", cells=[types.NotebookCellLanguage(language="python")]
        )
    ],
    save=True,
)


R = TypeVar("R")


def pause(now: float, last: float) -> float:
    """How long a change made at `now` waits before its lint, the document's previous
    change made at `last`: none after a pause in typing (what it shows is wanted at
    once), `DEBOUNCE_S` within a burst (each later change cancels the wait)."""
    return DEBOUNCE_S if now - last < DEBOUNCE_S else 0.0


def _paused(work: Callable[..., R], *args: Any) -> R:
    """(worker) A lint, with Python's cyclic collector paused until `_collect` runs, after
    its diagnostics are out. A lint allocates, and drops, tens of thousands of linked
    objects (the semantic model); collections in the middle of it promote them to the old
    generation, and a full collection, over every tree the server holds, then follows
    every few lints (100 to 200 ms each on 2,000 lines). The same for a quick fix; "fix
    all" (which allocates for seconds) runs with the collector as usual: what a paused one
    would leave to collect would hold up the next request."""
    gc.disable()
    return work(*args)


def _collect() -> None:
    """(worker, its next job after an answer) The young generations, collected at once."""
    gc.enable()
    gc.collect(1)


@dataclass
class Settling:
    """(event loop) A project's rounds, run in the background, and what changed on disk
    since they began."""

    opened: Opened
    task: asyncio.Task[None] | None = None
    changed: set[Path] = field(default_factory=set)  # files saved or changed on disk
    moved: set[Path] = field(default_factory=set)  # files created or deleted
    again: bool = False  # the rounds under way start over


@dataclass
class Tracked:
    """An open document (or notebook) and its lints."""

    key: str
    generation: int = 0
    task: asyncio.Task[None] | None = None  # the latest lint asked for
    started: bool = False  # ... has left its debounce
    changed_at: float = -math.inf  # (the event loop's clock) its last change
    latest: Analysis | None = None
    published: set[str] = field(default_factory=set)


class TorchlintServer(LanguageServer):
    def __init__(self, cache: bool = True) -> None:
        super().__init__(
            NAME,
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Full,
            notebook_document_sync=NOTEBOOK_SYNC,
        )
        self.editor = EditorSettings()
        self.configs = Configs()
        self.tracked: dict[str, Tracked] = {}
        self.worker = ThreadPoolExecutor(1, thread_name_prefix="torchlint-lint")
        self.buffers = analysis.Buffers()  # the worker's only
        self.projects = Projects(self.configs, cache)  # the worker's only
        self.settling: dict[Path, Settling] = {}  # by project root
        self.said: set[str] = set()  # messages already shown or logged once
        self.stopping = False  # shut down: work under way ends unheard

    # -- telling the user -----------------------------------------------------------------

    def log(self, message: str, kind: types.MessageType = types.MessageType.Error) -> None:
        self.window_log_message(types.LogMessageParams(type=kind, message=message))

    def once(self, message: str, kind: types.MessageType = types.MessageType.Error) -> None:
        """Show a message, and log it, the first time only."""
        if message not in self.said:
            self.said.add(message)
            self.window_show_message(types.ShowMessageParams(type=kind, message=message))
            self.log(message, kind)

    def apply_settings(self, raw: Any) -> bool:
        try:
            self.editor = EditorSettings.parse(raw)
        except ConfigError as exc:
            self.once(f"torchlint: invalid settings, not applied: {exc}")
            return False
        if self.editor.trust_local_rules != self.configs.trusted:  # configs read again
            self.worker.submit(self.configs.trust, self.editor.trust_local_rules)
            self.worker.submit(self.projects.clear)
        return True

    def skipped(self, plan: RunPlan | None) -> None:
        """Log, once, the local rules a config names that are not loaded, and why."""
        if plan is None or not plan.config.skipped_local:
            return
        modules = [
            str(path)
            for folder in plan.config.skipped_local
            for path in sorted(folder.glob("*.py"))
            if not path.name.startswith("_")
        ]
        message = (
            f"torchlint: {plan.config.source}: local rules not run, the workspace is not "
            "trusted (they are Python of the repository; the setting `trustLocalRules` "
            f"runs them): {', '.join(modules) or 'no rule modules'}"
        )
        if message not in self.said:
            self.said.add(message)
            self.log(message, types.MessageType.Warning)

    @property
    def pulls(self) -> bool:
        """Does the client answer `workspace/configuration` (the pull model)?"""
        workspace = self.client_capabilities.workspace
        return bool(workspace is not None and workspace.configuration)

    async def pull_settings(self) -> None:
        """Ask the client for the "torchlint" section and apply it; a client that holds
        nothing for it (null) leaves the settings as they are (initializationOptions)."""
        try:
            answer = await self.workspace_configuration_async(
                types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)])
            )
        except Exception as exc:  # the client failed to answer: the settings stay
            self.log(
                f"torchlint: cannot read the editor settings: {exc}", types.MessageType.Warning
            )
            return
        raw = answer[0] if answer else None
        if raw is not None and self.apply_settings(raw):
            self.relint_all()

    # -- documents ------------------------------------------------------------------------

    def _document(self, uri: str) -> TextDocument | None:
        # (the workspace's getter makes up a document, read from disk, for an unknown URI)
        documents: dict[str, TextDocument] = self.workspace.text_documents
        return documents.get(unquote(uri))

    def _folders(self) -> list[str]:
        folders = [to_fs_path(f.uri) for f in self.workspace.folders.values()]
        if self.workspace.root_path:
            folders.append(self.workspace.root_path)
        return [f for f in folders if f]

    def _folder(self, path: Path | None) -> Path | None:
        """The workspace folder holding `path`, if any."""
        if path is not None:
            for folder in sorted(self._folders(), key=len, reverse=True):
                if path.is_relative_to(folder):
                    return Path(folder)
        return None

    def _root(self, path: Path | None) -> Path:
        folder = self._folder(path)
        if folder is not None:
            return folder
        if path is not None:
            return path.parent
        return Path(next(iter(self._folders()), None) or Path.cwd())

    def snapshot(self, t: Tracked) -> Snapshot | None:
        fs_path = to_fs_path(t.key) if t.key.startswith("file:") else None
        path = Path(fs_path) if fs_path else None
        notebook = self.workspace.get_notebook_document(notebook_uri=t.key)
        uris, versions, texts, cells = [], [], [], []
        if notebook is not None:
            for cell in notebook.cells:
                doc = self._document(cell.document)
                if doc is None:
                    continue
                uris.append(cell.document)
                versions.append(doc.version)
                texts.append(doc.source)
                python = cell.kind == types.NotebookCellKind.Code and doc.language_id in (
                    None,
                    "python",
                )
                cells.append(Cell(doc.source, python))
        else:
            doc = self._document(t.key)
            if doc is None:
                return None
            uris, versions, texts = [t.key], [doc.version], [doc.source]
        return Snapshot(
            t.key,
            t.generation,
            path,
            self._root(path),
            self._folder(path),
            tuple(uris),
            tuple(versions),
            tuple(texts),
            tuple(cells) if notebook is not None else None,
        )

    def track(self, key: str) -> None:
        self.tracked[key] = t = Tracked(key)
        self.refresh(t, 0)

    def changed(self, key: str) -> None:
        t = self.tracked.get(key)
        if t is not None:
            t.generation += 1
            now = asyncio.get_running_loop().time()
            delay, t.changed_at = pause(now, t.changed_at), now
            self.refresh(t, delay)

    def forget(self, key: str) -> None:
        t = self.tracked.pop(key, None)
        if t is None:
            return
        self.worker.submit(self.buffers.drop, key)
        if t.task is not None:
            t.task.cancel()
        for uri in t.published:
            self.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri=uri, diagnostics=[])
            )

    def relint_all(self, reload: bool = False) -> None:
        if reload:  # the worker drops the configs read so far before its next lint
            self.worker.submit(self.configs.clear)
            self.worker.submit(self.projects.clear)
        for t in self.tracked.values():
            t.generation += 1
            self.refresh(t, 0)

    # -- linting --------------------------------------------------------------------------

    def refresh(self, t: Tracked, delay: float) -> None:
        """Lint `t` after `delay` seconds, instead of any lint asked for before (one the
        worker has begun finishes there, unheard)."""
        if t.task is not None:
            t.task.cancel()
        t.started = False
        t.task = asyncio.ensure_future(self._lint(t, delay))

    async def _lint(self, t: Tracked, delay: float) -> None:
        if delay:
            await asyncio.sleep(delay)
        if t.task is asyncio.current_task():
            t.started = True
        snapshot = self.snapshot(t)
        if snapshot is None:
            return
        encoding = str(self.workspace.position_encoding or "utf-16")
        try:
            result = await self.engine(self.analyze, snapshot, encoding)
            self.skipped(result.setup)
            for failure in result.report.failures:
                if failure not in self.said:
                    self.said.add(failure)
                    self.log(f"torchlint: {snapshot.name}: {failure}")
            if result.told is not None:
                self.settle_project(result.told.opened)
            if self.tracked.get(t.key) is not t or t.generation != snapshot.generation:
                return  # closed or changed meanwhile
            t.latest = result
            self.publish(t, result)
        finally:
            self.settle()

    async def engine(self, work: Callable[..., R], *args: Any) -> R:
        """Run a lint or a quick fix on the worker thread (see `_paused`; the caller has the
        worker run `_collect` once its answer is out)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.worker, functools.partial(_paused, work, *args))

    def settle(self) -> None:
        """Have the worker collect what the engine work before left (`_collect`)."""
        with contextlib.suppress(RuntimeError):  # the worker is shut down
            self.worker.submit(_collect)

    def publish(self, t: Tracked, result: Analysis) -> None:
        snapshot = result.snapshot
        for uri, diagnostics in result.diagnostics.items():
            version = snapshot.versions[snapshot.uris.index(uri)]
            self.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri=uri, version=version, diagnostics=diagnostics)
            )
        for uri in t.published - result.diagnostics.keys():  # cells removed since
            self.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri=uri, diagnostics=[])
            )
        t.published = set(result.diagnostics)

    def saved(self, t: Tracked) -> None:
        """On save: the text is linted already (diagnostics follow the editor's text), so
        its diagnostics are published again, and linted anew only when its config file
        changed on disk meanwhile (for clients that do not watch files) or its lint is
        still waiting out the pause after typing."""
        latest = t.latest
        if latest is not None and latest.snapshot.generation == t.generation:
            snapshot = latest.snapshot
            directory = snapshot.path.parent if snapshot.path else snapshot.root
            if self.configs.fresh(directory):
                self.publish(t, latest)
                return
            t.generation += 1
        elif t.started and t.task is not None and not t.task.done():
            return  # the lint under way publishes
        self.refresh(t, 0)

    async def current(self, key: str) -> Analysis | None:
        """The analysis of the document's text as it is now (linted now if need be)."""
        while (t := self.tracked.get(key)) is not None:
            if t.latest is not None and t.latest.snapshot.generation == t.generation:
                return t.latest
            if t.task is None or t.task.done() or not t.started:
                self.refresh(t, 0)
            assert t.task is not None
            await asyncio.wait([t.task])  # a cancelled request stops here, the lint goes on
        return None

    def analyze(self, snapshot: Snapshot, encoding: str) -> Analysis:
        """(worker thread) Lint a snapshot; never raises."""
        chosen: RunPlan | None = None
        report = Report()
        first = 1 if snapshot.cells else None
        try:
            chosen = setup(self.configs, self.editor, snapshot.path, snapshot.root)
        except ConfigError as exc:
            report.problems.append(Problem(f"torchlint: {exc}", 1, 1, first))
        except Exception as exc:
            analysis.internal_error(report, exc, first)
        if chosen is None:
            return analysed(snapshot, chosen, report, encoding)
        opened, env, trouble = self.project(snapshot)
        buffer = self.buffers.get(snapshot.key)
        if snapshot.cells is None:
            text = snapshot.texts[0]
            report = analysis.lint_python(text, snapshot.name, chosen, buffer, env)
        else:
            report = analysis.lint_cells(snapshot.cells, snapshot.name, chosen, buffer, env)
        if trouble is not None:
            report.failures.append(trouble)
        result = analysed(snapshot, chosen, report, encoding)
        if opened is not None and env is not None and snapshot.path is not None:
            opened.keep_fetched()
            checked = report.checked or bool(report.problems)  # (a file it cannot analyse)
            result.told = Told(opened, snapshot.path, env.answers, checked)
        return result

    def project(self, snapshot: Snapshot) -> tuple[Opened | None, Environment | None, str | None]:
        """(worker thread) The project of a document, opened if need be, and what it tells
        the document (a fresh record of answers); None, None: the document is analysed
        alone (and why, where its project cannot be read)."""
        if snapshot.path is None:
            return None, None, None
        try:
            opened = self.projects.find(snapshot.path, snapshot.folder, self.editor)
            return opened, opened.environment(snapshot.path) if opened else None, None
        except Exception as exc:  # a bug, or a folder that cannot be read
            why = f"{type(exc).__name__}: {exc}"
            return None, None, f"its project cannot be read, the file is analysed alone ({why})"

    # -- the projects ---------------------------------------------------------------------

    async def background(self, work: Callable[..., R], *args: Any) -> R:
        """Run a step of a project's rounds on the worker (lints queued meanwhile go
        first: each step is one file)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.worker, functools.partial(work, *args))

    def settle_project(self, opened: Opened) -> None:
        """Bring a project just opened to its fixed point, in the background."""
        known = self.settling.get(opened.root)
        if known is not None and known.opened.id >= opened.id:
            return
        if known is not None and known.task is not None:
            known.task.cancel()  # an earlier opening (the config changed)
        settling = self.settling[opened.root] = Settling(opened)
        settling.task = asyncio.ensure_future(self._converge(settling))

    def file_changed(self, path: Path, moved: bool = False) -> None:
        """A file changed on disk (saved, or `moved`: created or deleted): each project
        holding it reads it again, and settles anew."""
        for root, settling in self.settling.items():
            if not path.is_relative_to(root):
                continue
            (settling.moved if moved else settling.changed).add(path)
            settling.again = True
            if settling.task is None or settling.task.done():
                settling.task = asyncio.ensure_future(self._converge(settling))

    async def _converge(self, settling: Settling) -> None:
        """A project's rounds, a file at a time (lints go between), then the open
        documents told what the project no longer says linted again; all of it again
        while files change on disk meanwhile."""
        opened = settling.opened
        try:
            while True:
                settling.again = False
                changed, moved = settling.changed, settling.moved
                settling.changed, settling.moved = set(), set()
                if (changed or moved) and not await self.background(opened.reread, changed, moved):
                    opened = await self.background(self.projects.reopen, opened)
                    settling.opened = opened
                await self._rounds(settling, opened)
                if not settling.again:
                    await self._relint_stale(opened)
                if not settling.again:
                    break
        except Exception as exc:  # a bug: the documents keep what they were told
            if not self.stopping:
                self.log(
                    f"torchlint: project {opened.root}: its summaries could not be brought "
                    f"up to date ({type(exc).__name__}: {exc}); please report it"
                )
            return
        files = len(opened.project.layout.paths)
        self.log(
            f"torchlint: project {opened.root} ({files} files): {opened.cached} summaries "
            f"read from the cache, {opened.computed} computed",
            types.MessageType.Log,
        )

    async def _rounds(self, settling: Settling, opened: Opened) -> None:
        """The rounds of `Rounds.converge`, each analysis a step of its own; they stop
        where a file changes on disk meanwhile (what is computed is kept)."""
        for round_ in range(MAX_ROUNDS):
            batches = await self.background(opened.batches, round_)
            for batch in batches:
                results = []
                for task in batch:
                    if settling.again:
                        break
                    results.append(await self.background(opened.analyse, task))
                await self.background(opened.keep, batch[: len(results)], results)
                if settling.again:
                    return
            if not batches:
                return

    async def _relint_stale(self, opened: Opened) -> None:
        """Lint again the open documents of the project whose last lint was told what
        it no longer says, and wait for them."""
        told: list[tuple[Tracked, Told]] = []
        for t in self.tracked.values():
            last = t.latest.told if t.latest is not None else None
            if last is not None and last.opened.root == opened.root:
                told.append((t, last))
        stale = await self.background(
            lambda: [opened.stale(k.path, k.answers, k.checked) for _, k in told]
        )
        tasks = []
        for (t, _), old in zip(told, stale, strict=True):
            if old and self.tracked.get(t.key) is t:
                t.generation += 1
                self.refresh(t, 0)
                assert t.task is not None
                tasks.append(t.task)
        if tasks:
            await asyncio.wait(tasks)

    # -- code actions ---------------------------------------------------------------------

    def fix_edit(
        self, result: Analysis, data: dict[str, Any], encoding: str, versioned: bool
    ) -> types.WorkspaceEdit | None:
        """(worker thread) The edit of one code action, from the engine."""
        if result.setup is None:
            return None
        env = self.project(result.snapshot)[1] if result.told is not None else None
        return actions.edit(result, data, encoding, versioned, self.buffers, env)

    async def resolve(self, action: types.CodeAction) -> types.CodeAction:
        data = action.data if isinstance(action.data, dict) else {}
        t = self.tracked.get(data.get("key", ""))
        result = t.latest if t is not None else None
        if t is None or result is None:
            return action
        if not data.get("generation") == t.generation == result.snapshot.generation:
            return action  # the document changed since: no edit rather than a wrong one
        args = (result, data, self.encoding, self.versioned)
        if data.get("action") == "fixAll":  # (the collector as usual: see `_paused`)
            loop = asyncio.get_running_loop()
            action.edit = await loop.run_in_executor(self.worker, self.fix_edit, *args)
            return action
        try:
            action.edit = await self.engine(self.fix_edit, *args)
        finally:
            self.settle()
        return action

    @property
    def encoding(self) -> str:
        return str(self.workspace.position_encoding or "utf-16")

    @property
    def versioned(self) -> bool:
        workspace = self.client_capabilities.workspace
        edit = workspace.workspace_edit if workspace is not None else None
        return bool(edit is not None and edit.document_changes)

    @property
    def resolves(self) -> bool:
        text = self.client_capabilities.text_document
        code_action = text.code_action if text is not None else None
        support = code_action.resolve_support if code_action is not None else None
        return support is not None and "edit" in support.properties

    async def code_actions(self, params: types.CodeActionParams) -> list[types.CodeAction]:
        uri = params.text_document.uri
        notebook = self.workspace.get_notebook_document(cell_uri=uri)
        key = notebook.uri if notebook is not None else uri
        result = await self.current(key)
        if result is None or result.setup is None or uri not in result.findings:
            return []
        listed = actions.listed(result, params, key, self.resolves)
        if not self.resolves:
            for action in listed:
                await self.resolve(action)
                action.data = None
            listed = [a for a in listed if a.edit is not None]
        return listed
