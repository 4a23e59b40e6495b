"""Names a program reads where nothing binds them, in the order it runs; and lines whose
indentation mixes tabs and spaces. The fix engine compares a text before and after a
fix with these (a fix must add neither), so they err on the side of "bound".

Module-level code runs top to bottom (a notebook's program is its cells in order): a
name it reads must be bound by a statement that ran before, in any branch (`try:`
imports, `if` imports, loops) or by a `global` statement anywhere. Function and lambda
bodies run later, when called: they see every module-level binding, as pyflakes
assumes. Class bodies run in order where the class is defined. A star import binds
every name after it. `del` and `except NameError:` are not followed.
"""

from __future__ import annotations

import ast
import bisect
import builtins
import re
import sys
import warnings
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field

# Module attributes, and what IPython defines in a notebook's namespace.
PREDEFINED = frozenset(
    {
        *dir(builtins),
        "__annotations__",
        "__builtins__",
        "__file__",
        "__loader__",
        "__path__",
        "__spec__",
        "get_ipython",
        "display",
        "In",
        "Out",
    }
)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


@dataclass
class _Scope:
    kind: str  # "module", "class", "function", "comprehension"
    parent: _Scope | None
    bound: set[str] = field(default_factory=set)
    star: bool = False  # a star import ran: every name is bound

    def binds(self, name: str) -> bool:
        return self.star or name in self.bound


