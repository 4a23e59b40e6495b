"""TL405 zero-grad-keeps-zeros: `zero_grad(set_to_none=False)` writes zeros into every gradient.

What: `optimizer.zero_grad(set_to_none=False)` (or `model.zero_grad(False)`) on any
receiver; with `target-torch` below 2.0 also a bare `zero_grad()`, whose default
was `set_to_none=False` until PyTorch 2.0 (below 1.7 there is no `set_to_none`:
nothing is reported). An explicit `False` is a decision where the file adds into or
writes gradients in place (`p.grad += g`, `p.grad.add_(g)`, `p.grad.data.copy_(g)`:
with `None` gradients these raise): then nothing is reported.

Why: zeroing launches a memset for every parameter's `.grad` each step, and the next
`backward()` then reads those zeros back to accumulate into them. With
`set_to_none=True` the gradients are freed instead: no memset, backward writes the
first gradient directly (an assignment, not an add), and the memory of the
gradients is released between steps. The PyTorch Performance Tuning Guide lists it
under "Use parameter.grad = None instead of model.zero_grad()"; PyTorch 2.0 made it
the default. TorchFix reports the same pattern as TOR402.

Bad:
    optimizer.zero_grad(set_to_none=False)

Good:
    optimizer.zero_grad()  # set_to_none=True is the default since PyTorch 2.0

Fix (unsafe): only for a bare `zero_grad()` with `target-torch` below 2.0: write
`set_to_none=True`. An explicit `set_to_none=False` is the author's choice (FSDP and
context-parallel examples keep the zero tensors on purpose): it is reported, with the
advice to drop it, and never changed. Unsafe because after the call `.grad` is `None`
instead of a zero tensor: code that reads or updates `p.grad` between `zero_grad()`
and `backward()` (`p.grad.add_(...)`, gradient clipping of frozen parameters,
optimizers that expect a tensor) must handle `None`.

Impact: Always high for a bare `zero_grad()` under a `target-torch` below 2.0: a memset
per parameter and an add into it at every step, which `set_to_none=True` removes. A
clear low case, not told apart yet (reported high): an explicit `set_to_none=False` in
distributed code (FSDP, DTensor gradients), often deliberate, where the saving is one
memset per parameter per step.

Unknown device: not read; the zero fill costs a memset per parameter, and backward an
add into it, on any device.

Sources: PyTorch Performance Tuning Guide, "Use parameter.grad = None instead of
model.zero_grad() or optimizer.zero_grad()"; `torch.optim.Optimizer.zero_grad`
docs; PyTorch 2.0 release notes (default changed to `set_to_none=True`); TorchFix
TOR402.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchlint.edits import set_kwarg
from torchlint.fixes import Applicability, FixSafety, Replace, fix
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import MISSING, Kind, TorchModule, bool_value, dotted_name

WHY = (
    "every step writes zeros into each parameter's `.grad` and backward then adds into "
    "them; with `set_to_none=True` (the default since PyTorch 2.0) the gradients are "
    "freed and backward assigns them directly"
)


class ZeroGradKeepsZeros(Rule):
    code = "TL405"
    name = "zero-grad-keeps-zeros"
    fix_safety = FixSafety.UNSAFE
    tokens = ("zero_grad",)

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        target = module.target_torch
        if target is not None and target < (1, 7):
            return  # no `set_to_none` parameter yet
        old_torch = target is not None and target < (2, 0)
        updates_grads: bool | None = None
        for call in module.method_calls("zero_grad"):
            if call.has_star_args:
                continue
            node = call.node
            value = call.kwarg("set_to_none")
            positional = call.positional
            if value is MISSING and positional:
                value = positional[0]
            if value is MISSING:
                if not old_torch or node.args:
                    continue
                yield self.diagnostic(
                    node,
                    f"`zero_grad()` keeps zero-filled gradients before PyTorch 2.0: {WHY}; "
                    "pass `set_to_none=True`",
                    fix=fix(
                        "Pass `set_to_none=True`",
                        Applicability.UNSAFE,
                        Replace(node, set_kwarg(node, "set_to_none", cst.Name("True"))),
                    ),
                )
                continue
            if bool_value(value) is not False:
                continue
            if updates_grads is None:
                updates_grads = _updates_grads_in_place(module)
            if updates_grads:
                continue  # `p.grad += g` needs the zeros: `None += g` is a TypeError
            advice = "use `set_to_none=True`" if old_torch else "drop the argument"
            yield self.diagnostic(
                node,
                f"`zero_grad(set_to_none=False)`: {WHY}; {advice} unless something needs the "
                "zero tensors (not fixed: the argument is an explicit choice)",
            )


def _updates_grads_in_place(module: TorchModule) -> bool:
    """Something in the file adds into or writes `.grad` in place (`p.grad += g`,
    `p.grad.add_(g)`, `p.grad.data.copy_(g)`): it relies on the zero tensors."""
    for b in module.all_bindings:
        name = b.symbol.name
        if b.kind is Kind.AUGASSIGN and (name.endswith(".grad") or ".grad." in name):
            return True
    for call in module.calls:
        receiver = dotted_name(call.receiver) if call.receiver is not None else None
        if receiver is None or not (call.method or "").endswith("_"):
            continue
        if receiver.endswith(".grad") or ".grad." in receiver:
            return True
    return False
