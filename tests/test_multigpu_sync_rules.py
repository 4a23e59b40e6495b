"""TL3xx-TL5xx: near misses that need a file of their own, and behaviour the fixture
files cannot show (target-torch gating, imports a fix adds)."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchlint.config import default_options, instantiate
from torchlint.linter import Linter
from torchlint.model import Settings

from .conftest import FIXTURES

# fixtures/<CODE>/good_*.py: more near misses, each a whole file (a Lightning import,
# a CPU-only script... changes what the rest of a file means).
EXTRA_GOOD = sorted(FIXTURES.glob("TL*/good_*.py"))


def linter(*codes: str, target_torch: tuple[int, int] | None = None) -> Linter:
    return Linter(
        instantiate(list(codes)), Settings(options=default_options(), target_torch=target_torch)
    )


@pytest.mark.parametrize("path", EXTRA_GOOD, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_extra_near_misses_are_silent(path: Path):
    code = path.parent.name
    found = linter(code).lint(path.read_text(encoding="utf-8"), str(path))
    assert found == [], [(v.line, v.message) for v in found]
