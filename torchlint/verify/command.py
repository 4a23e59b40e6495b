"""`torchlint verify`: run a script as it is and as torchlint would fix it, and compare;
with --profile, run it once under torch.profiler and join PyTorch's run-time
anti-patterns with the static findings.

`verify(options)` returns the exit code: 0 measured, 1 the script could not be measured
(its own failure, reported with its stderr), 2 bad input (one line, never a traceback),
3 nothing to compare (no fix applies to the script or the files of its folder).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from torchlint.verify.fixed import build_fixed, linter_for, load_config_of
from torchlint.verify.options import UsageError, VerifyOptions

if TYPE_CHECKING:
    pass

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NOTHING = 0, 1, 2, 3


def verify(
    options: VerifyOptions,
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    nvml: Any = None,
) -> int:
    """Run `options.script` as it is and as fixed (`nvml`: a stand-in for tests)."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    try:
        return _verify(_checked(options), out, err, nvml)
    except UsageError as exc:
        print(f"torchlint verify: error: {exc}", file=err)
        return EXIT_USAGE


def _checked(options: VerifyOptions) -> VerifyOptions:
    """The options with the script's path resolved, once every check passed."""
    options.check()
    script = options.script
    if not script.exists():
        raise UsageError(f"{script}: no such file")
    if not script.is_file():
        raise UsageError(f"{script}: not a file")
    if script.suffix != ".py":
        raise UsageError(f"{script}: verify runs Python scripts (.py)")
    if options.plot is not None:
        from torchlint.verify.plot import PlotError, check_target

        try:
            check_target(options.plot)
        except PlotError as exc:
            raise UsageError(str(exc)) from None
    if importlib.util.find_spec("torch") is None:
        raise UsageError(
            "verify needs PyTorch in this Python environment: pip install 'torchlint[verify]'"
        )
    return dataclasses.replace(options, script=script.resolve())


