"""`torchlint server` in a project, driven over stdio by a real client (VS Code's
capabilities), as an editor drives it.

A document of a workspace folder is linted with what the rest of its project tells it,
as `torchlint check` lints that file; a file saved (or changed on disk) changes what the
open documents are told, and those told otherwise are linted again; unsaved edits
change the buffer's own diagnostics only; summaries come from the project's cache on
the next start. The server logs a line each time a project has settled (its summaries
at a fixed point, the open documents told otherwise linted again): tests wait for it.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from torchlint.run.cache import location

from .conftest import FIXTURES, run_cli
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
from .test_project import MARK
from .test_server import cli_spans, spans

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.slow,
]  # the language server over stdio, with a real client

MODELS = """\
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 1024, 3, padding=1), nn.ReLU())
        self.head = nn.Linear(1024, 1024 * classes)  # 10M parameters: not a toy (TL606)

    def forward(self, x):
        return self.head(self.features(x).mean((2, 3)))
"""
ENGINE = """\
import torch


def train(model, loader, device, optimizer):
    model.train()
    for images, labels in loader:
        images, labels = images.to(device), labels.to(device)
        loss = torch.nn.functional.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"loss {loss.item():.3f}")
"""
TRAIN = """\
import torch

from engine import train
from models import Net


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = Net().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(range(10), batch_size=64)
    train(model, loader, device, optimizer)


if __name__ == "__main__":
    main()
"""
CPU = TRAIN.replace('"cuda" if torch.cuda.is_available() else "cpu"', '"cpu"')
# (code, 0-based line) of findings that need another file of the project:
SYNC = ("TL401", 11)  # engine.py's per-step `.item()`: train.py puts the model on a GPU
PINNED = ("TL202", 10)  # train.py's loader: its batches go to the GPU in engine.py
COMPILED = ("TL606", 8)  # train.py's model: a network (models.py) trained on a GPU (engine.py)
PYPROJECT = '[tool.torchlint]\npreview = true\nextend-select = ["TL606"]\n'  # a preview rule
LOW = '[tool.torchlint]\nmin-impact = "low"\n'
SETTLED = re.compile(
    r"project (?P<root>.+) \(\d+ files\): (?P<cached>\d+) summaries read from the cache, "
    r"(?P<computed>\d+) computed"
)


@pytest_lsp.fixture(scope="module", config=config())
async def client(lsp_client: LanguageClient, tmp_path_factory):
    folder = tmp_path_factory.mktemp("folder")
    lsp_client.folder = folder  # type: ignore[attr-defined]
    await lsp_client.initialize_session(
        types.InitializeParams(capabilities=vscode(), root_uri=uri(folder))
    )
    yield
    await lsp_client.shutdown_session()


FILES = {"models.py": MODELS, "engine.py": ENGINE, "train.py": TRAIN}


def _project(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True)
    (root / "pyproject.toml").write_text(PYPROJECT)
    for name, text in files.items():
        (root / name).write_text(text)
    return root


@pytest.fixture
def project(client, request) -> Path:
    """models.py, engine.py and train.py (on CUDA), a project of the workspace folder."""
    folder: Path = client.folder
    return _project(folder / request.node.name, FILES)


async def settled(client: LanguageClient, root: Path, after: int) -> re.Match[str]:
    """The line the server logs once the project at `root` has settled, after `after`
    log messages."""

    def found() -> re.Match[str] | None:
        for message in client.log_messages[after:]:
            m = SETTLED.search(message.message)
            if m and Path(m["root"]) == root:
                return m
        return None

    await eventually(found)
    m = found()
    assert m is not None
    return m


def logged(client: LanguageClient) -> int:
    return len(client.log_messages)


def cli(root: Path, name: str) -> list[tuple]:
    """What `torchlint check` says of one file of the project, run from its root."""
    result = run_cli("check", "--no-cache", "--output-format", "json", name, cwd=root)
    assert result.returncode in (0, 1), result.stderr
    return cli_spans(json.loads(result.stdout))


def alone(text: str, name: str, cwd: Path) -> list[tuple]:
    """What `torchlint check` says of `text` on its own (standard input)."""
    result = run_cli(
        "check", "--no-cache", "--output-format", "json", "--stdin-filename", name, "-",
        input=text, cwd=cwd,
    )  # fmt: skip
    assert result.returncode in (0, 1), result.stderr
    return cli_spans(json.loads(result.stdout))


def codes(diagnostics: list[types.Diagnostic]) -> set[tuple]:
    return {(d.code, d.range.start.line) for d in diagnostics}


def save(client: LanguageClient, path: Path, text: str) -> None:
    """What an editor does on save: the file written, then `didSave`."""
    path.write_text(text)
    client.text_document_did_save(
        types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(uri(path)))
    )


def watched(client: LanguageClient, path: Path, change: types.FileChangeType) -> None:
    """What an editor watching the files says of one changed on disk (a checkout)."""
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams([types.FileEvent(uri(path), change)])
    )


def close_all(client: LanguageClient, *uris: str) -> None:
    for doc in uris:
        close_document(client, doc)


async def test_a_document_is_told_what_its_project_says(client, project):
    """train.py opened alone in the editor: what it is told by models.py (Net is a
    network) and engine.py (the loop that trains it on the GPU it is given) makes its
    findings those of `torchlint check train.py` from the root; on its own it has none.
    engine.py then opened is told train.py's GPU (its per-step sync)."""
    assert alone(TRAIN, "train.py", project) == []
    logs = logged(client)
    train, engine = uri(project / "train.py"), uri(project / "engine.py")
    open_document(client, train, TRAIN)
    await settled(client, project, logs)
    assert {PINNED, COMPILED} <= codes(client.diagnostics[train])
    assert spans(client.diagnostics[train]) == cli(project, "train.py")
    (pinned,) = [d for d in client.diagnostics[train] if d.code == "TL202"]
    assert "in `train` in engine.py" in pinned.message

    before = mark(client)
    open_document(client, engine, ENGINE)
    assert SYNC in codes(await published(client, engine, before))
    assert spans(client.diagnostics[engine]) == cli(project, "engine.py")
    close_all(client, train, engine)


