"""`torchlint server` driven over stdio by a real LSP client, as an editor drives it.

One server process serves the whole module (VS Code's capabilities: UTF-16 positions,
code actions resolved lazily, versioned workspace edits); each test opens its own
documents in its own directory, so that configs do not meet. What the server says is
compared with what the command line says of the same text.
"""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcRequestCancelled
from pytest_lsp import LanguageClient

from torchlint import __version__
from torchlint.config.load import CONFIG_FILES
from torchlint.lint.noqa import add_noqa
from torchlint.reporters import rule_url

from .conftest import FIXTURES, LOADER, ROOT, run_cli
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
    resolve,
    uri,
    vscode,
)

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.slow,
]  # the language server over stdio, with a real client

UNSAFE = '[tool.torchlint]\nselect = ["ALL"]\nunsafe-fixes = true\npreview = true\n'
EVERY = UNSAFE + 'min-impact = "low"\n'  # low-impact findings shown too, with their fixes
PREVIEW = "[tool.torchlint]\npreview = true\n"  # the example's TL402/TL403 are preview rules
EXAMPLE = (ROOT / "examples" / "train_classifier.py").read_text()


@pytest_lsp.fixture(scope="module", config=config())
async def client(lsp_client: LanguageClient, tmp_path_factory):
    root = tmp_path_factory.mktemp("workspace")
    lsp_client.init = await lsp_client.initialize_session(  # type: ignore[attr-defined]
        types.InitializeParams(capabilities=vscode(), root_uri=uri(root))
    )
    yield
    await lsp_client.shutdown_session()


def cli_findings(text: str, cwd, name: str = "t.py") -> list[dict]:
    """What `torchlint check --output-format json` says of `text` as `name` in `cwd`."""
    result = run_cli(
        "check", "--output-format", "json", "--stdin-filename", name, "-", input=text, cwd=cwd
    )
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)


def spans(diagnostics: list[types.Diagnostic]) -> list[tuple]:
    return sorted(
        (
            d.code,
            d.range.start.line,
            d.range.start.character,
            d.range.end.line,
            d.range.end.character,
        )
        for d in diagnostics
        if d.code is not None
    )


def cli_spans(findings: list[dict]) -> list[tuple]:
    return sorted(
        (
            f["code"],
            f["location"]["row"] - 1,
            f["location"]["column"] - 1,
            f["end_location"]["row"] - 1,
            f["end_location"]["column"] - 1,
        )
        for f in findings
    )


def cli_fixed(text: str, cwd, *args: str, name: str = "t.py") -> str:
    """What `torchlint fix` makes of `text` (read from stdin)."""
    result = run_cli("fix", "--stdin-filename", name, *args, "-", input=text, cwd=cwd)
    assert result.returncode in (0, 1), result.stderr
    return result.stdout


def with_json_edits(text: str, finding: dict) -> str:
    """`text` with the whole-line edits of a finding's fix, as the JSON output gives them."""
    lines = text.splitlines(keepends=True)
    for edit in sorted(finding["fix"]["edits"], key=lambda e: e["location"]["row"], reverse=True):
        lines[edit["location"]["row"] - 1 : edit["end_location"]["row"] - 1] = [edit["content"]]
    return "".join(lines)


async def apply_action(client, action: types.CodeAction, texts: dict[str, str]) -> dict[str, str]:
    resolved = await resolve(client, action)
    assert resolved.edit is not None, action.title
    edits = edits_by_uri(resolved.edit)
    assert set(edits) <= set(texts)
    return {u: apply_edits(t, edits.get(u, [])) for u, t in texts.items()}


async def test_initialize_advertises_what_the_server_does(client):
    result = client.init
    assert result.server_info.name == "torchlint"
    assert result.server_info.version == __version__
    caps = result.capabilities
    assert caps.text_document_sync.open_close and caps.text_document_sync.save
    assert caps.text_document_sync.change == types.TextDocumentSyncKind.Full
    assert set(caps.code_action_provider.code_action_kinds) == {
        "quickfix",
        "source.fixAll.torchlint",
    }
    assert caps.code_action_provider.resolve_provider
    (selector,) = caps.notebook_document_sync.notebook_selector
    assert selector.notebook == "jupyter-notebook"
    assert [c.language for c in selector.cells] == ["python"]
    await eventually(lambda: client.registrations)
    (registration,) = client.registrations
    assert registration.method == "workspace/didChangeWatchedFiles"
    globs = {w["globPattern"] for w in registration.register_options["watchers"]}
    assert globs == {f"**/{name}" for name in CONFIG_FILES} | {"**/*.py"}  # and the projects


