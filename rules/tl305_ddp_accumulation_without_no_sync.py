"""TL305 ddp-accumulation-without-no-sync: DDP all-reduces on every accumulation step.

What: a training loop over a `DistributedDataParallel` model (called in the loop, or
passed to a call in it: `compute_loss(ddp_model, batch)`; wrapped here, or by a helper
of another file of the project that returns the model it is given wrapped: yolov5's
`model = smart_DDP(model)`) that accumulates gradients (the backward pass runs on every
batch, the optimizer steps only under `if (step + 1) % accumulation == 0:`, or under
yolov5's `if ni - last_opt_step >= accumulate:` whose body sets `last_opt_step = ni`),
in a file that never calls `no_sync()` (nor sets `require_backward_grad_sync`). Files
managed by Lightning, Accelerate, DeepSpeed or the transformers Trainer are not checked
(their accumulation skips the all-reduce).

Why: DDP all-reduces the gradients during every `backward()`. With accumulation only
the last micro-batch's all-reduce is needed: the ones before it send the whole
gradient across the network to produce sums that the next backward pass adds to
anyway. `with model.no_sync():` around the forward and backward of the accumulating
micro-batches keeps the gradients local until the last one, cutting the
communication by the accumulation factor (the Performance Tuning Guide's "Skip
unnecessary all-reduce" item).

Bad:
    ddp_model = DDP(model, device_ids=[local_rank])
    for step, (x, y) in enumerate(loader):
        loss = criterion(ddp_model(x), y) / accumulation
        loss.backward()  # an all-reduce for every micro-batch
        if (step + 1) % accumulation == 0:
            optimizer.step()
            optimizer.zero_grad()

Good:
    import contextlib

    ddp_model = DDP(model, device_ids=[local_rank])
    for step, (x, y) in enumerate(loader):
        last = (step + 1) % accumulation == 0
        with contextlib.nullcontext() if last else ddp_model.no_sync():
            loss = criterion(ddp_model(x), y) / accumulation
            loss.backward()  # all-reduces only on the last micro-batch
        if last:
            optimizer.step()
            optimizer.zero_grad()

Fix: none; the forward pass must move into the `no_sync()` block with the backward.

Impact: Always high: every micro-batch but the last all-reduces the whole gradient for
nothing, multiplying the communication of a step by the accumulation factor.

Unknown device: not read; the all-reduce of every micro-batch is paid on any backend
(NCCL on GPUs, gloo on CPUs).

Sources: PyTorch Performance Tuning Guide, "Skip unnecessary all-reduce if training with
DistributedDataParallel and gradient accumulation"; PyTorch docs,
`torch.nn.parallel.DistributedDataParallel.no_sync`.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchlint.fixes import FixSafety
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import (
    CallSite,
    Loop,
    TorchModule,
    bindings,
    contains,
    dotted_name,
    is_periodic,
)
from torchlint.text.walk import descendants

DDP = "torch.nn.parallel.DistributedDataParallel"
GREATER_EQUAL = cst.GreaterThanEqual


class DdpAccumulationWithoutNoSync(Rule):
    code = "TL305"
    name = "ddp-accumulation-without-no-sync"
    fix_safety = FixSafety.NONE
    tokens = ("DistributedDataParallel",)
    skips_managed = True

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        if module.method_calls("no_sync"):
            return
        if any(
            target.attr.value == "require_backward_grad_sync"
            for target, _, _ in module.attribute_stores
        ):
            return
        for loop in module.step_loops:
            if not loop.steps or not all(_accumulates(step) for step in loop.steps):
                continue
            every_batch = [b for b in loop.backwards if not is_periodic(b)]
            if not every_batch or not _trains_ddp(module, loop):
                continue
            yield self.diagnostic(
                every_batch[0].node,
                "gradient accumulation under DistributedDataParallel: this backward pass "
                "all-reduces the gradients on every micro-batch although the optimizer "
                "steps only every few; run the accumulating micro-batches under "
                "`with model.no_sync():`",
            )


def _trains_ddp(module: TorchModule, loop: Loop) -> bool:
    """The loop calls a model wrapped in DistributedDataParallel (a network of this file
    with a DDP wrapper, or a name such as `self.model` assigned a
    `DistributedDataParallel(...)`), or passes such a name to a call
    (`compute_loss(ddp_model, batch)`)."""
    for call in loop.calls:
        site = module.models.called(call)
        if site is not None and any(w.qualname == DDP for w in site.wrappers):
            return True
        named = [call.node.func, *(a.value for a in call.node.args)]
        if any(_holds_ddp(module, expr, call) for expr in named):
            return True
    return False


def _holds_ddp(module: TorchModule, expr: cst.BaseExpression, call: CallSite) -> bool:
    return isinstance(expr, (cst.Name, cst.Attribute)) and any(
        isinstance(value, cst.Call)
        and (
            module.resolve(value.func, b.ctx.scope) == DDP
            or ((site := module.functions.site(value)) is not None and _wraps_ddp(module, site))
        )
        for b in bindings(expr, call.scope)
        if (value := b.value) is not None
    )


def _wraps_ddp(module: TorchModule, call: CallSite) -> bool:
    """A call of a function of another file of the project that wraps the model it is
    given in DistributedDataParallel (yolov5's `model = smart_DDP(model)`)."""
    found = module.functions.external(call)
    return found is not None and found[0].wraps == DDP


def _accumulates(step: CallSite) -> bool:
    """The optimizer step runs every N micro-batches: under `if (i + 1) % N == 0:`, or
    under `if ni - last_step >= N:` whose body sets `last_step` (yolov5's gate)."""
    if is_periodic(step):
        return True
    for if_ in step.ctx.ifs:
        test = if_.test
        if not contains(if_.body, step.node) or not isinstance(test, cst.Comparison):
            continue
        left, ops = test.left, test.comparisons
        if len(ops) != 1 or not isinstance(ops[0].operator, (cst.GreaterThan, GREATER_EQUAL)):
            continue
        if isinstance(left, cst.BinaryOperation) and isinstance(left.operator, cst.Subtract):
            last = dotted_name(left.right)
            if last is not None and last in _assigned(if_.body):
                return True
    return False


def _assigned(body: cst.BaseSuite) -> set[str]:
    """The names and attributes a block assigns."""
    return {
        name
        for node in descendants(body)
        if isinstance(node, cst.Assign)
        for target in node.targets
        if (name := dotted_name(target.target)) is not None
    }
