"""The hover of `torchlint server` ("why was this (not) flagged?"), driven over stdio by a
real client (VS Code's capabilities): what `torchlint explain` says at the line hovered,
for the text the editor holds (saved or not), with what its project tells it.

Each test's documents are in a project of their own (a folder with a pyproject.toml) in
the workspace folder."""

from __future__ import annotations

import asyncio
import re
import shutil
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from .conftest import FIXTURES, LOADER
from .lsp_client import (
    TIMEOUT,
    change_document,
    close_document,
    config,
    eventually,
    mark,
    open_document,
    published,
    uri,
    vscode,
)
from .test_server import notebook_cells, open_notebook

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.slow,
]  # the language server over stdio, with a real client

# LOADER's DataLoader with its workers: TL201 stays silent, and says why.
WORKERS = LOADER.replace("batch_size=256,", "batch_size=256, num_workers=4,")
TL201_SHOWN = "**TL201** dataloader-sync-loading (high impact), shown"
TL201_SILENT = "TL201: `num_workers=4`: not 0 on every path it sees (line 3)"
SETTLED = re.compile(r"project (?P<root>.+) \(\d+ files\): \d+ summaries read from the cache")


@pytest_lsp.fixture(scope="module", config=config())
async def client(lsp_client: LanguageClient, tmp_path_factory):
    folder = tmp_path_factory.mktemp("workspace")
    lsp_client.folder = folder  # type: ignore[attr-defined]
    lsp_client.init = await lsp_client.initialize_session(  # type: ignore[attr-defined]
        types.InitializeParams(capabilities=vscode(), root_uri=uri(folder))
    )
    yield
    await lsp_client.shutdown_session()


@pytest.fixture
def root(client, request) -> Path:
    """A project of the workspace folder, of its own (its pyproject.toml), for one test."""
    path: Path = client.folder / request.node.name
    path.mkdir()
    (path / "pyproject.toml").write_text("[tool.torchlint]\n")
    return path


async def hover(client: LanguageClient, doc: str, line: int) -> str | None:
    """The hover's text at the start of 0-based `line` (None: no hover)."""
    params = types.HoverParams(types.TextDocumentIdentifier(doc), types.Position(line, 0))
    result = await asyncio.wait_for(client.text_document_hover_async(params), TIMEOUT)
    if result is None:
        return None
    assert isinstance(result.contents, types.MarkupContent)
    assert result.contents.kind == types.MarkupKind.Markdown
    return result.contents.value


async def opened(client: LanguageClient, path: Path, text: str) -> str:
    """`path` opened with `text` (whatever is on disk), once its diagnostics are out."""
    doc, before = uri(path), mark(client)
    open_document(client, doc, text)
    await published(client, doc, before, version=1)
    return doc


async def test_hover_is_advertised(client):
    assert client.init.capabilities.hover_provider


async def test_a_finding_on_the_line_says_its_rule_and_that_it_is_shown(client, root):
    path = root / "train.py"
    path.write_text(LOADER)
    doc = await opened(client, path, LOADER)
    said = await hover(client, doc, 2)  # loader = DataLoader(ds, batch_size=256, ...)
    assert said is not None and said.startswith("**torchlint**: 1 finding on this line\n")
    assert f"- {TL201_SHOWN}\n" in said
    assert "\n**GPU**: yes: `torch.nn.Linear(8, 1).cuda()` (line 4)\n" in said
    # No list of the rules: only those with something to say here (TL001, TL202...).
    assert "TL404" not in said and "TL601" not in said
    assert len(set(re.findall(r"TL\d+", said))) < 10
    at_import = await hover(client, doc, 0)
    assert at_import is not None and at_import.startswith("**torchlint**: no finding")
    assert "TL201" not in at_import
    close_document(client, doc)


