"""Latency of `torchlint server`: from an edit to its diagnostics, and code actions.

    pip install -e '.[server]'    # or .[dev]
    python benchmarks/server_latency.py [--edits 40] [--lines 2000]

Starts the real server over stdio, as an editor does, opens a generated training file
of `--lines` lines (models, datasets, schedules and, in one part of four, a training
loop and an evaluation: about one finding per 60 lines), saved in a project folder
beside a script that imports it (so the document is linted with what its project tells
it, as the server does in a workspace), waits for the project to settle (its summaries
computed in the background, the time printed), then, one after another, makes
`--edits` edits, as a user types them: each changes one batch size (8 <-> 64, which
changes what is reported), in one training function after another, from the top of the
file to the bottom. Times each from the `didChange` sent to the `publishDiagnostics` of
that version received (each edit made 100 ms after the diagnostics of the one before:
after a pause in typing, which the server lints at once) and, for comparison, the same
lints by the engine alone in this process: with an editor buffer and the cyclic
collector paused, as the server runs them (what the server adds is the difference), and
parsing the whole text each time (what the buffer saves). Then bursts of five
keystrokes 30 ms apart, each burst typing a batch size in one function (typing without
a pause: the server lints the first at once, waits out a pause after each later one),
timed from the last keystroke to its diagnostics. Then times
listing the code actions on a finding's line, resolving one quick fix, and resolving
"fix all". Prints p50 and p95 of each, the machine, its load and the date. The same
again for a worst case: 2,000 lines of training functions with six findings each
(benchmarks/scaling.py's file).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient
from pygls.uris import from_fs_path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scaling import training_functions

from torchlint.lint.incremental import Buffer
from torchlint.server.analysis import lint_python
from torchlint.server.lsp import _collect, _paused
from torchlint.server.settings import Configs, EditorSettings, setup

HEADER = '''"""A training script grown over the years: models, data, schedules, loops."""

import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset
'''

MODEL = '''

class Block{i}(nn.Module):
    """A residual block with a bottleneck."""

    def __init__(self, channels: int = 64, hidden: int = 128) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(channels)
        self.up = nn.Linear(channels, hidden)
        self.down = nn.Linear(hidden, channels)
        self.dropout = nn.Dropout(0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(x)
        h = F.gelu(self.up(h))
        h = self.dropout(self.down(h))
        return x + h


class Records{i}(Dataset):
    def __init__(self, size: int = 1024, width: int = 64) -> None:
        self.x = torch.randn(size, width)
        self.y = torch.randint(0, 10, (size,))

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, index: int):
        return self.x[index], self.y[index]


def cosine_lr_{i}(step: int, total: int, base: float = 0.1) -> float:
    """Cosine schedule with a linear warm-up."""
    warmup = max(1, total // 20)
    if step < warmup:
        return base * step / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return base * 0.5 * (1 + math.cos(math.pi * progress))
'''

TRAIN = """

def train_{i}(epochs: int = 1) -> nn.Module:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Sequential(Block{i}(), nn.Linear(64, 10)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loader = DataLoader(Records{i}(), batch_size=BATCH, shuffle=True)
    for epoch in range(epochs):
        total = 0.0
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss
        print(f"epoch {{epoch}}: {{total / len(loader):.3f}}")
    return model


def evaluate_{i}(model: nn.Module, loader: DataLoader) -> float:
    correct = 0
    for x, y in loader:
        correct += (model(x).argmax(1) == y).sum().item()
    return correct / len(loader.dataset)
"""

# The project's other file: a script that imports the training file (its `evaluate_0`
# given a model on the GPU), so that the training file's lints ask its project.
SCRIPT = """import torch
from torch.utils.data import DataLoader

from {module} import Records0, evaluate_0, train_0

if __name__ == "__main__":
    model = train_0().cuda()
    print(evaluate_0(model, DataLoader(Records0(), batch_size=256)))
"""
READ_S = 0.1  # between the diagnostics of an edit and the next edit (a user reads them)
KEYS, BURST_GAP_S = ("1", "12", "128", "1281", "128"), 0.03  # typing without a pause
SETTLED = "summaries read from the cache"  # the server's line once a project has settled

MAIN = """

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=1)
    train_0(parser.parse_args().epochs)
