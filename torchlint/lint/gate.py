"""The fixed program is checked before it is written.

A pass of fixes may not make the program read a name where nothing binds it yet (in the
order it runs: module order, a notebook's cells in order, imports inside `try:`), nor
indent a line with tabs and spaces, nor stop compiling. When the pass does, the fixes
that may be the cause (those that mention a name now unbound, else all of them) are
tried one at a time on top of the others: a fix that fails is repaired where it can be
(the import its code needs added to the import block, which runs before it, where the
file imports the name plainly further down; an import statement it removes kept) and
otherwise left out, with the reason, which its finding then gives.

Only fix and diff runs pay for this: CPython parses and compiles the new text of each
pass (once, unless a fix is refused), and a walk of the statements that mention the
names the fixes write or remove (only those can become unbound) counts their reads.
"""

from __future__ import annotations

import ast
import warnings
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property

import libcst as cst

from torchlint.fixes import (
    Fix,
    Import,
    InsertAfter,
    InsertBefore,
    Remove,
    Replace,
    apply_fixes,
    module_bindings,
    names_in,
    statements,
)
from torchlint.lint.undefined import PREDEFINED, mixed_indentation, undefined_in


@dataclass(frozen=True)
class Problems:
    """What a fixed text has that the text before it had not."""

    names: frozenset[str] = frozenset()  # read where nothing binds them, more often
    mixed: bool = False  # more lines indented with tabs and spaces
    unparsable: bool = False  # CPython no longer compiles it

    def __bool__(self) -> bool:
        return bool(self.names) or self.mixed or self.unparsable

    @property
    def reason(self) -> str:
        if self.unparsable:
            return "the fixed code would not compile"
        if self.mixed:
            return "it would indent a line with tabs and spaces"
        names = ", ".join(f"`{n}`" for n in sorted(self.names))
        return f"it would read {names} before anything binds it"


