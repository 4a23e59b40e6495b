"""The project's torch version, read from its metadata when `target-torch` is not set (as
ruff reads `requires-python`): no fix may need a newer torch than the project declares."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchlint.config.metadata import lower_bound, oldest_torch

from .conftest import run_cli


@pytest.mark.parametrize(
    ("requirement", "expected"),
    [
        ("torch>=1.8", (1, 8)),
        ("torch >= 1.8, < 3", (1, 8)),
        ("torch==2.0.1+cu118", (2, 0)),
        ("torch~=1.13.0", (1, 13)),
        ("torch>1.9", (1, 9)),
        ("Torch[opt]>=2", (2, 0)),
        ("torch>=1.8; python_version < '3.12'", (1, 8)),
        ("torch ^1.12", (1, 12)),  # Poetry
        ("torch", None),  # no lower bound
        ("torch<2.0", None),
        ("torchvision>=0.15", None),
        ("torch @ https://download.pytorch.org/whl/torch-2.1.0.whl", None),
    ],
)
def test_lower_bounds(requirement, expected):
    assert lower_bound(requirement) == expected


METADATA = {
    "pyproject": (
        "pyproject.toml",
        '[project]\nname = "p"\ndependencies = ["numpy", "torch>=1.8,<3"]\n',
        "pyproject.toml ([project] dependencies): torch>=1.8,<3",
    ),
    "poetry": (
        "pyproject.toml",
        '[tool.poetry.dependencies]\npython = "^3.10"\ntorch = {version = "^1.8"}\n',
        "pyproject.toml ([tool.poetry] dependencies): torch ^1.8",
    ),
    "setup.cfg": (
        "setup.cfg",
        "[metadata]\nname = p\n\n[options]\ninstall_requires =\n    numpy\n    torch>=1.8\n",
        "setup.cfg (install_requires): torch>=1.8",
    ),
    "setup.py": (
        "setup.py",
        "from setuptools import setup\nREQS = ['torch>=1.8']\nsetup(install_requires=REQS)\n",
        "setup.py (install_requires): torch>=1.8",
    ),
    "requirements.txt": (
        "requirements-train.txt",
        "# training\n-r base.txt\ntorch==1.8.1\ntorchvision\n",
        "requirements-train.txt: torch==1.8.1",
    ),
    "environment.yml": (
        "environment.yml",
        "name: p\ndependencies:\n  - python=3.10\n  - pytorch=1.8\n",
        "environment.yml: pytorch=1.8",
    ),
}


@pytest.mark.parametrize("kind", METADATA)
def test_the_oldest_torch_comes_from_the_projects_metadata(tmp_path: Path, kind: str):
    name, text, source = METADATA[kind]
    (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "src").mkdir()
    declared = oldest_torch(tmp_path / "src")
    assert declared is not None
    assert (declared.version, declared.source) == ((1, 8), source)


def test_the_oldest_of_several_declarations_wins(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "p"\ndependencies = ["torch>=2.1"]\n', encoding="utf-8"
    )
    (tmp_path / "requirements.txt").write_text("torch==2.4.0\n", encoding="utf-8")
    assert oldest_torch(tmp_path).version == (2, 1)  # type: ignore[union-attr]


def test_no_metadata_above_the_repository_root(tmp_path: Path):
    (tmp_path / "requirements.txt").write_text("torch>=1.8\n", encoding="utf-8")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    assert oldest_torch(repo) is None
    assert oldest_torch(tmp_path) is not None


def test_optional_extras_do_not_count(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "p"\n[project.optional-dependencies]\ngpu = ["torch>=2.0"]\n',
        encoding="utf-8",
    )
    assert oldest_torch(tmp_path) is None


def test_broken_metadata_declares_nothing(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text("[project\n", encoding="utf-8")
    (tmp_path / "setup.py").write_text("setup(install_requires=[\n", encoding="utf-8")
    (tmp_path / "setup.cfg").write_text("no section\n", encoding="utf-8")
    assert oldest_torch(tmp_path) is None


SCRIPT = """\
import torch
from torch.cuda.amp import GradScaler

model = torch.nn.Linear(8, 1).cuda()
scaler = GradScaler()
with torch.cuda.amp.autocast():
    loss = model(torch.randn(4, 8, device="cuda")).sum()
scaler.scale(loss).backward()
"""


@pytest.mark.parametrize("kind", ["pyproject", "setup.cfg", "requirements.txt"])
def test_a_project_on_torch_1_8_gets_no_fix_that_needs_a_newer_one(tmp_path: Path, kind: str):
    name, text, source = METADATA[kind]
    (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "train.py").write_text(SCRIPT, encoding="utf-8")
    settings = run_cli("check", "--show-settings", "train.py", cwd=tmp_path)
    assert f'target-torch = "1.8"  # from the project\'s metadata, {source}\n' in settings.stdout
    low = "--show-low-impact"  # TL502's findings are all of low impact
    fixed = run_cli(
        "fix", "--unsafe-fixes", low, "--no-cache", "--select", "TL502", ".", cwd=tmp_path
    )
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert (tmp_path / "train.py").read_text(encoding="utf-8") == SCRIPT  # 1.10 and 2.3 APIs
    # A setting wins over the metadata, and says where it comes from.
    newer = run_cli("check", "--target-torch", "2.4", "--show-settings", ".", cwd=tmp_path)
    assert 'target-torch = "2.4"  # from --target-torch\n' in newer.stdout
    fixed = run_cli(
        "fix", "--target-torch", "2.4", low, "--no-cache", "--select", "TL502", ".", cwd=tmp_path
    )
    assert 'torch.amp.GradScaler("cuda")' in (tmp_path / "train.py").read_text(encoding="utf-8")
