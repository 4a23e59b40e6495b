"""`torchlint verify`: run a script as it is and as torchlint would fix it, and compare.

`verify()` takes plain Python arguments and returns the exit code: 0 measured, 1 the
script could not be measured (its own failure, reported with its stderr), 2 bad input
(one line, never a traceback).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
COLAB_HINT = "on Colab: Runtime > Change runtime type > GPU"


class UsageError(Exception):
    """Bad input: printed as one line, exit 2."""


def verify(
    script: str | os.PathLike[str],
    script_args: Sequence[str] = (),
    *,
    select: Sequence[str] | None = None,
    ignore: Sequence[str] | None = None,
    unsafe_fixes: bool = False,
    steps: int = 50,
    warmup: int = 10,
    repeats: int = 3,
    timeout: float = 300.0,
    interval_ms: float = 100.0,
    json_out: str | os.PathLike[str] | None = None,
    plot: str | os.PathLike[str] | None = None,
    tune_batch_size: bool = False,
    apply: bool = False,
    nproc_per_node: int | None = None,
    config_file: str | os.PathLike[str] | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    nvml: Any = None,
    stop_grace: float = 5.0,
    kill_wait: float = 3.0,
) -> int:
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    try:
        return _verify(
            Path(script),
            list(script_args),
            select=select,
            ignore=ignore,
            unsafe_fixes=unsafe_fixes,
            steps=steps,
            warmup=warmup,
            repeats=repeats,
            timeout=timeout,
            interval=interval_ms / 1000.0,
            json_out=Path(json_out) if json_out else None,
            plot=Path(plot) if plot else None,
            tune=tune_batch_size,
            apply=apply,
            nproc=nproc_per_node,
            config_file=Path(config_file) if config_file else None,
            out=out,
            err=err,
            nvml=nvml,
            stop_grace=stop_grace,
            kill_wait=kill_wait,
        )
    except UsageError as exc:
        print(f"torchlint verify: error: {exc}", file=err)
        return EXIT_USAGE


def _check_options(
    script: Path,
    steps: int,
    warmup: int,
    repeats: int,
    timeout: float,
    interval: float,
    nproc: int | None,
    tune: bool,
    apply: bool,
    json_out: Path | None,
    plot: Path | None,
) -> None:
    if steps < 1:
        raise UsageError("--steps must be at least 1")
    if warmup < 1:
        raise UsageError("--warmup must be at least 1 (the first steps include start-up costs)")
    if repeats < 1:
        raise UsageError("--repeats must be at least 1")
    if timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    if interval < 0.01:
        raise UsageError("--interval must be at least 10 ms")
    if nproc is not None and nproc < 1:
        raise UsageError("--nproc-per-node must be at least 1")
    if apply and not tune:
        raise UsageError(
            "--apply only writes a tuned batch size (with --tune-batch-size); "
            "use `torchlint fix` to apply fixes"
        )
    if not script.exists():
        raise UsageError(f"{script}: no such file")
    if not script.is_file():
        raise UsageError(f"{script}: not a file")
    if script.suffix != ".py":
        raise UsageError(f"{script}: verify runs Python scripts (.py)")
    for path, flag in ((json_out, "--json"), (plot, "--plot")):
        if path is not None and not path.absolute().parent.is_dir():
            raise UsageError(f"{flag} {path}: directory {path.absolute().parent} does not exist")
    if plot is not None:
        from torchlint.verify.plot import PlotError, check_target

        try:
            check_target(plot)
        except PlotError as exc:
            raise UsageError(str(exc)) from None
    if importlib.util.find_spec("torch") is None:
        raise UsageError(
            "verify needs PyTorch in this Python environment: pip install 'torchlint[verify]'"
        )


def _read_script(script: Path) -> tuple[Any, str]:
    from torchlint.linter import InvalidSyntax
    from torchlint.source import SourceError, read_source

    try:
        source = read_source(script)
    except SourceError as exc:
        raise UsageError(f"{script}: {exc}") from None
    try:  # all of the compiler (`return` outside a function...): the script is to run
        compile(source.text, str(script), "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        raise UsageError(f"{script}: {InvalidSyntax.from_compile(exc, source.text)}") from None
    return source, source.text


def _load_config(script: Path, config_file: Path | None) -> Any:
    from torchlint.config import ConfigError, find_config, load_config

    try:
        return load_config(config_file or find_config(script.parent))
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def build_fixed(
    script: Path,
    text: str,
    select: Sequence[str] | None,
    ignore: Sequence[str] | None,
    unsafe: bool,
    config_file: Path | None = None,
) -> tuple[str, list[str], list[str]]:
    """(fixed text, codes fixed, codes whose fixes need --unsafe-fixes) with the normal
    fix engine and the script's configuration."""
    from torchlint.config import ConfigError, expand, instantiate
    from torchlint.linter import Linter, LintError

    config = _load_config(script, config_file)
    try:
        if select:
            config.select = list(expand(select))
        if ignore:
            config.ignore.extend(expand(ignore))
        codes = config.rules_for(script, config.selected_codes())
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    linter = Linter(instantiate(codes), config.settings())
    try:
        outcome = linter.fix(text, str(script), unsafe=unsafe or config.unsafe_fixes)
    except LintError as exc:
        raise UsageError(f"{script}: {exc}") from None
    held = sorted(
        {v.code for v in outcome.remaining if v.fix is not None and v.fix.applicability == "unsafe"}
    )
    return outcome.text, sorted(set(outcome.fixed)), held


