"""Testing a rule on fixture files, as torchlint's own rules are tested; for the authors
of local rules and plugins, from their own pytest:

    from torchlint.testing import check_fixtures

    def test_no_save_in_step():
        check_fixtures(NoSaveInStep, Path(__file__).parent / "fixtures" / "X100")

A fixture folder holds `bad*.py` (each line that ends in `# error: CODE` must be flagged,
`# low: CODE` flagged with low impact, and no other line), beside each an optional
`bad*.fixed.py` (exactly what fixing it writes, unsafe and low-impact fixes included;
fixing that again changes nothing), and `good*.py` (near misses: nothing flagged).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from torchlint.config.load import default_options
from torchlint.lint.linter import Linter
from torchlint.lint.registry import local_rules
from torchlint.rule import Rule
from torchlint.settings import Settings

__all__ = ["check_fixtures", "load_rules", "marks"]

MARK = re.compile(r"#\s*(?P<impact>error|low):\s*(?P<codes>[A-Z]+\d+(?:\s*,\s*[A-Z]+\d+)*)")


def marks(text: str, code: str) -> list[tuple[int, str, str]]:
    """(line, code, impact) of each mark of `code` in `text`: `# error:` is high impact,
    `# low:` low."""
    found: list[tuple[int, str, str]] = []
    for number, line in enumerate(text.splitlines(), 1):
        for m in MARK.finditer(line):
            impact = "high" if m.group("impact") == "error" else "low"
            codes = (c.strip() for c in m.group("codes").split(","))
            found.extend((number, c, impact) for c in codes if c == code)
    return found


def load_rules(folder: Path | str) -> dict[str, type[Rule]]:
    """The rules of a local rules folder, by code (RuleLoadError names a module that
    cannot be loaded)."""
    rules = local_rules((Path(folder).resolve(),))
    return {code: rule for code, rule in rules.items() if rule.origin.startswith("local ")}


def check_fixtures(
    rule: type[Rule],
    folder: Path | str,
    options: Mapping[str, Any] | None = None,
    target_torch: tuple[int, int] | None = None,
) -> None:
    """Run `rule` on the `bad*.py`, `bad*.fixed.py` and `good*.py` of `folder` (see the
    module's doc), with its options' defaults updated by `options`; AssertionError says
    which file and what differs. An exception of the rule propagates."""
    folder = Path(folder)
    bad = sorted(p for p in folder.glob("bad*.py") if not p.name.endswith(".fixed.py"))
    good = sorted(folder.glob("good*.py"))
    assert bad or good, f"{folder}: no bad*.py nor good*.py fixture"
    values = {**default_options({rule.code: rule}), **(options or {})}
    linter = Linter([rule()], Settings(options=values, target_torch=target_torch), low_impact=True)
    linter.on_rule_error = _raise
    for path in bad:
        _flagged_exactly(linter, rule.code, path)
        _fixed(linter, path)
    for path in good:
        found = linter.lint(path.read_text(encoding="utf-8"), str(path))
        assert not found, f"{path}: nothing may be flagged, found " + ", ".join(
            f"line {v.line}: {v.code} {v.message}" for v in found
        )


def _flagged_exactly(linter: Linter, code: str, path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    found = sorted((v.line, v.code, v.impact) for v in linter.lint(text, str(path)))
    expected = sorted(marks(text, code))
    missing = [m for m in expected if m not in found]
    extra = [f for f in found if f not in expected]
    assert not missing and not extra, (
        f"{path}: flagged lines differ from the `# error: {code}` marks; "
        f"not flagged: {_lines(missing)}; flagged but not marked: {_lines(extra)}"
    )


def _fixed(linter: Linter, path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    expected_path = path.with_name(path.stem + ".fixed.py")
    fixed = linter.fix(text, str(path), unsafe=True).text
    if not expected_path.exists():
        assert fixed == text, f"{path}: its fix changes the file but {expected_path} is missing"
        return
    expected = expected_path.read_text(encoding="utf-8")
    assert fixed == expected, f"{path}: fixing it does not give {expected_path.name}:\n{fixed}"
    again = linter.fix(fixed, str(expected_path), unsafe=True)
    assert again.text == fixed, f"{expected_path}: fixing it again changes it:\n{again.text}"


def _lines(found: list[tuple[int, str, str]]) -> str:
    return ", ".join(f"line {n} ({impact})" for n, _, impact in found) or "none"


def _raise(code: str, exc: Exception) -> None:
    raise exc
