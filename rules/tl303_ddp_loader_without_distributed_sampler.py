"""TL303 ddp-loader-without-distributed-sampler: every DDP process reads the whole dataset.

What: the file wraps a model in `DistributedDataParallel` (or FSDP), and a
`DataLoader` that feeds the training loop has neither a `sampler` nor a
`batch_sampler`. Files managed by Lightning, Accelerate, DeepSpeed or the
transformers Trainer are not checked (they add the sampler themselves).

Why: DDP runs one copy of the script per GPU. Without a `DistributedSampler` each
process iterates the full dataset, so an "epoch" does `world_size` times the work
and the GPUs train on the same batches (with `shuffle=False`, literally identical
ones), which wastes all the extra GPUs. `DistributedSampler` gives each rank its
own shard.

Bad:
    model = DDP(model, device_ids=[local_rank])
    loader = DataLoader(train_set, batch_size=64, shuffle=True)
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()

Good:
    model = DDP(model, device_ids=[local_rank])
    sampler = DistributedSampler(train_set, shuffle=True)
    loader = DataLoader(train_set, batch_size=64, sampler=sampler)
    for x, y in loader:  # and sampler.set_epoch(epoch) at the start of every epoch (TL304)
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()

Fix (unsafe): add `sampler=DistributedSampler(<dataset>)`, moving `shuffle=` into
the sampler (`shuffle=False` when the loader did not shuffle, since
`DistributedSampler` shuffles by default), and import `DistributedSampler`. Not
offered when the dataset is not a plain name, or when the process group is set up
after the loader in the same function (the sampler reads the world size when it is
built). Unsafe because each rank now sees only its own shard: the steps per epoch
drop by `world_size` (learning-rate schedules counted in steps change), and the
sampler pads the dataset to a multiple of the world size.

Impact: Always high: every process of the job trains on the whole dataset, so an epoch
takes as long on N GPUs as on one: the extra GPUs add no progress.

Unknown device: not read; without a `DistributedSampler` every process of a DDP job
reads the whole dataset on any backend (NCCL on GPUs, gloo on CPUs).

Sources: PyTorch docs, `torch.utils.data.distributed.DistributedSampler`;
"Getting Started with Distributed Data Parallel" tutorial; DDP notes.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchlint.edits import set_kwarg, spell
from torchlint.fixes import Applicability, Fix, FixSafety, Import, Replace, fix
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import (
    DATALOADER_PARAMS,
    MISSING,
    DataLoaderSite,
    Scope,
    TorchModule,
    dotted_name,
    is_none,
)

SAMPLER = "torch.utils.data.DistributedSampler"
SHARDED_WRAPPERS = (
    "torch.nn.parallel.DistributedDataParallel",
    "torch.distributed.fsdp.FullyShardedDataParallel",
    "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel",
    "torch.distributed.fsdp.fully_shard",
    "torch.distributed._composable.fsdp.fully_shard",
)


def spell_sampler(module: TorchModule, scope: Scope) -> tuple[str, Import | None]:
    """`DistributedSampler` as this file can write it, importing it by name if free."""
    for local, symbol in module.scope.symbols.items():
        if symbol.imported == SAMPLER and scope.lookup(local) is symbol:
            return local, None
    if module.is_free("DistributedSampler"):
        return "DistributedSampler", Import("torch.utils.data", "DistributedSampler")
    return spell(module, SAMPLER, scope)


class DdpLoaderWithoutDistributedSampler(Rule):
    code = "TL303"
    name = "ddp-loader-without-distributed-sampler"
    fix_safety = FixSafety.UNSAFE
    tokens = ("DataParallel", "fully_shard", "FullyShardedDataParallel")
    skips_managed = True

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        if not module.calls_to(*SHARDED_WRAPPERS):
            return
        for loader in module.loaders.sites:
            if loader.opaque or not loader.feeds_training:
                continue
            if not _none(loader.arg("sampler")) or not _none(loader.arg("batch_sampler")):
                continue
            if module.datasets.iterable_dataset(loader):
                continue
            yield self.diagnostic(
                loader.call.node,
                "this DataLoader feeds a DistributedDataParallel training loop without a "
                "`DistributedSampler`: every process iterates the whole dataset, so the "
                "GPUs repeat each other's work; add `sampler=DistributedSampler(dataset)`",
                fix=_fix(module, loader),
            )


def _none(value: cst.BaseExpression) -> bool:
    return value is MISSING or is_none(value)


def _fix(module: TorchModule, loader: DataLoaderSite) -> Fix | None:
    dataset = loader.arg("dataset")
    if dataset is MISSING or dotted_name(dataset) is None:
        return None
    if _init_after(module, loader):
        return None
    spelled, imp = spell_sampler(module, loader.call.scope)
    shuffle = loader.arg("shuffle")
    shuffle_value = cst.Name("False") if shuffle is MISSING else shuffle
    sampler = cst.parse_expression(f"{spelled}(x, shuffle=x)")
    assert isinstance(sampler, cst.Call)
    sampler = sampler.with_changes(
        args=[
            sampler.args[0].with_changes(value=dataset),
            sampler.args[1].with_changes(value=shuffle_value),
        ]
    )
    call = loader.call.node
    shuffle_arg = next((a for a in call.args if a.value is shuffle), None)
    if (
        shuffle_arg is not None
        and shuffle_arg.keyword is not None
        and loader.call.kwarg("sampler") is MISSING
    ):
        # `shuffle=...` becomes `sampler=...` in its place.
        new = call.with_changes(
            args=[
                a.with_changes(keyword=cst.Name("sampler"), value=sampler)
                if a is shuffle_arg
                else a
                for a in call.args
            ]
        )
    else:
        new = call
        if shuffle_arg is not None and shuffle_arg.keyword is not None:
            new = new.with_changes(args=[a for a in new.args if a is not shuffle_arg])
        elif shuffle_arg is not None:  # positional: keep the position, stop shuffling
            new = set_kwarg(new, "shuffle", cst.Name("False"), positional=DATALOADER_PARAMS)
        new = set_kwarg(new, "sampler", sampler, positional=DATALOADER_PARAMS)
    return fix(
        "Add `sampler=DistributedSampler(...)`",
        Applicability.UNSAFE,
        Replace(call, new),
        imports=[imp] if imp else [],
    )


def _init_after(module: TorchModule, loader: DataLoaderSite) -> bool:
    """`init_process_group` runs after the loader is built, in the same function."""
    return any(
        init.ctx.function is loader.call.ctx.function and init.order > loader.call.order
        for init in module.calls_to("torch.distributed.init_process_group")
    )
