"""Shared test helpers."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"


def run_cli(
    *args: str,
    cwd: Path | None = None,
    input: str | None = None,
    env: dict | None = None,
    timeout: float = 300,
):
    """Run the real `torchlint` command in a subprocess."""
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
    """`run_cli`, as user nobody when run by root (mark the test `unprivileged`)."""
    if os.geteuid() != 0:
        return run_cli(*args, cwd=cwd)
    drop = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    return subprocess.run(
        [*drop, sys.executable, "-m", "torchlint", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"},
        timeout=300,
    )


@pytest.fixture
def cli():
    return run_cli