"""


def training_file(lines: int = 2000) -> str:
    """A training file of exactly `lines` lines (padded with a table of constants)."""
    parts, i = [HEADER], 0
    while True:
        part = MODEL.format(i=i) + (TRAIN.format(i=i) if i % 4 == 0 else "")
        if sum(p.count("\n") for p in parts) + part.count("\n") + MAIN.count("\n") > lines:
            break
        parts.append(part)
        i += 1
    text = "".join(parts) + MAIN
    pad = lines - text.count("\n")
    return text + "".join(f"LABEL_{k} = {k}\n" for k in range(pad))


def fill(text: str, sizes: list[str]) -> str:
    """`text` with its `BATCH` marks (the batch sizes) replaced by `sizes`."""
    parts = text.split("BATCH")
    return "".join(p + n for p, n in zip(parts, sizes, strict=False)) + parts[-1]


def versions(text: str, edits: int, bursts: int) -> tuple[list[str], list[list[str]]]:
    """The text after each edit (edit n flips the batch size of a training function n
    steps down the file, one after another, wrapping around: 64 <-> 8), then the texts
    of `bursts` bursts of keystrokes (each types a batch size, 128, in one function: a
    keystroke per text, as in `KEYS`)."""
    places = text.count("BATCH")
    sizes = ["64"] * places
    out = []
    for n in range(edits + 1):
        if n:
            where = (n - 1) * max(1, places // 7) % places
            sizes[where] = "8" if sizes[where] == "64" else "64"
        out.append(fill(text, sizes))
    typed = []
    for n in range(bursts):
        where = (3 * n + 1) % places
        burst = []
        for keys in KEYS:
            sizes[where] = keys
            burst.append(fill(text, sizes))
        typed.append(burst)
    return out, typed


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Bench:
    def __init__(self) -> None:
        self.client = LanguageClient("torchlint-bench", "1")
        self.waiting: dict[tuple[str, int], asyncio.Future[types.PublishDiagnosticsParams]] = {}

        self.settled: asyncio.Event | None = None

        @self.client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def published(params: types.PublishDiagnosticsParams) -> None:
            future = self.waiting.pop((params.uri, params.version or 0), None)
            if future is not None and not future.done():
                future.set_result(params)

        @self.client.feature(types.WINDOW_LOG_MESSAGE)
        def logged(params: types.LogMessageParams) -> None:
            if SETTLED in params.message and self.settled is not None:
                self.settled.set()

    def change(self, uri: str, version: int, text: str) -> None:
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                types.VersionedTextDocumentIdentifier(version, uri),
                [types.TextDocumentContentChangeWholeDocument(text)],
            )
        )

    def expect(self, uri: str, version: int) -> asyncio.Future[types.PublishDiagnosticsParams]:
        future = asyncio.get_running_loop().create_future()
        self.waiting[(uri, version)] = future
        return future


async def measure(label: str, text: str, edits: int, folder: Path) -> None:
    root = folder / label.split()[0]  # the project
    root.mkdir()
    (root / "pyproject.toml").write_text("")
    bench = Bench()
    bench.settled = asyncio.Event()
    client = bench.client
    await client.start_io(sys.executable, "-m", "torchlint", "server")
    capabilities = types.ClientCapabilities(
        text_document=types.TextDocumentClientCapabilities(
            code_action=types.CodeActionClientCapabilities(
                code_action_literal_support=types.ClientCodeActionLiteralOptions(
                    code_action_kind=types.ClientCodeActionKindOptions(
                        value_set=[types.CodeActionKind.QuickFix, types.CodeActionKind.Source]
                    )
                ),
                resolve_support=types.ClientCodeActionResolveOptions(properties=["edit"]),
                data_support=True,
            )
        ),
        workspace=types.WorkspaceClientCapabilities(
            workspace_edit=types.WorkspaceEditClientCapabilities(document_changes=True)
        ),
    )
    await client.initialize_async(
        types.InitializeParams(capabilities=capabilities, root_uri=from_fs_path(str(root)))
    )
    client.initialized(types.InitializedParams())
    path = root / f"{label.split()[0]}.py"
    uri = from_fs_path(str(path))
    rounds = max(3, edits // 4)  # of bursts, and of code actions
    texts, typed = versions(text, edits, rounds)
    path.write_text(texts[0])  # an editor opens a saved file
    if "evaluate_0" in text:
        (root / "run.py").write_text(SCRIPT.format(module=path.stem))
    opened = bench.expect(uri, 1)
    started = time.perf_counter()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "python", 1, texts[0]))
    )
    first = await opened
    await asyncio.wait_for(bench.settled.wait(), 600)
    settling = time.perf_counter() - started
    latencies: list[float] = []
    for n, new in enumerate(texts[1:]):
        version = n + 2
        await asyncio.sleep(READ_S)
        done = bench.expect(uri, version)
        started = time.perf_counter()
        bench.change(uri, version, new)
        result = await done
        latencies.append(time.perf_counter() - started)
    findings = len(result.diagnostics)
    bursts: list[float] = []
    version = len(texts)
    for burst in typed:
        await asyncio.sleep(READ_S)
        for k, new in enumerate(burst):
            version += 1
            if k == len(burst) - 1:
                done = bench.expect(uri, version)
                started = time.perf_counter()
            bench.change(uri, version, new)
            if k < len(burst) - 1:
                await asyncio.sleep(BURST_GAP_S)
        result = await done
        bursts.append(time.perf_counter() - started)
    chosen = setup(Configs(), EditorSettings(), path, root)
    assert chosen is not None
    engine: list[float] = []
    reparsed: list[float] = []
    buffer = Buffer()
    lint_python(texts[0], str(path), chosen, buffer)
    for new in texts[1:]:
        for times, parser in ((engine, buffer), (reparsed, None)):
            started = time.perf_counter()
            _paused(lint_python, new, str(path), chosen, parser)  # as the server runs it
            times.append(time.perf_counter() - started)
            _collect()
    line = await _fixable_line(client, uri, result.diagnostics)
    listing, quick, whole = [], [], []
    for _ in range(rounds if line is not None else 0):
        started = time.perf_counter()
        actions = await client.text_document_code_action_async(
            types.CodeActionParams(
                types.TextDocumentIdentifier(uri),
                types.Range(types.Position(line, 0), types.Position(line, 0)),
                types.CodeActionContext(diagnostics=[]),
            )
        )
        listing.append(time.perf_counter() - started)
        fix = next(a for a in actions or [] if "safe fix" in a.title)
        started = time.perf_counter()
        resolved = await client.code_action_resolve_async(fix)
        quick.append(time.perf_counter() - started)
        assert resolved.edit is not None
        everything = next(a for a in actions or [] if a.kind == "source.fixAll.torchlint")
        started = time.perf_counter()
        resolved = await client.code_action_resolve_async(everything)
        whole.append(time.perf_counter() - started)
        assert resolved.edit is not None
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    print(
        f"\n{label}: {text.count(chr(10))} lines, {len(first.diagnostics)} findings "
        f"at open, {findings} after the edits; its project settled {settling * 1000:.0f} "
        "ms after the open"
    )
    print("| step | runs | p50 ms | p95 ms |")
    print("|---|---|---|---|")
    for name, values in (
        ("edit -> diagnostics", latencies),
        ("the same lints, engine alone", engine),
        ("... parsing the whole text each time", reparsed),
        (
            f"last of {len(KEYS)} keystrokes {BURST_GAP_S * 1000:.0f} ms apart -> diagnostics",
            bursts,
        ),
        ("code actions listed (cursor on a finding)", listing),
        ("one quick fix resolved", quick),
        ("fix all resolved", whole),
    ):
        if not values:
            print(f"| {name} | 0 | no finding with a safe fix | |")
            continue
        p50, p95 = percentile(values, 0.5) * 1000, percentile(values, 0.95) * 1000
        print(f"| {name} | {len(values)} | {p50:.0f} | {p95:.0f} |")


async def _fixable_line(
    client: LanguageClient, uri: str, diagnostics: list[types.Diagnostic]
) -> int | None:
    """The line of the first finding with a safe quick fix, if any."""
    for line in sorted({d.range.start.line for d in diagnostics}):
        actions = await client.text_document_code_action_async(
            types.CodeActionParams(
                types.TextDocumentIdentifier(uri),
                types.Range(types.Position(line, 0), types.Position(line, 0)),
                types.CodeActionContext(diagnostics=[]),
            )
        )
        if any("safe fix" in a.title for a in actions or []):
            return line
    return None


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for row in Path("/proc/cpuinfo").read_text().splitlines():
            if row.startswith("model name"):
                cpu = row.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{cpu}, {cores} cores, Python {platform.python_version()}"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--edits", type=int, default=40)
    parser.add_argument("--lines", type=int, default=2000)
    args = parser.parse_args()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{datetime.date.today()}, {machine()}, load average {load}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        await measure("training file", training_file(args.lines), args.edits, folder)
        heavy = training_functions(args.lines // 14).replace("batch_size=8", "batch_size=BATCH")
        await measure("worst case (six findings per function)", heavy, args.edits, folder)


if __name__ == "__main__":
    asyncio.run(main())
