"""TL101 input-not-on-device: a batch from the DataLoader reaches a model on the GPU unmoved.

What: in a loop over a DataLoader, a tensor bound by the loop target (`for x, y in
loader`) is passed to a model that the file moved to a device (`model.to(device)`,
`model.cuda()`), or to a loss (`criterion(...)`, `F.cross_entropy(...)`) together
with that model's output, without a `.to(...)`/`.cuda()` on it first.

Why: a DataLoader yields CPU tensors. Feeding them to a CUDA model raises "Expected
all tensors to be on the same device" on the first step; the usual "fix" of moving
the model back to the CPU leaves the GPU unused. Moving each batch once, at the top
of the loop body, is the pattern of the PyTorch tutorials.

Only what can be proven is reported: the model must be moved unconditionally (a
move under `if args.cuda:` would need the same condition) and before the loop, the
device expression must be visible where the loop is, and the name must not be
rebound in the loop. Batch tensors are the names a loop target unpacks
(`for x, y in loader`, through `enumerate`/`tqdm`/`zip`) or that a first-level
`x, y = batch` unpacks; a whole batch (`for batch in loader`) may be a dict or a
list, and is left alone. Besides model and loss arguments, a batch tensor compared
or combined with a value computed from the model's output (`predicted == labels`)
counts too. Models wrapped in `DataParallel`/`DistributedDataParallel` (which
scatter CPU inputs themselves) and files where Lightning, Accelerate, DeepSpeed or
the transformers Trainer place batches on the device are never reported.

Bad:
    model = Net().to(device)
    for images, labels in train_loader:
        loss = criterion(model(images), labels)

Good:
    for images, labels in train_loader:
        images = images.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True)
        loss = criterion(model(images), labels)

Fix (safe): insert `name = name.to(<the model's device>)` (or `name.cuda()` when the
model was moved with `.cuda()`) at the top of the loop body for each such name, with
`non_blocking=True` when the loader pins memory. Safe: it is a no-op where the
tensor already is on that device, and the original crashes otherwise.

Sources: PyTorch "Training a Classifier" tutorial, "Training on GPU"; CUDA semantics
notes, "Use pinned memory buffers".
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from torchlint.fixes import Applicability, FixSafety, InsertAfter, InsertBefore, fix, statements
from torchlint.model import (
    LOADER_WRAPPERS,
    CallSite,
    Loop,
    ModelSite,
    TorchModule,
    dotted_name,
)
from torchlint.rule import Diagnostic, Rule
from torchlint.walk import walk


def loader_targets(module: TorchModule, loop: Loop) -> list[cst.BaseAssignTargetExpression]:
    """The parts of a `for` target bound to DataLoader batches (through enumerate,
    tqdm, iter and zip); [] where the mapping cannot be followed."""
    if not isinstance(loop.node, cst.For) or not loop.loaders:
        return []
    out: list[cst.BaseAssignTargetExpression] = []
    loader_names = {loader.bound_to for loader in loop.loaders if loader.bound_to}
    loader_nodes = {id(loader.call.node) for loader in loop.loaders}

    def walk(target: cst.BaseExpression, it: cst.BaseExpression, single: bool) -> None:
        if isinstance(it, cst.Call):
            callee = dotted_name(it.func) or ""
            name = module.resolve(it.func) or callee
            if callee == "enumerate" and it.args:
                if isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2:
                    walk(target.elements[1].value, it.args[0].value, single)
                return
            if (name in LOADER_WRAPPERS or callee in LOADER_WRAPPERS) and it.args:
                walk(target, it.args[0].value, single)
                return
            if callee == "zip":
                if (
                    isinstance(target, (cst.Tuple, cst.List))
                    and len(target.elements) == len(it.args)
                    and not any(a.star for a in it.args)
                ):
                    for element, arg in zip(target.elements, it.args, strict=True):
                        walk(element.value, arg.value, False)
                return
            if id(it) in loader_nodes:
                out.append(target)
            return
        name = dotted_name(it)
        if name is not None and (single or name in loader_names):
            out.append(target)

    walk(loop.node.target, loop.node.iter, True)
    return out


def _names(target: cst.BaseExpression) -> Iterator[str]:
    if isinstance(target, cst.Name):
        yield target.value
    elif isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            if not isinstance(element, cst.StarredElement):
                yield from _names(element.value)


@dataclass(frozen=True)
class BatchTensor:
    """A name bound to one tensor of a batch, and where a move of it goes."""

    name: str
    anchor: cst.BaseStatement  # the statement the move is inserted next to
    after: bool  # after `anchor` (an unpacking `x, y = batch`), else before it


def batch_tensors(module: TorchModule, loop: Loop, rebound: bool = False) -> dict[str, BatchTensor]:
    """Names bound to the tensors of each batch, bound nowhere else in the loop: unpacked
    by the loop target (`for x, y in loader`), or by a top-level `x, y = batch` of a
    single-name target. A single-name target itself may be a dict or a list: not
    included. With `rebound`, names also bound elsewhere in the loop are kept."""
    if not isinstance(loop.node, cst.For) or not isinstance(loop.node.body, cst.IndentedBlock):
        return {}
    body = loop.node.body.body
    out: dict[str, BatchTensor] = {}
    singles: set[str] = set()
    for target in loader_targets(module, loop):
        if isinstance(target, (cst.Tuple, cst.List)):
            for name in _names(target):
                if rebound or name not in loop.bound:
                    out[name] = BatchTensor(name, body[0], False)
        elif isinstance(target, cst.Name) and (rebound or target.value not in loop.bound):
            singles.add(target.value)
    for statement in body:
        if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1):
            continue
        assign = statement.body[0]
        if (
            isinstance(assign, cst.Assign)
            and len(assign.targets) == 1
            and isinstance(assign.targets[0].target, (cst.Tuple, cst.List))
            and isinstance(assign.value, cst.Name)
            and assign.value.value in singles
        ):
            for name in _names(assign.targets[0].target):
                if rebound or loop.bound.get(name) == 1:
                    out[name] = BatchTensor(name, statement, True)
    return out


def available(module: TorchModule, expr: cst.BaseExpression | None, loop: Loop) -> bool:
    """Every name in `expr` is bound where the loop runs (imported, module-level, or in
    the loop's function)."""
    if expr is None or isinstance(expr, (cst.SimpleString, cst.Integer)):
        return True
    if isinstance(expr, cst.Attribute):
        return available(module, expr.value, loop)
    if isinstance(expr, cst.Call):
        return available(module, expr.func, loop) and all(
            available(module, a.value, loop) for a in expr.args
        )
    if isinstance(expr, cst.IfExp):
        return all(available(module, e, loop) for e in (expr.test, expr.body, expr.orelse))
    if not isinstance(expr, cst.Name):
        return False
    name = expr.value
    if name in module.aliases or name in ("True", "False", "None"):
        return True
    fn = loop.ctx.function
    if fn is not None and any(p.name.value == name for p in fn.params.params):
        return True
    return any(
        a.ctx.function is fn or (a.ctx.function is None and a.ctx.class_ is None)
        for a in module.assigned(name)
    )


def _source_order(module: TorchModule) -> dict[int, int]:
    """Call node id -> its rank in source order (calls are recorded in traversal order)."""
    cached = module.__dict__.get("_tl101_call_order")
    if cached is None:
        cached = module.__dict__["_tl101_call_order"] = {
            id(c.node): i for i, c in enumerate(module.calls)
        }
    return cached


def device_move(module: TorchModule, model: ModelSite, loop: Loop) -> CallSite | None:
    """An unconditional move of `model` to a non-CPU device, made before the loop when
    both are in the same function, whose device expression is visible in `loop`."""
    order = _source_order(module)
    for move in model.moves:
        found = module.move_device(move)
        if found is None or found[0] == "cpu":
            continue
        if not all(cond in loop.ctx.ifs for cond in move.ctx.ifs):
            continue  # `if use_cuda: model.cuda()`: the inputs would need the same test
        same_scope = move.ctx.function is loop.ctx.function and loop.calls
        if same_scope and order[id(move.node)] > order[id(loop.calls[0].node)]:
            continue  # trained on the CPU first, moved afterwards
        if available(module, found[1], loop):
            return move
    return None


PARALLEL_WRAPPERS = ("torch.nn.DataParallel", "torch.nn.parallel.DistributedDataParallel")


def scatters_inputs(module: TorchModule, site: ModelSite) -> bool:
    """The name is (also) bound to a DataParallel/DistributedDataParallel wrapper, which
    moves CPU inputs to its devices itself: not provably a crash."""
    for a in module.assigned(site.name):
        value = a.value
        while (
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Attribute)
            and value.func.attr.value in ("to", "cuda")
        ):
            value = value.func.value  # `DataParallel(net).cuda()`
        if isinstance(value, cst.Call) and module.resolve(value.func) in PARALLEL_WRAPPERS:
            return True
    return False


