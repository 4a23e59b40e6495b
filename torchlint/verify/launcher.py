"""Runs inside the measured child: executes the user's script as `__main__` and counts.

Invoked as a plain file (``python launcher.py SCRIPT ARGS...``, or under torchrun), so it
imports nothing from torchlint: only the standard library, and torch's hooks once the
script itself imports torch. Its settings arrive in the ``TORCHLINT_VERIFY`` environment
variable (JSON); what it measures leaves as JSON lines in a channel file, one per rank,
never through the script's stdout.

Counted without editing the script: optimizer steps (a global optimizer step hook; with
several optimizers only the first one stepped counts) and the batches and samples that feed
them: at each step, those yielded since the previous step by the DataLoader iterator that
yielded the last batch (the training loader). Batches of other loaders (validation) are
left out. After ``warmup`` steps the measurement window opens; it closes at the first step
after at least ``steps`` more and ``window`` seconds, and `StopRun`, a BaseException that
``except Exception`` cannot swallow, ends the script; then the launcher runs the atexit
handlers and exits.

With ``profile_steps`` (`torchlint verify --profile`) there is no window: the script runs
under torch.profiler from its `import torch` up to that many optimizer steps (or its
end), then matcher.py, loaded by its path, runs PyTorch's anti-pattern classes over the
profile and the result leaves as one ``profile`` event.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import importlib.abc
import importlib.util
import json
import os
import sys
import time
import types
from typing import Any

ENV = "TORCHLINT_VERIFY"

# Messages PyTorch and its allocators use for "out of memory" (CUDA, cuBLAS/cuDNN, ROCm,
# MPS, the CPU allocator).
OOM_MARKERS = (
    "out of memory",
    "CUBLAS_STATUS_ALLOC_FAILED",
    "CUDNN_STATUS_ALLOC_FAILED",
    "DefaultCPUAllocator: can't allocate memory",
    "MPS backend out of memory",
)


class StopRun(BaseException):
    """The measurement window is closed: unwind the script (not an `Exception`)."""


def is_oom(exc: BaseException) -> bool:
    torch = sys.modules.get("torch")
    oom_type = getattr(getattr(torch, "cuda", None), "OutOfMemoryError", None)
    if oom_type is not None and isinstance(exc, oom_type):
        return True
    text = str(exc)
    return isinstance(exc, (RuntimeError, MemoryError)) and any(m in text for m in OOM_MARKERS)


def batch_len(batch: Any) -> int:
    """Samples in a collated batch: the leading dimension of its first tensor."""
    for _ in range(8):
        shape = getattr(batch, "shape", None)
        if shape is not None:
            return int(shape[0]) if len(shape) else 1
        if isinstance(batch, (list, tuple)):
            if not batch:
                return 0
            first = batch[0]
            if isinstance(first, (list, tuple, dict)) or hasattr(first, "shape"):
                batch = first
                continue
            return len(batch)
        if isinstance(batch, dict) and batch:
            batch = next(iter(batch.values()))
            continue
        break
    return 1


class Counter:
    """The counting state of one process, and the channel it reports on."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.warmup = int(settings["warmup"])
        self.steps = int(settings["steps"])
        self.window = float(settings.get("window", 0.0))
        self.batch_size = settings.get("batch_size")
        self.watch_batch_size = bool(settings.get("watch_batch_size"))
        self.progress_every = float(settings.get("progress_interval", 0.1))
        self.rank = int(os.environ.get("RANK", "0"))
        self.pid = os.getpid()
        path = f"{settings['channel']}.{self.rank}.jsonl"
        self.out = open(path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 - lives until exit
        self.batches = 0  # batches and samples that fed optimizer steps
        self.samples = 0
        self.loader_batches = 0  # every batch of every DataLoader
        self.pending: dict[int, list[int]] = {}  # iterator id -> [batches, samples] since a step
        self.last_iterator = 0  # id() of the iterator that yielded the last batch
        self.opt_steps = 0
        self.first_optimizer: int | None = None
        self.phase = 0  # 0: warm-up, 1: window open, 2: window closed
        self.opened_at = 0.0
        self.next_progress = 0.0
        self.torch: Any = None
        self.undo: list[Any] = []
        profile_steps = settings.get("profile_steps")
        self.profile_steps = int(profile_steps) if profile_steps is not None else None
        self.profiler: Any = None  # the running torch.profiler.profile
        self.matcher: Any = None  # matcher.py
        self.prefixes: list[str] = []

    def emit(self, event: str, **fields: Any) -> None:
        if os.getpid() != self.pid:  # a forked DataLoader worker or a script's own fork
            return
        fields["event"] = event
        fields.setdefault("t", time.monotonic())
        fields["rank"] = self.rank
        with contextlib.suppress(OSError, ValueError):
            self.out.write(json.dumps(fields, default=str) + "\n")

    def counts(self) -> dict[str, Any]:
        import resource

        usage = resource.getrusage(resource.RUSAGE_SELF)
        return {
            "steps": self.opt_steps,
            "batches": self.batches,
            "samples": self.samples,
            "loader_batches": self.loader_batches,
            "cpu_s": usage.ru_utime + usage.ru_stime,
            "maxrss_kb": usage.ru_maxrss,
        }

    # -- hooks ----------------------------------------------------------------------------

    def on_batch(self, iterator: object, batch: Any) -> None:
        self.loader_batches += 1
        self.last_iterator = id(iterator)
        counts = self.pending.setdefault(self.last_iterator, [0, 0])
        counts[0] += 1
        counts[1] += batch_len(batch)
        if self.phase == 2:
            raise StopRun

    def on_iterator(self, iterator: object) -> None:
        """A DataLoader iterator was made: what an earlier one at the same address yielded
        (a validation pass's iterator, freed) is not its own."""
        self.pending.pop(id(iterator), None)

    def on_step(self, optimizer: Any, _args: Any = None, _kwargs: Any = None) -> None:
        if self.first_optimizer is None:
            self.first_optimizer = id(optimizer)
        elif id(optimizer) != self.first_optimizer:
            return
        self.opt_steps += 1
        fed = self.pending.get(self.last_iterator)
        if fed is not None:
            self.batches += fed[0]
            self.samples += fed[1]
        self.pending.clear()
        if self.profile_steps is not None:
            if self.opt_steps >= self.profile_steps:
                self.phase = 2
                raise StopRun
            return
        if self.phase == 0 and self.opt_steps >= self.warmup:
            self._sync()
            self.phase = 1
            self.opened_at = time.monotonic()
            # The window's clock starts here, not after the counters are read.
            self.emit("window_open", t=self.opened_at, **self.counts(), **self._device())
        elif (
            self.phase == 1
            and self.opt_steps >= self.warmup + self.steps
            and time.monotonic() - self.opened_at >= self.window
        ):
            self._sync()
            self.phase = 2
            self.emit("window_close", **self.counts(), peak_memory=self._peak_memory())
            raise StopRun
        elif self.phase == 2:
            raise StopRun
        now = time.monotonic()
        if now >= self.next_progress:
            self.next_progress = now + self.progress_every
            self.emit("progress", steps=self.opt_steps, batches=self.batches, samples=self.samples)

    def _cuda(self) -> Any:
        cuda = getattr(self.torch, "cuda", None)
        try:
            return cuda if cuda is not None and cuda.is_initialized() else None
        except Exception:
            return None

    def _sync(self) -> None:
        cuda = self._cuda()
        if cuda is not None:
            with contextlib.suppress(Exception):
                cuda.synchronize()

    def _device(self) -> dict[str, Any]:
        torch = self.torch
        info: dict[str, Any] = {
            "torch": getattr(torch, "__version__", None),
            "torch_cuda": getattr(getattr(torch, "version", None), "cuda", None),
            "cuda_initialized": False,
        }
        cuda = self._cuda()
        if cuda is not None:
            try:
                props = cuda.get_device_properties(cuda.current_device())
                info.update(cuda_initialized=True, device=props.name, uuid=str(props.uuid))
            except Exception:
                pass
        return info

    def _peak_memory(self) -> int | None:
        cuda = self._cuda()
        if cuda is None:
            return None
        try:
            return int(cuda.max_memory_allocated())
        except Exception:
            return None

    # -- installation -------------------------------------------------------------------

    def install(self, torch: Any) -> None:
        """Hook the DataLoader iterator and the optimizer step (torch just imported)."""
        self.torch = torch
        try:
            from torch.optim.optimizer import register_optimizer_step_post_hook
            from torch.utils.data import dataloader

            base = dataloader._BaseDataLoaderIter
            original_next = base.__next__
            counter = self

            @functools.wraps(original_next)
            def __next__(it: Any) -> Any:
                batch = original_next(it)
                counter.on_batch(it, batch)
                return batch

            original_init = base.__init__

            @functools.wraps(original_init)
            def __init__(it: Any, *args: Any, **kwargs: Any) -> None:
                original_init(it, *args, **kwargs)
                counter.on_iterator(it)

            setattr(base, "__next__", __next__)  # noqa: B010 (a method of torch's class)
            setattr(base, "__init__", __init__)  # noqa: B010
            handle = register_optimizer_step_post_hook(self.on_step)
            self.undo = [
                lambda: setattr(base, "__next__", original_next),
                lambda: setattr(base, "__init__", original_init),
                handle.remove,
            ]
            if self.batch_size is not None or self.watch_batch_size:
                self._watch_batch_size(dataloader.DataLoader)
        except Exception as exc:  # never break the user's script
            self.emit("hook_error", message=f"{type(exc).__name__}: {exc}")
        if self.profile_steps is not None:
            self._start_profile(torch)

    # -- profiling (--profile) ----------------------------------------------------------

    def _start_profile(self, torch: Any) -> None:
        """Start torch.profiler, or end the run (StopRun) saying why it cannot."""
        try:
            path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "matcher.py")
            spec = importlib.util.spec_from_file_location("_torchlint_matcher", path)
            assert spec is not None and spec.loader is not None
            matcher = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(matcher)
            problem = matcher.problem()
            if problem is None:
                self.prefixes = matcher.prefixes()
                self.profiler = matcher.start(torch)
                self.matcher = matcher
        except Exception as exc:
            problem = f"cannot start torch.profiler: {type(exc).__name__}: {exc}"
        if problem is not None:
            self.emit("profile_error", message=problem)
            raise StopRun

    def finish_profile(self, script_path: str) -> None:
        """Stop the profiler and report what PyTorch's pattern classes found."""
        if self.profiler is None:
            return
        profiler, self.profiler = self.profiler, None
        try:
            found = self.matcher.finish(profiler, script_path, self.prefixes)
        except self.matcher.Lost as exc:
            self.emit("profile_error", message=str(exc))
            return
        except Exception as exc:
            self.emit("profile_error", message=f"{type(exc).__name__}: {exc}"[:4000])
            return
        self.emit("profile", steps=self.opt_steps, **found)

    def uninstall(self) -> None:
        """Remove the counting hooks (the overhead benchmark switches them on and off)."""
        for undo in self.undo:
            undo()
        self.undo = []

    def _watch_batch_size(self, loader_class: type) -> None:
        """Report each DataLoader's batch size; with `self.batch_size`, replace it in every
        DataLoader that uses automatic batching (batch-size tuning)."""
        import inspect

        original_init = getattr(loader_class, "__init__")  # noqa: B009 (the class's, unbound)
        signature = inspect.signature(original_init)
        counter = self

        @functools.wraps(original_init)
        def __init__(loader: Any, *args: Any, **kwargs: Any) -> None:
            try:
                bound = signature.bind(loader, *args, **kwargs)
            except TypeError:  # let DataLoader report the bad call itself
                original_init(loader, *args, **kwargs)
                return
            size = bound.arguments.get("batch_size", 1)
            if size is not None and bound.arguments.get("batch_sampler") is None:
                try:
                    length: int | None = len(bound.arguments.get("dataset"))  # type: ignore[arg-type]
                except Exception:
                    length = None
                used = counter.batch_size or size
                counter.emit("batch_size", original=size, used=used, dataset_len=length)
                bound.arguments["batch_size"] = used
            original_init(*bound.args, **bound.kwargs)

        setattr(loader_class, "__init__", __init__)  # noqa: B010