async def test_diagnostics_follow_the_editor_text_not_the_disk(client, tmp_path):
    path = tmp_path / "train.py"
    path.write_text("print('what is on disk is never read')\n")
    doc = uri(path)
    before = mark(client)
    open_document(client, doc, LOADER)
    diagnostics = await published(client, doc, before, version=1)
    assert spans(diagnostics) == cli_spans(cli_findings(LOADER, tmp_path, "train.py"))
    (d,) = diagnostics
    assert (d.code, d.source, d.severity) == (
        "TL201",
        "torchlint",
        types.DiagnosticSeverity.Warning,
    )
    assert d.code_description.href == rule_url("TL201")
    assert d.data["name"] == "dataloader-sync-loading"
    assert d.data["fix"]["applicability"] == "unsafe"
    assert (d.range.start.line, d.range.start.character) == (2, 9)

    edited = LOADER.replace(", pin_memory=True", ", num_workers=2")  # workers, not pinned
    before = mark(client)
    change_document(client, doc, "x = 1\n", 2)
    change_document(client, doc, edited, 3)
    diagnostics = await published(client, doc, before, version=3)
    assert spans(diagnostics) == cli_spans(cli_findings(edited, tmp_path, "train.py"))
    assert {d.code for d in diagnostics} == {"TL202"}

    before = mark(client)
    client.text_document_did_save(
        types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(doc))
    )
    assert spans(await published(client, doc, before, version=3)) == spans(diagnostics)

    before = mark(client)
    close_document(client, doc)
    assert await published(client, doc, before) == []


async def test_edits_are_linted_as_the_whole_text_would_be(client, tmp_path):
    """The server parses an edited document again only where it changed: after each edit
    its diagnostics, and then a quick fix, are what the CLI makes of the whole text."""
    (tmp_path / "pyproject.toml").write_text(EVERY)  # TL202 (low: no workers yet) shown
    text = (ROOT / "examples" / "train_classifier.py").read_text(encoding="utf-8")
    doc = uri(tmp_path / "train.py")
    before = mark(client)
    open_document(client, doc, text)
    await published(client, doc, before, version=1)
    edits = [
        ("batch_size=8", "batch_size=256"),  # a finding goes
        ("(x.flatten(1))\n", "(x.flatten(1))\n        # indented: the method's\n"),
        ("running_loss += loss\n", "running_loss += (loss\n"),  # a syntax error
        ("running_loss += (loss\n", "running_loss += loss\n    # end of the loop\n"),
        ("batch_size=256", "batch_size=4"),  # ... and comes back, below that comment
    ]
    for version, (old, new) in enumerate(edits, start=2):
        assert old in text
        text = text.replace(old, new, 1)
        before = mark(client)
        change_document(client, doc, text, version)
        diagnostics = await published(client, doc, before, version=version)
        if version == 4:
            assert [d.message.split(":")[0] for d in diagnostics] == ["SyntaxError"]
            continue
        assert spans(diagnostics) == cli_spans(cli_findings(text, tmp_path, "train.py"))
    findings = cli_findings(text, tmp_path, "train.py")
    finding = next(f for f in findings if f["code"] == "TL202")
    line, column = finding["location"]["row"] - 1, finding["location"]["column"] - 1
    (action,) = [
        a
        for a in await actions(client, doc, line, only=["quickfix"])
        if a.title.startswith("TL202: ") and a.diagnostics[0].range.start.character == column
    ]
    fixed = await apply_action(client, action, {doc: text})
    assert fixed[doc] == with_json_edits(text, finding)
    close_document(client, doc)


async def test_a_syntax_error_is_one_diagnostic_at_its_position(client, tmp_path):
    text = "import torch\nmodel = torch.nn.Linear(8, (1\nprint(model)\n"
    doc = uri(tmp_path / "broken.py")
    before = mark(client)
    open_document(client, doc, text)
    (d,) = await published(client, doc, before, version=1)
    args = ("check", "--output-format", "json", "--stdin-filename", "broken.py", "-")
    cli = run_cli(*args, input=text, cwd=tmp_path)
    assert cli.returncode == 2
    [record] = json.loads(cli.stdout)  # the command line's TL000 record says the same
    line, column = record["location"]["row"], record["location"]["column"]
    assert (d.range.start.line, d.range.start.character) == (line - 1, column - 1)
    assert d.severity == types.DiagnosticSeverity.Error
    assert d.message == record["message"] and d.message.startswith("SyntaxError: ")
    close_document(client, doc)