def _read_script(script: Path) -> tuple[Any, str]:
    from torchlint.lint.parser import InvalidSyntax
    from torchlint.text.source import SourceError, read_source

    try:
        source = read_source(script)
    except SourceError as exc:
        raise UsageError(f"{script}: {exc}") from None
    try:  # all of the compiler (`return` outside a function...): the script is to run
        compile(source.text, str(script), "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        raise UsageError(f"{script}: {InvalidSyntax.from_compile(exc, source.text)}") from None
    return source, source.text


def _probe_gpu(nvml: Any) -> tuple[Any, list[Any], str | None]:
    from torchlint.verify.nvml import Nvml, NvmlUnavailable, visible_devices_env

    nvml = nvml if nvml is not None else Nvml()
    try:
        return nvml, nvml.open(visible_devices_env()), None
    except NvmlUnavailable as exc:
        return None, [], str(exc)


def gpu_hint(env: Mapping[str, str] = os.environ, platform: str = sys.platform) -> str:
    """How to measure a GPU from where this runs."""
    if "COLAB_RELEASE_TAG" in env or "COLAB_GPU" in env:
        return "on Colab: Runtime > Change runtime type > a GPU, then run the cell again"
    if platform == "darwin":
        return (
            "NVML is NVIDIA-only, so a Mac shows the CPU side; to measure a GPU, run this on "
            "a Linux machine with an NVIDIA GPU (a cloud GPU instance, or Colab)"
        )
    if shutil.which("nvidia-smi", path=env.get("PATH")):
        return (
            "this machine has NVIDIA's tools: run `nvidia-smi` to check the driver, and "
            "check CUDA_VISIBLE_DEVICES"
        )
    return (
        "to measure a GPU, run this where there is one: a local machine with an NVIDIA GPU "
        "and its driver (with a CUDA build of torch), a cloud GPU instance, or Colab "
        "(Runtime > Change runtime type > GPU)"
    )


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


@dataclass
class _Session:
    """What every run of one invocation shares."""

    options: VerifyOptions
    log_dir: Path
    nvml: Any
    devices: Sequence[Any]
    gpu_reason: str | None  # why no GPU is measured; None when one is
    out: TextIO
    err: TextIO

    def run(self, variant: str, code: Path, index: int, **extra: Any) -> Any:
        from torchlint.verify.harness import RunSpec, run_once
        from torchlint.verify.scratch import COPY_BYTES

        spec = RunSpec(variant, code, index, self.log_dir, self.options, **extra)
        result = run_once(spec, self.nvml, self.devices)
        if result.linked and index == 1:
            folder = self.options.script.parent
            names = ", ".join(os.path.relpath(p, folder) for p in result.linked[:3])
            more = f" and {len(result.linked) - 3} more" if len(result.linked) > 3 else ""
            print(
                f"torchlint verify: linked into each run's folder, not copied (over "
                f"{COPY_BYTES >> 20} MB, or past what is copied): {names}{more}; a run that "
                "writes them writes yours",
                file=self.err,
            )
        return result

    def header(self) -> dict[str, Any]:
        """The start of the --json document."""
        return {
            "torchlint_verify": 2,
            "script": str(self.options.script),
            "args": list(self.options.script_args),
            "settings": self.options.to_json(),
            "gpu": {
                "reason_unavailable": self.gpu_reason,
                "devices": [
                    {"index": d.index, "uuid": d.uuid, "name": d.name, "gpm": d.gpm}
                    for d in self.devices
                ],
            },
            "log_dir": str(self.log_dir),
        }


def _verify(options: VerifyOptions, out: TextIO, err: TextIO, nvml: Any) -> int:
    from torchlint.lint.linter import unified_diff

    script = options.script
    source, text = _read_script(script)
    if options.profile:
        return _profile(options, text, out, err)
    fixed_text, diff, others = text, "", {}
    if not options.tune_batch_size:
        fixed = build_fixed(options, text)
        if not fixed.texts:
            more = (
                f"; {', '.join(fixed.held)} can be fixed with --unsafe-fixes" if fixed.held else ""
            )
            print(
                f"torchlint verify: no fixes apply to {script.name} or the files it imports"
                f"{more}: nothing to compare",
                file=out,
            )
            return EXIT_NOTHING
        fixed_text = fixed.script_text(script, text)
        changed = sorted(fixed.texts, key=lambda p: (p != script, str(p)))
        shown = [os.path.relpath(p, script.parent) for p in changed]
        pairs = list(zip(shown, changed, strict=True))
        others = {name: fixed.texts[p] for name, p in pairs if p != script}
        diff = "".join(unified_diff(name, fixed.originals[p], fixed.texts[p]) for name, p in pairs)
        copies = "a copy of" if len(changed) == 1 else "copies of"
        print(f"Fixes applied to {copies} {', '.join(shown)} ({', '.join(fixed.codes)}):", file=out)
        print(diff, file=out)

    log_dir = Path(tempfile.mkdtemp(prefix="torchlint-verify-"))
    nvml, devices, gpu_reason = _probe_gpu(nvml)
    if gpu_reason is not None:
        print(
            f"torchlint verify: no GPU to measure ({gpu_reason}); comparing what the CPU "
            "shows (samples/s, step time, wall time, CPU use, peak RSS)",
            file=err,
        )
    else:
        names = ", ".join(f"{d.index}: {d.name}" for d in devices)
        print(
            f"torchlint verify: sampling GPU(s) {names} every {options.interval_ms:g} ms",
            file=err,
        )
    print(
        f"torchlint verify: logs in {log_dir}; each run works in a copy of "
        f"{script.parent} there (runs/), so nothing it writes lands in your folder",
        file=err,
    )
    session = _Session(options, log_dir, nvml, devices, gpu_reason, out, err)
    try:
        if options.tune_batch_size:
            return _tune(session, source)
        fixed_path = log_dir / "fixed" / script.name
        fixed_path.parent.mkdir()
        fixed_path.write_bytes(fixed_text.encode(source.encoding))
        overlay = []
        for name, fixed_other in others.items():
            copy = log_dir / "fixed" / name
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_text(fixed_other, encoding="utf-8")
            overlay.append((name, copy))
        (log_dir / "fix.diff").write_text(diff, encoding="utf-8")
        return _report(session, _measure(session, fixed_path, tuple(overlay)), diff)
    finally:
        if nvml is not None:
            nvml.close()


def _measure(
    session: _Session, fixed_path: Path, overlay: tuple[tuple[str, Path], ...] = ()
) -> list[Any]:
    """Every run, in the counterbalanced order (the fixed runs with the fixed files of
    the script's folder in `overlay`); stops early once a variant has failed every run so
    far (after each pair)."""
    from torchlint.verify.harness import VARIANTS, run_order

    o, err = session.options, session.err
    order = run_order(o.repeats, o.warmup_runs)
    listed = ", ".join(v + ("*" if warm else "") for v, warm in order)
    footnote = " (* warm-up, discarded)" if o.warmup_runs else ""
    print(f"torchlint verify: run order {listed}{footnote}", file=err)
    runs: list[Any] = []
    for index, (variant, warm) in enumerate(order, 1):
        original = variant == VARIANTS[0]
        code = o.script if original else fixed_path
        result = session.run(
            variant, code, index, warmup_run=warm, overlay=() if original else overlay
        )
        if result.unfixed and not any(r.unfixed for r in runs):
            print(
                f"torchlint verify: {', '.join(result.unfixed)}: in a folder each run links "
                "to (too large to copy), so the fixed runs use the file as it is",
                file=err,
            )
        runs.append(result)
        label = variant + (" (warm-up)" if warm else "")
        print(f"[{index}/{len(order)}] {label}: {_run_label(result)}", file=err)
        if index == 2:
            for note in _torch_notes(runs, session.gpu_reason):
                print(f"torchlint verify: {note}", file=err)
        if index % 2 == 0 and not all(
            any(r.usable for r in runs if r.variant == v) for v in VARIANTS
        ):
            break
    return runs


def _report(session: _Session, runs: list[Any], diff: str) -> int:
    from torchlint.verify import plot as plotting
    from torchlint.verify.report import failure, render, where
    from torchlint.verify.stats import GPU_METRICS, METRICS, compare, run_metrics

    out, script = session.out, session.options.script
    before = [r for r in runs if r.variant == "original"]
    after = [r for r in runs if r.variant == "fixed"]
    measured = all(any(r.usable and not r.warmup_run for r in v) for v in (before, after))
    comparison = compare(before, after)
    if session.gpu_reason is not None:
        lacking = ", ".join(m.label for m in METRICS if m.key in GPU_METRICS)
        comparison.notes.append(
            f"no GPU ({session.gpu_reason}): CPU-side figures only, not measured: {lacking}; "
            f"{gpu_hint()}"
        )
    comparison.notes.extend(_torch_notes(runs, session.gpu_reason))
    if measured:
        print(render(comparison, runs, str(session.log_dir)), file=out)
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
        print("\n".join(where(runs, str(session.log_dir))), file=out)
    code = EXIT_OK if measured else EXIT_FAILED
    if session.options.json_out is not None:
        data = {
            **session.header(),
            "diff": diff,
            "order": [[r.variant, r.warmup_run] for r in runs],
            "summary": comparison.to_json(),
            "runs": [{**r.to_json(), "metrics": run_metrics(r)} for r in runs],
        }
        code = max(code, _write(session.options.json_out, data, out))
    plot = session.options.plot
    if plot is not None and measured:
        try:
            plotting.write(plot, runs, comparison, title=f"torchlint verify {script.name}")
            print(f"plot written to {plot}", file=out)
        except OSError as exc:
            print(f"torchlint verify: error: cannot write {plot}: {exc}", file=out)
            code = EXIT_USAGE
    return code


def _write(path: Path, data: dict[str, Any], out: TextIO) -> int:
    text = json.dumps(data, indent=1, default=str)
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        print(f"torchlint verify: error: cannot write {path}: {exc.strerror or exc}", file=out)
        return EXIT_USAGE
    print(f"measurements written to {path}", file=out)
    return EXIT_OK


def _tune(session: _Session, source: Any) -> int:
    from torchlint.verify import plot as plotting
    from torchlint.verify.report import failure, where
    from torchlint.verify.stats import run_metrics
    from torchlint.verify.tune import render, search

    o, out, err = session.options, session.out, session.err
    if session.gpu_reason is not None:
        print(
            "torchlint verify: without a GPU the batch size is bounded by RAM and the "
            "dataset, not by GPU memory",
            file=err,
        )
    results: list[Any] = []

    def trial(size: int | None) -> Any:
        index = len(results) + 1
        label = f"bs={size}" if size is not None else "as-is"
        result = session.run(label, o.script, index, batch_size=size, watch_batch_size=True)
        if size is None and result.original_batch_size is not None:
            result.variant = f"bs={result.original_batch_size}"
        results.append(result)
        print(f"[trial {index}] {result.variant}: {_run_label(result)}", file=err)
        return result

    tuning = search(trial)
    print(render(tuning), file=out)
    print("\n".join(where(results, str(session.log_dir))), file=out)
    code = EXIT_OK if tuning.largest is not None else EXIT_FAILED
    if tuning.largest is None:
        for r in results:
            if not r.usable:
                print(failure(r), file=out)
    if o.apply and tuning.best is not None:
        code = max(code, _apply_batch_size(o, source, tuning.best, tuning.start, out))
    if o.json_out is not None:
        data = {
            **session.header(),
            "tuning": tuning.to_json(),
            "runs": [{**r.to_json(), "metrics": run_metrics(r)} for r in results],
        }
        code = max(code, _write(o.json_out, data, out))
    if o.plot is not None and any(r.usable for r in results):
        names = list(dict.fromkeys(r.variant for r in results if r.usable))
        title = f"torchlint verify --tune-batch-size {o.script.name}"
        plotting.write(o.plot, results, None, names, title)
        print(f"plot written to {o.plot}", file=out)
    return code


def _apply_batch_size(
    options: VerifyOptions, source: Any, best: int, start: int | None, out: TextIO
) -> int:
    """Write `best` into the script through TL001's fix (min-batch-size and
    tiny-network-batch-size = best: the one value the fix writes)."""
    from torchlint.config.load import instantiate
    from torchlint.lint.linter import Linter, unified_diff
    from torchlint.lint.parser import LintError
    from torchlint.lint.registry import all_rules
    from torchlint.text.source import SourceError, write_source

    script = options.script
    if start is not None and best <= start:
        print(f"--apply: the script's batch size {start} is already the best; unchanged", file=out)
        return EXIT_OK
    if "TL001" not in all_rules():
        print(f"--apply: rule TL001 is not available; set batch_size={best} by hand", file=out)
        return EXIT_FAILED
    config = load_config_of(script, options.config_file)
    settings = dataclasses.replace(
        config.settings(),
        options={**config.options, "min-batch-size": best, "tiny-network-batch-size": best},
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


def _as_the_users(profile: dict[str, Any], ran_in: str, folder: str) -> dict[str, Any]:
    """The profile with the paths of the run's copy of the script's folder (`ran_in`)
    as those of the user's `folder`: findings are joined with the script by its path."""

    def user(path: str) -> str:
        rel = os.path.relpath(path, ran_in)
        return path if rel == ".." or rel.startswith(".." + os.sep) else os.path.join(folder, rel)

    def moved(group: dict[str, Any]) -> dict[str, Any]:
        return {**group, "frames": [[user(path), line] for path, line in group["frames"]]}

    patterns = {
        name: {**entry, "matches": [moved(m) for m in entry.get("matches", ())]}
        for name, entry in profile.get("patterns", {}).items()
    }
    loading = [moved(g) for g in profile.get("loading", ())]
    return {**profile, "patterns": patterns, "loading": loading}


def _profile(options: VerifyOptions, text: str, out: TextIO, err: TextIO) -> int:
    """--profile: the static findings, one profiled run of the script, and their join."""
    from torchlint.lint.noqa import parse_suppressions
    from torchlint.lint.parser import LintError, parse
    from torchlint.semantic import build
    from torchlint.verify import crosscheck, matcher, profile_report
    from torchlint.verify.harness import RunSpec, run_once
    from torchlint.verify.report import failure, where

    script = options.script
    problem = matcher.problem()
    if problem is not None:
        raise UsageError(problem)
    linter, plan = linter_for(options)
    static = build_fixed(options, text, fix=False)
    violations = static.findings.get(script, [])
    try:
        module = build(parse(text, str(script)), str(script), plan.settings)
    except LintError as exc:
        raise UsageError(f"{script}: {exc}") from None
    elsewhere = {
        os.path.relpath(p, script.parent): sorted({v.code for v in found})
        for p, found in static.findings.items()
        if p != script and found
    }
    if elsewhere:
        listed = "; ".join(f"{name}: {', '.join(c)}" for name, c in sorted(elsewhere.items()))
        print(
            f"torchlint verify: the files {script.name} imports have findings ({listed}); "
            f"the profile is joined with {script.name}'s own",
            file=err,
        )
    log_dir = Path(tempfile.mkdtemp(prefix="torchlint-verify-"))
    print(
        f"torchlint verify: profiling {script.name} up to {options.steps} optimizer steps; "
        f"logs in {log_dir}",
        file=err,
    )
    result = run_once(RunSpec("profile", script, 1, log_dir, options, profile_steps=options.steps))
    found = next((e for e in result.events if e.get("event") == "profile"), None)
    if found is None:
        print("torchlint verify: the script could not be profiled:", file=out)
        print(failure(result), file=out)
        return EXIT_FAILED
    check = crosscheck.join(
        _as_the_users(found, result.ran_in, str(script.parent)),
        violations,
        module,
        str(script),
        [r.code for r in linter.rules],
        parse_suppressions(text).suppressed,
    )
    print(profile_report.render(check), file=out)
    code = EXIT_OK
    if not result.usable:
        print(failure(result), file=out)
        code = EXIT_FAILED
    print("\n".join(where([result], str(log_dir), "logs of the run")), file=out)
    if options.json_out is not None:
        run = result.to_json()
        run["events"] = [e for e in run["events"] if e.get("event") != "profile"]
        data = {
            "torchlint_verify": 2,
            "script": str(script),
            "args": list(options.script_args),
            "settings": options.to_json(),
            "log_dir": str(log_dir),
            "profile": check.to_json(),
            "runs": [run],
        }
        code = max(code, _write(options.json_out, data, out))
    if options.plot is not None:
        try:
            options.plot.write_text(profile_report.html_page(check), encoding="utf-8")
            print(f"report written to {options.plot}", file=out)
        except OSError as exc:
            print(f"torchlint verify: error: cannot write {options.plot}: {exc}", file=out)
            code = EXIT_USAGE
    return code
