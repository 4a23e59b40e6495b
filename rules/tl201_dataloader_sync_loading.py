"""TL201 dataloader-sync-loading: DataLoader loads batches on the main process.

What: a `torch.utils.data.DataLoader` without `num_workers` (or with `num_workers=0`)
whose batches feed a training loop of this file (a backward pass and an optimizer step
per batch) or that PyTorch Lightning trains on (what the `train_dataloader` hook of a
LightningModule or LightningDataModule returns, or the loader `trainer.fit` is given;
Lightning itself only warns at run time), in a file that trains on a GPU (see TL202 for
what counts; a file whose Lightning Trainers all say `accelerator="cpu"` does not). Left
alone: validation, test and predict loaders; datasets that do no work per sample, as
far as their origin shows (tensors already in
memory: `TensorDataset`, a list; a Dataset class of the file whose `__getitem__` calls
nothing; a dataset class from another module built without any transform): workers
only add start-up and transfer overhead there; an `IterableDataset` (workers would each
yield the whole stream unless it shards itself); loaders only evaluated or used once;
CPU-only scripts; loaders built from `*args` or from a `**` dict the file does not
fully show (a dict literal, `dict(...)`, `d.update(...)` and `d["key"] = v` are read
like keywords). A call of a loader factory the project names (`loader-factories` with
`workers` in `[tool.torchlint.semantic]`, see docs/extending.md) counts where it passes 0
for that parameter; one that passes nothing, or whose entry names no `workers`, has
workers we cannot see: silent. Its fix sets the factory's parameter only (no
`persistent_workers` or `pin_memory`, which the factory may not take).
A `num_workers` read from a name counts where its value is provably 0: a command-line
flag's default (`argparse`), a config value, or a function parameter every call leaves
at 0; it is reported without a fix, as the 0 is set elsewhere (raise it there).
A loader that only a Lightning Trainer on the CPU, or one that runs a handful of
batches (`fast_dev_run`, `limit_train_batches` of at most 10: a test or a
bug-report template; `max_steps` of at most 100: a demo or a benchmark), trains on is
left alone.

Why: while the main process decodes, augments and collates a batch, the GPU has no
work; with worker processes the next batches are prepared while the current one
trains. The PyTorch Performance Tuning Guide puts "enable async data loading" first.

Bad:
    model = torchvision.models.resnet50().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(train_set, batch_size=64, shuffle=True)
    for x, y in loader:
        loss = criterion(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()

Good:
    model = torchvision.models.resnet50().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=NUM_WORKERS)
    for x, y in loader:
        loss = criterion(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()

Fix (unsafe): set `num_workers=NUM_WORKERS`, defined once after the imports as the
CPU cores this process may use (`os.sched_getaffinity`, else `os.cpu_count()`),
shared among the processes torchrun starts on the machine (`LOCAL_WORLD_SIZE`),
minus one for the main process, and at least 1; `persistent_workers=True` with it
where the loader is iterated every epoch (TL203: the new workers would otherwise
restart each epoch); and `pin_memory=torch.cuda.is_available()` where the loader does
not pin (TL202's half of the same decision: with workers, batches are pinned while the
GPU trains; left out where a Lightning Trainer reloads loaders made persistent), with the
loops' copies of its batches made non-blocking as TL105 would once it pins.
Unsafe because each worker holds a copy of the dataset (memory), random augmentations
draw from per-worker seeds, and persistent workers keep their state across epochs.
Offered only where workers can start: under the `spawn` start method (macOS, Windows)
and `forkserver` (Linux's default from Python 3.14) each worker re-imports the script
and unpickles the dataset, so the loops over the loader (where workers start; for
Lightning, `trainer.fit(...)`, which must be in the file) must run under `if __name__ ==
"__main__":` (or in a function only called from there), and
`collate_fn`, `worker_init_fn` and the dataset must not hold a lambda or a nested
function; in a notebook, workers cannot import the classes and functions the notebook
defines. Where one
of these fails, the finding says which and no fix is made; so too where a `**` dict
sets `num_workers=0` (a keyword as well would raise TypeError: change the dict).

Impact: low where the per-sample work workers would hide is a few percent of a step:
every origin of the dataset is a Hugging Face `datasets` dataset processed ahead
(`.map(tokenize)`, `.with_format("torch")`, through `rename_column`, `filter`,
subscripts...; no `with_transform`/`set_transform`) or tensors in memory, and the
`collate_fn` only pads and stacks (none, `tokenizer.pad`, `pad_sequence`,
`default_data_collator`, `DataCollatorWithPadding`, or a function of the file, what a
factory returns included, whose calls are all padding, stacking and containers).
Reading such a row is an Arrow lookup; padding a batch of token ids takes microseconds.

Unknown device: silent, as the rule reports only in files that use a GPU (a device that
is a GPU on some branch, `.cuda()`, `torch.cuda.*`, a managed framework); a device that
cannot be named is not one, and on a CPU the fix's worker processes would take cores
from the training process.

Sources: PyTorch Performance Tuning Guide, "Enable async data loading and
augmentation"; torch.utils.data docs, "Single- and Multi-process Data Loading" and
"Platform-specific behaviors"; multiprocessing docs, "Safe importing of main module";
Lightning docs, "Speed Up Model Training" ("DataLoaders", "num_workers") and its run-time
warning "The 'train_dataloader' does not have many workers which may be a bottleneck".
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import libcst as cst

from torchlint.edits import WORKERS_NAME, pin_with_workers, pinned_copies, workers_fix
from torchlint.fixes import FixSafety
from torchlint.results import Impact
from torchlint.rule import NO_GPU, NOT_TRAINED, Diagnostic, Rule
from torchlint.semantic import MISSING, DataLoaderSite, TorchModule, int_value

# Where a `num_workers` of 0 that is not written at the call comes from.
DEFAULTS = {
    "argparse": "the command-line default is 0",
    "config": "the config's value is 0",
    "default": "the parameter's default is 0",
    "argument": "every call of the function leaves it 0",
}


def zero_default(module: TorchModule, loader: DataLoaderSite) -> str | None:
    """What sets `num_workers` to 0 where a name (`args.workers`, a config field, a
    parameter's default) holds it, or None."""
    value = loader.arg("num_workers")
    if value is MISSING or int_value(value) is not None:
        return None
    found = module.values.constant(value, loader.call.scope)
    if found is None or found.value != 0 or found.origin not in DEFAULTS:
        return None
    return DEFAULTS[found.origin]


def _workers_set(module: TorchModule, workers: cst.BaseExpression) -> str:
    """Why TL201 passes over a loader given workers (for `torchlint explain`)."""
    return f"`num_workers={module.module.code_for_node(workers)}`: not 0 on every path it sees"


class DataLoaderSyncLoading(Rule):
    code = "TL201"
    name = "dataloader-sync-loading"
    fix_safety = FixSafety.UNSAFE
    tokens = ("DataLoader", "auto_dataloader")  # ignite's factory too

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        if not module.placement.uses_gpu:
            self.pass_over(None, NO_GPU)
            return
        for loader in [*module.loaders.sites, *module.loaders.made]:
            node = loader.call.node
            if not loader.argument_known("num_workers"):
                self.pass_over(node, "`num_workers` comes from a `**` dict it cannot read")
                continue
            if not loader.trains or module.frameworks.idle_loader(loader):
                self.pass_over(node, NOT_TRAINED)
                continue
            workers = loader.arg("num_workers")
            default = zero_default(module, loader)
            if workers is not MISSING and int_value(workers) != 0 and default is None:
                self.pass_over(node, partial(_workers_set, module, workers))
                continue
            if module.datasets.plain_data(loader):
                self.pass_over(node, "its dataset is tensors in memory: workers only copy them")
                continue
            if module.datasets.iterable_dataset(loader):
                self.pass_over(node, "an IterableDataset: each worker would yield every sample")
                continue
            what = (
                "DataLoader without `num_workers`"
                if workers is MISSING
                else f"{loader.spelled('num_workers', '0')} on a training DataLoader"
            )
            if default is not None:
                written = module.module.code_for_node(workers)
                what = (
                    f"{loader.spelled('num_workers', written)} ({default}) on a training DataLoader"
                )
            hazard = module.datasets.workers_hazard(loader)
            persistent = module.restarts_workers(loader)
            pin = pin_with_workers(module, loader, persistent)
            message = (
                f"{what} loads every batch on the main process while the GPU waits; set "
                "`num_workers` to the CPU cores per process minus one"
                + (" (and `pin_memory` with them)" if pin is not None else "")
            )
            if default is not None:
                hazard = hazard or "the value is a default set elsewhere: raise it there"
            fixed = (
                None
                if hazard
                else workers_fix(
                    loader,
                    f"Set {loader.spelled('num_workers', WORKERS_NAME)}",
                    persistent,
                    pin,
                    pinned_copies(module, loader) if pin is not None else ([], []),
                )
            )
            if fixed is None and not hazard:
                hazard = "the `**` dict sets it: change it there"
            if hazard:
                message += f" (not fixed: {hazard})"
            cheap = module.datasets.cheap_samples(loader)
            yield self.diagnostic(
                loader.call.node,
                message if cheap is None else f"{message} (low impact: {cheap})",
                fix=fixed,
                impact=Impact.HIGH if cheap is None else Impact.LOW,
            )