async def test_each_quick_fix_makes_what_the_engine_makes(client, tmp_path):
    """For every rule with a fix: the quick fix of a finding in its fixture gives the text
    that finding's edits in `torchlint check --output-format json` give."""
    (tmp_path / "pyproject.toml").write_text(EVERY)
    files = {}
    for bad in sorted(FIXTURES.glob("TL*/bad.py")):
        files[bad.parent.name] = tmp_path / f"{bad.parent.name.lower()}.py"
        shutil.copy(bad, files[bad.parent.name])
    result = run_cli(
        "check", "--output-format", "json", "--no-cache", *map(str, files.values()), cwd=tmp_path
    )
    by_file: dict[str, list[dict]] = {}
    for finding in json.loads(result.stdout):
        by_file.setdefault(finding["filename"], []).append(finding)
    checked = 0
    for code, path in files.items():
        text, doc = path.read_text(), uri(path)
        before = mark(client)
        open_document(client, doc, text)
        diagnostics = await published(client, doc, before, version=1)
        findings = by_file.get(path.name, [])
        assert spans(diagnostics) == cli_spans(findings), code
        fixable = [f for f in findings if f["code"] == code and f["fix"] and f["fix"]["edits"]]
        if fixable:
            finding = fixable[0]
            line, column = finding["location"]["row"] - 1, finding["location"]["column"] - 1
            (action,) = [
                a
                for a in await actions(client, doc, line, only=["quickfix"])
                if a.title.startswith(f"{code}: ")
                and (a.diagnostics[0].range.start.line, a.diagnostics[0].range.start.character)
                == (line, column)
            ]
            assert action.title.endswith(f"({finding['fix']['applicability']} fix)")
            assert action.edit is None  # resolved when picked
            fixed = await apply_action(client, action, {doc: text})
            assert fixed[doc] == with_json_edits(text, finding), code
            checked += 1
        close_document(client, doc)
    assert checked >= 15


async def test_a_quick_fix_is_what_torchlint_fix_makes_of_one_finding(client, tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\nunsafe-fixes = true\n")
    doc = uri(tmp_path / "t.py")
    before = mark(client)
    open_document(client, doc, LOADER)
    assert [d.code for d in await published(client, doc, before, version=1)] == ["TL201"]
    (fix,) = [a for a in await actions(client, doc, 2) if a.title.startswith("TL201: ")]
    assert fix.kind == types.CodeActionKind.QuickFix and not fix.is_preferred
    fixed = await apply_action(client, fix, {doc: LOADER})
    assert fixed[doc] == cli_fixed(LOADER, tmp_path)
    close_document(client, doc)


async def test_unsafe_fixes_are_offered_only_when_turned_on(client, tmp_path):
    doc = uri(tmp_path / "t.py")
    before = mark(client)
    open_document(client, doc, LOADER)
    await published(client, doc, before, version=1)
    titles = [a.title for a in await actions(client, doc, 2)]
    assert titles == ["Ignore TL201 for this line"]  # the fix is unsafe; no safe fix to apply
    try:
        before = mark(client)
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"torchlint": {"unsafeFixes": True}})
        )
        await published(client, doc, before)
        titles = [a.title for a in await actions(client, doc, 2)]
        assert titles == [
            "TL201: Set `num_workers=NUM_WORKERS` (unsafe fix)",
            "Ignore TL201 for this line",
            "Fix all torchlint problems (unsafe fixes included)",
        ]
    finally:
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={}))
        close_document(client, doc)


async def test_ignore_for_this_line_adds_a_noqa_comment(client, tmp_path):
    doc = uri(tmp_path / "t.py")
    before = mark(client)
    open_document(client, doc, LOADER)
    await published(client, doc, before, version=1)
    (ignore,) = [a for a in await actions(client, doc, 2) if a.title.startswith("Ignore")]
    resolved = await resolve(client, ignore)
    (edit,) = edits_by_uri(resolved.edit)[doc]  # one insertion at the end of the line
    assert edit.new_text == "  # noqa: TL201"
    assert edit.range.start == edit.range.end == types.Position(2, len(LOADER.splitlines()[2]))
    fixed = apply_edits(LOADER, [edit])
    assert fixed == add_noqa(LOADER, {3: {"TL201"}})[0]
    before = mark(client)
    change_document(client, doc, fixed, 2)
    assert await published(client, doc, before, version=2) == []
    close_document(client, doc)


