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

Snapshots: tests/snapshots/ mirrors fixtures/ with one `.snap` per bad*.py (its rule
only: TL201/bad.py.snap), per project shape (its own configuration: project/<shape>.snap,
each line led by the file), per notebook and per e2e script (every rule; a notebook's
lines led by `cell N:`): every finding on a line, `line:col-end_line:end_col CODE [(low)]
message | fix title | applicability` (or `| no fix`), with the preview rules run and
low-impact findings shown, so a changed range, message or fix title fails. good*.py
have none: test_good_is_silent holds them to no finding.
`UPDATE_SNAPSHOTS=1 pytest tests/test_fixtures.py -k snapshot` writes them all and
deletes those whose fixture is gone (read the diff before committing).
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from torchlint.config.load import default_options, instantiate
from torchlint.fixes import FixSafety
from torchlint.lint.linter import Linter
from torchlint.lint.registry import builtin_rules
from torchlint.reporters.json_format import violation_dict
from torchlint.results import Violation
from torchlint.semantic import Settings
from torchlint.testing import marks

from .conftest import FIXTURES, ROOT, run_cli, selection

TARGET = re.compile(r"# target-torch: (\d+)\.(\d+)\n")
RULE_DIRS = sorted(p for p in FIXTURES.glob("TL*") if p.is_dir())
BAD = sorted(p for p in FIXTURES.glob("TL*/bad*.py") if not p.name.endswith(".fixed.py"))
GOOD = sorted(FIXTURES.glob("TL*/good*.py"))
PROJECTS = sorted(p for p in (FIXTURES / "project").iterdir() if p.is_dir())
SCRIPTS = sorted(
    p
    for p in [*(FIXTURES / "e2e").rglob("*.py"), *(FIXTURES / "notebooks").glob("*.ipynb")]
    if ".fixed." not in p.name
)
SNAPSHOTS = ROOT / "tests" / "snapshots"
UPDATE_SNAPSHOTS = "UPDATE_SNAPSHOTS=1 pytest tests/test_fixtures.py -k snapshot"
# What a snapshot shows beyond the default: every rule's tier, every finding's fix.
SHOW_ALL = ("--preview", "--show-low-impact")


