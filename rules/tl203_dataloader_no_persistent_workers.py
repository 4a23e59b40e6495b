"""TL203 dataloader-no-persistent-workers: worker processes are restarted every epoch.

What: a `torch.utils.data.DataLoader` with worker processes (`num_workers` an int
above 0, the machine's CPU count: `os.cpu_count()`, `min(8, os.cpu_count())`, or the
`NUM_WORKERS` constant TL201 defines; not `os.cpu_count() // 2`, 0 on one CPU) that is iterated once
per epoch (a loop over it inside another loop, or inside a function called in a
loop) and was built outside that outer loop, without `persistent_workers`; or whose
iterator is made again and again (`next(iter(val_loader))` in a helper the training
loop calls every N steps): each `iter()` starts the workers anew. The loop over it must
do work on the batches (train, run a network, or hand them to a function of the
project): a loading demo that looks at a batch and moves on is left alone, as is a
Lightning Trainer that stops after one epoch (`max_epochs=1`, `fast_dev_run`, a
`limit_train_batches` of at most 10) or after at most 100 steps (`max_steps`: a demo
that may not finish its first epoch). A DataLoader subclass that hands its arguments on
to DataLoader counts as one, unless it defines `__iter__`: it iterates its own way and may
keep its workers (yolov5's `InfiniteDataLoader` repeats its sampler forever).

Why: without `persistent_workers=True` every `for batch in loader` starts
`num_workers` fresh processes, each importing its modules and rebuilding its copy of
the dataset, and shuts them down at the end of the epoch. The GPU idles during the
start of every epoch (seconds to minutes with heavy datasets or many workers). A
loader built inside the epoch loop gains nothing from the option and is left alone,
as is an explicit `persistent_workers=False`.

Bad:
    model = torchvision.models.resnet18().cuda()
    loader = DataLoader(train_set, batch_size=64, num_workers=8)
    for epoch in range(epochs):
        for x, y in loader:
            predictions = model(x.cuda())

Good:
    model = torchvision.models.resnet18().cuda()
    loader = DataLoader(train_set, batch_size=64, num_workers=8, persistent_workers=True)
    for epoch in range(epochs):
        for x, y in loader:
            predictions = model(x.cuda())

Fix (unsafe): add `persistent_workers=True` (`persistent_workers=opt.n_cpu > 0` where
the worker count is a name or option a user may set to 0, for which `True` raises). No
fix where the `**` dict gets `num_workers` on some paths only (`if use_cuda:
kwargs.update(num_workers=1, ...)`), or a count a user may set to 0 (`dict(num_workers=
args.workers)`): set the option in the same place by hand. Unsafe because the workers
keep their copy of the dataset (memory) and their state across epochs: a dataset that
changes between epochs (curriculum, `set_epoch` on the dataset rather than the sampler)
is no longer seen by them, and worker seeds are not redrawn each epoch.

Target torch: `persistent_workers` exists from PyTorch 1.7; with `target-torch`
below 1.7 the rule is silent.

Impact: low for a loader whose iterator is made again only every N steps, N at least
100 as the file shows it (`next(iter(val_loader))` in a sampling helper every call of
which is under `if batches_done % opt.sample_interval == 0:`, an argparse default
read): the workers' start, a fraction of a second to seconds, is spread over the N
training steps in between. Where N cannot be read it stays high. Low for a loader no
training loop takes batches from (a validation loader restarted once or a few times per epoch: its
start is a small share of the run, and dropping its workers is often the simpler fix).
Low for a training loader whose epochs are long: it reads a data set of 100,000
samples or more (a torchvision `CelebA`, `ImageNet`, `CocoDetection`, `LSUN` or
`Places365`, or a string that builds the dataset names CelebA, ImageNet, COCO, LSUN,
FFHQ, Places365 or edges2shoes, as written or as an option's default), or its step is
heavy: it fine-tunes a Hugging Face pretrained transformer (one it trains, or one the file
loads where what it trains wraps it: a LightningModule) or runs a network of 100M
parameters or more. Other training loaders
iterated every epoch stay high: how many steps share one start is not known from the
code.

Unknown device: reported in files that use a GPU, and where a step loop moves its
batches to a device its function receives (training code for an accelerator, whose
restart the GPU waits for); in a file that names no device the restarts cost CPU time
only, and the advice there is to drop the workers of an in-memory dataset: silent; so
for a loader every pass over which runs on the CPU (networks moved to the CPU and nowhere else,
batches never copied: the CPU half of a notebook), here or in the project's other files.

Sources: torch.utils.data docs ("persistent_workers"); PyTorch Lightning's
"consider setting persistent_workers=True" warning.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchlint.edits import WORKERS_NAME, set_arg
from torchlint.fixes import Applicability, Fix, FixSafety, Replace, fix
from torchlint.results import Impact
from torchlint.rule import NO_GPU, Diagnostic, Rule
from torchlint.semantic import (
    DATALOADER_PARAMS,
    MISSING,
    DataLoaderSite,
    Loop,
    Scope,
    TorchModule,
    argument,
    assigned_values,
    cpu_loader,
    heavy_training,
    int_value,
)

EVALUATION = "an evaluation loader: its restarts beside training are a small share of the run"
# A loader whose iterator is made again at most once in this many steps: its workers'
# start (a fraction of a second to seconds) is a small share of the steps in between.
RARE_STEPS = 100
# The machine's CPU count: at least 1 wherever a DataLoader can run.
CPU_COUNTS = frozenset({"os.cpu_count", "multiprocessing.cpu_count", "psutil.cpu_count"})
AFFINITY = "os.sched_getaffinity"


def has_workers(module: TorchModule, loader: DataLoaderSite) -> bool:
    """`num_workers` is provably above 0: a positive constant, the machine's CPU count
    (`os.cpu_count()`, `min(8, os.cpu_count())`), or `max(1, ...)`, as written or
    through a name bound once (the `NUM_WORKERS` constant the worker fixes define)."""
    value = loader.arg("num_workers")
    if value is MISSING:
        return False
    found = module.values.constant(value, loader.call.scope)
    if found is not None:
        return isinstance(found.value, int) and found.value > 0
    return _at_least_one(module, value, loader.call.scope, 0)


def _at_least_one(module: TorchModule, value: cst.BaseExpression, scope: Scope, depth: int) -> bool:
    """A positive literal, a CPU count, `max(...)` of one such or `min(...)` of all
    such, or a name bound once to one."""
    count = int_value(value)
    if count is not None:
        return count > 0
    if isinstance(value, cst.Name) and depth < 3:
        values = assigned_values(value, scope)
        return len(values) == 1 and _at_least_one(module, values[0], scope, depth + 1)
    if not isinstance(value, cst.Call):
        return False
    name = module.resolve(value.func, scope)
    if name in CPU_COUNTS:
        return True
    if name == "len" and len(value.args) == 1:  # `len(os.sched_getaffinity(0))`
        inner = value.args[0].value
        return isinstance(inner, cst.Call) and module.resolve(inner.func, scope) == AFFINITY
    if name in ("max", "min") and value.args:
        positive = [_at_least_one(module, a.value, scope, depth + 1) for a in value.args]
        return any(positive) if name == "max" else all(positive)
    return False


def _persistent(module: TorchModule, loader: DataLoaderSite) -> Fix | None:
    """Set `persistent_workers`: `True`, or `workers > 0` where the count is a name the
    user may set to 0 (`--n_cpu 0`: `persistent_workers=True` then raises ValueError);
    no fix where a `**` dict sets a count that may be 0 (not a positive literal, a CPU
    count, ...: `has_workers`)."""
    workers = argument(loader.call.node, "num_workers", DATALOADER_PARAMS)
    spread = loader.arg("num_workers") if workers is MISSING else MISSING
    if spread is not MISSING and not _at_least_one(module, spread, loader.call.scope, 0):
        return None  # a `**` dict's count the user may set to 0 (`num_workers=args.workers`)
    value: cst.BaseExpression = cst.Name("True")
    if isinstance(workers, (cst.Name, cst.Attribute)) and not (
        isinstance(workers, cst.Name) and workers.value == WORKERS_NAME
    ):
        value = cst.Comparison(workers, [cst.ComparisonTarget(cst.GreaterThan(), cst.Integer("0"))])
    call = set_arg(loader, "persistent_workers", value)
    if call is None:
        return None
    spelled = "True" if isinstance(value, cst.Name) else cst.Module([]).code_for_node(value)
    return fix(
        f"Set `persistent_workers={spelled}`", Applicability.UNSAFE, Replace(loader.call.node, call)
    )


def _works(module: TorchModule, loop: Loop) -> bool:
    """The loop over the loader runs work on its batches: it trains, runs a network, or
    hands each batch to a function of the project (`train_step(model, batch)`)."""
    if loop.is_training or module.models.network_calls(loop):
        return True
    return any(module.functions.target(c) is not None for c in loop.calls)


class DataLoaderNoPersistentWorkers(Rule):
    code = "TL203"
    name = "dataloader-no-persistent-workers"
    fix_safety = FixSafety.UNSAFE
    tokens = ("DataLoader", "auto_dataloader")  # ignite's factory too
    min_torch = (1, 7)

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        if not (module.placement.uses_gpu or module.placement.presumed_accelerator):
            self.pass_over(None, NO_GPU)
            return  # no GPU to wait: the restarts cost CPU time only
        for loader in module.loaders.sites:
            node = loader.call.node
            if loader.opaque or loader.own_iteration:
                self.pass_over(node, "a DataLoader class of its own that iterates its own way")
                continue  # (it may keep its workers)
            if loader.arg("persistent_workers") is not MISSING:
                self.pass_over(node, "`persistent_workers` is set")
                continue
            if not has_workers(module, loader):
                self.pass_over(node, "it has no worker processes to keep (`num_workers` 0)")
                continue
            if cpu_loader(module, loader):
                self.pass_over(node, "every pass over it runs on the CPU")
                continue
            low = None
            if (epoch := module.loaders.epoch(loader)) is not None:
                if not _works(module, epoch[0]):
                    self.pass_over(node, "its epochs only look at the batches")
                    continue  # batches looked at, nothing run on them (a loading demo)
                what = "is iterated every epoch"
                when = "at the start of each epoch"
                low = None if loader.trains else EVALUATION
            elif loader.outside is not None and loader.outside.repeated:
                what = f"is iterated every epoch ({loader.outside.where})"
                when = "at the start of each epoch"
                low = None if loader.trains else EVALUATION
            elif loader.trained_by_framework:
                if module.frameworks.single_epoch:
                    self.pass_over(node, "the Trainer runs one epoch: nothing restarts")
                    continue
                what = "is iterated every epoch by the framework that trains on it"
                when = "at the start of each epoch"
            elif (again := module.loaders.reiterated(loader)) is not None:
                where = f" in `{again.ctx.function.name.value}`" if again.ctx.function else ""
                what = (
                    f"gets a new iterator again and again "
                    f"(`{module.module.code_for_node(again.node)}`{where})"
                )
                when = "for each new iterator"
                every = module.runs.period(again)
                if every is not None and every >= RARE_STEPS:
                    low = f"a new iterator every {every} steps: the start is amortized"
            else:
                self.pass_over(node, "no loop iterates it again and again (no epoch loop seen)")
                continue
            if low is None and loader.trains:
                low = _long_epochs(module, loader)
            message = (
                f"DataLoader with worker processes {what} without `persistent_workers`: its "
                f"workers are restarted (and the dataset copied) {when} while the GPU waits; "
                "set `persistent_workers=True`"
            )
            fixed = _persistent(module, loader) if loader.passes("num_workers") else None
            if not loader.passes("num_workers"):
                # `True` where there are no workers raises ValueError.
                message += " where `num_workers` is set (not fixed: it is on some paths only)"
            elif fixed is None:
                message += " (not fixed: the `**` dict that sets `num_workers` may set it to 0)"
            yield self.diagnostic(
                loader.call.node,
                message if low is None else f"{message} (low impact: {low})",
                fix=fixed,
                impact=Impact.HIGH if low is None else Impact.LOW,
            )


def _long_epochs(module: TorchModule, loader: DataLoaderSite) -> str | None:
    """Why one start of the workers per epoch is a small share of the epoch: the loader
    reads a data set of 100,000 samples or more (thousands of steps an epoch), or its
    training step is heavy (`sizes.heavy_training`)."""
    large = module.datasets.large(loader)
    if large is not None:
        return f"epochs of a large data set ({large}): one start is spread over thousands of steps"
    return heavy_training(module, loader)