class Gate:
    """A text, to compare fixed texts with: its tree (None where this Python cannot
    compile it), how often it reads names unbound, its mixed-indentation lines. Each is
    computed on first use: most files get no fix."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._counts: dict[frozenset[str], Counter[str]] = {}
        self._last: tuple[str, Gate] | None = None

    @cached_property
    def tree(self) -> ast.Module | None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarnings are the user's compiler's to print
            try:
                tree = ast.parse(self.text)
                # What CPython's parser accepts but its compiler refuses (a repeated
                # keyword argument) is refused too.
                compile(tree, "<fixed>", "exec", dont_inherit=True)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                return None
        return tree

    @cached_property
    def mixed(self) -> int:
        return mixed_indentation(self.text)

    def unbound(self, names: frozenset[str]) -> Counter[str]:
        """How often each of `names` is read unbound (the tree must exist)."""
        if names not in self._counts:
            assert self.tree is not None
            found = undefined_in(self.tree, self.text, names)
            self._counts[names] = Counter(name for name, _ in found)
        return self._counts[names]

    def problems(self, text: str, names: frozenset[str]) -> Problems:
        """What `text` has that this text had not, of the names `names` (those the fixes
        that made it write or remove: only they can become unbound)."""
        after = Gate(text)
        self._last = (text, after)
        if self.tree is None:  # syntax newer than this Python: only libcst judges it
            return Problems(mixed=after.mixed > self.mixed)
        if after.tree is None:
            return Problems(unparsable=True)
        added = frozenset(after.unbound(names) - self.unbound(names))
        return Problems(added, after.mixed > self.mixed)

    def then(self, text: str) -> Gate:
        """The gate for the next pass, from `text` (checked last, usually)."""
        if self._last is not None and self._last[0] == text:
            return self._last[1]
        return Gate(text)


@dataclass
class Checked:
    text: str
    applied: list[tuple[Fix, Fix]]  # (as proposed, as applied: repaired, perhaps)
    refused: list[tuple[Fix, str]]  # and why


def apply_checked(module: cst.Module, fixes: Sequence[Fix], gate: Gate) -> Checked:
    """Apply compatible `fixes` to `module` (whose code is `gate.text`), leaving out or
    repairing those whose result `gate` finds problems with."""
    names = frozenset(set().union(*map(mentions, fixes)))
    text = apply_fixes(module, fixes)
    found = gate.problems(text, names)
    if not found:
        return Checked(text, [(f, f) for f in fixes], [])
    suspects = list(fixes)
    if found.names and not (found.mixed or found.unparsable):
        suspects = [f for f in fixes if mentions(f) & found.names] or suspects
    kept = [f for f in fixes if not any(f is s for s in suspects)]
    applied: list[tuple[Fix, Fix]] = [(f, f) for f in kept]
    text = apply_fixes(module, kept) if kept else gate.text
    if kept and gate.problems(text, names):  # the suspects were not all: try every fix alone
        suspects, applied, text = list(fixes), [], gate.text
    refused: list[tuple[Fix, str]] = []
    for proposed in suspects:
        done = [a for _, a in applied]
        trial = apply_fixes(module, [*done, proposed])
        problems = gate.problems(trial, names)
        fixed = proposed
        if problems and problems.names and not (problems.mixed or problems.unparsable):
            repaired = _repaired(module, proposed, problems.names)
            if repaired is not None:
                trial = apply_fixes(module, [*done, repaired])
                if not gate.problems(trial, names | mentions(repaired)):
                    problems, fixed = Problems(), repaired
        if problems:
            refused.append((proposed, problems.reason))
        else:
            applied.append((proposed, fixed))
            text = trial
    gate.problems(text, names)  # the last text checked is the one kept
    return Checked(text, applied, refused)


def mentions(fix: Fix) -> set[str]:
    """The names a fix may leave unbound somewhere: those its new code reads more often
    than the code it replaces, and those the statements it replaces or removes bind.
    Builtins and constants never are."""
    old: list[cst.CSTNode] = [e.node for e in fix.edits if isinstance(e, (Replace, Remove))]
    new: list[cst.CSTNode] = []
    for edit in fix.edits:
        if isinstance(edit, Replace):
            new.append(edit.new)
        elif isinstance(edit, (InsertBefore, InsertAfter)):
            new += edit.statements
    for definition in fix.definitions:
        new += statements(definition.code)
    found = set(names_in(new) - names_in(old))
    found.update(name for node in old for name in module_bindings(node))
    return found - PREDEFINED


def _repaired(module: cst.Module, fix: Fix, names: frozenset[str]) -> Fix | None:
    """`fix` keeping the import statements it removes that bind `names`, and importing
    the other names early where the module imports them plainly further down; None when
    some name is neither."""
    dropped = [e for e in fix.edits if isinstance(e, Remove) and module_bindings(e.node) & names]
    edits = tuple(e for e in fix.edits if not any(e is d for d in dropped))
    kept = set().union(*(module_bindings(e.node) for e in dropped))
    plain = _plain_imports(module)
    missing = names - kept
    if not edits or not missing <= set(plain):
        return None
    early = tuple(replace(plain[name], early=True) for name in sorted(missing))
    return replace(fix, edits=edits, imports=(*fix.imports, *early))


def _plain_imports(module: cst.Module) -> dict[str, Import]:
    """Names bound by a top-level `import x` or `from m import x` (no alias, not in a
    block: one in `try:` may fail where it runs first), and the import of each."""
    found: dict[str, Import] = {}
    for stmt in module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, cst.Import):
                for alias in small.names:
                    if alias.asname is None:
                        top = cst.Module([]).code_for_node(alias.name).split(".")[0]
                        found.setdefault(top, Import(top))
            elif (
                isinstance(small, cst.ImportFrom)
                and small.module is not None
                and not small.relative
                and not isinstance(small.names, cst.ImportStar)
            ):
                base = cst.Module([]).code_for_node(small.module)
                for alias in small.names:
                    if alias.asname is None and isinstance(alias.name, cst.Name):
                        found.setdefault(alias.name.value, Import(base, alias.name.value))
    return found


def later(first: Counter[str], applied: Iterable[str]) -> list[str]:
    """The codes of applied fixes beyond the fixable findings first reported, by code:
    findings that other fixes brought about."""
    return sorted((Counter(applied) - first).elements())