def move_statement(module: TorchModule, name: str, move: CallSite, non_blocking: bool) -> str:
    found = module.move_device(move)
    assert found is not None
    device = found[1]
    args = [module.module.code_for_node(device)] if device is not None else []
    if non_blocking:
        args.append("non_blocking=True")
    method = "cuda" if move.method == "cuda" else "to"
    return f"{name} = {name}.{method}({', '.join(args)})\n"


def is_loss(module: TorchModule, call: CallSite) -> bool:
    if call.qualname is not None and call.qualname.startswith("torch.nn.functional."):
        return True
    site = module.model_for_call(call)
    qualname = site.construction.qualname if site is not None else None
    return bool(qualname and qualname.startswith("torch.nn.") and qualname.endswith("Loss"))


HOST_METHODS = frozenset({"cpu", "item", "tolist", "numpy"})
Origin = tuple[ModelSite, CallSite | None]  # the model on a device, and its move


class _DeviceFlow(cst.CSTVisitor):
    """Walks a loop body in order: which values live on the model's device (its outputs
    and what is computed from them), and which batch tensors meet them (as arguments of
    the model, of a loss with such a value, or as the other operand of a comparison or
    an arithmetic operation with one)."""

    def __init__(
        self,
        module: TorchModule,
        calls: dict[int, CallSite],
        on_device: dict[int, Origin],
        batch: dict[str, BatchTensor],
    ) -> None:
        super().__init__()
        self.module = module
        self.calls = calls
        self.on_device = on_device
        self.batch = batch
        self.device_names: dict[str, Origin] = {}
        self.needs: dict[str, tuple[cst.Name, Origin]] = {}

    def origin(self, node: cst.BaseExpression) -> Origin | None:
        """The model whose device `node` is computed on, if provably any."""
        if isinstance(node, cst.Name):
            return self.device_names.get(node.value)
        if isinstance(node, cst.Call):
            found = self.on_device.get(id(node))
            if found is not None:
                return found
            func = node.func
            if isinstance(func, cst.Attribute):
                if func.attr.value in HOST_METHODS or func.attr.value == "to":
                    return None
                found = self.origin(func.value)
                if found is not None:
                    return found
            for arg in node.args:
                found = self.origin(arg.value)
                if found is not None:
                    return found
            return None
        if isinstance(node, (cst.Attribute, cst.Subscript)):
            return self.origin(node.value)
        if isinstance(node, cst.UnaryOperation):
            return self.origin(node.expression)
        if isinstance(node, cst.BinaryOperation):
            return self.origin(node.left) or self.origin(node.right)
        return None

    def _meet(self, operands: list[cst.BaseExpression], origin: Origin) -> None:
        for operand in operands:
            if isinstance(operand, cst.Name) and operand.value in self.batch:
                self.needs.setdefault(operand.value, (operand, origin))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def leave_Assign(self, original_node: cst.Assign) -> None:
        found = self.origin(original_node.value)
        for target in original_node.targets:
            for name in _names(target.target):
                if found is not None:
                    self.device_names[name] = found
                else:
                    self.device_names.pop(name, None)

    def visit_Call(self, node: cst.Call) -> None:
        if any(a.star for a in node.args):
            return
        args = [a.value for a in node.args]
        found = self.on_device.get(id(node))
        if found is None:
            call = self.calls.get(id(node))
            if call is None or not is_loss(self.module, call):
                return
            found = next((o for o in map(self.origin, args) if o is not None), None)
        if found is not None:
            self._meet(args, found)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        operands = [node.left, *(c.comparator for c in node.comparisons)]
        found = next((o for o in map(self.origin, operands) if o is not None), None)
        if found is not None:
            self._meet(operands, found)

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        found = self.origin(node.left) or self.origin(node.right)
        if found is not None:
            self._meet([node.left, node.right], found)


