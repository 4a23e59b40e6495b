"""A test client for `torchlint server`: pytest-lsp's, recording every publishDiagnostics
(with its version) and every capability the server registers, plus what an editor
does with the answers (applying text edits, in the negotiated position encoding)."""

from __future__ import annotations

import asyncio
import itertools
import re
import sys
from collections.abc import Callable
from typing import Any

from lsprotocol import types
from pygls.protocol import default_converter
from pygls.uris import from_fs_path
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

SERVER = [sys.executable, "-m", "torchlint", "server"]
TIMEOUT = 120  # a safety net against a hang, never a measure of speed


def make_client() -> LanguageClient:
    client = LanguageClient(converter_factory=default_converter)
    client.published = []  # type: ignore[attr-defined]
    client.registrations = []  # type: ignore[attr-defined]
    client.arrived = asyncio.Event()  # type: ignore[attr-defined]

    def publish(ls: LanguageClient, params: types.PublishDiagnosticsParams) -> None:
        ls.diagnostics[params.uri] = params.diagnostics
        ls.published.append(params)  # type: ignore[attr-defined]
        ls.arrived.set()  # type: ignore[attr-defined]

    def register(ls: LanguageClient, params: types.RegistrationParams) -> None:
        ls.registrations.extend(params.registrations)  # type: ignore[attr-defined]

    features = dict(DEFAULT_CLIENT_FEATURES)
    features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = publish
    features[types.CLIENT_REGISTER_CAPABILITY] = register
    register_lsp_features(client, features)
    return client


def config(env: dict[str, str] | None = None, args: tuple[str, ...] = ()) -> ClientServerConfig:
    return ClientServerConfig(
        server_command=[*SERVER, *args], client_factory=make_client, server_env=env
    )


def vscode() -> types.ClientCapabilities:
    """VS Code's capabilities, with notebook documents (LSP 3.17)."""
    caps = client_capabilities("visual-studio-code")
    caps.notebook_document = types.NotebookDocumentClientCapabilities(
        synchronization=types.NotebookDocumentSyncClientCapabilities(dynamic_registration=False)
    )
    return caps


def uri(path) -> str:
    return from_fs_path(str(path))


def mark(client: LanguageClient) -> int:
    """A point in the stream of published diagnostics: wait for what comes after it."""
    return len(client.published)  # type: ignore[attr-defined]


async def published(
    client: LanguageClient, uri: str, after: int, version: Any = ...
) -> list[types.Diagnostic]:
    """The first diagnostics published for `uri` after `after` (of `version`, if given)."""

    async def wait() -> list[types.Diagnostic]:
        seen = after
        while True:
            for params in client.published[seen:]:  # type: ignore[attr-defined]
                if params.uri == uri and (version is ... or params.version == version):
                    return list(params.diagnostics)
            seen = len(client.published)  # type: ignore[attr-defined]
            client.arrived.clear()  # type: ignore[attr-defined]
            await client.arrived.wait()  # type: ignore[attr-defined]

    return await asyncio.wait_for(wait(), TIMEOUT)


async def eventually(condition: Callable[[], Any]) -> None:
    """Wait until `condition()` holds (something the server does after it answers)."""

    async def wait() -> None:
        while not condition():
            await asyncio.sleep(0.01)

    await asyncio.wait_for(wait(), TIMEOUT)


def open_document(client: LanguageClient, uri: str, text: str, version: int = 1) -> None:
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "python", version, text))
    )


def change_document(client: LanguageClient, uri: str, text: str, version: int) -> None:
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(version, uri),
            [types.TextDocumentContentChangeWholeDocument(text)],
        )
    )


def close_document(client: LanguageClient, uri: str) -> None:
    client.text_document_did_close(
        types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri))
    )


async def actions(
    client: LanguageClient, uri: str, line: int, only: list[str] | None = None
) -> list[types.CodeAction]:
    """The code actions for a cursor at the start of 0-based `line`."""
    at = types.Position(line, 0)
    result = await asyncio.wait_for(
        client.text_document_code_action_async(
            types.CodeActionParams(
                types.TextDocumentIdentifier(uri),
                types.Range(at, at),
                types.CodeActionContext(diagnostics=[], only=only),
            )
        ),
        TIMEOUT,
    )
    return [a for a in result or [] if isinstance(a, types.CodeAction)]


async def resolve(client: LanguageClient, action: types.CodeAction) -> types.CodeAction:
    return await asyncio.wait_for(client.code_action_resolve_async(action), TIMEOUT)


def edits_by_uri(edit: types.WorkspaceEdit) -> dict[str, list[types.TextEdit]]:
    if edit.document_changes is not None:
        out: dict[str, list[types.TextEdit]] = {}
        for change in edit.document_changes:
            assert isinstance(change, types.TextDocumentEdit)
            out.setdefault(change.text_document.uri, []).extend(change.edits)  # type: ignore[arg-type]
        return out
    return {k: list(v) for k, v in (edit.changes or {}).items()}


_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def _units(char: str, encoding: str) -> int:
    if encoding == "utf-8":
        return len(char.encode("utf-8"))
    if encoding == "utf-32":
        return 1
    return 2 if ord(char) > 0xFFFF else 1


def apply_edits(text: str, edits: list[types.TextEdit], encoding: str = "utf-16") -> str:
    """What an editor makes of `text` with `edits` (positions in `encoding` units)."""
    lines = _LINE.findall(text)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(p: types.Position) -> int:
        if p.line >= len(lines):
            return len(text)
        line = lines[p.line].rstrip("\r\n")
        count = 0
        for i, char in enumerate(line):
            if count >= p.character:
                return starts[p.line] + i
            count += _units(char, encoding)
        return starts[p.line] + len(line)

    spans = sorted((offset(e.range.start), offset(e.range.end), e.new_text) for e in edits)
    for (_, end, _), (start, _, _) in itertools.pairwise(spans):
        assert end <= start, "overlapping edits"
    for start, end, new in reversed(spans):
        text = text[:start] + new + text[end:]
    return text
