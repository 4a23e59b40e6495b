"""docs/extending.md runs: every code block is a file of a temporary project (`<!-- file:
PATH -->`), a command whose output it shows (`<!-- run -->`, run through the real CLI as
a subprocess), or the editor's settings (`<!-- editor settings -->`); the plugin package
it shows is installed into a virtual environment and found through its entry point."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from torchlint.server.settings import EditorSettings

from .conftest import ROOT

DOC = ROOT / "docs" / "extending.md"
BLOCK = re.compile(r"(?:<!-- (?P<marker>[^>]*) -->\n)?```(?P<lang>\w*)\n(?P<body>.*?)```\n", re.S)
PLUGIN = "plugin/"
KNOWLEDGE = "project knowledge: tests/test_knowledge.py"


def blocks() -> list[tuple[str, str]]:
    """(marker, body) of each code block of the page."""
    return [(m["marker"] or "", m["body"]) for m in BLOCK.finditer(DOC.read_text())]


def project(tmp_path: Path, plugin: bool = False) -> Path:
    """The page's files written under `tmp_path` (the plugin's under plugin/ only if asked)."""
    for marker, body in blocks():
        if marker.startswith("file: "):
            path = marker.removeprefix("file: ")
            if plugin or not path.startswith(PLUGIN):
                (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
                (tmp_path / path).write_text(body)
    return tmp_path


def env() -> dict[str, str]:
    """This checkout's torchlint first, whatever the interpreter has installed."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "NO_COLOR": "1", "TORCHLINT_WORKERS": "1"}


def run(python: str, command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A command of the page: `torchlint ...` or `python ...`, with `python`."""
    program, *args = shlex.split(command)
    argv = [python, "-m", "torchlint", *args] if program == "torchlint" else [python, *args]
    return subprocess.run(argv, cwd=cwd, env=env(), capture_output=True, text=True, timeout=300)


def test_every_block_is_run():
    markers = [marker for marker, _ in blocks()]
    assert len(markers) >= 10
    assert all(
        m.startswith("file: ") or m in ("run", "editor settings") or m == KNOWLEDGE for m in markers
    ), markers
    assert markers.count(KNOWLEDGE) == 2  # read by the real config in tests/test_knowledge.py


def test_the_commands_print_what_the_page_shows(tmp_path):
    root = project(tmp_path)
    shown = [body for marker, body in blocks() if marker == "run"]
    assert len(shown) >= 3
    for body in shown:
        command, *expected = body.splitlines()
        result = run(sys.executable, command.removeprefix("$ "), root)
        for line in expected:
            assert line in result.stdout, f"{command}\n{result.stdout}{result.stderr}"


def test_the_editor_settings_trust_local_rules():
    (settings,) = [body for marker, body in blocks() if marker == "editor settings"]
    assert EditorSettings.parse(json.loads(settings)).trust_local_rules is True


def venv(tmp_path: Path) -> Path:
    """A virtual environment that sees this interpreter's packages (a .pth file), a build
    backend that builds wheels first; its python."""
    folder = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    (site,) = folder.glob("lib/python*/site-packages")
    dirs = sorted(
        (p for p in sys.path if p.endswith("site-packages")),
        key=lambda d: not (Path(d) / "setuptools" / "command" / "bdist_wheel.py").is_file(),
    )
    (site / "parent.pth").write_text("\n".join(dirs) + "\n")
    return folder / "bin" / "python"


RAISES = """
from torchlint import Rule


class Broken(Rule):
    code = "X900"
    name = "broken"

    def check(self, module):
        raise ValueError("a bug of the rule")
"""
ADAM = "import torch\n\noptimizer = torch.optim.Adam(params)\n"


@pytest.mark.slow
def test_a_plugin_and_local_rules_in_a_project(tmp_path):
    root = project(tmp_path / "project", plugin=True)
    python = venv(tmp_path)
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps"]
    installed = subprocess.run(
        [*pip, "--no-build-isolation", str(root / "plugin")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stderr
    (root / "adam.py").write_text(ADAM)
    (root / "tools" / "lint_rules" / "broken.py").write_text(RAISES)

    checked = run(str(python), "torchlint check --no-cache --output-format concise .", root)
    assert checked.returncode == 2, checked.stderr
    assert "adam.py:3:13: ACME1 use `acme.optim.FusedAdam`" in checked.stdout
    assert "train.py:10:9: X100 `torch.save` on every step" in checked.stdout
    broken = str(root / "tools" / "lint_rules" / "broken.py")
    assert f"train.py: rule X900 ({broken}) raised ValueError: a bug of the rule" in checked.stderr
    assert "Traceback" not in checked.stderr

    listed = run(str(python), "torchlint rules", root).stdout
    assert re.search(r"ACME1 +fused-adam .* plugin acme-torchlint\n", listed), listed
    assert re.search(r"X100 +no-save-in-step .* local tools/lint_rules\n", listed), listed

    quiet = run(str(python), "torchlint check --no-cache --ignore ACME,X .", root)
    assert quiet.returncode == 0 and "All checks passed!" in quiet.stdout, quiet.stderr

    shown = run(str(python), "torchlint check --show-settings --select ALL train.py", root)
    assert "#   ACME1: plugin acme-torchlint" in shown.stdout
    assert "#   X100: local tools/lint_rules" in shown.stdout
