"""DataLoader subclasses: classes that take DataLoader's own arguments, so a call of one is
a DataLoader site like `DataLoader(...)` (yolov5's `InfiniteDataLoader`, a project's
`FastDataLoader`), also when a name picks one of them (`loader = DataLoader if weighted
else InfiniteDataLoader; loader(ds, ...)`).

A class qualifies when it derives from DataLoader (directly or through classes of the
same file) and its `__init__`, where it has one, takes only `*args, **kwargs` and hands
them on to the base's `__init__`: the arguments of a call mean what they mean for a
DataLoader. One that defines `__iter__` iterates its own way (yolov5's repeats its
sampler forever and keeps its workers): what DataLoader's iteration implies, workers
started again each epoch, is not assumed of it."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from torchlint.semantic.builder import Facts
from torchlint.semantic.external import Class, Environment
from torchlint.semantic.scopes import CallSite, Kind, Scope

DATALOADER = "torch.utils.data.DataLoader"
MAX_DEPTH = 4


@dataclass(frozen=True)
class LoaderClass:
    own_iteration: bool  # it defines `__iter__`: its iteration is its own


def loader_class(cls: Scope, facts: Facts, _depth: int = 0) -> LoaderClass | None:
    """What a class of this file is as a DataLoader (see the module's docstring)."""
    node = cls.node
    if _depth > MAX_DEPTH or not isinstance(node, cst.ClassDef) or cls.parent is None:
        return None
    if not _hands_on(cls, facts):
        return None
    own = "__iter__" in cls.symbols
    if any(cls.parent.resolve(base.value) == DATALOADER for base in node.bases):
        return LoaderClass(own)
    for base in cls.bases:
        found = loader_class(base, facts, _depth + 1)
        if found is not None:
            return LoaderClass(own or found.own_iteration)
    return None


def _hands_on(cls: Scope, facts: Facts) -> bool:
    """The class has no `__init__`, or one taking `(self, *args, **kwargs)` that calls
    the base's `__init__` with `*args, **kwargs`."""
    init = cls.symbols.get("__init__")
    if init is None:
        return True
    binding = init.only(Kind.DEF)
    if binding is None or not isinstance(binding.node, cst.FunctionDef):
        return False
    params = binding.node.params
    star, double = params.star_arg, params.star_kwarg
    if len(params.params) != 1 or params.posonly_params or params.kwonly_params:
        return False
    if not isinstance(star, cst.Param) or double is None:
        return False
    wanted = {("*", star.name.value), ("**", double.name.value)}
    for call in facts.calls_by_method.get("__init__", ()):
        if call.scope.node is binding.node:
            args = call.node.args
            if wanted <= {(a.star, a.value.value) for a in args if isinstance(a.value, cst.Name)}:
                return True
    return False


def class_of_call(call: CallSite, facts: Facts, env: Environment) -> LoaderClass | None:
    """What the class a call builds is as a DataLoader: a class of this file, one of another
    file of the project (its name ends in `Loader`: the only ones asked about), or a name
    bound once to a choice between such classes and DataLoader itself."""
    func = call.node.func
    if call.qualname is not None:
        if not call.qualname.endswith("Loader") or call.qualname == DATALOADER:
            return None
        found = env.export(call.qualname)
        if isinstance(found, Class) and found.loader:
            return LoaderClass(found.own_iteration)
        return None
    if not isinstance(func, cst.Name):
        return None
    symbol = call.scope.lookup(func.value)
    binding = symbol.only(Kind.CLASS, Kind.ASSIGN) if symbol is not None else None
    if binding is None:
        return None
    if binding.kind is Kind.CLASS:
        scope = facts.scopes.get(id(binding.node))
        return loader_class(scope, facts) if scope is not None else None
    value = binding.value
    if not isinstance(value, cst.IfExp):
        return None
    return _choice((value.body, value.orelse), binding.ctx.scope, facts)


def _choice(
    options: tuple[cst.BaseExpression, ...], scope: Scope, facts: Facts
) -> LoaderClass | None:
    """`DataLoader if c else InfiniteDataLoader`: each branch DataLoader or a loader class
    of the file; iterating its own way where any branch does."""
    own = False
    for option in options:
        if scope.resolve(option) == DATALOADER:
            continue
        symbol = scope.lookup_expr(option) if isinstance(option, cst.Name) else None
        binding = symbol.only(Kind.CLASS) if symbol is not None else None
        cls = facts.scopes.get(id(binding.node)) if binding is not None else None
        found = loader_class(cls, facts) if cls is not None else None
        if found is None:
            return None
        own = own or found.own_iteration
    return LoaderClass(own)
