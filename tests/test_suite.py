"""How the suite itself runs: the README's test command is what CI runs, and it runs
every test; a test keeps its temporary files where pytest removes them."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from .conftest import ROOT


def test_the_readme_test_command_is_what_ci_runs_and_runs_everything():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    development = readme.split("## Development", 1)[1]
    command = re.findall(r"```bash\n(.+?)\n```", development, re.S)[0]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").rstrip("\n").splitlines()[-1]
    assert ci == command
    pytest_args = command.split("-m pytest", 1)[1].split()
    assert pytest_args == ["-n", "auto"]  # every tier: no -m, no -k, no path


def test_a_test_keeps_its_temporary_files_in_its_own_folder(tmp_path_factory):
    """verify's logs, multiprocessing's pymp-* folders: under pytest's base directory,
    which it removes after a passing run (tmp_path_retention_policy), never in /tmp."""
    base = tmp_path_factory.getbasetemp()
    assert Path(tempfile.gettempdir()).is_relative_to(base)
    assert Path(os.environ["TMPDIR"]) == Path(tempfile.gettempdir())
    folder = Path(tempfile.mkdtemp(prefix="torchlint-verify-"))
    assert folder.is_relative_to(base)