def _probe_gpu(nvml: Any) -> tuple[Any, list[Any], str | None]:
    from torchlint.verify.nvml import Nvml, NvmlUnavailable, visible_devices_env

    nvml = nvml if nvml is not None else Nvml()
    try:
        return nvml, nvml.open(visible_devices_env()), None
    except NvmlUnavailable as exc:
        return None, [], str(exc)


def _run_label(result: Any) -> str:
    from torchlint.verify.report import fmt
    from torchlint.verify.stats import run_metrics

    if not result.usable:
        return f"{result.status}: {result.message}"
    m = run_metrics(result)
    return (
        f"{fmt(m['samples_per_s'], '/s')} samples/s, step {fmt(m['step_time_ms'], 'ms')}"
        + (f", GPU {fmt(m['gpu_util'], '%')}" if m.get("gpu_util") is not None else "")
        + (" (partial window)" if result.status == "partial" else "")
    )


def _torch_notes(runs: Sequence[Any], gpu_reason: str | None) -> list[str]:
    opens = [e for r in runs for e in r.events if e.get("event") == "window_open"]
    if not opens or gpu_reason is not None:
        return []
    if all(e.get("torch_cuda") is None for e in opens):
        return [
            f"torch {opens[0].get('torch')} has no CUDA support, so the script ran on the "
            "CPU; install a CUDA build of PyTorch to measure the GPU"
        ]
    if not any(e.get("cuda_initialized") for e in opens):
        return ["the script never initialised CUDA: it ran on the CPU"]
    return []