class _TorchWatcher(importlib.abc.MetaPathFinder):
    """Installs the hooks right after the script's own `import torch` completes."""

    def __init__(self, counter: Counter) -> None:
        self.counter = counter

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        original_exec = spec.loader.exec_module
        counter = self.counter

        def exec_module(module: types.ModuleType) -> None:
            original_exec(module)
            counter.install(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _patch_spawn_main(code_path: str, script_path: str) -> None:
    """Spawned workers re-import `__main__` from its path: give them the fixed code."""
    import multiprocessing.spawn as spawn

    original = spawn.get_preparation_data

    def get_preparation_data(name: str) -> dict[str, Any]:
        data = original(name)
        if data.get("init_main_from_path") == os.path.normpath(script_path):
            data["init_main_from_path"] = code_path
        return data

    spawn.get_preparation_data = get_preparation_data


def run_script(code_path: str, script_path: str) -> None:
    """`runpy.run_path` semantics, except that `__file__` is the user's path even when the
    code comes from the fixed copy (so paths relative to the script keep working)."""
    with open(code_path, "rb") as f:
        source = f.read()
    code = compile(source, code_path, "exec", dont_inherit=True)
    main = types.ModuleType("__main__")
    main.__dict__.update(
        __file__=script_path, __cached__=None, __loader__=None, __package__=None, __spec__=None
    )
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    exec(code, main.__dict__)


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def main() -> int:
    settings = json.loads(os.environ.pop(ENV))
    script_path = os.path.abspath(sys.argv[1])
    code_path = settings.get("code") or script_path
    sys.argv = [script_path, *sys.argv[2:]]
    if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
        sys.path[0] = os.path.dirname(script_path)  # as `python script.py` would have it
    else:  # python -P / PYTHONSAFEPATH: nothing of ours to replace
        sys.path.insert(0, os.path.dirname(script_path))
    counter = Counter(settings)
    counter.emit("start", pid=os.getpid(), pgid=os.getpgrp())
    if code_path != script_path:
        _patch_spawn_main(code_path, script_path)
    code = 0
    try:
        if "torch" in sys.modules:
            counter.install(sys.modules["torch"])
        else:
            sys.meta_path.insert(0, _TorchWatcher(counter))
        run_script(code_path, script_path)
    except StopRun:
        counter.emit("stopped")
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except KeyboardInterrupt:
        counter.emit("interrupted")
        code = 130
    except BaseException as exc:
        import traceback

        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
            tb = tb.tb_next  # the launcher's own frames say nothing to the user
        traceback.print_exception(type(exc), exc, tb)
        message = f"{type(exc).__name__}: {exc}"
        counter.emit("exception", type=type(exc).__name__, message=message[:4000], oom=is_oom(exc))
        code = 1
    counter.finish_profile(script_path)
    counter.emit("end", code=code, phase=counter.phase, **counter.counts())
    if counter.phase == 2:
        # Stopped by us: the script's `finally` blocks have run; run its atexit handlers
        # (multiprocessing's ends DataLoader workers) and skip the interpreter's teardown,
        # which takes seconds with torch loaded.
        import atexit

        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
