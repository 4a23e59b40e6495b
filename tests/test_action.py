"""action.yml, the composite GitHub Action, run step by step as a runner would.

No GitHub runner here: the test evaluates the `${{ }}` expressions and `if:` conditions
the action uses (contexts, `==`/`!=`, `&&`, `!cancelled()`; step outcomes, and
`continue-on-error` as GitHub applies it), stands in for the `uses:` steps (the pip
cache, the SARIF upload) after checking their inputs, with the outcome the test asks
for, and runs every `run:` script with bash as GitHub does (`bash --noprofile --norc
-eo pipefail`), including the real install of torchlint from the action's directory.
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

pytestmark = pytest.mark.slow  # the GitHub Action's steps, run for real

EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
COMPARISON = re.compile(r"^([\w.-]+) (==|!=) '([^']*)'$")
ACTION = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
UPLOAD = "github/codeql-action/upload-sarif@v4"
ANNOTATION = re.compile(r"^::(error|warning|notice) title=([^:]*)::(.*)$", re.M)


def _lookup(context: dict[str, Any], path: str) -> str:
    value: Any = context
    for part in path.split("."):
        value = value.get(part, "") if isinstance(value, dict) else ""
    return str(value)


def _condition(context: dict[str, Any], text: str, failed: bool) -> bool:
    """An `if:` as GitHub evaluates it; without a status function, `success()` is implied."""
    if not text:
        return not failed
    match = EXPRESSION.fullmatch(text.strip())
    terms = (match[1] if match else text).split(" && ")
    status = False
    result = True
    for term in terms:
        if term in ("!cancelled()", "always()"):
            status = True  # nothing is cancelled here
            continue
        comparison = COMPARISON.match(term)
        assert comparison, f"the emulator cannot evaluate {term!r}"
        equal = _lookup(context, comparison[1]) == comparison[3]
        result = result and (equal if comparison[2] == "==" else not equal)
    return result and (status or not failed)


class Runner:
    """Runs the action's steps in `workspace` with `inputs` (defaults from action.yml);
    the install step runs once, later runs reuse its virtualenv."""

    def __init__(self, tmp: Path, workspace: Path, venv_dir: Path) -> None:
        self.tmp, self.workspace, self.venv_dir = tmp, workspace, venv_dir
        self.summary = tmp / "step_summary.md"
        self.install: tuple[subprocess.CompletedProcess, dict] | None = None  # done once
        self.install_env: dict[str, str] = {}  # the install step's own env:, expanded
        self.failed = False  # whether the last run failed the job

    def run(
        self,
        event: dict[str, Any] | None = None,
        upload_outcome: str = "success",
        **inputs: str,
    ) -> tuple[list[subprocess.CompletedProcess], list[dict]]:
        """Run the steps (`event`: the workflow's event payload; `upload_outcome`: how
        the SARIF upload ends). Returns the scripts run and the `uses:` steps reached."""
        defaults = {k: v.get("default", "") for k, v in ACTION["inputs"].items()}
        context: dict[str, Any] = {
            "inputs": {**defaults, **{k.replace("_", "-"): v for k, v in inputs.items()}},
            "github": {
                "action_path": str(ROOT),
                "repository": "owner/project",
                "event": event or {},
            },
            "runner": {"os": "Linux"},
            "steps": {},
        }

        def expand(value: str) -> str:
            return EXPRESSION.sub(lambda m: _lookup(context, m[1]), value)

        done, reached = [], []
        failed = False
        for step in ACTION["runs"]["steps"]:
            if not _condition(context, step.get("if", ""), failed):
                context["steps"][step.get("id", "")] = {"outcome": "skipped", "outputs": {}}
                continue
            outputs: dict[str, str] = {}
            if step.get("id") == "install" and self.install is not None:
                done.append(self.install[0])
                outcome = "success"
                outputs = self.install[1]
            elif "uses" in step:
                with_ = {k: expand(str(v)) for k, v in step["with"].items()}
                reached.append({"uses": step["uses"], "with": with_})
                outcome = upload_outcome if step["uses"] == UPLOAD else "success"
            else:
                output = self.tmp / f"output-{len(done)}"
                output.write_text("")
                env = {k: expand(v) for k, v in step.get("env", {}).items()}
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
                outcome = "success" if result.returncode == 0 else "failure"
                lines = output.read_text().splitlines()
                outputs = dict(line.split("=", 1) for line in lines if "=" in line)
                if step.get("id") == "install" and outcome == "success":
                    self.install, self.install_env = (result, outputs), env
            context["steps"][step.get("id", "")] = {"outcome": outcome, "outputs": outputs}
            if outcome == "failure" and not step.get("continue-on-error", False):
                failed = True
        self.failed = failed
        return done, reached


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
    steps, reached = runner.run(paths="src", args="--select TL201")
    python, install, check = steps
    assert python.returncode == 0 and install.returncode == 0, python.stdout + install.stderr
    assert install.stdout.strip().startswith("torchlint ")  # the version installed
    assert [s["uses"] for s in reached] == ["actions/cache@v5"]  # no SARIF upload unless asked
    assert check.returncode == 1 and runner.failed, check.stderr
    assert check.stdout.startswith(
        "::warning file=src/train.py,line=3,endLine=3,col=10,endColumn=57,title=torchlint (TL201)::"
    )
    assert "| src/train.py | 3 | TL201 |" in runner.summary.read_text()
    clean = runner.run(paths="src/clean.py")[0][-1]
    assert clean.returncode == 0 and clean.stdout == "" and not runner.failed


def test_installed_version_is_the_actions_own_and_has_no_torch(runner):
    install = runner.run(paths="src/clean.py")[0][1]
    from torchlint import __version__

    assert install.stdout.strip() == f"torchlint {__version__}"
    python = runner.venv_dir / "torchlint-action-venv" / "bin" / "python"
    probe = "import importlib.util as u; print(u.find_spec('torch'))"
    assert subprocess.run([python, "-c", probe], capture_output=True, text=True).stdout == "None\n"


def test_pip_downloads_are_cached_per_python_and_version(runner):
    from torchlint import __version__

    python = runner.run(paths="src/clean.py")[0][0]
    version = python.stdout.split()[1].rstrip(",")
    _, reached = runner.run(paths="src/clean.py")
    cache_dir = runner.venv_dir / "torchlint-pip-cache"
    assert reached == [
        {
            "uses": "actions/cache@v5",
            "with": {
                "path": str(cache_dir),
                "key": f"torchlint-pip-Linux-py{version}-{__version__}",
            },
        }
    ]
    # pip downloads into the cached directory (whether it downloads anything at all
    # depends on where the packages come from: here, often local files it never caches)
    assert runner.install_env["PIP_CACHE_DIR"] == str(cache_dir)
    assert runner.run(paths="src/clean.py", cache="false")[1] == []


def _fake_python(tmp_path: Path, version: str) -> Path:
    fake = tmp_path / f"python{version}"
    fake.write_text(f"#!/bin/sh\necho {version}\n")
    fake.chmod(0o755)
    return fake


@pytest.mark.parametrize("version", ["3.9", "2.7", None])
def test_a_python_too_old_or_missing_is_a_clear_error(runner, tmp_path, version):
    python = str(_fake_python(tmp_path, version)) if version else str(tmp_path / "nope")
    steps, reached = runner.run(paths="src", python=python)
    (check,) = steps  # nothing installed, nothing checked
    assert check.returncode == 1 and reached == []
    (annotation,) = ANNOTATION.findall(check.stdout)
    assert annotation[0] == "error" and "needs Python 3.10 or newer" in annotation[2]
    assert (f"is Python {version};" if version else "was not found") in annotation[2]


def test_sarif_upload_comes_after_the_annotations(runner):
    steps, reached = runner.run(paths="src", args="--select TL201", sarif="true")
    # the Python check, install, annotations (findings: exit 1), SARIF
    assert [s.returncode for s in steps] == [0, 0, 1, 0]
    assert steps[2].stdout.startswith("::warning file=src/train.py,")
    assert reached[1] == {
        "uses": UPLOAD,
        "with": {"sarif_file": "torchlint.sarif", "category": "torchlint"},
    }
    log = json.loads((runner.workspace / "torchlint.sarif").read_text())
    (result,) = log["runs"][0]["results"]
    uri = result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri == "src/train.py"


def test_fork_pull_request_with_a_read_only_token(runner):
    """The upload fails (read-only token): the annotations are there, a notice says why
    the SARIF is missing, and the job's status is the findings' alone."""
    event = {"pull_request": {"head": {"repo": {"full_name": "contributor/project"}}}}
    args = "--select TL201"
    steps, reached = runner.run(
        event=event, upload_outcome="failure", paths="src", args=args, sarif="true"
    )
    assert [s.returncode for s in steps] == [0, 0, 1, 0, 0]
    assert steps[2].stdout.startswith("::warning file=src/train.py,line=3,")
    (notice,) = ANNOTATION.findall(steps[-1].stdout)
    assert notice[:2] == ("notice", "torchlint SARIF not uploaded")
    assert "comes from the fork contributor/project" in notice[2]
    assert [r["uses"] for r in reached] == ["actions/cache@v5", UPLOAD]
    assert runner.failed  # findings remain
    runner.run(event=event, upload_outcome="failure", paths="src/clean.py", sarif="true")
    assert not runner.failed  # a failed upload alone does not fail the job


def test_failed_upload_in_the_same_repository_asks_for_the_permission(runner):
    event = {"pull_request": {"head": {"repo": {"full_name": "owner/project"}}}}
    steps, _ = runner.run(event=event, upload_outcome="failure", paths="src", sarif="true")
    (warning,) = ANNOTATION.findall(steps[-1].stdout)
    assert warning[0] == "warning" and "security-events: write" in warning[2]
    pushed, _ = runner.run(upload_outcome="failure", paths="src", sarif="true")  # a push
    assert ANNOTATION.findall(pushed[-1].stdout)[0][0] == "warning"
