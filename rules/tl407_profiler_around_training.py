"""TL407 profiler-around-training: a profiler records the whole training loop.

What: a `with` statement that opens `torch.autograd.profiler.profile(...)`,
`torch.autograd.profiler.emit_nvtx(...)` / `emit_itt(...)`, or `torch.profiler.profile(...)`
without a `schedule=`, around a training loop (the loop is in the block, or the block
calls a function of this file that runs it). Not reported: `enabled=False` or an
`enabled=` the code computes, a profiler under a condition (`if args.profile:`), a
`torch.profiler.profile(schedule=...)` (it records only the steps its schedule picks),
and profilers around code that does not train.

Why: the autograd profiler records an event for every operator of every step (with
`emit_nvtx`, an NVTX range for each) and keeps them all in memory until the block
ends: it adds CPU overhead to every kernel launch, the host falls behind the GPU, and
memory grows with the length of the run. The Performance Tuning Guide lists these
profilers among the debugging APIs to turn off for regular training. To look at a
training run, profile a handful of steps with a schedule.

Bad:
    def train_one_epoch(model, loader, optimizer):
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()


    with torch.autograd.profiler.profile(use_cuda=True) as prof:
        for epoch in range(epochs):
            train_one_epoch(model, loader, optimizer)
    print(prof.key_averages().table())

Good:
    def train_step(x, y):
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()


    schedule = torch.profiler.schedule(wait=1, warmup=1, active=3, repeat=1)
    with torch.profiler.profile(schedule=schedule) as prof:
        for step, (x, y) in enumerate(loader):
            train_step(x, y)
            prof.step()  # the profiler records steps 2-4 only

Fix: none; the recorded profile may be read after the block, and choosing which steps
to profile is the user's call.

Impact: Always high: the profiler adds overhead to every operator launch of the whole
run and keeps every event in memory until the block ends.

Unknown device: not read; the per-operator overhead and the memory of a whole run's
events are paid on any device.

Sources: PyTorch Performance Tuning Guide, "Disable debugging APIs"; PyTorch docs,
`torch.autograd.profiler.profile`, `torch.autograd.profiler.emit_nvtx`,
`torch.profiler.profile` and `torch.profiler.schedule`; "PyTorch Profiler" recipe.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from torchlint.fixes import FixSafety
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import MISSING, CallSite, TorchModule

RECORDING = (
    "torch.autograd.profiler.profile",
    "torch.autograd.profiler_legacy.profile",
    "torch.autograd.profiler.emit_nvtx",
    "torch.autograd.profiler.emit_itt",
    "torch.profiler.profile",
)
SCHEDULED = "torch.profiler.profile"


class ProfilerAroundTraining(Rule):
    code = "TL407"
    name = "profiler-around-training"
    fix_safety = FixSafety.NONE
    tokens = ("profiler",)
    pattern = re.compile(r"backward")  # a training loop runs a backward pass

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        profilers = [
            c
            for c in module.calls_to(*RECORDING)
            if _records_every_step(module, c)
            and isinstance(c.ctx.statement, cst.With)
            and any(item.item is c.node for item in c.ctx.statement.items)
        ]
        if not profilers or not module.training_loops:
            return
        trainers = {id(loop.ctx.function) for loop in module.training_loops}
        for call in profilers:
            block = call.ctx.statement
            assert isinstance(block, cst.With)
            if not _trains(module, block, trainers):
                continue
            name = (call.qualname or "").rsplit(".", 1)[-1]
            yield self.diagnostic(
                call.node,
                f"`{name}` records every operator of the whole training loop: overhead on "
                "each kernel launch and memory that grows with the run; profile a few steps "
                "(`torch.profiler.profile(schedule=torch.profiler.schedule(...))`) or remove it",
            )


def _records_every_step(module: TorchModule, call: CallSite) -> bool:
    """On, unconditionally, with no schedule choosing the steps."""
    if call.qualname == SCHEDULED and call.kwarg("schedule") is not MISSING:
        return False
    scheduled = call.qualname == SCHEDULED  # keyword-only, no `enabled`
    enabled = call.kwarg("enabled") if scheduled else call.arg("enabled", index=0)
    if enabled is not MISSING and not (isinstance(enabled, cst.Name) and enabled.value == "True"):
        return False
    return not module.runs.conditional(call.ctx, call.node)


def _trains(module: TorchModule, block: cst.With, trainers: set[int]) -> bool:
    """A training loop runs inside the block: in it, or in a function of this file that a
    call in it runs."""
    if any(any(w is block for w in loop.ctx.withs) for loop in module.training_loops):
        return True
    for call in module.calls:
        if any(w is block for w in call.ctx.withs):
            target = module.functions.target(call)
            if target is not None and id(target.function) in trainers:
                return True
    return False
