"""Every rule's fixture files, run through the real linter and fixer.

fixtures/<CODE>/bad.py        lines ending in `# error: CODE` must be flagged, those ending
                              in `# low: CODE` flagged with low impact, no others
fixtures/<CODE>/bad.fixed.py  exact output of `fix --unsafe-fixes --show-low-impact` on bad.py
fixtures/<CODE>/good.py       near misses: nothing may be flagged
fixtures/<CODE>/bad_<case>.py, good_<case>.py: more of the same, each a whole file (a
Lightning import, a CPU-only script... changes what the rest of a file means)

A first line `# target-torch: X.Y` runs the file with that setting (a project that
declares an older torch).

UPDATE_FIXTURES=1 rewrites the bad*.fixed.py files from the current fixer.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from torchlint.config import default_options, instantiate
from torchlint.fixes import FixSafety
from torchlint.linter import Linter
from torchlint.registry import all_rules
from torchlint.semantic import Settings

from .conftest import FIXTURES

ERROR_MARK = re.compile(r"#\s*(?P<impact>error|low):\s*(?P<codes>TL\d+(?:\s*,\s*TL\d+)*)")
TARGET = re.compile(r"# target-torch: (\d+)\.(\d+)\n")
RULE_DIRS = sorted(p for p in FIXTURES.glob("TL*") if p.is_dir())
BAD = sorted(p for p in FIXTURES.glob("TL*/bad*.py") if not p.name.endswith(".fixed.py"))
GOOD = sorted(FIXTURES.glob("TL*/good*.py"))


def case(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


def linter_for(code: str, path: Path | None = None, low_impact: bool = False) -> Linter:
    m = TARGET.match(path.read_text(encoding="utf-8")) if path is not None else None
    target = (int(m.group(1)), int(m.group(2))) if m else None
    settings = Settings(options=default_options(), target_torch=target)
    return Linter(instantiate([code]), settings, low_impact=low_impact)


def expected_marks(path: Path, code: str) -> list[tuple[int, str, str]]:
    """(line, code, impact) of each mark: `# error:` is high impact, `# low:` low."""
    marks = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        for m in ERROR_MARK.finditer(line):
            impact = "high" if m.group("impact") == "error" else "low"
            marks.extend(
                (number, c.strip(), impact)
                for c in m.group("codes").split(",")
                if c.strip() == code
            )
    return marks


def test_every_rule_has_fixtures():
    missing = [code for code in all_rules() if not (FIXTURES / code / "bad.py").is_file()]
    assert not missing, f"rules without fixtures: {missing}"


@pytest.mark.parametrize("directory", RULE_DIRS, ids=lambda p: p.name)
def test_every_rule_has_near_misses(directory: Path):
    assert (directory / "good.py").is_file(), f"{directory.name} needs near misses in good.py"


@pytest.mark.parametrize("bad", BAD, ids=case)
def test_bad_is_flagged_exactly(bad: Path):
    code = bad.parent.name
    found = [
        (v.line, v.code, v.impact)
        for v in linter_for(code, bad).lint(bad.read_text(encoding="utf-8"), str(bad))
    ]
    assert sorted(found) == sorted(expected_marks(bad, code))


@pytest.mark.parametrize("good", GOOD, ids=case)
def test_good_is_silent(good: Path):
    found = linter_for(good.parent.name, good).lint(good.read_text(encoding="utf-8"), str(good))
    assert found == [], [(v.line, v.message) for v in found]


@pytest.mark.parametrize("bad", BAD, ids=case)
def test_fix_matches_expected_and_is_idempotent(bad: Path):
    code = bad.parent.name
    expected_path = bad.with_name(bad.stem + ".fixed.py")
    linter = linter_for(code, bad, low_impact=True)  # low-impact findings' fixes too
    fixed = linter.fix(bad.read_text(encoding="utf-8"), str(bad), unsafe=True).text
    if fixed == bad.read_text(encoding="utf-8"):
        assert not expected_path.exists(), "nothing is fixed: no .fixed.py expected"
        assert all_rules()[code].fix_safety is FixSafety.NONE or bad.name != "bad.py", (
            "the bad.py of a rule with a fix must exercise it"
        )
        return
    if os.environ.get("UPDATE_FIXTURES"):
        expected_path.write_text(fixed, encoding="utf-8")
    assert fixed == expected_path.read_text(encoding="utf-8")
    again = linter.fix(fixed, str(expected_path), unsafe=True)
    assert again.text == fixed and again.fixed == []
    compile(fixed, str(expected_path), "exec")


def test_fixes_keep_imports_sorted_as_ruffs_isort_wants(tmp_path: Path):
    """A fixed file passes ruff's import sorting (I001) whenever its original does."""
    pairs = [(bad, bad.with_name(bad.stem + ".fixed.py")) for bad in BAD]
    pairs = [(bad, fixed) for bad, fixed in pairs if fixed.exists()]
    for bad, fixed in pairs:
        for path in (bad, fixed):
            (tmp_path / f"{bad.parent.name}_{path.name}").write_bytes(path.read_bytes())
    ruff = [sys.executable, "-m", "ruff", "check", "--isolated", "--no-cache", "--exit-zero"]
    result = subprocess.run(
        [*ruff, "--select=I001", "--output-format=concise", "."],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    unsorted = {line.split(":")[0] for line in result.stdout.splitlines() if "I001" in line}
    broken = [
        case(fixed)
        for bad, fixed in pairs
        if f"{bad.parent.name}_{fixed.name}" in unsorted
        and f"{bad.parent.name}_{bad.name}" not in unsorted
    ]
    assert len(pairs) > 10 and not broken, broken
