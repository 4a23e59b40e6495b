"""The functions and classes of the file, and the calls between them (one level)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property

import libcst as cst

from torchlint.semantic.builder import Facts
from torchlint.semantic.external import Class, Environment, Function
from torchlint.semantic.lattice import Device, DeviceKind, ModelKind
from torchlint.semantic.portable import Network, Value
from torchlint.semantic.scopes import Binding, CallSite, Kind, Scope, ScopeKind, Symbol
from torchlint.semantic.syntax import (
    MISSING,
    MODULE_CHAINING,
    MODULE_WRAPPERS,
    dotted_name,
    is_none,
    keyword,
    positional,
)
from torchlint.settings import Knowledge, LoaderFactory, StepFunction

MAX_DEPTH = 4
# Iterables that yield what the loader yields, one item per batch.
WRAPPERS = frozenset(
    {"enumerate", "iter", "tqdm", "tqdm.tqdm", "tqdm.auto.tqdm", "tqdm.notebook.tqdm"}
    | {"tqdm.std.tqdm", "rich.progress.track", "itertools.islice"}
)


def wraps_items(name: str | None) -> bool:
    """A call of `name` hands on the items of its first argument: `WRAPPERS`, and progress
    bars named for tqdm (ultralytics' `TQDM`, `tqdm_notebook`, a project's re-export)."""
    return name is not None and (
        name in WRAPPERS or name.rpartition(".")[2].lower().startswith("tqdm")
    )


# Launchers that run a function once per process with the rank first (ignite's
# `Parallel(...).run(fn, *args)` is matched by its method name).
SPAWNS = frozenset({"torch.multiprocessing.spawn", "torch.multiprocessing.start_processes"})


@dataclass(frozen=True)
class Target:
    """The function of this file a call runs, and how many leading parameters the call
    does not pass (1 for `self` when a method is called on an instance or a class is
    constructed)."""

    function: cst.FunctionDef
    offset: int


def known_callables(knowledge: Knowledge) -> dict[str, Function]:
    """The callables `[tool.torchlint.semantic]` names, as the functions of another file
    they stand for: what a call of each does or returns."""
    found = {
        s.name: Function(s.name, (), steps=s.step, backward=s.backward)
        for s in knowledge.step_functions
    }
    for factory in knowledge.loader_factories:
        found[factory.name] = Function(
            factory.name, (), returns=Value(loaders=frozenset({factory.name}))
        )
    for name in knowledge.model_factories:
        network = Network(ModelKind.NETWORK, cls=name)
        found[name] = Function(name, (), returns=Value(network=network))
    gpu = Device(DeviceKind.ACCELERATOR, cpu_path=True)  # a GPU where there is one
    for name in knowledge.device_functions:
        found[name] = Function(name, (), returns=Value(device=gpu))
    return found


def given(call: cst.Call, where: str | int) -> cst.BaseExpression:
    """The argument a call passes by keyword `where`, or at position `where`; else
    MISSING."""
    if isinstance(where, str):
        return keyword(call, where)
    args = positional(call)
    return args[where] if where < len(args) else MISSING


# Loader factories of libraries, known as a project's `loader-factories` are: ignite's
# `idist.auto_dataloader(dataset, **DataLoader's keywords)` pins memory on CUDA itself.
IGNITE_LOADERS = tuple(
    LoaderFactory(name, batch_size="batch_size", workers="num_workers")
    for name in ("ignite.distributed.auto_dataloader", "ignite.distributed.auto.auto_dataloader")
)


class Functions:
    def __init__(self, facts: Facts, env: Environment, knowledge: Knowledge | None = None) -> None:
        self.facts = facts
        self.env = env
        knowledge = knowledge or Knowledge()
        if facts.imports_any("ignite.distributed"):
            factories = knowledge.loader_factories + IGNITE_LOADERS
            knowledge = dataclasses.replace(knowledge, loader_factories=factories)
        self._known = known_callables(knowledge)
        self._entries: dict[str, StepFunction | LoaderFactory] = {
            s.name: s for s in knowledge.step_functions
        }
        self._entries.update((f.name, f) for f in knowledge.loader_factories)
        self.loader_factories = bool(knowledge.loader_factories)  # some call may be one
        self._callers: dict[int, list[tuple[CallSite, int]]] | None = None
        self._targets: dict[int, Target | None] = {}
        self._names: dict[int, str] | None = None
        self._external: dict[int, tuple[Function, int] | None] = {}
        self._exports: dict[int, Class | Function | None] = {}
        self._instances: dict[int, Class | None] = {}
        self._qualnames: dict[int, str | None] = {}

    def scope_of(self, node: cst.FunctionDef | cst.ClassDef) -> Scope:
        return self.facts.scopes[id(node)]

    def site(self, call: cst.CSTNode | None) -> CallSite | None:
        """The recorded call site of a call expression (None for any other node)."""
        return self._sites.get(id(call))

    @cached_property
    def _sites(self) -> dict[int, CallSite]:
        return {id(c.node): c for c in self.facts.calls}

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
            found = self._method(self.facts.scopes[id(binding.node)], "__init__")
        elif (cls := self.instance_class(call.node.func, call.scope)) is not None:
            found = self._method(cls, "__call__")  # `compute_loss(pred, y)`
        self._targets[key] = found
        return found

    @staticmethod
    def _method(cls: Scope, name: str) -> Target | None:
        member = cls.member(name)
        defined = member.only(Kind.DEF) if member is not None else None
        if defined is None:
            return None
        assert isinstance(defined.node, cst.FunctionDef)
        return Target(defined.node, 1)

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
            return self._launched(function, param)
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

    def _launched(
        self, function: cst.FunctionDef, param: Binding
    ) -> list[tuple[cst.BaseExpression, Scope]] | None:
        """What launchers of this file hand a function they run once per process, rank
        first: `mp.spawn(main_worker, nprocs=n, args=(n, args))`, ignite's
        `parallel.run(training, config)`: the arguments after the function (or in
        `args=`) are its parameters after the first. None where nothing launches it."""
        index, params = param.index, function.params.params
        launches = self._launches.get(id(function))
        if not index or not launches or isinstance(function.params.star_arg, cst.Param):
            return None
        out: list[tuple[cst.BaseExpression, Scope]] = []
        for call, handed in launches:
            if handed is None or len(handed) != len(params) - 1:
                return None
            out.append((handed[index - 1], call.scope))
        return out

    @cached_property
    def _launches(self) -> dict[int, list[tuple[CallSite, list[cst.BaseExpression] | None]]]:
        """id(def) -> the launcher calls of this file given it first, and what each hands
        it (`_handed`)."""
        found: dict[int, list[tuple[CallSite, list[cst.BaseExpression] | None]]] = {}
        for call in self.facts.calls:
            args = call.node.args
            if not args or args[0].keyword is not None or args[0].star:
                continue
            if call.qualname not in SPAWNS and call.method != "run":
                continue
            target = self.definition(args[0].value, call.scope)
            if target is not None and isinstance(target.node, cst.FunctionDef):
                handed = _handed(call.node, call.qualname in SPAWNS)
                found.setdefault(id(target.node), []).append((call, handed))
        return found

    @staticmethod
    def default(param: Binding) -> tuple[cst.BaseExpression, Scope] | None:
        """A parameter's default, with the scope it is evaluated in (around the def)."""
        scope = param.symbol.scope.parent
        if param.source is None or scope is None:
            return None
        return param.source, scope

    # -- the rest of the program ---------------------------------------------------------

    def local_name(self, function: cst.CSTNode) -> str | None:
        """The dotted name other files know a function (or class) of this file by:
        "train", "Trainer", "Trainer.fit"; None for one nested in a function."""
        if self._names is None:
            self._names = {}
            module = self.facts.scope
            for symbol in module.symbols.values():
                for b in symbol.bindings:
                    if b.kind in (Kind.DEF, Kind.CLASS):
                        self._names[id(b.node)] = symbol.name
                    if b.kind is Kind.CLASS:
                        cls = self.facts.scopes[id(b.node)]
                        for member in cls.symbols.values():
                            for m in member.bindings:
                                if m.kind is Kind.DEF:
                                    self._names[id(m.node)] = f"{symbol.name}.{member.name}"
        return self._names.get(id(function))

    def named(self) -> list[cst.FunctionDef]:
        """The functions other files can call: module-level ones and methods."""
        self.local_name(self.facts.module)  # builds the names
        assert self._names is not None
        return [
            scope.node
            for scope in self.facts.scopes.values()
            if isinstance(scope.node, cst.FunctionDef) and id(scope.node) in self._names
        ]

    def passed(self, param: Binding) -> Value | None:
        """What the other files of the project pass for a parameter of this file."""
        function = param.symbol.scope.node
        name = self.local_name(function) if isinstance(function, cst.FunctionDef) else None
        return self.env.parameter(name, param.symbol.name) if name is not None else None

    def always_passed(self, param: Binding) -> bool:
        """No call of this file runs the function, and every call of the project's other
        files passes the parameter: its default is not what it gets."""
        function = param.symbol.scope.node
        if not isinstance(function, cst.FunctionDef) or self.callers(function):
            return False
        name = self.local_name(function)
        return name is not None and self.env.always_passed(name, param.symbol.name)

    def unseen(self, param: Binding) -> bool:
        """What a parameter receives is anybody's guess: no call of this file passes it,
        and no call of the project tells anything of it (a library function, or a file
        checked alone)."""
        function = param.symbol.scope.node
        if not isinstance(function, cst.FunctionDef) or self.callers(function):
            return False
        return self.passed(param) is None

    def export(self, node: cst.CSTNode, scope: Scope) -> Class | Function | None:
        """The class or function of another file of the project an expression names, or
        a callable the project's knowledge names (`told`)."""
        key = id(node)  # a node is read in one scope
        if key not in self._exports:
            qualname = scope.resolve(node)
            found = (
                None if qualname is None else self._known.get(qualname) or self.env.export(qualname)
            )
            self._exports[key] = found if isinstance(found, (Class, Function)) else None
        return self._exports[key]

    def entry(self, node: cst.CSTNode, scope: Scope) -> StepFunction | LoaderFactory | None:
        """The step function or loader factory of the project's knowledge an expression
        names (what its arguments mean)."""
        qualname = scope.resolve(node)
        return self._entries.get(qualname) if qualname is not None else None

    def instance_export(self, node: cst.CSTNode, scope: Scope, _depth: int = 0) -> Class | None:
        """The class of another file whose instance `node` holds: built here from an
        imported class (`scaler = NativeScaler()`), or passed in by another file."""
        if _depth > MAX_DEPTH:
            return None
        if isinstance(node, cst.Call):
            found = self.export(node.func, scope)
            return found if isinstance(found, Class) else None
        symbol = scope.lookup_expr(node)
        if symbol is None or not symbol.bindings:
            return None
        key = id(symbol)
        if key not in self._instances:
            self._instances[key] = None  # while computing (a name defined through itself)
            self._instances[key] = self._symbol_instance(symbol, _depth)
        return self._instances[key]

    def _symbol_instance(self, symbol: Symbol, _depth: int) -> Class | None:
        classes: dict[str, Class] = {}
        for b in symbol.bindings:
            if b.kind is Kind.ASSIGN and b.value is not None:
                found = self.instance_export(b.value, b.ctx.scope, _depth + 1)
            elif b.kind is Kind.PARAM:
                found = self._param_instance(b, _depth)
            else:
                return None
            if found is None:
                return None
            classes[found.ref] = found
        return next(iter(classes.values())) if len(classes) == 1 else None

    def _param_instance(self, param: Binding, depth: int) -> Class | None:
        passed = self.arguments(param)
        if passed:
            classes = {
                c.ref: c
                for v, where in passed
                if (c := self.instance_export(v, where, depth + 1)) is not None
            }
            return next(iter(classes.values())) if len(classes) == 1 else None
        value = self.passed(param)
        if value is None or value.instance is None:
            return None
        found = self.env.export(value.instance)
        return found if isinstance(found, Class) else None

    def external(self, call: CallSite) -> tuple[Function, int] | None:
        """The function of another file of the project that `call` runs, and how many
        leading parameters the call passes implicitly (1: the instance): an imported
        function, a class's `__init__`, a method of an instance of an imported class, or
        its `__call__`."""
        key = id(call.node)
        if key in self._external:
            return self._external[key]
        found: tuple[Function, int] | None = None
        export = self.export(call.node.func, call.scope)
        if isinstance(export, Function):
            found = (export, 0)
        elif isinstance(export, Class):
            init = self.member(export, "__init__")
            found = (init, 1) if init is not None else None
        elif self.target(call) is None:
            func = call.node.func
            if isinstance(func, cst.Attribute):
                cls, method = self.instance_export(func.value, call.scope), func.attr.value
            else:
                cls, method = self.instance_export(func, call.scope), "__call__"
            function = self.member(cls, method) if cls is not None else None
            found = (function, 1) if function is not None else None
        self._external[key] = found
        return found

    def method_called(self, call: CallSite) -> str | None:
        """`ema.update(...)` on an instance of a class another module of the project
        defines: the method's qualified name as imported here
        ("utils.torch_utils.ModelEMA.update"), for linking to find whatever the class's
        file tells of it (nothing is asked here)."""
        func = call.node.func
        if not isinstance(func, cst.Attribute):
            return None
        cls = self.instance_qualname(func.value, call.scope)
        return f"{cls}.{func.attr.value}" if cls is not None else None

    def added_to(
        self, node: cst.BaseExpression, scope: Scope
    ) -> list[tuple[cst.BaseExpression, Scope]]:
        """What calls in `scope` add to the list a name holds (`trans.insert(0, x)`,
        `.append(x)`, `.extend(xs)`): the arguments, with their scope."""
        name = dotted_name(node)
        if name is None:
            return []
        return [
            (a.value, c.scope)
            for method in ("append", "insert", "extend")
            for c in self.facts.calls_by_method.get(method, ())
            if c.scope is scope and dotted_name(c.receiver) == name
            for a in c.node.args
        ]

    def instance_called(self, call: CallSite) -> str | None:
        """`compute_loss(pred, y)` calling an instance of a class another module of the
        project defines: its `__call__`'s qualified name, as `method_called` names one."""
        func = call.node.func
        if not isinstance(func, (cst.Name, cst.Attribute)):
            return None
        cls = self.instance_qualname(func, call.scope)
        return f"{cls}.__call__" if cls is not None else None

    def instance_qualname(self, node: cst.CSTNode, scope: Scope, _depth: int = 0) -> str | None:
        """The qualified name of the class of another module of the project whose
        instance `node` holds: every binding of the name (a local, `self.ema`) is a call
        of that class, or such a call or None (`ema = ModelEMA(model) if rank == 0 else
        None`, `self.ema = None` until it is built), through `.cuda()` and `DDP(...)`
        (`model = DDP(model)`); a parameter, what the calls of the file pass. Read off the
        imports alone."""
        if _depth > MAX_DEPTH:
            return None
        node = _peeled(node, scope)
        if isinstance(node, cst.Call):
            qualname = scope.resolve(node.func)
            known = qualname is not None and self.env.knows(qualname)
            return qualname if known and self.definition(node.func, scope) is None else None
        if isinstance(node, cst.IfExp):
            found = {
                self.instance_qualname(n, scope, _depth + 1)
                for n in (node.body, node.orelse)
                if not is_none(n)
            }
            return found.pop() if len(found) == 1 else None
        symbol = scope.lookup_expr(node) if isinstance(node, (cst.Name, cst.Attribute)) else None
        if symbol is None:
            return None
        key = id(symbol)
        if key not in self._qualnames:
            self._qualnames[key] = None  # while computing (a name bound through itself)
            self._qualnames[key] = self._symbol_qualname(symbol, _depth)
        return self._qualnames[key]

    def _symbol_qualname(self, symbol: Symbol, depth: int) -> str | None:
        classes = set()
        param = symbol.only(Kind.PARAM)
        if param is not None:  # `def train(loader, model)`: what the calls of the file pass
            passed = self.arguments(param) or ()
            classes = {self.instance_qualname(v, where, depth + 1) for v, where in passed}
            return classes.pop() if len(classes) == 1 else None
        for b in symbol.bindings:
            if b.kind is not Kind.ASSIGN or b.value is None:
                return None
            value = _peeled(b.value, b.ctx.scope)
            named = isinstance(value, (cst.Name, cst.Attribute))
            if named and b.ctx.scope.lookup_expr(value) is symbol:
                continue  # `model = DDP(model)`: what the name held already
            if not is_none(value):
                classes.add(self.instance_qualname(value, b.ctx.scope, depth + 1))
        return classes.pop() if len(classes) == 1 else None

    def yields(self, function: cst.FunctionDef) -> int | None:
        """A generator that hands on the items of one of its parameters (`for obj in
        iterable: ... yield obj`, a logger or a progress meter around a loader): that
        parameter's position."""
        found: set[int | None] = set()
        scope = self.scope_of(function)
        for node in self.facts.yields.get(id(function), ()):
            value = node.value
            symbol = scope.lookup(value.value) if isinstance(value, cst.Name) else None
            loop = symbol.only(Kind.LOOP) if symbol is not None else None
            source, path = (loop.source, loop.path) if loop is not None else (None, ())
            while isinstance(source, cst.Call) and source.args and not source.args[0].star:
                name = scope.resolve(source.func)  # `for i, obj in enumerate(iterable)`
                if name == "enumerate" and path == (1,):
                    source, path = source.args[0].value, ()
                elif wraps_items(name) and name != "enumerate" and path == ():
                    source = source.args[0].value
                else:
                    break
            if not isinstance(source, cst.Name) or path:
                return None
            held = scope.lookup(source.value)
            param = held.only(Kind.PARAM) if held is not None else None
            found.add(param.index if param is not None else None)
        return found.pop() if len(found) == 1 else None

    def member(self, cls: Class, name: str) -> Function | None:
        """A method of a class of another file (asked on its own: a file depends on the
        methods it calls, not on every method of the class)."""
        found = self.env.export(f"{cls.ref}.{name}")
        return found if isinstance(found, Function) else None

    def returns(self, function: cst.FunctionDef) -> list[cst.BaseExpression]:
        """The values the function returns (bare `return` and falling off excluded)."""
        return [r.value for r in self.facts.returns.get(id(function), ()) if r.value is not None]

    def returned_names(self, function: cst.FunctionDef) -> set[str]:
        """The names the function returns, alone or as a dict's values (`return loss`,
        `return {"loss": loss, "acc": acc}`)."""
        names: set[str] = set()
        for value in self.returns(function):
            items = [e.value for e in value.elements] if isinstance(value, cst.Dict) else [value]
            names.update(n for v in items if (n := dotted_name(v)) is not None)
        return names

    def returned(
        self, func: cst.CSTNode, scope: Scope
    ) -> tuple[list[cst.BaseExpression], Scope] | None:
        """What the `def` of this file an expression names returns, with the function's
        scope to read those values in; None where it names no `def` of the file."""
        target = self.definition(func, scope)
        if target is None or target.kind is not Kind.DEF:
            return None
        assert isinstance(target.node, cst.FunctionDef)
        return self.returns(target.node), self.scope_of(target.node)


