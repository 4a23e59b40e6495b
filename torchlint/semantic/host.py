"""What the host already holds: tensors the file builds on the CPU on purpose, parameters
fed Python numbers, and the loops of a GPU program that run on the CPU (the CPU half of
a notebook). Reading such a value waits for no GPU."""

from __future__ import annotations

import libcst as cst

from torchlint.semantic.batches import batch_copies, numpy_value, typed_copies
from torchlint.semantic.loaders import DataLoaderSite
from torchlint.semantic.module import TorchModule
from torchlint.semantic.scopes import Binding, Kind, Loop, Scope, Symbol
from torchlint.semantic.syntax import MISSING, keyword


def cpu_loop(module: TorchModule, loop: Loop) -> bool:
    """The loop runs on the CPU: every network it calls is built in this file and kept
    there (`Placement.kept_on_cpu`), and it copies its batches to no device but the CPU."""
    calls = module.models.network_calls(loop)
    if not calls or typed_copies(module, loop):
        return False
    if not all(module.placement.to_cpu(c) for c in batch_copies(module, loop)):
        return False  # a batch copied to a device (`x.to(device)` of a CPU device is not)
    sites = [module.models.called(c) for c in calls]
    return all(s is not None and module.placement.kept_on_cpu(s) for s in sites)


def cpu_loader(module: TorchModule, loader: DataLoaderSite) -> bool:
    """Every pass over the loader runs on the CPU (`cpu_loop`), here and in the project's
    other files (`Uses.cpu`), and no framework takes its batches: pinning it or keeping
    its workers feeds no GPU."""
    outside = loader.outside
    return (
        bool(loader.loops or outside)
        and not loader.trained_by_framework
        and (outside is None or outside.cpu)
        and all(cpu_loop(module, loop) for loop in loader.loops)
    )


# Torch factories that build a tensor where `device=` says (the CPU without one).
FACTORIES = frozenset(
    f"torch.{n}"
    for n in ("zeros", "ones", "empty", "full", "rand", "randn", "randint", "arange", "tensor")
)
FROM_NUMPY = "torch.from_numpy"
MOVES = frozenset({"to", "cuda", "type", "type_as", "new_tensor", "copy_"})


def cpu_tensor(module: TorchModule, node: cst.BaseExpression, scope: Scope, depth: int = 0) -> bool:
    """A tensor the file builds on the CPU on purpose: a torch factory given
    `device="cpu"` (`torch.zeros((), device="cpu")`) or `torch.from_numpy(...)`, what a
    method or an index of one gives (`.sum()`, `[0]`; not a move), or a name every
    assignment of which is one (`+=` keeps it there). Its `.item()` waits for no GPU."""
    while isinstance(node, (cst.Call, cst.Subscript)) and depth < MAX_CPU_DEPTH:
        func = node.func if isinstance(node, cst.Call) else None
        if func is not None and module.resolve(func, scope) in (*FACTORIES, FROM_NUMPY):
            break
        if isinstance(func, cst.Attribute) and func.attr.value not in MOVES:
            node = func.value
        elif isinstance(node, cst.Subscript):
            node = node.value
        else:
            break
    if isinstance(node, cst.Call):
        qualname = module.resolve(node.func, scope)
        if qualname == FROM_NUMPY:
            return True
        device = keyword(node, "device")
        if qualname not in FACTORIES or device is MISSING:
            return False
        found = module.devices.classify(device, scope)
        return found is not None and found.is_cpu
    symbol = scope.lookup(node.value) if isinstance(node, cst.Name) else None
    if symbol is None or depth >= MAX_CPU_DEPTH:
        return False
    assigned = [b for b in symbol.bindings if b.kind is not Kind.AUGASSIGN]
    return bool(assigned) and all(
        b.kind is Kind.ASSIGN
        and b.value is not None
        and cpu_tensor(module, b.value, b.ctx.scope, depth + 1)
        for b in assigned
    )


MAX_CPU_DEPTH = 8


def fed_numbers(module: TorchModule, node: cst.BaseExpression | None, scope: Scope) -> bool:
    """`node` is a parameter every call of its function passes a Python number (a
    literal, `float(...)`, `len(...)`, an `.item()`, an optimizer's learning rate
    (`opt.param_groups[0]["lr"]`), a NumPy value): the calls of this file, or where none
    is here, those of the other files; or a value of its `**kwargs` (`for k, v in
    kwargs.items():`) every call passes so. A logger's `if isinstance(v, Tensor): v =
    v.item()` then never runs on a tensor."""
    symbol = scope.lookup(node.value) if isinstance(node, cst.Name) else None
    if symbol is None:
        return False
    params = [b for b in symbol.bindings if b.kind is Kind.PARAM]  # (`v = v.item()` aside)
    param = params[0] if params else _kwargs_item(symbol, scope)
    if param is None:
        return False
    passed = module.functions.arguments(param)
    if passed:
        return all(host_number(module, v, where) for v, where in passed)
    function = param.symbol.scope.node
    name = module.functions.local_name(function) if isinstance(function, cst.FunctionDef) else None
    return name is not None and module.env.numbers_passed(name, param.symbol.name)


def _kwargs_item(symbol: Symbol, scope: Scope) -> Binding | None:
    """The `**kwargs` parameter whose values a loop variable takes (`for k, v in
    kwargs.items():`, `for v in kwargs.values():`)."""
    loops = [b for b in symbol.bindings if b.kind is Kind.LOOP]  # (`v = v.item()` aside)
    loop = loops[0] if len(loops) == 1 else None
    source = loop.source if loop is not None else None
    if not (isinstance(source, cst.Call) and isinstance(source.func, cst.Attribute)):
        return None
    method = source.func.attr.value
    if (method, loop.path if loop is not None else None) not in (("items", (1,)), ("values", ())):
        return None
    held = scope.lookup_expr(source.func.value)
    param = held.only(Kind.PARAM) if held is not None else None
    if param is None:
        return None
    function = param.symbol.scope.node
    if not isinstance(function, cst.FunctionDef) or function.params.star_kwarg is None:
        return None
    return param if function.params.star_kwarg.name.value == param.symbol.name else None


def host_number(module: TorchModule, node: cst.BaseExpression, scope: Scope) -> bool:
    """`node` is a Python number: a literal, an `.item()`, `len(...)`, an optimizer's
    learning rate, a NumPy value."""
    if isinstance(node, (cst.Integer, cst.Float)) or numpy_value(module, node, scope):
        return True
    if isinstance(node, cst.Call):
        func = node.func
        if isinstance(func, cst.Attribute):
            return func.attr.value in ("item", "get_last_lr")
        return module.resolve(func, scope) in ("len", "round", "abs")
    while isinstance(node, cst.Subscript):
        node = node.value
    return isinstance(node, cst.Attribute) and node.attr.value == "param_groups"
