"""torchlint verify without subprocesses: the NVML boundary fed recorded series, the
statistics, verdicts and warnings, the report, the plot, the batch-size search, and
bad input."""

from __future__ import annotations

import io
import itertools
import math
import random
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from torchlint.verify import command, fixed, stats
from torchlint.verify.harness import RunResult, run_order
from torchlint.verify.launcher import Counter, batch_len, is_oom
from torchlint.verify.nvml import (
    GpuDevice,
    GpuSample,
    Nvml,
    NvmlUnavailable,
    pick_used,
    select_visible,
)
from torchlint.verify.options import VerifyOptions
from torchlint.verify.plot import (
    PlotError,
    check_target,
    html_page,
    nice_ticks,
    throughput_series,
    utilization_series,
)
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


def runs_at(variant: str, rates, batch: int = 40) -> list[RunResult]:
    """Runs of one variant at these samples/s, `batch` samples per optimizer step."""
    return [
        fake_run(variant, r, i, steps=max(1, round(r * 2.0 / batch))) for i, r in enumerate(rates)
    ]


def test_exact_mann_whitney_distribution_matches_enumeration():
    # U over every way of splitting ranks 0..n+m-1 between the samples, counted by brute force.
    for n, m in ((1, 1), (2, 3), (3, 3), (4, 5)):
        counts = [0] * (n * m + 1)
        for first in itertools.combinations(range(n + m), n):
            second = [v for v in range(n + m) if v not in first]
            counts[sum(1 for x in first for y in second if y < x)] += 1
        assert list(stats._u_counts(n, m)) == counts


def test_fewest_runs_for_an_interval():
    assert stats.min_repeats() == 4  # with 3 of each, the smallest two-sided p is 2/20
    assert stats.estimate([1.0, 1.1, 0.9], [2.0, 2.1, 1.9]).lo is None
    e = stats.estimate([1.0, 1.1, 0.9, 1.05], [2.0, 2.1, 1.9, 2.05])
    assert e.decided and e.level == pytest.approx(1 - 2 / 70)  # 4 of each: complete separation


def simulate(effect: float, noise: float, sims: int, seed: int) -> float:
    """The share of simulated comparisons, at the default repeats, with a verdict; each
    run's throughput is the truth times log-normal run-to-run noise."""
    rng = random.Random(seed)
    n = VerifyOptions.repeats
    decided = 0
    for _ in range(sims):
        before = [math.exp(rng.gauss(0.0, noise)) for _ in range(n)]
        after = [effect * math.exp(rng.gauss(0.0, noise)) for _ in range(n)]
        decided += stats.estimate(before, after).decided
    return decided / sims


def test_no_effect_gives_a_false_verdict_at_most_at_the_stated_level():
    sims = 2000
    rate = simulate(1.0, 0.05, sims, seed=13)
    level = stats.estimate([1.0] * VerifyOptions.repeats, [2.0] * VerifyOptions.repeats).level
    assert level >= stats.LEVEL
    alpha = 1 - level  # the exact level the default repeats allow (3.2% at 5 runs of each)
    assert rate <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / sims), rate
    assert rate <= (1 - stats.LEVEL) + 3 * math.sqrt(0.05 * 0.95 / sims)


def test_a_1_3x_effect_under_5_percent_noise_is_detected():
    assert simulate(1.3, 0.05, 1000, seed=7) >= 0.80
    assert simulate(1 / 1.3, 0.05, 1000, seed=8) >= 0.80  # slower, the same


def test_verdict_states_the_interval_and_level():
    c = compare(
        runs_at("original", (400, 410, 395, 405, 398)), runs_at("fixed", (800, 790, 812, 805, 795))
    )
    assert c.faster is True
    assert "fixed is 2.00x faster than original in samples/s" in c.verdict
    assert "95% interval" in c.verdict and "exact level 96.8%" in c.verdict
    e = c.row("samples_per_s").estimate
    assert e.lo < 2.0 < e.hi and e.lo > 1.9
    assert "batch size" not in c.verdict  # 40 samples per step in both
    summary = c.to_json()
    assert summary["level"] == 0.95 and summary["metrics"]["samples_per_s"]["decided"] is True
    assert summary["metrics"]["step_time_ms"]["higher_is_better"] is False