async def test_a_hidden_low_impact_finding_and_where_the_line_runs(client):
    """engine.py's evaluation loop, in the project that calls it on CUDA (train.py): its
    `.cpu()` is a finding of low impact, hidden; the loop's `.item()` runs every step."""
    root = Path(shutil.copytree(FIXTURES / "project" / "engine_layout", client.folder / "eng"))
    path = root / "mypkg" / "engine.py"
    after = len(client.log_messages)
    doc = await opened(client, path, path.read_text())

    def settled() -> bool:
        said = (SETTLED.search(m.message) for m in client.log_messages[after:])
        return any(m is not None and Path(m["root"]) == root for m in said)

    await eventually(settled)  # what train.py passes is known
    said = await hover(client, doc, 19)  # correct += (out.argmax(1).cpu() == labels).sum()
    assert said is not None
    assert (
        "- **TL401** host-sync-in-training-loop (low impact), hidden: low impact: shown with "
        "--show-low-impact\n  - `.cpu()` in the evaluation loop"
    ) in said
    assert "\n**Not per step** (" in said
    assert "- in an evaluation loop (line 18 in `evaluate`)" in said
    assert "  - called by another file: `main` in train.py" in said
    step = await hover(client, doc, 11)  # print(f"loss {loss.item():.3f}")
    assert step is not None and "(high impact), shown\n" in step
    assert "\n**Runs on every training step**\n" in step
    close_document(client, doc)


async def test_a_silent_rule_says_why(client, root):
    """TL201 looked at the DataLoader, and passed over it: `num_workers` is set."""
    path = root / "train.py"
    path.write_text(WORKERS)
    doc = await opened(client, path, WORKERS)
    said = await hover(client, doc, 2)
    assert said is not None and said.startswith("**torchlint**: no finding")
    assert "\n**Why the rules stayed silent**\n" in said and TL201_SILENT in said
    assert "- `loader`: is the DataLoader of line 3 (batch_size=256, num_workers=4" in said
    close_document(client, doc)


async def test_the_hover_follows_the_unsaved_buffer_not_the_disk(client, root):
    path = root / "train.py"
    path.write_text(WORKERS)  # on disk: workers, TL201 silent
    doc = await opened(client, path, LOADER)  # in the editor: none
    said = await hover(client, doc, 2)
    assert said is not None and TL201_SHOWN in said and TL201_SILENT not in said
    change_document(client, doc, "x = 1\n" + WORKERS, 2)  # unsaved; a line above
    said = await hover(client, doc, 3)
    assert said is not None and TL201_SHOWN not in said
    assert "TL201: `num_workers=4`: not 0 on every path it sees (line 4)" in said
    close_document(client, doc)


async def test_a_text_that_does_not_parse_has_no_hover_and_the_server_goes_on(client, root):
    path = root / "broken.py"
    broken = "import torch\ndef f(:\n    pass\n" + LOADER
    doc = await opened(client, path, broken)
    logged = len(client.log_messages)
    assert await hover(client, doc, 0) is None
    assert await hover(client, doc, 5) is None
    assert await hover(client, doc, 99) is None  # past the end
    assert not [m for m in client.log_messages[logged:] if "no hover" in m.message]
    change_document(client, doc, LOADER, 2)
    said = await hover(client, doc, 2)
    assert said is not None and TL201_SHOWN in said
    close_document(client, doc)


async def test_a_blank_line_or_a_comment_has_no_hover(client, root):
    text = "# a comment\n\n" + LOADER
    path = root / "train.py"
    path.write_text(text)
    doc = await opened(client, path, text)
    assert await hover(client, doc, 0) is None
    assert await hover(client, doc, 1) is None
    said = await hover(client, doc, 4)
    assert said is not None and TL201_SHOWN in said
    close_document(client, doc)


async def test_a_notebook_cell(client, root):
    """A line of a cell: the notebook's cells analysed as one program, as `check` does."""
    sources = ["Training\n", LOADER]
    cells = notebook_cells(root, sources, ["markdown", "python"])
    before = mark(client)
    notebook = open_notebook(client, root, cells)
    await published(client, cells[1][0], before, version=1)
    said = await hover(client, cells[1][0], 2)
    assert said is not None and TL201_SHOWN in said
    assert await hover(client, cells[0][0], 0) is None  # markdown: not ours
    client.notebook_document_did_close(
        types.DidCloseNotebookDocumentParams(
            types.NotebookDocumentIdentifier(notebook),
            [types.TextDocumentIdentifier(u) for u, _, _ in cells],
        )
    )


async def test_a_rule_ignored_in_the_file_says_so(client, root):
    """The document's per-file-ignores hide its finding, and the hover says which."""
    (root / "pyproject.toml").write_text(
        '[tool.torchlint]\nper-file-ignores = { "train.py" = ["TL201"] }\n'
    )
    path = root / "train.py"
    path.write_text(LOADER)
    doc = await opened(client, path, LOADER)
    said = await hover(client, doc, 2)
    assert said is not None
    assert "**TL201** dataloader-sync-loading (high impact), hidden: per-file-ignores" in said
    close_document(client, doc)
