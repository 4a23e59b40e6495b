"""The built wheel: rules ship inside the package, and torch is never a base dependency."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from importlib.metadata import requires

from .conftest import ROOT


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
    from torchlint.config import tomllib  # tomli on Python 3.10

    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {"torchlint.rules"} | {
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "torchlint").rglob("__init__.py")
    }
    assert found == listed
