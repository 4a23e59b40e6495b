"""The README's Install section, run as written (issue #44): from a clone, and from the
git URL at a commit, in a fresh virtual environment with dependencies from the index.
The clone is of this checkout's committed HEAD (uncommitted changes are not seen)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT

pytestmark = pytest.mark.slow  # a virtual environment and pip

URL = "https://github.com/torchlint/torchlint"


def install_lines() -> list[str]:
    """The commands of the README's first code block under "## Install"."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Install\n", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None, "no bash block under ## Install"
    lines = [line.split("  #")[0].strip() for line in block.group(1).splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def run(command: list[str], cwd: Path) -> str:
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "GIT_CONFIG_COUNT": "1"}
    env |= {"GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": "*"}
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    assert result.returncode == 0, f"{command}:\n{result.stdout[-2000:]}{result.stderr[-3000:]}"
    return result.stdout


def test_the_readme_install_commands_work(tmp_path):
    lines = install_lines()
    clone, base = lines[0], lines[1]
    assert clone == f"git clone {URL}" and base == "pip install ./torchlint", lines
    git_url = next(line for line in lines if "git+" in line)
    head = run(["git", "rev-parse", "HEAD"], ROOT).strip()
    run(["git", "clone", "-q", str(ROOT), "torchlint"], tmp_path)  # the README's clone
    run([sys.executable, "-m", "venv", "venv"], tmp_path)
    bin_ = tmp_path / "venv" / ("Scripts" if os.name == "nt" else "bin")
    pip = [str(bin_ / "python"), "-m", "pip", "install", "-q"]
    run([*pip, "./torchlint"], tmp_path)
    out = run([str(bin_ / "torchlint"), "rules"], tmp_path)
    assert "TL201" in out
    # The git URL at a commit, as written, pointing at this checkout: the same package.
    spec = git_url.split("pip install ", 1)[1].strip('"')
    spec = spec.replace(f"git+{URL}@COMMIT", f"git+file://{ROOT}@{head}")
    run([*pip, "--force-reinstall", "--no-deps", spec], tmp_path)
    version = run([str(bin_ / "torchlint"), "--version"], tmp_path)
    assert version.strip(), version