def _handed(call: cst.Call, spawns: bool) -> list[cst.BaseExpression] | None:
    """What a launcher hands the function it is given first: the tuple of `args=`, or
    for `mp.spawn` of its second positional argument (`mp.spawn(main_worker, (args,),
    nprocs)`), else the positional arguments after the function; None where `*` or `**`
    hides some."""
    if any(a.star for a in call.args):
        return None
    packed = keyword(call, "args")
    if packed is MISSING and spawns:
        plain = [a.value for a in call.args if a.keyword is None]
        packed = plain[1] if len(plain) > 1 else cst.Tuple([])
    if packed is not MISSING:
        if not isinstance(packed, cst.Tuple) or any(
            isinstance(e, cst.StarredElement) for e in packed.elements
        ):
            return None
        return [e.value for e in packed.elements]
    return [a.value for a in call.args[1:] if a.keyword is None]


def wrapped_module(call: cst.Call, scope: Scope) -> cst.BaseExpression | None:
    """The module a call returns as it came, or wrapped to behave as it: the receiver of
    `.cuda()`, `.to(device)`, `.eval()`; the argument of `DataParallel(model)`,
    `DDP(model)`, `torch.compile(model)`. None for any other call."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value in MODULE_CHAINING:
        return func.value
    if call.args and scope.resolve(func) in MODULE_WRAPPERS and not call.args[0].keyword:
        return call.args[0].value
    return None


def _peeled(node: cst.CSTNode, scope: Scope) -> cst.CSTNode:
    """The module under `.cuda()`, `DDP(...)` and the like (`wrapped_module`): an
    instance of the class it was built from, as far as its methods go."""
    while isinstance(node, cst.Call) and (inner := wrapped_module(node, scope)) is not None:
        node = inner
    return node