class _Checker:
    def __init__(self, lines: _Lines | None) -> None:
        self.undefined: list[tuple[str, int]] = []
        self.deferred: list[tuple[ast.AST, _Scope]] = []
        self.globals: set[str] = set()
        self.lines = lines

    # -- lookups ------------------------------------------------------------------

    def lookup(self, name: str, scope: _Scope) -> bool:
        current: _Scope | None = scope
        first = True
        while current is not None:
            # A class body's names are visible to itself only, never to nested scopes.
            if (first or current.kind != "class") and current.binds(name):
                return True
            first = False
            current = current.parent
        return name in PREDEFINED or name in self.globals

    def load(self, name: str, line: int, scope: _Scope) -> None:
        if not self.lookup(name, scope):
            self.undefined.append((name, line))

    # -- expressions (iteratively: an expression may nest deeper than the stack) --

    def expr(self, root: ast.AST | None, scope: _Scope) -> None:
        if root is None:
            return
        stack: list[tuple[ast.AST, _Scope]] = [(root, scope)]
        while stack:
            node, where = stack.pop()
            if isinstance(node, ast.Name):
                if isinstance(node.ctx, ast.Load):
                    self.load(node.id, node.lineno, where)
                else:
                    where.bound.add(node.id)
            elif isinstance(node, ast.NamedExpr):
                # `(x := v)` binds in the nearest scope that is not a comprehension.
                target = where
                while target.kind == "comprehension" and target.parent is not None:
                    target = target.parent
                target.bound.add(node.target.id)
                stack.append((node.value, where))
            elif isinstance(node, ast.Lambda):
                stack.extend((default, where) for default in _defaults(node.args))
                self.deferred.append((node, where))
            elif isinstance(node, _COMPREHENSIONS):
                self._comprehension(node, where)
            else:
                children = list(ast.iter_child_nodes(node))
                stack.extend((child, where) for child in reversed(children))

    def _comprehension(
        self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp, scope: _Scope
    ) -> None:
        inner = _Scope("comprehension", scope)
        for i, generator in enumerate(node.generators):
            self.expr(generator.iter, scope if i == 0 else inner)
            self._bind_target(generator.target, inner)
            for condition in generator.ifs:
                self.expr(condition, inner)
        if isinstance(node, ast.DictComp):
            self.expr(node.key, inner)
            self.expr(node.value, inner)
        else:
            self.expr(node.elt, inner)

    def _bind_target(self, target: ast.AST, scope: _Scope) -> None:
        """An assignment target: names bound, what subscripts and attributes read loaded."""
        self.expr(target, scope)

    # -- statements -----------------------------------------------------------------

    def body(self, statements: Iterable[ast.stmt], scope: _Scope) -> None:
        for statement in statements:
            if self.relevant(statement):
                self.statement(statement, scope)

    def relevant(self, statement: ast.stmt) -> bool:
        """Whether the statement may read or bind a name being counted (a star import
        binds them all)."""
        if self.lines is None or self.lines.mention(statement):
            return True
        return isinstance(statement, ast.ImportFrom) and statement.names[0].name == "*"

    def statement(self, node: ast.stmt, scope: _Scope) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for item in (*node.decorator_list, *_defaults(node.args)):
                self.expr(item, scope)
            scope.bound.add(node.name)
            self.deferred.append((node, scope))
        elif isinstance(node, ast.ClassDef):
            for item in (*node.decorator_list, *node.bases, *(k.value for k in node.keywords)):
                self.expr(item, scope)
            self.body(node.body, _Scope("class", scope))
            scope.bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    scope.star = True
                else:
                    scope.bound.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.Assign):
            self.expr(node.value, scope)
            for target in node.targets:
                self._bind_target(target, scope)
        elif isinstance(node, ast.AugAssign):
            self.expr(node.value, scope)
            if isinstance(node.target, ast.Name):
                self.load(node.target.id, node.lineno, scope)
            self._bind_target(node.target, scope)
        elif isinstance(node, ast.AnnAssign):
            self.expr(node.value, scope)
            self._bind_target(node.target, scope)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            self.expr(node.iter, scope)
            self._bind_target(node.target, scope)
            self.body(node.body, scope)
            self.body(node.orelse, scope)
        elif isinstance(node, (ast.While, ast.If)):
            self.expr(node.test, scope)
            self.body(node.body, scope)
            self.body(node.orelse, scope)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for with_item in node.items:
                self.expr(with_item.context_expr, scope)
                if with_item.optional_vars is not None:
                    self._bind_target(with_item.optional_vars, scope)
            self.body(node.body, scope)
        elif isinstance(node, ast.Try) or (
            sys.version_info >= (3, 11) and isinstance(node, ast.TryStar)
        ):
            self._try(node, scope)
        elif isinstance(node, ast.Match):
            self.expr(node.subject, scope)
            for case in node.cases:
                for sub in ast.walk(case.pattern):
                    if isinstance(sub, (ast.MatchAs, ast.MatchStar)) and sub.name:
                        scope.bound.add(sub.name)
                    elif isinstance(sub, ast.MatchMapping):
                        scope.bound.update([sub.rest] if sub.rest else [])
                        for key in sub.keys:
                            self.expr(key, scope)
                    elif isinstance(sub, ast.MatchValue):
                        self.expr(sub.value, scope)
                    elif isinstance(sub, ast.MatchClass):
                        self.expr(sub.cls, scope)
                self.expr(case.guard, scope)
                self.body(case.body, scope)
        elif isinstance(node, (ast.Global, ast.Nonlocal, ast.Delete)):
            pass
        else:  # Expr, Return, Raise, Assert, Pass, Break, Continue...
            for child in ast.iter_child_nodes(node):
                self.expr(child, scope)

    def _try(self, node: ast.Try | ast.TryStar, scope: _Scope) -> None:
        self.body(node.body, scope)
        for handler in node.handlers:
            self.expr(handler.type, scope)
            if handler.name:
                scope.bound.add(handler.name)
            self.body(handler.body, scope)
        self.body(node.orelse, scope)
        self.body(node.finalbody, scope)

    def function(self, node: ast.AST, parent: _Scope) -> None:
        """A function or lambda body, run once every module-level binding exists."""
        assert isinstance(node, _FUNCTIONS)
        scope = _Scope("function", parent, set(_locals(node)))
        if isinstance(node, ast.Lambda):
            self.expr(node.body, scope)
        else:
            self.body(node.body, scope)


