"""The single walk over a file: scopes and bindings, calls with their context, loops."""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import libcst as cst

from torchlint.semantic.external import Environment
from torchlint.semantic.scopes import (
    Binding,
    CallSite,
    Context,
    Kind,
    Loop,
    Scope,
    ScopeKind,
    Symbol,
    bound_names,
    canonical,
)
from torchlint.semantic.syntax import dotted_name
from torchlint.text.walk import walk

COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)
# What says a script runs on several GPUs: an option, variable or key naming their number
# or list, or a launcher's variable (`--ngpu`, `args.gpu_ids`, "LOCAL_RANK", "WORLD_SIZE").
MULTI_GPU_NAME = re.compile(
    r"^-*(n_?gpus?|num_?gpus?|gpus|gpu_ids|device_ids|world_size|local_rank|nproc_per_node"
    r"|multi_?gpus?|num_devices|n_devices)$",
    re.IGNORECASE,
)
T = TypeVar("T")


@dataclass
class Facts:
    """What one walk of a module records."""

    module: cst.Module
    scope: Scope  # the module's scope
    calls: list[CallSite] = field(default_factory=list)  # in source order
    loops: list[Loop] = field(default_factory=list)  # in source order, outer before inner
    bindings: list[Binding] = field(default_factory=list)  # in source order
    by_value: dict[int, Binding] = field(default_factory=dict)  # id(assigned value) -> binding
    scopes: dict[int, Scope] = field(default_factory=dict)  # id(def/class/lambda) -> scope
    returns: dict[int, list[cst.Return]] = field(default_factory=dict)  # id(def) -> returns
    yields: dict[int, list[cst.Yield]] = field(default_factory=dict)  # id(def) -> yields
    imported_modules: set[str] = field(default_factory=set)
    cuda_strings: list[cst.SimpleString] = field(default_factory=list)
    calls_by_qualname: dict[str, list[CallSite]] = field(default_factory=dict)
    calls_by_method: dict[str, list[CallSite]] = field(default_factory=dict)
    # `x[key] = v` (v is None for `x[key] += v`), and where it is.
    item_stores: list[tuple[cst.Subscript, cst.BaseExpression | None, Context]] = field(
        default_factory=list
    )
    following: dict[int, cst.BaseStatement] = field(default_factory=dict)  # id(stmt) -> next
    # `a.b.c = v` (a whole target, not an unpacking), and where it is.
    attribute_stores: list[tuple[cst.Attribute, cst.BaseExpression, Context]] = field(
        default_factory=list
    )
    stars: list[str] = field(default_factory=list)  # modules imported `*` at module level
    multi_gpu_name: bool = False  # a name, attribute or string matches MULTI_GPU_NAME

    def calls_to(self, *qualnames: str) -> list[CallSite]:
        found = [c for q in qualnames for c in self.calls_by_qualname.get(q, ())]
        return sorted(found, key=lambda c: c.order) if len(qualnames) > 1 else found

    def method_calls(self, *methods: str) -> list[CallSite]:
        found = [c for m in methods for c in self.calls_by_method.get(m, ())]
        return sorted(found, key=lambda c: c.order) if len(methods) > 1 else found

    def imports_any(self, *prefixes: str) -> bool:
        return any(m == p or m.startswith(p + ".") for m in self.imported_modules for p in prefixes)

    def release(self) -> None:
        """The links that make the facts a web of cycles undone (a scope and its symbols,
        a symbol and its bindings, a loop and the calls and loops in it), so that they
        and the tree they hold are freed when the file's analysis drops them: the cyclic
        collector went over every node of every tree to free them (about 6% of a cold
        run's CPU). Nothing reads the facts after."""
        scopes = [self.scope, *self.scopes.values()]
        symbols = [s for scope in scopes for s in scope.symbols.values()]
        symbols += [s for scope in scopes for s in scope.attributes.values()]
        while symbols:
            symbol = symbols.pop()
            symbols += symbol.attributes.values()
            symbol.bindings.clear()
            symbol.attributes.clear()
        self.scope.reads.clear()
        for scope in scopes:
            scope.symbols.clear()
            scope.attributes.clear()
            scope.bases.clear()
        for loop in self.loops:
            for links in (loop.calls, loop.inner, loop.assignments, loop.steps, loop.backwards):
                links.clear()
            loop.loaders.clear()


