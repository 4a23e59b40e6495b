"""TL406 anomaly-detection-in-training: autograd anomaly detection left on in training.

What: `torch.autograd.set_detect_anomaly(True)` or `torch.autograd.detect_anomaly()`
(a `with` block, a decorator, a call) in a file that trains a model (a training loop,
or a Lightning/Accelerate/Trainer file). Not reported: a call under a condition
(`if args.debug:`, or in a function only called under one), `set_detect_anomaly(False)`
or a mode the code computes (`set_detect_anomaly(args.debug)`).

Why: anomaly detection is a debugging mode. Every operation of the forward pass
records the Python traceback that created it, and every backward function's output
is checked for NaN, which reads the gradient back to the host: a synchronization per
operation of every step. The autograd docs warn that it "should be enabled only for
debugging as the different tests will slow down your program execution"; the
Performance Tuning Guide lists it first among the debugging APIs to disable for
regular training. Training runs several times slower with it.

Bad:
    torch.autograd.set_detect_anomaly(True)
    for x, y in loader:
        loss = criterion(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()

Good:
    if args.debug:  # only while chasing a NaN
        torch.autograd.set_detect_anomaly(True)
    for x, y in loader:
        loss = criterion(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()

Fix (unsafe): remove the `set_detect_anomaly(True)` statement, or the
`detect_anomaly()` item of a `with` statement (its body moves up a level when it was
the only item). Unsafe because a backward pass that produces NaN no longer stops the
run with an error naming the forward operation: training goes on with NaN weights.

Impact: Always high: anomaly detection makes every step several times slower (a
traceback recorded per operation, a NaN check and a host sync per backward function).

Unknown device: not read; recording tracebacks and checking every backward output slows
training on any device.

Sources: PyTorch Performance Tuning Guide, "Disable debugging APIs"; PyTorch docs,
"Automatic differentiation package - torch.autograd", Anomaly detection
(`torch.autograd.detect_anomaly`, `torch.autograd.set_detect_anomaly`).
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchlint.edits import lone_expression
from torchlint.fixes import (
    Applicability,
    Edit,
    Fix,
    FixSafety,
    InsertAfter,
    Remove,
    Replace,
    fix,
)
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import CallSite, TorchModule, bool_value

SET_DETECT = ("torch.autograd.set_detect_anomaly", "torch.autograd.anomaly_mode.set_detect_anomaly")
DETECT = ("torch.autograd.detect_anomaly", "torch.autograd.anomaly_mode.detect_anomaly")


class AnomalyDetectionInTraining(Rule):
    code = "TL406"
    name = "anomaly-detection-in-training"
    fix_safety = FixSafety.UNSAFE
    tokens = ("detect_anomaly",)

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        calls = module.calls_to(*SET_DETECT, *DETECT)
        if not calls or not (module.training_loops or module.placement.managed):
            return
        for call in calls:
            on = call.qualname in DETECT or bool_value(call.arg("mode", index=0)) is True
            if not on or module.runs.conditional(call.ctx, call.node):
                continue
            yield self.diagnostic(
                call.node,
                "autograd anomaly detection is on while training: every operation records "
                "its traceback and every backward output is checked for NaN (a host sync "
                "per operation); it is for debugging: remove it or put it under a debug flag",
                fix=_removal(call),
            )


def _removal(call: CallSite) -> Fix | None:
    title = "Remove anomaly detection"
    statement = call.ctx.statement
    lone = lone_expression(statement, call.node)
    if lone is not None:
        return fix(title, Applicability.UNSAFE, Remove(lone))
    if not isinstance(statement, cst.With):
        return None
    removed = [i for i in statement.items if i.item is call.node]
    if not removed or removed[0].asname is not None:
        return None  # not an item of this `with`, or a value the body may use
    items = [i for i in statement.items if i.item is not call.node]
    if items:
        last = items[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return fix(
            title,
            Applicability.UNSAFE,
            Replace(statement, statement.with_changes(items=[*items[:-1], last])),
        )
    body = statement.body
    if not isinstance(body, cst.IndentedBlock) or not body.body:
        return None
    first, *rest = body.body
    if not isinstance(first, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
        return None
    moved = first.with_changes(leading_lines=[*statement.leading_lines, *first.leading_lines])
    edits: list[Edit] = [Replace(statement, moved)]
    if rest:
        edits.append(InsertAfter(statement, tuple(rest)))
    return fix(title, Applicability.UNSAFE, *edits)