def _defaults(args: ast.arguments) -> list[ast.expr]:
    return [*args.defaults, *(d for d in args.kw_defaults if d is not None)]


def _parameters(args: ast.arguments) -> Iterator[str]:
    for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
        if arg is not None:
            yield arg.arg


def _locals(function: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> Iterator[str]:
    """Every name a function binds anywhere in its body (it is local throughout)."""
    yield from _parameters(function.args)
    if isinstance(function, ast.Lambda):
        return
    yield "__class__"  # what `super()` reads in a method
    stack: list[ast.AST] = list(function.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            yield node.id
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.name
            stack.extend(node.decorator_list)
            if not isinstance(node, ast.ClassDef):
                stack.extend(node.args.defaults)
            continue  # its body is its own scope
        elif isinstance(node, ast.Lambda):
            continue
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            yield from (a.asname or a.name.split(".")[0] for a in node.names)
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            yield node.name
        elif isinstance(node, ast.MatchMapping) and node.rest:
            yield node.rest
        stack.extend(ast.iter_child_nodes(node))


class _Lines:
    """The lines of a text that mention any of some names: a statement that spans none of
    them cannot read or bind those names, and is not walked."""

    def __init__(self, source: str, names: Collection[str]) -> None:
        starts = [0, *(m.end() for m in _NEWLINE.finditer(source))]
        words = "|".join(map(re.escape, sorted(names)))
        found = re.finditer(rf"(?<!\w)(?:{words})(?!\w)", source) if names else ()
        self.hits = sorted({bisect.bisect_right(starts, m.start()) for m in found})

    def mention(self, node: ast.stmt) -> bool:
        i = bisect.bisect_left(self.hits, node.lineno)
        return i < len(self.hits) and self.hits[i] <= (node.end_lineno or node.lineno)


_NEWLINE = re.compile(r"\r\n?|\n")  # the line ends CPython's tokenizer counts


def undefined_names(
    source: str, only: Collection[str] | None = None
) -> list[tuple[str, int]] | None:
    """(name, line) of each read of a name where nothing binds it, in the order the
    program runs (of the names in `only`, if given: the walk stops once they are all
    bound at module level, and skips statements that do not mention them); None for text
    this Python cannot parse."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return undefined_in(tree, source, only)


def undefined_in(
    tree: ast.Module, source: str = "", only: Collection[str] | None = None
) -> list[tuple[str, int]]:
    """`undefined_names` of a parsed module (and its `source`, if `only` is given). With
    `only`, the statements that do not mention those names are skipped: the walk costs
    what the names' statements hold, not the file."""
    checker = _Checker(_Lines(source, only) if only is not None else None)
    checker.globals = {
        name
        for statement in tree.body
        if checker.relevant(statement)
        for n in ast.walk(statement)
        if isinstance(n, ast.Global)
        for name in n.names
    }
    module = _Scope("module", None)
    pending = None if only is None else set(only) - checker.globals
    for statement in tree.body:
        if pending is not None:
            pending -= module.bound
            if not pending or module.star:
                break  # every name asked about is bound: no later statement reads it unbound
        if checker.relevant(statement):
            checker.statement(statement, module)
    if pending is not None and (module.star or not pending - module.bound):
        checker.deferred.clear()  # function bodies, run later, see those bindings too
    while checker.deferred:
        node, parent = checker.deferred.pop()
        checker.function(node, parent)
    found = checker.undefined
    return found if only is None else [(name, line) for name, line in found if name in only]


def mixed_indentation(source: str) -> int:
    """How many lines start with both tabs and spaces."""
    count = 0
    for line in source.splitlines():
        indent = line[: len(line) - len(line.lstrip(" \t"))]
        if " " in indent and "\t" in indent:
            count += 1
    return count
