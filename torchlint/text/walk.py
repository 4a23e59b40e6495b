"""A fast, read-only walk of a LibCST tree for visitors that ignore whitespace.

`CSTNode.visit` rebuilds every node it passes, even for a read-only `CSTVisitor`
(libcst: "TODO: provide traversal where children are not replaced"), and it walks
every whitespace, comma and parenthesis node too; on real code that costs more than
the parse itself. `walk` calls the same `visit_<Node>` / `leave_<Node>` methods, on
the same nodes and in the same order, but skips the trivia (whitespace, comments,
commas, brackets...) and builds nothing. A visitor that wants trivia, attribute hooks
(`visit_Call_func`) or overrides `on_visit`/`on_leave` gets the plain `node.visit`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any, Optional

import libcst as cst

# Fields that only ever hold trivia nodes.
TRIVIA_FIELDS = frozenset(
    {
        "lpar",
        "rpar",
        "comma",
        "semicolon",
        "leading_lines",
        "lines_after_decorators",
        "header",
        "footer",
        "newline",
        "trailing_whitespace",
        "leading_whitespace",
        "equal",
        "colon",
        "first_colon",
        "second_colon",
        "dot",
        "relative",
        "lbracket",
        "rbracket",
        "lbrace",
        "rbrace",
        "empty_lines",
        "first_line",
        "last_line",
        "comment",
        "trailing_comma",
    }
)

# The node types found only in those fields: a visitor that handles one needs them all.
TRIVIA_TYPES = frozenset(
    {
        "AssignEqual",
        "BaseParenthesizableWhitespace",
        "Colon",
        "Comma",
        "Comment",
        "Dot",
        "EmptyLine",
        "LeftCurlyBrace",
        "LeftParen",
        "LeftSquareBracket",
        "Newline",
        "ParenthesizedWhitespace",
        "RightCurlyBrace",
        "RightParen",
        "RightSquareBracket",
        "Semicolon",
        "SimpleWhitespace",
        "TrailingWhitespace",
    }
)

# Where libcst visits children in another order than the dataclass declares them
# (tests/test_walk.py checks this table against the installed libcst).
SOURCE_ORDER: dict[str, tuple[str, ...]] = {
    "Arg": ("keyword", "value"),
    "ClassDef": ("decorators", "name", "type_parameters", "bases", "keywords", "body"),
    "CompFor": ("asynchronous", "target", "iter", "ifs", "inner_for_in"),
    "ExceptHandler": ("type", "name", "body"),
    "ExceptStarHandler": ("type", "name", "body"),
    "For": ("asynchronous", "target", "iter", "body", "orelse"),
    "FunctionDef": (
        "decorators",
        "asynchronous",
        "name",
        "type_parameters",
        "params",
        "returns",
        "body",
    ),
    "IfExp": ("body", "test", "orelse"),
    "MatchCase": ("pattern", "guard", "body"),
    "Parameters": (
        "posonly_params",
        "posonly_ind",
        "params",
        "star_arg",
        "kwonly_params",
        "star_kwarg",
    ),
    "TypeAlias": ("name", "type_parameters", "value"),
    "With": ("asynchronous", "items", "body"),
}

# Fields holding plain values (str, bool) on every node type that has them.
SCALAR_FIELDS = frozenset(
    {"star", "indent", "start", "end", "conversion", "encoding", "default_indent"}
    | {"default_newline", "has_trailing_newline"}
)

_STRINGS = (str, Optional[str])  # noqa: UP045 (libcst annotates with typing.Optional)

_fields_cache: dict[type, tuple[str, ...]] = {}
# Whether a class is a libcst node: `isinstance(x, cst.CSTNode)` goes through the ABC
# machinery (a third of a walk's time); a dict of the classes met is read instead.
_is_node: dict[type, bool] = {}


def is_node(value: object) -> bool:
    """`isinstance(value, cst.CSTNode)`, at the cost of a dict lookup."""
    cls = value.__class__
    found = _is_node.get(cls)
    if found is None:
        found = _is_node[cls] = issubclass(cls, cst.CSTNode)
    return found


def child_fields(cls: type[cst.CSTNode]) -> tuple[str, ...]:
    """The fields of `cls` that may hold non-trivia child nodes, in visiting order."""
    found = _fields_cache.get(cls)
    if found is None:
        names = [
            f.name
            for f in dataclasses.fields(cls)
            if f.name not in TRIVIA_FIELDS
            and f.name not in SCALAR_FIELDS
            and not f.name.startswith("whitespace")
            and f.type not in _STRINGS  # `value` of names and literals
        ]
        order = SOURCE_ORDER.get(cls.__name__)
        if order is not None:
            names = [n for n in order if n in names] + [n for n in names if n not in order]
        found = _fields_cache[cls] = tuple(names)
    return found


def children(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The child nodes that are not trivia, in source order. (libcst's `node.children`
    rebuilds the node to find them: far too slow for searching subtrees.)"""
    for name in child_fields(type(node)):
        child = getattr(node, name)
        if is_node(child):
            yield child
        elif isinstance(child, (tuple, list)):
            yield from (c for c in child if is_node(c))