def _verify(
    script: Path,
    args: list[str],
    *,
    select: Sequence[str] | None,
    ignore: Sequence[str] | None,
    unsafe_fixes: bool,
    steps: int,
    warmup: int,
    repeats: int,
    timeout: float,
    interval: float,
    json_out: Path | None,
    plot: Path | None,
    tune: bool,
    apply: bool,
    nproc: int | None,
    config_file: Path | None,
    out: TextIO,
    err: TextIO,
    nvml: Any,
    stop_grace: float,
    kill_wait: float,
) -> int:
    from torchlint.linter import unified_diff
    from torchlint.verify.harness import RunSpec, run_once

    _check_options(
        script, steps, warmup, repeats, timeout, interval, nproc, tune, apply, json_out, plot
    )
    script = script.resolve()
    source, text = _read_script(script)
    log_dir = Path(tempfile.mkdtemp(prefix="torchlint-verify-"))

    def spec(variant: str, code: Path, index: int, **extra: Any) -> RunSpec:
        return RunSpec(
            variant,
            script,
            code,
            args,
            log_dir,
            index,
            warmup=warmup,
            steps=steps,
            timeout=timeout,
            interval=interval,
            nproc=nproc,
            stop_grace=stop_grace,
            kill_wait=kill_wait,
            **extra,
        )

    fixed_text = text
    diff = ""
    if not tune:
        fixed_text, fixed_codes, held = build_fixed(
            script, text, select, ignore, unsafe_fixes, config_file
        )
        if fixed_text == text:
            more = f"; {', '.join(held)} can be fixed with --unsafe-fixes" if held else ""
            print(
                f"torchlint verify: no fixes apply to {script.name}{more}: nothing to compare",
                file=out,
            )
            return EXIT_OK
        diff = unified_diff(script.name, text, fixed_text)
        print(f"Fixes applied to a copy of {script.name} ({', '.join(fixed_codes)}):", file=out)
        print(diff, file=out)

    nvml, devices, gpu_reason = _probe_gpu(nvml)
    if gpu_reason is not None:
        print(
            f"torchlint verify: no GPU to measure ({gpu_reason}); comparing what the CPU "
            f"shows (samples/s, step time, wall time, CPU use, peak RSS) - {COLAB_HINT}",
            file=err,
        )
    else:
        names = ", ".join(f"{d.index}: {d.name}" for d in devices)
        print(f"torchlint verify: sampling GPU(s) {names} every {interval * 1000:g} ms", file=err)
    print(f"torchlint verify: logs in {log_dir}", file=err)
    try:
        if tune:
            return _tune(
                spec,
                script,
                source,
                nvml,
                devices,
                gpu_reason,
                log_dir,
                json_out,
                plot,
                apply,
                config_file,
                out,
                err,
            )
        fixed_dir = log_dir / "fixed"
        fixed_dir.mkdir()
        fixed_path = fixed_dir / script.name
        fixed_path.write_bytes(fixed_text.encode(source.encoding))
        (log_dir / "fix.diff").write_text(diff, encoding="utf-8")
        runs = []
        total = 2 * repeats
        for repeat in range(repeats):
            for variant, code in (("original", script), ("fixed", fixed_path)):
                index = len(runs) + 1
                result = run_once(spec(variant, code, index), nvml, devices)
                runs.append(result)
                print(f"[{index}/{total}] {variant}: {_run_label(result)}", file=err)
            if repeat == 0:
                for note in _torch_notes(runs, gpu_reason):
                    print(f"torchlint verify: {note}", file=err)
            if not all(
                any(r.usable for r in runs if r.variant == v) for v in ("original", "fixed")
            ):
                break
        return _report(
            runs,
            gpu_reason,
            devices,
            log_dir,
            json_out,
            plot,
            diff,
            script,
            args,
            out,
            {
                "steps": steps,
                "warmup": warmup,
                "repeats": repeats,
                "timeout": timeout,
                "interval_ms": interval * 1000,
                "nproc_per_node": nproc,
                "unsafe_fixes": unsafe_fixes,
            },
        )
    finally:
        if nvml is not None:
            nvml.close()


def _report(
    runs: list[Any],
    gpu_reason: str | None,
    devices: Sequence[Any],
    log_dir: Path,
    json_out: Path | None,
    plot: Path | None,
    diff: str,
    script: Path,
    args: list[str],
    out: TextIO,
    settings: dict[str, Any],
) -> int:
    from torchlint.verify import plot as plotting
    from torchlint.verify.report import failure, render
    from torchlint.verify.stats import compare, run_metrics

    before = [r for r in runs if r.variant == "original"]
    after = [r for r in runs if r.variant == "fixed"]
    measured = any(r.usable for r in before) and any(r.usable for r in after)
    comparison = compare(before, after)
    if gpu_reason is not None:
        comparison.notes.append(f"no GPU ({gpu_reason}): CPU-side figures only")
    comparison.notes.extend(_torch_notes(runs, gpu_reason))
    if measured:
        print(render(comparison, runs, str(log_dir)), file=out)
    else:
        if any(r.usable for r in before):
            print(
                "torchlint verify: the fixed script fails where the original runs: "
                "a fix breaks it here (please report it)",
                file=out,
            )
        else:
            print("torchlint verify: the script could not be measured:", file=out)
        for r in runs:
            if not r.usable:
                print(failure(r), file=out)
        print(f"logs of every run: {log_dir}", file=out)
    code = EXIT_OK if measured else EXIT_FAILED
    if json_out is not None:
        data = {
            "torchlint_verify": 1,
            "script": str(script),
            "args": args,
            "settings": settings,
            "gpu": {
                "reason_unavailable": gpu_reason,
                "devices": [
                    {"index": d.index, "uuid": d.uuid, "name": d.name, "gpm": d.gpm}
                    for d in devices
                ],
            },
            "diff": diff,
            "log_dir": str(log_dir),
            "summary": comparison.to_json(),
            "runs": [{**r.to_json(), "metrics": run_metrics(r)} for r in runs],
        }
        code = max(code, _write(json_out, json.dumps(data, indent=1, default=str), out))
    if plot is not None and measured:
        try:
            plotting.write(plot, runs, comparison, title=f"torchlint verify {script.name}")
            print(f"plot written to {plot}", file=out)
        except OSError as exc:
            print(f"torchlint verify: error: cannot write {plot}: {exc}", file=out)
            code = EXIT_USAGE
    return code


