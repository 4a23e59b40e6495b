"""`torchlint server` when things go wrong, for a client unlike VS Code.

The server process runs with a rule made to raise (tests/broken_rule/sitecustomize.py,
on its path, breaks TL402's check), and the client is Neovim's: UTF-8 positions, and (here) no
`codeAction/resolve`, so code actions must come with their edits. It is started with
`--stdio`, as many clients start servers, and it must exit cleanly when told to.
"""

from __future__ import annotations

import os

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient, client_capabilities

from .conftest import LOADER, ROOT
from .lsp_client import (
    actions,
    apply_edits,
    change_document,
    close_document,
    config,
    edits_by_uri,
    eventually,
    mark,
    open_document,
    published,
    uri,
)

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.slow,
]  # the language server over stdio, with a real client

PATH = [str(ROOT / "tests" / "broken_rule"), *filter(None, [os.environ.get("PYTHONPATH")])]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(PATH)}  # torchlint found where it was
# TL402 and TL403 are preview rules; low-impact findings (TL202 here) shown, so that what
# the initialization options leave out is left out by them.
CONFIG = '[tool.torchlint]\npreview = true\nmin-impact = "low"\n'
EMPTIES_CACHE = LOADER + "        torch.cuda.empty_cache()\n"  # TL402's pattern, in the loop


@pytest_lsp.fixture(scope="module", config=config(env=ENV, args=("--stdio",)))
async def client(lsp_client: LanguageClient, tmp_path_factory):
    caps = client_capabilities("neovim")
    caps.text_document.code_action.resolve_support = None
    root = tmp_path_factory.mktemp("workspace")
    lsp_client.init = await lsp_client.initialize_session(  # type: ignore[attr-defined]
        types.InitializeParams(
            capabilities=caps,
            root_uri=uri(root),
            initialization_options={"torchlint": {"ignore": ["TL202"]}},
        )
    )
    yield
    if lsp_client._server is not None and lsp_client._server.returncode is None:
        await lsp_client.shutdown_session()


async def test_a_rule_that_raises_is_logged_and_the_others_still_report(client, tmp_path):
    (tmp_path / "pyproject.toml").write_text(CONFIG)
    doc = uri(tmp_path / "t.py")
    logged = len(client.log_messages)
    before = mark(client)
    open_document(client, doc, EMPTIES_CACHE)
    diagnostics = await published(client, doc, before, version=1)
    assert {d.code for d in diagnostics} >= {"TL201"} and "TL402" not in {
        d.code for d in diagnostics
    }
    await eventually(lambda: len(client.log_messages) > logged)
    (log,) = client.log_messages[logged:]
    assert log.type == types.MessageType.Error
    assert "rule TL402 failed" in log.message and "broken on purpose" in log.message
    before = mark(client)
    change_document(client, doc, EMPTIES_CACHE + "\n", 2)
    await published(client, doc, before, version=2)
    assert len(client.log_messages) == logged + 1  # the same failure is logged once
    close_document(client, doc)


async def test_utf8_positions_and_code_actions_with_their_edits(client, tmp_path):
    assert client.init.capabilities.position_encoding == types.PositionEncodingKind.Utf8
    text = LOADER.replace("loader = ", 's = "é𝔵"; loader = ')
    doc = uri(tmp_path / "t.py")
    before = mark(client)
    open_document(client, doc, text)
    (d,) = [d for d in await published(client, doc, before, version=1) if d.code == "TL201"]
    assert d.range.start == types.Position(2, len('s = "é𝔵"; loader = '.encode()))
    listed = await actions(client, doc, 2)
    assert [a.title for a in listed] == ["Ignore TL201 for this line"]  # no fix all unasked
    (ignore,) = listed
    assert ignore.edit is not None and ignore.data is None
    (edit,) = edits_by_uri(ignore.edit)[doc]
    fixed = apply_edits(text, [edit], "utf-8")
    assert fixed.splitlines()[2].endswith("pin_memory=True)  # noqa: TL201")
    close_document(client, doc)


async def test_fix_all_when_asked_and_the_initialization_options(client, tmp_path):
    (tmp_path / "pyproject.toml").write_text(CONFIG)
    example = (ROOT / "examples" / "train_classifier.py").read_text()
    doc = uri(tmp_path / "train.py")
    before = mark(client)
    open_document(client, doc, example)
    codes = {d.code for d in await published(client, doc, before, version=1)}
    assert "TL403" in codes and "TL202" not in codes  # ignored by the initialization options
    (fix_all,) = await actions(client, doc, 0, only=["source.fixAll.torchlint"])
    assert fix_all.edit is not None and fix_all.data is None
    fixed = apply_edits(example, edits_by_uri(fix_all.edit)[doc], "utf-8")
    assert "running_loss += loss.detach()" in fixed
    assert "torch.cuda.empty_cache()" in fixed  # TL402 failed: its fix is not applied
    close_document(client, doc)


async def test_shutdown_then_exit_ends_the_server_cleanly(client):
    await client.shutdown_session()
    assert client._server.returncode == 0
