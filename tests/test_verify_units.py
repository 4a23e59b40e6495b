"""torchlint verify without subprocesses: the NVML boundary fed recorded series, the
statistics, verdicts and warnings, the report, the plot, the batch-size search, and
bad input."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET

import pytest

from torchlint.verify import command
from torchlint.verify.harness import RunResult
from torchlint.verify.launcher import batch_len, is_oom
from torchlint.verify.nvml import (
    GpuDevice,
    GpuSample,
    Nvml,
    NvmlUnavailable,
    pick_used,
    select_visible,
)
from torchlint.verify.plot import PlotError, check_target, html_page, nice_ticks
from torchlint.verify.procs import CpuSample
from torchlint.verify.report import fmt, render, table
from torchlint.verify.stats import compare, run_metrics
from torchlint.verify.tune import search

from .verify_nvml_fake import H100_SERIES, FakePynvml

UUID = "GPU-3f1c2a9e-0000-1111-2222-333344445555"

# -- the NVML boundary -----------------------------------------------------------------------


def test_sampler_translates_a_recorded_series():
    fake = FakePynvml()
    nvml = Nvml(fake)
    (device,) = nvml.open(None)
    assert device.uuid == UUID and device.name.startswith("NVIDIA H100") and device.gpm
    samples = [nvml.read(device, float(t)) for t in range(len(H100_SERIES))]
    for s, row in zip(samples, H100_SERIES, strict=True):
        assert (s.util_gpu, s.util_mem) == (row[0], row[1])
        assert s.mem_used == row[2] * 2**20
        assert s.power_w == pytest.approx(row[3] / 1000)
        assert s.sm_clock_mhz == row[4] and s.throttle == row[5]
    # GPM metrics are differences between two samples: none for the first reading.
    assert samples[0].sm_activity is None
    assert (samples[3].sm_activity, samples[3].occupancy, samples[3].tensor_activity) == (
        H100_SERIES[3][6],
        H100_SERIES[3][7],
        H100_SERIES[3][8],
    )
    nvml.close()
    assert fake.shutdown and fake.samples == {}  # every GPM sample freed


def test_sampler_without_gpm_leaves_sm_activity_empty():
    nvml = Nvml(FakePynvml(gpm=False))
    (device,) = nvml.open(None)
    s = [nvml.read(device, t) for t in (0.0, 0.1)][-1]
    assert s.util_gpu == H100_SERIES[1][0] and s.sm_activity is None


def test_missing_driver_is_one_reason():
    with pytest.raises(NvmlUnavailable, match="no NVIDIA driver"):
        Nvml(FakePynvml(missing_library=True)).open(None)


def test_real_nvml_on_this_machine_reports_no_driver():
    nvml = Nvml()
    try:
        devices = nvml.open(None)
    except NvmlUnavailable as exc:
        assert str(exc) and "\n" not in str(exc)
    else:  # pragma: no cover - only where a GPU is present
        nvml.close()
        assert devices


def test_cuda_visible_devices_by_index_and_uuid():
    devs = [GpuDevice(i, f"GPU-{i}aaa-{i}", "gpu") for i in range(4)]
    assert [d.index for d in select_visible(devs, None)] == [0, 1, 2, 3]
    assert [d.index for d in select_visible(devs, "2,0")] == [2, 0]
    assert [d.index for d in select_visible(devs, "GPU-3aaa")] == [3]
    assert [d.index for d in select_visible(devs, "1,7,2")] == [1]  # stops at invalid
    assert select_visible(devs, "") == [] and select_visible(devs, "-1") == []
    assert [d.index for d in pick_used(devs, ["2aaa-2"])] == [2]  # torch's bare UUID
    assert len(pick_used(devs, ["nope"])) == 4


def test_open_respects_cuda_visible_devices():
    fake = FakePynvml(uuids=("GPU-aaaa", "GPU-bbbb"))
    nvml = Nvml(fake)
    assert [d.uuid for d in nvml.open("1")] == ["GPU-bbbb"]
    with pytest.raises(NvmlUnavailable, match="CUDA_VISIBLE_DEVICES"):
        Nvml(FakePynvml()).open("5")


# -- statistics -----------------------------------------------------------------------------


def fake_run(
    variant: str,
    rate: float,
    index: int = 1,
    util: float = 50.0,
    power: float = 300.0,
    throttle: int = 0,
    foreign=(),
    steps: int = 20,
    t0: float = 100.0,
    duration: float = 2.0,
) -> RunResult:
    """A run whose window opens at t0 and lasts `duration` s at `rate` samples/s."""
    n = int(rate * duration)
    events = [
        {"event": "start", "t": t0 - 3, "rank": 0},
        {"event": "window_open", "t": t0, "rank": 0, "steps": 5, "batches": 5, "samples": 80,
         "cpu_s": 1.0, "torch": "2.4.0", "torch_cuda": "12.1", "cuda_initialized": True,
         "uuid": UUID[4:]},
        {"event": "progress", "t": t0 + duration / 2, "rank": 0, "steps": 5 + steps // 2,
         "batches": 5 + steps // 2, "samples": 80 + n // 2},
        {"event": "window_close", "t": t0 + duration, "rank": 0, "steps": 5 + steps,
         "batches": 5 + steps, "samples": 80 + n, "cpu_s": 1.0 + duration,
         "peak_memory": 3 * 2**30},
    ]  # fmt: skip
    gpu = [
        GpuSample(t0 - 1, UUID, util_gpu=99.0, power_w=500.0),  # outside: warm-up
        *(
            GpuSample(t0 + k * 0.5, UUID, util_gpu=util, power_w=power, throttle=throttle,
                      sm_activity=util / 2, mem_used=2**30)
            for k in range(int(duration / 0.5) + 1)
        ),
        GpuSample(t0 + duration + 1, UUID, util_gpu=0.0, power_w=60.0),  # outside: exit
    ]  # fmt: skip
    cpu = [
        CpuSample(t0 + k * 0.5, 10.0 + k * 0.75, 2**30, 2) for k in range(int(duration / 0.5) + 1)
    ]
    r = RunResult(variant, index, "ok", events=events, gpu=gpu, cpu=cpu)
    r.foreign_pids = list(foreign)
    return r


def test_metrics_use_only_the_window():
    m = run_metrics(fake_run("original", rate=400.0, util=40.0, power=250.0))
    assert m["samples_per_s"] == pytest.approx(400.0)
    assert m["step_time_ms"] == pytest.approx(100.0)  # 20 steps in 2 s
    assert m["gpu_util"] == pytest.approx(40.0)  # the 99% and 0% samples are outside
    assert m["sm_activity"] == pytest.approx(20.0)
    assert m["power_w"] == pytest.approx(250.0)
    assert m["energy_per_sample_j"] == pytest.approx(250.0 * 2.0 / 800)
    assert m["cpu_util"] == pytest.approx(1.5)
    assert m["peak_memory"] == 3 * 2**30


def test_verdict_when_ranges_do_not_overlap():
    before = [fake_run("original", r, i) for i, r in enumerate((400, 410, 395))]
    after = [fake_run("fixed", r, i) for i, r in enumerate((800, 790, 812))]
    c = compare(before, after)
    assert c.faster is True
    assert "2.00x faster" in c.verdict
    assert c.row("samples_per_s").ratio == pytest.approx(2.0)
    assert not [w for w in c.warnings if "noise" in w]


def test_no_verdict_when_ranges_overlap_and_noise_is_flagged():
    before = [fake_run("original", r, i) for i, r in enumerate((400, 520, 450))]
    after = [fake_run("fixed", r, i) for i, r in enumerate((480, 430, 500))]
    c = compare(before, after)
    assert c.faster is None and c.verdict.startswith("no measurable difference")
    assert any("noise larger than the effect" in w for w in c.warnings)


def test_one_repeat_gives_no_verdict():
    c = compare([fake_run("original", 400)], [fake_run("fixed", 800)])
    assert c.faster is None and "one measured run" in c.verdict


def test_shared_gpu_and_throttling_warnings():
    before = [fake_run("original", 400, foreign=[4242]), fake_run("original", 401)]
    after = [fake_run("fixed", 800, throttle=0x4), fake_run("fixed", 801, throttle=0x40)]
    warnings = " | ".join(compare(before, after).warnings)
    assert "shared GPU" in warnings and "4242" in warnings
    assert "power-cap throttling" in warnings and "thermal throttling" in warnings


def test_failed_runs_are_left_out_and_counted():
    bad = RunResult("fixed", 2, "failed", message="the script raised ValueError: x")
    c = compare(
        [fake_run("original", 400), fake_run("original", 400)], [fake_run("fixed", 800), bad]
    )
    assert any("1 of 4 runs failed" in w for w in c.warnings)


# -- report and plot ------------------------------------------------------------------------


def test_table_and_report():
    before = [fake_run("original", r, i) for i, r in enumerate((400, 410))]
    after = [fake_run("fixed", r, i) for i, r in enumerate((800, 790))]
    c = compare(before, after)
    text = table(c)
    for label in ("samples/s", "step time", "GPU util (NVML)", "SM activity (GPM)",
                  "peak GPU memory", "power", "energy/sample", "CPU util"):  # fmt: skip
        assert label in text
    assert "1.96x" in text or "1.97x" in text
    report = render(c, [*before, *after], "/tmp/logs")
    assert "share of time any kernel was running" in report
    assert "verdict: fixed is" in report and "/tmp/logs" in report


def test_fmt_units():
    assert fmt(3 * 2**30, "B") == "3.00 GiB"
    assert fmt(0.0125, "J") == "12.5 mJ"
    assert fmt(12345.6, "/s") == "12,345.6"
    assert fmt(None, "%") == "-"


def test_html_plot_is_self_contained_svg():
    runs = [fake_run("original", 400, 1), fake_run("fixed", 800, 2)]
    page = html_page(runs, compare(runs[:1], runs[1:]), ("original", "fixed"), "demo")
    assert "<script" not in page and "http" not in page.replace("http://www.w3.org/2000/svg", "")
    svg = ET.fromstring(page[page.index("<svg") : page.index("</svg>") + 6])
    lines = svg.findall(".//{http://www.w3.org/2000/svg}polyline")
    assert len(lines) == 4  # throughput and utilization, one line per run
    assert "GPU util" in page


def test_plot_target_checked_before_running(monkeypatch):
    with pytest.raises(PlotError, match=r"\.png or \.html"):
        check_target(__import__("pathlib").Path("out.svg"))
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    with pytest.raises(PlotError, match="needs matplotlib"):
        check_target(__import__("pathlib").Path("out.png"))


def test_nice_ticks():
    assert nice_ticks(0, 1.0) == [0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert nice_ticks(0, 950) == [0, 200, 400, 600, 800, 1000]
    assert nice_ticks(0, 0.37)[-1] >= 0.37


# -- batch-size search ----------------------------------------------------------------------


def trial_runner(limit: int, start: int = 16, fail_other_at: int | None = None):
    calls: list[int | None] = []

    def trial(size):
        calls.append(size)
        bs = start if size is None else size
        if fail_other_at is not None and bs >= fail_other_at:
            return RunResult(f"bs={bs}", len(calls), "failed", message="the script raised KeyError")
        if bs > limit:
            r = RunResult(f"bs={bs}", len(calls), "failed", message="CUDA out of memory")
            r.oom = True
            r.original_batch_size = start if size is None else None
            return r
        r = fake_run(f"bs={bs}", rate=100 * min(bs, 64), index=len(calls))
        r.original_batch_size = start if size is None else None
        return r

    return trial, calls


def test_doubling_then_binary_search():
    trial, calls = trial_runner(limit=100)
    tuning = search(trial)
    assert calls[:4] == [None, 32, 64, 128]
    assert tuning.largest == 100
    assert tuning.start == 16
    assert tuning.best == 64  # throughput flat above 64: the first to reach it
    assert all(t.ok == (t.batch_size <= 100) for t in tuning.trials)


def test_search_halves_when_the_scripts_own_size_does_not_fit():
    trial, calls = trial_runner(limit=20, start=64)
    tuning = search(trial)
    assert calls[:3] == [None, 32, 16]
    assert tuning.largest == 20


def test_search_stops_on_a_failure_that_is_not_memory():
    trial, _ = trial_runner(limit=10**6, fail_other_at=64)
    tuning = search(trial)
    assert tuning.largest == 32 and "other than memory" in tuning.stopped


# -- the launcher's pieces ------------------------------------------------------------------


def test_batch_len():
    torch = pytest.importorskip("torch")
    assert batch_len(torch.zeros(7, 3)) == 7
    assert batch_len((torch.zeros(5, 2), torch.zeros(5))) == 5
    assert batch_len({"input_ids": torch.zeros(4, 9), "label": torch.zeros(4)}) == 4
    assert batch_len((["a", "b", "c"], torch.zeros(3))) == 3
    assert batch_len(torch.tensor(1.0)) == 1


def test_oom_recognised():
    torch = pytest.importorskip("torch")
    assert is_oom(torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB"))
    assert is_oom(RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate"))
    assert not is_oom(ValueError("out of memory"))  # not an allocator's error type
    assert not is_oom(RuntimeError("shape mismatch"))


# -- bad input: one line, exit 2 ------------------------------------------------------------


def run_verify(*args, **kwargs):
    out, err = io.StringIO(), io.StringIO()
    code = command.verify(*args, stdout=out, stderr=err, **kwargs)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    ("setup", "kwargs", "message"),
    [
        (None, {}, "no such file"),
        ("x = (\n", {}, "train.py: syntax error at 1:5: '(' was never closed"),
        ("import torch\n", {"steps": 0}, "--steps must be at least 1"),
        ("import torch\n", {"warmup": 0}, "--warmup must be at least 1"),
        ("import torch\n", {"apply": True}, "--apply only"),
        ("import torch\n", {"plot": "out.svg"}, ".png or .html"),
        ("import torch\n", {"select": ["TL999"]}, "unknown rule selector"),
        ("import torch\n", {"json_out": "/nonexistent/dir/x.json"}, "does not exist"),
    ],
)
def test_bad_input_is_one_line(tmp_path, setup, kwargs, message):
    pytest.importorskip("torch")  # without torch, that is the one line
    script = tmp_path / "train.py"
    if setup is not None:
        script.write_text(setup)
    code, _out, err = run_verify(script, **kwargs)
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_without_torch_asks_for_the_extra(tmp_path, monkeypatch):
    script = tmp_path / "train.py"
    script.write_text("print(1)\n")
    real = command.importlib.util.find_spec
    monkeypatch.setattr(
        command.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "torch" else real(name, *a),
    )
    code, _, err = run_verify(script)
    assert code == 2 and "pip install 'torchlint[verify]'" in err


def test_nothing_to_compare_when_no_fix_applies(tmp_path):
    pytest.importorskip("torch")
    script = tmp_path / "train.py"
    script.write_text("import torch\nprint(torch.ones(2))\n")
    code, out, _ = run_verify(script)
    assert code == 0 and "no fixes apply" in out


def test_png_plot_when_matplotlib_is_there(tmp_path):
    pytest.importorskip("matplotlib")
    from torchlint.verify.plot import write as write_plot

    runs = [fake_run("original", 400, 1), fake_run("fixed", 800, 2)]
    write_plot(tmp_path / "p.png", runs, compare(runs[:1], runs[1:]))
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_module_entry_point(capsys):
    from torchlint.verify.__main__ import main

    assert main(["missing.py", "--steps", "3", "--", "--lr", "1"]) == 2
    assert "missing.py: no such file" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["x.py", "--steps", "many"])
    assert exc.value.code == 2
