"""One measured run of a script in a fresh subprocess, and the order of the runs.

The parent starts the launcher in a new session (its own process group), samples the
GPUs and the group's CPU time every interval, reads the launcher's channel, and ends
the run: by itself after the window closed, or by signals to the whole group on
timeout (SIGINT, SIGTERM, SIGKILL), so DataLoader workers never outlive a run.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torchlint.verify.nvml import GpuDevice, GpuSample, Nvml
from torchlint.verify.options import VerifyOptions
from torchlint.verify.procs import CpuSample, ProcessTree
from torchlint.verify.scratch import mirror, overlay, tidy

LAUNCHER = str(Path(__file__).with_name("launcher.py"))
ENV = "TORCHLINT_VERIFY"
VARIANTS = ("original", "fixed")


def run_order(repeats: int, warmup_runs: int) -> list[tuple[str, bool]]:
    """(variant, is a warm-up run) in running order: the warm-up runs, then the measured
    pairs counterbalanced, A B B A A B ..., so a drift (page cache, clocks, heat, other
    load) favours neither variant."""
    a, b = VARIANTS
    order = [(v, True) for _ in range(warmup_runs) for v in (a, b)]
    for repeat in range(repeats):
        order += [(v, False) for v in ((a, b) if repeat % 2 == 0 else (b, a))]
    return order


@dataclass
class RunSpec:
    variant: str  # "original" | "fixed" | "bs=<n>"
    code: Path  # the file whose code runs (the script, or the fixed copy)
    index: int
    log_dir: Path  # each run works in a mirror of the script's folder under runs/ here
    options: VerifyOptions  # options.script: the user's script
    batch_size: int | None = None
    watch_batch_size: bool = False  # report the DataLoaders' batch sizes (tuning)
    warmup_run: bool = False  # discarded from the comparison
    env: dict[str, str] | None = None
    profile_steps: int | None = None  # --profile: profile up to this many steps, no window
    # Other files of the script's folder in their fixed form: (path relative to the
    # folder, the fixed copy), placed in the run's mirror.
    overlay: tuple[tuple[str, Path], ...] = ()


@dataclass
class RunResult:
    variant: str
    index: int
    status: str  # ok | partial | failed | timeout | no-window
    message: str = ""
    returncode: int | None = None
    started: float = 0.0
    ended: float = 0.0
    events: list[dict[str, Any]] = field(default_factory=list)
    gpu: list[GpuSample] = field(default_factory=list)
    cpu: list[CpuSample] = field(default_factory=list)
    baseline_gpu: list[GpuSample] = field(default_factory=list)
    foreign_pids: list[int] = field(default_factory=list)  # on the GPU before the run
    killed: str | None = None  # last signal sent to the group, if any
    leftovers: int = 0  # processes still running after the script exited
    stdout_log: str = ""
    stderr_log: str = ""
    stderr_tail: str = ""
    batch_size: int | None = None
    original_batch_size: int | None = None
    oom: bool = False
    warmup_run: bool = False
    ran_in: str = ""  # its working directory: a mirror of the script's folder (scratch.py)
    workdir: str | None = None  # ran_in, when the run wrote something there (kept)
    linked: list[str] = field(default_factory=list)  # the user's files it reached by links
    touched: list[str] = field(default_factory=list)  # ...and those it changed
    unfixed: list[str] = field(default_factory=list)  # overlay files left as they are (linked)

    # -- the window -----------------------------------------------------------------------

    def ranks(self) -> list[int]:
        return sorted({int(e.get("rank", 0)) for e in self.events})

    def event(self, name: str, rank: int = 0) -> dict[str, Any] | None:
        for e in self.events:
            if e.get("event") == name and int(e.get("rank", 0)) == rank:
                return e
        return None

    def windows(self) -> dict[int, tuple[dict[str, Any], dict[str, Any]]]:
        """rank -> (window_open, window_close) events; a window the script ended early
        (status partial) closes at its `end` event."""
        out = {}
        for rank in self.ranks():
            opened = self.event("window_open", rank)
            closed = self.event("window_close", rank)
            if closed is None and self.status == "partial":
                closed = self.event("end", rank)
            if opened is not None and closed is not None:
                out[rank] = (opened, closed)
        return out

    def span(self) -> tuple[float, float] | None:
        """Earliest open to latest close over ranks (monotonic seconds)."""
        w = self.windows()
        if not w:
            return None
        return min(o["t"] for o, _ in w.values()), max(c["t"] for _, c in w.values())

    @property
    def usable(self) -> bool:
        return self.status in ("ok", "partial")

    def to_json(self) -> dict[str, Any]:
        span = self.span()
        return {
            "variant": self.variant,
            "index": self.index,
            "warmup_run": self.warmup_run,
            "status": self.status,
            "message": self.message,
            "returncode": self.returncode,
            "started": self.started,
            "ended": self.ended,
            "window": list(span) if span else None,
            "killed": self.killed,
            "leftovers": self.leftovers,
            "batch_size": self.batch_size,
            "original_batch_size": self.original_batch_size,
            "oom": self.oom,
            "stdout_log": self.stdout_log,
            "stderr_log": self.stderr_log,
            "foreign_pids": self.foreign_pids,
            "ran_in": self.ran_in,
            "workdir": self.workdir,
            "linked": self.linked,
            "touched": self.touched,
            "events": self.events,
            "gpu_samples": [{**s.to_json(), "in_window": _inside(s.t, span)} for s in self.gpu],
            "cpu_samples": [
                {
                    "t": s.t,
                    "cpu_s": s.cpu_s,
                    "rss": s.rss,
                    "nprocs": s.nprocs,
                    "machine_busy_s": s.machine_busy_s,
                    "in_window": _inside(s.t, span),
                }
                for s in self.cpu
            ],
        }


def _inside(t: float, span: tuple[float, float] | None) -> bool:
    return span is not None and span[0] <= t <= span[1]


class _Channel:
    """Reads the launcher's JSON lines as they are written (one file per rank)."""

    def __init__(self, prefix: Path) -> None:
        self.prefix = prefix
        self.offsets: dict[Path, int] = {}
        self.partial: dict[Path, str] = {}

    def read(self) -> list[dict[str, Any]]:
        events = []
        for path in sorted(self.prefix.parent.glob(self.prefix.name + ".*.jsonl")):
            try:
                with open(path, encoding="utf-8") as f:
                    f.seek(self.offsets.get(path, 0))
                    chunk = f.read()
                    self.offsets[path] = f.tell()
            except OSError:
                continue
            text = self.partial.pop(path, "") + chunk
            lines = text.split("\n")
            if lines[-1]:
                self.partial[path] = lines[-1]
            for line in lines[:-1]:
                try:
                    events.append(json.loads(line))
                except ValueError:
                    continue
        return events


