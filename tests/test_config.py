"""Configuration files, precedence and validation errors (exit 2, one clear line)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import LOADER, run_cli


def write_project(root: Path, config: str, name: str = "pyproject.toml") -> None:
    (root / name).write_text(config)
    (root / "src").mkdir()
    (root / "src" / "train.py").write_text(LOADER)
    (root / "tests").mkdir()
    (root / "tests" / "test_train.py").write_text(LOADER)


def codes_by_file(result) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in result.stdout.splitlines():
        if ": TL" in line:
            path, rest = line.split(":", 1)
            out.setdefault(path, []).append(rest.split()[1])
    return out


def test_pyproject_per_file_ignores(tmp_path):
    write_project(tmp_path, '[tool.torchlint]\nper-file-ignores = { "tests/*" = ["TL201"] }\n')
    result = run_cli("check", "--output-format", "concise", ".", cwd=tmp_path)
    assert codes_by_file(result) == {"src/train.py": ["TL201"]}


def test_config_found_from_subdirectory(tmp_path):
    write_project(tmp_path, '[tool.torchlint]\nignore = ["TL201"]\n')
    assert run_cli("check", ".", cwd=tmp_path / "src").returncode == 0


def test_torchlint_toml_and_extend_exclude(tmp_path):
    write_project(tmp_path, 'extend-exclude = ["tests"]\n', name="torchlint.toml")
    result = run_cli("check", "--output-format", "concise", ".", cwd=tmp_path)
    assert codes_by_file(result) == {"src/train.py": ["TL201"]}


def test_cli_select_overrides_config(tmp_path):
    write_project(tmp_path, '[tool.torchlint]\nselect = ["TL1"]\n')
    assert run_cli("check", ".", cwd=tmp_path).returncode == 0
    assert run_cli("check", "--select", "TL201", ".", cwd=tmp_path).returncode == 1
    assert run_cli("check", "--extend-select", "TL201", ".", cwd=tmp_path).returncode == 1


def test_unsafe_fixes_from_config(tmp_path):
    write_project(tmp_path, "[tool.torchlint]\nunsafe-fixes = true\n")
    assert run_cli("fix", "src", cwd=tmp_path).returncode == 0
    assert "NUM_WORKERS" in (tmp_path / "src" / "train.py").read_text()


def test_explicit_config_file(tmp_path):
    write_project(tmp_path, "")
    (tmp_path / "other.toml").write_text('ignore = ["TL2"]\n')
    assert run_cli("check", "--config", "other.toml", ".", cwd=tmp_path).returncode == 0


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("[tool.torchlint]\nselct = []\n", "unknown key `selct` (did you mean `select`?)"),
        ('[tool.torchlint]\nselect = ["TL777"]\n', "unknown rule selector 'TL777'"),
        ('[tool.torchlint]\nselect = "TL201"\n', "`select` must be a list of strings"),
        (
            '[tool.torchlint]\nper-file-ignores = { "a.py" = ["XX1"] }\n',
            "unknown rule selector 'XX1'",
        ),
        ('[tool.torchlint]\ntarget-torch = "two"\n', "target-torch must look like '2.4'"),
        ("[tool.torchlint]\nunsafe-fixes = 1\n", "`unsafe-fixes` must be true or false"),
        ("[tool.torchlint\n", "invalid TOML"),
    ],
)
def test_config_errors(tmp_path, config, message):
    write_project(tmp_path, config)
    result = run_cli("check", ".", cwd=tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert message in result.stderr
    assert "pyproject.toml" in result.stderr


def test_missing_config_file_and_bad_target(tmp_path):
    result = run_cli("check", "--config", "nope.toml", ".", cwd=tmp_path)
    assert result.returncode == 2 and "nope.toml: no such config file" in result.stderr
    result = run_cli("check", "--target-torch", "latest", ".", cwd=tmp_path)
    assert result.returncode == 2 and "--target-torch: target-torch must look like" in result.stderr
