"""The command line behaves as ruff's documentation says ruff behaves, where a ruff user
will reach for the same thing: help, stdin, output files, file and fix selection,
`--add-noqa`, `--show-files`/`--show-settings`, `--watch`, exit codes, sorted output, Ctrl-C.

Each test runs the real `torchlint` in a subprocess; the help of `check` and `fix` is
compared with golden files in tests/golden/ (UPDATE_GOLDEN=1 rewrites them).
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import LOADER, run_cli, run_cli_process
from .test_notebook import lines, notebook
from .test_reporters import check_golden

# TL405 (no fix: an explicit choice) and TL502 (safe fix, of low impact: shown with LOW)
# in one file
LOW = "--show-low-impact"
MIXED = "import torch\n\nopt.zero_grad(set_to_none=False)\nscaler = torch.cuda.amp.GradScaler()\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text(LOADER)
    (tmp_path / "mixed.py").write_text(MIXED)
    return tmp_path


def concise(result) -> list[str]:
    return [line for line in result.stdout.splitlines() if ": TL" in line]


# -- help --------------------------------------------------------------------------


@pytest.mark.parametrize("args", [("-h",), ("check", "-h"), ("fix", "-h"), ("rules", "-h")])
def test_dash_h_is_help(args):
    result = run_cli(*args)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Usage: torchlint")


@pytest.mark.slow
@pytest.mark.parametrize("command", ["check", "fix"])
def test_help_reads_like_ruffs(command):
    """Headings as ruff's, each value named (`<RULE_CODE>`), no Python types, defaults or
    `--x / --no-x` pairs."""
    # the real process: click's test runner forces another width than a terminal's
    result = run_cli_process(command, "--help", env={"COLUMNS": "80"})
    assert result.returncode == 0
    check_golden(f"help.{command}.txt", result.stdout)
    for heading in ("Options:", "Rule selection:", "File selection:", "Miscellaneous:"):
        assert f"\n{heading}\n" in result.stdout
    assert "      --select <RULE_CODE>\n" in result.stdout
    assert "  -o, --output-file <OUTPUT_FILE>\n" in result.stdout
    for wrong in ("<list[str]>", "<str>", "[default: fix]", "[default: no-fix]", " / --no-"):
        assert wrong not in result.stdout
    assert ("      --no-fix\n" in result.stdout) is (command == "fix")


def test_rules_and_rule_help_name_values_not_python_types():
    rule = run_cli("rule", "-h", env={"COLUMNS": "80"})
    assert "Usage: torchlint rule [OPTIONS] <RULE>\n" in rule.stdout
    rules = run_cli("rules", "-h", env={"COLUMNS": "80"})
    assert "      --output-format <OUTPUT_FORMAT>\n" in rules.stdout
    for wrong in ("<str>", "{", "[default:", "[required]"):
        assert wrong not in rule.stdout + rules.stdout


def test_verify_help_names_its_values_and_their_defaults():
    result = run_cli("verify", "-h", env={"COLUMNS": "80"})
    assert "Usage: torchlint verify [OPTIONS] <SCRIPT> [-- ARGS]...\n" in result.stdout
    assert "      --warmup <STEPS>\n" in result.stdout
    assert "(default: 10)" in result.stdout  # a number to choose: its default is said
    for wrong in ("<int>", "<float>", "<path>", "{", "[default:", "[required]"):
        assert wrong not in result.stdout


# -- standard input ------------------------------------------------------------------


def test_stdin_filename_reads_standard_input_even_without_dash(project):
    """ruff: `--stdin-filename` always reads standard input; a path given is ignored."""
    (project / "other.py").write_text(MIXED)
    result = run_cli("check", "--output-format", "concise", "--stdin-filename", "typed.py",
                     input=LOADER, cwd=project)  # fmt: skip
    assert result.returncode == 1
    assert concise(result) == [line for line in concise(result) if line.startswith("typed.py:")]
    assert concise(result) and "other.py" not in result.stdout
    given = run_cli("check", "--stdin-filename", "typed.py", "other.py", input="", cwd=project)
    assert given.returncode == 0, given.stdout + given.stderr
    assert "ignoring other.py in favour of standard input" in given.stderr
    fixed = run_cli("fix", "--unsafe-fixes", "--stdin-filename", "typed.py", input=LOADER,
                    cwd=project)  # fmt: skip
    assert "num_workers=NUM_WORKERS" in fixed.stdout and fixed.returncode == 0


def test_stdin_uses_the_settings_of_the_named_file(project):
    (project / "sub").mkdir()
    (project / "sub" / "pyproject.toml").write_text('[tool.torchlint]\nignore = ["TL201"]\n')
    inside = run_cli("check", "--stdin-filename", "sub/t.py", input=LOADER, cwd=project)
    outside = run_cli("check", "--stdin-filename", "t.py", input=LOADER, cwd=project)
    assert (inside.returncode, outside.returncode) == (0, 1)


def test_an_excluded_stdin_file_passes_through_with_force_exclude(project):
    args = ("--force-exclude", "--extend-exclude", "gen", "--stdin-filename", "gen/t.py")
    check = run_cli("check", *args, input=LOADER, cwd=project)
    assert check.returncode == 0 and check.stdout == ""
    fix = run_cli("fix", "--unsafe-fixes", *args, input=LOADER, cwd=project)
    assert fix.returncode == 0 and fix.stdout == LOADER


# -- output --------------------------------------------------------------------------


def test_output_file_gets_the_report(project):
    result = run_cli(
        "check", LOW, "-o", "reports/lint.json", "--output-format", "json", cwd=project
    )
    assert result.returncode == 1 and result.stdout == ""
    report = json.loads((project / "reports" / "lint.json").read_text())
    assert {item["code"] for item in report} == {"TL201", "TL405", "TL502"}
    text = run_cli("check", LOW, "--output-file", "lint.txt", cwd=project)
    written = (project / "lint.txt").read_text()
    assert text.stdout == "" and "\nFound 3 problems.\n" in written
    assert "\x1b[" not in written


def test_output_is_sorted_by_path_whatever_the_walk_or_argument_order(tmp_path):
    for name in ("z.py", "a/b.py", "a/c/d.py", "m.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(MIXED)
    for args in ((".",), ("z.py", "a", "m.py")):
        result = run_cli("check", "--output-format", "concise", *args, cwd=tmp_path)
        paths = [line.split(":")[0] for line in concise(result)]
        assert paths == sorted(paths) and len(set(paths)) == 4, paths
        as_json = run_cli("check", "--output-format", "json", *args, cwd=tmp_path)
        names = [item["filename"] for item in json.loads(as_json.stdout)]
        assert names == sorted(names)


# -- file and fix selection ------------------------------------------------------------


def test_exclude_and_extend_exclude_on_the_command_line(tmp_path):
    for folder in ("src", "legacy", "build"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "t.py").write_text(MIXED)

    def files(*args: str) -> set[str]:
        result = run_cli("check", "--output-format", "concise", *args, ".", cwd=tmp_path)
        return {line.split("/")[0] for line in concise(result)}

    assert files() == {"src", "legacy"}  # build/ is excluded by default
    assert files("--extend-exclude", "legacy") == {"src"}
    assert files("--exclude", "legacy") == {"src", "build"}  # replaces the defaults, as ruff


def test_unfixable_and_fixable(project):
    no_amp = run_cli("check", LOW, "--unfixable", "TL502", "--output-format", "json", "mixed.py",
                     cwd=project)  # fmt: skip
    assert all(item["fix"] is None for item in json.loads(no_amp.stdout) if item["code"] == "TL502")
    run_cli("fix", LOW, "--unsafe-fixes", "--unfixable", "TL502", ".", cwd=project)
    assert "torch.cuda.amp.GradScaler()" in (project / "mixed.py").read_text()
    assert "num_workers=NUM_WORKERS" in (project / "train.py").read_text()  # TL201's
    (project / "mixed.py").write_text(MIXED)
    (project / "train.py").write_text(LOADER)
    only = run_cli("fix", LOW, "--unsafe-fixes", "--fixable", "TL502", ".", cwd=project)
    assert "torch.amp.GradScaler" in (project / "mixed.py").read_text()
    assert (project / "train.py").read_text() == LOADER
    assert only.returncode == 1 and "[*]" not in only.stdout


def test_fixable_and_unfixable_from_the_config(project):
    (project / "pyproject.toml").write_text('[tool.torchlint]\nunfixable = ["TL502"]\n')
    result = run_cli("fix", "mixed.py", cwd=project)
    assert result.returncode == 1 and (project / "mixed.py").read_text() == MIXED
    (project / "pyproject.toml").write_text('[tool.torchlint]\nfixable = ["TL8"]\n')
    bad = run_cli("check", "mixed.py", cwd=project)
    assert bad.returncode == 2 and "unknown rule selector 'TL8'" in bad.stderr


# -- --add-noqa ------------------------------------------------------------------------


def test_add_noqa_suppresses_every_finding_once(project):
    result = run_cli("check", "--add-noqa", ".", cwd=project)
    assert result.returncode == 0, result.stderr
    assert "added 2 noqa directives" in result.stderr  # not the hidden low-impact one
    assert "opt.zero_grad(set_to_none=False)  # noqa: TL405\n" in (project / "mixed.py").read_text()
    assert run_cli("check", ".", cwd=project).returncode == 0
    again = run_cli("check", "--add-noqa", ".", cwd=project)
    assert again.returncode == 0 and "added" not in again.stderr


def test_add_noqa_in_a_notebook_keeps_magics_and_other_cells(tmp_path):
    head, body = LOADER.split("loader = ")
    cells = (
        ("code", lines("%matplotlib inline\n" + head.rstrip("\n"))),
        ("markdown", ["# Data"]),
        ("code", lines("!pip install foo\nloader = " + body.rstrip("\n"))),
    )
    (tmp_path / "nb.ipynb").write_text(notebook(*cells))
    assert run_cli("check", "--select", "TL201", "nb.ipynb", cwd=tmp_path).returncode == 1
    result = run_cli("check", "--add-noqa", "--select", "TL201", "nb.ipynb", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "added 1 noqa directive" in result.stderr
    sources = [c["source"] for c in json.loads((tmp_path / "nb.ipynb").read_text())["cells"]]
    assert sources[:2] == [cells[0][1], ["# Data"]]
    assert sources[2][:2] == [
        "!pip install foo\n",
        "loader = DataLoader(ds, batch_size=256, pin_memory=True)  # noqa: TL201\n",
    ]
    assert sources[2][2:] == cells[2][1][2:]
    assert run_cli("check", "--select", "TL201", "nb.ipynb", cwd=tmp_path).returncode == 0


@pytest.mark.parametrize(
    "other", [("--fix",), ("--diff",), ("--statistics",), ("--stdin-filename", "x.py")]
)
def test_add_noqa_conflicts_as_in_ruff(project, other):
    result = run_cli("check", "--add-noqa", *other, ".", cwd=project, input="")
    assert result.returncode == 2 and "cannot be used together" in result.stderr
    assert (project / "mixed.py").read_text() == MIXED


# -- --show-files, --show-settings, -v ----------------------------------------------------


def test_show_files_lists_what_would_be_checked(project):
    (project / "build").mkdir()
    (project / "build" / "gen.py").write_text(MIXED)
    (project / "nb.ipynb").write_text(notebook(("code", ["x = 1"])))
    result = run_cli("check", "--show-files", cwd=project)
    assert result.returncode == 0
    assert result.stdout.splitlines() == ["mixed.py", "nb.ipynb", "train.py"]


def test_show_settings_for_the_first_file(project):
    (project / "pyproject.toml").write_text(
        '[tool.torchlint]\nselect = ["TL2", "TL4"]\ntarget-torch = "2.4"\n'
        'per-file-ignores = { "mixed.py" = ["TL405"] }\n'
    )
    result = run_cli("check", "--show-settings", "mixed.py", cwd=project)
    assert result.returncode == 0
    out = result.stdout.splitlines()
    assert out[0] == "Resolved settings for: mixed.py"
    assert out[1] == f"Settings path: {project.resolve() / 'pyproject.toml'}"
    assert 'target-torch = "2.4"' in out
    rules = json.loads(next(line for line in out if line.startswith("rules = ")).split(" = ")[1])
    assert "TL201" in rules and "TL405" not in rules and "TL502" not in rules


def test_target_torch_must_be_a_string_and_verbose_shows_it(project):
    (project / "pyproject.toml").write_text("[tool.torchlint]\ntarget-torch = 2.10\n")
    bad = run_cli("check", ".", cwd=project)
    assert bad.returncode == 2
    assert '`target-torch` must be a string such as "2.4", got 2.1 (a TOML number' in bad.stderr
    (project / "pyproject.toml").write_text('[tool.torchlint]\ntarget-torch = "2.10"\n')
    verbose = run_cli("check", "-v", ".", cwd=project)
    assert "torchlint: target-torch: 2.10" in verbose.stderr.splitlines()


# -- exit codes, cache ------------------------------------------------------------------


def test_exit_zero_short_flag_and_exit_non_zero_on_fix(project):
    assert run_cli("check", "-e", ".", cwd=project).returncode == 0
    fixed = run_cli("fix", LOW, "--select", "TL502", "mixed.py", cwd=project)
    assert fixed.returncode == 0  # all fixed: nothing remains
    (project / "mixed.py").write_text(MIXED)
    strict = run_cli(
        "fix", LOW, "--exit-non-zero-on-fix", "--select", "TL502", "mixed.py", cwd=project
    )
    assert strict.returncode == 1 and "torch.amp.GradScaler" in (project / "mixed.py").read_text()
    nothing = run_cli(
        "fix", LOW, "--exit-non-zero-on-fix", "--select", "TL502", "mixed.py", cwd=project
    )
    assert nothing.returncode == 0  # nothing left to change
    both = run_cli("check", "-e", "--exit-non-zero-on-fix", cwd=project)
    assert both.returncode == 2 and "cannot be used together" in both.stderr


def test_dash_n_neither_reads_nor_writes_the_cache(project):
    env = {"TORCHLINT_CACHE_DIR": str(project / "cache")}
    run_cli("check", "-n", ".", cwd=project, env=env)
    assert not (project / "cache").exists()
    run_cli("check", ".", cwd=project, env=env)
    assert (project / "cache").exists()


# -- --watch ---------------------------------------------------------------------------


def test_watch_runs_again_when_a_checked_file_changes_and_ctrl_c_ends_it(tmp_path):
    (tmp_path / "train.py").write_text(LOADER)
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    with out.open("w") as stdout, err.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "torchlint", "check", "--watch", "--no-cache", "."],
            cwd=tmp_path,
            env={**os.environ, "NO_COLOR": "1"},
            stdout=stdout,
            stderr=stderr,
            # Ctrl-C reaches it even where this test runs in a background job (ignored there)
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
    try:
        _wait_for(out, "Found 1 problem.", process)
        fixed = LOADER.replace("pin_memory=True)", "pin_memory=True, num_workers=2)")
        (tmp_path / "train.py").write_text(fixed)
        _wait_for(out, "All checks passed!", process)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0
    finally:
        process.kill()
    said = err.read_text()
    assert said.splitlines() == [
        "torchlint: Starting linter in watch mode...",
        "torchlint: File change detected...",
    ]
    assert "\x1b[" not in out.read_text()  # the screen is cleared on a terminal only


def _wait_for(path: Path, text: str, process: subprocess.Popen, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while text not in path.read_text():
        assert process.poll() is None and time.monotonic() < deadline, path.read_text()
        time.sleep(0.05)


def test_watch_clears_a_terminal_before_each_run_and_stops_on_ctrl_c(monkeypatch):
    from torchlint.cli import watch

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    monkeypatch.setattr(watch, "POLL_S", 0)
    runs, polls = [], iter(range(100))

    def run() -> int:
        runs.append(terminal.getvalue().count("\x1b[2J"))
        if len(runs) == 3:
            raise KeyboardInterrupt
        return 1

    assert watch.watch(run, lambda: {Path("x.py"): (next(polls) // 2, 1)}, quiet=True) == 0
    assert runs == [1, 2, 3]
    assert watch.watch(lambda: 130, dict, quiet=True) == 0  # Ctrl-C while fixing


def test_watch_stamps_the_config_file_not_the_settings_given_with_config(tmp_path):
    """`--config FILE` is watched; a `--config KEY = VALUE` setting is not a file to
    stamp; with --isolated no config file is."""
    from torchlint.cli.check import _watched
    from torchlint.cli.flags import CheckOptions

    (tmp_path / "train.py").write_text("import torch\n")
    config = tmp_path / "torchlint.toml"
    config.write_text("select = ['TL201']\n")
    paths = [str(tmp_path)]
    given = CheckOptions(paths=paths, config=[str(config), "min-batch-size = 64"])
    assert set(_watched(given, paths)) == {config, tmp_path / "train.py"}
    isolated = CheckOptions(paths=paths, config=["min-batch-size = 64"], isolated=True)
    assert set(_watched(isolated, paths)) == {tmp_path / "train.py"}


@pytest.mark.parametrize(
    "other",
    [("--add-noqa",), ("--show-files",), ("--show-settings",), ("--stdin-filename", "x.py")],
)
def test_watch_conflicts_as_in_ruff(project, other):
    result = run_cli("check", "--watch", *other, ".", cwd=project, input="")
    assert result.returncode == 2 and "cannot be used together" in result.stderr


# -- Ctrl-C while fixing ------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["1", "2"])
def test_ctrl_c_while_fixing_names_every_file_rewritten(tmp_path, workers):
    """The first Ctrl-C lets the files in progress finish and stops; the files rewritten
    are listed, exactly: no file is ever cut off between its read and its write."""
    filler = "".join(f"def helper_{i}(x):\n    return x + {i}\n\n\n" for i in range(150))
    names = [f"f{i:03}.py" for i in range(160)]
    for name in names:
        (tmp_path / name).write_text(LOADER + filler)
    env = {**os.environ, "NO_COLOR": "1", "TORCHLINT_WORKERS": workers}
    process = subprocess.Popen(
        [sys.executable, "-m", "torchlint", "fix", "--no-cache", "--unsafe-fixes", "."],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not any("NUM_WORKERS" in (tmp_path / n).read_text() for n in names[:: len(names) // 8]):
        assert process.poll() is None and time.monotonic() < deadline, "no file was fixed"
        time.sleep(0.02)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    changed = sorted(n for n in names if "NUM_WORKERS" in (tmp_path / n).read_text())
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    listed = [line.strip() for line in stderr.splitlines() if line.startswith("  ")]
    files = f"{len(changed)} file{'' if len(changed) == 1 else 's'}"  # one file, when quick
    assert f"torchlint: interrupted: {files} rewritten before the run stopped:" in stderr
    assert listed == changed and 0 < len(changed) < len(names)
    assert not list(tmp_path.glob(".*.torchlint"))  # no temporary file left behind


# -- --fix-only, --isolated, --config KEY = VALUE, --per-file-ignores --------------------

ONE_UNSAFE = "(1 additional fix available with `--unsafe-fixes`)"


def test_fix_only_fixes_and_reports_nothing_left(project):
    """As ruff's: the fixes applied, said in one line; the findings left neither reported
    nor counted in the exit code (unless --exit-non-zero-on-fix, for files changed)."""
    result = run_cli("check", LOW, "--fix-only", ".", cwd=project)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == f"Fixed 1 problem {ONE_UNSAFE}.\n"  # TL502; not TL405 nor TL201
    assert "torch.amp.GradScaler" in (project / "mixed.py").read_text()
    again = run_cli("check", LOW, "--fix-only", ".", cwd=project)
    assert again.returncode == 0
    assert again.stdout == "No problems fixed (1 fix available with `--unsafe-fixes`).\n"
    strict = ("--fix-only", "--exit-non-zero-on-fix", "--unsafe-fixes", ".")
    unsafe = run_cli("check", "--no-fix", *strict, cwd=project)  # --fix-only implies --fix
    assert (unsafe.returncode, unsafe.stdout) == (1, "Fixed 1 problem.\n")
    assert "num_workers=NUM_WORKERS" in (project / "train.py").read_text()
    nothing = run_cli("fix", *strict, cwd=project)
    assert (nothing.returncode, nothing.stdout) == (0, "")  # TL405 left, not reported
    off = run_cli("fix", "--fix-only", "--no-fix-only", ".", cwd=project)
    assert off.returncode == 1 and "mixed.py:3:1: TL405" in off.stdout


def test_fix_only_with_diff_show_fixes_formats_quiet_stdin_and_errors(project):
    diff = run_cli("check", LOW, "--fix-only", "--diff", ".", cwd=project)
    assert diff.returncode == 1 and '+scaler = torch.amp.GradScaler("cuda")' in diff.stdout
    assert diff.stderr == f"Would fix 1 problem {ONE_UNSAFE}.\n"
    assert (project / "mixed.py").read_text() == MIXED
    for quiet in (("--output-format", "json"), ("-q",)):
        (project / "mixed.py").write_text(MIXED)
        silent = run_cli("check", LOW, "--fix-only", *quiet, ".", cwd=project)
        assert (silent.returncode, silent.stdout, silent.stderr) == (0, "", "")
        assert "torch.amp.GradScaler" in (project / "mixed.py").read_text()
    (project / "mixed.py").write_text(MIXED)
    shown = run_cli("check", LOW, "--fix-only", "--show-fixes", ".", cwd=project)
    assert shown.stdout == (
        "\nFixed 1 problem:\n- mixed.py:\n    1 x TL502 (deprecated-cuda-amp-api)\n\n"
        f"Fixed 1 problem {ONE_UNSAFE}.\n"
    )
    stdin = run_cli("fix", "--fix-only", "--unsafe-fixes", "-", input=LOADER, cwd=project)
    assert stdin.returncode == 0 and stdin.stderr == "Fixed 1 problem.\n"
    assert "pin_memory=True, num_workers=NUM_WORKERS)\n" in stdin.stdout  # the code only
    assert stdin.stdout.endswith(LOADER.split("\n", 3)[3])
    (project / "broken.py").write_text("x = (\n")
    broken = run_cli("check", "--fix-only", ".", cwd=project)
    assert broken.returncode == 2 and "TL000" not in broken.stdout  # no report, but said:
    assert "torchlint: error: broken.py: syntax error at 1:5: '(' was never closed" in (
        broken.stderr
    )
    for other in ("--statistics", "--add-noqa"):
        refused = run_cli("check", "--fix-only", other, ".", cwd=project)
        assert refused.returncode == 2
        assert (
            refused.stderr == f"torchlint: error: {other} and --fix-only cannot be used together\n"
        )


def test_isolated_ignores_the_config_files(project):
    (project / "pyproject.toml").write_text('[tool.torchlint]\nignore = ["TL201"]\n')
    assert run_cli("check", "train.py", cwd=project).returncode == 0
    isolated = run_cli("check", "--isolated", "--output-format", "concise", "train.py",
                       cwd=project)  # fmt: skip
    assert isolated.returncode == 1 and concise(isolated)[0].startswith("train.py:3:10: TL201 ")
    settings = run_cli("check", "--isolated", "--show-settings", "train.py", cwd=project)
    assert "Settings path: none (defaults)" in settings.stdout.splitlines()
    both = run_cli("check", "--isolated", "--config", "pyproject.toml", ".", cwd=project)
    assert both.returncode == 2 and both.stderr == (
        "torchlint: error: --config pyproject.toml cannot be used with --isolated, which "
        "ignores every configuration file\n"
    )


def test_config_settings_on_the_command_line(project):
    (project / "pyproject.toml").write_text("[tool.torchlint]\nmin-batch-size = 8\n")
    ignoring = run_cli("check", "--config", 'ignore = ["TL201"]', "train.py", cwd=project)
    assert ignoring.returncode == 0
    settings = run_cli("check", "--show-settings", "--config", "min-batch-size = 64",
                       "--config", "unsafe-fixes = true", "train.py", cwd=project)  # fmt: skip
    lines = settings.stdout.splitlines()
    assert "unsafe-fixes = true" in lines
    assert any(line.startswith("min-batch-size = 64  # int") for line in lines)
    for setting, why in [
        ("min-batch = 64", "unknown key `min-batch` (did you mean `min-batch-size`?)"),
        ("min-batch-size = 1", "`min-batch-size` must be from 2 to 65536, got 1"),
        ("select = [TL201]", "invalid TOML: Invalid value (at line 1, column 11)"),
        ("settings.toml", "no such config file, nor a TOML `KEY = VALUE` pair"),
    ]:
        bad = run_cli("check", "--config", setting, ".", cwd=project)
        assert bad.returncode == 2
        assert bad.stderr == f"torchlint: error: --config {setting!r}: {why}\n"


def test_per_file_ignores_on_the_command_line(project):
    (project / "pyproject.toml").write_text(
        '[tool.torchlint]\nper-file-ignores = { "mixed.py" = ["TL405"] }\n'
    )

    def found(*args: str) -> list[str]:
        result = run_cli("check", "--output-format", "concise", *args, ".", cwd=project)
        return [line.split(":")[0] + " " + line.split()[1] for line in concise(result)]

    assert found() == ["train.py TL201"]
    assert found("--per-file-ignores", "train.py:TL201") == ["mixed.py TL405"]  # replaced
    assert found("--extend-per-file-ignores", "train.py:TL2") == []
    assert found("--per-file-ignores", "*.py:TL201,TL405") == []
    settings = run_cli("check", "--show-settings", "--extend-per-file-ignores", "t*.py:TL2",
                       "train.py", cwd=project)  # fmt: skip
    lines = settings.stdout.splitlines()
    assert 'extend-per-file-ignores = { "t*.py" = ["TL2"] }' in lines
    rules = json.loads(next(line for line in lines if line.startswith("rules = ")).split(" = ")[1])
    assert "TL101" in rules and not [code for code in rules if code.startswith("TL2")]
    bad = run_cli("check", "--per-file-ignores", "TL201", ".", cwd=project)
    assert bad.returncode == 2 and bad.stderr == (
        "torchlint: error: --per-file-ignores 'TL201': expected PATTERN:CODES, such as "
        "'tests/*:TL201,TL202'\n"
    )


# The same options in a real process: what the shell passes, and no traceback on bad input.


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "code", "said"),
    [
        (("--fix-only", LOW), 0, f"Fixed 1 problem {ONE_UNSAFE}.\n"),
        (("--fix-only", "--statistics"), 2, "--statistics and --fix-only cannot be used"),
        (("--isolated", "--output-format", "concise"), 1, "train.py:3:10: TL201 "),
        (("--isolated", "--config", "pyproject.toml"), 2, "cannot be used with --isolated"),
        (("--config", 'ignore = ["TL201"]'), 0, "All checks passed!\n"),
        (("--config", "ignore = TL201"), 2, "--config 'ignore = TL201': invalid TOML: "),
        (("--config", "ignor = []"), 2, "unknown key `ignor` (did you mean `ignore`?)"),
        (("--per-file-ignores", "t*.py:TL201"), 0, "All checks passed!\n"),
        (("--extend-per-file-ignores", "train.py"), 2, "expected PATTERN:CODES"),
    ],
)
def test_the_ruff_options_in_a_real_process(project, args, code, said):
    (project / "pyproject.toml").write_text('[tool.torchlint]\nignore = ["TL405"]\n')
    result = run_cli_process("check", "--no-cache", *args, ".", cwd=project)
    assert result.returncode == code, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert said in (result.stdout if code < 2 else result.stderr)
    fixed = "torch.amp.GradScaler" in (project / "mixed.py").read_text()
    assert fixed is (args[0] == "--fix-only" and code == 0)
