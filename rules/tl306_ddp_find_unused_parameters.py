"""TL306 ddp-find-unused-parameters: DDP searches for unused parameters every step.

What: `DistributedDataParallel(..., find_unused_parameters=True)`. Advice, so off by
default (enable it with `--extend-select TL306`): whether every parameter takes part in
every forward pass is known only at run time (a GAN that trains half its modules per
step, a model with optional heads or layer drop needs the flag). Files managed by
Lightning, Accelerate, DeepSpeed or the transformers Trainer are not checked (their
strategy option says it).

Why: with the flag, DDP traverses the autograd graph from the outputs after every
forward pass to mark the parameters that will get no gradient, and it cannot start
all-reducing a bucket until it knows; when every parameter is used, that is a wasted
graph traversal per step and less overlap between the backward pass and the
all-reduce. DDP itself warns at run time when the flag found nothing ("find_unused_parameters=True
was specified in DDP constructor, but did not find any unused parameters"). The
Performance Tuning Guide adds that with the flag, the layer order in the constructor
should match the order of execution, or the overlap suffers further.

Bad:
    model = DDP(resnet50().cuda(rank), device_ids=[rank], find_unused_parameters=True)

Good:
    model = DDP(resnet50().cuda(rank), device_ids=[rank])
    # or, when the same parameters are unused every step:
    model = DDP(net, device_ids=[rank], static_graph=True)

Fix: none; if some parameter does go unused, DDP without the flag stops with an error
at the next step.

Impact: Always high: where every parameter is used (a run-time fact, hence off by
default), the graph traversal after each forward pass and the lost overlap of the
all-reduce are paid at every step.

Unknown device: not read; the search for unused parameters runs after every forward pass
whatever the device.

Sources: PyTorch docs, `torch.nn.parallel.DistributedDataParallel`
(`find_unused_parameters`, `static_graph`); PyTorch Performance Tuning Guide, "Match the
order of layers in constructors and during the execution if using
DistributedDataParallel(find_unused_parameters=True)"; DDP design notes.
"""

from __future__ import annotations

from collections.abc import Iterator

from torchlint.fixes import FixSafety
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import TorchModule, bool_value

DDP = "torch.nn.parallel.DistributedDataParallel"


class DdpFindUnusedParameters(Rule):
    code = "TL306"
    name = "ddp-find-unused-parameters"
    fix_safety = FixSafety.NONE
    default_enabled = False
    tokens = ("find_unused_parameters",)
    skips_managed = True

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        for call in module.calls_to(DDP):
            if bool_value(call.kwarg("find_unused_parameters")) is not True:
                continue
            yield self.diagnostic(
                call.node,
                "`find_unused_parameters=True` makes DDP traverse the autograd graph after "
                "every forward pass and delays the gradient all-reduce; if every parameter "
                "gets a gradient every step, drop it (`static_graph=True` if the same ones "
                "are always unused)",
            )
