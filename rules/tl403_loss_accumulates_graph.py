"""TL403 loss-accumulates-graph: `total += loss` keeps every step's autograd graph alive.

What: in a training loop that calls `loss.backward()`, the loss tensor itself is
added to a running total bound before the loop (`total += loss`, `total = total +
loss`, `total += loss * x.size(0)`), and that total is never backpropagated.

Why: `loss` carries its autograd history; `total + loss` is a new tensor that
references it, so each step's graph (activations included, for the loss node) is
kept alive by the running total until the loop ends. GPU memory grows every step,
and the addition is a tiny kernel that later forces a sync when the total is
printed. The PyTorch FAQ calls this out as the first cause of "my model reports
cuda runtime error(2): out of memory": "Don't accumulate history across your
training loop."

Bad:
    total = 0.0
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss

Good:
    total = 0.0
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss.detach()  # stays on the GPU, no graph, no sync

Fix (safe): accumulate `loss.detach()` instead of `loss`. The value is the same;
only the history the total never needs is dropped. Not offered (nor reported) when
the total is backpropagated, or feeds a loss that is.

Sources: PyTorch FAQ, "My model reports cuda runtime error(2): out of memory"
(accumulating history across the training loop); autograd mechanics notes.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchlint.fixes import Applicability, FixSafety, Replace, fix
from torchlint.model import Assignment, Loop, TorchModule, dotted_name, names_read
from torchlint.rule import Diagnostic, Rule

# `loss.item()`, `float(loss)`...: a value without history.
DETACHING_METHODS = ("item", "detach", "tolist", "cpu", "numpy")
ARITHMETIC = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide)


class LossAccumulatesGraph(Rule):
    code = "TL403"
    name = "loss-accumulates-graph"
    fix_safety = FixSafety.SAFE
    tokens = ("backward",)

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        backpropagated: set[str] | None = None
        for loop in module.loops:
            if not loop.is_step_loop:
                continue
            losses = _losses(module, loop)
            if not losses:
                continue
            for acc in _accumulations(module, loop):
                target = acc.target
                leaves = _loss_leaves(acc, losses)
                if not leaves or not _bound_before(module, loop, acc):
                    continue
                if backpropagated is None:
                    backpropagated = {n for e in _backpropagated(module) for n in names_read(e)}
                if target in backpropagated:
                    continue
                edits = [
                    Replace(leaf, cst.Call(cst.Attribute(leaf, cst.Name("detach"))))
                    for leaf in leaves
                ]
                loss = dotted_name(leaves[0])
                yield self.diagnostic(
                    acc.node,
                    f"`{target}` accumulates `{loss}` with its autograd graph, keeping every "
                    "step's graph alive (GPU memory grows each step); accumulate "
                    f"`{loss}.detach()` to keep the total on the device without history",
                    fix=fix(f"Accumulate `{loss}.detach()`", Applicability.SAFE, *edits),
                )


def _backpropagated(module: TorchModule) -> list[cst.BaseExpression]:
    """Every expression handed to backward: receivers and arguments of `.backward(...)`,
    `torch.autograd.backward/grad(...)`, and the values of names so handed."""
    exprs: list[cst.BaseExpression] = []
    for call in [
        *module.method_calls("backward"),
        *module.calls_to("torch.autograd.backward", "torch.autograd.grad"),
    ]:
        if call.receiver is not None:
            exprs.append(call.receiver)
        exprs.extend(arg.value for arg in call.node.args)
    for expr in list(exprs):
        name = dotted_name(expr)
        if name is not None:
            exprs.extend(a.value for a in module.assigned(name))
    return exprs


def _losses(module: TorchModule, loop: Loop) -> set[str]:
    """Names backpropagated in this loop and computed in it (`loss = ...; loss.backward()`,
    `scaler.scale(loss).backward()`, `accelerator.backward(loss)`)."""
    names: set[str] = set()
    for call in loop.calls:
        if call.method != "backward":
            continue
        candidates = [dotted_name(a.value) for a in call.node.args if a.keyword is None]
        receiver = call.receiver
        if isinstance(receiver, cst.Call) and receiver.args:
            candidates.append(dotted_name(receiver.args[0].value))
        elif receiver is not None:
            candidates.append(dotted_name(receiver))
        # `loss` or `outputs.loss`, computed in this loop.
        names.update(n for n in candidates if n is not None and n.split(".")[0] in loop.bound)
    # A loss turned into a number in the loop (`loss = loss.item()`) carries no graph.
    for name in list(names):
        for a in module.assigned(name):
            if loop in a.ctx.loops and _detached(a.value):
                names.discard(name)
    return names


def _detached(node: cst.BaseExpression) -> bool:
    if not isinstance(node, cst.Call):
        return False
    if isinstance(node.func, cst.Attribute) and node.func.attr.value in DETACHING_METHODS:
        return True
    return isinstance(node.func, cst.Name) and node.func.value in ("float", "int")


def _accumulations(module: TorchModule, loop: Loop) -> Iterator[Assignment]:
    """`t += v` and `t = t + v` / `t = v + t` in the loop's body."""
    for a in module.aug_assignments:
        node = a.node
        if (
            loop in a.ctx.loops
            and isinstance(node, cst.AugAssign)
            and isinstance(node.operator, cst.AddAssign)
        ):
            yield a
    for assignments in module.assignments.values():
        for a in assignments:
            value = a.value
            if (
                loop in a.ctx.loops
                and isinstance(a.node, cst.Assign)
                and len(a.node.targets) == 1
                and isinstance(value, cst.BinaryOperation)
                and isinstance(value.operator, cst.Add)
                and a.target in (dotted_name(value.left), dotted_name(value.right))
            ):
                yield a


def _bound_before(module: TorchModule, loop: Loop, acc: Assignment) -> bool:
    """The total is bound outside the loop (in the same function for a plain name, so
    that it lives across steps), and every binding in the loop is an accumulation."""
    outside = False
    for a in module.assigned(acc.target):
        if loop in a.ctx.loops:
            if a is not acc and not (
                isinstance(a.value, cst.BinaryOperation)
                and acc.target in (dotted_name(a.value.left), dotted_name(a.value.right))
            ):
                return False
        elif "." in acc.target or a.ctx.function is loop.ctx.function:
            outside = True
    return outside


def _loss_leaves(acc: Assignment, losses: set[str]) -> list[cst.Name | cst.Attribute]:
    """The bare loss names among the operands of the accumulated value; [] when some
    operand uses a loss in a way we do not understand (`loss.mean()`)."""
    value = acc.value
    if isinstance(acc.node, cst.Assign):
        # `t = t + v`: the accumulated value is the other side.
        assert isinstance(value, cst.BinaryOperation)
        value = value.right if dotted_name(value.left) == acc.target else value.left
    leaves: list[cst.Name | cst.Attribute] = []
    stack: list[cst.BaseExpression] = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, ARITHMETIC):
            stack.extend((node.right, node.left))
        elif isinstance(node, (cst.Name, cst.Attribute)) and dotted_name(node) in losses:
            leaves.append(node)
        elif not losses.isdisjoint(names_read(node)) and not _detached(node):
            return []
    return leaves
