"""The names code reads and binds, as the placement of added code and the gate of a
fix pass need them."""

from __future__ import annotations

import builtins
from collections import Counter
from collections.abc import Iterable, Sequence

import libcst as cst

from torchlint.fixes.model import Statement
from torchlint.text.walk import children


def top_level_bindings(
    body: Sequence[cst.BaseStatement],
) -> tuple[set[tuple[str, str | None]], set[str]]:
    """Top-level imports as (module, name) pairs, and every top-level bound name."""
    imported: set[tuple[str, str | None]] = set()
    bound: set[str] = set()
    for stmt in body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                bound.add(stmt.name.value)
            continue
        for small in stmt.body:
            if isinstance(small, cst.Import):
                for alias in small.names:
                    dotted = dotted_name(alias.name)
                    if alias.asname is None:
                        imported.add((dotted, None))
                        bound.add(dotted.split(".")[0])
                    elif isinstance(alias.asname.name, cst.Name):
                        bound.add(alias.asname.name.value)
            elif (
                isinstance(small, cst.ImportFrom)
                and small.module is not None
                and not small.relative
            ):
                if isinstance(small.names, cst.ImportStar):
                    continue
                for alias in small.names:
                    name = dotted_name(alias.name)
                    if alias.asname is None:
                        imported.add((dotted_name(small.module), name))
                        bound.add(name)
                    elif isinstance(alias.asname.name, cst.Name):
                        bound.add(alias.asname.name.value)
            elif isinstance(small, (cst.Assign, cst.AnnAssign)):
                targets = small.targets if isinstance(small, cst.Assign) else [small]
                for t in targets:
                    if isinstance(t.target, cst.Name):
                        bound.add(t.target.value)
    return imported, bound


def dotted_name(node: cst.BaseExpression) -> str:
    """`a.b.c` for a name or a chain of attributes of one ("" for another expression)."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{dotted_name(node.value)}.{node.attr.value}"
    return ""


def names_in(nodes: Iterable[cst.CSTNode]) -> Counter[str]:
    """The names code reads or binds, with how often (not attribute names, nor keywords
    of arguments)."""
    found: Counter[str] = Counter()
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Name):
            found[node.value] += 1
        elif isinstance(node, (cst.Attribute, cst.Arg)):
            stack.append(node.value)
        else:
            stack.extend(children(node))
    return found


def _bound(target: cst.BaseExpression) -> set[str]:
    """The names an assignment target binds (`a.b = ...` binds none)."""
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return {n for e in target.elements for n in _bound(e.value)}
    return set()


def module_bindings(stmt: cst.CSTNode) -> set[str]:
    """The names a top-level statement binds at module level: in its blocks too (a
    `try:` import), not in the functions and classes it defines."""
    out: set[str] = set()
    stack = [stmt]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            out.add(node.name.value)
        elif isinstance(node, cst.Import | cst.ImportFrom):
            if not isinstance(node.names, cst.ImportStar):
                out.update(
                    alias.asname.name.value
                    if alias.asname is not None and isinstance(alias.asname.name, cst.Name)
                    else dotted_name(alias.name).split(".")[0]
                    for alias in node.names
                )
        elif isinstance(node, cst.Assign):
            out.update(n for t in node.targets for n in _bound(t.target))
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign)):
            out |= _bound(node.target)
        elif isinstance(node, _BLOCKS):
            if isinstance(node, cst.For):
                out |= _bound(node.target)
            elif isinstance(node, cst.With):
                out.update(n for i in node.items if i.asname for n in _bound(i.asname.name))
            stack.extend(children(node))
    return out


_BLOCKS = (
    cst.SimpleStatementLine,
    cst.BaseCompoundStatement,
    cst.BaseSuite,
    cst.ExceptHandler,
    cst.Else,
    cst.Finally,
)
_BUILTINS = frozenset(dir(builtins))


def after_bindings(body: Sequence[Statement], names: set[str]) -> int:
    """The index after the first top-level statements binding each of `names` (0 when
    the module binds none of them)."""
    names = set(names) - _BUILTINS
    index = 0
    for i, stmt in enumerate(body):
        if not names:
            break
        found = module_bindings(stmt) & names
        if found:
            names -= found
            index = i + 1
    return index
