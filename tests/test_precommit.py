"""The pre-commit hooks, driven by the real `pre-commit` in temporary git repositories.

pre-commit installs the hooks from this repository's committed HEAD (as `try-repo
--ref` and a `.pre-commit-config.yaml` pinned to that commit do) into a fresh
virtualenv, with torchlint's dependencies from the package index. That install is
the slow part, so every test shares one PRE_COMMIT_HOME and thus one hook env.
Uncommitted changes to torchlint are not what these tests see: commit first.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import LOADER, ROOT

pytestmark = pytest.mark.slow  # a real git repository and the real pre-commit

BAD = LOADER  # TL201 reports line 3
CLEAN = "import torch\nx = torch.zeros(3)\n"
PYPROJECT = '[tool.torchlint]\nselect = ["TL201"]\nextend-exclude = ["generated/"]\n'
UNSAFE = PYPROJECT + "unsafe-fixes = true\n"  # TL201's fix is unsafe

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
def pre_commit(env) -> Run:
    """Run the real `pre-commit ARGS...` in `cwd`; hook envs persist in PRE_COMMIT_HOME."""

    def run(cwd: Path, *args: str) -> subprocess.CompletedProcess:
        result = subprocess.run(
            [sys.executable, "-m", "pre_commit", *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert "Traceback" not in result.stdout + result.stderr, result.stdout + result.stderr
        return result

    return run


def config(head: str, *extra: str) -> str:
    """A .pre-commit-config.yaml as the README shows it, pinned to this repository's HEAD."""
    hooks = "".join(f"      - id: {hook}\n" for hook in ("torchlint", "torchlint-fix"))
    text = f"repos:\n  - repo: {ROOT}\n    rev: {head}\n    hooks:\n{hooks}"
    for line in extra:
        text += f"        {line}\n"
    return text


# try-repo builds a new hook environment on every call (it ignores PRE_COMMIT_HOME),
# so it runs twice; the other tests run the same hooks through a config file.


def test_try_repo_check_fails_and_fix_rewrites(repo, pre_commit, head):
    project = repo({"train.py": BAD, "clean.py": CLEAN, "pyproject.toml": UNSAFE})
    result = pre_commit(project, "try-repo", str(ROOT), "--ref", head, "--all-files")
    assert result.returncode == 1, result.stdout
    check, fix = result.stdout.split("torchlint (fix)")
    assert "Failed" in check and "train.py:3:10: TL201" in check
    assert "Found 1 problem" in check and "clean.py" not in check
    assert "Failed" in fix and "files were modified by this hook" in fix
    assert "Found 1 problem (1 fixed, 0 remaining)." in fix
    assert "Fixed 1 problem:\n- train.py:\n    1 x TL201 (dataloader-sync-loading)" in fix
    assert "pin_memory=True, num_workers=NUM_WORKERS)" in (project / "train.py").read_text()
    assert (project / "clean.py").read_text() == CLEAN


def test_try_repo_passes_on_a_clean_file(repo, pre_commit, head):
    project = repo({"clean.py": CLEAN, "pyproject.toml": PYPROJECT})
    result = pre_commit(project, "try-repo", str(ROOT), "torchlint", "--ref", head, "--all-files")
    assert result.returncode == 0, result.stdout
    assert "Passed" in result.stdout


def test_fix_hook_then_check_hook_pass(repo, pre_commit, head):
    project = repo(
        {"train.py": BAD, "pyproject.toml": UNSAFE, ".pre-commit-config.yaml": config(head)}
    )
    first = pre_commit(project, "run", "torchlint-fix", "--all-files")
    assert first.returncode == 1 and "files were modified by this hook" in first.stdout
    again = pre_commit(project, "run", "--all-files")
    assert again.returncode == 0, again.stdout
    assert again.stdout.count("Passed") == 2


def test_fix_hook_with_only_unsafe_fixes_changes_nothing_and_fails(repo, pre_commit, head):
    project = repo(
        {"train.py": BAD, "pyproject.toml": PYPROJECT, ".pre-commit-config.yaml": config(head)}
    )
    result = pre_commit(project, "run", "torchlint-fix", "--all-files")
    assert result.returncode == 1 and "files were modified" not in result.stdout
    assert "Found 1 problem.\n1 unsafe fix available with `--fix --unsafe-fixes`." in result.stdout
    assert (project / "train.py").read_text() == BAD


