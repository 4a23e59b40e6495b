"""Start-up stays lean: what a pre-commit hook pays on every commit."""

from __future__ import annotations

import subprocess
import sys

import pytest

from .conftest import ROOT

PROBE = """
import sys
from torchlint.cli import main
sys.argv = ["torchlint", *{args!r}]
try:
    main()
except SystemExit:
    pass
print("HEAVY:" + ",".join(sorted(m for m in {heavy!r} if m in sys.modules)))
"""


def _imported(*args: str, heavy=("libcst", "torch", "rich", "numpy"), cwd=None) -> str:
    code = PROBE.format(args=list(args), heavy=list(heavy))
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd or ROOT, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1].removeprefix("HEAVY:")


def test_version_imports_nothing_heavy():
    assert _imported("--version") == ""


@pytest.mark.slow
def test_check_never_imports_torch_or_rich(tmp_path):
    (tmp_path / "t.py").write_text(
        "import torch\nfrom torch.utils.data import DataLoader\nloader = DataLoader(ds)\n"
    )
    assert _imported("check", "--no-cache", "t.py", cwd=tmp_path) == "libcst"
