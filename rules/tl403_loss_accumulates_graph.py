"""TL403 loss-accumulates-graph: `total += loss` keeps every step's autograd graph alive.

What: in a training loop that calls `loss.backward()`, the loss tensor itself is
added to a running total bound before the loop (`total += loss`, `total = total +
loss`, `total += loss * x.size(0)`), and that total is never backpropagated.

Why: `loss` carries its autograd history; `total + loss` is a new tensor that
references it, so each step's graph is kept alive by the running total until it is
reset (each epoch, usually). `loss.backward()` frees what the graph saved (the
activations), so GPU memory does not grow; the graph's nodes, hundreds per step, stay
in host memory. The PyTorch FAQ lists it among the causes of "my model reports cuda
runtime error(2): out of memory": "Don't accumulate history across your training
loop." (where the accumulated value is never backpropagated, as in an evaluation
without `torch.no_grad()`, the saved activations stay too: TL404's case).

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

Impact: always low: the loss is backpropagated every step, which frees what its graph
saved on the device; what stays is the graph's nodes in host memory, growing until the
total is reset. Worth the one-word fix, not a GPU-time gain.

Unknown device: not read; the kept graphs grow memory on any device, the CPU included.

Sources: PyTorch FAQ, "My model reports cuda runtime error(2): out of memory"
(accumulating history across the training loop); autograd mechanics notes.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchlint.fixes import Applicability, FixSafety, Replace, fix
from torchlint.results import Impact
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import (
    Binding,
    Kind,
    Loop,
    TorchModule,
    assigned_values,
    dotted_name,
    names_read,
)

LOW = "backward frees what each graph saved on the GPU; its nodes stay, in host memory"
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
        for loop in module.step_loops:
            losses = _losses(loop)
            if not losses:
                continue
            for acc in _accumulations(loop):
                target = acc.symbol.name
                leaves = _loss_leaves(acc, losses)
                if not leaves or not _bound_before(loop, acc):
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
                    "step's graph nodes alive until the total is reset (host memory grows "
                    f"each step); accumulate `{loss}.detach()` to keep the total on the "
                    f"device without history (low impact: {LOW})",
                    fix=fix(f"Accumulate `{loss}.detach()`", Applicability.SAFE, *edits),
                    impact=Impact.LOW,
                )


def _backpropagated(module: TorchModule) -> list[cst.BaseExpression]:
    """Every expression handed to backward: receivers and arguments of `.backward(...)`,
    `torch.autograd.backward/grad(...)`, and the values of names so handed."""
    found: list[tuple[cst.BaseExpression, object]] = []
    for call in [
        *module.method_calls("backward"),
        *module.calls_to("torch.autograd.backward", "torch.autograd.grad"),
    ]:
        if call.receiver is not None:
            found.append((call.receiver, call.scope))
        found.extend((arg.value, call.scope) for arg in call.node.args)
    exprs = [e for e, _ in found]
    for expr, scope in found:
        if isinstance(expr, (cst.Name, cst.Attribute)):
            exprs.extend(assigned_values(expr, scope))  # type: ignore[arg-type]
    return exprs


def _losses(loop: Loop) -> frozenset[str]:
    """The loop's losses that keep their graph: not rebound in the loop to a value
    without history (`loss = loss.item()`)."""
    return loop.losses - {
        b.symbol.name for b in loop.assignments if b.value is not None and _detached(b.value)
    }


def _detached(node: cst.BaseExpression) -> bool:
    if not isinstance(node, cst.Call):
        return False
    if isinstance(node.func, cst.Attribute) and node.func.attr.value in DETACHING_METHODS:
        return True
    return isinstance(node.func, cst.Name) and node.func.value in ("float", "int")


def _is_sum(b: Binding, name: str) -> bool:
    """`t = t + v` / `t = v + t`."""
    value = b.value
    return (
        isinstance(b.node, cst.Assign)
        and len(b.node.targets) == 1
        and not b.path
        and isinstance(value, cst.BinaryOperation)
        and isinstance(value.operator, cst.Add)
        and name in (dotted_name(value.left), dotted_name(value.right))
    )


def _accumulations(loop: Loop) -> Iterator[Binding]:
    """`t += v` and `t = t + v` / `t = v + t` in the loop's body."""
    for b in loop.assignments:
        if b.kind is Kind.AUGASSIGN:
            assert isinstance(b.node, cst.AugAssign)
            if isinstance(b.node.operator, cst.AddAssign):
                yield b
        elif _is_sum(b, b.symbol.name):
            yield b


def _bound_before(loop: Loop, acc: Binding) -> bool:
    """The total is bound outside the loop (in the same function for a plain name, so
    that it lives across steps), and every binding in the loop is an accumulation."""
    name = acc.symbol.name
    outside = False
    for b in acc.symbol.bindings:
        if loop in b.ctx.loops:
            if b is not acc and not (
                isinstance(b.value, cst.BinaryOperation)
                and name in (dotted_name(b.value.left), dotted_name(b.value.right))
            ):
                return False
        elif "." in name or b.ctx.function is loop.ctx.function:
            outside = True
    return outside


def _loss_leaves(acc: Binding, losses: frozenset[str]) -> list[cst.Name | cst.Attribute]:
    """The bare loss names among the operands of the accumulated value; [] when some
    operand uses a loss in a way we do not understand (`loss.mean()`)."""
    value = acc.value
    assert value is not None
    if isinstance(acc.node, cst.Assign):
        # `t = t + v`: the accumulated value is the other side.
        assert isinstance(value, cst.BinaryOperation)
        value = value.right if dotted_name(value.left) == acc.symbol.name else value.left
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