async def test_unsaved_edits_tell_the_project_nothing_until_saved(client, project):
    """engine.py's `train` renamed in its buffer: train.py is told nothing of it (a lint
    of train.py after the edit finds what it found before), while engine.py's own
    diagnostics follow its buffer. Once saved, train.py is linted again without being
    touched: nothing it imports trains its model or its loader's batches any more."""
    engine, train = uri(project / "engine.py"), uri(project / "train.py")
    logs = logged(client)
    open_document(client, train, TRAIN)
    open_document(client, engine, ENGINE)
    await settled(client, project, logs)
    told = spans(client.diagnostics[train])
    assert {PINNED, COMPILED} <= codes(client.diagnostics[train])

    before = mark(client)
    renamed = ENGINE.replace("def train(", "def fit(")
    change_document(client, engine, renamed, 2)
    await published(client, engine, before, 2)
    change_document(client, train, TRAIN, 2)  # linted after engine.py's edit
    assert spans(await published(client, train, before, 2)) == told

    before = mark(client)
    save(client, project / "engine.py", renamed)
    assert codes(await published(client, train, before, 2)) == set()
    assert cli(project, "train.py") == []
    close_all(client, engine, train)


async def test_a_save_elsewhere_refreshes_an_open_document(client, project):
    """train.py moved to the CPU: engine.py's per-step sync no longer costs a GPU. An
    unsaved edit changes train.py's own diagnostics only (its loader pinned); once saved,
    engine.py's finding goes without engine.py being touched; a change on disk that the
    editor watches (a checkout) brings it back."""
    engine, train = uri(project / "engine.py"), uri(project / "train.py")
    logs = logged(client)
    open_document(client, engine, ENGINE)
    open_document(client, train, TRAIN)
    await settled(client, project, logs)
    assert SYNC in codes(client.diagnostics[engine])

    before = mark(client)
    edited = CPU.replace("batch_size=64", "batch_size=64, pin_memory=True")
    change_document(client, train, edited, 2)
    assert PINNED not in codes(await published(client, train, before, 2))
    change_document(client, engine, ENGINE, 2)  # linted after train.py's edit
    assert SYNC in codes(await published(client, engine, before, 2))

    before = mark(client)
    save(client, project / "train.py", edited)
    assert SYNC not in codes(await published(client, engine, before, 2))
    assert spans(client.diagnostics[engine]) == cli(project, "engine.py")

    before = mark(client)
    (project / "train.py").write_text(TRAIN)
    watched(client, project / "train.py", types.FileChangeType.Changed)
    assert SYNC in codes(await published(client, engine, before, 2))
    close_all(client, engine, train)


