"""action.yml, the composite GitHub Action, run step by step as a runner would.

No GitHub runner here: the test evaluates the few `${{ }}` expressions the action
uses, skips the `uses:` step (the SARIF upload) after checking its inputs, and runs
every `run:` script with bash as GitHub does (`bash --noprofile --norc -eo pipefail`),
including the real install of torchlint from the action's directory.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import LOADER, ROOT

EXPRESSION = re.compile(r"\$\{\{\s*([\w.-]+)\s*\}\}")
CONDITION = re.compile(r"^([\w.-]+) == '([^']*)'$")
ACTION = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))


def _lookup(context: dict[str, Any], path: str) -> str:
    value: Any = context
    for part in path.split("."):
        value = value.get(part, "") if isinstance(value, dict) else ""
    return str(value)


class Runner:
    """Runs the action's steps in `workspace` with `inputs` (defaults from action.yml);
    the install step runs once, later runs reuse its virtualenv."""

    def __init__(self, tmp: Path, workspace: Path, venv_dir: Path) -> None:
        self.tmp, self.workspace, self.venv_dir = tmp, workspace, venv_dir
        self.summary = tmp / "step_summary.md"
        self.install: tuple[subprocess.CompletedProcess, dict] | None = None  # done once

    def run(self, **inputs: str) -> tuple[list[subprocess.CompletedProcess], list[dict]]:
        defaults = {k: v.get("default", "") for k, v in ACTION["inputs"].items()}
        context: dict[str, Any] = {
            "inputs": {**defaults, **{k.replace("_", "-"): v for k, v in inputs.items()}},
            "github": {"action_path": str(ROOT)},
            "steps": {},
        }
        done, skipped = [], []
        for step in ACTION["runs"]["steps"]:
            if "if" in step:
                match = CONDITION.match(step["if"])
                assert match, f"the emulator cannot evaluate {step['if']!r}"
                if _lookup(context, match[1]) != match[2]:
                    continue
            if step.get("id") == "install" and self.install is not None:
                done.append(self.install[0])
                context["steps"]["install"] = self.install[1]
                continue
            if "uses" in step:
                with_ = {
                    k: EXPRESSION.sub(lambda m: _lookup(context, m[1]), v)
                    for k, v in step["with"].items()
                }
                skipped.append({"uses": step["uses"], "with": with_})
                continue
            output = self.tmp / f"output-{len(done)}"
            output.write_text("")
            env = {
                k: EXPRESSION.sub(lambda m: _lookup(context, m[1]), v)
                for k, v in step.get("env", {}).items()
            }
            result = subprocess.run(
                ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
                cwd=self.workspace,
                env={
                    **os.environ,
                    **env,
                    "RUNNER_TEMP": str(self.venv_dir),
                    "GITHUB_OUTPUT": str(output),
                    "GITHUB_STEP_SUMMARY": str(self.summary),
                    "GITHUB_WORKSPACE": str(self.workspace),
                },
                capture_output=True,
                text=True,
                timeout=600,
            )
            done.append(result)
            if result.returncode != 0:
                break
            pairs = [line.split("=", 1) for line in output.read_text().splitlines() if "=" in line]
            context["steps"][step.get("id", "")] = {"outputs": dict(pairs)}
            if step.get("id") == "install":
                self.install = (result, context["steps"]["install"])
        return done, skipped


@pytest.fixture(scope="module")
def runner(tmp_path_factory) -> Runner:
    tmp = tmp_path_factory.mktemp("action")
    workspace = tmp / "workspace"
    (workspace / "src").mkdir(parents=True)
    (workspace / ".git").mkdir()
    (workspace / "src" / "train.py").write_text(LOADER)
    (workspace / "src" / "clean.py").write_text("import torch\n")
    return Runner(tmp, workspace, tmp / "runner-temp")


def test_run_scripts_take_inputs_only_through_the_environment():
    # `${{ inputs.x }}` pasted into a script is a shell-injection hole
    for step in ACTION["runs"]["steps"]:
        assert "${{" not in step.get("run", ""), step["name"]
        assert step.get("shell", "bash") == "bash"


def test_annotations_and_summary(runner):
    steps, skipped = runner.run(paths="src", args="--select TL201")
    install, check = steps
    assert install.returncode == 0, install.stderr
    assert install.stdout.strip().startswith("torchlint ")  # the version installed
    assert skipped == []  # no SARIF upload unless asked
    assert check.returncode == 1, check.stderr
    assert check.stdout.startswith(
        "::warning file=src/train.py,line=3,endLine=3,col=10,endColumn=56,title=torchlint (TL201)::"
    )
    assert "| src/train.py | 3 | TL201 |" in runner.summary.read_text()
    clean = runner.run(paths="src/clean.py")[0][-1]
    assert clean.returncode == 0 and clean.stdout == ""


def test_installed_version_is_the_actions_own_and_has_no_torch(runner):
    install = runner.run(paths="src/clean.py")[0][0]
    from torchlint import __version__

    assert install.stdout.strip() == f"torchlint {__version__}"
    python = runner.venv_dir / "torchlint-action-venv" / "bin" / "python"
    probe = "import importlib.util as u; print(u.find_spec('torch'))"
    assert subprocess.run([python, "-c", probe], capture_output=True, text=True).stdout == "None\n"


def test_sarif_upload(runner):
    steps, skipped = runner.run(paths="src", args="--select TL201", sarif="true")
    assert [s.returncode for s in steps] == [0, 0, 1]  # install, SARIF, annotations
    assert skipped == [
        {
            "uses": "github/codeql-action/upload-sarif@v3",
            "with": {"sarif_file": "torchlint.sarif", "category": "torchlint"},
        }
    ]
    log = json.loads((runner.workspace / "torchlint.sarif").read_text())
    (result,) = log["runs"][0]["results"]
    uri = result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri == "src/train.py"