def collect(module: cst.Module, env: Environment | None = None) -> Facts:
    """The facts of one walk; `env` binds the names of star imports from the project."""
    builder = _Builder(module)
    walk(module, builder)  # as module.visit(builder), without rebuilding the tree
    return builder.finish(env or Environment())


@dataclass
class _PendingAttribute:
    """`x.attr = v`: bound to x's attributes once every name of the file is known."""

    target: cst.Attribute
    binding: Binding


class _Builder(cst.CSTVisitor):
    def __init__(self, module: cst.Module) -> None:
        super().__init__()
        scope = Scope(ScopeKind.MODULE, module, None)
        self.facts = Facts(module, scope)
        self.scope = scope
        self.statement: list[cst.BaseStatement] = []
        self.loops: list[Loop] = []
        self.saved_loops: list[list[Loop]] = []
        self.functions: list[cst.FunctionDef] = []
        self.classes: list[cst.ClassDef] = []
        self.withs: list[cst.With] = []
        self.ifs: list[cst.If] = []
        self.decorators: list[cst.Decorator] = []
        self.pending: list[_PendingAttribute] = []
        self._context: Context | None = None
        # The names that read nothing (an attribute's name, a keyword's, a name bound or
        # declared, an import's), by id, met before them; the others are `scope.reads`.
        self.unread: set[int] = set()
        self.read = scope.reads.append
        self.importing = False
        # The scopes (by id) whose header is being walked: decorators, parameters,
        # annotations, bases, read in the scope around.
        self.header: set[int] = set()

    def _ctx(self) -> Context:
        if self._context is None:
            self._context = Context(
                self.statement[-1] if self.statement else None,
                tuple(self.loops),
                self.functions[-1] if self.functions else None,
                self.classes[-1] if self.classes else None,
                tuple(self.withs),
                tuple(self.ifs),
                tuple(self.decorators),
                self.scope,
            )
        return self._context

    def _push(self, stack: list[T], item: T) -> None:
        stack.append(item)
        self._context = None

    def _pop(self, stack: list[T]) -> None:
        stack.pop()
        self._context = None

    def finish(self, env: Environment) -> Facts:
        facts = self.facts
        self._bind_stars(env)
        for scope in facts.scopes.values():
            if scope.kind is ScopeKind.CLASS:
                assert isinstance(scope.node, cst.ClassDef)
                for base in scope.node.bases:
                    symbol = scope.parent.lookup_expr(base.value) if scope.parent else None
                    found = symbol.only(Kind.CLASS) if symbol is not None else None
                    if found is not None:
                        scope.bases.append(facts.scopes[id(found.node)])
        unbound: set[int] = set()
        for pending in self.pending:
            owner = pending.binding.ctx.scope.owner(pending.target.value)
            if owner is None:
                unbound.add(id(pending.binding))
                continue
            symbol = owner.attribute(pending.target.attr.value)
            pending.binding.symbol = symbol
            symbol.bindings.append(pending.binding)
        if unbound:
            facts.bindings = [b for b in facts.bindings if id(b) not in unbound]
            for loop in facts.loops:
                loop.assignments = [b for b in loop.assignments if id(b) not in unbound]
        for site in facts.calls:
            func = site.node.func
            site.qualname = site.ctx.scope.resolve(func)
            if site.qualname is not None:
                facts.calls_by_qualname.setdefault(site.qualname, []).append(site)
            if isinstance(func, cst.Attribute):
                site.method, site.receiver = func.attr.value, func.value
                facts.calls_by_method.setdefault(site.method, []).append(site)
        return facts

    def _bind_stars(self, env: Environment) -> None:
        """`from module import *` of a module of the project binds the names it exports
        or imports (to what they are: `nn` to `torch.nn`) that nothing else binds at
        module level."""
        module = self.facts.scope
        for name in self.facts.stars:
            for entry in env.star(name):
                local, _, target = entry.partition("=")  # `nn=torch.nn`: an import there
                if local not in module.symbols:
                    base = name if name.endswith(".") else f"{name}."
                    self._bind_import(local, target or f"{base}{local}", self.facts.module)

    # -- bindings ----------------------------------------------------------------------

    def _bind(
        self,
        target: cst.BaseExpression,
        kind: Kind,
        node: cst.CSTNode,
        value: cst.BaseExpression | None = None,
        source: cst.BaseExpression | None = None,
        path: tuple[int, ...] = (),
        scope: Scope | None = None,
    ) -> None:
        """Bind every name of an assignment target; `value` is what the name gets when it
        is the whole target or matches an element of a literal tuple on the right."""
        if isinstance(target, cst.Name):
            if kind is not Kind.AUGASSIGN:  # (`x += 1` reads x too)
                self.unread.add(id(target))
            name = target.value
            where = (scope or self.scope).binding_scope(name)
            symbol = where.symbol(name)
            binding = Binding(symbol, kind, node, self._ctx(), value, source, path=path)
            symbol.bindings.append(binding)
            self._record(binding)
        elif isinstance(target, (cst.Tuple, cst.List)):
            elements = target.elements
            literal = (
                value.elements
                if isinstance(value, (cst.Tuple, cst.List))
                and len(value.elements) == len(elements)
                and not any(isinstance(e, cst.StarredElement) for e in value.elements)
                else None
            )
            for i, element in enumerate(elements):
                inner = literal[i].value if literal is not None else None
                self._bind(element.value, kind, node, inner, source or value, (*path, i), scope)
        elif isinstance(target, cst.StarredElement):
            self._bind(target.value, kind, node, None, source or value, path, scope)
        elif isinstance(target, cst.Attribute):
            placeholder = Symbol(dotted_name(target) or "", self.scope)
            binding = Binding(placeholder, kind, node, self._ctx(), value, source, path=path)
            self.pending.append(_PendingAttribute(target, binding))
            self._record(binding)
            if kind is Kind.ASSIGN and value is not None and not path:
                self.facts.attribute_stores.append((target, value, self._ctx()))
        elif isinstance(target, cst.Subscript):
            stored = value if kind is Kind.ASSIGN and not path else None
            self.facts.item_stores.append((target, stored, self._ctx()))

    def _record(self, binding: Binding) -> None:
        self.facts.bindings.append(binding)
        if binding.value is not None:
            self.facts.by_value[id(binding.value)] = binding
        if binding.kind in (Kind.ASSIGN, Kind.AUGASSIGN):
            for loop in self.loops:
                loop.assignments.append(binding)

    def _loop_bound(self, target: cst.BaseExpression) -> None:
        """Record names bound inside the enclosing loops' bodies."""
        if not self.loops:
            return
        dotted = dotted_name(target)
        names = [dotted] if dotted else [n.value for n in bound_names(target)]
        for loop in self.loops:
            for n in names:
                loop.bound[n] = loop.bound.get(n, 0) + 1

    def visit_Import(self, node: cst.Import) -> None:
        self.importing = True
        for alias in node.names:
            name = dotted_name(alias.name) or ""
            self.facts.imported_modules.add(name)
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local, target = alias.asname.name.value, name
            else:
                local = target = name.split(".")[0]
            self._bind_import(local, target, alias)

    def leave_Import(self, node: cst.Import) -> None:
        self.importing = False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self.importing = True
        base = dotted_name(node.module) if node.module is not None else None
        if base is not None and not node.relative:
            self.facts.imported_modules.add(base)
        # A relative import keeps its dots (".models", ".."): the project resolves it.
        dots = "." * len(node.relative)
        where = f"{dots}{base or ''}" if dots else base
        if isinstance(node.names, cst.ImportStar):
            if where is not None and self.scope.kind is ScopeKind.MODULE:
                self.facts.stars.append(where)
            return
        for alias in node.names:
            name = dotted_name(alias.name) or ""
            local = (
                alias.asname.name.value
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name)
                else name
            )
            target = None
            if where is not None:
                target = canonical(f"{where}.{name}") if not where.endswith(".") else where + name
                if not dots:
                    self.facts.imported_modules.add(f"{base}.{name}")
            self._bind_import(local, target, alias)

    def leave_ImportFrom(self, node: cst.ImportFrom) -> None:
        self.importing = False

    def _bind_import(self, local: str, target: str | None, alias: cst.CSTNode) -> None:
        symbol = self.scope.binding_scope(local).symbol(local)
        binding = Binding(symbol, Kind.IMPORT, alias, self._ctx(), qualname=target)
        symbol.bindings.append(binding)
        self._record(binding)

    def visit_Global(self, node: cst.Global) -> None:
        self.scope.declared_global.update(n.name.value for n in node.names)
        self.unread.update(id(n.name) for n in node.names)

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        self.scope.declared_nonlocal.update(n.name.value for n in node.names)
        self.unread.update(id(n.name) for n in node.names)

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            self._bind(t.target, Kind.ASSIGN, node, node.value)
            self._loop_bound(t.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self.unread.add(id(node.target))  # (bound only with a value)
        self._loop_bound(node.target)
        if node.value is not None:
            self._bind(node.target, Kind.ASSIGN, node, node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._bind(node.target, Kind.AUGASSIGN, node, node.value)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._bind(node.asname.name, Kind.WITH, node, source=node.item)
            self._loop_bound(node.asname.name)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._bind(node.target, Kind.ASSIGN, node, node.value)
        self._loop_bound(node.target)

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        if node.name is not None:
            self._bind(node.name.name, Kind.OTHER, node)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._bind(node.target, Kind.LOOP, node, source=node.iter)

    # -- scopes and structure ------------------------------------------------------------

    def _enter(self, kind: ScopeKind, node: cst.CSTNode) -> Scope:
        scope = Scope(kind, node, self.scope)
        self.facts.scopes[id(node)] = scope
        self.scope = scope
        self._context = None
        return scope

    def _leave(self) -> None:
        assert self.scope.parent is not None
        self.scope = self.scope.parent
        self._context = None

    def _bind_params(self, scope: Scope, params: cst.Parameters) -> None:
        ordered = [*params.posonly_params, *params.params]
        for index, param in enumerate(ordered):
            self._bind(param.name, Kind.PARAM, param, source=param.default, scope=scope)
            scope.symbols[param.name.value].bindings[-1].index = index
        extra = [*params.kwonly_params]
        for star in (params.star_arg, params.star_kwarg):
            if isinstance(star, cst.Param):
                extra.append(star)
        for param in extra:
            self._bind(param.name, Kind.PARAM, param, source=param.default, scope=scope)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._bind(node.name, Kind.DEF, node, value=None)
        self._push(self.statement, node)
        self.functions.append(node)
        self.decorators.extend(node.decorators)
        self.saved_loops.append(self.loops)
        self.loops = []
        outer = self.scope
        scope = self._enter(ScopeKind.FUNCTION, node)
        self.header.add(id(scope))
        if outer.kind is ScopeKind.CLASS and not any(
            dotted_name(d.decorator) == "staticmethod" for d in node.decorators
        ):
            first = [*node.params.posonly_params, *node.params.params][:1]
            if first:
                scope.self_name = first[0].name.value
                scope.class_scope = outer
        self._bind_params(scope, node.params)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._leave()
        self._pop(self.statement)
        self.functions.pop()
        del self.decorators[len(self.decorators) - len(node.decorators) :]
        self.loops = self.saved_loops.pop()

    def visit_Lambda(self, node: cst.Lambda) -> None:
        scope = self._enter(ScopeKind.FUNCTION, node)
        self.header.add(id(scope))
        self._bind_params(scope, node.params)

    def leave_Parameters(self, node: cst.Parameters) -> None:
        if isinstance(self.scope.node, cst.Lambda):  # (a def's header goes on: `-> T:`)
            self.header.discard(id(self.scope))

    def leave_Lambda(self, node: cst.Lambda) -> None:
        self._leave()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._bind(node.name, Kind.CLASS, node)
        self._push(self.statement, node)
        self.classes.append(node)
        self.header.add(id(self._enter(ScopeKind.CLASS, node)))

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        self._leave()
        self._pop(self.statement)
        self.classes.pop()

    def visit_ListComp(self, node: cst.ListComp) -> None:
        self._enter(ScopeKind.COMPREHENSION, node)

    def leave_ListComp(self, original_node: cst.ListComp) -> None:
        self._leave()

    def visit_SetComp(self, node: cst.SetComp) -> None:
        self._enter(ScopeKind.COMPREHENSION, node)

    def leave_SetComp(self, original_node: cst.SetComp) -> None:
        self._leave()

    def visit_DictComp(self, node: cst.DictComp) -> None:
        self._enter(ScopeKind.COMPREHENSION, node)

    def leave_DictComp(self, original_node: cst.DictComp) -> None:
        self._leave()

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> None:
        self._enter(ScopeKind.COMPREHENSION, node)

    def leave_GeneratorExp(self, original_node: cst.GeneratorExp) -> None:
        self._leave()

    def _block(self, body: Sequence[cst.BaseStatement]) -> None:
        for first, second in itertools.pairwise(body):
            self.facts.following[id(first)] = second

    def visit_Module(self, node: cst.Module) -> None:
        self._block(node.body)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self.header.discard(id(self.scope))  # (a def's or class's body: its header ends)
        self._block(node.body)

    def visit_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> None:
        self.header.discard(id(self.scope))  # `def f(): return x`

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self._push(self.statement, node)

    def leave_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self._pop(self.statement)

    def _visit_loop(self, node: cst.For | cst.While) -> None:
        loop = Loop(node, self._ctx())
        for outer in self.loops:
            outer.inner.append(loop)
        self.facts.loops.append(loop)
        self._push(self.statement, node)
        self._push(self.loops, loop)

    def _leave_loop(self) -> None:
        self._pop(self.statement)
        self._pop(self.loops)

    def visit_For(self, node: cst.For) -> None:
        self._bind(node.target, Kind.LOOP, node, source=node.iter)
        self._loop_bound(node.target)
        self._visit_loop(node)

    def leave_For(self, node: cst.For) -> None:
        self._leave_loop()

    def visit_While(self, node: cst.While) -> None:
        self._visit_loop(node)

    def leave_While(self, node: cst.While) -> None:
        self._leave_loop()

    def visit_With(self, node: cst.With) -> None:
        self._push(self.statement, node)
        self._push(self.withs, node)

    def leave_With(self, node: cst.With) -> None:
        self._pop(self.statement)
        self._pop(self.withs)

    def visit_If(self, node: cst.If) -> None:
        self._push(self.statement, node)
        self._push(self.ifs, node)

    def leave_If(self, node: cst.If) -> None:
        self._pop(self.statement)
        self._pop(self.ifs)

    def visit_Try(self, node: cst.Try) -> None:
        self._push(self.statement, node)

    def leave_Try(self, node: cst.Try) -> None:
        self._pop(self.statement)

    # -- facts ---------------------------------------------------------------------------

    def visit_Call(self, node: cst.Call) -> None:
        site = CallSite(node, self._ctx(), len(self.facts.calls))
        self.facts.calls.append(site)
        for loop in self.loops:
            loop.calls.append(site)

    def visit_Return(self, node: cst.Return) -> None:
        if self.functions:
            self.facts.returns.setdefault(id(self.functions[-1]), []).append(node)

    def visit_Yield(self, node: cst.Yield) -> None:
        if self.functions:
            self.facts.yields.setdefault(id(self.functions[-1]), []).append(node)

    def visit_Name(self, node: cst.Name) -> None:  # an attribute's name too
        if not self.facts.multi_gpu_name and MULTI_GPU_NAME.match(node.value):
            self.facts.multi_gpu_name = True
        if id(node) in self.unread or self.importing:
            return
        scope = self.scope
        if self.header:
            while id(scope) in self.header and scope.parent is not None:
                scope = scope.parent
        self.read((node, scope))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.unread.add(id(node.attr))

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self.unread.add(id(node.keyword))

    # A match pattern's captures (`case [x, *rest]`, `{**rest}`) and keywords (`P(x=0)`).
    def visit_MatchAs(self, node: cst.MatchAs) -> None:
        if node.name is not None:
            self.unread.add(id(node.name))

    def visit_MatchStar(self, node: cst.MatchStar) -> None:
        if node.name is not None:
            self.unread.add(id(node.name))

    def visit_MatchMapping(self, node: cst.MatchMapping) -> None:
        if node.rest is not None:
            self.unread.add(id(node.rest))

    def visit_MatchKeywordElement(self, node: cst.MatchKeywordElement) -> None:
        self.unread.add(id(node.key))

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        value = node.value
        if not self.facts.multi_gpu_name and MULTI_GPU_NAME.match(
            value.lstrip("rRbBuU").strip("\"'")
        ):
            self.facts.multi_gpu_name = True
        if "cuda" in value:
            text = value.strip("\"'rRbBuU")
            if text == "cuda" or text.startswith("cuda:"):
                self.facts.cuda_strings.append(node)
