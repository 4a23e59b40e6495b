"""What a file saves with `torch.save`: whether it writes CPU tensors (a checkpoint
read back lands on the CPU whatever device saved it), the parameters of its functions
that it saves to (a helper's `best_model_save_path`), and the paths the program saves
to, directly or through such a function of this file or another of the project."""

from __future__ import annotations

from functools import cached_property

import libcst as cst

from torchlint.semantic.builder import Facts
from torchlint.semantic.devices import Devices
from torchlint.semantic.functions import Functions
from torchlint.semantic.scopes import CallSite, Kind, Scope, Symbol
from torchlint.semantic.syntax import MISSING

SAVES = ("torch.save", "torch.serialization.save")
# Framework handlers that save checkpoints into a folder (`dirname`/`dirpath`, first).
FOLDER_SAVERS = (
    *("ignite.handlers.ModelCheckpoint", "ignite.handlers.checkpoint.ModelCheckpoint"),
    *("ignite.handlers.DiskSaver", "ignite.handlers.checkpoint.DiskSaver"),
    *("lightning.pytorch.callbacks.ModelCheckpoint", "pytorch_lightning.callbacks.ModelCheckpoint"),
)
# Methods whose result lies where their receiver's tensors lie.
KEEPS_DEVICE = frozenset({"state_dict", "detach", "clone", "contiguous", "float", "half", "eval"})


class Checkpoints:
    def __init__(self, facts: Facts, functions: Functions, devices: Devices) -> None:
        self.facts = facts
        self.functions = functions
        self.devices = devices

    @cached_property
    def saves(self) -> list[CallSite]:
        return self.facts.calls_to(*SAVES)

    @cached_property
    def saves_cpu_state(self) -> bool:
        """The script writes what it saves from the CPU: FSDP's `offload_to_cpu=True`, or a
        `torch.save` of CPU tensors (`t.cpu()`, `{k: v.cpu() for ...}`,
        `model.cpu().state_dict()`, a name bound to one of these, or a model or tensor
        moved by `.cpu()`/`.to("cpu")` earlier in the same function)."""
        if any(c.kwarg("offload_to_cpu") is not MISSING for c in self.facts.calls):
            return True
        return any(
            (saved := save.arg("obj", index=0)) is not MISSING
            and self._on_cpu(saved, save.scope, save, 0)
            for save in self.saves
        )

    def saved_parameters(self, function: cst.FunctionDef) -> tuple[str, ...]:
        """The parameters of `function` its `torch.save` calls take as the path."""
        found = []
        for save in self.saves:
            path = save.arg("f", index=1)
            if save.ctx.function is not function or not isinstance(path, cst.Name):
                continue
            symbol = save.scope.lookup(path.value)
            param = symbol.only(Kind.PARAM) if symbol is not None else None
            if param is not None and param.symbol.scope.node is function:
                found.append(path.value)
        return tuple(sorted(set(found)))

    @cached_property
    def saved_paths(self) -> list[tuple[cst.BaseExpression, Scope]]:
        """The paths the file saves to: `torch.save`'s, and those it passes for a
        parameter a function of this file or of the project saves to."""
        found = [
            (path, save.scope)
            for save in self.saves
            if (path := save.arg("f", index=1)) is not MISSING
        ]
        for call in self.facts.calls:
            target = self.functions.target(call)
            if target is not None:
                names, offset = self.saved_parameters(target.function), target.offset
                params = [p.name.value for p in _parameters(target.function)]
            else:
                external = self.functions.external(call)
                if external is None or not external[0].saves:
                    continue
                names, offset = external[0].saves, external[1]
                params = list(external[0].params)
            for name in names:
                value = _passed(call, name, params, offset)
                if value is not None:
                    found.append((value, call.scope))
        return found

    @cached_property
    def saved_folders(self) -> list[tuple[cst.BaseExpression, Scope]]:
        """The folders a framework's checkpoint handler saves into: ignite's
        `ModelCheckpoint(dirname, ...)` and `DiskSaver(dirname)`, Lightning's
        `ModelCheckpoint(dirpath=...)`."""
        found = []
        for call in self.facts.calls_to(*FOLDER_SAVERS):
            folder = call.kwarg("dirname")
            if folder is MISSING:
                folder = call.kwarg("dirpath")
            if folder is MISSING and call.positional:
                folder = call.positional[0]
            if folder is not MISSING:
                found.append((folder, call.scope))
        return found

    def _on_cpu(self, node: cst.BaseExpression, scope: Scope, save: CallSite, depth: int) -> bool:
        """The saved expression holds CPU tensors only (as far as the file shows)."""
        if depth > 4:
            return False
        if isinstance(node, (cst.DictComp, cst.ListComp, cst.SetComp, cst.GeneratorExp)):
            value = node.value if isinstance(node, cst.DictComp) else node.elt
            return self._on_cpu(value, scope, save, depth + 1)
        if isinstance(node, (cst.Dict, cst.List, cst.Tuple)):
            elements = [e for e in node.elements if isinstance(e, (cst.DictElement, cst.Element))]
            values = [e.value for e in elements]
            tensors = [v for v in values if isinstance(v, cst.Call)]
            return bool(tensors) and all(self._on_cpu(v, scope, save, depth + 1) for v in tensors)
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            if self._to_cpu(node, scope):
                return True
            if node.func.attr.value in KEEPS_DEVICE:  # `.state_dict()`, `.detach()`...
                return self._on_cpu(node.func.value, scope, save, depth + 1)
            return False
        if not isinstance(node, (cst.Name, cst.Attribute)):
            return False
        symbol = scope.lookup_expr(node)
        if symbol is None:
            return False
        moved = any(  # `model.cpu()` before `torch.save(model.state_dict(), ...)`
            c.order < save.order
            and c.ctx.function is save.ctx.function
            and self._to_cpu(c.node, c.scope)
            and _receiver_symbol(c) is symbol
            for c in self.facts.method_calls("cpu", "to")
        )
        return moved or any(
            b.kind is Kind.ASSIGN
            and b.value is not None
            and self._on_cpu(b.value, b.ctx.scope, save, depth + 1)
            for b in symbol.bindings
        )

    def _to_cpu(self, call: cst.Call, scope: Scope) -> bool:
        """`.cpu()`, or `.to(<the CPU>)`."""
        func = call.func
        if not isinstance(func, cst.Attribute):
            return False
        if func.attr.value == "cpu":
            return True
        if func.attr.value != "to" or not call.args:
            return False
        device = self.devices.classify(call.args[0].value, scope)
        return device is not None and device.is_cpu and not device.unknown_path


def _parameters(function: cst.FunctionDef) -> list[cst.Param]:
    return [*function.params.posonly_params, *function.params.params]


def _passed(call: CallSite, name: str, params: list[str], offset: int) -> cst.BaseExpression | None:
    """What a call passes for the parameter `name` (by keyword, or at its position)."""
    for arg in call.node.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    if name not in params:
        return None
    index = params.index(name) - offset
    positional = call.positional
    return positional[index] if 0 <= index < len(positional) else None


def _receiver_symbol(call: CallSite) -> Symbol | None:
    """The symbol a method call works on, through chained calls (`model.eval().cpu()`)."""
    node = call.receiver
    while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        node = node.func.value
    return call.scope.lookup_expr(node) if node is not None else None
