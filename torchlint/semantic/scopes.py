"""Scopes and bindings: which name refers to which import, assignment, parameter, def or
class, following Python's rules (function locals, enclosing functions, class bodies that
methods do not see, `global`/`nonlocal`, comprehensions), and attributes set on `self`.

Where a node sits (`Context`: its scope, and the statements, loops, withs and ifs around
it), the calls and loops the walk records: one module with the scopes, since a binding
knows where it sits and a context knows its scope.

Bindings, and the names read, are collected in the model's single walk; names are looked
up afterwards, so a use may precede its binding in the text (a function body reading a
later import), as at run time. The analysis is flow-insensitive: a name stands for every
binding of it in the scope that owns it.
"""

from __future__ import annotations

import builtins
import enum
from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from torchlint.semantic.syntax import argument, dotted_name, keyword, positional

BUILTINS = frozenset(dir(builtins))

# Public re-exports: the spelling a user may import from -> the canonical name.
CANONICAL = {
    "torch.utils.data.dataloader.DataLoader": "torch.utils.data.DataLoader",
    "torch.utils.data.sampler.DistributedSampler": "torch.utils.data.DistributedSampler",
    "torch.utils.data.distributed.DistributedSampler": "torch.utils.data.DistributedSampler",
    "torch.nn.parallel.distributed.DistributedDataParallel": (
        "torch.nn.parallel.DistributedDataParallel"
    ),
    "torch.nn.parallel.DataParallel": "torch.nn.DataParallel",
    "torch.nn.parallel.data_parallel.DataParallel": "torch.nn.DataParallel",
    "torch.nn.modules.module.Module": "torch.nn.Module",
    "torch.optim.optimizer.Optimizer": "torch.optim.Optimizer",
    "torch.utils.data.dataset.Dataset": "torch.utils.data.Dataset",
    "torch.utils.data.dataset.IterableDataset": "torch.utils.data.IterableDataset",
    "torch.utils.data.dataset.TensorDataset": "torch.utils.data.TensorDataset",
    "torch.cuda.amp.grad_scaler.GradScaler": "torch.cuda.amp.GradScaler",
    "torch.amp.grad_scaler.GradScaler": "torch.amp.GradScaler",
    "torch.autograd.grad_mode.no_grad": "torch.no_grad",
    "torch.autograd.no_grad": "torch.no_grad",
    "torch.autograd.grad_mode.inference_mode": "torch.inference_mode",
    "torch.autograd.grad_mode.set_grad_enabled": "torch.set_grad_enabled",
    "torch.autograd.set_grad_enabled": "torch.set_grad_enabled",
}


def canonical(qualname: str) -> str:
    return CANONICAL.get(qualname, qualname)


class Kind(str, enum.Enum):
    IMPORT = "import"
    ASSIGN = "assign"  # `x = v`, `x: T = v`, `x, y = v` (value None, source v)
    AUGASSIGN = "augassign"  # `x += v` (value v)
    PARAM = "param"
    DEF = "def"
    CLASS = "class"
    LOOP = "for"  # `for x in it` (source it), comprehension targets too
    WITH = "with"  # `with f() as x` (source f())
    OTHER = "other"  # except handlers, walrus, `del`, match captures...


class ScopeKind(str, enum.Enum):
    MODULE = "module"
    CLASS = "class"
    FUNCTION = "function"  # def and lambda
    COMPREHENSION = "comprehension"


@dataclass(eq=False)
class Binding:
    """One place where a name (or `self.attr`) gets a value."""

    symbol: Symbol
    kind: Kind
    node: cst.CSTNode  # the statement, parameter, def, class or import alias
    ctx: Context
    value: cst.BaseExpression | None = None  # the whole value bound to exactly this name
    # What an unpacking, loop or `with` takes it from; for a parameter, its default.
    source: cst.BaseExpression | None = None
    qualname: str | None = None  # imports: what it refers to
    index: int | None = None  # parameters: position
    path: tuple[int, ...] = ()  # unpacking: where in the target (`a, (b, c) = v`: b is (1, 0))


