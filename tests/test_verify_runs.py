"""torchlint verify for real: scripts run in subprocesses with torch on the CPU.

Kept short (few steps, few repeats); the whole file runs in about two minutes on two
cores.
"""

from __future__ import annotations

import html
import importlib.util
import io
import json
import re
import textwrap
from pathlib import Path

import pytest

from torchlint.verify import command
from torchlint.verify.harness import RunSpec, run_once
from torchlint.verify.nvml import Nvml
from torchlint.verify.options import VerifyOptions
from torchlint.verify.procs import stat
from torchlint.verify.stats import run_metrics

from .conftest import ROOT, run_cli

pytestmark = [
    pytest.mark.slow,  # real verify runs: scripts with torch in subprocesses
    pytest.mark.skipif(
        importlib.util.find_spec("torch") is None,
        reason="the verifier runs training scripts with torch",
    ),
]


EXAMPLE = ROOT / "examples" / "verify" / "slow_loader.py"


def verify(script: Path, args=(), nvml=None, **kwargs):
    """`torchlint verify --preview` in this process (the scripts' fixes include those of
    preview rules, TL001's); windows of steps only, no warm-up runs unless asked."""
    out, err = io.StringIO(), io.StringIO()
    kwargs = {"stop_grace": 2.0, "kill_wait": 1.0, "window": 0.0, "warmup_runs": 0, **kwargs}
    kwargs.setdefault("preview", True)
    options = VerifyOptions(script, tuple(args), **kwargs)
    code = command.verify(options, stdout=out, stderr=err, nvml=nvml)
    return code, out.getvalue(), err.getvalue()


def write(tmp_path: Path, name: str, code: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(code))
    return path


def no_gpu() -> bool:
    try:
        Nvml().open(None)
    except Exception:
        return True
    return False


def gone(pid: int) -> bool:
    return stat(pid) is None  # exited, or a zombie waiting for init


# A training loop over a small TensorDataset; the DataLoader lacks num_workers (TL201).
TRAIN = """
    import os
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    dataset = TensorDataset(torch.randn(2048, 16), torch.randn(2048, 1))
    loader = DataLoader(dataset, batch_size=32, shuffle=True)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1)
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
"""
LOOP = """
    for epoch in range(1000):
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad(); loss.backward(); optimizer.step()
"""


def test_slow_loading_example(tmp_path):
    out_json, out_html = tmp_path / "v.json", tmp_path / "v.html"
    code, out, err = verify(
        EXAMPLE,
        ["--epochs", "5"],
        unsafe_fixes=True,
        warmup=3,
        steps=20,
        window=0.5,
        repeats=4,
        warmup_runs=1,
        json_out=out_json,
        plot=out_html,
        stop_grace=5.0,
    )
    assert code == 0, out + err
    assert "+    loader = DataLoader(" in out and "num_workers=NUM_WORKERS" in out  # the diff
    data = json.loads(out_json.read_text())
    summary = data["summary"]
    print(out)  # the figures, for the record (pytest -s)
    # A verdict, when the noise of a loaded machine allows one, says faster (the fix
    # feeds 4x the samples per step from worker processes); never slower.
    assert summary["faster"] in (True, None), out
    verdict = next(line for line in out.splitlines() if line.startswith("verdict: "))
    assert "95% interval" in verdict and "exact level" in verdict
    assert ("fixed is" in verdict) == (summary["faster"] is True)
    assert "changed the batch size (8 -> 32 samples per step)" in verdict
    assert summary["metrics"]["samples_per_step"]["after"]["values"] == [32.0] * 4
    assert [(r["variant"], r["warmup_run"]) for r in data["runs"]] == [
        ("original", True), ("fixed", True),
        ("original", False), ("fixed", False), ("fixed", False), ("original", False),
        ("original", False), ("fixed", False), ("fixed", False), ("original", False),
    ]  # fmt: skip
    assert len(summary["metrics"]["samples_per_s"]["before"]["values"]) == 4  # warm-up left out
    assert all(r["status"] == "ok" and not r["killed"] for r in data["runs"])
    assert all(r["metrics"]["window_s"] >= 0.5 for r in data["runs"])
    assert all(s["in_window"] in (True, False) for r in data["runs"] for s in r["cpu_samples"])
    page = out_html.read_text()
    assert "<svg" in page and "95% interval" in page
    assert html.escape(verdict[len("verdict: ") :]) in page
    log_dir = Path(data["log_dir"])
    assert (log_dir / "fixed" / EXAMPLE.name).is_file() and (log_dir / "fix.diff").is_file()
    assert EXAMPLE.read_text().count("num_workers") == 0  # the original is untouched
    if no_gpu():
        lines = [line for line in err.splitlines() if "no GPU" in line]
        assert len(lines) == 1 and "Traceback" not in err
        assert "note: no GPU" in out and "Colab" in out and "no GPU" in page


