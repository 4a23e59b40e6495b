"""Fixes: CST edits with an applicability, applied together, re-linted to a fixpoint.

A rule describes *what* changes (replace this node, insert these statements before
that one, add this import); this package decides *whether* the edits of several fixes
can go into one pass (their source spans must not overlap) and performs the pass.

model.py     what a fix is: Fix, its edits, imports, definitions, applicability
plan.py      which fixes can share one pass
apply.py     applying a pass to the tree (what a fix adds indented as the file is)
imports.py   where added imports and definitions go at module level
names.py     the names code reads and binds
render.py    a fix's edits as text
"""

from torchlint.fixes.apply import apply_fixes
from torchlint.fixes.model import (
    Applicability,
    Definition,
    Edit,
    Fix,
    FixSafety,
    Import,
    InsertAfter,
    InsertBefore,
    Remove,
    Replace,
    Statement,
    fix,
    statements,
)
from torchlint.fixes.names import module_bindings, names_in
from torchlint.fixes.plan import select_compatible
from torchlint.fixes.render import apply_line_edits, line_edits, text_edits

__all__ = [
    "Applicability",
    "Definition",
    "Edit",
    "Fix",
    "FixSafety",
    "Import",
    "InsertAfter",
    "InsertBefore",
    "Remove",
    "Replace",
    "Statement",
    "apply_fixes",
    "apply_line_edits",
    "fix",
    "line_edits",
    "module_bindings",
    "names_in",
    "select_compatible",
    "statements",
    "text_edits",
]
