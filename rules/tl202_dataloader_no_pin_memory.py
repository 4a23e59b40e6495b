"""TL202 dataloader-no-pin-memory: batches for the GPU are loaded into pageable memory.

What: a `torch.utils.data.DataLoader` without `pin_memory` (or with
`pin_memory=False`) whose batches feed a training loop of this file (a backward pass
and an optimizer step per batch) or that PyTorch Lightning trains on (returned by a
`train_dataloader` hook, or given to `trainer.fit`), in a file that trains on a GPU: a
device that is a GPU on some branch (`"cuda"`, `torch.device("cuda" if ... else "cpu")`,
`torch.accelerator.current_accelerator()`, a `--device` option defaulting to "cuda"),
`.cuda()`, `torch.cuda.*`, or Lightning/Accelerate/DeepSpeed/transformers Trainer code,
which trains on the GPU when there is one (unless every Lightning Trainer of the file
says `accelerator="cpu"`). Loaders only evaluated, or used for a batch of samples now
and then, are left alone: their copies are not on the training path; so are loaders
with persistent workers in a file whose Lightning Trainer reloads them
(`reload_dataloaders_every_n_epochs`), where Lightning advises against pinning. A call
of a loader factory the project names (`loader-factories` with `pin-memory` in
`[tool.torchlint.semantic]`, see docs/extending.md) counts where it passes `False` for
that parameter (the fix sets the factory's parameter); one that passes nothing has the
factory's own default: silent.
A loader whose dataset returns strings only (a `__getitem__` returning items of lists
of text: names, lines, sentence pairs read from a file, whose tensors are built later)
has nothing to pin: left alone.
A loader that only a Lightning Trainer on the CPU, or one that runs a handful of
batches (`fast_dev_run`, `limit_train_batches` of at most 10: a test or a
bug-report template; `max_steps` of at most 100: a demo or a benchmark), trains on is
left alone.

Why: a host-to-device copy from pageable memory is staged through a pinned buffer
by the driver and cannot be asynchronous; with `pin_memory=True` the loader's pin
thread puts batches in page-locked memory, the copy runs at full PCIe bandwidth and
`non_blocking=True` copies (TL105) overlap compute. In a CPU-only file there is
nothing to copy to.

Bad:
    model = torchvision.models.resnet50().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(dataset, batch_size=64, shuffle=True)
    for x, y in loader:
        loss = criterion(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()

Good:
    model = torchvision.models.resnet50().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(dataset, batch_size=64, shuffle=True, pin_memory=torch.cuda.is_available())
    for x, y in loader:
        loss = criterion(model(x.cuda(non_blocking=True)), y.cuda(non_blocking=True))
        loss.backward()
        optimizer.step()

Fix (safe): set `pin_memory=torch.cuda.is_available()`: pinned where there is a GPU
to copy to, and no warning (nor wasted page-locked memory) on CPU-only machines; and,
in the same edit, make the loops' copies of its batches to the GPU non-blocking as
TL105 would once the loader pins (`non_blocking=True` where the device is CUDA, a value
true on CUDA only where the device is chosen at run time). Safe: pinning changes where
a batch lives in host memory, never its values (see TL105 for the copies). Options
passed as `**options` are read like keywords when the file shows how the dict is built;
when the dict itself sets `pin_memory=False` the finding is not fixed (a keyword as
well would raise TypeError), and a dict the file does not show is not reported.

Impact: high where the loader has workers (the pin thread pins the next batches while
the GPU trains), unless its batches are small images (a torchvision MNIST/CIFAR-like
dataset, at most 64x64, directly or through a `Subset`/`random_split` of one, batches of
at most 4 MB: a copy of a fraction of a millisecond, pinned or not), or its training
step is heavy: it fine-tunes a Hugging Face pretrained transformer (one it trains, or one
the file loads where what it trains wraps it: a LightningModule) or runs a network of
100M parameters or more, beside which a copy is a small share.
Low for a loader without workers (`num_workers` absent or 0) where
TL201 asks for workers: its fix gives them and pins in the same edit (one decision, one
change), and where it cannot make the change itself (a script without a main guard, a
lambda in the dataset) its message asks for `pin_memory` with the workers; or where
it is to stay without workers (TL201 silent or low: data in memory or processed ahead,
an IterableDataset) and either its batches reach the GPU through blocking copies only
(pinned on the main thread, then copied synchronously: what the driver's own staging
does; Accelerate's copies unless `DataLoaderConfiguration(non_blocking=True)`, a legacy
`.type(torch.cuda.FloatTensor)`, `.to(...)` calls the fix cannot make non-blocking), or
its samples are rows of a Hugging Face dataset processed ahead (token ids: a few KB a
batch, whose copy takes microseconds).

Unknown device: silent, as the rule reports only in files that use a GPU (see TL201);
with a device that cannot be named there may be no host-to-device copy for pinned memory
to speed up. Silent too for a loader every pass over which runs on the CPU, in this file
and in the project's others (networks moved to the CPU and nowhere else, batches never copied:
the CPU half of a notebook).

Sources: PyTorch Performance Tuning Guide; CUDA semantics notes, "Use pinned memory
buffers"; torch.utils.data docs, "Memory Pinning"; Lightning docs, "Speed Up Model
Training" ("DataLoaders": `pin_memory=True` for GPUs).
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchlint.edits import (
    non_blocking,
    pin_with_workers,
    pinned_by_workers_fix,
    pinned_copies,
    set_arg,
    spell,
)
from torchlint.fixes import Applicability, FixSafety, Replace, fix
from torchlint.results import Impact
from torchlint.rule import NO_GPU, NOT_TRAINED, Diagnostic, Rule
from torchlint.semantic import (
    MISSING,
    DataLoaderSite,
    TorchModule,
    batch_copies,
    bool_value,
    cpu_loader,
    heavy_training,
    int_value,
    tiny_batches,
    typed_copies,
)


class DataLoaderNoPinMemory(Rule):
    code = "TL202"
    name = "dataloader-no-pin-memory"
    fix_safety = FixSafety.SAFE
    tokens = ("DataLoader", "auto_dataloader")  # ignite's factory too

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        loaders = [*module.loaders.sites, *module.loaders.made]
        if not loaders:
            return
        if not module.placement.uses_gpu:
            self.pass_over(None, NO_GPU)
            return
        for loader in loaders:
            why = _passed_over(module, loader)
            if why is not None:
                self.pass_over(loader.call.node, why)
                continue
            pin = loader.arg("pin_memory")
            if pin is MISSING:
                what = "DataLoader without `pin_memory`"
            elif bool_value(pin) is False:
                what = f"{loader.spelled('pin_memory', 'False')} on a training DataLoader"
            else:
                self.pass_over(loader.call.node, "`pin_memory` is set")
                continue
            spelled, imp = spell(module, "torch.cuda.is_available", loader.call.scope)
            call = set_arg(loader, "pin_memory", cst.parse_expression(f"{spelled}()"))
            outside = loader.outside
            where = (
                f"whose batches go to the GPU in {outside.where}"
                if not any(lp.is_training for lp in loader.loops) and outside and outside.gpu
                else "in a file that trains on the GPU"
            )
            copies, needed = pinned_copies(module, loader)
            pin_to = loader.spelled("pin_memory", f"{spelled}()")
            title = f"Set {pin_to}" + (
                f" and make the {len(copies)} copies of its batches non-blocking"
                if len(copies) > 1
                else " and make the copy of its batches non-blocking"
                if copies
                else ""
            )
            message = (
                f"{what} {where}: host-to-device copies go through "
                f"pageable memory and cannot overlap compute; set {pin_to}"
                + (" in the `**` dict that sets it" if call is None else "")
            )
            low = _low(module, loader)
            yield self.diagnostic(
                loader.call.node,
                message if low is None else f"{message} (low impact: {low})",
                fix=None
                if call is None
                else fix(
                    title,
                    Applicability.SAFE,
                    Replace(loader.call.node, call),
                    *copies,
                    imports=[imp, *needed] if imp is not None else needed,
                ),
                impact=Impact.HIGH if low is None else Impact.LOW,
            )


def _low(module: TorchModule, loader: DataLoaderSite) -> str | None:
    """Why pinning this loader gains little: it has no workers, and either TL201's change
    gives it workers and pins it, or it is to stay without them (TL201 is silent or low)
    and its copies stay blocking (pinned on the main thread, then copied synchronously:
    what the driver's staging does anyway) or its samples are rows of a Hugging Face
    dataset processed ahead (token ids: a few KB a batch). Where TL201 asks for workers
    but cannot make the change itself (no main guard, a lambda), its message asks for the
    pinning with them: one decision, reported once."""
    tiny = tiny_batches(module, [loader])
    if tiny is not None:
        return tiny
    why = _without_workers(module, loader)
    heavy = heavy_training(module, loader) if why is None else None
    return f"{heavy}: a copy of its batch is a small share of it" if heavy else why


def _without_workers(module: TorchModule, loader: DataLoaderSite) -> str | None:
    """Why pinning a loader without workers gains little (`_low`)."""
    workers = loader.arg("num_workers")
    if workers is not MISSING and int_value(workers) != 0:
        return None
    if not loader.argument_known("num_workers"):
        return None  # a factory's workers we cannot see: none of the reasons can be told
    datasets = module.datasets
    if datasets.wants_workers(loader):
        if pinned_by_workers_fix(module, loader):
            return "no workers yet: TL201's change gives it workers and pins it"
        if pin_with_workers(module, loader, module.restarts_workers(loader)) is None:
            return None
        return "no workers yet: pinning goes with the workers TL201 asks for"
    if _synchronous(module, loader):
        return (
            "no workers, and its batches are copied synchronously: pinning on the main "
            "thread saves nothing"
        )
    if datasets.processed_data(loader):
        return "no workers, and batches of a Hugging Face dataset processed ahead are a few KB"
    return None


def _synchronous(module: TorchModule, loader: DataLoaderSite) -> bool:
    """The loader's batches reach the GPU through blocking copies, pinned or not:
    Accelerate's (unless a `DataLoaderConfiguration` says `non_blocking=True`; Lightning's
    are non-blocking), or copies seen in the loops over it in this file, none with
    `non_blocking=` nor one that could take it (TL105's fix, once the loader pins), a
    legacy CUDA tensor type's `.type(Tensor)` included."""
    if module.placement.managed:
        return not (
            module.frameworks.non_blocking_copies
            or module.frameworks.trainers
            or loader.trained_by_framework
        )
    copies = [c for lp in loader.loops for c in batch_copies(module, lp)]
    typed = [c for lp in loader.loops for c in typed_copies(module, lp)]
    return bool(copies or typed) and all(
        c.kwarg("non_blocking") is MISSING and non_blocking(module, c) is None for c in copies
    )


def _passed_over(module: TorchModule, loader: DataLoaderSite) -> str | None:
    """Why the loader is not one to pin, or None."""
    if not loader.argument_known("pin_memory"):
        return "`pin_memory` comes from a `**` dict it cannot read"
    if not loader.trains or module.frameworks.idle_loader(loader):
        return NOT_TRAINED
    if _reloaded_persistent(module, loader):
        return "persistent workers under a Trainer that reloads its loaders: Lightning warns"
    if module.datasets.text_data(loader):
        return "its samples are text: batches of token ids, a few KB"
    if cpu_loader(module, loader):
        return "every pass over it runs on the CPU"
    return None


def _reloaded_persistent(module: TorchModule, loader: DataLoaderSite) -> bool:
    """Persistent workers in a file whose Lightning Trainer reloads the loaders: Lightning
    warns that pinning is unstable there (pytorch/pytorch#91252) and advises against it."""
    persistent = loader.arg("persistent_workers")
    if persistent is MISSING or bool_value(persistent) is False:
        return False
    return any(
        (reload := t.kwarg("reload_dataloaders_every_n_epochs")) is not MISSING
        and int_value(reload) != 0
        for t in module.frameworks.trainers
    )
