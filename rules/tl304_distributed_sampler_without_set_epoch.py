"""TL304 distributed-sampler-without-set-epoch: the same "shuffled" order every epoch.

What: a shuffling `DistributedSampler` (`shuffle` left at its default `True`, or
`shuffle=True`) whose DataLoader is iterated inside an epoch loop (directly, or in a
function called from one), in a file that never calls `set_epoch`. Files managed
by Lightning, Accelerate, DeepSpeed or the transformers Trainer are not checked
(they call `set_epoch` themselves).

Why: `DistributedSampler` shuffles with a generator seeded by `seed + epoch`, and
the epoch only changes when you call `sampler.set_epoch(epoch)`. Without it every
epoch visits the data in exactly the same order on every rank, which loses the
point of shuffling (the PyTorch docs: "Otherwise, the same ordering will be always
used").

Bad:
    sampler = DistributedSampler(train_set)
    loader = DataLoader(train_set, batch_size=64, sampler=sampler)
    for epoch in range(epochs):
        for x, y in loader:
            ...

Good:
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            ...

Fix (unsafe): insert `<sampler>.set_epoch(<epoch>)` as the first statement of the
epoch loop (`<loader>.sampler` when the sampler was built inside the DataLoader
call); offered only for a `for <name> in ...` epoch loop in the scope where the
sampler (or loader) is bound. Unsafe because the data order changes from the second
epoch on: that is the point, but runs are no longer batch-for-batch reproducible
against earlier ones.

Sources: PyTorch docs, `torch.utils.data.distributed.DistributedSampler` ("In
distributed mode, calling the set_epoch() method at the beginning of each epoch
before creating the DataLoader iterator is necessary to make shuffling work
properly across multiple epochs").
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchlint.fixes import Applicability, Fix, FixSafety, InsertBefore, fix, statements
from torchlint.model import (
    MISSING,
    CallSite,
    DataLoaderSite,
    Loop,
    TorchModule,
    bool_value,
    dotted_name,
)
from torchlint.rule import Diagnostic, Rule

SAMPLER = "torch.utils.data.DistributedSampler"


class DistributedSamplerWithoutSetEpoch(Rule):
    code = "TL304"
    name = "distributed-sampler-without-set-epoch"
    fix_safety = FixSafety.UNSAFE
    tokens = ("DistributedSampler",)

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        if module.managed or module.method_calls("set_epoch"):
            return
        for sampler in module.calls_to(SAMPLER):
            if sampler.has_star_args or not _shuffles(sampler):
                continue
            bound = _bound_name(module, sampler)
            for loader in module.dataloaders:
                value = loader.arg("sampler")
                inline = value is sampler.node
                if not inline and (bound is None or dotted_name(value) != bound):
                    continue
                found = _epoch_loop(module, loader)
                if found is None:
                    continue
                yield self.diagnostic(
                    sampler.node,
                    "this shuffling DistributedSampler is iterated once per epoch but "
                    "`set_epoch()` is never called, so every epoch sees the same order; "
                    "call `sampler.set_epoch(epoch)` at the start of each epoch",
                    fix=_fix(module, sampler, bound if not inline else None, loader, found),
                )
                break


def _shuffles(sampler: CallSite) -> bool:
    value = sampler.kwarg("shuffle")
    if value is MISSING:
        positional = sampler.positional
        if len(positional) <= 3:
            return True
        value = positional[3]
    return bool_value(value) is True


def _bound_name(module: TorchModule, sampler: CallSite) -> str | None:
    for name, assignments in module.assignments.items():
        if any(a.value is sampler.node for a in assignments):
            return name
    return None


def _epoch_loop(module: TorchModule, loader: DataLoaderSite) -> Loop | None:
    """The loop around a loop over the loader, in its function or around a call of it.
    A loader built in a function is iterated there (the same name elsewhere is another
    loader)."""
    home = loader.call.ctx.function
    for loop in module.loops_over(loader):
        if home is not None and loop.ctx.function is not home:
            continue
        if loop.ctx.loops:
            return loop.ctx.loops[-1]
        fn = loop.ctx.function
        if fn is None:
            continue
        for call in module.calls:
            callee = call.node.func
            name = callee.attr.value if isinstance(callee, cst.Attribute) else dotted_name(callee)
            if name == fn.name.value and call.ctx.loops:
                return call.ctx.loops[-1]
    return None


def _fix(
    module: TorchModule,
    sampler: CallSite,
    bound: str | None,
    loader: DataLoaderSite,
    epoch_loop: Loop,
) -> Fix | None:
    node = epoch_loop.node
    if not isinstance(node, cst.For) or not isinstance(node.target, cst.Name):
        return None
    if not isinstance(node.body, cst.IndentedBlock) or not node.body.body:
        return None
    epoch = node.target.value
    if bound is not None:
        target, where = bound, sampler
    elif loader.bound_to is not None:
        target, where = f"{loader.bound_to}.sampler", loader.call
    else:
        return None
    if not _visible(module, target.split(".")[0], where, epoch_loop):
        return None
    return fix(
        f"Call `{target}.set_epoch({epoch})` at the start of each epoch",
        Applicability.UNSAFE,
        InsertBefore(node.body.body[0], statements(f"{target}.set_epoch({epoch})\n")),
    )


def _visible(module: TorchModule, head: str, where: CallSite, loop: Loop) -> bool:
    """The name bound where `where` is can be read in the epoch loop."""
    if head == "self":
        return where.ctx.class_ is not None and where.ctx.class_ is loop.ctx.class_
    return where.ctx.function is None or where.ctx.function is loop.ctx.function
