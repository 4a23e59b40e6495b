"""The protocol: the LSP messages the server answers, each handed to `TorchlintServer`
(a hover to hover.py), and `run`, which serves one client over stdin/stdout."""

from __future__ import annotations

import sys
from pathlib import Path
from urllib.parse import unquote

from lsprotocol import types
from pygls.uris import to_fs_path

from torchlint.config.load import CONFIG_FILES
from torchlint.server.actions import FIX_ALL
from torchlint.server.hover import hover
from torchlint.server.lsp import TorchlintServer

PYTHON_SUFFIXES = (".py", ".pyi")
PYTHON_FILES = "**/*.py"  # watched: the files of the documents' projects


def _python(doc: types.TextDocumentItem) -> bool:
    return doc.language_id == "python" or unquote(doc.uri).endswith(PYTHON_SUFFIXES)


def _python_file(uri: str) -> Path | None:
    """The path of a `.py` file (the files of a project), else None."""
    path = to_fs_path(uri) if uri.startswith("file:") else None
    return Path(path) if path and path.endswith(".py") else None


def _config_file(uri: str) -> bool:
    return unquote(uri).rsplit("/", 1)[-1] in CONFIG_FILES


def create_server(cache: bool = True) -> TorchlintServer:
    server = TorchlintServer(cache)
    _lifecycle(server)
    _documents(server)
    _notebooks(server)
    _workspace(server)
    _code_actions(server)
    _hover(server)
    return server


def _lifecycle(server: TorchlintServer) -> None:
    @server.feature(types.INITIALIZE)
    def initialize(params: types.InitializeParams) -> None:
        server.apply_settings(params.initialization_options)

    @server.feature(types.INITIALIZED)
    async def initialized(params: types.InitializedParams) -> None:
        if server.pulls:
            await server.pull_settings()
        await _watch(server)

    @server.feature(types.SHUTDOWN)
    def shutdown(params: None) -> None:
        server.stopping = True
        tasks = [t.task for t in server.tracked.values()]
        tasks += [s.task for s in server.settling.values()]
        for task in tasks:
            if task is not None:
                task.cancel()
        server.worker.shutdown(wait=False, cancel_futures=True)


async def _watch(server: TorchlintServer) -> None:
    """Ask the client to tell of changes to config files and Python files, if it can."""
    workspace = server.client_capabilities.workspace
    watched = workspace.did_change_watched_files if workspace is not None else None
    if watched is None or not watched.dynamic_registration:
        return  # config files are still re-read when they change, at the next lint
    globs = [f"**/{name}" for name in CONFIG_FILES] + [PYTHON_FILES]
    watchers = [types.FileSystemWatcher(glob_pattern=glob) for glob in globs]
    registration = types.Registration(
        id="torchlint-files",
        method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
        register_options=types.DidChangeWatchedFilesRegistrationOptions(watchers=watchers),
    )
    try:
        await server.client_register_capability_async(
            types.RegistrationParams(registrations=[registration])
        )
    except Exception as exc:  # the client refused: nothing is lost but a faster reload
        server.log(f"torchlint: cannot watch files: {exc}", types.MessageType.Warning)


def _documents(server: TorchlintServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(params: types.DidOpenTextDocumentParams) -> None:
        if _python(params.text_document):
            server.track(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(params: types.DidChangeTextDocumentParams) -> None:
        server.changed(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(params: types.DidSaveTextDocumentParams) -> None:
        uri = params.text_document.uri
        if _config_file(uri):
            server.relint_all(reload=True)
            return
        if (t := server.tracked.get(uri)) is not None:
            server.saved(t)
        if (path := _python_file(uri)) is not None:
            server.file_changed(path)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(params: types.DidCloseTextDocumentParams) -> None:
        server.forget(params.text_document.uri)


def _notebooks(server: TorchlintServer) -> None:
    @server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    def notebook_did_open(params: types.DidOpenNotebookDocumentParams) -> None:
        server.track(params.notebook_document.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def notebook_did_change(params: types.DidChangeNotebookDocumentParams) -> None:
        server.changed(params.notebook_document.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
    def notebook_did_save(params: types.DidSaveNotebookDocumentParams) -> None:
        if (t := server.tracked.get(params.notebook_document.uri)) is not None:
            server.saved(t)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def notebook_did_close(params: types.DidCloseNotebookDocumentParams) -> None:
        server.forget(params.notebook_document.uri)


def _workspace(server: TorchlintServer) -> None:
    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(params: types.DidChangeConfigurationParams) -> None:
        if params.settings is None and server.pulls:  # "changed: ask for them"
            await server.pull_settings()
        elif server.apply_settings(params.settings):
            server.relint_all()

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched_files(params: types.DidChangeWatchedFilesParams) -> None:
        if any(_config_file(c.uri) for c in params.changes):
            server.relint_all(reload=True)
            return
        for change in params.changes:
            if (path := _python_file(change.uri)) is not None:
                server.file_changed(path, moved=change.type != types.FileChangeType.Changed)


def _code_actions(server: TorchlintServer) -> None:
    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(
            code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL], resolve_provider=True
        ),
    )
    async def code_action(params: types.CodeActionParams) -> list[types.CodeAction]:
        return await server.code_actions(params)

    @server.feature(types.CODE_ACTION_RESOLVE)
    async def code_action_resolve(action: types.CodeAction) -> types.CodeAction:
        return await server.resolve(action)


def _hover(server: TorchlintServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def text_document_hover(params: types.HoverParams) -> types.Hover | None:
        said = await hover(server, params.text_document.uri, params.position.line)
        if said is None:
            return None
        return types.Hover(contents=types.MarkupContent(kind=_markup(server), value=said))


def _markup(server: TorchlintServer) -> types.MarkupKind:
    """Markdown, unless the client says it shows only plain text (which reads as well)."""
    text = server.client_capabilities.text_document
    said = text.hover.content_format if text is not None and text.hover is not None else None
    if said and types.MarkupKind.Markdown not in said:
        return types.MarkupKind.PlainText
    return types.MarkupKind.Markdown


def run(cache: bool = True) -> int:
    """Serve one client over stdin/stdout until it exits (`cache`: read and write the
    summary cache of each project, as `torchlint check` does)."""
    stdout = sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print must never corrupt the protocol stream
    server = create_server(cache)
    # A lint holds the interpreter lock for 100 ms or more; each step of reading a message
    # (a thread reads stdin for the event loop) waits for the lock, 5 ms by default: the
    # changes typed during a lint would reach the server late, not as a burst, each
    # linted in turn. At 1 ms, messages are read as they come, at little cost to the lint.
    sys.setswitchinterval(0.001)
    server.start_io(sys.stdin.buffer, stdout)
    return 0