def test_notebooks_are_checked(repo, pre_commit, head):
    cell = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None}
    notebook = {
        "cells": [{**cell, "source": BAD.splitlines(keepends=True)}],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    files = {"nb.ipynb": json.dumps(notebook), "pyproject.toml": PYPROJECT}
    project = repo({**files, ".pre-commit-config.yaml": config(head)})
    result = pre_commit(project, "run", "torchlint", "--all-files")
    assert result.returncode == 1 and "nb.ipynb:cell 1:3:10: TL201" in result.stdout, result.stdout


def test_excluded_file_passed_by_name_stays_excluded(repo, pre_commit, head):
    files = {"generated/model_pb.py": BAD, "train.py": CLEAN, "pyproject.toml": PYPROJECT}
    project = repo({**files, ".pre-commit-config.yaml": config(head)})
    result = pre_commit(project, "run", "--files", "generated/model_pb.py", "train.py")
    assert result.returncode == 0, result.stdout
    assert result.stdout.count("Passed") == 2


def test_hundreds_of_files_in_several_batches(repo, pre_commit, head):
    # long paths push pre-commit over its command-line limit (128 KiB): two batches
    deep = "pkg_" + "d" * 200
    files = {f"{deep}/m{i:03d}.py": CLEAN for i in range(700)}
    files[f"{deep}/m000.py"] = files[f"{deep}/m699.py"] = BAD
    project = repo({**files, "pyproject.toml": PYPROJECT, ".pre-commit-config.yaml": config(head)})
    result = pre_commit(project, "run", "torchlint", "--all-files")
    assert result.returncode == 1, result.stdout
    assert f"{deep}/m000.py:3:10: TL201" in result.stdout
    assert f"{deep}/m699.py:3:10: TL201" in result.stdout
    assert result.stdout.count("Found 1 problem") == 2  # one per batch


def test_no_files(repo, pre_commit, head):
    """No Python file: pre-commit skips the hooks; forced to run with none, they pass."""
    project = repo(
        {"README.txt": "no code\n", ".pre-commit-config.yaml": config(head, "always_run: true")}
    )
    result = pre_commit(project, "run", "--all-files")
    assert result.returncode == 0, result.stdout
    assert "torchlint...." in result.stdout and "(no files to check)Skipped" in result.stdout
    assert "torchlint (fix)" in result.stdout and "Passed" in result.stdout


def test_hook_env_has_no_torch(env, repo, pre_commit, head):
    project = repo({"clean.py": CLEAN, ".pre-commit-config.yaml": config(head)})
    assert pre_commit(project, "install-hooks").returncode == 0
    pythons = sorted(Path(env["PRE_COMMIT_HOME"]).glob("repo*/py_env-*/bin/python"))
    assert pythons, "no hook environment found"
    probe = "import importlib.util as u; print(u.find_spec('torch'), bool(u.find_spec('libcst')))"
    for python in pythons:
        out = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=True)
        assert out.stdout.split() == ["None", "True"], f"{python}: {out.stdout}"


def test_the_readme_snippet_runs_pinned_to_a_commit(repo, pre_commit, head):
    """Issue #44: the README's `.pre-commit-config.yaml`, as copied, with what it says to
    put there before v0.1.0 is tagged (a commit hash) and this checkout for the URL."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    snippet = readme.split("# .pre-commit-config.yaml\n", 1)[1].split("```", 1)[0]
    assert "repo: https://github.com/torchlint/torchlint" in snippet and "rev: v" in snippet
    pinned = snippet.replace("https://github.com/torchlint/torchlint", str(ROOT))
    pinned = "\n".join(
        line.split("rev:")[0] + f"rev: {head}" if "rev:" in line else line
        for line in pinned.splitlines()
    )
    project = repo({"train.py": BAD, ".pre-commit-config.yaml": pinned, "pyproject.toml": UNSAFE})
    result = pre_commit(project, "run", "--all-files")
    assert result.returncode == 1, result.stdout
    assert "Found 1 problem (1 fixed, 0 remaining)." in result.stdout