@dataclass(eq=False)
class Symbol:
    """A name in one scope (or an attribute of one owner) with all its bindings and, for
    a name, its references: the names that read it (or `del` it), in source order."""

    name: str
    scope: Scope
    bindings: list[Binding] = field(default_factory=list)
    attributes: dict[str, Symbol] = field(default_factory=dict)  # `x.attr = ...`
    read_by: list[cst.Name] = field(default_factory=list)  # filled on demand: read `references`

    @property
    def references(self) -> list[cst.Name]:
        self.scope.module.resolve_reads()
        return self.read_by

    def values(self) -> list[cst.BaseExpression]:
        """The values of the plain assignments of this symbol."""
        return [b.value for b in self.bindings if b.value is not None]

    @property
    def imported(self) -> str | None:
        """The qualified name when every binding imports the same thing; fallback
        assignments (`except ImportError: tqdm = None`) do not count against it."""
        found: list[str | None] = []  # (a loop: this runs for most names resolved)
        for b in self.bindings:
            if b.kind is Kind.IMPORT:
                if found and b.qualname != found[0]:
                    return None
                found = [b.qualname]
            elif b.kind is Kind.DEF or b.kind is Kind.CLASS:
                return None
        return found[0] if found else None

    def only(self, *kinds: Kind) -> Binding | None:
        """The single binding of the symbol when it is of one of `kinds`."""
        if len(self.bindings) == 1 and self.bindings[0].kind in kinds:
            return self.bindings[0]
        return None

    def attribute(self, attr: str) -> Symbol:
        found = self.attributes.get(attr)
        if found is None:
            found = self.attributes[attr] = Symbol(f"{self.name}.{attr}", self.scope)
        return found

    def member(self, attr: str) -> Symbol | None:
        return self.attributes.get(attr)


@dataclass(eq=False)
class Scope:
    kind: ScopeKind
    node: cst.CSTNode  # Module, ClassDef, FunctionDef, Lambda or the comprehension
    parent: Scope | None
    symbols: dict[str, Symbol] = field(default_factory=dict)
    declared_global: set[str] = field(default_factory=set)
    declared_nonlocal: set[str] = field(default_factory=set)
    # Classes: attributes set on instances (`self.x = ...` in methods), class attributes.
    attributes: dict[str, Symbol] = field(default_factory=dict)
    # Functions: the parameter a method receives its instance by, and its class scope.
    self_name: str | None = None
    class_scope: Scope | None = None
    bases: list[Scope] = field(default_factory=list)  # classes: base classes of this file
    # Module scopes: the names read in the file, each with the scope it is read in, until
    # a symbol's references are first asked for (few files need them).
    reads: list[tuple[cst.Name, Scope]] = field(default_factory=list)

    def resolve_reads(self) -> None:
        """Hand each name read in the file to the symbol it reads (module scopes)."""
        reads, self.reads = self.reads, []
        for name, scope in reads:
            symbol = scope.lookup(name.value)
            if symbol is not None:
                symbol.read_by.append(name)

    def symbol(self, name: str) -> Symbol:
        found = self.symbols.get(name)
        if found is None:
            found = self.symbols[name] = Symbol(name, self)
        return found

    def binding_scope(self, name: str) -> Scope:
        """The scope an assignment to `name` made here binds in."""
        if name in self.declared_global:
            return self.module
        if name in self.declared_nonlocal:
            scope = self.parent
            while scope is not None and scope.kind is not ScopeKind.MODULE:
                if scope.kind is ScopeKind.FUNCTION and name in scope.symbols:
                    return scope
                scope = scope.parent
        if self.kind is ScopeKind.COMPREHENSION:  # walrus: the enclosing function/module
            scope = self.parent
            while scope is not None and scope.kind is ScopeKind.COMPREHENSION:
                scope = scope.parent
            return scope or self
        return self

    @property
    def module(self) -> Scope:
        scope = self
        while scope.parent is not None:
            scope = scope.parent
        return scope

    @property
    def function(self) -> Scope | None:
        """The innermost function scope at or around this one."""
        scope: Scope | None = self
        while scope is not None and scope.kind is not ScopeKind.FUNCTION:
            scope = scope.parent
        return scope

    def lookup(self, name: str) -> Symbol | None:
        """The symbol `name` refers to here; None for builtins and unknown names."""
        if name in self.declared_global:
            return self.module.symbols.get(name)
        found = self.symbols.get(name)
        if found is not None:
            return found
        scope = self.parent
        while scope is not None:
            # Class bodies are not visible from the functions nested in them.
            if scope.kind is not ScopeKind.CLASS:
                found = scope.symbols.get(name)
                if found is not None:
                    return found
            scope = scope.parent
        return None

    def lookup_expr(self, node: cst.CSTNode) -> Symbol | None:
        """The symbol of a name, of `self.attr` in a method (an attribute set on instances,
        a class attribute or a method, through the file's base classes), or of `x.attr`
        where `x.attr` is assigned in the file (`args.device = ...`)."""
        if type(node) is cst.Name:  # (by class: see `dotted_name`)
            return self.lookup(node.value)
        if type(node) is not cst.Attribute:
            return None
        owner = self.owner(node.value)
        return owner.member(node.attr.value) if owner is not None else None

    def owner(self, node: cst.CSTNode) -> Symbol | Scope | None:
        """What holds the attributes of `node`: the class scope for the instance parameter
        of a method (`self`), the symbol for other names and attribute chains."""
        if type(node) is cst.Name:
            symbol = self.lookup(node.value)
            if symbol is None:
                return None
            where = symbol.scope
            if (
                where.self_name == node.value
                and where.class_scope is not None
                and symbol.only(Kind.PARAM) is not None
            ):
                return where.class_scope
            return symbol
        if type(node) is cst.Attribute:
            owner = self.owner(node.value)
            return owner.member(node.attr.value) if owner is not None else None
        return None

    def member(self, attr: str, _depth: int = 0) -> Symbol | None:
        """Class scopes: `self.attr` as set in methods, else the class body's own binding,
        else the same in the file's base classes."""
        found = self.attributes.get(attr) or self.symbols.get(attr)
        if found is None and _depth < 4:
            for base in self.bases:
                found = base.member(attr, _depth + 1)
                if found is not None:
                    break
        return found

    def attribute(self, attr: str) -> Symbol:
        found = self.attributes.get(attr)
        if found is None:
            found = self.attributes[attr] = Symbol(f"self.{attr}", self)
        return found

    def resolve(self, node: cst.CSTNode) -> str | None:
        """The canonical qualified name of a Name/Attribute chain through imports
        (`nn.Linear` -> `torch.nn.Linear`), a builtin's own name (`float`), else None."""
        first = node
        while type(first) is cst.Attribute:  # (the name first: most resolve to nothing)
            first = first.value
        if type(first) is not cst.Name:
            return None
        head = first.value
        symbol = self.lookup(head)
        target = symbol.imported if symbol is not None else head if head in BUILTINS else None
        if target is None:
            return None
        if first is node:
            return canonical(target)
        rest = (dotted_name(node) or "").partition(".")[2]
        return canonical(f"{target}.{rest}")