def descendants(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """`node` and every node below it."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(children(current))


def _own_hooks(kind: type) -> set[str]:
    """`visit_*`/`leave_*` methods defined by the visitor, not libcst's no-op stubs."""
    names: set[str] = set()
    for klass in kind.__mro__:
        if klass.__module__.startswith("libcst."):
            break
        names.update(a for a in vars(klass) if a.startswith(("visit_", "leave_")))
    return names


def _walkable(kind: type[cst.CSTVisitor], hooks: set[str]) -> bool:
    """Can `walk` serve this visitor (no trivia, attribute hooks or generic overrides)?"""
    if kind.on_visit is not cst.CSTVisitor.on_visit or kind.on_leave is not cst.CSTVisitor.on_leave:
        return False
    for attr in hooks:
        node = attr.split("_", 1)[1]
        if "_" in node or node in TRIVIA_TYPES:
            return False
    return True


_Entry = tuple[Callable[[Any], Any] | None, Callable[[Any], Any] | None, tuple[str, ...] | None]
# A node of no child fields and no `leave_` hook is a leaf: its `visit_` hook, if any,
# is called without walking it (fields None). Nothing is done at a leaf without a hook,
# or at a value that is no node (None, a string).
_NOTHING: _Entry = (None, None, None)


class _Walk:
    """One walk: the visitor's hooks of each class met, looked up once. (A method, not a
    closure calling itself: that closure would be a reference cycle holding the visitor,
    and all it recorded, until the cyclic collector came by.)"""

    __slots__ = ("hooks", "table", "visitor")

    def __init__(self, visitor: cst.CSTVisitor, hooks: set[str]) -> None:
        self.visitor = visitor
        self.hooks = hooks
        self.table: dict[type, _Entry] = {}

    def entry(self, cls: type) -> _Entry:
        result = _NOTHING
        if issubclass(cls, cst.CSTNode):
            name, hooks = cls.__name__, self.hooks
            visit = getattr(self.visitor, f"visit_{name}") if f"visit_{name}" in hooks else None
            leave = getattr(self.visitor, f"leave_{name}") if f"leave_{name}" in hooks else None
            fields = child_fields(cls)
            if leave is None and not fields:
                result = _NOTHING if visit is None else (visit, None, None)  # (a leaf)
            else:
                result = (visit, leave, fields)
        self.table[cls] = result
        return result

    def go(self, n: cst.CSTNode, entry: _Entry) -> None:
        visit, leave, fields = entry
        if visit is None or visit(n) is not False:
            table = self.table
            for f in fields or ():  # (a leaf walked from: `walk` of a Name)
                child = getattr(n, f)
                kind = child.__class__
                if kind is tuple or kind is list:
                    for c in child:
                        found = table.get(c.__class__) or self.entry(c.__class__)
                        if found[2] is not None:
                            self.go(c, found)
                        elif found[0] is not None:
                            found[0](c)
                else:
                    found = table.get(kind) or self.entry(kind)
                    if found[2] is not None:
                        self.go(child, found)
                    elif found[0] is not None:
                        found[0](child)
        if leave is not None:
            leave(n)


def walk(node: cst.CSTNode, visitor: cst.CSTVisitor) -> None:
    """Visit `node` and its descendants as `node.visit(visitor)` would, minus trivia."""
    hooks = _own_hooks(type(visitor))
    if not _walkable(type(visitor), hooks):
        node.visit(visitor)
        return
    walking = _Walk(visitor, hooks)
    walking.go(node, walking.entry(type(node)))
