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
    sampler = DistributedSampler(train_set)
    loader = DataLoader(train_set, batch_size=64, sampler=sampler)
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

Impact: Always high: every epoch visits the data in the same order on every rank, which
defeats shuffling; the fix costs nothing.

Unknown device: not read; the sampler repeats its order every epoch whatever the device.

Sources: PyTorch docs, `torch.utils.data.distributed.DistributedSampler` ("In
distributed mode, calling the set_epoch() method at the beginning of each epoch
before creating the DataLoader iterator is necessary to make shuffling work
properly across multiple epochs").
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchlint.edits import expression
from torchlint.fixes import Applicability, Fix, FixSafety, InsertBefore, fix, statements
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import (
    MISSING,
    CallSite,
    DataLoaderSite,
    Loop,
    Symbol,
    TorchModule,
    bool_value,
)

SAMPLER = "torch.utils.data.DistributedSampler"


class DistributedSamplerWithoutSetEpoch(Rule):
    code = "TL304"
    name = "distributed-sampler-without-set-epoch"
    fix_safety = FixSafety.UNSAFE
    tokens = ("DistributedSampler",)
    skips_managed = True

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        if module.method_calls("set_epoch"):
            return
        # The loaders by what they take as `sampler=`: a call built inline, or a name.
        by_sampler: dict[int, list[DataLoaderSite]] = {}
        for loader in module.loaders.sites:
            value = loader.arg("sampler")
            if value is MISSING:
                continue
            symbol = loader.call.scope.lookup_expr(value)
            key = id(symbol) if symbol is not None else id(value)
            by_sampler.setdefault(key, []).append(loader)
        for sampler in module.calls_to(SAMPLER):
            if sampler.has_star_args or not _shuffles(sampler):
                continue
            binding = module.binding_of(sampler.node)
            symbol = binding.symbol if binding is not None else None
            inline = by_sampler.get(id(sampler.node), [])
            named = by_sampler.get(id(symbol), []) if symbol is not None else []
            for loader in [*inline, *named]:
                found = module.loaders.epoch(loader)
                if found is None:
                    continue
                yield self.diagnostic(
                    sampler.node,
                    "this shuffling DistributedSampler is iterated once per epoch but "
                    "`set_epoch()` is never called, so every epoch sees the same order; "
                    "call `sampler.set_epoch(epoch)` at the start of each epoch",
                    fix=_fix(loader, None if loader in inline else symbol, found[1]),
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


def _fix(loader: DataLoaderSite, sampler: Symbol | None, epoch_loop: Loop) -> Fix | None:
    """`<sampler>.set_epoch(<epoch>)` first in the epoch loop (`<loader>.sampler` for a
    sampler built in the DataLoader call), where that name means the same there."""
    node = epoch_loop.node
    body = epoch_loop.body
    if not isinstance(node, cst.For) or not isinstance(node.target, cst.Name) or not body:
        return None
    holder = sampler if sampler is not None else (loader.symbols[0] if loader.symbols else None)
    if holder is None:
        return None
    scope = epoch_loop.ctx.scope
    if scope.lookup_expr(expression(holder.name)) is not holder:
        return None
    target = holder.name if sampler is not None else f"{holder.name}.sampler"
    epoch = node.target.value
    return fix(
        f"Call `{target}.set_epoch({epoch})` at the start of each epoch",
        Applicability.UNSAFE,
        InsertBefore(body[0], statements(f"{target}.set_epoch({epoch})\n")),
    )
