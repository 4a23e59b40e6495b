"""Terminal comfort: --quiet, --verbose, --statistics, --show-fixes, the fix summary and
the progress bar."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from torchlint.cli import _summary
from torchlint.config import load_config
from torchlint.parallel import run_files
from torchlint.progress import Progress
from torchlint.reporters import Context
from torchlint.results import FileResult, FixRecord, Job, Violation
from torchlint.semantic import Settings

from .conftest import run_cli

# TL405 (unsafe fix) and TL502 (safe fix) on one file
MIXED = """\
import torch
from torch.utils.data import DataLoader

opt.zero_grad(set_to_none=False)
scaler = torch.cuda.amp.GradScaler()
"""
SELECT = ("--select", "TL405,TL502")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text(MIXED)
    return tmp_path


def test_quiet_prints_findings_but_no_summary_or_warnings(project):
    (project / "empty").mkdir()
    result = run_cli("check", "-q", *SELECT, ".", "empty", cwd=project)
    assert result.returncode == 1
    assert "train.py:4:1: TL405" in result.stdout and "train.py:5:10: TL502" in result.stdout
    assert "Found" not in result.stdout and result.stderr == ""
    loud = run_cli("check", *SELECT, ".", "empty", cwd=project)
    assert "warning: empty: no Python files found" in loud.stderr


def test_verbose_names_config_rules_and_each_file(project):
    (project / "pyproject.toml").write_text('[tool.torchlint]\nselect = ["TL405"]\n')
    result = run_cli("check", "-v", ".", cwd=project)
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert lines[0] == f"torchlint: config: {project.resolve() / 'pyproject.toml'}"
    assert lines[1] == "torchlint: rules: TL405"
    assert "torchlint: 1 file to check" in lines
    assert "torchlint: checked train.py: 1 finding" in lines
    assert lines[-1].startswith("torchlint: done in ")
    both = run_cli("check", "-q", "-v", ".", cwd=project)
    assert both.returncode == 2 and "cannot be used together" in both.stderr


def test_statistics_count_per_code(project):
    (project / "more.py").write_text(MIXED)
    result = run_cli("check", "--statistics", "--output-format", "concise", *SELECT, cwd=project)
    assert "2\tTL405\t[ ] zero-grad-keeps-zeros" in result.stdout
    assert "2\tTL502\t[*] deprecated-cuda-amp-api" in result.stdout
    assert result.stdout.rstrip().endswith(
        "Found 4 problems (2 fixable with --fix; 2 more with --unsafe-fixes)."
    )


def test_show_fixes_shows_each_fix_as_a_diff(project):
    result = run_cli("check", "--show-fixes", *SELECT, "train.py", cwd=project)
    assert result.returncode == 1
    assert '  = help: Use `torch.amp.GradScaler("cuda", ...)`\n' in result.stdout
    assert (
        "    4   opt.zero_grad(set_to_none=False)\n"
        "    5 - scaler = torch.cuda.amp.GradScaler()\n"
        '      + scaler = torch.amp.GradScaler("cuda")\n'
    ) in result.stdout
    assert (project / "train.py").read_text() == MIXED


def test_fix_lists_fixes_and_says_what_is_left(project):
    result = run_cli("fix", "--show-fixes", *SELECT, "train.py", cwd=project)
    assert result.returncode == 1  # TL405 remains: its fix is unsafe
    assert "Fixes applied:\ntrain.py:\n  1 x TL502 (deprecated-cuda-amp-api)\n" in result.stdout
    assert result.stdout.endswith("Fixed 1 problem in 1 file; 1 more with --unsafe-fixes.\n")
    assert 'torch.amp.GradScaler("cuda")' in (project / "train.py").read_text()


def _result(path: str, fixed: int, fixes: list[str | None]) -> FileResult:
    violations = [
        Violation("TL999", "x", "m", n, 1, n, 2, FixRecord("t", f) if f else None)
        for n, f in enumerate(fixes, 1)
    ]
    return FileResult(path, violations, fixed=["TL999"] * fixed)


@pytest.mark.parametrize(
    ("results", "expected"),
    [
        ([_result("a", 0, [])], "All checks passed!"),
        ([_result("a", 3, []), _result("b", 9, [])], "Fixed 12 problems in 2 files."),
        (
            [_result("a", 12, ["unsafe", "unsafe"]), _result("b", 0, ["unsafe"])],
            "Fixed 12 problems in 1 file; 3 more with --unsafe-fixes.",
        ),
        (
            [_result("a", 1, ["unsafe", None])],
            "Fixed 1 problem in 1 file; 1 more with --unsafe-fixes; 1 problem left to fix by hand.",
        ),
        ([_result("a", 0, [None, None])], "No fixes applied; 2 problems left to fix by hand."),
    ],
)
def test_fix_summary(results, expected):
    assert _summary(results, Context(fix_mode=True), diff=False) == expected


# -- the progress bar ------------------------------------------------------------


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_waits_then_draws_at_most_every_interval_and_erases_itself():
    now = [0.0]
    stream = FakeTerminal()
    progress = Progress(4, stream, delay=1.0, interval=0.1, clock=lambda: now[0])
    progress(FileResult("a.py"))  # 0 s: a short run draws nothing
    assert stream.getvalue() == ""
    now[0] = 1.5
    progress(FileResult("b.py", [Violation("TL201", "n", "m", 1, 1, 1, 2)]))
    assert stream.getvalue().startswith("\r[") and "2/4 files, 1 found  b.py" in stream.getvalue()
    now[0] = 1.55
    progress(FileResult("c.py"))  # too soon to redraw
    assert "3/4" not in stream.getvalue()
    progress(FileResult("d.py"))  # the last file is always drawn
    assert "4/4 files" in stream.getvalue()
    progress.close()
    assert stream.getvalue().endswith("\r\x1b[K")


def test_progress_that_never_drew_erases_nothing():
    stream = FakeTerminal()
    progress = Progress(1, stream, clock=lambda: 0.0)
    progress(FileResult("a.py"))
    progress.close()
    assert stream.getvalue() == ""


def test_runner_reports_each_result_as_it_is_made(tmp_path):
    files = [tmp_path / f"m{i}.py" for i in range(3)]
    for f in files:
        f.write_text("import torch\n")
    seen: list[str] = []
    config = load_config(None)
    job = Job(codes=("TL201",), settings=Settings())
    results = run_files(files, job, config, lambda r: seen.append(r.path))
    assert seen == [r.path for r in results] and len(seen) == 3


def _run_on_pty(args: list[str], cwd: Path) -> tuple[int, str, str]:
    """Run the CLI with stderr on a pseudo-terminal (the progress bar's delay set to 0)."""
    boot = (
        "import time, torchlint.progress as p;"
        "p.Progress.__init__.__defaults__ = (0.0, 0.0, time.monotonic);"
        "from torchlint.cli import main; main()"
    )
    master, slave = pty.openpty()
    env = {**os.environ, "NO_COLOR": "1", "TERM": "xterm"}
    proc = subprocess.Popen(
        [sys.executable, "-c", boot, *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=slave,
        env=env,
        text=True,
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    stdout = proc.stdout.read() if proc.stdout else ""
    os.close(master)
    return proc.wait(timeout=60), stdout, b"".join(chunks).decode()


def test_progress_bar_on_a_terminal_only(project):
    for i in range(5):
        (project / f"m{i}.py").write_text(MIXED)
    code, stdout, terminal = _run_on_pty(["check", *SELECT, "."], project)
    assert code == 1
    assert "[" in terminal and "6/6 files, 12 found" in terminal
    assert terminal.endswith("\r\x1b[K")  # erased before the report is read
    assert "\r" not in stdout
    quiet = _run_on_pty(["check", "-q", *SELECT, "."], project)
    assert quiet[2] == ""
    piped = run_cli("check", *SELECT, ".", cwd=project)
    assert "\r" not in piped.stderr and "files" not in piped.stderr