def command_for(spec: RunSpec, script: Path) -> list[str]:
    """The command that runs `script` (the user's, as mirrored for the run)."""
    o = spec.options
    launch = [LAUNCHER, str(script), *o.script_args]
    if o.nproc_per_node:
        return [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc-per-node={o.nproc_per_node}",
            *launch,
        ]
    return [sys.executable, *launch]


def _tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])


def run_once(
    spec: RunSpec,
    nvml: Nvml | None = None,
    devices: Sequence[GpuDevice] = (),
) -> RunResult:
    """Run the script once, in a mirror of its folder, and measure it; never raises for
    the script's own failures."""
    o = spec.options
    stem = f"{spec.index:02d}-{spec.variant}"
    channel = spec.log_dir / f"{stem}.channel"
    out_path = spec.log_dir / f"{stem}.stdout.log"
    err_path = spec.log_dir / f"{stem}.stderr.log"
    settings = {
        "channel": str(channel),
        "warmup": o.warmup,
        "steps": o.steps,
        "window": o.window,
        "code": str(spec.code) if spec.code != o.script else None,
        "batch_size": spec.batch_size,
        "watch_batch_size": spec.watch_batch_size,
        "progress_interval": o.interval,
        "profile_steps": spec.profile_steps,
    }
    env = dict(spec.env if spec.env is not None else os.environ)
    env[ENV] = json.dumps(settings)
    result = RunResult(
        spec.variant,
        spec.index,
        "failed",
        stdout_log=str(out_path),
        stderr_log=str(err_path),
        batch_size=spec.batch_size,
        warmup_run=spec.warmup_run,
    )
    # What runs on the GPUs before we start is someone else's (shared GPU).
    if nvml is not None:
        now = time.monotonic()
        for d in devices:
            result.baseline_gpu.append(nvml.read(d, now))
            result.foreign_pids.extend(nvml.processes(d))
    reader = _Channel(channel)
    work = mirror(o.script.parent, spec.log_dir / "runs" / stem)
    for relative, fixed in spec.overlay:
        if not overlay(work, relative, fixed.read_bytes()):
            result.unfixed.append(relative)
    result.ran_in, result.linked = str(work.root), [str(p) for p in work.linked_files()]
    try:
        _run(spec, result, env, reader, work.root / o.script.name, nvml, devices)
    finally:
        result.touched = [str(p) for p in tidy(work)]
        result.workdir = str(work.root) if work.root.exists() else None
    return result