def bindings(node: cst.CSTNode, scope: Scope) -> list[Binding]:
    """Every binding of the name or `self.attr` an expression refers to."""
    symbol = scope.lookup_expr(node)
    return list(symbol.bindings) if symbol is not None else []


def assigned_values(node: cst.CSTNode, scope: Scope) -> list[cst.BaseExpression]:
    """The values of the plain assignments of the name an expression refers to."""
    return [b.value for b in bindings(node, scope) if b.kind is Kind.ASSIGN and b.value]


def unpacked_into(binding: Binding) -> int | None:
    """How many names the assignment of an unpacked binding unpacks at the top (`a, b, c
    = f()`: 3), where none is starred."""
    node = binding.node
    if not binding.path or not isinstance(node, cst.Assign) or len(node.targets) != 1:
        return None
    target = node.targets[0].target
    if not isinstance(target, (cst.Tuple, cst.List)):
        return None
    if any(isinstance(e, cst.StarredElement) for e in target.elements):
        return None
    return len(target.elements)


def assigned_once(node: cst.CSTNode, scope: Scope) -> Binding | None:
    """The one binding of a name (or `self.attr`) bound only by a single plain assignment
    with a value (`mps = "mps" in device.type`); None otherwise."""
    symbol = scope.lookup_expr(node)
    bound = symbol.only(Kind.ASSIGN) if symbol is not None else None
    return bound if bound is not None and bound.value is not None else None


def assigned_to(call: CallSite) -> list[cst.BaseExpression]:
    """The targets its statement assigns a call's value to (`x = f()`: `x`; `self.out =
    f()`: `self.out`); [] where the value is not assigned as it is."""
    statement = call.ctx.statement
    body = statement.body if isinstance(statement, cst.SimpleStatementLine) else ()
    return [
        t.target
        for small in body
        if isinstance(small, cst.Assign) and small.value is call.node
        for t in small.targets
    ]


def bound_names(target: cst.CSTNode) -> list[cst.Name]:
    """The names an assignment target binds (`a`, `a, (b, *c)`), attributes excluded."""
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in bound_names(e.value)]
    if isinstance(target, cst.StarredElement):
        return bound_names(target.value)
    return []


@dataclass(frozen=True, eq=False)
class Context:
    """Where a node sits: its scope and the statements, loops, withs and ifs around it."""

    statement: cst.BaseStatement | None
    loops: tuple[Loop, ...]  # enclosing loops of the same function, outermost first
    function: cst.FunctionDef | None
    class_: cst.ClassDef | None
    withs: tuple[cst.With, ...]
    ifs: tuple[cst.If, ...]
    decorators: tuple[cst.Decorator, ...]  # of every enclosing function
    scope: Scope