async def test_a_file_created_joins_its_project(client, project):
    """With train.py gone, nothing shows engine.py's device (its sync is reported, as
    where no caller is visible); a train.py created on the CPU silences it."""
    (project / "train.py").unlink()
    engine = uri(project / "engine.py")
    logs = logged(client)
    open_document(client, engine, ENGINE)
    await settled(client, project, logs)
    assert SYNC in codes(client.diagnostics[engine])
    before = mark(client)
    (project / "train.py").write_text(CPU)
    watched(client, project / "train.py", types.FileChangeType.Created)
    assert SYNC not in codes(await published(client, engine, before))
    close_document(client, engine)


async def test_a_file_that_cannot_be_analysed_leaves_the_rest(client, project):
    """engine.py does not parse on disk: train.py is linted with what the rest tells it
    (models.py), the project settles, and the log says nothing of a traceback."""
    (project / "engine.py").write_text(ENGINE.replace("def train(", "def train(("))
    train = uri(project / "train.py")
    logs = logged(client)
    open_document(client, train, TRAIN)
    await settled(client, project, logs)
    assert spans(client.diagnostics[train]) == cli(project, "train.py")
    assert not [m for m in client.log_messages[logs:] if "Traceback" in m.message]
    close_document(client, train)


async def test_a_file_outside_every_folder_is_analysed_alone(client, tmp_path):
    """As `torchlint check` of its text alone (standard input); an untitled buffer too.
    (Its project's summaries are in its cache: a lint told them would show them at once.)"""
    root = _project(tmp_path / "elsewhere", FILES)
    assert alone(TRAIN, "train.py", tmp_path) == []  # the GPU in engine.py is not seen
    assert run_cli("check", ".", cwd=root).returncode == 1  # (as its project shows)
    assert list(location(root).glob("project-v*/*"))
    for doc in (uri(root / "train.py"), "untitled:Untitled-1"):
        before = mark(client)
        open_document(client, doc, TRAIN)
        assert await published(client, doc, before, 1) == []
        close_document(client, doc)


@pytest.mark.parametrize(
    "shape", sorted(p for p in (FIXTURES / "project").iterdir() if p.is_dir()), ids=lambda p: p.name
)
async def test_every_project_shape_as_the_command_line_checks_it(client, shape: Path):
    """Every file of each fixtures/project shape, open at once: its diagnostics are
    the findings marked in it (those `torchlint check` finds file by file)."""
    root = client.folder / f"shape-{shape.name}"
    shutil.copytree(shape, root)
    config = root / "pyproject.toml"  # low-impact findings shown: the marks hold them too
    config.write_text(config.read_text().replace("[tool.torchlint]\n", LOW, 1))
    files = sorted(root.rglob("*.py"))
    logs = logged(client)
    for path in files:
        open_document(client, uri(path), path.read_text())
    await settled(client, root, logs)
    for path in files:
        expected = set()
        for number, line in enumerate(path.read_text().splitlines()):
            for m in MARK.finditer(line):
                expected |= {(c.strip(), number) for c in m["codes"].split(",")}
        await eventually(lambda p=path: uri(p) in client.diagnostics)
        assert codes(client.diagnostics[uri(path)]) == expected, path.relative_to(root)
    for path in files:
        close_document(client, uri(path))


async def _session(folder: Path, *args: str) -> tuple[LanguageClient, re.Match[str]]:
    """A server started on `folder`, engine.py opened: the client, and the line the
    server logs once the project has settled."""
    started = await config(args=args).start()
    assert isinstance(started, LanguageClient)
    await started.initialize_session(
        types.InitializeParams(capabilities=vscode(), root_uri=uri(folder))
    )
    open_document(started, uri(folder / "engine.py"), ENGINE)
    return started, await settled(started, folder, 0)


async def test_summaries_come_from_the_cache_on_the_next_start(tmp_path):
    """`--no-cache` neither writes the project's summaries nor reads them; without it,
    the next start reads them all and computes none."""
    root = _project(tmp_path / "folder", FILES)
    store = location(root)
    runs = []
    for n, args in enumerate((("--no-cache",), (), (), ("--no-cache",))):
        started, line = await _session(root, *args)
        runs.append((int(line["cached"]), int(line["computed"])))
        assert SYNC in codes(started.diagnostics[uri(root / "engine.py")])
        await asyncio.wait_for(started.shutdown_session(), TIMEOUT)
        assert store.exists() == (n > 0), n  # written by the first session with a cache
    assert list(store.glob("project-v*/*"))
    (uncached, computed), (cold, again), (warm, none), (unread, recomputed) = runs
    assert uncached == 0 and computed >= len(FILES)  # each file, some again in a round
    assert cold == 0 and again == computed
    assert warm == len(FILES) and none == 0  # each read from the cache, nothing computed
    assert unread == 0 and recomputed == computed
