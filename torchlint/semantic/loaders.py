"""DataLoader sites: their arguments, the names that hold them, the loops that iterate
them (through `enumerate`/`tqdm`/`zip`, attributes on `self`, parameters and helpers that
return a loader, one level), and the loops that repeat those loops (epochs)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import libcst as cst

from torchlint.semantic.builder import Facts
from torchlint.semantic.external import Function, Global, Uses
from torchlint.semantic.functions import Functions, given, wraps_items
from torchlint.semantic.loader_classes import DATALOADER, class_of_call
from torchlint.semantic.portable import Value
from torchlint.semantic.reaching import built_after, replaced
from torchlint.semantic.scopes import (
    Binding,
    CallSite,
    Kind,
    Loop,
    Scope,
    Symbol,
    unpacked_into,
)
from torchlint.semantic.spreads import Spreads
from torchlint.semantic.syntax import MISSING, argument, constant_index
from torchlint.semantic.values import Values
from torchlint.settings import LoaderFactory

# Positional parameters of torch.utils.data.DataLoader, in order.
DATALOADER_PARAMS = (
    "dataset",
    "batch_size",
    "shuffle",
    "sampler",
    "batch_sampler",
    "num_workers",
    "collate_fn",
    "pin_memory",
    "drop_last",
    "timeout",
    "worker_init_fn",
    "multiprocessing_context",
    "generator",
)
MAX_DEPTH = 4


@dataclass(eq=False)
class DataLoaderSite:
    """A DataLoader built in this file, or a call of a loader factory the project's
    knowledge names (`factory`: its arguments are the factory's, read through the entry)."""

    call: CallSite
    index: int  # its rank among the DataLoaders of the file (a factory call: after them)
    symbols: list[Symbol] = field(default_factory=list)  # names/attributes holding it
    loops: list[Loop] = field(default_factory=list)  # `for` loops iterating it
    # `DataLoader(ds, **kwargs)` where every key `kwargs` may get is visible in the file
    # (dict literals, `dict(...)`, `kwargs.update(...)`): those arguments; else None.
    spread: dict[str, cst.BaseExpression] | None = None
    maybe: frozenset[str] = frozenset()  # keys of `spread` set on some paths only
    # A framework trains on it (a Lightning `train_dataloader` hook returns it, or
    # `trainer.fit` is given it), starting its workers at `starts` (see frameworks.py).
    trained_by_framework: bool = False
    starts: list[CallSite] = field(default_factory=list)
    outside: Uses | None = None  # what the project's other files do with it
    factory: LoaderFactory | None = None
    # Built by a DataLoader subclass that iterates its own way (`loader_classes.py`).
    own_iteration: bool = False

    def passes(self, name: str) -> bool:
        """Every path passes parameter `name` (as an argument, or in the `**` dict)."""
        if self.factory is not None:
            return self.arg(name) is not MISSING
        if argument(self.call.node, name, DATALOADER_PARAMS) is not MISSING:
            return True
        return self.spread is not None and name in self.spread and name not in self.maybe

    @property
    def bound_to(self) -> str | None:
        return self.symbols[0].name if self.symbols else None

    def arg(self, name: str) -> cst.BaseExpression:
        """The argument for parameter `name`: keyword, positional, or a key of the `**`
        dict it is built with; else MISSING. A factory call: the argument for the
        factory's parameter its entry names for `name`, MISSING where none is named."""
        if self.factory is not None:
            where = self.factory.parameter(name)
            return MISSING if where is None else given(self.call.node, where)
        found = argument(self.call.node, name, DATALOADER_PARAMS)
        if found is MISSING and self.spread is not None:
            return self.spread.get(name, MISSING)
        return found

    def argument_known(self, name: str) -> bool:
        """What the call says of parameter `name` is what the loader gets: not `opaque`,
        and a DataLoader, or a factory whose entry names the parameter and a call that
        passes it (left out, the factory's own default holds, which we cannot read)."""
        if self.opaque:
            return False
        return self.factory is None or self.arg(name) is not MISSING

    def spelled(self, name: str, value: str) -> str:
        """`name=value` as the call says it: a factory call with the factory's keyword,
        or the value as the argument at the position its entry gives."""
        where = self.factory.parameter(name) if self.factory is not None else name
        return f"`{value}` (argument {where})" if isinstance(where, int) else f"`{where}={value}`"

    @property
    def opaque(self) -> bool:
        """Built from `*args`, or `**kwargs` we cannot read: any argument may be set where
        we cannot see."""
        node = self.call.node
        if any(a.star == "*" for a in node.args):
            return True
        return any(a.star == "**" for a in node.args) and self.spread is None

    @property
    def feeds_training(self) -> bool:
        """Some loop over it trains (a backward pass and an optimizer step per batch),
        here or in another file of the project."""
        return any(loop.is_training for loop in self.loops) or bool(
            self.outside and self.outside.trains
        )

    @property
    def trains(self) -> bool:
        """A training loop of this file, or a framework, trains on its batches."""
        return self.feeds_training or self.trained_by_framework


@dataclass(eq=False)
class Elsewhere:
    """A DataLoader another file of the project builds and passes or returns to this one:
    where it is built (`ref`) and whether it pins memory."""

    ref: str
    pinned: bool
    symbols: list[Symbol] = field(default_factory=list)
    loops: list[Loop] = field(default_factory=list)


Loader = DataLoaderSite | Elsewhere


class Loaders:
    def __init__(self, facts: Facts, functions: Functions, values: Values) -> None:
        self.facts = facts
        self.functions = functions
        self.values = values
        self.sites: list[DataLoaderSite] = []
        self._by_call: dict[int, DataLoaderSite] = {}
        self._by_symbol: dict[int, list[Loader]] = {}
        self._elsewhere: dict[str, Elsewhere] = {}  # loaders of other files, by ref
        constructed = [(c, False) for c in facts.calls_by_qualname.get(DATALOADER, ())]
        for call in facts.calls:  # DataLoader subclasses, after DataLoader itself
            subclass = class_of_call(call, facts, functions.env)
            if subclass is not None:
                constructed.append((call, subclass.own_iteration))
        for call, own_iteration in constructed:
            site = DataLoaderSite(call, len(self.sites), own_iteration=own_iteration)
            site.outside = functions.env.uses(f"#{site.index}")
            self._by_call[id(call.node)] = site
            self.sites.append(site)
        # The calls of loader factories the project's knowledge names, numbered after the
        # DataLoaders by the call's rank among the file's calls.
        self.made: list[DataLoaderSite] = []
        for rank, call in enumerate(facts.calls if functions.loader_factories else ()):
            factory = functions.entry(call.node.func, call.scope)
            if isinstance(factory, LoaderFactory):
                site = DataLoaderSite(call, len(self.sites) + rank, factory=factory)
                site.outside = functions.env.uses(f"#{site.index}")
                self._by_call[id(call.node)] = site
                self.made.append(site)
        dicts = Spreads(facts)
        for site in self.sites:
            spreads = [a.value for a in site.call.node.args if a.star == "**"]
            if spreads:
                keys = dicts.keys(spreads, site.call.scope, site.call.node)
                if keys is not None:
                    site.spread, site.maybe = keys.values, frozenset(keys.maybe)
        for b in facts.bindings:  # the names holding each loader
            if b.kind is Kind.ASSIGN and isinstance(b.value or b.source, cst.Call):
                self._of_symbol(b.symbol, 0)
        for loop in facts.loops:
            if isinstance(loop.node, cst.For):
                for it in self.iterables(loop.node.iter, loop.ctx.scope):
                    walked = self.of(it, loop.ctx.scope)
                    name = loop.ctx.scope.lookup_expr(it)
                    calls = [w.call for w in walked if isinstance(w, DataLoaderSite)]
                    for one in walked:
                        built = one.call if isinstance(one, DataLoaderSite) else None
                        if built is None or not replaced(built, calls, loop, name):
                            self._iterated(one, loop)
        # `batch = next(it)` with `it = iter(loader)` in a loop: that loop takes a batch from
        # the loader each time round. (`next(iter(loader))` draws one batch from a fresh
        # iterator: a sample, not a stream of batches.)
        for call in facts.calls_by_qualname.get("next", ()):
            if call.ctx.loops and call.node.args and not call.node.args[0].star:
                for held in self.iterator_of(call.node.args[0].value, call.scope):
                    self._iterated(held, call.ctx.loops[-1])

    def iterables(
        self, node: cst.BaseExpression, scope: Scope, _depth: int = 0
    ) -> list[cst.BaseExpression]:
        """What a `for` really walks, through enumerate/tqdm/iter/zip and generators
        that hand on the items of an argument (`metric_logger.log_every(loader, 10)`, of
        this file or of another file of the project), and names bound once to one of
        those (`pbar = tqdm(loader)`, then `for x, y in pbar:`)."""
        if isinstance(node, cst.Name) and _depth <= MAX_DEPTH:
            held = self.wrappers_held(node, scope)
            if held:
                return [x for h in held for x in self.iterables(*h, _depth + 1)]
        if not isinstance(node, cst.Call) or not node.args or _depth > MAX_DEPTH:
            return [node]
        name = scope.resolve(node.func)
        if wraps_items(name) and not node.args[0].star:
            return self.iterables(node.args[0].value, scope, _depth + 1)
        if name == "zip":
            return [x for a in node.args for x in self.iterables(a.value, scope, _depth + 1)]
        given = self.handed_on(node, scope)
        return [node] if given is None else self.iterables(given, scope, _depth + 1)

    def wrappers_held(self, node: cst.Name, scope: Scope) -> list[tuple[cst.Call, Scope]]:
        """The wrapper calls a name holds (`pbar = tqdm(loader)`): each of its bindings is
        a plain assignment of a call to enumerate/tqdm/iter/zip or a generator handing on
        an argument's items; one that wraps the name itself (`pbar = enumerate(loader)`,
        then `if rank == 0: pbar = tqdm(pbar)`) adds nothing to the others. [] for a name
        bound to anything else: left to `of`."""
        symbol = scope.lookup(node.value)
        if symbol is None or not symbol.bindings:
            return []
        held = []
        for binding in symbol.bindings:
            value = binding.value
            if binding.kind is not Kind.ASSIGN or not isinstance(value, cst.Call) or not value.args:
                return []
            where = binding.ctx.scope
            name = where.resolve(value.func)
            if not wraps_items(name) and name != "zip" and self.handed_on(value, where) is None:
                return []
            first = value.args[0].value
            if not (isinstance(first, cst.Name) and where.lookup(first.value) is symbol):
                held.append((value, where))
        return held

    def pins_memory(self, loader: Loader) -> bool:
        """`pin_memory=True` (also a constant, an option or an environment variable that
        is True by default), or pinned whenever an accelerator is there to copy to (as
        another file of the project says, for a loader built there)."""
        if isinstance(loader, Elsewhere):
            return loader.pinned
        value, scope = loader.arg("pin_memory"), loader.call.scope
        if value is MISSING:
            return False
        if pinning(value, scope):
            return True
        found = self.values.by_default(value, scope)
        return found is not None and found.value is True

    def handed_on(self, node: cst.Call, scope: Scope) -> cst.BaseExpression | None:
        """The argument whose items a generator call hands on (see `iterables`)."""
        call = self.functions.site(node)
        if call is None:
            return None
        target = self.functions.target(call)
        if target is not None:
            index, offset = self.functions.yields(target.function), target.offset
        else:
            external = self.functions.external(call)
            if external is None:
                return None
            index, offset = external[0].yields, external[1]
        position = index - offset if index is not None else -1
        args = node.args
        if 0 <= position < len(args) and not any(a.star or a.keyword for a in args[: position + 1]):
            return args[position].value
        return None

    @cached_property
    def _iters(self) -> dict[int, list[CallSite]]:
        """id(site) -> the `iter(...)` calls of the loader."""
        found: dict[int, list[CallSite]] = {}
        for call in self.facts.calls_by_qualname.get("iter", ()):
            args = call.node.args
            if len(args) == 1 and not args[0].star:
                for site in self.of(args[0].value, call.scope):
                    found.setdefault(id(site), []).append(call)
        return found

    @staticmethod
    def _iterated(site: Loader, loop: Loop) -> None:
        if isinstance(site, DataLoaderSite) and built_after(site.call, loop):
            return
        if loop not in site.loops:
            site.loops.append(loop)
            loop.loaders.append(site)

    def iterator_of(self, node: cst.BaseExpression, scope: Scope) -> list[Loader]:
        """The loaders a name bound to `iter(loader)` walks."""
        symbol = scope.lookup_expr(node)
        if symbol is None:
            return []
        values = [(b.value, b.ctx.scope) for b in symbol.bindings if b.value is not None]
        found: list[Loader] = []
        for value, where in values:
            if (
                isinstance(value, cst.Call)
                and where.resolve(value.func) == "iter"
                and len(value.args) == 1
            ):
                found.extend(self.of(value.args[0].value, where))
        return found

    def of(self, node: cst.CSTNode, scope: Scope, _depth: int = 0) -> list[Loader]:
        """The loaders an expression may hold."""
        if _depth > MAX_DEPTH:
            return []
        if isinstance(node, cst.Call):
            site = self._by_call.get(id(node))
            if site is not None:
                return [site]
            given = self.values.handed_back(node, scope, None)
            if given is not None:
                return self.of(given, scope, _depth + 1)
            return self._returned(node, scope, None, _depth)
        if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Call):
            element = constant_index(node)  # `make_loader(...)[0]`: one of the tuple returned
            return [] if element is None else self._returned(node.value, scope, element, _depth)
        symbol = scope.lookup_expr(node)
        return self._of_symbol(symbol, _depth) if symbol is not None else []

    def _of_symbol(self, symbol: Symbol, depth: int) -> list[Loader]:
        key = id(symbol)
        found = self._by_symbol.get(key)
        if found is None:
            self._by_symbol[key] = []  # while computing
            found = self._by_symbol[key] = self._symbol(symbol, depth)
            for site in found:
                if symbol not in site.symbols:
                    site.symbols.append(symbol)
        return found

    def _symbol(self, symbol: Symbol, depth: int) -> list[Loader]:
        found: list[Loader] = []
        for b in symbol.bindings:
            if b.kind is Kind.ASSIGN and b.value is not None:
                found.extend(self.of(b.value, b.ctx.scope, depth + 1))
            elif b.kind is Kind.ASSIGN and isinstance(b.source, cst.Call) and len(b.path) == 1:
                # `train_loader, val_loader = make_loaders()`, `model, loader = acc.prepare(...)`
                given = self.values.handed_back(b.source, b.ctx.scope, b.path[0])
                if given is not None:
                    found.extend(self.of(given, b.ctx.scope, depth + 1))
                else:
                    found.extend(
                        self._returned(b.source, b.ctx.scope, b.path[0], depth, unpacked_into(b))
                    )
            elif b.kind is Kind.PARAM:
                for value, where in self.functions.arguments(b) or ():
                    found.extend(self.of(value, where, depth + 1))
                found.extend(self.elsewhere(self.functions.passed(b)))
            elif b.kind is Kind.IMPORT and b.qualname is not None:
                export = self.functions.env.export(b.qualname)
                found.extend(self.elsewhere(export.value if isinstance(export, Global) else None))
            elif b.kind is Kind.LOOP and isinstance(b.source, (cst.Tuple, cst.List)):
                # `for loader in (train_loader, val_loader):`
                for element in b.source.elements:
                    found.extend(self.of(element.value, b.ctx.scope, depth + 1))
        return list(dict.fromkeys(found))

    def _returned(
        self,
        call: cst.Call,
        scope: Scope,
        element: int | None,
        depth: int,
        arity: int | None = None,
    ) -> list[Loader]:
        """Loaders a function of this file (or of another file of the project, or a loader
        factory the project's knowledge names) returns (the `element`-th of a tuple, of
        `arity` elements where the caller unpacks that many)."""
        factory = self.functions.entry(call.func, scope)
        if isinstance(factory, LoaderFactory):
            return self._made(call) if element is None else []
        export = self.functions.export(call.func, scope)
        if isinstance(export, Function):
            return self.elsewhere(export.returned(element, arity))
        target = self.functions.definition(call.func, scope)
        if target is None or target.kind is not Kind.DEF:
            return []
        assert isinstance(target.node, cst.FunctionDef)
        inner = self.functions.scope_of(target.node)
        found: list[Loader] = []
        for value in self.functions.returns(target.node):
            if element is not None:
                if not isinstance(value, cst.Tuple) or element >= len(value.elements):
                    continue
                if arity is not None and len(value.elements) != arity:
                    continue  # the other flag's tuple: not this caller's
                value = value.elements[element].value
            found.extend(self.of(value, inner, depth + 1))
        return found

    def _made(self, call: cst.Call) -> list[Loader]:
        """The loader one call of a loader factory returns (its site, built with the
        others)."""
        site = self._by_call.get(id(call))
        return [site] if site is not None else []

    def elsewhere(self, value: Value | None) -> list[Loader]:
        """The loaders of other files a value another file passes or returns holds."""
        if value is None:
            return []
        found: list[Loader] = []
        for ref in sorted(value.loaders):
            site = self._elsewhere.get(ref)
            if site is None:
                site = self._elsewhere[ref] = Elsewhere(ref, ref in value.pinned)
            found.append(site)
        return found

    def epoch(self, site: DataLoaderSite) -> tuple[Loop, Loop] | None:
        """(a loop over the loader, the loop that runs it again and again): a loop around
        it that does not also build the loader (a training loop first: a look at a few
        batches in `for _ in range(2):` is not an epoch), or a loop around a call of its
        function (that passes this loader, when the function receives it)."""
        built = {id(o) for o in site.call.ctx.loops}
        for loop in sorted(site.loops, key=lambda x: not x.is_training):
            outer = [o for o in loop.ctx.loops if id(o) not in built]
            if outer:
                return loop, outer[-1]
            function = loop.ctx.function
            if function is None or site.call.ctx.function is function:
                continue
            assert isinstance(loop.node, cst.For)
            scope = loop.ctx.scope
            via = [
                b
                for it in self.iterables(loop.node.iter, scope)
                if (s := scope.lookup_expr(it)) is not None and (b := s.only(Kind.PARAM))
            ]
            for caller, offset in self.functions.callers(function):
                if not caller.ctx.loops or all(id(o) in built for o in caller.ctx.loops):
                    continue
                if not via or any(self._passes(caller, offset, p, site) for p in via):
                    return loop, caller.ctx.loops[-1]
        return None

    def reiterated(self, site: DataLoaderSite) -> CallSite | None:
        """An `iter(loader)` that runs again and again: in a loop that does not also build
        the loader, or in a function called from such a loop (`next(iter(val_loader))`
        in a sampling helper the training loop calls)."""
        built = {id(o) for o in site.call.ctx.loops}
        for call in self._iters.get(id(site), ()):
            if any(id(o) not in built for o in call.ctx.loops):
                return call
            function = call.ctx.function
            if function is None or function is site.call.ctx.function:
                continue
            for caller, _ in self.functions.callers(function):
                if any(id(o) not in built for o in caller.ctx.loops):
                    return call
        return None

    def _passes(self, caller: CallSite, offset: int, param: Binding, site: DataLoaderSite) -> bool:
        index = param.index - offset if param.index is not None else None
        value = argument(caller.node, param.symbol.name, index=index)
        return value is not MISSING and site in self.of(value, caller.scope)


def pinning(value: cst.BaseExpression, scope: Scope) -> bool:
    """A `pin_memory` argument that pins: `True`, or whether an accelerator is there to
    copy to."""
    if isinstance(value, cst.Name) and value.value == "True":
        return True
    return isinstance(value, cst.Call) and scope.resolve(value.func) in (
        "torch.cuda.is_available",
        "torch.accelerator.is_available",
    )