def test_slower_is_said_too():
    c = compare(
        runs_at("original", (800, 790, 812, 805, 795)), runs_at("fixed", (400, 410, 395, 405, 398))
    )
    assert c.faster is False and "fixed is 2.00x slower" in c.verdict


def test_no_verdict_within_the_noise_says_how_many_runs_would_do():
    c = compare(
        runs_at("original", (400, 520, 450, 470, 430)), runs_at("fixed", (480, 430, 500, 455, 515))
    )
    assert c.faster is None
    assert c.verdict.startswith("no difference detected at this noise level in samples/s")
    assert "95% interval" in c.verdict and "more runs of each" in c.verdict
    assert c.repeats_needed is not None and c.repeats_needed > 5
    assert f"--repeats {c.repeats_needed}" in c.verdict


def test_too_few_runs_give_no_verdict():
    c = compare([fake_run("original", 400)], [fake_run("fixed", 800)])
    assert c.faster is None and "1 measured run of each" in c.verdict
    assert "--repeats 4" in c.verdict


def test_a_changed_batch_size_is_said_in_the_verdict():
    c = compare(runs_at("original", (400, 410, 395, 405, 398), batch=8),
                runs_at("fixed", (800, 790, 812, 805, 795), batch=32))  # fmt: skip
    assert "changed the batch size (8 -> 32 samples per step)" in c.verdict
    assert "time per sample (2.5 -> 1.25 ms)" in c.verdict
    assert c.row("time_per_sample_ms").estimate.ratio == pytest.approx(0.5, rel=0.02)


def test_warmup_runs_are_left_out():
    before = runs_at("original", (400, 410, 395, 405, 398))
    warm = fake_run("original", 10)
    warm.warmup_run = True
    c = compare([warm, *before], runs_at("fixed", (800, 790, 812, 805, 795)))
    assert len(c.row("samples_per_s").before) == 5 and min(c.row("samples_per_s").before) == 395


def test_run_order_is_counterbalanced():
    order = run_order(repeats=4, warmup_runs=1)
    assert order[:2] == [("original", True), ("fixed", True)]
    measured = [v for v, warm in order if not warm]
    assert measured == ["original", "fixed", "fixed", "original"] * 2
    # With an even number of repeats, a linear drift adds as much to each variant.
    positions = {v: sum(i for i, m in enumerate(measured) if m == v) for v in ("original", "fixed")}
    assert positions["original"] == positions["fixed"]


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
    assert any("1 of 4 measured runs failed" in w for w in c.warnings)


# -- report and plot ------------------------------------------------------------------------


def test_table_and_report():
    before = runs_at("original", (400, 410, 395, 405, 398))
    after = runs_at("fixed", (800, 790, 812, 805, 795))
    c = compare(before, after)
    text = table(c)
    labels = ("samples/s", "time per sample", "step time", "GPU util (NVML)", "SM activity (GPM)",
              "peak GPU memory", "power", "energy/sample", "CPU util")  # fmt: skip
    assert all(label in text for label in labels)
    header, _, samples = text.splitlines()[:3]
    assert "fixed/original" in header and "95% interval" in header and "better" in header
    assert samples.split()[-1] == "higher" and "2.00x" in samples and "*" in samples
    step_time = next(line for line in text.splitlines() if line.startswith("step time"))
    assert step_time.split()[-1] == "lower"
    report = render(c, [*before, *after], "/tmp/logs")
    assert "share of time any kernel was running" in report
    assert "verdict: fixed is 2.00x faster" in report and "/tmp/logs" in report


def test_fmt_units():
    assert fmt(3 * 2**30, "B") == "3.00 GiB"
    assert fmt(0.0125, "J") == "12.5 mJ"
    assert fmt(12345.6, "/s") == "12,345.6"
    assert fmt(None, "%") == "-"


