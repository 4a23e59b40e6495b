"""TL504 frozen-network-outside-autocast: a frozen network runs in float32 beside an autocast step.

What: in a training step that runs its trained network under `torch.autocast(...)` (or
`torch.cuda.amp.autocast()`), a call of another network on a GPU that no optimizer of
the step trains (a distillation teacher, a frozen backbone or encoder, a perceptual-loss
network) made outside every autocast region of the step: its forward runs in float32.
Reported at that call. Left alone: an autocast region turned off (`enabled=False`
written), a network some optimizer of the step trains (its precision is the author's
choice), steps whose optimizers cannot be read, and toys (under 1M parameters).

Why: a network that is not trained needs no float32 master weights, no gradient
scaling and no float32 gradients: its forward is inference, which tensor cores run in
bfloat16/float16 two to three times faster with half the activation memory. Leaving it
outside the autocast region the step already uses keeps the float32 cost exactly where
it buys nothing, often the largest network of the step (a teacher, a pretrained
backbone).

Bad:
    teacher = torchvision.models.resnet152(weights="DEFAULT").cuda().eval()
    teacher.requires_grad_(False)
    student = torchvision.models.resnet18().cuda()
    optimizer = torch.optim.SGD(student.parameters(), lr=0.1)
    for x, y in loader:
        x = x.cuda()
        with torch.no_grad():
            target = teacher(x)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.mse_loss(student(x), target)
        loss.backward()
        optimizer.step()

Good:
    teacher = torchvision.models.resnet152(weights="DEFAULT").cuda().eval()
    teacher.requires_grad_(False)
    student = torchvision.models.resnet18().cuda()
    optimizer = torch.optim.SGD(student.parameters(), lr=0.1)
    for x, y in loader:
        x = x.cuda()
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            target = teacher(x)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.mse_loss(student(x), target)
        loss.backward()
        optimizer.step()

Fix: none offered: moving the call into the autocast region changes the dtype of its
output (a float16 target may need `.float()` where a loss reads it), which only the
author can weigh.

Impact: high; low for a network of under 10M parameters counted from its layers (its
float32 forward is a small share of the step).

Unknown device: silent: only a network moved to a GPU is checked, as autocast's gain is
tensor cores.

Sources: PyTorch docs, "Automatic Mixed Precision package - torch.amp" (autocast
regions; "inference/evaluation" under autocast); Hinton et al., knowledge distillation
in practice runs the teacher in reduced precision (e.g. DeiT's reference code).
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchlint.results import Impact
from torchlint.rule import TRAINS, Diagnostic, Rule
from torchlint.semantic import (
    CallSite,
    Region,
    TorchModule,
    bool_value,
    contains,
    step_regions,
    toy,
)

SMALL = 10_000_000  # parameters: a float32 forward of this is a small share of a step


class FrozenNetworkOutsideAutocast(Rule):
    code = "TL504"
    name = "frozen-network-outside-autocast"
    tokens = ("autocast",)
    pattern = TRAINS

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        for region in step_regions(module, bool):
            regions = _autocast_regions(module, region)
            if not regions:
                continue
            trained = module.training.trained_by_all(region.steps)
            if trained is None:
                continue
            inside = [c for c in region.calls if any(contains(w, c.node) for w in regions)]
            if not any(_network(module, c) for c in inside):
                continue  # autocast is not where the trained network runs
            seen: set[int] = set()
            for call in region.calls:
                site = module.models.called(call)
                if site is None or not site.is_network or id(site) in trained | seen:
                    continue
                if any(contains(w, call.node) for w in regions) or not module.on_gpu(site):
                    continue
                seen.add(id(site))
                count = module.networks.parameters(site)
                if toy([count]):
                    continue
                small = count is not None and count < SMALL
                name = module.module.code_for_node(call.node.func)
                yield self.diagnostic(
                    call.node,
                    f"`{name}` is trained by no optimizer of this step and runs outside its "
                    "autocast region, in float32: its forward is inference, which tensor "
                    "cores run in bfloat16/float16 two to three times faster; run it under "
                    "the step's `torch.autocast(...)` too"
                    + (" (low impact: a network of under 10M parameters)" if small else ""),
                    impact=Impact.LOW if small else Impact.HIGH,
                )


def _autocast_regions(module: TorchModule, region: Region) -> list[cst.With]:
    """The `with` statements of the step that open an autocast region (not one written
    off: `enabled=False`)."""
    found = []
    autocasts = {id(c) for c in module.workload.autocasts}
    for call in region.calls:
        if id(call) not in autocasts or bool_value(call.kwarg("enabled")) is False:
            continue
        statement = call.ctx.statement
        if isinstance(statement, cst.With) and any(i.item is call.node for i in statement.items):
            found.append(statement)
    return found


def _network(module: TorchModule, call: CallSite) -> bool:
    site = module.models.called(call)
    return site is not None and site.is_network