async def test_fix_all_is_torchlint_fix(client, tmp_path):
    (tmp_path / "pyproject.toml").write_text(PREVIEW)
    doc = uri(tmp_path / "train.py")
    before = mark(client)
    open_document(client, doc, EXAMPLE)
    await published(client, doc, before, version=1)
    (fix_all,) = await actions(client, doc, 0, only=["source.fixAll"])
    assert (fix_all.kind, fix_all.title) == (
        "source.fixAll.torchlint",
        "Fix all safe torchlint problems",
    )
    resolved = await resolve(client, fix_all)
    (change,) = resolved.edit.document_changes
    assert change.text_document.version == 1  # the client refuses it if the text moved on
    # minimal edits, not the whole document
    assert all(e.range.end.line - e.range.start.line < 5 for e in change.edits)
    fixed = apply_edits(EXAMPLE, list(change.edits))
    assert fixed == cli_fixed(EXAMPLE, tmp_path, name="train.py") != EXAMPLE
    assert await actions(client, doc, 0, only=["refactor"]) == []
    close_document(client, doc)


async def test_config_files_are_reloaded_when_they_change(client, tmp_path):
    config_file = tmp_path / "pyproject.toml"
    config_file.write_text('[tool.torchlint]\nignore = ["TL201"]\n')
    doc = uri(tmp_path / "pkg" / "t.py")
    (tmp_path / "pkg").mkdir()
    before = mark(client)
    open_document(client, doc, LOADER)
    assert await published(client, doc, before, version=1) == []

    config_file.write_text("[tool.torchlint]\nignore = []\n")
    before = mark(client)
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            [types.FileEvent(uri(config_file), types.FileChangeType.Changed)]
        )
    )
    assert [d.code for d in await published(client, doc, before)] == ["TL201"]

    # A client that watches nothing: the config is read again on the next lint.
    (tmp_path / "pkg" / "torchlint.toml").write_text('ignore = ["TL2"]\n')
    before = mark(client)
    change_document(client, doc, LOADER, 2)
    assert await published(client, doc, before, version=2) == []

    (tmp_path / "pkg" / "torchlint.toml").write_text("ignroe = []\n")
    before = mark(client)
    change_document(client, doc, LOADER, 3)
    (d,) = await published(client, doc, before, version=3)
    assert d.severity == types.DiagnosticSeverity.Error and "`ignroe`" in d.message

    # ... or on save, the text unchanged (a save of a text whose config did not change
    # publishes its diagnostics again: test_diagnostics_follow_the_editor_text_not_the_disk)
    (tmp_path / "pkg" / "torchlint.toml").write_text("ignore = []\n")
    before = mark(client)
    client.text_document_did_save(
        types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(doc))
    )
    assert [d.code for d in await published(client, doc, before, version=3)] == ["TL201"]
    close_document(client, doc)


async def test_a_file_the_config_excludes_gets_no_diagnostics(client, tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\nextend-exclude = ["generated"]\n')
    (tmp_path / "generated").mkdir()
    doc = uri(tmp_path / "generated" / "t.py")
    before = mark(client)
    open_document(client, doc, LOADER)
    assert await published(client, doc, before, version=1) == []
    assert await actions(client, doc, 2) == []
    close_document(client, doc)


async def test_editor_settings_select_and_ignore(client, tmp_path):
    doc = uri(tmp_path / "t.py")
    try:
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"torchlint": {"ignore": ["TL201"]}})
        )
        before = mark(client)
        open_document(client, doc, LOADER)
        assert await published(client, doc, before, version=1) == []

        shown = len(client.messages)
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"torchlint": {"ignroe": ["TL201"]}})
        )
        before = mark(client)
        change_document(client, doc, LOADER, 2)
        assert await published(client, doc, before, version=2) == []  # kept the last good
        (message,) = client.messages[shown:]
        assert message.type == types.MessageType.Error and "`ignroe`" in message.message

        before = mark(client)
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"select": ["TL2"], "ignore": []})
        )
        assert [d.code for d in await published(client, doc, before)] == ["TL201"]
    finally:
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={}))
        close_document(client, doc)


