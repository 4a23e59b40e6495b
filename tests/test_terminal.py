"""Terminal comfort: --quiet, --verbose, --statistics, --show-fixes, the summary (in
ruff's words) and the progress bar."""

from __future__ import annotations

import io
import json
import os
import pty
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from torchlint.cli.progress import Progress
from torchlint.config.load import load_config
from torchlint.reporters import Context
from torchlint.reporters.summary import fixes_applied, summary
from torchlint.results import FileResult, FixRecord, Violation
from torchlint.run.files import run
from torchlint.semantic import Settings

from .conftest import plan_of, run_cli, run_cli_process

# TL405 (no fix: an explicit choice) and TL502 (safe fix, of low impact: shown) on one file
MIXED = """\
import torch
from torch.utils.data import DataLoader

opt.zero_grad(set_to_none=False)
scaler = torch.cuda.amp.GradScaler()
"""
SELECT = ("--select", "TL405,TL502", "--show-low-impact")


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


@pytest.mark.slow
def test_verbose_time_is_the_whole_run(project):
    """What `time` would say: the interpreter's start and the imports count (a run that
    takes 0.6 s must not say "done in 0.00 s")."""
    started = time.monotonic()
    result = run_cli_process("check", "-v", ".", cwd=project)  # the process's start counts
    wall = time.monotonic() - started
    done = re.fullmatch(
        r"torchlint: done in ([\d.]+) s \(([\d.]+) s checking\)", result.stderr.splitlines()[-1]
    )
    assert done is not None, result.stderr
    total, checking = float(done[1]), float(done[2])
    assert checking <= total <= wall + 0.05
    assert total >= wall / 2  # the startup counts (most of such a run: imports)


def test_statistics_count_per_code_instead_of_the_findings(project):
    """As ruff: the table (count, code, [*] when fixable, name) and the summary only."""
    (project / "more.py").write_text(MIXED)
    result = run_cli("check", "--statistics", "--output-format", "concise", *SELECT, cwd=project)
    assert result.returncode == 1
    assert result.stdout == (
        "2\tTL405\t[ ] zero-grad-keeps-zeros\n"
        "2\tTL502\t[*] deprecated-cuda-amp-api  (2 low impact)\n"
        "Found 4 problems.\n"
        "[*] 2 fixable with `--fix`.\n"
    )
    unfixable = run_cli("check", "--statistics", "--select", "TL405", cwd=project)
    assert unfixable.stdout.startswith("2\tTL405\tzero-grad-keeps-zeros\n")  # no [ ] column
    clean = run_cli("check", "--statistics", "--select", "TL201", cwd=project)
    assert clean.returncode == 0 and clean.stdout == ""


def test_statistics_as_json(project):
    result = run_cli("check", "--statistics", "--output-format", "json", *SELECT, cwd=project)
    assert result.returncode == 1
    assert json.loads(result.stdout) == [
        {
            "code": "TL405",
            "name": "zero-grad-keeps-zeros",
            "count": 1,
            "fixable": False,
            "fixable_count": 0,
            "low_impact_count": 0,
            "hidden_count": 0,
        },
        {
            "code": "TL502",
            "name": "deprecated-cuda-amp-api",
            "count": 1,
            "fixable": True,
            "fixable_count": 1,
            "low_impact_count": 1,
            "hidden_count": 0,
        },
    ]
    clean = run_cli(
        "check", "--statistics", "--output-format", "json", "--select", "TL201", cwd=project
    )
    assert json.loads(clean.stdout) == []


def test_statistics_mark_rules_fixable_in_part():
    """ruff: `[*]` every finding of the rule fixable, `[-]` some, `[ ]` none; in JSON,
    `fixable` means all and `fixable_count` says how many."""
    from torchlint.reporters import statistics

    safe = FixRecord("f", "safe")
    found = [
        Violation("TL502", "amp", "m", 1, 1, 1, 2, fix=safe),
        Violation("TL502", "amp", "m", 2, 1, 2, 2),
        Violation("TL405", "zero", "m", 3, 1, 3, 2),
        Violation("TL201", "loader", "m", 4, 1, 4, 2, fix=safe),
    ]
    results = [FileResult("t.py", found)]
    assert statistics.render(results, Context()) == (
        "2\tTL502\t[-] amp\n1\tTL201\t[*] loader\n1\tTL405\t[ ] zero\n"
    )
    rows = json.loads(statistics.render(results, Context(format="json")))
    assert [(r["code"], r["fixable"], r["fixable_count"]) for r in rows] == [
        ("TL502", False, 1),
        ("TL201", True, 1),
        ("TL405", False, 0),
    ]