@dataclass(eq=False)
class CallSite:
    node: cst.Call
    ctx: Context
    order: int  # rank in source order among the file's calls
    qualname: str | None = None  # resolved through imports, canonical; None if not imported
    method: str | None = None  # `x.to(...)` -> "to"
    receiver: cst.BaseExpression | None = None  # `x.to(...)` -> x

    def kwarg(self, name: str) -> cst.BaseExpression:
        return keyword(self.node, name)

    def arg(
        self, name: str, params: tuple[str, ...] = (), index: int | None = None
    ) -> cst.BaseExpression:
        """The argument for parameter `name` (keyword or positional), else MISSING."""
        return argument(self.node, name, params, index)

    @property
    def has_star_args(self) -> bool:
        return any(arg.star for arg in self.node.args)

    @property
    def positional(self) -> list[cst.BaseExpression]:
        return positional(self.node)

    @property
    def scope(self) -> Scope:
        return self.ctx.scope


@dataclass(frozen=True, eq=False)
class Store:
    """`a.b.c = value` where `a.b.c` resolves through the imports to a module attribute
    (`cudnn.benchmark = True` -> `torch.backends.cudnn.benchmark`)."""

    qualname: str
    target: cst.Attribute
    value: cst.BaseExpression
    ctx: Context


@dataclass(eq=False)
class Loop:
    node: cst.For | cst.While
    ctx: Context  # where the loop statement itself is
    calls: list[CallSite] = field(default_factory=list)  # in the body, nested loops included
    inner: list[Loop] = field(default_factory=list)  # loops nested in this one (same function)
    # Names (re)bound in the body, with how many statements bind each: assignments of
    # any shape, inner `for`/`with` targets, walrus; `self.x` targets by their text.
    bound: dict[str, int] = field(default_factory=dict)
    assignments: list[Binding] = field(default_factory=list)  # `x = v`, `x += v` in the body
    # Linked after the walk (see loops.py and loaders.py).
    steps: list[CallSite] = field(default_factory=list)  # optimizer steps in the body
    backwards: list[CallSite] = field(default_factory=list)  # backward passes in the body
    # The DataLoaderSites the `for` iterates (Any: loaders.py, after this module, has them).
    loaders: list[Any] = field(default_factory=list)

    @property
    def is_training(self) -> bool:
        """Its body runs a backward pass and an optimizer step (directly, in a nested
        loop, or in a function of this file it calls)."""
        return bool(self.steps) and bool(self.backwards)

    @property
    def is_step_loop(self) -> bool:
        """A training loop whose body runs once per step: no training loop inside it, or
        an optimizer step of its own beside the inner ones (a GAN's generator step around
        the critic's loop of `n_critic` steps)."""
        if not self.is_training:
            return False
        inner = {id(c) for loop in self.inner if loop.is_training for c in loop.steps}
        return not inner or any(id(c) not in inner for c in self.steps)

    @property
    def losses(self) -> frozenset[str]:
        """What its body backpropagates: the names handed to a `.backward(...)` in it and
        bound in it (`loss = ...; loss.backward()`, `outputs.loss.backward()`,
        `scaler.scale(loss).backward()`, `accelerator.backward(loss)`), whatever the body
        rebinds them to afterwards (`loss = loss.item()`)."""
        names: set[str] = set()
        for call in self.calls:
            if call.method != "backward":
                continue
            candidates = [a.value for a in call.node.args if a.keyword is None]
            receiver = call.receiver
            if isinstance(receiver, cst.Call) and receiver.args:
                candidates.append(receiver.args[0].value)
            elif receiver is not None:
                candidates.append(receiver)
            for candidate in candidates:
                name = dotted_name(candidate)
                if name is not None and name.split(".")[0] in self.bound:
                    names.add(name)
        return frozenset(names)

    @property
    def is_loader_loop(self) -> bool:
        return bool(self.loaders)

    @property
    def takes_one(self) -> bool:
        """Its body ends its first pass with a `break` of its own (not under an `if`): a
        peek at one batch (`for x, y in loader: print(x.shape); break`), not a loop."""
        return any(
            isinstance(small, cst.Break)
            for statement in self.body
            if isinstance(statement, cst.SimpleStatementLine)
            for small in statement.body
        )

    @property
    def is_epoch_loop(self) -> bool:
        """A loop with a loader loop inside it."""
        return any(inner.is_loader_loop for inner in self.inner)

    @property
    def body(self) -> list[cst.BaseStatement]:
        body = self.node.body
        return list(body.body) if isinstance(body, cst.IndentedBlock) else []

    @property
    def target(self) -> cst.BaseAssignTargetExpression | None:
        return self.node.target if isinstance(self.node, cst.For) else None
