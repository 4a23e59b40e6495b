"""Which networks the file freezes: their parameters' `requires_grad` turned off (or
tested, as `filter(lambda p: p.requires_grad, model.parameters())` does) somewhere in
the file, so a backward pass may not compute their gradients."""

from __future__ import annotations

import libcst as cst

from torchlint.semantic.models import Model, ModelSite
from torchlint.semantic.module import TorchModule
from torchlint.semantic.scopes import Scope
from torchlint.semantic.syntax import bool_value
from torchlint.text.walk import children, descendants

PARAMETERS = ("parameters", "named_parameters")
GRAD_FLAGS = ("requires_grad", "requires_grad_")


def freezes(cls: cst.ClassDef) -> bool:
    """The class's methods set or test a `requires_grad` (their own parameters', as
    `for p in self.parameters(): p.requires_grad = False` in `__init__`)."""
    return _touches(cls)


class Frozen:
    """The networks of a file whose `requires_grad` the file sets or tests: on the
    network (`model.requires_grad_(False)`, of a submodule: `model.encoder...`), on its
    parameters in a loop or comprehension (`for p in model.parameters(): p.requires_grad
    = False`, whatever the value: a flag, a condition), in a `filter(...)` of them, or
    in a method of its class (of this file or another: `freezes`). Where the parameters
    looped over cannot be traced to a network, every network may be frozen."""

    def __init__(self, module: TorchModule) -> None:
        self.module = module
        self.sites: set[int] = set()  # ids of the models frozen
        self.unknown = False  # a freeze of parameters of an unknown origin
        self._scan(module.module, module.scope)
        for call in module.method_calls("requires_grad_"):
            arg = call.node.args[0].value if call.node.args else None
            if arg is None or bool_value(arg) is not True:
                self._owner(call.receiver, call.scope)

    def holds(self, site: Model) -> bool:
        """The file may freeze some of this network's parameters."""
        if self.unknown or id(site) in self.sites:
            return True
        if site.external is not None and site.external.frozen:
            return True
        if not isinstance(site, ModelSite):
            return False
        construction = site.construction
        cls = self.module.functions.class_scope(construction.node.func, construction.scope)
        return cls is not None and isinstance(cls.node, cst.ClassDef) and freezes(cls.node)

    def _scan(self, node: cst.CSTNode, scope: Scope) -> None:
        """Loops and comprehensions over a network's parameters that touch
        `requires_grad`, and `filter(...)` calls that test it, in every scope."""
        for child in children(node):
            if isinstance(child, (cst.FunctionDef, cst.ClassDef)):
                self._scan(child, self.module.functions.scope_of(child))
                continue
            if isinstance(child, cst.For) and _touches(child.body):
                self._parameters_of(child.iter, scope)
            elif isinstance(child, (cst.ListComp, cst.SetComp, cst.GeneratorExp)):
                if _touches(child.elt) or _touches(child.for_in):
                    self._parameters_of(child.for_in.iter, scope)
            elif _filters(child, scope):
                assert isinstance(child, cst.Call)
                for arg in child.args[1:]:
                    self._parameters_of(arg.value, scope)
            self._scan(child, scope)

    def _parameters_of(self, node: cst.BaseExpression, scope: Scope) -> None:
        """The networks whose `.parameters()` `node` iterates are frozen."""
        found = False
        for n in descendants(node):
            if not (
                isinstance(n, cst.Call)
                and isinstance(n.func, cst.Attribute)
                and n.func.attr.value in PARAMETERS
            ):
                continue
            found = True
            self._owner(n.func.value, scope)
        if not found:
            self.unknown = True  # `for p in params:`: parameters of some network

    def _owner(self, node: cst.BaseExpression | None, scope: Scope) -> None:
        """Mark the network `node` is (or a submodule of: `model.encoder`); `self` is its
        class's (`freezes`), a loop variable over parameters `_scan`'s."""
        while node is not None:
            site = self.module.models.of(node, scope)
            if site is not None:
                self.sites.add(id(site))
                return
            node = node.value if isinstance(node, cst.Attribute) else None


def _filters(node: cst.CSTNode, scope: Scope) -> bool:
    """`filter(lambda p: p.requires_grad, ...)`."""
    return (
        isinstance(node, cst.Call)
        and scope.resolve(node.func) == "filter"
        and bool(node.args)
        and _touches(node.args[0].value)
    )


def _touches(node: cst.CSTNode) -> bool:
    """`node` reads or writes a `requires_grad` attribute (or calls `requires_grad_`)."""
    return any(
        isinstance(n, cst.Attribute) and n.attr.value in GRAD_FLAGS for n in descendants(node)
    )