async def test_settings_are_pulled_from_a_client_that_holds_them(client, tmp_path):
    """A client that says "changed" without the settings (VS Code's generic clients) is
    asked for the "torchlint" section (`workspace/configuration`)."""
    doc = uri(tmp_path / "t.py")
    try:
        before = mark(client)
        open_document(client, doc, LOADER)
        assert [d.code for d in await published(client, doc, before, version=1)] == ["TL201"]
        client.set_configuration({"ignore": ["TL201"]}, section="torchlint")
        before = mark(client)
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(None))
        assert await published(client, doc, before, version=1) == []
        client.set_configuration({}, section="torchlint")
        before = mark(client)
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(None))
        assert [d.code for d in await published(client, doc, before, version=1)] == ["TL201"]
    finally:
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={}))
        close_document(client, doc)


def notebook_cells(tmp_path, sources: list[str], kinds: list[str] | None = None):
    """Cell documents of a notebook in `tmp_path`: (uri, language, text) each."""
    kinds = kinds or ["python"] * len(sources)
    base = uri(tmp_path / "nb.ipynb")
    return [
        (f"vscode-notebook-cell:{base[len('file://') :]}#C{i}", kind, text)
        for i, (kind, text) in enumerate(zip(kinds, sources, strict=True))
    ]


def open_notebook(client, tmp_path, cells) -> str:
    notebook = uri(tmp_path / "nb.ipynb")
    client.notebook_document_did_open(
        types.DidOpenNotebookDocumentParams(
            notebook_document=types.NotebookDocument(
                uri=notebook,
                notebook_type="jupyter-notebook",
                version=1,
                cells=[
                    types.NotebookCell(
                        kind=types.NotebookCellKind.Code
                        if language == "python"
                        else types.NotebookCellKind.Markup,
                        document=cell_uri,
                    )
                    for cell_uri, language, _ in cells
                ],
            ),
            cell_text_documents=[
                types.TextDocumentItem(cell_uri, language, 1, text)
                for cell_uri, language, text in cells
            ],
        )
    )
    return notebook


def cli_notebook(tmp_path, cells, *command: str) -> tuple[list[str], list[dict]]:
    """The notebook's cells after `torchlint <command>`, and its JSON findings."""
    path = tmp_path / "cli.ipynb"
    path.write_text(
        json.dumps(
            {
                "cells": [
                    {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                     "source": text}
                    if language == "python"
                    else {"cell_type": "markdown", "metadata": {}, "source": text}
                    for _, language, text in cells
                ],
                "metadata": {"language_info": {"name": "python"}},
                "nbformat": 4,
                "nbformat_minor": 5,
            }
        )
    )  # fmt: skip
    result = run_cli(*command, "--output-format", "json", "--no-cache", str(path), cwd=tmp_path)
    assert result.returncode in (0, 1), result.stderr
    sources = ["".join(c["source"]) for c in json.loads(path.read_text())["cells"]]
    return sources, json.loads(result.stdout)


async def test_notebook_cells(client, tmp_path):
    (tmp_path / "pyproject.toml").write_text(PREVIEW)
    split = EXAMPLE.index("def main()")
    sources = ["# Training\n", EXAMPLE[:split], EXAMPLE[split:]]
    cells = notebook_cells(tmp_path, sources, ["markdown", "python", "python"])
    uris = [c[0] for c in cells]
    before = mark(client)
    notebook = open_notebook(client, tmp_path, cells)
    found = {u: await published(client, u, before, version=1) for u in uris[1:]}
    _, cli = cli_notebook(tmp_path, cells, "check")
    for i, cell_uri in enumerate(uris):
        expected = cli_spans([f for f in cli if f["cell"] == i + 1])
        assert spans(found.get(cell_uri, [])) == expected, i
    assert found[uris[2]]  # the training loop's findings, in the cell's own positions
    assert uris[0] not in {p.uri for p in client.published[before:]}  # markdown: not ours

    # fix all: every cell as `torchlint fix` leaves the notebook
    (fix_all,) = await actions(client, uris[2], 0, only=["source.fixAll.torchlint"])
    fixed = await apply_action(client, fix_all, {u: t for u, _, t in cells})
    expected, _ = cli_notebook(tmp_path, cells, "fix")
    assert [fixed[u] for u in uris] == expected != sources

    # one quick fix, in the cell its finding is in
    line = next(d.range.start.line for d in found[uris[2]] if d.code == "TL402")
    (fix,) = [a for a in await actions(client, uris[2], line) if a.title.startswith("TL402")]
    assert fix.is_preferred
    fixed = await apply_action(client, fix, {u: t for u, _, t in cells})
    assert "empty_cache" not in fixed[uris[2]] and fixed[uris[1]] == sources[1]

    # a cell that does not parse: an error on it, the other cells still analysed
    broken = f"{uris[0].rsplit('#', 1)[0]}#C9"
    before = mark(client)
    client.notebook_document_did_change(
        types.DidChangeNotebookDocumentParams(
            notebook_document=types.VersionedNotebookDocumentIdentifier(2, notebook),
            change=types.NotebookDocumentChangeEvent(
                cells=types.NotebookDocumentCellChanges(
                    structure=types.NotebookDocumentCellChangeStructure(
                        array=types.NotebookCellArrayChange(
                            start=3,
                            delete_count=0,
                            cells=[types.NotebookCell(types.NotebookCellKind.Code, broken)],
                        ),
                        did_open=[types.TextDocumentItem(broken, "python", 1, "x = (\n")],
                    )
                )
            ),
        )
    )
    (error,) = await published(client, broken, before)
    assert error.severity == types.DiagnosticSeverity.Error
    assert error.range.start.line == 0 and error.message.startswith("SyntaxError: ")
    assert spans(await published(client, uris[2], before)) == spans(found[uris[2]])

    before = mark(client)
    client.notebook_document_did_close(
        types.DidCloseNotebookDocumentParams(
            types.NotebookDocumentIdentifier(notebook),
            [types.TextDocumentIdentifier(u) for u in [*uris, broken]],
        )
    )
    for cell_uri in [*uris[1:], broken]:
        assert await published(client, cell_uri, before) == []


