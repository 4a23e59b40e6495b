"""Scripts fixed with `torchlint fix --unsafe-fixes` still run under spawn and forkserver.

The fixes add DataLoader workers. Under the spawn start method (macOS, Windows) and
forkserver (Linux from Python 3.14) every worker imports the script again as
`__mp_main__` and unpickles the dataset and collate_fn, so a loader outside an
`if __name__ == "__main__":` guard, or a closure collate_fn, breaks the fixed script.
Each bundled example and end-to-end fixture is copied, fixed (default rules) and run on
the CPU for a few steps, by a runner that sets the start method and then runs the script
as `__main__`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from .conftest import FIXTURES, ROOT, run_cli

pytestmark = pytest.mark.slow  # fixed scripts run under spawn and forkserver

E2E = FIXTURES / "e2e"
# Not fixtures/e2e/cifar_nodevice: the tutorial script already starts workers at module
# level, so it fails under spawn before any fix.
SCRIPTS = {
    "train_classifier": (
        ROOT / "examples" / "train_classifier.py",
        ["--epochs", "1", "--steps", "3"],
    ),
    "finetune_and_evaluate": (ROOT / "examples" / "finetune_and_evaluate.py", []),
    "slow_loader": (
        ROOT / "examples" / "verify" / "slow_loader.py",
        ["--epochs", "1", "--samples", "64"],
    ),
    "cifar": (E2E / "cifar" / "train.py", ["--samples", "64", "--epochs", "1", "--max-steps", "1"]),
    "naive_gpu": (E2E / "naive_gpu" / "train.py", ["--epochs", "1", "--steps", "2"]),
    "module_level": (E2E / "spawn" / "module_level.py", ["--steps", "2"]),
    "closure_collate": (E2E / "spawn" / "closure_collate.py", ["--steps", "2"]),
}
METHODS = ("spawn", "forkserver")
RUNNER = (
    "import multiprocessing, runpy, sys; "
    "multiprocessing.set_start_method(sys.argv[1], force=True); "
    "sys.argv = sys.argv[2:]; "
    "runpy.run_path(sys.argv[0], run_name='__main__')"
)


@pytest.fixture(scope="module")
def fixed(tmp_path_factory) -> dict[str, Path]:
    """Each script copied into a directory of its own and fixed there."""
    work = tmp_path_factory.mktemp("spawn")
    copies = {}
    for name, (script, _) in SCRIPTS.items():
        (work / name).mkdir()
        copies[name] = work / name / script.name
        copies[name].write_bytes(script.read_bytes())
    result = run_cli("fix", "--unsafe-fixes", "--no-cache", *map(str, copies.values()), cwd=work)
    assert result.returncode in (0, 1) and "Traceback" not in result.stderr, result.stderr
    return copies


@pytest.fixture(scope="module")
def runs(fixed) -> dict[tuple[str, str], subprocess.CompletedProcess[str]]:
    pytest.importorskip("torch")
    env = {
        **os.environ,
        "CUDA_VISIBLE_DEVICES": "",
        "PYTHONWARNINGS": "ignore",
        "OMP_NUM_THREADS": "1",  # processes run side by side on few cores
        # NUM_WORKERS divides the cores among the local processes: one worker per loader.
        "LOCAL_WORLD_SIZE": str(os.cpu_count() or 1),
    }

    def run(key: tuple[str, str]) -> subprocess.CompletedProcess[str]:
        name, method = key
        command = [sys.executable, "-c", RUNNER, method, str(fixed[name]), *SCRIPTS[name][1]]
        return subprocess.run(
            command, cwd=fixed[name].parent, env=env, capture_output=True, text=True, timeout=600
        )

    keys = [(name, method) for name in SCRIPTS for method in METHODS]
    with ThreadPoolExecutor(2) as pool:  # two at a time: each starts worker processes too
        return dict(zip(keys, pool.map(run, keys), strict=True))


def test_fixes_add_workers_only_where_they_can_start(fixed):
    """Where workers are safe to add they are (else the runs below would prove nothing
    about them); in the scripts without a main guard or with a closure as collate_fn
    they are not."""
    for name in ("train_classifier", "slow_loader", "cifar"):
        assert "num_workers=NUM_WORKERS" in fixed[name].read_text(encoding="utf-8"), name
    for name in ("module_level", "closure_collate"):
        assert "NUM_WORKERS" not in fixed[name].read_text(encoding="utf-8"), name


@pytest.mark.parametrize(("name", "method"), [(n, m) for n in SCRIPTS for m in METHODS])
def test_fixed_script_runs(runs, name, method):
    result = runs[name, method]
    assert result.returncode == 0, result.stderr[-3000:]
