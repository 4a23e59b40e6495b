"""The pre-commit hooks, driven by the real `pre-commit` in temporary git repositories.

pre-commit installs the hooks from this repository's committed HEAD (as `try-repo
--ref` and a `.pre-commit-config.yaml` pinned to that commit do) into a fresh
virtualenv, with torchlint's dependencies from the package index. That install is
the slow part, so every test shares one PRE_COMMIT_HOME and thus one hook env.
Uncommitted changes to torchlint are not what these tests see: commit first.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import ROOT

BAD = "import torch\nfrom torch.utils.data import DataLoader\nloader = DataLoader(ds)\n"
CLEAN = "import torch\nx = torch.zeros(3)\n"
PYPROJECT = '[tool.torchlint]\nselect = ["TL201"]\nextend-exclude = ["generated/"]\n'

Run = Callable[..., subprocess.CompletedProcess]


def _git_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return {
        **env,
        "PRE_COMMIT_HOME": str(home),
        "NO_COLOR": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
        "GIT_CONFIG_GLOBAL": os.devnull,
        # this checkout may belong to another user (CI): let git read it anyway
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "safe.directory",
        "GIT_CONFIG_VALUE_0": "*",
    }


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict[str, str]:
    if shutil.which("git") is None:
        pytest.fail("git is not installed: the pre-commit tests need it (see .ci/run)")
    try:
        import pre_commit  # noqa: F401
    except ImportError:
        pytest.fail("pre-commit is not installed: `pip install -e '.[dev]'`")
    return _git_env(tmp_path_factory.mktemp("pre-commit-home"))


@pytest.fixture(scope="module")
def head(env) -> str:
    out = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, f"the tests need {ROOT} to be a git checkout: {out.stderr}"
    return out.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path, env) -> Callable[[dict[str, str]], Path]:
    """A git repository holding `files` (path -> text), all added to the index."""

    def make(files: dict[str, str]) -> Path:
        root = tmp_path / "project"
        root.mkdir()
        for name, text in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text, encoding="utf-8")
        for cmd in (["git", "init", "-q"], ["git", "add", "-A"]):
            subprocess.run(cmd, cwd=root, env=env, check=True, capture_output=True)
        return root

    return make


@pytest.fixture(scope="module")
def try_repo(env, head) -> Run:
    """`pre-commit try-repo <this repository> HOOK --ref HEAD ARGS...` in `cwd`."""

    def run(cwd: Path, hook: str, *args: str) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "pre_commit", "try-repo", str(ROOT), hook, "--ref", head]
        result = subprocess.run(
            [*cmd, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
        )
        assert "Traceback" not in result.stdout + result.stderr, result.stdout + result.stderr
        return result

    return run


def test_check_fails_on_findings_and_shows_them(repo, try_repo):
    project = repo({"train.py": BAD, "clean.py": CLEAN, "pyproject.toml": PYPROJECT})
    result = try_repo(project, "torchlint", "--all-files")
    assert result.returncode == 1, result.stdout
    assert "torchlint" in result.stdout and "Failed" in result.stdout
    assert "train.py:3:10: TL201" in result.stdout
    assert "Found 1 problem" in result.stdout


def test_check_passes_on_a_clean_file(repo, try_repo):
    project = repo({"clean.py": CLEAN, "pyproject.toml": PYPROJECT})
    result = try_repo(project, "torchlint", "--all-files")
    assert result.returncode == 0, result.stdout
    assert "Passed" in result.stdout


def test_fix_hook_rewrites_the_file_and_fails(repo, try_repo):
    config = PYPROJECT + "unsafe-fixes = true\n"
    project = repo({"train.py": BAD, "pyproject.toml": config})
    result = try_repo(project, "torchlint-fix", "--all-files")
    assert result.returncode == 1, result.stdout
    assert "files were modified by this hook" in result.stdout
    assert "Fixed 1 problem in 1 file." in result.stdout
    assert "1 x TL201 (dataloader-sync-loading)" in result.stdout
    assert "DataLoader(ds, num_workers=NUM_WORKERS)" in (project / "train.py").read_text()
    again = try_repo(project, "torchlint-fix", "--all-files")
    assert again.returncode == 0 and "Passed" in again.stdout, again.stdout


def test_fix_hook_without_a_safe_fix_changes_nothing_and_fails(repo, try_repo):
    project = repo({"train.py": BAD, "pyproject.toml": PYPROJECT})
    result = try_repo(project, "torchlint-fix", "--all-files")
    assert result.returncode == 1 and "files were modified" not in result.stdout
    assert "No fixes applied; 1 fixable with --unsafe-fixes." in result.stdout
    assert (project / "train.py").read_text() == BAD


def test_excluded_file_passed_by_name_stays_excluded(repo, try_repo):
    project = repo({"generated/model_pb.py": BAD, "pyproject.toml": PYPROJECT})
    result = try_repo(project, "torchlint", "--files", "generated/model_pb.py")
    assert result.returncode == 0 and "Passed" in result.stdout, result.stdout


def test_hundreds_of_files_in_several_batches(repo, try_repo):
    # long paths push pre-commit over its command-line limit (128 KiB): two batches
    deep = "pkg_" + "d" * 200
    files = {f"{deep}/m{i:03d}.py": CLEAN for i in range(700)}
    files[f"{deep}/m000.py"] = files[f"{deep}/m699.py"] = BAD
    project = repo({**files, "pyproject.toml": PYPROJECT})
    result = try_repo(project, "torchlint", "--all-files")
    assert result.returncode == 1, result.stdout
    assert f"{deep}/m000.py:3:10: TL201" in result.stdout
    assert f"{deep}/m699.py:3:10: TL201" in result.stdout
    assert result.stdout.count("Found 1 problem") == 2  # one per batch


def test_no_files_at_all(repo, env, head):
    """No Python file: pre-commit skips the hook; forced to run with none, it passes."""
    config = textwrap.dedent(
        f"""\
        repos:
          - repo: {ROOT}
            rev: {head}
            hooks:
              - id: torchlint
              - id: torchlint-fix
                always_run: true
        """
    )
    project = repo({"README.txt": "no code here\n", ".pre-commit-config.yaml": config})
    result = subprocess.run(
        [sys.executable, "-m", "pre_commit", "run", "--all-files"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "(no files to check)Skipped" in result.stdout
    assert "torchlint (fix)" in result.stdout and "Passed" in result.stdout


def test_hook_env_has_no_torch(env, repo, try_repo):
    try_repo(repo({"clean.py": CLEAN}), "torchlint", "--all-files")  # env exists
    pythons = sorted(Path(env["PRE_COMMIT_HOME"]).glob("repo*/py_env-*/bin/python"))
    assert pythons, "no hook environment found"
    probe = "import importlib.util as u; print(u.find_spec('torch'), bool(u.find_spec('libcst')))"
    for python in pythons:
        out = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=True)
        assert out.stdout.split() == ["None", "True"], f"{python}: {out.stdout}"
