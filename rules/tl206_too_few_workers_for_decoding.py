"""TL206 too-few-workers-for-decoding: a few DataLoader workers decode every sample.

What: a training `torch.utils.data.DataLoader` (one a loop of this file trains on, or
that a framework such as PyTorch Lightning trains on, as TL201 reads it) whose
`num_workers` is a positive count below `min-decoding-workers` (default 4: 1, 2 or 3)
and whose dataset decodes a file per sample: a torchvision file dataset (`ImageFolder`,
`DatasetFolder`, `CocoDetection`, `VOCSegmentation`, `LSUN`, `CelebA`, `ImageNet`...), a
torchaudio dataset, or a Dataset class (of this file, or of another file of the project
as its summary says) whose `__getitem__` calls an image or audio decoder
(`PIL.Image.open`, `cv2.imread`, `torchvision.io.read_image`/`decode_*`,
`torchaudio.load`, `imageio.imread`, `skimage.io.imread`, through a helper or
`self.loader`), in a file that trains on a GPU. A dataset of images already in memory
(MNIST, CIFAR) whose transform resamples or warps every image (`Resize`,
`RandomResizedCrop`, `RandomCrop`, `ColorJitter`, `RandomRotation`, `RandAugment`...)
is reported with one worker fewer (below `min-decoding-workers` minus one: 1 or 2). The
count may be written at the call (a literal, a key of its `**` dict) or elsewhere: a
name bound once, a command-line flag's default (`argparse`), a config value, a
parameter's default or what every call passes.
Left alone: a count of 0 or none (TL201's); a count computed at run time
(`os.cpu_count()`, an expression we cannot read); datasets whose samples are tensors in
memory or text (`TensorDataset`, MNIST with `ToTensor`/`Normalize` and flips only,
pre-tokenized data): a worker or two keep up with them; evaluation loaders (as TL201
leaves them: validation is a small share of a run); loaders a framework runs only a
handful of batches of (TL201's `fast_dev_run`, `limit_train_batches`, `max_steps`);
CPU-only files.

Why: decoding a JPEG or PNG of a photograph and resizing or cropping it takes
milliseconds of CPU per sample, about as long as a GPU takes to train on tens of them:
one or two processes cannot prepare batches as fast as the GPU consumes them, so every
step waits on the loader and the GPU sits idle for most of the run. Augmenting small
images already in memory costs less per sample (tens of microseconds), hence one worker
fewer there. `min-decoding-workers` sets the bar: 4 is the least that keeps a mid-range
GPU fed on full-size images with a standard augmentation, and PyTorch's ImageNet example
starts 4 workers per GPU by default.

Bad:
    model = torchvision.models.resnet50().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    train_set = torchvision.datasets.ImageFolder("train", transform=augment)
    loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=2)
    for x, y in loader:
        loss = criterion(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()

Good:
    model = torchvision.models.resnet50().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    train_set = torchvision.datasets.ImageFolder("train", transform=augment)
    loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=NUM_WORKERS)
    for x, y in loader:
        loss = criterion(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()

Fix (unsafe): where the count is written at the call, replace it with `NUM_WORKERS`, the
constant TL201's fix defines once after the imports (the CPU cores this process may use,
shared among the processes torchrun starts on the machine, minus one for the main
process, at least 1), so the loader uses what the machine has. Nothing else changes:
`persistent_workers` and `pin_memory` are TL203's and TL202's findings, as they were
before. Unsafe for TL201's reasons: each worker holds a copy of the dataset (memory),
and random augmentations draw from per-worker seeds, so another worker count gives
other random crops (a seeded `worker_init_fn` does not make them the same). On a
machine of two or three cores `NUM_WORKERS` is 1 or 2: no more workers than cores to
run them. Workers already start here, so what starting them needs (a main guard under
spawn, picklable datasets) already holds. No fix where the count is set elsewhere (an
argparse default, a config value, a name, a parameter's default: the finding says
which; raise it there) or by the loader's `**` dict (change the dict).

Impact: high wherever it reports: a count it can read, below the bar, on a dataset that
decodes or augments every sample is the shape where the GPU waits on the loader; no
fact tells a step heavy enough for a worker or two to keep up (that depends on the GPU).

Unknown device: silent, as the rule reports only in files that use a GPU (TL201's
test): on a CPU, more workers would take cores from the training process.

Sources: PyTorch Performance Tuning Guide, "Enable async data loading and
augmentation"; torch.utils.data docs, "Single- and Multi-process Data Loading";
pytorch/examples imagenet/main.py (`--workers` default 4).
"""

