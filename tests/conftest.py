"""Shared test helpers."""

from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType

import pytest

# Torch in the scripts the tests run uses one thread: with a test per core (xdist), more
# only oversubscribe the cores (a CPU step then takes 40 times as long).
os.environ.setdefault("OMP_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
# A GPU training script with one finding under the default rules: TL201 on its loader
# (line 3, column 10), with an unsafe fix. Most tests of the machinery use it.
LOADER = (
    "import torch\n"
    "from torch.utils.data import DataLoader\n"
    "loader = DataLoader(ds, batch_size=256, pin_memory=True)\n"
    "model = torch.nn.Linear(8, 1).cuda()\n"
    "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    'if __name__ == "__main__":\n'
    "    for x in loader:\n"
    "        model(x.cuda(non_blocking=True)).sum().backward()\n"
    "        optimizer.step()\n"
)


def plan_of(config, codes=None, settings=None, unsafe=False):
    """A run plan of `config` with nothing on top: its selected rules (or `codes`), its
    settings (or `settings`), safe fixes only (or `unsafe`)."""
    from torchlint.config.plan import RunPlan

    return RunPlan(
        config=config,
        codes=tuple(config.selected_codes()) if codes is None else tuple(codes),
        settings=config.settings() if settings is None else settings,
        unfixable=frozenset(),
        unsafe=unsafe,
        low_impact=False,
        preview_left_out=(),
    )


def selection(code: str, text: str) -> list[str]:
    """The rules a fixture or docstring example of rule `code` runs with: that rule; for
    TL904, which judges the noqa comments of the rules selected, also the built-in rules
    whose codes the text names."""
    from torchlint.lint.registry import builtin_rules
    from torchlint.results import UNUSED_NOQA

    if code != UNUSED_NOQA:
        return [code]
    return sorted({code, *(set(re.findall(r"\bTL\d{3}\b", text)) & set(builtin_rules()))})


def run_cli(
    *args: str,
    cwd: Path | None = None,
    input: str | None = None,
    env: dict | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """The `torchlint` command, in this process (typer's test runner): what a test of
    options, reports and exit codes needs, without an interpreter's start-up each time.
    It forks no worker processes from the test's (TORCHLINT_WORKERS=1); `run_cli_process`
    runs the real command, for what only a process shows (`timeout` is its)."""
    from typer.testing import CliRunner

    from torchlint.cli import app

    settings = {"NO_COLOR": "1", "COLUMNS": "80", "TORCHLINT_WORKERS": "1"}  # as in CI
    runner = CliRunner(env={**settings, **(env or {})})
    previous = os.getcwd()
    os.chdir(cwd or previous)
    try:
        result = runner.invoke(app, list(args), input=input, catch_exceptions=False)
    finally:
        os.chdir(previous)
    return subprocess.CompletedProcess(
        ["torchlint", *args], result.exit_code, result.stdout, result.stderr
    )


def run_cli_process(
    *args: str,
    cwd: Path | None = None,
    input: str | None = None,
    env: dict | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """Run the real `torchlint` command (`python -m torchlint`) in a subprocess."""
    full_env = {**os.environ, "NO_COLOR": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "torchlint", *args],
        cwd=cwd,
        input=input,
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
    )


# Root reads and writes through any permission: such tests drop privileges for the run.
unprivileged = pytest.mark.skipif(
    os.geteuid() == 0 and shutil.which("setpriv") is None, reason="needs non-root or setpriv"
)


def run_cli_unprivileged(*args: str, cwd: Path):
    """`run_cli_process`, as user nobody when run by root (mark the test `unprivileged`)."""
    if os.geteuid() != 0:
        return run_cli_process(*args, cwd=cwd)
    drop = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    return subprocess.run(
        [*drop, sys.executable, "-m", "torchlint", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"},
        timeout=300,
    )


def needs_the_profiler_matcher() -> None:
    """Skip, with the reason, where torch's profiler lacks the private pattern matcher
    `--profile` reads and torch is newer than the releases it is checked on (2.14 dropped
    it); on a checked release its absence is a failure, not a skip."""
    torch = pytest.importorskip("torch")
    from torchlint.verify import matcher

    problem = matcher.problem()
    if problem is not None and not matcher.checked_on(torch.__version__):
        pytest.skip(f"--profile is checked on torch {matcher.checked_range()}: {problem}")


def benchmark(name: str) -> ModuleType:
    """Import benchmarks/NAME.py (a folder of scripts, not a package)."""
    folder = str(ROOT / "benchmarks")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module(name)


@pytest.fixture(autouse=True)
def _own_temp_dir(tmp_path_factory, monkeypatch):
    """What a test leaves in the temporary directory (verify's torchlint-verify-* logs,
    the pymp-* and torchelastic_* folders of the processes it starts) goes to a folder
    of its own under pytest's, which pytest removes (tmp_path_retention_policy)."""
    folder = tmp_path_factory.mktemp("tmp")
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