def test_the_files_beside_the_script_are_fixed_in_the_fixed_runs(tmp_path):
    """Issue #44: the loader built in data.py, the loop in train.py: verify used to find
    nothing to compare. The fixed runs import the fixed data.py from their folder; the
    user's data.py is untouched."""
    data = write(
        tmp_path,
        "data.py",
        """
        import torch
        from torch.utils.data import DataLoader, TensorDataset


        def make_loader():
            dataset = TensorDataset(torch.randn(512, 16), torch.randn(512, 1))
            return DataLoader(dataset, batch_size=32)
        """,
    )
    script = write(
        tmp_path,
        "train.py",
        """
        import torch
        from data import make_loader

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = torch.nn.Sequential(
            torch.nn.Linear(16, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1)
        ).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        with open("seen.txt", "w") as seen:  # which data.py this run imported
            seen.write(open("data.py").read())
        for epoch in range(1000):
            for x, y in make_loader():
                loss = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device))
                optimizer.zero_grad(); loss.backward(); optimizer.step()
        """,
    )
    before = data.read_text()
    out_json = tmp_path / "v.json"
    code, out, err = verify(
        script, select=("TL202",), warmup=1, steps=3, repeats=1, json_out=out_json
    )
    assert code == 0, out + err
    assert "Fixes applied to a copy of data.py (TL202):" in out
    assert "+++ data.py" in out and "pin_memory=torch.cuda.is_available()" in out
    log_dir = Path(json.loads(out_json.read_text())["log_dir"])
    seen = {p.parent.name: p.read_text() for p in (log_dir / "runs").glob("*/seen.txt")}
    assert "pin_memory" in seen["02-fixed"] or "pin_memory" in seen["01-fixed"]
    assert all("pin_memory" not in text for name, text in seen.items() if "original" in name)
    assert data.read_text() == before