def _write(path: Path, text: str, out: TextIO) -> int:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        print(f"torchlint verify: error: cannot write {path}: {exc.strerror or exc}", file=out)
        return EXIT_USAGE
    print(f"measurements written to {path}", file=out)
    return EXIT_OK


def _tune(
    spec: Any,
    script: Path,
    source: Any,
    nvml: Any,
    devices: Sequence[Any],
    gpu_reason: str | None,
    log_dir: Path,
    json_out: Path | None,
    plot: Path | None,
    apply: bool,
    config_file: Path | None,
    out: TextIO,
    err: TextIO,
) -> int:
    from torchlint.verify import plot as plotting
    from torchlint.verify.harness import run_once
    from torchlint.verify.tune import render, search

    if gpu_reason is not None:
        print(
            "torchlint verify: without a GPU the batch size is bounded by RAM and the "
            "dataset, not by GPU memory",
            file=err,
        )
    results = []

    def trial(size: int | None) -> Any:
        index = len(results) + 1
        label = f"bs={size}" if size is not None else "as-is"
        result = run_once(
            spec(label, script, index, batch_size=size, watch_batch_size=True), nvml, devices
        )
        if size is None and result.original_batch_size is not None:
            result.variant = f"bs={result.original_batch_size}"
        results.append(result)
        print(f"[trial {index}] {result.variant}: {_run_label(result)}", file=err)
        return result

    tuning = search(trial)
    print(render(tuning), file=out)
    print(f"logs of every run: {log_dir}", file=out)
    code = EXIT_OK if tuning.largest is not None else EXIT_FAILED
    if tuning.largest is None:
        for r in results:
            if not r.usable:
                from torchlint.verify.report import failure

                print(failure(r), file=out)
    if apply and tuning.best is not None:
        code = max(
            code, _apply_batch_size(script, source, tuning.best, tuning.start, config_file, out)
        )
    if json_out is not None:
        from torchlint.verify.stats import run_metrics

        data = {
            "torchlint_verify": 1,
            "script": str(script),
            "gpu": {"reason_unavailable": gpu_reason},
            "log_dir": str(log_dir),
            "tuning": tuning.to_json(),
            "runs": [{**r.to_json(), "metrics": run_metrics(r)} for r in results],
        }
        code = max(code, _write(json_out, json.dumps(data, indent=1, default=str), out))
    if plot is not None and any(r.usable for r in results):
        names = list(dict.fromkeys(r.variant for r in results if r.usable))
        plotting.write(
            plot, results, None, names, f"torchlint verify --tune-batch-size {script.name}"
        )
        print(f"plot written to {plot}", file=out)
    return code


def _apply_batch_size(
    script: Path, source: Any, best: int, start: int | None, config_file: Path | None, out: TextIO
) -> int:
    """Write `best` into the script through TL001's fix (min-batch-size = best)."""
    from torchlint.config import instantiate
    from torchlint.linter import Linter, LintError, unified_diff
    from torchlint.model import Settings
    from torchlint.registry import all_rules
    from torchlint.source import SourceError, write_source

    if start is not None and best <= start:
        print(f"--apply: the script's batch size {start} is already the best; unchanged", file=out)
        return EXIT_OK
    if "TL001" not in all_rules():
        print(f"--apply: rule TL001 is not available; set batch_size={best} by hand", file=out)
        return EXIT_FAILED
    config = _load_config(script, config_file)
    settings = Settings(
        options={**config.options, "min-batch-size": best}, target_torch=config.target_torch
    )
    try:
        outcome = Linter(instantiate(["TL001"]), settings).fix(
            source.text, str(script), unsafe=True
        )
    except LintError as exc:
        print(f"--apply: {exc}", file=out)
        return EXIT_FAILED
    if "TL001" not in outcome.fixed:
        print(
            f"--apply: TL001 cannot rewrite this script's batch size (it must be an int "
            f"literal or module constant feeding a training loop); set batch_size={best} by hand",
            file=out,
        )
        return EXIT_FAILED
    try:
        write_source(source, outcome.text)
    except SourceError as exc:
        print(f"torchlint verify: error: {script}: {exc}", file=out)
        return EXIT_USAGE
    print(f"--apply: batch size {start} -> {best} written to {script} (TL001's fix):", file=out)
    print(unified_diff(script.name, source.text, outcome.text), file=out)
    print("  rescale the learning rate with the batch size and check convergence", file=out)
    return EXIT_OK