from __future__ import annotations

from collections.abc import Iterator

from torchlint.edits import WORKERS_NAME, workers_fix
from torchlint.fixes import FixSafety
from torchlint.options import MIN_DECODING_WORKERS
from torchlint.results import Impact
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import MISSING, DataLoaderSite, TorchModule

# Where a count that is not written at the call is set.
ORIGINS = {
    "name": "a name bound to {n}",
    "argparse": "the command-line default is {n}",
    "config": "the config's value is {n}",
    "default": "the parameter's default is {n}",
    "argument": "every call of the function makes it {n}",
    "hparams": "the hyperparameter is {n}",
    "project": "another file of the project passes {n}",
}


def worker_count(module: TorchModule, loader: DataLoaderSite) -> tuple[int, str | None] | None:
    """The loader's positive `num_workers`, and where it is set when not at the call
    (`ORIGINS`); None where it is 0, missing or not one constant."""
    value = loader.arg("num_workers")
    if value is MISSING:
        return None
    found = module.values.constant(value, loader.call.scope)
    if found is None or type(found.value) is not int or found.value < 1:
        return None
    if found.origin == "literal":
        return found.value, None
    where = ORIGINS.get(found.origin)
    return None if where is None else (found.value, where.format(n=found.value))


class TooFewWorkersForDecoding(Rule):
    code = "TL206"
    name = "too-few-workers-for-decoding"
    fix_safety = FixSafety.UNSAFE
    tokens = ("DataLoader", "auto_dataloader")  # ignite's factory too
    options = (MIN_DECODING_WORKERS,)

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        if not module.placement.uses_gpu:
            return
        least = self.option(module, MIN_DECODING_WORKERS)
        for loader in [*module.loaders.sites, *module.loaders.made]:
            if not loader.argument_known("num_workers") or not loader.trains:
                continue
            if module.frameworks.idle_loader(loader):
                continue
            count = worker_count(module, loader)
            decodes = module.decodes(loader) if count is not None else None
            if count is None or decodes is None:
                continue
            workers, elsewhere = count
            what, files = decodes
            if workers >= (least if files else least - 1):
                continue
            yield self._report(module, loader, workers, what, elsewhere)

    def _report(
        self,
        module: TorchModule,
        loader: DataLoaderSite,
        workers: int,
        what: str,
        elsewhere: str | None,
    ) -> Diagnostic:
        written = module.module.code_for_node(loader.arg("num_workers"))
        setting = loader.spelled("num_workers", written)
        processes = "one worker process" if workers == 1 else f"{workers} worker processes"
        message = (
            f"{setting}{f' ({elsewhere})' if elsewhere else ''} on a training DataLoader whose "
            f"dataset works on every sample ({what}): {processes} cannot prepare batches as "
            "fast as the GPU trains on them, so it waits on the loader; set `num_workers` to "
            "the CPU cores per process minus one"
        )
        fixed = None
        if elsewhere is not None:
            message += " (not fixed: the value is set elsewhere: raise it there)"
        else:
            fixed = workers_fix(loader, f"Set {loader.spelled('num_workers', WORKERS_NAME)}")
            if fixed is None:
                message += " (not fixed: the `**` dict sets it: change it there)"
        return self.diagnostic(loader.call.node, message, fix=fixed, impact=Impact.HIGH)
