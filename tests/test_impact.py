"""Impact (issue 25): low-impact findings are found, counted, hidden and left unfixed by
default, shown and fixed on request, and every output format carries the impact."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import run_cli

# A Linear bias before BatchNorm1d is of low impact (added in the GEMM epilogue); a
# Conv2d bias before BatchNorm2d is a pass over the activations: high.
MODEL = """\
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Sequential(nn.Linear(64, 128), nn.BatchNorm1d(128))
        self.conv = nn.Sequential(nn.Conv2d(3, 64, 3), nn.BatchNorm2d(64))
"""
LOW_LINE, HIGH_LINE = 7, 8
ONLY_LOW = """\
import torch.nn as nn

head = nn.Sequential(nn.Linear(64, 128), nn.BatchNorm1d(128))
"""
SELECT = ("--select", "TL603", "--no-cache")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\n")
    (tmp_path / "net.py").write_text(MODEL)
    return tmp_path


def _json(project: Path, *args: str) -> list[dict]:
    result = run_cli("check", *SELECT, "--output-format", "json", *args, "net.py", cwd=project)
    assert result.returncode == 1, result.stderr
    return json.loads(result.stdout)


def test_low_impact_is_hidden_and_counted_by_default(project: Path):
    result = run_cli("check", *SELECT, "--output-format", "concise", "net.py", cwd=project)
    assert result.returncode == 1
    lines = [line for line in result.stdout.splitlines() if ": TL603" in line]
    assert [line.split(":")[1] for line in lines] == [str(HIGH_LINE)]
    assert "1 low-impact finding hidden (shown with `--show-low-impact`)." in result.stdout
    shown = run_cli(
        "check", *SELECT, "--output-format", "concise", "--show-low-impact", "net.py", cwd=project
    )
    low = [line for line in shown.stdout.splitlines() if f"net.py:{LOW_LINE}:" in line]
    assert len(low) == 1 and "(low impact: " in low[0]
    assert "hidden" not in shown.stdout


def test_only_low_impact_findings_pass(tmp_path: Path):
    (tmp_path / "head.py").write_text(ONLY_LOW)
    result = run_cli("check", *SELECT, "head.py", cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout == (
        "All checks passed!\n1 low-impact finding hidden (shown with `--show-low-impact`).\n"
    )
    assert run_cli("check", *SELECT, "--show-low-impact", "head.py", cwd=tmp_path).returncode == 1


def test_the_config_shows_them_as_the_flag_does(project: Path):
    assert {f["impact"] for f in _json(project)} == {"high"}
    (project / "pyproject.toml").write_text('[tool.torchlint]\nmin-impact = "low"\n')
    found = {(f["location"]["row"], f["impact"]) for f in _json(project)}
    assert found == {(LOW_LINE, "low"), (HIGH_LINE, "high")}


def test_fix_changes_only_what_check_shows(project: Path):
    result = run_cli("fix", *SELECT, "--unsafe-fixes", "net.py", cwd=project)
    assert result.returncode == 0, result.stdout + result.stderr
    text = (project / "net.py").read_text()
    assert "nn.Conv2d(3, 64, 3, bias=False)" in text and "nn.Linear(64, 128)," in text
    run_cli("fix", *SELECT, "--unsafe-fixes", "--show-low-impact", "net.py", cwd=project)
    assert "nn.Linear(64, 128, bias=False)" in (project / "net.py").read_text()


def test_statistics_count_both(project: Path):
    text = run_cli("check", *SELECT, "--statistics", "net.py", cwd=project).stdout
    assert text.splitlines()[0].endswith("bias-before-batch-norm  (+1 low impact, hidden)")
    rows = json.loads(
        run_cli(
            "check", *SELECT, "--statistics", "--output-format", "json", "net.py", cwd=project
        ).stdout
    )
    assert [(r["count"], r["low_impact_count"], r["hidden_count"]) for r in rows] == [(1, 0, 1)]
    shown = run_cli(
        "check", *SELECT, "--statistics", "--show-low-impact", "net.py", cwd=project
    ).stdout
    assert shown.splitlines()[0].startswith("2\tTL603") and "(1 low impact)" in shown


@pytest.mark.parametrize(
    ("fmt", "high", "low"),
    [
        ("github", "::warning ", "::notice "),
        ("gitlab", '"severity": "major"', '"severity": "minor"'),
        ("rdjsonl", '"severity":"WARNING"', '"severity":"INFO"'),
        ("json-lines", '"impact":"high"', '"impact":"low"'),
    ],
)
def test_every_format_carries_the_impact(project: Path, fmt: str, high: str, low: str):
    args = ("--output-format", fmt, "--show-low-impact", "net.py")
    shown = run_cli("check", *SELECT, *args, cwd=project).stdout
    assert shown.count(high) == 1 and shown.count(low) == 1, shown
    hidden = run_cli("check", *SELECT, *args[:2], "net.py", cwd=project).stdout
    assert hidden.count(high) == 1 and low not in hidden


def test_sarif_results_are_notes(project: Path):
    args = ("--output-format", "sarif", "--show-low-impact", "net.py")
    run = json.loads(run_cli("check", *SELECT, *args, cwd=project).stdout)["runs"][0]
    levels = {r["locations"][0]["physicalLocation"]["region"]["startLine"]: r["level"]
              for r in run["results"]}  # fmt: skip
    assert levels == {LOW_LINE: "note", HIGH_LINE: "warning"}
