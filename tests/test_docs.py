"""Every rule is documented, and the generated docs and README table are current."""

from __future__ import annotations

import re

import pytest

from torchlint.docs import expected_files
from torchlint.lint.registry import builtin_rules

from .conftest import ROOT, run_cli

SECTIONS = ("Why", "Bad", "Good", "Fix", "Sources")
# What the rule does where the device cannot be named (issue 23), just before the sources.
UNKNOWN_DEVICE = re.compile(r"^Unknown device: (\S.*?)\n\nSources:", re.M | re.S)
# What makes a finding low impact (issue 25), just before what it assumes of a device.
IMPACT = re.compile(r"^Impact: (\S.*?)\n\nUnknown device:", re.M | re.S)


@pytest.mark.parametrize("code", list(builtin_rules()))
def test_rule_doc_has_every_section(code):
    rule = builtin_rules()[code]
    doc = rule.doc()
    assert doc.startswith(f"{code} {rule.name}: ")
    for section in SECTIONS:
        assert re.search(rf"^{section}\b.*:", doc, re.M), f"{code} doc lacks a '{section}' section"
    if rule.fix_safety.value != "none":
        assert re.search(r"^Fix \((safe|unsafe|sometimes)[^)]*\):", doc, re.M), (
            "say why the fix is (un)safe"
        )


@pytest.mark.parametrize("code", list(builtin_rules()))
def test_rule_doc_says_what_it_assumes_of_an_unknown_device(code):
    assert UNKNOWN_DEVICE.search(builtin_rules()[code].doc()), (
        f"{code} doc lacks an 'Unknown device:' section just before 'Sources:'"
    )


@pytest.mark.parametrize("code", list(builtin_rules()))
def test_rule_doc_says_what_makes_a_finding_low_impact(code):
    found = IMPACT.search(builtin_rules()[code].doc())
    assert found, f"{code} doc lacks an 'Impact:' section just before 'Unknown device:'"
    reports_low = "Impact.LOW" in (ROOT / "rules").joinpath(_file(code)).read_text()
    assert not reports_low or "low" in found.group(1).lower(), (
        f"{code} reports low-impact findings: its Impact section must say when"
    )


def _file(code: str) -> str:
    return next(p.name for p in (ROOT / "rules").glob(f"{code.lower()}_*.py"))


def test_rule_command_prints_the_unknown_device_section():
    result = run_cli("rule", "TL401")
    printed = UNKNOWN_DEVICE.search(result.stdout)
    assert result.returncode == 0 and printed is not None
    documented = UNKNOWN_DEVICE.search(builtin_rules()["TL401"].doc())
    assert documented is not None and printed.group(1) == documented.group(1)


def test_generated_docs_are_current():
    stale = [
        str(path.relative_to(ROOT))
        for path, text in expected_files(ROOT).items()
        if not path.exists() or path.read_text(encoding="utf-8") != text
    ]
    assert not stale, f"run `python -m torchlint.docs` to regenerate: {stale}"


LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchors(path) -> set[str]:
    """The anchors of a Markdown file's headings, as GitHub spells them."""
    found = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            found.add(re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", title)))
    return found


def _broken(text: str, where) -> list[str]:
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        path, _, anchor = target.partition("#")
        file = (where.parent / path).resolve() if path else where
        if not file.exists() or (anchor and file.suffix == ".md" and anchor not in _anchors(file)):
            broken.append(target)
    return broken


def test_every_relative_link_of_the_docs_and_readme_leads_somewhere():
    """Links between the README and docs/ (rule pages included) point at files that exist
    and at headings they have."""
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    broken = {str(f.relative_to(ROOT)): b for f in files if (b := _broken(f.read_text("utf-8"), f))}
    assert broken == {}


def test_the_link_check_can_fail(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Preview rules\n[a](page.md#preview-rules) [b](gone.md) [c](#nowhere)\n")
    assert _broken(page.read_text(), page) == ["gone.md", "#nowhere"]