def test_html_page_carries_the_report_and_draws_every_run():
    before = runs_at("original", (400, 410, 395, 405, 398))
    after = runs_at("fixed", (800, 790, 812, 805, 795))
    c = compare(before, after)
    c.notes.append("no GPU (no NVIDIA driver): CPU-side figures only; try Colab")
    c.warnings.append("other processes kept the CPU busy")
    page = html_page([*before, *after], c, ("original", "fixed"), "demo")
    assert "<script" not in page and "http" not in page.replace("http://www.w3.org/2000/svg", "")
    assert "95% interval" in page and "fixed is 2.00x faster" in page  # table and verdict
    assert "no GPU (no NVIDIA driver)" in page and "other processes kept the CPU busy" in page
    assert "<table" in page and page.count("<tr>") == 1 + len(c.rows)
    svg = ET.fromstring(page[page.index("<svg") : page.index("</svg>") + 6])
    lines = svg.findall(".//{http://www.w3.org/2000/svg}polyline")
    assert len(lines) == 20  # throughput and utilization, one line per measured run
    assert "GPU util" in page


def test_a_short_window_still_draws_every_run(tmp_path):
    # 150 ms windows sampled every 100 ms: one throughput point, one CPU sample inside.
    runs = []
    for i, variant in enumerate(("original", "fixed")):
        r = fake_run(variant, 400 * (i + 1), i, duration=0.15)
        r.gpu = []
        r.cpu = [CpuSample(t, 10.0 + (t - 99.95) * 0.8, 2**30, 2) for t in (99.95, 100.05, 100.2)]
        runs.append(r)
    page = html_page(runs, compare(runs[:1], runs[1:]), ("original", "fixed"), "short")
    svg = ET.fromstring(page[page.index("<svg") : page.index("</svg>") + 6])
    ns = "{http://www.w3.org/2000/svg}"
    colors = {line.get("stroke") for line in svg.findall(f".//{ns}polyline")}
    assert len(colors) == 2  # both variants in both panels...
    assert len(svg.findall(f".//{ns}circle")) >= 4  # ...every point marked
    assert "CPU use (cores)" in page
    for r in runs:
        assert throughput_series(r) and utilization_series(r)[1]


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


