"""What users copy names the version being released: every `v<version>` in the README's
and docs' snippets is `torchlint.__version__`, which the release checklist tags."""

from __future__ import annotations

import re

import pytest

from torchlint import __version__

from .conftest import ROOT

# `rev: v0.1.0`, `torchlint/torchlint@v0.1.0` (the action, or pip's git+ URL)
PINNED = re.compile(r"(?:rev:\s*|torchlint/torchlint@)v(\d+\.\d+\.\d+\S*?)(?=[\s\"'`]|$)", re.M)


@pytest.mark.parametrize("name", ["README.md", "docs/ci.md"])
def test_snippets_name_the_current_version(name):
    text = (ROOT / name).read_text(encoding="utf-8")
    found = PINNED.findall(text)
    assert found, f"{name}: no versioned snippet found (did the pattern change?)"
    assert set(found) == {__version__}, f"{name}: {sorted(set(found))} != {__version__}"


def test_release_checklist_and_changelog_cover_the_version():
    checklist = (ROOT / "docs" / "releasing.md").read_text(encoding="utf-8")
    for step in ("__version__", "CHANGELOG.md", "git tag -a v<version>", "docs/ci.md"):
        assert step in checklist
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## (\S+)", changelog, re.M)
    assert headings[0] == "Unreleased" and __version__ in headings
