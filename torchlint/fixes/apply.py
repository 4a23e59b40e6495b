"""Applying non-overlapping fixes to a module in one pass."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import libcst as cst

from torchlint.fixes.imports import add_module_level
from torchlint.fixes.model import Edit, Fix, InsertAfter, InsertBefore, Remove, Replace
from torchlint.text.walk import child_fields, children, descendants


class Applier:
    """Rebuilds only the nodes on the paths from the module to the edited nodes (libcst's
    transformer rebuilds every node of the tree, which dominated the cost of a fix pass)."""

    def __init__(self, fixes: Sequence[Fix]) -> None:
        self.replace: dict[int, cst.CSTNode] = {}
        self.remove: set[int] = set()
        self.before: dict[int, list[cst.BaseStatement]] = {}
        self.after: dict[int, list[cst.BaseStatement]] = {}
        for f in fixes:
            for edit in f.edits:
                key = id(edit.node)
                if isinstance(edit, Replace):
                    self.replace[key] = edit.new
                elif isinstance(edit, Remove):
                    self.remove.add(key)
                elif isinstance(edit, InsertBefore):
                    self.before.setdefault(key, []).extend(edit.statements)
                else:
                    self.after.setdefault(key, []).extend(edit.statements)
        self.targets = {*self.replace, *self.remove, *self.before, *self.after}
        self.on_path: set[int] = set()  # nodes with a target inside (the targets included)

    def __call__(self, module: cst.Module) -> cst.Module:
        new = self.rebuild(module)
        assert isinstance(new, cst.Module)
        return new

    def rebuild(self, root: cst.CSTNode) -> cst.CSTNode:
        """`root` with the edits that fall inside it applied."""
        self.on_path = set()
        self._find(root, [])
        return self._rebuild(root)

    def _find(self, node: cst.CSTNode, stack: list[cst.CSTNode]) -> None:
        """The nodes on the path from the root to a target (`stack`: the path to `node`)."""
        if id(node) in self.targets:
            self.on_path.update(map(id, stack))
            self.on_path.add(id(node))
        stack.append(node)
        for child in children(node):
            self._find(child, stack)
        stack.pop()

    def _rebuild(self, node: cst.CSTNode) -> cst.CSTNode:
        replaced = self.replace.get(id(node))
        if replaced is not None:
            return replaced
        if id(node) not in self.on_path:
            return node
        changes: dict[str, object] = {}
        for name in child_fields(type(node)):
            value = getattr(node, name)
            if isinstance(value, cst.CSTNode):
                new = self._rebuild(value)
                if new is not value:
                    changes[name] = new
            elif isinstance(value, (tuple, list)):
                items = [self._rebuild(v) if isinstance(v, cst.CSTNode) else v for v in value]
                if any(a is not b for a, b in zip(items, value, strict=True)):
                    changes[name] = items
        if isinstance(node, (cst.Module, cst.IndentedBlock)):
            body = changes.get("body", node.body)
            assert isinstance(body, (tuple, list))
            changes["body"] = self._body(node.body, body)
        return node.with_changes(**changes) if changes else node

    def _body(
        self, original: Sequence[cst.BaseStatement], updated: Sequence[cst.BaseStatement]
    ) -> list[cst.BaseStatement]:
        body: list[cst.BaseStatement] = []
        blank = 0  # blank lines above removed statements, kept above the next one
        for orig, upd in zip(original, updated, strict=True):
            key = id(orig)
            body.extend(self.before.get(key, ()))
            if key in self.remove:
                blank = max(blank, blank_lines_above(orig))
            else:
                missing = blank - blank_lines_above(upd) if body else 0
                if missing > 0:
                    lines = [cst.EmptyLine()] * missing + list(_leading_lines(upd))
                    upd = upd.with_changes(leading_lines=lines)
                body.append(upd)
                blank = 0
            body.extend(self.after.get(key, ()))
        if not body and original:
            body.append(cst.SimpleStatementLine([cst.Pass()]))
        return body


def _leading_lines(stmt: cst.BaseStatement) -> Sequence[cst.EmptyLine]:
    # every statement node has them; BaseStatement does not declare them
    return getattr(stmt, "leading_lines", ())


def blank_lines_above(stmt: cst.BaseStatement) -> int:
    """The blank lines that open a statement's leading lines (those above its comments)."""
    count = 0
    for line in _leading_lines(stmt):
        if line.comment is not None:
            break
        count += 1
    return count


class _Restyle(cst.CSTTransformer):
    """Line breaks a fix adds inside brackets, indented with the module's unit instead of
    four spaces (tabs stay tabs); those it keeps from the original are left alone."""

    def __init__(self, unit: str, kept: set[int]) -> None:
        super().__init__()
        self.unit = unit
        self.kept = kept

    def leave_ParenthesizedWhitespace(
        self, original_node: cst.ParenthesizedWhitespace, updated_node: cst.ParenthesizedWhitespace
    ) -> cst.ParenthesizedWhitespace:
        text = updated_node.last_line.value
        units = (len(text) - len(text.lstrip(" "))) // 4
        if id(original_node) in self.kept or not units:
            return updated_node
        new = self.unit * units + text[4 * units :]
        return updated_node.with_changes(last_line=cst.SimpleWhitespace(new))


def in_style(module: cst.Module, fix: Fix) -> Fix:
    """`fix` with what it adds indented as the module is (see `_Restyle`)."""
    unit = module.default_indent
    if unit == "    ":
        return fix
    edits: list[Edit] = []
    for edit in fix.edits:
        if isinstance(edit, Replace):
            new = edit.new.visit(_Restyle(unit, {id(n) for n in descendants(edit.node)}))
            assert isinstance(new, cst.CSTNode)
            edits.append(replace(edit, new=new))
        elif isinstance(edit, (InsertBefore, InsertAfter)):
            restyle = _Restyle(unit, set())
            added = [s.visit(restyle) for s in edit.statements]
            assert all(isinstance(s, cst.BaseStatement) for s in added)
            edits.append(replace(edit, statements=tuple(added)))  # type: ignore[arg-type]
        else:
            edits.append(edit)
    return replace(fix, edits=tuple(edits))


def apply_fixes(module: cst.Module, fixes: Sequence[Fix]) -> str:
    """Apply non-overlapping fixes in one pass and return the new source code."""
    new = Applier([in_style(module, f) for f in fixes])(module)
    new = add_module_level(
        new,
        [imp for f in fixes for imp in f.imports],
        [d for f in fixes for d in f.definitions],
    )
    return new.code