def test_a_validation_loader_does_not_change_samples_per_second(tmp_path):
    script = write(
        tmp_path,
        "with_val.py",
        TRAIN
        + """
    val = DataLoader(TensorDataset(torch.randn(512, 16), torch.randn(512, 1)), batch_size=64)
    for epoch in range(1000):
        for i, (x, y) in enumerate(loader):
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad(); loss.backward(); optimizer.step()
            if i % 3 == 0:  # validation inside the window: 8 batches of 64
                with torch.no_grad():
                    for vx, vy in val:
                        model(vx)
    """,
    )
    options = VerifyOptions(script, warmup=2, steps=12, window=0.5)
    result = run_once(RunSpec("original", script, 1, tmp_path, options))
    assert result.status == "ok", result.message + result.stderr_tail
    m = run_metrics(result)
    opened, closed = result.windows()[0]
    steps = closed["steps"] - opened["steps"]
    assert steps >= 12 and m["window_s"] >= 0.5  # at least --steps and --window
    assert closed["samples"] - opened["samples"] == 32 * steps  # training batches only
    assert m["samples_per_step"] == 32
    assert m["samples_per_s"] == pytest.approx(m["steps_per_s"] * 32)
    validation = (closed["loader_batches"] - opened["loader_batches"]) - steps
    assert validation >= 8 * (steps // 3)  # the validation batches were there, not counted


def test_a_validation_pass_after_each_epoch_is_not_counted(tmp_path):
    """Issue #44: a validation pass after each short epoch (a new iterator each time, made
    where the freed one was) was counted as training samples (17 per step of 16)."""
    script = write(
        tmp_path,
        "epochs.py",
        TRAIN
        + """
    small = DataLoader(TensorDataset(torch.randn(64, 16), torch.randn(64, 1)), batch_size=16)
    val = DataLoader(TensorDataset(torch.randn(256, 16), torch.randn(256, 1)), batch_size=64)
    for epoch in range(1000):
        for x, y in small:  # 4 steps an epoch
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad(); loss.backward(); optimizer.step()
        with torch.no_grad():
            for vx, vy in val:  # 4 batches of 64 after each epoch
                model(vx)
    """,
    )
    options = VerifyOptions(script, warmup=2, steps=24, window=0.2)
    result = run_once(RunSpec("original", script, 1, tmp_path, options))
    assert result.status == "ok", result.message + result.stderr_tail
    m = run_metrics(result)
    assert m["samples_per_step"] == 16


def test_script_that_ignores_the_stop_is_killed_with_its_workers(tmp_path):
    pids = tmp_path / "pids.txt"
    script = write(
        tmp_path,
        "stubborn.py",
        """
        import multiprocessing as mp, os, signal, sys, time
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        def sleeper(path):
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            with open(path, "a") as f:
                f.write(f"{os.getpid()}\\n")
            while True:
                time.sleep(1)

        if __name__ == "__main__":
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            for _ in range(2):
                mp.Process(target=sleeper, args=(sys.argv[1],)).start()
            ds = TensorDataset(torch.randn(512, 8), torch.randn(512, 1))
            loader = DataLoader(ds, batch_size=16)
            model = torch.nn.Sequential(
                torch.nn.Linear(8, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1)
            )
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            while True:
                try:
                    for x, y in loader:
                        loss = torch.nn.functional.mse_loss(model(x), y)
                        opt.zero_grad(); loss.backward(); opt.step()
                except BaseException:  # swallows even the verifier's stop
                    pass
        """,
    )
    code, out, err = verify(
        script,
        [str(pids)],
        unsafe_fixes=True,
        warmup=2,
        steps=5,
        repeats=1,
        stop_grace=1.0,
        kill_wait=0.5,
    )
    assert code == 0, out + err
    assert "did not exit" in out and "SIGKILL" in out
    started = [int(p) for p in pids.read_text().split()]
    assert len(started) == 4  # two sleepers in each of the two runs
    assert all(gone(pid) for pid in started)


def test_timeout_before_the_window_ends_every_process(tmp_path):
    pids = tmp_path / "pids.txt"
    script = write(
        tmp_path,
        "hang.py",
        """
        import os, signal, sys, time
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        def deaf(*_):  # the workers ignore SIGINT and SIGTERM too: only SIGKILL ends them
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)

        deaf()
        loader = DataLoader(
            TensorDataset(torch.randn(64, 2)), batch_size=8, num_workers=2, worker_init_fn=deaf
        )
        it = iter(loader)  # two worker processes
        next(it)
        with open(sys.argv[1], "w") as f:
            f.write(" ".join(str(w.pid) for w in it._workers) + f" {os.getpid()}")
        time.sleep(3600)  # never steps an optimizer
        """,
    )
    options = VerifyOptions(script, (str(pids),), timeout=8.0, kill_wait=1.0)
    spec = RunSpec("original", script, 1, tmp_path, options)
    result = run_once(spec)
    assert result.status == "timeout"
    assert "before the measurement window" in result.message
    assert result.killed == "SIGKILL"  # SIGINT and SIGTERM were ignored
    started = [int(p) for p in pids.read_text().split()]
    assert len(started) == 3 and all(gone(pid) for pid in started)


def test_crashing_script_reports_its_stderr(tmp_path):
    script = write(
        tmp_path,
        "crash.py",
        TRAIN
        + """
    for i, (x, y) in enumerate(loader):
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad(); loss.backward(); optimizer.step()
        if i == 2:
            raise ValueError("bad batch 2: label out of range")
    """,
    )
    code, out, err = verify(script, unsafe_fixes=True, warmup=5, steps=5, repeats=3)
    assert code == 1
    assert "the script could not be measured" in out
    assert "ValueError: bad batch 2: label out of range" in out
    assert "last lines of its stderr" in out and 'File "' in out
    assert "launcher.py" not in out  # the launcher's frames are not the user's business
    assert out.count("failed: the script raised") == 2  # stops after the first pair
    assert "logs of every run:" in out and "Traceback" not in err


def test_except_exception_cannot_swallow_the_stop(tmp_path):
    (tmp_path / "labels.txt").write_text("ok\n")
    (tmp_path / "helper_mod.py").write_text("VALUE = 3\n")
    script = write(
        tmp_path,
        "swallow.py",
        TRAIN
        + """
    # A module and a file next to the script: the fixed copy, run from elsewhere, sees
    # the same sys.path[0] and __file__.
    import helper_mod
    assert helper_mod.VALUE == 3
    assert open(os.path.join(os.path.dirname(__file__), "labels.txt")).read() == "ok\\n"
    for epoch in range(1000):
        try:
            for x, y in loader:
                loss = torch.nn.functional.mse_loss(model(x), y)
                optimizer.zero_grad(); loss.backward(); optimizer.step()
        except Exception:
            pass
    """,
    )
    out_json = tmp_path / "v.json"
    code, out, err = verify(
        script, unsafe_fixes=True, warmup=2, steps=10, repeats=1, json_out=out_json
    )
    assert code == 0, out + err
    runs = json.loads(out_json.read_text())["runs"]
    assert [r["status"] for r in runs] == ["ok", "ok"]
    assert not any(r["killed"] for r in runs)  # stopped by itself, promptly
    assert all(r["ended"] - r["events"][-1]["t"] < 10 for r in runs)


def test_gpu_path_with_recorded_nvml_series(tmp_path):
    """The whole pipeline with NVML replaying an H100 recording (no GPU needed)."""
    from .verify_nvml_fake import FakePynvml  # needs nvidia-ml-py: skips only this test

    script = write(
        tmp_path,
        "train.py",
        TRAIN + LOOP,
    )
    out_json, out_html = tmp_path / "v.json", tmp_path / "v.html"
    code, out, err = verify(
        script,
        unsafe_fixes=True,
        warmup=2,
        steps=600,
        repeats=1,
        interval_ms=20,
        nvml=Nvml(FakePynvml()),
        json_out=out_json,
        plot=out_html,
    )
    assert code == 0, out + err
    assert "no GPU" not in err and "sampling GPU(s) 0: NVIDIA H100" in err
    for label in ("GPU util (NVML)", "SM activity (GPM)", "power", "energy/sample"):
        assert label in out
    assert "share of time any kernel was running" in out
    assert "power-cap throttling" in out  # the recording has an SW power cap reading
    data = json.loads(out_json.read_text())
    assert data["gpu"]["devices"][0]["gpm"] is True
    inside = [s for r in data["runs"] for s in r["gpu_samples"] if s["in_window"]]
    assert inside and all(s["util_gpu"] is not None for s in inside)
    assert "GPU util (NVML, %)" in out_html.read_text()


def test_tune_batch_size_and_apply(tmp_path):
    script = write(
        tmp_path,
        "tune_me.py",
        """
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        dataset = TensorDataset(torch.randn(4096, 16), torch.randn(4096, 1))
        loader = DataLoader(dataset, batch_size=3, shuffle=True)
        model = torch.nn.Sequential(
            torch.nn.Linear(16, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1)
        )
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        for epoch in range(100):
            for x, y in loader:
                if x.shape[0] > 4:  # a GPU with room for 4 samples
                    raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB")
                loss = torch.nn.functional.mse_loss(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        """,
    )
    out_json = tmp_path / "t.json"
    code, out, err = verify(
        script, tune_batch_size=True, apply=True, warmup=2, steps=5, json_out=out_json
    )
    assert code == 0, out + err
    tuning = json.loads(out_json.read_text())["tuning"]
    sizes = [(t["batch_size"], t["status"]) for t in tuning["trials"]]
    # Doubling from the script's own 3 until memory runs out, then binary search.
    assert sizes == [(3, "ok"), (6, "oom"), (4, "ok"), (5, "oom")]
    assert tuning["largest"] == 4 and "largest batch size that runs: 4" in out
    assert "out of memory" in out and "samples/s" in out
    if tuning["best"] == 4:  # written through TL001's fix
        assert "batch_size=4" in script.read_text() and "--apply: batch size 3 -> 4" in out
    else:
        assert "batch_size=3" in script.read_text()


def test_torchrun_sums_ranks(tmp_path):
    script = write(
        tmp_path,
        "ranks.py",
        TRAIN + LOOP,
    )
    out_json = tmp_path / "v.json"
    code, out, err = verify(
        script, unsafe_fixes=True, warmup=2, steps=20, repeats=1, nproc_per_node=2,
        json_out=out_json,
    )  # fmt: skip
    assert code == 0, out + err
    runs = json.loads(out_json.read_text())["runs"]
    for run in runs:
        closes = [e for e in run["events"] if e["event"] == "window_close"]
        assert sorted(e["rank"] for e in closes) == [0, 1]
        rates = []
        for rank in (0, 1):
            o = next(e for e in run["events"] if e["event"] == "window_open" and e["rank"] == rank)
            c = next(e for e in closes if e["rank"] == rank)
            rates.append((c["samples"] - o["samples"]) / (c["t"] - o["t"]))
        assert run["metrics"]["samples_per_s"] == pytest.approx(sum(rates))


def test_cli_forwards_script_arguments(tmp_path):
    seen = tmp_path / "argv.txt"
    script = write(
        tmp_path,
        "args.py",
        TRAIN
        + """
    import sys
    open(sys.argv[-1], "w").write(" ".join(sys.argv[1:]))
    """
        + LOOP,
    )
    cmd = [
        "verify", str(script), "--unsafe-fixes", "--preview", "--steps", "3", "--warmup", "1",
        "--repeats", "1", "--window", "0", "--warmup-runs", "0", "--", "--steps", "7", str(seen),
    ]  # fmt: skip
    result = run_cli(*cmd, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert seen.read_text() == f"--steps 7 {seen}"  # the script's own --steps
    assert "verdict:" in result.stdout and "Traceback" not in result.stderr


def test_what_a_run_writes_stays_in_its_copy_of_the_folder(tmp_path):
    """Issue #26: the fixed variant overwrote the user's checkpoint. Each run works in a
    copy of the script's folder: the data beside the script reads as before, what a run
    writes (relative to its working directory or to `__file__`) is kept in its copy, and
    the user's folder is left byte for byte as it was."""
    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    (project / "data" / "labels.txt").write_text("ok\n")
    (project / "helper_mod.py").write_text("VALUE = 3\n")
    (project / "model.pt").write_bytes(b"the user's checkpoint")
    script = write(
        project,
        "train.py",
        TRAIN
        + """
    import helper_mod
    assert helper_mod.VALUE == 3 and open("data/labels.txt").read() == "ok\\n"
    open("model.pt", "wb").write(b"written by the run")
    open(os.path.join(os.path.dirname(__file__), "beside.txt"), "w").write("run\\n")
    os.makedirs("checkpoints", exist_ok=True)
    open("checkpoints/last.txt", "w").write("last\\n")
    """
        + LOOP,
    )
    before = {p: p.read_bytes() for p in project.rglob("*") if p.is_file()}
    code, out, err = verify(script, unsafe_fixes=True, warmup=2, steps=5, repeats=1)
    assert code == 0, out + err
    assert {p: p.read_bytes() for p in project.rglob("*") if p.is_file()} == before
    logs = Path(re.findall(r"^logs of every run: (.+)$", out, re.M)[0])
    kept_note = "each run worked in a copy of the script's folder; 2 of 2 wrote files, kept there"
    assert f"run outputs: {logs / 'runs'} ({kept_note})" in out
    for run in ("01-original", "02-fixed"):
        kept = logs / "runs" / run
        wrote = [p.relative_to(kept) for p in kept.rglob("*") if p.is_file()]
        assert sorted(str(p) for p in wrote if "__pycache__" not in p.parts) == [
            "beside.txt",
            "checkpoints/last.txt",
            "model.pt",
        ]  # fmt: skip (and the bytecode of helper_mod, where Python writes it)
        assert (kept / "model.pt").read_bytes() == b"written by the run"
    assert "each run works in a copy of" in err
    if no_gpu():  # what a CPU cannot show is named
        lacking = "GPU util (NVML), SM activity (GPM), tensor activity (GPM), peak GPU memory"
        assert f"CPU-side figures only, not measured: {lacking}, power, energy/sample;" in out
