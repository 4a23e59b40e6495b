"""The `torchlint` command, run as a user runs it: a real subprocess."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from torchlint import __version__

from .conftest import FIXTURES, LOADER, run_cli, run_cli_unprivileged, unprivileged


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text(LOADER)
    (tmp_path / "clean.py").write_text("import torch\nx = torch.zeros(3)\n")
    return tmp_path


def test_version():
    result = run_cli("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"torchlint {__version__}"


def test_check_reports_with_excerpt_and_summary(project):
    result = run_cli("check", ".", cwd=project)
    assert result.returncode == 1
    assert "train.py:3:10: TL201 " in result.stdout
    assert "3 | loader = DataLoader(ds, batch_size=256, pin_memory=True)" in result.stdout
    assert " ^" + "^" * 46 + " TL201" in result.stdout
    assert "help: Set `num_workers=NUM_WORKERS` (unsafe fix" in result.stdout
    assert result.stdout.endswith(
        "Found 1 problem.\n1 unsafe fix available with `--fix --unsafe-fixes`.\n"
    )
    assert "\x1b[" not in result.stdout  # no colour when not a terminal


def test_clean_file_exits_zero(project):
    result = run_cli("check", "clean.py", cwd=project)
    assert result.returncode == 0 and "All checks passed!" in result.stdout


def test_exit_zero_and_concise(project):
    result = run_cli("check", "--exit-zero", "--output-format", "concise", ".", cwd=project)
    assert result.returncode == 0
    assert result.stdout.splitlines()[0].startswith("train.py:3:10: TL201 DataLoader without")


def test_json_output_schema(project):
    result = run_cli("check", "--output-format", "json", "train.py", cwd=project)
    (item,) = json.loads(result.stdout)
    assert item["code"] == "TL201" and item["name"] == "dataloader-sync-loading"
    assert item["location"] == {"row": 3, "column": 10}
    assert item["fix"]["applicability"] == "unsafe" and item["fix"]["edits"]
    assert item["filename"] == "train.py"


def test_fix_unsafe_then_check_is_clean(project):
    result = run_cli("fix", "--unsafe-fixes", ".", cwd=project)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Found 1 problem (1 fixed, 0 remaining)." in result.stdout
    assert "num_workers=NUM_WORKERS" in (project / "train.py").read_text()
    again = run_cli("check", ".", cwd=project)
    assert again.returncode == 0


def test_fix_without_unsafe_changes_nothing(project):
    before = (project / "train.py").read_bytes()
    result = run_cli("check", "--fix", "train.py", cwd=project)
    assert result.returncode == 1 and (project / "train.py").read_bytes() == before


def test_diff_writes_nothing(project):
    before = (project / "train.py").read_bytes()
    result = run_cli("fix", "--diff", "--unsafe-fixes", "train.py", cwd=project)
    assert result.returncode == 1
    assert "+loader = DataLoader(ds, batch_size=256, pin_memory=True, num_workers=NUM_WORKERS)" in (
        result.stdout
    )
    assert "--- train.py" in result.stdout
    assert (project / "train.py").read_bytes() == before


def test_stdin(project):
    result = run_cli("check", "-", input=LOADER, cwd=project)
    assert result.returncode == 1 and "-:3:10: TL201" in result.stdout
    fixed = run_cli(
        "fix", "--unsafe-fixes", "-", "--stdin-filename", "x.py", input=LOADER, cwd=project
    )
    assert fixed.returncode == 0
    assert "pin_memory=True, num_workers=NUM_WORKERS)" in fixed.stdout


def test_select_and_ignore(project):
    assert run_cli("check", "--ignore", "TL201", ".", cwd=project).returncode == 0
    assert run_cli("check", "--select", "TL2", ".", cwd=project).returncode == 1
    assert run_cli("check", "--select", "ALL", "--ignore", "TL", ".", cwd=project).returncode == 0
    bad = run_cli("check", "--select", "TL9999", ".", cwd=project)
    assert bad.returncode == 2 and "unknown rule selector 'TL9999'" in bad.stderr


def test_rules_and_rule():
    table = run_cli("rules")
    assert table.returncode == 0
    assert "TL201  dataloader-sync-loading" in table.stdout
    doc = run_cli("rule", "TL201")
    assert doc.returncode == 0 and doc.stdout.startswith("TL201 dataloader-sync-loading:")
    assert "Fix (unsafe)" in doc.stdout
    unknown = run_cli("rule", "TL000")
    assert unknown.returncode == 2 and "unknown rule" in unknown.stderr


def test_bad_output_format(project):
    result = run_cli("check", "--output-format", "xml", ".", cwd=project)
    assert result.returncode == 2 and "unknown output format" in result.stderr


# -- bad input: one line naming the file and the reason, the run goes on, exit 2 ----


def _errors(result) -> list[str]:
    assert "Traceback" not in result.stderr, result.stderr
    return [line for line in result.stderr.splitlines() if line.startswith("torchlint: error:")]


def test_bad_inputs_each_reported_and_run_continues(tmp_path):
    (tmp_path / "syntax.py").write_text(LOADER + "def f(:\n")
    (tmp_path / "latin.py").write_bytes(b"import torch\nname = '\xe9'\n")
    (tmp_path / "binary.py").write_bytes(b"\x00\x01torch\x00")
    (tmp_path / "bad_coding.py").write_bytes(b"# -*- coding: klingon -*-\nimport torch\n")
    (tmp_path / "good_latin1.py").write_bytes(
        b"# -*- coding: latin-1 -*-\nimport torch\n\nopt.zero_grad(set_to_none=False)  # caf\xe9\n"
    )
    (tmp_path / "empty.py").write_text("")
    (tmp_path / "loop.py").symlink_to(tmp_path / "loop.py")
    result = run_cli("check", "--output-format", "concise", ".", "missing.py", cwd=tmp_path)
    assert result.returncode == 2
    assert _errors(result) == []  # in the report on the terminal, not repeated on stderr
    records = [line for line in result.stdout.splitlines() if ": TL9" in line or ": TL0" in line]
    assert records[0].startswith("bad_coding.py:1:1: TL900 ")
    assert records[1] == "binary.py:1:1: TL900 binary file (contains NUL bytes)"
    assert records[2].startswith("latin.py:1:1: TL900 cannot decode as utf-8")
    assert records[3].startswith("loop.py:1:1: TL900 ")
    assert records[4] == "missing.py:1:1: TL900 no such file or directory"
    assert records[5].startswith("syntax.py:10:7: TL000 SyntaxError: ")
    assert len(records) == 6
    # The valid files were still linted.
    assert "good_latin1.py:4:1: TL405" in result.stdout
    # Read by a program, the report holds them as records, and stderr says them too.
    result = run_cli("check", "--output-format", "json", ".", "missing.py", cwd=tmp_path)
    assert result.returncode == 2
    items = json.loads(result.stdout)
    assert [(i["filename"], i["code"], i["name"]) for i in items if i["code"] != "TL405"] == [
        ("bad_coding.py", "TL900", "io-error"),
        ("binary.py", "TL900", "io-error"),
        ("latin.py", "TL900", "io-error"),
        ("loop.py", "TL900", "io-error"),
        ("missing.py", "TL900", "io-error"),
        ("syntax.py", "TL000", "invalid-syntax"),
    ]
    errors = _errors(result)
    assert "torchlint: error: syntax.py: syntax error at 10:7: " in "\n".join(errors)
    assert len(errors) == 6


@pytest.mark.parametrize(
    ("source", "where"),
    [
        ("import torch\nx = torch.zeros(3\n", "2:16: '(' was never closed"),
        ("import torch\nx = (\n", "2:5: '(' was never closed"),
        (LOADER + "x = (\n", "10:5: '(' was never closed"),
    ],
)
@pytest.mark.parametrize("args", [(), ("--output-format", "json"), ("--fix",)])
def test_a_syntax_error_is_exit_2_with_cpythons_position(tmp_path, source, where, args):
    """Also in a file that holds none of the rules' tokens (not analysed, but checked):
    a TL000 record where CPython puts the error, in the report; on stderr too when a
    program reads the report."""
    (tmp_path / "f.py").write_text(source)
    result = run_cli("check", "--no-cache", *args, "f.py", cwd=tmp_path)
    assert result.returncode == 2
    position, message = where.split(": ", 1)
    if "json" in args:
        assert _errors(result) == [f"torchlint: error: f.py: syntax error at {where}"]
        [item] = json.loads(result.stdout)
        assert item["code"] == "TL000" and item["message"] == f"SyntaxError: {message}"
        assert f"{item['location']['row']}:{item['location']['column']}" == position
    else:
        assert _errors(result) == []
        assert result.stdout.startswith(f"f.py:{position}: TL000 SyntaxError: {message}\n")
    assert (tmp_path / "f.py").read_text() == source


@pytest.mark.slow
@unprivileged
def test_unreadable_file(tmp_path):
    target = tmp_path / "secret.py"
    target.write_text(LOADER)
    target.chmod(0)
    os.chmod(tmp_path, 0o755)
    result = run_cli_unprivileged("check", "--output-format", "concise", "secret.py", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout.startswith("secret.py:1:1: TL900 permission denied\n")


def test_empty_directory_is_a_warning(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    result = run_cli("check", ".", cwd=tmp_path)
    assert result.returncode == 0
    assert "warning: .: no Python files found" in result.stderr


def test_symlink_loop_directory(tmp_path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    result = run_cli("check", "a", cwd=tmp_path)
    assert result.returncode == 2 and result.stdout.startswith("a:1:1: TL900 symlink loop\n")


def test_gitignore_and_exclude(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("generated/\n")
    for folder in ("generated", "src", ".venv", "build"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "train.py").write_text(LOADER)
    result = run_cli("check", "--output-format", "concise", ".", cwd=tmp_path)
    assert [line.split(":")[0] for line in result.stdout.splitlines() if "TL201" in line] == [
        "src/train.py"
    ]
    explicit = run_cli("check", "--output-format", "concise", "build/train.py", cwd=tmp_path)
    assert "build/train.py:3:10: TL201" in explicit.stdout
    forced = run_cli("check", "--force-exclude", "build/train.py", cwd=tmp_path)
    assert forced.returncode == 0


def test_crlf_and_bom_and_mode_preserved(tmp_path):
    target = tmp_path / "train.py"
    target.write_bytes(b"\xef\xbb\xbf" + LOADER.replace("\n", "\r\n").encode())
    target.chmod(0o751)
    result = run_cli("fix", "--unsafe-fixes", "train.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    data = target.read_bytes()
    assert data.startswith(b"\xef\xbb\xbfimport os\r\n\r\nimport torch\r\n")
    assert b"num_workers=NUM_WORKERS)\r\n" in data
    assert b"\n" not in data.replace(b"\r\n", b"")
    assert target.stat().st_mode & 0o777 == 0o751


def test_fixture_check_matches_marks():
    bad = FIXTURES / "TL201" / "bad.py"
    result = run_cli("check", "--select", "TL201", "--output-format", "concise", str(bad))
    lines = {int(line.split(":")[1]) for line in result.stdout.splitlines() if ": TL201" in line}
    marked = {
        n for n, text in enumerate(bad.read_text().splitlines(), 1) if "# error: TL201" in text
    }
    assert lines == marked


def test_excludes_apply_below_the_named_directory_only(tmp_path):
    # A project inside a folder whose name is excluded by default (a venv's site-packages).
    package = tmp_path / "venv" / "lib" / "site-packages" / "pkg"
    (package / "build").mkdir(parents=True)
    (package / "train.py").write_text(LOADER)
    (package / "build" / "gen.py").write_text(LOADER)
    result = run_cli("check", "--output-format", "concise", str(package), cwd=tmp_path)
    assert [line.split(":")[0] for line in result.stdout.splitlines() if "TL201" in line] == [
        "venv/lib/site-packages/pkg/train.py"
    ]


@pytest.mark.parametrize(
    ("typo", "offered"),
    [("--bogus", None), ("--selct", "--select"), ("--verbos", "--verbose"), ("--fxi", "--fix")],
)
def test_a_mistyped_option_is_offered_only_close_names(tmp_path, typo, offered):
    result = run_cli("check", typo, cwd=tmp_path)
    assert result.returncode == 2
    error = result.stderr.splitlines()[-1]
    assert error.startswith(f"Error: No such option: {typo}")
    assert error.endswith(f"(Possible options: {offered})") if offered else error.endswith(typo)