async def test_a_cancelled_request_is_answered_as_cancelled(client, tmp_path):
    """The code action waits for the lint of a large file; cancelled, it says so at
    once, the lint goes on, and the server answers what comes next."""
    (tmp_path / "pyproject.toml").write_text(PREVIEW)  # TL402 on each loop
    big = LOADER + "".join(
        f"\n\ndef train_{i}(ds):\n"
        f"    loader_{i} = DataLoader(ds, batch_size=8)\n"
        f"    for x in loader_{i}:\n"
        f"        model(x.cuda()).sum().backward()\n"
        f"        optimizer.step()\n"
        f"        torch.cuda.empty_cache()\n"
        for i in range(300)
    )
    doc = uri(tmp_path / "big.py")
    before = mark(client)
    open_document(client, doc, big)
    at = types.Position(2, 0)
    params = types.CodeActionParams(
        types.TextDocumentIdentifier(doc), types.Range(at, at), types.CodeActionContext([])
    )
    pending = asyncio.ensure_future(
        client.protocol.send_request_async(types.TEXT_DOCUMENT_CODE_ACTION, params, "cancel-me")
    )
    await asyncio.sleep(0)  # the request goes out
    client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id="cancel-me"))
    with pytest.raises(JsonRpcRequestCancelled):
        await pending
    assert len(await published(client, doc, before, version=1)) > 600
    assert "Ignore TL201 for this line" in [a.title for a in await actions(client, doc, 2)]
    close_document(client, doc)


async def test_low_impact_findings_follow_the_config(client, tmp_path):
    """Hidden by default, as on the command line; with `min-impact = "low"` published as
    information, the impact in the diagnostic's data."""
    source = (
        "import torch.nn as nn\n\n"
        "head = nn.Sequential(nn.Linear(64, 128), nn.BatchNorm1d(128))\n"
        "body = nn.Sequential(nn.Conv2d(3, 16, 3), nn.BatchNorm2d(16))\n"
    )
    config_file = tmp_path / "pyproject.toml"
    config_file.write_text('[tool.torchlint]\nselect = ["TL603"]\n')
    doc = uri(tmp_path / "net.py")
    before = mark(client)
    open_document(client, doc, source)
    (high,) = await published(client, doc, before, version=1)
    assert high.range.start.line == 3 and high.severity == types.DiagnosticSeverity.Warning
    config_file.write_text('[tool.torchlint]\nselect = ["TL603"]\nmin-impact = "low"\n')
    before = mark(client)
    change_document(client, doc, source, 2)
    found = await published(client, doc, before, version=2)
    by_line = {d.range.start.line: (d.severity, d.data["impact"]) for d in found}
    assert by_line == {
        2: (types.DiagnosticSeverity.Information, "low"),
        3: (types.DiagnosticSeverity.Warning, "high"),
    }
    close_document(client, doc)
