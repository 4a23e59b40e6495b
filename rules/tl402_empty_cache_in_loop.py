"""TL402 empty-cache-in-loop: `torch.cuda.empty_cache()` on every step.

What: a call of `torch.cuda.empty_cache()` inside a loop over a DataLoader or inside
a training loop (a loop whose body calls `.backward()` and an optimizer `.step()`),
so it runs once per batch. A call once per epoch, after the loop, or under a
periodic `if step % N == 0:` is not reported.

Why: `empty_cache()` does not free memory that tensors use; it hands the caching
allocator's *unused* blocks back to the driver. The next step then has to
`cudaMalloc` them again, which is slow and synchronizes the device, so the GPU
idles between steps. It does not prevent out-of-memory errors either: the blocks it
returns were free for PyTorch to reuse anyway (it only helps other processes on the
same GPU). PyTorch's CUDA semantics notes describe the caching allocator.

Bad:
    for x, y in loader:
        loss = criterion(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()
        torch.cuda.empty_cache()

Good:
    for x, y in loader:
        loss = criterion(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()
    torch.cuda.empty_cache()  # once, if another process needs the memory

Fix (safe): delete the call (the statement, when it is the call alone). Results are
unchanged: only cached blocks that no tensor uses stop being released each step.

Impact: Always high: each step hands the allocator's cached blocks back to the driver
and allocates them again with synchronizing `cudaMalloc` calls, stalling the GPU every
step.

Unknown device: not read; `torch.cuda.empty_cache()` is itself a CUDA call, reported in
a loader or training loop whatever the file says of its devices.

Sources: PyTorch docs, CUDA semantics, "Memory management" (caching allocator,
`empty_cache`); `torch.cuda.empty_cache` docs.
"""

from __future__ import annotations

from collections.abc import Iterator

from torchlint.edits import lone_expression
from torchlint.fixes import Applicability, FixSafety, Remove, fix
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import TorchModule, is_periodic


class EmptyCacheInLoop(Rule):
    code = "TL402"
    name = "empty-cache-in-loop"
    fix_safety = FixSafety.SAFE
    tokens = ("empty_cache",)

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        for call in module.calls_to("torch.cuda.empty_cache", "torch.cuda.memory.empty_cache"):
            loops = call.ctx.loops
            if not any(loop.is_loader_loop or loop.is_step_loop for loop in loops):
                continue
            if is_periodic(call):
                continue
            statement = lone_expression(call.ctx.statement, call.node)
            yield self.diagnostic(
                call.node,
                "`torch.cuda.empty_cache()` on every step hands cached blocks back to the "
                "driver, so the next step must allocate (and synchronize) again; it frees "
                "no memory your tensors use: remove it, or call it once after the loop",
                fix=fix("Remove `torch.cuda.empty_cache()`", Applicability.SAFE, Remove(statement))
                if statement is not None
                else None,
            )
