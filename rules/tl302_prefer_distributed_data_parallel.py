"""TL302 prefer-distributed-data-parallel: `DataParallel` scales worse than DDP.

What: `torch.nn.DataParallel(...)` (also spelled `torch.nn.parallel.DataParallel`) and
the functional `torch.nn.parallel.data_parallel(...)`. Advice, so off by default:
enable it with `--extend-select TL302`. Files managed by Lightning, Accelerate,
DeepSpeed or the transformers Trainer are not checked.

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

Impact: Always high: on several GPUs DDP trains faster than `DataParallel`, which drives
them all from one process and loads the first GPU more. A clear low case, not told apart
yet (reported high): `DataParallel` kept as a deliberate fallback, under an option (`if
args.ngpu > 1:`) or beside a `DistributedDataParallel` path of the same file.

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
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import TorchModule

DATA_PARALLEL = (
    "torch.nn.DataParallel",
    "torch.nn.parallel.data_parallel",
    "torch.nn.parallel.data_parallel.data_parallel",
)


class PreferDistributedDataParallel(Rule):
    code = "TL302"
    name = "prefer-distributed-data-parallel"
    fix_safety = FixSafety.NONE
    default_enabled = False
    tokens = ("DataParallel", "data_parallel")
    skips_managed = True

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        for call in module.calls_to(*DATA_PARALLEL):
            what = "`DataParallel`" if call.qualname == DATA_PARALLEL[0] else "`data_parallel()`"
            yield self.diagnostic(
                call.node,
                f"{what} drives every GPU from one process, replicating the model and "
                "gathering on GPU 0 each step; `DistributedDataParallel` with one process "
                "per GPU (torchrun) and a `DistributedSampler` scales better",
            )
