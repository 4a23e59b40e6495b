"""A rule's declared `fix_safety` (what its page and `torchlint rules` show) matches the
applicability its fixes carry on its fixtures (fixtures/<CODE>/bad*.py, their low-impact
findings included): `none` never fixes, `safe` fixes only safely, `unsafe` only unsafely,
`sometimes` both ways; a rule that declares a fix shows one."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from torchlint.config.load import default_options, instantiate
from torchlint.fixes import Applicability, FixSafety
from torchlint.lint.linter import Linter
from torchlint.lint.registry import builtin_rules
from torchlint.semantic import Settings

from .conftest import FIXTURES, selection

TARGET = re.compile(r"# target-torch: (\d+)\.(\d+)\n")
NO_FIX = "no fix"
# The applicabilities each declaration allows, and those its fixtures must show.
ALLOWED = {
    FixSafety.NONE: {NO_FIX},
    FixSafety.SAFE: {Applicability.SAFE.value, NO_FIX},
    FixSafety.UNSAFE: {Applicability.UNSAFE.value, NO_FIX},
    FixSafety.SOMETIMES: {Applicability.SAFE.value, Applicability.UNSAFE.value, NO_FIX},
}
SHOWN = {
    FixSafety.NONE: set(),
    FixSafety.SAFE: {Applicability.SAFE.value},
    FixSafety.UNSAFE: {Applicability.UNSAFE.value},
    FixSafety.SOMETIMES: {Applicability.SAFE.value, Applicability.UNSAFE.value},
}


def applicabilities(code: str) -> Counter[str]:
    """How many findings of `code` on its bad fixtures carry each applicability."""
    found: Counter[str] = Counter()
    for bad in sorted((FIXTURES / code).glob("bad*.py")):
        if bad.name.endswith(".fixed.py"):
            continue
        found.update(_applicabilities(code, bad))
    return found


def _applicabilities(code: str, path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    target = TARGET.match(text)
    settings = Settings(
        options=default_options(),
        target_torch=(int(target[1]), int(target[2])) if target else None,
    )
    linter = Linter(instantiate(selection(code, text)), settings, low_impact=True)
    found = [v for v in linter.lint(text, str(path)) if v.code == code]
    return [v.fix.applicability if v.fix else NO_FIX for v in found]


@pytest.mark.parametrize("code", list(builtin_rules()))
def test_declared_fix_safety_matches_the_fixes(code: str):
    declared = builtin_rules()[code].fix_safety
    found = applicabilities(code)
    assert found, f"{code}: its bad fixtures report nothing"
    assert set(found) <= ALLOWED[declared], f"{code} declares {declared.value}: {dict(found)}"
    assert SHOWN[declared] <= set(found), f"{code} declares {declared.value}: {dict(found)}"


def test_a_mismatch_is_caught():
    """TL101's fixes are safe: declared unsafe or none, the rule would fail."""
    found = set(applicabilities("TL101"))
    assert not found <= ALLOWED[FixSafety.UNSAFE] and not found <= ALLOWED[FixSafety.NONE]
    assert not SHOWN[FixSafety.SOMETIMES] <= found