def case(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


def fixture_name(path: Path) -> str:
    return path.relative_to(FIXTURES).as_posix()


def target_torch(path: Path) -> tuple[int, int] | None:
    m = TARGET.match(path.read_text(encoding="utf-8"))
    return (int(m.group(1)), int(m.group(2))) if m else None


def linter_for(code: str, path: Path, low_impact: bool = False) -> Linter:
    settings = Settings(options=default_options(), target_torch=target_torch(path))
    codes = selection(code, path.read_text(encoding="utf-8"))
    return Linter(instantiate(codes), settings, low_impact=low_impact)


@cache
def findings(bad: Path) -> list[Violation]:
    """The findings of a bad*.py's rule, low-impact ones with their fixes."""
    linter = linter_for(bad.parent.name, bad, low_impact=True)
    return linter.lint(bad.read_text(encoding="utf-8"), str(bad))


def expected_marks(path: Path, code: str) -> list[tuple[int, str, str]]:
    """(line, code, impact) of each mark (as `torchlint.testing` reads them)."""
    return marks(path.read_text(encoding="utf-8"), code)


def test_every_rule_has_fixtures():
    missing = [code for code in builtin_rules() if not (FIXTURES / code / "bad.py").is_file()]
    assert not missing, f"rules without fixtures: {missing}"


@pytest.mark.parametrize("directory", RULE_DIRS, ids=lambda p: p.name)
def test_every_rule_has_near_misses(directory: Path):
    assert (directory / "good.py").is_file(), f"{directory.name} needs near misses in good.py"


@pytest.mark.parametrize("bad", BAD, ids=case)
def test_bad_is_flagged_exactly(bad: Path):
    found = [(v.line, v.code, v.impact) for v in findings(bad)]
    assert sorted(found) == sorted(expected_marks(bad, bad.parent.name))


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
        assert builtin_rules()[code].fix_safety is FixSafety.NONE or bad.name != "bad.py", (
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


def snapshot_path(fixture: Path) -> Path:
    return SNAPSHOTS / f"{fixture_name(fixture)}.snap"


def snapshot_line(finding: dict[str, Any], with_file: bool) -> str:
    """One finding (an item of the JSON report) on one line."""
    start, end = finding["location"], finding["end_location"]
    where = f"{start['row']}:{start['column']}-{end['row']}:{end['column']}"
    if finding["cell"] is not None:
        where = f"cell {finding['cell']}:{where}"
    if with_file:
        where = f"{finding['filename']}:{where}"
    low = " (low)" if finding["impact"] == "low" else ""
    message = finding["message"].replace("\n", "\\n")
    fix = finding["fix"]
    shown = f"{fix['message']} | {fix['applicability']}" if fix else "no fix"
    return f"{where} {finding['code']}{low} {message} | {shown}"


def assert_snapshot(
    fixture: Path, command: str, found: list[dict[str, Any]], with_file: bool = False
) -> None:
    """`found` as its snapshot holds it, or a failure with the diff (UPDATE_SNAPSHOTS=1
    writes it)."""
    order = sorted(
        found,
        key=lambda f: (
            f["filename"],
            f["cell"] or 0,
            f["location"]["row"],
            f["location"]["column"],
            f["code"],
            f["message"],
        ),
    )
    lines = [f"# {fixture.relative_to(ROOT).as_posix()}: torchlint check {command}"]
    lines += [snapshot_line(f, with_file) for f in order]
    actual = "\n".join(lines) + "\n"
    path = snapshot_path(fixture)
    shown = path.relative_to(ROOT).as_posix()
    if os.environ.get("UPDATE_SNAPSHOTS"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8")
    if not path.is_file():
        pytest.fail(f"no snapshot {shown}: write it with {UPDATE_SNAPSHOTS}", pytrace=False)
    expected = path.read_text(encoding="utf-8")
    if actual != expected:
        diff = difflib.unified_diff(
            expected.splitlines(keepends=True),
            actual.splitlines(keepends=True),
            f"{shown} (snapshot)",
            f"{shown} (now)",
        )
        pytest.fail(
            f"the findings differ from {shown}; if the change is intended, run"
            f" {UPDATE_SNAPSHOTS} and read the diff:\n{''.join(diff)}",
            pytrace=False,
        )


def cli_findings(fixture: Path, tmp_path: Path, *args: str) -> list[dict[str, Any]]:
    """`torchlint check ARGS` on a copy of a file or project fixture: no configuration
    above it (the repository's pyproject.toml) changes what it finds."""
    copy = tmp_path / fixture.name
    if fixture.is_dir():
        shutil.copytree(fixture, copy)
        cwd, target = copy, "."
    else:
        shutil.copy(fixture, copy)
        cwd, target = tmp_path, copy.name
    result = run_cli("check", "--no-cache", "--output-format=json", *args, target, cwd=cwd)
    assert result.returncode in (0, 1), result.stdout + result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("bad", BAD, ids=case)
def test_bad_matches_its_snapshot(bad: Path):
    code = bad.parent.name
    target = target_torch(bad)
    codes = ",".join(selection(code, bad.read_text(encoding="utf-8")))
    command = f"--select {codes} {' '.join(SHOW_ALL)}"
    if target:
        command += f" --target-torch {target[0]}.{target[1]}"
    assert_snapshot(bad, command, [violation_dict(case(bad), v) for v in findings(bad)])


@pytest.mark.parametrize("project", PROJECTS, ids=lambda p: p.name)
def test_project_matches_its_snapshot(project: Path, tmp_path: Path):
    """A project shape as a whole, with the rules its pyproject.toml selects."""
    found = cli_findings(project, tmp_path, *SHOW_ALL)
    assert_snapshot(project, " ".join(SHOW_ALL), found, with_file=True)


@pytest.mark.parametrize("script", SCRIPTS, ids=fixture_name)
def test_script_matches_its_snapshot(script: Path, tmp_path: Path):
    """An e2e script or a notebook, alone, with every rule."""
    args = ("--select", "ALL", *SHOW_ALL)
    assert_snapshot(script, " ".join(args), cli_findings(script, tmp_path, *args))


def test_every_snapshot_has_its_fixture():
    """A fixture deleted or renamed leaves no snapshot behind (UPDATE_SNAPSHOTS=1 deletes it)."""
    kept = {snapshot_path(f) for f in [*BAD, *PROJECTS, *SCRIPTS]}
    stale = sorted(set(SNAPSHOTS.rglob("*.snap")) - kept)
    if os.environ.get("UPDATE_SNAPSHOTS"):
        for path in stale:
            path.unlink()
    elif stale:
        names = ", ".join(p.relative_to(ROOT).as_posix() for p in stale)
        pytest.fail(
            f"snapshots of no fixture: {names}; {UPDATE_SNAPSHOTS} deletes them", pytrace=False
        )
