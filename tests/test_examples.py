"""The bundled example project: findings, a full unsafe fix, and the fixed scripts run."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys

import pytest

from .conftest import ROOT, run_cli

SCRIPTS = ("train_classifier.py", "finetune_and_evaluate.py")


@pytest.fixture(scope="module")
def fixed_examples(tmp_path_factory):
    work = tmp_path_factory.mktemp("examples")
    for name in SCRIPTS:
        shutil.copy(ROOT / "examples" / name, work / name)
    before = run_cli("check", "--output-format", "json", *SCRIPTS, cwd=work)
    fixed = run_cli("fix", "--unsafe-fixes", *SCRIPTS, cwd=work)
    after = run_cli("check", "--output-format", "json", *SCRIPTS, cwd=work)
    return work, before, fixed, after


def test_examples_have_findings(fixed_examples):
    _, before, _, _ = fixed_examples
    assert before.returncode == 1
    codes = {item["code"] for item in json.loads(before.stdout)}
    assert {"TL201"} <= codes


def test_fix_leaves_only_findings_without_a_fix(fixed_examples):
    _, _, fixed, after = fixed_examples
    assert "Traceback" not in fixed.stderr and fixed.returncode in (0, 1), fixed.stderr
    remaining = json.loads(after.stdout)
    assert [item for item in remaining if item["fix"] is not None] == []


@pytest.mark.skipif(
    importlib.util.find_spec("torch") is None, reason="running the examples needs torch"
)
@pytest.mark.parametrize("name", SCRIPTS)
def test_fixed_scripts_run_on_cpu(fixed_examples, name):
    work, _, _, _ = fixed_examples
    result = subprocess.run(
        [sys.executable, name], cwd=work, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "epoch 1" in result.stdout
