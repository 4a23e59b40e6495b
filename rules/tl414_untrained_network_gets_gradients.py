"""TL414 untrained-network-gets-gradients: a backward pass computes gradients no optimizer uses.

What: a network that a training step runs, whose output flows into the loss that step
backpropagates (not through `.detach()` or `torch.no_grad()`), and that no optimizer
the step steps was given the parameters of: a teacher in distillation, a pretrained
feature extractor in a perceptual loss, a backbone kept fixed. Also a network of which
the step's optimizers were given one submodule only (`SGD(model.fc.parameters())`)
while the step runs all of it. In both cases the file never turns off its parameters'
`requires_grad` (`model.requires_grad_(False)`, `p.requires_grad = False` in a loop over
its parameters, in its class's `__init__`, or a `filter(lambda p: p.requires_grad,
...)`, which says they are frozen elsewhere). Left alone: steps whose optimizer (or
its parameters) cannot be read, a network another optimizer of the same step trains
(the discriminator in a GAN's generator step, which needs its graph), networks passed
through only a loss class.

Why: autograd computes a gradient for every parameter that requires one. For a
network no optimizer updates, the backward pass still runs its weight gradients (about
the cost of its forward pass again) and stores them in `.grad` (its size in memory),
every step, for nothing; wrapped in `DistributedDataParallel`, it also all-reduces them
across the GPUs every step. For a fine-tuned head on a fixed backbone, the backward pass
would stop at the head; instead it runs through the whole backbone: most of the step.

Bad:
    backbone = torchvision.models.resnet50(weights="DEFAULT").cuda()
    head = nn.Linear(1000, 10).cuda()
    optimizer = torch.optim.SGD(head.parameters(), lr=0.1)
    for x, y in loader:
        loss = F.cross_entropy(head(backbone(x.cuda())), y.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

Good:
    backbone = torchvision.models.resnet50(weights="DEFAULT").cuda()
    backbone.requires_grad_(False)
    head = nn.Linear(1000, 10).cuda()
    optimizer = torch.optim.SGD(head.parameters(), lr=0.1)
    for x, y in loader:
        loss = F.cross_entropy(head(backbone(x.cuda())), y.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

Fix: none offered. `requires_grad_(False)` once after the network is built (or
`torch.no_grad()` around a call whose output is only a target) changes no update where
nothing reads those gradients, but code elsewhere may: gradient clipping or a norm over
all of a model's parameters, a second optimizer built later, a checkpoint of `.grad`.
The message names the line to add.

Impact: high; low where the network is a toy (under 1M parameters counted from its
layers: its wasted backward is a few microseconds of kernels) or the file places no
work on an accelerator.

Unknown device: reported wherever the device is unknown (the wasted backward costs on
any device); a file that places no work on an accelerator is of low impact, as above.

Sources: PyTorch docs, "Autograd mechanics: Locally disabling gradient computation"
(`requires_grad_(False)` to freeze part of a model); PyTorch tutorial, "Finetuning
Torchvision Models" (`set_parameter_requires_grad`).
"""

from __future__ import annotations

from collections.abc import Iterator

from torchlint.results import Impact
from torchlint.rule import TRAINS, Diagnostic, Rule
from torchlint.semantic import Flow, Frozen, Model, Region, TorchModule, losses, step_regions, toy

CPU = "the file places no work on an accelerator"
DDP = "torch.nn.parallel.DistributedDataParallel"
DDP_TOO = "; wrapped in `DistributedDataParallel`, it also all-reduces them every step"
TOY = "a network under 1M parameters, whose wasted backward is a few microseconds"


class UntrainedNetworkGetsGradients(Rule):
    code = "TL414"
    name = "untrained-network-gets-gradients"
    tokens = ("backward",)
    pattern = TRAINS

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        frozen: Frozen | None = None
        on_device = (
            module.placement.uses_gpu
            or module.placement.presumed_accelerator
            or module.placement.handles_devices()
        )
        for region in step_regions(module, bool):
            parts = _trained(module, region)
            if parts is None:
                continue
            flow = Flow(module, region)
            seen: set[int] = set()
            for backward in region.backwards:
                for call in flow.reached(losses(backward), flow.rank(backward)):
                    site = module.models.called(call)
                    if site is None or not site.is_network or id(site) in seen:
                        continue
                    seen.add(id(site))
                    given = parts.get(id(site), set()) | _parts_held(site, parts, module)
                    if None in given or len(given) > 1:
                        continue  # trained whole, or in parts this rule cannot add up
                    frozen = frozen or Frozen(module)
                    if frozen.holds(site):
                        continue
                    name = module.module.code_for_node(call.node.func)
                    part = next(iter(given), None)
                    why = CPU if not on_device else None
                    if why is None and toy([module.networks.parameters(site)]):
                        why = TOY
                    ddp = any(w.qualname == DDP for w in site.wrappers)
                    yield self.diagnostic(
                        call.node,
                        _message(name, part, module.module.code_for_node(backward.node))
                        + (DDP_TOO if ddp else "")
                        + (f" (low impact: {why})" if why else ""),
                        impact=Impact.LOW if why else Impact.HIGH,
                    )


def _trained(module: TorchModule, region: Region) -> dict[int, set[str | None]] | None:
    """id(model) -> the parts of it the step's optimizers were given (None: all of it);
    None where an optimizer the step steps, or its parameters, cannot be read."""
    found: dict[int, set[str | None]] = {}
    for step in region.steps:
        given = module.training.trained_parts(step)
        if not given:
            return None
        for site, part in given:
            found.setdefault(id(site), set()).add(part)
    return found


def _parts_held(site: Model, parts: dict[int, set[str | None]], module: TorchModule) -> set[str]:
    """The trained models that are attributes of `site` (`model.fc = nn.Linear(...)`,
    then `SGD(model.fc.parameters())`), as parts of it ("fc")."""
    names = [s.name for s in site.symbols]
    found: set[str] = set()
    for other in module.models.sites:
        if id(other) not in parts or other is site:
            continue
        for symbol in other.symbols:
            for name in names:
                if symbol.name.startswith(name + "."):
                    found.add(symbol.name[len(name) + 1 :])
    return found


def _message(name: str, part: str | None, backward: str) -> str:
    if part is None:
        return (
            f"`{name}` is trained by no optimizer of this step, yet its parameters require "
            f"gradients: `{backward}` computes and stores a gradient for each of its weights "
            f"(about its forward's cost again) that nothing uses; freeze it once, "
            f"`{name}.requires_grad_(False)`"
        )
    return (
        f"the optimizer is given only `{name}.{part}`'s parameters, yet every other parameter "
        f"of `{name}` still requires gradients: `{backward}` runs through all of `{name}` "
        f"computing gradients that nothing uses; freeze the rest, "
        f"`{name}.requires_grad_(False)` then `{name}.{part}.requires_grad_(True)`"
    )
