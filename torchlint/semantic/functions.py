"""The functions and classes of the file, and the calls between them (one level)."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from torchlint.semantic.builder import Facts
from torchlint.semantic.facts import CallSite
from torchlint.semantic.scopes import Binding, Kind, Scope, ScopeKind, Symbol
from torchlint.semantic.syntax import MISSING, keyword


@dataclass(frozen=True)
class Target:
    """The function of this file a call runs, and how many leading parameters the call
    does not pass (1 for `self` when a method is called on an instance or a class is
    constructed)."""

    function: cst.FunctionDef
    offset: int


class Functions:
    def __init__(self, facts: Facts) -> None:
        self.facts = facts
        self._callers: dict[int, list[tuple[CallSite, int]]] | None = None
        self._targets: dict[int, Target | None] = {}

    def scope_of(self, node: cst.FunctionDef | cst.ClassDef) -> Scope:
        return self.facts.scopes[id(node)]

    def definition(self, node: cst.CSTNode, scope: Scope) -> Binding | None:
        """The `def`/`class` of this file an expression names (`train`, `self.step`,
        `Net`), when that is the name's only binding."""
        symbol = scope.lookup_expr(node)
        if symbol is None and isinstance(node, cst.Attribute):
            cls = self.instance_class(node.value, scope)
            symbol = cls.member(node.attr.value) if cls is not None else None
        return symbol.only(Kind.DEF, Kind.CLASS) if symbol is not None else None

    def class_scope(self, node: cst.CSTNode, scope: Scope) -> Scope | None:
        """The scope of the class of this file an expression names (`Net`, `self.Block`)."""
        symbol = scope.lookup_expr(node)
        found = symbol.only(Kind.CLASS) if symbol is not None else None
        return self.facts.scopes[id(found.node)] if found is not None else None

    def instance_class(self, node: cst.CSTNode, scope: Scope) -> Scope | None:
        """The class of this file whose instance `node` holds (`t = Trainer(...)`)."""
        symbol = scope.lookup_expr(node)
        if symbol is None:
            return None
        found: Scope | None = None
        for b in symbol.bindings:
            if b.kind is Kind.PARAM:
                continue
            value = b.value
            if not isinstance(value, cst.Call):
                return None
            cls = self.class_scope(value.func, b.ctx.scope)
            if cls is None or (found is not None and cls is not found):
                return None
            found = cls
        return found

    def target(self, call: CallSite) -> Target | None:
        """The function of this file that `call` runs: a function, a method called on
        `self` or on an instance of a class of this file, or `__init__` of a class."""
        key = id(call.node)
        if key in self._targets:
            return self._targets[key]
        found: Target | None = None
        binding = self.definition(call.node.func, call.scope)
        if binding is not None and binding.kind is Kind.DEF:
            assert isinstance(binding.node, cst.FunctionDef)
            owner = binding.symbol.scope
            method = owner.kind is ScopeKind.CLASS and isinstance(call.node.func, cst.Attribute)
            found = Target(binding.node, 1 if method else 0)
        elif binding is not None:
            init = self.facts.scopes[id(binding.node)].member("__init__")
            defined = init.only(Kind.DEF) if init is not None else None
            if defined is not None:
                assert isinstance(defined.node, cst.FunctionDef)
                found = Target(defined.node, 1)
        self._targets[key] = found
        return found

    def callers(self, function: cst.FunctionDef) -> list[tuple[CallSite, int]]:
        """The calls of this file that run `function`, with their offsets."""
        if self._callers is None:
            self._callers = {}
            for call in self.facts.calls:
                found = self.target(call)
                if found is not None:
                    self._callers.setdefault(id(found.function), []).append((call, found.offset))
        return self._callers.get(id(function), [])

    def arguments(self, param: Binding) -> list[tuple[cst.BaseExpression, Scope]] | None:
        """What the calls of this file pass for a parameter (its default where a call
        passes nothing), each with the scope to read it in; None when some call passes
        it where we cannot see, or nothing in the file calls the function."""
        function = param.symbol.scope.node
        if not isinstance(function, cst.FunctionDef):
            return None
        callers = self.callers(function)
        if not callers:
            return None
        name = param.symbol.name
        out: list[tuple[cst.BaseExpression, Scope]] = []
        for call, offset in callers:
            value = keyword(call.node, name)
            if value is MISSING and param.index is not None:
                index = param.index - offset
                args = call.node.args
                for i, arg in enumerate(args):
                    if arg.star:
                        return None
                    if arg.keyword is not None:
                        break
                    if i == index:
                        value = arg.value
                        break
            if value is not MISSING:
                out.append((value, call.scope))
                continue
            default = self.default(param)
            if any(a.star == "**" for a in call.node.args) or default is None:
                return None
            out.append(default)
        return out

    @staticmethod
    def default(param: Binding) -> tuple[cst.BaseExpression, Scope] | None:
        """A parameter's default, with the scope it is evaluated in (around the def)."""
        scope = param.symbol.scope.parent
        if param.source is None or scope is None:
            return None
        return param.source, scope

    def returns(self, function: cst.FunctionDef) -> list[cst.BaseExpression]:
        """The values the function returns (bare `return` and falling off excluded)."""
        return [r.value for r in self.facts.returns.get(id(function), ()) if r.value is not None]


def param_of(symbol: Symbol) -> Binding | None:
    return symbol.only(Kind.PARAM)
