"""TL302 prefer-distributed-data-parallel: `DataParallel` scales worse than DDP.

What: `torch.nn.DataParallel(...)` (also spelled `torch.nn.parallel.DataParallel`) and
the functional `torch.nn.parallel.data_parallel(...)`. Files managed by Lightning,
Accelerate, DeepSpeed or the transformers Trainer are not checked, nor a call under an
`if` the file's constants make false (`if num_gpus > 1:` with `num_gpus = 1`: dead code).

Why: `DataParallel` is one process driving every GPU: each step it scatters the
batch, replicates the model from GPU 0 to the others, gathers the outputs back on
GPU 0 and reduces the gradients there. GPU 0 does more work and holds more memory,
the other GPUs wait on it, and one Python thread (and its GIL) feeds them all.
`DistributedDataParallel` runs one process per GPU, replicates the model once, and
overlaps the gradient all-reduce with the backward pass; the PyTorch docs recommend
it "even on a single machine".

Bad:
    model = torch.nn.DataParallel(Net().cuda())

Good (run with `torchrun --nproc-per-node=gpu train.py`):
    import os
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, DistributedSampler

    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    model = DDP(Net().cuda(local_rank), device_ids=[local_rank])
    sampler = DistributedSampler(train_set)  # each process reads its own shard
    loader = DataLoader(train_set, batch_size=64, sampler=sampler, num_workers=4)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)  # a new shuffle every epoch
        for x, y in loader:
            ...
    dist.destroy_process_group()

Keep the batch size per process (the global batch is `world_size` times larger),
save checkpoints from rank 0 only (`model.module.state_dict()`).

Fix: none; moving to DDP changes how the script is launched.

Impact: high: on several GPUs DDP trains faster than `DataParallel`, which drives them
all from one process and loads the first GPU more. Low where `DataParallel` is a
deliberate fallback: under an option whose default keeps it off (`if args.ngpu > 1:`
with `--ngpu` defaulting to 1), beside a distributed path of the same file
(`DistributedDataParallel`, `init_process_group`), or in a notebook (one process, where
DDP needs a launcher); and for a network counted at under a million parameters (a
teaching RNN, an MNIST CNN), which one GPU runs well.

Unknown device: not read; `DataParallel` is a multi-GPU wrapper, so the call says the
code runs on GPUs.

Sources: PyTorch docs, CUDA semantics, "Use nn.parallel.DistributedDataParallel
instead of multiprocessing or nn.DataParallel"; "Getting Started with Distributed
Data Parallel" tutorial; `torch.nn.DataParallel` docs ("It is recommended to use
DistributedDataParallel").
"""

from __future__ import annotations

from collections.abc import Iterator

from torchlint.fixes import FixSafety
from torchlint.results import Impact
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import MISSING, CallSite, TorchModule, toy

# A distributed path in the same file: DataParallel beside it is the fallback.
DISTRIBUTED = (
    "torch.nn.parallel.DistributedDataParallel",
    "torch.distributed.init_process_group",
)
DATA_PARALLEL = (
    "torch.nn.DataParallel",
    "torch.nn.parallel.data_parallel",
    "torch.nn.parallel.data_parallel.data_parallel",
)


class PreferDistributedDataParallel(Rule):
    code = "TL302"
    name = "prefer-distributed-data-parallel"
    fix_safety = FixSafety.NONE
    tokens = ("DataParallel", "data_parallel")
    skips_managed = True

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        distributed = module.calls_to(*DISTRIBUTED)
        for call in module.calls_to(*DATA_PARALLEL):
            off = module.runs.kept_off(call.ctx, call.node)
            if off is not None and off.origin in ("literal", "name"):
                continue  # `if num_gpus > 1:` with `num_gpus = 1`: never runs
            what = "`DataParallel`" if call.qualname == DATA_PARALLEL[0] else "`data_parallel()`"
            message = (
                f"{what} drives every GPU from one process, replicating the model and "
                "gathering on GPU 0 each step; `DistributedDataParallel` with one process "
                "per GPU (torchrun) and a `DistributedSampler` scales better"
            )
            if off is not None:
                low: str | None = "it runs only when an option asks for several GPUs"
            elif distributed:
                low = "a one-process fallback beside this file's distributed path"
            elif module.notebook:
                low = "a notebook runs one process, where DDP needs a launcher"
            elif _small(module, call):
                low = "a network of under a million parameters, which one GPU runs well"
            else:
                low = None
            yield self.diagnostic(
                call.node,
                message if low is None else f"{message} (low impact: {low})",
                impact=Impact.HIGH if low is None else Impact.LOW,
            )


def _small(module: TorchModule, call: CallSite) -> bool:
    """The wrapped network is counted at under a million parameters (`networks.toy`)."""
    wrapped = call.arg("module", index=0)
    if wrapped is MISSING:
        return False
    site = module.models.of(wrapped, call.scope)
    return site is not None and toy([module.networks.parameters(site)])
