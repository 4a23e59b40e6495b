"""Every rule is documented, and the generated docs and README table are current."""

from __future__ import annotations

import re

import pytest

from torchlint.docs import expected_files
from torchlint.registry import all_rules

from .conftest import ROOT

SECTIONS = ("Why", "Bad", "Good", "Fix", "Sources")


@pytest.mark.parametrize("code", list(all_rules()))
def test_rule_doc_has_every_section(code):
    rule = all_rules()[code]
    doc = rule.doc()
    assert doc.startswith(f"{code} {rule.name}: ")
    for section in SECTIONS:
        assert re.search(rf"^{section}\b.*:", doc, re.M), f"{code} doc lacks a '{section}' section"
    if rule.fix_safety.value != "none":
        assert re.search(r"^Fix \((safe|unsafe|sometimes)[^)]*\):", doc, re.M), (
            "say why the fix is (un)safe"
        )


def test_generated_docs_are_current():
    stale = [
        str(path.relative_to(ROOT))
        for path, text in expected_files(ROOT).items()
        if not path.exists() or path.read_text(encoding="utf-8") != text
    ]
    assert not stale, f"run `python -m torchlint.docs` to regenerate: {stale}"