def _run(
    spec: RunSpec,
    result: RunResult,
    env: dict[str, str],
    reader: _Channel,
    script: Path,
    nvml: Nvml | None,
    devices: Sequence[GpuDevice],
) -> None:
    """Start `script` in its folder (the mirror), sample it until it ends, classify."""
    import subprocess

    o = spec.options
    with open(result.stdout_log, "wb") as out, open(result.stderr_log, "wb") as err:
        result.started = time.monotonic()
        try:
            proc = subprocess.Popen(
                command_for(spec, script),
                cwd=str(script.parent),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
        except OSError as exc:
            result.message = f"cannot start Python: {exc}"
            return
        tree = ProcessTree(proc.pid)
        deadline = result.started + o.timeout
        expected = o.nproc_per_node or 1
        closed_at: float | None = None
        timed_out = False
        try:
            while True:
                now = time.monotonic()
                if nvml is not None:
                    result.gpu.extend(nvml.read(d, now) for d in devices)
                cpu = tree.sample(now)
                if cpu is not None:
                    result.cpu.append(cpu)
                result.events.extend(reader.read())
                if closed_at is None:
                    closes = sum(1 for e in result.events if e.get("event") == "window_close")
                    if closes >= expected:
                        closed_at = now
                if proc.poll() is not None:
                    break
                if closed_at is not None and now - closed_at > o.stop_grace:
                    result.killed = tree.kill(o.kill_wait, proc.poll)
                    break
                if now >= deadline:
                    timed_out = True
                    result.killed = tree.kill(o.kill_wait, proc.poll)
                    break
                time.sleep(max(0.0, o.interval - (time.monotonic() - now)))
        except BaseException:  # Ctrl-C in the parent: leave nothing running
            tree.kill(1.0, proc.poll)
            raise
        finally:
            proc.poll()
        if tree.alive():  # the script exited, something it started did not
            result.leftovers = len(tree.refresh()) or 1
            signal = tree.kill(o.kill_wait, proc.poll)
            result.killed = result.killed or signal
        try:
            result.returncode = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            result.returncode = None
        result.ended = time.monotonic()
    result.events.extend(reader.read())
    result.stderr_tail = _tail(Path(result.stderr_log))
    if spec.profile_steps is not None:
        _classify_profile(result, o, timed_out)
    else:
        _classify(result, o, timed_out, closed_at is not None)


def _classify_profile(result: RunResult, o: VerifyOptions, timed_out: bool) -> None:
    """ok: a profile came back (the script may still have failed after it began: the
    message says so); failed/timeout: none did."""
    events = result.events
    exc = next((e for e in events if e.get("event") == "exception"), None)
    result.oom = bool(exc and exc.get("oom")) or _oom_text(result.stderr_tail)
    problem = next((e for e in events if e.get("event") == "profile_error"), None)
    profiled = any(e.get("event") == "profile" for e in events)
    if timed_out:
        result.status = "timeout"
        result.message = (
            f"timed out after {o.timeout:g}s; every process of the run was ended with "
            f"{result.killed or 'no signal'}"
        )
    elif exc is not None:
        result.status = "failed"
        result.message = f"the script raised {exc.get('message', exc.get('type'))}"
    elif result.returncode not in (0, None):
        result.status = "failed"
        result.message = f"the script exited with code {result.returncode}"
    elif problem is not None:
        result.status = "failed"
        result.message = str(problem.get("message"))
    elif not profiled:
        result.status = "failed"
        result.message = "the script finished without importing torch: nothing to profile"
    else:
        result.status = "ok"
    if profiled and result.status != "ok":
        result.message += "; the profile covers what ran until then"


def _classify(result: RunResult, o: VerifyOptions, timed_out: bool, closed: bool) -> None:
    events = result.events
    for e in events:
        if e.get("event") == "batch_size":
            result.original_batch_size = e.get("original")
            break
    exc = next((e for e in events if e.get("event") == "exception"), None)
    result.oom = bool(exc and exc.get("oom")) or _oom_text(result.stderr_tail)
    ends = [e for e in events if e.get("event") == "end"]
    opened = any(e.get("event") == "window_open" for e in events)
    hook_error = next((e for e in events if e.get("event") == "hook_error"), None)
    if closed:
        result.status = "ok"
        if result.killed:
            result.message = (
                f"the script did not exit within {o.stop_grace:g}s of the stop request; "
                f"its processes were ended with {result.killed}"
            )
        return
    want = o.warmup + o.steps
    if timed_out:
        result.status = "timeout"
        steps = max((int(e.get("steps", 0)) for e in events if "steps" in e), default=0)
        where = "inside" if opened else "before"
        result.message = (
            f"timed out after {o.timeout:g}s {where} the measurement window "
            f"({steps} of at least {want} optimizer steps); every process of the run was ended "
            f"with {result.killed or 'no signal'}"
        )
        return
    if exc is not None:
        result.status = "failed"
        result.message = f"the script raised {exc.get('message', exc.get('type'))}"
        return
    if result.returncode not in (0, None) or not ends:
        result.status = "failed"
        result.message = f"the script exited with code {result.returncode}"
        return
    end = ends[-1]
    steps = int(end.get("steps", 0))
    if hook_error is not None and not opened:
        result.status = "no-window"
        result.message = f"cannot count steps: {hook_error.get('message')}"
    elif opened and steps > o.warmup:
        result.status = "partial"
        result.message = (
            f"the script finished {steps - o.warmup} optimizer steps into the measurement "
            f"window, before it closed (torchlint verify's --steps {o.steps} and --window "
            f"{o.window:g}); measured those"
        )
    elif steps == 0 and int(end.get("loader_batches", 0)) == 0:
        result.status = "no-window"
        result.message = (
            "the script finished without iterating a DataLoader or stepping an optimizer "
            "(verify measures training scripts)"
        )
    elif steps == 0:
        result.status = "no-window"
        result.message = (
            "the script finished without an optimizer step (steps are counted at optimizer.step())"
        )
    else:
        result.status = "no-window"
        result.message = (
            f"the script finished after {steps} optimizer steps, before the measurement "
            f"window ({want} = torchlint verify's --warmup {o.warmup} + --steps {o.steps}): "
            "lower those (`torchlint verify --warmup N --steps N SCRIPT`, before the `--`), "
            "or give the script more work (its own arguments, after the `--`)"
        )


def _oom_text(text: str) -> bool:
    from torchlint.verify.launcher import OOM_MARKERS

    return "OutOfMemoryError" in text or any(m in text for m in OOM_MARKERS)
