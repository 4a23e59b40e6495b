"""TL408 gradcheck-in-training-loop: a numerical gradient check on every step.

What: `torch.autograd.gradcheck(...)` or `gradgradcheck(...)` where it runs every
training step: in a training loop's body, in a network's `forward`, or in a function
those call (not every N steps under `if step % N == 0:`, not under another condition).
A check run once, before training, is left alone: it costs a few forward passes on a
small input.

Why: `gradcheck` compares the analytical gradient with finite differences: two
forward evaluations per element of every input, in float64 (which most GPUs run at a
fraction of their float32 speed), each result read back to the host. It is a test for
a custom `autograd.Function`, not something a training step can afford: the Performance
Tuning Guide lists it among the debugging APIs to disable for regular training.

Bad:
    for x, y in loader:
        assert torch.autograd.gradcheck(my_op, (x.double().requires_grad_(),))
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()

Good (in a test, or once before training):
    def test_my_op():
        x = torch.randn(4, 3, dtype=torch.double, requires_grad=True)
        assert torch.autograd.gradcheck(my_op, (x,))


    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()

Fix (unsafe): remove the statement when it is the call alone or `assert <call>`.
Unsafe because a gradient that disagrees with finite differences no longer stops the
run.

Impact: Always high: finite differences in float64 over every input element, at every
step, can cost more than the training step itself.

Unknown device: not read; finite differences in float64 are expensive on any device.

Sources: PyTorch Performance Tuning Guide, "Disable debugging APIs"; PyTorch docs,
`torch.autograd.gradcheck.gradcheck`, `torch.autograd.gradcheck.gradgradcheck`;
"Gradcheck mechanics" note.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchlint.edits import lone_expression
from torchlint.fixes import Applicability, FixSafety, Remove, fix
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import CallSite, TorchModule, is_periodic

GRADCHECKS = (
    "torch.autograd.gradcheck",
    "torch.autograd.gradgradcheck",
    "torch.autograd.gradcheck.gradcheck",
    "torch.autograd.gradcheck.gradgradcheck",
)


class GradcheckInTrainingLoop(Rule):
    code = "TL408"
    name = "gradcheck-in-training-loop"
    fix_safety = FixSafety.UNSAFE
    tokens = ("gradcheck",)

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        for call in module.calls_to(*GRADCHECKS):
            if not module.runs.per_step(call.ctx) or is_periodic(call):
                continue
            if module.runs.conditional(call.ctx, call.node):
                continue
            name = (call.qualname or "").rsplit(".", 1)[-1]
            statement = _statement(call)
            yield self.diagnostic(
                call.node,
                f"`{name}` on every training step: finite differences in float64, two "
                "forward passes per input element; it is a test, run it once outside the loop",
                fix=fix(f"Remove the `{name}` check", Applicability.UNSAFE, Remove(statement))
                if statement is not None
                else None,
            )


def _statement(call: CallSite) -> cst.SimpleStatementLine | None:
    """The statement line when it is the call alone or `assert <call>`."""
    statement = call.ctx.statement
    if lone_expression(statement, call.node) is not None:
        assert isinstance(statement, cst.SimpleStatementLine)
        return statement
    if (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Assert)
        and statement.body[0].test is call.node
    ):
        return statement
    return None
