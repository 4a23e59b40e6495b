"""The hover: what `torchlint explain` says at a line of a document, in a few lines of
Markdown ("why was this (not) flagged?").

It is computed when the editor asks, never ahead, on the worker thread as a lint is, for
the text the editor holds (saved or not): the findings of its lint (`current`: linted
first where the text changed since) and the tree it parsed (its `Buffer`), the
document's settings, and what its project tells it, by the analysis and the words of
`torchlint explain` (`explain_text`, `render.markdown`). No LSP types here: protocol.py
makes the answer a Hover."""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from torchlint.config.load import ConfigError
from torchlint.explain import ExplainError, Place, explain_text
from torchlint.explain.render import markdown
from torchlint.server.analysis import notebook_json
from torchlint.server.settings import setup
from torchlint.text.source import split_lines

if TYPE_CHECKING:
    from torchlint.server.lsp import TorchlintServer
    from torchlint.server.shapes import Analysis


async def hover(server: TorchlintServer, uri: str, line: int) -> str | None:
    """(event loop) The hover at 0-based `line` of the document `uri` (or of a notebook's
    cell); None where there is nothing to say: a document not open or that its config
    excludes, a blank line or a comment, a text that does not parse, a text changed since
    the question. A bug in torchlint is logged, never raised."""
    notebook = server.workspace.get_notebook_document(cell_uri=uri)
    key = notebook.uri if notebook is not None else uri
    result = await server.current(key)
    if result is None or result.setup is None or uri not in result.snapshot.uris:
        return None
    try:
        said = await server.engine(explained, server, result, uri, line)
    except Exception as exc:
        details = "".join(traceback.format_exception(exc))
        server.log(f"torchlint: {result.snapshot.name}: no hover, please report it: {details}")
        return None
    finally:
        server.settle()
    t = server.tracked.get(key)
    return said if t is not None and t.generation == result.snapshot.generation else None


def explained(server: TorchlintServer, result: Analysis, uri: str, line: int) -> str | None:
    """(worker thread) The Markdown of the explanation at `line` of `result`'s text (a
    cell's, `uri`), with what the document's project tells it now."""
    snapshot = result.snapshot
    index = snapshot.uris.index(uri)
    lines = split_lines(snapshot.texts[index])  # (as LSP counts them)
    code = lines[line].strip() if line < len(lines) else ""
    if not code or code.startswith("#"):
        return None
    path = snapshot.path or Path(snapshot.name)
    try:
        chosen = setup(server.configs, server.editor, snapshot.path, snapshot.root, per_file=False)
    except ConfigError:
        return None  # (its diagnostics say why)
    if chosen is None:
        return None
    env = server.project(snapshot)[1] if result.told is not None else None
    if snapshot.cells is None:
        text, at = snapshot.texts[0], Place(path, line + 1)
    else:
        text, at = notebook_json(snapshot.cells), Place(path, line + 1, index + 1)
    try:
        violations, buffer = result.report.violations, server.buffers.get(snapshot.key)
        found = explain_text(at, text, chosen, violations, env, snapshot.name, buffer)
    except ExplainError:
        return None  # a text that does not parse (its diagnostics say where)
    return markdown(found)
