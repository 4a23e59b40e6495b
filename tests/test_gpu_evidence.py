"""benchmarks/gpu_evidence.sh end to end on this machine, the way the GPU machine runs it:
a Python that has torch but lacks libcst, PyYAML and pathspec, their wheels in a folder
(made here from the installed distributions: no network), and no GPU (the fallback)."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from .conftest import ROOT, needs_the_profiler_matcher

pytestmark = [
    pytest.mark.slow,  # benchmarks/gpu_evidence.sh end to end, in venvs
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="it runs torch"),
]


SCRIPT = ROOT / "benchmarks" / "gpu_evidence.sh"
LACKING = ("libcst", "PyYAML", "pathspec")  # what the GPU machine lacks
HIDDEN = ("libcst", "yaml", "_yaml", "pyyaml", "pathspec", "torchlint", "__editable__")


def bare_python(tmp_path: Path) -> Path:
    """A venv that sees this environment's packages (torch, typer, pip...) except the
    distributions in LACKING and torchlint itself."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.lower().startswith(HIDDEN) and entry.suffix != ".pth":
            (shadow / entry.name).symlink_to(entry)
    venv = tmp_path / "py"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python*/site-packages"))
    (site / "shadow.pth").write_text(f"{shadow}\n")
    return venv / "bin" / "python"


def repack(name: str, folder: Path) -> Path:
    """The wheel an installed distribution came from, rebuilt from its installed files."""
    dist = metadata.distribution(name)
    wheel = dist.read_text("WHEEL") or ""
    tag = next(
        line.split(":", 1)[1].strip() for line in wheel.splitlines() if line.startswith("Tag:")
    )
    info = next(f.parent for f in dist.files or () if f.name == "METADATA")  # NAME-VER.dist-info
    path = folder / f"{info.name.removesuffix('.dist-info')}-{tag}.whl"
    record = f"{info}/RECORD"
    lines = []
    with zipfile.ZipFile(path, "w") as z:
        for f in dist.files or ():
            skip = {"RECORD", "INSTALLER", "REQUESTED", "direct_url.json"}
            if ".." in f.parts or "__pycache__" in f.parts or f.name in skip:
                continue
            data = Path(str(dist.locate_file(f))).read_bytes()
            z.writestr(str(f), data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            lines.append(f"{f},sha256={digest.decode()},{len(data)}")
        z.writestr(record, "\n".join([*lines, f"{record},,"]) + "\n")
    return path


def run_script(*args: str, python: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(
        ["bash", str(SCRIPT), "--python", str(python), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=400,
    )


def test_end_to_end_on_the_cpu_with_wheels(tmp_path):
    needs_the_profiler_matcher()  # the script's profile_cuda step runs --profile
    python = bare_python(tmp_path)
    probe = subprocess.run([str(python), "-c", "import torch, typer, libcst"], capture_output=True)
    assert probe.returncode != 0  # like the GPU machine: torch, typer, no libcst
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for name in LACKING:
        repack(name, wheels)
    out = tmp_path / "out"
    short = [
        "--repeats",
        "1",
        "--warmup-runs",
        "0",
        "--window",
        "0",
        "--steps",
        "5",
        "--warmup",
        "2",
    ]
    result = run_script("--wheels", str(wheels), "--out", str(out), "--", *short, python=python)
    log = result.stdout + result.stderr
    assert result.returncode == 0, log
    assert "this Python lacks libcst pyyaml pathspec" in log
    assert "pip install --no-index --target" in log
    loaded = next(line for line in log.splitlines() if line.startswith("gpu_evidence: torchlint"))
    work = re.search(r"from (\S+)/src/torchlint/__init__\.py", loaded)
    assert work is not None and "libcst 1" in loaded, loaded
    assert f"{work.group(1)}/site/libcst/__init__.py" in loaded  # from the wheel
    assert not Path(work.group(1)).exists()  # the temporary folder is gone
    assert "nvidia-smi: not found" in log or "NVIDIA-SMI" in log
    if "NO CUDA GPU" in log:
        assert "CPU fallback" in log and "gpu_evidence: CPU," in log
    # What comes back from a borrowed machine: at most 8 plain files, plain names.
    files = sorted(p.name for p in out.iterdir())
    assert files == [
        "compute_bound.html", "compute_bound.json", "env.txt", "evidence.tar.gz",
        "profile_cuda.json", "run.log", "slow_loader.html", "slow_loader.json",
    ]  # fmt: skip
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+", f) and (out / f).is_file() for f in files)
    assert "torch 2" in (out / "env.txt").read_text()
    for slug in ("slow_loader", "compute_bound"):
        data = json.loads((out / f"{slug}.json").read_text())
        assert [r["status"] for r in data["runs"]] == ["ok", "ok"]
        assert data["summary"]["verdict"] and "<svg" in (out / f"{slug}.html").read_text()
        assert f"gpu_evidence: {slug}: torchlint verify exited 0" in log
    # The CUDA-only run-time patterns: on the CPU, not checkable and never reported.
    assert "gpu_evidence: profile_cuda: torchlint verify --profile exited 0" in log
    assert "profile check FAILED" not in log
    if "NO CUDA GPU" in log:
        assert "gpu_evidence: profile check ok: TL104 not checkable without a GPU" in log
    report = json.loads((out / "profile_cuda.json").read_text())["profile"]
    assert [f["code"] for f in report["findings"]] == ["TL104"]
    with tarfile.open(out / "evidence.tar.gz") as tar:
        names = tar.getnames()
    assert "evidence/run.log" in names and "evidence/slow_loader.json" in names
    assert "evidence/profile_cuda.html" in names
    assert sum(n.endswith("/fix.diff") for n in names) == 2  # every run's logs


def test_without_wheels_it_says_what_to_do(tmp_path):
    result = run_script("--out", str(tmp_path / "out"), python=bare_python(tmp_path))
    assert result.returncode == 2
    log = result.stdout + result.stderr  # after its start, the script logs both to run.log
    assert "lacks libcst pyyaml pathspec" in log
    assert "--prepare DIR" in log and "Traceback" not in log


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--prepare", "w", "--python-version", "3"], "--python-version must look like 3.12"),
        (["--wheels", "/nonexistent", "--out", "o"], "no such folder"),
        (["--budget", "soon", "--out", "o"], "whole number of seconds"),
        (["--frobnicate"], "unknown argument --frobnicate"),
        ([], "--out DIR is required"),
    ],
)
def test_bad_input_is_one_line(tmp_path, args, message):
    result = subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert result.returncode == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