def run_verify(script, **kwargs):
    out, err = io.StringIO(), io.StringIO()
    code = command.verify(VerifyOptions(Path(script), **kwargs), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    ("setup", "kwargs", "message"),
    [
        (None, {}, "no such file"),
        ("x = (\n", {}, "train.py: syntax error at 1:5: '(' was never closed"),
        ("import torch\n", {"steps": 0}, "--steps must be at least 1"),
        ("import torch\n", {"warmup": 0}, "--warmup must be at least 1"),
        ("import torch\n", {"window": -1.0}, "--window must be 0"),
        ("import torch\n", {"warmup_runs": -1}, "--warmup-runs must be 0 or more"),
        ("import torch\n", {"apply": True}, "--apply only"),
        ("import torch\n", {"plot": Path("out.svg")}, ".png or .html"),
        ("import torch\n", {"select": ("TL999",)}, "unknown rule selector"),
        ("import torch\n", {"json_out": Path("/nonexistent/dir/x.json")}, "does not exist"),
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


def test_nothing_to_compare_has_its_own_exit_code(tmp_path):
    pytest.importorskip("torch")
    script = tmp_path / "train.py"
    script.write_text("import torch\nprint(torch.ones(2))\n")
    code, out, _ = run_verify(script)
    assert code == command.EXIT_NOTHING == 3 and "no fixes apply" in out


def test_the_cli_builds_one_options_object_with_the_defaults(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from torchlint.cli import app

    seen = []
    monkeypatch.setattr(command, "verify", lambda options: seen.append(options) or 0)
    script = tmp_path / "t.py"
    result = CliRunner().invoke(app, ["verify", str(script), "--", "--lr", "1"])
    assert result.exit_code == 0, result.output
    assert seen == [VerifyOptions(script, ("--lr", "1"))]  # every default from the dataclass
    result = CliRunner().invoke(
        app, ["verify", str(script), "--repeats", "7", "--window", "0", "--select", "TL2,TL3"]
    )
    assert seen[-1] == VerifyOptions(script, repeats=7, window=0.0, select=("TL2", "TL3"))
    # A mistyped option is an error, not an argument silently handed to the script.
    result = CliRunner().invoke(app, ["verify", str(script), "--profile", "--extend-selct", "X"])
    assert result.exit_code == 2 and "No such option" in result.output
    assert len(seen) == 2


@pytest.mark.parametrize(
    ("env", "platform", "expected", "absent"),
    [
        ({"COLAB_RELEASE_TAG": "release-colab_20251201", "PATH": ""}, "linux", "on Colab", "cloud"),
        ({"PATH": ""}, "darwin", "NVML is NVIDIA-only", "driver"),
        ({"PATH": ""}, "linux", "a local machine with an NVIDIA GPU and its driver", "Mac"),
    ],
)
def test_the_no_gpu_hint_fits_where_the_user_is(env, platform, expected, absent):
    hint = command.gpu_hint(env, platform)
    assert expected in hint and absent not in hint


def test_the_no_gpu_hint_with_nvidia_tools_present(tmp_path):
    tool = tmp_path / "nvidia-smi"
    tool.write_text("#!/bin/sh\nexit 9\n")
    tool.chmod(0o755)
    assert "run `nvidia-smi`" in command.gpu_hint({"PATH": str(tmp_path)}, "linux")


@pytest.mark.slow
def test_png_plot_when_matplotlib_is_there(tmp_path):
    pytest.importorskip("matplotlib")
    from torchlint.verify.plot import write as write_plot

    runs = [fake_run("original", 400, 1), fake_run("fixed", 800, 2)]
    write_plot(tmp_path / "p.png", runs, compare(runs[:1], runs[1:]))
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_module_entry_point_is_the_same_command(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "torchlint.verify", "missing.py", "--steps", "3", "--", "-x"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2 and "missing.py: no such file" in result.stderr
    result = subprocess.run(
        [sys.executable, "-m", "torchlint.verify", "x.py", "--steps", "many"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2 and "Traceback" not in result.stderr


# -- the launcher's counting ---------------------------------------------------------------


@pytest.mark.slow
def test_only_batches_that_feed_optimizer_steps_are_counted(tmp_path):
    torch = pytest.importorskip("torch")
    counter = Counter({"channel": str(tmp_path / "c"), "warmup": 1, "steps": 1000})
    train, val = object(), object()  # two DataLoader iterators
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    for step in range(6):
        for _ in range(2):  # gradient accumulation: two batches of 16 per step
            counter.on_batch(train, torch.zeros(16, 3))
        if step % 2:
            for _ in range(5):  # validation batches of 64 between steps
                counter.on_batch(val, torch.zeros(64, 3))
            counter.on_batch(train, torch.zeros(16, 3))
            counter.on_batch(train, torch.zeros(16, 3))
            counter.on_step(optimizer)
            continue
        counter.on_step(optimizer)
    assert counter.opt_steps == 6
    assert (counter.batches, counter.samples) == (6 * 2 + 3 * 2, (6 * 2 + 3 * 2) * 16)
    assert counter.loader_batches == 6 * 2 + 3 * 2 + 3 * 5


@pytest.mark.slow
def test_a_new_iterator_at_a_freed_ones_address_starts_from_nothing(tmp_path):
    """Issue #44: 250 steps counted 254 batches of a batch size of 16: a validation pass's
    iterator, freed, left its batches under its address, and the next epoch's training
    iterator, made at the same address, fed them to its first step."""
    torch = pytest.importorskip("torch")
    counter = Counter({"channel": str(tmp_path / "c"), "warmup": 1, "steps": 1000})
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    address = object()  # the validation iterator, then the training one at its address
    counter.on_iterator(address)
    for _ in range(4):
        counter.on_batch(address, torch.zeros(64, 3))
    counter.on_iterator(address)  # the next epoch's training iterator
    counter.on_batch(address, torch.zeros(16, 3))
    counter.on_step(optimizer)
    assert (counter.batches, counter.samples, counter.loader_batches) == (1, 16, 5)


@pytest.mark.slow
def test_a_torch_without_numpy_says_nothing_of_it():
    """torch warns "Failed to initialize NumPy" when it is imported without NumPy, and
    `verify --profile` imports it first to check its matcher: that warning was the first
    line it printed. The verifier needs no NumPy: it says nothing of it."""
    pytest.importorskip("torch")
    code = (
        "import sys; sys.modules['numpy'] = None  # as if NumPy were not installed\n"
        "from torchlint.verify import matcher\n"
        "print(matcher.problem())\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300
    )
    assert result.stdout == "None\n" and "NumPy" not in result.stderr, result.stderr


def test_too_few_steps_names_verifys_options_not_the_scripts():
    """The bundled example has a --steps of its own: the hint says whose option to lower
    and where it goes on the command line (before the `--`)."""
    from torchlint.verify.harness import _classify

    result = RunResult("original", 1, "failed", returncode=0)
    result.events = [{"event": "end", "steps": 4, "loader_batches": 4}]
    _classify(result, VerifyOptions(Path("train.py")), timed_out=False, closed=False)
    assert result.status == "no-window"
    assert "(30 = torchlint verify's --warmup 10 + --steps 20): lower those" in result.message
    assert "`torchlint verify --warmup N --steps N SCRIPT`, before the `--`" in result.message
    assert "its own arguments, after the `--`" in result.message


SCRIPT = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

dataset = TensorDataset(torch.randn(64, 8))
loader = DataLoader(dataset, batch_size=64)
model = torch.nn.Linear(8, 1).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for (x,) in loader:
    model(x.cuda()).sum().backward()
    optimizer.step()
"""


@pytest.mark.parametrize(
    ("config", "codes"),
    [
        ("", {"TL202"}),
        ('unfixable = ["TL202"]\n', set()),
    ],
)
def test_the_fixed_script_is_what_fix_makes_of_it_under_its_config(tmp_path, config, codes):
    """verify fixes the script as `torchlint fix` would: the same run plan (config.resolve),
    its `unfixable` list included."""
    (tmp_path / "pyproject.toml").write_text(f"[tool.torchlint]\n{config}")
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    options = VerifyOptions(script=script, select=("TL202",), unsafe_fixes=True)
    result = fixed.build_fixed(options, SCRIPT)
    assert set(result.codes) == codes
    assert ("pin_memory" in result.script_text(script, SCRIPT)) == bool(codes)


def test_the_files_beside_the_script_are_fixed_with_what_the_project_tells_them(tmp_path):
    """Issue #44: a loader built in data.py and trained on in train.py: `fix` changes
    data.py (TL202 knows the loop is on the GPU from train.py); verify fixes it too."""
    (tmp_path / "data.py").write_text(
        "from torch.utils.data import DataLoader\n\n\n"
        "def make_loader(ds):\n"
        "    return DataLoader(ds, batch_size=64, num_workers=4)\n"
    )
    script = tmp_path / "train.py"
    text = (
        "import torch\nfrom data import make_loader\n\n"
        "model = torch.nn.Linear(8, 1).cuda()\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for x in make_loader(range(10)):\n"
        "    model(x.cuda()).sum().backward()\n"
        "    opt.step()\n"
    )
    script.write_text(text)
    options = VerifyOptions(script=script, select=("TL202",))
    result = fixed.build_fixed(options, text)
    assert list(result.texts) == [tmp_path / "data.py"] and result.codes == ["TL202"]
    assert "pin_memory=torch.cuda.is_available()" in result.texts[tmp_path / "data.py"]
    assert result.script_text(script, text) == text
