"""What a `**` dict spread into a call sets (`DataLoader(ds, **kwargs)`): its keys and
values, where every way the dict gets keys is visible, and the keys set on some paths
only."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import libcst as cst

from torchlint.semantic.builder import Facts
from torchlint.semantic.scopes import CallSite, Context, Kind, Scope, Symbol
from torchlint.semantic.syntax import contains, str_value


class Spreads:
    """The `**` dicts of one file."""

    def __init__(self, facts: Facts) -> None:
        self.facts = facts

    def keys(
        self, values: list[cst.BaseExpression], scope: Scope, at: cst.CSTNode, depth: int = 0
    ) -> Keys | None:
        """The keys and values of `**` dicts, where every way they get keys is visible;
        `at` is the call they are spread into (changes under an `if` it is not in are set
        on some paths only)."""
        out = Keys()
        for value in values:
            if isinstance(value, cst.Dict):
                for element in value.elements:
                    if isinstance(element, cst.StarredDictElement):
                        inner = self.keys([element.value], scope, at, depth + 1)
                        if inner is None:
                            return None
                        out.update(inner)
                        continue
                    assert isinstance(element, cst.DictElement)
                    key = str_value(element.key)
                    if key is None:
                        return None
                    out.set(key, element.value)
            elif isinstance(value, cst.Call) and scope.resolve(value.func) == "dict":
                plain = [a for a in value.args if a.keyword is None and a.star != "**"]
                if plain and (len(plain) > 1 or plain[0] is not value.args[0] or plain[0].star):
                    return None
                for arg in value.args:
                    if arg.star == "**" or arg.keyword is None:
                        inner = self.keys([arg.value], scope, at, depth + 1)
                        if inner is None:
                            return None
                        out.update(inner)
                    else:
                        out.set(arg.keyword.value, arg.value)
            elif isinstance(value, cst.Name) and depth < 3:
                inner = self._symbol_keys(scope.lookup(value.value), at, depth)
                if inner is None:
                    return None
                out.update(inner)
            else:
                return None
        return out

    def _symbol_keys(self, symbol: Symbol | None, at: cst.CSTNode, depth: int) -> Keys | None:
        """The keys a dict name holds where it is spread: those of its assignments (one of
        which ran, for the name to exist: a key not in all of them is on some paths only),
        then of its changes."""
        if symbol is None or not symbol.bindings:
            return None
        out: Keys | None = None
        for b in symbol.bindings:
            if b.kind is not Kind.ASSIGN or b.value is None:
                return None
            inner = self.keys([b.value], b.ctx.scope, at, depth + 1)
            if inner is None:
                return None
            out = inner if out is None else out.either(inner)
        assert out is not None
        return out if self._mutations(symbol, out, at, depth) else None

    @cached_property
    def _changes(self) -> dict[int, tuple[list[CallSite], list[_ItemStore]]]:
        """id(symbol) -> the method calls on it and the `symbol[key] = v` stores (for the
        dicts loaders are built from: indexed once, not searched per loader)."""
        found: dict[int, tuple[list[CallSite], list[_ItemStore]]] = {}
        for call in self.facts.calls:
            if call.receiver is not None:
                symbol = call.scope.lookup_expr(call.receiver)
                if symbol is not None:
                    found.setdefault(id(symbol), ([], []))[0].append(call)
        for store in self.facts.item_stores:
            symbol = store[2].scope.lookup_expr(store[0].value)
            if symbol is not None:
                found.setdefault(id(symbol), ([], []))[1].append(store)
        return found

    def _mutations(self, symbol: Symbol, out: Keys, at: cst.CSTNode, depth: int) -> bool:
        """Add the keys a dict gets after it is built (`d.update(...)`, `d[key] = v`,
        `d.setdefault(key, v)`) to `out`; False when some change cannot be read."""
        calls, stores = self._changes.get(id(symbol), ([], []))
        for call in calls:
            args = call.node.args
            if call.method == "update":
                inner = self.keys([a.value for a in args], call.scope, at, depth + 1)
                if inner is None or any(a.keyword for a in args):
                    return False
                out.update(inner, maybe=_conditional(call.ctx.ifs, at))
            elif call.method == "setdefault" and len(args) == 2:
                key = str_value(args[0].value)
                if key is None:
                    return False
                if key not in out.values:
                    out.set(key, args[1].value, maybe=_conditional(call.ctx.ifs, at))
            elif call.method not in ("get", "keys", "items", "values", "copy"):
                return False
        for target, value, ctx in stores:
            index = target.slice[0].slice if len(target.slice) == 1 else None
            key = str_value(index.value) if isinstance(index, cst.Index) else None
            if key is None or value is None:
                return False
            out.set(key, value, maybe=_conditional(ctx.ifs, at))
        return True


_ItemStore = tuple[cst.Subscript, cst.BaseExpression | None, Context]


@dataclass
class Keys:
    """What a `**` dict holds: key -> value, and the keys set on some paths only."""

    values: dict[str, cst.BaseExpression] = field(default_factory=dict)
    maybe: set[str] = field(default_factory=set)

    def set(self, key: str, value: cst.BaseExpression, maybe: bool = False) -> None:
        if maybe and key not in self.values:
            self.maybe.add(key)
        elif not maybe:
            self.maybe.discard(key)
        self.values[key] = value

    def update(self, other: Keys, maybe: bool = False) -> None:
        for key, value in other.values.items():
            self.set(key, value, maybe or key in other.maybe)

    def either(self, other: Keys) -> Keys:
        """The keys of one path or the other."""
        both = set(self.values) & set(other.values)
        merged = Keys({**other.values, **self.values}, self.maybe | other.maybe)
        merged.maybe |= set(merged.values) - both
        return merged


def _conditional(ifs: Sequence[cst.If], at: cst.CSTNode) -> bool:
    """Some `if` around a change does not also hold `at`: the change is on some paths."""
    return any(not contains(if_, at) for if_ in ifs)
