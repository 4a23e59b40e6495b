"""Real code, end to end: lint and `fix --unsafe-fixes` a sample of the installed torch
package's own sources (present wherever the tests run), with this repository's examples
and rule fixtures beside them (torch's library code is rarely a training script, so they
are where the fixes get exercised), through the real command.

No crash; every fixed file still parses and compiles; a second fix changes nothing;
files without findings are byte-identical. The sample is deterministic: the files
where rules have something to find (DataLoaders, device moves, AMP, checkpoints...)
first, then a spread of the rest, up to TORCHLINT_CORPUS_KB of source (default 2500,
about 30 s on two cores; 10000 for a wider sample). TORCHLINT_CORPUS=<dir> lints that
tree instead (the benchmark's downloaded corpus, say).
"""

from __future__ import annotations

import os
import re
import shutil
import warnings
from pathlib import Path

import libcst as cst
import pytest

from .conftest import FIXTURES, ROOT, run_cli_process

pytestmark = pytest.mark.slow  # the real command over a sample of torch's sources

INTERESTING = (
    "DataLoader",
    "torch.load(",
    ".cuda(",
    "cuda.amp",
    ".backward(",
    "empty_cache",
    "zero_grad",
    "DistributedDataParallel",
)
BUDGET = int(os.environ.get("TORCHLINT_CORPUS_KB", "2500")) * 1024
MAX_FILE = 200 * 1024  # the 50k-line case is tests/test_robustness.py's
FINDING = re.compile(r"^(?P<path>.+?):\d+:\d+: TL\d+ ", re.M)


def _source_root() -> Path:
    chosen = os.environ.get("TORCHLINT_CORPUS")
    if chosen:
        return Path(chosen)
    torch = pytest.importorskip("torch")
    return Path(torch.__file__).parent.parent


def _sample(root: Path) -> list[Path]:
    base = root / "torch" if (root / "torch" / "__init__.py").exists() else root
    files = sorted(p for p in base.rglob("*.py") if p.stat().st_size <= MAX_FILE)
    texts = {p: p.read_text(encoding="utf-8", errors="replace") for p in files}
    interesting = [p for p in files if any(t in texts[p] for t in INTERESTING)]
    rest = [p for p in files if p not in set(interesting)]
    chosen: list[Path] = []
    size = 0
    # The interesting files, then every 6th of the rest, within the budget.
    for p in interesting + rest[::6]:
        if size + p.stat().st_size > BUDGET:
            continue
        chosen.append(p)
        size += p.stat().st_size
    return chosen


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    root = _source_root()
    target = tmp_path_factory.mktemp("corpus")
    for path in _sample(root):
        dest = target / path.relative_to(root)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest)
    ours = [*ROOT.joinpath("examples").rglob("*.py"), *FIXTURES.glob("TL*/bad*.py")]
    for path in ours:
        if not path.name.endswith(".fixed.py"):
            dest = target / "torchlint-examples" / path.relative_to(ROOT)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dest)
    return target


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.py"))}


def _clean(result) -> str:
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert "internal error" not in result.stderr, result.stderr[-3000:]
    assert result.returncode in (0, 1), result.stderr[-3000:]
    return result.stdout


def test_lint_and_fix_real_code(corpus):
    before = _snapshot(corpus)
    assert len(before) > 50
    check = _clean(
        run_cli_process("check", "--no-cache", "--output-format", "concise", ".", cwd=corpus)
    )
    with_findings = {m.group("path") for m in FINDING.finditer(check)}
    assert with_findings, "the sample should exercise some rules"

    _clean(run_cli_process("fix", "--unsafe-fixes", "--no-cache", "-q", ".", cwd=corpus))
    after = _snapshot(corpus)
    assert after.keys() == before.keys()
    changed = [name for name in before if after[name] != before[name]]
    assert changed, "the sample should exercise some fixes"
    for name in changed:
        assert name in with_findings, f"{name} had no findings but was changed"
        text = after[name].decode("utf-8")
        cst.parse_module(text)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, name, "exec", dont_inherit=True)

    _clean(run_cli_process("fix", "--unsafe-fixes", "--no-cache", "-q", ".", cwd=corpus))
    assert _snapshot(corpus) == after, "a second fix changed something"