def unmoved_batch_tensors(
    module: TorchModule, loop: Loop, on_device: dict[int, Origin]
) -> tuple[dict[str, BatchTensor], dict[str, tuple[cst.Name, Origin]]]:
    """The loop's batch tensors with no `.to`/`.cuda` on them, and those of them that
    meet a value on the device of a model in `on_device` (call node id -> origin)."""
    moved = {
        dotted_name(c.receiver)
        for c in loop.calls
        if c.method in ("to", "cuda") and c.receiver is not None
    }
    batch = {n: b for n, b in batch_tensors(module, loop).items() if n not in moved}
    if not batch or not on_device or not isinstance(loop.node.body, cst.IndentedBlock):
        return batch, {}
    flow = _DeviceFlow(module, {id(c.node): c for c in loop.calls}, on_device, batch)
    for statement in loop.node.body.body:
        walk(statement, flow)  # a read-only walk of the loop body only
    return batch, flow.needs


class InputNotOnDevice(Rule):
    code = "TL101"
    name = "input-not-on-device"
    fix_safety = FixSafety.SAFE
    tokens = ("DataLoader",)

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        if module.managed:
            return
        for loop in module.loops:
            if not loop.loaders or not isinstance(loop.node, cst.For):
                continue
            on_device: dict[int, Origin] = {}
            for call in loop.calls:
                site = module.model_for_call(call)
                if site is None or scatters_inputs(module, site):
                    continue
                move = device_move(module, site, loop)
                if move is not None:
                    on_device[id(call.node)] = (site, move)
            if not on_device:
                continue
            batch, needs = unmoved_batch_tensors(module, loop, on_device)
            pinned = all(module.pins_memory(loader) for loader in loop.loaders)
            for name, tensor in batch.items():
                if name not in needs:
                    continue
                node, (site, move) = needs[name]
                assert move is not None
                code = move_statement(module, name, move, pinned)
                where = "after the unpacking" if tensor.after else "at the top of the loop"
                edit = (InsertAfter if tensor.after else InsertBefore)(
                    tensor.anchor, statements(code)
                )
                yield self.diagnostic(
                    node,
                    f"`{name}` comes from the DataLoader on the CPU but `{site.name}` was moved "
                    f"to a device: move the batch first (`{code.strip()}` {where})",
                    fix=fix(f"Move `{name}` to the model's device", Applicability.SAFE, edit),
                )
