"""The built wheel: rules ship inside the package, and torch is never a base dependency."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import zipfile
from importlib.metadata import requires

import pytest

from .conftest import FIXTURES, ROOT


def test_torch_only_in_the_verify_extra():
    for requirement in requires("torchlint") or []:
        name = requirement.split(";")[0].strip().lower()
        if name.startswith(("torch", "nvidia-ml-py")):
            assert 'extra == "verify"' in requirement, requirement


def test_the_base_install_pulls_neither_pygls_nor_torch():
    base, server = set(), set()
    for requirement in requires("torchlint") or []:
        name = re.split(r"[\s;\[<>=!~]", requirement, maxsplit=1)[0].lower()
        if "extra ==" not in requirement:
            base.add(name)
        elif 'extra == "server"' in requirement:
            server.add(name)
    assert "libcst" in base and not base & {"pygls", "lsprotocol", "pytest-lsp", "torch"}
    assert server == {"pygls", "lsprotocol"}


@pytest.mark.slow
def test_wheel_contains_rules_as_torchlint_rules(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (wheel,) = tmp_path.glob("torchlint-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    rule_files = {p.name for p in (ROOT / "rules").glob("tl*.py")}
    shipped = {n.rsplit("/", 1)[1] for n in names if n.startswith("torchlint/rules/")}
    assert rule_files and rule_files <= shipped
    assert not any(n.startswith(("rules/", "tests/", "fixtures/")) for n in names)


def test_every_subpackage_is_listed_for_the_wheel():
    from torchlint.config.load import tomllib  # tomli on Python 3.10

    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {"torchlint.rules"} | {
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "torchlint").rglob("__init__.py")
    }
    assert found == listed


# `python -m torchlint` as it runs with a regular (not editable) install of torchlint:
# the editable install's import hook, which maps torchlint.rules to rules/, is removed.
AS_INSTALLED = """
import runpy, sys
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
sys.argv[0] = "torchlint"
runpy.run_module("torchlint", run_name="__main__", alter_sys=True)
"""


def as_installed(*args: str, cwd):
    return subprocess.run(
        [sys.executable, "-c", AS_INSTALLED, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
def test_python_m_torchlint_in_a_checkout_finds_the_checkouts_rules():
    """At the repository root, `torchlint` is the checkout's folder, which has no
    `rules` package of its own: the rules are found beside it (issue #26's benchmark)."""
    bad = str((FIXTURES / "TL201" / "bad.py").relative_to(ROOT))
    result = as_installed("check", "--no-cache", "--output-format", "json", bad, cwd=ROOT)
    assert result.returncode == 1, result.stderr
    assert "TL201" in {item["code"] for item in json.loads(result.stdout)}


@pytest.mark.slow
def test_a_torchlint_without_its_rules_says_why(tmp_path):
    shutil.copytree(
        ROOT / "torchlint", tmp_path / "torchlint", ignore=shutil.ignore_patterns("__pycache__")
    )
    (tmp_path / "a.py").write_text("import torch\n")
    result = as_installed("check", "a.py", cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith("torchlint: error: torchlint's rules are missing: ")
    assert "reinstall torchlint" in result.stderr