def test_statistics_refuse_formats_without_a_table(project):
    result = run_cli("check", "--statistics", "--output-format", "github", cwd=project)
    assert result.returncode == 2
    assert "--statistics supports the text, full, concise and json output formats" in (
        result.stderr
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
    assert result.returncode == 1  # TL405 remains: it reports an explicit choice, unfixed
    assert "\nFixed 1 problem:\n- train.py:\n    1 x TL502 (deprecated-cuda-amp-api)\n\n" in (
        result.stdout
    )
    assert result.stdout.endswith("Found 2 problems (1 fixed, 1 remaining).\n")
    assert 'torch.amp.GradScaler("cuda")' in (project / "train.py").read_text()


def _result(path: str, fixed: int, fixes: list[str | None]) -> FileResult:
    violations = [
        Violation("TL999", "x", "m", n, 1, n, 2, FixRecord("t", f) if f else None)
        for n, f in enumerate(fixes, 1)
    ]
    return FileResult(path, violations, fixed=["TL999"] * fixed)


HINT = "{} unsafe fix{} available with `--fix --unsafe-fixes`"


@pytest.mark.parametrize(
    ("results", "expected"),
    [
        ([_result("a", 0, [])], ["All checks passed!"]),
        (
            [_result("a", 0, ["safe", "unsafe", None])],
            ["Found 3 problems.", f"[*] 1 fixable with `--fix` ({HINT.format(1, '')})."],
        ),
        ([_result("a", 0, ["safe"])], ["Found 1 problem.", "[*] 1 fixable with `--fix`."]),
        (
            [_result("a", 0, ["unsafe"] * 2)],
            ["Found 2 problems.", HINT.format(2, "es") + "."],
        ),
        ([_result("a", 0, [None])], ["Found 1 problem."]),
        (
            [_result("a", 3, []), _result("b", 9, [])],
            ["Found 12 problems (12 fixed, 0 remaining)."],
        ),
        (
            [_result("a", 12, ["unsafe", "unsafe"]), _result("b", 0, ["unsafe"])],
            ["Found 15 problems (12 fixed, 3 remaining).", HINT.format(3, "es") + "."],
        ),
        ([_result("a", 0, [None, None])], ["Found 2 problems."]),
    ],
)
def test_summary_in_ruffs_words(results, expected):
    assert summary(results, Context()).splitlines() == expected


def test_fixes_of_findings_other_fixes_brought_about_are_said_and_listed():
    """What `check` showed is what `fix` did, but for these: said, and listed per rule."""
    first = FileResult("a.py", fixed=["TL202", "TL105", "TL105"], later=["TL105"])
    results = [first, FileResult("b.py", fixed=["TL201"])]
    assert summary(results, Context()) == (
        "Found 4 problems (4 fixed, 0 remaining; 1 found only after other fixes).\n"
    )
    assert summary(results, Context(), diff=True) == (
        "Would fix 4 problems (1 found only after other fixes).\n"
    )
    assert fixes_applied(results, Context()) == (
        "\nFixed 4 problems:\n- a.py:\n"
        "    2 x TL105 (blocking-host-to-device-copy), 1 found only after other fixes\n"
        "    1 x TL202 (dataloader-no-pin-memory)\n"
        "- b.py:\n    1 x TL201 (dataloader-sync-loading)\n\n"
    )


def test_summary_without_hints_after_no_unsafe_fixes():
    results = [_result("a", 0, ["unsafe"])]
    assert summary(results, Context(unsafe_hint=False)) == "Found 1 problem.\n"
    assert summary(results, Context(unsafe=True)).endswith("[*] 1 fixable with `--fix`.\n")


@pytest.mark.parametrize(
    ("results", "expected"),
    [
        ([_result("a", 2, [])], "Would fix 2 problems.\n"),
        (
            [_result("a", 1, ["unsafe"])],
            "Would fix 1 problem (1 additional fix available with `--unsafe-fixes`).\n",
        ),
        (
            [_result("a", 0, ["unsafe"] * 2)],
            "No problems would be fixed (2 fixes available with `--unsafe-fixes`).\n",
        ),
        ([_result("a", 0, [None])], ""),
    ],
)
def test_diff_summary(results, expected):
    assert summary(results, Context(), diff=True) == expected


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
    plan = plan_of(config, ("TL201",), Settings())
    results = run(plan, files, on_result=lambda r: seen.append(r.path)).results
    assert seen == [r.path for r in results] and len(seen) == 3


def _run_on_pty(args: list[str], cwd: Path) -> tuple[int, str, str]:
    """Run the CLI with stderr on a pseudo-terminal (the progress bar's delay set to 0)."""
    boot = (
        "import time, torchlint.cli.progress as p;"
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


@pytest.mark.slow
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
