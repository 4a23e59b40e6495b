"""TL415 frozen-features-recomputed: a frozen network recomputes the same features every epoch.

What: a training step loop, run for several epochs (inside another loop), that feeds
its batches to a network on a GPU that is frozen (called under `torch.no_grad()` or with
its parameters' `requires_grad` turned off), in evaluation mode (`.eval()`, never
`.train()`), and trained by no optimizer of the loop, while the loader's dataset gives
the same samples every epoch: a torchvision dataset or a `TensorDataset` whose transform
is absent or has no random step (`ToTensor`, `Normalize`, `Resize`, `CenterCrop`; not
`RandomCrop`, `ColorJitter`, `RandAugment`...). Linear probing and fine-tuning a head on
a fixed backbone. Where the file does not show the dataset or its transform (a
variable, a project's function), the finding says so and is of low impact. Left alone:
a random transform, a network in training mode (batch-norm statistics and dropout
change its output), a single pass, toys.

Why: the frozen network's output for a sample is the same at every epoch, yet its
forward pass, usually most of the step's work, runs again each epoch. Computed once (a
pass over the loader under `torch.no_grad()`, the features kept on the GPU or on disk),
the head trains on cached features: each later epoch costs the head's work only.

Bad:
    backbone = torchvision.models.resnet50(weights="DEFAULT").cuda().eval()
    head = nn.Linear(1000, 10).cuda()
    optimizer = torch.optim.SGD(head.parameters(), lr=0.1)
    data = torchvision.datasets.CIFAR10(".", transform=torchvision.transforms.ToTensor())
    loader = DataLoader(data, batch_size=256, shuffle=True, num_workers=4)
    for epoch in range(30):
        for x, y in loader:
            with torch.no_grad():
                features = backbone(x.cuda())
            loss = nn.functional.cross_entropy(head(features), y.cuda())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

Good:
    backbone = torchvision.models.resnet50(weights="DEFAULT").cuda().eval()
    head = nn.Linear(1000, 10).cuda()
    optimizer = torch.optim.SGD(head.parameters(), lr=0.1)
    data = torchvision.datasets.CIFAR10(".", transform=torchvision.transforms.ToTensor())
    loader = DataLoader(data, batch_size=256, num_workers=4)
    with torch.no_grad():  # once
        pairs = [(backbone(x.cuda()), y.cuda()) for x, y in loader]
    features, labels = torch.cat([f for f, _ in pairs]), torch.cat([y for _, y in pairs])
    for epoch in range(30):
        for i in torch.randperm(len(labels), device="cuda").split(256):
            loss = nn.functional.cross_entropy(head(features[i]), labels[i])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

Fix: none: caching restructures the training loop, and the features must fit in memory.

Impact: high; low for a frozen network of under 10M parameters counted from its layers
(its forward is a small share of an epoch).

Unknown device: silent: only a network moved to a GPU is checked.

Sources: PyTorch tutorial "Transfer learning for computer vision" (the ConvNet as a
fixed feature extractor); the linear-evaluation protocols of SimCLR and MoCo, which
precompute features when no augmentation is used.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from torchlint.results import Impact
from torchlint.rule import TRAINS, Diagnostic, Rule
from torchlint.semantic import (
    MISSING,
    DataLoaderSite,
    Frozen,
    Model,
    Scope,
    TorchModule,
    derived_from_batch,
    keyword,
    names_read,
    toy,
)

SMALL = 10_000_000  # parameters
SMALL_NETWORK = "a network of under 10M parameters"
UNSURE = "the transform is not shown: a random one would give other samples every epoch"
# Transforms that draw something at random for each sample.
RANDOM = re.compile(r"Random|Jitter|Augment|AugMix|GaussianBlur|Elastic|Mixup|CutMix")
FIXED_DATASETS = ("torchvision.datasets.", "torch.utils.data.TensorDataset")
COMPOSE = ("torchvision.transforms.Compose", "torchvision.transforms.v2.Compose")


class FrozenFeaturesRecomputed(Rule):
    code = "TL415"
    name = "frozen-features-recomputed"
    tokens = ("eval()",)
    pattern = TRAINS

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        frozen: Frozen | None = None
        for loop in module.step_loops:
            loaders = loop.loaders
            if not loop.ctx.loops or not loaders:
                continue  # one pass: nothing is computed twice
            fixed = [_fixed(module, x) if isinstance(x, DataLoaderSite) else None for x in loaders]
            if False in fixed:
                continue  # a random transform: other samples every epoch
            unsure = None in fixed
            trained = module.training.trained_by_all(loop.steps)
            if trained is None:
                continue
            batch = derived_from_batch(module, loop)
            seen: set[int] = set()
            for call in module.models.network_calls(loop):
                site = module.models.called(call)
                if site is None or id(site) in trained | seen:
                    continue
                if not any(batch & set(names_read(a.value)) for a in call.node.args):
                    continue  # not the batch's features
                frozen = frozen or Frozen(module)
                if not module.runs.grad_disabled(call) and not frozen.holds(site):
                    continue
                if not _evaluating(module, site) or not module.on_gpu(site):
                    continue
                seen.add(id(site))
                count = module.networks.parameters(site)
                if toy([count]):
                    continue
                why = UNSURE if unsure else SMALL_NETWORK if count and count < SMALL else None
                name = module.module.code_for_node(call.node.func)
                given = (
                    "; if its loader gives the same samples every epoch (the file does not "
                    "show its transform), this forward"
                    if unsure
                    else " and its loader gives the same samples every epoch (no random "
                    "transform): this forward"
                )
                yield self.diagnostic(
                    call.node,
                    f"`{name}` is frozen{given} recomputes the same features each epoch; "
                    "compute them once under `torch.no_grad()` and train on the cached "
                    "features" + (f" (low impact: {why})" if why else ""),
                    impact=Impact.LOW if why else Impact.HIGH,
                )


def _evaluating(module: TorchModule, site: Model) -> bool:
    """`.eval()` is called on the network and `.train()` never is."""
    methods = {c.method for c in module.models.method_calls_on(site)}
    return "eval" in methods and "train" not in methods


def _fixed(module: TorchModule, loader: DataLoaderSite) -> bool | None:
    """The loader's dataset gives the same samples every epoch: a torchvision dataset or
    a TensorDataset with no transform, or one of readable steps none of them random
    (True); a random step (False); None where the file does not show it (another
    dataset, a transform passed in)."""
    dataset = loader.arg("dataset")
    if dataset is MISSING:
        return None
    origins = module.values.origins(dataset, loader.call.scope)
    found = [_fixed_dataset(module, v, s) for v, s in origins]
    return _every(found)


def _fixed_dataset(module: TorchModule, value: cst.BaseExpression, scope: Scope) -> bool | None:
    if not isinstance(value, cst.Call):
        return None
    qualname = scope.resolve(value.func) or ""
    if not qualname.startswith(FIXED_DATASETS):
        return None
    transform = keyword(value, "transform")
    if transform is MISSING:
        return True
    return _every([_fixed_transform(v, s) for v, s in module.values.origins(transform, scope)])


def _fixed_transform(value: cst.BaseExpression, scope: Scope) -> bool | None:
    """A transform the file writes whose steps draw nothing at random (True), one that
    does (False), or one it does not show (None)."""
    if not isinstance(value, cst.Call):
        return None
    qualname = scope.resolve(value.func) or ""
    if qualname in COMPOSE:
        items = value.args[0].value if value.args else None
        if not isinstance(items, (cst.List, cst.Tuple)):
            return None
        return _every([_fixed_transform(e.value, scope) for e in items.elements])
    if not qualname.startswith("torchvision.transforms"):
        return None
    return not RANDOM.search(qualname)


def _every(found: list[bool | None]) -> bool | None:
    """False if one is False, else None if one is unknown (or there is none), else True."""
    if False in found:
        return False
    return None if None in found or not found else True
